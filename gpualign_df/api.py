"""The plain-function API: ``gpualign_df.align``, shared by the accessors and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from . import config
from .databases import Database
from .encode import EncodedSequences, encode_sequences
from .engine import (HostMemoryError, check_options, choose_engine, codes_allocator, gib,
                     host_budget, progress_bar, run_pairs, search_rows, search_survivors,
                     small_job_engine, within_host_budget)
from .job import HOWS, Job
from .libraries import is_cudf
from .pairs import (best_first, pairwise_pairs, pairwise_pairs_of_rows,  # noqa: F401 (public)
                    rowwise_pairs, search_pairs)
from .results import ResultFrame, build_frame, empty_frame
from .scoring import OVERHANGS, Mode, Scoring, make_scoring, parse_mode, preset_scores


def _labels(values: Any) -> pd.Index:
    if isinstance(values, pd.Series):
        return values.index
    return pd.RangeIndex(len(values))


def validate_job(how: str, queries: Any, targets: Any, top_k: int | None) -> None:
    """Check the job's shape before any work."""
    if how not in HOWS:
        raise ValueError(f"unknown how {how!r}; use one of {HOWS}")
    if isinstance(queries, Database):
        raise TypeError("a prepared database is searched, not a query collection: pass it "
                        "as the targets of how='search'")
    if isinstance(targets, Database) and how != "search":
        raise ValueError(f"a prepared database serves how='search' only, not how={how!r}")
    for name, values in (("queries", queries), ("targets", targets)):
        if isinstance(values, (str, bytes)):
            shown = f"{values[:20]!r}{'...' if len(values) > 20 else ''}"
            raise TypeError(f"{name} must be a collection of sequences (a Series or a list), "
                            f"not one string: pass [{shown}] for a single sequence")
    if how == "pairwise" and targets is not None:
        raise ValueError("how='pairwise' aligns all pairs within one collection: give no targets")
    if how in ("rowwise", "search") and targets is None:
        raise ValueError(f"how={how!r} needs targets")
    if how == "rowwise" and len(queries) != len(targets):
        raise ValueError(f"rowwise needs equal lengths: {len(queries)} queries, "
                         f"{len(targets)} targets")
    if top_k is not None:
        if how != "search":
            raise ValueError("top_k applies to how='search' only")
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")


