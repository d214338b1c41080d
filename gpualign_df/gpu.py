"""GPU engine, host side: plans warps and batches, moves buffers, launches the kernels.

Pairs the inter-task kernel does not take (empty sequences, more than ``GPU_MAX_CELLS``
cells, alphabets over 32 symbols) run on the CPU engine in the same call; both engines give
identical results, so the merged columns do not depend on where a pair ran.
"""

from __future__ import annotations

import os

import numba
import numpy as np
from numba import cuda

from .encode import EncodedSequences
from .arrays import AlignmentArrays, merge_parts
from .kernels import inter, traceback as tb_kernels
from .plan import WarpPlan, interleave, plan_warps, split_batches
from .scoring import Mode, Scoring

#: Larger pairs run on the CPU engine (the long-pair GPU kernel is not in this version).
GPU_MAX_CELLS = 1 << 28
THREADS_PER_BLOCK = 128
#: Share of the free device memory one batch may use.
MEMORY_SHARE = 0.6
#: Benchmark switches: sort pairs by length before forming warps; time each kernel.
SORT_BY_LENGTH = True
TIME_KERNELS = False
#: Seconds spent in each kernel while TIME_KERNELS is on (reset it yourself).
KERNEL_SECONDS: dict[str, float] = {}


def _launch(name: str, kernel, blocks: int, *arguments) -> None:
    """Launch a kernel; with TIME_KERNELS, time it with CUDA events."""
    if not TIME_KERNELS or simulator():
        kernel[blocks, THREADS_PER_BLOCK](*arguments)
        return
    start, stop = cuda.event(), cuda.event()
    start.record()
    kernel[blocks, THREADS_PER_BLOCK](*arguments)
    stop.record()
    stop.synchronize()
    KERNEL_SECONDS[name] = KERNEL_SECONDS.get(name, 0.0) + cuda.event_elapsed_time(start, stop) / 1e3


