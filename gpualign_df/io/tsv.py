"""TSV output: every column of the result frames, with the names of the sequences."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from .encoder import Encoder, check_text, named_frame
from .output import Destination
from .text import as_text, text_lines, write_in_blocks


class TsvEncoder(Encoder):
    """Every column, a header line from the first frame, nulls as empty fields."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name"])
        self.targets.require(["name"])
        self.queries.check_names()
        self.targets.check_names()
        self.columns: list[str] | None = None

    def prepare(self, frame: pd.DataFrame) -> pd.DataFrame:
        named = named_frame(frame, self.queries, self.targets)
        columns = [str(c) for c in named.columns]
        if self.columns is None:
            if any(ch in name for name in columns for ch in "\t\n\r"):
                raise ValueError("column names must not contain tabs or line breaks")
        elif columns != self.columns:
            raise ValueError(f"every frame written to one TSV file needs the same columns; "
                             f"the first had {self.columns}, this one has {columns}")
        labelled = named.set_axis(frame.index)  # errors name the caller's row labels
        for name in named.columns:
            if named[name].dtype == object or pd.api.types.is_string_dtype(named[name]):
                check_text(labelled, name)
        return named

    def emit(self, destination: Destination, named: pd.DataFrame) -> None:
        assert self.stream is not None
        if self.columns is None:
            self.columns = [str(c) for c in named.columns]
            self.stream.write(("\t".join(self.columns) + "\n").encode())

        def block_lines(rows: slice) -> pa.Array:
            part = named.iloc[rows]
            return text_lines([as_text(part[c]) for c in part.columns])

        write_in_blocks(self.stream, len(named), self.chunk_rows, block_lines)
