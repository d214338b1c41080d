"""CPU score-only local alignment of queries against a database, many targets at a time in
the lanes of one vector (:mod:`gpualign_df.kernels.simd`), for a search's score pass.

Targets go to groups of :data:`GROUP` (the caller sorts them by length, so a group's
padding is small). A group's score profile is built once, as ``[column][query code][lane]``
(the score of every query code against each lane's residue of that column; a column past a
lane's end scores :data:`PAD`, which never raises a lane's best), and every query then runs
over the group's columns with the targets in the lanes: a cell's substitution score is one
vector load, no gather. A first pass keeps 8-bit cells, 64 targets a vector, where the
scoring allows it; a lane that reaches 127 has saturated, and its query runs again over the
group's two halves in 16-bit cells, 32 targets a vector; a lane that reaches 32,767 there
is reported as :data:`CEILING` and the caller scores that pair again exactly. Below its
ceiling a pass is exact: no cell saturated (in Smith-Waterman H, E and F never fall below
``-gap_open``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .simd import (adds, blend, equal, greater, int8x64, int16x32, lane, load, lowest,
                   splat, store, subs, vand, vmax, vor)

#: Targets of a group: the lanes of an 8-bit vector, two 16-bit vectors.
GROUP = int8x64.lanes
#: Lanes of a 16-bit vector.
HALF = int16x32.lanes
#: The score reported for a pair whose 16-bit lane saturated.
CEILING = int16x32.ceiling
CEILING8 = int8x64.ceiling
#: Target columns a pass of :func:`local_best` takes.
COLUMNS_A_PASS = 4
#: The substitution score of a column past a lane's target, at each width: at most 0, so
#: such a cell's diagonal never exceeds a cell already counted.
PAD = -(1 << 14)
PAD8 = -(1 << 7)


@njit(cache=True, nogil=True)
def group_columns(offsets, members):
    """Columns of the profile of the targets ``members`` (indices, -1 for an empty lane):
    the longest target's, rounded up to a whole pass of :func:`local_best`."""
    columns = 0
    for k in range(len(members)):
        if members[k] >= 0:
            columns = max(columns, offsets[members[k] + 1] - offsets[members[k]])
    return (columns + COLUMNS_A_PASS - 1) // COLUMNS_A_PASS * COLUMNS_A_PASS


@njit(cache=True, nogil=True)
def fill_profile(matrix, codes, offsets, members, profile):
    """The score profile of the targets ``members`` (one lane each) into ``profile``
    (``[column][code][lane]`` flattened, :func:`group_columns` columns, filled with the
    padding score beforehand)."""
    lanes = len(members)
    alphabet = matrix.shape[0]
    for k in range(lanes):
        target = members[k]
        if target < 0:
            continue
        start = offsets[target]
        for j in range(offsets[target + 1] - start):
            code = codes[start + j]
            base = j * alphabet * lanes + k
            for a in range(alphabet):
                profile[base + a * lanes] = matrix[a, code]


@njit(cache=True, nogil=True)
def profile_like(matrix, codes, offsets, members, pad, like):
    """(profile, columns) of the targets ``members``, of ``like``'s dtype, columns past a
    lane's target scoring ``pad``."""
    columns = group_columns(offsets, members)
    profile = np.full(columns * matrix.shape[0] * len(members), pad, dtype=like.dtype)
    fill_profile(matrix, codes, offsets, members, profile)
    return profile, columns


@njit(cache=True, nogil=True)
def profile16(matrix, codes, offsets, members):
    """(16-bit profile, columns) of the targets ``members``."""
    return profile_like(matrix, codes, offsets, members, PAD, np.empty(0, np.int16))


@njit(cache=True, nogil=True)
def profile8(matrix, codes, offsets, members):
    """(8-bit profile, columns) of the targets ``members``."""
    return profile_like(matrix, codes, offsets, members, PAD8, np.empty(0, np.int8))


@njit(cache=True, nogil=True)
def start_rows(h_row, e_row, m, lanes, gap_open, gap_extend):
    """Clear the first ``m`` rows of H (0) and E (the lanes' lowest value) before a pass
    down a query; returns the vectors (0, lowest, gap open, gap extend) of their type."""
    seed = load(h_row, 0)
    zero = subs(seed, seed)
    low = lowest(zero)
    for i in range(m):
        store(h_row, i * lanes, zero)
        store(e_row, i * lanes, low)
    return zero, low, splat(gap_open, zero), splat(gap_extend, zero)


