"""Sequence readers and alignment result writers.

Readers turn FASTA/FASTQ files (plain or compressed) into pandas frames; writers turn the
result frame of the aligner into TSV, Parquet, SAM, PAF or BLAST tabular (``outfmt 6``),
in one call (:func:`write_results`) or batch by batch in bounded memory
(:func:`open_results`).

Every output is written to a temporary file beside the target, flushed to disk and renamed
onto the target only when the whole output was written: an error, a full disk or Ctrl-C
leaves an existing output as it was and no partial file behind.  Targets that cannot be
replaced by a rename (``/dev/stdout``, ``/dev/null``, a FIFO) are written in place.

Text output is assembled column-wise with ``pyarrow.compute`` string kernels (no per-row
Python) and written in blocks of rows, so frames of millions of rows are written at I/O
speed.

Conventions of the result frame (see the package design notes): ``query``/``target`` are
index labels into the sequence frames, coordinates are 0-based and end-exclusive, and the
CIGAR covers exactly ``[query_start, query_end) x [target_start, target_end)`` (``I`` = a
residue in the query only, ``D`` = a residue in the target only).
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import lzma
import os
import re
import secrets
import stat
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import IO

import needletail
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .results import SCORE_ONLY_COLUMNS, TRACEBACK_COLUMNS, empty_frame
from .scoring import Scoring, parse_mode

__all__ = ["FORMATS", "ResultWriter", "format_from_path", "open_results", "read_sequences",
           "write_results"]

#: Output formats understood by :func:`write_results` and :func:`open_results`.
FORMATS: tuple[str, ...] = ("tsv", "parquet", "sam", "paf", "blast6")

#: Job shapes (``how``) the writers accept; they decide BLAST's search space.
HOWS: tuple[str, ...] = ("rowwise", "pairwise", "search")

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
_TRACEBACK_FORMATS = frozenset({"sam", "paf", "blast6"})
_CHUNK_ROWS = 1 << 17
_ASCII_SPACE = " \t\r\x0b\x0c"
_WHITESPACE = re.compile(r"\s+")


# --------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# output targets: temporary file + rename, or a stream
# --------------------------------------------------------------------------------------

class _Destination:
    """Where one output goes, checked before anything is created.

    A regular file (or a path that does not exist yet) is written to a temporary file in
    the same directory (``.<name>.<random>.part``), fsynced, and renamed onto the target
    only by :meth:`commit`, so the target is either untouched or complete: a rename within
    one directory is atomic.  :meth:`discard` removes only the temporary file this object
    created.  An existing target that is not a regular file (a character device such as
    ``/dev/null`` or ``/dev/full``, a FIFO, ``/dev/stdout`` in a pipe) must never be renamed
    over or deleted; it is opened and written in place, streaming, with no atomicity
    possible.  ``/dev/...`` and ``/proc/...`` paths are always written in place: under a
    shell redirection ``/dev/stdout`` resolves to the regular file the shell opened, which
    must not be replaced behind the shell's back.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if not self.path:
            raise ValueError("the output path is empty")
        self.compress = self.path.lower().endswith(".gz")
        self.direct = False
        self._mode: int | None = None  # permission bits of a target that exists
        self._tmp: str | None = None
        self._raw: IO[bytes] | None = None
        self._stream: IO[bytes] | None = None
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as error:
            raise ValueError(f"cannot write results to {self.path!r}: {error.strerror}") \
                from error
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise ValueError(f"cannot write results to {self.path!r}: it is a directory")
        if info is not None and (stat.S_ISBLK(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
            kind = "a block device" if stat.S_ISBLK(info.st_mode) else "a socket"
            raise ValueError(f"refusing to write results to {self.path!r}: it is {kind}")
        absolute = os.path.abspath(self.path)
        if info is not None and (not stat.S_ISREG(info.st_mode)
                                 or absolute.startswith(("/dev/", "/proc/"))):
            self.direct = True
            self.final = self.path
            if not os.access(self.path, os.W_OK):
                raise ValueError(f"cannot write results to {self.path!r}: permission denied")
            return
        # A symlink is followed: the file it points to is replaced, the link stays a link.
        self.final = os.path.realpath(self.path)
        directory = os.path.dirname(self.final)
        if not os.path.isdir(directory):
            raise ValueError(f"cannot write results to {self.path!r}: the directory "
                             f"{directory!r} does not exist")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ValueError(f"cannot write results to {self.path!r}: the directory "
                             f"{directory!r} is not writable")
        if info is not None:
            if not os.access(self.final, os.W_OK):
                raise ValueError(f"cannot write results to {self.path!r}: the file is not "
                                 f"writable")
            self._mode = stat.S_IMODE(info.st_mode)

    @property
    def opened(self) -> bool:
        return self._raw is not None

    def open(self) -> IO[bytes]:
        """Create the temporary file (or open the stream); returns the binary handle
        that receives the output (a gzip layer for ``.gz`` names)."""
        try:
            if self.direct:
                # Append: for /dev/stdout redirected to a file by the shell (> or >>),
                # opening with truncation would erase what was written there before us.
                self._raw = open(self.final, "ab")  # noqa: SIM115 - closed by commit/discard
            else:
                directory, name = os.path.split(self.final)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                while True:
                    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.part")
                    try:
                        fd = os.open(tmp, flags, 0o666)  # the umask applies, as for open()
                    except FileExistsError:
                        continue
                    self._tmp = tmp
                    break
                self._raw = os.fdopen(fd, "wb")
        except OSError as error:
            raise self.error(error) from error
        if self.compress:
            # mtime 0: the same results give the same bytes.
            self._stream = gzip.GzipFile(filename=os.path.basename(self.final), mode="wb",
                                         fileobj=self._raw, compresslevel=6, mtime=0)
        else:
            self._stream = self._raw
        return self._stream

    @property
    def raw(self) -> IO[bytes]:
        assert self._raw is not None
        return self._raw

    def commit(self) -> None:
        """Finish the output: flush, fsync, and rename the temporary file onto the target."""
        assert self._raw is not None and self._stream is not None
        try:
            if self._stream is not self._raw:
                self._stream.close()  # the gzip trailer
            self._raw.flush()
            if not self.direct:
                os.fsync(self._raw.fileno())
            self._raw.close()
            if not self.direct:
                assert self._tmp is not None
                if self._mode is not None:
                    os.chmod(self._tmp, self._mode)
                os.replace(self._tmp, self.final)
                self._tmp = None
                _fsync_directory(os.path.dirname(self.final))
        except BaseException as error:
            self.discard()
            if isinstance(error, OSError):
                raise self.error(error) from error
            raise

    def discard(self) -> None:
        """Close without committing and remove the temporary file this object created
        (never the target)."""
        for handle in (self._stream, self._raw):
            if handle is not None:
                try:
                    handle.close()
                except Exception:  # noqa: BLE001 - already failing; the first error wins
                    pass
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except FileNotFoundError:
                pass
            self._tmp = None

    def error(self, error: OSError) -> OSError:
        """`error` as an OSError naming the output (unchanged if it already does)."""
        if isinstance(error, _OutputError):
            return error
        reason = error.strerror or str(error)
        return _OutputError(error.errno, f"cannot write results to {self.path!r}: {reason}")


class _OutputError(OSError):
    """An OSError whose message already names the output file."""


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
    format : {"tsv", "parquet", "sam", "paf", "blast6"}, optional
        Output format (``"m8"`` is accepted for ``"blast6"``); inferred from the
        extension of `path` by :func:`format_from_path` when None.
    queries, targets : pandas.DataFrame
        The sequence frames the results refer to, as returned by :func:`read_sequences`:
        column ``name``, and ``seq`` (plus ``qual``, used by SAM) where needed.  Rows are
        looked up by label (the ``.loc`` sense); both may be the same frame (pairwise).
    mode : str, default "sw"
        The alignment mode the results were computed with (``"sw"``/``"local"``,
        ``"nw"``/``"global"``, ``"sg"``/``"semiglobal"``, as
        :func:`gpualign_df.scoring.parse_mode` reads them).  It is recorded in the SAM
        ``@PG`` line and in the Parquet schema metadata; it does not change any record.
    scoring : gpualign_df.scoring.Scoring, optional
        The scoring the results were computed with (from
        :func:`gpualign_df.scoring.make_scoring`); BLAST tabular output needs it for
        e-values and bit scores, and writes ``NA`` there without it.
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
    fmt = _parse_format(format) if format is not None else format_from_path(path)
    mode_name = parse_mode(mode).name
    if how is not None and how not in HOWS:
        raise ValueError(f"unknown how {how!r}; use one of {list(HOWS)} or None")
    if scoring is not None and not isinstance(scoring, Scoring):
        raise TypeError(f"scoring must be a gpualign_df.scoring.Scoring (from make_scoring) "
                        f"or None, not {type(scoring).__name__}")
    query_side = _Side(_as_pandas(queries, "queries"), "queries")
    target_side = _Side(_as_pandas(targets, "targets"), "targets")
    encoder = _ENCODERS[fmt](query_side, target_side, mode_name, scoring, how)
    destination = _Destination(path)
    if destination.compress and fmt not in _TEXT_FORMATS:
        raise ValueError(f"{fmt} output cannot be gzip-compressed by its name "
                         f"({os.fspath(path)!r}); drop the .gz")
    return ResultWriter(destination, fmt, encoder)



class ResultWriter:
    """A result file being written, frame by frame; made by :func:`open_results`.

    Use it as a context manager: a clean exit of the ``with`` block commits (see
    :meth:`close`), an exception discards (see :meth:`abort`).  Without ``with``, call
    :meth:`close` or :meth:`abort` yourself.

    Attributes
    ----------
    path : str
        The output path as given.
    format : str
        One of :data:`FORMATS`.
    rows_written : int
        Result rows received by :meth:`write` so far (SAM, PAF and BLAST may write fewer
        records: see :func:`open_results`).

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from gpualign_df import align
    >>> seqs = pd.DataFrame({"name": ["a", "b", "c"], "seq": ["ACGT", "ACGA", "TCGT"]})
    >>> path = os.path.join(tempfile.mkdtemp(), "pairs.tsv")
    >>> results = align(seqs["seq"], how="pairwise", match=1, mismatch=-1, traceback=False)
    >>> with open_results(path, queries=seqs, targets=seqs, how="pairwise") as writer:
    ...     writer.write(results.iloc[:2])
    ...     writer.write(results.iloc[2:])
    >>> writer.rows_written, open(path).read().count("\\n")
    (3, 4)
    """

    def __init__(self, destination: _Destination, fmt: str, encoder: _Encoder) -> None:
        self._destination = destination
        self._encoder = encoder
        self.path: str = destination.path
        self.format: str = fmt
        self.rows_written: int = 0
        self._state = "open"  # open -> committed | discarded | broken

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def write(self, results: pd.DataFrame) -> None:
        """Append the rows of one result frame.

        The frame is checked in full (columns, labels, coordinates, text fields) before
        any of it is written: a frame that fails the checks writes nothing and leaves the
        writer usable.  An I/O error while writing leaves the writer broken (only
        :meth:`abort` remains, which the ``with`` block calls).

        Parameters
        ----------
        results : pandas.DataFrame
            A result frame of the aligner (a cuDF frame is converted with
            ``to_pandas()``).  TSV and Parquet accept score-only frames
            (``traceback=False``); SAM, PAF and BLAST need the traceback columns.  TSV and
            Parquet need every frame to have the first frame's columns.

        Raises
        ------
        ValueError
            Missing columns, labels not in the sequence frames, coordinates beyond the
            sequence lengths, text fields with tabs or line breaks, frames whose columns
            differ from the first frame's.
        OSError
            If the output cannot be written (full disk, ...); the message names the file.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> from gpualign_df import align
        >>> seqs = pd.DataFrame({"name": ["x", "y"], "seq": ["ACGT", "AGGT"]})
        >>> path = os.path.join(tempfile.mkdtemp(), "r.paf")
        >>> with open_results(path, queries=seqs, targets=seqs) as writer:
        ...     writer.write(align(seqs["seq"], seqs["seq"], match=1, mismatch=-1))
        >>> print(open(path).read().splitlines()[1].replace("\\t", " "))
        y 4 0 4 + y 4 0 4 4 4 255 AS:i:4 cg:Z:4=
        """
        self._check_open()
        frame = _as_pandas(results, "results")
        prepared = self._encoder.prepare(frame)  # every check, before any byte is written
        destination = self._destination
        try:
            if not destination.opened:
                stream = destination.open()
                self._encoder.begin(stream, destination)
            self._encoder.emit(destination, prepared)
        except OSError as error:
            self._state = "broken"
            raise destination.error(error) from error
        except BaseException:
            self._state = "broken"
            raise
        self.rows_written += len(frame)

    def close(self) -> None:
        """Commit: finish the file and move it onto the target path.

        A writer that received no frame writes a file with no rows: the SAM header, an
        empty PAF/BLAST file, and for TSV and Parquet the columns of a traceback result
        frame (:data:`gpualign_df.results.TRACEBACK_COLUMNS` with the name columns).
        Closing twice does nothing.

        Raises
        ------
        OSError
            If the output cannot be finished (full disk, ...); the target is left as it
            was and the temporary file removed.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> seqs = pd.DataFrame({"name": ["x"], "seq": ["ACGT"]})
        >>> path = os.path.join(tempfile.mkdtemp(), "none.tsv")
        >>> writer = open_results(path, queries=seqs, targets=seqs)
        >>> writer.close()
        >>> open(path).read().split("\\t")[:4]
        ['query', 'query_name', 'target', 'target_name']
        """
        if self._state == "committed":
            return
        self._check_open()
        try:
            if not self._destination.opened:
                self.write(empty_frame(True, pd.RangeIndex(0), pd.RangeIndex(0)))
            self._encoder.finish(self._destination)
            self._destination.commit()
        except BaseException as error:
            self._state = "broken"
            self._encoder.abandon()
            self._destination.discard()
            if isinstance(error, OSError):
                raise self._destination.error(error) from error
            raise
        self._state = "committed"

    def abort(self) -> None:
        """Discard: remove the temporary file; an existing target is left untouched.

        (A target written in place, such as ``/dev/stdout``, keeps what was written.)
        Aborting twice, or after :meth:`close`, does nothing.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> seqs = pd.DataFrame({"name": ["x"], "seq": ["ACGT"]})
        >>> path = os.path.join(tempfile.mkdtemp(), "kept.tsv")
        >>> _ = open(path, "w").write("old\\n")
        >>> writer = open_results(path, queries=seqs, targets=seqs)
        >>> writer.write(pd.DataFrame({"query": [0], "target": [0], "score": [4],
        ...                            "query_end": [4], "target_end": [4]}))
        >>> writer.abort()
        >>> open(path).read(), sorted(os.listdir(os.path.dirname(path)))
        ('old\\n', ['kept.tsv'])
        """
        if self._state in ("committed", "discarded"):
            return
        self._encoder.abandon()
        self._destination.discard()
        self._state = "discarded"

    def __del__(self) -> None:
        # A writer dropped without close() or abort() (no ``with`` block, an exception on
        # the way) must not leave its temporary file behind.
        if getattr(self, "_state", None) == "open" and self._destination.opened:
            try:
                self.abort()
            except Exception:  # noqa: BLE001 - nothing to report to in a finalizer
                pass

    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"the result writer of {self.path!r} is {self._state}; "
                             f"open a new one")


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
        accept score-only frames (``traceback=False``); SAM, PAF and BLAST need the
        traceback columns (``query_start``, ``target_start``, ``cigar``, ``matches``,
        ``mismatches``, ``gap_opens``, ``gaps``, ``length``, ``identity``).
    path : str or os.PathLike
        Output file.  For the text formats a name ending in ``.gz`` is gzip-compressed.
    format : {"tsv", "parquet", "sam", "paf", "blast6"}, optional
        Output format (``"m8"`` is accepted for ``"blast6"``); inferred from the
        extension of `path` by :func:`format_from_path` when None.
    queries, targets : pandas.DataFrame
        The sequence frames the results refer to, as returned by :func:`read_sequences`.
    mode : str, default "sw"
        The alignment mode the results were computed with; recorded in SAM and Parquet.
    scoring : gpualign_df.scoring.Scoring, optional
        The scoring of the job, for BLAST's e-values and bit scores (``NA`` without it).
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


# --------------------------------------------------------------------------------------
# helpers: validation and lookups
# --------------------------------------------------------------------------------------

def _parse_format(format: str) -> str:  # noqa: A002
    fmt = _FORMAT_ALIASES.get(str(format).lower())
    if fmt is None:
        raise ValueError(f"unknown output format {format!r}; supported: {', '.join(FORMATS)}")
    return fmt


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


def _require_traceback(frame: pd.DataFrame, fmt: str) -> None:
    missing = [c for c in TRACEBACK_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{fmt} output needs the traceback columns of the result frame "
                         f"(align with traceback=True); missing: {missing}")


def _records(mask: np.ndarray, limit: int = 5) -> str:
    """1-based record numbers of the rows where `mask` holds (the first `limit`)."""
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(int(r) + 1) for r in rows[:limit])
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


