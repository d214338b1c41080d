"""Two ways around the W1 traceback fill's direction bits, sized before building either.

The grouped traceback fill takes about twice the time of the score-only fill: the four
direction bits of every cell and their stores (BENCHMARKS.md, "What bounds the fills").
Either way below would drop them from the fill:

* **Exact bands** (``--bands``, CPU only): a path that ends at cell (ie, je) with score S
  holds no cell whose diagonal differs from the end's by more than the gaps its score can
  pay for: ``(ie * best_pair - S - gap_open) / gap_extend + 1`` (none where that is below
  1). A traceback fill restricted to such a band gives the same path, ties included. The
  report gives the share of W1's pairs whose band half-width stays within 4, 8, 16, 32.
* **Recomputing walk** (default, on a GPU): the fill keeps only boundaries (a lane's
  first row each column, its rows every C columns) and the walk recomputes the tiles of
  one lane's rows by C columns that its path crosses, one thread a pair, scalar int32
  cells with the four bits, then walks the tile. The tiles are those of the engine's own
  CIGARs of W1 (sorted by target length, as the plan sorts). The probe times three forms
  for C = 8 and 16: ``computed`` (boundaries made up in registers, then the tile's walk
  from its corner), ``alone`` (no boundary loads, no walk: the recomputation's own cost,
  scores by a compare) and ``walked`` (``alone`` plus the walk). Its values are made up,
  so it times work and checks nothing; beside it, the engine's own fill, walk and CIGAR
  kernels of the same job.

``python -m benchmarks.investigations.recompute_walk [--modes nw sw] [--bands]``
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys

from benchmarks.harness import W1_OPTIONS, add_data_dir, kernel_seconds, w1_pairs

#: A lane's rows in the 8-lane class W1 runs on: a tile's height.
TILE_ROWS = 19
#: The probe's forms (see the module's docstring).
FORMS = {"computed": 1, "alone": 3, "walked": 4}
_CIGAR_RUN = re.compile(r"(\d+)([=XIDM])")
#: W1's pair scores: A, C, G, T against themselves, and any other pair.
MATCH, MISMATCH = W1_OPTIONS["match"], W1_OPTIONS["mismatch"]


def path_tiles(cigar: str, end_i: int, end_j: int, columns: int) -> list[tuple[int, int]]:
    """The tiles (lane, column group) a CIGAR's path crosses, from its end back, each once.

    >>> path_tiles("3=1I2=", 6, 5, 2)
    [(0, 2), (0, 1), (0, 0)]
    """
    i, j = end_i, end_j
    tiles: list[tuple[int, int]] = []
    for length, op in reversed(_CIGAR_RUN.findall(cigar)):
        for _ in range(int(length)):
            tile = ((i - 1) // TILE_ROWS, (j - 1) // columns)
            if i >= 1 and j >= 1 and (not tiles or tiles[-1] != tile):  # (not a border)
                tiles.append(tile)
            i -= op != "D"
            j -= op != "I"
    return tiles


def band_shares(frame, widths=(4, 8, 16, 32)) -> dict[int, float]:
    """The share of a frame's pairs whose exact band half-width (module docstring) is at
    most each of ``widths`` (W1's scoring: best pair score :data:`MATCH`)."""
    import numpy as np

    slack = frame["query_end"].to_numpy() * MATCH - frame["score"].to_numpy()
    gap_open, gap_extend = W1_OPTIONS["gap_open"], W1_OPTIONS["gap_extend"]
    half = np.where(slack >= gap_open, (slack - gap_open) // gap_extend + 1, 0)
    return {width: float((half <= width).mean()) for width in widths}


def make_probe(columns: int, form: int):
    """The probe kernel for tiles of ``columns`` columns in form ``form`` (:data:`FORMS`)."""
    from numba import cuda, int32, uint64

    rows = TILE_ROWS
    edge = columns + 1
    match, mismatch = int32(MATCH), int32(MISMATCH)

    @cuda.jit
    def probe(query, target, query_at, target_at, target_lengths, tile_at, tiles, sub, go, ge,
              out):
        pair = cuda.grid(1)
        if pair >= target_lengths.shape[0]:
            return
        row_bits = cuda.local.array(rows, uint64)
        h_top = cuda.local.array(edge, int32)
        f_top = cuda.local.array(edge, int32)
        codes = cuda.local.array(columns, int32)
        q0, t0, n = query_at[pair], target_at[pair], target_lengths[pair]
        total = int32(0)
        for k in range(tile_at[pair], tile_at[pair + 1]):
            lane, group = tiles[k] >> 16, tiles[k] & 0xFFFF
            for c in range(edge):
                h_top[c] = (k * 7 + c) & 255
                f_top[c] = (k * 5 + c) & 127
            for c in range(columns):
                j = group * columns + c
                codes[c] = int32(target[t0 + j]) if j < n else 4
            for r in range(rows):
                code = int32(query[q0 + lane * rows + r])
                h_left = int32((k + r * 3) & 255)
                d_left = int32((k + r * 5) & 255)
                h_diag = h_top[0]
                h_top[0] = h_left
                bits = uint64(0)
                for c in range(columns):
                    h_up = h_top[c + 1]
                    i_open = h_up - go
                    i_extend = f_top[c + 1] - ge
                    i_value = max(i_open, i_extend)
                    d_open = h_left - go
                    d_extend = d_left - ge
                    d_value = max(d_open, d_extend)
                    if form == 1:
                        diagonal = h_diag + sub[code * 5 + codes[c]]
                    else:
                        diagonal = h_diag + (match if code == codes[c] else mismatch)
                    h = max(diagonal, max(i_value, d_value))
                    source = 0 if diagonal == h else (1 if i_value == h else 2)
                    nibble = (source | (4 if i_extend > i_open else 0)
                              | (8 if d_extend > d_open else 0))
                    bits |= uint64(nibble) << uint64(4 * c)
                    h_diag = h_up
                    h_top[c + 1] = h
                    f_top[c + 1] = i_value
                    h_left = h
                    d_left = d_value
                row_bits[r] = bits
                if form == 3:
                    total ^= int32(bits) ^ int32(bits >> uint64(32))
            r, c, state = rows - 1, columns - 1, 0   # the tile's walk from its corner
            while form != 3 and r >= 0 and c >= 0:
                nibble = int32((row_bits[r] >> uint64(4 * c)) & uint64(15))
                if state == 0:
                    state = nibble & 3
                if state == 0:
                    r -= 1
                    c -= 1
                elif state == 1:
                    state = 1 if nibble & 4 else 0
                    r -= 1
                else:
                    state = 2 if nibble & 8 else 0
                    c -= 1
                total += 1
        out[pair] = total

    return probe


def probe_times(frame, queries, targets, columns: int, repeat: int) -> dict[str, float]:
    """Median warm milliseconds of each form for tiles of ``columns`` columns."""
    import numpy as np
    from numba import cuda

    order = np.argsort([len(t) for t in targets], kind="stable")
    lut = np.full(256, 4, np.uint8)
    lut[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4)
    cigars, end_i, end_j = (frame[name].to_numpy() for name in ("cigar", "query_end",
                                                                "target_end"))
    tile_lists = [path_tiles(cigars[k], int(end_i[k]), int(end_j[k]), columns)
                  for k in order]
    tile_at = np.zeros(len(order) + 1, np.int64)
    np.cumsum([len(tiles) for tiles in tile_lists], out=tile_at[1:])
    tiles = np.array([lane << 16 | group for pair in tile_lists for lane, group in pair],
                     np.int32)

    def encoded(texts):
        data = [texts[k].encode() for k in order]
        at = np.zeros(len(data) + 1, np.int64)
        np.cumsum([len(x) for x in data], out=at[1:])
        return lut[np.frombuffer(b"".join(data), np.uint8)], at

    (query, query_at), (target, target_at) = encoded(queries), encoded(targets)
    sub = np.full(25, MISMATCH, np.int32)
    sub[[0, 6, 12, 18]] = MATCH
    arrays = [cuda.to_device(x) for x in (query, target, query_at, target_at,
                                          np.diff(target_at).astype(np.int32), tile_at, tiles,
                                          sub)]
    out = cuda.device_array(len(order), np.int32)
    print(f"tiles of {columns} columns: {len(tiles) / len(order):.2f} a pair", flush=True)
    times = {}
    for name, form in FORMS.items():
        probe = make_probe(columns, form)[(len(order) + 127) // 128, 128]
        start, stop = cuda.event(), cuda.event()
        runs = []
        for _ in range(repeat + 1):  # the first call compiles
            start.record()
            probe(*arrays, W1_OPTIONS["gap_open"], W1_OPTIONS["gap_extend"], out)
            stop.record()
            stop.synchronize()
            runs.append(cuda.event_elapsed_time(start, stop))
        times[name] = statistics.median(runs[1:])
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    add_data_dir(parser)
    parser.add_argument("--modes", nargs="+", default=["nw", "sw"])
    parser.add_argument("--columns", nargs="+", type=int, default=[8, 16],
                        help="tile widths (at most 16: a row's bits in 64)")
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bands", action="store_true",
                        help="only the exact bands' shares, on the CPU engine")
    args = parser.parse_args()
    import pandas as pd

    import gpualign_df

    queries, targets = w1_pairs(args.data_dir, 1 if args.bands else args.replicate)
    backend = "cpu" if args.bands else "cuda"
    for mode in args.modes:
        def run(mode=mode):
            return gpualign_df.align(pd.Series(queries), pd.Series(targets), mode=mode,
                                     backend=backend, progress=False, **W1_OPTIONS)
        frame = run()
        if args.bands:
            shares = band_shares(frame)
            print(mode, "band half-width within " + ", ".join(
                f"{width}: {share:.1%}" for width, share in shares.items()), flush=True)
            continue
        kernels = [kernel_seconds(run) for _ in range(args.repeat)]
        print(mode, "engine kernels (ms): " + ", ".join(
            f"{name} {statistics.median(k[name] for k in kernels) * 1e3:.3f}"
            for name in ("fill", "walk", "cigar")), flush=True)
        for columns in args.columns:
            assert 1 <= columns <= 16
            times = probe_times(frame, queries, targets, columns, args.repeat)
            print(mode, f"{columns} columns, probe (ms): " + ", ".join(
                f"{name} {ms:.3f}" for name, ms in times.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
