"""On a real GPU: the GPU engine equals the CPU engine on the real data sets.

Run on the accelerator with ``GPUALIGN_REAL_GPU=1 python -m pytest -m gpu tests/test_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import config, gpu
from helpers import copies_while, mutate, random_sequences, read_fasta, shared_file

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def real_gpu():
    if not gpu.gpu_usable():
        pytest.skip("needs a real CUDA GPU (set GPUALIGN_REAL_GPU=1 on a GPU machine)")


def assert_engines_equal(queries, targets, **options):
    cpu = gpualign_df.align(queries, targets, backend="cpu", **options)
    cuda = gpualign_df.align(queries, targets, backend="cuda", **options)
    pd.testing.assert_frame_equal(cpu, cuda)
    return cuda


@pytest.mark.usefixtures("batch_path")  # (the planner's batches, walk and CIGAR kernel)
@pytest.mark.parametrize("options", [dict(mode="nw"), dict(mode="sg", cigar_style="M"),
                                     dict(mode="sw", clip="soft")])
def test_cigars_of_many_runs_equal_cpu(options):
    """Pairs of related sequences (a sixth of the residues changed; unrelated flanks on
    the queries to clip), whose CIGARs take from a few runs to hundreds (many run words
    a slot of the walk, many characters a thread of the CIGAR kernel), give the CPU
    engine's frames in both CIGAR styles and with soft clips."""
    rng = np.random.default_rng(11)
    cores = random_sequences(rng, 400, "ACGT", 500, 20)
    flanks = random_sequences(rng, 800, "ACGT", 30)
    queries = [left + core + right for left, core, right in zip(flanks[::2], cores,
                                                                flanks[1::2])]
    targets = [mutate(rng, core, "ACGT", 0.06) for core in cores]
    frame = assert_engines_equal(queries, targets, match=2, mismatch=-3, gap_open=3,
                                 gap_extend=1, **options)
    runs = frame["cigar"].str.count(r"[=XIDMS]")
    assert runs.max() > 3 * 32 and (runs <= 32).any()
    if options.get("clip") == "soft":
        assert frame["cigar"].str.contains("S").any()


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_gasal2_pairs_gpu_equals_cpu(mode):
    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"))
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"))
    frame = assert_engines_equal(queries, targets, mode=mode, match=1, mismatch=-4, gap_open=7,
                                 gap_extend=1)
    assert len(frame) == 20_000 and frame["cigar"].notna().all()


def test_gasal2_glocal_and_score_only_gpu_equals_cpu():
    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"), limit=5000)
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"), limit=5000)
    assert_engines_equal(queries, targets, mode="sg", free_ends=("target_start", "target_end"),
                         match=1, mismatch=-4, gap_open=7, gap_extend=1, cigar_style="M",
                         clip="soft")
    assert_engines_equal(queries, targets, mode="sw", match=1, mismatch=-4, gap_open=7,
                         gap_extend=1, traceback=False)


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_adept_protein_sample_gpu_equals_cpu(mode):
    proteins = read_fasta(shared_file("adept_proteins_30k.fasta.gz"))
    rng = np.random.default_rng(7)
    first = rng.choice(len(proteins), 3000)
    second = rng.choice(len(proteins), 3000)
    assert_engines_equal([proteins[k] for k in first], [proteins[k] for k in second], mode=mode,
                         matrix="BLOSUM62", gap_open=11, gap_extend=1)


def test_hifi_pairs_gpu_equals_cpu():
    queries = read_fasta(shared_file("hifi_50_query.fasta.gz"))
    targets = read_fasta(shared_file("hifi_50_target.fasta.gz"))
    frame = assert_engines_equal(queries, targets, mode="sw", match=1, mismatch=-4, gap_open=7,
                                 gap_extend=1)
    assert (frame["identity"] > 0.9).mean() > 0.5


def test_random_sets_with_empty_and_single_residues_gpu_equals_cpu():
    rng = np.random.default_rng(11)
    queries = random_sequences(rng, 3000, "ACGT", 300)
    targets = random_sequences(rng, 3000, "ACGT", 300)
    queries[::97] = [""] * len(queries[::97])
    targets[::89] = ["A"] * len(targets[::89])
    for mode in ("sw", "nw", "sg"):
        assert_engines_equal(queries, targets, mode=mode, match=2, mismatch=-3, gap_open=5,
                             gap_extend=2)


@pytest.mark.usefixtures("batch_path")  # (the planner's batches and kernels)
def test_batches_split_by_memory_return_every_row(monkeypatch):
    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"), limit=4000)
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"), limit=4000)
    whole = gpualign_df.align(queries, targets, backend="cuda", match=1, mismatch=-4, gap_open=7,
                              gap_extend=1)
    monkeypatch.setattr(gpu.batches, "free_bytes", lambda: 20 << 20)  # many small batches
    split = gpualign_df.align(queries, targets, backend="cuda", match=1, mismatch=-4,
                              gap_open=7, gap_extend=1)
    pd.testing.assert_frame_equal(whole, split)


