"""Tests of gpualign_df.io: FASTA/FASTQ readers and the TSV/Parquet/SAM/PAF/BLAST writers."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pandas as pd
import pytest

from gpualign_df.io import format_from_path, read_sequences, write_results

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

FASTA = (
    ">chr1 some description\n"
    "CCACGTTCGT\n"
    "AAGG\n"
    ">chr2\n"
    "TTTTGCATTT\n"
    ">chr3\tthird\ttarget\n"
    "TTGGATCCTT\n"
    ">chr4 never aligned\n"
    "AAAA\n"
)
FASTQ = (
    "@readA first query\n"
    "ACGTACGTAA\n"
    "+\n"
    "ABCDEFGHIJ\n"
    "@readB\n"
    "TTGCA\n"
    "+readB\n"
    "!!#$%\n"
    "@readC  third one \n"
    "GGAATCC\n"
    "+\n"
    "FFFFFFF\n"
)


def _write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return fh.read()
    return path.read_text()


@pytest.fixture
def targets(tmp_path: Path) -> pd.DataFrame:
    return read_sequences(_write(tmp_path / "targets.fa", FASTA))


@pytest.fixture
def queries(tmp_path: Path) -> pd.DataFrame:
    return read_sequences(_write(tmp_path / "queries.fq", FASTQ))


# --------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["t.fa", "t.fa.gz", "t.fasta.gz"])
def test_read_fasta(tmp_path: Path, name: str) -> None:
    frame = read_sequences(_write(tmp_path / name, FASTA))
    assert frame.columns.tolist() == ["name", "description", "seq"]
    assert isinstance(frame.index, pd.RangeIndex) and frame.index.tolist() == [0, 1, 2, 3]
    assert frame["name"].tolist() == ["chr1", "chr2", "chr3", "chr4"]
    assert frame["description"].tolist() == ["some description", "", "third\ttarget",
                                             "never aligned"]
    assert frame["seq"].tolist() == ["CCACGTTCGTAAGG", "TTTTGCATTT", "TTGGATCCTT", "AAAA"]


@pytest.mark.parametrize("name", ["r.fq", "r.fastq.gz"])
def test_read_fastq(tmp_path: Path, name: str) -> None:
    frame = read_sequences(_write(tmp_path / name, FASTQ))
    assert frame.columns.tolist() == ["name", "description", "seq", "qual"]
    assert frame["name"].tolist() == ["readA", "readB", "readC"]
    assert frame["description"].tolist() == ["first query", "", "third one"]
    assert frame["seq"].tolist() == ["ACGTACGTAA", "TTGCA", "GGAATCC"]
    assert frame["qual"].tolist() == ["ABCDEFGHIJ", "!!#$%", "FFFFFFF"]


def test_read_fasta_crlf_and_spaces_in_sequence(tmp_path: Path) -> None:
    frame = read_sequences(_write(tmp_path / "w.fa", ">x y\r\nAC GT\r\nTT\r\n>empty\r\n>z\r\nG\r\n"))
    assert frame["name"].tolist() == ["x", "empty", "z"]
    assert frame["description"].tolist() == ["y", "", ""]
    assert frame["seq"].tolist() == ["ACGTTT", "", "G"]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.fa", ""),
        ("prose.txt", "this is not a sequence file\n"),
        ("truncated.fq", "@r1\nACGT\n+\nIIII\n@r2\nAC"),
        ("badqual.fq", "@r1\nACGT\n+\nII\n"),
    ],
)
def test_read_bad_files_name_the_file(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(name)):
        read_sequences(path)


@pytest.mark.parametrize("name", ["lead.fa", "lead.fa.gz"])
def test_read_leading_blank_lines(tmp_path: Path, name: str) -> None:
    frame = read_sequences(_write(tmp_path / name, "\n  \r\n\t\n" + FASTA))
    assert frame["name"].tolist() == ["chr1", "chr2", "chr3", "chr4"]
    assert frame["seq"].tolist() == ["CCACGTTCGTAAGG", "TTTTGCATTT", "TTGGATCCTT", "AAAA"]
    fastq = read_sequences(_write(tmp_path / "lead.fq", "\n\n" + FASTQ))
    assert fastq["qual"].tolist() == ["ABCDEFGHIJ", "!!#$%", "FFFFFFF"]


@pytest.mark.parametrize(
    ("content", "names", "seqs"),
    [
        (">a\nACGT\n>b", ["a", "b"], ["ACGT", ""]),
        (">a\nACGT\n>b\n", ["a", "b"], ["ACGT", ""]),
        (">a\nACGT\n>b desc\n\n\n", ["a", "b"], ["ACGT", ""]),
        (">a\r\nACGT\r\n>b\r\n", ["a", "b"], ["ACGT", ""]),
        (">a\n>b\nAC\n>c\n>d", ["a", "b", "c", "d"], ["", "AC", "", ""]),
        (">only", ["only"], [""]),
        (">x\n>y\n", ["x", "y"], ["", ""]),
        ("\n>a\nAC GT\n>b", ["a", "b"], ["ACGT", ""]),
    ],
)
def test_read_empty_records_anywhere(tmp_path: Path, content: str, names: list[str],
                                     seqs: list[str]) -> None:
    for name in ("e.fa", "e.fa.gz"):
        frame = read_sequences(_write(tmp_path / name, content))
        assert frame["name"].tolist() == names
        assert frame["seq"].tolist() == seqs
        assert frame.index.tolist() == list(range(len(names)))
    assert read_sequences(_write(tmp_path / "d.fa", ">a\nAC\n>b desc here"))[
        "description"].tolist() == ["", "desc here"]


def test_read_fastq_empty_last_record_without_newline(tmp_path: Path) -> None:
    frame = read_sequences(_write(tmp_path / "e.fq", "@a\nAC\n+\nII\n@b\n\n+"))
    assert frame["name"].tolist() == ["a", "b"]
    assert frame["seq"].tolist() == ["AC", ""] and frame["qual"].tolist() == ["II", ""]


@pytest.mark.parametrize(
    ("content", "record", "name", "line"),
    [
        (">a\nACGT\n@b read\nAC\n+\nII\n", 2, "b", 3),
        (">a\nAC\nGT\n>b\nGG\n@c\nAC\n+\nII\n>d\nA\n", 3, "c", 6),
        ("\n\n>a\nACGT\n@b\nAC\n+\nII\n", 2, "b", 5),
        ("@a\nAC\n+\nII\n>b\nACGT\n", 2, "b", 5),
        ("@a\nAC\n+\nII\n@b\nGG\n+\nII\n>c x\nACGT\n>d\nAC\n", 3, "c", 9),
        ("@a\nAC\n+\nII\n>b\nAC\n+\nII\n", 2, "b", 5),
    ],
)
def test_read_refuses_mixed_fasta_and_fastq(tmp_path: Path, content: str, record: int,
                                            name: str, line: int) -> None:
    for file in ("mixed.txt", "mixed.txt.gz"):
        path = _write(tmp_path / file, content)
        with pytest.raises(ValueError, match=(
                rf"{re.escape(file)}.*mixes FASTA and FASTQ.*record {record} "
                rf"\('{name}', line {line}\)")):
            read_sequences(path)


@pytest.mark.parametrize("compression", ["bz2", "xz", "zst"])
def test_read_other_compressions(tmp_path: Path, compression: str) -> None:
    import bz2
    import lzma

    import pyarrow as pa

    path = tmp_path / f"t.fa.{compression}"
    if compression == "bz2":
        path.write_bytes(bz2.compress(FASTA.encode()))
    elif compression == "xz":
        path.write_bytes(lzma.compress(FASTA.encode()))
    else:
        with pa.output_stream(str(path), compression="zstd") as out:
            out.write(FASTA.encode())
    assert read_sequences(path)["seq"].tolist() == ["CCACGTTCGTAAGG", "TTTTGCATTT",
                                                    "TTGGATCCTT", "AAAA"]
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(ValueError, match=re.escape(path.name)):
        read_sequences(path)


def test_read_blank_files_name_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "blank.fa", "\n \n\n")
    with pytest.raises(ValueError, match=r"blank\.fa.*no record"):
        read_sequences(path)


def test_read_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nope.fa"):
        read_sequences(tmp_path / "nope.fa")


def test_read_truncated_gzip(tmp_path: Path) -> None:
    path = tmp_path / "cut.fa.gz"
    path.write_bytes(gzip.compress(FASTA.encode())[:20])
    with pytest.raises(ValueError, match="cut.fa.gz"):
        read_sequences(path)


def test_read_gasal2_queries() -> None:
    path = DATA / "gasal2_query_batch.fasta.gz"
    if not path.exists():
        pytest.skip(f"shared data not present at {DATA}")
    frame = read_sequences(path)
    assert len(frame) == 20_000
    assert (frame["seq"].str.len() == 150).all()
    assert frame["name"].iloc[0] == "1" and frame["name"].iloc[-1] == "20000"
    assert frame["seq"].iloc[0].startswith("TTAATTTTGTGTGTTGGGCATTTGG")
    assert "qual" not in frame.columns


# --------------------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------------------

def _int32(values: list[int | None]) -> pd.arrays.IntegerArray:
    return pd.array(values, dtype="Int32")


@pytest.fixture
def results() -> pd.DataFrame:
    """Hand-made aligner output over `queries` (readA/B/C) x `targets` (chr1..chr4).

    row 0: readA[1:9) vs chr1[3:11), local, both query ends unaligned
    row 1: null row (null input), the only row naming chr4
    row 2: readB vs chr2[1:7) with a 1-residue deletion
    row 3: readC vs all of chr3, global, deletions at both ends and one insertion
    row 4: an empty alignment (no aligned column)
    row 5: row 0 with soft clips stored in the CIGAR
    row 6: row 0 in classic M style
    """
    n = None
    return pd.DataFrame({
        "query": [0, 2, 1, 2, 1, 0, 0],
        "target": [0, 3, 1, 2, 0, 0, 0],
        "score": _int32([11, n, 5, -3, 0, 11, 11]),
        "query_start": _int32([1, n, 0, 0, 0, 1, 1]),
        "query_end": _int32([9, n, 5, 7, 0, 9, 9]),
        "target_start": _int32([3, n, 1, 0, 0, 3, 3]),
        "target_end": _int32([11, n, 7, 10, 0, 11, 11]),
        "cigar": pd.array(["3=1X4=", n, "2=1D3=", "2D3=1I3=2D", "", "1S3=1X4=1S", "8M"],
                          dtype="str"),
        "matches": _int32([7, n, 5, 6, 0, 7, 7]),
        "mismatches": _int32([1, n, 0, 0, 0, 1, 1]),
        "gap_opens": _int32([0, n, 1, 3, 0, 0, 0]),
        "gaps": _int32([0, n, 1, 5, 0, 0, 0]),
        "length": _int32([8, n, 6, 12, 0, 8, 8]),
        "identity": pd.array([0.875, n, 5 / 6, 0.5, 0.0, 0.875, 0.875], dtype="Float64"),
    })


@pytest.mark.parametrize(
    ("path", "fmt"),
    [("a.tsv", "tsv"), ("a.TSV.gz", "tsv"), ("d/a.parquet", "parquet"), ("a.sam", "sam"),
     ("a.paf", "paf"), ("a.paf.gz", "paf"), ("a.blast6", "blast6"), ("a.m8", "blast6")],
)
def test_format_from_path(path: str, fmt: str) -> None:
    assert format_from_path(path) == fmt
    assert format_from_path(Path(path)) == fmt


@pytest.mark.parametrize("path", ["a.csv", "a.parquet.gz", "a", "a.gz", "sam"])
def test_format_from_path_unknown_lists_supported(path: str) -> None:
    with pytest.raises(ValueError, match=r"\.tsv.*\.parquet.*\.sam.*\.paf.*\.blast6.*\.m8"):
        format_from_path(path)


def test_write_unknown_format(tmp_path, results, queries, targets) -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        write_results(results, tmp_path / "x.out", "bam", queries=queries, targets=targets)
    with pytest.raises(ValueError, match="supported extensions"):
        write_results(results, tmp_path / "x.out", queries=queries, targets=targets)


def _split(text: str) -> list[list[str]]:
    assert text.endswith("\n")
    return [line.split("\t") for line in text[:-1].split("\n")]


@pytest.mark.parametrize("name", ["r.tsv", "r.tsv.gz"])
def test_write_tsv(tmp_path, results, queries, targets, name) -> None:
    path = tmp_path / name
    write_results(results, path, queries=queries, targets=targets)
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    rows = _split(_read_text(path))
    header = rows[0]
    expected_columns = list(results.columns)
    expected_columns.insert(1, "query_name")
    expected_columns.insert(3, "target_name")
    assert header == expected_columns
    assert len(rows) == 1 + len(results)
    assert all(len(row) == len(header) for row in rows)
    records = [dict(zip(header, row, strict=True)) for row in rows[1:]]
    assert [r["query_name"] for r in records] == ["readA", "readC", "readB", "readC", "readB",
                                                  "readA", "readA"]
    assert [r["target_name"] for r in records] == ["chr1", "chr4", "chr2", "chr3", "chr1",
                                                   "chr1", "chr1"]
    first = records[0]
    assert (first["query"], first["target"], first["score"]) == ("0", "0", "11")
    assert (first["query_start"], first["query_end"]) == ("1", "9")
    assert (first["target_start"], first["target_end"]) == ("3", "11")
    assert first["cigar"] == "3=1X4="
    assert float(first["identity"]) == 0.875
    assert float(records[2]["identity"]) == pytest.approx(5 / 6, abs=1e-15)
    null = records[1]
    assert (null["query"], null["target"]) == ("2", "3")
    assert all(null[c] == "" for c in header if c not in ("query", "query_name", "target",
                                                          "target_name"))
    assert records[4]["cigar"] == "" and records[4]["score"] == "0"


def test_write_tsv_score_only(tmp_path, results, queries, targets) -> None:
    score_only = results[["query", "target", "score", "query_end", "target_end"]]
    path = tmp_path / "s.tsv"
    write_results(score_only, path, queries=queries, targets=targets)
    rows = _split(path.read_text())
    assert rows[0] == ["query", "query_name", "target", "target_name", "score", "query_end",
                       "target_end"]
    assert rows[1] == ["0", "readA", "0", "chr1", "11", "9", "11"]
    assert rows[2] == ["2", "readC", "3", "chr4", "", "", ""]


def test_write_parquet_round_trip(tmp_path, results, queries, targets) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "r.parquet"
    write_results(results, path, queries=queries, targets=targets, mode="local")
    back = pd.read_parquet(path)
    expected = results.copy()
    expected.insert(1, "query_name", queries["name"].loc[results["query"]].to_numpy())
    expected.insert(3, "target_name", targets["name"].loc[results["target"]].to_numpy())
    expected["query_name"] = expected["query_name"].astype(back["query_name"].dtype)
    expected["target_name"] = expected["target_name"].astype(back["target_name"].dtype)
    pd.testing.assert_frame_equal(back, expected)
    assert str(back["score"].dtype) == "Int32" and back["score"].isna().tolist()[1]
    assert pq.read_schema(path).metadata[b"gpualign_df.mode"] == b"sw"


def _cigar_ops(cigar: str) -> list[tuple[int, str]]:
    ops = re.findall(r"(\d+)([MIDNSHP=X])", cigar)
    assert "".join(n + op for n, op in ops) == cigar, cigar
    return [(int(n), op) for n, op in ops]


def _query_length(cigar: str) -> int:
    return sum(n for n, op in _cigar_ops(cigar) if op in "MIS=X")


def _reference_length(cigar: str) -> int:
    return sum(n for n, op in _cigar_ops(cigar) if op in "MDN=X")


def test_write_sam(tmp_path, results, queries, targets) -> None:
    path = tmp_path / "r.sam"
    write_results(results, path, queries=queries, targets=targets, mode="nw")
    lines = path.read_text().splitlines()
    header = [line for line in lines if line.startswith("@")]
    body = [line.split("\t") for line in lines if not line.startswith("@")]
    assert header[0] == "@HD\tVN:1.6\tSO:unsorted"
    # every target of the targets frame, in its order, also chr4 that no record names
    assert header[1:5] == ["@SQ\tSN:chr1\tLN:14", "@SQ\tSN:chr2\tLN:10", "@SQ\tSN:chr3\tLN:10",
                           "@SQ\tSN:chr4\tLN:4"]
    assert header[5].startswith("@PG\tID:gpualign\tPN:gpualign")
    assert len(header) == 6
    assert len(body) == len(results)
    assert all(len(rec) >= 11 for rec in body)

    r0, r1, r2, r3, r4, r5, r6 = body
    assert r0 == ["readA", "0", "chr1", "4", "255", "1S3=1X4=1S", "*", "0", "0",
                  "ACGTACGTAA", "ABCDEFGHIJ", "AS:i:11", "NM:i:1"]
    assert r1 == ["readC", "4", "*", "0", "0", "*", "*", "0", "0", "GGAATCC", "FFFFFFF"]
    assert r2 == ["readB", "0", "chr2", "2", "255", "2=1D3=", "*", "0", "0", "TTGCA", "!!#$%",
                  "AS:i:5", "NM:i:1"]
    # global alignment 2D3=1I3=2D: end deletions become a POS shift, NM keeps the insertion
    assert r3[:6] == ["readC", "0", "chr3", "3", "255", "3=1I3="]
    assert r3[11:] == ["AS:i:-3", "NM:i:1"]
    assert r4[:6] == ["readB", "4", "*", "0", "0", "*"] and len(r4) == 11
    # rows 5 and 6 are one run of readA with equal scores: the first is primary with
    # MAPQ 0 (s2 >= s1), the second secondary without SEQ/QUAL; soft clips already in
    # the CIGAR are not added twice
    assert r5[:6] == ["readA", "0", "chr1", "4", "0", "1S3=1X4=1S"] and r5[6:] == r0[6:]
    assert r6[:6] == ["readA", "256", "chr1", "4", "0", "1S8M1S"]
    assert r6[9:11] == ["*", "*"]

    sequences = dict(zip(targets["name"], targets["seq"], strict=True))
    for rec in body:
        flag, cigar, seq = int(rec[1]), rec[5], rec[9]
        if flag & 4:
            continue
        assert _query_length(cigar) == (len(queries["seq"][queries["name"] == rec[0]].iloc[0]))
        if not flag & 256:
            assert _query_length(cigar) == len(seq) == len(rec[10])
        ops = _cigar_ops(cigar)
        assert ops[0][1] != "D" and ops[-1][1] != "D"
        # the reference span of the record stays inside the reference
        pos = int(rec[3])
        assert 1 <= pos and pos - 1 + _reference_length(cigar) <= len(sequences[rec[2]])
    # re-derive the aligned query residues of row 0 from POS and the clips: they match
    clip = _cigar_ops(r0[5])[0][0]
    assert r0[9][clip:clip + 3] == sequences["chr1"][int(r0[3]) - 1:int(r0[3]) + 2]


def test_write_sam_fasta_queries_have_no_qual(tmp_path, results, targets) -> None:
    queries = read_sequences(_write(tmp_path / "q.fa", ">readA\nACGTACGTAA\n>readB\nTTGCA\n"
                                                       ">readC\nGGAATCC\n"))
    path = tmp_path / "q.sam"
    write_results(results, path, queries=queries, targets=targets)
    body = [line.split("\t") for line in path.read_text().splitlines() if line[0] != "@"]
    assert [rec[10] for rec in body] == ["*"] * len(results)


def test_write_sam_needs_traceback(tmp_path, results, queries, targets) -> None:
    score_only = results[["query", "target", "score", "query_end", "target_end"]]
    for name in ("r.sam", "r.paf", "r.m8"):
        with pytest.raises(ValueError, match="traceback"):
            write_results(score_only, tmp_path / name, queries=queries, targets=targets)


def test_write_paf(tmp_path, results, queries, targets) -> None:
    path = tmp_path / "r.paf"
    write_results(results, path, queries=queries, targets=targets)
    rows = _split(path.read_text())
    # the null row and the empty alignment have no PAF record
    assert len(rows) == 5
    assert all(len(row) == 14 for row in rows)
    assert rows[0] == ["readA", "10", "1", "9", "+", "chr1", "14", "3", "11", "7", "8", "255",
                       "AS:i:11", "cg:Z:3=1X4="]
    assert rows[1] == ["readB", "5", "0", "5", "+", "chr2", "10", "1", "7", "5", "6", "255",
                       "AS:i:5", "cg:Z:2=1D3="]
    assert rows[2] == ["readC", "7", "0", "7", "+", "chr3", "10", "0", "10", "6", "12", "255",
                       "AS:i:-3", "cg:Z:2D3=1I3=2D"]
    assert rows[3] == rows[0]  # soft clips are stripped from cg
    assert rows[4][-1] == "cg:Z:8M"
    for row in rows:
        cigar = row[13][len("cg:Z:"):]
        assert _query_length(cigar) == int(row[3]) - int(row[2])
        assert _reference_length(cigar) == int(row[8]) - int(row[7])


def test_write_blast6(tmp_path, results, queries, targets) -> None:
    path = tmp_path / "r.blast6"
    write_results(results, path, queries=queries, targets=targets)
    rows = _split(path.read_text())
    assert len(rows) == 5
    assert all(len(row) == 12 for row in rows)
    # no scoring given: no statistics behind evalue and bitscore
    assert rows[0] == ["readA", "chr1", "87.500", "8", "1", "0", "2", "9", "4", "11", "NA",
                       "NA"]
    assert rows[1] == ["readB", "chr2", "83.333", "6", "0", "1", "1", "5", "2", "7", "NA", "NA"]
    assert rows[2] == ["readC", "chr3", "50.000", "12", "0", "3", "1", "7", "1", "10", "NA",
                       "NA"]
    # 1-based inclusive coordinates span exactly the aligned residues
    seqs = dict(zip(queries["name"], queries["seq"], strict=True))
    refs = dict(zip(targets["name"], targets["seq"], strict=True))
    assert seqs["readB"][int(rows[1][6]) - 1:int(rows[1][7])] == "TTGCA"
    assert refs["chr2"][int(rows[1][8]) - 1:int(rows[1][9])] == "TTTGCA"


def test_blast6_pident_matches_printf(tmp_path, queries, targets) -> None:
    identities = [2 / 3, 1 / 3, 0.99995, 0.123456, 1.0, 0.0005]
    n = len(identities)
    frame = pd.DataFrame({
        "query": [0] * n, "target": [0] * n, "score": _int32([1] * n),
        "query_start": _int32([0] * n), "query_end": _int32([1] * n),
        "target_start": _int32([0] * n), "target_end": _int32([1] * n),
        "cigar": ["1="] * n, "matches": _int32([1] * n), "mismatches": _int32([0] * n),
        "gap_opens": _int32([0] * n), "gaps": _int32([0] * n), "length": _int32([1] * n),
        "identity": pd.array(identities, dtype="Float64"),
    })
    path = tmp_path / "p.m8"
    write_results(frame, path, queries=queries, targets=targets)
    got = [row[2] for row in _split(path.read_text())]
    assert got == ["%.3f" % (100 * x) for x in identities]


def test_write_compressed_paf_and_explicit_format(tmp_path, results, queries, targets) -> None:
    plain, packed, odd = tmp_path / "a.paf", tmp_path / "a.paf.gz", tmp_path / "hits.txt"
    write_results(results, plain, queries=queries, targets=targets)
    write_results(results, packed, queries=queries, targets=targets)
    write_results(results, odd, "paf", queries=queries, targets=targets)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    assert _read_text(packed) == plain.read_text() == odd.read_text()


def test_write_rejects_labels_not_in_frames(tmp_path, results, queries, targets) -> None:
    bad = results.copy()
    bad.loc[0, "query"] = 99
    with pytest.raises(ValueError, match="99"):
        write_results(bad, tmp_path / "r.tsv", queries=queries, targets=targets)


def test_write_rejects_wrong_sequences(tmp_path, results, queries, targets) -> None:
    short = queries.assign(seq=queries["seq"].str[:3])
    labelled = results.set_axis(range(10, 10 + len(results)))
    for name in ("r.sam", "r.paf"):
        with pytest.raises(ValueError, match=r"query_end 9 exceeds the query length 3 at "
                                             r"result row 10 \(query 0, target 0\)"):
            write_results(labelled, tmp_path / name, queries=short, targets=targets)


def test_write_rejects_tabs_in_fields_naming_the_row(tmp_path, results, queries,
                                                     targets) -> None:
    bad = results.set_axis(range(10, 10 + len(results)))
    bad["cigar"] = bad["cigar"].astype(object)
    bad.loc[12, "cigar"] = "2=\t1D3="
    for name in ("r.sam", "r.tsv"):
        with pytest.raises(ValueError, match=r"'cigar' field of result row 12 \(query 1, "
                                             r"target 1\) contains a tab"):
            write_results(bad, tmp_path / name, queries=queries, targets=targets)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queries.fq", "targets.fa"]


def test_write_rejects_unknown_mode(tmp_path, results, queries, targets) -> None:
    with pytest.raises(ValueError, match="mode"):
        write_results(results, tmp_path / "r.sam", queries=queries, targets=targets,
                      mode="banded")


@pytest.mark.parametrize("name", ["b.sam", "b.paf", "b.m8", "b.tsv", "b.tsv.gz"])
def test_write_many_rows_in_blocks(tmp_path, results, queries, targets, name) -> None:
    """Writing in blocks of 3 rows gives the bytes of one block: blocks split query runs
    (SAM's primary choice) and gzip members nowhere."""
    from gpualign_df import config

    big = pd.concat([results] * 5, ignore_index=True)
    (tmp_path / "whole").mkdir()
    whole = tmp_path / "whole" / name  # the same name: gzip's header holds it
    write_results(big, whole, queries=queries, targets=targets)
    blocks = tmp_path / name
    with config.override(write_chunk_rows=3):
        write_results(big, blocks, queries=queries, targets=targets)
    assert blocks.read_bytes() == whole.read_bytes()
    text = _read_text(blocks)
    lines = [ln for ln in text.splitlines() if not ln.startswith("@")]
    per_copy = {"b.sam": 7, "b.tsv": 7, "b.tsv.gz": 7}.get(name, 5)
    assert len(lines) == 5 * per_copy + (1 if ".tsv" in name else 0)
