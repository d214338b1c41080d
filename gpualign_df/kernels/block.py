"""Block CUDA kernel for small batches: one block per pair fills the pair's matrix, walks
its traceback and writes its CIGAR characters, all in one launch.

A batch of a few dozen pairs of a few hundred residues (GATK HaplotypeCaller's calls) is
too small to fill the GPU with one thread a pair, and a job's fixed cost (launches,
copies, host work between them) outweighs its cells: here a job is one upload, one launch
and one copy back (a second where its CIGARs are long).

Thread ``t`` of the block computes strip ``k * threads + t`` (``STRIP_ROWS`` = 8 query
rows, :func:`gpualign_df.kernels.strip.strip_functions`: the cells, tie-breaks and
traceback bits of every fill) in pass ``k``; on step ``s`` of a pass it computes column
``s - t + 1`` of its strip, taking the H and I of the row above from thread ``t - 1``'s
step before through shared memory (one barrier a step); thread 0 takes them from the
border (pass 0) or from the last strip of the pass before, which its last thread leaves
in ``rows_above``. Traceback words are the inter-task kernel's layout with a lane stride
of 1 (word of strip ``k``, column ``j`` at ``tb0 + k * n + j - 1``), so the walk of
:func:`gpualign_df.kernels.traceback.walk_functions` reads them as it reads that kernel's.

End cell: each strip's candidates are folded from the mode's initial best (rows
ascending, strict >), and thread 0 folds the strips in order (strict >; the corner of
global mode taken as the last strip leaves it), which is the sequential fold of the
one-thread kernels. The walk runs on the first ``lanes`` threads (one thread in local
mode), then thread 0 writes the statistics and the CIGAR at a position taken from
``counter`` (an atomic add), which it records in ``out[CHAR_ROW]``.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, uint64

from ..scoring import NEG_INF
from .strip import SHARED_TABLE, STRIP_ROWS, load_table, mode_shape, strip_functions
from .traceback import cigar_writer, walk_functions

#: Rows of the ``pairs`` table (int64, a column per pair): query and target residue
#: starts, lengths (query length -1: a pair that is not aligned), and the starts of the
#: pair's traceback words, rows above a pass and CIGAR runs in their buffers.
P_Q0, P_T0, P_M, P_N, P_TB0, P_ROW0, P_RUN0 = range(7)
PAIR_FIELDS = 7
#: Rows of ``out`` (int32, a column per pair): score, query_end, target_end, query_start,
#: target_start, matches, mismatches, gap_opens, gaps, cigar_length (the engines' result
#: columns, in that order), then the position of the pair's first CIGAR character.
OUT_ROWS = 11
CIGAR_LENGTH_ROW = 9
CHAR_ROW = 10
#: Most threads a block (a strip each per pass).
MAX_THREADS = 1024


@lru_cache(maxsize=None)
def block_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                 merge_matches: bool, soft_clip: bool, use_dpx: bool = False, lanes: int = 0,
                 probes: int = 1):
    """The block kernel for one mode / free-ends / traceback / CIGAR-style combination;
    ``lanes`` threads walk a pair's traceback (0: one thread; ``lanes`` and ``probes`` as
    in :func:`gpualign_df.kernels.traceback.walk_functions`). Launch a block per pair of
    at most :data:`MAX_THREADS` threads and at least ``lanes`` (exactly ``lanes`` under
    the CUDA simulator, whose warp ballot is a block barrier)."""
    empty_end, start_strip, top_border, column, end_candidates, initial_best = strip_functions(
        mode, fqs, fqe, fts, fte, traceback, use_dpx)
    corner = mode_shape(mode, fqs, fqe, fts, fte)[1]
    steps, finish = walk_functions(mode, fqs, fts, merge_matches, False, lanes, probes)
    write_cigar = cigar_writer(merge_matches, soft_clip)
    walkers = max(lanes, 1)
    neg = NEG_INF

    @cuda.jit
    def align(query, target, pairs, sub, alphabet_size, go, ge, concrete, tb, rows_above,
              runs, out, chars, counter):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        h_pass = cuda.shared.array((2, MAX_THREADS), int32)
        i_pass = cuda.shared.array((2, MAX_THREADS), int32)
        found = cuda.shared.array((3, MAX_THREADS), int32)
        scratch = cuda.shared.array(walkers, int32)
        load_table(sub, alphabet_size, shared_sub)
        p = cuda.blockIdx.x
        t = cuda.threadIdx.x
        threads = cuda.blockDim.x
        m = int32(pairs[P_M, p])
        if m < 0:  # (the whole block leaves)
            return
        n = int32(pairs[P_N, p])
        q0 = pairs[P_Q0, p]
        t0 = pairs[P_T0, p]
        tb0 = pairs[P_TB0, p]
        r0 = pairs[P_ROW0, p]
        row_offset = cuda.local.array(STRIP_ROWS, int32)
        h_left = cuda.local.array(STRIP_ROWS, int32)
        del_score = cuda.local.array(STRIP_ROWS, int32)
        diag = cuda.local.array(STRIP_ROWS, int32)
        row_best = cuda.local.array(STRIP_ROWS, int32)
        row_best_j = cuda.local.array(STRIP_ROWS, int32)
        best = initial_best
        best_i = 0
        best_j = 0
        strips = (m + STRIP_ROWS - 1) // STRIP_ROWS if n > 0 else 0
        for first_strip in range(0, strips, threads):
            strip = first_strip + t
            active = strip < strips
            last = min(threads, strips - first_strip) - 1  # the pass's last thread
            first = strip * STRIP_ROWS + 1
            if active:
                start_strip(first, m, query, q0, 1, alphabet_size, go, ge, row_offset, h_left,
                            del_score, diag, row_best, row_best_j)
            for s in range(n + last):
                j = s - t + 1
                if active and j >= 1 and j <= n:
                    if t > 0:
                        h_up = h_pass[(s - 1) & 1, t - 1]
                        i_up = i_pass[(s - 1) & 1, t - 1]
                    elif strip == 0:
                        h_up = top_border(j, go, ge)
                        i_up = neg
                    else:
                        h_up = rows_above[uint64(r0 + 2 * j)]
                        i_up = rows_above[uint64(r0 + 2 * j + 1)]
                    h_up, i_up, word, _word2 = column(
                        h_up, i_up, int32(target[uint64(t0 + j - 1)]), j, shared_sub, go, ge,
                        row_offset, h_left, del_score, diag, row_best, row_best_j)
                    h_pass[s & 1, t] = h_up
                    i_pass[s & 1, t] = i_up
                    if t == last and strip + 1 < strips:
                        rows_above[uint64(r0 + 2 * j)] = h_up
                        rows_above[uint64(r0 + 2 * j + 1)] = i_up
                    if traceback:
                        tb[uint64(tb0 + strip * n + j - 1)] = word
                cuda.syncthreads()
            if active:
                strip_best, strip_i, strip_j = end_candidates(
                    first, m, n, initial_best, 0, 0, h_left, row_best, row_best_j)
                found[0, t] = strip_best
                found[1, t] = strip_i
                found[2, t] = strip_j
            cuda.syncthreads()
            if t == 0:
                for k in range(last + 1):
                    if found[0, k] > best or (corner and first_strip + k == strips - 1):
                        best = found[0, k]
                        best_i = found[1, k]
                        best_j = found[2, k]
            cuda.syncthreads()
        if t == 0:
            if strips == 0:
                best, best_i, best_j = empty_end(m, n, go, ge)
            out[0, p] = best
            out[1, p] = best_i
            out[2, p] = best_j
        if not traceback:
            return
        cuda.syncthreads()
        if t >= walkers:
            return
        end_i = out[1, p]
        run0 = pairs[P_RUN0, p]
        # state 1: in H, 2: in I, 3: in D; value (local): H, I or D of the cell and state
        walk = (end_i, out[2, p], 1, out[0, p], 0, -1, 0, 0, 0, 0, 0, 0)
        walk = steps(query, target, q0, t0, 1, tb, tb0, n, 0, 0, concrete, sub, alphabet_size,
                     go, ge, runs, run0, walk, t, scratch)
        if t == 0:
            count, size, n_open = finish(runs, run0, walk, soft_clip, m, end_i)
            position = cuda.atomic.add(counter, 0, int32(size))
            write_cigar(chars, position, runs, run0, count, walk[0], m - end_i)
            out[3, p] = walk[0]
            out[4, p] = walk[1]
            out[5, p] = walk[8]
            out[6, p] = walk[9]
            out[7, p] = n_open
            out[8, p] = walk[11]
            out[CIGAR_LENGTH_ROW, p] = size
            out[CHAR_ROW, p] = position

    return align
