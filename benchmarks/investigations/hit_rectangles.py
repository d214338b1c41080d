"""How small the traceback of a local search's hits is: on the CPU protein search's classic
row (issue #26; the 20 classic queries x 1,539 Swiss-Prot proteins, BLOSUM62, gap 11/1, top
10), the cells of the kept pairs (what a whole-pair traceback fills), of their end
rectangles (rows and columns up to the end cell), of the rectangles that
:func:`gpualign_df.kernels.cpu_search.hit_start` bounds (what the engine fills), and of the
alignments' own rectangles; and a check that every bound holds its alignment (the frame's
start coordinates).

``python -m benchmarks.investigations.hit_rectangles``
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.harness import SEARCH_OPTIONS, add_data_dir, read_fasta


def main() -> int:
    parser = argparse.ArgumentParser()
    add_data_dir(parser)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd

    import gpualign_df  # noqa: F401  (the .aln accessor)
    from gpualign_df.kernels.cpu_search import hit_start
    from gpualign_df.scoring import make_scoring

    queries = pd.Series(read_fasta(args.data_dir / "cudasw4_20_queries.fasta"))
    database = pd.Series(read_fasta(args.data_dir / "swissprot_small_1539.fasta.gz"))
    frame = queries.aln.search(database, **dict(SEARCH_OPTIONS, backend="cpu", progress=False))
    scoring = make_scoring("BLOSUM62", gap_open=SEARCH_OPTIONS["gap_open"],
                           gap_extend=SEARCH_OPTIONS["gap_extend"])
    lut = np.full(256, 255, np.uint8)
    for code, letter in enumerate(scoring.alphabet):
        lut[ord(letter)] = code

    def encode(text):
        return lut[np.frombuffer(text.encode(), np.uint8)]

    totals = dict(kept=0, end=0, bounded=0, aligned=0)
    holds = 0
    for row in frame.itertuples():
        query, target = queries[row.query], database[row.target]
        first_i, first_j = hit_start(encode(query), encode(target), row.query_end - 1,
                                     row.target_end - 1, scoring.matrix, scoring.gap_open,
                                     scoring.gap_extend, row.score)
        holds += first_i <= row.query_start and first_j <= row.target_start
        totals["kept"] += len(query) * len(target)
        totals["end"] += row.query_end * row.target_end
        totals["bounded"] += (row.query_end - first_i) * (row.target_end - first_j)
        totals["aligned"] += (row.query_end - row.query_start) * (
            row.target_end - row.target_start)
    print(f"{len(frame)} kept pairs; bound holds the alignment on {holds}")
    for name, cells in totals.items():
        print(f"  {name}: {cells / 1e6:,.1f} M cells")
    return 0 if holds == len(frame) else 1


if __name__ == "__main__":
    sys.exit(main())
