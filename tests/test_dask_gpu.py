"""Dask on the GPU: dask-cuDF Series through the Dask accessor, on a dask-cuda cluster,
equal the in-memory cuDF accessor. Run on the accelerator with ``-m cudf`` (1 GPU) or
``-m multigpu`` (several)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

import gpualign_df
from helpers import read_fasta, shared_file

cudf = pytest.importorskip("cudf")
dask_cudf = pytest.importorskip("dask_cudf")
pytestmark = pytest.mark.cudf

OPTIONS = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1)


def plain(frame) -> pd.DataFrame:
    frame = frame.to_pandas(nullable=True).reset_index(drop=True)
    return pd.DataFrame({name: [None if pd.isna(v) else v for v in frame[name]]
                         for name in frame.columns})


@pytest.fixture(scope="module")
def proteins():
    sequences = read_fasta(shared_file("adept_proteins_30k.fasta.gz"), limit=400)
    return cudf.Series(sequences, index=[f"p{k}" for k in range(len(sequences))])


def check_all_shapes(proteins, partitions):
    queries, database = proteins[:60], proteins[60:]
    dask_queries = dask_cudf.from_cudf(queries, npartitions=partitions, sort=False)
    dask_database = dask_cudf.from_cudf(database, npartitions=partitions + 1, sort=False)
    expected = queries.aln.search(database, top_k=5, **OPTIONS)
    for broadcast in (True, False):
        got = dask_queries.aln.search(dask_database, top_k=5, broadcast=broadcast,
                                      cells_per_task=2e7, **OPTIONS).compute()
        pd.testing.assert_frame_equal(plain(got), plain(expected), check_dtype=False)
    # a prepared database: each worker keeps its copy (and its device copy)
    prepared = gpualign_df.database(database, matrix="BLOSUM62")
    got = dask_queries.aln.search(prepared, top_k=5, cells_per_task=2e7, **OPTIONS).compute()
    pd.testing.assert_frame_equal(plain(got), plain(expected), check_dtype=False)
    small = dask_cudf.from_cudf(proteins[:90], npartitions=partitions, sort=False)
    pd.testing.assert_frame_equal(plain(small.aln.pairwise(**OPTIONS).compute()),
                                  plain(proteins[:90].aln.pairwise(**OPTIONS)), check_dtype=False)


def test_output_partitions_join_as_dask_joins_them(proteins):
    """compute()'s final task joins cuDF output partitions as pylibcudf tables into the
    frame Dask's own concatenation gives (null rows, an empty partition, every dtype and
    the index included), and falls back to Dask's for partitions of other shapes."""
    from dask.dataframe.core import _concat

    from gpualign_df.dask.graph import concatenate_outputs

    queries = proteins[:30].copy()
    queries.iloc[[3, 17]] = None
    dask_queries = dask_cudf.from_cudf(queries, npartitions=3, sort=False)
    dask_database = dask_cudf.from_cudf(proteins[60:200], npartitions=2, sort=False)
    job = dask_queries.aln.search(dask_database, top_k=5, **OPTIONS)
    parts = [job.get_partition(k).compute() for k in range(job.npartitions)]
    parts.insert(1, parts[0].iloc[:0])
    assert parts[0]["score"].isna().any()
    joined = concatenate_outputs(parts)
    cudf.testing.assert_frame_equal(joined, _concat(parts))
    assert list(joined.dtypes) == list(parts[0].dtypes)
    cudf.testing.assert_frame_equal(job.compute(), _concat(parts))
    shifted = [part.set_index(part.index + 5) for part in parts]  # not 0, 1, 2, ...
    cudf.testing.assert_frame_equal(concatenate_outputs(shifted), _concat(shifted))


@pytest.mark.parametrize("partitions", [1, 3])
def test_dask_cudf_equals_in_memory_cudf(proteins, partitions):
    check_all_shapes(proteins, partitions)


def test_dask_cuda_cluster_equals_in_memory(proteins):
    dask_cuda = pytest.importorskip("dask_cuda")
    with dask_cuda.LocalCUDACluster(n_workers=1) as cluster:
        from distributed import Client

        with Client(cluster):
            check_all_shapes(proteins, 4)


