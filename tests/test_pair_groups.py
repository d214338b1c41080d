"""The grouped pair kernel (local score-only 1:1 pairs on packed 16-bit cells: a group of
lanes per two pairs, query rows in registers, the targets streamed) equals the CPU engine:
scores and end cells, ties to the row-major first cell, on every planned layout.

In CI the kernel runs under the CUDA simulator in its plain half-by-half form on tiny
inputs; the ``gpu`` tests run the DPX form on the device on real reads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df.gpu.policy import pair_group_class, pair_group_table
from gpualign_df.scoring import make_scoring
from helpers import mutate, random_sequences, read_fasta, shared_file

pytestmark = pytest.mark.usefixtures("batch_path")


@pytest.fixture
def kernels_run(monkeypatch):
    """The (lanes, rows, DPX, byte profile, traceback) of every grouped pair kernel the
    engine builds from here on."""
    from gpualign_df.kernels import pairs16

    shapes = []
    real = pairs16.pair_group_kernel

    def record(*args, **options):
        shapes.append(args + (options.get("profile", False), options.get("traceback", False)))
        return real(*args, **options)

    monkeypatch.setattr(pairs16, "pair_group_kernel", record)
    return shapes


def both_engines(queries, targets, **options):
    options = dict(dict(mode="sw", traceback=False), **options)
    cpu = gpualign_df.align(queries, targets, backend="cpu", **options)
    gpu = gpualign_df.align(queries, targets, backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, gpu)
    return cpu


def test_pair_groups_equal_cpu(settings, kernels_run):
    """Random reads with N and IUPAC codes (one class of the table with match/mismatch
    scoring), empty and one-residue sequences, queries shorter than the class (padding
    rows) and pairs whose targets differ in length (padding columns in one half)."""
    settings(pair_group_fill=True, pair_groups=((4, 3), (8, 4)))
    rng = np.random.default_rng(3)
    alphabet = "ACGTNRY"
    queries = random_sequences(rng, 9, alphabet, 12)
    targets = [mutate(rng, query, alphabet, 0.2) + "ACGT"[:k % 4] for k, query in
               enumerate(queries)]
    queries[:3] = ["", "A", "ACGTACGTACGT"]
    targets[:3] = ["ACG", "", "TTACGTACGAACGTTT"]
    both_engines(queries, targets, match=2, mismatch=-3, gap_open=3, gap_extend=1)
    assert [shape[:2] for shape in kernels_run] == [(4, 3)]


@pytest.mark.parametrize("shape, longest", [((2, 8), 16), ((4, 5), 20), ((2, 13), 26),
                                            ((2, 16), 13), ((8, 2), 16)])
def test_pair_groups_with_traceback_equal_cpu(settings, kernels_run, shape, longest):
    """Local alignments with CIGARs from the grouped kernel's traceback words (the walk's
    grouped layout): random related reads with N and IUPAC codes, empty and one-residue
    sequences, padding rows and columns, lanes of one and two words, a lane's last word
    partly filled (5 and 13 rows), (reads of 13) a lane of padding rows only, and groups
    of 8 lanes (each copying every eighth column of targets of up to ~20 for the walk);
    every column equal to the CPU engine's."""
    settings(pair_group_fill=True, pair_groups=((4, 3), shape))
    rng = np.random.default_rng(5)
    alphabet = "ACGTNRY"
    queries = random_sequences(rng, 12, alphabet, longest)
    targets = [mutate(rng, "ACGT"[k % 4] * (k % 3) + query, alphabet, 0.1)
               + "ACGT"[:k % 4] for k, query in enumerate(queries)]
    queries += ["", "A", "ACGTACGTACGTA"]
    targets += ["ACG", "", "TTACGTACGAACGTTT"]
    frame = both_engines(queries, targets, traceback=True, match=3, mismatch=-2,
                         gap_open=2, gap_extend=1)
    assert [built[:2] for built in kernels_run] == [shape]
    assert kernels_run[0][-1] is True
    assert (frame["gaps"] > 0).any() and (frame["mismatches"] > 0).any()


@pytest.mark.parametrize("mode, free_ends, traceback, profile", [
    ("sw", None, False, True), ("sw", None, True, True),
    # padding rows above the queries (target start free): the shared table only
    ("sg", ("target_start", "target_end"), True, False),
    # the other modes in the slow set (CI time; the GPU tests run them on real reads)
    pytest.param("nw", None, True, True, marks=pytest.mark.slow),
    pytest.param("sg", ("query_start", "query_end"), True, True, marks=pytest.mark.slow)])
