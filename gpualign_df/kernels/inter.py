"""Inter-task CUDA kernel: one thread per pair, a strip of ``FILL_STRIP_ROWS`` query rows
(16; ``STRIP_ROWS`` = 8 in the search and intra-task kernels) in registers sweeping the
target, the H/I values of the row above the strip in a global ``[column, lane]`` buffer.

Same recurrences and tie-breaks as :mod:`gpualign_df.kernels.cpu` (the contract is written
there). Memory layout, per warp ``w`` of 32 pairs (lane = pair's slot in the warp):

* residues interleaved: query residue ``i`` of lane ``l`` at ``query_base[w] + 32*i + l``
  (same for targets), so a warp's loads coalesce;
* the row-above buffers at ``row_base[w] + 32*j + l``;
* traceback: one ``uint32`` per (strip of ``STRIP_ROWS`` = 8 rows, column) holding the 4
  bits of each of the strip's rows (row ``r`` in bits ``4(7-r)..4(7-r)+3``,
  :func:`append_sign`), at ``tb_base[w] + 32*(strip * warp_columns[w] + j - 1) + l``:
  written coalesced (a fill strip of 16 rows writes the words of two such strips).

Kernels are specialised per mode, free ends and traceback (closure constants), so the
cell loop carries no run-time mode tests.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, uint32, uint64

from . import common, dpx, simulator
from .dpx import high_half, low_half, pack_halves
from .cpu import MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, NEG_INF

STRIP_ROWS = 8
WARP = 32
#: Largest alphabet the shared-memory substitution table holds.
MAX_ALPHABET = 32
SHARED_TABLE = 1024  # MAX_ALPHABET ** 2, a literal for cuda.shared.array


semiglobal_empty = cuda.jit(device=True, inline=True)(common.empty_semiglobal)


def _append_sign(word, difference):
    """``word`` shifted left by one with the sign bit of ``difference`` (a funnel shift: one
    instruction per traceback bit, no compare and select). The fill kernels append four
    bits per cell, so a cell's bits say, from the high one: D extends D (``D[i,j-1] - ge``
    beats ``H[i,j-1] - go`` strictly), I extends I, D is H's source (D beats max(diagonal,
    I) strictly), I beats the diagonal strictly; ties go to opening, the diagonal, then I,
    as in :mod:`gpualign_df.kernels.cpu`. Local mode needs no start bit: the walk stops
    where H is 0, tracking H back from the score. ``difference`` is an int32."""
    return (word << uint32(1)) | (uint32(difference) >> uint32(31))


def _append_sign_simulated(word, difference):
    """:func:`_append_sign` on the simulator's numpy scalars (no wrapping casts there)."""
    return uint32(((int(word) << 1) | ((int(difference) >> 31) & 1)) & 0xFFFFFFFF)


append_sign = (_append_sign_simulated if simulator()
               else cuda.jit(device=True, inline=True)(_append_sign))


@cuda.jit(device=True, inline=True)
def border_score(index, go, ge, free):
    """H on row 0 / column 0 at distance ``index`` from the corner (``free``: 0 there)."""
    if index == 0 or free:
        return 0
    return -(go + (index - 1) * ge)


#: Query rows a thread of the inter-task fill keeps in registers: ``STRIP_ROWS`` or twice
#: as many (half the row-above traffic and per-column work per cell, more registers). On
#: W1 (H100), fill ms with 8 / 16 rows: local + traceback 10.6 / 9.9, global 10.6 / 9.4,
#: semi-global 10.5 / 9.9, local score-only 8.4 / 6.0.
FILL_STRIP_ROWS = 2 * STRIP_ROWS
#: Register cap of the inter-task fill kernels by strip height (None: the compiler's
#: choice). With 8 rows, 72 (7 blocks of 128 threads per SM) took the semi-global fill on
#: W1 from 12.9 ms (88 registers) to 10.8 (local + traceback: 10.9 either way; 64: 11.6).
#: With 16 rows the compiler's choice and a cap of 128 tie; 96 is slower (semi-global 10.9,
#: score-only 7.3).
FILL_MAX_REGISTERS: dict[int, int | None] = {STRIP_ROWS: 72, 2 * STRIP_ROWS: None}


