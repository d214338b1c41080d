"""The plain-function API: ``gpualign_df.align``, shared by the accessors and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from .encode import EncodedSequences, encode_sequences
from . import config
from .engine import (HostMemoryError, check_options, check_score_range, host_budget,
                     progress_bar, resolve_backend, run_pairs)
from .results import build_frame, empty_frame
from .scoring import Mode, Scoring, make_scoring, parse_mode

HOWS = ("rowwise", "pairwise", "search")


def _is_cudf(values: Any) -> bool:
    return type(values).__module__.split(".")[0] == "cudf"


def _labels(values: Any) -> pd.Index:
    if isinstance(values, pd.Series):
        return values.index
    return pd.RangeIndex(len(values))


def rowwise_pairs(query_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair k = (row k, row k)."""
    rows = np.arange(query_count, dtype=np.int64)
    return rows, rows


def pairwise_pairs(count: int) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (i, j) with i < j, i major."""
    first, second = np.triu_indices(count, k=1)
    return first.astype(np.int64), second.astype(np.int64)


def search_pairs(query_count: int, target_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Every query against every target, query major."""
    return (np.repeat(np.arange(query_count, dtype=np.int64), target_count),
            np.tile(np.arange(target_count, dtype=np.int64), query_count))


def best_first(pair_query: np.ndarray, pair_target: np.ndarray, score: np.ndarray,
               valid: np.ndarray, top_k: int | None) -> np.ndarray:
    """Positions of pairs ordered per query by score, best first (nulls last, ties by
    target order), keeping at most ``top_k`` per query."""
    ranked_score = np.where(valid, score.astype(np.int64), np.iinfo(np.int64).min + 1)
    order = np.lexsort((pair_target, -ranked_score, pair_query))
    if top_k is None:
        return order
    sorted_queries = pair_query[order]
    group_start = np.flatnonzero(np.r_[True, sorted_queries[1:] != sorted_queries[:-1]])
    group_sizes = np.diff(np.r_[group_start, len(order)])
    rank = np.arange(len(order)) - np.repeat(group_start, group_sizes)
    return order[rank < top_k]


def validate_job(how: str, queries: Any, targets: Any, top_k: int | None) -> None:
    """Check the job's shape before any work."""
    if how not in HOWS:
        raise ValueError(f"unknown how {how!r}; use one of {HOWS}")
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
    targets: pd.Series | Sequence[str | None] | None = None,
    *,
    how: str = "rowwise",
    mode: str = "sw",
    matrix: str | pd.DataFrame | tuple | None = None,
    match: int | None = None,
    mismatch: int | None = None,
    gap_open: int = 10,
    gap_extend: int = 1,
    free_ends: Iterable[str] | str | None = None,
    top_k: int | None = None,
    traceback: bool = True,
    cigar_style: str = "=",
    clip: str | None = None,
    backend: str = "auto",
    progress: bool | None = None,
) -> pd.DataFrame:
    """Align sequences pair by pair and return one row per alignment.

    Parameters
    ----------
    queries : pandas.Series, cudf.Series or sequence of str
        Query sequences; the Series index labels fill the ``query`` column. A cuDF Series
        gives a cuDF frame.
    targets : pandas.Series or sequence of str, optional
        Targets for ``how="rowwise"`` (row k against row k) or the database for
        ``how="search"``; None for ``how="pairwise"``.
    how : {"rowwise", "pairwise", "search"}
        Job shape: element-wise, all pairs i < j within ``queries``, or every query
        against every target (best first per query).
    mode : {"sw", "local", "nw", "global", "sg", "semiglobal"}
        Smith-Waterman, Needleman-Wunsch or semi-global (end gaps free).
    matrix : str, pandas.DataFrame or (alphabet, table), optional
        Substitution matrix; default EDNAFULL unless ``match``/``mismatch`` are given.
    match, mismatch : int, optional
        DNA scoring (ACGT, U read as T, IUPAC codes score ``mismatch`` always).
    gap_open, gap_extend : int
        Positive costs; a gap of length k costs ``gap_open + (k - 1) * gap_extend``.
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
    """
    validate_job(how, queries, targets, top_k)
    check_options(backend, cigar_style, clip, traceback, progress)
    resolve_backend(backend)  # backend="cuda" without a GPU fails before any work
    scoring = make_scoring(matrix, match=match, mismatch=mismatch, gap_open=gap_open,
                           gap_extend=gap_extend)
    parsed_mode = parse_mode(mode, free_ends)
    if _is_cudf(queries):
        from .cudf_path import align_cudf, as_cudf

        return align_cudf(queries, None if targets is None else as_cudf(targets), how=how,
                          scoring=scoring, mode=parsed_mode, top_k=top_k, traceback=traceback,
                          cigar_style=cigar_style, clip=clip, backend=backend, progress=progress)
    job = _encode_job(queries, targets, how, scoring, parsed_mode, top_k, traceback,
                      dict(cigar_style=cigar_style, clip=clip, backend=backend,
                           progress=progress))
    check_host_memory(job)
    return _run_rows(job, 0, len(job.queries))


