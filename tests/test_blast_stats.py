"""Karlin-Altschul statistics (gpualign_df.blast_stats) against NCBI BLAST.

Oracles: the parameter tables of NCBI BLAST+ blast_stat.c, and numbers BLAST+ itself
printed in XML reports that Biopython keeps as test data (Tests/Blast/xml_2226_blastp_*.xml,
Tests/Blast/xml_2900_blastn_001.xml) and that the dark-matter project quotes from a BLASTN
2.2.27+ run: query length, database size, length adjustment (``Statistics_hsp-len``),
effective search space (``Statistics_eff-space``), raw score, bit score and e-value. No
installed package computes Karlin-Altschul e-values (Biopython and parasail do not), so
the other checks are properties the formulas must have.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from Bio.Align import substitution_matrices
from hypothesis import example, given, settings
from hypothesis import strategies as st

import gpualign_df.blast_stats as blast_stats
from gpualign_df.blast_stats import (KarlinAltschul, effective_search_space, evalues_and_bitscores,
                                     karlin_altschul, length_adjustment)
from gpualign_df.scoring import blast_to_gap_costs, make_scoring


def blast_params(matrix=None, *, blast_open, blast_extend, **kwargs):
    """Parameters for a scheme given with BLAST's gap costs (open + k*extend)."""
    gap_open, gap_extend = blast_to_gap_costs(blast_open, blast_extend)
    return karlin_altschul(make_scoring(matrix, gap_open=gap_open, gap_extend=gap_extend,
                                        **kwargs))


BLOSUM62_11_1 = blast_params("BLOSUM62", blast_open=11, blast_extend=1)
BLASTN_2_3_5_2 = blast_params(match=2, mismatch=-3, blast_open=5, blast_extend=2)

#: Two databases from BLAST+ reports: (residues, sequences).
MINIREFSEQ_PROT = (6406, 20)              # Biopython xml_2226_blastp_00{1,3}.xml
VIRUS_NT_20130719 = (1634236772, 1331289)  # BLASTN 2.2.27+, dark-matter test_blast.py
GPIPE_MOUSE = (3164670549, 107382)         # BLASTN 2.9.0+, Biopython xml_2900_blastn_001.xml


# --- parameters -----------------------------------------------------------------------

def test_blosum62_default_is_blasts_11_1_row():
    # blastp's default: BLOSUM62, -gapopen 11 -gapextend 1, i.e. gap_open=12 here.
    params = karlin_altschul(make_scoring("BLOSUM62", gap_open=12, gap_extend=1))
    assert params == KarlinAltschul(lambda_=0.267, k=0.041, h=0.14, alpha=1.9, beta=-30.0,
                                    source="BLOSUM62 11/1", round_down=False)


@pytest.mark.parametrize("name", sorted(blast_stats.PROTEIN_TABLES))
def test_every_protein_row_is_reached_through_our_gap_convention(name):
    # Each tabulated BLAST gap cost, converted to our convention, finds its own row.
    for row in blast_stats.PROTEIN_TABLES[name]:
        params = blast_params(name, blast_open=row[0], blast_extend=row[1])
        assert params is not None, (name, row)
        assert (params.lambda_, params.k, params.h, params.alpha, params.beta) == row[2:]
        assert params.source == f"{name} {row[0]}/{row[1]}"


def test_protein_tables_are_sane():
    # Checks against transcription slips: every gapped lambda lies below the ungapped
    # lambda of its matrix (blast_stat.c's INT2_MAX rows; gaps only add high-scoring
    # alignments), and at a fixed gap extension lambda and K fall as the gap open gets
    # cheaper.
    ungapped_lambda = {"BLOSUM45": 0.2291, "BLOSUM50": 0.2318, "BLOSUM62": 0.3176,
                       "BLOSUM80": 0.3430, "BLOSUM90": 0.3346, "PAM30": 0.3400,
                       "PAM70": 0.3345, "PAM250": 0.2252}
    for name, rows in blast_stats.PROTEIN_TABLES.items():
        assert len({(row[0], row[1]) for row in rows}) == len(rows), name
        for open_, extend, lam, k, h, alpha, beta in rows:
            assert 0 < lam < ungapped_lambda[name] and 0 < k < 1 and h > 0 and alpha > 0
            assert beta < 0
        for extend in {row[1] for row in rows}:
            same = sorted((row for row in rows if row[1] == extend), key=lambda r: -r[0])
            for column in (2, 3):  # lambda, K
                values = [r[column] for r in same]
                assert values == sorted(values, reverse=True), (name, extend, column)