@njit(cache=True, nogil=True)
def local_best(query, profile, columns, alphabet, lanes, gap_open, gap_extend, h_row, e_row):
    """The best local score of ``query`` (codes) against each lane's target, as a vector of
    ``profile``'s lane type (saturated lanes hold its ceiling). Four columns a pass down the
    query: the row's H and E go through memory once per :data:`COLUMNS_A_PASS` columns.
    ``columns``: a multiple of four. ``h_row``/``e_row``: scratch of the profile's dtype,
    at least ``(len(query) + 1) * lanes``."""
    m = len(query)
    zero, low, go, ge = start_rows(h_row, e_row, m, lanes, gap_open, gap_extend)
    best = zero
    stride = alphabet * lanes
    for j in range(0, columns, COLUMNS_A_PASS):
        base0 = j * stride
        base1 = base0 + stride
        base2 = base1 + stride
        base3 = base2 + stride
        # H of the row above in columns j - 1 .. j + 3 (diagonals and ups), F per column
        above = zero
        up0 = zero
        up1 = zero
        up2 = zero
        up3 = zero
        f0 = low
        f1 = low
        f2 = low
        f3 = low
        for i in range(m):
            at = i * lanes
            code = query[i] * lanes
            left = load(h_row, at)
            e = vmax(subs(load(e_row, at), ge), subs(left, go))
            f0 = vmax(subs(f0, ge), subs(up0, go))
            h0 = vmax(vmax(adds(above, load(profile, base0 + code)), zero), vmax(e, f0))
            e = vmax(subs(e, ge), subs(h0, go))
            f1 = vmax(subs(f1, ge), subs(up1, go))
            h1 = vmax(vmax(adds(up0, load(profile, base1 + code)), zero), vmax(e, f1))
            e = vmax(subs(e, ge), subs(h1, go))
            f2 = vmax(subs(f2, ge), subs(up2, go))
            h2 = vmax(vmax(adds(up1, load(profile, base2 + code)), zero), vmax(e, f2))
            e = vmax(subs(e, ge), subs(h2, go))
            f3 = vmax(subs(f3, ge), subs(up3, go))
            h3 = vmax(vmax(adds(up2, load(profile, base3 + code)), zero), vmax(e, f3))
            best = vmax(best, vmax(vmax(h0, h1), vmax(h2, h3)))
            store(h_row, at, h3)
            store(e_row, at, e)
            above = left
            up0 = h0
            up1 = h1
            up2 = h2
            up3 = h3
    return best


@njit(cache=True, nogil=True)
def search_groups(query_codes, query_offsets, query_rows, target_codes, target_offsets,
                  groups, matrix, gap_open, gap_extend, eight_bit, scores, control, slot):
    """Scores of queries ``query_rows`` (into ``scores``' rows, in that order) against the
    targets of ``groups`` (rows of :data:`GROUP` target indices, -1 for an empty lane)
    into ``scores[row, target]``: 8-bit lanes first (``eight_bit``), 16-bit lanes for the
    groups where a lane saturated (or for all); ``CEILING`` where a 16-bit lane saturated.
    Stops once ``control[0]`` is set; adds the cells done to ``control[1 + slot]``."""
    alphabet = matrix.shape[0]
    longest = 1
    for r in range(len(query_rows)):
        q = query_rows[r]
        longest = max(longest, query_offsets[q + 1] - query_offsets[q])
    h8 = np.empty((longest + 1) * GROUP, dtype=np.int8)
    e8 = np.empty((longest + 1) * GROUP, dtype=np.int8)
    h16 = np.empty((longest + 1) * HALF, dtype=np.int16)
    e16 = np.empty((longest + 1) * HALF, dtype=np.int16)
    for g in range(groups.shape[0]):
        members = groups[g]
        residues = 0
        for k in range(GROUP):
            if members[k] >= 0:
                residues += target_offsets[members[k] + 1] - target_offsets[members[k]]
        bytes_, columns8 = profile8(matrix, target_codes, target_offsets,
                                    members[:GROUP if eight_bit else 0])
        # the halves' 16-bit profiles, built once the group needs them
        low_half = members[:HALF]
        high_half = members[HALF:]
        profile_low = np.empty(0, np.int16)
        profile_high = profile_low
        columns_low = columns_high = 0
        built = False
        for r in range(len(query_rows)):
            if control[0] != 0:
                return
            q = query_rows[r]
            query = query_codes[query_offsets[q]:query_offsets[q + 1]]
            saturated = not eight_bit
            if eight_bit:
                best8 = local_best(query, bytes_, columns8, alphabet, GROUP, gap_open,
                                   gap_extend, h8, e8)
                for k in range(GROUP):
                    if members[k] >= 0:
                        score = lane(best8, k)
                        scores[r, members[k]] = score
                        saturated |= score >= CEILING8
            if saturated:
                if not built:
                    profile_low, columns_low = profile16(matrix, target_codes,
                                                         target_offsets, low_half)
                    profile_high, columns_high = profile16(matrix, target_codes,
                                                           target_offsets, high_half)
                    built = True
                best16 = local_best(query, profile_low, columns_low, alphabet, HALF,
                                    gap_open, gap_extend, h16, e16)
                for k in range(HALF):
                    if low_half[k] >= 0:
                        scores[r, low_half[k]] = lane(best16, k)
                best16 = local_best(query, profile_high, columns_high, alphabet, HALF,
                                    gap_open, gap_extend, h16, e16)
                for k in range(HALF):
                    if high_half[k] >= 0:
                        scores[r, high_half[k]] = lane(best16, k)
            control[1 + slot] += len(query) * residues


