"""Small GPU batches (:mod:`gpualign_df.gpu.small`): one launch of the block kernel, a
block a pair, gives the CPU engine's frame row for row in every mode; the planner sends a
job there only where it fits. Under the CUDA simulator on tiny pairs (on the accelerator
with GPUALIGN_REAL_GPU=1, where the last test also runs the real GATK shape)."""

import dataclasses
import os

import numpy as np
import pandas as pd
import pytest

import gpualign_df  # noqa: F401  (the accessor)
from gpualign_df import gpu
from gpualign_df.gpu import batches, small
from gpualign_df.kernels import block

REAL_GPU = os.environ.get("GPUALIGN_REAL_GPU") == "1"
SCORES = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, progress=False)


def _pairs(count: int, seed: int, longest: int = 40) -> tuple[pd.Series, pd.Series]:
    """Related DNA pairs (a query, its window with edits), a null, empty sequences and an
    N, with labels that are not positions."""
    rng = np.random.default_rng(seed)
    queries, targets = [], []
    for _ in range(count):
        query = "".join(rng.choice(list("ACGT"), int(rng.integers(1, longest))))
        target = list(query[int(rng.integers(0, 4)):])
        for _ in range(int(rng.integers(0, 4))):  # substitutions, insertions, deletions
            at = int(rng.integers(0, len(target) + 1))
            kind = int(rng.integers(0, 3))
            if kind == 0 and at < len(target):
                target[at] = str(rng.choice(list("ACGT")))
            elif kind == 1:
                target.insert(at, "".join(rng.choice(list("ACGT"), int(rng.integers(1, 4)))))
            elif at < len(target):
                del target[at]
        queries.append(query)
        targets.append("".join(target) + "".join(rng.choice(list("ACGT"), 3)))
    queries += [None, "", "ACGTN", "ACG"]
    targets += ["ACGT", "ACGT", "ACNTT", ""]
    labels = [f"p{k}" for k in range(len(queries))]
    return pd.Series(queries, index=labels), pd.Series(targets, index=labels)


def _small_and_cpu(queries, targets, scores=SCORES, **options):
    """The job's frame on the small-batch path and on the CPU engine."""
    options = {**scores, **options}
    calls = []
    real = batches.align_small

    def recorded(*args, **kwargs):
        calls.append(len(args[2]))
        return real(*args, **kwargs)

    try:
        batches.align_small = recorded
        on_gpu = queries.aln.rowwise(targets, backend="cuda", **options)
    finally:
        batches.align_small = real
    assert calls == [len(queries)], "the job did not run as one small batch"
    return on_gpu, queries.aln.rowwise(targets, backend="cpu", **options)


@pytest.mark.parametrize("options", [
    dict(mode="sw"),
    dict(mode="nw", cigar_style="M"),
    dict(mode="sg"),
    dict(mode="sg", free_ends=("query_start", "target_end")),
    dict(mode="sw", clip="soft", traceback=True),
    dict(mode="sg", traceback=False),
])
@pytest.mark.parametrize("columns,rows", [(1, 8), (2, 5), (2, 2), (4, 3)])
def test_a_small_batch_gives_the_cpu_engines_frame(settings, options, columns, rows):
    # (every strip in one pass; fewer threads to simulate)
    settings(small_batch_threads=8, small_batch_columns=columns, small_batch_rows=rows)
    queries, targets = _pairs(5, seed=len(str(options)))
    on_gpu, on_cpu = _small_and_cpu(queries, targets, **options)
    pd.testing.assert_frame_equal(on_gpu, on_cpu)


@pytest.mark.parametrize("mode,lanes", [("sw", None), ("nw", 4), ("sg", 4)])
@pytest.mark.parametrize("columns,rows", [(1, 8), (2, 7), (1, 4), (2, 6), (3, 5), (4, 3)])
def test_strips_in_several_passes_and_tied_ends_across_strips(settings, mode, lanes, columns,
                                                             rows):
    """Fewer threads than strips (passes hand their last row down through memory), and
    a repeat whose best cells tie in several strips (the first in row order wins); the
    walk in ``lanes`` threads where given; a thread's one to four columns a step (targets
    of lengths that leave each number of columns for a strip's last step), of strips of 3
    to 8 rows."""
    settings(small_batch_threads=2, walk_lanes=lanes, small_batch_columns=columns,
             small_batch_rows=rows)
    queries = pd.Series(["ACGTTGCA" * 5, "GATTACA" * 6, "TTTT"])
    targets = pd.Series(["ACGTTGCA" * 2, "CAGATTACATT", "ACGTTTTACG"])
    on_gpu, on_cpu = _small_and_cpu(queries, targets, mode=mode)
    pd.testing.assert_frame_equal(on_gpu, on_cpu)


