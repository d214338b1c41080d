"""CPU score-only local alignment of queries against a database, many targets at a time in
the lanes of one vector (:mod:`gpualign_df.kernels.simd`), for a search's score pass, and
the end cells of a search's kept pairs one pair at a time down a striped query.

Score pass: targets are packed back to back into the lanes of groups of :data:`GROUP`
lanes (:func:`lane_layout`), so lanes end nearly together whatever the lengths. A group's
score profile is built once a call, as ``[column][query code][lane]`` (the score of every
query code against each lane's residue of that column; a column past a lane's last target
scores :data:`PAD`, which never raises a lane's best), and every query then runs over the
group's columns with the targets in the lanes: a cell's substitution score is one vector
load, no gather. A first pass keeps 8-bit cells, 64 lanes a vector, where the scoring
allows it; a lane that reaches 127 has saturated, and its targets are scored again in
16-bit cells (one by one, or the lanes of the group's half); a score that reaches 32,767
there is reported as :data:`CEILING` and the caller scores that pair again exactly. Below
its ceiling a pass is exact: no cell saturated (in Smith-Waterman H, E and F never fall
below ``-gap_open``).

Kept pairs (:func:`search_ends`): Farrar's striped layout, the query's 16-bit profile built
once and every kept target run against it (:func:`striped_end`), the end cell by the
README's tie rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .simd import (adds, any_set, blend, equal, greater, int8x64, int16x32, lane, largest,
                   load, lowest, shift_in, smallest, splat, store, subs, vand, vmax)

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
def lane_profile(matrix, codes, offsets, entry_target, entry_lane, entry_column, columns,
                 lanes, lane0, pad, like):
    """The score profile of a group's targets, ``[column][code][lane]`` flattened, of
    ``like``'s dtype (:func:`fill_lane_profile`)."""
    profile = np.empty(columns * matrix.shape[0] * lanes, dtype=like.dtype)
    fill_lane_profile(matrix, codes, offsets, entry_target, entry_lane, entry_column, lanes,
                      lane0, pad, profile)
    return profile


@njit(cache=True, nogil=True)
def fill_lane_profile(matrix, codes, offsets, entry_target, entry_lane, entry_column, lanes,
                      lane0, pad, profile):
    """Fill ``profile`` with the score profile of a group's targets, ``[column][code][lane]``
    flattened: entry ``e`` (target ``entry_target[e]``) fills lane ``entry_lane[e] - lane0``
    from column ``entry_column[e]`` on (entries whose lane lies outside ``lane0 .. lane0 +
    lanes`` are left out); every other cell scores ``pad`` (:data:`PAD` or :data:`PAD8`),
    which never raises a lane's best."""
    alphabet = matrix.shape[0]
    profile[:] = pad
    for e in range(len(entry_target)):
        k = entry_lane[e] - lane0
        if k < 0 or k >= lanes:
            continue
        target = entry_target[e]
        start = offsets[target]
        for j in range(offsets[target + 1] - start):
            code = codes[start + j]
            base = (entry_column[e] + j) * alphabet * lanes + k
            for a in range(alphabet):
                profile[base + a * lanes] = matrix[a, code]


