"""Sequence readers and alignment result writers.

Readers turn FASTA/FASTQ files (plain or compressed) into pandas frames
(:func:`read_sequences`); writers turn the result frame of the aligner into TSV, Parquet,
SAM, PAF or BLAST tabular (``outfmt 6``), in one call (:func:`write_results`) or batch by
batch in bounded memory (:func:`open_results`).

Every output is written to a temporary file beside the target, flushed to disk and renamed
onto the target only when the whole output was written: an error, a full disk or Ctrl-C
leaves an existing output as it was and no partial file behind.  Targets that cannot be
replaced by a rename (``/dev/stdout``, ``/dev/null``, a FIFO) are written in place.

Text output is assembled column-wise with ``pyarrow.compute`` string kernels (no per-row
Python) and written in blocks of rows (the setting ``write_chunk_rows`` of
:mod:`gpualign_df.config`), so frames of millions of rows are written at I/O speed.

Modules, by what they own:

``readers``
    :func:`read_sequences` and the FASTA/FASTQ parsing around needletail.
``formats``
    :data:`FORMATS`, the ``how`` values, :func:`format_from_path`.
``api``
    :func:`open_results` and :func:`write_results`: every check, then a writer.
``writer``
    :class:`ResultWriter`: frames in, one file committed or discarded whole.
``output``
    The output target: a temporary file beside it, fsynced and renamed onto it; special
    files written in place.
``encoder``
    What every format shares: the encoder protocol, the sequence frames looked up by
    result label, the checks of a result frame.
``text``
    Arrow string assembly and block-wise writing, shared by the text formats.
``tsv``, ``parquet``, ``sam``, ``paf``, ``blast6``
    One encoder per format.
"""

from .api import open_results, write_results
from .formats import FORMATS, format_from_path
from .readers import read_sequences
from .writer import ResultWriter

__all__ = ["FORMATS", "ResultWriter", "format_from_path", "open_results", "read_sequences",
           "write_results"]
