"""A search on the device: every query against every database sequence, scored without a
pair list, and the best ``top_k`` targets of each query kept on the device; only the kept
pairs come back to the host (then aligned with traceback as any other pairs).

The database is taken in tiles that fit the free memory; a tile's targets are sorted by
length into warps of 32 (residues interleaved, as the fill's), every query chunk is one
launch of the score kernel on a ``[target, query]`` score matrix, and a two-phase top-k
folds the tile into each query's running best. A host database larger than the
``search_resident_bytes`` setting (by default half the memory a search may use) is not
copied to the device whole: each tile's sequences are copied for that tile, so a database
of any size fits, the running best staying on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import config
from ..encode import EncodedSequences, codes_present
from ..kernels import dpx, search as search_kernels, simulator
from ..kernels.gather import gather_residues
from ..kernels.strip import WARP
from ..scoring import Mode, Scoring
from .buffers import (DEVICE_LOCK, DeviceSequences, device_empty, device_table, free_bytes,
                      kept_upload, scratch, scratch_upload, to_device, upload, upload_parts)
from .device import (THREADS_PER_BLOCK, array_module, blocks, current_device,
                     max_shared_per_block)
from .launch import launch_kernel, most_threads
from .memory import engine_allocations
from .plan import to_numpy
from .policy import largest_entry, table16, use_search_16bit
from .streams import Pending, beside_default_stream


def target_tile(lengths: np.ndarray, valid: np.ndarray,
                 packed: bool = False) -> dict[str, np.ndarray]:
    """Layout of a database tile for the search kernel: targets sorted by length (longest
    first) in warps of 32, residues interleaved; null targets and padding flagged (length
    -1). The row-above regions (``row_base``, ``row_words``) are per warp, or with
    ``packed`` per pair of warps 2p, 2p + 1 (one thread each; the longer, 2p, sets the
    columns)."""
    order = np.argsort(-lengths, kind="stable")
    slots = (len(order) + WARP - 1) // WARP * WARP
    target_row = np.full(slots, -1, dtype=np.int64)
    target_row[:len(order)] = order
    slot_lengths = np.full(slots, -1, dtype=np.int64)
    slot_lengths[:len(order)] = np.where(valid[order], lengths[order], -1)
    warp_columns = np.maximum(slot_lengths, 0).reshape(-1, WARP).max(axis=1)
    target_base = np.zeros(len(warp_columns), dtype=np.int64)
    np.cumsum(WARP * warp_columns[:-1], out=target_base[1:])
    row_columns = warp_columns[0::2] if packed else warp_columns
    row_base = np.zeros(len(row_columns), dtype=np.int64)
    np.cumsum(WARP * (row_columns[:-1] + 1), out=row_base[1:])
    lane = np.arange(slots) % WARP
    return dict(target_row=target_row, slot_lengths=slot_lengths, warp_columns=warp_columns,
                target_base=target_base, row_base=row_base,
                slot_start=np.repeat(target_base, WARP) + lane,
                target_size=int(WARP * warp_columns.sum()),
                row_words=int(WARP * (row_columns + 1).sum()))


def search_top_k(queries: DeviceSequences, targets: DeviceSequences | EncodedSequences,
                 query_lengths: np.ndarray, query_valid: np.ndarray, target_lengths: np.ndarray,
                 target_valid: np.ndarray, scoring: Scoring, mode: Mode, top_k: int,
                 progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The pairs a search keeps: the best ``top_k`` targets of every query, from a
    score-only pass over the whole cross product on the device (no pair list, no host
    work per pair).

    ``targets`` on the device are searched there; host-encoded ones are copied to the
    device whole up to the ``search_resident_bytes`` setting (a prepared database's copy
    is kept there for its next searches), else tile by tile.

    Returns ``(pair_query, pair_target)`` in the engines' best-first order: queries in
    order, best score first, ties by target index, pairs with a null sequence last;
    ``min(top_k, len(targets))`` pairs per query. Reads the settings of the calling thread.
    """
    tuning = config.settings()
    with DEVICE_LOCK, engine_allocations():
        return _search_top_k(queries, targets, np.asarray(query_lengths, np.int64),
                             np.asarray(query_valid, bool), np.asarray(target_lengths, np.int64),
                             np.asarray(target_valid, bool), scoring, mode, top_k, progress,
                             tuning)


