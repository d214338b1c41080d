"""Hopper DPX integer min/max instructions for the cell recurrences, with a plain fallback.

On sm_90 and newer, ``__viaddmax_s32`` (max(a + b, c)) and ``__vimax3_s32`` /
``__vimax3_s32_relu`` (max of three, and of three and zero) come from linked CUDA C through
``cuda.declare_device``; they compile to VIADDMNMX / VIMNMX3; the ``*_s16x2`` forms serve
the packed 16-bit kernels. A running best with its replacement bit (``__vibmax_s32``) comes
packed value-high / bit-low in an int64 that the inlined code never builds. Elsewhere, and
under the CUDA simulator, plain device functions give identical results.
"""

from __future__ import annotations

import os
from functools import lru_cache

from numba import cuda, int32, int64

from . import simulator

SOURCE = r"""
extern "C" __device__ int gpualign_add_max(int a, int b, int c) { return __viaddmax_s32(a, b, c); }
extern "C" __device__ int gpualign_max3(int a, int b, int c) { return __vimax3_s32(a, b, c); }
extern "C" __device__ int gpualign_max3_zero(int a, int b, int c) { return __vimax3_s32_relu(a, b, c); }
extern "C" __device__ int gpualign_add2(int a, int b) { return (int)__vadd2((unsigned)a, (unsigned)b); }
extern "C" __device__ int gpualign_max2(int a, int b) { return (int)__vmaxs2((unsigned)a, (unsigned)b); }
extern "C" __device__ int gpualign_add_max2(int a, int b, int c) {
  return (int)__viaddmax_s16x2((unsigned)a, (unsigned)b, (unsigned)c); }
extern "C" __device__ int gpualign_max3_zero2(int a, int b, int c) {
  return (int)__vimax3_s16x2_relu((unsigned)a, (unsigned)b, (unsigned)c); }
extern "C" __device__ int gpualign_max3_2(int a, int b, int c) {
  return (int)__vimax3_s16x2((unsigned)a, (unsigned)b, (unsigned)c); }
extern "C" __device__ int gpualign_add_max_zero2(int a, int b, int c) {
  return (int)__viaddmax_s16x2_relu((unsigned)a, (unsigned)b, (unsigned)c); }
/* word << 1 with the sign bit of diff shifted in: one funnel shift (inline PTX, which the
   optimizer keeps as it is rather than folding several appends into masks and ORs). */
extern "C" __device__ unsigned gpualign_append_sign(unsigned word, int diff) {
  unsigned out;
  asm("shf.l.clamp.b32 %0, %1, %2, 1;" : "=r"(out) : "r"((unsigned)diff), "r"(word));
  return out; }
/* Byte (s & 7) of the eight bytes y:x, sign-extended, for s = byte_selector(code): PTX
   prmt (__byte_perm masks the selector's sign-replicate bits away). */
extern "C" __device__ int gpualign_byte_score(int x, int y, int s) {
  int out;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(out) : "r"(x), "r"(y), "r"(s));
  return out; }
/* A global int64 read through L2 (ld.global.cg), volatile so that a wait loop reads it
   again on every pass instead of once. */
extern "C" __device__ long long gpualign_load_cg(long long address, long long index) {
  long long value;
  asm volatile("ld.global.cg.s64 %0, [%1];" : "=l"(value)
               : "l"(((const long long*)address) + index));
  return value; }
/* A predicated global int64 store (one @p st.global, never a branch: a branch around the
   store of one lane would end the straight-line code of the steps around it). */
extern "C" __device__ int gpualign_store_if(long long address, long long index,
                                            long long value, int predicate) {
  asm volatile("{ .reg .pred p; setp.ne.s32 p, %2, 0; @p st.global.s64 [%0], %1; }"
               :: "l"(((long long*)address) + index), "l"(value), "r"(predicate));
  return 0; }
/* Four uint32 words stored at address + 4 * index (16-byte aligned) where predicate is
   non-zero: one predicated st.global.v4 (a quarter of the store instructions and of the L2
   sectors that four scattered words of different rows would cost). */
extern "C" __device__ int gpualign_store4_if(long long address, long long index, unsigned a,
                                             unsigned b, unsigned c, unsigned d,
                                             int predicate) {
  asm volatile("{ .reg .pred p; setp.ne.s32 p, %5, 0;"
               " @p st.global.v4.u32 [%0], {%1, %2, %3, %4}; }"
               :: "l"(((unsigned*)address) + index), "r"(a), "r"(b), "r"(c), "r"(d),
                  "r"(predicate));
  return 0; }
/* The value in the high word, a bit in the low word (inlined, the packing costs nothing).
   __vibmax_s32(a, b, &p) is max(a, b) with p = (a >= b). */
extern "C" __device__ long long gpualign_keep_best(int best, int h) {
  bool kept;
  int value = __vibmax_s32(best, h, &kept);
  return ((long long)value << 32) | (kept ? 0 : 1); }
/* Two 16-bit lanes (low, high half): the running best and its position, lane by lane,
   replaced where h is strictly higher. Explicit compares, not __vibmax_s16x2's predicates:
   on sm_90 here __vibmax_s16x2(0u, x, ...) came out with the predicates of (x >= 0), i.e.
   the operands of the max swapped once one was a constant (seen in a test), and a strip's
   first running best is one. */
extern "C" __device__ long long gpualign_keep_best2(int best, int h, int best_j, int j) {
  unsigned taken = ((short)(h & 0xFFFF) > (short)(best & 0xFFFF) ? 0xFFFFu : 0u)
                 | ((short)(h >> 16) > (short)(best >> 16) ? 0xFFFF0000u : 0u);
  unsigned value = ((unsigned)best & ~taken) | ((unsigned)h & taken);
  unsigned position = ((unsigned)best_j & ~taken) | ((unsigned)j & taken);
  return ((long long)value << 32) | position; }
"""


