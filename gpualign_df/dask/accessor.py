"""The ``.aln`` accessor on Dask Series, and :func:`plan_blocks`.

Importing this module registers ``.aln`` on every ``dask.dataframe.Series`` (Dask's own
``Series.align`` is left alone); :mod:`gpualign_df` imports it as soon as
``dask.dataframe`` is imported. Each method checks its inputs, warns where
``dd.from_pandas`` reordered them, plans the job (:mod:`gpualign_df.dask.plan`) and lays its
tasks (:mod:`gpualign_df.dask.tasks`) out in one graph (:mod:`gpualign_df.dask.graph`).
What the methods promise is described in :mod:`gpualign_df.dask`.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.base import tokenize
from dask.dataframe.extensions import register_series_accessor

# graph as a module, its names looked up when used: importing graph first imports
# dask.dataframe, whose import hook (gpualign_df/__init__.py) imports this module while graph
# is still half-executed, and this module must then register .aln all the same
from ..databases import Database
from . import graph as dask_graph
from .plan import (DEFAULT_CELLS_PER_TASK, DEFAULT_GPU_CELLS_PER_TASK, DEFAULT_PAIRS_PER_TASK,
                   build_plan, check_sizing, log_plan, plan_frame)
from .tasks import (broadcast_search_task, frame_library, pairwise_block_task, pairwise_merge,
                    rectangle_task, rowwise_task, search_merge, search_top_k_final,
                    strip_positions, task_options, triangle_task)

__all__ = ["DaskSeriesAlignAccessor", "plan_blocks", "default_cells"]


def _warn_if_sorted_by_dask(how: str, inputs: dict[str, dd.Series]) -> None:
    """A ``UserWarning`` where an input was reordered by ``dd.from_pandas`` (see
    :func:`gpualign_df.dask.graph.sorted_by_from_pandas`): the job's pairs and rows then
    follow the sorted labels, which surprises anyone comparing with the pandas Series they
    started from. The warning points at the caller outside this module."""
    sorted_inputs = [role for role, series in inputs.items()
                     if dask_graph.sorted_by_from_pandas(series)]
    if not sorted_inputs:
        return
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1
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


def default_cells(series: dd.Series, backend: str) -> float:
    """Default cells per task of a job on ``series``: larger on the GPU (``backend="cuda"``,
    or cuDF-backed with ``"auto"``), where a task's fixed cost weighs more."""
    on_gpu = backend == "cuda" or (backend == "auto" and
                                   frame_library(series._meta) is not pd)
    return DEFAULT_GPU_CELLS_PER_TASK if on_gpu else DEFAULT_CELLS_PER_TASK


def _sizing(series: dd.Series, options: dict) -> tuple[float, float]:
    """``cells_per_task`` and ``pairs_per_task`` taken out of a job's ``options``."""
    cells = options.pop("cells_per_task", None)
    if cells is None:
        cells = default_cells(series, options.get("backend", "auto"))
    pairs = options.pop("pairs_per_task", DEFAULT_PAIRS_PER_TASK)
    check_sizing(cells, pairs)
    return cells, pairs


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
        positions, stop exclusive), ``pairs``, ``cells``.
        :func:`~gpualign_df.dask.summarize_plan` gives the spread.

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
    >>> from gpualign_df.dask import summarize_plan
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
        cells_per_task = default_cells(queries, backend)
    check_sizing(cells_per_task, pairs_per_task)
    lengths = dask_graph.partition_lengths(queries) if database is None else \
        dask_graph.partition_lengths(queries, database)
    query_chunks, target_chunks, tasks = build_plan(how, lengths[0], lengths[-1] if database
                                                    is not None else None, cells_per_task,
                                                    pairs_per_task, top_k=top_k,
                                                    broadcast=broadcast)
    return plan_frame(query_chunks, target_chunks, tasks)


