"""Long pairs and HiFi pairs: every row of issue #18's table in one command.

Match 1, mismatch -4, gap_open 7, gap_extend 1; pandas Series in, ``gpualign_df.align(...,
how="rowwise")`` on one backend. The rows:

* ``100k-cigar`` / ``100k-score``: the first 100,000 bp of the edlib 1 Mbp original against
  the first 100,000 bp of its 99 % copy, global, with CIGAR / score only;
* ``10k-1m-score``: the first 10,000 bp of the original against the whole 99 % copy,
  global score-only; ``1m-10k-score``, the same pair the other way round;
  ``10k-1m-local`` / ``1m-10k-local``, both local; ``10k-1m-glocal``, semi-global with the
  target's ends free (a read against a reference);
* ``hg38-51k``: the parasail hg38 vs CHM13 pair (51 kbp), global with CIGAR;
* ``hhv6b-ebv``: HHV-6B against EBV (162 kbp x 172 kbp), local with CIGAR;
* ``1m-score`` / ``1m-cigar-99``: the whole edlib original against its 99 % copy, global,
  score only / with CIGAR;
* ``1m-cigar-90``: the original against the 90 % copy, global with CIGAR;
* ``hifi-50``: the 50 WFA-GPU HiFi pairs (record k against record k), global with CIGAR.

For each row: the DP cells (sum of len(q) * len(t)), the first call in this process
(numba compilation or cache load included) apart, then the warm time (median and min of
``--repeat`` calls; the 1 Mbp rows ``--repeat-1m``), GCUPS from the warm median, the peak
GPU memory of one more warm call (``cudaMemGetInfo`` sampled by a background thread, see
:class:`MemorySampler`), the score, the CIGAR's size, an independent re-scoring of every
CIGAR against the sequences (:func:`rescore`), the issue's target and whether the row meets
it. A row that raises is reported in its row and the script goes on. ``--check-cpu`` also
runs the CPU engine on the rows below ``--check-cpu-cells`` cells and compares the frames;
``--check-whole`` runs every score-only row once more as one fill (settings
``band_windows=0``, ``band_halves=False``: no windows, no halves, no transposition) and
compares the frames, with that run's time.
Prints a markdown table for BENCHMARKS.md, a table of the checks and an extrapolation to
human chr21 x chimpanzee chr22; ``--json`` writes every figure. Exit status 1 when a CIGAR
does not re-score to its score or a CPU frame differs.

``--scale F`` truncates every sequence to its first F fraction (for trying the script on
the CPU: ``--backend cpu --scale 0.01``); targets are then not judged.

Usage::

    python -m benchmarks.run_long [--repeat 3] [--repeat-1m 1] [--rows NAME ...]
                                  [--backend cuda|cpu] [--data-dir DIR] [--json OUT]
                                  [--check-cpu] [--check-whole] [--scale F]
                                  [--no-first-call]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import re
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

from benchmarks.harness import W1_OPTIONS, add_data_dir, read_fasta, timed_runs

#: issue #18's scoring (the same as W1's)
OPTIONS: dict[str, int] = dict(W1_OPTIONS)
ORIGINAL = "edlib_1mbp_Chromosome_2890043_3890042_0.fasta.gz"
COPY_99 = "edlib_1mbp_mutated_99_perc.fasta.gz"
COPY_90 = "edlib_1mbp_mutated_90_perc.fasta.gz"
GB = 10**9
MIB = 2**20
#: human chr21 x chimpanzee chr22 (about 47 Mbp x 33 Mbp), local: CUDAlign 2.1's pair
CHR21_CHR22_CELLS = 1.55e15
CUDALIGN_HOURS = 8.4
MEMORY_METHOD = ("device memory in use (cudaMemGetInfo total - free, blocks cached between "
                 "calls included) sampled every 5 ms by a background thread during one more "
                 "warm call after the timed ones (sampling perturbs timings), maximum minus the reading before the row's first call, taken after "
                 "emptying the engine's cached buffers, CuPy's pool and numba's pending frees")


@dataclass(frozen=True)
class Row:
    """One workload of the issue's table."""

    name: str
    workload: str
    query_file: str
    target_file: str  # the query file: its first record against its second
    mode: str
    traceback: bool
    target_s: float
    target_text: str
    prefix: int | None = None  # keep the first ``prefix`` bp of each sequence
    query_prefix: int | None = None  # keep the first ``query_prefix`` bp of each query
    memory_limit: int | None = None  # peak GPU bytes the target allows
    long: bool = False  # a 1 Mbp row: ``--repeat-1m`` warm calls
    free_ends: tuple[str, ...] | None = None  # semi-global rows: the free ends
    swapped: bool = False  # queries and targets change places after the cut
    same_score_as: str | None = None  # a row whose scores must equal this row's


