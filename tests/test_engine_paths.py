"""The CPU engine's two code paths give identical results, bit for bit.

Short non-empty pairs run in SIMD lane groups (``kernels/cpu_lanes.py``), everything else one
pair per thread (``kernels/cpu.py``). Setting ``lane_max_length`` to 0 sends every
pair down the one-pair path; the whole result frame must not change. Spies on the two kernel
entry points prove that each run really took the path it is meant to compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import config, engine
from gpualign_df.kernels import cpu, cpu_lanes, cpu_search, cpu_wave
from gpualign_df.scoring import make_scoring
from helpers import mutate, random_sequences, rescore

LANE_MAX = config.settings().lane_max_length

DNA = "ACGT"
PROTEIN = "ARNDCQEGHILKMFPSTWYV"
TO_PROTEIN = str.maketrans("ACGT", "WKLE")
FREE_ENDS = [None, ("target_start", "target_end"), ("query_start", "query_end"),
             ("query_start", "target_end"), ("query_end", "target_start"), ("query_end",),
             ("target_start",), ()]
MODES = [("sw", None), ("nw", None)] + [("sg", ends) for ends in FREE_ENDS]
SCORINGS = {
    "dna-2-3-gap10+1": dict(match=2, mismatch=-3, gap_open=10, gap_extend=1),
    "dna-1-1-linear2": dict(match=1, mismatch=-1, gap_open=2, gap_extend=2),
    "dna-1-4-gap7+1": dict(match=1, mismatch=-4, gap_open=7, gap_extend=1),
    "dna-3-2-gap4+0": dict(match=3, mismatch=-2, gap_open=4, gap_extend=0),
    "ednafull-linear3": dict(matrix="EDNAFULL", gap_open=3, gap_extend=3),
    "blosum62-gap11+1": dict(matrix="BLOSUM62", gap_open=11, gap_extend=1),
    "blosum62-linear4": dict(matrix="BLOSUM62", gap_open=4, gap_extend=4),
}


def tie_pairs() -> list[tuple[str, str]]:
    """Repetitive and single-letter pairs whose optimal alignments are not unique."""
    pairs = []
    for a, b in [(40, 23), (23, 40), (7, 3), (1, 5), (16, 16), (60, 59)]:
        pairs.append(("AC" * a, "AC" * b))
        pairs.append(("AC" * a, "CA" * b))
    for a, b in [(50, 17), (17, 50), (1, 9), (9, 1), (33, 33), (2, 3)]:
        pairs.append(("A" * a, "A" * b))
    pairs += [("A" * 20, "C" * 20), ("A" * 10, "C" * 25), ("ACG" * 20, "CGA" * 15),
              ("AAAAT" * 10, "AT" * 8), ("AT" * 30, "TA" * 31), ("ACGT" * 30, "TGCA" * 25),
              ("ACGT" * 12, "ACGT" * 12 + "ACG"), ("AACC" * 15, "ACAC" * 15),
              ("A", "C"), ("A", "A"), ("AAAAAAAAAC", "CAAAAAAAAA"), ("GATTACA" * 9, "GATACA" * 11)]
    return pairs


def make_pairs(alphabet: str, seed: int, count: int = 300) -> tuple[list[str], list[str]]:
    """``count`` random pairs, lengths 1..300, half related, shuffled with the tie pairs."""
    rng = np.random.default_rng(seed)
    queries, targets = [], []
    for k in range(count):
        query = random_sequences(rng, 1, alphabet, 300, min_length=1)[0]
        if k % 3 == 0:
            target = random_sequences(rng, 1, alphabet, 300, min_length=1)[0]
        else:
            target = mutate(rng, query, alphabet, 0.08) or alphabet[0]
            if k % 2:
                flanks = random_sequences(rng, 2, alphabet, 40)
                target = flanks[0] + target + flanks[1]
            elif k % 4 == 0:
                target = target[rng.integers(0, max(1, len(target) // 3)):]
        if k % 5 == 0:
            query, target = target, query
        queries.append(query)
        targets.append(target)
    ties = tie_pairs()
    if alphabet != DNA:
        ties = [(q.translate(TO_PROTEIN), t.translate(TO_PROTEIN)) for q, t in ties]
    queries += [q for q, _ in ties]
    targets += [t for _, t in ties]
    order = rng.permutation(len(queries))
    return [queries[k] for k in order], [targets[k] for k in order]


PAIRS = {"dna": make_pairs(DNA, 1), "protein": make_pairs(PROTEIN, 2)}


@dataclass
class PathSpy:
    """Which pairs each kernel entry point received."""

    lane_pairs: list[int] = field(default_factory=list)
    one_pair_pairs: list[int] = field(default_factory=list)  # row by row or across lanes
    wave_pairs: list[int] = field(default_factory=list)      # across lanes
    padded_groups: int = 0


@pytest.fixture
def spy(monkeypatch):
    record = PathSpy()
    lane_kernel, one_pair_kernel = cpu_lanes.align_lane_groups, cpu.align_pairs
    wave_kernel = cpu_wave.align_pairs_wave

    def lanes(query_codes, query_offsets, target_codes, target_offsets, pair_query, pair_target,
              groups, *rest):
        for group in groups:
            members = group[group >= 0]
            record.lane_pairs += members.tolist()
            lengths = {(query_offsets[pair_query[p] + 1] - query_offsets[pair_query[p]],
                        target_offsets[pair_target[p] + 1] - target_offsets[pair_target[p]])
                       for p in members}
            record.padded_groups += len(lengths) > 1 or len(members) < cpu_lanes.LANES
        return lane_kernel(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                           pair_target, groups, *rest)

    def one_pair(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                 pair_target, order, *rest):
        record.one_pair_pairs += order.tolist()
        return one_pair_kernel(query_codes, query_offsets, target_codes, target_offsets,
                               pair_query, pair_target, order, *rest)

    def wave(query_codes, query_offsets, target_codes, target_offsets, pair_query,
             pair_target, order, *rest):
        record.one_pair_pairs += order.tolist()
        record.wave_pairs += order.tolist()
        return wave_kernel(query_codes, query_offsets, target_codes, target_offsets,
                           pair_query, pair_target, order, *rest)

    monkeypatch.setattr(cpu_lanes, "align_lane_groups", lanes)
    monkeypatch.setattr(cpu, "align_pairs", one_pair)
    monkeypatch.setattr(cpu_wave, "align_pairs_wave", wave)
    return record


def run_both_paths(monkeypatch, spy, queries, targets, *, how="rowwise", **options):
    """(lane-path frame, one-pair-path frame) of the same job; checks the routing, and that
    the one-pair path's frame is the same with every pair row by row (no wavefront)."""
    options = dict(backend="cpu", how=how, **options)
    spy.lane_pairs.clear()
    spy.one_pair_pairs.clear()
    spy.padded_groups = 0
    default = gpualign_df.align(queries, targets, **options)
    lane_pairs, one_pair_pairs = sorted(spy.lane_pairs), sorted(spy.one_pair_pairs)
    padded = spy.padded_groups
    spy.lane_pairs.clear()
    spy.one_pair_pairs.clear()
    spy.wave_pairs.clear()
    with config.override(lane_max_length=0):
        forced = gpualign_df.align(queries, targets, **options)
    assert spy.lane_pairs == []
    assert sorted(spy.one_pair_pairs) == sorted(lane_pairs + one_pair_pairs)
    if how == "rowwise":  # pairs long enough on both sides go across lanes
        minimum = config.settings().cpu_wave_min_length
        lengths = [min(len(q or ""), len(t or "")) for q, t in zip(queries, targets)]
        assert sorted(spy.wave_pairs) == sorted(p for p in spy.one_pair_pairs
                                                if lengths[p] >= minimum)
    with config.override(lane_max_length=0, cpu_wave_min_length=1 << 30):
        row_by_row = gpualign_df.align(queries, targets, **options)
    pd.testing.assert_frame_equal(forced, row_by_row)
    return default, forced, lane_pairs, one_pair_pairs, padded


