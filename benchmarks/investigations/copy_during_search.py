"""How long another thread's device-to-host copy waits while a search or a large fill runs.

A Dask worker that sends a cuDF partition to another worker copies it to the host on the
default stream, from its communication thread, while its task thread may be running a
job. This runs one Dask search task's job (``--queries`` ADEPT proteins against all
30,000, BLOSUM62, gap 11/1, top_k 10, CIGAR for the hits; pandas in, GPU engine), then a
rowwise job of ``--pairs`` random pairs of those proteins (same scoring, CIGARs: fill
batches above the ``side_stream_cells`` setting), in one thread while a second thread copies a
2 MB device array to the host every ``--every`` ms (``cupy.asnumpy``, default stream) and
times each copy; with the long kernels on the engine's side stream (the ``side_stream`` setting,
the default) and on the default stream, in alternation. Also checks that both give the
same frames.

``python -m benchmarks.investigations.copy_during_search [--queries 1250] [--pairs 2000000]
[--repeat 3]``
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.harness import SCORING, SEARCH_OPTIONS, add_data_dir, read_proteins


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1250)
    parser.add_argument("--pairs", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--every", type=float, default=10.0, help="ms between copies")
    add_data_dir(parser)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd
    from tests.helpers import copies_while

    import gpualign_df  # noqa: F401
    from gpualign_df import config

    database = pd.Series(read_proteins(args.data_dir))
    queries = database[:args.queries]
    options = dict(SCORING, backend="cuda")
    rng = np.random.default_rng(5)
    row_queries = database.iloc[rng.integers(0, len(database), args.pairs)].reset_index(drop=True)
    row_targets = database.iloc[rng.integers(0, len(database), args.pairs)].reset_index(drop=True)
    jobs = {
        f"search {args.queries} x {len(database)}":
            lambda: queries.aln.search(database, top_k=SEARCH_OPTIONS["top_k"], **options),
        f"rowwise {args.pairs:,} pairs": lambda: row_queries.aln.rowwise(row_targets, **options)}
    same = True
    for name, job in jobs.items():
        job()  # compile, warm the buffers
        frames = {}
        print(f"{name}; a 2 MB copy every {args.every:g} ms from a second thread")
        for _ in range(args.repeat):
            for side in (False, True):
                with config.override(side_stream=side):
                    seconds, copies, frame = copies_while(job, args.every / 1e3)
                frames[side] = frame
                copies_ms = sorted(1e3 * c for c in copies)
                print(f"  long kernels on the {'side' if side else 'default'} stream: job "
                      f"{seconds:.3f} s; {len(copies_ms)} copies, median "
                      f"{copies_ms[len(copies_ms) // 2]:.2f} ms, longest "
                      f"{copies_ms[-1]:.1f} ms", flush=True)
        same = same and frames[False].equals(frames[True])
        print(f"  frames identical: {frames[False].equals(frames[True])}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
