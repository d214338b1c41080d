"""What runs where on the GPU: when packed 16-bit cells and keyed running bests are exact,
from bounds on every value a cell can take, and the shape the fill kernels are built with.

Each check is a proof, not a heuristic: a kernel on narrower values runs only where no
value of any cell can leave its range, so that its results equal the 32-bit kernels'.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import config
from ..kernels import dpx
from ..kernels.cpu import MODE_LOCAL
from ..kernels.encoding import SMALL_CODES
from ..kernels.pairs16 import (COPIES, TRACEBACK_ROWS, TRACEBACK_VALUES, group_rows_fit,
                               highest_score)
from ..kernels.search import PAIR_TABLE_WORDS
from ..kernels.strip import PAD16
from ..scoring import Mode, Scoring


def use_search_16bit(scoring: Scoring, mode: Mode, longest_query: int, longest_target: int,
                     allowed: bool | None) -> bool:
    """Whether a search whose longest query and database sequence are ``longest_query``
    and ``longest_target`` residues runs on packed 16-bit cells: local mode, ``allowed``
    (the ``search_16bit`` setting; None: where DPX runs), and no cell can leave 16 bits. A
    local cell is at most ``min(longest query, longest target) * largest entry``, which
    must stay below 2**15; gap costs and the magnitude of the most negative entry must
    stay below 2**13, so that nothing falls past -2**15 from the lanes' minus infinity
    (-2**14)."""
    use = dpx.available() if allowed is None else allowed
    if not use or mode.code != MODE_LOCAL:
        return False
    largest = largest_entry(scoring)
    shortest_side = min(int(longest_query), int(longest_target))
    limit = 1 << 13
    return (shortest_side * largest < (1 << 15) - 1 and scoring.gap_open < limit
            and scoring.gap_extend < limit and int(scoring.matrix.min(initial=0)) > -limit)


def largest_entry(scoring: Scoring) -> int:
    """The highest substitution score, or 0 where none is positive (the bound of a cell
    above 0 is ``largest * min(m, n)``)."""
    return max(int(scoring.matrix.max(initial=0)), 0)


def fill_fits_16bit(scoring: Scoring, longest_query: int, longest_target: int) -> bool:
    """Whether pairs up to these lengths fill exactly on packed 16-bit cells (every mode).

    Every H, I and D value of a real cell lies in [-(3*go + ge*(m + n + 1)), largest *
    min(m, n)] (a path of two gaps bounds H from below; a gap value is at most one open and
    one extension below an H), a diagonal candidate adds one more entry; the kernel's sums
    are floored at ``NEG16`` = -2**14, which must stay strictly below every real value, and
    the highest value plus an entry must fit 2**15 - 1. End columns are kept in 16-bit
    lanes, so both lengths stay below 2**15.

    >>> from gpualign_df.scoring import make_scoring
    >>> fill_fits_16bit(make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), 150, 277)
    True
    >>> fill_fits_16bit(make_scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2), 9000, 9000)
    False
    """
    if longest_query >= 1 << 15 or longest_target >= 1 << 15:
        return False
    largest = largest_entry(scoring)
    lowest_entry = max(-int(scoring.matrix.min(initial=0)), 0)
    high = largest * (min(longest_query, longest_target) + 1)
    low = (3 * scoring.gap_open + scoring.gap_extend * (longest_query + longest_target + 1)
           + lowest_entry)
    return high < (1 << 15) - 1 and low < -dpx.NEG16 - 1


def keyed_best_fits(scoring: Scoring, longest_query: int, longest_target: int) -> bool:
    """Whether the fill kernels may keep each row's running best as one int32 key
    ``H * 2**16 - j`` (:func:`gpualign_df.kernels.strip.strip_functions`): every H within (-2**15, 2**15), from the
    bounds of :func:`fill_fits_16bit` (H alone: a path of two gaps below, ``largest *
    min(m, n)`` above), and every column below 2**16.

    >>> from gpualign_df.scoring import make_scoring
    >>> keyed_best_fits(make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), 150, 277)
    True
    >>> keyed_best_fits(make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1), 9, 70_000)
    False
    """
    if longest_target >= 1 << 16:
        return False
    largest = largest_entry(scoring)
    high = largest * min(longest_query, longest_target)
    low = 2 * scoring.gap_open + scoring.gap_extend * (longest_query + longest_target)
    return high < (1 << 15) - 1 and low < (1 << 15) - 1


def use_fill_16bit(allowed: bool | None, traceback: bool) -> bool:
    """Whether a job's score-only fills may run on packed 16-bit cells (each batch then
    checks :func:`fill_fits_16bit`): ``allowed`` is the ``fill_16bit`` setting (None: where
    DPX runs); fills with traceback always run on 32-bit cells."""
    return (dpx.available() if allowed is None else allowed) and not traceback


def fill_shape(tuning: config.Settings) -> tuple[int, int | None]:
    """``(rows, max_registers)`` of the inter-task fill kernels: the ``fill_strip_rows``
    setting and its register cap from ``fill_max_registers`` (None: the compiler's
    choice)."""
    rows = tuning.fill_strip_rows
    return rows, dict(tuning.fill_max_registers).get(rows)


def table16(scoring: Scoring) -> np.ndarray:
    """The substitution table with a padding code (last row and column, ``PAD16``)."""
    size = len(scoring.alphabet)
    table = np.full((size + 1, size + 1), PAD16, dtype=np.int32)
    table[:size, :size] = scoring.matrix
    return table.ravel()


def pair_group_table(scoring: Scoring, query_padding: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The grouped pair kernel's tables (:func:`gpualign_df.kernels.pairs16.pair_group_kernel`),
    or None where they do not fit: ``(table, query_pair, target_pair)``.

    Codes whose rows of the matrix are equal score alike as query residues, codes whose
    columns are equal alike as target residues (with match/mismatch scoring every
    ambiguity code is one class), so the table is indexed by classes: ``[target class of
    the low pair, of the high pair][query class of the low pair, of the high pair]``, each
    entry both halves' ``score + go`` (the padding class, last, an entry 0), in
    ``COPIES`` interleaved copies. ``query_pair[low * codes + high]`` gives the entry of two
    query codes, ``target_pair[low * codes + high]`` the first word of two target codes'
    row, ``codes`` = alphabet size + 1 (the last code is the padding). None where the
    copies pass the shared table, an entry would be negative (a substitution below
    ``-gap_open``) or the code pairs pass 256. ``query_padding``: the entry of the query's
    padding class against every target class but the padding (0, or ``gap_open``: the
    padding rows above a query aligned to the group's last row then keep row 0's H).

    >>> from gpualign_df.scoring import make_scoring
    >>> table, query_pair, target_pair = pair_group_table(
    ...     make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1))
    >>> len(table) // 8, len(query_pair)      # 6**4 entries: A, C, G, T, the rest, padding
    (1296, 256)
    >>> pair_group_table(make_scoring("BLOSUM62")) is None
    True
    """
    return _pair_group_table(scoring.matrix.astype(np.int64).tobytes(), len(scoring.matrix),
                             scoring.gap_open, query_padding)


