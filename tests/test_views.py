"""gpualign_df.view: the pairwise block layout of result rows, as text and as HTML."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import make_scoring

from helpers import random_sequences

DNA = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2)
PROTEIN = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1)


def aligned(queries, targets, **options):
    scoring = {key: options[key] for key in ("match", "mismatch", "matrix", "gap_open",
                                            "gap_extend") if key in options}
    frame = gpualign_df.align(queries, targets, backend="cpu", **options)
    return frame, gpualign_df.view(frame, queries, targets, **scoring)


def blocks_of(text: str) -> list[list[str]]:
    """The three-line blocks of a one-row view's text."""
    body = [line for line in text.splitlines() if not line.startswith("#")]
    return [body[k + 1:k + 4] for k in range(0, len(body) - 3, 4)]


def test_local_row_in_labels_and_one_based_positions():
    queries = pd.Series({"read1": "TTTACGTACGTTAGGG"})
    targets = pd.Series({"ref": "CCACGTCGTTACC"})
    frame, view = aligned(queries, targets, mode="sw", **DNA)
    assert frame["cigar"].tolist() == ["4=1I5="]
    assert blocks_of(str(view)) == [["read1  4 ACGTACGTTA 13",
                                     "         |||| |||||",
                                     "ref    3 ACGT-CGTTA 11"]]
    assert "# score: 13" in str(view) and "# identity: 0.9" in str(view)


def test_semiglobal_free_ends_show_in_the_coordinates():
    frame, view = aligned(["GGACGTACGT"], ["ACGTTACGTCC"], mode="sg",
                          free_ends=("query_start", "target_end"), **DNA)
    assert frame["cigar"].tolist() == ["3=1D5="]
    assert blocks_of(str(view)) == [["0  3 ACG-TACGT 10",
                                     "     ||| |||||",
                                     "0  1 ACGTTACGT 9"]]


def test_protein_match_line_marks_positive_and_zero_scores():
    # I/V scores 3 in BLOSUM62 (':'), H/E 0 ('.'), G/P -2 (' ')
    frame, view = aligned(["HEAGAWIHEE"], ["PAWVEAE"], mode="nw", **PROTEIN)
    top, middle, bottom = blocks_of(str(view))[0]
    columns = list(zip(top.split()[2], middle[5:], bottom.split()[2]))
    assert ("I", ":", "V") in columns and ("A", "|", "A") in columns
    scoring = make_scoring("BLOSUM62")
    for a, mark, b in columns:
        if "-" in (a, b):
            assert mark == " "
            continue
        score = int(scoring.matrix[scoring.lut[ord(a)], scoring.lut[ord(b)]])
        expected = "|" if a == b else ":" if score > 0 else "." if score == 0 else " "
        assert mark == expected, (a, b)


def test_soft_clips_are_outside_the_blocks_and_blocks_carry_on_positions():
    frame, view = aligned(["ACGTTTTACG"], ["TTTT"], mode="sw", clip="soft", **DNA)
    assert frame["cigar"].tolist() == ["3S4=3S"]
    text = str(gpualign_df.view(frame, ["ACGTTTTACG"], ["TTTT"], width=3, **DNA))
    assert blocks_of(text) == [["0 4 TTT 6", "    |||", "0 1 TTT 3"],
                               ["0 7 T 7", "    |", "0 4 T 4"]]


def test_null_and_empty_rows_say_so():
    queries = pd.Series({"a": None, "b": "ACGT"})
    targets = pd.Series({"x": "ACGT", "y": ""})
    frame, view = aligned(queries, targets, mode="sw", **DNA)
    text = str(view)
    assert "# query: a\n# target: x\n(null row: a null sequence, nothing aligned)" in text
    assert "(empty alignment: no residue aligned)" in text
    global_frame, global_view = aligned(queries, targets, mode="nw", **DNA)
    assert blocks_of(str(gpualign_df.view(global_frame, queries, targets, rows=[1], **DNA))) \
        == [["b 1 ACGT 4", "        ", "y 0 ---- 0"]]


@pytest.mark.parametrize("mode,free_ends,options", [
    ("sw", None, DNA), ("nw", None, DNA), ("sg", ("query_start", "query_end"), DNA),
    ("nw", None, PROTEIN), ("sw", None, PROTEIN)])
@pytest.mark.parametrize("cigar_style", ["=", "M"])
def test_random_rows_rescore_and_give_back_the_aligned_slices(mode, free_ends, options,
                                                              cigar_style):
    """The view's two lines re-score (substitutions, affine gaps) to the row's score, and
    without gaps they are the aligned slices of the inputs; blocks keep the positions."""
    rng = np.random.default_rng(7)
    alphabet = "ACGT" if "match" in options else "ARNDCQEGHILKMFPSTWYV"
    queries = random_sequences(rng, 12, alphabet, 150)
    targets = [q[5:] if k % 2 else random_sequences(rng, 1, alphabet, 150)[0]
               for k, q in enumerate(queries)]
    frame = gpualign_df.align(queries, targets, mode=mode, free_ends=free_ends,
                              backend="cpu", cigar_style=cigar_style, **options)
    view = gpualign_df.view(frame, queries, targets, width=37, **options)
    scoring = make_scoring(options.get("matrix"), match=options.get("match"),
                           mismatch=options.get("mismatch"), gap_open=options["gap_open"],
                           gap_extend=options["gap_extend"])
    for row, (_, record) in zip(view.rows, frame.iterrows()):
        top, bottom = row.query_line, row.target_line
        assert len(top) == len(bottom) == len(row.match_line)
        assert top.replace("-", "") == queries[record["query"]][
            record["query_start"]:record["query_end"]]
        assert bottom.replace("-", "") == targets[record["target"]][
            record["target_start"]:record["target_end"]]
        score = 0
        for line in (top, bottom):
            for run in re.findall(r"-+", line):
                score -= scoring.gap_open + (len(run) - 1) * scoring.gap_extend
        for a, b in zip(top, bottom):
            if "-" not in (a, b):
                score += int(scoring.matrix[scoring.lut[ord(a)], scoring.lut[ord(b)]])
        assert score == record["score"]
        # the blocks' margins count the residues of each line
        lines = gpualign_df.view(frame, queries, targets, rows=[_], width=37, **options)
        position = record["query_start"]
        for first, *_rest in [block for block in blocks_of(str(lines))]:
            parts = first.split()
            residues = len(parts[2]) - parts[2].count("-")
            if residues:
                assert int(parts[1]) == position + 1
                assert int(parts[3]) == position + residues
            position += residues
        assert position == record["query_end"]


