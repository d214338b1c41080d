"""The pandas accessor ``.aln`` and ``gpualign_df.align``: job shapes, labels, nulls, bad
input, result columns and statistics, CIGAR styles, clipping, mode properties, options."""

from __future__ import annotations

import dataclasses

import re

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import gpu
from gpualign_df.accessor.series import SeriesAlignAccessor
from gpualign_df.scoring import make_scoring
from helpers import mutate, random_sequences, rescore

DNA = "ACGT"
OPTIONS = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2)
TRACEBACK_COLUMNS = ["query", "target", "score", "query_start", "query_end", "target_start",
                     "target_end", "cigar", "matches", "mismatches", "gap_opens", "gaps",
                     "length", "identity"]
SCORE_ONLY_COLUMNS = ["query", "target", "score", "query_end", "target_end"]
INT_COLUMNS = ["score", "query_start", "query_end", "target_start", "target_end", "matches",
               "mismatches", "gap_opens", "gaps", "length"]
RESULT_COLUMNS = TRACEBACK_COLUMNS[2:]
RUN = re.compile(r"(\d+)([=XIDMS])")
MODES = [("sw", None), ("nw", None), ("sg", None), ("sg", ("target_start", "target_end")),
         ("sg", ("query_start", "query_end")), ("sg", ("query_end",))]


def runs(cigar: str) -> list[tuple[int, str]]:
    parsed = [(int(count), op) for count, op in RUN.findall(cigar)]
    assert "".join(f"{count}{op}" for count, op in parsed) == cigar, cigar
    return parsed


def related(seed: int, count: int, max_length: int = 120, flank: int = 15):
    """(queries, targets): two thirds related (mutated, some flanked), one third unrelated."""
    rng = np.random.default_rng(seed)
    queries = random_sequences(rng, count, DNA, max_length, min_length=1)
    targets = []
    for k, query in enumerate(queries):
        if k % 3 == 0:
            targets.append(random_sequences(rng, 1, DNA, max_length, min_length=1)[0])
        else:
            target = mutate(rng, query, DNA, 0.06) or "A"
            if k % 2:
                ends = random_sequences(rng, 2, DNA, flank, min_length=1)
                target = ends[0] + target + ends[1]
            targets.append(target)
    return queries, targets


# --- rowwise ---------------------------------------------------------------------------------


def test_rowwise_keeps_input_order_and_string_labels():
    queries, targets = related(1, 40)
    query_index = [f"read{k:03d}" for k in range(40)][::-1]
    target_index = [f"mate{k}" for k in range(40)]
    q = pd.Series(queries, index=query_index)
    t = pd.Series(targets, index=target_index)
    frame = q.aln.rowwise(t, **OPTIONS)
    assert list(frame.columns) == TRACEBACK_COLUMNS
    assert frame["query"].tolist() == query_index
    assert frame["target"].tolist() == target_index
    assert isinstance(frame.index, pd.RangeIndex) and len(frame) == 40
    scoring = make_scoring(**OPTIONS)
    for row, query, target in zip(frame.itertuples(), queries, targets):
        assert rescore(query, target, row, scoring) == row.score
    # row k is the alignment of pair k alone
    for k in (0, 7, 39):
        single = gpualign_df.align([queries[k]], [targets[k]], **OPTIONS)
        assert frame.loc[k, RESULT_COLUMNS].tolist() == single.loc[0, RESULT_COLUMNS].tolist()


def test_rowwise_shuffled_integer_index_aligns_by_position():
    rng = np.random.default_rng(2)
    queries, targets = related(2, 30)
    q_index = rng.permutation(30) + 1000
    t_index = rng.permutation(30)
    q = pd.Series(queries, index=q_index)
    t = pd.Series(targets, index=t_index)
    frame = q.aln.rowwise(t, **OPTIONS)
    assert frame["query"].tolist() == q_index.tolist()
    assert frame["target"].tolist() == t_index.tolist()
    by_position = gpualign_df.align(queries, targets, **OPTIONS)
    pd.testing.assert_frame_equal(frame[RESULT_COLUMNS], by_position[RESULT_COLUMNS])


@pytest.mark.parametrize("null", [None, np.nan, pd.NA], ids=["None", "NaN", "NA"])
def test_rowwise_null_gives_null_row_and_keeps_others(null):
    queries, targets = related(3, 12)
    queries = list(queries)
    targets = list(targets)
    queries[2] = null
    targets[5] = null
    queries[9] = null
    targets[9] = null
    q = pd.Series(queries, index=[f"q{k}" for k in range(12)], dtype=object)
    t = pd.Series(targets, index=[f"t{k}" for k in range(12)], dtype=object)
    frame = q.aln.rowwise(t, **OPTIONS)
    assert len(frame) == 12
    assert frame["query"].tolist() == list(q.index)
    null_rows = [2, 5, 9]
    good_rows = [k for k in range(12) if k not in null_rows]
    assert frame.loc[null_rows, RESULT_COLUMNS].isna().all().all()
    assert frame.loc[good_rows, RESULT_COLUMNS].notna().all().all()
    alone = gpualign_df.align([queries[k] for k in good_rows], [targets[k] for k in good_rows],
                              **OPTIONS)
    pd.testing.assert_frame_equal(frame.loc[good_rows, RESULT_COLUMNS].reset_index(drop=True),
                                  alone[RESULT_COLUMNS])


def test_null_in_string_dtype_series_and_score_only():
    q = pd.Series(["ACGT", None, "AAAA"], dtype="string")
    t = pd.Series(["ACGT", "ACGT", None], dtype="string")
    frame = q.aln.rowwise(t, traceback=False, **OPTIONS)
    assert frame["score"].tolist()[0] == 8
    assert frame.loc[[1, 2], ["score", "query_end", "target_end"]].isna().all().all()


