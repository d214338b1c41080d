"""The CPU search's local score pass: 32 targets in the lanes of a 16-bit vector
(:mod:`gpualign_df.kernels.cpu_search`), its saturation rescue, and which searches take it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpualign_df
from gpualign_df import api, engine
from gpualign_df.kernels import cpu_search
from helpers import mutate, parasail_scores, random_sequences, read_fasta, shared_file

PROTEIN = "ARNDCQEGHILKMFPSTWYV"


def _job(queries, targets, **options):
    settings = dict(how="search", mode="sw", matrix="BLOSUM62", match=None, mismatch=None,
                    gap_open=11, gap_extend=1, free_ends=None, top_k=5, traceback=False,
                    cigar_style="=", clip=None, backend="cpu", progress=False)
    settings.update(options)
    job = api.resolve_job(queries, targets, **settings)
    return api.encode_job(pd.Series(queries, dtype=object), pd.Series(targets, dtype=object),
                          job)


def _lane_scores(encoded, first=0, count=None):
    queries, targets = encoded.queries, encoded.targets
    count = len(queries) - first if count is None else count
    from gpualign_df import config

    groups = cpu_search.lane_layout(targets.lengths, targets.valid,
                                    config.settings().cpu_search_group_columns)

    return engine.local_search_scores(queries, targets, first, count, groups, encoded.job,
                                      config.settings())


def _pair_scores(encoded, first=0, count=None):
    queries, targets = encoded.queries, encoded.targets
    count = len(queries) - first if count is None else count
    pair_query, pair_target = np.meshgrid(np.arange(first, first + count),
                                          np.arange(len(targets)), indexing="ij")
    arrays = engine.run_pairs(queries, targets, pair_query.ravel(), pair_target.ravel(),
                              encoded.job, traceback=False)
    return np.where(arrays.valid, arrays.score, 0).reshape(count, len(targets))


def test_lane_scores_equal_the_pair_engine_on_every_length_class(monkeypatch):
    """Queries and targets from empty to a few hundred residues, across lane boundaries
    (more targets than a group, groups of mixed lengths, a last group part empty), a null
    on each side: every score equals the pair engine's, and parasail's where both are
    non-empty; with the 8-bit first pass and without it."""
    rng = np.random.default_rng(5)
    queries = random_sequences(rng, 7, PROTEIN, 300) + ["", "W", None]
    # the queries themselves among the targets: self hits past the 8-bit lanes' 127
    targets = random_sequences(rng, 70, PROTEIN, 260, 1) + ["", "C", None] + \
        random_sequences(rng, 3, PROTEIN, 12) + queries[:4]
    encoded = _job(queries, targets)
    lanes = _lane_scores(encoded, 1, 8)   # a block that does not start at query 0
    assert lanes.max() > 127
    assert np.array_equal(lanes, _pair_scores(encoded, 1, 8))
    fits = cpu_search.fits
    monkeypatch.setattr(cpu_search, "fits", lambda *args, bits=16: bits == 16 and fits(*args))
    assert np.array_equal(_lane_scores(encoded, 1, 8), lanes)
    pairs = [(q, t) for q in queries[1:9] for t in targets if q and t]
    expected = parasail_scores([q for q, _ in pairs], [t for _, t in pairs],
                               encoded.job.scoring, "sw")
    got = [lanes[i, j] for i, q in enumerate(queries[1:9]) for j, t in enumerate(targets)
           if q and t]
    assert got == expected


def test_real_proteins_equal_the_pair_engine():
    """ADEPT proteins (real lengths and composition) against 100 others."""
    proteins = read_fasta(shared_file("adept_proteins_30k.fasta.gz"), 112)
    encoded = _job(proteins[:12], proteins[12:])
    assert np.array_equal(_lane_scores(encoded), _pair_scores(encoded))


def test_saturated_lanes_are_scored_again_in_32_bits(monkeypatch):
    """Scores past 32,767 saturate the 16-bit lanes; those pairs, and only those, are
    scored again by the pair engine's 32-bit path, and every score is exact."""
    rng = np.random.default_rng(8)
    base = random_sequences(rng, 1, "ACGT", 80, 80)[0]
    queries = [base, base[:20]]
    targets = [base, base[10:70], random_sequences(rng, 1, "ACGT", 50, 50)[0]]
    encoded = _job(queries, targets, matrix=None, match=1000, mismatch=-1000, gap_open=1500,
                   gap_extend=10)
    rescued = []
    run_pairs = engine._run_pairs_cpu

    def counting(queries, targets, pair_query, pair_target, *rest):
        rescued.append(list(zip(pair_query.tolist(), pair_target.tolist())))
        return run_pairs(queries, targets, pair_query, pair_target, *rest)

    monkeypatch.setattr(engine, "_run_pairs_cpu", counting)
    lanes = _lane_scores(encoded)
    monkeypatch.setattr(engine, "_run_pairs_cpu", run_pairs)
    assert lanes[0, 0] == 80_000 and lanes[0, 1] == 60_000
    assert rescued == [[(0, 0), (0, 1)]]
    assert np.array_equal(lanes, _pair_scores(encoded))


