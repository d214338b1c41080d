"""A search database prepared once and searched many times (CUDASW++'s ``makedb``).

:func:`database` encodes a collection of sequences for one scoring alphabet;
:func:`gpualign_df.align` (``how="search"``), the ``.aln.search`` accessors of pandas, cuDF
and Dask Series take the :class:`Database` wherever they take a database Series. Its
searches skip what depends on the database alone: encoding (done here), the copy to the
device and the grouped search kernel's length classes (sorted pairs of sequences gathered
into the kernel's layout), which the first GPU search makes and the database keeps on that
device. :meth:`Database.save` writes the encoded database to Parquet and
:func:`read_database` reads it back without encoding again.

A pickled database (a Dask task's argument) carries its host arrays only: each process
makes and keeps its own device copy on its first search.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .encode import EncodedSequences, encode_sequences, large_buffers
from .libraries import is_cudf
from .scoring import Scoring, make_scoring

#: Schema metadata key of a saved database, and the layout version it records.
METADATA_KEY = b"gpualign_df.database"
FORMAT_VERSION = 1


class Database:
    """Sequences encoded for one scoring alphabet, kept for repeated searches.

    Build one with :func:`database` or :func:`read_database`; pass it as the ``targets`` of
    ``align(..., how="search")`` or as the database of ``.aln.search``. A search must score
    with the alphabet the database was encoded for (the same matrix, or match/mismatch for
    both). What its GPU searches keep on a device (the codes and the search layout, about
    three bytes a residue) stays there until the database is deleted.

    Attributes
    ----------
    sequences : EncodedSequences
        The residue codes, offsets, null flags and labels.
    alphabet : str
        The scoring alphabet the codes index.
    scoring_name : str
        The matrix (or ``"match/mismatch"``) the database was encoded for.

    Examples
    --------
    >>> import pandas as pd, gpualign_df
    >>> db = gpualign_df.database(pd.Series(["TTTT", "ACGTACGA"], index=["a", "b"]),
    ...                           match=1, mismatch=-2)
    >>> len(db), db.lengths.tolist()
    (2, [4, 8])
    """

    def __init__(self, sequences: EncodedSequences, alphabet: str, lut: np.ndarray,
                 scoring_name: str, token: str | None = None) -> None:
        if sequences.keep is None:  # the engines keep what they derive from it here
            sequences = EncodedSequences(sequences.codes, sequences.offsets, sequences.valid,
                                         sequences.labels, {})
        self.sequences = sequences
        self.alphabet = alphabet
        self.lut = np.asarray(lut, np.uint8)
        self.scoring_name = scoring_name
        #: Names this database in Dask graphs (kept by its pickled copies).
        self.token = token or uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        return self.token

    def __len__(self) -> int:
        return len(self.sequences)

    def __repr__(self) -> str:
        return (f"Database({len(self)} sequences, {int(self.lengths.sum())} residues, "
                f"{self.scoring_name})")

    @property
    def labels(self) -> pd.Index:
        """The sequences' labels (the ``target`` column of a search)."""
        return self.sequences.labels

    @property
    def lengths(self) -> np.ndarray:
        """Residues of each sequence (0 for a null)."""
        return self.sequences.lengths

    def __getstate__(self) -> dict:
        # host arrays only: device copies belong to the process that made them
        state = dict(self.__dict__)
        sequences = self.sequences
        state["sequences"] = EncodedSequences(sequences.codes, sequences.offsets,
                                              sequences.valid, sequences.labels, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["sequences"], state["alphabet"], state["lut"],
                      state["scoring_name"], state["token"])

    def check_scoring(self, scoring: Scoring) -> None:
        """Raise ValueError unless ``scoring`` reads residues as this database's codes."""
        if scoring.alphabet != self.alphabet or not np.array_equal(scoring.lut, self.lut):
            raise ValueError(
                f"the database was prepared for {self.scoring_name} (alphabet "
                f"{self.alphabet!r}) but this search scores with {scoring.name} (alphabet "
                f"{scoring.alphabet!r}): prepare it with the search's matrix (or match/mismatch)")

    def save(self, path: str | Path) -> None:
        """Write the encoded database to a Parquet file (labels, codes, null flags and the
        alphabet), written aside and renamed into place, so ``path`` never holds half a
        database.

        Examples
        --------
        >>> import tempfile, os, gpualign_df
        >>> db = gpualign_df.database(["ACGT", None], match=1, mismatch=-1)
        >>> path = os.path.join(tempfile.mkdtemp(), "db.parquet")
        >>> db.save(path)
        >>> gpualign_df.read_database(path).lengths.tolist()
        [4, 0]
        """
        sequences = self.sequences
        count = len(sequences)
        codes = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), count,
            [None, pa.py_buffer(np.ascontiguousarray(sequences.offsets, np.int64)),
             pa.py_buffer(np.ascontiguousarray(sequences.codes))])
        labels = pa.Table.from_pandas(pd.DataFrame(index=sequences.labels))
        table = labels.append_column("codes", codes).append_column(
            "valid", pa.array(np.asarray(sequences.valid, bool)))
        about = {"version": FORMAT_VERSION, "alphabet": self.alphabet,
                 "lut": bytes(self.lut).hex(), "scoring": self.scoring_name}
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), METADATA_KEY: json.dumps(about).encode()})
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        try:
            pq.write_table(table, partial)
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)