def expected_lane_pairs(queries, targets):
    return [k for k, (q, t) in enumerate(zip(queries, targets))
            if 0 < len(q) <= LANE_MAX and 0 < len(t) <= LANE_MAX]


def test_pairs_cover_many_lengths_and_ties():
    for queries, targets in PAIRS.values():
        assert len(queries) >= 300
        lengths = [len(q) for q in queries] + [len(t) for t in targets]
        assert min(lengths) == 1 and max(lengths) >= 300
        assert len(set(lengths)) > 150


@pytest.mark.parametrize("mode,free_ends", MODES,
                         ids=[f"{m}-{'+'.join(e) if e else e}" for m, e in MODES])
@pytest.mark.parametrize("scoring", SCORINGS.values(), ids=SCORINGS.keys())
def test_lane_path_equals_one_pair_path(monkeypatch, spy, mode, free_ends, scoring):
    queries, targets = PAIRS["protein" if scoring.get("matrix") == "BLOSUM62" else "dna"]
    default, forced, lane_pairs, one_pair_pairs, padded = run_both_paths(
        monkeypatch, spy, queries, targets, mode=mode, free_ends=free_ends, **scoring)
    assert lane_pairs == expected_lane_pairs(queries, targets)
    assert one_pair_pairs == []
    assert padded > 0
    pd.testing.assert_frame_equal(default, forced)
    assert default["score"].notna().all()


