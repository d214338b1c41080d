"""Inter-task CUDA fill kernel: one thread per pair, a strip of query rows (``STRIP_ROWS``
= 8 or twice as many, the ``fill_strip_rows`` setting) in registers sweeping the target,
the H/I values of the row above the strip in a global ``[column, lane]`` buffer.

The cells are :func:`gpualign_df.kernels.strip.strip_functions`' (the contract is in
:mod:`gpualign_df.kernels.cpu`). Memory layout, per warp ``w`` of 32 pairs (lane = pair's
slot in the warp):

* residues interleaved: query residue ``i`` of lane ``l`` at ``query_base[w] + 32*i + l``
  (same for targets), so a warp's loads coalesce;
* the row-above buffers at ``row_base[w] + 32*j + l``;
* traceback: one ``uint32`` per (strip of ``STRIP_ROWS`` = 8 rows, column) holding the 4
  bits of each of the strip's rows (row ``r`` in bits ``4(7-r)..4(7-r)+3``,
  :func:`~gpualign_df.kernels.strip.append_sign`), at
  ``tb_base[w] + 32*(strip * warp_columns[w] + j - 1) + l``: written coalesced (a fill
  strip of 16 rows writes the words of two such strips).

The search kernels (:mod:`gpualign_df.kernels.search`) sweep with the same
:func:`sweep_function`.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, uint64

from ..scoring import NEG_INF
from . import simulator
from .strip import (SHARED_TABLE, STRIP_ROWS, WARP,  # noqa: F401
                    load_table, mode_shape, strip_functions)


@lru_cache(maxsize=None)
def sweep_function(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                   use_dpx: bool = False, keyed: bool = False, rows: int = STRIP_ROWS,
                   funnel: bool = True):
    """Device function aligning one pair of one thread, strip by strip, and returning its
    ``(score, end_i, end_j)``; shared by the inter-task fill kernel and the search kernel.

    Query residue ``i`` (1-based) sits at ``query[q0 + query_width * (i - 1)]``, target
    residue ``j`` at ``target[t0 + WARP * (j - 1)]``, the row above the strip at
    ``h_buffer/i_buffer[r0 + WARP * j]``, traceback word (strip, j) at
    ``tb[b0 + WARP * (strip * columns + j - 1)]`` (``strip`` counts ``STRIP_ROWS`` rows:
    a sweep of 16-row strips writes two words per column, the second only where the
    query reaches its rows). The six register arrays (``rows`` long) come from the kernel
    (``cuda.local.array`` lives in a kernel body). ``funnel``: see :func:`strip_functions`."""
    empty_end, start_strip, top_border, column, end_candidates, initial_best = strip_functions(
        mode, fqs, fqe, fts, fte, traceback, use_dpx, keyed, rows, True, funnel)
    local, _corner, _free_row0, _free_col0, end_row, _end_column = mode_shape(mode, fqs, fqe,
                                                                             fts, fte)
    # semi-global with a free target end: only the last strip holds row m, whose running
    # best is the end cell; the other strips skip the bookkeeping
    last_strip_tracks = end_row and not local
    sweep_strip = _strip_sweep(column, top_border, traceback, rows)
    sweep_untracked = _strip_sweep(strip_functions(mode, fqs, fqe, fts, fte, traceback,
                                                   use_dpx, keyed, rows, False, funnel)[3],
                                   top_border, traceback, rows) \
        if last_strip_tracks else sweep_strip

    @cuda.jit(device=True, inline=True)
    def sweep(m, n, query, q0, query_width, target, t0, h_buffer, i_buffer, r0, tb, b0, columns,
              shared_sub, alphabet_size, go, ge, row_offset, h_left, del_score, diag, row_best,
              row_best_j):
        if m == 0 or n == 0:
            return empty_end(m, n, go, ge)
        best = initial_best
        best_i = 0
        best_j = 0
        strips = (m + rows - 1) // rows
        word_strips = (m + STRIP_ROWS - 1) // STRIP_ROWS
        for strip in range(strips):
            first = strip * rows + 1
            second_word = rows == 2 * STRIP_ROWS and 2 * strip + 1 < word_strips
            start_strip(first, m, query, q0, query_width, alphabet_size, go, ge, row_offset,
                        h_left, del_score, diag, row_best, row_best_j)
            if last_strip_tracks and strip != strips - 1:
                sweep_untracked(strip, second_word, n, target, t0, h_buffer, i_buffer, r0, tb,
                                b0, columns, shared_sub, go, ge, row_offset, h_left, del_score,
                                diag, row_best, row_best_j)
            else:
                sweep_strip(strip, second_word, n, target, t0, h_buffer, i_buffer, r0, tb, b0,
                            columns, shared_sub, go, ge, row_offset, h_left, del_score, diag,
                            row_best, row_best_j)
            best, best_i, best_j = end_candidates(first, m, n, best, best_i, best_j, h_left,
                                                  row_best, row_best_j)
        return best, best_i, best_j

    return sweep


def _strip_sweep(column, top_border, traceback: bool, rows: int):
    """Device function sweeping one strip across the target with ``column`` (the loop body
    of :func:`sweep_function`'s ``sweep``)."""
    words = rows // STRIP_ROWS   # traceback words per column of a strip
    neg = NEG_INF

    @cuda.jit(device=True, inline=True)
    def sweep_strip(strip, second_word, n, target, t0, h_buffer, i_buffer, r0, tb, b0, columns,
                    shared_sub, go, ge, row_offset, h_left, del_score, diag, row_best,
                    row_best_j):
        for j in range(1, n + 1):
            code_t = int32(target[uint64(t0 + WARP * (j - 1))])
            above = uint64(r0 + WARP * j)  # unsigned: no negative-index wraparound code
            if strip == 0:
                h_up = top_border(j, go, ge)
                i_up = neg
            else:
                h_up = h_buffer[above]
                i_up = i_buffer[above]
            h_up, i_up, word, word2 = column(h_up, i_up, code_t, j, shared_sub, go, ge,
                                             row_offset, h_left, del_score, diag, row_best,
                                             row_best_j)
            h_buffer[above] = h_up
            i_buffer[above] = i_up
            if traceback:
                at = uint64(b0 + WARP * (words * strip * columns + j - 1))
                tb[at] = word
                if second_word:
                    tb[at + uint64(WARP * columns)] = word2

    return sweep_strip


@lru_cache(maxsize=None)
def fill_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                use_dpx: bool = False, keyed: bool = False, rows: int = STRIP_ROWS,
                max_registers: int | None = None, funnel: bool = True):
    """The inter-task fill kernel for one mode / free-ends / traceback combination (keyed
    row bests and ``funnel``: see :func:`strip_functions`), with strips of ``rows`` query
    rows and at most ``max_registers`` registers a thread (None: the compiler's choice; the
    CUDA simulator takes no cap)."""
    sweep = sweep_function(mode, fqs, fqe, fts, fte, traceback, use_dpx, keyed, rows, funnel)
    options = {} if max_registers is None or simulator() else {"max_registers": max_registers}

    @cuda.jit(**options)
    def fill(query, target, query_lengths, target_lengths, query_base, target_base, row_base,
             tb_base, warp_columns, sub, alphabet_size, go, ge, h_buffer, i_buffer, tb,
             slot_row, score, end_i, end_j):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        load_table(sub, alphabet_size, shared_sub)
        slot = cuda.grid(1)
        if slot >= query_lengths.shape[0]:
            return
        m = query_lengths[slot]
        n = target_lengths[slot]
        if m < 0:  # an unused slot of the warp
            return
        warp = slot // WARP
        lane = slot % WARP
        row_offset = cuda.local.array(rows, int32)
        h_left = cuda.local.array(rows, int32)
        del_score = cuda.local.array(rows, int32)
        diag = cuda.local.array(rows, int32)
        row_best = cuda.local.array(rows, int32)
        row_best_j = cuda.local.array(rows, int32)
        best, best_i, best_j = sweep(
            m, n, query, query_base[warp] + lane, WARP, target, target_base[warp] + lane,
            h_buffer, i_buffer, row_base[warp] + lane, tb, tb_base[warp] + lane,
            warp_columns[warp], shared_sub, alphabet_size, go, ge, row_offset, h_left,
            del_score, diag, row_best, row_best_j)
        row = slot_row[slot]
        score[row] = best
        end_i[row] = best_i
        end_j[row] = best_j

    return fill