@pytest.mark.parametrize("traceback", [True, False])
@pytest.mark.parametrize("options,takes_lanes", [
    (dict(mode="sw"), True),
    (dict(mode="nw"), False),                                  # global: the pair engine
    (dict(mode="sg"), False),
    (dict(mode="sw", matrix=None, match=5000, mismatch=-1), False),  # scores past 12 bits
])
def test_search_takes_the_lane_pass_for_local_scores_that_fit(monkeypatch, settings, options,
                                                              takes_lanes, traceback):
    """A local search whose scores fit takes the lane pass and its kept rows' end cells
    from the lanes too (with traceback, kept pairs beyond ``lane_max_length``: each is then
    aligned in the rectangle that holds its alignment); other modes and larger scores the
    pair engine; either way the frame equals the pair engine's."""
    settings(lane_max_length=40)
    rng = np.random.default_rng(3)
    alphabet = "ACGT" if "match" in options else PROTEIN
    queries = random_sequences(rng, 4, alphabet, 60, 1)
    targets = random_sequences(rng, 40, alphabet, 70, 1)
    arguments = dict(how="search", top_k=3, backend="cpu", gap_open=11, gap_extend=1,
                     traceback=traceback)
    arguments.update(options)
    if "match" not in arguments:
        arguments["matrix"] = "BLOSUM62"
    calls = []
    search_groups = cpu_search.search_groups

    def counting(*args):
        calls.append(1)
        return search_groups(*args)

    ends = []
    search_ends = cpu_search.search_ends

    def counting_ends(*args):
        ends.append(1)
        return search_ends(*args)

    monkeypatch.setattr(cpu_search, "search_groups", counting)
    monkeypatch.setattr(cpu_search, "search_ends", counting_ends)
    frame = gpualign_df.align(queries, targets, **arguments)
    assert bool(calls) == takes_lanes
    assert bool(ends) == takes_lanes
    monkeypatch.setattr(cpu_search, "fits", lambda *args, **options: False)
    calls.clear()
    ends.clear()
    pair_engine = gpualign_df.align(queries, targets, **arguments)
    assert not calls and not ends
    pd.testing.assert_frame_equal(frame, pair_engine)


