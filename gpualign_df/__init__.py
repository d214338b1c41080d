"""gpualign_df: pairwise sequence alignment with traceback as dataframe operations.

Importing the package registers the ``.aln`` accessor on pandas Series (and on Dask
Series when Dask is installed).
"""

from .api import align
from .scoring import blast_to_gap_costs, make_scoring, parse_mode
from .accessor import series as _series_accessor  # noqa: F401  (registers .aln)
from .cluster import cluster  # imports distributed / dask_cuda only when called

try:  # Dask is optional (the "dask" extra): registers .aln on Dask Series
    from .accessor import dask as _dask_accessor  # noqa: F401
except ImportError:
    pass

__all__ = ["align", "make_scoring", "parse_mode", "blast_to_gap_costs", "cluster"]
__version__ = "0.1.0"
