"""GATK's aligner as an option (``overhang=``, issue #23): CIGAR and offset equal to the
independent reference ``gatk_oracle`` (itself checked against GATK's unit tests) for every
strategy and preset, on planted and random pairs, on GATK's unit-test cases and on windows
of the real hg38/CHM13 pair; the frame's other columns agree with the CIGAR; every entry
point takes the option; what it cannot take is refused in the caller's terms."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gatk_oracle import PRESETS, gatk_align
from helpers import mutate, random_sequences, read_fasta, shared_file
from test_gatk_oracle import LONG_REFERENCE

STRATEGIES = ("softclip", "indel", "leading_indel", "ignore")


def corpus(rng, count: int, length: int = 60) -> tuple[list[str], list[str]]:
    """(haplotypes, references): windows of random references with substitutions and
    indels, ends that overhang either side, exact substrings, repeats."""
    references = random_sequences(rng, count, "ACGT", length, 5)
    haplotypes = []
    for k, reference in enumerate(references):
        start = int(rng.integers(0, len(reference)))
        piece = reference[start:start + int(rng.integers(3, length))]
        if k % 3:
            piece = mutate(rng, piece, "ACGT", 0.08)
        if k % 4 == 0:
            piece = "GGTA" + piece
        if k % 5 == 0:
            piece += "TTCA"
        if k % 7 == 0:
            piece = reference[:3] * 4
        haplotypes.append(piece or "A")
    return haplotypes, references


def oracle_columns(haplotypes, references, preset, overhang):
    return [gatk_align(reference, haplotype, *PRESETS[preset], overhang)
            for haplotype, reference in zip(haplotypes, references)]


def expand(cigar: str) -> list[tuple[int, str]]:
    return [(int(length), op) for length, op in re.findall(r"(\d+)([=XMIDS])", cigar)]


@pytest.mark.parametrize("overhang", STRATEGIES)
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_cigar_and_offset_equal_gatks(overhang, preset):
    haplotypes, references = corpus(np.random.default_rng(len(overhang) + len(preset)), 60)
    frame = gpualign_df.align(pd.Series(haplotypes), pd.Series(references), preset=preset,
                              overhang=overhang, cigar_style="M", backend="cpu")
    assert list(zip(frame["cigar"], frame["offset"])) == oracle_columns(
        haplotypes, references, preset, overhang)


@pytest.mark.parametrize("overhang", STRATEGIES)
def test_gatk_unit_test_cases_through_the_engine(overhang):
    """GATK's own unit-test pairs (those of tests/test_gatk_oracle.py) under every strategy."""
    references = ["AAAGGACTGACTG", "AAAGACTACTG", "AAACCCCC", "AAACCCCC", LONG_REFERENCE,
                  "TGTGTGTGTGTGTGACAGAGAGAGAGAGAGAGAGAGAGAGAGAGA"]
    haplotypes = ["ACTGACTGACTG", "AACGGACACTG", "CCCCCGGG", "CCCCC", "AAAAAAA",
                  "ACAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGAGA"]
    for preset in PRESETS:
        frame = gpualign_df.align(haplotypes, references, preset=preset, overhang=overhang,
                                  cigar_style="M", backend="cpu")
        assert list(zip(frame["cigar"], frame["offset"])) == oracle_columns(
            haplotypes, references, preset, overhang)


def test_windows_of_the_hg38_pair_equal_gatks():
    """Haplotypes from CHM13 against hg38 reference windows along the real 51 kbp pair
    (SNVs, indels, ends past the window), under GATK's haplotype-to-reference and
    read-to-haplotype presets."""
    hg38, chm13 = read_fasta(shared_file("hg38_chm13_51kbp_pair.fasta.gz"))
    starts = np.linspace(0, min(len(hg38), len(chm13)) - 800, 16).astype(int)
    references = [hg38[start:start + 400] for start in starts]
    haplotypes = [chm13[start + shift:start + shift + 300]
                  for start, shift in zip(starts, np.resize([-30, 0, 50, 120], len(starts)))]
    haplotypes = [h for h in haplotypes if h]
    references = references[:len(haplotypes)]
    for preset in ("gatk-haplotype-to-reference", "gatk-read-to-haplotype"):
        for overhang in STRATEGIES:
            frame = gpualign_df.align(haplotypes, references, preset=preset,
                                      overhang=overhang, cigar_style="M", backend="cpu")
            assert list(zip(frame["cigar"], frame["offset"])) == oracle_columns(
                haplotypes, references, preset, overhang)


