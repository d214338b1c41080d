"""Sequence readers and alignment result writers.

Readers turn FASTA/FASTQ files (plain or gzip) into pandas frames; writers turn the
result frame of the aligner into TSV, Parquet, SAM, PAF or BLAST tabular (``outfmt 6``).

This module depends only on numpy, pandas, pyarrow and needletail.  Text output is
assembled column-wise with ``pyarrow.compute`` string kernels (no per-row Python) and
written in blocks of rows, so frames of millions of rows are written at I/O speed.

Conventions of the result frame (see the package design notes): ``query``/``target`` are
index labels into the sequence frames, coordinates are 0-based and end-exclusive, and the
CIGAR covers exactly ``[query_start, query_end) x [target_start, target_end)`` (``I`` = a
residue in the query only, ``D`` = a residue in the target only).
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path
from typing import IO

import needletail
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["FORMATS", "format_from_path", "read_sequences", "write_results"]

#: Output formats understood by :func:`write_results`.
FORMATS: tuple[str, ...] = ("tsv", "parquet", "sam", "paf", "blast6")

_EXTENSIONS: dict[str, str] = {
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".sam": "sam",
    ".paf": "paf",
    ".blast6": "blast6",
    ".m8": "blast6",
}
_FORMAT_ALIASES: dict[str, str] = {**{f: f for f in FORMATS}, "m8": "blast6", "blast": "blast6"}
_TEXT_FORMATS = frozenset({"tsv", "sam", "paf", "blast6"})
_MODES: dict[str, str] = {
    "sw": "sw", "local": "sw", "nw": "nw", "global": "nw", "sg": "sg", "semiglobal": "sg",
}
_SCORE_ONLY = ("query", "target", "score", "query_end", "target_end")
_TRACEBACK = ("query", "target", "score", "query_start", "query_end", "target_start",
              "target_end", "cigar", "matches", "mismatches", "gap_opens", "gaps", "length",
              "identity")
_CHUNK_ROWS = 1 << 17
_WHITESPACE = re.compile(r"\s+")


# --------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------

def read_sequences(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a FASTA or FASTQ file, plain or gzip-compressed, into a frame.

    The format and the compression are detected from the content, not the file name.

    Parameters
    ----------
    path : str or os.PathLike
        The file to read.

    Returns
    -------
    pandas.DataFrame
        One row per record, with a ``RangeIndex`` (these labels are what the aligner
        reports in its ``query``/``target`` columns) and the columns

        ``name``
            the first whitespace-separated token of the header line;
        ``description``
            the rest of the header line, stripped (``""`` when there is none);
        ``seq``
            the sequence as a string (for FASTA, line breaks and any whitespace inside
            the sequence lines are removed; the case is kept);
        ``qual``
            the quality string, present only when the file is FASTQ.

    Raises
    ------
    ValueError
        If the file is missing, is not a regular file, is empty, or is not valid FASTA or
        FASTQ (including truncated gzip streams and FASTQ records whose quality length
        differs from the sequence length).  The message names the file.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "reads.fa")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write(">r1 first read\\nACGT\\nAC\\n>r2\\nGGCC\\n")
    >>> frame = read_sequences(path)
    >>> frame.columns.tolist()
    ['name', 'description', 'seq']
    >>> frame["name"].tolist(), frame["description"].tolist(), frame["seq"].tolist()
    (['r1', 'r2'], ['first read', ''], ['ACGTAC', 'GGCC'])
    """
    where = os.fspath(path)
    if not os.path.exists(where):
        raise ValueError(f"cannot read sequences from {where!r}: no such file")
    if not os.path.isfile(where):
        raise ValueError(f"cannot read sequences from {where!r}: not a regular file")
    if os.path.getsize(where) == 0:
        raise ValueError(f"cannot read sequences from {where!r}: the file is empty")

    names: list[str] = []
    descriptions: list[str] = []
    seqs: list[str] = []
    quals: list[str] = []
    fastq: bool | None = None
    try:
        for record in needletail.parse_fastx_file(where):
            if fastq is None:
                fastq = record.qual is not None
            header = record.id.split(None, 1)
            names.append(header[0] if header else "")
            descriptions.append(header[1].strip() if len(header) > 1 else "")
            seq = record.seq
            if fastq:
                quals.append(record.qual)
            elif _WHITESPACE.search(seq) is not None:
                seq = _WHITESPACE.sub("", seq)
            seqs.append(seq)
    except needletail.NeedletailError as error:
        raise ValueError(f"{where!r} is not a valid FASTA/FASTQ file: {error}") from error

    columns: dict[str, list[str]] = {"name": names, "description": descriptions, "seq": seqs}
    if fastq:
        columns["qual"] = quals
    return pd.DataFrame(columns, index=pd.RangeIndex(len(names)))


