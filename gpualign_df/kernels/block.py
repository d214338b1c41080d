"""Block CUDA kernel for small batches: one block per pair fills the pair's matrix, walks
its traceback and writes its CIGAR characters, all in one launch.

A batch of a few dozen pairs of a few hundred residues (GATK HaplotypeCaller's calls) is
too small to fill the GPU with one thread a pair, and a job's fixed cost (launches,
copies, host work between them) outweighs its cells: here a job is one upload, one launch
and one copy back (a second where its CIGARs are long).

Thread ``t`` of the block computes strip ``k * threads + t`` (``rows`` query rows, 2 to 8,
:func:`gpualign_df.kernels.strip.strip_functions`: the cells, tie-breaks and traceback
bits of every fill) in pass ``k``; on step ``s`` of a pass it computes columns
``c * (s - t) + 1`` to ``c * (s - t + 1)`` of its strip (``c``: ``columns``, 1 to 4),
taking the H and I of the row above from thread ``t - 1``'s step before through shared
memory (one barrier a step); thread 0 takes them from the border (pass 0) or from the
last strip of the pass before, which its last thread leaves in ``rows_above``. Traceback
words lie in wavefront order (word of strip ``k``, column ``j = c * g + q + 1`` at ``tb0
+ ((g + k) * strips + k) * c + q``: the words a pass's threads write in one step side by
side, so that a warp's stores coalesce, where a strip's own words would lie a row of the
matrix apart), as the walk of :func:`gpualign_df.kernels.traceback.walk_functions`
(``wavefront=c``) reads them.

End cell: each strip's candidates are folded from the mode's initial best (rows
ascending, strict >), and thread 0 folds the strips in order (strict >; the corner of
global mode taken as the last strip leaves it), which is the sequential fold of the
one-thread kernels. The walk runs on the first ``lanes`` threads (one thread in local
mode), then thread 0 writes the statistics and the CIGAR at a position taken from
the counter after the pairs table (an atomic add), which it records in ``out[CHAR_ROW]``.

Where the pairs take each sequence once (a rowwise job), the upload holds the sequences'
bytes and each block first maps its own pair's through the alphabet's table, in place, so
that a small job's host work has no pass over its residues.
"""

from __future__ import annotations

from functools import lru_cache

import numba
from numba import cuda, int32, int64, uint32, uint64

from ..scoring import INVALID_CODE, NEG_INF
from .strip import SHARED_TABLE, STRIP_ROWS, load_table, mode_shape, strip_functions
from .traceback import cigar_writer, walk_functions

#: Rows of the ``pairs`` table (int64, ``count`` values a row: field ``f`` of pair ``p``
#: at ``f * count + p``): query and target residue starts, lengths (query length -1: a
#: pair that is not aligned), and the starts of the pair's traceback words, rows above a
#: pass and CIGAR runs in their buffers. The value after the table is where the next
#: pair's CIGAR characters go in ``chars`` (the first character's position at the launch;
#: each pair adds its CIGAR's length).
P_Q0, P_T0, P_M, P_N, P_TB0, P_ROW0, P_RUN0 = range(7)
PAIR_FIELDS = 7
#: Rows of ``out`` (int32, ``count`` values a row): score, query_end, target_end,
#: query_start, target_start, matches, mismatches, gap_opens, gaps, cigar_length (the
#: engines' result columns, in that order), then the position of the pair's first CIGAR
#: character.
OUT_ROWS = 11
CIGAR_LENGTH_ROW = 9
CHAR_ROW = 10
#: Most threads a block (a strip each per pass: 4,096 rows of strips of 8, where GATK's
#: pairs have a few hundred). The block's shared arrays are sized by it (18 KB at 512,
#: 8 KB more for each further column a step): the less shared memory a block takes, the
#: more of each SM's on-chip memory stays L1 cache.
MAX_THREADS = 512
#: Most columns a thread computes a step (the shared arrays of four: 42 KB of the 48 KB a
#: block may take statically).
MAX_COLUMNS = 4
#: What :func:`pair_table` returns in ``sizes``: cells, the CIGAR characters' bound, the
#: traceback words, rows-above values and CIGAR runs the buffers must hold, most strips
#: of a pair, and 1 where the pairs are all valid and take each query and each target
#: once (a kernel mapping residues in place then maps every sequence once).
(SIZE_CELLS, SIZE_CHARACTERS, SIZE_TRACEBACK, SIZE_ROWS_ABOVE, SIZE_RUNS, SIZE_STRIPS,
 SIZE_EACH_ONCE) = range(7)