class _Side:
    """One sequence frame (queries or targets) prepared for lookups by result label.

    Checks run when the writer is opened; arrays are built on first use and reused by
    every frame written."""

    def __init__(self, frame: pd.DataFrame, what: str) -> None:
        self.frame = frame
        self.what = what
        if not frame.index.is_unique:
            raise ValueError(f"the {what} frame's index has duplicate labels; labels must be "
                             f"unique")

    def require(self, columns: list[str]) -> None:
        _require(self.frame, columns, self.what)

    def check_names(self) -> None:
        """Names go into tab-separated lines: no tab, CR or LF."""
        names = self.raw_names
        bad = pc.fill_null(pc.match_substring_regex(names, r"[\t\n\r]"), False)
        mask = np.asarray(bad.to_numpy(zero_copy_only=False), dtype=bool)
        if mask.any():
            first = names[int(np.flatnonzero(mask)[0])].as_py()
            raise ValueError(f"{self.what} names cannot contain tabs or line breaks: "
                             f"{first!r} (record {_records(mask)})")

    def positions(self, labels: pd.Series) -> np.ndarray:
        """Row positions of the result labels (``.loc`` semantics)."""
        positions = self.frame.index.get_indexer(pd.Index(labels))
        if (positions < 0).any():
            bad = pd.Index(labels)[positions < 0][:5].tolist()
            raise ValueError(f"result labels not found in the {self.what} frame (first: "
                             f"{bad}); were the results computed from this {self.what} "
                             f"frame?")
        return positions

    @cached_property
    def raw_names(self) -> pa.Array:
        return _text(self.frame["name"])

    @cached_property
    def names(self) -> pa.Array:
        """Names for SAM/PAF/BLAST: an empty name becomes ``*``."""
        array = self.raw_names
        return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), _lit("*"), array)

    @cached_property
    def lengths(self) -> np.ndarray:
        return _lengths(self.frame["seq"])

    @cached_property
    def seqs(self) -> pa.Array:
        array = _text(self.frame["seq"])
        return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), _lit("*"), array)

    @cached_property
    def quals(self) -> pa.Array | None:
        if "qual" not in self.frame.columns:
            return None
        array = _text(self.frame["qual"])
        return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), _lit("*"), array)


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