@dataclass(frozen=True)
class EncodedJob:
    """A validated, encoded in-memory job: what :func:`align` and :func:`align_batches` run."""

    how: str
    queries: EncodedSequences
    targets: EncodedSequences
    scoring: Scoring
    mode: Mode
    top_k: int | None
    traceback: bool
    options: dict


def _encode_job(queries: Any, targets: Any, how: str, scoring: Scoring, mode: Mode,
                top_k: int | None, traceback: bool, options: dict) -> EncodedJob:
    if _is_cudf(queries):
        queries = queries.to_pandas()
    if _is_cudf(targets):
        targets = targets.to_pandas()
    encoded_queries = encode_sequences(queries, scoring, _labels(queries))
    encoded_targets = encoded_queries if how == "pairwise" else \
        encode_sequences(targets, scoring, _labels(targets))
    return EncodedJob(how, encoded_queries, encoded_targets, scoring, mode, top_k, traceback,
                      options)


def _run_rows(job: EncodedJob, start: int, stop: int) -> pd.DataFrame:
    """The result rows of queries ``start`` to ``stop`` (all their rows, in result order)."""
    queries, targets = job.queries, job.targets
    if job.how == "search":
        return _search(queries.subset(start, stop), targets, job.scoring, job.mode, job.top_k,
                       job.traceback, job.options)
    if job.how == "pairwise":
        pair_query, pair_target = pairwise_pairs_of_rows(len(queries), start, stop)
    else:
        pair_query = pair_target = np.arange(start, stop, dtype=np.int64)
    if len(pair_query) == 0:
        return empty_frame(job.traceback, queries.labels, targets.labels)
    arrays = run_pairs(queries, targets, pair_query, pair_target, job.scoring, job.mode,
                       traceback=job.traceback, **job.options)
    return build_frame(arrays, queries.labels, targets.labels, pair_query, pair_target)


