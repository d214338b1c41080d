"""Tuning settings: one frozen dataclass, read through :func:`settings`, changed for a block
of code with :func:`override` (tests and benchmarks too), never through module globals.

Examples
--------
>>> from gpualign_df import config
>>> config.settings().host_memory_share
0.5
>>> with config.override(host_memory_share=0.25):
...     config.settings().host_memory_share
0.25
>>> config.settings().host_memory_share
0.5
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class Settings:
    """Tuning knobs that change speed or memory, never results.

    Attributes
    ----------
    host_memory_share : float
        Share of the host memory available when a CPU job starts that the job may use for
        its traceback matrices, batch buffers and result columns; a job that cannot fit is
        refused before any work.
    stream_batch_pairs : int
        Pairs per batch when a job is streamed (:func:`gpualign_df.api.align_batches`, the
        command line writing to a file).
    stream_batch_cells : float
        DP cells per streamed batch (a batch holds at least one query's pairs).
    progress_interval : float
        Seconds between progress updates and Ctrl-C checks while an engine runs.
    progress_delay : float
        A progress bar appears once a job has run this many seconds (unless forced).
    gpu_launch_cells : float
        DP cells at most per launch of a GPU search's score pass (one query aside), so the
        host reports progress and answers Ctrl-C between launches of a long search.
    search_block_pairs : int
        A search with ``top_k`` off the GPU scores whole queries against the database in
        blocks of at most this many pairs, so its memory is bounded by the kept pairs.
    cpu_batch_ops, cpu_batch_pairs : int
        One CPU batch buffers at most this many traceback operations (1 byte each) and
        pairs.
    lane_max_length : int
        Pairs with both sequences at most this long run on the CPU's SIMD lanes (the lane
        kernel takes up to 4,095 columns); longer ones one pair per thread.
    lane_narrow_score_limit : int
        A lane group whose cell bound is below this runs in int16, else in int32 (0 forces
        int32).
    encode_bytes_per_thread, encode_max_threads : int
        The encoding of host strings uses one thread per ``encode_bytes_per_thread`` bytes,
        at most ``encode_max_threads``: the lookup is bound by memory, so a few threads reach
        its speed and more only take cores from the node's other processes.
    write_chunk_rows : int
        The text writers (:mod:`gpualign_df.io`) assemble and write the lines of a result
        frame in blocks of at most this many rows (at least 1), so that the strings of one
        block are in memory at a time; the bytes written do not depend on it.
    """

    host_memory_share: float = 0.5
    stream_batch_pairs: int = 1 << 20
    stream_batch_cells: float = 2e10
    progress_interval: float = 0.25
    progress_delay: float = 2.0
    gpu_launch_cells: float = 2.0 ** 41
    search_block_pairs: int = 4_000_000
    cpu_batch_ops: int = 1 << 26
    cpu_batch_pairs: int = 1 << 20
    lane_max_length: int = 2048
    lane_narrow_score_limit: int = 1 << 13
    encode_bytes_per_thread: int = 1 << 20
    encode_max_threads: int = 8
    write_chunk_rows: int = 1 << 17


_DEFAULT = Settings()
_local = threading.local()


def settings() -> Settings:
    """The settings in force in this thread: the innermost :func:`override` of this thread,
    else the defaults. Read them once per job, in the calling thread."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else _DEFAULT


@contextlib.contextmanager
def override(**changes: object) -> Iterator[Settings]:
    """Use changed settings inside a ``with`` block (this thread only).

    Raises
    ------
    TypeError
        For a name that is not a setting.
    """
    names = {field.name for field in dataclasses.fields(Settings)}
    unknown = set(changes) - names
    if unknown:
        raise TypeError(f"unknown setting(s) {sorted(unknown)}; settings: {sorted(names)}")
    new = dataclasses.replace(settings(), **changes)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(new)
    try:
        yield new
    finally:
        stack.pop()
