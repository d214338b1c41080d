"""The CPU engine as users meet it on long jobs: Ctrl-C stops it within a second, the
progress bar moves during one long pair, concurrent calls from several threads are safe on
every numba threading layer, and jobs that cannot fit in host memory are refused before any
work with an error that says what would fit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import config, engine

DNA = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cpu")


def random_dna(rng: np.random.Generator, length: int) -> str:
    return "".join(rng.choice(list("ACGT"), length))


def test_ctrl_c_stops_one_long_pair_within_a_second():
    """One pair of 80 kbp x 80 kbp runs for several seconds (score only, across the SIMD
    lanes); SIGINT in the middle raises KeyboardInterrupt in the caller well within a
    second."""
    script = textwrap.dedent("""
        import signal, time, numpy as np, gpualign_df
        # Python's own Ctrl-C handler, as an interactive session has, even where this test
        # runs in a background job (which starts with SIGINT ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rng = np.random.default_rng(0)
        a, b = ("".join(rng.choice(list("ACGT"), 80000)) for _ in range(2))
        options = dict(mode="nw", backend="cpu", traceback=False)
        gpualign_df.align(["ACGT" * 600], ["ACGA" * 600], **options)  # compile
        print("start", flush=True)
        started = time.perf_counter()
        try:
            gpualign_df.align([a], [b], progress=False, **options)
            print("finished", time.perf_counter() - started, flush=True)
        except KeyboardInterrupt:
            print("interrupted", time.perf_counter() - started, flush=True)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "start"
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        out, err = process.communicate(timeout=60)
        waited = time.perf_counter() - sent
    finally:
        process.kill()
    assert out.startswith("interrupted"), (out, err)
    assert waited < 1.5, f"the process took {waited:.2f} s to stop after SIGINT"


def test_progress_moves_within_one_long_pair(bars):
    """The bar of a one-pair job is updated while the pair computes, not once at its end."""
    rng = np.random.default_rng(1)
    query, target = random_dna(rng, 5000), random_dna(rng, 5000)
    with config.override(progress_interval=0.002):
        frame = gpualign_df.align([query], [target], mode="nw", **DNA)
    assert frame["score"].notna().all()
    (bar,) = bars
    partial = [value for value in bar.updates if 0 < value < 5000 * 5000]
    assert len(partial) >= 2, f"progress values seen: {bar.updates}"
    assert bar.updates == sorted(bar.updates) and bar.n == 5000 * 5000