def _device_function(function):
    """``function`` as an inlined device function; under the CUDA simulator the Python
    function itself: the simulator takes a lock per module on every device-function call,
    and its threads (one per CUDA thread) convoy on that lock, intermittently for minutes,
    in the packed kernels that call these per cell."""
    if simulator():
        return function
    return cuda.jit(device=True, inline=True)(function)


@_device_function
def add_max_plain(a, b, c):
    return max(a + b, c)


@_device_function
def max3_plain(a, b, c):
    return max(max(a, b), c)


@_device_function
def max3_zero_plain(a, b, c):
    return max(max(max(a, b), c), 0)


# Two signed 16-bit lanes in one int32 (low half, high half), for the packed kernels: the
# plain forms work half by half (wrapping adds, as __vadd2 does).


@_device_function
def low_half(x):
    return int32(((x & 0xFFFF) ^ 0x8000) - 0x8000)


@_device_function
def high_half(x):
    return int32(x >> 16)


@_device_function
def pack_halves(low, high):
    """Two values (wrapped to 16 bits) into the low and high halves of an int32."""
    high16 = ((high & 0xFFFF) ^ 0x8000) - 0x8000
    return int32((high16 << 16) | (low & 0xFFFF))


@_device_function
def add2_plain(a, b):
    return pack_halves(low_half(a) + low_half(b), high_half(a) + high_half(b))


@_device_function
def max2_plain(a, b):
    return pack_halves(max(low_half(a), low_half(b)), max(high_half(a), high_half(b)))


@_device_function
def add_max2_plain(a, b, c):
    return pack_halves(max(low_half(a) + low_half(b), low_half(c)),
                       max(high_half(a) + high_half(b), high_half(c)))


@_device_function
def max3_zero2_plain(a, b, c):
    return pack_halves(max(max(max(low_half(a), low_half(b)), low_half(c)), 0),
                       max(max(max(high_half(a), high_half(b)), high_half(c)), 0))


@_device_function
def max3_2_plain(a, b, c):
    return pack_halves(max(max(low_half(a), low_half(b)), low_half(c)),
                       max(max(high_half(a), high_half(b)), high_half(c)))


@_device_function
def add_max_zero2_plain(a, b, c):
    return pack_halves(max(max(low_half(a) + low_half(b), low_half(c)), 0),
                       max(max(high_half(a) + high_half(b), high_half(c)), 0))


