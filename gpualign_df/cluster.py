"""Dask cluster helper: one Dask worker per GPU (dask-cuda), or a connection to a scheduler.

Importing this module imports nothing from Dask; :func:`cluster` imports ``distributed``
(and ``dask_cuda``) when called.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from distributed import Client

__all__ = ["cluster"]

_NO_DASK = ("gpualign_df.cluster needs Dask's distributed scheduler: "
            "pip install 'gpualign_df[dask]' (CPU) or 'gpualign_df[gpu]' (dask-cuda)")


#: Environment variable of a worker process: the CPU engine threads each alignment task of
#: the Dask accessor runs on there (at most numba's thread count); unset, numba's count.
TASK_THREADS_VARIABLE = "GPUALIGN_TASK_THREADS"

#: LocalCUDACluster's memory options; when none is given, workers use RMM's asynchronous
#: (``cudaMallocAsync``) allocator.
_RMM_OPTIONS = ("rmm_async", "rmm_pool_size", "rmm_managed_memory")


def _gpu_count(n_gpus: int | str | None) -> int | None:
    """Validated worker count: None for every visible GPU."""
    if n_gpus is None or n_gpus == "all":
        return None
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, 'all' or None, got {n_gpus!r}")
    return n_gpus


def _owns(client: Client) -> Client:
    """Make ``client.close()`` also close the cluster started for it, as Dask does for the
    cluster that ``Client()`` starts by itself."""
    if hasattr(client, "_start_arg"):
        client._start_arg = None
    return client


def cluster(n_gpus: int | str | None = None, *, address: str | None = None, cpu: bool = False,
            keep_replicas: bool = True, trim_host_memory: bool | None = None,
            **kwargs: Any) -> Client:
    """Start (or connect to) a Dask cluster for alignment jobs and return its ``Client``.

    The returned client becomes Dask's default scheduler, so Dask alignment jobs
    (``series.aln.pairwise()``, ``.search()``, ``.rowwise()``) computed afterwards run on
    its workers.

    Parameters
    ----------
    n_gpus : int, "all" or None
        Number of GPUs of this node to use, one worker per GPU (dask-cuda's
        ``LocalCUDACluster``); None or ``"all"`` uses every visible GPU
        (``CUDA_VISIBLE_DEVICES`` is honoured).
    address : str, optional
        Address of a running scheduler (``"tcp://host:8786"``, e.g. one started with
        ``dask scheduler`` and ``dask cuda worker`` on each node): connect to it, start
        nothing.
    cpu : bool
        Start a CPU-only ``distributed.LocalCluster`` instead (no GPU needed). By default
        one worker process per core (Dask's count, ``dask.system.CPU_COUNT``: the cores this
        process may use), each running one task at a time whose CPU engine runs on one
        thread (``GPUALIGN_TASK_THREADS=1`` in the worker processes): every core busy, none
        shared. Processes rather than the threads of one process: the engine's kernels
        release the GIL (``nogil``) but a task's other work (encoding, building and merging
        result frames) is Python holding it, so tasks in one process would take turns; and
        the engine starts its own threads (numba's thread count) in every call, so tasks
        sharing a process would run cores x cores threads. Tasks are sized for one core
        (the default ``cells_per_task``), so a job of fewer tasks than cores leaves cores
        idle: give it a smaller ``cells_per_task``. A broadcast search database is copied
        to each worker process. ``n_workers`` / ``threads_per_worker`` choose another
        layout (Dask's rules fill in the one not given); each task's engine then gets
        ``cores // (n_workers * threads_per_worker)`` threads, at least one (with
        ``processes=False`` the workers are threads of this process, and each task's engine
        uses numba's thread count).
    keep_replicas : bool
        For a cluster started here: do not start Dask's active memory manager, so the
        copies of a database's partitions that a search makes on every worker stay there
        for the next search (its default policy drops every copy no task is waiting for,
        every 2 s: each later search would copy the database again and its first tasks
        wait for it). False keeps Dask's default. A running cluster (``address``) keeps
        its own setting (``client.amm.stop()`` turns it off).
    trim_host_memory : bool, optional
        For a cluster started here: whether its worker processes start with Dask's
        ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``), which
        hands freed host memory back to the OS at once. Setting it also pins glibc's
        threshold for serving an allocation from fresh pages (mmap) at 128 KiB, so every
        large host buffer, e.g. each one a worker fills to send a result partition, is
        new memory, page faults included. None (the default): not on a GPU cluster, whose
        data lives on the GPU and whose host buffers are such transient copies (serializing
        a result then pays those page faults on every send); Dask's default (trimmed) on a
        ``cpu`` cluster, whose data is host memory.
    **kwargs
        Passed to ``LocalCUDACluster``, ``LocalCluster`` or, with ``address``, ``Client``.
        A GPU cluster started here gets ``rmm_async=True`` (RMM's stream-ordered
        ``cudaMallocAsync`` allocator on every worker: a free does not wait for the whole
        device) unless one of ``rmm_async``, ``rmm_pool_size`` or ``rmm_managed_memory`` is
        given. The client of a cluster started here fetches results from the workers
        directly (``direct_to_workers=True``: they share this host), not through the
        scheduler, which would copy every result once more.

    Returns
    -------
    distributed.Client
        Closing it also closes a cluster that this function started.

    Raises
    ------
    RuntimeError
        When no ``address`` is given, ``cpu`` is False and dask-cuda is not installed.
    ValueError
        For ``n_gpus`` together with ``address`` or ``cpu``, or an invalid ``n_gpus``.

    Examples
    --------
    Every GPU of this node, one worker each:

    >>> import gpualign_df
    >>> client = gpualign_df.cluster()                       # doctest: +SKIP
    >>> hits = reads.seq.aln.search(refs.seq, top_k=5).compute()  # doctest: +SKIP

    Two GPUs, an existing cluster, or the CPU:

    >>> client = gpualign_df.cluster(2)                      # doctest: +SKIP
    >>> client = gpualign_df.cluster(address="tcp://10.0.0.1:8786")  # doctest: +SKIP
    >>> with gpualign_df.cluster(cpu=True) as client:        # doctest: +SKIP
    ...     pairs = seqs.aln.pairwise(backend="cpu").compute()
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as error:
        raise RuntimeError(_NO_DASK) from error
    if address is not None:
        if n_gpus is not None or cpu:
            raise ValueError("n_gpus and cpu apply to a cluster started here; with address= "
                             "the running cluster's workers are used as they are")
        return Client(address, **kwargs)
    if cpu:
        if n_gpus is not None:
            raise ValueError("n_gpus does not apply to cpu=True; pass n_workers= instead")
        options = dict(kwargs)
        workers, threads, engine_threads = _cpu_layout(options.get("n_workers"),
                                                       options.get("threads_per_worker"),
                                                       options.get("processes", True))
        options["n_workers"], options["threads_per_worker"] = workers, threads
        if options.get("processes", True):
            # the worker processes' environment (the Nanny's env; pre-spawn variables would
            # also be written into this process's environment), read by every alignment task
            options["env"] = {TASK_THREADS_VARIABLE: str(engine_threads),
                              **(options.get("env") or {})}
        with _cluster_config(keep_replicas, trim_host_memory is not False):
            return _owns(Client(LocalCluster(**options), direct_to_workers=True))
    count = _gpu_count(n_gpus)
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as error:
        raise RuntimeError(
            "dask-cuda is not installed, so no GPU cluster can be started here: install "
            "'gpualign_df[gpu]', connect to a running scheduler with "
            "gpualign_df.cluster(address='tcp://host:8786'), or start a CPU-only "
            "distributed.LocalCluster with gpualign_df.cluster(cpu=True)") from error
    options = dict(kwargs)
    if count is not None:
        options.setdefault("n_workers", count)
    if not any(name in options for name in _RMM_OPTIONS):
        # stream-ordered allocations: no device-wide synchronisation on every free
        options["rmm_async"] = True
    with _cluster_config(keep_replicas, trim_host_memory is True):
        return _owns(Client(LocalCUDACluster(**options), direct_to_workers=True))


def _cpu_layout(n_workers: int | None, threads_per_worker: int | None,
                processes: bool = True) -> tuple[int, int, int]:
    """(worker processes, threads per worker, engine threads per task) of a CPU cluster: one
    single-threaded worker per core unless given; a missing one of the two as Dask's
    ``LocalCluster`` fills it in; the cores shared out among the tasks that run at once."""
    from dask.system import CPU_COUNT

    if n_workers is None and threads_per_worker is None:
        n_workers, threads_per_worker = CPU_COUNT, 1
    elif n_workers is None:
        n_workers = max(1, CPU_COUNT // threads_per_worker) if processes else 1
    elif threads_per_worker is None:
        threads_per_worker = max(1, math.ceil(CPU_COUNT / n_workers)) if n_workers else 1
    return n_workers, threads_per_worker, max(1, CPU_COUNT // max(1, n_workers *
                                                                 threads_per_worker))


def _cluster_config(keep_replicas: bool, trim_host_memory: bool):
    """Dask configuration for a cluster started in this block: no active memory manager
    where replicas are kept, and no ``MALLOC_TRIM_THRESHOLD_`` in the workers' environment
    where host memory is not trimmed; Dask's own settings otherwise."""
    import dask

    settings: dict[str, Any] = {}
    if keep_replicas:
        settings["distributed.scheduler.active-memory-manager.start"] = False
    if not trim_host_memory:
        settings["distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"] = None
    return dask.config.set(settings) if settings else contextlib.nullcontext()
