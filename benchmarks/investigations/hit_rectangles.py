"""How small the traceback of a local search's hits could be: the region a bounded traceback
would need, on the CPU protein search's classic row (issue #26), against the whole matrices
the pair engine fills today.

For each kept pair (the 20 classic queries x 1,539 Swiss-Prot proteins, BLOSUM62, gap 11/1,
top 10) with score S and last aligned cell e, a score-only pass backwards from e, anchored
there (e aligned), gives R(c), the best score of an alignment from cell c to e. The hit's
alignment (the one the full traceback returns) starts at a cell with R = S, and every cell
of it has R >= 0 (each of its prefixes scores above zero, S is the matrix's maximum): so a
backward pass that drops every value below zero still reaches its start, and the rows and
columns of the cells where it reaches S bound a rectangle that holds the alignment. Inside
such a rectangle a local fill with zero borders gives the path's cells their full-matrix
values and every other candidate at most its full-matrix value, so the same tie-breaking
picks the same end cell and the same path.

Reports: the cells of the kept pairs, of their end rectangles (rows and columns up to the
end cell, what a traceback bounded by the end alone fills), of the rectangles the backward
pass bounds, of the alignments' own rectangles, and the cells the backward pass keeps alive
(its cost when it skips dead cells); and checks that every bound holds its alignment.

``python -m benchmarks.investigations.hit_rectangles``
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.harness import SEARCH_OPTIONS, add_data_dir, read_fasta

DEAD = -(1 << 30)


def main() -> int:
    parser = argparse.ArgumentParser()
    add_data_dir(parser)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd
    from numba import njit

    import gpualign_df  # noqa: F401  (the .aln accessor)
    from gpualign_df.scoring import make_scoring

    @njit(cache=False)
    def backward(query, target, last_i, last_j, sub, go, ge, score):
        """(first row, first column, alive cells) of the backward pass from the aligned cell
        (last_i, last_j): rows and columns of the cells where it reaches ``score``."""
        width = last_j + 1
        h_row = np.full(width + 1, DEAD, np.int64)   # H of the row below (reversed: above)
        f_row = np.full(width + 1, DEAD, np.int64)
        first_i, first_j, alive = last_i, last_j, 0
        for i in range(last_i, -1, -1):
            h_new = np.full(width + 1, DEAD, np.int64)
            f_new = np.full(width + 1, DEAD, np.int64)
            e = DEAD
            any_alive = False
            # column index k = last_j - j + 1 (k = 0: the border beyond the end)
            for j in range(last_j, -1, -1):
                k = last_j - j + 1
                if i == last_i and j == last_j:
                    diagonal = 0
                else:
                    diagonal = h_row[k - 1]
                h = DEAD if diagonal == DEAD else diagonal + sub[query[i], target[j]]
                left = h_new[k - 1]
                e = max(e - ge if e != DEAD else DEAD, left - go if left != DEAD else DEAD)
                up_h, up_f = h_row[k], f_row[k]
                f = max(up_f - ge if up_f != DEAD else DEAD, up_h - go if up_h != DEAD else DEAD)
                e = e if e >= 0 else DEAD
                f = f if f >= 0 else DEAD
                h = max(h, e, f)
                h = h if h >= 0 else DEAD
                h_new[k] = h
                f_new[k] = f
                if h != DEAD or e != DEAD or f != DEAD:
                    alive += 1
                    any_alive = True
                if h == score:
                    first_i = min(first_i, i)
                    first_j = min(first_j, j)
            h_row, f_row = h_new, f_new
            if not any_alive:
                break
        return first_i, first_j, alive

    queries = pd.Series(read_fasta(args.data_dir / "cudasw4_20_queries.fasta"))
    database = pd.Series(read_fasta(args.data_dir / "swissprot_small_1539.fasta.gz"))
    frame = queries.aln.search(database, **dict(SEARCH_OPTIONS, backend="cpu", progress=False))
    scoring = make_scoring("BLOSUM62", gap_open=SEARCH_OPTIONS["gap_open"],
                           gap_extend=SEARCH_OPTIONS["gap_extend"])
    lut = np.full(256, 255, np.uint8)
    for code, letter in enumerate(scoring.alphabet):
        lut[ord(letter)] = code
    sub = scoring.matrix.astype(np.int64)

    def encode(text):
        return lut[np.frombuffer(text.encode(), np.uint8)]

    totals = dict(kept=0, end=0, bounded=0, aligned=0, alive=0)
    holds = 0
    for row in frame.itertuples():
        query, target = queries[row.query], database[row.target]
        first_i, first_j, alive = backward(encode(query), encode(target), row.query_end - 1,
                                           row.target_end - 1, sub, scoring.gap_open,
                                           scoring.gap_extend, row.score)
        holds += first_i <= row.query_start and first_j <= row.target_start
        totals["kept"] += len(query) * len(target)
        totals["end"] += row.query_end * row.target_end
        totals["bounded"] += (row.query_end - first_i) * (row.target_end - first_j)
        totals["aligned"] += (row.query_end - row.query_start) * (
            row.target_end - row.target_start)
        totals["alive"] += alive
    print(f"{len(frame)} kept pairs; bound holds the alignment on {holds}")
    for name, cells in totals.items():
        print(f"  {name}: {cells / 1e6:,.1f} M cells")
    return 0 if holds == len(frame) else 1


if __name__ == "__main__":
    sys.exit(main())