# --------------------------------------------------------------------------------------
# writers: public entry points
# --------------------------------------------------------------------------------------

def format_from_path(path: str | os.PathLike[str]) -> str:
    """Infer the output format of :func:`write_results` from a file name.

    Parameters
    ----------
    path : str or os.PathLike
        The output path.  Recognised extensions (case-insensitive): ``.tsv`` -> ``"tsv"``,
        ``.parquet`` -> ``"parquet"``, ``.sam`` -> ``"sam"``, ``.paf`` -> ``"paf"``,
        ``.blast6`` and ``.m8`` -> ``"blast6"``.  The text formats may carry a further
        ``.gz`` (``reads.tsv.gz``, ``hits.paf.gz``), in which case the output is
        gzip-compressed.

    Returns
    -------
    str
        One of :data:`FORMATS`.

    Raises
    ------
    ValueError
        If the extension is not recognised; the message lists the supported ones.

    Examples
    --------
    >>> format_from_path("hits.tsv.gz"), format_from_path("hits.M8")
    ('tsv', 'blast6')
    """
    name = Path(os.fspath(path)).name.lower()
    compressed = name.endswith(".gz")
    stem = name[:-3] if compressed else name
    fmt = _EXTENSIONS.get(os.path.splitext(stem)[1])
    if fmt is None or (compressed and fmt not in _TEXT_FORMATS):
        supported = ", ".join([*_EXTENSIONS, ".tsv.gz", ".sam.gz", ".paf.gz", ".blast6.gz",
                               ".m8.gz"])
        raise ValueError(f"cannot infer the output format of {os.fspath(path)!r}; "
                         f"supported extensions: {supported} (or pass format= one of "
                         f"{', '.join(FORMATS)})")
    return fmt


