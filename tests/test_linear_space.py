"""The CPU engine's linear-space traceback (``kernels/cpu_linear.py``) gives the full-matrix
result bit for bit: score, coordinates, CIGAR and statistics, in every mode, for every block
height; the ``traceback_memory`` option routes pairs to it; memory, progress and the stop
flag behave as on the full-matrix path.

A spy on the linear kernel's entry point proves that each comparison really ran the pairs
it is meant to compare in linear space.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import threading
import time

import numba
import numpy as np
import pandas as pd
import psutil
import pytest

import gpualign_df
from gpualign_df import engine
from gpualign_df.kernels import cpu, cpu_linear
from gpualign_df.scoring import MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, make_scoring
from helpers import mutate, parasail_scores, random_sequences, rescore, shared_file

DNA = "ACGT"
PROTEIN = "ARNDCQEGHILKMFPSTWYV"
ENDS = ("query_start", "query_end", "target_start", "target_end")
#: Every subset of the semi-global free ends, the empty one and all four included.
FREE_END_SUBSETS = [ends for size in range(5) for ends in itertools.combinations(ENDS, size)]
MODES = [("sw", None), ("nw", None)] + [("sg", ends) for ends in FREE_END_SUBSETS]
SCORING = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2)


@pytest.fixture
def linear_pairs(monkeypatch):
    """The pair indices that the linear-space kernel aligned (a list, cleared by the test)."""
    seen: list[int] = []
    kernel = cpu_linear.align_pairs_linear

    def spy(query_codes, query_offsets, target_codes, target_offsets, pair_query, pair_target,
            order, *rest):
        seen.extend(order.tolist())
        return kernel(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                      pair_target, order, *rest)

    monkeypatch.setattr(cpu_linear, "align_pairs_linear", spy)
    return seen


def related_pairs(seed: int, count: int, alphabet: str, low: int, high: int):
    """Pairs of lengths ``low..high``: a third unrelated, the others a mutated copy with
    random flanks on either side, so that every free end matters somewhere."""
    rng = np.random.default_rng(seed)
    queries, targets = [], []
    for k in range(count):
        query = random_sequences(rng, 1, alphabet, high, min_length=low)[0]
        if k % 3 == 0:
            target = random_sequences(rng, 1, alphabet, high, min_length=low)[0]
        else:
            target = mutate(rng, query, alphabet, 0.06) or alphabet[0]
            flanks = random_sequences(rng, 4, alphabet, max(1, low // 4))
            target = flanks[0] + target + flanks[1] if k % 2 else target + flanks[1]
            query = flanks[2] + query if k % 4 == 1 else query + flanks[3]
        queries.append(query)
        targets.append(target)
    return queries, targets


def repetitive_pairs() -> tuple[list[str], list[str]]:
    """Tandem repeats and homopolymers: many paths of the best score."""
    pairs = [("AC" * 700, "CA" * 650), ("ACGT" * 350, "ACG" * 480), ("A" * 1500, "A" * 1400),
             ("A" * 1200, "C" * 1300), ("GATTACA" * 200, "GATACA" * 230),
             ("AAAAT" * 300, "AT" * 700), ("AACC" * 300 + "G" * 50, "ACAC" * 310),
             ("T" * 600 + "AC" * 400, "AC" * 420 + "T" * 640)]
    return [q for q, _ in pairs], [t for _, t in pairs]


def assert_linear_equals_full(queries, targets, traceback_memory, *, seen, mode="nw",
                              free_ends=None, scoring=SCORING, rescored=True):
    """The frame with ``traceback_memory`` equals the default one (full matrices, the lane
    path for short pairs), every column, row for row; the pairs whose 4-bit matrix exceeds
    the budget ran in linear space; every CIGAR re-scores to its score."""
    options = dict(mode=mode, free_ends=free_ends, backend="cpu", progress=False, **scoring)
    seen.clear()
    full = gpualign_df.align(queries, targets, **options)
    assert seen == []
    linear = gpualign_df.align(queries, targets, traceback_memory=traceback_memory, **options)
    expected = [k for k, (q, t) in enumerate(zip(queries, targets))
                if engine.needs_linear_space(len(q), len(t), traceback_memory)]
    assert sorted(seen) == expected and expected, (seen, expected)
    pd.testing.assert_frame_equal(linear, full)
    if rescored:
        parsed = make_scoring(scoring.get("matrix"), **{k: v for k, v in scoring.items()
                                                        if k != "matrix"})
        for row, query, target in zip(linear.itertuples(), queries, targets):
            assert rescore(query, target, row, parsed) == row.score
    return linear


# --------------------------------------------------------------------------------------
# the kernel against the full matrix, every block height
# --------------------------------------------------------------------------------------

def full_kernel(query, target, scoring, mode, free):
    m, n = len(query), len(target)
    ops = np.zeros(m + n, np.uint8)
    columns = [np.zeros(1, np.int32) for _ in range(5)]
    op_counts = np.zeros(1, np.int64)
    zero = np.zeros(1, np.int64)
    cpu.align_pairs(query, np.array([0, m]), target, np.array([0, n]), zero, zero, zero,
                    scoring.matrix, scoring.concrete, scoring.gap_open, scoring.gap_extend, mode,
                    *free, True, zero, ops, *columns, op_counts, np.zeros(2, np.int64), 0)
    score, start_i, end_i, start_j, end_j = (int(c[0]) for c in columns)
    return (score, end_i, end_j, start_i, start_j), ops[:op_counts[0]].tobytes()


def linear_kernel(query, target, scoring, mode, free, rows):
    m, n = len(query), len(target)
    ops = np.zeros(m + n, np.uint8)
    control = np.zeros(2, np.int64)
    score, end_i, end_j, start_i, start_j, count = cpu_linear.align_pair_linear(
        query, target, scoring.matrix, scoring.concrete, scoring.gap_open, scoring.gap_extend,
        mode, *free, rows, ops, control, 0)
    assert control[1] == 2 * m * n  # the bar's share of the pair, exactly
    return (score, end_i, end_j, start_i, start_j), ops[:count].tobytes()


def test_kernel_equals_full_matrix_for_every_block_height():
    """Small pairs (empty, single residues, random, homopolymers, tandem repeats) in every
    mode and free-end subset, blocks of 1, 2, 3, 7, 64 rows, m and more than m rows."""
    scoring = make_scoring(**SCORING)
    rng = np.random.default_rng(7)
    codes = [(np.zeros(0, np.uint8), rng.integers(0, 4, 9).astype(np.uint8)),
             (rng.integers(0, 4, 1).astype(np.uint8), rng.integers(0, 4, 12).astype(np.uint8)),
             (rng.integers(0, 4, 11).astype(np.uint8), rng.integers(0, 4, 1).astype(np.uint8)),
             (np.zeros(1, np.uint8), np.zeros(1, np.uint8))]
    for k in range(30):
        m, n = (int(v) for v in rng.integers(2, 70, size=2))
        if k % 3 == 0:
            query, target = np.zeros(m, np.uint8), np.zeros(n, np.uint8)
        elif k % 3 == 1:
            query = np.tile(np.array([0, 1], np.uint8), m)[:m]
            target = np.tile(np.array([1, 0, 1], np.uint8), n)[:n]
        else:
            query = rng.integers(0, 4, m).astype(np.uint8)
            target = rng.integers(0, 4, n).astype(np.uint8)
        codes.append((query, target))
    flags = [(mode, (True,) * 4) for mode in (MODE_LOCAL, MODE_GLOBAL)]
    flags += [(MODE_SEMIGLOBAL, free) for free in itertools.product((False, True), repeat=4)]
    compared = 0
    for query, target in codes:
        for mode, free in flags:
            expected = full_kernel(query, target, scoring, mode, free)
            for rows in sorted({1, 2, 3, 7, 64, max(1, len(query)), len(query) + 5}):
                assert linear_kernel(query, target, scoring, mode, free, rows) == expected, (
                    len(query), len(target), mode, free, rows)
                compared += 1
    assert compared > 3000


# --------------------------------------------------------------------------------------
# the engine: traceback_memory routes pairs to the linear path, with the same frame
# --------------------------------------------------------------------------------------

def mode_id(mode: str, ends) -> str:
    """``sg-qs-te`` for semi-global with query_start and target_end free."""
    if ends is None:
        return mode
    short = [end.replace("query_", "q").replace("target_", "t").replace("start", "s")
             .replace("end", "e") for end in ends]
    return "sg-" + ("-".join(short) or "none")


@pytest.mark.parametrize("mode,free_ends", MODES, ids=[mode_id(*mode) for mode in MODES])
def test_random_dna_equals_full_matrix_in_every_mode(mode, free_ends, linear_pairs):
    """Pairs of 1-2.5 kbp (with flanks up to 3 kbp): blocks of 1 row (traceback_memory 600,
    below two rows), a few rows, and 64 rows or more."""
    queries, targets = related_pairs(MODES.index((mode, free_ends)), 3, DNA, 1000, 2500)
    for traceback_memory in (600, 4000, 64 * 1201):
        assert_linear_equals_full(queries, targets, traceback_memory, seen=linear_pairs,
                                  mode=mode, free_ends=free_ends)


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_long_dna_pairs_equal_full_matrix(mode, linear_pairs):
    """Pairs of 1-5 kbp with a budget of a few KB: blocks of a few rows, hundreds of them."""
    queries, targets = related_pairs(11, 3, DNA, 1000, 5000)
    assert_linear_equals_full(queries, targets, 8000, seen=linear_pairs, mode=mode)


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None), ("sg", None),
                                            ("sg", ("target_start", "target_end")),
                                            ("sg", ("query_start", "query_end"))])
@pytest.mark.parametrize("traceback_memory", [1, 3000, 1 << 16])
def test_repetitive_sequences_equal_full_matrix(mode, free_ends, traceback_memory,
                                                linear_pairs):
    """Tandem repeats and homopolymers, whose many equal-score paths only the tie-breaking
    rules decide: the recomputed nibbles must be the full matrix's for the walk to agree."""
    queries, targets = repetitive_pairs()
    assert_linear_equals_full(queries, targets, traceback_memory, seen=linear_pairs,
                              mode=mode, free_ends=free_ends)