def align(
    queries: pd.Series | Sequence[str | None],
    targets: pd.Series | Sequence[str | None] | Database | None = None,
    *,
    how: str = "rowwise",
    mode: str | None = None,
    matrix: str | pd.DataFrame | tuple | None = None,
    match: int | None = None,
    mismatch: int | None = None,
    gap_open: int | None = None,
    gap_extend: int | None = None,
    preset: str | None = None,
    free_ends: Iterable[str] | str | None = None,
    top_k: int | None = None,
    traceback: bool = True,
    cigar_style: str = "=",
    clip: str | None = None,
    backend: str = "auto",
    progress: bool | None = None,
    traceback_memory: int | None = None,
    overhang: str | None = None,
) -> pd.DataFrame:
    """Align sequences pair by pair and return one row per alignment.

    Parameters
    ----------
    queries : pandas.Series, cudf.Series or sequence of str
        Query sequences; the Series index labels fill the ``query`` column. A cuDF Series
        gives a cuDF frame.
    targets : pandas.Series, sequence of str or Database, optional
        Targets for ``how="rowwise"`` (row k against row k) or the database for
        ``how="search"`` (also a :class:`~gpualign_df.databases.Database` prepared once
        by :func:`~gpualign_df.databases.database`); None for ``how="pairwise"``.
    how : {"rowwise", "pairwise", "search"}
        Job shape: element-wise, all pairs i < j within ``queries``, or every query
        against every target (best first per query).
    mode : {"sw", "local", "nw", "global", "sg", "semiglobal"}, optional
        Smith-Waterman (the default), Needleman-Wunsch or semi-global (end gaps free).
    matrix : str, pandas.DataFrame or (alphabet, table), optional
        Substitution matrix; default EDNAFULL unless ``match``/``mismatch`` are given.
    match, mismatch : int, optional
        DNA scoring (ACGT, U read as T, IUPAC codes score ``mismatch`` always).
    gap_open, gap_extend : int, optional
        Positive costs; a gap of length k costs ``gap_open + (k - 1) * gap_extend``
        (default 10 and 1).
    preset : str, optional
        Named scores and gap costs (:data:`gpualign_df.scoring.PRESETS`), instead of
        ``matrix``, ``match``, ``mismatch``, ``gap_open`` and ``gap_extend``: GATK
        HaplotypeCaller's ``"gatk-haplotype-to-reference"`` (200, -150, 260, 11),
        ``"gatk-read-to-haplotype"`` (10, -15, 30, 5), ``"gatk-standard-ngs"`` (25, -50,
        110, 6) and ``"gatk-original"`` (3, -1, 4, 3), as (match, mismatch, gap_open,
        gap_extend).
    free_ends : iterable of str or "all", optional
        Semi-global only: which of ``query_start``, ``query_end``, ``target_start``,
        ``target_end`` are free (default all four).
    top_k : int, optional
        Search only: keep the best k targets per query (score-only pass first, traceback
        for the survivors only).
    traceback : bool
        False returns only ``score``, ``query_end`` and ``target_end``, much faster.
    cigar_style : {"=", "M"}
        Extended CIGAR (``=``/``X``) or classic ``M``.
    clip : {None, "soft"}
        ``"soft"`` adds ``S`` operations for the unaligned query ends.
    backend : {"auto", "cpu", "cuda"}
        Engine: ``"auto"`` takes the GPU when one is usable, else the CPU engine. cuDF
        input gives a cuDF frame computed on the GPU (``"cpu"``: through pandas).
    progress : bool, optional
        Force the progress bar on or off; by default it appears after 2 seconds.
    traceback_memory : int, optional
        Bytes that the traceback of one pair may take. A pair whose 4-bit traceback matrix
        (``len(query) * ceil(len(target) / 2)`` bytes) is larger is traced back in linear
        space (checkpoint rows, then the traceback recomputed block by block): the same
        result for at most twice the work. Default: ``traceback_memory_share`` (a quarter)
        of the free memory of the engine that runs the pair (:mod:`gpualign_df.config`).
    overhang : {"softclip", "indel", "leading_indel", "ignore"}, optional
        Align as GATK HaplotypeCaller's Smith-Waterman does (``SmithWatermanJavaAligner``),
        with this strategy for the query's ends that run past the target (GATK's
        ``SWOverhangStrategy``): the query is GATK's alternate (a haplotype or read), the
        target its reference. GATK's rules replace ``mode`` and ``free_ends`` (leave them
        out) and its tie-breaking this package's (README, "GATK's aligner"); scoring by
        ``match``/``mismatch`` or a ``preset``; the frame gains GATK's alignment
        ``offset``. Rowwise and pairwise jobs, on the CPU engine.

    Returns
    -------
    pandas.DataFrame
        Columns ``query``, ``target``, ``score``, ``query_start``, ``query_end``,
        ``target_start``, ``target_end`` (0-based, end exclusive), ``cigar``, ``matches``,
        ``mismatches``, ``gap_opens``, ``gaps``, ``length``, ``identity``.

    Examples
    --------
    >>> import gpualign_df
    >>> frame = gpualign_df.align(["ACGTACGT"], ["TTACGTACGTTT"], match=2, mismatch=-3,
    ...                           gap_open=5, gap_extend=2)
    >>> frame[["score", "target_start", "target_end", "cigar"]].values.tolist()
    [[16, 2, 10, '8=']]

    GATK HaplotypeCaller's aligner, a haplotype whose end runs past its reference window:

    >>> gatk = gpualign_df.align(["CCCCCGGG"], ["AAACCCCC"], preset="gatk-original",
    ...                          overhang="softclip", cigar_style="M")
    >>> gatk[["cigar", "offset", "query_start", "query_end", "target_start"]].values.tolist()
    [['5M3S', 3, 0, 5, 3]]
    """
    job = resolve_job(queries, targets, how=how, mode=mode, matrix=matrix, match=match,
                      mismatch=mismatch, gap_open=gap_open, gap_extend=gap_extend,
                      preset=preset, free_ends=free_ends, top_k=top_k, traceback=traceback,
                      cigar_style=cigar_style, clip=clip, backend=backend, progress=progress,
                      traceback_memory=traceback_memory, overhang=overhang)
    if job.library == "cudf":
        if job.engine == "cuda":
            from .cudf_path import align_cudf, as_cudf

            return align_cudf(queries, targets if targets is None or isinstance(
                targets, Database) else as_cudf(targets), job)
        import cudf  # the CPU engine: through pandas and back

        encoded = encode_job(queries.to_pandas(),
                             None if targets is None else as_pandas(targets), job)
        check_host_memory(encoded)
        return cudf.from_pandas(run_rows(encoded, 0, len(encoded.queries)))
    encoded = encode_job(queries, as_pandas(targets) if is_cudf(targets) else targets, job)
    encoded = _on_small_job_engine(encoded, backend)
    check_host_memory(encoded)
    return run_rows(encoded, 0, len(encoded.queries))


