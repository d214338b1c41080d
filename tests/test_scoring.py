"""Scoring: built-in matrices against Biopython, the DNA alphabet, custom matrices, parameter
validation (before any work) and the BLAST gap-cost converter."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from Bio.Align import substitution_matrices

import gpualign_df
from gpualign_df.scoring import DNA_ALPHABET, INVALID_CODE, MATRIX_FILES, blast_to_gap_costs, \
    make_scoring
from helpers import mutate, random_sequences, rescore

PROTEIN = "ARNDCQEGHILKMFPSTWYV"
BUILT_INS = ["BLOSUM45", "BLOSUM50", "BLOSUM62", "BLOSUM80", "BLOSUM90", "PAM30", "PAM70",
             "PAM250", "EDNAFULL", "NUC.4.4"]
#: Biopython ships EDNAFULL under its EMBOSS file name only.
BIOPYTHON_NAME = {"EDNAFULL": "NUC.4.4"}
IUPAC_AMBIGUITY = "NRYKMSWBDHV"


def test_built_in_list_is_complete():
    assert sorted(MATRIX_FILES) == sorted(BUILT_INS)


@pytest.mark.parametrize("name", BUILT_INS)
def test_built_in_matrix_equals_biopython(name):
    reference = substitution_matrices.load(BIOPYTHON_NAME.get(name, name))
    scoring = make_scoring(name)
    assert sorted(scoring.alphabet) == sorted(reference.alphabet)
    checked = 0
    for a, b in itertools.product(reference.alphabet, repeat=2):
        code_a, code_b = scoring.lut[ord(a)], scoring.lut[ord(b)]
        assert code_a != INVALID_CODE and code_b != INVALID_CODE
        assert int(scoring.matrix[code_a, code_b]) == int(reference[a][b]), (name, a, b)
        checked += 1
    assert checked == len(reference.alphabet) ** 2


@pytest.mark.parametrize("name", ["blosum62", "Pam30", "ednafull", "nuc.4.4"])
def test_matrix_names_are_case_insensitive(name):
    assert np.array_equal(make_scoring(name).matrix, make_scoring(name.upper()).matrix)


@pytest.mark.parametrize("name", BUILT_INS)
def test_lookup_table_is_case_insensitive(name):
    scoring = make_scoring(name)
    letters = [symbol for symbol in scoring.alphabet if symbol.isalpha()]
    assert letters
    for symbol in letters:
        assert scoring.lut[ord(symbol.lower())] == scoring.lut[ord(symbol.upper())] \
            == scoring.alphabet.index(symbol)
    # every byte outside the alphabet (either case) is invalid
    allowed = {ord(c) for s in scoring.alphabet for c in (s.lower(), s.upper())}
    if MATRIX_FILES[name] == "NUC.4.4":
        allowed |= {ord("U"), ord("u")}
    else:  # U, O, J (real UniProt letters the matrices lack) read as the wildcard X
        for letter in "UOJuoj":
            assert scoring.lut[ord(letter)] == scoring.alphabet.index("X"), (name, letter)
            allowed.add(ord(letter))
    for byte in range(256):
        if byte not in allowed:
            assert scoring.lut[byte] == INVALID_CODE, (name, chr(byte))


def test_ednafull_reads_u_as_t():
    scoring = make_scoring("EDNAFULL")
    assert scoring.lut[ord("U")] == scoring.lut[ord("u")] == scoring.lut[ord("T")]
    frame = gpualign_df.align(["ACGUacgu"], ["ACGTACGT"], mode="nw", matrix="EDNAFULL")
    assert frame.loc[0, "score"] == 8 * 5
    assert frame.loc[0, "cigar"] == "8="


def test_lower_case_protein_aligns_like_upper_case():
    rng = np.random.default_rng(3)
    queries = random_sequences(rng, 40, PROTEIN, 80, min_length=1)
    targets = [mutate(rng, q, PROTEIN, 0.1) or "A" for q in queries]
    upper = gpualign_df.align(queries, targets, matrix="BLOSUM62", gap_open=11, gap_extend=1)
    lower = gpualign_df.align([q.lower() for q in queries], [t.lower() for t in targets],
                              matrix="blosum62", gap_open=11, gap_extend=1)
    pd.testing.assert_frame_equal(upper, lower)


# --- match / mismatch alphabet -------------------------------------------------------------


def test_match_mismatch_alphabet_scores():
    match, mismatch = 3, -2
    scoring = make_scoring(match=match, mismatch=mismatch)
    symbols = "ACGTU" + IUPAC_AMBIGUITY
    canonical = {"U": "T"}
    for a, b in itertools.product(symbols + symbols.lower(), repeat=2):
        code_a, code_b = scoring.lut[ord(a)], scoring.lut[ord(b)]
        assert code_a != INVALID_CODE and code_b != INVALID_CODE, (a, b)
        base_a = canonical.get(a.upper(), a.upper())
        base_b = canonical.get(b.upper(), b.upper())
        expected = match if base_a == base_b and base_a in "ACGT" else mismatch
        assert int(scoring.matrix[code_a, code_b]) == expected, (a, b)
    assert set(DNA_ALPHABET) == set("ACGT" + IUPAC_AMBIGUITY)


@pytest.mark.parametrize("code", list(IUPAC_AMBIGUITY))
def test_ambiguity_code_mismatches_itself_in_an_alignment(code):
    frame = gpualign_df.align([code * 5, "A" + code + "A"], [code * 5, "ACA"], mode="nw",
                              match=2, mismatch=-3, gap_open=10, gap_extend=1)
    assert frame["score"].tolist() == [5 * -3, 2 + -3 + 2]
    assert frame["query_end"].tolist() == [5, 3]


@pytest.mark.parametrize("code", ["N", "R"])
def test_ambiguity_self_pair_is_not_reported_as_a_match(code):
    frame = gpualign_df.align([code * 5, "A" + code + "A"], [code * 5, "ACA"], mode="nw",
                              match=2, mismatch=-3, gap_open=10, gap_extend=1)
    assert frame["cigar"].tolist() == ["5X", "1=1X1="]
    assert frame["matches"].tolist() == [0, 2]
    assert frame["identity"].tolist() == [0.0, 2 / 3]


def test_u_is_read_as_t_with_match_mismatch():
    frame = gpualign_df.align(["ACGU", "uuuu"], ["ACGT", "TTTT"], mode="nw", match=2,
                              mismatch=-3)
    assert frame["score"].tolist() == [8, 8]
    assert frame["cigar"].tolist() == ["4=", "4="]


@pytest.mark.parametrize("letter", ["E", "X", "Z", "-", "*", "I"])
def test_letters_outside_dna_alphabet_are_rejected(letter):
    with pytest.raises(ValueError, match="position 2"):
        gpualign_df.align(["AC" + letter], ["ACG"], match=1, mismatch=-1)


# --- custom matrices -------------------------------------------------------------------------


def _protein_pairs(seed=11, count=60):
    rng = np.random.default_rng(seed)
    queries = random_sequences(rng, count, PROTEIN + "BZX", 120, min_length=1)
    targets = []
    for k, query in enumerate(queries):
        if k % 3 == 0:
            targets.append(random_sequences(rng, 1, PROTEIN, 120, min_length=1)[0])
        else:
            targets.append(mutate(rng, query, PROTEIN, 0.1) or "W")
    return queries, targets


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_custom_matrix_tuple_and_dataframe_equal_built_in(mode):
    alphabet, table = make_scoring("BLOSUM62").alphabet, make_scoring("BLOSUM62").matrix
    queries, targets = _protein_pairs()
    options = dict(mode=mode, gap_open=11, gap_extend=1)
    built_in = gpualign_df.align(queries, targets, matrix="BLOSUM62", **options)
    as_tuple = gpualign_df.align(queries, targets, matrix=(alphabet, table.astype(np.int64)),
                                 **options)
    as_frame = gpualign_df.align(queries, targets,
                                 matrix=pd.DataFrame(table, index=list(alphabet),
                                                     columns=list(alphabet)), **options)
    as_list = gpualign_df.align(queries, targets, matrix=(alphabet, table.tolist()), **options)
    assert built_in["score"].notna().all()
    pd.testing.assert_frame_equal(as_tuple, as_frame)
    pd.testing.assert_frame_equal(as_tuple, as_list)
    # Same alignments; only a wildcard against itself differs: "X" for the built-in matrix,
    # whose B, Z, X, * are wildcards, "=" for a custom one, whose letters are plain letters.
    same = ["query", "target", "score", "query_start", "query_end", "target_start",
            "target_end", "gap_opens", "gaps", "length"]
    pd.testing.assert_frame_equal(built_in[same], as_tuple[same])
    merged = dict(options, cigar_style="M")
    pd.testing.assert_series_equal(
        gpualign_df.align(queries, targets, matrix="BLOSUM62", **merged)["cigar"],
        gpualign_df.align(queries, targets, matrix=(alphabet, table), **merged)["cigar"])
    differs = built_in["cigar"] != as_tuple["cigar"]
    wildcard = set("BZX*")
    assert differs.any()
    for row in np.flatnonzero(differs.to_numpy()):
        assert set(queries[row]) & wildcard and set(targets[row]) & wildcard, row


def test_custom_alphabet_letters_are_plain_letters():
    """B is an IUPAC code and a protein wildcard, but in a custom alphabet it is a letter:
    identical letters are "=" (identity 1), whatever they mean elsewhere."""
    table = np.array([[1, -1], [-1, 1]])
    frame = gpualign_df.align(["AB", "BBA"], ["AB", "BBA"], matrix=("AB", table), gap_open=2,
                              gap_extend=1)
    assert frame["cigar"].tolist() == ["2=", "3="]
    assert frame["identity"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("matrix, message", [
    (("Aé", [[1, -1], [-1, 1]]), "'é' is not a printable ASCII character"),
    (("A\u4e00", [[1, -1], [-1, 1]]), "is not a printable ASCII character"),
    (("A ", [[1, -1], [-1, 1]]), "is not a printable ASCII character"),
    (("AB", [["1", "-1"], ["-1", "1"]]), "matrix entries must be integers, got str"),
    (("AB", [[1.5, -1], [-1, 1]]), "matrix entries must be integers"),
    ((["A", "BC"], [[1, -1], [-1, 1]]), "single characters"),
])
def test_bad_custom_matrices_are_refused_clearly(matrix, message):
    with pytest.raises(ValueError, match=message):
        make_scoring(matrix)


@pytest.mark.parametrize("options, message", [
    (dict(gap_open=1, gap_extend=5), r"gap_extend \(5\) must not exceed gap_open \(1\)"),
    (dict(gap_open=0, gap_extend=1), r"gap_extend \(1\) must not exceed gap_open \(0\)"),
    (dict(match=1, mismatch=4), "mismatch must be a score <= 0"),
    (dict(match=-2, mismatch=-1), r"match \(-2\) must score higher than mismatch \(-1\)"),
    (dict(match=3_000_000_000, mismatch=-1), r"match must lie within \+-32767"),
    (dict(match=1, mismatch=-1.5), "mismatch must be an integer"),
    (dict(gap_open=1 << 40), "gap_open must be below"),
])
def test_scoring_rules_are_refused(options, message):
    """Parameters whose scores would contradict the documented model are refused: with
    gap_extend > gap_open the recurrences would price a gap of 2 as two gaps of 1 (the
    documented cost of "2I" with open 1, extend 5 is 6, the recurrence charged 2)."""
    with pytest.raises(ValueError, match=message):
        gpualign_df.align(["ACGTTTACGT"], ["ACGTACGT"], mode="nw", **options)


def test_linear_and_free_gaps_still_allowed():
    frame = gpualign_df.align(["ACGTTTACGT"], ["ACGTACGT"], mode="nw", match=2, mismatch=-3,
                              gap_open=2, gap_extend=2)
    assert frame["score"].tolist() == [16 - 4]
    free = gpualign_df.align(["ACGTTTACGT"], ["ACGTACGT"], mode="nw", match=2, mismatch=-3,
                             gap_open=0, gap_extend=0)
    assert free["score"].tolist() == [16]


def test_uniprot_letters_score_as_the_wildcard():
    """Selenocysteine U, pyrrolysine O and J are scored as X by the protein matrices."""
    options = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1, mode="nw")
    real = gpualign_df.align(["MKUVOJW"], ["MKCVKLW"], **options)
    as_x = gpualign_df.align(["MKXVXXW"], ["MKCVKLW"], **options)
    assert real["score"].tolist() == as_x["score"].tolist()
    assert real["cigar"].tolist() == ["2=1X1=2X1="]


def test_custom_dna_matrix_equals_match_mismatch():
    rng = np.random.default_rng(5)
    queries = random_sequences(rng, 50, "ACGT", 100, min_length=1)
    targets = [mutate(rng, q, "ACGT", 0.1) or "A" for q in queries]
    table = np.where(np.eye(4, dtype=bool), 2, -3)
    frame_table = pd.DataFrame(table, index=list("ACGT"), columns=list("ACGT"))
    for mode in ("sw", "nw", "sg"):
        expected = gpualign_df.align(queries, targets, mode=mode, match=2, mismatch=-3,
                                     gap_open=5, gap_extend=2)
        got = gpualign_df.align(queries, targets, mode=mode, matrix=frame_table, gap_open=5,
                                gap_extend=2)
        pd.testing.assert_frame_equal(expected, got)


def test_custom_matrix_rows_are_query_columns_are_target():
    table = pd.DataFrame([[1, -5], [-1, 1]], index=["A", "C"], columns=["A", "C"])
    frame = gpualign_df.align(["A", "C"], ["C", "A"], mode="nw", matrix=table, gap_open=9,
                              gap_extend=9)
    assert frame["score"].tolist() == [-5, -1]


def test_custom_matrix_is_case_insensitive():
    table = ("ac", [[2, -1], [-1, 2]])
    frame = gpualign_df.align(["ACca"], ["acCA"], mode="nw", matrix=table, gap_open=3,
                              gap_extend=1)
    assert frame.loc[0, "score"] == 8


# --- validation before any work ----------------------------------------------------------------


BAD_OPTIONS = {
    "unknown matrix": dict(matrix="BLOSUM63"),
    "negative gap_open": dict(gap_open=-1),
    "negative gap_extend": dict(gap_extend=-2),
    "non-integer gap_extend": dict(gap_extend=1.5),
    "non-integer numpy gap_open": dict(gap_open=np.float64(2.5)),
    "bool gap_open": dict(gap_open=True),
    "bool gap_extend": dict(gap_extend=False),
    "string gap_open": dict(gap_open="10"),
    "non-square table": dict(matrix=("ACGT", np.ones((4, 3), dtype=int))),
    "table size != alphabet": dict(matrix=("ACG", np.ones((4, 4), dtype=int))),
    "frame index != columns": dict(matrix=pd.DataFrame(np.eye(4, dtype=int), index=list("ACGT"),
                                                       columns=list("ACTG"))),
    "non-square frame": dict(matrix=pd.DataFrame(np.ones((3, 4), dtype=int), index=list("ACG"),
                                                 columns=list("ACGT"))),
    "non-integer entries": dict(matrix=("AC", [[1.5, 0], [0, 1]])),
    "match without mismatch": dict(match=1),
    "mismatch without match": dict(mismatch=-1),
    "matrix and match": dict(matrix="EDNAFULL", match=1, mismatch=-1),
    "unknown mode": dict(mode="needleman"),
    "free_ends with sw": dict(mode="sw", free_ends=("target_start", "target_end")),
    "free_ends all with local": dict(mode="local", free_ends="all"),
    "free_ends with nw": dict(mode="nw", free_ends=("query_end",)),
    "unknown free end": dict(mode="sg", free_ends=("target_start", "target_begin")),
    "unknown free end string": dict(mode="sg", free_ends="query_begin"),
}


@pytest.mark.parametrize("options", BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
def test_bad_parameters_raise_value_error_before_work(no_work, options):
    with pytest.raises(ValueError):
        gpualign_df.align(["ACGT"], ["ACGT"], **options)


@pytest.mark.parametrize("options", BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
def test_bad_parameters_raise_through_the_accessor(no_work, options):
    with pytest.raises(ValueError):
        pd.Series(["ACGT", "ACGA"]).aln.pairwise(**options)


def test_error_messages_say_what_is_wrong():
    with pytest.raises(ValueError, match="BLOSUM63"):
        make_scoring("BLOSUM63")
    with pytest.raises(ValueError, match="gap_extend"):
        make_scoring(gap_extend=1.5)
    with pytest.raises(ValueError, match="gap_open"):
        make_scoring(gap_open=-3)
    with pytest.raises(ValueError, match="target_begin"):
        gpualign_df.parse_mode("sg", free_ends=("target_begin",))


def test_valid_edge_parameters_are_accepted():
    # zero costs and integral floats are valid costs; mode names are case-insensitive
    assert make_scoring(gap_open=0, gap_extend=0).gap_open == 0
    scoring = make_scoring(gap_open=7.0, gap_extend=np.int64(2))
    assert (scoring.gap_open, scoring.gap_extend) == (7, 2)
    assert type(scoring.gap_open) is int
    assert gpualign_df.parse_mode("SG", ("target_start", "target_end")).flags() == \
        (False, False, True, True)
    assert gpualign_df.parse_mode("sg").flags() == (True, True, True, True)
    assert gpualign_df.parse_mode("semiglobal", "query_end").flags() == (False, True, False, False)


# --- BLAST-style gap costs ------------------------------------------------------------------------


def test_blast_to_gap_costs_example():
    assert blast_to_gap_costs(11, 1) == (12, 1)


@pytest.mark.parametrize("blast_open,blast_extend", [(11, 1), (5, 2), (7, 3), (0, 4)])
def test_blast_gap_costs_agree_for_every_length(blast_open, blast_extend):
    gap_open, gap_extend = blast_to_gap_costs(blast_open, blast_extend)
    for k in range(1, 50):
        assert blast_open + k * blast_extend == gap_open + (k - 1) * gap_extend


@pytest.mark.parametrize("blast_open,blast_extend", [(11, 1), (5, 2), (7, 3)])
@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_converted_costs_charge_blast_price_in_alignment(blast_open, blast_extend, k):
    gap_open, gap_extend = blast_to_gap_costs(blast_open, blast_extend)
    left, right = "ACGTTGCAAC", "CATGGTACGA"
    query = left + right
    target = left + "T" * k + right
    # Any global alignment must delete k target residues; at best all 20 query residues match
    # and the deletion is one run, so the optimum is 20 - (BLAST price of a k-gap).
    frame = gpualign_df.align([query], [target], mode="nw", match=1, mismatch=-6,
                              gap_open=gap_open, gap_extend=gap_extend)
    row = frame.iloc[0]
    assert row["score"] == len(query) - (blast_open + k * blast_extend)
    assert (row["gaps"], row["gap_opens"], row["matches"]) == (k, 1, len(query))
    assert rescore(query, target, next(frame.itertuples()),
                   make_scoring(match=1, mismatch=-6, gap_open=gap_open,
                                gap_extend=gap_extend)) == row["score"]