def write_results(
    results: pd.DataFrame,
    path: str | os.PathLike[str],
    format: str | None = None,  # noqa: A002 - the public name of the option
    *,
    queries: pd.DataFrame,
    targets: pd.DataFrame,
    mode: str = "sw",
) -> None:
    """Write an alignment result frame as TSV, Parquet, SAM, PAF or BLAST tabular.

    Parameters
    ----------
    results : pandas.DataFrame
        The aligner's result frame (a cuDF frame is converted with ``to_pandas()``).
        ``query``/``target`` hold index labels of `queries`/`targets`.  TSV and Parquet
        accept score-only frames (``traceback=False``); SAM, PAF and BLAST need the
        traceback columns (``query_start``, ``target_start``, ``cigar``, ``matches``,
        ``mismatches``, ``gap_opens``, ``gaps``, ``length``, ``identity``).
    path : str or os.PathLike
        Output file.  For the text formats a name ending in ``.gz`` is gzip-compressed.
    format : {"tsv", "parquet", "sam", "paf", "blast6"}, optional
        Output format (``"m8"`` is accepted for ``"blast6"``); inferred from the
        extension of `path` by :func:`format_from_path` when None.
    queries, targets : pandas.DataFrame
        The sequence frames the results refer to, as returned by :func:`read_sequences`:
        column ``name``, and ``seq`` (plus ``qual``, used by SAM) where needed.  Rows are
        looked up by label (the ``.loc`` sense); both may be the same frame.
    mode : str, default "sw"
        The alignment mode the results were computed with (``"sw"``/``"local"``,
        ``"nw"``/``"global"``, ``"sg"``/``"semiglobal"``).  It is recorded in the SAM
        ``@PG`` line and in the Parquet schema metadata; it does not change any record.

    Raises
    ------
    ValueError
        For an unknown format or mode, missing columns, result labels that are not in
        `queries`/`targets`, coordinates beyond the sequence lengths, and SAM reference
        names that are used twice with different lengths.

    Notes
    -----
    Per format:

    ``tsv``
        Every column of `results`, with ``query_name`` and ``target_name`` inserted
        after ``query`` and ``target``; a header line; tab-separated; nulls are empty
        fields.  The frame's index is not written.
    ``parquet``
        The same columns through pyarrow; nullable integer columns stay nullable
        ``Int32`` when read back with pandas.  The mode is stored under the schema
        metadata key ``gpualign_df.mode``.
    ``sam``
        Header ``@HD VN:1.6 SO:unsorted``, one ``@SQ`` per distinct target *that has an
        aligned record* (in the order of the `targets` frame), and ``@PG ID:gpualign
        PN:gpualign``.  One record per result row, in row order: FLAG 0, MAPQ 255, POS
        1-based, the CIGAR with ``=``/``X`` (or ``M``) kept, soft clips ``S`` added for
        the unaligned query ends unless the stored CIGAR already has them, SEQ the whole
        query, QUAL the FASTQ quality or ``*``, and tags ``AS:i`` (score) and ``NM:i``
        (mismatches + gap residues).  A deletion at either end of the alignment
        (possible in global mode) is not written as a leading/trailing ``D``, which many
        SAM consumers reject: it is dropped and POS moved past it, and ``NM`` counts
        only what the written CIGAR shows.  Rows with a null result, and rows whose
        alignment has no aligned column (no ``=``, ``X`` or ``M``; e.g. an empty
        sequence), are written unmapped: FLAG 4, RNAME ``*``, POS 0, MAPQ 0, CIGAR
        ``*``, no tags.
    ``paf``
        The 12 standard columns (query name, length, start, end, strand ``+``, target
        name, length, start, end, ``matches``, ``length`` = alignment columns, MAPQ
        255), then ``AS:i:<score>`` and ``cg:Z:<cigar>`` (soft clips removed).  PAF has
        no unmapped records: null rows and rows without an aligned column are skipped.
    ``blast6``
        Exactly the 12 columns of BLAST ``-outfmt 6``: qseqid, sseqid, pident
        (``100 * identity`` printed ``%.3f``), length, mismatch, gapopen, qstart, qend,
        sstart, send (1-based, inclusive), evalue, bitscore.  **There is no statistical
        model behind these alignments: evalue is always written as ``-1`` and bitscore
        holds the raw alignment score**, so filters on these two columns written for
        BLAST output do not apply.  Null and empty rows are skipped, as in PAF.

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
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
    read1 ref 100.000 4 0 0 3 6 3 6 -1 4
    """
    fmt = _parse_format(format) if format is not None else format_from_path(path)
    mode_name = _parse_mode(mode)
    results = _as_pandas(results, "results")
    queries = _as_pandas(queries, "queries")
    targets = _as_pandas(targets, "targets")
    _require(results, _SCORE_ONLY, "results")
    if fmt in ("sam", "paf", "blast6"):
        missing = [c for c in _TRACEBACK if c not in results.columns]
        if missing:
            raise ValueError(f"{fmt} output needs the traceback columns of the result frame "
                             f"(align with traceback=True); missing: {missing}")
    target = os.fspath(path)
    if fmt == "parquet":
        _write_parquet(results, target, queries, targets, mode_name)
        return
    compress = target.lower().endswith(".gz")
    with _open_output(target, compress) as fh:
        if fmt == "tsv":
            _write_tsv(fh, results, queries, targets)
        elif fmt == "sam":
            _write_sam(fh, results, queries, targets, mode_name)
        elif fmt == "paf":
            _write_paf(fh, results, queries, targets)
        else:
            _write_blast6(fh, results, queries, targets)


# --------------------------------------------------------------------------------------
# helpers: validation and lookups
# --------------------------------------------------------------------------------------

def _parse_format(format: str) -> str:  # noqa: A002
    fmt = _FORMAT_ALIASES.get(str(format).lower())
    if fmt is None:
        raise ValueError(f"unknown output format {format!r}; supported: {', '.join(FORMATS)}")
    return fmt


