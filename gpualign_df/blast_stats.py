"""Karlin-Altschul statistics for BLAST tabular output: e-values and bit scores.

BLAST does not compute the gapped Karlin-Altschul parameters; it looks them up in tables
estimated by simulation (Altschul et al. 2001, NAR 29:351) for a fixed list of scoring
systems. This module carries those tables, transcribed as numeric facts from NCBI BLAST+'s
``blast_stat.c`` (``ncbi-cxx-toolkit-public``, ``src/algo/blast/core/blast_stat.c``: the
``blosum45/50/62/80/90_values`` and ``pam30/70/250_values`` arrays and the
``blastn_values_R_P`` arrays), and repeats BLAST's arithmetic for one query searched
against a database:

* the length adjustment ``ell`` (``BLAST_ComputeLengthAdjustment`` in ``blast_stat.c``),
* the effective search space ``max(n - N*ell, 1) * (m - ell)`` (``BLAST_CalcEffLengths``
  in ``blast_setup.c``),
* ``evalue = searchsp * K * exp(-lambda * S)`` and
  ``bitscore = (lambda * S - ln K) / ln 2`` (``BLAST_KarlinStoE_simple`` in
  ``blast_stat.c``, ``Blast_HSPListGetBitScores`` in ``blast_hits.c``).

Only scoring systems BLAST tabulates have parameters. :func:`karlin_altschul` returns
``None`` for everything else -- custom matrices, gap costs missing from the table, and
match/mismatch pairs BLAST lacks -- and the BLAST tabular writer then prints ``NA`` in the
evalue and bitscore columns rather than a number with no model behind it.

Gap costs: here a gap of length k costs ``gap_open + (k - 1) * gap_extend``; BLAST charges
``open + k * extend``. Our ``(gap_open, gap_extend)`` is BLAST's
``(gap_open - gap_extend, gap_extend)``, so BLAST's BLOSUM62 11/1 is ``gap_open=12,
gap_extend=1`` here (see :func:`gpualign_df.scoring.blast_to_gap_costs`).

Two differences from what ``blastp`` (BLAST+) prints: ``blastp`` by default adjusts scores
for composition (``-comp_based_stats``) and computes protein e-values with Spouge's
finite-size correction when its Gumbel tables are loaded; the e-values here are the classic
Karlin-Altschul ones over the effective search space (what ``blastn`` prints, and what
``blastp`` prints with ``-comp_based_stats 0`` and the ``OLD_FSC`` environment variable
set). Bit scores and the effective search space are the same either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import ArrayLike

    from gpualign_df.scoring import Scoring

__all__ = [
    "KarlinAltschul",
    "karlin_altschul",
    "length_adjustment",
    "effective_search_space",
    "evalues_and_bitscores",
]

from .blast_tables import BLASTN_TABLES, PROTEIN_TABLES, ROUND_DOWN_PAIRS  # noqa: F401

#: Built-in nucleotide matrices scored as a reward/penalty pair on ACGT.
_NUCLEOTIDE_NAMES = frozenset({"match/mismatch", "EDNAFULL", "NUC.4.4"})


@dataclass(frozen=True)
class KarlinAltschul:
    """Gapped Karlin-Altschul parameters of one scoring system, as BLAST tabulates them.

    Attributes
    ----------
    lambda_ : float
        Scale of the score distribution (per raw score point).
    k : float
        Search-space scale ``K``.
    h : float
        Relative entropy ``H`` (nats per aligned pair).
    alpha, beta : float
        Slope and intercept of the expected alignment length against score, used by the
        length adjustment (Altschul et al. 2001).
    source : str
        Where the numbers come from, e.g. ``"BLOSUM62 11/1"`` or
        ``"blastn 1/-3 2/2, scores x2"`` (BLAST's matrix or reward/penalty, then BLAST's
        gap open/extend).
    round_down : bool
        BLAST rounds odd raw scores down to even before computing the e-value (its 2/-7,
        2/-5, 2/-3 and 3/-4 tables hold for even scores only). Bit scores use the raw
        score either way.
    """

    lambda_: float
    k: float
    h: float
    alpha: float
    beta: float
    source: str = ""
    round_down: bool = False


def _protein_params(name: str, blast_open: int, blast_extend: int) -> KarlinAltschul | None:
    for row in PROTEIN_TABLES[name]:
        if row[0] == blast_open and row[1] == blast_extend:
            lam, k, h, alpha, beta = map(float, row[2:])
            return KarlinAltschul(lam, k, h, alpha, beta, f"{name} {blast_open}/{blast_extend}")
    return None


def _reward_penalty(scoring: Scoring) -> tuple[int, int] | None:
    """The (reward, penalty) pair of a nucleotide scheme on A, C, G, T, or None if the
    ACGT block is not one match score on the diagonal and one mismatch score off it."""
    codes = [scoring.alphabet.upper().find(base) for base in "ACGT"]
    if min(codes) < 0:
        return None
    block = scoring.matrix[np.ix_(codes, codes)].astype(np.int64)
    diagonal = np.diag(block)
    off_diagonal = block[~np.eye(4, dtype=bool)]
    if np.unique(diagonal).size != 1 or np.unique(off_diagonal).size != 1:
        return None
    return int(diagonal[0]), int(off_diagonal[0])


def _nucleotide_params(reward: int, penalty: int, blast_open: int,
                       blast_extend: int) -> KarlinAltschul | None:
    if reward <= 0 or penalty >= 0:
        return None
    # As s_GetNuclValuesArray: a pair that is a multiple of a tabulated pair uses that
    # table with its gap costs multiplied, and lambda and alpha divided, by the gcd
    # (s_AdjustGapParametersByGcd). K, H and beta are unchanged: they do not depend on
    # the unit of the score.
    divisor = math.gcd(reward, penalty)
    base = (reward // divisor, penalty // divisor)
    rows = BLASTN_TABLES.get(base)
    if rows is None:
        return None
    found = None
    # Affine rows first, exactly as Blast_KarlinBlkNuclGappedCalc: a (0, 0) row is never
    # matched by gap costs, only by BLAST's own (0, 0) "non-affine" request.
    for row in rows:
        if (row[0], row[1]) != (0, 0) and (row[0] * divisor, row[1] * divisor) == \
                (blast_open, blast_extend):
            found = row
            break
    if found is None and blast_open == 0 and 2 * blast_extend == reward - 2 * penalty:
        # Our DP with a linear gap cost of reward/2 - penalty per position is the scoring
        # BLAST's greedy non-affine extension optimises, whose parameters are the (0, 0)
        # row. (For 2/-3 the (0, 0) row equals the (0, 4) row, as this requires.)
        found = next((row for row in rows if (row[0], row[1]) == (0, 0)), None)
    if found is None:
        # BLAST itself would use ungapped parameters computed from the query's composition
        # for gap costs beyond the table's largest ("infinite regime"); those are not
        # tabulated, so there is nothing to report here.
        return None
    lam, k, h, alpha, beta = map(float, found[2:])
    source = f"blastn {base[0]}/{base[1]} {found[0]}/{found[1]}"
    if divisor != 1:
        source += f", scores x{divisor}"
    return KarlinAltschul(lam / divisor, k, h, alpha / divisor, beta, source,
                          round_down=base in ROUND_DOWN_PAIRS)


def karlin_altschul(scoring: Scoring) -> KarlinAltschul | None:
    """BLAST's gapped Karlin-Altschul parameters for a scoring scheme, or None.

    Parameters
    ----------
    scoring : gpualign_df.scoring.Scoring
        The scheme. Protein: BLOSUM45/50/62/80/90 or PAM30/70/250 with gap costs BLAST
        tabulates. Nucleotide: ``match``/``mismatch`` scoring (or EDNAFULL, which is 5/-4
        on ACGT) with a reward/penalty pair BLAST tabulates, or a multiple of one, and
        tabulated gap costs (scaled by the same multiple).

    Returns
    -------
    KarlinAltschul or None
        None for custom matrices, gap costs BLAST has no parameters for (including
        costs beyond a nucleotide table's largest, where BLAST would use query-dependent
        ungapped values) and reward/penalty pairs BLAST lacks. The BLAST tabular writer
        prints ``NA`` for evalue and bitscore then.

    Examples
    --------
    >>> from gpualign_df.scoring import make_scoring
    >>> p = karlin_altschul(make_scoring("BLOSUM62", gap_open=12, gap_extend=1))
    >>> p.source, p.lambda_, p.k, p.h, p.alpha, p.beta
    ('BLOSUM62 11/1', 0.267, 0.041, 0.14, 1.9, -30.0)
    >>> p = karlin_altschul(make_scoring(match=2, mismatch=-6, gap_open=8, gap_extend=4))
    >>> p.source, p.lambda_, p.k
    ('blastn 1/-3 2/2, scores x2', 0.685, 0.7)
    >>> karlin_altschul(make_scoring("BLOSUM62", gap_open=10, gap_extend=10)) is None
    True
    """
    blast_open, blast_extend = scoring.gap_open - scoring.gap_extend, scoring.gap_extend
    if scoring.name in PROTEIN_TABLES:
        return _protein_params(scoring.name, blast_open, blast_extend)
    if scoring.name in _NUCLEOTIDE_NAMES:
        pair = _reward_penalty(scoring)
        if pair is None:
            return None
        return _nucleotide_params(*pair, blast_open, blast_extend)
    return None


def length_adjustment(params: KarlinAltschul, query_length: int, db_residues: int,
                      db_sequences: int) -> int:
    """BLAST's length adjustment for one query length (``BLAST_ComputeLengthAdjustment``).

    The adjustment is an integer approximation, from below, to the fixed point of
    ``ell = beta + (alpha/lambda) * (ln K + ln((m - ell) * (n - N*ell)))``, kept small
    enough that ``K * (m - ell) * (n - N*ell) > max(m, n)``. The iteration is BLAST's,
    step for step, so the result is BLAST's even in the rare cases where its 20 steps do
    not converge and it keeps a smaller lower bound than the largest such integer.

    Parameters
    ----------
    params : KarlinAltschul
        Statistical parameters (from :func:`karlin_altschul`).
    query_length : int
        ``m``, the query length (> 0).
    db_residues : int
        ``n``, residues in the whole database (> 0).
    db_sequences : int
        ``N``, sequences in the database (> 0).

    Returns
    -------
    int
        The adjustment ``ell >= 0``.

    Examples
    --------
    A blastp query of 32 residues against 20 sequences of 6406 residues in all (BLOSUM62
    11/1): BLAST+ 2.2.26 reports a length adjustment (``Statistics_hsp-len``) of 7.

    >>> from gpualign_df.scoring import make_scoring
    >>> length_adjustment(karlin_altschul(make_scoring("BLOSUM62", gap_open=12, gap_extend=1)),
    ...                   32, 6406, 20)
    7
    """
    return solve_length_adjustment(params, query_length, db_residues, db_sequences)[0]


def solve_length_adjustment(params: KarlinAltschul, query_length: int, db_residues: int,
                            db_sequences: int) -> tuple[int, bool]:
    """:func:`length_adjustment` and whether BLAST's iteration converged (when it has not,
    after 20 steps, the result is the best lower bound seen, as in BLAST)."""
    k, log_k = params.k, math.log(params.k)
    alpha_d_lambda, beta = params.alpha / params.lambda_, params.beta
    m, n, big_n = float(query_length), float(db_residues), float(db_sequences)
    max_iterations = 20

    # Largest ell with K * (m - ell) * (n - N*ell) >= max(m, n): the smaller root of
    # N ell^2 - (mN + n) ell + (nm - max(m, n)/K), in the cancellation-free form.
    a, mb, c = big_n, m * big_n + n, n * m - max(m, n) / k
    if c < 0:
        return 0, False
    ell_max = 2 * c / (mb + math.sqrt(mb * mb - 4 * a * c))

    ell_min, ell_next, converged = 0.0, 0.0, False
    for i in range(1, max_iterations + 1):
        ell = ell_next
        ss = (m - ell) * (n - big_n * ell)
        ell_bar = alpha_d_lambda * (log_k + math.log(ss)) + beta
        if ell_bar >= ell:  # ell is no bigger than the fixed point
            ell_min = ell
            if ell_bar - ell_min <= 1.0:
                converged = True
                break
            if ell_min == ell_max:  # no more points to check
                break
        else:  # ell is beyond the fixed point
            ell_max = ell
        if ell_min <= ell_bar <= ell_max:
            ell_next = ell_bar
        else:
            ell_next = ell_max if i == 1 else (ell_min + ell_max) / 2
    if not converged:
        return int(ell_min), False  # the best value seen, as BLAST
    result = int(ell_min)
    # floor(ell_min) is taken to be floor(fixed point), unless ceil(ell_min) is still at
    # or below the fixed point.
    ceiling = math.ceil(ell_min)
    if ceiling <= ell_max:
        ss = (m - ceiling) * (n - big_n * ceiling)
        if alpha_d_lambda * (log_k + math.log(ss)) + beta >= ceiling:
            result = int(ceiling)
    return result, True


def effective_search_space(params: KarlinAltschul, query_length: int, db_residues: int,
                           db_sequences: int) -> int:
    """BLAST's effective search space for one query length (``BLAST_CalcEffLengths``).

    ``max(n - N*ell, 1) * (m - ell)`` in integers, with ``ell`` from
    :func:`length_adjustment`.

    Parameters
    ----------
    params : KarlinAltschul
        Statistical parameters (from :func:`karlin_altschul`).
    query_length, db_residues, db_sequences : int
        ``m``, ``n`` and ``N`` as in :func:`length_adjustment`.

    Returns
    -------
    int
        The effective search space.

    Examples
    --------
    The blastp search of :func:`length_adjustment`: BLAST+ reports an effective search
    space of 156650 = (32 - 7) * (6406 - 20*7).

    >>> from gpualign_df.scoring import make_scoring
    >>> effective_search_space(
    ...     karlin_altschul(make_scoring("BLOSUM62", gap_open=12, gap_extend=1)), 32, 6406, 20)
    156650
    """
    _check_database(db_residues, db_sequences)
    if query_length < 1:
        raise ValueError(f"query lengths must be positive, got {query_length}")
    ell = length_adjustment(params, query_length, db_residues, db_sequences)
    # BLAST floors the effective database at 1; the adjustment keeps n - N*ell >= 1 for
    # valid sizes anyway (K (m - ell)(n - N ell) >= max(m, n) > 0 in integers).
    effective_db = max(int(db_residues) - int(db_sequences) * ell, 1)
    return effective_db * (int(query_length) - ell)


def _check_database(db_residues: int, db_sequences: int) -> None:
    if int(db_residues) < 1 or int(db_sequences) < 1:
        raise ValueError("the database needs at least one sequence and one residue, got "
                         f"db_residues={db_residues}, db_sequences={db_sequences}")


def evalues_and_bitscores(scores: ArrayLike, query_lengths: ArrayLike, db_residues: int,
                          db_sequences: int, params: KarlinAltschul
                          ) -> tuple[np.ndarray, np.ndarray]:
    """E-values and bit scores of raw alignment scores, as BLAST computes them.

    For each row, ``evalue = searchsp * K * exp(-lambda * S)`` with ``searchsp`` the
    effective search space of the row's query length (:func:`effective_search_space`,
    computed once per distinct length) and ``S`` the raw score, rounded down to even first
    where ``params.round_down``; ``bitscore = (lambda * S - ln K) / ln 2`` with the raw
    score.

    Parameters
    ----------
    scores : array_like
        Raw alignment scores, one per row (a missing score, NaN or ``pd.NA``, gives NaN in
        both outputs).
    query_lengths : array_like
        Query length of each row (broadcast against ``scores``; a scalar serves all rows).
    db_residues : int
        Residues in the whole database searched (all targets).
    db_sequences : int
        Sequences in the database.
    params : KarlinAltschul
        From :func:`karlin_altschul`.

    Returns
    -------
    evalues, bitscores : numpy.ndarray
        ``float64`` arrays shaped like the broadcast inputs.

    Examples
    --------
    >>> from gpualign_df.scoring import make_scoring
    >>> params = karlin_altschul(make_scoring("BLOSUM62", gap_open=12, gap_extend=1))
    >>> evalues, bits = evalues_and_bitscores([50, 51], [32, 32], 6406, 20, params)
    >>> [f"{e:.4g}" for e in evalues], [f"{b:.2f}" for b in bits]
    (['0.01023', '0.007833'], ['23.87', '24.25'])
    """
    score_array, length_array = np.broadcast_arrays(np.asarray(scores, dtype=np.float64),
                                                    np.asarray(query_lengths))
    _check_database(db_residues, db_sequences)
    if length_array.size and not np.issubdtype(length_array.dtype, np.integer):
        if not np.all(np.mod(length_array, 1) == 0):
            raise ValueError("query lengths must be integers")
    lengths = length_array.astype(np.int64)
    if lengths.size and lengths.min() < 1:
        raise ValueError(f"query lengths must be positive, got {int(lengths.min())}")

    distinct, inverse = np.unique(lengths, return_inverse=True)
    # The search space is an integer (Int8 in BLAST) that can pass 2**53: take the product
    # in Python ints, then convert once, as BLAST's (double) cast.
    space = np.array([float(effective_search_space(params, int(m), db_residues, db_sequences))
                      for m in distinct], dtype=np.float64)
    search_space = space[inverse.reshape(lengths.shape)] if distinct.size else \
        np.zeros(lengths.shape)

    log_k = math.log(params.k)
    evalue_scores = np.floor(score_array / 2) * 2 if params.round_down else score_array
    evalues = search_space * np.exp(-params.lambda_ * evalue_scores + log_k)
    bitscores = (params.lambda_ * score_array - log_k) / math.log(2)
    return evalues, bitscores