def _text(values: pd.Series | np.ndarray | pa.Array) -> pa.Array:
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
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != _STR:
        array = pc.cast(array, _STR)
    return array


def _check_text(frame: pd.DataFrame, column: str) -> None:
    """A field of a tab-separated line must hold no tab or line break."""
    bad = pc.fill_null(pc.match_substring_regex(_text(frame[column]), r"[\t\n\r]"), False)
    if pc.any(bad).as_py():
        row = int(np.flatnonzero(np.asarray(bad.to_numpy(zero_copy_only=False)))[0])
        raise ValueError(f"the {column!r} field of {_where(frame, row)} contains a tab or "
                         f"line break and cannot be written: {frame[column].iloc[row]!r}")


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


def _where(frame: pd.DataFrame, row: int) -> str:
    """A result row in the user's terms: its index label and the pair it aligns."""
    def shown(label: object) -> str:
        return repr(label.item() if isinstance(label, np.generic) else label)

    return (f"result row {shown(frame.index[row])} (query {shown(frame['query'].iloc[row])}, "
            f"target {shown(frame['target'].iloc[row])})")


def _check_bounds(frame: pd.DataFrame, column: str, lengths: np.ndarray,
                  rows: np.ndarray) -> None:
    """The alignment's end must lie within its sequence (else the results were computed
    from other sequence frames than the ones given)."""
    ends = _ints(frame[column])
    over = rows & (ends > lengths)
    if over.any():
        row = int(np.flatnonzero(over)[0])
        what = column.split("_")[0]
        raise ValueError(f"{column} {int(ends[row])} exceeds the {what} length "
                         f"{int(lengths[row])} at {_where(frame, row)}; were the results "
                         f"computed from these {what} sequences?")