@pytest.mark.parametrize("mode,free_ends", MODES)
def test_empty_strings_are_valid(mode, free_ends):
    frame = gpualign_df.align(["", "ACG", "", "ACGT"], ["ACG", "", "", "ACGT"], mode=mode,
                              free_ends=free_ends, **OPTIONS)
    assert frame[RESULT_COLUMNS].notna().all().all()
    assert frame.loc[2, "score"] == 0 and frame.loc[2, "cigar"] == ""
    assert frame.loc[3, "score"] == 8 and frame.loc[3, "cigar"] == "4="
    if mode == "nw":
        assert frame["score"].tolist()[:2] == [-(5 + 2 * 2)] * 2
        assert frame["cigar"].tolist()[:2] == ["3D", "3I"]
    if mode == "sw":
        assert frame["score"].tolist()[:3] == [0, 0, 0]
        assert frame["length"].tolist()[:3] == [0, 0, 0]


def test_rowwise_mismatched_lengths_raise_before_work(no_work):
    with pytest.raises(ValueError, match="3 queries, 2 targets"):
        pd.Series(["A", "C", "G"]).aln.rowwise(pd.Series(["A", "C"]), **OPTIONS)
    with pytest.raises(ValueError):
        gpualign_df.align(["A"], ["A", "C"], how="rowwise")
    with pytest.raises(ValueError):
        gpualign_df.align(["A"], None, how="rowwise")


def test_lower_case_equals_upper_case():
    queries, targets = related(4, 40)
    for mode, free_ends in MODES:
        upper = gpualign_df.align(queries, targets, mode=mode, free_ends=free_ends, **OPTIONS)
        lower = gpualign_df.align([q.lower() for q in queries], [t.lower() for t in targets],
                                  mode=mode, free_ends=free_ends, **OPTIONS)
        mixed = gpualign_df.align([q.lower() if k % 2 else q for k, q in enumerate(queries)],
                                  targets, mode=mode, free_ends=free_ends, **OPTIONS)
        pd.testing.assert_frame_equal(upper, lower)
        pd.testing.assert_frame_equal(upper, mixed)


# --- bad input ----------------------------------------------------------------------------


def test_bad_character_names_label_position_and_character():
    q = pd.Series(["ACGT", "ACGTQ", "ACGT"], index=["r6", "r7", "r8"])
    with pytest.raises(ValueError) as info:
        q.aln.rowwise(pd.Series(["ACGT"] * 3), **OPTIONS)
    message = str(info.value)
    assert "'r7'" in message and "position 4" in message and "'Q'" in message


@pytest.mark.parametrize("job", ["rowwise-target", "search-database", "pairwise"])
def test_bad_character_in_any_input_is_reported(job):
    good = pd.Series(["ACGT", "AC"], index=["g0", "g1"])
    bad = pd.Series(["acgt", None, "acgtacgtz"], index=["b0", "b1", "b2"])
    with pytest.raises(ValueError) as info:
        if job == "rowwise-target":
            pd.Series(["A", "C", "G"], index=["x", "y", "z"]).aln.rowwise(bad, **OPTIONS)
        elif job == "search-database":
            good.aln.search(bad, **OPTIONS)
        else:
            bad.aln.pairwise(**OPTIONS)
    message = str(info.value)
    assert "'b2'" in message and "position 8" in message and "'z'" in message


def test_encoding_bounds_its_threads_and_finds_the_first_bad_byte_of_a_large_input():
    """Encoding runs on one thread per MiB, at most encode_max_threads and numba's count, and
    leaves numba's thread count alone, also when it raises; with several threads the first bad
    byte is still the one reported."""
    import numba

    from gpualign_df import encode

    threads = numba.get_num_threads()
    assert encode.encoding_threads(100) == 1
    tuning = gpualign_df.config.settings()
    assert encode.encoding_threads(3 * tuning.encode_bytes_per_thread) == min(threads, 3)
    assert encode.encoding_threads(1 << 30) == min(threads, tuning.encode_max_threads)
    scoring = make_scoring(**OPTIONS)
    rows = ["ACGT" * 2500] * 400                                 # 4 MB
    encoded = encode.encode_sequences(rows, scoring)
    assert numba.get_num_threads() == threads
    assert encoded.codes.tolist()[:8] == [0, 1, 2, 3, 0, 1, 2, 3] and len(encoded.codes) == 4e6
    rows[300] = "ACGTZ" + rows[300][5:]                           # bad bytes in two chunks:
    rows[100] = "ACGTACGQ" + rows[100][8:]                        # the earlier one is reported
    with pytest.raises(ValueError, match=r"row 100, position 7: character 'Q'"):
        encode.encode_sequences(rows, scoring)
    assert numba.get_num_threads() == threads


def test_encoding_keeps_its_largest_code_and_a_gpu_jobs_codes_buffer():
    """The encoder's running maximum is every piece's largest code (a subset keeps it as a
    bound), so an upload reads no code again; a GPU job encodes into ``codes_buffer``
    (pinned memory above the shared-upload size on a GPU), a CPU job into plain memory."""
    from gpualign_df import encode, engine
    from gpualign_df.gpu import buffers

    scoring = make_scoring(**OPTIONS)
    rows = ["ACGT" * 2500] * 300 + ["ACGTN"] + ["AC" * 50] * 99     # 3 MB, 4 pieces
    encoded = encode.encode_sequences(rows, scoring)
    assert encoded.largest_code == int(encoded.codes.max()) == 4
    assert encoded.subset(0, 2).largest_code == 4                  # a bound, not the max
    assert encode.encode_sequences(["AC", ""], scoring).largest_code == 1
    assert encode.encode_sequences([], scoring).largest_code == 0
    given = []
    allocate = lambda count: given.append(count) or np.empty(count, np.uint8)  # noqa: E731
    assert encode.encode_sequences(rows, scoring, allocate=allocate).codes.tolist()[:5] == [
        0, 1, 2, 3, 0] and given == [len(encoded.codes)]
    from gpualign_df.api import resolve_job

    job = resolve_job(["A"], ["A"], how="rowwise", mode="sw", matrix=None, match=1,
                      mismatch=-1, gap_open=2, gap_extend=1, free_ends=None, top_k=None,
                      traceback=True, cigar_style="=", clip=None, backend="cpu",
                      progress=None)
    assert engine.codes_allocator(job) is None
    assert engine.codes_allocator(dataclasses.replace(job, engine="cuda")) is \
        buffers.codes_buffer
    small = buffers.codes_buffer(buffers.SHARED_UPLOAD_BYTES)
    assert isinstance(small, np.ndarray) and small.dtype == np.uint8


