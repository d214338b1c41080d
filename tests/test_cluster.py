"""gpualign_df.cluster: the CPU cluster's layout (every core once), its options, its errors;
the GPU cluster is tested on a GPU (tests/test_dask_gpu.py)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import gpualign_df  # noqa: E402
from gpualign_df.cluster import TASK_THREADS_VARIABLE  # noqa: E402

pytestmark = pytest.mark.dask

DNA_OPTIONS = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, backend="cpu")


def engine_threads_in_a_task(client: distributed.Client) -> set:
    """The CPU engine's thread count inside an alignment task on each worker (align replaced
    by a probe that reports numba's thread count of its thread, which the engine uses)."""

    def probe() -> int:
        import numba

        from gpualign_df import api
        from gpualign_df.dask.tasks import task_align

        original = api.align
        api.align = lambda *args, **kwargs: numba.get_num_threads()
        try:
            return task_align()
        finally:
            api.align = original

    workers = list(client.nthreads())
    return set(client.gather([client.submit(probe, workers=[w], pure=False)
                              for w in workers]))


def worker_environment(client: distributed.Client, name: str) -> set:
    """Environment variable ``name`` in each worker process: read there (``os.environ.get``
    itself would be pickled with this process's whole environment, and read that)."""

    def read(name: str) -> str | None:
        import os

        return os.environ.get(name)

    return set(client.run(read, name).values())


def numba_threads() -> int:
    """numba's most threads in a process (its NUMBA_NUM_THREADS)."""
    import numba

    return numba.config.NUMBA_NUM_THREADS


def test_cpu_cluster_uses_every_core_once():
    """One single-threaded worker process per core, each task's engine on one thread: the
    cores Dask counts (os.cpu_count() within this process's affinity and quota), each
    running one task, none shared; a job on it equals the in-memory result."""
    cores = dask.system.CPU_COUNT
    client = gpualign_df.cluster(cpu=True, dashboard_address=":0")
    try:
        nthreads = client.nthreads()
        assert len(nthreads) == cores and set(nthreads.values()) == {1}
        assert sum(nthreads.values()) == cores
        assert worker_environment(client, TASK_THREADS_VARIABLE) == {"1"}
        assert engine_threads_in_a_task(client) == {1}
        assert TASK_THREADS_VARIABLE not in os.environ     # this process is left alone
        seqs = pd.Series(["ACGTTGCA", "ACGTAGCA", None, "", "TTGA", "ACGTAG"],
                         index=["f", "a", "e", "b", "d", "c"])
        lazy = dd.from_pandas(seqs, npartitions=3, sort=False)
        got = lazy.aln.pairwise(**DNA_OPTIONS, cells_per_task=10).compute()
        pd.testing.assert_frame_equal(got.reset_index(drop=True),
                                      lazy.compute().aln.pairwise(**DNA_OPTIONS))
    finally:
        client.close()


def test_cpu_cluster_layout_given_shares_the_cores_among_tasks():
    """A layout of one's own: each task's engine gets cores // (workers x threads)."""
    cores = dask.system.CPU_COUNT
    client = gpualign_df.cluster(cpu=True, n_workers=1, threads_per_worker=1,
                                 dashboard_address=":0")
    try:
        assert list(client.nthreads().values()) == [1]
        assert engine_threads_in_a_task(client) == {min(cores, numba_threads())}
    finally:
        client.close()


def test_cluster_helper_cpu_and_errors():
    with pytest.raises(ValueError):
        gpualign_df.cluster(2, address="tcp://127.0.0.1:1")
    with pytest.raises(ValueError):
        gpualign_df.cluster(0)
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="address="):
            gpualign_df.cluster()
    client = gpualign_df.cluster(cpu=True, processes=False, dashboard_address=":0")
    try:
        assert isinstance(client, distributed.Client)
        assert client.direct_to_workers   # results come from the workers, not via the scheduler
        nthreads = client.nthreads()      # in-process workers: also one per core
        assert len(nthreads) == dask.system.CPU_COUNT and set(nthreads.values()) == {1}
        lazy = dd.from_pandas(pd.Series(["ACGT", "ACGA", "TCGA"]), npartitions=2, sort=False)
        assert len(lazy.aln.pairwise(**DNA_OPTIONS).compute()) == 3
        cluster = client.cluster
    finally:
        client.close()
    assert cluster.status.name == "closed"


@pytest.mark.parametrize("keep_replicas", [True, False])
def test_cluster_helper_keeps_replicas(keep_replicas):
    """A partition copied to a second worker (as a search copies the database to every
    worker) stays there on a cluster started with keep_replicas (the default); with
    keep_replicas=False, Dask's active memory manager drops the extra copy."""
    import time

    with dask.config.set({"distributed.scheduler.active-memory-manager.interval": "50ms"}):
        client = gpualign_df.cluster(cpu=True, processes=False, n_workers=2,
                                     dashboard_address=":0", keep_replicas=keep_replicas)
    try:
        first, second = sorted(client.scheduler_info()["workers"])
        held = client.submit(lambda: list(range(1000)), workers=[first], pure=False)
        client.submit(len, held, workers=[second], pure=False).result()
        assert client.amm.running() is not keep_replicas
        # ten cycles of the memory manager would have dropped a kept copy
        deadline = time.monotonic() + (0.5 if keep_replicas else 5)
        while len(client.who_has(held)[held.key]) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(client.who_has(held)[held.key]) == (2 if keep_replicas else 1)
    finally:
        client.close()


@pytest.mark.parametrize("trim_host_memory", [None, True, False])
def test_cluster_helper_sets_the_workers_host_memory_trimming(trim_host_memory, monkeypatch):
    """A CPU cluster's worker processes start with Dask's MALLOC_TRIM_THRESHOLD_ unless
    trim_host_memory=False (a GPU cluster's default: tested on the GPU)."""
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    client = gpualign_df.cluster(cpu=True, processes=True, dashboard_address=":0",
                                 trim_host_memory=trim_host_memory)
    try:
        values = worker_environment(client, "MALLOC_TRIM_THRESHOLD_")
        assert values == ({None} if trim_host_memory is False else {"65536"})
    finally:
        client.close()
