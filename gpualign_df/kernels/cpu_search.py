"""CPU score-only local alignment of queries against a database, 32 targets at a time in
the lanes of one vector (:mod:`gpualign_df.kernels.simd`), for a search's score pass.

Targets go to groups of :data:`LANES` (the caller sorts them by length, so a group's
padding is small); a group's score profile is built once, as ``[column][query code][lane]``
(the score of every query code against each lane's residue of that column; a column past a
lane's end scores :data:`PAD`), and every query then runs over the group's columns with
the target innermost in the lanes: a cell's substitution score is one vector load, no
gather. Cells are 16-bit and saturate: a lane whose best reaches
:data:`~gpualign_df.kernels.simd.CEILING` is reported as such, and the caller scores that
pair again exactly. Below it no cell saturated, so the scores equal the 32-bit engine's
(Smith-Waterman: H, E, F never fall below ``-gap_open``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .simd import CEILING, LANES, adds, lane, load, splat, store, subs, vmax

#: Target columns a pass of :func:`local_best` takes.
COLUMNS_A_PASS = 4
#: The substitution score of a column past a lane's target: low enough that such a cell's
#: diagonal is never its best, far enough from -32768 that sums do not clip.
PAD = -16384


@njit(cache=True, nogil=True)
def group_profile(matrix, codes, offsets, members, alphabet):
    """The score profile of one group of targets (``members``: target indices, -1 for an
    empty lane): int16 ``[column][code][lane]`` flattened, and its columns (the longest
    target's, rounded up to a whole pass of :func:`local_best`)."""
    columns = 0
    for k in range(LANES):
        if members[k] >= 0:
            columns = max(columns, offsets[members[k] + 1] - offsets[members[k]])
    columns = (columns + COLUMNS_A_PASS - 1) // COLUMNS_A_PASS * COLUMNS_A_PASS
    profile = np.full(columns * alphabet * LANES, PAD, dtype=np.int16)
    for k in range(LANES):
        target = members[k]
        if target < 0:
            continue
        start = offsets[target]
        for j in range(offsets[target + 1] - start):
            code = codes[start + j]
            base = j * alphabet * LANES + k
            for a in range(alphabet):
                profile[base + a * LANES] = matrix[a, code]
    return profile, columns


@njit(cache=True, nogil=True)
def local_best(query, profile, columns, alphabet, gap_open, gap_extend, h_row, e_row):
    """The best local score of ``query`` (codes) against each lane's target, as a vector
    (saturated lanes hold ``CEILING``). Four columns a pass down the query: the row's H and
    E go through memory once per :data:`COLUMNS_A_PASS` columns, and the four columns'
    cells of a row are four chains the processor overlaps. ``columns``: a multiple of
    four (the profile's padding columns score :data:`PAD`). ``h_row``/``e_row``: int16
    scratch of at least ``len(query) * LANES``."""
    m = len(query)
    zero = splat(0)
    low = splat(-32768)
    go = splat(gap_open)
    ge = splat(gap_extend)
    for i in range(m):
        store(h_row, i * LANES, zero)
        store(e_row, i * LANES, low)
    best = zero
    stride = alphabet * LANES
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
            at = i * LANES
            code = query[i] * LANES
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
                  groups, matrix, gap_open, gap_extend, scores, control, slot):
    """Scores of queries ``query_rows`` (into ``scores``' rows, in that order) against the
    targets of ``groups`` (rows of :data:`LANES` target indices, -1 for an empty lane) into
    ``scores[row, target]``; ``CEILING`` where a lane saturated. Stops once
    ``control[0]`` is set; adds the cells done to ``control[1 + slot]``."""
    alphabet = matrix.shape[0]
    longest = 1
    for r in range(len(query_rows)):
        q = query_rows[r]
        longest = max(longest, query_offsets[q + 1] - query_offsets[q])
    h_row = np.empty(longest * LANES, dtype=np.int16)
    e_row = np.empty(longest * LANES, dtype=np.int16)
    for g in range(groups.shape[0]):
        members = groups[g]
        profile, columns = group_profile(matrix, target_codes, target_offsets, members,
                                         alphabet)
        residues = 0
        for k in range(LANES):
            if members[k] >= 0:
                residues += target_offsets[members[k] + 1] - target_offsets[members[k]]
        for r in range(len(query_rows)):
            if control[0] != 0:
                return
            q = query_rows[r]
            query = query_codes[query_offsets[q]:query_offsets[q + 1]]
            best = local_best(query, profile, columns, alphabet, gap_open, gap_extend, h_row,
                              e_row)
            for k in range(LANES):
                if members[k] >= 0:
                    scores[r, members[k]] = lane(best, k)
            control[1 + slot] += len(query) * residues


def fits(matrix: np.ndarray, gap_open: int, gap_extend: int) -> bool:
    """Whether the 16-bit pass can score with these costs: substitution scores and gap
    costs well inside 16 bits (a saturated lane is then the only way to lose exactness)."""
    return bool(np.abs(matrix).max(initial=0) < 1 << 12 and 0 <= gap_open < 1 << 12
                and 0 <= gap_extend < 1 << 12)


def target_groups(lengths: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Groups of :data:`LANES` valid targets, longest first (-1: an empty lane), as an int64
    array of shape (groups, LANES)."""
    order = np.flatnonzero(valid)
    order = order[np.argsort(-lengths[order], kind="stable")]
    groups = np.full(((len(order) + LANES - 1) // LANES, LANES), -1, dtype=np.int64)
    groups.ravel()[:len(order)] = order
    return groups


__all__ = ["CEILING", "LANES", "PAD", "fits", "group_profile", "local_best", "search_groups",
           "target_groups"]