def fill_shape() -> tuple[int, int | None]:
    """``(rows, max_registers)`` of the inter-task fill kernels, from the settings above."""
    return FILL_STRIP_ROWS, FILL_MAX_REGISTERS.get(FILL_STRIP_ROWS)


def mode_shape(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool):
    """What a mode and its free ends mean to a fill kernel: (local, corner: the end cell is
    (m, n), free_row0 / free_col0: row 0 / column 0 score 0, end_row / end_column: the end
    cell is the best of the last row / column)."""
    local = mode == MODE_LOCAL
    return (local, mode == MODE_GLOBAL or (mode == MODE_SEMIGLOBAL and not (fqe or fte)),
            local or (mode == MODE_SEMIGLOBAL and fts), local or (mode == MODE_SEMIGLOBAL and fqs),
            mode == MODE_SEMIGLOBAL and fte, mode == MODE_SEMIGLOBAL and fqe)


#: With DPX (linked CUDA C), append traceback bits through a funnel shift in inline PTX,
#: which the optimizer keeps: from plain shifts it folds a cell's four appends into masks,
#: shifts and ORs (sm_90 SASS of a 16-row column, semi-global with traceback: 348
#: instructions instead of 438; local 387 / 467, global 347 / 436). A switch for
#: benchmarks: clear the kernel caches (:func:`clear_kernel_caches`) after changing it.
FUNNEL_APPEND = True


def clear_kernel_caches() -> None:
    """Forget the built fill and search kernels, inter- and intra-task (after changing a
    module switch)."""
    from . import intra

    for built in (strip_functions, sweep_function, fill_kernel, search_kernel,
                  intra.long_fill_kernel):
        built.cache_clear()


#: Keyed running best of a row: ``H * KEY_SCALE - j`` (highest H, then first column).
KEY_SCALE = 1 << 16
KEY_NEG = -(1 << 31) + 1