@njit(cache=True, nogil=True)
def local_ends(query, profile, columns, alphabet, lanes, gap_open, gap_extend, h_row, e_row):
    """The best local score of ``query`` against each lane's target and its end cell, as
    three vectors of ``profile``'s (16-bit) lane type: score, end row, end column (1-based;
    0, 0 for a best of 0). Ties go to the smallest end row, then the smallest end column
    (the README's rule): the columns run left to right and a cell replaces a lane's end
    where it scores more, or as much in a row above. Rows and columns must stay below the
    lanes' ceiling. One column a pass; ``h_row``/``e_row`` as for :func:`local_best`."""
    m = len(query)
    zero, low, go, ge = start_rows(h_row, e_row, m, lanes, gap_open, gap_extend)
    best = zero
    best_i = zero
    best_j = zero
    stride = alphabet * lanes
    for j in range(columns):
        base = j * stride
        column = splat(j + 1, zero)
        diagonal = zero
        up = zero
        f = low
        for i in range(m):
            at = i * lanes
            left = load(h_row, at)
            e = vmax(subs(load(e_row, at), ge), subs(left, go))
            f = vmax(subs(f, ge), subs(up, go))
            h = vmax(vmax(adds(diagonal, load(profile, base + query[i] * lanes)), zero),
                     vmax(e, f))
            row = splat(i + 1, zero)
            take = vor(greater(h, best), vand(equal(h, best), greater(best_i, row)))
            best = vmax(best, h)
            best_i = blend(take, row, best_i)
            best_j = blend(take, column, best_j)
            diagonal = left
            store(h_row, at, h)
            store(e_row, at, e)
            up = h
    return best, best_i, best_j


@njit(cache=True, nogil=True)
def search_ends(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                pair_target, run_starts, run_stops, matrix, gap_open, gap_extend, score,
                query_end, target_end, control, slot):
    """Local score and end cell (0-based exclusive ends) of the pairs of each run
    ``run_starts[k]`` .. ``run_stops[k]`` (pairs of one query, at most :data:`HALF`), in
    16-bit lanes; ``CEILING`` where a lane saturated. Stops once ``control[0]`` is set;
    adds the cells done to ``control[1 + slot]``."""
    alphabet = matrix.shape[0]
    for k in range(len(run_starts)):
        if control[0] != 0:
            return
        first, stop = run_starts[k], run_stops[k]
        members = np.full(HALF, -1, dtype=np.int64)
        residues = 0
        for t in range(stop - first):
            target = pair_target[first + t]
            members[t] = target
            residues += target_offsets[target + 1] - target_offsets[target]
        profile, columns = profile16(matrix, target_codes, target_offsets, members)
        q = pair_query[first]
        query = query_codes[query_offsets[q]:query_offsets[q + 1]]
        h_row = np.empty((len(query) + 1) * HALF, dtype=np.int16)
        e_row = np.empty((len(query) + 1) * HALF, dtype=np.int16)
        best, best_i, best_j = local_ends(query, profile, columns, alphabet, HALF, gap_open,
                                          gap_extend, h_row, e_row)
        for t in range(stop - first):
            score[first + t] = lane(best, t)
            query_end[first + t] = lane(best_i, t)
            target_end[first + t] = lane(best_j, t)
        control[1 + slot] += len(query) * residues


#: A dead cell of :func:`hit_start` (below every live value).
DEAD = -(1 << 40)