def test_51kbp_pair_aligns_on_the_gpu_and_equals_cpu():
    """hg38 vs CHM13, 51,025 x 51,024 bp: the intra-task kernel, traceback 1.3 GB."""
    first, second = read_fasta(shared_file("hg38_chm13_51kbp_pair.fasta.gz"))
    frame = assert_engines_equal([first], [second], mode="nw", matrix="EDNAFULL", gap_open=10,
                                 gap_extend=1)
    assert frame["length"][0] >= max(len(first), len(second))
    assert frame["identity"][0] > 0.9


@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_adept_search_top_k_gpu_equals_cpu(mode):
    """The device cross-product search (score matrix + top-k) keeps the CPU engine's hits."""
    proteins = read_fasta(shared_file("adept_proteins_30k.fasta.gz"))
    queries = proteins[:150] + [None, ""]
    database = proteins[1000:4000] + [None, "", proteins[7]]
    frame = assert_engines_equal(queries, database, how="search", top_k=10, mode=mode,
                                 matrix="BLOSUM62", gap_open=11, gap_extend=1)
    assert len(frame) == 10 * len(queries)
    hits = frame[frame["query"] == 7]   # a query finds its own copy among the best
    assert hits.loc[hits["target"] == len(database) - 1, "score"].item() == hits["score"].max()


def test_prepared_database_search_equals_the_series_search():
    """A prepared ADEPT database searched twice on the GPU (the second search from the
    device copy and length classes the first one kept) gives the CPU engine's frames of
    the Series it was made from."""
    proteins = pd.Series(read_fasta(shared_file("adept_proteins_30k.fasta.gz")))
    series = proteins[2000:12000]
    prepared = gpualign_df.database(series, matrix="BLOSUM62")
    options = dict(how="search", top_k=10, matrix="BLOSUM62", gap_open=11, gap_extend=1)
    for queries in (proteins[:60], proteins[2010:2040]):
        got = gpualign_df.align(queries, prepared, backend="cuda", **options)
        pd.testing.assert_frame_equal(
            got, gpualign_df.align(queries, series, backend="cpu", **options))
    own = got[got["query"] == got["target"]]   # each query finds its own copy, best
    assert len(own) == 30 and (own.set_index("query")["score"]
                               == got.groupby("query")["score"].max()).all()
    assert sum(key[0] == "classes" for key in prepared.sequences.keep) == 1


