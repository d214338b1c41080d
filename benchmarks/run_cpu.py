"""CPU benchmark: gpualign_df against parasail on the GASAL2 short-read pairs, in one run.

Workload: 20,000 1:1 DNA pairs (150 bp reads against 152-277 bp reference windows), local
alignment (Smith-Waterman) with traceback, match 1, mismatch -4, gap open 7, gap extend 1
(a gap of length k costs 7 + (k - 1) * 1, parasail's convention: open=7, extend=1).

* ours: ``gpualign_df.align(queries, targets, how="rowwise", mode="sw", ...)`` on pandas
  Series, end to end (Series in, DataFrame with CIGAR out), numba on ``--threads`` threads;
  also with ``traceback=False`` (score-only).
* peer: parasail on the same cores: a ``multiprocessing`` pool of ``--threads`` processes
  (created and warmed before timing) running ``sw_trace_striped_16`` on chunks of pairs and
  sending score + CIGAR string back to the parent; also score-only ``sw_striped_16``. Pairs
  whose 16-bit result saturates are redone with the 32-bit variant, inside the timing.

Every pair's score must equal parasail's; the run exits with status 1 otherwise.

Usage::

    python -m benchmarks.run_cpu [--data-dir DIR] [--limit N] [--repeat R] [--threads T]
                                 [--markdown BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import multiprocessing as mp
import os
import platform
import re
import sys
import time
from functools import partial
from pathlib import Path

from benchmarks.harness import DEFAULT_DATA_DIR, W1_OPTIONS, add_data_dir
from benchmarks.harness import W1_QUERY_FILE as QUERY_FILE
from benchmarks.harness import W1_TARGET_FILE as TARGET_FILE

MATCH, MISMATCH = W1_OPTIONS["match"], W1_OPTIONS["mismatch"]
GAP_OPEN, GAP_EXTEND = W1_OPTIONS["gap_open"], W1_OPTIONS["gap_extend"]
CHUNKS_PER_PROCESS = 16
WARMUP_PAIRS = 64

# ---------------------------------------------------------------------------------------
# parasail worker side (kept free of heavy imports: the pool uses the "spawn" start method,
# so each worker re-imports this module)
# ---------------------------------------------------------------------------------------

_MATRIX = None


def _worker_init() -> None:
    global _MATRIX
    import parasail

    _MATRIX = parasail.matrix_create("ACGT", MATCH, MISMATCH)


def _parasail_chunk(pairs: list[tuple[str, str]], trace: bool) -> tuple[list[int], list[str], int]:
    """Score of every pair in the chunk (and its CIGAR with ``trace``, else no CIGARs), plus
    how many pairs saturated 16 bits (those are re-run on 32 bits)."""
    import parasail

    if trace:
        align16, align32 = parasail.sw_trace_striped_16, parasail.sw_trace_striped_32
    else:
        align16, align32 = parasail.sw_striped_16, parasail.sw_striped_32
    scores, cigars, saturated = [], [], 0
    for query, target in pairs:
        result = align16(query, target, GAP_OPEN, GAP_EXTEND, _MATRIX)
        if result.saturated:
            saturated += 1
            result = align32(query, target, GAP_OPEN, GAP_EXTEND, _MATRIX)
        scores.append(result.score)
        if trace:
            cigars.append(result.get_cigar().decode.decode())
    return scores, cigars, saturated


def _warm(_: int) -> int:
    result = _parasail_chunk([("ACGTACGTTTGACCA", "TTACGTACGTTTGACCAGG")], trace=True)
    time.sleep(0.05)  # keep this worker busy so the other warm-up tasks reach the others
    return result[0][0]


def _chunks(pairs: list[tuple[str, str]], count: int) -> list[list[tuple[str, str]]]:
    size = max(1, -(-len(pairs) // count))
    return [pairs[i:i + size] for i in range(0, len(pairs), size)]


def parasail_run(pool, pairs: list[tuple[str, str]], processes: int, trace: bool = True):
    """parasail on every pair across the pool: (scores, CIGARs (empty without ``trace``),
    saturated count)."""
    scores, cigars, saturated = [], [], 0
    for chunk_scores, chunk_cigars, chunk_saturated in pool.map(
            partial(_parasail_chunk, trace=trace),
            _chunks(pairs, processes * CHUNKS_PER_PROCESS), chunksize=1):
        scores.extend(chunk_scores)
        cigars.extend(chunk_cigars)
        saturated += chunk_saturated
    return scores, cigars, saturated


# ---------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="gpualign_df vs parasail on the GASAL2 pairs (CPU, local, traceback).")
    add_data_dir(parser, help=f"folder holding {QUERY_FILE} and {TARGET_FILE} "
                              f"(default: $GPUALIGN_SHARED_DATA, else {DEFAULT_DATA_DIR})")
    parser.add_argument("--limit", type=int, default=None,
                        help="use only the first N pairs (default: all 20,000)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed runs of each contender; the best is reported (default 3)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="numba threads for ours and pool processes for parasail "
                             "(default: all cores, os.cpu_count())")
    parser.add_argument("--markdown", type=Path, default=None,
                        help="append a dated section with the results to this file")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be a positive integer")
    if args.repeat < 1:
        parser.error("--repeat must be a positive integer")
    if args.threads < 1:
        parser.error("--threads must be a positive integer")
    return args


def load_pairs(data_dir: Path, limit: int | None):
    from gpualign_df.io import read_sequences

    query_path, target_path = data_dir / QUERY_FILE, data_dir / TARGET_FILE
    missing = [str(p) for p in (query_path, target_path) if not p.is_file()]
    if missing:
        sys.exit("run_cpu.py: benchmark data not found: " + ", ".join(missing)
                 + "\n  pass --data-dir pointing at the folder that holds the GASAL2 batch "
                   "(shared/data beside the repository)")
    queries = read_sequences(query_path)["seq"]
    targets = read_sequences(target_path)["seq"]
    if len(queries) != len(targets):
        sys.exit(f"run_cpu.py: {len(queries)} queries but {len(targets)} targets")
    if limit is not None:
        queries, targets = queries.iloc[:limit], targets.iloc[:limit]
    return queries, targets


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import numba
    import numpy as np
    import pandas as pd
    import parasail

    import gpualign_df

    if args.threads > numba.config.NUMBA_NUM_THREADS:
        sys.exit(f"run_cpu.py: --threads {args.threads} exceeds numba's maximum "
                 f"{numba.config.NUMBA_NUM_THREADS} (set NUMBA_NUM_THREADS to raise it)")

    queries, targets = load_pairs(args.data_dir, args.limit)
    pairs = list(zip(queries.tolist(), targets.tolist()))
    n = len(pairs)
    query_lengths = queries.str.len().to_numpy(np.int64)
    target_lengths = targets.str.len().to_numpy(np.int64)
    cells = int((query_lengths * target_lengths).sum())
    print(f"data: {n:,} pairs from {args.data_dir} (query {query_lengths.min()}-"
          f"{query_lengths.max()} bp, target {target_lengths.min()}-{target_lengths.max()} bp),"
          f" {cells:,} cells")
    print(f"threads: {args.threads} (numba) / {args.threads} processes (parasail); "
          f"cpu_count {os.cpu_count()}; load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))

    # parasail pool: created (spawn: no fork of a threaded parent) and warmed before timing,
    # and before numba starts its thread pool
    pool = mp.get_context("spawn").Pool(processes=args.threads, initializer=_worker_init)
    try:
        pool.map(_warm, range(args.threads * 2), chunksize=1)

        numba.set_num_threads(args.threads)
        options = dict(how="rowwise", mode="sw", match=MATCH, mismatch=MISMATCH,
                       gap_open=GAP_OPEN, gap_extend=GAP_EXTEND, progress=False)
        warm_q, warm_t = queries.iloc[:WARMUP_PAIRS], targets.iloc[:WARMUP_PAIRS]
        started = time.perf_counter()
        gpualign_df.align(warm_q, warm_t, **options)
        gpualign_df.align(warm_q, warm_t, traceback=False, **options)
        print(f"warm-up: ours on {len(warm_q)} pairs, traceback and score-only "
              f"(numba compile / cache load): {time.perf_counter() - started:.2f} s, untimed; "
              f"parasail pool of {args.threads} started and warmed, untimed")

        contenders = {
            "ours, traceback": lambda: gpualign_df.align(queries, targets, **options),
            "ours, score-only": lambda: gpualign_df.align(queries, targets, traceback=False,
                                                          **options),
            "parasail, traceback": lambda: parasail_run(pool, pairs, args.threads),
            "parasail, score-only": lambda: parasail_run(pool, pairs, args.threads,
                                                         trace=False),
        }
        best = {name: float("inf") for name in contenders}
        outputs = {}
        for round_number in range(1, args.repeat + 1):
            for name, run in contenders.items():
                started = time.perf_counter()
                outputs[name] = run()
                seconds = time.perf_counter() - started
                best[name] = min(best[name], seconds)
                print(f"  run {round_number}/{args.repeat} {name:<22} {seconds:8.3f} s")
    finally:
        pool.close()
        pool.join()

    # verification: every score against parasail's
    ours_tb, ours_so = outputs["ours, traceback"], outputs["ours, score-only"]
    p_tb_scores, p_cigars, p_tb_sat = outputs["parasail, traceback"]
    p_so_scores, _, p_so_sat = outputs["parasail, score-only"]
    p_tb_scores = np.asarray(p_tb_scores, np.int64)
    p_so_scores = np.asarray(p_so_scores, np.int64)
    ours_tb_scores = ours_tb["score"].to_numpy(np.int64)
    ours_so_scores = ours_so["score"].to_numpy(np.int64)
    checks = {
        "ours traceback vs parasail traceback": int((ours_tb_scores != p_tb_scores).sum()),
        "ours score-only vs parasail score-only": int((ours_so_scores != p_so_scores).sum()),
        "ours traceback vs ours score-only": int((ours_tb_scores != ours_so_scores).sum()),
        "parasail traceback vs parasail score-only": int((p_tb_scores != p_so_scores).sum()),
    }
    # parasail's SW CIGAR can open with gap ops covering the unaligned target prefix (its
    # begin coordinates are then 0); a local alignment never starts or ends with a gap, so
    # strip those before comparing
    edge_gaps = re.compile(r"^(?:\d+[ID])+|(?:\d+[ID])+$")
    p_trimmed = np.asarray([edge_gaps.sub("", c) for c in p_cigars], object)
    same_cigar = int((ours_tb["cigar"].to_numpy(object) == p_trimmed).sum())
    print(f"verify: score mismatches over {n:,} pairs:")
    for label, count in checks.items():
        print(f"  {label}: {count}")
    print(f"  (info) CIGAR identical to parasail's: {same_cigar:,} / {n:,} "
          f"after stripping parasail's edge gap ops (the rest are equal-score ties broken differently); parasail 16-bit saturated pairs "
          f"redone in 32-bit: traceback {p_tb_sat}, score-only {p_so_sat}")
    mismatches = sum(checks.values())

    rows = [
        ("ours, traceback", "parasail, traceback"),
        ("ours, score-only", "parasail, score-only"),
        ("parasail, traceback", None),
        ("parasail, score-only", None),
    ]
    lines = ["| run | best wall (s) | alignments/s | GCUPS | ours/parasail (speed) |",
             "|---|---:|---:|---:|---:|"]
    for name, peer in rows:
        seconds = best[name]
        ratio = f"{best[peer] / seconds:.2f}x" if peer else "-"
        lines.append(f"| {name} | {seconds:.3f} | {n / seconds:,.0f} | "
                     f"{cells / seconds / 1e9:.3f} | {ratio} |")
    table = "\n".join(lines)
    print()
    print(f"best of {args.repeat}, {n:,} pairs, {args.threads} threads; "
          f"ours/parasail (speed) = parasail time / our time (>1: ours faster)")
    print(table)

    if mismatches:
        print(f"\nFAILED: {mismatches} score mismatches against parasail; "
              + ("nothing written to " + str(args.markdown) if args.markdown else ""),
              file=sys.stderr)
        return 1

    if args.markdown is not None:
        write_markdown(args, n, cells, query_lengths, target_lengths, table, checks,
                       same_cigar, p_tb_sat, p_so_sat, numba, np, pd, parasail, gpualign_df)
        print(f"\nappended to {args.markdown}")
    return 0


def write_markdown(args, n, cells, query_lengths, target_lengths, table, checks, same_cigar,
                   p_tb_sat, p_so_sat, numba, np, pd, parasail, gpualign_df) -> None:
    now = _dt.datetime.now().astimezone()
    limit = f", first {n:,} (--limit)" if args.limit is not None else ""
    section = f"""
