"""What the benchmarks and the investigations share.

* the data: the ``--data-dir`` option (``$GPUALIGN_SHARED_DATA``, else ``../shared/data``
  beside the checkout) and FASTA reading through :func:`gpualign_df.io.read_sequences`;
* W1, the GPU workload: the 20,000 GASAL2 pairs replicated, match 1 / mismatch -4 /
  gap 7+1 (:data:`W1_OPTIONS`, :func:`w1_pairs`);
* the protein search job: local, BLOSUM62, gap_open 11, gap_extend 1, top 10 (CIGARs for
  the hits), on the 30,000 ADEPT proteins (:data:`SEARCH_OPTIONS`, :func:`read_proteins`),
  and the cluster flag of the Dask scripts (:func:`add_cluster_arguments`);
* timing: :func:`timed_runs` (wall seconds of repeated calls, optionally with a device
  synchronize at each end), :func:`timed_stages` (wall seconds spent in named functions
  of the engine while a block runs) and :func:`kernel_seconds` (the engine's CUDA-event
  kernel times of one call).

Import it as ``from benchmarks.harness import ...``, running the scripts from the repository
root as modules (``python -m benchmarks.run_gpu``). Nothing here imports numpy, pandas,
numba or CUDA at module level: the parasail pools of the benchmarks use the "spawn" start
method and re-import the modules that define their workers.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import time
from pathlib import Path
from typing import Any, Callable

# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------

#: ``$GPUALIGN_SHARED_DATA``, else ``../shared/data`` beside the repository.
DEFAULT_DATA_DIR = Path(os.environ.get("GPUALIGN_SHARED_DATA",
                                       Path(__file__).resolve().parents[2] / "shared" / "data"))


def add_data_dir(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """The benchmarks' ``--data-dir``, defaulting to :data:`DEFAULT_DATA_DIR`."""
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=help or f"folder holding the benchmark data (default: "
                                     f"$GPUALIGN_SHARED_DATA, else {DEFAULT_DATA_DIR})")


def read_fasta(path: Path, limit: int | None = None) -> list[str]:
    """Sequences of a FASTA file (plain or compressed), in file order; the first ``limit``
    of them (all without ``limit``)."""
    try:
        from gpualign_df.io import read_sequences
    except ImportError:  # the package's reader (needletail) missing, as on the GPU machine
        sequences = _plain_fasta(path)
    else:
        sequences = read_sequences(path)["seq"].tolist()
    return sequences if limit is None else sequences[:limit]


def _plain_fasta(path: Path) -> list[str]:
    """Sequences of a FASTA file, upper-cased as the package's reader gives them."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    sequences: list[str] = []
    parts: list[str] | None = None
    with opener(path, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                if parts is not None:
                    sequences.append("".join(parts).upper())
                parts = []
            elif parts is not None:
                parts.append(line.strip())
    if parts is not None:
        sequences.append("".join(parts).upper())
    return sequences


# ---------------------------------------------------------------------------------------
# W1: the GASAL2 pairs (GPU benchmarks)
# ---------------------------------------------------------------------------------------

W1_QUERY_FILE = "gasal2_query_batch.fasta.gz"
W1_TARGET_FILE = "gasal2_target_batch.fasta.gz"
#: W1's scoring: GASAL2's ``-a 1 -b 4 -q 6 -r 1``.
W1_OPTIONS = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1)


def w1_pairs(data_dir: Path, replicate: int) -> tuple[list[str], list[str]]:
    """The W1 queries and targets: the GASAL2 pairs ``replicate`` times over."""
    return (read_fasta(data_dir / W1_QUERY_FILE) * replicate,
            read_fasta(data_dir / W1_TARGET_FILE) * replicate)


def w1_series(data_dir: Path, replicate: int, cudf: bool = False,
              pairs: int | None = None) -> tuple[Any, Any]:
    """:func:`w1_pairs` as two pandas Series, or cuDF ones with ``cudf`` (imported only
    then); the first ``pairs`` pairs only, where given."""
    import pandas as pd

    queries, targets = (pd.Series(values[:pairs]) for values in w1_pairs(data_dir, replicate))
    if cudf:
        import cudf as cudf_module

        queries, targets = cudf_module.from_pandas(queries), cudf_module.from_pandas(targets)
    return queries, targets


def add_w1_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of one W1 job on the GPU that :func:`w1_job` reads: ``--mode``,
    ``--traceback`` (0/1), ``--cudf`` (cuDF Series in, cuDF frame out), ``--replicate``,
    ``--pairs`` (the first N pairs only) and the data folder."""
    parser.add_argument("--mode", default="sw")
    parser.add_argument("--traceback", type=int, default=1)
    parser.add_argument("--cudf", action="store_true", help="cuDF Series in, cuDF frame out")
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=None, help="only the first N pairs")
    add_data_dir(parser)


