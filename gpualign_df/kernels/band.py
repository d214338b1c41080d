"""Band CUDA kernel for long pairs: one pair across the whole GPU.

The matrix of a problem (a pair, or a block of a pair's rows for the linear-space
traceback) is cut into bands of ``32 * rows`` query rows; a warp computes one band,
sweeping the target. Lane ``L`` holds rows ``L * rows + r`` in registers, skewed: on step
``s`` its row ``r`` computes column ``s - L * rows - r + 1``, so the ``rows`` cells of a
step are independent of each other and depend only on the previous step. A lane's first
row gets the H and I above it from the lane before by a warp shuffle; lane 0 gets them from
the band above through one int64 word per column in global memory (:func:`pack`): H, the
vertical gap state as ``min(H - I, go - ge + 1)`` (enough to recompute every cell and
traceback bit exactly: a gap state more than ``go - ge`` below H is never extended), and a
15-bit tag naming the band that wrote it, which is the readiness check (no flags, no
fences: a 64-bit store is seen whole). Lane 0's words are read in batches of 32 columns,
one per lane, prefetched a batch ahead with their columns' target residues and bypassing
L1 (``ld.global.cg`` in linked CUDA C that the optimizer cannot hoist out of the wait; an
atomic read without linked code; a plain read under the simulator). A band thus trails
the band above by its height plus two batches (smaller batches, loaded later, let bands
trail closer but then find their words missing far more often, and each miss costs a
read's round trip). Once checked, a word's tag bits carry its column's target residue to
lane 0, and the other lanes take theirs from the lane before with H and I, so no step
reads the target. The last lane writes the band's bottom row there for the band below,
and into a checkpoint row every ``checkpoint_every`` bands.

The step loop is what the time goes to, and with a few warps per scheduler its latency,
branches included, is the time: its arithmetic is 32-bit, steps run in unrolled groups, and
for DNA a row's scores sit in two registers (``byte_rows``). A band's first ``32 * rows - 1``
steps (some rows still left of column 1) lie on the path of every band below, which waits
for the band's bottom row, and so do its last ``32 * rows - 1`` steps (some rows already
right of column n), after which the band below finishes: they compute every row and keep,
by selects rather than branches, only what column 1 reads of the rows left of it (starting
steps) and only the H of rows right of column n (ending steps); a step that may have rows
outside on both sides (a target shorter than a band) keeps the whole state of the rows
outside (checked steps). The last lane's stores are predicated, not branches around one
lane's code.

Warps are persistent one-warp blocks that take work items (bands) from an atomic counter
in the order of ``item_order``, which takes each problem's bands top down, so the band a
warp waits for was taken earlier by a running warp: no deadlock whatever the residency.
Items are numbered problem by problem (a band's candidates go to its item's slot), and
taken band by band across the problems (:func:`gpualign_df.gpu.long.item_order`), so that
the problems' chains of bands advance together. A wait that outlasts ``SPIN_LIMIT`` polls sets the error word and every warp
leaves; a set stop flag (the host's Ctrl-C) makes warps take no further band.

Cells are the contract of :mod:`gpualign_df.kernels.cpu` (the same recurrences, tie-breaks
and traceback bits as :mod:`gpualign_df.kernels.strip`). Outside local mode they are held
with an offset (:func:`shifted_cells`): cell (i, j) keeps H, I and D plus ``(i + j) * ge``
(i counted from the pair's row 0), so a gap's extension costs nothing and its opening
``go - ge``, and a diagonal step adds the score plus ``2 * ge`` (in the shared table and
the byte rows): two instructions fewer a cell, the same comparisons (the values of one
cell share its offset) and therefore the same traceback bits. Border and checkpoint words
hold the offset H (row 0's words too); end-cell candidates and the H of column n are read
back without it. Scores stay within int32: the offset is at most ``(m + n) * ge``, which
the engines' score bound already counts. Traceback words are those of
strips of 8 rows: strip ``k``'s word of step ``s`` holds its 8 rows' nibbles (row ``r`` at
bits ``4 * (7 - r)``) for columns ``s - 8k - r + 1``, stored at ``tb0 + k * stride + s -
8k`` (``stride``: ``n + 7`` rounded up to 4, :func:`~gpualign_df.kernels.strip.skewed_stride`);
so the nibble of (i, j) is in word ``strip * stride + j - 1 + (i - 1) % 8``
(:func:`~gpualign_df.kernels.strip.skewed_word_index`). At 8 rows a lane a strip is a lane (k = band * 32 + L); at 4 two
lanes, whose rows compute the same columns on a step (k = (band * 32 + L) / 2): the even
lane joins the odd lane's 16 bits to its own and stores the word. A group of steps inside
the matrix stores each strip's words of four steps as one aligned 16-byte store (a quarter
of the stores and L2 sectors of one word a step). So the walk reads one layout whatever the
rows a lane.

A traceback fill of a few pairs is bound by its bands' critical path (each band trails
the one above), which the traceback's instructions lengthen. Such a fill may be split in
two passes (``split``): a score-only pass whose bands pass their bottom rows through kept
rows (one a band, cleared before) and store a snapshot of their lanes' registers every
``tile_steps`` steps, then a pass whose work items are the tiles of ``tile_steps`` steps of
every band, all independent: a tile restores its snapshot, reads the kept row above, and
runs the same steps on the same registers, so its words are the whole fill's.

Each band leaves its end-cell candidate (score, row, column) per work item;
:func:`reduce_kernel` folds a problem's bands in row order into its end cell.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint32, uint64

from ..scoring import NEG_INF
from . import dpx, inlined, simulator
from .strip import (SHARED_TABLE, STRIP_ROWS, WARP, append_sign, border_score, mode_shape,
                    skewed_stride_device, word_storer)

#: Fields of the ``problems`` table (one column per problem): lengths, residue starts,
#: the problem's first row in its pair (0, or a checkpoint row), offsets of its top row,
#: border row, traceback words, first work item and checkpoint rows, its job row, its
#: bands, its tiles a band, the offset of its snapshots (split fills) and of its last
#: column (fills with ``last_column``: H and D of (i, n) at ``2 * i`` and ``2 * i + 1``).
(F_M, F_N, F_Q0, F_T0, F_ROW0, F_TOP0, F_BORDER0, F_TB0, F_ITEM0, F_CKPT0, F_ROW,
 F_BANDS, F_TILES, F_SNAP0, F_COLUMN0) = range(15)
FIELDS = 15
#: How a fill is split (:func:`band_kernel`'s ``split``): not at all; the first pass of a
#: split traceback fill (no words; every band's bottom row kept and a snapshot of its
#: lanes' registers every ``tile_steps`` steps); the second pass (a work item is a tile
#: of ``tile_steps`` steps of one band, started from its snapshot, writing the words).
WHOLE, SNAPSHOT, RESUME = range(3)
#: Registers a lane keeps per row in a snapshot: H, I and D of its last cell, the H it
#: takes as its next diagonal, the target code it holds.
SNAPSHOT_FIELDS = 5
#: Kinds of step (:func:`band_kernel`): every row inside columns 1..n; rows perhaps left of
#: column 1 (none right of column n); rows perhaps right of column n (none left of column
#: 1); rows perhaps outside on either side.
PLAIN, STARTING, ENDING, CHECKED = range(4)


def step_edges(kind: int) -> tuple[bool, bool]:
    """Whether rows of a step of ``kind`` may lie left of column 1, and right of column n."""
    return kind in (STARTING, CHECKED), kind in (ENDING, CHECKED)


#: Steps of the unrolled loop body of a batch of plain steps (at most a batch).
BATCH_GROUP_STEPS = 8
#: Polls of a border word before a wait counts as a hang (the error word is set).
SPIN_LIMIT = 1 << 26
#: Tags are 15 bits and never 0 (a cleared border word is never taken for a band's).
TAG_MODULUS = (1 << 15) - 1
#: ``go - ge`` must stay below this for the packed gap state (``gap_delta_fits``).
DELTA_LIMIT = (1 << 16) - 2


def gap_delta_fits(gap_open: int, gap_extend: int) -> bool:
    """Whether the border word's 16-bit gap field holds ``min(H - I, go - ge + 1)``."""
    return gap_open - gap_extend < DELTA_LIMIT


