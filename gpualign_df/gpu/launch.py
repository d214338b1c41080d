"""Kernel launches with little host work, and the engine's launch of a kernel by name.

numba's launch path turns every CuPy argument into a numba device array (a CUDA context
check, a memory-pointer object, a type lookup) before it marshals it: tens of microseconds
per array argument, a millisecond for a kernel of a few dozen arguments, all of it host
time during which the GPU waits at the start of a job. Here the first launch of a kernel
for a given kind of arguments goes through numba (which compiles it); later ones reuse the
compiled kernel and lay out the arguments the way numba's ``_Kernel._prepare_args`` does,
straight from the CuPy arrays' pointers, shapes and strides, into an 8-byte slot a
parameter of a buffer kept per kernel, and launch it with the driver's ``cuLaunchKernel``
given a pointer to each slot (the driver copies each parameter's own size from it: the low
bytes of a little-endian slot). That is one pass over the arguments, which gives both the
key of the compiled kernel and the slots' values, one ``struct`` packing of them and one
driver call; ``cuda.core``'s launch, which converts every parameter by its Python type,
costs several times more for a kernel of a few dozen array arguments. A launch of buffers
kept between jobs (``kept``) with the very arguments of the kernel's last such launch (the
same array objects, equal scalars) finds its slots filled already: one comparison a
parameter and the driver call. Only such launches keep their arguments (a job's own
buffers must be freed when it ends).

Wherever that is not possible (the CUDA simulator, a numba-cuda without these driver
bindings, an argument of another kind, the ``fast_launch`` setting off) the launch goes
through numba.
"""

from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np
from numba import cuda

from .. import config
from ..kernels import simulator
from .device import current_device, kernel_view

_COMPILED: dict[tuple, "_Launcher"] = {}
#: The launcher of each kernel's last fast launch of kept buffers, by (kernel id, device).
_RECENT: dict[tuple, "_Launcher"] = {}
_LOCK = threading.Lock()
_DRIVER: tuple | None = None


def _driver():
    """``(cuLaunchKernel, CUDA_SUCCESS)`` of the driver bindings numba-cuda uses, or None
    where this numba-cuda has none."""
    global _DRIVER
    if _DRIVER is None:
        try:
            from numba.cuda.cudadrv.driver import binding

            _DRIVER = (binding.cuLaunchKernel, binding.CUresult.CUDA_SUCCESS)
        except (ImportError, AttributeError):
            _DRIVER = ()
    return _DRIVER or None


class _Launcher:
    """A compiled kernel and the parameter slots its launches fill: ``slots`` (int64, one
    a parameter, written by ``packer`` from :func:`_marshal`'s values) and ``address``,
    that of the array of pointers to them which ``cuLaunchKernel`` reads (``lock``: one
    launch at a time fills them; the driver has copied them when it returns);
    ``arguments``: those the slots hold (kept, so that no other object can take their
    ids), None before the first fast launch."""

    __slots__ = ("kernel", "loaded", "slots", "packer", "pointers", "address", "lock",
                 "arguments")

    def __init__(self, kernel, loaded, parameters: int) -> None:
        self.kernel, self.loaded = kernel, loaded
        self.slots = np.zeros(max(parameters, 1), np.int64)
        self.packer = struct.Struct(f"<{parameters}q")  # the slots' bytes from their values
        base = self.slots.ctypes.data
        self.pointers = (ctypes.c_void_p * len(self.slots))(
            *(base + 8 * place for place in range(len(self.slots))))
        self.address = ctypes.addressof(self.pointers)
        self.lock = threading.Lock()
        self.arguments: tuple | None = None


_SCALAR_TYPES = (bool, int, float, np.integer, np.floating, np.bool_)


def _same_arguments(arguments: tuple, last: tuple | None) -> bool:
    """Whether ``arguments`` fill a kernel's slots as ``last`` did: the same objects where
    they are arrays (a CuPy array's pointer, shape and strides never change), scalars of
    the same type and value."""
    if last is None or len(arguments) != len(last):
        return False
    for new, old in zip(arguments, last):
        if new is not old and not (type(new) is type(old)
                                   and isinstance(new, _SCALAR_TYPES) and new == old):
            return False
    return True


def forget_arguments() -> None:
    """Drop the arguments the launchers keep (the buffers of the last launches), so that
    they can be freed."""
    with _LOCK:
        launchers = list(_RECENT.values())
        _RECENT.clear()
    for launcher in launchers:
        with launcher.lock:
            launcher.arguments = None


def _array_kind(argument):
    """What the compiled kernel depends on for a CuPy array: dtype, dimensions, layout
    (numba types a C-contiguous array 'C', else F-contiguous 'F', else 'A'). The
    contiguity is read from the array's own fields where CuPy has them (its ``flags``
    makes an object a call)."""
    try:
        c_contiguous, f_contiguous = argument._c_contiguous, argument._f_contiguous
    except AttributeError:
        flags = argument.flags
        c_contiguous, f_contiguous = flags.c_contiguous, flags.f_contiguous
    layout = "C" if c_contiguous else "F" if f_contiguous else "A"
    return argument.dtype, argument.ndim, layout


