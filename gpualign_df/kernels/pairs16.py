"""Grouped local score-only kernel for 1:1 pairs on packed 16-bit cells: a group of lanes
per pair of pairs (one pair in each 16-bit half of every int32, ``*_s16x2`` DPX on sm_90),
each lane holding a strip of query rows in registers while both pairs' targets stream
through the group as a wavefront (lane k on column s - k at step s). Same recurrences,
tie-breaks and end cells as :mod:`gpualign_df.kernels.inter` (the contract is in
:mod:`gpualign_df.kernels.cpu`): the end cell is the highest H, ties to the lowest row,
then the lowest column.

Slots come in the packed inter layout (:func:`gpualign_df.gpu.plan.plan_batches`): slot
``a = 64p + l`` of warp ``2p`` pairs with slot ``b = a + 32`` of warp ``2p + 1``, both warps
having the same columns. Residues are read where the sequences are (no gather): a lane's
query rows once, and each step the group's lanes read neighbouring residues of a target;
with traceback the kernel writes the copies of them the walk reads as it reads them.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint8, uint32, uint64

from . import dpx, inlined, simulator
from .dpx import high_half, low_half, pack_halves
from .search import group_parts
from ..scoring import MODE_LOCAL
from .planning import (COLUMNS_ROW, QUERY_ROW, TARGET_ROW, TRACEBACK_ROW,
                       write_slot_starts)
from .strip import (PIECE_STEPS, STRIP_ROWS, WARP, lane_words, mode_shape, pack_pair,
                    strip_functions, word_storer)


#: Copies of the pair table in shared memory, interleaved word by word (entry ``e`` of copy
#: ``c`` at word ``COPIES * e + c``): lane ``k`` of a group reads copy ``k % COPIES``, so
#: the lanes of a warp spread their reads over ``32 / COPIES``-bank sets (fewer bank
#: conflicts than one copy: on the W1 pairs the kernel is still bound by shared memory).
COPIES = 8

ROW_BITS = 13   # (H, row) across a group: ``H * 2**13 + (2**13 - 1 - row)``


def key_bits(rows: int) -> int:
    """Bits of a running-best key below H for lanes of ``rows`` rows: ``key = H * 2**b +
    (2**b - 1 - r)`` for a lane's row ``r``, so the highest key is the highest H, ties to
    the lowest row; both halves' keys must stay within 16 bits (:func:`highest_score`).
    The kernel takes ``2**b`` as an argument: multiplied by a value the compiler cannot
    see, a key is one IMAD on the FMA pipe instead of a shift and add on the ALU pipe,
    which the cells' DPX instructions keep busy."""
    return max(5, (rows - 1).bit_length())


def highest_score(rows: int) -> int:
    """The highest H the keys of lanes of ``rows`` rows hold."""
    return (1 << (15 - key_bits(rows))) - 2


def group_rows_fit(lanes: int, rows: int) -> bool:
    """Whether a class can be built: lanes a power of two up to a warp (a group is a
    lane mask's worth of a warp), a lane's rows at most 64 and a group's below
    2**ROW_BITS (the keys).

    >>> [group_rows_fit(*shape) for shape in ((8, 19), (6, 19), (8, 65), (32, 64))]
    [True, False, False, True]
    """
    return (lanes in (1, 2, 4, 8, 16, 32) and 1 <= rows <= 64
            and lanes * rows < 1 << ROW_BITS)


def _twice(steps, offset: int):
    """``steps`` on step s, then on step s + ``offset`` (unrolled: two calls, so the rows'
    registers change roles by renaming instead of moves); ``phase``, the first step's
    place in its group of unrolled steps, and ``freeze`` are constants once inlined."""
    offset32 = int32(offset)

    @inlined
    def twice(s, phase, freeze, carried, lane_state):
        carried = steps(s, phase, freeze, carried, lane_state)
        return steps(int32(s + offset32), phase + offset, freeze, carried, lane_state)

    return twice


#: The highest value a cell of the traceback kernel may hold: the last comparison's bound.
TRACEBACK_VALUES = 0x0FFF
#: The most rows a lane of the traceback kernel takes: LLVM leaves a longer loop over a
#: lane's rows rolled (its registers then live in local memory, several times slower).
TRACEBACK_ROWS = 20


