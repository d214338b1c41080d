"""Device buffers the engine keeps between jobs, and sequences on the device.

Scratch buffers (residues in kernel layout, row-above values, traceback words, runs, ...)
are kept per name and device and grow as needed, so that a stream of jobs does no
allocate/free churn; small constant tables are copied again only when their content
changes. Jobs share these buffers, so one job at a time runs on the device
(:data:`DEVICE_LOCK`). :func:`gpualign_df.gpu.release_scratch` frees them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from .. import config
from ..encode import EncodedSequences, in_pieces
from ..kernels import simulator
from ..kernels.encoding import NO_BAD_BYTE, map_bytes
from ..scoring import Scoring
from .device import THREADS_PER_BLOCK, array_module, blocks, current_device, kernel_view
from .launch import forget_arguments, launch

#: Scratch buffers by (name, device).
SCRATCH: dict[tuple[str, int], object] = {}
#: Constant tables by (name, device), with the content they were copied from.
TABLES: dict[tuple[str, int], tuple[bytes, object]] = {}
#: The last scoring :func:`scoring_tables` was asked for on each device, and its tables.
SCORING_TABLES: dict[int, tuple[Scoring, tuple]] = {}
#: Values made from a job's options and kept for later jobs with the same options, by
#: (name, device): the options and the value (:func:`kept_for`).
KEPT: dict[tuple[str, int], tuple[tuple, object]] = {}
#: Pinned host buffers that stage :func:`upload`'s shared transfer, by device.
STAGING: dict[int, np.ndarray] = {}
#: One job at a time on the device: jobs share the scratch buffers (Dask's threaded
#: scheduler, for one, runs tasks in several threads of one process).
DEVICE_LOCK = threading.RLock()


def free_bytes() -> int:
    """Device memory a job may count on: what the device reports free, plus CuPy's pool's
    free blocks and the engine's cached buffers on the current device (both reusable by
    the job); a fixed 256 MiB under the CUDA simulator."""
    if simulator():
        return 1 << 28
    import cupy

    free, _total = cupy.cuda.runtime.memGetInfo()  # (numba's context does not report it
    # under RMM's memory manager)
    device = current_device()
    return int(free) + cupy.get_default_memory_pool().free_bytes() + sum(
        buffer.nbytes for (_name, owner), buffer in SCRATCH.items() if owner == device)


def scratch(name: str, count: int, dtype) -> object:
    """A reusable device buffer of exactly ``count`` elements (at least one) on the
    current device (no allocate/free churn): a view of :func:`scratch_buffer`'s, the same
    view object while the buffer and ``count`` stay the same (:func:`buffer_views`)."""
    count = max(int(count), 1)
    key = (name, current_device())
    return _kept_views(key, _scratch_buffer(key, count, dtype), count,
                       lambda buffer: buffer[:count])


def scratch_buffer(name: str, count: int, dtype) -> object:
    """:func:`scratch`'s buffer whole (at least ``count`` elements): for a kernel given
    its sizes, which needs no slice of exactly ``count`` (each slice, view or reshape of
    a CuPy array costs microseconds of host time)."""
    return _scratch_buffer((name, current_device()), max(int(count), 1), dtype)


def _scratch_buffer(key: tuple[str, int], count: int, dtype) -> object:
    buffer = SCRATCH.get(key)
    if buffer is None or buffer.size < count or buffer.dtype != np.dtype(dtype):
        old = SCRATCH.pop(key, None)
        for kept, (viewed, _layout, _views) in list(BUFFER_VIEWS.items()):
            if viewed is old:   # (its views would keep the old buffer alive)
                del BUFFER_VIEWS[kept]
        buffer = array_module().empty(count, dtype=dtype)
        SCRATCH[key] = buffer
    return buffer


#: Views of the buffers kept between jobs, by (name, device): the buffer, what the views
#: depend on besides it, and the views (:func:`buffer_views`).
BUFFER_VIEWS: dict[tuple[str, int], tuple[object, object, object]] = {}


def buffer_views(name: str, buffer, layout, make: Callable[[object], object]) -> object:
    """``make(buffer)``, views of a buffer kept between jobs (slices, reshapes, views as
    other types), made once and returned again while the same ``buffer`` object comes
    with an equal ``layout`` (what the views depend on besides it: sizes, offsets);
    ``name`` is the views' (one ``make`` a name; :func:`scratch` takes its buffer's). Each
    view of a CuPy array costs microseconds of host time, and a job of the size of the
    last one then makes none. The views are of memory the next job writes: they serve
    the job that asked for them, as the buffer does."""
    return _kept_views((name, current_device()), buffer, layout, make)


def _kept_views(key: tuple[str, int], buffer, layout, make: Callable[[object], object]):
    """:func:`buffer_views` by its key in ``BUFFER_VIEWS``."""
    cached = BUFFER_VIEWS.get(key)
    if cached is None or cached[0] is not buffer or cached[1] != layout:
        cached = BUFFER_VIEWS[key] = (buffer, layout, make(buffer))
    return cached[2]


def row_numbers(count: int) -> object:
    """``0, 1, ..., count - 1`` (int64) on the current device: a view of a buffer kept
    between jobs, written only where it grows (no job writes it)."""
    count = max(int(count), 0)
    key = ("row_numbers", current_device())
    buffer = SCRATCH.get(key)
    if buffer is None or buffer.size < count:
        buffer = SCRATCH[key] = array_module().arange(max(count, 1), dtype=np.int64)
    return buffer[:count]


def scratch_views(name: str, count: int, dtype, *types) -> tuple:
    """:func:`scratch_buffer` (at least ``count`` elements of ``dtype``, a multiple of
    every one of ``types``' sizes in bytes) as each of ``types`` (itself for its own
    type), each view made once for as long as the buffer is kept (:func:`buffer_views`,
    one name a type)."""
    buffer = scratch_buffer(name, count, dtype)
    device = current_device()
    return tuple(
        buffer if np.dtype(kind) == buffer.dtype else
        _kept_views((f"{name} as {np.dtype(kind).str}", device), buffer, None,
                    lambda viewed, kind=kind: viewed.view(kind))
        for kind in types)


def device_empty(count: int, dtype) -> object:
    """A new device array of ``count`` elements (at least one) that the caller keeps (no
    scratch buffer: later jobs do not write it)."""
    return array_module().empty(max(int(count), 1), dtype=dtype)


def scratch_upload(name: str, host: np.ndarray) -> object:
    """``host`` copied into a reusable device buffer (no allocation once it is large enough)."""
    host = np.ascontiguousarray(host)
    buffer = scratch(name, host.size, host.dtype)
    if host.size:
        if isinstance(buffer, np.ndarray):
            buffer[...] = host.ravel()
        else:
            buffer.set(host.ravel())
    return buffer.reshape(host.shape) if host.ndim > 1 else buffer


def to_device(host: np.ndarray) -> object:
    """A device copy of a host array: CuPy's (numba's under the simulator)."""
    return cuda.to_device(host) if simulator() else array_module().asarray(host)


def device_table(name: str, host: np.ndarray) -> object:
    """A copy on the current device of a small constant table (substitution scores and the
    like) that kernels only read: copied again only when its content changes."""
    host = np.ascontiguousarray(host)
    content = host.dtype.str.encode() + host.tobytes()
    key = (name, current_device())
    cached = TABLES.get(key)
    if cached is None or cached[0] != content:
        cached = (content, to_device(host if host.size else np.zeros(1, host.dtype)))
        TABLES[key] = cached
    return cached[1]


#: Option types compared by value in :func:`_same_options` (others by identity). The
#: settings are plain values too: each ``config.override`` block makes a new object.
_PLAIN = (bool, int, float, str, tuple, frozenset, config.Settings)


def _same_options(options: tuple, kept: tuple) -> bool:
    """Whether two option tuples are the same: item by item the same object, or equal
    plain values or settings (objects such as a Scoring, which holds arrays, only by
    identity)."""
    return len(options) == len(kept) and all(
        new is old or (type(new) is type(old) and isinstance(new, _PLAIN) and new == old)
        for new, old in zip(options, kept))


def kept_for(name: str, options: tuple, make) -> object:
    """``make()`` for these ``options``, kept on the current device and returned again
    while later calls of the same ``name`` pass the same options (:func:`_same_options`:
    a Scoring by identity, as repeated options share one, settings by value); values that
    hold device tables follow :func:`forget_buffers`."""
    key = (name, current_device())
    kept = KEPT.get(key)
    if kept is None or not _same_options(options, kept[0]):
        kept = KEPT[key] = (options, make())
    return kept[1]


def forget_buffers() -> None:
    """Drop every cached scratch buffer, table and pinned staging buffer (freed once no
    job holds them)."""
    SCRATCH.clear()
    BUFFER_VIEWS.clear()
    TABLES.clear()
    SCORING_TABLES.clear()
    KEPT.clear()
    STAGING.clear()
    forget_arguments()


def scoring_tables(scoring: Scoring) -> tuple:
    """``(substitution, concrete, lut)``: device copies (:func:`device_table`) of a
    :class:`~gpualign_df.scoring.Scoring`'s substitution table (int32, flat), concrete
    flags and byte-to-code table, kept for the last scoring asked on each device. A
    Scoring never changes and repeated options share one, so a caller making many small
    calls reads its tables once, not at each call."""
    device = current_device()
    kept = SCORING_TABLES.get(device)
    if kept is None or kept[0] is not scoring:
        kept = (scoring, (device_table("substitution", scoring.matrix.ravel().astype(np.int32)),
                          device_table("concrete", scoring.concrete),
                          device_table("lut", scoring.lut)))
        SCORING_TABLES[device] = kept
    return kept[1]


@dataclass
class DeviceSequences:
    """Residue codes and int64 offsets of many sequences, on the device; ``largest_code``
    bounds every code where the host knows it (None: read it from the device when needed);
    ``keep``: the host sequences' :attr:`~gpualign_df.encode.EncodedSequences.keep` (what a
    search derives from a prepared database is kept there), else None; ``host``: the host
    sequences copied (small derived tables are quicker made from them), where known."""

    codes: object
    offsets: object
    largest_code: int | None = None
    keep: dict | None = None
    host: EncodedSequences | None = field(default=None, compare=False, repr=False)


def kept_upload(encoded: EncodedSequences) -> DeviceSequences | None:
    """The device copy :func:`upload` keeps of a collection with ``keep`` (a prepared
    database) on the current device, else None."""
    return None if encoded.keep is None else encoded.keep.get(("upload", current_device()))


def used_sequences(encoded: EncodedSequences,
                   rows: np.ndarray) -> tuple[EncodedSequences, np.ndarray]:
    """``(sequences, rows)`` for pairs that use sequences ``rows`` of ``encoded``: where
    the pairs are fewer than half the sequences (a search's hits in a large database) and
    no device copy is kept, only the sequences they use, with ``rows`` renumbered, so
    that an upload copies those alone; else ``encoded`` and ``rows`` as they are."""
    rows = np.asarray(rows)
    if 2 * len(rows) > len(encoded) or kept_upload(encoded) is not None:
        return encoded, rows
    used, renumbered = np.unique(rows, return_inverse=True)
    return encoded.take(used), renumbered.astype(np.int64).reshape(rows.shape)


#: Largest array that shares the one transfer of :func:`upload`; larger ones go alone (a
#: transfer's fixed cost is small beside theirs, and they need no host copy).
SHARED_UPLOAD_BYTES = 1 << 20


def staging(size: int) -> np.ndarray:
    """``size`` bytes of host memory to gather an upload's small arrays in: on a GPU, a
    view of a pinned buffer kept per device (grown as needed; no page faults and no
    staging copy of pageable memory at each call), else a new array."""
    if simulator():
        return np.empty(size, np.uint8)
    import cupy

    device = current_device()
    buffer = STAGING.get(device)
    if buffer is None or len(buffer) < size:
        capacity = max(size, 2 * len(buffer) if buffer is not None else 0)
        buffer = np.frombuffer(cupy.cuda.alloc_pinned_memory(capacity), np.uint8, capacity)
        STAGING[device] = buffer
    return buffer[:size]


def upload_codes(encoded: EncodedSequences) -> np.ndarray:
    """A collection's residue codes as an upload takes them (at least one byte: a device
    array may not be empty); where they are not made yet (``unmapped``), the sequences'
    bytes as they are, which :func:`map_on_device` maps once uploaded."""
    values = encoded.text if encoded.unmapped else encoded.codes
    return values if len(values) else np.zeros(1, np.uint8)


#: Most blocks of one :func:`map_on_device` launch (its kernel loops over the bytes).
MAP_BLOCKS = 1024


def map_on_device(uploaded: list[tuple[EncodedSequences, object]]) -> list[int]:
    """Map, in place, the uploaded bytes of unmapped collections (each with the device
    array :func:`upload_codes`' part went to) to their residue codes, through each one's
    scoring table, on the device: the host makes no pass over them. One read of a summary
    for all; the largest code of each, in order.

    Raises
    ------
    gpualign_df.encode.InvalidResidueError
        For a character outside a collection's alphabet: the host's mapping of that
        collection, run then, names its row, position and character."""
    if not uploaded:
        return []
    # (the first bad byte, the largest code) of each
    summary = array_module().asarray(np.array([NO_BAD_BYTE, 0] * len(uploaded), np.int64))
    for slot, (encoded, device) in enumerate(uploaded):
        size = len(encoded.text)
        if size:
            launch(map_bytes, min(blocks(size), MAP_BLOCKS), THREADS_PER_BLOCK,
                   (device[:size], device_table("lut", encoded.scoring.lut),
                    summary[2 * slot:2 * slot + 2]), kernel_view)
    values = summary.tolist()   # (one read back)
    for slot, (encoded, _device) in enumerate(uploaded):
        if values[2 * slot] != NO_BAD_BYTE:
            encoded.codes  # raises: the host's pass names the row, position and character
            raise RuntimeError(f"byte {values[2 * slot]} of the sequences is outside the "
                               f"{encoded.scoring.name} alphabet on the device only")
    return values[1::2]


def upload_parts(parts: list[np.ndarray]) -> list[object]:
    """Device copies of host byte arrays (``uint8``): those up to
    :data:`SHARED_UPLOAD_BYTES` as views of one buffer filled by one transfer from
    :func:`staging`'s pinned memory, in order (a part viewed there as wider values must
    start at a multiple of their size: put such parts first), larger ones each by its
    own (:func:`send_bytes`). Returns once every copy is done."""
    shared = [part for part in parts if part.nbytes <= SHARED_UPLOAD_BYTES]
    views: dict[int, object] = {}
    if shared:
        ends = np.cumsum([len(part) for part in shared])
        with DEVICE_LOCK:  # (one staging buffer a device)
            host = staging(int(ends[-1]))
            for part, end in zip(shared, ends):
                host[end - len(part):end] = part
            if simulator():
                device = to_device(host)
            else:  # one copy, synchronous from pinned memory (cudaMemcpy; ndarray.set may
                # return before it ends): the buffer is free again once it returns
                import cupy

                device = cupy.empty(len(host), np.uint8)
                cupy.cuda.runtime.memcpy(device.data.ptr, host.ctypes.data, len(host),
                                         cupy.cuda.runtime.memcpyHostToDevice)
        views = {id(part): device[end - len(part):end] for part, end in zip(shared, ends)}
    sent = {id(part): send_bytes(part) for part in parts if id(part) not in views}
    if any(pinned is not None for _device, pinned in sent.values()):
        import cupy

        cupy.cuda.Stream.null.synchronize()   # (the pinned pieces are free again)
    return [views[id(part)] if id(part) in views else sent[id(part)][0] for part in parts]


#: Bytes of each piece of :func:`send_bytes`: a piece is sent once it is in pinned
#: memory, while the next ones are copied there.
SEND_PIECE_BYTES = 4 << 20


def send_bytes(host: np.ndarray) -> tuple[object, np.ndarray | None]:
    """A device copy of a host ``uint8`` array: from pinned memory by one copy; from
    pageable memory (an Arrow buffer of a pandas column, say) in pieces, each copied
    into pinned memory on the encoding threads and sent by an asynchronous copy on the
    default stream as soon as it is there, so that both copies overlap (the driver's own
    path from pageable memory runs at a fraction of the link's speed). Returns the device
    array and the pinned buffer the pieces went through (:func:`pinned_bytes`; None where
    none did), which must live until the default stream has passed the copies (its next
    synchronous read)."""
    if simulator():
        return to_device(host), None
    import cupy

    runtime = cupy.cuda.runtime
    device = cupy.empty(len(host), np.uint8)
    if _pinned(host):
        runtime.memcpy(device.data.ptr, host.ctypes.data, len(host), runtime.memcpyHostToDevice)
        return device, None
    pinned = pinned_bytes(len(host))
    number = current_device()

    def send(start: int, stop: int) -> None:
        np.copyto(pinned[start:stop], host[start:stop])
        with cupy.cuda.Device(number):  # (the job's device, that of its default stream)
            runtime.memcpyAsync(device.data.ptr + start, pinned.ctypes.data + start,
                                stop - start, runtime.memcpyHostToDevice, 0)

    in_pieces(len(host), send, SEND_PIECE_BYTES)
    return device, pinned


def _pinned(host: np.ndarray) -> bool:
    """Whether a host array lies in page-locked memory CUDA knows (CuPy's pinned pool)."""
    import cupy

    runtime = cupy.cuda.runtime
    try:
        return runtime.pointerGetAttributes(host.ctypes.data).type == runtime.memoryTypeHost
    except runtime.CUDARuntimeError:
        return False


def upload_into(device, host: np.ndarray) -> None:
    """Copy :func:`staging`'s pinned bytes ``host`` to the start of a device ``uint8``
    array by one copy on the default stream, which the host does not wait for: ``host``
    must stay as it is until that stream's work so far is done, as the next synchronous
    copy on it (:func:`download`) ensures (``DEVICE_LOCK`` held from the one to the
    other keeps other jobs off the staging buffer)."""
    if simulator():
        device[:len(host)] = host
        return
    import cupy

    cupy.cuda.runtime.memcpyAsync(device.data.ptr, host.ctypes.data, len(host),
                                  cupy.cuda.runtime.memcpyHostToDevice, 0)


def download(device, size: int, start: int = 0) -> np.ndarray:
    """``size`` bytes of a device array from byte ``start`` (of a ``uint8`` one under
    the simulator), as a new host ``uint8`` array: on a GPU by one synchronous copy (it
    waits for the default stream's work) into :func:`staging`'s pinned memory."""
    if simulator():
        return np.array(device[start:start + size])
    import cupy

    with DEVICE_LOCK:  # (one staging buffer a device)
        host = staging(size)
        if size:
            cupy.cuda.runtime.memcpy(host.ctypes.data, device.data.ptr + start, size,
                                     cupy.cuda.runtime.memcpyDeviceToHost)
        return host.copy()


def download_pinned(array) -> np.ndarray:
    """A host copy of a device array (a numpy one as it is; the simulator's by its own
    copy) in pinned memory (:func:`pinned_bytes`), by one synchronous copy (it waits for
    the default stream's work): at the link's speed and with no page fault on the host,
    where a copy into new pageable memory faults at every page. For a temporary the
    caller copies from (a job's result table, whose columns the frame copies): its block
    goes back to CuPy's pinned pool, not to the system, once the copy is freed."""
    if isinstance(array, np.ndarray):
        return array
    if simulator():
        return array.copy_to_host()
    import cupy

    array = cupy.ascontiguousarray(array)
    host = pinned_bytes(array.nbytes).view(array.dtype).reshape(array.shape)
    if array.nbytes:
        cupy.cuda.runtime.memcpy(host.ctypes.data, array.data.ptr, array.nbytes,
                                 cupy.cuda.runtime.memcpyDeviceToHost)
    return host


def _largest_code(encoded: EncodedSequences) -> int:
    """A bound on every code: the encoder's, else one pass over the codes."""
    if encoded.largest_code is not None:
        return encoded.largest_code
    return int(encoded.codes.max(initial=0))


def codes_buffer(count: int) -> np.ndarray:
    """A ``uint8`` host array for ``count`` codes that :func:`upload` will copy: above
    :data:`SHARED_UPLOAD_BYTES` (copied by itself) in pinned memory
    (:func:`pinned_bytes`), so that the copy runs at the link's speed rather than through
    the driver's pageable staging; smaller ones (copied through the staging buffer) and
    under the simulator, plain memory."""
    if simulator() or count <= SHARED_UPLOAD_BYTES:
        return np.empty(count, np.uint8)
    return pinned_bytes(count)


def pinned_bytes(count: int) -> np.ndarray:
    """``count`` bytes of pinned host memory (``uint8``) from CuPy's pinned pool, in a
    block of the next power of two: the pool keeps a freed block for a later request of
    its exact size, so that blocks of every size jobs ask would stay pinned for good;
    rounded, they are of a few sizes (with one job at a time, at most about four times
    the largest request in all), and a job of a size near the last one's takes the same
    block again."""
    import cupyx

    return cupyx.empty_pinned(1 << max(int(count) - 1, 0).bit_length(), np.uint8)[:count]


def read_later(array) -> Callable[[], int]:
    """The integer ``array[0]`` (a device array) as it is once the work queued on the
    default stream so far is done, without waiting for it now: its copy to pinned host
    memory is queued behind that work, and the function returned waits for that copy
    alone (not for work queued after it) and gives the value. A numpy array's (the
    simulator's) is read when asked."""
    if isinstance(array, np.ndarray) or simulator():
        return lambda: int(np.asarray(array[:1])[0])
    import cupy

    host = pinned_bytes(array.itemsize).view(array.dtype)
    cupy.cuda.runtime.memcpyAsync(host.ctypes.data, array.data.ptr, array.itemsize,
                                  cupy.cuda.runtime.memcpyDeviceToHost, 0)
    copied = cupy.cuda.Event(block=False, disable_timing=True)
    copied.record(cupy.cuda.Stream.null)

    def value() -> int:
        copied.synchronize()
        return int(host[0])
    return value


def upload(*collections: EncodedSequences) -> list[DeviceSequences]:
    """Copy host-encoded sequences to the device (CuPy arrays; numba's under the
    simulator), one :class:`DeviceSequences` per collection (the same one for a collection
    passed twice). Arrays up to :data:`SHARED_UPLOAD_BYTES` go in one transfer (views of
    one buffer: :func:`upload_parts`), larger ones each in their own. A collection that
    keeps derived data (``keep``, a prepared database) is copied once per device and kept
    there."""
    kept = {id(encoded): kept_upload(encoded) for encoded in collections
            if encoded.keep is not None}
    distinct = [encoded for encoded in {id(encoded): encoded for encoded in collections}.values()
                if kept.get(id(encoded)) is None]
    # offsets (int64, so they come first and stay aligned), then codes (at least one byte)
    offsets = [np.ascontiguousarray(encoded.offsets, dtype=np.int64).view(np.uint8)
               for encoded in distinct]
    codes = [upload_codes(encoded) for encoded in distinct]
    parts = offsets + codes
    device = upload_parts(parts)
    views = {id(part): view for part, view in zip(parts, device)}
    # the largest code of each: the host's bound, or the device's mapping's (bytes sent)
    unmapped = [(encoded, views[id(code)]) for encoded, code in zip(distinct, codes)
                if encoded.unmapped]
    largest = {id(encoded): _largest_code(encoded) for encoded in distinct
               if not encoded.unmapped}
    largest.update(zip((id(encoded) for encoded, _ in unmapped), map_on_device(unmapped)))
    uploaded = {id(encoded): DeviceSequences(views[id(code)], views[id(offset)].view(np.int64),
                                             largest[id(encoded)], encoded.keep, encoded)
                for encoded, offset, code in zip(distinct, offsets, codes)}
    for encoded in distinct:
        if encoded.keep is not None:
            encoded.keep[("upload", current_device())] = uploaded[id(encoded)]
    uploaded.update({key: value for key, value in kept.items() if value is not None})
    return [uploaded[id(encoded)] for encoded in collections]
