"""CPU engine, one pair across SIMD lanes: a wavefront of ``LANES`` lanes down the rows.

Same recurrences, tie-breaks and traceback nibbles as :mod:`gpualign_df.kernels.cpu`; only
the order of the cells and the layout of the nibbles differ (the GPU band kernel's scheme,
:mod:`gpualign_df.kernels.band`, on vector lanes). A pair's rows go in groups of ``LANES *
ROWS``; in a group, lane ``k`` holds rows ``k * ROWS + r`` (``r < ROWS``) and on step ``s``
computes their cells in column ``s - k + 1``, top to bottom: its first row takes H and I of
the row above from lane ``k - 1``'s last row, computed a step before in the same column
(lane 0 from the group above's last row, kept in a row buffer), so a step's lanes are
independent and its lane loop compiles to vector instructions. A lane left of column 1 keeps
the border, one right of column n is never read. The nibbles of a group's step go to
``tb[(group * steps + s) * ROWS // 2 + r // 2, k]`` (rows ``r`` and ``r + 1`` in the low and
high nibble), which :func:`cpu.walk` reads with ``wave``.

End cells follow :func:`cpu.fill_matrix`: each row keeps its maximum and first column where
its end may be anywhere (local, and the last row with the target's end free), and its cell
in column n; the rows are folded in ascending order with strict comparisons, so ties go to
the smallest query end, then the smallest target end.

The nibbles take ``ceil(m / 64) * 64 / 2 * (n + 15)`` bytes, the full matrix's
``m * ceil(n / 2)`` but for the last group's rows and 15 columns of ramp
(:func:`traceback_bytes`); the engine sends a pair across the lanes only where that keeps to
its traceback budget.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..scoring import MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, NEG_INF
from .cpu import (SRC_DEL, SRC_DIAG, SRC_INS, SRC_START, WAVE_LANES, WAVE_ROWS, border_score,
                  pair_sequences, walk)
from .cpu_lanes import match_codes

#: Lanes of the wavefront (int32 cells: one 512-bit register, or two of 256 bits), and rows
#: a lane holds (even: two rows' nibbles share a byte).
LANES, ROWS = WAVE_LANES, WAVE_ROWS
#: Rows of a group.
GROUP_ROWS = LANES * ROWS
#: Fields of the per-lane state, one array (a vectorised loop checks at run time that its
#: arrays do not overlap, and gives up beyond a handful of checks): H and D of each row's
#: last cell, the H and I the first row takes from above, the first row's diagonal H, the
#: last row's H and I (passed to the next lane), the lane's target code, and per row its
#: table row (query code times the alphabet; with a two-valued matrix the code it matches,
#: :func:`cpu_lanes.match_codes`), its maximum, the maximum's first column, its H in column
#: n and its cell's score on this step.
F_H, F_D = 0, ROWS
F_UP_H, F_UP_I, F_DIAG, F_BOTTOM_H, F_BOTTOM_I, F_CODE = (2 * ROWS + k for k in range(6))
F_OFFSET, F_BEST, F_COLUMN, F_LAST, F_SCORE = (2 * ROWS + 6 + k * ROWS for k in range(5))
FIELDS = 7 * ROWS + 6


def traceback_bytes(m, n):
    """Bytes of the wavefront's nibbles for ``m x n`` pairs (numpy arrays or ints)."""
    return tb_rows(m, n) * LANES


