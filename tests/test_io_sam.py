"""SAM output of gpualign_df.io: primary and secondary records, MAPQ, the @SQ header.

Among the rows of one query (consecutive rows with the same ``query`` label), the best
mapped row is primary (the first on ties), every other mapped row secondary (FLAG 256,
MAPQ 0, SEQ/QUAL ``*``); a primary's MAPQ is 255 for a query's only mapped row, else
``0`` if s2 >= s1 or s1 <= 0, else ``min(60, round(60 * (s1 - s2) / s1))``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from gpualign_df import align
from gpualign_df.io import open_results, read_sequences, write_results

QUERIES = pd.DataFrame({
    "name": [f"read{i}" for i in range(8)],
    "seq": ["ACGTACGTAC"] * 8,
    "qual": ["ABCDEFGHIJ"] * 8,
})
TARGETS = pd.DataFrame({"name": [f"ref{i}" for i in range(6)],
                        "seq": ["ACGTACGTACGTACGTACGT"] * 5 + ["ACGTACGT"]})

#: (query, target, score) per row; None: a null row (unmapped), "" an empty alignment.
ROWS = [
    (0, 0, 30), (0, 1, 50), (0, 2, 50), (0, 3, 10),  # tie at the top: MAPQ 0
    (1, 4, 40), (1, 0, 20),                          # round(60 * 20 / 40) = 30
    (2, 1, 25), (2, 2, ""),                          # one mapped row: 255; the empty one dropped
    (3, 0, None), (3, 1, None), (3, 2, None),        # nothing mapped: one unmapped record
    (4, 3, 7), (4, 4, 6),                            # round(8.57) = 9
    (5, 0, 24), (5, 1, 23),                          # round(2.5) = 2 (half to even)
    (6, 2, -3), (6, 3, -5),                          # s1 <= 0: 0
    (7, 4, 100), (7, 5, 0),                          # min(60, 60) = 60
]
#: (FLAG, MAPQ) of the records, in order.
EXPECTED = [
    (256, 0), (0, 0), (256, 0), (256, 0),
    (0, 30), (256, 0),
    (0, 255),
    (4, 0),
    (0, 9), (256, 0),
    (0, 2), (256, 0),
    (0, 0), (256, 0),
    (0, 60), (256, 0),
]


def _frame(rows: list[tuple]) -> pd.DataFrame:
    records = []
    for query, target, score in rows:
        if score is None:
            records.append({"query": query, "target": target})
            continue
        span = 0 if score == "" else 4
        records.append({
            "query": query, "target": target, "score": 0 if score == "" else score,
            "query_start": 2, "query_end": 2 + span, "target_start": 3,
            "target_end": 3 + span, "cigar": f"{span}=" if span else "",
            "matches": span, "mismatches": 0, "gap_opens": 0, "gaps": 0, "length": span,
            "identity": 1.0 if span else 0.0,
        })
    frame = pd.DataFrame.from_records(records)
    for column in ("score", "query_start", "query_end", "target_start", "target_end",
                   "matches", "mismatches", "gap_opens", "gaps", "length"):
        frame[column] = frame[column].astype("Int32")
    frame["identity"] = frame["identity"].astype("Float64")
    frame["cigar"] = frame["cigar"].astype("string")
    return frame


def _records(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines() if line[0] != "@"]


def _flagstat(records: list[list[str]]) -> Counter:
    """samtools flagstat's counts that matter here, computed from FLAG."""
    counts: Counter = Counter()
    for record in records:
        flag = int(record[1])
        counts["total"] += 1
        counts["secondary"] += bool(flag & 0x100)
        counts["primary"] += not flag & 0x900
        counts["primary mapped"] += not flag & 0x904
    return counts