def pairwise_pairs_of_rows(count: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i, j), i < j < ``count``, of rows ``start <= i < stop``, i major: the rows
    of :func:`pairwise_pairs` that those rows own.

    Examples
    --------
    >>> [a.tolist() for a in pairwise_pairs_of_rows(4, 1, 3)]
    [[1, 1, 2], [2, 3, 3]]
    """
    rows = np.arange(start, stop, dtype=np.int64)
    partners = count - 1 - rows
    first = np.repeat(rows, partners)
    begin = np.cumsum(partners) - partners
    second = np.arange(len(first), dtype=np.int64) - np.repeat(begin - rows - 1, partners)
    return first, second


#: Bytes of host memory per result row with traceback (pair lists, engine columns, the
#: frame's columns and their copies while it is built), without the CIGAR text; per row
#: without traceback; and per aligned residue of traceback ops and CIGAR text. Used to
#: refuse in-memory jobs that cannot fit, so they are estimates that err upwards.
ROW_BYTES_TRACEBACK = 200
ROW_BYTES_SCORE_ONLY = 80
BYTES_PER_ALIGNED_RESIDUE = 2


def _rows_and_span(job: EncodedJob, start: int = 0, stop: int | None = None) -> tuple[int, int]:
    """(result rows, sum over rows of min(m, n)) of queries ``start`` to ``stop``: the
    rows a job returns and a floor for the residues its alignments cover."""
    stop = len(job.queries) if stop is None else stop
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
    t = np.sort(np.where(job.targets.valid, job.targets.lengths, 0))
    kept = len(t) if job.top_k is None else min(job.top_k, len(t))
    prefix = np.concatenate(([0], np.cumsum(t)))
    shorter = np.searchsorted(t, q, side="left")        # targets shorter than each query
    span_all = prefix[shorter] + q * (len(t) - shorter)  # sum over targets of min(q, t)
    span = span_all if job.top_k is None else np.minimum(span_all, q * kept)
    return len(q) * kept, int(span.sum())


def job_host_bytes(job: EncodedJob, start: int = 0, stop: int | None = None) -> int:
    """Estimated host memory of the result of queries ``start`` to ``stop`` of ``job``."""
    rows, span = _rows_and_span(job, start, stop)
    if not job.traceback:
        return rows * ROW_BYTES_SCORE_ONLY
    return rows * ROW_BYTES_TRACEBACK + span * BYTES_PER_ALIGNED_RESIDUE


def check_host_memory(job: EncodedJob) -> None:
    """Refuse an in-memory job whose result cannot fit in host memory, before any work,
    saying what would: score only, streaming batches, Dask."""
    need = job_host_bytes(job)
    tuning = config.settings()
    budget = host_budget(tuning)
    if need <= budget:
        return
    rows, _ = _rows_and_span(job)
    raise HostMemoryError(
        f"this {job.how} job returns {rows:,} rows, about {need / 2**30:.1f} GiB of host memory "
        f"with {'traceback' if job.traceback else 'scores'}, more than the "
        f"{budget / 2**30:.1f} GiB it may use ({tuning.host_memory_share:.0%} of the memory "
        f"available now): align with traceback=False (score and end coordinates only), "
        f"stream the rows to a file in batches (gpualign_df.align_batches, or the gpualign "
        f"command with --out), or run it through Dask (dask.dataframe Series .aln)")


def align_batches(
    queries: pd.Series | Sequence[str | None],
    targets: pd.Series | Sequence[str | None] | None = None,
    *,
    how: str = "rowwise",
    mode: str = "sw",
    matrix: str | pd.DataFrame | tuple | None = None,
    match: int | None = None,
    mismatch: int | None = None,
    gap_open: int = 10,
    gap_extend: int = 1,
    free_ends: Iterable[str] | str | None = None,
    top_k: int | None = None,
    traceback: bool = True,
    cigar_style: str = "=",
    clip: str | None = None,
    backend: str = "auto",
    progress: bool | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`align` in batches: yields pandas frames whose concatenation is the frame
    :func:`align` returns, row for row, holding one batch in memory at a time.

    The job is validated and its sequences encoded before the first batch. Each batch holds
    every row of the queries it covers (all of a query's pairs, or its ``top_k`` hits), at
    most ``stream_batch_pairs`` pairs and ``stream_batch_cells`` DP cells of
    :func:`gpualign_df.config.settings` where one query allows. A job with no rows yields one
    empty frame (the columns and dtypes). Options as :func:`align`; cuDF input is aligned
    through pandas.

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
    validate_job(how, queries, targets, top_k)
    check_options(backend, cigar_style, clip, traceback, progress)
    resolve_backend(backend)
    scoring = make_scoring(matrix, match=match, mismatch=mismatch, gap_open=gap_open,
                           gap_extend=gap_extend)
    job = _encode_job(queries, targets, how, scoring, parse_mode(mode, free_ends), top_k,
                      traceback, dict(cigar_style=cigar_style, clip=clip, backend=backend,
                                      progress=progress))
    return _batches_of(job, config.settings())


def _batches_of(job: EncodedJob, tuning: config.Settings) -> Iterator[pd.DataFrame]:
    pairs, cells = _query_costs(job)
    bounds = batch_bounds(pairs, cells, tuning.stream_batch_pairs, tuning.stream_batch_cells)
    if len(bounds) < 2:
        yield empty_frame(job.traceback, job.queries.labels, job.targets.labels)
        return
    with progress_bar(int(cells.sum()), job.options["progress"]) as bar:  # one bar for all
        batched = replace(job, options=dict(job.options, progress=bar))
        for start, stop in zip(bounds[:-1], bounds[1:]):
            yield _run_rows(batched, int(start), int(stop))


def _query_costs(job: EncodedJob) -> tuple[np.ndarray, np.ndarray]:
    """Pairs and DP cells of each query's rows (float64 arrays, one entry per query)."""
    count = len(job.queries)
    q = np.where(job.queries.valid, job.queries.lengths, 0).astype(np.float64)
    if job.how == "rowwise":
        return np.ones(count), q * np.where(job.targets.valid, job.targets.lengths, 0)
    if job.how == "pairwise":
        after = np.concatenate((np.cumsum(q[::-1])[::-1][1:], [0.0])) if count else q
        return (count - 1 - np.arange(count)).astype(np.float64), q * after
    database = float(np.where(job.targets.valid, job.targets.lengths, 0).sum())
    return np.full(count, float(len(job.targets))), q * database


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


