"""An independent reference for GATK HaplotypeCaller's Smith-Waterman (issue #23), written for
the tests from the recurrences, tie-breaking and CIGAR rules that GATK's
``SmithWatermanJavaAligner`` documents (broadinstitute/gatk), not from its code: plain
Python, one pair at a time, for checking an engine's GATK mode on small pairs.

Conventions of that aligner, which differ from this package's defaults:

* The reference is the rows and the alternate the columns; scores are given as GATK gives
  them (``match`` positive, ``mismatch``, ``gap_open``, ``gap_extend`` negative); a gap of
  length k costs ``gap_open + (k - 1) * gap_extend``.
* No zero floor (cells go negative, down to -1e8); row 0 and column 0 are 0, or gap costs
  for the ``indel`` and ``leading_indel`` overhang strategies.
* Within a cell the diagonal wins ties, then the alternate-only gap (I), then the
  reference-only gap (D); between opening a gap and extending the best open one, the
  extension wins a tie (the longer gap).
* The traceback jumps a whole gap at once and bytes are compared raw (N matches N).
* End cell: ``indel`` the corner; otherwise the best of the last column (the largest
  reference end on ties), then for ``softclip``/``ignore`` a bottom-row cell that scores
  more, or the same closer to the diagonal.
* ``softclip`` and ``ignore`` first look for the alternate as an exact substring of the
  reference (its last occurrence): ``<len>M`` at that offset, no matrix.
"""

from __future__ import annotations

SOFTCLIP, INDEL, LEADING_INDEL, IGNORE = "softclip", "indel", "leading_indel", "ignore"
#: GATK's parameter sets (match, mismatch, gap open, gap extend) by the names issue #23 asks
#: for: NEW_SW_PARAMETERS, ALIGNMENT_TO_BEST_HAPLOTYPE_SW_PARAMETERS, STANDARD_NGS,
#: ORIGINAL_DEFAULT.
PRESETS = {
    "gatk-haplotype-to-reference": (200, -150, -260, -11),
    "gatk-read-to-haplotype": (10, -15, -30, -5),
    "gatk-standard-ngs": (25, -50, -110, -6),
    "gatk-original": (3, -1, -4, -3),
}
_CUTOFF = -100_000_000           # cells never drop below this
_LOW = -(1 << 31) // 2           # an open gap's initial "best" (Integer.MIN_VALUE / 2)


def gatk_align(reference: str, alternate: str, match: int, mismatch: int, gap_open: int,
               gap_extend: int, overhang: str) -> tuple[str, int]:
    """(CIGAR, alignment offset) of ``alternate`` against ``reference`` as GATK's Java
    aligner reports them (see the module docstring for the rules)."""
    if not reference or not alternate:
        raise ValueError("GATK aligns non-empty sequences only")
    ref, alt = reference.encode(), alternate.encode()
    if overhang in (SOFTCLIP, IGNORE):
        found = ref.rfind(alt)
        if found != -1:
            return f"{len(alt)}M", found
    rows, columns = len(ref) + 1, len(alt) + 1
    score = [[0] * columns for _ in range(rows)]
    back = [[0] * columns for _ in range(rows)]   # 0 diagonal, -k: I of k, +k: D of k
    if overhang in (INDEL, LEADING_INDEL):
        for j in range(1, columns):
            score[0][j] = gap_open + (j - 1) * gap_extend
        for i in range(1, rows):
            score[i][0] = gap_open + (i - 1) * gap_extend
    down_best, down_size = [_LOW] * columns, [0] * columns   # per column: gaps along ref
    for i in range(1, rows):
        right_best, right_size = _LOW, 0                     # this row: gaps along alt
        for j in range(1, columns):
            diagonal = score[i - 1][j - 1] + (match if ref[i - 1] == alt[j - 1] else mismatch)
            opened = score[i - 1][j] + gap_open
            down_best[j] += gap_extend
            if opened > down_best[j]:
                down_best[j], down_size[j] = opened, 1
            else:
                down_size[j] += 1
            opened = score[i][j - 1] + gap_open
            right_best += gap_extend
            if opened > right_best:
                right_best, right_size = opened, 1
            else:
                right_size += 1
            if diagonal >= down_best[j] and diagonal >= right_best:
                score[i][j], back[i][j] = max(_CUTOFF, diagonal), 0
            elif right_best >= down_best[j]:
                score[i][j], back[i][j] = max(_CUTOFF, right_best), -right_size
            else:
                score[i][j], back[i][j] = max(_CUTOFF, down_best[j]), down_size[j]
    return _cigar(score, back, overhang)


def _cigar(score, back, overhang: str) -> tuple[str, int]:
    ref_length, alt_length = len(score) - 1, len(score[0]) - 1
    p1 = p2 = 0
    segment = 0
    if overhang == INDEL:
        p1, p2 = ref_length, alt_length
    else:
        p2, best = alt_length, None
        for i in range(1, ref_length + 1):          # last column, largest row on ties
            if best is None or score[i][alt_length] >= best:
                p1, best = i, score[i][alt_length]
        if overhang != LEADING_INDEL:
            for j in range(1, alt_length + 1):      # bottom row: more, or closer to diagonal
                value = score[ref_length][j]
                if value > best or (value == best
                                    and abs(ref_length - j) < abs(p1 - p2)):
                    p1, p2, best = ref_length, j, value
                    segment = alt_length - j
    elements: list[tuple[str, int]] = []
    if segment > 0 and overhang == SOFTCLIP:
        elements.append(("S", segment))
        segment = 0
    state = "M"
    while True:
        step = back[p1][p2]
        new, length = ("D", step) if step > 0 else ("I", -step) if step < 0 else ("M", 1)
        if new == "M":
            p1, p2 = p1 - 1, p2 - 1
        elif new == "I":
            p2 -= length
        else:
            p1 -= length
        if new == state:
            segment += length
        else:
            elements.append((state, segment))
            segment, state = length, new
        if not (p1 > 0 and p2 > 0):
            break
    if overhang == SOFTCLIP:
        elements.append((state, segment))
        if p2 > 0:
            elements.append(("S", p2))
        offset = p1
    elif overhang == IGNORE:
        elements.append((state, segment + p2))
        offset = p1 - p2
    else:
        elements.append((state, segment))
        if p1 > 0:
            elements.append(("D", p1))
        elif p2 > 0:
            elements.append(("I", p2))
        offset = 0
    merged: list[list] = []
    for op, length in reversed(elements):       # merge neighbours, drop empty elements
        if length == 0:
            continue
        if merged and merged[-1][0] == op:
            merged[-1][1] += length
        else:
            merged.append([op, length])
    return "".join(f"{length}{op}" for op, length in merged), offset
