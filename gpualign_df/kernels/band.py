"""Band CUDA kernel for long pairs: one pair across the whole GPU.

The matrix of a problem (a pair, or a block of a pair's rows for the linear-space
traceback) is cut into bands of ``32 * rows`` query rows; a warp computes one band,
sweeping the target. Lane ``L`` holds rows ``L * rows + r`` in registers, skewed: on step
``s`` its row ``r`` computes column ``s - L * rows - r + 1``, so the ``rows`` cells of a
step are independent of each other and depend only on the previous step. A lane's first
row gets the H and I above it from the lane before by a warp shuffle; lane 0 gets them from
the band above through one int64 word per column in global memory (:func:`pack`): H, the
vertical gap state as ``min(H - I, go - ge + 1)`` (enough to recompute every cell and
traceback bit exactly: a gap state more than ``go - ge`` below H is never extended), and a
15-bit tag naming the band that wrote it, which is the readiness check (no flags, no
fences: a 64-bit store is seen whole). Lane 0's words are read 32 columns ahead, one per
lane, bypassing L1 (``ld.global.cg`` in linked CUDA C that the optimizer cannot hoist out
of the wait; an atomic read without linked code; a plain read under the simulator). The
last lane writes the band's bottom row there for the band below, and into a checkpoint
row every ``checkpoint_every`` bands.

Warps are persistent one-warp blocks that take bands in order from an atomic counter, so
the band a warp waits for was taken earlier by a running warp: no deadlock whatever the
residency. A wait that outlasts ``SPIN_LIMIT`` polls sets the error word and every warp
leaves; a set stop flag (the host's Ctrl-C) makes warps take no further band.

Cells are the contract of :mod:`gpualign_df.kernels.cpu` (the same recurrences, tie-breaks
and traceback bits as :mod:`gpualign_df.kernels.strip`). Traceback (``rows`` = 8): lane
``L``'s word of step ``s`` holds its 8 rows' nibbles (row ``r`` at bits ``4 * (7 - r)``)
for columns ``s - 8L - r + 1``, stored at ``tb0 + strip * (n + 7) + s - 8L``, strip =
band * 32 + L; so the nibble of (i, j) is in word ``strip * (n + 7) + j - 1 + (i - 1) % 8``
(:func:`nibble_index`).

Each band leaves its end-cell candidate (score, row, column) per work item;
:func:`reduce_kernel` folds a problem's bands in row order into its end cell.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint32

from ..scoring import NEG_INF
from . import dpx, simulator
from .strip import SHARED_TABLE, STRIP_ROWS, WARP, append_sign, border_score, mode_shape

#: Fields of the ``problems`` table (one column per problem): lengths, residue starts,
#: the problem's first row in its pair (0, or a checkpoint row), offsets of its top row,
#: border row, traceback words, first work item and checkpoint rows, its job row and its
#: bands.
(F_M, F_N, F_Q0, F_T0, F_ROW0, F_TOP0, F_BORDER0, F_TB0, F_ITEM0, F_CKPT0, F_ROW,
 F_BANDS) = range(12)
FIELDS = 12
#: Polls of a border word before a wait counts as a hang (the error word is set).
SPIN_LIMIT = 1 << 26
#: Tags are 15 bits and never 0 (a cleared border word is never taken for a band's).
TAG_MODULUS = (1 << 15) - 1
#: ``go - ge`` must stay below this for the packed gap state (``gap_delta_fits``).
DELTA_LIMIT = (1 << 16) - 2


def gap_delta_fits(gap_open: int, gap_extend: int) -> bool:
    """Whether the border word's 16-bit gap field holds ``min(H - I, go - ge + 1)``."""
    return gap_open - gap_extend < DELTA_LIMIT


def tag_of(band: int) -> int:
    """The tag of the words band ``band`` writes (band ``band + 1`` waits for it)."""
    return band % TAG_MODULUS + 1


