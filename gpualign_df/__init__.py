"""gpualign_df: pairwise sequence alignment with traceback as dataframe operations.

Importing the package registers the ``.aln`` accessor on pandas Series.
"""

from .api import align
from .scoring import blast_to_gap_costs, make_scoring, parse_mode
from .accessor import series as _series_accessor  # noqa: F401  (registers .aln)

__all__ = ["align", "make_scoring", "parse_mode", "blast_to_gap_costs"]
__version__ = "0.1.0"