def test_concurrent_calls_under_the_workqueue_layer():
    """numba's workqueue layer aborts the process (SIGABRT) when two threads enter a parallel
    region at once; the engine uses no such region, so concurrent calls give the results of
    sequential ones."""
    script = textwrap.dedent("""
        import threading, numpy as np, gpualign_df
        rng = np.random.default_rng(0)
        queries = ["".join(rng.choice(list("ACGT"), n)) for n in (3000, 100, 2500, 40)]
        targets = ["".join(rng.choice(list("ACGT"), n)) for n in (2900, 120, 2600, 50)]
        big = ["ACGT" * 300_000]                              # 1.2 MB: encoded on threads
        expected = gpualign_df.align(queries, targets, backend="cpu")
        failures = []
        def work():
            for _ in range(3):
                if not gpualign_df.align(queries, targets, backend="cpu").equals(expected):
                    failures.append("differs")
                gpualign_df.align(big, ["ACGT"], backend="cpu", traceback=False)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print("done", len(failures))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "NUMBA_THREADING_LAYER": "workqueue"},
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["done", "0"]


def test_a_pair_that_cannot_fit_even_in_linear_space_is_refused_before_any_work(monkeypatch):
    """A pair whose 4-bit matrix cannot fit is traced back in linear space
    (tests/test_linear_space.py); one whose checkpoints and block cannot fit either is
    refused at once, with its lengths and what it needs."""
    monkeypatch.setattr(engine, "available_host_memory", lambda: 1 << 20)   # 1 MiB
    started = time.perf_counter()
    with pytest.raises(MemoryError, match=r"20000 x 20000 needs .* even in linear space, .*"
                                          r"traceback=False") as info:
        gpualign_df.align(["A" * 20000], ["C" * 20000], mode="nw", **DNA)
    assert isinstance(info.value, engine.HostMemoryError)
    assert time.perf_counter() - started < 2
    # score only needs no traceback and runs
    frame = gpualign_df.align(["A" * 2000], ["A" * 2100], mode="nw", traceback=False, **DNA)
    assert frame["score"].tolist() == [2000 - 7 - 99]


def test_threads_shrink_so_traceback_matrices_fit(monkeypatch):
    """Each one-pair thread holds one traceback matrix: with room for one at a time the job
    still runs, on one thread, and gives the same frame (traceback_memory large enough for
    the full matrices, which the job's host budget still bounds)."""
    rng = np.random.default_rng(2)
    queries = [random_dna(rng, 3000) for _ in range(3)]
    targets = [random_dna(rng, 3000) for _ in range(3)]
    expected = gpualign_df.align(queries, targets, mode="nw", **DNA)
    threads_used = []
    real = engine.cpu_threads

    def spy(*args, **kwargs):
        threads_used.append(real(*args, **kwargs))
        return threads_used[-1]

    monkeypatch.setattr(engine, "cpu_threads", spy)
    monkeypatch.setattr(engine, "available_host_memory", lambda: 2 * 3000 * 1501 * 3 // 2)
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, mode="nw",
                                                    traceback_memory=1 << 30, **DNA), expected)
    assert threads_used == [1]


def test_jobs_keep_their_threads_and_never_run_more_items_than_asked():
    """run_interruptible: at most ``threads`` items run at once, every item runs once, the
    worker threads outlive the job (the next job starts none), and an item that itself
    runs a job runs that job's items inline instead of waiting on the threads it holds."""
    running, most, ran = [0], [0], []
    lock = threading.Lock()

    def item(control, slot):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.005)
        with lock:
            running[0] -= 1
            ran.append(slot)

    engine.run_interruptible([item] * 6, 1, lambda done: None, 0.01)
    assert most[0] == 1 and sorted(ran) == list(range(6))
    ran.clear()
    engine.run_interruptible([item] * 12, 3, lambda done: None, 0.01)
    assert most[0] <= 3 and sorted(ran) == list(range(12))
    workers = {thread for thread in threading.enumerate() if thread.name.startswith("gpualign")}
    ran.clear()
    engine.run_interruptible([item] * 12, 3, lambda done: None, 0.01)
    assert sorted(ran) == list(range(12))
    assert {thread for thread in threading.enumerate()
            if thread.name.startswith("gpualign")} == workers
    inner = []

    def nested(control, slot):
        engine.run_interruptible([lambda c, k: inner.append(threading.current_thread())] * 4,
                                 4, lambda done: None, 0.01)

    engine.run_interruptible([nested] * 2, 2, lambda done: None, 0.01)
    assert len(inner) == 8 and all(thread.name.startswith("gpualign") for thread in inner)


def test_an_error_in_one_worker_stops_the_others():
    """run_interruptible: an item that raises sets the stop flag; the exception propagates
    once every running item has returned."""
    stopped = threading.Event()

    def failing(control, slot):
        raise RuntimeError("boom")

    def waiting(control, slot):
        deadline = time.perf_counter() + 10
        while control[0] == 0 and time.perf_counter() < deadline:
            time.sleep(0.001)
        if control[0]:
            stopped.set()

    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="boom"):
        engine.run_interruptible([waiting, failing], 2, lambda done: None, 0.01)
    assert stopped.is_set() and time.perf_counter() - started < 5


def test_a_search_in_many_blocks_shows_one_bar(bars, settings):
    """A CPU search with top_k scores its queries in blocks, then traces back the
    survivors: one bar covers all of it, so it appears and moves even when every block is
    short."""
    settings(search_block_pairs=20)
    rng = np.random.default_rng(4)
    queries = [random_dna(rng, 30) for _ in range(12)]
    database = [random_dna(rng, 40) for _ in range(10)]
    frame = gpualign_df.align(queries, database, how="search", top_k=2, **DNA)
    assert len(frame) == 24
    assert len(bars) == 1
    (bar,) = bars
    assert bar.n >= 12 * 30 * 10 * 40 and len(bar.updates) >= 6


def test_streamed_batches_show_one_bar(bars):
    rng = np.random.default_rng(5)
    sequences_ = [random_dna(rng, 50) for _ in range(30)]
    with config.override(stream_batch_pairs=40):
        frames = list(gpualign_df.align_batches(sequences_, how="pairwise", **DNA))
    assert len(frames) > 5 and len(bars) == 1
    assert bars[0].n == bars[0].total == 50 * 50 * 30 * 29 // 2


