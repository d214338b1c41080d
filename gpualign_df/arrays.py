"""Raw result columns of a set of pairs (numpy), and how parts of a job are put together."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

COLUMNS = ("score", "query_end", "target_end", "query_start", "target_start")


@dataclass
class AlignmentArrays:
    """Raw result columns of a batch of pairs, in pair order (numpy arrays)."""

    valid: np.ndarray
    score: np.ndarray
    query_end: np.ndarray
    target_end: np.ndarray
    query_start: np.ndarray | None = None
    target_start: np.ndarray | None = None
    cigar_chars: np.ndarray | None = None
    cigar_offsets: np.ndarray | None = None
    stats: dict[str, np.ndarray] = field(default_factory=dict)
    cells: int = 0
    seconds: float = 0.0

    def subset(self, rows: np.ndarray) -> "AlignmentArrays":
        """The same columns for ``rows`` only, in that order."""
        out = AlignmentArrays(self.valid[rows], self.score[rows], self.query_end[rows],
                              self.target_end[rows])
        if self.cigar_chars is not None:
            out.query_start = self.query_start[rows]
            out.target_start = self.target_start[rows]
            out.stats = {name: values[rows] for name, values in self.stats.items()}
            lengths = np.diff(self.cigar_offsets)[rows]
            out.cigar_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(lengths, out=out.cigar_offsets[1:])
            out.cigar_chars = np.empty(int(out.cigar_offsets[-1]), dtype=np.uint8)
            _copy_strings(self.cigar_chars, self.cigar_offsets, np.asarray(rows, np.int64),
                          out.cigar_chars, out.cigar_offsets, np.arange(len(rows)))
        return out


def merge_parts(total: int, parts: list[tuple[np.ndarray, AlignmentArrays]],
                traceback: bool) -> AlignmentArrays:
    """Put parts (positions in the job, their arrays) together into one set of ``total`` rows."""
    out = AlignmentArrays(valid=np.zeros(total, dtype=bool), score=np.zeros(total, np.int32),
                          query_end=np.zeros(total, np.int32),
                          target_end=np.zeros(total, np.int32))
    for positions, part in parts:
        out.valid[positions] = part.valid
        out.cells += part.cells
        for name in COLUMNS[:3]:
            getattr(out, name)[positions] = getattr(part, name)
    if not traceback:
        return out
    out.query_start = np.zeros(total, np.int32)
    out.target_start = np.zeros(total, np.int32)
    out.stats = {name: np.zeros(total, np.int32)
                 for name in ("matches", "mismatches", "gap_opens", "gaps", "length")}
    lengths = np.zeros(total, dtype=np.int64)
    for positions, part in parts:
        out.query_start[positions] = part.query_start
        out.target_start[positions] = part.target_start
        for name, values in part.stats.items():
            out.stats[name][positions] = values
        lengths[positions] = np.diff(part.cigar_offsets)
    out.cigar_offsets = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(lengths, out=out.cigar_offsets[1:])
    out.cigar_chars = np.empty(int(out.cigar_offsets[-1]), dtype=np.uint8)
    for positions, part in parts:
        _copy_strings(part.cigar_chars, part.cigar_offsets, np.arange(len(positions)),
                      out.cigar_chars, out.cigar_offsets, np.asarray(positions, np.int64))
    return out


@njit(cache=True)
def _copy_strings(source, source_offsets, source_rows, target, target_offsets, target_rows):
    for k in range(source_rows.shape[0]):
        begin = source_offsets[source_rows[k]]
        size = source_offsets[source_rows[k] + 1] - begin
        start = target_offsets[target_rows[k]]
        for c in range(size):
            target[start + c] = source[begin + c]