def database(sequences: pd.Series | Sequence[str | None] | Any, *,
             matrix: str | pd.DataFrame | tuple | None = None, match: int | None = None,
             mismatch: int | None = None) -> Database:
    """Prepare a search database: encode ``sequences`` once for the scoring alphabet of
    ``matrix`` (or of ``match``/``mismatch``), for any number of searches.

    Parameters
    ----------
    sequences : pandas.Series, cudf.Series or sequence of str
        The database; the Series labels fill a search's ``target`` column. Nulls are kept
        (they match nothing).
    matrix, match, mismatch
        As in :func:`gpualign_df.align`: the searches must use the same alphabet.

    Returns
    -------
    Database

    Raises
    ------
    ValueError
        For a character outside the alphabet, naming the sequence and the position.

    Examples
    --------
    >>> import pandas as pd, gpualign_df
    >>> db = gpualign_df.database(pd.Series(["TTTT", "ACGTACGA", "ACGTACGT"]),
    ...                           match=1, mismatch=-2)
    >>> hits = gpualign_df.align(["ACGTACGT"], db, how="search", top_k=2, match=1,
    ...                          mismatch=-2, gap_open=5, gap_extend=1)
    >>> hits[["target", "score"]].values.tolist()
    [[2, 8], [1, 7]]
    """
    if isinstance(sequences, (str, bytes)):
        raise TypeError("sequences must be a collection of sequences (a Series or a list), "
                        "not one string")
    scoring = make_scoring(matrix, match=match, mismatch=mismatch)
    if is_cudf(sequences):
        sequences = sequences.to_pandas()
    encoded = encode_sequences(sequences, scoring)
    return Database(encoded, scoring.alphabet, scoring.lut, scoring.name)


def read_database(path: str | Path) -> Database:
    """A database saved by :meth:`Database.save` (no encoding: the codes are read as they
    were written).

    Raises
    ------
    ValueError
        Where ``path`` is not a saved database (or one of a later layout).

    Examples
    --------
    >>> import tempfile, os, gpualign_df
    >>> path = os.path.join(tempfile.mkdtemp(), "db.parquet")
    >>> gpualign_df.database(["MKV"], matrix="BLOSUM62").save(path)
    >>> gpualign_df.read_database(path)
    Database(1 sequences, 3 residues, BLOSUM62)
    """
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError(f"{path}: not a gpualign_df database (write one with "
                         f"gpualign_df.database(...).save(path))")
    about = json.loads(raw)
    if about.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: database layout {about.get('version')} is not the "
                         f"{FORMAT_VERSION} this version reads; prepare it again")
    codes = table.column("codes").combine_chunks()
    if codes.null_count:  # not written by save(), which writes no null codes
        raise ValueError(f"{path}: the database's codes hold nulls")
    data, offsets = large_buffers(codes)
    labels = table.drop_columns(["codes", "valid"]).to_pandas().index
    valid = table.column("valid").to_numpy()
    alphabet = about["alphabet"]
    lut = np.frombuffer(bytes.fromhex(about["lut"]), np.uint8)
    if len(data) and int(data.max()) >= len(alphabet):
        raise ValueError(f"{path}: the database's codes go beyond its alphabet")
    encoded = EncodedSequences(data, np.ascontiguousarray(offsets), np.asarray(valid, bool),
                               labels)
    return Database(encoded, alphabet, lut, about["scoring"])