def _parse_mode(mode: str) -> str:
    name = _MODES.get(str(mode).lower()) if isinstance(mode, str) else None
    if name is None:
        raise ValueError(f"unknown mode {mode!r}; use one of {sorted(_MODES)}")
    return name


def _as_pandas(frame: object, what: str) -> pd.DataFrame:
    if isinstance(frame, pd.DataFrame):
        return frame
    if hasattr(frame, "to_pandas"):  # cuDF
        converted = frame.to_pandas()
        if isinstance(converted, pd.DataFrame):
            return converted
    raise TypeError(f"{what} must be a pandas (or cuDF) DataFrame, not {type(frame).__name__}"
                    " (compute Dask frames first)")


def _require(frame: pd.DataFrame, columns: tuple[str, ...] | list[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} frame lacks the column(s) {missing}")


def _positions(frame: pd.DataFrame, labels: pd.Series, what: str) -> np.ndarray:
    """Row positions in `frame` of the index labels in `labels` (``.loc`` semantics)."""
    if not frame.index.is_unique:
        raise ValueError(f"the {what} frame's index has duplicate labels; labels must be unique")
    positions = frame.index.get_indexer(pd.Index(labels))
    if (positions < 0).any():
        bad = pd.Index(labels)[positions < 0][:5].tolist()
        raise ValueError(f"result labels not found in the {what} frame (first: {bad}); "
                         f"were the results computed from this {what} frame?")
    return positions


def _column(frame: pd.DataFrame, name: str, positions: np.ndarray, what: str) -> pd.Series:
    if name not in frame.columns:
        raise ValueError(f"the {what} frame lacks the column {name!r}")
    return frame[name].iloc[positions].reset_index(drop=True)


def _ints(series: pd.Series) -> np.ndarray:
    """Nullable integer column -> int64 numpy array, nulls as 0."""
    return pd.to_numeric(series).to_numpy(dtype=np.int64, na_value=0)


def _lengths(seqs: pd.Series) -> np.ndarray:
    return seqs.str.len().to_numpy(dtype=np.int64, na_value=0)


# --------------------------------------------------------------------------------------
# helpers: arrow string assembly
# --------------------------------------------------------------------------------------

_STR = pa.large_string()


def _lit(text: str) -> pa.Scalar:
    return pa.scalar(text, _STR)


def _text(values: pd.Series | np.ndarray | pa.Array, check: bool = False) -> pa.Array:
    """Any column -> arrow large_string array (nulls stay null)."""
    if isinstance(values, pa.ChunkedArray):
        array = values.combine_chunks()
    elif isinstance(values, pa.Array):
        array = values
    else:
        try:
            array = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            series = pd.Series(values)
            array = pa.array(series.astype(str).where(series.notna(), None), type=_STR)
    if array.type != _STR:
        array = pc.cast(array, _STR)
    if check and pa.types.is_large_string(array.type):
        bad = pc.match_substring_regex(array, r"[\t\n\r]")
        if pc.any(bad).as_py():
            raise ValueError("a text field contains a tab or line break and cannot be written")
    return array


def _suffix(values: np.ndarray, suffix: str, keep: np.ndarray) -> pa.Array:
    """``f"{v}{suffix}"`` where `keep`, else ``""``."""
    joined = pc.binary_join_element_wise(_text(values), _lit(suffix), _lit(""))
    return pc.if_else(pa.array(keep), joined, _lit(""))


def _prefix(prefix: str, values: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(_lit(prefix), values, _lit(""))


def _lines(fields: list[pa.Array | pa.Scalar], tail: pa.Array | None = None) -> pa.Array:
    """Join fields with tabs (nulls as empty fields), append optional `tail`
    (skipped where null), and end each line with a newline."""
    line = pc.binary_join_element_wise(*fields, _lit("\t"), null_handling="replace",
                                       null_replacement="")
    if tail is not None:
        line = pc.binary_join_element_wise(line, tail, _lit("\t"), null_handling="skip")
    return pc.binary_join_element_wise(line, _lit(""), _lit("\n"))


def _write_lines(fh: IO[bytes], lines: pa.Array) -> None:
    """Write a large_string array of newline-terminated lines in one call."""
    if len(lines) == 0:
        return
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    lines = lines.cast(_STR)
    _, offsets_buffer, data = lines.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=len(lines) + 1,
                            offset=lines.offset * 8)
    fh.write(memoryview(data)[offsets[0]:offsets[-1]])


def _open_output(path: str, compress: bool) -> IO[bytes]:
    if compress:
        return gzip.open(path, "wb", compresslevel=6)
    return open(path, "wb")


def _chunks(n: int) -> range:
    return range(0, n, _CHUNK_ROWS)


def _aligned(frame: pd.DataFrame) -> np.ndarray:
    """Rows that hold an alignment with at least one aligned column (=, X or M)."""
    cigar = _text(frame["cigar"])
    has_column = pc.fill_null(pc.match_substring_regex(cigar, r"\d[=XM]"), False)
    ok = np.asarray(has_column.to_numpy(zero_copy_only=False), dtype=bool)
    for name in ("score", "query_start", "query_end", "target_start", "target_end",
                 "matches", "mismatches", "gaps", "gap_opens", "length"):
        ok &= frame[name].notna().to_numpy(dtype=bool)
    return ok


def _check_bounds(ends: np.ndarray, lengths: np.ndarray, rows: np.ndarray, what: str) -> None:
    over = rows & (ends > lengths)
    if over.any():
        row = int(np.flatnonzero(over)[0])
        raise ValueError(f"{what}_end {int(ends[row])} exceeds the {what} length "
                         f"{int(lengths[row])} (result row {row}); were the results computed "
                         f"from these {what} sequences?")


def _names(names: pd.Series) -> pa.Array:
    """Sequence names for text output; an empty name becomes ``*``."""
    array = _text(names, check=True)
    return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), _lit("*"), array)


