"""The plain-function API: ``gpualign_df.align``, shared by the accessors and the CLI."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from .encode import EncodedSequences, encode_sequences
from . import gpu
from .engine import (check_options, check_score_range, progress_bar, resolve_backend,
                     run_pairs)
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
    check_options(backend, cigar_style, clip)
    resolve_backend(backend)  # backend="cuda" without a GPU fails before any work
    scoring = make_scoring(matrix, match=match, mismatch=mismatch, gap_open=gap_open,
                           gap_extend=gap_extend)
    parsed_mode = parse_mode(mode, free_ends)
    if _is_cudf(queries):
        from .cudf_path import align_cudf, as_cudf

        return align_cudf(queries, None if targets is None else as_cudf(targets), how=how,
                          scoring=scoring, mode=parsed_mode, top_k=top_k, traceback=traceback,
                          cigar_style=cigar_style, clip=clip, backend=backend, progress=progress)
    if _is_cudf(targets):
        targets = targets.to_pandas()
    query_labels = _labels(queries)
    encoded_queries = encode_sequences(queries, scoring, query_labels)
    options = dict(cigar_style=cigar_style, clip=clip, backend=backend, progress=progress)
    if how == "pairwise":
        encoded_targets = encoded_queries
        pair_query, pair_target = pairwise_pairs(len(encoded_queries))
    else:
        encoded_targets = encode_sequences(targets, scoring, _labels(targets))
        if how == "search":
            return _search(encoded_queries, encoded_targets, scoring, parsed_mode, top_k,
                           traceback, options)
        pair_query, pair_target = rowwise_pairs(len(encoded_queries))
    if len(pair_query) == 0:
        return empty_frame(traceback, encoded_queries.labels, encoded_targets.labels)
    arrays = run_pairs(encoded_queries, encoded_targets, pair_query, pair_target, scoring,
                       parsed_mode, traceback=traceback, **options)
    return build_frame(arrays, encoded_queries.labels, encoded_targets.labels, pair_query,
                       pair_target)


#: A search with ``top_k`` off the device scores at most this many pairs at a time (whole
#: queries against the whole database), so its memory stays bounded by the kept pairs.
SEARCH_BLOCK_PAIRS = 4_000_000


def _search(queries: EncodedSequences, targets: EncodedSequences, scoring: Scoring, mode: Mode,
            top_k: int | None, traceback: bool, options: dict) -> pd.DataFrame:
    """Score, rank best first per query, keep top_k, then trace back the survivors only.

    With ``top_k``, the score-only pass runs on the GPU over the cross product
    (:func:`gpualign_df.gpu.search_top_k`, no pair list), elsewhere in blocks of whole
    queries of at most ``SEARCH_BLOCK_PAIRS`` pairs; either way only the kept pairs are
    aligned again for the output columns."""
    if len(queries) == 0 or len(targets) == 0:
        return empty_frame(traceback, queries.labels, targets.labels)
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
    if resolve_backend(options["backend"]) == "cuda" \
            and len(scoring.alphabet) <= gpu.inter.MAX_ALPHABET:
        check_score_range(scoring, queries.lengths, targets.lengths)
        cells = int(queries.lengths[queries.valid].sum()) * int(
            targets.lengths[targets.valid].sum())
        with progress_bar(cells, options["progress"]) as bar:
            return gpu.search_top_k(
                gpu.upload(queries), gpu.upload(targets), queries.lengths, queries.valid,
                targets.lengths, targets.valid, scoring, mode, top_k, progress=bar.update)
    block = max(1, SEARCH_BLOCK_PAIRS // len(targets))
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