@njit(cache=True, nogil=True)
def hit_start(query, target, last_i, last_j, matrix, gap_open, gap_extend, best):
    """``(row, column)``: a corner before which the local alignment of score ``best`` that
    ends aligning ``query[last_i]`` with ``target[last_j]`` cannot start.

    A score-only pass runs backwards from that cell, anchored there: its value at a cell
    is the best score of an alignment from that cell to the end cell. The alignment the
    full traceback gives starts at a cell where that value is ``best`` (nothing ending
    there scores more), and each of its cells has a value of at least 0 (every prefix of a
    local alignment scores above 0; ``best`` is the matrix's maximum), so the pass drops
    every value below 0 (those cells die: the pass only walks the live band around the
    alignment) and returns the first row and the first column where it reaches ``best``.
    A local fill of the rectangle from there to the end cell, with zero borders, gives
    the same end cell and the same path as the full matrix: the path's cells keep their
    values, and every other candidate can only lose."""
    width = last_j + 1
    # reversed column k = last_j - j + 1; k = 0 is the border past the end cell, whose
    # diagonal value anchors the first row
    h_prev = np.empty(width + 1, dtype=np.int64)
    f_prev = np.empty(width + 1, dtype=np.int64)
    h_cur = np.empty(width + 1, dtype=np.int64)
    f_cur = np.empty(width + 1, dtype=np.int64)
    h_prev[0] = 0
    f_prev[0] = DEAD
    low, high = 0, 0          # live reversed columns of the previous row
    first_i, first_j = last_i, last_j
    for i in range(last_i, -1, -1):
        q = query[i]
        e = DEAD
        new_low, new_high = width + 1, -1
        k = max(low, 1)
        # a cell lives on the row below's live cells (diagonal, vertical gap) or on its
        # left neighbour in this row (horizontal gap)
        while k <= width and (k <= high + 1 or new_high == k - 1):
            j = last_j - k + 1
            diagonal = h_prev[k - 1] if low <= k - 1 <= high else DEAD
            h = diagonal + matrix[q, target[j]] if diagonal > DEAD else DEAD
            left = h_cur[k - 1] if new_low <= k - 1 <= new_high else DEAD
            e = max(e - gap_extend if e > DEAD else DEAD,
                    left - gap_open if left > DEAD else DEAD)
            if e < 0:
                e = DEAD
            up_h = h_prev[k] if low <= k <= high else DEAD
            up_f = f_prev[k] if low <= k <= high else DEAD
            f = max(up_f - gap_extend if up_f > DEAD else DEAD,
                    up_h - gap_open if up_h > DEAD else DEAD)
            if f < 0:
                f = DEAD
            h = max(h, e, f)
            if h < 0:
                h = DEAD
            h_cur[k] = h
            f_cur[k] = f
            if h > DEAD or f > DEAD or e > DEAD:
                if new_low > k:
                    new_low = k
                new_high = k
            if h == best:
                first_i = i
                if j < first_j:
                    first_j = j
            k += 1
        if new_high < 0:
            break
        h_prev, h_cur = h_cur, h_prev
        f_prev, f_cur = f_cur, f_prev
        low, high = new_low, new_high
    return first_i, first_j


@njit(cache=True, nogil=True)
def hit_starts(query_codes, query_offsets, target_codes, target_offsets, pair_query,
               pair_target, pairs, score, query_end, target_end, matrix, gap_open,
               gap_extend, first_row, first_column, control, slot):
    """:func:`hit_start` of each pair ``pairs[k]`` (score and exclusive ends given, score
    above 0) into ``first_row`` and ``first_column``. Stops once ``control[0]`` is set;
    adds the pair's end rectangle's cells to ``control[1 + slot]``."""
    for k in range(len(pairs)):
        if control[0] != 0:
            return
        p = pairs[k]
        q, t = pair_query[p], pair_target[p]
        query = query_codes[query_offsets[q]:query_offsets[q + 1]]
        target = target_codes[target_offsets[t]:target_offsets[t + 1]]
        first_row[p], first_column[p] = hit_start(query, target, query_end[p] - 1,
                                                  target_end[p] - 1, matrix, gap_open,
                                                  gap_extend, score[p])
        control[1 + slot] += np.int64(query_end[p]) * target_end[p]


def fits(matrix: np.ndarray, gap_open: int, gap_extend: int, bits: int = 16) -> bool:
    """Whether a ``bits``-bit pass (16 or 8) can score with these costs: substitution
    scores and gap costs well inside its lanes (a saturated lane is then the only way to
    lose exactness)."""
    limit = 1 << (bits - 4)
    return bool(np.abs(matrix).max(initial=0) < limit and 0 <= gap_open < limit
                and 0 <= gap_extend < limit)


def target_groups(lengths: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Groups of :data:`GROUP` valid targets, longest first (-1: an empty lane), as an int64
    array of shape (groups, GROUP)."""
    order = np.flatnonzero(valid)
    order = order[np.argsort(-lengths[order], kind="stable")]
    groups = np.full(((len(order) + GROUP - 1) // GROUP, GROUP), -1, dtype=np.int64)
    groups.ravel()[:len(order)] = order
    return groups


__all__ = ["CEILING", "GROUP", "HALF", "PAD", "PAD8", "fits", "local_best", "local_ends",
           "profile8", "profile16", "search_ends", "search_groups", "target_groups"]
