"""The engines' kernels: numba ``njit`` for the CPU, numba CUDA for the GPU."""

import os


def simulator() -> bool:
    """True when numba runs CUDA kernels in its CPU simulator (``NUMBA_ENABLE_CUDASIM=1``,
    set before numba is imported)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
