"""Engine dispatch: the one place that picks the CPU or the GPU (:func:`choose_engine`),
and the runs of pair lists on the chosen engine, which return raw columns.

The engine sees encoded sequences and integer pair lists only; frames are built in
``results.py``. Pairs with a null on either side are never computed and come back invalid.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import replace
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from functools import lru_cache, partial
from typing import Callable

import numba
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
import psutil
from tqdm.auto import tqdm

from . import config
from .arrays import AlignmentArrays
from .encode import EncodedSequences, plain_label
from .job import (Job, full_traceback_bytes, needs_linear_space,  # noqa: F401 (public)
                  traceback_budget)
from .pairs import best_of_rows, search_pairs
from .kernels import cpu, cpu_lanes, cpu_linear, cpu_search, cpu_wave, gatk
from .kernels.encoding import pair_sizes
from .scoring import MODE_LOCAL, SCORE_LIMIT, Mode, Scoring

BACKENDS = ("auto", "cpu", "cuda")
CIGAR_STYLES = ("=", "M")
CLIPS = (None, "soft")


class HostMemoryError(MemoryError):
    """A job that cannot fit in host memory, refused before any work; the message says
    what would fit."""


def check_backend(backend: str) -> None:
    """Refuse a backend name that is not one of ``BACKENDS``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {BACKENDS}")


def check_options(backend: str, cigar_style: str, clip: str | None, traceback: bool = True,
                  progress: bool | None = None, traceback_memory: int | None = None) -> None:
    """Validate engine options before any work."""
    check_backend(backend)
    if not isinstance(traceback, (bool, np.bool_)):
        raise ValueError(f"traceback must be True or False, got {traceback!r}")
    if traceback_memory is not None and (
            isinstance(traceback_memory, (bool, np.bool_))
            or not isinstance(traceback_memory, (int, np.integer)) or traceback_memory < 1):
        raise ValueError(f"traceback_memory must be a positive number of bytes (an int) or "
                         f"None, got {traceback_memory!r}")
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise ValueError(f"progress must be True, False or None, got {progress!r}")
    if cigar_style not in CIGAR_STYLES:
        raise ValueError(f"unknown cigar_style {cigar_style!r}; use '=' (=/X) or 'M'")
    if clip not in CLIPS:
        raise ValueError(f"unknown clip {clip!r}; use None or 'soft'")


def codes_allocator(job: Job) -> Callable[[int], np.ndarray] | None:
    """How a job's host encoding allocates its codes (``encode_sequences``'s
    ``allocate``): on the GPU, buffers its upload copies at the link's speed
    (:func:`gpualign_df.gpu.buffers.codes_buffer`); else None (plain memory)."""
    return _gpu_codes_buffer() if job.engine == "cuda" else None


@lru_cache(maxsize=None)
def _gpu_codes_buffer() -> Callable[[int], np.ndarray]:
    """:func:`gpualign_df.gpu.buffers.codes_buffer`, imported once (each GPU job asks)."""
    from .gpu.buffers import codes_buffer

    return codes_buffer


def choose_engine(backend: str, scoring: Scoring | None = None, gatk: bool = False) -> str:
    """The engine that runs a job: ``"cuda"`` or ``"cpu"``; the one place that decides.

    ``"auto"`` takes the GPU when a real one is usable; ``"cuda"`` insists on it (the CUDA
    simulator counts, for tests) and raises ``RuntimeError`` when there is none. Either way
    an alphabet larger than the GPU kernels' shared table, or gap costs whose difference
    the long-pair kernel's border words cannot hold (``gap_open - gap_extend`` of 65,534 or
    more), runs on the CPU (``scoring`` given), which has no such bound; so does a job of
    GATK's aligner (``gatk``: the ``overhang`` option), a CPU kernel.
    """
    from . import gpu  # numba.cuda: imported on the first job, not with the package

    if backend == "cuda":
        if not (gpu.gpu_usable() or gpu.simulator()):
            if not gpu.cupy_installed():
                raise RuntimeError("backend='cuda' needs CuPy, which is not installed (pip "
                                   "install 'gpualign_df[gpu]'); or use backend='cpu' or "
                                   "'auto'")
            raise RuntimeError("backend='cuda' but no usable CUDA GPU was found (numba.cuda "
                               "reports none); use backend='cpu' or 'auto'")
        engine = "cuda"
    else:
        engine = "cuda" if backend == "auto" and gpu.gpu_usable() else "cpu"
    if engine == "cuda" and gatk:
        return "cpu"
    if engine == "cuda" and scoring is not None and not _fits_gpu_kernels(
            len(scoring.alphabet), scoring.gap_open, scoring.gap_extend):
        return "cpu"
    return engine


@lru_cache(maxsize=256)
def _fits_gpu_kernels(alphabet_size: int, gap_open: int, gap_extend: int) -> bool:
    """Whether the GPU kernels take an alphabet of this size (their shared table) and
    these gap costs (the long-pair kernel's border words); kept, since each job asks."""
    from .kernels.band import gap_delta_fits
    from .kernels.strip import MAX_ALPHABET

    return alphabet_size <= MAX_ALPHABET and gap_delta_fits(gap_open, gap_extend)


def small_job_engine(job: Job, cells: Callable[[], float], backend: str) -> Job:
    """``job``, on the CPU engine where ``backend="auto"`` chose the GPU for a job from
    pandas or Python sequences of at most ``auto_cpu_cells`` DP cells (``cells()``, asked
    only where it decides; none by default): for a host where the GPU's fixed cost per
    call (uploads, launch, the results' trip back) exceeds such a job's time on the CPU.
    A cuDF job stays on the GPU (its data is there); so does one with ``backend="cuda"``.
    The frames are the same on either engine.

    Examples
    --------
    >>> from gpualign_df import config
    >>> from gpualign_df.job import Job
    >>> from gpualign_df.scoring import make_scoring, parse_mode
    >>> job = Job("rowwise", "pandas", "cuda", make_scoring(match=1, mismatch=-1),
    ...           parse_mode("sw", None))
    >>> small, large = (lambda: 420_000), (lambda: 1e9)
    >>> small_job_engine(job, small, "auto").engine      # (auto_cpu_cells 0: the GPU)
    'cuda'
    >>> with config.override(auto_cpu_cells=1 << 21):
    ...     small_job_engine(job, small, "auto").engine, small_job_engine(job, large, "auto").engine
    ('cpu', 'cuda')
    >>> small_job_engine(job, small, "cuda").engine
    'cuda'
    """
    limit = config.settings().auto_cpu_cells
    if (limit > 0 and backend == "auto" and job.engine == "cuda" and job.library == "pandas"
            and cells() <= limit):
        return replace(job, engine="cpu")
    return job


def check_score_bound(scoring: Scoring, longest_query: int, longest_target: int) -> None:
    """Refuse a job whose scores could overflow the engines' int32 cells, from its longest
    query and target."""
    bound = scoring.max_abs_score(longest_query, longest_target)
    if bound >= SCORE_LIMIT:
        raise ValueError(f"scores could reach {bound} for sequences of lengths {longest_query} x "
                         f"{longest_target} with these penalties; the engines hold scores "
                         f"below {SCORE_LIMIT}: use smaller penalties or split the sequences")


