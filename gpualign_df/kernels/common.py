"""Plain-Python leaf functions compiled by both engines (``numba.njit`` for the CPU,
``cuda.jit(device=True)`` for the GPU), so that both run literally the same code."""


def digits(value):
    """Decimal digits of a positive integer (CIGAR run lengths): below 10,000 by three
    comparisons (a walk counts each run's digits: no division there), then a division a
    digit."""
    count = 1 + int(value >= 10) + int(value >= 100) + int(value >= 1000)
    while value >= 10000:
        value //= 10
        count += 1
    return count


def run_writer_of(digits):
    """``write_run(chars, pos, length, symbol)`` for an engine whose compiled
    :func:`digits` is ``digits``: a CIGAR run into ``chars`` from ``pos`` (``length``'s
    digits, then the byte ``symbol``), returning the position after it. A factory, since
    each engine compiles the function with its own ``digits``."""

    def write_run(chars, pos, length, symbol):
        width = digits(length)
        value = length
        for d in range(width - 1, -1, -1):
            chars[pos + d] = 48 + value % 10
            value //= 10
        chars[pos + width] = symbol
        return pos + width + 1

    return write_run


def empty_semiglobal(m, n, go, ge, fqs, fqe, fts, fte):
    """(score, end_i, end_j) of a semi-global alignment where one sequence is empty."""
    if m == 0 and n == 0:
        return 0, 0, 0
    if m == 0:
        if fte:
            return 0, 0, 0
        if fts:
            return 0, 0, n
        return -(go + (n - 1) * ge), 0, n
    if fqe:
        return 0, 0, 0
    if fqs:
        return 0, m, 0
    return -(go + (m - 1) * ge), m, 0