def test_untabulated_gap_costs_have_no_parameters():
    assert blast_params("BLOSUM62", blast_open=14, blast_extend=1) is None
    assert blast_params("BLOSUM62", blast_open=11, blast_extend=3) is None
    # Beyond the largest 1/-3 gap costs BLAST switches to query-dependent ungapped values.
    assert blast_params(match=1, mismatch=-3, blast_open=5, blast_extend=5) is None


def test_custom_matrices_have_no_parameters():
    # Even a custom matrix equal to BLOSUM62 is not claimed: only named schemes are.
    reference = substitution_matrices.load("BLOSUM62")
    frame = pd.DataFrame(np.array(reference, dtype=int), index=list(reference.alphabet),
                         columns=list(reference.alphabet))
    assert karlin_altschul(make_scoring(frame, gap_open=12, gap_extend=1)) is None
    assert karlin_altschul(make_scoring(("AC", np.array([[1, -3], [-3, 1]])),
                                        gap_open=4, gap_extend=2)) is None


@pytest.mark.parametrize("match, mismatch", [(1, -6), (3, -5), (6, -5), (1, 0), (0, -1)])
def test_match_mismatch_pairs_blast_lacks_have_no_parameters(match, mismatch):
    for blast_open in range(0, 8):
        for blast_extend in range(1, 8):
            assert blast_params(match=match, mismatch=mismatch, blast_open=blast_open,
                                blast_extend=blast_extend) is None


def test_blastn_default_2_3_row():
    # blastn's default task: reward 2, penalty -3, -gapopen 5 -gapextend 2.
    assert BLASTN_2_3_5_2 == KarlinAltschul(0.625, 0.41, 0.78, 0.8, -2.0,
                                            "blastn 2/-3 5/2", round_down=True)


def test_gcd_reduces_2_6_to_1_3_with_lambda_scaled():
    # 2/-6 is 1/-3 in units of 2: BLAST uses the 1/-3 table with gap costs x2 and lambda
    # (and alpha) / 2; K, H, beta are unit-free.
    base = blast_params(match=1, mismatch=-3, blast_open=2, blast_extend=2)
    doubled = blast_params(match=2, mismatch=-6, blast_open=4, blast_extend=4)
    assert base.source == "blastn 1/-3 2/2" and doubled.source == "blastn 1/-3 2/2, scores x2"
    assert doubled.lambda_ == pytest.approx(base.lambda_ / 2) == pytest.approx(0.685)
    assert doubled.alpha == pytest.approx(base.alpha / 2)
    assert (doubled.k, doubled.h, doubled.beta) == (base.k, base.h, base.beta)
    # Gap costs that are not twice a tabulated pair have no parameters for 2/-6.
    assert blast_params(match=2, mismatch=-6, blast_open=2, blast_extend=1) is None
    assert blast_params(match=1, mismatch=-3, blast_open=2, blast_extend=1) is not None


def test_gcd_scaling_leaves_evalues_and_bitscores_unchanged():
    # Doubling every score and gap cost doubles every alignment score; the statistics of
    # an alignment must not change.
    base = blast_params(match=1, mismatch=-3, blast_open=2, blast_extend=1)
    doubled = blast_params(match=2, mismatch=-6, blast_open=4, blast_extend=2)
    scores = np.arange(10, 60)
    e1, b1 = evalues_and_bitscores(scores, 500, *VIRUS_NT_20130719, base)
    e2, b2 = evalues_and_bitscores(2 * scores, 500, *VIRUS_NT_20130719, doubled)
    np.testing.assert_allclose(e2, e1, rtol=1e-12)
    np.testing.assert_allclose(b2, b1, rtol=1e-12)


def test_round_down_pairs_follow_the_reduced_pair():
    assert BLASTN_2_3_5_2.round_down
    assert blast_params(match=4, mismatch=-6, blast_open=10, blast_extend=4).round_down
    assert blast_params(match=3, mismatch=-4, blast_open=6, blast_extend=3).round_down
    assert not blast_params(match=1, mismatch=-2, blast_open=2, blast_extend=2).round_down
    assert not BLOSUM62_11_1.round_down