# --------------------------------------------------------------------------------------
# encoders: one per format
# --------------------------------------------------------------------------------------

class _Encoder:
    """Turns result frames into one format's bytes.

    :meth:`prepare` does every check of a frame and may compute anything, but writes
    nothing; :meth:`begin` writes the header once the output exists; :meth:`emit` writes a
    prepared frame; :meth:`finish` ends the format before the commit."""

    def __init__(self, queries: _Side, targets: _Side, mode: str, scoring: Scoring | None,
                 how: str | None) -> None:
        self.queries = queries
        self.targets = targets
        self.mode = mode
        self.scoring = scoring
        self.how = how
        self.stream: IO[bytes] | None = None

    def prepare(self, frame: pd.DataFrame) -> object:
        raise NotImplementedError

    def begin(self, stream: IO[bytes], destination: _Destination) -> None:
        self.stream = stream

    def emit(self, destination: _Destination, prepared: object) -> None:
        raise NotImplementedError

    def finish(self, destination: _Destination) -> None:
        """Nothing to end for the text formats."""

    def abandon(self) -> None:
        """Nothing to release for the text formats."""


def _named_frame(frame: pd.DataFrame, queries: _Side, targets: _Side) -> pd.DataFrame:
    """`frame` with ``query_name``/``target_name`` inserted after ``query``/``target``."""
    _require(frame, list(SCORE_ONLY_COLUMNS), "results")
    query_names = queries.frame["name"].to_numpy()[queries.positions(frame["query"])]
    target_names = targets.frame["name"].to_numpy()[targets.positions(frame["target"])]
    out = frame.reset_index(drop=True)
    columns = [c for c in out.columns if c not in ("query_name", "target_name")]
    out = out[columns].copy()
    out.insert(columns.index("query") + 1, "query_name",
               pd.Series(query_names, dtype=queries.frame["name"].dtype))
    out.insert(list(out.columns).index("target") + 1, "target_name",
               pd.Series(target_names, dtype=targets.frame["name"].dtype))
    return out


