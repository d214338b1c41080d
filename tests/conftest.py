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
