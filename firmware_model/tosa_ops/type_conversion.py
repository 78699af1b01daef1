"""CAST between the integer types and bool (floating-point casts are outside the integer profile)."""

from __future__ import annotations

import numpy as np

from firmware_model.tosa_ops.dtypes import DType, wrap
from firmware_model.tosa_ops.op_utils import check_output_shape, check_rank, check_types, out, shape_of
from firmware_model.tosa_ops.registry import OpCall, register

_INTS = (DType.INT8, DType.INT16, DType.INT32)
CAST_TYPES = [(a, b) for a in (DType.BOOL,) + _INTS for b in (DType.BOOL,) + _INTS if a != b]


@register("CAST")
def cast(call: OpCall):
    in_t, out_t = check_types(call, CAST_TYPES)
    shape = shape_of(call, 0)
    check_rank(call, shape, "input")
    check_output_shape(call, shape)
    x = np.asarray(call.inputs[0])
    if out_t == DType.BOOL:
        return [out(call, x != 0)]                       # (in != 0) ? true : false
    if in_t == DType.BOOL:
        return [out(call, x.astype(np.int64))]           # (in) ? 1 : 0
    if out_t.bits >= in_t.bits:
        return [out(call, x.astype(np.int64))]           # sign_extend<out_t>(in)
    return [out(call, wrap(x.astype(np.int64), out_t.bits))]   # truncate<out_t>(in)
