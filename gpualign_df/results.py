"""Builds the result frame (fixed column names of DESIGN.md §2) from raw engine columns."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
import pyarrow as pa

from .arrays import AlignmentArrays

try:  # pandas >= 3: a frame from its columns as blocks, none of them inspected again
    from pandas.api.internals import create_dataframe_from_blocks
except ImportError:  # pragma: no cover (older pandas: the constructor)
    create_dataframe_from_blocks = None

COORDINATES = ("query_start", "query_end", "target_start", "target_end")
STATISTICS = ("matches", "mismatches", "gap_opens", "gaps", "length")
TRACEBACK_COLUMNS = ("query", "target", "score", *COORDINATES, "cigar", *STATISTICS, "identity")
SCORE_ONLY_COLUMNS = ("query", "target", "score", "query_end", "target_end")
#: The cigar column's dtype: strings whose missing value is ``pd.NA``.
CIGAR_DTYPE = pd.StringDtype("pyarrow")


def _nullable_int32(values: np.ndarray, valid: np.ndarray) -> pd.arrays.IntegerArray:
    """A column of its own (a copy, and a mask of its own: the frame takes both as they
    are, and a write to one column must not reach another)."""
    return _masked_array(pd.arrays.IntegerArray, np.array(values, dtype=np.int32), ~valid)


def _masked_array(kind, values: np.ndarray, mask: np.ndarray):
    """``kind(values, mask)`` (a pandas masked array taking both as they are), without
    the constructor's checks where :func:`_internals` found pandas' own maker works:
    ``values`` is 1-D of the kind's dtype and ``mask`` a bool array of its length, as
    the checks would require."""
    return kind._simple_new(values, mask) if _internals() is not None else kind(values, mask)


def cigar_strings(chars: np.ndarray, offsets: np.ndarray,
                  valid: np.ndarray) -> pd.arrays.ArrowStringArray:
    """CIGAR characters + offsets -> a pandas string array (no per-row Python work: the
    Arrow array is made from the buffers and taken as it is).

    The dtype is pandas' ``StringDtype`` with ``pd.NA`` as its missing value
    (:data:`CIGAR_DTYPE`), the missing value of every other result column (the default
    ``str`` dtype would show ``NaN``)."""
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.LargeStringArray.from_buffers(len(valid), pa.py_buffer(offsets.astype(np.int64)),
                                             pa.py_buffer(chars), bitmap)
    return pd.arrays.ArrowStringArray(pa.chunked_array([array]))


def empty_frame(traceback: bool, query_labels: pd.Index, target_labels: pd.Index,
                offset: bool = False) -> pd.DataFrame:
    """A zero-row result frame with the right columns and dtypes (``offset``: with GATK's
    offset column, as jobs with ``overhang`` have)."""
    nothing = np.zeros(0, dtype=np.int64)
    arrays = AlignmentArrays(valid=np.zeros(0, bool), score=np.zeros(0, np.int32),
                             query_end=np.zeros(0, np.int32), target_end=np.zeros(0, np.int32),
                             offset=np.zeros(0, np.int32) if offset else None)
    if traceback:
        arrays.query_start = arrays.target_start = np.zeros(0, np.int32)
        arrays.cigar_chars, arrays.cigar_offsets = np.zeros(0, np.uint8), np.zeros(1, np.int64)
        arrays.stats = {name: np.zeros(0, np.int32) for name in STATISTICS}
    return build_frame(arrays, query_labels, target_labels, nothing, nothing)


def build_frame(arrays: AlignmentArrays, query_labels: pd.Index, target_labels: pd.Index,
                pair_query: np.ndarray, pair_target: np.ndarray) -> pd.DataFrame:
    """Assemble the pandas result frame, one row per pair, in pair order.

    ``query``/``target`` hold ``query_labels[pair_query]`` / ``target_labels[pair_target]``;
    rows whose pair had a null sequence hold nulls everywhere else. The frame takes the
    columns built here, each an array of its own, without copying them again.
    """
    valid = arrays.valid
    columns: dict[str, object] = {
        "query": _labels(query_labels, pair_query),
        "target": _labels(target_labels, pair_target),
        "score": _nullable_int32(arrays.score, valid),
    }
    if arrays.cigar_chars is None:
        columns["query_end"] = _nullable_int32(arrays.query_end, valid)
        columns["target_end"] = _nullable_int32(arrays.target_end, valid)
        return _with_offset(columns, arrays)
    for name in COORDINATES:
        columns[name] = _nullable_int32(getattr(arrays, name), valid)
    columns["cigar"] = cigar_strings(arrays.cigar_chars, arrays.cigar_offsets, valid)
    for name in STATISTICS:
        columns[name] = _nullable_int32(arrays.stats[name], valid)
    length = arrays.stats["length"]
    identity = np.divide(arrays.stats["matches"], length, out=np.zeros(len(valid)),
                         where=length > 0)
    columns["identity"] = _masked_array(pd.arrays.FloatingArray, identity, ~valid)
    return _with_offset(columns, arrays)


def _labels(labels: pd.Index, rows: np.ndarray):
    """``labels.take(rows)``; of a ``RangeIndex``, its values (int64) without an Index."""
    if isinstance(labels, pd.RangeIndex):
        return labels.start + labels.step * np.asarray(rows, dtype=np.int64)
    return labels.take(rows)


def _with_offset(columns: dict, arrays: AlignmentArrays) -> pd.DataFrame:
    """The frame of ``columns``, with GATK's ``offset`` last where the job has one."""
    if arrays.offset is not None:
        columns["offset"] = _nullable_int32(arrays.offset, arrays.valid)
    return frame_of(columns, len(arrays.valid))


