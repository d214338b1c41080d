"""Single-GPU protein search: ADEPT queries against all 30,000 ADEPT proteins (BLOSUM62,
gap_open 11, gap_extend 1, top_k 10, CIGAR for the hits), pandas Series in -> frame out, with
the kernel times, against parasail (``sw_striped_profile_16``, score-only, one profile per
query) on every CPU core for a sample of the queries; the best score per query must agree.

``python -m benchmarks.run_search [--queries 10000] [--parasail-queries 64] [--compare-32bit]``
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

from benchmarks.harness import (GAP_EXTEND, GAP_OPEN, SEARCH_OPTIONS, add_data_dir,
                                kernel_seconds, read_proteins)


def _parasail_best(job: tuple[str, list[str]]) -> int:
    """Best score of one query against the whole database (parasail, score-only)."""
    import parasail

    query, database = job
    profile = parasail.profile_create_16(query, parasail.blosum62)
    best = 0
    for target in database:
        result = parasail.sw_striped_profile_16(profile, target, GAP_OPEN, GAP_EXTEND)
        if result.saturated:
            result = parasail.sw_striped_32(query, target, GAP_OPEN, GAP_EXTEND, parasail.blosum62)
        best = max(best, result.score)
    return best


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--parasail-queries", type=int, default=64)
    parser.add_argument("--processes", type=int, default=os.cpu_count())
    parser.add_argument("--compare-32bit", action="store_true",
                        help="also time the search with packed 16-bit cells off")
    add_data_dir(parser)
    args = parser.parse_args()
    import pandas as pd

    proteins = read_proteins(args.data_dir)
    database = pd.Series(proteins)
    queries = database[:args.queries]
    lengths = database.str.len()
    cells = int(lengths[:args.queries].sum()) * int(lengths.sum())
    options = dict(SEARCH_OPTIONS, progress=False)
    peer = None
    if args.parasail_queries:
        sample = proteins[:args.parasail_queries]
        with mp.get_context("spawn").Pool(args.processes) as pool:
            started = time.perf_counter()
            peer_best = pool.map(_parasail_best, [(query, proteins) for query in sample],
                                 chunksize=1)
            peer_seconds = time.perf_counter() - started
        peer_cells = int(lengths[:len(sample)].sum()) * int(lengths.sum())
        peer = (len(sample), peer_seconds, peer_cells / peer_seconds / 1e9, peer_best)
    from gpualign_df import config, gpu

    queries[:100].aln.search(database, **options)   # compile
    started = time.perf_counter()
    frame = queries.aln.search(database, **options)
    seconds = time.perf_counter() - started
    kernels = kernel_seconds(lambda: queries.aln.search(database, **options))
    name = gpu.cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    print(f"device: {name}; {len(queries):,} x "
          f"{len(database):,} proteins, {cells / 1e12:.2f} Tcells, {len(frame):,} rows")
    print(f"| ours, end to end | {seconds:.2f} s | {cells / seconds / 1e9:.0f} GCUPS |")
    search_seconds = kernels.get("search", 0.0)
    print(f"| ours, search kernel only | {search_seconds:.2f} s | "
          f"{cells / search_seconds / 1e9:.0f} GCUPS |" if search_seconds else "")
    print(f"kernel seconds: { {name: round(value, 3) for name, value in kernels.items()} }")
    if args.compare_32bit:  # the same search on 32-bit cells (the packed path off)
        with config.override(search_16bit=False):
            queries[:100].aln.search(database, **options)
            started = time.perf_counter()
            frame32 = queries.aln.search(database, **options)
            seconds32 = time.perf_counter() - started
            kernel32 = kernel_seconds(
                lambda: queries.aln.search(database, **options)).get("search", 0.0)
        print(f"| ours, 32-bit cells, end to end | {seconds32:.2f} s | "
              f"{cells / seconds32 / 1e9:.0f} GCUPS |")
        print(f"| ours, 32-bit cells, search kernel only | {kernel32:.2f} s | "
              f"{cells / kernel32 / 1e9:.0f} GCUPS |")
        print(f"frames identical (16-bit vs 32-bit cells): {frame.equals(frame32)}")
    if peer:
        count, peer_seconds, peer_gcups, peer_best = peer
        ours_best = frame.groupby("query")["score"].max().reindex(range(count)).tolist()
        print(f"| parasail sw_striped_profile_16, {args.processes} processes, first {count} "
              f"queries | {peer_seconds:.2f} s | {peer_gcups:.1f} GCUPS | best score equal on "
              f"{sum(int(a) == int(b) for a, b in zip(ours_best, peer_best))}/{count} |")
        print(f"ours / parasail (GCUPS, end to end): {cells / seconds / 1e9 / peer_gcups:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
