"""Raw result columns of a set of pairs (numpy), shared by the engines and the frame builders."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
    offset: np.ndarray | None = None  # GATK's alignment offset (jobs with ``overhang``)
    cells: int = 0
    seconds: float = 0.0
