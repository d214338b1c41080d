"""Jobs larger than memory: in-memory jobs that cannot fit are refused before any work with
an error that says what would fit, and ``align_batches`` streams any job in bounded batches
whose concatenation is the in-memory frame, row for row."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import api, config, engine

DNA = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, backend="cpu")


def sequences(count: int, seed: int = 0, low: int = 0, high: int = 40) -> pd.Series:
    rng = np.random.default_rng(seed)
    values = ["".join(rng.choice(list("ACGT"), rng.integers(low, high))) for _ in range(count)]
    values[count // 3] = None
    labels = [f"s{k}" for k in rng.permutation(count)]
    return pd.Series(values, index=labels, dtype=object)


JOBS = [
    dict(how="rowwise", mode="sw"),
    dict(how="pairwise", mode="nw"),
    dict(how="pairwise", mode="sg", traceback=False),
    dict(how="search", mode="sw"),
    dict(how="search", mode="sg", top_k=3),
]


@pytest.mark.parametrize("job", JOBS, ids=lambda job: "-".join(map(str, job.values())))
@pytest.mark.parametrize("limits", [dict(stream_batch_pairs=7),
                                    dict(stream_batch_cells=4000.0),
                                    dict(stream_batch_pairs=1)])
def test_batches_concatenate_to_the_in_memory_frame(job, limits):
    queries = sequences(23, seed=1)
    targets = None if job["how"] == "pairwise" else sequences(23 if job["how"] == "rowwise"
                                                              else 11, seed=2)
    expected = gpualign_df.align(queries, targets, **job, **DNA)
    with config.override(**limits):
        frames = list(gpualign_df.align_batches(queries, targets, **job, **DNA))
    assert len(frames) > 2
    joined = pd.concat(frames, ignore_index=True)
    pd.testing.assert_frame_equal(joined, expected)
    # a query's rows never straddle two batches
    filled = [frame for frame in frames if len(frame)]
    for before, after in zip(filled[:-1], filled[1:]):
        assert before["query"].iloc[-1] != after["query"].iloc[0]


def test_batches_respect_their_limits():
    queries = sequences(40, seed=3, low=10, high=20)
    with config.override(stream_batch_pairs=50):
        sizes = [len(frame) for frame in gpualign_df.align_batches(queries, how="pairwise",
                                                                  **DNA)]
    assert sum(sizes) == 40 * 39 // 2
    assert max(sizes) <= 50 or max(sizes) == 39        # one query alone may exceed the limit


def test_an_empty_job_yields_one_empty_frame_with_the_columns():
    frames = list(gpualign_df.align_batches([], [], **DNA))
    assert len(frames) == 1 and len(frames[0]) == 0
    assert list(frames[0].columns) == list(gpualign_df.align([], [], **DNA).columns)


def test_a_result_too_large_for_memory_is_refused_before_any_work(monkeypatch):
    """pairwise of 20,000 sequences is 2e8 rows: tens of GB of frame. Refused at once (the
    engine is never called), naming what would fit; streaming the same job is allowed."""
    called = []
    monkeypatch.setattr(api, "run_pairs", lambda *args, **kwargs: called.append(1))
    monkeypatch.setattr(engine, "available_host_memory", lambda: 16 << 30)
    monkeypatch.setattr(engine, "free_host_memory", lambda: 16 << 30)
    many = pd.Series(["ACGTACGTAC" * 15] * 20_000)
    started = time.perf_counter()
    with pytest.raises(MemoryError) as info:
        gpualign_df.align(many, how="pairwise", **DNA)
    assert time.perf_counter() - started < 5 and not called
    message = str(info.value)
    assert "199,990,000 rows" in message
    for remedy in ("traceback=False", "align_batches", "--out", "Dask"):
        assert remedy in message
    assert isinstance(info.value, engine.HostMemoryError)
    # score only fits in 16 GB * 0.5 at 80 bytes a row? 2e8 * 80 = 16 GB: no; with more memory
    monkeypatch.setattr(engine, "available_host_memory", lambda: 64 << 30)
    monkeypatch.setattr(engine, "free_host_memory", lambda: 64 << 30)
    assert api.job_host_bytes(encoded(many, None, "pairwise", None, False)) < 32 << 30
    # the streamed job starts (its first batch is computed lazily)
    batches = gpualign_df.align_batches(many, how="pairwise", **DNA)
    assert not called
    del batches


def test_a_small_result_reads_no_memory_figure(monkeypatch):
    """The memory check of a job whose result is at most ``UNCHECKED_RESULT_BYTES`` makes
    no system call for the free memory; a larger one's holds it against it."""
    def unread():
        raise AssertionError("a small job read the free memory")

    monkeypatch.setattr(engine, "free_host_memory", unread)
    monkeypatch.setattr(engine, "available_host_memory", unread)
    api.check_host_memory(encoded(["ACGT" * 50] * 20, ["ACGA" * 50] * 20, "rowwise", None,
                                  True))
    rows = api.UNCHECKED_RESULT_BYTES // api.ROW_BYTES_SCORE_ONLY + 1
    job = encoded(["A"] * rows, ["A"] * rows, "rowwise", None, False)
    assert api.job_host_bytes(job, bound=True) > api.UNCHECKED_RESULT_BYTES
    with pytest.raises(AssertionError, match="read the free memory"):
        api.check_host_memory(job)


