"""CUDA kernels that gather residues from sequences stored back to back (codes + int64
offsets, :class:`gpualign_df.gpu.buffers.DeviceSequences`) into the layouts the fill and
search kernels read: interleaved by lane (``base + WARP * i``) for warps of pairs, or
contiguous (width 1) for long pairs. One thread per slot; a slot without a sequence
(-1) gathers nothing, so padding keeps whatever the buffer held and no kernel reads it.
"""

from __future__ import annotations

from numba import cuda

from . import simulator
from .planning import COLUMNS_ROW, SLOT_QUERY, SLOT_TARGET, write_slot_starts
from .strip import WARP


@cuda.jit(device=True)
def _copy_residues(codes, offsets, sequence, length, base, width, out):
    """Residues of ``sequence`` to ``out[base + width * i]``, i < ``length``."""
    start = offsets[sequence]
    for i in range(length):
        out[base + width * i] = codes[start + i]


@cuda.jit
def gather_residues(codes, offsets, sequence_of_slot, slot_lengths, slot_start, width, out):
    """Residues of each slot's sequence (-1: none) to ``out[slot_start + width * i]``."""
    slot = cuda.grid(1)
    if slot < sequence_of_slot.shape[0] and sequence_of_slot[slot] >= 0:
        _copy_residues(codes, offsets, sequence_of_slot[slot], slot_lengths[slot],
                       slot_start[slot], width, out)


#: Blocks that share the copy of one long pair's sequence (one under the simulator, whose
#: blocks run one after another).
LONG_GATHER_BLOCKS = 1 if simulator() else 64


@cuda.jit
def gather_long_residues(codes, offsets, slot_row, sequence_of_row, slot_lengths, slot_start,
                         out):
    """Residues of the sequence ``sequence_of_row[slot_row[slot]]`` of each used slot
    (``slot_row`` >= 0) to ``out[slot_start + i]`` (long pairs, width 1):
    ``LONG_GATHER_BLOCKS`` blocks a slot, their threads striding over its residues (one
    thread per sequence of hundreds of kilobases would copy for milliseconds)."""
    slot = cuda.blockIdx.x // LONG_GATHER_BLOCKS
    if slot >= slot_row.shape[0] or slot_row[slot] < 0:
        return
    start = offsets[sequence_of_row[slot_row[slot]]]
    base = slot_start[slot]
    stride = LONG_GATHER_BLOCKS * cuda.blockDim.x
    first = (cuda.blockIdx.x % LONG_GATHER_BLOCKS) * cuda.blockDim.x + cuda.threadIdx.x
    for i in range(first, slot_lengths[slot], stride):
        out[base + i] = codes[start + i]


@cuda.jit
def prepare_inter_slots(warp_table, slot_starts, slot_row, query_codes, query_offsets,
                        pair_query, query_lengths, query_out, target_codes, target_offsets,
                        pair_target, target_lengths, target_out):
    """One pass over the slots of an inter batch: each slot's starts from its warp's row of
    the layout table (``warp_table``, :data:`~gpualign_df.kernels.planning.TABLE_ROWS`
    rows; :func:`~gpualign_df.kernels.planning.write_slot_starts`, traceback words
    interleaved by lane as the inter fill lays them out), then the residues of its pair's
    query and target into the interleaved buffers (``base + WARP * i``)."""
    slot = cuda.grid(1)
    if slot >= slot_starts.shape[1]:
        return
    warp = slot // WARP
    lane = slot % WARP
    write_slot_starts(slot_starts, slot, warp_table, warp, lane, lane,
                      warp_table[COLUMNS_ROW, warp])
    row = slot_row[slot]
    if row >= 0:
        _copy_residues(query_codes, query_offsets, pair_query[row], query_lengths[slot],
                       slot_starts[SLOT_QUERY, slot], WARP, query_out)
        _copy_residues(target_codes, target_offsets, pair_target[row], target_lengths[slot],
                       slot_starts[SLOT_TARGET, slot], WARP, target_out)
