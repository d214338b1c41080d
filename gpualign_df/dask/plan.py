"""The plan of a Dask ``pairwise`` or ``search`` job: chunks of rows and the tasks pairing them.

Pure numpy and pandas, run on the client: the plan depends only on the sequence lengths of
each partition, so this module imports no Dask (the lengths are computed elsewhere, see
:func:`gpualign_df.dask.graph.partition_lengths`).

A partition is cut into *chunks* of contiguous rows so that one task, a pair of chunks,
holds about ``cells_per_task`` DP cells (sum of ``len(query) * len(target)`` over its pairs)
and at most about ``pairs_per_task`` pairs: near-equal tasks are what lets Dask balance
the workers, since its query planner ignores per-task priorities. ``pairwise`` takes the
blocks (u, v) with u <= v of the chunk grid (all pairs i < j inside a diagonal block, the
full rectangle off the diagonal), so every unordered pair is aligned exactly once;
``search`` takes every query chunk against every database chunk, or against the whole
database when that is small enough to send to every task. Tasks are listed longest first.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["Chunk", "Task", "build_plan", "plan_frame", "summarize_plan", "check_sizing",
           "log_plan", "DEFAULT_CELLS_PER_TASK", "DEFAULT_GPU_CELLS_PER_TASK",
           "DEFAULT_PAIRS_PER_TASK", "BROADCAST_RESIDUES", "BROADCAST_MIN_QUERY_RESIDUES"]

#: Default DP cells per task on pandas-backed collections: tasks small enough for Dask to
#: balance them across the workers, large enough that the per-task overhead (scheduling,
#: encoding the inputs, building the result frame) stays a small share of one CPU core's work.
DEFAULT_CELLS_PER_TASK = 10**11
#: Default DP cells per task on cuDF-backed collections (or ``backend="cuda"``): a GPU fills
#: cells far faster than a core while a task's fixed cost (Dask, joining and encoding its
#: inputs, building its frame) stays about the same, so a GPU task needs more cells for that
#: cost to stay a small share.
DEFAULT_GPU_CELLS_PER_TASK = 10**12
#: Default bound on pairs (result rows) per task.
DEFAULT_PAIRS_PER_TASK = 4_000_000

#: A search database of at most this many residues goes whole to every task (one task per
#: query chunk, no reduction across database blocks); larger ones are cut into blocks.
BROADCAST_RESIDUES = 1 << 28
#: ... provided each task then still holds at least this many query residues (so that the
#: per-task preparation of the database, linear in its size, stays a small share).
BROADCAST_MIN_QUERY_RESIDUES = 4096

logger = logging.getLogger("gpualign_df.dask")


@dataclass(frozen=True)
class Chunk:
    """Contiguous rows ``[start, stop)`` of one partition; ``offset`` is the global position
    of row ``start`` (its position in the whole Series). ``partition_rows`` is the length of
    the whole partition when planned: a task checks it, since the lengths are remembered by
    Dask name and a partition that changed under the same name must not be cut by them."""

    partition: int
    start: int
    stop: int
    offset: int
    residues: int
    squares: int
    partition_rows: int

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
    """Every partition cut by :func:`_split_partition`, in global order."""
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


def check_sizing(cells_per_task: float, pairs_per_task: float) -> None:
    """Both task sizes must be numbers >= 1 (a ``ValueError`` naming the bad one)."""
    for name, value in (("cells_per_task", cells_per_task), ("pairs_per_task", pairs_per_task)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not value >= 1:
            raise ValueError(f"{name} must be a number >= 1, got {value!r}")


def build_plan(how: str, query_lengths: Sequence[np.ndarray],
               target_lengths: Sequence[np.ndarray] | None, cells_per_task: float,
               pairs_per_task: float, *, top_k: int | None = None,
               broadcast: bool | None = None) -> tuple[list[Chunk], list[Chunk], list[Task]]:
    """Chunks of both sides and the tasks, longest (most cells) first.

    ``query_lengths`` and ``target_lengths`` hold one array of sequence lengths per
    partition (nulls count 0). A ``search`` whose database is broadcast has one target
    chunk, the whole database (``partition`` -1), and one task per query chunk;
    ``pairs_per_task`` then bounds the result rows of a task (``top_k`` per query when
    given).

    Examples
    --------
    >>> import numpy as np
    >>> chunks, _, tasks = build_plan("pairwise", [np.full(6, 10), np.full(4, 10)], None,
    ...                               cells_per_task=10_000, pairs_per_task=100)
    >>> [(c.partition, c.start, c.stop) for c in chunks]
    [(0, 0, 6), (1, 0, 4)]
    >>> [(t.kind, t.pairs, t.cells) for t in tasks]
    [('rectangle', 24, 2400), ('triangle', 15, 1500), ('triangle', 6, 600)]
    """
    check_sizing(cells_per_task, pairs_per_task)
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
    """Whether a search sends the whole database to every task: as ``broadcast`` says, or
    by default when the database holds at most :data:`BROADCAST_RESIDUES` residues and a
    task of ``cells_per_task`` cells still holds :data:`BROADCAST_MIN_QUERY_RESIDUES` query
    residues (every task prepares the whole database, so it must be small beside them)."""
    if broadcast is not None:
        return bool(broadcast)
    residues = sum(int(np.sum(a)) for a in target_lengths)
    return residues <= BROADCAST_RESIDUES and \
        cells_per_task >= BROADCAST_MIN_QUERY_RESIDUES * max(residues, 1)


def plan_frame(query_chunks: list[Chunk], target_chunks: list[Chunk],
               tasks: list[Task]) -> pd.DataFrame:
    """The plan as a frame, one row per task in the order given: the columns that
    :func:`gpualign_df.dask.plan_blocks` documents."""
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
    """Cost spread of a plan from :func:`gpualign_df.dask.plan_blocks`.

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


def log_plan(how: str, query_chunks: list[Chunk], target_chunks: list[Chunk],
             tasks: list[Task]) -> None:
    """The plan's size and spread on the ``gpualign_df.dask`` logger, at INFO (built only
    where that level is enabled)."""
    if logger.isEnabledFor(logging.INFO):
        summary = summarize_plan(plan_frame(query_chunks, target_chunks, tasks))
        logger.info("gpualign %s: %d tasks, %d pairs, %.3g cells; cells per task min %.3g "
                    "median %.3g max %.3g (spread %.2f)", how, summary["tasks"],
                    summary["pairs"], summary["cells"], summary["min_cells"],
                    summary["median_cells"], summary["max_cells"], summary["spread"])
