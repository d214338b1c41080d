"""cuDF in, cuDF out: the GPU path equals the CPU engine; accessors, nulls, slices, errors.

Needs cuDF and a GPU: run on the accelerator with ``-m cudf`` (see the README).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df  # noqa: F401  (registers .align on cudf.Series)
from gpualign_df import config, cudf_path
from helpers import mutate, random_sequences, read_fasta, shared_file

cudf = pytest.importorskip("cudf")
pytestmark = pytest.mark.cudf

DNA = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1)


def as_plain(frame) -> pd.DataFrame:
    """A result frame with every column as plain Python values (None for nulls)."""
    if type(frame).__module__.startswith("cudf"):
        frame = frame.to_pandas(nullable=True)
    return pd.DataFrame({name: [None if pd.isna(value) else value for value in frame[name]]
                         for name in frame.columns})


def assert_same(cudf_frame, pandas_frame):
    assert type(cudf_frame).__module__.startswith("cudf")
    assert list(cudf_frame.columns) == list(pandas_frame.columns)
    pd.testing.assert_frame_equal(as_plain(cudf_frame), as_plain(pandas_frame),
                                  check_dtype=False)


@pytest.fixture(params=["small batch", "device path"])
def route(request, monkeypatch):
    """Each job of a test on both of the cuDF path's routes: a small job through the
    small-batch path (the device path made to fail, so that it is never taken) and on the
    device path (``small_batch_pairs`` 0)."""
    if request.param == "device path":
        with config.override(small_batch_pairs=0):
            yield request.param
        return

    def never(*args, **kwargs):
        raise AssertionError("a small cuDF job took the device path")

    monkeypatch.setattr(cudf_path.gpu, "align_on_device", never)
    yield request.param


def sample(seed=1, count=300):
    rng = np.random.default_rng(seed)
    queries = random_sequences(rng, count, "ACGT", 200)
    targets = [mutate(rng, q, "ACGT", 0.05) for q in queries]
    queries[3], targets[5], queries[7] = None, None, ""
    index = [f"r{k}" for k in range(count)]
    return pd.Series(queries, index=index), pd.Series(targets, index=index)


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_rowwise_with_nulls_equals_cpu(mode, route):
    queries, targets = sample()
    result = cudf.from_pandas(queries).align.rowwise(cudf.from_pandas(targets), mode=mode, **DNA)
    assert_same(result, queries.aln.rowwise(targets, mode=mode, backend="cpu", **DNA))
    assert result["score"].isna().to_pandas().tolist()[3:6] == [True, False, True]


def test_sliced_series_and_aln_accessor(route):
    queries, targets = sample(2)
    device_queries = cudf.from_pandas(queries).iloc[17:140]
    device_targets = cudf.from_pandas(targets).iloc[17:140]
    result = device_queries.aln.rowwise(device_targets, mode="sw", cigar_style="M", clip="soft",
                                        **DNA)
    expected = queries.iloc[17:140].aln.rowwise(targets.iloc[17:140], mode="sw", cigar_style="M",
                                                clip="soft", backend="cpu", **DNA)
    assert_same(result, expected)


def test_view_of_cudf_rows_equals_the_pandas_view():
    """A view of a cuDF result over cuDF inputs brings only the rows asked for to the host
    and shows what the pandas view shows."""
    queries, targets = sample(4, count=60)
    device_queries, device_targets = cudf.from_pandas(queries), cudf.from_pandas(targets)
    result = device_queries.aln.rowwise(device_targets, mode="sg", **DNA)
    expected = queries.aln.rowwise(targets, mode="sg", backend="cpu", **DNA)
    rows = [0, 3, 7, 42]  # a null query and an empty one among them
    assert str(gpualign_df.view(result, device_queries, device_targets, rows=rows, **DNA)) == \
        str(gpualign_df.view(expected, queries, targets, rows=rows, **DNA))


def test_pairwise_and_search_top_k_equal_cpu():
    proteins = read_fasta(shared_file("adept_proteins_30k.fasta.gz"), limit=120)
    series = pd.Series(proteins)
    options = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1)
    assert_same(cudf.from_pandas(series).align.pairwise(**options),
                series.aln.pairwise(backend="cpu", **options))
    queries, database = series[:20], series[20:]
    assert_same(cudf.from_pandas(queries).align.search(cudf.from_pandas(database), top_k=3,
                                                       **options),
                queries.aln.search(database, top_k=3, backend="cpu", **options))
    assert_same(cudf.from_pandas(queries).align.search(cudf.from_pandas(database),
                                                       traceback=False, **options),
                queries.aln.search(database, traceback=False, backend="cpu", **options))


def test_search_of_a_prepared_database_equals_cpu():
    proteins = pd.Series(read_fasta(shared_file("adept_proteins_30k.fasta.gz"), limit=300),
                         index=[f"p{k}" for k in range(300)])
    prepared = gpualign_df.database(proteins[40:], matrix="BLOSUM62")
    options = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1)
    for top_k in (3, None):
        assert_same(cudf.from_pandas(proteins[:40]).align.search(prepared, top_k=top_k,
                                                                  **options),
                    proteins[:40].aln.search(proteins[40:], top_k=top_k, backend="cpu",
                                             **options))


def test_gasal2_pairs_cudf_equals_cpu():
    queries = pd.Series(read_fasta(shared_file("gasal2_query_batch.fasta.gz")))
    targets = pd.Series(read_fasta(shared_file("gasal2_target_batch.fasta.gz")))
    result = cudf.from_pandas(queries).align.rowwise(cudf.from_pandas(targets), **DNA)
    assert_same(result, queries.aln.rowwise(targets, backend="cpu", **DNA))


def test_byte_profile_follows_the_query_columns_codes(monkeypatch):
    """The encoding reports whether a column holds a code past T: reads of A, C, G and T
    take the grouped kernel's byte profile (local score only, the default's use of it;
    an N in the targets alone changes nothing), a query column with an N among its whole
    words, or as the last byte after them, the shared table; every frame equals the CPU
    engine's."""
    from gpualign_df.kernels import pairs16

    built = []
    real = pairs16.pair_group_kernel
    monkeypatch.setattr(pairs16, "pair_group_kernel", lambda *args, **options: built.append(
        options.get("profile", False)) or real(*args, **options))
    rng = np.random.default_rng(4)
    queries = random_sequences(rng, 400, "ACGT", 150, min_length=100)
    targets = [mutate(rng, query, "ACGTN", 0.05) for query in queries]
    inside = list(queries)
    inside[10] = inside[10][:50] + "N" + inside[10][51:]
    last = list(queries)   # the characters' length 5 past a multiple of 8, N the last
    last[-1] = last[-1][:len(last[-1]) - (sum(map(len, last)) - 5) % 8 - 1] + "N"
    assert sum(map(len, last)) % 8 == 5
    with config.override(small_batch_pairs=0):
        for reads, profile in ((queries, True), (inside, False), (last, False)):
            built.clear()
            left, right = pd.Series(reads), pd.Series(targets)
            assert_same(cudf.from_pandas(left).align.rowwise(cudf.from_pandas(right),
                                                             traceback=False, **DNA),
                        left.aln.rowwise(right, backend="cpu", traceback=False, **DNA))
            assert built and set(built) == {profile}


