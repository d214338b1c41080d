#!/usr/bin/env bash
# The gpualign command on the FASTA files shipped inside the package.
set -euo pipefail
data=$(python -c "import gpualign_df, pathlib; print(pathlib.Path(gpualign_df.__file__).parent / 'data' / 'examples')")
out=${1:-$(mktemp -d)}
mkdir -p "$out"
gpualign demo
gpualign align "$data/gasal2_query_500.fasta.gz" "$data/gasal2_target_500.fasta.gz" \
    --how rowwise --mode sw --match 1 --mismatch -4 --gap-open 7 --gap-extend 1 --out "$out/reads.sam"
gpualign align "$data/gasal2_query_500.fasta.gz" "$data/gasal2_target_500.fasta.gz" \
    --how rowwise --mode sg --free-ends target_start target_end --match 1 --mismatch -4 \
    --gap-open 7 --gap-extend 1 --out "$out/reads.paf"
gpualign align "$data/adept_proteins_200.fasta.gz" --how pairwise --matrix BLOSUM62 \
    --gap-open 11 --gap-extend 1 --out "$out/proteins.blast6"
head -n 3 "$out/reads.paf" "$out/proteins.blast6"
grep -v -m 2 "^@" "$out/reads.sam" | cut -f 1-9  # -m: grep stops itself (no SIGPIPE from head)