def test_deferred_encoding_maps_when_the_codes_are_first_read():
    """``deferred``: the bytes are kept and mapped (into ``allocate``'s array) the first
    time the codes are read, to the eager encoding's codes and running maximum, or its
    error then; a GPU job's encoding is deferred, a CPU job's is not."""
    from gpualign_df import encode
    from gpualign_df.api import encode_job, resolve_job

    scoring = make_scoring(**OPTIONS)
    rows = pd.Series(["ACgt", None, "", "aun"], index=list("wxyz"))
    eager = encode.encode_sequences(rows, scoring)
    given = []
    allocate = lambda count: given.append(count) or np.empty(count, np.uint8)  # noqa: E731
    deferred = encode.encode_sequences(rows, scoring, allocate=allocate, deferred=True)
    assert deferred.unmapped and deferred.largest_code is None and given == []
    assert bytes(deferred.text) == b"ACgtaun"
    assert deferred.offsets.tolist() == eager.offsets.tolist()
    assert deferred.valid.tolist() == eager.valid.tolist()
    assert deferred.codes.tolist() == eager.codes.tolist() == [0, 1, 2, 3, 0, 3, 4]
    assert not deferred.unmapped and deferred.largest_code == eager.largest_code == 4
    assert given == [7] and deferred.codes is deferred.codes   # (mapped once)
    bad = encode.encode_sequences(["ACGT", "AC\u00e9GZ"], scoring, deferred=True)
    with pytest.raises(encode.InvalidResidueError, match=r"row 1, position 2: character"):
        bad.codes
    options = dict(how="rowwise", mode="sw", matrix=None, match=1, mismatch=-1, gap_open=2,
                   gap_extend=1, free_ends=None, top_k=None, traceback=True, cigar_style="=",
                   clip=None, backend="cpu", progress=None)
    job = resolve_job(["A"], ["A"], **options)
    assert not encode_job(["AC"], ["AG"], job).queries.unmapped
    gpu_job = dataclasses.replace(job, engine="cuda")
    assert encode_job(["AC"], ["AG"], gpu_job).targets.unmapped


