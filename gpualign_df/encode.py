"""Strings -> uint8 residue codes + offsets, with validation that names the bad row.

Host path: a pandas Series (or any sequence of str/None) goes through one Arrow
``large_string`` array, whose data and offsets buffers are viewed as numpy arrays and
mapped through the scoring alphabet's 256-entry lookup table in one vectorised step.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Callable, Sequence

import numba
import numpy as np
import pandas as pd
import pyarrow as pa
from . import config
from .kernels.encoding import codes_in_range, longest_piece, map_codes_range
from .scoring import Scoring


def encoding_threads(size: int) -> int:
    """Threads to encode ``size`` bytes: one per ``encode_bytes_per_thread``, at most
    ``encode_max_threads`` (:mod:`gpualign_df.config`) and numba's thread count."""
    tuning = config.settings()
    pieces = min(tuning.encode_max_threads, size // tuning.encode_bytes_per_thread)
    return 1 if pieces <= 1 else min(numba.get_num_threads(), pieces)


def map_codes(data: np.ndarray, lut: np.ndarray, codes: np.ndarray) -> tuple[int, int]:
    """``codes = lut[data]`` on :func:`encoding_threads` threads; (the first position whose
    byte is not in the alphabet, or -1; the largest code, 0 where none)."""
    pieces = in_pieces(len(data),
                       lambda start, stop: map_codes_range(data, lut, codes, start, stop))
    bad = [position for position, _ in pieces if position >= 0]
    return (min(bad) if bad else -1), max(int(largest) for _, largest in pieces)


def codes_present(codes: np.ndarray) -> np.ndarray:
    """The distinct values of ``codes`` (uint8), ascending, read on
    :func:`encoding_threads` threads."""
    seen = in_pieces(len(codes), lambda start, stop: codes_in_range(codes, start, stop))
    return np.flatnonzero(np.logical_or.reduce(seen))


def in_pieces(size: int, work, piece_bytes: int | None = None) -> list:
    """``work(start, stop)`` over ``range(size)`` in pieces on :func:`encoding_threads`
    threads, the results in order: one piece a thread, or (``piece_bytes``) pieces of
    at most about that size, where a piece's result is used as soon as it is done (a
    transfer of each piece while the next are made).

    Python threads over GIL-free kernels, not a numba ``prange``: numba's ``workqueue``
    threading layer aborts the process when two threads enter a parallel region at once, and
    encodings run concurrently when several threads align at the same time."""
    threads = encoding_threads(size)
    # by default one piece a thread: the pieces are alike (a byte costs the same wherever
    # it is) and every piece more costs a hand-off to the pool
    count = threads if piece_bytes is None else max(threads, -(-size // piece_bytes))
    if count == 1:
        return [work(0, size)]
    bounds = np.linspace(0, size, count + 1).astype(np.int64)
    return list(_pool(threads).map(lambda k: work(int(bounds[k]), int(bounds[k + 1])),
                                   range(count)))


@lru_cache(maxsize=None)
def _pool(threads: int) -> ThreadPoolExecutor:
    """``threads`` encoding threads kept for the process: starting them for every encoding
    would cost as much as encoding a megabase on them. Concurrent encodings share them."""
    return ThreadPoolExecutor(threads, thread_name_prefix="gpualign-encode")


@dataclass(frozen=True)
class EncodedSequences:
    """Residue codes of many sequences.

    Attributes
    ----------
    mapped : numpy.ndarray or None
        ``uint8`` codes of all sequences, concatenated; None where they are made from
        ``text`` when first read (:attr:`codes`).
    offsets : numpy.ndarray
        ``int64``, length ``n + 1``: sequence ``k`` is ``codes[offsets[k]:offsets[k+1]]``.
    valid : numpy.ndarray
        ``bool``, False where the input was null (its slice is empty).
    labels : pandas.Index
        The input's index labels, one per sequence.
    keep : dict, optional
        Where the engines keep what they derive from these sequences for the next job (a
        device copy, a search's length classes), by what it depends on; None: nothing is
        kept (sequences of one job). A prepared database
        (:class:`gpualign_df.databases.Database`) gives one.
    largest_code : int, optional
        A bound on every code (the encoder's running maximum), so that an upload need not
        read them all again; None: not known.
    text : numpy.ndarray, optional
        The sequences' bytes (``uint8``, at ``offsets``) where ``mapped`` is None: the
        codes are made from them through ``scoring``'s table when first read, into an
        array from ``allocate`` (np.empty by default), and a character outside the
        alphabet raises then. The small-batch kernel maps them itself
        (:mod:`gpualign_df.kernels.block`), so a small GPU job spends no host pass on them.
    scoring : Scoring, optional
        The scoring whose alphabet maps ``text``.
    allocate : callable, optional
        As :func:`encode_sequences`' ``allocate``, for the codes made from ``text``.
    """

    mapped: np.ndarray | None
    offsets: np.ndarray
    valid: np.ndarray
    labels: pd.Index
    keep: dict | None = field(default=None, compare=False, repr=False)
    largest_code: int | None = field(default=None, compare=False, repr=False)
    text: np.ndarray | None = field(default=None, compare=False, repr=False)
    scoring: Scoring | None = field(default=None, compare=False, repr=False)
    allocate: Callable[[int], np.ndarray] | None = field(default=None, compare=False,
                                                         repr=False)

    def __len__(self) -> int:
        return len(self.valid)

    @cached_property
    def codes(self) -> np.ndarray:
        """``uint8`` codes of all sequences, concatenated (made from ``text`` the first
        time, where ``mapped`` is None; raises :class:`InvalidResidueError` then for a
        character outside the alphabet)."""
        if self.mapped is not None:
            return self.mapped
        codes, largest = map_residues(self.text, self.offsets, self.labels, self.scoring,
                                      self.allocate)
        # (the running maximum, known now: set on the frozen instance as the constructor
        # would have)
        object.__setattr__(self, "largest_code", largest)
        return codes

    @property
    def unmapped(self) -> bool:
        """Whether the codes are not made yet: ``text`` holds the bytes, which a kernel
        may map itself (:attr:`codes` would take a host pass)."""
        return self.mapped is None and "codes" not in self.__dict__

    @cached_property
    def lengths(self) -> np.ndarray:
        """``int64`` residues of each sequence (0 for a null one), computed once: the
        offsets never change."""
        return np.diff(self.offsets)

    @property
    def residues(self) -> int:
        """Residues of all sequences (a null one's slice is empty, so also of the valid
        ones): no pass over the lengths."""
        return int(self.offsets[-1] - self.offsets[0]) if len(self.offsets) else 0

    @cached_property
    def longest(self) -> int:
        """Residues of the longest sequence (0 for none), computed once."""
        return int(longest_piece(self.offsets))

    def subset(self, start: int, stop: int) -> "EncodedSequences":
        """Sequences ``start`` to ``stop`` (views of the codes, offsets from 0)."""
        if start == 0 and stop == len(self):
            return self
        offsets = self.offsets[start:stop + 1]
        return EncodedSequences(self.codes[offsets[0]:offsets[-1]], offsets - offsets[0],
                                self.valid[start:stop], self.labels[start:stop],
                                largest_code=self.largest_code)

    def take(self, rows: np.ndarray) -> "EncodedSequences":
        """Sequences ``rows`` (positions, in that order), copied."""
        rows = np.asarray(rows, dtype=np.int64)
        return self.slices(rows, np.zeros(len(rows), np.int64), self.lengths[rows])

    def slices(self, rows: np.ndarray, starts: np.ndarray,
               stops: np.ndarray) -> "EncodedSequences":
        """Residues ``starts[k]`` to ``stops[k]`` (exclusive) of sequence ``rows[k]``, one
        sequence each, copied, with their sequences' validity and labels."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(stops, dtype=np.int64) - starts
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # each output residue's position in the codes: its piece's start, plus its rank
        source = np.repeat(self.offsets[rows] + starts - offsets[:-1], lengths) + np.arange(
            offsets[-1])
        return EncodedSequences(self.codes[source], offsets, self.valid[rows],
                                self.labels[rows])


#: Letters that occur in protein sequences but not in nucleotide ones: a sequence holding one
#: of them, refused by a nucleotide alphabet, is most likely a protein.
PROTEIN_ONLY_LETTERS = frozenset("EFIJLOPQZX*efijlopqzx")


class InvalidResidueError(ValueError):
    """A character outside the scoring alphabet, with where it was found.

    Attributes
    ----------
    label : object
        Row label of the sequence (its position for a plain list).
    row : int
        0-based position of the sequence in its collection.
    position : int
        0-based position of the character in the sequence.
    character : str
        The character.
    scoring_name, alphabet : str
        The scoring scheme that refused it and its alphabet.
    looks_like_protein : bool
        The scheme is a nucleotide one and the character occurs only in proteins: pass a
        protein matrix (``matrix="BLOSUM62"``).
    """

    def __init__(self, label: Any, row: int, position: int, character: str, scoring_name: str,
                 alphabet: str, nucleotide: bool) -> None:
        self.label = plain_label(label)
        self.row = row
        self.position = position
        self.character = character
        self.scoring_name = scoring_name
        self.alphabet = alphabet
        self.looks_like_protein = nucleotide and character in PROTEIN_ONLY_LETTERS
        hint = (": the sequences look like protein; pass a protein matrix such as "
                "matrix='BLOSUM62'" if self.looks_like_protein else "")
        super().__init__(f"row {self.label!r}, position {position}: character {character!r} is "
                         f"not in the {scoring_name} alphabet {alphabet!r}{hint}")


def plain_label(label: Any) -> Any:
    """A label as Python shows it (``6``, not ``np.int64(6)``), for messages."""
    return label.item() if isinstance(label, np.generic) else label


def to_arrow_strings(values: Any, labels: pd.Index) -> pa.LargeStringArray:
    """Turn a Series / list of str-or-null into an Arrow large_string array, or raise.

    A column of nothing but missing values (all-NaN floats, all-None objects) is a column of
    nulls, whatever its dtype."""
    if isinstance(values, pd.Series):
        values = values.array
    try:
        array = pa.array(values, type=pa.large_string(), from_pandas=True)
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError) as error:
        for position, value in enumerate(values):
            if value is not None and not (isinstance(value, float) and np.isnan(value)) \
                    and value is not pd.NA and not isinstance(value, str):
                raise ValueError(f"row {plain_label(labels[position])!r}: sequence must be a "
                                 f"string, got {type(value).__name__}") from error
        raise
    if isinstance(array, pa.ChunkedArray):
        # pandas gives chunks of string and large_string for an all-NaN float column
        array = pa.chunked_array([chunk.cast(pa.large_string()) for chunk in array.chunks],
                                 type=pa.large_string()).combine_chunks()
    return array


def large_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The bytes and int64 offsets (from 0, ``len(array) + 1``) of a ``large_string`` or
    ``large_binary`` array, as numpy views of its buffers (a slice's own part only)."""
    count = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=count + 1,
                            offset=array.offset * 8) if offsets_buffer is not None \
        else np.zeros(count + 1, dtype=np.int64)
    start, stop = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buffer, dtype=np.uint8)[start:stop] if data_buffer is not None \
        else np.zeros(0, dtype=np.uint8)
    return data, offsets - start


def encode_sequences(values: pd.Series | Sequence[str | None], scoring: Scoring,
                     labels: pd.Index | None = None,
                     allocate: Callable[[int], np.ndarray] | None = None, *,
                     deferred: bool = False) -> EncodedSequences:
    """Encode sequences into residue codes of ``scoring``'s alphabet.

    Parameters
    ----------
    values : pandas.Series or sequence of str or None
        The sequences; None/NaN/NA are nulls (kept, marked invalid).
    scoring : Scoring
        Supplies the alphabet's lookup table (case-insensitive).
    labels : pandas.Index, optional
        Row labels for error messages and results; default: the Series index or 0..n-1.
    allocate : callable, optional
        ``allocate(n)`` gives the ``uint8`` array of ``n`` codes (a GPU job's codes go to
        pinned host memory, whose upload is several times faster); default ``np.empty``.
    deferred : bool
        Keep the bytes and map them when the codes are first read
        (:attr:`EncodedSequences.codes`), or never where a kernel maps them: a GPU job's
        (:func:`gpualign_df.api.encode_job`). A character outside the alphabet raises
        then, not here.

    Raises
    ------
    InvalidResidueError
        For a character outside the alphabet, naming the row label, the 0-based position
        and the character (when the codes are made, with ``deferred``).

    Examples
    --------
    >>> from gpualign_df.scoring import make_scoring
    >>> encoded = encode_sequences(["ACgt", None, ""], make_scoring(match=1, mismatch=-1))
    >>> encoded.codes.tolist(), encoded.offsets.tolist(), encoded.valid.tolist()
    ([0, 1, 2, 3], [0, 4, 4, 4], [True, False, True])
    """
    if labels is None:
        labels = values.index if isinstance(values, pd.Series) else pd.RangeIndex(len(values))
    array = to_arrow_strings(values, labels)
    count = len(array)
    data, offsets = large_buffers(array)
    offsets = np.ascontiguousarray(offsets)
    valid = np.ones(count, dtype=bool) if array.null_count == 0 \
        else ~np.asarray(array.is_null().to_numpy(zero_copy_only=False))
    # (an Index is immutable: the caller's is shared, not copied)
    labels = labels if isinstance(labels, pd.Index) else pd.Index(labels)
    if deferred:
        return EncodedSequences(None, offsets, valid, labels, text=data, scoring=scoring,
                                allocate=allocate)
    codes, largest = map_residues(data, offsets, labels, scoring, allocate)
    return EncodedSequences(codes, offsets, valid, labels, largest_code=largest)


def map_residues(data: np.ndarray, offsets: np.ndarray, labels: pd.Index, scoring: Scoring,
                 allocate: Callable[[int], np.ndarray] | None = None) -> tuple[np.ndarray, int]:
    """``(codes, largest code)`` of sequences' bytes ``data`` (sequence ``k`` at
    ``offsets[k]`` to ``offsets[k + 1]``, its row label ``labels[k]``) in ``scoring``'s
    alphabet, the codes in an array from ``allocate`` (default ``np.empty``).

    Raises
    ------
    InvalidResidueError
        For the first character outside the alphabet: its row, the position among the
        row's characters (not bytes) and the character.

    Examples
    --------
    >>> from gpualign_df.scoring import make_scoring
    >>> codes, largest = map_residues(np.frombuffer(b"ACgtN", np.uint8), np.array([0, 2, 5]),
    ...                               pd.RangeIndex(2), make_scoring(match=1, mismatch=-1))
    >>> codes.tolist(), largest
    ([0, 1, 2, 3, 4], 4)
    """
    codes = np.empty(len(data), dtype=np.uint8) if allocate is None else allocate(len(data))
    first_bad, largest = map_codes(data, scoring.lut, codes)
    if first_bad >= 0:
        row = int(np.searchsorted(offsets, first_bad, side="right") - 1)
        raw = bytes(data[offsets[row]:offsets[row + 1]])
        byte_position = int(first_bad - offsets[row])
        position = len(raw[:byte_position].decode("utf-8", errors="ignore"))
        text = raw.decode("utf-8", errors="replace")
        raise InvalidResidueError(labels[row], row, position, text[position], scoring.name,
                                  scoring.alphabet, scoring.nucleotide)
    return codes, largest
