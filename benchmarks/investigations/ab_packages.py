"""W1 with several revisions or settings of the package in one process, alternating.

The host's spread between processes, and between leases, of the GPU machines is often
larger than a change (BENCHMARKS.md); here every variant runs in the same process, round
after round, each round in another order, so that they share the host's state. A variant
is ``LABEL=ROOT`` (the package of the folder ``ROOT``, for example one made by ``git
archive REV gpualign_df | tar -x -C ROOT``, imported under a name of its own; ``.`` for
this checkout's) with optional settings ``@key=value,...`` (Python literals, applied with
that package's ``config.override``). Every variant's frames must equal the first
variant's (the script stops otherwise); then the medians of ``--repeat`` warm calls a
round and job, and the kernel times of one call (CUDA events, ``time_kernels``), are
printed. Examples::

    git archive HEAD~1 gpualign_df | tar -x -C /tmp/before
    python -m benchmarks.investigations.ab_packages before=/tmp/before new=. \\
        --rounds 4 --repeat 15
    python -m benchmarks.investigations.ab_packages keyed=.@keyed_best=True \\
        selects=.@keyed_best=False --jobs local

``--input cudf`` (the default where cuDF imports: the W1 rows of issue #27) or ``pandas``;
``--backend`` (pandas input) ``cuda`` or ``cpu``; ``--pairs N``: the first N pairs of W1
only; ``--jobs``: some of ``local``, ``global``, ``semi-global``, ``score`` (local score
only). A package copy's modules import each other relatively, so each copy is a package
of its own (its accessors replace the previous one's ``.aln``, with a warning).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import W1_OPTIONS, add_data_dir, w1_pairs

#: (label, mode, traceback) of the W1 jobs.
JOBS = {"local": ("sw", True), "global": ("nw", True), "semi-global": ("sg", True),
        "score": ("sw", False)}


def parse_variant(text: str) -> tuple[str, str, dict]:
    """``LABEL=ROOT[@key=value,...]`` -> (label, root, settings).

    >>> parse_variant("new=.@keyed_best=False,inter_max_cells=1000")
    ('new', '.', {'keyed_best': False, 'inter_max_cells': 1000})
    >>> parse_variant("old=/tmp/old")
    ('old', '/tmp/old', {})
    """
    label, separator, rest = text.partition("=")
    if not separator or not label or not rest:
        raise argparse.ArgumentTypeError(f"a variant is LABEL=ROOT[@key=value,...], not "
                                         f"{text!r}")
    root, _, options = rest.partition("@")
    return label, root, parse_settings(options)


def parse_settings(text: str) -> dict:
    """``key=value,...`` (values Python literals) -> a dict of settings.

    >>> parse_settings("pair_group_profile=None,pair_groups=((8, 19),)")
    {'pair_group_profile': None, 'pair_groups': ((8, 19),)}
    """
    settings = {}
    for item in filter(None, _top_level_items(text)):
        key, equals, value = item.partition("=")
        if not equals:
            raise argparse.ArgumentTypeError(f"a setting is key=value, not {item!r}")
        settings[key] = ast.literal_eval(value)
    return settings


def _top_level_items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (a tuple's commas stay)."""
    items, depth, start = [], 0, 0
    for place, character in enumerate(text):
        depth += (character in "([{") - (character in ")]}")
        if character == "," and depth == 0:
            items.append(text[start:place])
            start = place + 1
    return items + [text[start:]]


def load_package(root: str, place: Path, number: int):
    """The package of folder ``root`` (``.``: ``gpualign_df`` as imported), copied under
    ``place`` as ``gpualign_df_ab<number>`` and imported from there."""
    if root == ".":
        return importlib.import_module("gpualign_df")
    source = Path(root) / "gpualign_df"
    if not (source / "__init__.py").is_file():
        raise SystemExit(f"{root}: no gpualign_df package there")
    name = f"gpualign_df_ab{number}"
    shutil.copytree(source, place / name, ignore=shutil.ignore_patterns("__pycache__"))
    if str(place) not in sys.path:
        sys.path.insert(0, str(place))
    return importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", type=parse_variant,
                        metavar="LABEL=ROOT[@key=value,...]")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--input", choices=["cudf", "pandas"], default=None)
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--jobs", nargs="*", choices=sorted(JOBS), default=list(JOBS))
    add_data_dir(parser)
    args = parser.parse_args(argv)

    import pandas as pd

    queries, targets = w1_pairs(args.data_dir, args.replicate)
    queries, targets = queries[:args.pairs], targets[:args.pairs]
    kind = args.input
    if kind is None:
        kind = "cudf" if importlib.util.find_spec("cudf") else "pandas"
    if kind == "cudf":
        import cudf

        queries, targets = cudf.Series(queries), cudf.Series(targets)
        options = dict(W1_OPTIONS, progress=False)
    else:
        queries, targets = pd.Series(queries), pd.Series(targets)
        options = dict(W1_OPTIONS, backend=args.backend, progress=False)

    def synchronize() -> None:
        if kind == "cudf" or args.backend == "cuda":
            from numba import cuda

            cuda.synchronize()

    place = Path(tempfile.mkdtemp(prefix="ab_packages_"))
    variants = []
    for number, (label, root, settings) in enumerate(args.variants):
        package = load_package(root, place, number)
        config = importlib.import_module(package.__name__ + ".config")
        variants.append((label, package, config, settings))

    def call(variant, job):
        _label, package, config, settings = variant
        mode, traceback = JOBS[job]
        # (an override block only where a variant changes settings: a user's call has none)
        with config.override(**settings) if settings else contextlib.nullcontext():
            return package.align(queries, targets, how="rowwise", mode=mode,
                                 traceback=traceback, **options)

    def same(frame, other) -> bool:
        if kind == "cudf":
            return bool(frame.equals(other))
        try:
            pd.testing.assert_frame_equal(frame, other)
        except AssertionError:
            return False
        return True

    for job in args.jobs:  # first calls (compiling), then the frames compared
        reference = None
        for variant in variants:
            started = time.perf_counter()
            frame = call(variant, job)
            first = time.perf_counter() - started
            frame = call(variant, job)
            print(f"{job}: {variant[0]} first call {first:.2f} s", flush=True)
            if reference is None:
                reference = frame
            elif not same(frame, reference):
                print(f"{job}: {variant[0]}'s frame differs from {variants[0][0]}'s")
                return 1
    medians = {(variant[0], job): [] for variant in variants for job in args.jobs}
    for round_number in range(args.rounds):
        turn = round_number % len(variants)
        order = variants[turn:] + variants[:turn]
        for job in args.jobs:
            for variant in order:
                seconds = []
                for _ in range(args.repeat):
                    synchronize()
                    started = time.perf_counter()
                    frame = call(variant, job)
                    synchronize()
                    seconds.append(time.perf_counter() - started)
                    del frame
                medians[variant[0], job].append(statistics.median(seconds) * 1e3)
    for job in args.jobs:
        for variant in variants:
            label, package, config, settings = variant
            kernels = ""
            if kind == "cudf" or args.backend == "cuda":
                gpu = importlib.import_module(package.__name__ + ".gpu")
                gpu.KERNEL_SECONDS.clear()
                with config.override(time_kernels=True):
                    call(variant, job)
                kernels = "  kernels " + ", ".join(
                    f"{name} {seconds * 1e3:.3f}" for name, seconds in
                    gpu.KERNEL_SECONDS.items())
            rounds = " / ".join(f"{value:.2f}" for value in medians[label, job])
            print(f"{job:12s} {label:10s} ms, medians a round: {rounds}{kernels}")
    shutil.rmtree(place, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