@pytest.mark.parametrize("traceback", [False, True])
def test_kept_rows_end_cells_break_ties_as_the_pair_engine(monkeypatch, settings, traceback):
    """Repeats give many cells of the best score: the lanes' end cells take the smallest
    end row, then the smallest end column, as the pair engine does; a kept pair whose lane
    saturates, a null target and more kept targets than a vector's lanes (two runs of one
    query) included. With traceback (pairs beyond ``lane_max_length``) each kept pair is
    aligned again in the rectangle its end cell and :func:`cpu_search.hit_start` bound:
    the same starts and CIGARs as the whole pair's among all those ties."""
    settings(lane_max_length=16)
    rng = np.random.default_rng(21)
    unit = "ACGTTG"
    queries = [unit * 6, "GGGG" * 5, "ACGT" * 9, None]
    targets = ([unit * k for k in range(1, 9)] + ["G" * 30, "GGGGAGGGG" * 3, None]
               + [("ACGT" * 12)[k:] for k in range(20)]
               + random_sequences(rng, 14, "ACGT", 40, 1))
    arguments = dict(how="search", top_k=40, backend="cpu", match=2, mismatch=-3,
                     gap_open=0, gap_extend=0, traceback=traceback)
    frame = gpualign_df.align(queries, targets, **arguments)
    monkeypatch.setattr(cpu_search, "fits", lambda *args, **options: False)
    pd.testing.assert_frame_equal(frame, gpualign_df.align(queries, targets, **arguments))
    big = dict(arguments, match=3000, mismatch=-3000, gap_open=1000, gap_extend=10)
    monkeypatch.undo()
    frame = gpualign_df.align(queries[:1], [unit * 3, unit * 8], **big)
    assert frame["score"].max() == 3000 * 36        # past the 16-bit lanes: scored again
    monkeypatch.setattr(cpu_search, "fits", lambda *args, **options: False)
    pd.testing.assert_frame_equal(frame, gpualign_df.align(queries[:1], [unit * 3, unit * 8],
                                                           **big))


@pytest.mark.parametrize("scheme", [
    dict(matrix="BLOSUM62", gap_open=11, gap_extend=1),
    dict(matrix="BLOSUM62", gap_open=3, gap_extend=3),          # linear gaps
    dict(match=5, mismatch=-30, gap_open=5, gap_extend=5),    # an insertion beside a deletion
    dict(match=2, mismatch=-3, gap_open=0, gap_extend=0),     # free gaps: ties everywhere
])
def test_striped_end_cells_equal_the_pair_engine(scheme):
    """:func:`cpu_search.striped_end` (the kept pairs' end cells, one pair at a time down the
    striped query) against the pair engine: score and end cell on random and repetitive
    pairs of 0 to 150 residues (queries across several multiples of the 32 lanes, so the
    lazy-F passes carry gaps over lane boundaries), ties included."""
    rng = np.random.default_rng(11)
    alphabet = "ACGT" if "match" in scheme else PROTEIN
    queries = random_sequences(rng, 40, alphabet, 150, 0)
    targets = random_sequences(rng, 40, alphabet, 150, 0)
    for k in range(0, 40, 4):   # tandem repeats: many equal-scoring cells
        unit = "".join(rng.choice(list(alphabet), int(rng.integers(1, 4))))
        queries[k] = (unit * 60)[:int(rng.integers(1, 150))]
        targets[k] = (unit * 60)[:int(rng.integers(1, 150))]
    options = dict(mode="sw", traceback=False, backend="cpu", progress=False,
                   matrix=None, match=None, mismatch=None)
    options.update(scheme)
    expected = gpualign_df.align(queries, targets, **options)
    job = api.resolve_job(queries, targets, how="rowwise", free_ends=None, top_k=None,
                          cigar_style="=", clip=None, **options)
    encoded = api.encode_job(queries, targets, job)
    matrix = job.scoring.matrix
    for k in range(40):
        query = encoded.queries.codes[encoded.queries.offsets[k]:encoded.queries.offsets[k + 1]]
        target = encoded.targets.codes[encoded.targets.offsets[k]:
                                       encoded.targets.offsets[k + 1]]
        got = cpu_search.striped_end(cpu_search.striped_query(matrix, query), target,
                                     job.scoring.gap_open, job.scoring.gap_extend)
        row = expected.iloc[k]
        assert tuple(int(v) for v in got) == (row.score, row.query_end, row.target_end), k


