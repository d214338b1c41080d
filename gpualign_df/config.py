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
    traceback_memory_share : float
        Share of the free memory of the engine that runs a pair (the host's available memory
        on the CPU, the device's free memory on the GPU) that one pair's traceback may take
        where the job gives no ``traceback_memory``
        (:func:`gpualign_df.engine.traceback_budget`). A pair whose 4-bit traceback matrix
        (``m * ceil(n / 2)`` bytes) is larger is traced back in linear space: checkpoint
        rows of the fill, then the traceback recomputed block by block (on the CPU,
        :mod:`gpualign_df.kernels.cpu_linear`): the same result, for at most twice the DP
        cells.
    linear_min_block_rows : int
        Rows at least per recomputed block of a linear-space traceback on the CPU, unless
        the pair's traceback memory allows fewer: fewer rows per block mean more checkpoint
        rows for the same work (:func:`gpualign_df.kernels.cpu_linear.block_rows`).
    stream_batch_pairs : int
        Pairs per batch when a job is streamed (:func:`gpualign_df.api.align_batches`, the
        command line writing to a file).
    stream_batch_cells : float
        DP cells per streamed batch (a batch holds at least one query's pairs).
    progress_interval : float
        Seconds between progress updates and Ctrl-C checks while an engine runs.
    cpu_wave_min_length : int
        A CPU pair that runs alone (not in a lane group, not in linear space) whose
        sequences both have at least this many residues is filled across SIMD lanes
        (:mod:`gpualign_df.kernels.cpu_wave`: a wavefront of 16 lanes of 4 rows down the
        query); shorter ones row by row, where the wavefront's group of 64 rows and its 15
        steps of ramp would cost more than it saves.
    auto_cpu_cells : float
        With ``backend="auto"``, a job from pandas or Python sequences of at most this
        many DP cells runs on the CPU engine even where a GPU is usable
        (:func:`gpualign_df.engine.small_job_engine`), for a host where the GPU's fixed
        cost per call exceeds such a job's time on the CPU. 0 (the default) keeps every job
        on the GPU: its small-batch path answers a call in less time than the CPU engine's
        own fixed cost, down to a single pair of a few dozen residues (BENCHMARKS.md).
    small_job_cells : int
        A CPU job (or batch) of at most this many DP cells runs on the calling thread
        (planned for that one thread where its traceback matrices fit their budget),
        and a job of at most this many cells makes no progress bar unless one is forced:
        starting threads and a bar would cost longer than such a job's work, which ends
        long before a bar would appear or Ctrl-C would need a worker to stop.
    cpu_chunk_cells : int
        Fewest DP cells of a CPU work item (a run of pairs that one thread takes at a
        time), but for a pair larger alone: items are about a 16th of a thread's share of
        the job, never smaller than this. An item costs a thread call, and the first items
        of a job each start a thread, which costs more than a small pair's work: a batch of
        25 pairs of 600 x 700 runs faster in 11 items of two or three pairs than in one
        item a pair.
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
    cpu_search_group_columns : int
        The CPU search's lanes hold targets back to back in groups of 64 lanes planned for
        at least this many columns (:func:`gpualign_df.kernels.cpu_search.lane_layout`).
    cpu_profile_bytes : int
        A CPU search builds its groups' 8-bit profiles once for all its queries where they
        take at most this many bytes (24 bytes a residue with a protein matrix), else each
        work item builds its own groups' profiles.
    cpu_rescue_share : int
        In the CPU search's 8-bit pass, a half group whose saturated targets hold at most
        ``1 / cpu_rescue_share`` of its lane columns rescores them one by one in 16 bits,
        else reruns its lanes in 16 bits.
    lane_min_fill : float
        A lane group costs its lanes times its longest query and target: where the costliest
        pairs would fill less than this share of their group's cells, the costliest pair
        goes one pair per thread instead (until the rest fill it), since an almost empty
        group is slower than its pairs alone.
    lane_speedup : float
        How many times faster the lane groups fill a cell than a pair alone across the
        lanes (:mod:`gpualign_df.kernels.cpu_wave`): pairs that could go either way fill
        lane groups only where those, on every thread, would end sooner
        (:func:`gpualign_df.engine.lanes_beat_alone`): a few long pairs in one group keep one
        thread busy while the others wait.
    encode_bytes_per_thread, encode_max_threads : int
        The encoding of host strings uses one thread per ``encode_bytes_per_thread`` bytes,
        at most ``encode_max_threads`` (threads kept for the process): a table lookup per
        byte, which a few threads share well for sequences of hundreds of kilobases, while
        more only take cores from the node's other processes.
    write_chunk_rows : int
        The text writers (:mod:`gpualign_df.io`) assemble and write the lines of a result
        frame in blocks of at most this many rows (at least 1), so that the strings of one
        block are in memory at a time; the bytes written do not depend on it.
    gpu_memory_share : float
        Share of the free device memory (CuPy's pool and the engine's cached buffers
        counted as free) that one GPU batch or search tile may use. Lower it to leave room
        for other work on the same GPU (cuDF frames of the caller, another process).
    search_resident_bytes : int or None
        Largest host database (residue codes and offsets) a GPU search copies to the device
        whole for the search (a prepared database's copy stays there for the next ones);
        a larger one goes to the device tile by tile, each tile's sequences for that tile
        (:mod:`gpualign_df.gpu.search`). None: half the memory a search may use
        (``gpu_memory_share`` of the free memory); 0 always streams.
    gpu_keep_bytes : int
        Freed device memory the engine's private stream-ordered allocator keeps for the next
        job instead of giving it back at each synchronization (used where cuDF routes CuPy
        through RMM's default resource; see :mod:`gpualign_df.gpu.memory`). Raise it where
        many small jobs run back to back; it is read when that allocator is first made, and
        a different value makes a new one.
    sort_by_length : bool
        Sort a GPU job's pairs by (target, query) length before forming warps of 32, so that
        a warp's threads do about the same work. Off only to measure what sorting gains.
    inter_max_cells : int
        Pairs with more DP cells than this run on the band GPU kernel (one warp per band of
        a pair's rows, :mod:`gpualign_df.gpu.long`) instead of one thread per pair: a
        thread-per-pair fill of a long pair would keep its whole warp waiting. Tests set 0
        to send every pair through the long-pair kernel.
    inter_small_cells, inter_min_pairs : int
        In a GPU job of fewer than ``inter_min_pairs`` pairs, pairs of more than
        ``inter_small_cells`` cells run on the band kernel too: one thread per pair cannot
        fill the GPU there, and a few threads working through hundreds of thousands of
        cells each would set the job's time.
    fill_16bit : bool or None
        Score-only GPU fills on packed 16-bit cells (two pairs per thread, ``*_s16x2`` DPX)
        where no value can leave 16 bits (:func:`gpualign_df.gpu.policy.fill_fits_16bit`).
        None: where DPX runs (sm_90 and newer); True/False: always/never (True runs the
        plain half-by-half form elsewhere, as tests do). Off by default: the 32-bit fill
        with strips of 16 rows is faster. Fills with traceback always use 32-bit cells.
    search_16bit : bool or None
        A local search's score pass on packed 16-bit cells (two database sequences per
        thread) where no cell can leave 16 bits
        (:func:`gpualign_df.gpu.policy.use_search_16bit`). None: where DPX runs;
        True/False: always/never (True runs the plain form elsewhere, as tests do).
    search_groups : tuple of (int, int) pairs
        Length classes of the grouped local search kernel
        (:func:`gpualign_df.kernels.search.group_search_kernel`), as (lanes, columns):
        database sequences of up to ``lanes * columns`` residues are scored by groups of
        ``lanes`` threads holding two sequences' columns in registers, each sequence in the
        smallest class that holds it; longer ones by the one-thread-per-pair kernel. Used
        where the 16-bit search is (``search_16bit``) and the letters' pair table fits
        shared memory; each class is one compiled kernel (a class every column: a
        sequence's pair pads fewer cells than with a class every second column, for twice
        the kernels to compile on a first search). Empty: never.
    search_table_copies : int or None
        Copies of the grouped search's pair table in a block's shared memory (1, 2, 4, ...
        up to 32; on a GPU more than one only where DPX runs, in dynamic shared memory, as
        many as fit): each lane reads copy ``lane % copies``, so a warp's scattered reads
        of the table meet fewer bank conflicts, at ``copies`` times the shared memory a
        block (a 40 KB table takes 160 KB at 4 copies, so one block an SM; see
        ``search_block_threads``). None: 4 where DPX runs, else 1 (under the simulator,
        where more copies only take longer to fill).
    search_block_threads : int or None
        Threads of a block of the grouped search kernel (a multiple of 32). A block loads
        the pair table once, and with copies of it a block is alone on its SM, so blocks
        are best large. None: with copies, as many threads as the kernel's registers a
        thread allow (the driver's figure, at most 1,024); with one copy 256 (two blocks
        an SM). Under the CUDA simulator a block is one warp.
    search_unroll : tuple of (int, int) pairs
        Query rows the grouped search kernel's step loop runs an iteration (1, 2 or 4), as
        (most columns a lane, rows): a length class takes the first pair whose columns hold
        its own, else 1. Unrolled, the rows' registers change roles by renaming instead of
        moves, and the loop's own work (the query row's read, the compare and branch) is
        shared; but more rows take more registers, and beyond 128 a thread only one block
        of 256 threads fits an SM instead of two (at 26 columns: 151 registers at 4 rows,
        124 at 2, from the offline sm_90 build).
    pair_group_fill : bool or None
        Local score-only fills of 1:1 pairs, and fills with traceback in every mode, on
        the grouped packed 16-bit kernel
        (:func:`gpualign_df.kernels.pairs16.pair_group_kernel`: a group of lanes per two
        pairs, query rows in registers, the targets streamed) where it is exact
        (:func:`gpualign_df.gpu.policy.pair_group_class`). None: where DPX runs;
        True/False: always/never (True runs the plain form elsewhere, as tests do).
    pair_groups : tuple of (int, int) pairs
        Its classes as (lanes, query rows a lane): a batch takes the smallest class whose
        ``lanes * rows`` holds its longest query (with traceback, of those of at most
        :data:`~gpualign_df.kernels.pairs16.TRACEBACK_ROWS` rows); one compiled kernel
        each. Empty: never.
    pair_group_registers : int or None
        The register cap a thread of the grouped kernel with traceback is compiled with
        (None: the compiler's choice). At 128 two blocks of 256 threads share an SM.
    pair_group_profile : bool or None
        The grouped kernel picks both halves' scores from the two targets' columns with
        one ``PRMT`` a cell (:func:`gpualign_df.gpu.policy.pair_group_profile`) where every
        query code is A, C, G or T and the mode keeps no padding rows above a query,
        instead of reading its shared table (a load and an address a cell). None: in
        fills without traceback (with traceback the fill's ALU pipe, which the ``PRMT``
        joins, is its busiest, and the table is as fast); True/False: in every such fill
        / never (tests of both forms, benchmarks).
    keyed_best : bool
        The GPU fills keep each row's running best as one int32 key (``H * 2**16 - j``)
        where scores and columns fit (:func:`gpualign_df.gpu.policy.keyed_best_fits`),
        fewer instructions per cell than a compare and two selects. False forces the
        compare-and-select form (tests of both forms, benchmarks).
    fill_strip_rows : int
        Query rows a thread of the inter-task fill keeps in registers: 8 (``STRIP_ROWS``)
        or 16. Sixteen halve the row-above traffic and per-column work per cell at the cost
        of registers; 8 is there to compare kernels and for GPUs with fewer registers.
    fill_max_registers : tuple of (int, int or None) pairs
        Register cap of the inter-task fill kernels by strip height, as ``(rows, cap)``
        pairs (cap None, or a height not listed: the compiler's choice). A cap lets more
        blocks share a multiprocessor; the defaults are the fastest measured caps (see
        BENCHMARKS.md). Ignored under the CUDA simulator.
    funnel_append : bool
        With DPX, append traceback bits by a funnel shift in inline PTX, which the
        optimizer keeps as one instruction per bit (from plain shifts it folds a cell's four
        appends into more instructions). Identical bits either way; False to compare.
    band_lanes : int
        Threads of one band of the long-pair (band) kernel, each holding 2, 4 or 8 query
        rows; a power of two up to 32. Tests lower it under the CUDA simulator so that
        small pairs take several bands.
    band_rows : tuple of (int or None, int, int) triples
        Query rows a lane of the band kernel holds, as ``(longest query below, score-only
        rows, traceback rows)``: the first triple whose bound exceeds the batch's longest
        query applies (None: any length). Fewer rows a lane shorten a step, which is what
        bounds a fill of a few pairs (its bands run one warp a scheduler), and give more
        bands; more rows do more work per instruction once the warps fill the GPU.
        Score-only rows are 2, 4 or 8, traceback rows 4 or 8 (the linear-space path keeps
        8).
    narrow_bands : float
        A score-only band fill whose bands (at the rows ``band_rows`` gives) all work at
        once and are fewer than this share of the GPU's warp schedulers takes 2 rows a lane:
        such a fill is bound by one band's step time, which fewer rows shorten (a short
        query against a long target, 10 kbp x 1 Mbp; not the other way round, whose chain
        of bands 2 rows would lengthen). 0: never.
    band_halves : bool
        A global score-only batch of few wide pairs (a narrow fill, ``narrow_bands``) runs
        each pair as two halves in one fill, the left half forward and the right half
        reversed, joined at the middle column (exact): twice the bands at work. A pair
        whose query is the longer side runs transposed (score only: the same score where
        the substitution matrix is symmetric), so that its long side is swept.
    band_windows : float
        A score-only batch of few pairs whose long side the mode frees at both ends (local;
        semi-global with both target ends free and neither query end, or the other way
        round) runs each pair as overlapping windows of its long side, as many as bring the
        bands at work to this many per warp scheduler. Windows overlap by the most residues
        of the long side that an alignment can span and still beat the trivial one, so the
        best window's end cell is the pair's (exact). 0: never.
    band_warps : float or None
        Persistent warps of a band fill per band that can work at once (a pair of ``n``
        columns has about ``n / (height + 32)`` bands sweeping it together): a warp
        launched beyond those waits for its band's turn polling, which takes issue slots
        from the working warps of its scheduler; too few leave a band waiting for a warp.
        None: as many warps as can be resident, at most one a band.
    split_traceback : float
        A long batch with traceback whose bands that can work at once are fewer than this
        many per warp scheduler of the GPU (four a multiprocessor; one under the CUDA
        simulator) fills in two passes (:mod:`gpualign_df.gpu.long`): a score-only pass
        along the bands' critical path, which keeps every band's bottom row and snapshots
        of its registers, then the traceback words in tiles of ``split_tile_steps`` steps
        that all run at once. Such a fill is bound by its bands' critical path, which the
        traceback's work would lengthen; a batch that fills the GPU, or whose bands are
        each one tile long, is faster in one pass.
        0: never split; tests force the split with a large value.
    split_tile_steps : int
        Steps of a band in one tile of a split traceback fill: a multiple of 32 (of
        ``band_lanes`` and 8); more steps, fewer snapshots and fewer, longer tiles.
    walk_lanes : int or None
        Threads of the traceback walk of one long pair (global and semi-global modes), which
        take a diagonal run that many cells at a time; 0: one thread, a cell at a time.
        None: 32 on a GPU, 0 under the CUDA simulator (whose threads are slow to
        synchronize; tests that check the run-taking walk there set a few lanes).
    walk_probes : int
        Stretches of ``walk_lanes`` diagonal cells such a walk reads at once (a cell a lane
        a stretch): that many reads in flight a pass, and up to that many stretches taken
        per pass along a long diagonal run (at most 32).
    small_batch_pairs, small_batch_cells : int
        A GPU job of host-encoded pairs (pandas, numpy) of at most ``small_batch_pairs``
        pairs and ``small_batch_cells`` cells in all, none longer than ``inter_max_cells``,
        runs as one small batch (:mod:`gpualign_df.gpu.small`): one upload, one launch that
        fills, walks and writes the CIGAR of each pair in a block of its own, one copy
        back (two for long CIGARs). 0 pairs: never.
    small_batch_threads : int
        Most threads of a small batch's block (at most 512; a multiple of 32 leaves no
        lane of a warp idle), each computing a strip of ``small_batch_rows`` query rows a
        pass: fewer threads, more passes.
    small_batch_columns : int
        Columns a thread of a small batch's block computes a step, 1 to 4 (more: fewer
        steps and barriers, more work a step, which the scheduler can interleave; two
        were the fastest on the shapes measured, BENCHMARKS.md).
    small_batch_rows : int or None
        Query rows of a strip of a small batch's block, 2 to 8: fewer rows, more threads
        a pair (more warps to share an SM's four schedulers and hide each other's
        latency, shorter chains of cells a step) for more steps and more instructions a
        cell. None: the fewest rows (at least 3) that take the batch's longest query in
        one pass of four warps of strips, a warp for each scheduler of the SM (3 rows up
        to 384 residues, 5 for GATK's haplotypes of 600), or of ``small_batch_threads``
        where fewer: the fastest of 3-8 rows on the shapes measured (BENCHMARKS.md).
    linear_block_bytes : int
        Device bytes of the traceback words of one block of a GPU linear-space traceback
        (:mod:`gpualign_df.gpu.long`), at most half the memory a batch may use: more rows
        per block give the recomputation more warps, up to this fixed budget beside the
        memory linear in the lengths (a 1 Mbp pair then stays under 16 GB).
    top_k_segments : int
        Most segments one query's targets are split into by the first phase of the GPU
        top-k, a block of threads each (at most 255: one block of the second phase merges
        a query's segments). Fewer queries get more segments (about 1,024 blocks in all,
        a few under the CUDA simulator), each holding at least a target a thread. Tests
        lower it to make long lists a thread.
    side_stream : bool
        Run long GPU stretches (a search's score pass, a large batch's fill) on a
        non-blocking stream of the engine's own, so that work other threads put on the
        default stream (a Dask worker copying a partition it sends) does not queue behind
        them (:class:`gpualign_df.gpu.streams.SideStream`); the walk's residue gather
        also runs there, beside a grouped fill that does not read it. False keeps
        everything on the default stream (tests, benchmarks).
    side_stream_cells : int
        DP cells from which a score pass or a fill runs on the side stream: a few
        milliseconds of GPU time and more, where waiting for it on the host costs nothing.
    fast_launch : bool
        Launch GPU kernels by laying out their arguments from CuPy arrays directly
        (:mod:`gpualign_df.gpu.launch`), tens of microseconds less host time per argument
        than numba's own launch path; False launches everything through numba (tests and
        benchmarks compare the two).
    time_kernels : bool
        Time every GPU kernel with CUDA events and add its seconds to
        ``gpualign_df.gpu.KERNEL_SECONDS`` by kernel name (clear it yourself). Each launch
        then waits for its kernel: for benchmarks only.
    """

    host_memory_share: float = 0.5
    traceback_memory_share: float = 0.25
    linear_min_block_rows: int = 64
    stream_batch_pairs: int = 1 << 20
    stream_batch_cells: float = 2e10
    progress_interval: float = 0.25
    small_job_cells: int = 1 << 20
    cpu_chunk_cells: int = 1_000_000
    auto_cpu_cells: float = 0
    cpu_wave_min_length: int = 32
    progress_delay: float = 2.0
    gpu_launch_cells: float = 2.0 ** 41
    search_block_pairs: int = 4_000_000
    cpu_batch_ops: int = 1 << 26
    cpu_batch_pairs: int = 1 << 20
    lane_max_length: int = 2048
    lane_narrow_score_limit: int = 1 << 13
    lane_min_fill: float = 0.2
    lane_speedup: float = 1.8
    cpu_search_group_columns: int = 1024
    cpu_rescue_share: int = 4
    cpu_profile_bytes: int = 1 << 28
    encode_bytes_per_thread: int = 1 << 18
    encode_max_threads: int = 8
    write_chunk_rows: int = 1 << 17
    gpu_memory_share: float = 0.6
    search_resident_bytes: int | None = None
    gpu_keep_bytes: int = 0
    sort_by_length: bool = True
    inter_max_cells: int = 1 << 20
    inter_small_cells: int = 1 << 16
    inter_min_pairs: int = 4096
    fill_16bit: bool | None = False
    search_16bit: bool | None = None
    search_groups: tuple[tuple[int, int], ...] = tuple(
        (8, columns) for columns in range(4, 27)) + ((16, 26), (32, 26))
    search_table_copies: int | None = None
    search_block_threads: int | None = None
    search_unroll: tuple[tuple[int, int], ...] = ((24, 4), (26, 2))
    pair_group_fill: bool | None = None
    pair_groups: tuple[tuple[int, int], ...] = ((8, 8), (8, 12), (8, 16), (8, 19), (8, 24),
                                                (8, 32), (16, 12), (16, 16))
    pair_group_registers: int | None = 128
    pair_group_profile: bool | None = None
    keyed_best: bool = True
    fill_strip_rows: int = 16
    fill_max_registers: tuple[tuple[int, int | None], ...] = ((8, 72), (16, None))
    funnel_append: bool = True
    band_lanes: int = 32
    band_rows: tuple[tuple[int | None, int, int], ...] = ((None, 4, 4),)
    narrow_bands: float = 0.5
    band_halves: bool = True
    band_windows: float = 1.0
    band_warps: float | None = 1.0
    split_traceback: float = 1.0
    split_tile_steps: int = 1024
    walk_lanes: int | None = None
    walk_probes: int = 2
    small_batch_pairs: int = 4096
    small_batch_cells: int = 1 << 29
    small_batch_threads: int = 256
    small_batch_columns: int = 2
    small_batch_rows: int | None = None
    linear_block_bytes: int = 12 << 30
    top_k_segments: int = 255
    side_stream: bool = True
    side_stream_cells: int = 1 << 34
    fast_launch: bool = True
    time_kernels: bool = False


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
