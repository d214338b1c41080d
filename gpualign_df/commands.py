"""What the ``gpualign`` command does once its arguments are parsed: check the flags and
the files, align, write, and word every error in the command's terms (flags, file names,
1-based record numbers). Imports only the standard library at module level; the library's
heavy parts are imported by the functions that use them."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

#: Formats whose records need the traceback (start coordinates, CIGAR, statistics).
TRACEBACK_FORMATS = ("sam", "paf", "blast6", "pairwise")

#: Library option names -> this command's flags, for messages that come from the library
#: (the command checks its own flag combinations first; these cover the rest).
API_FLAGS = {
    "how": "--how", "mode": "--mode", "free_ends": "--free-ends", "matrix": "--matrix",
    "match": "--match", "mismatch": "--mismatch", "gap_open": "--gap-open",
    "gap_extend": "--gap-extend", "top_k": "--top-k", "cigar_style": "--cigar-style",
    "clip": "--clip", "backend": "--backend", "format": "--format",
    "traceback_memory": "--traceback-memory", "preset": "--preset", "overhang": "--overhang",
}
#: Rewrites applied in order to a library message. Phrases first, then ``name=value`` and
#: ``name='value'`` spellings, then bare option names as whole words; the bare names are
#: limited to those with an underscore, which never occur in ordinary English, and to
#: match/mismatch where they are the subject of a rule (``mismatch must ...``, ``match (2)``).
_MESSAGE_REWRITES: tuple[tuple[str, Any], ...] = (
    (r"\balign with traceback=True\b", "run without --no-traceback"),
    (r"\btraceback=True\b", "no --no-traceback"),
    (r"\btraceback=False\b", "--no-traceback"),
    (r"\bmatch/mismatch\b", "--match/--mismatch"),
    (r"\beither matrix or\b", "either --matrix or"),
    (r"(?<!-)\b(match|mismatch)\b(?= must\b| \()", r"--\1"),
    (r"\b(backend)='(\w+)' or '(\w+)'", lambda m: f"--backend {m[2]} or --backend {m[3]}"),
    (r"\bpass format= ?", "pass --format "),
    (r"\b(" + "|".join(API_FLAGS) + r")=(['\"]?)([\w.*=+-]+)\2",
     lambda m: f"{API_FLAGS[m[1]]} {m[3]}"),
    (r"\b(gap_open|gap_extend|top_k|free_ends|cigar_style|traceback_memory)\b",
     lambda m: API_FLAGS[m[1]]),
)


class CliError(Exception):
    """A mistake in the command line, already worded for the user."""


def api_to_flags(message: str) -> str:
    """Reword a library message in this command's flags.

    Examples
    --------
    >>> api_to_flags("sam output needs the traceback columns (align with traceback=True)")
    'sam output needs the traceback columns (run without --no-traceback)'
    >>> api_to_flags("backend='cuda' but no usable CUDA GPU; use backend='cpu' or 'auto'")
    '--backend cuda but no usable CUDA GPU; use --backend cpu or --backend auto'
    >>> api_to_flags("gap_open must be given as a positive cost; pass a protein matrix "
    ...              "such as matrix='BLOSUM62'")
    '--gap-open must be given as a positive cost; pass a protein matrix such as --matrix BLOSUM62'
    """
    for pattern, replacement in _MESSAGE_REWRITES:
        message = re.sub(pattern, replacement, message)
    return message



def _job_shape(args: argparse.Namespace) -> str:
    """``--how`` resolved, checked against the files given."""
    how = args.how or ("rowwise" if args.targets else "pairwise")
    if how == "pairwise" and args.targets:
        raise CliError("--how pairwise aligns all pairs within one file: give QUERIES only "
                       "(or --how search for every query against every target)")
    if how != "pairwise" and not args.targets:
        raise CliError(f"--how {how} needs a TARGETS file after QUERIES")
    return how


def _check_flags(args: argparse.Namespace, how: str, output_format: str) -> None:
    """Refuse flag combinations the library would refuse (or silently ignore) later."""
    if args.top_k is not None and how != "search":
        raise CliError(f"--top-k applies to --how search only, not --how {how}")
    if args.overhang is not None:
        if args.mode is not None or args.free_ends:
            raise CliError("--overhang aligns by GATK's rules, whose ends follow the "
                           "strategy: drop --mode and --free-ends")
        if output_format != "tsv":
            raise CliError(f"--overhang writes tsv (GATK's offset is a column of its own), "
                           f"not {output_format}")
    if args.free_ends and args.mode not in ("sg", "semiglobal"):
        raise CliError(f"--free-ends applies to --mode sg only, not --mode {args.mode or 'sw'}")
    if args.matrix is not None and (args.match is not None or args.mismatch is not None):
        raise CliError("give either --matrix or --match/--mismatch, not both")
    if (args.match is None) != (args.mismatch is None):
        raise CliError("--match and --mismatch go together: give both")
    if args.no_traceback and output_format in TRACEBACK_FORMATS:
        raise CliError(f"{output_format} output needs the traceback (CIGAR, start "
                       f"coordinates): drop --no-traceback, or write tsv or parquet")
    if args.no_traceback and args.clip == "soft":
        raise CliError("--clip soft adds S operations to the CIGAR: drop --no-traceback")
    if output_format == "sam" and args.clip == "none":
        raise CliError("sam output needs soft clips (a SAM CIGAR spans the whole query): "
                       "drop --clip none")
    if args.gpus is not None and args.scheduler is not None:
        raise CliError("give either --gpus or --scheduler, not both")
    if args.plot is not None:
        import importlib.util

        if args.no_traceback:
            raise CliError("--plot draws the alignment path (the CIGAR): drop --no-traceback")
        if importlib.util.find_spec("matplotlib") is None:
            raise CliError('--plot needs matplotlib: pip install "gpualign_df[plot]"')
        if Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
            raise CliError(f"--plot writes .png, .svg or .pdf, not {args.plot!r}")


def _scoring_flags(args: argparse.Namespace) -> str:
    """The flags that chose the scoring scheme, as the user would write them."""
    if args.match is not None:
        return f"--match {args.match} --mismatch {args.mismatch}"
    return f"--matrix {args.matrix}" if args.matrix else "--matrix EDNAFULL (the default)"


def _check_residues(files: list[tuple[str, Any]], scoring: Any, scoring_flags: str) -> None:
    """Encode each file's sequences once before aligning, so that a character outside the
    alphabet is reported against the file, record and residue it came from (the library
    alone only knows a row of one of two collections that both count from 0)."""
    from .encode import InvalidResidueError, encode_sequences

    for path, frame in files:
        try:
            encode_sequences(frame["seq"], scoring)
        except InvalidResidueError as error:
            name = frame["name"].iloc[error.row]
            hint = ("; the sequences look like protein: pass --matrix BLOSUM62"
                    if error.looks_like_protein else "")
            raise CliError(
                f"{path}: record {error.row + 1} ({name!r}), residue {error.position + 1} "
                f"(both 1-based): character {error.character!r} is not in the alphabet of "
                f"{scoring_flags}, {error.alphabet}{hint}") from error


def describe(error: BaseException) -> str:
    """One line for an exception that reached the command."""
    if isinstance(error, MemoryError):  # the library's own (HostMemoryError) says what fits
        return api_to_flags(str(error)) if str(error) else (
            "out of memory; try --no-traceback, smaller inputs, or Dask (--gpus, --scheduler)")
    if isinstance(error, (ValueError, RuntimeError, OSError)) \
            and not isinstance(error, (OverflowError, SystemError, NotImplementedError)):
        return api_to_flags(str(error))
    # Anything else is a bug of ours, not of the command line: say so, and how to report it.
    return (f"internal error, {type(error).__name__}: {error} (please report it with the "
            f"output of the same command with --debug)")


# --------------------------------------------------------------------------------------
# the commands
# --------------------------------------------------------------------------------------

def run_align(args: argparse.Namespace) -> int:
    """Read, check, align and write. In memory the job is streamed: the result is written
    batch by batch (``align_batches`` into ``open_results``), so memory holds one batch, not
    the whole result; the Dask paths compute one frame and write it through the same writer.
    The file appears, complete, only when every batch was written (an error or Ctrl-C leaves
    no partial file and any existing file untouched)."""
    how = _job_shape(args)
    from .io import format_from_path, open_results, read_sequences

    output_format = args.format or format_from_path(args.out)
    _check_flags(args, how, output_format)
    from .api import align_batches
    from .scoring import make_scoring, preset_scores

    queries = read_sequences(args.queries)
    targets = read_sequences(args.targets) if args.targets else None
    if how == "rowwise" and len(queries) != len(targets):
        raise CliError(f"--how rowwise aligns record k of QUERIES with record k of TARGETS: "
                       f"{args.queries} has {len(queries):,} records, {args.targets} "
                       f"{len(targets):,}")
    match, mismatch, gap_open, gap_extend = preset_scores(
        args.preset, args.matrix, args.match, args.mismatch, args.gap_open, args.gap_extend)
    scoring = make_scoring(args.matrix, match=match, mismatch=mismatch, gap_open=gap_open,
                           gap_extend=gap_extend)
    files = [(args.queries, queries)] + ([] if targets is None else [(args.targets, targets)])
    _check_residues(files, scoring, _scoring_flags(args))
    clip = args.clip if args.clip is not None else ("soft" if output_format == "sam" else None)
    started = time.perf_counter()
    options = dict(how=how, mode=args.mode, matrix=args.matrix, match=args.match,
                   mismatch=args.mismatch, gap_open=args.gap_open, gap_extend=args.gap_extend,
                   preset=args.preset, free_ends=args.free_ends, top_k=args.top_k, traceback=not args.no_traceback,
                   cigar_style=args.cigar_style, clip=None if clip == "none" else clip,
                   backend=args.backend, traceback_memory=args.traceback_memory,
                   overhang=args.overhang)
    query_seq = queries["seq"]
    target_seq = None if targets is None else targets["seq"]
    with open_results(args.out, output_format, queries=queries,
                      targets=queries if targets is None else targets,
                      mode=args.mode or ("sg" if args.overhang else "sw"),
                      scoring=scoring, how=how) as writer:
        first_row = None  # for --plot
        if args.gpus is not None or args.scheduler is not None:
            frame = _run_on_dask(query_seq, target_seq, options, args)
            writer.write(frame)
            first_row = frame.iloc[:1]
            del frame
        else:
            for frame in align_batches(query_seq, target_seq,
                                       progress=False if args.no_progress else None, **options):
                writer.write(frame)
                if first_row is None and len(frame):
                    first_row = frame.iloc[:1].copy()
                # Dropped before the next batch is computed, so that two batches are never
                # held at once (the loop variable would keep this one alive until then).
                del frame
    if args.plot is not None and first_row is not None and len(first_row):
        from .dotplot import dot_plot

        dot_plot(first_row, query_seq, query_seq if target_seq is None else target_seq,
                 args.plot)
    seconds = time.perf_counter() - started
    print(f"gpualign: {writer.rows_written:,} alignments in {seconds:.2f} s -> {args.out} "
          f"({output_format})", file=sys.stderr)
    return 0


def _run_on_dask(queries, targets, options: dict, args: argparse.Namespace):
    """The job through the Dask accessor on a cluster: dask-cuda workers (``--gpus``) or an
    existing scheduler (``--scheduler``); Dask's progress bar on stderr."""
    import dask.dataframe as dd
    from distributed import progress

    from .cluster import cluster

    gpus = None if args.gpus in (None, "all") else int(args.gpus)
    client = cluster(address=args.scheduler) if args.scheduler else cluster(gpus)
    try:
        partitions = max(1, 4 * len(client.scheduler_info()["workers"]))
        def to_dask(series, npartitions):  # file order kept (no sort by label)
            return dd.from_pandas(series, npartitions=npartitions, sort=False)

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


def _example(name: str) -> str:
    from importlib import resources

    return str(resources.files("gpualign_df").joinpath("data", "examples", name))


def run_demo(backend: str = "auto") -> str:
    """Align the shipped GASAL2 slice (500 read/reference pairs) and summarise the result.

    Examples
    --------
    >>> print(run_demo(backend="cpu"))  # doctest: +ELLIPSIS
    gpualign demo: 500 GASAL2 read/reference pairs (local, match 1, mismatch -4, gap 7+1)
    ...
    """
    import numpy as np

    from .api import align
    from .engine import choose_engine
    from .io import read_sequences

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
        f"{cells / seconds / 1e9:.3f} GCUPS, {choose_engine(backend)} engine)",
        f"  score     min / q1 / median / q3 / max = {quartiles(score)}",
        f"  identity  min / q1 / median / q3 / max = {quartiles(identity)}",
        f"  best      pair {best['query']}: score {best['score']}, query "
        f"[{best['query_start']}, {best['query_end']}), target [{best['target_start']}, "
        f"{best['target_end']}), CIGAR {best['cigar']}",
    ]
    return "\n".join(lines)
