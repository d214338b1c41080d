"""Encoding kernels: strings' bytes to residue codes through an alphabet's 256-entry lookup
table, on the host (numba, GIL released so chunks run on Python threads) and on the device
(one thread per 8 bytes of a cuDF string column); and one-pass summaries of encoded
sequences (the longest, a job's pairs' sizes)."""

from __future__ import annotations

import numpy as np
from numba import cuda, int64, njit, uint64

from ..scoring import INVALID_CODE

#: Where a device encoding's summary holds no bad byte (larger than any position).
NO_BAD_BYTE = 1 << 62

#: Codes 0-3 (A, C, G and T of the DNA alphabets): the device encoding reports whether a
#: column holds a code past them (:func:`encode_column`); the grouped pair kernel's byte
#: profile holds a byte for each (:func:`gpualign_df.gpu.policy.pair_group_profile`).
SMALL_CODES = 4
#: The bits of eight codes' bytes that are 0 where every code is below ``SMALL_CODES``.
WIDE_BITS = 0xFCFCFCFCFCFCFCFC


@njit(cache=True, nogil=True)
def map_codes_range(data, lut, codes, start, stop):
    """codes[k] = lut[data[k]] for k in [start, stop); returns (the first such position
    whose byte is not in the alphabet, or -1; the largest code). Releases the GIL: chunks
    run on Python threads. The mapping loop keeps no branch (the invalid code is the
    largest byte, so the running maximum tells whether one occurred); only then is the
    range searched. Its indices are unsigned, so numba adds no wrap-around of negative
    indices to each access."""
    largest = np.uint8(0)
    for k in range(uint64(start), uint64(stop)):
        code = lut[data[k]]
        codes[k] = code
        largest = max(largest, code)
    if largest != INVALID_CODE:
        return -1, int64(largest)
    for k in range(start, stop):
        if codes[k] == INVALID_CODE:
            return k, int64(largest)
    return -1, int64(largest)


@njit(cache=True, nogil=True)
def longest_piece(offsets):
    """The largest ``offsets[k + 1] - offsets[k]`` (0 for fewer than two offsets): the
    longest sequence, in one pass and no array made."""
    longest = 0
    for k in range(1, len(offsets)):
        longest = max(longest, offsets[k] - offsets[k - 1])
    return longest


