"""The CUDA kernels equal the CPU engine exactly (score, coordinates, CIGAR, statistics).

In CI these run under the CUDA simulator (conftest sets NUMBA_ENABLE_CUDASIM=1), so inputs
stay tiny; on a GPU machine run them with GPUALIGN_REAL_GPU=1 to use the device. Jobs take
the batch path (the planner's inter-task, band and linear-space kernels) whatever their
size; the small-batch path has its own tests (``test_small_batches.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df
import gpualign_df.gpu
from gpualign_df import config
from helpers import mutate, random_sequences

# the planner's kernels, which these tests' small jobs reach only off the small-batch path
pytestmark = pytest.mark.usefixtures("batch_path")

MODES = [("sw", None), ("nw", None), ("sg", None), ("sg", ("target_start", "target_end")),
         ("sg", ("query_start", "query_end")), ("sg", ("query_end",)), ("sg", ("target_start",))]


def small_pairs(seed: int, alphabet: str, count: int = 36, max_length: int = 40):
    rng = np.random.default_rng(seed)
    queries = random_sequences(rng, count, alphabet, max_length)
    targets = [mutate(rng, query, alphabet, 0.1) if k % 3 else
               random_sequences(rng, 1, alphabet, max_length)[0]
               for k, query in enumerate(queries)]
    queries[:4] = ["", "A", "", alphabet[1]]           # empty and one-residue sequences
    targets[:4] = [alphabet[:5], "", "", alphabet[1]]
    return queries, targets


@pytest.fixture
def planned(monkeypatch):
    """Every batch the engine plans from here on, in order (a spy on ``plan_batches``)."""
    batches = []
    original = gpualign_df.gpu.batches.plan_batches

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        batches.append(result)
        return result

    monkeypatch.setattr(gpualign_df.gpu.batches, "plan_batches", recording)
    return batches


def both_engines(queries, targets, **options):
    cpu = gpualign_df.align(queries, targets, backend="cpu", **options)
    gpu = gpualign_df.align(queries, targets, backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    return cpu


@pytest.mark.parametrize("mode,free_ends", MODES)
def test_dna_kernels_equal_cpu(mode, free_ends):
    queries, targets = small_pairs(3, "ACGT")
    frame = both_engines(queries, targets, mode=mode, free_ends=free_ends, match=2, mismatch=-3,
                         gap_open=5, gap_extend=2)
    assert frame["score"].notna().all()


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_protein_kernels_equal_cpu(mode):
    queries, targets = small_pairs(4, "ARNDCQEGHILKMFPSTWYVXBZ*", count=20)
    both_engines(queries, targets, mode=mode, matrix="BLOSUM62", gap_open=11, gap_extend=1)


def test_linear_gaps_styles_clips_and_score_only_equal_cpu():
    queries, targets = small_pairs(5, "ACGTN")
    both_engines(queries, targets, mode="sw", match=1, mismatch=-1, gap_open=2, gap_extend=2,
                 cigar_style="M", clip="soft")
    both_engines(queries, targets, mode="sg", matrix="EDNAFULL", gap_open=10, gap_extend=1,
                 traceback=False)


def test_ties_and_nulls_equal_cpu():
    queries = ["ACACACACAC", "AAAAAAAA", None, "ACGTACGT", "GGGG"]
    targets = ["ACAC", "AAAA", "ACGT", None, "CCCCGGGGCCCC"]
    for mode in ("sw", "nw", "sg"):
        frame = both_engines(queries, targets, mode=mode, match=1, mismatch=-1, gap_open=1,
                             gap_extend=1)
        assert frame["score"].isna().tolist() == [False, False, True, True, False]


@pytest.mark.parametrize("traceback", [True, False])
def test_whole_rowwise_jobs_take_row_numbers_and_equal_pair_lists(traceback):
    """A whole rowwise job on the GPU (``every_row``: row numbers and lengths where the
    engine's arrays live, no pair list or length array of the host's) returns the arrays
    the same pairs return through pair lists (the route of every other job), with null
    rows and empty sequences among them (the CPU engine's frames equal these jobs' in
    the tests above, whose whole rowwise jobs take this route)."""
    from gpualign_df.api import encode_job, resolve_job
    from gpualign_df.engine import run_pairs

    queries, targets = small_pairs(23, "ACGTN")
    queries[7], targets[11] = None, None
    options = dict(mode="sg", match=2, mismatch=-3, gap_open=5, gap_extend=2,
                   traceback=traceback)
    job = resolve_job(pd.Series(queries), pd.Series(targets), how="rowwise", matrix=None,
                      free_ends=None, top_k=None, cigar_style="=", clip=None, backend="cuda",
                      progress=False, **options)
    encoded = encode_job(pd.Series(queries), pd.Series(targets), job)
    rows = np.arange(len(queries), dtype=np.int64)
    whole, listed = (run_pairs(encoded.queries, encoded.targets, rows, rows, job,
                               every_row=every_row) for every_row in (True, False))
    assert (whole.valid == listed.valid).all() and not whole.valid[[7, 11]].any()
    names = ["score", "query_end", "target_end"] + (
        ["query_start", "target_start", "cigar_offsets", "cigar_chars"] if traceback else [])
    for name in names:
        np.testing.assert_array_equal(getattr(whole, name), getattr(listed, name))
    if traceback:
        for name, values in whole.stats.items():
            np.testing.assert_array_equal(values, listed.stats[name])


def test_search_and_pairwise_on_the_gpu_equal_cpu():
    sequences = pd.Series(["ACGTTGCA", "ACGTAGCA", "TTGCA", "", "GGACGTT"], index=list("abcde"))
    cpu = sequences.aln.pairwise(mode="sw", match=2, mismatch=-3, backend="cpu")
    gpu = sequences.aln.pairwise(mode="sw", match=2, mismatch=-3, backend="cuda")
    pd.testing.assert_frame_equal(cpu, gpu)
    cpu = sequences.aln.search(sequences, top_k=2, mode="nw", match=2, mismatch=-3, backend="cpu")
    gpu = sequences.aln.search(sequences, top_k=2, mode="nw", match=2, mismatch=-3, backend="cuda")
    pd.testing.assert_frame_equal(cpu, gpu)


@pytest.mark.parametrize("mode,free_ends", [
    pytest.param("sw", None, marks=pytest.mark.slow),
    pytest.param("nw", None, marks=pytest.mark.slow),
    pytest.param("sg", None, marks=pytest.mark.slow),
    pytest.param("sg", ("target_start", "target_end"), marks=pytest.mark.slow),
    pytest.param("sg", ("query_end",), marks=pytest.mark.slow)])
def test_long_pair_kernel_equals_cpu(settings, mode, free_ends):
    """Every non-empty pair through the band (long-pair) kernel; under the simulator with
    bands of 4 lanes (32 rows), so that pairs take several bands. (Slow set: the quick set
    runs band fills in every mode elsewhere: local with traceback in the linear-space
    test, global in the split and rows-a-lane tests, read to reference score only in the
    windows' test and with traceback in the walk's.)"""
    settings(inter_max_cells=0)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    queries, targets = small_pairs(9, "ACGT", count=8, max_length=45)
    both_engines(queries, targets, mode=mode, free_ends=free_ends, match=2, mismatch=-3,
                 gap_open=5, gap_extend=2)


@pytest.mark.parametrize("traceback", [True, False])
def test_job_of_short_long_and_null_pairs_equals_cpu(settings, planned, traceback):
    """Host lengths with a null row: short pairs go to the inter-task kernel and long pairs
    to the band kernel, split on the host; one frame in row order, equal to the CPU's."""
    settings(inter_max_cells=600)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    queries, targets = small_pairs(17, "ACGT", count=14, max_length=45)
    queries[5] = None
    frame = both_engines(pd.Series(queries), pd.Series(targets), mode="nw", match=2,
                         mismatch=-3, gap_open=5, gap_extend=2, traceback=traceback)
    assert {batch.kind for batches in planned for batch in batches} == {"inter", "long"}
    assert frame["score"].isna().sum() == 1


def test_few_pairs_send_medium_pairs_to_the_band_kernel(settings, planned):
    """A job of fewer than ``inter_min_pairs`` pairs runs its pairs of more than
    ``inter_small_cells`` cells on the band kernel (one thread per pair cannot fill the
    GPU); a job of that many pairs keeps them on the inter-task kernel. Frames equal the
    CPU's either way."""
    settings(inter_small_cells=600, inter_min_pairs=8)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    queries, targets = small_pairs(19, "ACGT", count=7, max_length=45)
    options = dict(mode="sg", match=2, mismatch=-3, gap_open=5, gap_extend=2)
    few = both_engines(pd.Series(queries), pd.Series(targets), **options)
    assert {batch.kind for batches in planned for batch in batches} == {"inter", "long"}
    planned.clear()
    settings(inter_min_pairs=7)
    pd.testing.assert_frame_equal(both_engines(pd.Series(queries), pd.Series(targets),
                                               **options), few)
    assert {batch.kind for batches in planned for batch in batches} == {"inter"}


@pytest.mark.parametrize("mode,free_ends", [
    pytest.param("sw", None, marks=pytest.mark.slow), ("nw", None),
    pytest.param("sg", ("query_start", "target_end"), marks=pytest.mark.slow)])
@pytest.mark.parametrize("score_rows,traceback_rows", [
    (2, 4), pytest.param(8, 8, marks=pytest.mark.slow)])
def test_long_pair_rows_a_lane_equal_cpu(monkeypatch, settings, mode, free_ends, score_rows,
                                         traceback_rows):
    """Bands of 2, 4 or 8 rows a lane give the CPU's frame with and without the traceback
    (at 4 rows two lanes join their nibbles into one strip's words); a spy checks that the
    fills took the rows asked for."""
    settings(inter_max_cells=0, band_rows=((None, score_rows, traceback_rows),))
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    taken = []
    lane_rows = gpualign_df.gpu.long.lane_rows

    def spy(tuning, traceback, longest):
        taken.append((traceback, lane_rows(tuning, traceback, longest)))
        return taken[-1][1]

    monkeypatch.setattr(gpualign_df.gpu.long, "lane_rows", spy)
    queries, targets = small_pairs(17, "ACGT", count=6, max_length=45)
    queries[0], targets[0] = "ACGTTACG" * 5, "ACGTACG" * 6  # repeats: many equal paths
    for traceback in (True, False):
        both_engines(queries, targets, mode=mode, free_ends=free_ends, match=2, mismatch=-3,
                     gap_open=5, gap_extend=2, traceback=traceback)
    assert set(taken) == {(True, traceback_rows), (False, score_rows)}


