"""Output format names: the formats the writers know, and the format of a file name."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["FORMATS", "HOWS", "TEXT_FORMATS", "format_from_path", "parse_format"]

#: Output formats understood by :func:`~gpualign_df.io.write_results` and
#: :func:`~gpualign_df.io.open_results`.
FORMATS: tuple[str, ...] = ("tsv", "parquet", "sam", "paf", "blast6", "pairwise")

#: Job shapes (``how``) the writers accept; they decide BLAST's search space.
HOWS: tuple[str, ...] = ("rowwise", "pairwise", "search")

#: The formats written as lines of text, which a ``.gz`` name compresses.
TEXT_FORMATS = frozenset({"tsv", "sam", "paf", "blast6", "pairwise"})

_EXTENSIONS: dict[str, str] = {
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".sam": "sam",
    ".paf": "paf",
    ".blast6": "blast6",
    ".m8": "blast6",
    ".txt": "pairwise",
}
_FORMAT_ALIASES: dict[str, str] = {**{f: f for f in FORMATS}, "m8": "blast6", "blast": "blast6"}


def format_from_path(path: str | os.PathLike[str]) -> str:
    """Infer the output format of :func:`~gpualign_df.io.write_results` from a file name.

    Parameters
    ----------
    path : str or os.PathLike
        The output path.  Recognised extensions (case-insensitive): ``.tsv`` -> ``"tsv"``,
        ``.parquet`` -> ``"parquet"``, ``.sam`` -> ``"sam"``, ``.paf`` -> ``"paf"``,
        ``.blast6`` and ``.m8`` -> ``"blast6"``, ``.txt`` -> ``"pairwise"``.  The text
        formats may carry a further ``.gz`` (``reads.tsv.gz``, ``hits.paf.gz``), in which
        case the output is gzip-compressed.

    Returns
    -------
    str
        One of :data:`FORMATS`.

    Raises
    ------
    ValueError
        If the extension is not recognised; the message lists the supported ones.

    Examples
    --------
    >>> format_from_path("hits.tsv.gz"), format_from_path("hits.M8")
    ('tsv', 'blast6')
    """
    name = Path(os.fspath(path)).name.lower()
    compressed = name.endswith(".gz")
    stem = name[:-3] if compressed else name
    fmt = _EXTENSIONS.get(os.path.splitext(stem)[1])
    if fmt is None or (compressed and fmt not in TEXT_FORMATS):
        supported = ", ".join([*_EXTENSIONS, ".tsv.gz", ".sam.gz", ".paf.gz", ".blast6.gz",
                               ".m8.gz", ".txt.gz"])
        raise ValueError(f"cannot infer the output format of {os.fspath(path)!r}; "
                         f"supported extensions: {supported} (or pass format= one of "
                         f"{', '.join(FORMATS)})")
    return fmt


def parse_format(format: str) -> str:  # noqa: A002
    """The format named by `format` (case-insensitive; ``"m8"`` and ``"blast"`` are
    ``"blast6"``).

    Raises
    ------
    ValueError
        If the name is not one of :data:`FORMATS` or an alias.
    """
    fmt = _FORMAT_ALIASES.get(str(format).lower())
    if fmt is None:
        raise ValueError(f"unknown output format {format!r}; supported: {', '.join(FORMATS)}")
    return fmt
