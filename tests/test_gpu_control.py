"""The GPU engine on one long pair as users meet it: the progress bar moves while the pair
computes, and Ctrl-C stops the kernel within a second or two (run on a real GPU:
``GPUALIGN_REAL_GPU=1 python -m pytest -m gpu tests/test_gpu_control.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import config, gpu

pytestmark = pytest.mark.gpu

DNA = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda")


@pytest.fixture(autouse=True)
def real_gpu():
    if not gpu.gpu_usable():
        pytest.skip("needs a real CUDA GPU (GPUALIGN_REAL_GPU=1)")


def test_progress_moves_within_one_long_pair(bars):
    # bands report their cells as they finish: a tall pair as one fill (a few thousand
    # bands over a short target) finishes bands all along its fill of some tens of
    # milliseconds. In halves (the default for this global score-only shape) the pair runs
    # transposed, a few hundred bands each as long as half the fill, which report at its
    # end: the bar of such a fill moves only then (a count within a band would be a change
    # of the band kernel's step loop).
    rng = np.random.default_rng(0)
    query, target = ("".join(rng.choice(list("ACGT"), size)) for size in (400_000, 30_000))
    gpualign_df.align([query[:5000]], [target[:5000]], mode="nw", traceback=False, **DNA)
    bars.clear()
    with config.override(progress_interval=0.002, band_halves=False):
        frame = gpualign_df.align([query], [target], mode="nw", traceback=False, **DNA)
    assert frame["score"].notna().all()
    total = 400_000 * 30_000
    (bar,) = bars
    partial = [value for value in bar.updates if 0 < value < total]
    assert len(partial) >= 2, bar.updates
    assert bar.updates == sorted(bar.updates) and bar.n == total


def test_ctrl_c_stops_a_long_pair_on_the_gpu():
    script = textwrap.dedent("""
        import signal, time, numpy as np, gpualign_df
        # Python's own Ctrl-C handler, even in a background job (SIGINT ignored there)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rng = np.random.default_rng(0)
        # a pair of several seconds (9e12 cells), its kernel compiled by the first call
        a, b = ("".join(rng.choice(list("ACGT"), 3_000_000)) for _ in range(2))
        options = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda",
                       mode="nw", traceback=False, progress=False)
        gpualign_df.align([a[:5000]], [b[:5000]], **options)              # compile
        print("start", flush=True)
        started = time.perf_counter()
        try:
            gpualign_df.align([a], [b], **options)
            print("finished", time.perf_counter() - started, flush=True)
        except KeyboardInterrupt:
            print("interrupted", time.perf_counter() - started, flush=True)
        started = time.perf_counter()
        frame = gpualign_df.align([a[:20000]], [b[:20000]], **options)   # the GPU is free
        print("next", time.perf_counter() - started, flush=True)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert process.stdout.readline().strip() == "start"
        time.sleep(2.0)
        process.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        interrupted = process.stdout.readline().split()
        waited = time.perf_counter() - sent
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert interrupted[0] == "interrupted", (interrupted, out, err)
    assert waited < 2.0, f"{waited:.2f} s from SIGINT to KeyboardInterrupt"
    assert out.split()[0] == "next" and float(out.split()[1]) < 5, out


def test_long_fill_on_the_side_stream_waits_for_its_set_up(monkeypatch, settings):
    """A fill on the side stream starts only after the work that prepares it (its buffers
    cleared, uploaded, its top row written), even while that work waits behind a busy
    kernel: here a kernel spins on the current stream just before the top row is made,
    in a pool block that still holds junk. The frames equal the CPU's."""
    import cupy

    settings(side_stream_cells=0, inter_max_cells=0)
    spin = cupy.RawKernel(r'''
        extern "C" __global__ void spin(long long cycles) {
            long long start = clock64();
            while (clock64() - start < cycles) { }
        }''', "spin")
    top_words = gpu.long.top_words

    def busy_first(job, n):
        cupy.full(n + 1, (1 << 62) - 1, dtype=cupy.int64)  # freed: the block the row takes
        spin((1,), (1,), (np.int64(200_000_000),))  # about 0.1 s on the current stream
        return top_words(job, n)

    monkeypatch.setattr(gpu.long, "top_words", busy_first)
    rng = np.random.default_rng(3)
    queries = ["".join(rng.choice(list("ACGT"), 6000)) for _ in range(2)]
    targets = [queries[0][:3000] + queries[0][3100:], queries[1][::-1]]
    for traceback in (False, True):
        options = dict(mode="nw", traceback=traceback, match=1, mismatch=-4, gap_open=7,
                       gap_extend=1)
        cpu = gpualign_df.align(queries, targets, backend="cpu", **options)
        gpu_frame = gpualign_df.align(queries, targets, backend="cuda", **options)
        pd.testing.assert_frame_equal(cpu, gpu_frame)


def test_a_split_fill_stopped_between_its_passes_raises_and_frees_the_gpu(monkeypatch,
                                                                        settings):
    """A split traceback fill whose stop flag is set while its first pass runs (as Ctrl-C
    does) leaves its second pass at once, even though rows it would wait for were never
    written: the wait raises instead of hanging or returning words no tile wrote, and the
    next job gets the whole GPU and the CPU's frame."""
    settings(split_traceback=1e9)
    rng = np.random.default_rng(2)
    query, target = ("".join(rng.choice(list("ACGT"), 20_000)) for _ in range(2))
    gpualign_df.align([query[:3000]], [target[:3000]], mode="nw", **DNA)   # compile
    launch = gpu.long.SplitFill.launch

    def stopped_after_the_first_pass_starts(self, *arguments, **options):
        launch(self, *arguments, **options)
        self.first.control.stop()

    with monkeypatch.context() as patch:
        patch.setattr(gpu.long.SplitFill, "launch", stopped_after_the_first_pass_starts)
        started = time.perf_counter()
        with pytest.raises(RuntimeError, match="finished"):
            gpualign_df.align([query], [target], mode="nw", **DNA)
        assert time.perf_counter() - started < 5
    options = dict(mode="nw", match=1, mismatch=-4, gap_open=7, gap_extend=1)
    pd.testing.assert_frame_equal(
        gpualign_df.align([query[:4000]], [target[:4000]], backend="cuda", **options),
        gpualign_df.align([query[:4000]], [target[:4000]], backend="cpu", **options))