def test_pair_groups_byte_profile_equal_cpu(settings, kernels_run, mode, free_ends,
                                            traceback, profile):
    """Queries of A, C, G and T only (targets with N and IUPAC codes, padding rows and
    columns, empty sequences): the grouped kernel picks its scores from the targets'
    byte columns where the mode allows (``pair_group_profile`` on), and the frames equal
    the CPU engine's, as they do on the shared table (the setting off; by default with
    traceback) and where one query holds an N (a code without a byte: the table)."""
    settings(pair_group_fill=True, pair_groups=((4, 5),), pair_group_profile=True)
    rng = np.random.default_rng(13)
    queries = random_sequences(rng, 10, "ACGT", 18)
    targets = [mutate(rng, "ACGT"[k % 4] * (k % 3) + query, "ACGTNRY", 0.15)
               + "ACGT"[:k % 4] for k, query in enumerate(queries)]
    queries += ["", "A", "ACGTACGTACGTA"]
    targets += ["ACG", "", "TTNACGTACGAACGTTT"]
    options = dict(mode=mode, traceback=traceback, match=3, mismatch=-2, gap_open=2,
                   gap_extend=1, **(dict(free_ends=free_ends) if free_ends else {}))
    frame = both_engines(queries, targets, **options)
    assert [built[-2:] for built in kernels_run] == [(profile, traceback)]
    assert (frame["score"] > 0).any()
    settings(pair_group_profile=False)
    both_engines(queries, targets, **options)
    assert kernels_run[-1][-2] is False
    settings(pair_group_profile=None)   # the default: fills without traceback
    both_engines(queries, targets, **options)
    assert kernels_run[-1][-2] is (profile and not traceback)
    if profile:
        settings(pair_group_profile=True)
        both_engines(queries[:-1] + ["ACGTNCGTACGTA"], targets, **options)
        assert kernels_run[-1][-2] is False


def test_pair_group_profile_picks_each_entry():
    """The byte profile's selectors pick, from two target codes' columns, both halves'
    ``score + gap_open`` for query codes 0-3 and 0 for the padding code (PTX ``prmt``
    as the PTX manual defines it, computed here byte by byte); None where an entry does
    not fit a byte."""
    from gpualign_df.gpu.policy import pair_group_profile

    def prmt(x, y, selector):
        source = int(x) & 0xFFFFFFFF | (int(y) & 0xFFFFFFFF) << 32
        out = 0
        for place in range(4):
            nibble = selector >> (4 * place) & 15
            value = source >> (8 * (nibble & 7)) & 0xFF
            if nibble & 8:
                value = 0xFF if value & 0x80 else 0
            out |= value << (8 * place)
        return out

    for scoring in (make_scoring(match=2, mismatch=-3, gap_open=5, gap_extend=1),
                    make_scoring(match=120, mismatch=-7, gap_open=7, gap_extend=1)):
        selectors, columns = pair_group_profile(scoring)
        codes = len(scoring.alphabet) + 1
        matrix = np.zeros((codes, codes), np.int64)
        matrix[:-1, :-1] = scoring.matrix + scoring.gap_open
        held = list(range(4)) + [codes - 1]
        for a in held:
            for b in held:
                for x in range(codes):
                    for y in range(codes):
                        word = prmt(columns[x], columns[y], int(selectors[a * codes + b]))
                        assert (word & 0xFFFF, word >> 16) == (matrix[a, x], matrix[b, y])
    assert pair_group_profile(make_scoring(match=121, mismatch=-4, gap_open=7,
                                           gap_extend=1)) is None


