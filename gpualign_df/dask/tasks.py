"""The functions that run inside the Dask tasks of an alignment job, on partition objects.

Each takes the partitions (pandas, or cuDF on dask-cuDF) and the chunks of the plan
(:mod:`gpualign_df.dask.plan`) that it works on, and calls :func:`gpualign_df.align` with
every option passed through. Blocks label their rows by the inputs' own labels and keep the
global positions aside (two extra columns) so that the merge steps can put the rows of
several blocks in the global order of the collections; the last step of a job drops those
columns, so every output partition has the columns and dtypes of the in-memory result.

Module level imports no Dask and not the engine: :func:`gpualign_df.api.align` (numba, the
GPU code) is imported inside the functions that use it, since the accessor imports this
module as soon as ``dask.dataframe`` is imported.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .plan import Chunk

__all__ = ["frame_library", "lengths_of", "task_align", "task_options", "triangle_task",
           "rectangle_task", "pairwise_block_task", "pairwise_merge", "search_merge",
           "search_top_k_final", "broadcast_search_task", "rowwise_task", "strip_positions"]

_QPOS = "_gpualign_query_position"
_TPOS = "_gpualign_target_position"


def frame_library(obj: Any):
    """pandas, or cuDF when ``obj`` is a cuDF object."""
    if type(obj).__module__.split(".")[0] == "cudf":
        import cudf

        return cudf
    return pd


def lengths_of(part: Any) -> np.ndarray:
    """Residue counts of one partition (pandas or cuDF Series); nulls count 0."""
    lengths = part.str.len().fillna(0).astype("int64")
    return np.asarray(lengths.to_numpy(), dtype=np.int64)


def task_options(options: dict) -> dict:
    """A job's options as its tasks get them: no per-task progress bar unless asked for
    (Dask reports the progress of the tasks themselves)."""
    options = dict(options)
    options.setdefault("progress", False)
    return options


def _concat(frames: list[Any]) -> Any:
    return frame_library(frames[0]).concat(frames, ignore_index=True)


def _rows(part: Any, chunk: Chunk) -> Any:
    """The rows of ``chunk`` in its partition, after checking that the partition still has
    the rows it had when planned (planning remembers lengths by Dask name)."""
    if len(part) != chunk.partition_rows:
        raise ValueError(
            f"partition {chunk.partition} holds {len(part)} rows, but the job was planned when "
            f"it held {chunk.partition_rows}: the collection changed under the same Dask name "
            f"since it was first planned; call "
            f"gpualign_df.dask.forget_planned_lengths() and build the job again")
    return part.iloc[chunk.start:chunk.stop]


def task_align(*args: Any, **options: Any) -> Any:
    """:func:`gpualign_df.align` in a task: where the worker process sets
    ``GPUALIGN_TASK_THREADS`` (:func:`gpualign_df.cluster` does, so that the tasks running
    at once share the cores instead of each starting numba's thread count), the CPU engine
    runs on that many threads; numba's count is a per-thread setting, restored after."""
    from ..api import align
    from ..cluster import TASK_THREADS_VARIABLE

    wanted = os.environ.get(TASK_THREADS_VARIABLE)
    if not wanted:
        return align(*args, **options)
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(wanted), numba.config.NUMBA_NUM_THREADS)))
    try:
        return align(*args, **options)
    finally:
        numba.set_num_threads(before)


def _int_array(column: Any) -> np.ndarray:
    return np.asarray(column.fillna(0).astype("int64").to_numpy(), dtype=np.int64)


def _valid_array(column: Any) -> np.ndarray:
    return ~np.asarray(column.isna().to_numpy(), dtype=bool)


def _with_positions(series: Any, start: int) -> Any:
    """The same sequences labelled by their global positions ``start, start + 1, ...``."""
    out = series.reset_index(drop=True)
    out.index = out.index + start
    return out


def _align_positional(queries: Any, targets: Any, query_offset: int, target_offset: int,
                      **options: Any) -> Any:
    """``align`` with rows labelled by global position; bad input is reported by the rows'
    own labels (a second call with them re-raises, before any alignment work)."""
    try:
        return task_align(_with_positions(queries, query_offset),
                          _with_positions(targets, target_offset), **options)
    except ValueError:
        task_align(queries, targets, **options)
        raise


def _relabel(frame: Any, queries: Any, targets: Any, query_offset: int,
             target_offset: int) -> Any:
    """Positions in ``query``/``target`` back to the input labels; positions kept aside."""
    query_positions = _int_array(frame["query"])
    target_positions = _int_array(frame["target"])
    frame["query"] = queries.index.take(query_positions - query_offset)
    frame["target"] = targets.index.take(target_positions - target_offset)
    frame[_QPOS] = query_positions
    frame[_TPOS] = target_positions
    return frame


def strip_positions(frame: Any) -> Any:
    """A block's rows without the global positions kept aside: the result's columns."""
    return frame.drop(columns=[_QPOS, _TPOS]).reset_index(drop=True)


def _take_sorted(frame: Any, order: np.ndarray) -> Any:
    return frame.take(order).reset_index(drop=True)


def triangle_task(part: Any, *, chunk: Chunk, options: dict) -> Any:
    """All pairs i < j inside one chunk, i-major (the in-memory pairwise order)."""
    from ..api import pairwise_pairs

    queries = _rows(part, chunk)
    frame = task_align(queries, how="pairwise", **options)
    first, second = pairwise_pairs(len(queries))
    frame[_QPOS] = first + chunk.offset
    frame[_TPOS] = second + chunk.offset
    return frame


