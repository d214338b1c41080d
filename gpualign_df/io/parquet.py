"""Parquet output: the columns of the result frames through pyarrow, one row group per
frame written, the alignment mode in the schema metadata (``gpualign_df.mode``)."""

from __future__ import annotations

from typing import IO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .encoder import Encoder, named_frame
from .output import Destination


class ParquetEncoder(Encoder):
    """pyarrow's ParquetWriter: the schema of the first frame, one row group per frame."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.queries.require(["name"])
        self.targets.require(["name"])
        self.schema: pa.Schema | None = None
        self.writer: pq.ParquetWriter | None = None

    def prepare(self, frame: pd.DataFrame) -> pa.Table:
        named = named_frame(frame, self.queries, self.targets)
        table = pa.Table.from_pandas(named, preserve_index=False)
        if self.schema is None:
            fields = [self._typed(field) for field in table.schema]
            metadata = dict(table.schema.metadata or {})
            metadata[b"gpualign_df.mode"] = self.mode.encode()
            schema = pa.schema(fields, metadata=metadata)
        else:
            schema = self.schema
            if table.schema.names != schema.names:
                raise ValueError(f"every frame written to one Parquet file needs the same "
                                 f"columns; the first had {schema.names}, this one has "
                                 f"{table.schema.names}")
        try:
            table = table.cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise ValueError(f"this frame's columns cannot take the Parquet file's schema "
                             f"(fixed by the first frame): {error}") from error
        if self.schema is None:
            self.schema = schema
        return table

    def _typed(self, field: pa.Field) -> pa.Field:
        """An empty first frame's object columns have arrow type null: give them the type
        later frames will have, so that those cast."""
        if not pa.types.is_null(field.type):
            return field
        if field.name in ("query", "target"):
            side = self.queries if field.name == "query" else self.targets
            index = side.frame.index
            kind = pa.array(index[:1024].to_numpy(), from_pandas=True).type if len(index) \
                else pa.int64()
            return field.with_type(kind if not pa.types.is_null(kind) else pa.int64())
        return field.with_type(pa.large_string())

    def begin(self, stream: IO[bytes], destination: Destination) -> None:
        super().begin(stream, destination)
        assert self.schema is not None
        self.writer = pq.ParquetWriter(destination.raw, self.schema)

    def emit(self, destination: Destination, table: pa.Table) -> None:
        assert self.writer is not None
        if table.num_rows:
            write_row_group(self.writer, table)

    def finish(self, destination: Destination) -> None:
        assert self.writer is not None
        self.writer.close()  # the footer; the commit then flushes and renames
        self.writer = None

    def abandon(self) -> None:
        # The file is being discarded.  Close the writer here (its footer goes to the
        # temporary file, removed next) rather than leave that to its finalizer, which
        # would write after the handle is closed and report errors nobody can catch.
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the output is discarded anyway
                pass


def write_row_group(writer: pq.ParquetWriter, table: pa.Table) -> None:
    """Write one frame's table as one row group (every row group of the file passes
    here)."""
    writer.write_table(table, row_group_size=table.num_rows)
