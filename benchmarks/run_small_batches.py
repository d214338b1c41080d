"""Small GPU batches of medium pairs: GATK HaplotypeCaller's shape (issue #23), haplotypes
of 600 bp against 700 bp reference windows, semi-global with CIGARs, match 200, mismatch
-150, gap_open 260, gap_extend 11 (GATK's haplotype-to-reference values), pandas in, frame
out, ``backend="cuda"``.

The pairs are real: reference windows cut along the hg38 side of the hg38/CHM13 51 kbp pair
(``hg38_chm13_51kbp_pair.fasta.gz``), each against the CHM13 stretch 50 bp inside it (the
two assemblies are colinear there). Batches of 1, 25, 125 and 293 pairs (the issue's) and
2,000; each the median of ``--repeat`` warm calls. ``--compare-one-thread`` also times them
with every pair on the one-thread-per-pair kernel (the planner's rule before small jobs
went to the band kernel: ``inter_max_cells`` 2**22, ``inter_min_pairs`` 0), and checks the
frames are identical. ``--compare-batches`` times them on the batch path too (``small_batch_pairs`` 0: the
planner's kernels, as before small batches ran in one launch), frames compared;
``--compare-cpu`` times the CPU engine on them too (frames
compared); ``--cudf`` times them from cuDF Series to a cuDF frame (needs cuDF), on the
small route and on the device path (``small_batch_pairs`` 0), their rows compared with the
pandas frame's; ``--gatk`` adds GATK's own aligner (``overhang=``, CPU engine,
``preset="gatk-haplotype-to-reference"``) under each overhang strategy.

``--cpu-only`` (on a machine without a GPU too): the CPU engine alone against parasail's
fastest semi-global traceback (``sg_trace_scan_32``, one pair after another in this
process, CIGARs included), its scores compared with ours.

``--stages``: after each row, where one call's time goes: the mean wall time of the
job's stages (:data:`STAGES`, each timed by a wrapper around the function where its
caller finds it; a stage nested in another counts in both) over ``--repeat`` more calls.
``--timeline``: after each small-batch row, the medians over ``--repeat`` more calls of
the wall time before the launch, of the launch, from the launch to the wait for the
results (the result frame is prepared there), of the wait (the rest of the kernel and
the copy back) and after it (:func:`call_timeline`). ``--kernel-times``: after each
small-batch row, the small path's kernels' own time (every launch of a call) with CIGARs
and with scores alone, at one and two columns a step (:func:`kernel_times`).

``--crossover`` (instead of the rows): the GPU against the CPU engine on jobs of 1 and 4
related pairs from 50 x 60 to 600 x 700, semi-global with GATK's scores and local with
2 / -3 / 5 / 2, medians of ``--repeat`` calls each (where ``backend="auto"``'s
``auto_cpu_cells`` should stand on this host). ``--strip-heights`` (instead of the rows):
the block kernel's own time with CIGARs by rows a strip and columns a step, on pairs of
several shapes cut as the rows' (:func:`strip_heights`); ``--layouts 5x2 3x2 default`` and
``--shapes 25x600x700`` take some of them (each layout compiles a kernel: a few seconds).

``python -m benchmarks.run_small_batches [--repeat 20] [--compare-one-thread]
[--compare-batches] [--compare-cpu] [--cudf] [--gatk] [--cpu-only] [--stages] [--timeline]
[--kernel-times] [--crossover] [--strip-heights [--layouts ...] [--shapes ...]]``
"""

from __future__ import annotations

import argparse
import sys
from unittest import mock

from benchmarks.harness import add_data_dir, read_fasta, timed_runs, timed_stages

#: GATK's NEW_SW_PARAMETERS (haplotype to reference), semi-global with CIGARs.
OPTIONS = dict(mode="sg", match=200, mismatch=-150, gap_open=260, gap_extend=11,
               backend="cuda", progress=False)