def test_work_in_pieces_covers_the_range_in_order(settings):
    """``encode.in_pieces``: ``work(start, stop)`` over the whole range in contiguous
    pieces (int bounds), the results in order; one piece a thread by default, or (with
    ``piece_bytes``, as an upload's pieces) pieces of at most that size once the range
    holds more of them than there are threads."""
    from gpualign_df import encode

    settings(encode_bytes_per_thread=1000, encode_max_threads=2)
    for size, piece_bytes in ((10_000, None), (10_000, 1024), (1500, 4096), (3000, 4096),
                              (0, 64)):
        pieces = encode.in_pieces(size, lambda start, stop: (start, stop), piece_bytes)
        threads = encode.encoding_threads(size)
        assert pieces[0][0] == 0 and pieces[-1][1] == size
        assert all(stop == start for (_, stop), (start, _) in zip(pieces, pieces[1:]))
        assert all(type(value) is int for piece in pieces for value in piece)
        if piece_bytes is None or -(-size // piece_bytes) <= threads:
            assert len(pieces) == threads
        else:
            assert len(pieces) == -(-size // piece_bytes)
            assert max(stop - start for start, stop in pieces) <= piece_bytes


@pytest.mark.gpu
def test_a_gpu_jobs_large_codes_go_to_pinned_memory():
    import cupy

    from gpualign_df.gpu import buffers

    codes = buffers.codes_buffer(buffers.SHARED_UPLOAD_BYTES + 1)
    attributes = cupy.cuda.runtime.pointerGetAttributes(codes.ctypes.data)
    assert codes.dtype == np.uint8 and len(codes) == buffers.SHARED_UPLOAD_BYTES + 1
    assert attributes.type == cupy.cuda.runtime.memoryTypeHost


def test_bad_non_ascii_character_position_counts_characters():
    with pytest.raises(ValueError) as info:
        gpualign_df.align(pd.Series(["ACGT", "GGAé"], index=["x", "y"]), ["A", "C"], **OPTIONS)
    message = str(info.value)
    assert "'y'" in message and "position 3" in message and "'é'" in message


def test_bad_character_with_default_index_names_the_row_number():
    with pytest.raises(ValueError) as info:
        gpualign_df.align(["ACGT", "AC", "ACX"], ["A", "C", "G"], **OPTIONS)
    message = str(info.value)
    assert "row 2," in message and "position 2" in message and "'X'" in message


def test_bad_input_with_integer_index_names_the_plain_label():
    with pytest.raises(ValueError) as info:
        gpualign_df.align(pd.Series(["ACGT", "GGAQ"], index=[5, 6]), ["A", "C"], **OPTIONS)
    assert "row 6," in str(info.value)
    with pytest.raises(ValueError) as info:
        gpualign_df.align(pd.Series(["ACGT", 3], index=[5, 6], dtype=object), ["A", "C"],
                          **OPTIONS)
    assert "row 6:" in str(info.value)


@pytest.mark.parametrize("value", [7, 2.5, ["A"]], ids=["int", "float", "list"])
def test_non_string_value_names_the_row(value):
    q = pd.Series(["ACGT", value, "AC"], index=["a", "bad_row", "c"], dtype=object)
    with pytest.raises(ValueError, match="'bad_row'"):
        q.aln.rowwise(pd.Series(["A", "C", "G"]), **OPTIONS)


def test_integer_in_plain_list_names_the_position():
    with pytest.raises(ValueError, match="row 1"):
        gpualign_df.align(["ACGT", 12], ["ACGT", "ACGT"], **OPTIONS)


# --- pairwise -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_pairwise_is_all_pairs_i_less_j_in_i_major_order(mode):
    rng = np.random.default_rng(5)
    base = random_sequences(rng, 1, DNA, 80, min_length=60)[0]
    sequences = [mutate(rng, base, DNA, 0.1) for _ in range(6)] + \
        random_sequences(rng, 3, DNA, 60, min_length=1)
    labels = [f"s{k}" for k in range(len(sequences))]
    series = pd.Series(sequences, index=labels)
    n = len(sequences)
    frame = series.aln.pairwise(mode=mode, **OPTIONS)
    assert len(frame) == n * (n - 1) // 2
    expected_pairs = [(labels[i], labels[j]) for i in range(n) for j in range(i + 1, n)]
    assert list(zip(frame["query"], frame["target"])) == expected_pairs
    first = [i for i in range(n) for j in range(i + 1, n)]
    second = [j for i in range(n) for j in range(i + 1, n)]
    rowwise = series.iloc[first].aln.rowwise(series.iloc[second], mode=mode, **OPTIONS)
    pd.testing.assert_frame_equal(frame, rowwise)


def test_pairwise_small_inputs():
    assert len(pd.Series(["ACGT"]).aln.pairwise(**OPTIONS)) == 0
    empty = pd.Series([], dtype=object).aln.pairwise(**OPTIONS)
    assert list(empty.columns) == TRACEBACK_COLUMNS and len(empty) == 0
    two = pd.Series(["ACGT", None], index=["a", "b"]).aln.pairwise(**OPTIONS)
    assert len(two) == 1 and two.loc[0, ["query", "target"]].tolist() == ["a", "b"]
    assert pd.isna(two.loc[0, "score"])


def test_pairwise_with_targets_is_rejected(no_work):
    with pytest.raises(ValueError):
        gpualign_df.align(["A", "C"], ["A", "C"], how="pairwise")


# --- search -------------------------------------------------------------------------------


def _search_inputs():
    rng = np.random.default_rng(6)
    database = random_sequences(rng, 8, DNA, 70, min_length=30)
    database.insert(3, database[1])        # duplicate targets: guaranteed score ties
    database.append(database[1])
    database.append(database[5])
    queries = [mutate(rng, database[k], DNA, 0.08) for k in (1, 4, 7)] + ["ACGTTT", "GGG"]
    q = pd.Series(queries, index=[f"q{k}" for k in range(len(queries))])
    db = pd.Series(database, index=[f"t{k}" for k in range(len(database))])
    return q, db


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_search_every_query_every_target_best_first(mode):
    q, db = _search_inputs()
    frame = q.aln.search(db, mode=mode, **OPTIONS)
    assert len(frame) == len(q) * len(db)
    position = {label: k for k, label in enumerate(db.index)}
    ties = 0
    for k, (query_label, block) in enumerate(frame.groupby("query", sort=False)):
        assert query_label == q.index[k]
        assert sorted(block["target"]) == sorted(db.index)
        scores = block["score"].tolist()
        targets = [position[label] for label in block["target"]]
        for a in range(len(scores) - 1):
            assert scores[a] >= scores[a + 1]
            if scores[a] == scores[a + 1]:
                ties += 1
                assert targets[a] < targets[a + 1]
    assert ties > 0
    # query order preserved, each query's rows contiguous
    assert frame["query"].tolist() == [label for label in q.index for _ in range(len(db))]
    # every row equals the rowwise alignment of its pair
    rowwise = gpualign_df.align(q.loc[frame["query"]], db.loc[frame["target"]], mode=mode,
                                **OPTIONS)
    pd.testing.assert_frame_equal(frame, rowwise)


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
@pytest.mark.parametrize("top_k", [1, 2, 4, 11, 50])
def test_search_top_k_is_prefix_of_full_search(mode, top_k):
    q, db = _search_inputs()
    full = q.aln.search(db, mode=mode, **OPTIONS)
    best = q.aln.search(db, top_k=top_k, mode=mode, **OPTIONS)
    keep = min(top_k, len(db))
    assert len(best) == len(q) * keep
    assert best.groupby("query", sort=False).size().tolist() == [keep] * len(q)
    expected = full.groupby("query", sort=False).head(keep).reset_index(drop=True)
    pd.testing.assert_frame_equal(best, expected)
    # CIGARs traced for the survivors equal a rowwise alignment of the same pairs
    rowwise = gpualign_df.align(q.loc[best["query"]], db.loc[best["target"]], mode=mode,
                                **OPTIONS)
    assert best["cigar"].tolist() == rowwise["cigar"].tolist()
    assert best["score"].tolist() == rowwise["score"].tolist()
    # score-only top_k: same pairs and scores
    quick = q.aln.search(db, top_k=top_k, mode=mode, traceback=False, **OPTIONS)
    pd.testing.assert_frame_equal(quick, best[SCORE_ONLY_COLUMNS])


@pytest.mark.parametrize("block_pairs", [1, 25, 10**9])
def test_search_top_k_in_query_blocks_equals_full_search(settings, block_pairs):
    """The CPU search with top_k scores whole queries in blocks of bounded pairs (one query
    per block, several, or all at once) and keeps the same rows as ranking every pair."""
    q, db = _search_inputs()
    q = pd.concat([q, pd.Series([None, ""], index=["null", "empty"])])
    full = q.aln.search(db, mode="sw", backend="cpu", **OPTIONS)
    expected = full.groupby("query", sort=False).head(3).reset_index(drop=True)
    settings(search_block_pairs=block_pairs)
    got = q.aln.search(db, top_k=3, mode="sw", backend="cpu", **OPTIONS)
    pd.testing.assert_frame_equal(got, expected)


def test_search_nulls_rank_last():
    q = pd.Series(["ACGTACGT", None], index=["a", "b"])
    db = pd.Series([None, "TTTT", "ACGTACGT"], index=["x", "y", "z"])
    frame = q.aln.search(db, **OPTIONS)
    assert frame["target"].tolist()[:3] == ["z", "y", "x"]
    assert pd.isna(frame.loc[2, "score"])
    assert frame.loc[3:, "score"].isna().all()
    top = q.aln.search(db, top_k=1, **OPTIONS)
    assert top["target"].tolist() == ["z", "x"]


@pytest.mark.parametrize("top_k", [0, -1, 1.5, True, "2"])
def test_top_k_validation(no_work, top_k):
    q, db = pd.Series(["ACGT"]), pd.Series(["ACGT", "AC"])
    with pytest.raises(ValueError):
        q.aln.search(db, top_k=top_k)
    with pytest.raises(ValueError):
        gpualign_df.align(q, db, how="search", top_k=top_k)


@pytest.mark.parametrize("how", ["rowwise", "pairwise"])
def test_top_k_outside_search_is_rejected(no_work, how):
    targets = ["ACGT"] if how == "rowwise" else None
    with pytest.raises(ValueError, match="top_k"):
        gpualign_df.align(["ACGT"], targets, how=how, top_k=1)


def test_unknown_how_is_rejected(no_work):
    with pytest.raises(ValueError, match="how"):
        gpualign_df.align(["ACGT"], ["ACGT"], how="all-vs-all")


# --- columns, dtypes, statistics ------------------------------------------------------------


@pytest.mark.parametrize("how", ["rowwise", "pairwise", "search"])
@pytest.mark.parametrize("mode,free_ends", MODES)
def test_traceback_false_returns_scores_and_ends_only(how, mode, free_ends):
    queries, targets = related(7, 14)
    targets = None if how == "pairwise" else targets
    options = dict(how=how, mode=mode, free_ends=free_ends, **OPTIONS)
    full = gpualign_df.align(queries, targets, **options)
    quick = gpualign_df.align(queries, targets, traceback=False, **options)
    assert list(quick.columns) == SCORE_ONLY_COLUMNS
    for column in ("score", "query_end", "target_end"):
        assert str(quick[column].dtype) == "Int32"
    pd.testing.assert_frame_equal(quick, full[SCORE_ONLY_COLUMNS])


def test_result_columns_and_dtypes():
    queries, targets = related(8, 10)
    targets[4] = None
    frame = pd.Series(queries, index=[f"r{k}" for k in range(10)]).aln.rowwise(
        pd.Series(targets, index=[f"m{k}" for k in range(10)]), **OPTIONS)
    assert list(frame.columns) == TRACEBACK_COLUMNS
    for column in INT_COLUMNS:
        assert str(frame[column].dtype) == "Int32", column
    assert str(frame["identity"].dtype) == "Float64"
    assert pd.api.types.is_string_dtype(frame["cigar"].dtype)
    assert frame["cigar"].isna().tolist() == [k == 4 for k in range(10)]
    for how, targets_ in (("search", targets[:3]), ("pairwise", None)):
        other = gpualign_df.align(queries[:3], targets_, how=how, **OPTIONS)
        assert list(other.columns) == TRACEBACK_COLUMNS
        assert [str(other[c].dtype) for c in INT_COLUMNS] == ["Int32"] * len(INT_COLUMNS)
    empty = gpualign_df.align([], [], **OPTIONS)
    assert list(empty.columns) == TRACEBACK_COLUMNS and len(empty) == 0
    assert [str(empty[c].dtype) for c in INT_COLUMNS] == ["Int32"] * len(INT_COLUMNS)
    assert str(empty["identity"].dtype) == "Float64"


@pytest.mark.parametrize("mode,free_ends", MODES)
@pytest.mark.parametrize("gaps", [(5, 2), (3, 3), (8, 1)])
def test_statistics_match_the_cigar(mode, free_ends, gaps):
    queries, targets = related(9, 60)
    options = dict(match=2, mismatch=-3, gap_open=gaps[0], gap_extend=gaps[1])
    frame = gpualign_df.align(queries, targets, mode=mode, free_ends=free_ends, **options)
    scoring = make_scoring(**options)
    some_gaps = 0
    for row, query, target in zip(frame.itertuples(), queries, targets):
        parsed = runs(row.cigar)
        # no two adjacent runs of the same op
        assert all(a[1] != b[1] for a, b in zip(parsed, parsed[1:])), row.cigar
        counts = {op: sum(n for n, o in parsed if o == op) for op in "=XID"}
        assert row.matches == counts["="]
        assert row.mismatches == counts["X"]
        assert row.gaps == counts["I"] + counts["D"]
        assert row.gap_opens == sum(1 for _, o in parsed if o in "ID")
        assert row.length == sum(n for n, _ in parsed)
        assert row.query_end - row.query_start == counts["="] + counts["X"] + counts["I"]
        assert row.target_end - row.target_start == counts["="] + counts["X"] + counts["D"]
        if row.length > 0:
            assert row.identity == pytest.approx(row.matches / row.length, abs=1e-12)
        assert rescore(query, target, row, scoring) == row.score
        some_gaps += row.gap_opens > 0
        if mode == "nw":
            assert (row.query_start, row.query_end) == (0, len(query))
            assert (row.target_start, row.target_end) == (0, len(target))
    assert some_gaps > 0


# --- CIGAR styles and clipping ----------------------------------------------------------------


def _merge_matches(cigar: str) -> str:
    merged: list[list] = []
    for count, op in runs(cigar):
        op = "M" if op in "=X" else op
        if merged and merged[-1][1] == op:
            merged[-1][0] += count
        else:
            merged.append([count, op])
    return "".join(f"{count}{op}" for count, op in merged)


def _consumed(cigar: str) -> tuple[int, int]:
    parsed = runs(cigar)
    return (sum(n for n, o in parsed if o in "=XMIS"), sum(n for n, o in parsed if o in "=XMD"))


@pytest.mark.parametrize("mode,free_ends", MODES)
def test_cigar_style_m_merges_matches_and_mismatches(mode, free_ends):
    queries, targets = related(10, 50)
    options = dict(mode=mode, free_ends=free_ends, **OPTIONS)
    extended = gpualign_df.align(queries, targets, **options)
    classic = gpualign_df.align(queries, targets, cigar_style="M", **options)
    pd.testing.assert_frame_equal(extended.drop(columns="cigar"), classic.drop(columns="cigar"))
    scoring = make_scoring(**OPTIONS)
    mixed = 0
    for row_e, row_c, query, target in zip(extended.itertuples(), classic.itertuples(), queries,
                                           targets):
        assert not set(row_c.cigar) & set("=X")
        assert row_c.cigar == _merge_matches(row_e.cigar)
        assert _consumed(row_c.cigar) == _consumed(row_e.cigar)
        assert rescore(query, target, row_c, scoring) == row_c.score
        mixed += "=" in row_e.cigar and "X" in row_e.cigar
    assert mixed > 0


@pytest.mark.parametrize("cigar_style", ["=", "M"])
@pytest.mark.parametrize("mode,free_ends", [("sw", None), ("sg", ("query_start", "query_end")),
                                            ("sg", None), ("nw", None)])
def test_soft_clip_covers_the_unaligned_query(cigar_style, mode, free_ends):
    queries, targets = related(11, 60)
    rng = np.random.default_rng(12)
    # query flanks that the target lacks: clipping has something to clip
    queries = ["".join(random_sequences(rng, 1, DNA, 12, min_length=1)) + q
               + "".join(random_sequences(rng, 1, DNA, 12, min_length=1)) for q in queries]
    options = dict(mode=mode, free_ends=free_ends, cigar_style=cigar_style, **OPTIONS)
    plain = gpualign_df.align(queries, targets, **options)
    clipped = gpualign_df.align(queries, targets, clip="soft", **options)
    pd.testing.assert_frame_equal(plain.drop(columns="cigar"), clipped.drop(columns="cigar"))
    clips = 0
    for row_p, row_c, query in zip(plain.itertuples(), clipped.itertuples(), queries):
        head = row_c.query_start
        tail = len(query) - row_c.query_end
        expected = (f"{head}S" if head else "") + row_p.cigar + (f"{tail}S" if tail else "")
        assert row_c.cigar == expected
        assert _consumed(row_c.cigar)[0] == len(query)
        assert _consumed(row_c.cigar)[1] == row_c.target_end - row_c.target_start
        clips += head > 0 or tail > 0
    if mode == "nw":
        assert clips == 0
    else:
        assert clips > 0


# --- mode properties ------------------------------------------------------------------------------


@pytest.fixture(params=["lanes", "one-pair"])
def cpu_path(request, settings):
    """Run the test on the default CPU path and again with every pair on the one-pair path."""
    if request.param == "one-pair":
        settings(lane_max_length=0)
    return request.param


@pytest.mark.parametrize("gaps", [(5, 2), (2, 2), (10, 1)])
def test_glocal_aligns_the_whole_query(cpu_path, gaps):
    queries, targets = related(13, 120, flank=40)
    queries += ["", "ACGTACGT", "A"]
    targets += ["ACGT", "", "TTTTTTTTTTTTTT"]
    options = dict(match=2, mismatch=-3, gap_open=gaps[0], gap_extend=gaps[1])
    frame = gpualign_df.align(queries, targets, mode="sg", backend="cpu",
                              free_ends=("target_start", "target_end"), **options)
    scoring = make_scoring(**options)
    partial_target = 0
    for row, query, target in zip(frame.itertuples(), queries, targets):
        assert row.query_start == 0 and row.query_end == len(query)
        assert rescore(query, target, row, scoring) == row.score
        partial_target += row.target_start > 0 or row.target_end < len(target)
    assert partial_target > 0


def _prefix_scores(query, target, row, scoring):
    """Score after every single operation of the CIGAR, start to end."""
    qpos, tpos = row.query_start, row.target_start
    total, scores, previous = 0, [], None
    for count, op in runs(row.cigar):
        for _ in range(count):
            if op in "=X":
                total += int(scoring.matrix[scoring.lut[ord(query[qpos])],
                                            scoring.lut[ord(target[tpos])]])
                qpos += 1
                tpos += 1
            else:
                total -= scoring.gap_extend if previous == op else scoring.gap_open
                if op == "I":
                    qpos += 1
                else:
                    tpos += 1
            previous = op
            scores.append(total)
        previous = op
    return scores


@pytest.mark.parametrize("options", [dict(match=2, mismatch=-3, gap_open=5, gap_extend=2),
                                     dict(match=1, mismatch=-1, gap_open=1, gap_extend=1),
                                     dict(match=3, mismatch=-2, gap_open=4, gap_extend=0),
                                     dict(matrix="EDNAFULL", gap_open=10, gap_extend=1)])
def test_local_alignment_has_positive_prefixes_and_no_end_gaps(cpu_path, options):
    queries, targets = related(14, 150)
    queries += ["ACACACACAC", "TTTT", "AAAAAAAA"]
    targets += ["CACACA", "GGGG", "AAAA"]
    frame = gpualign_df.align(queries, targets, mode="sw", backend="cpu", **options)
    scoring = make_scoring(options.get("matrix"), **{k: v for k, v in options.items()
                                                     if k != "matrix"})
    with_gaps = 0
    for row, query, target in zip(frame.itertuples(), queries, targets):
        if row.score == 0:
            assert row.cigar == "" and row.length == 0
            continue
        parsed = runs(row.cigar)
        assert parsed[0][1] == "=" and parsed[-1][1] == "=", row.cigar
        prefixes = _prefix_scores(query, target, row, scoring)
        assert prefixes[-1] == row.score
        assert min(prefixes) > 0, (row.cigar, prefixes)
        assert max(prefixes) == row.score
        with_gaps += row.gap_opens > 0
    assert with_gaps > 0
    assert frame.loc[len(frame) - 2, "score"] == 0


# --- options ----------------------------------------------------------------------------------


def test_cuda_backend_without_a_gpu_raises_runtime_error(monkeypatch):
    # no real GPU and no CUDA simulator: backend="cuda" must refuse clearly
    monkeypatch.setattr(gpu, "gpu_usable", lambda: False)
    monkeypatch.setattr(gpu, "simulator", lambda: False)
    monkeypatch.setattr(gpu, "cupy_installed", lambda: True)
    with pytest.raises(RuntimeError, match="(?i)cuda") as info:
        gpualign_df.align(["ACGT"], ["ACGT"], backend="cuda", **OPTIONS)
    assert "cpu" in str(info.value)
    with pytest.raises(RuntimeError):
        pd.Series(["ACGT", "AC"]).aln.pairwise(backend="cuda", **OPTIONS)


def test_cuda_backend_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setattr(gpu, "gpu_usable", lambda: False)
    monkeypatch.setattr(gpu, "simulator", lambda: False)
    monkeypatch.setattr(gpu, "cupy_installed", lambda: False)
    with pytest.raises(RuntimeError, match=r"needs CuPy.*gpualign_df\[gpu\]"):
        gpualign_df.align(["ACGT"], ["ACGT"], backend="cuda", **OPTIONS)


def test_auto_backend_without_a_gpu_runs_on_the_cpu(monkeypatch):
    monkeypatch.setattr(gpu, "gpu_usable", lambda: False)
    monkeypatch.setattr(gpu, "simulator", lambda: False)
    frame = gpualign_df.align(["ACGTACGT"], ["TTACGTACGTTT"], mode="sw", **OPTIONS)
    assert frame.loc[0, ["score", "target_start", "target_end", "cigar"]].tolist() == \
        [16, 2, 10, "8="]


def test_auto_backend_runs_jobs_up_to_auto_cpu_cells_on_the_cpu(monkeypatch):
    """With a usable GPU (here the simulator, taken for one), backend="auto" runs a job of
    at most auto_cpu_cells DP cells (none by default) on the CPU engine and a larger one on
    the GPU, for align and align_batches alike; backend="cuda" always on the GPU; the
    frames are the same."""
    from gpualign_df import config, engine

    monkeypatch.setattr(gpu, "gpu_usable", lambda: True)
    ran = []
    real_cpu, real_gpu = engine._run_pairs_cpu, gpu.run_pairs_gpu
    monkeypatch.setattr(engine, "_run_pairs_cpu",
                        lambda *args, **kwargs: ran.append("cpu") or real_cpu(*args, **kwargs))
    monkeypatch.setattr(gpu, "run_pairs_gpu",
                        lambda *args, **kwargs: ran.append("cuda") or real_gpu(*args, **kwargs))
    queries, targets = related(6, 6, max_length=12)
    cells = sum(len(q) * len(t) for q, t in zip(queries, targets))
    frames = []
    ran.clear()  # (the default, auto_cpu_cells 0, keeps every job on the GPU)
    frames.append(gpualign_df.align(queries, targets, backend="auto", **OPTIONS))
    assert ran == ["cuda"]
    for backend, limit, expected in (("auto", cells, "cpu"), ("auto", cells - 1, "cuda"),
                                     ("cuda", cells, "cuda")):
        with config.override(auto_cpu_cells=limit):
            ran.clear()
            frames.append(gpualign_df.align(queries, targets, backend=backend, **OPTIONS))
            assert ran == [expected], (backend, limit)
            ran.clear()
            batches = list(gpualign_df.align_batches(queries, targets, backend=backend,
                                                     **OPTIONS))
            assert set(ran) == {expected}, (backend, limit)
            pd.testing.assert_frame_equal(pd.concat(batches, ignore_index=True), frames[-1])
    for frame in frames[1:]:
        pd.testing.assert_frame_equal(frame, frames[0])


def test_cpu_and_auto_backends_agree():
    queries, targets = related(15, 20)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, backend="cpu", **OPTIONS),
                                  gpualign_df.align(queries, targets, backend="auto", **OPTIONS))


