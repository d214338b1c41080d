"""CUDA traceback: the fill kernels' traceback bits -> CIGAR runs and statistics (one thread
per pair), then runs -> CIGAR characters at offsets from a prefix sum (second kernel).

The walk is :func:`gpualign_df.kernels.cpu.trace_back` over the inter-task kernel's layout
(see :mod:`gpualign_df.kernels.inter`). Runs are stored end to start as
``length << 2 | op`` (op 0 ``=``/``M``, 1 ``X``, 2 ``I``, 3 ``D``).
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint8, uint32, uint64

from . import common, simulator
from ..scoring import MODE_GLOBAL, MODE_LOCAL
from .strip import STRIP_ROWS, lane_words, skewed_word_index

OP_MATCH, OP_MISMATCH, OP_INS, OP_DEL = 0, 1, 2, 3


digits = cuda.jit(device=True, inline=True)(common.digits)


@cuda.jit(device=True, inline=True)
def flush_run(runs, position, length, op, count, size, opens):
    """Store a finished CIGAR run (if any) at ``runs[position]``; returns the run count, the
    CIGAR's character count and the gap opens, updated."""
    if length > 0:
        runs[position] = uint32(length << 2 | op)
        count += 1
        size += digits(length) + 1
        if op >= OP_INS:
            opens += 1
    return count, size, opens


def _ballot_simulated(predicate, lane, lanes, scratch):
    """The simulator's warp ballot (it has none): through shared memory, a block being the
    warp."""
    cuda.syncthreads()
    scratch[lane] = 1 if predicate else 0
    cuda.syncthreads()
    mask = uint32(0)
    for k in range(lanes):
        if scratch[k] != 0:
            mask |= uint32(1) << uint32(k)
    return mask


@lru_cache(maxsize=None)
def _ballot(lanes: int):
    """``ballot(predicate, lane, lanes, scratch)``: the lanes (the first ``lanes`` of a
    warp) where ``predicate`` holds, a bit each."""
    if simulator():
        return _ballot_simulated
    mask = (1 << max(lanes, 1)) - 1

    @cuda.jit(device=True, inline=True)
    def ballot(predicate, lane, lanes, scratch):
        return cuda.ballot_sync(mask, predicate)

    return ballot


@cuda.jit(device=True, inline=True)
def trailing_ones(mask, limit):
    """Low bits of ``mask`` set in a row, at most ``limit`` (<= 32)."""
    first_clear = cuda.ffs(~mask)  # 1-based; 0: every bit set
    ones = int32(first_clear) - int32(1) if first_clear != 0 else int32(32)
    return min(ones, limit)