ROWS: list[Row] = [
    Row("100k-cigar", "100 kbp x 100 kbp (edlib original vs 99 % copy, first 100,000 bp), "
        "global + CIGAR", ORIGINAL, COPY_99, "nw", True, 0.10, "<= 0.10 s", prefix=100_000),
    Row("100k-score", "100 kbp x 100 kbp (edlib original vs 99 % copy, first 100,000 bp), "
        "global score-only", ORIGINAL, COPY_99, "nw", False, 0.03,
        "<= 0.03 s", prefix=100_000, same_score_as="100k-cigar"),
    Row("10k-1m-score", "10 kbp x 1 Mbp (first 10,000 bp of the edlib original vs its 99 % "
        "copy), global score-only", ORIGINAL, COPY_99, "nw", False, 0.025,
        "<= 0.025 s (400 GCUPS; issue #18: pairs of very different lengths fill the GPU too)",
        query_prefix=10_000),
    Row("1m-10k-score", "1 Mbp x 10 kbp (the 10k-1m-score pair the other way round), global "
        "score-only", ORIGINAL, COPY_99, "nw", False, 0.025, "<= 0.025 s (400 GCUPS)",
        query_prefix=10_000, swapped=True, same_score_as="10k-1m-score"),
    Row("10k-1m-local", "10 kbp x 1 Mbp (as 10k-1m-score), local score-only", ORIGINAL,
        COPY_99, "sw", False, 0.025, "<= 0.025 s (400 GCUPS)", query_prefix=10_000),
    Row("1m-10k-local", "1 Mbp x 10 kbp (as 1m-10k-score), local score-only", ORIGINAL,
        COPY_99, "sw", False, 0.025, "<= 0.025 s (400 GCUPS)", query_prefix=10_000,
        swapped=True),
    Row("10k-1m-glocal", "10 kbp x 1 Mbp (as 10k-1m-score), semi-global with the target's "
        "ends free (read to reference), score-only", ORIGINAL, COPY_99, "sg", False, 0.025,
        "<= 0.025 s (400 GCUPS)", query_prefix=10_000,
        free_ends=("target_start", "target_end")),
    Row("hg38-51k", "hg38 vs CHM13, 51 kbp (parasail pair), global + CIGAR",
        "hg38_chm13_51kbp_pair.fasta.gz", "hg38_chm13_51kbp_pair.fasta.gz", "nw", True, 0.02,
        "<= 0.02 s"),
    Row("hhv6b-ebv", "HHV-6B x EBV (162 kbp x 172 kbp), local + CIGAR",
        "NC_000898_HHV6B.fasta.gz", "NC_007605_EBV.fasta.gz", "sw", True, 0.25, "<= 0.25 s"),
    Row("1m-score", "1 Mbp x 1 Mbp (edlib original vs 99 % copy), global score-only",
        ORIGINAL, COPY_99, "nw", False, 2.5, "<= 2.5 s", long=True,
        same_score_as="1m-cigar-99"),
    Row("1m-cigar-99", "1 Mbp x 1 Mbp (edlib original vs 99 % copy), global + CIGAR", ORIGINAL, COPY_99, "nw", True, 10.0,
        "<= 10 s, < 16 GB GPU", memory_limit=16 * GB, long=True),
    Row("1m-cigar-90", "1 Mbp x 1 Mbp (edlib original vs 90 % copy), global + CIGAR",
        ORIGINAL, COPY_90, "nw", True, 10.0, "<= 10 s", long=True),
    Row("hifi-50", "50 HiFi pairs (WFA-GPU, mean 12.6 kbp), global + CIGAR",
        "hifi_50_query.fasta.gz", "hifi_50_target.fasta.gz", "nw", True, 0.05,
        "<= 0.05 s (WFA-GPU 0.16 s)"),
]
ROW_NAMES = [row.name for row in ROWS]


