"""Single-GPU protein search (BLOSUM62, gap_open 11, gap_extend 1, top_k 10, CIGARs for the
hits), pandas Series in -> frame out, with the kernel times; against parasail
(``sw_striped_profile_16``, score-only, one profile per query) on every CPU core for a
sample of the queries (the best score per query must agree), and against CUDASW++4.0's
published figure on the same GPU model (issue #19).

Workloads: ``w3b`` (default): the first ``--queries`` ADEPT proteins against all 30,000;
``w3``: the 20 classic queries (144-5,478 aa) against the ADEPT proteins 20 times over
(600,000 sequences; ``--copies 330`` makes the 10-million-sequence database of issue #19,
with ``--stream`` also searched tile by tile as a database larger than the GPU's memory).

``python -m benchmarks.run_search [--workload w3] [--copies 20] [--queries 10000]
[--parasail-queries 64] [--repeat 5] [--score-only] [--stream] [--progress]
[--compare-groups] [--compare-32bit] [--per-query]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from benchmarks.harness import (GAP_EXTEND, GAP_OPEN, SEARCH_OPTIONS, add_data_dir,
                                kernel_seconds, read_fasta, read_proteins)


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


#: CUDASW++4.0 ``--dpx --uploadFull`` on one H100 (issue #19), seconds end to end.
CUDASW4_SECONDS = {"w3": 0.74, "w3b": 3.88}
CLASSIC_QUERIES = "cudasw4_20_queries.fasta"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=["w3b", "w3"], default="w3b")
    parser.add_argument("--queries", type=int, default=10_000, help="w3b: ADEPT queries")
    parser.add_argument("--copies", type=int, default=20,
                        help="w3: copies of the ADEPT proteins in the database")
    parser.add_argument("--stream", action="store_true",
                        help="also time the search with the database streamed to the GPU "
                             "tile by tile (search_resident_bytes 0; gpu_memory_share 0.05, "
                             "so that it takes several tiles)")
    parser.add_argument("--progress", action="store_true", help="show the progress bars")
    parser.add_argument("--parasail-queries", type=int, default=64)
    parser.add_argument("--processes", type=int, default=os.cpu_count())
    parser.add_argument("--repeat", type=int, default=3, help="warm runs (median)")
    parser.add_argument("--score-only", action="store_true",
                        help="also time the search with traceback=False")
    parser.add_argument("--compare-groups", action="store_true",
                        help="also time the search without the grouped kernel")
    parser.add_argument("--compare-32bit", action="store_true",
                        help="also time the search with packed 16-bit cells off")
    parser.add_argument("--per-query", action="store_true",
                        help="score-only GCUPS of each query alone")
    parser.add_argument("--prepared", action="store_true",
                        help="search a database prepared once (gpualign_df.database, as "
                             "CUDASW++ searches the database its makedb wrote); the "
                             "preparation is timed apart")
    parser.add_argument("--best-json", type=Path, default=None,
                        help="write the best score of each query here (to check against "
                             "parasail where it is not installed)")
    add_data_dir(parser)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd

    proteins = read_proteins(args.data_dir)
    if args.workload == "w3":
        database = pd.Series(proteins * args.copies)
        queries = pd.Series(read_fasta(args.data_dir / CLASSIC_QUERIES))
    else:
        database = pd.Series(proteins)
        queries = database[:args.queries]
    query_lengths = queries.str.len()
    residues = int(database.str.len().sum())
    cells = int(query_lengths.sum()) * residues
    options = dict(SEARCH_OPTIONS, progress=args.progress)
    peer = None
    if args.parasail_queries:
        sample = queries.tolist()[:args.parasail_queries]
        with mp.get_context("spawn").Pool(args.processes) as pool:
            started = time.perf_counter()
            peer_best = pool.map(_parasail_best, [(query, proteins) for query in sample],
                                 chunksize=1)
            peer_seconds = time.perf_counter() - started
        peer_cells = int(query_lengths[:len(sample)].sum()) * int(sum(map(len, proteins)))
        peer = (len(sample), peer_seconds, peer_cells / peer_seconds / 1e9, peer_best)
    import gpualign_df
    from gpualign_df import config, gpu

    searched = database
    if args.prepared:
        started = time.perf_counter()
        searched = gpualign_df.database(database, matrix=options["matrix"])
        print(f"database prepared once in {time.perf_counter() - started:.3f} s (encoded; its "
              f"first search keeps its device copy and length classes)")

    def timed(**changes):
        """(first call s, median warm s, kernel seconds, frame) of the search."""
        run_options = dict(options, **{key: value for key, value in changes.items()
                                       if key == "traceback"})
        settings = {key: value for key, value in changes.items() if key != "traceback"}
        with config.override(**settings):
            started = time.perf_counter()
            queries.aln.search(searched, **run_options)
            first = time.perf_counter() - started
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                frame = queries.aln.search(searched, **run_options)
                times.append(time.perf_counter() - started)
            kernels = kernel_seconds(lambda: queries.aln.search(searched, **run_options))
        return first, float(np.median(times)), kernels, frame

    name = gpu.cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    print(f"device: {name}; workload {args.workload}: {len(queries):,} x {len(database):,} "
          f"proteins, {cells / 1e12:.2f} Tcells; median of {args.repeat} warm runs")
    peer_seconds = CUDASW4_SECONDS[args.workload] if (
        args.workload == "w3" and args.copies == 20) or (
        args.workload == "w3b" and len(queries) == 10_000) else None
    print("| run | first call | end to end | GCUPS | search kernel | kernel GCUPS | "
          "vs CUDASW++4.0 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    frames = {}

    def row(label, **changes):
        first, seconds, kernels, frame = timed(**changes)
        frames[label] = frame
        search_seconds = kernels.get("search", 0.0)
        ratio = f"{peer_seconds / seconds:.2f}x" if peer_seconds else "-"
        print(f"| {label} | {first:.2f} s | {seconds:.3f} s | {cells / seconds / 1e9:,.0f} | "
              f"{search_seconds:.3f} s | {cells / max(search_seconds, 1e-9) / 1e9:,.0f} | "
              f"{ratio} |", flush=True)
        print(f"  kernel seconds: { {key: round(value, 4) for key, value in kernels.items()} }",
              flush=True)

    ours = "ours, top 10 with CIGARs" + (" (prepared database)" if args.prepared else "")
    row(ours)
    if args.score_only:
        row("ours, score only", traceback=False)
    if args.stream:
        row("ours, database streamed tile by tile", search_resident_bytes=0,
            gpu_memory_share=0.05)
    if args.compare_groups:
        row("ours without the grouped kernel", search_groups=())
    if args.compare_32bit:
        row("ours, 32-bit cells", search_16bit=False)
    reference = frames[ours]
    for label, frame in frames.items():
        if "CIGARs" not in label and "score only" not in label:
            print(f"frame identical to the default's ({label}): {frame.equals(reference)}")
    if args.per_query:
        print("| query | length | seconds (score only) | GCUPS |")
        print("|---|---:|---:|---:|")
        for index in range(len(queries)):
            one = queries.iloc[index:index + 1]
            one.aln.search(searched, **dict(options, traceback=False))
            started = time.perf_counter()
            one.aln.search(searched, **dict(options, traceback=False))
            seconds = time.perf_counter() - started
            print(f"| {index} | {query_lengths.iloc[index]} | {seconds:.4f} | "
                  f"{query_lengths.iloc[index] * residues / seconds / 1e9:,.0f} |", flush=True)
    if args.best_json:
        best = reference.groupby("query")["score"].max().reindex(queries.index)
        args.best_json.write_text(json.dumps([int(value) for value in best]))
    if peer:
        count, peer_seconds, peer_gcups, peer_best = peer
        ours_best = reference.groupby("query")["score"].max().reindex(
            queries.index[:count]).tolist()
        equal = sum(int(a) == int(b) for a, b in zip(ours_best, peer_best))
        print(f"| parasail sw_striped_profile_16, {args.processes} processes, first {count} "
              f"queries vs the {len(proteins):,} distinct proteins | {peer_seconds:.2f} s | "
              f"{peer_gcups:.1f} GCUPS | best score equal on {equal}/{count} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
