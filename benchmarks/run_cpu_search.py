"""CPU protein search: gpualign_df against parasail on the same cores, in one run.

Jobs (local, BLOSUM62, gap_open 11, gap_extend 1, the best 10 targets per query):

* ``adept-100x2000``: ADEPT proteins 0-99 against proteins 100-2,099;
* ``classic-20``: the 20 classic queries (144-5,478 aa) against 1,539 Swiss-Prot proteins;
* ``adept-1000x30000``: ADEPT proteins 0-999 against all 30,000 (long: not run by default);
* ``adept-allpairs-1000``: every pair i < j of ADEPT proteins 0-999 (499,500 pairs), with
  CIGARs and score-only (``how="pairwise"``); peer: parasail ``sw_trace_striped_16`` on
  each pair with its CIGAR (``get_cigar``), 32-bit again where it saturates; every score
  must equal parasail's.

Ours: ``gpualign_df.align(queries, targets, how="search", top_k=10, backend="cpu")`` on
pandas Series, end to end, with CIGARs for the kept pairs and score-only
(``traceback=False``), on ``--threads`` numba threads, warm (a first call in the process
compiles or loads numba's cache: reported apart). Peer: parasail score-only, every query
against every target, the faster of ``sw_striped_profile_16`` and ``sw_striped_profile_sat``
(8-bit first, then 16-bit) for the job, a query profile built once per query, on a pool of
``--threads`` processes (spawned and warmed before timing), pairs whose result saturates
scored again with ``sw_striped_32`` inside the timing. Every query's kept scores must equal
parasail's best scores of that query (the run exits with status 1 otherwise).

Usage::

    python -m benchmarks.run_cpu_search [--rows NAME ...] [--threads T] [--repeat R]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from benchmarks.harness import (GAP_EXTEND, GAP_OPEN, PROTEIN_FILE,
                                SEARCH_OPTIONS, add_data_dir, read_fasta, timed_runs)

TOP_K = SEARCH_OPTIONS["top_k"]
CLASSIC_QUERIES = "cudasw4_20_queries.fasta"
SWISSPROT = "swissprot_small_1539.fasta.gz"
#: name -> (query file, query slice, target file, target slice)
ROWS = {
    "adept-100x2000": (PROTEIN_FILE, (0, 100), PROTEIN_FILE, (100, 2100)),
    "classic-20": (CLASSIC_QUERIES, (0, None), SWISSPROT, (0, None)),
    "adept-1000x30000": (PROTEIN_FILE, (0, 1000), PROTEIN_FILE, (0, None)),
    "adept-allpairs-1000": (PROTEIN_FILE, (0, 1000), PROTEIN_FILE, (0, 1000)),
}
ALL_PAIRS = {"adept-allpairs-1000"}
DEFAULT_ROWS = ["adept-100x2000", "classic-20"]

# ---------------------------------------------------------------------------------------
# parasail worker side (the pool is spawned: each worker re-imports this module)
# ---------------------------------------------------------------------------------------

_TARGETS: list[str] = []


def _worker_init(targets: list[str]) -> None:
    global _TARGETS
    _TARGETS = targets


def _parasail_query(job: tuple[str, str]) -> tuple[list[int], int]:
    """Scores of one query against every target with parasail function ``name`` (a
    profile built once), saturated pairs again in 32 bits; (scores, saturated)."""
    import parasail

    query, name = job
    matrix = parasail.blosum62
    profile = (parasail.profile_create_16 if name.endswith("16") else
               parasail.profile_create_sat)(query, matrix)
    align = getattr(parasail, name)
    scores, saturated = [], 0
    for target in _TARGETS:
        result = align(profile, target, GAP_OPEN, GAP_EXTEND)
        score = result.score
        if result.saturated:
            score = parasail.sw_striped_32(query, target, GAP_OPEN, GAP_EXTEND,
                                           matrix).score
            saturated += 1
        scores.append(score)
    return scores, saturated


def _parasail_pairs(rows: tuple[int, int]) -> list[int]:
    """Scores of the pairs (i, j > i) of rows ``rows[0]`` to ``rows[1]`` of the pool's
    sequences with ``sw_trace_striped_16`` and each pair's CIGAR (32-bit again where the
    16-bit result saturated)."""
    import parasail

    matrix = parasail.blosum62
    scores = []
    for i in range(*rows):
        for j in range(i + 1, len(_TARGETS)):
            result = parasail.sw_trace_striped_16(_TARGETS[i], _TARGETS[j], GAP_OPEN,
                                                  GAP_EXTEND, matrix)
            if result.saturated:
                result = parasail.sw_trace_striped_32(_TARGETS[i], _TARGETS[j], GAP_OPEN,
                                                      GAP_EXTEND, matrix)
            result.get_cigar().decode
            scores.append(result.score)
    return scores


def parasail_all_pairs(pool, count: int) -> list[int]:
    """Scores of every pair i < j of the pool's ``count`` sequences, in pairwise order."""
    bounds = [0]
    pairs_left = count * (count - 1) // 2
    for i in range(count):   # chunks of about equal pairs, a few a process
        if sum(count - 1 - k for k in range(bounds[-1], i + 1)) >= pairs_left / 64:
            bounds.append(i + 1)
    bounds.append(count)
    chunks = sorted({(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a})
    return [score for part in pool.map(_parasail_pairs, chunks, chunksize=1) for score in part]


def parasail_scores(pool, queries: list[str], name: str) -> tuple[list[list[int]], int]:
    """Every query against the pool's targets, longest queries first across the pool."""
    order = sorted(range(len(queries)), key=lambda k: -len(queries[k]))
    results = pool.map(_parasail_query, [(queries[k], name) for k in order], chunksize=1)
    scores: list[list[int]] = [[] for _ in queries]
    saturated = 0
    for k, (row, count) in zip(order, results):
        scores[k] = row
        saturated += count
    return scores, saturated


# ---------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------

def load(data_dir: Path, name: str) -> tuple[list[str], list[str]]:
    query_file, (q0, q1), target_file, (t0, t1) = ROWS[name]
    for path in (data_dir / query_file, data_dir / target_file):
        if not path.is_file():
            sys.exit(f"run_cpu_search.py: benchmark data not found: {path}\n  pass --data-dir "
                     f"pointing at the folder that holds it (shared/data beside the repository)")
    return (read_fasta(data_dir / query_file)[q0:q1], read_fasta(data_dir / target_file)[t0:t1])


def best(seconds: list[float]) -> str:
    return f"{min(seconds):.3f} s (median {sorted(seconds)[len(seconds) // 2]:.3f} s)"


def time_ours(run, labels: tuple[str, str], repeat: int, cells: int) -> dict:
    """Our side of a row of ``cells`` cells: ``run()``'s first call timed apart (compile or
    cache load included), then ``repeat`` warm calls with traceback (``labels[0]``) and
    without (``labels[1]``), each printed; ``{label: (seconds, last frame)}``."""
    started = time.perf_counter()
    run()
    print(f"  ours, first call (compile or cache load included): "
          f"{time.perf_counter() - started:.3f} s")
    ours = {}
    for label, extra in zip(labels, ({}, dict(traceback=False))):
        seconds, frame = ours[label] = timed_runs(lambda: run(**extra), repeat)
        print(f"  ours, {label}: {best(seconds)}, {cells / min(seconds) / 1e9:.1f} GCUPS")
    return ours


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_dir(parser)
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=DEFAULT_ROWS,
                        metavar="NAME", help=f"jobs to run: {' '.join(ROWS)} (default: "
                                             f"{' '.join(DEFAULT_ROWS)})")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="numba threads for ours and pool processes for parasail")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls of each (best "
                                                              "and median reported)")
    args = parser.parse_args(argv)

    import numba
    import pandas as pd

    import gpualign_df

    print(f"threads: {args.threads} numba / {args.threads} parasail processes; cpu_count "
          f"{os.cpu_count()}; load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    failed = False
    numba.set_num_threads(args.threads)
    for name in args.rows:
        if name in ALL_PAIRS:
            failed |= all_pairs_row(args, name)
            continue
        queries, targets = load(args.data_dir, name)
        cells = sum(map(len, queries)) * sum(map(len, targets))
        print(f"\n== {name}: {len(queries)} x {len(targets)} proteins, {cells / 1e9:.2f} "
              f"Gcells")
        q, t = pd.Series(queries), pd.Series(targets)
        options = dict(SEARCH_OPTIONS, how="search", backend="cpu", progress=False)
        ours = time_ours(lambda **extra: gpualign_df.align(q, t, **options, **extra),
                         ("top 10 with CIGARs", "score-only"), args.repeat, cells)
        pool = mp.get_context("spawn").Pool(args.threads, _worker_init, (targets,))
        try:
            pool.map(_parasail_query, [("ACDEFGHIK", "sw_striped_profile_16")] * args.threads)
            peer = {}
            for function in ("sw_striped_profile_16", "sw_striped_profile_sat"):
                seconds = []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    scores, saturated = parasail_scores(pool, queries, function)
                    seconds.append(time.perf_counter() - started)
                peer[function] = (seconds, scores)
                print(f"  parasail {function}, score-only: {best(seconds)}, "
                      f"{cells / min(seconds) / 1e9:.1f} GCUPS ({saturated} saturated)")
        finally:
            pool.close()
            pool.join()
        fastest = min(peer, key=lambda function: min(peer[function][0]))
        reference = min(peer[fastest][0])
        for label, (seconds, _frame) in ours.items():
            print(f"  ratio {label} against parasail {fastest}: "
                  f"{reference / min(seconds):.2f}x")
        expected = [sorted(row, reverse=True)[:TOP_K] for row in peer[fastest][1]]
        for label, (_seconds, frame) in ours.items():
            got = frame.groupby("query", sort=True)["score"].apply(list)
            wrong = sum(got.get(k, []) != expected[k] for k in range(len(queries)))
            print(f"  queries whose kept scores differ from parasail's best ({label}): "
                  f"{wrong}")
            failed |= wrong > 0
    return 1 if failed else 0


def all_pairs_row(args, name: str) -> bool:
    """The all-pairs row: ours with CIGARs and score-only, parasail with CIGARs; whether
    any score differs."""
    import numpy as np
    import pandas as pd

    import gpualign_df

    sequences, _ = load(args.data_dir, name)
    lengths = np.array([len(x) for x in sequences], np.int64)
    cells = int((lengths.sum() ** 2 - (lengths ** 2).sum()) // 2)
    print(f"\n== {name}: {len(sequences) * (len(sequences) - 1) // 2:,} pairs of "
          f"{len(sequences)} proteins, {cells / 1e9:.2f} Gcells")
    series = pd.Series(sequences)
    options = dict(how="pairwise", matrix="BLOSUM62", gap_open=GAP_OPEN, gap_extend=GAP_EXTEND,
                   backend="cpu", progress=False)
    ours = time_ours(lambda **extra: gpualign_df.align(series, **options, **extra),
                     ("with CIGARs", "score-only"), args.repeat, cells)
    pool = mp.get_context("spawn").Pool(args.threads, _worker_init, (sequences,))
    try:
        pool.map(_parasail_query, [("ACDEFGHIK", "sw_striped_profile_16")] * args.threads)
        seconds = []
        for _ in range(max(1, args.repeat // 3)):
            started = time.perf_counter()
            scores = parasail_all_pairs(pool, len(sequences))
            seconds.append(time.perf_counter() - started)
    finally:
        pool.close()
        pool.join()
    print(f"  parasail sw_trace_striped_16 with CIGARs: {best(seconds)}, "
          f"{cells / min(seconds) / 1e9:.1f} GCUPS")
    wrong = False
    for label, (mine, frame) in ours.items():
        print(f"  ratio {label} against parasail sw_trace_striped_16 with CIGARs: "
              f"{min(seconds) / min(mine):.2f}x")
        differ = int((frame["score"].to_numpy(np.int64) != np.array(scores)).sum())
        print(f"  pairs whose score differs from parasail's ({label}): {differ}")
        wrong |= differ > 0
    return wrong


if __name__ == "__main__":
    sys.exit(main())
