"""Where the host time of a GPU job goes: per-phase wall times (each phase ends with a device
synchronize) and a cProfile of one end-to-end W1 run (local, traceback).

``python -m benchmarks.investigations.profile_gpu [--replicate 10] [--cudf] [--traceback 0|1]
[--mode sw]`` on a GPU machine.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time

from benchmarks.harness import add_w1_job_arguments, timed_runs, timed_stages, w1_job

#: (module, function) pairs timed as phases; a phase nested in another counts in both.
PHASES = [("gpualign_df.cudf_path", "encode_device"), ("gpualign_df.cudf_path", "result_frame"),
          ("gpualign_df.gpu.batches", "plan_batches"), ("gpualign_df.gpu.batches", "run_batch"),
          ("gpualign_df.gpu.batches", "row_offsets"), ("gpualign_df.gpu", "align_on_device"),
          ("gpualign_df.gpu.batches", "align_on_device"),
          ("gpualign_df.encode", "encode_sequences"), ("gpualign_df.results", "ResultFrame.finish"),
          ("gpualign_df.gpu.batches", "to_host")]


def profiled(run) -> pstats.Stats:
    """cProfile statistics of one call of ``run``."""
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    return pstats.Stats(profile)


def main() -> int:
    parser = argparse.ArgumentParser()
    add_w1_job_arguments(parser)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep-bytes", type=int, default=None,
                        help="freed memory the engine's private allocator keeps between jobs "
                             "(the gpu_keep_bytes setting)")
    args = parser.parse_args()
    from numba import cuda

    import gpualign_df
    from gpualign_df import config
    if args.keep_bytes is not None:  # held for the rest of the script
        config.override(gpu_keep_bytes=args.keep_bytes).__enter__()

    queries, targets, options = w1_job(args)
    gpualign_df.align(queries[:5000], targets[:5000], **options)
    gpualign_df.align(queries, targets, **options)
    whole, _ = timed_runs(lambda: gpualign_df.align(queries, targets, **options), args.repeat,
                          synchronize=True)
    print(f"end to end, no instrumentation: median {statistics.median(whole) * 1e3:.1f} ms "
          f"(min {min(whole) * 1e3:.1f})")
    phase_runs = []
    with timed_stages(PHASES, {}, synchronize=True) as totals:
        for _ in range(args.repeat):
            totals.clear()
            cuda.synchronize()
            started = time.perf_counter()
            gpualign_df.align(queries, targets, **options)
            cuda.synchronize()
            totals["TOTAL"] = time.perf_counter() - started
            phase_runs.append(dict(totals))
    print("phases (synchronized, median ms):")
    for name in phase_runs[0]:
        median = statistics.median(run.get(name, 0) for run in phase_runs)
        print(f"  {name:20s} {median * 1e3:8.2f}")
    stats = profiled(lambda: gpualign_df.align(queries, targets, **options))
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats("gpualign_df|cudf/core/(frame|dataframe)", 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