@pytest.mark.parametrize("mode", ["sw", "sg", "nw"])
def test_pair_groups_with_traceback_across_batches(settings, monkeypatch, mode):
    """Little free memory: the grouped kernel's pairs in several batches (warp pairs
    apart; each batch's layout table a contiguous copy, offsets relative to its first
    warp), their CIGARs gathered from each batch's buffers; every column equals the CPU
    engine's. Global takes the layout of four-step pieces (16-byte stores, which need
    every batch's traceback offsets whole pieces apart). A batch is at least a warp pair
    (64 pairs) whose groups all run over its longest target: reads of up to 12 on a
    class of 3 rows a lane keep the simulator's steps and rows few (a plan without whole
    pieces, or without batch-relative offsets, still fails)."""
    import gpualign_df.gpu.batches as batches

    settings(pair_group_fill=True, pair_groups=((4, 3),))
    planned = []
    original = batches.plan_batches
    monkeypatch.setattr(batches, "plan_batches",
                        lambda *args, **kwargs: planned.append(original(*args, **kwargs))
                        or planned[-1])
    monkeypatch.setattr(batches, "free_bytes", lambda: 60_000)
    rng = np.random.default_rng(11)
    queries = random_sequences(rng, 80, "ACGT", 12)   # (two batches at this memory)
    targets = [mutate(rng, query, "ACGT", 0.1) for query in queries]
    both_engines(queries, targets, mode=mode, traceback=True, match=2, mismatch=-3,
                 gap_open=5, gap_extend=2)
    assert len(planned[0]) >= 2 and all(batch.group_class == (4, 3) for batch in planned[0])
    # the grouped kernel keeps no rows above: none planned, none counted in the need
    assert all(batch.row_words == 0 for batch in planned[0])


@pytest.mark.parametrize("mode, free_ends", [
    ("nw", None), ("sg", None), ("sg", ("target_start", "target_end")),
    ("sg", ("query_start", "query_end")), ("sg", ()),
    # one end of a side free, and a mix of sides: in the slow set (CI time)
    pytest.param("sg", ("query_end",), marks=pytest.mark.slow),
    pytest.param("sg", ("target_end",), marks=pytest.mark.slow),
    pytest.param("sg", ("target_start",), marks=pytest.mark.slow),
    pytest.param("sg", ("target_start", "query_end"), marks=pytest.mark.slow)])
def test_pair_groups_global_and_semiglobal_equal_cpu(settings, kernels_run, mode, free_ends):
    """Global and semi-global alignments with CIGARs on the grouped kernel (biased
    values, the borders of each free-ends subset, end cells on the last row and column
    or the corner; queries aligned to the group's last row where the target's start is
    free): random related reads with N and IUPAC codes, empty sequences on either side,
    padding rows and columns, a lane's last word partly filled; every column equal to
    the CPU engine's."""
    settings(pair_group_fill=True, pair_groups=((4, 5),))
    rng = np.random.default_rng(7)
    alphabet = "ACGTNRY"
    queries = random_sequences(rng, 12, alphabet, 16)
    targets = [mutate(rng, "ACGT"[k % 4] * (k % 3) + query, alphabet, 0.1)
               + "ACGT"[:k % 4] for k, query in enumerate(queries)]
    queries += ["", "A", "ACGTACGTACGTA", "ACG"]
    targets += ["ACG", "", "TTACGTACGAACGTTT", ""]
    options = dict(free_ends=free_ends) if mode == "sg" else {}
    frame = both_engines(queries, targets, mode=mode, traceback=True, match=3,
                         mismatch=-2, gap_open=2, gap_extend=1, **options)
    assert [built[:2] for built in kernels_run] == [(4, 5)]
    assert (frame["gaps"] > 0).any()
    assert mode != "nw" or (frame["score"] < 0).any()   # values below the bias's zero


def test_pair_groups_keep_each_last_column_in_a_warp_of_many_target_lengths(settings):
    """Semi-global with the query's ends free: the end cell is the best of a target's last
    column, whose H a half keeps once its target ends while its group steps on. The steps
    before the warp's shortest target ends (in whole groups of unrolled steps) run
    without that, so the switch lies where the warp's lengths put it: targets of 2 to 18
    residues, each a mutated start of its query, which runs on past it, in warps of many
    lengths and one warp of unused slots; every column equals the CPU engine's (a switch
    one group of steps late fails)."""
    settings(pair_group_fill=True, pair_groups=((4, 5),))
    rng = np.random.default_rng(23)
    queries = random_sequences(rng, 70, "ACGT", 20, min_length=14)
    targets = [mutate(rng, query[:2 + k % 17], "ACGT", 0.1) for k, query in
               enumerate(queries)]
    frame = both_engines(queries, targets, mode="sg", traceback=True, match=2, mismatch=-3,
                         gap_open=3, gap_extend=1, free_ends=("query_start", "query_end"))
    # (most alignments end before their query does: in the target's last column)
    assert (frame["query_end"] < frame["query"].map(lambda row: len(queries[row]))).mean() \
        > 0.5


