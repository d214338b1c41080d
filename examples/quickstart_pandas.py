"""Quick start: align reads against their mates and search a small database with pandas."""

import pandas as pd

import gpualign_df  # registers the .aln accessor

reads = pd.DataFrame({"read_id": ["r1", "r2", "r3"],
                      "seq": ["ACGTTGCAAC", "ACGTAGCAAC", "TTGCAACG"],
                      "mate": ["ACGTTGCTAC", "ACGAGCAAC", None]})

rows = reads.seq.aln.rowwise(reads.mate, mode="sg", match=2, mismatch=-3, gap_open=5,
                             gap_extend=2)
print("row against row (semi-global):")
print(rows[["query", "score", "query_start", "query_end", "target_start", "target_end", "cigar"]])

database = pd.Series(["ACGTTGCAACGT", "TTTTTTTT", "GCAACG"], index=["db1", "db2", "db3"])
hits = reads.seq.aln.search(database, top_k=2, mode="sw", match=1, mismatch=-4, gap_open=7,
                            gap_extend=1)
print("\nbest 2 database hits per read, joined to the read ids:")
print(hits.merge(reads[["read_id"]], left_on="query", right_index=True)[
    ["read_id", "target", "score", "cigar", "identity"]])

print("\nthe first hit of r2, aligned:")
print(gpualign_df.view(hits, reads.seq, database, rows=hits.index[hits["query"] == 1][:1],
                       match=1, mismatch=-4, gap_open=7, gap_extend=1))
