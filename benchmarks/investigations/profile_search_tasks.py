"""Per-task cost of a broadcast Dask search task without Dask: the 10,000 ADEPT queries in
chunks of ``--chunk`` rows, each searched against all 30,000 proteins through the cuDF
accessor (as a task does), with and without an RMM pool; cProfile of one chunk.

``python -m benchmarks.investigations.profile_search_tasks [--chunk 157] [--pool]``
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

from benchmarks.harness import SEARCH_OPTIONS, add_data_dir, kernel_seconds, read_proteins


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunk", type=int, default=157)
    parser.add_argument("--pool", action="store_true", help="RMM pool allocator first")
    add_data_dir(parser)
    args = parser.parse_args()
    if args.pool:
        import rmm

        rmm.reinitialize(pool_allocator=True, initial_pool_size=2**34)
    import cudf

    import gpualign_df  # noqa: F401

    database = cudf.Series(read_proteins(args.data_dir))
    options = dict(SEARCH_OPTIONS)
    database[:args.chunk].aln.search(database, **options)
    started = time.perf_counter()
    for first in range(0, 10_000, args.chunk):
        database[first:first + args.chunk].aln.search(database, **options)
    seconds = time.perf_counter() - started
    calls = -(-10_000 // args.chunk)
    kernels = kernel_seconds(lambda: database[:args.chunk].aln.search(database, **options))
    print(f"pool={args.pool}: {calls} chunks of {args.chunk}: {seconds:.2f} s, "
          f"{seconds / calls * 1e3:.1f} ms per chunk; kernels of one chunk "
          f"{ {k: round(v * 1e3, 1) for k, v in kernels.items()} } ms")
    profiler = cProfile.Profile()
    profiler.enable()
    database[:args.chunk].aln.search(database, **options)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