@pytest.mark.parametrize("shape, traceback", [((4, 3), False), ((2, 33), False),
                                              ((4, 3), True), ((2, 8), True)])
def test_pair_groups_keep_the_row_major_first_end_cell(settings, kernels_run, shape,
                                                       traceback):
    """Repeats with many end cells of the best score: the lowest row, then the lowest
    column, as every engine; lanes of 33 rows take keys of 6 bits below H; with
    traceback, the walk's tie-breaks too."""
    settings(pair_group_fill=True, pair_groups=(shape,))
    queries = ["ACACACACAC", "AAAAAAAA", "ACGTACGT", "GGGG", "CACACA"]
    targets = ["ACAC", "AAAA" * 3, "ACGTAACGT", "CCCCGGGGCCCC", "CA"]
    frame = both_engines(queries, targets, match=1, mismatch=-1, gap_open=1, gap_extend=1,
                         traceback=traceback)
    assert [built[:2] for built in kernels_run] == [shape]
    assert frame[["score", "query_end", "target_end"]].iloc[0].tolist() == [4, 4, 4]


def test_pair_group_kernel_only_where_exact():
    """The class holds the longest query; no class where a value could leave 16 bits, an H
    pass the running-best keys (1022 at up to 32 rows a lane, 510 at up to 64), the gap
    open is 0, or the table passes shared memory (protein matrices: 25 classes)."""
    dna = make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1)
    classes = ((8, 8), (8, 19), (8, 32))
    assert pair_group_class(dna, 150, 277, classes) == (8, 19)
    assert pair_group_class(dna, 64, 277, classes) == (8, 8)
    assert pair_group_class(dna, 257, 300, classes) is None          # past every class
    assert pair_group_class(dna, 200, 1022, classes) == (8, 32)
    high = make_scoring(match=5, mismatch=-4, gap_open=7, gap_extend=1)
    assert pair_group_class(high, 204, 300, classes) == (8, 32)       # H <= 1020
    assert pair_group_class(high, 205, 300, classes) is None          # H could be 1025
    assert pair_group_class(high, 100, 300, ((4, 40),)) == (4, 40)    # 500 <= 510
    assert pair_group_class(high, 103, 300, ((4, 40),)) is None       # 40 rows: 6 key bits
    assert pair_group_class(dna, 150, 300, ((4, 38),)) == (4, 38)     # 150 <= 510
    free = make_scoring(match=1, mismatch=-1, gap_open=0, gap_extend=0)
    assert pair_group_class(free, 10, 10, classes) is None
    # with traceback: every compared value within 4095, at most 20 rows a lane
    assert pair_group_class(dna, 150, 277, classes, traceback=True) == (8, 19)
    assert pair_group_class(dna, 200, 277, classes + ((16, 16),), traceback=True) == (16, 16)
    assert pair_group_class(dna, 200, 277, classes, traceback=True) is None
    assert pair_group_class(dna, 64, 277, classes, traceback=True) == (8, 8)
    assert pair_group_class(high, 152, 300, classes, traceback=True) == (8, 19)
    wide = make_scoring(match=16, mismatch=-4, gap_open=7, gap_extend=1)
    assert pair_group_class(wide, 63, 300, ((8, 8),)) == (8, 8)        # H <= 1008
    assert pair_group_class(wide, 63, 300, ((8, 8),), traceback=True) == (8, 8)
    # global and semi-global: their bias (a path of two gaps) counts too
    assert pair_group_class(dna, 150, 277, classes, traceback=True, bias=3937) == (8, 19)
    assert pair_group_class(dna, 150, 277, classes, traceback=True, bias=3940) is None
    steep = make_scoring(match=1, mismatch=-4, gap_open=4090, gap_extend=1)
    assert pair_group_class(steep, 63, 300, ((8, 8),)) == (8, 8)
    assert pair_group_class(steep, 63, 300, ((8, 8),), traceback=True) is None
    assert pair_group_table(dna) is not None
    # the padding rows above a top-aligned query score 0 against every residue
    table, query_pair, _ = pair_group_table(dna, query_padding=7)
    pad = len(dna.alphabet)
    assert (table[query_pair[pad * (pad + 1) + pad] * 8] & 0xFFFF) == 7
    assert pair_group_table(make_scoring("BLOSUM62", gap_open=11, gap_extend=1)) is None
    # a mismatch below -gap_open would make a shifted entry negative
    assert pair_group_table(make_scoring(match=1, mismatch=-9, gap_open=7,
                                         gap_extend=1)) is None


