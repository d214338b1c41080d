"""CUDA kernels of a search (every query against every database sequence, no pair list):
score-only passes that write a ``[query, target]`` score matrix of one database tile, and
the two-phase top-k that keeps each query's best targets across tiles.

The 32-bit pass sweeps with :func:`gpualign_df.kernels.inter.sweep_function` (the fill's
cells, so its scores are the fill's); the packed 16-bit local pass (:func:`search_kernel16`)
runs two database sequences per thread where the caller proved that no cell leaves 16 bits
(:func:`gpualign_df.gpu.policy.use_search_16bit`). The top-k orders a query's targets by
score, ties to the lower target, nulls last: the order of the CPU engine's search.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint32, uint64

from . import dpx, inlined, simulator
from .dpx import NEG16_PAIR, high_half, low_half
from .inter import sweep_function
from .strip import SHARED_TABLE, SHARED_TABLE16, STRIP_ROWS, WARP, load_table, pack_pair


#: Score of a pair with a null sequence in the search score matrix (below every real score).
NULL_SCORE = -(1 << 31) + 1


@lru_cache(maxsize=None)
def search_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, use_dpx: bool = False):
    """Score-only kernel of a search: queries ``chunk_queries`` against every target of a
    database tile, into ``scores[query, target]`` (``target`` = ``target_row[slot]``, the
    tile-relative index; int32, ``NULL_SCORE`` for a null sequence).

    Thread ``(q, w, lane)``: query ``chunk_queries[q]``, lane ``lane`` of target warp ``w``.
    The 32 lanes of a warp share the query (its residues are one broadcast load, contiguous
    in ``query_codes`` from ``query_offsets``) and hold 32 targets of near-equal length,
    interleaved as in :func:`~gpualign_df.kernels.inter.fill_kernel`; each query of the
    chunk has its own row-above region of ``row_words`` words. No pair list: the grid is
    the cross product."""
    sweep = sweep_function(mode, fqs, fqe, fts, fte, False, use_dpx)

    @cuda.jit
    def search(query_codes, query_offsets, query_valid, chunk_queries, target, target_lengths,
               target_row, target_base, row_base, warp_columns, row_words, sub,
               alphabet_size, go, ge, h_buffer, i_buffer, scores):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        load_table(sub, alphabet_size, shared_sub)
        thread = cuda.grid(1)
        warp = thread // WARP
        lane = thread % WARP
        target_warps = warp_columns.shape[0]
        query_slot = warp // target_warps
        if query_slot >= chunk_queries.shape[0]:
            return
        target_warp = warp % target_warps
        slot = target_warp * WARP + lane
        row = target_row[slot]
        if row < 0:  # padding of the last target warp
            return
        query = chunk_queries[query_slot]
        n = target_lengths[slot]
        if n < 0 or query_valid[query] == 0:
            scores[query, row] = NULL_SCORE
            return
        q0 = query_offsets[query]
        m = query_offsets[query + 1] - q0
        row_offset = cuda.local.array(STRIP_ROWS, int32)
        h_left = cuda.local.array(STRIP_ROWS, int32)
        del_score = cuda.local.array(STRIP_ROWS, int32)
        diag = cuda.local.array(STRIP_ROWS, int32)
        row_best = cuda.local.array(STRIP_ROWS, int32)
        row_best_j = cuda.local.array(STRIP_ROWS, int32)
        best, _best_i, _best_j = sweep(  # no traceback: h_buffer stands in for tb, unused
            m, n, query_codes, q0, 1, target, target_base[target_warp] + lane, h_buffer,
            i_buffer, query_slot * row_words + row_base[target_warp] + lane, h_buffer, 0,
            warp_columns[target_warp], shared_sub, alphabet_size, go, ge, row_offset, h_left,
            del_score, diag, row_best, row_best_j)
        scores[query, row] = best

    return search


#: Threads of a block of the top-k kernels, a power of two (a block merges its threads'
#: lists pairwise); under the simulator, where every thread is a Python thread, four.
TOP_K_BLOCK = 4 if simulator() else 256
#: A slot of a top-k list that holds no target: below the key of every (score, target).
EMPTY_KEY = -(1 << 63)
#: Most database sequences a search's keys can tell apart (32 bits of a key).
MAX_TARGETS = (1 << 32) - 1


@inlined
def rank_key(score, target):
    """One int64 that orders (score, target) as a search ranks them: higher score first,
    ties to the lower target (``target`` below :data:`MAX_TARGETS`), so each target's key
    is distinct and a query's best ``k`` are its ``k`` highest keys."""
    return (int64(score) << 32) | int64(MAX_TARGETS - target)


