"""gpualign_df.dot_plot: shared k-mers and the alignment path of a row, drawn to a file."""

from __future__ import annotations

import numpy as np
import pytest

import gpualign_df
from gpualign_df.dotplot import alignment_path, shared_kmers

from helpers import CIGAR_RUN, mutate, random_sequences, read_fasta, shared_file

pytest.importorskip("matplotlib")
DNA = dict(match=1, mismatch=-4, gap_open=7, gap_extend=1)


def test_path_runs_along_the_cigar():
    rng = np.random.default_rng(3)
    queries = random_sequences(rng, 20, "ACGT", 200, 20)
    targets = [mutate(rng, q, "ACGT", 0.05) for q in queries]
    for mode in ("sw", "nw", "sg"):
        frame = gpualign_df.align(queries, targets, mode=mode, backend="cpu", clip="soft",
                                  **DNA)
        for _, row in frame.iterrows():
            path = alignment_path(row["cigar"], row["query_start"], row["target_start"])
            assert path[0].tolist() == [row["query_start"], row["target_start"]]
            assert path[-1].tolist() == [row["query_end"], row["target_end"]]
            runs = [(int(n), op) for n, op in CIGAR_RUN.findall(row["cigar"]) if op != "S"]
            assert len(path) == len(runs) + 1
            for (count, op), (a, b) in zip(runs, zip(path[:-1], path[1:])):
                step = (b - a).tolist()
                assert step == {"I": [count, 0], "D": [0, count]}.get(op, [count, count])


def test_shared_kmers_are_shared_and_sampled():
    rng = np.random.default_rng(4)
    query = random_sequences(rng, 1, "ACGT", 300, 300)[0]
    target = mutate(rng, query, "ACGT", 0.05) + "acgtacgt" * 5
    k = 6
    dots = shared_kmers(query, target, k, max_points=10**6)
    expected = {(i, j) for i in range(len(query) - k + 1) for j in range(len(target) - k + 1)
                if query[i:i + k].upper() == target[j:j + k].upper()}
    assert set(map(tuple, dots.tolist())) == expected
    few = shared_kmers(query, target, k, max_points=50)
    assert len(few) == 50 and set(map(tuple, few.tolist())) <= expected
    assert shared_kmers("ACG", target, k, 10).shape == (0, 2)


def test_plot_files_are_written_whole(tmp_path):
    q, t = "ACGTTGCAACGTAGGCTAAC" * 5, "ACGTTGCAACGTAGCTAAC" * 5
    frame = gpualign_df.align([q], [t], mode="nw", backend="cpu", **DNA)
    for name, magic in (("pair.png", b"\x89PNG"), ("pair.svg", b"<?xml")):
        plot = gpualign_df.dot_plot(frame, [q], [t], tmp_path / name, k=8)
        assert (tmp_path / name).read_bytes()[:len(magic)] == magic
        assert plot.path[-1].tolist() == [len(q), len(t)] and len(plot.dots) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pair.png", "pair.svg"]
    scores = gpualign_df.align([q], [t], mode="nw", backend="cpu", traceback=False, **DNA)
    with pytest.raises(ValueError, match="traceback=True"):
        gpualign_df.dot_plot(scores, [q], [t], tmp_path / "x.png")
    nulls = gpualign_df.align([None], [t], mode="nw", backend="cpu", **DNA)
    with pytest.raises(ValueError, match="null"):
        gpualign_df.dot_plot(nulls, [None], [t], tmp_path / "x.png")


@pytest.mark.parametrize("length", [6000, pytest.param(None, marks=pytest.mark.slow)])
def test_plot_of_the_hg38_pair_follows_its_alignment(tmp_path, length):
    """The bundled 51 kbp hg38/CHM13 pair, aligned globally on the CPU (its first 6 kbp in
    the quick suite, whole in the slow one): the plot is written and its path is the row's
    CIGAR, along the diagonal of dots."""
    query, target = (s[:length] for s in
                     read_fasta(shared_file("hg38_chm13_51kbp_pair.fasta.gz")))
    frame = gpualign_df.align([query], [target], mode="nw", backend="cpu", **DNA)
    plot = gpualign_df.dot_plot(frame, [query], [target], tmp_path / "hg38.png")
    assert plot.path[-1].tolist() == [len(query), len(target)]
    assert (plot.path[1:] >= plot.path[:-1]).all()  # up and left only, read backwards
    on_path = np.abs((plot.dots[:, 0] - plot.dots[:, 1])
                     - np.median(plot.path[:, 0] - plot.path[:, 1])) < 50
    assert on_path.mean() > 0.5


def test_cli_plot_draws_the_first_row(tmp_path):
    from gpualign_df.cli import main

    fasta_q, fasta_t = tmp_path / "q.fa", tmp_path / "t.fa"
    q, t = "ACGTTGCAACGTAGGCTAAC" * 6, "ACGTTGCAACGTAGCTAAC" * 6
    fasta_q.write_text(f">long_q\n{q}\n")
    fasta_t.write_text(f">long_t\n{t}\n")
    flags = ["align", str(fasta_q), str(fasta_t), "--mode", "nw", "--match", "1",
             "--mismatch", "-4", "--gap-open", "7", "--gap-extend", "1", "--backend", "cpu",
             "--no-progress", "--out", str(tmp_path / "hits.tsv")]
    assert main([*flags, "--plot", str(tmp_path / "pair.svg")]) == 0
    assert (tmp_path / "pair.svg").read_bytes()[:5] == b"<?xml"
    assert main([*flags, "--plot", str(tmp_path / "pair.jpg")]) == 2
    assert main([*flags, "--no-traceback", "--plot", str(tmp_path / "p.png")]) == 2
    assert not (tmp_path / "p.png").exists()