SIZES = 7
#: ``out[CHAR_ROW]`` of a pair whose bytes hold a character outside the alphabet (a
#: kernel mapping residues; the pair's other rows are not written).
BAD_RESIDUE = -1


@numba.njit(cache=True, nogil=True)
def pair_table(query_offsets, query_lengths, target_offsets, target_lengths, pair_query,
               pair_target, valid, traceback, columns, rows, query_base, target_base,
               first_character, table, sizes):
    """Fill ``table`` (int64, at least ``PAIR_FIELDS * count + 1`` values) with the block
    kernel's pairs table of pairs ``(pair_query[k], pair_target[k])`` (where ``valid[k]``;
    others get length -1; ``columns`` a thread computes a step, of strips of ``rows``
    rows), the queries' and targets' residues starting ``query_base`` and ``target_base``
    after their offsets, and the counter after it ``first_character`` (where the CIGARs
    start in ``chars``); ``sizes`` (int64, :data:`SIZES`) gets the ``SIZE_*`` values. One
    pass, where numpy would take a dozen calls.

    >>> import numpy as np
    >>> table, sizes = np.zeros(2 * PAIR_FIELDS + 1, np.int64), np.zeros(SIZES, np.int64)
    >>> pair_table(np.array([0, 3]), np.array([3]), np.array([0, 9]), np.array([9]),
    ...            np.array([0, 0]), np.array([0, 0]), np.array([True, False]), True, 1, 8,
    ...            0, 3, 0, table, sizes)
    >>> table[:2 * PAIR_FIELDS].reshape(PAIR_FIELDS, 2)[:, 0].tolist()
    [0, 3, 3, 9, 0, 0, 0]
    >>> sizes.tolist()
    [27, 25, 9, 22, 14, 1, 0]
    """
    count = len(pair_query)
    cells = characters = words = above = runs = most = 0
    # (rows strictly ascending and as many as the sequences: each taken once)
    once = count == len(query_lengths) and count == len(target_lengths)
    for k in range(count):
        if once and (not valid[k] or (k > 0 and (pair_query[k] <= pair_query[k - 1]
                                                 or pair_target[k] <= pair_target[k - 1]))):
            once = False
        q, t = pair_query[k], pair_target[k]
        m, n = (query_lengths[q], target_lengths[t]) if valid[k] else (-1, 0)
        m_rows = max(m, 0)
        strips = (m_rows + rows - 1) // rows
        table[P_Q0 * count + k] = query_base + query_offsets[q]
        table[P_T0 * count + k] = target_base + target_offsets[t]
        table[P_M * count + k] = m
        table[P_N * count + k] = n
        table[P_TB0 * count + k] = words
        table[P_ROW0 * count + k] = above
        table[P_RUN0 * count + k] = runs
        above += 2 * (n + 1)
        cells += m_rows * n
        most = max(most, strips)
        if traceback:
            groups = (n + columns - 1) // columns
            words += strips * (groups + strips - 1) * columns
            runs += m_rows + n + 1
            characters += 2 * (m_rows + n)
    table[PAIR_FIELDS * count] = first_character
    sizes[SIZE_CELLS] = cells
    sizes[SIZE_CHARACTERS] = characters + 1 if traceback else 0
    sizes[SIZE_TRACEBACK] = words
    sizes[SIZE_ROWS_ABOVE] = above
    sizes[SIZE_RUNS] = runs
    sizes[SIZE_STRIPS] = most
    sizes[SIZE_EACH_ONCE] = 1 if once else 0


