"""Host and device timeline of one W1 job: where the GPU waits for the host.

Each engine phase and kernel launch is marked twice, without any synchronization: the host
clock when the host reaches it, and a CUDA event recorded on the stream there (the device
clock when the device reaches it, that is when all the work queued before it is done).
Where the device reaches a mark at about the time the host does, the device sat idle
waiting for the host; where it reaches it later, the host ran ahead.

``python -m benchmarks.investigations.timeline_gpu [--cudf] [--mode sw] [--traceback 1]`` on a GPU
machine. ``--host-marks N``: the host clock alone at each mark (no event, whose record
costs the host tens of microseconds while kernels run), medians over N warm calls, and
when the call returned and when the device was done. ``--mark MODULE:NAME`` (repeatable)
marks a function besides the listed ones, where ``MODULE`` looks it up by that name.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import time

from benchmarks.harness import add_w1_job_arguments, w1_job
from benchmarks.investigations.profile_gpu import profiled

#: (module, attribute) marked at entry and exit.
MARKED = [("gpualign_df.api", "resolve_job"), ("gpualign_df.api", "make_scoring"),
          ("gpualign_df.cudf_path", "align_cudf"), ("gpualign_df.cudf_path", "new_summary"),
          ("gpualign_df.cudf_path", "encode_device"),
          ("gpualign_df.cudf_path", "check_residues"), ("gpualign_df.gpu", "align_on_device"),
          ("gpualign_df.gpu.batches", "align_on_device"),
          ("gpualign_df.gpu.batches", "plan_batches"), ("gpualign_df.gpu.plan", "launch_plan"),
          ("gpualign_df.gpu.plan", "launch_sums"), ("gpualign_df.gpu.plan", "length_order"),
          ("gpualign_df.gpu.batches", "run_batch"), ("gpualign_df.gpu.batches", "launch_kernel"),
          ("gpualign_df.cudf_path", "result_frame"), ("gpualign_df.gpu.batches", "free_bytes"),
          ("gpualign_df.api", "encode_job"), ("gpualign_df.api", "check_host_memory"),
          ("gpualign_df.api", "run_pairs"), ("gpualign_df.gpu.batches", "upload"),
          ("gpualign_df.gpu.buffers", "map_on_device"), ("gpualign_df.gpu.batches", "to_host"),
          ("gpualign_df.gpu.batches", "download_pinned"),
          ("gpualign_df.gpu.batches", "_align_on_device"),
          ("gpualign_df.gpu.batches", "_job_constants"),
          ("gpualign_df.gpu.plan", "_inter_batches"), ("gpualign_df.gpu.plan", "to_numpy"),
          ("gpualign_df.cudf_path", "check_score_bound")]


def main() -> int:
    parser = argparse.ArgumentParser()
    add_w1_job_arguments(parser)
    parser.add_argument("--profile", action="store_true",
                        help="then a cProfile of one more run, with the phases' callees")
    parser.add_argument("--numba-launch", action="store_true",
                        help="every kernel through numba's own launch path")
    parser.add_argument("--host-marks", type=int, default=0, metavar="N",
                        help="host clock only at each mark, medians of N warm calls")
    parser.add_argument("--mark", action="append", default=[], metavar="MODULE:NAME",
                        help="also mark the entry and exit of NAME as MODULE looks it up "
                             "(repeatable)")
    args = parser.parse_args()

    from numba import cuda

    import gpualign_df
    queries, targets, options = w1_job(args)
    if args.numba_launch:
        from gpualign_df import config

        config.override(fast_launch=False).__enter__()   # held for the rest of the script
    for _ in range(3):  # compile and warm up
        gpualign_df.align(queries, targets, **options)

    marks: list[tuple[str, float, object]] = []

    def mark(label):
        event = None
        if not args.host_marks:
            event = cuda.event()
            event.record()
        marks.append((label, time.perf_counter(), event))

    def wrap(function, name):
        @functools.wraps(function)
        def wrapper(*arguments, **keywords):
            label = f"{name}:{arguments[0]}" if name == "launch_kernel" else name
            mark(f"> {label}")
            try:
                return function(*arguments, **keywords)
            finally:
                mark(f"< {label}")
        return wrapper

    extra = [tuple(name.split(":", 1)) for name in args.mark]
    # (older code, timed for a comparison, lacks some)
    for module_name, attribute in MARKED + extra:
        module = importlib.import_module(module_name)
        if hasattr(module, attribute):
            setattr(module, attribute, wrap(getattr(module, attribute), attribute))
    from gpualign_df.gpu import DeviceResults

    from gpualign_df.results import ResultFrame

    owners = [(DeviceResults, "cigar_chars"), (ResultFrame, "prepare"), (ResultFrame, "finish")]
    if args.cudf:
        import cudf

        owners += [(cudf.DataFrame, "__init__"), (cudf.DataFrame, "insert")]
    for owner, attribute in owners:
        setattr(owner, attribute, wrap(getattr(owner, attribute), attribute))
    if args.host_marks:
        return host_marks(lambda: gpualign_df.align(queries, targets, **options), marks,
                          args.host_marks)
    for run in range(2):
        marks.clear()
        cuda.synchronize()
        mark("start")
        frame = gpualign_df.align(queries, targets, **options)
        mark("returned")
        cuda.synchronize()
        finished = time.perf_counter()
        _, host0, event0 = marks[0]
        print(f"run {run}: {len(frame)} rows, {(finished - host0) * 1e3:.2f} ms wall")
        print(f"{'mark':40s} {'host ms':>8s} {'device ms':>9s} {'device-host':>11s}")
        for label, host, event in marks:
            device = cuda.event_elapsed_time(event0, event)
            print(f"{label[:40]:40s} {(host - host0) * 1e3:8.2f} {device:9.2f} "
                  f"{device - (host - host0) * 1e3:11.2f}")
    if args.profile:  # host time by function, inside the engine's phases
        stats = profiled(lambda: gpualign_df.align(queries, targets, **options))
        stats.sort_stats("tottime").print_stats(25)
        stats.print_callees("encode_device|_inter_batches|run_batch|_align_cudf|"
                            "_align_on_device|result_frame")
    return 0


def host_marks(call, marks: list, runs: int) -> int:
    """Print the median host time from the call's start to each mark over ``runs`` calls
    (a mark met again in one call is numbered), then to its return and to the device's
    end (a synchronize after the return)."""
    import statistics

    from numba import cuda

    times: dict[str, list[float]] = {}
    for _ in range(runs):
        marks.clear()
        cuda.synchronize()
        start = time.perf_counter()
        call()
        returned = time.perf_counter()
        cuda.synchronize()
        done = time.perf_counter()
        seen: dict[str, int] = {}
        for label, host, _event in marks:
            seen[label] = seen.get(label, 0) + 1
            key = label if seen[label] == 1 else f"{label} #{seen[label]}"
            times.setdefault(key, []).append(host - start)
        times.setdefault("returned", []).append(returned - start)
        times.setdefault("device done", []).append(done - start)
    print(f"host ms from the call's start, medians of {runs} warm calls")
    for key, values in times.items():
        print(f"{key[:45]:45s} {statistics.median(values) * 1e3:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