def test_html_holds_every_residue_once_and_colours_mismatches_and_gaps():
    queries = pd.Series({"q": "ACGTACGTTAACCGGT<&"[:-2]})
    targets = pd.Series({"t": "ACGTCGTAAACCGGT"})
    frame, view = aligned(queries, targets, mode="nw", **DNA)
    page = view._repr_html_()
    assert page.count("<div") == page.count("</div>") == 1
    assert 'color: #2471a3">-</span>' in page and 'color: #c0392b">' in page
    text = html.unescape(re.sub(r"<[^>]+>", "", page.replace("<br>", "\n")))
    top, _, bottom = [line for line in text.splitlines() if line.strip()][-3:]
    assert top.split()[2].replace("-", "") == queries["q"]
    assert bottom.split()[2].replace("-", "") == targets["t"]


def test_rows_and_bad_arguments():
    queries, targets = ["ACGTACGT", "TTGGCCAA"], ["ACGAACGT", "TTGGCAA"]
    frame, _ = aligned(queries, targets, mode="nw", **DNA)
    assert len(gpualign_df.view(frame, queries, targets, rows=1, **DNA)) == 1
    assert gpualign_df.view(frame, queries, targets, rows=1, **DNA).rows[0].query_label == 1
    with pytest.raises(ValueError, match="width"):
        gpualign_df.view(frame, queries, targets, width=0, **DNA)
    scores = gpualign_df.align(queries, targets, mode="nw", backend="cpu", traceback=False,
                               **DNA)
    with pytest.raises(ValueError, match="traceback=True"):
        gpualign_df.view(scores, queries, targets, **DNA)
    with pytest.raises(KeyError, match="positions"):
        gpualign_df.view(frame, queries[:1], targets, **DNA)


def test_pairwise_file_equals_the_api_view_in_blocks_of_rows(tmp_path, settings):
    """The pairwise writer gives the text of one view of all its rows under the record
    names, whatever the block of rows it writes at a time; a null row says so."""
    from gpualign_df.io import write_results

    queries = pd.DataFrame({"name": ["r1", "r2", "r3"],
                            "seq": ["ACGTTGCAAC", None, "TTGCAACGGA"]})
    targets = pd.DataFrame({"name": ["db1", "db2"], "seq": ["ACGTTGCAACGT", "GCAACG"]})
    frame = gpualign_df.align(queries.seq, targets.seq, how="search", top_k=2, mode="sw",
                              backend="cpu", **DNA)
    settings(write_chunk_rows=2)
    path = tmp_path / "hits.txt"
    write_results(frame, path, queries=queries, targets=targets,
                  scoring=make_scoring(**DNA))
    written = path.read_text()
    named = gpualign_df.view(frame.assign(query=frame["query"].map(queries.name),
                                          target=frame["target"].map(targets.name)),
                             queries.set_index("name").seq, targets.set_index("name").seq,
                             **DNA)
    assert written == str(named)
    assert written.count("# query: ") == len(frame) == 6  # the null query keeps 2 rows
    assert "# query: r2\n# target: db1\n(null row" in written
    with pytest.raises(ValueError, match="scoring"):
        write_results(frame, tmp_path / "no.txt", queries=queries, targets=targets)


def test_cli_pairwise_output_equals_the_api_view(tmp_path):
    from gpualign_df.cli import main
    from gpualign_df.io import read_sequences

    fasta_q, fasta_t = tmp_path / "q.fa", tmp_path / "t.fa"
    fasta_q.write_text(">read_a\nACGTTGCAACGGATTACA\n>read_b\nTTGCAACGGA\n")
    fasta_t.write_text(">ref_1\nGGACGTTGCAACGTATTACAGG\n>ref_2\nCCTTGCAACG\n")
    out = tmp_path / "hits.txt"
    assert main(["align", str(fasta_q), str(fasta_t), "--mode", "sw", "--match", "2",
                 "--mismatch", "-3", "--gap-open", "5", "--gap-extend", "2", "--out",
                 str(out), "--backend", "cpu", "--no-progress"]) == 0
    queries, targets = read_sequences(fasta_q), read_sequences(fasta_t)
    frame = gpualign_df.align(queries.seq, targets.seq, mode="sw", backend="cpu", **DNA)
    named = frame.assign(query=frame["query"].map(queries.name),
                         target=frame["target"].map(targets.name))
    assert out.read_text() == str(gpualign_df.view(named, queries.set_index("name").seq,
                                                   targets.set_index("name").seq, **DNA))
    assert "read_a" in out.read_text() and "|" in out.read_text()
