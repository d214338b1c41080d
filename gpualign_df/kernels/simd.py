"""Vectors of 32 signed 16-bit lanes for numba CPU kernels: LLVM vector values that stay in
registers (``<32 x i16>``: one AVX-512 register, two AVX2 ones), with the few operations a
score-only Smith-Waterman pass needs.

Plain numba loops over small int16 arrays vectorize only when every value stays 16-bit, and
even then keep the arrays in memory (a load and a store per operation, alias checks); these
intrinsics give LLVM the vector type itself. Arithmetic saturates (``llvm.sadd.sat`` /
``llvm.ssub.sat``), so a score that would pass 32,767 stays there and can be detected.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

#: Lanes of a vector.
LANES = 32
#: The largest lane value: a lane that reaches it has saturated.
CEILING = 32767


class Int16x32(types.Type):
    """The numba type of a ``<32 x i16>`` value."""

    def __init__(self) -> None:
        super().__init__(name="int16x32")


int16x32 = Int16x32()
_LLVM = ir.VectorType(ir.IntType(16), LANES)


@register_model(Int16x32)
class _Int16x32Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type) -> None:
        super().__init__(dmm, fe_type, _LLVM)


def _element_pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def load(typingctx, array, index):
    """The 32 int16 of ``array`` (1-D, C-contiguous) from ``index`` on."""
    if not (isinstance(array, types.Array) and array.dtype == types.int16):
        return None

    def codegen(context, builder, signature, args):
        pointer = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load(builder.bitcast(pointer, _LLVM.as_pointer()), align=2)

    return int16x32(array, types.intp), codegen


@intrinsic
def store(typingctx, array, index, value):
    """Store ``value`` into ``array`` (1-D int16, C-contiguous) from ``index`` on."""
    if not (isinstance(array, types.Array) and array.dtype == types.int16
            and value == int16x32):
        return None

    def codegen(context, builder, signature, args):
        pointer = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(pointer, _LLVM.as_pointer()), align=2)
        return context.get_dummy_value()

    return types.none(array, types.intp, int16x32), codegen


@intrinsic
def splat(typingctx, value):
    """Every lane ``value`` (an integer, truncated to 16 bits)."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        scalar = builder.trunc(args[0], ir.IntType(16)) if signature.args[0].bitwidth > 16 \
            else builder.sext(args[0], ir.IntType(16)) if signature.args[0].bitwidth < 16 \
            else args[0]
        vector = ir.Constant(_LLVM, ir.Undefined)
        for lane in range(LANES):
            vector = builder.insert_element(vector, scalar, ir.IntType(32)(lane))
        return vector

    return int16x32(value), codegen


def _binary(llvm_name: str):
    @intrinsic
    def operation(typingctx, a, b):
        if a != int16x32 or b != int16x32:
            return None

        def codegen(context, builder, signature, args):
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(_LLVM, [_LLVM, _LLVM]), llvm_name)
            return builder.call(function, args)

        return int16x32(a, b), codegen

    return operation


#: Lane-wise saturating a + b, a - b, and max(a, b).
adds = _binary("llvm.sadd.sat.v32i16")
subs = _binary("llvm.ssub.sat.v32i16")
vmax = _binary("llvm.smax.v32i16")


@intrinsic
def lane(typingctx, vector, index):
    """Lane ``index`` of ``vector`` as an int32."""
    if vector != int16x32 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        element = builder.extract_element(args[0], builder.trunc(args[1], ir.IntType(32))
                                          if signature.args[1].bitwidth > 32 else args[1])
        return builder.sext(element, ir.IntType(32))

    return types.int32(vector, index), codegen