@pytest.mark.parametrize("mode,free_ends", MODES[:3] + [("sg", ("target_start", "target_end")),
                                                        ("sg", ("query_start", "query_end"))])
def test_empty_and_single_residue_partners(mode, free_ends, linear_pairs):
    """A 1-residue partner on either side takes the linear path with a budget of 1 byte;
    empty partners never need it (no matrix) and sit in the same job."""
    rng = np.random.default_rng(3)
    long_ = random_sequences(rng, 2, DNA, 3000, min_length=2000)
    queries = ["A", long_[0], "A", "C", "", long_[1], ""]
    targets = [long_[1], "G", "A", "A", long_[0], "", ""]
    options = dict(mode=mode, free_ends=free_ends, backend="cpu", progress=False, **SCORING)
    full = gpualign_df.align(queries, targets, **options)
    linear_pairs.clear()
    linear = gpualign_df.align(queries, targets, traceback_memory=1, **options)
    assert sorted(linear_pairs) == [0, 1]  # 1 x 1 fits one byte; empty pairs have no matrix
    pd.testing.assert_frame_equal(linear, full)


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_protein_pairs_blosum62_equal_full_matrix_and_parasail(mode, linear_pairs):
    queries, targets = related_pairs(23, 4, PROTEIN, 300, 1500)
    scoring = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1)
    frame = assert_linear_equals_full(queries, targets, 2000, seen=linear_pairs, mode=mode,
                                      scoring=scoring)
    expected = parasail_scores(queries, targets, make_scoring("BLOSUM62", gap_open=11,
                                                              gap_extend=1), mode)
    assert frame["score"].tolist() == expected


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None), ("sg", None),
                                            ("sg", ("target_start", "target_end")),
                                            ("sg", ("query_end",))])
