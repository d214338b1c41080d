"""Fill-kernel variants side by side on workload W1 (kernel times with CUDA events).

For local, global and semi-global with traceback and local score-only: the 32-bit fill with
each row's running best as compare-and-select (``gpu.KEYED_BEST = False``) and as an int32
key (the default where it fits), and for score-only also the packed 16-bit fill
(``gpu.FILL_16BIT``); whether every variant's frame is identical to the first (it must be).
Pandas in and out: no cuDF needed.

Usage::

    python benchmarks/kernel_variants.py [--data-dir DIR] [--replicate 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from run_gpu import CONFIGS, OPTIONS, add_data_dir  # noqa: E402

VARIANTS = [("32-bit, selected best", dict(KEYED_BEST=False, FILL_16BIT=False)),
            ("32-bit, keyed best", dict(KEYED_BEST=True, FILL_16BIT=False)),
            ("16-bit packed", dict(KEYED_BEST=True, FILL_16BIT=True))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir(parser)
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import pandas as pd

    import gpualign_df
    from gpualign_df import gpu
    from helpers import read_fasta

    queries = pd.Series(read_fasta(args.data_dir / "gasal2_query_batch.fasta.gz")
                        * args.replicate)
    targets = pd.Series(read_fasta(args.data_dir / "gasal2_target_batch.fasta.gz")
                        * args.replicate)
    cells = int((queries.str.len() * targets.str.len()).sum())
    print(f"{len(queries):,} pairs, {cells / 1e9:.2f} Gcells; fill / all kernels ms, "
          f"median of {args.repeat}")
    print("| workload | variant | fill ms | all kernels ms | fill GCUPS | frame equal |")
    print("|---|---|---:|---:|---:|---|")
    defaults = {name: getattr(gpu, name) for name in ("KEYED_BEST", "FILL_16BIT")}
    for name, mode, traceback in CONFIGS:
        first = None
        for label, settings in VARIANTS:
            if settings["FILL_16BIT"] and traceback:
                continue  # traceback runs on 32-bit cells
            for setting, value in settings.items():
                setattr(gpu, setting, value)

            def run():
                return gpualign_df.align(queries, targets, mode=mode, traceback=traceback,
                                         backend="cuda", progress=False, **OPTIONS)
            frame = run()  # compiles
            first = frame if first is None else first
            fills, totals = [], []
            for _ in range(args.repeat):
                gpu.TIME_KERNELS = True
                gpu.KERNEL_SECONDS.clear()
                run()
                gpu.TIME_KERNELS = False
                fills.append(gpu.KERNEL_SECONDS.get("fill", 0.0) * 1e3)
                totals.append(sum(gpu.KERNEL_SECONDS.values()) * 1e3)
            fill = statistics.median(fills)
            print(f"| {name} | {label} | {fill:.1f} | {statistics.median(totals):.1f} | "
                  f"{cells / fill / 1e6:.0f} | {frame.equals(first)} |", flush=True)
    for setting, value in defaults.items():
        setattr(gpu, setting, value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
