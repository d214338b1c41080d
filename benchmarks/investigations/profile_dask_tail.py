"""Where a Dask search's fixed cost goes: the part of a run that does not shrink with more
GPUs (the wait for the first task, the final concatenation, the transfers after the last
task), timed piece by piece on a persisted result of the issue-4 job (10,000 ADEPT
proteins against all 30,000, top_k 10, CIGAR for the hits; queries in 8 partitions,
database in 4).

Prints: a round trip of a trivial task; the whole job; the output partitions gathered to
the client and concatenated there; the persisted output concatenated on a worker and
fetched (what ``compute()`` adds after the last alignment task); on each worker, the
serialization of its output partitions (what a transfer copies) and their concatenation;
then, run by run, the tail of the job split at the join's start and end and at the moment
the client hears the joined frame is ready; and the pieces of fetching the joined frame
(the ``who_has`` call a direct gather makes, the worker's serialization, the client's
deserialization).

``python -m benchmarks.investigations.profile_dask_tail [--gpus 1] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from benchmarks.harness import (SEARCH_OPTIONS, add_cluster_arguments, add_data_dir,
                                read_proteins, timed_runs)


def _median_ms(function, repeat: int) -> float:
    seconds, _ = timed_runs(function, repeat)
    return 1e3 * sorted(seconds)[len(seconds) // 2]


def on_worker(keys, repeat, dask_worker=None):
    """Serialization and concatenation costs of this worker's output partitions."""
    import cudf
    from distributed.protocol import deserialize, serialize

    parts = [dask_worker.data[key] for key in keys if key in dask_worker.data]
    if not parts:
        return "no output partitions here"
    header, frames = serialize(parts[0], serializers=("dask", "pickle"))
    part_bytes = sum(memoryview(frame).nbytes for frame in frames)
    serialize_ms = _median_ms(lambda: serialize(parts[0], serializers=("dask", "pickle")), repeat)
    deserialize_ms = _median_ms(lambda: deserialize(header, frames), repeat)
    concat_ms = _median_ms(lambda: cudf.concat(parts), repeat)
    concat_ignore_ms = _median_ms(lambda: cudf.concat(parts, ignore_index=True), repeat)
    try:
        import pylibcudf as plc

        tables = [part.to_pylibcudf()[0] for part in parts]
        table_ms = _median_ms(lambda: plc.concatenate.concatenate(tables), repeat)
    except (ImportError, AttributeError, TypeError) as error:
        table_ms = float("nan")
        print(f"pylibcudf concatenate: {error!r}")
    from gpualign_df.dask.graph import concatenate_outputs as _concatenate_outputs

    ours_ms = _median_ms(lambda: _concatenate_outputs(parts), repeat)
    columns = {name: str(dtype) for name, dtype in parts[0].dtypes.items()}
    masks = sum(bool(getattr(parts[0][name], "nullable", False)) for name in parts[0].columns)
    return (f"{len(parts)} partitions of {len(parts[0]):,} rows; one partition: "
            f"{len(frames)} frames, {part_bytes / 1e6:.2f} MB, serialize {serialize_ms:.2f} ms, "
            f"deserialize {deserialize_ms:.2f} ms; cudf.concat of its partitions "
            f"{concat_ms:.2f} ms ({concat_ignore_ms:.2f} ms with ignore_index, "
            f"{table_ms:.2f} ms as pylibcudf tables, {ours_ms:.2f} ms by "
            f"_concatenate_outputs, the whole frame); "
            f"index {type(parts[0].index).__name__}; {masks} nullable columns; {columns}")


def serialize_held(key, repeat, dask_worker=None):
    """Serialization of the frame under ``key`` on the worker holding it."""
    from distributed.protocol import serialize

    if key not in dask_worker.data:
        return None
    frame = dask_worker.data[key]
    header, frames = serialize(frame, serializers=("dask", "pickle"))
    milliseconds = _median_ms(lambda: serialize(frame, serializers=("dask", "pickle")), repeat)
    return (f"{len(frames)} frames, {sum(memoryview(f).nbytes for f in frames) / 1e6:.2f} MB, "
            f"serialize {milliseconds:.2f} ms")


