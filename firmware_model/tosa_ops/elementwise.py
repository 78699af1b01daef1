"""Elementwise TOSA operators (integer profile): binary ops with broadcasting, unary ops,
comparisons, SELECT and CLAMP. Each kernel follows its pseudocode in the spec: the ERROR_IF
checks first, then the per-element arithmetic through the primitives in numerics.py, vectorised
over the whole (broadcast) tensor.

The ops real networks run most (ADD, SUB, MUL, the shifts, CLAMP, CLZ, MAXIMUM, MINIMUM) are
split into prepare (the ERROR_IF checks, once per graph) and execute (registry.register_plan).
Their execute halves compute the primitives' results with fewer numpy passes (numerics.fast_*:
one int64 pass and one narrowing, the REQUIRE as "narrowing changed nothing"), and on a result
of one element the primitives' one-element forms on Python integers (numerics.*_int: a
softmax's chain of one-element ops); tests/firmware_model/tosa_ops/test_prepared_plans.py shows
both equal to the primitives."""

from __future__ import annotations

import numpy as np

from firmware_model.tosa_ops import numerics as nx
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import (attr, attr_value, broadcast_shape, check_output_shape,
                                              check_rank, check_types, out, same_types,
                                              scalar_operand, shape_of)
from firmware_model.tosa_ops.registry import OpCall, register, register_plan

I8, I16, I32, BOOL = DType.INT8, DType.INT16, DType.INT32, DType.BOOL
INTS = (I8, I16, I32)


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _binary_shape(call: OpCall, a: int = 0, b: int = 1) -> tuple[int, ...]:
    """ERROR_IF(shape != broadcast_shape(shape1, shape2)), with the rank limit."""
    s1, s2 = shape_of(call, a), shape_of(call, b)
    check_rank(call, s1, "input1")
    shape = broadcast_shape(call, s1, s2)
    check_output_shape(call, shape)
    return shape


_UNSIGNED = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16, np.dtype(np.int32): np.uint32,
             np.dtype(np.int64): np.uint64}


def _shift_in_range(call: OpCall, dtype: DType, amount: np.ndarray) -> None:
    # REQUIRE 0 <= value2 <= bits - 1 (7 / 15 / 31): in the unsigned reading of the amount's own
    # width a negative amount is above bits - 1, so one comparison says both.
    amount = np.asarray(amount)
    unsigned = _UNSIGNED.get(amount.dtype)
    if unsigned is not None:
        holds = (amount.view(unsigned) <= dtype.bits - 1).all()
    else:
        holds = ((amount >= 0) & (amount <= dtype.bits - 1)).all()
    if not holds:
        call.require(False, f"0 <= shift amount <= {dtype.bits - 1} for {dtype.name}")


def _one_element(shape: tuple[int, ...]) -> bool:
    return all(d == 1 for d in shape)


def _on_one_element(call: OpCall, shape: tuple[int, ...], fn):
    """The execute half of a binary op whose result has one element (so has each operand): fn of
    the two operands' values as Python integers, stored in the output's type and `shape`. None
    when the result is larger. (item() raises on an array of more than one element: a caller
    that breaks the declared shapes gets an error, not a wrong value.)"""
    if not _one_element(shape):
        return None
    storage = np.dtype(call.output_specs[0].dtype.storage)
    return lambda ins: [np.array(fn(ins[0].item(), ins[1].item()), storage).reshape(shape)]


# ---- binary arithmetic ---------------------------------------------------------------------

@register_plan("ADD")
def add(call: OpCall):
    dt = same_types(call, (I32,), 2)
    shape = _binary_shape(call)
    # apply_add_s<int32>: the int64 sum must fit int32 (REQUIRE); then it is stored unchanged.
    return (_on_one_element(call, shape, lambda a, b: nx.apply_add_s_int(a, b, dt))
            or (lambda ins: [nx.fast_add_s(ins[0], ins[1], dt)]))


@register_plan("SUB")
def sub(call: OpCall):
    dt = same_types(call, (I32,), 2)
    shape = _binary_shape(call)
    return (_on_one_element(call, shape, lambda a, b: nx.apply_sub_s_int(a, b, dt))
            or (lambda ins: [nx.fast_sub_s(ins[0], ins[1], dt)]))


