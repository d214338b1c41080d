"""The ``.aln`` accessor on Dask Series: alignment jobs split into cost-balanced Dask tasks.

Importing :mod:`gpualign_df` registers ``.aln`` on every ``dask.dataframe.Series``
(pandas-backed or cuDF-backed), as soon as ``dask.dataframe`` is imported (before or after
:mod:`gpualign_df`). Dask's own ``Series.align`` is left
alone. Each method returns a lazy ``dask.dataframe.DataFrame`` whose ``meta`` has the columns
and dtypes of the in-memory result, and whose ``.compute()`` equals, row for row, what the
in-memory accessor returns on the computed Series (``series.compute().aln.<method>(...)``),
for any partitioning and any number of workers.

Order: results follow the order of the Dask collection, which is the order of
``series.compute()``: pairwise pairs are (i, j) with i before j *in the collection*, rows of
every job come in the collection's order. ``dd.from_pandas(data)`` sorts the rows by their
index labels unless ``sort=False`` is given (or the index is already sorted), so with
labels such as ``"s0" .. "s59"`` the collection's order, and so the orientation of pairs,
is not the pandas order (``"s10"`` comes before ``"s2"``); every method then emits a
``UserWarning`` saying so. ``dd.from_pandas(data, sort=False)`` keeps the pandas order, and
the result then equals the in-memory accessor on ``data`` itself.

How the work is split
---------------------
* ``rowwise(other)``: one task per partition pair (partition k of the queries against
  partition k of ``other``); the two Series must have the same number of partitions and the
  same number of rows in each (co-partitioned). No eager work.
* ``pairwise()`` and ``search(database)``: the sequence lengths of every partition are
  computed eagerly once (one small Dask computation; remembered by the collection's Dask name,
  so planning a persisted Series again computes nothing; a task whose partition no longer has
  the planned rows stops with an error, see :func:`forget_planned_lengths`), then each
  partition is cut into *chunks* of contiguous rows so that one task, a pair of chunks, holds
  about ``cells_per_task`` DP cells (sum of ``len(query) * len(target)`` over its pairs) and
  at most about ``pairs_per_task`` pairs. ``pairwise`` runs the blocks (u, v) with u <= v of
  the chunk grid (all pairs i < j inside a diagonal block, the full rectangle off the
  diagonal), so every unordered pair is aligned exactly once; ``search`` runs every query
  chunk against every database chunk. :func:`plan_blocks` shows the plan (one row per task,
  longest first) and :func:`summarize_plan` its spread.
* Ordering (``ordered=True``, the default): the output has one partition per query chunk;
  that partition's task concatenates the blocks of its chunk and sorts them by global
  position: pairwise rows are (i, j), i < j, i-major over the global order of the Series;
  search rows are per query in global query order, best score first, ties broken by the
  target's *global* position (nulls last), so ``.compute()`` is the in-memory result.
  ``ordered=False`` skips that step for pairwise and for search without ``top_k``: one
  output partition per block, each block in the in-memory order within itself (less memory
  per partition; use it when the result is filtered or aggregated, not read in order).
* ``search(..., top_k=k)``: each block runs a score-only pass keeping at most k targets per
  query, a per-query-chunk task keeps the best k across database blocks (by score, then
  global target position), then traces back only those survivors (a rowwise alignment).
* A search database of at most ``BROADCAST_RESIDUES`` residues (``broadcast=None``; and
  small enough that a task of ``cells_per_task`` cells still holds
  ``BROADCAST_MIN_QUERY_RESIDUES`` query residues) is instead sent whole to every task
  (each task takes every database partition and joins them; a worker fetches each
  partition once): one task per query chunk (chunks sized by ``cells_per_task``), whose
  rows are final, with no reduction step; on the GPU such a task scores its chunk against
  the database without a pair list (:func:`gpualign_df.gpu.search_top_k`).

Each task calls :func:`gpualign_df.align` on the partition objects it receives (pandas
today, cuDF on dask-cuDF), with every option, ``backend`` included, passed through; the
per-task progress bar is off by default (use Dask's own progress reporting). Dask's query
planner ignores per-task priorities, so "longest first" is a property of the plan (tasks are
created in that order and are near-equal in cells), not an enforced schedule.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask._task_spec import Alias
from dask.base import tokenize
from dask.dataframe.core import _concat as _dask_concat
from dask.dataframe.dask_expr import new_collection
from dask.dataframe.dask_expr._expr import Expr
from dask.dataframe.dask_expr.io.io import FromGraph
from dask.dataframe.extensions import register_series_accessor

# The engine (gpualign_df.api, .engine: numba, the GPU code) is imported inside the functions
# that use it, not here: gpualign_df imports this module as soon as dask.dataframe is
# imported, which must not cost the engine's import time.

__all__ = ["DaskSeriesAlignAccessor", "plan_blocks", "summarize_plan", "forget_planned_lengths",
           "DEFAULT_CELLS_PER_TASK", "DEFAULT_GPU_CELLS_PER_TASK", "DEFAULT_PAIRS_PER_TASK"]

#: Default DP cells per task on pandas-backed collections: tens of seconds on one CPU core;
#: small enough tasks for Dask to balance, large enough that the per-task overhead stays
#: small.
DEFAULT_CELLS_PER_TASK = 10**11
#: Default DP cells per task on cuDF-backed collections (or ``backend="cuda"``): about 1 s
#: of an H100 for a score-only search, a few seconds with traceback, so that a task's fixed
#: cost (tens of milliseconds: Dask, joining and encoding its inputs, building its frame)
#: stays a few percent.
DEFAULT_GPU_CELLS_PER_TASK = 10**12
#: Default bound on pairs (result rows) per task.
DEFAULT_PAIRS_PER_TASK = 4_000_000

#: A search database of at most this many residues goes whole to every task (one task per
#: query chunk, no reduction across database blocks); larger ones are cut into blocks.
BROADCAST_RESIDUES = 1 << 28
#: ... provided each task then still holds at least this many query residues (so that the
#: per-task preparation of the database, linear in its size, stays a small share).
BROADCAST_MIN_QUERY_RESIDUES = 4096

_QPOS = "_gpualign_query_position"
_TPOS = "_gpualign_target_position"
_SIZING = ("cells_per_task", "pairs_per_task")
logger = logging.getLogger("gpualign_df.dask")


# ---------------------------------------------------------------------------------------------
# Planning (pure numpy; runs on the client)


@dataclass(frozen=True)
class Chunk:
    """Contiguous rows ``[start, stop)`` of one partition; ``offset`` is the global position
    of row ``start`` (its position in the whole Series)."""

    partition: int
    start: int
    stop: int
    offset: int
    residues: int
    squares: int
    partition_rows: int   # rows of the whole partition when planned

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Task:
    """One block of work: query chunk ``query`` against target chunk ``target``."""

    kind: str            # "triangle" (pairs i < j inside one chunk), "rectangle" or "search"
    query: int           # index into the query chunk list (also the output group)
    target: int          # index into the target chunk list
    pairs: int
    cells: int


def _split_partition(lengths: np.ndarray, residues: float, rows: int) -> list[tuple[int, int]]:
    """Cut one partition into near-equal runs of rows, each holding about ``residues`` residues
    (one long sequence may exceed it) and at most ``rows`` rows."""
    count = len(lengths)
    if count == 0:
        return []
    cumulative = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
    total = int(cumulative[-1])
    pieces = max(1, math.ceil(total / residues), math.ceil(count / rows))
    targets = total * np.arange(1, pieces, dtype=np.float64) / pieces
    cuts = np.searchsorted(cumulative, targets, side="left")
    bounds = np.unique(np.clip(np.concatenate(([0], cuts, [count])), 0, count))
    runs: list[tuple[int, int]] = []
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if stop - start > rows:
            parts = math.ceil((stop - start) / rows)
            edges = np.linspace(start, stop, parts + 1).round().astype(np.int64).tolist()
            runs.extend((a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a)
        elif stop > start:
            runs.append((start, stop))
    return runs


def _chunks(lengths: Sequence[np.ndarray], residues: float, rows: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    offset = 0
    for partition, part_lengths in enumerate(lengths):
        part_lengths = np.asarray(part_lengths, dtype=np.int64)
        for start, stop in _split_partition(part_lengths, residues, rows):
            run = part_lengths[start:stop]
            chunks.append(Chunk(partition, start, stop, offset + start, int(run.sum()),
                                int((run * run).sum()), len(part_lengths)))
        offset += len(part_lengths)
    return chunks


def _check_sizing(cells_per_task: float, pairs_per_task: float) -> None:
    for name, value in (("cells_per_task", cells_per_task), ("pairs_per_task", pairs_per_task)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not value >= 1:
            raise ValueError(f"{name} must be a number >= 1, got {value!r}")


def _plan(how: str, query_lengths: Sequence[np.ndarray],
          target_lengths: Sequence[np.ndarray] | None, cells_per_task: float,
          pairs_per_task: float, *, top_k: int | None = None,
          broadcast: bool | None = None) -> tuple[list[Chunk], list[Chunk], list[Task]]:
    """Chunks of both sides and the tasks, longest (most cells) first.

    A ``search`` whose database is broadcast has one target chunk, the whole database
    (``partition`` -1), and one task per query chunk; ``pairs_per_task`` then bounds the
    result rows of a task (``top_k`` per query when given)."""
    _check_sizing(cells_per_task, pairs_per_task)
    side_residues = math.sqrt(cells_per_task)
    side_rows = max(1, int(math.sqrt(pairs_per_task)))
    tasks: list[Task] = []
    if how == "pairwise":
        query_chunks = _chunks(query_lengths, side_residues, side_rows)
        target_chunks = query_chunks
        for u, first in enumerate(query_chunks):
            pairs = first.rows * (first.rows - 1) // 2
            if pairs:
                tasks.append(Task("triangle", u, u, pairs,
                                  (first.residues ** 2 - first.squares) // 2))
            for v in range(u + 1, len(query_chunks)):
                second = query_chunks[v]
                tasks.append(Task("rectangle", u, v, first.rows * second.rows,
                                  first.residues * second.residues))
    elif how == "search":
        assert target_lengths is not None
        if _broadcasts(target_lengths, broadcast, cells_per_task):
            database = np.concatenate([np.asarray(a, np.int64) for a in target_lengths] or
                                      [np.zeros(0, np.int64)])
            target_chunks = [Chunk(-1, 0, len(database), 0, int(database.sum()),
                                   int((database * database).sum()), len(database))]
            rows_per_query = max(1, min(top_k or len(database), len(database)))
            query_chunks = _chunks(query_lengths,
                                   max(1.0, cells_per_task / max(target_chunks[0].residues, 1)),
                                   max(1, int(pairs_per_task // rows_per_query)))
        else:
            target_chunks = _chunks(target_lengths, side_residues, side_rows)
            widest = max((c.residues for c in target_chunks), default=1) or 1
            tallest = max((c.rows for c in target_chunks), default=1)
            query_chunks = _chunks(query_lengths, max(1.0, cells_per_task / widest),
                                   max(1, int(pairs_per_task // tallest)))
        for u, first in enumerate(query_chunks):
            for v, second in enumerate(target_chunks):
                tasks.append(Task("search", u, v, first.rows * second.rows,
                                  first.residues * second.residues))
    else:
        raise ValueError(f"plan how must be 'pairwise' or 'search', got {how!r}")
    tasks.sort(key=lambda task: (-task.cells, -task.pairs, task.query, task.target))
    return query_chunks, target_chunks, tasks


def _broadcasts(target_lengths: Sequence[np.ndarray], broadcast: bool | None,
                cells_per_task: float) -> bool:
    """Whether a search sends the whole database to every task."""
    if broadcast is not None:
        return bool(broadcast)
    residues = sum(int(np.sum(a)) for a in target_lengths)
    return residues <= BROADCAST_RESIDUES and \
        cells_per_task >= BROADCAST_MIN_QUERY_RESIDUES * max(residues, 1)


def _plan_frame(query_chunks: list[Chunk], target_chunks: list[Chunk],
                tasks: list[Task]) -> pd.DataFrame:
    rows = [{
        "task": rank,
        "kind": task.kind,
        "group": task.query,
        "query_partition": query_chunks[task.query].partition,
        "query_start": query_chunks[task.query].offset,
        "query_stop": query_chunks[task.query].offset + query_chunks[task.query].rows,
        "target_partition": target_chunks[task.target].partition,
        "target_start": target_chunks[task.target].offset,
        "target_stop": target_chunks[task.target].offset + target_chunks[task.target].rows,
        "pairs": task.pairs,
        "cells": task.cells,
    } for rank, task in enumerate(tasks)]
    columns = ["task", "kind", "group", "query_partition", "query_start", "query_stop",
               "target_partition", "target_start", "target_stop", "pairs", "cells"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.astype({name: "int64" for name in columns if name != "kind"})


def summarize_plan(plan: pd.DataFrame) -> dict[str, float]:
    """Cost spread of a plan from :func:`plan_blocks`.

    Parameters
    ----------
    plan : pandas.DataFrame
        One row per task, with ``pairs`` and ``cells`` columns.

    Returns
    -------
    dict
        ``tasks``, ``pairs``, ``cells`` (totals) and ``min_cells``, ``median_cells``,
        ``max_cells`` per task, and ``spread`` (max / median cells; 1.0 is perfectly even).

    Examples
    --------
    >>> import pandas as pd
    >>> plan = pd.DataFrame({"pairs": [6, 6, 3], "cells": [600, 600, 300]})
    >>> summarize_plan(plan)["spread"]
    1.0
    """
    cells = plan["cells"].to_numpy(dtype=np.float64)
    if len(cells) == 0:
        return {"tasks": 0, "pairs": 0, "cells": 0, "min_cells": 0.0, "median_cells": 0.0,
                "max_cells": 0.0, "spread": 1.0}
    median = float(np.median(cells))
    return {"tasks": int(len(cells)), "pairs": int(plan["pairs"].sum()),
            "cells": int(plan["cells"].sum()), "min_cells": float(cells.min()),
            "median_cells": median, "max_cells": float(cells.max()),
            "spread": float(cells.max() / median) if median > 0 else 1.0}


def _lengths_of(part: Any) -> np.ndarray:
    """Residue counts of one partition (pandas or cuDF Series); nulls count 0."""
    lengths = part.str.len().fillna(0).astype("int64")
    return np.asarray(lengths.to_numpy(), dtype=np.int64)


#: Per-partition lengths of recently planned collections, by Dask name (a Dask name
#: identifies the data: a persisted Series planned again costs no computation).
_LENGTHS_CACHE: OrderedDict[str, list[np.ndarray]] = OrderedDict()
_LENGTHS_CACHE_SIZE = 32


def forget_planned_lengths() -> None:
    """Forget the partition lengths that planning remembers by Dask name.

    Needed only when a collection's data changes while its Dask name does not (a file
    rewritten in place and read again with the same arguments): a job planned on the old
    lengths stops with an error naming the partition instead of aligning the wrong rows.

    Examples
    --------
    >>> from gpualign_df.accessor.dask import forget_planned_lengths
    >>> forget_planned_lengths()
    """
    _LENGTHS_CACHE.clear()


def _partition_lengths(*series: dd.Series) -> list[list[np.ndarray]]:
    """The per-partition length arrays of each Series: remembered by Dask name, the rest
    computed eagerly in one computation."""
    missing = list(dict.fromkeys(s._name for s in series if s._name not in _LENGTHS_CACHE))
    if missing:
        by_name = {s._name: s for s in series}
        jobs = [[dask.delayed(_lengths_of, pure=True)(part) for part in
                 by_name[name].to_delayed()] for name in missing]
        for name, arrays in zip(missing, dask.compute(*jobs)):
            _LENGTHS_CACHE[name] = list(arrays)
    found = [_LENGTHS_CACHE[s._name] for s in series]
    for name in dict.fromkeys(s._name for s in series):
        _LENGTHS_CACHE.move_to_end(name)
    while len(_LENGTHS_CACHE) > _LENGTHS_CACHE_SIZE:
        _LENGTHS_CACHE.popitem(last=False)
    return [list(arrays) for arrays in found]


def _sorted_by_from_pandas(series: dd.Series) -> bool:
    """Whether ``series`` comes, anywhere in its expression, from ``dd.from_pandas(data,
    sort=True)`` (Dask's default) of a pandas (or cuDF) object whose index was not monotonic
    increasing: then Dask sorted the rows by their labels, and the collection's order (which
    a Dask job follows) is not the order of ``data``. Reads Dask's expression (``FromPandas``
    and its ``frame`` and ``sort`` operands); any failure to read it (another Dask version,
    another kind of collection) is taken as False."""
    try:
        from dask.dataframe.dask_expr.io.io import FromPandas

        for expr in series.expr.walk():
            if isinstance(expr, FromPandas) and expr.operand("sort"):
                frame = expr.operand("frame")
                data = getattr(frame, "_data", frame)
                if not bool(data.index.is_monotonic_increasing):
                    return True
    except Exception:  # noqa: BLE001 - a reading we cannot make means no warning
        return False
    return False


def _warn_if_sorted_by_dask(how: str, inputs: dict[str, dd.Series]) -> None:
    """A ``UserWarning`` where an input was reordered by ``dd.from_pandas`` (see
    :func:`_sorted_by_from_pandas`): the job's pairs and rows then follow the sorted labels,
    which surprises anyone comparing with the pandas Series they started from."""
    sorted_inputs = [role for role, series in inputs.items() if _sorted_by_from_pandas(series)]
    if not sorted_inputs:
        return
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1   # point at the caller outside this module
    warnings.warn(
        f"gpualign_df {how}: Dask sorted the rows of the {' and '.join(sorted_inputs)} by "
        f"their labels (dd.from_pandas sorts unless the index is already sorted), so pairs "
        f"are oriented and rows ordered by the sorted labels, not by the pandas order; pass "
        f"sort=False to dd.from_pandas to keep the pandas order", UserWarning,
        stacklevel=level)


def _check_dask_series(value: Any, how: str, role: str) -> None:
    """The one check that an input of a Dask job (``role``: queries, database, other) is a
    Dask Series, with the one message for every entry point (``plan`` and ``search`` name
    a pandas database alike)."""
    if not isinstance(value, dd.Series):
        raise TypeError(f"{how} on a Dask Series needs a Dask Series as {role}, got "
                        f"{type(value).__module__.split('.')[0]}.{type(value).__name__}; "
                        f"convert it with dask.dataframe.from_pandas(..., sort=False)")


def plan_blocks(queries: dd.Series, database: dd.Series | None = None, *,
                how: str | None = None, cells_per_task: float | None = None,
                pairs_per_task: float = DEFAULT_PAIRS_PER_TASK, top_k: int | None = None,
                broadcast: bool | None = None, backend: str = "auto") -> pd.DataFrame:
    """The task plan of a Dask ``pairwise`` or ``search`` job, one row per task.

    Computes the sequence lengths of every partition (eagerly, one small Dask computation).

    Parameters
    ----------
    queries : dask.dataframe.Series
        The query sequences (all of them for ``pairwise``).
    database : dask.dataframe.Series, optional
        The database of a ``search``; None for ``pairwise``.
    how : {"pairwise", "search"}, optional
        Default: ``"search"`` when ``database`` is given, else ``"pairwise"``.
    cells_per_task : float, optional
        Target DP cells (sum of ``len(query) * len(target)``) per task. Default:
        ``DEFAULT_GPU_CELLS_PER_TASK`` (10**12) for cuDF-backed queries or
        ``backend="cuda"``, ``DEFAULT_CELLS_PER_TASK`` (10**11) otherwise.
    pairs_per_task : float
        Upper bound (approximately) on pairs per task (on result rows per task for a
        broadcast search).
    top_k : int, optional
        The search's ``top_k`` (result rows per query of a broadcast search).
    broadcast : bool, optional
        Search only: send the whole database to every task (one task per query chunk).
        Default: when the database holds at most ``BROADCAST_RESIDUES`` residues and each
        task still gets ``BROADCAST_MIN_QUERY_RESIDUES`` query residues.
    backend : {"auto", "cuda", "cpu"}
        The job's ``backend``: the default ``cells_per_task`` follows it as the job's does,
        so that the plan is the job's.

    Returns
    -------
    pandas.DataFrame
        Columns ``task`` (rank, longest first), ``kind`` (``triangle``: all pairs i < j of
        one chunk; ``rectangle``: two chunks of a pairwise job; ``search``), ``group`` (the
        output partition of an ordered result), ``query_partition``, ``query_start``,
        ``query_stop``, ``target_partition``, ``target_start``, ``target_stop`` (global row
        positions, stop exclusive), ``pairs``, ``cells``. :func:`summarize_plan` gives the
        spread.

    Raises
    ------
    TypeError
        Where ``queries`` or ``database`` is not a Dask Series (a pandas database, say), with
        the message ``search()`` gives.

    Warns
    -----
    UserWarning
        Where ``dd.from_pandas`` sorted an input by its labels, as the jobs do (the plan's
        positions are the collection's, the sorted order).

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> seqs = dd.from_pandas(pd.Series(["ACGT" * 25] * 40), npartitions=2)
    >>> plan = plan_blocks(seqs, cells_per_task=4e6)
    >>> plan[["kind", "pairs", "cells"]].values.tolist()
    [['rectangle', 400, 4000000], ['triangle', 190, 1900000], ['triangle', 190, 1900000]]
    >>> summarize_plan(plan)["tasks"], int(plan["pairs"].sum()) == 40 * 39 // 2
    (3, True)
    """
    from ..engine import check_backend

    if how is None:
        how = "pairwise" if database is None else "search"
    _check_dask_series(queries, how, "queries")
    if database is not None:
        _check_dask_series(database, how, "database")
        _warn_if_sorted_by_dask("plan", {"queries": queries, "database": database})
    else:
        _warn_if_sorted_by_dask("plan", {"Series": queries})
    if how == "pairwise" and database is not None:
        raise ValueError("how='pairwise' aligns all pairs within one collection: give no "
                         "database")
    if how == "search" and database is None:
        raise ValueError("how='search' needs a database")
    check_backend(backend)
    if cells_per_task is None:
        cells_per_task = _default_cells(queries, backend)
    _check_sizing(cells_per_task, pairs_per_task)
    lengths = _partition_lengths(queries) if database is None else \
        _partition_lengths(queries, database)
    query_chunks, target_chunks, tasks = _plan(how, lengths[0], lengths[-1] if database
                                               is not None else None, cells_per_task,
                                               pairs_per_task, top_k=top_k,
                                               broadcast=broadcast)
    return _plan_frame(query_chunks, target_chunks, tasks)


# ---------------------------------------------------------------------------------------------
# Tasks (run on the workers, on whatever partition type they receive)


def _frame_library(obj: Any):
    """pandas, or cuDF when ``obj`` is a cuDF object."""
    if type(obj).__module__.split(".")[0] == "cudf":
        import cudf

        return cudf
    return pd


def _concat(frames: list[Any]) -> Any:
    return _frame_library(frames[0]).concat(frames, ignore_index=True)


def _rows(part: Any, chunk: Chunk) -> Any:
    """The rows of ``chunk`` in its partition, after checking that the partition still has
    the rows it had when planned (planning remembers lengths by Dask name)."""
    if len(part) != chunk.partition_rows:
        raise ValueError(
            f"partition {chunk.partition} holds {len(part)} rows, but the job was planned when "
            f"it held {chunk.partition_rows}: the collection changed under the same Dask name "
            f"since it was first planned; call "
            f"gpualign_df.accessor.dask.forget_planned_lengths() and build the job again")
    return part.iloc[chunk.start:chunk.stop]


def _task_align(*args: Any, **options: Any) -> Any:
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
        return _task_align(_with_positions(queries, query_offset),
                     _with_positions(targets, target_offset), **options)
    except ValueError:
        _task_align(queries, targets, **options)
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


def _strip(frame: Any) -> Any:
    return frame.drop(columns=[_QPOS, _TPOS]).reset_index(drop=True)


def _take_sorted(frame: Any, order: np.ndarray) -> Any:
    return frame.take(order).reset_index(drop=True)


def _triangle_task(part: Any, *, chunk: Chunk, options: dict) -> Any:
    """All pairs i < j inside one chunk, i-major (the in-memory pairwise order)."""
    from ..api import pairwise_pairs

    queries = _rows(part, chunk)
    frame = _task_align(queries, how="pairwise", **options)
    first, second = pairwise_pairs(len(queries))
    frame[_QPOS] = first + chunk.offset
    frame[_TPOS] = second + chunk.offset
    return frame


def _rectangle_task(query_part: Any, target_part: Any, *, query_chunk: Chunk,
                    target_chunk: Chunk, options: dict, top_k: int | None = None) -> Any:
    """Every query of one chunk against every target of another (a search block), labelled
    by the inputs' labels, global positions kept aside."""
    queries = _rows(query_part, query_chunk)
    targets = _rows(target_part, target_chunk)
    frame = _align_positional(queries, targets, query_chunk.offset, target_chunk.offset,
                              how="search", top_k=top_k, **options)
    return _relabel(frame, queries, targets, query_chunk.offset, target_chunk.offset)


def _pairwise_block_task(query_part: Any, target_part: Any, *, query_chunk: Chunk,
                         target_chunk: Chunk, options: dict) -> Any:
    """Off-diagonal pairwise block in (i, j) order."""
    frame = _rectangle_task(query_part, target_part, query_chunk=query_chunk,
                            target_chunk=target_chunk, options=options)
    order = np.lexsort((_int_array(frame[_TPOS]), _int_array(frame[_QPOS])))
    return _take_sorted(frame, order)


def _pairwise_merge(*blocks: Any) -> Any:
    """Blocks of one query chunk -> rows (i, j) i-major over global positions."""
    frame = _concat(list(blocks))
    order = np.lexsort((_int_array(frame[_TPOS]), _int_array(frame[_QPOS])))
    return _strip(_take_sorted(frame, order))


def _rank(frame: Any, top_k: int | None) -> np.ndarray:
    """Per query (global order), best score first, nulls last, ties by global target."""
    from ..api import best_first

    return best_first(_int_array(frame[_QPOS]), _int_array(frame[_TPOS]),
                      _int_array(frame["score"]), _valid_array(frame["score"]), top_k)


def _search_merge(*blocks: Any) -> Any:
    frame = _concat(list(blocks))
    return _strip(_take_sorted(frame, _rank(frame, None)))


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
    joined = pieces[0] if len(pieces) == 1 else _frame_library(pieces[0]).concat(pieces)
    return joined.iloc[np.argsort(np.concatenate(where), kind="stable")]


def _search_top_k_final(query_part: Any, target_parts: list[Any], *blocks: Any,
                        query_chunk: Chunk, target_starts: np.ndarray, top_k: int,
                        traceback: bool, options: dict) -> Any:
    """Best ``top_k`` per query across the database blocks, then traceback of survivors."""
    frame = _concat(list(blocks))
    keep = _rank(frame, top_k)
    if not traceback:
        return _strip(_take_sorted(frame, keep))
    query_positions = _int_array(frame[_QPOS])[keep]
    target_positions = _int_array(frame[_TPOS])[keep]
    queries = _rows(query_part, query_chunk).iloc[query_positions - query_chunk.offset]
    targets = _gather(target_parts, target_starts, target_positions)
    return _task_align(queries, targets, how="rowwise", traceback=True, **options)


def _whole_series(*parts: Any) -> Any:
    """The partitions of a Series joined into one (the broadcast search database)."""
    return parts[0] if len(parts) == 1 else _frame_library(parts[0]).concat(list(parts))


def _broadcast_search_task(query_part: Any, *database_parts: Any, query_chunk: Chunk,
                           top_k: int | None, options: dict) -> Any:
    """One query chunk against the whole database (its partitions joined here): final
    rows, in the in-memory order. Taking the partitions, not one joined task output, lets
    the scheduler place each task by its query partition instead of piling every task on
    the worker that would hold the joined database. The database is whole and in its global
    order, so ``align``'s own order (ties by target position) is the global one: no
    relabelling by position is needed."""
    database = _whole_series(*database_parts)
    queries = _rows(query_part, query_chunk)
    return _task_align(queries, database, how="search", top_k=top_k, **options)


def _rowwise_task(queries: Any, targets: Any, *, partition: int, options: dict) -> Any:
    if len(queries) != len(targets):
        raise ValueError(
            f"rowwise needs co-partitioned Series (same rows in each partition): partition "
            f"{partition} holds {len(queries)} queries and {len(targets)} targets; take both "
            f"columns from one Dask DataFrame or repartition them alike")
    return _task_align(queries, targets, how="rowwise", **options)


# ---------------------------------------------------------------------------------------------
# The accessor


def _task_options(options: dict) -> dict:
    options = dict(options)
    options.setdefault("progress", False)
    return options


#: Result metas of recently planned jobs, by the inputs' Dask names and the options (building
#: one runs ``align`` on empty cuDF frames: milliseconds of every planning on the GPU).
_META_CACHE: OrderedDict[str, Any] = OrderedDict()
_META_CACHE_SIZE = 32


def _result_meta(queries: dd.Series, targets: dd.Series | None, how: str,
                 top_k: int | None, options: dict) -> Any:
    """The empty result (columns, dtypes) from ``align`` on the inputs' empty meta; also
    validates every option before any graph is built (remembered by the inputs' Dask names
    and the options, which a remembered meta has passed)."""
    key = tokenize(queries._name, None if targets is None else targets._name, how, top_k,
                   options)
    if key not in _META_CACHE:
        _META_CACHE[key] = _build_result_meta(queries, targets, how, top_k, options)
        while len(_META_CACHE) > _META_CACHE_SIZE:
            _META_CACHE.popitem(last=False)
    _META_CACHE.move_to_end(key)
    return _META_CACHE[key]


def _build_result_meta(queries: dd.Series, targets: dd.Series | None, how: str,
                       top_k: int | None, options: dict) -> Any:
    from ..api import align
    from ..engine import check_options

    backend = options.get("backend", "auto")
    check_options(backend, options.get("cigar_style", "="), options.get("clip"))
    meta_options = dict(options, progress=False)
    # the client may have no GPU while the workers do: meta needs no engine
    meta_options["backend"] = "auto" if backend == "cuda" else backend
    extra = {} if top_k is None else {"top_k": top_k}
    if targets is None:
        return align(queries._meta, how=how, **meta_options)
    return align(queries._meta, targets._meta, how=how, **extra, **meta_options)


class _Graph:
    """The tasks of one job, written straight into one graph (no per-task Delayed call:
    building tens of thousands of block tasks takes well under a second).

    ``parts[i]`` are the partition keys of the i-th input Series. Where an input partition
    is an alias of another key (a persisted collection's partitions alias the persisted
    futures), the alias is followed, so the job's tasks take the persisted data itself and
    no alias task runs before them.

    Task arguments are those keys (or lists of them) and earlier tasks; everything else is
    bound into the callable with ``functools.partial``. Each kind of task (``step``) gets its
    own key prefix (``gpualign-search-broadcast-<token>``, ...): the scheduler estimates a
    task's duration from its prefix, and balances the GPUs by those estimates (a shared
    prefix mixed the alignment tasks with near-instant ones). Alignment tasks also name
    their job's size, the decade of its largest task's cells
    (``gpualign-search-broadcast-sizeExii-<token>`` for 10**12 to 10**13): durations learnt
    from a small job do not mislead the placement of a large one's first run (one GPU
    idled for 0.9 s of a 2.4 s 2-GPU search that followed a small one).
    """

    def __init__(self, prefix: str, token: str, *inputs: dd.Series) -> None:
        self.prefix, self.token = prefix, token
        self.layer: dict[Any, Any] = {}
        self.parts: list[list[Any]] = []
        for series in inputs:
            graph, keys = _partition_keys(series)
            self.layer.update(graph)
            self.parts.append(keys)

    def add(self, func: Callable, *keys: Any, step: str, cells: float | None = None,
            **static: Any) -> tuple[str, int]:
        if cells is not None:
            step = f"{step}-{_size_word(cells)}"
        key = (f"{self.prefix}-{step}-{self.token}", len(self.layer))
        self.layer[key] = (partial(func, **static) if static else func, *keys)
        return key

    def frame(self, outputs: Sequence[tuple[str, int]], meta: Any) -> dd.DataFrame:
        """The lazy frame whose partitions are ``outputs`` (tasks of one step, in order).

        The output tasks are stored under the frame's own keys, each checking its result's
        columns and dtypes against ``meta`` itself (by name: no frame is pickled into the
        tasks): ``dd.from_delayed`` would run two more tasks per partition (a container
        alias and the meta check) and ``from_graph`` one alias, each another scheduler round
        trip between an alignment task and the result.
        """
        if not outputs:
            outputs = [self.add(meta.copy, step="empty")]
        name = outputs[0][0]
        step_keys = {key for key in self.layer if isinstance(key, tuple) and key[0] == name}
        if step_keys != set(outputs) or len(outputs) != len(step_keys):
            raise AssertionError(f"the outputs must be every task of step {name!r}, once")
        layer = {key: task for key, task in self.layer.items() if key not in step_keys}
        schema = _schema(meta)
        for index, key in enumerate(outputs):
            func, *arguments = self.layer[key]
            layer[(name, index)] = (partial(_checked_output, func=func, schema=schema,
                                            partition=index), *arguments)
        return new_collection(_TaskFrame(layer, meta, (None,) * (len(outputs) + 1),
                                         list(range(len(outputs))), name))


_ROMAN = ("n", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii",
          "xiii", "xiv", "xv", "xvi", "xvii", "xviii", "xix", "xx")


def _size_word(cells: float) -> str:
    """The decade of a task's cells as a key word Dask keeps in the task prefix (letters
    only): ``sizeExii`` for 10**12 <= cells < 10**13, ``sizeEn`` below 10; a word that is not
    taken for a hex token (no 8 letters starting with a-f)."""
    decade = int(math.log10(cells)) if cells >= 1 else 0
    return "sizeE" + _ROMAN[min(decade, len(_ROMAN) - 1)]


def _partition_keys(series: dd.Series) -> tuple[dict, list[Any]]:
    """The optimized graph of a Series' partitions and each partition's key, aliases followed
    (and the aliases followed dropped from the graph where no other task refers to them)."""
    parts = series.to_delayed()
    graph = dict(parts[0].__dask_graph__()) if parts else {}
    keys, followed = [], set()
    for part in parts:
        key = part.key
        while isinstance(graph.get(key), Alias) and graph[key].target in graph:
            followed.add(key)
            key = graph[key].target
        keys.append(key)
    referenced = {dependency for key, task in graph.items() if key not in followed
                  for dependency in getattr(task, "dependencies", ())}
    for key in followed - referenced - set(keys):
        del graph[key]
    return graph, keys


def _schema(frame: Any) -> tuple[tuple[str, str], ...]:
    """A frame's (column, dtype name) pairs."""
    return tuple((str(column), str(dtype)) for column, dtype in frame.dtypes.items())


def _checked_output(*arguments: Any, func: Callable, schema: tuple, partition: int) -> Any:
    """An output task: ``func``'s frame, whose columns and dtypes must be the job's meta's."""
    frame = func(*arguments)
    if _schema(frame) != schema:
        raise ValueError(f"gpualign_df: output partition {partition} has columns/dtypes "
                         f"{_schema(frame)}, but the job's meta has {schema}")
    return _sized_by_dask(frame)


def _sized_by_dask(frame: Any) -> Any:
    """``frame``, with Dask's dispatch for cuDF registered in this process where it is a
    cuDF frame: Dask sizes cuDF objects (``dask.sizeof``, which the scheduler's task
    placement and a worker's memory accounting use) only once ``dask_cudf`` is imported,
    which Dask's own concatenation of the outputs used to do in a worker."""
    if _frame_library(frame) is not pd:
        try:
            import dask_cudf  # noqa: F401
        except ImportError:
            pass
    return frame


class _TaskFrame(FromGraph):
    """A Dask DataFrame expression over a graph whose tasks already sit under the frame's
    keys (``(name, i)``): no alias layer, unlike :class:`FromGraph`. ``name`` (the job's
    step prefix and token, computed from its inputs and options) names it, so the graph is
    never tokenized."""

    @functools.cached_property
    def _name(self) -> str:
        return self.operand("name_prefix")

    def __dask_tokenize__(self) -> str:
        return self.operand("name_prefix")

    def _layer(self) -> dict:
        return dict(self.operand("layer"))

    def finalize_compute(self):
        """What ``compute()`` runs after the job: one task joining its output partitions
        (:func:`_concatenate_outputs`) where Dask would run its own concatenation."""
        if self.npartitions == 1:
            return self
        return _Concatenated(self)


class _Concatenated(Expr):
    """One partition: the output partitions of a :class:`_TaskFrame` joined by one task
    (the frame ``compute()`` returns)."""

    _parameters = ["frame"]

    @functools.cached_property
    def _meta(self):
        return self.frame._meta

    def _divisions(self) -> tuple:
        return (None, None)

    @functools.cached_property
    def _name(self) -> str:
        return f"gpualign-concatenate-{self.frame._name.rsplit('-', 1)[-1]}"

    def __dask_tokenize__(self) -> str:
        return self._name

    def _layer(self) -> dict:
        return {(self._name, 0): (_concatenate_outputs, self.frame.__dask_keys__())}


def _concatenate_outputs(parts: list[Any]) -> Any:
    """A job's output partitions as one frame, the frame Dask's own concatenation gives
    (``dask.dataframe.core._concat``: empty partitions left out, each partition's index
    kept). cuDF partitions with default indexes (every alignment output) are joined as
    pylibcudf tables in one libcudf call; ``cudf.concat`` makes a call per column and a
    pass of type checks per partition (the 8 partitions of the issue-4 search on an H100:
    4.3 ms, against 9.5 for ``cudf.concat``)."""
    kept = [part for part in parts if len(part)]
    if len(kept) < 2 or _frame_library(kept[0]) is pd or not _default_indexes(kept):
        return _dask_concat(parts)
    import cudf
    import cupy
    import pylibcudf as plc

    converted = [part.to_pylibcudf() for part in kept]   # (table of the columns, metadata)
    joined = plc.concatenate.concatenate([table for table, _ in converted])
    index = cudf.Index(cupy.concatenate([cupy.arange(len(part), dtype=cupy.int64)
                                         for part in kept]))
    return _sized_by_dask(cudf.DataFrame.from_pylibcudf(
        joined, {"columns": converted[0][1]["columns"], "index": index}))


def _default_indexes(parts: list[Any]) -> bool:
    """Every partition has an unnamed index 0, 1, 2, ... (a RangeIndex from 0, step 1).
    Their columns and dtypes need no check here: every output task has matched them to the
    job's meta already (:func:`_checked_output`)."""
    return all(type(part.index).__name__ == "RangeIndex" and part.index.start == 0
               and part.index.step == 1 and part.index.name is None for part in parts)


def _default_cells(series: dd.Series, backend: str) -> float:
    """Default cells per task: larger on the GPU, where a task's fixed cost weighs more."""
    on_gpu = backend == "cuda" or (backend == "auto" and
                                   _frame_library(series._meta) is not pd)
    return DEFAULT_GPU_CELLS_PER_TASK if on_gpu else DEFAULT_CELLS_PER_TASK


def _sizing(series: dd.Series, options: dict) -> tuple[float, float]:
    cells = options.pop("cells_per_task", None)
    if cells is None:
        cells = _default_cells(series, options.get("backend", "auto"))
    pairs = options.pop("pairs_per_task", DEFAULT_PAIRS_PER_TASK)
    _check_sizing(cells, pairs)
    return cells, pairs


def _log_plan(how: str, query_chunks: list[Chunk], target_chunks: list[Chunk],
              tasks: list[Task]) -> None:
    if logger.isEnabledFor(logging.INFO):
        summary = summarize_plan(_plan_frame(query_chunks, target_chunks, tasks))
        logger.info("gpualign %s: %d tasks, %d pairs, %.3g cells; cells per task min %.3g "
                    "median %.3g max %.3g (spread %.2f)", how, summary["tasks"],
                    summary["pairs"], summary["cells"], summary["min_cells"],
                    summary["median_cells"], summary["max_cells"], summary["spread"])


@register_series_accessor("aln")
class DaskSeriesAlignAccessor:
    """Alignment jobs on a Dask Series of sequences: ``series.aln.rowwise/pairwise/search``.

    Every method takes the keyword options of :func:`gpualign_df.align` (``mode``,
    ``matrix``, ``match``, ``mismatch``, ``gap_open``, ``gap_extend``, ``free_ends``,
    ``traceback``, ``cigar_style``, ``clip``, ``backend``, ``progress``) and returns a lazy
    ``dask.dataframe.DataFrame``; ``.compute()`` equals the in-memory result on the
    computed Series. ``pairwise`` and ``search`` also take ``cells_per_task``,
    ``pairs_per_task`` (task sizing; see :func:`plan_blocks`) and ``ordered``.

    Rows and the orientation of pairs follow the collection's order (that of
    ``series.compute()``). ``dd.from_pandas`` sorts rows by label unless ``sort=False``: a
    Series it reordered (an unsorted index) makes every method warn (``UserWarning``), since
    its pairs and rows then follow the sorted labels, not the pandas order; pass
    ``sort=False`` to keep that.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd, gpualign_df
    >>> reads = dd.from_pandas(pd.Series(["ACGTTGCA", "ACGTAGCA", "ACGTAGCC"],
    ...                                  index=[1, 2, 3]), npartitions=2)
    >>> pairs = reads.aln.pairwise(mode="nw", match=1, mismatch=-1, gap_open=2,
    ...                            gap_extend=1, backend="cpu")
    >>> pairs.compute()[["query", "target", "score", "cigar"]].values.tolist()
    [[1, 2, 6, '4=1X3='], [1, 3, 4, '4=1X2=1X'], [2, 3, 6, '7=1X']]
    """

    def __init__(self, series: dd.Series) -> None:
        self._series = series

    def rowwise(self, other: dd.Series, **options: Any) -> dd.DataFrame:
        """Align row k of this Series against row k of ``other``, partition by partition.

        Parameters
        ----------
        other : dask.dataframe.Series
            Co-partitioned with this Series: the same number of partitions (checked now)
            and the same number of rows in each (checked when computed), e.g. another
            column of the same Dask DataFrame.
        **options
            Keyword options of :func:`gpualign_df.align`.

        Returns
        -------
        dask.dataframe.DataFrame
            Lazy; one output partition per input partition, rows in input order.

        Raises
        ------
        ValueError
            When the two Series are not co-partitioned.

        Warns
        -----
        UserWarning
            Where ``dd.from_pandas`` sorted either Series by its labels (see the class
            docstring): rows follow the collections' order, ``series.compute()``'s.

        Examples
        --------
        >>> import pandas as pd, dask.dataframe as dd, gpualign_df
        >>> frame = dd.from_pandas(pd.DataFrame({"read": ["ACGT", None, "ACGA"],
        ...                                      "mate": ["ACTT", "AC", "ACGA"]}), npartitions=2)
        >>> rows = frame.read.aln.rowwise(frame.mate, match=2, mismatch=-1, gap_open=3,
        ...                               gap_extend=1, backend="cpu")
        >>> rows.compute()[["query", "score", "cigar"]].values.tolist()
        [[0, 5, '2=1X1='], [1, <NA>, <NA>], [2, 8, '4=']]
        """
        _check_dask_series(other, "rowwise", "other")
        _warn_if_sorted_by_dask("rowwise", {"queries": self._series, "other Series": other})
        queries = self._series
        if queries.npartitions != other.npartitions:
            raise ValueError(
                f"rowwise needs co-partitioned Series: {queries.npartitions} query partitions "
                f"but {other.npartitions} target partitions; take both columns from one Dask "
                f"DataFrame or repartition them alike")
        meta = _result_meta(queries, other, "rowwise", None, options)
        task_options = _task_options(options)
        graph = _Graph("gpualign-rowwise", tokenize(queries._name, other._name, task_options),
                       queries, other)
        query_parts, target_parts = graph.parts
        keys = [graph.add(_rowwise_task, query_part, target_part, step="align",
                          partition=k, options=task_options)
                for k, (query_part, target_part) in enumerate(zip(query_parts, target_parts))]
        return graph.frame(keys, meta)

    def pairwise(self, *, ordered: bool = True, **options: Any) -> dd.DataFrame:
        """Align all pairs i < j of this Series, in cost-balanced blocks.

        Parameters
        ----------
        ordered : bool
            True: one output partition per query chunk, rows (i, j) i-major over the
            global order (the in-memory order). False: one output partition per block,
            each in (i, j) order within itself.
        **options
            ``cells_per_task``, ``pairs_per_task`` (see :func:`plan_blocks`) and the
            keyword options of :func:`gpualign_df.align`.

        Returns
        -------
        dask.dataframe.DataFrame
            Lazy; one row per unordered pair, computed exactly once. Pair (i, j) has i
            before j in the collection's order (``series.compute()``'s).

        Warns
        -----
        UserWarning
            Where ``dd.from_pandas`` sorted the Series by its labels (its index was not
            sorted and ``sort=False`` was not given): pairs are then oriented by the sorted
            labels, not by the pandas order.

        Examples
        --------
        >>> import pandas as pd, dask.dataframe as dd, gpualign_df
        >>> seqs = dd.from_pandas(pd.Series(["ACGT", "ACGA", "TCGA", "ACGT"]), npartitions=3)
        >>> len(seqs.aln.pairwise(match=1, mismatch=-1, backend="cpu").compute())
        6
        """
        series = self._series
        _warn_if_sorted_by_dask("pairwise", {"Series": series})
        options = dict(options)
        cells, pairs = _sizing(series, options)
        meta = _result_meta(series, None, "pairwise", None, options)
        task_options = _task_options(options)
        (lengths,) = _partition_lengths(series)
        query_chunks, _, tasks = _plan("pairwise", lengths, None, cells, pairs)
        _log_plan("pairwise", query_chunks, query_chunks, tasks)
        graph = _Graph("gpualign-pairwise", tokenize(series._name, task_options, cells, pairs,
                                                     ordered, query_chunks), series)
        (parts,) = graph.parts
        built: dict[tuple[int, int], tuple[str, int]] = {}
        for task in tasks:   # created longest first
            first, second = query_chunks[task.query], query_chunks[task.target]
            if task.kind == "triangle":
                block = graph.add(_triangle_task, parts[first.partition], step="block",
                                  cells=tasks[0].cells, chunk=first, options=task_options)
            else:
                block = graph.add(_pairwise_block_task, parts[first.partition],
                                  parts[second.partition], step="block", cells=tasks[0].cells,
                                  query_chunk=first, target_chunk=second, options=task_options)
            built[(task.query, task.target)] = block
        keys = sorted(built)
        if ordered:
            outputs = [graph.add(_pairwise_merge, *[built[key] for key in keys if key[0] == u],
                                 step="merge")
                       for u in sorted({key[0] for key in keys})]
        else:
            outputs = [graph.add(_strip, built[key], step="strip") for key in keys]
        return graph.frame(outputs, meta)

    def search(self, database: dd.Series, top_k: int | None = None, *, ordered: bool = True,
               broadcast: bool | None = None, **options: Any) -> dd.DataFrame:
        """Align every sequence against every ``database`` sequence, best first per query.

        Parameters
        ----------
        database : dask.dataframe.Series
            The targets, any partitioning.
        top_k : int, optional
            Keep the best k targets per query: a score-only pass per block keeping k per
            query, a reduction across database blocks, then traceback of the survivors.
        ordered : bool
            True: per query in global order, best score first, ties by global target
            position (the in-memory order). False (without ``top_k``): one output
            partition per block, in that order within the block only.
        broadcast : bool, optional
            True: every task gets the whole database (all its partitions) and one query
            chunk, and its rows are final (no reduction across database
            blocks). False: query chunks x database chunks, then the per-query reduction.
            Default: broadcast when the database holds at most ``BROADCAST_RESIDUES``
            (2**28) residues and a task still gets at least
            ``BROADCAST_MIN_QUERY_RESIDUES`` (4,096) query residues.
        **options
            ``cells_per_task``, ``pairs_per_task`` (see :func:`plan_blocks`) and the
            keyword options of :func:`gpualign_df.align`.

        Returns
        -------
        dask.dataframe.DataFrame
            Lazy; one row per (query, target) pair kept, queries in the collection's order
            and ties by the database collection's order (those of ``.compute()``).

        Warns
        -----
        UserWarning
            Where ``dd.from_pandas`` sorted the queries or the database by their labels:
            rows and ties then follow the sorted labels, not the pandas order.

        Examples
        --------
        >>> import pandas as pd, dask.dataframe as dd, gpualign_df
        >>> queries = dd.from_pandas(pd.Series(["ACGTACGT"], index=[7]), npartitions=1)
        >>> db = dd.from_pandas(pd.Series(["TTTT", "ACGTACGA", "ACGTACGT"]), npartitions=2)
        >>> hits = queries.aln.search(db, top_k=2, match=1, mismatch=-2, backend="cpu")
        >>> hits.compute()[["query", "target", "score"]].values.tolist()
        [[7, 2, 8], [7, 1, 7]]
        """
        _check_dask_series(database, "search", "database")
        _warn_if_sorted_by_dask("search", {"queries": self._series, "database": database})
        queries = self._series
        options = dict(options)
        cells, pairs = _sizing(queries, options)
        meta = _result_meta(queries, database, "search", top_k, options)
        traceback = options.pop("traceback", True)
        task_options = _task_options(options)
        query_lengths, target_lengths = _partition_lengths(queries, database)
        query_chunks, target_chunks, tasks = _plan("search", query_lengths, target_lengths,
                                                   cells, pairs, top_k=top_k,
                                                   broadcast=broadcast)
        _log_plan("search", query_chunks, target_chunks, tasks)
        graph = _Graph("gpualign-search", tokenize(queries._name, database._name, task_options,
                                                   traceback, top_k, cells, pairs, ordered,
                                                   broadcast, query_chunks, target_chunks),
                       queries, database)
        query_parts, target_parts = graph.parts
        if target_chunks and target_chunks[0].partition == -1:   # the database broadcast
            built_chunks = {task.query: graph.add(
                _broadcast_search_task, query_parts[query_chunks[task.query].partition],
                *target_parts, step="broadcast", cells=tasks[0].cells,
                query_chunk=query_chunks[task.query], top_k=top_k,
                options=dict(task_options, traceback=traceback)) for task in tasks}
            return graph.frame([built_chunks[u] for u in sorted(built_chunks)], meta)
        block_options = dict(task_options, traceback=traceback and top_k is None)
        built: dict[tuple[int, int], tuple[str, int]] = {}
        for task in tasks:   # created longest first
            first, second = query_chunks[task.query], target_chunks[task.target]
            built[(task.query, task.target)] = graph.add(
                _rectangle_task, query_parts[first.partition],
                target_parts[second.partition], step="block", cells=tasks[0].cells,
                query_chunk=first, target_chunk=second, options=block_options, top_k=top_k)
        keys = sorted(built)
        groups = sorted({key[0] for key in keys})
        if top_k is not None:
            starts = np.concatenate(([0], np.cumsum([len(a) for a in target_lengths])))[:-1]
            outputs = [graph.add(_search_top_k_final, query_parts[query_chunks[u].partition],
                                 list(target_parts), *[built[key] for key in keys if key[0] == u],
                                 step="topk", query_chunk=query_chunks[u], target_starts=starts,
                                 top_k=top_k, traceback=traceback, options=task_options)
                       for u in groups]
        elif ordered:
            outputs = [graph.add(_search_merge, *[built[key] for key in keys if key[0] == u],
                                 step="merge")
                       for u in groups]
        else:
            outputs = [graph.add(_strip, built[key], step="strip") for key in keys]
        return graph.frame(outputs, meta)

    def plan(self, database: dd.Series | None = None, *,
             cells_per_task: float | None = None,
             pairs_per_task: float = DEFAULT_PAIRS_PER_TASK, top_k: int | None = None,
             broadcast: bool | None = None, backend: str = "auto") -> pd.DataFrame:
        """The task plan of ``pairwise()`` (no database) or ``search(database)``.

        See :func:`plan_blocks`; :func:`summarize_plan` gives the per-task cost spread. Give
        the job's ``backend`` where it is not ``"auto"`` (the default task size follows it).

        Examples
        --------
        >>> import pandas as pd, dask.dataframe as dd, gpualign_df
        >>> from gpualign_df.accessor.dask import summarize_plan
        >>> seqs = dd.from_pandas(pd.Series(["ACGT" * 50] * 30), npartitions=3)
        >>> summarize_plan(seqs.aln.plan(cells_per_task=4e6))["tasks"]
        6
        """
        return plan_blocks(self._series, database, cells_per_task=cells_per_task,
                           pairs_per_task=pairs_per_task, top_k=top_k, broadcast=broadcast,
                           backend=backend)
