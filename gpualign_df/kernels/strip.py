"""Device functions of one strip of query rows, shared by every CUDA fill and search
kernel (inter-task, packed 16-bit), so that their recurrences, tie-breaks and
end cells are literally the same code; and the layout constants those kernels share.

Same recurrences and tie-breaks as :mod:`gpualign_df.kernels.cpu` (the contract is written
there). A strip is ``STRIP_ROWS`` query rows (or twice as many) held in registers while
it sweeps the target; its traceback bits go into one ``uint32`` per ``STRIP_ROWS`` rows
and column (row ``r`` in bits ``4(7-r)..4(7-r)+3``, :func:`append_sign`). Functions are
built per mode, free ends and traceback (closure constants), so the cell loop carries no
run-time mode tests.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, int32, int64, uint32, uint64

from . import common, dpx, inlined, simulator
from ..scoring import MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, NEG_INF
from .dpx import pack_halves

#: Query rows of a strip whose traceback bits fill one uint32 (4 bits a cell): the walk
#: kernel and the plan's traceback sizes are written for it.
STRIP_ROWS = 8
#: Pairs (lanes) of a warp: residues and row-above values are interleaved by lane.
WARP = 32
#: Largest alphabet the shared-memory substitution table holds.
MAX_ALPHABET = 32
SHARED_TABLE = 1024  # MAX_ALPHABET ** 2, a literal for cuda.shared.array
#: Packed 16-bit kernels: the padding code's score (a row and a column of the table score
#: PAD16, so padded cells never beat a real one) and the shared table size for alphabets
#: of up to MAX_ALPHABET symbols plus the padding code.
PAD16 = -(1 << 14)
SHARED_TABLE16 = (MAX_ALPHABET + 1) ** 2


semiglobal_empty = cuda.jit(device=True, inline=True)(common.empty_semiglobal)


def _append_sign(word, difference):
    """``word`` shifted left by one with the sign bit of ``difference`` (a funnel shift: one
    instruction per traceback bit, no compare and select). The fill kernels append four
    bits per cell, so a cell's bits say, from the high one: D extends D (``D[i,j-1] - ge``
    beats ``H[i,j-1] - go`` strictly), I extends I, D is H's source (D beats max(diagonal,
    I) strictly), I beats the diagonal strictly; ties go to opening, the diagonal, then I,
    as in :mod:`gpualign_df.kernels.cpu`. Local mode needs no start bit: the walk stops
    where H is 0, tracking H back from the score. ``difference`` is an int32."""
    return (word << uint32(1)) | (uint32(difference) >> uint32(31))


def _append_sign_simulated(word, difference):
    """:func:`_append_sign` on the simulator's numpy scalars (no wrapping casts there)."""
    return uint32(((int(word) << 1) | ((int(difference) >> 31) & 1)) & 0xFFFFFFFF)


append_sign = (_append_sign_simulated if simulator()
               else cuda.jit(device=True, inline=True)(_append_sign))