def test_bad_character_names_row_and_position(route):
    series = cudf.Series(["ACGT", "ACGTQA"], index=[10, 11])
    with pytest.raises(ValueError, match=r"row 11, position 4: character 'Q'"):
        series.align.pairwise(**DNA)


def test_pandas_accessor_is_untouched_and_cudf_has_no_align_of_its_own():
    left = pd.Series([1, 2], index=[0, 1])
    aligned, _ = left.align(pd.Series([3], index=[1]))
    assert len(aligned) == 2
    assert "align" in dir(cudf.Series([]))


def test_range_index_labels_of_a_stepped_slice_and_bad_characters_outside_a_slice(route):
    """Labels of a RangeIndex come by arithmetic (start + step * row), here of a stepped
    slice; a character outside the alphabet in the parent column but outside the slice is
    no error, one inside it names its row."""
    queries, targets = sample(3, count=60)
    device_queries = cudf.from_pandas(queries.reset_index(drop=True))
    device_targets = cudf.from_pandas(targets.reset_index(drop=True))
    result = device_queries.iloc[3:50:2].align.rowwise(device_targets.iloc[3:50:2], **DNA)
    expected = queries.reset_index(drop=True).iloc[3:50:2].aln.rowwise(
        targets.reset_index(drop=True).iloc[3:50:2], backend="cpu", **DNA)
    assert_same(result, expected)
    assert result["query"].to_pandas().tolist() == list(range(3, 50, 2))
    series = cudf.Series(["ACGT", "QQQQ", "ACGTTA", "ACGA", "AXA"])
    frame = series.iloc[2:4].align.pairwise(**DNA)
    assert frame["query"].to_pandas().tolist() == [2]
    with pytest.raises(ValueError, match=r"row 4, position 1: character 'X'"):
        series.iloc[2:].align.pairwise(**DNA)