def frame_of(columns: dict, rows: int) -> pd.DataFrame:
    """A frame of ``rows`` rows (a ``RangeIndex``) holding ``columns`` as they are: Index
    objects (the labels) and arrays of their own, none shared.

    Every column becomes a block of its own, as ``pd.DataFrame(columns, copy=False)`` makes
    them, without the constructor's inference and checks, which cost more than the rest of
    a small job's frame (:func:`pandas.api.internals.create_dataframe_from_blocks`; the
    constructor on a pandas without it).

    Examples
    --------
    >>> frame_of({"query": pd.Index(["a", "b"]), "score": pd.array([3, None], "Int32")}, 2)
      query  score
    0     a      3
    1     b   <NA>
    """
    index = pd.RangeIndex(rows)
    if create_dataframe_from_blocks is None:
        return pd.DataFrame(columns, index=index, copy=False)
    blocks = []
    for values in columns.values():
        if isinstance(values, pd.Index):
            values = values.to_numpy() if isinstance(values.dtype, np.dtype) else values.array
        if isinstance(values, np.ndarray):  # a numpy block is 2-D: (columns, rows)
            values = values.reshape(1, -1)
        blocks.append(values)
    # a view of the names' Index built once (making it infers its dtype, which costs more
    # than the rest of a small frame); a view has a name of its own
    names = _column_names(tuple(columns)).view()
    internals = _internals()
    if internals is not None and all(map(_plain_block, blocks)):
        return internals(blocks, index, names)
    return _public_frame(blocks, index, names)


def _public_frame(blocks: list, index: pd.Index, names: pd.Index) -> pd.DataFrame:
    """The frame of ``blocks`` (one column each, in order) through pandas' public
    :func:`~pandas.api.internals.create_dataframe_from_blocks`."""
    return create_dataframe_from_blocks(
        [(values, np.array([place])) for place, values in enumerate(blocks)], index=index,
        columns=names)


def _frame_of_blocks(new_block, placement, manager):
    """A maker of a frame from 2-D numpy or extension arrays, a block each, through
    pandas' internals (``new_block``, ``BlockPlacement``, ``BlockManager``): what
    :func:`pandas.api.internals.create_dataframe_from_blocks` does, without checking
    each block's shape and placement again, which costs as much as the rest of a small
    frame; the blocks here are one column each, in order, of the index's length."""
    def make(blocks: list, index: pd.Index, names: pd.Index) -> pd.DataFrame:
        made = tuple(new_block(values, placement(slice(place, place + 1)), ndim=2)
                     for place, values in enumerate(blocks))
        frame_manager = manager(made, [names, index], verify_integrity=False)
        return pd.DataFrame._from_mgr(frame_manager, axes=frame_manager.axes)
    return make


#: Column arrays :func:`_frame_of_blocks` takes as they are (a block each of its own kind,
#: with no conversion on the way): the result columns, and labels of numbers, booleans,
#: objects and strings. Others (dates, periods, categories, ...) take the public path,
#: which converts them as a frame's constructor does.
_PLAIN_KINDS = frozenset("biufO")
_PLAIN_ARRAYS = (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray,
                 pd.arrays.ArrowStringArray, pd.arrays.StringArray)


def _plain_block(values) -> bool:
    """Whether :func:`_frame_of_blocks` takes ``values`` (see :data:`_PLAIN_ARRAYS`)."""
    if isinstance(values, np.ndarray):
        return values.dtype.kind in _PLAIN_KINDS
    return type(values) in _PLAIN_ARRAYS


@lru_cache(maxsize=1)
def _internals():
    """:func:`_frame_of_blocks`'s maker where this pandas has the internals it uses and
    they make, on a frame of every column kind (numpy labels, strings, nullable integers
    and floats; masked arrays through ``_simple_new``), the frame its public
    :func:`~pandas.api.internals.create_dataframe_from_blocks` makes; else None (the
    public path). Checked once, on the first frame."""
    if create_dataframe_from_blocks is None:
        return None
    try:
        from pandas._libs.internals import BlockPlacement
        from pandas.core.internals.blocks import new_block
        from pandas.core.internals.managers import BlockManager

        make = _frame_of_blocks(new_block, BlockPlacement, BlockManager)
        mask = np.array([False, True])
        blocks = [np.array([[3, 4]]), pd.array(["a", None], dtype=CIGAR_DTYPE),
                  pd.arrays.IntegerArray._simple_new(np.array([1, 2], np.int32), mask.copy()),
                  pd.arrays.FloatingArray._simple_new(np.array([0.5, 1.0]), mask.copy())]
        index, names = pd.RangeIndex(2), pd.Index(["a", "b", "c", "d"])
        made, public = make(blocks, index, names), _public_frame(blocks, index, names)
        made._mgr._verify_integrity()
        same = made.equals(public) and made.dtypes.equals(public.dtypes)
    except (ImportError, AttributeError, TypeError, ValueError, AssertionError):
        return None
    return make if same else None


@lru_cache(maxsize=64)
def _column_names(names: tuple) -> pd.Index:
    """The Index of these column names (shared: only views of it leave here)."""
    return pd.Index(names)