#: GATK's aligner on the same pairs (the overhang strategy added per column).
GATK_OPTIONS = dict(preset="gatk-haplotype-to-reference", backend="cpu", progress=False)
BATCHES = (1, 25, 125, 293, 2000)
#: (module, function) of the stages ``--stages`` times, as their callers find them.
STAGES = (("gpualign_df.api", "resolve_job"), ("gpualign_df.api", "encode_job"),
          ("gpualign_df.api", "run_pairs"), ("gpualign_df.results", "ResultFrame.prepare"),
          ("gpualign_df.results", "ResultFrame.finish"),
          ("gpualign_df.engine", "run_interruptible"),
          ("gpualign_df.gpu.batches", "upload"), ("gpualign_df.gpu.batches", "plan_batches"),
          ("gpualign_df.gpu.batches", "run_batch"),
          ("gpualign_df.gpu.batches", "fill_long_batch"),
          ("gpualign_df.gpu.batches", "_write_cigars"), ("gpualign_df.gpu.batches", "to_host"),
          ("gpualign_df.gpu.batches", "align_small"), ("gpualign_df.gpu.small", "staging"),
          ("gpualign_df.kernels.block", "pair_table"), ("gpualign_df.gpu.small", "upload_into"),
          ("gpualign_df.gpu.small", "launch_kernel"), ("gpualign_df.gpu.small", "download"),
          ("gpualign_df.kernels.block", "place_cigars"), ("gpualign_df.api", "check_host_memory"),
          ("gpualign_df.api", "_on_small_job_engine"))
