"""Test configuration: the CUDA simulator is switched on before numba is imported, so the
kernel tests run on machines without a GPU; on the accelerator run pytest with
GPUALIGN_REAL_GPU=1 to keep the real device."""

import os
import sys
from pathlib import Path

if os.environ.get("GPUALIGN_REAL_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))


import pytest  # noqa: E402


def _simulated_blocks_on_one_core() -> None:
    """The simulator runs a block's threads as Python threads while its manager polls them,
    holding the GIL: a thread let through a barrier waits out the switch interval (5 ms)
    for the GIL, and on several cores every hand-off of the GIL crosses cores. Kernels of
    thousands of barriers (the band fills) then take 5 ms a barrier, and blocks of 32
    busy threads (the grouped fills) stall on hand-offs. Each block runs on one core (a
    core per xdist worker) with a 0.2 ms switch interval: the simulated kernels' tests
    take a third of their time on CI's two cores (pytest 498 s -> 314 s), and nothing
    they compute changes. Only the launching thread and the block's threads are pinned,
    and only while the block runs (on Linux affinity is a thread's, and the threads a
    block starts inherit it); a numba-cuda without ``BlockManager.run`` is left as it is."""
    import threading

    from numba.cuda.simulator import kernel as simulated

    run = getattr(getattr(simulated, "BlockManager", None), "run", None)
    if run is None or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    core = cores[int(worker) % len(cores) if worker.isdigit() else 0]
    lock = threading.Lock()
    running = [0, sys.getswitchinterval()]   # blocks running, the interval before them

    def run_on_one_core(self, *args, **kwargs):
        mask = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {core})
        except OSError:   # (where the system refuses it: the switch interval alone)
            mask = None
        with lock:
            if running[0] == 0:
                running[1] = sys.getswitchinterval()
                sys.setswitchinterval(0.0002)
            running[0] += 1
        try:
            return run(self, *args, **kwargs)
        finally:
            with lock:
                running[0] -= 1
                if running[0] == 0:
                    sys.setswitchinterval(running[1])
            if mask is not None:
                os.sched_setaffinity(0, mask)

    simulated.BlockManager.run = run_on_one_core


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _simulated_blocks_on_one_core()


@pytest.fixture
def no_work(monkeypatch):
    """Make any encoding or alignment work fail the test loudly (not with a ValueError), for
    tests that a job is refused before any work starts."""
    import gpualign_df.api as api

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the job was validated")

    monkeypatch.setattr(api, "encode_sequences", forbidden)
    monkeypatch.setattr(api, "run_pairs", forbidden)


@pytest.fixture
def settings():
    """``settings(name=value, ...)`` overrides gpualign_df.config settings until the test
    ends (a ``with config.override(...)`` around the rest of the test)."""
    import contextlib

    from gpualign_df import config

    with contextlib.ExitStack() as stack:
        yield lambda **changes: stack.enter_context(config.override(**changes))


@pytest.fixture
def bars(monkeypatch):
    """Every progress bar the engines make during the test (tests/helpers.RecordingBar),
    small jobs' too (``small_job_cells`` 0: the tests' jobs are small)."""
    from gpualign_df import config, engine
    from helpers import RecordingBar

    RecordingBar.made = []
    monkeypatch.setattr(engine, "tqdm", RecordingBar)
    with config.override(small_job_cells=0):
        yield RecordingBar.made


@pytest.fixture
def batch_path():
    """GPU jobs on the batch path whatever their size (``small_batch_pairs`` 0), for tests
    of the planner's kernels, which the tests' small jobs would otherwise not reach (they
    run as one small batch, :mod:`gpualign_df.gpu.small`)."""
    from gpualign_df import config

    with config.override(small_batch_pairs=0):
        yield