@register_plan("MUL", static=(2,))
def mul(call: OpCall):
    in_t, _, out_t = check_types(call, [(I8, I8, I32), (I16, I16, I32), (I32, I32, I32)], (0, 1))
    shape = _binary_shape(call)
    shift = scalar_operand(call, 2, "shift", I8)

    def shift_required():
        # REQUIREs on the shift operand: constant in a prepared graph, checked every invocation
        # all the same (they are REQUIREs, not ERROR_IFs, and are reported when the op runs).
        call.require(0 <= shift <= 63, "0 <= shift <= 63")
        call.require(in_t == I32 or shift == 0, "shift == 0 unless in_t is INT32")

    def product_int(a: int, b: int) -> int:
        shift_required()
        if in_t == I32 and shift > 0:
            # the rounding add in int64 (wrapping as the vectorised form's does), then the shift
            p = nx.wrap_int(a * b + (1 << (shift - 1)), 64) >> shift
            call.require(I32.min <= p <= I32.max, "rounded product fits INT32")
            return p
        return nx.wrap_int(a * b, 32)   # apply_mul_s<int32>: the product truncated to 32 bits

    one = _on_one_element(call, shape, product_int)
    if one is not None:
        return one

    def execute(ins):
        shift_required()
        if in_t == I32 and shift > 0:
            product = np.multiply(ins[0], ins[1], dtype=np.int64)
            product += np.int64(1) << np.int64(shift - 1)          # rounding
            product >>= np.int64(shift)
            return [nx.narrow_required(product, I32, call, "rounded product fits INT32")]
        # apply_mul_s<int32>: the int64 product truncated to 32 bits (two's complement)
        return [np.asarray(np.multiply(ins[0], ins[1], dtype=np.int64).astype(np.int32))]
    return execute


@register("INTDIV")
def intdiv(call: OpCall):
    dt = same_types(call, (I32,), 2)
    _binary_shape(call)
    a, b = call.inputs[0], call.inputs[1]
    call.require(_i64(b) != 0, "value2 != 0")
    return [out(call, nx.apply_intdiv_s(a, b, dt))]


@register_plan("MAXIMUM")
def maximum(call: OpCall):
    same_types(call, (I32,), 2)
    shape = _binary_shape(call)
    # apply_max_s on int32 values: numpy's maximum of the int32 arrays is the same value
    return (_on_one_element(call, shape, max)
            or (lambda ins: [np.asarray(np.maximum(ins[0], ins[1]))]))


@register_plan("MINIMUM")
def minimum(call: OpCall):
    same_types(call, (I32,), 2)
    shape = _binary_shape(call)
    return (_on_one_element(call, shape, min)
            or (lambda ins: [np.asarray(np.minimum(ins[0], ins[1]))]))


# ---- shifts ---------------------------------------------------------------------------------

def _shift_in_range_int(call: OpCall, dtype: DType, amount: int) -> None:
    if not 0 <= amount <= dtype.bits - 1:
        call.require(False, f"0 <= shift amount <= {dtype.bits - 1} for {dtype.name}")


@register_plan("ARITHMETIC_RIGHT_SHIFT")
def arithmetic_right_shift(call: OpCall):
    dt = same_types(call, INTS, 2)
    shape = _binary_shape(call)
    rounding = bool(attr(call, "round", False))
    storage = dt.storage

    def shift_int(a: int, b: int) -> int:
        _shift_in_range_int(call, dt, b)
        return nx.apply_arith_rshift_int(a, b, rounding)

    one = _on_one_element(call, shape, shift_int)
    if one is not None:
        return one

    def execute(ins):
        a, b = ins
        _shift_in_range(call, dt, b)
        # apply_arith_rshift: a >> b (0 <= b <= bits - 1) is a value of in_t: no wrap needed
        if rounding:
            # round: one more when the last bit shifted out (bit b - 1) is set, which is
            # (a + 2^(b-1)) >> b, with nothing added when b = 0 ((1 << b) >> 1 = 0). The int64
            # sum cannot overflow and the result lies in in_t's range.
            half = np.right_shift(np.left_shift(1, b, dtype=np.int64), 1)
            return [np.asarray(np.right_shift(np.add(a, half, dtype=np.int64), b, dtype=np.int64).astype(storage))]
        return [np.asarray(np.right_shift(a, b, dtype=np.int64).astype(storage))]
    return execute


@register_plan("LOGICAL_LEFT_SHIFT")
def logical_left_shift(call: OpCall):
    dt = same_types(call, INTS, 2)
    shape = _binary_shape(call)
    storage = dt.storage

    def shift_int(a: int, b: int) -> int:
        _shift_in_range_int(call, dt, b)
        return nx.wrap_int(a << b, dt.bits)     # apply_logical_lshift

    one = _on_one_element(call, shape, shift_int)
    if one is not None:
        return one

    def execute(ins):
        b = ins[1]
        _shift_in_range(call, dt, b)
        # apply_logical_lshift: the int64 shift truncated to in_t's width (amount <= bits - 1)
        return [np.asarray(np.left_shift(ins[0], b, dtype=np.int64).astype(storage))]
    return execute


@register_plan("LOGICAL_RIGHT_SHIFT")
def logical_right_shift(call: OpCall):
    dt = same_types(call, INTS, 2)
    _binary_shape(call)

    def execute(ins):
        b = _i64(ins[1])
        _shift_in_range(call, dt, b)
        return [out(call, nx.apply_logical_rshift(ins[0], b, dt))]
    return execute