@lru_cache(maxsize=None)
def walk_functions(mode: int, fqs: bool, fts: bool, merge_matches: bool, skewed: bool,
                   lanes: int = 0, probes: int = 1,
                   grouped: tuple | None = None, wavefront: int = 0,
                   strip_rows: int = STRIP_ROWS):
    """``(steps, finish)`` device functions of the traceback walk for one mode / free-starts
    / CIGAR-style / layout combination, over the fill kernels' words
    (:func:`gpualign_df.kernels.strip.append_sign`: row ``r`` of a strip at bits ``4 * (7 -
    r)``; the grouped pair kernel's own source bits:
    :func:`~gpualign_df.kernels.pairs16.direction_bits`). H's source comes from two bits
    and there is no start bit: a local walk tracks H back from the score and stops where
    it is 0 (the CPU engine's source 0: a cell whose best is <= 0).

    ``steps`` walks from a cell and state until the alignment's start, or until it reaches
    row ``stop_row`` > 0 (the top of a block of rows whose words ``tb`` holds from
    ``b0``, rows counted from ``row0``: the linear-space traceback walks block by block);
    ``finish`` flushes the last run and counts the soft clips. The walk's state travels as
    one tuple: (i, j, state, value, runs, current op, run length, CIGAR characters,
    matches, mismatches, gap opens, gap columns). Word of (i, j): strip ``(i - row0 - 1)
    // 8``, row ``r = (i - row0 - 1) % 8``, at ``b0 + width * (strip * columns + j - 1)``;
    ``skewed`` (the band kernel's layout, :mod:`gpualign_df.kernels.band`): at ``b0 + strip
    * stride + j - 1 + r``, ``stride`` the :func:`~gpualign_df.kernels.strip.skewed_stride`
    of ``columns``; ``grouped`` = (lanes ``L``, rows ``R``, top-aligned, scores, piece
    ``P``) (the grouped pair kernel's layout of that class,
    :func:`gpualign_df.kernels.pairs16.pair_group_kernel`; ``scores``: the walk adds up the
    score of the path it takes, from 0 at the end cell, where that kernel left it,
    :func:`~gpualign_df.kernels.pairs16.walk_scores`; ``P``: steps a piece,
    :func:`~gpualign_df.kernels.pairs16.traceback_piece`): lane ``k = (i - row0 - 1) //
    R`` wrote the cell at step ``s = P t + q = j - 1 + k``, its row ``(i - row0 - 1) % R
    = 8 w + r`` in its word ``w`` at ``b0 + (t * W + w) * width * L * P + k * P + q``
    (``W``: :func:`~gpualign_df.kernels.strip.lane_words` of ``R``), at bits ``4 * r``;
    top-aligned (:func:`~gpualign_df.kernels.pairs16.top_aligned`), ``row0`` is
    minus the padding rows above the query (the walk kernel passes it); ``wavefront`` =
    ``C`` > 0 (the block kernel's layout of ``C`` columns a step,
    :mod:`gpualign_df.kernels.block`): at ``b0 + ((g + strip) * columns + strip) * C + q``,
    ``g, q = divmod(j - 1, C)``, ``columns`` the pair's strips, a strip of ``strip_rows``
    rows (2 to 8: row ``r`` at bits ``4 * (strip_rows - 1 - r)``).

    ``lanes`` > 0 (global and semi-global): the walk of a block of ``lanes`` threads that all
    run it alike (the same reads, the same branches, the same stores), which in H looks at
    the next ``lanes`` cells of the diagonal at once, a cell a lane, and takes the run of
    them whose source is the diagonal in one pass (a ballot, ``scratch``: ``lanes`` int32 of
    shared memory under the simulator). One thread's walk is a chain of dependent reads and
    branches, some hundred cycles a step; most steps of a long alignment are such runs.
    ``probes``: diagonal stretches of ``lanes`` cells each lane reads at once (a cell a
    stretch; every read made, at a clamped cell outside, so that all are in flight
    together), taken in order while each is wholly diagonal."""
    local = mode == MODE_LOCAL
    glob = mode == MODE_GLOBAL
    probing = lanes > 0
    assert not (probing and local) and lanes <= 32 and 1 <= probes <= 32
    assert strip_rows == STRIP_ROWS or (wavefront and 2 <= strip_rows < STRIP_ROWS)
    ballot = _ballot(lanes)
    width_lanes = int32(max(lanes, 1))

    group_lanes, group_rows, _aligned, scores, piece = grouped if grouped else (0, 1, False,
                                                                              False, 1)
    assert not (scores and (local or probing))
    words_a_step = lane_words(group_rows)
    piece_lanes = group_lanes * piece   # a slot's words of one piece and word
    # A thread's walk is a chain of dependent reads: reading the cell it goes to next if
    # it keeps its state one pass ahead overlaps two links. The grouped layout's local
    # and semi-global walks take it; global ones do not (slower with it: BENCHMARKS.md).
    read_ahead = bool(group_lanes) and not glob and not probing

    @cuda.jit(device=True, inline=True)
    def word_at(tb, b0, width, columns, row0, i, j):
        """The traceback word that holds cell (i, j)'s nibble (:func:`nibble_of`)."""
        if group_lanes:
            # in 32 bits, unsigned (one multiply-high a division by a constant, where
            # signed 64-bit floors take dozens of instructions on the walk's critical
            # path): i > row0 and j >= 1 at every read, and a slot's words lie within
            # 2**32 of its first (targets below 2**15 columns in this layout)
            row = uint32(i - row0 - 1)
            lane = row // uint32(group_rows)
            lane_row = row - lane * uint32(group_rows)
            step = uint32(j - 1) + lane
            within = uint32((step // uint32(piece) * uint32(words_a_step)
                             + lane_row // uint32(STRIP_ROWS))
                            * (uint32(width) * uint32(piece_lanes))
                            + lane * uint32(piece) + step % uint32(piece))
            return tb[uint64(b0) + uint64(within)]
        strip = (i - row0 - 1) // strip_rows
        if skewed:
            return tb[uint64(b0 + skewed_word_index(strip, columns, j,
                                                    (i - row0 - 1) % strip_rows))]
        if wavefront:
            group = (j - 1) // wavefront
            return tb[uint64(b0 + ((group + strip) * columns + strip) * wavefront
                             + (j - 1 - group * wavefront))]
        return tb[uint64(b0 + width * (strip * columns + j - 1))]

    @cuda.jit(device=True, inline=True)
    def nibble_of(word, row0, i):
        """Cell (i, j)'s four bits in its word (:func:`word_at`)."""
        if group_lanes:
            row = uint32(i - row0 - 1)
            return (word >> (uint32(4) * (row % uint32(group_rows) % uint32(STRIP_ROWS)))) \
                & uint32(15)
        return (word >> uint32(4 * (strip_rows - 1 - (i - row0 - 1) % strip_rows))) \
            & uint32(15)

    @cuda.jit(device=True, inline=True)
    def residues_at(query, target, q0, t0, width, i, j):
        """Cell (i, j)'s query and target codes (i, j >= 1): the slot's residues lie
        ``width`` bytes apart from ``q0`` and ``t0``; in the grouped layout an offset
        within a slot is below 2**32 (32-bit products, one 64-bit add each)."""
        if group_lanes:
            return (query[uint64(q0) + uint64(uint32(width) * uint32(i - 1))],
                    target[uint64(t0) + uint64(uint32(width) * uint32(j - 1))])
        return query[uint64(q0 + width * (i - 1))], target[uint64(t0 + width * (j - 1))]

    @cuda.jit(device=True, inline=True)
    def nibble_at(tb, b0, width, columns, row0, i, j):
        return nibble_of(word_at(tb, b0, width, columns, row0, i, j), row0, i)

    @cuda.jit(device=True, inline=True)
    def steps(query, target, q0, t0, width, tb, b0, columns, row0, stop_row, concrete, sub,
              alphabet_size, go, ge, runs, out, walk, lane, scratch):
        i, j, state, value, count, current, length, size, n_match, n_mismatch, n_open, \
            n_gap = walk
        ahead_i = ahead_j = -1   # the cell read ahead (none yet), its word and residues
        ahead_word = uint32(0)
        ahead_code = ahead_code_t = uint8(0)
        while True:  # one operation per pass (a gap run at a border is one pass)
            if stop_row > 0 and i == stop_row:
                break
            if probing and state == 1 and i > 0 and j > 0:
                # lane k, stretch t: cell (i - k - t * lanes, j - k - t * lanes), on the
                # diagonal run if its source is the diagonal (H stays the state along it)
                # and every cell before it is too
                diagonals = uint32(0)
                mismatched = uint32(0)
                for t in range(probes):  # no branch: every read issued before any use
                    cell_i = i - lane - width_lanes * t
                    cell_j = j - lane - width_lanes * t
                    inside = (cell_i >= 1) & (cell_j >= 1) & ((stop_row == 0)
                                                              | (cell_i > stop_row))
                    cell_i = max(cell_i, row0 + 1)
                    cell_j = max(cell_j, 1)
                    nibble = nibble_at(tb, b0, width, columns, row0, cell_i, cell_j)
                    code, code_t = residues_at(query, target, q0, t0, width, cell_i, cell_j)
                    diagonal = uint32(inside & ((nibble & uint32(3)) == 0))
                    same = uint32(code == code_t) & uint32(concrete[code])
                    diagonals |= diagonal << uint32(t)
                    mismatched |= (diagonal & (same ^ uint32(1))) << uint32(t)
                taken = int32(0)
                for t in range(probes):
                    bit = uint32(1) << uint32(t)
                    run = trailing_ones(ballot((diagonals & bit) != 0, lane, width_lanes,
                                               scratch), width_lanes)
                    mismatches = ballot((mismatched & bit) != 0, lane, width_lanes, scratch)
                    taken += run
                    done = int32(0)
                    while done < run:  # its stretches of matches and of mismatches
                        rest = mismatches >> uint32(done)
                        if (rest & uint32(1)) != 0:
                            op = OP_MISMATCH
                            repeat = trailing_ones(rest, run - done)
                            n_mismatch += repeat
                        else:
                            op = OP_MATCH
                            repeat = trailing_ones(~rest, run - done)
                            n_match += repeat
                        run_op = OP_MATCH if merge_matches else op
                        if run_op == current:
                            length += repeat
                        else:
                            count, size, n_open = flush_run(runs, out + count, length, current,
                                                            count, size, n_open)
                            current = run_op
                            length = repeat
                        done += repeat
                    i -= run
                    j -= run
                    if run < width_lanes:  # the run ends in this stretch
                        break
                if taken > 0:
                    continue
            repeat = 1
            if state == 1 and (i == 0 or j == 0):
                if local:
                    break
                if i == 0 and j > 0 and (glob or not fts):
                    op = OP_DEL
                    repeat = j
                    j = 0
                elif j == 0 and i > 0 and (glob or not fqs):
                    op = OP_INS
                    repeat = i
                    i = 0
                else:
                    break
                if scores:  # a gap along the border: opened, then extended
                    value -= go + (repeat - 1) * ge
            else:
                if local and state == 1 and value == 0:  # where H is 0 the alignment starts
                    break
                if read_ahead:
                    if i != ahead_i or j != ahead_j:
                        word = word_at(tb, b0, width, columns, row0, i, j)
                        code, code_t = residues_at(query, target, q0, t0, width, i, j)
                    else:   # read one pass ahead
                        word, code, code_t = ahead_word, ahead_code, ahead_code_t
                    # the next cell the walk takes if it stays in its state (the diagonal
                    # one in H, as along a run of matches; in I the one above, in D the
                    # one to the left): its word and residues read now, used next pass
                    # if the walk goes there
                    next_i = i - 1 if state != 3 else i
                    next_j = j - 1 if state != 2 else j
                    if next_i >= 1 and next_j >= 1 and (stop_row == 0 or next_i > stop_row):
                        ahead_i = next_i
                        ahead_j = next_j
                        ahead_word = word_at(tb, b0, width, columns, row0, next_i, next_j)
                        ahead_code, ahead_code_t = residues_at(query, target, q0, t0,
                                                               width, next_i, next_j)
                    nibble = nibble_of(word, row0, i)
                else:
                    nibble = nibble_at(tb, b0, width, columns, row0, i, j)
                # in H, its source: bit 1, D beats max(diagonal, I); bit 0, I beats the
                # diagonal (the grouped kernel's bits: bit 1, the diagonal is not the
                # source; bit 0, I is not); a gap step from H uses this same cell's
                # extension bit
                if group_lanes:
                    src = max(nibble & 3, 1) if state == 1 else state
                else:
                    src = min(nibble & 3, 2) + 1 if state == 1 else state
                if src == 1:
                    if not read_ahead:
                        code, code_t = residues_at(query, target, q0, t0, width, i, j)
                    op = OP_MATCH if code == code_t and concrete[code] else OP_MISMATCH
                    if local or scores:
                        pair_score = sub[uint32(code) * uint32(alphabet_size)
                                         + uint32(code_t)]
                        value += -pair_score if local else pair_score
                    i -= 1
                    j -= 1
                    state = 1
                else:
                    extends = (nibble & (4 if src == 2 else 8)) != 0
                    if src == 2:
                        op = OP_INS
                        i -= 1
                    else:
                        op = OP_DEL
                        j -= 1
                    if local:  # the gap value one step back: extended or opened
                        value += ge if extends else go
                    elif scores:
                        value -= ge if extends else go
                    state = src if extends else 1
            if op == OP_MATCH:
                n_match += repeat
            elif op == OP_MISMATCH:
                n_mismatch += repeat
            else:
                n_gap += repeat
            run_op = OP_MATCH if (merge_matches and op == OP_MISMATCH) else op
            if run_op == current:
                length += repeat
            else:
                count, size, n_open = flush_run(runs, out + count, length, current, count, size,
                                                n_open)
                current = run_op
                length = repeat
        return (i, j, state, value, count, current, length, size, n_match, n_mismatch, n_open,
                n_gap)

    @cuda.jit(device=True, inline=True)
    def finish(runs, out, walk, soft_clip, m, end_i):
        """The walk's last run flushed; (runs, CIGAR characters, gap opens) with the soft
        clips of a query of length ``m`` aligned up to ``end_i``."""
        i, j, state, value, count, current, length, size, n_match, n_mismatch, n_open, \
            n_gap = walk
        count, size, n_open = flush_run(runs, out + count, length, current, count, size, n_open)
        if soft_clip:
            if i > 0:
                size += digits(i) + 1
            if m - end_i > 0:
                size += digits(m - end_i) + 1
        return count, size, n_open

    return steps, finish


@lru_cache(maxsize=None)
def walk_kernel(mode: int, fqs: bool, fts: bool, merge_matches: bool, soft_clip: bool,
                skewed: bool = False, lanes: int = 0, probes: int = 1,
                grouped: tuple | None = None):
    """Traceback walk, one thread per slot (:func:`walk_functions`; ``skewed``: the band
    kernel's layout, ``width`` 1; ``grouped``: the grouped pair kernel's), or with
    ``lanes`` > 0 a block of ``lanes`` threads per slot (launch ``lanes`` threads a block,
    a block per slot) reading ``probes`` diagonal stretches at once."""
    steps, finish = walk_functions(mode, fqs, fts, merge_matches, skewed, lanes, probes,
                                   grouped)
    probing = lanes > 0
    scratch_size = max(lanes, 1)
    # top-aligned grouped layout: rows counted from minus the query's padding rows
    group_height = grouped[0] * grouped[1] if grouped and grouped[2] else 0
    scores = bool(grouped and grouped[3])   # the walk adds up its path's score

    @cuda.jit
    def walk(query, target, query_lengths, target_lengths, query_start, target_start, tb_start,
             slot_columns, width, tb, concrete, sub, alphabet_size, go, ge, slot_row, score,
             end_i, end_j, run_base, runs, run_count, start_i, start_j, matches, mismatches,
             gap_opens, gaps, cigar_length):
        scratch = cuda.shared.array(scratch_size, int32)
        slot = cuda.blockIdx.x if probing else cuda.grid(1)
        lane = cuda.threadIdx.x if probing else 0
        if slot >= query_lengths.shape[0]:
            return
        m = query_lengths[slot]
        if m < 0:  # an unused slot of the warp
            run_count[slot] = 0
            return
        pair = slot_row[slot]
        out = run_base[slot]
        # state 1: in H, 2: in I, 3: in D; value: local, H, I or D of the cell and state;
        # with ``scores``, the score of the path walked so far
        walk = (end_i[pair], end_j[pair], 1, int32(0) if scores else score[pair], 0, -1, 0, 0,
                0, 0, 0, 0)
        row0 = m - group_height if group_height else 0
        walk = steps(query, target, query_start[slot], target_start[slot], width, tb,
                     tb_start[slot], slot_columns[slot], row0, 0, concrete, sub,
                     alphabet_size, go, ge, runs, out, walk, lane, scratch)
        count, size, n_open = finish(runs, out, walk, soft_clip, m, end_i[pair])
        run_count[slot] = count
        start_i[pair] = walk[0]
        start_j[pair] = walk[1]
        matches[pair] = walk[8]
        mismatches[pair] = walk[9]
        gap_opens[pair] = n_open
        gaps[pair] = walk[11]
        cigar_length[pair] = size
        if scores:
            score[pair] = walk[3]

    return walk


#: Entries of a linear-space walk's state array (int64): the walk tuple of
#: :func:`walk_functions`.
WALK_STATE = 12


@cuda.jit(device=True, inline=True)
def load_walk(state):
    """The walk tuple of :func:`walk_functions` from a state array."""
    return (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7],
            state[8], state[9], state[10], state[11])