@pytest.mark.parametrize("overhang", ["softclip", "indel", "leading_indel"])
def test_columns_agree_with_the_cigar(overhang):
    """=/X runs join into GATK's M elements; the coordinates span what the CIGAR covers;
    the statistics count its operations (= against the sequences); the score-only frame
    holds the same score and ends."""
    rng = np.random.default_rng(3)
    haplotypes, references = corpus(rng, 80)
    haplotypes[1] = "ACGNTT" + haplotypes[1]  # N: an X whatever it faces
    options = dict(preset="gatk-read-to-haplotype", overhang=overhang, backend="cpu")
    frame = gpualign_df.align(haplotypes, references, **options)
    merged = gpualign_df.align(haplotypes, references, cigar_style="M", **options)
    score_only = gpualign_df.align(haplotypes, references, traceback=False, **options)
    for name in ("score", "query_end", "target_end", "offset"):
        assert score_only[name].tolist() == frame[name].tolist()
    for k, row in frame.iterrows():
        ops = expand(row["cigar"])
        as_m = re.sub(r"(\d+)[=X]", r"\1M", row["cigar"])
        joined = "".join(f"{length}{op}" for length, op in _merge(expand(as_m)))
        assert joined == merged["cigar"][k]
        query = sum(length for length, op in ops if op in "=XI")
        target = sum(length for length, op in ops if op in "=XD")
        clipped = sum(length for length, op in ops if op == "S")
        assert row["query_end"] - row["query_start"] == query
        assert row["target_end"] - row["target_start"] == target
        assert query + clipped == len(haplotypes[k])
        q, t = row["query_start"], row["target_start"]
        for length, op in ops:
            if op in "=X":
                for step in range(length):
                    same = haplotypes[k][q + step] == references[k][t + step] != "N"
                    assert same == (op == "=")
            q += length if op in "=XI" else 0
            t += length if op in "=XD" else 0
        assert row["matches"] == sum(length for length, op in ops if op == "=")
        assert row["mismatches"] == sum(length for length, op in ops if op == "X")
        assert row["gaps"] == sum(length for length, op in ops if op in "ID")
        assert row["gap_opens"] == sum(1 for _, op in ops if op in "ID")


def _merge(ops):
    merged: list[list] = []
    for length, op in ops:
        if merged and merged[-1][1] == op:
            merged[-1][0] += length
        else:
            merged.append([length, op])
    return merged


def test_every_entry_point_takes_overhang(tmp_path):
    """align_batches, the accessor (rowwise and pairwise), a cuDF-less backend="auto", and
    the command line give align's frame; pairwise pairs are GATK's too."""
    from gpualign_df.cli import main

    haplotypes, references = corpus(np.random.default_rng(9), 12)
    options = dict(preset="gatk-haplotype-to-reference", overhang="softclip")
    expected = gpualign_df.align(pd.Series(haplotypes), pd.Series(references), **options)
    pd.testing.assert_frame_equal(pd.concat(gpualign_df.align_batches(
        pd.Series(haplotypes), pd.Series(references), **options)), expected)
    pd.testing.assert_frame_equal(
        pd.Series(haplotypes).aln.rowwise(pd.Series(references), **options), expected)
    pairs = pd.Series(haplotypes[:5]).aln.pairwise(cigar_style="M", **options)
    for _, row in pairs.iterrows():
        assert (row["cigar"], row["offset"]) == gatk_align(
            haplotypes[row["target"]], haplotypes[row["query"]],
            *PRESETS["gatk-haplotype-to-reference"], "softclip")
    fasta = {}
    for name, sequences in (("alt", haplotypes), ("ref", references)):
        fasta[name] = tmp_path / f"{name}.fasta"
        fasta[name].write_text("".join(f">{k}\n{s}\n" for k, s in enumerate(sequences)))
    out = tmp_path / "out.tsv"
    assert main(["align", str(fasta["alt"]), str(fasta["ref"]), "--preset",
                 "gatk-haplotype-to-reference", "--overhang", "softclip", "--out",
                 str(out)]) == 0
    written = pd.read_csv(out, sep="\t")
    assert written["cigar"].tolist() == expected["cigar"].tolist()
    assert written["offset"].tolist() == expected["offset"].tolist()