_SCALARS = (bool, int, float)
#: Whether each type of argument met so far is a CuPy array (decided once a type).
_ARRAY_TYPES: dict[type, bool] = {}


def _kind(argument):
    """A hashable description of an argument's type, None where the fast path does not
    take it (anything but CuPy arrays and Python or numpy scalars)."""
    kind = type(argument)
    if kind in _SCALARS:
        return kind
    is_array = _ARRAY_TYPES.get(kind)
    if is_array is None:
        is_array = kind.__module__.startswith("cupy") and (
            kind.__name__ == "ndarray" or (hasattr(argument, "data")
                                           and hasattr(argument, "flags")))
        _ARRAY_TYPES[kind] = is_array
    if is_array:
        return _array_kind(argument)
    if isinstance(argument, (np.integer, np.floating, np.bool_)):
        return kind
    return None


def _marshal(arguments: tuple) -> tuple[tuple | None, list]:
    """Each argument's :func:`_kind` and the int64 values of its parameter slots, in one
    pass (the fast path's host time is this loop): an array's ``0, 0, size, itemsize,
    pointer, *shape, *strides``, a scalar's :func:`_slot_value` as
    :func:`_scalar_layout` lays it out. ``(None, [])`` where an argument is of a kind the
    fast path does not take. What the compiled kernel takes is checked once, when its
    launcher is made (:func:`_remember`)."""
    kinds: list = []
    values: list[int] = []
    for argument in arguments:
        kind = type(argument)
        if kind is int or kind is bool:
            kinds.append(kind)
            values.append(int(argument))
            continue
        is_array = _ARRAY_TYPES.get(kind)
        if is_array is None:  # (decided and recorded by _kind, once a type)
            _kind(argument)
            is_array = _ARRAY_TYPES.get(kind, False)
        if is_array:
            kinds.append(_array_kind(argument))
            values += (0, 0, argument.size, argument.itemsize, argument.data.ptr)
            values += argument.shape
            values += argument.strides
            continue
        how = _scalar_layout(kind)
        if how is None:
            return None, []
        kinds.append(kind)
        values.append(_slot_value(how, argument))
    return tuple(kinds), values


def _scalar_layout(kind: type) -> int | None:
    """How :func:`_marshal` lays out a scalar of this Python or numpy type: what
    :func:`_layout` gives for the numba type numba makes of it (a Python int is an int64,
    a float a float64), None for a type the fast path does not take."""
    if kind in (int, bool, np.bool_):
        return _INTEGER
    if kind is float or kind is np.float64:
        return _FLOAT
    if issubclass(kind, np.integer):
        return _UNSIGNED if kind is np.uint64 else _INTEGER
    return None


#: How :func:`launch` fills an argument's slots (see :func:`_layout`).
_ARRAY, _INTEGER, _UNSIGNED, _FLOAT = 0, 1, 2, 3


def _layout(argument_type) -> tuple[int, int] | None:
    """How numba's ``_Kernel._prepare_args`` passes an argument of this numba type, as
    ``(how, parameters)``: an array as ``5 + 2 * ndim`` parameters (meminfo, parent, size,
    itemsize, pointer, shape, strides), a boolean or integer as one (``_UNSIGNED``: an
    unsigned 64-bit one, whose slot takes its bits), a float64 as one; None for a type
    the fast path does not take."""
    from numba.cuda import types

    if isinstance(argument_type, types.Array):
        return _ARRAY, 5 + 2 * argument_type.ndim
    if isinstance(argument_type, types.Boolean):
        return _INTEGER, 1
    if isinstance(argument_type, types.Integer):
        unsigned = not argument_type.signed and argument_type.bitwidth == 64
        return (_UNSIGNED if unsigned else _INTEGER), 1
    if argument_type == types.float64:
        return _FLOAT, 1
    return None


def _slot_value(how: int, value) -> int:
    """The int64 whose bytes a scalar's slot holds."""
    if how == _FLOAT:
        return int(np.float64(value).view(np.int64))
    value = int(value)
    return value - (1 << 64) if how == _UNSIGNED and value >= 1 << 63 else value


def _dimensions(count) -> tuple[int, int, int]:
    """A grid's or block's size as numba takes it (an int or up to three) as three."""
    if isinstance(count, tuple):
        return tuple(int(size) for size in count) + (1,) * (3 - len(count))
    return int(count), 1, 1


def _stream_handle(stream) -> int:
    """The driver's handle of a numba stream (0, the default stream, for None)."""
    if not stream:
        return 0
    handle = stream.handle
    return int(getattr(handle, "value", handle) or 0)


#: Launches so far by path (``fast``: marshalled here; ``again``: on the slots of the
#: kernel's last launch of kept buffers, the same arguments; ``numba``: through numba's
#: own).
LAUNCHES = {"fast": 0, "again": 0, "numba": 0}


#: Bytes of dynamic shared memory a block may have without the kernel opting in.
DEFAULT_DYNAMIC_SHARED = 48 * 1024