def simulator() -> bool:
    """True when numba runs CUDA kernels in its CPU simulator."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def gpu_usable() -> bool:
    """A real CUDA device is present and usable (never true under the simulator)."""
    if simulator():
        return False
    try:
        return bool(cuda.is_available()) and len(cuda.gpus) > 0
    except Exception:  # noqa: BLE001 - a broken driver means no GPU for us
        return False


def _free_bytes() -> int:
    if simulator():
        return 1 << 28
    free, _total = cuda.current_context().get_memory_info()
    return int(free)


def _blocks(count: int) -> int:
    return max(1, (count + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)


def run_pairs_gpu(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                  pair_target: np.ndarray, scoring: Scoring, mode: Mode, *, traceback: bool,
                  cigar_style: str, clip: str | None, cpu_runner, progress) -> AlignmentArrays:
    """Align pairs on the GPU (and the few it does not take on the CPU engine)."""
    query_lengths = queries.lengths[pair_query]
    target_lengths = targets.lengths[pair_target]
    valid = queries.valid[pair_query] & targets.valid[pair_target]
    eligible = (valid & (query_lengths > 0) & (target_lengths > 0)
                & (query_lengths * target_lengths <= GPU_MAX_CELLS))
    if len(scoring.alphabet) > inter.MAX_ALPHABET:
        eligible[:] = False
    parts = []
    on_gpu = np.flatnonzero(eligible)
    if len(on_gpu):
        parts.append((on_gpu, _run_on_gpu(queries, targets, pair_query[on_gpu],
                                          pair_target[on_gpu], scoring, mode, traceback,
                                          cigar_style, clip, progress)))
    on_cpu = np.flatnonzero(~eligible)
    if len(on_cpu):
        parts.append((on_cpu, cpu_runner(pair_query[on_cpu], pair_target[on_cpu])))
    return merge_parts(len(pair_query), parts, traceback)


def _run_on_gpu(queries, targets, pair_query, pair_target, scoring, mode, traceback,
                cigar_style, clip, progress) -> AlignmentArrays:
    query_lengths = queries.lengths[pair_query]
    target_lengths = targets.lengths[pair_target]
    plan = plan_warps(np.arange(len(pair_query)), query_lengths, target_lengths, traceback,
                      sort=SORT_BY_LENGTH)
    sub = cuda.to_device(np.ascontiguousarray(scoring.matrix.ravel(), dtype=np.int32))
    concrete = cuda.to_device(scoring.concrete)
    fill = inter.fill_kernel(mode.code, *mode.flags(), traceback)
    merge_matches = cigar_style == "M"
    soft_clip = clip == "soft"
    walk = tb_kernels.walk_kernel(mode.code, mode.free_query_start, mode.free_target_start,
                                  merge_matches, soft_clip) if traceback else None
    write = tb_kernels.cigar_kernel(merge_matches, soft_clip) if traceback else None
    slot_query_sequence = np.where(plan.slots >= 0, pair_query[np.maximum(plan.slots, 0)], -1)
    slot_target_sequence = np.where(plan.slots >= 0, pair_target[np.maximum(plan.slots, 0)], -1)
    parts = []
    for first_warp, stop_warp in split_batches(plan, int(_free_bytes() * MEMORY_SHARE)):
        batch = _run_batch(plan, first_warp, stop_warp, queries, targets, slot_query_sequence,
                           slot_target_sequence, sub, concrete, len(scoring.alphabet),
                           scoring.gap_open, scoring.gap_extend, fill, walk, write, traceback)
        slots = plan.slots[first_warp * inter.WARP:stop_warp * inter.WARP]
        used = slots >= 0
        parts.append((slots[used], batch.subset(np.flatnonzero(used))))
        if progress is not None:
            progress(int((query_lengths[slots[used]] * target_lengths[slots[used]]).sum()))
    return merge_parts(len(pair_query), parts, traceback)


def _relative(values: np.ndarray, first: int, stop: int) -> np.ndarray:
    part = values[first:stop]
    return np.ascontiguousarray(part - part[0])


def _run_batch(plan: WarpPlan, first_warp, stop_warp, queries, targets, slot_query_sequence,
               slot_target_sequence, sub, concrete, alphabet_size, go, ge, fill, walk, write,
               traceback) -> AlignmentArrays:
    """One batch of warps: fill, walk and CIGAR kernels; results per slot, on the host."""
    warp = inter.WARP
    first_slot, stop_slot = first_warp * warp, stop_warp * warp
    slot_count = stop_slot - first_slot
    query_base = _relative(plan.query_base, first_warp, stop_warp)
    target_base = _relative(plan.target_base, first_warp, stop_warp)
    rows = plan.warp_rows[first_warp:stop_warp]
    columns = plan.warp_columns[first_warp:stop_warp]
    query_host = np.zeros(int(warp * rows.sum()), dtype=np.uint8)
    target_host = np.zeros(int(warp * columns.sum()), dtype=np.uint8)
    interleave(queries.codes, queries.offsets, slot_query_sequence, plan.query_lengths,
               plan.query_base, first_slot, slot_count, query_host)
    interleave(targets.codes, targets.offsets, slot_target_sequence, plan.target_lengths,
               plan.target_base, first_slot, slot_count, target_host)
    query_lengths = cuda.to_device(plan.query_lengths[first_slot:stop_slot])
    target_lengths = cuda.to_device(plan.target_lengths[first_slot:stop_slot])
    query = cuda.to_device(query_host)
    target = cuda.to_device(target_host)
    query_base_d = cuda.to_device(query_base)
    target_base_d = cuda.to_device(target_base)
    row_base = cuda.to_device(_relative(plan.row_base, first_warp, stop_warp))
    columns_d = cuda.to_device(np.ascontiguousarray(columns))
    row_words = int(warp * (columns + 1).sum())
    h_buffer = cuda.device_array(row_words, dtype=np.int32)
    i_buffer = cuda.device_array(row_words, dtype=np.int32)
    tb_base = _relative(plan.tb_base, first_warp, stop_warp)
    if traceback:
        strips = (rows + inter.STRIP_ROWS - 1) // inter.STRIP_ROWS
        tb = cuda.device_array(int((warp * strips * columns).sum()), dtype=np.uint32)
    else:
        tb = cuda.device_array(1, dtype=np.uint32)
    tb_base_d = cuda.to_device(tb_base)
    score = cuda.device_array(slot_count, dtype=np.int32)
    end_i = cuda.device_array(slot_count, dtype=np.int32)
    end_j = cuda.device_array(slot_count, dtype=np.int32)
    blocks = _blocks(slot_count)
    _launch("fill", fill, blocks, query, target, query_lengths, target_lengths, query_base_d,
                                    target_base_d, row_base, tb_base_d, columns_d, sub,
                                    alphabet_size, go, ge, h_buffer, i_buffer, tb, score, end_i,
                                    end_j)
    out = AlignmentArrays(valid=np.ones(slot_count, dtype=bool), score=score.copy_to_host(),
                          query_end=end_i.copy_to_host(), target_end=end_j.copy_to_host())
    if not traceback:
        return out
    run_base_host = _relative(plan.run_base, first_slot, stop_slot)
    run_capacity = int((plan.query_lengths[first_slot:stop_slot].astype(np.int64)
                        + plan.target_lengths[first_slot:stop_slot]).sum())
    runs = cuda.device_array(max(run_capacity, 1), dtype=np.uint32)
    run_base = cuda.to_device(run_base_host)
    columns_out = {name: cuda.device_array(slot_count, dtype=np.int32) for name in
                   ("run_count", "start_i", "start_j", "matches", "mismatches", "gap_opens",
                    "gaps", "cigar_length")}
    _launch("walk", walk, blocks, query, target, query_lengths, target_lengths, query_base_d,
                                    target_base_d, tb_base_d, columns_d, tb, concrete, end_i, end_j,
                                    run_base, runs, columns_out["run_count"],
                                    columns_out["start_i"], columns_out["start_j"],
                                    columns_out["matches"], columns_out["mismatches"],
                                    columns_out["gap_opens"], columns_out["gaps"],
                                    columns_out["cigar_length"])
    del tb, h_buffer, i_buffer
    cigar_length = columns_out["cigar_length"].copy_to_host()
    offsets = np.zeros(slot_count + 1, dtype=np.int64)
    np.cumsum(cigar_length, out=offsets[1:])
    chars = cuda.device_array(max(int(offsets[-1]), 1), dtype=np.uint8)
    identity_order = cuda.to_device(np.arange(slot_count, dtype=np.int64))
    _launch("cigar", write, blocks, runs, run_base, columns_out["run_count"],
                                     columns_out["start_i"], end_i, query_lengths,
                                     identity_order, cuda.to_device(offsets), chars)
    out.query_start = columns_out["start_i"].copy_to_host()
    out.target_start = columns_out["start_j"].copy_to_host()
    out.cigar_chars = chars.copy_to_host()[:int(offsets[-1])]
    out.cigar_offsets = offsets
    stats = {name: columns_out[name].copy_to_host() for name in
             ("matches", "mismatches", "gap_opens", "gaps")}
    stats["length"] = stats["matches"] + stats["mismatches"] + stats["gaps"]
    out.stats = stats
    return out


def warm_up() -> None:
    """Compile nothing, touch the device so that later timings exclude context creation."""
    if gpu_usable():
        cuda.current_context()
        numba.cuda.synchronize()