@lru_cache(maxsize=16)
def _pair_group_table(matrix_bytes: bytes, size: int, gap_open: int, query_padding: int):
    """:func:`pair_group_table` of a matrix (its int64 bytes) and gap open, built once
    (shared: read only)."""
    matrix = np.frombuffer(matrix_bytes, np.int64).reshape(size, size)
    codes = size + 1
    if codes * codes > 256:
        return None
    _, query_class = np.unique(matrix, axis=0, return_inverse=True)
    _, target_class = np.unique(matrix, axis=1, return_inverse=True)
    query_class, target_class = query_class.ravel(), target_class.ravel()
    query_classes, target_classes = int(query_class.max()) + 2, int(target_class.max()) + 2
    entries = (query_classes * target_classes) ** 2
    if entries * COPIES > PAIR_TABLE_WORDS:
        return None
    shifted = np.zeros((query_classes, target_classes), np.int64)  # padding: 0 (-go)
    shifted[query_class[:, None], target_class[None, :]] = matrix + gap_open
    shifted[-1, :-1] = query_padding
    if shifted.min() < 0 or shifted.max() >= 1 << 15:
        return None
    # [low target, high target, low query, high query] -> low | high << 16
    table = (shifted.T[:, None, :, None] | (shifted.T[None, :, None, :] << 16)).astype(
        np.int32).ravel()
    query_of = np.append(query_class, query_classes - 1)
    target_of = np.append(target_class, target_classes - 1)
    query_pair = (query_of[:, None] * query_classes + query_of[None, :]).astype(np.int32)
    target_pair = ((target_of[:, None] * target_classes + target_of[None, :])
                   * query_classes ** 2 * COPIES).astype(np.int32)
    return np.repeat(table, COPIES), query_pair.ravel(), target_pair.ravel()


def pair_group_profile(scoring: Scoring) -> tuple[np.ndarray, np.ndarray] | None:
    """The grouped pair kernel's byte profile (its ``profile`` form,
    :func:`gpualign_df.kernels.pairs16.pair_group_kernel`): ``(selectors, columns)``, or
    None where an entry ``score + go`` of a query code below :data:`SMALL_CODES` does
    not fit a byte (0-127).

    ``columns[t]`` holds the entries of query codes 0-3 against target code ``t`` as its
    bytes 0-3 (the padding code, last: 0, the padding's entry); ``selectors[low * codes +
    high]`` is the PTX ``prmt`` selector that picks both halves' entries from the two
    targets' columns (``low``'s column bytes 0-3, ``high``'s 4-7), each entry a byte and
    its sign replicated (0: entries are not negative); a padding query code takes the sign
    of byte 0, so an entry 0. Query codes of 4 and more have no byte: a job takes the
    profile only where every query code is below :data:`SMALL_CODES` (DNA without
    ambiguity codes), and never for the padding rows above a top-aligned query (whose
    entry is ``gap_open``).

    >>> from gpualign_df.scoring import make_scoring
    >>> selectors, columns = pair_group_profile(
    ...     make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1))
    >>> [hex(int(word)) for word in columns[:2]], hex(int(columns[-1]))
    (['0x3030308', '0x3030803'], '0x0')
    >>> hex(int(selectors[1 * 16 + 2])), hex(int(selectors[15 * 16 + 15]))
    ('0xe691', '0x8888')
    """
    return _pair_group_profile(scoring.matrix.astype(np.int64).tobytes(),
                               len(scoring.matrix), scoring.gap_open)