# ---- bitwise and logical --------------------------------------------------------------------

def _bitwise(fn):
    def kernel(call: OpCall):
        same_types(call, INTS, 2)
        _binary_shape(call)
        return [out(call, fn(call.inputs[0], call.inputs[1]))]
    return kernel


register("BITWISE_AND")(_bitwise(np.bitwise_and))
register("BITWISE_OR")(_bitwise(np.bitwise_or))
register("BITWISE_XOR")(_bitwise(np.bitwise_xor))


def _logical(fn):
    def kernel(call: OpCall):
        same_types(call, (BOOL,), 2)
        _binary_shape(call)
        return [out(call, fn(call.inputs[0], call.inputs[1]))]
    return kernel


register("LOGICAL_AND")(_logical(np.logical_and))
register("LOGICAL_OR")(_logical(np.logical_or))
register("LOGICAL_XOR")(_logical(np.logical_xor))


# ---- comparisons ----------------------------------------------------------------------------

def _compare(fn):
    def kernel(call: OpCall):
        check_types(call, [(I32, I32, BOOL)], (0, 1))
        _binary_shape(call)
        return [out(call, fn(call.inputs[0], call.inputs[1]))]
    return kernel


register("EQUAL")(_compare(np.equal))
register("GREATER")(_compare(np.greater))
register("GREATER_EQUAL")(_compare(np.greater_equal))


@register("SELECT")
def select(call: OpCall):
    check_types(call, [(BOOL, t, t, t) for t in (BOOL,) + INTS], (0, 1, 2))
    s1, s2, s3 = shape_of(call, 0), shape_of(call, 1), shape_of(call, 2)
    check_rank(call, s1, "input1")
    shape = broadcast_shape(call, broadcast_shape(call, s1, s2), s3)
    check_output_shape(call, shape)
    return [out(call, np.where(call.inputs[0], call.inputs[1], call.inputs[2]))]


# ---- unary ----------------------------------------------------------------------------------

def _unary_shape(call: OpCall) -> tuple[int, ...]:
    shape = shape_of(call, 0)
    check_rank(call, shape, "input1")
    check_output_shape(call, shape)
    return shape


@register("ABS")
def abs_(call: OpCall):
    dt = same_types(call, (I32,))
    _unary_shape(call)
    v = _i64(call.inputs[0])
    neg = v < 0
    result = np.where(neg, nx.apply_sub_s(0, np.where(neg, v, 0), dt), v)
    return [out(call, result)]


@register("NEGATE")
def negate(call: OpCall):
    dt = check_types(call, [(t, t, t, t) for t in INTS], (0, 1, 2))[0]
    _unary_shape(call)
    in_zp = scalar_operand(call, 1, "input1_zp")
    out_zp = scalar_operand(call, 2, "output_zp")
    call.error_if(dt != I8 and in_zp != 0, "input1_zp != 0 for a type other than INT8")
    call.error_if(dt != I8 and out_zp != 0, "output_zp != 0 for a type other than INT8")
    acc = I32
    value = nx.apply_sub_s(call.inputs[0], in_zp, acc)
    value = nx.apply_sub_s(0, value, acc)
    value = nx.apply_add_s(value, out_zp, acc)
    return [out(call, nx.apply_clip_s(value, dt.min, dt.max))]


@register_plan("CLZ")
def clz(call: OpCall):
    same_types(call, (I32,))
    shape = _unary_shape(call)
    if _one_element(shape):            # the primitive's one-element form
        return lambda ins: [np.array(nx.count_leading_zeros_int(ins[0].item()), np.int32).reshape(shape)]
    return lambda ins: [out(call, nx.count_leading_zeros(ins[0]))]


@register("BITWISE_NOT")
def bitwise_not(call: OpCall):
    same_types(call, INTS)
    _unary_shape(call)
    return [out(call, np.invert(call.inputs[0]))]


@register("LOGICAL_NOT")
def logical_not(call: OpCall):
    same_types(call, (BOOL,))
    _unary_shape(call)
    return [out(call, np.logical_not(call.inputs[0]))]


@register_plan("CLAMP")
def clamp(call: OpCall):
    dt = same_types(call, (I8, I16))
    _unary_shape(call)
    min_val = attr_value(call, "min_val", dt)
    max_val = attr_value(call, "max_val", dt)
    call.error_if(max_val < min_val, lambda: f"max_val < min_val ({max_val} < {min_val})")
    call.error_if(not (dt.min <= min_val <= dt.max and dt.min <= max_val <= dt.max),
                  lambda: f"min_val/max_val outside the range of {dt.name}")
    lo, hi = dt.storage.type(min_val), dt.storage.type(max_val)
    # apply_clip_s in the input's own type: both bounds are values of that type
    return lambda ins: [np.asarray(np.minimum(np.maximum(ins[0], lo), hi))]
