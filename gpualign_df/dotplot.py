"""A k-mer dot plot of two sequences with the alignment path of a result row drawn over it.

The dots are the positions where a k-mer of the query occurs in the target, sampled down
to ``max_points`` (every k-mer of both sequences is hashed with numpy; a megabase pair takes
about a second); the path is the row's CIGAR from ``(query_start, target_start)`` to
``(query_end, target_end)``. matplotlib draws it (the optional extra ``plot``: ``pip install
"gpualign_df[plot]"``), imported only when a plot is made.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .views import cigar_runs, lookup_sequences, result_rows

#: Hash multiplier of the k-mers (odd, 64-bit; arithmetic wraps).
_BASE = np.uint64(0x100000001B3)


@dataclass(frozen=True)
class DotPlot:
    """What a plot drew: ``dots`` (n x 2, query and target 0-based positions of shared
    k-mers), ``path`` (the alignment's vertices, query and target positions, from its
    start to its end cell) and the file written."""

    dots: np.ndarray
    path: np.ndarray
    file: Path


def alignment_path(cigar: str, query_start: int, target_start: int) -> np.ndarray:
    """Vertices of a CIGAR's path: (query position, target position) at its start and at
    the end of every run (soft clips are not on the path).

    Examples
    --------
    >>> alignment_path("3=1I2X1D", 2, 0).tolist()
    [[2, 0], [5, 3], [6, 3], [8, 5], [8, 6]]
    """
    points = [(query_start, target_start)]
    for count, op, i, j in cigar_runs(cigar, query_start, target_start):
        points.append((i + (0 if op == "D" else count), j + (0 if op == "I" else count)))
    return np.array(points, dtype=np.int64)


def _kmer_hashes(sequence: str, k: int) -> np.ndarray:
    """A hash of every k-mer of ``sequence`` (case-insensitive), position by position."""
    codes = np.frombuffer(sequence.upper().encode("latin-1"), dtype=np.uint8)
    if len(codes) < k:
        return np.zeros(0, dtype=np.uint64)
    values = codes.astype(np.uint64)
    hashes = np.zeros(len(codes) - k + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(k):
            hashes = hashes * _BASE + values[offset:offset + len(hashes)]
    return hashes


def shared_kmers(query: str, target: str, k: int, max_points: int,
                 seed: int = 0) -> np.ndarray:
    """Positions (query, target) where the same k-mer starts, at most ``max_points`` of
    them, sampled uniformly where there are more."""
    query_hashes, target_hashes = _kmer_hashes(query, k), _kmer_hashes(target, k)
    if len(query_hashes) == 0 or len(target_hashes) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(target_hashes, kind="stable")
    sorted_hashes = target_hashes[order]
    first = np.searchsorted(sorted_hashes, query_hashes, side="left")
    last = np.searchsorted(sorted_hashes, query_hashes, side="right")
    counts = last - first
    total = int(counts.sum())
    rng = np.random.default_rng(seed)
    # every pair is the ``rank``-th occurrence of a query k-mer: sample the pairs by rank
    chosen = (np.sort(rng.choice(total, size=max_points, replace=False))
              if total > max_points else np.arange(total))
    ends = np.cumsum(counts)
    query_pos = np.searchsorted(ends, chosen, side="right")
    within = chosen - (ends[query_pos] - counts[query_pos])
    target_pos = order[first[query_pos] + within]
    return np.stack([query_pos, target_pos], axis=1).astype(np.int64)


def dot_plot(frame: Any, queries: Any, targets: Any, path: str | os.PathLike[str],
             row: Any = None, *, k: int | None = None, max_points: int = 200_000,
             title: str | None = None) -> DotPlot:
    """Write a k-mer dot plot of one result row's pair with its alignment path over it.

    Parameters
    ----------
    frame : pandas.DataFrame or cudf.DataFrame
        A result of :func:`gpualign_df.align` with CIGARs.
    queries, targets : Series or list-like
        The inputs of the frame (its ``query`` / ``target`` columns are their labels;
        positions for lists).
    path : str or os.PathLike
        The image: ``.png``, ``.svg`` or ``.pdf`` (matplotlib's formats); written
        atomically.
    row : label, optional
        The frame's row (index label); None: the first row.
    k : int, optional
        k-mer length; None: 12 for sequences of up to 20 kbp, 16 up to 1 Mbp, 20 beyond.
    max_points : int
        Most dots drawn (a uniform sample of the shared k-mers beyond it).
    title : str, optional
        The plot's title; None: the labels and score.

    Returns
    -------
    DotPlot
        The dots and path drawn and the file.

    Examples
    --------
    >>> import tempfile, gpualign_df
    >>> q, t = "ACGTTGCAACGTAGGCTAAC" * 3, "ACGTTGCAACGTAGCTAAC" * 3
    >>> frame = gpualign_df.align([q], [t], mode="nw", match=1, mismatch=-4, gap_open=7,
    ...                           gap_extend=1, backend="cpu")
    >>> plot = gpualign_df.dot_plot(frame, [q], [t], tempfile.mkdtemp() + "/pair.png", k=8)
    >>> plot.path[0].tolist(), plot.path[-1].tolist(), plot.file.suffix
    ([0, 0], [60, 57], '.png')
    """

    try:
        from matplotlib.figure import Figure
    except ImportError as error:  # the optional extra
        raise ImportError('dot plots need matplotlib: pip install "gpualign_df[plot]"') \
            from error
    from .io.output import Destination

    record = result_rows(frame if row is not None else frame.iloc[:1], row, "plot")
    if len(record) == 0:
        raise ValueError("the frame has no rows to plot")
    record = record.iloc[0]
    query = lookup_sequences(queries, [record["query"]], "query")[0]
    target = lookup_sequences(targets, [record["target"]], "target")[0]
    if query is None or target is None or pd.isna(record["cigar"]):
        raise ValueError(f"row ({record['query']!r}, {record['target']!r}) is null: nothing "
                         f"to plot")
    longest = max(len(query), len(target))
    if k is None:
        k = 12 if longest <= 20_000 else 16 if longest <= 1_000_000 else 20
    if k < 1 or max_points < 1:
        raise ValueError(f"k and max_points must be positive, got {k} and {max_points}")
    dots = shared_kmers(query, target, k, max_points)
    vertices = alignment_path(str(record["cigar"]), int(record["query_start"]),
                              int(record["target_start"]))
    figure = Figure(figsize=(7, 7), dpi=120)
    axes = figure.add_subplot()
    axes.scatter(dots[:, 1], dots[:, 0], s=0.5, c="0.55", linewidths=0, rasterized=True)
    axes.plot(vertices[:, 1], vertices[:, 0], c="#c0392b", lw=1.2)
    axes.set_xlim(0, len(target))
    axes.set_ylim(len(query), 0)
    axes.set_xlabel(f"target {record['target']} ({len(target):,})")
    axes.set_ylabel(f"query {record['query']} ({len(query):,})")
    axes.set_title(title if title is not None else
                   f"{record['query']} x {record['target']}: score {record['score']}, "
                   f"{k}-mers")
    out = Path(os.fspath(path))
    destination = Destination(out)  # a temporary file beside it, renamed when complete
    try:
        figure.savefig(destination.open(), format=out.suffix.lstrip(".").lower() or None)
        destination.commit()
    except BaseException:
        destination.discard()
        raise
    return DotPlot(dots, vertices, out)