def _on_small_job_engine(encoded: EncodedJob, backend: str) -> EncodedJob:
    """The encoded job on the engine :func:`~gpualign_df.engine.small_job_engine` picks
    for its DP cells."""
    job = small_job_engine(encoded.job, lambda: float(_query_costs(encoded)[1].sum()), backend)
    return encoded if job is encoded.job else replace(encoded, job=job)


def as_pandas(values: Any) -> Any:
    """A cuDF Series as pandas; anything else as it is."""
    return values.to_pandas() if is_cudf(values) else values


def resolve_job(queries: Any, targets: Any, *, how: str, mode: str, matrix: Any,
                match: int | None, mismatch: int | None, gap_open: int | None,
                gap_extend: int | None, free_ends: Any, top_k: int | None, traceback: bool,
                cigar_style: str, clip: str | None, backend: str, progress: bool | None,
                traceback_memory: int | None = None, preset: str | None = None,
                overhang: str | None = None) -> Job:
    """Validate every option of :func:`align` and make every choice once (output library,
    engine), before any work; the :class:`~gpualign_df.job.Job` is passed down.

    Examples
    --------
    >>> job = resolve_job(["ACGT"], ["ACGA"], how="rowwise", mode="sg", matrix=None,
    ...                   match=1, mismatch=-1, gap_open=2, gap_extend=1, free_ends=None,
    ...                   top_k=None, traceback=True, cigar_style="=", clip=None,
    ...                   backend="cpu", progress=None)
    >>> job.engine, job.library, job.mode.name
    ('cpu', 'pandas', 'sg')
    """
    validate_job(how, queries, targets, top_k)
    options = (how, mode, matrix, match, mismatch, gap_open, gap_extend, preset, free_ends,
               traceback, cigar_style, clip, backend, progress, traceback_memory, overhang)
    try:
        hash(options)
    except TypeError:  # (a DataFrame matrix, a list of free ends: checked each time)
        scoring, parsed_mode = checked_options(*options)
    else:
        scoring, parsed_mode = _checked_options_kept(*options)
    # backend="cuda" without a GPU fails here, before any work
    engine = choose_engine(backend, scoring, gatk=overhang is not None)
    return Job(how, "cudf" if is_cudf(queries) else "pandas", engine, scoring, parsed_mode,
               top_k, bool(traceback), cigar_style, clip, progress,
               None if traceback_memory is None else int(traceback_memory), overhang)