@lru_cache(maxsize=None)
def strip_functions(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                    use_dpx: bool = False, keyed: bool = False, rows: int = STRIP_ROWS,
                    track: bool = True):
    """Device functions of one strip of ``rows`` query rows (``STRIP_ROWS`` or twice as
    many), shared by the inter-task and intra-task kernels: start a strip, compute one
    column of it, collect its end-cell candidates, and the end cell of a pair with an
    empty sequence. A column's traceback bits fill one word per ``STRIP_ROWS`` rows.
    ``track=False``: the column keeps no running best of its rows (for a strip whose rows
    cannot hold a semi-global end cell).

    ``keyed``: each row's running best is one int32 ``H * KEY_SCALE - j``, whose maximum is
    the highest H at its first column (one multiply-add and one max per cell, instead of a
    compare and two selects); exact where every H lies in (-2**15, 2**15) and columns stay
    below 2**16 (the caller checks: ``gpualign_df.gpu.keyed_best_fits``)."""
    local, corner, free_row0, free_col0, end_row, end_column = mode_shape(mode, fqs, fqe, fts,
                                                                          fte)
    track_rows = (local or end_row) and track
    assert rows in (STRIP_ROWS, 2 * STRIP_ROWS)
    neg = NEG_INF
    add_max, max3, max3_zero = dpx.functions(use_dpx)
    keep_best = dpx.keep_best(use_dpx)
    append = dpx.append_sign() if use_dpx and FUNNEL_APPEND else append_sign

    @cuda.jit(device=True, inline=True)
    def empty_end(m, n, go, ge):
        """End cell and score of a pair with an empty sequence (as ``cpu.fill_matrix``)."""
        if local or (m == 0 and n == 0):
            return 0, 0, 0
        if corner:
            if m == 0:
                return border_score(n, go, ge, free_row0), m, n
            return border_score(m, go, ge, free_col0), m, n
        return semiglobal_empty(m, n, go, ge, fqs, fqe, fts, fte)

    @cuda.jit(device=True, inline=True)
    def start_strip(first, m, query, q0, width, alphabet_size, go, ge, row_offset, h_left,
                    del_score, diag, row_best, row_best_j):
        """Registers of the strip whose first row is ``first`` (1-based)."""
        for r in range(rows):
            i = first + r
            code = query[q0 + width * (i - 1)] if i <= m else 0
            row_offset[r] = int32(code) * alphabet_size
            h_left[r] = border_score(i, go, ge, free_col0)
            del_score[r] = neg
            diag[r] = border_score(i - 1, go, ge, free_col0)
            row_best[r] = KEY_NEG if keyed else neg
            row_best_j[r] = 0

    @cuda.jit(device=True, inline=True)
    def top_border(j, go, ge):
        """H on row 0 at column j."""
        return border_score(j, go, ge, free_row0)

    @cuda.jit(device=True, inline=True)
    def cell_bits(word, open_del, del_ext, open_ins, ins_ext, match, ins, dele):
        """``word`` with a cell's four traceback bits appended: D extends, I extends, D is
        H's source, I beats the diagonal."""
        word = append(word, int32(open_del - del_ext))
        word = append(word, int32(open_ins - ins_ext))
        word = append(word, int32(max(match, ins) - dele))
        return append(word, int32(match - ins))

    @cuda.jit(device=True, inline=True)
    def column(h_up, i_up, code_t, j, shared_sub, go, ge, row_offset, h_left, del_score, diag,
               row_best, row_best_j):
        """Cells (first..first+rows-1, j); returns the bottom row's H and I and the
        traceback words of rows 0-7 and 8-15 (:func:`append_sign`: row ``r``'s four bits at
        ``4 * (7 - r % 8)``; the second word is 0 for a strip of 8 rows)."""
        word = uint32(0)
        word2 = uint32(0)
        go32 = int32(go)   # int32 arithmetic throughout (numba widens to int64 otherwise)
        ge32 = int32(ge)
        for r in range(rows):
            ins_ext = int32(i_up - ge32)
            open_ins = int32(h_up - go32)
            del_ext = int32(del_score[r] - ge32)
            open_del = int32(h_left[r] - go32)
            match = int32(diag[r] + shared_sub[uint32(row_offset[r] + code_t)])
            if use_dpx:  # closure constant: one branch is compiled
                ins = add_max(h_up, -go32, ins_ext)
                dele = add_max(h_left[r], -go32, del_ext)
                h = max3_zero(match, ins, dele) if local else max3(match, ins, dele)
            else:  # plain max (also what the CUDA simulator runs, without call overhead)
                ins = max(open_ins, ins_ext)
                dele = max(open_del, del_ext)
                h = max(max(match, ins), dele)
                if local:
                    h = max(h, 0)
            if traceback and r < STRIP_ROWS:  # (r is a constant of the unrolled loop)
                word = cell_bits(word, open_del, del_ext, open_ins, ins_ext, match, ins, dele)
            elif traceback:
                word2 = cell_bits(word2, open_del, del_ext, open_ins, ins_ext, match, ins, dele)
            if track_rows and keyed:
                row_best[r] = max(row_best[r], int32(h * KEY_SCALE - j))
            elif track_rows and traceback and use_dpx:  # the row's best so far, first
                # column on ties (score-only kernels are faster with the plain form)
                packed = keep_best(row_best[r], h)
                row_best[r] = int32(packed >> 32)
                if packed & 1:
                    row_best_j[r] = j
            elif track_rows and h > row_best[r]:
                row_best[r] = h
                row_best_j[r] = j
            diag[r] = h_up
            h_left[r] = h
            del_score[r] = dele
            h_up = h
            i_up = ins
        return h_up, i_up, word, word2

    @cuda.jit(device=True, inline=True)
    def end_candidates(first, m, n, best, best_i, best_j, h_left, row_best, row_best_j):
        """Fold the strip's end-cell candidates into the best, rows ascending (strict >)."""
        for r in range(rows):
            i = first + r
            if i <= m:
                if local or (end_row and i == m):
                    row_value = row_best[r]
                    row_j = row_best_j[r]
                    if keyed:  # key = H * KEY_SCALE - j, 1 <= j < KEY_SCALE
                        row_j = (-row_value) & (KEY_SCALE - 1)
                        row_value = (row_value + row_j) >> 16
                    if row_value > best:
                        best = row_value
                        best_i = i
                        best_j = row_j
                elif end_column and h_left[r] > best:
                    best = h_left[r]
                    best_i = i
                    best_j = n
                if corner and i == m:
                    best = h_left[r]
                    best_i = m
                    best_j = n
        return best, best_i, best_j

    initial_best = 0 if local else neg
    return empty_end, start_strip, top_border, column, end_candidates, initial_best


