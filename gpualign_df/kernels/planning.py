"""CUDA kernel of the inter-task plan: one thread per warp group lays out its slots and
sums its warps' sizes, in place of some fifty small array operations.

No frame or batch logic here: :func:`gpualign_df.plan._inter_batches` launches it with the
length sort's permutation and takes cumulative sums of what it writes.
"""

from __future__ import annotations

from numba import cuda

from .inter import STRIP_ROWS, WARP

#: Rows of the per-warp quantity table: bytes needed, query words, target words, row-above
#: words, traceback words, run words, cells.
QUANTITIES = 7


@cuda.jit
def warp_plan(order, pairs, has_pairs, query_lengths, target_lengths, traceback, group_warps,
              slot_row, slot_query, slot_target, slot_runs, warp_columns, quantities):
    """Thread ``g`` takes warps ``group_warps * g ...``: the slots of their pairs (slot
    ``s`` holds pair ``order[s]``: job row ``pairs[order[s]]``, or ``order[s]`` itself
    without ``has_pairs``; its lengths, -1 past the last pair; run words per slot), and per
    warp the quantities of :data:`QUANTITIES`, with rows and columns the largest of the
    whole group (a packed warp pair shares them)."""
    group = cuda.grid(1)
    first_warp = group * group_warps
    if first_warp >= warp_columns.shape[0]:
        return
    count = order.shape[0]
    rows = 0
    columns = 0
    for slot in range(first_warp * WARP, (first_warp + group_warps) * WARP):
        if slot < count:
            pair = order[slot]
            rows = max(rows, query_lengths[pair])
            columns = max(columns, target_lengths[pair])
    strips = (rows + STRIP_ROWS - 1) // STRIP_ROWS
    tb_words = WARP * strips * columns if traceback else 0
    run_words = WARP * (rows + columns) if traceback else 0
    for warp in range(first_warp, first_warp + group_warps):
        cells = 0
        for slot in range(warp * WARP, (warp + 1) * WARP):
            if slot < count:
                pair = order[slot]
                query, target = query_lengths[pair], target_lengths[pair]
                slot_row[slot] = pairs[pair] if has_pairs else pair
                slot_query[slot] = query
                slot_target[slot] = target
                slot_runs[slot] = query + target if traceback else 0
                cells += query * target
            else:
                slot_row[slot] = -1
                slot_query[slot] = -1
                slot_target[slot] = -1
                slot_runs[slot] = 0
        warp_columns[warp] = columns
        # residues, rows above, traceback words, runs (4 bytes each) and CIGAR characters
        # (``cigar_bound``: 2 bytes per run word)
        quantities[0, warp] = (WARP * (rows + columns) + 8 * WARP * (columns + 1)
                               + 4 * tb_words + 6 * run_words + WARP * 96)
        quantities[1, warp] = WARP * rows
        quantities[2, warp] = WARP * columns
        quantities[3, warp] = WARP * (columns + 1)
        quantities[4, warp] = tb_words
        quantities[5, warp] = run_words
        quantities[6, warp] = cells
