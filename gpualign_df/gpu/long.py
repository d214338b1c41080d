"""Long pairs on the device: the band kernel (:mod:`gpualign_df.kernels.band`) over a batch
of long pairs, and the linear-space traceback of a pair whose traceback cannot fit.

* A batch of long pairs is one launch of persistent one-warp blocks that take the pairs'
  bands (32 * rows query rows each) in order, so one pair fills the GPU and many pairs
  share it; a second kernel folds each pair's band candidates into its end cell. With
  traceback the bands write the skewed words the walk kernel reads
  (:func:`gpualign_df.kernels.traceback.walk_kernel` with ``skewed``).
* A global score-only batch of few wide pairs (:func:`meets_in_middle`) runs each pair as
  two problems of one fill, its left half forward and its right half reversed, joined over
  the middle column (:func:`fill_halves`): the bands of a short query against a long
  target are too few to fill the GPU, and twice as many sweep half the columns. A pair
  whose query is the longer runs transposed (:func:`oriented`).
* A score-only batch of few wide pairs in a mode that frees both ends of their long side
  (local, read-to-reference semi-global) runs each pair as overlapping windows of that side
  (:func:`fill_windows`), each a problem of the same fill, so that as many bands work as
  the GPU has schedulers; a fold of the windows' end cells gives each pair's.
* Linear space (:func:`align_linear`): the forward fill keeps every ``K``-th row's border
  words (checkpoints); the traceback then recomputes, from the bottom, the block of rows
  between the checkpoint above the walk and the walk's row, over the columns left of the
  walk, with full traceback words, and walks it up to the checkpoint row. The
  recomputation runs the same kernel on the same cells, so the words and therefore the
  alignment are those of the full-matrix path. ``K`` is the most rows whose words fit the
  ``linear_block_bytes`` setting (and half the batch budget), chosen by the plan.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import config
from ..kernels import band, simulator, traceback as tb_kernels
from ..kernels.strip import STRIP_ROWS, mode_shape, skewed_stride
from ..scoring import MODE_LOCAL
from .device import THREADS_PER_BLOCK, array_module, blocks, current_device, device_address
from .launch import launch_kernel
from .streams import FillControl

#: Query rows a lane holds in the linear-space fills (a lane's nibbles fill one word).
TRACEBACK_ROWS = STRIP_ROWS


def lane_rows(tuning, traceback: bool, longest_query: int) -> int:
    """Query rows per lane of a band fill (with or without traceback) whose longest query
    has ``longest_query`` rows (the ``band_rows`` setting of ``tuning``)."""
    for bound, score_rows, traceback_rows in tuning.band_rows:
        if bound is None or longest_query < bound:
            return traceback_rows if traceback else score_rows
    return TRACEBACK_ROWS


def score_rows(tuning, m: np.ndarray, n: np.ndarray) -> int:
    """Query rows per lane of a score-only band fill of problems of ``m`` x ``n``: the
    ``band_rows`` setting's, or 2 where every band of the fill can work at once (each
    problem is wider than its bands times their trail) and they are fewer than the
    ``narrow_bands`` share of the warp schedulers: the fill then takes one band's steps,
    which fewer rows shorten, while a taller problem's chain of bands would grow (at 2 rows
    a band's trail is a larger share of its height)."""
    rows = lane_rows(tuning, False, int(np.max(m)))
    return 2 if rows > 2 and narrow_fill(tuning, m, n, rows) else rows


def narrow_fill(tuning, m: np.ndarray, n: np.ndarray, rows: int) -> bool:
    """Whether every band of a fill of problems of ``m`` x ``n`` at ``rows`` rows a lane
    can work at once (each problem is wider than its bands times their trail) and they are
    fewer than the ``narrow_bands`` share of the warp schedulers: the fill's time is one
    band's steps."""
    if tuning.narrow_bands <= 0:
        return False
    m, n = np.asarray(m, np.int64), np.asarray(n, np.int64)
    bands, _ = _band_counts(tuning, m, n, rows)
    working = working_bands(bands, n, band.band_trail(rows, tuning.band_lanes))
    schedulers = 1 if simulator() else 4 * multiprocessors(current_device())
    return working == int(bands.sum()) and working < tuning.narrow_bands * schedulers


def traceback_words(m: int | np.ndarray, n: int | np.ndarray):
    """uint32 traceback words of an m x n problem in the band layout (a multiple of 4, so
    that every problem's words start 16-byte aligned)."""
    return (m + STRIP_ROWS - 1) // STRIP_ROWS * skewed_stride(n)