def _search(queries: EncodedSequences, targets: EncodedSequences, scoring: Scoring, mode: Mode,
            top_k: int | None, traceback: bool, options: dict) -> pd.DataFrame:
    """Score, rank best first per query, keep top_k, then trace back the survivors only.

    With ``top_k``, the score-only pass runs on the GPU over the cross product
    (:func:`gpualign_df.gpu.search_top_k`, no pair list), elsewhere in blocks of whole
    queries of at most ``search_block_pairs`` pairs (:mod:`gpualign_df.config`); either way
    only the kept pairs are
    aligned again for the output columns."""
    if len(queries) == 0 or len(targets) == 0:
        return empty_frame(traceback, queries.labels, targets.labels)
    cells = int(queries.lengths[queries.valid].sum()) * int(targets.lengths[targets.valid].sum())
    with progress_bar(cells, options["progress"]) as bar:  # one bar for every block and pass
        return _search_in(queries, targets, scoring, mode, top_k, traceback,
                          dict(options, progress=bar))


def _search_in(queries: EncodedSequences, targets: EncodedSequences, scoring: Scoring,
               mode: Mode, top_k: int | None, traceback: bool, options: dict) -> pd.DataFrame:
    if top_k is not None:
        pair_query, pair_target = _search_survivors(queries, targets, scoring, mode, top_k,
                                                    options)
        arrays = run_pairs(queries, targets, pair_query, pair_target, scoring, mode,
                           traceback=traceback, **options)
        return build_frame(arrays, queries.labels, targets.labels, pair_query, pair_target)
    pair_query, pair_target = search_pairs(len(queries), len(targets))
    arrays = run_pairs(queries, targets, pair_query, pair_target, scoring, mode,
                       traceback=traceback, **options)
    keep = best_first(pair_query, pair_target, arrays.score, arrays.valid, None)
    frame = build_frame(arrays, queries.labels, targets.labels, pair_query, pair_target)
    return frame.take(keep).reset_index(drop=True)


def _search_survivors(queries: EncodedSequences, targets: EncodedSequences, scoring: Scoring,
                      mode: Mode, top_k: int, options: dict) -> tuple[np.ndarray, np.ndarray]:
    """The (query, target) pairs a search with ``top_k`` keeps, in :func:`best_first` order."""
    from . import gpu
    if resolve_backend(options["backend"]) == "cuda" \
            and len(scoring.alphabet) <= gpu.inter.MAX_ALPHABET:
        check_score_range(scoring, queries.lengths, targets.lengths)
        cells = int(queries.lengths[queries.valid].sum()) * int(
            targets.lengths[targets.valid].sum())
        with progress_bar(cells, options["progress"]) as bar:
            return gpu.search_top_k(
                gpu.upload(queries), gpu.upload(targets), queries.lengths, queries.valid,
                targets.lengths, targets.valid, scoring, mode, top_k, progress=bar.update)
    block = max(1, config.settings().search_block_pairs // len(targets))
    kept_query, kept_target = [], []
    for first in range(0, len(queries), block):
        pair_query, pair_target = search_pairs(min(block, len(queries) - first), len(targets))
        pair_query += first
        arrays = run_pairs(queries, targets, pair_query, pair_target, scoring, mode,
                           traceback=False, **options)
        keep = best_first(pair_query, pair_target, arrays.score, arrays.valid, top_k)
        kept_query.append(pair_query[keep])
        kept_target.append(pair_target[keep])
    return np.concatenate(kept_query), np.concatenate(kept_target)
