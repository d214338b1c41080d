"""Work planning for the GPU: length sort, warps of 32 pairs, long pairs apart, batches
sized to the free device memory, and every buffer offset the kernels need.

Host-side numpy only (lengths and offsets, never residues).

* Short and medium pairs (at most ``INTER_MAX_CELLS`` cells) go to the inter-task kernel:
  sorted by (target, query) length, longest first, in warps of 32 slots; residues of a
  warp interleaved (``base + 32*i + lane``), traceback words of a warp interleaved too.
* Long pairs go to the intra-task kernel, one block per pair, residues contiguous
  (width 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels.inter import STRIP_ROWS, WARP

#: Pairs with more cells than this run on the intra-task (one block per pair) kernel.
INTER_MAX_CELLS = 1 << 22


@dataclass
class Batch:
    """One launch's worth of pairs; per-slot arrays are batch-relative offsets.

    ``slot_row[s]`` is the job row (pair index) of slot ``s``, -1 for an unused slot (then
    its lengths are -1). ``width`` is the lane stride of the layout (32 or 1). An inter
    batch describes its layout per warp (``warp_*``); its per-slot starts follow from them
    (``base[warp] + lane``) and are expanded on the device, so ``query_start``,
    ``target_start``, ``tb_start`` and ``columns`` are None there.
    """

    kind: str
    width: int
    slot_row: np.ndarray
    query_lengths: np.ndarray
    target_lengths: np.ndarray
    run_base: np.ndarray
    row_start: np.ndarray          # inter: per warp; long: per slot
    query_size: int
    target_size: int
    row_words: int
    tb_words: int
    run_words: int
    cells: int
    query_start: np.ndarray | None = None
    target_start: np.ndarray | None = None
    tb_start: np.ndarray | None = None
    columns: np.ndarray | None = None
    warp_query_base: np.ndarray | None = None
    warp_target_base: np.ndarray | None = None
    warp_tb_base: np.ndarray | None = None
    warp_columns: np.ndarray | None = None

    @property
    def slots(self) -> int:
        return len(self.slot_row)


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values), dtype=np.int64)
    if len(values) > 1:
        np.cumsum(values[:-1], out=out[1:])
    return out


def _split(need: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges [start, stop) whose summed ``need`` stays within ``budget``."""
    ranges = []
    start, total = 0, 0
    for index, size in enumerate(need.tolist()):
        if index > start and total + size > budget:
            ranges.append((start, index))
            start, total = index, 0
        total += size
    if start < len(need):
        ranges.append((start, len(need)))
    return ranges


def plan_batches(pairs: np.ndarray, query_lengths: np.ndarray, target_lengths: np.ndarray,
                 traceback: bool, budget_bytes: int, sort: bool = True) -> list[Batch]:
    """Batches for job rows ``pairs`` (lengths indexed by job row): inter-task batches
    first, then long-pair batches, each within ``budget_bytes`` of device memory."""
    cells = query_lengths[pairs].astype(np.int64) * target_lengths[pairs]
    long_pairs = pairs[cells > INTER_MAX_CELLS]
    short_pairs = pairs[cells <= INTER_MAX_CELLS]
    batches = _inter_batches(short_pairs, query_lengths, target_lengths, traceback,
                             budget_bytes, sort)
    batches += _long_batches(long_pairs, query_lengths, target_lengths, traceback, budget_bytes)
    return batches


