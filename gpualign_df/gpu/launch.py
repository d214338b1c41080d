"""Kernel launches with little host work, and the engine's launch of a kernel by name.

numba's launch path turns every CuPy argument into a numba device array (a CUDA context
check, a memory-pointer object, a type lookup) before it marshals it: tens of microseconds
per array argument, a millisecond for a kernel of a few dozen arguments, all of it host
time during which the GPU waits at the start of a job. Here the first launch of a kernel
for a given kind of arguments goes through numba (which compiles it); later ones reuse the
compiled kernel and lay out the arguments the way numba's ``_Kernel._prepare_args`` does,
straight from the CuPy arrays' pointers, shapes and strides, and launch it with
``cuda.core``.

Wherever that is not possible (the CUDA simulator, a numba-cuda without ``cuda.core``
launches, an argument of another kind, the ``fast_launch`` setting off) the launch goes
through numba.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from numba import cuda

from .. import config
from ..kernels import simulator
from .device import current_device, kernel_view

_COMPILED: dict[tuple, tuple] = {}
_LOCK = threading.Lock()
_CORE: tuple | None = None


def _core():
    """``(launch, LaunchConfig, default stream)`` of numba-cuda's ``cuda.core`` launcher,
    or None where this numba-cuda launches otherwise."""
    global _CORE
    if _CORE is None:
        try:
            from numba.cuda import dispatcher
            from numba.cuda.cudadrv.driver import _to_core_stream

            _CORE = (dispatcher.launch, dispatcher.LaunchConfig, _to_core_stream(0))
        except (ImportError, AttributeError):
            _CORE = ()
    return _CORE or None


def _array_kind(argument):
    """What the compiled kernel depends on for a CuPy array: dtype, dimensions, layout
    (numba types a C-contiguous array 'C', else F-contiguous 'F', else 'A')."""
    flags = argument.flags
    layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
    return argument.dtype, argument.ndim, layout


_SCALARS = (bool, int, float)


def _kind(argument):
    """A hashable description of an argument's type, None where the fast path does not
    take it (anything but CuPy arrays and Python or numpy scalars)."""
    kind = type(argument)
    if kind in _SCALARS:
        return kind
    if kind.__module__.startswith("cupy"):   # CuPy's ndarray first: the usual argument
        is_array = kind.__name__ == "ndarray" or (hasattr(argument, "data")
                                                  and hasattr(argument, "flags"))
        return _array_kind(argument) if is_array else None
    if isinstance(argument, (np.integer, np.floating, np.bool_)):
        return kind
    return None


#: How :func:`launch` lays out an argument (see :func:`_layout`).
_ARRAY, _AS_IS, _CTYPE = 0, 1, 2


def _layout(argument_type):
    """How numba's ``_Kernel._prepare_args`` passes an argument of this numba type:
    ``(_ARRAY, None)`` (meminfo, parent, size, itemsize, pointer, shape, strides),
    ``(_AS_IS, None)`` (booleans) or ``(_CTYPE, ctypes type)`` (integers, float64); None
    for a type the fast path does not take."""
    from numba.cuda import types

    if isinstance(argument_type, types.Array):
        return _ARRAY, None
    if isinstance(argument_type, types.Boolean):
        return _AS_IS, None
    if isinstance(argument_type, types.Integer):
        return _CTYPE, getattr(ctypes, f"c_{argument_type}")
    if argument_type == types.float64:
        return _CTYPE, ctypes.c_double
    return None


#: Launches so far by path (``fast``: marshalled here; ``numba``: through numba's own).
LAUNCHES = {"fast": 0, "numba": 0}


#: Bytes of dynamic shared memory a block may have without the kernel opting in.
DEFAULT_DYNAMIC_SHARED = 48 * 1024


def launch(kernel, blocks: int, threads: int, arguments: tuple, view, stream=None,
           shared_bytes: int = 0) -> None:
    """Launch ``kernel[blocks, threads](*arguments)`` on the default stream, or on
    ``stream`` (a numba stream), with ``shared_bytes`` of dynamic shared memory a block;
    ``view`` turns an argument into what numba's own path takes (first launches,
    fallbacks)."""
    core = None if simulator() or not config.settings().fast_launch else _core()
    key = None
    if core is not None:
        kinds = tuple(_kind(argument) for argument in arguments)
        if None not in kinds:  # a kernel is loaded per device (context)
            key = (id(kernel), current_device(), kinds)
    compiled = _COMPILED.get(key) if key is not None else None
    if compiled is None or compiled[0] is not kernel:
        views = tuple(view(argument) for argument in arguments)
        if shared_bytes > DEFAULT_DYNAMIC_SHARED and not simulator():
            _allow_shared(_function(kernel, views).kernel, shared_bytes)
        kernel[blocks, threads, stream or 0, shared_bytes](*views)
        LAUNCHES["numba"] += 1
        if key is not None:
            _remember(kernel, key, views)
        return
    _kernel, layouts, cufunc_kernel = compiled
    if shared_bytes > DEFAULT_DYNAMIC_SHARED:
        _allow_shared(cufunc_kernel, shared_bytes)
    parameters: list = []
    for (how, ctype), value in zip(layouts, arguments):
        if how == _ARRAY:
            parameters += (0, 0, value.size, value.itemsize, value.data.ptr)
            parameters += value.shape
            parameters += value.strides
        elif how == _AS_IS:
            parameters.append(value)
        else:
            parameters.append(ctype(value))
    core_launch, launch_config, default_stream = core
    if stream is not None:
        from numba.cuda.cudadrv.driver import _to_core_stream

        default_stream = _to_core_stream(stream)
    core_launch(default_stream,
                launch_config(grid=blocks, block=threads, shmem_size=shared_bytes),
                cufunc_kernel, *parameters)
    LAUNCHES["fast"] += 1


_MOST_THREADS: dict[tuple, int] = {}


def most_threads(kernel, arguments: tuple) -> int:
    """Most threads a block of ``kernel`` launched with these arguments may have (the
    driver's figure for its overload, compiled here if need be: its registers a thread
    bound it; kept by the arguments' kinds); 1,024 under the simulator."""
    if simulator():
        return 1024
    key = (id(kernel), current_device(), tuple(_kind(argument) for argument in arguments))
    if key not in _MOST_THREADS:
        views = tuple(kernel_view(argument) for argument in arguments)
        _MOST_THREADS[key] = int(_function(kernel, views).attrs.maxthreads)
    return _MOST_THREADS[key]


def _function(kernel, views):
    """The driver's function of ``kernel``'s overload for these arguments (as numba's
    launch takes them), compiled here if need be: its attributes and its ``kernel``."""
    argument_types = tuple(kernel.typeof_pyval(view) for view in views)
    return kernel.compile(argument_types)._codelibrary.get_cufunc()


_ALLOWED: dict[tuple, int] = {}


def _allow_shared(loaded, shared_bytes: int) -> None:
    """Let ``loaded`` (a compiled kernel as ``cuda.core`` holds it) take ``shared_bytes``
    of dynamic shared memory a block, beyond the default 48 KB: the driver's opt-in, once
    per kernel, device and larger size (a launch beyond the size opted in fails)."""
    from numba.cuda.cudadrv.driver import binding, driver

    key = (id(loaded), current_device())
    if _ALLOWED.get(key, 0) >= shared_bytes:
        return
    attribute = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attribute, int(shared_bytes), loaded.handle, key[1])
    _ALLOWED[key] = shared_bytes