@njit(cache=True, nogil=True)
def fill_group_profiles(matrix, codes, offsets, group_first, group_stop, group_entries,
                        entry_target, entry_lane, entry_column, group_columns, profiles,
                        profile_offsets):
    """The 8-bit profiles of groups ``group_first`` to ``group_stop`` of a
    :func:`lane_layout`, group ``g``'s into ``profiles[profile_offsets[g]:
    profile_offsets[g + 1]]``, for :func:`search_groups` to share."""
    for g in range(group_first, group_stop):
        first, stop = group_entries[g], group_entries[g + 1]
        fill_lane_profile(matrix, codes, offsets, entry_target[first:stop],
                          entry_lane[first:stop], entry_column[first:stop], GROUP, 0, PAD8,
                          profiles[profile_offsets[g]:profile_offsets[g + 1]])


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
def local_best(query, profile, columns, alphabet, lanes, gap_open, gap_extend, h_row, e_row,
               entry_lane, entry_column, best):
    """The best local score of ``query`` (codes) against each target packed in the lanes
    of ``profile`` (:func:`lane_profile`: a lane holds targets back to back, each from a
    column that starts a pass), into ``best[e]`` for entry ``e`` (its lane
    ``entry_lane[e]``, its first column ``entry_column[e]``; entries in column order;
    a saturated lane gives its type's ceiling). Four columns a pass down the query: the
    row's H and E go through memory once per :data:`COLUMNS_A_PASS` columns. Where a
    lane's next target starts, its lane of the row's H and E is read as 0 (the border
    column's H; an E below 0 never reaches a local H), its best is the finished
    target's. ``columns``: a multiple of four. ``h_row``/``e_row``: scratch of the
    profile's dtype, at least ``(len(query) + 1) * lanes``."""
    m = len(query)
    zero, low, go, ge = start_rows(h_row, e_row, m, lanes, gap_open, gap_extend)
    running = zero
    stride = alphabet * lanes
    keep = np.empty(lanes, dtype=profile.dtype)
    current = np.full(lanes, -1, dtype=np.int64)
    keep_lanes = zero
    entry = 0
    entries = len(entry_lane)
    for j in range(0, columns, COLUMNS_A_PASS):
        resets = False
        if entry < entries and entry_column[entry] == j:
            keep[:] = -1
            while entry < entries and entry_column[entry] == j:
                k = entry_lane[entry]
                if current[k] >= 0:
                    best[current[k]] = lane(running, k)
                current[k] = entry
                keep[k] = 0
                entry += 1
            keep_lanes = load(keep, 0)
            running = vand(running, keep_lanes)
            resets = j > 0
        base0 = j * stride
        base1 = base0 + stride
        base2 = base1 + stride
        base3 = base2 + stride
        # H of the row above in columns j - 1 .. j + 3 (diagonals), and H - open of its
        # cells in columns j .. j + 3 (each cell's opening serves its right neighbour's E
        # and the next row's F: computed once), F per column
        above = zero
        up0 = zero
        up1 = zero
        up2 = zero
        opened0 = subs(zero, go)
        opened1 = opened0
        opened2 = opened0
        opened3 = opened0
        f0 = low
        f1 = low
        f2 = low
        f3 = low
        for i in range(m):
            at = i * lanes
            code = query[i] * lanes
            left = load(h_row, at)
            e = load(e_row, at)
            if resets:
                left = vand(left, keep_lanes)
                e = vand(e, keep_lanes)
            e = vmax(subs(e, ge), subs(left, go))
            f0 = vmax(subs(f0, ge), opened0)
            h0 = vmax(vmax(adds(above, load(profile, base0 + code)), zero), vmax(e, f0))
            opened0 = subs(h0, go)
            e = vmax(subs(e, ge), opened0)
            f1 = vmax(subs(f1, ge), opened1)
            h1 = vmax(vmax(adds(up0, load(profile, base1 + code)), zero), vmax(e, f1))
            opened1 = subs(h1, go)
            e = vmax(subs(e, ge), opened1)
            f2 = vmax(subs(f2, ge), opened2)
            h2 = vmax(vmax(adds(up1, load(profile, base2 + code)), zero), vmax(e, f2))
            opened2 = subs(h2, go)
            e = vmax(subs(e, ge), opened2)
            f3 = vmax(subs(f3, ge), opened3)
            h3 = vmax(vmax(adds(up2, load(profile, base3 + code)), zero), vmax(e, f3))
            opened3 = subs(h3, go)
            running = vmax(running, vmax(vmax(h0, h1), vmax(h2, h3)))
            store(h_row, at, h3)
            store(e_row, at, e)
            above = left
            up0 = h0
            up1 = h1
            up2 = h2
    for k in range(lanes):
        if current[k] >= 0:
            best[current[k]] = lane(running, k)


