"""Issue-4/5 benchmark: search of 10,000 ADEPT proteins against all 30,000 (BLOSUM62, gap 11/1,
top_k 10, CIGAR for the hits) through the Dask accessor on a dask-cuda cluster of 1, 2, 4, 8...
GPUs of this node, against the in-memory cuDF accessor on one GPU; outputs must be identical.
Series backed by cuDF, or by pandas with ``--pandas`` (the tasks then run the GPU engine on
pandas partitions, ``backend="cuda"``).

The inputs are persisted on the cluster first (data already in Dask); the timed span runs
from ``.aln.search(...)`` (planning included) to the computed frame on the client. The same
plan (``--partitions`` query partitions, ``--tasks-per-partition``) serves every GPU count.

The cluster is ``gpualign_df.cluster(gpus)`` (dask-cuda, one worker per GPU, RMM's async
allocator unless ``--rmm none``).

A database used by an earlier search already has copies of its partitions on the workers
that ran it (the cluster keeps them; with ``--memory-manager``, Dask's default, they are
dropped whenever the memory manager runs between two searches), so the timed runs, after
one untimed run of the job, do not move it; ``--cold-database`` also times one search of
a database persisted anew, partitions not yet copied and lengths not yet planned.

``python -m benchmarks.run_dask_search --gpus 1 2 4 8 [--tasks-per-partition 8 1] [--in-memory]
[--cold-database] [--detail] [--pandas]``
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.harness import (SEARCH_OPTIONS, add_cluster_arguments, add_data_dir,
                                read_proteins, timed_runs)


def task_stream_summary(records: list[dict], started: float, planned: float,
                        finished: float) -> str:
    """Where the wall time of one computation went: client planning, the wait for the first
    task, per worker tasks / busy seconds / span, and the gap from the last task to the frame
    on the client (times from ``time.time()``; workers share the node's clock)."""
    if not records:
        return "no task stream"
    workers: dict[str, list] = {}
    transfers = 0.0
    for record in records:
        for span in record["startstops"]:
            if span["action"] == "compute":
                workers.setdefault(record["worker"], []).append(
                    (span["start"] - started, span["stop"] - started, record["key"]))
            elif span["action"] == "transfer":
                transfers += span["stop"] - span["start"]
    first = min(s[0] for spans in workers.values() for s in spans)
    last = max(s[1] for spans in workers.values() for s in spans)
    lines = [(f"  planning {planned - started:.3f} s, first task starts {first:.3f} s, last "
              f"task ends {last:.3f} s, frame on client {finished - started:.3f} s; "
              f"transfers {transfers:.2f} s in all")]
    for worker, spans in sorted(workers.items()):
        busy = sum(stop - start for start, stop, _ in spans)
        names: dict[str, int] = {}
        for _, _, key in spans:
            name = (key[0] if isinstance(key, tuple) else str(key)).rsplit("-", 1)[0]
            names[name] = names.get(name, 0) + 1
        durations = sorted(stop - start for start, stop, _ in spans)
        lines.append(f"  {worker}: {len(spans)} tasks {names}, busy {busy:.2f} s, "
                     f"{min(s[0] for s in spans):.2f}-{max(s[1] for s in spans):.2f} s, "
                     f"task seconds min {durations[0]:.3f} median "
                     f"{durations[len(durations) // 2]:.3f} max {durations[-1]:.3f}")
    return "\n".join(lines)


def task_stream_detail(records: list[dict], started: float) -> str:
    """Every compute and transfer span of one computation, per worker, in ms from the start
    (transfers with their source worker's port and bytes)."""
    rows: dict[str, list] = {}
    for record in records:
        for span in record["startstops"]:
            key = record["key"]
            name = (key[0] if isinstance(key, tuple) else str(key)).rsplit("-", 1)[0]
            if span["action"] == "transfer":
                label = (f"transfer from :{str(span.get('source', '?')).rsplit(':', 1)[-1]} "
                         f"{record.get('nbytes', 0) / 1e6:.2f} MB")
            else:
                label = f"{span['action']} {name}"
            rows.setdefault(record["worker"], []).append(
                (1e3 * (span["start"] - started), 1e3 * (span["stop"] - started), label))
    lines = []
    for worker, spans in sorted(rows.items()):
        lines.append(f"  {worker}:")
        lines.extend(f"    {start:8.1f} {stop:8.1f} ms  {label}" for start, stop, label in
                     sorted(spans))
    return "\n".join(lines)


def time_search(client, dask_queries, dask_database, options: dict,
                repeat: int, detail: bool = False, pause: float = 0.0) -> tuple[float, object]:
    """Median seconds from ``.aln.search(...)`` to the frame on the client, and the frame
    (pandas); prints where the time of each run went. ``pause``: seconds to wait, untimed,
    before each run."""
    from distributed import get_task_stream

    times, planning = [], []
    for _ in range(repeat):
        time.sleep(pause)
        with get_task_stream(client) as stream:
            started = time.time()
            job = dask_queries.aln.search(dask_database, **options)
            planned = time.time()
            frame = job.compute()
            finished = time.time()
        times.append(finished - started)
        planning.append(planned - started)
        print(task_stream_summary(stream.data, started, planned, finished), flush=True)
        if detail:
            print(task_stream_detail(stream.data, started), flush=True)
    print(f"  runs {[round(t, 2) for t in times]} s, planning "
          f"{[round(t, 3) for t in planning]} s", flush=True)
    return sorted(times)[len(times) // 2], _on_host(frame)


def _on_host(frame):
    """A result frame as pandas (cuDF frames copied to the host)."""
    return frame.to_pandas() if hasattr(frame, "to_pandas") else frame


def _series(values: list[str], on_pandas: bool):
    """The sequences as a cuDF Series, or a pandas one with ``--pandas``."""
    if on_pandas:
        import pandas as pd

        return pd.Series(values)
    import cudf

    return cudf.Series(values)


def _partitioned(series, npartitions: int):
    """A Dask Series of ``series`` in ``npartitions`` equal partitions, in order."""
    if hasattr(series, "to_pandas"):
        import dask_cudf

        return dask_cudf.from_cudf(series, npartitions=npartitions, sort=False)
    import dask.dataframe as dd

    return dd.from_pandas(series, npartitions=npartitions, sort=False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, nargs="+", default=[1])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--database-partitions", type=int, nargs="+", default=[8],
                        help="partitions of the persisted database; several values: each is "
                             "timed on every cluster")
    parser.add_argument("--tasks-per-partition", type=int, nargs="+", default=[0],
                        help="cells_per_task is set so each query partition makes this many "
                             "(0: the accessor's default sizing); several values: each is "
                             "timed on every cluster")
    parser.add_argument("--rmm", choices=["async", "none"], default="async",
                        help="the workers' allocator: gpualign_df.cluster's default "
                             "(rmm_async) or plain cudaMalloc/cudaFree")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-manager", action="store_true",
                        help="start Dask's active memory manager on the cluster (Dask's "
                             "default; gpualign_df.cluster(keep_replicas=False)): it drops "
                             "the database copies a search made between searches")
    parser.add_argument("--replicate-database", action="store_true",
                        help="also time each plan with the database's partitions copied to "
                             "every worker beforehand (Client.replicate, outside the timing)")
    parser.add_argument("--cold-database", action="store_true",
                        help="also time one run per setting on a database persisted anew "
                             "(its partitions not yet copied to every worker by an earlier "
                             "search, its lengths not yet planned)")
    parser.add_argument("--detail", action="store_true",
                        help="print every compute and transfer span of every run")
    parser.add_argument("--in-memory", action="store_true", help="also time the in-memory path")
    parser.add_argument("--pandas", action="store_true",
                        help="pandas-backed Series (the tasks run the GPU engine on pandas "
                             "partitions: backend='cuda') instead of cuDF-backed ones")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds to wait, untimed, before each timed run, so that it "
                             "starts from an idle client as a single job does: a client "
                             "sends its messages to the scheduler at most every 10 ms, so a "
                             "job submitted right after the previous run released its "
                             "result waits for that batch")
    add_cluster_arguments(parser)
    add_data_dir(parser)
    args = parser.parse_args()
    proteins = read_proteins(args.data_dir)
    options = dict(SEARCH_OPTIONS, backend="cuda") if args.pandas else dict(SEARCH_OPTIONS)
    lengths = [len(p) for p in proteins]
    rows = -(-args.queries // args.partitions)   # from_cudf(sort=False): equal row counts
    widest = max(sum(lengths[first:first + rows]) for first in range(0, args.queries, rows))
    results = {}
    for gpus in args.gpus:
        from distributed import wait

        import gpualign_df

        cluster_options = {} if args.rmm == "async" else {"rmm_async": False}
        cluster_options["keep_replicas"] = not args.memory_manager
        cluster_options["trim_host_memory"] = args.trim_host_memory or None
        with gpualign_df.cluster(gpus, **cluster_options) as client:
            from gpualign_df.dask import summarize_plan

            database = _series(proteins, args.pandas)
            queries = database[:args.queries]
            dask_queries = _partitioned(queries, args.partitions).persist()
            wait(dask_queries)
            for database_partitions in args.database_partitions:
                dask_database = _partitioned(database, database_partitions).persist()
                wait(dask_database)
                # one untimed run of the job: every worker compiles / loads the kernels,
                # copies the database partitions it lacks, and the scheduler learns the
                # tasks' duration (the --cold-database run shows a first search)
                dask_queries.aln.search(dask_database, **options).compute()
                for per_partition, replicated in [(p, r) for r in ((False, True) if
                                                   args.replicate_database else (False,))
                                                   for p in args.tasks_per_partition]:
                    if replicated:
                        from distributed import futures_of

                        client.replicate(futures_of(dask_database))
                    sizing = {} if per_partition == 0 else {
                        "cells_per_task": widest * sum(lengths) / per_partition * 1.0001,
                        "pairs_per_task": 1e12}
                    plan = summarize_plan(dask_queries.aln.plan(
                        dask_database, top_k=options["top_k"],
                        backend=options.get("backend", "auto"), **sizing))
                    seconds, frame = time_search(client, dask_queries, dask_database,
                                                 {**options, **sizing}, args.repeat,
                                                 args.detail, args.pause)
                    results[(gpus, database_partitions, per_partition, replicated)] = (
                        seconds, frame, plan["tasks"])
                    if args.cold_database:
                        # a new name, so new keys: nothing of it on any worker but its holder
                        fresh = _partitioned(database.rename(f"cold{len(results)}"),
                                             database_partitions).persist()
                        wait(fresh)
                        cold, cold_frame = time_search(client, dask_queries, fresh,
                                                       {**options, **sizing}, 1, args.detail,
                                                       args.pause)
                        same = cold_frame.reset_index(drop=True).equals(
                            frame.reset_index(drop=True))
                        print(f"{gpus} GPU(s), a newly persisted database: {cold:.2f} s "
                              f"(first search of it; identical: {same})", flush=True)
                        del fresh
                    print(f"{gpus} GPU(s), database in {database_partitions} partitions"
                          f"{' (replicated)' if replicated else ''}, {plan['tasks']} tasks "
                          f"(spread {plan['spread']:.3f}): median {seconds:.2f} s, "
                          f"{len(frame):,} rows", flush=True)
    base = next(iter(results.values()))[1]
    print("| GPUs | database partitions | replicated beforehand | tasks per query partition | "
          "tasks | seconds | speed-up over 1 GPU | identical |")
    for (gpus, database_partitions, per_partition, replicated), (seconds, frame, tasks) in \
            results.items():
        single = results.get((1, database_partitions, per_partition, replicated))
        speedup = f"{single[0] / seconds:.2f}x" if single else "-"
        same = frame.reset_index(drop=True).equals(base.reset_index(drop=True))
        print(f"| {gpus} | {database_partitions} | {'yes' if replicated else 'no'} | "
              f"{per_partition or 'default'} | {tasks} | {seconds:.2f} | {speedup} | {same} |")
    if args.in_memory:
        database = _series(proteins, args.pandas)
        queries = database[:args.queries]
        in_memory = dict(options, progress=False)
        queries[:200].aln.search(database, **in_memory)
        times, frame = timed_runs(lambda: queries.aln.search(database, **in_memory),
                                  args.repeat)
        seconds = sorted(times)[len(times) // 2]
        same = _on_host(frame).reset_index(drop=True).equals(base.reset_index(drop=True))
        print(f"in-memory {'pandas' if args.pandas else 'cuDF'} accessor, 1 GPU: median "
              f"{seconds:.2f} s of "
              f"{[round(t, 2) for t in times]}; identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