@pytest.mark.parametrize("name", ["EDNAFULL", "NUC.4.4", "ednafull"])
def test_ednafull_uses_the_5_4_table(name):
    params = blast_params(name, blast_open=10, blast_extend=6)
    assert params == KarlinAltschul(0.163, 0.068, 0.16, 1.0, -19.0, "blastn 5/-4 10/6")
    assert blast_params(name, blast_open=8, blast_extend=6).lambda_ == 0.146
    assert blast_params(name, blast_open=10, blast_extend=1) is None
    # make_scoring(match=5, mismatch=-4) scores ACGT alike and gets the same parameters
    assert blast_params(match=5, mismatch=-4, blast_open=10, blast_extend=6) == params


def test_linear_gap_cost_uses_the_non_affine_row():
    # BLAST's (0, 0) row is its greedy extension's linear gap cost of reward/2 - penalty
    # per position: 1 + 7 = 8 for 2/-7 (our gap_open = gap_extend = 8).
    params = karlin_altschul(make_scoring(match=2, mismatch=-7, gap_open=8, gap_extend=8))
    assert (params.lambda_, params.k, params.h) == (0.69, 0.73, 1.34)
    # For 2/-3 that cost is 4, where BLAST also tabulates (0, 4) with the same numbers.
    linear = karlin_altschul(make_scoring(match=2, mismatch=-3, gap_open=4, gap_extend=4))
    assert (linear.lambda_, linear.k, linear.h) == (0.55, 0.21, 0.46)
    assert linear.source == "blastn 2/-3 0/4"


# --- bit scores and e-values ------------------------------------------------------------

def test_bitscore_by_hand():
    # (lambda*S - ln K) / ln 2 for BLOSUM62 11/1 and S = 350; BLAST+ 2.2.26 printed
    # 139.428 for this score (xml_2226_blastp_003.xml).
    hand = (0.267 * 350 - math.log(0.041)) / math.log(2)
    _, bits = evalues_and_bitscores([350], [102], *MINIREFSEQ_PROT, BLOSUM62_11_1)
    assert bits[0] == pytest.approx(hand, rel=1e-14)
    assert round(bits[0], 3) == 139.428


def test_evalue_by_hand():
    # searchsp * K * exp(-lambda*S) with BLAST's search space for m=102 (361344).
    evalues, _ = evalues_and_bitscores([219], [102], *MINIREFSEQ_PROT, BLOSUM62_11_1)
    assert evalues[0] == pytest.approx(361344 * 0.041 * math.exp(-0.267 * 219), rel=1e-13)


def test_evalue_falls_by_exp_lambda_per_score_point():
    scores = np.arange(-5, 200)
    evalues, bits = evalues_and_bitscores(scores, 250, 10**9, 10**6, BLOSUM62_11_1)
    np.testing.assert_allclose(evalues[1:] / evalues[:-1], math.exp(-0.267), rtol=1e-12)
    np.testing.assert_allclose(np.diff(bits), 0.267 / math.log(2), rtol=1e-12)
    # and E = searchsp * 2**-bits, the bit score's meaning
    space = effective_search_space(BLOSUM62_11_1, 250, 10**9, 10**6)
    np.testing.assert_allclose(evalues, space * 2.0 ** -bits, rtol=1e-12)


def test_round_down_evalue_steps_every_two_points_bitscore_every_point():
    scores = np.arange(20, 61)
    evalues, bits = evalues_and_bitscores(scores, 300, *GPIPE_MOUSE, BLASTN_2_3_5_2)
    odd = scores % 2 == 1
    np.testing.assert_array_equal(evalues[odd], evalues[np.flatnonzero(odd) - 1])
    np.testing.assert_allclose(evalues[2::2] / evalues[:-2:2], math.exp(-2 * 0.625),
                               rtol=1e-12)
    assert np.all(np.diff(bits) > 0)


