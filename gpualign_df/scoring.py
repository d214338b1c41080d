"""Alphabets, substitution matrices, the gap model, modes and parameter validation.

Everything here is validated before any alignment work starts, so a bad parameter fails
fast with a ``ValueError`` that says what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Iterable

import numpy as np
import pandas as pd

#: Built-in matrix names (upper case) -> file under ``gpualign_df/data/matrices``.
MATRIX_FILES = {
    "BLOSUM45": "BLOSUM45",
    "BLOSUM50": "BLOSUM50",
    "BLOSUM62": "BLOSUM62",
    "BLOSUM80": "BLOSUM80",
    "BLOSUM90": "BLOSUM90",
    "PAM30": "PAM30",
    "PAM70": "PAM70",
    "PAM250": "PAM250",
    "EDNAFULL": "NUC.4.4",
    "NUC.4.4": "NUC.4.4",
}

#: DNA alphabet used with ``match``/``mismatch`` scoring: ACGT, then the IUPAC ambiguity codes.
DNA_ALPHABET = "ACGTNRYKMSWBDHV"

#: Nucleotide IUPAC codes, and the protein symbols that are ambiguity codes or wildcards.
NUCLEOTIDE_CODES = "ACGTUNRYKMSWBDHV"
PROTEIN_WILDCARDS = "BZJOX*"

#: Extra input symbols read as another symbol of the alphabet (``U`` is read as ``T``).
DNA_ALIASES = {"U": "T"}
#: Protein letters the built-in protein matrices have no row for (selenocysteine U,
#: pyrrolysine O, the Leu/Ile ambiguity J, all in real UniProt sequences): scored as the
#: matrix's wildcard X rather than refused.
PROTEIN_ALIASES = {"U": "X", "O": "X", "J": "X"}

INVALID_CODE = 255

#: Mode codes shared by every engine.
MODE_LOCAL, MODE_GLOBAL, MODE_SEMIGLOBAL = 0, 1, 2
MODE_NAMES = {
    "sw": MODE_LOCAL, "local": MODE_LOCAL,
    "nw": MODE_GLOBAL, "global": MODE_GLOBAL,
    "sg": MODE_SEMIGLOBAL, "semiglobal": MODE_SEMIGLOBAL, "semi-global": MODE_SEMIGLOBAL,
}
FREE_END_NAMES = ("query_start", "query_end", "target_start", "target_end")
#: GATK's overhang strategies (``SWOverhangStrategy``), the values of ``overhang``: GATK's
#: aligner instead of the modes above (:mod:`gpualign_df.kernels.gatk`).
OVERHANGS = ("softclip", "indel", "leading_indel", "ignore")

#: Scores must stay below this bound in magnitude (int32 DP cells with headroom for -inf).
SCORE_LIMIT = 1 << 29
NEG_INF = -(1 << 30)


@dataclass(frozen=True)
class Scoring:
    """Substitution scores and affine gap costs, ready for the engines.

    Attributes
    ----------
    name : str
        Matrix name, ``"match/mismatch"`` or ``"custom"``.
    alphabet : str
        Symbol of each code: code ``k`` is ``alphabet[k]``.
    matrix : numpy.ndarray
        ``int32`` square table, ``matrix[a, b]`` scores query code ``a`` against target code ``b``.
    lut : numpy.ndarray
        ``uint8[256]``: byte -> code, ``255`` for bytes outside the alphabet (case-insensitive).
    gap_open, gap_extend : int
        A gap of length k costs ``gap_open + (k - 1) * gap_extend``.
    concrete : numpy.ndarray
        ``uint8`` per code: 1 for a concrete residue, 0 for an ambiguity code or wildcard
        (see :func:`concrete_symbols`). Identical concrete residues are ``=`` in a CIGAR;
        every other aligned pair is ``X``.
    """

    name: str
    alphabet: str
    matrix: np.ndarray
    lut: np.ndarray
    gap_open: int
    gap_extend: int
    concrete: np.ndarray

    @property
    def nucleotide(self) -> bool:
        """A built-in nucleotide scheme (``match``/``mismatch`` or EDNAFULL)."""
        return self.name in ("match/mismatch", "EDNAFULL", "NUC.4.4")

    @cached_property
    def largest_entry(self) -> int:
        """The largest magnitude in the matrix (0 for an empty one), computed once: the
        scoring never changes, and each job's score bound reads it."""
        return int(np.abs(self.matrix).max()) if self.matrix.size else 0

    def max_abs_score(self, query_length: int, target_length: int) -> int:
        """Bound on the magnitude of any DP cell for sequences of these lengths."""
        shorter = min(query_length, target_length)
        gaps = self.gap_open + (query_length + target_length) * self.gap_extend
        return self.largest_entry * shorter + gaps + self.gap_open


