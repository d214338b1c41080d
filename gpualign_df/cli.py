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
from typing import Sequence

# The choices the parser offers, written out here so that parsing needs no import of the
# library (tests/test_cli.py checks that each equals the library's own list).
HOWS = ("rowwise", "pairwise", "search")
MODES = ("sw", "local", "nw", "global", "sg", "semiglobal")
FREE_ENDS = ("query_start", "query_end", "target_start", "target_end")
MATRICES = ("BLOSUM45", "BLOSUM50", "BLOSUM62", "BLOSUM80", "BLOSUM90", "PAM30", "PAM70",
            "PAM250", "EDNAFULL", "NUC.4.4")
FORMATS = ("tsv", "parquet", "sam", "paf", "blast6", "pairwise")
BACKENDS = ("auto", "cpu", "cuda")
CIGAR_STYLES = ("=", "M")
CLIPS = ("none", "soft")
OVERHANGS = ("softclip", "indel", "leading_indel", "ignore")
PRESETS = ("gatk-haplotype-to-reference", "gatk-read-to-haplotype", "gatk-standard-ngs",
           "gatk-original")
#: Substitution scores are held as 16-bit table entries: the library refuses larger ones.
MATRIX_ENTRY_LIMIT = 32767
#: DP scores stay below 2**29 in magnitude; a single gap costing more can never be scored.
GAP_COST_LIMIT = (1 << 29) - 1
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


#: Suffixes of --traceback-memory: powers of 1024 (``256M`` is 256 MiB).
BYTE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _byte_count(text: str) -> int:
    """An argparse type for a number of bytes: a positive integer, or a number with a suffix
    K, M, G or T (powers of 1024; ``B``/``iB`` after it and any case accepted): ``256M``,
    ``2G``, ``1.5G``, ``1000000``. Refused by argparse, flag named, when it is anything else.

    Examples
    --------
    >>> _byte_count("256M"), _byte_count("2gib"), _byte_count("1.5K"), _byte_count("4096")
    (268435456, 2147483648, 1536, 4096)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([KMGT])(?:I?B)?|B)?\s*", text.upper())
    value = int(float(match[1]) * BYTE_SUFFIXES[match[2] or ""]) if match else 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive number of bytes such as 256M, 2G or 1000000 (K, M, G, T: "
            f"powers of 1024), got {text!r}")
    return value


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
    run.add_argument("--mode", default=None, choices=MODES,
                     help="sw/local: Smith-Waterman; nw/global: Needleman-Wunsch, end gaps "
                          "charged; sg/semiglobal: end gaps free (see --free-ends) "
                          "(default: sw)")
    run.add_argument("--overhang", default=None, choices=OVERHANGS,
                     help="align as GATK HaplotypeCaller's Smith-Waterman does, with this "
                          "strategy for the query's ends that run past the target (instead of "
                          "--mode; --match/--mismatch or --preset; TSV output, with GATK's "
                          "offset column) (default: none)")
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
    run.add_argument("--gap-open", type=gap, default=None, metavar="COST",
                     help="cost of a gap's first position, >= 0 (default: 10)")
    run.add_argument("--gap-extend", type=gap, default=None, metavar="COST",
                     help="cost of each further position of a gap, >= 0 (default: 1)")
    run.add_argument("--preset", choices=PRESETS, default=None, metavar="NAME",
                     help="named scores and gap costs instead of --matrix, --match, "
                          "--mismatch, --gap-open and --gap-extend, GATK HaplotypeCaller's: "
                          + ", ".join(PRESETS) + " (their values: the README) "
                          "(default: none)")
    run.add_argument("--top-k", type=_int_within(1, None, "the number of hits per query"),
                     default=None, metavar="K",
                     help="--how search: keep the best K targets per query (default: all)")
    run.add_argument("--no-traceback", action="store_true",
                     help="scores and end coordinates only, much faster; TSV and Parquet only "
                          "(default: off)")
    run.add_argument("--traceback-memory", type=_byte_count, default=None, metavar="BYTES",
                     help="bytes that the traceback of one pair may take, e.g. 256M, 2G or "
                          "1000000 (K, M, G, T: powers of 1024); a pair whose 4-bit traceback "
                          "matrix is larger is traced back in linear space, with the same "
                          "result (default: a quarter of the free memory of the engine)")
    run.add_argument("--cigar-style", choices=CIGAR_STYLES, default="=",
                     help="'=': extended CIGAR, = for identical residues and X for others; "
                          "'M': classic SAM, M for both")
    run.add_argument("--clip", choices=CLIPS, default=None,
                     help="soft: add S operations for the unaligned query ends to the CIGAR, "
                          "so it spans the whole query (default: soft for SAM output, which "
                          "needs it, none otherwise)")
    run.add_argument("--out", required=True, metavar="PATH",
                     help="output file: .tsv .parquet .sam .paf .blast6 .m8 .txt (pairwise: "
                          "the aligned pairs in blocks), text formats optionally .gz "
                          "(required, no default)")
    run.add_argument("--format", choices=FORMATS, default=None,
                     help="output format (default: from the --out extension)")
    run.add_argument("--plot", default=None, metavar="FILE",
                     help="also draw a k-mer dot plot of the first result row's pair with its "
                          "alignment path to FILE (.png, .svg or .pdf; needs matplotlib: pip "
                          "install \"gpualign_df[plot]\") (default: none)")
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
    from .commands import CliError, describe, run_align, run_demo  # standard library only

    args = None
    try:
        args = build_parser().parse_args(argv)
        if args.command == "demo":
            print(run_demo(args.backend))
            return 0
        return run_align(args)
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
        print(f"gpualign: error: {describe(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
