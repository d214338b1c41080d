"""Tests of gpualign_df.io's output path: atomic writes and the streaming writer.

Atomicity: an output appears at its path complete or not at all; a failure at any point
(validation, a write, the commit, Ctrl-C) leaves an existing output byte for byte as it was
and no temporary file behind; devices and FIFOs are written in place, never replaced.
Streaming: several ``write()`` calls give the file one ``write_results`` of their
concatenation gives.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from gpualign_df import align
from gpualign_df.io import ResultWriter, open_results, write_results
from gpualign_df.io import parquet as io_parquet
from gpualign_df.io import text as io_text

QUERIES = pd.DataFrame({
    "name": ["q1", "q2", "q3", "q4"],
    "seq": ["ACGTACGTTT", "TTGCAGG", "GGGCCCAAAT", "CATCAT"],
    "qual": ["IIIIIIIIII", "#######", "!!!!!!!!!!", "ABCDEF"],
})
TARGETS = pd.DataFrame({
    "name": ["t1", "t2", "t3", "t4", "t5"],
    "seq": ["TTACGTACGTTTAA", "CCTTGCAGGCC", "GGGCCCAAATG", "ACGTAC", "CATCATCAT"],
})
SCORING = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2)
OLD = b"the previous output\n"
FORMATS = ["r.tsv", "r.tsv.gz", "r.parquet", "r.sam", "r.sam.gz", "r.paf", "r.m8"]


@pytest.fixture(scope="module")
def hits() -> pd.DataFrame:
    """A top-3 search: each query's rows consecutive, best first."""
    return align(QUERIES["seq"], TARGETS["seq"], how="search", top_k=3, **SCORING)


def _leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name not in keep)