class _TsvEncoder(_Encoder):
    """Every column, a header line from the first frame, nulls as empty fields."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name"])
        self.targets.require(["name"])
        self.queries.check_names()
        self.targets.check_names()
        self.columns: list[str] | None = None

    def prepare(self, frame: pd.DataFrame) -> pd.DataFrame:
        named = _named_frame(frame, self.queries, self.targets)
        columns = [str(c) for c in named.columns]
        if self.columns is None:
            if any(ch in name for name in columns for ch in "\t\n\r"):
                raise ValueError("column names must not contain tabs or line breaks")
        elif columns != self.columns:
            raise ValueError(f"every frame written to one TSV file needs the same columns; "
                             f"the first had {self.columns}, this one has {columns}")
        labelled = named.set_axis(frame.index)  # errors name the caller's row labels
        for name in named.columns:
            if named[name].dtype == object or pd.api.types.is_string_dtype(named[name]):
                _check_text(labelled, name)
        return named

    def emit(self, destination: _Destination, named: pd.DataFrame) -> None:
        assert self.stream is not None
        if self.columns is None:
            self.columns = [str(c) for c in named.columns]
            self.stream.write(("\t".join(self.columns) + "\n").encode())
        for start in _chunks(len(named)):
            part = named.iloc[start:start + _CHUNK_ROWS]
            _write_lines(self.stream, _lines([_text(part[c]) for c in part.columns]))


class _ParquetEncoder(_Encoder):
    """pyarrow's ParquetWriter: the schema of the first frame, one row group per frame."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name"])
        self.targets.require(["name"])
        self.schema: pa.Schema | None = None
        self.writer: pq.ParquetWriter | None = None

    def prepare(self, frame: pd.DataFrame) -> pa.Table:
        named = _named_frame(frame, self.queries, self.targets)
        table = pa.Table.from_pandas(named, preserve_index=False)
        if self.schema is None:
            fields = [self._typed(field) for field in table.schema]
            metadata = dict(table.schema.metadata or {})
            metadata[b"gpualign_df.mode"] = self.mode.encode()
            schema = pa.schema(fields, metadata=metadata)
        else:
            schema = self.schema
            if table.schema.names != schema.names:
                raise ValueError(f"every frame written to one Parquet file needs the same "
                                 f"columns; the first had {schema.names}, this one has "
                                 f"{table.schema.names}")
        try:
            table = table.cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise ValueError(f"this frame's columns cannot take the Parquet file's schema "
                             f"(fixed by the first frame): {error}") from error
        if self.schema is None:
            self.schema = schema
        return table

    def _typed(self, field: pa.Field) -> pa.Field:
        """An empty first frame's object columns have arrow type null: give them the type
        later frames will have, so that those cast."""
        if not pa.types.is_null(field.type):
            return field
        if field.name in ("query", "target"):
            side = self.queries if field.name == "query" else self.targets
            index = side.frame.index
            kind = pa.array(index[:1024].to_numpy(), from_pandas=True).type if len(index) \
                else pa.int64()
            return field.with_type(kind if not pa.types.is_null(kind) else pa.int64())
        return field.with_type(pa.large_string())

    def begin(self, stream: IO[bytes], destination: _Destination) -> None:
        super().begin(stream, destination)
        assert self.schema is not None
        self.writer = pq.ParquetWriter(destination.raw, self.schema)

    def emit(self, destination: _Destination, table: pa.Table) -> None:
        assert self.writer is not None
        if table.num_rows:
            _write_row_group(self.writer, table)

    def finish(self, destination: _Destination) -> None:
        assert self.writer is not None
        self.writer.close()  # the footer; the commit then flushes and renames
        self.writer = None

    def abandon(self) -> None:
        # The file is being discarded.  Close the writer here (its footer goes to the
        # temporary file, removed next) rather than leave that to its finalizer, which
        # would write after the handle is closed and report errors nobody can catch.
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the output is discarded anyway
                pass


def _write_row_group(writer: pq.ParquetWriter, table: pa.Table) -> None:
    """One frame, one row group."""
    writer.write_table(table, row_group_size=table.num_rows)


class _SamState:
    """What a SAM writer remembers of the query run the previous write() ended with."""

    def __init__(self) -> None:
        self.active = False
        self.label: object = None
        self.primary = False   # the run already has a primary mapped record
        self.unmapped = False  # the run already has its unmapped record


class _SamEncoder(_Encoder):
    format_name = "sam"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name", "seq"])
        self.targets.require(["name", "seq"])
        self.queries.check_names()
        self.targets.check_names()
        self.header = self._header()
        self.state = _SamState()

    def _header(self) -> bytes:
        """``@HD``, one ``@SQ`` per row of the targets frame in its order, ``@PG``.

        Reference names must be unique (a reader maps RNAME to one @SQ), non-empty and
        match SAM's ``[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*`` in
        spirit: no white space, not starting with ``*`` or ``=``."""
        names = self.targets.raw_names
        lengths = self.targets.lengths
        values = pd.Series(names.to_numpy(zero_copy_only=False), dtype=object).fillna("")
        duplicated = values.duplicated(keep=False).to_numpy()
        if duplicated.any():
            groups: dict[str, list[int]] = {}
            for row in np.flatnonzero(duplicated):
                groups.setdefault(values.iloc[row], []).append(int(row) + 1)
            listed = "; ".join(f"{name!r} (records {', '.join(map(str, rows[:10]))}"
                               f"{' ...' if len(rows) > 10 else ''})"
                               for name, rows in list(groups.items())[:5])
            more = f"; and {len(groups) - 5} more names" if len(groups) > 5 else ""
            raise ValueError(f"SAM needs unique reference names, and the targets frame "
                             f"repeats {len(groups)} name(s) (names are the header's first "
                             f"word): {listed}{more}; rename the sequences")
        bad = pc.fill_null(pc.match_substring_regex(names, r"^$|^[*=]|\s"), True)
        mask = np.asarray(bad.to_numpy(zero_copy_only=False), dtype=bool)
        if mask.any():
            first = values.iloc[int(np.flatnonzero(mask)[0])]
            raise ValueError(f"SAM reference names must be non-empty, free of white space "
                             f"and not start with '*' or '=': target {first!r} (record "
                             f"{_records(mask)})")
        head = "@HD\tVN:1.6\tSO:unsorted\n".encode()
        sq = _lines([_lit("@SQ"), _prefix("SN:", names), _prefix("LN:", _text(lengths))])
        pg = f"@PG\tID:gpualign\tPN:gpualign\tDS:alignment mode {self.mode}\n".encode()
        return head + _joined_bytes(sq) + pg

    def prepare(self, frame: pd.DataFrame) -> dict[str, object]:
        _require_traceback(frame, self.format_name)
        query_pos = self.queries.positions(frame["query"])
        target_pos = self.targets.positions(frame["target"])
        aligned = _aligned(frame)
        _check_bounds(frame, "query_end", self.queries.lengths[query_pos], aligned)
        _check_bounds(frame, "target_end", self.targets.lengths[target_pos], aligned)
        _check_text(frame, "cigar")
        frame = frame.reset_index(drop=True)
        roles = _sam_roles(frame["query"].to_numpy(), aligned, _ints(frame["score"]),
                           self.state)
        return {"frame": frame, "query_pos": query_pos, "target_pos": target_pos,
                "aligned": aligned, **roles}

    def begin(self, stream: IO[bytes], destination: _Destination) -> None:
        super().begin(stream, destination)
        stream.write(self.header)

    def emit(self, destination: _Destination, prepared: dict[str, object]) -> None:
        assert self.stream is not None
        keep = prepared["keep"]
        order = np.flatnonzero(keep)
        frame = prepared["frame"]
        for start in _chunks(len(order)):
            rows = order[start:start + _CHUNK_ROWS]
            _write_lines(self.stream, self._lines(
                frame.iloc[rows].reset_index(drop=True),
                prepared["query_pos"][rows], prepared["target_pos"][rows],
                prepared["aligned"][rows], prepared["primary"][rows], prepared["mapq"][rows]))
        # The state is advanced only once the frame is written.
        self.state = prepared["state"]

    def _lines(self, part: pd.DataFrame, query_pos: np.ndarray, target_pos: np.ndarray,
               aligned: np.ndarray, primary: np.ndarray, mapq: np.ndarray) -> pa.Array:
        qlen = self.queries.lengths[query_pos]
        query_start, query_end = _ints(part["query_start"]), _ints(part["query_end"])
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
        secondary = aligned & ~primary
        flag = np.where(aligned, np.where(secondary, 256, 0), 4)
        pos = _ints(part["target_start"]) + lead_del + 1
        nm = _ints(part["mismatches"]) + _ints(part["gaps"]) - lead_del - tail_del
        seq = self.queries.seqs.take(pa.array(query_pos))
        quals = self.queries.quals
        qual = quals.take(pa.array(query_pos)) if quals is not None else _lit("*")
        # Secondary records carry no SEQ/QUAL: the primary has them.
        hide = pa.array(secondary)
        seq = pc.if_else(hide, _lit("*"), seq)
        qual = pc.if_else(hide, _lit("*"), qual)
        tags = pc.binary_join_element_wise(
            _prefix("AS:i:", _text(_ints(part["score"]))),
            _prefix("NM:i:", _text(nm)),
            _lit("\t"),
        )
        fields = [
            self.queries.names.take(pa.array(query_pos)),
            _text(flag),
            pc.if_else(mapped, self.targets.names.take(pa.array(target_pos)), _lit("*")),
            pc.if_else(mapped, _text(pos), _lit("0")),
            _text(np.where(aligned, mapq, 0)),
            pc.if_else(mapped, full_cigar, _lit("*")),
            _lit("*"), _lit("0"), _lit("0"),
            seq,
            qual,
        ]
        tail = pc.if_else(mapped, tags, pa.scalar(None, _STR))
        return _lines(fields, tail)


