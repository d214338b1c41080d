"""The resolved job: every choice about a call made once, before any work, and passed down.

:func:`gpualign_df.api.resolve_job` validates the options and builds a :class:`Job`; the
engine dispatch (:mod:`gpualign_df.engine`), the cuDF path and the streaming batches read
it and never check an option again.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        Validated scoring and mode.
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
        the free memory of the engine that runs it (:func:`gpualign_df.engine.traceback_budget`).
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


def traceback_budget(traceback_memory: int | None, available: int, tuning) -> int:
    """Bytes one pair's traceback may take: ``traceback_memory`` where the job gives it,
    else the ``traceback_memory_share`` setting of ``available`` bytes (the free memory of
    the engine that runs the pair). A pair whose traceback needs more is traced back in
    linear space."""
    if traceback_memory is not None:
        return int(traceback_memory)
    return int(available * tuning.traceback_memory_share)