def _content(path: Path) -> bytes:
    """The output's content: decompressed for gzip, the table for Parquet."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        return repr((table.schema, table.to_pydict())).encode()
    return data


# --------------------------------------------------------------------------------------
# atomic writes
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["r.tsv", "r.tsv.gz", "r.sam", "r.paf", "r.m8"])
@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"),
                                     KeyboardInterrupt()], ids=["disk-full", "ctrl-c"])
def test_failure_mid_write_keeps_the_old_output(tmp_path, hits, monkeypatch, settings, name,
                                                failure) -> None:
    """The second block of lines fails: the old output is intact, nothing is left over."""
    path = tmp_path / name
    path.write_bytes(OLD)
    settings(write_chunk_rows=2)
    real = io_text.write_lines
    calls = []

    def failing(fh, lines):
        calls.append(len(lines))
        if len(calls) == 2:
            raise failure
        real(fh, lines)

    monkeypatch.setattr(io_text, "write_lines", failing)
    with pytest.raises(type(failure)):
        write_results(hits, path, queries=QUERIES, targets=TARGETS)
    assert len(calls) == 2
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, {name}) == []


def test_parquet_failure_in_a_later_row_group_keeps_the_old_output(tmp_path, hits,
                                                                   monkeypatch) -> None:
    path = tmp_path / "r.parquet"
    path.write_bytes(OLD)
    real = io_parquet.write_row_group
    calls = []

    def failing(writer, table):
        calls.append(table.num_rows)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(writer, table)

    monkeypatch.setattr(io_parquet, "write_row_group", failing)
    with pytest.raises(OSError, match="r.parquet.*No space left"):
        with open_results(path, queries=QUERIES, targets=TARGETS) as writer:
            writer.write(hits.iloc[:3])
            writer.write(hits.iloc[3:])
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, {"r.parquet"}) == []


@pytest.mark.parametrize("name", FORMATS)
def test_failure_at_the_commit_keeps_the_old_output(tmp_path, hits, monkeypatch,
                                                    name) -> None:
    """The data reaches the disk (fsync) before the rename; if that fails, no rename."""
    path = tmp_path / name
    path.write_bytes(OLD)

    def failing_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match=rf"{name}.*Input/output error"):
        write_results(hits, path, queries=QUERIES, targets=TARGETS)
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, {name}) == []


@pytest.mark.parametrize("name", FORMATS)
def test_failed_validation_leaves_the_old_output_and_creates_nothing(tmp_path, hits,
                                                                     name) -> None:
    path = tmp_path / name
    path.write_bytes(OLD)
    bad = hits.copy()
    bad.loc[len(bad) - 1, "target"] = 99  # a label the targets frame lacks, in the last row
    with pytest.raises(ValueError, match="99"):
        write_results(bad, path, queries=QUERIES, targets=TARGETS)
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, {name}) == []
    missing = tmp_path / ("new-" + name)
    with pytest.raises(ValueError, match="99"):
        write_results(bad, missing, queries=QUERIES, targets=TARGETS)
    assert _leftovers(tmp_path, {name}) == []


def test_output_goes_through_a_temporary_file_beside_the_target(tmp_path, hits,
                                                                monkeypatch) -> None:
    path = tmp_path / "r.tsv"
    path.write_bytes(OLD)
    seen = []
    real = io_text.write_lines

    def watching(fh, lines):
        seen.append((_leftovers(tmp_path, {"r.tsv"}), path.read_bytes()))
        real(fh, lines)

    monkeypatch.setattr(io_text, "write_lines", watching)
    write_results(hits, path, queries=QUERIES, targets=TARGETS)
    (others, target_then), = seen
    # while writing: the target is still the old file, the rows go to .r.tsv.<random>.part
    assert target_then == OLD
    assert len(others) == 1 and others[0].startswith(".r.tsv.") and others[0].endswith(".part")
    assert path.read_bytes() != OLD and _leftovers(tmp_path, {"r.tsv"}) == []


def test_replacing_keeps_permissions_and_follows_a_symlink(tmp_path, hits) -> None:
    real = tmp_path / "data" / "r.paf"
    real.parent.mkdir()
    real.write_bytes(OLD)
    real.chmod(0o640)
    link = tmp_path / "link.paf"
    link.symlink_to(real)
    write_results(hits, link, queries=QUERIES, targets=TARGETS)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith("q1\t")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_refuses_a_directory_and_a_missing_directory(tmp_path, hits) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        write_results(hits, tmp_path, "tsv", queries=QUERIES, targets=TARGETS)
    with pytest.raises(ValueError, match="does not exist"):
        write_results(hits, tmp_path / "nope" / "r.tsv", queries=QUERIES, targets=TARGETS)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["r.tsv", "r.sam", "r.parquet"])
def test_writing_to_dev_full_raises_and_keeps_the_device(name, hits) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    if name.endswith(".parquet") and os.geteuid() == 0:
        pytest.skip("as root, the Parquet case runs on a private device node "
                    "(test_parquet_to_a_full_device_keeps_the_node)")
    fmt = name.split(".")[1]
    with pytest.raises(OSError, match=r"/dev/full.*No space left on device"):
        write_results(hits, "/dev/full", fmt, queries=QUERIES, targets=TARGETS)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_parquet_to_a_full_device_keeps_the_node(tmp_path, hits) -> None:
    """pyarrow's write_table deletes its path on failure: as root that removed /dev/full.
    This runs on a private node with /dev/full's numbers, so the real one is never at risk."""
    if os.geteuid() != 0 or not os.path.exists("/dev/full"):
        pytest.skip("needs root (mknod) and /dev/full")
    node = tmp_path / "full"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.stat("/dev/full").st_rdev)
    try:
        open(node, "wb").close()
    except OSError:
        pytest.skip("device nodes cannot be opened on this file system (nodev)")
    with pytest.raises(OSError, match=r"full.*No space left on device"):
        write_results(hits, node, "parquet", queries=QUERIES, targets=TARGETS)
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert _leftovers(tmp_path, {"full"}) == []


