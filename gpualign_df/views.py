"""A readable view of result rows: the classic pairwise block layout, as text and as HTML.

Each row of a result frame with CIGARs becomes a header (labels, score, statistics) and
blocks of ``width`` alignment columns: the query line, the match line and the target line,
each sequence line between the 1-based positions of its first and last residue in the
block. The match line follows EMBOSS ``pair``: ``|`` identical concrete residues (a CIGAR
``=``), ``:`` any other pair whose substitution score is positive, ``.`` a score of zero, a
space otherwise and in gaps. As in BLAST's pairwise report, a row shows the aligned region
only: soft clips (``S``) and free end gaps are in its coordinates, not drawn.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .results import COORDINATES, STATISTICS
from .scoring import Scoring, make_scoring

#: One run of a CIGAR: its length and operation.
CIGAR_RUN = re.compile(r"(\d+)([=XMIDS])")
#: CSS of the HTML view: monospace, mismatches and gaps coloured, wide blocks scroll.
_STYLE = ("font-family: monospace; white-space: pre; overflow-x: auto; line-height: 1.25;")
_COLOURS = {"X": "#c0392b", "gap": "#2471a3"}


@dataclass(frozen=True)
class AlignedRow:
    """One result row, aligned: the gapped query and target and the match line (equal
    lengths), with the row's labels, score, coordinates and statistics (``None`` for a
    null row)."""

    query_label: Any
    target_label: Any
    fields: dict[str, Any]
    query_line: str | None
    match_line: str | None
    target_line: str | None
    query_start: int = 0
    target_start: int = 0

    @property
    def is_null(self) -> bool:
        return self.query_line is None


def cigar_runs(cigar: str, query_start: int,
               target_start: int) -> Iterator[tuple[int, str, int, int]]:
    """The aligned runs of a CIGAR (soft clips left out) as (length, operation, query
    position, target position), positions 0-based where the run starts: ``I`` advances the
    query only, ``D`` the target only, the others both."""
    i, j = query_start, target_start
    for count_text, op in CIGAR_RUN.findall(cigar):
        count = int(count_text)
        if op == "S":
            continue
        yield count, op, i, j
        if op != "D":
            i += count
        if op != "I":
            j += count


def _aligned_lines(cigar: str, query: str, target: str, query_start: int, target_start: int,
                   scoring: Scoring) -> tuple[str, str, str]:
    """The gapped query, match line and gapped target of one CIGAR over the two sequences
    (the CIGAR covers ``query[query_start:]`` and ``target[target_start:]``)."""
    top: list[str] = []
    middle: list[str] = []
    bottom: list[str] = []
    for count, op, i, j in cigar_runs(cigar, query_start, target_start):
        a = "-" * count if op == "D" else query[i:i + count]
        b = "-" * count if op == "I" else target[j:j + count]
        top.append(a)
        bottom.append(b)
        middle.append(" " * count if op in "ID"
                      else "".join(_match_symbol(x, y, scoring) for x, y in zip(a, b)))
    return "".join(top), "".join(middle), "".join(bottom)


def _match_symbol(a: str, b: str, scoring: Scoring) -> str:
    code_a, code_b = int(scoring.lut[ord(a) & 0xFF]), int(scoring.lut[ord(b) & 0xFF])
    if code_a == 255 or code_b == 255:
        return " "
    if code_a == code_b and scoring.concrete[code_a]:
        return "|"
    score = int(scoring.matrix[code_a, code_b])
    return ":" if score > 0 else "." if score == 0 else " "


def lookup_sequences(values: Any, labels: list[Any], what: str) -> list[str | None]:
    """The sequences of ``labels`` in ``values`` (a pandas or cuDF Series by label, or a
    list-like by position), only those rows brought to the host."""
    if hasattr(values, "loc") and hasattr(values, "index"):
        picked = values.loc[list(labels)]
        if hasattr(picked, "to_pandas"):  # cuDF: only the rows asked for leave the GPU
            picked = picked.to_pandas()
        found = list(picked)
    else:
        sequence = list(values)
        try:
            found = [sequence[int(label)] for label in labels]
        except (IndexError, TypeError, ValueError) as error:
            raise KeyError(f"{what} labels {labels!r} are not positions of the {what} "
                           f"list ({len(sequence)} sequences)") from error
    if len(found) != len(labels):
        raise KeyError(f"{what} labels {labels!r} do not name one sequence each")
    return sequence_texts(found)


def sequence_texts(values: Iterable[Any]) -> list[str | None]:
    """Sequences as strings, None where null (None, NaN, NA)."""
    return [None if pd.isna(value) else str(value) for value in values]


def result_rows(frame: Any, rows: Any, doing: str) -> pd.DataFrame:
    """The rows ``rows`` of a result frame with CIGARs (index labels; None: all) as a
    pandas frame: of a cuDF frame only those rows leave the GPU."""
    if "cigar" not in frame.columns:
        raise ValueError(f"the frame has no cigar column: align with traceback=True to "
                         f"{doing} it")
    if rows is not None:
        frame = frame.loc[[rows] if np.isscalar(rows) else list(rows)]
    if hasattr(frame, "to_pandas"):  # cuDF: the rows asked for, to the host
        frame = frame.to_pandas()
    return frame


class AlignmentView:
    """Result rows in the classic pairwise layout: ``str(view)`` is the text,
    ``view._repr_html_()`` the notebook rendering. Built by :func:`view`."""

    def __init__(self, rows: list[AlignedRow], width: int) -> None:
        self.rows = rows
        self.width = width

    def __len__(self) -> int:
        return len(self.rows)

    def _header(self, row: AlignedRow) -> list[str]:
        lines = [f"# query: {row.query_label}", f"# target: {row.target_label}"]
        if not row.is_null:
            lines += [f"# {name}: {_field_text(value)}" for name, value in row.fields.items()]
        return lines

    @staticmethod
    def _note(row: AlignedRow) -> str | None:
        """The line that stands for the blocks of a row that has none."""
        if row.is_null:
            return "(null row: a null sequence, nothing aligned)"
        if not row.query_line:
            return "(empty alignment: no residue aligned)"
        return None

    def _blocks(self, row: AlignedRow) -> list[tuple[str, str, str, int, int, int, int]]:
        """(query, match, target, query first, query last, target first, target last) of
        each block, positions 1-based (a block of gaps only keeps the position before)."""
        assert row.query_line is not None and row.match_line is not None
        assert row.target_line is not None
        blocks = []
        i, j = row.query_start, row.target_start
        for at in range(0, len(row.query_line), self.width):
            top = row.query_line[at:at + self.width]
            bottom = row.target_line[at:at + self.width]
            query_residues = len(top) - top.count("-")
            target_residues = len(bottom) - bottom.count("-")
            blocks.append((top, row.match_line[at:at + self.width], bottom,
                           i + 1 if query_residues else i, i + query_residues,
                           j + 1 if target_residues else j, j + target_residues))
            i += query_residues
            j += target_residues
        return blocks

    def _laid_out(self, row: AlignedRow) -> list[tuple[str, ...]]:
        """Each block of a row as (query margin, query line, query end, match margin, match
        line, target margin, target line, target end): the margins hold the label and the
        1-based position of the line's first residue, aligned across the blocks."""
        label = max(len(str(name)) for name in (row.query_label, row.target_label))
        blocks = self._blocks(row)
        digits = max(len(str(value)) for block in blocks for value in block[3:])
        return [(f"{str(row.query_label):<{label}} {q0:>{digits}} ", top, f" {q1}",
                 " " * (label + digits + 2), middle,
                 f"{str(row.target_label):<{label}} {t0:>{digits}} ", bottom, f" {t1}")
                for top, middle, bottom, q0, q1, t0, t1 in blocks]

    def text(self) -> str:
        """The view as plain text (what ``str`` gives)."""
        parts = []
        for row in self.rows:
            lines = self._header(row)
            note = self._note(row)
            if note is not None:
                lines.append(note)
            else:
                for q_margin, top, q_end, m_margin, middle, t_margin, bottom, t_end in \
                        self._laid_out(row):
                    lines += ["", q_margin + top + q_end, m_margin + middle,
                              t_margin + bottom + t_end]
            parts.append("\n".join(lines))
        return "\n\n".join(parts) + "\n"

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        """The view for notebooks: the same layout, mismatches and gaps coloured."""
        out = []
        for row in self.rows:
            header = "<br>".join(html.escape(line) for line in self._header(row))
            out.append(f'<div style="{_STYLE}"><b>{header}</b>')
            note = self._note(row)
            if note is not None:
                out.append("<br>" + html.escape(note))
            else:
                for q_margin, top, q_end, m_margin, middle, t_margin, bottom, t_end in \
                        self._laid_out(row):
                    out.append("<br><br>" + html.escape(q_margin) + _coloured(top, middle)
                               + html.escape(q_end) + "<br>" + html.escape(m_margin + middle)
                               + "<br>" + html.escape(t_margin) + _coloured(bottom, middle)
                               + html.escape(t_end))
            out.append("</div>")
        return "".join(out)