def test_primary_secondary_and_mapq(tmp_path: Path) -> None:
    path = tmp_path / "r.sam"
    write_results(_frame(ROWS), path, queries=QUERIES, targets=TARGETS)
    records = _records(path)
    assert [(int(r[1]), int(r[4])) for r in records] == EXPECTED
    for record in records:
        flag = int(record[1])
        if flag & 0x100:  # secondaries carry no SEQ/QUAL, as minimap2 and BWA write them
            assert record[9:11] == ["*", "*"] and record[5] == "2S4=4S"
        else:
            assert record[9:11] == ["ACGTACGTAC", "ABCDEFGHIJ"]
    # the primary of read0 is the first of its two best rows (ref1, not ref2)
    assert [r[2] for r in records if r[0] == "read0" and r[1] == "0"] == ["ref1"]


def test_flagstat_counts_each_read_once(tmp_path: Path) -> None:
    path = tmp_path / "r.sam"
    frame = _frame(ROWS)
    write_results(frame, path, queries=QUERIES, targets=TARGETS)
    counts = _flagstat(_records(path))
    mapped_reads = {query for query, _, score in ROWS if score not in (None, "")}
    reads = {query for query, _, _ in ROWS}
    mapped_rows = sum(score not in (None, "") for _, _, score in ROWS)
    assert counts["primary mapped"] == len(mapped_reads)
    assert counts["primary"] == len(reads)
    assert counts["secondary"] == mapped_rows - len(mapped_reads)


def test_a_real_search_through_pysam_and_samtools_flagstat(tmp_path: Path) -> None:
    pysam = pytest.importorskip("pysam")
    queries = pd.DataFrame({"name": ["a", "b", "c"],
                            "seq": ["ACGTACGTTT", "TTGCAGGT", "GGGGGGGGGG"]})
    targets = pd.DataFrame({"name": ["t1", "t2", "t3", "t4"],
                            "seq": ["TTACGTACGTTTAA", "CCTTGCAGGCC", "ACGTACGTAA", "TTT"]})
    hits = align(queries["seq"], targets["seq"], how="search", top_k=3, match=2, mismatch=-3,
                 gap_open=5, gap_extend=2)
    path = tmp_path / "hits.sam"
    write_results(hits, path, queries=queries, targets=targets, how="search")
    with pysam.AlignmentFile(str(path), "r") as sam:
        assert list(sam.references) == ["t1", "t2", "t3", "t4"]
        assert list(sam.lengths) == [14, 11, 10, 3]
        records = list(sam)
    primaries = [r for r in records if not r.is_secondary and not r.is_unmapped]
    secondaries = [r for r in records if r.is_secondary]
    mapped = hits[hits["cigar"].str.contains(r"\d[=X]", na=False)]
    assert sorted(r.query_name for r in primaries) == sorted(
        queries["name"][mapped["query"].unique()])
    assert len(secondaries) == len(mapped) - len(primaries)
    assert all(r.mapping_quality == 0 and r.query_sequence is None for r in secondaries)
    for record in primaries:
        best = hits[hits["query"] == queries.index[queries["name"] == record.query_name][0]]
        assert record.get_tag("AS") == best["score"].max()
        assert record.query_sequence == queries["seq"][queries["name"] == record.query_name]\
            .iloc[0]
    report = pysam.flagstat(str(path))
    assert f"{len(primaries) + sum(r.is_unmapped for r in records)} + 0 primary\n" in report
    assert f"{len(secondaries)} + 0 secondary\n" in report