@pytest.mark.parametrize("mode,free_ends", MODES[:4])
@pytest.mark.parametrize("scoring", ["dna-2-3-gap10+1", "blosum62-linear4"])
def test_score_only_paths_agree(monkeypatch, spy, mode, free_ends, scoring):
    """Score-only frames of the lanes, the one-pair path and (local, gathered matrices)
    the striped path are equal, and equal the traceback frame's columns."""
    options = SCORINGS[scoring]
    queries, targets = PAIRS["protein" if options.get("matrix") == "BLOSUM62" else "dna"]
    striped = gpualign_df.align(queries, targets, mode=mode, free_ends=free_ends,
                                traceback=False, backend="cpu", **options)
    monkeypatch.setattr(engine, "striped_scores", lambda *args: False)
    default, forced, lane_pairs, _, _ = run_both_paths(
        monkeypatch, spy, queries, targets, mode=mode, free_ends=free_ends, traceback=False,
        **options)
    assert len(lane_pairs) == len(queries)
    pd.testing.assert_frame_equal(default, forced)
    pd.testing.assert_frame_equal(default, striped)
    with_traceback = gpualign_df.align(queries, targets, mode=mode, free_ends=free_ends,
                                       backend="cpu", **options)
    pd.testing.assert_frame_equal(default, with_traceback[list(default.columns)])


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None), ("sg", None),
                                            ("sg", ("target_start", "target_end"))])
def test_tie_cases_agree_and_rescore(monkeypatch, spy, mode, free_ends):
    ties = tie_pairs()
    queries = [q for q, _ in ties] * 2
    targets = [t for _, t in ties] + [t.lower() for _, t in ties]
    options = dict(match=1, mismatch=-1, gap_open=1, gap_extend=1)
    default, forced, lane_pairs, _, _ = run_both_paths(
        monkeypatch, spy, queries, targets, mode=mode, free_ends=free_ends, **options)
    assert len(lane_pairs) == len(queries)
    pd.testing.assert_frame_equal(default, forced)
    scoring = make_scoring(**options)
    for row, query, target in zip(default.itertuples(), queries, targets):
        assert rescore(query, target, row, scoring) == row.score
    half = len(ties)
    pd.testing.assert_frame_equal(default.iloc[:half].drop(columns=["query", "target"]),
                                  default.iloc[half:].drop(columns=["query", "target"])
                                  .reset_index(drop=True))