@dataclass(frozen=True)
class Mode:
    """Alignment mode as the engines see it: a code and four free-end flags."""

    code: int
    free_query_start: bool = False
    free_query_end: bool = False
    free_target_start: bool = False
    free_target_end: bool = False

    @property
    def name(self) -> str:
        return {MODE_LOCAL: "sw", MODE_GLOBAL: "nw", MODE_SEMIGLOBAL: "sg"}[self.code]

    def flags(self) -> tuple[bool, bool, bool, bool]:
        return (self.free_query_start, self.free_query_end,
                self.free_target_start, self.free_target_end)


def parse_mode(mode: str, free_ends: Iterable[str] | str | None = None) -> Mode:
    """Validate a mode name and the free ends of semi-global alignment.

    Parameters
    ----------
    mode : str
        ``"sw"``/``"local"``, ``"nw"``/``"global"`` or ``"sg"``/``"semiglobal"``.
    free_ends : iterable of str, "all" or None
        Semi-global only: which of ``query_start``, ``query_end``, ``target_start``,
        ``target_end`` are free. ``None`` or ``"all"`` frees all four.

    Examples
    --------
    >>> parse_mode("sg", free_ends=("target_start", "target_end")).flags()
    (False, False, True, True)
    """
    if not isinstance(mode, str) or mode.lower() not in MODE_NAMES:
        raise ValueError(f"unknown mode {mode!r}; use one of {sorted(MODE_NAMES)}")
    code = MODE_NAMES[mode.lower()]
    if code != MODE_SEMIGLOBAL:
        if free_ends not in (None, (), []):
            raise ValueError(f"free_ends applies to semi-global mode only, not {mode!r}")
        return Mode(code)
    if free_ends is None or free_ends == "all":
        ends = set(FREE_END_NAMES)
    else:
        if isinstance(free_ends, str):
            free_ends = (free_ends,)
        ends = set(free_ends)
        unknown = ends - set(FREE_END_NAMES)
        if unknown:
            raise ValueError(f"unknown free end(s) {sorted(unknown)}; use {list(FREE_END_NAMES)}")
    return Mode(code, *(name in ends for name in FREE_END_NAMES))


def _lookup_table(alphabet: str, aliases: dict[str, str] | None = None) -> np.ndarray:
    """The 256-entry byte -> code table of an alphabet (either case) and its aliases: a
    copy of the one built once (a job resolves its scoring at every call)."""
    return _built_lookup_table(alphabet, tuple(sorted((aliases or {}).items()))).copy()


@lru_cache(maxsize=64)
def _built_lookup_table(alphabet: str, aliases: tuple) -> np.ndarray:
    aliases = dict(aliases)
    lut = np.full(256, INVALID_CODE, dtype=np.uint8)
    for code, symbol in enumerate(alphabet):
        lut[ord(symbol.upper())] = code
        lut[ord(symbol.lower())] = code
    for alias, symbol in (aliases or {}).items():
        lut[ord(alias.upper())] = lut[ord(symbol)]
        lut[ord(alias.lower())] = lut[ord(symbol)]
    return lut