def test_gatk_jobs_run_on_the_cpu_engine():
    from gpualign_df.engine import choose_engine

    assert choose_engine("cpu", gatk=True) == "cpu"
    assert choose_engine("auto", gatk=True) == "cpu"


@pytest.mark.parametrize("options,says", [
    (dict(overhang="soft"), "unknown overhang 'soft'"),
    (dict(overhang="indel", mode="sw"), "leave mode and free_ends out"),
    (dict(overhang="indel", free_ends=("query_end",)), "leave mode and free_ends out"),
    (dict(overhang="indel", how="search"), "use how='rowwise' or how='pairwise'"),
    (dict(overhang="indel", matrix="EDNAFULL"), "not a matrix"),
    (dict(overhang="indel", clip="soft"), "leave clip out"),
    (dict(overhang="ignore"), "pass cigar_style='M'"),
])
def test_what_gatks_aligner_cannot_take_is_refused(options, says):
    scoring = {} if "matrix" in options else dict(match=2, mismatch=-3)
    with pytest.raises(ValueError, match=re.escape(says)):
        gpualign_df.align(["ACGT"], ["ACGT"], backend="cpu", **scoring, **options)


def test_empty_sequences_are_refused_with_the_row():
    with pytest.raises(ValueError, match="the target of query row 'b' is empty"):
        gpualign_df.align(pd.Series(["ACGT", "AC"], index=["a", "b"]), ["ACGTT", ""],
                          match=2, mismatch=-3, overhang="softclip", backend="cpu")


def test_command_line_refuses_overhang_with_a_mode_or_another_format(tmp_path, capsys):
    from gpualign_df.cli import main

    fasta = tmp_path / "s.fasta"
    fasta.write_text(">a\nACGTAC\n>b\nACGTTT\n")
    for flags, says in ((["--mode", "sg"], "drop --mode"),
                        (["--format", "paf"], "--overhang writes tsv")):
        out = tmp_path / "out.txt"
        assert main(["align", str(fasta), str(fasta), "--match", "2", "--mismatch", "-3",
                     "--overhang", "indel", *flags, "--out", str(out)]) == 2
        assert says in capsys.readouterr().err
        assert not out.exists()


def test_a_pair_whose_traceback_cannot_fit_is_refused_before_any_work():
    """GATK's traceback keeps every cell (4 bytes): a pair over ``traceback_memory`` is
    refused naming the row, its size and what it needs."""
    with pytest.raises(MemoryError, match=r"query row 11 \(40 x 50\) needs 8,364 bytes, "
                                          r"more than the 8,363 .*traceback_memory"):
        gpualign_df.align(pd.Series(["ACGT", "A" * 40], index=[10, 11]), ["ACGTT", "C" * 50],
                          match=2, mismatch=-3, overhang="indel", backend="cpu",
                          traceback_memory=4 * 41 * 51 - 1)
    frame = gpualign_df.align(["ACGT", "A" * 40], ["ACGTT", "C" * 50], match=2, mismatch=-3,
                              overhang="indel", backend="cpu", traceback_memory=4 * 41 * 51)
    assert frame["cigar"][1] == gatk_align("C" * 50, "A" * 40, 2, -3, -10, -1, "indel")[0]


def test_a_pair_beyond_the_free_memorys_share_is_judged_by_the_available_memory(monkeypatch):
    """Without ``traceback_memory`` a GATK job's pairs are held against the free memory's
    share first (one system call, no /proc/meminfo); a pair beyond it is judged by the
    available memory's share, and refused only beyond that."""
    from gpualign_df import config, engine

    queries, targets = ["ACGT", "A" * 40], ["ACGTT", "C" * 50]
    options = dict(match=2, mismatch=-3, overhang="indel", backend="cpu")
    expected = gpualign_df.align(queries, targets, **options)
    monkeypatch.setattr(engine, "available_host_memory",
                        lambda: pytest.fail("a small job read /proc/meminfo"))
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, **options), expected)
    need, share = 4 * 41 * 51, config.settings().host_memory_share
    monkeypatch.setattr(engine, "free_host_memory", lambda: int(need / share) - 1024)
    monkeypatch.setattr(engine, "available_host_memory", lambda: int(need / share) + 1024)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, **options), expected)
    monkeypatch.setattr(engine, "available_host_memory", lambda: int(need / share) - 1024)
    with pytest.raises(MemoryError, match=r"query row 1 \(40 x 50\) needs 8,364 bytes"):
        gpualign_df.align(queries, targets, **options)
