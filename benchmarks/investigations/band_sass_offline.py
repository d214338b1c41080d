"""SASS of a long-pair band fill (:func:`gpualign_df.kernels.band.band_kernel`) for a GPU
architecture, on a machine without a GPU, and its batch loop by opcode.

The kernel is compiled as :mod:`sass_offline` compiles the inter-task fills (numba to LTO-IR,
the linked CUDA C by NVRTC, nvJitLink, nvdisasm; the same NVIDIA wheels, named in that
module's docstring). The batch loop is the loop of the
unrolled plain steps where a long band spends its time: the shortest loop that both
stores and computes cells. Example::

    CUDA_HOME=/tmp/cudatk/nvidia/cu13 LD_LIBRARY_PATH=/tmp/cudatk/nvidia/cu13/lib \\
        PYTHONPATH=/tmp/cudatk python -m benchmarks.investigations.band_sass_offline \\
        --mode nw --rows 2 --byte-rows 1

Options: ``--mode sw|nw|sg`` (semi-global: the target's ends free), ``--rows 2|4|8``,
``--traceback 0|1``, ``--byte-rows 0|1``, ``--checkpointed 0|1``, ``--split
whole|snapshot|resume``, ``--last-column 0|1`` (the halves' fill), ``--arch 90``, ``--sass
FILE`` (write the whole listing).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from benchmarks.investigations.inspect_kernels import innermost_loop
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="nw")
    parser.add_argument("--rows", type=int, choices=(2, 4, 8), default=4)
    parser.add_argument("--traceback", type=int, choices=(0, 1), default=0)
    parser.add_argument("--byte-rows", type=int, choices=(0, 1), default=1)
    parser.add_argument("--checkpointed", type=int, choices=(0, 1), default=0)
    parser.add_argument("--split", choices=sorted(SPLITS), default="whole")
    parser.add_argument("--last-column", type=int, choices=(0, 1), default=0)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--sass", type=Path, default=None)
    args = parser.parse_args(argv)

    from gpualign_df.kernels import band

    code, flags = MODES[args.mode]
    kernel = band.band_kernel(code, *flags, bool(args.traceback), True, args.rows,
                              byte_rows=bool(args.byte_rows),
                              checkpointed=bool(args.checkpointed),
                              split=SPLITS[args.split], last_column=bool(args.last_column))
    sass = kernel_sass(kernel, band_signature(), args.arch)
    if args.sass:
        args.sass.write_text(sass)
    registers = max((int(value) for value in re.findall(r"\bR(\d+)\b", sass)), default=-1) + 1
    total = len(re.findall(r"/\*[0-9a-f]{4,}\*/", sass))
    body = innermost_loop(sass, "STG", "VIADDMNMX")
    print(f"band fill {args.mode} rows={args.rows} traceback={args.traceback} "
          f"byte_rows={args.byte_rows} checkpointed={args.checkpointed} split={args.split} "
          f"last_column={args.last_column}, sm_{args.arch}: ~{registers} registers, {total} "
          "SASS instructions")
    if body is None:
        print("no batch loop found")
        return 1
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", line).split()[0].split(".")[0] for line in body)
    print(f"batch loop: {len(body)} instructions {dict(ops.most_common(12))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
