"""The streaming result writer: frames in, one output file committed or discarded whole.

A :class:`ResultWriter` checks each frame in full before any of its bytes are written, so a
refused frame leaves the writer usable; the output becomes the target file only on a clean
close, and an exception, ``abort()`` or a writer dropped unclosed leaves an existing target
as it was.
"""

from __future__ import annotations

from types import TracebackType

import pandas as pd

from ..results import empty_frame
from .encoder import Encoder, as_pandas
from .output import Destination

__all__ = ["ResultWriter"]


class ResultWriter:
    """A result file being written, frame by frame; made by
    :func:`~gpualign_df.io.open_results`.

    Use it as a context manager: a clean exit of the ``with`` block commits (see
    :meth:`close`), an exception discards (see :meth:`abort`).  Without ``with``, call
    :meth:`close` or :meth:`abort` yourself.

    Attributes
    ----------
    path : str
        The output path as given.
    format : str
        One of :data:`~gpualign_df.io.FORMATS`.
    rows_written : int
        Result rows received by :meth:`write` so far (SAM, PAF and BLAST may write fewer
        records: see :func:`~gpualign_df.io.open_results`).

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from gpualign_df import align
    >>> from gpualign_df.io import open_results
    >>> seqs = pd.DataFrame({"name": ["a", "b", "c"], "seq": ["ACGT", "ACGA", "TCGT"]})
    >>> path = os.path.join(tempfile.mkdtemp(), "pairs.tsv")
    >>> results = align(seqs["seq"], how="pairwise", match=1, mismatch=-1, traceback=False)
    >>> with open_results(path, queries=seqs, targets=seqs, how="pairwise") as writer:
    ...     writer.write(results.iloc[:2])
    ...     writer.write(results.iloc[2:])
    >>> writer.rows_written, open(path).read().count("\\n")
    (3, 4)
    """

    def __init__(self, destination: Destination, fmt: str, encoder: Encoder) -> None:
        self._destination = destination
        self._encoder = encoder
        self.path: str = destination.path
        self.format: str = fmt
        self.rows_written: int = 0
        self._state = "open"  # open -> committed | discarded | broken

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def write(self, results: pd.DataFrame) -> None:
        """Append the rows of one result frame.

        The frame is checked in full (columns, labels, coordinates, text fields) before
        any of it is written: a frame that fails the checks writes nothing and leaves the
        writer usable.  An I/O error while writing leaves the writer broken (only
        :meth:`abort` remains, which the ``with`` block calls).

        Parameters
        ----------
        results : pandas.DataFrame
            A result frame of the aligner (a cuDF frame is converted with
            ``to_pandas()``).  TSV and Parquet accept score-only frames
            (``traceback=False``); SAM, PAF and BLAST need the traceback columns.  TSV and
            Parquet need every frame to have the first frame's columns.

        Raises
        ------
        ValueError
            Missing columns, labels not in the sequence frames, coordinates beyond the
            sequence lengths, text fields with tabs or line breaks, frames whose columns
            differ from the first frame's.
        OSError
            If the output cannot be written (full disk, ...); the message names the file.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> from gpualign_df import align
        >>> from gpualign_df.io import open_results
        >>> seqs = pd.DataFrame({"name": ["x", "y"], "seq": ["ACGT", "AGGT"]})
        >>> path = os.path.join(tempfile.mkdtemp(), "r.paf")
        >>> with open_results(path, queries=seqs, targets=seqs) as writer:
        ...     writer.write(align(seqs["seq"], seqs["seq"], match=1, mismatch=-1))
        >>> print(open(path).read().splitlines()[1].replace("\\t", " "))
        y 4 0 4 + y 4 0 4 4 4 255 AS:i:4 cg:Z:4=
        """
        self._check_open()
        frame = as_pandas(results, "results")
        prepared = self._encoder.prepare(frame)  # every check, before any byte is written
        destination = self._destination
        try:
            if not destination.opened:
                stream = destination.open()
                self._encoder.begin(stream, destination)
            self._encoder.emit(destination, prepared)
        except OSError as error:
            self._state = "broken"
            raise destination.error(error) from error
        except BaseException:
            self._state = "broken"
            raise
        self.rows_written += len(frame)

    def close(self) -> None:
        """Commit: finish the file and move it onto the target path.

        A writer that received no frame writes a file with no rows: the SAM header, an
        empty PAF/BLAST file, and for TSV and Parquet the columns of a traceback result
        frame (:data:`gpualign_df.results.TRACEBACK_COLUMNS` with the name columns).
        Closing twice does nothing.

        Raises
        ------
        OSError
            If the output cannot be finished (full disk, ...); the target is left as it
            was and the temporary file removed.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> from gpualign_df.io import open_results
        >>> seqs = pd.DataFrame({"name": ["x"], "seq": ["ACGT"]})
        >>> path = os.path.join(tempfile.mkdtemp(), "none.tsv")
        >>> writer = open_results(path, queries=seqs, targets=seqs)
        >>> writer.close()
        >>> open(path).read().split("\\t")[:4]
        ['query', 'query_name', 'target', 'target_name']
        """
        if self._state == "committed":
            return
        self._check_open()
        try:
            if not self._destination.opened:
                self.write(empty_frame(True, pd.RangeIndex(0), pd.RangeIndex(0)))
            self._encoder.finish(self._destination)
            self._destination.commit()
        except BaseException as error:
            self._state = "broken"
            self._encoder.abandon()
            self._destination.discard()
            if isinstance(error, OSError):
                raise self._destination.error(error) from error
            raise
        self._state = "committed"

    def abort(self) -> None:
        """Discard: remove the temporary file; an existing target is left untouched.

        (A target written in place, such as ``/dev/stdout``, keeps what was written.)
        Aborting twice, or after :meth:`close`, does nothing.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> from gpualign_df.io import open_results
        >>> seqs = pd.DataFrame({"name": ["x"], "seq": ["ACGT"]})
        >>> path = os.path.join(tempfile.mkdtemp(), "kept.tsv")
        >>> _ = open(path, "w").write("old\\n")
        >>> writer = open_results(path, queries=seqs, targets=seqs)
        >>> writer.write(pd.DataFrame({"query": [0], "target": [0], "score": [4],
        ...                            "query_end": [4], "target_end": [4]}))
        >>> writer.abort()
        >>> open(path).read(), sorted(os.listdir(os.path.dirname(path)))
        ('old\\n', ['kept.tsv'])
        """
        if self._state in ("committed", "discarded"):
            return
        self._encoder.abandon()
        self._destination.discard()
        self._state = "discarded"

    def __del__(self) -> None:
        # A writer dropped without close() or abort() (no ``with`` block, an exception on
        # the way) must not leave its temporary file behind.
        if getattr(self, "_state", None) == "open" and self._destination.opened:
            try:
                self.abort()
            except Exception:  # noqa: BLE001 - nothing to report to in a finalizer
                pass

    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"the result writer of {self.path!r} is {self._state}; "
                             f"open a new one")