def rectangle_task(query_part: Any, target_part: Any, *, query_chunk: Chunk,
                   target_chunk: Chunk, options: dict, top_k: int | None = None) -> Any:
    """Every query of one chunk against every target of another (a search block), labelled
    by the inputs' labels, global positions kept aside."""
    queries = _rows(query_part, query_chunk)
    targets = _rows(target_part, target_chunk)
    frame = _align_positional(queries, targets, query_chunk.offset, target_chunk.offset,
                              how="search", top_k=top_k, **options)
    return _relabel(frame, queries, targets, query_chunk.offset, target_chunk.offset)


def pairwise_block_task(query_part: Any, target_part: Any, *, query_chunk: Chunk,
                        target_chunk: Chunk, options: dict) -> Any:
    """Off-diagonal pairwise block in (i, j) order."""
    frame = rectangle_task(query_part, target_part, query_chunk=query_chunk,
                           target_chunk=target_chunk, options=options)
    order = np.lexsort((_int_array(frame[_TPOS]), _int_array(frame[_QPOS])))
    return _take_sorted(frame, order)


def pairwise_merge(*blocks: Any) -> Any:
    """Blocks of one query chunk -> rows (i, j) i-major over global positions."""
    frame = _concat(list(blocks))
    order = np.lexsort((_int_array(frame[_TPOS]), _int_array(frame[_QPOS])))
    return strip_positions(_take_sorted(frame, order))


def _rank(frame: Any, top_k: int | None) -> np.ndarray:
    """Per query (global order), best score first, nulls last, ties by global target."""
    from ..api import best_first

    return best_first(_int_array(frame[_QPOS]), _int_array(frame[_TPOS]),
                      _int_array(frame["score"]), _valid_array(frame["score"]), top_k)


def search_merge(*blocks: Any) -> Any:
    """Blocks of one query chunk -> rows per query in global order, best score first, ties
    by global target position (the in-memory search order)."""
    frame = _concat(list(blocks))
    return strip_positions(_take_sorted(frame, _rank(frame, None)))


def _gather(parts: Sequence[Any], starts: np.ndarray, positions: np.ndarray) -> Any:
    """Rows at global ``positions`` (any order, repeats allowed) from the partitions."""
    owner = np.searchsorted(starts, positions, side="right") - 1
    pieces, where = [], []
    for partition in np.unique(owner).tolist():
        selected = np.flatnonzero(owner == partition)
        pieces.append(parts[partition].iloc[positions[selected] - starts[partition]])
        where.append(selected)
    if not pieces:
        return parts[0].iloc[:0]
    joined = pieces[0] if len(pieces) == 1 else frame_library(pieces[0]).concat(pieces)
    return joined.iloc[np.argsort(np.concatenate(where), kind="stable")]


def search_top_k_final(query_part: Any, target_parts: list[Any], *blocks: Any,
                       query_chunk: Chunk, target_starts: np.ndarray, top_k: int,
                       traceback: bool, options: dict) -> Any:
    """Best ``top_k`` per query across the database blocks, then traceback of survivors
    (a rowwise alignment of only those pairs: the blocks ran score-only)."""
    frame = _concat(list(blocks))
    keep = _rank(frame, top_k)
    if not traceback:
        return strip_positions(_take_sorted(frame, keep))
    query_positions = _int_array(frame[_QPOS])[keep]
    target_positions = _int_array(frame[_TPOS])[keep]
    queries = _rows(query_part, query_chunk).iloc[query_positions - query_chunk.offset]
    targets = _gather(target_parts, target_starts, target_positions)
    return task_align(queries, targets, how="rowwise", traceback=True, **options)


def _whole_series(*parts: Any) -> Any:
    """The partitions of a Series joined into one (the broadcast search database)."""
    return parts[0] if len(parts) == 1 else frame_library(parts[0]).concat(list(parts))


def broadcast_search_task(query_part: Any, *database_parts: Any, query_chunk: Chunk,
                          top_k: int | None, options: dict) -> Any:
    """One query chunk against the whole database (its partitions joined here): final
    rows, in the in-memory order. Taking the partitions, not one joined task output, lets
    the scheduler place each task by its query partition instead of piling every task on
    the worker that would hold the joined database. The database is whole and in its global
    order, so ``align``'s own order (ties by target position) is the global one: no
    relabelling by position is needed."""
    database = _whole_series(*database_parts)
    queries = _rows(query_part, query_chunk)
    return task_align(queries, database, how="search", top_k=top_k, **options)


def rowwise_task(queries: Any, targets: Any, *, partition: int, options: dict) -> Any:
    """Row k of ``queries`` against row k of ``targets``: partition ``partition`` of two
    co-partitioned Series, whose row counts must match (checked here: only the number of
    partitions is known when the job is built)."""
    if len(queries) != len(targets):
        raise ValueError(
            f"rowwise needs co-partitioned Series (same rows in each partition): partition "
            f"{partition} holds {len(queries)} queries and {len(targets)} targets; take both "
            f"columns from one Dask DataFrame or repartition them alike")
    return task_align(queries, targets, how="rowwise", **options)