# --------------------------------------------------------------------------------------
# writers: per format
# --------------------------------------------------------------------------------------

def _named_frame(results: pd.DataFrame, queries: pd.DataFrame,
                 targets: pd.DataFrame) -> pd.DataFrame:
    query_pos = _positions(queries, results["query"], "queries")
    target_pos = _positions(targets, results["target"], "targets")
    out = results.reset_index(drop=True)
    query_names = _column(queries, "name", query_pos, "queries")
    target_names = _column(targets, "name", target_pos, "targets")
    columns = list(out.columns)
    out = out.copy()
    out["query_name"] = query_names
    out["target_name"] = target_names
    order: list[str] = []
    for name in columns:
        if name in ("query_name", "target_name"):
            continue
        order.append(name)
        if name == "query":
            order.append("query_name")
        elif name == "target":
            order.append("target_name")
    return out[order]


def _write_tsv(fh: IO[bytes], results: pd.DataFrame, queries: pd.DataFrame,
               targets: pd.DataFrame) -> None:
    frame = _named_frame(results, queries, targets)
    header = "\t".join(str(c) for c in frame.columns)
    if any(ch in header for ch in "\n\r") or any("\t" in str(c) for c in frame.columns):
        raise ValueError("column names must not contain tabs or line breaks")
    fh.write((header + "\n").encode())
    for start in _chunks(len(frame)):
        part = frame.iloc[start:start + _CHUNK_ROWS]
        _write_lines(fh, _lines([_text(part[c], check=True) for c in part.columns]))


def _write_parquet(results: pd.DataFrame, path: str, queries: pd.DataFrame,
                   targets: pd.DataFrame, mode: str) -> None:
    frame = _named_frame(results, queries, targets)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    metadata = dict(table.schema.metadata or {})
    metadata[b"gpualign_df.mode"] = mode.encode()
    pq.write_table(table.replace_schema_metadata(metadata), path)