@lru_cache(maxsize=None)
def block_walk_kernel(mode: int, fqs: bool, fts: bool, merge_matches: bool, lanes: int = 0,
                      probes: int = 1):
    """One thread (or with ``lanes`` > 0 one block of ``lanes`` threads,
    :func:`walk_functions`) walks one pair's block of rows ``row0 + 1 ..`` (band layout, the
    block's words from ``tb[0]``, ``columns`` wide) from the walk in ``walk_state`` until it
    reaches row ``row0`` (> 0) or the start of the alignment (``row0`` 0), and leaves the
    walk there: the linear-space traceback, block by block from the bottom. Launch one
    block of ``max(lanes, 1)`` threads."""
    steps, _finish = walk_functions(mode, fqs, fts, merge_matches, True, lanes, probes)
    scratch_size = max(lanes, 1)

    @cuda.jit
    def walk_block(query, target, q0, t0, tb, columns, row0, concrete, sub, alphabet_size, go,
                   ge, runs, walk_state):
        scratch = cuda.shared.array(scratch_size, int32)
        lane = cuda.threadIdx.x
        walk = steps(query, target, q0, t0, 1, tb, 0, columns, row0, row0, concrete, sub,
                     alphabet_size, go, ge, runs, 0, load_walk(walk_state), lane, scratch)
        cuda.syncthreads()  # every lane has read the state before lane 0 writes it
        if lane == 0:
            for k in range(WALK_STATE):
                walk_state[k] = walk[k]

    return walk_block


