"""Vectors of signed lanes for numba CPU kernels: LLVM vector values that stay in registers
(``<32 x i16>`` and ``<64 x i8>``, 512 bits: one AVX-512 register, two AVX2 ones), with the
few operations a score-only Smith-Waterman pass needs.

Plain numba loops over small int16 arrays vectorize only when every value stays 16-bit, and
even then keep the arrays in memory (a load and a store per operation, alias checks); these
intrinsics give LLVM the vector type itself. Arithmetic saturates (``llvm.sadd.sat`` /
``llvm.ssub.sat``), so a score that would pass a lane's ceiling stays there and can be
detected. The operations take either vector type (both operands of one type); a load's type
follows its array's dtype (int16: :data:`int16x32`, int8: :data:`int8x64`).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

#: Bits of a vector.
WIDTH = 512


class Vector(types.Type):
    """The numba type of an LLVM vector of ``WIDTH // bits`` signed ``bits``-bit lanes."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.lanes = WIDTH // bits
        self.llvm = ir.VectorType(ir.IntType(bits), self.lanes)
        super().__init__(name=f"int{bits}x{self.lanes}")

    @property
    def ceiling(self) -> int:
        """The largest lane value: a lane that reaches it has saturated."""
        return (1 << (self.bits - 1)) - 1


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type) -> None:
        super().__init__(dmm, fe_type, fe_type.llvm)


int16x32 = Vector(16)
int8x64 = Vector(8)
_BY_DTYPE = {types.int16: int16x32, types.int8: int8x64}


def _element_pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def load(typingctx, array, index):
    """The lanes of ``array`` (1-D int16 or int8, C-contiguous) from ``index`` on."""
    if not isinstance(array, types.Array) or array.dtype not in _BY_DTYPE:
        return None
    vector = _BY_DTYPE[array.dtype]

    def codegen(context, builder, signature, args):
        pointer = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load(builder.bitcast(pointer, vector.llvm.as_pointer()),
                            align=vector.bits // 8)

    return vector(array, types.intp), codegen


@intrinsic
def store(typingctx, array, index, value):
    """Store ``value`` into ``array`` (1-D, of ``value``'s lane type) from ``index`` on."""
    if not (isinstance(array, types.Array) and _BY_DTYPE.get(array.dtype) == value):
        return None

    def codegen(context, builder, signature, args):
        pointer = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(pointer, value.llvm.as_pointer()),
                      align=value.bits // 8)
        return context.get_dummy_value()

    return types.none(array, types.intp, value), codegen


def _lane_value(builder, value, value_type, vector: Vector):
    """An integer ``value`` (of numba type ``value_type``) as one lane of ``vector``'s type:
    truncated or sign-extended to the lanes' width."""
    lane_type = ir.IntType(vector.bits)
    if value_type.bitwidth > vector.bits:
        return builder.trunc(value, lane_type)
    if value_type.bitwidth < vector.bits:
        return builder.sext(value, lane_type)
    return value


@intrinsic
def splat(typingctx, value, like):
    """Every lane ``value`` (an integer, truncated to the lanes' width), in a vector of
    ``like``'s type."""
    if not isinstance(value, types.Integer) or not isinstance(like, Vector):
        return None

    def codegen(context, builder, signature, args):
        scalar = _lane_value(builder, args[0], signature.args[0], like)
        vector = ir.Constant(like.llvm, ir.Undefined)
        for lane in range(like.lanes):
            vector = builder.insert_element(vector, scalar, ir.IntType(32)(lane))
        return vector

    return like(value, like), codegen


@intrinsic
def lowest(typingctx, like):
    """A vector of ``like``'s type with every lane the lanes' lowest value."""
    if not isinstance(like, Vector):
        return None

    def codegen(context, builder, signature, args):
        return ir.Constant(like.llvm, [-(1 << (like.bits - 1))] * like.lanes)

    return like(like), codegen


def _lanewise(emit):
    """An intrinsic of two vectors of one type, lane by lane: ``emit(builder, vector_type,
    a, b)`` gives its LLVM value."""
    @intrinsic
    def operation(typingctx, a, b):
        if not isinstance(a, Vector) or a != b:
            return None

        def codegen(context, builder, signature, args):
            return emit(builder, a, *args)

        return a(a, b), codegen

    return operation


def _llvm_intrinsic(name: str):
    """An emitter calling ``llvm.<name>.v<lanes>i<bits>``."""
    def emit(builder, vector, a, b):
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector.llvm, [vector.llvm, vector.llvm]),
            f"llvm.{name}.v{vector.lanes}i{vector.bits}")
        return builder.call(function, [a, b])

    return emit