def test_a_fifo_is_written_in_place(tmp_path, hits) -> None:
    """A FIFO (as /dev/stdout in a pipe) streams: same bytes as a file, still a FIFO."""
    plain = tmp_path / "plain.sam"
    write_results(hits, plain, queries=QUERIES, targets=TARGETS)
    fifo = tmp_path / "pipe.sam"
    os.mkfifo(fifo)
    received = bytearray()

    def drain():
        with open(fifo, "rb") as fh:
            received.extend(fh.read())

    reader = threading.Thread(target=drain)
    reader.start()
    write_results(hits, fifo, queries=QUERIES, targets=TARGETS)
    reader.join(timeout=30)
    assert bytes(received) == plain.read_bytes()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _leftovers(tmp_path, {"plain.sam", "pipe.sam"}) == []


# --------------------------------------------------------------------------------------
# the streaming writer
# --------------------------------------------------------------------------------------

def _query_boundaries(frame: pd.DataFrame) -> list[int]:
    labels = frame["query"].to_numpy()
    return [i for i in range(1, len(frame)) if labels[i] != labels[i - 1]]


@pytest.mark.parametrize("name", FORMATS + ["r.blast6.gz"])
def test_batches_give_the_file_of_one_write(tmp_path, hits, name) -> None:
    """Frames split between two queries' rows, one empty frame among them."""
    cuts = _query_boundaries(hits)
    assert len(cuts) == 3
    pieces = [hits.iloc[:cuts[0]], hits.iloc[cuts[0]:cuts[0]], hits.iloc[cuts[0]:cuts[2]],
              hits.iloc[cuts[2]:]]
    (tmp_path / "one").mkdir()
    whole = tmp_path / "one" / name
    write_results(pd.concat(pieces), whole, queries=QUERIES, targets=TARGETS, mode="nw")
    streamed = tmp_path / name
    with open_results(streamed, queries=QUERIES, targets=TARGETS, mode="nw") as writer:
        assert isinstance(writer, ResultWriter)
        for piece in pieces:
            writer.write(piece)
    assert writer.rows_written == len(hits)
    assert _content(streamed) == _content(whole)
    if not name.endswith(".parquet"):
        assert streamed.read_bytes() == whole.read_bytes()
    else:
        # one row group per non-empty write; the mode in the schema
        assert pq.ParquetFile(streamed).num_row_groups == 3
        assert pq.read_schema(streamed).metadata[b"gpualign_df.mode"] == b"nw"


def test_header_once_and_nothing_on_disk_before_the_first_write(tmp_path, hits) -> None:
    path = tmp_path / "r.sam"
    writer = open_results(path, queries=QUERIES, targets=TARGETS)
    assert os.listdir(tmp_path) == []
    with writer:
        writer.write(hits.iloc[:3])
        writer.write(hits.iloc[3:])
    lines = path.read_text().splitlines()
    assert sum(line.startswith("@HD") for line in lines) == 1
    assert sum(line.startswith("@PG") for line in lines) == 1
    assert sum(not line.startswith("@") for line in lines) == len(hits)
    tsv = tmp_path / "r.tsv"
    with open_results(tsv, queries=QUERIES, targets=TARGETS) as writer:
        writer.write(hits.iloc[:3])
        writer.write(hits.iloc[3:])
    assert tsv.read_text().count("query\tquery_name") == 1


def test_an_exception_in_the_block_discards(tmp_path, hits) -> None:
    path = tmp_path / "r.paf"
    path.write_bytes(OLD)
    with pytest.raises(RuntimeError, match="job failed"):
        with open_results(path, queries=QUERIES, targets=TARGETS) as writer:
            writer.write(hits.iloc[:3])
            raise RuntimeError("job failed")
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, {"r.paf"}) == []
    with pytest.raises(ValueError, match="discarded"):
        writer.write(hits)


def test_a_writer_dropped_unclosed_leaves_no_temporary_file(tmp_path, hits) -> None:
    import gc

    path = tmp_path / "r.tsv"
    path.write_bytes(OLD)
    writer = open_results(path, queries=QUERIES, targets=TARGETS)
    writer.write(hits)
    assert len(os.listdir(tmp_path)) == 2  # the target and the temporary file
    del writer
    gc.collect()
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, {"r.tsv"}) == []