@lru_cache(maxsize=None)
def finish_walk_kernel(mode: int, fqs: bool, fts: bool, merge_matches: bool, soft_clip: bool):
    """One thread: a linear-space walk finished into job row ``row``'s columns and its
    run count (``run_count[0]``) for :func:`cigar_kernel`."""
    _steps, finish = walk_functions(mode, fqs, fts, merge_matches, True)

    @cuda.jit
    def finish_walk(walk_state, runs, m, row, end_i, run_count, start_i, start_j, matches,
                    mismatches, gap_opens, gaps, cigar_length):
        if cuda.grid(1) != 0:
            return
        walk = load_walk(walk_state)
        count, size, n_open = finish(runs, 0, walk, soft_clip, m, end_i[row])
        run_count[0] = count
        start_i[row] = walk[0]
        start_j[row] = walk[1]
        matches[row] = walk[8]
        mismatches[row] = walk[9]
        gap_opens[row] = n_open
        gaps[row] = walk[11]
        cigar_length[row] = size

    return finish_walk


#: :func:`gpualign_df.kernels.common.run_writer_of` for the GPU.
write_run = cuda.jit(device=True, inline=True)(common.run_writer_of(digits))


def run_symbols(merge_matches: bool) -> tuple[int, int, int, int]:
    """The CIGAR symbols of the runs' ops 0-3: ``M`` (``merge_matches``) or ``=``, ``X``,
    ``I``, ``D``."""
    return 77 if merge_matches else 61, 88, 73, 68