def test_the_planner_takes_small_batches_only_where_they_fit(settings):
    tuning = settings(small_batch_pairs=3, small_batch_cells=1000, inter_max_cells=400)
    # pairs of 10 x 10, 20 x 20, 15 x 15: 725 cells, at most 400, at most 20 * 10 bytes
    assert small.small_batch(3, 725, 400, 200, None, tuning)
    assert not small.small_batch(0, 0, 0, 0, None, tuning)
    assert not small.small_batch(4, 750, 400, 200, None, tuning), \
        "more pairs than small_batch_pairs"
    assert not small.small_batch(3, 745, 420, 220, None, tuning), \
        "a pair of more than inter_max_cells"
    assert not small.small_batch(3, 725, 400, 200, None,
                                 dataclasses.replace(tuning, small_batch_cells=600)), \
        "more cells in all than small_batch_cells"
    assert not small.small_batch(3, 725, 400, 200, 100, tuning), \
        "a pair whose traceback exceeds traceback_memory goes to linear space"
    assert small.small_batch(3, 725, 400, 200, 200, tuning)


def test_pair_sizes_are_numpys():
    """The one-pass sizes of a job's pairs equal numpy's: validity, cells, the largest
    pair's cells and full-traceback bytes (nulls, empty sequences, pairs repeated)."""
    from gpualign_df.job import full_traceback_bytes
    from gpualign_df.kernels.encoding import pair_sizes

    rng = np.random.default_rng(5)
    query_lengths, target_lengths = rng.integers(0, 50, 30), rng.integers(0, 70, 20)
    query_valid, target_valid = rng.random(30) < 0.8, rng.random(20) < 0.8
    query_lengths[~query_valid] = 0  # (a null sequence has no residues)
    target_lengths[~target_valid] = 0
    pair_query, pair_target = rng.integers(0, 30, 200), rng.integers(0, 20, 200)
    valid = np.empty(200, np.bool_)
    sizes = pair_sizes(np.concatenate([[0], np.cumsum(query_lengths)]), query_valid,
                       np.concatenate([[0], np.cumsum(target_lengths)]), target_valid,
                       pair_query, pair_target, valid)
    m, n = query_lengths[pair_query], target_lengths[pair_target]
    assert valid.tolist() == (query_valid[pair_query] & target_valid[pair_target]).tolist()
    assert sizes == (int((m * n).sum()), int((m * n).max()),
                     int(full_traceback_bytes(m, n).max()))


def test_jobs_past_the_small_batch_limits_take_the_batch_path(settings):
    settings(small_batch_pairs=2)
    queries, targets = _pairs(2, seed=3)
    with pytest.raises(AssertionError, match="did not run as one small batch"):
        _small_and_cpu(queries, targets)


def test_a_searchs_hits_upload_only_the_sequences_they_read(monkeypatch):
    """A search's hits go to the small batch with the hits' database sequences alone (not
    the whole database), renumbered, or, in a prepared database kept on the device, with
    none (the kept copy's codes): the CPU engine's rows either way."""
    uploaded = []
    real = small.upload_into
    monkeypatch.setattr(small, "upload_into",
                        lambda device, host: uploaded.append(len(host)) or real(device, host))
    rng = np.random.default_rng(5)
    database = pd.Series(["".join(rng.choice(list("ACGT"), 16)) for _ in range(12)])
    queries = pd.Series([database[7][3:15], database[10][:12]])
    options = dict(SCORES, top_k=2)
    cpu = queries.aln.search(database, backend="cpu", **options)
    pd.testing.assert_frame_equal(queries.aln.search(database, backend="cuda", **options), cpu)
    # the pairs table of the 4 hits and its counter, the 2 queries' 24 residues, then at
    # most 4 hits' targets of the 12 (not the database's 192 residues)
    table = 8 * (block.PAIR_FIELDS * 4 + 1)
    assert len(uploaded) == 1 and table + 24 < uploaded[0] <= table + 24 + 4 * 16
    prepared = gpualign_df.database(database, match=2, mismatch=-3)
    uploaded.clear()  # (the search's score pass keeps the device copy the hits then read)
    pd.testing.assert_frame_equal(queries.aln.search(prepared, backend="cuda", **options), cpu)
    assert uploaded == [table + 24]  # the table and the queries


