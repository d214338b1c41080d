"""Every script in examples/ runs (each .py with this Python, each .sh with bash and the
`gpualign` of this environment on PATH) in a fresh directory, exits 0, and prints or writes
what it says it does, checked against the API's own results."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import gpualign_df
from gpualign_df.io import read_sequences, write_results

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = Path(gpualign_df.__file__).parent / "data" / "examples"
#: An example must finish well under a minute on a 2-core CPU (numba compiling included).
TIMEOUT_S = 120


def run_example(script: Path, workdir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # `gpualign` and `python` in the scripts are this environment's
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    if script.suffix == ".py":
        command = [sys.executable, str(script)]
    else:
        command = ["bash", str(script), str(workdir / "out")]
    result = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    assert result.returncode == 0, (f"{script.name} exited {result.returncode}\n"
                                    f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return result


def tags(fields: list[str], name: str) -> int:
    (value,) = [f.split(":", 2)[2] for f in fields if f.startswith(f"{name}:")]
    return int(value)


def same_as_api(path: Path, results, **writer_options) -> None:
    """The command's file is byte for byte the API's result written by write_results."""
    expected = path.with_name("expected" + path.suffix)
    write_results(results, expected, **writer_options)
    assert path.read_bytes() == expected.read_bytes(), path.name


def check_command_line(result: subprocess.CompletedProcess, workdir: Path) -> None:
    out = workdir / "out"
    assert "gpualign demo: 500 GASAL2 read/reference pairs" in result.stdout
    queries = read_sequences(DATA / "gasal2_query_500.fasta.gz")
    targets = read_sequences(DATA / "gasal2_target_500.fasta.gz")
    dna = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1)
    files = dict(queries=queries, targets=targets)

    sam = (out / "reads.sam").read_text().splitlines()
    assert sam[0].startswith("@HD")
    records = [line.split("\t") for line in sam if not line.startswith("@")]
    local = gpualign_df.align(queries.seq, targets.seq, mode="sw", clip="soft", **dna)
    assert len(records) == 500 and all(len(fields) >= 11 for fields in records)
    assert [record[0] for record in records] == queries.name.tolist()
    assert [tags(record, "AS") for record in records] == local.score.tolist()
    same_as_api(out / "reads.sam", local, mode="sw", how="rowwise",
                scoring=gpualign_df.make_scoring(**dna), **files)

    paf = [line.split("\t") for line in (out / "reads.paf").read_text().splitlines()]
    glocal = gpualign_df.align(queries.seq, targets.seq, mode="sg",
                               free_ends=["target_start", "target_end"], **dna)
    assert len(paf) == 500 and all(len(fields) == 14 for fields in paf)
    # glocal: every read aligned end to end
    assert all(fields[2] == "0" and fields[3] == fields[1] for fields in paf)
    assert [tags(fields, "AS") for fields in paf] == glocal.score.tolist()
    same_as_api(out / "reads.paf", glocal, mode="sg", how="rowwise",
                scoring=gpualign_df.make_scoring(**dna), **files)

    blast = pd.read_csv(out / "proteins.blast6", sep="\t", header=None, dtype={0: str, 1: str})
    proteins = read_sequences(DATA / "adept_proteins_200.fasta.gz")
    blosum = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1)
    pairs = gpualign_df.align(proteins.seq, how="pairwise", **blosum)
    aligned = pairs[pairs.length > 0]
    assert blast.shape == (len(aligned), 12) and len(aligned) > 19_000
    assert blast[0].tolist() == proteins.name[aligned["query"]].tolist()
    assert blast[1].tolist() == proteins.name[aligned["target"]].tolist()
    same_as_api(out / "proteins.blast6", pairs, mode="sw", how="pairwise",
                scoring=gpualign_df.make_scoring(**blosum), queries=proteins, targets=proteins)


def check_protein_all_pairs(result: subprocess.CompletedProcess, workdir: Path) -> None:
    lines = result.stdout.splitlines()
    assert lines[0] == "19,900 local alignments of 200 proteins"
    header, rows = lines[1].split(), [line.split() for line in lines[2:]]
    assert len(rows) == 5 and all(len(row) == len(header) for row in rows)
    proteins = read_sequences(DATA / "adept_proteins_200.fasta.gz")
    pairs = gpualign_df.align(proteins.seq, how="pairwise", matrix="BLOSUM62", gap_open=11,
                              gap_extend=1)
    printed = [int(row[header.index("score")]) for row in rows]
    assert printed == sorted(pairs.score.tolist(), reverse=True)[:5]
    assert all(re.fullmatch(r"prot_\d+", row[0]) for row in rows)


def check_quickstart(result: subprocess.CompletedProcess, workdir: Path) -> None:
    rowwise, search = result.stdout.split("best 2 database hits per read")
    search, shown = search.split("the first hit of r2, aligned:")
    rows = [line.split() for line in rowwise.splitlines()[2:] if line.strip()]
    assert [row[:2] for row in rows] == [["0", "0"], ["1", "1"], ["2", "2"]]
    assert rows[2][2] == "<NA>"  # the null mate gives a null row
    hits = [line.split() for line in search.splitlines()[2:]]
    database = pd.Series(["ACGTTGCAACGT", "TTTTTTTT", "GCAACG"], index=["db1", "db2", "db3"])
    expected = gpualign_df.align(pd.Series(["ACGTTGCAAC", "ACGTAGCAAC", "TTGCAACG"]), database,
                                 how="search", top_k=2, mode="sw", match=1, mismatch=-4,
                                 gap_open=7, gap_extend=1)
    assert [(row[1], row[2], int(row[3])) for row in hits if row] == [
        (f"r{q + 1}", t, s) for q, t, s in zip(expected["query"], expected["target"], expected["score"])]
    first = expected.index[expected["query"] == 1][:1]
    view = gpualign_df.view(expected, pd.Series(["ACGTTGCAAC", "ACGTAGCAAC", "TTGCAACG"]),
                            database, rows=first, match=1, mismatch=-4, gap_open=7,
                            gap_extend=1)
    assert shown.strip() == str(view).strip()


CHECKS = {
    "command_line.sh": check_command_line,
    "protein_all_pairs.py": check_protein_all_pairs,
    "quickstart_pandas.py": check_quickstart,
}


def test_every_example_is_run_and_checked():
    # a new example needs an entry in CHECKS, so that no example goes untested
    assert sorted(path.name for path in EXAMPLES.iterdir() if path.is_file()) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_runs_and_does_what_it_says(name, tmp_path):
    result = run_example(EXAMPLES / name, tmp_path)
    CHECKS[name](result, tmp_path)
