"""Intra-task CUDA kernel for long pairs: one block per pair.

Thread ``t`` of the block owns strip ``t`` of ``STRIP_ROWS`` query rows in a pass of
``blockDim.x`` strips (the block size the kernel is built for, ``block_threads``); the
strips sweep the target as a wavefront (thread ``t`` computes column ``step - t + 1`` at
step ``step``), handing the bottom row's H and I to thread ``t + 1`` through
double-buffered shared memory, one barrier per step. The last strip of a pass leaves its
bottom row in a global row buffer for the first strip of the next pass.

The cells are computed by the same device functions as the inter-task kernel
(:func:`gpualign_df.kernels.strip.strip_functions`), so recurrences and tie-breaks are
identical. ``control`` (two int64) is shared with the host while the kernel runs: a
nonzero ``control[0]`` stops every block at its next pass (Ctrl-C), and each pass adds
its cells to ``control[1]`` (progress within one long pair). Layout (one pair per
"group", width 1): residues contiguous from ``query_start[slot]``; traceback word of
(strip, column j) at ``tb_start[slot] + strip * n + j - 1``, the walk kernel reads it with
width 1.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint64

from ..scoring import MODE_GLOBAL, MODE_SEMIGLOBAL, NEG_INF
from .strip import SHARED_TABLE, STRIP_ROWS, strip_functions


@lru_cache(maxsize=None)
def long_fill_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                     use_dpx: bool = False, block_threads: int = 128, funnel: bool = True):
    """The intra-task fill kernel for one mode / free-ends / traceback combination, to be
    launched with ``block_threads`` threads per block (its shared arrays are sized by it;
    ``funnel``: see :func:`~gpualign_df.kernels.strip.strip_functions`)."""
    empty_end, start_strip, top_border, column, end_candidates, initial_best = strip_functions(
        mode, fqs, fqe, fts, fte, traceback, use_dpx, False, STRIP_ROWS, True, funnel)
    rows = STRIP_ROWS
    neg = NEG_INF
    corner_mode = mode == MODE_GLOBAL or (mode == MODE_SEMIGLOBAL and not (fqe or fte))

    @cuda.jit
    def fill_long(query, target, query_lengths, target_lengths, query_start, target_start,
                  row_start, tb_start, sub, alphabet_size, go, ge, h_buffer, i_buffer, tb,
                  slot_row, score, end_i, end_j, control):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        handoff_h = cuda.shared.array((2, block_threads), int32)
        handoff_i = cuda.shared.array((2, block_threads), int32)
        strip_score = cuda.shared.array(block_threads, int32)
        strip_i = cuda.shared.array(block_threads, int32)
        strip_j = cuda.shared.array(block_threads, int32)
        stop = cuda.shared.array(1, int64)
        for k in range(cuda.threadIdx.x, alphabet_size * alphabet_size, cuda.blockDim.x):
            shared_sub[k] = sub[k]
        cuda.syncthreads()
        slot = cuda.blockIdx.x
        thread = cuda.threadIdx.x
        threads = cuda.blockDim.x
        m = query_lengths[slot]
        n = target_lengths[slot]
        row = slot_row[slot]
        if m <= 0 or n <= 0:  # long pairs are never empty; nothing to do for a bad slot
            return
        q0 = query_start[slot]
        t0 = target_start[slot]
        r0 = row_start[slot]
        b0 = tb_start[slot]
        row_offset = cuda.local.array(STRIP_ROWS, int32)
        h_left = cuda.local.array(STRIP_ROWS, int32)
        del_score = cuda.local.array(STRIP_ROWS, int32)
        diag = cuda.local.array(STRIP_ROWS, int32)
        row_best = cuda.local.array(STRIP_ROWS, int32)
        row_best_j = cuda.local.array(STRIP_ROWS, int32)
        total = initial_best
        total_i = 0
        total_j = 0
        strips = (m + rows - 1) // rows
        for pass_first in range(0, strips, threads):
            strip = pass_first + thread
            active = min(threads, strips - pass_first)
            first = strip * rows + 1
            start_strip(first, m, query, q0, 1, alphabet_size, go, ge, row_offset, h_left,
                        del_score, diag, row_best, row_best_j)
            last = thread == active - 1
            for step in range(n + active - 1):
                j = step - thread + 1
                if thread < active and j >= 1 and j <= n:
                    if thread == 0:
                        if pass_first == 0:
                            h_up = top_border(j, go, ge)
                            i_up = neg
                        else:
                            h_up = h_buffer[uint64(r0 + j)]
                            i_up = i_buffer[uint64(r0 + j)]
                    else:
                        h_up = handoff_h[(step - 1) & 1, thread - 1]
                        i_up = handoff_i[(step - 1) & 1, thread - 1]
                    code_t = int32(target[uint64(t0 + j - 1)])
                    h_up, i_up, word, _ = column(h_up, i_up, code_t, j, shared_sub, go, ge,
                                              row_offset, h_left, del_score, diag, row_best,
                                              row_best_j)
                    handoff_h[step & 1, thread] = h_up
                    handoff_i[step & 1, thread] = i_up
                    if last:
                        h_buffer[uint64(r0 + j)] = h_up
                        i_buffer[uint64(r0 + j)] = i_up
                    if traceback:
                        tb[uint64(b0 + strip * n + j - 1)] = word
                cuda.syncthreads()
            if thread < active:
                best, best_i, best_j = end_candidates(first, m, n, initial_best, 0, 0, h_left,
                                                      row_best, row_best_j)
                strip_score[thread] = best
                strip_i[thread] = best_i
                strip_j[thread] = best_j
            cuda.syncthreads()
            if thread == 0:  # rows ascending: strips ascending, strict > (corner: row m wins)
                # control[1]: cells done, read by the host for its progress bar; control[0]:
                # the host's stop flag, read through an atomic (never a stale cached copy)
                cuda.atomic.add(control, 1, int64(min(active * rows, m - pass_first * rows))
                                * int64(n))
                stop[0] = cuda.atomic.add(control, 0, 0)
                for k in range(active):
                    if (corner_mode and strip_i[k] == m) or strip_score[k] > total:
                        if not corner_mode or strip_i[k] == m:
                            total = strip_score[k]
                            total_i = strip_i[k]
                            total_j = strip_j[k]
            cuda.syncthreads()
            if stop[0] != 0:  # every thread leaves together, after the barrier
                break
        if thread == 0:
            score[row] = total
            end_i[row] = total_i
            end_j[row] = total_j

    return fill_long
