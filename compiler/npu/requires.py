"""The data-dependent REQUIREs of the TOSA ops an NPU operation fuses, for the golden model's
REQUIRE monitor (firmware_model/golden/require_monitor.py).

The NPU computes the same arithmetic whether or not TOSA's REQUIREs hold (it wraps); the
interpreter refuses an input for which one fails (TosaUnpredictable). So that a graph run on the
golden model refuses the same inputs, every NPU operation lists, for each fused TOSA op that has a
REQUIRE on its data, where in the unit the op's input values are and what to check there:

    point  the values there                                  REQUIREs checked on them
    A0/B0  operand X's elements minus its zero point         the operand's first RESCALE
    A1/B1  after the operand's pure left shift               the operand's second RESCALE
    op     the operation's two int32 operands                ADD, SUB overflow; MUL's rounded product;
                                                             the shifts' amount range
    stage  the unit's result entering the output stage       the fused RESCALE (with the records' multiplier, shift)
    lut    the value entering an int16 table                  TABLE's slope rule for the entries used
    box    the POOL command's input box (raw elements)        the input RESCALE (x - zp) and REDUCE_SUM's
                                                             partial sums of a reduction window

Only what the interpreter's kernels check is listed (docs/verification.md, "The REQUIRE monitor"):
the convolutions' and MATMUL's accumulators and bias add wrap in the kernels as in Arm's reference
model, so none is listed for them; AVG_POOL2D's REQUIREs cannot fail for the windows the compiler
puts on the NPU (its sum stays within int32, see compiler/npu/pool.py; apply_scale_32's range on
it holds for int8/int16 sums).

A requirement that no input can break is dropped at compile time: value ranges are propagated from
the element types (or constant values, or a convolution's constant weights and bias) through the
fused chain, and each condition is tested at the ends of its input's range (every condition is
monotone, or an interval, in its input). So the monitor costs nothing on the commands whose ops
cannot fail, which is most of a quantised network.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.ir import Operator
from compiler.npu.stage import RescaleInfo, StageSpec
from firmware_model.arch.isa import LutMode
from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
Range = tuple[int, int]
# Drop the requirements no input can break (False keeps every one: for tests and measurements).
PRUNE = True


def _needed(can_fail: bool) -> bool:
    return can_fail or not PRUNE


@dataclass
class Requirement:
    """One TOSA op's data-dependent REQUIREs at one point of the unit."""
    op: Operator
    at: str
    kind: str                       # rescale, add, sub, mul, shift, table16, reduce_sum
    params: dict = field(default_factory=dict)


def type_range(dtype: DType, unsigned: bool = False) -> Range:
    if unsigned:
        return 0, dtype.umax
    return dtype.min, dtype.max


def values_range(values: np.ndarray, unsigned_of: DType | None = None) -> Range:
    """The range of constant values (zero-extended when read unsigned as `unsigned_of`)."""
    v = np.asarray(values, dtype=np.int64)
    if unsigned_of is not None:
        v = v & unsigned_of.umax
    return (int(v.min()), int(v.max())) if v.size else (0, 0)


def _clip(r: Range, lo: int, hi: int) -> Range:
    a, b = r
    return min(max(a, lo), hi), max(min(b, hi), lo)


def _fits(lo: int, hi: int, dtype: DType = I32) -> bool:
    return dtype.min <= lo and hi <= dtype.max


# ---- RESCALE ---------------------------------------------------------------------------------

def _rescale_args(info: RescaleInfo) -> dict:
    return dict(output_zp=info.output_zp, out_dtype=info.out_dtype, scale32=info.scale32,
                double_round=info.double_round, output_unsigned=info.output_unsigned)