@cuda.jit(device=True)
def block_merge(lists, spare, first, gap, step, length, top_k, counts, out, out_base):
    """The best ``top_k`` keys of the block's lists into ``out[out_base:out_base +
    top_k]``, ``EMPTY_KEY`` past the keys there are. Thread ``t``'s list holds ``length``
    keys, its ``r``-th at ``lists[first + t * gap + r * step]``, sorted descending, keys
    distinct across the block; ``spare`` is laid out as ``lists``; ``counts`` a shared
    int32 a thread. The lists are merged pairwise in a tree, ``log2(threads)`` rounds of
    one barrier, each writing the other buffer. Every thread of the block (a power of
    two) calls it."""
    thread = cuda.threadIdx.x
    size = cuda.blockDim.x
    counts[thread] = length
    cuda.syncthreads()
    source, target = lists, spare
    base = first + thread * gap
    stride = 1
    while stride < size:
        if thread % (2 * stride) == 0:
            other = base + stride * gap
            have, take = counts[thread], counts[thread + stride]
            i = j = written = 0
            while written < top_k and (i < have or j < take):
                if j >= take or (i < have
                                 and source[base + i * step] > source[other + j * step]):
                    target[base + written * step] = source[base + i * step]
                    i += 1
                else:
                    target[base + written * step] = source[other + j * step]
                    j += 1
                written += 1
            counts[thread] = written
        cuda.syncthreads()
        source, target = target, source
        stride *= 2
    # thread 0's list (in ``source``) out, a key a thread
    for rank in range(thread, top_k, size):
        out[out_base + rank] = source[first + rank * step] if rank < counts[0] else EMPTY_KEY
    cuda.syncthreads()  # (the caller's next lists and counts wait for these reads)


@cuda.jit
def top_k_blocks(scores, target_offset, top_k, segments, lists, spare, part):
    """Top-k, phase 1: block task ``(query, segment)`` (tasks strided over the grid) keeps
    the best ``top_k`` of the tile's targets ``t = segment * T + thread + i * segments *
    T`` (``T`` threads a block, a power of two up to :data:`TOP_K_BLOCK`; ``scores[query,
    t]``, global target ``target_offset + t``) in ``part[(query * (segments + 1) + segment)
    * top_k:][:top_k]`` as keys (:func:`rank_key`), best first. Each thread first keeps its
    own targets' best in ``lists`` (``top_k`` keys a thread of the grid, rank-major: a
    warp's reads of one rank coalesce; ``spare`` alike), then :func:`block_merge`. The
    threads of a block read consecutive scores of one query."""
    counts = cuda.shared.array(TOP_K_BLOCK, int32)
    thread = cuda.threadIdx.x
    size = cuda.blockDim.x
    queries, count = scores.shape
    first = cuda.blockIdx.x * size
    base = first + thread
    step = cuda.gridDim.x * size
    last = base + (top_k - 1) * step
    for task in range(cuda.blockIdx.x, queries * segments, cuda.gridDim.x):
        query = task // segments
        segment = task - query * segments
        kept = 0
        for t in range(segment * size + thread, count, segments * size):
            key = rank_key(scores[query, t], target_offset + t)
            if kept == top_k and key <= lists[last]:
                continue
            at = base + (kept if kept < top_k else top_k - 1) * step
            while at > base and lists[at - step] < key:
                lists[at] = lists[at - step]
                at -= step
            lists[at] = key
            if kept < top_k:
                kept += 1
        block_merge(lists, spare, first, 1, step, kept, top_k, counts, part,
                    (query * (segments + 1) + segment) * top_k)