def test_a_query_split_across_writes_keeps_one_primary(tmp_path: Path) -> None:
    """read0's rows in two calls, the better score in the second: its primary is the best
    of the first part (documented: the best-of-run rule needs one call), and the second
    part is secondary; read1 after it starts afresh. MAPQ: round(60 * (30 - 10) / 30)."""
    frame = _frame([(0, 0, 30), (0, 1, 10), (0, 2, 50), (0, 3, 45), (1, 4, 40)])
    path = tmp_path / "r.sam"
    with open_results(path, queries=QUERIES, targets=TARGETS) as writer:
        writer.write(frame.iloc[:2])
        writer.write(frame.iloc[2:])
    flags = [(r[0], int(r[1]), int(r[4])) for r in _records(path)]
    assert flags == [("read0", 0, 40), ("read0", 256, 0), ("read0", 256, 0),
                     ("read0", 256, 0), ("read1", 0, 255)]
    # an unmapped first part, a mapped second part: the mapped one is primary
    frame = _frame([(3, 0, None), (3, 1, 20), (3, 2, 10)])
    with open_results(path, queries=QUERIES, targets=TARGETS) as writer:
        writer.write(frame.iloc[:1])
        writer.write(frame.iloc[1:])
    assert [int(r[1]) for r in _records(path)] == [4, 0, 256]


def test_a_query_in_two_runs_gets_two_primaries(tmp_path: Path) -> None:
    """Runs are consecutive rows: rows of one query apart are separate runs (the rowwise
    shape, or frames concatenated in another order), each with its own primary."""
    path = tmp_path / "r.sam"
    write_results(_frame([(0, 0, 30), (1, 1, 20), (0, 2, 10)]), path, queries=QUERIES,
                  targets=TARGETS)
    assert [(r[0], r[1], r[4]) for r in _records(path)] == [
        ("read0", "0", "255"), ("read1", "0", "255"), ("read0", "0", "255")]


def test_sq_lists_every_target_and_pairwise_every_sequence(tmp_path: Path) -> None:
    path = tmp_path / "r.sam"
    write_results(_frame([(0, 0, 30)]), path, queries=QUERIES, targets=TARGETS)
    header = [line for line in path.read_text().splitlines() if line.startswith("@SQ")]
    assert header == [f"@SQ\tSN:ref{i}\tLN:{20 if i < 5 else 8}" for i in range(6)]
    seqs = pd.DataFrame({"name": ["s1", "s2", "s3"], "seq": ["ACGTA", "ACGGA", "TTTT"]})
    pairs = align(seqs["seq"], how="pairwise", match=1, mismatch=-1)
    write_results(pairs, path, queries=seqs, targets=seqs, how="pairwise")
    header = [line for line in path.read_text().splitlines() if line.startswith("@SQ")]
    assert header == ["@SQ\tSN:s1\tLN:5", "@SQ\tSN:s2\tLN:5", "@SQ\tSN:s3\tLN:4"]


def test_duplicate_target_names_are_refused_before_writing(tmp_path: Path) -> None:
    fasta = tmp_path / "refs.fa"
    fasta.write_text(">chr1 first\nACGTACGT\n>chr2\nACGTACGT\n>chr1 second copy\nACGG\n"
                     ">x\nA\n>x\nC\n")
    targets = read_sequences(fasta)
    path = tmp_path / "r.sam"
    path.write_text("old\n")
    with pytest.raises(ValueError, match=r"'chr1' \(records 1, 3\).*'x' \(records 4, 5\)"):
        write_results(_frame([(0, 1, 4)]), path, queries=QUERIES, targets=targets)
    assert path.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["r.sam", "refs.fa"]
    with pytest.raises(ValueError, match="unique reference names"):
        open_results(tmp_path / "new.sam", queries=QUERIES, targets=targets)
    # TSV and PAF have no reference dictionary: duplicates are fine there
    write_results(_frame([(0, 1, 4)]), tmp_path / "r.paf", queries=QUERIES, targets=targets)


@pytest.mark.parametrize(("name", "record"), [("", 2), ("*star", 2), ("=eq", 2)])
def test_unwritable_reference_names_are_refused(tmp_path: Path, name: str,
                                                record: int) -> None:
    targets = pd.DataFrame({"name": ["ok", name], "seq": ["ACGT", "ACGT"]})
    with pytest.raises(ValueError, match=rf"record {record}"):
        open_results(tmp_path / "r.sam", queries=QUERIES, targets=targets)
    assert os.listdir(tmp_path) == []
