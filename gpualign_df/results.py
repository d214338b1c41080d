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


def _masked_array(kind, values: np.ndarray, mask: np.ndarray):
    """``kind(values, mask)`` (a pandas masked array taking both as they are), without
    the constructor's checks where :func:`_internals` found pandas' own maker works:
    ``values`` is 1-D of the kind's dtype and ``mask`` a bool array of its length, as
    the checks would require."""
    return kind._simple_new(values, mask) if _internals() is not None else kind(values, mask)


def cigar_strings(chars: np.ndarray, offsets: np.ndarray, valid: np.ndarray,
                  all_valid: bool | None = None) -> pd.arrays.ArrowStringArray:
    """CIGAR characters + offsets -> a pandas string array (no per-row Python work: the
    Arrow array is made from the buffers and taken as it is); ``all_valid``: whether
    ``valid`` is all True, where the caller knows.

    The dtype is pandas' ``StringDtype`` with ``pd.NA`` as its missing value
    (:data:`CIGAR_DTYPE`), the missing value of every other result column (the default
    ``str`` dtype would show ``NaN``)."""
    if all_valid is None:
        all_valid = bool(valid.all())
    bitmap = None if all_valid else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.LargeStringArray.from_buffers(
        len(valid), pa.py_buffer(np.asarray(offsets, dtype=np.int64)), pa.py_buffer(chars),
        bitmap)
    return pd.arrays.ArrowStringArray(pa.chunked_array([array]), dtype=CIGAR_DTYPE)


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
    """Assemble the pandas result frame, one row per pair, in pair order
    (:class:`ResultFrame` in one go).

    ``query``/``target`` hold ``query_labels[pair_query]`` / ``target_labels[pair_target]``;
    rows whose pair had a null sequence hold nulls everywhere else. The frame takes the
    columns built here, each an array of its own, without copying them again.
    """
    return ResultFrame(arrays.valid, query_labels, target_labels, pair_query, pair_target,
                       traceback=arrays.cigar_chars is not None,
                       offset=arrays.offset is not None).finish(arrays)


