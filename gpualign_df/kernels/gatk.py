"""GATK HaplotypeCaller's Smith-Waterman (``SmithWatermanJavaAligner``), one pair at a time
on the CPU: the rules of that aligner, which are not this package's (README, "GATK's
aligner").

The reference is the rows (the target here) and the alternate the columns (the query).
Weights are GATK's signs: ``match`` > 0, ``mismatch``, ``w_open`` and ``w_extend`` <= 0;
a gap of length k scores ``w_open + (k - 1) * w_extend``.

* No zero floor: cells go negative (never below ``CUTOFF``). Row 0 and column 0 are 0, or
  the gap's score for the ``INDEL`` and ``LEADING_INDEL`` strategies.
* A cell takes the diagonal, else the alternate-only gap (I), else the reference-only gap
  (D) on ties; each gap state keeps the better of opening a gap here and extending its best
  open one, the extension on a tie (the longer gap), with that gap's length, so the
  traceback jumps a whole gap.
* End cell: ``INDEL`` the corner; otherwise the best of the last column, the largest
  reference end on ties; for ``SOFTCLIP`` and ``IGNORE`` then a bottom-row cell that
  scores more, or the same closer to the diagonal.
* ``SOFTCLIP`` and ``IGNORE`` first look for the alternate in the reference exactly (its
  last occurrence) and align it there without the matrix.

:func:`gatk_align` returns GATK's CIGAR elements (M, I, D, S) and alignment offset.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..scoring import OVERHANGS
from .cpu import write_run

#: The overhang strategies (GATK's ``SWOverhangStrategy``), by the option's names.
SOFTCLIP, INDEL, LEADING_INDEL, IGNORE = range(4)
STRATEGIES = dict(zip(OVERHANGS, (SOFTCLIP, INDEL, LEADING_INDEL, IGNORE)))
#: CIGAR element codes of :func:`gatk_align`.
OP_M, OP_I, OP_D, OP_S = range(4)
#: Cells never fall below this (GATK's floor against overflow).
CUTOFF = -100_000_000
#: A gap state before any gap is open (GATK's ``Integer.MIN_VALUE / 2``).
LOW = -(1 << 30)


@njit(cache=True, nogil=True)
def last_occurrence(reference, alternate) -> int:
    """The last position of ``alternate`` in ``reference`` (code for code), or -1."""
    m, n = len(reference), len(alternate)
    for start in range(m - n, -1, -1):
        found = True
        for k in range(n):
            if reference[start + k] != alternate[k]:
                found = False
                break
        if found:
            return start
    return -1


@njit(cache=True, nogil=True)
def _fill(reference, alternate, match, mismatch, w_open, w_extend, strategy, rows, column,
          back, down_best, down_size):
    """GATK's matrix, row by row: ``back[i, j]`` (0 the diagonal, -k an I of k residues, +k
    a D of k) for every cell; of the scores only the last column (``column[i]``) and the
    last row (``rows[m % 2]``), all the end cell needs. ``rows``: two rows of n + 1."""
    m, n = len(reference), len(alternate)
    with_borders = strategy == INDEL or strategy == LEADING_INDEL
    above = rows[0]
    for j in range(n + 1):
        above[j] = w_open + (j - 1) * w_extend if with_borders and j > 0 else 0
        down_best[j] = LOW
        down_size[j] = 0
    column[0] = above[n]
    for i in range(1, m + 1):
        above = rows[(i - 1) % 2]
        here = rows[i % 2]
        left = w_open + (i - 1) * w_extend if with_borders else 0
        here[0] = left
        residue = reference[i - 1]
        right_best = LOW
        right_size = 0
        for j in range(1, n + 1):
            diagonal = above[j - 1] + (match if residue == alternate[j - 1] else mismatch)
            # selects, not branches (the comparisons follow the data): an extension wins
            # a tie with an opening, the diagonal any tie, then the I state
            opened = above[j] + w_open
            extended = down_best[j] + w_extend
            extends = extended >= opened
            down = extended if extends else opened
            down_length = down_size[j] + 1 if extends else 1
            down_best[j] = down
            down_size[j] = down_length
            opened = left + w_open
            extended = right_best + w_extend
            extends = extended >= opened
            right_best = extended if extends else opened
            right_size = right_size + 1 if extends else 1
            takes_diagonal = (diagonal >= down) & (diagonal >= right_best)
            takes_right = right_best >= down
            gap = right_best if takes_right else down
            value = diagonal if takes_diagonal else gap
            step = 0 if takes_diagonal else (-right_size if takes_right else down_length)
            left = max(CUTOFF, value)
            here[j] = left
            back[i, j] = step
        column[i] = left


@njit(cache=True, nogil=True)
def _append(ops, lengths, count, op, length):
    """Element ``count`` set to ``length`` of ``op``; the next free slot."""
    ops[count] = op
    lengths[count] = length
    return count + 1


@njit(cache=True, nogil=True)
def gatk_align(reference, alternate, match, mismatch, w_open, w_extend, strategy, score, back,
               down_best, down_size, ops, lengths):
    """Align one non-empty pair as GATK does; ``score`` is (at least) 3 x (max(m, n) + 1)
    and ``back`` (m + 1) x (n + 1) int32 scratch, ``down_best`` / ``down_size`` n + 1,
    ``ops`` / ``lengths`` m + n + 4. Returns ``(elements, offset, best)``: the CIGAR's
    elements in ``ops``/``lengths`` from its start, GATK's alignment offset and the end
    cell's score."""
    m, n = len(reference), len(alternate)
    if strategy == SOFTCLIP or strategy == IGNORE:
        found = last_occurrence(reference, alternate)
        if found >= 0:
            ops[0] = OP_M
            lengths[0] = n
            return 1, found, n * match
    rows, column = score[:2], score[2]
    _fill(reference, alternate, match, mismatch, w_open, w_extend, strategy, rows, column,
          back, down_best, down_size)
    return walk(m, n, column, rows[m % 2], back, strategy, ops, lengths)