@lru_cache(maxsize=16)
def _pair_group_profile(matrix_bytes: bytes, size: int, gap_open: int):
    """:func:`pair_group_profile` of a matrix (its int64 bytes) and gap open, built once
    (shared: read only)."""
    matrix = np.frombuffer(matrix_bytes, np.int64).reshape(size, size)
    held = min(size, SMALL_CODES)
    entries = matrix[:held] + gap_open        # [query code, target code]
    if entries.min() < 0 or entries.max() > 127:
        return None
    codes = size + 1
    columns = np.zeros(codes, np.int64)
    for query_code in range(held):
        columns[:-1] |= entries[query_code] << (8 * query_code)
    # a half's selector: its byte, then that byte's sign; the padding (and codes without
    # a byte): byte 0's sign twice
    low = np.full(codes, 0x88, np.int64)
    high = np.full(codes, 0x88, np.int64)
    low[:held] = np.arange(held) | (8 | np.arange(held)) << 4
    high[:held] = (4 + np.arange(held)) | (12 + np.arange(held)) << 4
    selectors = low[:, None] | high[None, :] << 8
    return selectors.astype(np.int32).ravel(), columns.astype(np.int32)


def pair_group_bias(scoring: Scoring, mode: Mode, longest_query: int,
                    longest_target: int) -> int:
    """What the grouped pair kernel adds to every value of a global or semi-global fill
    of pairs up to these lengths, so that none is negative: a bound on the lowest H (a
    path of two gaps) and so on every gap value and diagonal candidate (entries are
    never negative); 0 in local mode, whose values are not.

    >>> from gpualign_df.scoring import make_scoring, parse_mode
    >>> scoring = make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1)
    >>> pair_group_bias(scoring, parse_mode("nw"), 150, 277), pair_group_bias(
    ...     scoring, parse_mode("sw"), 150, 277)
    (441, 0)
    """
    if mode.code == MODE_LOCAL:
        return 0
    return 2 * scoring.gap_open + (longest_query + longest_target) * scoring.gap_extend


def pair_group_class(scoring: Scoring, longest_query: int, longest_target: int,
                     classes: tuple[tuple[int, int], ...], traceback: bool = False,
                     bias: int = 0) -> tuple[int, int] | None:
    """The class ``(lanes, rows)`` of the grouped pair kernel for a batch of local
    pairs up to these lengths (the smallest of ``classes`` holding its longest
    query), or None where none does or the kernel would not be exact: every value within
    16 bits (as :func:`use_search_16bit`'s bound), H within the class's running-best keys
    (:func:`~gpualign_df.kernels.pairs16.highest_score`) and a positive gap open (padding
    cells stay below the cell they come from). With ``traceback`` every value a cell
    compares lies within :data:`~gpualign_df.kernels.pairs16.TRACEBACK_VALUES` (the
    highest H plus an entry, and the ``bias`` of a global or semi-global fill,
    :func:`pair_group_bias`; the gap extension within the second comparison's bound too)
    and the class has at most :data:`~gpualign_df.kernels.pairs16.TRACEBACK_ROWS` rows.

    >>> from gpualign_df.scoring import make_scoring
    >>> scoring = make_scoring(match=1, mismatch=-4, gap_open=7, gap_extend=1)
    >>> pair_group_class(scoring, 150, 277, ((8, 16), (8, 19), (8, 24)))
    (8, 19)
    >>> pair_group_class(scoring, 1500, 1600, ((8, 16), (8, 19), (8, 24))) is None
    True
    >>> pair_group_class(scoring, 150, 277, ((8, 16), (8, 19), (8, 24)), traceback=True)
    (8, 19)
    """
    largest = largest_entry(scoring)
    high = largest * min(longest_query, longest_target)
    limit = TRACEBACK_VALUES if traceback else (1 << 15) - 2
    if (scoring.gap_open <= 0 or bias + high + largest + scoring.gap_open > limit
            or longest_target >= 1 << 15
            or (traceback and scoring.gap_extend + TRACEBACK_VALUES > 0x3FFF)):
        return None
    fitting = [(lanes * rows, lanes, rows) for lanes, rows in classes
               if lanes * rows >= longest_query and group_rows_fit(lanes, rows)
               and high <= highest_score(rows)
               and not (traceback and rows > TRACEBACK_ROWS)]
    return min(fitting)[1:] if fitting else None