@cuda.jit(device=True, inline=True)
def run_at(runs, at, symbols):
    """The length and CIGAR symbol (of ``symbols``, :func:`run_symbols`) of the run
    stored at ``runs[at]``."""
    packed = int32(runs[at])  # (unsigned with signed would compute in float)
    op = packed & 3
    symbol = symbols[0]
    if op == 1:
        symbol = symbols[1]
    elif op == 2:
        symbol = symbols[2]
    elif op == 3:
        symbol = symbols[3]
    return packed >> 2, symbol


@lru_cache(maxsize=None)
def run_writer(put, merge_matches: bool, soft_clip: bool):
    """Device function ``write(out, state, runs, base, count, start_i, clip)``: a pair's
    CIGAR from its ``count`` runs at ``runs[base:]`` (stored end to start), with soft
    clips of ``start_i`` and ``clip`` query residues, each run (length, symbol) given in
    order to ``put(out, state, length, symbol)``, which returns the state after it;
    returns the state after the last."""
    symbols = run_symbols(merge_matches)

    @cuda.jit(device=True, inline=True)
    def write(out, state, runs, base, count, start_i, clip):
        if soft_clip and start_i > 0:
            state = put(out, state, start_i, 83)
        for k in range(count - 1, -1, -1):
            length, symbol = run_at(runs, base + k, symbols)
            state = put(out, state, length, symbol)
        if soft_clip and clip > 0:
            state = put(out, state, clip, 83)
        return state

    return write


