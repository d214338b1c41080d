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
from ..kernels import block, dpx, simulator
from ..kernels.strip import STRIP_ROWS, WARP
from ..scoring import Mode, Scoring
from .buffers import (DEVICE_LOCK, download, kept_upload, scoring_tables, scratch_buffer,
                      scratch_views, staging, upload_into, used_sequences)
from .launch import launch_kernel
from .long import walk_lanes
from .memory import engine_allocations


#: CIGAR characters a pair that the first copy back takes (the rest, where a batch's
#: CIGARs are longer, come in a second copy).
CHARACTERS_GUESS = 64


def small_batch(count: int, cells: int, largest: int, traceback_bytes: int,
                traceback_memory: int | None, tuning: config.Settings) -> bool:
    """Whether the ``count`` pairs of a job of host-encoded pairs run as one small batch
    (their sizes as :func:`gpualign_df.kernels.encoding.pair_sizes` gives them: cells in
    all, the most cells and the most full-traceback bytes of one pair): at most
    ``small_batch_pairs`` pairs of at most ``small_batch_cells`` cells in all, none of
    more than ``inter_max_cells`` (a longer pair takes the band kernel's many warps) nor
    with more traceback bytes than ``traceback_memory`` (such a pair is traced back in
    linear space, :func:`gpualign_df.job.needs_linear_space`)."""
    return 0 < count <= tuning.small_batch_pairs and largest <= tuning.inter_max_cells \
        and cells <= tuning.small_batch_cells and (
            traceback_memory is None or traceback_bytes <= traceback_memory)


#: Warps of strips the block kernel's automatic strip height aims at: one for each of an
#: SM's four schedulers.
BLOCK_WARPS = 4


def block_threads(tuning: config.Settings) -> int:
    """Most threads of the block kernel's blocks: ``small_batch_threads``, at most
    ``MAX_THREADS`` (a warp under the CUDA simulator, whose threads are slow to
    synchronize)."""
    return min(tuning.small_batch_threads, WARP if simulator() else block.MAX_THREADS)


