"""Host time of the pieces of a W1 call, each timed alone: the launches of one local job
with CIGARs (the fast path's marshalling, packing and driver call apart) and the cuDF
path's other steps (string buffers, free memory, small reads, CuPy operations, the frame's
constructor against pylibcudf columns).

``python -m benchmarks.investigations.host_pieces [--repeat 300]`` on a GPU machine (cuDF
installed). Medians of ``--repeat`` calls each, microseconds. The launches are those one
W1 call makes, captured and then repeated on their own (kernels that count or place the
length sort's keys are not repeated: they would write past their buffers on counts
already summed); a repeated fill or walk queues its kernel each time, which the device
runs after the loop. Compare figures of one lease only (BENCHMARKS.md: the host's speed
changes between leases).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks.harness import W1_OPTIONS, add_data_dir, w1_pairs

#: Kernels whose launches are not repeated (see the module's note).
NOT_REPEATED = ("count_keys", "scan_counts", "place_keys")


def median_us(call, repeat: int) -> float:
    """Median host time of ``call()`` over ``repeat`` calls (after one), microseconds."""
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def launches(align, repeat: int) -> None:
    """Capture the launches of one call of ``align``, then time each one's pieces."""
    from numba import cuda

    from gpualign_df.gpu import launch as fast
    from gpualign_df.gpu.device import kernel_view

    captured = []
    original = fast.launch

    def spy(kernel, blocks, threads, arguments, view, stream=None, shared_bytes=0,
            kept=False):
        captured.append((kernel, blocks, threads, arguments, stream, shared_bytes, kept))
        return original(kernel, blocks, threads, arguments, view, stream, shared_bytes, kept)

    fast.launch = spy
    try:
        align()
    finally:
        fast.launch = original
    cuda.synchronize()
    driver = fast._driver()
    print(f"{'kernel':24s} {'args':>4s} {'marshal':>8s} {'pack':>6s} {'driver':>7s} "
          f"{'launch':>7s}  (us)")
    for kernel, blocks, threads, arguments, stream, shared_bytes, kept in captured:
        name = getattr(getattr(kernel, "py_func", kernel), "__name__", str(kernel))
        kinds, values = fast._marshal(arguments)
        launcher = fast._COMPILED.get((id(kernel), fast.current_device(), kinds))
        if launcher is None or driver is None:
            print(f"{name:24s} {len(arguments):4d}  (through numba's launch)")
            continue
        marshal = median_us(lambda: fast._marshal(arguments), repeat)
        pack = median_us(lambda: launcher.packer.pack_into(launcher.slots, 0, *values), repeat)
        line = f"{name:24s} {len(arguments):4d} {marshal:8.1f} {pack:6.1f}"
        if name not in NOT_REPEATED:
            cu_launch_kernel, _success = driver
            grid, block = fast._dimensions(blocks), fast._dimensions(threads)
            handle, stream_handle = launcher.loaded.handle, fast._stream_handle(stream)
            calls = max(repeat // 3, 10)   # (each queues a kernel)
            alone = median_us(lambda: cu_launch_kernel(handle, *grid, *block, shared_bytes,
                                                       stream_handle, launcher.address, 0),
                              calls)
            cuda.synchronize()
            whole = median_us(lambda: fast.launch(kernel, blocks, threads, arguments,
                                                  kernel_view, stream, shared_bytes, kept),
                              calls)
            cuda.synchronize()
            line += f" {alone:7.1f} {whole:7.1f}"
        print(line, flush=True)


def pieces(frame, queries, repeat: int) -> None:
    """Time the cuDF path's other steps alone on ``frame`` (a W1 result) and ``queries``."""
    import cudf
    import cupy
    import numpy as np
    import pylibcudf as plc

    from gpualign_df import cudf_path
    from gpualign_df.gpu import buffers, memory

    rows = len(frame)
    arrays = {name: cupy.asarray(frame[name].values) for name in frame.columns
              if name not in ("query", "target", "cigar")}
    arrays = {"query": cupy.arange(rows, dtype=cupy.int64),
              "target": cupy.arange(rows, dtype=cupy.int64), **arrays}
    strings, _ = queries.to_pylibcudf()
    small = cupy.zeros(7, cupy.int64)
    host = np.empty(7, np.int64)

    def from_pylibcudf():
        columns = [plc.Column.from_cuda_array_interface(values) for values in arrays.values()]
        return cudf.DataFrame.from_pylibcudf(plc.Table(columns),
                                             metadata={"columns": list(arrays)})

    built = cudf.DataFrame(arrays, nan_as_null=False)
    index = cudf.Index.from_pylibcudf(strings)

    def insert():
        built.copy(deep=False).insert(7, "cigar", index)

    steps = [
        (f"cudf.DataFrame({len(arrays)} CuPy columns, nan_as_null=False)",
         lambda: cudf.DataFrame(arrays, nan_as_null=False)),
        (f"the same from pylibcudf columns ({len(arrays)})", from_pylibcudf),
        ("cudf.Index.from_pylibcudf(strings)", lambda: cudf.Index.from_pylibcudf(strings)),
        ("frame.copy(deep=False)", lambda: built.copy(deep=False)),
        ("frame.copy(deep=False) + insert(7, 'cigar')", insert),
        ("cudf_path.string_buffers(queries)", lambda: cudf_path.string_buffers(queries)),
        ("buffers.free_bytes()", buffers.free_bytes),
        ("cupy.cuda.runtime.memGetInfo()", cupy.cuda.runtime.memGetInfo),
        ("a read of 7 int64 (.get())", small.get),
        ("a read of 7 int64 (.get(out=...))", lambda: small.get(out=host)),
        (f"cupy.empty({rows}, int64)", lambda: cupy.empty(rows, cupy.int64)),
        (f"an elementwise comparison ({rows} rows)", lambda: arrays["score"] >= 0),
        (f"cupy.cumsum ({rows} rows)", lambda: cupy.cumsum(arrays["score"])),
    ]
    with memory.engine_allocations():
        for label, call in steps:
            print(f"{label:52s} {median_us(call, repeat):8.1f} us", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=300)
    add_data_dir(parser)
    args = parser.parse_args()

    import cudf
    import pandas as pd
    from numba import cuda

    import gpualign_df

    queries, targets = (cudf.from_pandas(pd.Series(values))
                        for values in w1_pairs(args.data_dir, 10))

    def align():
        return gpualign_df.align(queries, targets, mode="sw", backend="cuda", progress=False,
                                 **W1_OPTIONS)

    for _ in range(4):  # compile and warm up
        frame = align()
    cuda.synchronize()
    launches(align, args.repeat)
    pieces(frame, queries, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
