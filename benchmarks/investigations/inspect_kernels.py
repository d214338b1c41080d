"""Resource report of the compiled CUDA kernels: registers, local memory (spills), and SASS
instruction counts (LDL/STL = local memory traffic, VIMNMX = integer min/max).

Run on a GPU machine after the kernels were compiled at least once in this process:
``python -m benchmarks.investigations.inspect_kernels`` compiles them on a tiny job first.
"""

from __future__ import annotations

import re
import sys
from collections import Counter


def innermost_loop(sass: str, *opcodes: str, excluding: tuple[str, ...] = ()
                   ) -> list[str] | None:
    """The instructions of the shortest loop of ``sass`` (a branch back to a label) that
    holds every one of ``opcodes`` and none of ``excluding``, or None."""
    loops = loops_holding(sass, *opcodes, excluding=excluding)
    return min(loops, key=len) if loops else None


def loops_holding(sass: str, *opcodes: str, excluding: tuple[str, ...] = ()
                  ) -> list[list[str]]:
    """The instructions of every loop of ``sass`` (a branch back to a label) that holds
    every one of ``opcodes`` and none of ``excluding``."""
    instructions, labels, loops = [], {}, []
    for line in sass.splitlines():
        label = re.match(r"\s*\.L_x_(\d+):", line)
        if label:
            labels[label.group(1)] = len(instructions)
        found = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if found:
            instructions.append(found.group(1).strip())
    for index, text in enumerate(instructions):
        target = re.search(r"BRA.*\.L_x_(\d+)", text)
        if target and labels.get(target.group(1), index + 1) <= index:
            body = instructions[labels[target.group(1)]:index + 1]
            if all(any(opcode in line for line in body) for opcode in opcodes) and not any(
                    opcode in line for line in body for opcode in excluding):
                loops.append(body)
    return loops


def column_loop(sass: str) -> str:
    """Instruction count of the innermost loop that reads the shared substitution table
    (the fill kernels' column of ``STRIP_ROWS`` cells), by opcode."""
    body = innermost_loop(sass, "LDS")
    if body is None:
        return "no column loop"
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", line).split()[0].split(".")[0] for line in body)
    return f"column loop {len(body)} instructions {dict(ops.most_common(8))}"


def main() -> int:
    import gpualign_df
    from gpualign_df import config
    from gpualign_df.gpu.policy import fill_shape
    from gpualign_df.kernels import inter, search, traceback

    # the fill kernels: 32-bit with keyed and selected row bests, 16-bit packed score-only
    for keyed, packed in ((True, False), (False, False), (True, True)):
        with config.override(keyed_best=keyed, fill_16bit=packed):
            for mode in ("sw", "nw", "sg"):
                for tb in (True, False):
                    gpualign_df.align(["ACGTACGTAC"] * 40, ["ACGTTACGTAC"] * 40, mode=mode,
                                      traceback=tb, match=1, mismatch=-4, gap_open=7,
                                      gap_extend=1, free_ends="all" if mode == "sg" else None,
                                      backend="cuda")
    for packed in (True, False):   # the search kernels: 16-bit packed and 32-bit (local)
        with config.override(search_16bit=packed):
            gpualign_df.align(["ACGTACGTAC"] * 3, ["ACGTTACGTAC"] * 70, how="search", top_k=2,
                              match=1, mismatch=-4, gap_open=7, gap_extend=1, backend="cuda")
    all_free = (True, True, True, True)
    from gpualign_df.kernels import dpx

    use_dpx = dpx.available()
    kernels = [(f"fill {mode} traceback={tb} dpx={use_dpx} keyed={keyed}",
                inter.fill_kernel(code, *flags, tb, use_dpx, keyed,
                                  *fill_shape(config.settings())))
               for mode, code, flags in (("sw", 0, (False,) * 4), ("nw", 1, (False,) * 4),
                                         ("sg", 2, all_free))
               for tb in (True, False) for keyed in (True, False)]
    kernels += [(f"walk {mode}", traceback.walk_kernel(code, free, free, False, False))
                for mode, code, free in (("sw", 0, False), ("nw", 1, False), ("sg", 2, True))]
    from gpualign_df.kernels import inter16

    kernels += [(f"fill16 {mode} score-only dpx={use_dpx}",
                 inter16.fill_kernel16(code, *flags, use_dpx))
                for mode, code, flags in (("sw", 0, (False,) * 4), ("nw", 1, (False,) * 4),
                                          ("sg", 2, all_free))]
    kernels.append(("cigar", traceback.cigar_kernel(False, False)))
    kernels.append((f"search sw dpx={use_dpx}", search.search_kernel(0, *(False,) * 4, use_dpx)))
    kernels.append((f"search sw 16-bit packed dpx={use_dpx}", search.search_kernel16(use_dpx)))
    for label, kernel in kernels:
        for key, compiled in kernel.overloads.items():
            regs = compiled.get_regs_per_thread() if callable(getattr(
                compiled, "get_regs_per_thread", None)) else compiled.regs_per_thread
            local = compiled.local_mem_per_thread
            sass = compiled.inspect_sass()
            pattern = r"\b(LDL|STL|VIMNMX3?|VIADDMNMX|VIBMNMX|IMNMX|VIADD|LDS|LDG|STG)\b"
            ops = Counter(re.findall(pattern, sass))
            total = len(re.findall(r"/\*[0-9a-f]{4,}\*/", sass))
            print(f"{label}: {regs} registers, {local} bytes local, {total} SASS instructions, "
                  f"{dict(ops)}; {column_loop(sass)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