@pytest.mark.parametrize("how", ["pairwise", "search"])
def test_pairwise_and_search_jobs_agree(monkeypatch, spy, how):
    queries, targets = PAIRS["dna"]
    subset_queries = pd.Series(queries[:30], index=[f"q{k}" for k in range(30)])
    subset_targets = None if how == "pairwise" else pd.Series(targets[:25])
    for mode in ("sw", "sg"):
        default, forced, lane_pairs, _, _ = run_both_paths(
            monkeypatch, spy, subset_queries, subset_targets, how=how, mode=mode, match=2,
            mismatch=-3, gap_open=5, gap_extend=2)
        assert len(lane_pairs) == len(default) > 0
        pd.testing.assert_frame_equal(default, forced)


def test_nulls_and_empty_sequences_mixed_with_lane_pairs(monkeypatch, spy):
    queries, targets = (list(x[:60]) for x in PAIRS["dna"])
    queries[3], targets[8], queries[11], targets[11] = None, None, "", ""
    queries[20], targets[31] = "", ""
    default, forced, lane_pairs, one_pair_pairs, _ = run_both_paths(
        monkeypatch, spy, queries, targets, mode="sg", free_ends=("target_start", "target_end"),
        match=2, mismatch=-3, gap_open=5, gap_extend=2)
    assert lane_pairs == [k for k in range(60) if k not in (3, 8, 11, 20, 31)]
    assert one_pair_pairs == [11, 20, 31]
    pd.testing.assert_frame_equal(default, forced)
    assert default.loc[[3, 8], "score"].isna().all()


def _long_pairs(seed: int):
    rng = np.random.default_rng(seed)
    query = random_sequences(rng, 1, DNA, 2100, min_length=2100)[0]
    related = mutate(rng, query, DNA, 0.04)[25:2075]
    unrelated = random_sequences(rng, 1, DNA, 2050, min_length=2050)[0]
    other = random_sequences(rng, 1, DNA, 2100, min_length=2100)[0]
    short_queries, short_targets = (x[:40] for x in make_pairs(DNA, seed + 1, count=40))
    queries = short_queries[:20] + [query] + short_queries[20:] + [other]
    targets = short_targets[:20] + [related] + short_targets[20:] + [unrelated]
    return queries, targets


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None),
                                            ("sg", ("target_start", "target_end"))])
def test_pairs_longer_than_lanes_mixed_with_short_pairs(monkeypatch, spy, mode, free_ends):
    queries, targets = _long_pairs(21)
    long_pairs = [k for k, q in enumerate(queries) if len(q) > LANE_MAX]
    assert len(long_pairs) == 2
    assert all(len(targets[k]) > LANE_MAX for k in long_pairs)
    options = dict(mode=mode, free_ends=free_ends, matrix="EDNAFULL", gap_open=10, gap_extend=1)
    default, forced, lane_pairs, one_pair_pairs, _ = run_both_paths(
        monkeypatch, spy, queries, targets, **options)
    assert one_pair_pairs == long_pairs
    assert lane_pairs == [k for k in range(len(queries)) if k not in long_pairs]
    pd.testing.assert_frame_equal(default, forced)
    related_row = default.loc[long_pairs[0]]
    assert related_row["matches"] > 1800
    # The lane kernel's own limit is 4095 columns: widening lane_max_length to take the
    # long pairs too (one group padded from ~40 to ~2100 columns, so kept there only with
    # lane_min_fill off) must not change anything.
    with config.override(lane_max_length=2200, lane_min_fill=0):
        spy.lane_pairs.clear()
        widened = gpualign_df.align(queries, targets, backend="cpu", **options)
        assert sorted(spy.lane_pairs) == list(range(len(queries)))
    pd.testing.assert_frame_equal(default, widened)


