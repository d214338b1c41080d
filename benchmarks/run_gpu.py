"""GPU benchmark W1: the 20,000 GASAL2 pairs replicated x10 (200,000 pairs), match 1,
mismatch -4, gap_open 7, gap_extend 1 (GASAL2's ``-a 1 -b 4 -q 6 -r 1``).

For local, global and semi-global with traceback and local score-only, with and without
length sorting: end to end (pandas Series in -> DataFrame with CIGAR out, ``backend="cuda"``)
and kernel-only (CUDA events around the fill, traceback-walk and CIGAR kernels), next to
GASAL2's published H100 times and parasail on every CPU core of the same machine.

Usage::

    python -m benchmarks.run_gpu [--data-dir DIR] [--replicate 10] [--repeat 3]
                                 [--parasail-processes N] [--markdown BENCHMARKS.md]
                                 [--compare-fills] [--pair-group-classes 8x19 16x10 ...]
                                 [--modes sw nw sg] [--unsorted 0|1]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import W1_OPTIONS, add_data_dir, kernel_seconds, timed_runs, w1_pairs

#: GASAL2 on an H100 (sm_90 build), same 200,000 pairs, milliseconds (DESIGN.md / issue).
GASAL2_MS = {"local + traceback": 60.4, "global + traceback": 54.5,
             "semi-global + traceback": 39.9, "local score-only": 37.8}
CONFIGS = [("local + traceback", "sw", True), ("global + traceback", "nw", True),
           ("semi-global + traceback", "sg", True), ("local score-only", "sw", False)]
OPTIONS = W1_OPTIONS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir(parser)
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parasail-processes", type=int, default=os.cpu_count())
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--cudf-only", action="store_true",
                        help="only the cuDF rows (skip the pandas rows)")
    parser.add_argument("--compare-fills", action="store_true",
                        help="also the rows with CIGARs and local score-only on the 32-bit "
                             "fill (pair_group_fill off), frames checked equal")
    parser.add_argument("--pair-group-classes", nargs="*", default=[], metavar="LANESxROWS",
                        help="also those rows with the grouped pair kernel's classes set to "
                             "each of these alone (e.g. 8x19 16x10), frames checked equal")
    parser.add_argument("--modes", nargs="*", default=["sw", "nw", "sg"],
                        choices=["sw", "nw", "sg"], help="the modes whose rows run")
    parser.add_argument("--unsorted", type=int, choices=(0, 1), default=1,
                        help="0: the pandas rows with length sorting only")
    parser.add_argument("--rmm", choices=["default", "async"], default="default",
                        help="async: RMM's cudaMallocAsync resource for the whole process "
                             "(cuDF's and our allocations) instead of RMM's default")
    args = parser.parse_args(argv)

    import multiprocessing as mp

    import numpy as np
    import pandas as pd

    from benchmarks import run_cpu
    queries, targets = w1_pairs(args.data_dir, args.replicate)
    cells = sum(len(q) * len(t) for q, t in zip(queries, targets))
    pool = None
    if args.parasail_processes > 0:  # start the pool before any CUDA in this process
        pool = mp.get_context("spawn").Pool(args.parasail_processes, run_cpu._worker_init)
        pool.map(run_cpu._warm, range(args.parasail_processes * 2), chunksize=1)

    if args.rmm == "async":
        import rmm

        rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    import gpualign_df
    from gpualign_df import config
    from numba import cuda

    query_series, target_series = pd.Series(queries), pd.Series(targets)
    device = cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else device
    rows = []

    def measure(label, name, sorted_label, run):
        """Median end-to-end time of ``run`` and its kernel times; one row of the table."""
        times, frame = timed_runs(run, args.repeat, synchronize=True)
        split = kernel_seconds(run)
        kernel = sum(split.values())
        end_to_end = statistics.median(times)
        rows.append({"workload": label, "sorted": sorted_label,
                     "end_to_end_ms": end_to_end * 1e3, "kernel_ms": kernel * 1e3,
                     "fill_ms": split.get("fill", 0) * 1e3, "walk_ms": split.get("walk", 0) * 1e3,
                     "cigar_ms": split.get("cigar", 0) * 1e3,
                     "gcups_e2e": cells / end_to_end / 1e9, "gcups_kernel": cells / kernel / 1e9,
                     "gasal2_ms": GASAL2_MS[name]})
        print(rows[-1], flush=True)
        return frame

    local_scores = None
    configs = [config_row for config_row in CONFIGS if config_row[1] in args.modes]
    for sort in () if args.cudf_only else (True, False)[:1 + args.unsorted]:
        with config.override(sort_by_length=sort):
            for name, mode, traceback in configs:
                def run(mode=mode, traceback=traceback, pairs=None):
                    return gpualign_df.align(query_series[:pairs], target_series[:pairs],
                                             mode=mode, traceback=traceback, backend="cuda",
                                             progress=False, **OPTIONS)
                run(pairs=3000)  # compile
                frame = measure(name, name, "yes" if sort else "no", run)
                if name == "local + traceback" and sort:
                    local_scores = frame["score"].to_numpy(dtype=np.int64)
                if mode != "sw" and not traceback:   # score only: local's fills compared
                    continue
                for suffix, settings in _variants(args):
                    with config.override(**settings):
                        run(pairs=3000)
                        other = measure(name + suffix, name, "yes" if sort else "no", run)
                    pd.testing.assert_frame_equal(frame, other)
    try:
        import cudf
    except ImportError:
        cudf = None
    if cudf is not None:  # the path the issue measures: cuDF column in, cuDF frame out
        device_queries, device_targets = cudf.Series(queries), cudf.Series(targets)
        variants = [(name, mode, traceback, True) for name, mode, traceback in configs]
        variants += [(name, mode, traceback, False) for name, mode, traceback in configs
                     if mode == "sw"]
        for name, mode, traceback, use_dpx in variants:
            os.environ["GPUALIGN_DPX"] = "1" if use_dpx else "0"

            def run(mode=mode, traceback=traceback):
                return device_queries.align.rowwise(device_targets, mode=mode,
                                                    traceback=traceback, **OPTIONS)
            run()  # compile
            frame = measure(name + (" (cuDF)" if use_dpx else " (cuDF, no DPX)"), name, "yes",
                            run)
            if (mode != "sw" and not traceback) or not use_dpx:
                continue
            for suffix, settings in _variants(args):
                with config.override(**settings):
                    run()
                    other = measure(name + f" (cuDF{suffix})", name, "yes", run)
                assert frame.equals(other)
            if name == "local + traceback" and local_scores is None:
                local_scores = frame["score"].to_numpy().astype(np.int64)
    os.environ.pop("GPUALIGN_DPX", None)
    parasail_row = None
    if pool is not None:
        pairs = list(zip(queries, targets))
        started = time.perf_counter()
        scores, _cigars, saturated = run_cpu.parasail_run(pool, pairs, args.parasail_processes)
        seconds = time.perf_counter() - started
        pool.close()
        mismatched = int((np.asarray(scores) != local_scores).sum())
        parasail_row = {"processes": args.parasail_processes, "seconds": seconds,
                        "gcups": cells / seconds / 1e9, "score_mismatches": mismatched,
                        "saturated": saturated}
        print(parasail_row, flush=True)
    table = render(rows, parasail_row, device, len(queries), cells)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as handle:
            handle.write(table + "\n")
    return 0


def _variants(args) -> list[tuple[str, dict]]:
    """(row label suffix, settings) of the extra local score-only rows asked for."""
    variants = [(", 32-bit fill", dict(pair_group_fill=False))] if args.compare_fills else []
    for shape in args.pair_group_classes:
        lanes, rows = shape.lower().split("x")
        variants.append((f", groups {shape}", dict(pair_groups=((int(lanes), int(rows)),))))
    return variants


def render(rows, parasail_row, device, pairs, cells) -> str:
    lines = [f"## {_dt.date.today().isoformat()} — GPU W1 on {device}", "",
             f"{pairs:,} pairs (GASAL2 x10), {cells / 1e9:.2f} Gcells, match 1 / mismatch -4 / "
             f"gap 7+1. End to end = Series in -> frame with CIGAR out (pandas, or cuDF where "
             f"marked; median of runs); kernel = gather + fill + traceback walk + CIGAR kernels "
             f"(CUDA events).", "",
             "| workload | sorted | end to end ms | GCUPS e2e | kernel ms (fill/walk/cigar) | "
             "GCUPS kernel | GASAL2 ms | e2e vs GASAL2 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['workload']} | {row['sorted']} | {row['end_to_end_ms']:.1f} | "
                     f"{row['gcups_e2e']:.0f} | {row['kernel_ms']:.1f} ({row['fill_ms']:.1f}/"
                     f"{row['walk_ms']:.1f}/{row['cigar_ms']:.1f}) | {row['gcups_kernel']:.0f} | "
                     f"{row['gasal2_ms']} | {row['gasal2_ms'] / row['end_to_end_ms']:.2f}x |")
    if parasail_row:
        lines += ["", f"parasail `sw_trace_striped_16` on {parasail_row['processes']} CPU "
                      f"processes, same pairs: {parasail_row['seconds'] * 1e3:.0f} ms "
                      f"({parasail_row['gcups']:.2f} GCUPS); scores differing from ours: "
                      f"{parasail_row['score_mismatches']}."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