def test_band_fills_count_the_bands_that_work_at_once():
    """A band trails the band above by its height plus two batches of words (the one it
    checks and the one loaded ahead), so the warps a fill needs follow the columns, not the
    bands (the ``band_warps`` setting)."""
    working = gpualign_df.gpu.long.working_bands
    trail = gpualign_df.kernels.band.band_trail
    assert trail(4) == 128 + 64 and trail(8) == 256 + 64 and trail(4, 2) == 8 + 4
    assert working(np.array([782]), np.array([100_000]), 192) == 522   # 100 kbp, 4 rows
    assert working(np.array([3, 100]), np.array([50_000, 1000]), 320) == 3 + 5


def test_score_only_fills_of_few_bands_take_two_rows(settings):
    """A score-only fill whose bands all work at once and are fewer than the
    ``narrow_bands`` share of the warp schedulers takes 2 rows a lane (its time is one
    band's steps); a fill that fills them, a tall pair (a chain of bands, which 2 rows
    lengthen), or the setting at 0, keeps ``band_rows``'."""
    from gpualign_df.gpu.long import multiprocessors, score_rows
    from gpualign_df.gpu.device import current_device

    schedulers = 1 if gpualign_df.gpu.simulator() else 4 * multiprocessors(current_device())
    m, n = np.array([10_000]), np.array([1_000_000])  # 79 bands at 4 rows, all working
    wide = (np.full(2 * schedulers, 100_000), np.full(2 * schedulers, 100_000))
    settings(narrow_bands=80 / schedulers)
    assert score_rows(config.settings(), m, n) == 2
    assert score_rows(config.settings(), *wide) == 4
    assert score_rows(config.settings(), n, m) == 4  # 1 Mbp x 10 kbp: 7,813 bands, 53 working
    settings(narrow_bands=1e9)
    assert score_rows(config.settings(), n, m) == 4
    settings(narrow_bands=80 / schedulers)
    settings(narrow_bands=79 / schedulers)
    assert score_rows(config.settings(), m, n) == 4
    settings(narrow_bands=0.0, band_rows=((None, 8, 4),))
    assert score_rows(config.settings(), m, n) == 8


def test_halves_meeting_in_the_middle_equal_cpu(monkeypatch, settings):
    """A global score-only batch of wide pairs runs as two half fills joined at the middle
    column (a spy checks it did): scores equal the CPU engine's, with a deletion across the
    middle (opened on one side, extended on the other), tandem repeats (many equal paths),
    a one-residue query and a best path along row m across the middle."""
    settings(inter_max_cells=0, narrow_bands=1e9)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    halves = []
    fill_halves = gpualign_df.gpu.long.fill_halves

    def spy(*args):
        halves.append(True)
        return fill_halves(*args)

    monkeypatch.setattr(gpualign_df.gpu.long, "fill_halves", spy)
    queries = ["ACGTTGCAGGTC", "ACGTTACG" * 2, "G", "TTTT"]
    targets = ["ACGTTG" + "A" * 24 + "CAGGTC", "ACGTACG" * 5, "A" * 30, "CCCCCCCCCCCCTTTT"]
    options = dict(mode="nw", match=2, mismatch=-3, gap_open=5, gap_extend=1, traceback=False)
    frame = both_engines(pd.Series(queries), pd.Series(targets), **options)
    assert halves and frame["score"].notna().all()
    halves.clear()  # one pair of an odd length: its right half is a column longer
    both_engines(pd.Series(queries[1:2]), pd.Series(targets[1:2]), **options)
    assert halves


def test_halves_only_where_global_score_only_wide_and_narrow(settings):
    """Halves take a batch only with the setting on, global mode without free ends, no
    traceback, every pair at least 1 x 2 and a narrow fill of wide pairs (a tall pair
    transposed where the matrix is symmetric)."""
    from types import SimpleNamespace

    from gpualign_df.gpu.long import meets_in_middle
    from gpualign_df.scoring import parse_mode

    settings(narrow_bands=1e9, band_lanes=4)

    def takes(m, n, mode="nw", free_ends=None, traceback=False, symmetric=True, **changes):
        settings(**changes)
        parsed = parse_mode(mode, free_ends)
        job = SimpleNamespace(flags=(parsed.code, *parsed.flags(), traceback),
                              traceback=traceback, tuning=config.settings(), symmetric=symmetric)
        batch = SimpleNamespace(query_lengths=np.array(m), target_lengths=np.array(n))
        return meets_in_middle(job, batch)

    assert takes([40, 10], [200, 100])
    assert not takes([40, 10], [200, 100], band_halves=False)
    assert not takes([40, 10], [200, 100], band_halves=True, traceback=True)
    assert not takes([40], [200], "sw") and not takes([40], [200], "sg")
    assert not takes([40], [200], "sg", ("target_end",))
    assert not takes([40, 1], [200, 1])        # a pair of one column either way round
    assert takes([40, 10], [200, 1])           # (10 x 1 runs as 1 x 10)
    assert not takes([40, 0], [200, 100])      # an empty query
    assert takes([4000], [200])                # tall, transposed: 200 x 4000
    assert not takes([4000], [200], symmetric=False)  # its bands cannot all work at once
    assert not takes([40], [200], narrow_bands=0.0)