def test_the_callers_frame_is_made_while_the_kernel_runs(monkeypatch):
    """On the small path the result frame's labels and arrays are made after the launch
    and before the wait for the results (``run_pairs``' ``meanwhile``), and the frame is
    the CPU engine's."""
    from gpualign_df import results

    events = []
    for name in ("launch_kernel", "download"):
        monkeypatch.setattr(small, name, lambda *args, _real=getattr(small, name), _name=name,
                            **options: events.append(_name) or _real(*args, **options))
    prepare = results.ResultFrame.prepare
    monkeypatch.setattr(results.ResultFrame, "prepare",
                        lambda frame: events.append("prepare") or prepare(frame))
    queries, targets = _pairs(3, seed=11)
    on_gpu, on_cpu = _small_and_cpu(queries, targets, mode="sg")
    pd.testing.assert_frame_equal(on_gpu, on_cpu)
    assert events[:3] == ["launch_kernel", "prepare", "download"]


def test_cigars_longer_than_the_first_copy_come_back_whole(settings):
    """A batch whose CIGARs outgrow the first copy back's share
    (``CHARACTERS_GUESS`` a pair) gets the rest in a second copy: the CPU engine's frame."""
    settings(small_batch_threads=8)
    queries = pd.Series(["ACGT" * 40, "GATTACA" * 20, "AC"])
    targets = pd.Series(["AGGT" * 40, "GTTTACC" * 20, "AC"])  # a mismatch every few columns
    on_gpu, on_cpu = _small_and_cpu(queries, targets, mode="nw")
    assert on_cpu["cigar"].str.len().sum() > small.CHARACTERS_GUESS * len(queries)
    pd.testing.assert_frame_equal(on_gpu, on_cpu)


def test_the_block_kernels_rows_are_the_result_columns():

    assert block.CHAR_ROW == len(gpu.RESULT_COLUMNS) == block.OUT_ROWS - 1
    assert gpu.RESULT_COLUMNS[block.CIGAR_LENGTH_ROW] == "cigar_length"


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="the GATK shape needs a GPU (GPUALIGN_REAL_GPU=1)")
def test_gatk_haplotypes_on_the_small_path_equal_the_batch_path_and_the_cpu(settings):
    """600 bp haplotypes against 700 bp windows with GATK's scores (issue #23's shape):
    the small path, the batch path and the CPU engine agree row for row."""
    rng = np.random.default_rng(23)
    reference = "".join(rng.choice(list("ACGT"), 30_000))
    windows = [reference[k * 700:(k + 1) * 700] for k in range(40)]
    haplotypes = []
    for window in windows:
        haplotype = list(window[50:650])
        for at in rng.integers(0, 590, 6):
            haplotype[at] = str(rng.choice(list("ACGT")))
        del haplotype[300:303]
        haplotypes.append("".join(haplotype))
    options = dict(mode="sg", match=200, mismatch=-150, gap_open=260, gap_extend=11,
                   progress=False)
    queries, targets = pd.Series(haplotypes), pd.Series(windows)
    on_small = queries.aln.rowwise(targets, backend="cuda", **options)
    settings(small_batch_pairs=0)
    on_batches = queries.aln.rowwise(targets, backend="cuda", **options)
    on_cpu = queries.aln.rowwise(targets, backend="cpu", **options)
    pd.testing.assert_frame_equal(on_small, on_cpu)
    pd.testing.assert_frame_equal(on_batches, on_cpu)


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="the fast launch path needs a GPU (GPUALIGN_REAL_GPU=1)")
def test_a_call_like_the_last_launches_on_its_slots_with_its_own_results():
    """A small call of the last one's shape (as many pairs, buffers large enough) launches
    on the parameter slots the last one filled (the same kept buffers), and gives its own
    sequences' frame; one of another shape fills them again: each the CPU engine's frame."""
    from gpualign_df.gpu import launch

    # (the first call's buffers hold the next ones': none grows, no argument changes; a
    # kernel's first launch in the process is numba's, its second fills the slots)
    for seed, count, longest, again in ((1, 6, 60, None), (1, 6, 60, None), (1, 6, 60, True),
                                        (2, 6, 30, True), (3, 6, 30, True), (4, 9, 30, False)):
        queries, targets = _pairs(count, seed=seed, longest=longest)
        before = launch.LAUNCHES["again"]
        on_gpu, on_cpu = _small_and_cpu(queries, targets, mode="sg")
        pd.testing.assert_frame_equal(on_gpu, on_cpu)
        if again is not None:
            assert (launch.LAUNCHES["again"] > before) == again, (seed, count)


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="hundreds of pairs: on a GPU (GPUALIGN_REAL_GPU=1)")
@pytest.mark.parametrize("scoring", ["dna-2-3-gap10+1", "dna-1-1-linear2", "blosum62-gap11+1"])
@pytest.mark.parametrize("rows", [8, 5, 2])
def test_every_mode_on_random_and_tied_pairs_equals_the_cpu(settings, scoring, rows):
    """Every mode and free-ends subset, pairs of 1-300 residues, half related, with the
    repeats whose optimal alignments tie (``test_engine_paths``' pairs): the small path
    gives the CPU engine's frame, at every strip height."""
    from test_engine_paths import DNA, MODES, PROTEIN, SCORINGS, make_pairs

    settings(small_batch_rows=rows)

    queries, targets = make_pairs(PROTEIN if scoring.startswith("blosum") else DNA, seed=27)
    queries, targets = pd.Series(queries), pd.Series(targets)
    for mode, free_ends in MODES:
        on_gpu, on_cpu = _small_and_cpu(queries, targets, dict(SCORINGS[scoring], progress=False),
                                        mode=mode, free_ends=free_ends)
        pd.testing.assert_frame_equal(on_gpu, on_cpu, obj=f"{mode} {free_ends}")