## CPU: GASAL2 short reads, local with traceback ({now:%Y-%m-%d %H:%M %Z})

* Command: `python -m benchmarks.run_cpu {' '.join(sys.argv[1:])}`
* Machine: {cpu_model()}, {os.cpu_count()} cores (os.cpu_count); threads used: {args.threads} \
(numba threads for ours, pool processes for parasail)
* Software: Python {platform.python_version()}, numba {numba.__version__}, numpy \
{np.__version__}, pandas {pd.__version__}, parasail {parasail.__version__}, gpualign_df \
{getattr(gpualign_df, '__version__', '?')}
* Data: GASAL2 batch ({QUERY_FILE}, {TARGET_FILE}){limit}: {n:,} 1:1 DNA pairs, query \
{query_lengths.min()}-{query_lengths.max()} bp, target {target_lengths.min()}-\
{target_lengths.max()} bp, {cells:,} cells
* Workload: Smith-Waterman, match {MATCH}, mismatch {MISMATCH}, gap open {GAP_OPEN}, gap \
extend {GAP_EXTEND} (gap of length k costs {GAP_OPEN} + (k-1)*{GAP_EXTEND}).
  Ours: `gpualign_df.align(queries, targets, how="rowwise", mode="sw", ...)`, pandas Series \
in, DataFrame (with CIGAR) out, end to end; score-only with `traceback=False`; one untimed \
warm-up call on {WARMUP_PAIRS} pairs first (numba compile).
  Parasail: `sw_trace_striped_16` (CIGAR via `result.get_cigar()`) and `sw_striped_16`, in a \
multiprocessing pool of {args.threads} processes created and warmed before timing, chunks of \
pairs, score and CIGAR returned to the parent; 16-bit saturated pairs redone in 32-bit \
(traceback {p_tb_sat}, score-only {p_so_sat}).
* Verification: score mismatches against parasail: \
{checks['ours traceback vs parasail traceback']} (traceback), \
{checks['ours score-only vs parasail score-only']} (score-only); CIGARs identical to \
parasail's (its leading/trailing gap ops stripped): {same_cigar:,} / {n:,} (the rest: \
equal-score ties).
* Best wall time of {args.repeat}; GCUPS = cells / seconds / 1e9; ours/parasail (speed) = \
parasail time / our time.

{table}
"""
    path = args.markdown
    if not path.exists() or path.stat().st_size == 0:
        path.write_text("# Benchmarks\n")
    with open(path, "a") as handle:
        handle.write(section)


if __name__ == "__main__":
    sys.exit(main())