@pytest.mark.parametrize("option", [dict(backend="gpu"), dict(backend="CPU"),
                                    dict(cigar_style="X"), dict(cigar_style="="[:0]),
                                    dict(clip="hard"), dict(clip="S")],
                         ids=["backend-gpu", "backend-CPU", "cigar-X", "cigar-empty", "clip-hard",
                              "clip-S"])
def test_unknown_options_raise_value_error_before_work(no_work, option):
    with pytest.raises(ValueError):
        gpualign_df.align(["ACGT"], ["ACGT"], **option)
    with pytest.raises(ValueError):
        pd.Series(["ACGT"]).aln.rowwise(pd.Series(["ACGT"]), **option)


def test_pandas_series_align_is_untouched():
    left = pd.Series([1, 2, 3], index=["a", "b", "c"])
    right = pd.Series([10, 20], index=["b", "d"])
    aligned_left, aligned_right = left.align(right)
    assert aligned_left.index.tolist() == ["a", "b", "c", "d"]
    assert aligned_right.index.tolist() == ["a", "b", "c", "d"]
    assert aligned_right.loc["b"] == 10 and np.isnan(aligned_right.loc["a"])
    inner_left, inner_right = left.align(right, join="inner")
    assert inner_left.tolist() == [2] and inner_right.tolist() == [10]
    # DataFrame arithmetic relies on Series alignment internally
    assert (left + right).dropna().tolist() == [12.0]
    assert callable(pd.Series.align) and not isinstance(pd.Series.align, property)
    assert isinstance(left.aln, SeriesAlignAccessor)
    frame = pd.DataFrame({"x": left})
    assert frame.align(right.to_frame("x"), join="outer")[0].shape == (4, 1)