@njit(cache=True, nogil=True)
def search_groups(query_codes, query_offsets, query_rows, target_codes, target_offsets,
                  group_first, group_stop, group_entries, entry_target, entry_lane,
                  entry_column, group_columns, matrix, gap_open, gap_extend, eight_bit,
                  rescue_share, shared8, shared8_offsets, scores, control, slot):
    """Scores of queries ``query_rows`` (into ``scores``' rows, in that order) against the
    targets of groups ``group_first`` to ``group_stop`` of a :func:`lane_layout` into
    ``scores[row, target]``: 8-bit lanes first (``eight_bit``); then, in each half of a
    group (its lanes 0-31, 32-63) where a lane saturated, its saturated targets one by one
    in 16 bits (:func:`striped_end`, which pays more a cell but only for them) where they
    hold at most ``1 / rescue_share`` of the half's lane columns, else the half's 16-bit
    lanes (those for all without ``eight_bit``); ``CEILING`` where a 16-bit lane
    saturated. ``shared8``/``shared8_offsets``: the groups' 8-bit profiles built once
    (:func:`fill_group_profiles`), or empty (each group's built here). Stops once
    ``control[0]`` is set; adds the cells done to ``control[1 + slot]``."""
    alphabet = matrix.shape[0]
    longest = 1
    for r in range(len(query_rows)):
        q = query_rows[r]
        longest = max(longest, query_offsets[q + 1] - query_offsets[q])
    h8 = np.empty((longest + 1) * GROUP, dtype=np.int8)
    e8 = np.empty((longest + 1) * GROUP, dtype=np.int8)
    h16 = np.empty((longest + 1) * HALF, dtype=np.int16)
    e16 = np.empty((longest + 1) * HALF, dtype=np.int16)
    for g in range(group_first, group_stop):
        first, stop = group_entries[g], group_entries[g + 1]
        targets = entry_target[first:stop]
        lanes_of = entry_lane[first:stop]
        columns_of = entry_column[first:stop]
        columns = group_columns[g]
        residues = 0
        for e in range(stop - first):
            residues += target_offsets[targets[e] + 1] - target_offsets[targets[e]]
        bytes_ = np.empty(0, np.int8)
        if eight_bit and len(shared8_offsets):
            bytes_ = shared8[shared8_offsets[g]:shared8_offsets[g + 1]]
        elif eight_bit:
            bytes_ = lane_profile(matrix, target_codes, target_offsets, targets, lanes_of,
                                  columns_of, columns, GROUP, 0, PAD8, bytes_)
        best = np.zeros(stop - first, dtype=np.int32)
        # each half's entries and 16-bit profile, built once the group needs them
        halves = [np.flatnonzero(lanes_of < HALF), np.flatnonzero(lanes_of >= HALF)]
        profiles = [np.empty(0, np.int16), np.empty(0, np.int16)]
        built = False
        for r in range(len(query_rows)):
            if control[0] != 0:
                return
            q = query_rows[r]
            query = query_codes[query_offsets[q]:query_offsets[q + 1]]
            saturated = np.array([not eight_bit, not eight_bit])
            if eight_bit:
                local_best(query, bytes_, columns, alphabet, GROUP, gap_open, gap_extend,
                           h8, e8, lanes_of, columns_of, best)
                for e in range(stop - first):
                    scores[r, targets[e]] = best[e]
                    if best[e] >= CEILING8:
                        saturated[0 if lanes_of[e] < HALF else 1] = True
            for half in range(2):
                if not saturated[half] or len(halves[half]) == 0:
                    continue
                chosen = halves[half]
                if eight_bit:
                    # few saturated residues: those targets alone, striped down the query
                    residues_over = 0
                    for e in chosen:
                        if best[e] >= CEILING8:
                            target = targets[e]
                            residues_over += (target_offsets[target + 1]
                                              - target_offsets[target])
                    if residues_over * rescue_share <= columns * HALF:
                        striped = striped_query(matrix, query)
                        for e in chosen:
                            if best[e] >= CEILING8:
                                target = targets[e]
                                scores[r, target] = striped_end(
                                    striped, target_codes[target_offsets[target]:
                                                          target_offsets[target + 1]],
                                    gap_open, gap_extend)[0]
                        continue
                if not built:
                    for other in range(2):
                        profiles[other] = lane_profile(
                            matrix, target_codes, target_offsets, targets, lanes_of,
                            columns_of, columns, HALF, other * HALF, PAD,
                            np.empty(0, np.int16))
                    built = True
                half_best = np.zeros(len(chosen), dtype=np.int32)
                local_best(query, profiles[half], columns, alphabet, HALF, gap_open,
                           gap_extend, h16, e16, lanes_of[chosen] - half * HALF,
                           columns_of[chosen], half_best)
                for e in range(len(chosen)):
                    scores[r, targets[chosen[e]]] = half_best[e]
            control[1 + slot] += len(query) * residues


