"""What every format's writer shares: the encoder protocol, the sequence frames prepared
for lookups by result label, and the checks of a result frame.

Conventions of the result frame (see the package design notes): ``query``/``target`` are
index labels into the sequence frames, coordinates are 0-based and end-exclusive, and the
CIGAR covers exactly ``[query_start, query_end) x [target_start, target_end)`` (``I`` = a
residue in the query only, ``D`` = a residue in the target only).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from typing import IO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import config
from ..results import SCORE_ONLY_COLUMNS, TRACEBACK_COLUMNS
from ..scoring import Scoring
from .output import Destination
from .text import as_text, lit, write_in_blocks


class Encoder(ABC):
    """Turns result frames into one format's bytes.

    :meth:`prepare` does every check of a frame and may compute anything, but writes
    nothing; :meth:`begin` writes the header once the output exists; :meth:`emit` writes a
    prepared frame; :meth:`finish` ends the format before the commit.

    Text formats write a frame in blocks of ``chunk_rows`` rows (the setting
    ``write_chunk_rows``, read once, when the writer is opened), so that the strings of one
    block are in memory at a time; the bytes do not depend on the block size."""

    def __init__(self, queries: Side, targets: Side, mode: str, scoring: Scoring | None,
                 how: str | None) -> None:
        self.queries = queries
        self.targets = targets
        self.mode = mode
        self.scoring = scoring
        self.how = how
        self.chunk_rows = config.settings().write_chunk_rows
        self.stream: IO[bytes] | None = None

    @abstractmethod
    def prepare(self, frame: pd.DataFrame) -> object:
        """Check ``frame`` and compute what :meth:`emit` writes; write nothing."""

    def begin(self, stream: IO[bytes], destination: Destination) -> None:
        self.stream = stream

    @abstractmethod
    def emit(self, destination: Destination, prepared: object) -> None:
        """Write a frame :meth:`prepare` accepted."""

    def finish(self, destination: Destination) -> None:
        """Nothing to end for the text formats."""

    def abandon(self) -> None:
        """Nothing to release for the text formats."""


def named_frame(frame: pd.DataFrame, queries: Side, targets: Side) -> pd.DataFrame:
    """`frame` with ``query_name``/``target_name`` inserted after ``query``/``target``."""
    _require_columns(frame, list(SCORE_ONLY_COLUMNS), "results")
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


class AlignedRowsEncoder(Encoder):
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
        require_traceback(frame, self.format_name)
        query_pos = self.queries.positions(frame["query"])
        target_pos = self.targets.positions(frame["target"])
        aligned = aligned_rows(frame)
        if self.needs_seq:
            check_bounds(frame, "query_end", self.queries.lengths[query_pos], aligned)
            check_bounds(frame, "target_end", self.targets.lengths[target_pos], aligned)
        frame = frame.reset_index(drop=True)
        rows = np.flatnonzero(aligned)
        return {"frame": frame.iloc[rows].reset_index(drop=True),
                "query_pos": query_pos[rows], "target_pos": target_pos[rows]}

    def emit(self, destination: Destination, prepared: dict[str, object]) -> None:
        assert self.stream is not None
        frame = prepared["frame"]

        def block_lines(rows: slice) -> pa.Array:
            return self.record_lines(frame.iloc[rows], prepared["query_pos"][rows],
                                     prepared["target_pos"][rows])

        write_in_blocks(self.stream, len(frame), self.chunk_rows, block_lines)

    @abstractmethod
    def record_lines(self, part: pd.DataFrame, query_pos: np.ndarray,
                     target_pos: np.ndarray) -> pa.Array:
        """The lines of the rows `part`, whose sequences are at `query_pos`/`target_pos`
        of the sequence frames (every row has an aligned column)."""


def as_pandas(frame: object, what: str) -> pd.DataFrame:
    """`frame` as a pandas frame (a cuDF frame through ``to_pandas()``)."""
    if isinstance(frame, pd.DataFrame):
        return frame
    if hasattr(frame, "to_pandas"):  # cuDF
        converted = frame.to_pandas()
        if isinstance(converted, pd.DataFrame):
            return converted
    raise TypeError(f"{what} must be a pandas (or cuDF) DataFrame, not {type(frame).__name__}"
                    " (compute Dask frames first)")


def _require_columns(frame: pd.DataFrame, columns: tuple[str, ...] | list[str],
                     what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} frame lacks the column(s) {missing}")


def require_traceback(frame: pd.DataFrame, fmt: str) -> None:
    """SAM, PAF and BLAST are written from the traceback columns of a result frame."""
    missing = [c for c in TRACEBACK_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{fmt} output needs the traceback columns of the result frame "
                         f"(align with traceback=True); missing: {missing}")


def record_numbers(mask: np.ndarray, limit: int = 5) -> str:
    """1-based record numbers of the rows where `mask` holds (the first `limit`)."""
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(int(r) + 1) for r in rows[:limit])
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


class Side:
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
        _require_columns(self.frame, columns, self.what)

    def check_names(self) -> None:
        """Names go into tab-separated lines: no tab, CR or LF."""
        names = self.raw_names
        bad = pc.fill_null(pc.match_substring_regex(names, r"[\t\n\r]"), False)
        mask = np.asarray(bad.to_numpy(zero_copy_only=False), dtype=bool)
        if mask.any():
            first = names[int(np.flatnonzero(mask)[0])].as_py()
            raise ValueError(f"{self.what} names cannot contain tabs or line breaks: "
                             f"{first!r} (record {record_numbers(mask)})")

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
        return as_text(self.frame["name"])

    @cached_property
    def names(self) -> pa.Array:
        """Names for SAM/PAF/BLAST: an empty name becomes ``*``."""
        array = self.raw_names
        return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), lit("*"), array)

    @cached_property
    def lengths(self) -> np.ndarray:
        return _seq_lengths(self.frame["seq"])

    @cached_property
    def seqs(self) -> pa.Array:
        array = as_text(self.frame["seq"])
        return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), lit("*"), array)

    @cached_property
    def quals(self) -> pa.Array | None:
        if "qual" not in self.frame.columns:
            return None
        array = as_text(self.frame["qual"])
        return pc.if_else(pc.equal(pc.fill_null(array, ""), ""), lit("*"), array)


def ints(series: pd.Series) -> np.ndarray:
    """Nullable integer column -> int64 numpy array, nulls as 0."""
    return pd.to_numeric(series).to_numpy(dtype=np.int64, na_value=0)


def _seq_lengths(seqs: pd.Series) -> np.ndarray:
    return seqs.str.len().to_numpy(dtype=np.int64, na_value=0)


def check_text(frame: pd.DataFrame, column: str) -> None:
    """A field of a tab-separated line must hold no tab or line break."""
    bad = pc.fill_null(pc.match_substring_regex(as_text(frame[column]), r"[\t\n\r]"), False)
    if pc.any(bad).as_py():
        row = int(np.flatnonzero(np.asarray(bad.to_numpy(zero_copy_only=False)))[0])
        raise ValueError(f"the {column!r} field of {_describe_row(frame, row)} contains a tab "
                         f"or line break and cannot be written: {frame[column].iloc[row]!r}")


def aligned_rows(frame: pd.DataFrame) -> np.ndarray:
    """Rows that hold an alignment with at least one aligned column (=, X or M)."""
    cigar = as_text(frame["cigar"])
    has_column = pc.fill_null(pc.match_substring_regex(cigar, r"\d[=XM]"), False)
    ok = np.asarray(has_column.to_numpy(zero_copy_only=False), dtype=bool)
    for name in ("score", "query_start", "query_end", "target_start", "target_end",
                 "matches", "mismatches", "gaps", "gap_opens", "length"):
        ok &= frame[name].notna().to_numpy(dtype=bool)
    return ok


def _describe_row(frame: pd.DataFrame, row: int) -> str:
    """A result row in the user's terms: its index label and the pair it aligns."""
    def shown(label: object) -> str:
        return repr(label.item() if isinstance(label, np.generic) else label)

    return (f"result row {shown(frame.index[row])} (query {shown(frame['query'].iloc[row])}, "
            f"target {shown(frame['target'].iloc[row])})")


def check_bounds(frame: pd.DataFrame, column: str, lengths: np.ndarray,
                 rows: np.ndarray) -> None:
    """The alignment's end must lie within its sequence (else the results were computed
    from other sequence frames than the ones given)."""
    ends = ints(frame[column])
    over = rows & (ends > lengths)
    if over.any():
        row = int(np.flatnonzero(over)[0])
        what = column.split("_")[0]
        raise ValueError(f"{column} {int(ends[row])} exceeds the {what} length "
                         f"{int(lengths[row])} at {_describe_row(frame, row)}; were the "
                         f"results computed from these {what} sequences?")