@pytest.mark.parametrize("value", [0, -1, 1.5, "1G", True, 2.0 ** 30],
                         ids=["zero", "negative", "float", "string", "bool", "float-exact"])
def test_traceback_memory_validation(no_work, value):
    """traceback_memory is a positive int (bytes) or None, refused otherwise before any work,
    naming the option, on every entry point."""
    with pytest.raises(ValueError, match="traceback_memory must be a positive number of bytes"):
        gpualign_df.align(["ACGT"], ["ACGT"], traceback_memory=value)
    with pytest.raises(ValueError, match="traceback_memory"):
        pd.Series(["ACGT"]).aln.rowwise(pd.Series(["ACGT"]), traceback_memory=value)
    with pytest.raises(ValueError, match="traceback_memory"):
        gpualign_df.align_batches(["ACGT"], ["ACGT"], traceback_memory=value)


def test_traceback_memory_is_carried_by_the_job():
    from gpualign_df.api import resolve_job

    options = dict(how="rowwise", mode="sw", matrix=None, match=1, mismatch=-1, gap_open=2,
                   gap_extend=1, free_ends=None, top_k=None, traceback=True, cigar_style="=",
                   clip=None, backend="cpu", progress=None)
    assert resolve_job(["A"], ["A"], **options).traceback_memory is None
    job = resolve_job(["A"], ["A"], traceback_memory=np.int64(1 << 20), **options)
    assert job.traceback_memory == 1 << 20 and type(job.traceback_memory) is int
    assert gpualign_df.align(["ACGT"], ["ACGT"], traceback_memory=1, match=1, mismatch=-1)[
        "cigar"].tolist() == ["4="]


