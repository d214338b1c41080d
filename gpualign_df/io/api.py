"""The writers' entry points: :func:`open_results` (batch by batch) and
:func:`write_results` (one frame).

Every option, the sequence frames and the output path are checked here, before anything
is created; the format's encoder and the output target are then handed to a
:class:`~gpualign_df.io.writer.ResultWriter`.
"""

from __future__ import annotations

import os

import pandas as pd

from ..scoring import Scoring, parse_mode
from .blast6 import Blast6Encoder
from .encoder import Encoder, Side, as_pandas
from .formats import HOWS, TEXT_FORMATS, format_from_path, parse_format
from .output import Destination
from .paf import PafEncoder
from .pairwise import PairwiseEncoder
from .parquet import ParquetEncoder
from .sam import SamEncoder
from .tsv import TsvEncoder
from .writer import ResultWriter

__all__ = ["open_results", "write_results"]

_ENCODERS: dict[str, type[Encoder]] = {
    "tsv": TsvEncoder, "parquet": ParquetEncoder, "sam": SamEncoder, "paf": PafEncoder,
    "blast6": Blast6Encoder, "pairwise": PairwiseEncoder,
}


def open_results(
    path: str | os.PathLike[str],
    format: str | None = None,  # noqa: A002 - the public name of the option
    *,
    queries: pd.DataFrame,
    targets: pd.DataFrame,
    mode: str = "sw",
    scoring: Scoring | None = None,
    how: str | None = None,
) -> ResultWriter:
    """Open an output file to write alignment results batch by batch.

    The returned :class:`ResultWriter` is a context manager: each
    :meth:`ResultWriter.write` appends the rows of one result frame, the header (TSV column
    line, SAM ``@HD``/``@SQ``/``@PG``, the Parquet schema) is written once, and a clean exit
    of the ``with`` block commits the file atomically (a temporary file beside `path` is
    renamed onto it), while an exception inside the block discards it and leaves any
    existing `path` untouched.  Frames that split the results between two queries' rows
    give the same file as one :func:`write_results` of their concatenation (for Parquet
    the same table; each frame is one row group); for SAM, see Notes on a query's rows
    split across frames.

    Parameters
    ----------
    path : str or os.PathLike
        Output file.  For the text formats a name ending in ``.gz`` is gzip-compressed.
        An existing target that is not a regular file (``/dev/stdout``, a FIFO) is
        written in place, as a stream, without atomicity.
    format : {"tsv", "parquet", "sam", "paf", "blast6", "pairwise"}, optional
        Output format (``"m8"`` is accepted for ``"blast6"``); inferred from the
        extension of `path` by :func:`format_from_path` when None.
    queries, targets : pandas.DataFrame
        The sequence frames the results refer to, as returned by
        :func:`~gpualign_df.io.read_sequences`: column ``name``, and ``seq`` (plus ``qual``,
        used by SAM) where needed.  Rows are looked up by label (the ``.loc`` sense); both
        may be the same frame (pairwise).
    mode : str, default "sw"
        The alignment mode the results were computed with (``"sw"``/``"local"``,
        ``"nw"``/``"global"``, ``"sg"``/``"semiglobal"``, as
        :func:`gpualign_df.scoring.parse_mode` reads them).  It is recorded in the SAM
        ``@PG`` line and in the Parquet schema metadata; it does not change any record.
    scoring : gpualign_df.scoring.Scoring, optional
        The scoring the results were computed with (from
        :func:`gpualign_df.scoring.make_scoring`); BLAST tabular output needs it for
        e-values and bit scores, and writes ``NA`` there without it; pairwise output
        (the aligned pairs in blocks, as :func:`gpualign_df.view` shows them) needs it for
        its match lines.
    how : {"rowwise", "pairwise", "search"}, optional
        The job's shape; it decides BLAST's search space (see Notes).

    Returns
    -------
    ResultWriter
        Nothing is created on disk before the first :meth:`ResultWriter.write` (or the
        commit, for a file with no rows).

    Raises
    ------
    ValueError
        Before anything is created: an unknown format, mode or `how`, missing columns of
        `queries`/`targets`, duplicate index labels, names that cannot be written (tabs or
        line breaks; for SAM also duplicate, empty or white-space target names, listed with
        their 1-based record numbers), a directory as `path` or a missing directory.
    TypeError
        If `scoring` is not a :class:`~gpualign_df.scoring.Scoring`.

    Notes
    -----
    Per format:

    ``tsv``
        Every column of the result frames, with ``query_name`` and ``target_name``
        inserted after ``query`` and ``target``; a header line; tab-separated; nulls are
        empty fields.  The frames' index is not written.
    ``parquet``
        The same columns through pyarrow, one row group per written frame; nullable
        integer columns stay nullable ``Int32`` when read back with pandas.  The mode is
        stored under the schema metadata key ``gpualign_df.mode``.
    ``sam``
        Header ``@HD VN:1.6 SO:unsorted``, one ``@SQ`` for *every* row of `targets`, in
        its order (target names must be unique, non-empty, free of white space and not
        start with ``*`` or ``=``), and ``@PG ID:gpualign PN:gpualign``.  Records follow
        the result rows.  Among the rows of one query (a run of consecutive rows with the
        same ``query`` label, as search and pairwise results come), the best-scoring
        mapped row is the primary alignment (the first one on ties), FLAG 0; every other
        mapped row is secondary, FLAG 256, MAPQ 0, SEQ and QUAL ``*`` (as minimap2 and BWA
        write secondaries).  The primary's MAPQ is 255 (unavailable) when its query has a
        single mapped row; otherwise, from the best and second-best scores ``s1``, ``s2``
        of the query's mapped rows, ``0`` if ``s2 >= s1`` or ``s1 <= 0``, else
        ``min(60, round(60 * (s1 - s2) / s1))`` (``round`` to even, as Python's).
        POS is 1-based; the CIGAR keeps ``=``/``X`` (or ``M``), with soft clips ``S``
        added for the unaligned query ends unless the stored CIGAR has them; SEQ is the
        whole query, QUAL the FASTQ quality or ``*``; tags ``AS:i`` (score) and ``NM:i``
        (mismatches + gap residues).  A deletion at either end of the alignment (possible
        in global mode) is not written as a leading/trailing ``D``, which many SAM
        consumers reject: it is dropped and POS moved past it, and ``NM`` counts only what
        the written CIGAR shows.  Rows with a null result, and rows whose alignment has no
        aligned column (no ``=``, ``X`` or ``M``; e.g. an empty sequence), are unmapped:
        a query whose run has no mapped row gets one unmapped record (FLAG 4, RNAME ``*``,
        POS 0, MAPQ 0, CIGAR ``*``, no tags), and unmapped rows of a query that has a
        mapped row are not written, so that each read has exactly one primary record.
    ``paf``
        The 12 standard columns (query name, length, start, end, strand ``+``, target
        name, length, start, end, ``matches``, ``length`` = alignment columns, MAPQ
        255), then ``AS:i:<score>`` and ``cg:Z:<cigar>`` (soft clips removed).  PAF has
        no unmapped records: null rows and rows without an aligned column are skipped.
    ``blast6``
        Exactly the 12 columns of BLAST ``-outfmt 6``: qseqid, sseqid, pident
        (``100 * identity`` printed ``%.3f``), length, mismatch, gapopen, qstart, qend,
        sstart, send (1-based, inclusive), evalue, bitscore.  The e-value and bit score
        come from Karlin-Altschul statistics (:mod:`gpualign_df.blast_stats`) for the
        scoring systems BLAST has parameters for, over the job's search space: for
        ``how="search"`` and ``"pairwise"`` the database is the whole `targets` frame (its
        total residues and its number of sequences), for ``"rowwise"`` and ``None`` each
        pair is a search of its own (one database sequence, the pair's target).  They are
        printed as BLAST+ prints them: the e-value ``0.0`` below 1e-180, ``%.2e`` below
        0.0009 (``2.53e-82``), then ``%.3f``, ``%.2f`` (from 0.1), ``%.1f`` (from 1) and
        ``%.0f`` (from 10); the bit score ``%.1f`` up to 99.9, the integer part above, and
        ``%.3e`` above 99999 (BLAST pads some of these to a fixed width with spaces; here
        they have no padding).  **Where `scoring` is None, or BLAST has no parameters for
        it (custom matrices, gap costs BLAST does not tabulate), both columns are ``NA``.**
        Null and empty rows are skipped, as in PAF.
    SAM's primary/secondary choice and MAPQ look at the rows of one query within one
    :meth:`ResultWriter.write` call.  A query's run split across two calls continues: the
    writer remembers the last query of the previous call and whether it already has a
    primary record, so the second part's rows are secondary; but the best-of-run rule
    and MAPQ need all of a query's rows in one call (a batch that ends inside a query's
    rows gets that query's primary from its first part).

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from gpualign_df import align
    >>> reads = pd.DataFrame({"name": ["r1", "r2"], "seq": ["ACGTAC", "TTGCA"]})
    >>> refs = pd.DataFrame({"name": ["chr1", "chr2"], "seq": ["GGACGTACGG", "ATTGCAT"]})
    >>> path = os.path.join(tempfile.mkdtemp(), "hits.sam")
    >>> with open_results(path, queries=reads, targets=refs, mode="sw", how="search") as out:
    ...     for batch in (reads.iloc[:1], reads.iloc[1:]):
    ...         out.write(align(batch["seq"], refs["seq"], how="search", mode="sw",
    ...                         match=2, mismatch=-3, gap_open=5, gap_extend=2, top_k=2))
    >>> for line in open(path).read().splitlines():
    ...     print(" ".join(line.split("\\t")[:6]))
    @HD VN:1.6 SO:unsorted
    @SQ SN:chr1 LN:10
    @SQ SN:chr2 LN:7
    @PG ID:gpualign PN:gpualign DS:alignment mode sw
    r1 0 chr1 3 50 6=
    r1 256 chr2 1 0 1=5S
    r2 0 chr2 2 48 5=
    r2 256 chr1 6 0 1=4S
    """
    fmt = parse_format(format) if format is not None else format_from_path(path)
    mode_name = parse_mode(mode).name
    if how is not None and how not in HOWS:
        raise ValueError(f"unknown how {how!r}; use one of {list(HOWS)} or None")
    if scoring is not None and not isinstance(scoring, Scoring):
        raise TypeError(f"scoring must be a gpualign_df.scoring.Scoring (from make_scoring) "
                        f"or None, not {type(scoring).__name__}")
    query_side = Side(as_pandas(queries, "queries"), "queries")
    target_side = Side(as_pandas(targets, "targets"), "targets")
    encoder = _ENCODERS[fmt](query_side, target_side, mode_name, scoring, how)
    destination = Destination(path)
    if destination.compress and fmt not in TEXT_FORMATS:
        raise ValueError(f"{fmt} output cannot be gzip-compressed by its name "
                         f"({os.fspath(path)!r}); drop the .gz")
    return ResultWriter(destination, fmt, encoder)


