"""Dask's side of an alignment job: its graph, its lazy frame, and what is remembered by
Dask name.

The only module of the package that uses Dask's private internals (the task spec's
``Alias``, the expression classes ``FromGraph``, ``Expr`` and ``FromPandas``, the
concatenation ``dask.dataframe.core._concat``), so that a change of Dask's internals is
met here alone:

* :class:`JobGraph` writes a job's tasks (the functions of :mod:`gpualign_df.dask.tasks`)
  straight into one graph and returns its lazy frame, whose output tasks sit under the
  frame's own keys and whose ``compute()`` joins them in one task of this package's;
* :func:`partition_lengths` computes the sequence lengths that planning needs, remembered
  by Dask name, and :func:`result_meta` the job's empty result, remembered likewise;
* :func:`sorted_by_from_pandas` reads whether ``dd.from_pandas`` reordered an input.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
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

from .tasks import frame_library, lengths_of

__all__ = ["JobGraph", "size_word", "partition_keys", "frame_schema", "checked_output",
           "concatenate_outputs", "partition_lengths", "forget_planned_lengths",
           "LENGTHS_CACHE", "LENGTHS_CACHE_SIZE", "result_meta", "build_result_meta",
           "sorted_by_from_pandas"]


class JobGraph:
    """The tasks of one job, written straight into one graph (no per-task Delayed call,
    whose cost would grow with the tens of thousands of block tasks of a large job).

    ``parts[i]`` are the partition keys of the i-th input Series (:func:`partition_keys`:
    aliases of a persisted collection followed, so the job's tasks take the persisted data
    itself and no alias task runs before them).

    Task arguments are those keys (or lists of them) and earlier tasks; everything else is
    bound into the callable with ``functools.partial``. Each kind of task (``step``) gets its
    own key prefix (``gpualign-search-broadcast-<token>``, ...): the scheduler estimates a
    task's duration from its prefix and places tasks by those estimates, so a prefix shared
    by alignment tasks and near-instant ones would mislead it. Alignment tasks also name
    their job's size, the decade of its largest task's cells
    (``gpualign-search-broadcast-sizeExii-<token>`` for 10**12 to 10**13, see
    :func:`size_word`), so that durations learnt from a small job do not mislead the
    placement of a large job's first tasks.
    """

    def __init__(self, prefix: str, token: str, *inputs: dd.Series) -> None:
        self.prefix, self.token = prefix, token
        self.layer: dict[Any, Any] = {}
        self.parts: list[list[Any]] = []
        for series in inputs:
            graph, keys = partition_keys(series)
            self.layer.update(graph)
            self.parts.append(keys)

    def add(self, func: Callable, *keys: Any, step: str, cells: float | None = None,
            **static: Any) -> tuple[str, int]:
        """Add the task ``func(*keys, **static)`` of kind ``step`` (sized by ``cells``, the
        job's largest task, for alignment tasks); returns its key."""
        if cells is not None:
            step = f"{step}-{size_word(cells)}"
        key = (f"{self.prefix}-{step}-{self.token}", len(self.layer))
        self.layer[key] = (partial(func, **static) if static else func, *keys)
        return key

    def data(self, value: Any, *, step: str) -> tuple[str, int]:
        """Add ``value`` as data (not a task) under a key of kind ``step``; tasks that take
        the key share one copy per worker."""
        key = (f"{self.prefix}-{step}-{self.token}", len(self.layer))
        self.layer[key] = value
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
        schema = frame_schema(meta)
        for index, key in enumerate(outputs):
            func, *arguments = self.layer[key]
            layer[(name, index)] = (partial(checked_output, func=func, schema=schema,
                                            partition=index), *arguments)
        return new_collection(_TaskFrame(layer, meta, (None,) * (len(outputs) + 1),
                                         list(range(len(outputs))), name))


_ROMAN = ("n", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii",
          "xiii", "xiv", "xv", "xvi", "xvii", "xviii", "xix", "xx")


def size_word(cells: float) -> str:
    """The decade of a task's cells as a key word Dask keeps in the task prefix (letters
    only): ``sizeExii`` for 10**12 <= cells < 10**13, ``sizeEn`` below 10; a word that is not
    taken for a hex token (no 8 letters starting with a-f)."""
    decade = int(math.log10(cells)) if cells >= 1 else 0
    return "sizeE" + _ROMAN[min(decade, len(_ROMAN) - 1)]


def partition_keys(series: dd.Series) -> tuple[dict, list[Any]]:
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


def frame_schema(frame: Any) -> tuple[tuple[str, str], ...]:
    """A frame's (column, dtype name) pairs."""
    return tuple((str(column), str(dtype)) for column, dtype in frame.dtypes.items())


def checked_output(*arguments: Any, func: Callable, schema: tuple, partition: int) -> Any:
    """An output task: ``func``'s frame, whose columns and dtypes must be the job's meta's
    (``schema``, from :func:`frame_schema`), as ``dd.from_delayed``'s check would demand."""
    frame = func(*arguments)
    if frame_schema(frame) != schema:
        raise ValueError(f"gpualign_df: output partition {partition} has columns/dtypes "
                         f"{frame_schema(frame)}, but the job's meta has {schema}")
    return _sized_by_dask(frame)


def _sized_by_dask(frame: Any) -> Any:
    """``frame``, with Dask's dispatch for cuDF registered in this process where it is a
    cuDF frame: Dask sizes cuDF objects (``dask.sizeof``, which the scheduler's task
    placement and a worker's memory accounting use) only once ``dask_cudf`` is imported,
    which Dask's own concatenation of the outputs (replaced here) would have done."""
    if frame_library(frame) is not pd:
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
        (:func:`concatenate_outputs`) where Dask would run its own concatenation."""
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
        return {(self._name, 0): (concatenate_outputs, self.frame.__dask_keys__())}


def concatenate_outputs(parts: list[Any]) -> Any:
    """A job's output partitions as one frame, the frame Dask's own concatenation gives
    (``dask.dataframe.core._concat``: empty partitions left out, each partition's index
    kept). cuDF partitions with default indexes (every alignment output) are joined as
    pylibcudf tables in one libcudf call, where ``cudf.concat`` makes a call per column and
    a pass of type checks per partition."""
    kept = [part for part in parts if len(part)]
    if len(kept) < 2 or frame_library(kept[0]) is pd or not _default_indexes(kept):
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
    job's meta already (:func:`checked_output`)."""
    return all(type(part.index).__name__ == "RangeIndex" and part.index.start == 0
               and part.index.step == 1 and part.index.name is None for part in parts)


#: Per-partition lengths of recently planned collections, by Dask name (a Dask name
#: identifies the data: a persisted Series planned again costs no computation).
LENGTHS_CACHE: OrderedDict[str, list[np.ndarray]] = OrderedDict()
#: Collections whose lengths :data:`LENGTHS_CACHE` keeps (the least recently planned go).
LENGTHS_CACHE_SIZE = 32


def forget_planned_lengths() -> None:
    """Forget the partition lengths that planning remembers by Dask name.

    Needed only when a collection's data changes while its Dask name does not (a file
    rewritten in place and read again with the same arguments): a job planned on the old
    lengths stops with an error naming the partition instead of aligning the wrong rows.

    Examples
    --------
    >>> from gpualign_df.dask import forget_planned_lengths
    >>> forget_planned_lengths()
    """
    LENGTHS_CACHE.clear()


def partition_lengths(*series: dd.Series) -> list[list[np.ndarray]]:
    """The per-partition length arrays of each Series: remembered by Dask name, the rest
    computed eagerly in one computation."""
    missing = list(dict.fromkeys(s._name for s in series if s._name not in LENGTHS_CACHE))
    if missing:
        by_name = {s._name: s for s in series}
        jobs = [[dask.delayed(lengths_of, pure=True)(part) for part in
                 by_name[name].to_delayed()] for name in missing]
        for name, arrays in zip(missing, dask.compute(*jobs)):
            LENGTHS_CACHE[name] = list(arrays)
    found = [LENGTHS_CACHE[s._name] for s in series]
    for name in dict.fromkeys(s._name for s in series):
        LENGTHS_CACHE.move_to_end(name)
    while len(LENGTHS_CACHE) > LENGTHS_CACHE_SIZE:
        LENGTHS_CACHE.popitem(last=False)
    return [list(arrays) for arrays in found]


#: Result metas of recently built jobs, by the inputs' Dask names and the options: building
#: one runs ``align`` on the inputs' empty meta, which on cuDF costs device work at every
#: job built.
_META_CACHE: OrderedDict[str, Any] = OrderedDict()
_META_CACHE_SIZE = 32


def result_meta(queries: dd.Series, targets: dd.Series | None, how: str,
                top_k: int | None, options: dict) -> Any:
    """The empty result (columns, dtypes) from ``align`` on the inputs' empty meta; also
    validates every option before any graph is built (remembered by the inputs' Dask names
    and the options, which a remembered meta has passed)."""
    key = tokenize(queries._name, None if targets is None else getattr(targets, "_name",
                                                                          targets), how, top_k,
                   options)
    if key not in _META_CACHE:
        _META_CACHE[key] = build_result_meta(queries, targets, how, top_k, options)
        while len(_META_CACHE) > _META_CACHE_SIZE:
            _META_CACHE.popitem(last=False)
    _META_CACHE.move_to_end(key)
    return _META_CACHE[key]


def build_result_meta(queries: dd.Series, targets: dd.Series | None, how: str,
                      top_k: int | None, options: dict) -> Any:
    """:func:`result_meta` without remembering: options checked, ``align`` run on the empty
    metas."""
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
    # a prepared database is its own meta
    targets_meta = targets._meta if isinstance(targets, dd.Series) else targets
    return align(queries._meta, targets_meta, how=how, **extra, **meta_options)


def sorted_by_from_pandas(series: dd.Series) -> bool:
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