@cuda.jit
def top_k_final(top_k, segments, part, spare, best, earlier):
    """Top-k, phase 2: block ``query`` (strided over the grid) merges the query's
    ``segments`` lists of ``part`` and, with ``earlier``, its running best of earlier
    tiles (``best[query * top_k:][:top_k]``, first copied to list ``segments`` of
    ``part``) into ``best``; ``spare`` is laid out as ``part``. Launch blocks of a power
    of two threads, more than ``segments`` and at most :data:`TOP_K_BLOCK`."""
    counts = cuda.shared.array(TOP_K_BLOCK, int32)
    thread = cuda.threadIdx.x
    queries = best.shape[0] // top_k
    for query in range(cuda.blockIdx.x, queries, cuda.gridDim.x):
        first = query * (segments + 1) * top_k
        length = 0
        if thread < segments:
            length = top_k
        elif thread == segments and earlier:
            for rank in range(top_k):
                part[first + thread * top_k + rank] = best[query * top_k + rank]
            length = top_k
        block_merge(part, spare, first, top_k, 1, length, top_k, counts, best,
                    query * top_k)


@lru_cache(maxsize=None)
def search_kernel16(use_dpx: bool = False):
    """Score-only local (Smith-Waterman) search kernel on 16-bit cells, two database
    sequences per thread packed in one int32 (``*_s16x2`` DPX on sm_90): lane ``l`` of warp
    pair ``p`` aligns its query against slot ``64p + l`` (low half) and ``64p + 32 + l``
    (high half), whose residues are interleaved as in :func:`search_kernel`.

    Exact only where no lane can leave 16 bits (the caller checks the bound). Columns past
    the shorter (high-half) sequence and rows past the query's end read the padding code,
    which scores ``PAD16``: every such cell stays strictly below the best real cell of its
    lane, so each lane's maximum is that of its own pair."""
    add2, max2, add_max2, max3_zero2 = dpx.functions16(use_dpx)
    rows = STRIP_ROWS
    neg2 = NEG16_PAIR   # the lanes' minus infinity in both halves, a signed int32

    @cuda.jit
    def search16(query_codes, query_offsets, query_valid, chunk_queries, target,
                 target_lengths, target_row, target_base, row_base, warp_columns, row_words,
                 sub, pad, go, ge, h_buffer, i_buffer, scores):
        shared_sub = cuda.shared.array(SHARED_TABLE16, int32)
        load_table(sub, pad + 1, shared_sub)
        thread = cuda.grid(1)
        warp = thread // WARP
        lane = thread % WARP
        slots = target_row.shape[0]
        pair_warps = (slots // WARP + 1) // 2
        query_slot = warp // pair_warps
        if query_slot >= chunk_queries.shape[0]:
            return
        pair_warp = warp % pair_warps
        slot_a = 2 * WARP * pair_warp + lane
        slot_b = slot_a + WARP
        row_a = target_row[slot_a]
        if row_a < 0:   # padding of the last warp (and so of its pair)
            return
        row_b = target_row[slot_b] if slot_b < slots else -1
        n_a = target_lengths[slot_a]
        n_b = target_lengths[slot_b] if row_b >= 0 else -1
        query = chunk_queries[query_slot]
        q0 = query_offsets[query]
        m = query_offsets[query + 1] - q0
        best = int32(0)
        if query_valid[query] != 0:
            go2 = pack_pair(-go)
            ge2 = pack_pair(-ge)
            t0_a = target_base[2 * pair_warp] + lane
            t0_b = target_base[2 * pair_warp + 1] + lane if row_b >= 0 else 0
            r0 = query_slot * row_words + row_base[pair_warp] + lane
            row_offset = cuda.local.array(STRIP_ROWS, int32)
            h_left = cuda.local.array(STRIP_ROWS, int32)
            del_score = cuda.local.array(STRIP_ROWS, int32)
            diag = cuda.local.array(STRIP_ROWS, int32)
            strips = (m + rows - 1) // rows
            for strip in range(strips):
                for r in range(rows):
                    i = strip * rows + r + 1
                    code = int32(query_codes[q0 + i - 1]) if i <= m else pad
                    row_offset[r] = code * (pad + 1)
                    h_left[r] = 0
                    del_score[r] = neg2
                    diag[r] = 0
                for j in range(1, n_a + 1):
                    code_a = int32(target[uint64(t0_a + WARP * (j - 1))])
                    code_b = int32(target[uint64(t0_b + WARP * (j - 1))]) if j <= n_b else pad
                    if strip == 0:
                        h_up = int32(0)
                        i_up = neg2
                    else:
                        h_up = h_buffer[uint64(r0 + WARP * j)]
                        i_up = i_buffer[uint64(r0 + WARP * j)]
                    for r in range(rows):
                        score2 = int32((shared_sub[uint32(row_offset[r] + code_a)] & 0xFFFF)
                                       | (shared_sub[uint32(row_offset[r] + code_b)] << 16))
                        match = add2(diag[r], score2)
                        ins = add_max2(h_up, go2, add2(i_up, ge2))
                        dele = add_max2(h_left[r], go2, add2(del_score[r], ge2))
                        h = max3_zero2(match, ins, dele)
                        best = max2(best, h)
                        diag[r] = h_up
                        h_left[r] = h
                        del_score[r] = dele
                        h_up = h
                        i_up = ins
                    h_buffer[uint64(r0 + WARP * j)] = h_up
                    i_buffer[uint64(r0 + WARP * j)] = i_up
        valid = query_valid[query] != 0
        scores[query, row_a] = low_half(best) if valid and n_a >= 0 else NULL_SCORE
        if row_b >= 0:
            scores[query, row_b] = high_half(best) if valid and n_b >= 0 else NULL_SCORE

    return search16


#: Threads of a block of the grouped kernels (a block loads the shared pair table once, so
#: blocks are large; under the simulator a block is one warp, whose shuffles go through
#: shared memory).
GROUP_BLOCK = 32 if simulator() else 256

#: Words of the grouped kernels' shared pair table (48,000 bytes, within a block's static
#: shared memory): the search's ``(query letters + 1) * (database letters + 1) ** 2`` must
#: fit, the pair kernel's copies of its classes' table (:mod:`gpualign_df.kernels.pairs16`).
PAIR_TABLE_WORDS = 12000


def group_shuffles():
    """(up, xor) of the grouped kernels: the value of the lane one below (a lane's own at
    lane 0) and of lane ``lane ^ offset``; shuffles on a GPU, shared memory under the
    simulator (which has no shuffles; there a block is one warp; device functions, so that
    the simulator's CUDA module is theirs whichever module's kernel calls them)."""
    if simulator():
        @cuda.jit(device=True)
        def up(value, scratch, lane):
            cuda.syncthreads()
            scratch[lane] = value
            cuda.syncthreads()
            return scratch[lane - 1] if lane > 0 else value

        @cuda.jit(device=True)
        def across(value, offset, scratch, lane):
            cuda.syncthreads()
            scratch[lane] = value
            cuda.syncthreads()
            return scratch[lane ^ offset]

        return up, across

    @cuda.jit(device=True, inline=True)
    def up(value, scratch, lane):
        return cuda.shfl_up_sync(0xFFFFFFFF, value, 1)

    @cuda.jit(device=True, inline=True)
    def across(value, offset, scratch, lane):
        return cuda.shfl_xor_sync(0xFFFFFFFF, value, offset)

    return up, across


@lru_cache(maxsize=None)
def shifted_cell(use_dpx: bool):
    """``cell(diag, entry, flowing, held, h_flowing, h_held, go2, ge2)``: one local cell
    of the grouped kernels on packed 16-bit halves in the shifted form (H; gaps + go;
    ``entry`` = score + go): the gap that flows along a lane's registers from the cell
    before it (H ``h_flowing``) and the gap a register keeps from the step before (H
    ``h_held``), each opened or extended, then H = max(max(diag + entry, both gaps) - go,
    0). Returns (H, flowing gap, held gap, the largest of the three before the floor)."""
    add_max2, max3_2, add_max_zero2 = dpx.functions16_search(use_dpx)

    @inlined
    def cell(diag, entry, flowing, held, h_flowing, h_held, go2, ge2):
        flowing = add_max2(flowing, ge2, h_flowing)
        held = add_max2(held, ge2, h_held)
        top = max3_2(diag + entry, flowing, held)
        return add_max_zero2(top, go2, int32(0)), flowing, held, top

    return cell


def group_parts(use_dpx: bool, copies: int = 1):
    """What the grouped kernels are built from: ``(max3_2, cell, (table_words, shift, put,
    base, at), (receive, shuffle_across), scratch_size)`` (:func:`shifted_cell`,
    :func:`gpualign_df.kernels.dpx.pair_table` of :data:`PAIR_TABLE_WORDS`,
    :func:`group_shuffles`; the shuffles' scratch words: two values a lane under the
    simulator, where ``receive`` passes both in one exchange). ``receive(h_last, gap_last,
    starts, scratch, warp_lane)`` gives a lane the H and gap the lane before it passed on
    (zeros, the boundary's, where the group ``starts``). With ``copies`` > 1 the table
    holds that many interleaved copies: in the block's dynamic shared memory where linked,
    else a static array of ``copies * PAIR_TABLE_WORDS`` words (the simulator's)."""
    shuffle_up, shuffle_across = group_shuffles()

    if simulator():  # both values in one exchange: half the barriers, which are most of
        # a grouped kernel's time under the simulator (a Python thread a lane)
        @cuda.jit(device=True)
        def receive(h_last, gap_last, starts, scratch, warp_lane):
            cuda.syncthreads()
            scratch[warp_lane] = h_last
            scratch[WARP + warp_lane] = gap_last
            cuda.syncthreads()
            if starts:
                return int32(0), int32(0)
            if warp_lane == 0:
                return h_last, gap_last
            return scratch[warp_lane - 1], scratch[WARP + warp_lane - 1]
    else:
        @inlined
        def receive(h_last, gap_last, starts, scratch, warp_lane):
            h_in = shuffle_up(h_last, scratch, warp_lane)
            gap_in = shuffle_up(gap_last, scratch, warp_lane)
            if starts:
                h_in = int32(0)
                gap_in = int32(0)
            return h_in, gap_in

    return (dpx.functions16_search(use_dpx)[1], shifted_cell(use_dpx),
            dpx.pair_table(use_dpx, PAIR_TABLE_WORDS * (1 if use_dpx else copies),
                           use_dpx and copies > 1), (receive, shuffle_across),
            2 * WARP if simulator() else 1)


#: Entries of the all-zero row before and after each query's rows in the grouped search's
#: ``query_rows``: lane k reads row s - k at step s, from k < 32 rows before the query to
#: the last unrolled step's, under ``lanes + unroll`` rows past its end.
ROWS_BEFORE = 32
ROWS_AFTER = 40


def group_row_shift(use_dpx: bool, copies: int) -> int:
    """The power of two :func:`group_search_kernel` expects its ``query_rows`` scaled by:
    a table entry's byte address where the table is linked (4 bytes an entry), its index
    otherwise, times the table's ``copies``."""
    return (2 if use_dpx else 0) + copies.bit_length() - 1


def _twice(steps, offset: int):
    """``steps`` on the query row entry ``at``, then on ``at + offset`` (unrolled: two
    calls)."""

    offset64 = uint64(offset)

    @inlined
    def twice(at, query_rows, shared, codes, h, f, carried, starts, scratch, warp_lane, go2,
              ge2):
        carried = steps(at, query_rows, shared, codes, h, f, carried, starts, scratch,
                        warp_lane, go2, ge2)
        return steps(at + offset64, query_rows, shared, codes, h, f, carried, starts,
                     scratch, warp_lane, go2, ge2)

    return twice


@lru_cache(maxsize=None)
def group_search_kernel(lanes: int, columns: int, use_dpx: bool = False, unroll: int = 4,
                        copies: int = 1):
    """Score-only local search kernel for database sequences of at most ``lanes *
    columns`` residues: a group of ``lanes`` threads per (query, pair of database
    sequences), the pair packed as the two 16-bit halves of every int32 (``*_s16x2``
    DPX on sm_90), each lane holding ``columns`` database columns in registers while the
    query streams through the group as a wavefront (lane k on query row s - k at step s;
    a lane's last column passes its H and E to the next lane by ``shfl_up``), ``unroll``
    steps (1, 2 or 4) an iteration of the step loop. No buffer in global memory: a pair's
    whole row lives in its group's registers.

    Values are kept in the shifted form the packed arithmetic needs: H itself (>= 0) and
    E* = E + go, F* = F + go (>= H of the cell they open from, so >= 0), and the shared
    table ``table[row + pair]`` holds both halves' ``score + go`` (>= 0: the caller checks
    that no entry is below ``-go``), so the diagonal is one plain 32-bit add that never
    carries between the halves, and E*, F* and H take one DPX instruction each:
    ``E* = max(E*_left - ge, H_left)``, ``F* = max(F*_up - ge, H_up)``,
    ``H = max(max(H_diag + s + go, E*, F*) - go, 0)``. Padding (columns past a sequence's
    end, query rows outside the query) scores ``-go`` (a table entry 0): rows before the
    query keep every value 0, the boundary's own values, and any padded cell is reached
    from a real cell through a gap or a padding score, so it stays at least ``go`` below
    that cell and never sets the best. Exact where no value can leave 16 bits (the caller
    checks the bound).

    Launch ``lanes * pairs * len(chunk_queries)`` threads (``pairs`` a multiple of
    ``32 // lanes``, so a warp's groups share one query), any multiple of 32 per block.
    ``pair_codes[(r * pairs + p) * lanes + k]`` is pair ``p``'s code of column
    ``k * columns + r`` (``low * stride + high``, letters compacted). ``query_rows`` holds
    each query residue's table row (``letter * stride**2``) scaled by ``2**row_shift``
    (:func:`group_row_shift`) between :data:`ROWS_BEFORE` and :data:`ROWS_AFTER` entries
    of the all-zero row, query ``q``'s first residue at ``row_starts[q]``: a lane reads
    its row of a step with no bounds check and no scaling. Writes
    ``scores[query, pair_row[p, half]]`` for the pair's real halves (``pair_row`` -1
    elsewhere), ``NULL_SCORE`` for a null query.

    ``copies`` (a power of two up to a warp) copies of the table, interleaved entry by
    entry, each lane reading copy ``lane % copies``: the lanes of one copy read only its
    ``32 / copies`` banks, so a warp's 32 scattered reads replay fewer times for bank
    conflicts. Linked, more than one copy lives in dynamic shared memory: launch with
    ``copies * used_words * 4`` bytes of it (beyond 48 KB the kernel must opt in)."""
    assert unroll in (1, 2, 4) and copies in (1, 2, 4, 8, 16, 32)
    max3_2, cell, table, shuffles, scratch_size = group_parts(use_dpx, copies)
    table_words, shift, table_put, table_base, table_at = table
    copy_bits = copies.bit_length() - 1
    copy_mask = int32(copies - 1)
    shift += copy_bits
    assert shift == group_row_shift(use_dpx, copies)
    receive, shuffle_across = shuffles
    group, width = lanes, columns
    group_mask = uint32(group - 1)
    @inlined
    def step(at, query_rows, shared, codes, h, f, carried, starts, scratch, warp_lane, go2,
             ge2):
        """A step of a lane: the query row at entry ``at`` of ``query_rows`` (at step s,
        row s - lane; a padding row outside the query) over its columns (``codes``: their
        table addresses); ``carried`` = (best, its last column's H and E, the H its first
        column takes as diagonal) before and after."""
        best, h_last, e_last, diag_first = carried
        h_in, e_in = receive(h_last, e_last, starts, scratch, warp_lane)
        row = query_rows[at]
        h_left = h_in
        e = e_in
        diag = diag_first
        for r in range(width):
            h_up = h[r]
            value, e, f_r, _top = cell(diag, table_at(shared, int32(row + codes[r])), e,
                                       f[r], h_left, h_up, go2, ge2)
            if r % 2 == 1:
                best = max3_2(best, h_left, value)
            elif r == width - 1:
                best = max3_2(best, value, value)
            f[r] = f_r
            diag = h_up
            h[r] = value
            h_left = value
        return best, h_left, e, h_in

    steps = step
    width_steps = 1
    while width_steps < unroll:
        steps = _twice(steps, width_steps)
        width_steps *= 2

    @cuda.jit
    def search(query_rows, row_starts, query_offsets, query_valid, chunk_queries, pair_codes,
               pairs, pair_row, table, used_words, go, ge, scores):
        shared = cuda.shared.array(table_words, int32)
        scratch = cuda.shared.array(scratch_size, int32)
        warp_lane = cuda.threadIdx.x % WARP
        for k in range(cuda.threadIdx.x, used_words << copy_bits, cuda.blockDim.x):
            table_put(shared, k, table[k >> copy_bits])
        cuda.syncthreads()
        base = table_base(shared) + ((warp_lane & copy_mask) << (shift - copy_bits))
        thread = cuda.grid(1)
        group_index = thread // group
        lane = int32(thread & group_mask)
        query_slot = group_index // pairs
        if query_slot >= chunk_queries.shape[0]:
            return
        pair = group_index - query_slot * pairs
        query = chunk_queries[query_slot]
        valid = query_valid[query] != 0
        m = int32(query_offsets[query + 1] - query_offsets[query]) if valid else int32(0)
        first = uint64(row_starts[query] - lane)
        codes = cuda.local.array(width, int32)
        h = cuda.local.array(width, int32)
        f = cuda.local.array(width, int32)
        for r in range(width):  # (a column's entry address, its row's added at each step)
            codes[r] = base + (
                int32(pair_codes[uint64((r * pairs + pair) * group + lane)]) << shift)
            h[r] = 0
            f[r] = 0
        go2 = pack_pair(-go)
        ge2 = pack_pair(-ge)
        zero = int32(0)
        starts = lane == 0
        carried = (zero, zero, zero, zero)  # best, h_last, e_last, diag_first
        # ``unroll`` steps an iteration (the rows' registers change roles by renaming
        # instead of being moved back at every step, and the loop's own work is shared;
        # the steps' rows are read at constant offsets from ``at``); steps after the last
        # read only padding rows, which never set the best
        at = first
        for _ in range(int32((m + group - 2) // unroll + 1)):
            carried = steps(at, query_rows, shared, codes, h, f, carried, starts, scratch,
                            warp_lane, go2, ge2)
            at += uint64(unroll)
        best = carried[0]
        for offset in (1, 2, 4, 8, 16):
            if offset < group:
                other = shuffle_across(best, offset, scratch, warp_lane)
                best = max3_2(best, other, other)
        if lane == 0:
            for half in range(2):
                target = pair_row[pair, half]
                if target >= 0:
                    scores[query, target] = (
                        (low_half(best) if half == 0 else high_half(best)) if valid
                        else NULL_SCORE)

    return search


@cuda.jit
def pair_columns(codes, offsets, letter, pad, stride, pair_sequence, lanes, columns,
                 pair_codes):
    """The ``pair_codes`` of :func:`group_search_kernel` for pairs of database sequences
    ``pair_sequence[p, half]`` (-1: none) of ``lanes * columns`` columns: one thread per
    (pair, column), ``letter[code]`` the compacted letter, ``pad`` past a sequence's end."""
    thread = cuda.grid(1)
    width = lanes * columns
    pairs = pair_sequence.shape[0]
    if thread >= pairs * width:
        return
    pair = thread // width
    j = thread - pair * width
    halves = cuda.local.array(2, int32)
    for half in range(2):
        sequence = pair_sequence[pair, half]
        halves[half] = pad
        if sequence >= 0:
            start = offsets[sequence]
            if j < offsets[sequence + 1] - start:
                halves[half] = letter[codes[start + j]]
    lane = j // columns
    r = j - lane * columns
    pair_codes[(r * pairs + pair) * lanes + lane] = halves[0] * stride + halves[1]
