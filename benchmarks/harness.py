"""The protein search job the search benchmarks share: its scoring (local, BLOSUM62,
gap_open 11, gap_extend 1), its top 10, its data (the 30,000 ADEPT proteins under
``--data-dir``) and the cluster flag of the Dask scripts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # helpers.read_fasta
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_gpu import add_data_dir  # noqa: E402,F401  (the benchmarks' --data-dir)

GAP_OPEN, GAP_EXTEND = 11, 1
#: local alignment, BLOSUM62, gap_open 11, gap_extend 1
SCORING = dict(mode="sw", matrix="BLOSUM62", gap_open=GAP_OPEN, gap_extend=GAP_EXTEND)
#: the issue-4 search: the scoring above, the best 10 targets per query (CIGARs for them)
SEARCH_OPTIONS = dict(SCORING, top_k=10)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--trim-host-memory``: the Dask workers as Dask's nanny starts them."""
    parser.add_argument("--trim-host-memory", action="store_true",
                        help="workers with Dask's MALLOC_TRIM_THRESHOLD_=65536, as before "
                             "(gpualign_df.cluster(trim_host_memory=True))")


def read_proteins(data_dir: Path, limit: int | None = None) -> list[str]:
    """The ADEPT proteins (the first ``limit`` of them)."""
    from helpers import read_fasta

    return read_fasta(data_dir / "adept_proteins_30k.fasta.gz", limit=limit)
