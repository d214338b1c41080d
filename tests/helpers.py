"""Shared test helpers: random sequences, CIGAR re-scoring, parasail calls, data paths."""

from __future__ import annotations

import gzip
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


SHARED_DATA = Path(os.environ.get("GPUALIGN_SHARED_DATA",
                        Path(__file__).resolve().parents[2] / "shared" / "data"))
CIGAR_RUN = re.compile(r"(\d+)([=XIDMS])")


def shared_file(name: str) -> Path:
    """Path of a file in ../shared/data, or skip the calling test if it is absent."""
    import pytest

    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} not present (../shared/data is only beside the project checkout)")
    return path


def read_fasta(path: Path, limit: int | None = None) -> list[str]:
    """Sequences of a plain or gzipped FASTA file, in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    sequences: list[str] = []
    current: list[str] = []
    with opener(path, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                if current:
                    sequences.append("".join(current))
                    if limit is not None and len(sequences) >= limit:
                        return sequences
                current = []
            else:
                current.append(line.strip())
    if current:
        sequences.append("".join(current))
    return sequences[:limit] if limit else sequences


def random_sequences(rng: np.random.Generator, count: int, alphabet: str, max_length: int,
                     min_length: int = 0) -> list[str]:
    lengths = rng.integers(min_length, max_length + 1, size=count)
    letters = np.array(list(alphabet))
    return ["".join(rng.choice(letters, size=length)) for length in lengths]


def mutate(rng: np.random.Generator, sequence: str, alphabet: str, rate: float) -> str:
    """A related sequence: substitutions, insertions and deletions at ``rate`` each."""
    out = []
    for residue in sequence:
        roll = rng.random()
        if roll < rate:
            out.append(alphabet[rng.integers(len(alphabet))])
        elif roll < 2 * rate:
            continue
        elif roll < 3 * rate:
            out.append(residue)
            out.append(alphabet[rng.integers(len(alphabet))])
        else:
            out.append(residue)
    return "".join(out)


def rescore(query: str, target: str, row, scoring) -> int:
    """Score of the CIGAR over [start, end) of both sequences; also checks it spans them."""
    matrix, lut = scoring.matrix, scoring.lut
    qpos, tpos = int(row.query_start), int(row.target_start)
    total = 0
    for count, op in CIGAR_RUN.findall(row.cigar):
        count = int(count)
        if op in "=XM":
            for k in range(count):
                a, b = query[qpos + k], target[tpos + k]
                total += int(matrix[lut[ord(a)], lut[ord(b)]])
                identical = lut[ord(a)] == lut[ord(b)] and scoring.concrete[lut[ord(a)]]
                if op == "=":
                    assert identical, (row.cigar, qpos + k)
                if op == "X":
                    assert not identical, (row.cigar, qpos + k)
            qpos += count
            tpos += count
        elif op == "I":
            total -= scoring.gap_open + (count - 1) * scoring.gap_extend
            qpos += count
        elif op == "D":
            total -= scoring.gap_open + (count - 1) * scoring.gap_extend
            tpos += count
    assert (qpos, tpos) == (int(row.query_end), int(row.target_end)), row.cigar
    return total


def parasail_function(mode: str, free_ends=None):
    """Name of parasail's traced scan function for a mode (and semi-global free ends)."""
    if mode == "sw":
        return "sw_trace_scan_32"
    if mode == "nw":
        return "nw_trace_scan_32"
    ends = set(free_ends) if free_ends is not None else {"query_start", "query_end",
                                                         "target_start", "target_end"}
    code = {"query_start": "qb", "query_end": "qe", "target_start": "db", "target_end": "de"}
    parts = sorted(code[e] for e in ends)
    names = {("db", "de", "qb", "qe"): "sg", ("qb",): "sg_qb", ("qe",): "sg_qe",
             ("db",): "sg_db", ("de",): "sg_de", ("qb", "qe"): "sg_qx", ("db", "de"): "sg_dx",
             ("db", "qb"): "sg_qb_db", ("de", "qb"): "sg_qb_de", ("db", "qe"): "sg_qe_db",
             ("de", "qe"): "sg_qe_de", (): "nw"}
    return names[tuple(parts)] + "_trace_scan_32"


def parasail_scores(queries, targets, scoring, mode, free_ends=None) -> list[int]:
    """parasail's scores for each (query, target) pair (both non-empty)."""
    import parasail

    size = len(scoring.alphabet)
    matrix = parasail.matrix_create(scoring.alphabet, 0, 0)
    for a in range(size):
        for b in range(size):
            matrix[a, b] = int(scoring.matrix[a, b])
    function = getattr(parasail, parasail_function(mode, free_ends))
    return [function(q, t, scoring.gap_open, scoring.gap_extend, matrix).score
            for q, t in zip(queries, targets)]


def copies_while(job: Callable[[], Any], every: float = 0.01) -> tuple[float, list[float], Any]:
    """Run ``job`` while another thread copies a 2 MB device array to the host on the
    default stream every ``every`` seconds (as a Dask worker's communication thread copies
    a partition it sends): ``(job seconds, seconds of each copy, job's result)``. Needs
    CuPy and a GPU."""
    import cupy

    block = cupy.arange(1 << 19, dtype=cupy.int32)
    cupy.asnumpy(block)
    copies: list[float] = []
    done = threading.Event()

    def copy_loop() -> None:
        while not done.is_set():
            started = time.perf_counter()
            cupy.asnumpy(block)
            copies.append(time.perf_counter() - started)
            time.sleep(every)

    copier = threading.Thread(target=copy_loop)
    started = time.perf_counter()
    copier.start()
    try:
        result = job()
    finally:
        seconds = time.perf_counter() - started
        done.set()
        copier.join()
    return seconds, copies, result


class RecordingBar:
    """A tqdm stand-in recording every bar made (``made``) and each one's running count
    after every update (``updates``)."""

    made: list["RecordingBar"] = []

    def __init__(self, total=None, disable=False, **kwargs):
        self.total, self.disable, self.n, self.updates = total, disable, 0, []
        RecordingBar.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False

    def update(self, step):
        self.n += step
        self.updates.append(self.n)
