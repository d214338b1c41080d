"""Issue-4 benchmark: search of 10,000 ADEPT proteins against all 30,000 (BLOSUM62, gap 11/1,
top_k 10, CIGAR for the hits) through the Dask accessor on a dask-cuda cluster of 1, 2, 4...
GPUs of this node, against the in-memory cuDF accessor on one GPU; outputs must be identical.

``python benchmarks/run_dask_search.py --gpus 1 2 4 [--queries 10000]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, nargs="+", default=[1])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--partitions-per-gpu", type=int, default=4)
    parser.add_argument("--in-memory", action="store_true", help="also time the in-memory path")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(
        "GPUALIGN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")))
    args = parser.parse_args()
    from helpers import read_fasta

    proteins = read_fasta(args.data_dir / "adept_proteins_30k.fasta.gz")
    options = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1, top_k=10)
    results = {}
    for gpus in args.gpus:
        from dask_cuda import LocalCUDACluster
        from distributed import Client

        with LocalCUDACluster(n_workers=gpus) as cluster, Client(cluster):
            import cudf
            import dask_cudf

            import gpualign_df  # noqa: F401

            database = cudf.Series(proteins)
            queries = database[:args.queries]
            partitions = gpus * args.partitions_per_gpu
            dask_queries = dask_cudf.from_cudf(queries, npartitions=partitions, sort=False)
            dask_database = dask_cudf.from_cudf(database, npartitions=partitions, sort=False)
            job = dask_queries.aln.search(dask_database, **options)
            small = dask_cudf.from_cudf(queries[:200], npartitions=gpus, sort=False).aln.search(
                dask_database, **options)
            small.compute()  # compile kernels on every worker
            started = time.perf_counter()
            frame = job.compute()
            seconds = time.perf_counter() - started
            results[gpus] = (seconds, frame.to_pandas())
            print(f"{gpus} GPU(s): {seconds:.2f} s, {len(frame):,} rows", flush=True)
    base_seconds, base = results[args.gpus[0]]
    for gpus, (seconds, frame) in results.items():
        same = frame.reset_index(drop=True).equals(base.reset_index(drop=True))
        print(f"| {gpus} | {seconds:.2f} | {base_seconds * args.gpus[0] / seconds / args.gpus[0]:.2f}x "
              f"| identical to {args.gpus[0]} GPU: {same} |")
    if args.in_memory:
        import cudf

        import gpualign_df  # noqa: F401

        database = cudf.Series(proteins)
        queries = database[:args.queries]
        queries[:200].aln.search(database, **options)
        started = time.perf_counter()
        frame = queries.aln.search(database, **options)
        seconds = time.perf_counter() - started
        same = frame.to_pandas().reset_index(drop=True).equals(base.reset_index(drop=True))
        print(f"in-memory cuDF accessor, 1 GPU: {seconds:.2f} s; identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
