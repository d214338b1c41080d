"""CPU engine, inter-pair SIMD path: ``LANES`` pairs in lockstep, the lane innermost.

Same recurrences, tie-breaks and traceback nibbles as :mod:`gpualign_df.kernels.cpu` (whose
``trace_back`` walks the lanes' traceback): only the memory layout differs. Residues of a
group are interleaved ``[position, lane]`` so that the lane loop compiles to vector
instructions. Every array the cell loop touches is allocated inside ``fill_lanes``: numba
marks its allocations as not aliasing, which is what lets LLVM vectorise the loop. Cells
beyond a lane's own lengths are computed on padding and never read.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .cpu import MODE_GLOBAL, MODE_LOCAL, NEG_INF, _border, trace_back

LANES = 32
#: Pairs longer than this on either side take the one-pair path.
MAX_LANE_LENGTH = 2048
#: Substitution score of padding cells (beyond a lane's target): far below any real cell.
PADDING_SCORE = -(1 << 19)
#: Lane groups need every cell below this in magnitude (row keys hold ``h << 12``).
LANE_SCORE_LIMIT = 1 << 18
#: Groups whose cell bound (:func:`_score_bound`) is below this run in int16
#: (:func:`fill_lanes_narrow`); read at each call, so a test may set it to 0.
NARROW_SCORE_LIMIT = 1 << 13
#: int16 sentinel for I and D before the first row / column (see :func:`fill_lanes_narrow`).
NARROW_NEG = -(1 << 14)
#: Columns per step of the narrow fill's cell loop (target columns are padded to a multiple).
STEP = 4
#: int16 substitution score of padding cells.
NARROW_PADDING_SCORE = -(1 << 13)


def lane_eligible(max_abs_score: int, gap_open: int) -> bool:
    """Whether a job's pairs may use the SIMD lanes (see :func:`fill_lanes`)."""
    return max_abs_score < LANE_SCORE_LIMIT and gap_open >= 1


@njit(cache=True)
def fill_lanes(query_lanes, target_lanes, query_lengths, target_lengths, sub_flat, alphabet_size,
               go, ge, mode, fqs, fqe, fts, fte, want_tb):
    """Fill the DP matrices of ``LANES`` pairs (see :func:`cpu.fill_matrix`).

    Returns (best, best_i, best_j, tb) with ``tb[(i-1) * stride + (j-1) // 2, lane]``.

    Local mode finds each row's best cell inside the vectorised loop as the maximum of
    ``(h << 12) | (4095 - j)`` (highest score, then smallest column), which needs
    ``|h| < 2**19``, columns < 4096 and ``go >= 1`` (so that padding columns, scored
    ``PADDING_SCORE`` through an extra target code, always stay below a real cell); ``lane_eligible`` checks this.
    Semi-global end cells are read after each row, outside the vectorised loop.
    """
    rows = query_lanes.shape[0]
    cols = target_lanes.shape[0]
    stride = (cols + 1) // 2
    local = mode == MODE_LOCAL
    corner = mode == MODE_GLOBAL or not (local or fqe or fte)
    go32 = np.int32(go)
    ge32 = np.int32(ge)
    floor = np.int32(0) if local else np.int32(NEG_INF)
    tb = np.empty((rows * stride if want_tb else 0, LANES), dtype=np.uint8)
    h_row = np.empty((cols + 1, LANES), dtype=np.int32)
    i_row = np.full((cols + 1, LANES), np.int32(NEG_INF), dtype=np.int32)
    scores = np.empty((cols, LANES), dtype=np.int32)
    nibbles = np.zeros((cols + 1, LANES), dtype=np.uint8)
    diag = np.empty(LANES, dtype=np.int32)
    h_left = np.empty(LANES, dtype=np.int32)
    del_row = np.empty(LANES, dtype=np.int32)
    row_key = np.empty(LANES, dtype=np.int32)
    query_offset = np.empty(LANES, dtype=np.int32)
    best = np.full(LANES, np.int32(0) if local else np.int32(NEG_INF), dtype=np.int32)
    best_i = np.zeros(LANES, dtype=np.int64)
    best_j = np.zeros(LANES, dtype=np.int64)
    for j in range(cols + 1):
        border = _border(j, go, ge, mode, fts)
        for lane in range(LANES):
            h_row[j, lane] = border
    for i in range(1, rows + 1):
        for lane in range(LANES):
            query_offset[lane] = np.int32(query_lanes[i - 1, lane]) * np.int32(alphabet_size)
        for j in range(cols):
            for lane in range(LANES):
                scores[j, lane] = sub_flat[query_offset[lane] + target_lanes[j, lane]]
        border = np.int32(_border(i, go, ge, mode, fqs))
        previous_border = np.int32(_border(i - 1, go, ge, mode, fqs))
        for lane in range(LANES):
            diag[lane] = previous_border
            h_left[lane] = border
            del_row[lane] = np.int32(NEG_INF)
            row_key[lane] = np.int32(NEG_INF)
        for j in range(1, cols + 1):
            column_key = np.int32(4095 - j)
            for lane in range(LANES):
                h_up = h_row[j, lane]
                ins_open = h_up - go32
                ins_ext = i_row[j, lane] - ge32
                ins_extends = ins_ext > ins_open
                ins_score = max(ins_ext, ins_open)
                del_open = h_left[lane] - go32
                del_ext = del_row[lane] - ge32
                del_extends = del_ext > del_open
                del_score = max(del_ext, del_open)
                h = diag[lane] + scores[j - 1, lane]
                src = np.uint8(1) if h >= ins_score else np.uint8(2)
                h = max(h, ins_score)
                src = np.uint8(3) if del_score > h else src
                h = max(h, del_score)
                src = np.uint8(0) if h <= floor else src
                h = max(h, floor)
                row_key[lane] = max(row_key[lane], (h << 12) | column_key)
                diag[lane] = h_up
                h_row[j, lane] = h
                i_row[j, lane] = ins_score
                h_left[lane] = h
                del_row[lane] = del_score
                nibbles[j - 1, lane] = (src | (np.uint8(4) if ins_extends else np.uint8(0))
                                        | (np.uint8(8) if del_extends else np.uint8(0)))
        if want_tb:
            base = (i - 1) * stride
            for k in range(stride):
                for lane in range(LANES):
                    tb[base + k, lane] = nibbles[2 * k, lane] | (nibbles[2 * k + 1, lane] << 4)
        for lane in range(LANES):
            m = query_lengths[lane]
            n = target_lengths[lane]
            if i > m:
                continue
            if local:
                if (row_key[lane] >> 12) > best[lane]:
                    best[lane] = row_key[lane] >> 12
                    best_i[lane] = i
                    best_j[lane] = 4095 - (row_key[lane] & 4095)
            elif corner:
                if i == m:
                    best[lane], best_i[lane], best_j[lane] = h_row[n, lane], i, n
            elif fte and i == m:
                for j in range(1, n + 1):
                    if h_row[j, lane] > best[lane]:
                        best[lane], best_i[lane], best_j[lane] = h_row[j, lane], i, j
            elif fqe and h_row[n, lane] > best[lane]:
                best[lane], best_i[lane], best_j[lane] = h_row[n, lane], i, n
    return best, best_i, best_j, tb


