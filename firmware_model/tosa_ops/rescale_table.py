"""TOSA RESCALE and TABLE, integer profile plus the int16 and doubleround extensions.

RESCALE follows the spec's pseudocode: input read signed or, with input_unsigned, zero-extended
(and so is input_zp); value - input_zp scaled by apply_scale_32 (scale32, single or double round)
or apply_scale_16; output_zp added (zero-extended for an unsigned output); then clipped. For an
unsigned output the clip is to [0, maximum_u] on the signed int32 result, which is what Arm's
reference model does (a negative result gives 0; the spec's apply_clip_u on the raw int32 bits
would give maximum_u instead). The arithmetic is numerics.rescale_values.

TABLE: int8 looks up table[value + 128] (256 entries); int16 interpolates 513 entries with
apply_lookup_s into an int32 result. A table of the wrong length is an error, as in the
reference model.
"""

from __future__ import annotations

import numpy as np

from firmware_model.errors import TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import (check_output_shape, check_types, out,
                                              scalar_operand, shape_of)
from firmware_model.tosa_ops.registry import OpCall, register

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48

RESCALE_TYPES = [(i, o) for i in (I8, I16, I32, I48) for o in (I8, I16, I32)]
TABLE_TYPES = {(I8, I8, I8): 256, (I16, I16, I32): 513}
# RESCALE evaluates blocks of about this many elements at a time (int64 temporaries stay in cache).
CHUNK = 1 << 15


def _check_arity(call: OpCall, n_in: int) -> None:
    call.error_if(len(call.inputs) != n_in, f"takes {n_in} inputs, got {len(call.inputs)}")
    call.error_if(len(call.output_specs) != 1, f"has 1 output, got {len(call.output_specs)}")


def _zero_extend(v, dtype: DType):
    return np.asarray(v, dtype=np.int64) & dtype.umax