def test_blastn_2_9_0_report():
    # BLASTN 2.9.0+, query of 285 bases against 107382 sequences / 3164670549 bases,
    # reward 2 penalty -3 gaps 5/2: (score, bit score, e-value) as printed. Odd scores
    # share the e-value of the even score below (round_down), not the bit score.
    printed = [(44, 40.9604, 0.375311), (43, 40.0587, 1.30996), (42, 39.157, 1.30996),
               (41, 38.2554, 4.57222), (40, 37.3537, 4.57222)]
    scores = [row[0] for row in printed]
    evalues, bits = evalues_and_bitscores(scores, 285, *GPIPE_MOUSE, BLASTN_2_3_5_2)
    for (score, bit, evalue), got_e, got_b in zip(printed, evalues, bits):
        assert float(f"{got_b:.6g}") == bit, score
        assert float(f"{got_e:.6g}") == evalue, score


def test_blastn_2_2_27_report():
    # BLASTN 2.2.27+, query of 21 bases: score 32, bit score 30.1402, e-value 4.0824.
    evalues, bits = evalues_and_bitscores([32], [21], *VIRUS_NT_20130719, BLASTN_2_3_5_2)
    assert float(f"{bits[0]:.6g}") == 30.1402
    assert float(f"{evalues[0]:.5g}") == 4.0824


# --- length adjustment and search space -----------------------------------------------

@pytest.mark.parametrize("params, query_length, database, ell, space", [
    # blastp 2.2.26+, BLOSUM62 11/1 (Biopython test data)
    (BLOSUM62_11_1, 32, MINIREFSEQ_PROT, 7, 156650),
    (BLOSUM62_11_1, 102, MINIREFSEQ_PROT, 38, 361344),
    # blastn 2.2.27+, 2/-3 gaps 5/2
    (BLASTN_2_3_5_2, 63, VIRUS_NT_20130719, 28, 55893623800),
    (BLASTN_2_3_5_2, 21, VIRUS_NT_20130719, 18, 4830820710),
])
def test_length_adjustment_and_search_space_match_blast_reports(params, query_length,
                                                                database, ell, space):
    assert length_adjustment(params, query_length, *database) == ell
    assert effective_search_space(params, query_length, *database) == space


def _fixed_point_map(params, m, n, big_n, ell):
    return params.alpha / params.lambda_ * (math.log(params.k)
                                            + math.log((m - ell) * (n - big_n * ell))) \
        + params.beta


ALL_TABULATED = (
    [blast_params(name, blast_open=row[0], blast_extend=row[1])
     for name, rows in blast_stats.PROTEIN_TABLES.items() for row in rows]
    + [blast_params(match=reward * scale, mismatch=penalty * scale,
                    blast_open=row[0] * scale, blast_extend=row[1] * scale)
       for (reward, penalty), rows in blast_stats.BLASTN_TABLES.items() for row in rows
       if (row[0], row[1]) != (0, 0) for scale in (1, 3)])


def test_all_tabulated_rows_are_reachable():
    assert None not in ALL_TABULATED and len(ALL_TABULATED) > 150


@settings(max_examples=400, deadline=None)
@example(params=KarlinAltschul(1.3, 0.52, 0.93, 1.4, -2.0), m=2, big_n=1, mean_length=1,
         extra=1)
@given(params=st.sampled_from(ALL_TABULATED), m=st.integers(1, 40000),
       big_n=st.integers(1, 10**8), mean_length=st.integers(1, 5000), extra=st.integers(0, 999))
def test_length_adjustment_is_the_largest_integer_below_the_fixed_point(params, m, big_n,
                                                                        mean_length, extra):
    # What BLAST_ComputeLengthAdjustment promises, checked directly: ell is an integer
    # with ell <= f(ell) that keeps K (m - ell)(n - N ell) >= max(m, n); when its
    # iteration converged, ell + 1 breaks one of the two -- ell is the largest such integer.
    n = big_n * mean_length + extra
    ell, converged = blast_stats.solve_length_adjustment(params, m, n, big_n)
    assert ell == length_adjustment(params, m, n, big_n) >= 0
    # The search space is then (n - N ell)(m - ell), both factors positive, so BLAST's
    # floor of the effective database at 1 never acts on valid sizes.
    assert effective_search_space(params, m, n, big_n) == (n - big_n * ell) * (m - ell) > 0

    def admissible(x):
        return params.k * (m - x) * (n - big_n * x) >= max(m, n)

    if not admissible(0):
        assert ell == 0  # nothing to adjust: BLAST returns 0 at once
        return
    # ell is at or below the fixed point, except where even 0 is above it (tiny m and n:
    # the iteration never finds a point below it and BLAST keeps 0)
    assert admissible(ell)
    assert _fixed_point_map(params, m, n, big_n, ell) >= ell - 1e-9 or (ell == 0
                                                                       and not converged)
    if converged:
        nxt = ell + 1
        assert not admissible(nxt) or _fixed_point_map(params, m, n, big_n, nxt) < nxt + 1e-9


