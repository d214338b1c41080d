"""The engines' kernels, numba code only: ``njit`` for the CPU (:mod:`.cpu`, :mod:`.cpu_lanes`,
:mod:`.common`), CUDA for the GPU (:mod:`.strip` the cells every fill and search shares,
:mod:`.inter`, :mod:`.inter16`, :mod:`.band` fills, :mod:`.search` score passes and top-k,
:mod:`.traceback` walk and CIGARs, :mod:`.gather`, :mod:`.planning`, :mod:`.dpx`).

Nothing here imports the engines or reads settings: kernel factories take what they are
specialised for as arguments (so a changed setting builds another kernel, never a stale
cached one), and the engines (:mod:`gpualign_df.gpu`) decide.
"""

import functools
import os


@functools.cache
def simulator() -> bool:
    """True when numba runs CUDA kernels in its CPU simulator (``NUMBA_ENABLE_CUDASIM=1``,
    set before numba is imported: numba reads it once, and so does this, on the first
    call)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def inlined(function):
    """``function`` as a CUDA device function that LLVM inlines (``alwaysinline``:
    Numba-IR inlining gives a somewhat faster loop but compiles unrolled kernels two to four
    times slower, which every first call pays); under the simulator, a plain device
    function."""
    from numba import cuda

    if simulator():
        return cuda.jit(device=True)(function)
    return cuda.jit(device=True, forceinline=True)(function)
