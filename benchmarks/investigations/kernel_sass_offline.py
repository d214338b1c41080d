"""SASS of a long-pair band fill, a grouped protein-search kernel or a grouped pair kernel
for a GPU architecture, on a machine without a GPU, and its hot loop by opcode.

The kernel is compiled as :mod:`sass_offline` compiles the inter-task fills (numba to LTO-IR,
the linked CUDA C by NVRTC, nvJitLink, nvdisasm; the same NVIDIA wheels, named in that
module's docstring). The hot loop is the shortest loop holding the named opcodes: for a band
fill, the batch loop of unrolled plain steps where a long band spends its time (it stores
border words and computes cells); for the search kernel, one query row over a lane's
database columns (it reads the shared table and computes cells; not the copy of the loop
that the compiler keeps for a divergent warp, whose shuffles are collective). Examples::

    export CUDA_HOME=/tmp/cudatk/nvidia/cu13 LD_LIBRARY_PATH=/tmp/cudatk/nvidia/cu13/lib \\
        PYTHONPATH=/tmp/cudatk
    python -m benchmarks.investigations.kernel_sass_offline band --mode nw --rows 2 \\
        --last-column 1
    python -m benchmarks.investigations.kernel_sass_offline search --lanes 8 --columns 16

``band`` options: ``--mode sw|nw|sg`` (semi-global: the target's ends free), ``--rows
2|4|8``, ``--traceback 0|1``, ``--byte-rows 0|1``, ``--checkpointed 0|1``, ``--split
whole|snapshot|resume``, ``--last-column 0|1`` (the halves' fill). ``search`` options:
``--lanes``, ``--columns`` (a length class), ``--unroll 1|2|4`` (steps an iteration),
``--copies`` (of the pair table). ``pairs`` options: ``--lanes``, ``--rows`` (a class),
``--traceback 0|1``, ``--mode sw|nw|sg`` (semi-global with every end free),
``--max-registers`` (the engine caps the traceback kernel at 128), ``--profile 0|1`` (the
byte profile's ``PRMT`` entries instead of the shared table); it also lists the sizes
of the loops holding a step's reads and cells (the largest: the unrolled steps). ``block`` (the small batches' kernel; its hot loop is a step of the
fill, barrier included; semi-global with every end free, as GATK's calls run):
``--mode``, ``--traceback 0|1``, ``--columns 1..4`` (a step's; default the
``small_batch_columns`` setting), ``--rows 2..8`` (of a strip). All: ``--arch 90``, ``--sass FILE`` (write the
whole listing).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from benchmarks.investigations.inspect_kernels import innermost_loop, loops_holding
from benchmarks.investigations.sass_offline import kernel_sass

#: mode code and free ends (query start, query end, target start, target end)
MODES = {"sw": (0, (False,) * 4), "nw": (1, (False,) * 4),
         "sg": (2, (False, False, True, True))}
SPLITS = {"whole": 0, "snapshot": 1, "resume": 2}


def band_signature():
    """Argument types of the band fill as :class:`gpualign_df.gpu.long.BandFill` launches
    it (CuPy arrays, Python integers)."""
    from numba import types

    i64, i32 = types.int64[::1], types.int32[::1]
    u8, n64 = types.uint8[::1], types.int64
    return (u8, u8, types.int64[:, ::1], i64, i64, n64, i32, n64, n64, n64,
            i64, n64, i64, n64, i64, n64, n64, types.uint32[::1], n64, i32, n64,
            i32, i32, i32, i64, i64, i32)


def search_signature():
    """Argument types of the grouped search kernel as :func:`gpualign_df.gpu.search`
    launches it."""
    from numba import types

    i64, i32, n64 = types.int64[::1], types.int32[::1], types.int64
    return (i32, i64, i64, types.uint8[::1], i64, i32, n64, types.int64[:, ::1], i32, n64,
            n64, n64, types.int32[:, ::1])


def pairs_signature():
    """Argument types of the grouped pair kernel as :func:`gpualign_df.gpu.batches`
    launches it."""
    from numba import types

    i64, i32, n64, u8 = types.int64[::1], types.int32[::1], types.int64, types.uint8[::1]
    table = types.int64[:, ::1]
    return (u8, i64, i64, u8, i64, i64, i64, i64, table, i32, n64, i32, i32,
            n64, n64, n64, n64, i64, i32, i32, i32, types.uint32[::1], n64, n64, table, u8, u8)


def block_signature():
    """Argument types of the small batches' block kernel as
    :func:`gpualign_df.gpu.small.align_small` launches it."""
    from numba import types

    i32, n64, u8, u32 = types.int32[::1], types.int64, types.uint8[::1], types.uint32[::1]
    return (u8, u8, types.int64[::1], n64, i32, n64, n64, n64, u8, u8, u32, i32, u32, i32, u8)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kinds = parser.add_subparsers(dest="kernel", required=True)
    band_parser = kinds.add_parser("band")
    band_parser.add_argument("--mode", choices=sorted(MODES), default="nw")
    band_parser.add_argument("--rows", type=int, choices=(2, 4, 8), default=4)
    band_parser.add_argument("--traceback", type=int, choices=(0, 1), default=0)
    band_parser.add_argument("--byte-rows", type=int, choices=(0, 1), default=1)
    band_parser.add_argument("--checkpointed", type=int, choices=(0, 1), default=0)
    band_parser.add_argument("--split", choices=sorted(SPLITS), default="whole")
    band_parser.add_argument("--last-column", type=int, choices=(0, 1), default=0)
    search_parser = kinds.add_parser("search")
    search_parser.add_argument("--lanes", type=int, default=8)
    search_parser.add_argument("--columns", type=int, default=16)
    search_parser.add_argument("--unroll", type=int, choices=(1, 2, 4), default=4)
    search_parser.add_argument("--copies", type=int, choices=(1, 2, 4, 8), default=4)
    pairs_parser = kinds.add_parser("pairs")
    pairs_parser.add_argument("--lanes", type=int, default=8)
    pairs_parser.add_argument("--rows", type=int, default=24)
    pairs_parser.add_argument("--traceback", type=int, choices=(0, 1), default=1)
    pairs_parser.add_argument("--mode", choices=sorted(MODES), default="sw",
                              help="with traceback (semi-global: every end free, as W1's)")
    pairs_parser.add_argument("--max-registers", type=int, default=None,
                              help="the compiler's cap (the engine's: the "
                                   "pair_group_registers setting, with traceback)")
    pairs_parser.add_argument("--profile", type=int, choices=(0, 1), default=0,
                              help="scores picked from the targets' columns by PRMT "
                                   "(query codes 0-3) instead of the shared table")
    block_parser = kinds.add_parser("block")
    block_parser.add_argument("--mode", choices=sorted(MODES), default="sg")
    block_parser.add_argument("--traceback", type=int, choices=(0, 1), default=1)
    block_parser.add_argument("--columns", type=int, choices=(1, 2, 3, 4), default=None,
                              help="columns a thread computes a step (default: the "
                                   "small_batch_columns setting)")
    block_parser.add_argument("--rows", type=int, choices=range(2, 9), default=5,
                              help="query rows of a strip (small_batch_rows)")
    for each in (band_parser, search_parser, pairs_parser, block_parser):
        each.add_argument("--arch", type=int, default=90)
        each.add_argument("--sass", type=Path, default=None)
    args = parser.parse_args(argv)

    excluded = ("WARPSYNC",)
    if args.kernel == "band":
        from gpualign_df.kernels import band

        code, flags = MODES[args.mode]
        kernel = band.band_kernel(code, *flags, bool(args.traceback), True, args.rows,
                                  byte_rows=bool(args.byte_rows),
                                  checkpointed=bool(args.checkpointed),
                                  split=SPLITS[args.split],
                                  last_column=bool(args.last_column))
        signature, loop_opcodes = band_signature(), ("STG", "VIADDMNMX")
        name = (f"band fill {args.mode} rows={args.rows} traceback={args.traceback} "
                f"byte_rows={args.byte_rows} checkpointed={args.checkpointed} "
                f"split={args.split} last_column={args.last_column}")
    elif args.kernel == "pairs":
        from gpualign_df.kernels import pairs16

        code, flags = MODES[args.mode]
        if args.mode == "sg":
            flags = (True,) * 4
        kernel = pairs16.pair_group_kernel(args.lanes, args.rows, True,
                                           traceback=bool(args.traceback),
                                           max_registers=args.max_registers,
                                           mode=(code, *flags), profile=bool(args.profile))
        signature = pairs_signature()
        loop_opcodes = ("PRMT" if args.profile else "LDS", "VIADDMNMX")
        name = (f"grouped pairs {args.lanes} x {args.rows} {args.mode}, "
                f"traceback={args.traceback}, profile={args.profile}, "
                f"registers capped at {args.max_registers}")
    elif args.kernel == "block":
        from gpualign_df import config
        from gpualign_df.gpu.long import walk_lanes
        from gpualign_df.kernels import block

        code, flags = MODES[args.mode]
        if args.mode == "sg":
            flags = (True,) * 4
        tuning = config.Settings()
        lanes = walk_lanes(code, tuning)
        columns = args.columns or tuning.small_batch_columns
        kernel = block.block_kernel(code, *flags, bool(args.traceback), False, False, True,
                                    lanes, tuning.walk_probes if lanes else 1, columns,
                                    False, args.rows)
        signature, loop_opcodes = block_signature(), ("BAR", "VIADDMNMX")
        excluded = ()  # (a step's barrier comes with a WARPSYNC)
        name = (f"block kernel {args.mode} traceback={args.traceback} columns={columns} "
                f"rows={args.rows}")
    else:
        from gpualign_df.kernels import search

        kernel = search.group_search_kernel(args.lanes, args.columns, True, args.unroll,
                                            args.copies)
        signature, loop_opcodes = search_signature(), ("LDS", "VIADDMNMX")
        name = f"grouped search {args.lanes} x {args.columns}, {args.unroll} steps a loop"
    sass = kernel_sass(kernel, signature, args.arch)
    if args.sass:
        args.sass.write_text(sass)
    registers = max((int(value) for value in re.findall(r"\bR(\d+)\b", sass)), default=-1) + 1
    total = len(re.findall(r"/\*[0-9a-f]{4,}\*/", sass))
    print(f"{name}, sm_{args.arch}: ~{registers} registers, {total} SASS instructions")
    body = innermost_loop(sass, *loop_opcodes, excluding=excluded)
    if body is None:
        print("no hot loop found")
        return 1
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", line).split()[0].split(".")[0] for line in body)
    print(f"hot loop: {len(body)} instructions {dict(ops.most_common(12))}")
    if args.kernel == "pairs":  # the loop of the kernel's unrolled steps: its largest
        print("loops holding them (instructions):",
              sorted(map(len, loops_holding(sass, *loop_opcodes)), reverse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