@pytest.mark.parametrize("options,striped", [
    (dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1), True),
    (dict(mode="sw", matrix="EDNAFULL", gap_open=10, gap_extend=1), True),
    (dict(mode="sw", match=2, mismatch=-3, gap_open=5, gap_extend=2), False),  # compare lanes
    (dict(mode="nw", matrix="BLOSUM62", gap_open=11, gap_extend=1), False),
    (dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1, traceback=True), False),
])
def test_score_only_local_pairs_of_gathered_matrices_run_striped(monkeypatch, options,
                                                                 striped):
    """The CPU engine scores local pairs without traceback one at a time down the query's
    striped profile where its lanes would gather every lane's score (BLOSUM, EDNAFULL),
    and keeps its lanes for match/mismatch schemes, other modes and traceback; pairwise
    jobs share each query's profile. Frames equal the pair engine's either way, a
    saturated pair (scores past 16 bits) included."""
    rng = np.random.default_rng(31)
    alphabet = "ACGT" if "match" in options or options["matrix"] == "EDNAFULL" else PROTEIN
    sequences = random_sequences(rng, 30, alphabet, 90, 0) + [None]
    options = dict(dict(traceback=False, backend="cpu"), **options)
    runs = []
    search_ends = cpu_search.search_ends
    monkeypatch.setattr(cpu_search, "search_ends",
                        lambda *args: runs.append(len(args[6])) or search_ends(*args))
    for how in ("rowwise", "pairwise"):
        runs.clear()
        frame = gpualign_df.align(sequences, sequences[::-1] if how == "rowwise" else None,
                                  how=how, **options)
        assert bool(runs) == striped
        with monkeypatch.context() as patch:
            patch.setattr(engine, "striped_scores", lambda *args: False)
            pd.testing.assert_frame_equal(frame, gpualign_df.align(
                sequences, sequences[::-1] if how == "rowwise" else None, how=how, **options))
    if striped:   # a gathered matrix whose scores pass 16 bits: the 32-bit path's
        table = np.full((4, 4), -100) - np.arange(4)
        np.fill_diagonal(table, 4000)
        big = dict(options, matrix=("ACGT", table), gap_open=1000, gap_extend=10)
        runs.clear()
        frame = gpualign_df.align(["ACGTTGCA" * 2, "ACG"], ["ACGTTGCA" * 2, "ACG"], **big)
        assert runs and frame["score"].tolist() == [4000 * 16, 4000 * 3]


def test_a_pair_far_costlier_than_the_rest_leaves_the_lanes(monkeypatch, spy):
    """Within the lanes' lengths, a pair whose group would be mostly padding (it alone sets
    the group's height and width) goes one pair per thread, as a lone pair does; the others
    keep their lanes, and the frame is the same either way."""
    rng = np.random.default_rng(30)
    queries = random_sequences(rng, 40, PROTEIN, 30, 20)
    targets = random_sequences(rng, 40, PROTEIN, 30, 20)
    queries[7], targets[7] = random_sequences(rng, 2, PROTEIN, 600, 600)
    options = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1)
    default, forced, lane_pairs, one_pair_pairs, _ = run_both_paths(
        monkeypatch, spy, queries, targets, **options)
    assert one_pair_pairs == [7]
    assert lane_pairs == [k for k in range(40) if k != 7]
    pd.testing.assert_frame_equal(default, forced)
    lone, _, lane_pairs, one_pair_pairs, _ = run_both_paths(
        monkeypatch, spy, queries[7:8], targets[7:8], **options)
    assert (lane_pairs, one_pair_pairs) == ([], [0])
    with config.override(lane_min_fill=0):
        spy.lane_pairs.clear()
        spy.one_pair_pairs.clear()
        kept = gpualign_df.align(queries, targets, backend="cpu", **options)
    assert sorted(spy.lane_pairs) == list(range(40)) and spy.one_pair_pairs == []
    pd.testing.assert_frame_equal(default, kept)


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None), ("sg", None)])
@pytest.mark.parametrize("scoring", ["dna-1-1-linear2", "blosum62-gap11+1"])
def test_int32_lane_groups_equal_one_pair_path(monkeypatch, spy, settings, mode, free_ends,
                                              scoring):
    """Lane groups forced to 32-bit cells (the int16 limit set to 0), ties included."""
    settings(lane_narrow_score_limit=0)
    alphabet = "ACGT" if scoring.startswith("dna") else "ARNDCQEGHILKMFPSTWYV"
    queries, targets = make_pairs(alphabet, 41, count=120)
    ties = tie_pairs() if scoring.startswith("dna") else []
    queries += [q for q, _ in ties]
    targets += [t for _, t in ties]
    default, forced, _, _, _ = run_both_paths(monkeypatch, spy, queries, targets, mode=mode,
                                              free_ends=free_ends, **SCORINGS[scoring])
    pd.testing.assert_frame_equal(default, forced)


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_int16_boundary_scores_equal_one_pair_path(monkeypatch, spy, mode):
    """Scores whose bound sits just under the int16 limit: large gap costs, a matrix that is
    not match/mismatch (its own gather path), and a custom matrix with match < mismatch."""
    rng = np.random.default_rng(5)
    alphabet = "ACGT"
    table = rng.integers(-9, 10, size=(4, 4))
    queries, targets = make_pairs(alphabet, 43, count=80)
    for matrix, gap_open, gap_extend in (((alphabet, table), 900, 3),
                                        ((alphabet, np.array([[-2, 5, 5, 5], [5, -2, 5, 5],
                                                              [5, 5, -2, 5], [5, 5, 5, -2]])),
                                         1500, 1)):
        default, forced, _, _, _ = run_both_paths(monkeypatch, spy, queries, targets, mode=mode,
                                                  matrix=matrix, gap_open=gap_open,
                                                  gap_extend=gap_extend)
        pd.testing.assert_frame_equal(default, forced)


