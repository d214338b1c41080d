"""GPU engine, host side: plans batches, moves buffers, launches the kernels.

Sequences live on the device as residue codes + offsets (``DeviceSequences``); every batch
gathers its pairs' residues into the interleaved layout on the device, fills, walks back
and writes CIGAR characters there, and a last kernel puts every pair's characters at its
row's offset in one buffer: results come out in job row order, as device arrays
(``DeviceResults``), that the pandas path copies to the host and the cuDF path wraps as
columns without a host copy of residues or CIGARs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

import numpy as np
from numba import cuda

from . import config
from .arrays import AlignmentArrays
from .encode import EncodedSequences
from .memory import engine_allocations
from .kernels import dpx, inter, inter16, intra, simulator, traceback as tb_kernels
from .launch import current_device, launch as launch_kernel
from .plan import Batch, plan_batches, to_numpy
from .scoring import Mode, Scoring

#: Threads per block; 32 under the CUDA simulator, where every CUDA thread of a block is a
#: Python thread that its block manager polls (fewer alive at once, less GIL contention).
THREADS_PER_BLOCK = 32 if simulator() else 128
#: Share of the free device memory one batch may use.
MEMORY_SHARE = 0.6
#: Benchmark switches: sort pairs by length before forming warps; time each kernel.
SORT_BY_LENGTH = True
TIME_KERNELS = False
#: Search with packed 16-bit cells (two database sequences per thread, ``*_s16x2`` DPX) for
#: local alignments whose scores provably fit: None = where DPX runs (sm_90), True/False to
#: force it on or off (True runs the plain half-by-half form elsewhere, as in tests).
SEARCH_16BIT: bool | None = None
#: Score-only fills on packed 16-bit cells (two pairs per thread, ``*_s16x2`` DPX, strips
#: of 8 rows) where no value can leave 16 bits (:func:`fill_fits_16bit`): None = where DPX
#: runs (sm_90), True/False to force it on or off (True runs the plain half-by-half form
#: elsewhere, as in tests). Off by default: the 32-bit fill with strips of 16 rows is
#: faster (W1 local score-only on an H100: 6.0 ms against 8.3). Fills with traceback run
#: on 32-bit cells.
FILL_16BIT: bool | None = False
#: Keep the fill kernels' per-row running bests as int32 keys where they fit
#: (:func:`keyed_best_fits`); False forces the compare-and-select form (tests, benchmarks).
KEYED_BEST = True
#: Seconds spent in each kernel while TIME_KERNELS is on (reset it yourself).
KERNEL_SECONDS: dict[str, float] = {}
RESULT_COLUMNS = ("score", "end_i", "end_j", "start_i", "start_j", "matches", "mismatches",
                  "gap_opens", "gaps", "cigar_length")


def cupy_installed() -> bool:
    """CuPy imports (the GPU engine's device arrays are CuPy arrays)."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def gpu_usable() -> bool:
    """A real CUDA device is present and usable, and CuPy is installed (never true under
    the simulator)."""
    if simulator() or not cupy_installed():
        return False
    try:
        return bool(cuda.is_available()) and len(cuda.gpus) > 0
    except Exception:  # noqa: BLE001 - a broken driver means no GPU for us
        return False


def array_module():
    """Where the engine's buffers live: CuPy on a GPU, numpy under the CUDA simulator."""
    if simulator():
        return np
    import cupy

    return cupy


def _free_bytes() -> int:
    if simulator():
        return 1 << 28
    import cupy

    free, _total = cupy.cuda.runtime.memGetInfo()  # (numba's context does not report it
    # under RMM's memory manager)
    device = current_device()
    return int(free) + cupy.get_default_memory_pool().free_bytes() + sum(
        buffer.nbytes for (_name, owner), buffer in _SCRATCH.items() if owner == device)


def _blocks(count: int) -> int:
    return max(1, (count + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)


def kernel_view(argument):
    """A kernel argument as numba takes it without a wait: CuPy (or any CUDA array
    interface) arrays become numba device arrays with no stream synchronize; the engine's
    work, CuPy's and cuDF's included, is ordered on the default stream (long kernels, on
    :class:`SideStream`, start after it and are waited for on the host)."""
    if simulator() or not hasattr(argument, "__cuda_array_interface__") \
            or getattr(argument, "__cuda_ndarray__", False):
        return argument
    return cuda.as_cuda_array(argument, sync=False)


def _launch(name: str, kernel, blocks: int, threads: int, *arguments, stream=None) -> None:
    """Launch a kernel (:func:`gpualign_df.launch.launch`) on the default stream or on
    ``stream``; with TIME_KERNELS, time it with CUDA events."""
    if not TIME_KERNELS or simulator():
        launch_kernel(kernel, blocks, threads, arguments, kernel_view, stream)
        return
    start, stop = cuda.event(), cuda.event()
    start.record(stream or 0)
    launch_kernel(kernel, blocks, threads, arguments, kernel_view, stream)
    stop.record(stream or 0)
    stop.synchronize()
    seconds = cuda.event_elapsed_time(start, stop) / 1e3
    KERNEL_SECONDS[name] = KERNEL_SECONDS.get(name, 0.0) + seconds


#: Run long kernels (a search's score pass, a batch's fill) on a non-blocking stream of
#: the engine's own (see :class:`SideStream`); False keeps them on the default stream
#: (benchmarks, tests).
SIDE_STREAM = True
#: DP cells from which a score pass or a fill runs on the side stream: a few
#: milliseconds of GPU time and more, where waiting for it on the host costs nothing
#: (below, the host keeps queueing the next kernels while it runs).
SIDE_STREAM_CELLS = 1 << 34


class SideStream:
    """A non-blocking CUDA stream of the current device for one long kernel stretch.

    A search's score pass, or a large batch's fill, is one launch of up to seconds. On the
    legacy default stream, everything another thread of the process puts on that stream
    queues behind it: a Dask worker that sends a cuDF partition to another worker copies
    it to the host there, so a worker waiting for that partition would wait for the whole
    launch. Here the stretch starts after all work already on the default stream
    (:meth:`follow_default`), runs beside it, and :meth:`join` blocks the calling host
    thread (not the default stream) until it is done; the caller then goes on with the
    default stream.
    """

    _BY_DEVICE: dict[int, "SideStream"] = {}

    def __init__(self) -> None:
        import cupy

        self._cupy_stream = cupy.cuda.Stream(non_blocking=True)
        #: the numba stream kernels launch on
        self.stream = cuda.external_stream(self._cupy_stream.ptr)

    @classmethod
    def current(cls) -> "SideStream | None":
        """The current device's side stream; None under the CUDA simulator or with
        ``SIDE_STREAM`` off."""
        if simulator() or not SIDE_STREAM:
            return None
        device = current_device()
        side = cls._BY_DEVICE.get(device)
        if side is None:
            side = cls._BY_DEVICE[device] = cls()
        return side

    def follow_default(self) -> None:
        """Work launched on this stream from now on starts after everything already
        queued on the default stream."""
        import cupy

        queued = cupy.cuda.Event(disable_timing=True)
        queued.record(cupy.cuda.Stream.null)
        self._cupy_stream.wait_event(queued)

    def join(self) -> None:
        """Block the calling thread until everything launched on this stream is done."""
        self._cupy_stream.synchronize()


@contextlib.contextmanager
def _beside_default_stream(cells: int):
    """The stream for a stretch of launches of ``cells`` DP cells: the side stream from
    ``SIDE_STREAM_CELLS`` on (waited for on the host when the block ends), else None
    (the default stream)."""
    side = SideStream.current() if cells >= SIDE_STREAM_CELLS else None
    if side is None:
        yield None
        return
    side.follow_default()
    try:
        yield side.stream
    finally:  # buffers the launches use may be freed or reused once the block is left
        side.join()


#: Longest sleep between two queries of a pending event: a polled wait overshoots the
#: work it waits for by at most this (the query itself costs microseconds).
POLL_SLEEP = 0.002


def poll(event):
    """Yield while ``event`` (a numba CUDA event) is pending, sleeping between queries (1 %
    of the time waited so far, 0.05 ms to ``POLL_SLEEP``). Unlike a blocking synchronize,
    the sleeps let Python handle Ctrl-C."""
    started = time.perf_counter()
    while not event.query():
        yield
        time.sleep(min(POLL_SLEEP, max(5e-5, 0.01 * (time.perf_counter() - started))))


class FillControl:
    """The stop flag and cell counter a long-pair fill shares with the host while it runs
    (``device``: two int64 on the device, see :mod:`gpualign_df.kernels.intra`), and the
    host's wait for such a fill: polled, so Ctrl-C is handled and the progress bar moves
    within one long pair, instead of one blocking synchronize of minutes.

    The host reads the counter and writes the flag with copies on a non-blocking stream
    (one per device, kept), which run beside the fill whatever stream the fill is on.
    """

    _STREAMS: dict[int, object] = {}

    def __init__(self) -> None:
        xp = array_module()
        self.device = xp.zeros(2, dtype=np.int64)
        self._done = None
        if simulator():
            self._stream = None
            return
        device = current_device()
        if device not in self._STREAMS:
            self._STREAMS[device] = xp.cuda.Stream(non_blocking=True)
        self._stream = self._STREAMS[device]

    def cells(self) -> int:
        """Cells the running fill has done (a copy that does not wait for it)."""
        if self._stream is None:
            return int(self.device[1])
        return int(self.device[1:2].get(stream=self._stream)[0])

    def stop(self) -> None:
        """Ask the running fill to stop at its next pass."""
        if self._stream is None:
            self.device[0] = 1
            return
        self.device[0:1].set(np.ones(1, dtype=np.int64), stream=self._stream)
        self._stream.synchronize()

    def launched(self, stream) -> None:
        """Mark the fill just launched on ``stream`` (a numba stream, or None for the
        default stream): :meth:`wait` waits for everything launched on it until now, so
        the host may queue the kernels that follow the fill before it waits."""
        if not simulator():
            self._done = cuda.event(timing=False)
            self._done.record(stream or 0)

    def wait(self, on_cells, interval: float) -> None:
        """Wait for the fill, reporting its new cells to ``on_cells`` every ``interval``
        seconds; on Ctrl-C (or any exception) stop the fill, wait for it to leave (within
        one pass), and re-raise. Returns at once once waited for."""
        if self._done is None:   # the simulator ran the kernel at its launch; or done
            if simulator():
                on_cells(self.cells())
            return
        done, self._done = self._done, None
        reported = 0
        last = time.perf_counter()
        try:
            for _ in poll(done):
                if time.perf_counter() - last >= interval:
                    now = self.cells()
                    on_cells(now - reported)
                    reported, last = now, time.perf_counter()
        except BaseException:
            self.stop()
            done.synchronize()
            raise
        on_cells(self.cells() - reported)


_SCRATCH: dict[tuple[str, int], object] = {}
#: One job at a time on the device: jobs share the scratch buffers (Dask's threaded
#: scheduler, for one, runs tasks in several threads of one process).
_DEVICE_LOCK = threading.RLock()


def _scratch(name: str, count: int, dtype) -> object:
    """A reusable device buffer of at least ``count`` elements on the current device (no
    allocate/free churn)."""
    count = max(int(count), 1)
    key = (name, current_device())
    buffer = _SCRATCH.get(key)
    if buffer is None or buffer.size < count or buffer.dtype != np.dtype(dtype):
        _SCRATCH.pop(key, None)
        buffer = array_module().empty(count, dtype=dtype)
        _SCRATCH[key] = buffer
    return buffer[:count]


def _upload(name: str, host: np.ndarray) -> object:
    """``host`` copied into a reusable device buffer (no allocation once it is large enough)."""
    host = np.ascontiguousarray(host)
    buffer = _scratch(name, host.size, host.dtype)
    if host.size:
        if isinstance(buffer, np.ndarray):
            buffer[...] = host.ravel()
        else:
            buffer.set(host.ravel())
    return buffer.reshape(host.shape) if host.ndim > 1 else buffer


def _to_device(host: np.ndarray) -> object:
    """A device copy of a host array: CuPy's (numba's under the simulator)."""
    return cuda.to_device(host) if simulator() else array_module().asarray(host)


_TABLES: dict[tuple[str, int], tuple[bytes, object]] = {}


def device_table(name: str, host: np.ndarray) -> object:
    """A copy on the current device of a small constant table (substitution scores and the
    like) that kernels only read: copied again only when its content changes."""
    host = np.ascontiguousarray(host)
    content = host.dtype.str.encode() + host.tobytes()
    key = (name, current_device())
    cached = _TABLES.get(key)
    if cached is None or cached[0] != content:
        cached = (content, _to_device(host if host.size else np.zeros(1, host.dtype)))
        _TABLES[key] = cached
    return cached[1]


def release_scratch() -> None:
    """Free the cached device buffers (they are reused across calls otherwise) and the
    blocks CuPy's pool keeps for the engine's temporaries.

    Safe to call anywhere: on a CPU install (no CuPy, no GPU) and under the CUDA simulator
    it only drops the cached buffers. CuPy's pool is emptied only where CuPy has been
    imported (the engine imports it to allocate, so a process that never did holds no
    block of ours; importing it here would cost seconds) and a GPU is usable.

    Examples
    --------
    >>> from gpualign_df import gpu
    >>> gpu.release_scratch()      # on a CPU-only machine too
    """
    from .libraries import loaded

    _SCRATCH.clear()
    _TABLES.clear()
    if simulator() or not loaded("cupy") or not gpu_usable():
        return
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


@dataclass
class DeviceSequences:
    """Residue codes and int64 offsets of many sequences, on the device."""

    codes: object
    offsets: object


def upload(encoded: EncodedSequences) -> DeviceSequences:
    """Copy host-encoded sequences to the device (CuPy arrays; numba's under the
    simulator)."""
    return DeviceSequences(_to_device(encoded.codes if len(encoded.codes) else
                                      np.zeros(1, np.uint8)), _to_device(encoded.offsets))


@dataclass
class DeviceResults:
    """Result columns in job row order, on the device (arrays of :func:`array_module`).

    ``chars``/``offsets`` hold the CIGARs. A one-batch job leaves its characters in a
    buffer sized by a bound and its total unread (``characters`` None), so that the caller
    can build its other columns while the kernels run; :meth:`cigar_chars` waits for them.
    """

    columns: dict
    chars: object | None
    offsets: object | None
    cells: int
    characters: int | None = 0

    def cigar_chars(self):
        """The CIGAR characters in a buffer of their own, ``offsets[-1]`` of them (at
        least one byte); the one read of a total from the device."""
        if self.characters is None:
            self.characters = int(self.offsets[-1])
            self.chars = self.chars[:max(self.characters, 1)].copy()
        return self.chars


@cuda.jit(device=True)
def _copy_residues(codes, offsets, sequence, length, base, width, out):
    """Residues of ``sequence`` to ``out[base + width * i]``, i < ``length``."""
    start = offsets[sequence]
    for i in range(length):
        out[base + width * i] = codes[start + i]


@cuda.jit
def gather_residues(codes, offsets, sequence_of_slot, slot_lengths, slot_start, width, out):
    """Residues of each slot's sequence (-1: none) to ``out[slot_start + width * i]``."""
    slot = cuda.grid(1)
    if slot < sequence_of_slot.shape[0] and sequence_of_slot[slot] >= 0:
        _copy_residues(codes, offsets, sequence_of_slot[slot], slot_lengths[slot],
                       slot_start[slot], width, out)


@cuda.jit
def gather_pair_residues(codes, offsets, slot_row, sequence_of_row, slot_lengths, slot_start,
                         width, out):
    """Residues of the sequence ``sequence_of_row[slot_row[slot]]`` of each used slot
    (``slot_row`` >= 0) to ``out[slot_start + width * i]``."""
    slot = cuda.grid(1)
    if slot < slot_row.shape[0] and slot_row[slot] >= 0:
        _copy_residues(codes, offsets, sequence_of_row[slot_row[slot]], slot_lengths[slot],
                       slot_start[slot], width, out)


def align_on_device(queries: DeviceSequences, targets: DeviceSequences, pair_query,
                    pair_target, query_lengths, target_lengths, valid, scoring: Scoring,
                    mode: Mode, *, traceback: bool, cigar_style: str, clip: str | None,
                    progress=None, longest: tuple[int, int] | None = None,
                    all_valid: bool = False) -> DeviceResults:
    """Align job rows ``k`` = (``pair_query[k]``, ``pair_target[k]``) whose ``valid[k]``.

    The per-row arrays may be numpy or device (CuPy) arrays; they are planned on the
    device, so a job whose arrays already live there copies nothing per row to the host.
    ``longest``: bounds on the longest query and target of the job, where the caller knows
    them (the plan then reads no maxima back; see :func:`gpualign_df.plan.plan_batches`);
    ``all_valid``: every ``valid[k]`` is known true (no read of how many are).
    """
    xp = array_module()
    with _DEVICE_LOCK, engine_allocations():
        return _align_on_device(
            queries, targets, xp.asarray(pair_query, dtype=np.int64),
            xp.asarray(pair_target, dtype=np.int64), xp.asarray(query_lengths, dtype=np.int64),
            xp.asarray(target_lengths, dtype=np.int64), xp.asarray(valid, dtype=bool),
            scoring, mode, traceback, cigar_style, clip, progress, longest, all_valid)


def _align_on_device(queries, targets, pair_query, pair_target, query_lengths, target_lengths,
                     valid, scoring, mode, traceback, cigar_style, clip, progress, longest,
                     all_valid):
    xp = array_module()
    rows = len(pair_query)
    names = RESULT_COLUMNS if traceback else RESULT_COLUMNS[:3]
    # Kernels write every valid row; invalid rows are masked (and their CIGAR length zeroed).
    table = xp.empty((len(names), max(rows, 1)), np.int32)
    columns = {name: table[k] for k, name in enumerate(names)}
    sub = device_table("substitution", scoring.matrix.ravel().astype(np.int32))
    concrete = device_table("concrete", scoring.concrete)
    flags = (mode.code, *mode.flags(), traceback)
    merge_matches, soft_clip = cigar_style == "M", clip == "soft"
    use_16bit = (dpx.available() if FILL_16BIT is None else FILL_16BIT) and not traceback
    sub16 = device_table("substitution16", _table16(scoring)) if use_16bit else None

    def fits_16bit(longest_query: int, longest_target: int) -> bool:
        return fill_fits_16bit(scoring, longest_query, longest_target)

    pairs = None if all_valid else xp.flatnonzero(valid)  # None: every row
    batches = plan_batches(pairs, query_lengths, target_lengths, traceback,
                           int(_free_bytes() * MEMORY_SHARE), sort=SORT_BY_LENGTH,
                           fits_16bit=fits_16bit if use_16bit else None, longest=longest)
    local, _corner, _free_row0, _free_col0, end_row, _end_column = inter.mode_shape(
        mode.code, *mode.flags())
    tracks_rows = local or end_row  # the fill keeps running row bests (keyed or selected)
    # One batch (the usual case): its CIGARs go straight to their rows' places in the column.
    direct = valid if traceback and len(batches) == 1 else None
    pieces = []
    cells = 0
    for batch in batches:
        keyed = (KEYED_BEST and tracks_rows and
                 keyed_best_fits(scoring, batch.longest_query, batch.longest_target))
        reported = [0]

        def on_cells(done: int) -> None:
            done = min(done, batch.cells - reported[0])
            reported[0] += done
            if progress is not None and done > 0:
                progress(done)

        piece = _run_batch(xp, batch, queries, targets, pair_query, pair_target, sub, sub16,
                           concrete, len(scoring.alphabet), scoring.gap_open,
                           scoring.gap_extend, flags, keyed, merge_matches, soft_clip, columns,
                           direct, on_cells)
        if piece is not None:
            pieces.append(piece)
        cells += batch.cells
        on_cells(batch.cells - reported[0])
    if not traceback:
        return DeviceResults(columns, None, None, cells)
    if direct is not None:
        chars, offsets = pieces[0]
        return DeviceResults(columns, chars, offsets, cells, characters=None)
    offsets = _row_offsets(xp, columns["cigar_length"], valid)
    total = int(offsets[-1])
    chars = xp.empty(max(total, 1), dtype=np.uint8)
    for batch_chars, batch_offsets, slot_row, slot_lengths in pieces:
        _launch("cigar", tb_kernels.scatter_strings, _blocks(slot_row.size), THREADS_PER_BLOCK,
                batch_chars, batch_offsets, slot_row, slot_lengths, chars, offsets)
    return DeviceResults(columns, chars, offsets, cells, total)


def _offsets(xp, lengths):
    """Offsets (``len(lengths) + 1``, int64, on the device) of strings of ``lengths``."""
    offsets = xp.zeros(len(lengths) + 1, dtype=np.int64)
    xp.cumsum(lengths, out=offsets[1:])
    return offsets


def _row_offsets(xp, cigar_length, valid):
    """CIGAR offsets of the job rows (``rows + 1``) from the device lengths."""
    return _offsets(xp, xp.where(valid, cigar_length[:len(valid)], 0).astype(np.int64))


def cigar_bound(run_words: int) -> int:
    """Most CIGAR characters a batch can write: a run of L operations takes at most
    ``digits(L) + 1 <= 2L`` characters, and a pair has at most ``len(query) + len(target)``
    operations (``run_words`` bounds their sum)."""
    return 2 * run_words


@cuda.jit
def prepare_inter_slots(query_base, target_base, tb_base, run_base, warp_columns, run_stride,
                        slot_starts, slot_row, query_codes, query_offsets, pair_query,
                        query_lengths, query_out, target_codes, target_offsets, pair_target,
                        target_lengths, target_out):
    """One pass over the slots of an inter batch: each slot's starts from its warp's row of
    the layout table (query, target and traceback base + lane, the warp's columns, and its
    first run word: run base + lane * run words per slot, into the five rows of
    ``slot_starts``), then the residues of its pair's query and target into the
    interleaved buffers (``base + WARP * i``)."""
    slot = cuda.grid(1)
    if slot >= slot_starts.shape[1]:
        return
    warp = slot // inter.WARP
    lane = slot % inter.WARP
    query_start = query_base[warp] + lane
    target_start = target_base[warp] + lane
    slot_starts[0, slot] = query_start
    slot_starts[1, slot] = target_start
    slot_starts[2, slot] = tb_base[warp] + lane
    slot_starts[3, slot] = warp_columns[warp]
    slot_starts[4, slot] = run_base[warp] + lane * run_stride[warp]
    row = slot_row[slot]
    if row >= 0:
        _copy_residues(query_codes, query_offsets, pair_query[row], query_lengths[slot],
                       query_start, inter.WARP, query_out)
        _copy_residues(target_codes, target_offsets, pair_target[row], target_lengths[slot],
                       target_start, inter.WARP, target_out)


def _run_batch(xp, batch: Batch, queries, targets, pair_query, pair_target, sub, sub16,
               concrete, alphabet_size, go, ge, flags, keyed, merge_matches, soft_clip,
               columns, direct, on_cells):
    """Gather, fill, walk and write one batch. Returns its CIGAR piece (batch buffer, slot
    offsets, rows, lengths), or with ``direct`` (the job's validity; one batch only) the
    finished column (characters in a bound-sized buffer, row offsets); None without
    traceback. A long-pair fill reports its cells to ``on_cells`` while it runs (see
    :class:`FillControl`); other batches report nothing here."""
    def device64(values):
        return xp.asarray(values, dtype=np.int64)

    slot_row = device64(batch.slot_row)
    query_lengths, target_lengths = (device64(values) for values in (batch.query_lengths,
                                                                     batch.target_lengths))
    blocks = _blocks(batch.slots)
    query = _scratch("query", batch.query_size, np.uint8)
    target = _scratch("target", batch.target_size, np.uint8)
    if batch.kind == "inter":
        # the layout table's rows: query, target, row-above, traceback, run-word bases;
        # columns, run words per slot
        warps = batch.warp_table
        starts = _scratch("slot_starts", 5 * batch.slots, np.int64).reshape((5, batch.slots))
        _launch("gather", prepare_inter_slots, blocks, THREADS_PER_BLOCK, warps[0], warps[1],
                warps[3], warps[4], warps[5], warps[6], starts, slot_row, queries.codes,
                queries.offsets, pair_query, query_lengths, query, targets.codes,
                targets.offsets, pair_target, target_lengths, target)
        run_base = starts[4]
    else:
        starts = xp.stack([device64(values) for values in (
            batch.query_start, batch.target_start, batch.tb_start, batch.columns)])
        for sequences, sequence_of_row, start, lengths, out in (
                (queries, pair_query, starts[0], query_lengths, query),
                (targets, pair_target, starts[1], target_lengths, target)):
            _launch("gather", gather_pair_residues, blocks, THREADS_PER_BLOCK, sequences.codes,
                    sequences.offsets, slot_row, sequence_of_row, lengths, start, batch.width,
                    out)
        run_base = device64(batch.run_base)
    query_start, target_start, tb_start, slot_columns = (starts[k] for k in range(4))
    h_buffer = _scratch("h_row", batch.row_words, np.int32)
    i_buffer = _scratch("i_row", batch.row_words, np.int32)
    tb = _scratch("traceback", batch.tb_words, np.uint32)
    traceback = flags[-1]
    common = (sub, alphabet_size, go, ge, h_buffer, i_buffer, tb, slot_row, columns["score"],
              columns["end_i"], columns["end_j"])
    row_start = None if batch.kind == "inter" else device64(batch.row_start)
    interval = config.settings().progress_interval
    control = None

    def settle() -> None:
        """Wait (polled) for a long fill before the host's first wait for later work; the
        walk and CIGAR kernels are queued behind the fill by then."""
        if control is not None:
            control.wait(on_cells, interval)

    with _beside_default_stream(batch.cells) as stream:
        if batch.packed:  # two pairs per thread; the table has a padding code (= alphabet)
            kernel = inter16.fill_kernel16(*flags[:-1], dpx.available())
            _launch("fill", kernel, _blocks(batch.slots // 2), THREADS_PER_BLOCK, query,
                    target, query_lengths, target_lengths, *(warps[k] for k in (0, 1, 2, 5)),
                    sub16, alphabet_size, go, ge, h_buffer, i_buffer, slot_row,
                    columns["score"], columns["end_i"], columns["end_j"], stream=stream)
        elif batch.kind == "inter":
            kernel = inter.fill_kernel(*flags, dpx.available(), keyed, *inter.fill_shape())
            _launch("fill", kernel, blocks, THREADS_PER_BLOCK, query, target, query_lengths,
                    target_lengths, *(warps[k] for k in (0, 1, 2, 3, 5)), *common,
                    stream=stream)
        else:
            control = FillControl()
            kernel = intra.long_fill_kernel(*flags, dpx.available())
            _launch("fill", kernel, batch.slots, intra.THREADS, query, target, query_lengths,
                    target_lengths, query_start, target_start, row_start, tb_start, *common,
                    control.device, stream=stream)
            control.launched(stream)
            if stream is not None:  # the side stream is joined (a blocking wait) at the end
                control.wait(on_cells, interval)
    if not traceback:
        settle()
        return None
    used = slot_row >= 0
    known_row = xp.maximum(slot_row, 0)
    mode_code, fqs, _fqe, fts, _fte, _ = flags
    runs = _scratch("runs", batch.run_words, np.uint32)
    run_count = _scratch("run_count", batch.slots, np.int32)
    walk = tb_kernels.walk_kernel(mode_code, fqs, fts, merge_matches, soft_clip)
    _launch("walk", walk, blocks, THREADS_PER_BLOCK, query, target, query_lengths,
            target_lengths, query_start, target_start, tb_start, slot_columns, batch.width, tb,
            concrete, sub, alphabet_size, go, ge, slot_row, columns["score"], columns["end_i"],
            columns["end_j"], run_base, runs, run_count,
            columns["start_i"], columns["start_j"], columns["matches"], columns["mismatches"],
            columns["gap_opens"], columns["gaps"], columns["cigar_length"])
    if direct is not None:  # no wait for the total: a bound sizes the buffer
        row_offsets = _row_offsets(xp, columns["cigar_length"], direct)
        slot_offsets = xp.where(used, row_offsets[known_row], 0)
        total = cigar_bound(batch.run_words)
    else:
        slot_offsets = _offsets(xp, xp.where(used, columns["cigar_length"][known_row],
                                             0).astype(np.int64))
        settle()
        total = int(slot_offsets[-1])
    chars = xp.empty(max(total, 1), dtype=np.uint8)
    write = tb_kernels.cigar_kernel(merge_matches, soft_clip)
    _launch("cigar", write, blocks, THREADS_PER_BLOCK, runs, run_base, run_count, slot_row,
            columns["start_i"], columns["end_i"], query_lengths, slot_offsets, chars)
    settle()
    if direct is not None:
        return chars, row_offsets
    # fresh arrays (not scratch buffers): the piece outlives this batch
    return chars, slot_offsets, slot_row, query_lengths


def to_host(results: DeviceResults, valid: np.ndarray, traceback: bool) -> AlignmentArrays:
    """Copy device results into the engines' host arrays."""
    rows = len(valid)
    host = {name: np.where(valid, to_numpy(array)[:rows], 0)
            for name, array in results.columns.items()}
    out = AlignmentArrays(valid=valid, score=host["score"], query_end=host["end_i"],
                          target_end=host["end_j"], cells=results.cells)
    if traceback:
        out.query_start, out.target_start = host["start_i"], host["start_j"]
        out.stats = {name: host[name] for name in ("matches", "mismatches", "gap_opens", "gaps")}
        out.stats["length"] = out.stats["matches"] + out.stats["mismatches"] + out.stats["gaps"]
        out.cigar_offsets = to_numpy(results.offsets)
        out.cigar_chars = to_numpy(results.cigar_chars())[:results.characters]
    return out


def run_pairs_gpu(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                  pair_target: np.ndarray, scoring: Scoring, mode: Mode, *, traceback: bool,
                  cigar_style: str, clip: str | None, cpu_runner, progress) -> AlignmentArrays:
    """Align pairs of host-encoded sequences on the GPU; host arrays in pair order.

    Alphabets over ``inter.MAX_ALPHABET`` symbols (the shared-memory table) run on the CPU.
    """
    if len(scoring.alphabet) > inter.MAX_ALPHABET:
        return cpu_runner(pair_query, pair_target)
    valid = queries.valid[pair_query] & targets.valid[pair_target]
    device_queries = upload(queries)
    device_targets = device_queries if targets is queries else upload(targets)
    longest = (int(queries.lengths.max(initial=0)), int(targets.lengths.max(initial=0)))
    results = align_on_device(device_queries, device_targets, pair_query, pair_target,
                              queries.lengths[pair_query], targets.lengths[pair_target], valid,
                              scoring, mode, traceback=traceback, cigar_style=cigar_style,
                              clip=clip, progress=progress, longest=longest,
                              all_valid=bool(valid.all()))
    return to_host(results, valid, traceback)


def _target_tile(lengths: np.ndarray, valid: np.ndarray,
                 packed: bool = False) -> dict[str, np.ndarray]:
    """Layout of a database tile for the search kernel: targets sorted by length (longest
    first) in warps of 32, residues interleaved; null targets and padding flagged (length
    -1). The row-above regions (``row_base``, ``row_words``) are per warp, or with
    ``packed`` per pair of warps 2p, 2p + 1 (one thread each; the longer, 2p, sets the
    columns)."""
    order = np.argsort(-lengths, kind="stable")
    slots = (len(order) + inter.WARP - 1) // inter.WARP * inter.WARP
    target_row = np.full(slots, -1, dtype=np.int64)
    target_row[:len(order)] = order
    slot_lengths = np.full(slots, -1, dtype=np.int64)
    slot_lengths[:len(order)] = np.where(valid[order], lengths[order], -1)
    warp_columns = np.maximum(slot_lengths, 0).reshape(-1, inter.WARP).max(axis=1)
    target_base = np.zeros(len(warp_columns), dtype=np.int64)
    np.cumsum(inter.WARP * warp_columns[:-1], out=target_base[1:])
    row_columns = warp_columns[0::2] if packed else warp_columns
    row_base = np.zeros(len(row_columns), dtype=np.int64)
    np.cumsum(inter.WARP * (row_columns[:-1] + 1), out=row_base[1:])
    lane = np.arange(slots) % inter.WARP
    return dict(target_row=target_row, slot_lengths=slot_lengths, warp_columns=warp_columns,
                target_base=target_base, row_base=row_base,
                slot_start=np.repeat(target_base, inter.WARP) + lane,
                target_size=int(inter.WARP * warp_columns.sum()),
                row_words=int(inter.WARP * (row_columns + 1).sum()))


def search_top_k(queries: DeviceSequences, targets: DeviceSequences, query_lengths: np.ndarray,
                 query_valid: np.ndarray, target_lengths: np.ndarray, target_valid: np.ndarray,
                 scoring: Scoring, mode: Mode, top_k: int,
                 progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The pairs a search keeps: the best ``top_k`` targets of every query, from a
    score-only pass over the whole cross product on the device (no pair list, no host
    work per pair).

    Returns ``(pair_query, pair_target)`` in the order of
    :func:`gpualign_df.api.best_first`: queries in order, best score first, ties by target
    index, pairs with a null sequence last; ``min(top_k, len(targets))`` pairs per query.
    """
    with _DEVICE_LOCK, engine_allocations():
        return _search_top_k(queries, targets, np.asarray(query_lengths, np.int64),
                             np.asarray(query_valid, bool), np.asarray(target_lengths, np.int64),
                             np.asarray(target_valid, bool), scoring, mode, top_k, progress)


def _search_top_k(queries, targets, query_lengths, query_valid, target_lengths, target_valid,
                  scoring, mode, top_k, progress):
    query_count, target_count = len(query_lengths), len(target_lengths)
    if query_count == 0 or target_count == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    kept = min(int(top_k), target_count)
    best_score = cuda.device_array((query_count, kept), np.int32)
    best_target = cuda.device_array((query_count, kept), np.int64)
    count = cuda.to_device(np.zeros(query_count, np.int32))
    valid_device = _upload("query_valid", query_valid.astype(np.uint8))
    sorted_queries = np.argsort(-query_lengths, kind="stable")
    query_order = _upload("query_order", sorted_queries)
    packed = _search_16bit(scoring, mode, query_lengths, target_lengths)
    if packed:
        kernel = inter.search_kernel16(dpx.available())
        sub = device_table("substitution16", _table16(scoring))
    else:
        kernel = inter.search_kernel(mode.code, *mode.flags(), dpx.available())
        sub = device_table("substitution", scoring.matrix.ravel().astype(np.int32))
    budget = int(_free_bytes() * MEMORY_SHARE)
    tile_targets = int(min(target_count, max(inter.WARP, budget // (16 * query_count))))
    query_residues = int(query_lengths[query_valid].sum())
    for tile_start in range(0, target_count, tile_targets):
        tile = slice(tile_start, min(tile_start + tile_targets, target_count))
        layout = _target_tile(target_lengths[tile], target_valid[tile], packed)
        device = {name: _upload(name, layout[name]) for name in
                  ("target_row", "slot_lengths", "warp_columns", "target_base", "row_base")}
        residues = _scratch("target", layout["target_size"], np.uint8)
        # padding and null slots (length -1) gather nothing
        sequence_of_slot = np.where(layout["slot_lengths"] >= 0,
                                    tile_start + layout["target_row"], -1)
        _launch("gather", gather_residues, _blocks(len(sequence_of_slot)), THREADS_PER_BLOCK,
                targets.codes, targets.offsets, _upload("sequence_of_slot", sequence_of_slot),
                device["slot_lengths"], _upload("slot_start", layout["slot_start"]),
                inter.WARP, residues)
        tile_count = tile.stop - tile.start
        scores = _scratch("scores", tile_count * query_count, np.int32).reshape(
            (tile_count, query_count))
        row_words = layout["row_words"]
        threads_per_query = inter.WARP * len(layout["row_base"])
        chunk = max(1, min(query_count, (budget - 4 * tile_count * query_count)
                           // (8 * row_words), (2**31 - 1) // threads_per_query))
        h_buffer = _scratch("h_row", chunk * row_words, np.int32)
        i_buffer = _scratch("i_row", chunk * row_words, np.int32)
        tile_cells = query_residues * int(target_lengths[tile][target_valid[tile]].sum())
        tile_residues = int(target_lengths[tile][target_valid[tile]].sum())
        tuning = config.settings()
        with _beside_default_stream(tile_cells) as stream:
            pending = _Pending(stream, progress, follow=tile_cells > tuning.gpu_launch_cells)
            for first, stop in _launch_chunks(query_lengths[sorted_queries] * tile_residues,
                                              chunk, tuning.gpu_launch_cells):
                chunk_queries = query_order[first:stop]
                _launch("search", kernel, _blocks(len(chunk_queries) * threads_per_query),
                        THREADS_PER_BLOCK, queries.codes, queries.offsets, valid_device,
                        chunk_queries, residues, device["slot_lengths"], device["target_row"],
                        device["target_base"], device["row_base"], device["warp_columns"],
                        row_words, sub, len(scoring.alphabet), scoring.gap_open,
                        scoring.gap_extend, h_buffer, i_buffer, scores, stream=stream)
                pending.launched(int((query_lengths[sorted_queries[first:stop]]
                                      * query_valid[sorted_queries[first:stop]]).sum())
                                 * tile_residues)
            pending.finish()
        segments = max(1, min(inter.TOP_K_SEGMENTS, tile_count, -(-(1 << 16) // query_count),
                              (1 << 30) // (12 * kept * query_count)))
        part_score = _scratch("part_score", (segments + 1) * kept * query_count,
                              np.int32).reshape((segments + 1, kept, query_count))
        part_target = _scratch("part_target", (segments + 1) * kept * query_count,
                               np.int64).reshape((segments + 1, kept, query_count))
        part_count = _scratch("part_count", (segments + 1) * query_count,
                              np.int32).reshape((segments + 1, query_count))
        _launch("top_k", inter.top_k_segments, _blocks(segments * query_count),
                THREADS_PER_BLOCK, scores, tile_start, kept, segments, part_score, part_target,
                part_count)
        _launch("top_k", inter.top_k_merge, _blocks(query_count), THREADS_PER_BLOCK, kept,
                segments, part_score, part_target, part_count, best_score, best_target, count)
    counts = count.copy_to_host()
    ranks = np.arange(kept)[None, :] < counts[:, None]
    pair_query = np.repeat(np.arange(query_count, dtype=np.int64), counts)
    return pair_query, best_target.copy_to_host()[ranks]


def _launch_chunks(cells: np.ndarray, most: int, cells_per_launch: float):
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


class _Pending:
    """Launches on one stream whose completion the host follows (``follow``; else their
    cells count as done when launched): after each launch it waits, by polling, for the
    launch before it (so one stays queued and the GPU never idles), reports that launch's
    cells to ``progress``, and answers Ctrl-C between polls. On an exception it waits for
    what is in flight (buffers are reused), then re-raises."""

    def __init__(self, stream, progress, follow: bool) -> None:
        self._stream, self._progress = stream, progress
        self._follow = follow
        self._queue: list[tuple[object, int]] = []

    def launched(self, cells: int) -> None:
        if simulator() or not self._follow:
            self._report(cells)
            return
        event = cuda.event(timing=False)
        event.record(self._stream or 0)
        self._queue.append((event, cells))
        if len(self._queue) > 1:
            self._wait_first()

    def finish(self) -> None:
        while self._queue:
            self._wait_first()

    def _wait_first(self) -> None:
        event, cells = self._queue[0]
        try:
            for _ in poll(event):
                pass
        except BaseException:
            for queued, _ in self._queue:
                queued.synchronize()
            raise
        self._queue.pop(0)
        self._report(cells)

    def _report(self, cells: int) -> None:
        if self._progress is not None:
            self._progress(cells)


def _search_16bit(scoring: Scoring, mode: Mode, query_lengths: np.ndarray,
                  target_lengths: np.ndarray) -> bool:
    """Whether a search runs on packed 16-bit cells: local mode, the policy
    (``SEARCH_16BIT``) allows it, and no cell can leave 16 bits. A local cell is at most
    ``min(longest query, longest target) * largest entry``, which must stay below 2**15;
    gap costs and the magnitude of the most negative entry must stay below 2**13, so that
    nothing falls past -2**15 from the lanes' minus infinity (-2**14)."""
    use = dpx.available() if SEARCH_16BIT is None else SEARCH_16BIT
    if not use or mode.code != inter.MODE_LOCAL:
        return False
    largest = _largest_entry(scoring)
    shortest_side = min(int(query_lengths.max(initial=0)), int(target_lengths.max(initial=0)))
    limit = 1 << 13
    return (shortest_side * largest < (1 << 15) - 1 and scoring.gap_open < limit
            and scoring.gap_extend < limit and int(scoring.matrix.min(initial=0)) > -limit)


def _largest_entry(scoring: Scoring) -> int:
    """The highest substitution score, or 0 where none is positive (the bound of a cell
    above 0 is ``largest * min(m, n)``)."""
    return max(int(scoring.matrix.max(initial=0)), 0)


def fill_fits_16bit(scoring: Scoring, longest_query: int, longest_target: int) -> bool:
    """Whether pairs up to these lengths fill exactly on packed 16-bit cells (every mode).

    Every H, I and D value of a real cell lies in [-(3*go + ge*(m + n + 1)), largest *
    min(m, n)] (a path of two gaps bounds H from below; a gap value is at most one open and
    one extension below an H), a diagonal candidate adds one more entry; the kernel's sums
    are floored at ``NEG16`` = -2**14, which must stay strictly below every real value, and
    the highest value plus an entry must fit 2**15 - 1. End columns are kept in 16-bit
    lanes, so both lengths stay below 2**15.

    >>> from gpualign_df.scoring import make_scoring
    >>> fill_fits_16bit(make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), 150, 277)
    True
    >>> fill_fits_16bit(make_scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2), 9000, 9000)
    False
    """
    if longest_query >= 1 << 15 or longest_target >= 1 << 15:
        return False
    largest = _largest_entry(scoring)
    lowest_entry = max(-int(scoring.matrix.min(initial=0)), 0)
    high = largest * (min(longest_query, longest_target) + 1)
    low = (3 * scoring.gap_open + scoring.gap_extend * (longest_query + longest_target + 1)
           + lowest_entry)
    return high < (1 << 15) - 1 and low < -dpx.NEG16 - 1


def keyed_best_fits(scoring: Scoring, longest_query: int, longest_target: int) -> bool:
    """Whether the fill kernels may keep each row's running best as one int32 key
    ``H * 2**16 - j`` (``inter.strip_functions``): every H within (-2**15, 2**15), from the
    bounds of :func:`fill_fits_16bit` (H alone: a path of two gaps below, ``largest *
    min(m, n)`` above), and every column below 2**16.

    >>> from gpualign_df.scoring import make_scoring
    >>> keyed_best_fits(make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), 150, 277)
    True
    >>> keyed_best_fits(make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), 9, 70_000)
    False
    """
    if longest_target >= 1 << 16:
        return False
    largest = _largest_entry(scoring)
    high = largest * min(longest_query, longest_target)
    low = 2 * scoring.gap_open + scoring.gap_extend * (longest_query + longest_target)
    return high < (1 << 15) - 1 and low < (1 << 15) - 1


def _table16(scoring: Scoring) -> np.ndarray:
    """The substitution table with a padding code (last row and column, ``PAD16``)."""
    size = len(scoring.alphabet)
    table = np.full((size + 1, size + 1), inter.PAD16, dtype=np.int32)
    table[:size, :size] = scoring.matrix
    return table.ravel()
