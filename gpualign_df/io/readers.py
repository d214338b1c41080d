"""FASTA/FASTQ readers: a file, plain or compressed, into a frame of sequences.

The labels of the frame's ``RangeIndex`` are what the aligner reports in its ``query`` and
``target`` columns, and what the writers look the names and sequences up by.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re

import needletail
import numpy as np
import pandas as pd
import pyarrow as pa

__all__ = ["read_sequences"]

_ASCII_SPACE = " \t\r\x0b\x0c"
_WHITESPACE = re.compile(r"\s+")


def read_sequences(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a FASTA or FASTQ file, plain or compressed, into a frame.

    The format and the compression (gzip, bzip2, xz or zstd) are detected from the content,
    not the file name.  The file is read once, into memory, and parsed by needletail.

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
            the sequence as a string (for FASTA, line breaks and any ASCII white space
            inside the sequence lines -- space, tab, CR, VT, FF -- are removed; the case
            is kept);
        ``qual``
            the quality string, present only when the file is FASTQ.

    Raises
    ------
    ValueError
        If the file is missing, is not a regular file, holds no record, or is not valid
        FASTA or FASTQ (including damaged or truncated compressed streams, FASTQ records
        whose quality length differs from the sequence length, and files that mix FASTA
        and FASTQ records).  The message names the file and, where there is one, the record
        (1-based number and name) and line.

    Notes
    -----
    Blank lines before the first record are skipped.  A FASTA record with a header and no
    sequence is a valid empty sequence wherever it stands, also as the last record of a
    file without a final newline (``">a\\nACGT\\n>b"``).  A file whose records change from
    FASTA (``>``) to FASTQ (``@``) or back is refused: a ``@`` line inside FASTA would
    otherwise be read as sequence letters of the record before it.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "reads.fa")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("\\n>r1 first read\\nACGT\\nAC\\n>r2\\nGGCC\\n>empty")
    >>> frame = read_sequences(path)
    >>> frame.columns.tolist()
    ['name', 'description', 'seq']
    >>> frame["name"].tolist(), frame["description"].tolist(), frame["seq"].tolist()
    (['r1', 'r2', 'empty'], ['first read', '', ''], ['ACGTAC', 'GGCC', ''])
    """
    where = os.fspath(path)
    if not os.path.exists(where):
        raise ValueError(f"cannot read sequences from {where!r}: no such file")
    if not os.path.isfile(where):
        raise ValueError(f"cannot read sequences from {where!r}: not a regular file")
    if os.path.getsize(where) == 0:
        raise ValueError(f"cannot read sequences from {where!r}: the file is empty")

    text = _file_text(where)
    # Blank lines before the first record: needletail wants '>' or '@' as the first byte.
    skip = _BLANK_LINES.match(text).end()
    skipped_lines = text.count("\n", 0, skip)
    if skip:
        text = text[skip:]
    # After the blank lines, only a last line of spaces without a newline can be blank.
    if not text or (text[0] in _ASCII_SPACE and not text.strip(_ASCII_SPACE)):
        raise ValueError(f"cannot read sequences from {where!r}: the file holds no record")
    first = text[0]
    if first not in ">@":
        raise ValueError(
            f"{where!r} is not a FASTA/FASTQ file: line {skipped_lines + 1} starts with "
            f"{first!r}, expected '>' (FASTA) or '@' (FASTQ)")
    fastq = first == "@"

    ids: list[str] = []
    seqs: list[str] = []
    quals: list[str] = []
    if fastq:
        # needletail refuses an empty last record ("@r\n\n+") without a final newline.
        if not text.endswith("\n"):
            text += "\n"
        try:
            for record in needletail.parse_fastx_string(text):
                ids.append(record.id)
                seqs.append(record.seq)
                quals.append(record.qual)
        except needletail.NeedletailError as error:
            raise _fastq_error(where, text, len(ids), skipped_lines, error) from error
    else:
        # needletail's FASTA parser reads every line up to the next '>' as sequence, so a
        # FASTQ record after FASTA records would silently become letters of the record
        # before it: a '@' at the start of any line is refused here.
        at = text.find("\n@")
        if at >= 0:
            raise _mixed_error(where, text, at + 1, text.count("\n>", 0, at) + 2,
                               skipped_lines, "FASTQ", "FASTA")
        body, tail = _split_trailing_headers(text)
        try:
            for record in needletail.parse_fastx_string(body) if body else ():
                ids.append(record.id)
                seqs.append(record.seq)
        except needletail.NeedletailError as error:
            raise ValueError(f"{where!r} is not a valid FASTA/FASTQ file: {error}"
                             f"{_skipped_note(skipped_lines)}") from error
        ids.extend(tail)
        seqs.extend([""] * len(tail))
        # needletail removes the line breaks of sequence lines, not other white space.
        if _has_ascii_space(seqs):
            seqs = [_WHITESPACE.sub("", seq) for seq in seqs]

    names: list[str] = []
    descriptions: list[str] = []
    for header in ids:
        parts = header.split(None, 1)
        names.append(parts[0] if parts else "")
        descriptions.append(parts[1].strip() if len(parts) > 1 else "")
    columns: dict[str, list[str]] = {"name": names, "description": descriptions, "seq": seqs}
    if fastq:
        columns["qual"] = quals
    return pd.DataFrame(columns, index=pd.RangeIndex(len(names)))


