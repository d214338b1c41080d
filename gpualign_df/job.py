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
