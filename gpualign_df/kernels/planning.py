"""CUDA kernels of the inter-task plan: the pairs' length sort by counting (count, scan,
place: :func:`count_keys`, :func:`scan_counts`, :func:`place_keys`), then a thread per
slot lays out the slots and each warp's sizes are summed (:func:`warp_plan`), then one
block turns those sizes into offsets and totals (:func:`plan_sums`), in place of some
fifty small array operations.

No frame or batch logic here: :func:`gpualign_df.gpu.plan.plan_batches` launches them with
the length sort's permutation.
"""

from __future__ import annotations

from numba import cuda, int32, int64, uint32

from . import simulator
from .strip import PIECE_STEPS, STRIP_ROWS, WARP

#: Rows of the per-warp quantity table: bytes needed, query words, target words, row-above
#: words, traceback words, run words, cells.
QUANTITIES = 7


def warp_quantities(rows, columns, cells, traceback, group_lanes, group_strips, rows_above):
    """A warp's quantities (:data:`QUANTITIES`) from the rows and columns its slots take
    (its group's longest query and target) and its cells: bytes of device memory needed
    (residues, rows above, traceback words and runs at 4 bytes each, CIGAR characters at
    2 bytes a run word: ``cigar_bound``), query, target, row-above, traceback and run
    words. ``group_lanes`` > 0: the traceback words of the grouped pair kernel's layout,
    ``group_strips`` words a step and slot over ``columns + group_lanes - 1`` steps
    rounded up to whole pieces (:data:`~gpualign_df.kernels.strip.PIECE_STEPS`); else
    the inter kernels' strips. ``rows_above``: the fill keeps each slot's row above
    between strips (the inter fills; the grouped kernel keeps none). The plan's kernel
    writes them for each warp (:func:`warp_plan`, which runs it compiled); a plain
    function besides, so that its figures can be asked on the host.

    >>> warp_quantities(150, 277, 32 * 150 * 277, False, 0, 0, True)[:4]
    (87904, 4800, 8864, 8896)
    """
    if group_lanes > 0:
        steps = (columns + group_lanes - 1 + PIECE_STEPS - 1) // PIECE_STEPS * PIECE_STEPS
        tb_words = WARP * group_strips * steps if traceback else 0
    else:
        tb_words = WARP * ((rows + STRIP_ROWS - 1) // STRIP_ROWS) * columns if traceback else 0
    run_words = WARP * (rows + columns) if traceback else 0
    above_words = WARP * (columns + 1) if rows_above else 0
    need = (WARP * (rows + columns) + 8 * above_words + 4 * tb_words + 6 * run_words
            + WARP * 96)
    return (need, WARP * rows, WARP * columns, above_words, tb_words, run_words, cells)


_warp_quantities = cuda.jit(device=True, inline=True)(warp_quantities)


#: Threads a block of :func:`warp_plan`: whole groups of up to two warps (a packed warp
#: pair is planned in one block).
PLAN_THREADS = 2 * WARP if simulator() else 256


@cuda.jit
def warp_plan(order, pairs, has_pairs, query_lengths, target_lengths, traceback, group_warps,
              group_lanes, group_strips, rows_above, slot_row, slot_query, slot_target,
              warp_columns, quantities):
    """Thread ``s`` (blocks of :data:`PLAN_THREADS`) fills slot ``s``: it holds pair
    ``order[s]`` (job row ``pairs[order[s]]``, or ``order[s]`` itself without
    ``has_pairs``) and its lengths, -1 past the last pair. Then the first thread of
    each warp writes its warp's quantities (:data:`QUANTITIES`), with rows and columns the
    largest of its group of ``group_warps`` warps (1 or 2: a packed warp pair shares
    them; :func:`warp_quantities`). A thread a slot: the lengths' reads (random, through
    the sort's order) run side by side."""
    rows_of = cuda.shared.array(PLAN_THREADS, int64)
    columns_of = cuda.shared.array(PLAN_THREADS, int64)
    cells_of = cuda.shared.array(PLAN_THREADS, int64)
    thread = cuda.threadIdx.x
    slot = cuda.grid(1)
    warp = slot // WARP
    count = order.shape[0]
    query = int64(0)
    target = int64(0)
    if warp < warp_columns.shape[0]:
        if slot < count:
            pair = order[slot]
            query, target = query_lengths[pair], target_lengths[pair]
            slot_row[slot] = pairs[pair] if has_pairs else pair
            slot_query[slot] = query
            slot_target[slot] = target
        else:
            slot_row[slot] = -1
            slot_query[slot] = -1
            slot_target[slot] = -1
    rows_of[thread] = query
    columns_of[thread] = target
    cells_of[thread] = query * target
    cuda.syncthreads()
    if thread % WARP != 0 or warp >= warp_columns.shape[0]:
        return
    rows = int64(0)
    columns = int64(0)
    group_first = thread - (warp % group_warps) * WARP
    for place in range(group_first, group_first + group_warps * WARP):
        rows = max(rows, rows_of[place])
        columns = max(columns, columns_of[place])
    cells = int64(0)
    for place in range(thread, thread + WARP):
        cells += cells_of[place]
    warp_columns[warp] = columns
    values = _warp_quantities(rows, columns, cells, traceback, group_lanes, group_strips,
                              rows_above)
    for row in range(QUANTITIES):
        quantities[row, warp] = values[row]


#: Rows of the per-warp layout table :func:`plan_sums` writes (``Batch.warp_table``): the
#: first ``OFFSET_ROWS`` are offsets (exclusive sums of quantity rows 1-5: query, target,
#: row-above, traceback and run-word bases), then the warp's columns and the run words
#: each of its slots gets (its rows plus columns: room for any of its pairs' operations).
OFFSET_ROWS = 5
TABLE_ROWS = OFFSET_ROWS + 2
QUERY_ROW, TARGET_ROW, ABOVE_ROW, TRACEBACK_ROW, RUN_ROW, COLUMNS_ROW, RUN_WORDS_ROW = range(
    TABLE_ROWS)
#: Rows of an inter batch's per-slot starts (``slot_starts``, slot ``s`` in column ``s``),
#: which the walk and CIGAR kernels read: the slot's first query and target residue and
#: traceback word, its warp's columns, its first run word (:func:`write_slot_starts`).
SLOT_ROWS = 5
SLOT_QUERY, SLOT_TARGET, SLOT_TRACEBACK, SLOT_COLUMNS, SLOT_RUN = range(SLOT_ROWS)


@cuda.jit(device=True, inline=True)
def write_slot_starts(slot_starts, slot, warp_table, warp, lane, traceback_start, columns):
    """Slot ``slot``'s starts (:data:`SLOT_ROWS`), lane ``lane`` of warp ``warp`` of the
    layout table: residues at the warp's bases + lane (interleaved by lane), traceback
    words at the warp's base + ``traceback_start`` (where the fill's layout puts the
    slot's first word), ``columns`` (those its fill ran: a packed warp pair's), runs at
    the warp's base + lane * its run words a slot."""
    slot_starts[SLOT_QUERY, slot] = warp_table[QUERY_ROW, warp] + lane
    slot_starts[SLOT_TARGET, slot] = warp_table[TARGET_ROW, warp] + lane
    slot_starts[SLOT_TRACEBACK, slot] = warp_table[TRACEBACK_ROW, warp] + traceback_start
    slot_starts[SLOT_COLUMNS, slot] = columns
    slot_starts[SLOT_RUN, slot] = (warp_table[RUN_ROW, warp]
                                   + lane * warp_table[RUN_WORDS_ROW, warp])


#: Threads of the one block of :func:`plan_sums` and of :func:`scan_counts` (whole warps,
#: at most 32 of them; the first keeps some 110 registers a thread, so at most 512 fit:
#: the engine takes fewer where the compiled kernel's registers say so).
SUM_THREADS = 512
SCAN_THREADS = 1024
#: Shared int64 words of the warp scans' exchange: the block's under the simulator (which
#: has no shuffles), none on a GPU.
_EXCHANGE = 1024 if simulator() else 1
#: Values a lane of the block scans reads before it adds any up (loads in flight).
_AHEAD = 4
#: Columns of the block scans' segment sums: a warp's each (at most 32), then the total.
_SEGMENTS = WARP + 1


def _warp_scans():
    """``(inclusive, last)``: a lane's inclusive sum of its warp's values up to its own
    lane, and lane 31's value, both by shuffles on a GPU; under the simulator through the
    block's shared ``exchange`` (every thread of the block calls them equally often)."""
    if simulator():
        @cuda.jit(device=True)
        def inclusive(value, exchange):
            thread = cuda.threadIdx.x
            for offset in (1, 2, 4, 8, 16):
                cuda.syncthreads()
                exchange[thread] = value
                cuda.syncthreads()
                if thread % WARP >= offset:
                    value += exchange[thread - offset]
            return value

        @cuda.jit(device=True)
        def last(value, exchange):
            thread = cuda.threadIdx.x
            cuda.syncthreads()
            exchange[thread] = value
            cuda.syncthreads()
            return exchange[thread - thread % WARP + WARP - 1]

        return inclusive, last

    @cuda.jit(device=True, inline=True)
    def inclusive(value, exchange):
        lane = cuda.laneid
        for offset in (1, 2, 4, 8, 16):
            other = cuda.shfl_up_sync(0xFFFFFFFF, value, offset)
            if lane >= offset:
                value += other
        return value

    @cuda.jit(device=True, inline=True)
    def last(value, exchange):
        return cuda.shfl_sync(0xFFFFFFFF, value, WARP - 1)

    return inclusive, last


_inclusive, _last = _warp_scans()


@cuda.jit(device=True, inline=True)
def _segment(count):
    """This thread's part of a one-block scan of ``count`` values: ``(first, rounds,
    warp, lane)``, its warp's segment of ``rounds * _AHEAD * WARP`` consecutive values
    from ``first`` (the same number of rounds in every warp), read a warp's width at a
    time (side by side), ``_AHEAD`` reads of each lane at once."""
    warps = cuda.blockDim.x // WARP
    width = _AHEAD * WARP
    rounds = ((count + warps - 1) // warps + width - 1) // width
    thread = cuda.threadIdx.x
    warp = thread // WARP
    return warp * rounds * width, rounds, warp, thread % WARP


@cuda.jit(device=True, inline=True)
def _at(first, round_, ahead, lane):
    """The value a lane reads in a round of :func:`_segment`'s, ``ahead`` of its reads in
    flight: a warp's width of them side by side."""
    return first + (round_ * _AHEAD + ahead) * WARP + lane


@cuda.jit(device=True, inline=True)
def _scan_segments(segment_totals, rows):
    """Rows ``0 ..< rows`` of the shared ``segment_totals`` (row x warp: each warp's
    segment's sum) to their exclusive sums over the block's warps, the grand total of
    each row left at column 32 (thread ``r`` scans row ``r``); barriers on both sides."""
    cuda.syncthreads()
    row = cuda.threadIdx.x
    if row < rows:
        running = int64(0)
        for warp in range(cuda.blockDim.x // WARP):
            value = segment_totals[row, warp]
            segment_totals[row, warp] = running
            running += value
        segment_totals[row, WARP] = running
    cuda.syncthreads()


@cuda.jit
def plan_sums(quantities, warp_columns, warp_table, totals):
    """One block (whole warps): the warps' layout table (:data:`TABLE_ROWS`) and the
    totals of every quantity row (one read for the host). Each warp of the block sums a
    segment of consecutive warps in every row, its lanes reading side by side; a scan of
    the segments' sums gives each segment's offsets, and a warp scan in each round
    (shuffles) each warp's within it."""
    segment_totals = cuda.shared.array((QUANTITIES, _SEGMENTS), int64)
    exchange = cuda.shared.array(_EXCHANGE, int64)
    own = cuda.local.array(QUANTITIES, int64)
    values = cuda.local.array((OFFSET_ROWS, _AHEAD), int64)
    count = warp_columns.shape[0]
    first, rounds, warp, lane = _segment(count)
    for row in range(QUANTITIES):
        own[row] = 0
    for round_ in range(rounds):
        for ahead in range(_AHEAD):
            at = _at(first, round_, ahead, lane)
            if at < count:
                for row in range(QUANTITIES):
                    own[row] += quantities[row, at]
    for row in range(QUANTITIES):
        total = _last(_inclusive(own[row], exchange), exchange)
        if lane == 0:
            segment_totals[row, warp] = total
    _scan_segments(segment_totals, QUANTITIES)
    if cuda.threadIdx.x < QUANTITIES:
        totals[cuda.threadIdx.x] = segment_totals[cuda.threadIdx.x, WARP]
    for row in range(OFFSET_ROWS):   # offsets: exclusive sums of quantity rows 1-5
        own[row] = segment_totals[row + 1, warp]
    for round_ in range(rounds):
        for ahead in range(_AHEAD):
            at = _at(first, round_, ahead, lane)
            for row in range(OFFSET_ROWS):
                values[row, ahead] = quantities[row + 1, at] if at < count else 0
        for ahead in range(_AHEAD):
            at = _at(first, round_, ahead, lane)
            for row in range(OFFSET_ROWS):
                value = values[row, ahead]
                inclusive = _inclusive(value, exchange)
                if at < count:
                    warp_table[row, at] = own[row] + inclusive - value
                own[row] += _last(inclusive, exchange)
            if at < count:
                warp_table[OFFSET_ROWS, at] = warp_columns[at]
                warp_table[OFFSET_ROWS + 1, at] = quantities[OFFSET_ROWS, at] // WARP


#: Most keys the plan's counting sort takes (:func:`count_keys`): one block scans their
#: counts (:func:`scan_counts`). Lengths making more keys take a radix sort.
COUNT_BINS = 1 << 16


@cuda.jit(device=True, inline=True)
def _length_key(target_length, query_length, longest_target, longest_query):
    """A pair's key, ascending where target length then query length descend: below
    ``(longest_target + 1) * (longest_query + 1)`` (lengths clamped to the bounds, so no
    key falls outside the counts whatever the caller passed)."""
    target = min(max(target_length, 0), longest_target)
    query = min(max(query_length, 0), longest_query)
    return (longest_target - target) * (longest_query + 1) + longest_query - query


@cuda.jit
def count_keys(target_lengths, query_lengths, longest_target, longest_query, counts):
    """Thread ``k`` counts pair ``k``'s key (``counts`` zeroed before)."""
    pair = cuda.grid(1)
    if pair < target_lengths.shape[0]:
        cuda.atomic.add(counts, _length_key(target_lengths[pair], query_lengths[pair],
                                            longest_target, longest_query), 1)


@cuda.jit
def scan_counts(counts, bins):
    """One block (whole warps): ``counts[:bins]`` to their exclusive sums, in place, as
    :func:`plan_sums` scans a row."""
    segment_totals = cuda.shared.array((1, _SEGMENTS), int64)
    exchange = cuda.shared.array(_EXCHANGE, int64)
    values = cuda.local.array(_AHEAD, int64)
    first, rounds, warp, lane = _segment(bins)
    own = int64(0)
    for round_ in range(rounds):
        for ahead in range(_AHEAD):
            key = _at(first, round_, ahead, lane)
            if key < bins:
                own += counts[key]
    total = _last(_inclusive(own, exchange), exchange)
    if lane == 0:
        segment_totals[0, warp] = total
    _scan_segments(segment_totals, 1)
    running = segment_totals[0, warp]
    for round_ in range(rounds):
        for ahead in range(_AHEAD):
            key = _at(first, round_, ahead, lane)
            values[ahead] = counts[key] if key < bins else 0
        for ahead in range(_AHEAD):
            key = _at(first, round_, ahead, lane)
            value = values[ahead]
            inclusive = _inclusive(value, exchange)
            if key < bins:
                counts[key] = running + inclusive - value
            running += _last(inclusive, exchange)


@cuda.jit(device=True)
def _claim_simulated(starts, key, active):
    return cuda.atomic.add(starts, key, 1) if active else 0


@cuda.jit(device=True, inline=True)
def _claim_warp(starts, key, active):
    """The next place of ``key`` for this lane: the lanes of a warp holding one key
    take consecutive places, in lane order, by one atomic of the lowest of them (so
    pairs of consecutive rows stay side by side: the kernels after the plan write
    results by row)."""
    peers = uint32(cuda.match_any_sync(int32(-1), key))
    lane = cuda.laneid
    leader = cuda.ffs(peers) - 1
    first = int64(0)
    if lane == leader and active:
        first = cuda.atomic.add(starts, key, int64(cuda.popc(peers)))
    first = cuda.shfl_sync(0xFFFFFFFF, first, leader)
    return first + cuda.popc(peers & ((uint32(1) << uint32(lane)) - uint32(1)))


#: (the simulator has no warp matches or shuffles: one atomic a lane there)
_claim = _claim_simulated if simulator() else _claim_warp


@cuda.jit
def place_keys(target_lengths, query_lengths, longest_target, longest_query, starts, order):
    """Thread ``k`` puts pair ``k`` at the next place of its key (``starts``: the keys'
    exclusive sums, :func:`scan_counts`): pairs of one key (equal lengths) take its
    places in the order of the atomics, every quantity of the plan the same whichever it
    is. Every thread of a warp takes part (the warp's lanes of one key claim together)."""
    pair = cuda.grid(1)
    active = pair < target_lengths.shape[0]
    key = int64(-1)
    if active:
        key = _length_key(target_lengths[pair], query_lengths[pair], longest_target,
                          longest_query)
    place = _claim(starts, key, active)
    if active:
        order[place] = pair