def test_small_jobs_score_only_pairwise_and_gatk_shape_equal_cpu(route):
    """Score-only rowwise, pairwise with nulls, proteins pairwise (BLOSUM62), and GATK
    HaplotypeCaller's shape (600 bp haplotypes against 700 bp windows, its preset,
    semi-global): each the CPU engine's frame, on both routes."""
    queries, targets = sample(6, count=50)
    device_queries, device_targets = cudf.from_pandas(queries), cudf.from_pandas(targets)
    assert_same(device_queries.align.rowwise(device_targets, traceback=False, mode="sg", **DNA),
                queries.aln.rowwise(targets, traceback=False, mode="sg", backend="cpu", **DNA))
    assert_same(device_queries[:30].align.pairwise(mode="nw", cigar_style="M", **DNA),
                queries[:30].aln.pairwise(mode="nw", cigar_style="M", backend="cpu", **DNA))
    proteins = pd.Series(read_fasta(shared_file("adept_proteins_30k.fasta.gz"), limit=40))
    protein_options = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1)
    assert_same(cudf.from_pandas(proteins).align.pairwise(**protein_options),
                proteins.aln.pairwise(backend="cpu", **protein_options))
    rng = np.random.default_rng(23)
    reference = "".join(rng.choice(list("ACGT"), 20_000))
    windows = [reference[k * 700:(k + 1) * 700] for k in range(25)]
    haplotypes = [mutate(rng, window[40:640], "ACGT", 0.02) for window in windows]
    options = dict(mode="sg", preset="gatk-haplotype-to-reference")
    haplotypes, windows = pd.Series(haplotypes), pd.Series(windows)
    assert_same(cudf.from_pandas(haplotypes).align.rowwise(cudf.from_pandas(windows), **options),
                haplotypes.aln.rowwise(windows, backend="cpu", **options))


@pytest.mark.parametrize("options", [
    dict(mode="sg"), dict(mode="sw", clip="soft", cigar_style="M"), dict(mode="nw"),
    dict(mode="sg", traceback=False)], ids=["sg", "sw-soft-M", "nw", "sg-scores"])