@njit(cache=True)
def tb_rows(m, n):
    """Rows (of ``LANES`` bytes) of the wavefront's traceback nibbles for an ``m x n``
    pair: a byte per lane, two rows, and step of each group."""
    groups = (m + GROUP_ROWS - 1) // GROUP_ROWS
    return groups * (n + LANES - 1) * (ROWS // 2)


@njit(cache=True, inline="always")
def step_lanes(state, tb, at, s, n, go, ge, floor):
    """Step ``s`` of every lane (the vectorised loop: two arrays, unsigned indices, the
    scores read from the state, no gather)."""
    for k in range(LANES):
        lane = np.uint64(k)
        c = np.int32(s - k + 1)
        inside = (c >= 1) & (c <= n)
        h_up = state[np.uint64(F_UP_H), lane]
        i_up = state[np.uint64(F_UP_I), lane]
        diag = state[np.uint64(F_DIAG), lane]
        state[np.uint64(F_DIAG), lane] = h_up
        pending = np.uint8(0)
        for r in range(ROWS):
            row = np.uint64(r)
            h_left = state[np.uint64(F_H) + row, lane]
            d_left = state[np.uint64(F_D) + row, lane]
            ins_open = np.int32(h_up - go)
            ins_ext = np.int32(i_up - ge)
            ins_extends = ins_ext > ins_open
            ins = max(ins_ext, ins_open)
            del_open = np.int32(h_left - go)
            del_ext = np.int32(d_left - ge)
            del_extends = del_ext > del_open
            dele = max(del_ext, del_open)
            h = np.int32(diag + state[np.uint64(F_SCORE) + row, lane])
            src = np.uint8(SRC_INS) if ins > h else np.uint8(SRC_DIAG)
            h = max(h, ins)
            src = np.uint8(SRC_DEL) if dele > h else src
            h = max(h, dele)
            src = np.uint8(SRC_START) if h <= floor else src
            h = max(h, floor)
            nib = (src | (np.uint8(4) if ins_extends else np.uint8(0))
                   | (np.uint8(8) if del_extends else np.uint8(0)))
            if r & 1:
                if tb is not None:
                    tb[at + np.uint64((r >> 1) * LANES) + lane] = pending | (nib << np.uint8(4))
            else:
                pending = nib
            better = inside & (h > state[np.uint64(F_BEST) + row, lane])
            state[np.uint64(F_COLUMN) + row, lane] = (
                c if better else state[np.uint64(F_COLUMN) + row, lane])
            state[np.uint64(F_BEST) + row, lane] = (
                h if better else state[np.uint64(F_BEST) + row, lane])
            state[np.uint64(F_LAST) + row, lane] = (
                h if c == n else state[np.uint64(F_LAST) + row, lane])
            # the next cell of this row, and of the row below on this step
            diag = h_left
            state[np.uint64(F_H) + row, lane] = h if inside else h_left
            state[np.uint64(F_D) + row, lane] = dele if inside else d_left
            h_up = h if inside else h_left
            i_up = ins
        state[np.uint64(F_BOTTOM_H), lane] = h_up
        state[np.uint64(F_BOTTOM_I), lane] = i_up


@njit(cache=True)
def fill_wave(query, target, sub, go, ge, mode, fqs, fqe, fts, fte, tb, control, slot):
    """Fill one pair's DP matrix (``m, n >= 1``); return (score, query_end, target_end).

    ``tb``: uint8, :func:`tb_rows` x ``LANES`` (the nibbles), or no rows for a score-only
    fill.
    Progress and the stop flag as :func:`cpu.fill_matrix`, once per group."""
    m = query.shape[0]
    n = target.shape[0]
    want_tb = tb.shape[0] > 0
    tb_flat = tb.ravel()
    local = mode == MODE_LOCAL
    fqe = fqe and mode == MODE_SEMIGLOBAL
    fte = fte and mode == MODE_SEMIGLOBAL
    alphabet = sub.shape[0]
    sub_flat = np.ascontiguousarray(sub).ravel().astype(np.int32)
    match_code, match_score, mismatch_score = match_codes(sub)
    two_valued = match_score != mismatch_score
    steps = n + LANES - 1
    neg = np.int32(NEG_INF)
    go32 = np.int32(go)
    ge32 = np.int32(ge)
    floor = np.int32(0) if local else np.int32(2 * NEG_INF)
    # the row buffer: H and I of the last row above the group, columns 0..n
    h_row = np.empty(n + 1, np.int32)
    i_row = np.full(n + 1, neg, np.int32)
    for j in range(n + 1):
        h_row[j] = border_score(j, go, ge, mode, fts)
    # the target's codes reversed and padded, so that the codes of a step's lanes
    # (columns s + 1, s, ..., s - LANES + 2) are consecutive
    reversed_codes = np.zeros(n + 2 * LANES, np.int32)
    for j in range(n):
        reversed_codes[LANES + n - 1 - j] = target[j]
    state = np.empty((FIELDS, LANES), np.int32)
    best = np.int32(0) if local else neg
    best_i = 0
    best_j = 0
    if not local:
        best_i, best_j = m, n
    corner = 0
    groups = (m + GROUP_ROWS - 1) // GROUP_ROWS
    for group in range(groups):
        first = group * GROUP_ROWS + 1      # the group's first row
        h_row[0] = border_score(first - 1, go, ge, mode, fqs)
        for k in range(LANES):
            for r in range(ROWS):
                i = first + k * ROWS + r
                state[F_H + r, k] = border_score(i, go, ge, mode, fqs)
                state[F_D + r, k] = neg
                q = query[min(i, m) - 1]
                # two-valued: the code this row matches (-1: none); else its table row
                state[F_OFFSET + r, k] = (match_code[q] if two_valued
                                          else np.int32(q) * np.int32(alphabet))
                state[F_BEST + r, k] = neg
                state[F_COLUMN + r, k] = 0
                state[F_LAST + r, k] = neg
            state[F_BOTTOM_H, k] = state[F_H + ROWS - 1, k]
            state[F_BOTTOM_I, k] = neg
            state[F_UP_H, k] = border_score(first - 1, go, ge, mode, fqs)
            state[F_DIAG, k] = state[F_UP_H, k]
        base = np.uint64(group * steps)
        for s in range(steps):
            # the first rows' neighbours above: lane k - 1's last row a step ago; lane 0's
            # from the row buffer
            for k in range(LANES - 1, 0, -1):
                state[F_UP_H, k] = state[F_BOTTOM_H, k - 1]
                state[F_UP_I, k] = state[F_BOTTOM_I, k - 1]
            if s < n:
                state[F_UP_H, 0] = h_row[s + 1]
                state[F_UP_I, 0] = i_row[s + 1]
            codes_at = LANES + n - 1 - s
            for k in range(LANES):
                state[F_CODE, k] = reversed_codes[codes_at + k]
            at = (base + np.uint64(s)) * np.uint64(ROWS // 2 * LANES)
            # the cells' scores: a compare where the matrix has one match and one mismatch
            # score (every code that matches, only itself); else read one by one
            if two_valued:
                for k in range(LANES):
                    for r in range(ROWS):
                        state[F_SCORE + r, k] = (
                            match_score if state[F_OFFSET + r, k] == state[F_CODE, k]
                            else mismatch_score)
            else:
                for k in range(LANES):
                    for r in range(ROWS):
                        state[F_SCORE + r, k] = sub_flat[state[F_OFFSET + r, k]
                                                         + state[F_CODE, k]]
            if want_tb:
                step_lanes(state, tb_flat, at, np.int32(s), np.int32(n), go32, ge32, floor)
            else:
                step_lanes(state, None, at, np.int32(s), np.int32(n), go32, ge32, floor)
            # the last lane's last row is the row above the next group
            c = s - LANES + 2
            if c >= 1 and c <= n:
                h_row[c] = state[F_BOTTOM_H, LANES - 1]
                i_row[c] = state[F_BOTTOM_I, LANES - 1]
        control[1 + slot] += (min(m, first + GROUP_ROWS - 1) - first + 1) * n
        if control[0] != 0:
            return best, best_i, best_j
        # the group's end-cell candidates, rows ascending (cpu.fill_matrix's order)
        for k in range(LANES):
            for r in range(ROWS):
                i = first + k * ROWS + r
                if i > m:
                    continue
                if local or (fte and i == m):
                    if state[F_BEST + r, k] > best:
                        best, best_i, best_j = state[F_BEST + r, k], i, state[F_COLUMN + r, k]
                elif fqe and state[F_LAST + r, k] > best:
                    best, best_i, best_j = state[F_LAST + r, k], i, n
                if i == m:
                    corner = state[F_LAST + r, k]
    if mode == MODE_GLOBAL or (mode == MODE_SEMIGLOBAL and not (fqe or fte)):
        best, best_i, best_j = corner, m, n
    return best, best_i, best_j


@njit(cache=True, nogil=True)
def align_pairs_wave(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                     pair_target, order, sub, concrete, go, ge, mode, fqs, fqe, fts, fte,
                     traceback, op_offsets, ops, score, query_start, query_end, target_start,
                     target_end, op_counts, control, slot):
    """:func:`cpu.align_pairs` (same arguments and outputs) on the wavefront fill; every
    pair in ``order`` has non-empty sequences."""
    for k in range(order.shape[0]):
        if control[0] != 0:
            return
        p = order[k]
        query, target = pair_sequences(query_codes, query_offsets, target_codes,
                                       target_offsets, pair_query, pair_target, p)
        m = query.shape[0]
        n = target.shape[0]
        tb = np.empty((tb_rows(m, n) if traceback else 0, LANES), dtype=np.uint8)
        best, end_i, end_j = fill_wave(query, target, sub, go, ge, mode, fqs, fqe, fts, fte,
                                       tb, control, slot)
        score[p] = best
        query_end[p] = end_i
        target_end[p] = end_j
        if traceback and control[0] == 0:
            start_i, start_j, _, count, _ = walk(
                query, target, tb, 0, n, 0, end_i, end_j, SRC_DIAG, mode, fqs, fts, concrete,
                ops[op_offsets[p]:op_offsets[p] + m + n], 0, True)
            query_start[p] = start_i
            target_start[p] = start_j
            op_counts[p] = count
