"""Dispatch: runs a list of (query, target) pairs on an engine and returns raw columns.

The engine sees encoded sequences and integer pair lists only; frames are built in
``results.py``. Pairs with a null on either side are never computed and come back invalid.
"""

from __future__ import annotations

import time
import numba
import numpy as np
from tqdm.auto import tqdm

from .arrays import AlignmentArrays
from .encode import EncodedSequences
from . import gpu
from .kernels import cpu, cpu_lanes
from .scoring import SCORE_LIMIT, Mode, Scoring

BACKENDS = ("auto", "cpu", "cuda")
CIGAR_STYLES = ("=", "M")
CLIPS = (None, "soft")
#: Ops buffered per CPU batch (1 byte each); bounds host memory of a batch.
OPS_PER_BATCH = 1 << 26
PAIRS_PER_BATCH = 1 << 20


def check_backend(backend: str) -> None:
    """Refuse a backend name that is not one of ``BACKENDS``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {BACKENDS}")


def check_options(backend: str, cigar_style: str, clip: str | None) -> None:
    """Validate engine options before any work."""
    check_backend(backend)
    if cigar_style not in CIGAR_STYLES:
        raise ValueError(f"unknown cigar_style {cigar_style!r}; use '=' (=/X) or 'M'")
    if clip not in CLIPS:
        raise ValueError(f"unknown clip {clip!r}; use None or 'soft'")


def resolve_backend(backend: str) -> str:
    """The engine that will run: ``"cuda"`` or ``"cpu"``.

    ``"auto"`` picks the GPU when a real one is usable; ``"cuda"`` insists on it (the CUDA
    simulator counts, for tests) and raises ``RuntimeError`` when there is none.
    """
    if backend == "cuda":
        if not (gpu.gpu_usable() or gpu.simulator()):
            if not gpu.cupy_installed():
                raise RuntimeError("backend='cuda' needs CuPy, which is not installed (pip "
                                   "install 'gpualign_df[gpu]'); or use backend='cpu' or "
                                   "'auto'")
            raise RuntimeError("backend='cuda' but no usable CUDA GPU was found (numba.cuda "
                               "reports none); use backend='cpu' or 'auto'")
        return "cuda"
    if backend == "auto" and gpu.gpu_usable():
        return "cuda"
    return "cpu"


def check_score_range(scoring: Scoring, query_lengths: np.ndarray,
                      target_lengths: np.ndarray) -> None:
    """Refuse a job whose scores could overflow the engines' int32 cells (lengths as numpy
    or CuPy arrays)."""
    check_score_bound(scoring, int(query_lengths.max()) if len(query_lengths) else 0,
                      int(target_lengths.max()) if len(target_lengths) else 0)


def check_score_bound(scoring: Scoring, longest_query: int, longest_target: int) -> None:
    """:func:`check_score_range` from the longest query and target."""
    bound = scoring.max_abs_score(longest_query, longest_target)
    if bound >= SCORE_LIMIT:
        raise ValueError(f"scores could reach {bound} for sequences of lengths {longest_query} x "
                         f"{longest_target} with these penalties; the engines hold scores "
                         f"below {SCORE_LIMIT}: use smaller penalties or split the sequences")


def _batches(costs_ops: np.ndarray, order: np.ndarray):
    """Split ``order`` into consecutive batches bounded in ops and pairs."""
    start = 0
    total = 0
    for position, pair in enumerate(order):
        size = int(costs_ops[pair])
        if position > start and (total + size > OPS_PER_BATCH
                                 or position - start >= PAIRS_PER_BATCH):
            yield order[start:position]
            start, total = position, 0
        total += size
    if start < len(order):
        yield order[start:]


def run_pairs(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
              pair_target: np.ndarray, scoring: Scoring, mode: Mode, *, traceback: bool = True,
              cigar_style: str = "=", clip: str | None = None, backend: str = "auto",
              progress: bool | None = None) -> AlignmentArrays:
    """Align pairs and return their raw columns.

    Parameters
    ----------
    queries, targets : EncodedSequences
        Encoded inputs; ``pair_query``/``pair_target`` index into them.
    scoring, mode : Scoring, Mode
        Validated parameters.
    traceback : bool
        False: score and end coordinates only, no traceback memory.
    progress : bool or None
        Show a progress bar; None shows one only for jobs that run more than 2 seconds.
    """
    check_options(backend, cigar_style, clip)
    engine = resolve_backend(backend)
    check_score_range(scoring, queries.lengths, targets.lengths)
    pair_query = np.ascontiguousarray(pair_query, dtype=np.int64)
    pair_target = np.ascontiguousarray(pair_target, dtype=np.int64)
    if engine == "cpu":
        return _run_pairs_cpu(queries, targets, pair_query, pair_target, scoring, mode,
                              traceback, cigar_style, clip, progress)
    started = time.perf_counter()
    valid = queries.valid[pair_query] & targets.valid[pair_target]
    cells = int((queries.lengths[pair_query] * targets.lengths[pair_target])[valid].sum())
    with progress_bar(cells, progress) as bar:
        out = gpu.run_pairs_gpu(
            queries, targets, pair_query, pair_target, scoring, mode, traceback=traceback,
            cigar_style=cigar_style, clip=clip, progress=bar.update,
            cpu_runner=lambda subset_query, subset_target: _run_pairs_cpu(
                queries, targets, subset_query, subset_target, scoring, mode, traceback,
                cigar_style, clip, False))
    out.cells = cells
    out.seconds = time.perf_counter() - started
    return out


def progress_bar(cells: int, progress: bool | None) -> tqdm:
    """A DP-cell progress bar on stderr: forced on/off by ``progress``, else shown once a
    job runs longer than 2 seconds."""
    return tqdm(total=cells, unit="cell", unit_scale=True, delay=0 if progress else 2,
                disable=progress is False, leave=False)


def _run_pairs_cpu(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                   pair_target: np.ndarray, scoring: Scoring, mode: Mode, traceback: bool,
                   cigar_style: str, clip: str | None, progress: bool | None) -> AlignmentArrays:
    """The CPU engine: lane groups for short pairs, one pair per thread for the rest."""
    pairs = len(pair_query)
    query_lengths = queries.lengths[pair_query]
    target_lengths = targets.lengths[pair_target]
    valid = queries.valid[pair_query] & targets.valid[pair_target]
    out = AlignmentArrays(valid=valid,
                          score=np.zeros(pairs, np.int32), query_end=np.zeros(pairs, np.int32),
                          target_end=np.zeros(pairs, np.int32))
    query_start = np.zeros(pairs, np.int32)
    target_start = np.zeros(pairs, np.int32)
    cells = query_lengths * target_lengths
    out.cells = int(cells[valid].sum())
    # Longest first balances the threads; batches bound the ops buffer.
    order = np.flatnonzero(valid)
    order = order[np.argsort(-cells[order], kind="stable")]
    ops_sizes = query_lengths + target_lengths
    op_counts = np.zeros(pairs, dtype=np.int64)
    ops_chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    started = time.perf_counter()
    bar = progress_bar(out.cells, progress)
    free = mode.flags()
    lanes_allowed = cpu_lanes.lane_eligible(
        scoring.max_abs_score(int(query_lengths.max(initial=0)), int(target_lengths.max(initial=0))),
        scoring.gap_open)
    with bar:
        for batch in _batches(ops_sizes if traceback else np.ones(pairs, np.int64), order):
            batch_offsets = np.zeros(pairs, dtype=np.int64)
            batch_offsets[batch] = np.cumsum(ops_sizes[batch]) - ops_sizes[batch]
            ops = np.empty(int(ops_sizes[batch].sum()) if traceback else 0, dtype=np.uint8)
            arguments = (scoring.matrix, scoring.concrete, scoring.gap_open, scoring.gap_extend, mode.code, *free,
                         traceback, batch_offsets, ops, out.score, query_start, out.query_end,
                         target_start, out.target_end, op_counts)
            in_lanes = (lanes_allowed & (query_lengths[batch] > 0) & (target_lengths[batch] > 0)
                        & (query_lengths[batch] <= cpu_lanes.MAX_LANE_LENGTH)
                        & (target_lengths[batch] <= cpu_lanes.MAX_LANE_LENGTH))
            groups = lane_groups(batch[in_lanes], query_lengths, target_lengths)
            cpu_lanes.align_lane_groups(queries.codes, queries.offsets, targets.codes,
                                        targets.offsets, pair_query, pair_target, groups,
                                        *arguments)
            with numba.parallel_chunksize(1):
                cpu.align_pairs(queries.codes, queries.offsets, targets.codes, targets.offsets,
                                pair_query, pair_target, batch[~in_lanes], *arguments)
            if traceback:
                ops_chunks.append((batch, batch_offsets[batch], ops))
            bar.update(int(cells[batch].sum()))
    if traceback:
        out.query_start, out.target_start = query_start, target_start
        _assemble_cigars(out, ops_chunks, op_counts, query_lengths, cigar_style, clip)
    out.seconds = time.perf_counter() - started
    return out


def lane_groups(pairs: np.ndarray, query_lengths: np.ndarray,
                target_lengths: np.ndarray) -> np.ndarray:
    """Pack pairs of similar lengths into groups of ``cpu_lanes.LANES`` (-1 pads), costliest
    group first."""
    lanes = cpu_lanes.LANES
    pairs = pairs[np.lexsort((query_lengths[pairs], target_lengths[pairs]))]
    groups = np.full((len(pairs) + lanes - 1) // lanes * lanes, -1, dtype=np.int64)
    groups[:len(pairs)] = pairs
    return groups.reshape(-1, lanes)[::-1].copy()


def _assemble_cigars(out: AlignmentArrays, ops_chunks, op_counts, query_lengths, cigar_style,
                     clip) -> None:
    """Gather every batch's ops into pair order and build CIGARs and statistics."""
    pairs = len(out.valid)
    total = int(op_counts.sum())
    ops = np.empty(total, dtype=np.uint8)
    op_offsets = np.zeros(pairs + 1, dtype=np.int64)
    np.cumsum(op_counts, out=op_offsets[1:])
    for batch, batch_offsets, batch_ops in ops_chunks:
        _gather_ops(batch, batch_offsets, batch_ops, op_counts, op_offsets, ops)
    chars, offsets, matches, mismatches, gap_opens, gaps, length = cpu.build_cigars(
        ops, op_offsets, op_counts, out.valid, out.query_start, out.query_end,
        query_lengths.astype(np.int64), cigar_style == "M", clip == "soft")
    out.cigar_chars, out.cigar_offsets = chars, offsets
    out.stats = {"matches": matches, "mismatches": mismatches, "gap_opens": gap_opens,
                 "gaps": gaps, "length": length}


@numba.njit(cache=True)
def _gather_ops(batch, batch_offsets, batch_ops, op_counts, op_offsets, ops):
    for k in range(batch.shape[0]):
        p = batch[k]
        source = batch_offsets[k]
        target = op_offsets[p]
        for c in range(op_counts[p]):
            ops[target + c] = batch_ops[source + c]