def _field_text(value: Any) -> str:
    """A header value: floats to four significant digits."""
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    return str(value)


def _coloured(line: str, middle: str) -> str:
    """A sequence line as HTML: residues not marked identical in red, gaps in blue."""
    pieces = []
    for residue, mark in zip(line, middle):
        text = html.escape(residue)
        if residue == "-":
            pieces.append(f'<span style="color: {_COLOURS["gap"]}">{text}</span>')
        elif mark != "|":
            pieces.append(f'<span style="color: {_COLOURS["X"]}">{text}</span>')
        else:
            pieces.append(text)
    return "".join(pieces)


def view(frame: Any, queries: Any, targets: Any, rows: Any = None, *, width: int = 60,
         matrix: Any = None, match: int | None = None, mismatch: int | None = None,
         gap_open: int = 10, gap_extend: int = 1) -> AlignmentView:
    """A readable view of result rows: the aligned pair in blocks, as text or HTML.

    Parameters
    ----------
    frame : pandas.DataFrame or cudf.DataFrame
        A result of :func:`gpualign_df.align` (any ``how``) with CIGARs.
    queries, targets : Series or list-like
        The inputs the frame came from: the frame's ``query`` / ``target`` columns are their
        labels (positions for lists).
    rows : label, list of labels or None
        Rows of ``frame`` to show (its index labels); None: every row. Only these rows and
        their sequences are brought to the host.
    width : int
        Alignment columns a block.
    matrix, match, mismatch, gap_open, gap_extend
        The scoring the frame was aligned with (as for :func:`gpualign_df.align`), for the
        match line's ``:`` and ``.``.

    Returns
    -------
    AlignmentView
        ``str(view)``: text; in a notebook it renders as HTML.

    Examples
    --------
    >>> import gpualign_df
    >>> frame = gpualign_df.align(["ACGTACGTTA"], ["ACGTCGTTA"], mode="nw", match=2,
    ...                           mismatch=-3, gap_open=5, gap_extend=2, backend="cpu")
    >>> print(gpualign_df.view(frame, ["ACGTACGTTA"], ["ACGTCGTTA"], match=2, mismatch=-3,
    ...                        gap_open=5, gap_extend=2))
    # query: 0
    # target: 0
    # score: 13
    # query_start: 0
    # query_end: 10
    # target_start: 0
    # target_end: 9
    # cigar: 4=1I5=
    # matches: 9
    # mismatches: 0
    # gap_opens: 1
    # gaps: 1
    # length: 10
    # identity: 0.9
    <BLANKLINE>
    0  1 ACGTACGTTA 10
         |||| |||||
    0  1 ACGT-CGTTA 9
    <BLANKLINE>
    """
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
        raise ValueError(f"width must be a positive integer, got {width!r}")
    scoring = make_scoring(matrix, match=match, mismatch=mismatch, gap_open=gap_open,
                           gap_extend=gap_extend)
    frame = result_rows(frame, rows, "view")
    query_sequences = lookup_sequences(queries, frame["query"].tolist(), "query")
    target_sequences = lookup_sequences(targets, frame["target"].tolist(), "target")
    return AlignmentView(aligned_rows(frame, query_sequences, target_sequences, scoring),
                         int(width))


