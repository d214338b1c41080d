"""Pair lists of the three job shapes and the search order: pure numpy, used by every
layer (the in-memory API, the cuDF path, the Dask tasks)."""

from __future__ import annotations

import numpy as np


def rowwise_pairs(query_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair k = (row k, row k).

    Examples
    --------
    >>> [a.tolist() for a in rowwise_pairs(3)]
    [[0, 1, 2], [0, 1, 2]]
    """
    rows = np.arange(query_count, dtype=np.int64)
    return rows, rows


def pairwise_pairs(count: int) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (i, j) with i < j, i major.

    Examples
    --------
    >>> [a.tolist() for a in pairwise_pairs(3)]
    [[0, 0, 1], [1, 2, 2]]
    """
    first, second = np.triu_indices(count, k=1)
    return first.astype(np.int64), second.astype(np.int64)


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


def search_pairs(query_count: int, target_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Every query against every target, query major.

    Examples
    --------
    >>> [a.tolist() for a in search_pairs(2, 2)]
    [[0, 0, 1, 1], [0, 1, 0, 1]]
    """
    return (np.repeat(np.arange(query_count, dtype=np.int64), target_count),
            np.tile(np.arange(target_count, dtype=np.int64), query_count))


def best_first(pair_query: np.ndarray, pair_target: np.ndarray, score: np.ndarray,
               valid: np.ndarray, top_k: int | None) -> np.ndarray:
    """Positions of pairs ordered per query by score, best first (nulls last, ties by
    target order), keeping at most ``top_k`` per query.

    Examples
    --------
    >>> best_first(np.array([0, 0, 0]), np.array([0, 1, 2]), np.array([5, 9, 9]),
    ...            np.array([True, True, True]), 2).tolist()
    [1, 2]
    """
    ranked_score = np.where(valid, score.astype(np.int64), np.iinfo(np.int64).min + 1)
    order = np.lexsort((pair_target, -ranked_score, pair_query))
    if top_k is None:
        return order
    sorted_queries = pair_query[order]
    group_start = np.flatnonzero(np.r_[True, sorted_queries[1:] != sorted_queries[:-1]])
    group_sizes = np.diff(np.r_[group_start, len(order)])
    rank = np.arange(len(order)) - np.repeat(group_start, group_sizes)
    return order[rank < top_k]


def best_of_rows(score: np.ndarray, valid: np.ndarray, top_k: int) -> np.ndarray:
    """Row-major positions in a queries x targets ``score`` matrix (``valid``: which cells
    are not null) of each row's best ``top_k``, best first per row, rows in order: what
    :func:`best_first` gives for the matrix's pairs in row-major order, found by a
    partition per row rather than a sort of every pair.

    Examples
    --------
    >>> best_of_rows(np.array([[5, 9, 9], [1, 2, 3]]), np.ones((2, 3), bool), 2).tolist()
    [1, 2, 5, 4]
    """
    rows, columns = score.shape
    k = min(top_k, columns)
    if k == 0 or rows == 0:
        return np.zeros(0, np.int64)
    ranked = np.where(valid, score.astype(np.int64), np.iinfo(np.int64).min + 1)
    if k < columns:
        # the k-th best value of each row; every better cell, then its ties by column
        kth = -np.partition(-ranked, k - 1, axis=1)[:, k - 1:k]
        ties = ranked == kth
        room = k - (ranked > kth).sum(axis=1, keepdims=True)
        kept = (ranked > kth) | (ties & (np.cumsum(ties, axis=1) <= room))
        column = np.nonzero(kept)[1].reshape(rows, k)   # ascending in each row
    else:
        column = np.broadcast_to(np.arange(columns), (rows, columns))
    values = np.take_along_axis(ranked, column, axis=1)
    column = np.take_along_axis(column, np.argsort(-values, axis=1, kind="stable"), axis=1)
    return (np.arange(rows, dtype=np.int64)[:, None] * columns + column).ravel()