REFERENCE, HAPLOTYPE, INSET = 700, 600, 50


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20, help="warm calls (median)")
    parser.add_argument("--compare-one-thread", action="store_true",
                        help="also time every pair on the one-thread-per-pair kernel")
    parser.add_argument("--compare-batches", action="store_true",
                        help="also time the batch path (small_batch_pairs 0) and compare "
                             "frames")
    parser.add_argument("--compare-cpu", action="store_true",
                        help="also time the CPU engine (backend='cpu') and compare frames")
    parser.add_argument("--cudf", action="store_true",
                        help="also from cuDF Series, small route and device path")
    parser.add_argument("--gatk", action="store_true",
                        help="also time GATK's aligner (overhang=..., the CPU engine)")
    parser.add_argument("--cpu-only", action="store_true",
                        help="the CPU engine against parasail, no GPU needed")
    parser.add_argument("--stages", action="store_true",
                        help="also print where one call's time goes, by stage")
    parser.add_argument("--timeline", action="store_true",
                        help="also print the medians of a small call's time before, at, "
                             "during and after its launch")
    parser.add_argument("--kernel-times", action="store_true",
                        help="also print the small path's kernels' own time (CUDA events "
                             "around relaunches of a call's launches), with CIGARs and with "
                             "scores alone, for one and two columns a step")
    parser.add_argument("--strip-heights", action="store_true",
                        help="the block kernel's time with CIGARs by rows a strip and "
                             "columns a step on pairs of several shapes, instead of the rows")
    parser.add_argument("--layouts", nargs="+", type=_layout, default=HEIGHTS,
                        metavar="ROWSxCOLUMNS",
                        help="--strip-heights' layouts, e.g. 5x2 3x2 default (the default "
                             "settings'); default: all of HEIGHTS")
    parser.add_argument("--shapes", nargs="+", type=_shape, default=HEIGHT_SHAPES,
                        metavar="COUNTxQUERYxREFERENCE",
                        help="--strip-heights' shapes of pairs, e.g. 25x600x700; default: "
                             "those of HEIGHT_SHAPES")
    parser.add_argument("--crossover", action="store_true",
                        help="the GPU against the CPU engine on jobs of 1-4 pairs of "
                             "growing size, instead of the rows")
    add_data_dir(parser)
    args = parser.parse_args()
    if args.cpu_only:
        return cpu_only(args)
    if args.crossover:
        return crossover(args.repeat)
    if args.strip_heights:
        return strip_heights(*read_fasta(args.data_dir / "hg38_chm13_51kbp_pair.fasta.gz"),
                             args.repeat, tuple(args.layouts), tuple(args.shapes))
    import numpy as np

    import gpualign_df  # noqa: F401  (the .aln accessor)
    from gpualign_df import config, gpu

    hg38, chm13 = read_fasta(args.data_dir / "hg38_chm13_51kbp_pair.fasta.gz")
    name = gpu.cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    print(f"device: {name}; haplotypes of {HAPLOTYPE} bp vs {REFERENCE} bp windows, "
          f"semi-global + CIGAR; median of {args.repeat} warm calls")
    strategies = ("softclip", "indel", "leading_indel", "ignore") if args.gatk else ()
    print("| pairs | GCUPS | ours | every pair one thread | frames identical | batch path "
          "(frames identical) | CPU engine (frames identical) |"
          + " cuDF in (rows identical) | cuDF in, device path (rows identical) |" * args.cudf
          + "".join(f" GATK {name} |" for name in strategies))
    print("|---:|---:|---:|---:|---|---|---|" + "---|---|" * args.cudf
          + "---:|" * len(strategies))
    for count in BATCHES:
        haplotypes, references, cells = batch_of(hg38, chm13, count)

        def median(options=OPTIONS, **changes):
            with config.override(**changes):
                haplotypes.aln.rowwise(references, **options)
                times, frame = timed_runs(
                    lambda: haplotypes.aln.rowwise(references, **options), args.repeat)
            return float(np.median(times)), frame

        seconds, frame = median()
        other, same = "-", "-"
        if args.compare_one_thread:
            one_thread, one_frame = median(inter_max_cells=1 << 22, inter_min_pairs=0)
            other, same = f"{one_thread * 1e3:.2f} ms", str(one_frame.equals(frame))
        on_batches = "-"
        if args.compare_batches:
            batch_seconds, batch_frame = median(small_batch_pairs=0)
            on_batches = f"{batch_seconds * 1e3:.2f} ms ({batch_frame.equals(frame)})"
        on_cpu = "-"
        if args.compare_cpu:
            cpu_seconds, cpu_frame = median(dict(OPTIONS, backend="cpu"))
            on_cpu = f"{cpu_seconds * 1e3:.2f} ms ({cpu_frame.equals(frame)})"
        on_cudf = ""
        if args.cudf:
            import cudf

            device_haplotypes = cudf.from_pandas(haplotypes)
            device_references = cudf.from_pandas(references)
            for changes in ({}, dict(small_batch_pairs=0)):
                with config.override(**changes):
                    device_haplotypes.aln.rowwise(device_references, **OPTIONS)
                    times, device_frame = timed_runs(lambda: device_haplotypes.aln.rowwise(
                        device_references, **OPTIONS), args.repeat)
                on_cudf += (f" {float(np.median(times)) * 1e3:.2f} ms "
                            f"({same_rows(device_frame, frame)}) |")
        gatk = "".join(f" {median(GATK_OPTIONS | dict(overhang=name, cigar_style='M'))[0] * 1e3:.2f} ms |"
                       for name in strategies)
        print(f"| {count:,} | {cells / seconds / 1e9:,.1f} | {seconds * 1e3:.2f} ms | {other} "
              f"| {same} | {on_batches} | {on_cpu} |{on_cudf}{gatk}", flush=True)
        if args.stages:
            print(f"  stages, {count} pairs: "
                  f"{stage_times(lambda: haplotypes.aln.rowwise(references, **OPTIONS), args.repeat)}")
        if args.kernel_times and cells <= config.settings().small_batch_cells:
            times = kernel_times(haplotypes, references, args.repeat)
            print(f"  kernel, {count} pairs: " + "; ".join(
                f"{label} ({launches} launch{'es' * (launches > 1)}) {microseconds:.1f} us"
                for label, launches, microseconds in times), flush=True)
        if args.timeline and count <= config.settings().small_batch_pairs and \
                cells <= config.settings().small_batch_cells:
            print(f"  timeline, {count} pairs: "
                  f"{call_timeline(lambda: haplotypes.aln.rowwise(references, **OPTIONS), args.repeat)}")
    return 0


def same_rows(cudf_frame, frame) -> bool:
    """Whether a cuDF result frame holds the pandas frame's columns and values, row for
    row (nulls where it has them; the libraries' dtypes differ)."""
    import pandas as pd

    host = cudf_frame.to_pandas(nullable=True)
    return list(host.columns) == list(frame.columns) and all(
        [None if pd.isna(value) else value for value in host[name]]
        == [None if pd.isna(value) else value for value in frame[name]]
        for name in frame.columns)


#: ``--kernel-times``' variants: (traceback, settings) and their labels.
KERNEL_VARIANTS = tuple(
    ((traceback, dict(small_batch_columns=columns)),
     f"{'CIGARs' if traceback else 'scores'}, {columns} column{'s' if columns > 1 else ''} "
     "a step") for traceback in (True, False) for columns in (1, 2))