@dataclass
class Result:
    """Every figure of one row (``--json`` writes these)."""

    name: str
    workload: str
    mode: str
    traceback: bool
    pairs: int = 0
    cells: int = 0
    first_call_s: float | None = None
    warm_s: list[float] = field(default_factory=list)
    warm_median_s: float | None = None
    warm_min_s: float | None = None
    gcups: float | None = None
    gpu_before_bytes: int | None = None
    gpu_peak_bytes: int | None = None  # above ``gpu_before_bytes``
    gpu_samples: int | None = None
    score: int | None = None  # the score, or the sum over the pairs
    cigar_ops: int | None = None  # operations of every CIGAR
    cigar_chars: int | None = None  # characters of every CIGAR
    rescore_ok: bool | None = None  # None: score-only or not run
    rescore_problem: str | None = None
    same_score_ok: bool | None = None
    cpu_equal: bool | None = None
    cpu_problem: str | None = None
    cpu_s: float | None = None
    whole_equal: bool | None = None  # ``--check-whole``: the frame of one whole fill
    whole_problem: str | None = None
    whole_s: float | None = None
    target_s: float | None = None
    target_text: str = ""
    meets_target: bool | None = None  # None: not judged (scaled, or an error)
    error: str | None = None
    scores: list[int] = field(default_factory=list)


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------

def load_pairs(row: Row, data_dir: Path, scale: float,
               read: Callable[[Path], list[str]]) -> tuple[list[str], list[str]]:
    """The row's queries and targets: the first record of a one-file row against its
    second, else record k against record k; cut to ``row.prefix`` (queries to
    ``row.query_prefix``), then to the first ``scale`` fraction of each; swapped where the
    row says so."""
    if row.query_file == row.target_file:
        records = read(data_dir / row.query_file)
        queries, targets = records[:1], records[1:2]
    else:
        queries, targets = read(data_dir / row.query_file), read(data_dir / row.target_file)
    if len(queries) != len(targets) or not queries:
        raise ValueError(f"{row.name}: {len(queries)} queries against {len(targets)} targets")

    def cut(sequence: str, prefix: int | None) -> str:
        if prefix is not None:
            sequence = sequence[:prefix]
        return sequence if scale >= 1.0 else sequence[:max(1, int(len(sequence) * scale))]
    query_prefix = row.prefix if row.query_prefix is None else row.query_prefix
    queries = [cut(q, query_prefix) for q in queries]
    targets = [cut(t, row.prefix) for t in targets]
    return (targets, queries) if row.swapped else (queries, targets)


