"""Inputs users pass by mistake get a clear error in their terms, and missing values look
the same in every column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df.encode import InvalidResidueError

DNA = dict(match=1, mismatch=-1, gap_open=2, gap_extend=1, backend="cpu")


def test_a_null_row_is_na_in_every_column_the_cigar_included():
    frame = gpualign_df.align(["ACGT", None], ["ACGT", "AC"], **DNA)
    assert frame.loc[1, "cigar"] is pd.NA
    assert frame["cigar"].dtype == pd.StringDtype("pyarrow")
    assert frame["cigar"].dtype.na_value is pd.NA
    assert frame.iloc[1, 2:].isna().all()
    assert frame.loc[0, "cigar"] == "4="


@pytest.mark.parametrize("how", ["rowwise", "search"])
def test_a_plain_string_is_refused_not_split_into_letters(how):
    with pytest.raises(TypeError, match=r"queries must be a collection of sequences .* not one "
                                        r"string: pass \['ACGT'\]"):
        gpualign_df.align("ACGT", ["ACGT"], how=how, **DNA)
    with pytest.raises(TypeError, match="targets must be a collection"):
        gpualign_df.align(["ACGT"], "ACGT", how=how, **DNA)


def test_an_all_nan_float_column_is_a_column_of_nulls():
    frame = gpualign_df.align(pd.Series([np.nan, np.nan]), ["ACGT", "AC"], **DNA)
    assert len(frame) == 2 and frame["score"].isna().all() and frame["cigar"].isna().all()
    with pytest.raises(ValueError, match=r"row 1: sequence must be a string, got float"):
        gpualign_df.align(pd.Series([np.nan, 1.5]), ["ACGT", "AC"], **DNA)


@pytest.mark.parametrize("option, message", [
    (dict(traceback="no"), r"traceback must be True or False, got 'no'"),
    (dict(traceback=0), r"traceback must be True or False, got 0"),
    (dict(progress="yes"), r"progress must be True, False or None"),
])
def test_flags_must_be_booleans(option, message):
    with pytest.raises(ValueError, match=message):
        gpualign_df.align(["ACGT"], ["ACGT"], **DNA, **option)


def test_protein_with_the_default_matrix_says_to_pass_a_protein_matrix():
    with pytest.raises(InvalidResidueError) as info:
        gpualign_df.align(pd.Series(["MKVLAT"], index=["P1"]), ["MKVL"])
    error = info.value
    # M, K and V are IUPAC nucleotide codes too: L is the first refused letter
    assert (error.label, error.row, error.position, error.character) == ("P1", 0, 3, "L")
    assert error.looks_like_protein
    with pytest.raises(InvalidResidueError) as info:
        gpualign_df.align(["ACGTBDH1"], ["ACGT"])
    assert not info.value.looks_like_protein and info.value.character == "1"
    with pytest.raises(InvalidResidueError, match="look like protein; pass a protein matrix "
                                                  "such as matrix='BLOSUM62'") as info:
        gpualign_df.align(pd.Series(["ACGTLEQ"], index=["P2"]), ["MKVL"], match=1, mismatch=-1)
    assert info.value.looks_like_protein and info.value.position == 4