def test_the_block_kernels_layout_follows_the_settings(settings, monkeypatch):
    """Two columns a step; strips of the fewest rows (3 to 8) that take the longest query
    in one pass of four warps (or of fewer threads, where set), unless set."""
    monkeypatch.setattr(small, "block_threads", lambda tuning: tuning.small_batch_threads)
    assert [small.block_layout(settings(), longest) for longest in (1, 384, 385, 600, 1025)] \
        == [(2, 3), (2, 3), (2, 4), (2, 5), (2, 8)]
    assert [small.block_layout(settings(small_batch_threads=32), longest)[1]
            for longest in (96, 97, 160, 600)] == [3, 4, 5, 8]
    assert small.block_layout(settings(small_batch_columns=1, small_batch_rows=2), 600) \
        == (1, 2)
    assert small.block_layout(settings(small_batch_columns=4, small_batch_rows=3), 600) \
        == (4, 3)
    with pytest.raises(ValueError, match="small_batch_columns must be 1 to 4"):
        small.block_layout(settings(small_batch_columns=5), 10)
    with pytest.raises(ValueError, match="small_batch_rows must be 2 to 8 or None"):
        small.block_layout(settings(small_batch_columns=2, small_batch_rows=9), 10)


def _with_kernel_mapping(monkeypatch) -> list:
    """Record whether each block kernel built maps residues itself (its last positional
    argument)."""
    mapped = []
    real = block.block_kernel
    monkeypatch.setattr(block, "block_kernel",
                        lambda *args, **keywords: mapped.append(args[-1])
                        or real(*args, **keywords))
    return mapped


@pytest.mark.parametrize("scores", [
    SCORES, dict(matrix="EDNAFULL", gap_open=5, gap_extend=2, progress=False)])
def test_ambiguity_codes_score_as_the_table_says(settings, scores):
    """N and ambiguity codes on both sides of a pair, against themselves and against
    concrete bases: a match/mismatch scoring gives N against N (and an ambiguity code
    against itself) the mismatch, EDNAFULL its own partial scores. The CPU engine's
    frame either way."""
    settings(small_batch_threads=8)
    queries = pd.Series(["ACGTNNRYACGT", "NNNNACGT", "ACGTKMSWBDHV", "GGGNNNCCCAAN"])
    targets = pd.Series(["ACGTNNRYACGT", "TTNNNNACGTT", "ACGTKMSWBDHVN", "GGGNNNCCCAAA"])
    on_gpu, on_cpu = _small_and_cpu(queries, targets, scores, mode="sg")
    pd.testing.assert_frame_equal(on_gpu, on_cpu)
    if "match" in scores:  # (N against N scored the mismatch: no free matches)
        assert on_cpu.score[0] < 12 * scores["match"]


