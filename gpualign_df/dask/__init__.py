"""Alignment jobs on Dask Series: the ``.aln`` accessor, split into cost-balanced Dask tasks.

Importing :mod:`gpualign_df` registers ``.aln`` on every ``dask.dataframe.Series``
(pandas-backed or cuDF-backed), as soon as ``dask.dataframe`` is imported (before or after
:mod:`gpualign_df`). Dask's own ``Series.align`` is left alone. Each method returns a lazy
``dask.dataframe.DataFrame`` whose ``meta`` has the columns and dtypes of the in-memory
result, and whose ``.compute()`` equals, row for row, what the in-memory accessor returns on
the computed Series (``series.compute().aln.<method>(...)``), for any partitioning and any
number of workers.

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
  the database without a pair list.

Each task calls :func:`gpualign_df.align` on the partition objects it receives (pandas, or
cuDF on dask-cuDF), with every option, ``backend`` included, passed through; the per-task
progress bar is off by default (use Dask's own progress reporting). Dask's query planner
ignores per-task priorities, so "longest first" is a property of the plan (tasks are
created in that order and are near-equal in cells), not an enforced schedule.

Modules, imports running downward: :mod:`.accessor` (the accessor, :func:`plan_blocks`,
input checks) uses :mod:`.graph` (the only module on Dask's internals: the job's graph and
frame, lengths and metas remembered by Dask name) and :mod:`.tasks` (the functions run in
the tasks), which use :mod:`.plan` (pure numpy: chunks, tasks, sizes; no Dask). The public
names below are provided on first use, so that importing this package (or its
:mod:`.plan`) imports no Dask.
"""

from __future__ import annotations

from ..libraries import lazy_attributes as _lazy_attributes

__all__ = ["DaskSeriesAlignAccessor", "plan_blocks", "summarize_plan",
           "forget_planned_lengths", "DEFAULT_CELLS_PER_TASK", "DEFAULT_GPU_CELLS_PER_TASK",
           "DEFAULT_PAIRS_PER_TASK", "BROADCAST_RESIDUES", "BROADCAST_MIN_QUERY_RESIDUES"]

#: Public names provided on first use, by the module that defines them.
_LAZY = {"DaskSeriesAlignAccessor": "accessor", "plan_blocks": "accessor",
         "summarize_plan": "plan", "forget_planned_lengths": "graph",
         "DEFAULT_CELLS_PER_TASK": "plan", "DEFAULT_GPU_CELLS_PER_TASK": "plan",
         "DEFAULT_PAIRS_PER_TASK": "plan", "BROADCAST_RESIDUES": "plan",
         "BROADCAST_MIN_QUERY_RESIDUES": "plan"}


# PEP 562: a public name's module is imported when the name is first asked for
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
