"""PAF output: one line per result row with an aligned column (PAF has no unmapped
records); soft clips are left out of the ``cg:Z`` CIGAR."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .encoder import AlignedRowsEncoder
from .text import as_text, lit, prefix, text_lines


class PafEncoder(AlignedRowsEncoder):
    """The 12 standard PAF columns, then ``AS:i:<score>`` and ``cg:Z:<cigar>``."""

    format_name = "paf"

    def record_lines(self, part: pd.DataFrame, query_pos: np.ndarray,
                     target_pos: np.ndarray) -> pa.Array:
        cigar = pc.replace_substring_regex(as_text(part["cigar"]), r"\d+S", "")
        fields = [
            self.queries.names.take(pa.array(query_pos)),
            as_text(self.queries.lengths[query_pos]),
            as_text(part["query_start"]), as_text(part["query_end"]),
            lit("+"),
            self.targets.names.take(pa.array(target_pos)),
            as_text(self.targets.lengths[target_pos]),
            as_text(part["target_start"]), as_text(part["target_end"]),
            as_text(part["matches"]), as_text(part["length"]),
            lit("255"),
            prefix("AS:i:", as_text(part["score"])),
            prefix("cg:Z:", cigar),
        ]
        return text_lines(fields)