def test_dna_scores_equal_parasail(mode, free_ends, linear_pairs):
    queries, targets = related_pairs(31, 4, DNA, 500, 1500)
    frame = assert_linear_equals_full(queries, targets, 5000, seen=linear_pairs, mode=mode,
                                      free_ends=free_ends)
    expected = parasail_scores(queries, targets, make_scoring(**SCORING), mode, free_ends)
    assert frame["score"].tolist() == expected


def test_cigar_style_and_soft_clips_equal_full_matrix(linear_pairs):
    queries, targets = related_pairs(41, 3, DNA, 800, 1600)
    options = dict(mode="sw", backend="cpu", cigar_style="M", clip="soft", **SCORING)
    full = gpualign_df.align(queries, targets, **options)
    linear = gpualign_df.align(queries, targets, traceback_memory=3000, **options)
    assert sorted(linear_pairs) == [0, 1, 2]
    pd.testing.assert_frame_equal(linear, full)


def test_default_budget_is_a_share_of_available_memory(monkeypatch, settings, linear_pairs):
    """Without traceback_memory the budget is traceback_memory_share of the memory
    available: a pair of 2,000 x 2,001 (2 MB of matrix) stays on the full path with 100 MB
    available, and goes linear with 4 MB available, or with a share of 1%."""
    queries, targets = related_pairs(5, 2, DNA, 2000, 2001)
    options = dict(mode="nw", backend="cpu", progress=False, **SCORING)
    monkeypatch.setattr(engine, "available_host_memory", lambda: 100 << 20)
    full = gpualign_df.align(queries, targets, **options)
    assert linear_pairs == []
    monkeypatch.setattr(engine, "available_host_memory", lambda: 4 << 20)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, **options), full)
    assert sorted(linear_pairs) == [0, 1]
    linear_pairs.clear()
    monkeypatch.setattr(engine, "available_host_memory", lambda: 100 << 20)
    settings(traceback_memory_share=0.01)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, **options), full)
    assert sorted(linear_pairs) == [0, 1]