@register("RESCALE")
def rescale(call: OpCall):
    _check_arity(call, 5)
    in_t, out_t = check_types(call, RESCALE_TYPES)
    a = call.attrs
    scale32 = bool(a.get("scale32", False))
    rounding_mode = int(a.get("rounding_mode", numerics.SINGLE_ROUND))
    per_channel = bool(a.get("per_channel", False))
    in_u = bool(a.get("input_unsigned", False))
    out_u = bool(a.get("output_unsigned", False))

    call.error_if(rounding_mode not in (numerics.SINGLE_ROUND, numerics.INEXACT_ROUND,
                                        numerics.DOUBLE_ROUND),
                  f"rounding_mode {rounding_mode} is not SINGLE_ROUND, INEXACT_ROUND or DOUBLE_ROUND")
    mult_t = I32 if scale32 else I16
    call.error_if(call.in_dtype(1) != mult_t,
                  f"multiplier is {call.in_dtype(1).name}, must be {mult_t.name} when scale32 is {scale32}")
    call.error_if(call.in_dtype(2) != I8, f"shift is {call.in_dtype(2).name}, must be INT8")

    izp = scalar_operand(call, 3, "input_zp", in_t)
    ozp = scalar_operand(call, 4, "output_zp", out_t)
    if in_u:
        izp = int(_zero_extend(izp, in_t))
    if out_u:
        ozp = int(_zero_extend(ozp, out_t))

    # The spec's ERROR_IFs, in its order.
    call.error_if(in_t != I8 and (in_t != I16 or not in_u) and izp != 0,
                  "input_zp != 0 (only int8, or uint16 with 32768, may have one)")
    call.error_if(out_t != I8 and (out_t != I16 or not out_u) and ozp != 0,
                  "output_zp != 0 (only int8, or uint16 with 32768, may have one)")
    call.error_if(in_t == I16 and in_u and izp not in (0, 32768), "uint16 input_zp not 0 or 32768")
    call.error_if(out_t == I16 and out_u and ozp not in (0, 32768), "uint16 output_zp not 0 or 32768")
    call.error_if(scale32 and in_t == I48, "scale32 with an int48 input")
    call.error_if(not scale32 and rounding_mode == numerics.DOUBLE_ROUND,
                  "DOUBLE_ROUND needs scale32")
    call.error_if(in_u and out_u, "input_unsigned and output_unsigned")
    call.error_if(out_t == I32 and in_u, "int32 output with input_unsigned")
    call.error_if(in_t == I32 and out_u, "int32 input with output_unsigned")
    call.error_if(in_t == I48 and out_u, "int48 input with output_unsigned")
    call.error_if(in_t == I48 and in_u, "unsigned int48 input")
    call.error_if(in_t == I32 and in_u, "unsigned int32 input")
    call.error_if(out_t == I32 and out_u, "unsigned int32 output")
    shape = shape_of(call, 0)
    call.error_if(per_channel and len(shape) < 1, "per_channel with a rank-0 input")
    check_output_shape(call, shape)
    nc = shape[-1] if per_channel else 1
    mult = np.asarray(call.inputs[1]).reshape(-1)
    shift = np.asarray(call.inputs[2]).reshape(-1)
    call.error_if(mult.size != nc, f"multiplier has {mult.size} values, needs {nc}")
    call.error_if(shift.size != nc, f"shift has {shift.size} values, needs {nc}")
    if rounding_mode == numerics.INEXACT_ROUND:
        raise TosaUnsupported(f"{call.op} ({call.where}): INEXACT_ROUND belongs to the inexactround "
                              "extension, which npu-bench does not implement")

    x = np.asarray(call.inputs[0])
    values = _zero_extend(x, in_t) if in_u else x
    kwargs = dict(input_zp=izp, output_zp=ozp, out_dtype=out_t, scale32=scale32,
                  double_round=rounding_mode == numerics.DOUBLE_ROUND, input_unsigned=in_u,
                  output_unsigned=out_u, require=True)
    m_arg, s_arg = (mult, shift) if per_channel else (mult[0], shift[0])
    axis = -1 if per_channel else None
    if values.size <= CHUNK:
        try:
            result = numerics.rescale_values(values, multiplier=m_arg, shift=s_arg,
                                             channel_axis=axis, **kwargs)
        except TosaUnpredictable as e:
            raise TosaUnpredictable(call.op, f"{e.op}: {e.rule}", call.where) from e
        # Unsigned results in [0, maximum_u] keep their bit pattern in the signed storage type.
        return [out(call, result)]
    # Blocks of about CHUNK elements keep rescale_values' int64 temporaries in cache.
    flat = values.reshape(-1, nc) if values.ndim else values.reshape(1, 1)
    result = np.empty(flat.shape, out_t.storage)
    rows = max(1, CHUNK // nc)
    try:
        for r0 in range(0, flat.shape[0], rows):
            block = numerics.rescale_values(flat[r0:r0 + rows], multiplier=m_arg, shift=s_arg,
                                            channel_axis=axis, **kwargs)
            result[r0:r0 + rows] = block.astype(out_t.storage)
    except TosaUnpredictable as e:
        raise TosaUnpredictable(call.op, f"{e.op}: {e.rule}", call.where) from e
    return [out(call, result.reshape(x.shape))]


@register("TABLE")
def table(call: OpCall):
    _check_arity(call, 2)
    combo = check_types(call, list(TABLE_TYPES), in_idx=(0, 1), out_idx=(0,))
    size = TABLE_TYPES[combo]
    tab = np.asarray(call.inputs[1]).reshape(-1)
    call.error_if(len(shape_of(call, 1)) != 1 or tab.size != size,
                  f"table has shape {list(shape_of(call, 1))}, must be [{size}]")
    shape = shape_of(call, 0)
    check_output_shape(call, shape)
    x = np.asarray(call.inputs[0])
    if combo[0] == I8:
        return [out(call, numerics.apply_lookup_8(tab, x))]
    try:
        if x.size <= 1 << 16:
            return [out(call, numerics.apply_lookup_s(tab, x))]
        # Large inputs: evaluate apply_lookup_s once per distinct input value (its REQUIRE
        # included), then index that 65536-entry result with the input.
        idx = x.astype(np.int32) + 32768
        used = np.zeros(1 << 16, np.bool_)
        used[idx] = True
        values = np.flatnonzero(used) - 32768
        lut = np.zeros(1 << 16, np.int32)
        lut[values + 32768] = numerics.apply_lookup_s(tab, values)
        return [out(call, lut[idx])]
    except TosaUnpredictable as e:
        raise TosaUnpredictable(call.op, f"{e.op}: {e.rule}", call.where) from e
