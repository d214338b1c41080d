"""Work planning for the GPU: length sort, warps of 32 pairs, interleaved layout, batches.

Host-side numpy/numba only; the kernels read the arrays these functions build.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .kernels.inter import STRIP_ROWS, WARP


@dataclass
class WarpPlan:
    """Pairs arranged in warps of 32 slots (``slots[w*32 + lane]`` = pair index or -1)."""

    slots: np.ndarray
    query_lengths: np.ndarray      # int32 per slot (0 for empty slots)
    target_lengths: np.ndarray
    warp_rows: np.ndarray          # int64 per warp: longest query
    warp_columns: np.ndarray       # int64 per warp: longest target
    query_base: np.ndarray         # int64 per warp, into the interleaved query buffer
    target_base: np.ndarray
    row_base: np.ndarray           # into the row-above H/I buffers
    tb_base: np.ndarray            # into the traceback words
    run_base: np.ndarray           # int64 per slot, into the CIGAR-run buffer
    sizes: dict

    @property
    def warps(self) -> int:
        return len(self.warp_rows)


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values), dtype=np.int64)
    np.cumsum(values[:-1], out=out[1:])
    return out


def plan_warps(pairs: np.ndarray, query_lengths: np.ndarray, target_lengths: np.ndarray,
               traceback: bool, sort: bool = True) -> WarpPlan:
    """Lay ``pairs`` out in warps; with ``sort``, by (target, query) length, longest first,
    so that the 32 pairs of a warp have similar lengths (less idle work, smaller buffers)."""
    if sort:
        pairs = pairs[np.lexsort((-query_lengths[pairs], -target_lengths[pairs]))]
    slot_count = (len(pairs) + WARP - 1) // WARP * WARP
    slots = np.full(slot_count, -1, dtype=np.int64)
    slots[:len(pairs)] = pairs
    slot_query = np.zeros(slot_count, dtype=np.int32)
    slot_target = np.zeros(slot_count, dtype=np.int32)
    slot_query[:len(pairs)] = query_lengths[pairs]
    slot_target[:len(pairs)] = target_lengths[pairs]
    warp_rows = slot_query.reshape(-1, WARP).max(axis=1).astype(np.int64)
    warp_columns = slot_target.reshape(-1, WARP).max(axis=1).astype(np.int64)
    strips = (warp_rows + STRIP_ROWS - 1) // STRIP_ROWS
    tb_words = WARP * strips * warp_columns if traceback else np.zeros_like(warp_rows)
    run_capacity = (slot_query.astype(np.int64) + slot_target) if traceback \
        else np.zeros(slot_count, dtype=np.int64)
    sizes = {"query": int(WARP * warp_rows.sum()), "target": int(WARP * warp_columns.sum()),
             "rows": int(WARP * (warp_columns + 1).sum()), "tb": int(tb_words.sum()),
             "runs": int(run_capacity.sum())}
    return WarpPlan(slots, slot_query, slot_target, warp_rows, warp_columns,
                    _exclusive_cumsum(WARP * warp_rows), _exclusive_cumsum(WARP * warp_columns),
                    _exclusive_cumsum(WARP * (warp_columns + 1)), _exclusive_cumsum(tb_words),
                    _exclusive_cumsum(run_capacity), sizes)


def bytes_per_warp(plan: WarpPlan) -> np.ndarray:
    """Device bytes each warp needs (residues, row buffers, traceback, runs, outputs)."""
    strips = (plan.warp_rows + STRIP_ROWS - 1) // STRIP_ROWS
    has_tb = plan.sizes["tb"] > 0
    tb = 4 * WARP * strips * plan.warp_columns if has_tb else 0
    runs = 4 * WARP * (plan.warp_rows + plan.warp_columns) if has_tb else 0
    return (WARP * (plan.warp_rows + plan.warp_columns) + 8 * WARP * (plan.warp_columns + 1)
            + tb + runs + WARP * 64)


def split_batches(plan: WarpPlan, budget_bytes: int) -> list[tuple[int, int]]:
    """Consecutive warp ranges [start, stop) whose device memory fits ``budget_bytes``."""
    need = bytes_per_warp(plan)
    batches = []
    start = 0
    total = 0
    for warp in range(plan.warps):
        if warp > start and total + need[warp] > budget_bytes:
            batches.append((start, warp))
            start, total = warp, 0
        total += int(need[warp])
    if start < plan.warps:
        batches.append((start, plan.warps))
    return batches


@njit(cache=True, parallel=True)
def interleave(codes, offsets, sequence_of_slot, slot_lengths, warp_base, first_slot,
               slot_count, out):
    """Write residues of slots [first_slot, first_slot + slot_count) at base + 32*i + lane,
    bases relative to the batch's first warp."""
    origin = warp_base[first_slot // 32]
    for k in prange(slot_count):
        slot = first_slot + k
        sequence = sequence_of_slot[slot]
        if sequence < 0:
            continue
        base = warp_base[slot // 32] - origin + slot % 32
        start = offsets[sequence]
        for i in range(slot_lengths[slot]):
            out[base + 32 * i] = codes[start + i]