@lru_cache(maxsize=None)
def sweep_function(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                   use_dpx: bool = False, keyed: bool = False, rows: int = STRIP_ROWS):
    """Device function aligning one pair of one thread, strip by strip, and returning its
    ``(score, end_i, end_j)``; shared by the inter-task fill kernel and the search kernel.

    Query residue ``i`` (1-based) sits at ``query[q0 + query_width * (i - 1)]``, target
    residue ``j`` at ``target[t0 + WARP * (j - 1)]``, the row above the strip at
    ``h_buffer/i_buffer[r0 + WARP * j]``, traceback word (strip, j) at
    ``tb[b0 + WARP * (strip * columns + j - 1)]`` (``strip`` counts ``STRIP_ROWS`` rows:
    a sweep of 16-row strips writes two words per column, the second only where the
    query reaches its rows). The six register arrays (``rows`` long) come from the kernel
    (``cuda.local.array`` lives in a kernel body)."""
    empty_end, start_strip, top_border, column, end_candidates, initial_best = strip_functions(
        mode, fqs, fqe, fts, fte, traceback, use_dpx, keyed, rows)
    local, _corner, _free_row0, _free_col0, end_row, _end_column = mode_shape(mode, fqs, fqe,
                                                                             fts, fte)
    # semi-global with a free target end: only the last strip holds row m, whose running
    # best is the end cell; the other strips skip the bookkeeping
    last_strip_tracks = end_row and not local
    sweep_strip = _strip_sweep(column, top_border, traceback, rows)
    sweep_untracked = _strip_sweep(strip_functions(mode, fqs, fqe, fts, fte, traceback,
                                                   use_dpx, keyed, rows, False)[3],
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


@cuda.jit(device=True, inline=True)
def load_table(sub, alphabet_size, shared_sub):
    """The substitution table into shared memory, by the whole block."""
    for k in range(cuda.threadIdx.x, alphabet_size * alphabet_size, cuda.blockDim.x):
        shared_sub[k] = sub[k]
    cuda.syncthreads()


@lru_cache(maxsize=None)
def fill_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                use_dpx: bool = False, keyed: bool = False, rows: int = STRIP_ROWS,
                max_registers: int | None = None):
    """The inter-task fill kernel for one mode / free-ends / traceback combination (keyed
    row bests: see :func:`strip_functions`), with strips of ``rows`` query rows and at
    most ``max_registers`` registers a thread (None: the compiler's choice; the CUDA
    simulator takes no cap)."""
    sweep = sweep_function(mode, fqs, fqe, fts, fte, traceback, use_dpx, keyed, rows)
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
    interleaved as in :func:`fill_kernel`; each query of the chunk has its own row-above
    region of ``row_words`` words. No pair list: the grid is the cross product."""
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


#: Most target segments one query's top-k scan is split into (the merge's head array).
TOP_K_SEGMENTS = 64
TOP_K_HEADS = TOP_K_SEGMENTS + 1   # a global constant: cuda.local.array needs one


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


#: Packed 16-bit search: padding code (a row and a column of the table scoring PAD16), the
#: shared table size for alphabets of up to MAX_ALPHABET symbols plus padding, the "minus
#: infinity" of a 16-bit lane.
PAD16 = -(1 << 14)
SHARED_TABLE16 = (MAX_ALPHABET + 1) ** 2
NEG16 = -(1 << 14)


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
    neg2 = (NEG16 << 16) | (NEG16 & 0xFFFF)   # NEG16 in both lanes, a signed int32

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


@cuda.jit(device=True, inline=True)
def pack_pair(value):
    """``value`` in both 16-bit lanes of an int32."""
    return pack_halves(value, value)
