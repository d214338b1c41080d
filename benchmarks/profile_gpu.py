"""Where the host time of a GPU job goes: cProfile of one end-to-end W1 run (local, traceback).

``python benchmarks/profile_gpu.py [--replicate 10]`` on a GPU machine.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--traceback", type=int, default=1)
    parser.add_argument("--cudf", action="store_true", help="cuDF Series in, cuDF frame out")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(
        "GPUALIGN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")))
    args = parser.parse_args()
    import pandas as pd

    import gpualign_df
    from helpers import read_fasta

    queries = pd.Series(read_fasta(args.data_dir / "gasal2_query_batch.fasta.gz") * args.replicate)
    targets = pd.Series(read_fasta(args.data_dir / "gasal2_target_batch.fasta.gz") * args.replicate)
    if args.cudf:
        import cudf

        queries, targets = cudf.from_pandas(queries), cudf.from_pandas(targets)
    options = dict(mode="sw", match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda",
                   progress=False, traceback=bool(args.traceback))
    gpualign_df.align(queries[:5000], targets[:5000], **options)
    gpualign_df.align(queries, targets, **options)
    profile = cProfile.Profile()
    profile.enable()
    gpualign_df.align(queries, targets, **options)
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats("gpualign_df|cudf/core/(frame|dataframe)", 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