def checked_options(how: str, mode: str | None, matrix: Any, match: int | None,
                    mismatch: int | None, gap_open: int | None, gap_extend: int | None,
                    preset: str | None, free_ends: Any, traceback: bool, cigar_style: str,
                    clip: str | None, backend: str, progress: bool | None,
                    traceback_memory: int | None, overhang: str | None
                    ) -> tuple[Scoring, Mode]:
    """Check the options of :func:`align` that do not depend on the sequences; their
    scoring and mode. A function of its arguments alone: :func:`resolve_job` keeps its
    answers for hashable options (:func:`_checked_options_kept`), so that a caller making
    many small calls with the same options pays for this once.

    Examples
    --------
    >>> scoring, mode = checked_options("rowwise", "sg", None, 1, -1, 2, 1, None, None, True,
    ...                                 "=", None, "cpu", None, None, None)
    >>> scoring.gap_open, mode.name
    (2, 'sg')
    """
    check_options(backend, cigar_style, clip, traceback, progress, traceback_memory)
    match, mismatch, gap_open, gap_extend = preset_scores(preset, matrix, match, mismatch,
                                                          gap_open, gap_extend)
    scoring = make_scoring(matrix, match=match, mismatch=mismatch, gap_open=gap_open,
                           gap_extend=gap_extend)
    if overhang is not None:
        check_overhang(overhang, how=how, mode=mode, free_ends=free_ends, matrix=matrix,
                       match=match, clip=clip, cigar_style=cigar_style)
        mode = "sg"  # the nearest of this package's modes; the engine runs GATK's rules
    return scoring, parse_mode("sw" if mode is None else mode, free_ends)


#: :func:`checked_options` for hashable options, kept (a Scoring is immutable).
_checked_options_kept = lru_cache(maxsize=256)(checked_options)


def check_overhang(overhang: object, *, how: str, mode: str | None, free_ends: object,
                   matrix: object, match: int | None, clip: str | None,
                   cigar_style: str) -> None:
    """Refuse, in the caller's options, what GATK's aligner (``overhang``) cannot take."""
    if overhang not in OVERHANGS:
        raise ValueError(f"unknown overhang {overhang!r}; use one of {list(OVERHANGS)}")
    if mode is not None or free_ends is not None:
        raise ValueError(f"overhang={overhang!r} aligns by GATK's rules, whose ends follow the "
                         "overhang strategy: leave mode and free_ends out")
    if how == "search":
        raise ValueError(f"overhang={overhang!r} (GATK's aligner) aligns given pairs: use "
                         "how='rowwise' or how='pairwise'")
    if matrix is not None or match is None:
        raise ValueError(f"overhang={overhang!r} (GATK's aligner) scores by match and "
                         "mismatch: pass match and mismatch, or a preset, not a matrix")
    if clip is not None:
        raise ValueError(f"overhang={overhang!r} sets how the query's ends are shown (soft "
                         "clips with 'softclip'): leave clip out")
    if overhang == "ignore" and cigar_style != "M":
        raise ValueError("overhang='ignore' folds the query's overhangs into its M elements, "
                         "which have no =/X form: pass cigar_style='M'")


@dataclass(frozen=True)
class EncodedJob:
    """A resolved job with its sequences encoded: what :func:`align` and
    :func:`align_batches` run on the host."""

    job: Job
    queries: EncodedSequences
    targets: EncodedSequences

    @property
    def how(self) -> str:
        return self.job.how

    @property
    def traceback(self) -> bool:
        return self.job.traceback

    @property
    def top_k(self) -> int | None:
        return self.job.top_k


def encode_job(queries: Any, targets: Any, job: Job) -> EncodedJob:
    """Encode a job's sequences (host strings; the targets are the queries for pairwise).
    A GPU job's codes are made when first read (``deferred``): a small batch's kernel maps
    the bytes itself, a larger job's upload maps them on the device
    (:func:`gpualign_df.gpu.buffers.map_on_device`), and a character outside the alphabet
    raises before any result."""
    allocate = codes_allocator(job)
    deferred = job.engine == "cuda"
    encoded_queries = encode_sequences(queries, job.scoring, _labels(queries), allocate,
                                       deferred=deferred)
    if isinstance(targets, Database):
        targets.check_scoring(job.scoring)
        encoded_targets = targets.sequences
    elif job.how == "pairwise":
        encoded_targets = encoded_queries
    else:
        encoded_targets = encode_sequences(targets, job.scoring, _labels(targets), allocate,
                                           deferred=deferred)
    return EncodedJob(job, encoded_queries, encoded_targets)


