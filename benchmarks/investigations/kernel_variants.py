"""Fill-kernel variants side by side on workload W1 (kernel times with CUDA events).

Each variant is ``LABEL@key=value,...``: engine settings (Python literals) applied with
``config.override`` to every job of the variant; ``LABEL`` alone runs the defaults. The
variants take turns round after round (each round in another order, so that they share
the GPU's state), every job and variant compiled before the first round; for each job
and variant: the median fill, walk and all-kernel times over the rounds' calls, the
fill's GCUPS, and whether its frame is identical to the first variant's (it must be).
Without variants: the 32-bit fill's strip heights, register caps and funnel or plain
shifts, and the packed 16-bit fill without the grouped kernel. Pandas in and out: no
cuDF needed. Examples::

    python -m benchmarks.investigations.kernel_variants table@pair_group_profile=False \\
        profile@pair_group_profile=True --jobs local global --rounds 3 --repeat 3
    python -m benchmarks.investigations.kernel_variants
"""

from __future__ import annotations

import argparse
import statistics
import sys

from benchmarks.harness import W1_OPTIONS as OPTIONS
from benchmarks.harness import add_data_dir, kernel_seconds, w1_pairs
from benchmarks.investigations.ab_packages import JOBS, parse_settings

#: The variants without arguments: the 32-bit fill (the grouped pair kernel off) with
#: strips of 16 and 8 query rows (``fill_strip_rows``) under register caps
#: (``fill_max_registers``), funnel or plain shifts (``funnel_append``), and the packed
#: 16-bit fill (``fill_16bit``, score only).
DEFAULT_VARIANTS = [
    (label, dict(pair_group_fill=False, fill_16bit=packed, fill_strip_rows=rows,
                 fill_max_registers=((8, 72), (16, None), (rows, cap)),
                 funnel_append=funnel))
    for label, rows, cap, funnel, packed in (
        ("16 rows, compiler's registers, funnel shifts", 16, None, True, False),
        ("16 rows, compiler's registers, plain shifts", 16, None, False, False),
        ("16 rows, 96 registers, funnel shifts", 16, 96, True, False),
        ("8 rows, 72 registers, funnel shifts", 8, 72, True, False),
        ("16-bit packed (8 rows)", 8, 72, True, True))]


def parse_variant(text: str) -> tuple[str, dict]:
    """``LABEL[@key=value,...]`` -> (label, settings).

    >>> parse_variant("profile@pair_group_profile=True,pair_groups=((8, 19),)")
    ('profile', {'pair_group_profile': True, 'pair_groups': ((8, 19),)})
    """
    label, _, options = text.partition("@")
    if not label:
        raise argparse.ArgumentTypeError(f"a variant is LABEL[@key=value,...], not {text!r}")
    return label, parse_settings(options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", type=parse_variant,
                        metavar="LABEL[@key=value,...]")
    parser.add_argument("--jobs", nargs="*", choices=sorted(JOBS), default=list(JOBS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="calls a round")
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=None, help="the first N pairs only")
    add_data_dir(parser)
    args = parser.parse_args(argv)

    import pandas as pd

    import gpualign_df
    from gpualign_df import config

    variants = args.variants or DEFAULT_VARIANTS
    queries, targets = (pd.Series(values[:args.pairs]) for values in
                        w1_pairs(args.data_dir, args.replicate))
    cells = int((queries.str.len() * targets.str.len()).sum())
    print(f"{len(queries):,} pairs, {cells / 1e9:.2f} Gcells; kernel ms, medians of "
          f"{args.rounds} rounds x {args.repeat} calls")
    print("| job | variant | fill ms | walk ms | all kernels ms | fill GCUPS | frame equal |")
    print("|---|---|---:|---:|---:|---:|---|")
    for job in args.jobs:
        mode, traceback = JOBS[job]

        def run():
            return gpualign_df.align(queries, targets, mode=mode, traceback=traceback,
                                     backend="cuda", progress=False, **OPTIONS)
        frames, times = {}, {label: [] for label, _ in variants}
        for label, settings in variants:   # compiles
            if settings.get("fill_16bit") and traceback:
                continue   # (traceback never runs on the packed 16-bit fill)
            with config.override(**settings):
                frames[label] = run()
        for round_ in range(args.rounds):
            for label, settings in (variants if round_ % 2 == 0 else variants[::-1]):
                if label in frames:
                    with config.override(**settings):
                        times[label] += [kernel_seconds(run) for _ in range(args.repeat)]
        first = next(iter(frames.values()))
        for label, _ in variants:
            if label not in frames:
                continue
            fill, walk, total = (statistics.median(1e3 * pick(kernels)
                                                   for kernels in times[label])
                                 for pick in (lambda kernels: kernels.get("fill", 0.0),
                                              lambda kernels: kernels.get("walk", 0.0),
                                              lambda kernels: sum(kernels.values())))
            print(f"| {job} | {label} | {fill:.3f} | {walk:.3f} | {total:.3f} | "
                  f"{cells / fill / 1e6 if fill else 0:.0f} | {frames[label].equals(first)} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