def available() -> bool:
    """DPX is used on a real GPU of compute capability 9.0 or newer, unless
    ``GPUALIGN_DPX=0``."""
    if simulator() or os.environ.get("GPUALIGN_DPX") == "0":
        return False
    try:
        import cupy

        return _major_version(cupy.cuda.runtime.getDevice()) >= 9  # (asked once per device)
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - no device: no DPX
        return False
    try:
        return tuple(cuda.get_current_device().compute_capability) >= (9, 0)
    except Exception:  # noqa: BLE001 - no device: no DPX
        return False


@lru_cache(maxsize=None)
def _major_version(device: int) -> int:
    """Compute capability major version of CUDA device ``device`` (CuPy's numbering)."""
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device)["major"])


@lru_cache(maxsize=None)
def _linked_source():
    """The one CUDA C source object every DPX function links (each distinct object would be
    linked again: its symbols defined twice)."""
    return cuda.CUSource(SOURCE)


@lru_cache(maxsize=None)
def functions(use_dpx: bool):
    """(add_max, max3, max3_zero) device functions: DPX-linked or plain."""
    if not use_dpx:
        return add_max_plain, max3_plain, max3_zero_plain
    return _linked_three("gpualign_add_max", "gpualign_max3", "gpualign_max3_zero")


def _linked_three(*names: str) -> tuple:
    """The linked CUDA C functions ``names``, each ``int32(int32, int32, int32)``."""
    source = _linked_source()
    return tuple(cuda.declare_device(name, "int32(int32, int32, int32)", link=source,
                                     abi="c") for name in names)


@lru_cache(maxsize=None)
def append_sign():
    """``word << 1`` with the sign bit of an int32 difference shifted in, as linked CUDA C:
    one funnel shift (``SHF.L``) per traceback bit (the ``funnel_append`` setting)."""
    return cuda.declare_device("gpualign_append_sign", "uint32(uint32, int32)",
                               link=_linked_source(), abi="c")


@_device_function
def byte_selector(code):
    """The PTX ``prmt`` selector that picks byte ``code`` (0-7) of eight, sign-extended
    (each upper nibble ``code | 8``: replicate that byte's sign; ``__byte_perm`` would mask
    those bits away)."""
    return int32(code * 0x1111 + 0x8880)


@_device_function
def byte_score_plain(x, y, s):
    k = s & 7
    word = x if k < 4 else y
    value = (word >> ((k & 3) * 8)) & 0xFF
    return int32(value - 256 if value >= 128 else value)


@lru_cache(maxsize=None)
def byte_score(linked: bool):
    """``byte_score(x, y, s)``: signed byte ``s & 7`` of the eight bytes of ``y:x`` (low
    word first), for a selector from :func:`byte_selector`: one ``PRMT`` (linked CUDA C) or
    plain. A substitution row of up to 8 codes lives in two registers this way."""
    if not linked:
        return byte_score_plain
    return cuda.declare_device("gpualign_byte_score", "int32(int32, int32, int32)",
                               link=_linked_source(), abi="c")


@_device_function
def byte_perm_plain(x, y, s):
    out = 0
    for place in range(4):
        nibble = (s >> (4 * place)) & 15
        k = nibble & 7
        value = ((x if k < 4 else y) >> (8 * (k & 3))) & 0xFF
        if nibble & 8:   # the byte's sign, replicated
            value = 0xFF if value & 0x80 else 0
        out |= value << (8 * place)
    return int32(out - (1 << 32) if out >= 1 << 31 else out)


@lru_cache(maxsize=None)
def byte_perm(linked: bool):
    """``byte_perm(x, y, s)``: PTX ``prmt.b32`` (default mode) of the eight bytes ``y:x``
    (low word first): output byte ``i`` is byte ``s_i & 7`` where nibble ``s_i`` of ``s``
    has its bit 3 clear, else that byte's sign replicated. One ``PRMT`` (linked CUDA C,
    the :func:`byte_score` function) or plain; the packed pair kernels pick both halves'
    scores with it, each half a byte and its sign."""
    if not linked:
        return byte_perm_plain
    return byte_score(True)