def _search_top_k(queries, targets, query_lengths, query_valid, target_lengths, target_valid,
                  scoring, mode, top_k, progress, tuning):
    query_count, target_count = len(query_lengths), len(target_lengths)
    if query_count == 0 or target_count == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if target_count > search_kernels.MAX_TARGETS:
        raise ValueError(f"a search takes at most {search_kernels.MAX_TARGETS:,} database "
                         f"sequences; this one has {target_count:,}: split the database")
    kept = min(int(top_k), target_count)
    # each query's best keys (a target and its score in one int64), kept across tiles
    best = scratch("top_k_best", query_count * kept, np.int64)
    # totals from the host sequences' offsets where known (no pass over the lengths)
    host = targets if isinstance(targets, EncodedSequences) else targets.host
    residues, longest = (host.residues, host.longest) if host is not None else (
        int(target_lengths.sum()), int(target_lengths.max()))  # (a null sequence counts 0)
    budget = int(free_bytes() * tuning.gpu_memory_share)
    room = tuning.search_resident_bytes
    resident = resident_targets(targets, budget // 2 if room is None else room)
    valid_device = scratch_upload("query_valid", query_valid.astype(np.uint8))
    sorted_queries = np.argsort(-query_lengths, kind="stable")
    query_order = scratch_upload("query_order", sorted_queries)
    packed = use_search_16bit(scoring, mode, int(query_lengths.max()), longest,
                              tuning.search_16bit)
    if packed:
        kernel = search_kernels.search_kernel16(dpx.available())
        sub = device_table("substitution16", table16(scoring))
    else:
        kernel = search_kernels.search_kernel(mode.code, *mode.flags(), dpx.available())
        sub = device_table("substitution", scoring.matrix.ravel().astype(np.int32))
    groups = group_setup(queries, targets if resident is None else resident, query_lengths,
                         target_lengths, scoring, tuning) if packed else None
    # a target's bytes: its scores and top-k parts, with groups its share of its pair's
    # columns (4 bytes a column of two sequences, padding included: under 3 bytes a
    # residue), streamed its residues and offset
    mean_length = residues // target_count
    per_target = 16 * query_count + (0 if groups is None else 3 * mean_length + 64) + (
        0 if resident is not None else mean_length + 8)
    tile_targets = int(min(target_count, max(WARP, budget // per_target)))
    for tile_start in range(0, target_count, tile_targets):
        tile = slice(tile_start, min(tile_start + tile_targets, target_count))
        tile_count = tile.stop - tile.start
        scores = scratch("scores", query_count * tile_count, np.int32).reshape(
            (query_count, tile_count))
        # where the tile's sequences are: in the whole database's copy, or copied alone
        on_device, first = (resident, tile_start) if resident is not None else (
            upload(targets.subset(tile.start, tile.stop))[0], 0)
        cells = int(query_lengths.sum()) * (
            residues if tile_count == target_count else int(target_lengths[tile].sum()))
        with beside_default_stream(cells, tuning) as stream:
            # the host follows launches (progress, Ctrl-C) above ``gpu_launch_cells`` cells
            pending = Pending(stream, progress, follow=cells > tuning.gpu_launch_cells)
            if groups is not None:
                # null targets get no group: their scores stay the null score
                scores.fill(search_kernels.NULL_SCORE)
                rest = score_groups(groups, queries, query_lengths, query_valid, valid_device,
                                    query_order, sorted_queries, on_device, first,
                                    target_lengths[tile], target_valid[tile], scoring, scores,
                                    stream, pending, tuning)
            else:
                rest = np.arange(tile_count)
            if len(rest):
                score_one_per_thread(kernel, sub, packed, queries, query_lengths, query_valid,
                                     valid_device, query_order, sorted_queries, on_device,
                                     first, rest, target_lengths[tile][rest],
                                     target_valid[tile][rest], scoring, scores, budget,
                                     stream, pending, tuning)
            # queued behind the tile's score launches, on their stream, before the wait
            top_k_tile(scores, tile_start, kept, best, tile_start > 0, stream, tuning)
            pending.finish()
    keys = to_numpy(best).reshape(query_count, kept)
    pair_target = search_kernels.MAX_TARGETS - (keys & search_kernels.MAX_TARGETS)
    return np.repeat(np.arange(query_count, dtype=np.int64), kept), pair_target.ravel()


#: Blocks a phase of the top-k aims at (the first: segments of a query's targets times
#: queries), taking more tasks in turn: enough to fill a GPU; under the simulator, where
#: every thread is a Python thread, two.
TOP_K_BLOCKS = 2 if simulator() else 1024
#: Most keys the first phase's per-thread lists take in all (its grid shrinks to fit).
TOP_K_LIST_KEYS = 1 << 24


def top_k_tile(scores, tile_start: int, kept: int, best, earlier: bool, stream,
               tuning: config.Settings) -> None:
    """Fold a tile's ``[query, target]`` ``scores`` (its first target is target
    ``tile_start``) into each query's best ``kept`` keys in ``best`` (with ``earlier``,
    merged with those of earlier tiles there): the first phase splits each query's
    targets into segments (the ``top_k_segments`` setting at most), a block's best keys
    each; the second merges a query's segments in one block. Blocks have fewer threads
    where a block's lists would pass ``TOP_K_LIST_KEYS`` (a large ``kept``)."""
    query_count, tile_count = scores.shape
    size = search_kernels.TOP_K_BLOCK
    while size > 2 and size * kept > TOP_K_LIST_KEYS:
        size //= 2
    segments = max(1, min(tuning.top_k_segments, size - 1, -(-tile_count // size),
                          -(-TOP_K_BLOCKS // query_count)))
    grid = max(1, min(query_count * segments, TOP_K_BLOCKS, TOP_K_LIST_KEYS // (size * kept)))
    lists, spare = (scratch(f"top_k_lists{k}", grid * size * kept, np.int64)
                    for k in range(2))
    part, part_spare = (scratch(f"top_k_part{k}", query_count * (segments + 1) * kept,
                                np.int64) for k in range(2))
    launch_kernel("top_k", search_kernels.top_k_blocks, grid, size, scores, tile_start,
                  kept, segments, lists, spare, part, stream=stream)
    launch_kernel("top_k", search_kernels.top_k_final, min(query_count, TOP_K_BLOCKS), size,
                  kept, segments, part, part_spare, best, earlier, stream=stream)


def score_one_per_thread(kernel, sub, packed, queries, query_lengths, query_valid,
                         valid_device, query_order, sorted_queries, targets, first, rest,
                         lengths, valid, scoring, scores, budget, stream, pending, tuning):
    """Scores of every query against tile sequences ``rest`` (tile-relative; ``lengths``
    and ``valid`` theirs; the tile's first sequence is sequence ``first`` of ``targets``)
    into ``scores``: one thread per (query, target), or per two targets with ``packed``,
    targets of near-equal length in warps of 32; launched on ``stream``, noted in
    ``pending``."""
    query_count = len(query_lengths)
    layout = target_tile(lengths, valid, packed)
    # rows of the tile's score matrix; padding and null slots (length -1) gather nothing
    layout["target_row"] = np.where(layout["target_row"] >= 0,
                                    rest[np.maximum(layout["target_row"], 0)], -1)
    device = {name: scratch_upload(name, layout[name]) for name in
              ("target_row", "slot_lengths", "warp_columns", "target_base", "row_base")}
    residues = scratch("target", layout["target_size"], np.uint8)
    sequence_of_slot = np.where(layout["slot_lengths"] >= 0,
                                first + layout["target_row"], -1)
    launch_kernel("gather", gather_residues, blocks(len(sequence_of_slot)),
                  THREADS_PER_BLOCK, targets.codes, targets.offsets,
                  scratch_upload("sequence_of_slot", sequence_of_slot),
                  device["slot_lengths"], scratch_upload("slot_start", layout["slot_start"]),
                  WARP, residues, stream=stream)
    row_words = layout["row_words"]
    threads_per_query = WARP * len(layout["row_base"])
    chunk = max(1, min(query_count, (budget - 4 * scores.size) // (8 * row_words),
                       (2**31 - 1) // threads_per_query))
    h_buffer = scratch("h_row", chunk * row_words, np.int32)
    i_buffer = scratch("i_row", chunk * row_words, np.int32)
    residues_count = int(lengths.sum())  # (a null sequence is empty)
    for first, stop in launch_chunks(query_lengths[sorted_queries] * residues_count, chunk,
                                     tuning.gpu_launch_cells):
        chunk_queries = query_order[first:stop]
        launch_kernel("search", kernel, blocks(len(chunk_queries) * threads_per_query),
                      THREADS_PER_BLOCK, queries.codes, queries.offsets, valid_device,
                      chunk_queries, residues, device["slot_lengths"], device["target_row"],
                      device["target_base"], device["row_base"], device["warp_columns"],
                      row_words, sub, len(scoring.alphabet), scoring.gap_open,
                      scoring.gap_extend, h_buffer, i_buffer, scores, stream=stream)
        pending.launched(_cells(query_lengths, query_valid, sorted_queries[first:stop],
                                residues_count))


def _cells(query_lengths, query_valid, queries, residues: int) -> int:
    """DP cells of ``queries`` against ``residues`` database residues."""
    return int((query_lengths[queries] * query_valid[queries]).sum()) * residues


@dataclass(frozen=True)
class GroupSetup:
    """What every tile of a grouped search shares: the shared pair table (both halves'
    ``score + go`` for each compacted query letter and pair of compacted database
    letters, then the all-zero padding row), the table row of each query residue, the
    compacted letter of each database code, the length classes whose values fit 16 bits,
    and the kernel's layout (:func:`search_table_layout`)."""

    table: object          # int32 device array
    query_rows: object     # int32 table row of each query residue, between padding rows,
    #                        scaled for the kernel (``group_row_shift``)
    row_starts: object     # int64 per query: where its first residue's row is
    letter: object         # int32 per database code
    stride: int            # database letters + 1 (the padding letter)
    classes: tuple         # (lanes, columns), capacity ascending
    use_dpx: bool          # the kernel's DPX
    copies: int            # copies of the table in shared memory
    block: int             # threads a block (0: as many as the registers allow)


def group_setup(queries: DeviceSequences, targets: DeviceSequences | EncodedSequences,
                query_lengths: np.ndarray,
                target_lengths: np.ndarray, scoring: Scoring,
                tuning: config.Settings) -> GroupSetup | None:
    """The grouped kernel's tables for a local search on 16-bit cells, or None where it
    does not apply: no classes set, a substitution entry below ``-gap_open`` among the
    letters present (the shifted table would be negative), or a pair table too large for
    shared memory."""
    if not tuning.search_groups:
        return None
    xp = array_module()
    size = len(scoring.alphabet)
    # the queries' letters and rows from their host copy where there is one (a few small
    # host arrays and one upload, where the device's would take a dozen launches)
    host = queries.host
    query_codes = host.codes if host is not None else _array(xp, queries.codes)
    query_letters = _letters(np if host is not None else xp, query_codes, size)
    # a prepared database keeps its letters (a pass over every residue)
    database_letters = None if targets.keep is None else targets.keep.get(("letters", size))
    if database_letters is None:
        if isinstance(targets, DeviceSequences):
            database_letters = _letters(xp, _array(xp, targets.codes), size)
        else:
            present = codes_present(targets.codes)
            database_letters = present[present < size]
        if targets.keep is not None:
            targets.keep[("letters", size)] = database_letters
    stride = len(database_letters) + 1
    words = (len(query_letters) + 1) * stride * stride
    go = scoring.gap_open
    scores = scoring.matrix[np.ix_(query_letters, database_letters)].astype(np.int64) + go
    if words > search_kernels.PAIR_TABLE_WORDS or (scores.size and scores.min() < 0):
        return None
    use_dpx = dpx.available()
    copies, block = search_table_layout(words, use_dpx, tuning)
    shift = search_kernels.group_row_shift(use_dpx, copies)
    row_of = np.zeros(size, np.int32)
    row_of[query_letters] = (np.arange(len(query_letters), dtype=np.int32) * stride
                             * stride) << shift
    letter = np.full(size, stride - 1, np.int32)
    letter[database_letters] = np.arange(len(database_letters), dtype=np.int32)
    # a class is exact where no shifted value can leave 16 bits: H <= min(m, n) * largest
    largest = largest_entry(scoring)
    longest_query = int(query_lengths.max(initial=0))
    classes = tuple(sorted(
        ((lanes, columns) for lanes, columns in tuning.search_groups
         if min(longest_query, lanes * columns) * largest + largest + go < (1 << 15) - 1),
        key=lambda shape: (shape[0] * shape[1], shape[0])))
    if not classes:
        return None
    pad_row = (len(query_letters) * stride * stride) << shift
    if host is not None:  # (one upload: the starts first, as the wider values)
        padded, starts = padded_rows(np, row_of[query_codes], host.offsets, pad_row)
        row_starts, query_rows = upload_parts([starts.view(np.uint8), padded.view(np.uint8)])
        row_starts, query_rows = row_starts.view(np.int64), query_rows.view(np.int32)
    else:
        query_rows, row_starts = padded_rows(xp, xp.asarray(row_of)[query_codes],
                                             _array(xp, queries.offsets), pad_row)
    # a prepared database keeps the device tables of each set of query letters searched
    key = ("group_tables", current_device(), go, scoring.matrix.tobytes(),
           query_letters.tobytes())
    tables = None if targets.keep is None else targets.keep.get(key)
    if tables is None:
        # both halves' shifted score: [query letter, low letter, high letter], padding 0
        shifted = np.zeros((len(query_letters) + 1, stride), np.int64)
        shifted[:len(query_letters), :len(database_letters)] = scores
        table = (shifted[:, :, None] | (shifted[:, None, :] << 16)).astype(np.int32).ravel()
        tables = xp.asarray(table), xp.asarray(letter)
        if targets.keep is not None:
            targets.keep[key] = tables
    return GroupSetup(tables[0], query_rows, row_starts, tables[1], stride, classes, use_dpx,
                      copies, block)


def padded_rows(xp, rows, offsets, pad_row: int) -> tuple[object, object]:
    """``(padded, starts)``: the rows of each query (``rows``, ``offsets`` into them)
    between :data:`~gpualign_df.kernels.search.ROWS_BEFORE` and ``ROWS_AFTER`` entries
    ``pad_row``, query ``q``'s first row at ``padded[starts[q]]`` (arrays of ``xp``).

    Examples
    --------
    >>> from gpualign_df.kernels.search import ROWS_AFTER, ROWS_BEFORE
    >>> padded, starts = padded_rows(np, np.array([5, 6, 7]), np.array([0, 2, 2, 3]), 0)
    >>> starts.tolist() == [ROWS_BEFORE, 2 * ROWS_BEFORE + ROWS_AFTER + 2,
    ...                     3 * ROWS_BEFORE + 2 * ROWS_AFTER + 2]
    True
    >>> padded[starts].tolist(), int((padded != 0).sum())
    ([5, 0, 7], 3)
    """
    count = len(offsets) - 1
    gap = search_kernels.ROWS_BEFORE + search_kernels.ROWS_AFTER
    starts = offsets[:-1].astype(np.int64) + search_kernels.ROWS_BEFORE + gap * xp.arange(
        count, dtype=np.int64)
    padded = xp.full(int(offsets[-1]) + gap * count, pad_row, np.int32)
    query = xp.repeat(xp.arange(count, dtype=np.int64), offsets[1:] - offsets[:-1])
    padded[xp.arange(len(rows), dtype=np.int64) + search_kernels.ROWS_BEFORE + gap * query] \
        = rows
    return padded, starts


def _letters(xp, codes, size: int) -> np.ndarray:
    """The codes below ``size`` that occur in ``codes`` (an array of ``xp``), ascending."""
    return np.flatnonzero(to_numpy(xp.bincount(codes, minlength=size)[:size]))


def resident_targets(targets: DeviceSequences | EncodedSequences,
                     room: int) -> DeviceSequences | None:
    """``targets`` on the device for a whole search: as they are if there already, their
    kept copy (a prepared database's), a new copy where they take at most ``room`` bytes;
    None for host targets larger than that (streamed tile by tile)."""
    if isinstance(targets, DeviceSequences):
        return targets
    kept = kept_upload(targets)
    if kept is not None:
        return kept
    if targets.codes.nbytes + targets.offsets.nbytes > room:
        return None
    return upload(targets)[0]


def _array(xp, values):
    """A device array as ``xp``'s (a simulator array as numpy)."""
    return values.copy_to_host() if hasattr(values, "copy_to_host") else xp.asarray(values)


def group_plan(lengths: np.ndarray, valid: np.ndarray,
               classes: tuple) -> tuple[list[tuple[int, int, np.ndarray]], np.ndarray]:
    """Pairs of a tile's sequences by class: ``([(lanes, columns, pairs)], rest)``.
    Valid sequences sorted by length (longest first) are paired with their neighbour;
    each pair goes to the smallest class holding its longer sequence, ``pairs`` its
    (tile-relative) rows, ``(P, 2)`` int64, -1 for none, P a multiple of the groups of
    a warp; ``rest``: the sequences longer than every class."""
    capacities = np.array([lanes * columns for lanes, columns in classes])
    order = np.flatnonzero(valid)
    # longest first, stable: a radix sort of 16-bit keys (every length past the largest
    # class is one key: those sequences are the rest, in any order)
    beyond = capacities[-1] + 1
    keys = (beyond - np.minimum(lengths[order], beyond)).astype(np.uint16)
    order = order[np.argsort(keys, kind="stable")]
    fits = lengths[order] <= capacities[-1]
    rest, order = order[~fits], order[fits]
    if len(order) % 2:
        order = np.append(order, -1)
    pairs = order.reshape(-1, 2)
    shape_of = np.searchsorted(capacities, lengths[pairs[:, 0]], side="left")
    plans = []
    for k in np.unique(shape_of)[::-1]:  # largest class first
        lanes, columns = classes[k]
        chosen = pairs[shape_of == k]
        per_warp = WARP // lanes
        padded = np.full((-(-len(chosen) // per_warp) * per_warp, 2), -1, np.int64)
        padded[:len(chosen)] = chosen
        plans.append((lanes, columns, padded))
    return plans, rest


def score_groups(setup: GroupSetup, queries, query_lengths, query_valid, valid_device,
                 query_order, sorted_queries, targets, first, lengths, valid, scoring,
                 scores, stream, pending, tuning) -> np.ndarray:
    """Scores of every query against the tile's sequences that a length class holds, by
    the grouped kernel, into ``scores`` (the tile's first sequence is sequence ``first`` of
    ``targets``), launched on ``stream``, noted in ``pending``; returns the rest
    (tile-relative rows)."""
    # a prepared database kept whole on the device keeps its layout too (one in several
    # tiles has no room for it beside the tile)
    keep = targets.keep if first == 0 and len(lengths) == targets.offsets.size - 1 \
        else None
    classes, rest = class_columns(setup, targets, keep, first, lengths, valid, stream)
    use_dpx, copies, query_rows = setup.use_dpx, setup.copies, setup.query_rows
    for lanes, columns, pairs, pair_codes, pair_row, residues in classes:
        count = len(pairs)
        kernel = search_kernels.group_search_kernel(
            lanes, columns, use_dpx, unroll_for(columns, tuning.search_unroll), copies)
        arguments = (query_rows, setup.row_starts, queries.offsets, valid_device,
                     query_order, pair_codes, count, pair_row, setup.table, len(setup.table),
                     scoring.gap_open, scoring.gap_extend, scores)
        # (a block alone on its SM: as many threads as its registers allow)
        threads = setup.block or most_threads(kernel, arguments) // WARP * WARP
        per_query = lanes * count
        most = max(1, (2**31 - 1) // per_query)
        for first, stop in launch_chunks(query_lengths[sorted_queries] * residues, most,
                                         tuning.gpu_launch_cells):
            chunk_queries = query_order[first:stop]
            launch_kernel("search", kernel, -(-per_query * (stop - first) // threads),
                          threads, query_rows, setup.row_starts, queries.offsets,
                          valid_device, chunk_queries, pair_codes, count, pair_row,
                          setup.table, len(setup.table), scoring.gap_open,
                          scoring.gap_extend, scores, stream=stream,
                          shared_bytes=4 * copies * len(setup.table) if copies > 1 and use_dpx
                          else 0)
            pending.launched(_cells(query_lengths, query_valid, sorted_queries[first:stop],
                                    residues))
    return rest


#: Copies of the grouped search's pair table where DPX runs and the setting leaves it open.
DEFAULT_TABLE_COPIES = 4


def search_table_layout(words: int, use_dpx: bool,
                        tuning: config.Settings) -> tuple[int, int]:
    """(copies of the pair table, threads a block) of the grouped search kernel for a
    table of ``words`` words: the ``search_table_copies`` and ``search_block_threads``
    settings, as many copies as fit a block's shared memory (one on a GPU without DPX,
    where the table is a static array), a block of one warp under the simulator. Threads
    None: with copies, as many as each kernel's registers allow (a block is alone on its
    SM), returned as 0; with one copy 256 (two blocks an SM)."""
    copies = tuning.search_table_copies
    if copies is None:
        copies = DEFAULT_TABLE_COPIES if use_dpx else 1
    if simulator():
        return copies, search_kernels.GROUP_BLOCK
    copies = copies if use_dpx else 1
    room = max_shared_per_block()
    while copies > 1 and 4 * copies * words > room:
        copies //= 2
    if tuning.search_block_threads is None:
        return copies, search_kernels.GROUP_BLOCK if copies == 1 else 0
    return copies, tuning.search_block_threads


def unroll_for(columns: int, rule: tuple[tuple[int, int], ...]) -> int:
    """Query rows an iteration of the grouped kernel's step loop for a length class of
    ``columns`` columns a lane: the first ``(most columns, rows)`` of ``rule`` (the
    ``search_unroll`` setting) that holds it, else 1.

    Examples
    --------
    >>> [unroll_for(columns, ((24, 4), (26, 2))) for columns in (4, 24, 26, 30)]
    [4, 4, 2, 1]
    """
    return next((rows for most, rows in rule if columns <= most), 1)


def class_columns(setup: GroupSetup, targets, keep: dict | None, first: int,
                  lengths: np.ndarray, valid: np.ndarray, stream) -> tuple[list, np.ndarray]:
    """A tile's sequences in the grouped kernel's layout: ``([(lanes, columns, pairs,
    pair_codes, pair_row, residues)], rest)`` (:func:`group_plan`; ``pair_codes``: each
    pair's columns, gathered on the device; ``pair_row``: ``pairs`` on the device;
    ``residues``: the class's database residues). With ``keep``
    (a prepared database's) they are kept there, so its next searches skip the sort and the
    gather; else they live in the scratch buffers. The tile's first sequence is sequence
    ``first`` of ``targets``."""
    key = ("classes", current_device(), setup.classes)
    if keep is not None and key in keep:
        return keep[key]
    plans, rest = group_plan(lengths, valid, setup.classes)
    built = []
    for lanes, columns, pairs in plans:
        sequences = np.where(pairs >= 0, first + pairs, -1)
        count = len(pairs)
        if keep is None:
            pair_codes = scratch(f"pair_codes_{lanes}x{columns}", count * lanes * columns,
                                 np.int32)
            pair_row = scratch_upload(f"pair_row_{lanes}x{columns}", pairs)
        else:
            pair_codes = device_empty(count * lanes * columns, np.int32)
            pair_row = to_device(pairs)
        launch_kernel("gather", search_kernels.pair_columns,
                      blocks(count * lanes * columns), THREADS_PER_BLOCK, targets.codes,
                      targets.offsets, setup.letter, setup.stride - 1, setup.stride,
                      scratch_upload(f"pair_sequence_{lanes}x{columns}", sequences), lanes,
                      columns, pair_codes, stream=stream)
        built.append((lanes, columns, pairs, pair_codes, pair_row,
                      int(lengths[pairs[pairs >= 0]].sum())))
    if keep is not None:
        keep[key] = (built, rest)
    return built, rest


def launch_chunks(cells: np.ndarray, most: int, cells_per_launch: float):
    """``(first, stop)`` runs of consecutive queries (``cells``: each one's DP cells, in
    launch order) of at most ``most`` queries and, one query aside, ``cells_per_launch``
    cells."""
    count = len(cells)
    sums = np.cumsum(cells, dtype=np.float64)
    first = 0
    while first < count:
        base = sums[first - 1] if first else 0.0
        stop = int(np.searchsorted(sums, base + cells_per_launch, side="right"))
        stop = min(max(stop, first + 1), first + most, count)
        yield first, stop
        first = stop