@numba.njit(cache=True, nogil=True)
def cigar_offsets(out, count, valid, offsets):
    """``offsets`` (int64, ``count + 1``) of the pairs' CIGARs in pair order, from the
    lengths in ``out`` (the kernel's, 0 where not ``valid``); returns their total."""
    offsets[0] = 0
    for p in range(count):
        offsets[p + 1] = offsets[p] + (out[CIGAR_LENGTH_ROW * count + p] if valid[p] else 0)
    return offsets[count]


@numba.njit(cache=True, nogil=True)
def place_cigars(out, count, placed, offsets, chars):
    """Each pair's CIGAR characters from where the kernel put them (``out[CHAR_ROW]`` in
    ``placed``) into ``chars`` at its ``offsets`` (:func:`cigar_offsets`)."""
    for p in range(count):
        start = out[CHAR_ROW * count + p]
        for k in range(offsets[p + 1] - offsets[p]):
            chars[offsets[p] + k] = placed[start + k]


@lru_cache(maxsize=None)
def block_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                 merge_matches: bool, soft_clip: bool, use_dpx: bool = False, lanes: int = 0,
                 probes: int = 1, columns: int = 1, map_residues: bool = False,
                 rows: int = STRIP_ROWS):
    """The block kernel for one mode / free-ends / traceback / CIGAR-style combination;
    ``lanes`` threads walk a pair's traceback (0: one thread; ``lanes`` and ``probes`` as
    in :func:`gpualign_df.kernels.traceback.walk_functions`). Launch a block per pair of
    at most :data:`MAX_THREADS` threads and at least ``lanes`` (exactly ``lanes`` under
    the CUDA simulator, whose warp ballot is a block barrier), on ``count`` pairs of the
    ``pairs`` table (:data:`PAIR_FIELDS` rows).

    ``columns`` (1 to :data:`MAX_COLUMNS`): columns a thread computes a step. More
    columns make fewer steps, and so fewer barriers and less of the step's own work, and
    give the scheduler more chains of cells to interleave (column ``j + 1``'s row ``r``
    beside column ``j``'s row ``r + 1``), where one column's chain leaves it waiting on
    each cell's latency.

    ``rows`` (2 to 8): query rows of a strip, a thread's each pass. Fewer rows a thread
    make more threads a pair (more warps to hide each other's latency) and a shorter chain
    of cells a step, for more steps (a pass takes a step more per thread) and
    more instructions a cell (a step's own work is shared by fewer cells).

    ``map_residues``: ``query`` and ``target`` hold the sequences' bytes, which the block
    maps in place through ``lut`` (the alphabet's 256-entry table) before its fill, each
    pair its own (the pairs must take each sequence once: :data:`SIZE_EACH_ONCE`); a
    pair with a byte outside the alphabet gets :data:`BAD_RESIDUE` in ``out[CHAR_ROW]``
    and nothing else, the others 0 there (without traceback) or their CIGAR's position."""
    empty_end, start_strip, top_border, column, end_candidates, initial_best = strip_functions(
        mode, fqs, fqe, fts, fte, traceback, use_dpx, rows=rows)
    assert 1 <= columns <= MAX_COLUMNS
    corner = mode_shape(mode, fqs, fqe, fts, fte)[1]
    steps, finish = walk_functions(mode, fqs, fts, merge_matches, False, lanes, probes,
                                   wavefront=columns, strip_rows=rows)
    write_cigar = cigar_writer(merge_matches, soft_clip)
    walkers = max(lanes, 1)
    neg = NEG_INF

    def columns_step(width: int):
        """A thread's step of ``width`` columns from ``j`` (all within the pair): the H
        and I above from the thread before (shared memory), the border or the pass
        before, then the cells column by column (one block of code: the scheduler
        interleaves column ``j + 1``'s row ``r`` with column ``j``'s row ``r + 1``), then
        the bottom rows to the next thread (and the next pass) and the traceback words."""

        @cuda.jit(device=True, inline=True)
        def step(parity, t, j, strip, hands_down, at, r0, t0, target, h_pass, i_pass, rows_above,
                 tb, shared_sub, go, ge, row_offset, h_left, del_score, diag, row_best,
                 row_best_j):
            h_up = cuda.local.array(width, int32)
            i_up = cuda.local.array(width, int32)
            codes = cuda.local.array(width, int32)
            words = cuda.local.array(width, uint32)
            if t > 0:
                for c in range(width):
                    h_up[c] = h_pass[uint32(parity ^ 1), c, uint32(t - 1)]
                    i_up[c] = i_pass[uint32(parity ^ 1), c, uint32(t - 1)]
            elif strip == 0:
                for c in range(width):
                    h_up[c] = top_border(j + c, go, ge)
                    i_up[c] = neg
            else:
                for c in range(width):
                    h_up[c] = rows_above[uint64(r0 + 2 * (j + c))]
                    i_up[c] = rows_above[uint64(r0 + 2 * (j + c) + 1)]
            for c in range(width):
                codes[c] = int32(target[uint64(t0 + j + c - 1)])
            for c in range(width):
                h_up[c], i_up[c], words[c], _word2 = column(
                    h_up[c], i_up[c], codes[c], j + c, shared_sub, go, ge, row_offset,
                    h_left, del_score, diag, row_best, row_best_j)
            for c in range(width):
                h_pass[uint32(parity), c, uint32(t)] = h_up[c]  # (unsigned: no
                i_pass[uint32(parity), c, uint32(t)] = i_up[c]  # negative-index arithmetic)
            if hands_down:  # (its bottom row, to the next pass)
                for c in range(width):
                    rows_above[uint64(r0 + 2 * (j + c))] = h_up[c]
                    rows_above[uint64(r0 + 2 * (j + c) + 1)] = i_up[c]
            if traceback:  # (a step's words side by side)
                for c in range(width):
                    tb[uint64(at + c)] = words[c]

        return step

    # the full step, and the last step of a strip whose columns are not a multiple
    step_full = columns_step(columns)
    step_one, step_two, step_three = (columns_step(min(width, columns))
                                      for width in (1, 2, 3))

    @cuda.jit
    def align(query, target, pairs, count, sub, alphabet_size, go, ge, concrete, lut, tb,
              rows_above, runs, out, chars):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        h_pass = cuda.shared.array((2, columns, MAX_THREADS), int32)
        i_pass = cuda.shared.array((2, columns, MAX_THREADS), int32)
        found = cuda.shared.array((3, MAX_THREADS), int32)
        scratch = cuda.shared.array(walkers, int32)
        p = cuda.blockIdx.x
        t = int32(cuda.threadIdx.x)  # (int32 step arithmetic: fewer instructions a step)
        threads = int32(cuda.blockDim.x)
        m = int32(pairs[P_M * count + p])
        if m < 0:  # (the whole block leaves)
            return
        n = int32(pairs[P_N * count + p])
        q0 = pairs[P_Q0 * count + p]
        t0 = pairs[P_T0 * count + p]
        if map_residues:  # (the pair's own bytes, so no other block reads them)
            bad = False
            for k in range(t, m, threads):
                code = lut[query[uint64(q0 + k)]]
                bad |= code == INVALID_CODE
                query[uint64(q0 + k)] = code
            for k in range(t, n, threads):
                code = lut[target[uint64(t0 + k)]]
                bad |= code == INVALID_CODE
                target[uint64(t0 + k)] = code
            if cuda.syncthreads_or(int32(bad)):  # (also the barrier after the writes)
                if t == 0:
                    out[CHAR_ROW * count + p] = BAD_RESIDUE
                return
            if t == 0:
                out[CHAR_ROW * count + p] = 0
        load_table(sub, alphabet_size, shared_sub)
        tb0 = pairs[P_TB0 * count + p]
        r0 = pairs[P_ROW0 * count + p]
        row_offset = cuda.local.array(rows, int32)
        h_left = cuda.local.array(rows, int32)
        del_score = cuda.local.array(rows, int32)
        diag = cuda.local.array(rows, int32)
        row_best = cuda.local.array(rows, int32)
        row_best_j = cuda.local.array(rows, int32)
        best = initial_best
        best_i = 0
        best_j = 0
        strips = int32((m + rows - 1) // rows if n > 0 else 0)
        groups = int32(uint32(n + columns - 1) // uint32(columns))  # steps of a strip
        # (a step's indices advance by constants: no 64-bit products in the loop)
        word_stride = int64(strips) * columns  # traceback words between two steps
        for first_strip in range(0, strips, threads):
            strip = int32(first_strip + t)
            active = strip < strips
            last = int32(min(threads, strips - first_strip) - 1)  # the pass's last thread
            hands_down = t == last and strip + 1 < strips  # (its bottom row, to the next pass)
            first = strip * rows + 1
            if active:
                start_strip(first, m, query, q0, 1, alphabet_size, go, ge, row_offset, h_left,
                            del_score, diag, row_best, row_best_j)
            steps_left = int32(groups + last)  # steps of the pass (counted down: no
            # bound held or recomputed a step)
            parity = int32(0)  # (which half of h_pass and i_pass the step writes)
            j = int32(1 - t * columns)  # the step's (first) column
            at = tb0 + int64(strip - t) * word_stride + strip * columns  # its words
            while steps_left > 0:
                if active and j >= 1 and j <= n:
                    left = int32(n - j + 1)  # (columns from j to the last)
                    if left >= columns:  # all of them, in one block of code
                        step_full(parity, t, j, strip, hands_down, at, r0, t0, target,
                                  h_pass, i_pass, rows_above, tb, shared_sub, go, ge, row_offset,
                                  h_left, del_score, diag, row_best, row_best_j)
                    elif left == 1:  # (a strip's last step, where n is not a multiple)
                        step_one(parity, t, j, strip, hands_down, at, r0, t0, target,
                                 h_pass, i_pass, rows_above, tb, shared_sub, go, ge, row_offset,
                                 h_left, del_score, diag, row_best, row_best_j)
                    elif left == 2:
                        step_two(parity, t, j, strip, hands_down, at, r0, t0, target,
                                 h_pass, i_pass, rows_above, tb, shared_sub, go, ge, row_offset,
                                 h_left, del_score, diag, row_best, row_best_j)
                    else:
                        step_three(parity, t, j, strip, hands_down, at, r0, t0, target,
                                   h_pass, i_pass, rows_above, tb, shared_sub, go, ge, row_offset,
                                   h_left, del_score, diag, row_best, row_best_j)
                cuda.syncthreads()
                steps_left = int32(steps_left - 1)
                parity = int32(parity ^ 1)
                j = int32(j + columns)
                at += word_stride
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
            out[p] = best
            out[count + p] = best_i
            out[2 * count + p] = best_j
        if not traceback:
            return
        cuda.syncthreads()
        if t >= walkers:
            return
        end_i = out[count + p]
        run0 = pairs[P_RUN0 * count + p]
        # state 1: in H, 2: in I, 3: in D; value (local): H, I or D of the cell and state
        walk = (end_i, out[2 * count + p], 1, out[p], 0, -1, 0, 0, 0, 0, 0, 0)
        walk = steps(query, target, q0, t0, 1, tb, tb0, strips, 0, 0, concrete, sub,
                     alphabet_size, go, ge, runs, run0, walk, t, scratch)
        if t == 0:
            runs_count, size, n_open = finish(runs, run0, walk, soft_clip, m, end_i)
            position = cuda.atomic.add(pairs, PAIR_FIELDS * count, int64(size))
            write_cigar(chars, position, runs, run0, runs_count, walk[0], m - end_i)
            out[3 * count + p] = walk[0]
            out[4 * count + p] = walk[1]
            out[5 * count + p] = walk[8]
            out[6 * count + p] = walk[9]
            out[7 * count + p] = n_open
            out[8 * count + p] = walk[11]
            out[CIGAR_LENGTH_ROW * count + p] = size
            out[CHAR_ROW * count + p] = position

    return align
