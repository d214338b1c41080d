"""The CPU engine's wavefront across SIMD lanes (one pair at a time, kernels/cpu_wave.py)
gives the row-by-row fill's frames exactly: scores, coordinates, CIGARs, on every mode and
free-ends subset, every kind of matrix, lengths around its groups of 64 rows and its 16
lanes, and pairs full of equal-scoring paths; its scores equal parasail's."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import parasail
import pytest

import gpualign_df
from gpualign_df import config
from gpualign_df.kernels import cpu_wave
from helpers import mutate, random_sequences

FREE = ("query_start", "query_end", "target_start", "target_end")
#: every mode, and semi-global with every subset of free ends
MODES = [("sw", None), ("nw", None)] + [
    ("sg", subset) for size in range(5) for subset in itertools.combinations(FREE, size)]


def pairs_of(alphabet: str, seed: int) -> tuple[list[str], list[str]]:
    """Related and unrelated pairs, lengths around the wavefront's groups and lanes, and
    repeats (tandem repeats, homopolymers: many equal-scoring paths)."""
    rng = np.random.default_rng(seed)
    queries, targets = [], []
    for m, n in [(63, 64), (64, 65), (65, 63), (128, 40), (129, 200), (1, 90), (90, 1),
                 (70, 15), (33, 16), (200, 17), (140, 140)]:
        query = random_sequences(rng, 1, alphabet, m, min_length=m)[0]
        target = (mutate(rng, query, alphabet, 0.1)[:n] if rng.random() < 0.6
                  else random_sequences(rng, 1, alphabet, n, min_length=n)[0]) or alphabet[0]
        queries.append(query)
        targets.append(target)
    unit = alphabet[:3]
    queries += [unit * 30, alphabet[0] * 100, (unit * 40)[:97]]
    targets += [unit * 25 + alphabet[1] + unit * 5, alphabet[0] * 77, (unit * 33)[2:]]
    return queries, targets


def both_fills(queries, targets, **options):
    """(wavefront frame, row-by-row frame): every pair alone (no lane groups)."""
    with config.override(lane_max_length=0, cpu_wave_min_length=1):
        wave = gpualign_df.align(queries, targets, backend="cpu", **options)
    with config.override(lane_max_length=0, cpu_wave_min_length=1 << 30):
        rows = gpualign_df.align(queries, targets, backend="cpu", **options)
    return wave, rows


@pytest.mark.parametrize("mode,free_ends", MODES,
                         ids=[f"{m}-{'+'.join(e) if e else e}" for m, e in MODES])
def test_wavefront_equals_row_by_row_in_every_mode(mode, free_ends):
    queries, targets = pairs_of("ACGT", 1)
    for traceback in (True, False):
        wave, rows = both_fills(queries, targets, mode=mode, free_ends=free_ends, match=2,
                                mismatch=-3, gap_open=5, gap_extend=2, traceback=traceback)
        pd.testing.assert_frame_equal(wave, rows)


@pytest.mark.parametrize("options,alphabet", [
    (dict(matrix="EDNAFULL", gap_open=10, gap_extend=1), "ACGTN"),        # N's own scores
    (dict(match=1, mismatch=-4, gap_open=7, gap_extend=1), "ACGTNRY"),     # codes: mismatch
    (dict(matrix="BLOSUM62", gap_open=11, gap_extend=1), "ARNDCQEGHILKMFPSTWYVBZX"),
    (dict(match=200, mismatch=-150, gap_open=260, gap_extend=11), "ACGT"),  # GATK's scores
    (dict(match=3, mismatch=-1, gap_open=1, gap_extend=1), "AC"),          # linear gaps, ties
])
@pytest.mark.parametrize("mode", ["sw", "sg", "nw"])
def test_wavefront_equals_row_by_row_for_every_kind_of_matrix(options, alphabet, mode):
    queries, targets = pairs_of(alphabet, 2)
    wave, rows = both_fills(queries, targets, mode=mode, **options)
    pd.testing.assert_frame_equal(wave, rows)


def test_an_asymmetric_matrix_keeps_query_rows_and_target_columns():
    table = np.array([[4, -3, -1], [-2, 5, -4], [0, -5, 3]])
    matrix = pd.DataFrame(table, index=list("XYZ"), columns=list("XYZ"))
    queries, targets = pairs_of("XYZ", 3)
    for mode in ("sw", "nw"):
        wave, rows = both_fills(queries, targets, mode=mode, matrix=matrix, gap_open=4,
                                gap_extend=1)
        pd.testing.assert_frame_equal(wave, rows)


def test_wavefront_scores_equal_parasail():
    """An independent oracle: parasail's scores for long pairs on the default routing,
    which sends a pair alone across the lanes."""
    rng = np.random.default_rng(4)
    queries = random_sequences(rng, 3, "ACGT", 900, min_length=500)
    targets = [mutate(rng, query, "ACGT", 0.06) for query in queries]
    matrix = parasail.matrix_create("ACGT", 2, -3)
    frame = gpualign_df.align(queries, targets, mode="sw", match=2, mismatch=-3, gap_open=5,
                              gap_extend=2, backend="cpu")
    for query, target, score in zip(queries, targets, frame["score"]):
        assert score == parasail.sw_striped_32(query, target, 5, 2, matrix).score
    frame = gpualign_df.align(queries, targets, mode="nw", match=2, mismatch=-3, gap_open=5,
                              gap_extend=2, backend="cpu")
    for query, target, score in zip(queries, targets, frame["score"]):
        assert score == parasail.nw_striped_32(query, target, 5, 2, matrix).score


def test_a_fill_counts_its_cells_and_stops_when_told():
    from gpualign_df.scoring import MODE_GLOBAL, make_scoring

    scoring = make_scoring(match=1, mismatch=-1, gap_open=2, gap_extend=1)
    query = np.zeros(200, np.uint8)
    target = np.ones(90, np.uint8)
    tb = np.empty((cpu_wave.tb_rows(200, 90), cpu_wave.LANES), np.uint8)
    control = np.zeros(2, np.int64)
    score, end_i, end_j = cpu_wave.fill_wave(query, target, scoring.matrix, 2, 1, MODE_GLOBAL,
                                             False, False, False, False, tb, control, 0)
    assert control[1] == 200 * 90 and (end_i, end_j) == (200, 90)
    assert score == -(2 + 109 * 1) - 90  # 110 rows of gap, 90 mismatches
    control[:] = (1, 0)  # stopped: one group, then it returns
    cpu_wave.fill_wave(query, target, scoring.matrix, 2, 1, MODE_GLOBAL, False, False, False,
                       False, tb, control, 0)
    assert control[1] == cpu_wave.GROUP_ROWS * 90


def test_a_pair_goes_across_the_lanes_only_within_its_traceback_budget(monkeypatch):
    """The wavefront's nibbles take a little more than the full matrix's (whole groups of
    rows, the lanes' ramp): a pair whose matrix fits its ``traceback_memory`` but whose
    wavefront would not runs row by row, with the same frame."""
    from gpualign_df.kernels import cpu

    full = 40 * ((40 + 1) // 2)
    wave_bytes = int(cpu_wave.traceback_bytes(40, 40))
    assert full < wave_bytes
    ran = []
    for name, module in (("wave", cpu_wave), ("rows", cpu)):
        kernel = getattr(module, "align_pairs_wave" if name == "wave" else "align_pairs")
        monkeypatch.setattr(module, kernel.__name__,
                            lambda *args, _k=kernel, _n=name: ran.append(_n) or _k(*args))
    rng = np.random.default_rng(5)
    query = random_sequences(rng, 1, "ACGT", 40, min_length=40)[0]
    target = mutate(rng, query, "ACGT", 0.1)[:40].ljust(40, "A")
    options = dict(backend="cpu", mode="nw", match=2, mismatch=-3, gap_open=5, gap_extend=2)
    frames = {}
    for budget in (full, wave_bytes):
        ran.clear()
        with config.override(lane_max_length=0):
            frames[budget] = gpualign_df.align([query], [target], traceback_memory=budget,
                                               **options)
        assert ran == (["wave"] if budget == wave_bytes else ["rows"])
    pd.testing.assert_frame_equal(frames[full], frames[wave_bytes])