def test_budget_over_the_host_budget_still_runs_in_linear_space(monkeypatch, linear_pairs):
    """An explicit traceback_memory above what the job may hold does not make a matrix fit:
    the pair runs in linear space instead of being refused."""
    queries, targets = related_pairs(6, 1, DNA, 3000, 3000)
    options = dict(mode="sw", backend="cpu", progress=False, **SCORING)
    full = gpualign_df.align(queries, targets, **options)
    monkeypatch.setattr(engine, "available_host_memory", lambda: 4 << 20)  # 2 MiB job budget
    linear = gpualign_df.align(queries, targets, traceback_memory=1 << 40, **options)
    assert linear_pairs == [0]
    pd.testing.assert_frame_equal(linear, full)


def test_search_and_batches_pass_the_budget(linear_pairs, settings):
    queries, targets = related_pairs(8, 4, DNA, 700, 1200)
    options = dict(mode="sw", backend="cpu", progress=False, **SCORING)
    full = gpualign_df.align(queries, targets, how="search", top_k=2, **options)
    linear = gpualign_df.align(queries, targets, how="search", top_k=2, traceback_memory=2000,
                               **options)
    # the kept pairs are aligned again in their alignments' rectangles: those whose 4-bit
    # matrix still passes 2,000 bytes go linear
    assert 0 < len(linear_pairs) <= 8
    pd.testing.assert_frame_equal(linear, full)
    linear_pairs.clear()
    settings(stream_batch_pairs=1)
    frames = list(gpualign_df.align_batches(queries, targets, traceback_memory=2000, **options))
    assert len(frames) == 4 and sorted(linear_pairs) == [0, 0, 0, 0]  # one pair per batch
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True),
                                  gpualign_df.align(queries, targets, **options))