def rescale(info: RescaleInfo, at: str, lo, hi, *, static: bool, input_zp: int = 0) -> tuple[Requirement | None, Range]:
    """The RESCALE's REQUIREs on values in [lo, hi] (its value `x - input_zp` when `input_zp` is 0,
    else the raw x), per channel when lo / hi are per-channel arrays; and the range of its result.

    `static`: the monitor takes the multiplier and shift from here (operand chains, the reduce
    input), else from the command's parameter records (the output stage)."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    ends = np.stack(np.broadcast_arrays(lo, hi))                 # (2, ...) the range's ends
    if info.per_tensor:
        m, s = info.multiplier[0], info.shift[0]
    else:
        m, s = info.multiplier, info.shift
        ends = ends.reshape(2, -1) if ends.ndim > 1 else ends[:, None]
    args = _rescale_args(info)
    try:
        # Each rule is an interval of, or monotone in, the value: the range's ends decide.
        numerics.rescale_values(ends, multiplier=m, shift=s, input_zp=input_zp, require=True, **args)
        out = numerics.rescale_values(ends, multiplier=m, shift=s, input_zp=input_zp, require=False, **args)
        if PRUNE:
            return None, (int(out.min()), int(out.max()))
    except TosaUnpredictable:
        pass
    params = {**args, "out_dtype": info.out_dtype.name, "input_zp": int(input_zp)}
    if static:
        params.update(multiplier=int(info.multiplier[0]), shift=int(info.shift[0]))
    return Requirement(info.op, at, "rescale", params), type_range(info.out_dtype, info.output_unsigned)


# ---- the output stage --------------------------------------------------------------------------

def stage(stage_spec: StageSpec, lo, hi) -> list[Requirement]:
    """The output stage's REQUIREs for unit results in [lo, hi] (per channel arrays allowed): the
    fused RESCALE's (multiplier and shift from the records), then an int16 TABLE's slope rule for
    the entries the clamped values can reach."""
    found = []
    r: Range = (int(np.min(lo)), int(np.max(hi)))
    if stage_spec.rescale:
        req, r = rescale(stage_spec.rescale_info, "stage", lo, hi, static=False)
        if req is not None:
            found.append(req)
    lo_c, hi_c = stage_spec.range()
    r = _clip(r, lo_c, hi_c)
    if stage_spec.lut_mode == LutMode.INT16:
        table_op = next(o for o in stage_spec.ops if o.op == "TABLE")
        bad = table16_bad(stage_spec.table)
        first, last = (_clip(r, -32768, 32767)[k] + 32768 >> 7 for k in (0, 1))
        if _needed(any(first <= i <= last for i in bad)):
            found.append(Requirement(table_op, "lut", "table16", {"bad": bad}))
    return found


def table16_bad(table: np.ndarray) -> list[int]:
    """Indices i of a 513-entry table whose slope table[i + 1] - table[i] does not fit int16
    (apply_lookup_s's REQUIRE for an input in [i*128 - 32768, i*128 - 32641])."""
    t = np.asarray(table, dtype=np.int64).reshape(-1)
    slope = t[1:] - t[:-1]
    return [int(i) for i in np.flatnonzero((slope < -32768) | (slope > 32767)) if i < 512]


# ---- the kinds ---------------------------------------------------------------------------------

def operand(x) -> tuple[list[Requirement], Range]:
    """An ELTWISE operand's input RESCALEs (compiler/npu/eltwise.Operand.rescales) and the range of
    the int32 value the operation sees."""
    if x.const is not None:
        r = values_range(x.const, x.dtype if x.unsigned else None)
    else:
        r = type_range(x.dtype, x.unsigned)
    found = []
    if not x.rescales:
        return found, (r[0] - x.zp, r[1] - x.zp)
    lo, hi = r
    for at, info in x.rescales:
        req, (lo, hi) = rescale(info, at, lo, hi, static=True, input_zp=info.input_zp if at.endswith("0") else 0)
        if req is not None:
            req.params["input_zp"] = 0         # the unit's point values have the zero point taken off
            found.append(req)
    return found, (lo, hi)


def eltwise(npu) -> list[Requirement]:
    from firmware_model.arch.isa import EltOp

    found, a = operand(npu.a)
    if npu.b is None:                          # COPY: a stand-alone RESCALE / CLAMP / TABLE
        return found + stage(npu.stage, *a)
    more, b = operand(npu.b)
    found += more
    op, binop = npu.op, npu.binop
    if op in (EltOp.ADD, EltOp.SUB):
        lo, hi = (a[0] + b[0], a[1] + b[1]) if op == EltOp.ADD else (a[0] - b[1], a[1] - b[0])
        if _needed(not _fits(lo, hi)):
            found.append(Requirement(binop, "op", op.name.lower()))
        r = _clip((lo, hi), I32.min, I32.max)
    elif op == EltOp.MUL:
        corners = [p * q for p in a for q in b]
        lo, hi = min(corners), max(corners)
        if npu.mul_shift > 0:
            rnd = 1 << (npu.mul_shift - 1)
            lo, hi = (lo + rnd) >> npu.mul_shift, (hi + rnd) >> npu.mul_shift
            if _needed(not _fits(lo, hi)):
                found.append(Requirement(binop, "op", "mul", {"shift": npu.mul_shift}))
            r = _clip((lo, hi), I32.min, I32.max)
        else:
            r = (lo, hi) if _fits(lo, hi) else (I32.min, I32.max)     # apply_mul_s wraps; no REQUIRE
    elif op == EltOp.MINIMUM:
        r = (min(a[0], b[0]), min(a[1], b[1]))
    elif op == EltOp.MAXIMUM:
        r = (max(a[0], b[0]), max(a[1], b[1]))
    else:                                      # the shifts: REQUIRE 0 <= amount <= bits - 1
        dt = npu.a.dtype
        if _needed(not (0 <= b[0] and b[1] <= dt.bits - 1)):
            found.append(Requirement(binop, "op", "shift", {"bits": dt.bits, "dtype": dt.name}))
        r = type_range(dt)
    return found + stage(npu.stage, *r)


def pool(npu) -> list[Requirement]:
    from firmware_model.arch.isa import PoolMode

    found = []
    if npu.mode in (PoolMode.MAX, PoolMode.MIN):
        return stage(npu.stage, *type_range(npu.in_dtype))
    if npu.mode == PoolMode.AVG:
        # The sum of a window stays within int32 (the lowering's condition), and apply_scale_32's
        # range (+-2^(29 + ceil(log2(count)))) holds for any int8/int16 sum: nothing can fail.
        return stage(npu.stage, *type_range(npu.in_dtype))
    x = type_range(npu.in_dtype)
    value = (x[0] - npu.input_zp, x[1] - npu.input_zp)
    if npu.pre_rescale is not None:
        req, value = rescale(npu.pre_rescale, "box", *x, static=True, input_zp=npu.input_zp)
        if req is not None:
            found.append(req)
    # REDUCE_SUM: every partial sum, in the spec's order, fits int32. Op j sums windows of
    # (the product of the dims reduced so far) values, so its partial sums lie within that
    # many times the value range.
    dims = list(npu.reduce_dims)
    done: list[int] = []
    taps = 1
    for op, axis in zip(npu.reduce_ops, npu.reduce_axes):
        taps *= dims[axis]
        lo, hi = min(value[0], taps * value[0]), max(value[1], taps * value[1])
        if _needed(not _fits(lo, hi)):
            found.append(Requirement(op, "box", "reduce_sum", {"dims": dims, "axis": axis, "before": list(done),
                                                               "input_zp": int(npu.input_zp)}))
        done.append(axis)
    total = (min(value[0], taps * value[0]), max(value[1], taps * value[1]))
    r = total if _fits(*total) else (I32.min, I32.max)
    return found + stage(npu.stage, *r)


def conv(npu) -> list[Requirement]:
    """The output stage's REQUIREs on the biased accumulator, per output channel: its range from
    the constant weights (every tap's product between the input's extremes; padding and the
    transpose's upsampling add zeros, inside that range) and bias."""
    x = type_range(npu.ifm_dtype)
    xlo, xhi = x[0] - npu.input_zp, x[1] - npu.input_zp
    w = npu.weights.astype(np.int64).reshape(npu.weights.shape[0], -1) - npu.weight_zp
    lo = np.minimum(w * xlo, w * xhi).sum(axis=1) + npu.bias
    hi = np.maximum(w * xlo, w * xhi).sum(axis=1) + npu.bias
    acc = I32 if npu.ifm_dtype == I8 else I48
    if acc == I32 and not _fits(int(lo.min()), int(hi.max())):
        lo, hi = np.full_like(lo, I32.min), np.full_like(hi, I32.max)      # wraps (no REQUIRE checked)
    elif acc == I48:
        lo, hi = np.clip(lo, I48.min, I48.max), np.clip(hi, I48.min, I48.max)      # saturated once
    return stage(npu.stage, lo, hi)


def matmul(npu) -> list[Requirement]:
    a = (I8.min - npu.a_zp, I8.max - npu.a_zp)
    b = (I8.min - npu.b_zp, I8.max - npu.b_zp)
    corners = [p * q for p in a for q in b]
    k = npu.a_shape[2]
    lo, hi = k * min(corners), k * max(corners)
    if not _fits(lo, hi):
        lo, hi = I32.min, I32.max
    return stage(npu.stage, lo, hi)