def test_presets_are_gatks_parameter_sets_in_this_packages_costs():
    """Each preset is GATK's parameter set (the oracle's table, GATK's signs) with the gap
    weights as positive costs: GATK charges a gap of length k as ours does."""
    from gatk_oracle import PRESETS as GATK

    from gpualign_df.scoring import PRESETS

    assert set(PRESETS) == set(GATK)
    for name, (match, mismatch, gap_open, gap_extend) in GATK.items():
        assert PRESETS[name] == (match, mismatch, -gap_open, -gap_extend)


def test_preset_equals_its_values_everywhere_and_refuses_overrides():
    """A preset gives the frame of its values through align, align_batches and the
    accessor; it may not be combined with any value it sets, and an unknown name is refused
    with the names."""
    from gpualign_df.scoring import PRESETS

    haplotypes = pd.Series(["ACGTTGCAGGTCAAT", "TTGCAGGACGT", "GGGTTTACGT"])
    references = pd.Series(["TTACGTTGCAGTCAATGG", "ACGTTGCAGGACGTAA", "CCGGGTTACGTA"])
    match, mismatch, gap_open, gap_extend = PRESETS["gatk-haplotype-to-reference"]
    expected = gpualign_df.align(haplotypes, references, mode="sg", match=match,
                                 mismatch=mismatch, gap_open=gap_open, gap_extend=gap_extend)
    options = dict(mode="sg", preset="gatk-haplotype-to-reference")
    pd.testing.assert_frame_equal(gpualign_df.align(haplotypes, references, **options),
                                  expected)
    pd.testing.assert_frame_equal(
        pd.concat(gpualign_df.align_batches(haplotypes, references, **options)), expected)
    pd.testing.assert_frame_equal(haplotypes.aln.rowwise(references, **options), expected)
    assert expected["score"].iloc[0] == 200 * 14 - 260  # 14 matches and a 1 bp deletion
    for extra in (dict(match=2), dict(gap_open=5), dict(matrix="EDNAFULL")):
        with pytest.raises(ValueError, match=f"do not also pass {next(iter(extra))}"):
            gpualign_df.align(haplotypes, references, **options, **extra)
    with pytest.raises(ValueError, match="unknown preset 'gatk'.*gatk-original"):
        gpualign_df.align(haplotypes, references, preset="gatk")