def _mask(predicate: str):
    """An emitter of a signed comparison as a mask (every bit of a lane set where it
    holds, else 0)."""
    def emit(builder, vector, a, b):
        return builder.sext(builder.icmp_signed(predicate, a, b), vector.llvm)

    return emit


#: Lane-wise saturating a + b, a - b, and max(a, b).
adds = _lanewise(_llvm_intrinsic("sadd.sat"))
subs = _lanewise(_llvm_intrinsic("ssub.sat"))
vmax = _lanewise(_llvm_intrinsic("smax"))
#: Lane-wise a > b and a == b, as masks.
greater = _lanewise(_mask(">"))
equal = _lanewise(_mask("=="))
#: Lane-wise a & b and a | b (masks).
vand = _lanewise(lambda builder, vector, a, b: builder.and_(a, b))
vor = _lanewise(lambda builder, vector, a, b: builder.or_(a, b))


@intrinsic
def blend(typingctx, mask, a, b):
    """Lane-wise ``a`` where ``mask`` is set, else ``b``."""
    if not isinstance(a, Vector) or not (mask == a == b):
        return None

    def codegen(context, builder, signature, args):
        zero = ir.Constant(a.llvm, None)
        return builder.select(builder.icmp_signed("!=", args[0], zero), args[1], args[2])

    return a(mask, a, b), codegen


@intrinsic
def lane(typingctx, vector, index):
    """Lane ``index`` of ``vector`` as an int32."""
    if not isinstance(vector, Vector) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        element = builder.extract_element(args[0], builder.trunc(args[1], ir.IntType(32))
                                          if signature.args[1].bitwidth > 32 else args[1])
        return builder.sext(element, ir.IntType(32))

    return types.int32(vector, index), codegen


@intrinsic
def shift_in(typingctx, vector, fill):
    """``vector``'s lanes moved up by one (lane k + 1 takes lane k's value; the last lane's
    value leaves) and lane 0 set to ``fill`` (an integer, truncated to the lanes' width)."""
    if not isinstance(vector, Vector) or not isinstance(fill, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        scalar = _lane_value(builder, args[1], signature.args[1], vector)
        filled = builder.insert_element(ir.Constant(vector.llvm, ir.Undefined), scalar,
                                        ir.IntType(32)(0))
        order = ir.Constant(ir.VectorType(ir.IntType(32), vector.lanes),
                            [vector.lanes] + list(range(vector.lanes - 1)))
        return builder.shuffle_vector(args[0], filled, order)

    return vector(vector, fill), codegen


def _reduction(name: str, result):
    """An intrinsic folding a vector's lanes with ``llvm.vector.reduce.<name>``; ``result``
    makes the numba value of the folded lane (builder, lane) and gives its type."""
    @intrinsic
    def fold(typingctx, vector):
        if not isinstance(vector, Vector):
            return None

        def codegen(context, builder, signature, args):
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(vector.bits), [vector.llvm]),
                f"llvm.vector.reduce.{name}.v{vector.lanes}i{vector.bits}")
            return result[0](builder, builder.call(function, [args[0]]))

        return result[1](vector), codegen

    return fold


#: The largest and the smallest lane (as an int32); whether any lane of a mask is set.
largest = _reduction("smax", (lambda builder, value: builder.sext(value, ir.IntType(32)),
                              types.int32))
smallest = _reduction("smin", (lambda builder, value: builder.sext(value, ir.IntType(32)),
                               types.int32))
any_set = _reduction("or", (lambda builder, value: builder.icmp_signed(
    "!=", value, ir.Constant(value.type, 0)), types.boolean))
