"""Checks and helpers shared by the op kernels: the spec's shape rules (broadcast_shape, rank
limits, output-shape checks), the supported-type tables and reading attributes and shape
operands. Every failure is a typed error naming the op and the rule (see registry.OpCall)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from firmware_model.errors import TosaError, TosaUnsupported
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import OpCall

# Level 8K (the level Arm's conformance tests and runner use).
MAX_RANK = 6

# Element types the integer profile (plus the int16 extension) defines; anything else a kernel
# sees is either illegal for the op (TosaError) or outside npu-bench's scope (TosaUnsupported).
_OUT_OF_SCOPE = {DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2,
                 DType.FP6E2M3, DType.FP6E3M2, DType.FP4E2M1, DType.FP8UE8M0, DType.INT64,
                 DType.MXINT8, DType.INT4}


def shape_of(call: OpCall, i: int) -> tuple[int, ...]:
    """The actual shape of input i (from the array; the declared spec may hold -1)."""
    x = call.inputs[i]
    return tuple(x.shape) if x is not None else tuple(call.input_specs[i].shape)


def check_types(call: OpCall, allowed: Iterable[tuple[DType, ...]], in_idx: Sequence[int] = (0,),
                out_idx: Sequence[int] = (0,)) -> tuple[DType, ...]:
    """ERROR_IF the (input..., output...) element types are not one of the op's supported rows."""
    ins, outs = call.input_specs, call.output_specs
    if out_idx == (0,) and in_idx == (0,):             # the usual rows, without list building
        combo = (ins[0].dtype, outs[0].dtype)
    elif out_idx == (0,) and in_idx == (0, 1):
        combo = (ins[0].dtype, ins[1].dtype, outs[0].dtype)
    else:
        combo = tuple([ins[i].dtype for i in in_idx] + [outs[i].dtype for i in out_idx])
    if combo in allowed:
        return combo
    names = "x".join(d.name for d in combo)
    if any(d in _OUT_OF_SCOPE for d in combo):
        raise TosaUnsupported(f"{call.op}: element types {names} are outside npu-bench's integer profile")
    raise TosaError(call.op, f"unsupported element types {names}", call.where)


def same_types(call: OpCall, types: Iterable[DType], n_in: int = 1) -> DType:
    """ERROR_IF inputs 0..n_in-1 and output 0 do not all have one type from `types`."""
    ins = call.input_specs
    if len(ins) >= n_in and call.output_specs:          # the usual answer, without building the rows
        t = call.output_specs[0].dtype
        if t in types and all(ins[i].dtype == t for i in range(n_in)):
            return t
    return check_types(call, [(t,) * (n_in + 1) for t in types], tuple(range(n_in)), (0,))[0]


def check_rank(call: OpCall, shape: Sequence[int], what: str = "input", lo: int = 0,
               hi: int = MAX_RANK) -> None:
    if not (lo <= len(shape) <= hi):
        call.error_if(True, f"rank({what}) = {len(shape)} outside [{lo}, {hi}]")


def broadcast_shape(call: OpCall, shape1: Sequence[int], shape2: Sequence[int]) -> tuple[int, ...]:
    """shape_t broadcast_shape(shape1, shape2): equal ranks, each dim equal or 1."""
    if len(shape1) != len(shape2):
        call.error_if(True, f"rank(shape1) != rank(shape2) ({len(shape1)} vs {len(shape2)})")
    if tuple(shape1) == tuple(shape2):
        return tuple(shape1)
    out = list(shape1)
    for i, (a, b) in enumerate(zip(shape1, shape2)):
        if a == 1:
            out[i] = b
        elif b != 1 and b != a:
            call.error_if(True, f"shapes {tuple(shape1)} and {tuple(shape2)} do not broadcast (dim {i})")
    return tuple(out)


def check_output_shape(call: OpCall, shape: Sequence[int], i: int = 0, rule: str | None = None) -> None:
    """ERROR_IF the declared output shape disagrees with `shape` (declared -1 dims match anything)."""
    declared = tuple(call.output_specs[i].shape)
    if declared == tuple(shape):
        return
    ok = len(declared) == len(shape) and all(d < 0 or d == s for d, s in zip(declared, shape))
    call.error_if(not ok, rule or (lambda: f"output shape {_fmt(declared)} != {_fmt(shape)}"))


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


