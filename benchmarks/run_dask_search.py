"""Issue-4/5 benchmark: search of 10,000 ADEPT proteins against all 30,000 (BLOSUM62, gap 11/1,
top_k 10, CIGAR for the hits) through the Dask accessor on a dask-cuda cluster of 1, 2, 4, 8...
GPUs of this node, against the in-memory cuDF accessor on one GPU; outputs must be identical.

The inputs are persisted on the cluster first (data already in Dask); the timed span runs
from ``.aln.search(...)`` (planning included) to the computed frame on the client. The same
plan (``--partitions`` query partitions, ``--tasks-per-partition``) serves every GPU count.

``python benchmarks/run_dask_search.py --gpus 1 2 4 8 [--in-memory]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def task_stream_summary(records: list[dict]) -> str:
    """Per worker: tasks, busy seconds, and the span from the first task start to the last end
    (relative to the earliest start on any worker) of the last computation."""
    if not records:
        return "no task stream"
    origin = min(r["startstops"][0]["start"] for r in records)
    workers: dict[str, list] = {}
    for record in records:
        for span in record["startstops"]:
            if span["action"] == "compute":
                workers.setdefault(record["worker"], []).append(
                    (span["start"] - origin, span["stop"] - origin, record["key"]))
    lines = []
    for worker, spans in sorted(workers.items()):
        busy = sum(stop - start for start, stop, _ in spans)
        names = {}
        for start, stop, key in spans:
            name = (key[0] if isinstance(key, tuple) else str(key)).rsplit("-", 1)[0]
            names[name] = names.get(name, 0) + 1
        lines.append(f"  {worker}: {len(spans)} tasks {names}, busy {busy:.2f} s, "
                     f"{min(s[0] for s in spans):.2f}-{max(s[1] for s in spans):.2f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, nargs="+", default=[1])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks-per-partition", type=int, default=8,
                        help="cells_per_task is set so each query partition makes this many")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--in-memory", action="store_true", help="also time the in-memory path")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(
        "GPUALIGN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")))
    args = parser.parse_args()
    from helpers import read_fasta

    proteins = read_fasta(args.data_dir / "adept_proteins_30k.fasta.gz")
    options = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1, top_k=10)
    lengths = [len(p) for p in proteins]
    rows = -(-args.queries // args.partitions)   # from_cudf(sort=False): equal row counts
    widest = max(sum(lengths[first:first + rows]) for first in range(0, args.queries, rows))
    sizing = dict(cells_per_task=widest * sum(lengths) / args.tasks_per_partition * 1.0001,
                  pairs_per_task=1e12)
    results = {}
    for gpus in args.gpus:
        from dask_cuda import LocalCUDACluster
        from distributed import Client, get_task_stream, wait

        with LocalCUDACluster(n_workers=gpus) as cluster, Client(cluster) as client:
            import cudf
            import dask_cudf

            import gpualign_df  # noqa: F401
            from gpualign_df.accessor.dask import summarize_plan

            database = cudf.Series(proteins)
            queries = database[:args.queries]
            dask_queries = dask_cudf.from_cudf(queries, npartitions=args.partitions,
                                               sort=False).persist()
            dask_database = dask_cudf.from_cudf(database, npartitions=args.partitions,
                                                sort=False).persist()
            wait([dask_queries, dask_database])
            warm = dask_cudf.from_cudf(queries[:400], npartitions=4 * gpus, sort=False)
            warm.aln.search(dask_database, **options, cells_per_task=1e9).compute()
            plan = summarize_plan(dask_queries.aln.plan(dask_database, top_k=10, **sizing))
            times, planning = [], []
            for _ in range(args.repeat):
                with get_task_stream(client) as stream:
                    started = time.perf_counter()
                    job = dask_queries.aln.search(dask_database, **options, **sizing)
                    planning.append(time.perf_counter() - started)
                    frame = job.compute()
                    times.append(time.perf_counter() - started)
            print(task_stream_summary(stream.data), flush=True)
            seconds = sorted(times)[len(times) // 2]
            results[gpus] = (seconds, frame.to_pandas())
            print(f"{gpus} GPU(s): median {seconds:.2f} s of {[round(t, 2) for t in times]} "
                  f"(planning {[round(t, 3) for t in planning]}), {len(frame):,} rows; plan: "
                  f"{plan['tasks']} tasks, spread {plan['spread']:.3f}", flush=True)
    base_gpus = args.gpus[0]
    base_seconds, base = results[base_gpus]
    print("| GPUs | seconds | speed-up | identical |")
    for gpus, (seconds, frame) in results.items():
        same = frame.reset_index(drop=True).equals(base.reset_index(drop=True))
        print(f"| {gpus} | {seconds:.2f} | {base_seconds * base_gpus / seconds:.2f}x | {same} |")
    if args.in_memory:
        import cudf

        import gpualign_df  # noqa: F401

        database = cudf.Series(proteins)
        queries = database[:args.queries]
        queries[:200].aln.search(database, **options)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            frame = queries.aln.search(database, **options)
            times.append(time.perf_counter() - started)
        seconds = sorted(times)[len(times) // 2]
        same = frame.to_pandas().reset_index(drop=True).equals(base.reset_index(drop=True))
        print(f"in-memory cuDF accessor, 1 GPU: median {seconds:.2f} s of "
              f"{[round(t, 2) for t in times]}; identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
