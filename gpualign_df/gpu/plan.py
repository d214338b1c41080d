"""Work planning for the GPU: length sort, warps of 32 pairs, long pairs apart, batches
sized to the free device memory, and every buffer offset the kernels need.

Lengths and offsets only, never residues. The short-pair plan runs on the device's array
module: CuPy on a GPU (a handful of device operations and one small copy of totals to the
host), numpy under the CUDA simulator. Long pairs are few and are planned on the host;
lengths that come from the host (pandas input) are split into short and long there too,
so a job of long pairs does no device work before its gather.

* Short and medium pairs (at most ``inter_max_cells`` cells, a setting; in a job of few
  pairs at most ``inter_small_cells``: :func:`long_pair_cells`) go to the inter-task
  kernel: sorted by (target, query) length, longest first, in warps of 32
  slots; residues of a warp interleaved (``base + 32*i + lane``), traceback words of a
  warp interleaved too.
* Long pairs go to the band kernel (:mod:`gpualign_df.gpu.long`), residues contiguous
  (width 1), traceback words in the band layout; a pair whose traceback words exceed the
  job's traceback budget (or the batch budget) is a batch of its own, traced back in
  linear space.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import config
from ..job import needs_linear_space
from ..kernels import planning, simulator
from ..kernels.strip import WARP, lane_words
from . import long
from .buffers import SHARED_UPLOAD_BYTES, buffer_views, download, scratch, scratch_buffer
from .device import THREADS_PER_BLOCK, array_module, blocks, kernel_view
from .launch import launch, most_threads
from .long import traceback_words


@dataclass
class Batch:
    """One launch's worth of pairs; per-slot arrays are batch-relative offsets.

    ``slot_row[s]`` is the job row (pair index) of slot ``s``, -1 for an unused slot (then
    its lengths are -1). ``width`` is the lane stride of the layout (32 or 1). An inter
    batch describes its layout per warp (``warp_table``, :data:`planning.TABLE_ROWS` rows:
    query, target, row-above, traceback and run-word bases, columns, run words per slot);
    its per-slot starts follow from them (``base[warp] + lane``, runs ``base[warp] + lane *
    words``) and are expanded on the device, so ``query_start``, ``target_start``,
    ``tb_start``, ``columns`` and ``run_base`` are None there.
    """

    kind: str
    width: int
    slot_row: np.ndarray
    query_lengths: np.ndarray
    target_lengths: np.ndarray
    run_base: np.ndarray | None    # long: per slot; inter: None (from ``warp_table``)
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
    warp_table: np.ndarray | None = None   # inter: (planning.TABLE_ROWS, warps)
    packed: bool = False
    group_class: tuple[int, int] | None = None   # traceback words in the grouped layout
    longest_query: int = 0         # inter: the longest query and target of the job's
    longest_target: int = 0        # inter-task pairs
    block_rows: int = 0            # linear: rows of a recomputed block
    split: bool = False            # long: a traceback fill in two passes

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


def module_of(array):
    """The array module (numpy or cupy) an array belongs to."""
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy.get_array_module(array)


def to_numpy(array) -> np.ndarray:
    """A host copy (or the array itself) of a numpy or CuPy array: a small C-contiguous
    one's (the plan's totals, a job's summary) through the pinned staging buffer
    (:func:`~gpualign_df.gpu.buffers.download`: one synchronous copy, which waits for the
    default stream's work), where CuPy's ``get`` copies into new pageable memory."""
    if isinstance(array, np.ndarray):
        return array
    if array.nbytes <= SHARED_UPLOAD_BYTES and array.flags.c_contiguous:
        return download(array, array.nbytes).view(array.dtype).reshape(array.shape)
    return array.get()


def long_pair_cells(pair_count: int, inter_max_cells: int) -> int:
    """Cells above which a pair of a job of ``pair_count`` pairs goes to the band kernel:
    ``inter_max_cells``, and at most the ``inter_small_cells`` setting for a job of fewer
    than ``inter_min_pairs`` pairs (one thread a pair would leave most of the GPU idle while
    a few threads work through their pairs' cells one by one; a band of a pair's rows takes
    a warp)."""
    tuning = config.settings()
    if pair_count < tuning.inter_min_pairs:
        return min(inter_max_cells, tuning.inter_small_cells)
    return inter_max_cells


def plan_batches(pairs, query_lengths, target_lengths, traceback: bool, budget_bytes: int,
                 sort: bool = True, fits_16bit=None, longest: tuple[int, int] | None = None,
                 inter_max_cells: int | None = None,
                 traceback_budget: int | None = None, device=None,
                 pair_groups=None) -> list[Batch]:
    """Batches for job rows ``pairs`` (None: every row; lengths indexed by job row; numpy or
    CuPy arrays, all of one kind): inter-task batches first, then long-pair batches, each within
    ``budget_bytes`` of device memory. ``fits_16bit(longest_query, longest_target)`` says
    whether the inter-task pairs run on packed 16-bit cells (two pairs per thread, warps
    paired: :mod:`gpualign_df.kernels.inter16`); None: never. Where they are packed,
    ``pair_groups(longest_query, longest_target)`` gives the grouped pair kernel's
    class ``(lanes, rows)``, which fills them keeping no rows above, and whose layout the
    traceback words take (None: the inter-task kernels and layout;
    :attr:`Batch.group_class`). ``longest``: bounds on the
    longest query and target (every pair short when their product is): no maxima are read
    back, and the 16-bit and keyed-best checks take the bounds. Pairs of more than
    ``inter_max_cells`` cells (None: the setting), in a job of few pairs those of more
    than the ``inter_small_cells`` setting (:func:`long_pair_cells`), are long pairs; a
    long pair whose traceback words take more than ``traceback_budget`` bytes (None: no
    limit but the batch budget) takes the linear-space path (blocks as the settings say).
    ``device``: the array module the inter-task plan runs on (None: the lengths'); host
    lengths are split into short and long pairs on the host, with no device work or
    read-back, and only the short pairs' go to ``device``."""
    if inter_max_cells is None:
        inter_max_cells = config.settings().inter_max_cells
    host = module_of(query_lengths)
    xp = host if device is None else device

    def short_plan(pairs, query_lengths, target_lengths, longest_query, longest_target):
        if xp is not host:
            pairs, query_lengths, target_lengths = (
                None if values is None else xp.asarray(values)
                for values in (pairs, query_lengths, target_lengths))
        return _inter_batches(xp, pairs, query_lengths, target_lengths, traceback,
                              budget_bytes, sort, longest_query, longest_target, fits_16bit,
                              pair_groups)

    if pairs is None:  # every job row: no gathers
        pair_query_lengths = query_lengths.astype(np.int64, copy=False)
        pair_target_lengths = target_lengths.astype(np.int64, copy=False)
    else:
        pair_query_lengths = query_lengths[pairs].astype(np.int64, copy=False)
        pair_target_lengths = target_lengths[pairs].astype(np.int64, copy=False)
    if len(pair_query_lengths) == 0:
        return []
    inter_max_cells = long_pair_cells(len(pair_query_lengths), inter_max_cells)
    if longest is not None and longest[0] * longest[1] <= inter_max_cells:
        return short_plan(pairs, pair_query_lengths, pair_target_lengths, *longest)
    cells = pair_query_lengths * pair_target_lengths
    most_cells, longest_query, longest_target = (int(value) for value in to_numpy(host.stack(
        [cells.max(), pair_query_lengths.max(), pair_target_lengths.max()])))
    if most_cells <= inter_max_cells:  # the usual case: no boolean selection
        return short_plan(pairs, pair_query_lengths, pair_target_lengths, longest_query,
                          longest_target)
    if pairs is None:
        pairs = host.arange(len(pair_query_lengths), dtype=np.int64)
    is_long = cells > inter_max_cells
    short = ~is_long
    if bool(short.any()):
        longest_query, longest_target = (int(value) for value in to_numpy(host.stack(
            [pair_query_lengths[short].max(), pair_target_lengths[short].max()])))
    batches = short_plan(pairs[short], pair_query_lengths[short], pair_target_lengths[short],
                         longest_query, longest_target)
    tuning = config.settings()
    return batches + _long_batches(to_numpy(pairs[is_long]),
                                   to_numpy(pair_query_lengths[is_long]),
                                   to_numpy(pair_target_lengths[is_long]), traceback,
                                   budget_bytes, traceback_budget, tuning)


def _inter_batches(xp, pairs, query_lengths, target_lengths, traceback, budget, sort,
                   longest_query, longest_target, fits_16bit, pair_groups):
    """Inter-task batches of ``pairs`` with their lengths (``*_lengths[k]`` of
    ``pairs[k]``; the longest of each given). Per-warp quantities are summed once on the
    device (:func:`planning.plan_sums`); only their totals cross to the host, unless the job
    needs several batches. Packed (``fits_16bit`` says so): warps 2p and 2p + 1 get the
    same (larger) rows and columns and stay in one batch. ``pairs`` None: the job rows
    themselves (``*_lengths[k]`` of row k)."""
    if len(query_lengths) == 0:
        return []
    packed = fits_16bit is not None and fits_16bit(longest_query, longest_target)
    group_shape = pair_groups(longest_query, longest_target) \
        if packed and pair_groups is not None else None
    group_class = group_shape if traceback else None
    group_lanes, group_rows = group_class or (0, 1)
    count = len(query_lengths)
    if sort:  # longest target first, then longest query; stable
        order = length_order(xp, target_lengths, query_lengths, longest_target,
                             longest_query)
    else:
        order = xp.arange(count, dtype=np.int64)
    group_warps = 2 if packed else 1
    slot_count = (count + group_warps * WARP - 1) // (group_warps * WARP) * group_warps * WARP
    warp_count = slot_count // WARP
    # one buffer for the plan's outputs: on the engine's device one kept between jobs
    # (the job's kernels read it in stream order, before a later job's plan writes it),
    # its views made once a size
    if xp is array_module():
        block = scratch_buffer("plan", plan_words(slot_count), np.int64)
        views = buffer_views("plan views", block, slot_count,
                             lambda buffer: plan_views(buffer, slot_count))
    else:
        views = plan_views(xp.empty(plan_words(slot_count), np.int64), slot_count)
    slot_row, slot_query, slot_target, columns, quantities, warp_table, above, totals = views
    launch_plan(slot_count, order, order if pairs is None else pairs,
                 pairs is not None, query_lengths, target_lengths, traceback, group_warps,
                 group_lanes, group_lanes * lane_words(group_rows),
                 group_shape is None,  # (the grouped kernel keeps no rows above)
                 slot_row, slot_query, slot_target, columns, quantities)
    (plan_sums_host if xp is np else launch_sums)(quantities, columns, warp_table, totals)
    totals = to_numpy(totals)
    if int(totals[0]) <= budget:
        ranges, host_inclusive = [(0, warp_count)], None
    else:
        need = to_numpy(quantities[0])
        if packed:  # split between warp pairs
            ranges = [(2 * first, 2 * stop) for first, stop in
                      _split(need.reshape(-1, 2).sum(axis=1), budget)]
        else:
            ranges = _split(need, budget)
        host_inclusive = np.cumsum(to_numpy(quantities), axis=1)
    batches = []
    for first, stop in ranges:
        if host_inclusive is None:
            sums = totals
        else:
            sums = host_inclusive[:, stop - 1] - (host_inclusive[:, first - 1] if first else 0)
        _need, query_size, target_size, row_words, tb_total, run_total, cells = (
            int(value) for value in sums)
        warps = slice(first, stop)
        slots = slice(first * WARP, stop * WARP)
        if len(ranges) == 1:  # one batch: the plan's arrays themselves (no copy, no view)
            table, row_start = warp_table, above
            batch_rows, batch_query, batch_target = slot_row, slot_query, slot_target
        else:  # a contiguous copy (the kernels take it whole), offsets relative to the
            # batch's first warp; columns and strides as they are
            table = warp_table[:, warps].copy()
            if first:
                offset_rows = planning.OFFSET_ROWS
                table[:offset_rows] -= warp_table[:offset_rows, first:first + 1]
            row_start = table[planning.ABOVE_ROW]
            batch_rows, batch_query, batch_target = (values[slots] for values in (
                slot_row, slot_query, slot_target))
        batches.append(Batch(
            kind="inter", width=WARP, slot_row=batch_rows, query_lengths=batch_query,
            target_lengths=batch_target, run_base=None, row_start=row_start,
            query_size=query_size, target_size=target_size, row_words=row_words,
            tb_words=tb_total, run_words=run_total, cells=cells, warp_table=table,
            packed=packed, group_class=group_class, longest_query=longest_query,
            longest_target=longest_target))
    return batches


def plan_words(slot_count: int) -> int:
    """Words (int64) of the plan's outputs for ``slot_count`` slots (:func:`plan_views`)."""
    warp_count = slot_count // WARP
    return 3 * slot_count + (1 + planning.QUANTITIES + planning.TABLE_ROWS) * warp_count \
        + planning.QUANTITIES


def plan_views(block, slot_count: int) -> tuple:
    """The plan's outputs for ``slot_count`` slots in a buffer of at least
    :func:`plan_words` words: three per-slot rows (job row, query and target lengths),
    the per-warp columns, quantities (``planning.QUANTITIES`` rows) and layout table
    (``planning.TABLE_ROWS`` rows) and its row of the rows above
    (``planning.ABOVE_ROW``), and the quantities' totals."""
    warp_count = slot_count // WARP
    quantity_rows, table_rows = planning.QUANTITIES, planning.TABLE_ROWS
    slot_row, slot_query, slot_target = (block[k * slot_count:(k + 1) * slot_count]
                                         for k in range(3))
    at = 3 * slot_count
    columns = block[at:at + warp_count]
    at += warp_count
    quantities = block[at:at + quantity_rows * warp_count].reshape((quantity_rows, warp_count))
    at += quantity_rows * warp_count
    warp_table = block[at:at + table_rows * warp_count].reshape((table_rows, warp_count))
    at += table_rows * warp_count
    return (slot_row, slot_query, slot_target, columns, quantities, warp_table,
            warp_table[planning.ABOVE_ROW], block[at:at + quantity_rows])


def length_order(xp, target_lengths, query_lengths, longest_target: int, longest_query: int):
    """The permutation that sorts pairs by target length, then query length, both
    descending (``longest_*`` bound the lengths). On the host a stable sort (ties in row
    order). On the device, where the bounds make at most ``planning.COUNT_BINS`` keys (a
    W1 job: reads of 150 against windows up to 277 make 42,000), a counting sort:
    four launches and no wait for the device, where CuPy's radix argsort goes through
    Thrust, which takes more host time and waits for the device when it ends; pairs of
    equal lengths then take their places in the order of the atomics (a warp's in lane
    order), which changes no quantity of the plan and no result. Larger bounds take the
    argsort: stable, on 32-bit keys where both lengths are below 2**16 (half the radix
    passes of 64-bit ones)."""
    if xp is np:
        return np.argsort(-(target_lengths * (1 << 32) + query_lengths), kind="stable")
    bins = (longest_target + 1) * (longest_query + 1)
    if bins <= planning.COUNT_BINS:
        return _counting_order(target_lengths, query_lengths, longest_target, longest_query,
                               bins)
    short = max(longest_target, longest_query) < (1 << 16)
    return xp.argsort(_sort_key(short)(target_lengths, query_lengths))


def _counting_order(target_lengths, query_lengths, longest_target: int, longest_query: int,
                    bins: int):
    """:func:`length_order` on the device by counting (:func:`planning.count_keys`,
    :func:`planning.scan_counts`, :func:`planning.place_keys`) into buffers kept between
    jobs (the caller holds the device lock; the plan reads the order before it ends)."""
    count = len(target_lengths)
    counts = scratch_buffer("length_counts", planning.COUNT_BINS, np.int64)
    order = scratch("length_order", count, np.int64)
    if simulator():  # (numpy arrays; the engine sorts on the host there)
        counts[:bins] = 0
    else:
        counts.data.memset_async(0, 8 * bins)
    grid = blocks(count)
    keys = (target_lengths, query_lengths, longest_target, longest_query)
    launch(planning.count_keys, grid, THREADS_PER_BLOCK, (*keys, counts), kernel_view)
    launch(planning.scan_counts, 1, _one_block(planning.scan_counts, (counts, bins),
                                               planning.SCAN_THREADS), (counts, bins),
           kernel_view, kept=True)
    launch(planning.place_keys, grid, THREADS_PER_BLOCK, (*keys, counts, order), kernel_view)
    return order


@lru_cache(maxsize=None)
def _sort_key(short: bool):
    """CuPy kernel of the length sort's key, ascending where the lengths descend, in one
    pass: ``-(target * 2**32 + query)``, or with ``short`` (both below 2**16) the uint32
    ``(2**16 - 1 - target) * 2**16 + 2**16 - 1 - query``."""
    import cupy

    if short:
        return cupy.ElementwiseKernel(
            "int64 target, int64 query", "uint32 key",
            "key = ((unsigned int)(65535 - target) << 16) | (unsigned int)(65535 - query)",
            "gpualign_sort_key16")
    return cupy.ElementwiseKernel("int64 target, int64 query", "int64 key",
                                  "key = -((target << 32) + query)", "gpualign_sort_key")


def _long_batches(pairs, m, n, traceback, budget, traceback_budget, tuning):
    """Long-pair batches of host arrays: rows ``pairs`` of lengths ``m`` x ``n``; pairs
    whose traceback words do not fit (``traceback_budget``, ``budget``) one batch each,
    kind ``"linear"``."""
    if len(pairs) == 0:
        return []
    order = np.argsort(-(m * n), kind="stable")
    pairs, m, n = pairs[order], m[order], n[order]
    tb_words = traceback_words(m, n) if traceback else np.zeros_like(m)
    run_words = (m + n) if traceback else np.zeros_like(m)
    need = m + n + 8 * (n + 1) + 4 * tb_words + 6 * run_words + 96
    linear = traceback & ((need > budget) | (traceback_budget is not None
                                             and needs_linear_space(m, n, traceback_budget)))
    batches = []
    for k in np.flatnonzero(linear):
        # the block's words within the setting and half the batch budget (smaller GPUs)
        block = long.block_rows(int(n[k]), min(tuning.linear_block_bytes, budget // 2),
                                tuning.band_lanes)
        linear_need = long.linear_bytes(int(m[k]), int(n[k]), block)
        if linear_need > budget:
            raise MemoryError(
                f"pair of lengths {m[k]} x {n[k]} needs {linear_need >> 20} MiB of GPU memory "
                f"even in linear space (checkpoint rows and one block of {block} rows), more "
                f"than the {budget >> 20} MiB available; free GPU memory or align it on the "
                f"CPU (backend='cpu')")
        batches.append(_long_batch("linear", pairs[k:k + 1], m[k:k + 1], n[k:k + 1],
                                   np.zeros(1, np.int64), run_words[k:k + 1]))
        batches[-1].block_rows = block
    keep = ~linear
    pairs, m, n, tb_words, run_words, need = (values[keep] for values in (
        pairs, m, n, tb_words, run_words, need))
    for first, stop in _split(need, budget) if len(pairs) else []:
        part = slice(first, stop)
        batches.append(_long_batch("long", pairs[part], m[part], n[part], tb_words[part],
                                   run_words[part]))
        if traceback:  # two passes where the fill is bound by its bands' critical path
            rows = long.lane_rows(tuning, True, int(m[part].max()))
            batches[-1].split = long.splits(tuning, m[part], n[part], rows) and (
                int(need[part].sum()) + long.split_bytes(tuning, m[part], n[part], rows)
                <= budget)
    return batches


def _long_batch(kind, pairs, m, n, tb_words, run_words) -> Batch:
    """A batch of long pairs, residues back to back."""
    return Batch(
        kind=kind, width=1, slot_row=pairs, query_lengths=m.astype(np.int32),
        target_lengths=n.astype(np.int32), query_start=_exclusive_cumsum(m),
        target_start=_exclusive_cumsum(n), tb_start=_exclusive_cumsum(tb_words),
        run_base=_exclusive_cumsum(run_words), columns=n.astype(np.int32),
        row_start=_exclusive_cumsum(n + 1), query_size=int(m.sum()),
        target_size=int(n.sum()), row_words=int((n + 1).sum()),
        tb_words=int(tb_words.sum()), run_words=int(run_words.sum()),
        cells=int((m * n).sum()))


def launch_plan(slots, *arguments):
    """The planning kernel over ``slots`` slots, a thread each (CuPy arrays viewed without
    a stream wait, as the engine's kernels take them)."""
    threads = planning.PLAN_THREADS
    launch(planning.warp_plan, -(-slots // threads), threads, arguments, kernel_view)


def plan_sums_host(quantities, warp_columns, warp_table, totals):
    """:func:`planning.plan_sums` on numpy arrays (the plan under the CUDA simulator, where
    the one-block kernel's barriers take seconds)."""
    offset_rows = planning.OFFSET_ROWS
    summed = quantities[1:1 + offset_rows]
    warp_table[:offset_rows] = np.cumsum(summed, axis=1) - summed
    warp_table[offset_rows] = warp_columns
    warp_table[offset_rows + 1] = quantities[offset_rows] // WARP
    totals[:] = quantities.sum(axis=1)


def launch_sums(*arguments):
    """The one-block offsets-and-totals kernel (:func:`planning.plan_sums`) on views of
    the plan's buffer kept between jobs (the launcher may keep them)."""
    launch(planning.plan_sums, 1, _one_block(planning.plan_sums, arguments,
                                             planning.SUM_THREADS), arguments, kernel_view,
           kept=True)


def _one_block(kernel, arguments: tuple, threads: int) -> int:
    """The threads of a one-block plan kernel: ``threads``, fewer whole warps where its
    registers a thread allow fewer (the compiler's count may change with its version);
    a simulated block's size under the simulator."""
    if simulator():
        return THREADS_PER_BLOCK
    return min(threads, most_threads(kernel, arguments) // WARP * WARP)
