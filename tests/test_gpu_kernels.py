"""The CUDA kernels equal the CPU engine exactly (score, coordinates, CIGAR, statistics).

In CI these run under the CUDA simulator (conftest sets NUMBA_ENABLE_CUDASIM=1), so inputs
stay tiny; on a GPU machine run them with GPUALIGN_REAL_GPU=1 to use the device.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df
import gpualign_df.gpu
from helpers import mutate, random_sequences

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


def test_search_and_pairwise_on_the_gpu_equal_cpu():
    sequences = pd.Series(["ACGTTGCA", "ACGTAGCA", "TTGCA", "", "GGACGTT"], index=list("abcde"))
    cpu = sequences.aln.pairwise(mode="sw", match=2, mismatch=-3, backend="cpu")
    gpu = sequences.aln.pairwise(mode="sw", match=2, mismatch=-3, backend="cuda")
    pd.testing.assert_frame_equal(cpu, gpu)
    cpu = sequences.aln.search(sequences, top_k=2, mode="nw", match=2, mismatch=-3, backend="cpu")
    gpu = sequences.aln.search(sequences, top_k=2, mode="nw", match=2, mismatch=-3, backend="cuda")
    pd.testing.assert_frame_equal(cpu, gpu)


@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("nw", None), ("sg", None),
                                            ("sg", ("target_start", "target_end")),
                                            ("sg", ("query_end",))])
def test_long_pair_kernel_equals_cpu(monkeypatch, mode, free_ends):
    """Every non-empty pair through the intra-task (one block per pair) kernel; under the
    simulator with 4 threads per block, so that pairs need several passes of strips."""
    from gpualign_df import plan
    from gpualign_df.kernels import intra

    monkeypatch.setattr(plan, "INTER_MAX_CELLS", 0)
    if gpualign_df.gpu.simulator():
        monkeypatch.setattr(intra, "THREADS", 4)
    queries, targets = small_pairs(9, "ACGT", count=8, max_length=45)
    both_engines(queries, targets, mode=mode, free_ends=free_ends, match=2, mismatch=-3,
                 gap_open=5, gap_extend=2)
