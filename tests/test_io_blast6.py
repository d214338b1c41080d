"""BLAST tabular output of gpualign_df.io: e-values and bit scores.

The statistics come from gpualign_df.blast_stats over the job's search space (the whole
targets frame for search and pairwise jobs, the pair's target for rowwise ones) and are
printed as BLAST+'s ``-outfmt 6`` prints them; ``NA`` where there is no model.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpualign_df import align
from gpualign_df.io import open_results, write_results
from gpualign_df.scoring import make_scoring

QUERIES = pd.DataFrame({"name": ["p1", "p2", "p3"],
                        "seq": ["MKTAYIAKQRQISFVKSHFSRQ", "GAVLIMCFWPST", "MKTAYIAK"]})
TARGETS = pd.DataFrame({
    "name": ["s1", "s2", "s3", "s4"],
    "seq": ["MKTAYIAKQRQISFVKSHFSRQLEERLGLIEV", "PSTGAVLIMCFW", "QISFVKSHFSRQ",
            "WWWWGAVLIMCFWPSTWWW"],
})
BLOSUM62 = dict(matrix="BLOSUM62", gap_open=12, gap_extend=1)  # BLAST's 11/1


def blast_evalue(evalue: float) -> str:
    """BLAST+ tabular (CAlignFormatUtil::GetScoreString, tabular.cpp's override)."""
    if evalue < 1.0e-180:
        return "0.0"
    if evalue < 0.0009:
        return "%.2e" % evalue
    if evalue < 0.1:
        return "%.3f" % evalue
    if evalue < 1.0:
        return "%.2f" % evalue
    if evalue < 10.0:
        return "%.1f" % evalue
    return "%.0f" % evalue


def blast_bitscore(bits: float) -> str:
    if bits > 99999:
        return "%.3e" % bits
    if bits > 99.9:
        return str(int(bits))  # C's (long) cast: toward zero
    return "%.1f" % bits


def _rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def hits() -> pd.DataFrame:
    return align(QUERIES["seq"], TARGETS["seq"], how="search", top_k=3, **BLOSUM62)


def test_no_scoring_or_no_parameters_give_na(tmp_path: Path, hits: pd.DataFrame) -> None:
    path = tmp_path / "r.m8"
    custom = make_scoring(("AB", np.array([[1, -1], [-1, 1]])), gap_open=2, gap_extend=1)
    for scoring in (None, custom, make_scoring("BLOSUM62", gap_open=10, gap_extend=10)):
        write_results(hits, path, queries=QUERIES, targets=TARGETS, scoring=scoring,
                      how="search")
        rows = _rows(path)
        assert len(rows) == len(hits)
        assert all(row[10:] == ["NA", "NA"] for row in rows)


def _fake_stats(monkeypatch: pytest.MonkeyPatch, evalues: np.ndarray | None = None,
                bits: np.ndarray | None = None) -> list[dict]:
    """Stand in for gpualign_df.blast_stats, recording its calls. With arrays given, row
    i (score i) gets evalues[i] and bits[i]; else the e-value encodes the search space."""
    calls: list[dict] = []
    fake = types.ModuleType("gpualign_df.blast_stats")
    fake.karlin_altschul = lambda scoring: ("params", scoring.name)

    def evalues_and_bitscores(scores, query_lengths, db_residues, db_sequences, params):
        assert params == ("params", "BLOSUM62")
        calls.append(dict(scores=np.asarray(scores).tolist(),
                          query_lengths=np.asarray(query_lengths).tolist(),
                          db_residues=db_residues, db_sequences=db_sequences))
        index = np.asarray(scores, dtype=np.int64)
        if evalues is not None:
            return evalues[index], bits[index]
        return (np.full(len(index), float(db_residues * 1000 + db_sequences)),
                np.asarray(query_lengths, dtype=np.float64) + 0.25)

    fake.evalues_and_bitscores = evalues_and_bitscores
    monkeypatch.setitem(sys.modules, "gpualign_df.blast_stats", fake)
    return calls


def test_search_and_pairwise_search_the_whole_targets_frame(tmp_path, hits,
                                                            monkeypatch) -> None:
    calls = _fake_stats(monkeypatch)
    path = tmp_path / "r.m8"
    scoring = make_scoring(**BLOSUM62)
    write_results(hits, path, queries=QUERIES, targets=TARGETS, scoring=scoring,
                  how="search")
    residues = int(TARGETS["seq"].str.len().sum())
    assert [(c["db_residues"], c["db_sequences"]) for c in calls] == [(residues, 4)]
    assert calls[0]["scores"] == hits["score"].tolist()
    assert calls[0]["query_lengths"] == QUERIES["seq"].str.len()[hits["query"]].tolist()
    rows = _rows(path)
    assert {row[10] for row in rows} == {"%.0f" % (residues * 1000 + 4)}
    assert [row[11] for row in rows] == [
        "%.1f" % (n + 0.25) for n in QUERIES["seq"].str.len()[hits["query"]]]
    calls.clear()
    pairs = align(QUERIES["seq"], how="pairwise", **BLOSUM62)
    write_results(pairs, path, queries=QUERIES, targets=QUERIES, scoring=scoring,
                  how="pairwise")
    assert [(c["db_residues"], c["db_sequences"]) for c in calls] == [
        (int(QUERIES["seq"].str.len().sum()), 3)]


def test_rowwise_searches_each_pair_on_its_own(tmp_path, monkeypatch) -> None:
    calls = _fake_stats(monkeypatch)
    targets = TARGETS.iloc[[0, 1, 3]].reset_index(drop=True)
    rows_in = align(QUERIES["seq"], targets["seq"], how="rowwise", **BLOSUM62)
    path = tmp_path / "r.m8"
    for how in ("rowwise", None):
        calls.clear()
        write_results(rows_in, path, queries=QUERIES, targets=targets,
                      scoring=make_scoring(**BLOSUM62), how=how)
        lengths = targets["seq"].str.len().tolist()
        assert sorted((c["db_residues"], c["db_sequences"]) for c in calls) == sorted(
            (n, 1) for n in lengths)
        rows = _rows(path)
        assert [row[10] for row in rows] == ["%.0f" % (n * 1000 + 1) for n in lengths]


def test_numbers_are_printed_as_blast_prints_them(tmp_path, monkeypatch) -> None:
    """Every band of BLAST's e-value and bit-score formats, their edges, rounding ties
    and thousands of random values: the vectorized formatting equals printf's."""
    special_e = [0.0, 1e-200, 9.99e-181, 1e-180, 2.5e-100, 1.235e-50, 1.0e-5, 0.00089999,
                 0.0009, 0.0125, 0.0995, 0.09999, 0.1, 0.125, 0.995, 0.999, 1.0, 1.05, 9.95,
                 9.96, 10.0, 12.5, 1e6, 3.7e15, float("inf")]
    special_b = [-3.25, -0.04, 0.05, 0.25, 9.95, 45.45, 99.9, 99.91, 99.95, 100.7, 250.0,
                 99999.0, 99999.5, 123456.7, 5e9]
    rng = np.random.default_rng(7)
    n = 4000
    evalues = np.concatenate([special_e, 10.0 ** rng.uniform(-200, 8, n)])
    bits = np.concatenate([special_b, rng.uniform(-20, 2e5, n // 2),
                           rng.uniform(0, 120, n - n // 2 + len(special_e) - len(special_b))])
    # ties of the decimal formats that a float product could round either way
    evalues[len(special_e):len(special_e) + 200] = np.round(rng.uniform(0.1, 10, 200), 2) \
        + 0.005
    bits[len(special_b):len(special_b) + 200] = np.round(rng.uniform(0, 99, 200), 1) + 0.05
    rows = len(evalues)
    _fake_stats(monkeypatch, evalues, bits)
    frame = pd.DataFrame({
        "query": np.zeros(rows, int), "target": np.zeros(rows, int),
        "score": pd.array(np.arange(rows), dtype="Int32"),
        **{c: pd.array(np.full(rows, v), dtype="Int32") for c, v in (
            ("query_start", 0), ("query_end", 4), ("target_start", 0), ("target_end", 4),
            ("matches", 4), ("mismatches", 0), ("gap_opens", 0), ("gaps", 0), ("length", 4))},
        "cigar": ["4="] * rows, "identity": pd.array(np.ones(rows), dtype="Float64"),
    })
    path = tmp_path / "r.m8"
    with open_results(path, queries=QUERIES, targets=TARGETS, how="search",
                      scoring=make_scoring(**BLOSUM62)) as writer:
        writer.write(frame)
    out = _rows(path)
    assert [row[10] for row in out] == [blast_evalue(e) for e in evalues]
    assert [row[11] for row in out] == [blast_bitscore(b) for b in bits]
    assert [row[10] for row in out[:5]] == ["0.0", "0.0", "0.0", "1.00e-180", "2.50e-100"]


def test_real_statistics_for_blosum62(tmp_path, hits) -> None:
    stats = pytest.importorskip("gpualign_df.blast_stats")
    scoring = make_scoring(**BLOSUM62)
    params = stats.karlin_altschul(scoring)
    assert params is not None
    path = tmp_path / "r.m8"
    write_results(hits, path, queries=QUERIES, targets=TARGETS, scoring=scoring,
                  how="search")
    qlen = QUERIES["seq"].str.len().to_numpy()[hits["query"]]
    evalues, bits = stats.evalues_and_bitscores(
        hits["score"].to_numpy(dtype=np.int64), qlen, int(TARGETS["seq"].str.len().sum()),
        len(TARGETS), params)
    rows = _rows(path)
    assert [row[10] for row in rows] == [blast_evalue(e) for e in evalues]
    assert [row[11] for row in rows] == [blast_bitscore(b) for b in bits]
    # the best hit of p1 (22 residues, all identical to s1): a small e-value, ~50 bits
    assert float(rows[0][10]) < 1e-6 and 40 < float(rows[0][11]) < 60