class ResultFrame:
    """A job's result frame in two steps: :meth:`prepare` builds what does not depend on
    the results (the label columns, every other column's arrays and null masks, their
    blocks), :meth:`finish` copies the results in and returns the frame. A caller whose
    engine works on the device prepares while it waits (most of a small job's frame
    costs no time then); :meth:`finish` prepares first where nobody did.

    ``valid``: the rows whose pair had no null sequence (the others are null but for the
    labels); ``traceback``: the frame of a traceback job (else the score-only columns);
    ``offset``: with GATK's offset column last.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from gpualign_df.arrays import AlignmentArrays
    >>> frame = ResultFrame(np.array([True, False]), pd.Index(["a", "b"]), pd.RangeIndex(2),
    ...                     np.arange(2), np.arange(2), traceback=False)
    >>> frame.prepare()       # (while the engine works)
    >>> ends = np.array([4, 0], np.int32)
    >>> frame.finish(AlignmentArrays(valid=np.array([True, False]), score=np.array([9, 0]),
    ...                              query_end=ends, target_end=ends))
      query  target  score  query_end  target_end
    0     a       0      9          4           4
    1     b       1   <NA>       <NA>        <NA>
    """

    def __init__(self, valid: np.ndarray, query_labels: pd.Index, target_labels: pd.Index,
                 pair_query: np.ndarray, pair_target: np.ndarray, *, traceback: bool,
                 offset: bool = False) -> None:
        self.valid, self.traceback = valid, traceback
        self.labels = ((query_labels, pair_query), (target_labels, pair_target))
        names = TRACEBACK_COLUMNS if traceback else SCORE_ONLY_COLUMNS
        self.names = names + ("offset",) if offset else names
        # what prepare makes: the integer columns' values (None until then), identity's
        # values, the columns in order (None for the CIGAR's), their blocks
        self.integers: dict[str, np.ndarray] | None = None
        self.identity = np.zeros(0)
        self.columns: list = []
        self.blocks: list | None = None
        self.internals = self.index = self.column_index = None
        self.all_valid: bool | None = None

    def prepare(self) -> None:
        """Build the label columns, the arrays and masks of the others and, where
        :func:`_internals` works, their blocks: all but the CIGAR column's."""
        if self.integers is not None:
            return
        rows = len(self.valid)
        self.all_valid = bool(self.valid.all())
        # (written now, while the engine works: their pages are faulted in here, not in
        # finish's copies)
        self.integers = {name: np.full(rows, 0, np.int32) for name in self.names
                         if name not in ("query", "target", "cigar", "identity")}
        columns: dict[str, object] = {}
        for name, (labels, pairs) in zip(("query", "target"), self.labels):
            columns[name] = _labels(labels, pairs)
        # each column a mask of its own: a write to one column must not reach another
        for name, values in self.integers.items():
            columns[name] = _masked_array(pd.arrays.IntegerArray, values, ~self.valid)
        if self.traceback:
            self.identity = np.full(rows, 0.0)  # (0 where an alignment has no columns)
            columns["identity"] = _masked_array(pd.arrays.FloatingArray, self.identity,
                                                ~self.valid)
            columns["cigar"] = None  # (finish makes it)
        self.columns = [columns[name] for name in self.names]
        # (a view of the names' Index made once: see frame_of)
        self.index, self.column_index = pd.RangeIndex(rows), _column_names(self.names).view()
        internals = _internals()
        values = [None if column is None else _column_values(column) for column in self.columns]
        self.internals = internals if internals is not None and all(
            _plain_block(column) for column in values if column is not None) else None
        self.blocks = None if self.internals is None else [
            None if column is None else self.internals.block(column, place)
            for place, column in enumerate(values)]

    def finish(self, arrays: AlignmentArrays) -> pd.DataFrame:
        """The frame, ``arrays`` (the engine's columns of these rows) copied in."""
        self.prepare()
        sources = integer_columns(arrays, self.traceback)
        if self.traceback:
            identity(arrays, self.identity)
        for name, values in self.integers.items():
            np.copyto(values, sources[name], casting="unsafe")
        columns, blocks = list(self.columns), self.blocks
        if self.traceback:
            place = self.names.index("cigar")
            columns[place] = cigar_strings(arrays.cigar_chars, arrays.cigar_offsets,
                                           self.valid, self.all_valid)
            if blocks is not None:
                blocks = list(blocks)
                blocks[place] = self.internals.block(columns[place], place)
        if blocks is None:  # (labels of other kinds, older pandas)
            return frame_of(dict(zip(self.names, columns)), len(self.valid))
        return self.internals.frame(blocks, self.index, self.column_index)


def integer_columns(arrays: AlignmentArrays, traceback: bool) -> dict[str, np.ndarray]:
    """The engine's integer result columns of ``arrays`` by frame column name (the
    coordinates, score and, with ``traceback``, the statistics; GATK's ``offset`` where
    the job has it)."""
    columns = {"score": arrays.score, "query_end": arrays.query_end,
               "target_end": arrays.target_end}
    if arrays.offset is not None:
        columns["offset"] = arrays.offset
    if traceback:
        columns.update(arrays.stats, query_start=arrays.query_start,
                       target_start=arrays.target_start)
    return columns


def identity(arrays: AlignmentArrays, out: np.ndarray) -> np.ndarray:
    """The identity column of traceback results into ``out`` (float64, a row each):
    matches over alignment length, 0 where an alignment has no columns."""
    length = arrays.stats["length"]
    return np.divide(arrays.stats["matches"], length, out=out, where=length > 0)


def _labels(labels: pd.Index, rows: np.ndarray):
    """``labels.take(rows)``; of a ``RangeIndex``, its values (int64) without an Index."""
    if isinstance(labels, pd.RangeIndex):
        return labels.start + labels.step * np.asarray(rows, dtype=np.int64)
    return labels.take(rows)


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
    values = [_column_values(column) for column in columns.values()]
    # a view of the names' Index built once (making it infers its dtype, which costs more
    # than the rest of a small frame); a view has a name of its own
    names = _column_names(tuple(columns)).view()
    internals = _internals()
    if internals is not None and all(map(_plain_block, values)):
        return internals.frame([internals.block(column, place)
                                for place, column in enumerate(values)], index, names)
    return _public_frame(values, index, names)