def band_rows(rows: int, lanes: int = WARP) -> int:
    """Query rows of one band (one warp of ``lanes`` lanes)."""
    return lanes * rows


@cuda.jit(device=True, inline=True)
def pack(h, i_value, cap, tag):
    """A border word: H (low 32 bits), ``min(H - I, cap + 1)`` (16 bits), the tag."""
    delta = min(int64(h) - int64(i_value), int64(cap + 1))
    return (int64(tag) << 48) | (delta << 32) | (int64(h) & 0xFFFFFFFF)


@cuda.jit(device=True, inline=True)
def unpack(word):
    """(H, I) of a border word."""
    h = int32(((word & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000)
    return h, int32(h - ((word >> 32) & 0xFFFF))


@cuda.jit(device=True, inline=True)
def word_tag(word):
    return (word >> 48) & 0x7FFF


def top_row(n: int, gap_open: int, gap_extend: int, free_row0: bool):
    """Border words of row 0 (H of the mode's top border, no gap state) as numpy int64."""
    import numpy as np

    j = np.arange(n + 1, dtype=np.int64)
    h = np.where((j == 0) | free_row0, 0, -(gap_open + (j - 1) * gap_extend))
    delta = gap_open - gap_extend + 1
    return (delta << 32) | (h & 0xFFFFFFFF)


def _plain_load(array, address, index):
    return array[index]


def _atomic_load(array, address, index):
    return cuda.atomic.add(array, index, 0)


@lru_cache(maxsize=None)
def _loader(linked: bool):
    """A read of a border word that bypasses L1 and is never hoisted out of a wait."""
    if simulator():
        return _plain_load
    if not linked:
        return cuda.jit(device=True, inline=True)(_atomic_load)
    load_cg = dpx.load_cg()

    def linked_load(array, address, index):
        return load_cg(address, index)

    return cuda.jit(device=True, inline=True)(linked_load)


def _exchange_simulated(h, i_value, word, source, lane, scratch):
    """The simulator's warp exchange (no shuffles there): through shared memory."""
    cuda.syncthreads()
    scratch[0, lane] = h
    scratch[1, lane] = i_value
    scratch[2, lane] = word
    cuda.syncthreads()
    if lane > 0:
        return int32(scratch[0, lane - 1]), int32(scratch[1, lane - 1]), scratch[2, source]
    return h, i_value, scratch[2, source]


def _broadcast_simulated(value, lane, scratch):
    cuda.syncthreads()
    if lane == 0:
        scratch[2, 0] = value
    cuda.syncthreads()
    return scratch[2, 0]


def _warp_functions(lanes: int):
    """(exchange, broadcast) for a band of ``lanes`` threads: the lane before's (H, I) and
    lane ``source``'s word; lane 0's value to every lane. Shuffles on a GPU, shared memory
    under the simulator (which has no shuffles)."""
    if simulator():
        return _exchange_simulated, _broadcast_simulated
    mask = (1 << lanes) - 1

    @cuda.jit(device=True, inline=True)
    def exchange(h, i_value, word, source, lane, scratch):
        return (cuda.shfl_up_sync(mask, h, 1), cuda.shfl_up_sync(mask, i_value, 1),
                cuda.shfl_sync(mask, word, source))

    @cuda.jit(device=True, inline=True)
    def broadcast(value, lane, scratch):
        return cuda.shfl_sync(mask, value, 0)

    return exchange, broadcast


@cuda.jit(device=True, inline=True)
def nibble_index(strip, columns, j, row):
    """Word index (from the problem's traceback start) of cell (strip row ``row``, j)."""
    return strip * (columns + STRIP_ROWS - 1) + j - 1 + row


@cuda.jit(device=True, inline=True)
def tag_of_device(band):
    return band % TAG_MODULUS + 1


@lru_cache(maxsize=None)
def band_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                use_dpx: bool, rows: int, lanes: int = WARP):
    """The band fill for one mode / free-ends / traceback combination, ``rows`` query rows
    a lane (8 with traceback: a lane's nibbles of a step fill one word). Launch with 32
    threads a block and any number of blocks (they take bands from ``work[0]``).
    ``lanes``: threads of a band, a power of two up to 32 (fewer only to test bands of
    few rows under the simulator)."""
    assert rows in (4, 8) and (rows == STRIP_ROWS or not traceback)
    local, corner, _free_row0, free_col0, end_row, end_column = mode_shape(mode, fqs, fqe, fts,
                                                                         fte)
    track = local or end_row
    add_max, max3, max3_zero = dpx.functions(use_dpx)
    append = dpx.append_sign() if use_dpx else append_sign
    load = _loader(use_dpx)
    exchange, broadcast = _warp_functions(lanes)
    neg = NEG_INF
    initial_best = 0 if local else neg
    fold = candidate_fold(corner)
    band_height = lanes * rows
    batch_mask = lanes - 1

    def make_step(checked):
        """One step of a lane (``checked``: rows may lie outside columns 1..n)."""

        @cuda.jit(device=True, inline=True)
        def step(s, lane, n, up_h, up_i, subs, go32, ge32, h_left, i_reg, d_reg, diag, best,
                 best_j):
            word = uint32(0)
            c = s - lane * rows + 1
            for r in range(rows):
                carry_h = h_left[r]
                carry_i = i_reg[r]
                if not checked or (c >= 1 and c <= n):
                    ins_ext = int32(up_i - ge32)
                    open_ins = int32(up_h - go32)
                    del_ext = int32(d_reg[r] - ge32)
                    open_del = int32(h_left[r] - go32)
                    match = int32(diag[r] + subs[r])
                    if use_dpx:
                        ins = add_max(up_h, -go32, ins_ext)
                        dele = add_max(h_left[r], -go32, del_ext)
                        h = max3_zero(match, ins, dele) if local else max3(match, ins, dele)
                    else:
                        ins = max(open_ins, ins_ext)
                        dele = max(open_del, del_ext)
                        h = max(max(match, ins), dele)
                        if local:
                            h = max(h, 0)
                    if traceback:
                        word = append(word, int32(open_del - del_ext))
                        word = append(word, int32(open_ins - ins_ext))
                        word = append(word, int32(max(match, ins) - dele))
                        word = append(word, int32(match - ins))
                    if track and h > best[r]:
                        best[r] = h
                        best_j[r] = c
                    diag[r] = up_h
                    h_left[r] = h
                    i_reg[r] = ins
                    d_reg[r] = dele
                elif traceback:  # a nibble of zeros keeps the other rows in place
                    word = append(append(append(append(word, 0), 0), 0), 0)
                up_h = carry_h
                up_i = carry_i
                c -= 1
            return word

        return step

    step_checked = make_step(True)
    step_plain = make_step(False)

    @cuda.jit
    def fill(query, target, problems, item_problem, total_items, sub, alphabet_size, go, ge,
             top, top_address, border, border_address, checkpoints, checkpoint_every, tb, band_score,
             band_i, band_j, control, work):
        shared_sub = cuda.shared.array(SHARED_TABLE, int32)
        scratch = cuda.shared.array((3, lanes), int64)
        cand_score = cuda.shared.array(lanes, int32)
        cand_i = cuda.shared.array(lanes, int32)
        cand_j = cuda.shared.array(lanes, int32)
        lane = cuda.threadIdx.x
        for k in range(lane, alphabet_size * alphabet_size, lanes):
            shared_sub[k] = sub[k]
        cuda.syncthreads()
        row_offset = cuda.local.array(rows, int32)
        h_left = cuda.local.array(rows, int32)
        i_reg = cuda.local.array(rows, int32)
        d_reg = cuda.local.array(rows, int32)
        diag = cuda.local.array(rows, int32)
        t_codes = cuda.local.array(rows, int32)
        subs = cuda.local.array(rows, int32)
        best = cuda.local.array(rows, int32)
        best_j = cuda.local.array(rows, int32)
        go32 = int32(go)
        ge32 = int32(ge)
        cap = int32(go - ge)
        while True:
            item = int64(0)
            if lane == 0:
                item = cuda.atomic.add(work, 0, 1)
                if cuda.atomic.add(control, 0, 0) != 0 or cuda.atomic.add(work, 1, 0) != 0:
                    item = total_items  # stopped (Ctrl-C) or a hang elsewhere: leave
            item = broadcast(item, lane, scratch)
            if item >= total_items:
                break
            p = item_problem[item]
            m = int32(problems[F_M, p])
            n = int32(problems[F_N, p])
            q0 = problems[F_Q0, p]
            t0 = problems[F_T0, p]
            row0 = int32(problems[F_ROW0, p])
            band = int32(item - problems[F_ITEM0, p])
            first = band * band_height + lane * rows + 1  # problem-relative first row
            for r in range(rows):
                i = first + r
                code = query[q0 + i - 1] if i <= m else 0
                row_offset[r] = int32(code) * alphabet_size
                h_left[r] = border_score(row0 + i, go, ge, free_col0)
                diag[r] = border_score(row0 + i - 1, go, ge, free_col0)
                i_reg[r] = neg
                d_reg[r] = neg
                t_codes[r] = 0
                best[r] = neg
                best_j[r] = 0
            # lane 0's words: column 32 * batch + 1 + lane in ``current`` (being used) and
            # ``ahead`` (the next batch, in flight)
            if band == 0:
                source = top
                address = top_address
                source0 = problems[F_TOP0, p]
                expected = -1
            else:
                source = border
                address = border_address
                source0 = problems[F_BORDER0, p]
                expected = tag_of_device(band - 1)
            border0 = problems[F_BORDER0, p]
            column = lane + 1
            ahead = load(source, address, source0 + column) if column <= n else int64(0)
            current = ahead
            writes_border = band_height * (band + 1) < m  # a band below reads it
            checkpoint = -1
            if checkpoint_every > 0 and writes_border and (band + 1) % checkpoint_every == 0:
                checkpoint = problems[F_CKPT0, p] + ((band + 1) // checkpoint_every - 1) * (n + 1)
            strip = band * lanes + lane
            tb_base = problems[F_TB0, p] + strip * (n + STRIP_ROWS - 1)
            writes_tb = traceback and first <= m
            my_tag = tag_of_device(band)
            steps = n + band_height - 1
            up_h = int32(0)
            up_i = int32(0)
            # the target residue of the lane's first row, one step ahead
            c_next = 1 - lane * rows
            code_next = int32(target[t0 + c_next - 1]) if c_next >= 1 and c_next <= n else 0
            for s in range(steps):
                if (s & batch_mask) == 0:  # a new batch of border words, one a lane
                    current = ahead
                    column = s + 1 + lane
                    if expected >= 0 and column <= n:
                        spins = 0
                        while word_tag(current) != expected:
                            current = load(source, address, source0 + column)
                            spins += 1
                            if spins >= SPIN_LIMIT or ((spins & 1023) == 0
                                                       and cuda.atomic.add(work, 1, 0) != 0):
                                work[1] = 1
                                current = int64(expected) << 48
                    if column + lanes <= n:
                        ahead = load(source, address, source0 + column + lanes)
                # first what does not wait for the previous step: each row's target residue
                # (row r sees what row r - 1 saw a step before) and substitution score, and
                # the next step's residue
                for r in range(rows - 1, 0, -1):
                    t_codes[r] = t_codes[r - 1]
                t_codes[0] = code_next
                for r in range(rows):
                    subs[r] = shared_sub[int32(row_offset[r] + t_codes[r])]
                c_next += 1
                code_next = int32(target[t0 + c_next - 1]) if c_next >= 1 and c_next <= n else 0
                bottom_h, bottom_i, word_in = exchange(h_left[rows - 1], i_reg[rows - 1], current,
                                                       s & batch_mask, lane, scratch)
                if lane == 0:
                    up_h, up_i = unpack(word_in)
                else:
                    up_h = bottom_h
                    up_i = bottom_i
                if s >= band_height - 1 and s < n:
                    word = step_plain(s, lane, n, up_h, up_i, subs, go32, ge32, h_left, i_reg,
                                      d_reg, diag, best, best_j)
                else:
                    word = step_checked(s, lane, n, up_h, up_i, subs, go32, ge32, h_left, i_reg,
                                        d_reg, diag, best, best_j)
                if writes_tb:
                    index = s - lane * rows
                    if index >= 0 and index <= n + STRIP_ROWS - 2:
                        tb[tb_base + index] = word
                if lane == lanes - 1 and writes_border:
                    c = s - band_height + 2
                    if c >= 1 and c <= n:
                        packed = pack(h_left[rows - 1], i_reg[rows - 1], cap, my_tag)
                        border[border0 + c] = packed
                        if checkpoint >= 0:
                            checkpoints[checkpoint + c] = packed
            # the band's end-cell candidate: rows ascending, strict > (corner: row m)
            value = initial_best
            value_i = 0
            value_j = 0
            for r in range(rows):
                i = first + r
                if i <= m:
                    if local or (end_row and i == m):
                        if best[r] > value:
                            value = best[r]
                            value_i = i
                            value_j = best_j[r]
                    elif end_column and h_left[r] > value:
                        value = h_left[r]
                        value_i = i
                        value_j = n
                    if corner and i == m:
                        value = h_left[r]
                        value_i = m
                        value_j = n
            cand_score[lane] = value
            cand_i[lane] = value_i
            cand_j[lane] = value_j
            cuda.syncthreads()
            if lane == 0:
                total = initial_best
                total_i = 0
                total_j = 0
                for k in range(lanes):
                    total, total_i, total_j = fold(total, total_i, total_j, cand_score[k],
                                                   cand_i[k], cand_j[k], m)
                band_score[item] = total
                band_i[item] = total_i
                band_j[item] = total_j
                done_rows = min(band_height, m - band * band_height)
                cuda.atomic.add(control, 1, int64(done_rows) * int64(n))
            cuda.syncthreads()

    return fill


@lru_cache(maxsize=None)
def candidate_fold(corner: bool):
    """``fold(total, i, j, value, value_i, value_j, m)``: the end cell so far with one more
    candidate, candidates coming in row order: a strictly better score replaces it (so
    ties keep the smaller row), and in the corner modes only row ``m`` counts."""

    @cuda.jit(device=True, inline=True)
    def fold(total, total_i, total_j, value, value_i, value_j, m):
        if (corner and value_i == m) or (not corner and value > total):
            return value, value_i, value_j
        return total, total_i, total_j

    return fold


@lru_cache(maxsize=None)
def reduce_kernel(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool):
    """One thread per problem: its bands' candidates folded in row order (strict >; the
    corner modes take row m) into ``score``, ``end_i``, ``end_j`` at its job row."""
    local, corner, *_ = mode_shape(mode, fqs, fqe, fts, fte)
    initial_best = 0 if local else NEG_INF
    fold = candidate_fold(corner)

    @cuda.jit
    def reduce(problems, band_score, band_i, band_j, score, end_i, end_j):
        p = cuda.grid(1)
        if p >= problems.shape[1]:
            return
        m = problems[F_M, p]
        first = problems[F_ITEM0, p]
        total = initial_best
        total_i = 0
        total_j = 0
        for item in range(first, first + problems[F_BANDS, p]):
            total, total_i, total_j = fold(total, total_i, total_j, band_score[item],
                                           band_i[item], band_j[item], m)
        row = problems[F_ROW, p]
        score[row] = total
        end_i[row] = total_i
        end_j[row] = total_j

    return reduce