def _joined_bytes(lines: pa.Array) -> bytes:
    if len(lines) == 0:
        return b""
    _, offsets_buffer, data = lines.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=len(lines) + 1,
                            offset=lines.offset * 8)
    return bytes(memoryview(data)[offsets[0]:offsets[-1]])


def _sam_roles(labels: np.ndarray, aligned: np.ndarray, scores: np.ndarray,
               state: _SamState) -> dict[str, object]:
    """Which rows become records, which mapped row of each query run is primary, MAPQ.

    A run is a stretch of consecutive rows with the same query label; the first run
    continues the previous call's last run when its label is the same (`state`).  Per run:
    the first mapped row with the best score is primary unless the run already has a
    primary from the previous call; every other mapped row is secondary; with no mapped
    row, the first row is written once as unmapped.  MAPQ of a primary: 255 when the run
    has one mapped row here, else from the best and second-best scores s1, s2:
    0 if s2 >= s1 or s1 <= 0, else min(60, round(60 * (s1 - s2) / s1))."""
    n = len(labels)
    new_state = _SamState()
    if n == 0:
        new_state.__dict__.update(state.__dict__)
        return {"keep": np.zeros(0, bool), "primary": np.zeros(0, bool),
                "mapq": np.zeros(0, np.int64), "state": new_state}
    starts_mask = np.ones(n, dtype=bool)
    if n > 1:
        starts_mask[1:] = np.asarray(labels[1:] != labels[:-1], dtype=bool)
    continued = bool(state.active and _same_label(labels[0], state.label))
    starts = np.flatnonzero(starts_mask)
    run = np.cumsum(starts_mask) - 1
    rows = np.arange(n)
    low = np.iinfo(np.int64).min
    best_scores = np.where(aligned, scores, low)
    s1 = np.maximum.reduceat(best_scores, starts)
    mapped_count = np.add.reduceat(aligned.astype(np.int64), starts)
    is_best = aligned & (best_scores == s1[run])
    first_best = np.minimum.reduceat(np.where(is_best, rows, n), starts)
    has_mapped = first_best < n
    others = best_scores.copy()
    others[first_best[has_mapped]] = low
    s2 = np.maximum.reduceat(others, starts)

    primary_run = has_mapped.copy()
    if continued and state.primary:
        primary_run[0] = False  # the previous call wrote this query's primary
    primary = np.zeros(n, dtype=bool)
    primary[first_best[primary_run]] = True

    first_unmapped = np.minimum.reduceat(np.where(~aligned, rows, n), starts)
    unmapped_run = ~has_mapped & (first_unmapped < n)
    if continued and (state.primary or state.unmapped):
        unmapped_run[0] = False
    keep = aligned.copy()
    keep[first_unmapped[unmapped_run]] = True

    # Python's round(60 * (s1 - s2) / s1): the integer product, one correctly rounded
    # division, rounding half to even (np.rint) -- the same float64 operations.
    scored = (mapped_count >= 2) & (s2 < s1) & (s1 > 0)
    top = np.where(scored, s1, 1)
    second = np.where(scored, s2, 0)
    ratio = (60 * (top - second)).astype(np.float64) / top.astype(np.float64)
    run_mapq = np.where(scored, np.minimum(60, np.rint(ratio)), 0).astype(np.int64)
    run_mapq = np.where(mapped_count == 1, 255, run_mapq)
    mapq = np.where(primary, run_mapq[run], 0)

    last = len(starts) - 1
    new_state.active = True
    new_state.label = labels[-1]
    carried = continued and last == 0
    new_state.primary = bool(primary_run[last]) or (carried and state.primary)
    new_state.unmapped = bool(unmapped_run[last]) or (carried and state.unmapped)
    return {"keep": keep, "primary": primary, "mapq": mapq, "state": new_state}


