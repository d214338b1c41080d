"""SAM output: the header, primary and secondary records, MAPQ, unmapped reads.

Among the rows of one query (a run of consecutive rows with the same ``query`` label), the
best-scoring mapped row is the primary record and the other mapped rows are secondary, so
that each read has exactly one primary record; a run split across two written frames
continues (the encoder remembers the last query of the previous frame).
"""

from __future__ import annotations

from typing import IO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .encoder import (Encoder, aligned_rows, check_bounds, check_text, ints, record_numbers,
                      require_traceback)
from .output import Destination
from .text import (STR, as_text, joined_bytes, lit, prefix, suffix, text_lines,
                   write_in_blocks)


class _SamState:
    """What a SAM writer remembers of the query run the previous write() ended with."""

    def __init__(self) -> None:
        self.active = False
        self.label: object = None
        self.primary = False   # the run already has a primary mapped record
        self.unmapped = False  # the run already has its unmapped record


class SamEncoder(Encoder):
    """The SAM header, then one record per mapped row and one unmapped record per query
    without a mapped row (see :func:`~gpualign_df.io.open_results` for the rules)."""

    format_name = "sam"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name", "seq"])
        self.targets.require(["name", "seq"])
        self.queries.check_names()
        self.targets.check_names()
        self.header = self._header()
        self.state = _SamState()

    def _header(self) -> bytes:
        """``@HD``, one ``@SQ`` per row of the targets frame in its order, ``@PG``.

        Reference names must be unique (a reader maps RNAME to one @SQ), non-empty and
        match SAM's ``[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*`` in
        spirit: no white space, not starting with ``*`` or ``=``."""
        names = self.targets.raw_names
        lengths = self.targets.lengths
        values = pd.Series(names.to_numpy(zero_copy_only=False), dtype=object).fillna("")
        duplicated = values.duplicated(keep=False).to_numpy()
        if duplicated.any():
            groups: dict[str, list[int]] = {}
            for row in np.flatnonzero(duplicated):
                groups.setdefault(values.iloc[row], []).append(int(row) + 1)
            listed = "; ".join(f"{name!r} (records {', '.join(map(str, rows[:10]))}"
                               f"{' ...' if len(rows) > 10 else ''})"
                               for name, rows in list(groups.items())[:5])
            more = f"; and {len(groups) - 5} more names" if len(groups) > 5 else ""
            raise ValueError(f"SAM needs unique reference names, and the targets frame "
                             f"repeats {len(groups)} name(s) (names are the header's first "
                             f"word): {listed}{more}; rename the sequences")
        bad = pc.fill_null(pc.match_substring_regex(names, r"^$|^[*=]|\s"), True)
        mask = np.asarray(bad.to_numpy(zero_copy_only=False), dtype=bool)
        if mask.any():
            first = values.iloc[int(np.flatnonzero(mask)[0])]
            raise ValueError(f"SAM reference names must be non-empty, free of white space "
                             f"and not start with '*' or '=': target {first!r} (record "
                             f"{record_numbers(mask)})")
        head = "@HD\tVN:1.6\tSO:unsorted\n".encode()
        sq = text_lines([lit("@SQ"), prefix("SN:", names), prefix("LN:", as_text(lengths))])
        pg = f"@PG\tID:gpualign\tPN:gpualign\tDS:alignment mode {self.mode}\n".encode()
        return head + joined_bytes(sq) + pg

    def prepare(self, frame: pd.DataFrame) -> dict[str, object]:
        require_traceback(frame, self.format_name)
        query_pos = self.queries.positions(frame["query"])
        target_pos = self.targets.positions(frame["target"])
        aligned = aligned_rows(frame)
        check_bounds(frame, "query_end", self.queries.lengths[query_pos], aligned)
        check_bounds(frame, "target_end", self.targets.lengths[target_pos], aligned)
        check_text(frame, "cigar")
        frame = frame.reset_index(drop=True)
        roles = _sam_roles(frame["query"].to_numpy(), aligned, ints(frame["score"]),
                           self.state)
        return {"frame": frame, "query_pos": query_pos, "target_pos": target_pos,
                "aligned": aligned, **roles}

    def begin(self, stream: IO[bytes], destination: Destination) -> None:
        super().begin(stream, destination)
        stream.write(self.header)

    def emit(self, destination: Destination, prepared: dict[str, object]) -> None:
        assert self.stream is not None
        keep = prepared["keep"]
        order = np.flatnonzero(keep)
        frame = prepared["frame"]

        def block_lines(block: slice) -> pa.Array:
            rows = order[block]
            return self._record_lines(
                frame.iloc[rows].reset_index(drop=True),
                prepared["query_pos"][rows], prepared["target_pos"][rows],
                prepared["aligned"][rows], prepared["primary"][rows], prepared["mapq"][rows])

        write_in_blocks(self.stream, len(order), self.chunk_rows, block_lines)
        # The state is advanced only once the frame is written.
        self.state = prepared["state"]

    def _record_lines(self, part: pd.DataFrame, query_pos: np.ndarray,
                      target_pos: np.ndarray, aligned: np.ndarray, primary: np.ndarray,
                      mapq: np.ndarray) -> pa.Array:
        qlen = self.queries.lengths[query_pos]
        query_start, query_end = ints(part["query_start"]), ints(part["query_end"])
        cigar = as_text(part["cigar"])
        lead_clip = pc.fill_null(pc.match_substring_regex(cigar, r"^\d+S"), False)
        tail_clip = pc.fill_null(pc.match_substring_regex(cigar, r"\d+S$"), False)
        lead_clip = lead_clip.to_numpy(zero_copy_only=False)
        tail_clip = tail_clip.to_numpy(zero_copy_only=False)
        lead_del = _cigar_end_count(cigar, r"^(?:\d+S)?(?P<n>\d+)D")
        tail_del = _cigar_end_count(cigar, r"(?P<n>\d+)D(?:\d+S)?$")
        core = pc.replace_substring_regex(cigar, r"^(\d+S)?\d+D", r"\1")
        core = pc.replace_substring_regex(core, r"\d+D(\d+S)?$", r"\1")
        back = qlen - query_end
        full_cigar = pc.binary_join_element_wise(
            suffix(query_start, "S", ~lead_clip & (query_start > 0)),
            core,
            suffix(back, "S", ~tail_clip & (back > 0)),
            lit(""),
        )
        mapped = pa.array(aligned)
        secondary = aligned & ~primary
        flag = np.where(aligned, np.where(secondary, 256, 0), 4)
        pos = ints(part["target_start"]) + lead_del + 1
        nm = ints(part["mismatches"]) + ints(part["gaps"]) - lead_del - tail_del
        seq = self.queries.seqs.take(pa.array(query_pos))
        quals = self.queries.quals
        qual = quals.take(pa.array(query_pos)) if quals is not None else lit("*")
        # Secondary records carry no SEQ/QUAL: the primary has them.
        hide = pa.array(secondary)
        seq = pc.if_else(hide, lit("*"), seq)
        qual = pc.if_else(hide, lit("*"), qual)
        tags = pc.binary_join_element_wise(
            prefix("AS:i:", as_text(ints(part["score"]))),
            prefix("NM:i:", as_text(nm)),
            lit("\t"),
        )
        fields = [
            self.queries.names.take(pa.array(query_pos)),
            as_text(flag),
            pc.if_else(mapped, self.targets.names.take(pa.array(target_pos)), lit("*")),
            pc.if_else(mapped, as_text(pos), lit("0")),
            as_text(np.where(aligned, mapq, 0)),
            pc.if_else(mapped, full_cigar, lit("*")),
            lit("*"), lit("0"), lit("0"),
            seq,
            qual,
        ]
        tail = pc.if_else(mapped, tags, pa.scalar(None, STR))
        return text_lines(fields, tail)