def _sam_header(results: pd.DataFrame, targets: pd.DataFrame, aligned: np.ndarray,
                mode: str) -> str:
    lines = ["@HD\tVN:1.6\tSO:unsorted"]
    used = _positions(targets, results["target"][aligned], "targets")
    used = np.unique(used)  # sorted: the order of the targets frame
    if len(used):
        names = targets["name"].iloc[used].astype(str).to_numpy()
        lengths = _lengths(targets["seq"].iloc[used])
        seen: dict[str, int] = {}
        for name, length in zip(names, lengths, strict=True):
            name = name or "*"
            if name in seen:
                if seen[name] != length:
                    raise ValueError(f"SAM needs unique reference names: target {name!r} "
                                     f"occurs with lengths {seen[name]} and {length}")
                continue
            seen[name] = int(length)
            if any(ch.isspace() for ch in name):
                raise ValueError(f"SAM reference name {name!r} contains whitespace")
            lines.append(f"@SQ\tSN:{name}\tLN:{int(length)}")
    lines.append(f"@PG\tID:gpualign\tPN:gpualign\tDS:alignment mode {mode}")
    return "\n".join(lines) + "\n"


def _cigar_end_count(cigar: pa.Array, pattern: str) -> np.ndarray:
    found = pc.extract_regex(cigar, pattern)
    digits = pc.fill_null(pc.struct_field(found, "n"), "0")
    digits = pc.if_else(pc.equal(digits, ""), _lit("0"), digits)
    return pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)


def _write_sam(fh: IO[bytes], results: pd.DataFrame, queries: pd.DataFrame,
               targets: pd.DataFrame, mode: str) -> None:
    _require(queries, ["name", "seq"], "queries")
    _require(targets, ["name", "seq"], "targets")
    results = results.reset_index(drop=True)
    aligned_all = _aligned(results)
    fh.write(_sam_header(results, targets, aligned_all, mode).encode())
    for start in _chunks(len(results)):
        part = results.iloc[start:start + _CHUNK_ROWS].reset_index(drop=True)
        aligned = aligned_all[start:start + _CHUNK_ROWS]
        query_pos = _positions(queries, part["query"], "queries")
        target_pos = _positions(targets, part["target"], "targets")
        seq = _column(queries, "seq", query_pos, "queries")
        qlen = _lengths(seq)
        query_start, query_end = _ints(part["query_start"]), _ints(part["query_end"])
        _check_bounds(query_end, qlen, aligned, "query")
        _check_bounds(_ints(part["target_end"]),
                      _lengths(_column(targets, "seq", target_pos, "targets")), aligned,
                      "target")

        cigar = _text(part["cigar"])
        lead_clip = pc.fill_null(pc.match_substring_regex(cigar, r"^\d+S"), False)
        tail_clip = pc.fill_null(pc.match_substring_regex(cigar, r"\d+S$"), False)
        lead_clip = lead_clip.to_numpy(zero_copy_only=False)
        tail_clip = tail_clip.to_numpy(zero_copy_only=False)
        lead_del = _cigar_end_count(cigar, r"^(?:\d+S)?(?P<n>\d+)D")
        tail_del = _cigar_end_count(cigar, r"(?P<n>\d+)D(?:\d+S)?$")
        core = pc.replace_substring_regex(cigar, r"^(\d+S)?\d+D", r"\1")
        core = pc.replace_substring_regex(core, r"\d+D(\d+S)?$", r"\1")
        back = qlen - query_end
        full_cigar = pc.binary_join_element_wise(
            _suffix(query_start, "S", ~lead_clip & (query_start > 0)),
            core,
            _suffix(back, "S", ~tail_clip & (back > 0)),
            _lit(""),
        )
        mapped = pa.array(aligned)
        pos = _ints(part["target_start"]) + lead_del + 1
        nm = _ints(part["mismatches"]) + _ints(part["gaps"]) - lead_del - tail_del

        seq_text = _text(seq)
        seq_text = pc.if_else(pc.equal(pc.fill_null(seq_text, ""), ""), _lit("*"), seq_text)
        if "qual" in queries.columns:
            qual = _text(_column(queries, "qual", query_pos, "queries"))
            qual = pc.if_else(pc.equal(pc.fill_null(qual, ""), ""), _lit("*"), qual)
        else:
            qual = _lit("*")
        tags = pc.binary_join_element_wise(
            _prefix("AS:i:", _text(_ints(part["score"]))),
            _prefix("NM:i:", _text(nm)),
            _lit("\t"),
        )
        fields = [
            _names(_column(queries, "name", query_pos, "queries")),
            pc.if_else(mapped, _lit("0"), _lit("4")),
            pc.if_else(mapped, _names(_column(targets, "name", target_pos, "targets")),
                       _lit("*")),
            pc.if_else(mapped, _text(pos), _lit("0")),
            pc.if_else(mapped, _lit("255"), _lit("0")),
            pc.if_else(mapped, full_cigar, _lit("*")),
            _lit("*"), _lit("0"), _lit("0"),
            seq_text,
            qual,
        ]
        tail = pc.if_else(mapped, tags, pa.scalar(None, _STR))
        _write_lines(fh, _lines(fields, tail))