def cigar_writer(merge_matches: bool, soft_clip: bool):
    """Device function ``write(chars, pos, runs, base, count, start_i, clip)``: a pair's
    CIGAR (:func:`run_writer`) into ``chars`` from ``pos``, a byte at a time; returns the
    position after its last character."""
    return run_writer(write_run, merge_matches, soft_clip)


@cuda.jit(device=True, inline=True)
def store_bytes(chars, pos, bits, count):
    """Store the ``count`` low bytes of ``bits`` (uint64, the first lowest) one at a time
    into ``chars`` from ``pos``."""
    for b in range(count):
        chars[pos + b] = uint8((bits >> uint64(8 * b)) & uint64(255))


@cuda.jit(device=True, inline=True)
def put_bytes(out, held, value, count):
    """Append the ``count`` low bytes of ``value`` (uint64, the first lowest) to the
    characters ``held`` = (the position of the first, the bytes as uint64, their count;
    at most 8 with the new ones), storing each whole 4-byte word of them that begins on
    a multiple of 4 as one uint32 (``out`` = (the characters, the same as uint32)), the
    bytes before the first such word (a string's first, whose word another string shares)
    one at a time; returns what is still held. A thread storing bytes one at a time at
    scattered places costs the L2 a sector each: words take a quarter of them."""
    chars, words = out
    pos, bits, k = held
    bits |= value << uint64(8 * k)
    k += count
    while True:
        head = -pos & 3   # bytes before the next word boundary
        if head == 0 and k >= 4:
            words[pos >> 2] = uint32(bits & uint64(0xFFFFFFFF))
            bits >>= uint64(32)
            pos += 4
            k -= 4
        elif 0 < head <= k:
            store_bytes(chars, pos, bits, head)
            bits >>= uint64(8 * head)
            pos += head
            k -= head
        else:
            return pos, bits, k