def write_results(
    results: pd.DataFrame,
    path: str | os.PathLike[str],
    format: str | None = None,  # noqa: A002 - the public name of the option
    *,
    queries: pd.DataFrame,
    targets: pd.DataFrame,
    mode: str = "sw",
    scoring: Scoring | None = None,
    how: str | None = None,
) -> None:
    """Write an alignment result frame as TSV, Parquet, SAM, PAF or BLAST tabular.

    The same as ``with open_results(path, format, ...) as w: w.write(results)`` (see
    :func:`open_results` for the parameters and the formats): every check runs before
    anything is created, and the file appears at `path` only complete, replacing the old
    one atomically; on any error an existing `path` is left as it was.

    Parameters
    ----------
    results : pandas.DataFrame
        The aligner's result frame (a cuDF frame is converted with ``to_pandas()``).
        ``query``/``target`` hold index labels of `queries`/`targets`.  TSV and Parquet
        accept score-only frames (``traceback=False``); SAM, PAF, BLAST and pairwise need the
        traceback columns (``query_start``, ``target_start``, ``cigar``, ``matches``,
        ``mismatches``, ``gap_opens``, ``gaps``, ``length``, ``identity``).
    path : str or os.PathLike
        Output file.  For the text formats a name ending in ``.gz`` is gzip-compressed.
    format : {"tsv", "parquet", "sam", "paf", "blast6", "pairwise"}, optional
        Output format (``"m8"`` is accepted for ``"blast6"``); inferred from the
        extension of `path` by :func:`format_from_path` when None.
    queries, targets : pandas.DataFrame
        The sequence frames the results refer to, as returned by
        :func:`~gpualign_df.io.read_sequences`.
    mode : str, default "sw"
        The alignment mode the results were computed with; recorded in SAM and Parquet.
    scoring : gpualign_df.scoring.Scoring, optional
        The scoring of the job, for BLAST's e-values and bit scores (``NA`` without it)
        and the match lines of pairwise output (needed there).
    how : {"rowwise", "pairwise", "search"}, optional
        The job's shape, for BLAST's search space.

    Raises
    ------
    ValueError
        For an unknown format or mode, missing columns, result labels that are not in
        `queries`/`targets`, coordinates beyond the sequence lengths, and SAM target
        names that are duplicated or cannot be written.
    OSError
        If the file cannot be written; an existing `path` is left untouched.

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from gpualign_df.scoring import make_scoring
    >>> queries = pd.DataFrame({"name": ["read1"], "description": [""], "seq": ["TTACGTAA"]})
    >>> targets = pd.DataFrame({"name": ["ref"], "description": [""], "seq": ["GGACGTCC"]})
    >>> results = pd.DataFrame({
    ...     "query": [0], "target": [0], "score": pd.array([4], dtype="Int32"),
    ...     "query_start": pd.array([2], dtype="Int32"), "query_end": pd.array([6], dtype="Int32"),
    ...     "target_start": pd.array([2], dtype="Int32"),
    ...     "target_end": pd.array([6], dtype="Int32"), "cigar": ["4="],
    ...     "matches": pd.array([4], dtype="Int32"), "mismatches": pd.array([0], dtype="Int32"),
    ...     "gap_opens": pd.array([0], dtype="Int32"), "gaps": pd.array([0], dtype="Int32"),
    ...     "length": pd.array([4], dtype="Int32"), "identity": pd.array([1.0], dtype="Float64"),
    ... })
    >>> path = os.path.join(tempfile.mkdtemp(), "hits.sam")
    >>> write_results(results, path, queries=queries, targets=targets)
    >>> print(open(path).read().splitlines()[-1].replace("\\t", " "))
    read1 0 ref 3 255 2S4=2S * 0 0 TTACGTAA * AS:i:4 NM:i:0
    >>> write_results(results, path[:-4] + ".m8", queries=queries, targets=targets)
    >>> print(open(path[:-4] + ".m8").read().replace("\\t", " "), end="")
    read1 ref 100.000 4 0 0 3 6 3 6 NA NA
    """
    with open_results(path, format, queries=queries, targets=targets, mode=mode,
                      scoring=scoring, how=how) as writer:
        writer.write(results)