def _column_values(values):
    """A column as a block takes it: an Index's values (numpy or extension array), a
    numpy array 2-D (a block's shape: columns, rows)."""
    if isinstance(values, pd.Index):
        values = values.to_numpy() if isinstance(values.dtype, np.dtype) else values.array
    return values.reshape(1, -1) if isinstance(values, np.ndarray) else values


def _public_frame(blocks: list, index: pd.Index, names: pd.Index) -> pd.DataFrame:
    """The frame of ``blocks`` (one column each, in order) through pandas' public
    :func:`~pandas.api.internals.create_dataframe_from_blocks`."""
    return create_dataframe_from_blocks(
        [(values, np.array([place])) for place, values in enumerate(blocks)], index=index,
        columns=names)


class _Internals:
    """A frame from 2-D numpy or extension arrays, a block each, through pandas'
    internals (``new_block``, ``BlockPlacement``, ``BlockManager``): what
    :func:`pandas.api.internals.create_dataframe_from_blocks` does, without checking
    each block's shape and placement again, which costs as much as the rest of a small
    frame; the blocks here are one column each, in order, of the index's length."""

    def __init__(self, new_block, placement, manager) -> None:
        self.new_block, self.placement, self.manager = new_block, placement, manager

    def block(self, values, place: int):
        """The block of column ``place`` holding ``values``."""
        return self.new_block(values, self.placement(slice(place, place + 1)), ndim=2)

    def frame(self, blocks: list, index: pd.Index, names: pd.Index) -> pd.DataFrame:
        """The frame of ``blocks`` (:meth:`block`'s, in column order)."""
        frame_manager = self.manager(tuple(blocks), [names, index], verify_integrity=False)
        return pd.DataFrame._from_mgr(frame_manager, axes=frame_manager.axes)


#: Column arrays :class:`_Internals` takes as they are (a block each of its own kind,
#: with no conversion on the way): the result columns, and labels of numbers, booleans,
#: objects and strings. Others (dates, periods, categories, ...) take the public path,
#: which converts them as a frame's constructor does.
_PLAIN_KINDS = frozenset("biufO")
_PLAIN_ARRAYS = (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray,
                 pd.arrays.ArrowStringArray, pd.arrays.StringArray)


def _plain_block(values) -> bool:
    """Whether :class:`_Internals` takes ``values`` (see :data:`_PLAIN_ARRAYS`)."""
    if isinstance(values, np.ndarray):
        return values.dtype.kind in _PLAIN_KINDS
    return type(values) in _PLAIN_ARRAYS


@lru_cache(maxsize=1)
def _internals():
    """:class:`_Internals` where this pandas has the internals it uses and
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

        internals = _Internals(new_block, BlockPlacement, BlockManager)
        mask = np.array([False, True])
        blocks = [np.array([[3, 4]]), pd.array(["a", None], dtype=CIGAR_DTYPE),
                  pd.arrays.IntegerArray._simple_new(np.array([1, 2], np.int32), mask.copy()),
                  pd.arrays.FloatingArray._simple_new(np.array([0.5, 1.0]), mask.copy())]
        index, names = pd.RangeIndex(2), pd.Index(["a", "b", "c", "d"])
        made = internals.frame([internals.block(values, place)
                                for place, values in enumerate(blocks)], index, names)
        public = _public_frame(blocks, index, names)
        made._mgr._verify_integrity()
        same = made.equals(public) and made.dtypes.equals(public.dtypes)
    except (ImportError, AttributeError, TypeError, ValueError, AssertionError):
        return None
    return internals if same else None


@lru_cache(maxsize=64)
def _column_names(names: tuple) -> pd.Index:
    """The Index of these column names (shared: only views of it leave here)."""
    return pd.Index(names)
