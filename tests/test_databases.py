"""Prepared search databases: a search of a Database gives the frame of a search of the
Series it was made from, on every engine and entry point; saved and read back unchanged;
wrong uses refused before any work."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import databases
from helpers import random_sequences

LETTERS = "ARNDCQEGHILKMFPSTWYV"
PROTEIN = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1)
DNA = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1)


def protein_job(seed: int = 3):
    rng = np.random.default_rng(seed)
    queries = pd.Series(random_sequences(rng, 6, LETTERS, 40, 20) + [None, ""],
                        index=[f"q{k}" for k in range(8)])
    targets = random_sequences(rng, 30, LETTERS + "BX", 60) + [None, ""]
    targets[4] = queries.iloc[2]   # a true hit
    database = pd.Series(targets, index=pd.Index(np.arange(100, 132), name="id"))
    return queries, database


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
@pytest.mark.parametrize("top_k", [None, 3])
def test_search_of_a_database_equals_search_of_its_series(mode, top_k):
    queries, series = protein_job()
    prepared = gpualign_df.database(series, matrix="BLOSUM62")
    options = dict(how="search", mode=mode, top_k=top_k, backend="cpu", **PROTEIN)
    expected = gpualign_df.align(queries, series, **options)
    got = gpualign_df.align(queries, prepared, **options)
    pd.testing.assert_frame_equal(got, expected)
    again = queries.aln.search(prepared, top_k=top_k, mode=mode, backend="cpu", **PROTEIN)
    pd.testing.assert_frame_equal(again, expected)
    if top_k:   # the hit is found, under its label
        assert got.loc[got["query"] == "q2", "target"].iloc[0] == 104


def test_align_batches_take_a_database(settings):
    queries, series = protein_job(4)
    prepared = gpualign_df.database(series, matrix="BLOSUM62")
    settings(stream_batch_pairs=40)
    frames = list(gpualign_df.align_batches(queries, prepared, how="search", top_k=2,
                                            backend="cpu", **PROTEIN))
    assert len(frames) > 1
    whole = gpualign_df.align(queries, series, how="search", top_k=2, backend="cpu", **PROTEIN)
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), whole)


def test_saved_database_reads_back_the_same(tmp_path):
    queries, series = protein_job(5)
    prepared = gpualign_df.database(series, matrix="BLOSUM62")
    path = tmp_path / "db.parquet"
    prepared.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["db.parquet"]   # nothing left aside
    read = gpualign_df.read_database(path)
    assert read.alphabet == prepared.alphabet and read.scoring_name == "BLOSUM62"
    assert np.array_equal(read.sequences.codes, prepared.sequences.codes)
    assert np.array_equal(read.sequences.offsets, prepared.sequences.offsets)
    assert read.sequences.valid.tolist() == series.notna().tolist()
    pd.testing.assert_index_equal(read.labels, series.index)
    options = dict(how="search", top_k=4, backend="cpu", **PROTEIN)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, read, **options),
                                  gpualign_df.align(queries, series, **options))


def test_a_file_that_is_no_database_is_refused(tmp_path):
    path = tmp_path / "plain.parquet"
    pd.DataFrame({"sequence": ["ACGT"]}).to_parquet(path)
    with pytest.raises(ValueError, match="not a gpualign_df database"):
        gpualign_df.read_database(path)


def test_a_failed_save_leaves_no_file(tmp_path, monkeypatch):
    prepared = gpualign_df.database(["ACGT"], match=1, mismatch=-1)

    def broken(table, where, **kwargs):
        open(where, "wb").write(b"PAR1 half")
        raise OSError("disk full")

    monkeypatch.setattr(databases.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        prepared.save(tmp_path / "db.parquet")
    assert list(tmp_path.iterdir()) == []


def test_wrong_uses_are_refused_before_any_work():
    prepared = gpualign_df.database(["ACGTAC", "GGCA"], match=1, mismatch=-1)
    with pytest.raises(ValueError, match="prepared for match/mismatch.*BLOSUM62"):
        gpualign_df.align(["MKV"], prepared, how="search", backend="cpu", **PROTEIN)
    with pytest.raises(ValueError, match="how='search' only"):
        gpualign_df.align(["ACGT", "ACGT"], prepared, how="rowwise", backend="cpu")
    with pytest.raises(TypeError, match="targets of how='search'"):
        gpualign_df.align(prepared, ["ACGT"], how="search", backend="cpu")
    with pytest.raises(ValueError, match="position 2"):
        gpualign_df.database(["ACJT"], match=1, mismatch=-1)
    with pytest.raises(TypeError, match="not one string"):
        gpualign_df.database("ACGT", match=1, mismatch=-1)


def test_a_pickled_database_keeps_its_name_and_leaves_its_kept_data():
    prepared = gpualign_df.database(["ACGT", None], match=1, mismatch=-1)
    prepared.sequences.keep["anything"] = object()
    copy = pickle.loads(pickle.dumps(prepared))
    assert copy.token == prepared.token and copy.sequences.keep == {}
    assert np.array_equal(copy.sequences.codes, prepared.sequences.codes)


def test_dask_search_of_a_database_equals_in_memory():
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(8)
    series = pd.Series(random_sequences(rng, 50, "ACGT", 70, 10) + [None],
                       index=[f"t{k}" for k in range(51)])
    queries = pd.Series(random_sequences(rng, 11, "ACGT", 50, 5), index=np.arange(11) * 3)
    prepared = gpualign_df.database(series, match=1, mismatch=-4)
    for top_k in (None, 4):
        options = dict(top_k=top_k, backend="cpu", **DNA)
        expected = queries.aln.search(series, **options)
        got = dd.from_pandas(queries, npartitions=3, sort=False).aln.search(
            prepared, cells_per_task=2e4, **options).compute()
        pd.testing.assert_frame_equal(got.reset_index(drop=True), expected)
    with pytest.raises(ValueError, match="broadcast=False"):
        dd.from_pandas(queries, npartitions=2).aln.search(prepared, broadcast=False,
                                                          backend="cpu", **DNA)


def test_gpu_search_keeps_the_database_on_the_device(settings):
    """On the GPU (the simulator in CI) a database's first search copies it to the device
    and lays out its length classes; the next search of other queries uses both and keeps
    the CPU engine's hits."""
    from gpualign_df.gpu import buffers, gpu_usable
    from gpualign_df.kernels import simulator

    if not (simulator() or gpu_usable()):
        pytest.skip("needs the CUDA simulator or a GPU")
    settings(search_16bit=True, search_groups=((4, 3), (8, 4)))
    rng = np.random.default_rng(6)
    queries = pd.Series(random_sequences(rng, 2, LETTERS, 10, 6), index=["q0", "q1"])
    series = pd.Series(random_sequences(rng, 9, LETTERS, 20) + [None, queries["q1"]])
    prepared = gpualign_df.database(series, matrix="BLOSUM62")
    options = dict(how="search", top_k=2, **PROTEIN)
    kept = []
    for part in (queries.iloc[:1], queries.iloc[1:]):
        got = gpualign_df.align(part, prepared, backend="cuda", **options)
        pd.testing.assert_frame_equal(
            got, gpualign_df.align(part, series, backend="cpu", **options))
        kept.append(dict(prepared.sequences.keep))
        uploads = [key for key in kept[-1] if key[0] == "upload"]
        assert len(uploads) == 1 and any(key[0] == "classes" for key in kept[-1])
    assert got["target"].iloc[0] == 10   # q1's own copy
    # the second search made nothing new but the device tables of its queries' letters
    # (each search's letters keep theirs, for the next search of the same letters)
    assert [key for key in kept[1] if key not in kept[0]] == [
        key for key in kept[1] if key[0] == "group_tables" and key not in kept[0]]
    assert all(kept[1][key] is kept[0][key] for key in kept[0])
    assert sum(key[0] == "group_tables" for key in kept[1]) <= 2
    assert isinstance(kept[0][uploads[0]], buffers.DeviceSequences)
