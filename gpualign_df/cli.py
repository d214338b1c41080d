"""The ``gpualign`` command: align FASTA/FASTQ files, write TSV/Parquet/SAM/PAF/BLAST tabular.

Examples
--------
::

    gpualign demo
    gpualign align reads.fq.gz refs.fa --how search --mode sw --matrix EDNAFULL --top-k 5 \\
        --out hits.paf
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from . import __version__
from .api import HOWS, align
from .engine import resolve_backend
from .io import FORMATS, format_from_path, read_sequences, write_results
from .scoring import FREE_END_NAMES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpualign", description="Pairwise sequence alignment "
                                     "with traceback (GPU when available, else CPU).")
    parser.add_argument("--version", action="version", version=f"gpualign_df {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("align", help="align sequences from FASTA/FASTQ files")
    run.add_argument("queries", help="FASTA/FASTQ file (plain or .gz)")
    run.add_argument("targets", nargs="?", help="FASTA/FASTQ file; omit for --how pairwise")
    run.add_argument("--how", choices=HOWS, default=None,
                     help="rowwise (record k vs record k), pairwise (all pairs within QUERIES), "
                          "search (every query vs every target); default: rowwise with two "
                          "files, pairwise with one")
    run.add_argument("--mode", default="sw", choices=["sw", "local", "nw", "global", "sg",
                                                      "semiglobal"])
    run.add_argument("--free-ends", nargs="+", choices=FREE_END_NAMES, default=None,
                     help="semi-global: which ends are free (default all four)")
    scoring = run.add_mutually_exclusive_group()
    scoring.add_argument("--matrix", help="BLOSUM45/50/62/80/90, PAM30/70/250, EDNAFULL (NUC.4.4)")
    scoring.add_argument("--match", type=int, help="DNA match score (with --mismatch)")
    run.add_argument("--mismatch", type=int, help="DNA mismatch score, e.g. -4")
    run.add_argument("--gap-open", type=int, default=10,
                     help="cost of a gap's first position (a gap of k costs open+(k-1)*extend)")
    run.add_argument("--gap-extend", type=int, default=1, help="cost of each further position")
    run.add_argument("--top-k", type=int, default=None, help="search: best K targets per query")
    run.add_argument("--no-traceback", action="store_true",
                     help="scores and end coordinates only (TSV/Parquet)")
    run.add_argument("--cigar-style", choices=["=", "M"], default="=")
    run.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto")
    run.add_argument("--out", required=True, help="output file (.tsv .parquet .sam .paf .blast6 .m8)")
    run.add_argument("--format", choices=FORMATS, default=None,
                     help="output format (default: from the --out extension)")
    run.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    run.add_argument("--gpus", default=None,
                     help="run through Dask on N GPUs of this node (N or 'all'; dask-cuda)")
    run.add_argument("--scheduler", default=None,
                     help="run through Dask on the cluster of this scheduler address")

    demo = commands.add_parser("demo", help="align a small real data set shipped with the package")
    demo.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto")
    return parser


def _run_align(args: argparse.Namespace) -> int:
    how = args.how or ("rowwise" if args.targets else "pairwise")
    output_format = args.format or format_from_path(args.out)
    queries = read_sequences(args.queries)
    targets = read_sequences(args.targets) if args.targets else None
    if how == "pairwise" and targets is not None:
        raise ValueError("--how pairwise takes one file")
    started = time.perf_counter()
    options = dict(how=how, mode=args.mode, matrix=args.matrix, match=args.match,
                   mismatch=args.mismatch, gap_open=args.gap_open, gap_extend=args.gap_extend,
                   free_ends=args.free_ends, top_k=args.top_k, traceback=not args.no_traceback,
                   cigar_style=args.cigar_style,
                   clip="soft" if output_format == "sam" else None, backend=args.backend)
    query_seq = queries["seq"]
    target_seq = None if targets is None else targets["seq"]
    if args.gpus is not None or args.scheduler is not None:
        results = _run_on_dask(query_seq, target_seq, options, args)
    else:
        results = align(query_seq, target_seq, progress=False if args.no_progress else None,
                        **options)
    seconds = time.perf_counter() - started
    write_results(results, args.out, output_format, queries=queries,
                  targets=queries if targets is None else targets, mode=args.mode)
    print(f"gpualign: {len(results):,} alignments in {seconds:.2f} s -> {args.out} "
          f"({output_format})", file=sys.stderr)
    return 0


def _run_on_dask(queries, targets, options: dict, args: argparse.Namespace):
    """The job through the Dask accessor on a cluster: dask-cuda workers (``--gpus``) or an
    existing scheduler (``--scheduler``); Dask's progress bar on stderr."""
    import dask.dataframe as dd
    from distributed import progress

    from . import cluster

    gpus = None if args.gpus in (None, "all") else int(args.gpus)
    client = cluster(address=args.scheduler) if args.scheduler else cluster(gpus)
    try:
        partitions = max(1, 4 * len(client.scheduler_info()["workers"]))
        to_dask = dd.from_pandas
        if args.backend != "cpu":
            try:  # GPU workers take cuDF partitions
                import cudf
                import dask_cudf

                def to_dask(series, npartitions):
                    return dask_cudf.from_cudf(cudf.from_pandas(series), npartitions=npartitions,
                                               sort=False)
            except ImportError:
                pass
        how = options.pop("how")
        top_k = options.pop("top_k")
        dask_queries = to_dask(queries, npartitions=partitions)
        if how == "rowwise":
            job = dask_queries.aln.rowwise(to_dask(targets, npartitions=partitions), **options)
        elif how == "pairwise":
            job = dask_queries.aln.pairwise(**options)
        else:
            job = dask_queries.aln.search(to_dask(targets, npartitions=partitions), top_k=top_k,
                                          **options)
        future = client.compute(job)
        if not args.no_progress:
            progress(future)
        frame = future.result()
    finally:
        client.close()
    return frame.to_pandas() if hasattr(frame, "to_pandas") else frame