def block_layout(tuning: config.Settings, longest: int) -> tuple[int, int]:
    """Columns a thread of the block kernel computes a step and query rows of its strips
    (the ``small_batch_columns`` and ``small_batch_rows`` settings, checked), for a batch
    whose longest query has ``longest`` residues: by default the fewest rows, 3 to 8,
    that take it in one pass of :data:`BLOCK_WARPS` warps (or of :func:`block_threads`
    where fewer).

    >>> import dataclasses
    >>> from gpualign_df import config
    >>> tuning = dataclasses.replace(config.settings(), small_batch_threads=32)
    >>> [block_layout(tuning, longest) for longest in (90, 150, 5000)]
    [(2, 3), (2, 5), (2, 8)]
    """
    columns, rows = tuning.small_batch_columns, tuning.small_batch_rows
    if columns not in range(1, block.MAX_COLUMNS + 1):
        raise ValueError(f"small_batch_columns must be 1 to {block.MAX_COLUMNS}, "
                         f"not {columns!r}")
    if rows is None:
        threads = min(BLOCK_WARPS * WARP, block_threads(tuning))
        rows = min(max(-(-longest // max(threads, 1)), 3), STRIP_ROWS)
    elif rows not in range(2, STRIP_ROWS + 1):
        raise ValueError(f"small_batch_rows must be 2 to 8 or None, not {rows!r}")
    return columns, rows


def align_small(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                pair_target: np.ndarray, valid: np.ndarray, scoring: Scoring, mode: Mode, *,
                traceback: bool, cigar_style: str, clip: str | None, meanwhile=None) -> tuple:
    """Align pairs ``(pair_query[k], pair_target[k])`` where ``valid[k]`` (host arrays) in
    one launch of the block kernel. Returns host arrays in pair order: ``(table, chars,
    offsets, cells)``, ``table`` the result columns as its rows (the first 3 without
    traceback, whose CIGAR ``chars`` and ``offsets`` are None; rows not valid hold
    anything). ``meanwhile()`` (optional) is called once the kernel is launched, before
    the wait for its results: the caller's host work overlaps the kernel. Reads the
    settings of the calling thread.

    The host work of a call is a few calls and no device allocation: the pairs table is
    written by one compiled pass (:func:`gpualign_df.kernels.block.pair_table`) straight
    into pinned memory beside the codes, which one copy takes to a buffer kept between
    calls without a wait, and the kernel is given kept buffers whole (views made once),
    never a slice, since each CuPy slice or view costs microseconds: the result table
    and the CIGAR characters, which it writes, are the two parts of one buffer (the
    characters from where the pairs table's counter starts), so that one copy takes both
    back."""
    tuning = config.settings()
    count = len(pair_query)
    queries, pair_query = used_sequences(queries, pair_query)
    targets, pair_target = used_sequences(targets, pair_target)
    kept = [kept_upload(encoded) for encoded in (queries, targets)]
    # the upload: the pairs table and its counter (int64), then the codes (or the bytes,
    # which the kernel maps) of each collection not kept on the device (a pairwise job's
    # one collection once)
    table_bytes = 8 * (block.PAIR_FIELDS * count + 1)
    bases: dict[int, int] = {}
    size = table_bytes
    for encoded, copy in zip((queries, targets), kept):
        if copy is None and id(encoded) not in bases:
            bases[id(encoded)] = size
            size += len(encoded.text if encoded.unmapped else encoded.codes)
    sizes = np.zeros(block.SIZES, np.int64)
    # the result table (int32, a row of ``count`` a column), then the CIGAR characters:
    # one copy back takes both. The kernel is given the buffer whole, the characters'
    # positions counted from its start; under the simulator, which copies each array
    # argument in and back (the later copy back would overwrite the earlier), the two
    # parts apart, the characters' positions counted from theirs
    out_bytes = 4 * block.OUT_ROWS * count
    first_character = 0 if simulator() else out_bytes
    with DEVICE_LOCK, engine_allocations():
        host = staging(size)
        step_columns, strip_rows = block_layout(tuning, queries.longest)
        block.pair_table(queries.offsets, queries.lengths, targets.offsets, targets.lengths,
                         pair_query, pair_target, valid, traceback, step_columns, strip_rows,
                         bases.get(id(queries), 0),
                         bases.get(id(targets), 0), first_character,
                         host[:table_bytes].view(np.int64), sizes)
        # the kernel maps the bytes where each pair has sequences of its own, which no
        # other block reads, and every sequence is in a pair (so each byte is checked)
        # (two collections uploaded: neither kept, and not one for both sides)
        map_residues = bool(sizes[block.SIZE_EACH_ONCE]) and len(bases) == 2 and \
            queries.unmapped and targets.unmapped
        for encoded in (queries, targets):
            if id(encoded) in bases:
                start = bases[id(encoded)]
                residues = encoded.text if map_residues else encoded.codes
                host[start:start + len(residues)] = residues
        sent, table = scratch_views("small_upload", -(-size // 8) * 8, np.uint8, np.uint8,
                                    np.int64)
        upload_into(sent, host)
        query_codes, target_codes = (sent if copy is None else copy.codes for copy in kept)
        cells, bound = int(sizes[block.SIZE_CELLS]), int(sizes[block.SIZE_CHARACTERS])
        lanes = walk_lanes(mode.code, tuning)
        if simulator() and lanes:  # (the simulator's warp ballot is a block barrier)
            threads = lanes
        else:  # a strip a thread, in as many passes as it takes
            strips = max(int(sizes[block.SIZE_STRIPS]), 1)
            threads = max(lanes, min(block_threads(tuning), -(-strips // WARP) * WARP))
        kernel = block.block_kernel(mode.code, *mode.flags(), traceback, cigar_style == "M",
                                    clip == "soft", dpx.available(), lanes,
                                    tuning.walk_probes if lanes else 1, step_columns,
                                    map_residues, rows=strip_rows)
        results, out = scratch_views("small_results", -(-(out_bytes + bound) // 4) * 4,
                                     np.uint8, np.uint8, np.int32)
        substitution, concrete, lut = scoring_tables(scoring)
        words = int(sizes[block.SIZE_TRACEBACK]) if traceback else 1
        runs = int(sizes[block.SIZE_RUNS]) if traceback else 1
        launch_kernel("small", kernel, count, threads, query_codes, target_codes, table, count,
                      substitution, len(scoring.alphabet), scoring.gap_open,
                      scoring.gap_extend, concrete, lut,
                      scratch_buffer("small_tb", words, np.uint32),
                      scratch_buffer("small_rows_above", int(sizes[block.SIZE_ROWS_ABOVE]),
                                     np.int32),
                      scratch_buffer("small_runs", runs, np.uint32),
                      *((out, results) if first_character else (
                          out[:block.OUT_ROWS * count], results[out_bytes:])), kept=True)
        if meanwhile is not None:
            meanwhile()
        # the table and the characters of CIGARs of up to ``CHARACTERS_GUESS`` on average
        first = download(results, out_bytes + min(bound, CHARACTERS_GUESS * count))
        columns = first[:out_bytes].view(np.int32)
        if map_residues and (columns[block.CHAR_ROW * count:] == block.BAD_RESIDUE).any():
            for encoded in (queries, targets):
                encoded.codes  # (raises InvalidResidueError, naming the row and position)
            raise RuntimeError("the small-batch kernel found a character outside the "
                               "alphabet that the host's encoding did not")
        if not traceback:
            return columns.reshape(block.OUT_ROWS, count)[:3], None, None, cells
        offsets = np.empty(count + 1, np.int64)
        total = int(block.cigar_offsets(columns, count, valid, offsets))
        placed = first if out_bytes + total <= len(first) else \
            download(results, out_bytes + total)
        # (the characters' positions from the start of what the kernel was given)
        placed = placed[out_bytes - first_character:]
    chars = np.empty(total, np.uint8)
    block.place_cigars(columns, count, placed, offsets, chars)
    return columns.reshape(block.OUT_ROWS, count)[:block.CHAR_ROW], chars, offsets, cells
