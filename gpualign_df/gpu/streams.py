"""Waiting for the device without blocking the host: a side stream for long kernels,
polled waits (Ctrl-C is handled, progress bars move), and the stop flag and cell counter
a long-pair fill shares with the host.

A blocking synchronize of seconds or minutes would keep Python from handling Ctrl-C and
the progress bar still; a long kernel on the legacy default stream would make every other
thread's work on that stream (a Dask worker copying a partition it sends) wait for it.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
from numba import cuda

from .. import config
from ..kernels import simulator
from .device import array_module, current_device


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
        """The current device's side stream; None under the CUDA simulator."""
        if simulator():
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
def beside_default_stream(cells: int, tuning: config.Settings):
    """The stream for a stretch of launches of ``cells`` DP cells: with the
    ``side_stream`` setting on, the side stream from ``side_stream_cells`` cells on
    (waited for on the host when the block ends), else None (the default stream)."""
    side = SideStream.current() \
        if tuning.side_stream and cells >= tuning.side_stream_cells else None
    if side is None:
        yield None
        return
    side.follow_default()
    try:
        # CuPy's work in the block (allocations, fills, copies, elementwise kernels) goes on
        # the side stream too: on the default stream it would not be ordered before the
        # launches it prepares (a fill could read its buffers before they are cleared)
        with side._cupy_stream:
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
    (``device``: two int64 on the device, see :mod:`gpualign_df.kernels.band`), and the
    host's wait for such a fill: polled, so Ctrl-C is handled and the progress bar moves
    within one long pair, instead of one blocking synchronize of minutes.

    The host reads the counter and writes the flag with copies on a non-blocking stream
    (one per device, kept), which run beside the fill whatever stream the fill is on.
    """

    _STREAMS: dict[int, object] = {}

    def __init__(self, words) -> None:
        """``words``: the two cleared int64 device words of the fill (a view of its
        allocation)."""
        xp = array_module()
        self.device = words
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


#: Launches :class:`Pending` leaves queued behind the one running: the host prepares the
#: next launch while they run, so short launches (a search's small length classes) follow
#: each other with no gap while the host notices one has ended.
PENDING_QUEUED = 3


class Pending:
    """Launches on one stream whose completion the host follows (``follow``; else their
    cells count as done when launched): after each launch it waits, by polling, for the
    earliest launch while more than :data:`PENDING_QUEUED` are in flight (so some stay
    queued and the GPU never idles), reports that launch's cells to ``progress``, and
    answers Ctrl-C between polls. On an exception it waits for what is in flight (buffers
    are reused), then re-raises."""

    def __init__(self, stream, progress, follow: bool) -> None:
        self._stream, self._progress = stream, progress
        self._follow = follow
        self._queue: list[tuple[object, int]] = []

    def launched(self, cells: int) -> None:
        """Note a launch of ``cells`` DP cells just queued on the stream."""
        if simulator() or not self._follow:
            self._report(cells)
            return
        event = cuda.event(timing=False)
        event.record(self._stream or 0)
        self._queue.append((event, cells))
        while len(self._queue) > PENDING_QUEUED:
            self._wait_first()

    def finish(self) -> None:
        """Wait for every launch noted, reporting their cells."""
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
