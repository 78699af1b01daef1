"""Data-layout TOSA operators: CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE. They move
elements without arithmetic; each checks the spec's ERROR_IF shape rules, then indexes with numpy
(views and one copy, no element loops)."""

from __future__ import annotations

import math

import numpy as np

from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import (attr, attr_int_list, check_output_shape, check_rank,
                                              check_types, out, same_types, scalar_operand,
                                              shape_of, shape_operand)
from firmware_model.tosa_ops.registry import OpCall, register, register_plan

LAYOUT_TYPES = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32)
_PAD_TYPES = frozenset((t, t, t) for t in LAYOUT_TYPES)       # (input1, pad_const, output)


@register("CONCAT")
def concat(call: OpCall):
    n = len(call.inputs)
    call.error_if(n == 0, "input1 == [] (there must be at least one input)")
    dt = check_types(call, [(t,) * (n + 1) for t in LAYOUT_TYPES], tuple(range(n)))[0]
    shapes = [shape_of(call, i) for i in range(n)]
    rank = len(shapes[0])
    check_rank(call, shapes[0], "input1[0]", 1)
    axis = int(attr(call, "axis", 0))
    call.error_if(axis < 0 or axis >= max(1, rank), lambda: f"axis {axis} outside [0, {max(1, rank)})")
    axis_sum = 0
    for t, s in enumerate(shapes):
        call.error_if(len(s) != rank, lambda: f"rank(shapes1[{t}]) != rank(shapes1[0])")
        for i in range(rank):
            if i == axis:
                axis_sum += s[i]
            else:
                call.error_if(s[i] != shapes[0][i], lambda: f"shapes1[{t}][{i}] != shapes1[0][{i}]")
    expected = list(shapes[0])
    expected[axis] = axis_sum
    check_output_shape(call, expected, rule=lambda: f"output shape does not equal the concatenation {expected}")
    return [out(call, np.concatenate([np.asarray(x) for x in call.inputs], axis=axis))]


@register("PAD")
def pad(call: OpCall):
    dt = check_types(call, _PAD_TYPES, (0, 2))[0]
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input1")
    padding = shape_operand(call, 1, "padding")
    pad_const = scalar_operand(call, 2, "pad_const")
    declared = call.output_specs[0].shape
    if len(declared) != len(shape1):
        call.error_if(True, f"rank(shape) != rank(shape1) ({len(declared)} vs {len(shape1)})")
    if len(padding) != 2 * len(shape1):
        call.error_if(True, f"padding has {len(padding)} values, needs 2 * rank = {2 * len(shape1)}")
    call.error_if(bool(padding) and min(padding) < 0, "padding < 0")
    expected = [padding[2 * i] + shape1[i] + padding[2 * i + 1] for i in range(len(shape1))]
    check_output_shape(call, expected, rule=lambda: f"output shape != padding + input shape {expected}")
    x = np.asarray(call.inputs[0])
    result = np.empty(expected, dt.storage)          # np.full, without its Python-level wrapper
    result.fill(pad_const)
    region = tuple(slice(padding[2 * i], padding[2 * i] + shape1[i]) for i in range(len(shape1)))
    result[region] = x
    return [result]


@register_plan("RESHAPE", static=(1,))
def reshape(call: OpCall):
    same_types(call, LAYOUT_TYPES)
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input1")
    new_shape = shape_operand(call, 1, "shape")
    check_rank(call, new_shape, "shape")
    size1 = math.prod(shape1)                 # Python integers: exact for any size
    if new_shape.count(-1) == 1:
        known = math.prod(d for d in new_shape if d != -1)
        if known > 0 and size1 % known == 0:
            new_shape = [size1 // known if d == -1 else d for d in new_shape]
    call.error_if(any(d < 0 for d in new_shape), lambda: f"shape {new_shape} has a negative dimension")
    check_output_shape(call, new_shape, rule=lambda: f"output shape != shape operand {new_shape}")
    call.error_if(math.prod(new_shape) != size1,
                  lambda: f"tensor_size(shape1) != tensor_size(shape) ({size1} vs {math.prod(new_shape)})")
    new_shape = tuple(new_shape)
    return lambda ins: [np.reshape(ins[0], new_shape)]


@register("REVERSE")
def reverse(call: OpCall):
    same_types(call, LAYOUT_TYPES)
    shape = shape_of(call, 0)
    check_rank(call, shape, "input1", 1)
    axis = int(attr(call, "axis", 0))
    call.error_if(axis < 0 or axis >= len(shape), lambda: f"axis {axis} outside [0, rank = {len(shape)})")
    check_output_shape(call, shape)
    return [out(call, np.flip(call.inputs[0], axis=axis).copy())]


@register_plan("SLICE", static=(1, 2))
def slice_(call: OpCall):
    same_types(call, LAYOUT_TYPES)
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input1", 1)
    start = shape_operand(call, 1, "start")
    size = shape_operand(call, 2, "size")
    rank = len(shape1)
    call.error_if(len(start) != rank or len(size) != rank,
                  lambda: f"rank(shape1) != length(start) or length(size) ({rank}, {len(start)}, {len(size)})")
    call.error_if(len(call.output_specs[0].shape) != rank, "rank(shape1) != rank(shape)")
    for i in range(rank):
        call.error_if(start[i] < 0, lambda: f"start[{i}] < 0")
        call.error_if(size[i] <= 0, lambda: f"size[{i}] <= 0")
        call.error_if(start[i] + size[i] > shape1[i], lambda: f"start[{i}] + size[{i}] > shape1[{i}]")
    check_output_shape(call, size, rule=lambda: f"output shape != size {size}")
    region = tuple(slice(s, s + n) for s, n in zip(start, size))
    return lambda ins: [ins[0][region].copy()]


@register("TILE")
def tile(call: OpCall):
    same_types(call, LAYOUT_TYPES)
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input1", 1)
    multiples = shape_operand(call, 1, "multiples")
    call.error_if(len(call.output_specs[0].shape) != len(shape1), "rank(shape1) != rank(shape)")
    call.error_if(len(multiples) != len(shape1), lambda: f"length(multiples) != rank(shape1)")
    call.error_if(any(m < 1 for m in multiples), "multiples < 1")
    expected = [d * m for d, m in zip(shape1, multiples)]
    check_output_shape(call, expected, rule=lambda: f"shape1[i] * multiples[i] != shape[i] ({expected})")
    return [out(call, np.tile(call.inputs[0], multiples))]


@register("TRANSPOSE")
def transpose(call: OpCall):
    same_types(call, LAYOUT_TYPES)
    shape1 = shape_of(call, 0)
    check_rank(call, shape1, "input1", 1)
    perms = attr_int_list(call, "perms")
    rank = len(shape1)
    call.error_if(len(call.output_specs[0].shape) != rank, "rank(shape1) != rank(shape)")
    call.error_if(len(perms) != rank, lambda: f"length(perms) != rank(shape1) ({len(perms)} vs {rank})")
    used = [False] * rank
    for p in perms:
        call.error_if(p >= rank or p < 0, lambda: f"perms value {p} outside [0, {rank})")
        call.error_if(used[p], lambda: f"perms uses index {p} twice")
        used[p] = True
    expected = [shape1[p] for p in perms]
    check_output_shape(call, expected, rule=lambda: f"shape1[perms[i]] != shape[i] ({expected})")
    return [out(call, np.ascontiguousarray(np.transpose(call.inputs[0], perms)))]
