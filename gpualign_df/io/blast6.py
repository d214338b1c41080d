"""BLAST tabular output (``-outfmt 6``): the 12 columns, e-values and bit scores.

The e-value and bit score come from Karlin-Altschul statistics
(:mod:`gpualign_df.blast_stats`, imported only when a scoring is given) and are printed as
BLAST+ prints them, through C-printf formatting done column-wise (numbers near a rounding
tie are formatted by Python, whose ``%`` rounds as C does).
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .encoder import AlignedRowsEncoder, ints
from .text import STR, as_text, lit, text_lines


class Blast6Encoder(AlignedRowsEncoder):
    """The 12 columns of BLAST ``-outfmt 6``, e-values and bit scores as BLAST+ prints
    them (``NA`` without a scoring BLAST has parameters for)."""

    format_name = "blast6"

    def __init__(self, *args: object) -> None:
        scoring = args[3]
        # Sequences are needed only for the search space of the e-values.
        self.needs_seq = scoring is not None
        super().__init__(*args)
        self.stats: object | None = None
        self.params: object | None = None
        if self.scoring is not None:
            # Imported here: the statistics are needed by this one format only.
            self.stats = importlib.import_module("gpualign_df.blast_stats")
            self.params = self.stats.karlin_altschul(self.scoring)
        if self.params is not None and self.how in ("search", "pairwise"):
            # The whole targets frame is the database searched by every query.
            self.db_residues = int(self.targets.lengths.sum())
            self.db_sequences = len(self.targets.frame)

    def _statistics(self, part: pd.DataFrame, query_pos: np.ndarray,
                    target_pos: np.ndarray) -> tuple[pa.Array, pa.Array]:
        if self.params is None:
            return lit("NA"), lit("NA")
        scores = ints(part["score"])
        query_lengths = self.queries.lengths[query_pos]
        if self.how in ("search", "pairwise"):
            evalues, bits = self.stats.evalues_and_bitscores(
                scores, query_lengths, self.db_residues, self.db_sequences, self.params)
        else:
            # Each pair is its own search: the database is the pair's target alone.
            target_lengths = self.targets.lengths[target_pos]
            evalues = np.empty(len(scores), dtype=np.float64)
            bits = np.empty(len(scores), dtype=np.float64)
            order = np.argsort(target_lengths, kind="stable")
            sorted_lengths = target_lengths[order]
            bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
            for group in np.split(order, bounds):
                if len(group) == 0:
                    continue
                e, b = self.stats.evalues_and_bitscores(
                    scores[group], query_lengths[group], int(target_lengths[group[0]]), 1,
                    self.params)
                evalues[group] = e
                bits[group] = b
        return _blast_evalues(np.asarray(evalues, np.float64)), \
            _blast_bitscores(np.asarray(bits, np.float64))

    def record_lines(self, part: pd.DataFrame, query_pos: np.ndarray,
                     target_pos: np.ndarray) -> pa.Array:
        evalue, bitscore = self._statistics(part, query_pos, target_pos)
        fields = [
            self.queries.names.take(pa.array(query_pos)),
            self.targets.names.take(pa.array(target_pos)),
            _pident(part),
            as_text(part["length"]),
            as_text(part["mismatches"]),
            as_text(part["gap_opens"]),
            as_text(ints(part["query_start"]) + 1),
            as_text(part["query_end"]),
            as_text(ints(part["target_start"]) + 1),
            as_text(part["target_end"]),
            evalue,
            bitscore,
        ]
        return text_lines(fields)


def _pident(part: pd.DataFrame) -> pa.Array:
    """``100 * identity`` formatted like C's ``%.3f``, without per-row Python."""
    identity = pd.to_numeric(part["identity"]).to_numpy(dtype=np.float64, na_value=np.nan)
    fallback = ints(part["matches"]) / np.maximum(ints(part["length"]), 1)
    identity = np.where(np.isnan(identity), fallback, identity)
    thousandths = np.rint(identity * 100_000.0).astype(np.int64)
    whole = as_text(thousandths // 1000)
    fraction = pc.utf8_lpad(as_text(thousandths % 1000), 3, "0")
    return pc.binary_join_element_wise(whole, fraction, lit("."))


def _near_half(scaled: np.ndarray) -> np.ndarray:
    """Where rounding `scaled` (an inexact product) could go either way: within float error
    of a .5 tie.  Those rows are formatted by Python, whose ``%`` rounds the exact binary
    value as C's printf does."""
    fraction = scaled - np.floor(scaled)
    return np.abs(fraction - 0.5) <= 1e-9 + np.abs(scaled) * 1e-15


def _patched(candidate: pa.Array, values: np.ndarray, unsafe: np.ndarray,
             spec: str) -> pa.Array:
    if not unsafe.any():
        return candidate
    rows = np.flatnonzero(unsafe)
    exact = pa.array([spec % float(values[i]) for i in rows], type=STR)
    mask = np.zeros(len(values), dtype=bool)
    mask[rows] = True
    return pc.replace_with_mask(candidate, pa.array(mask), exact)


def _c_fixed(values: np.ndarray, decimals: int) -> pa.Array:
    """C's ``%.{decimals}f`` for each value."""
    scale = 10 ** decimals
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * float(scale)
        unsafe = ~np.isfinite(scaled) | (values < 0) | (scaled >= 2.0 ** 52) \
            | _near_half(scaled)
        units = np.floor(np.where(unsafe, 0.0, scaled) + 0.5).astype(np.int64)
    whole = as_text(units // scale)
    if decimals:
        fraction = pc.utf8_lpad(as_text(units % scale), decimals, "0")
        candidate = pc.binary_join_element_wise(whole, fraction, lit("."))
    else:
        candidate = whole
    return _patched(candidate, values, unsafe, f"%.{decimals}f")


def _c_exponent(values: np.ndarray, digits: int) -> pa.Array:
    """C's ``%.{digits}e`` for each value (positive values; others go to Python)."""
    scale = 10 ** digits
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log10(values))
        exponent = np.where(np.isfinite(exponent), exponent, 0.0)
        mantissa = values / np.power(10.0, exponent)
        scaled = mantissa * scale
        unsafe = ~(values > 0) | ~np.isfinite(values) | (mantissa < 1.0 + 1e-9) \
            | (mantissa > 10.0 - 1e-9) | _near_half(scaled)
        units = np.floor(np.where(unsafe, scale, scaled) + 0.5).astype(np.int64)
    carry = units >= 10 * scale  # 9.995 -> 10.00: one digit more, exponent + 1
    units = np.where(carry, units // 10, units)
    exponent = exponent.astype(np.int64) + carry
    lead = as_text(units // scale)
    if digits:
        mantissa_text = pc.binary_join_element_wise(
            lead, pc.utf8_lpad(as_text(units % scale), digits, "0"), lit("."))
    else:
        mantissa_text = lead
    sign = pc.if_else(pa.array(exponent < 0), lit("e-"), lit("e+"))
    power = pc.utf8_lpad(as_text(np.abs(exponent)), 2, "0")
    candidate = pc.binary_join_element_wise(mantissa_text, sign, power, lit(""))
    return _patched(candidate, values, unsafe, f"%.{digits}e")


def _by_band(values: np.ndarray, bands: list[tuple[np.ndarray, object]]) -> pa.Array:
    """Format each row by the first band whose mask holds it (bands cover every row)."""
    out: pa.Array | None = None
    taken = np.zeros(len(values), dtype=bool)
    for mask, formatter in bands:
        rows = mask & ~taken
        taken |= rows
        if not rows.any():
            continue
        if isinstance(formatter, str):
            part = pa.array(np.full(int(rows.sum()), formatter, dtype=object), type=STR)
        else:
            part = formatter(values[rows])
        if out is None:
            out = pa.nulls(len(values), STR)
        out = pc.replace_with_mask(out, pa.array(rows), part)
    return out if out is not None else pa.array([], type=STR)


def _blast_evalues(evalues: np.ndarray) -> pa.Array:
    """E-values as BLAST+'s tabular output prints them (``CAlignFormatUtil::
    GetScoreString`` with the tabular override of ``CBlastTabularInfo::SetScores``):
    ``0.0`` below 1e-180, ``%.2e`` below 0.0009, ``%.3f`` below 0.1, ``%.2f`` below 1,
    ``%.1f`` below 10, else ``%.0f``."""
    with np.errstate(invalid="ignore"):
        return _by_band(evalues, [
            (evalues < 1.0e-180, "0.0"),
            (evalues < 0.0009, lambda v: _c_exponent(v, 2)),
            (evalues < 0.1, lambda v: _c_fixed(v, 3)),
            (evalues < 1.0, lambda v: _c_fixed(v, 2)),
            (evalues < 10.0, lambda v: _c_fixed(v, 1)),
            (np.ones(len(evalues), dtype=bool), lambda v: _c_fixed(v, 0)),
        ])


def _blast_bitscores(bits: np.ndarray) -> pa.Array:
    """Bit scores as BLAST+ prints them: ``%.3e`` above 99999, the integer part (C's
    ``(long)`` truncation) above 99.9, else ``%.1f`` (BLAST's width padding left out)."""
    with np.errstate(invalid="ignore"):
        return _by_band(bits, [
            (bits > 99999, lambda v: _c_exponent(v, 3)),
            (bits > 99.9, lambda v: as_text(np.trunc(v).astype(np.int64))),
            (np.ones(len(bits), dtype=bool), lambda v: _c_fixed(v, 1)),
        ])
