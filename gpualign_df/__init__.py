"""gpualign_df: pairwise sequence alignment with traceback as dataframe operations.

Importing the package registers the ``.aln`` accessor on pandas Series, on Dask Series and
``.align`` / ``.aln`` on cuDF Series, each as soon as that library is imported (at once
where it already is): importing :mod:`gpualign_df` itself imports none of pandas, pyarrow,
numba, Dask or cuDF, so that ``import gpualign_df`` and ``gpualign --help`` start at once.
The public functions are imported on first use (``gpualign_df.align`` imports the engine).

Examples
--------
>>> import gpualign_df, pandas as pd       # either order registers .aln
>>> pd.Series(["ACGT", "ACGA"]).aln.pairwise(match=1, mismatch=-1)["score"].tolist()
[3]
"""

from . import libraries as _libraries
# cluster.py imports nothing beyond the standard library at module level; imported here
# (not on first use) so that the name ``gpualign_df.cluster`` is always the function: the
# import system binds a package's attribute to a submodule when it first loads it, which
# would hide a lazily provided function of the same name.
from .cluster import cluster

__all__ = ["align", "align_batches", "database", "read_database", "Database", "make_scoring",
           "parse_mode", "blast_to_gap_costs", "cluster", "view", "dot_plot"]
__version__ = "0.1.0"

#: Public names provided on first use, by the module that defines them.
_LAZY = {"align": "api", "align_batches": "api", "database": "databases",
         "read_database": "databases", "Database": "databases", "make_scoring": "scoring",
         "parse_mode": "scoring", "blast_to_gap_costs": "scoring", "view": "views",
         "dot_plot": "dotplot"}


# PEP 562: a public function's module is imported when the function is first asked for
__getattr__, __dir__ = _libraries.lazy_attributes(__name__, _LAZY, globals())


def _register_pandas(module: object) -> None:
    from .accessor import series

    series.register_pandas()


def _register_dask(module: object) -> None:
    from .dask import accessor  # noqa: F401  (registers .aln on Dask Series)


def _register_cudf(module: object) -> None:
    from .accessor import series

    series.register_cudf()


_libraries.when_imported("pandas", _register_pandas)
_libraries.when_imported("dask.dataframe", _register_dask)
_libraries.when_imported("cudf", _register_cudf)