def aligned_rows(frame: pd.DataFrame, query_sequences: list[str | None],
                 target_sequences: list[str | None], scoring: Scoring,
                 query_names: list[Any] | None = None,
                 target_names: list[Any] | None = None) -> list[AlignedRow]:
    """The rows of a pandas result frame aligned over their sequences (one each, in row
    order; None where null), shown under ``query_names`` / ``target_names`` (default: the
    frame's labels)."""
    shown = [name for name in ("score", *COORDINATES, "cigar", *STATISTICS, "identity")
             if name in frame.columns]
    query_names = frame["query"].tolist() if query_names is None else query_names
    target_names = frame["target"].tolist() if target_names is None else target_names
    rows = []
    for (_, record), query, target, query_name, target_name in zip(
            frame.iterrows(), query_sequences, target_sequences, query_names, target_names):
        fields = {name: (None if pd.isna(record[name]) else record[name]) for name in shown}
        cigar = fields.get("cigar")
        if cigar is None or query is None or target is None:
            rows.append(AlignedRow(query_name, target_name, fields, None, None, None))
            continue
        q0, t0 = int(fields["query_start"]), int(fields["target_start"])
        top, middle, bottom = _aligned_lines(cigar, query, target, q0, t0, scoring)
        rows.append(AlignedRow(query_name, target_name, fields, top, middle, bottom, q0, t0))
    return rows