@lru_cache(maxsize=None)
def load_cg():
    """``load_cg(address, index)``: the int64 at ``address`` + 8 * ``index`` in global
    memory, read through L2 and again on every call (linked CUDA C)."""
    return cuda.declare_device("gpualign_load_cg", "int64(int64, int64)",
                               link=_linked_source(), abi="c")


@lru_cache(maxsize=None)
def store_if():
    """``store_if(address, index, value, predicate)``: the int64 ``value`` stored at
    ``address`` + 8 * ``index`` in global memory where ``predicate`` is non-zero, as one
    predicated store, not a branch (linked CUDA C)."""
    return cuda.declare_device("gpualign_store_if", "int32(int64, int64, int64, int32)",
                               link=_linked_source(), abi="c")


@lru_cache(maxsize=None)
def store4_if():
    """``store4_if(address, index, a, b, c, d, predicate)``: four uint32 words at
    ``address`` + 4 * ``index`` (16-byte aligned) where ``predicate`` is non-zero, as one
    predicated vector store (linked CUDA C)."""
    return cuda.declare_device(
        "gpualign_store4_if", "int32(int64, int64, uint32, uint32, uint32, uint32, int32)",
        link=_linked_source(), abi="c")


@_device_function
def keep_best_plain(best, h):
    return (int64(max(best, h)) << 32) | int64(1 if h > best else 0)


@lru_cache(maxsize=None)
def keep_best(use_dpx: bool):
    """max(best, h) with a replacement bit (1 where h > best strictly), packed value-high /
    bits-low in an int64: DPX-linked (``__vibmax_s32``) or plain."""
    if not use_dpx:
        return keep_best_plain
    return cuda.declare_device("gpualign_keep_best", "int64(int32, int32)",
                               link=_linked_source(), abi="c")


@lru_cache(maxsize=None)
def functions16(use_dpx: bool):
    """(add2, max2, add_max2, max3_zero2) on two 16-bit lanes packed in an int32: linked
    ``__vadd2``/``__vmaxs2``/``__viaddmax_s16x2``/``__vimax3_s16x2_relu``, or plain."""
    if not use_dpx:
        return add2_plain, max2_plain, add_max2_plain, max3_zero2_plain
    source = _linked_source()
    two, three = "int32(int32, int32)", "int32(int32, int32, int32)"
    return (cuda.declare_device("gpualign_add2", two, link=source, abi="c"),
            cuda.declare_device("gpualign_max2", two, link=source, abi="c"),
            cuda.declare_device("gpualign_add_max2", three, link=source, abi="c"),
            cuda.declare_device("gpualign_max3_zero2", three, link=source, abi="c"))


@lru_cache(maxsize=None)
def functions16_search(use_dpx: bool):
    """(add_max2, max3_2, add_max_zero2) on two 16-bit lanes packed in an int32:
    ``max(a + b, c)``, ``max(a, b, c)`` and ``max(a + b, c, 0)`` lane by lane, linked
    ``__viaddmax_s16x2``/``__vimax3_s16x2``/``__viaddmax_s16x2_relu``, or plain."""
    if not use_dpx:
        return add_max2_plain, max3_2_plain, add_max_zero2_plain
    return _linked_three("gpualign_add_max2", "gpualign_max3_2", "gpualign_add_max_zero2")