def _aligned_part(results: pd.DataFrame, queries: pd.DataFrame, targets: pd.DataFrame,
                  start: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    part = results.iloc[start:start + _CHUNK_ROWS]
    part = part[_aligned(part)].reset_index(drop=True)
    return (part, _positions(queries, part["query"], "queries"),
            _positions(targets, part["target"], "targets"))


def _write_paf(fh: IO[bytes], results: pd.DataFrame, queries: pd.DataFrame,
               targets: pd.DataFrame) -> None:
    _require(queries, ["name", "seq"], "queries")
    _require(targets, ["name", "seq"], "targets")
    for start in _chunks(len(results)):
        part, query_pos, target_pos = _aligned_part(results, queries, targets, start)
        if len(part) == 0:
            continue
        qlen = _lengths(_column(queries, "seq", query_pos, "queries"))
        tlen = _lengths(_column(targets, "seq", target_pos, "targets"))
        everywhere = np.ones(len(part), dtype=bool)
        _check_bounds(_ints(part["query_end"]), qlen, everywhere, "query")
        _check_bounds(_ints(part["target_end"]), tlen, everywhere, "target")
        cigar = pc.replace_substring_regex(_text(part["cigar"]), r"\d+S", "")
        fields = [
            _names(_column(queries, "name", query_pos, "queries")),
            _text(qlen), _text(part["query_start"]), _text(part["query_end"]),
            _lit("+"),
            _names(_column(targets, "name", target_pos, "targets")),
            _text(tlen), _text(part["target_start"]), _text(part["target_end"]),
            _text(part["matches"]), _text(part["length"]),
            _lit("255"),
            _prefix("AS:i:", _text(part["score"])),
            _prefix("cg:Z:", cigar),
        ]
        _write_lines(fh, _lines(fields))


def _pident(part: pd.DataFrame) -> pa.Array:
    """``100 * identity`` formatted like C's ``%.3f``, without per-row Python."""
    identity = pd.to_numeric(part["identity"]).to_numpy(dtype=np.float64, na_value=np.nan)
    fallback = _ints(part["matches"]) / np.maximum(_ints(part["length"]), 1)
    identity = np.where(np.isnan(identity), fallback, identity)
    thousandths = np.rint(identity * 100_000.0).astype(np.int64)
    whole = _text(thousandths // 1000)
    fraction = pc.utf8_lpad(_text(thousandths % 1000), 3, "0")
    return pc.binary_join_element_wise(whole, fraction, _lit("."))


def _write_blast6(fh: IO[bytes], results: pd.DataFrame, queries: pd.DataFrame,
                  targets: pd.DataFrame) -> None:
    _require(queries, ["name"], "queries")
    _require(targets, ["name"], "targets")
    for start in _chunks(len(results)):
        part, query_pos, target_pos = _aligned_part(results, queries, targets, start)
        if len(part) == 0:
            continue
        fields = [
            _names(_column(queries, "name", query_pos, "queries")),
            _names(_column(targets, "name", target_pos, "targets")),
            _pident(part),
            _text(part["length"]),
            _text(part["mismatches"]),
            _text(part["gap_opens"]),
            _text(_ints(part["query_start"]) + 1),
            _text(part["query_end"]),
            _text(_ints(part["target_start"]) + 1),
            _text(part["target_end"]),
            _lit("-1"),
            _text(part["score"]),
        ]
        _write_lines(fh, _lines(fields))