@cuda.jit(device=True, inline=True)
def put_run(out, held, length, symbol):
    """:func:`put_bytes` of a CIGAR run: ``length``'s digits, then ``symbol``."""
    width = digits(length)
    if width <= 4:  # the digits and the symbol in one value, the first digit lowest:
        value = uint64(symbol)  # each digit, from the last, shifts the later ones up
        rest = length
        for _ in range(width):
            value = (value << uint64(8)) | uint64(48 + rest % 10)
            rest //= 10
        return put_bytes(out, held, value, width + 1)
    scale = 1
    for _ in range(width - 1):
        scale *= 10
    for _ in range(width):
        held = put_bytes(out, held, uint64(48 + (length // scale) % 10), 1)
        scale //= 10
    return put_bytes(out, held, uint64(symbol), 1)


@lru_cache(maxsize=None)
def cigar_kernel(merge_matches: bool, soft_clip: bool):
    """Runs of each slot -> CIGAR characters of a buffer (``chars``, and ``words`` the
    same bytes as uint32), at ``offsets[slot]``, or with ``by_row`` at ``offsets[row]``
    of the slot's job row (the column's own offsets): :func:`run_writer`'s, stored by
    :func:`put_bytes`."""
    write_runs = run_writer(put_run, merge_matches, soft_clip)

    @cuda.jit
    def write(runs, run_base, run_count, slot_row, start_i, end_i, query_lengths, offsets,
              by_row, chars, words):
        slot = cuda.grid(1)
        if slot >= run_count.shape[0] or query_lengths[slot] < 0:  # no pair in this slot
            return
        row = slot_row[slot]
        held = (offsets[row] if by_row else offsets[slot], uint64(0), int64(0))
        pos, bits, k = write_runs((chars, words), held, runs, run_base[slot],
                                  run_count[slot], start_i[row],
                                  query_lengths[slot] - end_i[row])
        store_bytes(chars, pos, bits, k)   # the last bytes, short of a word

    return write


@cuda.jit
def scatter_strings(source, source_offsets, slot_row, query_lengths, target, target_offsets):
    """Copy each slot's characters from a batch buffer to its row's place in the column."""
    slot = cuda.grid(1)
    if slot >= slot_row.shape[0] or query_lengths[slot] < 0:
        return
    row = slot_row[slot]
    begin = source_offsets[slot]
    start = target_offsets[row]
    for k in range(source_offsets[slot + 1] - begin):
        target[start + k] = source[begin + k]
