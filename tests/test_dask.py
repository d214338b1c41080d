"""Dask accessor: lazy results equal to the in-memory accessor for any partitioning, on the
threaded scheduler and on a distributed.LocalCluster (pandas-backed Dask, CPU engine)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

import gpualign_df  # noqa: E402  (registers .aln on Dask Series)
from gpualign_df.dask import plan_blocks, summarize_plan  # noqa: E402
from gpualign_df.dask.plan import build_plan  # noqa: E402
from helpers import mutate, random_sequences  # noqa: E402

pytestmark = pytest.mark.dask

DNA = "ACGT"
PROTEIN = "ARNDCQEGHILKMFPSTWYV"
DNA_OPTIONS = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, backend="cpu")
PROTEIN_OPTIONS = dict(matrix="BLOSUM62", gap_open=10, gap_extend=1, backend="cpu")
#: 1, 3 and 7 partitions, and an uneven layout with an empty partition (sizes sum to 40).
LAYOUTS = [1, 3, 7, (1, 0, 17, 2, 20)]
#: Small tasks so that partitions are cut into several chunks.
TINY = dict(cells_per_task=3000, pairs_per_task=40)


def family(rng: np.random.Generator, count: int, alphabet: str, max_length: int) -> list:
    """Related and unrelated sequences, with nulls, empty strings and exact repeats."""
    seeds = random_sequences(rng, max(1, count // 4), alphabet, max_length, min_length=5)
    out: list = []
    while len(out) < count:
        kind = rng.random()
        seed = seeds[rng.integers(len(seeds))]
        if kind < 0.08:
            out.append(None)
        elif kind < 0.14:
            out.append("")
        elif kind < 0.25:
            out.append(seed)                       # exact repeats make score ties
        elif kind < 0.8:
            out.append(mutate(rng, seed, alphabet, 0.1))
        else:
            out.append(random_sequences(rng, 1, alphabet, max_length)[0])
    return out


def series(rng: np.random.Generator, count: int, alphabet: str, max_length: int,
           prefix: str) -> pd.Series:
    labels = [f"{prefix}{k}" for k in range(count)]
    labels[-1] = labels[0]                         # a duplicated label: order is positional
    return pd.Series(family(rng, count, alphabet, max_length), index=labels, dtype=object)


def partitioned(data: pd.Series | pd.DataFrame, layout: int | tuple) -> dd.Series:
    """A Dask collection of ``data`` in its row order: ``layout`` partitions (from_pandas,
    unsorted) or explicit partition sizes (from_delayed, empty partitions allowed)."""
    if isinstance(layout, int):
        return dd.from_pandas(data, npartitions=layout, sort=False)
    bounds = np.cumsum([0, *layout])
    assert bounds[-1] == len(data)
    pieces = [dask.delayed(data.iloc[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    return dd.from_delayed(pieces, meta=data.iloc[:0])


def in_memory(lazy: dd.Series | dd.DataFrame) -> pd.Series | pd.DataFrame:
    """The computed collection (Dask may have converted its strings on the way in)."""
    return lazy.compute(scheduler="threads")


def check_equal(lazy: dd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """meta == computed dtypes == in-memory dtypes, and the same rows in the same order."""
    assert isinstance(lazy, dd.DataFrame)
    assert lazy.dtypes.to_dict() == expected.dtypes.to_dict()
    got = lazy.compute()
    assert list(got.columns) == list(expected.columns)
    assert got.dtypes.to_dict() == lazy.dtypes.to_dict()
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))
    return got


@pytest.fixture(scope="module")
def local_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        yield cluster


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """Run the test body on the threaded scheduler or on a distributed.LocalCluster."""
    if request.param == "threads":
        with dask.config.set(scheduler="threads"):
            yield "threads"
        return
    distributed = pytest.importorskip("distributed")
    cluster = request.getfixturevalue("local_cluster")
    with distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def dna() -> pd.Series:
    return series(np.random.default_rng(11), 40, DNA, 30, "d")


@pytest.fixture(scope="module")
def protein() -> pd.Series:
    return series(np.random.default_rng(12), 40, PROTEIN, 25, "p")


# ---------------------------------------------------------------------------------------------
# rowwise


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("traceback", [True, False])
def test_rowwise_equals_in_memory(scheduler, dna, layout, traceback):
    rng = np.random.default_rng(21)
    mates = [None if s is None else mutate(rng, s, DNA, 0.15) for s in dna]
    mates[3] = None
    frame = pd.DataFrame({"read": dna.to_numpy(), "mate": mates}, index=dna.index)
    lazy = partitioned(frame, layout)
    expected = lazy.compute().read.aln.rowwise(lazy.compute().mate, mode="sg",
                                               traceback=traceback, **DNA_OPTIONS)
    check_equal(lazy.read.aln.rowwise(lazy.mate, mode="sg", traceback=traceback,
                                      **DNA_OPTIONS), expected)


def test_rowwise_from_delayed_equals_plain_pandas(dna):
    """Without Dask's string conversion (from_delayed keeps dtypes), the result also equals
    the accessor on the original pandas objects, dtypes included."""
    mates = dna.sample(frac=1.0, random_state=3).to_numpy()
    frame = pd.DataFrame({"read": dna.to_numpy(), "mate": mates}, index=dna.index)
    lazy = partitioned(frame, (1, 0, 17, 2, 20))
    expected = frame.read.aln.rowwise(frame.mate, mode="nw", **DNA_OPTIONS)
    check_equal(lazy.read.aln.rowwise(lazy.mate, mode="nw", **DNA_OPTIONS), expected)


def test_rowwise_not_copartitioned_raises(dna):
    left = partitioned(dna, 3)
    with pytest.raises(ValueError, match="co-partitioned"):
        left.aln.rowwise(partitioned(dna, 2), **DNA_OPTIONS)
    other = partitioned(dna, (10, 10, 20))       # 3 partitions, other row counts
    lazy = left.aln.rowwise(other, **DNA_OPTIONS)
    with pytest.raises(ValueError, match="co-partitioned"):
        lazy.compute(scheduler="threads")
    with pytest.raises(TypeError):
        left.aln.rowwise(dna, **DNA_OPTIONS)


# ---------------------------------------------------------------------------------------------
# pairwise


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("traceback", [True, False])
@pytest.mark.parametrize("sizing", ["default", "tiny"])
def test_pairwise_equals_in_memory(scheduler, dna, layout, traceback, sizing):
    lazy = partitioned(dna, layout)
    options = dict(mode="sw", traceback=traceback, **DNA_OPTIONS)
    expected = lazy.compute().aln.pairwise(**options)
    got = check_equal(lazy.aln.pairwise(**options, **(TINY if sizing == "tiny" else {})),
                      expected)
    assert len(got) == len(dna) * (len(dna) - 1) // 2


@pytest.mark.parametrize("layout", [3, (1, 0, 17, 2, 20)])
def test_pairwise_protein(protein, layout):
    lazy = partitioned(protein, layout)
    expected = in_memory(lazy).aln.pairwise(mode="nw", **PROTEIN_OPTIONS)
    with dask.config.set(scheduler="threads"):
        check_equal(lazy.aln.pairwise(mode="nw", **PROTEIN_OPTIONS, **TINY), expected)


def test_pairwise_unordered_has_every_pair_once(dna):
    unique = dna.set_axis([f"u{k}" for k in range(len(dna))])
    lazy = partitioned(unique, 7)
    expected = in_memory(lazy).aln.pairwise(**DNA_OPTIONS)
    got = lazy.aln.pairwise(ordered=False, **DNA_OPTIONS, **TINY).compute(scheduler="threads")
    assert got.dtypes.to_dict() == expected.dtypes.to_dict()
    assert lazy.aln.pairwise(ordered=False, **DNA_OPTIONS, **TINY).npartitions > 7
    pd.testing.assert_frame_equal(
        got.sort_values(["query", "target"]).reset_index(drop=True),
        expected.sort_values(["query", "target"]).reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# search


@pytest.mark.parametrize("layouts", [(1, 1), (3, 7), (7, (1, 0, 17, 2, 20)),
                                     ((1, 0, 17, 2, 20), 3)])
@pytest.mark.parametrize("top_k", [None, 1, 3])
@pytest.mark.parametrize("traceback", [True, False])
@pytest.mark.parametrize("broadcast", [True, False])
def test_search_equals_in_memory(scheduler, dna, layouts, top_k, traceback, broadcast):
    rng = np.random.default_rng(31)
    queries = pd.Series(family(rng, 40, DNA, 30), index=np.arange(100, 140))
    lazy_queries, lazy_db = partitioned(queries, layouts[0]), partitioned(dna, layouts[1])
    options = dict(mode="sg", traceback=traceback, **DNA_OPTIONS)
    expected = lazy_queries.compute().aln.search(lazy_db.compute(), top_k=top_k, **options)
    check_equal(lazy_queries.aln.search(lazy_db, top_k=top_k, broadcast=broadcast, **options,
                                        **TINY), expected)


@pytest.mark.parametrize("top_k", [None, 2])
def test_search_protein_default_sizing(protein, top_k):
    lazy_queries, lazy_db = partitioned(protein.iloc[::3], 3), partitioned(protein, 7)
    expected = in_memory(lazy_queries).aln.search(in_memory(lazy_db), top_k=top_k,
                                                  **PROTEIN_OPTIONS)
    with dask.config.set(scheduler="threads"):
        check_equal(lazy_queries.aln.search(lazy_db, top_k=top_k, **PROTEIN_OPTIONS), expected)


@pytest.mark.parametrize("top_k", [None, 2, 4])
def test_search_ties_use_global_target_position(top_k):
    """Equal targets in several partitions: ties go to the earliest in the whole database,
    not the earliest inside a partition."""
    database = pd.Series(["TTTTTTTT", "ACGTACGT", "GGGG", "ACGTACGT", "ACGTACGT", "CCCC",
                          "ACGTACGT", None, "ACGTACGT"], index=list("abcdefghi"))
    queries = pd.Series(["ACGTACGT", None, ""], index=["q1", "q2", "q3"])
    for layout in [(2, 3, 4), (4, 1, 0, 4), 9]:
        lazy_queries, lazy_db = partitioned(queries, (1, 2)), partitioned(database, layout)
        expected = in_memory(lazy_queries).aln.search(in_memory(lazy_db), top_k=top_k,
                                                      **DNA_OPTIONS)
        if top_k:
            assert expected["target"].tolist()[:top_k] == ["b", "d", "e", "g"][:top_k]
        for broadcast in (True, False):
            lazy = lazy_queries.aln.search(lazy_db, top_k=top_k, broadcast=broadcast,
                                           **DNA_OPTIONS, cells_per_task=10, pairs_per_task=1)
            with dask.config.set(scheduler="threads"):
                check_equal(lazy, expected)


def test_search_unordered_same_rows(dna):
    unique = dna.set_axis([f"u{k}" for k in range(len(dna))])
    lazy_queries, lazy_db = partitioned(unique.iloc[:10], 2), partitioned(unique, 3)
    expected = in_memory(lazy_queries).aln.search(in_memory(lazy_db), **DNA_OPTIONS)
    got = lazy_queries.aln.search(lazy_db, ordered=False, **DNA_OPTIONS, **TINY).compute(
        scheduler="threads")
    assert got.dtypes.to_dict() == expected.dtypes.to_dict()
    pd.testing.assert_frame_equal(
        got.sort_values(["query", "target"]).reset_index(drop=True),
        expected.sort_values(["query", "target"]).reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# order: the collection's (that of .compute()), and dd.from_pandas' sort


#: Partition sizes of the order tests (60 rows): a single row, an empty partition, and
#: partitions that the tiny task size cuts into several chunks.
UNEVEN = (1, 7, 0, 23, 29)
DATABASE_UNEVEN = (3, 0, 11, 6)
ORDER_MESSAGE = "Dask sorted the rows .* by their labels"


@pytest.fixture(params=["sync", "distributed"])
def sync_or_distributed(request):
    """Run the test body on the synchronous scheduler or on a distributed.LocalCluster."""
    if request.param == "sync":
        with dask.config.set(scheduler="sync"):
            yield "sync"
        return
    distributed = pytest.importorskip("distributed")
    with distributed.Client(request.getfixturevalue("local_cluster")) as client:
        yield client


def labelled(rng: np.random.Generator, count: int, prefix: str) -> pd.Series:
    """Sequences labelled ``prefix0 .. prefix{count-1}`` (not sorted as strings: "s10"
    sorts before "s2"), with nulls and empty sequences."""
    values = family(rng, count, DNA, 30)
    values[3], values[count // 2] = None, ""
    return pd.Series(values, index=[f"{prefix}{k}" for k in range(count)])


def kept_order(data: pd.Series | pd.DataFrame, sizes: tuple) -> dd.Series:
    """``data`` in its own order (from_pandas with sort=False) in partitions of ``sizes``;
    no string conversion, so the results' dtypes are the in-memory accessor's on ``data``."""
    bounds = np.cumsum([0, *sizes])
    with dask.config.set({"dataframe.convert-string": False}):
        lazy = dd.concat([dd.from_pandas(data.iloc[a:b], npartitions=1, sort=False)
                          for a, b in zip(bounds[:-1], bounds[1:])])
    assert [len(part) for part in lazy.partitions] == list(sizes)
    return lazy


def sorted_by_dask(data: pd.Series | pd.DataFrame, sizes: tuple) -> dd.Series:
    """``dd.from_pandas(data)`` as users write it (Dask sorts the rows by label), then
    repartitioned into partitions of ``sizes`` rows of the sorted order (an empty partition
    lies between two neighbouring labels: ``label + "!"`` sorts right after ``label``)."""
    with dask.config.set({"dataframe.convert-string": False}):
        lazy = dd.from_pandas(data, npartitions=3)
    labels = sorted(data.index)
    bounds = np.cumsum([0, *sizes])
    divisions = [labels[b] if sizes[k] else labels[b - 1] + "!"
                 for k, b in enumerate(bounds[:-1])] + [labels[-1]]
    lazy = lazy.repartition(divisions=divisions)
    assert [len(part) for part in lazy.partitions] == list(sizes)
    return lazy


def run_job(how: str, queries, other=None, **extra) -> Any:
    """The job ``how`` on the accessor of ``queries`` (Dask or pandas, the same options)."""
    options = dict(mode="sw", **DNA_OPTIONS, **extra)
    if how == "rowwise":
        return queries.aln.rowwise(other, **options)
    if how == "pairwise":
        return queries.aln.pairwise(**options)
    return queries.aln.search(other, top_k=2 if how == "search top_k" else None, **options)


def order_inputs(how: str, arrange) -> tuple:
    """The Dask inputs of job ``how`` arranged by ``arrange`` and the pandas objects they
    came from (for rowwise, two columns of one frame, co-partitioned)."""
    rng = np.random.default_rng(41)
    reads = labelled(rng, 60, "s")
    if how == "rowwise":
        mates = [None if pd.isna(s) else mutate(rng, s, DNA, 0.15) for s in reads]
        mates[7] = None
        frame = pd.DataFrame({"read": reads, "mate": pd.Series(mates, index=reads.index,
                                                               dtype=reads.dtype)})
        lazy = arrange(frame, UNEVEN)
        return (lazy.read, lazy.mate), (frame.read, frame.mate)
    if how == "pairwise":
        return (arrange(reads, UNEVEN), None), (reads, None)
    database = labelled(rng, 20, "db")
    return (arrange(reads, UNEVEN), arrange(database, DATABASE_UNEVEN)), (reads, database)


ORDER_JOBS = ["pairwise", "search", "search top_k", "rowwise"]


@pytest.mark.parametrize("how", ORDER_JOBS)
def test_order_kept_by_from_pandas_sort_false_is_the_pandas_order(sync_or_distributed, how,
                                                                   recwarn):
    """Uneven partitions (an empty one), string labels not in sorted order, nulls and empty
    sequences, chunks cut inside partitions: with the pandas order kept, the Dask result is
    the in-memory result on the pandas objects themselves, every column, row for row; and no
    warning about the order."""
    (lazy, lazy_other), (data, other) = order_inputs(how, kept_order)
    sizing = {} if how == "rowwise" else TINY
    got = run_job(how, lazy, lazy_other, **sizing).compute()
    pd.testing.assert_frame_equal(got.reset_index(drop=True),
                                  run_job(how, data, other).reset_index(drop=True))
    assert not [w for w in recwarn if "Dask sorted" in str(w.message)]


@pytest.mark.parametrize("how", ORDER_JOBS)
def test_order_sorted_by_from_pandas_is_the_collections_and_warns(sync_or_distributed, how):
    """Where from_pandas sorted the rows (its default), the result is the in-memory result
    on the computed collection (the sorted order), row for row, and building the job warns
    that pairs and rows follow the sorted labels."""
    (lazy, lazy_other), _ = order_inputs(how, sorted_by_dask)
    sizing = {} if how == "rowwise" else TINY
    with pytest.warns(UserWarning, match=ORDER_MESSAGE):
        job = run_job(how, lazy, lazy_other, **sizing)
    expected = run_job(how, lazy.compute(), None if lazy_other is None else
                       lazy_other.compute())
    pd.testing.assert_frame_equal(job.compute().reset_index(drop=True),
                                  expected.reset_index(drop=True))


def test_reported_case_warns_and_sort_false_gives_the_pandas_orientation(recwarn):
    """The report: 60 random DNA sequences labelled "s0".."s59", dd.from_pandas(s,
    npartitions=4) (sorted by Dask, "s10" before "s2"): 300 of the 1,770 pairs come out as
    (j, i), exactly the pairs that the sort inverted. The job warns, naming sort=False; with
    sort=False the result is s.aln.pairwise(), with no warning."""
    rng = np.random.default_rng(5)
    s = pd.Series(random_sequences(rng, 60, DNA, 40, min_length=1),
                  index=[f"s{k}" for k in range(60)])
    options = dict(mode="sw", match=2, mismatch=-3, gap_open=5, gap_extend=2, backend="cpu")
    in_memory_pairs = s.aln.pairwise(**options)
    with pytest.warns(UserWarning, match=ORDER_MESSAGE + ".*pass sort=False to dd.from_pandas"):
        lazy = dd.from_pandas(s, npartitions=4).aln.pairwise(**options)
    got = lazy.compute(scheduler="sync")
    position = {label: k for k, label in enumerate(s.index)}
    swapped = sum(position[q] > position[t] for q, t in zip(got["query"], got["target"]))
    inversions = sum(position[a] > position[b] for k, a in enumerate(sorted(s.index))
                     for b in sorted(s.index)[k + 1:])
    assert len(got) == 1770 and swapped == inversions == 300
    recwarn.clear()
    with dask.config.set({"dataframe.convert-string": False}):
        kept = dd.from_pandas(s, npartitions=4, sort=False)
    pd.testing.assert_frame_equal(
        kept.aln.pairwise(**options).compute(scheduler="sync").reset_index(drop=True),
        in_memory_pairs)
    assert not [w for w in recwarn if "Dask sorted" in str(w.message)]


def test_order_warning_only_where_dask_reordered(dna, recwarn):
    """No warning for an index already sorted (from_pandas then keeps the order), for
    sort=False, or for collections not made by from_pandas; a warning for a column of a
    sorted DataFrame, anywhere in the expression (after a projection and a map), for a
    sorted database and for plan(); and none when the expression cannot be read."""
    from gpualign_df.dask.graph import sorted_by_from_pandas

    unsorted = pd.Series(["ACGT", "ACGA", "TTGA"], index=["b", "a", "c"])
    quiet = [dd.from_pandas(unsorted.sort_index(), npartitions=2),
             dd.from_pandas(unsorted.reset_index(drop=True), npartitions=2),
             dd.from_pandas(unsorted, npartitions=2, sort=False),
             partitioned(unsorted, (1, 2))]
    for lazy in quiet:
        lazy.aln.pairwise(**DNA_OPTIONS)
        lazy.aln.plan()
        lazy.aln.search(lazy, **DNA_OPTIONS)
    assert not [w for w in recwarn if "Dask sorted" in str(w.message)]
    frame = dd.from_pandas(pd.DataFrame({"seq": unsorted, "n": [1, 2, 3]}), npartitions=2)
    column = frame.seq.str.upper()
    kept = dd.from_pandas(unsorted, npartitions=1, sort=False)
    for build, roles in ((lambda: column.aln.pairwise(**DNA_OPTIONS), "Series"),
                         (lambda: column.aln.plan(), "Series"),
                         (lambda: kept.aln.search(column, **DNA_OPTIONS), "database"),
                         (lambda: kept.aln.plan(column), "database"),
                         (lambda: frame.seq.aln.rowwise(frame.seq, **DNA_OPTIONS),
                          "queries and other Series")):
        with pytest.warns(UserWarning, match=f"rows of the {roles} by their labels"):
            build()
    recwarn.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(column.expr), "walk", lambda self: iter(()).throw(RuntimeError))
        assert sorted_by_from_pandas(column) is False
        column.aln.pairwise(**DNA_OPTIONS)
    assert not [w for w in recwarn if "Dask sorted" in str(w.message)]


# ---------------------------------------------------------------------------------------------
# meta, errors, edge cases


def test_meta_matches_in_memory_dtypes(dna):
    lazy = partitioned(dna, 3)
    for traceback in (True, False):
        for result in (lazy.aln.pairwise(traceback=traceback, **DNA_OPTIONS),
                       lazy.aln.search(lazy, traceback=traceback, **DNA_OPTIONS),
                       lazy.aln.search(lazy, top_k=2, traceback=traceback, **DNA_OPTIONS),
                       lazy.aln.rowwise(lazy, traceback=traceback, **DNA_OPTIONS)):
            empty = gpualign_df.align(lazy._meta, how="pairwise", traceback=traceback,
                                      backend="cpu")
            assert result.dtypes.to_dict() == empty.dtypes.to_dict()
            assert result._meta.dtypes.to_dict() == result.partitions[0].compute(
                scheduler="threads").dtypes.to_dict()


def test_empty_series():
    lazy = partitioned(pd.Series([], dtype=object), 1)
    empty = in_memory(lazy)
    for result, expected in ((lazy.aln.pairwise(**DNA_OPTIONS), empty.aln.pairwise(**DNA_OPTIONS)),
                             (lazy.aln.search(lazy, top_k=3, **DNA_OPTIONS),
                              empty.aln.search(empty, top_k=3, **DNA_OPTIONS))):
        with dask.config.set(scheduler="threads"):
            check_equal(result, expected)


def test_bad_options_raise_before_any_work(dna):
    lazy = partitioned(dna, 3)
    with pytest.raises(ValueError, match="backend"):
        lazy.aln.pairwise(backend="gpu")
    with pytest.raises(ValueError, match="top_k"):
        lazy.aln.search(lazy, top_k=0, backend="cpu")
    with pytest.raises(ValueError, match="cells_per_task"):
        lazy.aln.pairwise(cells_per_task=0, backend="cpu")
    with pytest.raises(TypeError):
        lazy.aln.pairwise(bogus=1, backend="cpu")


def test_bad_residue_names_its_label():
    data = pd.Series(["ACGT", "ACGT", "ACJT", "ACGA"], index=["w", "x", "bad_row", "z"])
    lazy = partitioned(data, 2)
    with pytest.raises(ValueError, match="bad_row"):
        lazy.aln.pairwise(**DNA_OPTIONS).compute(scheduler="threads")
    with pytest.raises(ValueError, match="bad_row"):
        partitioned(data.iloc[:2], 1).aln.search(lazy, top_k=1, **DNA_OPTIONS).compute(
            scheduler="threads")


def test_pandas_database_is_the_same_type_error_for_search_and_plan(dna):
    """search() and plan() (the accessor's and plan_blocks) refuse a pandas database with
    one TypeError and one message, before any work; so does rowwise with a pandas other."""
    lazy = partitioned(dna, 3)
    messages = []
    for call in (lambda: lazy.aln.search(dna, **DNA_OPTIONS),
                 lambda: lazy.aln.plan(dna),
                 lambda: plan_blocks(lazy, dna),
                 lambda: plan_blocks(lazy, dna, how="search")):
        with pytest.raises(TypeError) as error:
            call()
        messages.append(str(error.value))
    assert len(set(messages)) == 1
    assert "database" in messages[0] and "pandas.Series" in messages[0]
    with pytest.raises(TypeError, match="queries"):
        plan_blocks(dna)
    with pytest.raises(TypeError, match="rowwise .* as other, got pandas.Series"):
        lazy.aln.rowwise(dna, **DNA_OPTIONS)


def test_dask_series_align_is_dasks_own():
    """gpualign_df registers .aln only: Dask's own Series.align still aligns indexes."""
    left = pd.Series([1.0, 2.0, 3.0], index=[0, 1, 2])
    right = pd.Series([10.0, 20.0], index=[1, 3])
    a, b = dd.from_pandas(left, npartitions=2).align(dd.from_pandas(right, npartitions=1))
    expected_a, expected_b = left.align(right)
    pd.testing.assert_series_equal(a.compute(scheduler="threads"), expected_a)
    pd.testing.assert_series_equal(b.compute(scheduler="threads"), expected_b)
    assert hasattr(dd.from_pandas(left, npartitions=1), "aln")


@pytest.mark.parametrize("module", ["", ".plan", ".tasks", ".graph", ".accessor"])
def test_any_module_of_the_package_imported_first_registers_aln(module):
    """Whichever module of gpualign_df.dask a fresh interpreter imports first, a Dask Series
    gets .aln without a failed-registration warning (graph imports dask.dataframe, whose
    import hook imports the accessor while graph is half-executed), the package's own
    ``dask`` name shadows no Dask import, and the package and its plan import no Dask."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = (f"import json, sys; import gpualign_df.dask{module}; "
            f"light = 'dask' not in sys.modules; "
            f"import dask, dask.dataframe as dd, pandas as pd; "
            f"print(json.dumps({{'light': light, 'dask': dask.__name__, 'file': dask.__file__, "
            f"'aln': hasattr(dd.from_pandas(pd.Series(['A']), npartitions=1), 'aln')}}))")
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and "gpualign_df:" not in result.stderr, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["aln"] and out["dask"] == "dask"
    assert Path(out["file"]).parent.name == "dask" and "gpualign_df" not in out["file"]
    assert out["light"] is (module in ("", ".plan", ".tasks"))


# ---------------------------------------------------------------------------------------------
# planning


def test_plan_covers_every_pair_once_longest_first(dna):
    lengths = [np.array([0 if s is None else len(s) for s in dna[a:b]])
               for a, b in ((0, 1), (1, 1), (1, 18), (18, 20), (20, 40))]
    chunks, _, tasks = build_plan("pairwise", lengths, None, 500, 30)
    assert sum(task.pairs for task in tasks) == 40 * 39 // 2
    covered = np.zeros((40, 40), dtype=int)
    for task in tasks:
        first, second = chunks[task.query], chunks[task.target]
        block = np.zeros((40, 40), dtype=int)
        block[first.offset:first.offset + first.rows, second.offset:second.offset + second.rows] = 1
        covered += np.triu(block, k=1)
    assert (covered == np.triu(np.ones((40, 40), dtype=int), k=1)).all()
    cells = [task.cells for task in tasks]
    assert cells == sorted(cells, reverse=True)


def test_plan_blocks_balances_and_reports(dna):
    lazy = partitioned(dna, 3)
    with dask.config.set(scheduler="threads"):
        plan = plan_blocks(lazy, cells_per_task=4000)
        search_plan = lazy.aln.plan(lazy, cells_per_task=4000, broadcast=True)
        automatic = {cells: lazy.aln.plan(lazy, cells_per_task=cells)
                     for cells in (4000, 1e10)}
    assert plan["pairs"].sum() == 40 * 39 // 2
    assert (plan["task"] == np.arange(len(plan))).all()
    assert plan["cells"].is_monotonic_decreasing
    summary = summarize_plan(plan)
    assert summary["tasks"] == len(plan) > 3
    assert summary["min_cells"] <= summary["median_cells"] <= summary["max_cells"]
    assert search_plan["pairs"].sum() == 40 * 40
    assert set(search_plan["kind"]) == {"search"}
    assert (search_plan["target_partition"] == -1).all()          # the database broadcast
    assert (search_plan["target_stop"] - search_plan["target_start"] == 40).all()
    blocked = lazy.aln.plan(lazy, cells_per_task=4000, broadcast=False)
    assert blocked["pairs"].sum() == 40 * 40 and (blocked["target_partition"] >= 0).all()
    assert len(blocked) > len(search_plan)
    # by default the database goes whole to a task only if the task keeps enough queries
    assert (automatic[1e10]["target_partition"] == -1).all()
    assert (automatic[4000]["target_partition"] >= 0).all()
    uniform = dd.from_pandas(pd.Series(["ACGT" * 25] * 64), npartitions=2)
    even = summarize_plan(plan_blocks(uniform, cells_per_task=1e5))
    assert even["spread"] <= 1.0 + 1e-9 and even["max_cells"] <= 1e5


def test_plan_follows_the_jobs_backend():
    """On pandas-backed Series, a job with backend='cuda' sizes its tasks as on the GPU
    (DEFAULT_GPU_CELLS_PER_TASK), and the plan asked with that backend is the job's."""
    from gpualign_df.dask.plan import DEFAULT_GPU_CELLS_PER_TASK

    sequences = pd.Series(["ACGT" * 250] * 4000)
    queries = dd.from_pandas(sequences[:400], npartitions=4)
    database = dd.from_pandas(sequences, npartitions=2)
    with dask.config.set(scheduler="threads"):
        on_gpu = queries.aln.plan(database, top_k=2, backend="cuda")
        by_default = queries.aln.plan(database, top_k=2)
        sized = queries.aln.plan(database, top_k=2, cells_per_task=DEFAULT_GPU_CELLS_PER_TASK)
        job = queries.aln.search(database, top_k=2, **dict(DNA_OPTIONS, backend="cuda"))
    pd.testing.assert_frame_equal(on_gpu, sized)
    assert len(on_gpu) < len(by_default)
    tasks = [key for key in dict(job.__dask_graph__())
             if isinstance(key, tuple) and key[0].startswith("gpualign-search-broadcast")]
    assert len(tasks) == len(on_gpu)
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        queries.aln.plan(database, backend="gpu")


def test_each_step_has_its_own_key_prefix_and_outputs_are_the_steps_tasks(dna):
    """The scheduler estimates durations per key prefix, so each kind of task has its own,
    alignment tasks with their job's size in it; and a job's output partitions are its last
    step's tasks themselves: no alias, container or meta-check task runs after them (each
    would be one more scheduler round trip)."""
    from dask.utils import key_split

    from gpualign_df.dask.graph import size_word

    lazy = partitioned(dna, 3)
    biggest = {name: summarize_plan(plan)["max_cells"] for name, plan in {
        "broadcast": lazy.aln.plan(lazy, top_k=2, broadcast=True),
        "search": lazy.aln.plan(lazy, top_k=2, broadcast=False, **TINY),
        "pairwise": lazy.aln.plan(**TINY)}.items()}
    size = {name: size_word(cells) for name, cells in biggest.items()}
    jobs = {(f"gpualign-search-broadcast-{size['broadcast']}",): lazy.aln.search(
                lazy, top_k=2, broadcast=True, **DNA_OPTIONS),
            (f"gpualign-search-block-{size['search']}", "gpualign-search-topk"):
                lazy.aln.search(lazy, top_k=2, broadcast=False, **TINY, **DNA_OPTIONS),
            (f"gpualign-pairwise-block-{size['pairwise']}", "gpualign-pairwise-merge"):
                lazy.aln.pairwise(**TINY, **DNA_OPTIONS),
            (f"gpualign-pairwise-block-{size['pairwise']}", "gpualign-pairwise-strip"):
                lazy.aln.pairwise(ordered=False, **TINY, **DNA_OPTIONS),
            ("gpualign-rowwise-align",): lazy.aln.rowwise(lazy, **DNA_OPTIONS)}
    input_prefixes = {key_split(key) for key in dict(lazy.__dask_graph__())}
    for steps, job in jobs.items():
        task_prefixes = {key_split(key) for key in dict(job.__dask_graph__())}
        assert task_prefixes - input_prefixes == set(steps)
        assert {key_split(key) for key in job.__dask_keys__()} == {steps[-1]}


def test_size_word_names_the_decade_of_cells():
    from dask.utils import key_split

    from gpualign_df.dask.graph import size_word

    assert size_word(0) == size_word(9) == "sizeEn"
    assert size_word(10) == "sizeEi"
    assert size_word(10**12) == size_word(9.9e12) == "sizeExii"
    assert size_word(10**13) == "sizeExiii"
    assert size_word(10**40) == "sizeExx"
    for decade in range(30):   # Dask keeps the word in the task prefix
        assert key_split(f"gpualign-search-broadcast-{size_word(10**decade)}-0123abcd") == \
            f"gpualign-search-broadcast-{size_word(10**decade)}"


def test_output_partition_with_other_columns_than_meta_is_an_error():
    """Output tasks check their frame against the job's meta (as from_delayed's
    verify_meta did) and name the partition."""
    from gpualign_df.dask.graph import checked_output, frame_schema

    meta = pd.DataFrame({"score": pd.Series([], dtype="Int32")})
    good = pd.DataFrame({"score": pd.Series([3], dtype="Int32")})
    assert checked_output(good, func=lambda frame: frame, schema=frame_schema(meta),
                          partition=0) is good
    with pytest.raises(ValueError, match="output partition 3"):
        checked_output(good.astype("int64"), func=lambda frame: frame,
                       schema=frame_schema(meta), partition=3)


def test_result_meta_is_built_once_per_inputs_and_options(dna, monkeypatch):
    from gpualign_df.dask import graph as dask_graph

    built = []
    real = dask_graph.build_result_meta
    monkeypatch.setattr(dask_graph, "build_result_meta",
                        lambda *args: built.append(args) or real(*args))
    lazy = partitioned(dna, 2)
    first = lazy.aln.search(lazy, top_k=2, **DNA_OPTIONS)
    again = lazy.aln.search(lazy, top_k=2, **DNA_OPTIONS)
    assert len(built) == 1 and first._meta is again._meta
    lazy.aln.search(lazy, top_k=3, **DNA_OPTIONS)
    assert len(built) == 2
    with pytest.raises(ValueError):   # bad options are not remembered: they raise every time
        lazy.aln.search(lazy, top_k=2, **dict(DNA_OPTIONS, cigar_style="?"))
    with pytest.raises(ValueError):
        lazy.aln.search(lazy, top_k=2, **dict(DNA_OPTIONS, cigar_style="?"))


def test_partition_keys_follow_alias_chains_and_keep_aliases_other_tasks_use():
    from dask._task_spec import Alias, DataNode, Task, TaskRef

    from gpualign_df.dask.graph import partition_keys

    graph = {("data", 0): DataNode(("data", 0), "ACGT"),
             ("mid", 0): Alias(("mid", 0), ("data", 0)),
             ("part", 0): Alias(("part", 0), ("mid", 0)),
             ("data", 1): DataNode(("data", 1), "TTGA"),
             ("part", 1): Alias(("part", 1), ("data", 1)),
             ("user", 0): Task(("user", 0), len, TaskRef(("part", 1)))}

    class Part:
        def __init__(self, key):
            self.key = key

        def __dask_graph__(self):
            return graph

    class Series:
        def to_delayed(self):
            return [Part(("part", 0)), Part(("part", 1))]

    kept, keys = partition_keys(Series())
    assert keys == [("data", 0), ("data", 1)]
    assert set(kept) == {("data", 0), ("data", 1), ("part", 1), ("user", 0)}


def test_tasks_take_persisted_partitions_without_alias_tasks(dna):
    """A persisted Series' partitions are aliases of the persisted keys: the job's tasks
    take the persisted keys themselves, so no alias task runs before them."""
    from dask._task_spec import Alias

    with dask.config.set(scheduler="threads"):
        persisted = partitioned(dna, 3).persist()
        job = persisted.aln.search(persisted, top_k=2, broadcast=True, **DNA_OPTIONS)
        graph = dict(job.__dask_graph__())
        assert not [key for key, task in graph.items() if isinstance(task, Alias)]
        whole = in_memory(persisted)
        check_equal(job, whole.aln.search(whole, top_k=2, **DNA_OPTIONS))


def test_default_task_size_is_larger_on_the_gpu(dna):
    from gpualign_df.dask.accessor import default_cells
    from gpualign_df.dask.plan import DEFAULT_CELLS_PER_TASK, DEFAULT_GPU_CELLS_PER_TASK

    lazy = partitioned(dna, 2)
    assert default_cells(lazy, "auto") == default_cells(lazy, "cpu") == DEFAULT_CELLS_PER_TASK
    assert default_cells(lazy, "cuda") == DEFAULT_GPU_CELLS_PER_TASK > DEFAULT_CELLS_PER_TASK
    long = dd.from_pandas(pd.Series(["ACGT" * 2000] * 800), npartitions=2)   # 4.1e13 cells
    with dask.config.set(scheduler="threads"):
        default = long.aln.plan(long)
        assert default.equals(long.aln.plan(long, cells_per_task=DEFAULT_CELLS_PER_TASK))
        assert len(default) > len(long.aln.plan(long,
                                                 cells_per_task=DEFAULT_GPU_CELLS_PER_TASK))


def test_planning_remembers_lengths_by_dask_name(dna, monkeypatch):
    from gpualign_df.dask import graph as dask_graph

    calls = []

    def counted(part):
        calls.append(len(part))
        return lengths_of(part)

    lengths_of = dask_graph.lengths_of
    monkeypatch.setattr(dask_graph, "lengths_of", counted)
    monkeypatch.setattr(dask_graph, "LENGTHS_CACHE", type(dask_graph.LENGTHS_CACHE)())
    monkeypatch.setattr(dask_graph, "LENGTHS_CACHE_SIZE", 2)
    queries, database = partitioned(dna[:25], 3), partitioned(dna, 4)
    with dask.config.set(scheduler="threads"):
        first = queries.aln.plan(database, cells_per_task=4000)
        assert len(calls) == 3 + 4 and sum(calls) == 25 + 40   # one per partition
        calls.clear()
        assert queries.aln.plan(database, cells_per_task=4000).equals(first)
        assert calls == []                                   # both remembered
        other = partitioned(dna[5:], 2)                      # a third name evicts the oldest
        other.aln.plan(cells_per_task=4000)
        assert len(calls) == 2 and len(dask_graph.LENGTHS_CACHE) == 2
        calls.clear()
        check_equal(queries.aln.search(database, top_k=3, **DNA_OPTIONS),
                    in_memory(queries).aln.search(in_memory(database), top_k=3,
                                                  **DNA_OPTIONS))
        assert len(calls) == 3                               # only the queries' partitions


@pytest.mark.parametrize("broadcast", [True, False])
def test_stale_remembered_lengths_stop_with_a_clear_error(dna, broadcast):
    """If a collection's data changed under the same Dask name, the remembered lengths are
    stale: the job must stop naming the partition, never align shifted or missing rows."""
    from gpualign_df.dask import graph as dask_graph

    queries, database = partitioned(dna[:25], 3), partitioned(dna, 2)
    with dask.config.set(scheduler="threads"):
        queries.aln.plan(database)
        remembered = dask_graph.LENGTHS_CACHE[queries._name]
        dask_graph.LENGTHS_CACHE[queries._name] = [remembered[0][:-1], *remembered[1:]]
        stale = queries.aln.search(database, top_k=2, broadcast=broadcast, **DNA_OPTIONS)
        with pytest.raises(ValueError, match="partition 0 holds 9 rows, but the job was "
                                             "planned when it held 8"):
            stale.compute()
        dask_graph.forget_planned_lengths()
        check_equal(queries.aln.search(database, top_k=2, broadcast=broadcast, **DNA_OPTIONS),
                    in_memory(queries).aln.search(in_memory(database), top_k=2,
                                                  **DNA_OPTIONS))


def test_compute_joins_the_outputs_in_one_task_as_dask_does():
    """compute() ends with one task of this package's own joining the job's output
    partitions (no Dask repartition task), and returns the frame Dask's concatenation of
    those partitions gives, index included."""
    from dask._expr import FinalizeCompute
    from dask.dataframe.core import _concat

    reads = partitioned(pd.Series(["ACGTTGCA", "ACGTAGCA", None, "TTGA", "ACG", "GGTA"],
                                  index=[1, 2, 3, 4, 5, 6]), 3)
    job = reads.aln.pairwise(**DNA_OPTIONS)
    graph = dict(FinalizeCompute(job.expr).optimize().__dask_graph__())
    prefixes = {key[0].rsplit("-", 1)[0] for key in graph if isinstance(key, tuple)}
    assert "gpualign-concatenate" in prefixes
    assert not any(prefix.startswith("repartition") for prefix in prefixes)
    parts = [job.get_partition(k).compute() for k in range(job.npartitions)]
    pd.testing.assert_frame_equal(job.compute(), _concat(parts))
    single = partitioned(pd.Series(["ACGT", "ACGA"]), 1).aln.pairwise(**DNA_OPTIONS)
    assert single.npartitions == 1 and len(single.compute()) == 1


def test_rowwise_preset_equals_in_memory(dna):
    """A preset reaches the workers: the lazy frame equals the in-memory one."""
    rng = np.random.default_rng(23)
    mates = [None if s is None else mutate(rng, s, DNA, 0.15) for s in dna]
    frame = pd.DataFrame({"read": dna.to_numpy(), "mate": mates}, index=dna.index)
    lazy = partitioned(frame, LAYOUTS[0])
    options = dict(mode="sg", preset="gatk-haplotype-to-reference")
    expected = lazy.compute().read.aln.rowwise(lazy.compute().mate, **options)
    check_equal(lazy.read.aln.rowwise(lazy.mate, **options), expected)


def test_rowwise_overhang_equals_in_memory(dna):
    """GATK's aligner through Dask: the lazy frame (with its offset column) equals the
    in-memory one."""
    rng = np.random.default_rng(24)
    mates = ["ACGT" if s is None else mutate(rng, s, DNA, 0.15) or "A" for s in dna]
    reads = ["ACGA" if s is None else s or "C" for s in dna]
    frame = pd.DataFrame({"read": reads, "mate": mates}, index=dna.index)
    lazy = partitioned(frame, LAYOUTS[0])
    options = dict(preset="gatk-read-to-haplotype", overhang="softclip")
    expected = lazy.compute().read.aln.rowwise(lazy.compute().mate, **options)
    assert "offset" in expected.columns
    check_equal(lazy.read.aln.rowwise(lazy.mate, **options), expected)