def test_packed_running_best_equals_its_plain_form():
    """The linked 16-bit running best (explicit compares per lane) gives the plain form's
    values and positions on random lanes, ties included."""
    from numba import cuda

    from gpualign_df.kernels import dpx

    if not dpx.available():
        pytest.skip("DPX needs sm_90")
    rng = np.random.default_rng(5)
    count = 1 << 16
    halves = rng.integers(-40, 40, size=(2, 2, count))   # small range: many ties
    halves[:, :, : count // 2] = rng.integers(-16000, 16000, size=(2, 2, count // 2))
    packed = ((halves[:, 1] << 16) | (halves[:, 0] & 0xFFFF)).astype(np.int64)
    packed = np.where(packed >= 1 << 31, packed - (1 << 32), packed).astype(np.int32)
    positions = rng.integers(1, 30000, size=(2, 2, count))
    position_words = ((positions[:, 1] << 16) | positions[:, 0]).astype(np.int32)
    results = []
    for use_dpx in (True, False):
        keep_best2 = dpx.keep_best2(use_dpx)

        @cuda.jit
        def run(best, h, best_j, j, out):
            k = cuda.grid(1)
            if k < best.shape[0]:
                out[k] = keep_best2(best[k], h[k], best_j[k], j[k])

        out = cuda.device_array(count, np.int64)
        run[count // 128, 128](packed[0], packed[1], position_words[0], position_words[1], out)
        results.append(out.copy_to_host())
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("mode, free_ends", [("nw", None), ("sw", None),
                                             ("sg", ("target_start",))])
@pytest.mark.parametrize("gap_open, gap_extend", [(7, 1), (0, 0), (11, 11)])
def test_top_border_words_on_the_device_equal_the_host_ones(mode, free_ends, gap_open,
                                                           gap_extend):
    """The elementwise kernel's row-0 border words equal :func:`band.top_row`'s."""
    from types import SimpleNamespace

    from gpualign_df.gpu import long
    from gpualign_df.kernels import band
    from gpualign_df.kernels.strip import mode_shape
    from gpualign_df.scoring import parse_mode

    parsed = parse_mode(mode, free_ends)
    job = SimpleNamespace(flags=(parsed.code, *parsed.flags()), gap_open=gap_open,
                          gap_extend=gap_extend)
    local, _corner, free_row0 = mode_shape(*job.flags)[:3]
    for n in (0, 1, 1000):
        np.testing.assert_array_equal(long.top_words(job, n).get(),
                                      band.top_row(n, gap_open, gap_extend, free_row0, local))


@pytest.mark.usefixtures("batch_path")  # (the planner's batches and kernels)
@pytest.mark.parametrize("traceback", [True, False])
def test_fast_launches_equal_numba_launches(traceback):
    """Kernels launched with the arguments laid out here (``gpualign_df.gpu.launch``) give
    the frames numba's own launch path gives, in every mode, and the fast path is taken."""
    from gpualign_df.gpu import launch

    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"), limit=3000)
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"), limit=3000)
    options = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda",
                   traceback=traceback)
    for mode in ("sw", "nw", "sg"):
        with config.override(fast_launch=False):
            slow = gpualign_df.align(queries, targets, mode=mode, **options)
        gpualign_df.align(queries, targets, mode=mode, **options)  # first launches: numba's
        fast_before = launch.LAUNCHES["fast"]
        fast = gpualign_df.align(queries, targets, mode=mode, **options)
        assert launch.LAUNCHES["fast"] > fast_before
        pd.testing.assert_frame_equal(slow, fast)


def test_argument_kinds_read_every_layout():
    """A launch's key describes a CuPy array by dtype, dimensions and numba's layout
    (C-contiguous, else F-contiguous, else any), read from the array's own fields, as
    its flags give them; scalars by type; anything else is left to numba."""
    import cupy

    from gpualign_df.gpu import launch

    base = cupy.zeros((4, 6), np.int32)
    for array, layout in ((base, "C"), (base.T, "F"), (base[:, ::2], "A"), (base[1], "C"),
                          (base[:, 1], "A"), (cupy.zeros(0, np.uint8), "C")):
        flags = array.flags
        assert layout == ("C" if flags.c_contiguous else "F" if flags.f_contiguous else "A")
        assert launch._kind(array) == (array.dtype, array.ndim, layout)
    assert launch._kind(3) is int and launch._kind(np.int64(3)) is np.int64
    assert launch._kind("text") is None and launch._kind(np.zeros(3)) is None


def test_marshalled_slots_are_numbas_layout():
    """One pass gives each argument's kind (as :func:`_kind` reads it) and the values of
    its parameter slots as numba's ``_prepare_args`` lays them out: an array's meminfo
    and parent (0), size, item size, pointer, shape and strides; an integer or boolean
    as itself, an unsigned 64-bit one by its bits, a float by its bits; a kind the fast
    path does not take stops it."""
    import cupy

    from gpualign_df.gpu import launch

    base = cupy.zeros((4, 6), np.int32)
    view = base[:, ::2]
    arguments = (view, 7, True, np.uint64(2**64 - 1), 0.5, np.int32(-3))
    kinds, values = launch._marshal(arguments)
    assert kinds == tuple(launch._kind(argument) for argument in arguments)
    assert values == [0, 0, 12, 4, view.data.ptr, 4, 3, 24, 8, 7, 1, -1,
                      int(np.float64(0.5).view(np.int64)), -3]
    assert launch._marshal((base, "text")) == (None, [])
    assert launch._marshal((np.float32(1.0),)) == (None, [])


def test_search_score_pass_leaves_the_default_stream_free():
    """A search's score pass runs on the engine's side stream: a device-to-host copy that
    another thread puts on the default stream meanwhile (a Dask worker sending a partition)
    does not wait for the pass, and the frame equals the one of a pass on the default
    stream."""
    proteins = pd.Series(read_fasta(shared_file("adept_proteins_30k.fasta.gz")))
    queries = proteins[:1000]
    options = dict(how="search", top_k=10, matrix="BLOSUM62", gap_open=11, gap_extend=1,
                   backend="cuda")
    with config.override(side_stream=False):
        on_default = gpualign_df.align(queries, proteins, **options)
    seconds, copies, on_side = copies_while(
        lambda: gpualign_df.align(queries, proteins, **options), every=0.005)
    pd.testing.assert_frame_equal(on_default, on_side)
    # the pass is most of the job: a copy queued behind it would wait about as long
    assert len(copies) > 5 and max(copies) < 0.2 * seconds, (max(copies), seconds)


@pytest.mark.usefixtures("batch_path")  # (the planner's batches and kernels)
@pytest.mark.parametrize("mode", ["sw", "nw", "sg"])
def test_fills_on_the_side_stream_equal_the_default_stream(mode):
    """Every fill kernel (32-bit inter-task, packed 16-bit, grouped, intra-task for a long
    pair) run on the side stream (every batch at least ``side_stream_cells``), or on the
    default stream with the walk's residue gather beside it on the side stream (the
    defaults), gives the frames of the default stream alone."""
    queries = read_fasta(shared_file("gasal2_query_batch.fasta.gz"), limit=3000)
    targets = read_fasta(shared_file("gasal2_target_batch.fasta.gz"), limit=3000)
    long_pair = random_sequences(np.random.default_rng(11), 2, "ACGT", 3000, 3000)
    options = dict(mode=mode, match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda")
    jobs = [(queries, targets, {}), (queries, targets, {"traceback": False}),
            (long_pair[:1], long_pair[1:], {})]
    frames = []
    for streams in ({"side_stream": False}, {"side_stream": True, "side_stream_cells": 0},
                    {"side_stream": True}):
        # fill_16bit None: packed cells where DPX runs
        with config.override(**streams, fill_16bit=None):
            frames.append([gpualign_df.align(job_queries, job_targets, **options, **extra)
                           for job_queries, job_targets, extra in jobs])
    for on_default, *others in zip(*frames):
        for other in others:
            pd.testing.assert_frame_equal(on_default, other)


@pytest.mark.parametrize("longest", [200, 300, 1 << 16, 1 << 20])
def test_device_length_order_equals_the_host(longest):
    """The inter-task plan's length sort on the device orders the pairs by target length,
    then query length, both descending, as the host's stable sort does: where the lengths
    make at most ``COUNT_BINS`` keys (lengths below 200: 40,000) by counting, pairs of
    equal lengths in any order; else by CuPy's stable argsort (32-bit keys where every
    length is below 2**16, 64-bit ones above), ties in row order."""
    import cupy

    from gpualign_df.gpu.plan import length_order
    from gpualign_df.kernels.planning import COUNT_BINS
    rng = np.random.default_rng(longest)
    queries = rng.integers(0, min(longest, 1 << 16), 5000)
    targets = rng.integers(0, longest, 5000)
    targets[:100] = targets[100:200]   # ties
    queries[:100] = queries[100:200]
    longest_target, longest_query = int(targets.max()), int(queries.max())
    host = length_order(np, targets, queries, longest_target, longest_query)
    device = length_order(cupy, cupy.asarray(targets), cupy.asarray(queries), longest_target,
                          longest_query).get()
    if (longest_target + 1) * (longest_query + 1) > COUNT_BINS:
        assert (device == host).all()
    else:
        assert sorted(device) == list(range(len(targets)))
        assert (targets[device] == targets[host]).all()
        assert (queries[device] == queries[host]).all()


def test_large_uploads_from_pageable_and_pinned_memory():
    """``pinned_bytes`` rounds its pool blocks up to a power of two, so a request near
    the last one's size takes the same block again. ``upload_parts`` sends a large part
    by ``send_bytes``: from pageable memory (an Arrow buffer, a slice at an odd address)
    in pieces through pinned memory, from pinned memory by one copy; the device bytes
    equal the host's, beside a small part in the shared transfer. A pandas job of
    several pieces' bytes is mapped on the device and equals the CPU engine's frame."""
    import cupy
    import cupyx
    import pyarrow as pa

    from gpualign_df.gpu.buffers import (SEND_PIECE_BYTES, SHARED_UPLOAD_BYTES, pinned_bytes,
                                         upload_parts)

    first = pinned_bytes(5 << 20)     # a block of 8 MiB: a request of 6 MiB takes it again
    address = first.ctypes.data
    assert len(first) == 5 << 20 and first.base.nbytes == 8 << 20
    del first
    assert pinned_bytes(6 << 20).ctypes.data == address
    rng = np.random.default_rng(5)
    for size in (SHARED_UPLOAD_BYTES + 1, 3 * SEND_PIECE_BYTES + 7):
        host = rng.integers(0, 256, size + 3, dtype=np.uint8)
        pinned = cupyx.empty_pinned(size, np.uint8)
        pinned[:] = host[:size]
        arrow = np.frombuffer(pa.py_buffer(host.tobytes()), np.uint8)[3:]
        for source in (host[:size], pinned, arrow):
            small, large = upload_parts([source[:5], source])
            assert isinstance(large, cupy.ndarray) and len(large) == len(source)
            assert (large.get() == source).all() and (small.get() == source[:5]).all()
    queries = random_sequences(rng, 4000, "ACGTN", 900, 600)
    targets = [mutate(rng, query, "ACGT", 0.1) for query in queries]
    assert min(sum(map(len, queries)), sum(map(len, targets))) > SEND_PIECE_BYTES // 2
    assert_engines_equal(pd.Series(queries), pd.Series(targets), match=2, mismatch=-3,
                         gap_open=5, gap_extend=2, mode="sg")