_BLANK_LINES = re.compile(r"(?:[ \t\r\x0b\x0c]*\n)*")
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)


def _file_text(where: str) -> str:
    """The whole file as text, decompressed by its magic bytes; read once."""
    with open(where, "rb") as fh:
        data = fh.read()
    kind = next((name for magic, name in _MAGIC if data.startswith(magic)), None)
    if kind is not None:
        try:
            if kind == "gzip":
                data = gzip.decompress(data)
            elif kind == "bzip2":
                data = bz2.decompress(data)
            elif kind == "xz":
                data = lzma.decompress(data)
            else:
                with pa.input_stream(pa.BufferReader(data), compression="zstd") as stream:
                    data = stream.read()
        except (OSError, EOFError, ValueError, lzma.LZMAError, pa.ArrowException) as error:
            raise ValueError(f"cannot read sequences from {where!r}: the {kind} stream is "
                             f"damaged or truncated ({error})") from error
    # Header bytes that are not UTF-8 are replaced, as needletail's own file reader does.
    return data.decode("utf-8", errors="replace")


def _has_ascii_space(seqs: list[str]) -> bool:
    """Whether any sequence holds a space, tab, CR, VT or FF (one pass in C per symbol)."""
    joined = "".join(seqs)
    return any(ch in joined for ch in _ASCII_SPACE)


def _split_trailing_headers(text: str) -> tuple[str, list[str]]:
    """Cut the FASTA headers that end the file with no sequence after them.

    needletail fails on a header that is the last line of the input (``">a\\nAC\\n>b"``),
    while an empty record before another record parses; so the trailing ones are cut here
    and returned as the headers of empty records, in file order."""
    tail: list[str] = []
    end = len(text)
    while True:
        while end and text[end - 1] in _ASCII_SPACE + "\n":
            end -= 1
        if end == 0:
            break
        start = text.rfind("\n", 0, end) + 1
        if text[start] != ">":
            break
        tail.append(text[start + 1:end])
        end = start
    return (text[:end] if tail else text), tail[::-1]


def _skipped_note(skipped_lines: int) -> str:
    if not skipped_lines:
        return ""
    return (f" (needletail's line numbers count from line {skipped_lines + 1}, after the "
            f"file's leading blank lines)")


def _line_at(text: str, offset: int) -> str:
    end = text.find("\n", offset)
    return text[offset:end if end >= 0 else len(text)].rstrip("\r")


def _mixed_error(where: str, text: str, offset: int, record: int, skipped_lines: int,
                 kind: str, first_kind: str) -> ValueError:
    """The error for a file whose records change format at `offset` (a line start)."""
    header = _line_at(text, offset)[1:].split(None, 1)
    name = header[0] if header else ""
    line = text.count("\n", 0, offset) + 1 + skipped_lines
    return ValueError(
        f"{where!r} mixes FASTA and FASTQ records: record {record} ({name!r}, line {line}) "
        f"is {kind} while the records before it are {first_kind}; split the file or "
        f"convert it to one format")


def _fastq_error(where: str, text: str, good: int, skipped_lines: int,
                 error: Exception) -> ValueError:
    """The error for a FASTQ file needletail failed on after `good` records.

    needletail reads FASTQ records of exactly four lines, so the record after the last good
    one starts on line ``4 * good`` of the text; if that line is a FASTA header the file
    mixes formats, which is said in the user's terms rather than needletail's."""
    data = np.frombuffer(text.encode("utf-8", errors="replace"), dtype=np.uint8)
    breaks = np.flatnonzero(data == 10)
    line = 4 * good
    if line == 0 or line - 1 < len(breaks):
        start_byte = 0 if line == 0 else int(breaks[line - 1]) + 1
        if start_byte < len(data) and data[start_byte] == ord(">"):
            offset = len(data[:start_byte].tobytes().decode("utf-8", errors="replace"))
            return _mixed_error(where, text, offset, good + 1, skipped_lines, "FASTA",
                                "FASTQ")
    return ValueError(f"{where!r} is not a valid FASTA/FASTQ file: {error}"
                      f"{_skipped_note(skipped_lines)}")
