"""The resolved job: every choice about a call made once, before any work, and passed down.

:func:`gpualign_df.api.resolve_job` validates the options and builds a :class:`Job`; the
engine dispatch (:mod:`gpualign_df.engine`), the cuDF path and the streaming batches read
it and never check an option again.

The rule of one pair's traceback memory lives here too, below every engine, so that the
CPU engine (:mod:`gpualign_df.engine`, which re-exports it) and the GPU engine
(:mod:`gpualign_df.gpu`) apply the same one: :func:`traceback_budget` and
:func:`needs_linear_space`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import config
from .scoring import Mode, Scoring

#: The job shapes.
HOWS = ("rowwise", "pairwise", "search")


@dataclass(frozen=True)
class Job:
    """One alignment call, resolved.

    Attributes
    ----------
    how : {"rowwise", "pairwise", "search"}
        The job's shape.
    library : {"pandas", "cudf"}
        The library of the result frame (that of the queries: cuDF in, cuDF out).
    engine : {"cpu", "cuda"}
        The engine that runs the alignments, chosen once by
        :func:`gpualign_df.engine.choose_engine` (backend, GPU present, alphabet size).
    scoring, mode : Scoring, Mode
        Validated scoring and mode (with ``overhang``: semi-global with every end free,
        the nearest of this package's modes; GATK's engine follows its own rules).
    top_k : int or None
        Search only: the best k per query.
    traceback : bool
        False: score and end coordinates only.
    cigar_style : {"=", "M"}
    clip : {None, "soft"}
    progress : bool or None, or a progress bar
        Forced on or off, shown after a delay (None), or an enclosing job's bar
        (:func:`gpualign_df.engine.progress_bar`).
    traceback_memory : int or None
        Bytes that one pair's traceback may take; a pair whose 4-bit traceback matrix is
        larger is traced back in linear space. None: the share ``traceback_memory_share`` of
        the free memory of the engine that runs it (:func:`traceback_budget`).
    overhang : str or None
        GATK's aligner with this overhang strategy (``"softclip"``, ``"indel"``,
        ``"leading_indel"``, ``"ignore"``) instead of ``mode``; None: the package's own
        alignment.
    """

    how: str
    library: str
    engine: str
    scoring: Scoring
    mode: Mode
    top_k: int | None = None
    traceback: bool = True
    cigar_style: str = "="
    clip: str | None = None
    progress: object = None
    traceback_memory: int | None = None
    overhang: str | None = None


def traceback_budget(job_traceback_memory: int | None, available: int,
                     tuning: config.Settings) -> int:
    """Bytes that one pair's traceback may take: the job's ``traceback_memory`` where it
    gives one, else ``traceback_memory_share`` of the ``available`` memory of the engine
    that runs the pair (the host's on the CPU, the device's free memory on the GPU).

    The one rule for every engine; a pair whose full 4-bit traceback exceeds it is traced
    back in linear space (:func:`needs_linear_space`).

    Examples
    --------
    >>> from gpualign_df import config
    >>> tuning = config.Settings(traceback_memory_share=0.25)
    >>> traceback_budget(None, 8 << 30, tuning) == 2 << 30, traceback_budget(1000, 8 << 30, tuning)
    (True, 1000)
    """
    if job_traceback_memory is not None:
        return int(job_traceback_memory)
    return int(available * tuning.traceback_memory_share)


def full_traceback_bytes(query_length, target_length):
    """Bytes of a pair's full 4-bit traceback matrix, ``m * ceil(n / 2)`` (two cells per
    byte, rows padded to whole bytes): Python ints, or int64 arrays (numpy, CuPy) for
    arrays of lengths."""
    return _as_int64(query_length) * ((_as_int64(target_length) + 1) // 2)


def needs_linear_space(query_length, target_length, budget: int):
    """Whether a pair's full 4-bit traceback (:func:`full_traceback_bytes`) exceeds
    ``budget`` bytes (:func:`traceback_budget`), so that its traceback runs in linear space.
    Elementwise for arrays of lengths (numpy or CuPy): a bool array.

    Examples
    --------
    >>> needs_linear_space(20_000, 20_000, 100 << 20), needs_linear_space(2000, 2000, 100 << 20)
    (True, False)
    >>> needs_linear_space(np.array([10, 3]), np.array([10, 3]), 40).tolist()
    [True, False]
    """
    return full_traceback_bytes(query_length, target_length) > budget


def _as_int64(value):
    """A length as an exact integer: Python int, or an int64 array (numpy, CuPy)."""
    if hasattr(value, "astype") and getattr(value, "ndim", 0) > 0:
        return value.astype(np.int64)
    return int(value)
