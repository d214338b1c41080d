"""The ``gpualign`` command: align FASTA/FASTQ files, write TSV/Parquet/SAM/PAF/BLAST tabular.

Examples
--------
::

    gpualign demo
    gpualign align reads.fq.gz refs.fa --how search --mode sw --matrix EDNAFULL --top-k 5 \\
        --out hits.paf

What the command promises:

* ``gpualign --help`` imports only the standard library here (the package's heavy parts,
  pandas, numba, pyarrow, are imported after the arguments are parsed), so help and usage
  errors come back at once.
* In memory, results are streamed to the output batch by batch
  (:func:`gpualign_df.api.align_batches` into :func:`gpualign_df.io.open_results`), so a
  job of any number of rows runs in the memory of one batch; the file is committed
  atomically when complete, and an error or Ctrl-C leaves no partial file.
* Every error is one line, ``gpualign: error: <message>``, in the command's own terms (flags,
  file names, 1-based record numbers), with exit status 2; Ctrl-C prints
  ``gpualign: interrupted`` with exit status 130. ``--debug`` (or ``GPUALIGN_DEBUG=1``)
  re-raises instead, with the Python traceback, for bug reports.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Any, Sequence

# The choices the parser offers, written out here so that parsing needs no import of the
# library (tests/test_cli.py checks that each equals the library's own list).
HOWS = ("rowwise", "pairwise", "search")
MODES = ("sw", "local", "nw", "global", "sg", "semiglobal")
FREE_ENDS = ("query_start", "query_end", "target_start", "target_end")
MATRICES = ("BLOSUM45", "BLOSUM50", "BLOSUM62", "BLOSUM80", "BLOSUM90", "PAM30", "PAM70",
            "PAM250", "EDNAFULL", "NUC.4.4")
FORMATS = ("tsv", "parquet", "sam", "paf", "blast6")
BACKENDS = ("auto", "cpu", "cuda")
CIGAR_STYLES = ("=", "M")
CLIPS = ("none", "soft")
#: Substitution scores are held as 16-bit table entries: the library refuses larger ones.
MATRIX_ENTRY_LIMIT = 32767
#: DP scores stay below 2**29 in magnitude; a single gap costing more can never be scored.
GAP_COST_LIMIT = (1 << 29) - 1
#: Formats whose records need the traceback (start coordinates, CIGAR, statistics).
TRACEBACK_FORMATS = ("sam", "paf", "blast6")

#: Library option names -> this command's flags, for messages that come from the library
#: (the command checks its own flag combinations first; these cover the rest).
API_FLAGS = {
    "how": "--how", "mode": "--mode", "free_ends": "--free-ends", "matrix": "--matrix",
    "match": "--match", "mismatch": "--mismatch", "gap_open": "--gap-open",
    "gap_extend": "--gap-extend", "top_k": "--top-k", "cigar_style": "--cigar-style",
    "clip": "--clip", "backend": "--backend", "format": "--format",
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
    (r"\b(gap_open|gap_extend|top_k|free_ends|cigar_style)\b", lambda m: API_FLAGS[m[1]]),
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


# --------------------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse with the command's one error form, ``gpualign: error: ...``, exit status 2
    (subcommand parsers are of this class too: add_subparsers takes the parent's class)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"gpualign: error: {message}\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default: argparse's ``(default: X)`` where the
    default is a value; where it is not (None, a switch that is off), the help text says the
    default in its own words, which tests/test_cli.py checks for every option."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class _VersionAction(argparse.Action):
    """``--version``: reads the version only when asked (the package's own attribute)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from . import __version__

        print(f"gpualign_df {__version__}")  # on stdout, as argparse's own version action
        parser.exit()


def _int_within(low: int, high: int | None, what: str):
    """An argparse type: an integer in [low, high], refused by argparse (flag named) when
    outside, so that no out-of-range number reaches the library."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"within {low}..{high}"
            raise argparse.ArgumentTypeError(f"{what} must be {bound}, got {value}")
        return value

    parse.__name__ = what  # argparse names the type in some messages
    return parse


def _gpu_count(text: str) -> str | int:
    if text == "all":
        return text
    return _int_within(1, None, "the GPU count")(text)


def build_parser() -> argparse.ArgumentParser:
    """The ``gpualign`` argument parser (subcommands ``align`` and ``demo``).

    Examples
    --------
    >>> build_parser().parse_args(["demo", "--backend", "cpu"]).backend
    'cpu'
    """
    parser = _Parser(prog="gpualign", formatter_class=_HelpFormatter,
                     description="Pairwise sequence alignment with traceback (GPU when "
                                 "available, else CPU).")
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    common = _Parser(add_help=False)
    common.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="engine: auto = the GPU when one is usable, else the CPU; cpu; "
                             "cuda = the GPU or an error")
    common.add_argument("--debug", action="store_true",
                        help="on an error, show the Python traceback (for bug reports; also "
                             "GPUALIGN_DEBUG=1) (default: off)")

    run = commands.add_parser(
        "align", parents=[common], formatter_class=_HelpFormatter,
        help="align sequences from FASTA/FASTQ files",
        description="Align FASTA/FASTQ sequences (plain or gzip) and write TSV, Parquet, SAM, "
                    "PAF or BLAST tabular. Coordinates are 0-based, end exclusive in TSV and "
                    "Parquet (1-based in SAM and BLAST). A gap of length k costs "
                    "GAP_OPEN + (k-1) * GAP_EXTEND. Results are written batch by batch, in "
                    "bounded memory; the output file appears only once complete.")
    run.add_argument("queries", metavar="QUERIES", help="FASTA/FASTQ file (plain or .gz)")
    run.add_argument("targets", nargs="?", metavar="TARGETS",
                     help="FASTA/FASTQ file (default: none, for --how pairwise)")
    run.add_argument("--how", choices=HOWS, default=None,
                     help="rowwise: record k of QUERIES against record k of TARGETS; pairwise: "
                          "all pairs within QUERIES; search: every query against every target "
                          "(default: rowwise with two files, pairwise with one)")
    run.add_argument("--mode", default="sw", choices=MODES,
                     help="sw/local: Smith-Waterman; nw/global: Needleman-Wunsch, end gaps "
                          "charged; sg/semiglobal: end gaps free (see --free-ends)")
    run.add_argument("--free-ends", nargs="+", choices=FREE_ENDS, default=None, metavar="END",
                     help="--mode sg: which ends are free, any of " + ", ".join(FREE_ENDS) +
                          "; target_start target_end for read-to-reference (default: all "
                          "four)")
    run.add_argument("--matrix", type=str.upper, choices=MATRICES, default=None, metavar="NAME",
                     help="substitution matrix, one of " + ", ".join(MATRICES) + " (any case) "
                          "(default: EDNAFULL, unless --match/--mismatch)")
    entry = _int_within(-MATRIX_ENTRY_LIMIT, MATRIX_ENTRY_LIMIT, "a substitution score")
    run.add_argument("--match", type=entry, default=None, metavar="SCORE",
                     help="DNA match score, with --mismatch, instead of --matrix (ACGT, U read "
                          "as T, IUPAC codes score MISMATCH always) (default: none, --matrix)")
    run.add_argument("--mismatch", type=entry, default=None, metavar="SCORE",
                     help="DNA mismatch score, e.g. -4 (default: none, --matrix)")
    gap = _int_within(0, GAP_COST_LIMIT, "a gap cost")
    run.add_argument("--gap-open", type=gap, default=10, metavar="COST",
                     help="cost of a gap's first position, >= 0")
    run.add_argument("--gap-extend", type=gap, default=1, metavar="COST",
                     help="cost of each further position of a gap, >= 0")
    run.add_argument("--top-k", type=_int_within(1, None, "the number of hits per query"),
                     default=None, metavar="K",
                     help="--how search: keep the best K targets per query (default: all)")
    run.add_argument("--no-traceback", action="store_true",
                     help="scores and end coordinates only, much faster; TSV and Parquet only "
                          "(default: off)")
    run.add_argument("--cigar-style", choices=CIGAR_STYLES, default="=",
                     help="'=': extended CIGAR, = for identical residues and X for others; "
                          "'M': classic SAM, M for both")
    run.add_argument("--clip", choices=CLIPS, default=None,
                     help="soft: add S operations for the unaligned query ends to the CIGAR, "
                          "so it spans the whole query (default: soft for SAM output, which "
                          "needs it, none otherwise)")
    run.add_argument("--out", required=True, metavar="PATH",
                     help="output file: .tsv .parquet .sam .paf .blast6 .m8, text formats "
                          "optionally .gz (required, no default)")
    run.add_argument("--format", choices=FORMATS, default=None,
                     help="output format (default: from the --out extension)")
    run.add_argument("--no-progress", action="store_true",
                     help="never show a progress bar (default: off; the bar appears on "
                          "stderr when a job runs longer than 2 s)")
    run.add_argument("--gpus", type=_gpu_count, default=None, metavar="N",
                     help="run through Dask on N GPUs of this node, N or 'all' (needs "
                          "dask-cuda) (default: no Dask, in this process)")
    run.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="run through Dask on the cluster of this scheduler address, e.g. "
                          "tcp://host:8786 (default: no Dask, in this process)")

    commands.add_parser("demo", parents=[common], formatter_class=_HelpFormatter,
                        help="align a small real data set shipped with the package",
                        description="Align the 500 GASAL2 read/reference pairs shipped with "
                                    "the package and print timing and score summaries.")
    return parser


# --------------------------------------------------------------------------------------
# checks in the command's terms
# --------------------------------------------------------------------------------------

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
    if args.free_ends and args.mode not in ("sg", "semiglobal"):
        raise CliError(f"--free-ends applies to --mode sg only, not --mode {args.mode}")
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


def _describe(error: BaseException) -> str:
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

def _run_align(args: argparse.Namespace) -> int:
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
    from .scoring import make_scoring

    queries = read_sequences(args.queries)
    targets = read_sequences(args.targets) if args.targets else None
    if how == "rowwise" and len(queries) != len(targets):
        raise CliError(f"--how rowwise aligns record k of QUERIES with record k of TARGETS: "
                       f"{args.queries} has {len(queries):,} records, {args.targets} "
                       f"{len(targets):,}")
    scoring = make_scoring(args.matrix, match=args.match, mismatch=args.mismatch,
                           gap_open=args.gap_open, gap_extend=args.gap_extend)
    files = [(args.queries, queries)] + ([] if targets is None else [(args.targets, targets)])
    _check_residues(files, scoring, _scoring_flags(args))
    clip = args.clip if args.clip is not None else ("soft" if output_format == "sam" else None)
    started = time.perf_counter()
    options = dict(how=how, mode=args.mode, matrix=args.matrix, match=args.match,
                   mismatch=args.mismatch, gap_open=args.gap_open, gap_extend=args.gap_extend,
                   free_ends=args.free_ends, top_k=args.top_k, traceback=not args.no_traceback,
                   cigar_style=args.cigar_style, clip=None if clip == "none" else clip,
                   backend=args.backend)
    query_seq = queries["seq"]
    target_seq = None if targets is None else targets["seq"]
    with open_results(args.out, output_format, queries=queries,
                      targets=queries if targets is None else targets, mode=args.mode,
                      scoring=scoring, how=how) as writer:
        if args.gpus is not None or args.scheduler is not None:
            writer.write(_run_on_dask(query_seq, target_seq, options, args))
        else:
            for frame in align_batches(query_seq, target_seq,
                                       progress=False if args.no_progress else None, **options):
                writer.write(frame)
                # Dropped before the next batch is computed, so that two batches are never
                # held at once (the loop variable would keep this one alive until then).
                del frame
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


def _debug_requested(args: argparse.Namespace | None) -> bool:
    return bool(getattr(args, "debug", False)) \
        or os.environ.get("GPUALIGN_DEBUG", "") not in ("", "0")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpualign`` command; returns the exit status.

    0 on success, 2 on any error (printed as ``gpualign: error: <message>``, no traceback
    unless ``--debug`` or ``GPUALIGN_DEBUG=1``), 130 on Ctrl-C.

    Examples
    --------
    >>> main(["align", "reads.fa", "refs.fa", "--how", "pairwise", "--out", "x.tsv"])
    2

    (and ``gpualign: error: --how pairwise aligns all pairs within one file: give QUERIES
    only ...`` on stderr).
    """
    args = None
    try:
        args = build_parser().parse_args(argv)
        if args.command == "demo":
            print(run_demo(args.backend))
            return 0
        return _run_align(args)
    except CliError as error:
        print(f"gpualign: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if _debug_requested(args):
            raise
        print("gpualign: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # every other error: one line in the command's terms
        if _debug_requested(args):
            raise
        print(f"gpualign: error: {_describe(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
