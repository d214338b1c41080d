"""A search on the device: every query against every database sequence, scored without a
pair list, and the best ``top_k`` targets of each query kept on the device; only the kept
pairs come back to the host (then aligned with traceback as any other pairs).

The database is taken in tiles that fit the free memory; a tile's targets are sorted by
length into warps of 32 (residues interleaved, as the fill's), every query chunk is one
launch of the score kernel on a ``[target, query]`` score matrix, and a two-phase top-k
folds the tile into each query's running best.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import config
from ..kernels import dpx, search as search_kernels
from ..kernels.gather import gather_residues
from ..kernels.strip import WARP
from ..scoring import Mode, Scoring
from .buffers import (DEVICE_LOCK, DeviceSequences, device_table, free_bytes, scratch,
                      scratch_upload)
from .device import THREADS_PER_BLOCK, blocks
from .launch import launch_kernel
from .memory import engine_allocations
from .policy import table16, use_search_16bit
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


def search_top_k(queries: DeviceSequences, targets: DeviceSequences, query_lengths: np.ndarray,
                 query_valid: np.ndarray, target_lengths: np.ndarray, target_valid: np.ndarray,
                 scoring: Scoring, mode: Mode, top_k: int,
                 progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The pairs a search keeps: the best ``top_k`` targets of every query, from a
    score-only pass over the whole cross product on the device (no pair list, no host
    work per pair).

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
    kept = min(int(top_k), target_count)
    best_score = cuda.device_array((query_count, kept), np.int32)
    best_target = cuda.device_array((query_count, kept), np.int64)
    count = cuda.to_device(np.zeros(query_count, np.int32))
    valid_device = scratch_upload("query_valid", query_valid.astype(np.uint8))
    sorted_queries = np.argsort(-query_lengths, kind="stable")
    query_order = scratch_upload("query_order", sorted_queries)
    packed = use_search_16bit(scoring, mode, query_lengths, target_lengths,
                              tuning.search_16bit)
    if packed:
        kernel = search_kernels.search_kernel16(dpx.available())
        sub = device_table("substitution16", table16(scoring))
    else:
        kernel = search_kernels.search_kernel(mode.code, *mode.flags(), dpx.available())
        sub = device_table("substitution", scoring.matrix.ravel().astype(np.int32))
    budget = int(free_bytes() * tuning.gpu_memory_share)
    tile_targets = int(min(target_count, max(WARP, budget // (16 * query_count))))
    query_residues = int(query_lengths[query_valid].sum())
    for tile_start in range(0, target_count, tile_targets):
        tile = slice(tile_start, min(tile_start + tile_targets, target_count))
        layout = target_tile(target_lengths[tile], target_valid[tile], packed)
        device = {name: scratch_upload(name, layout[name]) for name in
                  ("target_row", "slot_lengths", "warp_columns", "target_base", "row_base")}
        residues = scratch("target", layout["target_size"], np.uint8)
        # padding and null slots (length -1) gather nothing
        sequence_of_slot = np.where(layout["slot_lengths"] >= 0,
                                    tile_start + layout["target_row"], -1)
        launch_kernel("gather", gather_residues, blocks(len(sequence_of_slot)),
                      THREADS_PER_BLOCK, targets.codes, targets.offsets,
                      scratch_upload("sequence_of_slot", sequence_of_slot),
                      device["slot_lengths"], scratch_upload("slot_start", layout["slot_start"]),
                      WARP, residues)
        tile_count = tile.stop - tile.start
        scores = scratch("scores", tile_count * query_count, np.int32).reshape(
            (tile_count, query_count))
        row_words = layout["row_words"]
        threads_per_query = WARP * len(layout["row_base"])
        chunk = max(1, min(query_count, (budget - 4 * tile_count * query_count)
                           // (8 * row_words), (2**31 - 1) // threads_per_query))
        h_buffer = scratch("h_row", chunk * row_words, np.int32)
        i_buffer = scratch("i_row", chunk * row_words, np.int32)
        tile_cells = query_residues * int(target_lengths[tile][target_valid[tile]].sum())
        tile_residues = int(target_lengths[tile][target_valid[tile]].sum())
        with beside_default_stream(tile_cells, tuning) as stream:
            pending = Pending(stream, progress, follow=tile_cells > tuning.gpu_launch_cells)
            for first, stop in launch_chunks(query_lengths[sorted_queries] * tile_residues,
                                             chunk, tuning.gpu_launch_cells):
                chunk_queries = query_order[first:stop]
                launch_kernel("search", kernel, blocks(len(chunk_queries) * threads_per_query),
                              THREADS_PER_BLOCK, queries.codes, queries.offsets, valid_device,
                              chunk_queries, residues, device["slot_lengths"],
                              device["target_row"], device["target_base"], device["row_base"],
                              device["warp_columns"], row_words, sub, len(scoring.alphabet),
                              scoring.gap_open, scoring.gap_extend, h_buffer, i_buffer, scores,
                              stream=stream)
                pending.launched(int((query_lengths[sorted_queries[first:stop]]
                                      * query_valid[sorted_queries[first:stop]]).sum())
                                 * tile_residues)
            pending.finish()
        segments = max(1, min(tuning.top_k_segments, search_kernels.MAX_TOP_K_SEGMENTS,
                              tile_count, -(-(1 << 16) // query_count),
                              (1 << 30) // (12 * kept * query_count)))
        part_score = scratch("part_score", (segments + 1) * kept * query_count,
                             np.int32).reshape((segments + 1, kept, query_count))
        part_target = scratch("part_target", (segments + 1) * kept * query_count,
                              np.int64).reshape((segments + 1, kept, query_count))
        part_count = scratch("part_count", (segments + 1) * query_count,
                             np.int32).reshape((segments + 1, query_count))
        launch_kernel("top_k", search_kernels.top_k_segments, blocks(segments * query_count),
                      THREADS_PER_BLOCK, scores, tile_start, kept, segments, part_score,
                      part_target, part_count)
        launch_kernel("top_k", search_kernels.top_k_merge, blocks(query_count),
                      THREADS_PER_BLOCK, kept, segments, part_score, part_target, part_count,
                      best_score, best_target, count)
    counts = count.copy_to_host()
    ranks = np.arange(kept)[None, :] < counts[:, None]
    pair_query = np.repeat(np.arange(query_count, dtype=np.int64), counts)
    return pair_query, best_target.copy_to_host()[ranks]


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
