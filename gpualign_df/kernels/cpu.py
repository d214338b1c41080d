"""CPU engine: Gotoh affine-gap dynamic programming in numba, with 4-bit traceback.

The recurrences and tie-breaking rules below are the contract that every engine (this
one, the CUDA kernels, the CUDA simulator) implements bit for bit.

Recurrences (query = rows ``i``, target = columns ``j``; ``go``/``ge`` positive costs)::

    I[i,j] = max(H[i-1,j] - go, I[i-1,j] - ge)     # residue in the query only (CIGAR I)
    D[i,j] = max(H[i,j-1] - go, D[i,j-1] - ge)     # residue in the target only (CIGAR D)
    H[i,j] = max(H[i-1,j-1] + s(q[i-1], t[j-1]), I[i,j], D[i,j] [, 0 if local])

Tie-breaking (documented in the README):

* H: diagonal before I before D; in local mode a cell whose best value is <= 0 is 0 and
  starts the alignment (so a local alignment never begins with a zero-scoring prefix).
* I and D: opening a gap wins a tie against extending one.
* End cell: the highest-scoring candidate; ties go to the smallest query end, then the
  smallest target end (row-major first). Local: every cell, and a best score of 0 gives
  the empty alignment at (0, 0). Semi-global: the last row (target end free) and/or the
  last column (query end free), border cells excluded (parasail's convention); global
  and semi-global without free ends: the corner cell.

Traceback nibble per cell: bits 0-1 source of H (0 start, 1 diagonal, 2 I, 3 D), bit 2
``I`` extends ``I[i-1,j]``, bit 3 ``D`` extends ``D[i,j-1]``. A diagonal step is ``=`` when both
residues are the same concrete residue (``concrete[code]``; never an ambiguity code or
wildcard such as N or X), ``X`` otherwise. Two cells per byte, rows padded
to whole bytes. Operations are emitted end to start as codes 0 ``=``, 1 ``X``, 2 ``I``, 3 ``D``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..scoring import MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, NEG_INF  # noqa: F401
from . import common

SRC_START, SRC_DIAG, SRC_INS, SRC_DEL = 0, 1, 2, 3
OP_MATCH, OP_MISMATCH, OP_INS, OP_DEL = 0, 1, 2, 3


@njit(cache=True, inline="always")
def border_score(index, go, ge, mode, free):
    """H on row 0 / column 0 at distance ``index`` from the corner."""
    if index == 0 or mode == MODE_LOCAL or (mode == MODE_SEMIGLOBAL and free):
        return 0
    return -(go + (index - 1) * ge)


@njit(cache=True, inline="always")
def fill_row(row_sub, target, columns, go, ge, local, h_row, i_row, h_left, tb, base, want_tb):
    """Row ``i`` of the DP over columns ``1..columns``, in place: the one copy of the cell
    recurrence and its tie-breaking, which every CPU fill runs.

    On entry ``h_row``/``i_row`` hold H and I of row ``i - 1`` (columns ``0..columns``), on
    return those of row ``i``; ``h_left`` is ``H[i, 0]`` (the border) and ``row_sub`` the
    substitution row of the query residue ``q[i-1]``. With ``want_tb`` the cells' nibbles go to
    ``tb[base + (j - 1) // 2, 0]`` (two per byte, low nibble first; a row of odd length
    ends in a half-filled byte).
    """
    diag = h_row[0]
    h_row[0] = h_left
    del_score = NEG_INF
    pending = 0
    for j in range(1, columns + 1):
        h_up = h_row[j]
        ins_open = h_up - go
        ins_ext = i_row[j] - ge
        nibble = 0
        if ins_ext > ins_open:
            ins_score = ins_ext
            nibble = 4
        else:
            ins_score = ins_open
        del_open = h_left - go
        del_ext = del_score - ge
        if del_ext > del_open:
            del_score = del_ext
            nibble |= 8
        else:
            del_score = del_open
        h = diag + row_sub[target[j - 1]]
        src = SRC_DIAG
        if ins_score > h:
            h = ins_score
            src = SRC_INS
        if del_score > h:
            h = del_score
            src = SRC_DEL
        if local and h <= 0:
            h = 0
            src = SRC_START
        diag = h_up
        h_row[j] = h
        i_row[j] = ins_score
        h_left = h
        if want_tb:
            nibble |= src
            if j & 1:
                pending = nibble
            else:
                tb[base + ((j - 1) >> 1), 0] = pending | (nibble << 4)
    if want_tb and (columns & 1):
        tb[base + (columns >> 1), 0] = pending


@njit(cache=True)
def fill_matrix(query, target, sub, go, ge, mode, fqs, fqe, fts, fte, tb, h_row, i_row, control,
                slot, every, h_saved, i_saved):
    """Fill the DP matrix of one pair; return (score, query_end, target_end).

    ``tb`` is the traceback buffer (``m * ((n + 1) // 2)`` x 1 bytes) or an empty array for
    a score-only fill. ``h_row``/``i_row`` are scratch rows of length ``n + 1``.
    ``control`` is shared with the thread that waits for the work (see
    :func:`align_pairs`): after each row the fill adds the row's cells to
    ``control[1 + slot]`` and stops early (its result then meaningless) once ``control[0]``
    is set, so one long pair reports progress and can be interrupted.

    With ``every > 0`` the fill also keeps checkpoint rows for a linear-space traceback
    (:mod:`gpualign_df.kernels.cpu_linear`): H and I of rows ``0, every, 2 * every, ... < m``
    go to ``h_saved[k]``/``i_saved[k]`` for row ``k * every`` (``(m + every - 1) // every``
    rows of ``n + 1`` int32 each); ``every == 0`` keeps none (empty arrays).
    """
    m = query.shape[0]
    n = target.shape[0]
    want_tb = tb.shape[0] > 0
    stride = (n + 1) // 2
    for j in range(n + 1):
        h_row[j] = border_score(j, go, ge, mode, fts)
        i_row[j] = NEG_INF
    if every > 0 and m > 0:
        h_saved[0, :] = h_row
        i_saved[0, :] = i_row
    best = NEG_INF
    best_i = m
    best_j = n
    local = mode == MODE_LOCAL
    if local:
        best, best_i, best_j = 0, 0, 0
    fqe = fqe and mode == MODE_SEMIGLOBAL
    fte = fte and mode == MODE_SEMIGLOBAL
    for i in range(1, m + 1):
        fill_row(sub[query[i - 1]], target, n, go, ge, local, h_row, i_row,
                 border_score(i, go, ge, mode, fqs), tb, (i - 1) * stride, want_tb)
        control[1 + slot] += n
        if control[0] != 0:
            return best, best_i, best_j
        if every > 0 and i % every == 0 and i < m:
            h_saved[i // every, :] = h_row
            i_saved[i // every, :] = i_row
        # End-cell candidates of this row, found after the row so the cell loop stays lean;
        # rows come in ascending order, so a strictly better score alone replaces the best.
        if local or (fte and i == m):
            row_best, row_j = _row_maximum(h_row, n)
            if row_best > best:
                best, best_i, best_j = row_best, i, row_j
        elif fqe and h_row[n] > best:
            best, best_i, best_j = h_row[n], i, n
    if mode == MODE_GLOBAL or (mode == MODE_SEMIGLOBAL and not (fqe or fte)):
        best, best_i, best_j = h_row[n], m, n
    elif mode == MODE_SEMIGLOBAL and (m == 0 or n == 0):
        best, best_i, best_j = _empty_semiglobal(m, n, go, ge, fqs, fqe, fts, fte)
    return best, best_i, best_j


@njit(cache=True, inline="always")
def _row_maximum(h_row, n):
    """(maximum of h_row[1..n], its first position)."""
    value = NEG_INF
    for j in range(1, n + 1):
        value = max(value, h_row[j])
    for j in range(1, n + 1):
        if h_row[j] == value:
            return value, j
    return value, 0


_empty_semiglobal = njit(cache=True)(common.empty_semiglobal)


@njit(cache=True)
def trace_back(query, target, tb, lane, stride, end_i, end_j, mode, fqs, fts, concrete, ops):
    """Walk the traceback from (end_i, end_j); write op codes end to start into ``ops``.

    ``tb[row * stride + (j - 1) // 2, lane]`` holds the nibbles of cells (i, j) of one pair.
    Returns (query_start, target_start, number_of_ops).
    """
    i, j, _, count, _ = walk(query, target, tb, lane, stride, 0, end_i, end_j, SRC_DIAG, mode,
                             fqs, fts, concrete, ops, 0)
    return i, j, count


#: Lanes and rows a lane of :mod:`gpualign_df.kernels.cpu_wave`'s wavefront (here, so that
#: the walk reads its layout).
WAVE_LANES, WAVE_ROWS = 16, 4


@njit(cache=True, inline="always")
def wave_nibble(n, i, j):
    """Where the nibble of cell (i, j) of an ``m x n`` wavefront fill is: (row, lane, shift)
    of its byte in ``tb``. Row ``i`` is row ``r`` of lane ``k`` of its group of
    ``WAVE_LANES * WAVE_ROWS``, which computes column j on step ``j - 1 + k``."""
    steps = n + WAVE_LANES - 1
    group, within = divmod(i - 1, WAVE_LANES * WAVE_ROWS)
    lane, r = divmod(within, WAVE_ROWS)
    return (group * steps + j - 1 + lane) * (WAVE_ROWS // 2) + (r >> 1), lane, 4 * (r & 1)


@njit(cache=True, inline="always")
def walk(query, target, tb, lane, stride, top, i, j, state, mode, fqs, fts, concrete, ops,
         count, wave=False):
    """The traceback walk from cell (i, j) in ``state`` (``SRC_DIAG`` for "in H", or
    ``SRC_INS``/``SRC_DEL`` inside a gap) over the rows ``top + 1 ..`` that ``tb`` holds (row
    ``r`` at ``tb[(r - top - 1) * stride + (j - 1) // 2, lane]``; with ``wave``, a whole
    matrix in the layout of :mod:`gpualign_df.kernels.cpu_wave`, ``stride`` the target's
    length); op codes go, end to start, to ``ops[count:]``.

    Every step reads the nibble of the cell it stands on, so the walk needs row ``r`` while
    at row ``r``. Returns (i, j, state, count, done): ``done`` once the start of the
    alignment is reached; else the walk stands on row ``top`` (> 0), whose nibbles ``tb``
    does not hold, and goes on from (i, j, state) over the rows above. With ``top == 0`` (the
    whole matrix) it always runs to the start: row 0 and column 0 are only ever reached in H
    (a gap on row 1 or column 1 never extends one from the border).
    """
    while True:
        if state == SRC_DIAG and (i == 0 or j == 0):
            if mode != MODE_LOCAL:
                if i == 0 and (mode == MODE_GLOBAL or not fts):
                    for _ in range(j):
                        ops[count] = OP_DEL
                        count += 1
                    j = 0
                elif j == 0 and (mode == MODE_GLOBAL or not fqs):
                    for _ in range(i):
                        ops[count] = OP_INS
                        count += 1
                    i = 0
            return i, j, state, count, True
        if i == top:
            return i, j, state, count, False
        if wave:
            index, column, shift = wave_nibble(stride, i, j)
        else:
            index, column, shift = (i - 1 - top) * stride + ((j - 1) >> 1), lane, 4 * (
                (j - 1) & 1)
        nibble = (np.int64(tb[index, column]) >> shift) & 15
        if state == SRC_DIAG:
            src = nibble & 3
            if src == SRC_START:
                return i, j, state, count, True
            if src == SRC_DIAG:
                same = query[i - 1] == target[j - 1] and concrete[query[i - 1]]
                ops[count] = OP_MATCH if same else OP_MISMATCH
                count += 1
                i -= 1
                j -= 1
            else:
                state = src
        elif state == SRC_INS:
            ops[count] = OP_INS
            count += 1
            i -= 1
            if not (nibble & 4):
                state = SRC_DIAG
        else:
            ops[count] = OP_DEL
            count += 1
            j -= 1
            if not (nibble & 8):
                state = SRC_DIAG


@njit(cache=True, inline="always")
def pair_sequences(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                   pair_target, p):
    """(query, target) codes of pair ``p``: slices ``codes[offsets[k]:offsets[k + 1]]``."""
    qi = pair_query[p]
    ti = pair_target[p]
    return (query_codes[query_offsets[qi]:query_offsets[qi + 1]],
            target_codes[target_offsets[ti]:target_offsets[ti + 1]])


@njit(cache=True, nogil=True)
def align_pairs(query_codes, query_offsets, target_codes, target_offsets, pair_query, pair_target,
                order, sub, concrete, go, ge, mode, fqs, fqe, fts, fte, traceback, op_offsets, ops,
                score, query_start, query_end, target_start, target_end, op_counts, control,
                slot):
    """Align pairs ``(pair_query[p], pair_target[p])`` for every ``p`` in ``order``, one
    after another (callers run several calls on threads: the GIL is released).

    Sequences are slices ``codes[offsets[k]:offsets[k+1]]``. With ``traceback`` the ops of
    pair ``p`` land, end to start, in ``ops[op_offsets[p]:]`` (room for ``m + n`` ops).
    ``control[1 + slot]`` counts the cells done; a nonzero ``control[0]`` stops the work
    within one DP row (the outputs are then incomplete).
    """
    for k in range(order.shape[0]):
        if control[0] != 0:
            return
        p = order[k]
        query, target = pair_sequences(query_codes, query_offsets, target_codes,
                                       target_offsets, pair_query, pair_target, p)
        m = query.shape[0]
        n = target.shape[0]
        h_row = np.empty(n + 1, dtype=np.int32)
        i_row = np.empty(n + 1, dtype=np.int32)
        if traceback:
            tb = np.empty((m * ((n + 1) // 2), 1), dtype=np.uint8)
        else:
            tb = np.empty((0, 1), dtype=np.uint8)
        no_rows = np.empty((0, 0), dtype=np.int32)  # no checkpoints
        best, end_i, end_j = fill_matrix(query, target, sub, go, ge, mode, fqs, fqe, fts, fte,
                                         tb, h_row, i_row, control, slot, 0, no_rows, no_rows)
        score[p] = best
        query_end[p] = end_i
        target_end[p] = end_j
        if traceback and control[0] == 0:
            start_i, start_j, count = trace_back(query, target, tb, 0, (n + 1) // 2, end_i, end_j,
                                                 mode, fqs, fts, concrete,
                                                 ops[op_offsets[p]:op_offsets[p] + m + n])
            query_start[p] = start_i
            target_start[p] = start_j
            op_counts[p] = count


_digits = njit(cache=True)(common.digits)


@njit(cache=True)
def _run_length(ops, begin, count, merge_matches, run_ops, run_lengths):
    """Run-length encode ops stored end to start; return the number of runs (start to end)."""
    runs = 0
    k = count - 1
    while k >= 0:
        op = ops[begin + k]
        if merge_matches and op == OP_MISMATCH:
            op = OP_MATCH
        length = 0
        while k >= 0:
            nxt = ops[begin + k]
            if merge_matches and nxt == OP_MISMATCH:
                nxt = OP_MATCH
            if nxt != op:
                break
            length += 1
            k -= 1
        run_ops[runs] = op
        run_lengths[runs] = length
        runs += 1
    return runs


@njit(cache=True)
def build_cigars(ops, op_offsets, op_counts, valid, query_start, query_end, query_length,
                 merge_matches, soft_clip):
    """CIGAR characters + offsets and the statistics columns from ops stored end to start.

    Returns (chars, offsets, matches, mismatches, gap_opens, gaps, length). ``merge_matches``
    writes ``M`` for ``=``/``X``; ``soft_clip`` adds ``S`` for the unaligned query ends.
    """
    pairs = op_counts.shape[0]
    matches = np.zeros(pairs, dtype=np.int32)
    mismatches = np.zeros(pairs, dtype=np.int32)
    gap_opens = np.zeros(pairs, dtype=np.int32)
    gaps = np.zeros(pairs, dtype=np.int32)
    offsets = np.zeros(pairs + 1, dtype=np.int64)
    symbols = np.array([ord("="), ord("X"), ord("I"), ord("D")], dtype=np.uint8)
    if merge_matches:
        symbols[0] = ord("M")
    longest = 1
    for p in range(pairs):
        longest = max(longest, op_counts[p])
    run_ops = np.empty(longest, dtype=np.uint8)
    run_lengths = np.empty(longest, dtype=np.int64)
    for p in range(pairs):  # pass 1: statistics and CIGAR sizes
        size = 0
        if valid[p]:
            runs = _run_length(ops, op_offsets[p], op_counts[p], False, run_ops, run_lengths)
            for r in range(runs):
                op = run_ops[r]
                if op == OP_MATCH:
                    matches[p] += run_lengths[r]
                elif op == OP_MISMATCH:
                    mismatches[p] += run_lengths[r]
                else:
                    gap_opens[p] += 1
                    gaps[p] += run_lengths[r]
            runs = _run_length(ops, op_offsets[p], op_counts[p], merge_matches, run_ops, run_lengths)
            for r in range(runs):
                size += _digits(run_lengths[r]) + 1
            if soft_clip:
                if query_start[p] > 0:
                    size += _digits(query_start[p]) + 1
                if query_length[p] - query_end[p] > 0:
                    size += _digits(query_length[p] - query_end[p]) + 1
        offsets[p + 1] = offsets[p] + size
    chars = np.empty(offsets[pairs], dtype=np.uint8)
    for p in range(pairs):  # pass 2: characters
        if not valid[p]:
            continue
        pos = offsets[p]
        runs = _run_length(ops, op_offsets[p], op_counts[p], merge_matches, run_ops, run_lengths)
        if soft_clip and query_start[p] > 0:
            pos = write_run(chars, pos, query_start[p], ord("S"))
        for r in range(runs):
            pos = write_run(chars, pos, run_lengths[r], symbols[run_ops[r]])
        if soft_clip and query_length[p] - query_end[p] > 0:
            pos = write_run(chars, pos, query_length[p] - query_end[p], ord("S"))
    length = matches + mismatches + gaps
    return chars, offsets, matches, mismatches, gap_opens, gaps, length


#: :func:`gpualign_df.kernels.common.run_writer_of` for the CPU engine.
write_run = njit(cache=True, inline="always")(common.run_writer_of(_digits))


@njit(cache=True)
def gather_ops(batch, batch_offsets, batch_ops, op_counts, op_offsets, ops):
    """Copy each pair's ops from its batch buffer (``batch_ops`` at ``batch_offsets``) to
    its place in the job's buffer (``ops`` at ``op_offsets``)."""
    for k in range(batch.shape[0]):
        p = batch[k]
        source = batch_offsets[k]
        target = op_offsets[p]
        for c in range(op_counts[p]):
            ops[target + c] = batch_ops[source + c]
