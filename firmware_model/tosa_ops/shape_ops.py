"""Shape operators (TOSA's shape extension): operations on `shape_t` values.

A shape_t value is a one-dimensional SHAPE tensor (int64 storage) whose elements are dims; it
feeds the shape operands of RESHAPE, TILE, PAD, SLICE, ... The compiler evaluates these at
compile time (compiler/passes/shape_resolution.py) with these kernels, the interpreter at run time.

    DIM(input1, axis)                 [shape(input1)[axis]]
    ADD/SUB/MUL/MAX/MIN_SHAPE(a, b)   element by element
    DIV_FLOOR/DIV_CEIL/MOD_SHAPE(a, b)
    EXP2_SHAPE(a), LOG2_CEIL_SHAPE(a), LOG2_FLOOR_SHAPE(a)
    CONCAT_SHAPE(a, b, ...)           the values one after the other
    SLICE_SHAPE(a, start, size)       a[start : start + size] (start, size: one-element int32 tensors)
    ASSERT_EQUAL_SHAPE(a, b)          ERROR_IF the values differ (allow_broadcast: or one is 1)

The arithmetic is exact on int64 values (negative values included, as Arm's generator and
reference model use them); a division by zero and the logarithm of a value <= 0 are REQUIRE
failures. A shape value with no elements is "rank 0", which CONCAT_SHAPE refuses.
"""

from __future__ import annotations

import numpy as np

from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import attr, check_rank, shape_of
from firmware_model.tosa_ops.registry import OpCall, register



def _shape_value(call: OpCall, i: int, what: str) -> np.ndarray:
    """Input i as a shape_t value (ERROR_IF it is not one)."""
    spec = call.input_specs[i]
    call.error_if(spec.dtype != DType.SHAPE, lambda: f"{what} is {spec.dtype.name}, not a shape value")
    x = np.asarray(call.inputs[i])
    call.error_if(x.ndim != 1, lambda: f"{what} has rank {x.ndim}: shape values are one-dimensional")
    return x.astype(np.int64)


def _shape_output(call: OpCall, length: int) -> None:
    call.error_if(len(call.output_specs) != 1, "a shape operator has one output")
    spec = call.output_specs[0]
    call.error_if(spec.dtype != DType.SHAPE, lambda: f"output is {spec.dtype.name}, not a shape value")
    declared = tuple(spec.shape)
    call.error_if(len(declared) != 1 or (declared[0] >= 0 and declared[0] != length),
                  lambda: f"output holds {declared} values, the result {length}")


@register("DIM")
def dim(call: OpCall):
    shape = shape_of(call, 0)
    check_rank(call, shape, "input1")
    axis = int(attr(call, "axis", 0))
    call.error_if(axis < 0 or axis >= len(shape), lambda: f"axis {axis} outside [0, rank(input1) = {len(shape)})")
    _shape_output(call, 1)
    return [np.array([shape[axis]], dtype=np.int64)]


def _binary(call: OpCall, fn, divides: bool = False):
    a = _shape_value(call, 0, "input1")
    b = _shape_value(call, 1, "input2")
    call.error_if(len(a) != len(b), lambda: f"input1 holds {len(a)} values, input2 {len(b)}")
    _shape_output(call, len(a))
    if divides:
        call.require(bool(np.all(b != 0)), "input2 != 0 (division by zero)")
    return [np.asarray(fn(a, b), dtype=np.int64)]


register("ADD_SHAPE")(lambda call: _binary(call, np.add))
register("SUB_SHAPE")(lambda call: _binary(call, np.subtract))
register("MUL_SHAPE")(lambda call: _binary(call, np.multiply))
register("MAX_SHAPE")(lambda call: _binary(call, np.maximum))
register("MIN_SHAPE")(lambda call: _binary(call, np.minimum))
# floor and ceiling of the exact quotient (the divisor may be negative), remainder of floor division
register("DIV_FLOOR_SHAPE")(lambda call: _binary(call, np.floor_divide, divides=True))
register("DIV_CEIL_SHAPE")(lambda call: _binary(call, lambda a, b: -np.floor_divide(-a, b), divides=True))
register("MOD_SHAPE")(lambda call: _binary(call, np.mod, divides=True))


def _unary(call: OpCall, fn, rule, what: str):
    a = _shape_value(call, 0, "input1")
    _shape_output(call, len(a))
    call.require(bool(np.all(rule(a))), what)
    return [np.array([fn(int(v)) for v in a], dtype=np.int64)]


register("EXP2_SHAPE")(lambda call: _unary(call, lambda v: 1 << v, lambda a: (a >= 0) & (a < 63),
                                           "0 <= input1 < 63"))
register("LOG2_FLOOR_SHAPE")(lambda call: _unary(call, lambda v: v.bit_length() - 1, lambda a: a > 0, "input1 > 0"))
register("LOG2_CEIL_SHAPE")(lambda call: _unary(call, lambda v: (v - 1).bit_length(), lambda a: a > 0, "input1 > 0"))


@register("CONCAT_SHAPE")
def concat_shape(call: OpCall):
    call.error_if(len(call.inputs) == 0, "input list is empty")
    values = [_shape_value(call, i, f"input1[{i}]") for i in range(len(call.inputs))]
    for i, v in enumerate(values):
        call.error_if(len(v) == 0, lambda: f"input1[{i}] has rank 0 (no values)")
    result = np.concatenate(values) if values else np.zeros(0, np.int64)
    _shape_output(call, len(result))
    return [result.astype(np.int64)]


def _int_scalar(call: OpCall, i: int, what: str) -> int:
    x = np.asarray(call.inputs[i])
    call.error_if(call.input_specs[i].dtype not in (DType.INT32, DType.SHAPE) or x.size != 1,
                  lambda: f"{what} must be one int32 value")
    return int(x.reshape(-1)[0])


@register("SLICE_SHAPE")
def slice_shape(call: OpCall):
    a = _shape_value(call, 0, "input1")
    start = _int_scalar(call, 1, "start")
    size = _int_scalar(call, 2, "size")
    call.error_if(start < 0, lambda: f"start {start} < 0")
    call.error_if(size <= 0, lambda: f"size {size} <= 0")
    call.error_if(start + size > len(a), lambda: f"start + size = {start + size} > length(input1) = {len(a)}")
    _shape_output(call, size)
    return [a[start:start + size].astype(np.int64)]


@register("ASSERT_EQUAL_SHAPE")
def assert_equal_shape(call: OpCall):
    a = _shape_value(call, 0, "input1")
    b = _shape_value(call, 1, "input2")
    call.error_if(len(a) != len(b), lambda: f"input1 holds {len(a)} values, input2 {len(b)}")
    if bool(attr(call, "allow_broadcast", False)):
        differ = (a != b) & (a != 1) & (b != 1)
    else:
        differ = a != b
    call.error_if(bool(np.any(differ)), lambda: f"shape values {a.tolist()} and {b.tolist()} are not equal")
    return []
