"""Hopper DPX integer min/max instructions for the cell recurrences, with a plain fallback.

On sm_90 and newer, ``__viaddmax_s32`` (max(a + b, c)) and ``__vimax3_s32`` /
``__vimax3_s32_relu`` (max of three, and of three and zero) come from linked CUDA C through
``cuda.declare_device``; they compile to VIADDMNMX / VIMNMX3. Elsewhere, and under the
CUDA simulator, the same functions are plain device functions. The results are identical.
"""

from __future__ import annotations

import os
from functools import lru_cache

from numba import cuda

SOURCE = r"""
extern "C" __device__ int gpualign_add_max(int a, int b, int c) { return __viaddmax_s32(a, b, c); }
extern "C" __device__ int gpualign_max3(int a, int b, int c) { return __vimax3_s32(a, b, c); }
extern "C" __device__ int gpualign_max3_zero(int a, int b, int c) { return __vimax3_s32_relu(a, b, c); }
"""


@cuda.jit(device=True, inline=True)
def add_max_plain(a, b, c):
    return max(a + b, c)


@cuda.jit(device=True, inline=True)
def max3_plain(a, b, c):
    return max(max(a, b), c)


@cuda.jit(device=True, inline=True)
def max3_zero_plain(a, b, c):
    return max(max(max(a, b), c), 0)


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
def functions(use_dpx: bool):
    """(add_max, max3, max3_zero) device functions: DPX-linked or plain."""
    if not use_dpx:
        return add_max_plain, max3_plain, max3_zero_plain
    source = cuda.CUSource(SOURCE)
    signature = "int32(int32, int32, int32)"
    return (cuda.declare_device("gpualign_add_max", signature, link=source, abi="c"),
            cuda.declare_device("gpualign_max3", signature, link=source, abi="c"),
            cuda.declare_device("gpualign_max3_zero", signature, link=source, abi="c"))