@njit(cache=True, nogil=True)
def pair_sizes(query_offsets, query_valid, target_offsets, target_valid, pair_query,
               pair_target, valid):
    """Sizes of pairs ``(pair_query[k], pair_target[k])`` of sequences at ``offsets``
    (``valid``: not null) in one pass: ``valid[k]`` set where both are valid; returns
    the cells of all pairs (a null sequence has none), the most cells of one pair and
    the most bytes of one pair's full 4-bit traceback (``m * ((n + 1) // 2)``,
    :func:`gpualign_df.job.full_traceback_bytes`), where numpy would take a dozen calls.

    >>> import numpy as np
    >>> valid = np.empty(2, np.bool_)
    >>> pair_sizes(np.array([0, 3, 3]), np.array([True, False]), np.array([0, 5]),
    ...            np.array([True]), np.array([0, 1]), np.array([0, 0]), valid), valid.tolist()
    ((15, 15, 9), [True, False])
    """
    cells = largest = most_bytes = 0
    for k in range(len(pair_query)):
        q, t = pair_query[k], pair_target[k]
        valid[k] = query_valid[q] and target_valid[t]
        m = query_offsets[q + 1] - query_offsets[q]
        n = target_offsets[t + 1] - target_offsets[t]
        cells += m * n
        largest = max(largest, m * n)
        most_bytes = max(most_bytes, m * ((n + 1) // 2))
    return cells, largest, most_bytes


@njit(cache=True, nogil=True)
def codes_in_range(codes, start, stop):
    """256 flags: whether each code occurs in ``codes[start:stop]`` (uint8). Releases the
    GIL: chunks run on Python threads."""
    seen = np.zeros(256, np.bool_)
    for k in range(uint64(start), uint64(stop)):  # (unsigned: no negative-index wrap)
        seen[codes[k]] = True
    return seen


@cuda.jit
def map_bytes(codes, lut, summary):
    """In place, ``codes[k] = lut[codes[k]]`` for every ``k``: host sequences' bytes,
    uploaded as they are, become their residue codes on the device (a grid-stride loop,
    so any grid covers them). The first position whose byte is not in the alphabet goes
    to ``summary[0]`` (an atomic minimum: start it at :data:`NO_BAD_BYTE`), the largest
    code to ``summary[1]`` (a block's maximum first, then one atomic a block: start it
    at 0)."""
    largest = cuda.shared.array(1, int64)
    if cuda.threadIdx.x == 0:
        largest[0] = 0
    cuda.syncthreads()
    mine = int64(0)
    for k in range(cuda.grid(1), codes.shape[0], cuda.gridsize(1)):
        code = lut[codes[k]]
        codes[k] = code
        if code == INVALID_CODE:
            cuda.atomic.min(summary, 0, int64(k))
        mine = max(mine, int64(code))
    cuda.atomic.max(largest, 0, mine)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.max(summary, 1, largest[0])


#: Bytes one thread of :func:`encode_column` maps (one 8-byte word).
ENCODE_WORD = 8


def word_layout(pointer: int, length: int) -> tuple[int, int]:
    """How :func:`encode_column` takes ``length`` characters at device address
    ``pointer``: ``(head, words)``, the bytes before the first 8-aligned word (at most
    ``length``) and the whole words after them; the bytes past the last word are the
    rest. Their codes are written where their words line up too."""
    head = min(-pointer % ENCODE_WORD, length)
    return head, (length - head) // ENCODE_WORD


@cuda.jit
def encode_column(data, words, head, lut, column_offsets, codes, code_words, offsets, lengths,
                  valid, fill_valid, summary, slot):
    """One pass over a string column: thread ``k`` maps the 8 bytes of word ``k`` to their
    residue codes (``words``: ``data[head:]``'s whole 8-byte words as uint64, 8-aligned,
    ``code_words`` the same span of ``codes``; the bytes before and after them, fewer than
    8 each, go to the first threads); the first byte of the column's range
    (``column_offsets[0]`` to ``column_offsets[-1]``) outside the alphabet goes to
    ``summary[slot]``. Thread ``k`` also writes row ``k``'s int64 offset, length and
    (``fill_valid``) validity; the longest length goes to ``summary[2 + slot]`` (a block's
    maximum first, then one atomic per block), and 1 to ``summary[4 + slot]`` where a code
    in the column's range is ``SMALL_CODES`` or more."""
    longest = cuda.shared.array(2, int64)   # the block's longest length, a code past 3
    if cuda.threadIdx.x == 0:
        longest[0] = 0
        longest[1] = 0
    cuda.syncthreads()
    k = cuda.grid(1)
    rows = lengths.shape[0]
    first = column_offsets[0]
    last = column_offsets[rows]
    if k < words.shape[0]:
        word = words[k]
        mapped = uint64(0)
        invalid = False
        for b in range(ENCODE_WORD):
            code = lut[(word >> uint64(8 * b)) & uint64(255)]
            invalid |= code == INVALID_CODE
            mapped |= uint64(code) << uint64(8 * b)
        code_words[k] = mapped
        wide = (mapped & uint64(WIDE_BITS)) != 0
        start = head + ENCODE_WORD * k
        if wide and first <= start and start + ENCODE_WORD <= last:
            longest[1] = 1   # a code past 3 in a word inside the column's range
        if invalid or (wide and longest[1] == 0):  # (rare in DNA) which of its bytes,
            # and whether in the column's range (a buffer holds bytes outside it)
            for b in range(ENCODE_WORD):
                position = start + b
                code = lut[(word >> uint64(8 * b)) & uint64(255)]
                if first <= position < last:
                    if code == INVALID_CODE:
                        cuda.atomic.min(summary, slot, position)
                    if code >= SMALL_CODES:
                        longest[1] = 1
    if k < ENCODE_WORD:  # the bytes before the first word (k < head) and after the last
        tail = head + ENCODE_WORD * words.shape[0]
        for position in (k if k < head else data.shape[0], tail + k):
            if position < data.shape[0]:
                code = lut[data[position]]
                codes[position] = code
                if first <= position < last:
                    if code == INVALID_CODE:
                        cuda.atomic.min(summary, slot, position)
                    if code >= SMALL_CODES:
                        longest[1] = 1
    if k <= rows:
        offsets[k] = column_offsets[k]
    if k < rows:
        length = int64(column_offsets[k + 1] - column_offsets[k])
        lengths[k] = length
        if fill_valid:
            valid[k] = True
        cuda.atomic.max(longest, 0, length)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0 and longest[0] > 0:
        cuda.atomic.max(summary, 2 + slot, longest[0])
    if cuda.threadIdx.x == 0 and longest[1]:
        summary[4 + slot] = 1