@njit(cache=True, inline="always")
def _narrow_cell(diag, h_up, i_up, h_left, d_left, s, row_max, row_col, j, go, ge, floor):
    """One cell of :func:`fill_lanes_narrow` in int16 (scalars only, so that it inlines into
    the vectorised loop): (H, I, D, row maximum, its first column, nibble)."""
    ins_open = np.int16(h_up - go)
    ins_ext = np.int16(i_up - ge)
    ins_extends = ins_ext > ins_open
    ins_score = max(ins_ext, ins_open)
    del_open = np.int16(h_left - go)
    del_ext = np.int16(d_left - ge)
    del_extends = del_ext > del_open
    del_score = max(del_ext, del_open)
    h = np.int16(diag + s)
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
def fill_lanes_narrow(query_lanes, target_lanes, query_lengths, target_lengths, sub_flat,
                      alphabet_size, match_code, match_score, mismatch_score, go, ge, mode, fqs,
                      fqe, fts, fte, want_tb):
    """:func:`fill_lanes` in int16, for groups whose :func:`_score_bound` is below
    ``NARROW_SCORE_LIMIT``; ``target_lanes`` has an even number of columns.

    With that bound ``B < 2**13`` (so ``go, ge <= B / 2``) every H lies in
    ``[-(B + 2 go), B]`` (a gap-only path reaches any cell, padding included), every I, D
    and candidate in ``[-3 B, 2 B]``, so nothing wraps; ``NARROW_NEG - ge`` stays below every
    real I and D candidate (as ``NEG_INF`` does in int32), and ``NARROW_PADDING_SCORE < -B``
    keeps padding columns below a real cell in local mode. The local row maximum is tracked
    as a running maximum with a select of its first column.
    """
    rows = query_lanes.shape[0]
    cols = target_lanes.shape[0]
    stride = cols // 2
    local = mode == MODE_LOCAL
    corner = mode == MODE_GLOBAL or not (local or fqe or fte)
    go16 = np.int16(go)
    ge16 = np.int16(ge)
    floor = np.int16(0) if local else np.int16(-32768)
    # Score-only fills still write their nibbles, into one scratch row.
    tb = np.empty((rows * stride if want_tb else stride, LANES), dtype=np.uint8)
    h_row = np.empty((cols + 1, LANES), dtype=np.int16)
    i_row = np.full((cols + 1, LANES), np.int16(NARROW_NEG), dtype=np.int16)
    # s(q, t) = match_score where match_code[q] == t, else scores[j - 1] (gathered per row
    # from sub_flat, or once for a two-valued matrix, see :func:`_two_valued`).
    two_valued = match_score != mismatch_score
    targets = np.empty((cols, LANES), dtype=np.int16)
    scores = np.empty((cols, LANES), dtype=np.int16)
    for j in range(cols):
        for lane in range(LANES):
            t = target_lanes[j, lane]
            targets[j, lane] = t
            scores[j, lane] = (np.int16(NARROW_PADDING_SCORE) if t == alphabet_size - 1
                               else np.int16(mismatch_score))
    row_match = np.empty(LANES, dtype=np.int16)
    match16 = np.int16(match_score)
    diag = np.empty(LANES, dtype=np.int16)
    h_left = np.empty(LANES, dtype=np.int16)
    del_row = np.empty(LANES, dtype=np.int16)
    row_max = np.empty(LANES, dtype=np.int16)
    row_col = np.empty(LANES, dtype=np.int16)
    query_offset = np.empty(LANES, dtype=np.int32)
    best = np.full(LANES, np.int32(0) if local else np.int32(NEG_INF), dtype=np.int32)
    best_i = np.zeros(LANES, dtype=np.int64)
    best_j = np.zeros(LANES, dtype=np.int64)
    for j in range(cols + 1):
        border = np.int16(_border(j, go, ge, mode, fts))
        for lane in range(LANES):
            h_row[j, lane] = border
    for i in range(1, rows + 1):
        for lane in range(LANES):
            query_offset[lane] = np.int32(query_lanes[i - 1, lane]) * np.int32(alphabet_size)
            row_match[lane] = match_code[query_lanes[i - 1, lane]]
        if not two_valued:
            for j in range(cols):
                for lane in range(LANES):
                    scores[j, lane] = sub_flat[query_offset[lane] + target_lanes[j, lane]]
        border = np.int16(_border(i, go, ge, mode, fqs))
        previous_border = np.int16(_border(i - 1, go, ge, mode, fqs))
        for lane in range(LANES):
            diag[lane] = previous_border
            h_left[lane] = border
            del_row[lane] = np.int16(NARROW_NEG)
            row_max[lane] = np.int16(-32768)
            row_col[lane] = np.int16(0)
        base = (i - 1) * stride if want_tb else 0
        for k in range(cols // STEP):
            j = STEP * k + 1
            j0 = np.int16(j)
            j1 = np.int16(j + 1)
            j2 = np.int16(j + 2)
            j3 = np.int16(j + 3)
            for lane in range(LANES):
                d, h, dl, rm, rc = (diag[lane], h_left[lane], del_row[lane], row_max[lane],
                                    row_col[lane])
                qm = row_match[lane]
                h_up = h_row[j, lane]
                s = match16 if qm == targets[j - 1, lane] else scores[j - 1, lane]
                h, ins, dl, rm, rc, n0 = _narrow_cell(d, h_up, i_row[j, lane], h, dl, s,
                                                        rm, rc, j0, go16, ge16, floor)
                i_row[j, lane] = ins
                h_row[j, lane] = h
                d = h_up
                h_up = h_row[j + 1, lane]
                s = match16 if qm == targets[j, lane] else scores[j, lane]
                h, ins, dl, rm, rc, n1 = _narrow_cell(d, h_up, i_row[j + 1, lane], h, dl, s,
                                                        rm, rc, j1, go16, ge16, floor)
                i_row[j + 1, lane] = ins
                h_row[j + 1, lane] = h
                d = h_up
                h_up = h_row[j + 2, lane]
                s = match16 if qm == targets[j + 1, lane] else scores[j + 1, lane]
                h, ins, dl, rm, rc, n2 = _narrow_cell(d, h_up, i_row[j + 2, lane], h, dl, s,
                                                        rm, rc, j2, go16, ge16, floor)
                i_row[j + 2, lane] = ins
                h_row[j + 2, lane] = h
                d = h_up
                h_up = h_row[j + 3, lane]
                s = match16 if qm == targets[j + 2, lane] else scores[j + 2, lane]
                h, ins, dl, rm, rc, n3 = _narrow_cell(d, h_up, i_row[j + 3, lane], h, dl, s,
                                                        rm, rc, j3, go16, ge16, floor)
                i_row[j + 3, lane] = ins
                h_row[j + 3, lane] = h
                d = h_up
                tb[base + 2 * k, lane] = n0 | (n1 << np.uint8(4))
                tb[base + 2 * k + 1, lane] = n2 | (n3 << np.uint8(4))
                diag[lane], h_left[lane], del_row[lane], row_max[lane], row_col[lane] = (
                    d, h, dl, rm, rc)
        for lane in range(LANES):
            m = query_lengths[lane]
            n = target_lengths[lane]
            if i > m:
                continue
            if local:
                if row_max[lane] > best[lane]:
                    best[lane] = row_max[lane]
                    best_i[lane] = i
                    best_j[lane] = row_col[lane]
            elif corner:
                if i == m:
                    best[lane], best_i[lane], best_j[lane] = h_row[n, lane], i, n
            elif fte and i == m:
                for j in range(1, n + 1):
                    if h_row[j, lane] > best[lane]:
                        best[lane], best_i[lane], best_j[lane] = h_row[j, lane], i, j
            elif fqe and h_row[n, lane] > best[lane]:
                best[lane], best_i[lane], best_j[lane] = h_row[n, lane], i, n
    return best, best_i, best_j, tb


@njit(cache=True)
def _two_valued(sub):
    """(match_code, match_score, mismatch_score) of :func:`fill_lanes_narrow`.

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


@njit(cache=True, inline="always")
def _score_bound(largest, rows, cols, go, ge):
    """``Scoring.max_abs_score`` for a group of these padded dimensions."""
    return largest * min(rows, cols) + go + (rows + cols) * ge + go


def align_lane_groups(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                      pair_target, groups, sub, concrete, go, ge, mode, fqs, fqe, fts, fte, traceback,
                      op_offsets, ops, score, query_start, query_end, target_start, target_end,
                      op_counts):
    """Align groups of pairs (``groups[g, lane]`` = pair index, -1 for an unused lane).

    Every pair in a group has non-empty sequences. Outputs as :func:`cpu.align_pairs`. A group
    runs in int16 (:func:`fill_lanes_narrow`) when its cell bound is below
    ``NARROW_SCORE_LIMIT``, else in int32 (:func:`fill_lanes`).
    """
    _align_lane_groups(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                       pair_target, groups, sub, concrete, go, ge, mode, fqs, fqe, fts, fte,
                       traceback, op_offsets, ops, score, query_start, query_end, target_start,
                       target_end, op_counts, NARROW_SCORE_LIMIT)


@njit(cache=True, parallel=True)
def _align_lane_groups(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                       pair_target, groups, sub, concrete, go, ge, mode, fqs, fqe, fts, fte,
                       traceback, op_offsets, ops, score, query_start, query_end, target_start,
                       target_end, op_counts, narrow_limit):
    # One extra target code for padding columns, scored PADDING_SCORE against everything.
    alphabet_size = sub.shape[0] + 1
    padded_sub = np.full((sub.shape[0], alphabet_size), PADDING_SCORE, dtype=np.int32)
    padded_sub[:, :-1] = sub
    sub_flat = padded_sub.ravel()
    narrow_sub = np.full((sub.shape[0], alphabet_size), NARROW_PADDING_SCORE, dtype=np.int16)
    largest = 0
    for a in range(sub.shape[0]):
        for b in range(sub.shape[1]):
            narrow_sub[a, b] = sub[a, b]
            largest = max(largest, abs(sub[a, b]))
    narrow_sub_flat = narrow_sub.ravel()
    match_code, match_score, mismatch_score = _two_valued(sub)
    padding_code = sub.shape[0]
    for g in prange(groups.shape[0]):
        query_lengths = np.ones(LANES, dtype=np.int64)
        target_lengths = np.ones(LANES, dtype=np.int64)
        for lane in range(LANES):
            p = groups[g, lane]
            if p >= 0:
                query_lengths[lane] = query_offsets[pair_query[p] + 1] - query_offsets[pair_query[p]]
                target_lengths[lane] = (target_offsets[pair_target[p] + 1]
                                        - target_offsets[pair_target[p]])
        rows = query_lengths.max()
        cols = target_lengths.max()
        cols += -cols % STEP  # the narrow fill takes STEP columns a step
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
        if _score_bound(largest, rows, cols, go, ge) < narrow_limit:
            best, best_i, best_j, tb = fill_lanes_narrow(
                query_lanes, target_lanes, query_lengths, target_lengths, narrow_sub_flat,
                alphabet_size, match_code, match_score, mismatch_score, go, ge, mode, fqs, fqe,
                fts, fte, traceback)
        else:
            best, best_i, best_j, tb = fill_lanes(
                query_lanes, target_lanes, query_lengths, target_lengths, sub_flat,
                alphabet_size, go, ge, mode, fqs, fqe, fts, fte, traceback)
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
