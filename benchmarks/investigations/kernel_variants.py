"""Fill-kernel variants side by side on workload W1 (kernel times with CUDA events).

For local, global and semi-global with traceback and local score-only: the 32-bit fill
with strips of 8 and of 16 query rows (the ``fill_strip_rows`` setting) under several
register caps, traceback bits appended by funnel shifts or plain shifts (``funnel_append``),
and for score-only also the packed 16-bit fill (``fill_16bit``); whether every
variant's frame is identical to the first (it must be).
Pandas in and out: no cuDF needed.

Usage::

    python -m benchmarks.investigations.kernel_variants [--data-dir DIR] [--replicate 10]
                                                        [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from benchmarks.harness import W1_OPTIONS as OPTIONS
from benchmarks.harness import add_data_dir, kernel_seconds, w1_pairs
from benchmarks.run_gpu import CONFIGS

#: (label, settings): ``keyed_best``, ``fill_16bit``, ``fill_strip_rows``, the register cap
#: of that strip height (in ``fill_max_registers``) and ``funnel_append``.
VARIANTS = [("16 rows, compiler's registers, funnel shifts",
             dict(keyed=True, packed=False, rows=16, cap=None, funnel=True)),
            ("16 rows, compiler's registers, plain shifts",
             dict(keyed=True, packed=False, rows=16, cap=None, funnel=False)),
            ("16 rows, 96 registers, funnel shifts",
             dict(keyed=True, packed=False, rows=16, cap=96, funnel=True)),
            ("8 rows, 72 registers, funnel shifts",
             dict(keyed=True, packed=False, rows=8, cap=72, funnel=True)),
            ("16-bit packed (8 rows)",
             dict(keyed=True, packed=True, rows=8, cap=72, funnel=True))]


def apply(settings: dict):
    """The engine settings of one variant, for a ``with`` block."""
    from gpualign_df import config

    caps = {**dict(config.settings().fill_max_registers), settings["rows"]: settings["cap"]}
    return config.override(keyed_best=settings["keyed"], fill_16bit=settings["packed"],
                           fill_strip_rows=settings["rows"],
                           fill_max_registers=tuple(caps.items()),
                           funnel_append=settings["funnel"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir(parser)
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import pandas as pd

    import gpualign_df
    queries, targets = (pd.Series(values) for values in w1_pairs(args.data_dir,
                                                                  args.replicate))
    cells = int((queries.str.len() * targets.str.len()).sum())
    print(f"{len(queries):,} pairs, {cells / 1e9:.2f} Gcells; fill / all kernels ms, "
          f"median of {args.repeat}")
    print("| workload | variant | fill ms | all kernels ms | fill GCUPS | frame equal |")
    print("|---|---|---:|---:|---:|---|")
    for name, mode, traceback in CONFIGS:
        first = None
        for label, settings in VARIANTS:
            if settings["packed"] and traceback:
                continue  # traceback runs on 32-bit cells

            def run():
                return gpualign_df.align(queries, targets, mode=mode, traceback=traceback,
                                         backend="cuda", progress=False, **OPTIONS)
            with apply(settings):
                frame = run()  # compiles
                first = frame if first is None else first
                fills, totals = [], []
                for _ in range(args.repeat):
                    kernels = kernel_seconds(run)
                    fills.append(kernels.get("fill", 0.0) * 1e3)
                    totals.append(sum(kernels.values()) * 1e3)
            fill = statistics.median(fills)
            print(f"| {name} | {label} | {fill:.1f} | {statistics.median(totals):.1f} | "
                  f"{cells / fill / 1e6:.0f} | {frame.equals(first)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
