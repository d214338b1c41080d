"""cuDF in, cuDF out: strings read zero-copy from the cuDF column, encoded on the device,
aligned by the GPU engine, and the result frame (CIGAR strings included) built from device
buffers. Residues and CIGARs never visit the host; only lengths, null flags and the pair
plan (integers) do. A job of one small batch (a few hundred pairs of a few hundred
residues: GATK HaplotypeCaller's calls) is the exception: its few kilobytes of sequences
and results cross over to take the small-batch path (:func:`align_small_job`), whose one
launch costs a fraction of the device path's plan and launches.

Everything here imports cuDF lazily: the module loads on machines without it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from . import config, gpu
from .arrays import AlignmentArrays
from .databases import Database
from .encode import EncodedSequences, plain_label
from .engine import check_score_bound, codes_allocator, run_pairs
from .job import Job
from .libraries import is_cudf
from .pairs import best_first, pairwise_pairs, search_pairs
from .results import SCORE_ONLY_COLUMNS, TRACEBACK_COLUMNS, identity, integer_columns
from .gpu.launch import launch
from .gpu.memory import engine_allocations
from .gpu.small import small_batch
from .kernels.encoding import (ENCODE_WORD, NO_BAD_BYTE, SMALL_CODES, encode_column, pair_sizes,
                               word_layout)
from .scoring import Scoring


def as_cudf(values: Any):
    """A cuDF Series from a cuDF Series, a pandas Series or a list of str."""
    import cudf
    import pandas as pd

    if is_cudf(values):
        return values
    if isinstance(values, pd.Series):
        return cudf.from_pandas(values)
    return cudf.Series(list(values), dtype="str")


#: What :func:`new_summary` sets the summary to.
SUMMARY_START = np.array([NO_BAD_BYTE, NO_BAD_BYTE, 0, 0, 0, 0], np.int64)


def new_summary():
    """The device array :func:`encode_device` reports into: the first bad byte of the
    queries and of the targets (``NO_BAD_BYTE`` where none), their longest lengths, and
    whether each holds a code past ``SMALL_CODES - 1`` (1, else 0). A
    buffer kept between jobs (the caller holds ``gpu.DEVICE_LOCK``), set from a cached
    start by a copy on the device queued on the default stream, as the encodings are
    (no allocation, nothing from the host)."""
    import cupy

    start = gpu.device_table("summary", SUMMARY_START)
    summary = gpu.scratch_buffer("summary", len(start), np.int64)
    runtime = cupy.cuda.runtime
    runtime.memcpyAsync(summary.data.ptr, start.data.ptr, start.nbytes,
                        runtime.memcpyDeviceToDevice, 0)
    return summary


def string_buffers(series):
    """The pylibcudf column of a cuDF string Series, its offsets (CuPy, int32 or int64,
    ``rows + 1`` of them) and the whole characters buffer (CuPy uint8), without a copy.
    A sliced column's characters are ``chars[offsets[0]:offsets[-1]]``: its offsets stay
    absolute (no host read of the bounds). Raises ``ValueError`` for a column of
    anything but strings.

    The column is the one cuDF holds where its Series has one (:func:`_held_column`):
    its buffers are read by their pointers, in cuDF's read mode (no copy-on-write copy),
    and each CuPy array is made at once from a pointer, a type and a length."""
    import cupy
    import pylibcudf as plc

    column, held = _held_column(series)
    rows = column.size()
    if rows and column.type().id() != plc.TypeId.STRING:
        raise ValueError(f"sequences must be strings, got a cuDF column of {series.dtype}")
    if rows == 0 or column.num_children() == 0:
        return column, cupy.zeros(rows + 1, dtype=cupy.int64), cupy.zeros(0, dtype=cupy.uint8)
    child = column.child(0)
    width = cupy.int32 if child.type().id() == plc.TypeId.INT32 else cupy.int64
    data = column.data()
    if not held:  # spans with the CUDA array interface
        offsets = cupy.asarray(child.data()).view(width)[column.offset():
                                                         column.offset() + rows + 1]
        chars = cupy.asarray(data).view(cupy.uint8) if data is not None else \
            cupy.zeros(0, cupy.uint8)
        return column, offsets, chars
    device = gpu.current_device()
    offsets = _device_array(child.data(), width, column.offset(), rows + 1, device)
    chars = _device_array(data, cupy.uint8, 0, None, device) if data is not None else \
        cupy.zeros(0, cupy.uint8)
    return column, offsets, chars


def _held_column(series) -> tuple:
    """A cuDF Series' pylibcudf column as cuDF holds it, its buffers cuDF's own (each
    with a ``ptr``, read without a copy-on-write copy, and a ``size``), and True; else,
    where cuDF holds none or may spill buffers to the host (whose pointers are then
    valid only inside its spill locks), ``to_pylibcudf``'s copy of it and False."""
    from cudf.options import get_option

    held = getattr(getattr(series, "_column", None), "plc_column", None)
    if held is None or get_option("spill"):
        return series.to_pylibcudf()[0], False
    return held, True


