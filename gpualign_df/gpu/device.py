"""The device the GPU engine runs on: whether there is one, which one is current, where its
arrays live, and how kernel arguments and grids are shaped for it.

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the engine runs its kernels on numpy
arrays, on the CPU, so that every kernel is tested without a GPU; no GPU is then
"usable" for the automatic backend choice, but ``backend="cuda"`` runs.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..kernels import simulator

#: Threads per block of the one-thread-per-slot kernels; 32 under the CUDA simulator,
#: where every CUDA thread of a block is a Python thread that its block manager polls
#: (fewer alive at once, less GIL contention).
THREADS_PER_BLOCK = 32 if simulator() else 128


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
    return _device_present()


@functools.cache
def _device_present() -> bool:
    """The driver reports a CUDA device: asked once a process (every job's engine choice
    asks, and counting the devices costs tens of microseconds; a device does not come
    or go while a process runs)."""
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


def current_device() -> int:
    """The current CUDA device (CuPy's numbering; 0 under the CUDA simulator): compiled
    kernels and the engine's cached buffers are kept per device."""
    if simulator():
        return 0
    import cupy

    return cupy.cuda.runtime.getDevice()


_SHARED_OPTIN: dict[int, int] = {}


def max_shared_per_block() -> int:
    """Bytes of shared memory a block of the current device may have where its kernel
    opts in (227 KB on sm_90); 48 KB under the simulator."""
    device = current_device()
    if device not in _SHARED_OPTIN:
        _SHARED_OPTIN[device] = 48 * 1024 if simulator() else int(
            cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    return _SHARED_OPTIN[device]


def blocks(count: int) -> int:
    """Blocks of ``THREADS_PER_BLOCK`` threads for one thread per item of ``count`` (at
    least one: a grid may not be empty)."""
    return max(1, (count + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)


def device_address(array) -> int:
    """Device address of a CuPy array, for kernels whose linked CUDA C takes a pointer
    (0 under the simulator, where those kernels store through the array)."""
    return 0 if simulator() else int(array.data.ptr)


def kernel_view(argument):
    """A kernel argument as numba takes it without a wait: CuPy (or any CUDA array
    interface) arrays become numba device arrays with no stream synchronize. The engine's
    work, CuPy's and cuDF's included, is ordered on the default stream, so no wait is
    needed (long kernels on :class:`gpualign_df.gpu.streams.SideStream` start after it and
    are waited for on the host). Under the CUDA simulator a numpy array becomes the
    simulator's device array over its memory: views of one buffer that a kernel takes as
    two arguments (bytes and words) then share it, as on a GPU, where the simulator
    would copy each in and back out (the later copy undoing the other's writes)."""
    if simulator():
        if isinstance(argument, np.ndarray) and argument.ndim > 0:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            return FakeCUDAArray(argument)
        return argument
    if not hasattr(argument, "__cuda_array_interface__") \
            or getattr(argument, "__cuda_ndarray__", False):
        return argument
    return cuda.as_cuda_array(argument, sync=False)