def direction_bits():
    """``bits(h_left, h_up, e_new, f_new, match, top, neg, one)``: both halves' four
    traceback bits of a cell in the shifted form (gaps + go; ``top`` = max(``match``,
    E*_new, F*_new), H before the floor), at bits 12-15 of each half (from the high
    bit: D extends, I extends, the diagonal is not H's source, I is not; so H's source
    is the diagonal where bit 13 is 0, else I where bit 12 is 0, else D: ties to the
    diagonal, then I, as :func:`gpualign_df.kernels.strip.append_sign`'s bits say it;
    :func:`gpualign_df.kernels.traceback.walk_functions` reads both forms); bits 0-11
    hold anything. Each is one difference ``x - y + 2**b - 1`` (b = 15, 14, 13, 12)
    whose bit ``b`` holds ``x > y`` and whose bits above it are 0 where ``|x - y| <
    2**b``, so three bit selects merge them: exact where every operand lies in ``[0,
    TRACEBACK_VALUES]``, so that no half borrows from the other. A gap extends where its
    new value passes the H it would open from (``E*_new = max(E*_old - ge, H_left)`` is
    above ``H_left`` exactly where ``E*_old - ge`` is), so the old gap values die with
    the cell's update (no register keeps them); H's source compares ``top``, which the
    cell computes anyway, with two of its operands (no max of its own). The two source
    bits are multiply-adds by ``neg`` = -1 and ``one`` = 1, values the compiler cannot
    see (IMADs on the FMA pipe, beside the subtractions, bit selects and DPX
    instructions that keep the ALU pipe the fill's busiest)."""

    @inlined
    def bits(h_left, h_up, e_new, f_new, match, top, neg, one):
        d_ext = int64(e_new) - int64(h_left) + 0x7FFF7FFF      # E*_new > H_left
        i_ext = int64(f_new) - int64(h_up) + 0x3FFF3FFF        # F*_new > H_up
        not_diagonal = (int64(match) * neg + int64(top)) * one + 0x1FFF1FFF  # top > match
        not_i = (int64(f_new) * neg + int64(top)) * one + 0x0FFF0FFF         # top > F*_new
        merged = (d_ext & 0x80008000) | (i_ext & 0x7FFF7FFF)
        merged = (merged & 0xC000C000) | (not_diagonal & 0x3FFF3FFF)
        return uint32((merged & 0xE000E000) | (not_i & 0x1FFF1FFF))

    return bits


def top_aligned(mode: tuple) -> bool:
    """Whether the grouped traceback kernel aligns a query's last row with its group's
    (``mode``: code and free ends): in global and semi-global modes whose row 0 is free,
    so that the end cell's row is a lane's last register and no select finds it. The
    padding rows then lie above the query; scoring 0 against every residue (a table
    entry ``go``: :func:`gpualign_df.gpu.policy.pair_group_table`'s ``query_padding``),
    from row 0's H (the bias) and F (minus infinity: the floor), they keep that H, so
    the query's first row sees the border it would see without them."""
    local, _corner, free_row0, _free_col0, _end_row, _end_column = mode_shape(*mode)
    return free_row0 and not local


def walk_scores(mode: tuple) -> bool:
    """Whether the grouped traceback kernel leaves the score to the walk (``mode``: code
    and free ends): where the end cell is the corner (m, n) (global, and semi-global with
    neither end free), the fill knows the end cell without looking for it, and the walk
    adds up the path it takes back from there, whose score is the corner's H (an optimal
    path's). Picking row m's H out of a lane's rows at every step cost the fill a compare
    and a select a cell (an index into the rows would put them in local memory)."""
    return mode_shape(*mode)[1]


def traceback_piece(mode: tuple) -> int:
    """Consecutive steps of a lane's traceback word that the grouped traceback kernel
    keeps in one piece for ``mode`` (code and free ends): :data:`~gpualign_df.kernels.
    strip.PIECE_STEPS` where the walk starts at the corner (:func:`walk_scores`), whose
    paths cross the whole target and read a piece every four steps; else 1, each step's
    words stored as the step ends them (a piece's words wait in registers, and the
    local and semi-global fills, which carry their running bests besides, then lose
    more than their walks gain)."""
    return PIECE_STEPS if walk_scores(mode) else 1


