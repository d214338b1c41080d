"""What runs where on the GPU: when packed 16-bit cells and keyed running bests are exact,
from bounds on every value a cell can take, and the shape the fill kernels are built with.

Each check is a proof, not a heuristic: a kernel on narrower values runs only where no
value of any cell can leave its range, so that its results equal the 32-bit kernels'.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..kernels import dpx
from ..kernels.cpu import MODE_LOCAL
from ..kernels.strip import PAD16
from ..scoring import Mode, Scoring


def use_search_16bit(scoring: Scoring, mode: Mode, query_lengths: np.ndarray,
                     target_lengths: np.ndarray, allowed: bool | None) -> bool:
    """Whether a search runs on packed 16-bit cells: local mode, ``allowed`` (the
    ``search_16bit`` setting; None: where DPX runs), and no cell can leave 16 bits. A
    local cell is at most ``min(longest query, longest target) * largest entry``, which
    must stay below 2**15; gap costs and the magnitude of the most negative entry must
    stay below 2**13, so that nothing falls past -2**15 from the lanes' minus infinity
    (-2**14)."""
    use = dpx.available() if allowed is None else allowed
    if not use or mode.code != MODE_LOCAL:
        return False
    largest = largest_entry(scoring)
    shortest_side = min(int(query_lengths.max(initial=0)), int(target_lengths.max(initial=0)))
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