def test_length_adjustment_keeps_blasts_answer_when_its_iteration_does_not_converge():
    # BLOSUM45 18/1, m=666, n=238696, N=2337: the fixed point is just above 90, but
    # BLAST's 20 steps oscillate around it without closing to within 1 and it keeps its
    # best lower bound, 89. Reproducing BLAST means reproducing that too.
    params = blast_params("BLOSUM45", blast_open=18, blast_extend=1)
    assert _fixed_point_map(params, 666, 238696, 2337, 90) > 90
    assert blast_stats.solve_length_adjustment(params, 666, 238696, 2337) == (89, False)


def test_search_space_is_exact_beyond_float_precision():
    # Int8 arithmetic in BLAST: a product above 2**53 must not be rounded.
    params = BLASTN_2_3_5_2
    space = effective_search_space(params, 30001, 10**15 + 7, 3)
    ell = length_adjustment(params, 30001, 10**15 + 7, 3)
    assert space == (10**15 + 7 - 3 * ell) * (30001 - ell)
    assert space > 2**53


# --- vectorisation and validation ------------------------------------------------------

def test_rows_equal_one_at_a_time_and_lengths_computed_once(monkeypatch):
    rng = np.random.default_rng(7)
    scores = rng.integers(15, 400, size=500)
    lengths = rng.choice([33, 120, 121, 800, 2500], size=500)
    expected = [evalues_and_bitscores([s], [m], 10**8, 4 * 10**5, BLOSUM62_11_1)
                for s, m in zip(scores, lengths)]

    calls = []
    real = blast_stats.effective_search_space

    def counting(params, m, *args):
        calls.append(m)
        return real(params, m, *args)

    monkeypatch.setattr(blast_stats, "effective_search_space", counting)
    evalues, bits = evalues_and_bitscores(pd.Series(scores), pd.Series(lengths), 10**8,
                                          4 * 10**5, BLOSUM62_11_1)
    assert sorted(calls) == [33, 120, 121, 800, 2500]
    assert evalues.dtype == bits.dtype == np.float64 and evalues.shape == (500,)
    np.testing.assert_array_equal(evalues, [e[0] for e, _ in expected])
    np.testing.assert_array_equal(bits, [b[0] for _, b in expected])


def test_a_scalar_query_length_serves_every_row():
    evalues, bits = evalues_and_bitscores(np.array([40, 50, 60]), 300, 10**7, 10**4,
                                          BLOSUM62_11_1)
    again, _ = evalues_and_bitscores([40, 50, 60], [300, 300, 300], 10**7, 10**4,
                                     BLOSUM62_11_1)
    np.testing.assert_array_equal(evalues, again)
    assert bits.shape == (3,)


def test_missing_scores_give_nan():
    scores = pd.Series([50, None, 60], dtype="Int64")
    evalues, bits = evalues_and_bitscores(scores, 300, 10**7, 10**4, BLOSUM62_11_1)
    assert np.isnan(evalues[1]) and np.isnan(bits[1])
    assert np.isfinite(evalues[[0, 2]]).all() and np.isfinite(bits[[0, 2]]).all()


def test_no_rows():
    evalues, bits = evalues_and_bitscores([], [], 10**7, 10**4, BLOSUM62_11_1)
    assert evalues.shape == bits.shape == (0,)


@pytest.mark.parametrize("lengths, residues, sequences", [
    ([0], 1000, 10), ([-3], 1000, 10), ([10.5], 1000, 10), ([10], 0, 1), ([10], 1000, 0),
])
def test_bad_sizes_are_refused(lengths, residues, sequences):
    with pytest.raises(ValueError):
        evalues_and_bitscores([30], lengths, residues, sequences, BLOSUM62_11_1)
