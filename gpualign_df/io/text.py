"""Arrow string assembly shared by the text writers (TSV, SAM, PAF, BLAST tabular).

Lines are built column-wise with ``pyarrow.compute`` string kernels, never per row in
Python, and written as one buffer per block of rows, so that frames of millions of rows are
written at I/O speed.  Every array here is ``large_string`` (:data:`STR`): 64-bit offsets,
so one block may hold more than 2 GiB of text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

#: The arrow type of every string array the writers build.
STR = pa.large_string()


def lit(text: str) -> pa.Scalar:
    """`text` as a :data:`STR` scalar, to broadcast against arrays."""
    return pa.scalar(text, STR)


def as_text(values: pd.Series | np.ndarray | pa.Array) -> pa.Array:
    """Any column -> arrow large_string array (nulls stay null)."""
    if isinstance(values, pa.ChunkedArray):
        array = values.combine_chunks()
    elif isinstance(values, pa.Array):
        array = values
    else:
        try:
            array = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            series = pd.Series(values)
            array = pa.array(series.astype(str).where(series.notna(), None), type=STR)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != STR:
        array = pc.cast(array, STR)
    return array


def suffix(values: np.ndarray, ending: str, keep: np.ndarray) -> pa.Array:
    """``f"{v}{ending}"`` where `keep`, else ``""``."""
    joined = pc.binary_join_element_wise(as_text(values), lit(ending), lit(""))
    return pc.if_else(pa.array(keep), joined, lit(""))


def prefix(start: str, values: pa.Array) -> pa.Array:
    """``f"{start}{v}"`` for each value."""
    return pc.binary_join_element_wise(lit(start), values, lit(""))


def text_lines(fields: list[pa.Array | pa.Scalar], tail: pa.Array | None = None) -> pa.Array:
    """Join fields with tabs (nulls as empty fields), append optional `tail`
    (skipped where null), and end each line with a newline."""
    line = pc.binary_join_element_wise(*fields, lit("\t"), null_handling="replace",
                                       null_replacement="")
    if tail is not None:
        line = pc.binary_join_element_wise(line, tail, lit("\t"), null_handling="skip")
    return pc.binary_join_element_wise(line, lit(""), lit("\n"))


def joined_bytes(lines: pa.Array) -> bytes:
    """The characters of a :data:`STR` array, end to end, as bytes."""
    if len(lines) == 0:
        return b""
    _, offsets_buffer, data = lines.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=len(lines) + 1,
                            offset=lines.offset * 8)
    return bytes(memoryview(data)[offsets[0]:offsets[-1]])


def write_lines(fh: IO[bytes], lines: pa.Array) -> None:
    """Write a large_string array of newline-terminated lines in one call."""
    if len(lines) == 0:
        return
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    lines = lines.cast(STR)
    _, offsets_buffer, data = lines.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=len(lines) + 1,
                            offset=lines.offset * 8)
    fh.write(memoryview(data)[offsets[0]:offsets[-1]])


def write_in_blocks(fh: IO[bytes], rows: int, block_rows: int,
                    lines_of: Callable[[slice], pa.Array]) -> None:
    """Write ``lines_of(block)`` for each block of at most `block_rows` of `rows` rows, in
    order, each through :func:`write_lines`: the memory of the strings is bounded by one
    block, and the bytes are those of one block of all the rows."""
    for start in range(0, rows, block_rows):
        write_lines(fh, lines_of(slice(start, start + block_rows)))
