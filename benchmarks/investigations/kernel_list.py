"""Every kernel of one warm W1 call and its GPU time, from Nsight Compute: the engine's own
kernels and those of CuPy and cuDF around them, to see what the GPU does besides the fill.

``python -m benchmarks.investigations.kernel_list [--cudf] [--mode sw] [--traceback 1]``
on a GPU machine with ``ncu``: the script runs itself under ``ncu --profile-from-start off``
(only the call between ``cudaProfilerStart`` and ``cudaProfilerStop`` is profiled, after
three unprofiled warm-up calls) and prints each kernel's summed time, in launch order. ncu
runs the kernels one at a time, so the sum is the GPU's work, not the call's wall time.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
from collections import Counter

from benchmarks.harness import add_w1_job_arguments, w1_job


def profiled_call(args: argparse.Namespace) -> None:
    """Warm up, then one call between the profiler's start and stop."""
    import cupy

    import gpualign_df
    queries, targets, options = w1_job(args)
    for _ in range(3):
        gpualign_df.align(queries, targets, **options)
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.profiler.start()
    gpualign_df.align(queries, targets, **options)
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.profiler.stop()


def kernel_table(report: str) -> list[tuple[str, int, float]]:
    """(kernel name, launches, summed microseconds) from ncu's CSV, in first-launch order."""
    rows = [row for row in csv.reader(io.StringIO(report)) if len(row) > 10]
    header, rows = rows[0], rows[1:]
    name, value, unit = (header.index(key) for key in ("Kernel Name", "Metric Value",
                                                        "Metric Unit"))
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3,
             "ms": 1e3}
    micros: dict[str, float] = {}
    launches: Counter = Counter()
    for row in rows:
        kernel = row[name].split("(")[0].split("[abi:")[0][:80]   # numba's mangled suffix
        micros[kernel] = micros.get(kernel, 0.0) + float(row[value].replace(",", "")) * \
            scale[row[unit]]
        launches[kernel] += 1
    return [(kernel, launches[kernel], total) for kernel, total in micros.items()]


def main() -> int:
    parser = argparse.ArgumentParser()
    add_w1_job_arguments(parser)
    parser.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profiled:
        profiled_call(args)
        return 0
    ncu = shutil.which("ncu")
    if ncu is None:
        print("ncu is not on the PATH", file=sys.stderr)
        return 1
    command = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics",
               "gpu__time_duration.sum", "--csv", sys.executable, "-m",
               "benchmarks.investigations.kernel_list", "--profiled", "--mode", args.mode,
               "--traceback", str(args.traceback), "--data-dir", str(args.data_dir),
               "--replicate", str(args.replicate)]
    command += ["--pairs", str(args.pairs)] if args.pairs is not None else []
    command += ["--cudf"] if args.cudf else []
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return done.returncode
    table = kernel_table(done.stdout)
    print(f"{sum(count for _, count, _ in table)} kernels, "
          f"{sum(total for *_, total in table) / 1e3:.2f} ms of GPU work")
    for kernel, count, total in table:
        print(f"{total:10.1f} us  x{count:<3d} {kernel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