def parse_matrix_text(text: str) -> tuple[str, np.ndarray]:
    """Parse a substitution matrix in NCBI text form into (alphabet, int32 table).

    Examples
    --------
    >>> alphabet, table = parse_matrix_text("   A  C\\nA  1 -1\\nC -1  1\\n")
    >>> alphabet, table.tolist()
    ('AC', [[1, -1], [-1, 1]])
    """
    lines = [line.split() for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    columns = lines[0]
    rows = [line[0] for line in lines[1:]]
    if rows != columns:
        raise ValueError("matrix rows and columns must list the same symbols in the same order")
    table = np.array([[int(value) for value in line[1:]] for line in lines[1:]], dtype=np.int32)
    return "".join(columns), table


def load_matrix(name: str) -> tuple[str, np.ndarray]:
    """Alphabet and table of a built-in matrix (case-insensitive name).

    Examples
    --------
    >>> alphabet, table = load_matrix("BLOSUM62")
    >>> int(table[alphabet.index("W"), alphabet.index("W")])
    11
    """
    key = name.upper()
    if key not in MATRIX_FILES:
        raise ValueError(f"unknown matrix {name!r}; built-in: {sorted(MATRIX_FILES)}")
    alphabet, table = _built_in(key)
    return alphabet, table.copy()


@lru_cache(maxsize=None)
def _built_in(key: str) -> tuple[str, np.ndarray]:
    """A built-in matrix read and parsed once (callers get a copy of its table)."""
    text = resources.files("gpualign_df").joinpath("data", "matrices", MATRIX_FILES[key]).read_text()
    return parse_matrix_text(text)


def _check_penalty(name: str, value: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be given as a positive cost (>= 0), got {value}")
    if value >= SCORE_LIMIT:
        raise ValueError(f"{name} must be below {SCORE_LIMIT}, got {value}")
    return int(value)


def _check_score(name: str, value: object) -> int:
    """An integer substitution score within the matrices' range (+-32767)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, np.integer, float, np.floating)) or value != int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if abs(int(value)) >= 1 << 15:
        raise ValueError(f"{name} must lie within +-32767, got {int(value)}")
    return int(value)


def make_scoring(
    matrix: str | pd.DataFrame | tuple[str, np.ndarray] | None = None,
    *,
    match: int | None = None,
    mismatch: int | None = None,
    gap_open: int = 10,
    gap_extend: int = 1,
) -> Scoring:
    """Build and validate the scoring scheme.

    Parameters
    ----------
    matrix : str, pandas.DataFrame, (alphabet, table) or None
        A built-in name (BLOSUM45/50/62/80/90, PAM30/70/250, EDNAFULL alias NUC.4.4), a
        square DataFrame whose index and columns are the alphabet, or a tuple of an
        alphabet string and a square integer table. ``None`` with no ``match`` means
        EDNAFULL.
    match, mismatch : int, optional
        DNA scoring instead of a matrix (alphabet ACGT plus U read as T plus the IUPAC
        ambiguity codes, which score ``mismatch`` against everything, themselves included).
    gap_open, gap_extend : int
        Positive costs: a gap of length k costs ``gap_open + (k - 1) * gap_extend``.

    Examples
    --------
    >>> s = make_scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    >>> int(s.matrix[s.lut[ord("a")], s.lut[ord("A")]]), int(s.matrix[s.lut[ord("N")], s.lut[ord("N")]])
    (2, -3)
    """
    gap_open = _check_penalty("gap_open", gap_open)
    gap_extend = _check_penalty("gap_extend", gap_extend)
    if gap_extend > gap_open:
        raise ValueError(
            f"gap_extend ({gap_extend}) must not exceed gap_open ({gap_open}): a gap of length "
            f"k costs gap_open + (k-1) * gap_extend, and with a dearer extension two gaps side "
            f"by side would cost less than one gap of their joint length; for linear gaps give "
            f"gap_open == gap_extend")
    if match is not None or mismatch is not None:
        if matrix is not None:
            raise ValueError("give either matrix or match/mismatch, not both")
        if match is None or mismatch is None:
            raise ValueError("match and mismatch must be given together")
        match_value = _check_score("match", match)
        mismatch_value = _check_score("mismatch", mismatch)
        if mismatch_value > 0:
            raise ValueError(f"mismatch must be a score <= 0 (a penalty given as a negative "
                             f"number, e.g. -4), got {mismatch_value}")
        if match_value <= mismatch_value:
            raise ValueError(f"match ({match_value}) must score higher than mismatch "
                             f"({mismatch_value})")
        size = len(DNA_ALPHABET)
        table = np.full((size, size), mismatch_value, dtype=np.int32)
        for code in range(4):
            table[code, code] = match_value
        return Scoring("match/mismatch", DNA_ALPHABET, table,
                       _lookup_table(DNA_ALPHABET, DNA_ALIASES), gap_open, gap_extend,
                       concrete_symbols(DNA_ALPHABET))
    if matrix is None:
        matrix = "EDNAFULL"
    if isinstance(matrix, str):
        alphabet, table = load_matrix(matrix)
        if MATRIX_FILES[matrix.upper()] == "NUC.4.4":
            aliases = DNA_ALIASES
        else:
            aliases = {alias: symbol for alias, symbol in PROTEIN_ALIASES.items()
                       if symbol in alphabet and alias not in alphabet}
        name = matrix.upper()
        concrete = concrete_symbols(alphabet)
    else:
        if isinstance(matrix, pd.DataFrame):
            if list(matrix.index) != list(matrix.columns):
                raise ValueError("a matrix DataFrame needs the same labels, in the same order, "
                                 "on its index and columns")
            symbols = [label for label in matrix.columns]
            table = matrix.to_numpy()
        elif isinstance(matrix, tuple) and len(matrix) == 2:
            symbols, table = matrix[0], np.asarray(matrix[1])
        else:
            raise ValueError("matrix must be a name, a square DataFrame or (alphabet, table)")
        alphabet = _custom_alphabet(symbols)
        aliases, name = None, "custom"
        # A custom alphabet's letters are plain letters: identical ones are "=" in a CIGAR,
        # whatever they mean in IUPAC or protein code.
        concrete = np.ones(len(alphabet), dtype=np.uint8)
    return Scoring(name, alphabet, _validate_table(alphabet, table),
                   _lookup_table(alphabet, aliases), gap_open, gap_extend, concrete)


def concrete_symbols(alphabet: str) -> np.ndarray:
    """Which symbols are concrete residues (identical ones are ``=`` in a CIGAR).

    A nucleotide alphabet (only IUPAC codes) has A, C, G, T, U concrete; any other alphabet
    has everything concrete except the protein ambiguity codes and wildcards B Z J O X ``*``.

    Examples
    --------
    >>> concrete_symbols("ACGTN").tolist(), concrete_symbols("ARNDX*").tolist()
    ([1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0])
    """
    return _concrete_symbols(alphabet.upper()).copy()


@lru_cache(maxsize=64)
def _concrete_symbols(upper: str) -> np.ndarray:
    """:func:`concrete_symbols` of an upper-case alphabet, computed once (callers copy)."""
    if set(upper) <= set(NUCLEOTIDE_CODES):
        return np.array([symbol in "ACGTU" for symbol in upper], dtype=np.uint8)
    return np.array([symbol not in PROTEIN_WILDCARDS for symbol in upper], dtype=np.uint8)


def _custom_alphabet(symbols: object) -> str:
    """The alphabet of a custom matrix: distinct printable ASCII characters, one byte each
    (sequences are compared byte by byte), case-insensitive."""
    if isinstance(symbols, str):
        symbols = list(symbols)
    try:
        symbols = list(symbols)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"matrix alphabet must be a string of symbols, got {symbols!r}") \
            from None
    for symbol in symbols:
        if not isinstance(symbol, str) or len(symbol) != 1:
            raise ValueError(f"matrix alphabet symbols must be single characters, got {symbol!r}")
        if not (symbol.isascii() and symbol.isprintable() and not symbol.isspace()):
            raise ValueError(f"matrix alphabet symbol {symbol!r} is not a printable ASCII "
                             f"character; sequences are read byte by byte, so a custom alphabet "
                             f"holds ASCII letters, digits or punctuation")
    return "".join(symbols)


def _validate_table(alphabet: str, table: np.ndarray) -> np.ndarray:
    if any(len(symbol) != 1 for symbol in alphabet) or len(set(alphabet.upper())) != len(alphabet):
        raise ValueError("matrix alphabet must be distinct single characters (case-insensitive)")
    if len(alphabet) > 254:
        raise ValueError("matrix alphabet may hold at most 254 symbols")
    if table.ndim != 2 or table.shape != (len(alphabet), len(alphabet)):
        raise ValueError(f"matrix must be {len(alphabet)}x{len(alphabet)} for alphabet "
                         f"{alphabet!r}, got shape {table.shape}")
    if table.dtype == np.bool_ or not (np.issubdtype(table.dtype, np.integer)
                                       or np.issubdtype(table.dtype, np.floating)):
        example = table.flat[0].item() if table.size else None
        raise ValueError(f"matrix entries must be integers, got {type(example).__name__} "
                         f"entries such as {example!r}")
    if not np.issubdtype(table.dtype, np.integer):
        if not np.all(np.isfinite(table)) or not np.all(np.mod(table, 1) == 0):
            raise ValueError("matrix entries must be integers")
    if np.abs(table).max(initial=0) >= 1 << 15:
        raise ValueError("matrix entries must lie within +-32767")
    return np.ascontiguousarray(table, dtype=np.int32)


#: Scoring presets by name: (match, mismatch, gap_open, gap_extend) in this package's
#: convention (gap costs positive, a gap of length k costs ``gap_open + (k - 1) *
#: gap_extend``). The ``gatk-*`` ones are GATK HaplotypeCaller's Smith-Waterman parameter
#: sets, which GATK writes with negative gap weights and charges the same way (a gap's
#: first residue costs its open weight, each further one its extend weight):
#: ``NEW_SW_PARAMETERS`` (200, -150, -260, -11), ``ALIGNMENT_TO_BEST_HAPLOTYPE_SW_PARAMETERS``
#: (10, -15, -30, -5), ``STANDARD_NGS`` (25, -50, -110, -6), ``ORIGINAL_DEFAULT`` (3, -1,
#: -4, -3).
PRESETS = {
    "gatk-haplotype-to-reference": (200, -150, 260, 11),
    "gatk-read-to-haplotype": (10, -15, 30, 5),
    "gatk-standard-ngs": (25, -50, 110, 6),
    "gatk-original": (3, -1, 4, 3),
}
#: Gap costs where neither a preset nor the caller gives them.
DEFAULT_GAP_OPEN, DEFAULT_GAP_EXTEND = 10, 1


def preset_scores(preset: str | None, matrix: object, match: int | None,
                  mismatch: int | None, gap_open: int | None,
                  gap_extend: int | None) -> tuple[int | None, int | None, int, int]:
    """``(match, mismatch, gap_open, gap_extend)`` of a call: the preset's where one is
    named (it sets all four, so none of them nor ``matrix`` may be given too), else the
    given ones with the default gap costs (10, 1) where they are None.

    Examples
    --------
    >>> preset_scores("gatk-haplotype-to-reference", None, None, None, None, None)
    (200, -150, 260, 11)
    >>> preset_scores(None, None, 2, -3, None, 2)
    (2, -3, 10, 2)
    """
    if preset is None:
        return (match, mismatch, DEFAULT_GAP_OPEN if gap_open is None else gap_open,
                DEFAULT_GAP_EXTEND if gap_extend is None else gap_extend)
    if not isinstance(preset, str) or preset.lower() not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; use one of {sorted(PRESETS)}")
    given = [name for name, value in (("matrix", matrix), ("match", match),
                                      ("mismatch", mismatch), ("gap_open", gap_open),
                                      ("gap_extend", gap_extend)) if value is not None]
    if given:
        raise ValueError(f"preset={preset!r} sets the match and mismatch scores and the gap "
                         f"costs; do not also pass {', '.join(given)}")
    return PRESETS[preset.lower()]


def blast_to_gap_costs(gap_open: int, gap_extend: int) -> tuple[int, int]:
    """Convert BLAST-style gap costs (a gap of length k costs open + k*extend).

    BLAST's ``-gapopen 11 -gapextend 1`` is ``gap_open=12, gap_extend=1`` here.

    Examples
    --------
    >>> blast_to_gap_costs(11, 1)
    (12, 1)
    """
    return int(gap_open) + int(gap_extend), int(gap_extend)