@njit(cache=True, nogil=True)
def walk(m, n, column, bottom, back, strategy, ops, lengths):
    """GATK's end cell of an m x n matrix (its last column ``column[0..m]``, its last row
    ``bottom[0..n]``) and its walk through ``back``: ``(elements, offset, best)`` as
    :func:`gatk_align` returns them."""
    p1 = m
    p2 = n
    segment = 0
    best = column[m]
    if strategy != INDEL:
        best = column[1]
        p1 = 1
        for i in range(2, m + 1):  # the last column, the largest row on ties
            if column[i] >= best:
                best = column[i]
                p1 = i
        if strategy != LEADING_INDEL:
            for j in range(1, n + 1):  # the bottom row: more, or as much nearer the diagonal
                value = bottom[j]
                if value > best or (value == best and abs(m - j) < abs(p1 - p2)):
                    p1 = m
                    p2 = j
                    best = value
                    segment = n - j
    # elements from the end back to the start, then reversed
    count = 0
    if strategy == SOFTCLIP:  # the alternate's end past the reference's: clipped
        count = _append(ops, lengths, count, OP_S, segment)
        segment = 0
    state = OP_M
    while True:
        step = back[p1, p2]
        if step > 0:
            new = OP_D
            length = step
            p1 -= length
        elif step < 0:
            new = OP_I
            length = -step
            p2 -= length
        else:
            new = OP_M
            length = 1
            p1 -= 1
            p2 -= 1
        if new == state:
            segment += length
        else:
            count = _append(ops, lengths, count, state, segment)
            segment = length
            state = new
        if not (p1 > 0 and p2 > 0):
            break
    # the run the walk was in (with the alternate's start under IGNORE), then what is left
    # of the start: clipped, a gap from the corner, or nothing (IGNORE folds it in); empty
    # elements are dropped below
    count = _append(ops, lengths, count, state, segment + (p2 if strategy == IGNORE else 0))
    if strategy == SOFTCLIP:
        count = _append(ops, lengths, count, OP_S, p2)
        offset = p1
    elif strategy == IGNORE:
        offset = p1 - p2
    else:
        count = _append(ops, lengths, count, OP_D if p1 > 0 else OP_I, p1 if p1 > 0 else p2)
        offset = 0
    # reverse in place, then merge neighbours and drop empty elements (writes never pass
    # the element being read)
    for k in range(count // 2):
        other = count - 1 - k
        ops[k], ops[other] = ops[other], ops[k]
        lengths[k], lengths[other] = lengths[other], lengths[k]
    merged = 0
    for k in range(count):
        if lengths[k] == 0:
            continue
        if merged > 0 and ops[merged - 1] == ops[k]:
            lengths[merged - 1] += lengths[k]
            continue
        ops[merged] = ops[k]
        lengths[merged] = lengths[k]
        merged += 1
    return merged, offset, best


#: Pairs :func:`fill_lanes` fills at once, the lane innermost (vector instructions).
LANES = 16
#: Codes of a lane's padding in its reference and its alternate: never equal to each other
#: or to a residue's code, so that a padding cell never matches.
REFERENCE_PADDING, ALTERNATE_PADDING = 254, 253


@njit(cache=True, nogil=True)
def fill_lanes(reference, alternate, reference_lengths, alternate_lengths, match, mismatch,
               w_open, w_extend, strategy, column, bottom, back):
    """:func:`_fill` of ``LANES`` pairs in lockstep: ``reference`` / ``alternate`` hold
    their codes ``[position, lane]`` (padded to the longest), ``column`` (M + 1) x LANES
    gets each lane's own last column, ``bottom`` (N + 1) x LANES its own last row,
    ``back`` (M + 1) * (N + 1) * LANES int32 the steps ``[i, j, lane]``. A lane's cells
    depend on cells above and left of them only, so the padding beyond its lengths
    (computed, never matching) never reaches them; every cell's values and step are
    :func:`_fill`'s.

    The cell loop is written for LLVM's vectoriser: int32 throughout (numba widens int32
    sums to int64), three arrays only (it checks at run time that a vector loop's arrays
    do not overlap, and gives up on loops that need many such checks), the state carried
    along a row in an array, and an unsigned index for the steps (a signed one gets a
    negative-index fix-up it cannot see through)."""
    rows_all, columns_all = reference.shape[0], alternate.shape[0]
    with_borders = strategy == INDEL or strategy == LEADING_INDEL
    match, mismatch = np.int32(match), np.int32(mismatch)
    w_open, w_extend = np.int32(w_open), np.int32(w_extend)
    one, zero = np.int32(1), np.int32(0)
    low, cutoff = np.int32(LOW), np.int32(CUTOFF)
    # work[j]: H (of the row above, then of this row), the D state and its length, the
    # alternate's code; state: the diagonal H, the H to the left, the I state and its
    # length, the row's reference code
    work = np.empty((columns_all + 1, 4, LANES), np.int32)
    state = np.empty((5, LANES), np.int32)
    for j in range(columns_all + 1):
        border = np.int32(w_open + (j - 1) * w_extend) if with_borders and j > 0 else zero
        for lane in range(LANES):
            work[j, 0, lane] = border
            work[j, 1, lane] = low
            work[j, 2, lane] = zero
            work[j, 3, lane] = np.int32(alternate[j - 1, lane]) if j > 0 else zero
    for lane in range(LANES):
        column[0, lane] = work[alternate_lengths[lane], 0, lane]
    row_words = np.uint64((columns_all + 1) * LANES)
    for i in range(1, rows_all + 1):
        border = np.int32(w_open + (i - 1) * w_extend) if with_borders else zero
        corner = np.int32(w_open + (i - 2) * w_extend) if with_borders and i > 1 else zero
        for lane in range(LANES):
            state[0, lane] = corner
            state[1, lane] = border
            state[2, lane] = low
            state[3, lane] = zero
            state[4, lane] = np.int32(reference[i - 1, lane])
        row = np.uint64(i) * row_words
        for j in range(1, columns_all + 1):
            at = row + np.uint64(j * LANES)
            for lane in range(LANES):
                up = work[j, 0, lane]
                diagonal = np.int32(state[0, lane] + (
                    match if state[4, lane] == work[j, 3, lane] else mismatch))
                opened = np.int32(up + w_open)
                extended = np.int32(work[j, 1, lane] + w_extend)
                extends = extended >= opened
                down = extended if extends else opened
                down_length = np.int32(work[j, 2, lane] + one) if extends else one
                work[j, 1, lane] = down
                work[j, 2, lane] = down_length
                opened = np.int32(state[1, lane] + w_open)
                extended = np.int32(state[2, lane] + w_extend)
                extends = extended >= opened
                across = extended if extends else opened
                across_length = np.int32(state[3, lane] + one) if extends else one
                state[2, lane] = across
                state[3, lane] = across_length
                takes_diagonal = (diagonal >= down) & (diagonal >= across)
                takes_right = across >= down
                value = diagonal if takes_diagonal else (across if takes_right else down)
                value = value if value > cutoff else cutoff
                state[0, lane] = up
                state[1, lane] = value
                work[j, 0, lane] = value
                back[at + np.uint64(lane)] = zero if takes_diagonal else (
                    np.int32(-across_length) if takes_right else down_length)
        for lane in range(LANES):
            if i <= reference_lengths[lane]:
                column[i, lane] = work[alternate_lengths[lane], 0, lane]
            if i == reference_lengths[lane]:
                for j in range(columns_all + 1):
                    bottom[j, lane] = work[j, 0, lane]


@njit(cache=True, nogil=True)
def walk_lane(lane, m, n, column, bottom, back, strategy, ops, lengths):
    """:func:`walk` of lane ``lane`` of a :func:`fill_lanes` fill (``back`` as it filled
    it, flat)."""
    steps = back.reshape(column.shape[0], bottom.shape[0], LANES)
    return walk(m, n, column[:, lane], bottom[:, lane], steps[:, :, lane], strategy, ops,
                lengths)


def lane_scratch(m: int, n: int) -> tuple[np.ndarray, ...]:
    """The last three arguments of :func:`fill_lanes` for pairs up to m x n."""
    return (np.empty((m + 1, LANES), np.int32), np.empty((n + 1, LANES), np.int32),
            np.empty((m + 1) * (n + 1) * LANES, np.int32))


def scratch(m: int, n: int) -> tuple[np.ndarray, ...]:
    """Scratch arrays of :func:`gatk_align` (its last six arguments) for pairs up to
    m x n."""
    return (np.empty((3, max(m, n) + 1), np.int32), np.empty((m + 1, n + 1), np.int32),
            np.empty(n + 1, np.int32), np.empty(n + 1, np.int32),
            np.empty(m + n + 4, np.int8), np.empty(m + n + 4, np.int32))


#: Codes of the CIGAR operations :func:`describe` writes (``=``, ``X``, ``I``, ``D``, ``S``,
#: ``M``), as their letters.
DESCRIBED = "=XIDSM"


@njit(cache=True, nogil=True)
def describe(ops, lengths, count, reference, alternate, concrete, query_start, target_start,
             merge, out_ops, out_lengths):
    """The CIGAR of GATK's elements in this package's style, and its statistics.

    Elements start at alternate position ``query_start`` and reference position
    ``target_start`` (GATK's offset: negative, or running past the reference, only under
    ``IGNORE``, whose M elements take the alternate's overhangs). An M position is ``=``
    where both residues are the same concrete one, else ``X`` (a position outside the
    reference included); ``merge`` keeps M elements as they are. Writes the operations
    (:data:`DESCRIBED` codes) to ``out_ops``/``out_lengths`` and returns ``(count,
    matches, mismatches, gap_opens, gaps, length, query_consumed, target_consumed)``."""
    m = len(reference)
    q = query_start
    t = target_start
    written = 0
    matches = 0
    mismatches = 0
    gap_opens = 0
    gaps = 0
    length = 0
    for k in range(count):
        op = ops[k]
        run = lengths[k]
        if op == OP_S:
            code = 4
        elif op == OP_I or op == OP_D:
            code = 2 if op == OP_I else 3
            gap_opens += 1
            gaps += run
            length += run
        if op != OP_M:
            if written > 0 and out_ops[written - 1] == code:
                out_lengths[written - 1] += run
            else:
                out_ops[written] = code
                out_lengths[written] = run
                written += 1
            if op == OP_I:
                q += run
            elif op == OP_D:
                t += run
            continue  # (a leading S is in ``query_start`` already, a trailing one ends it)
        length += run
        for _ in range(run):
            inside = 0 <= t < m
            same = inside and reference[t] == alternate[q] and concrete[alternate[q]] != 0
            if same:
                matches += 1
            else:
                mismatches += 1
            code = 5 if merge else (0 if same else 1)
            if written > 0 and out_ops[written - 1] == code:
                out_lengths[written - 1] += 1
            else:
                out_ops[written] = code
                out_lengths[written] = 1
                written += 1
            q += 1
            t += 1
    return (written, matches, mismatches, gap_opens, gaps, length, q - query_start,
            t - target_start)


#: The letters of :data:`DESCRIBED`, as bytes for :func:`row_of`.
DESCRIBED_BYTES = np.frombuffer(DESCRIBED.encode(), np.uint8)


@njit(cache=True, nogil=True)
def row_of(count, offset, best, ops, lengths, reference, alternate, concrete, merge, out_ops,
           out_lengths, values, k, text):
    """Row ``k`` of a GATK job's columns from its elements (:func:`gatk_align` or
    :func:`walk_lane`'s ``count``, ``offset``, ``best`` and ``ops``/``lengths``):
    ``values[:, k]`` gets score, query start and end, target start and end (clamped to the
    reference), offset and :func:`describe`'s statistics; the CIGAR's characters go to
    ``text`` (at least ``2 * (m + n) + 8`` bytes). Returns their count."""
    m = len(reference)
    query_start = lengths[0] if ops[0] == OP_S else 0
    written, matches, mismatches, gap_opens, gaps, length, query_used, target_used = describe(
        ops, lengths, count, reference, alternate, concrete, query_start, offset, merge,
        out_ops, out_lengths)
    target_start = min(max(offset, 0), m)
    values[0, k] = best
    values[1, k] = query_start
    values[2, k] = query_start + query_used
    values[3, k] = target_start
    values[4, k] = max(target_start, min(offset + target_used, m))
    values[5, k] = offset
    values[6, k] = matches
    values[7, k] = mismatches
    values[8, k] = gap_opens
    values[9, k] = gaps
    values[10, k] = length
    at = 0
    for e in range(written):
        at = write_run(text, at, out_lengths[e], DESCRIBED_BYTES[out_ops[e]])
    return at