@register_series_accessor("aln")
class DaskSeriesAlignAccessor:
    """Alignment jobs on a Dask Series of sequences: ``series.aln.rowwise/pairwise/search``.

    Every method takes the keyword options of :func:`gpualign_df.align` (``mode``,
    ``matrix``, ``match``, ``mismatch``, ``gap_open``, ``gap_extend``, ``preset``, ``free_ends``,
    ``traceback``, ``cigar_style``, ``clip``, ``backend``, ``progress``,
    ``traceback_memory``: one pair's traceback memory on the worker that runs it) and
    returns a lazy ``dask.dataframe.DataFrame``; ``.compute()`` equals the in-memory result
    on the computed Series. ``pairwise`` and ``search`` also take ``cells_per_task``,
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
        meta = dask_graph.result_meta(queries, other, "rowwise", None, options)
        job_options = task_options(options)
        token = tokenize(queries._name, other._name, job_options)
        graph = dask_graph.JobGraph("gpualign-rowwise", token, queries, other)
        query_parts, target_parts = graph.parts
        keys = [graph.add(rowwise_task, query_part, target_part, step="align",
                          partition=k, options=job_options)
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
        meta = dask_graph.result_meta(series, None, "pairwise", None, options)
        job_options = task_options(options)
        (lengths,) = dask_graph.partition_lengths(series)
        query_chunks, _, tasks = build_plan("pairwise", lengths, None, cells, pairs)
        log_plan("pairwise", query_chunks, query_chunks, tasks)
        token = tokenize(series._name, job_options, cells, pairs, ordered, query_chunks)
        graph = dask_graph.JobGraph("gpualign-pairwise", token, series)
        (parts,) = graph.parts
        built: dict[tuple[int, int], tuple[str, int]] = {}
        for task in tasks:   # created longest first
            first, second = query_chunks[task.query], query_chunks[task.target]
            if task.kind == "triangle":
                block = graph.add(triangle_task, parts[first.partition], step="block",
                                  cells=tasks[0].cells, chunk=first, options=job_options)
            else:
                block = graph.add(pairwise_block_task, parts[first.partition],
                                  parts[second.partition], step="block", cells=tasks[0].cells,
                                  query_chunk=first, target_chunk=second, options=job_options)
            built[(task.query, task.target)] = block
        keys = sorted(built)
        if ordered:
            outputs = [graph.add(pairwise_merge, *[built[key] for key in keys if key[0] == u],
                                 step="merge")
                       for u in sorted({key[0] for key in keys})]
        else:
            outputs = [graph.add(strip_positions, built[key], step="strip") for key in keys]
        return graph.frame(outputs, meta)

    def search(self, database: dd.Series, top_k: int | None = None, *, ordered: bool = True,
               broadcast: bool | None = None, **options: Any) -> dd.DataFrame:
        """Align every sequence against every ``database`` sequence, best first per query.

        Parameters
        ----------
        database : dask.dataframe.Series or Database
            The targets, any partitioning; or a database prepared once
            (:func:`gpualign_df.databases.database`), which every task searches whole and
            each worker keeps (with its device copy) for every task and job it serves.
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
        if isinstance(database, Database):
            return self._search_prepared(database, top_k, broadcast, options)
        _check_dask_series(database, "search", "database")
        _warn_if_sorted_by_dask("search", {"queries": self._series, "database": database})
        queries = self._series
        options = dict(options)
        cells, pairs = _sizing(queries, options)
        meta = dask_graph.result_meta(queries, database, "search", top_k, options)
        traceback = options.pop("traceback", True)
        job_options = task_options(options)
        query_lengths, target_lengths = dask_graph.partition_lengths(queries, database)
        query_chunks, target_chunks, tasks = build_plan("search", query_lengths, target_lengths,
                                                        cells, pairs, top_k=top_k,
                                                        broadcast=broadcast)
        log_plan("search", query_chunks, target_chunks, tasks)
        token = tokenize(queries._name, database._name, job_options, traceback, top_k, cells,
                         pairs, ordered, broadcast, query_chunks, target_chunks)
        graph = dask_graph.JobGraph("gpualign-search", token, queries, database)
        query_parts, target_parts = graph.parts
        if target_chunks and target_chunks[0].partition == -1:   # the database broadcast
            built_chunks = {task.query: graph.add(
                broadcast_search_task, query_parts[query_chunks[task.query].partition],
                *target_parts, step="broadcast", cells=tasks[0].cells,
                query_chunk=query_chunks[task.query], top_k=top_k,
                options=dict(job_options, traceback=traceback)) for task in tasks}
            return graph.frame([built_chunks[u] for u in sorted(built_chunks)], meta)
        block_options = dict(job_options, traceback=traceback and top_k is None)
        built: dict[tuple[int, int], tuple[str, int]] = {}
        for task in tasks:   # created longest first
            first, second = query_chunks[task.query], target_chunks[task.target]
            built[(task.query, task.target)] = graph.add(
                rectangle_task, query_parts[first.partition],
                target_parts[second.partition], step="block", cells=tasks[0].cells,
                query_chunk=first, target_chunk=second, options=block_options, top_k=top_k)
        keys = sorted(built)
        groups = sorted({key[0] for key in keys})
        if top_k is not None:
            starts = np.concatenate(([0], np.cumsum([len(a) for a in target_lengths])))[:-1]
            outputs = [graph.add(search_top_k_final, query_parts[query_chunks[u].partition],
                                 list(target_parts), *[built[key] for key in keys if key[0] == u],
                                 step="topk", query_chunk=query_chunks[u], target_starts=starts,
                                 top_k=top_k, traceback=traceback, options=job_options)
                       for u in groups]
        elif ordered:
            outputs = [graph.add(search_merge, *[built[key] for key in keys if key[0] == u],
                                 step="merge")
                       for u in groups]
        else:
            outputs = [graph.add(strip_positions, built[key], step="strip") for key in keys]
        return graph.frame(outputs, meta)

    def _search_prepared(self, database: Database, top_k: int | None,
                         broadcast: bool | None, options: dict) -> dd.DataFrame:
        """:meth:`search` against a prepared database: one task per query chunk against the
        whole database, which the graph holds once (a worker receives it once and keeps
        it, and with it the device copy its first search makes)."""
        if broadcast is False:
            raise ValueError("a prepared database is searched whole by every task: "
                             "broadcast=False needs a Dask Series database")
        queries = self._series
        _warn_if_sorted_by_dask("search", {"queries": queries})
        options = dict(options)
        cells, pairs = _sizing(queries, options)
        meta = dask_graph.result_meta(queries, database, "search", top_k, options)
        traceback = options.pop("traceback", True)
        job_options = task_options(options)
        (query_lengths,) = dask_graph.partition_lengths(queries)
        query_chunks, target_chunks, tasks = build_plan(
            "search", query_lengths, [database.lengths], cells, pairs, top_k=top_k,
            broadcast=True)
        log_plan("search", query_chunks, target_chunks, tasks)
        token = tokenize(queries._name, database, job_options, traceback, top_k, cells, pairs,
                         query_chunks)
        graph = dask_graph.JobGraph("gpualign-search", token, queries)
        (query_parts,) = graph.parts
        database_key = graph.data(database, step="database")
        built = {task.query: graph.add(
            broadcast_search_task, query_parts[query_chunks[task.query].partition],
            database_key, step="broadcast", cells=tasks[0].cells,
            query_chunk=query_chunks[task.query], top_k=top_k,
            options=dict(job_options, traceback=traceback)) for task in tasks}
        return graph.frame([built[u] for u in sorted(built)], meta)

    def plan(self, database: dd.Series | None = None, *,
             cells_per_task: float | None = None,
             pairs_per_task: float = DEFAULT_PAIRS_PER_TASK, top_k: int | None = None,
             broadcast: bool | None = None, backend: str = "auto") -> pd.DataFrame:
        """The task plan of ``pairwise()`` (no database) or ``search(database)``.

        See :func:`plan_blocks`; :func:`~gpualign_df.dask.summarize_plan` gives the per-task
        cost spread. Give the job's ``backend`` where it is not ``"auto"`` (the default task
        size follows it).

        Examples
        --------
        >>> import pandas as pd, dask.dataframe as dd, gpualign_df
        >>> from gpualign_df.dask import summarize_plan
        >>> seqs = dd.from_pandas(pd.Series(["ACGT" * 50] * 30), npartitions=3)
        >>> summarize_plan(seqs.aln.plan(cells_per_task=4e6))["tasks"]
        6
        """
        return plan_blocks(self._series, database, cells_per_task=cells_per_task,
                           pairs_per_task=pairs_per_task, top_k=top_k, broadcast=broadcast,
                           backend=backend)