@pytest.mark.parametrize("group_columns,rescue_share", [
    (1024, 4),      # the defaults: one group, saturated targets rescored one by one
    (16, 1000),     # many small groups, every saturated half rerun in 16-bit lanes
    (64, 1),        # a target longer than a group's plan sets its group's height
])
def test_targets_packed_back_to_back_in_lanes_equal_the_pair_engine(settings, group_columns,
                                                                    rescue_share):
    """Targets of 1 to 300 residues packed back to back in the lanes (a lane's next target
    starts on the row's border; its best is the finished target's), in few or many groups,
    with both 16-bit rescues of the 8-bit pass (self hits pass 127): every score equals the
    pair engine's."""
    settings(cpu_search_group_columns=group_columns, cpu_rescue_share=rescue_share)
    rng = np.random.default_rng(17)
    queries = random_sequences(rng, 5, PROTEIN, 300, 100)
    targets = (random_sequences(rng, 150, PROTEIN, 120, 1) + queries[:3]
               + [None, ""] + random_sequences(rng, 3, PROTEIN, 300, 280))
    encoded = _job(queries, targets)
    lanes = _lane_scores(encoded)
    assert lanes.max() > 127
    assert np.array_equal(lanes, _pair_scores(encoded))
    layout = cpu_search.lane_layout(encoded.targets.lengths, encoded.targets.valid,
                                    group_columns)
    assert sorted(layout.entry_target.tolist()) == [
        k for k, t in enumerate(targets) if t]          # every non-empty target once
    lengths = encoded.targets.lengths
    for g in range(len(layout)):      # a lane's targets one after another, inside the group
        chosen = slice(layout.group_entries[g], layout.group_entries[g + 1])
        for lane in np.unique(layout.entry_lane[chosen]):
            mine = layout.entry_lane[chosen] == lane
            starts = layout.entry_column[chosen][mine]
            ends = starts + lengths[layout.entry_target[chosen][mine]]
            assert (starts % cpu_search.COLUMNS_A_PASS == 0).all()
            assert (starts[1:] >= ends[:-1]).all() and ends[-1] <= layout.group_columns[g]


def test_best_of_rows_keeps_best_firsts_pairs_in_its_order():
    """The CPU search keeps each query's best ``top_k`` by a partition per row of its score
    matrix: the same positions, in the same order, as sorting every pair (ties by target,
    nulls last), on small matrices full of ties and nulls, ``top_k`` below, at and above
    the targets."""
    from gpualign_df.pairs import best_first, best_of_rows, search_pairs

    rng = np.random.default_rng(4)
    for _ in range(300):
        rows, columns = (int(v) for v in rng.integers(0, 7, 2) * [1, 5])
        top_k = int(rng.integers(1, 40))
        score = rng.integers(-3, 4, (rows, columns))
        valid = rng.random((rows, columns)) > 0.2
        pair_query, pair_target = search_pairs(rows, columns)
        expected = best_first(pair_query, pair_target, score.ravel(), valid.ravel(), top_k)
        assert best_of_rows(score, valid, top_k).tolist() == expected.tolist()


def test_search_of_every_length_class_equals_the_pair_engine(monkeypatch):
    """Queries of 10, 2,000 and 10,000 residues (one holding a mutated copy of a target,
    so its kept scores pass both 127 and the lanes' rescue) against targets of 10 to 1,200:
    the lanes' search (packed score pass, striped end cells, hits traced back in their
    rectangles) gives the pair engine's frame, CIGARs included."""
    rng = np.random.default_rng(23)
    targets = random_sequences(rng, 24, PROTEIN, 1200, 10)
    related = mutate(rng, targets[3], PROTEIN, 0.05)
    queries = [random_sequences(rng, 1, PROTEIN, 10, 10)[0],
               random_sequences(rng, 1, PROTEIN, 2000, 2000)[0],
               random_sequences(rng, 1, PROTEIN, 4000, 4000)[0] + related
               + random_sequences(rng, 1, PROTEIN, 6000 - len(related), 6000 - len(related))[0]]
    options = dict(how="search", top_k=3, matrix="BLOSUM62", gap_open=11, gap_extend=1,
                   backend="cpu", progress=False)
    frame = gpualign_df.align(queries, targets, **options)
    assert frame["score"].max() > 1000
    monkeypatch.setattr(cpu_search, "fits", lambda *args, **options: False)
    pd.testing.assert_frame_equal(frame, gpualign_df.align(queries, targets, **options))