def encoded(queries, targets, how, top_k, traceback):
    job = api.resolve_job(queries, targets, how=how, mode="sw", matrix=None, match=1,
                          mismatch=-1, gap_open=2, gap_extend=1, free_ends=None, top_k=top_k,
                          traceback=traceback, cigar_style="=", clip=None, backend="cpu",
                          progress=None)
    return api.encode_job(queries, targets, job)


def test_memory_estimate_grows_with_the_job():
    small = encoded(["ACGT"] * 10, None, "pairwise", None, True)
    large = encoded(["ACGT" * 10] * 100, None, "pairwise", None, True)
    assert api.job_host_bytes(small) < api.job_host_bytes(large)
    search = encoded(["ACGT"] * 10, ["ACGTACGT"] * 50, "search", 3, True)
    rows, span = api.rows_and_span(search)
    assert rows == 30 and span == 10 * 3 * 4
    assert api.rows_and_span(search, bound=True) == (30, 10 * 3 * 4)
    # two targets shorter than the queries: the bound (k * m a query) stays above the span
    short = encoded(["ACGT"] * 10, ["AC"] * 2, "search", 3, True)
    assert api.rows_and_span(short) == (20, 10 * 2 * 2)
    assert api.rows_and_span(short, bound=True) == (20, 10 * 2 * 4)


def test_host_budget_reads_the_available_memory_only_beyond_the_free_share(monkeypatch):
    """The free memory (never more than the available one) passes a small need without
    reading the available memory; a need beyond its share reads it and is judged by it;
    where the system tells no free memory, the available memory decides."""
    reads = []

    def available():
        reads.append(1)
        return 8 << 30

    monkeypatch.setattr(engine, "available_host_memory", available)
    monkeypatch.setattr(engine, "free_host_memory", lambda: 2 << 30)
    tuning = config.settings()
    share = tuning.host_memory_share
    assert engine.within_host_budget(int((2 << 30) * share), tuning) and reads == []
    assert engine.within_host_budget(int((2 << 30) * share) + 1, tuning) and reads == [1]
    assert not engine.within_host_budget(int((8 << 30) * share) + 1, tuning)
    monkeypatch.setattr(engine, "free_host_memory", lambda: 0)
    assert engine.within_host_budget(1 << 20, tuning) and len(reads) == 3


def test_free_host_memory_never_exceeds_the_available_memory():
    free = engine.free_host_memory()
    assert 0 < free <= engine.available_host_memory() + (64 << 20)  # read a moment apart
