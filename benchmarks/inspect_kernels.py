"""Resource report of the compiled CUDA kernels: registers, local memory (spills), and SASS
instruction counts (LDL/STL = local memory traffic, VIMNMX = integer min/max).

Run on a GPU machine after the kernels were compiled at least once in this process:
``python benchmarks/inspect_kernels.py`` compiles them on a tiny job first.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import gpualign_df
    from gpualign_df.kernels import inter, traceback

    for mode in ("sw", "nw", "sg"):
        for tb in (True, False):
            gpualign_df.align(["ACGTACGTAC"] * 40, ["ACGTTACGTAC"] * 40, mode=mode, traceback=tb,
                              match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda")
    for packed in (True, False):   # the search kernels: 16-bit packed and 32-bit (local)
        gpualign_df.gpu.SEARCH_16BIT = packed
        gpualign_df.align(["ACGTACGTAC"] * 3, ["ACGTTACGTAC"] * 70, how="search", top_k=2,
                          match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda")
    gpualign_df.gpu.SEARCH_16BIT = None
    all_free = (True, True, True, True)
    from gpualign_df.kernels import dpx

    use_dpx = dpx.available()
    kernels = [(f"fill {mode} traceback={tb} dpx={use_dpx}",
                inter.fill_kernel(code, *flags, tb, use_dpx))
               for mode, code, flags in (("sw", 0, (False,) * 4), ("nw", 1, (False,) * 4),
                                         ("sg", 2, all_free))
               for tb in (True, False)]
    kernels += [(f"walk {mode}", traceback.walk_kernel(code, free, free, False, False))
                for mode, code, free in (("sw", 0, False), ("nw", 1, False), ("sg", 2, True))]
    kernels.append(("cigar", traceback.cigar_kernel(False, False)))
    kernels.append((f"search sw dpx={use_dpx}", inter.search_kernel(0, *(False,) * 4, use_dpx)))
    kernels.append((f"search sw 16-bit packed dpx={use_dpx}", inter.search_kernel16(use_dpx)))
    for label, kernel in kernels:
        for key, compiled in kernel.overloads.items():
            regs = compiled.get_regs_per_thread() if callable(getattr(
                compiled, "get_regs_per_thread", None)) else compiled.regs_per_thread
            local = compiled.local_mem_per_thread
            sass = compiled.inspect_sass()
            pattern = r"\b(LDL|STL|VIMNMX3?|VIADDMNMX|IMNMX|VIADD|LDS|LDG|STG)\b"
            ops = Counter(re.findall(pattern, sass))
            print(f"{label}: {regs} registers, {local} bytes local, SASS {dict(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