def _remember(kernel, key, views) -> None:
    """Keep the overload numba compiled (and launched) for these arguments, with how
    each argument is laid out, where :func:`_layout` takes every one of their types (and
    this numba-cuda exposes what the fast path needs; else numba keeps launching)."""
    try:
        argument_types = tuple(kernel.typeof_pyval(view) for view in views)
        overload = kernel.overloads.get(argument_types)
        layouts = tuple(_layout(argument_type) for argument_type in argument_types)
        if overload is None or getattr(overload, "debug", False) or kernel.extensions \
                or getattr(overload, "cooperative", False) or None in layouts:
            return
        loaded = overload._codelibrary.get_cufunc().kernel
    except (AttributeError, TypeError):
        return
    with _LOCK:
        _COMPILED[key] = (kernel, layouts, loaded)


#: Seconds spent in each kernel, by the name it was launched under, while the
#: ``time_kernels`` setting is on (benchmarks read and clear it).
KERNEL_SECONDS: dict[str, float] = {}


def launch_kernel(name: str, kernel, blocks: int, threads: int, *arguments,
                  stream=None, shared_bytes: int = 0) -> None:
    """Launch a kernel of the engine (:func:`launch`, arguments viewed by
    :func:`~gpualign_df.gpu.device.kernel_view`) on the default stream or on ``stream``,
    with ``shared_bytes`` of dynamic shared memory a block; with the ``time_kernels``
    setting, time it with CUDA events into ``KERNEL_SECONDS[name]`` (waiting for it)."""
    if simulator() or not config.settings().time_kernels:
        launch(kernel, blocks, threads, arguments, kernel_view, stream, shared_bytes)
        return
    start, stop = cuda.event(), cuda.event()
    start.record(stream or 0)
    launch(kernel, blocks, threads, arguments, kernel_view, stream, shared_bytes)
    stop.record(stream or 0)
    stop.synchronize()
    seconds = cuda.event_elapsed_time(start, stop) / 1e3
    KERNEL_SECONDS[name] = KERNEL_SECONDS.get(name, 0.0) + seconds