def test_a_titin_length_target_stays_in_the_lanes(monkeypatch):
    """A 31,000-residue target (titin's length; 16-bit lane positions are not enough for
    its columns) is scored by the lanes and its end cell by the striped kernel, giving the
    pair engine's frame."""
    rng = np.random.default_rng(29)
    query = random_sequences(rng, 1, PROTEIN, 300, 300)[0]
    long_target = (random_sequences(rng, 1, PROTEIN, 20_000, 20_000)[0]
                   + mutate(rng, query, PROTEIN, 0.05)
                   + random_sequences(rng, 1, PROTEIN, 10_700, 10_700)[0])
    targets = random_sequences(rng, 6, PROTEIN, 200, 50) + [long_target]
    options = dict(how="search", top_k=2, matrix="BLOSUM62", gap_open=11, gap_extend=1,
                   backend="cpu", traceback=False)
    ends = []
    search_ends = cpu_search.search_ends
    monkeypatch.setattr(cpu_search, "search_ends",
                        lambda *args: ends.append(1) or search_ends(*args))
    frame = gpualign_df.align([query], targets, **options)
    assert ends and frame["target"][0] == 6 and frame["target_end"][0] > 20_000
    monkeypatch.setattr(cpu_search, "fits", lambda *args, **options: False)
    pd.testing.assert_frame_equal(frame, gpualign_df.align([query], targets, **options))


def test_end_rows_past_16_bits_in_the_striped_kernel(monkeypatch):
    """A 34,000-residue query (titin's order) whose best hit ends past row 32,767: the
    striped kernel counts end rows in full integers, and the frame equals the pair
    engine's, score-only and through the search."""
    rng = np.random.default_rng(37)
    target = random_sequences(rng, 1, PROTEIN, 120, 120)[0]
    query = (random_sequences(rng, 1, PROTEIN, 33_000, 33_000)[0]
             + mutate(rng, target, PROTEIN, 0.03)
             + random_sequences(rng, 1, PROTEIN, 800, 800)[0])
    targets = [target] + random_sequences(rng, 3, PROTEIN, 60, 20)
    options = dict(matrix="BLOSUM62", gap_open=11, gap_extend=1, backend="cpu",
                   traceback=False)
    for how, extra in (("rowwise", {}), ("search", dict(top_k=2))):
        frame = gpualign_df.align([query] * (4 if how == "rowwise" else 1), targets,
                                  how=how, **options, **extra)
        assert frame["query_end"].max() > 33_000
        with monkeypatch.context() as patch:
            patch.setattr(engine, "striped_scores", lambda *args: False)
            patch.setattr(cpu_search, "fits", lambda *args, **options: False)
            pd.testing.assert_frame_equal(frame, gpualign_df.align(
                [query] * (4 if how == "rowwise" else 1), targets, how=how, **options,
                **extra))


def test_profiles_built_once_or_per_item_give_one_frame(settings, monkeypatch):
    """A search builds its groups' 8-bit profiles once for all its queries where they fit
    ``cpu_profile_bytes``, else each work item builds its own: the same frame."""
    rng = np.random.default_rng(41)
    queries = random_sequences(rng, 9, PROTEIN, 200, 20)
    targets = random_sequences(rng, 120, PROTEIN, 150, 1) + queries[:2]
    options = dict(how="search", top_k=4, matrix="BLOSUM62", gap_open=11, gap_extend=1,
                   backend="cpu")
    built = []
    fill = cpu_search.fill_group_profiles
    monkeypatch.setattr(cpu_search, "fill_group_profiles",
                        lambda *args: built.append(1) or fill(*args))
    shared = gpualign_df.align(queries, targets, **options)
    assert built
    built.clear()
    settings(cpu_profile_bytes=0, cpu_search_group_columns=64)
    pd.testing.assert_frame_equal(shared, gpualign_df.align(queries, targets, **options))
    assert not built