def read_records(path: Path) -> list[str]:
    """The sequences of a FASTA file: the package's reader (:func:`harness.read_fasta`),
    else, where its parser is not installed (needletail), plain or gzip text parsed here."""
    try:
        return read_fasta(path)
    except ImportError:
        pass
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    records: list[list[str]] = []
    with opener(path, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                records.append([])
            elif records:
                records[-1].append(line.strip())
    return ["".join(parts) for parts in records]


# ---------------------------------------------------------------------------------------
# the independent re-scorer
# ---------------------------------------------------------------------------------------

_CIGAR_OP = re.compile(r"(\d+)([=XMID])")


def _codes(sequence: str):
    """Uppercase bytes of ``sequence`` (U read as T) as a uint8 array."""
    import numpy as np

    return np.frombuffer(sequence.upper().replace("U", "T").encode("ascii"), dtype=np.uint8)


def rescore(cigar: str, query: str, target: str, query_start: int, query_end: int,
            target_start: int, target_end: int, *, match: int, mismatch: int, gap_open: int,
            gap_extend: int) -> tuple[int | None, str | None]:
    """The score of ``cigar`` over ``query[query_start:query_end]`` and
    ``target[target_start:target_end]`` (SAM: ``I`` consumes the query, ``D`` the target),
    and what is wrong with it (None when nothing is).

    A pair of equal A/C/G/T scores ``match``, any other pair ``mismatch`` (IUPAC codes
    always mismatch); ``=`` runs must hold only matching pairs and ``X`` runs none; a gap of
    k (a run of ``I`` or of ``D``) costs ``gap_open + (k - 1) * gap_extend``. The runs must
    cover both slices exactly.

    >>> rescore("3=1X2I2=", "ACGAGGTT", "ACGTTT", 0, 8, 0, 6, match=1, mismatch=-4,
    ...         gap_open=7, gap_extend=1)
    (-7, None)
    """
    import numpy as np

    ops = _CIGAR_OP.findall(cigar)
    if "".join(count + op for count, op in ops) != cigar:
        return None, f"not a CIGAR of =/X/M/I/D runs: {cigar[:40]!r}"
    q, t = _codes(query[query_start:query_end]), _codes(target[target_start:target_end])
    acgt = np.zeros(256, dtype=bool)
    acgt[np.frombuffer(b"ACGT", dtype=np.uint8)] = True
    i = j = score = 0
    previous = ""
    for count_text, op in ops:
        count = int(count_text)
        if count == 0:
            return None, "a run of length 0"
        if op in "=XM":
            if i + count > len(q) or j + count > len(t):
                return None, "the CIGAR runs past the aligned slices"
            same = int(np.count_nonzero((q[i:i + count] == t[j:j + count]) & acgt[q[i:i + count]]))
            if op == "=" and same != count:
                return None, f"'=' run at query {query_start + i} holds {count - same} mismatches"
            if op == "X" and same:
                return None, f"'X' run at query {query_start + i} holds {same} matches"
            score += same * match + (count - same) * mismatch
            i, j = i + count, j + count
        else:
            score -= (gap_extend if op == previous else gap_open) + (count - 1) * gap_extend
            if op == "I":
                i += count
            else:
                j += count
        previous = op
    if (i, j) != (len(q), len(t)):
        return None, (f"the CIGAR covers {i} x {j}, the coordinates {len(q)} x {len(t)}")
    return score, None


def check_frame(frame: Any, queries: list[str], targets: list[str], mode: str,
                result: Result) -> None:
    """Fill ``result``'s score and CIGAR figures from ``frame`` and re-score every CIGAR
    (the first problem found is kept)."""
    scores = [int(score) for score in frame["score"]]
    result.scores = scores
    result.score = sum(scores)
    if "cigar" not in frame.columns:
        return
    result.cigar_ops = result.cigar_chars = 0
    result.rescore_ok = True
    columns = ("cigar", "score", "query_start", "query_end", "target_start", "target_end")
    for k, (cigar, score, q0, q1, t0, t1) in enumerate(zip(*(frame[c] for c in columns))):
        cigar, q0, q1, t0, t1 = str(cigar), int(q0), int(q1), int(t0), int(t1)
        result.cigar_ops += sum(1 for char in cigar if not char.isdigit())
        result.cigar_chars += len(cigar)
        problem = None
        if mode == "nw" and (q0, q1, t0, t1) != (0, len(queries[k]), 0, len(targets[k])):
            problem = f"global coordinates {q0}-{q1} x {t0}-{t1} do not cover the pair"
        else:
            rescored, problem = rescore(cigar, queries[k], targets[k], q0, q1, t0, t1,
                                        **OPTIONS)
            if problem is None and rescored != int(score):
                problem = f"re-scored {rescored}, reported {int(score)}"
        if problem is not None and result.rescore_ok:  # the first problem is reported
            result.rescore_ok = False
            result.rescore_problem = f"pair {k}: {problem}"


def compare_frames(device: Any, cpu: Any) -> str | None:
    """None when the two frames hold the same rows, else the columns that differ."""
    import numpy as np
    import pandas as pd

    device, cpu = device.reset_index(drop=True), cpu.reset_index(drop=True)
    if list(device.columns) != list(cpu.columns) or len(device) != len(cpu):
        return f"shape: {list(device.columns)} x {len(device)} vs {list(cpu.columns)} x {len(cpu)}"
    differing = []
    for name in device.columns:
        a, b = device[name], cpu[name]
        if pd.api.types.is_float_dtype(a) or pd.api.types.is_float_dtype(b):
            same = np.allclose(a.to_numpy(dtype=float), b.to_numpy(dtype=float), rtol=1e-12,
                               atol=0, equal_nan=True)
        else:
            same = bool((a.astype(object) == b.astype(object)).all())
        if not same:
            differing.append(name)
    return f"columns differ: {', '.join(differing)}" if differing else None


# ---------------------------------------------------------------------------------------
# GPU memory
# ---------------------------------------------------------------------------------------

class MemorySampler:
    """Device memory in use (``total - free`` of ``cudaMemGetInfo``, whoever allocated it:
    numba, CuPy, RMM; cached free blocks count as in use) read every ``interval`` seconds by
    a background thread inside ``with``; ``peak`` is the highest reading there above
    ``before``, the reading taken when the sampler was made. Through CuPy's runtime where
    CuPy imports, else numba's context."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.read = self._reader()
        self.before = self.read()
        self.highest = self.before
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-memory", daemon=True)

    @staticmethod
    def _reader() -> Callable[[], int]:
        try:
            import cupy

            def read() -> int:
                free, total = cupy.cuda.runtime.memGetInfo()
                return int(total - free)
        except ImportError:
            from numba import cuda

            def read() -> int:
                free, total = cuda.current_context().get_memory_info()
                return int(total - free)
        return read

    def _run(self) -> None:
        while not self._stop.is_set():
            self.highest = max(self.highest, self.read())
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self.highest = self.read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.highest = max(self.highest, self.read())

    @property
    def peak(self) -> int:
        return self.highest - self.before


def release_device_memory() -> None:
    """Empty the engine's cached buffers, CuPy's pool and numba's pending frees, so that
    the next job allocates what it uses."""
    from numba import cuda

    from gpualign_df import gpu

    cuda.synchronize()
    gpu.release_scratch()
    cuda.current_context().deallocations.clear()
    cuda.synchronize()


# ---------------------------------------------------------------------------------------
# one row
# ---------------------------------------------------------------------------------------

def shorten(error: BaseException, width: int = 110) -> str:
    """``Type: first line of the message``, cut to ``width`` characters."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= width else text[:width - 1] + "…"


def run_row(row: Row, args: argparse.Namespace, read: Callable[[Path], list[str]]) -> Result:
    """Time, measure and check one row; an exception ends the row, not the script."""
    import pandas as pd

    import gpualign_df
    from gpualign_df import config

    result = Result(row.name, row.workload, row.mode, row.traceback, target_s=row.target_s,
                    target_text=row.target_text)
    cuda = args.backend == "cuda"
    try:
        queries, targets = load_pairs(row, args.data_dir, args.scale, read)
        result.pairs = len(queries)
        result.cells = sum(len(q) * len(t) for q, t in zip(queries, targets))
        query_series, target_series = pd.Series(queries), pd.Series(targets)

        def run(backend: str = args.backend) -> Any:
            return gpualign_df.align(query_series, target_series, how="rowwise", mode=row.mode,
                                     free_ends=row.free_ends, traceback=row.traceback,
                                     backend=backend, progress=False, **OPTIONS)
        repeat = args.repeat_1m if row.long else args.repeat
        if cuda:  # the baseline: nothing of an earlier row or call left on the device
            release_device_memory()
            sampler = MemorySampler()
        if not args.no_first_call:
            first, _ = timed_runs(run, 1, synchronize=cuda)
            result.first_call_s = first[0]
        seconds, frame = timed_runs(run, repeat, synchronize=cuda)
        if cuda:  # one more call for the peak memory: the sampling thread perturbs timings
            with sampler:
                run()
            result.gpu_before_bytes, result.gpu_peak_bytes = sampler.before, sampler.peak
            result.gpu_samples = sampler.samples
        if args.no_first_call:
            result.first_call_s = seconds[0]
        result.warm_s = seconds
        result.warm_median_s, result.warm_min_s = statistics.median(seconds), min(seconds)
        result.gcups = result.cells / result.warm_median_s / 1e9
        check_frame(frame, queries, targets, row.mode, result)
        if args.check_cpu and cuda and result.cells < args.check_cpu_cells:
            started = time.perf_counter()
            cpu_frame = run("cpu")
            result.cpu_s = time.perf_counter() - started
            result.cpu_problem = compare_frames(frame, cpu_frame)
            result.cpu_equal = result.cpu_problem is None
        if args.check_whole and cuda and not row.traceback:
            with config.override(band_windows=0.0, band_halves=False):
                run()  # its own kernels' first call
                whole, whole_frame = timed_runs(run, 1, synchronize=True)
            result.whole_s = whole[0]
            result.whole_problem = compare_frames(frame, whole_frame)
            result.whole_equal = result.whole_problem is None
        if args.scale >= 1.0:
            result.meets_target = result.warm_median_s <= row.target_s and (
                row.memory_limit is None or result.gpu_peak_bytes is None
                or result.gpu_peak_bytes < row.memory_limit)
    except Exception as error:  # noqa: BLE001  (the row reports it, the script goes on)
        result.error = shorten(error)
        if cuda:
            try:
                release_device_memory()
            except Exception as again:  # noqa: BLE001
                print(f"# {row.name}: freeing device memory failed: {shorten(again)}",
                      file=sys.stderr)
    return result


# ---------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------

def seconds_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:,.0f} s"


