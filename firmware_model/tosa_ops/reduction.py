"""Reduction TOSA operators: REDUCE_ALL/ANY/MAX/MIN/PRODUCT/SUM and ARGMAX. The reduced axis
stays in the output with size 1 (ARGMAX drops it), as in the spec."""

from __future__ import annotations

import numpy as np

from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import (attr, check_output_shape, check_rank, check_types,
                                              out, same_types, shape_of)
from firmware_model.tosa_ops.registry import OpCall, register, register_plan

I8, I16, I32, BOOL = DType.INT8, DType.INT16, DType.INT32, DType.BOOL


def _reduce_axis(call: OpCall) -> int:
    """ERROR_IF(axis < 0 || axis >= rank(shape1)); ERROR_IF(shape[axis] != 1); output shape."""
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input", 1)
    axis = int(attr(call, "axis", 0))
    call.error_if(axis < 0 or axis >= len(shape1), lambda: f"axis {axis} outside [0, rank(input) = {len(shape1)})")
    expected = list(shape1)
    expected[axis] = 1
    check_output_shape(call, expected)
    return axis


@register("REDUCE_ALL")
def reduce_all(call: OpCall):
    same_types(call, (BOOL,))
    axis = _reduce_axis(call)
    return [out(call, np.all(call.inputs[0], axis=axis, keepdims=True))]


@register("REDUCE_ANY")
def reduce_any(call: OpCall):
    same_types(call, (BOOL,))
    axis = _reduce_axis(call)
    return [out(call, np.any(call.inputs[0], axis=axis, keepdims=True))]


@register_plan("REDUCE_MAX")
def reduce_max(call: OpCall):
    same_types(call, (I8, I16, I32))
    axis = _reduce_axis(call)
    return lambda ins: [out(call, np.max(ins[0], axis=axis, keepdims=True))]


@register_plan("REDUCE_MIN")
def reduce_min(call: OpCall):
    same_types(call, (I8, I16, I32))
    axis = _reduce_axis(call)
    return lambda ins: [out(call, np.min(ins[0], axis=axis, keepdims=True))]


@register_plan("REDUCE_SUM")
def reduce_sum(call: OpCall):
    dt = same_types(call, (I32,))
    axis = _reduce_axis(call)

    def execute(ins):
        # acc = apply_add_s<acc_t>(acc, value) in order: every partial sum must fit acc_t (REQUIRE).
        partial = np.cumsum(np.asarray(ins[0], dtype=np.int64), axis=axis)
        call.require((partial >= dt.min) & (partial <= dt.max), "apply_add_s: partial sum fits INT32")
        return [out(call, np.take(partial, [-1], axis=axis))]
    return execute


@register("REDUCE_PRODUCT")
def reduce_product(call: OpCall):
    # The spec defines REDUCE_PRODUCT for floating-point types only.
    check_types(call, [])
    return []


@register("ARGMAX")
def argmax(call: OpCall):
    check_types(call, [(I8, I32), (I16, I32), (I32, I32)])
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input", 1)
    axis = int(attr(call, "axis", 0))
    call.error_if(axis < 0 or axis >= len(shape1), lambda: f"axis {axis} outside [0, rank(input) = {len(shape1)})")
    expected = list(shape1[:axis]) + list(shape1[axis + 1:])
    check_output_shape(call, expected)
    # The first index holding the maximum (apply_max_s keeps the earlier value on ties).
    return [out(call, np.argmax(call.inputs[0], axis=axis))]
