"""CPU engine, inter-pair SIMD path: ``LANES`` pairs in lockstep, the lane innermost.

Same recurrences, tie-breaks and traceback nibbles as :mod:`gpualign_df.kernels.cpu` (whose
``trace_back`` walks the lanes' traceback): only the memory layout differs. Residues of a
group are interleaved ``[position, lane]`` so that the lane loop compiles to vector
instructions (int16 when the group's scores allow it, 32 lanes to a 512-bit register, else
int32). Cells beyond a lane's own lengths are computed on padding and never read.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from ..scoring import MODE_GLOBAL, MODE_LOCAL, NEG_INF
from .cpu import border_score, trace_back

LANES = 32
#: Substitution score of padding cells (beyond a lane's target): far below any real cell.
PADDING_SCORE = -(1 << 19)
#: Lane groups need every cell below this in magnitude (see :func:`fill_lanes`).
LANE_SCORE_LIMIT = 1 << 18
#: int16 versions of ``NEG_INF`` (I and D before the first row / column) and PADDING_SCORE.
NARROW_NEG = -(1 << 14)
NARROW_PADDING_SCORE = -(1 << 13)
#: Columns per step of the cell loop (target columns are padded to a multiple); the loop of
#: :func:`fill_lanes` is written out for 8.
STEP = 8


def lane_eligible(max_abs_score: int, gap_open: int) -> bool:
    """Whether a job's pairs may use the SIMD lanes (see :func:`fill_lanes`)."""
    return max_abs_score < LANE_SCORE_LIMIT and gap_open >= 1


def _as(value, like):
    """``value`` as the integer type of ``like`` (a scalar or an array): numba computes
    ``int16 - int16`` in int64, and the cell loop must stay in its own width to vectorise.
    (This body runs in plain Python; compiled code uses the overload below.)"""
    kind = like.dtype.type if hasattr(like, "dtype") else type(like)
    return kind(value)


@overload(_as)
def _as_impl(value, like):
    kind = like.dtype if isinstance(like, types.Array) else like
    if kind == types.int16:
        return lambda value, like: np.int16(value)
    if kind == types.int32:
        return lambda value, like: np.int32(value)
    return None


@njit(cache=True)
def _cell(diag, h_up, i_up, h_left, d_left, s, row_max, row_col, j, go, ge, floor):
    """One cell of :func:`fill_lanes`, in the type of ``go``: (H, I, D, row maximum, its
    first column, nibble). Scalars only, so that LLVM inlines it into the vectorised loop."""
    ins_open = _as(h_up - go, go)
    ins_ext = _as(i_up - ge, go)
    ins_extends = ins_ext > ins_open
    ins_score = max(ins_ext, ins_open)
    del_open = _as(h_left - go, go)
    del_ext = _as(d_left - ge, go)
    del_extends = del_ext > del_open
    del_score = max(del_ext, del_open)
    h = _as(diag + s, go)
    src = np.uint8(1) if h >= ins_score else np.uint8(2)
    h = max(h, ins_score)
    src = np.uint8(3) if del_score > h else src
    h = max(h, del_score)
    src = np.uint8(0) if h <= floor else src
    h = max(h, floor)
    nibble = (src | (np.uint8(4) if ins_extends else np.uint8(0))
              | (np.uint8(8) if del_extends else np.uint8(0)))
    row_col = j if h > row_max else row_col
    row_max = max(row_max, h)
    return h, ins_score, del_score, row_max, row_col, nibble


