"""The gpualign command: outputs parsed back and checked against the API's results."""

from __future__ import annotations

import gzip
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

import gpualign_df
from gpualign_df.cli import main
from gpualign_df.io import read_sequences

EXAMPLES = Path(str(resources.files("gpualign_df").joinpath("data", "examples")))
QUERIES = EXAMPLES / "gasal2_query_500.fasta.gz"
TARGETS = EXAMPLES / "gasal2_target_500.fasta.gz"
DNA = ["--match", "1", "--mismatch", "-4", "--gap-open", "7", "--gap-extend", "1"]


def expected_rowwise(mode="sw", **extra):
    queries, targets = read_sequences(QUERIES), read_sequences(TARGETS)
    return queries, targets, gpualign_df.align(queries.seq, targets.seq, mode=mode, match=1,
                                               mismatch=-4, gap_open=7, gap_extend=1, **extra)


def test_tsv_equals_api(tmp_path):
    out = tmp_path / "out.tsv"
    assert main(["align", str(QUERIES), str(TARGETS), "--mode", "nw", *DNA, "--out", str(out)]) == 0
    written = pd.read_csv(out, sep="\t")
    _, _, expected = expected_rowwise("nw")
    assert written["score"].tolist() == expected["score"].tolist()
    assert written["cigar"].tolist() == expected["cigar"].tolist()


def test_sam_positions_and_soft_clips(tmp_path):
    out = tmp_path / "out.sam"
    assert main(["align", str(QUERIES), str(TARGETS), *DNA, "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("@HD")
    assert any(line.startswith("@SQ\tSN:") for line in lines)
    records = [line.split("\t") for line in lines if not line.startswith("@")]
    queries, _, expected = expected_rowwise(clip="soft")
    assert len(records) == len(expected)
    for record, row in zip(records, expected.itertuples()):
        if record[1] == "4":
            continue
        assert int(record[3]) >= row.target_start + 1  # 1-based POS
        consumed = sum(int(n) for n, op in pd.Series([record[5]]).str.findall(r"(\d+)([=XIMS])")[0])
        assert consumed == len(record[9]) == len(queries.seq[row.query])
        assert f"AS:i:{row.score}" in record


def test_search_top_k_paf_and_blast6(tmp_path):
    paf, blast = tmp_path / "hits.paf", tmp_path / "hits.m8"
    queries = tmp_path / "q.fa"
    queries.write_text(">a\nACGTACGTTGCA\n>b\nTTGCATTGCAAC\n")
    targets = tmp_path / "t.fa.gz"
    with gzip.open(targets, "wt") as handle:
        handle.write(">x\nGGACGTACGTTGCAGG\n>y\nTTGCATTGCAACTT\n>z\nAAAAAAAAAA\n")
    for out in (paf, blast):
        assert main(["align", str(queries), str(targets), "--how", "search", "--top-k", "1", *DNA,
                     "--out", str(out)]) == 0
    paf_rows = [line.split("\t") for line in paf.read_text().splitlines()]
    assert [(row[0], row[5]) for row in paf_rows] == [("a", "x"), ("b", "y")]
    assert paf_rows[0][12:] == ["AS:i:12", "cg:Z:12="] and paf_rows[0][7:9] == ["2", "14"]
    blast_rows = [line.split("\t") for line in blast.read_text().splitlines()]
    assert all(len(row) == 12 for row in blast_rows)
    assert blast_rows[0][:10] == ["a", "x", "100.000", "12", "0", "0", "1", "12", "3", "14"]


def test_bad_character_is_a_clear_error(tmp_path, capsys):
    queries = tmp_path / "q.fa"
    queries.write_text(">a\nACGT\n>b\nACJT\n")
    assert main(["align", str(queries), str(queries), *DNA, "--out", str(tmp_path / "o.tsv")]) == 2
    assert "row 1, position 2: character 'J'" in capsys.readouterr().err


def test_demo_runs_as_a_command():
    result = subprocess.run([sys.executable, "-m", "gpualign_df.cli", "demo"], capture_output=True,
                            text=True, check=True)
    assert "500 GASAL2 read/reference pairs" in result.stdout
    assert "GCUPS" in result.stdout


def test_scheduler_option_runs_through_dask_and_equals_in_memory(tmp_path):
    distributed = pytest.importorskip("distributed")
    sequences = read_sequences(EXAMPLES / "adept_proteins_200.fasta.gz")[:40]
    proteins = tmp_path / "proteins.fa"
    proteins.write_text("".join(f">{name}\n{seq}\n" for name, seq in
                                zip(sequences.name, sequences.seq)))
    out = tmp_path / "pairs.tsv"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        assert main(["align", str(proteins), "--how", "pairwise", "--matrix", "BLOSUM62",
                     "--gap-open", "11", "--backend", "cpu", "--no-progress",
                     "--scheduler", cluster.scheduler_address, "--out", str(out)]) == 0
    written = pd.read_csv(out, sep="\t")
    expected = gpualign_df.align(sequences.seq, how="pairwise", matrix="BLOSUM62", gap_open=11,
                                 backend="cpu")
    assert len(written) == 40 * 39 // 2
    assert written["score"].tolist() == expected["score"].tolist()
    assert written["cigar"].tolist() == expected["cigar"].tolist()