def spy_on(monkeypatch, name: str) -> list:
    """The arguments of every call of ``gpualign_df.gpu.long.<name>`` from here on."""
    calls = []
    original = getattr(gpualign_df.gpu.long, name)

    def spy(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(gpualign_df.gpu.long, name, spy)
    return calls


def test_tall_pairs_run_transposed_in_halves(monkeypatch, settings):
    """A global score-only pair whose query is the longer runs transposed in halves (a
    spy checks it did) under a symmetric matrix, with the CPU engine's scores and end
    cells; under an asymmetric custom matrix it runs as given, with the CPU's frame too."""
    settings(inter_max_cells=0, narrow_bands=1e9)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    halves = spy_on(monkeypatch, "fill_halves")
    targets = ["ACGTTGCAGGTC", "ACGTTACG", "G", "TTTT"]
    queries = ["ACGTTG" + "A" * 24 + "CAGGTC", "ACGTACG" * 5, "A" * 30, "CCCCCCCCCCCCTTTT"]
    options = dict(mode="nw", gap_open=5, gap_extend=1, traceback=False)
    both_engines(pd.Series(queries), pd.Series(targets), match=2, mismatch=-3, **options)
    assert halves
    halves.clear()
    table = np.array([[2, -1, -2, -3], [-4, 3, -1, -2], [0, -5, 2, -1], [-1, -2, -6, 1]])
    assert not (table == table.T).all()
    both_engines(pd.Series(queries), pd.Series(targets), matrix=("ACGT", table), **options)
    assert not halves


def planted(rng, short: str, length: int, alphabet: str = "ACGT") -> str:
    """A random sequence of about ``length`` holding ``short`` twice exactly (equal best
    alignments far apart), a mutated copy, a homopolymer and a tandem repeat of it."""
    background = random_sequences(rng, 1, alphabet, length, length)[0]
    pieces = [background[:length // 8], short, background[length // 8:length // 4],
              mutate(rng, short, alphabet, 0.15), alphabet[0] * 12,
              background[length // 4:length // 2], short[:4] * 5, short,
              background[length // 2:]]
    return "".join(pieces)


@pytest.mark.parametrize("mode,free_ends,matrix", [
    ("sw", None, None),
    # the free-ends subsets in the slow set (CI time)
    pytest.param("sg", ("target_start", "target_end"), None, marks=pytest.mark.slow),
    pytest.param("sg", ("query_start", "query_end"), None, marks=pytest.mark.slow),
    pytest.param("sw", None, "BLOSUM62", marks=pytest.mark.slow)])
def test_windows_equal_cpu(monkeypatch, settings, mode, free_ends, matrix):
    """Score-only pairs cut into overlapping windows of their long side (a spy checks that
    some pair took several) give the CPU engine's scores and end cells: equal best
    alignments in different windows (the first wins), the best across a window's edge,
    a local pair scoring 0, pairs either way round (a side the mode cannot cut runs
    whole)."""
    settings(inter_max_cells=0, band_windows=1e9)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    windows = spy_on(monkeypatch, "fill_windows")
    rng = np.random.default_rng(11)
    alphabet = "ARNDCQEGHILKMFPSTWYV" if matrix else "ACGT"
    short = random_sequences(rng, 2, alphabet, 6, 6)
    length = 180 if matrix else 70  # at least two spans of an alignment (BLOSUM62: 71)
    long_ = [planted(rng, short[0], length, alphabet),
             planted(rng, short[1], length + 10, alphabet)]
    queries = [short[0], long_[1], alphabet[1] * 5, mutate(rng, short[1], alphabet, 0.2)]
    targets = [long_[0], short[1], alphabet[2] * 60, long_[1]]
    scoring = dict(matrix=matrix) if matrix else dict(match=2, mismatch=-3)
    frame = both_engines(pd.Series(queries), pd.Series(targets), mode=mode, free_ends=free_ends,
                         gap_open=5, gap_extend=1, traceback=False, **scoring)
    assert frame["score"].notna().all()
    assert windows and max(int(call[4].max()) for call in windows) >= 2


def test_window_counts_follow_the_mode_the_span_and_the_setting(settings):
    """Windows cut the long side where the mode frees both its ends and no end of the other
    side, as many as the setting's share of the schedulers allows and at most a window per
    span of an alignment (match 2 / mismatch -3 / extension 1: local, 3m - 1 residues;
    semi-global, 6m); never with traceback, global mode or the setting at 0."""
    from types import SimpleNamespace

    from gpualign_df.gpu.long import window_counts
    from gpualign_df.scoring import parse_mode

    def counts(m, n, mode="sw", free_ends=None, traceback=False, **changes):
        settings(band_lanes=4, **changes)
        parsed = parse_mode(mode, free_ends)
        job = SimpleNamespace(flags=(parsed.code, *parsed.flags(), traceback),
                              traceback=traceback, tuning=config.settings(), gap_extend=1,
                              sub_range=(-3, 2))
        batch = SimpleNamespace(query_lengths=np.array(m), target_lengths=np.array(n))
        found = window_counts(job, batch)
        return None if found is None else found.tolist()

    assert counts([10], [1000], band_windows=1e9) == [1000 // 29]
    assert counts([1000], [10], band_windows=1e9) == [1000 // 29]
    assert counts([10, 10], [1000, 50], band_windows=1e9) == [1000 // 29, 1]
    glocal = ("target_start", "target_end")
    assert counts([10], [1000], "sg", glocal, band_windows=1e9) == [1000 // 60]
    assert counts([1000], [10], "sg", glocal, band_windows=1e9) is None   # query not free
    assert counts([10], [1000], "sg", ("query_start", "query_end"), band_windows=1e9) is None
    assert counts([10], [1000], "sg", None, band_windows=1e9) is None     # every end free
    assert counts([10], [1000], "nw", band_windows=1e9) is None
    assert counts([10], [1000], traceback=True, band_windows=1e9) is None
    assert counts([10], [1000], band_windows=0.0) is None
    assert counts([10], [50], band_windows=1e9) is None                   # under two spans
    assert counts([0], [1000], band_windows=1e9) is None
    for length in range(58, 400):  # every window starts inside the pair
        for fold in (counts([10], [length], band_windows=1e9) or [1]):
            assert (fold - 1) * -(-length // fold) < length
    assert counts([10], [208], band_windows=1e9) == [7]  # 208 // 29 = 7 windows of 30


@pytest.mark.parametrize("mode,free_ends", [
    ("nw", None), pytest.param("sw", None, marks=pytest.mark.slow),
    pytest.param("sg", ("query_start", "target_end"), marks=pytest.mark.slow)])
def test_split_traceback_fill_equals_cpu(monkeypatch, settings, planned, mode, free_ends):
    """A traceback fill split in two passes (score-only bands keeping their bottom rows and
    register snapshots, then tiles of steps resumed from them) gives the whole fill's frame:
    gaps and repeats across many tile boundaries (tiles of 8 steps under the simulator),
    several pairs of a batch (bands of 4 lanes, tiles of 8 steps on a GPU too); a spy checks
    that the fill was split."""
    settings(inter_max_cells=0, split_traceback=1e9, band_lanes=4, split_tile_steps=8)
    split = []
    launch = gpualign_df.gpu.long.SplitFill.launch

    def spy(self, *arguments, **options):
        split.append(self.second.items)
        launch(self, *arguments, **options)

    monkeypatch.setattr(gpualign_df.gpu.long.SplitFill, "launch", spy)
    rng = np.random.default_rng(5)
    base = random_sequences(rng, 1, "ACGT", 45, 45)[0]
    queries = [base, base[:15] + base[35:], "ACGACGACG" * 5]
    targets = [base[:15] + base[35:], base, "ACGACG" * 4]
    both_engines(queries, targets, mode=mode, free_ends=free_ends, match=2, mismatch=-3,
                 gap_open=5, gap_extend=2)
    assert split and all(batch.split for batches in planned for batch in batches)


def test_split_traceback_follows_the_setting_and_the_budget(settings):
    """Whether a long traceback batch fills in two passes: where its working bands are
    fewer than ``split_traceback`` per scheduler and the passes' rows and snapshots fit the
    batch budget beside its traceback."""
    plan = gpualign_df.gpu.plan._long_batches
    m, n = np.array([5000]), np.array([6000])
    pairs = np.array([0])
    tuning = config.settings()
    rows = gpualign_df.gpu.long.lane_rows(tuning, True, 5000)
    extra = gpualign_df.gpu.long.split_bytes(tuning, m, n, rows)
    height = 32 * rows
    bands = (5000 + height - 1) // height
    assert extra > 8 * (bands - 1) * 6001
    settings(split_traceback=1e9)
    tuning = config.settings()
    assert plan(pairs, m, n, True, 1 << 40, None, tuning)[0].split
    assert not plan(pairs, m, n, False, 1 << 40, None, tuning)[0].split   # score only
    words = 4 * int(gpualign_df.gpu.long.traceback_words(m, n)[0])
    tight = words + 5000 + 6000 + 8 * 6001 + 6 * 11000 + 96   # the unsplit batch's need
    assert not plan(pairs, m, n, True, tight, None, tuning)[0].split
    assert plan(pairs, m, n, True, tight + extra, None, tuning)[0].split
    short = np.array([6000 - 32 * rows + 1])  # a band of 32 lanes: one tile of 6,000 steps
    settings(split_tile_steps=6016)
    assert plan(pairs, m, n, True, 1 << 40, None, config.settings())[0].split
    assert not plan(pairs, m, short, True, 1 << 40, None, config.settings())[0].split
    settings(split_traceback=0, split_tile_steps=tuning.split_tile_steps)
    assert not plan(pairs, m, n, True, 1 << 40, None, config.settings())[0].split
    settings(split_traceback=1e9, split_tile_steps=1000)   # not a whole number of batches
    with pytest.raises(ValueError, match="split_tile_steps"):
        plan(pairs, m, n, True, 1 << 40, None, config.settings())


@pytest.mark.parametrize("split", [0, 1e9])
def test_a_fill_whose_warps_leave_early_raises(monkeypatch, settings, split):
    """A band fill whose warps leave before every band is done (here its stop flag is set
    before the launch) raises instead of returning end cells no band wrote, whole or split
    in two passes."""
    settings(inter_max_cells=0, split_traceback=split, split_tile_steps=32)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4, split_tile_steps=8)
    launch = gpualign_df.gpu.long.BandFill.launch

    def stopped(self, *arguments, **options):
        self.control.stop()
        launch(self, *arguments, **options)

    monkeypatch.setattr(gpualign_df.gpu.long.BandFill, "launch", stopped)
    with pytest.raises(RuntimeError, match="finished 0 of its 2000 cells"):
        gpualign_df.align(["ACGT" * 10], ["ACGTA" * 10], backend="cuda", mode="nw")


@pytest.mark.parametrize("probes", [3, pytest.param(1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode,free_ends,cigar_style,linear", [
    pytest.param("nw", None, "=", False, marks=pytest.mark.slow),
    pytest.param("sg", ("query_start", "query_end"), "M", False, marks=pytest.mark.slow),
    ("sg", ("target_end",), "=", True)])
def test_long_pair_walk_takes_diagonal_runs_like_cpu(settings, mode, free_ends, cigar_style,
                                                     linear, probes):
    """The long-pair walk takes a diagonal run a warp's width at a time (three cells under
    the simulator), reading ``probes`` such stretches at once: runs of matches broken by
    single mismatches, runs longer and shorter than the warp and than the stretches read,
    gaps between them, runs that reach the first row or column or a block's top row (linear
    space); = / X and M CIGARs, the statistics columns, every end cell."""
    settings(inter_max_cells=0, walk_probes=probes)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4, walk_lanes=3)
    options = {}
    if linear:
        settings(linear_block_bytes=1)
        options["traceback_memory"] = 1
    rng = np.random.default_rng(13)
    base = random_sequences(rng, 1, "ACGT", 40, 40)[0]
    queries = [base, base[:30], "ACGT" * 8, base[5:]]
    targets = [base[:12] + "T" + base[13:25] + base[28:],         # a mismatch, a deletion
               base[:10] + "GGG" + base[10:30],                     # an insertion
               "ACGT" * 5 + "TTTT" + "ACGT" * 3,                    # a repeat with a gap
               base]                                                 # a run to the border
    cpu = gpualign_df.align(queries, targets, backend="cpu", mode=mode, free_ends=free_ends,
                            match=2, mismatch=-3, gap_open=5, gap_extend=2,
                            cigar_style=cigar_style)
    gpu = gpualign_df.align(queries, targets, backend="cuda", mode=mode, free_ends=free_ends,
                            match=2, mismatch=-3, gap_open=5, gap_extend=2,
                            cigar_style=cigar_style, **options)
    pd.testing.assert_frame_equal(cpu, gpu)


@pytest.mark.parametrize("alphabet,options,byte_rows", [
    ("ACGTN", dict(match=2, mismatch=-3), True),              # codes below 8: byte rows
    pytest.param("ACGTNRYKMSW", dict(match=2, mismatch=-3), False,  # codes 8 and up
                 marks=pytest.mark.slow),
    pytest.param("ACGT", dict(match=300, mismatch=-200), False,     # beyond a byte
                 marks=pytest.mark.slow),
    ("ARNDCQEGHILKMFPSTWYV", dict(matrix="BLOSUM62"), False),  # protein codes
])
def test_long_pair_substitution_paths_equal_cpu(monkeypatch, settings, alphabet, options,
                                                byte_rows):
    """The band kernel keeps a row's scores in two registers (a byte per code) when every
    residue's code is below 8 and the scores fit a byte, and reads the shared table
    otherwise; both give the CPU's frame, and each case takes the path it should."""
    settings(inter_max_cells=0)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    chosen = []
    byte_rows_of = gpualign_df.gpu.long.byte_rows

    def spy(*arguments):
        chosen.append(byte_rows_of(*arguments))
        return chosen[-1]

    monkeypatch.setattr(gpualign_df.gpu.long, "byte_rows", spy)
    queries, targets = small_pairs(11, alphabet, count=6, max_length=45)
    both_engines(queries, targets, mode="sw", gap_open=5, gap_extend=2, **options)
    assert chosen and set(chosen) == {byte_rows}

@pytest.mark.parametrize("mode,free_ends", [
    mode if mode[0] == "sw" else pytest.param(*mode, marks=pytest.mark.slow)
    for mode in MODES])
def test_linear_space_traceback_equals_cpu(monkeypatch, settings, mode, free_ends):
    """Pairs whose traceback may not fit (``traceback_memory=1``) take the linear-space path
    (checkpoint rows, then blocks of one band recomputed and walked from the bottom) and
    give the full-matrix frame: repeats with many equal-score paths, a pair with a long gap, one-residue and
    empty partners; under the simulator with bands of 4 lanes (32 rows, several blocks)."""
    settings(inter_max_cells=0, linear_block_bytes=1)
    if gpualign_df.gpu.simulator():
        settings(band_lanes=4)
    rng = np.random.default_rng(5)
    queries = ["ACGACGACG" * 5, "A" * 40, random_sequences(rng, 1, "ACGT", 45, 45)[0], "C", ""]
    targets = ["ACGACG" * 4, "A" * 20 + "C" + "A" * 5, queries[2][:15] + queries[2][35:],
               "ACCGT" * 4, "ACG"]
    options = dict(mode=mode, free_ends=free_ends, match=2, mismatch=-3, gap_open=5,
                   gap_extend=2)
    cpu = gpualign_df.align(queries, targets, backend="cpu", **options)
    linear_rows = []
    align_linear = gpualign_df.gpu.batches.align_linear

    def spy(job, batch, *arguments):
        linear_rows.extend(batch.slot_row.tolist())
        return align_linear(job, batch, *arguments)

    monkeypatch.setattr(gpualign_df.gpu.batches, "align_linear", spy)
    gpu = gpualign_df.align(queries, targets, backend="cuda", traceback_memory=1, **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert sorted(linear_rows) == [0, 1, 2, 3]  # every pair of two non-empty sequences


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None),
                                            ("sg", ("target_start", "target_end"))])
def test_search_top_k_on_the_device_equals_cpu(monkeypatch, settings, mode, free_ends):
    """The cross-product search kernel + device top-k keep the CPU engine's rows: 45 targets
    (two warps, one padded), null and empty sequences, equal scores (ties by target), top_k
    above and below the database size; tiny memory forces several tiles and query chunks."""
    rng = np.random.default_rng(21)
    queries = random_sequences(rng, 5, "ACGT", 12)
    database = random_sequences(rng, 45, "ACGT", 12)
    queries[1], queries[3] = None, ""
    database[5], database[9], database[30] = None, "", database[2]   # a duplicate: a tie
    database[40] = database[2]
    options = dict(mode=mode, free_ends=free_ends, match=2, mismatch=-3, gap_open=5,
                   gap_extend=2)
    for top_k in (3, 50):
        cpu = pd.Series(queries).aln.search(pd.Series(database), top_k=top_k, backend="cpu",
                                            **options)
        gpu = pd.Series(queries).aln.search(pd.Series(database), top_k=top_k, backend="cuda",
                                            **options)
        pd.testing.assert_frame_equal(cpu, gpu)
        assert len(gpu) == len(queries) * min(top_k, len(database))
    for module in (gpualign_df.gpu.search, gpualign_df.gpu.batches):
        monkeypatch.setattr(module, "free_bytes", lambda: 2000)
    settings(top_k_segments=3)  # long segment lists
    small = pd.Series(queries).aln.search(pd.Series(database), top_k=4, backend="cuda",
                                          traceback=False, **options)
    cpu = pd.Series(queries).aln.search(pd.Series(database), top_k=4, backend="cpu",
                                        traceback=False, **options)
    pd.testing.assert_frame_equal(cpu, small)


def test_search_top_k_merges_segments_taken_in_turn(settings, monkeypatch):
    """A query's targets split into segments, more segments than the first phase has
    blocks (a block takes several in turn), ties in different segments, blocks shrunk for
    a top k whose lists would not fit: the CPU engine's hits, ties to the lower target."""
    from gpualign_df.gpu import search as gpu_search
    from gpualign_df.kernels import search as search_kernels

    size = search_kernels.TOP_K_BLOCK
    monkeypatch.setattr(gpu_search, "TOP_K_BLOCKS", 1 << 10)
    monkeypatch.setattr(gpu_search, "TOP_K_LIST_KEYS", 2 * size * 5)  # two blocks, top 5
    launched = []
    real = gpu_search.launch_kernel
    monkeypatch.setattr(gpu_search, "launch_kernel",
                        lambda name, kernel, grid, threads, *args, **kw: launched.append(
                            (kernel, grid, threads)) or real(name, kernel, grid, threads,
                                                             *args, **kw))
    rng = np.random.default_rng(9)
    queries = ["ACGTTGCA"] + random_sequences(rng, 1, "ACGT", 8) + [None]
    database = random_sequences(rng, 5 * size, "ACGT", 6)  # none holds the first query
    ties = [1, size + 2, 2 * size + 3]  # in segments 0, 1 and 2 (of 3 at least)
    for target in ties:
        database[target] = queries[0]
    options = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, top_k=5, traceback=False)
    cpu = pd.Series(queries).aln.search(pd.Series(database), backend="cpu", **options)
    gpu = pd.Series(queries).aln.search(pd.Series(database), backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert gpu["target"].iloc[:3].tolist() == ties
    assert (search_kernels.top_k_blocks, 2, size) in launched
    # lists of a large top k: blocks of two threads (one merge round)
    monkeypatch.setattr(gpu_search, "TOP_K_LIST_KEYS", 2 * 5)
    launched.clear()
    gpu = pd.Series(queries).aln.search(pd.Series(database), backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert (search_kernels.top_k_final, len(queries), 2) in launched


def test_search_top_k_pairs_follow_best_first():
    """search_top_k returns exactly best_first's pairs, in its order, from the score matrix."""
    from gpualign_df.pairs import best_first, search_pairs
    from gpualign_df.encode import encode_sequences
    from gpualign_df.scoring import make_scoring, parse_mode

    rng = np.random.default_rng(5)
    queries = random_sequences(rng, 4, "ACGT", 10) + [None]
    database = random_sequences(rng, 36, "ACGT", 10) + ["", None, "ACGT", "ACGT"]
    scoring = make_scoring(None, match=1, mismatch=-1, gap_open=2, gap_extend=1)
    mode = parse_mode("sw", None)
    encoded_queries = encode_sequences(queries, scoring, pd.RangeIndex(len(queries)))
    encoded_targets = encode_sequences(database, scoring, pd.RangeIndex(len(database)))
    pair_query, pair_target = search_pairs(len(queries), len(database))
    scores = gpualign_df.align(queries, database, how="search", match=1, mismatch=-1,
                               gap_open=2, gap_extend=1, traceback=False, backend="cpu")
    frame = scores.sort_values(["query", "target"])
    expected = best_first(pair_query, pair_target, frame["score"].fillna(0).to_numpy(int),
                          frame["score"].notna().to_numpy(), 6)
    got = gpualign_df.gpu.search_top_k(
        *gpualign_df.gpu.upload(encoded_queries, encoded_targets),
        encoded_queries.lengths, encoded_queries.valid, encoded_targets.lengths,
        encoded_targets.valid, scoring, mode, 6)
    np.testing.assert_array_equal(got[0], pair_query[expected])
    np.testing.assert_array_equal(got[1], pair_target[expected])


@pytest.mark.parametrize("mode", ["sw", "nw"])
def test_deferred_cigars_equal_the_direct_column(mode):
    """A caller that defers a one-batch job's CIGARs (the cuDF path) gets them written
    into a buffer kept between jobs, their total's read queued behind the walk, and
    from ``cigar_chars`` a buffer of exactly the characters' size, its own (a later job,
    which writes the kept buffer again, leaves it as it was): columns, offsets and
    characters equal the undeferred run's, and those equal the CPU engine's CIGARs."""
    from gpualign_df.encode import encode_sequences
    from gpualign_df.gpu import DEVICE_LOCK, align_on_device, upload
    from gpualign_df.scoring import make_scoring, parse_mode

    queries, targets = small_pairs(11, "ACGT", count=40)
    queries[5] = None
    scoring = make_scoring(None, match=2, mismatch=-3, gap_open=5, gap_extend=2)
    encoded = [encode_sequences(values, scoring, pd.RangeIndex(len(values)))
               for values in (queries, targets)]
    rows = np.arange(len(queries))
    valid = encoded[0].valid & encoded[1].valid
    runs = {}
    with DEVICE_LOCK:
        for deferred in (False, True):
            results = align_on_device(
                *upload(*encoded), rows, rows, encoded[0].lengths, encoded[1].lengths, valid,
                scoring, parse_mode(mode, None), traceback=True, cigar_style="=", clip=None,
                deferred_cigars=deferred)
            assert results.characters is None and (results.total is not None) == deferred
            bound = results.characters_bound
            device_chars = results.cigar_chars()
            chars = gpualign_df.gpu.to_numpy(device_chars).copy()
            assert results.total is None and len(chars) == results.characters <= bound
            runs[deferred] = ({name: gpualign_df.gpu.to_numpy(column)[:len(rows)][valid]
                               for name, column in results.columns.items()},
                              gpualign_df.gpu.to_numpy(results.offsets), chars)
        other = [encode_sequences(values, scoring, pd.RangeIndex(len(values)))
                 for values in small_pairs(12, "ACGT", count=40)]
        later = align_on_device(
            *upload(*other), rows, rows, other[0].lengths, other[1].lengths,
            np.ones(len(rows), bool), scoring, parse_mode(mode, None), traceback=True,
            cigar_style="=", clip=None, deferred_cigars=True)
        assert not np.array_equal(gpualign_df.gpu.to_numpy(later.cigar_chars())[:len(chars)],
                                  chars)
        np.testing.assert_array_equal(gpualign_df.gpu.to_numpy(device_chars), chars)
    (columns, offsets, chars), (deferred_columns, deferred_offsets, deferred_chars) = \
        runs[False], runs[True]
    for name in columns:
        np.testing.assert_array_equal(columns[name], deferred_columns[name])
    np.testing.assert_array_equal(offsets, deferred_offsets)
    np.testing.assert_array_equal(chars, deferred_chars)
    cpu = gpualign_df.align(queries, targets, mode=mode, match=2, mismatch=-3, gap_open=5,
                            gap_extend=2, backend="cpu")
    cigars = [bytes(chars[start:stop]).decode() for start, stop in
              zip(deferred_offsets[:-1], deferred_offsets[1:])]
    assert [cigar for cigar, ok in zip(cigars, valid) if ok] == \
        cpu["cigar"][valid].tolist()


def test_batches_split_by_memory_equal_cpu(monkeypatch, planned, settings):
    """Little free memory: one warp per batch, CIGARs gathered from several batch buffers
    (the path a single batch skips); every row equals the CPU engine's. (The 32-bit
    fill's warps; the grouped kernel's split between warp pairs is
    ``test_pair_groups_with_traceback_across_batches``.)"""
    settings(pair_group_fill=False)
    queries, targets = small_pairs(13, "ACGT", count=70)
    monkeypatch.setattr(gpualign_df.gpu.batches, "free_bytes", lambda: 50_000)
    both_engines(queries, targets, mode="sw", match=2, mismatch=-3, gap_open=5, gap_extend=2)
    assert planned and len(planned[0]) >= 3


@pytest.mark.parametrize("matrix", [None, "BLOSUM62"])
def test_packed_16bit_search_equals_cpu(settings, matrix):
    """The packed 16-bit local search (two database sequences per thread, here in its plain
    half-by-half form) keeps the CPU engine's hits: 70 targets make three warps (an odd
    one without a partner), with nulls, empties and a high half shorter than its low half."""
    settings(search_16bit=True, search_groups=())
    rng = np.random.default_rng(8)
    alphabet = "ACGT" if matrix is None else "ARNDCQEGHILKMFPSTWYV"
    queries = random_sequences(rng, 2, alphabet, 8) + [None, ""]
    database = random_sequences(rng, 66, alphabet, 8) + [None, "", queries[0], queries[1]]
    options = dict(match=2, mismatch=-3) if matrix is None else dict(matrix=matrix)
    cpu = pd.Series(queries).aln.search(pd.Series(database), top_k=5, backend="cpu",
                                        gap_open=5, gap_extend=2, **options)
    gpu = pd.Series(queries).aln.search(pd.Series(database), top_k=5, backend="cuda",
                                        gap_open=5, gap_extend=2, **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert gpu.loc[gpu["query"] == 0, "target"].iloc[0] == 68   # its own copy first


@pytest.mark.parametrize("unroll, copies", [(4, None),
                                            pytest.param(4, 4, marks=pytest.mark.slow),
                                            pytest.param(2, None, marks=pytest.mark.slow),
                                            pytest.param(1, 2, marks=pytest.mark.slow)])
def test_grouped_search_equals_cpu(settings, monkeypatch, unroll, copies):
    """The grouped local search (a group of lanes per pair of database sequences, columns
    in registers, here in its plain half-by-half form) keeps the CPU engine's hits, the
    sequences longer than every class going to the one-thread-per-pair kernel in the same
    search: two classes and the rest, an odd pair, nulls, empties, a null and an empty
    query, letters beyond the 20 (B and X in the database, X in a query: the pair table
    of the letters present must fit shared memory); ``unroll`` steps a loop iteration,
    query lengths of every remainder (the steps past the last read padding rows);
    ``copies`` of the pair table, each lane reading its own."""
    from gpualign_df.kernels import search as search_kernels

    settings(search_16bit=True, search_groups=((4, 3), (8, 4)),
             search_unroll=((4, unroll),), search_table_copies=copies)
    ran = []
    for name in ("group_search_kernel", "search_kernel16"):
        real = getattr(search_kernels, name)
        monkeypatch.setattr(search_kernels, name,
                            lambda *args, _real=real, _name=name: ran.append(_name)
                            or _real(*args))
    rng = np.random.default_rng(21)
    letters = "ARNDCQEGHILKMFPSTWYV"
    queries = random_sequences(rng, 1, letters, 24) + [None, "", "WXXWC" * 2]
    database = [
        "".join(rng.choice(list(letters + "BX"), int(rng.integers(0, 45))))
        for _ in range(21)] + [None, "", queries[0][3:20], queries[3]]
    queries.append("W")  # lengths 7, 0, 10, 1: steps m + lanes - 1 of every remainder mod 4
    options = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1, top_k=8)
    cpu = pd.Series(queries).aln.search(pd.Series(database), backend="cpu", **options)
    gpu = pd.Series(queries).aln.search(pd.Series(database), backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert "group_search_kernel" in ran and "search_kernel16" in ran
    if unroll == 1:
        # little memory: the database in tiles of one warp, each tile's classes and rest
        # (slow set; the quick set has tiles of one class and the rest in
        # test_search_streams_a_database_larger_than_the_device)
        monkeypatch.setattr(gpualign_df.gpu.search, "free_bytes", lambda: 4000)
        tiled = pd.Series(queries).aln.search(pd.Series(database), backend="cuda",
                                              traceback=False, **options)
        pd.testing.assert_frame_equal(tiled, cpu[list(tiled.columns)])


def test_grouped_search_with_copies_of_its_table_equals_cpu(settings):
    """Copies of the grouped search's pair table, each lane reading its own (on a GPU in
    dynamic shared memory, beyond 48 KB where the table is large: a protein search after a
    DNA one launches the same kernels with more of it), keep the CPU engine's hits."""
    from gpualign_df.kernels import simulator

    settings(search_16bit=True, search_groups=((4, 3), (8, 4)), search_table_copies=4)
    rng = np.random.default_rng(4)
    queries = random_sequences(rng, 1, "ACGT", 16) + [None, "ACGTN"]
    database = random_sequences(rng, 5, "ACGT", 30) + [None, "", queries[0][2:14]]
    options = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, top_k=4)
    cpu = pd.Series(queries).aln.search(pd.Series(database), backend="cpu", **options)
    gpu = pd.Series(queries).aln.search(pd.Series(database), backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    if not simulator():
        letters = "ARNDCQEGHILKMFPSTWYVBZX"
        proteins = ["".join(rng.choice(list(letters), int(rng.integers(5, 60))))
                    for _ in range(200)]
        protein = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1, top_k=4)
        cpu = pd.Series(proteins[:6]).aln.search(pd.Series(proteins), backend="cpu",
                                                 **protein)
        gpu = pd.Series(proteins[:6]).aln.search(pd.Series(proteins), backend="cuda",
                                                 **protein)
        pd.testing.assert_frame_equal(cpu, gpu)


def test_search_streams_a_database_larger_than_the_device(monkeypatch, settings):
    """A database beyond half the memory a job may use is never copied whole: each tile's
    sequences go to the device for that tile while the best k per query stay there, and
    only the hits' sequences go for their traceback. Hits, scores and CIGARs equal the CPU
    engine's (grouped kernel and one thread per pair), a prepared database keeps no
    device copy, and the progress counts every cell once."""
    from gpualign_df.gpu import batches, search as gpu_search, upload
    from gpualign_df.scoring import make_scoring, parse_mode

    settings(search_16bit=True, search_groups=((4, 3),))
    rng = np.random.default_rng(8)
    letters = "ARNDCQEGHILKMFPSTWYV"
    queries = random_sequences(rng, 2, letters, 10) + [None]
    database = random_sequences(rng, 38, letters, 10) + [None, "", "W" * 13,
                                                         queries[1][2:], queries[0]]
    uploaded = []
    for module in (gpu_search, batches):
        monkeypatch.setattr(module, "upload", lambda *collections, _real=upload: uploaded.append(
            [len(encoded) for encoded in collections]) or _real(*collections))
    monkeypatch.setattr(gpu_search, "free_bytes", lambda: 1000)
    options = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1, top_k=3)
    cpu = pd.Series(queries).aln.search(pd.Series(database), backend="cpu", **options)
    gpu = pd.Series(queries).aln.search(pd.Series(database), backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert [sizes for sizes in uploaded if len(sizes) == 1] == [[32], [11]]  # two tiles
    assert uploaded[-1][0] == 3 and uploaded[-1][1] <= 9       # the hits' targets alone
    prepared = gpualign_df.database(pd.Series(database), matrix="BLOSUM62")
    queries = prepared.sequences.subset(len(database) - 2, len(database))
    cells = []
    pair_query, pair_target = gpu_search.search_top_k(
        upload(queries)[0], prepared.sequences, queries.lengths, queries.valid,
        prepared.lengths, prepared.sequences.valid,
        make_scoring("BLOSUM62", gap_open=11, gap_extend=1), parse_mode("sw", None), 1,
        progress=cells.append)
    best = pd.Series(database[-2:]).aln.search(pd.Series(database), backend="cpu",
                                               **dict(options, top_k=1))
    assert pair_target.tolist() == best["target"].tolist()
    assert sum(cells) == queries.lengths.sum() * prepared.lengths.sum()
    assert not any(key[0] == "upload" for key in prepared.sequences.keep)


def test_group_plan_pairs_neighbours_into_the_smallest_class():
    from gpualign_df.gpu.search import group_plan

    lengths = np.array([5, 30, 0, 12, 13, 40, 3, 8, 9])
    valid = np.array([True, True, True, True, False, True, True, True, True])
    plans, rest = group_plan(lengths, valid, ((4, 3), (8, 4)))
    assert rest.tolist() == [5]                  # 40 > 32: no class
    shapes = {(lanes, columns): pairs for lanes, columns, pairs in plans}
    # longest first: 30 + 12 (class 32), then 9 + 8 and 5 + 3 and 0 alone (class 12)
    assert shapes[(8, 4)].tolist() == [[1, 3], [-1, -1], [-1, -1], [-1, -1]]
    assert shapes[(4, 3)][:3].tolist() == [[8, 7], [0, 6], [2, -1]]
    assert (shapes[(4, 3)][3:] == -1).all() and len(shapes[(4, 3)]) % 8 == 0
    assert [shape for shape, _ in zip(shapes, range(2))] == [(8, 4), (4, 3)]  # largest first


def test_grouped_search_needs_entries_of_at_least_minus_gap_open(settings):
    """A gap open below the matrix's most negative entry's magnitude would make the
    shifted table negative: the search takes the other kernel, with the same hits."""
    from gpualign_df.encode import encode_sequences
    from gpualign_df.gpu import search as gpu_search, upload
    from gpualign_df.scoring import make_scoring

    settings(search_16bit=True)
    scoring = make_scoring("BLOSUM62", gap_open=2, gap_extend=1)
    sequences = encode_sequences(pd.Series(["ARND", "WWCH"]), scoring, pd.RangeIndex(2))
    device = upload(sequences)[0]
    lengths = sequences.lengths
    assert gpu_search.group_setup(device, device, lengths, lengths, scoring,
                                  config.settings()) is None
    scoring = make_scoring("BLOSUM62", gap_open=4, gap_extend=1)
    assert gpu_search.group_setup(device, device, lengths, lengths, scoring,
                                  config.settings()) is not None
    both = dict(matrix="BLOSUM62", gap_open=2, gap_extend=1, top_k=2)
    queries, database = pd.Series(["ARNDWW", "CHHC"]), pd.Series(["ARND", "WWCH", "CH"])
    pd.testing.assert_frame_equal(queries.aln.search(database, backend="cpu", **both),
                                  queries.aln.search(database, backend="cuda", **both))


def test_search_scores_above_16_bits_equal_cpu():
    """Scores beyond 32,767 (a match of 3,000): the search runs 32-bit cells and keeps the
    CPU engine's hits."""
    table = pd.DataFrame(np.where(np.eye(4, dtype=bool), 3000, -1), index=list("ACGT"),
                         columns=list("ACGT"))
    queries = pd.Series(["ACGTACGTACGT", "TTTT"])
    database = pd.Series(["ACGTACGTACGT", "ACGTAC", "TTTTTT", ""])
    options = dict(matrix=table, gap_open=5, gap_extend=1, top_k=3)
    cpu = queries.aln.search(database, backend="cpu", **options)
    gpu = queries.aln.search(database, backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    assert cpu["score"].max() == 36000


def test_packed_16bit_only_where_scores_fit():
    from gpualign_df.gpu import use_search_16bit
    from gpualign_df.scoring import make_scoring, parse_mode

    local, glob = parse_mode("sw", None), parse_mode("nw", None)
    dna = make_scoring(None, match=2, mismatch=-3, gap_open=5, gap_extend=2)
    short, long = 300, 20_000  # the longest sequence of each side
    assert use_search_16bit(dna, local, short, short, True)
    assert not use_search_16bit(dna, glob, short, short, True)      # local mode only
    assert not use_search_16bit(dna, local, long, long, True)       # 2 * 20,000 > 2**15
    assert use_search_16bit(dna, local, long, short, True)          # bounded by the shorter side
    assert not use_search_16bit(dna, local, short, short, False)    # the setting off


@pytest.mark.parametrize("cigar_style,clip", [("=", None), ("M", "soft")])
def test_cigar_characters_within_the_bound_the_buffer_is_sized_by(cigar_style, clip):
    """A one-batch job writes its CIGARs into a buffer sized by ``cigar_bound`` (two
    characters per operation, at most len(query) + len(target) operations) before it
    reads their total: the most fragmented alignments (alternating =/X, and alternating
    gaps) stay within it, and equal the CPU engine's."""
    queries = ["ACACACACACAC", "AAAAAAAAAAAA", "A", "", "ACGT" * 5, "CA" * 9]
    targets = ["AGAGAGAGAGAG", "ATATATATATATATATATATATAT", "", "T", "TGCA" * 5, "C" * 9]
    frame = both_engines(queries, targets, mode="nw", match=1, mismatch=-1, gap_open=1,
                         gap_extend=1, cigar_style=cigar_style, clip=clip)
    lengths = frame["cigar"].str.len().to_numpy()
    bound = [gpualign_df.gpu.cigar_bound(len(query) + len(target))
             for query, target in zip(queries, targets)]
    assert (lengths <= bound).all()
    if cigar_style == "=":
        assert frame["cigar"][0] == "1=1X" * 6  # 24 characters for 12 operations


@pytest.mark.skipif(not gpualign_df.gpu.simulator(), reason="device functions are called "
                    "from Python only under the CUDA simulator")
def test_plain_traceback_helpers_follow_the_tie_rules():
    """The traceback bits are sign bits of differences (a tie is no bit: opening, the
    diagonal, then I win ties); the running best keeps the first column on ties."""
    from gpualign_df.kernels import dpx, strip

    word = 0
    for difference in (-1, 0, 5, -(1 << 30), 1 << 30):
        word = strip.append_sign(word, difference)
    assert int(word) == 0b10010
    assert int(strip.append_sign(0xFFFF_FFFF, 3)) == 0xFFFF_FFFE   # 32 bits, the top one gone
    keep_best = dpx.keep_best(False)

    def unpack(packed):
        return int(packed) >> 32, int(packed) & 0xFFFF_FFFF

    assert unpack(keep_best(5, 5)) == (5, 0)      # a tie keeps the first column
    assert unpack(keep_best(5, 6)) == (6, 1)
    assert unpack(keep_best(-3, -8)) == (-3, 0)


def test_keyed_and_selected_row_bests_equal_cpu():
    """The fill kernels' two forms of a row's running best (an int32 key H * 2**16 - j, or
    a compare and a select) give the CPU engine's end cells, ties included."""
    queries = ["ACACACACAC", "AAAAAAAA", "ACGTACGT", "GGGG", "CA" * 15, "T", ""] * 5
    targets = ["ACAC", "AAAA" * 5, "ACGT", "CCCCGGGGCCCC", "AC", "T" * 24, "A"] * 5
    for keyed in (True, False):
        with config.override(keyed_best=keyed):
            for mode, free_ends in (("sw", None), ("sg", ("target_end",))):
                both_engines(queries, targets, mode=mode, free_ends=free_ends, match=1,
                             mismatch=-1, gap_open=1, gap_extend=1)


# the packed fill is off by default (fill_16bit): the free-ends subsets in the slow set
PACKED_MODES = [("sw", None), ("nw", None), ("sg", None)] + [
    pytest.param("sg", ends, marks=pytest.mark.slow)
    for ends in (("target_start", "target_end"), ("query_start", "query_end"), ("query_end",),
                 ("target_end",))]


@pytest.mark.parametrize("mode,free_ends", PACKED_MODES)
# the packed fill is off by default (fill_16bit): unsorted pairs in the slow set
@pytest.mark.parametrize("sort", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_packed_16bit_fill_equals_cpu(settings, planned, mode, free_ends, sort):
    """The packed 16-bit score-only fill (two pairs per thread, here in its plain
    half-by-half form) equals the CPU engine: 36 pairs fill one warp pair (the odd warp
    mostly unused slots), with empty and one-residue sequences; unsorted, either half of a
    thread may be the shorter one, in rows and in columns. With traceback, and the grouped
    kernel off, the job stays on 32-bit cells."""
    settings(fill_16bit=True, sort_by_length=sort, pair_group_fill=False)
    queries, targets = small_pairs(21, "ACGT", max_length=24)
    options = dict(mode=mode, free_ends=free_ends, match=2, mismatch=-3, gap_open=3,
                   gap_extend=1)
    both_engines(queries, targets, **options)
    both_engines(queries, targets, traceback=False, **options)
    assert [batch.packed for batches in planned for batch in batches] == [False, True]


@pytest.mark.slow  # the packed fill is off by default (fill_16bit)
def test_packed_16bit_fill_ties_and_zero_gap_costs(settings):
    """Repeats with many equal-scoring end cells and free gaps (gap_open 0): the packed fill
    keeps the CPU engine's row-major first end cell in every mode; one pair is much longer
    than its partner in the other half."""
    settings(fill_16bit=True)
    queries = ["ACACACACAC", "AAAAAAAA", "ACGTACGT", "GGGG", "CA" * 15, "T"] * 6
    targets = ["ACAC", "AAAA" * 5, "ACGT", "CCCCGGGGCCCC", "AC", "TTTTTTTTTTTTTTTTTTTTTTTT"] * 6
    for mode in ("sw", "nw", "sg"):
        both_engines(queries, targets, mode=mode, match=1, mismatch=-1, gap_open=0,
                     gap_extend=0, traceback=False)
        both_engines(queries, targets, mode=mode, match=1, mismatch=-1, gap_open=1,
                     gap_extend=1, free_ends=("target_end",) if mode == "sg" else None,
                     traceback=False)


def test_packed_16bit_fill_only_where_values_fit():
    from gpualign_df.gpu import fill_fits_16bit
    from gpualign_df.scoring import make_scoring

    dna = make_scoring(None, match=1, mismatch=-4, gap_open=7, gap_extend=1)
    assert fill_fits_16bit(dna, 150, 277)
    assert fill_fits_16bit(dna, 8000, 8000)           # 3*7 + 16,001 + 4 < 2**14
    assert not fill_fits_16bit(dna, 8200, 8200)       # the gap path bound passes -2**14
    assert not fill_fits_16bit(dna, 40_000, 10)       # end columns need 16 bits
    protein = make_scoring("BLOSUM62", gap_open=11, gap_extend=1)
    assert fill_fits_16bit(protein, 2000, 2000)
    assert not fill_fits_16bit(protein, 3000, 3000)   # 11 * 3001 > 2**15 - 1


@pytest.mark.parametrize("rows", [8, 16])
def test_fill_strips_of_8_and_16_rows_equal_cpu(settings, rows):
    """The inter-task fill with strips of 8 and of 16 query rows (two traceback words per
    column, the second written only where the query reaches it) equals the CPU engine,
    queries of every length around the strip and word boundaries included."""
    settings(fill_strip_rows=rows)
    rng = np.random.default_rng(11)
    lengths = [1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40]
    queries = ["".join(rng.choice(list("ACGT"), size=length)) for length in lengths]
    targets = [mutate(rng, query, "ACGT", 0.15) for query in queries]
    for mode in ("sw", "nw", "sg"):
        both_engines(queries, targets, mode=mode, match=2, mismatch=-3, gap_open=5,
                     gap_extend=2)


@pytest.mark.parametrize("warps", [1, 3, 37, 300, pytest.param(6250, marks=pytest.mark.gpu)])
def test_plan_sums_kernel_equals_numpy(warps):
    """The one-block offsets-and-totals kernel of the plan writes what its numpy form does
    (the engine uses the numpy form under the simulator): layout table and totals, for
    warp counts within one round of the block's reads and over several (W1's 6,250 on
    the GPU)."""
    from gpualign_df.gpu import plan
    from gpualign_df.kernels import planning

    rng = np.random.default_rng(warps)
    quantities = 32 * rng.integers(0, 1000, size=(planning.QUANTITIES, warps)).astype(np.int64)
    columns = rng.integers(0, 300, size=warps).astype(np.int64)
    expected = [np.zeros((planning.TABLE_ROWS, warps), np.int64),
                np.zeros(planning.QUANTITIES, np.int64)]
    plan.plan_sums_host(quantities, columns, *expected)
    assert expected[0][0, 0] == 0 and expected[0][0, -1] == quantities[1, :-1].sum()
    assert (expected[1] == quantities.sum(axis=1)).all()
    written = [np.full_like(array, -7) for array in expected]
    plan.launch_sums(quantities, columns, *written)
    for got, want in zip(written, expected):
        np.testing.assert_array_equal(got, want)


def _warp_plan_reference(order, pairs, query_lengths, target_lengths, traceback, group_warps,
                        group_lanes, group_strips, rows_above, warps):
    """:func:`planning.warp_plan`'s outputs in numpy, from its docstring."""
    from gpualign_df.kernels import planning
    from gpualign_df.kernels.strip import PIECE_STEPS, STRIP_ROWS, WARP

    slots = warps * WARP
    slot_row, slot_query, slot_target = (np.full(slots, -1, np.int64) for _ in range(3))
    placed = order[:slots]
    slot_row[:len(placed)] = pairs[placed]
    slot_query[:len(placed)] = query_lengths[placed]
    slot_target[:len(placed)] = target_lengths[placed]
    rows = np.maximum(slot_query, 0).reshape(-1, group_warps * WARP).max(axis=1)
    columns = np.maximum(slot_target, 0).reshape(-1, group_warps * WARP).max(axis=1)
    rows, columns = np.repeat(rows, group_warps), np.repeat(columns, group_warps)
    cells = (np.maximum(slot_query, 0) * np.maximum(slot_target, 0)).reshape(warps, WARP)
    if group_lanes:
        steps = -(-(columns + group_lanes - 1) // PIECE_STEPS) * PIECE_STEPS
        tb_words = WARP * group_strips * steps
    else:
        tb_words = WARP * -(-rows // STRIP_ROWS) * columns
    tb_words = tb_words * traceback
    run_words = WARP * (rows + columns) * traceback
    above_words = WARP * (columns + 1) * rows_above
    quantities = np.zeros((planning.QUANTITIES, warps), np.int64)
    quantities[0] = (WARP * (rows + columns) + 8 * above_words + 4 * tb_words
                     + 6 * run_words + WARP * 96)
    quantities[1:6] = [WARP * rows, WARP * columns, above_words, tb_words, run_words]
    quantities[6] = cells.sum(axis=1)
    return slot_row, slot_query, slot_target, columns, quantities


@pytest.mark.parametrize("count, group_warps, group_lanes, traceback, has_pairs, rows_above", [
    (1, 1, 0, True, False, True), (70, 1, 0, False, True, True),
    (200, 2, 0, True, False, True), (333, 2, 4, True, True, False),
    (129, 2, 8, False, False, False), (600, 2, 4, True, False, False),
    (150, 2, 0, False, True, False)])
def test_warp_plan_kernel_equals_numpy(count, group_warps, group_lanes, traceback, has_pairs,
                                       rows_above):
    """The plan's kernel (a thread a slot, each warp's sizes from its group's longest
    lengths) writes what its definition in numpy does: slots of the sorted pairs (-1 past
    the last), the warps' columns and quantities, for single warps and packed warp
    pairs, with the grouped layout's traceback words or the strips', with and without a
    pair list, with rows above kept or not (the grouped kernel's), over one block and
    several (a last block partly past the slots)."""
    from gpualign_df.gpu import plan
    from gpualign_df.kernels import planning
    from gpualign_df.kernels.strip import WARP, lane_words

    rng = np.random.default_rng(count)
    query_lengths = rng.integers(0, 160, count).astype(np.int64)
    target_lengths = rng.integers(0, 280, count).astype(np.int64)
    order = rng.permutation(count).astype(np.int64)
    pairs = rng.permutation(3 * count)[:count].astype(np.int64) if has_pairs else order
    slots = -(-count // (group_warps * WARP)) * group_warps * WARP
    warps = slots // WARP
    strips = group_lanes * lane_words(3) if group_lanes else 0
    written = [np.full(slots, -7, np.int64) for _ in range(3)] + [
        np.full(warps, -7, np.int64), np.full((planning.QUANTITIES, warps), -7, np.int64)]
    plan.launch_plan(slots, order, pairs, has_pairs, query_lengths, target_lengths,
                     traceback, group_warps, group_lanes, strips, rows_above, *written)
    expected = _warp_plan_reference(order, pairs if has_pairs else np.arange(count),
                                    query_lengths, target_lengths, traceback, group_warps,
                                    group_lanes, strips, rows_above, warps)
    for got, want in zip(written, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("traceback", [False, True])
def test_grouped_batches_plan_no_rows_above(traceback):
    """Packed batches that the grouped pair kernel fills (``pair_groups`` gives a class),
    score-only or with traceback, plan no row-above words (the kernel keeps none; the
    memory need counts none either: :func:`planning.warp_quantities`), where the inter
    kernels' batches plan ``columns + 1`` of them for every slot of a warp."""
    from gpualign_df.gpu import plan
    from gpualign_df.kernels import planning

    rng = np.random.default_rng(5)
    queries, targets = rng.integers(1, 12, 100), rng.integers(1, 20, 100)
    options = dict(fits_16bit=lambda query, target: True,
                   longest=(int(queries.max()), int(targets.max())))
    grouped, inter = (plan.plan_batches(None, queries, targets, traceback, 1 << 30,
                                        pair_groups=lambda query, target: shape, **options)
                      for shape in ((4, 3), None))
    assert len(grouped) == len(inter) == 1
    assert grouped[0].row_words == 0 and grouped[0].packed
    assert grouped[0].group_class == ((4, 3) if traceback else None)
    columns = plan.to_numpy(inter[0].warp_table[planning.COLUMNS_ROW])
    assert inter[0].row_words == 32 * (columns + 1).sum() > 0


@pytest.mark.parametrize("pairs", [1, 40, 333, pytest.param(200_000, marks=pytest.mark.gpu)])
def test_counting_length_order_sorts_as_the_host(pairs):
    """The plan's counting sort on the device (count, scan, place: the kernels the GPU
    engine runs where the lengths make at most ``COUNT_BINS`` keys) orders pairs by
    target length, then query length, both descending, as the host's stable sort: a
    permutation whose lengths run as the host's do (pairs of equal lengths in any order),
    with bounds above the longest lengths too."""
    from gpualign_df.gpu import plan

    rng = np.random.default_rng(pairs)
    longest = (30, 12) if pairs < 1000 else (300, 160)   # (tens of thousands of keys)
    targets = rng.integers(0, longest[0], pairs)
    queries = rng.integers(0, longest[1], pairs)
    host = plan.length_order(np, targets, queries, int(targets.max()), int(queries.max()))
    for bounds in ((int(targets.max()), int(queries.max())),
                   (longest[0] + 11, longest[1] + 5)):
        bins = (bounds[0] + 1) * (bounds[1] + 1)
        order = plan.to_numpy(plan._counting_order(targets, queries, *bounds, bins))
        assert sorted(order.tolist()) == list(range(pairs))
        assert (targets[order] == targets[host]).all()
        assert (queries[order] == queries[host]).all()


def test_item_order_takes_bands_across_problems_in_order():
    """Warps take the first band of every problem, then every second band, ...; each
    problem's bands stay in order (no deadlock); tiles of a resumed pass as numbered."""
    from gpualign_df.gpu.long import item_order

    item_problem = np.repeat(np.arange(3), [3, 1, 2])
    first = np.array([0, 3, 4])
    order = item_order(item_problem, first, False)
    assert order.tolist() == [0, 3, 4, 1, 5, 2]
    assert item_order(item_problem, first, True).tolist() == list(range(6))


def encode_on_device(text: np.ndarray, shift: int, bounds: list[int], slot: int):
    """Run the cuDF path's encoding kernel on a column of ``text[shift:]`` (its rows'
    bounds, relative to ``shift``) whose characters buffer runs one byte past the
    column's range, with a lookup table of A, C, G, T, N as codes 0-4: the codes, the
    summary (six entries, ``slot``'s written), the lengths and validity, on the host.
    numpy under the simulator, else CuPy."""
    from gpualign_df.kernels.encoding import ENCODE_WORD, NO_BAD_BYTE, encode_column, word_layout
    from gpualign_df.scoring import INVALID_CODE
    if gpualign_df.gpu.simulator():
        xp, pointer = np, (lambda array: array.ctypes.data)
    else:
        import cupy as xp
        pointer = (lambda array: array.data.ptr)
    host = (lambda array: array if xp is np else array.get())
    lut = np.full(256, INVALID_CODE, np.uint8)
    lut[np.frombuffer(b"ACGTN", np.uint8)] = np.arange(5, dtype=np.uint8)
    rows = len(bounds) - 1
    chars = xp.asarray(text)[shift:shift + bounds[-1] + 1]
    head, words = word_layout(pointer(chars), len(chars))
    codes_buffer = xp.zeros(len(chars) + 2 * ENCODE_WORD, np.uint8)
    pad = (pointer(chars) - pointer(codes_buffer)) % ENCODE_WORD
    codes = codes_buffer[pad:pad + len(chars)]
    span = slice(head, head + ENCODE_WORD * words)
    lengths, valid = xp.zeros(rows, np.int64), xp.zeros(rows, bool)
    summary = xp.asarray(np.array([NO_BAD_BYTE, NO_BAD_BYTE, 0, 0, 0, 0], np.int64))
    grid = -(-max(words, rows + 1, ENCODE_WORD) // 32)
    encode_column[grid, 32](chars, chars[span].view(np.uint64), head, xp.asarray(lut),
                            xp.asarray(np.array(bounds, np.int64)), codes,
                            codes[span].view(np.uint64), xp.zeros(rows + 1, np.int64),
                            lengths, valid, True, summary, slot)
    return lut[text[shift:shift + len(chars)]], host(codes), host(summary).tolist(), \
        host(lengths).tolist(), host(valid)


def test_column_encoding_takes_words_at_every_alignment():
    """The cuDF path's encoding kernel maps 8 bytes a thread through whole aligned words,
    and the bytes before and after them one by one: at every alignment of the characters
    and every length around a word, the codes equal the table's, the first byte outside
    the alphabet within the column's range is the one reported (a bad byte outside the
    range is not), and the longest row is found."""
    from gpualign_df.kernels.encoding import ENCODE_WORD, NO_BAD_BYTE
    from gpualign_df.scoring import INVALID_CODE
    rng = np.random.default_rng(3)
    for shift in range(ENCODE_WORD):
        for n in (0, 1, 7, 8, 9, 16, 23, 41):
            text = rng.choice(np.frombuffer(b"ACGTN", np.uint8), n + 2 * ENCODE_WORD)
            text[shift + n] = ord("x")   # past the column's range: not reported
            if n >= 4:
                text[shift + n - 3] = ord("*")
            expected, codes, summary, lengths, valid = encode_on_device(
                text, shift, [0, n // 3, n], 1)
            assert (codes == expected).all(), (shift, n)
            bad = np.flatnonzero(expected[:n] == INVALID_CODE)
            wide = int((expected[:n] >= 4).any())   # an N or a bad byte in the range
            assert summary == [NO_BAD_BYTE, bad[0] if len(bad) else NO_BAD_BYTE,
                               0, max(n // 3, n - n // 3), 0, wide], (shift, n)
            assert lengths == [n // 3, n - n // 3] and valid.all()


def test_column_encoding_flags_a_code_past_t():
    """The encoding kernel's ``summary[4 + slot]`` is 1 exactly where the column's range
    of the characters holds a code of 4 or more (N), wherever it lies: before the first
    whole word, in one, or after the last; 0 for A, C, G and T only, and for an N in
    the buffer past the column's range (a cuDF column's buffer may hold such bytes)."""
    from gpualign_df.kernels.encoding import ENCODE_WORD
    rng = np.random.default_rng(8)
    for shift in (0, 3, 7):
        for n in (1, 7, 9, 23):
            for place in (None, 0, n // 2, n - 1, n):   # (n: past the range)
                text = rng.choice(np.frombuffer(b"ACGT", np.uint8), n + 2 * ENCODE_WORD)
                if place is not None:
                    text[shift + place] = ord("N")
                summary = encode_on_device(text, shift, [0, n], 0)[2]
                assert summary[4:] == [int(place is not None and place < n), 0], \
                    (shift, n, place)


def test_kept_values_follow_their_options_and_forget_buffers():
    """``buffers.kept_for`` gives the value made for the same options again (a Scoring by
    identity, plain values and settings by equality: each override block makes a new
    settings object), makes it anew for other options, and forgets it with the other
    kept buffers; the job constants built on it follow the job's scoring and settings."""
    from gpualign_df.gpu import batches, buffers
    from gpualign_df.scoring import make_scoring, parse_mode

    made = []

    def make():
        made.append(object())
        return made[-1]

    dna, other = make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), \
        make_scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    first = buffers.kept_for("test", (dna, (0, False), "M", None), make)
    assert buffers.kept_for("test", (dna, (0, False), "M", None), make) is first
    assert buffers.kept_for("test", (other, (0, False), "M", None), make) is not first
    assert buffers.kept_for("test", (other, (0, True), "M", None), make) is made[-1]
    assert len(made) == 3
    buffers.forget_buffers()
    buffers.kept_for("test", (other, (0, True), "M", None), make)
    assert len(made) == 4
    mode = parse_mode("sg", ("target_start", "target_end"))
    with config.override(pair_groups=((8, 19),)) as tuning:
        constants = batches._job_constants(dna, mode, True, "=", "soft", tuning)
        assert batches._job_constants(dna, mode, True, "=", "soft", tuning) is constants
        for changed in (batches._job_constants(other, mode, True, "=", "soft", tuning),
                        batches._job_constants(dna, parse_mode("nw"), True, "=", "soft",
                                               tuning),
                        batches._job_constants(dna, mode, True, "M", None, tuning)):
            assert changed is not constants
    default = config.settings()
    constants = batches._job_constants(dna, mode, True, "=", "soft", default)
    with config.override() as same:
        assert same is not default
        assert batches._job_constants(dna, mode, True, "=", "soft", same) is constants
    with config.override(pair_groups=((8, 19),)) as changed:
        assert batches._job_constants(dna, mode, True, "=", "soft", changed) is not constants
    assert (constants["gap_open"], constants["merge_matches"], constants["soft_clip"],
            constants["flags"]) == (7, False, True, (mode.code, *mode.flags(), True))


def test_scratch_views_are_kept_while_their_buffer_is():
    """``scratch`` and ``buffer_views`` give the very view objects again while the buffer
    and its count or layout stay, new ones for another count or layout; a buffer that
    grows drops every kept view of the old one (none keeps it alive), and the new views
    see the new buffer's memory."""
    from gpualign_df.gpu import buffers
    from gpualign_df.gpu.device import array_module
    from gpualign_df.gpu.plan import to_numpy

    buffers.forget_buffers()
    first = buffers.scratch("test views", 10, np.int64)
    assert buffers.scratch("test views", 10, np.int64) is first and len(first) == 10
    shorter = buffers.scratch("test views", 4, np.int64)
    assert shorter is not first and len(shorter) == 4
    old = buffers.scratch_buffer("test views", 4, np.int64)

    def halves(whole):
        return whole[:5], whole[5:10]

    pair = buffers.buffer_views("test halves", old, 5, halves)
    assert buffers.buffer_views("test halves", old, 5, halves) is pair
    assert buffers.buffer_views("test halves", old, 4, halves) is not pair
    grown = buffers.scratch("test views", 1000, np.int64)
    assert all(viewed is not old for viewed, _layout, _views in buffers.BUFFER_VIEWS.values())
    whole = buffers.scratch_buffer("test views", 1000, np.int64)
    assert whole is not old
    low, _high = buffers.buffer_views("test halves", whole, 5, halves)
    grown[:5] = array_module().asarray(np.arange(5))
    assert to_numpy(low).tolist() == [0, 1, 2, 3, 4]
    buffers.forget_buffers()
    assert not buffers.BUFFER_VIEWS


def test_row_numbers_count_from_zero_as_the_buffer_grows():
    """``buffers.row_numbers`` is 0..count-1 for any count, from one buffer that grows."""
    from gpualign_df.gpu import buffers

    buffers.forget_buffers()
    for count in (0, 5, 3, 1000, 7):
        numbers = buffers.row_numbers(count)
        assert gpualign_df.gpu.plan.to_numpy(numbers).tolist() == list(range(count))
    assert buffers.SCRATCH[("row_numbers", buffers.current_device())].size == 1000


def test_upload_maps_a_gpu_jobs_bytes_on_the_device():
    """A GPU job's sequences are encoded with ``deferred`` (their bytes kept, no host
    pass): the upload sends the bytes and maps them on the device. The device codes equal
    the host's mapping for each collection's own alphabet, each one's largest code is
    known, the host still made no pass; a character outside the alphabet raises the
    host's error naming the row, position and character, before any alignment."""
    from gpualign_df.encode import InvalidResidueError, encode_sequences
    from gpualign_df.gpu import upload
    from gpualign_df.scoring import make_scoring

    def host(array):
        return array.copy_to_host() if hasattr(array, "copy_to_host") else (
            array if isinstance(array, np.ndarray) else array.get())

    dna, protein = make_scoring(match=1, mismatch=-1), make_scoring("BLOSUM62")
    rows, proteins = ["ACGTN", None, "", "acgtRYKu", "T"], ["ARNDW", "chx", None]
    deferred = encode_sequences(rows, dna, deferred=True)
    other = encode_sequences(proteins, protein, deferred=True)
    on_device = upload(deferred, other)
    for sequences, uploaded, values, scoring in ((deferred, on_device[0], rows, dna),
                                                 (other, on_device[1], proteins, protein)):
        eager = encode_sequences(values, scoring)
        assert host(uploaded.codes)[:len(eager.codes)].tolist() == eager.codes.tolist()
        assert host(uploaded.offsets).tolist() == eager.offsets.tolist()
        assert uploaded.largest_code == eager.largest_code and sequences.unmapped
    empty = upload(encode_sequences(["", None], dna, deferred=True))[0]
    assert empty.largest_code == 0 and host(empty.offsets).tolist() == [0, 0, 0]
    bad = encode_sequences(["ACGT", "GGZ\u00e9A", "AC*"], dna, deferred=True)
    with pytest.raises(InvalidResidueError, match=r"row 1, position 2: character 'Z'"):
        upload(deferred, bad)
    with pytest.raises(InvalidResidueError, match=r"row 'b', position 2: character 'Z'"):
        gpualign_df.align(pd.Series(["ACGT", "GGZA"], index=["a", "b"]), ["ACGT", "GGCA"],
                          match=1, mismatch=-1, backend="cuda")   # (the planner's route)


def test_download_pinned_copies_device_arrays():
    """``download_pinned``: host copies of device arrays of any shape and dtype (a
    column of a table, whose rows are not contiguous, included) equal to the device's
    values; host arrays as they are."""
    from gpualign_df.gpu.buffers import download_pinned, to_device

    values = np.arange(60, dtype=np.int32).reshape(4, 15) - 7
    device = to_device(values)
    assert np.array_equal(download_pinned(device), values)
    assert np.array_equal(download_pinned(device[:, :9]), values[:, :9])
    part = download_pinned(device[2])
    assert part.dtype == np.int32 and np.array_equal(part, values[2])
    assert download_pinned(device[:, :0]).shape == (4, 0)
    assert download_pinned(values) is values


def test_digits_counts_decimal_digits():
    """The digit count the walks and the CPU engine size CIGARs by (comparisons below
    10,000, divisions above) equals the length of the number written out, at every
    power of ten and beside it, in Python and compiled as the engines compile it."""
    from numba import njit

    from gpualign_df.kernels.common import digits

    compiled = njit(digits)
    values = {1, 2, 2**31 - 1, 2**62}
    for power in range(19):
        values |= {10**power - 1, 10**power, 10**power + 1}
    values |= set(np.random.default_rng(3).integers(1, 10**12, 200).tolist())
    for value in sorted(values - {0}):
        assert digits(value) == compiled(value) == len(str(value)), value


@pytest.mark.parametrize("by_row", [False, True])
def test_cigar_kernel_writes_each_slot_at_its_offset(by_row):
    """The CIGAR kernel's characters (stored a word at a time where a whole aligned word
    is a string's own) equal the runs written out on the host: runs of one to seven
    digits (the longest past a word of digits), soft clips, ``=``/``X`` and ``M``
    styles, strings starting at every offset modulo 4, slots in another order than
    their rows; the bytes between the strings keep their value."""
    from gpualign_df.gpu.device import array_module
    from gpualign_df.gpu.launch import launch_kernel
    from gpualign_df.kernels.traceback import cigar_kernel

    xp = array_module()
    rng = np.random.default_rng(7)
    lengths = [1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 123456, 1234567]
    slots = 24
    pair_runs, clips = [], []
    for slot in range(slots):
        count = int(rng.integers(0, 6))
        pair_runs.append([(int(rng.choice(lengths)), int(rng.integers(0, 4)))
                          for _ in range(count)])
        clips.append((int(rng.choice([0, 0, 3, 12345])), int(rng.choice([0, 0, 7, 100000]))))
    slot_row = np.array(rng.permutation(slots), dtype=np.int64)
    for merge, clip_style in ((False, True), (True, False)):
        symbols = "MXID" if merge else "=XID"
        texts = []
        for runs_of, (first, last) in zip(pair_runs, clips):
            text = f"{first}S" if clip_style and first else ""
            text += "".join(f"{length}{symbols[op]}" for length, op in runs_of)
            texts.append(text + (f"{last}S" if clip_style and last else ""))
        gaps = rng.integers(0, 4, slots)  # untouched bytes before each string
        at = 0
        order = np.argsort(slot_row) if by_row else np.arange(slots)  # (place order)
        placed = np.zeros(slots, np.int64)
        for slot in order:
            at += int(gaps[slot])
            placed[slot] = at
            at += len(texts[slot])
        offsets = placed.copy()
        if by_row:   # offsets by job row
            offsets = np.zeros(slots, np.int64)
            offsets[slot_row] = placed
        base = np.zeros(slots, np.int64)
        words = []
        for slot, runs_of in enumerate(pair_runs):
            base[slot] = len(words)
            words += [length << 2 | op for length, op in reversed(runs_of)]  # end to start
        first_clips = np.zeros(slots, np.int32)
        ends = np.zeros(slots, np.int32)
        query_lengths = np.full(slots, 2_000_000, np.int64)
        for slot, (first, last) in enumerate(clips):
            first_clips[slot_row[slot]] = first
            ends[slot_row[slot]] = query_lengths[slot] - last
        size = -(-(at + 5) // 4) * 4
        chars = xp.asarray(np.full(size, 35, np.uint8))   # '#'
        kernel = cigar_kernel(merge, clip_style)
        launch_kernel("cigar", kernel, 1, 32, xp.asarray(np.array(words + [0], np.uint32)),
                      xp.asarray(base), xp.asarray(np.array([len(r) for r in pair_runs],
                                                            np.int32)),
                      xp.asarray(slot_row), xp.asarray(first_clips), xp.asarray(ends),
                      xp.asarray(query_lengths), xp.asarray(offsets), by_row, chars,
                      chars.view(np.uint32))
        written = bytes(np.asarray(chars.get() if hasattr(chars, "get") else chars))
        expected = bytearray(b"#" * size)
        for slot in range(slots):
            expected[placed[slot]:placed[slot] + len(texts[slot])] = texts[slot].encode()
        assert written == bytes(expected)