def run_rows(encoded: EncodedJob, start: int, stop: int) -> pd.DataFrame:
    """The result rows of queries ``start`` to ``stop`` (all their rows, in result order)."""
    queries, targets, job = encoded.queries, encoded.targets, encoded.job
    if job.how == "search":
        return _search(queries.subset(start, stop), targets, job)
    if job.how == "pairwise":
        pair_query, pair_target = pairwise_pairs_of_rows(len(queries), start, stop)
    else:
        pair_query = pair_target = np.arange(start, stop, dtype=np.int64)
    if len(pair_query) == 0:
        return empty_frame(job.traceback, queries.labels, targets.labels,
                           job.overhang is not None)
    frame = ResultFrame(queries.valid[pair_query] & targets.valid[pair_target], queries.labels,
                        targets.labels, pair_query, pair_target, traceback=job.traceback,
                        offset=job.overhang is not None)
    # (the frame's labels and arrays are made while the GPU's kernels run)
    every_row = job.how == "rowwise" and start == 0 and stop == len(queries) == len(targets)
    return frame.finish(run_pairs(queries, targets, pair_query, pair_target, job,
                                  meanwhile=frame.prepare, every_row=every_row))


#: Bytes of host memory per result row with traceback (pair lists, engine columns, the
#: frame's columns and their copies while it is built), without the CIGAR text; per row
#: without traceback; and per aligned residue of traceback ops and CIGAR text. Used to
#: refuse in-memory jobs that cannot fit, so they are estimates that err upwards.
ROW_BYTES_TRACEBACK = 200
ROW_BYTES_SCORE_ONLY = 80
BYTES_PER_ALIGNED_RESIDUE = 2
#: A result of at most this many bytes (by the cheap bound) is not held against the free
#: memory: reading it is a system call, which costs a small job more than its frame does
#: (tens of microseconds where system calls are slow, as in a sandbox), and a host without
#: that much to spare cannot run the job at all.
UNCHECKED_RESULT_BYTES = 16 << 20


def rows_and_span(job: EncodedJob, start: int = 0, stop: int | None = None,
                  bound: bool = False) -> tuple[int, int]:
    """(result rows, sum over rows of min(m, n)) of queries ``start`` to ``stop``: the
    rows a job returns and a floor for the residues its alignments cover. ``bound``: a
    search with ``top_k`` takes ``k * m`` a query for the span, an upper bound that needs
    no pass over the database; a rowwise job the residues of its shorter side, which
    needs no pass over the lengths."""
    stop = len(job.queries) if stop is None else stop
    if bound and job.how == "rowwise":
        residues = (int(sequences.offsets[stop] - sequences.offsets[start])
                    for sequences in (job.queries, job.targets))
        return stop - start, min(residues)
    q = np.where(job.queries.valid, job.queries.lengths, 0)[start:stop]
    if job.how == "rowwise":
        t = np.where(job.targets.valid, job.targets.lengths, 0)[start:stop]
        return stop - start, int(np.minimum(q, t).sum())
    if job.how == "pairwise":
        count = len(job.queries)
        lengths = np.where(job.queries.valid, job.queries.lengths, 0)
        rows = int(((count - 1 - np.arange(start, stop)).clip(min=0)).sum())
        # sum over i in the rows, j > i of min(L_i, L_j): bounded by L_i * (count - 1 - i)
        span = int((q * (count - 1 - np.arange(start, stop)).clip(min=0)).sum())
        return rows, min(span, rows * int(lengths.max(initial=0)))
    if bound and job.top_k is not None:
        kept = min(job.top_k, len(job.targets))
        return len(q) * kept, int(q.sum()) * kept
    t = np.sort(np.where(job.targets.valid, job.targets.lengths, 0))
    kept = len(t) if job.top_k is None else min(job.top_k, len(t))
    prefix = np.concatenate(([0], np.cumsum(t)))
    shorter = np.searchsorted(t, q, side="left")        # targets shorter than each query
    span_all = prefix[shorter] + q * (len(t) - shorter)  # sum over targets of min(q, t)
    span = span_all if job.top_k is None else np.minimum(span_all, q * kept)
    return len(q) * kept, int(span.sum())