@njit(cache=True, nogil=True)
def query_profile16(matrix, query):
    """(profile, segments) of ``query`` in Farrar's striped layout for
    :func:`striped_end`: ``segments = ceil(len(query) / HALF)``, and lane ``k`` of
    segment ``t`` stands for query row ``k * segments + t``; the profile is
    ``[target code][segment][lane]`` flattened (rows past the query score :data:`PAD`)."""
    m = len(query)
    segments = max(1, (m + HALF - 1) // HALF)
    alphabet = matrix.shape[0]
    profile = np.empty(alphabet * segments * HALF, np.int16)
    for code in range(alphabet):
        for t in range(segments):
            base = (code * segments + t) * HALF
            for k in range(HALF):
                i = k * segments + t
                profile[base + k] = matrix[query[i], code] if i < m else PAD
    return profile, segments


@njit(cache=True, nogil=True)
def striped_query(matrix, query):
    """What :func:`striped_end` runs ``query`` with against any number of targets: its
    striped profile (:func:`query_profile16`), its segments, and the kernel's scratch (H
    of two columns and E, int16 of ``segments * HALF`` each; the lane numbers)."""
    profile, segments = query_profile16(matrix, query)
    return (profile, segments, np.empty(segments * HALF, np.int16),
            np.empty(segments * HALF, np.int16), np.empty(segments * HALF, np.int16),
            np.arange(HALF).astype(np.int16))


@njit(cache=True, nogil=True)
def striped_end(striped, target, gap_open, gap_extend):
    """Local score and end cell (1-based; 0, 0 for a best of 0) of the query of
    ``striped`` (:func:`striped_query`) against ``target`` (codes), in 16-bit lanes down
    the striped query, one target column after another (Farrar). A column's pass takes
    the gap along the query (F) only within each lane's rows; the lazy-F passes then carry
    it from lane to lane until it can change no cell: a carry ``c`` entering a row whose H
    was ``h`` before the carry reached it goes on only while ``c - extend > h - open`` in
    some lane (below that, the row's own H already opened a better gap into the next row;
    a raised H always goes on, since ``c > h`` there). A raised H also raises the E it opens
    into the next column, so the result equals the full recurrences for every gap cost.
    Ties go to the smallest end row, then the smallest end column (the README's rule):
    where a column's largest H reaches the best so far, the smallest of its rows holding
    that value is compared. ``CEILING`` where a lane saturated (the caller scores that pair
    again). End rows are counted in Python integers: any query length."""
    profile, segments, h_a, h_b, e_row, lanes = striped
    zero = subs(load(h_a, 0), load(h_a, 0))
    low = lowest(zero)
    go = splat(gap_open, zero)
    ge = splat(gap_extend, zero)
    none = splat(CEILING, zero)
    for t in range(segments):
        store(h_a, t * HALF, zero)
        store(e_row, t * HALF, low)
    h_load = h_a
    h_store = h_b
    last = (segments - 1) * HALF
    best = 0
    best_i = 0
    best_j = 0
    for j in range(len(target)):
        base = target[j] * segments * HALF
        f = low
        h = shift_in(load(h_load, last), 0)  # the diagonal of each lane's first row
        column_best = zero
        for t in range(segments):
            at = t * HALF
            e = load(e_row, at)
            h = vmax(vmax(adds(h, load(profile, base + at)), e), vmax(f, zero))
            column_best = vmax(column_best, h)
            store(h_store, at, h)
            opened = subs(h, go)
            store(e_row, at, vmax(subs(e, ge), opened))
            f = vmax(subs(f, ge), opened)
            h = load(h_load, at)
        # lazy F: the gaps along the query that cross from one lane's rows to the next's
        carry = shift_in(f, -CEILING - 1)
        t = 0
        while True:
            at = t * HALF
            before = load(h_store, at)
            raised = vmax(before, carry)
            store(h_store, at, raised)
            column_best = vmax(column_best, raised)
            store(e_row, at, vmax(load(e_row, at), subs(raised, go)))
            carry = subs(carry, ge)
            if not any_set(greater(carry, subs(before, go))):
                break
            t += 1
            if t == segments:
                t = 0
                carry = shift_in(carry, -CEILING - 1)
        top = largest(column_best)
        if top > 0 and top >= best:
            value = splat(top, zero)
            lane_numbers = load(lanes, 0)
            end_i = 1 << 62
            for t in range(segments):
                hit = equal(load(h_store, t * HALF), value)
                if any_set(hit):
                    end_i = min(end_i, smallest(blend(hit, lane_numbers, none)) * segments
                                + t + 1)
            if top > best or end_i < best_i:
                best = top
                best_i = end_i
                best_j = j + 1
        h_load, h_store = h_store, h_load
    return best, best_i, best_j


@njit(cache=True, nogil=True)
def search_ends(query_codes, query_offsets, target_codes, target_offsets, pair_query,
                pair_target, run_starts, run_stops, matrix, gap_open, gap_extend, score,
                query_end, target_end, control, slot):
    """Local score and end cell (0-based exclusive ends) of the pairs of each run
    ``run_starts[k]`` .. ``run_stops[k]`` (pairs of one query), by :func:`striped_end`
    (the query's profile built once a run); ``CEILING`` where a lane saturated. Stops
    once ``control[0]`` is set; adds the cells done to ``control[1 + slot]``."""
    for k in range(len(run_starts)):
        if control[0] != 0:
            return
        first, stop = run_starts[k], run_stops[k]
        q = pair_query[first]
        query = query_codes[query_offsets[q]:query_offsets[q + 1]]
        striped = striped_query(matrix, query)
        for p in range(first, stop):
            if control[0] != 0:
                return
            target = pair_target[p]
            codes = target_codes[target_offsets[target]:target_offsets[target + 1]]
            score[p], query_end[p], target_end[p] = striped_end(striped, codes, gap_open,
                                                                gap_extend)
            control[1 + slot] += len(query) * len(codes)


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


@njit(cache=True, nogil=True)
def _pack(order, widths, groups):
    """Targets ``order`` (longest first) of ``widths`` columns packed back to back into
    the ``groups * GROUP`` lanes of ``groups`` groups, each into the least loaded lane
    (longest processing time first: the lanes end within about the shortest targets'
    width of one another). Returns each entry's group, lane and first column, and each
    group's columns (its most loaded lane)."""
    bins = groups * GROUP
    # a binary min-heap of (load, lane) over all the lanes
    heap_load = np.zeros(bins, np.int64)
    heap_bin = np.arange(bins)
    count = len(order)
    entry_group = np.empty(count, np.int64)
    entry_lane = np.empty(count, np.int64)
    entry_column = np.empty(count, np.int64)
    for e in range(count):
        load, lane_bin = heap_load[0], heap_bin[0]
        entry_group[e] = lane_bin // GROUP
        entry_lane[e] = lane_bin % GROUP
        entry_column[e] = load
        heap_load[0] = load + widths[order[e]]
        at = 0  # sift the root down
        while True:
            child = 2 * at + 1
            if child >= bins:
                break
            if child + 1 < bins and (heap_load[child + 1], heap_bin[child + 1]) < (
                    heap_load[child], heap_bin[child]):
                child += 1
            if (heap_load[at], heap_bin[at]) <= (heap_load[child], heap_bin[child]):
                break
            heap_load[at], heap_load[child] = heap_load[child], heap_load[at]
            heap_bin[at], heap_bin[child] = heap_bin[child], heap_bin[at]
            at = child
    group_columns = np.zeros(groups, np.int64)
    for k in range(bins):
        group = heap_bin[k] // GROUP
        group_columns[group] = max(group_columns[group], heap_load[k])
    return entry_group, entry_lane, entry_column, group_columns


@dataclass(frozen=True)
class LaneLayout:
    """Targets packed back to back into the lanes of groups of :data:`GROUP` lanes, for
    :func:`search_groups`: group ``g`` holds entries ``group_entries[g]`` to
    ``group_entries[g + 1]`` (each target ``entry_target[e]`` in lane ``entry_lane[e]``
    from column ``entry_column[e]``, a multiple of :data:`COLUMNS_A_PASS`; entries in
    column order) over ``group_columns[g]`` columns."""

    group_entries: np.ndarray
    entry_target: np.ndarray
    entry_lane: np.ndarray
    entry_column: np.ndarray
    group_columns: np.ndarray

    def __len__(self) -> int:
        return len(self.group_columns)

    def arrays(self) -> tuple:
        """The arrays in :func:`search_groups`' order."""
        return (self.group_entries, self.entry_target, self.entry_lane, self.entry_column,
                self.group_columns)


def lane_layout(lengths: np.ndarray, valid: np.ndarray, group_columns: int) -> LaneLayout:
    """The valid, non-empty targets packed back to back into the lanes of groups
    (:class:`LaneLayout`): as many groups as fill their lanes to
    ``max(group_columns, longest target)`` columns, every target (longest first) into
    the least loaded lane of any group, so lanes end nearly together whatever the lengths.
    More columns a group: fewer groups, so fewer passes of a query pay their start; fewer:
    a finer 16-bit rescue (which may rerun the half group of a saturated lane). Empty and
    null targets are left out (their scores stay 0)."""
    order = np.flatnonzero(valid & (lengths > 0))
    order = order[np.argsort(-lengths[order], kind="stable")]
    widths = (lengths + COLUMNS_A_PASS - 1) // COLUMNS_A_PASS * COLUMNS_A_PASS
    height = max(group_columns, int(widths.max(initial=0)))
    groups = -(-int(widths[order].sum()) // (height * GROUP)) if len(order) else 0
    entry_group, entry_lane, entry_column, columns = _pack(order, widths, groups)
    # entries by group, in column order within each (then by lane)
    sort = np.lexsort((entry_lane, entry_column, entry_group))
    group_entries = np.zeros(groups + 1, np.int64)
    np.cumsum(np.bincount(entry_group, minlength=groups), out=group_entries[1:])
    return LaneLayout(group_entries, order[sort], entry_lane[sort], entry_column[sort],
                      columns)


__all__ = ["CEILING", "GROUP", "HALF", "LaneLayout", "PAD", "PAD8", "fill_group_profiles",
           "fits", "hit_starts", "lane_layout", "local_best", "query_profile16",
           "search_ends", "search_groups", "striped_end", "striped_query"]
