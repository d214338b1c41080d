"""CPU engine, linear space: the traceback of a pair whose 4-bit matrix would not fit its
memory budget, recomputed block by block from checkpoint rows.

The result (score, end and start cells, ops) is the one :func:`cpu.align_pairs` gives, bit
for bit, because every number comes from the same code:

1. The forward fill is :func:`cpu.fill_matrix` without a traceback matrix; it finds the
   score and end cell exactly as the full fill does and keeps H and I of every ``rows``-th
   row (``0, rows, 2 * rows, ... < m``): I is the only state besides H that one row hands
   to the next (D starts afresh on each row, from the border).
2. From the end cell up, the rows ``a + 1 .. i`` between the checkpoint row ``a`` below the
   walk's row ``i`` (``a = ((i - 1) // rows) * rows``) are recomputed by
   :func:`cpu.fill_row` over the columns ``1 .. j`` the walk can still reach, from row
   ``a``'s saved H and I and the mode's border values of the global row index. A row
   prefix depends only on the prefix above it and its own border cell, so the nibbles are
   those of the full matrix; :func:`cpu.walk` follows them until it stands on row ``a``,
   then carries its column and state (in H, or inside an I or D gap) into the block above,
   which holds row ``a``. A local walk stops at a cell whose source is the start; its
   blocks never leave the rectangle of rows ``<= end_i`` and columns ``<= end_j``.

The walk writes ops end to start into the same buffer layout as the full traceback, so the
CIGAR assembly does not know which path a pair took. Memory per pair: the checkpoint rows
(``8 * ceil(m / rows) * (n + 1)`` bytes), one block of nibbles (``rows * ceil(n / 2)``
bytes) and two DP rows, against ``m * ceil(n / 2)`` bytes for the full matrix
(:func:`linear_bytes`); time: the forward fill plus at most the end rectangle once more.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..scoring import MODE_LOCAL
from .cpu import SRC_DIAG, border_score, fill_matrix, fill_row, pair_sequences, walk


def block_rows(query_lengths: np.ndarray, target_lengths: np.ndarray, budget: int,
               min_rows: int) -> np.ndarray:
    """Rows per recomputed block of each pair: the fewest bytes of checkpoints plus block
    (``4 * sqrt(m)`` rows, about), at least ``min_rows``, but never a block of nibbles
    (``rows * ceil(n / 2)`` bytes) over ``budget``; at least 1, at most ``m``.

    Parameters
    ----------
    query_lengths, target_lengths : numpy.ndarray
        Each pair's ``m`` and ``n``.
    budget : int
        Bytes one pair's block of nibbles may take (its ``traceback_memory``).
    min_rows : int
        Rows per block at least where the budget allows (the setting
        ``linear_min_block_rows``): fewer rows mean more checkpoints for the same work.

    Returns
    -------
    numpy.ndarray
        int64, one entry per pair.

    Examples
    --------
    >>> block_rows(np.array([50_000, 100]), np.array([50_000, 100]), 1 << 30, 64).tolist()
    [895, 64]
    >>> block_rows(np.array([5000]), np.array([5000]), 5000, 64).tolist()  # two rows fit
    [2]
    """
    m = np.asarray(query_lengths, dtype=np.int64)
    n = np.asarray(target_lengths, dtype=np.int64)
    stride = np.maximum((n + 1) // 2, 1)
    rows = np.minimum(np.maximum(least_memory_rows(m, n), min_rows), max(int(budget), 0) // stride)
    return np.clip(rows, 1, np.maximum(m, 1))


def least_memory_rows(query_lengths: np.ndarray, target_lengths: np.ndarray) -> np.ndarray:
    """Rows per block at which checkpoints plus one block take the fewest bytes:
    ``8 * (m / K) * (n + 1) + K * ceil(n / 2)`` is least at ``K = sqrt(8 * m * (n + 1) /
    ceil(n / 2))``, about ``4 * sqrt(m)`` (int64 array, at least 1)."""
    m = np.asarray(query_lengths, dtype=np.int64)
    n = np.asarray(target_lengths, dtype=np.int64)
    stride = np.maximum((n + 1) // 2, 1)
    return np.maximum(np.ceil(np.sqrt(8.0 * m * (n + 1) / stride)).astype(np.int64), 1)


def linear_bytes(query_lengths: np.ndarray, target_lengths: np.ndarray,
                 rows: np.ndarray) -> np.ndarray:
    """Bytes of host memory the linear-space traceback of each pair holds at once: the
    checkpoint rows, one block of nibbles and the two DP rows (int64 array).

    Examples
    --------
    >>> linear_bytes(np.array([1000]), np.array([999]), np.array([100])).tolist()
    [138000]
    """
    m = np.asarray(query_lengths, dtype=np.int64)
    n = np.asarray(target_lengths, dtype=np.int64)
    rows = np.maximum(np.asarray(rows, dtype=np.int64), 1)
    checkpoints = (m + rows - 1) // rows
    return 8 * checkpoints * (n + 1) + np.minimum(rows, m) * ((n + 1) // 2) + 8 * (n + 1)


@njit(cache=True)
def align_pair_linear(query, target, sub, concrete, go, ge, mode, fqs, fqe, fts, fte, rows, ops,
                      control, slot):
    """Align one pair with its traceback in linear space (``rows`` rows per block).

    Returns (score, query_end, target_end, query_start, target_start, number_of_ops), the
    ops written end to start into ``ops`` (room for ``m + n``), as :func:`cpu.align_pairs`.
    ``control`` as there: the pair adds ``2 * m * n`` cells to ``control[1 + slot]`` in all
    (``m * n`` for the forward fill, then each recomputed row's cells, then the rest up to
    ``m * n``, so a progress bar that counts ``2 * m * n`` for the pair never runs past it),
    and stops within one row once ``control[0]`` is set (its outputs then meaningless).
    """
    m = query.shape[0]
    n = target.shape[0]
    h_row = np.empty(n + 1, dtype=np.int32)
    i_row = np.empty(n + 1, dtype=np.int32)
    saved = (m + rows - 1) // rows
    h_saved = np.empty((saved, n + 1), dtype=np.int32)
    i_saved = np.empty((saved, n + 1), dtype=np.int32)
    no_tb = np.empty((0, 1), dtype=np.uint8)
    best, end_i, end_j = fill_matrix(query, target, sub, go, ge, mode, fqs, fqe, fts, fte, no_tb,
                                     h_row, i_row, control, slot, rows, h_saved, i_saved)
    if control[0] != 0:
        return best, end_i, end_j, 0, 0, 0
    block = np.empty((min(rows, m) * ((n + 1) // 2), 1), dtype=np.uint8)
    local = mode == MODE_LOCAL
    recomputed = 0
    i = end_i
    j = end_j
    state = SRC_DIAG
    count = 0
    done = False
    while not done:
        top = 0
        stride = 1
        if i > 0 and j > 0:  # else the walk ends on the border and reads no nibble
            top = ((i - 1) // rows) * rows
            stride = (j + 1) // 2
            h_row[:j + 1] = h_saved[top // rows, :j + 1]
            i_row[:j + 1] = i_saved[top // rows, :j + 1]
            for r in range(top + 1, i + 1):
                fill_row(sub[query[r - 1]], target, j, go, ge, local, h_row, i_row,
                         border_score(r, go, ge, mode, fqs), block, (r - top - 1) * stride, True)
                control[1 + slot] += j
                recomputed += j
                if control[0] != 0:
                    return best, end_i, end_j, 0, 0, 0
        i, j, state, count, done = walk(query, target, block, 0, stride, top, i, j, state, mode,
                                        fqs, fts, concrete, ops, count)
    control[1 + slot] += m * n - recomputed
    return best, end_i, end_j, i, j, count


@njit(cache=True, nogil=True)
def align_pairs_linear(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                       pair_target, order, rows, sub, concrete, go, ge, mode, fqs, fqe, fts, fte,
                       op_offsets, ops, score, query_start, query_end, target_start, target_end,
                       op_counts, control, slot):
    """:func:`cpu.align_pairs` with traceback, each pair ``p`` of ``order`` in linear space
    with ``rows[p]`` rows per block (:func:`align_pair_linear`); the same outputs, ops at
    ``ops[op_offsets[p]:]``. Each pair counts ``2 * m * n`` cells into
    ``control[1 + slot]``; a nonzero ``control[0]`` stops the work within one DP row."""
    for k in range(order.shape[0]):
        if control[0] != 0:
            return
        p = order[k]
        query, target = pair_sequences(query_codes, query_offsets, target_codes,
                                       target_offsets, pair_query, pair_target, p)
        m = query.shape[0]
        n = target.shape[0]
        best, end_i, end_j, start_i, start_j, count = align_pair_linear(
            query, target, sub, concrete, go, ge, mode, fqs, fqe, fts, fte, max(rows[p], 1),
            ops[op_offsets[p]:op_offsets[p] + m + n], control, slot)
        if control[0] != 0:
            return
        score[p] = best
        query_end[p] = end_i
        target_end[p] = end_j
        query_start[p] = start_i
        target_start[p] = start_j
        op_counts[p] = count
