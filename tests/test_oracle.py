"""Scores equal parasail's; every CIGAR re-scores to the score over its coordinates."""

from __future__ import annotations

import numpy as np
import pytest

import gpualign_df
from gpualign_df.scoring import make_scoring
from helpers import mutate, parasail_scores, random_sequences, read_fasta, rescore, shared_file

DNA = "ACGT"
PROTEIN = "ARNDCQEGHILKMFPSTWYV"
GAPS = [(7, 1), (3, 3), (11, 2), (1, 1)]
SEMIGLOBAL_ENDS = [None, ("target_start", "target_end"), ("query_start", "query_end"),
                   ("query_start",), ("target_end",), ("query_start", "target_end")]


def related_pairs(seed: int, count: int, alphabet: str, max_length: int):
    rng = np.random.default_rng(seed)
    queries = random_sequences(rng, count, alphabet, max_length, min_length=1)
    targets = []
    for k, query in enumerate(queries):
        if k % 3 == 0:  # unrelated
            targets.append(random_sequences(rng, 1, alphabet, max_length, min_length=1)[0])
        else:
            target = mutate(rng, query, alphabet, 0.08) or alphabet[0]
            flank = random_sequences(rng, 2, alphabet, 20)
            targets.append(flank[0] + target + flank[1] if k % 2 else target)
    return queries, targets


def check_against_parasail(queries, targets, mode, scoring_options, free_ends=None):
    frame = gpualign_df.align(queries, targets, mode=mode, free_ends=free_ends, **scoring_options)
    scoring = make_scoring(scoring_options.get("matrix"), **{k: v for k, v in scoring_options.items()
                                                             if k != "matrix"})
    expected = parasail_scores(queries, targets, scoring, mode, free_ends)
    np.testing.assert_array_equal(frame["score"].to_numpy(dtype=np.int64), expected)
    for row, query, target in zip(frame.itertuples(), queries, targets):
        assert rescore(query, target, row, scoring) == row.score
        if mode == "nw":
            assert (row.query_start, row.query_end) == (0, len(query))
            assert (row.target_start, row.target_end) == (0, len(target))
    return frame


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
@pytest.mark.parametrize("gap_open,gap_extend", GAPS)
def test_dna_random_pairs_equal_parasail(mode, gap_open, gap_extend):
    queries, targets = related_pairs(gap_open * 100 + gap_extend, 300, DNA, 200)
    check_against_parasail(queries, targets, mode, dict(match=2, mismatch=-3, gap_open=gap_open,
                                                        gap_extend=gap_extend))


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
@pytest.mark.parametrize("matrix,gap_open,gap_extend", [("BLOSUM62", 11, 1), ("PAM30", 9, 1),
                                                        ("BLOSUM45", 15, 2), ("BLOSUM80", 5, 5)])
def test_protein_random_pairs_equal_parasail(mode, matrix, gap_open, gap_extend):
    queries, targets = related_pairs(len(matrix) + gap_open, 150, PROTEIN, 300)
    check_against_parasail(queries, targets, mode, dict(matrix=matrix, gap_open=gap_open,
                                                        gap_extend=gap_extend))


@pytest.mark.parametrize("free_ends", SEMIGLOBAL_ENDS)
def test_semiglobal_free_ends_equal_parasail(free_ends):
    queries, targets = related_pairs(17, 300, DNA, 150)
    check_against_parasail(queries, targets, "sg", dict(match=1, mismatch=-4, gap_open=7,
                                                        gap_extend=1), free_ends=free_ends)


def test_long_pairs_equal_parasail():
    queries, targets = related_pairs(5, 6, DNA, 1000)
    for mode in ("sw", "nw", "sg"):
        check_against_parasail(queries, targets, mode, dict(matrix="EDNAFULL", gap_open=10,
                                                            gap_extend=1))


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_gasal2_pairs_equal_parasail(mode):
    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"))
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"))
    assert len(queries) == len(targets) == 20_000
    options = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1)
    frame = gpualign_df.align(queries, targets, mode=mode, **options)
    scoring = make_scoring(**options)
    expected = parasail_scores(queries, targets, scoring, mode)
    np.testing.assert_array_equal(frame["score"].to_numpy(dtype=np.int64), expected)
    for row in frame.iloc[::97].itertuples():
        assert rescore(queries[row.query], targets[row.target], row, scoring) == row.score


def test_empty_and_single_residue_sequences():
    options = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    queries = ["", "", "A", "ACGT", "A", "C", ""]
    targets = ["", "ACG", "", "", "A", "G", "A"]
    for mode, expected in {"sw": [0, 0, 0, 0, 2, 0, 0],
                           "nw": [0, -9, -5, -11, 2, -3, -5],
                           "sg": [0, 0, 0, 0, 2, -3, 0]}.items():
        frame = gpualign_df.align(queries, targets, mode=mode, **options)
        assert frame["score"].tolist() == expected, mode
        scoring = make_scoring(**options)
        for row, query, target in zip(frame.itertuples(), queries, targets):
            assert rescore(query, target, row, scoring) == row.score
    glocal = gpualign_df.align(["", "ACG"], ["ACG", ""], mode="sg",
                               free_ends=("target_start", "target_end"), **options)
    assert glocal["score"].tolist() == [0, -9]
    assert glocal["cigar"].tolist() == ["", "3I"]


def test_biopython_agrees_on_a_sample():
    from Bio import Align
    from Bio.Align import substitution_matrices

    queries, targets = related_pairs(99, 60, PROTEIN, 120)
    aligner = Align.PairwiseAligner()
    aligner.substitution_matrix = substitution_matrices.load("BLOSUM62")
    aligner.open_gap_score = -11
    aligner.extend_gap_score = -1
    for mode, bio_mode in (("sw", "local"), ("nw", "global")):
        aligner.mode = bio_mode
        frame = gpualign_df.align(queries, targets, mode=mode, matrix="BLOSUM62", gap_open=11,
                                  gap_extend=1, traceback=False)
        expected = [int(aligner.score(q, t)) for q, t in zip(queries, targets)]
        assert frame["score"].tolist() == expected