def test_a_small_job_runs_on_the_calling_thread_with_no_bar(monkeypatch):
    """A CPU job of at most ``small_job_cells`` cells hands no item to a worker thread, makes no
    progress bar and reads no /proc/meminfo (it would cost longer than the work), and its
    frame is the threaded job's, lanes and one-pair kernels alike; a larger one uses
    threads and a bar."""
    from helpers import RecordingBar

    rng = np.random.default_rng(9)
    queries = [random_dna(rng, 60) for _ in range(20)] + [random_dna(rng, 200)]
    targets = [random_dna(rng, 70) for _ in range(20)] + [random_dna(rng, 230)]
    with config.override(small_job_cells=0):
        threaded = gpualign_df.align(queries, targets, mode="sg", **DNA)
    pools, RecordingBar.made = [], []
    real_pool = engine.worker_pool
    monkeypatch.setattr(engine, "worker_pool",
                        lambda *args, **kwargs: pools.append(args) or real_pool(*args, **kwargs))
    monkeypatch.setattr(engine, "tqdm", RecordingBar)
    monkeypatch.setattr(engine, "available_host_memory",
                        lambda: pytest.fail("a small job read /proc/meminfo"))
    cells = sum(len(q) * len(t) for q, t in zip(queries, targets))
    with config.override(small_job_cells=cells):
        pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, mode="sg", **DNA),
                                      threaded)
    assert pools == [] and RecordingBar.made == []
    monkeypatch.undo()
    monkeypatch.setattr(engine, "worker_pool",
                        lambda *args, **kwargs: pools.append(args) or real_pool(*args, **kwargs))
    monkeypatch.setattr(engine, "tqdm", RecordingBar)
    with config.override(small_job_cells=cells - 1):
        pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, mode="sg", **DNA),
                                      threaded)
    assert len(pools) == 1 and len(RecordingBar.made) == 1


def test_a_small_job_plans_without_the_memory_passes_while_its_matrices_fit(monkeypatch):
    """A small job whose largest traceback matrix fits its budget plans for its one thread
    without the memory choices' passes (no linear-space rows, no thread count over its
    pairs); one whose matrices exceed ``traceback_memory`` still takes the linear space.
    Either way the frame is the threaded job's."""
    from gpualign_df.kernels import cpu_linear

    rng = np.random.default_rng(4)
    queries = [random_dna(rng, 80) for _ in range(6)]
    targets = [random_dna(rng, 90) for _ in range(6)]
    with config.override(small_job_cells=0):
        threaded = gpualign_df.align(queries, targets, mode="sw", **DNA)
    calls = []
    for name in ("linear_block_rows", "cpu_threads"):
        monkeypatch.setattr(engine, name, lambda *args, _real=getattr(engine, name), _name=name,
                            **options: calls.append(_name) or _real(*args, **options))
    monkeypatch.setattr(cpu_linear, "align_pairs_linear",
                        lambda *args, _real=cpu_linear.align_pairs_linear, **options:
                        calls.append("linear") or _real(*args, **options))
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, mode="sw", **DNA),
                                  threaded)
    assert calls == []
    # 80 x ceil(90 / 2) = 3,600 bytes a matrix: over 1,000
    pd.testing.assert_frame_equal(gpualign_df.align(queries, targets, mode="sw",
                                                    traceback_memory=1000, **DNA), threaded)
    assert {"linear_block_rows", "cpu_threads", "linear"} <= set(calls)


def test_few_pairs_never_fill_lanes_whatever_their_lengths():
    """lanes_worth_filling's shortcut (fewer pairs than ``min_fill`` of a group's lanes
    never fill it) agrees with its general rule, pairs of length 0 included."""
    from gpualign_df.kernels import cpu_lanes

    rng = np.random.default_rng(3)
    lanes = cpu_lanes.LANES
    for _ in range(200):
        count = int(rng.integers(1, 8))
        query_lengths = rng.integers(0, 5, count) * int(rng.integers(1, 50))
        target_lengths = rng.integers(0, 5, count) * int(rng.integers(1, 50))
        eligible = rng.random(count) < 0.8
        min_fill = float(rng.choice([0.0, 0.1, 0.2, 0.4]))
        got = engine.lanes_worth_filling(eligible, query_lengths, target_lengths, min_fill)
        # the general rule: peel the costliest pairs until a lanes' worth of those left fill
        chosen = np.flatnonzero(eligible)
        chosen = chosen[np.argsort(-(query_lengths * target_lengths)[chosen], kind="stable")]
        expected = eligible.copy()
        for peeled in range(len(chosen) + 1):
            head = chosen[peeled:peeled + lanes]
            box = (int(query_lengths[head].max(initial=0))
                   * int(target_lengths[head].max(initial=0)))
            if len(head) and (query_lengths[head] * target_lengths[head]).sum() \
                    >= min_fill * lanes * box:
                break
        expected[chosen[:peeled]] = False
        assert got.tolist() == expected.tolist(), (query_lengths, target_lengths, min_fill)
