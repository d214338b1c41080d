"""SASS of the inter-task fill kernels for a GPU architecture, on a machine without a GPU.

numba-cuda compiles a fill kernel to LTO-IR, NVRTC compiles the linked DPX source
(:mod:`gpualign_df.kernels.dpx`) to LTO-IR, nvJitLink links both into a cubin (as numba does
on the device: the DPX calls are inlined), and nvdisasm prints its SASS; the report gives the
registers and the column loop's instructions by opcode (``inspect_kernels.column_loop``).
This is how the traceback funnel-shift change was found and sized before any device time.

NVIDIA's compiler pieces are not dependencies of the project; put them in a folder of their
own, for example::

    pip install --target /tmp/cudatk "nvidia-cuda-nvrtc==13.0.*" "nvidia-nvvm==13.0.*" \\
        "nvidia-nvjitlink==13.0.*" nvidia-cuda-nvdisasm
    CUDA_HOME=/tmp/cudatk/nvidia/cu13 LD_LIBRARY_PATH=/tmp/cudatk/nvidia/cu13/lib \\
        PYTHONPATH=/tmp/cudatk python -m benchmarks.investigations.sass_offline --mode sg \\
        --traceback 1

Options: ``--mode sw|nw|sg`` (semi-global: all ends free), ``--traceback 0|1``, ``--rows 8|16``
(strip height), ``--plain-shifts`` (the ``funnel_append`` setting off), ``--arch 90``,
``--sass FILE`` (write the whole listing).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from benchmarks.investigations.inspect_kernels import column_loop

MODES = {"sw": (0, (False,) * 4), "nw": (1, (False,) * 4), "sg": (2, (True,) * 4)}


def fill_signature():
    """Argument types of :func:`gpualign_df.kernels.inter.fill_kernel`'s kernel as the
    engine launches it (CuPy arrays, Python integers)."""
    from numba import types

    i64, i32 = types.int64[::1], types.int32[::1]
    return (types.uint8[::1], types.uint8[::1], i64, i64, i64, i64, i64, i64, i64, i32,
            types.int64, types.int64, types.int64, i32, i32, types.uint32[::1], i64, i32, i32,
            i32)


def link_cubin(codes, arch: int) -> bytes:
    """Link LTO-IR objects (numba's kernel, then the linked CUDA C) into one cubin."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(3, [f"-arch=sm_{arch}", "-lto", "-O3"])
    for index, code in enumerate(codes):
        data = code if isinstance(code, bytes) else bytes(code.code)
        nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, data, len(data), f"part{index}")
    try:
        nvjitlink.complete(handle)
    except Exception:
        log = bytearray(nvjitlink.get_error_log_size(handle))
        nvjitlink.get_error_log(handle, log)
        raise RuntimeError(log.decode(errors="replace")) from None
    cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
    nvjitlink.get_linked_cubin(handle, cubin)
    return bytes(cubin)


def kernel_sass(kernel, signature, arch: int) -> str:
    """The SASS listing of a numba CUDA kernel compiled for ``signature`` on sm_``arch``,
    its linked CUDA C included (CUDA_HOME/bin/nvdisasm, else nvdisasm on the PATH). Device
    functions that numba compiles on first call ask for the current device's compute
    capability, so that question is answered with ``arch`` while the kernel compiles."""
    from types import SimpleNamespace
    from unittest import mock

    from numba import cuda

    device = SimpleNamespace(compute_capability=(arch // 10, arch % 10))
    with mock.patch("numba.cuda.dispatcher.get_current_device", return_value=device):
        codes, _ = cuda.compile_all(kernel.py_func, signature, device=False,
                                    cc=(arch // 10, arch % 10), output="ltoir",
                                    abi="numba")
    cubin = link_cubin(codes, arch)
    nvdisasm = Path(os.environ.get("CUDA_HOME", "")) / "bin" / "nvdisasm"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        return subprocess.run([str(nvdisasm) if nvdisasm.exists() else "nvdisasm", "-c",
                               handle.name], capture_output=True, text=True,
                              check=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="sg")
    parser.add_argument("--traceback", type=int, choices=(0, 1), default=1)
    parser.add_argument("--rows", type=int, choices=(8, 16), default=16)
    parser.add_argument("--plain-shifts", action="store_true")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--sass", type=Path, default=None)
    args = parser.parse_args(argv)

    from gpualign_df import config
    from gpualign_df.kernels import inter

    code, flags = MODES[args.mode]
    keyed = args.mode != "nw"   # the engine keys the running row bests where it keeps them
    kernel = inter.fill_kernel(code, *flags, bool(args.traceback), True, keyed, args.rows,
                               dict(config.settings().fill_max_registers).get(args.rows),
                               not args.plain_shifts)
    sass = kernel_sass(kernel, fill_signature(), args.arch)
    if args.sass:
        args.sass.write_text(sass)
    registers = max((int(value) for value in re.findall(r"\bR(\d+)\b", sass)), default=-1) + 1
    total = len(re.findall(r"/\*[0-9a-f]{4,}\*/", sass))
    print(f"fill {args.mode} traceback={args.traceback} rows={args.rows} "
          f"{'plain' if args.plain_shifts else 'funnel'} shifts, sm_{args.arch}: "
          f"~{registers} registers used, {total} SASS instructions; {column_loop(sass)}")
    ops = Counter(re.findall(r"\b(SHF|LOP3|VIADDMNMX|VIMNMX3?|LDS|STG|LDG)\b", sass))
    print(f"whole kernel: {dict(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