def _sam_roles(labels: np.ndarray, aligned: np.ndarray, scores: np.ndarray,
               state: _SamState) -> dict[str, object]:
    """Which rows become records, which mapped row of each query run is primary, MAPQ.

    A run is a stretch of consecutive rows with the same query label; the first run
    continues the previous call's last run when its label is the same (`state`).  Per run:
    the first mapped row with the best score is primary unless the run already has a
    primary from the previous call; every other mapped row is secondary; with no mapped
    row, the first row is written once as unmapped.  MAPQ of a primary: 255 when the run
    has one mapped row here, else from the best and second-best scores s1, s2:
    0 if s2 >= s1 or s1 <= 0, else min(60, round(60 * (s1 - s2) / s1))."""
    n = len(labels)
    new_state = _SamState()
    if n == 0:
        new_state.__dict__.update(state.__dict__)
        return {"keep": np.zeros(0, bool), "primary": np.zeros(0, bool),
                "mapq": np.zeros(0, np.int64), "state": new_state}
    starts_mask = np.ones(n, dtype=bool)
    if n > 1:
        starts_mask[1:] = np.asarray(labels[1:] != labels[:-1], dtype=bool)
    continued = bool(state.active and _same_label(labels[0], state.label))
    starts = np.flatnonzero(starts_mask)
    run = np.cumsum(starts_mask) - 1
    rows = np.arange(n)
    low = np.iinfo(np.int64).min
    best_scores = np.where(aligned, scores, low)
    s1 = np.maximum.reduceat(best_scores, starts)
    mapped_count = np.add.reduceat(aligned.astype(np.int64), starts)
    is_best = aligned & (best_scores == s1[run])
    first_best = np.minimum.reduceat(np.where(is_best, rows, n), starts)
    has_mapped = first_best < n
    others = best_scores.copy()
    others[first_best[has_mapped]] = low
    s2 = np.maximum.reduceat(others, starts)

    primary_run = has_mapped.copy()
    if continued and state.primary:
        primary_run[0] = False  # the previous call wrote this query's primary
    primary = np.zeros(n, dtype=bool)
    primary[first_best[primary_run]] = True

    first_unmapped = np.minimum.reduceat(np.where(~aligned, rows, n), starts)
    unmapped_run = ~has_mapped & (first_unmapped < n)
    if continued and (state.primary or state.unmapped):
        unmapped_run[0] = False
    keep = aligned.copy()
    keep[first_unmapped[unmapped_run]] = True

    # Python's round(60 * (s1 - s2) / s1): the integer product, one correctly rounded
    # division, rounding half to even (np.rint) -- the same float64 operations.
    scored = (mapped_count >= 2) & (s2 < s1) & (s1 > 0)
    top = np.where(scored, s1, 1)
    second = np.where(scored, s2, 0)
    ratio = (60 * (top - second)).astype(np.float64) / top.astype(np.float64)
    run_mapq = np.where(scored, np.minimum(60, np.rint(ratio)), 0).astype(np.int64)
    run_mapq = np.where(mapped_count == 1, 255, run_mapq)
    mapq = np.where(primary, run_mapq[run], 0)

    last = len(starts) - 1
    new_state.active = True
    new_state.label = labels[-1]
    carried = continued and last == 0
    new_state.primary = bool(primary_run[last]) or (carried and state.primary)
    new_state.unmapped = bool(unmapped_run[last]) or (carried and state.unmapped)
    return {"keep": keep, "primary": primary, "mapq": mapq, "state": new_state}


def _same_label(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _cigar_end_count(cigar: pa.Array, pattern: str) -> np.ndarray:
    found = pc.extract_regex(cigar, pattern)
    digits = pc.fill_null(pc.struct_field(found, "n"), "0")
    digits = pc.if_else(pc.equal(digits, ""), lit("0"), digits)
    return pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
