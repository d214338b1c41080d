"""Hopper DPX integer min/max instructions for the cell recurrences, with a plain fallback.

On sm_90 and newer, ``__viaddmax_s32`` (max(a + b, c)) and ``__vimax3_s32`` /
``__vimax3_s32_relu`` (max of three, and of three and zero) come from linked CUDA C through
``cuda.declare_device``; they compile to VIADDMNMX / VIMNMX3. With traceback the fill
kernels take values and their traceback bits together from ``__vibmax_s32`` (max of two and
the predicate ``a >= b``), packed value-high / bits-low in an int64 that the inlined code
never builds. Elsewhere, and under the CUDA simulator, plain device functions (and the fill
kernels' inline compares) give identical results.
"""

from __future__ import annotations

import os
from functools import lru_cache

from numba import cuda, int32, int64

SOURCE = r"""
extern "C" __device__ int gpualign_add_max(int a, int b, int c) { return __viaddmax_s32(a, b, c); }
extern "C" __device__ int gpualign_max3(int a, int b, int c) { return __vimax3_s32(a, b, c); }
extern "C" __device__ int gpualign_max3_zero(int a, int b, int c) { return __vimax3_s32_relu(a, b, c); }
extern "C" __device__ int gpualign_add2(int a, int b) { return (int)__vadd2((unsigned)a, (unsigned)b); }
extern "C" __device__ int gpualign_max2(int a, int b) { return (int)__vmaxs2((unsigned)a, (unsigned)b); }
extern "C" __device__ int gpualign_add_max2(int a, int b, int c) {
  return (int)__viaddmax_s16x2((unsigned)a, (unsigned)b, (unsigned)c); }
extern "C" __device__ int gpualign_max3_zero2(int a, int b, int c) {
  return (int)__vimax3_s16x2_relu((unsigned)a, (unsigned)b, (unsigned)c); }
/* With traceback: the value in the high word, its traceback bits in the low word (inlined,
   the packing costs nothing). __vibmax_s32(a, b, &p) is max(a, b) with p = (a >= b). */
extern "C" __device__ long long gpualign_gap_tb(int a, int b, int c) {
  bool open_wins;
  int value = __vibmax_s32(a + b, c, &open_wins);
  return ((long long)value << 32) | (open_wins ? 0 : 1); }
extern "C" __device__ long long gpualign_source_tb(int match, int ins, int del) {
  bool diagonal_wins, first_wins;
  int first = __vibmax_s32(match, ins, &diagonal_wins);
  int value = __vibmax_s32(first, del, &first_wins);
  return ((long long)value << 32) | (first_wins ? (diagonal_wins ? 1 : 2) : 3); }
extern "C" __device__ long long gpualign_keep_best(int best, int h) {
  bool kept;
  int value = __vibmax_s32(best, h, &kept);
  return ((long long)value << 32) | (kept ? 0 : 1); }
"""


def _device_function(function):
    """``function`` as an inlined device function; under the CUDA simulator the Python
    function itself: the simulator takes a lock per module on every device-function call,
    and its threads (one per CUDA thread) convoy on that lock, intermittently for minutes,
    in the packed kernels that call these per cell."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return function
    return cuda.jit(device=True, inline=True)(function)


@_device_function
def add_max_plain(a, b, c):
    return max(a + b, c)


@_device_function
def max3_plain(a, b, c):
    return max(max(a, b), c)


@_device_function
def max3_zero_plain(a, b, c):
    return max(max(max(a, b), c), 0)


# Two signed 16-bit lanes in one int32 (low half, high half), for the packed kernels: the
# plain forms work half by half (wrapping adds, as __vadd2 does).


@_device_function
def low_half(x):
    return int32(((x & 0xFFFF) ^ 0x8000) - 0x8000)


@_device_function
def high_half(x):
    return int32(x >> 16)


@_device_function
def pack_halves(low, high):
    """Two values (wrapped to 16 bits) into the low and high halves of an int32."""
    high16 = ((high & 0xFFFF) ^ 0x8000) - 0x8000
    return int32((high16 << 16) | (low & 0xFFFF))


@_device_function
def add2_plain(a, b):
    return pack_halves(low_half(a) + low_half(b), high_half(a) + high_half(b))


@_device_function
def max2_plain(a, b):
    return pack_halves(max(low_half(a), low_half(b)), max(high_half(a), high_half(b)))


@_device_function
def add_max2_plain(a, b, c):
    return pack_halves(max(low_half(a) + low_half(b), low_half(c)),
                       max(high_half(a) + high_half(b), high_half(c)))


@_device_function
def max3_zero2_plain(a, b, c):
    return pack_halves(max(max(max(low_half(a), low_half(b)), low_half(c)), 0),
                       max(max(max(high_half(a), high_half(b)), high_half(c)), 0))


def available() -> bool:
    """DPX is used on a real GPU of compute capability 9.0 or newer, unless
    ``GPUALIGN_DPX=0``."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("GPUALIGN_DPX") == "0":
        return False
    try:
        return tuple(cuda.get_current_device().compute_capability) >= (9, 0)
    except Exception:  # noqa: BLE001 - no device: no DPX
        return False