def _device_array(buffer, dtype, first: int, count: int | None, device: int):
    """A CuPy array of ``count`` items of ``dtype`` (None: as many as the buffer holds)
    from item ``first`` of a cuDF buffer on ``device``, which the array keeps alive."""
    import cupy

    itemsize = np.dtype(dtype).itemsize
    size = int(buffer.size)
    if count is None:
        count = size // itemsize - first
    memory = cupy.cuda.UnownedMemory(int(buffer.ptr), size, buffer, device)
    return cupy.ndarray((count,), dtype, cupy.cuda.MemoryPointer(memory, first * itemsize))


def encode_device(series, lut, summary, slot: int):
    """Device codes + int64 offsets of a cuDF string Series, its lengths and validity, as
    CuPy arrays, from one kernel, and whether a row is null; its first byte outside the
    alphabet (``lut``: the device copy of ``Scoring.lut``) and its longest length go to
    ``summary[slot]`` and ``summary[2 + slot]`` (see :func:`new_summary`; nothing is read
    back here: the caller reads the summary once and passes the bad byte to
    :func:`check_residues`). The arrays
    lie in a buffer kept between jobs, one a slot: they serve this job only (the caller
    holds ``gpu.DEVICE_LOCK`` until none of its work reads them)."""
    import cupy

    column, column_offsets, chars = string_buffers(series)
    rows = column.size()
    has_nulls = column.null_count() > 0
    # one buffer: residue codes (placed so that their 8-byte words line up with the
    # characters'; of a sliced column's whole buffer, its offsets being absolute), int64
    # offsets and lengths, validity
    size = max(len(chars), 1)
    head, words = word_layout(chars.data.ptr, len(chars))
    codes_end = -(-(ENCODE_WORD - 1 + size) // ENCODE_WORD) * ENCODE_WORD
    end = codes_end + 8 * (2 * rows + 1) + rows
    block = gpu.scratch_buffer(f"encoded_{slot}", end, cupy.uint8)
    pad = (chars.data.ptr - block.data.ptr) % ENCODE_WORD
    layout = (pad, size, head, words, codes_end, rows)
    codes, code_words, offsets, lengths, valid = gpu.buffer_views(
        f"encoded views {slot}", block, layout, lambda buffer: _encoded_views(buffer, *layout))
    if has_nulls:
        valid[...] = series.notna().to_cupy()
    threads = 256
    launch(encode_column, (max(words, rows + 1, ENCODE_WORD) + threads - 1) // threads, threads,
           (chars, chars[head:head + ENCODE_WORD * words].view(cupy.uint64), head, lut,
            column_offsets, codes, code_words, offsets, lengths, valid, not has_nulls, summary,
            slot), gpu.kernel_view)
    return gpu.DeviceSequences(codes, offsets), lengths, valid, has_nulls


def _encoded_views(block, pad: int, size: int, head: int, words: int, codes_end: int,
                   rows: int) -> tuple:
    """:func:`encode_device`'s arrays in its buffer: the codes (from byte ``pad``, so
    that their words line up with the characters'), their span of whole words (from
    ``head``, ``words`` of them, as uint64), and from byte ``codes_end`` the int64
    offsets and lengths and the validity of ``rows`` rows."""
    import cupy

    codes = block[pad:pad + size]
    lengths_at = codes_end + 8 * (rows + 1)
    valid_at = codes_end + 8 * (2 * rows + 1)
    return (codes, codes[head:head + ENCODE_WORD * words].view(cupy.uint64),
            block[codes_end:lengths_at].view(cupy.int64),
            block[lengths_at:valid_at].view(cupy.int64),
            block[valid_at:valid_at + rows].view(bool))


def check_residues(series, sequences: gpu.DeviceSequences, bad: int, scoring: Scoring) -> None:
    """Raise ``ValueError`` naming the row label, position and character of byte ``bad``
    of the column (from :func:`encode_device`), if it is one."""
    if bad != NO_BAD_BYTE:
        host_offsets = sequences.offsets.get()
        row = int(np.searchsorted(host_offsets, bad, side="right") - 1)
        text = series.iloc[row]
        byte_position = bad - int(host_offsets[row])
        position = len(text.encode("utf-8")[:byte_position].decode("utf-8", errors="ignore"))
        raise ValueError(f"row {plain_label(series.index[row])!r}, position {position}: "
                         f"character {text[position]!r} is not in the {scoring.name} alphabet "
                         f"{scoring.alphabet!r}")


def _labels(index, take):
    """The labels ``index[take]``: a CuPy array for a RangeIndex (arithmetic), else a cuDF
    Series on a default index."""
    import cudf

    if isinstance(index, cudf.RangeIndex):
        return _range_labels()(take, index.start, index.step)
    return cudf.Series(index.take(take)).reset_index(drop=True)


@functools.cache
def _range_labels():
    """CuPy's kernel of a RangeIndex's labels ``start + step * take`` (int64) in one pass
    (as an expression, two kernels)."""
    import cupy

    return cupy.ElementwiseKernel("int64 take, int64 start, int64 step", "int64 label",
                                  "label = start + step * take", "gpualign_df_range_labels")


@functools.cache
def _length_and_identity():
    """CuPy's kernel of the ``length`` (int32) and ``identity`` (float64) columns from
    the matches, mismatches and gap columns (int32), in one pass: the values of
    :func:`gpualign_df.results.identity` (matches over length, 0 where an alignment has
    no columns), where an expression of CuPy arrays would launch six kernels, each of
    them in the device's work after the walk."""
    import cupy

    return cupy.ElementwiseKernel(
        "int32 matches, int32 mismatches, int32 gaps", "int32 length, float64 identity",
        "length = matches + mismatches + gaps; "
        "identity = length > 0 ? (double) matches / (double) length : 0.0",
        "gpualign_df_length_identity")


def result_frame(results: gpu.DeviceResults, valid, query_labels, target_labels, pair_query,
                 pair_target, traceback: bool, all_valid: bool | None = None):
    """The result frame as cuDF columns, built from the device buffers (``valid`` and the
    pair arrays are CuPy arrays; ``all_valid``, when known, spares a wait on the device).
    The frame of the other columns is built while the kernels still run; the CIGAR column
    is inserted last: the read of its characters' total waits for the walk, and the
    CIGAR kernel then writes them into a buffer of that size while the column is made
    (``deferred_cigars``; the caller holds ``gpu.DEVICE_LOCK``)."""
    import cudf
    import cupy
    import pylibcudf as plc

    rows = len(valid)
    device = {name: cupy.asarray(array)[:rows] for name, array in results.columns.items()}
    if all_valid is None:
        all_valid = bool(valid.all())
    mask = None if all_valid else cudf.Series(valid)

    def column(values):  # arrays as they are where every row is valid
        return values if mask is None else cudf.Series(values, nan_as_null=False).where(mask)

    data = {"query": _labels(query_labels, pair_query),
            "target": _labels(target_labels, pair_target),
            "score": column(device["score"])}
    if not traceback:
        data["query_end"] = column(device["query_end"])
        data["target_end"] = column(device["target_end"])
        return cudf.DataFrame(data)
    for name in ("query_start", "query_end", "target_start", "target_end"):
        data[name] = column(device[name])
    cigar_position = len(data)  # after the coordinates
    length, identity = _length_and_identity()(device["matches"], device["mismatches"],
                                              device["gaps"])
    for name in ("matches", "mismatches", "gap_opens", "gaps"):
        data[name] = column(device[name])
    data["length"] = column(length)
    data["identity"] = column(identity)
    # nan_as_null=False: no NaN count (a device read, which would wait for the kernels)
    frame = cudf.DataFrame(data, nan_as_null=False)

    def offsets_column(wide: bool):
        return plc.Column.from_cuda_array_interface(
            results.offsets.astype(np.int64 if wide else np.int32))
    # a bound on the characters' count: int32 offsets decided before the wait
    offsets = offsets_column(False) if results.characters_bound < 2**31 else None
    chars = cupy.asarray(results.cigar_chars())  # waits for the walk
    if offsets is None:
        offsets = offsets_column(results.characters >= 2**31)
    strings = plc.Column(plc.DataType(plc.TypeId.STRING), rows, plc.gpumemoryview(chars), None,
                         0, 0, [offsets])
    # an Index, not a Series: inserted as it is (a Series would be copied and aligned)
    cigar = cudf.Index.from_pylibcudf(strings) if mask is None else \
        cudf.Index(cudf.Series.from_pylibcudf(strings).where(mask))
    frame.insert(cigar_position, "cigar", cigar)
    return frame


def host_offsets(series) -> tuple | None:
    """A host copy of a cuDF string Series' offsets (int64, into its characters buffer)
    and its validity, with the characters buffer (on the device) for
    :func:`host_sequences`; or None where a null row holds characters (which the host's
    layout has no place for: the device path takes such a job)."""
    column, offsets, chars = string_buffers(series)
    offsets = offsets.get().astype(np.int64, copy=False)
    valid = np.ones(column.size(), np.bool_) if column.null_count() == 0 else \
        series.notna().to_numpy()
    if not valid.all() and (np.diff(offsets)[~valid] != 0).any():
        return None
    return offsets, valid, chars


def host_sequences(series, offsets: np.ndarray, valid: np.ndarray, chars,
                   job: Job) -> EncodedSequences:
    """A host copy of a cuDF string Series (its :func:`host_offsets`) as a GPU job's
    encoded sequences: the bytes, mapped where first read (by the small-batch kernel
    itself, or on the host)."""
    import cudf

    start, stop = (int(offsets[0]), int(offsets[-1])) if len(valid) else (0, 0)
    text = chars[start:stop].get() if stop > start else np.zeros(0, np.uint8)
    index = series.index
    labels = pd.RangeIndex(index.start, index.stop, index.step) if isinstance(
        index, cudf.RangeIndex) else index.to_pandas()
    return EncodedSequences(None, offsets - start, valid, labels, text=text,
                            scoring=job.scoring, allocate=codes_allocator(job))


def align_small_job(queries, targets, job: Job):
    """The cuDF frame of a rowwise or pairwise job that runs as one small batch on the
    GPU (:func:`gpualign_df.gpu.small.small_batch`: up to ``small_batch_pairs`` pairs,
    such as GATK HaplotypeCaller's calls), or None for any other job. Such a job costs
    the device path more in its launches and plan than in its cells: its sequences come
    to the host (two small copies a side), the small-batch path aligns them (the frame's
    values equal the device path's, as every engine's do), and the results go back in
    one copy to make the frame. The job's pairs and sizes are checked on the offsets,
    before any characters are copied."""
    tuning = config.settings()
    rows = len(queries)
    count = rows if job.how == "rowwise" else rows * (rows - 1) // 2
    if job.how not in ("rowwise", "pairwise") or not 0 < count <= tuning.small_batch_pairs:
        return None
    sides = [queries] if job.how == "pairwise" else [queries, targets]
    layouts = []
    for series in sides:
        layout = host_offsets(series)
        if layout is None:
            return None
        layouts.append(layout)
    (query_offsets, query_valid, _), (target_offsets, target_valid, _) = layouts[0], layouts[-1]
    if job.how == "rowwise":
        pair_query = pair_target = np.arange(rows, dtype=np.int64)
    else:
        pair_query, pair_target = pairwise_pairs(rows)
    valid = np.empty(count, np.bool_)
    sizes = pair_sizes(query_offsets, query_valid, target_offsets, target_valid, pair_query,
                       pair_target, valid)
    if not small_batch(count, *sizes, job.traceback_memory, tuning):
        return None
    encoded = [host_sequences(series, *layout, job) for series, layout in zip(sides, layouts)]
    arrays = run_pairs(encoded[0], encoded[-1], pair_query, pair_target, job)
    return frame_of_host_results(arrays, queries.index, sides[-1].index, pair_query,
                                 pair_target, job.traceback)


#: Bytes each part of :func:`frame_of_host_results`' upload starts on a multiple of (the
#: alignment of the device allocations libcudf makes; a null mask's words are read whole).
PART_ALIGNMENT = 64


def frame_of_host_results(arrays: AlignmentArrays, query_index, target_index,
                          pair_query: np.ndarray, pair_target: np.ndarray, traceback: bool):
    """The cuDF result frame of host results (an engine's columns in pair order), equal to
    :func:`result_frame`'s of the device path: every column's values and null mask (each
    column its own) in one upload, the frame made of pylibcudf columns over it, which
    costs a fraction of cuDF's constructor (it checks and wraps each column again). Labels
    of a ``RangeIndex`` are computed here; others are gathered on the device and
    inserted."""
    import cudf
    import cupy
    import pylibcudf as plc

    count, valid = len(arrays.valid), arrays.valid
    nulls = count - int(np.count_nonzero(valid))
    names = TRACEBACK_COLUMNS if traceback else SCORE_ONLY_COLUMNS
    values = dict(integer_columns(arrays, traceback))
    if traceback:
        values["identity"] = identity(arrays, np.zeros(count))
        values["cigar"] = arrays.cigar_chars
    labels = {}
    for name, index, pairs in (("query", query_index, pair_query),
                               ("target", target_index, pair_target)):
        if isinstance(index, cudf.RangeIndex):
            values[name] = index.start + index.step * pairs
        else:
            labels[name] = _labels(index, cupy.asarray(pairs))
    mask = np.packbits(valid, bitorder="little") if nulls else None
    # each column's parts: its values (a CIGAR's offsets, then its characters), then its
    # null mask where rows are null (each column its own: no write reaches another)
    kept = [name for name in names if name in values]
    pieces: list[list[np.ndarray]] = []
    for name in kept:
        if name == "cigar":
            offsets = arrays.cigar_offsets
            own = [offsets.astype(np.int32 if offsets[-1] < 2**31 else np.int64),
                   values[name] if len(values[name]) else np.zeros(1, np.uint8)]
        else:
            wide = name in ("query", "target", "identity")
            own = [np.asarray(values[name], dtype=None if wide else np.int32)]
        if mask is not None and name not in ("query", "target"):
            own.append(mask.copy())
        pieces.append(own)
    parts = [part for own in pieces for part in own]
    starts = [0]
    for part in parts:
        starts.append(-(-(starts[-1] + part.nbytes) // PART_ALIGNMENT) * PART_ALIGNMENT)
    host = np.empty(max(starts[-1], 1), np.uint8)
    for start, part in zip(starts, parts):
        host[start:start + part.nbytes] = part.view(np.uint8)
    device = cupy.asarray(host)
    views = iter(plc.gpumemoryview(device[start:start + part.nbytes])
                 for start, part in zip(starts, parts))
    columns = []
    for name, own in zip(kept, pieces):
        if name == "cigar":
            offsets = plc.Column(_plc_type(own[0].dtype), count + 1, next(views), None, 0, 0,
                                 [])
            data, kind, children = next(views), plc.DataType(plc.TypeId.STRING), [offsets]
        else:
            data, kind, children = next(views), _plc_type(own[0].dtype), []
        null_mask = next(views) if len(own) > len(children) + 1 else None
        columns.append(plc.Column(kind, count, data, null_mask, nulls if null_mask else 0, 0,
                                  children))
    frame = cudf.DataFrame.from_pylibcudf(plc.Table(columns), metadata={"columns": kept})
    for position, name in enumerate(("query", "target")):
        if name in labels:
            frame.insert(position, name, labels[name])
    return frame


def _plc_type(dtype: np.dtype):
    """The pylibcudf type of a numpy dtype among the result columns' (int32, int64,
    float64)."""
    import pylibcudf as plc

    return plc.DataType({np.dtype(np.int32): plc.TypeId.INT32,
                         np.dtype(np.int64): plc.TypeId.INT64,
                         np.dtype(np.float64): plc.TypeId.FLOAT64}[np.dtype(dtype)])


def align_cudf(queries, targets, job: Job):
    """:func:`gpualign_df.align` for cuDF Series on the GPU (``job.engine == "cuda"``): a
    cuDF frame; residues, CIGARs and results stay on the device, but for a job of one
    small batch (:func:`align_small_job`)."""
    # one job at a time on the device from its encoding on: the encoded sequences and the
    # summary are buffers kept between jobs
    with gpu.DEVICE_LOCK, engine_allocations():
        return _align_cudf(queries, targets, job)


def _align_cudf(queries, targets, job: Job):
    import cupy

    if not isinstance(targets, Database):
        small = align_small_job(queries, targets, job)
        if small is not None:
            return small

    how, scoring, mode, top_k = job.how, job.scoring, job.mode, job.top_k
    traceback, cigar_style, clip = job.traceback, job.cigar_style, job.clip
    lut, summary = gpu.device_table("lut", scoring.lut), new_summary()
    device_queries, query_lengths, query_valid, query_nulls = encode_device(queries, lut,
                                                                            summary, 0)
    prepared = isinstance(targets, Database)
    if how == "pairwise":
        device_targets, target_lengths, target_valid, target_nulls = (
            device_queries, query_lengths, query_valid, query_nulls)
        targets = queries
    elif prepared:  # encoded once; its device copy kept by the database
        targets.check_scoring(scoring)
        (device_targets,) = gpu.upload(targets.sequences)
        target_lengths = cupy.asarray(targets.lengths)
        target_valid = cupy.asarray(targets.sequences.valid)
    else:
        device_targets, target_lengths, target_valid, target_nulls = encode_device(
            targets, lut, summary, 1)
    if prepared:
        target_nulls = not targets.sequences.valid.all()
        import cudf

        target_index = cudf.from_pandas(targets.labels)  # a RangeIndex stays one
    else:
        target_index = targets.index
    # no null in either column: every pair is valid, known without a read
    nulls = query_nulls or target_nulls

    @functools.cache
    def longest() -> tuple[int, int]:
        """The longest query and target, from one read of the summary (once), after the
        residue checks and the score bound's: called by the engine where its plan needs
        them, so that the host's work before it overlaps the encoding kernels."""
        bad_query, bad_target, longest_query, longest_target, wide_query, wide_target = (
            int(value) for value in gpu.to_numpy(summary))
        if how == "pairwise":
            bad_target, longest_target = bad_query, longest_query
        # a bound on the queries' codes where all are small (the kernels' choices)
        device_queries.largest_code = None if wide_query else SMALL_CODES - 1
        if not prepared and how != "pairwise":
            device_targets.largest_code = None if wide_target else SMALL_CODES - 1
        check_residues(queries, device_queries, bad_query, scoring)
        if prepared:
            longest_target = int(targets.lengths.max(initial=0))
        else:
            check_residues(targets, device_targets, bad_target, scoring)
        check_score_bound(scoring, longest_query, longest_target)
        return longest_query, longest_target

    def run(pq, pt, with_traceback, rowwise=False):
        pq, pt = cupy.asarray(pq), cupy.asarray(pt)
        if rowwise:  # row k against row k: no gathers
            valid = query_valid & target_valid if nulls else query_valid
            pair_query_lengths, pair_target_lengths = query_lengths, target_lengths
        else:
            valid = query_valid[pq] & target_valid[pt]
            pair_query_lengths, pair_target_lengths = query_lengths[pq], target_lengths[pt]
        all_valid = bool(valid.all()) if nulls else True  # read before the kernels run
        results = gpu.align_on_device(device_queries, device_targets, pq, pt, pair_query_lengths,
                                      pair_target_lengths, valid, scoring, mode,
                                      traceback=with_traceback, cigar_style=cigar_style,
                                      clip=clip, longest=longest,
                                      all_valid=all_valid,
                                      traceback_memory=job.traceback_memory,
                                      deferred_cigars=True)  # (under DEVICE_LOCK)
        return result_frame(results, valid, queries.index, target_index, pq, pt,
                            with_traceback, all_valid)

    if how == "search" and top_k is not None:  # score the cross product, keep, trace back
        longest()  # (the checks, before any kernel)
        return run(*gpu.search_top_k(device_queries, device_targets, query_lengths.get(),
                                     query_valid.get(), target_lengths.get(),
                                     target_valid.get(), scoring, mode, top_k), traceback)
    if how == "search":
        pair_query, pair_target = search_pairs(len(queries), len(targets))
        frame = run(pair_query, pair_target, traceback)
        score = frame["score"]
        keep = best_first(pair_query, pair_target, score.fillna(0).to_numpy(),
                          score.notna().to_numpy(), None)
        return frame.take(keep).reset_index(drop=True)
    if how == "pairwise":
        return run(*pairwise_pairs(len(queries)), traceback)
    rows = gpu.row_numbers(len(queries))  # rowwise: row k against row k
    return run(rows, rows, traceback, rowwise=True)
