"""Small batches on the device: a few hundred pairs of at most a few thousand residues
(GATK HaplotypeCaller's calls) in one upload, one launch of the block kernel
(:mod:`gpualign_df.kernels.block`: fill, walk and CIGAR of a pair in one block) and one
copy back (a second where its CIGARs are long), where the batch path (:mod:`gpualign_df.gpu.batches`) spends more on its
launches, planning and copies than on the cells of such a batch.

The results are the batch path's: the same cells, end cells, walk and CIGARs.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..encode import EncodedSequences
from ..job import needs_linear_space
from ..kernels import block, dpx, simulator
from ..kernels.strip import STRIP_ROWS, WARP
from ..scoring import Mode, Scoring
from .buffers import (DEVICE_LOCK, device_table, download, kept_upload, scratch,
                      upload_codes, upload_parts, used_sequences)
from .launch import launch_kernel
from .long import walk_lanes
from .memory import engine_allocations


#: CIGAR characters a pair that the first copy back takes (the rest, where a batch's
#: CIGARs are longer, come in a second copy).
CHARACTERS_GUESS = 64


def small_batch(query_lengths: np.ndarray, target_lengths: np.ndarray,
                traceback_memory: int | None, tuning: config.Settings) -> bool:
    """Whether the pairs of a job of host-encoded pairs (their lengths) run as one small
    batch: at most ``small_batch_pairs`` pairs of at most ``small_batch_cells`` cells in
    all (their traceback words), none of more than ``inter_max_cells`` (a longer pair takes
    the band kernel's many warps) nor with more traceback bytes than ``traceback_memory``
    (such a pair is traced back in linear space)."""
    if not 0 < len(query_lengths) <= tuning.small_batch_pairs:
        return False
    cells = query_lengths.astype(np.int64) * target_lengths
    return int(cells.max()) <= tuning.inter_max_cells and \
        int(cells.sum()) <= tuning.small_batch_cells and (
            traceback_memory is None or not needs_linear_space(
                query_lengths, target_lengths, traceback_memory).any())


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values), np.int64)
    np.cumsum(values[:-1], out=out[1:])
    return out


def align_small(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                pair_target: np.ndarray, valid: np.ndarray, scoring: Scoring, mode: Mode, *,
                traceback: bool, cigar_style: str, clip: str | None) -> tuple:
    """Align pairs ``(pair_query[k], pair_target[k])`` where ``valid[k]`` (host arrays) in
    one launch of the block kernel. Returns host arrays in pair order: ``(table, chars,
    offsets, cells)``, ``table`` the result columns as its rows (the first 3 without
    traceback, whose CIGAR ``chars`` and ``offsets`` are None; rows not valid hold
    anything). Reads the settings of the calling thread."""
    tuning = config.settings()
    count = len(pair_query)
    queries, pair_query = used_sequences(queries, pair_query)
    targets, pair_target = used_sequences(targets, pair_target)
    m = np.where(valid, queries.lengths[pair_query], -1)
    n = np.where(valid, targets.lengths[pair_target], 0)
    rows = np.maximum(m, 0)
    strips = (rows + STRIP_ROWS - 1) // STRIP_ROWS
    pairs = np.stack([queries.offsets[pair_query], targets.offsets[pair_target], m, n,
                      _exclusive_cumsum(strips * n if traceback else np.zeros(count, np.int64)),
                      _exclusive_cumsum(2 * (n + 1)),
                      _exclusive_cumsum(rows + n + 1)]).astype(np.int64)
    counter = np.zeros(1, np.int64)
    lanes = walk_lanes(mode.code, tuning)
    if simulator() and lanes:  # (the simulator's warp ballot is a block barrier)
        threads = lanes
    else:  # a strip a thread, in as many passes as it takes
        cap = min(tuning.small_batch_threads, WARP if simulator() else block.MAX_THREADS)
        threads = max(lanes, min(cap, -(-int(strips.max(initial=1)) // WARP) * WARP))
    kernel = block.block_kernel(mode.code, *mode.flags(), traceback, cigar_style == "M",
                                clip == "soft", dpx.available(), lanes,
                                tuning.walk_probes if lanes else 1)
    cells = int((rows * n).sum())
    bound = int(2 * (rows + n).sum()) + 1 if traceback else 0
    out_bytes = 4 * block.OUT_ROWS * count
    with DEVICE_LOCK, engine_allocations():
        # the codes of a collection kept on the device (a prepared database) are there
        kept = [kept_upload(encoded) for encoded in (queries, targets)]
        device_pairs, device_counter, *uploaded = upload_parts(
            [pairs.view(np.uint8).ravel(), counter.view(np.uint8)] + [
                upload_codes(encoded) for encoded, copy in zip((queries, targets), kept)
                if copy is None])
        query_codes, target_codes = (
            copy.codes if copy is not None else uploaded.pop(0) for copy in kept)
        device_pairs = device_pairs.view(np.int64).reshape(block.PAIR_FIELDS, count)
        # the result table, then the CIGAR characters: one copy back takes both
        results = scratch("small_results", out_bytes + bound, np.uint8)
        out = results[:out_bytes].view(np.int32).reshape(block.OUT_ROWS, count)
        tb = scratch("small_tb", int((strips * n).sum()) if traceback else 1, np.uint32)
        rows_above = scratch("small_rows_above", int(2 * (n + 1).sum()), np.int32)
        runs = scratch("small_runs", int((rows + n + 1).sum()) if traceback else 1, np.uint32)
        launch_kernel("small", kernel, count, threads, query_codes, target_codes, device_pairs,
                      device_table("substitution", scoring.matrix.ravel().astype(np.int32)),
                      len(scoring.alphabet), scoring.gap_open, scoring.gap_extend,
                      device_table("concrete", scoring.concrete), tb, rows_above, runs, out,
                      results[out_bytes:], device_counter.view(np.int32))
        # the table and the characters of CIGARs of up to ``CHARACTERS_GUESS`` on average
        first = download(results, out_bytes + min(bound, CHARACTERS_GUESS * count))
        table = first[:out_bytes].view(np.int32).reshape(block.OUT_ROWS, count)
        if not traceback:
            return table[:3], None, None, cells
        lengths = np.where(valid, table[block.CIGAR_LENGTH_ROW], 0).astype(np.int64)
        offsets = np.zeros(count + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        placed = first[out_bytes:] if out_bytes + total <= len(first) else \
            download(results[out_bytes:], total)
    # each pair's characters from where the kernel put them, in row order
    at = np.repeat(table[block.CHAR_ROW].astype(np.int64) - offsets[:-1], lengths) + \
        np.arange(total)
    return table[:block.CHAR_ROW], placed[at], offsets, cells