def job_host_bytes(job: EncodedJob, start: int = 0, stop: int | None = None,
                   bound: bool = False) -> int:
    """Estimated host memory of the result of queries ``start`` to ``stop`` of ``job``
    (``bound``: of :func:`rows_and_span`'s cheap bound)."""
    rows, span = rows_and_span(job, start, stop, bound)
    if not job.traceback:
        return rows * ROW_BYTES_SCORE_ONLY
    return rows * ROW_BYTES_TRACEBACK + span * BYTES_PER_ALIGNED_RESIDUE


def check_host_memory(job: EncodedJob) -> None:
    """Refuse an in-memory job whose result cannot fit in host memory, before any work,
    saying what would: score only, streaming batches, Dask."""
    tuning = config.settings()
    bound = job_host_bytes(job, bound=True)
    if bound <= UNCHECKED_RESULT_BYTES or within_host_budget(bound, tuning):
        return  # (a search's top k: no pass over the database's lengths)
    need = job_host_bytes(job)
    if within_host_budget(need, tuning):
        return
    budget = host_budget(tuning)
    rows, _ = rows_and_span(job)
    raise HostMemoryError(
        f"this {job.how} job returns {rows:,} rows, about {gib(need)} of host memory "
        f"with {'traceback' if job.traceback else 'scores'}, more than the "
        f"{gib(budget)} it may use ({tuning.host_memory_share:.0%} of the memory "
        f"available now): align with traceback=False (score and end coordinates only), "
        f"stream the rows to a file in batches (gpualign_df.align_batches, or the gpualign "
        f"command with --out), or run it through Dask (dask.dataframe Series .aln)")