def test_scheduler_knows_the_size_of_every_output(proteins):
    """The workers size cuDF outputs as Dask does (``dask.sizeof`` of cuDF objects is
    registered with dask_cudf): the scheduler's byte count of each output partition and of
    the joined frame is the frame's device memory, not a Python object's few bytes."""
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client, futures_of, wait

    with dask_cuda.LocalCUDACluster(n_workers=1) as cluster, Client(cluster) as client:
        queries = dask_cudf.from_cudf(proteins[:60], npartitions=3, sort=False)
        database = dask_cudf.from_cudf(proteins[60:], npartitions=2, sort=False)
        joined = client.compute(queries.aln.search(database, top_k=5, **OPTIONS))
        frame = joined.result()   # the first job of this worker, joined by our own task
        used = int(frame.memory_usage().sum())
        assert used > 10_000 and client.nbytes(summary=False)[joined.key] >= used
        job = queries.aln.search(database, top_k=5, cells_per_task=2e7, **OPTIONS).persist()
        wait(job)
        sizes = client.nbytes(summary=False)
        for future in futures_of(job):
            part = future.result()
            assert sizes[future.key] >= int(part.memory_usage().sum())


@pytest.mark.multigpu
def test_every_gpu_of_the_node_equals_in_memory(proteins):
    from numba import cuda

    if len(cuda.gpus) < 2:
        pytest.skip("needs several GPUs")
    client = gpualign_df.cluster()
    try:
        check_all_shapes(proteins, 5)
    finally:
        client.close()


def test_cluster_helper_gives_workers_the_async_allocator(proteins):
    client = gpualign_df.cluster(1)
    try:
        def resource_name():
            import rmm

            return type(rmm.mr.get_current_device_resource()).__name__

        assert list(client.run(resource_name).values()) == ["CudaAsyncMemoryResource"]
        assert client.direct_to_workers
        # host buffers not trimmed back to the OS (trim_host_memory=None on a GPU cluster)
        assert list(client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_").values()) == [
            os.environ.get("MALLOC_TRIM_THRESHOLD_")]
        check_all_shapes(proteins, 2)
    finally:
        client.close()


def test_cudf_collections_plan_gpu_sized_tasks(proteins):
    from gpualign_df.dask.accessor import default_cells
    from gpualign_df.dask.plan import DEFAULT_GPU_CELLS_PER_TASK

    queries = dask_cudf.from_cudf(proteins, npartitions=2, sort=False)
    assert default_cells(queries, "auto") == DEFAULT_GPU_CELLS_PER_TASK
    assert queries.aln.plan(queries).equals(
        queries.aln.plan(queries, cells_per_task=DEFAULT_GPU_CELLS_PER_TASK))


def uneven(series, sizes, library):
    """A Dask collection of ``series`` in its own row order, in partitions of ``sizes`` rows
    (pandas-backed, or cuDF-backed with ``library="cudf"``)."""
    import dask.dataframe as dd

    parts, start = [], 0
    for size in sizes:
        parts.append(series.iloc[start:start + size])
        start += size
    assert start == len(series)
    if library == "cudf":
        return dd.concat([dask_cudf.from_cudf(cudf.from_pandas(part), npartitions=1, sort=False)
                          for part in parts])
    return dd.concat([dd.from_pandas(part, npartitions=1, sort=False) for part in parts])


@pytest.mark.parametrize("library", ["pandas", "cudf"])
def test_uneven_partitions_on_dask_cuda_equal_in_memory(proteins, library):
    """pairwise, search (top_k and not) and rowwise on a dask-cuda worker, with uneven
    partitions, labels out of sorted order and null sequences: row for row the in-memory
    result of the same Series."""
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client

    host = proteins.to_pandas()[:70].astype(object)
    host.index = [f"s{k}" for k in range(70)][::-1]        # "s69", ..., "s0": not sorted
    host.iloc[[5, 33]] = None
    sizes = [1, 9, 23, 37]
    with dask_cuda.LocalCUDACluster(n_workers=1) as cluster, Client(cluster):
        lazy = uneven(host, sizes, library)
        database = uneven(host[:40], [7, 33], library)
        mates = uneven(host[::-1].set_axis(host.index), sizes, library)
        small = dict(OPTIONS, cells_per_task=3e5)
        jobs = [
            (lazy.aln.pairwise(**small), host.aln.pairwise(**OPTIONS)),
            (lazy.aln.search(database, top_k=3, **small),
             host.aln.search(host[:40], top_k=3, **OPTIONS)),
            (lazy.aln.search(database, **small), host.aln.search(host[:40], **OPTIONS)),
            (lazy.aln.rowwise(mates, **OPTIONS),
             host.aln.rowwise(host[::-1].set_axis(host.index), **OPTIONS)),
        ]
        for job, expected in jobs:
            got = job.compute()
            got = got.to_pandas() if hasattr(got, "to_pandas") else got
            pd.testing.assert_frame_equal(plain(cudf.from_pandas(got)),
                                          plain(cudf.from_pandas(expected)), check_dtype=False)