#: ``--strip-heights``' shapes of pairs (count, query, reference) and variants (rows a
#: strip, columns a step; ``(None, None)``: the default settings' layout).
HEIGHT_SHAPES = ((25, 600, 700), (293, 600, 700), (125, 300, 400), (25, 150, 250),
                 (293, 150, 250))
HEIGHTS = ((8, 1), (6, 2), (5, 2), (4, 2), (3, 2), (6, 3), (5, 3), (4, 3), (3, 3), (6, 4),
           (5, 4), (4, 4), (3, 4), (None, None))


def kernel_times(haplotypes, references, repeat: int, rounds: int = 3,
                 variants=KERNEL_VARIANTS) -> list[tuple[str, int, float]]:
    """Microseconds of the block kernels alone: one call's launches (their arguments taken
    from ``gpu.small.launch_kernel``) launched again ``repeat`` times between two CUDA
    events, the upload (the sequences' bytes, which the kernel maps in place, and the
    pairs table's CIGAR counter) restored before each time by a device copy (best of
    ``rounds``), for each of ``variants`` (``((traceback, settings), label)``: by
    default with CIGARs and with scores alone, at one and two columns a step): ``(label,
    launches, microseconds)`` each."""
    from numba import cuda

    from gpualign_df import config
    from gpualign_df.gpu import small

    captured: list = []
    uploads: list = []  # (the query and target arrays as a call's first launch found them)
    launch = small.launch_kernel

    def taken(name, kernel, count, threads, *arguments, **keywords):
        if not captured:
            uploads[:] = [(array, array.copy()) for array in
                          {id(array): array for array in arguments[:2]}.values()]
        captured.append((name, kernel, count, threads, arguments))
        return launch(name, kernel, count, threads, *arguments, **keywords)

    parts = []
    with mock.patch.object(small, "launch_kernel", taken):
        for (traceback, settings), label in variants:
            captured.clear()
            with config.override(**settings):
                haplotypes.aln.rowwise(references, **dict(OPTIONS, traceback=traceback))
            best = float("inf")
            for _ in range(rounds):
                start, end = cuda.event(), cuda.event()
                start.record()
                for _ in range(repeat):
                    for array, pristine in uploads:
                        array[...] = pristine
                    for name, kernel, blocks, threads, arguments in captured:
                        launch(name, kernel, blocks, threads, *arguments)
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) / repeat)
            parts.append((label, len(captured), best * 1e3))
    return parts


def _layout(text: str) -> tuple[int | None, int | None]:
    """``ROWSxCOLUMNS`` (``5x2``) as ``(5, 2)``; ``default``: ``(None, None)``."""
    if text == "default":
        return None, None
    rows, columns = (int(part) for part in text.split("x"))
    return rows, columns


def _shape(text: str) -> tuple[int, int, int]:
    """``COUNTxQUERYxREFERENCE`` (``25x600x700``) as ``(25, 600, 700)``."""
    count, query, reference = (int(part) for part in text.split("x"))
    return count, query, reference


def strip_heights(hg38: str, chm13: str, repeat: int, layouts=HEIGHTS,
                  shapes=HEIGHT_SHAPES) -> int:
    """The block kernel's time with CIGARs (:func:`kernel_times`) by rows a strip and
    columns a step (``layouts``, by default :data:`HEIGHTS`) on pairs of each of
    ``shapes`` (by default :data:`HEIGHT_SHAPES`), as a table; exit status 1 where a
    variant's frame differs from the CPU engine's."""
    from gpualign_df import config
    from gpualign_df.gpu import small

    print("| pairs | " + " | ".join(f"{rows} rows, {columns} column{'s' * (columns > 1)}"
                                      if rows else "chosen" for rows, columns in layouts)
          + " | frames equal the CPU engine's |")
    print("|---|" + "---:|" * len(layouts) + "---|")
    status = 0
    for count, query, reference in shapes:
        haplotypes, references, _ = batch_of(hg38, chm13, count, query, reference)
        frames = [haplotypes.aln.rowwise(references, **dict(OPTIONS, backend="cpu"))]
        times = []
        for rows, columns in layouts:
            settings = dict(small_batch_rows=rows, small_batch_columns=columns) if rows \
                else {}
            with config.override(**settings):
                frames.append(haplotypes.aln.rowwise(references, **OPTIONS))
            (_, _, microseconds), = kernel_times(haplotypes, references, repeat,
                                                 variants=(((True, settings), ""),))
            chosen = small.block_layout(config.settings(), query)
            times.append("{1} rows, {0} columns: ".format(*chosen) * (rows is None)
                         + f"{microseconds:.1f} us")
        same = all(frame.equals(frames[0]) for frame in frames)
        status |= not same
        print(f"| {count} x {query} x {reference} | " + " | ".join(times) + f" | {same} |",
              flush=True)
    return status


