"""Inter-task CUDA score-only fill kernel on packed 16-bit cells: two pairs per thread.

Thread ``lane`` of warp pair ``p`` aligns slot ``a = 64p + lane`` (warp ``2p``) in the low
16-bit half of every int32 and slot ``b = a + 32`` (warp ``2p + 1``) in the high half, so
one ``*_s16x2`` DPX instruction advances two cells. Same recurrences, tie-breaks and end
cells as :mod:`gpualign_df.kernels.inter` (the contract is in
:mod:`gpualign_df.kernels.cpu`), exact where no value can leave 16 bits (the caller checks
the bound: :func:`gpualign_df.gpu.policy.fill_fits_16bit`). Score only: with traceback the 32-bit
kernel is as fast (its traceback bits cost one funnel shift each; two lanes' bits would
cost a select per lane).

Layout: the plan gives warps ``2p`` and ``2p + 1`` the same rows and columns (the larger
of the two), so both halves sweep the same strips and columns; the shorter pair reads the
padding code (a row and a column of the table scoring ``PAD16``) past its ends. Cells
there are never an end cell: a padded column is only reached through a gap from a real
cell (strictly lower with a positive gap open, else equal and later in row-major order),
its values are masked out of the end-row search, and the last-column and corner values of
each half are taken at its own last column. The row above the strip is one packed word
per column (warp ``2p``'s region).
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, uint32, uint64

from . import dpx
from .dpx import NEG16, NEG16_PAIR, high_half, low_half
from .strip import (SHARED_TABLE16, STRIP_ROWS, WARP, border_score, load_table, mode_shape,
                    pack_pair, strip_functions)


@cuda.jit(device=True, inline=True)
def fold_row(i, m, n, best, best_i, best_j, local, end_row, end_column, corner, row_best,
             row_best_j, last_column):
    """One strip row's end-cell candidate of one half folded into its best (as
    ``strip.strip_functions``' ``end_candidates``, rows ascending, strict >)."""
    if i <= m:
        if local or (end_row and i == m):
            if row_best > best:
                best = row_best
                best_i = i
                best_j = row_best_j
        elif end_column and last_column > best:
            best = last_column
            best_i = i
            best_j = n
        if corner and i == m:
            best = last_column
            best_i = m
            best_j = n
    return best, best_i, best_j


