"""One Dask search task's job on each GPU of this node, alone and on all GPUs at once.

Tells apart two reasons why a task can take longer in a several-GPU run than in a one-GPU
run: the GPUs themselves differing in speed (each one alone), and the runs disturbing one
another when they share the host (all at once, one process per GPU, every repeat started
together behind a barrier). The job is a task of the issue-4 search: ``--queries`` ADEPT
proteins against all 30,000 (BLOSUM62, gap 11/1, top_k 10, CIGARs for the hits), pandas in
(``--cudf``: cuDF in and out, as a task of the Dask search on cuDF), GPU engine. Each GPU's
frames must equal GPU 0's.

``python -m benchmarks.investigations.per_gpu_speed [--queries 1250] [--repeat 5] [--cudf]``
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import SEARCH_OPTIONS, add_data_dir, read_proteins


def _serve(gpu: int, connection, barrier, data_dir: Path, queries: int,
           database_rows: int | None, backend: str, threads: int | None,
           kernel_times: bool, on_cudf: bool) -> None:
    """One process on one GPU: runs the job on request, ``repeat`` times, and answers the
    seconds of each run (and of its kernels) and a digest of the last frame."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if threads:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
    import pandas as pd

    import gpualign_df  # noqa: F401
    from gpualign_df import config, gpu as engine

    database = pd.Series(read_proteins(data_dir, limit=database_rows))
    if on_cudf:
        import cudf

        database = cudf.Series(database)
    query_rows = database[:queries]
    options = dict(SEARCH_OPTIONS, backend=backend, progress=False)
    query_rows.aln.search(database, **options)   # compile, warm the buffers
    connection.send("ready")
    while True:
        request = connection.recv()
        if request is None:
            return
        repeat, together = request
        seconds, kernels = [], []
        for _ in range(repeat):
            if together:
                barrier.wait()
            engine.KERNEL_SECONDS.clear()
            started = time.perf_counter()
            with config.override(time_kernels=kernel_times):
                frame = query_rows.aln.search(database, **options)
            seconds.append(time.perf_counter() - started)
            kernels.append(sum(engine.KERNEL_SECONDS.values()))
        if on_cudf:
            frame = frame.to_pandas()
        digest = int(pd.util.hash_pandas_object(frame, index=False).sum())
        connection.send((seconds, kernels, digest))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1250)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gpus", type=int, default=None, help="default: every GPU")
    parser.add_argument("--database", type=int, default=None, help="first N proteins only")
    parser.add_argument("--backend", default="cuda", help="cpu: a check of this script")
    parser.add_argument("--threads", type=int, default=None,
                        help="NUMBA_NUM_THREADS of each process (default: numba's, every core)")
    parser.add_argument("--kernel-times", action="store_true",
                        help="also time the kernels (CUDA events: the host waits on each)")
    parser.add_argument("--cudf", action="store_true", help="cuDF Series in, cuDF frame out")
    add_data_dir(parser)
    args = parser.parse_args()
    gpus = args.gpus
    if gpus is None:
        from numba import cuda

        gpus = len(cuda.gpus)
    context = mp.get_context("spawn")
    barrier = context.Barrier(gpus)
    connections, processes = [], []
    for gpu in range(gpus):
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(gpu, theirs, barrier, args.data_dir,
                                                      args.queries, args.database, args.backend,
                                                      args.threads, args.kernel_times,
                                                      args.cudf))
        process.start()
        connections.append(ours)
        processes.append(process)
    for connection in connections:
        assert connection.recv() == "ready"
    print(f"{args.queries} ADEPT queries x {args.database or 30_000:,} proteins, top_k 10, "
          f"CIGARs, {'cuDF' if args.cudf else 'pandas'} in; median of {args.repeat} runs per "
          f"GPU; NUMBA_NUM_THREADS {args.threads or 'default'}")
    digests = set()
    for together in (False, True, False):
        answers = []
        if together:
            for connection in connections:
                connection.send((args.repeat, True))
            answers = [connection.recv() for connection in connections]
        else:
            for connection in connections:
                connection.send((args.repeat, False))
                answers.append(connection.recv())
        digests.update(digest for _, _, digest in answers)
        print(f"  {'all at once' if together else 'each alone '}: " + ", ".join(
            f"GPU {gpu} {statistics.median(seconds):.4f} s ({min(seconds):.4f}-"
            f"{max(seconds):.4f})" + (f", kernels {statistics.median(kernels):.4f} s"
                                      if args.kernel_times else "")
            for gpu, (seconds, kernels, _) in enumerate(answers)), flush=True)
    for connection in connections:
        connection.send(None)
    for process in processes:
        process.join()
    print(f"frames identical on every GPU: {len(digests) == 1}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
