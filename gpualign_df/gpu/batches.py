"""Aligning pairs on the device: a job's pairs planned into batches, each batch gathered,
filled, walked back and written as CIGAR characters on the device, and the result columns
assembled in job row order.

Sequences live on the device as residue codes + offsets (:class:`DeviceSequences`); every
batch's residues are copied into the interleaved layout the walk reads on the device (by a
gather, or by the grouped fill as it reads them), and a last kernel puts every pair's
characters at its row's offset in one buffer. Results come out as device arrays
(:class:`DeviceResults`) that the pandas path copies to the host (:func:`to_host`) and the
cuDF path wraps as columns without a host copy of residues or CIGARs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .. import config
from ..arrays import AlignmentArrays
from ..encode import EncodedSequences
from ..job import traceback_budget
from ..kernels import band, dpx, inter, inter16, pairs16, simulator
from ..kernels import traceback as tb_kernels
from ..kernels.search import GROUP_BLOCK
from ..kernels.encoding import SMALL_CODES, pair_sizes
from ..kernels.planning import (ABOVE_ROW, COLUMNS_ROW, QUERY_ROW, SLOT_COLUMNS, SLOT_QUERY,
                                SLOT_ROWS, SLOT_RUN, SLOT_TARGET, SLOT_TRACEBACK, TARGET_ROW,
                                TRACEBACK_ROW)
from ..kernels.gather import LONG_GATHER_BLOCKS, gather_long_residues, prepare_inter_slots
from ..kernels.strip import mode_shape
from ..scoring import MODE_LOCAL, Mode, Scoring
from .buffers import (DEVICE_LOCK, DeviceSequences, buffer_views, device_table,
                      download_pinned, free_bytes, kept_for, read_later, row_numbers, scratch,
                      scratch_buffer, scratch_views, upload, used_sequences)
from .device import THREADS_PER_BLOCK, array_module, blocks, device_address
from .launch import launch_kernel
from .long import align_linear, fill_long_batch, walk_lanes, walk_probes
from .memory import engine_allocations
from .plan import Batch, long_pair_cells, module_of, plan_batches, to_numpy
from .policy import (fill_fits_16bit, fill_shape, keyed_best_fits, pair_group_bias,
                     pair_group_class, pair_group_profile, pair_group_table, table16,
                     use_fill_16bit)
from .small import align_small, small_batch
from .streams import beside_default_stream

#: Result columns the kernels write, by job row (int32), named as the result frame's
#: (:mod:`gpualign_df.results`); score-only jobs write the first 3.
RESULT_COLUMNS = ("score", "query_end", "target_end", "query_start", "target_start",
                  "matches", "mismatches", "gap_opens", "gaps", "cigar_length")


@dataclass
class DeviceResults:
    """Result columns in job row order, on the device (arrays of :func:`array_module`).

    ``chars``/``offsets`` hold the CIGARs; ``table`` holds the columns as its rows (one
    copy to the host takes them all). A one-batch job leaves its total unread
    (``characters`` None), so that the caller can build its other columns while the
    kernels run; :meth:`cigar_chars` waits for it. Its characters lie in a buffer sized by
    a bound: one kept between jobs where the caller deferred them (see
    :func:`align_on_device`), whose total's copy to the host is queued behind the walk
    (``total``, :func:`~gpualign_df.gpu.buffers.read_later`).
    """

    columns: dict
    chars: object | None
    offsets: object | None
    cells: int
    characters: int | None = 0
    table: object = None    # the 2-D array whose rows are ``columns``, in their order
    total: Callable[[], int] | None = None   # the characters' count, once copied

    @property
    def characters_bound(self) -> int:
        """Most characters the CIGARs take (their count once read), known without a
        wait for the kernels."""
        return len(self.chars) if self.characters is None else self.characters

    def cigar_chars(self):
        """The CIGAR characters in a buffer of their own, ``offsets[-1]`` of them (at
        least one byte): their count read from the device (the one wait for the walk;
        where the total's copy was queued behind it, not for the CIGAR kernel after it),
        then a copy queued out of the bound-sized buffer (the caller of a deferred job
        still holds the device lock: that buffer is kept between jobs)."""
        if self.characters is None:
            self.characters = self.total() if self.total is not None else \
                int(self.offsets[-1])
            self.total = None
            self.chars = device_prefix(self.chars, max(self.characters, 1))
        return self.chars


def device_prefix(array, count: int):
    """A new device array of ``array[:count]``: on a GPU one copy queued on CuPy's
    current stream, where CuPy's ``copy`` of a slice launches an elementwise kernel
    (several times slower, and in the device's work after the walk)."""
    xp = array_module()
    if xp is np:
        return array[:count].copy()
    out = xp.empty(count, array.dtype)
    runtime = xp.cuda.runtime
    runtime.memcpyAsync(out.data.ptr, array.data.ptr, count * array.itemsize,
                        runtime.memcpyDeviceToDevice, xp.cuda.get_current_stream().ptr)
    return out


@dataclass(frozen=True)
class PairGroup:
    """A job's grouped pair kernel tables on the device (``table``, ``query_pair``,
    ``target_pair`` of :func:`~gpualign_df.gpu.policy.pair_group_table`) and its scoring,
    whose bounds each batch checks (:func:`group_class`); ``profile``: the byte profile's
    (``selectors``, ``columns`` of :func:`~gpualign_df.gpu.policy.pair_group_profile`),
    where the mode and the ``pair_group_profile`` setting allow it, for jobs whose query
    codes are all below :data:`~gpualign_df.kernels.encoding.SMALL_CODES`."""

    scoring: Scoring
    tables: tuple
    traceback: bool
    mode: Mode
    profile: tuple | None = None
    #: :func:`group_class` by (longest query, longest target), as jobs ask it
    classes: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class DeviceJob:
    """What every batch of one job shares: sequences and pair lists on the device, the
    scoring tables, what the kernels are specialised for, the result columns, and the
    settings the job started with (read once, in the calling thread)."""

    queries: DeviceSequences
    targets: DeviceSequences
    pair_query: object          # int64, by job row (device arrays)
    pair_target: object
    sub: object                 # int32 substitution table, alphabet x alphabet
    sub16: object | None        # the same with a padding code, for packed 16-bit fills
    concrete: object            # uint8 per code: 1 for a concrete residue (``=`` vs ``X``)
    alphabet_size: int
    gap_open: int
    gap_extend: int
    flags: tuple                # (mode code, fqs, fqe, fts, fte, traceback)
    merge_matches: bool         # CIGAR style "M"
    soft_clip: bool
    columns: dict               # name -> int32 device column, job row order
    use_dpx: bool
    byte_scores: bool           # scores among codes 0-7 fit a byte (band kernels' byte rows)
    sub_range: tuple            # (lowest, highest) substitution score
    symmetric: bool             # s(a, b) == s(b, a) for every pair of codes
    tuning: config.Settings
    pair_group: PairGroup | None = None   # where the job may take the grouped pair kernel
    all_valid: bool = False     # every job row is valid (no mask where CIGARs are placed)

    @property
    def traceback(self) -> bool:
        return self.flags[-1]


def align_on_device(queries: DeviceSequences, targets: DeviceSequences, pair_query,
                    pair_target, query_lengths, target_lengths, valid, scoring: Scoring,
                    mode: Mode, *, traceback: bool, cigar_style: str, clip: str | None,
                    progress=None,
                    longest: tuple[int, int] | Callable[[], tuple[int, int]] | None = None,
                    all_valid: bool = False, traceback_memory: int | None = None,
                    deferred_cigars: bool = False) -> DeviceResults:
    """Align job rows ``k`` = (``pair_query[k]``, ``pair_target[k]``) whose ``valid[k]``.

    The per-row arrays may be numpy or device (CuPy) arrays: device ones are planned on the
    device, so a job whose arrays already live there copies nothing per row to the host;
    host ones are split into short and long pairs on the host (the long pairs' plan needs
    no device work) and only the short pairs' lengths are uploaded.
    ``longest``: bounds on the longest query and target of the job, where the caller knows
    them (the plan then reads no maxima back; see :func:`gpualign_df.gpu.plan.plan_batches`),
    or a callable that returns them, called once before the plan, after the host's work
    that does not need them (a caller's read of them from the device, and its checks of
    the input, then wait for less; an exception it raises comes before any alignment);
    ``all_valid``: every ``valid[k]`` is known true (no read of how many are).
    ``traceback_memory``: bytes one pair's traceback may take (None: the
    ``traceback_memory_share`` of the free device memory); a pair whose words need more is
    traced back in linear space. ``deferred_cigars``: the caller holds ``DEVICE_LOCK``
    until it has called :meth:`DeviceResults.cigar_chars`; a one-batch job then writes
    its CIGARs into a bound-sized buffer kept between jobs right after the walk (no
    allocation), with their total's copy to the host queued before them, so that the
    read waits for the walk alone and the characters' copy into a buffer of their size
    follows the CIGAR kernel with no gap (the caller's host work overlaps both).
    Reads the settings of the calling thread.
    """
    xp = array_module()
    tuning = config.settings()
    with DEVICE_LOCK, engine_allocations():
        if isinstance(pair_query, np.ndarray) and isinstance(pair_target, np.ndarray):
            # one upload for both pair lists
            pair_query, pair_target = xp.asarray(np.stack([pair_query, pair_target]).astype(
                np.int64, copy=False))
        else:
            pair_query, pair_target = (xp.asarray(values, dtype=np.int64)
                                       for values in (pair_query, pair_target))
        # lengths and validity stay where they are: host ones are planned on the host
        lengths = (query_lengths, target_lengths)
        if not all(isinstance(values, np.ndarray) for values in (*lengths, valid)):
            lengths = tuple(xp.asarray(values) for values in lengths)
            valid = xp.asarray(valid)
        return _align_on_device(
            queries, targets, pair_query, pair_target,
            *(values.astype(np.int64, copy=False) for values in lengths),
            valid.astype(bool, copy=False), scoring, mode, traceback, cigar_style, clip,
            progress, longest, all_valid, traceback_memory, deferred_cigars, tuning)


def _align_on_device(queries, targets, pair_query, pair_target, query_lengths, target_lengths,
                     valid, scoring, mode, traceback, cigar_style, clip, progress, longest,
                     all_valid, traceback_memory, deferred_cigars, tuning):
    xp = array_module()
    rows = len(pair_query)
    names = RESULT_COLUMNS if traceback else RESULT_COLUMNS[:3]
    # Kernels write every valid row; invalid rows are masked (and their CIGAR length zeroed).
    table = xp.empty((len(names), max(rows, 1)), np.int32)
    columns = {name: table[k] for k, name in enumerate(names)}
    job = DeviceJob(queries=queries, targets=targets, pair_query=pair_query,
                    pair_target=pair_target, columns=columns, all_valid=all_valid,
                    **_job_constants(scoring, mode, traceback, cigar_style, clip, tuning))
    use_16bit = job.sub16 is not None   # (the packed 16-bit fill's table: where it may run)

    def fits_16bit(longest_query: int, longest_target: int) -> bool:
        return (group_class(job, longest_query, longest_target) is not None
                or (use_16bit and fill_fits_16bit(scoring, longest_query, longest_target)))

    pairs = None if all_valid else module_of(valid).flatnonzero(valid)  # None: every row
    if callable(longest):  # (a read of the device, which then has no work queued: the
        longest = longest()  # driver reports the free memory faster than while it runs)
    free = free_bytes()
    batches = plan_batches(pairs, query_lengths, target_lengths, traceback,
                           int(free * tuning.gpu_memory_share),
                           sort=tuning.sort_by_length,
                           fits_16bit=fits_16bit if use_16bit or job.pair_group else None,
                           longest=longest,
                           pair_groups=(lambda longest_query, longest_target:
                                        group_class(job, longest_query, longest_target)),
                           inter_max_cells=tuning.inter_max_cells,
                           traceback_budget=traceback_budget(traceback_memory, free, tuning),
                           device=xp)
    if traceback:
        valid = xp.asarray(valid)
    local, _corner, _free_row0, _free_col0, end_row, _end_column = mode_shape(
        mode.code, *mode.flags())
    tracks_rows = local or end_row  # the fill keeps running row bests (keyed or selected)
    # One batch (the usual case): its CIGARs go straight to their rows' places in the column.
    direct = valid if traceback and len(batches) == 1 else None
    pieces = []
    cells = 0
    for batch in batches:
        keyed = (tuning.keyed_best and tracks_rows and
                 keyed_best_fits(scoring, batch.longest_query, batch.longest_target))
        reported = [0]

        def on_cells(done: int) -> None:
            done = min(done, batch.cells - reported[0])
            reported[0] += done
            if progress is not None and done > 0:
                progress(done)

        piece = run_batch(job, batch, keyed, direct, on_cells, deferred_cigars)
        if piece is not None:
            pieces.append(piece)
        cells += batch.cells
        on_cells(batch.cells - reported[0])
    if not traceback:
        return DeviceResults(columns, None, None, cells, table=table)
    if direct is not None:
        chars, offsets, total = pieces[0]
        return DeviceResults(columns, chars, offsets, cells, characters=None, table=table,
                             total=total)
    offsets = row_offsets(xp, columns["cigar_length"], valid)
    total = int(offsets[-1])
    chars = xp.empty(max(total, 1), dtype=np.uint8)
    for batch_chars, batch_offsets, slot_row, slot_lengths in pieces:
        launch_kernel("cigar", tb_kernels.scatter_strings, blocks(slot_row.size),
                      THREADS_PER_BLOCK, batch_chars, batch_offsets, slot_row, slot_lengths,
                      chars, offsets)
    return DeviceResults(columns, chars, offsets, cells, total, table)


def _job_constants(scoring: Scoring, mode: Mode, traceback: bool, cigar_style: str,
                   clip: str | None, tuning: config.Settings) -> dict:
    """The fields of a :class:`DeviceJob` that follow from its options alone (device
    tables, flags, what the kernels are specialised for), made once for a run of jobs
    with the same options (:func:`~gpualign_df.gpu.buffers.kept_for`)."""
    def make() -> dict:
        use_16bit = use_fill_16bit(tuning.fill_16bit, traceback)
        return dict(
            sub=device_table("substitution", scoring.matrix.ravel().astype(np.int32)),
            sub16=device_table("substitution16", table16(scoring)) if use_16bit else None,
            concrete=device_table("concrete", scoring.concrete),
            alphabet_size=len(scoring.alphabet), gap_open=scoring.gap_open,
            gap_extend=scoring.gap_extend, flags=(mode.code, *mode.flags(), traceback),
            merge_matches=cigar_style == "M", soft_clip=clip == "soft",
            use_dpx=dpx.available(),
            byte_scores=band.byte_scores_fit(scoring.matrix, scoring.gap_extend,
                                             mode_shape(mode.code, *mode.flags())[0]),
            sub_range=(int(scoring.matrix.min()), int(scoring.matrix.max())),
            symmetric=bool(np.array_equal(scoring.matrix, scoring.matrix.T)), tuning=tuning,
            pair_group=_pair_group_tables(scoring, mode, traceback, tuning))
    return kept_for("job_constants", (scoring, (mode.code, *mode.flags()), traceback,
                                      cigar_style, clip, tuning), make)


def _pair_group_tables(scoring: Scoring, mode: Mode, traceback: bool,
                       tuning: config.Settings) -> PairGroup | None:
    """The grouped pair kernel's tables on the device for a local job or one with
    traceback where the ``pair_group_fill`` setting allows it (None: where DPX runs) and
    they fit, with the byte profile's where the ``pair_group_profile`` setting and the
    mode allow it; else None (each batch still checks :func:`group_class`)."""
    allowed = dpx.available() if tuning.pair_group_fill is None else tuning.pair_group_fill
    if not allowed or not tuning.pair_groups or not (traceback or mode.code == MODE_LOCAL):
        return None
    tables = pair_group_table(scoring, scoring.gap_open if pairs16.top_aligned(
        (mode.code, *mode.flags())) else 0)
    if tables is None:
        return None
    profile = None
    use_profile = (not traceback if tuning.pair_group_profile is None
                   else tuning.pair_group_profile)
    if use_profile and not pairs16.top_aligned((mode.code, *mode.flags())):
        profile = pair_group_profile(scoring)
    return PairGroup(scoring, tuple(
        device_table(name, values) for name, values in
        zip(("pair_group_table", "pair_group_query", "pair_group_target"), tables)),
        traceback, mode, profile and tuple(
            device_table(name, values) for name, values in
            zip(("pair_group_selectors", "pair_group_columns"), profile)))


def group_class(job: DeviceJob, longest_query: int, longest_target: int):
    """The grouped pair kernel's ``(lanes, rows)`` for a batch of the job's pairs up to
    these lengths, or None where the job or the batch does not take it."""
    group = job.pair_group
    if group is None:
        return None
    key = (longest_query, longest_target)
    if key not in group.classes:  # (a job's constants are kept: so is what it asked)
        if len(group.classes) >= 4096:
            group.classes.clear()
        group.classes[key] = pair_group_class(
            group.scoring, longest_query, longest_target, job.tuning.pair_groups,
            group.traceback, pair_group_bias(group.scoring, group.mode, longest_query,
                                             longest_target))
    return group.classes[key]


def _offsets(xp, lengths):
    """Offsets (``len(lengths) + 1``, int64, on the device) of strings of ``lengths``
    (any integer type: summed as int64)."""
    offsets = xp.zeros(len(lengths) + 1, dtype=np.int64)
    xp.cumsum(lengths, dtype=np.int64, out=offsets[1:])
    return offsets


def row_offsets(xp, cigar_length, valid, rows: int | None = None):
    """CIGAR offsets of the job rows (``rows + 1``) from the device lengths; ``valid``
    None: every one of ``rows`` rows is valid (no mask to apply)."""
    if valid is None:
        return _offsets(xp, cigar_length[:rows])
    return _offsets(xp, xp.where(valid, cigar_length[:len(valid)], 0))


def cigar_bound(run_words: int) -> int:
    """Most CIGAR characters a batch can write, a multiple of 4 (the CIGAR kernel's
    words): a run of L operations takes at most ``digits(L) + 1 <= 2L`` characters, and
    a pair has at most ``len(query) + len(target)`` operations (``run_words`` bounds
    their sum)."""
    return -(-2 * run_words // 4) * 4


def run_batch(job: DeviceJob, batch: Batch, keyed: bool, direct, on_cells,
              deferred: bool = False):
    """Gather, fill, walk and write one batch (``keyed``: the fill keeps keyed row bests).
    Returns its CIGAR piece (batch buffer, slot offsets, rows, lengths), or with ``direct``
    (the job's validity; one batch only) the finished column ``(chars, offsets, total)``:
    characters in a bound-sized buffer, row offsets, and with ``deferred`` (the buffer
    kept between jobs) the total's :func:`~gpualign_df.gpu.buffers.read_later`, else None
    (see :func:`align_on_device`); None without traceback. A
    long-pair fill reports its cells to ``on_cells`` while it runs (see
    :class:`~gpualign_df.gpu.streams.FillControl`); other batches report nothing here."""
    xp = array_module()
    tuning = job.tuning
    columns = job.columns

    def device64(values):  # (the plan's arrays are so already: no call)
        if type(values) is xp.ndarray and values.dtype == np.int64:
            return values
        return xp.asarray(values, dtype=np.int64)

    if batch.kind == "inter":  # planned on the device
        slot_row, query_lengths, target_lengths = (device64(values) for values in (
            batch.slot_row, batch.query_lengths, batch.target_lengths))
        if job.traceback:   # the layout the plan gave the traceback words
            shape = batch.group_class
        else:
            shape = group_class(job, batch.longest_query, batch.longest_target) \
                if batch.packed else None
        if shape is not None and not job.traceback:  # residues read in place
            with beside_default_stream(batch.cells, tuning) as stream:
                # (kept buffers and their kept byte view: the kernel writes none of them)
                nothing, no_bytes = scratch_views("traceback", 1, np.uint32, np.uint32,
                                                  np.uint8)
                no_starts = buffer_views("no slot starts",
                                         scratch_buffer("slot_starts", 1, np.int64), 1,
                                         lambda buffer: buffer[:1].reshape((1, 1)))
                _fill_groups(job, batch, shape, slot_row, query_lengths, target_lengths,
                             nothing, stream, (no_starts, no_bytes, no_bytes))
            return None
    else:  # planned on the host: one upload of every per-slot row
        shape = None
        table = device64(np.stack([batch.slot_row, batch.query_lengths, batch.target_lengths,
                                   batch.query_start, batch.target_start, batch.tb_start,
                                   batch.columns, batch.run_base]))  # (starts: SLOT_ROWS)
        slot_row, query_lengths, target_lengths = table[0], table[1], table[2]
        starts, *start_rows = _start_rows(table[3:3 + SLOT_ROWS])
    grid = blocks(batch.slots)
    query = scratch("query", batch.query_size, np.uint8)
    target = scratch("target", batch.target_size, np.uint8)
    if batch.kind == "inter":
        warps = batch.warp_table
        starts, *start_rows = buffer_views(
            "slot starts", scratch_buffer("slot_starts", SLOT_ROWS * batch.slots, np.int64),
            batch.slots, lambda buffer: _start_rows(
                buffer[:SLOT_ROWS * batch.slots].reshape((SLOT_ROWS, batch.slots))))
        if shape is None:  # the inter fill reads the gathered residues; the grouped
            # fill reads them in place and writes the walk's copies and starts itself
            launch_kernel("gather", prepare_inter_slots, grid, THREADS_PER_BLOCK, warps,
                          starts, slot_row, job.queries.codes, job.queries.offsets,
                          job.pair_query, query_lengths, query, job.targets.codes,
                          job.targets.offsets, job.pair_target, target_lengths, target)
    query_start, target_start, tb_start, slot_columns, run_base = start_rows
    if batch.kind != "inter":
        for sequences, sequence_of_row, start, lengths, out in (
                (job.queries, job.pair_query, query_start, query_lengths, query),
                (job.targets, job.pair_target, target_start, target_lengths, target)):
            launch_kernel("gather", gather_long_residues, batch.slots * LONG_GATHER_BLOCKS,
                          THREADS_PER_BLOCK, sequences.codes, sequences.offsets, slot_row,
                          sequence_of_row, lengths, start, out)
    alphabet_and_gaps = (job.alphabet_size, job.gap_open, job.gap_extend)
    interval = tuning.progress_interval
    mode_code, fqs, _fqe, fts, _fte, _ = job.flags
    if batch.kind == "linear":  # one pair, its walk done block by block
        runs, run_count = align_linear(job, batch, query, target, on_cells)
        return _write_cigars(job, batch, runs, run_base, run_count, slot_row, query_lengths,
                             direct, lambda: None, deferred)
    tb = scratch("traceback", batch.tb_words, np.uint32)
    long_fill = None

    def settle() -> None:
        """Wait (polled) for a long fill before the host's first wait for later work; the
        walk and CIGAR kernels are queued behind the fill by then."""
        if long_fill is not None:
            long_fill.wait(on_cells, interval)

    with beside_default_stream(batch.cells, tuning) as stream:
        if batch.kind == "long":
            long_fill = fill_long_batch(job, batch, query, target, tb, stream)
            if stream is not None:  # the side stream is joined (a blocking wait) at the end
                settle()
                long_fill = None
        elif shape is not None:  # a group of lanes per 2 pairs; no rows above kept
            _fill_groups(job, batch, shape, slot_row, query_lengths, target_lengths, tb,
                         stream, (starts, query, target))
        else:  # an inter fill: each slot's row above in the batch's row buffers
            h_buffer = scratch("h_row", batch.row_words, np.int32)
            i_buffer = scratch("i_row", batch.row_words, np.int32)
            if batch.packed:  # two pairs per thread; the table has a padding code
                kernel = inter16.fill_kernel16(*job.flags[:-1], job.use_dpx)
                launch_kernel("fill", kernel, blocks(batch.slots // 2), THREADS_PER_BLOCK,
                              query, target, query_lengths, target_lengths,
                              *(warps[row] for row in (QUERY_ROW, TARGET_ROW, ABOVE_ROW,
                                                       COLUMNS_ROW)),
                              job.sub16, *alphabet_and_gaps,
                              h_buffer, i_buffer, slot_row, columns["score"],
                              columns["query_end"], columns["target_end"], stream=stream)
            else:
                kernel = inter.fill_kernel(*job.flags, job.use_dpx, keyed, *fill_shape(tuning),
                                           tuning.funnel_append)
                launch_kernel("fill", kernel, grid, THREADS_PER_BLOCK, query, target,
                              query_lengths, target_lengths,
                              *(warps[row] for row in (QUERY_ROW, TARGET_ROW, ABOVE_ROW,
                                                       TRACEBACK_ROW, COLUMNS_ROW)),
                              job.sub, *alphabet_and_gaps,
                              h_buffer, i_buffer, tb, slot_row, columns["score"],
                              columns["query_end"], columns["target_end"], stream=stream)
    if not job.traceback:
        settle()
        return None
    runs = scratch("runs", batch.run_words, np.uint32)
    run_count = scratch("run_count", batch.slots, np.int32)
    lanes = walk_lanes(job.flags[0], tuning) if batch.kind == "long" else 0
    walk = tb_kernels.walk_kernel(mode_code, fqs, fts, job.merge_matches, job.soft_clip,
                                  batch.kind == "long", lanes, walk_probes(job, lanes),
                                  None if shape is None else
                                  (*shape, pairs16.top_aligned(job.flags[:5]),
                                   pairs16.walk_scores(job.flags[:5]),
                                   pairs16.traceback_piece(job.flags[:5])))
    # a block of ``lanes`` threads per pair, or a thread per slot
    walk_grid, walk_threads = (batch.slots, lanes) if lanes else (grid, THREADS_PER_BLOCK)
    launch_kernel("walk", walk, walk_grid, walk_threads, query, target, query_lengths,
                  target_lengths, query_start, target_start, tb_start, slot_columns,
                  batch.width, tb, job.concrete, job.sub, *alphabet_and_gaps, slot_row,
                  columns["score"], columns["query_end"], columns["target_end"], run_base, runs,
                  run_count, columns["query_start"], columns["target_start"], columns["matches"],
                  columns["mismatches"], columns["gap_opens"], columns["gaps"],
                  columns["cigar_length"])
    return _write_cigars(job, batch, runs, run_base, run_count, slot_row, query_lengths, direct,
                         settle, deferred)


def _start_rows(starts) -> tuple:
    """The slots' starts (``SLOT_ROWS`` rows) and their rows of the query, target,
    traceback word and run starts and of the columns."""
    return (starts, *(starts[row] for row in (SLOT_QUERY, SLOT_TARGET, SLOT_TRACEBACK,
                                              SLOT_COLUMNS, SLOT_RUN)))


def _fill_groups(job: DeviceJob, batch: Batch, shape: tuple[int, int], slot_row,
                 query_lengths, target_lengths, tb, stream, walk_inputs: tuple) -> None:
    """Launch the grouped pair kernel of class ``shape`` (lanes, rows) on a packed inter
    batch, residues read where the sequences are; with traceback its words go to ``tb``
    in the layout the plan sized (the walk's ``grouped``), and it writes what the walk
    reads besides (``walk_inputs``: the slots' starts, the interleaved queries and
    targets; unused without traceback)."""
    lanes, rows = shape
    group = job.pair_group
    table, query_pair, target_pair = group.tables
    # the byte profile where every query code has a byte (the host's bound on them)
    largest = job.queries.largest_code
    profile = group.profile is not None and largest is not None and largest < SMALL_CODES
    if profile:
        query_pair, target_pair = group.profile
    kernel = pairs16.pair_group_kernel(
        lanes, rows, job.use_dpx, traceback=job.traceback,
        max_registers=job.tuning.pair_group_registers if job.traceback else None,
        mode=(group.mode.code, *group.mode.flags()), profile=profile)
    threads = lanes * batch.slots // 2   # a multiple of 32 * lanes
    columns = job.columns
    launch_kernel("fill", kernel, -(-threads // GROUP_BLOCK), GROUP_BLOCK,
                  job.queries.codes, job.queries.offsets, job.pair_query,
                  job.targets.codes, job.targets.offsets, job.pair_target,
                  query_lengths, target_lengths, batch.warp_table, table, len(table),
                  query_pair, target_pair, job.alphabet_size + 1, job.gap_open, job.gap_extend,
                  1 << pairs16.key_bits(rows), slot_row, columns["score"],
                  columns["query_end"], columns["target_end"], tb, device_address(tb),
                  pair_group_bias(group.scoring, group.mode, batch.longest_query,
                                  batch.longest_target), *walk_inputs, stream=stream)


def _write_cigars(job, batch, runs, run_base, run_count, slot_row, query_lengths, direct,
                  settle, deferred=False):
    """CIGAR characters of a walked batch (see :func:`run_batch`'s return); ``settle``
    waits for a long fill still running before the host's first wait."""
    xp = array_module()
    columns = job.columns
    write = tb_kernels.cigar_kernel(job.merge_matches, job.soft_clip)

    def write_into(offsets, chars, words) -> None:
        # (the rows' offsets where the CIGARs go to their rows' places, else the slots')
        launch_kernel("cigar", write, blocks(batch.slots), THREADS_PER_BLOCK, runs, run_base,
                      run_count, slot_row, columns["query_start"], columns["query_end"],
                      query_lengths, offsets, direct is not None, chars, words)
        settle()

    def new_chars(count: int) -> tuple:  # (the bytes and the same as uint32 words)
        chars = xp.empty(-(-max(count, 1) // 4) * 4, dtype=np.uint8)
        return chars, chars.view(np.uint32)

    if direct is not None:  # no wait for the total: a bound sizes the buffer (one kept
        # between jobs where the caller defers the characters' copy, with the total's copy
        # to the host queued before the CIGAR kernel: see align_on_device)
        offsets_of_rows = row_offsets(xp, columns["cigar_length"],
                                      None if job.all_valid else direct, len(direct))
        if deferred:
            total = read_later(offsets_of_rows[-1:])
            chars, words = scratch_views("cigar_chars", cigar_bound(batch.run_words),
                                         np.uint8, np.uint8, np.uint32)
            write_into(offsets_of_rows, chars, words)
            return chars, offsets_of_rows, total
        total = cigar_bound(batch.run_words)
    else:
        slot_offsets = _offsets(xp, xp.where(slot_row >= 0,
                                             columns["cigar_length"][xp.maximum(slot_row, 0)],
                                             0))
        settle()
        total = int(slot_offsets[-1])
    chars, words = new_chars(total)
    write_into(slot_offsets if direct is None else offsets_of_rows, chars, words)
    if direct is not None:
        return chars, offsets_of_rows, None
    # fresh arrays (not scratch buffers): the piece outlives this batch
    return chars, slot_offsets, slot_row, query_lengths


def to_host(results: DeviceResults, valid: np.ndarray, traceback: bool) -> AlignmentArrays:
    """Copy device results into the engines' host arrays."""
    rows = len(valid)
    if results.table is not None:  # one copy (a temporary: the frame copies its columns)
        raw = dict(zip(results.columns, download_pinned(results.table[:, :rows])))
    else:
        raw = {name: to_numpy(array)[:rows] for name, array in results.columns.items()}
    # rows not valid hold anything until zeroed (the host copies are the engine's own)
    host = raw if valid.all() else {name: np.where(valid, raw[name], 0)
                                    for name in results.columns}
    out = AlignmentArrays(valid=valid, score=host["score"], query_end=host["query_end"],
                          target_end=host["target_end"], cells=results.cells)
    if traceback:
        out.query_start, out.target_start = host["query_start"], host["target_start"]
        out.stats = {name: host[name] for name in ("matches", "mismatches", "gap_opens", "gaps")}
        out.stats["length"] = out.stats["matches"] + out.stats["mismatches"] + out.stats["gaps"]
        out.cigar_offsets = to_numpy(results.offsets)
        if results.characters is None:  # the total, from the offsets just copied
            results.characters = int(out.cigar_offsets[-1])
        out.cigar_chars = to_numpy(results.chars[:results.characters])
    return out


def _row_lengths(sequences: DeviceSequences, host: EncodedSequences):
    """The lengths of the sequences ``sequences`` (uploaded ``host``), where the engine's
    arrays live: from the device offsets on a GPU; the host's under the simulator, whose
    device arrays take no array arithmetic."""
    if simulator():
        return host.lengths
    with engine_allocations():
        return array_module().diff(sequences.offsets)


def run_pairs_gpu(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                  pair_target: np.ndarray, scoring: Scoring, mode: Mode, *, traceback: bool,
                  cigar_style: str, clip: str | None, progress,
                  traceback_memory: int | None = None, meanwhile=None,
                  sizes: tuple | None = None, every_row: bool = False) -> AlignmentArrays:
    """Align pairs of host-encoded sequences on the GPU; host arrays in pair order. A job
    that fits one small batch (:func:`gpualign_df.gpu.small.small_batch`) runs in one
    launch of the block kernel, any other in the planner's batches; ``meanwhile`` (a
    callable, optional) runs once the kernels are queued, while they run, before the
    results are read. ``sizes``: the pairs' validity and sizes where the caller has them,
    as ``(valid, pair_sizes(..., valid))`` (:func:`gpualign_df.kernels.encoding.pair_sizes`).
    ``every_row``: pair ``k`` is row ``k`` of both collections, for every row (a whole
    rowwise job): where every pair is short, the planner then takes the device's row
    numbers and the lengths from the uploaded offsets (:func:`_row_lengths`), no pair
    list or length array made on the host or sent.

    The alphabet must fit the kernels' shared table (``MAX_ALPHABET`` symbols):
    :func:`gpualign_df.engine.choose_engine` sends larger ones to the CPU.
    """
    if sizes is None:
        valid = np.empty(len(pair_query), np.bool_)
        sizes = valid, pair_sizes(queries.offsets, queries.valid, targets.offsets,
                                  targets.valid, pair_query, pair_target, valid)
    valid, sizes = sizes
    tuning = config.settings()
    if small_batch(len(pair_query), *sizes, traceback_memory, tuning):
        table, chars, offsets, cells = align_small(
            queries, targets, pair_query, pair_target, valid, scoring, mode,
            traceback=traceback, cigar_style=cigar_style, clip=clip, meanwhile=meanwhile)
        if progress is not None:
            progress(cells)
        results = DeviceResults(dict(zip(RESULT_COLUMNS, table)), chars, offsets, cells,
                                None if chars is None else len(chars), table)
        return to_host(results, valid, traceback)
    if every_row and queries.longest * targets.longest <= long_pair_cells(
            len(pair_query), tuning.inter_max_cells):
        device_queries, device_targets = upload(queries, targets)
        pair_query = pair_target = row_numbers(len(pair_query))
        query_lengths, target_lengths = (_row_lengths(device, host) for device, host in (
            (device_queries, queries), (device_targets, targets)))
    else:
        # (a search's hits: only the database sequences they use go to the device)
        queries, pair_query = used_sequences(queries, pair_query)
        targets, pair_target = used_sequences(targets, pair_target)
        device_queries, device_targets = upload(queries, targets)
        query_lengths, target_lengths = (queries.lengths[pair_query],
                                         targets.lengths[pair_target])
    longest = (queries.longest, targets.longest)
    results = align_on_device(device_queries, device_targets, pair_query, pair_target,
                              query_lengths, target_lengths, valid,
                              scoring, mode, traceback=traceback, cigar_style=cigar_style,
                              clip=clip, progress=progress, longest=longest,
                              all_valid=bool(valid.all()), traceback_memory=traceback_memory)
    if meanwhile is not None:  # (the kernels are queued: the host's work while they run)
        meanwhile()
    return to_host(results, valid, traceback)