def split_tail(client, job_of, repeat: int) -> None:
    """Per run: the last alignment task's end, the join's start and end, the client told
    the joined frame is ready (a done-callback on the future) and the frame on the client,
    in ms from the start."""
    from distributed import get_task_stream

    for _ in range(repeat):
        told = []
        with get_task_stream(client) as stream:
            started = time.time()
            future = client.compute(job_of())
            future.add_done_callback(lambda _: told.append(time.time()))
            future.result()
            finished = time.time()
            del future   # else the next job, of the same keys, would find the frame made
        spans = [(span["start"], span["stop"], str(record["key"]))
                 for record in stream.data for span in record["startstops"]
                 if span["action"] == "compute"]
        joins = [span for span in spans if "concatenate" in span[2]]
        last = max(stop for _, stop, key in spans if "concatenate" not in key)
        join_start, join_stop = (joins[0][0], joins[0][1]) if joins else (last, last)
        print(f"  tail (ms from start): last alignment ends {1e3 * (last - started):.1f}, "
              f"join {1e3 * (join_start - started):.1f}-{1e3 * (join_stop - started):.1f}, "
              f"client told {1e3 * (told[0] - started) if told else float('nan'):.1f}, "
              f"frame on client {1e3 * (finished - started):.1f}", flush=True)


def fetch_pieces(client, result, repeat: int) -> None:
    """The pieces of fetching a joined output frame to the client."""
    from distributed import wait
    from distributed.protocol import deserialize, serialize

    joined = client.compute(result)
    wait(joined)
    fetch = _median_ms(lambda: joined.result(), repeat)
    who_has = _median_ms(lambda: client.who_has([joined]), repeat)
    on_holder = [line for line in client.run(serialize_held, joined.key, repeat).values()
                 if line]
    frame = joined.result()
    header, frames = serialize(frame, serializers=("dask", "pickle"))
    deserialize_ms = _median_ms(lambda: deserialize(header, frames), repeat)
    noop = _median_ms(lambda: client.run(len, []), repeat)
    print(f"  joined frame ({len(frame):,} rows): fetch to the client {fetch:.1f} ms; "
          f"who_has {who_has:.1f} ms; on its worker {on_holder}; deserialize on the client "
          f"{deserialize_ms:.2f} ms; a no-op client.run {noop:.1f} ms", flush=True)


def _set_offload(threshold: int) -> None:
    from distributed.comm import utils

    utils.OFFLOAD_THRESHOLD = threshold


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, nargs="+", default=[1])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--database", type=int, default=None, help="first N proteins only")
    add_cluster_arguments(parser)
    add_data_dir(parser)
    args = parser.parse_args()
    proteins = read_proteins(args.data_dir, limit=args.database)
    options = dict(SEARCH_OPTIONS)
    for gpus in args.gpus:
        from distributed import futures_of, wait

        import gpualign_df

        with gpualign_df.cluster(
                gpus, trim_host_memory=args.trim_host_memory or None) as client:
            import cudf
            import dask_cudf

            database = cudf.Series(proteins)
            dask_queries = dask_cudf.from_cudf(database[:args.queries], npartitions=8,
                                               sort=False).persist()
            dask_database = dask_cudf.from_cudf(database, npartitions=4, sort=False).persist()
            wait([dask_queries, dask_database])
            dask_queries.aln.search(dask_database, **options).compute()
            trivial = _median_ms(lambda: client.submit(time.time, pure=False).result(),
                                 args.repeat)
            whole = _median_ms(
                lambda: dask_queries.aln.search(dask_database, **options).compute(),
                args.repeat)
            # before the output is persisted: a job of the same keys would read it
            split_tail(client, lambda: dask_queries.aln.search(dask_database, **options),
                       args.repeat)
            result = dask_queries.aln.search(dask_database, **options).persist()
            wait(result)
            futures = futures_of(result)
            gather = _median_ms(lambda: client.gather(futures), args.repeat)
            parts = client.gather(futures)
            client_concat = _median_ms(lambda: cudf.concat(parts), args.repeat)
            tail = _median_ms(lambda: result.compute(), args.repeat)
            print("workers' MALLOC_TRIM_THRESHOLD_:", set(client.run(
                os.environ.get, "MALLOC_TRIM_THRESHOLD_").values()))
            print(f"{gpus} GPU(s): trivial task round trip {trivial:.1f} ms; whole job "
                  f"{whole:.0f} ms; on the persisted output: compute() (concatenate on a "
                  f"worker, fetch) {tail:.1f} ms, gather the {len(futures)} partitions "
                  f"{gather:.1f} ms + cudf.concat on the client {client_concat:.1f} ms",
                  flush=True)
            keys = [future.key for future in futures]
            for worker, line in client.run(on_worker, keys, args.repeat).items():
                print(f"  {worker}: {line}", flush=True)
            # serialization of frames above distributed.comm.offload (10 MiB) runs in a
            # thread pool; the same with it done in the event loop
            client.run(_set_offload, 1 << 40)
            _set_offload(1 << 40)
            tail = _median_ms(lambda: result.compute(), args.repeat)
            gather = _median_ms(lambda: client.gather(futures), args.repeat)
            print(f"  no offloaded serialization: compute() {tail:.1f} ms, gather "
                  f"{gather:.1f} ms", flush=True)
            client.run(_set_offload, 10 << 20)
            _set_offload(10 << 20)
            fetch_pieces(client, result, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