def _example(name: str) -> Path:
    return Path(str(resources.files("gpualign_df").joinpath("data", "examples", name)))


def run_demo(backend: str = "auto") -> str:
    """Align the shipped GASAL2 slice (500 read/reference pairs) and summarise the result.

    Examples
    --------
    >>> print(run_demo(backend="cpu"))  # doctest: +ELLIPSIS
    gpualign demo: 500 GASAL2 read/reference pairs (local, match 1, mismatch -4, gap 7+1)
    ...
    """
    queries = read_sequences(_example("gasal2_query_500.fasta.gz"))
    targets = read_sequences(_example("gasal2_target_500.fasta.gz"))
    options = dict(how="rowwise", mode="sw", match=1, mismatch=-4, gap_open=7, gap_extend=1,
                   backend=backend, progress=False)
    align(queries["seq"][:4], targets["seq"][:4], **options)  # compile (numba) before timing
    started = time.perf_counter()
    results = align(queries["seq"], targets["seq"], **options)
    seconds = time.perf_counter() - started
    cells = float((queries["seq"].str.len() * targets["seq"].str.len()).sum())
    score = results["score"].to_numpy(dtype=np.float64)
    identity = results["identity"].to_numpy(dtype=np.float64)
    quartiles = lambda values: " / ".join(f"{q:.3g}" for q in np.percentile(values, [0, 25, 50, 75, 100]))  # noqa: E731
    best = results.loc[results["score"].idxmax()]
    lines = [
        "gpualign demo: 500 GASAL2 read/reference pairs (local, match 1, mismatch -4, gap 7+1)",
        f"  time      {seconds * 1000:.1f} ms ({len(results) / seconds:,.0f} alignments/s, "
        f"{cells / seconds / 1e9:.3f} GCUPS, {resolve_backend(backend)} engine)",
        f"  score     min / q1 / median / q3 / max = {quartiles(score)}",
        f"  identity  min / q1 / median / q3 / max = {quartiles(identity)}",
        f"  best      pair {best['query']}: score {best['score']}, query "
        f"[{best['query_start']}, {best['query_end']}), target [{best['target_start']}, "
        f"{best['target_end']}), CIGAR {best['cigar']}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpualign`` command."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            print(run_demo(args.backend))
            return 0
        return _run_align(args)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"gpualign: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
