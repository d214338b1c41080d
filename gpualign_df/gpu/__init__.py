"""The GPU engine, host side: finds the device, plans batches, moves buffers, launches the
kernels of :mod:`gpualign_df.kernels`.

Modules, lowest first (each imports only those above it):

* :mod:`~gpualign_df.gpu.device`: whether a GPU is usable, the current device, where
  arrays live, kernel argument views and grid sizes;
* :mod:`~gpualign_df.gpu.launch`: kernel launches with little host work, timed by name
  when the ``time_kernels`` setting is on (:data:`KERNEL_SECONDS`);
* :mod:`~gpualign_df.gpu.streams`: the side stream for long kernels, polled waits, the
  control block of a long-pair fill;
* :mod:`~gpualign_df.gpu.memory`: which allocator the engine's CuPy arrays come from;
* :mod:`~gpualign_df.gpu.buffers`: scratch buffers and tables kept between jobs, sequences
  on the device, the one-job-at-a-time lock;
* :mod:`~gpualign_df.gpu.policy`: where packed 16-bit cells and keyed bests are exact;
* :mod:`~gpualign_df.gpu.long`: the band kernel's launches for long pairs, and the
  linear-space traceback of a pair whose traceback does not fit;
* :mod:`~gpualign_df.gpu.plan`: length sort, warps, batches within the free memory;
* :mod:`~gpualign_df.gpu.small`: a small batch in one launch, a block a pair;
* :mod:`~gpualign_df.gpu.batches`: a job's pairs through gather, fill, walk and CIGAR
  kernels into result columns in row order;
* :mod:`~gpualign_df.gpu.search`: every query against a database, top-k on the device.

Tuning switches are :class:`gpualign_df.config.Settings` fields, read once per job in the
calling thread. Importing this package imports numba (not CuPy, which is imported on first
use): the engines import it on a job's first GPU work, not with :mod:`gpualign_df`.
"""

from __future__ import annotations

from numba import cuda  # noqa: F401  (benchmarks read the device name through it)

from ..kernels import simulator  # noqa: F401
from ..libraries import loaded
from .batches import (RESULT_COLUMNS, DeviceJob, DeviceResults, align_on_device,  # noqa: F401
                      cigar_bound, run_pairs_gpu, to_host)
from .buffers import (SCRATCH, TABLES, DEVICE_LOCK, DeviceSequences,  # noqa: F401
                      buffer_views, device_table, forget_buffers, free_bytes, row_numbers,
                      scratch_buffer, upload)
from .device import (THREADS_PER_BLOCK, array_module, cupy_installed,  # noqa: F401
                     current_device, gpu_usable, kernel_view)
from .launch import KERNEL_SECONDS, LAUNCHES, launch_kernel  # noqa: F401
from .memory import engine_allocations  # noqa: F401
from .plan import Batch, plan_batches, to_numpy  # noqa: F401
from .policy import fill_fits_16bit, keyed_best_fits, use_search_16bit  # noqa: F401
from .search import search_top_k  # noqa: F401
from .streams import FillControl, SideStream  # noqa: F401


def release_scratch() -> None:
    """Free the cached device buffers and pinned upload buffers (they are reused across
    calls otherwise) and the blocks CuPy's pools keep for the engine's temporaries and
    for host codes in pinned memory (:func:`~gpualign_df.gpu.buffers.codes_buffer`).

    Safe to call anywhere: on a CPU install (no CuPy, no GPU) and under the CUDA simulator
    it only drops the cached buffers. CuPy's pool is emptied only where CuPy has been
    imported (the engine imports it to allocate, so a process that never did holds no
    block of ours; importing it here would cost seconds) and a GPU is usable.

    Examples
    --------
    >>> from gpualign_df import gpu
    >>> gpu.release_scratch()      # on a CPU-only machine too
    """
    forget_buffers()
    if simulator() or not loaded("cupy") or not gpu_usable():
        return
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