def launch(kernel, blocks: int, threads: int, arguments: tuple, view, stream=None,
           shared_bytes: int = 0, kept: bool = False) -> None:
    """Launch ``kernel[blocks, threads](*arguments)`` on the default stream, or on
    ``stream`` (a numba stream), with ``shared_bytes`` of dynamic shared memory a block;
    ``view`` turns an argument into what numba's own path takes (first launches,
    fallbacks); ``kept``: the array arguments are buffers kept between jobs, which the
    launcher may keep too (see the module's note)."""
    driver = None if simulator() or not config.settings().fast_launch else _driver()
    key = None
    if driver is not None and kept:
        recent = _RECENT.get((id(kernel), current_device()))
        if recent is not None and recent.kernel is kernel and \
                _launch_again(recent, arguments, driver, blocks, threads, stream,
                              shared_bytes):
            return
    values: list[int] = []
    if driver is not None:
        kinds, values = _marshal(arguments)
        if kinds is not None:  # a kernel is loaded per device (context)
            key = (id(kernel), current_device(), kinds)
    launcher = _COMPILED.get(key) if key is not None else None
    if launcher is None or launcher.kernel is not kernel:
        views = tuple(view(argument) for argument in arguments)
        if shared_bytes > DEFAULT_DYNAMIC_SHARED and not simulator():
            _allow_shared(_function(kernel, views).kernel, shared_bytes)
        kernel[blocks, threads, stream or 0, shared_bytes](*views)
        LAUNCHES["numba"] += 1
        if key is not None:
            _remember(kernel, key, views)
        return
    if shared_bytes > DEFAULT_DYNAMIC_SHARED:
        _allow_shared(launcher.loaded, shared_bytes)
    cu_launch_kernel, success = driver
    error = None
    with launcher.lock:
        launcher.arguments = None
        try:
            launcher.packer.pack_into(launcher.slots, 0, *values)
        except struct.error:  # a scalar beyond int64: numba's launch says what is wrong
            pass
        else:
            error, = cu_launch_kernel(launcher.loaded.handle, *_dimensions(blocks),
                                      *_dimensions(threads), shared_bytes,
                                      _stream_handle(stream), launcher.address, 0)
        if error == success and kept:
            launcher.arguments = arguments
    if error == success:
        if kept:
            _RECENT[key[:2]] = launcher
        LAUNCHES["fast"] += 1
        return
    # (no current context on this thread, say): numba's launch, which makes its context
    # current, and raises its own error where the launch itself fails
    kernel[blocks, threads, stream or 0, shared_bytes](*(view(argument) for argument in arguments))
    LAUNCHES["numba"] += 1


def _launch_again(launcher: _Launcher, arguments: tuple, driver, blocks, threads, stream,
                  shared_bytes: int) -> bool:
    """Launch ``launcher``'s kernel on slots filled already, where ``arguments`` are
    those they hold (:func:`_same_arguments`) and the kernel needs no more shared memory
    than it was allowed; whether it did."""
    if shared_bytes > DEFAULT_DYNAMIC_SHARED:
        return False
    cu_launch_kernel, success = driver
    with launcher.lock:
        if not _same_arguments(arguments, launcher.arguments):
            return False
        error, = cu_launch_kernel(launcher.loaded.handle, *_dimensions(blocks),
                                  *_dimensions(threads), shared_bytes, _stream_handle(stream),
                                  launcher.address, 0)
    if error != success:
        return False
    LAUNCHES["again"] += 1
    return True


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
        # the slots :func:`_marshal` fills must be those this overload takes
        if any(how != (_ARRAY if isinstance(kind, tuple) else _scalar_layout(kind))
               for (how, _count), kind in zip(layouts, key[2])):
            return
        loaded = overload._codelibrary.get_cufunc().kernel
    except (AttributeError, TypeError):
        return
    launcher = _Launcher(kernel, loaded, sum(count for _how, count in layouts))
    with _LOCK:
        _COMPILED[key] = launcher


#: Seconds spent in each kernel, by the name it was launched under, while the
#: ``time_kernels`` setting is on (benchmarks read and clear it).
KERNEL_SECONDS: dict[str, float] = {}


def launch_kernel(name: str, kernel, blocks: int, threads: int, *arguments,
                  stream=None, shared_bytes: int = 0, kept: bool = False) -> None:
    """Launch a kernel of the engine (:func:`launch`, arguments viewed by
    :func:`~gpualign_df.gpu.device.kernel_view`) on the default stream or on ``stream``,
    with ``shared_bytes`` of dynamic shared memory a block (``kept``: as :func:`launch`
    takes it); with the ``time_kernels`` setting, time it with CUDA events into
    ``KERNEL_SECONDS[name]`` (waiting for it)."""
    if simulator() or not config.settings().time_kernels:
        launch(kernel, blocks, threads, arguments, kernel_view, stream, shared_bytes, kept)
        return
    start, stop = cuda.event(), cuda.event()
    start.record(stream or 0)
    launch(kernel, blocks, threads, arguments, kernel_view, stream, shared_bytes, kept)
    stop.record(stream or 0)
    stop.synchronize()
    seconds = cuda.event_elapsed_time(start, stop) / 1e3
    KERNEL_SECONDS[name] = KERNEL_SECONDS.get(name, 0.0) + seconds