def test_accessor_passes_the_budget(linear_pairs):
    queries, targets = related_pairs(9, 2, DNA, 700, 1200)
    reads, refs = pd.Series(queries, index=["a", "b"]), pd.Series(targets, index=["x", "y"])
    options = dict(mode="nw", backend="cpu", **SCORING)
    linear = reads.aln.rowwise(refs, traceback_memory=2000, **options)
    assert sorted(linear_pairs) == [0, 1]
    pd.testing.assert_frame_equal(linear, reads.aln.rowwise(refs, **options))


def test_dask_passes_the_budget(linear_pairs):
    dd = pytest.importorskip("dask.dataframe")
    queries, targets = related_pairs(10, 4, DNA, 700, 1200)
    frame = dd.from_pandas(pd.DataFrame({"q": queries, "t": targets}), npartitions=2,
                           sort=False)
    options = dict(mode="sg", backend="cpu", **SCORING)
    linear = frame.q.aln.rowwise(frame.t, traceback_memory=2000, **options).compute(
        scheduler="sync")
    assert sorted(linear_pairs) == [0, 0, 1, 1]  # positions within each partition
    pd.testing.assert_frame_equal(linear.reset_index(drop=True),
                                  gpualign_df.align(queries, targets, **options))


# --------------------------------------------------------------------------------------
# the rule, memory, threads, progress and the stop flag
# --------------------------------------------------------------------------------------

def test_the_budget_rule(settings):
    tuning = settings(traceback_memory_share=0.25)
    assert engine.traceback_budget(None, 1000, tuning) == 250
    assert engine.traceback_budget(77, 1000, tuning) == 77
    assert engine.needs_linear_space(100_000, 100_000, 1 << 32) is True  # 5e9: no overflow
    assert engine.needs_linear_space(3, 4, 6) is False
    assert engine.needs_linear_space(3, 4, 5) is True
    lengths = np.array([10, 3, 0, 1], dtype=np.int32)
    np.testing.assert_array_equal(engine.needs_linear_space(lengths, lengths[::-1], 4),
                                  [True, False, False, True])
    big = np.array([100_000], dtype=np.int32)
    assert engine.needs_linear_space(big, big, 1 << 32).tolist() == [True]