def _inter_batches(pairs, query_lengths, target_lengths, traceback, budget, sort):
    if len(pairs) == 0:
        return []
    if sort:  # longest target first, then longest query: two stable passes (radix on int16)
        for all_lengths in (query_lengths, target_lengths):
            lengths = all_lengths[pairs]
            key = -lengths.astype(np.int16 if lengths.max(initial=0) < 2**15 else np.int64)
            pairs = pairs[np.argsort(key, kind="stable")]
    slot_count = (len(pairs) + WARP - 1) // WARP * WARP
    slot_row = np.full(slot_count, -1, dtype=np.int64)
    slot_row[:len(pairs)] = pairs
    slot_query = np.full(slot_count, -1, dtype=np.int32)
    slot_target = np.full(slot_count, -1, dtype=np.int32)
    slot_query[:len(pairs)] = query_lengths[pairs]
    slot_target[:len(pairs)] = target_lengths[pairs]
    rows = slot_query.reshape(-1, WARP).max(axis=1).astype(np.int64)
    columns = slot_target.reshape(-1, WARP).max(axis=1).astype(np.int64)
    strips = (rows + STRIP_ROWS - 1) // STRIP_ROWS
    tb_words = WARP * strips * columns if traceback else np.zeros_like(rows)
    run_words = WARP * (rows + columns) if traceback else np.zeros_like(rows)
    need = WARP * (rows + columns) + 8 * WARP * (columns + 1) + 4 * tb_words + 4 * run_words \
        + WARP * 96
    batches = []
    for first, stop in _split(need, budget):
        slots = slice(first * WARP, stop * WARP)
        warp_rows, warp_columns = rows[first:stop], columns[first:stop]
        query_base = _exclusive_cumsum(WARP * warp_rows)
        target_base = _exclusive_cumsum(WARP * warp_columns)
        row_base = _exclusive_cumsum(WARP * (warp_columns + 1))
        tb_base = _exclusive_cumsum(tb_words[first:stop])
        lengths_q, lengths_t = slot_query[slots], slot_target[slots]
        used_q, used_t = np.maximum(lengths_q, 0), np.maximum(lengths_t, 0)
        run_base = _exclusive_cumsum(used_q.astype(np.int64) + used_t) if traceback else \
            np.zeros(len(lengths_q), dtype=np.int64)
        batches.append(Batch(
            kind="inter", width=WARP, slot_row=slot_row[slots], query_lengths=lengths_q,
            target_lengths=lengths_t, run_base=run_base, row_start=row_base,
            query_size=int(WARP * warp_rows.sum()), target_size=int(WARP * warp_columns.sum()),
            row_words=int(WARP * (warp_columns + 1).sum()),
            tb_words=int(tb_words[first:stop].sum()),
            run_words=int(run_words[first:stop].sum()),
            cells=int(np.dot(used_q.astype(np.int64), used_t)),
            warp_query_base=query_base, warp_target_base=target_base, warp_tb_base=tb_base,
            warp_columns=warp_columns))
    return batches


def _long_batches(pairs, query_lengths, target_lengths, traceback, budget):
    if len(pairs) == 0:
        return []
    m = query_lengths[pairs].astype(np.int64)
    n = target_lengths[pairs].astype(np.int64)
    order = np.argsort(-(m * n), kind="stable")
    pairs, m, n = pairs[order], m[order], n[order]
    strips = (m + STRIP_ROWS - 1) // STRIP_ROWS
    tb_words = strips * n if traceback else np.zeros_like(m)
    run_words = (m + n) if traceback else np.zeros_like(m)
    need = m + n + 8 * (n + 1) + 4 * tb_words + 4 * run_words + 96
    if need.max() > budget:
        worst = int(np.argmax(need))
        raise MemoryError(f"pair of lengths {m[worst]} x {n[worst]} needs {need[worst] >> 20} MiB "
                          f"of GPU memory for its traceback, more than the {budget >> 20} MiB "
                          f"available; align it with traceback=False or on the CPU")
    batches = []
    for first, stop in _split(need, budget):
        part = slice(first, stop)
        batches.append(Batch(
            kind="long", width=1, slot_row=pairs[part], query_lengths=m[part].astype(np.int32),
            target_lengths=n[part].astype(np.int32), query_start=_exclusive_cumsum(m[part]),
            target_start=_exclusive_cumsum(n[part]), tb_start=_exclusive_cumsum(tb_words[part]),
            run_base=_exclusive_cumsum(run_words[part]), columns=n[part].astype(np.int32),
            row_start=_exclusive_cumsum(n[part] + 1), query_size=int(m[part].sum()),
            target_size=int(n[part].sum()), row_words=int((n[part] + 1).sum()),
            tb_words=int(tb_words[part].sum()), run_words=int(run_words[part].sum()),
            cells=int((m[part] * n[part]).sum())))
    return batches