def test_the_kernel_maps_the_bytes_of_rowwise_pairs_itself(monkeypatch, settings):
    """A rowwise job of valid pairs (each sequence in one pair) is uploaded as its bytes,
    which the block kernel maps through the alphabet's table (lower case, U as T, N);
    with a null pair, or a pairwise job (sequences in several pairs), the host maps them
    first. The CPU engine's frame every time."""
    settings(small_batch_threads=8)
    mapped = _with_kernel_mapping(monkeypatch)
    queries, targets = _pairs(4, seed=21)
    whole = slice(0, 4)
    queries = pd.concat([queries[whole], pd.Series(["acgun", "ACGTRY"], index=["x", "y"])])
    targets = pd.concat([targets[whole], pd.Series(["ACGTN", "acgtac"], index=["x", "y"])])
    on_gpu, on_cpu = _small_and_cpu(queries, targets, mode="sg")
    pd.testing.assert_frame_equal(on_gpu, on_cpu)
    assert mapped == [True]
    queries.iloc[1] = None
    on_gpu, on_cpu = _small_and_cpu(queries, targets, mode="sw")
    pd.testing.assert_frame_equal(on_gpu, on_cpu)
    assert mapped == [True, False]
    sequences = targets[:3]
    pd.testing.assert_frame_equal(
        sequences.aln.pairwise(backend="cuda", **SCORES),
        sequences.aln.pairwise(backend="cpu", **SCORES))
    assert mapped == [True, False, False]


@pytest.mark.parametrize("side", ["queries", "targets", "both"])
def test_a_character_the_kernel_finds_outside_the_alphabet_names_its_row(
        monkeypatch, settings, side):
    """A character outside the alphabet in a kernel-mapped batch raises the host
    encoding's error (the CPU engine's: the first such row of the queries, then of the
    targets, its label, position and character), and no frame."""
    from gpualign_df.encode import InvalidResidueError

    settings(small_batch_threads=8)
    mapped = _with_kernel_mapping(monkeypatch)
    queries = pd.Series(["ACGTACGT", "GATTACA", "CCGGA"], index=["a", "b", "c"])
    targets = pd.Series(["ACGTACG", "GATTAACA", "CCGA"], index=["a", "b", "c"])
    if side in ("queries", "both"):
        queries["c"] = "CCJGA"
    if side in ("targets", "both"):
        targets["b"] = "GATTAQCA"
    with pytest.raises(InvalidResidueError) as on_cpu:
        queries.aln.rowwise(targets, backend="cpu", **SCORES)
    with pytest.raises(InvalidResidueError) as on_gpu:
        queries.aln.rowwise(targets, backend="cuda", **SCORES)
    assert mapped == [True]
    assert str(on_gpu.value) == str(on_cpu.value)
    expected = ("c", 2, "J") if side != "targets" else ("b", 5, "Q")
    assert (on_gpu.value.label, on_gpu.value.position, on_gpu.value.character) == expected


def test_calls_alternating_scorings_each_use_their_own_tables(settings):
    """The device tables kept for the last scoring (``scoring_tables``) are the call's
    own: calls alternating two scorings, then a protein matrix, give the CPU engine's
    frames."""
    from gpualign_df.gpu import buffers

    settings(small_batch_threads=8)
    queries, targets = _pairs(3, seed=31)
    other = dict(match=1, mismatch=-4, gap_open=3, gap_extend=1, progress=False)
    for scores in (SCORES, other, SCORES):
        on_gpu, on_cpu = _small_and_cpu(queries, targets, scores, mode="sw")
        pd.testing.assert_frame_equal(on_gpu, on_cpu)
    kept = next(iter(buffers.SCORING_TABLES.values()))[0]
    assert (kept.gap_open, kept.gap_extend) == (SCORES["gap_open"], SCORES["gap_extend"])
    proteins = pd.Series(["MKTAYIAKQR", "WWCHEKL"]), pd.Series(["MKTAYAKQR", "WCHEKLL"])
    on_gpu, on_cpu = _small_and_cpu(*proteins, dict(matrix="BLOSUM62", progress=False),
                                    mode="nw")
    pd.testing.assert_frame_equal(on_gpu, on_cpu)
