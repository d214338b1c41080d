"""Where the host's time of warm W1 calls goes, line by line: ``line_profiler`` over the
engine's functions from the API's entry to the frame (the encoding, the plan, the
batch's launches, the launch path itself), a device synchronize after each call so that
no call overlaps the next.

``python -m benchmarks.investigations.line_profile_gpu [--cudf] [--mode sw]
[--traceback 0|1] [--calls 60] [--pairs N]`` on a GPU machine (``line_profiler`` installed). The
times include the profiler's own (about a microsecond a line); compare lines of one run,
and take absolute figures from ``timeline_gpu --host-marks``.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.harness import add_w1_job_arguments, w1_job

#: (module, function) pairs profiled; ``Class.method`` names a method.
PROFILED = [("gpualign_df.api", "align"), ("gpualign_df.api", "resolve_job"),
            ("gpualign_df.cudf_path", "_align_cudf"), ("gpualign_df.cudf_path", "new_summary"),
            ("gpualign_df.cudf_path", "encode_device"),
            ("gpualign_df.cudf_path", "string_buffers"),
            ("gpualign_df.cudf_path", "result_frame"),
            ("gpualign_df.gpu.batches", "align_on_device"),
            ("gpualign_df.gpu.batches", "_align_on_device"),
            ("gpualign_df.gpu.batches", "run_batch"), ("gpualign_df.gpu.batches", "_fill_groups"),
            ("gpualign_df.gpu.batches", "_write_cigars"),
            ("gpualign_df.gpu.plan", "plan_batches"), ("gpualign_df.gpu.plan", "_inter_batches"),
            ("gpualign_df.gpu.plan", "_counting_order"), ("gpualign_df.gpu.launch", "launch"),
            ("gpualign_df.gpu.buffers", "free_bytes"), ("gpualign_df.gpu.buffers", "read_later"),
            ("gpualign_df.gpu.batches", "run_pairs_gpu"), ("gpualign_df.gpu.batches", "to_host"),
            ("gpualign_df.gpu.buffers", "upload")]


def main() -> int:
    parser = argparse.ArgumentParser()
    add_w1_job_arguments(parser)
    parser.add_argument("--calls", type=int, default=60, help="warm calls profiled")
    args = parser.parse_args()

    import importlib

    import line_profiler
    from numba import cuda

    import gpualign_df

    queries, targets, options = w1_job(args)
    for _ in range(3):  # compile and warm up
        gpualign_df.align(queries, targets, **options)
    profiler = line_profiler.LineProfiler()
    for module_name, name in PROFILED:
        owner = importlib.import_module(module_name)
        for part in name.split("."):
            owner = getattr(owner, part, None)
        if owner is not None:   # (an older revision may lack some)
            profiler.add_function(owner)
    cuda.synchronize()
    profiler.enable_by_count()
    for _ in range(args.calls):
        gpualign_df.align(queries, targets, **options)
        cuda.synchronize()
    profiler.disable_by_count()
    print(f"{args.calls} warm calls, mode {args.mode}, traceback {bool(args.traceback)}, "
          f"{'cuDF' if args.cudf else 'pandas'} in; per hit in microseconds")
    profiler.print_stats(output_unit=1e-6, stripzeros=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