def lane_words(rows: int) -> int:
    """Traceback words a lane of ``rows`` rows of the grouped pair kernel writes a step
    (:func:`gpualign_df.kernels.pairs16.pair_group_kernel`): one per ``STRIP_ROWS`` of its
    rows, the last partly filled where they do not divide.

    >>> [lane_words(rows) for rows in (8, 19, 24)]
    [1, 3, 3]
    """
    return -(-rows // STRIP_ROWS)


#: Consecutive steps of a lane's traceback word that the grouped pair kernel keeps in
#: one piece where it keeps pieces (:func:`gpualign_df.kernels.pairs16.traceback_piece`):
#: one 16-byte store a word and four steps, and a walk along a diagonal reads one piece
#: every four steps. The plan gives every grouped layout whole pieces of this many steps.
PIECE_STEPS = 4


def _plain_store_words(array, address, index, words, predicate):
    if predicate:
        for k in range(4):
            array[index + uint64(k)] = words[k]


def _simulated_store_words(array, address, index, words, predicate):
    """:func:`_plain_store_words` checking what the linked 16-byte store needs: an index
    that is a multiple of 4 (the simulator runs no linked code, so that a misaligned
    layout shows here and not only on a GPU)."""
    assert not predicate or int(index) % 4 == 0, f"16-byte store at word {int(index)}"
    _plain_store_words(array, address, index, words, predicate)


@lru_cache(maxsize=None)
def word_storer(linked: bool):
    """``store(array, address, index, words, predicate)``: four uint32 traceback words
    (a tuple) at a uint64 index (a multiple of 4) of ``array``, whose device address is
    ``address``, where the predicate holds: one predicated 16-byte store in linked CUDA C
    (never a branch, which would end the straight-line code of a group of steps), else
    four plain stores."""
    if simulator():
        return _simulated_store_words
    if not linked:
        return inlined(_plain_store_words)
    store4 = dpx.store4_if()

    def linked_store_words(array, address, index, words, predicate):
        store4(address, int64(index), words[0], words[1], words[2], words[3],
               int32(predicate))

    return inlined(linked_store_words)


def skewed_stride(columns: int):
    """uint32 words between two strips' rows in the band kernel's skewed traceback layout
    of ``columns`` columns (:mod:`gpualign_df.kernels.band`): ``columns + STRIP_ROWS - 1``
    rounded up to 4, so that four steps' words of a strip are one aligned 16-byte store."""
    return (columns + STRIP_ROWS + 2) // 4 * 4


#: :func:`skewed_stride` in a kernel.
skewed_stride_device = cuda.jit(device=True, inline=True)(skewed_stride)


@cuda.jit(device=True, inline=True)
def skewed_word_index(strip, columns, j, row):
    """Word (from the problem's traceback start) of cell (strip row ``row``, column ``j``)
    of strip ``strip`` in the skewed layout of ``columns`` columns."""
    return strip * skewed_stride_device(columns) + j - 1 + row


@cuda.jit(device=True, inline=True)
def border_score(index, go, ge, free):
    """H on row 0 / column 0 at distance ``index`` from the corner (``free``: 0 there)."""
    if index == 0 or free:
        return 0
    return -(go + (index - 1) * ge)


def mode_shape(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool):
    """What a mode and its free ends mean to a fill kernel: (local, corner: the end cell is
    (m, n), free_row0 / free_col0: row 0 / column 0 score 0, end_row / end_column: the end
    cell is the best of the last row / column)."""
    local = mode == MODE_LOCAL
    return (local, mode == MODE_GLOBAL or (mode == MODE_SEMIGLOBAL and not (fqe or fte)),
            local or (mode == MODE_SEMIGLOBAL and fts), local or (mode == MODE_SEMIGLOBAL and fqs),
            mode == MODE_SEMIGLOBAL and fte, mode == MODE_SEMIGLOBAL and fqe)


#: Keyed running best of a row: ``H * KEY_SCALE - j`` (highest H, then first column).
KEY_SCALE = 1 << 16
KEY_NEG = -(1 << 31) + 1


@lru_cache(maxsize=None)
def strip_functions(mode: int, fqs: bool, fqe: bool, fts: bool, fte: bool, traceback: bool,
                    use_dpx: bool = False, keyed: bool = False, rows: int = STRIP_ROWS,
                    track: bool = True, funnel: bool = True):
    """Device functions of one strip of ``rows`` query rows (``STRIP_ROWS`` or twice as
    many; 2 to 8 for the block kernel), shared by the inter-task kernels: start a strip,
    compute one column of it, collect its end-cell candidates, and the end cell of a pair
    with an empty sequence. A column's traceback bits fill one word per ``STRIP_ROWS``
    rows (a strip of fewer rows: the low ``4 * rows`` bits of one, row ``r`` at bits
    ``4 * (rows - 1 - r)``).
    ``track=False``: the column keeps no running best of its rows (for a strip whose rows
    cannot hold a semi-global end cell).

    ``keyed``: each row's running best is one int32 ``H * KEY_SCALE - j``, whose maximum is
    the highest H at its first column (one multiply-add and one max per cell, instead of a
    compare and two selects); exact where every H lies in (-2**15, 2**15) and columns stay
    below 2**16 (the caller checks: :func:`gpualign_df.gpu.policy.keyed_best_fits`).

    ``funnel`` (with ``use_dpx``): append traceback bits by a funnel shift in inline PTX
    (:func:`gpualign_df.kernels.dpx.append_sign`), which the optimizer keeps as one
    instruction per bit; from plain shifts it folds a cell's four appends into masks,
    shifts and ORs, more instructions per column. Identical bits either way."""
    local, corner, free_row0, free_col0, end_row, end_column = mode_shape(mode, fqs, fqe, fts,
                                                                          fte)
    track_rows = (local or end_row) and track
    assert 2 <= rows <= STRIP_ROWS or rows == 2 * STRIP_ROWS
    neg = NEG_INF
    add_max, max3, max3_zero = dpx.functions(use_dpx)
    keep_best = dpx.keep_best(use_dpx)
    append = dpx.append_sign() if use_dpx and funnel else append_sign

    @cuda.jit(device=True, inline=True)
    def empty_end(m, n, go, ge):
        """End cell and score of a pair with an empty sequence (as ``cpu.fill_matrix``)."""
        if local or (m == 0 and n == 0):
            return 0, 0, 0
        if corner:
            if m == 0:
                return border_score(n, go, ge, free_row0), m, n
            return border_score(m, go, ge, free_col0), m, n
        return semiglobal_empty(m, n, go, ge, fqs, fqe, fts, fte)

    @cuda.jit(device=True, inline=True)
    def start_strip(first, m, query, q0, width, alphabet_size, go, ge, row_offset, h_left,
                    del_score, diag, row_best, row_best_j):
        """Registers of the strip whose first row is ``first`` (1-based)."""
        for r in range(rows):
            i = first + r
            code = query[q0 + width * (i - 1)] if i <= m else 0
            row_offset[r] = int32(code) * alphabet_size
            h_left[r] = border_score(i, go, ge, free_col0)
            del_score[r] = neg
            diag[r] = border_score(i - 1, go, ge, free_col0)
            row_best[r] = KEY_NEG if keyed else neg
            row_best_j[r] = 0

    @cuda.jit(device=True, inline=True)
    def top_border(j, go, ge):
        """H on row 0 at column j."""
        return border_score(j, go, ge, free_row0)

    @cuda.jit(device=True, inline=True)
    def cell_bits(word, open_del, del_ext, open_ins, ins_ext, match, ins, dele):
        """``word`` with a cell's four traceback bits appended: D extends, I extends, D is
        H's source, I beats the diagonal."""
        word = append(word, int32(open_del - del_ext))
        word = append(word, int32(open_ins - ins_ext))
        word = append(word, int32(max(match, ins) - dele))
        return append(word, int32(match - ins))

    @cuda.jit(device=True, inline=True)
    def column(h_up, i_up, code_t, j, shared_sub, go, ge, row_offset, h_left, del_score, diag,
               row_best, row_best_j):
        """Cells (first..first+rows-1, j); returns the bottom row's H and I and the
        traceback words of rows 0-7 and 8-15 (:func:`append_sign`: row ``r``'s four bits at
        ``4 * (7 - r % 8)``; the second word is 0 for a strip of 8 rows)."""
        word = uint32(0)
        word2 = uint32(0)
        go32 = int32(go)   # int32 arithmetic throughout (numba widens to int64 otherwise)
        ge32 = int32(ge)
        for r in range(rows):
            ins_ext = int32(i_up - ge32)
            open_ins = int32(h_up - go32)
            del_ext = int32(del_score[r] - ge32)
            open_del = int32(h_left[r] - go32)
            match = int32(diag[r] + shared_sub[uint32(row_offset[r] + code_t)])
            if use_dpx:  # closure constant: one branch is compiled
                ins = add_max(h_up, -go32, ins_ext)
                dele = add_max(h_left[r], -go32, del_ext)
                h = max3_zero(match, ins, dele) if local else max3(match, ins, dele)
            else:  # plain max (also what the CUDA simulator runs, without call overhead)
                ins = max(open_ins, ins_ext)
                dele = max(open_del, del_ext)
                h = max(max(match, ins), dele)
                if local:
                    h = max(h, 0)
            if traceback and r < STRIP_ROWS:  # (r is a constant of the unrolled loop)
                word = cell_bits(word, open_del, del_ext, open_ins, ins_ext, match, ins, dele)
            elif traceback:
                word2 = cell_bits(word2, open_del, del_ext, open_ins, ins_ext, match, ins, dele)
            if track_rows and keyed:
                row_best[r] = max(row_best[r], int32(h * KEY_SCALE - j))
            elif track_rows and traceback and use_dpx:  # the row's best so far, first
                # column on ties (score-only kernels are faster with the plain form)
                packed = keep_best(row_best[r], h)
                row_best[r] = int32(packed >> 32)
                if packed & 1:
                    row_best_j[r] = j
            elif track_rows and h > row_best[r]:
                row_best[r] = h
                row_best_j[r] = j
            diag[r] = h_up
            h_left[r] = h
            del_score[r] = dele
            h_up = h
            i_up = ins
        return h_up, i_up, word, word2

    @cuda.jit(device=True, inline=True)
    def end_candidates(first, m, n, best, best_i, best_j, h_left, row_best, row_best_j):
        """Fold the strip's end-cell candidates into the best, rows ascending (strict >)."""
        for r in range(rows):
            i = first + r
            if i <= m:
                if local or (end_row and i == m):
                    row_value = row_best[r]
                    row_j = row_best_j[r]
                    if keyed:  # key = H * KEY_SCALE - j, 1 <= j < KEY_SCALE
                        row_j = (-row_value) & (KEY_SCALE - 1)
                        row_value = (row_value + row_j) >> 16
                    if row_value > best:
                        best = row_value
                        best_i = i
                        best_j = row_j
                elif end_column and h_left[r] > best:
                    best = h_left[r]
                    best_i = i
                    best_j = n
                if corner and i == m:
                    best = h_left[r]
                    best_i = m
                    best_j = n
        return best, best_i, best_j

    initial_best = 0 if local else neg
    return empty_end, start_strip, top_border, column, end_candidates, initial_best


@cuda.jit(device=True, inline=True)
def load_table(sub, alphabet_size, shared_sub):
    """The substitution table into shared memory, by the whole block."""
    for k in range(cuda.threadIdx.x, alphabet_size * alphabet_size, cuda.blockDim.x):
        shared_sub[k] = sub[k]
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def pack_pair(value):
    """``value`` in both 16-bit lanes of an int32."""
    return pack_halves(value, value)
