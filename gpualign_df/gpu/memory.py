"""Where the GPU engine's CuPy arrays are allocated.

Importing cuDF routes CuPy (and numba) through RMM. With RMM's default resource, plain
``cudaMalloc``/``cudaFree`` (each free a device-wide wait), the hundred or so temporaries
of a job cost several milliseconds; there the engine allocates from a private
stream-ordered resource (``cudaMallocAsync``: a free waits for nothing) that gives freed
memory back at each synchronization beyond the ``gpu_keep_bytes`` setting (none by
default: keeping more did not make repeated jobs measurably faster, see BENCHMARKS.md).
A resource the user configured (a pool, the async allocator, a limit;
:func:`gpualign_df.cluster` picks the async one for its workers) is shared as it is, and
without RMM CuPy's own pool serves.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from .. import config, libraries
from ..kernels import simulator

#: The private resource, made on first use, and the ``gpu_keep_bytes`` it was made with.
_PRIVATE_RESOURCE = None
_PRIVATE_KEEP_BYTES: int | None = None


def _private_allocator():
    """A CuPy allocator over the engine's private stream-ordered RMM resource, or None
    where CuPy's current allocator is to be kept."""
    global _PRIVATE_RESOURCE, _PRIVATE_KEEP_BYTES
    if not libraries.loaded("rmm"):  # CuPy cannot be routed through RMM before it is
        return None                  # imported (and a failed import costs a path search)
    import cupy

    try:
        import rmm
        from rmm.allocators.cupy import rmm_cupy_allocator
    except ImportError:  # no RMM: CuPy's own pool
        return None
    if cupy.cuda.get_allocator() is not rmm_cupy_allocator \
            or type(rmm.mr.get_current_device_resource()) is not rmm.mr.CudaMemoryResource:
        return None  # the user's allocator, or an RMM resource of the user's own
    keep = config.settings().gpu_keep_bytes
    if _PRIVATE_RESOURCE is None or keep != _PRIVATE_KEEP_BYTES:
        # buffers of an earlier resource keep it alive until they are freed
        _PRIVATE_RESOURCE = rmm.mr.CudaAsyncMemoryResource(release_threshold=keep)
        _PRIVATE_KEEP_BYTES = keep
    resource = _PRIVATE_RESOURCE

    def allocate(size: int):
        buffer = rmm.DeviceBuffer(size=size, mr=resource)
        device = -1 if buffer.ptr else cupy.cuda.device.get_device_id()  # empty: null pointer
        memory = cupy.cuda.UnownedMemory(buffer.ptr, buffer.size, buffer, device)
        return cupy.cuda.MemoryPointer(memory, 0)
    return allocate


#: Whether this thread is inside :func:`engine_allocations` (``inside``).
_THREAD = threading.local()


@contextlib.contextmanager
def engine_allocations() -> Iterator[None]:
    """Inside, this thread's CuPy allocations come from the engine's choice of resource
    (see the module's text); under the CUDA simulator nothing changes. Entered again
    inside itself (a job's steps each enter it), it changes nothing: the choice is
    made once, where the thread first enters."""
    if simulator() or getattr(_THREAD, "inside", False):
        yield
        return
    import cupy

    allocator = _private_allocator()
    _THREAD.inside = True
    try:
        if allocator is None:
            yield
        else:
            with cupy.cuda.using_allocator(allocator):
                yield
    finally:
        _THREAD.inside = False