def _same_label(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _cigar_end_count(cigar: pa.Array, pattern: str) -> np.ndarray:
    found = pc.extract_regex(cigar, pattern)
    digits = pc.fill_null(pc.struct_field(found, "n"), "0")
    digits = pc.if_else(pc.equal(digits, ""), _lit("0"), digits)
    return pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)


class _AlignedRowsEncoder(_Encoder):
    """PAF and BLAST: one line per row with an aligned column, nothing else."""

    needs_seq = True
    format_name = ""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        columns = ["name", "seq"] if self.needs_seq else ["name"]
        self.queries.require(columns)
        self.targets.require(columns)
        self.queries.check_names()
        self.targets.check_names()

    def prepare(self, frame: pd.DataFrame) -> dict[str, object]:
        _require_traceback(frame, self.format_name)
        query_pos = self.queries.positions(frame["query"])
        target_pos = self.targets.positions(frame["target"])
        aligned = _aligned(frame)
        if self.needs_seq:
            _check_bounds(frame, "query_end", self.queries.lengths[query_pos], aligned)
            _check_bounds(frame, "target_end", self.targets.lengths[target_pos], aligned)
        frame = frame.reset_index(drop=True)
        rows = np.flatnonzero(aligned)
        return {"frame": frame.iloc[rows].reset_index(drop=True),
                "query_pos": query_pos[rows], "target_pos": target_pos[rows]}

    def emit(self, destination: _Destination, prepared: dict[str, object]) -> None:
        assert self.stream is not None
        frame = prepared["frame"]
        for start in _chunks(len(frame)):
            stop = start + _CHUNK_ROWS
            _write_lines(self.stream, self._lines(
                frame.iloc[start:stop], prepared["query_pos"][start:stop],
                prepared["target_pos"][start:stop]))

    def _lines(self, part: pd.DataFrame, query_pos: np.ndarray,
               target_pos: np.ndarray) -> pa.Array:
        raise NotImplementedError


class _PafEncoder(_AlignedRowsEncoder):
    format_name = "paf"

    def _lines(self, part: pd.DataFrame, query_pos: np.ndarray,
               target_pos: np.ndarray) -> pa.Array:
        cigar = pc.replace_substring_regex(_text(part["cigar"]), r"\d+S", "")
        fields = [
            self.queries.names.take(pa.array(query_pos)),
            _text(self.queries.lengths[query_pos]),
            _text(part["query_start"]), _text(part["query_end"]),
            _lit("+"),
            self.targets.names.take(pa.array(target_pos)),
            _text(self.targets.lengths[target_pos]),
            _text(part["target_start"]), _text(part["target_end"]),
            _text(part["matches"]), _text(part["length"]),
            _lit("255"),
            _prefix("AS:i:", _text(part["score"])),
            _prefix("cg:Z:", cigar),
        ]
        return _lines(fields)


class _Blast6Encoder(_AlignedRowsEncoder):
    format_name = "blast6"

    def __init__(self, *args: object) -> None:
        scoring = args[3]
        # Sequences are needed only for the search space of the e-values.
        self.needs_seq = scoring is not None
        super().__init__(*args)
        self.stats: object | None = None
        self.params: object | None = None
        if self.scoring is not None:
            # Imported here: the statistics are needed by this one format only.
            self.stats = importlib.import_module("gpualign_df.blast_stats")
            self.params = self.stats.karlin_altschul(self.scoring)
        if self.params is not None and self.how in ("search", "pairwise"):
            # The whole targets frame is the database searched by every query.
            self.db_residues = int(self.targets.lengths.sum())
            self.db_sequences = len(self.targets.frame)

    def _statistics(self, part: pd.DataFrame, query_pos: np.ndarray,
                    target_pos: np.ndarray) -> tuple[pa.Array, pa.Array]:
        if self.params is None:
            return _lit("NA"), _lit("NA")
        scores = _ints(part["score"])
        query_lengths = self.queries.lengths[query_pos]
        if self.how in ("search", "pairwise"):
            evalues, bits = self.stats.evalues_and_bitscores(
                scores, query_lengths, self.db_residues, self.db_sequences, self.params)
        else:
            # Each pair is its own search: the database is the pair's target alone.
            target_lengths = self.targets.lengths[target_pos]
            evalues = np.empty(len(scores), dtype=np.float64)
            bits = np.empty(len(scores), dtype=np.float64)
            order = np.argsort(target_lengths, kind="stable")
            sorted_lengths = target_lengths[order]
            bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
            for group in np.split(order, bounds):
                if len(group) == 0:
                    continue
                e, b = self.stats.evalues_and_bitscores(
                    scores[group], query_lengths[group], int(target_lengths[group[0]]), 1,
                    self.params)
                evalues[group] = e
                bits[group] = b
        return _blast_evalues(np.asarray(evalues, np.float64)), \
            _blast_bitscores(np.asarray(bits, np.float64))

    def _lines(self, part: pd.DataFrame, query_pos: np.ndarray,
               target_pos: np.ndarray) -> pa.Array:
        evalue, bitscore = self._statistics(part, query_pos, target_pos)
        fields = [
            self.queries.names.take(pa.array(query_pos)),
            self.targets.names.take(pa.array(target_pos)),
            _pident(part),
            _text(part["length"]),
            _text(part["mismatches"]),
            _text(part["gap_opens"]),
            _text(_ints(part["query_start"]) + 1),
            _text(part["query_end"]),
            _text(_ints(part["target_start"]) + 1),
            _text(part["target_end"]),
            evalue,
            bitscore,
        ]
        return _lines(fields)


_ENCODERS: dict[str, type[_Encoder]] = {
    "tsv": _TsvEncoder, "parquet": _ParquetEncoder, "sam": _SamEncoder, "paf": _PafEncoder,
    "blast6": _Blast6Encoder,
}