@lru_cache(maxsize=None)
def _linked_source():
    """The one CUDA C source object every DPX function links (each distinct object would be
    linked again: its symbols defined twice)."""
    return cuda.CUSource(SOURCE)


@lru_cache(maxsize=None)
def functions(use_dpx: bool):
    """(add_max, max3, max3_zero) device functions: DPX-linked or plain."""
    if not use_dpx:
        return add_max_plain, max3_plain, max3_zero_plain
    source = _linked_source()
    signature = "int32(int32, int32, int32)"
    return (cuda.declare_device("gpualign_add_max", signature, link=source, abi="c"),
            cuda.declare_device("gpualign_max3", signature, link=source, abi="c"),
            cuda.declare_device("gpualign_max3_zero", signature, link=source, abi="c"))


@_device_function
def gap_tb_plain(a, b, c):
    return (int64(max(a + b, c)) << 32) | int64(1 if c > a + b else 0)


@_device_function
def source_tb_plain(match, ins, dele):
    source = 1
    if ins > match:
        source = 2
    if dele > max(match, ins):
        source = 3
    return (int64(max(max(match, ins), dele)) << 32) | int64(source)


@_device_function
def keep_best_plain(best, h):
    return (int64(max(best, h)) << 32) | int64(1 if h > best else 0)


@lru_cache(maxsize=None)
def keep_best(use_dpx: bool):
    """max(best, h) with a replacement bit (1 where h > best strictly), packed value-high /
    bits-low in an int64: DPX-linked (``__vibmax_s32``) or plain."""
    if not use_dpx:
        return keep_best_plain
    return cuda.declare_device("gpualign_keep_best", "int64(int32, int32)",
                               link=_linked_source(), abi="c")


@lru_cache(maxsize=None)
def functions_tb(use_dpx: bool):
    """(gap_tb, source_tb): a gap value with its extension bit (max(a + b, c); 1 where c
    wins strictly), and H = max of (diagonal, I, D) with its source (1, 2, 3; ties in that
    order), each packed value-high / bits-low in an int64; DPX-linked (``__vibmax_s32``) or
    plain. The fill kernels take the linked pair; their plain form (simulator, older GPUs)
    computes the same bits inline."""
    if not use_dpx:
        return gap_tb_plain, source_tb_plain
    source = _linked_source()
    signature = "int64(int32, int32, int32)"
    return (cuda.declare_device("gpualign_gap_tb", signature, link=source, abi="c"),
            cuda.declare_device("gpualign_source_tb", signature, link=source, abi="c"))


@lru_cache(maxsize=None)
def functions16(use_dpx: bool):
    """(add2, max2, add_max2, max3_zero2) on two 16-bit lanes packed in an int32: linked
    ``__vadd2``/``__vmaxs2``/``__viaddmax_s16x2``/``__vimax3_s16x2_relu``, or plain."""
    if not use_dpx:
        return add2_plain, max2_plain, add_max2_plain, max3_zero2_plain
    source = _linked_source()
    two, three = "int32(int32, int32)", "int32(int32, int32, int32)"
    return (cuda.declare_device("gpualign_add2", two, link=source, abi="c"),
            cuda.declare_device("gpualign_max2", two, link=source, abi="c"),
            cuda.declare_device("gpualign_add_max2", three, link=source, abi="c"),
            cuda.declare_device("gpualign_max3_zero2", three, link=source, abi="c"))