@njit(cache=True)
def fill_lanes(query_lanes, target_lanes, query_lengths, target_lengths, sub_flat, alphabet_size,
               match_code, match_score, mismatch_score, neg, go, ge, mode, fqs, fqe, fts, fte,
               tb_buffer):
    """Fill the DP matrices of ``LANES`` pairs (see :func:`cpu.fill_matrix`) in the integer
    type of ``neg`` (int16 or int32); ``target_lanes`` has a multiple of ``STEP`` columns.

    Returns (best, best_i, best_j, tb) with ``tb[(i-1) * stride + (j-1) // 2, lane]``, a view
    of ``tb_buffer`` (uint8, at least ``rows * cols // 2 * LANES`` long, reused from group to
    group: fresh large allocations cost page faults); ``tb_buffer`` None compiles a
    score-only fill, without the nibbles.

    Value ranges, with ``B`` the group's :func:`_score_bound` (so ``go, ge <= B / 2``): every
    H lies in ``[-(B + 2 go), B]`` (a gap-only path reaches any cell, padding included),
    every I and D candidate in ``[-3 B, B]`` and every diagonal candidate in
    ``[-2 B - |padding score|, 2 B]``; ``neg - ge`` (I and D before the first row and
    column) lies below the border's ``H - go`` it competes with, as ``NEG_INF - ge`` does in
    :mod:`cpu`, so every comparison goes the same way. Padding columns score ``sub_flat``'s
    padding entry, ``< -B``, so that in local mode they stay below a real cell. int16
    (``NARROW_NEG``, ``NARROW_PADDING_SCORE``) thus holds every value when
    ``B < narrow_limit`` (the ``lane_narrow_score_limit`` setting), and int32 (``NEG_INF``, ``PADDING_SCORE``) when
    ``B < LANE_SCORE_LIMIT``.

    The local row maximum and its first column are tracked in the cell loop (a maximum and
    a select, the column in the same type). The cell loop touches four arrays only
    (``work``, ``seq``, ``state``, ``tb_buffer``): LLVM checks at run time that the arrays
    of a vectorised loop do not overlap, and does not vectorise a loop that needs more than
    a handful of such checks. Its ``tb_buffer`` indices are unsigned: numba adds a
    negative-index fix-up to signed ones, which LLVM cannot see through. Semi-global end
    cells are read after each row, outside the vectorised loop.
    """
    rows = query_lanes.shape[0]
    cols = target_lanes.shape[0]
    steps = cols // STEP
    local = mode == MODE_LOCAL
    corner = mode == MODE_GLOBAL or not (local or fqe or fte)
    go = _as(go, neg)
    ge = _as(ge, neg)
    lowest = _as(2 * neg, neg)  # below every value: a no-op floor outside local mode
    floor = _as(0, neg) if local else lowest
    match = _as(match_score, neg)
    # work[j, 0] = H and work[j, 1] = I of the previous row, then of this row.
    work = np.full((cols + 1, 2, LANES), neg)
    # seq[j - 1, 0] = target code of column j; seq[j - 1, 1] = its score unless
    # match_code[q] == target (gathered per row from sub_flat, or set once for a two-valued
    # matrix, see :func:`match_codes`).
    seq = np.full((cols, 2, LANES), neg)
    two_valued = match_score != mismatch_score
    for j in range(cols):
        for lane in range(LANES):
            t = target_lanes[j, lane]
            seq[j, 0, lane] = t
            seq[j, 1, lane] = (sub_flat[alphabet_size - 1] if t == alphabet_size - 1
                               else mismatch_score)
    # Per lane, carried along a row: diagonal H, left H, D, row maximum and its column, and
    # the row's match code.
    state = np.full((6, LANES), neg)
    query_offset = np.empty(LANES, dtype=np.int32)
    best = np.full(LANES, np.int32(0) if local else np.int32(NEG_INF), dtype=np.int32)
    best_i = np.zeros(LANES, dtype=np.int64)
    best_j = np.zeros(LANES, dtype=np.int64)
    for j in range(cols + 1):
        border = border_score(j, go, ge, mode, fts)
        for lane in range(LANES):
            work[j, 0, lane] = border
    for i in range(1, rows + 1):
        if not two_valued:
            for lane in range(LANES):
                query_offset[lane] = np.int32(query_lanes[i - 1, lane]) * np.int32(alphabet_size)
            for j in range(cols):
                for lane in range(LANES):
                    seq[j, 1, lane] = sub_flat[query_offset[lane] + target_lanes[j, lane]]
        border = border_score(i, go, ge, mode, fqs)
        previous_border = border_score(i - 1, go, ge, mode, fqs)
        for lane in range(LANES):
            state[0, lane] = previous_border
            state[1, lane] = border
            state[2, lane] = neg
            state[3, lane] = lowest
            state[4, lane] = 0
            state[5, lane] = match_code[query_lanes[i - 1, lane]]
        for k in range(steps):
            j = STEP * k + 1
            at = ((i - 1) * steps + k) * (STEP // 2) * LANES  # tb_buffer offset of the step
            j0 = _as(j, go)
            j1 = _as(j + 1, go)
            j2 = _as(j + 2, go)
            j3 = _as(j + 3, go)
            j4 = _as(j + 4, go)
            j5 = _as(j + 5, go)
            j6 = _as(j + 6, go)
            j7 = _as(j + 7, go)
            # diag and h_up trade places from one cell to the next: H[i-1, j] is the
            # diagonal of cell (i, j + 1).
            for lane in range(LANES):
                diag = state[0, lane]
                h = state[1, lane]
                d = state[2, lane]
                row_max = state[3, lane]
                row_col = state[4, lane]
                row_match = state[5, lane]
                h_up = work[j, 0, lane]
                s = match if row_match == seq[j - 1, 0, lane] else seq[j - 1, 1, lane]
                h, ins, d, row_max, row_col, n0 = _cell(
                    diag, h_up, work[j, 1, lane], h, d, s, row_max, row_col, j0, go, ge,
                    floor)
                work[j, 0, lane] = h
                work[j, 1, lane] = ins
                diag = work[j + 1, 0, lane]
                s = match if row_match == seq[j, 0, lane] else seq[j, 1, lane]
                h, ins, d, row_max, row_col, n1 = _cell(
                    h_up, diag, work[j + 1, 1, lane], h, d, s, row_max, row_col, j1, go,
                    ge, floor)
                work[j + 1, 0, lane] = h
                work[j + 1, 1, lane] = ins
                if tb_buffer is not None:
                    tb_buffer[np.uint64(at + lane)] = n0 | (n1 << np.uint8(4))
                h_up = work[j + 2, 0, lane]
                s = match if row_match == seq[j + 1, 0, lane] else seq[j + 1, 1, lane]
                h, ins, d, row_max, row_col, n2 = _cell(
                    diag, h_up, work[j + 2, 1, lane], h, d, s, row_max, row_col, j2, go, ge,
                    floor)
                work[j + 2, 0, lane] = h
                work[j + 2, 1, lane] = ins
                diag = work[j + 3, 0, lane]
                s = match if row_match == seq[j + 2, 0, lane] else seq[j + 2, 1, lane]
                h, ins, d, row_max, row_col, n3 = _cell(
                    h_up, diag, work[j + 3, 1, lane], h, d, s, row_max, row_col, j3, go,
                    ge, floor)
                work[j + 3, 0, lane] = h
                work[j + 3, 1, lane] = ins
                if tb_buffer is not None:
                    tb_buffer[np.uint64(at + 1 * LANES + lane)] = n2 | (n3 << np.uint8(4))
                h_up = work[j + 4, 0, lane]
                s = match if row_match == seq[j + 3, 0, lane] else seq[j + 3, 1, lane]
                h, ins, d, row_max, row_col, n4 = _cell(
                    diag, h_up, work[j + 4, 1, lane], h, d, s, row_max, row_col, j4, go, ge,
                    floor)
                work[j + 4, 0, lane] = h
                work[j + 4, 1, lane] = ins
                diag = work[j + 5, 0, lane]
                s = match if row_match == seq[j + 4, 0, lane] else seq[j + 4, 1, lane]
                h, ins, d, row_max, row_col, n5 = _cell(
                    h_up, diag, work[j + 5, 1, lane], h, d, s, row_max, row_col, j5, go,
                    ge, floor)
                work[j + 5, 0, lane] = h
                work[j + 5, 1, lane] = ins
                if tb_buffer is not None:
                    tb_buffer[np.uint64(at + 2 * LANES + lane)] = n4 | (n5 << np.uint8(4))
                h_up = work[j + 6, 0, lane]
                s = match if row_match == seq[j + 5, 0, lane] else seq[j + 5, 1, lane]
                h, ins, d, row_max, row_col, n6 = _cell(
                    diag, h_up, work[j + 6, 1, lane], h, d, s, row_max, row_col, j6, go, ge,
                    floor)
                work[j + 6, 0, lane] = h
                work[j + 6, 1, lane] = ins
                diag = work[j + 7, 0, lane]
                s = match if row_match == seq[j + 6, 0, lane] else seq[j + 6, 1, lane]
                h, ins, d, row_max, row_col, n7 = _cell(
                    h_up, diag, work[j + 7, 1, lane], h, d, s, row_max, row_col, j7, go,
                    ge, floor)
                work[j + 7, 0, lane] = h
                work[j + 7, 1, lane] = ins
                if tb_buffer is not None:
                    tb_buffer[np.uint64(at + 3 * LANES + lane)] = n6 | (n7 << np.uint8(4))
                state[0, lane] = diag
                state[1, lane] = h
                state[2, lane] = d
                state[3, lane] = row_max
                state[4, lane] = row_col
        for lane in range(LANES):
            m = query_lengths[lane]
            n = target_lengths[lane]
            if i > m:
                continue
            if local:
                if state[3, lane] > best[lane]:
                    best[lane] = state[3, lane]
                    best_i[lane] = i
                    best_j[lane] = state[4, lane]
            elif corner:
                if i == m:
                    best[lane], best_i[lane], best_j[lane] = work[n, 0, lane], i, n
            elif fte and i == m:
                for j in range(1, n + 1):
                    if work[j, 0, lane] > best[lane]:
                        best[lane], best_i[lane], best_j[lane] = work[j, 0, lane], i, j
            elif fqe and work[n, 0, lane] > best[lane]:
                best[lane], best_i[lane], best_j[lane] = work[n, 0, lane], i, n
    if tb_buffer is not None:
        return best, best_i, best_j, tb_buffer[:rows * cols // 2 * LANES].reshape(
            (rows * cols // 2, LANES))
    return best, best_i, best_j, np.empty((0, LANES), dtype=np.uint8)


def two_valued(sub: np.ndarray) -> bool:
    """Whether the lanes score ``sub`` by one compare a cell (a match/mismatch matrix, see
    :func:`match_codes`) rather than a gather of every lane's score."""
    _, match, mismatch = match_codes(sub)
    return bool(match != mismatch)


@njit(cache=True)
def match_codes(sub):
    """(match_code, match_score, mismatch_score) of :func:`fill_lanes` (and of the
    wavefront, :mod:`gpualign_df.kernels.cpu_wave`).

    A matrix whose off-diagonal entries all equal ``mismatch`` and whose diagonal entries are
    ``match`` or ``mismatch`` is two-valued: ``match_code[a] = a`` where ``sub[a, a]`` is the
    match score, else -1 (also for the padding code). Otherwise every code is -1 and the two
    scores are equal (the fill then gathers every row's scores).
    """
    size = sub.shape[0]
    match_code = np.full(size + 1, -1, dtype=np.int16)
    match = sub[0, 0]
    for a in range(size):
        match = max(match, sub[a, a])
    mismatch = sub[0, 1] if size > 1 else match - 1
    for a in range(size):
        for b in range(size):
            if a != b and sub[a, b] != mismatch:
                return match_code, 0, 0
        if sub[a, a] != match and sub[a, a] != mismatch:
            return match_code, 0, 0
    if match == mismatch:
        return match_code, 0, 0
    for a in range(size):
        if sub[a, a] == match:
            match_code[a] = a
    return match_code, match, mismatch


@njit(cache=True)
def _score_bound(largest, rows, cols, go, ge):
    """``Scoring.max_abs_score`` for a group of these padded dimensions."""
    return largest * min(rows, cols) + go + (rows + cols) * ge + go


def align_lane_groups(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                      pair_target, groups, sub, concrete, go, ge, mode, fqs, fqe, fts, fte,
                      traceback, op_offsets, ops, score, query_start, query_end, target_start,
                      target_end, op_counts, narrow_limit, control, slot):
    """Align groups of pairs (``groups[g, lane]`` = pair index, -1 for an unused lane), one
    group after another; callers run several calls on threads (the kernel releases the GIL).

    Every pair in a group has non-empty sequences. Outputs, ``control`` and ``slot`` as
    :func:`cpu.align_pairs` (progress and the stop flag are checked once per group). A group
    runs in int16 when its cell bound is below ``narrow_limit``, else in int32.

    Python threads rather than a numba ``prange``: compiling a parallel loop re-optimises
    every function it calls, and with the four large specialisations of :func:`fill_lanes`
    that nearly doubled the first-call compile time (18 s against 10 s on a 2-core machine);
    and numba's ``workqueue`` threading layer aborts the process when two threads enter a
    parallel region at once.
    """
    _align_groups(groups, 0, len(groups), query_codes, query_offsets, target_codes,
                  target_offsets, pair_query, pair_target, *_tables(sub), concrete, go, ge, mode,
                  fqs, fqe, fts, fte, traceback, op_offsets, ops, score, query_start, query_end,
                  target_start, target_end, op_counts, narrow_limit, control, slot)


@njit(cache=True)
def _tables(sub):
    """(sub_flat, narrow_sub_flat, largest |entry|, *match_codes(sub)) for
    :func:`_align_groups`: ``sub`` with one extra target code for padding columns, scored
    PADDING_SCORE against everything (NARROW_PADDING_SCORE in the table of the int16 fill,
    used where every entry fits int16)."""
    size = sub.shape[0]
    sub_flat = np.full(size * (size + 1), PADDING_SCORE, dtype=np.int32)
    narrow_sub_flat = np.full(size * (size + 1), NARROW_PADDING_SCORE, dtype=np.int32)
    largest = 0
    for a in range(size):
        for b in range(size):
            sub_flat[a * (size + 1) + b] = sub[a, b]
            narrow_sub_flat[a * (size + 1) + b] = sub[a, b]
            largest = max(largest, abs(sub[a, b]))
    match_code, match_score, mismatch_score = match_codes(sub)
    return sub_flat, narrow_sub_flat, largest, match_code, match_score, mismatch_score


@njit(cache=True, nogil=True)
def _align_groups(groups, start, stop, query_codes, query_offsets, target_codes, target_offsets,
                  pair_query, pair_target, sub_flat, narrow_sub_flat, largest, match_code,
                  match_score, mismatch_score, concrete, go, ge, mode, fqs, fqe, fts, fte,
                  traceback, op_offsets, ops, score, query_start, query_end, target_start,
                  target_end, op_counts, narrow_limit, control, slot):
    """Align the pairs of ``groups[start:stop]``."""
    alphabet_size = match_code.shape[0]
    padding_code = alphabet_size - 1
    tb_buffer = np.empty(0, dtype=np.uint8)
    for g in range(start, stop):
        if control[0] != 0:
            return
        query_lengths = np.ones(LANES, dtype=np.int64)
        target_lengths = np.ones(LANES, dtype=np.int64)
        for lane in range(LANES):
            p = groups[g, lane]
            if p >= 0:
                query_lengths[lane] = (query_offsets[pair_query[p] + 1]
                                       - query_offsets[pair_query[p]])
                target_lengths[lane] = (target_offsets[pair_target[p] + 1]
                                        - target_offsets[pair_target[p]])
        rows = query_lengths.max()
        cols = target_lengths.max()
        cols += -cols % STEP  # the fill takes STEP columns a step
        query_lanes = np.zeros((rows, LANES), dtype=np.uint8)
        target_lanes = np.full((cols, LANES), padding_code, dtype=np.uint8)
        for lane in range(LANES):
            p = groups[g, lane]
            if p >= 0:
                q0 = query_offsets[pair_query[p]]
                t0 = target_offsets[pair_target[p]]
                for k in range(query_lengths[lane]):
                    query_lanes[k, lane] = query_codes[q0 + k]
                for k in range(target_lengths[lane]):
                    target_lanes[k, lane] = target_codes[t0 + k]
        if traceback and tb_buffer.shape[0] < rows * cols // 2 * LANES:
            tb_buffer = np.empty(rows * cols // 2 * LANES, dtype=np.uint8)
        # Four specialisations: int16 or int32, with or without traceback (None).
        # (cols bounds the int16 column of the local row maximum)
        narrow = max(_score_bound(largest, rows, cols, go, ge), cols) < narrow_limit
        if narrow and traceback:
            best, best_i, best_j, tb = fill_lanes(
                query_lanes, target_lanes, query_lengths, target_lengths, narrow_sub_flat,
                alphabet_size, match_code, match_score, mismatch_score, np.int16(NARROW_NEG), go,
                ge, mode, fqs, fqe, fts, fte, tb_buffer)
        elif narrow:
            best, best_i, best_j, tb = fill_lanes(
                query_lanes, target_lanes, query_lengths, target_lengths, narrow_sub_flat,
                alphabet_size, match_code, match_score, mismatch_score, np.int16(NARROW_NEG), go,
                ge, mode, fqs, fqe, fts, fte, None)
        elif traceback:
            best, best_i, best_j, tb = fill_lanes(
                query_lanes, target_lanes, query_lengths, target_lengths, sub_flat,
                alphabet_size, match_code, match_score, mismatch_score, np.int32(NEG_INF), go, ge,
                mode, fqs, fqe, fts, fte, tb_buffer)
        else:
            best, best_i, best_j, tb = fill_lanes(
                query_lanes, target_lanes, query_lengths, target_lengths, sub_flat,
                alphabet_size, match_code, match_score, mismatch_score, np.int32(NEG_INF), go, ge,
                mode, fqs, fqe, fts, fte, None)
        stride = cols // 2
        for lane in range(LANES):
            p = groups[g, lane]
            if p < 0:
                continue
            score[p] = best[lane]
            query_end[p] = best_i[lane]
            target_end[p] = best_j[lane]
            if traceback:
                query = query_codes[query_offsets[pair_query[p]]:query_offsets[pair_query[p] + 1]]
                target = target_codes[target_offsets[pair_target[p]]:
                                      target_offsets[pair_target[p] + 1]]
                begin = op_offsets[p]
                size = query_lengths[lane] + target_lengths[lane]
                start_i, start_j, count = trace_back(query, target, tb, lane, stride, best_i[lane],
                                                     best_j[lane], mode, fqs, fts, concrete,
                                                     ops[begin:begin + size])
                query_start[p] = start_i
                target_start[p] = start_j
                op_counts[p] = count
        for lane in range(LANES):
            if groups[g, lane] >= 0:
                control[1 + slot] += query_lengths[lane] * target_lengths[lane]