def working_bands(bands: np.ndarray, n: np.ndarray, trail: int) -> int:
    """Bands of the problems (``bands`` over ``n`` columns each) that can work at once: a
    band trails the band above by ``trail`` columns (:func:`band.band_trail`), so about
    ``n / trail`` bands of a problem sweep it together."""
    return int(np.minimum(bands, (n + trail - 1) // trail + 1).sum())


def _band_counts(tuning, m, n, rows: int):
    """(bands, steps a band) of problems of ``m`` x ``n`` at ``rows`` rows a lane."""
    height = band.band_rows(rows, tuning.band_lanes)
    return (m + height - 1) // height, n + height - 1


def _split_words(tuning, m, n, rows: int):
    """(tiles a band, words of the kept rows, words of the snapshots) of each problem of
    ``m`` x ``n`` in a split traceback fill: every band's bottom row but the last band's
    (int64), a snapshot of every tile of every band (int32)."""
    bands, steps = _band_counts(tuning, m, n, rows)
    tiles = (steps + tuning.split_tile_steps - 1) // tuning.split_tile_steps
    return (tiles, (bands - 1) * (n + 1),
            bands * tiles * band.SNAPSHOT_FIELDS * rows * tuning.band_lanes)


def split_bytes(tuning, m: np.ndarray, n: np.ndarray, rows: int) -> int:
    """Device bytes a split traceback fill (``split_traceback``) of problems of ``m`` x
    ``n`` adds: its kept rows and snapshots."""
    _tiles, kept, snapshots = _split_words(tuning, m, n, rows)
    return int((8 * kept + 4 * snapshots).sum())


def splits(tuning, m: np.ndarray, n: np.ndarray, rows: int) -> bool:
    """Whether a traceback fill of problems of ``m`` x ``n`` (``rows`` rows a lane) is
    split in two passes: its bands that can work at once are fewer than ``split_traceback``
    per warp scheduler (the fill is bound by its critical path, not by the GPU), and some
    band is longer than a tile. Where every band is one tile, the second pass would redo
    every band whole after a first pass along the same critical path as one fill's: one
    pass, its launches and buffers fewer, ends sooner (small batches of medium pairs, as
    GATK's, whose cost is mostly the host's)."""
    if tuning.split_traceback <= 0:
        return False
    step_unit = max(tuning.band_lanes, STRIP_ROWS)  # a batch, a group of steps
    if tuning.split_tile_steps <= 0 or tuning.split_tile_steps % step_unit:
        raise ValueError(f"the split_tile_steps setting ({tuning.split_tile_steps}) must be "
                         f"a positive multiple of {step_unit} (band_lanes and 8)")
    bands, steps = _band_counts(tuning, m, n, rows)
    if int(steps.max(initial=0)) <= tuning.split_tile_steps:
        return False
    working = working_bands(bands, n, band.band_trail(rows, tuning.band_lanes))
    schedulers = 1 if simulator() else 4 * multiprocessors(current_device())
    return working < tuning.split_traceback * schedulers


def _warps(items: int, rows: int, working: int, share: float | None) -> int:
    """Persistent one-warp blocks of a launch: as many as can be resident (register-bound:
    about 128 registers a thread at 8 rows, 64 at 4; at most 32 blocks a multiprocessor),
    at most one per band and, with ``share`` (the ``band_warps`` setting), at most
    ``share`` per band that can work at once: more would wait their band's turn polling,
    taking issue slots from the working warps of their scheduler."""
    if simulator():
        return 1  # the simulator runs blocks one after another
    sms = multiprocessors(current_device())
    per_sm = min(32, 128 // rows)
    warps = min(items, sms * per_sm)
    if share is not None:
        warps = min(warps, int(np.ceil(working * share)))
    return max(1, warps)


@lru_cache(maxsize=None)
def multiprocessors(device: int) -> int:
    """Multiprocessors of CUDA device ``device`` (CuPy's numbering; asked once per device:
    CuPy's ``Device.attributes`` would ask the driver for every attribute at each call)."""
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"])


def walk_lanes(mode_code: int, tuning: config.Settings) -> int:
    """Threads of one pair's traceback walk (``lanes`` of
    :func:`gpualign_df.kernels.traceback.walk_functions`; the ``walk_lanes`` setting): 0
    (one thread) in local mode, whose walk tracks H back cell by cell."""
    if mode_code == MODE_LOCAL:
        return 0
    lanes = tuning.walk_lanes
    if lanes is None:
        return 0 if simulator() else 32
    return lanes


def walk_probes(job, lanes: int) -> int:
    """Diagonal stretches a walk of ``lanes`` threads reads at once (the ``walk_probes``
    setting; 1 for a one-thread walk, which reads none ahead)."""
    return job.tuning.walk_probes if lanes else 1


def unused(dtype):
    """A one-element device array for a kernel argument the kernel does not touch (its
    own array: under the simulator an array passed twice to a launch is copied back
    twice, the untouched copy last)."""
    return _unused(current_device(), np.dtype(dtype).str)


@lru_cache(maxsize=None)
def _unused(device: int, dtype: str):
    return array_module().zeros(1, dtype)


class BandFill:
    """One band-kernel launch over ``problems`` (a :data:`band.FIELDS` x P int64 host
    table whose item, border, top, tile, checkpoint and snapshot offsets this fills in)
    and its end-cell fold. ``split``: :data:`band.WHOLE`, or the pass of a split traceback
    fill (whose second pass shares the first's ``control``: a stop ends both, and its
    counter counts each cell once a pass)."""

    def __init__(self, job, problems: np.ndarray, rows: int, traceback: bool,
                 byte_rows: bool, split: int = band.WHOLE, control: FillControl | None = None,
                 last_column=None) -> None:
        xp = array_module()
        self.job, self.rows, self.traceback, self.byte_rows = job, rows, traceback, byte_rows
        self.last_column = last_column  # int32 device array at the problems' F_COLUMN0
        self.split = split
        self.lanes = job.tuning.band_lanes
        self.tile_steps = job.tuning.split_tile_steps if split != band.WHOLE else 0
        m, n = problems[band.F_M], problems[band.F_N]
        bands, _steps = _band_counts(job.tuning, m, n, rows)
        tiles = 1
        if split != band.WHOLE:
            tiles, kept, snapshots = _split_words(job.tuning, m, n, rows)
        items = bands * tiles if split == band.RESUME else bands
        problems[band.F_BANDS] = bands
        problems[band.F_TILES] = tiles
        problems[band.F_ITEM0] = np.cumsum(items) - items
        problems[band.F_BORDER0] = np.cumsum(n + 1) - (n + 1)
        if split == band.SNAPSHOT:  # where each problem's kept rows and snapshots start
            problems[band.F_CKPT0] = np.cumsum(kept) - kept
            problems[band.F_SNAP0] = np.cumsum(snapshots) - snapshots
            self.kept_words, self.snapshot_words = int(kept.sum()), int(snapshots.sum())
        self.items = int(items.sum())
        self.cells = int((m * n).sum())
        self.working = working_bands(bands, n, band.band_trail(rows, self.lanes))
        # one upload: the table, the order items are taken in, each item's problem
        item_problem = np.repeat(np.arange(problems.shape[1]), items)
        order = item_order(item_problem, problems[band.F_ITEM0], split == band.RESUME)
        uploaded = xp.asarray(np.concatenate([problems.ravel(), order, item_problem]))
        self.problems = uploaded[:problems.size].reshape(problems.shape)
        self.item_order = uploaded[problems.size:problems.size + len(order)]
        self.item_problem = uploaded[problems.size + len(order):]
        # one cleared allocation: the border rows, the work counter and error word, the
        # control's stop flag and cell counter
        border = int((n + 1).sum()) if split != band.RESUME else 1
        cleared = xp.zeros(border + (2 if control else 4), np.int64)
        self.border, self.work = cleared[:border], cleared[border:border + 2]
        self.control = control or FillControl(cleared[border + 2:])
        self.band_results = xp.empty((3, max(self.items, 1)), np.int32)

    def launch(self, query, target, top, checkpoints, checkpoint_every: int, tb, columns,
               stream=None, snapshots=None) -> None:
        """Queue the fill (and, but for a split fill's second pass or ``columns`` None,
        the fold into ``columns``' score and end cell, by job row)."""
        job = self.job
        mode_code, fqs, fqe, fts, fte, _ = job.flags
        kernel = band.band_kernel(mode_code, fqs, fqe, fts, fte, self.traceback, job.use_dpx,
                                  self.rows, self.lanes, self.byte_rows, checkpoint_every > 0,
                                  self.split, self.last_column is not None)
        last_column = self.last_column if self.last_column is not None else unused(np.int32)
        if self.split == band.RESUME:  # tiles are independent: one warp a tile
            warps = _warps(self.items, self.rows, self.items, None)
        else:
            warps = _warps(self.items, self.rows, self.working, job.tuning.band_warps)
        if snapshots is None:
            snapshots = unused(np.int32)
        launch_kernel("fill", kernel, warps, self.lanes, query, target, self.problems,
                      self.item_order, self.item_problem, self.items, job.sub, job.alphabet_size,
                      job.gap_open, job.gap_extend, top, device_address(top), self.border,
                      device_address(self.border), checkpoints, device_address(checkpoints),
                      checkpoint_every, tb, device_address(tb), snapshots, max(self.tile_steps, 1),
                      self.band_results[0], self.band_results[1], self.band_results[2],
                      self.control.device, self.work, last_column, stream=stream)
        self.control.launched(stream)
        if self.split == band.RESUME or columns is None:  # no end cells wanted
            return
        launch_kernel("fill", band.reduce_kernel(mode_code, fqs, fqe, fts, fte),
                      blocks(self.problems.shape[1]), THREADS_PER_BLOCK, self.problems,
                      self.band_results[0], self.band_results[1], self.band_results[2],
                      columns["score"], columns["query_end"], columns["target_end"],
                      stream=stream)

    def wait(self, on_cells, interval: float) -> None:
        """Wait for the fill (polled; Ctrl-C stops it), then check it met no hang and
        that its bands counted every cell of its problems (a fill whose warps left early
        would otherwise leave end cells no band wrote)."""
        self.control.wait(on_cells, interval)
        self.check(1, self.work)

    def check(self, passes: int, *works) -> None:
        """Raise where the ``passes`` fills sharing this control (each counting every cell)
        met a hang (``works``' error words), or did not count every cell."""
        if any(int(work[1]) != 0 for work in works):
            raise RuntimeError("the long-pair kernel stopped waiting for a band that never "
                               "came (a device fault?); the results are not usable")
        done = self.control.cells()
        if done != passes * self.cells:
            raise RuntimeError(f"the long-pair kernel finished {done // passes} of its "
                               f"{self.cells} cells (a device fault?); the results are not "
                               "usable")


def item_order(item_problem: np.ndarray, first_item: np.ndarray,
               independent: bool) -> np.ndarray:
    """The order a fill's warps take its work items in (items are numbered problem by
    problem, ``first_item`` per problem): band by band across the problems (every
    problem's first band, then every second band, ...), so that the chains of bands of
    several tall problems advance together instead of one after the other while the
    warps that took the later ones wait; each problem's bands stay in order, as the
    kernel's freedom from deadlock needs. ``independent`` items (tiles): as numbered."""
    if independent:
        return np.arange(len(item_problem))
    within = np.arange(len(item_problem)) - first_item[item_problem]
    return np.lexsort((item_problem, within))


class SplitFill:
    """A traceback fill in two passes (the ``split_traceback`` setting): a score-only pass
    (end cells, every band's bottom row but the last's, a snapshot of each band's
    registers every ``split_tile_steps`` steps), then every tile of ``split_tile_steps``
    steps of every band at once from its snapshot, writing the same traceback words as a
    whole fill (a tile runs the same steps on the same registers)."""

    def __init__(self, job, problems: np.ndarray, rows: int, byte_rows: bool) -> None:
        self.first = BandFill(job, problems, rows, False, byte_rows, band.SNAPSHOT)
        self.second = BandFill(job, problems, rows, True, byte_rows, band.RESUME,
                               self.first.control)
        xp = array_module()
        # cleared: the first pass's bands wait on these rows' tags (a stale word of an
        # earlier fill could carry the tag a band waits for)
        self.kept = xp.zeros(max(self.first.kept_words, 1), np.int64)
        self.snapshots = xp.empty(max(self.first.snapshot_words, 1), np.int32)

    def launch(self, query, target, top, tb, columns, stream=None) -> None:
        """Queue both passes (the first's fold into ``columns``' score and end cell)."""
        self.first.launch(query, target, top, self.kept, 1, unused(np.uint32), columns, stream,
                          self.snapshots)
        self.second.launch(query, target, top, self.kept, 0, tb, None, stream,
                           self.snapshots)

    def wait(self, on_cells, interval: float) -> None:
        """Wait for both passes (each counts every cell: the progress shown is half the
        count), then check them as :meth:`BandFill.wait` does."""
        self.first.control.wait(scaled(on_cells, 1, 2), interval)
        self.first.check(2, self.first.work, self.second.work)


def scaled(on_cells, shown: int, counted: int):
    """A progress callback that passes on ``shown / counted`` of the cells it is given
    (a fill that counts some cells more than once: two passes, overlapping windows)."""
    totals = [0, 0]  # cells counted, cells shown

    def report(cells: int) -> None:
        totals[0] += cells
        due = totals[0] * shown // counted
        if due > totals[1]:
            on_cells(due - totals[1])
            totals[1] = due

    return report


def top_words(job, n: int):
    """Border words of row 0 for problems up to ``n`` columns, on the device (one
    elementwise kernel on a GPU)."""
    local, _corner, free_row0, *_ = mode_shape(*job.flags[:5])
    xp = array_module()
    if xp is np:
        return band.top_row(n, job.gap_open, job.gap_extend, free_row0, local)
    words = xp.empty(n + 1, np.int64)
    shift = job.gap_extend if band.shifted_cells(local) else 0
    _top_row_kernel()(job.gap_open, job.gap_extend, shift, free_row0, words)
    return words


@lru_cache(maxsize=None)
def _top_row_kernel():
    """CuPy kernel of :func:`gpualign_df.kernels.band.top_row`'s words (index ``i`` is
    the column)."""
    import cupy

    return cupy.ElementwiseKernel(
        "int64 go, int64 ge, int64 shift, bool free_row0", "int64 word",
        "long long h = ((i == 0 || free_row0) ? 0 : -(go + (i - 1) * ge)) + i * shift;"
        "word = ((go - ge + 1) << 32) | (h & 0xFFFFFFFFLL)", "gpualign_top_row")


def long_problems(batch) -> np.ndarray:
    """The problems table of a long batch: whole pairs, residues and traceback words where
    the plan put them, top row shared (offset 0)."""
    problems = np.zeros((band.FIELDS, batch.slots), np.int64)
    problems[band.F_M] = batch.query_lengths
    problems[band.F_N] = batch.target_lengths
    problems[band.F_Q0] = batch.query_start
    problems[band.F_T0] = batch.target_start
    problems[band.F_TB0] = batch.tb_start
    problems[band.F_ROW] = batch.slot_row
    return problems


def byte_rows(job, batch, query, target) -> bool:
    """Whether the band fills of ``batch`` (residues in ``query`` and ``target``) can keep
    their rows' scores as bytes (``band_kernel``'s ``byte_rows``): the job's scores allow it
    and every residue's code is below :data:`band.BYTE_CODES` (DNA without ambiguity
    codes beyond N). Where the host knows a bound on every code of the job's sequences
    (:class:`~gpualign_df.gpu.buffers.DeviceSequences`), that bound decides; else one
    read of the batch's largest code from the device."""
    if not job.byte_scores:
        return False
    known = (job.queries.largest_code, job.targets.largest_code)
    if None not in known:
        return max(known) < band.BYTE_CODES
    xp = array_module()
    largest = int(xp.maximum(query[:batch.query_size].max(),   # one read back
                             target[:batch.target_size].max()))
    return largest < band.BYTE_CODES


def oriented(job, batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns, transposed) of each pair of a global score-only batch as halves fill
    it: a pair whose query is longer runs transposed where the job's matrix is symmetric
    (the same alignments with I and D swapped, so the same score), so that its long side
    is the one the bands sweep."""
    m = np.asarray(batch.query_lengths, np.int64)
    n = np.asarray(batch.target_lengths, np.int64)
    transposed = (m > n) & job.symmetric
    return np.where(transposed, n, m), np.where(transposed, m, n), transposed


def meets_in_middle(job, batch) -> bool:
    """Whether a long batch runs as halves meeting in the middle (:func:`fill_halves`): the
    ``band_halves`` setting, global alignment without free ends, score only, every pair at
    least one residue by two, and a narrow fill (:func:`narrow_fill` at the ``band_rows``
    setting's rows) of the pairs as :func:`oriented` turns them."""
    _local, corner, free_row0, free_col0, *_ = mode_shape(*job.flags[:5])
    if not (job.tuning.band_halves and not job.traceback and corner
            and not (free_row0 or free_col0) and len(batch.query_lengths)):
        return False
    m, n, _ = oriented(job, batch)
    return bool(m.min() >= 1 and n.min() >= 2
                and narrow_fill(job.tuning, m, n, lane_rows(job.tuning, False, int(m.max()))))


def fill_halves(job, batch, query, target, tb, stream) -> BandFill:
    """Queue a global score-only fill of a batch of wide pairs (:func:`oriented`: a pair
    with the longer query transposed) as two fills in one launch: each pair's left half
    (columns 1..n/2) forward, and its right half reversed (the reversed query against the
    reversed right part), so twice the bands sweep half the columns. Both write H and D of
    their last column; a pair's score is then the best over the rows i of the middle
    column of ``H_left(i) + H_right(m - i)`` and, for a deletion that crosses the middle,
    ``D_left(i) + D_right(m - i) + go - ge`` (its opening was charged on both sides): the
    Myers-Miller join, exact. Row 0 of each half is its top border (a deletion from the
    corner), which the host writes. Its end cell is (m, n) of the pair as given."""
    xp = array_module()
    m, n, transposed = oriented(job, batch)
    q0 = np.asarray(batch.query_start, np.int64)
    t0 = np.asarray(batch.target_start, np.int64)
    rows_of = np.asarray(batch.slot_row, np.int64)
    pairs = len(m)
    left = n // 2
    right = n - left
    # each pair's rows and columns (its query and target, or the other way round), then
    # the reversed rows and the reversed right parts
    sides = [(target[t0[k]:t0[k] + m[k]], query[q0[k]:q0[k] + n[k]]) if transposed[k] else
             (query[q0[k]:q0[k] + m[k]], target[t0[k]:t0[k] + n[k]]) for k in range(pairs)]
    query_all = xp.concatenate([rows for rows, _ in sides] + [rows[::-1] for rows, _ in sides])
    target_all = xp.concatenate([columns[:left[k]] for k, (_, columns) in enumerate(sides)]
                                + [columns[left[k]:][::-1]
                                   for k, (_, columns) in enumerate(sides)])
    row0 = np.cumsum(m) - m
    problems = np.zeros((band.FIELDS, 2 * pairs), np.int64)
    problems[band.F_M] = np.concatenate([m, m])
    problems[band.F_N] = np.concatenate([left, right])
    problems[band.F_Q0] = np.concatenate([row0, row0 + int(m.sum())])
    problems[band.F_T0] = np.concatenate([np.cumsum(left) - left,
                                          int(left.sum()) + np.cumsum(right) - right])
    problems[band.F_ROW] = np.concatenate([rows_of, rows_of])
    words = 2 * (problems[band.F_M] + 1)
    column0 = np.cumsum(words) - words
    problems[band.F_COLUMN0] = column0
    # row 0 of each half's last column: a deletion of its n residues from the corner
    go, ge = job.gap_open, job.gap_extend
    initial = np.zeros(int(words.sum()), np.int32)
    border = -(go + (problems[band.F_N] - 1) * ge)
    initial[column0], initial[column0 + 1] = border, border
    last = xp.asarray(initial)
    rows = score_rows(job.tuning, problems[band.F_M], problems[band.F_N])
    top = top_words(job, int(right.max()))  # (the right half is the longer one)
    fill = BandFill(job, problems, rows, False, byte_rows(job, batch, query, target),
                    last_column=last)
    fill.launch(query_all, target_all, top, top, 0, tb, None, stream)  # joined below
    columns = job.columns
    given_m, given_n = (np.asarray(lengths, np.int64) for lengths in
                        (batch.query_lengths, batch.target_lengths))
    for k in range(pairs):
        size = 2 * (int(m[k]) + 1)
        forward = last[column0[k]:column0[k] + size].reshape(-1, 2).astype(np.int64)
        backward = last[column0[pairs + k]:column0[pairs + k] + size].reshape(-1, 2)[::-1]
        joined = forward + backward
        row = int(rows_of[k])
        columns["score"][row] = xp.maximum(joined[:, 0].max(), joined[:, 1].max() + go - ge)
        columns["query_end"][row] = int(given_m[k])
        columns["target_end"][row] = int(given_n[k])
    return fill


def window_sides(job) -> tuple[bool, bool]:
    """Whether a pair's target (columns) / query (rows) may be cut into windows: the mode
    frees both ends of that side and neither end of the other (local frees every end).
    Then a window's borders hold only scores of real alignments (a start on its row 0 or
    column 0 is one the mode allows), so no window's cell exceeds the pair's."""
    local, _corner, free_row0, free_col0, end_row, end_column = mode_shape(*job.flags[:5])
    if local:
        return True, True
    return (free_row0 and end_row and not (free_col0 or end_column),
            free_col0 and end_column and not (free_row0 or end_row))


def window_span(job, across: np.ndarray) -> np.ndarray:
    """Residues of a pair's long side that the alignment ending at its end cell can span,
    ``across`` residues on the short side (int64 array). It holds ``x <= across`` aligned
    pairs and ``g`` gap residues of the long side, each costing at least ``gap_extend``,
    so its score is at most ``across * highest - g * gap_extend``; that score is at least
    1 in local mode (a best of 0 is the empty alignment) and at least ``across *
    lowest`` in the semi-global ones (the short side placed ungapped anywhere along the
    long one scores that much). So ``g <= (across * highest - floor) / gap_extend``."""
    lowest, highest = job.sub_range
    local = mode_shape(*job.flags[:5])[0]
    floor = np.ones_like(across) if local else across * lowest
    return across + np.maximum(across * highest - floor, 0) // job.gap_extend


def window_counts(job, batch) -> np.ndarray | None:
    """Windows of each pair of a score-only long batch (:func:`fill_windows`), or None
    where the batch runs whole: the ``band_windows`` setting divided among the batch's
    bands that can work at once, for pairs whose long side the mode lets be cut
    (:func:`window_sides`) and is at least twice the span of an alignment on it
    (:func:`window_span`); each window then advances at least a span."""
    tuning = job.tuning
    m = np.asarray(batch.query_lengths, np.int64)
    n = np.asarray(batch.target_lengths, np.int64)
    if (tuning.band_windows <= 0 or job.traceback or job.gap_extend <= 0 or not len(m)
            or m.min() < 1 or n.min() < 1):
        return None
    columns, rows = window_sides(job)
    rows_a_lane = lane_rows(tuning, False, int(m.max()))
    bands, _ = _band_counts(tuning, m, n, rows_a_lane)
    working = working_bands(bands, n, band.band_trail(rows_a_lane, tuning.band_lanes))
    schedulers = 1 if simulator() else 4 * multiprocessors(current_device())
    fold = int(tuning.band_windows * schedulers // max(working, 1))
    wide = n >= m
    long_side, short_side = np.where(wide, n, m), np.where(wide, m, n)
    cut = np.where(wide, columns, rows)
    counts = np.where(cut, np.minimum(fold, long_side // window_span(job, short_side)), 1)
    stride = -(-long_side // np.maximum(counts, 1))
    counts = -(-long_side // stride)  # no window starts past the end
    return counts if counts.max() >= 2 else None


class WindowFill:
    """A band fill of overlapping windows (:func:`fill_windows`): its progress counts each
    cell of the pairs once."""

    def __init__(self, fill: BandFill, cells: int) -> None:
        self.fill, self.cells = fill, cells

    def wait(self, on_cells, interval: float) -> None:
        self.fill.control.wait(scaled(on_cells, self.cells, self.fill.cells), interval)
        self.fill.check(1, self.fill.work)


def fill_windows(job, batch, query, target, counts: np.ndarray, stream) -> WindowFill:
    """Queue a score-only fill of each pair of a long batch as ``counts`` windows of its
    long side (the target where it is the longer, else the query), all of one launch.

    Window ``k`` of a pair whose long side has ``L`` residues starts at ``s_k = k * S``
    (``S = ceil(L / counts)``) and runs ``S`` residues plus the span ``W`` of an
    alignment on it (:func:`window_span`; the last to ``L``). A window is a problem of its
    own whose borders are the mode's (real alignments: :func:`window_sides`), so each of
    its cells holds at most the pair's value, and exactly the pair's at a position ``p``
    with ``p - W >= s_k`` (the best alignment ending there lies inside): every position is
    such in some window. So a window's end cell scoring the pair's best is one of the
    pair's best cells, and the window holding the pair's end cell exactly finds it first
    in the README's order: the fold of the windows' end cells by that order
    (:func:`band.window_fold_kernel`) is the pair's end cell."""
    xp = array_module()
    m = np.asarray(batch.query_lengths, np.int64)
    n = np.asarray(batch.target_lengths, np.int64)
    pairs = len(m)
    wide = n >= m
    long_side = np.where(wide, n, m)
    span = window_span(job, np.where(wide, m, n))
    stride = -(-long_side // counts)
    windows = int(counts.sum())
    pair_of = np.repeat(np.arange(pairs), counts)
    first = np.cumsum(counts) - counts
    k = np.arange(windows) - first[pair_of]
    start = k * stride[pair_of]
    end = np.where(k == counts[pair_of] - 1, long_side[pair_of],
                   np.minimum(long_side[pair_of], start + stride[pair_of] + span[pair_of]))
    across = wide[pair_of]
    row_offset, column_offset = np.where(across, 0, start), np.where(across, start, 0)
    problems = np.zeros((band.FIELDS, windows), np.int64)
    problems[band.F_M] = np.where(across, m[pair_of], end - start)
    problems[band.F_N] = np.where(across, end - start, n[pair_of])
    problems[band.F_Q0] = np.asarray(batch.query_start, np.int64)[pair_of] + row_offset
    problems[band.F_T0] = np.asarray(batch.target_start, np.int64)[pair_of] + column_offset
    problems[band.F_ROW] = np.arange(windows)
    rows = score_rows(job.tuning, problems[band.F_M], problems[band.F_N])
    fill = BandFill(job, problems, rows, False, byte_rows(job, batch, query, target))
    ends = xp.empty((3, windows), np.int32)
    top = top_words(job, int(problems[band.F_N].max()))
    fill.launch(query, target, top, top, 0, unused(np.uint32),
                dict(score=ends[0], query_end=ends[1], target_end=ends[2]), stream)
    table = xp.asarray(np.concatenate([first, counts, np.asarray(batch.slot_row, np.int64),
                                       row_offset, column_offset]))
    columns = job.columns
    local = mode_shape(*job.flags[:5])[0]
    launch_kernel("fill", band.window_fold_kernel(local), blocks(pairs), THREADS_PER_BLOCK,
                  table, pairs, windows, ends[0], ends[1], ends[2], columns["score"],
                  columns["query_end"], columns["target_end"], stream=stream)
    return WindowFill(fill, int((m * n).sum()))


def fill_long_batch(job, batch, query, target, tb,
                    stream) -> BandFill | SplitFill | WindowFill:
    """Queue the band fill of a long batch (score and end cell by job row; with the job's
    traceback, the words of each pair at its ``tb_start``), in two passes where the plan
    split it (``batch.split``)."""
    if meets_in_middle(job, batch):
        return fill_halves(job, batch, query, target, tb, stream)
    if not job.traceback and (counts := window_counts(job, batch)) is not None:
        return fill_windows(job, batch, query, target, counts, stream)
    rows = (lane_rows(job.tuning, True, int(batch.query_lengths.max())) if job.traceback
            else score_rows(job.tuning, batch.query_lengths, batch.target_lengths))
    top = top_words(job, int(batch.target_lengths.max()))
    bytes_ = byte_rows(job, batch, query, target)
    if batch.split:
        fill = SplitFill(job, long_problems(batch), rows, bytes_)
        fill.launch(query, target, top, tb, job.columns, stream)
        return fill
    fill = BandFill(job, long_problems(batch), rows, job.traceback, bytes_)
    fill.launch(query, target, top, top, 0, tb, job.columns, stream)
    return fill


def block_rows(n: int, budget: int, lanes: int) -> int:
    """Rows of a linear-space block: the most whole bands (of ``lanes`` lanes) whose
    traceback words (``n`` columns) fit ``budget`` bytes, at least one band."""
    height = band.band_rows(TRACEBACK_ROWS, lanes)
    per_band = 4 * traceback_words(height, n)
    return height * max(1, budget // per_band)


def linear_bytes(m: int, n: int, rows: int) -> int:
    """Device bytes of the linear-space path for one m x n pair with blocks of ``rows``:
    checkpoint and border rows, one block's words, residues, runs."""
    checkpoints = max(0, (m - 1) // rows) * (n + 1) * 8
    return (checkpoints + 4 * traceback_words(rows, n) + 16 * (n + 1) + m + n
            + 4 * (m + n) + 1024)


def align_linear(job, batch, query, target, on_cells):
    """Score, end cell and walk of the one pair of a linear batch, in linear space: the
    pair's columns (by job row) filled like the walk kernel's; returns ``(runs,
    run_count)`` for :func:`gpualign_df.kernels.traceback.cigar_kernel` (runs from 0)."""
    xp = array_module()
    tuning = job.tuning
    mode_code, fqs, fqe, fts, fte, _ = job.flags
    m, n = int(batch.query_lengths[0]), int(batch.target_lengths[0])
    row = int(batch.slot_row[0])
    q0, t0 = int(batch.query_start[0]), int(batch.target_start[0])
    lanes = tuning.band_lanes
    rows = batch.block_rows
    columns = job.columns
    top = top_words(job, n)
    checkpoints = xp.zeros(max(1, (m - 1) // rows * (n + 1)), np.int64)
    no_words = unused(np.uint32)
    bytes_ = byte_rows(job, batch, query, target)
    forward = BandFill(job, long_problems(batch), TRACEBACK_ROWS, False, bytes_)
    forward.launch(query, target, top, checkpoints, rows // band.band_rows(TRACEBACK_ROWS, lanes),
                   no_words, columns)
    forward.wait(on_cells, tuning.progress_interval)
    end = [int(value) for value in
           _host(xp.stack([columns[name][row] for name in ("query_end", "target_end", "score")]))]
    state = xp.asarray(np.array([end[0], end[1], 1, end[2], 0, -1, 0, 0, 0, 0, 0, 0],
                                np.int64))
    runs = xp.empty(m + n + 1, np.uint32)
    lanes = walk_lanes(job.flags[0], job.tuning)
    walk_block = tb_kernels.block_walk_kernel(mode_code, fqs, fts, job.merge_matches, lanes,
                                              walk_probes(job, lanes))
    tb = xp.empty(traceback_words(rows, n), np.uint32)
    block_columns = {name: xp.empty(1, np.int32) for name in ("score", "query_end",
                                                               "target_end")}
    i, j = end[0], end[1]
    while True:
        # the block from the checkpoint row above the walk (0: the top border) to its row;
        # at a border (i or j 0) there is nothing to recompute: the walk's gap run to the
        # corner, or its end, needs no words
        top_row = (i - 1) // rows * rows if i > 0 and j > 0 else 0
        if i > 0 and j > 0:
            block = np.zeros((band.FIELDS, 1), np.int64)
            block[band.F_M], block[band.F_N] = i - top_row, j
            block[band.F_Q0], block[band.F_T0], block[band.F_ROW0] = q0 + top_row, t0, top_row
            recompute = BandFill(job, block, TRACEBACK_ROWS, True, bytes_)
            source = top if top_row == 0 else checkpoints[(top_row // rows - 1) * (n + 1):]
            recompute.launch(query, target, source, checkpoints, 0, tb, block_columns)
            recompute.wait(_ignore, tuning.progress_interval)
        launch_kernel("walk", walk_block, 1, max(lanes, 1), query, target, q0, t0, tb,
                      max(j, 1), top_row, job.concrete, job.sub, job.alphabet_size,
                      job.gap_open, job.gap_extend, runs, state)
        i_next, j = (int(value) for value in _host(state[:2]))
        if top_row == 0 or i_next > top_row:  # the walk reached the alignment's start
            break
        i = i_next
    finish = tb_kernels.finish_walk_kernel(mode_code, fqs, fts, job.merge_matches,
                                           job.soft_clip)
    run_count = xp.zeros(1, np.int32)
    launch_kernel("walk", finish, 1, 1, state, runs, m, row, columns["query_end"], run_count,
                  columns["query_start"], columns["target_start"], columns["matches"],
                  columns["mismatches"], columns["gap_opens"], columns["gaps"],
                  columns["cigar_length"])
    return runs, run_count


def _ignore(done: int) -> None:
    """Progress of a recomputation: not counted (the bar counts each cell once)."""


def _host(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()