def test_gap_costs_beyond_the_band_word_run_on_the_cpu():
    """gap_open - gap_extend must fit the long-pair kernel's 16-bit gap field; larger
    differences go to the CPU engine, the one place that picks engines, and still align."""
    from gpualign_df.engine import choose_engine

    fits = make_scoring(match=1, mismatch=-1, gap_open=65_000, gap_extend=1)
    too_wide = make_scoring(match=1, mismatch=-1, gap_open=70_000, gap_extend=1)
    assert choose_engine("cuda", fits) == "cuda"
    assert choose_engine("cuda", too_wide) == "cpu"
    frame = gpualign_df.align(["ACGTAC"], ["ACGAC"], mode="nw", match=1, mismatch=-1,
                              gap_open=70_000, gap_extend=1, backend="cuda")
    assert frame.score[0] == 5 - 70_000 and frame.cigar[0] == "3=1I2="


def test_few_long_pairs_run_alone_across_the_lanes_not_in_one_group(monkeypatch, spy):
    """Pairs the lanes could take go alone across the SIMD lanes where that ends sooner
    (lanes_beat_alone): 5 pairs of 300 x 320 fill a fifth of one group, so alone; 40 fill
    two groups far better than 1.8 times their cells alone, so lanes (one thread, so that
    the rule does not depend on the machine's cores). The frames are the same."""
    import numba

    rng = np.random.default_rng(12)
    queries = random_sequences(rng, 40, DNA, 300, min_length=300)
    targets = [mutate(rng, query, DNA, 0.05)[:320] for query in queries]
    options = dict(backend="cpu", mode="sg", match=2, mismatch=-3, gap_open=5, gap_extend=2)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        for count, in_lanes in ((5, False), (40, True)):
            spy.lane_pairs.clear()
            spy.wave_pairs.clear()
            frame = gpualign_df.align(queries[:count], targets[:count], **options)
            assert (sorted(spy.lane_pairs), sorted(spy.wave_pairs)) == (
                (list(range(count)), []) if in_lanes else ([], list(range(count))))
            with config.override(cpu_wave_min_length=1 << 30):  # lanes, or row by row
                pd.testing.assert_frame_equal(
                    gpualign_df.align(queries[:count], targets[:count], **options), frame)
    finally:
        numba.set_num_threads(threads)