def _table_source(words: int, dynamic: bool = False) -> str:
    """The table's CUDA C: a static array of ``words`` (functions ``gpualign_table_*``),
    or (``dynamic``) the block's dynamic shared memory, sized at launch, past 48 KB where
    the kernel opts in (functions ``gpualign_dynamic_*``)."""
    name, array = ("gpualign_dynamic", "gpualign_dynamic_table") if dynamic else \
        ("gpualign_table", "gpualign_pair_table")
    declaration = f"extern __shared__ int {array}[]" if dynamic else \
        f"__shared__ int {array}[{words}]"
    return r"""
/* The grouped search's pair table in shared memory, read at 32-bit shared-window addresses
   (the table's, from NAME_base, plus a byte offset): the caller adds the table's address
   to a query row's offset once a row, so a column's read is one add and one LDS, where an
   indexed numba shared array costs an add and a scale per read, and a byte offset from
   the table an add more. The asm reads memory (clobber): never moved above the barrier
   after the table is filled. */
DECLARATION;
extern "C" __device__ int NAME_put(int index, int value) {
  ARRAY[index] = value;
  return 0; }
extern "C" __device__ int NAME_base() {
  return (int)__cvta_generic_to_shared(ARRAY); }
extern "C" __device__ int NAME_load(int address) {
  int value;
  asm("ld.shared.b32 %0, [%1];" : "=r"(value) : "r"(address) : "memory");
  return value; }
""".replace("DECLARATION", declaration).replace("ARRAY", array).replace("NAME", name)


@lru_cache(maxsize=None)
def pair_table(linked: bool, words: int, dynamic: bool = False):
    """``(shared_words, shift, put, base, at)`` for a shared table of ``words`` int32: the
    kernel declares ``cuda.shared.array(shared_words, int32)`` (the table where it is not
    linked), fills it with ``put(shared, index, value)`` and reads entry ``e`` with
    ``at(shared, base(shared) + (e << shift))``. Linked: the table is CUDA C's, read at
    shared-window byte addresses (the shift 2; ``base`` its address); plain: the numba
    array, by index (``base`` 0). ``dynamic`` (linked only): the table is the block's
    dynamic shared memory, of the size the launch gives (``words`` is then unused)."""
    if not linked:
        @cuda.jit(device=True, inline=True)
        def put_plain(shared, index, value):
            shared[index] = value

        @cuda.jit(device=True, inline=True)
        def base_plain(shared):
            return int32(0)

        @cuda.jit(device=True, inline=True)
        def at_plain(shared, entry):
            return shared[entry]

        return words, 0, put_plain, base_plain, at_plain
    source = cuda.CUSource(_table_source(words, dynamic))
    name = "gpualign_dynamic" if dynamic else "gpualign_table"
    put_c = cuda.declare_device(f"{name}_put", "int32(int32, int32)", link=source,
                                abi="c")
    base_c = cuda.declare_device(f"{name}_base", "int32()", link=source, abi="c")
    load_c = cuda.declare_device(f"{name}_load", "int32(int32)", link=source, abi="c")

    @cuda.jit(device=True, inline=True)
    def put_linked(shared, index, value):
        put_c(index, value)

    @cuda.jit(device=True, inline=True)
    def base_linked(shared):
        return base_c()

    @cuda.jit(device=True, inline=True)
    def at_linked(shared, address):
        return load_c(int32(address))

    return 1, 2, put_linked, base_linked, at_linked


#: "Minus infinity" of a 16-bit lane (sums are floored there), and in both lanes of an int32.
NEG16 = -(1 << 14)
NEG16_PAIR = (NEG16 << 16) | (NEG16 & 0xFFFF)  # 0xC000C000 as a signed int32


@_device_function
def keep_best2_plain(best, h, best_j, j):
    low, high = low_half(best), high_half(best)
    position = int64(best_j)    # both halves hold positions below 2**15: non-negative
    if low_half(h) > low:
        low = low_half(h)
        position = (position & 0x7FFF0000) | (int64(j) & 0xFFFF)
    if high_half(h) > high:
        high = high_half(h)
        position = (position & 0xFFFF) | (int64(j) & 0x7FFF0000)
    return (int64(pack_halves(low, high)) << 32) | int64(position)


@lru_cache(maxsize=None)
def keep_best2(use_dpx: bool):
    """A running best on two 16-bit lanes with its positions: ``max(best, h)`` lane by lane
    and ``best_j``'s lanes replaced by ``j``'s where h is strictly higher, packed
    value-high / positions-low in an int64; linked CUDA C or plain."""
    if not use_dpx:
        return keep_best2_plain
    return cuda.declare_device("gpualign_keep_best2", "int64(int32, int32, int32, int32)",
                               link=_linked_source(), abi="c")