def _batches(costs_ops: np.ndarray, order: np.ndarray, tuning: config.Settings):
    """Split ``order`` into consecutive batches bounded in ops and pairs."""
    start = 0
    total = 0
    for position, pair in enumerate(order):
        size = int(costs_ops[pair])
        if position > start and (total + size > tuning.cpu_batch_ops
                                 or position - start >= tuning.cpu_batch_pairs):
            yield order[start:position]
            start, total = position, 0
        total += size
    if start < len(order):
        yield order[start:]


def run_pairs(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
              pair_target: np.ndarray, job: Job, traceback: bool | None = None,
              meanwhile: Callable[[], None] | None = None,
              every_row: bool = False) -> AlignmentArrays:
    """Align pairs on the job's engine and return their raw columns.

    Parameters
    ----------
    queries, targets : EncodedSequences
        Encoded inputs; ``pair_query``/``pair_target`` index into them.
    job : Job
        The resolved job (engine, scoring, mode, CIGAR options, progress, traceback memory).
    traceback : bool, optional
        Overrides ``job.traceback`` (a search's score-only pass).
    meanwhile : callable, optional
        The caller's host work that does not need the results (its frame's labels and
        arrays): on the GPU engine, called once while the kernels run, where the job
        would otherwise wait for them; not called on the CPU engine, which has no such
        wait.
    every_row : bool
        Pair ``k`` is row ``k`` of both collections, for every row (a whole rowwise job):
        the GPU engine then makes no pair list or length array of its own.
    """
    traceback = job.traceback if traceback is None else traceback
    check_score_bound(job.scoring, queries.longest, targets.longest)
    pair_query = np.ascontiguousarray(pair_query, dtype=np.int64)
    pair_target = np.ascontiguousarray(pair_target, dtype=np.int64)
    if job.overhang is not None:
        return gatk_pairs(queries, targets, pair_query, pair_target, job, traceback)
    if job.engine == "cpu" and not traceback and striped_scores(job):
        return _striped_ends(queries, targets, pair_query, pair_target, job)
    if job.engine == "cpu":
        return _run_pairs_cpu(queries, targets, pair_query, pair_target, job.scoring, job.mode,
                              traceback, job.cigar_style, job.clip, job.progress,
                              job.traceback_memory)
    from . import gpu

    started = time.perf_counter()
    valid = np.empty(len(pair_query), np.bool_)  # (a null sequence has no cells)
    sizes = pair_sizes(queries.offsets, queries.valid, targets.offsets, targets.valid,
                       pair_query, pair_target, valid)
    cells = sizes[0]
    with progress_bar(cells, job.progress) as bar:
        out = gpu.run_pairs_gpu(
            queries, targets, pair_query, pair_target, job.scoring, job.mode,
            traceback=traceback, cigar_style=job.cigar_style, clip=job.clip,
            progress=bar.update, traceback_memory=job.traceback_memory, meanwhile=meanwhile,
            sizes=(valid, sizes), every_row=every_row)
    out.cells = cells
    out.seconds = time.perf_counter() - started
    return out