LABEL_KINDS = {
    "int": pd.Index([5, 6, 7, 8]),
    "str": pd.Index(list("abcd")),
    "object": pd.Index([1, "a", (2, 3), None], dtype=object),
    "tuples": pd.MultiIndex.from_tuples([(1, "a"), (1, "b"), (2, "a"), (2, "b")]),
    "datetime": pd.date_range("2020", periods=4),
    "datetime-tz": pd.date_range("2020", periods=4, tz="UTC"),
    "category": pd.CategoricalIndex(list("abab")),
    "Int64": pd.Index(pd.array([1, None, 3, 4], "Int64")),
    "float": pd.Index([1.5, 2.5, np.nan, 4.0]),
    "period": pd.period_range("2020", periods=4, freq="D"),
    "bool": pd.Index([True, False, True, False]),
}


def test_result_frames_share_no_column_index():
    """The column names' Index is made once and each frame takes a view: naming one
    frame's columns leaves every other frame's as the constructor makes them."""
    options = dict(mode="sw", backend="cpu", progress=False)
    first = gpualign_df.align(["ACGT"], ["ACGA"], **options)
    second = gpualign_df.align(["ACGT"], ["ACGA"], **options)
    first.columns.name = "renamed"
    expected = pd.DataFrame({name: [] for name in second.columns}).columns
    assert second.columns.name is None
    assert second.columns.equals(expected) and second.columns.dtype == expected.dtype
    third = gpualign_df.align(["ACGT"], ["ACGA"], **options)
    assert third.columns.name is None and third.columns.equals(second.columns)


@pytest.mark.parametrize("options", [
    dict(mode="sw"),
    dict(mode="sg", traceback=False),
    dict(preset="gatk-original", overhang="softclip", cigar_style="M"),
])
def test_every_result_frame_equals_the_constructors_and_its_columns_are_apart(options):
    """Each shape of result frame (traceback, score only, GATK's offset column), with a
    null row, is what ``pd.DataFrame`` makes of its columns, and each column has data
    and a mask of its own: a write to one column reaches no other."""
    queries = pd.Series(["ACGTTGCA", None, "GGTACA"], index=["a", "b", "c"])
    targets = pd.Series(["ACGATGCA", "AC", "GGTCA"], index=["a", "b", "c"])
    frame = queries.aln.rowwise(targets, backend="cpu", progress=False, **options)
    built = pd.DataFrame({name: frame[name].array.copy() for name in frame.columns},
                         index=pd.RangeIndex(len(frame)))
    pd.testing.assert_frame_equal(frame, built)
    assert [type(frame[name].array) for name in frame] == \
        [type(built[name].array) for name in built]
    before = frame.copy()
    frame.loc[0, "score"] = None
    frame.loc[2, "score"] = 7
    assert [name for name in frame if not frame[name].equals(before[name])] == ["score"]
    assert frame["score"].isna().tolist() == [True, True, False]


@pytest.mark.parametrize("kind", sorted(LABEL_KINDS))
def test_result_frame_equals_the_constructors_for_every_label_kind(kind):
    """The result frame is built from its columns as blocks: it must equal, dtypes and
    array types included, what ``pd.DataFrame`` makes of the same columns, and take
    writes without touching the inputs' labels."""
    from gpualign_df.results import frame_of

    labels = LABEL_KINDS[kind]
    queries = pd.Series(["ACGT", "AC", None, "GGTA"], index=labels)
    targets = pd.Series(["ACGA", "TC", "A", "GGA"], index=labels[::-1])
    frame = queries.aln.rowwise(targets, mode="sw", backend="cpu", progress=False)
    columns = {name: (pd.Index(frame[name]) if name in ("query", "target")
                      else frame[name].array.copy()) for name in frame.columns}
    built = pd.DataFrame(dict(columns), index=pd.RangeIndex(len(frame)), copy=False)
    for made in (frame, frame_of(dict(columns), len(frame))):
        assert made.equals(built) and made.dtypes.equals(built.dtypes)
        assert [type(made[name].array) for name in made] == \
            [type(built[name].array) for name in built]
        for name, expected in (("query", labels), ("target", labels[::-1])):
            assert pd.Series(list(made[name]), dtype=object).equals(
                pd.Series(list(expected), dtype=object))
    before = labels.copy()
    # a one-row slice: pandas 3.0 refuses a tuple label set as a scalar
    frame.iloc[0:1, 0] = frame.iloc[1:2, 0].to_numpy()
    assert labels.equals(before)
