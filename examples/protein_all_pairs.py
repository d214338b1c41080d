"""All pairs of 200 metagenome proteins (BLOSUM62), joined back to a metadata table."""

from importlib import resources

import gpualign_df
from gpualign_df.io import read_sequences

path = resources.files("gpualign_df").joinpath("data", "examples", "adept_proteins_200.fasta.gz")
proteins = read_sequences(str(path))
proteins["length"] = proteins["seq"].str.len()
proteins["protein_id"] = "prot_" + proteins["name"]

pairs = proteins.seq.aln.pairwise(mode="sw", matrix="BLOSUM62", gap_open=11, gap_extend=1)
print(f"{len(pairs):,} local alignments of {len(proteins)} proteins")

metadata = proteins[["protein_id", "length"]]
joined = (pairs.merge(metadata.add_prefix("query_"), left_on="query", right_index=True)
               .merge(metadata.add_prefix("target_"), left_on="target", right_index=True))
best = joined.sort_values("score", ascending=False).head(5)
print(best[["query_protein_id", "target_protein_id", "query_length", "target_length", "score",
            "identity", "cigar"]].to_string(index=False))