def tag_of(band: int) -> int:
    """The tag of the words band ``band`` writes (band ``band + 1`` waits for it)."""
    return band % TAG_MODULUS + 1


def band_rows(rows: int, lanes: int = WARP) -> int:
    """Query rows of one band (one warp of ``lanes`` lanes)."""
    return lanes * rows


def band_trail(rows: int, lanes: int = WARP) -> int:
    """Columns a band trails the band above by at least: its height and two batches of
    ``lanes`` words (the one it checks and the one loaded ahead)."""
    return band_rows(rows, lanes) + 2 * lanes


@inlined
def pack(h, i_value, cap, tag):
    """A border word: H (low 32 bits), ``min(H - I, cap + 1)`` (16 bits), the tag."""
    delta = min(uint32(h - i_value), uint32(cap + 1))  # H >= I: no sign to keep
    return (int64(tag) << 48) | (int64(delta) << 32) | int64(uint32(h))


@inlined
def unpack(word):
    """(H, I) of a border word."""
    h = int32(((word & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000)
    return h, int32(h - ((word >> 32) & 0xFFFF))


@inlined
def word_tag(word):
    return (word >> 48) & 0x7FFF


#: A border word less its tag: once checked, the tag's 16 bits carry a target residue.
LOW_BITS = (1 << 48) - 1
#: A wait polls this often without sleeping (a band that has caught up with the one above
#: waits briefly at most batches), then sleeps between polls, from MIN_NAP ns doubling to
#: MAX_NAP ns (a band taken long before its turn leaves the issue slots and the memory
#: system to the working bands).
NAP_AFTER, MIN_NAP, MAX_NAP = 64, 64, 1024


@inlined
def spin_check(spins, work):
    """``spins`` + 1, or -1 where the wait counts as a hang (``SPIN_LIMIT`` polls) or
    another warp's did (``work[1]`` set, read every 1024 polls): the error word is set."""
    spins += 1
    if spins >= SPIN_LIMIT or ((spins & 1023) == 0 and cuda.atomic.add(work, 1, 0) != 0):
        work[1] = 1
        return -1
    return spins


def shifted_cells(local: bool) -> bool:
    """Whether a band fill's cells hold the offset ``(i + j) * ge``: every mode but local,
    where the offset would make the zero floor and every end-cell candidate cost an
    instruction a cell and save nothing."""
    return not local


def top_row(n: int, gap_open: int, gap_extend: int, free_row0: bool, local: bool):
    """Border words of row 0 (H of the mode's top border, plus the offset ``j * ge`` where
    cells are shifted; no gap state) as int64 (on a GPU,
    :func:`gpualign_df.gpu.long.top_words` builds the same on the device)."""
    import numpy as np

    j = np.arange(n + 1, dtype=np.int64)
    shift = gap_extend if shifted_cells(local) else 0
    h = np.where((j == 0) | free_row0, 0, -(gap_open + (j - 1) * gap_extend)) + j * shift
    delta = gap_open - gap_extend + 1
    return (delta << 32) | (h & 0xFFFFFFFF)


def _plain_load(array, address, index):
    return array[index]


def _atomic_load(array, address, index):
    return cuda.atomic.add(array, index, 0)


def _plain_store(array, address, index, value, predicate):
    if predicate:
        array[uint64(index)] = value


@lru_cache(maxsize=None)
def _storer(linked: bool):
    """A store of an int64 word at an int64 index where a predicate holds (the index may be
    negative where it does not): predicated, not a branch (a branch around the last lane's
    store would end the straight-line code of a group of steps), in linked CUDA C; a plain
    conditional store elsewhere."""
    if simulator():
        return _plain_store
    if not linked:
        return inlined(_plain_store)
    store_cg = dpx.store_if()

    def linked_store(array, address, index, value, predicate):
        store_cg(address, index, value, int32(predicate))

    return inlined(linked_store)


@lru_cache(maxsize=None)
def _loader(linked: bool):
    """A read of a border word that bypasses L1 and is never hoisted out of a wait."""
    if simulator():
        return _plain_load
    if not linked:
        return inlined(_atomic_load)
    load_cg = dpx.load_cg()

    def linked_load(array, address, index):
        return load_cg(address, index)

    return inlined(linked_load)


def _exchange_simulated(h, i_value, code, word, source, lane, scratch):
    """The simulator's warp exchange (no shuffles there): through shared memory."""
    cuda.syncthreads()
    scratch[0, lane] = h
    scratch[1, lane] = i_value
    scratch[2, lane] = word
    scratch[3, lane] = code
    cuda.syncthreads()
    if lane > 0:
        return (int32(scratch[0, lane - 1]), int32(scratch[1, lane - 1]),
                int32(scratch[3, lane - 1]), scratch[2, source])
    return h, i_value, code, scratch[2, source]


def _broadcast_simulated(value, lane, scratch):
    cuda.syncthreads()
    if lane == 0:
        scratch[2, 0] = value
    cuda.syncthreads()
    return scratch[2, 0]


def _pause_simulated(nanoseconds):
    pass


def _every_simulated(predicate):
    return cuda.syncthreads_and(1 if predicate else 0) != 0


def _next_word_simulated(word, lane, scratch):
    cuda.syncthreads()
    scratch[0, lane] = int64(word)
    cuda.syncthreads()
    return uint32(scratch[0, lane + 1]) if lane + 1 < scratch.shape[1] else word


def _warp_functions(lanes: int):
    """(exchange, broadcast, pause, every, next_word) for a band of ``lanes`` threads: the
    lane before's (H, I, target code) and lane ``source``'s word; lane 0's value to every
    lane; a sleep of a wait; whether a predicate holds in every lane; the next lane's
    traceback word. Shuffles, votes and ``nanosleep`` on a GPU; shared memory and block
    votes under the simulator (which has neither shuffles nor warp votes; there a band is a
    block)."""
    if simulator():
        return (_exchange_simulated, _broadcast_simulated, _pause_simulated,
                _every_simulated, _next_word_simulated)
    mask = (1 << lanes) - 1

    @inlined
    def exchange(h, i_value, code, word, source, lane, scratch):
        return (cuda.shfl_up_sync(mask, h, 1), cuda.shfl_up_sync(mask, i_value, 1),
                cuda.shfl_up_sync(mask, code, 1), cuda.shfl_sync(mask, word, source))

    @inlined
    def broadcast(value, lane, scratch):
        # through shared memory, not a shuffle: a value read at one shared address can be
        # taken as the same in every lane, and the whole band's work derives from it
        if lane == 0:
            scratch[2, 0] = value
        cuda.syncwarp(mask)
        value = scratch[2, 0]
        cuda.syncwarp(mask)
        return value

    @inlined
    def pause(nanoseconds):
        cuda.nanosleep(nanoseconds)

    @inlined
    def every(predicate):
        return cuda.all_sync(mask, predicate) != 0

    @inlined
    def next_word(word, lane, scratch):
        return uint32(cuda.shfl_down_sync(mask, int32(word), 1))  # (no unsigned shuffles)

    return exchange, broadcast, pause, every, next_word


@inlined
def tag_of_device(band):
    return band % TAG_MODULUS + 1


@lru_cache(maxsize=None)
def band_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                use_dpx: bool, rows: int, lanes: int = WARP, byte_rows: bool = False,
                checkpointed: bool = False, split: int = WHOLE, last_column: bool = False):
    """The band fill for one mode / free-ends / traceback combination, ``rows`` query rows
    a lane (2, 4 or 8; 4 or 8 with traceback). Launch with 32 threads a block and any
    number of blocks (they take bands from ``work[0]``).
    ``lanes``: threads of a band, a power of two up to 32 (fewer only to test bands of
    few rows under the simulator). ``byte_rows``: every residue of the launch has a code
    below 8 and those codes' scores fit a signed byte (:func:`byte_scores_fit`), so each row
    keeps its scores in two registers and a cell's score is one byte select instead of a
    shared-memory read. ``checkpointed``: the launch keeps checkpoint rows (its
    ``checkpoint_every`` is positive); other fills compile no checkpoint store.
    ``split``: :data:`WHOLE`, or a pass of a split traceback fill: :data:`SNAPSHOT` (score
    only, checkpointed every band, snapshots every ``tile_steps`` steps) or :data:`RESUME`
    (traceback; work items are tiles, no border rows, no end-cell candidates).
    ``last_column``: each band also writes H and D of its rows' cells in column n (without
    the offset) to ``columns`` at the problem's ``F_COLUMN0`` (rows right of column n keep
    their D as well as their H), for fills whose halves meet in the middle."""
    assert not (last_column and (traceback or split != WHOLE))
    assert rows in (2, 4, 8) and (rows in (4, STRIP_ROWS) or not traceback)
    assert split == WHOLE or (split == SNAPSHOT) == (checkpointed and not traceback)
    local, corner, _free_row0, free_col0, end_row, end_column = mode_shape(mode, fqs, fqe, fts,
                                                                         fte)
    resume = split == RESUME
    snapshot = split == SNAPSHOT
    track = (local or end_row) and not resume  # a resumed tile's end cell is known
    shifted = shifted_cells(local)
    shift = 1 if shifted else 0  # the offset's weight where a formula adds it
    add_max, max3, max3_zero = dpx.functions(use_dpx)
    append = dpx.append_sign() if use_dpx else append_sign
    byte_score = dpx.byte_score(use_dpx)
    byte_selector = dpx.byte_selector
    load = _loader(use_dpx)
    store = _storer(use_dpx)
    store_words = word_storer(use_dpx)
    exchange, broadcast, pause, every, next_word = _warp_functions(lanes)
    # lanes a strip (8 rows, one traceback word a column) spans: at four rows a lane, an
    # even lane's rows 0-3 and the next lane's rows 4-7 compute the same columns on a step,
    # so the even lane joins their nibbles into the strip's word and stores it
    strip_lanes = STRIP_ROWS // rows if traceback else 1
    neg = NEG_INF
    initial_best = 0 if local else neg
    fold = candidate_fold(corner)
    band_height = lanes * rows
    # the step loop's arithmetic stays 32-bit (a Python int constant would widen it to 64
    # bits, twice the instructions); indices are unsigned (no negative-index wrap code)
    one, rows32, height32 = int32(1), int32(rows), int32(band_height)
    batch_mask, lanes32, tb_last = int32(lanes - 1), int32(lanes), int32(STRIP_ROWS - 2)
    # a score-only fill without checkpoints numbers the steps of an unrolled group ``s0 + k``
    # (``k`` a constant of the unrolling), so that each step's border store is the group's
    # address plus an immediate and its source lane ``(s0 & batch_mask) + k`` (a group starts
    # on a multiple of its width): the sign extension of a 32-bit ``s0 + k`` cannot be
    # folded, and four 64-bit address instructions a step are the narrow fills' largest
    # overhead. Fills with traceback words or checkpoints keep each step's own number: their
    # stores are addressed as the compiler schedules them best there (folding them made
    # their passes slower on an H100 with no more instructions).
    folded = not traceback and not checkpointed
    no_offset = int32(0)

    def make_step(kind):
        """One step of a lane, of a kind (:data:`PLAIN`, :data:`STARTING`, :data:`ENDING`,
        :data:`CHECKED`): whether rows may lie outside columns 1..n. A checked step computes
        every row as a plain one and keeps, by selects rather than branches, the state of
        rows outside the matrix. The first and last ``height - 1`` steps of every band lie
        on the path of the bands below, so they have lighter kinds where rows can lie
        outside on one side only. Starting: a row left of column 1 keeps its H and gap
        state (what column 1 reads) by selects and lets the rest run unchecked, since the
        values a row computes there reach only such rows (its next left of column 1, the
        row below a step later), the H it passes down is the kept one (the H above column 0
        that column 1 takes as its diagonal), and no walk reads a traceback nibble left of
        column 1. Ending: a row right of column n keeps its H (the end cell reads it) and
        lets the rest run, since what a row computes there reaches only such rows (its next
        step, the row below a step later) and no walk reads a nibble right of column n."""
        left, right = step_edges(kind)
        checked = left and right
        keeps_gap = left or (right and last_column)  # rows outside keep their D

        @inlined
        def step(s, lane, n, up_h, up_i, subs, open32, extend32, zero, h_left, i_reg, d_reg, diag,
                 best, best_j):
            word = uint32(0)
            c = s - lane * rows32 + one
            for r in range(rows):
                carry_h = h_left[r]
                carry_i = i_reg[r]
                d_old = d_reg[r]
                open_ins = int32(up_h + open32)
                open_del = int32(h_left[r] + open32)
                ins_ext = up_i if shifted else int32(up_i + extend32)
                del_ext = d_old if shifted else int32(d_old + extend32)
                match = int32(diag[r] + subs[r])
                if use_dpx:
                    ins = add_max(up_h, open32, ins_ext)
                    dele = add_max(h_left[r], open32, del_ext)
                    h = max3_zero(match, ins, dele) if local else max3(match, ins, dele)
                else:
                    ins = max(open_ins, ins_ext)
                    dele = max(open_del, del_ext)
                    h = max(max(match, ins), dele)
                    if local:
                        h = max(h, 0)
                inside = (c >= one or not left) and (c <= n or not right)
                if traceback:
                    before = word
                    word = append(word, int32(open_del - del_ext))
                    word = append(word, int32(open_ins - ins_ext))
                    word = append(word, int32(max(match, ins) - dele))
                    word = append(word, int32(match - ins))
                    if checked:
                        word = word if inside else before << uint32(4)
                if kind != PLAIN:  # what a row outside keeps: H always, more by kind
                    if track and inside and int32(h - zero) > best[r]:
                        best[r] = int32(h - zero)
                        best_j[r] = c
                    diag[r] = up_h if inside or not checked else diag[r]
                    h_left[r] = h if inside else h_left[r]
                    i_reg[r] = ins if inside or not checked else i_reg[r]
                    d_reg[r] = dele if inside or not keeps_gap else d_reg[r]
                else:
                    if track and int32(h - zero) > best[r]:
                        best[r] = int32(h - zero)
                        best_j[r] = c
                    diag[r] = up_h
                    h_left[r] = h
                    i_reg[r] = ins
                    d_reg[r] = dele
                up_h = carry_h
                up_i = carry_i
                c -= one
            return word

        return step

    def make_advance(kind, keeps_word=False):
        """One step of a lane with its exchanges and stores (a step whose rows may lie
        outside stores only what lies inside the matrix); ``keeps_word``: the step returns
        its traceback word instead of storing it (:func:`word_group`)."""
        step = make_step(kind)
        left, right = step_edges(kind)

        @inlined
        def advance(s0, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch, tb,
                    tb_base, writes_tb, border, border0, store_border, checkpoints, checkpoint,
                    store_checkpoint, my_tag):
            if folded:
                s = int32(s0 + k)
            else:  # k is 0; s0 keeps the type its caller gave it (32 or 64 bits)
                s = s0
            h_left, i_reg, d_reg, diag, best, best_j, t_codes, subs, row_low, row_high, \
                row_offset, zero_base = regs
            # the offset of the step's cells, (i + j) * ge (the same for every row of a
            # step), which an end-cell candidate drops
            zero = int32(zero_base + s * ge32) if shifted and track else int32(0)
            extend32 = int32(-ge32)  # a gap extended (plain cells only)
            bottom_h, bottom_i, bottom_code, word_in = exchange(
                h_left[rows - 1], i_reg[rows - 1], t_codes[rows - 1], current,
                int32((s0 & batch_mask) + k) if folded else s & batch_mask, lane, scratch)
            # row r sees the residue row r - 1 saw a step before; then the scores
            for r in range(rows - 1, 0, -1):
                t_codes[r] = t_codes[r - 1]
            if lane == 0:
                up_h, up_i = unpack(word_in)
                t_codes[0] = int32((word_in >> 48) & 0xFFFF)
            else:
                up_h = bottom_h
                up_i = bottom_i
                t_codes[0] = bottom_code
            for r in range(rows):
                if byte_rows:
                    subs[r] = byte_score(row_low[r], row_high[r], t_codes[r])
                else:
                    subs[r] = shared_sub[uint32(row_offset[r] + t_codes[r])]
            word = step(s, lane, n, up_h, up_i, subs, open32, extend32, zero, h_left, i_reg, d_reg,
                        diag, best, best_j)
            if strip_lanes == 2:
                word = (word << uint32(16)) | next_word(word, lane, scratch)
            index = s - lane * rows32
            c = s - height32 + int32(2)  # the last lane's column
            writes_word = writes_tb and (index >= 0 or not left) and (
                index <= n + tb_last or not right)
            writes_column = (c >= one or not left) and (c <= n or not right)
            if writes_word and not keeps_word:
                tb[0][tb_base + uint64(index)] = word
            packed = pack(h_left[rows - 1], i_reg[rows - 1], cap, my_tag)
            if folded:  # the group's address and a constant: an immediate offset a step
                store(border[0], border[1], (border0 + int64(s0)) + int64(k + int32(2) - height32),
                      packed, store_border and writes_column)
            else:
                store(border[0], border[1], border0 + int64(c), packed,
                      store_border and writes_column)
            if checkpointed:
                store(checkpoints[0], checkpoints[1], checkpoint + int64(c), packed,
                      store_checkpoint and writes_column)
            return word

        return advance

    advance_checked = make_advance(CHECKED)
    advance_starting = make_advance(STARTING)
    advance_ending = make_advance(ENDING)
    advance_plain = make_advance(PLAIN)

    def doubled(advance, offset):
        """``advance`` on steps s and s + ``offset`` (unrolled: two calls): in a folded
        fill, as the group's first step ``s0`` with constants ``k`` and ``k + offset``."""
        offset32 = int32(offset)

        @inlined
        def twice(s0, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch, tb,
                  tb_base, writes_tb, border, border0, store_border, checkpoints, checkpoint,
                  store_checkpoint, my_tag):
            advance(s0, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch, tb,
                    tb_base, writes_tb, border, border0, store_border, checkpoints, checkpoint,
                    store_checkpoint, my_tag)
            advance(s0 + offset32, k, lane, n, current, regs, shared_sub, open32, ge32, cap,
                    scratch, tb, tb_base, writes_tb, border, border0, store_border, checkpoints,
                    checkpoint, store_checkpoint, my_tag)

        @inlined
        def twice_folded(s0, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch,
                         tb, tb_base, writes_tb, border, border0, store_border, checkpoints,
                         checkpoint, store_checkpoint, my_tag):
            advance(s0, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch, tb,
                    tb_base, writes_tb, border, border0, store_border, checkpoints, checkpoint,
                    store_checkpoint, my_tag)
            advance(s0, int32(k + offset32), lane, n, current, regs, shared_sub, open32, ge32,
                    cap, scratch, tb, tb_base, writes_tb, border, border0, store_border,
                    checkpoints, checkpoint, store_checkpoint, my_tag)

        return twice_folded if folded else twice

    # steps go in groups of ``group`` (unrolled: the rows' registers rotate by renaming, and
    # a group pays one loop branch), plain or, at four rows a lane, starting or checked too
    # (at eight the code of such groups costs more than it saves: single steps there); a
    # group never straddles a batch
    group = min(rows, lanes)
    group_checked = rows == 4

    def grouped(advance):
        width = 1
        while width < group:
            advance = doubled(advance, width)
            width *= 2
        return advance

    def word_group():
        """Four plain steps whose words a strip's lane stores at once: its words of steps
        s..s+3 are consecutive (index ``s - lane * rows``, a multiple of 4 on a group's first
        step, as the strips' stride and every problem's words start)."""
        keep = make_advance(PLAIN, True)

        @inlined
        def four(s, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch, tb,
                 tb_base, writes_tb, border, border0, store_border, checkpoints, checkpoint,
                 store_checkpoint, my_tag):
            words = (keep(s, k, lane, n, current, regs, shared_sub, open32, ge32, cap, scratch,
                          tb, tb_base, writes_tb, border, border0, store_border, checkpoints,
                          checkpoint, store_checkpoint, my_tag),
                     keep(s + one, k, lane, n, current, regs, shared_sub, open32, ge32, cap,
                          scratch, tb, tb_base, writes_tb, border, border0, store_border,
                          checkpoints, checkpoint, store_checkpoint, my_tag),
                     keep(s + int32(2), k, lane, n, current, regs, shared_sub, open32, ge32, cap,
                          scratch, tb, tb_base, writes_tb, border, border0, store_border,
                          checkpoints, checkpoint, store_checkpoint, my_tag),
                     keep(s + int32(3), k, lane, n, current, regs, shared_sub, open32, ge32, cap,
                          scratch, tb, tb_base, writes_tb, border, border0, store_border,
                          checkpoints, checkpoint, store_checkpoint, my_tag))
            store_words(tb[0], tb[1], tb_base + uint64(s - lane * rows32), words, writes_tb)

        width = 4
        while width < group:
            four = doubled(four, width)
            width *= 2
        return four

    plain_group = word_group() if traceback and group % 4 == 0 else grouped(advance_plain)
    # a batch whose steps are all plain (most of a long band's) runs as a tight loop of
    # ``batch_width`` unrolled steps: one 32-bit compare and branch per iteration instead of
    # the batch and kind checks of every group (which took as long as the steps themselves
    # where a band has a scheduler to itself)
    batch_group = plain_group
    batch_width = group
    while batch_width < min(BATCH_GROUP_STEPS, lanes):
        batch_group = doubled(batch_group, batch_width)
        batch_width *= 2
    batch_width32 = int32(batch_width)
    checked_group = grouped(advance_checked)
    starting_group = grouped(advance_starting)
    ending_group = grouped(advance_ending)
    group_mask = int32(group - 1)
    group32 = int32(group)

    @cuda.jit
    def fill(query, target, problems, item_order, item_problem, total_items, sub,
             alphabet_size, go, ge,
             top, top_address, border, border_address, checkpoints, checkpoints_address,
             checkpoint_every, tb, tb_address, snapshots, tile_steps,
             band_score, band_i, band_j, control, work, columns):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        scratch = cuda.shared.array((4, lanes), int64)
        cand_score = cuda.shared.array(lanes, int32)
        cand_i = cuda.shared.array(lanes, int32)
        cand_j = cuda.shared.array(lanes, int32)
        lane = cuda.threadIdx.x
        for k in range(lane, alphabet_size * alphabet_size, lanes):
            shared_sub[k] = sub[k] + shift * 2 * ge  # a diagonal step adds 2 ge of offset
        cuda.syncthreads()
        row_offset = cuda.local.array(rows, int32)
        row_low = cuda.local.array(rows, int32)
        row_high = cuda.local.array(rows, int32)
        h_left = cuda.local.array(rows, int32)
        i_reg = cuda.local.array(rows, int32)
        d_reg = cuda.local.array(rows, int32)
        diag = cuda.local.array(rows, int32)
        t_codes = cuda.local.array(rows, int32)
        subs = cuda.local.array(rows, int32)
        best = cuda.local.array(rows, int32)
        best_j = cuda.local.array(rows, int32)
        open32 = int32(shift * ge - go)  # a gap opened from H
        ge32 = int32(ge)
        cap = int32(go - ge)
        while True:
            item = int64(0)
            if lane == 0:
                taken = cuda.atomic.add(work, 0, 1)
                if cuda.atomic.add(control, 0, 0) != 0 or cuda.atomic.add(work, 1, 0) != 0:
                    taken = total_items  # stopped (Ctrl-C) or a hang elsewhere: leave
                item = item_order[taken] if taken < total_items else total_items
            item = broadcast(item, lane, scratch)
            if item >= total_items:
                break
            p = item_problem[item]
            m = int32(problems[F_M, p])
            n = int32(problems[F_N, p])
            q0 = problems[F_Q0, p]
            t0 = problems[F_T0, p]
            row0 = int32(problems[F_ROW0, p])
            band = int32(item - problems[F_ITEM0, p])
            tiles = int32(problems[F_TILES, p])
            tile = int32(0)
            if resume:  # item: tile ``tile`` of band ``band``
                tile = band % tiles
                band = band // tiles
            first = band * height32 + lane * rows32 + one  # problem-relative first row
            for r in range(rows):
                i = first + int32(r)
                code = query[uint64(q0 + i - one)] if i <= m else 0
                row_offset[r] = int32(code) * int32(alphabet_size)
                if byte_rows:  # the row's scores against codes 0-3 and 4-7, a byte each
                    low = uint32(0)
                    high = uint32(0)
                    for k in range(4):
                        if k < alphabet_size:
                            low |= uint32(shared_sub[row_offset[r] + k] & 0xFF) << uint32(8 * k)
                        if k + 4 < alphabet_size:
                            high |= uint32(shared_sub[row_offset[r] + k + 4]
                                           & 0xFF) << uint32(8 * k)
                    row_low[r] = int32(low)
                    row_high[r] = int32(high)
                h_left[r] = border_score(row0 + i, go, ge, free_col0) + shift * (row0 + i) * ge
                diag[r] = (border_score(row0 + i - one, go, ge, free_col0)
                           + shift * (row0 + i - one) * ge)
                i_reg[r] = neg
                d_reg[r] = neg
                t_codes[r] = 0
                best[r] = neg
                best_j[r] = 0
            steps = int32(n + height32 - one)
            s = int32(0)
            s_stop = steps
            snap_lanes = int64(SNAPSHOT_FIELDS * rows * lanes)
            if resume:
                s = int32(tile * int32(tile_steps))
                s_stop = int32(min(s + int32(tile_steps), steps))
                if tile > 0:  # the registers the first pass had on this step
                    snap = problems[F_SNAP0, p] + int64(band * tiles + tile) * snap_lanes
                    for r in range(rows):
                        h_left[r] = snapshots[snap + (0 * rows + r) * lanes + lane]
                        i_reg[r] = snapshots[snap + (1 * rows + r) * lanes + lane]
                        d_reg[r] = snapshots[snap + (2 * rows + r) * lanes + lane]
                        diag[r] = snapshots[snap + (3 * rows + r) * lanes + lane]
                        t_codes[r] = snapshots[snap + (4 * rows + r) * lanes + lane]
            # lane 0's words: column 32 * batch + 1 + lane in ``current`` (being used) and
            # ``ahead`` (the next batch, in flight, with its columns' target codes); the
            # passes of a split fill read the bottom row the band above keeps
            if band == 0:
                source = top
                address = top_address
                source0 = problems[F_TOP0, p]
                expected = -1
            elif resume or snapshot:
                source = checkpoints
                address = checkpoints_address
                source0 = problems[F_CKPT0, p] + int64(band - 1) * int64(n + 1)
                expected = tag_of_device(band - 1)
            else:
                source = border
                address = border_address
                source0 = problems[F_BORDER0, p]
                expected = tag_of_device(band - 1)
            border0 = problems[F_BORDER0, p]
            t_start = uint64(t0)
            column = s + lane + one
            ahead = int64(0)
            ahead_code = int32(0)
            if column <= n:
                ahead = load(source, address, source0 + column)
                ahead_code = int32(target[t_start + uint64(column - one)])
            current = ahead
            # a band below reads it (not from a resumed tile: the first pass kept it)
            writes_border = band_height * (band + 1) < m and not resume
            checkpoint = int64(0)
            keeps_rows = False
            if (checkpointed and checkpoint_every > 0 and writes_border
                    and (band + 1) % checkpoint_every == 0):
                keeps_rows = True
                checkpoint = (problems[F_CKPT0, p]
                              + ((band + 1) // checkpoint_every - 1) * (n + 1))
            strip = (band * lanes + lane) // strip_lanes
            tb_base = uint64(problems[F_TB0, p] + strip * skewed_stride_device(n))
            writes_tb = traceback and first <= m and lane % strip_lanes == 0
            my_tag = tag_of_device(band)
            store_checkpoint = lane == lanes32 - one and writes_border and keeps_rows
            # (a first pass's band below reads the kept row: no border row)
            store_border = lane == lanes32 - one and writes_border and not snapshot
            # steps whose rows all lie inside columns 1..n, in whole groups
            plain_first = int32(height32 - one)
            plain_last = int32(n - group32)
            last_group = int32(steps - group32)  # the last step that starts a whole group
            border_ref = (border, border_address)
            checkpoint_ref = (checkpoints, checkpoints_address)
            tb_ref = (tb, tb_address)
            zero_base = int32((row0 + first - lane * rows32 + one) * ge)
            regs = (h_left, i_reg, d_reg, diag, best, best_j, t_codes, subs, row_low, row_high,
                    row_offset, zero_base)
            while s < s_stop:  # (a range() here counts in 64 bits)
                if (s & batch_mask) == 0:
                    if snapshot and s > 0 and s % int32(tile_steps) == 0:
                        # the lanes' registers before step s: tile s / tile_steps resumes
                        # from them (a warp-wide branch, once a tile)
                        snap = problems[F_SNAP0, p] + (
                            int64(band * tiles + s // int32(tile_steps)) * snap_lanes)
                        for r in range(rows):
                            snapshots[snap + (0 * rows + r) * lanes + lane] = h_left[r]
                            snapshots[snap + (1 * rows + r) * lanes + lane] = i_reg[r]
                            snapshots[snap + (2 * rows + r) * lanes + lane] = d_reg[r]
                            snapshots[snap + (3 * rows + r) * lanes + lane] = diag[r]
                            snapshots[snap + (4 * rows + r) * lanes + lane] = t_codes[r]
                    # a new batch: lane k's word is column s + 1 + k (lane 0's on step s + k),
                    # prefetched a batch ago; a lane whose word is not there yet polls it,
                    # sleeping longer and longer between polls (waiting warps leave the memory
                    # system and the issue slots to the working ones)
                    current = ahead
                    column = s + one + lane
                    inside = column <= n
                    if expected >= 0:
                        # the warp waits as one (a vote ends the loop): a wait loop of its
                        # own in each lane would make the compiler guard every later shuffle
                        # against a divergent warp
                        ready = not inside or word_tag(current) == expected
                        spins = 0
                        nap = uint32(MIN_NAP)
                        while not every(ready):
                            if spins >= NAP_AFTER:
                                pause(nap)
                                nap = min(nap * uint32(2), uint32(MAX_NAP))
                            if not ready:
                                current = load(source, address, source0 + column)
                                ready = word_tag(current) == expected
                            spins = spin_check(spins, work)
                            if not every(spins >= 0):  # a hang: the results are void
                                current = int64(expected) << 48
                                break
                    # the tag has served: lane 0 takes the column's target residue with the
                    # word (the other lanes take theirs from the lane before, a step late)
                    code = ahead_code if inside else int32(0)
                    if byte_rows:
                        code = byte_selector(code)
                    current = (current & LOW_BITS) | (int64(code) << 48)
                    column += lanes32  # the next batch's
                    if column <= n:
                        ahead = load(source, address, source0 + column)
                        ahead_code = int32(target[t_start + uint64(column - one)])
                batch_end = int32(s + lanes32)
                if ((s & batch_mask) == 0 and s >= plain_first and batch_end <= n
                        and batch_end <= s_stop):
                    while s < batch_end:
                        batch_group(s, no_offset, lane, n, current, regs, shared_sub, open32, ge32,
                                    cap, scratch, tb_ref, tb_base, writes_tb, border_ref, border0,
                                    store_border, checkpoint_ref, checkpoint, store_checkpoint,
                                    my_tag)
                        s = int32(s + batch_width32)
                    continue
                plain = s >= plain_first and s <= plain_last
                if (s & group_mask) == 0 and s <= last_group and (plain or group_checked):
                    if plain:
                        plain_group(s, no_offset, lane, n, current, regs, shared_sub, open32, ge32,
                                    cap, scratch, tb_ref, tb_base, writes_tb, border_ref, border0,
                                    store_border, checkpoint_ref, checkpoint, store_checkpoint,
                                    my_tag)
                    elif s < plain_first and s + group32 <= n:  # no row right of column n
                        starting_group(s, no_offset, lane, n, current, regs, shared_sub,
                                       open32, ge32, cap, scratch, tb_ref, tb_base, writes_tb,
                                       border_ref, border0, store_border, checkpoint_ref,
                                       checkpoint, store_checkpoint, my_tag)
                    elif s >= plain_first:  # no row left of column 1
                        ending_group(s, no_offset, lane, n, current, regs, shared_sub,
                                     open32, ge32, cap, scratch, tb_ref, tb_base, writes_tb,
                                     border_ref, border0, store_border, checkpoint_ref,
                                     checkpoint, store_checkpoint, my_tag)
                    else:
                        checked_group(s, no_offset, lane, n, current, regs, shared_sub,
                                      open32, ge32, cap, scratch, tb_ref, tb_base, writes_tb,
                                      border_ref, border0, store_border, checkpoint_ref,
                                      checkpoint, store_checkpoint, my_tag)
                    s = int32(s + group32)
                elif not group_checked and s < plain_first and s < n:
                    advance_starting(s, no_offset, lane, n, current, regs, shared_sub, open32, ge32,
                                     cap, scratch, tb_ref, tb_base, writes_tb, border_ref, border0,
                                     store_border, checkpoint_ref, checkpoint, store_checkpoint,
                                     my_tag)
                    s = int32(s + one)
                elif not group_checked and s >= plain_first:
                    advance_ending(s, no_offset, lane, n, current, regs, shared_sub, open32, ge32,
                                   cap, scratch, tb_ref, tb_base, writes_tb, border_ref, border0,
                                   store_border, checkpoint_ref, checkpoint, store_checkpoint,
                                   my_tag)
                    s = int32(s + one)
                else:
                    advance_checked(s, no_offset, lane, n, current, regs, shared_sub, open32, ge32,
                                    cap, scratch, tb_ref, tb_base, writes_tb, border_ref, border0,
                                    store_border, checkpoint_ref, checkpoint, store_checkpoint,
                                    my_tag)
                    s = int32(s + one)
            if resume:  # a band's cells count once, with its last tile
                if lane == 0 and s_stop == steps:
                    done_rows = min(band_height, m - band * band_height)
                    cuda.atomic.add(control, 1, int64(done_rows) * int64(n))
                continue
            if last_column:
                column0 = problems[F_COLUMN0, p]
                for r in range(rows):
                    i = first + r
                    if i <= m:
                        offset = int32(shift * (row0 + i + n) * ge)
                        columns[column0 + 2 * i] = int32(h_left[r] - offset)
                        columns[column0 + 2 * i + 1] = int32(d_reg[r] - offset)
            # the band's end-cell candidate: rows ascending, strict > (corner: row m)
            value = initial_best
            value_i = 0
            value_j = 0
            for r in range(rows):
                i = first + r
                if i <= m:
                    last = int32(h_left[r] - shift * (row0 + i + n) * ge)  # H of (i, n)
                    if local or (end_row and i == m):
                        if best[r] > value:
                            value = best[r]
                            value_i = i
                            value_j = best_j[r]
                    elif end_column and last > value:
                        value = last
                        value_i = i
                        value_j = n
                    if corner and i == m:
                        value = last
                        value_i = m
                        value_j = n
            cand_score[lane] = value
            cand_i[lane] = value_i
            cand_j[lane] = value_j
            cuda.syncthreads()
            if lane == 0:
                total = initial_best
                total_i = 0
                total_j = 0
                for k in range(lanes):
                    total, total_i, total_j = fold(total, total_i, total_j, cand_score[k],
                                                   cand_i[k], cand_j[k], m)
                band_score[item] = total
                band_i[item] = total_i
                band_j[item] = total_j
                done_rows = min(band_height, m - band * band_height)
                cuda.atomic.add(control, 1, int64(done_rows) * int64(n))
            cuda.syncthreads()

    return fill


#: Codes a byte row holds (:func:`band_kernel`'s ``byte_rows``).
BYTE_CODES = 8


def byte_scores_fit(table, gap_extend: int, local: bool) -> bool:
    """Whether the scores among codes below :data:`BYTE_CODES` (``table``: the square
    substitution table), plus the diagonal's offset ``2 * gap_extend`` where the cells are
    shifted (:func:`shifted_cells`), fit a signed byte: a launch whose residues all have
    such codes can use ``byte_rows``."""
    import numpy as np

    shift = 2 * gap_extend if shifted_cells(local) else 0
    block = np.asarray(table, np.int64)[:BYTE_CODES, :BYTE_CODES] + shift
    return bool(block.min() >= -128 and block.max() <= 127)


@lru_cache(maxsize=None)
def candidate_fold(corner: bool):
    """``fold(total, i, j, value, value_i, value_j, m)``: the end cell so far with one more
    candidate, candidates coming in row order: a strictly better score replaces it (so
    ties keep the smaller row), and in the corner modes only row ``m`` counts."""

    @inlined
    def fold(total, total_i, total_j, value, value_i, value_j, m):
        if (corner and value_i == m) or (not corner and value > total):
            return value, value_i, value_j
        return total, total_i, total_j

    return fold


@lru_cache(maxsize=None)
def reduce_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool):
    """One thread per problem: its bands' candidates folded in row order (strict >; the
    corner modes take row m) into ``score``, ``end_i``, ``end_j`` at its job row."""
    local, corner, *_ = mode_shape(mode, fqs, fqe, fts, fte)
    initial_best = 0 if local else NEG_INF
    fold = candidate_fold(corner)

    @cuda.jit
    def reduce(problems, band_score, band_i, band_j, score, end_i, end_j):
        p = cuda.grid(1)
        if p >= problems.shape[1]:
            return
        m = problems[F_M, p]
        first = problems[F_ITEM0, p]
        total = initial_best
        total_i = 0
        total_j = 0
        for item in range(first, first + problems[F_BANDS, p]):
            total, total_i, total_j = fold(total, total_i, total_j, band_score[item],
                                           band_i[item], band_j[item], m)
        row = problems[F_ROW, p]
        score[row] = total
        end_i[row] = total_i
        end_j[row] = total_j

    return reduce


@lru_cache(maxsize=None)
def window_fold_kernel(local: bool):
    """One thread per pair cut into windows (:func:`gpualign_df.gpu.long.fill_windows`):
    its windows' end cells, moved by each window's offsets, folded into the pair's by the
    README's order (highest score, then smallest query end, then smallest target end).
    A local window of score 0 (the empty alignment at (0, 0)) gives way to any other.
    ``table``: per pair its first window, its windows and its job row, then per window
    its row and column offsets."""
    initial_best = 0 if local else NEG_INF

    @cuda.jit
    def fold(table, pairs, windows, window_score, window_i, window_j, score, end_i, end_j):
        p = cuda.grid(1)
        if p >= pairs:
            return
        first = table[p]
        total = initial_best
        total_i = 0
        total_j = 0
        for w in range(first, first + table[pairs + p]):
            value = window_score[w]
            if local and value <= 0:
                continue
            i = window_i[w] + table[3 * pairs + w]
            j = window_j[w] + table[3 * pairs + windows + w]
            if w == first and not local or value > total or (
                    value == total and (i < total_i or (i == total_i and j < total_j))):
                total = value
                total_i = i
                total_j = j
        row = table[2 * pairs + p]
        score[row] = total
        end_i[row] = total_i
        end_j[row] = total_j

    return fold
