"""cuDF in, cuDF out: strings read zero-copy from the cuDF column, encoded on the device,
aligned by the GPU engine, and the result frame (CIGAR strings included) built from device
buffers. Residues and CIGARs never visit the host; only lengths, null flags and the pair
plan (integers) do.

Everything here imports cuDF lazily: the module loads on machines without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from . import gpu
from .databases import Database
from .encode import plain_label
from .engine import check_score_bound
from .job import Job
from .libraries import is_cudf
from .pairs import best_first, pairwise_pairs, search_pairs
from .gpu.launch import launch
from .gpu.memory import engine_allocations
from .kernels.encoding import ENCODE_WORD, encode_column, word_layout
from .scoring import Scoring

#: :func:`encode_device`'s first bad byte where every byte is in the alphabet.
NO_BAD_BYTE = 1 << 62


def as_cudf(values: Any):
    """A cuDF Series from a cuDF Series, a pandas Series or a list of str."""
    import cudf
    import pandas as pd

    if is_cudf(values):
        return values
    if isinstance(values, pd.Series):
        return cudf.from_pandas(values)
    return cudf.Series(list(values), dtype="str")


def new_summary():
    """The device array :func:`encode_device` reports into: the first bad byte of the
    queries and of the targets (``NO_BAD_BYTE`` where none), their longest lengths."""
    start = gpu.device_table("summary", np.array([NO_BAD_BYTE, NO_BAD_BYTE, 0, 0], np.int64))
    return start.copy()  # a device copy of the cached start (no copy from the host)


def encode_device(series, lut, summary, slot: int):
    """Device codes + int64 offsets of a cuDF string Series, its lengths and validity, as
    CuPy arrays, from one kernel; its first byte outside the alphabet (``lut``: the
    device copy of ``Scoring.lut``) and its longest length go to ``summary[slot]`` and
    ``summary[2 + slot]`` (see :func:`new_summary`; nothing is read back here: the caller
    reads the summary once and passes the bad byte to :func:`check_residues`)."""
    import cupy
    import pylibcudf as plc

    column, _ = series.to_pylibcudf()
    rows = column.size()
    if rows and column.type().id() != plc.TypeId.STRING:
        raise ValueError(f"sequences must be strings, got a cuDF column of {series.dtype}")
    has_nulls = column.null_count() > 0
    if rows == 0 or column.num_children() == 0:
        column_offsets = cupy.zeros(rows + 1, dtype=cupy.int64)
        chars = cupy.zeros(0, dtype=cupy.uint8)
    else:
        child = column.child(0)
        width = cupy.int32 if child.type().id() == plc.TypeId.INT32 else cupy.int64
        column_offsets = cupy.asarray(child.data()).view(width)[column.offset():
                                                                column.offset() + rows + 1]
        data = column.data()
        chars = cupy.asarray(data).view(cupy.uint8) if data is not None else \
            cupy.zeros(0, cupy.uint8)
        # a sliced column: its characters are chars[offsets[0]:offsets[-1]]; offsets stay
        # absolute (no host read of the bounds) and the code map covers the whole buffer
    # one allocation: residue codes (placed so that their 8-byte words line up with the
    # characters'), int64 offsets and lengths, validity
    size = max(len(chars), 1)
    head, words = word_layout(chars.data.ptr, len(chars))
    codes_end = -(-(ENCODE_WORD - 1 + size) // ENCODE_WORD) * ENCODE_WORD
    block = cupy.empty(codes_end + 8 * (2 * rows + 1) + rows, dtype=cupy.uint8)
    pad = (chars.data.ptr - block.data.ptr) % ENCODE_WORD
    codes = block[pad:pad + size]
    offsets = block[codes_end:codes_end + 8 * (rows + 1)].view(cupy.int64)
    lengths = block[codes_end + 8 * (rows + 1):codes_end + 8 * (2 * rows + 1)].view(cupy.int64)
    valid = block[codes_end + 8 * (2 * rows + 1):].view(bool)
    if has_nulls:
        valid[...] = series.notna().to_cupy()
    span = slice(head, head + ENCODE_WORD * words)
    threads = 256
    launch(encode_column, (max(words, rows + 1, ENCODE_WORD) + threads - 1) // threads, threads,
           (chars, chars[span].view(cupy.uint64), head, lut, column_offsets, codes,
            codes[span].view(cupy.uint64), offsets, lengths, valid, not has_nulls, summary,
            slot), gpu.kernel_view)
    return gpu.DeviceSequences(codes, offsets), lengths, valid


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
        return index.start + index.step * take
    return cudf.Series(index.take(take)).reset_index(drop=True)


def result_frame(results: gpu.DeviceResults, valid, query_labels, target_labels, pair_query,
                 pair_target, traceback: bool, all_valid: bool | None = None):
    """The result frame as cuDF columns, built from the device buffers (``valid`` and the
    pair arrays are CuPy arrays; ``all_valid``, when known, spares a wait on the device).
    The frame of the other columns is built while the kernels still run; the CIGAR column,
    which waits for them, is inserted last."""
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
    length = device["matches"] + device["mismatches"] + device["gaps"]
    for name in ("matches", "mismatches", "gap_opens", "gaps"):
        data[name] = column(device[name])
    data["length"] = column(length)
    data["identity"] = column(cupy.where(length > 0, device["matches"] / cupy.maximum(length, 1),
                                         0.0))
    # nan_as_null=False: no NaN count (a device read, which would wait for the kernels)
    frame = cudf.DataFrame(data, nan_as_null=False)

    def offsets_column(wide: bool):
        return plc.Column.from_cuda_array_interface(
            results.offsets.astype(np.int64 if wide else np.int32))
    # the characters' buffer bounds their count: int32 offsets decided before the wait
    offsets = offsets_column(False) if len(results.chars) < 2**31 else None
    chars = cupy.asarray(results.cigar_chars())  # waits for the kernels
    if offsets is None:
        offsets = offsets_column(results.characters >= 2**31)
    strings = plc.Column(plc.DataType(plc.TypeId.STRING), rows, plc.gpumemoryview(chars), None,
                         0, 0, [offsets])
    # an Index, not a Series: inserted as it is (a Series would be copied and aligned)
    cigar = cudf.Index.from_pylibcudf(strings) if mask is None else \
        cudf.Index(cudf.Series.from_pylibcudf(strings).where(mask))
    frame.insert(cigar_position, "cigar", cigar)
    return frame


def align_cudf(queries, targets, job: Job):
    """:func:`gpualign_df.align` for cuDF Series on the GPU (``job.engine == "cuda"``): a
    cuDF frame; residues, CIGARs and results never visit the host."""
    with engine_allocations():
        return _align_cudf(queries, targets, job)


def _align_cudf(queries, targets, job: Job):
    import cupy

    how, scoring, mode, top_k = job.how, job.scoring, job.mode, job.top_k
    traceback, cigar_style, clip = job.traceback, job.cigar_style, job.clip
    lut, summary = gpu.device_table("lut", scoring.lut), new_summary()
    device_queries, query_lengths, query_valid = encode_device(queries, lut, summary, 0)
    prepared = isinstance(targets, Database)
    if how == "pairwise":
        device_targets, target_lengths, target_valid = (device_queries, query_lengths,
                                                        query_valid)
        targets = queries
    elif prepared:  # encoded once; its device copy kept by the database
        targets.check_scoring(scoring)
        (device_targets,) = gpu.upload(targets.sequences)
        target_lengths = cupy.asarray(targets.lengths)
        target_valid = cupy.asarray(targets.sequences.valid)
    else:
        device_targets, target_lengths, target_valid = encode_device(targets, lut, summary, 1)
    # one read for the residue checks and the longest sequences
    bad_query, bad_target, longest_query, longest_target = (int(value)
                                                            for value in summary.get())
    if how == "pairwise":
        bad_target, longest_target = bad_query, longest_query
    check_residues(queries, device_queries, bad_query, scoring)
    if prepared:
        longest_target = int(targets.lengths.max(initial=0))
        target_nulls = not targets.sequences.valid.all()
        import cudf

        target_index = cudf.from_pandas(targets.labels)  # a RangeIndex stays one
    else:
        check_residues(targets, device_targets, bad_target, scoring)
        target_nulls = targets.null_count > 0
        target_index = targets.index
    check_score_bound(scoring, longest_query, longest_target)
    # no null in either column: every pair is valid, known without a read
    nulls = queries.null_count > 0 or target_nulls

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
                                      clip=clip, longest=(longest_query, longest_target),
                                      all_valid=all_valid,
                                      traceback_memory=job.traceback_memory)
        return result_frame(results, valid, queries.index, target_index, pq, pt,
                            with_traceback, all_valid)

    if how == "search" and top_k is not None:  # score the cross product, keep, trace back
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
    rows = cupy.arange(len(queries), dtype=cupy.int64)  # rowwise: row k against row k
    return run(rows, rows, traceback, rowwise=True)