def call_timeline(call, repeat: int) -> str:
    """Medians over ``repeat`` calls of ``call`` (a small-batch job) of where its wall time
    goes, from timestamps taken around :mod:`gpualign_df.gpu.small`'s ``launch_kernel``
    and its first ``download``: before the launch, the launch, from the launch to the wait
    (the caller's frame is prepared there), the wait (the rest of the kernel, the copy
    back) and after it, and the whole call."""
    import time

    import numpy as np
    from gpualign_df.gpu import small

    marks: dict[str, float] = {}

    def stamped(function, before: str, after: str):
        def wrapper(*args, **kwargs):
            marks.setdefault(before, time.perf_counter())
            try:
                return function(*args, **kwargs)
            finally:
                marks.setdefault(after, time.perf_counter())
        return wrapper

    rows = []
    with mock.patch.object(small, "launch_kernel",
                           stamped(small.launch_kernel, "launch", "launched")), \
            mock.patch.object(small, "download", stamped(small.download, "wait", "waited")):
        for _ in range(repeat):
            marks.clear()
            start = time.perf_counter()
            call()
            end = time.perf_counter()
            if len(marks) < 4:
                raise RuntimeError("the call did not run as one small batch")
            rows.append((marks["launch"] - start, marks["launched"] - marks["launch"],
                         marks["wait"] - marks["launched"], marks["waited"] - marks["wait"],
                         end - marks["waited"], end - start))
    parts = np.median(np.array(rows), axis=0) * 1e3
    names = ("before the launch", "launch", "launch to wait", "wait", "after", "call")
    return ", ".join(f"{name} {value:.3f} ms" for name, value in zip(names, parts))


#: ``--crossover``'s jobs: (pairs, query length, target length), and its scorings.
CROSSOVER_JOBS = tuple((count, m, n) for count in (1, 4)
                       for m, n in ((50, 60), (100, 120), (150, 180), (200, 240), (300, 350),
                                    (450, 520), (600, 700)))
CROSSOVER_SCORINGS = (("sg, GATK's scores", dict(mode="sg", match=200, mismatch=-150,
                                                 gap_open=260, gap_extend=11)),
                      ("sw, 2 / -3 / 5 / 2", dict(mode="sw", match=2, mismatch=-3,
                                                  gap_open=5, gap_extend=2)))


