"""The issue-4 Dask search job as the Dask benchmarks share it: its alignment options, its
data (the 30,000 ADEPT proteins) and the command-line options of its cluster and data."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

#: top-10 local search, BLOSUM62, gap_open 11, gap_extend 1 (CIGARs for the hits)
SEARCH_OPTIONS = dict(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1, top_k=10)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """``--trim-host-memory`` (the cluster's workers) and ``--data-dir`` (the proteins)."""
    parser.add_argument("--trim-host-memory", action="store_true",
                        help="workers with Dask's MALLOC_TRIM_THRESHOLD_=65536, as before "
                             "(gpualign_df.cluster(trim_host_memory=True))")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(
        "GPUALIGN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")))


def read_proteins(data_dir: Path, limit: int | None = None) -> list[str]:
    """The ADEPT proteins (the first ``limit`` of them)."""
    from helpers import read_fasta

    return read_fasta(data_dir / "adept_proteins_30k.fasta.gz", limit=limit)