def calls(count: int) -> str:
    return "1 call" if count == 1 else f"{count} calls"


def cells_text(cells: float) -> str:
    return f"{cells:.2e}".replace("e+0", "e").replace("e+", "e")


def checks_pass(result: Result) -> bool:
    """No check of the row failed (a check not run passes)."""
    return False not in (result.rescore_ok, result.cpu_equal, result.same_score_ok,
                         result.whole_equal)


def verdict(result: Result) -> str:
    if result.error is not None:
        return "error"
    if not checks_pass(result):
        return "no (check failed)"
    if result.meets_target is None:
        return "—"
    return "yes" if result.meets_target else "no"


def table(results: list[Result], no_first_call: bool) -> list[str]:
    lines = ["| workload | cells | first call | warm | GCUPS | peak GPU MiB | target | ok |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        name = f"`{r.name}`: {r.workload}"
        cells = cells_text(r.cells) if r.cells else "—"
        message = None if r.error is None else "error: " + r.error.replace("|", "\\|")
        if message is not None and r.warm_median_s is None:
            lines.append(f"| {name} | {cells} | {message} | — | — | — | {r.target_text} | "
                         f"error |")
            continue
        first = seconds_text(r.first_call_s) + (" (= warm)" if no_first_call else "")
        warm = seconds_text(r.warm_median_s)
        if len(r.warm_s) > 1:
            warm += f" (min {seconds_text(r.warm_min_s)}, {len(r.warm_s)} runs)"
        memory = "—" if r.gpu_peak_bytes is None else f"{r.gpu_peak_bytes / MIB:,.0f}"
        lines.append(f"| {name} | {cells} | {first} | {warm} | {r.gcups:.3g} | {memory} | "
                     f"{r.target_text} | {message or verdict(r)} |")
    return lines


def checks_table(results: list[Result]) -> list[str]:
    lines = [("| row | pairs | score | CIGAR ops / chars | CIGAR re-scores to the score | "
              "CPU frame; one whole fill |"), "|---|---:|---:|---:|---|---|"]
    for r in results:
        if r.error is not None:
            lines.append(f"| `{r.name}` | {r.pairs} | — | — | — | — |")
            continue
        cigar = "score only" if r.cigar_ops is None else f"{r.cigar_ops:,} / {r.cigar_chars:,}"
        if r.rescore_ok is None:
            rescored = "—"
        else:
            rescored = "yes" if r.rescore_ok else f"NO: {r.rescore_problem}"
        if r.same_score_ok is not None:
            same = ("same score as the CIGAR row" if r.same_score_ok
                    else "DIFFERS from the CIGAR row's score")
            rescored = same if rescored == "—" else f"{rescored}; {same}"
        cpu = "—" if r.cpu_equal is None else (
            f"equal ({r.cpu_s:.1f} s on the CPU)" if r.cpu_equal else f"DIFFERS: {r.cpu_problem}")
        if r.whole_equal is not None:
            whole = (f"one whole fill equal ({r.whole_s * 1e3:.1f} ms)" if r.whole_equal
                     else f"one whole fill DIFFERS: {r.whole_problem}")
            cpu = whole if cpu == "—" else f"{cpu}; {whole}"
        score = f"{r.score:,}" + (" (sum)" if r.pairs > 1 else "")
        lines.append(f"| `{r.name}` | {r.pairs} | {score} | {cigar} | {rescored} | {cpu} |")
    return lines


def extrapolation(results: list[Result], scale: float) -> dict[str, Any]:
    """Hours for human chr21 x chimpanzee chr22 at the GCUPS of the 1 Mbp rows."""
    by_name = {r.name: r for r in results}
    figures: dict[str, Any] = {"cells": CHR21_CHR22_CELLS, "cudalign_2_1_hours": CUDALIGN_HOURS,
                               "scale": scale}
    for key, name in (("with_cigar", "1m-cigar-99"), ("score_only", "1m-score")):
        r = by_name.get(name)
        if r is None or r.gcups is None:
            figures[key] = {"row": name, "hours": None,
                            "why": "not run" if r is None else (r.error or "no timing")}
        else:
            figures[key] = {"row": name, "gcups": r.gcups,
                            "hours": CHR21_CHR22_CELLS / (r.gcups * 1e9) / 3600}
    return figures


def extrapolation_text(figures: dict[str, Any]) -> str:
    def part(key: str, what: str) -> str:
        entry = figures[key]
        if entry["hours"] is None:
            return f"{what}: n/a (`{entry['row']}`: {entry['why']})"
        return (f"{what}: {entry['hours']:,.1f} h at the {entry['gcups']:.3g} GCUPS of "
                f"`{entry['row']}`")
    text = ("Extrapolation, not a measurement: human chr21 x chimpanzee chr22 (about 47 Mbp x "
            f"33 Mbp = {cells_text(CHR21_CHR22_CELLS)} cells, local, CUDAlign 2.1's pair: "
            f"{CUDALIGN_HOURS} h on a GTX 560 Ti) at this run's global GCUPS; "
            f"{part('with_cigar', 'with CIGAR')}; {part('score_only', 'score only')}.")
    if figures["scale"] < 1.0:
        text += f" (Sequences scaled to {figures['scale']:g}: not the real pairs' GCUPS.)"
    return text


def device_name(backend: str) -> str:
    if backend == "cuda":
        from numba import cuda

        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else name
    return f"CPU ({platform.processor() or platform.machine()}, {_cpu_count()} cores)"


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ---------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir(parser)
    parser.add_argument("--repeat", type=int, default=3,
                        help="warm calls per row, median reported (default 3)")
    parser.add_argument("--repeat-1m", type=int, default=1,
                        help="warm calls of the 1 Mbp rows (default 1)")
    parser.add_argument("--rows", nargs="+", choices=ROW_NAMES, default=ROW_NAMES,
                        metavar="NAME", help=f"rows to run, in this table order: {' '.join(ROW_NAMES)}")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--check-cpu", action="store_true",
                        help="on CUDA, also run the CPU engine once on the rows below "
                             "--check-cpu-cells and compare the frames")
    parser.add_argument("--check-cpu-cells", type=float, default=3e9)
    parser.add_argument("--check-whole", action="store_true",
                        help="on CUDA, also run each score-only row as one whole fill (no "
                             "windows or halves) and compare the frames")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="keep the first F fraction of every sequence (targets not judged "
                             "below 1)")
    parser.add_argument("--no-first-call", action="store_true",
                        help="no separate first call: the first timed call is the first call "
                             "and counts among the warm ones (saves a whole run of the 1 Mbp "
                             "rows)")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error("--scale must be in (0, 1]")
    if args.repeat < 1 or args.repeat_1m < 1:
        parser.error("--repeat and --repeat-1m must be at least 1")

    cache: dict[Path, list[str]] = {}

    def read(path: Path) -> list[str]:
        if path not in cache:
            cache[path] = read_records(path)
        return cache[path]

    # numba's low-occupancy warning fires on every one-pair launch: noise here
    warnings.filterwarnings("ignore", message=r".*GPU under-utilization")
    started = time.perf_counter()
    import gpualign_df  # noqa: F401

    if args.backend == "cuda":  # the context and CuPy, before any row's first call
        import cupy  # noqa: F401
        from numba import cuda

        cuda.current_context()
        cuda.synchronize()
    setup_s = time.perf_counter() - started
    device = device_name(args.backend)
    print(f"# {device}, backend {args.backend}, scale {args.scale:g}; imports and device set-up "
          f"{setup_s:.2f} s", flush=True)

    results: list[Result] = []
    order = [row for row in ROWS if row.name in args.rows]
    for row in order:
        result = run_row(row, args, read)
        results.append(result)
        summary = {key: value for key, value in asdict(result).items()
                   if key not in ("scores", "warm_s", "workload")}
        print(summary, flush=True)
    by_name = {r.name: r for r in results}
    for row in order:
        other = by_name.get(row.same_score_as or "")
        mine = by_name[row.name]
        if other is not None and mine.scores and other.scores:
            mine.same_score_ok = mine.scores == other.scores

    figures = extrapolation(results, args.scale)
    judged = "" if args.scale >= 1.0 else f" Sequences scaled to {args.scale:g}: targets not judged."
    header = (f"## {_dt.date.today().isoformat()} — long pairs and HiFi pairs (issue #18) on "
              f"{device}, backend {args.backend}")
    lines = [header, "",
             f"Match 1 / mismatch -4 / gap 7+1, pandas in, frame out. First call: the row's "
             f"first call in the process (compilation or cache load included); warm: median of "
             f"{calls(args.repeat)} ({calls(args.repeat_1m)} for the 1 Mbp rows); GCUPS = cells "
             f"/ warm median." + judged]
    if args.backend == "cuda":
        lines += ["", f"Peak GPU memory: {MEMORY_METHOD}."]
    lines += ["", *table(results, args.no_first_call), "", *checks_table(results), "",
              extrapolation_text(figures)]
    print("\n".join(lines))
    if args.json:
        payload = {"date": _dt.date.today().isoformat(), "device": device,
                   "backend": args.backend, "scale": args.scale, "repeat": args.repeat,
                   "repeat_1m": args.repeat_1m, "no_first_call": args.no_first_call,
                   "setup_s": setup_s, "options": OPTIONS,
                   "memory_method": MEMORY_METHOD if args.backend == "cuda" else None,
                   "rows": [asdict(r) for r in results], "extrapolation": figures}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    failed = not all(checks_pass(r) for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
