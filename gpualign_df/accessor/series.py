"""The ``.aln`` accessor on pandas Series (pandas' own ``Series.align`` is left alone), and
``.align`` / ``.aln`` on cuDF Series (cuDF has no ``align``).

Importing this module imports neither pandas, cuDF nor the engine: :mod:`gpualign_df`
calls :func:`register_pandas` and :func:`register_cudf` once each library is imported, and
each method imports :func:`gpualign_df.align` when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class SeriesAlignAccessor:
    """Alignment jobs on a Series of sequences: ``series.aln.rowwise/pairwise/search``.

    Every method takes the keyword options of :func:`gpualign_df.align` (``mode``,
    ``matrix``, ``match``, ``mismatch``, ``gap_open``, ``gap_extend``, ``preset``, ``free_ends``,
    ``traceback``, ``cigar_style``, ``clip``, ``backend``, ``progress``,
    ``traceback_memory``).

    Examples
    --------
    >>> import pandas as pd, gpualign_df
    >>> reads = pd.Series(["ACGTTGCA", "ACGTAGCA"], index=["r1", "r2"])
    >>> reads.aln.pairwise(mode="nw", match=1, mismatch=-1, gap_open=2, gap_extend=1)[
    ...     ["query", "target", "score", "cigar"]].values.tolist()
    [['r1', 'r2', 6, '4=1X3=']]
    """

    def __init__(self, series: pd.Series) -> None:
        self._series = series

    def rowwise(self, other: pd.Series, **options: Any) -> pd.DataFrame:
        """Align row k of this Series against row k of ``other`` (by position).

        Examples
        --------
        >>> import pandas as pd, gpualign_df
        >>> reads = pd.Series(["ACGT", None], index=[10, 11])
        >>> mates = pd.Series(["ACTT", "AC"], index=[10, 11])
        >>> reads.aln.rowwise(mates, match=2, mismatch=-1, gap_open=3, gap_extend=1)[
        ...     ["query", "score", "cigar"]].values.tolist()
        [[10, 5, '2=1X1='], [11, <NA>, <NA>]]
        """
        from ..api import align

        return align(self._series, other, how="rowwise", **options)

    def pairwise(self, **options: Any) -> pd.DataFrame:
        """Align all pairs i < j within this Series (i major).

        Examples
        --------
        >>> import pandas as pd, gpualign_df
        >>> len(pd.Series(["ACGT", "ACGA", "TCGA"]).aln.pairwise(match=1, mismatch=-1))
        3
        """
        from ..api import align

        return align(self._series, how="pairwise", **options)

    def search(self, database: pd.Series, top_k: int | None = None, **options: Any) -> pd.DataFrame:
        """Align every sequence against every ``database`` sequence, best first per query.

        Examples
        --------
        >>> import pandas as pd, gpualign_df
        >>> queries = pd.Series(["ACGTACGT"], index=["q"])
        >>> db = pd.Series(["TTTT", "ACGTACGA", "ACGTACGT"], index=["a", "b", "c"])
        >>> queries.aln.search(db, top_k=2, match=1, mismatch=-2)[["target", "score"]].values.tolist()
        [['c', 8], ['b', 7]]
        """
        from ..api import align

        return align(self._series, database, how="search", top_k=top_k, **options)


def register_pandas() -> None:
    """Register ``.aln`` on ``pandas.Series`` (imports pandas); :mod:`gpualign_df` calls it
    once pandas is imported. pandas' own ``Series.align`` stays as it is."""
    import pandas as pd

    pd.api.extensions.register_series_accessor("aln")(SeriesAlignAccessor)


def register_cudf() -> None:
    """Register ``.align`` and ``.aln`` on ``cudf.Series`` (imports cuDF, which has no
    ``align`` of its own); :mod:`gpualign_df` calls it once cuDF is imported."""
    import cudf

    for name in ("align", "aln"):
        cudf.api.extensions.register_series_accessor(name)(SeriesAlignAccessor)