def attr(call: OpCall, name: str, default: Any = None) -> Any:
    v = call.attrs.get(name, default)
    return default if v is None else v


_INT_TYPE = {int}


def attr_int_list(call: OpCall, name: str) -> list[int]:
    v = call.attrs.get(name)
    if v is None:
        raise TosaError(call.op, f"attribute '{name}' is missing", call.where)
    if type(v) is list and set(map(type, v)) <= _INT_TYPE:    # every type(x) is int
        return list(v)                  # what the reader gives: the same values, flat already
    return [int(x) for x in np.asarray(v).reshape(-1)]


_SHAPE_OPERAND_TYPES = (DType.SHAPE, DType.INT32, DType.INT64)


def shape_operand(call: OpCall, i: int, what: str) -> list[int]:
    """The values of a shape_t operand (a CONST_SHAPE output, or an int tensor) as ints."""
    spec = call.input_specs[i]
    if spec.dtype not in _SHAPE_OPERAND_TYPES:
        call.error_if(True, f"{what} must be a shape operand, not {spec.dtype.name}")
    x = call.inputs[i]
    if x is None:
        raise TosaError(call.op, f"{what} has no value (shape operands must be constant)", call.where)
    values = x if type(x) is np.ndarray and x.ndim == 1 else np.asarray(x).reshape(-1)
    if values.dtype.kind in "iu":
        return values.tolist()          # Python integers, without a numpy scalar per value
    return [int(v) for v in values]


def scalar_operand(call: OpCall, i: int, what: str, dtype: DType | None = None) -> int:
    """A one-element tensor operand (zero point, MUL shift, PAD pad_const) as an int."""
    x = call.inputs[i]
    if dtype is not None and call.input_specs[i].dtype != dtype:
        call.error_if(True, f"{what} must be {dtype.name}, not {call.input_specs[i].dtype.name}")
    if type(x) is np.ndarray:           # the usual operand: the same checks without conversions
        if x.shape != (1,):
            call.error_if(True, f"{what} must have shape [1]")
        return int(x[0])
    call.error_if(x is None or tuple(np.shape(x)) != (1,), lambda: f"{what} must have shape [1]")
    return int(np.asarray(x).reshape(-1)[0])


def attr_value(call: OpCall, name: str, dtype: DType) -> int:
    """An attribute holding one value of the input's type (CLAMP min_val/max_val).

    The schema stores these as little-endian bytes of the element type; a reader may also hand
    over the decoded integer. Both are accepted.
    """
    v = call.attrs.get(name)
    if v is None:
        raise TosaError(call.op, f"attribute '{name}' is missing", call.where)
    if isinstance(v, (bytes, bytearray, list, tuple)) or (isinstance(v, np.ndarray) and v.dtype == np.uint8):
        raw = bytes(bytearray(int(b) & 0xFF for b in (v if not isinstance(v, (bytes, bytearray)) else list(v))))
        nbytes = {DType.BOOL: 1, DType.INT8: 1, DType.INT16: 2, DType.INT32: 4, DType.INT48: 6}.get(dtype)
        if nbytes is None:
            raise TosaUnsupported(f"{call.op}: attribute '{name}' of type {dtype.name} is not supported")
        call.error_if(len(raw) < nbytes, lambda: f"attribute '{name}' has {len(raw)} bytes, {dtype.name} needs {nbytes}")
        return int.from_bytes(raw[:nbytes], "little", signed=dtype != DType.BOOL)
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
    return int(v)


_STORAGE_OF = {t: t.storage for t in DType if t.has_storage}


def out(call: OpCall, values: np.ndarray, i: int = 0) -> np.ndarray:
    """Values already in range, stored in output i's storage type."""
    dtype = call.output_specs[i].dtype
    storage = _STORAGE_OF.get(dtype) or dtype.storage      # (the latter names a type without one)
    if type(values) is np.ndarray and values.dtype == storage:
        return values                                       # what astype(copy=False) returns
    return np.asarray(values).astype(storage, copy=False)