def test_a_refused_frame_writes_nothing_and_the_writer_goes_on(tmp_path, hits) -> None:
    path = tmp_path / "r.tsv"
    bad = hits.iloc[3:].copy()
    bad.loc[bad.index[-1], "query"] = 42
    with open_results(path, queries=QUERIES, targets=TARGETS) as writer:
        writer.write(hits.iloc[:3])
        with pytest.raises(ValueError, match="42"):
            writer.write(bad)
        with pytest.raises(ValueError, match="same columns"):
            writer.write(hits.iloc[3:].drop(columns=["identity"]))
        writer.write(hits.iloc[3:])
    single = tmp_path / "single.tsv"
    write_results(hits, single, queries=QUERIES, targets=TARGETS)
    assert path.read_bytes() == single.read_bytes()


@pytest.mark.parametrize("name", ["r.parquet", "r.tsv"])
def test_an_empty_first_frame_fixes_no_wrong_types(tmp_path, hits, name) -> None:
    """An empty frame first (say, a batch with no hits), with object columns that pandas
    cannot type: the later frames still write, the same as one write of everything."""
    empty = pd.DataFrame({column: pd.Series([], dtype=object) for column in hits.columns})
    path = tmp_path / name
    with open_results(path, queries=QUERIES, targets=TARGETS) as writer:
        writer.write(empty)
        writer.write(hits.iloc[:3])
        writer.write(hits.iloc[3:])
    back = pd.read_parquet(path) if name.endswith(".parquet") else \
        pd.read_csv(path, sep="\t")
    assert back["query_name"].tolist() == QUERIES["name"].to_numpy()[hits["query"]].tolist()
    assert back["cigar"].tolist() == hits["cigar"].tolist()
    assert back["score"].astype(int).tolist() == hits["score"].astype(int).tolist()


def test_close_without_a_write_gives_an_empty_file_with_its_header(tmp_path) -> None:
    for name in ("r.sam", "r.tsv", "r.parquet", "r.paf"):
        open_results(tmp_path / name, queries=QUERIES, targets=TARGETS).close()
    assert (tmp_path / "r.sam").read_text().count("@SQ") == len(TARGETS)
    assert (tmp_path / "r.tsv").read_text().startswith("query\tquery_name\ttarget")
    assert len(pd.read_parquet(tmp_path / "r.parquet")) == 0
    assert (tmp_path / "r.paf").read_bytes() == b""


def test_mode_names_are_parse_modes(tmp_path, hits) -> None:
    """The one owner of mode names is gpualign_df.scoring.parse_mode ("semi-global" too)."""
    path = tmp_path / "r.parquet"
    write_results(hits, path, queries=QUERIES, targets=TARGETS, mode="semi-global")
    assert pq.read_schema(path).metadata[b"gpualign_df.mode"] == b"sg"
    with pytest.raises(ValueError, match="unknown mode"):
        open_results(path, queries=QUERIES, targets=TARGETS, mode="banded")


def test_rejects_bad_options_before_creating_anything(tmp_path, hits) -> None:
    path = tmp_path / "r.m8"
    with pytest.raises(ValueError, match="how"):
        open_results(path, queries=QUERIES, targets=TARGETS, how="allpairs")
    with pytest.raises(TypeError, match="Scoring"):
        open_results(path, queries=QUERIES, targets=TARGETS, scoring={"match": 2})
    with pytest.raises(ValueError, match="gzip"):
        open_results(tmp_path / "r.parquet.gz", "parquet", queries=QUERIES, targets=TARGETS)
    assert os.listdir(tmp_path) == []


def test_a_cudf_like_frame_is_converted(tmp_path, hits) -> None:
    class FakeCudf:
        def __init__(self, frame):
            self.frame = frame

        def to_pandas(self):
            return self.frame

    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    write_results(hits, a, queries=QUERIES, targets=TARGETS)
    with open_results(b, queries=FakeCudf(QUERIES), targets=FakeCudf(TARGETS)) as writer:
        writer.write(FakeCudf(hits))
    assert a.read_bytes() == b.read_bytes()
    assert np.array_equal(pd.read_csv(a, sep="\t")["score"], hits["score"].astype(int))