def search_survivors(queries: EncodedSequences, targets: EncodedSequences,
                     job: Job) -> tuple[np.ndarray, np.ndarray]:
    """The (query, target) pairs a search with ``job.top_k`` keeps, in best-first order.

    On the GPU one score-only pass over the cross product keeps the best k per query on
    the device (:func:`gpualign_df.gpu.search_top_k`, no pair list; a database larger
    than the device's memory goes through it in tiles); on the CPU whole
    queries are scored against the database in blocks of at most ``search_block_pairs``
    pairs (:mod:`gpualign_df.config`), so memory is bounded by the kept pairs: local
    searches by the lanes kernel (:func:`local_search_scores`) where the scores
    allow it, other modes by the pair engine."""
    if job.engine == "cuda":
        from . import gpu

        check_score_bound(job.scoring, queries.longest, targets.longest)
        with progress_bar(queries.residues * targets.residues, job.progress) as bar:
            return gpu.search_top_k(
                gpu.upload(queries)[0], targets, queries.lengths, queries.valid,
                targets.lengths, targets.valid, job.scoring, job.mode, job.top_k,
                progress=bar.update)
    tuning = config.settings()
    block = max(1, tuning.search_block_pairs // len(targets))
    lanes = job.mode.code == MODE_LOCAL and _lanes_fit(job.scoring)
    groups = profiles = None
    if lanes:
        check_score_bound(job.scoring, queries.longest, targets.longest)
        groups = cpu_search.lane_layout(targets.lengths, targets.valid,
                                        tuning.cpu_search_group_columns)
        profiles = _group_profiles(targets, groups, job, tuning)
    kept = []
    for first in range(0, len(queries), block):
        count = min(block, len(queries) - first)
        if lanes:
            score = local_search_scores(queries, targets, first, count, groups, job, tuning,
                                        profiles)
            valid = queries.valid[first:first + count, None] & targets.valid[None, :]
        else:
            pair_query, pair_target = search_pairs(count, len(targets))
            arrays = run_pairs(queries, targets, pair_query + first, pair_target, job,
                               traceback=False)
            score, valid = (values.reshape(count, len(targets))
                            for values in (arrays.score, arrays.valid))
        kept.append(best_of_rows(score, valid, job.top_k) + first * len(targets))
    kept = np.concatenate(kept)
    return kept // max(1, len(targets)), kept % max(1, len(targets))


def search_rows(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                pair_target: np.ndarray, job: Job) -> AlignmentArrays:
    """The rows of a search's kept pairs (``pair_query`` sorted, as
    :func:`search_survivors` returns them). A local search on the CPU takes their scores
    and end cells from :func:`_striped_ends` (one pair at a time down the query's striped
    16-bit profile; pairs that saturate it through the pair engine). With traceback (and
    no clipping), where a kept pair is longer than the ``lane_max_length`` setting on a
    side (the pair engine would trace it back one pair a thread, whole), each pair is then
    aligned again only in the rectangle that holds its alignment
    (:func:`_traced_in_rectangles`); shorter pairs are traced back whole in the pair
    engine's lanes, faster than the end-cell pass and the rectangles together. Every other
    search goes through :func:`run_pairs`."""
    scoring = job.scoring
    lane_most = config.settings().lane_max_length
    traced_whole = job.traceback and (
        job.clip is not None
        or not ((queries.lengths[pair_query] > lane_most).any()
                or (targets.lengths[pair_target] > lane_most).any()))
    if (job.engine != "cpu" or job.mode.code != MODE_LOCAL or not _lanes_fit(scoring)
            or traced_whole or len(pair_query) == 0):
        return run_pairs(queries, targets, pair_query, pair_target, job)
    out = _striped_ends(queries, targets, pair_query, pair_target, job)
    if not job.traceback:
        return out
    return _traced_in_rectangles(queries, targets, pair_query, pair_target, out, job)


def striped_scores(job: Job) -> bool:
    """Whether the CPU engine scores a local job's pairs without traceback one pair at a
    time down the query's striped 16-bit profile (:func:`_striped_ends`) rather than in
    its lanes of pairs: for matrices the lanes gather a score of every lane from
    (BLOSUM, EDNAFULL; a match/mismatch scheme's lanes score by one compare and stay
    faster), where the costs fit 16-bit lanes."""
    return (job.mode.code == MODE_LOCAL and not cpu_lanes.two_valued(job.scoring.matrix)
            and _lanes_fit(job.scoring))


def _striped_ends(queries: EncodedSequences, targets: EncodedSequences,
                  pair_query: np.ndarray, pair_target: np.ndarray, job: Job) -> AlignmentArrays:
    """Local score and end cell of each pair (:func:`gpualign_df.kernels.cpu_search.
    search_ends`: a run of pairs of one query shares its profile, so ``pair_query`` sorted
    by query builds each profile once); pairs whose 16-bit lanes saturate are scored again
    by the pair engine's 32-bit path."""
    started = time.perf_counter()
    scoring = job.scoring
    pairs = len(pair_query)
    valid = queries.valid[pair_query] & targets.valid[pair_target]
    out = AlignmentArrays(valid=valid, score=np.zeros(pairs, np.int32),
                          query_end=np.zeros(pairs, np.int32),
                          target_end=np.zeros(pairs, np.int32))
    # runs of one query's pairs, at most a vector's lanes each
    starts = np.flatnonzero(np.r_[True, pair_query[1:] != pair_query[:-1]])
    bounds = np.unique(np.concatenate([np.arange(a, b, cpu_search.HALF) for a, b in
                                       zip(starts, np.r_[starts[1:], pairs])] + [[pairs]]))
    threads = numba.get_num_threads()
    cells = queries.lengths[pair_query] * targets.lengths[pair_target]
    out.cells = int(cells[valid].sum())
    # costliest runs first, in chunks of a few a thread (threads that finish early take more)
    order = np.argsort(-np.add.reduceat(cells, bounds[:-1]), kind="stable")
    work = [partial(cpu_search.search_ends, queries.codes, queries.offsets, targets.codes,
                    targets.offsets, pair_query, pair_target, bounds[chunk],
                    bounds[chunk + 1], scoring.matrix, scoring.gap_open, scoring.gap_extend,
                    out.score, out.query_end, out.target_end)
            for chunk in np.array_split(order, max(1, min(len(order), 16 * threads)))]
    _run_counted(work, threads, out.cells, job.progress, config.settings().progress_interval)
    saturated = np.flatnonzero(out.score >= cpu_search.CEILING)
    if len(saturated):
        again = _scores_32bit(queries, targets, pair_query[saturated], pair_target[saturated],
                              job)
        for name in ("score", "query_end", "target_end"):
            getattr(out, name)[saturated] = getattr(again, name)
    out.seconds = time.perf_counter() - started
    return out


def _traced_in_rectangles(queries: EncodedSequences, targets: EncodedSequences,
                          pair_query: np.ndarray, pair_target: np.ndarray,
                          ends: AlignmentArrays, job: Job) -> AlignmentArrays:
    """The kept pairs of a local search with traceback, each aligned again only in the
    rectangle from :func:`gpualign_df.kernels.cpu_search.hit_start`'s corner to its end
    cell (``ends``: their scores and end cells): the same rows as the whole pairs' (see
    there why), at the cost of the alignments' own rectangles rather than the pairs'."""
    scoring = job.scoring
    pairs = len(pair_query)
    first_row = np.zeros(pairs, np.int64)
    first_column = np.zeros(pairs, np.int64)
    scored = np.flatnonzero(ends.valid & (ends.score > 0))
    threads = numba.get_num_threads()
    work = [partial(cpu_search.hit_starts, queries.codes, queries.offsets, targets.codes,
                    targets.offsets, pair_query, pair_target, chunk, ends.score,
                    ends.query_end, ends.target_end, scoring.matrix, scoring.gap_open,
                    scoring.gap_extend, first_row, first_column)
            for chunk in np.array_split(scored, max(1, min(len(scored), 16 * threads)))]
    _run_counted(work, threads, int((ends.query_end[scored].astype(np.int64)
                                     * ends.target_end[scored]).sum()),
                 job.progress, config.settings().progress_interval)
    # each rectangle a pair of its own (a score of 0: the empty pieces at (0, 0))
    rows = np.arange(pairs)
    out = run_pairs(queries.slices(pair_query, first_row, ends.query_end),
                    targets.slices(pair_target, first_column, ends.target_end), rows, rows,
                    job)
    for name, shift in (("query_start", first_row), ("query_end", first_row),
                        ("target_start", first_column), ("target_end", first_column)):
        setattr(out, name, (getattr(out, name) + shift).astype(np.int32))
    return out


def _scores_32bit(queries: EncodedSequences, targets: EncodedSequences,
                  pair_query: np.ndarray, pair_target: np.ndarray, job: Job) -> AlignmentArrays:
    """Score-only rows of pairs that saturated 16-bit lanes, by the pair engine's 32-bit
    path (not :func:`run_pairs`, which would send them to the striped 16-bit one again)."""
    return _run_pairs_cpu(queries, targets, pair_query, pair_target, job.scoring, job.mode,
                          False, job.cigar_style, job.clip, job.progress,
                          job.traceback_memory)


def _group_profiles(targets: EncodedSequences, groups: cpu_search.LaneLayout, job: Job,
                    tuning: config.Settings) -> tuple[np.ndarray, np.ndarray] | None:
    """The 8-bit profiles of every group of ``groups``, built once for a whole search (on
    numba's threads, a chunk of groups each), or None where the scoring takes no 8-bit
    pass or they would take more than the ``cpu_profile_bytes`` setting (each work item
    then builds its groups' own)."""
    sizes = groups.group_columns * len(job.scoring.alphabet) * cpu_search.GROUP
    if not _lanes_fit(job.scoring, bits=8) or int(sizes.sum()) > tuning.cpu_profile_bytes:
        return None
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    profiles = np.empty(int(offsets[-1]), np.int8)
    threads = numba.get_num_threads()
    work = [partial(_profiles_item, job.scoring.matrix, targets.codes, targets.offsets,
                    chunk[0], chunk[-1] + 1, *groups.arrays(), profiles, offsets)
            for chunk in np.array_split(np.arange(len(sizes)), max(1, min(len(sizes),
                                                                          threads)))
            if len(chunk)]
    run_interruptible(work, threads, lambda done: None, tuning.progress_interval)
    return profiles, offsets


def _profiles_item(*args) -> None:
    """:func:`run_interruptible`'s work item of :func:`_group_profiles` (its control block
    unused: a profile is built in a moment)."""
    cpu_search.fill_group_profiles(*args[:-2])


def local_search_scores(queries: EncodedSequences, targets: EncodedSequences, first: int,
                        count: int, groups: cpu_search.LaneLayout, job: Job,
                        tuning: config.Settings,
                        profiles: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Local scores (int32, ``count`` x targets) of queries ``first`` to ``first + count``
    against every target: the lanes kernel (:mod:`gpualign_df.kernels.cpu_search`; 8-bit
    lanes first where the scoring allows, then 16-bit) over the target ``groups``, on
    numba's threads, then the pairs whose 16-bit lanes saturated scored again by the pair
    engine (32-bit). ``profiles``: the groups' 8-bit profiles (:func:`_group_profiles`),
    or None (each work item builds its own). Rows or columns of null sequences hold 0."""
    scores = np.zeros((count, len(targets)), np.int32)
    rows = np.arange(first, first + count, dtype=np.int64)
    threads = numba.get_num_threads()
    # a few items per thread, costliest first: group chunks, and chunks of queries of
    # about equal residues where the groups are too few to share out
    group_chunks = [(chunk[0], chunk[-1] + 1) for chunk in np.array_split(
        np.arange(len(groups)), max(1, min(len(groups), 4 * threads))) if len(chunk)]
    query_chunks = max(1, min(count, -(-4 * threads // max(1, len(group_chunks)))))
    residues = np.cumsum(np.where(queries.valid, queries.lengths, 0)[first:first + count])
    cuts = np.searchsorted(residues, residues[-1] * np.arange(1, query_chunks) / query_chunks)
    bounds = np.unique(np.concatenate([[0], cuts + 1, [count]])).clip(0, count)
    items = [(int(residues[b - 1] - (residues[a - 1] if a else 0))
              * int(groups.group_columns[group_first:group_stop].sum()),
              group_first, group_stop, a, b)
             for group_first, group_stop in group_chunks
             for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    shared = profiles or (np.zeros(0, np.int8), np.zeros(0, np.int64))
    scheme = (*groups.arrays(), job.scoring.matrix, job.scoring.gap_open,
              job.scoring.gap_extend, _lanes_fit(job.scoring, bits=8), tuning.cpu_rescue_share,
              *shared)
    work = [partial(cpu_search.search_groups, queries.codes, queries.offsets, rows[a:b],
                    targets.codes, targets.offsets, group_first, group_stop, *scheme,
                    scores[a:b])
            for _, group_first, group_stop, a, b in sorted(items, reverse=True)]
    cells = int(queries.lengths[first:first + count].sum()) * targets.residues
    _run_counted(work, threads, cells, job.progress, tuning.progress_interval)
    saturated = np.argwhere(scores >= cpu_search.CEILING)
    if len(saturated):
        again = _scores_32bit(queries, targets, saturated[:, 0] + first, saturated[:, 1], job)
        scores[saturated[:, 0], saturated[:, 1]] = again.score
    return scores


def _lanes_fit(scoring: Scoring, bits: int = 16) -> bool:
    """Whether the search lanes of ``bits`` bits can score with ``scoring``
    (:func:`gpualign_df.kernels.cpu_search.fits`)."""
    return cpu_search.fits(scoring.matrix, scoring.gap_open, scoring.gap_extend, bits=bits)


def _run_counted(work: list, threads: int, cells: int, progress, interval: float) -> None:
    """:func:`run_interruptible` over ``work`` with a bar of ``cells`` cells (of its own,
    or counted on ``progress``'s), full at the end; on this thread for a small job."""
    with progress_bar(cells, progress) as bar:
        run_interruptible(work, threads, lambda done: bar.update(done - bar.n), interval,
                          inline=cells <= config.settings().small_job_cells)
        bar.update(cells - bar.n)


def progress_bar(cells: int, progress: "bool | None | tqdm"):
    """A DP-cell progress bar on stderr (a context manager): forced on/off by ``progress``,
    else shown once a job runs longer than ``progress_delay`` seconds. ``progress`` may
    also be the bar of an enclosing job (a search's blocks, streamed batches): its total
    grows by ``cells`` and the work counts on it, so a long job made of short parts still
    shows one moving bar. A bar that cannot show (off, or the delay's and a job of at most
    ``small_job_cells`` cells, done long before it) is a :class:`_Quiet` one, which costs
    nothing to make."""
    if progress is False or isinstance(progress, _Quiet) or (
            progress is None and cells <= config.settings().small_job_cells):
        return _Quiet()
    if progress is None or isinstance(progress, (bool, np.bool_)):
        return tqdm(total=cells, unit="cell", unit_scale=True,
                    delay=0 if progress else config.settings().progress_delay,
                    disable=progress is False, leave=False)
    return _Enclosing(progress, cells)


class _Quiet(contextlib.AbstractContextManager):
    """A bar that shows nothing and only counts (``n``), as a disabled tqdm bar does."""

    total = None
    disable = True

    def __init__(self) -> None:
        self.n = 0

    def __exit__(self, *exc_info: object) -> None:
        return None

    def update(self, step: int) -> None:
        self.n += step


class _Enclosing(contextlib.AbstractContextManager):
    """A part's view of its enclosing job's bar: the part's cells join the total, and the
    part's own count (``n``) starts at 0, as a bar of its own would."""

    def __init__(self, bar: "tqdm | _Enclosing", cells: int) -> None:
        bar = bar._bar if isinstance(bar, _Enclosing) else bar
        self._bar = bar
        self.n = 0
        if bar.total is not None and not bar.disable:
            bar.total = max(bar.total, bar.n + cells)

    def __enter__(self) -> "_Enclosing":
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def update(self, step: int) -> None:
        if step > 0:
            self.n += step
            self._bar.update(step)


def _run_pairs_cpu(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
                   pair_target: np.ndarray, scoring: Scoring, mode: Mode, traceback: bool,
                   cigar_style: str, clip: str | None, progress: bool | None,
                   traceback_memory: int | None = None) -> AlignmentArrays:
    """The CPU engine: lane groups for short pairs, one pair per thread for the rest (across
    SIMD lanes, :mod:`gpualign_df.kernels.cpu_wave`, where both sequences have at least
    ``cpu_wave_min_length`` residues), and a linear-space traceback for pairs whose 4-bit
    matrix exceeds their traceback budget (:func:`traceback_budget` of
    ``traceback_memory``; :mod:`gpualign_df.kernels.cpu_linear`).

    The work runs on worker threads (the kernels release the GIL) while the calling thread
    updates the progress bar and stays responsive: Ctrl-C (or any error) sets the kernels'
    stop flag, which they check once per DP row or lane group, so even one long pair stops
    within a fraction of a second."""
    tuning = config.settings()
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
    lane_fit = cpu_lanes.lane_eligible(
        scoring.max_abs_score(int(query_lengths.max(initial=0)),
                              int(target_lengths.max(initial=0))), scoring.gap_open) \
        & (query_lengths > 0) & (target_lengths > 0) \
        & (query_lengths <= tuning.lane_max_length) \
        & (target_lengths <= tuning.lane_max_length) & valid

    def in_lanes_of(eligible: np.ndarray, threads: int) -> np.ndarray:
        """The pairs of ``eligible`` that fill lane groups, ``threads`` sharing them."""
        return lanes_beat_alone(
            lanes_worth_filling(eligible, query_lengths, target_lengths, tuning.lane_min_fill),
            query_lengths, target_lengths, threads, tuning.lane_speedup,
            tuning.cpu_wave_min_length)

    def memory_choices(available: int) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(linear-space block rows, pairs in lanes, threads, a pair's traceback budget)
        with ``available`` bytes."""
        rows = linear_block_rows(query_lengths, target_lengths, valid, traceback,
                                 traceback_memory, available, tuning)
        in_lanes = in_lanes_of(lane_fit & (rows == 0), numba.get_num_threads())
        threads = cpu_threads(query_lengths, target_lengths, order[~in_lanes[order]],
                              traceback, tuning, rows, available)
        return rows, in_lanes, threads, host_traceback_budget(traceback_memory, available,
                                                              tuning)

    # A small job (at most small_job_cells cells) runs on this thread, one item after
    # another. Where its largest traceback matrix fits the budget of the free memory (one
    # system call; never more than the available memory, which psutil parses
    # /proc/meminfo for), no pair takes the linear space and the job holds one matrix at
    # a time: it plans for one thread, without the memory choices' passes over its pairs.
    settled = False
    if out.cells <= tuning.small_job_cells:
        budget = host_traceback_budget(traceback_memory, free_host_memory(), tuning)
        largest = int(full_traceback_bytes(query_lengths[valid], target_lengths[valid]).max(
            initial=0)) if traceback else 0
        if 0 < budget and largest <= budget:
            threads, rows = 1, np.zeros(pairs, np.int64)
            in_lanes_all = in_lanes_of(lane_fit, threads)
            settled = True
    if not settled:
        rows, in_lanes_all, threads, budget = memory_choices(available_host_memory())
    linear = rows > 0
    # A linear-space pair counts its cells twice on the bar: the fill, then the recomputed
    # blocks topped up to its cells (cpu_linear.align_pair_linear), never more.
    bar_cells = cells * np.where(linear, 2, 1)
    op_counts = np.zeros(pairs, dtype=np.int64)
    ops_chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    started = time.perf_counter()
    free = mode.flags()
    done_before = 0
    with progress_bar(int(bar_cells[valid].sum()), progress) as bar:
        for batch in _batches(ops_sizes if traceback else np.ones(pairs, np.int64), order,
                              tuning):
            batch_offsets = np.zeros(pairs, dtype=np.int64)
            batch_offsets[batch] = np.cumsum(ops_sizes[batch]) - ops_sizes[batch]
            ops = np.empty(int(ops_sizes[batch].sum()) if traceback else 0, dtype=np.uint8)
            scheme = (scoring.matrix, scoring.concrete, scoring.gap_open, scoring.gap_extend,
                      mode.code, *free)
            outputs = (batch_offsets, ops, out.score, query_start, out.query_end, target_start,
                       out.target_end, op_counts)
            arguments = (*scheme, traceback, *outputs)
            in_lanes, in_linear = in_lanes_all[batch], linear[batch]
            work = [partial(cpu_lanes.align_lane_groups, queries.codes, queries.offsets,
                            targets.codes, targets.offsets, pair_query, pair_target, groups,
                            *arguments, tuning.lane_narrow_score_limit)
                    for groups in _split_groups(
                        lane_groups(batch[in_lanes], query_lengths, target_lengths), threads)]
            work += [partial(cpu_linear.align_pairs_linear, queries.codes, queries.offsets,
                             targets.codes, targets.offsets, pair_query, pair_target, chunk,
                             rows, *scheme, *outputs)
                     for chunk in _split_by_cells(batch[in_linear], bar_cells, threads,
                                                 tuning.cpu_chunk_cells)]
            alone = batch[~in_lanes & ~in_linear]
            # across the lanes where long enough, and where the wavefront's nibbles (a
            # little more than the full matrix's) keep to the pair's traceback budget
            waved = (np.minimum(query_lengths[alone], target_lengths[alone])
                     >= tuning.cpu_wave_min_length) & (not traceback or (
                cpu_wave.traceback_bytes(query_lengths[alone], target_lengths[alone])
                <= budget))
            for kernel, chosen in ((cpu_wave.align_pairs_wave, alone[waved]),
                                   (cpu.align_pairs, alone[~waved])):
                work += [partial(kernel, queries.codes, queries.offsets, targets.codes,
                                 targets.offsets, pair_query, pair_target, chunk, *arguments)
                         for chunk in _split_by_cells(chosen, cells, threads,
                                                     tuning.cpu_chunk_cells)]
            batch_cells = int(bar_cells[batch].sum())
            run_interruptible(work, threads, lambda done: bar.update(done - bar.n + done_before),
                              tuning.progress_interval,
                              inline=batch_cells <= tuning.small_job_cells)
            done_before += batch_cells
            bar.update(done_before - bar.n)
            if traceback:
                ops_chunks.append((batch, batch_offsets[batch], ops))
    if traceback:
        out.query_start, out.target_start = query_start, target_start
        _assemble_cigars(out, ops_chunks, op_counts, query_lengths, cigar_style, clip)
    out.seconds = time.perf_counter() - started
    return out


def run_interruptible(work: list[Callable[[np.ndarray, int], None]], threads: int,
                      on_progress: Callable[[int], None], interval: float,
                      inline: bool = False) -> None:
    """Run ``work(control, slot)`` items on at most ``threads`` worker threads while this
    thread reports progress every ``interval`` seconds; ``inline``: one after another on
    this thread, progress reported at the end (for a small job, which would spend longer
    handing items to threads than working, and ends long before Ctrl-C needs a worker to
    stop).

    ``control`` is one shared ``int64`` array: ``control[0]`` is the stop flag, and item
    ``k`` adds the cells it has done to ``control[1 + k]``. ``on_progress`` receives the total
    of cells done. On an exception in this thread (Ctrl-C) or in an item, the stop flag is
    set, the items still running are waited for (they stop within one DP row or lane group),
    no other item starts, and the exception propagates. Every call owns its flag and its
    items, so concurrent calls from several threads are independent; the threads are the
    process's, kept between calls (:func:`worker_pool`): starting them costs about a
    millisecond a job, as much as a small job's work. A call made on one of those threads
    (an item that aligns) runs its items inline, never waiting on the threads it holds.
    """
    if not work:
        return
    control = np.zeros(1 + len(work), dtype=np.int64)
    if inline or getattr(_WORKER, "busy", False):
        for slot, item in enumerate(work):
            item(control, slot)
        on_progress(int(control[1:].sum()))
        return
    items = iter(enumerate(work))
    taking = threading.Lock()

    def runner() -> None:
        """Take the job's next item until none is left or the stop flag is set."""
        _WORKER.busy = True
        try:
            while control[0] == 0:
                with taking:
                    taken = next(items, None)
                if taken is None:
                    return
                slot, item = taken
                item(control, slot)
        finally:
            _WORKER.busy = False

    count = max(1, min(threads, len(work)))
    pool = worker_pool(count)
    futures = [pool.submit(runner) for _ in range(count)]
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=interval, return_when=FIRST_EXCEPTION)
            on_progress(int(control[1:].sum()))
            for future in done:
                future.result()
    except BaseException:
        control[0] = 1
        for future in futures:
            future.cancel()
        wait(futures)
        raise


#: Whether this thread is running a job's items (see :func:`run_interruptible`).
_WORKER = threading.local()
#: The process's kept worker pool: [(process id, threads, executor)] (:func:`worker_pool`).
_POOL: list = []
_POOL_LOCK = threading.Lock()


def worker_pool(threads: int) -> ThreadPoolExecutor:
    """The CPU engine's worker threads, kept for the process's jobs: a pool of at least
    ``threads`` (and of every core), started as items first need them. A forked child
    (whose parent's threads did not come with it) and a call for more threads get a new
    pool; the one it replaces ends once its items are done.

    Examples
    --------
    >>> worker_pool(2) is worker_pool(1)
    True
    """
    process = os.getpid()
    with _POOL_LOCK:
        if _POOL and _POOL[0][0] == process and _POOL[0][1] >= threads:
            return _POOL[0][2]
        if _POOL and _POOL[0][0] == process:
            _POOL[0][2].shutdown(wait=False)
        size = max(threads, os.cpu_count() or 1)
        pool = ThreadPoolExecutor(size, thread_name_prefix="gpualign")
        _POOL[:] = [(process, size, pool)]
        return pool


def _split_groups(groups: np.ndarray, threads: int) -> list[np.ndarray]:
    """Lane groups (costliest first) in chunks, a few per thread so threads that finish
    early take more."""
    chunk = max(1, len(groups) // (threads * 16))
    return [groups[start:start + chunk] for start in range(0, len(groups), chunk)]


def _split_by_cells(order: np.ndarray, cells: np.ndarray, threads: int,
                    fewest: int) -> list[np.ndarray]:
    """Pairs (longest first) in runs of about a 16th of a thread's share of the cells, at
    least ``fewest`` cells (the ``cpu_chunk_cells`` setting): a long pair alone, many
    short ones together (a thread call costs microseconds).

    Examples
    --------
    >>> [len(run) for run in _split_by_cells(np.arange(25), np.full(25, 420_000), 16,
    ...                                      1_000_000)]
    [3, 2, 3, 2, 2, 3, 2, 3, 2, 2, 1]
    >>> [len(run) for run in _split_by_cells(np.arange(25), np.full(25, 420_000), 16, 1)]
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    """
    if len(order) == 0:
        return []
    cumulative = np.cumsum(np.maximum(cells[order], 1))
    share = max(float(cumulative[-1]) / (threads * 16), float(fewest))
    if cumulative[-1] <= share:  # (one run: a small job's)
        return [order]
    cuts = np.searchsorted(cumulative, np.arange(share, float(cumulative[-1]), share))
    bounds = np.unique(np.concatenate(([0], cuts + 1, [len(order)])))
    bounds = bounds[bounds <= len(order)]
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def available_host_memory() -> int:
    """Bytes of host memory available now (psutil: free plus reclaimable caches)."""
    return int(psutil.virtual_memory().available)


def free_host_memory() -> int:
    """Bytes of host memory free now, not counting reclaimable caches (never more than
    :func:`available_host_memory`; one system call, no /proc parsing); 0 where the
    system does not tell."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 0


def host_budget(tuning: config.Settings, available: int | None = None) -> int:
    """Bytes a job may use: ``host_memory_share`` of the memory available now (or of
    ``available`` bytes)."""
    if available is None:
        available = available_host_memory()
    return int(available * tuning.host_memory_share)


def budget_for(need: int, tuning: config.Settings) -> int:
    """The :func:`host_budget` that judges ``need`` bytes now: the free memory's share
    (one system call; the free memory is never more than the available one), or, only
    where ``need`` exceeds it, the available memory's (which parses /proc/meminfo)."""
    budget = host_budget(tuning, free_host_memory())
    return budget if need <= budget else host_budget(tuning)


def within_host_budget(need: int, tuning: config.Settings) -> bool:
    """Whether ``need`` bytes fit the :func:`host_budget` now (:func:`budget_for`)."""
    return need <= budget_for(need, tuning)


def host_traceback_budget(traceback_memory: int | None, available: int,
                          tuning: config.Settings) -> int:
    """Bytes one pair's traceback may take on the host: its :func:`traceback_budget`, and
    at most the job's :func:`host_budget`."""
    return min(traceback_budget(traceback_memory, available, tuning),
               host_budget(tuning, available))


def linear_block_rows(query_lengths: np.ndarray, target_lengths: np.ndarray, valid: np.ndarray,
                      traceback: bool, traceback_memory: int | None, available: int,
                      tuning: config.Settings) -> np.ndarray:
    """Rows per recomputed block of each pair of a CPU job that takes the linear-space
    traceback, 0 for the others (int64 array).

    A pair takes it where its full 4-bit matrix exceeds its traceback budget
    (:func:`traceback_budget`), which on the host is also at most the job's
    :func:`host_budget`: a matrix the job cannot hold is traced back in linear space rather
    than refused. The rows follow :func:`gpualign_df.kernels.cpu_linear.block_rows`.
    """
    budget = host_traceback_budget(traceback_memory, available, tuning)
    linear = valid & needs_linear_space(query_lengths, target_lengths, budget) if traceback \
        else np.zeros(len(valid), dtype=bool)
    rows = np.zeros(len(valid), dtype=np.int64)
    rows[linear] = cpu_linear.block_rows(query_lengths[linear], target_lengths[linear], budget,
                                         tuning.linear_min_block_rows)
    return rows


def gib(size: float) -> str:
    """Bytes as GiB for messages: ``gib(3 << 29) == "1.5 GiB"``."""
    return f"{size / 2**30:.1f} GiB"


def cpu_threads(query_lengths: np.ndarray, target_lengths: np.ndarray, one_pair: np.ndarray,
                traceback: bool, tuning: config.Settings, block_rows: np.ndarray | None = None,
                available: int | None = None) -> int:
    """Worker threads of a CPU job: numba's thread count, fewer when the tracebacks of the
    pairs that run one per thread (each thread holds one at a time) would not fit the host
    budget together; refuses, before any work, a pair whose traceback alone does not fit.

    ``block_rows`` (:func:`linear_block_rows`) marks the pairs traced back in linear space
    (nonzero: their rows per block), whose memory is
    :func:`gpualign_df.kernels.cpu_linear.linear_bytes`; the others hold their full 4-bit
    matrix. ``available``: the host memory available (default: now)."""
    threads = numba.get_num_threads()
    if not traceback or len(one_pair) == 0:
        return threads
    m, n = query_lengths[one_pair], target_lengths[one_pair]
    rows = np.zeros(len(one_pair), np.int64) if block_rows is None else block_rows[one_pair]
    linear = rows > 0
    memory = np.where(linear, cpu_linear.linear_bytes(m, n, np.maximum(rows, 1)),
                      full_traceback_bytes(m, n))
    worst = int(np.argmax(memory))
    largest = int(memory[worst])
    budget = host_budget(tuning, available)
    if largest > budget:
        m, n, rows = int(m[worst]), int(n[worst]), int(rows[worst])
        limit = (f"more than the {gib(budget)} this job may use ({tuning.host_memory_share:.0%} "
                 f"of the memory available)")
        if not linear[worst]:
            raise HostMemoryError(
                f"the pair of lengths {m} x {n} needs {gib(largest)} ({largest:,} bytes) of "
                f"host memory for its traceback matrix, {limit}: align it with a smaller "
                f"traceback_memory (a linear-space traceback), with traceback=False (score "
                f"and end coordinates), or on a machine with more memory")
        least = cpu_linear.least_memory_rows(np.array([m]), np.array([n]))
        fewest = int(cpu_linear.linear_bytes(np.array([m]), np.array([n]), least)[0])
        if fewest <= budget:  # the traceback_memory given made the checkpoint rows many
            raise HostMemoryError(
                f"the pair of lengths {m} x {n} needs {gib(largest)} ({largest:,} bytes) of "
                f"host memory for its linear-space traceback in blocks of {rows} rows (all "
                f"that its traceback_memory allows), {limit}: give a traceback_memory of at "
                f"least {int(least[0]) * ((n + 1) // 2):,} bytes (fewer checkpoint rows), or "
                f"align it with traceback=False (score and end coordinates)")
        raise HostMemoryError(
            f"the pair of lengths {m} x {n} needs {gib(fewest)} ({fewest:,} bytes) of host "
            f"memory for its traceback even in linear space, {limit}: align it with "
            f"traceback=False (score and end coordinates), or on a machine with more memory")
    return max(1, min(threads, budget // max(largest, 1)))


def lanes_worth_filling(eligible: np.ndarray, query_lengths: np.ndarray,
                        target_lengths: np.ndarray, min_fill: float) -> np.ndarray:
    """``eligible`` (pairs the lanes can take) less its costliest pairs while the costliest
    lane group's worth of pairs would fill under ``min_fill`` of the cells that group costs
    (lanes x longest query x longest target): a pair far costlier than the rest runs faster
    alone than with lanes kept waiting for it.

    Examples
    --------
    >>> many = np.full(40, 100)
    >>> lanes_worth_filling(np.ones(41, bool), np.r_[900, many], np.r_[800, many],
    ...                     0.2).tolist()[:3]
    [False, True, True]
    >>> lanes_worth_filling(np.ones(2, bool), np.array([90, 100]), np.array([80, 100]),
    ...                     0.2).tolist()
    [False, False]
    """
    chosen = np.flatnonzero(eligible)
    lanes = cpu_lanes.LANES
    if len(chosen) == 0:
        return eligible.copy()
    if len(chosen) < min_fill * lanes and (query_lengths[chosen] > 0).all() and (
            target_lengths[chosen] > 0).all():  # k pairs fill k lanes of a group's box at most
        return np.zeros_like(eligible)
    cells = query_lengths.astype(np.int64) * target_lengths
    if len(chosen) >= lanes:   # the usual case: the costliest pairs fill their group
        head = chosen[np.argpartition(-cells[chosen], lanes - 1)[:lanes]]
        box = int(query_lengths[head].max()) * int(target_lengths[head].max())
        if cells[head].sum() >= min_fill * lanes * box:
            return eligible.copy()
    chosen = chosen[np.argsort(-cells[chosen], kind="stable")]
    # the group of the lanes' worth of costliest pairs left after peeling k, for every k
    # at once (the list padded with empty pairs so every window is whole)
    padded = [np.concatenate([values[chosen].astype(np.int64), np.zeros(lanes - 1, np.int64)])
              for values in (query_lengths, target_lengths, cells)]
    windows = [sliding_window_view(values, lanes) for values in padded]
    box = windows[0].max(axis=1) * windows[1].max(axis=1)
    filled = windows[2].sum(axis=1) >= min_fill * lanes * box
    peeled = int(np.argmax(filled)) if filled.any() else len(chosen)
    out = eligible.copy()
    out[chosen[:peeled]] = False
    return out


def lanes_beat_alone(in_lanes: np.ndarray, query_lengths: np.ndarray,
                     target_lengths: np.ndarray, threads: int, speedup: float,
                     wave_min_length: int) -> np.ndarray:
    """``in_lanes``, or no pair at all where every one of its pairs could run alone across
    the lanes (both lengths at least ``wave_min_length``) and would end sooner so: the
    groups cost their lanes times their longest query and target, shared by ``threads``
    but a group never split; alone, each pair its cells times ``speedup`` (how many
    times faster the lanes fill a cell), a pair never split either.

    Examples
    --------
    >>> pairs = np.ones(25, bool)
    >>> q, t = np.full(25, 600), np.full(25, 700)
    >>> bool(lanes_beat_alone(pairs, q, t, 16, 1.8, 32).any())  # one group: one thread of 16
    False
    >>> bool(lanes_beat_alone(np.ones(125, bool), np.full(125, 600), np.full(125, 700), 2, 1.8,
    ...                       32).all())
    True
    """
    chosen = np.flatnonzero(in_lanes)
    if len(chosen) == 0 or np.minimum(query_lengths[chosen],
                                      target_lengths[chosen]).min() < wave_min_length:
        return in_lanes
    groups = lane_groups(chosen, query_lengths, target_lengths)
    filled = groups >= 0
    longest_query = np.where(filled, query_lengths[groups], 0).max(axis=1)
    longest_target = np.where(filled, target_lengths[groups], 0).max(axis=1)
    boxes = cpu_lanes.LANES * longest_query.astype(np.int64) * longest_target
    cells = query_lengths[chosen].astype(np.int64) * target_lengths[chosen]
    lanes = max(float(boxes.sum()) / threads, float(boxes.max()))
    alone = speedup * max(float(cells.sum()) / threads, float(cells.max()))
    return in_lanes if lanes <= alone else np.zeros_like(in_lanes)


def lane_groups(pairs: np.ndarray, query_lengths: np.ndarray,
                target_lengths: np.ndarray) -> np.ndarray:
    """Pack pairs of similar lengths into groups of ``cpu_lanes.LANES`` (-1 pads), costliest
    group first."""
    lanes = cpu_lanes.LANES
    pairs = pairs[np.lexsort((query_lengths[pairs], target_lengths[pairs]))]
    groups = np.full((len(pairs) + lanes - 1) // lanes * lanes, -1, dtype=np.int64)
    groups[:len(pairs)] = pairs
    return groups.reshape(-1, lanes)[::-1].copy()


def gatk_pairs(queries: EncodedSequences, targets: EncodedSequences, pair_query: np.ndarray,
               pair_target: np.ndarray, job: Job, traceback: bool) -> AlignmentArrays:
    """Pairs aligned by GATK's aligner (:mod:`gpualign_df.kernels.gatk`, the job's
    ``overhang`` strategy): the query is GATK's alternate, the target its reference.

    Columns: ``score`` the end cell's (the alternate's length times ``match`` where it is
    found whole in the reference), ``offset`` GATK's alignment offset, the CIGAR GATK's
    (``M`` elements as ``=``/``X`` runs unless ``cigar_style="M"``), coordinates the part
    of each sequence the CIGAR covers (clamped to the reference under ``"ignore"``, whose
    overhangs may run past its ends), statistics of the CIGAR (a position past the
    reference's ends is a mismatch). Without traceback: score and the coordinates' ends.
    A pair with an empty sequence is refused (GATK aligns non-empty sequences only), and so
    is a job whose largest pair's traceback matrix (4 bytes a cell: GATK's traceback
    jumps whole gaps, so a cell keeps its gap's length) exceeds ``traceback_memory`` or,
    without it, the host budget. Pairs run in groups of ``gatk.LANES`` alike in size on
    worker threads, side by side in vector lanes (:func:`gatk.fill_lanes`) where the
    group's steps fit a thread's share of that budget, else one at a time.
    """
    valid = queries.valid[pair_query] & targets.valid[pair_target]
    q_lengths, t_lengths = queries.lengths[pair_query], targets.lengths[pair_target]
    empty = np.flatnonzero(valid & ((q_lengths == 0) | (t_lengths == 0)))
    if len(empty):
        k = int(empty[0])
        side = "query" if q_lengths[k] == 0 else "target"
        raise ValueError(f"GATK's aligner (overhang={job.overhang!r}) aligns non-empty "
                         f"sequences only: the {side} of query row "
                         f"{plain_label(queries.labels[pair_query[k]])!r} is empty")
    need = 4 * (q_lengths + 1) * (t_lengths + 1) * valid
    budget = job.traceback_memory if job.traceback_memory is not None else budget_for(
        int(need.max(initial=0)), config.settings())
    if len(need) and need.max() > budget:
        k = int(need.argmax())
        label = plain_label(queries.labels[pair_query[k]])
        raise HostMemoryError(
            f"GATK's aligner (overhang={job.overhang!r}) keeps a pair's whole traceback "
            f"matrix, 4 bytes a cell (a gap's length): query row {label!r} "
            f"({q_lengths[k]:,} x {t_lengths[k]:,}) needs {int(need[k]):,} bytes, more than "
            f"the {int(budget):,} a pair may take (traceback_memory)")
    pairs = len(pair_query)
    values = np.zeros((len(GATK_COLUMNS), pairs), np.int32)
    columns = dict(zip(GATK_COLUMNS, values))
    texts = [b""] * pairs
    order = np.flatnonzero(valid)
    order = order[np.lexsort((-q_lengths[order], -t_lengths[order]))]  # similar pairs together
    groups = [order[start:start + gatk.LANES] for start in range(0, len(order), gatk.LANES)]
    threads = max(1, numba.get_num_threads())
    lanes = [len(group) > 1 and _lane_bytes(q_lengths[group], t_lengths[group])
             <= budget // threads for group in groups]
    largest = max([_lane_bytes(q_lengths[group], t_lengths[group]) if in_lanes
                   else int(need[group].max()) for group, in_lanes in zip(groups, lanes)]
                  or [1])
    threads = max(1, min(threads, budget // max(largest, 1)))

    def item(group: np.ndarray, in_lanes: bool):
        def run(control: np.ndarray, slot: int) -> None:
            if not control[0]:
                _gatk_group(queries, targets, pair_query[group], pair_target[group], group,
                            in_lanes, job, values, texts)
            control[1 + slot] += int((q_lengths[group] * t_lengths[group]).sum())
        return run

    cells = int((q_lengths * t_lengths)[valid].sum())
    _run_counted([item(group, in_lanes) for group, in_lanes in zip(groups, lanes)], threads,
                 cells, job.progress, config.settings().progress_interval)
    out = AlignmentArrays(valid=valid, score=columns["score"], query_end=columns["query_end"],
                          target_end=columns["target_end"], offset=columns["offset"])
    if traceback:
        out.query_start, out.target_start = columns["query_start"], columns["target_start"]
        out.cigar_chars = np.frombuffer(b"".join(texts), np.uint8).copy()
        out.cigar_offsets = np.zeros(pairs + 1, np.int64)
        np.cumsum([len(text) for text in texts], out=out.cigar_offsets[1:])
        out.stats = {name: columns[name] for name in ("matches", "mismatches", "gap_opens",
                                                      "gaps", "length")}
    out.cells = cells
    return out


#: Columns of :func:`gatk_pairs`, in the order :func:`gatk.row_of` fills them.
GATK_COLUMNS = ("score", "query_start", "query_end", "target_start", "target_end", "offset",
                "matches", "mismatches", "gap_opens", "gaps", "length")


def _lane_bytes(query_lengths: np.ndarray, target_lengths: np.ndarray) -> int:
    """Bytes of the steps of a :func:`gatk.fill_lanes` group of these pairs."""
    return 4 * gatk.LANES * (int(query_lengths.max()) + 1) * (int(target_lengths.max()) + 1)


def _gatk_group(queries: EncodedSequences, targets: EncodedSequences, query_rows: np.ndarray,
                target_rows: np.ndarray, rows: np.ndarray, in_lanes: bool, job: Job,
                values: np.ndarray, texts: list) -> None:
    """Pairs ``rows`` of :func:`gatk_pairs` (query and target ``query_rows`` /
    ``target_rows``): each found whole in its reference (``softclip``, ``ignore``) or run
    alone, one at a time; the others side by side in :func:`gatk.fill_lanes` lanes where
    ``in_lanes``. Their columns go to ``values[:, rows[k]]``, their CIGARs to
    ``texts[rows[k]]``."""
    scoring = job.scoring
    strategy = gatk.STRATEGIES[job.overhang]
    weights = (int(scoring.matrix[0, 0]), int(scoring.matrix[0, 1]), -scoring.gap_open,
               -scoring.gap_extend, strategy)
    alternates = [queries.codes[queries.offsets[row]:queries.offsets[row + 1]]
                  for row in query_rows]
    references = [targets.codes[targets.offsets[row]:targets.offsets[row + 1]]
                  for row in target_rows]
    m = max(len(reference) for reference in references)
    n = max(len(alternate) for alternate in alternates)
    elements = (np.empty(m + n + 4, np.int8), np.empty(m + n + 4, np.int32))
    described = (np.empty(m + n + 4, np.int8), np.empty(m + n + 4, np.int32))
    text = np.empty(2 * (m + n) + 8, np.uint8)
    merge = job.cigar_style == "M"

    def finish(k: int, result: tuple, ops_lengths: tuple) -> None:
        size = gatk.row_of(*result, *ops_lengths, references[k], alternates[k],
                           scoring.concrete, merge, *described, values, rows[k], text)
        texts[rows[k]] = text[:size].tobytes()

    lane = [k for k in range(len(rows)) if in_lanes and not (
        strategy in (gatk.SOFTCLIP, gatk.IGNORE)
        and gatk.last_occurrence(references[k], alternates[k]) >= 0)]
    if len(lane) > 1:
        reference = np.full((m, gatk.LANES), gatk.REFERENCE_PADDING, np.uint8)
        alternate = np.full((n, gatk.LANES), gatk.ALTERNATE_PADDING, np.uint8)
        reference_lengths = np.ones(gatk.LANES, np.int64)
        alternate_lengths = np.ones(gatk.LANES, np.int64)
        for slot, k in enumerate(lane):
            reference[:len(references[k]), slot] = references[k]
            alternate[:len(alternates[k]), slot] = alternates[k]
            reference_lengths[slot], alternate_lengths[slot] = (len(references[k]),
                                                                len(alternates[k]))
        column, bottom, back = gatk.lane_scratch(m, n)
        gatk.fill_lanes(reference, alternate, reference_lengths, alternate_lengths, *weights,
                        column, bottom, back)
        for slot, k in enumerate(lane):
            finish(k, gatk.walk_lane(slot, len(references[k]), len(alternates[k]), column,
                                     bottom, back, strategy, *elements), elements)
    alone = [k for k in range(len(rows)) if k not in lane or len(lane) < 2]
    if alone:
        work = gatk.scratch(m, n)
        for k in alone:
            finish(k, gatk.gatk_align(references[k], alternates[k], *weights, *work),
                   work[4:])


def _assemble_cigars(out: AlignmentArrays, ops_chunks, op_counts, query_lengths, cigar_style,
                     clip) -> None:
    """Gather every batch's ops into pair order and build CIGARs and statistics."""
    pairs = len(out.valid)
    total = int(op_counts.sum())
    ops = np.empty(total, dtype=np.uint8)
    op_offsets = np.zeros(pairs + 1, dtype=np.int64)
    np.cumsum(op_counts, out=op_offsets[1:])
    for batch, batch_offsets, batch_ops in ops_chunks:
        cpu.gather_ops(batch, batch_offsets, batch_ops, op_counts, op_offsets, ops)
    chars, offsets, matches, mismatches, gap_opens, gaps, length = cpu.build_cigars(
        ops, op_offsets, op_counts, out.valid, out.query_start, out.query_end,
        query_lengths.astype(np.int64), cigar_style == "M", clip == "soft")
    out.cigar_chars, out.cigar_offsets = chars, offsets
    out.stats = {"matches": matches, "mismatches": mismatches, "gap_opens": gap_opens,
                 "gaps": gaps, "length": length}