@pytest.mark.parametrize("labels", ["strings", "range"])
def test_small_route_frame_equals_the_device_paths(options, labels):
    """The small route's frame (host results, one upload, pylibcudf columns) is the device
    path's frame exactly: dtypes, null masks, index, labels (gathered from a string
    index, or computed from a RangeIndex of a sliced column), rowwise and pairwise."""
    queries, targets = sample(8, count=60)
    if labels == "range":
        queries, targets = queries.reset_index(drop=True), targets.reset_index(drop=True)
    device_queries = cudf.from_pandas(queries).iloc[5:45]
    device_targets = cudf.from_pandas(targets).iloc[5:45]
    pairwise_queries = cudf.from_pandas(queries).iloc[:20]  # (row 3 null)
    for job in (lambda: device_queries.align.rowwise(device_targets, **options, **DNA),
                lambda: pairwise_queries.align.pairwise(**options, **DNA)):
        small = job()
        with config.override(small_batch_pairs=0):
            on_device = job()
        assert small["score"].isna().any()  # (rows of null sequences among them)
        cudf.testing.assert_frame_equal(small, on_device)


def test_a_job_beyond_one_small_batch_copies_no_characters(monkeypatch):
    """A job of few rows but more cells than one small batch takes (``small_batch_cells``)
    is decided on its offsets: its characters never come to the host, and the device
    path's frame is the CPU engine's."""
    def never(*args, **kwargs):
        raise AssertionError("a job beyond one small batch copied its characters")

    monkeypatch.setattr(cudf_path, "host_sequences", never)
    queries, targets = sample(9, count=40)
    with config.override(small_batch_cells=1000):
        result = cudf.from_pandas(queries).align.rowwise(cudf.from_pandas(targets), **DNA)
    assert_same(result, queries.aln.rowwise(targets, backend="cpu", **DNA))


def test_null_rows_holding_characters_are_null_pairs():
    """A cuDF column may keep characters under a null row (a null mask laid over a
    column): such a row is null on every route (the small route leaves such a job to the
    device path)."""
    import pylibcudf as plc

    chars = cudf.Series(["ACGTAC", "GGGTTT", "ACGTTA"]).to_pylibcudf()[0]
    mask = cudf.Series(["x", None, "x"]).to_pylibcudf()[0].null_mask()
    masked = plc.Column(plc.DataType(plc.TypeId.STRING), 3, chars.data(), mask, 1, 0,
                        [chars.child(0)])
    queries = cudf.Series.from_pylibcudf(masked)
    assert queries.isna().to_pandas().tolist() == [False, True, False]
    targets = pd.Series(["ACGTAC", "GGGTTT", "ACGTA"])
    result = queries.align.rowwise(cudf.from_pandas(targets), **DNA)
    assert_same(result, pd.Series(["ACGTAC", None, "ACGTTA"]).aln.rowwise(targets, backend="cpu",
                                                                         **DNA))


def test_engine_allocates_from_a_private_async_resource_unless_rmm_is_configured():
    """With RMM's default resource (cudaMalloc/cudaFree per array) the engine's CuPy arrays
    come from its private stream-ordered resource; a resource the user set is shared."""
    import cupy
    import rmm
    from rmm.allocators.cupy import rmm_cupy_allocator

    from gpualign_df.gpu import memory

    previous = rmm.mr.get_current_device_resource()
    try:
        rmm.mr.set_current_device_resource(rmm.mr.CudaMemoryResource())
        with memory.engine_allocations():
            assert cupy.cuda.get_allocator() is not rmm_cupy_allocator
            values = cupy.arange(1000, dtype=cupy.int32)
        assert isinstance(memory._PRIVATE_RESOURCE, rmm.mr.CudaAsyncMemoryResource)
        assert int(values.sum()) == 499500
        queries, targets = sample(5, count=40)
        assert_same(cudf.from_pandas(queries).align.rowwise(cudf.from_pandas(targets), **DNA),
                    queries.aln.rowwise(targets, backend="cpu", **DNA))
        pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=1 << 26)
        rmm.mr.set_current_device_resource(pool)
        with memory.engine_allocations():
            assert cupy.cuda.get_allocator() is rmm_cupy_allocator
        queries, targets = sample(4, count=40)
        assert_same(cudf.from_pandas(queries).align.rowwise(cudf.from_pandas(targets), **DNA),
                    queries.aln.rowwise(targets, backend="cpu", **DNA))
    finally:
        rmm.mr.set_current_device_resource(previous)