@lru_cache(maxsize=None)
def fill_kernel16(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool,
                  use_dpx: bool = False):
    """The packed 16-bit score-only inter-task fill kernel for one mode / free-ends
    combination (launch one thread per pair of slots)."""
    local, corner, free_row0, free_col0, end_row, end_column = mode_shape(mode, fqs, fqe, fts,
                                                                          fte)
    track_rows = local or end_row
    keep_last = corner or end_column
    rows = STRIP_ROWS
    neg2 = NEG16_PAIR
    initial_best = 0 if local else NEG16
    empty_end = strip_functions(mode, fqs, fqe, fts, fte, False, False)[0]
    _add2, max2, add_max2, max3_zero2 = dpx.functions16(use_dpx)
    keep_best2 = dpx.keep_best2(use_dpx)

    @cuda.jit(device=True, inline=True)
    def write_end(row, m, n, best, best_i, best_j, go, ge, score, end_i, end_j):
        """One half's score and end cell to its job row (-1: an unused slot)."""
        if row >= 0:
            if m == 0 or n == 0:
                best, best_i, best_j = empty_end(m, n, go, ge)
            score[row] = best
            end_i[row] = best_i
            end_j[row] = best_j

    @cuda.jit
    def fill16(query, target, query_lengths, target_lengths, query_base, target_base,
               row_base, warp_columns, sub, pad, go, ge, h_buffer, i_buffer, slot_row, score,
               end_i, end_j):
        shared_sub = cuda.shared.array(SHARED_TABLE16, int32)
        load_table(sub, pad + 1, shared_sub)
        thread = cuda.grid(1)
        warp_a = 2 * (thread // WARP)
        lane = thread % WARP
        slot_a = warp_a * WARP + lane
        slot_b = slot_a + WARP
        if slot_b >= query_lengths.shape[0]:
            return
        m_a = max(query_lengths[slot_a], 0)   # an unused slot (-1) aligns nothing
        n_a = max(target_lengths[slot_a], 0)
        m_b = max(query_lengths[slot_b], 0)
        n_b = max(target_lengths[slot_b], 0)
        q0_a = query_base[warp_a] + lane
        q0_b = query_base[warp_a + 1] + lane
        t0_a = target_base[warp_a] + lane
        t0_b = target_base[warp_a + 1] + lane
        r0 = row_base[warp_a] + lane
        stride = pad + 1
        ngo2 = pack_pair(-go)
        nge2 = pack_pair(-ge)
        best_a = initial_best
        best_i_a = 0
        best_j_a = 0
        best_b = initial_best
        best_i_b = 0
        best_j_b = 0
        row_offset_a = cuda.local.array(STRIP_ROWS, int32)
        row_offset_b = cuda.local.array(STRIP_ROWS, int32)
        h_left = cuda.local.array(STRIP_ROWS, int32)
        del_score = cuda.local.array(STRIP_ROWS, int32)
        diag = cuda.local.array(STRIP_ROWS, int32)
        row_best = cuda.local.array(STRIP_ROWS, int32)
        row_best_j = cuda.local.array(STRIP_ROWS, int32)
        last_column = cuda.local.array(STRIP_ROWS, int32)
        n_max = max(n_a, n_b)
        strips = (max(m_a, m_b) + rows - 1) // rows if n_max > 0 else 0
        for strip in range(strips):
            first = strip * rows + 1
            for r in range(rows):
                i = first + r
                code_a = int32(query[q0_a + WARP * (i - 1)]) if i <= m_a else pad
                code_b = int32(query[q0_b + WARP * (i - 1)]) if i <= m_b else pad
                row_offset_a[r] = code_a * stride
                row_offset_b[r] = code_b * stride
                h_left[r] = pack_pair(border_score(i, go, ge, free_col0))
                del_score[r] = neg2
                diag[r] = pack_pair(border_score(i - 1, go, ge, free_col0))
                row_best[r] = neg2
                row_best_j[r] = 0
                last_column[r] = h_left[r]
            for j in range(1, n_max + 1):
                code_a = int32(target[uint64(t0_a + WARP * (j - 1))]) if j <= n_a else pad
                code_b = int32(target[uint64(t0_b + WARP * (j - 1))]) if j <= n_b else pad
                above = uint64(r0 + WARP * j)  # unsigned: no negative-index wraparound code
                j2 = int32(j | (j << 16))
                if strip == 0:
                    h_up = pack_pair(border_score(j, go, ge, free_row0))
                    i_up = neg2
                else:
                    h_up = h_buffer[above]
                    i_up = i_buffer[above]
                for r in range(rows):
                    score2 = int32((shared_sub[uint32(row_offset_a[r] + code_a)] & 0xFFFF)
                                   | (shared_sub[uint32(row_offset_b[r] + code_b)] << 16))
                    match = add_max2(diag[r], score2, neg2)
                    ins_ext = add_max2(i_up, nge2, neg2)
                    del_ext = add_max2(del_score[r], nge2, neg2)
                    ins = add_max2(h_up, ngo2, ins_ext)
                    dele = add_max2(h_left[r], ngo2, del_ext)
                    if local:
                        h = max3_zero2(match, ins, dele)
                    else:
                        h = max2(max2(match, ins), dele)
                    if track_rows:
                        tracked = h
                        if end_row:  # a padded column's cell is no end cell
                            if j > n_a:
                                tracked = int32((tracked & -65536) | (neg2 & 0xFFFF))
                            if j > n_b:
                                tracked = int32((tracked & 0xFFFF) | (neg2 & -65536))
                        packed = keep_best2(row_best[r], tracked, row_best_j[r], j2)
                        row_best[r] = int32(packed >> 32)
                        row_best_j[r] = int32(packed & 0xFFFFFFFF)
                    diag[r] = h_up
                    h_left[r] = h
                    del_score[r] = dele
                    h_up = h
                    i_up = ins
                h_buffer[above] = h_up
                i_buffer[above] = i_up
                if keep_last:  # each half's H on its own last column
                    if j == n_a:
                        for r in range(rows):
                            last_column[r] = (last_column[r] & -65536) | (h_left[r] & 0xFFFF)
                    if j == n_b:
                        for r in range(rows):
                            last_column[r] = (last_column[r] & 0xFFFF) | (h_left[r] & -65536)
            for r in range(rows):
                i = first + r
                best_a, best_i_a, best_j_a = fold_row(
                    i, m_a, n_a, best_a, best_i_a, best_j_a, local, end_row, end_column, corner,
                    low_half(row_best[r]), row_best_j[r] & 0xFFFF, low_half(last_column[r]))
                best_b, best_i_b, best_j_b = fold_row(
                    i, m_b, n_b, best_b, best_i_b, best_j_b, local, end_row, end_column, corner,
                    high_half(row_best[r]), (row_best_j[r] >> 16) & 0xFFFF,
                    high_half(last_column[r]))
        write_end(slot_row[slot_a], m_a, n_a, best_a, best_i_a, best_j_a, go, ge, score, end_i,
                  end_j)
        write_end(slot_row[slot_b], m_b, n_b, best_b, best_i_b, best_j_b, go, ge, score, end_i,
                  end_j)

    return fill16
