"""The GATK reference of issue #23 (``gatk_oracle``), checked against the expectations of
GATK's own unit tests for its Java aligner (``SmithWatermanAlignerAbstractUnitTest`` in
broadinstitute/gatk): the CIGAR and alignment offset of every case, for every overhang
strategy those tests name. An engine's GATK mode is then checked against this reference
on pairs of any shape."""

from __future__ import annotations

import re

import pytest

from gatk_oracle import IGNORE, INDEL, LEADING_INDEL, PRESETS, SOFTCLIP, gatk_align

ORIGINAL = PRESETS["gatk-original"]
LONG_REFERENCE = (
    "ATAGAAAATAGTTTTTGGAAATATGGGTGAAGAGACATCTCCTCTTATGGAAAAAGGGATTCTAGAATTTAACAATAAATATTCC"
    "CAACTTTCCCCAAGGCTTTAAAATCTACCTTGAAGGAGCAGCTGATGTATTTCTAGAACAGACTTAGGTGTCTTGGTGTGGCCTG"
    "TAAAGAGATACTGTCTTTCTCTTTTGAGTGTAAGAGAGAAAGGACAGTCTACTCAATAAAGAGTGCTGGGAAAACTGAATATCCA"
    "CACACAGAATAATAAAACTAGATCCTATCTCTCACCATATACAAAGATCAACTCAAAACAAATTAAAGACCTAAATGTAAGACAA"
    "GAAATTATAAAACTACTAGAAAAAAACACAAGGGAAATGCTTCAGGACATTGGC")


@pytest.mark.parametrize("reference,alternate,scoring,overhang,cigar,offset", [
    # a read aligned inside the reference
    ("AAAGGACTGACTG", "ACTGACTGACTG", ORIGINAL, SOFTCLIP, "12M", 1),
    # the same pair under two weightings: indels, or none
    ("AAAGACTACTG", "AACGGACACTG", (50, -100, -220, -12), SOFTCLIP, "2M2I3M1D4M", 1),
    ("AAAGACTACTG", "AACGGACACTG", (200, -50, -300, -22), SOFTCLIP, "11M", 0),
    # the read's end overhangs the reference: soft-clipped
    ("AAACCCCC", "CCCCCGGG", ORIGINAL, SOFTCLIP, "5M3S", 3),
    ("TGTGTGTGTGTGTGACAGAGAGAGAGAGAGAGAGAGAGAGAGAGA",
     "ACAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGA", PRESETS["gatk-standard-ngs"],
     SOFTCLIP, "31M20S", 14),
    # an exact substring: <len>M where the strategy allows the shortcut, else the matrix
    ("AAACCCCC", "CCCCC", ORIGINAL, SOFTCLIP, "5M", 3),
    ("AAACCCCC", "CCCCC", ORIGINAL, INDEL, "3D5M", 0),
    ("AAACCCCC", "CCCCC", ORIGINAL, LEADING_INDEL, "3D5M", 0),
    ("AAACCCCC", "CCCCC", ORIGINAL, IGNORE, "5M", 3),
    (LONG_REFERENCE, "AAAAAAA", ORIGINAL, SOFTCLIP, "7M", 359),
    (LONG_REFERENCE, "AAAAAAA", ORIGINAL, INDEL, "1M358D6M29D", 0),
    (LONG_REFERENCE, "AAAAAAA", ORIGINAL, LEADING_INDEL, "1M1D6M", 0),
    (LONG_REFERENCE, "AAAAAAA", ORIGINAL, IGNORE, "7M", 359),
])
def test_gatk_unit_test_cases(reference, alternate, scoring, overhang, cigar, offset):
    assert gatk_align(reference, alternate, *scoring, overhang) == (cigar, offset)


def test_indels_placed_alike_whatever_the_flanks():
    """GATK's flank test: the same haplotype against its reference with long or short
    flanks (and 10 N of padding each side) places its indels identically (the matches
    around them may differ in length)."""
    padded_reference = (
        "GCGTCGCAGTCTTAAGGCCCCGCCTTTTCAGACAGCTTCCGCTGGGCCTGGGCCGCTGCGGGGCGGTCACGGCCCCTTTAAG"
        "CCTGAGCCCCGCCCCCTGGCTCCCCGCCCCCTCTTCTCCCCTCCCCCAAGCCAGCACCTGGTGCCCCGGCGGGTCGTGCGGC"
        "GCGGCGCTCCGCGGTGAGCGCCTGACCCCGAGGGGGCCCGGGGCCGCGTCCCTGGGCCCTCCCCACCCTTGCGGTGGCCTCG"
        "CGGGTCCCAGGGGCGGGGCTGGAGCGGCAGCAGGGCCGGGGAGATGGGCGGTGGGGAGCGCGGGAGGGACCGGGCCGAGCCG"
        "GGGGAAGGGCTCCGGTGACT")
    cut = padded_reference.index("CTTTAAG")
    end = padded_reference.index("GGGAGGGA") + len("GGGAGGGA")
    short_reference = padded_reference[cut:end]
    # the haplotype: 17 reference bases out around GGGCC (GATK's test draws them as 2 + 15
    # with long flanks and as 9 + 8 with short ones: the same sequence)
    padded_haplotype = padded_reference.replace(
        "CCTGACCCCGAGGGGGCCCGGGGCCGCGTCCCTGGGCCCTCC", "CCTGACCCCGAGGGCCGGGCCCTCC")
    short_haplotype = short_reference.replace(
        "CCTGACCCCGAGGGGGCCCGGGGCCGCGTCCCTGGGCCCTCC", "CCTGACCCCGAGGGCCGGGCCCTCC")
    assert padded_haplotype != padded_reference and short_haplotype != short_reference
    pad = "N" * 10
    cigars = [gatk_align(pad + reference + pad, pad + alternate + pad,
                         *PRESETS["gatk-haplotype-to-reference"], SOFTCLIP)[0]
              for reference, alternate in ((padded_reference, padded_haplotype),
                                           (short_reference, short_haplotype))]
    shapes = [[(int(length), op) for length, op in re.findall(r"(\d+)([MIDS])", cigar)]
              for cigar in cigars]
    assert len(shapes[0]) == len(shapes[1]) > 1
    for (length_a, op_a), (length_b, op_b) in zip(*shapes):
        assert op_a == op_b and (op_a == "M" or length_a == length_b)