def crossover(repeat: int, jobs=CROSSOVER_JOBS) -> int:
    """The GPU (``backend="cuda"``) against the CPU engine on ``jobs``: related random
    pairs (a query cut from the middle of its target, a substitution every 50 residues),
    medians of ``repeat`` calls after 20, frames compared; exit status 1 where one
    differs."""
    import time

    import numpy as np
    import pandas as pd

    import gpualign_df  # noqa: F401  (the .aln accessor)

    rng = np.random.default_rng(1)

    def related(count: int, m: int, n: int):
        queries, targets = [], []
        for _ in range(count):
            target = "".join(rng.choice(list("ACGT"), n))
            query = list(target[(n - m) // 2:(n - m) // 2 + m])
            for at in rng.integers(0, m, max(1, m // 50)):
                query[at] = str(rng.choice(list("ACGT")))
            queries.append("".join(query))
            targets.append(target)
        return pd.Series(queries), pd.Series(targets)

    def median(call) -> tuple[float, object]:
        for _ in range(20):
            frame = call()
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        return float(np.median(times)), frame

    print(f"GPU against the CPU engine, median of {repeat} calls")
    print("| job | pairs | lengths | cells | GPU | CPU engine | frames identical |")
    print("|---|---:|---|---:|---:|---:|---|")
    status = 0
    for name, scoring in CROSSOVER_SCORINGS:
        for count, m, n in jobs:
            queries, targets = related(count, m, n)
            on_gpu, gpu_frame = median(lambda: queries.aln.rowwise(
                targets, backend="cuda", progress=False, **scoring))
            on_cpu, cpu_frame = median(lambda: queries.aln.rowwise(
                targets, backend="cpu", progress=False, **scoring))
            same = gpu_frame.equals(cpu_frame)
            status |= not same
            print(f"| {name} | {count} | {m} x {n} | {count * m * n:,} | "
                  f"{on_gpu * 1e3:.2f} ms | {on_cpu * 1e3:.2f} ms | {same} |", flush=True)
    return status


def stage_times(call, repeat: int) -> str:
    """Mean milliseconds per call of each of :data:`STAGES` that ``call`` reaches, over
    ``repeat`` calls (:func:`benchmarks.harness.timed_stages`)."""
    with timed_stages(STAGES, {}) as totals:
        for _ in range(repeat):
            call()
    return ", ".join(f"{name} {seconds / repeat * 1e3:.3f} ms"
                     for name, seconds in sorted(totals.items(), key=lambda item: -item[1]))


def batch_of(hg38: str, chm13: str, count: int, haplotype: int = HAPLOTYPE,
             reference: int = REFERENCE):
    """(haplotypes, references, cells) of a batch of ``count`` pairs: windows of
    ``reference`` bp spread evenly along the hg38 side, each against the CHM13 stretch of
    ``haplotype`` bp ``INSET`` bp inside it."""
    import numpy as np
    import pandas as pd

    span = min(len(hg38), len(chm13)) - reference
    starts = np.linspace(0, span, count, dtype=np.int64)
    references = pd.Series([hg38[start:start + reference] for start in starts])
    haplotypes = pd.Series([chm13[start + INSET:start + INSET + haplotype]
                            for start in starts])
    return haplotypes, references, float((haplotypes.str.len() * references.str.len()).sum())


def cpu_only(args) -> int:
    """The CPU engine (every core) and parasail ``sg_trace_scan_32`` (one core, CIGARs
    made) on the batches; exit status 1 where a score differs."""
    import numba
    import numpy as np
    import parasail

    import gpualign_df  # noqa: F401  (the .aln accessor)

    hg38, chm13 = read_fasta(args.data_dir / "hg38_chm13_51kbp_pair.fasta.gz")
    matrix = parasail.matrix_create("ACGT", OPTIONS["match"], OPTIONS["mismatch"])
    options = dict(OPTIONS, backend="cpu")
    print(f"CPU engine on {numba.get_num_threads()} threads, parasail sg_trace_scan_32 on one; "
          f"haplotypes of {HAPLOTYPE} bp vs {REFERENCE} bp windows, semi-global + CIGAR; "
          f"median of {args.repeat} warm calls")
    print("| pairs | ours (CPU) | GCUPS | parasail (1 core) | scores equal |")
    print("|---:|---:|---:|---:|---|")
    wrong = 0
    for count in BATCHES:
        haplotypes, references, cells = batch_of(hg38, chm13, count)
        haplotypes.aln.rowwise(references, **options)
        ours, frame = timed_runs(lambda: haplotypes.aln.rowwise(references, **options),
                                 args.repeat)

        def parasail_scores():
            """parasail's score of each pair, its CIGAR made too (as ours is)."""
            scores = []
            for haplotype, reference in zip(haplotypes, references):
                result = parasail.sg_trace_scan_32(haplotype, reference, OPTIONS["gap_open"],
                                                   OPTIONS["gap_extend"], matrix)
                result.get_cigar()
                scores.append(result.score)
            return scores

        theirs, scores = timed_runs(parasail_scores, max(1, args.repeat // 4))
        equal = scores == frame["score"].tolist()
        wrong += not equal
        seconds = float(np.median(ours))
        print(f"| {count:,} | {seconds * 1e3:.2f} ms | {cells / seconds / 1e9:,.2f} | "
              f"{float(np.median(theirs)) * 1e3:.2f} ms | {equal} |", flush=True)
        if args.stages:
            print(f"  stages, {count} pairs: "
                  f"{stage_times(lambda: haplotypes.aln.rowwise(references, **options), args.repeat)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