def test_block_rows_fit_the_budget():
    m = np.array([1, 5, 100, 5000, 51_025, 51_025])
    n = np.array([9, 5, 100, 4999, 51_024, 51_024])
    rows = cpu_linear.block_rows(m, n, 1 << 28, 64)
    assert rows.tolist()[:3] == [1, 5, 64]            # at most m; at least 64 where it can
    assert 64 <= rows[3] <= 4 * np.sqrt(5000) + 2 and 850 < rows[4] < 950
    assert (rows * ((n + 1) // 2) <= 1 << 28).all()
    tight = cpu_linear.block_rows(m, n, 5000, 64)
    assert tight.tolist() == [1, 5, 64, 2, 1, 1]      # the block's nibbles fit 5000 bytes
    assert cpu_linear.linear_bytes(m[4:5], n[4:5], rows[4:5])[0] < 60 << 20


def test_a_pair_that_does_not_fit_even_in_linear_space_is_refused(monkeypatch):
    """Checkpoints plus one block over the job's host budget: refused before any kernel
    runs, naming the lengths and the least memory it needs; where a small traceback_memory
    made the checkpoint rows many, saying which traceback_memory would fit."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a kernel ran")

    monkeypatch.setattr(cpu_linear, "align_pairs_linear", forbidden)
    monkeypatch.setattr(cpu, "align_pairs", forbidden)
    monkeypatch.setattr(engine, "available_host_memory", lambda: 4 << 20)   # 2 MiB job budget
    options = dict(mode="nw", backend="cpu", **SCORING)
    # fewest bytes: 8 * ceil(30000 / 693) * 29001 checkpoints + 693 * 14500 block + 2 rows
    fewest = 8 * 44 * 29001 + 693 * 14500 + 8 * 29001
    started = time.perf_counter()
    with pytest.raises(engine.HostMemoryError,
                       match=rf"lengths 30000 x 29000 needs 0.0 GiB \({fewest:,} bytes\) of host "
                             rf"memory for its traceback even in linear space, more than the "
                             rf"0.0 GiB this job may use .*traceback=False") as info:
        gpualign_df.align(["A" * 30_000], ["C" * 29_000], **options)
    assert "traceback_memory" not in str(info.value)
    with pytest.raises(engine.HostMemoryError,
                       match=r"lengths 3000 x 3000 needs .* in blocks of 1 rows .* give a "
                             r"traceback_memory of at least 330,000 bytes"):
        gpualign_df.align(["A" * 3000], ["C" * 3000], traceback_memory=100, **options)
    assert time.perf_counter() - started < 2


def test_threads_count_the_linear_pairs_memory(monkeypatch):
    """Three 3,000 x 3,000 pairs whose full matrices (4.5 MB) would fit one at a time in the
    job's 6.75 MB take the linear path (budget 3.4 MB) and run at once (on three threads, or
    on every thread where there are fewer)."""
    rng = np.random.default_rng(2)
    queries = ["".join(rng.choice(list(DNA), 3000)) for _ in range(3)]
    targets = ["".join(rng.choice(list(DNA), 3000)) for _ in range(3)]
    options = dict(mode="nw", backend="cpu", **SCORING)
    expected = gpualign_df.align(queries, targets, **options)
    threads_used = []
    real = engine.cpu_threads

    def spy(*args, **kwargs):
        threads_used.append(real(*args, **kwargs))
        return threads_used[-1]

    monkeypatch.setattr(engine, "cpu_threads", spy)
    monkeypatch.setattr(engine, "available_host_memory", lambda: 2 * 3000 * 1501 * 3 // 2)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, **options), expected)
    assert len(threads_used) == 1 and threads_used[0] >= min(3, numba.get_num_threads())
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, traceback_memory=1 << 30,
                                                    **options), expected)
    assert threads_used[-1] == 1   # full matrices: one at a time


def test_progress_counts_twice_the_cells_and_never_passes_the_total(bars, settings):
    """A linear-space pair counts its cells twice (the fill, then the recomputation topped
    up to its cells): the bar moves within the pair and ends exactly at its total."""
    settings(progress_interval=0.002)
    rng = np.random.default_rng(1)
    query, target = ("".join(rng.choice(list(DNA), 4000)) for _ in range(2))
    short = ("ACGT" * 50, "ACGA" * 50)                  # 200 x 100 bytes: the full matrix
    frame = gpualign_df.align([query, short[0]], [target, short[1]], mode="nw",
                              traceback_memory=50_000, backend="cpu", **SCORING)
    assert frame["score"].notna().all()
    (bar,) = bars
    assert bar.total == 2 * 4000 * 4000 + 200 * 200
    assert bar.n == bar.total and bar.updates == sorted(bar.updates)
    assert len([value for value in bar.updates if 0 < value < bar.total]) >= 2


def test_the_stop_flag_stops_the_recomputation_within_a_row():
    """The flag set while the traceback recomputes its blocks (after the forward fill's
    cells are counted) ends the pair at once, its outputs untouched."""
    rng = np.random.default_rng(4)
    scoring = make_scoring(**SCORING)

    def arguments(m, n, control):
        codes = rng.integers(0, 4, m + n).astype(np.uint8)
        outputs = [np.full(1, -7, np.int32) for _ in range(5)] + [np.zeros(1, np.int64)]
        return outputs, (codes, np.array([0, m, m + n]), codes, np.array([0, m, m + n]),
                         np.array([0]), np.array([1]), np.array([0]), np.array([64]),
                         scoring.matrix, scoring.concrete, scoring.gap_open, scoring.gap_extend,
                         MODE_GLOBAL, True, True, True, True, np.array([0]),
                         np.zeros(m + n, np.uint8), *outputs, control, 0)

    warm = np.zeros(2, np.int64)
    cpu_linear.align_pairs_linear(*arguments(300, 200, warm)[1])   # compiled, and counts
    assert warm[1] == 2 * 300 * 200
    m = n = 10_000
    control = np.zeros(2, np.int64)
    outputs, call = arguments(m, n, control)
    worker = threading.Thread(target=cpu_linear.align_pairs_linear, args=call)
    worker.start()
    deadline = time.perf_counter() + 30
    while control[1] <= m * n and worker.is_alive() and time.perf_counter() < deadline:
        time.sleep(0.0002)
    control[0] = 1
    stopped = time.perf_counter()
    worker.join(5)
    assert not worker.is_alive() and time.perf_counter() - stopped < 0.5
    assert m * n < control[1] < 2 * m * n, "stopped outside the recomputation"
    assert [int(column[0]) for column in outputs] == [-7] * 5 + [0]


# --------------------------------------------------------------------------------------
# the 51 kbp pair (slow: about a minute; python -m pytest -m slow tests/test_linear_space.py)
# --------------------------------------------------------------------------------------

PEAK_SCRIPT = textwrap.dedent("""
    import json, resource, sys, time
    import psutil
    sys.path.insert(0, {tests!r})
    import gpualign_df
    from helpers import read_fasta
    first, second = read_fasta(__import__("pathlib").Path({path!r}))
    memory = {memory}
    options = dict(mode="nw", matrix="EDNAFULL", gap_open=10, gap_extend=1, backend="cpu",
                   progress=False, traceback_memory=memory)
    gpualign_df.align([first[:3000]], [second[:3000]], **options)   # compile, read caches
    before = psutil.Process().memory_info().rss // 1024
    started = time.perf_counter()
    frame = gpualign_df.align([first], [second], **options)
    seconds = time.perf_counter() - started
    # this process's own peak (VmHWM, KiB): ru_maxrss would carry the peak of the pytest
    # process that forked it, however large that had grown
    try:
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    grown = peak - before   # both KiB
    row = {{key: (value if isinstance(value, str) else int(value))
           for key, value in frame.iloc[0].drop(["query", "target", "identity"]).items()}}
    print(json.dumps(dict(row=row, seconds=seconds, grown_kib=grown)))
""")


def run_51kbp(path, traceback_memory: int) -> dict:
    from pathlib import Path

    script = PEAK_SCRIPT.format(tests=str(Path(__file__).parent), path=str(path),
                                memory=traceback_memory)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_51kbp_pair_in_linear_space_equals_full_matrix_in_little_memory():
    """hg38 vs CHM13, 51,025 x 51,024 bp, global with CIGAR: a 1.3 GB traceback matrix, run
    with traceback_memory=2**28 in linear space (a few tens of MB), and with the full
    matrix; the same row, and the linear run's peak RSS grows far less than 1.3 GB."""
    path = shared_file("hg38_chm13_51kbp_pair.fasta.gz")
    if psutil.virtual_memory().available < 6 << 30:
        pytest.skip("the full-matrix reference needs about 3 GB of free host memory")
    linear = run_51kbp(path, 1 << 28)
    full = run_51kbp(path, 1 << 32)
    assert linear["row"] == full["row"]
    assert linear["row"]["length"] >= 51_025 and linear["row"]["cigar"]
    assert linear["grown_kib"] * 1024 < 200 << 20, linear      # the matrix is 1.3 GB
    assert full["grown_kib"] * 1024 > 1_300_000_000, full     # the reference held it
    print(f"\n51 kbp nw: linear {linear['seconds']:.1f} s, +{linear['grown_kib'] / 1024:.0f} MiB "
          f"peak RSS; full {full['seconds']:.1f} s, +{full['grown_kib'] / 1024:.0f} MiB")