def w1_job(args: argparse.Namespace) -> tuple[Any, Any, dict]:
    """The queries, targets and ``align`` options of the W1 job that
    :func:`add_w1_job_arguments`' arguments name (on the GPU, no progress bar)."""
    queries, targets = w1_series(args.data_dir, args.replicate, args.cudf, args.pairs)
    return queries, targets, dict(mode=args.mode, traceback=bool(args.traceback),
                                  backend="cuda", progress=False, **W1_OPTIONS)


# ---------------------------------------------------------------------------------------
# the protein search job (search benchmarks)
# ---------------------------------------------------------------------------------------

GAP_OPEN, GAP_EXTEND = 11, 1
#: local alignment, BLOSUM62, gap_open 11, gap_extend 1
SCORING = dict(mode="sw", matrix="BLOSUM62", gap_open=GAP_OPEN, gap_extend=GAP_EXTEND)
#: the issue-4 search: the scoring above, the best 10 targets per query (CIGARs for them)
SEARCH_OPTIONS = dict(SCORING, top_k=10)
PROTEIN_FILE = "adept_proteins_30k.fasta.gz"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--trim-host-memory``: the Dask workers as Dask's nanny starts them."""
    parser.add_argument("--trim-host-memory", action="store_true",
                        help="workers with Dask's MALLOC_TRIM_THRESHOLD_=65536, as before "
                             "(gpualign_df.cluster(trim_host_memory=True))")


def read_proteins(data_dir: Path, limit: int | None = None) -> list[str]:
    """The ADEPT proteins (the first ``limit`` of them)."""
    return read_fasta(data_dir / PROTEIN_FILE, limit=limit)


# ---------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------

def timed_runs(function: Callable[[], Any], repeat: int,
               synchronize: bool = False) -> tuple[list[float], Any]:
    """Wall seconds of each of ``repeat`` calls of ``function``, and what the last call
    returned; with ``synchronize``, a CUDA device synchronize just before each call starts
    its clock and just before it stops it. The previous call's result is dropped before
    the clock starts: freeing it is not the next call's work."""
    sync = None
    if synchronize:
        from numba import cuda

        sync = cuda.synchronize
    seconds, result = [], None
    for _ in range(repeat):
        result = None
        if sync:
            sync()
        started = time.perf_counter()
        result = function()
        if sync:
            sync()
        seconds.append(time.perf_counter() - started)
    return seconds, result


@contextlib.contextmanager
def timed_stages(stages, totals: dict[str, float], synchronize: bool = False):
    """While the block runs, add the wall seconds of every call of each ``(module,
    function)`` of ``stages`` to ``totals[function]``: each is wrapped where its callers
    find it (a stage nested in another counts in both; ``Class.method`` names a method),
    and put back afterwards. With ``synchronize``, a CUDA device synchronize at both ends
    of each call. A module that cannot be imported here (the GPU's, on a machine without
    one) is left out."""
    sync = None
    if synchronize:
        from numba import cuda

        sync = cuda.synchronize

    def timed(function, name):
        def wrapper(*args, **kwargs):
            if sync:
                sync()
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                if sync:
                    sync()
                totals[name] = totals.get(name, 0.0) + time.perf_counter() - started
        return wrapper

    saved = []
    try:
        for module_name, name in stages:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            owner, attribute = module, name
            while "." in attribute:
                outer, attribute = attribute.split(".", 1)
                owner = getattr(owner, outer)
            saved.append((owner, attribute, getattr(owner, attribute)))
            setattr(owner, attribute, timed(getattr(owner, attribute), name))
        yield totals
    finally:
        for module, name, function in saved:
            setattr(module, name, function)


def kernel_seconds(function: Callable[[], Any]) -> dict[str, float]:
    """The engine's kernel seconds by kernel (``gpualign_df.gpu.KERNEL_SECONDS``: CUDA
    events, the ``time_kernels`` setting on) of one call of ``function``."""
    from gpualign_df import config, gpu

    gpu.KERNEL_SECONDS.clear()
    with config.override(time_kernels=True):
        function()
    return dict(gpu.KERNEL_SECONDS)