def test_pair_group_table_scores_each_pair():
    """Every entry of the table is both halves' ``score + gap_open`` for the codes'
    classes, the padding code scoring ``-gap_open`` (an entry 0)."""
    from gpualign_df.kernels.pairs16 import COPIES

    scoring = make_scoring(match=2, mismatch=-3, gap_open=5, gap_extend=1)
    table, query_pair, target_pair = pair_group_table(scoring)
    codes = len(scoring.alphabet) + 1
    matrix = np.zeros((codes, codes), np.int64)
    matrix[:-1, :-1] = scoring.matrix + scoring.gap_open
    rng = np.random.default_rng(0)
    for a, b, x, y in rng.integers(0, codes, (300, 4)):
        entry = target_pair[x * codes + y] + query_pair[a * codes + b] * COPIES
        for copy in range(COPIES):
            word = int(table[entry + copy])
            assert (word & 0xFFFF, word >> 16) == (matrix[a, x], matrix[b, y])
        assert (matrix[a, x] == 0) == (a == codes - 1 or x == codes - 1)


@pytest.mark.gpu
@pytest.mark.parametrize("profile", [True, False])
@pytest.mark.parametrize("mode, traceback", [("sw", False), ("sw", True), ("nw", True),
                                             ("sg", True)])
def test_pair_groups_on_real_reads_equal_cpu(settings, kernels_run, mode, traceback,
                                             profile):
    """The GASAL2 reads against their windows (W1's pairs, 150 x 152-277 bp) with W1's
    scoring, local score only and every mode with CIGARs: the default settings take the
    grouped kernel with DPX, its scores from the byte profile (reads of A, C, G and T;
    ``pair_group_profile`` on) but in semi-global mode (every end free: padding rows
    above the queries), or from the shared table (off); every column equals the CPU
    engine's."""
    settings(pair_group_profile=profile)
    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"), limit=6000)
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"), limit=6000)
    both_engines(queries, targets, match=1, mismatch=-4, gap_open=7, gap_extend=1,
                 traceback=traceback, mode=mode)
    assert kernels_run and all(shape[2] for shape in kernels_run)
    assert all(shape[-2:] == (profile and mode != "sg", traceback) for shape in kernels_run)


@pytest.mark.gpu
@pytest.mark.parametrize("scores", [dict(match=1, mismatch=-4, gap_open=7, gap_extend=1),
                                    dict(match=2, mismatch=-3, gap_open=5, gap_extend=2),
                                    dict(match=4, mismatch=-1, gap_open=1, gap_extend=1)])
def test_pair_groups_on_random_pairs_equal_cpu(kernels_run, scores):
    """Reads of 0-250 bases (up to the largest default class) against related and
    unrelated windows of up to 700, with N and IUPAC codes, on the default classes with
    DPX, score only and with CIGARs in every mode, and reads of 257-300 bases, which no
    class holds (the 32-bit fill takes them): frames equal the CPU engine's."""
    rng = np.random.default_rng(sum(scores.values()))
    alphabet = "ACGTACGTACGTNRY"
    queries = random_sequences(rng, 2500, alphabet, 250)   # H <= 4 * 250 < 1023
    targets = [mutate(rng, "".join(rng.choice(list("ACGT"), int(rng.integers(0, 200))))
                      + query, alphabet, 0.05) if k % 4 else
               random_sequences(rng, 1, alphabet, 700)[0] for k, query in enumerate(queries)]
    both_engines(queries, targets, **scores)
    assert kernels_run and all(shape[2] for shape in kernels_run)
    for mode, free_ends in (("sw", None), ("nw", None), ("sg", ("target_start",
                                                                "target_end"))):
        kernels_run.clear()
        options = dict(free_ends=free_ends) if free_ends else {}
        both_engines(queries, targets, traceback=True, mode=mode, **scores, **options)
        assert kernels_run and all(shape[-1] is True for shape in kernels_run)
    long_reads = random_sequences(rng, 300, alphabet, 300, min_length=257)
    kernels_run.clear()
    both_engines(long_reads, targets[:300], **scores)     # no class holds them
    assert kernels_run == []