@lru_cache(maxsize=None)
def pair_group_kernel(lanes: int, rows: int, use_dpx: bool = False, unroll: int = 4,
                      traceback: bool = False, max_registers: int | None = None,
                      mode: tuple = (MODE_LOCAL, False, False, False, False),
                      profile: bool = False):
    """The kernel for query strips of ``lanes * rows`` rows (launch ``lanes * slots / 2``
    threads, any multiple of 32 a block): group ``g`` aligns slots ``a = 64 (g // 32) +
    g % 32`` and ``b = a + 32``, lane ``k`` holding query rows ``k * rows + r``.

    Values are kept in the shifted form of
    :func:`gpualign_df.kernels.search.group_search_kernel` (H itself, E* = E + go,
    F* = F + go, table entries ``score + go``), with a lane's rows and the streamed columns
    in the roles that kernel gives its columns and query rows. ``table`` holds
    ``COPIES`` interleaved copies of ``[target class pair][query class pair]`` (both
    halves' ``score + go``; the padding class scores ``-go``, an entry 0); ``query_pair``
    maps ``low code * codes + high code`` of the two queries' residues (``codes - 1``:
    padding) to its table entry, ``target_pair`` the two targets' to their table row.
    Padding cells (rows past a query, columns past a target) are reached from a real cell
    through a gap or a padding score, so they stay at least ``go`` (> 0) below it and are
    never the end cell. Each cell's key (:func:`key_bits`) folds into a running best
    whose column is noted whenever a step raises it, so equal keys keep the first column;
    the group then takes the highest H, ties to the lowest row. Exact where no value
    leaves 16 bits and H stays within :func:`highest_score` (the caller checks both);
    ``key_unit`` must be ``2**key_bits(rows)``.

    ``traceback``: the cells' four bits (:func:`direction_bits`) go to ``tb``, a word
    per 8 rows of a lane and step (:func:`~gpualign_df.kernels.strip.lane_words`; the
    lane's row ``8 w + r`` at bits ``4 * r`` of its word ``w``), ``P =``
    :func:`traceback_piece` consecutive steps of a word in one piece (one 16-byte store
    where P is 4), laid out so that a warp's stores are whole lines: word ``w`` of lane
    ``k`` at step ``s = P t + q`` of the slot in lane ``l`` of warp ``v`` at ``tb_base[v]
    + (t * lane_words + w) * 32 * lanes * P + (l * lanes + k) * P + q`` (the walk's
    ``grouped`` layout, :func:`gpualign_df.kernels.traceback.walk_functions`; the plan
    sizes it: :func:`gpualign_df.kernels.planning.warp_plan`); ``tb_address``: ``tb``'s
    device address (the linked 16-byte stores'; unused under the simulator). Every value
    must lie within ``TRACEBACK_VALUES`` (the caller checks). The kernel then also writes
    what the walk reads besides, in place of a gather after the fill: each slot's five
    starts to ``slot_starts`` (:func:`~gpualign_df.kernels.planning.write_slot_starts`,
    with the traceback start of this layout) and the residues, interleaved by slot, to
    ``walk_query`` and ``walk_target`` (``base + WARP * i``, the bases those of
    ``warp_table``): a lane writes the query rows it holds, and before its first step
    every ``lanes``-th column of both targets from its own (a copy in the steps, which
    read every column in every lane, would cost each step a test and stores).
    ``warp_table``: the batch's layout table (:data:`~gpualign_df.kernels.planning.
    TABLE_ROWS` rows a warp; the fill reads its columns and traceback bases).
    ``max_registers``: the compiler's cap a thread (None: its choice; the simulator
    takes none).

    ``profile``: the cells' entries come from the two targets' columns of scores, one
    ``PRMT`` a cell (:func:`gpualign_df.kernels.dpx.byte_perm`): ``query_pair`` then
    holds the selectors and ``target_pair`` each target code's column (``selectors``
    and ``columns`` of :func:`gpualign_df.gpu.policy.pair_group_profile`), and ``table``
    is not read. Every query code must be below
    :data:`~gpualign_df.kernels.encoding.SMALL_CODES` (the caller checks), and the mode
    not :func:`top_aligned`.

    ``mode`` (code and free ends, with traceback): global and semi-global alignments keep
    every value ``bias`` above its own, so that none is negative (the cell's floor at 0
    then never binds on a real cell: the caller's bias bounds the lowest H), start from
    the borders of their free ends and skip the steps before a lane's first column. The
    end cell is then the highest H among the mode's candidates (the last row up to the
    target's end, the last column up to the query's end), ties to the lowest row, then
    the lowest column, as :func:`gpualign_df.kernels.strip.strip_functions`'
    ``end_candidates``: a lane keeps the best key ``H * 2**b + (2**b - 1 - r)`` of its
    candidates (row ``m`` each step, column ``n`` at its step), raised strictly. Where
    the end cell is the corner (:func:`walk_scores`) the kernel writes (m, n) and a score
    of 0, which the walk replaces with its path's. Where
    :func:`top_aligned`, a query's rows end at the group's last row (its padding rows
    above it; the walk's ``row0`` is minus their count)."""
    assert unroll in (1, 2, 4) and group_rows_fit(lanes, rows)
    piece = traceback_piece(mode) if traceback else 1
    # a group of unrolled steps holds whole pieces; a piece is one step or four words
    assert unroll % piece == 0 and piece in (1, PIECE_STEPS)
    max3_2, cell, table, shuffles, scratch_size = group_parts(use_dpx)
    flag_bits = direction_bits()
    pick_entries = dpx.byte_perm(use_dpx)
    assert not (profile and top_aligned(mode))
    store_words = word_storer(use_dpx)
    table_words, shift, table_put, table_base, table_at = table
    receive, shuffle_across = shuffles
    group, height = lanes, rows
    group_mask = uint32(group - 1)
    bits = key_bits(rows)
    key_scale = int32(1 << bits)
    row_span = int32(1 << ROW_BITS)
    words_a_step = lane_words(rows)
    piece_words = 2 * piece * words_a_step   # both halves' words of a piece
    local, _corner, free_row0, free_col0, end_row, end_column = mode_shape(*mode)
    assert local or traceback
    aligned = top_aligned(mode)
    empty_end = strip_functions(*mode, False, False)[0]
    corner_end = walk_scores(mode)

    @inlined
    def fold_end(best, best_j, value, r, j):
        """A candidate of one half (H ``value``, lane row ``r``, column ``j``) raising the
        lane's best key strictly (equal keys keep the earlier column)."""
        key = int32(value * key_scale + (key_scale - 1 - r))
        if key > best:
            return key, j
        return best, best_j

    @inlined
    def step(s, phase, freeze, carried, lane_state):
        """Step ``s`` of a lane: column ``s - lane`` of both targets (padding outside them)
        down its rows; ``carried`` = (best key, its columns, the last row's H and F*, the
        H the first row takes as diagonal) before and after. ``lane_state``: what every
        step of the lane reads (the kernel's tuple; the rows' arrays ``held``, ``h`` and
        ``e`` are written in place). Of it, ``words`` (traceback): the
        traceback array, the lane's piece 0 of each half, the words between two pieces of
        a lane, the warp's columns, :func:`direction_bits`' -1 and 1 (from ``key_unit``,
        a kernel argument), the array's address and the piece's words so far
        (``phase`` = ``s % unroll``: ``s``'s words go to place ``phase % piece`` of
        their pieces, stored with the piece's last step; in pieces of one step, each
        word is stored as the step completes it). ``freeze`` (where the end cell may be
        in the last column): a half past its target's end keeps its column n's H; the
        caller passes False for steps where every column is within both targets.
        ``ends`` (global and semi-global): the lane rows of both halves' last query
        rows, the ends of their rows in this lane (exclusive), the bias, the gap costs
        and the starts of their rows in this lane; the best keys are then the first and
        last of ``carried``."""
        lane, n_a, n_b, t0_a, t0_b, target, pad, codes, target_pair, base, shared, held, h, \
            e, starts, scratch, warp_lane, go2, ge2, unit, words, ends = lane_state
        best, j_a, j_b, h_last, f_last, diag_first, best_b = carried
        zero = int32(0)
        h_in, f_in = receive(h_last, f_last, starts, scratch, warp_lane)
        j = int32(s - lane)
        row_m_a, row_m_b, last_a, last_b, bias, go, ge = ends[:7]
        if not local:
            if starts:   # row 0 (F there is minus infinity: the floor)
                h_in = pack_pair(bias if free_row0 else bias - go - j * ge)
            if j < 0:   # before the lane's first column: its borders stay
                return carried
        low = int32(target[t0_a + uint64(j)]) if uint32(j) < uint32(n_a) else pad
        high = int32(target[t0_b + uint64(j)]) if uint32(j) < uint32(n_b) else pad
        if profile:   # the two targets' columns of scores (entries of query codes 0-3)
            row = int32(0)
            column_a = target_pair[uint32(low)]
            column_b = target_pair[uint32(high)]
        else:
            row = base + (target_pair[uint32(low * codes + high)] << shift)
        h_up = h_in
        f = f_in
        diag = diag_first
        before = best
        key_low = zero
        tb, tb_a, tb_b, stride, columns, neg, one, address, pending = words
        if piece == 1:
            stores = uint32(j) < uint32(columns)
            at = uint64(s) * uint64(words_a_step) * stride
        # end_column: the halves whose target still runs at this column take its H
        kept = (int32(0xFFFF) if j < n_a else zero) | (int32(-65536) if j < n_b else zero)
        frozen = end_column and freeze
        upper = uint32(0)   # rows 0-3 of a word, both halves (row 0 lowest)
        lower = uint32(0)   # rows 4-7
        last_row_a = zero   # H of the halves' last query rows (where this lane holds them)
        last_row_b = zero
        for r in range(height):
            h_left = h[r]
            if profile:   # both halves' entries, picked by the row's selector: one PRMT
                entry = pick_entries(column_a, column_b, held[r])
            else:
                entry = table_at(shared, int32(row + held[r]))
            value, f, e_r, top = cell(diag, entry, f, e[r], h_up, h_left, go2, ge2)
            if traceback:
                flags = flag_bits(h_left, h_up, e_r, f, int32(diag + entry), top, neg, one)
                # four rows' nibbles a half, entering at its top: the earlier shift down
                if r % STRIP_ROWS < 4:
                    upper = uint32(((upper >> 4) & 0x0FFF0FFF) | (flags & 0xF000F000))
                else:
                    lower = uint32(((lower >> 4) & 0x0FFF0FFF) | (flags & 0xF000F000))
                held_rows = r % STRIP_ROWS + 1   # the word's rows so far
                if held_rows == STRIP_ROWS or r == height - 1:  # a word a half
                    # a lane's last word may hold fewer rows: they sit at the top of
                    # their four (the constant shifts bring row 0 to bit 0)
                    if held_rows <= 4:
                        down = 4 * (4 - held_rows)
                        word_a = (upper & 0xFFFF) >> down
                        word_b = ((upper >> 16) & 0xFFFF) >> down
                    else:
                        down = 4 * (STRIP_ROWS - held_rows)
                        word_a = (upper & 0xFFFF) | (((lower & 0xFFFF) >> down) << 16)
                        word_b = ((upper >> 16) & 0xFFFF) | (((lower >> 16) >> down) << 16)
                    if piece == 1:
                        if stores:
                            at_word = at + stride * uint64(r // STRIP_ROWS)
                            tb[tb_a + at_word] = uint32(word_a)
                            tb[tb_b + at_word] = uint32(word_b)
                    else:
                        place = 2 * piece * (r // STRIP_ROWS) + phase % piece
                        pending[place] = uint32(word_a)
                        pending[place + piece] = uint32(word_b)
            if local:
                # both halves' key H * unit + (unit - 1 - r): no carry (H <= highest_score)
                key = int32(int64(value) * unit + pack_pair(key_scale - 1 - r))
                if r % 2 == 1:
                    best = max3_2(best, key_low, key)
                elif r == height - 1:
                    best = max3_2(best, key, key)
                else:
                    key_low = key
            elif end_row and not aligned:   # (selects: an index would put h in local
                if r == row_m_a:              # memory)
                    last_row_a = value
                if r == row_m_b:
                    last_row_b = value
            e[r] = e_r
            diag = h_left
            if frozen:   # a half past its target's end keeps column n's H
                h[r] = (value & kept) | (h_left & ~kept)
            else:
                h[r] = value
            h_up = value
        if traceback and piece > 1 and phase % piece == piece - 1:
            # the pieces of steps s - 3 ..< s + 1, stored where one of them is a column
            # of the warp's (j - 3 < columns, j >= 0)
            whole = uint32(j) < uint32(columns + piece - 1)
            at = uint64(uint32(s) // uint32(piece)) * uint64(words_a_step) * stride
            for w in range(words_a_step):
                for half in range(2):
                    first = (2 * w + half) * piece
                    store_words(tb, address, (tb_b if half else tb_a) + at + stride * uint64(w),
                                (pending[first], pending[first + 1], pending[first + 2],
                                 pending[first + 3]), whole)
        if local:
            if best != before:
                if low_half(best) != low_half(before):
                    j_a = j
                if high_half(best) != high_half(before):
                    j_b = j
            return best, j_a, j_b, h_up, f, h_in, best_b
        if aligned:   # row m is the last lane's last row: its H leaves the row loop
            last_row_a = h_up
            last_row_b = h_up
        if end_row:   # row m up to the target's end
            if uint32(row_m_a) < uint32(height) and j < n_a:
                best, j_a = fold_end(best, j_a, low_half(last_row_a), row_m_a, j)
            if uint32(row_m_b) < uint32(height) and j < n_b:
                best_b, j_b = fold_end(best_b, j_b, high_half(last_row_b), row_m_b, j)
        return best, j_a, j_b, h_up, f, h_in, best_b

    steps = step
    width = 1
    while width < unroll:   # nested calls: LLVM leaves a loop of such a body rolled
        steps = _twice(steps, width)
        width *= 2

    @inlined
    def group_end(best, j, lane, scratch, warp_lane):
        """A half's (H, row, column) over the group: each lane's best key as
        ``H * 2**13 + (2**13 - 1 - row)`` (local: 0 where no cell passed 0; else -1
        where the lane has no candidate), the highest kept with its column (rows differ
        between lanes, so keys never tie above 0)."""
        key = int32(0 if local else -1)
        if best >= (key_scale if local else 0):
            row = lane * height + (key_scale - 1 - (best & (key_scale - 1)))
            key = (best >> bits) * row_span + (row_span - 1 - row)
        for offset in (1, 2, 4, 8, 16):
            if offset < group:
                other = shuffle_across(key, offset, scratch, warp_lane)
                other_j = shuffle_across(j, offset, scratch, warp_lane)
                if other > key:
                    key = other
                    j = other_j
        return key, j

    @cuda.jit(**({} if max_registers is None or simulator() else
                 {"max_registers": max_registers}))
    def fill(query_codes, query_offsets, pair_query, target_codes, target_offsets, pair_target,
             query_lengths, target_lengths, warp_table, table, used_words, query_pair,
             target_pair, codes, go, ge, key_unit, slot_row, score, query_end, target_end, tb,
             tb_address, bias, slot_starts, walk_query, walk_target):
        shared = cuda.shared.array(table_words, int32)
        pairs_of_target = cuda.shared.array(256, int32)
        scratch = cuda.shared.array(scratch_size, int32)
        warp_lane = cuda.threadIdx.x % WARP
        if not profile:
            for k in range(cuda.threadIdx.x, used_words, cuda.blockDim.x):
                table_put(shared, k, table[k])
        for k in range(cuda.threadIdx.x, codes if profile else codes * codes,
                       cuda.blockDim.x):
            pairs_of_target[k] = target_pair[k]
        cuda.syncthreads()
        base = int32(0) if profile else table_base(shared)
        thread = cuda.grid(1)
        group_index = thread // group
        lane = int32(thread & group_mask)
        slots = slot_row.shape[0]
        if group_index >= slots // 2:
            return
        warp_a = 2 * (group_index // WARP)
        slot_a = warp_a * WARP + group_index % WARP
        slot_b = slot_a + WARP
        m_a = int32(query_lengths[slot_a])
        m_b = int32(query_lengths[slot_b])
        n_a = max(int32(target_lengths[slot_a]), 0)   # -1: an unused slot
        n_b = max(int32(target_lengths[slot_b]), 0)
        codes = int32(codes)
        pad = int32(codes - 1)
        row_a = slot_row[slot_a]
        row_b = slot_row[slot_b]
        q0_a = query_offsets[pair_query[row_a]] if row_a >= 0 else 0
        q0_b = query_offsets[pair_query[row_b]] if row_b >= 0 else 0
        t0_a = uint64(target_offsets[pair_target[row_a]] if row_a >= 0 else 0)
        t0_b = uint64(target_offsets[pair_target[row_b]] if row_b >= 0 else 0)
        held = cuda.local.array(height, int32)
        h = cuda.local.array(height, int32)
        e = cuda.local.array(height, int32)
        first_row = lane * height   # (0-based) the row above the lane: the first's diagonal
        # the halves' padding rows above their queries (top-aligned), which shift rows
        skip_a = max(group * height - m_a, 0) if aligned else 0
        skip_b = max(group * height - m_b, 0) if aligned else 0
        # (traceback) the walk's copies of both halves' residues, interleaved by slot
        # (``base + WARP * i``, the bases of the warps' rows of ``warp_table``), and their
        # slots' starts: the gather's (:func:`~gpualign_df.kernels.gather.
        # prepare_inter_slots`), written as the fill reads the residues
        slot_lane = group_index % WARP
        walk_qa = uint64(warp_table[QUERY_ROW, warp_a] + slot_lane)
        walk_qb = uint64(warp_table[QUERY_ROW, warp_a + 1] + slot_lane)
        for r in range(height):
            i_a = first_row + r - skip_a
            i_b = first_row + r - skip_b
            low = int32(query_codes[q0_a + i_a]) if 0 <= i_a < m_a else pad
            high = int32(query_codes[q0_b + i_b]) if 0 <= i_b < m_b else pad
            if traceback:
                if 0 <= i_a < m_a:
                    walk_query[walk_qa + uint64(WARP * i_a)] = uint8(low)
                if 0 <= i_b < m_b:
                    walk_query[walk_qb + uint64(WARP * i_b)] = uint8(high)
            if profile:
                held[r] = query_pair[low * codes + high]
            else:
                held[r] = int32(query_pair[low * codes + high] * COPIES + lane % COPIES) << shift
            # column 0 (E there is minus infinity: the floor); padding rows keep the bias
            h[r] = 0 if local else pack_halves(
                bias if free_col0 or i_a < 0 else bias - go - i_a * ge,
                bias if free_col0 or i_b < 0 else bias - go - i_b * ge)
            e[r] = 0
        go2 = pack_pair(-go)
        ge2 = pack_pair(-ge)
        zero = int32(0)
        starts = lane == 0
        columns = warp_table[COLUMNS_ROW, warp_a]
        if traceback and lane == 0:
            for half in range(2):
                warp = warp_a + half
                slot = slot_b if half else slot_a
                write_slot_starts(slot_starts, slot, warp_table, warp, slot_lane,
                                  slot_lane * group * piece, columns)
        # traceback: both halves' piece 0 of this lane, the words between two pieces of a
        # lane (the threads of a warp of slots), the walk's targets
        at_lane = uint64((slot_lane * group + lane) * piece)
        pending = cuda.local.array(piece_words, uint32)
        words = (tb, uint64(warp_table[TRACEBACK_ROW, warp_a]) + at_lane,
                 uint64(warp_table[TRACEBACK_ROW, warp_a + 1]) + at_lane,
                 uint64(WARP * group * piece), int32(columns), -(int64(key_unit) >> bits),
                 int64(key_unit) >> bits, tb_address, pending)
        if traceback:   # the walk's copy of both targets: lane k takes columns k + lanes t,
            # two of each target an iteration, all four read before any is written
            walk_a = uint64(warp_table[TARGET_ROW, warp_a] + slot_lane)
            walk_b = uint64(warp_table[TARGET_ROW, warp_a + 1] + slot_lane)
            for first in range(lane, max(n_a, n_b), 2 * group):
                second = first + group
                a0 = target_codes[t0_a + uint64(first)] if first < n_a else 0
                a1 = target_codes[t0_a + uint64(second)] if second < n_a else 0
                b0 = target_codes[t0_b + uint64(first)] if first < n_b else 0
                b1 = target_codes[t0_b + uint64(second)] if second < n_b else 0
                if first < n_a:
                    walk_target[walk_a + uint64(WARP * first)] = a0
                if second < n_a:
                    walk_target[walk_a + uint64(WARP * second)] = a1
                if first < n_b:
                    walk_target[walk_b + uint64(WARP * first)] = b0
                if second < n_b:
                    walk_target[walk_b + uint64(WARP * second)] = b1
        ends = (int32(m_a + skip_a - 1 - first_row), int32(m_b + skip_b - 1 - first_row),
                int32(m_a + skip_a - first_row), int32(m_b + skip_b - first_row),
                int32(bias), int32(go), int32(ge), int32(skip_a - first_row),
                int32(skip_b - first_row))
        # best key (local: unit - 1, H 0, below every key of a cell above 0; else -1,
        # below every key), its columns, the last row's H and F*, the diagonal of the
        # first row (row first_row, column 0), the high half's best key (not local)
        if local:
            carried = (int32(pack_pair(key_scale - 1)), zero, zero, zero, zero, zero, zero)
        else:
            above_a = first_row - 1 - skip_a   # (0-based; -1: row 0)
            above_b = first_row - 1 - skip_b
            carried = (int32(-1), zero, zero, zero, zero,
                       pack_halves(bias if free_col0 or above_a < 0
                                   else bias - go - above_a * ge,
                                   bias if free_col0 or above_b < 0
                                   else bias - go - above_b * ge), int32(-1))
        # what every step reads (:func:`step`)
        lane_state = (lane, n_a, n_b, t0_a, t0_b, target_codes, pad, codes, pairs_of_target,
                      base, shared, held, h, e, starts, scratch, warp_lane, go2, ge2,
                      int32(key_unit), words, ends)
        # the warp's columns hold both targets; steps past them read padding only
        last_step = int32(columns) + group - 1
        plain = int32(0)   # steps where no half freezes its H (a multiple of unroll)
        if end_column:   # the first of them: columns within the warp's shortest target
            # for every lane (a step's column is at most its own), a warp-wide minimum
            shortest = min(n_a, n_b)
            for offset in (1, 2, 4, 8, 16):
                shortest = min(shortest, shuffle_across(shortest, offset, scratch, warp_lane))
            plain = shortest // unroll * unroll
            for s in range(0, plain, unroll):
                carried = steps(int32(s), 0, False, carried, lane_state)
        for s in range(plain, last_step, unroll):
            carried = steps(int32(s), 0, True, carried, lane_state)
        best, j_a, j_b, best_b = carried[0], carried[1], carried[2], carried[6]
        if end_column:   # column n: the query's rows (lane rows first ..< last), whose H
            # the lane's rows kept since (after every candidate of row m: ties as before)
            if n_a > 0:
                for r in range(height):
                    if ends[7] <= r < ends[2]:
                        best, j_a = fold_end(best, j_a, low_half(h[r]), r, n_a - 1)
            if n_b > 0:
                for r in range(height):
                    if ends[8] <= r < ends[3]:
                        best_b, j_b = fold_end(best_b, j_b, high_half(h[r]), r, n_b - 1)
        if corner_end:   # the corner; the walk writes the score
            if lane == 0 and row_a >= 0:
                score[row_a], query_end[row_a], target_end[row_a] = 0, m_a, n_a
            if lane == 0 and row_b >= 0:
                score[row_b], query_end[row_b], target_end[row_b] = 0, m_b, n_b
            return
        for half in range(2):
            if local:
                lane_best = low_half(best) if half == 0 else high_half(best)
            else:
                lane_best = best if half == 0 else best_b
            key, j = group_end(lane_best, j_a if half == 0 else j_b, lane, scratch,
                               warp_lane)
            row = row_a if half == 0 else row_b
            m = m_a if half == 0 else m_b
            n = n_a if half == 0 else n_b
            if lane == 0 and row >= 0:
                if not local and (m == 0 or n == 0):
                    score[row], query_end[row], target_end[row] = empty_end(m, n, go, ge)
                elif key > 0:
                    score[row] = (key >> ROW_BITS) - bias
                    query_end[row] = row_span - (key & (row_span - 1)) - (
                        skip_a if half == 0 else skip_b)
                    target_end[row] = j + 1
                else:
                    score[row] = 0
                    query_end[row] = 0
                    target_end[row] = 0

    return fill