# --------------------------------------------------------------------------------------
# number formatting as C's printf, vectorized
# --------------------------------------------------------------------------------------

def _pident(part: pd.DataFrame) -> pa.Array:
    """``100 * identity`` formatted like C's ``%.3f``, without per-row Python."""
    identity = pd.to_numeric(part["identity"]).to_numpy(dtype=np.float64, na_value=np.nan)
    fallback = _ints(part["matches"]) / np.maximum(_ints(part["length"]), 1)
    identity = np.where(np.isnan(identity), fallback, identity)
    thousandths = np.rint(identity * 100_000.0).astype(np.int64)
    whole = _text(thousandths // 1000)
    fraction = pc.utf8_lpad(_text(thousandths % 1000), 3, "0")
    return pc.binary_join_element_wise(whole, fraction, _lit("."))


def _near_half(scaled: np.ndarray) -> np.ndarray:
    """Where rounding `scaled` (an inexact product) could go either way: within float error
    of a .5 tie.  Those rows are formatted by Python, whose ``%`` rounds the exact binary
    value as C's printf does."""
    fraction = scaled - np.floor(scaled)
    return np.abs(fraction - 0.5) <= 1e-9 + np.abs(scaled) * 1e-15


def _patched(candidate: pa.Array, values: np.ndarray, unsafe: np.ndarray,
             spec: str) -> pa.Array:
    if not unsafe.any():
        return candidate
    rows = np.flatnonzero(unsafe)
    exact = pa.array([spec % float(values[i]) for i in rows], type=_STR)
    mask = np.zeros(len(values), dtype=bool)
    mask[rows] = True
    return pc.replace_with_mask(candidate, pa.array(mask), exact)


def _c_fixed(values: np.ndarray, decimals: int) -> pa.Array:
    """C's ``%.{decimals}f`` for each value."""
    scale = 10 ** decimals
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * float(scale)
        unsafe = ~np.isfinite(scaled) | (values < 0) | (scaled >= 2.0 ** 52) \
            | _near_half(scaled)
        units = np.floor(np.where(unsafe, 0.0, scaled) + 0.5).astype(np.int64)
    whole = _text(units // scale)
    if decimals:
        fraction = pc.utf8_lpad(_text(units % scale), decimals, "0")
        candidate = pc.binary_join_element_wise(whole, fraction, _lit("."))
    else:
        candidate = whole
    return _patched(candidate, values, unsafe, f"%.{decimals}f")


def _c_exponent(values: np.ndarray, digits: int) -> pa.Array:
    """C's ``%.{digits}e`` for each value (positive values; others go to Python)."""
    scale = 10 ** digits
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log10(values))
        exponent = np.where(np.isfinite(exponent), exponent, 0.0)
        mantissa = values / np.power(10.0, exponent)
        scaled = mantissa * scale
        unsafe = ~(values > 0) | ~np.isfinite(values) | (mantissa < 1.0 + 1e-9) \
            | (mantissa > 10.0 - 1e-9) | _near_half(scaled)
        units = np.floor(np.where(unsafe, scale, scaled) + 0.5).astype(np.int64)
    carry = units >= 10 * scale  # 9.995 -> 10.00: one digit more, exponent + 1
    units = np.where(carry, units // 10, units)
    exponent = exponent.astype(np.int64) + carry
    lead = _text(units // scale)
    if digits:
        mantissa_text = pc.binary_join_element_wise(
            lead, pc.utf8_lpad(_text(units % scale), digits, "0"), _lit("."))
    else:
        mantissa_text = lead
    sign = pc.if_else(pa.array(exponent < 0), _lit("e-"), _lit("e+"))
    power = pc.utf8_lpad(_text(np.abs(exponent)), 2, "0")
    candidate = pc.binary_join_element_wise(mantissa_text, sign, power, _lit(""))
    return _patched(candidate, values, unsafe, f"%.{digits}e")


def _by_band(values: np.ndarray, bands: list[tuple[np.ndarray, object]]) -> pa.Array:
    """Format each row by the first band whose mask holds it (bands cover every row)."""
    out: pa.Array | None = None
    taken = np.zeros(len(values), dtype=bool)
    for mask, formatter in bands:
        rows = mask & ~taken
        taken |= rows
        if not rows.any():
            continue
        if isinstance(formatter, str):
            part = pa.array(np.full(int(rows.sum()), formatter, dtype=object), type=_STR)
        else:
            part = formatter(values[rows])
        if out is None:
            out = pa.nulls(len(values), _STR)
        out = pc.replace_with_mask(out, pa.array(rows), part)
    return out if out is not None else pa.array([], type=_STR)


def _blast_evalues(evalues: np.ndarray) -> pa.Array:
    """E-values as BLAST+'s tabular output prints them (``CAlignFormatUtil::
    GetScoreString`` with the tabular override of ``CBlastTabularInfo::SetScores``):
    ``0.0`` below 1e-180, ``%.2e`` below 0.0009, ``%.3f`` below 0.1, ``%.2f`` below 1,
    ``%.1f`` below 10, else ``%.0f``."""
    with np.errstate(invalid="ignore"):
        return _by_band(evalues, [
            (evalues < 1.0e-180, "0.0"),
            (evalues < 0.0009, lambda v: _c_exponent(v, 2)),
            (evalues < 0.1, lambda v: _c_fixed(v, 3)),
            (evalues < 1.0, lambda v: _c_fixed(v, 2)),
            (evalues < 10.0, lambda v: _c_fixed(v, 1)),
            (np.ones(len(evalues), dtype=bool), lambda v: _c_fixed(v, 0)),
        ])


def _blast_bitscores(bits: np.ndarray) -> pa.Array:
    """Bit scores as BLAST+ prints them: ``%.3e`` above 99999, the integer part (C's
    ``(long)`` truncation) above 99.9, else ``%.1f`` (BLAST's width padding left out)."""
    with np.errstate(invalid="ignore"):
        return _by_band(bits, [
            (bits > 99999, lambda v: _c_exponent(v, 3)),
            (bits > 99.9, lambda v: _text(np.trunc(v).astype(np.int64))),
            (np.ones(len(bits), dtype=bool), lambda v: _c_fixed(v, 1)),
        ])
