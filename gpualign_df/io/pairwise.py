"""Pairwise output: every result row in the classic block layout of
:func:`gpualign_df.view` (a header, then query, match and target lines), rows apart by a
blank line, under the names of the sequences; a file is the text of one view of all its
rows."""

from __future__ import annotations

import pandas as pd

from ..views import AlignmentView, aligned_rows, sequence_texts
from .encoder import Encoder, require_traceback
from .output import Destination

#: Alignment columns a block of the file.
WIDTH = 60


class PairwiseEncoder(Encoder):
    """Text of :class:`gpualign_df.views.AlignmentView`, written a block of rows at a
    time (the bytes do not depend on the block size)."""

    format_name = "pairwise"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name", "seq"])
        self.targets.require(["name", "seq"])
        if self.scoring is None:
            raise ValueError("pairwise output needs the scoring the results were computed "
                             "with (scoring=make_scoring(...)) for its match lines")
        self.rows_written = 0

    def prepare(self, frame: pd.DataFrame) -> dict[str, object]:
        require_traceback(frame, self.format_name)
        return {"frame": frame.reset_index(drop=True),
                "query_pos": self.queries.positions(frame["query"]),
                "target_pos": self.targets.positions(frame["target"])}

    def emit(self, destination: Destination, prepared: dict[str, object]) -> None:
        assert self.stream is not None and self.scoring is not None
        frame = prepared["frame"]
        names = (self.queries.frame["name"], self.targets.frame["name"])
        sequences = (self.queries.frame["seq"], self.targets.frame["seq"])
        for start in range(0, len(frame), self.chunk_rows):
            part = frame.iloc[start:start + self.chunk_rows]
            query_pos = prepared["query_pos"][start:start + len(part)]
            target_pos = prepared["target_pos"][start:start + len(part)]
            rows = aligned_rows(part, sequence_texts(sequences[0].iloc[query_pos]),
                                sequence_texts(sequences[1].iloc[target_pos]), self.scoring,
                                names[0].iloc[query_pos].tolist(),
                                names[1].iloc[target_pos].tolist())
            text = AlignmentView(rows, WIDTH).text()
            self.stream.write((("\n" if self.rows_written else "") + text).encode())
            self.rows_written += len(part)
