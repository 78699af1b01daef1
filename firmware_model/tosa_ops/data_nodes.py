"""Data nodes: CONST and CONST_SHAPE (their value is the output tensor's data in the graph,
handed over by the interpreter in `call.extra["value"]`) and IDENTITY.

IDENTITY ops that carry a VariableRead/VariableWrite attribute are variable accesses; the
interpreter handles those itself (they touch the session's persistent state), never this kernel.
"""

from __future__ import annotations

import numpy as np

from firmware_model.errors import TosaError
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import check_output_shape, check_rank, check_types, out, shape_of
from firmware_model.tosa_ops.registry import OpCall, register

IDENTITY_TYPES = (DType.BOOL, DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48)


def _constant(call: OpCall, shape_only: bool):
    call.error_if(len(call.output_specs) != 1, "a constant has exactly one output")
    spec = call.output_specs[0]
    if shape_only:
        call.error_if(spec.dtype != DType.SHAPE, lambda: f"output type {spec.dtype.name} is not SHAPE")
    value = call.extra.get("value")
    if value is None:
        raise TosaError(call.op, "the output tensor has no constant data", call.where)
    value = np.asarray(value)
    call.error_if(value.dtype != spec.dtype.storage,
                  lambda: f"constant data is {value.dtype}, {spec.dtype.name} needs {spec.dtype.storage}")
    check_rank(call, value.shape, "output")
    check_output_shape(call, value.shape)
    return [value]


@register("CONST")
def const(call: OpCall):
    return _constant(call, shape_only=False)


@register("CONST_SHAPE")
def const_shape(call: OpCall):
    return _constant(call, shape_only=True)


@register("IDENTITY")
def identity(call: OpCall):
    check_types(call, [(t, t) for t in IDENTITY_TYPES])
    shape = shape_of(call, 0)
    check_rank(call, shape, "input1")
    check_output_shape(call, shape)
    return [out(call, np.array(call.inputs[0], copy=True))]