def align_batches(
    queries: pd.Series | Sequence[str | None],
    targets: pd.Series | Sequence[str | None] | Database | None = None,
    *,
    how: str = "rowwise",
    mode: str | None = None,
    matrix: str | pd.DataFrame | tuple | None = None,
    match: int | None = None,
    mismatch: int | None = None,
    gap_open: int | None = None,
    gap_extend: int | None = None,
    preset: str | None = None,
    free_ends: Iterable[str] | str | None = None,
    top_k: int | None = None,
    traceback: bool = True,
    cigar_style: str = "=",
    clip: str | None = None,
    backend: str = "auto",
    progress: bool | None = None,
    traceback_memory: int | None = None,
    overhang: str | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`align` in batches: yields pandas frames whose concatenation is the frame
    :func:`align` returns, row for row, holding one batch in memory at a time.

    The job is validated and its sequences encoded before the first batch. Each batch holds
    every row of the queries it covers (all of a query's pairs, or its ``top_k`` hits), at
    most ``stream_batch_pairs`` pairs and ``stream_batch_cells`` DP cells of
    :func:`gpualign_df.config.settings` where one query allows. A job with no rows yields one
    empty frame (the columns and dtypes). Options as :func:`align` (``traceback_memory``
    included); cuDF input is aligned through pandas.

    Parameters
    ----------
    queries, targets, how, mode, matrix, match, mismatch, gap_open, gap_extend
        As :func:`align`.
    free_ends, top_k, traceback, cigar_style, clip, backend, progress
        As :func:`align`.
    traceback_memory : int, optional
        Bytes that the traceback of one pair may take; a pair whose 4-bit traceback matrix
        is larger is traced back in linear space, with the same result (as :func:`align`).

    Yields
    ------
    pandas.DataFrame
        The rows of consecutive queries, as :func:`align` returns them.

    Examples
    --------
    >>> import gpualign_df
    >>> from gpualign_df import config
    >>> sequences = ["ACGTAC", "ACGTTC", "AGGTAC", "ACCTAC"]
    >>> with config.override(stream_batch_pairs=2):
    ...     frames = list(gpualign_df.align_batches(sequences, how="pairwise", match=1,
    ...                                             mismatch=-1, gap_open=2, gap_extend=1))
    >>> [len(frame) for frame in frames], sum(len(frame) for frame in frames)
    ([3, 2, 1], 6)
    """
    job = resolve_job(queries, targets, how=how, mode=mode, matrix=matrix, match=match,
                      mismatch=mismatch, gap_open=gap_open, gap_extend=gap_extend,
                      preset=preset, free_ends=free_ends, top_k=top_k, traceback=traceback,
                      cigar_style=cigar_style, clip=clip, backend=backend, progress=progress,
                      traceback_memory=traceback_memory, overhang=overhang)
    encoded = encode_job(as_pandas(queries), as_pandas(targets), replace(job, library="pandas"))
    return _batches_of(_on_small_job_engine(encoded, backend), config.settings())


def _batches_of(job: EncodedJob, tuning: config.Settings) -> Iterator[pd.DataFrame]:
    pairs, cells = _query_costs(job)
    bounds = batch_bounds(pairs, cells, tuning.stream_batch_pairs, tuning.stream_batch_cells)
    if len(bounds) < 2:
        yield empty_frame(job.traceback, job.queries.labels, job.targets.labels,
                          job.job.overhang is not None)
        return
    with progress_bar(int(cells.sum()), job.job.progress) as bar:  # one bar for all
        batched = replace(job, job=replace(job.job, progress=bar))
        for start, stop in zip(bounds[:-1], bounds[1:]):
            yield run_rows(batched, int(start), int(stop))


def _query_costs(job: EncodedJob) -> tuple[np.ndarray, np.ndarray]:
    """Pairs and DP cells of each query's rows (float64 arrays, one entry per query)."""
    count = len(job.queries)
    q = np.where(job.queries.valid, job.queries.lengths, 0).astype(np.float64)
    if job.how == "rowwise":
        return np.ones(count), q * np.where(job.targets.valid, job.targets.lengths, 0)
    if job.how == "pairwise":
        after = np.concatenate((np.cumsum(q[::-1])[::-1][1:], [0.0])) if count else q
        return (count - 1 - np.arange(count)).astype(np.float64), q * after
    return np.full(count, float(len(job.targets))), q * float(job.targets.residues)


def batch_bounds(pairs: np.ndarray, cells: np.ndarray, max_pairs: float,
                 max_cells: float) -> np.ndarray:
    """Boundaries ``[0, b1, ..., count]`` of consecutive runs of queries, each run at most
    ``max_pairs`` pairs and ``max_cells`` DP cells unless one query alone exceeds them
    (``pairs``/``cells``: each query's).

    Examples
    --------
    >>> batch_bounds(np.array([3., 2., 1., 0.]), np.zeros(4), 3, 1e9).tolist()
    [0, 1, 4]
    """
    count = len(pairs)
    pair_sums, cell_sums = np.cumsum(pairs), np.cumsum(cells)
    bounds = [0]
    while bounds[-1] < count:
        start = bounds[-1]
        base_pairs = pair_sums[start - 1] if start else 0.0
        base_cells = cell_sums[start - 1] if start else 0.0
        stop = min(np.searchsorted(pair_sums, base_pairs + max_pairs, side="right"),
                   np.searchsorted(cell_sums, base_cells + max_cells, side="right"))
        bounds.append(int(max(stop, start + 1)))
    return np.asarray(bounds, dtype=np.int64)


def _search(queries: EncodedSequences, targets: EncodedSequences, job: Job) -> pd.DataFrame:
    """Score, rank best first per query, keep top_k, then trace back the survivors only
    (:func:`gpualign_df.engine.search_survivors`); without top_k every pair is aligned and
    ranked. One progress bar covers every block and pass."""
    if len(queries) == 0 or len(targets) == 0:
        return empty_frame(job.traceback, queries.labels, targets.labels)
    with progress_bar(queries.residues * targets.residues, job.progress) as bar:
        job = replace(job, progress=bar)
        if job.top_k is not None:
            pair_query, pair_target = search_survivors(queries, targets, job)
            arrays = search_rows(queries, targets, pair_query, pair_target, job)
            return build_frame(arrays, queries.labels, targets.labels, pair_query, pair_target)
        pair_query, pair_target = search_pairs(len(queries), len(targets))
        arrays = run_pairs(queries, targets, pair_query, pair_target, job)
        keep = best_first(pair_query, pair_target, arrays.score, arrays.valid, None)
        frame = build_frame(arrays, queries.labels, targets.labels, pair_query, pair_target)
        return frame.take(keep).reset_index(drop=True)
