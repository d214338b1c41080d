"""CUDA kernels of a search (every query against every database sequence, no pair list):
score-only passes that write a ``[target, query]`` score matrix of one database tile, and
the two-phase top-k that keeps each query's best targets across tiles.

The 32-bit pass sweeps with :func:`gpualign_df.kernels.inter.sweep_function` (the fill's
cells, so its scores are the fill's); the packed 16-bit local pass (:func:`search_kernel16`)
runs two database sequences per thread where the caller proved that no cell leaves 16 bits
(:func:`gpualign_df.gpu.policy.use_search_16bit`). The top-k orders a query's targets by
score, ties to the lower target, nulls last: the order of the CPU engine's search.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, uint32, uint64

from . import dpx
from .dpx import NEG16_PAIR, high_half, low_half
from .inter import sweep_function
from .strip import SHARED_TABLE, SHARED_TABLE16, STRIP_ROWS, WARP, load_table, pack_pair


#: Score of a pair with a null sequence in the search score matrix (below every real score).
NULL_SCORE = -(1 << 31) + 1


@lru_cache(maxsize=None)
def search_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, use_dpx: bool = False):
    """Score-only kernel of a search: queries ``chunk_queries`` against every target of a
    database tile, into ``scores[target, query]`` (``target`` = ``target_row[slot]``, the
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
            scores[row, query] = NULL_SCORE
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
        scores[row, query] = best

    return search


#: Most target segments one query's top-k scan may be split into (the ``top_k_segments``
#: setting is capped here): the merge keeps one head per segment, plus one for the best
#: of earlier tiles, in a local array whose size must be a global constant.
MAX_TOP_K_SEGMENTS = 64
TOP_K_HEADS = MAX_TOP_K_SEGMENTS + 1


@cuda.jit
def top_k_segments(scores, target_offset, top_k, segments, part_score, part_target,
                   part_count):
    """Top-k, phase 1: thread (segment, query) keeps the best ``top_k`` of the tile's
    targets ``t = segment, segment + segments, ...`` (``scores[t, query]``, global target
    ``target_offset + t``) in ``part_*[segment, rank, query]``: score descending, ties by
    target (a new entry goes after equal scores), nulls (``NULL_SCORE``) last. Query is the
    fast index of the grid, so a warp's loads coalesce."""
    thread = cuda.grid(1)
    queries = scores.shape[1]
    query = thread % queries
    segment = thread // queries
    if segment >= segments:
        return
    kept = 0
    for t in range(segment, scores.shape[0], segments):
        value = scores[t, query]
        if kept == top_k and value <= part_score[segment, top_k - 1, query]:
            continue
        position = kept if kept < top_k else top_k - 1
        while position > 0 and part_score[segment, position - 1, query] < value:
            part_score[segment, position, query] = part_score[segment, position - 1, query]
            part_target[segment, position, query] = part_target[segment, position - 1, query]
            position -= 1
        part_score[segment, position, query] = value
        part_target[segment, position, query] = target_offset + t
        if kept < top_k:
            kept += 1
    part_count[segment, query] = kept


@cuda.jit
def top_k_merge(top_k, segments, part_score, part_target, part_count, best_score, best_target,
                count):
    """Top-k, phase 2: thread ``query`` merges its running best (earlier tiles, copied to
    row ``segments`` of ``part_*``) with the segments' lists into ``best_*[query, rank]``,
    taking the highest head each time, ties to the lower target."""
    query = cuda.grid(1)
    if query >= best_score.shape[0]:
        return
    kept = count[query]
    for rank in range(kept):
        part_score[segments, rank, query] = best_score[query, rank]
        part_target[segments, rank, query] = best_target[query, rank]
    part_count[segments, query] = kept
    heads = cuda.local.array(TOP_K_HEADS, int32)
    for segment in range(segments + 1):
        heads[segment] = 0
    out = 0
    while out < top_k:
        chosen = -1
        chosen_score = 0
        chosen_target = 0
        for segment in range(segments + 1):
            head = heads[segment]
            if head < part_count[segment, query]:
                value = part_score[segment, head, query]
                target = part_target[segment, head, query]
                if chosen < 0 or value > chosen_score or (value == chosen_score
                                                          and target < chosen_target):
                    chosen = segment
                    chosen_score = value
                    chosen_target = target
        if chosen < 0:
            break
        best_score[query, out] = chosen_score
        best_target[query, out] = chosen_target
        heads[chosen] += 1
        out += 1
    count[query] = out


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
        scores[row_a, query] = low_half(best) if valid and n_a >= 0 else NULL_SCORE
        if row_b >= 0:
            scores[row_b, query] = high_half(best) if valid and n_b >= 0 else NULL_SCORE

    return search16
