"""The elementwise unit: what one ELTWISE command computes, bit for bit.

Operands (docs/isa.md, "The ELTWISE command"): ELT_COUNT elements, element i of A at byte
ELT_A_ADDR + i*size(ELT_A_DTYPE) of the input SRAM, element i of B at ELT_B_ADDR + i*size of the
weight SRAM (element 0 for every i with A_SCALAR / B_SCALAR), result i at ELT_OUT_ADDR +
i*size(OFM_DTYPE) of the output SRAM. Per element, in the pipeline's order:

    x0 = X[i] - ELT_X_ZP                  X's elements signed, or zero-extended with X_UNSIGNED
    x1 = wrap32(x0 << ELT_X_LSHIFT)       when X_RESCALE or ELT_X_LSHIFT > 0, else x0 (48 bits)
    x  = apply_scale_32(x1, ELT_X_MULT, ELT_X_SHIFT, X_DOUBLE_ROUND)   with X_RESCALE, else x1
    value = op(a, b)                      with TOSA's integer semantics, below
    out   = output_stage(value)           firmware_model/golden/output_stage.py, record PARAM_ADDR + i % ELT_CHANNELS

The operations on a = wrap32(a), b = wrap32(b) (COPY passes the 48-bit a through):
    ADD / SUB          wrap32(a + b) / wrap32(a - b)               (TOSA: REQUIRE no overflow)
    MUL                p = a * b exact; ELT_SHIFT > 0: p = (p + (1 << (ELT_SHIFT - 1))) >> ELT_SHIFT;
                       wrap32(p)
    MINIMUM / MAXIMUM  min / max
    shifts, in the width w of ELT_A_DTYPE (8, 16 or 32 bits), amount n = b & 31:
      LOGICAL_LEFT_SHIFT      wrap_w(a << n)
      LOGICAL_RIGHT_SHIFT     wrap_w((a & (2^w - 1)) >> n)
      ARITHMETIC_RIGHT_SHIFT  (a >> n) + (ROUND and n > 0 and bit n-1 of a)
    COPY               a (B is not read): RESCALE, CLAMP and TABLE as the output stage

The arithmetic calls the numeric primitives in firmware_model/tosa_ops/numerics.py with
require=False: the datapath does the same thing whether or not TOSA's REQUIREs hold. A `probe`
(the golden model's REQUIRE monitor, firmware_model/golden/require_monitor.py) is shown the values
at points A0/B0 (x0), A1/B1 (x1), "op" (a, b before the operation) and, in the output stage,
"stage" and "lut"; it changes nothing.

`eltwise_plan` is the command without its data (ELT_RULES, the operation and types, every byte
range, the cycles), which execute_eltwise calls first and the timing-only model calls alone.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import (ELEMENT_BYTES, OUTPUT_STAGE_REGS, EltMode, EltOp, LutMode, OutMode, Sram, Status,
                                     decode_param_records)
from firmware_model.arch.checks import ELT_RULES, first_violation
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import NpuConfig
from firmware_model.golden.output_stage import (apply_output_stage, dtype_of, elements_range, load_elements,
                                                scale32_operands,
                                                load_records, prepare_output_stage, records_range, run_range,
                                                stage_plan, store_run)
from firmware_model.arch.cycle_model import (element_write_clocks, eltwise_command_cycles, eltwise_uses_vector,
                                             eltwise_vector_cycles, eltwise_vector_lanes)
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType, wrap

OPERAND_DTYPES = (DType.INT8, DType.INT16, DType.INT32, DType.INT48)
SHIFT_OPS = (EltOp.LOGICAL_LEFT_SHIFT, EltOp.LOGICAL_RIGHT_SHIFT, EltOp.ARITHMETIC_RIGHT_SHIFT)


@dataclass
class EltResult:
    cycles: int
    elements: int
    regions: dict[str, tuple[int, int]]    # memory ("input", "weight", "param", "lut", "output") -> bytes read/written
    out_values: np.ndarray                 # the values stored (int64, ELT_COUNT)
    plan: "EltPlan | None" = None          # the accounting these came from (eltwise_plan)


def _fail(status: Status, message: str):
    raise GoldenModelError(f"ELTWISE: {message}", status)


def input_stage(x: np.ndarray, *, zp: int, lshift: int, rescale: bool, multiplier: int, shift: int,
                double_round: bool, probe=None, name: str = "A") -> np.ndarray:
    """One operand's input stage on its elements (int64, already read signed or unsigned)."""
    x0 = np.asarray(x, dtype=np.int64) - np.int64(zp)
    if probe is not None:
        probe(name + "0", x0)
    if not rescale and lshift == 0:
        return wrap(x0, 48)
    x1 = wrap(np.left_shift(wrap(x0, 32), np.int64(lshift & 31)), 32)
    if probe is not None:
        probe(name + "1", x1)
    if not rescale:
        return x1
    return numerics.apply_scale_32(x1, multiplier & 0x7FFFFFFF, shift & 63, double_round,
                                   require=False).astype(np.int64)


def eltwise_op(op: EltOp, a: np.ndarray, b: np.ndarray | None, *, width: int, mul_shift: int,
               round_: bool) -> np.ndarray:
    """The operation on the rescaled operands (int64 arrays), as the TOSA op of that name."""
    if op == EltOp.COPY:
        return a
    a, b = wrap(a, 32), wrap(b, 32)
    i32 = DType.INT32
    if op == EltOp.ADD:
        return numerics.apply_add_s(a, b, i32, require=False)
    if op == EltOp.SUB:
        return numerics.apply_sub_s(a, b, i32, require=False)
    if op == EltOp.MUL:
        if mul_shift > 0:
            product = a * b
            return wrap((product + (np.int64(1) << np.int64(mul_shift - 1))) >> np.int64(mul_shift), 32)
        return numerics.apply_mul_s(a, b, i32)
    if op == EltOp.MINIMUM:
        return numerics.apply_min_s(a, b)
    if op == EltOp.MAXIMUM:
        return numerics.apply_max_s(a, b)
    wdt = {8: DType.INT8, 16: DType.INT16, 32: DType.INT32}[width]
    a = wrap(a, width)
    n = b & 31
    if op == EltOp.LOGICAL_LEFT_SHIFT:
        return numerics.apply_logical_lshift(a, n, wdt)
    if op == EltOp.LOGICAL_RIGHT_SHIFT:
        return numerics.apply_logical_rshift(a, n, wdt)
    result = numerics.apply_arith_rshift(a, n, wdt)
    if round_:
        last_out = numerics.apply_arith_rshift(a, np.maximum(n - 1, 0), wdt) & 1
        result = result + ((n > 0) & (last_out != 0))
    return wrap(result, width)


@dataclass(slots=True)
class EltPlan:
    """What an ELTWISE command costs, touches and refuses, from its registers alone (eltwise_plan)."""
    op: EltOp
    mode: EltMode
    count: int
    a_dtype: DType
    b_dtype: DType | None                  # None for COPY (no B)
    ofm_dtype: DType
    records: int                           # parameter records read (with RESCALE)
    regions: dict[str, tuple[int, int]]    # memory -> bytes read / written, in the order the unit meets them
    stage: object                          # output_stage.StagePlan
    cycles: int
    a_sram: Sram = Sram.INPUT              # where A is read (the output SRAM with A_FROM_OUTPUT)
    b_sram: Sram = Sram.WEIGHT             # where B is read (the output SRAM with B_FROM_OUTPUT)

    @property
    def a_key(self) -> str:
        """A's key in `regions`: "input", or "a_output" when it is read from the output SRAM (the
        result's range is "output")."""
        return "input" if self.a_sram == Sram.INPUT else "a_output"

    @property
    def b_key(self) -> str:
        """B's key in `regions`: "weight", or "b_output" when it is read from the output SRAM."""
        return "weight" if self.b_sram == Sram.WEIGHT else "b_output"

    @property
    def reads(self) -> list[tuple[str, tuple[int, int]]]:
        """(memory, [start, stop)) of each range read; A and B may both be in the output SRAM."""
        return [(k.removeprefix("a_").removeprefix("b_"), v) for k, v in self.regions.items() if k != "output"]


def eltwise_plan(cfg: NpuConfig, regs, sub: int) -> EltPlan:
    """The ELTWISE command's checks (arch/checks.py ELT_RULES, the operation and types, then the
    byte ranges of A, B, the records, the table and the result), cycles and regions, from the
    registers (a dict or a `Registers` view); a refused command raises its GoldenModelError."""
    r = regs if isinstance(regs, Registers) else Registers(regs)
    broken = first_violation(ELT_RULES, r, sub, cfg)
    if broken is not None:
        raise GoldenModelError(broken.message("ELTWISE", r, sub), broken.status)
    try:
        op = EltOp(sub)
    except ValueError:
        _fail(Status.BAD_MODE, f"operation {sub} does not exist")
    mode = EltMode(r.elt_mode & 0x7FF)
    count = r.elt_count
    a_dt = dtype_of(r.elt_a_dtype, "ELT_A_DTYPE", "ELTWISE", OPERAND_DTYPES)
    ofm_dt = dtype_of(r.ofm_dtype, "OFM_DTYPE", "ELTWISE", tuple(ELEMENT_BYTES))
    binary = op != EltOp.COPY
    b_dt = dtype_of(r.elt_b_dtype, "ELT_B_DTYPE", "ELTWISE", OPERAND_DTYPES) if binary else None
    for flag, dt, name in ((EltMode.A_UNSIGNED, a_dt, "A"), (EltMode.B_UNSIGNED, b_dt, "B")):
        if flag in mode and dt not in (DType.INT8, DType.INT16):
            _fail(Status.BAD_MODE, f"{name}_UNSIGNED with {name}'s type {dt.name if dt else '-'}: only int8 and "
                                   f"int16 elements are read unsigned")
    if op in SHIFT_OPS and a_dt not in (DType.INT8, DType.INT16, DType.INT32):
        _fail(Status.BAD_MODE, f"{op.name} on {a_dt.name} elements (shifts take int8, int16 or int32)")

    regions: dict[str, tuple[int, int]] = {}
    a_sram = Sram.OUTPUT if EltMode.A_FROM_OUTPUT in mode else Sram.INPUT
    regions["input" if a_sram == Sram.INPUT else "a_output"] = elements_range(
        cfg, a_sram, r.elt_a_addr, 1 if EltMode.A_SCALAR in mode else count, a_dt, "ELTWISE operand A")
    b_sram = Sram.OUTPUT if binary and EltMode.B_FROM_OUTPUT in mode else Sram.WEIGHT
    if binary:
        regions["weight" if b_sram == Sram.WEIGHT else "b_output"] = elements_range(
            cfg, b_sram, r.elt_b_addr, 1 if EltMode.B_SCALAR in mode else count, b_dt, "ELTWISE operand B")
    records = 0
    if OutMode.RESCALE in OutMode(r.out_mode & 0xF):
        records = min(max(1, r.elt_channels), count)
        regions["param"] = records_range(cfg, r.param_addr, records, "ELTWISE parameters")
    stage = stage_plan(cfg, r, "ELTWISE")
    if stage.lut_range is not None:
        regions["lut"] = stage.lut_range
    regions["output"] = run_range(cfg, r.elt_out_addr, count, ofm_dt, "ELTWISE output")
    sizes = [ELEMENT_BYTES[a_dt], ELEMENT_BYTES[ofm_dt]] + ([ELEMENT_BYTES[b_dt]] if binary else [])
    lanes = eltwise_vector_lanes(cfg, a_size=ELEMENT_BYTES[a_dt], b_size=ELEMENT_BYTES[b_dt] if binary else 0,
                                 a_addr=r.elt_a_addr, b_addr=r.elt_b_addr, a_scalar=EltMode.A_SCALAR in mode,
                                 b_scalar=EltMode.B_SCALAR in mode)
    if count and eltwise_uses_vector(lanes=lanes, lut_mode=r.lut_mode, channels=r.elt_channels, sizes=sizes):
        cycles = eltwise_vector_cycles(cfg, lanes=lanes, count=count, out_addr=r.elt_out_addr,
                                       out_size=ELEMENT_BYTES[ofm_dt])
    else:
        cycles = eltwise_command_cycles(count, max(element_write_clocks(cfg, s) for s in sizes))
    return EltPlan(op, mode, count, a_dt, b_dt, ofm_dt, records, regions, stage, cycles, a_sram, b_sram)


def execute_eltwise(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sub: int, probe=None,
                    plan=None) -> EltResult:
    """One ELTWISE command (its checks and accounting: eltwise_plan)."""
    if plan is None:            # else the plan of these registers, made before (eltwise_plan)
        plan = eltwise_plan(cfg, regs, sub)
    r = Registers(regs)
    op, mode, count, regions = plan.op, plan.mode, plan.count, plan.regions
    a_raw = load_elements(mem, plan.a_sram, regions[plan.a_key], plan.a_dtype, EltMode.A_UNSIGNED in mode)
    a = input_stage(a_raw, zp=r.elt_a_zp, lshift=r.elt_a_lshift, rescale=EltMode.A_RESCALE in mode,
                    multiplier=r.elt_a_mult, shift=r.elt_a_shift,
                    double_round=EltMode.A_DOUBLE_ROUND in mode, probe=probe, name="A")
    if a.shape != (count,):
        a = np.broadcast_to(a, (count,))        # A_SCALAR: element 0 for every i
    b = None
    binary = plan.b_dtype is not None
    if binary:
        b_raw = load_elements(mem, plan.b_sram, regions[plan.b_key], plan.b_dtype, EltMode.B_UNSIGNED in mode)
        b = input_stage(b_raw, zp=r.elt_b_zp, lshift=r.elt_b_lshift, rescale=EltMode.B_RESCALE in mode,
                        multiplier=r.elt_b_mult, shift=r.elt_b_shift,
                        double_round=EltMode.B_DOUBLE_ROUND in mode, probe=probe, name="B")
        if b.shape != (count,):
            b = np.broadcast_to(b, (count,))
    width = plan.a_dtype.bits if op in SHIFT_OPS else 32
    if probe is not None and binary:
        probe("op", a, b)
    value = eltwise_op(op, a, b, width=width, mul_shift=r.elt_shift & 63, round_=EltMode.ROUND in mode)

    multiplier = shift = None
    if "param" in regions:
        m, s = load_records(mem, regions["param"])
        idx = np.arange(count) % max(1, r.elt_channels)
        multiplier, shift = m[idx], s[idx]
    out, _ = apply_output_stage(mem, regs, value, multiplier, shift, unit="ELTWISE", probe=probe, plan=plan.stage)
    store_run(mem, regions["output"], out, plan.ofm_dtype)
    return EltResult(plan.cycles, count, dict(regions), out, plan)


def prepare_eltwise_values(cfg: NpuConfig, regs: dict[int, int], sub: int, plan: EltPlan):
    """execute_eltwise's arithmetic with its registers decoded once, on operand bytes: a function
    values(a_raw, b_raw, records, mem, probe) -> the values to store (int64, ELT_COUNT along the
    last axis). a_raw / b_raw: the bytes of A's and B's ranges (uint8, (..., bytes); b_raw None
    for COPY); records: the (multiplier, shift) of the parameter range ((..., records) each) or
    None without RESCALE; mem: where the table is read (the LUT SRAM). Leading axes stack
    commands with these registers (batched.py); without them it is one command."""
    r = Registers(regs)
    op, mode, count, regions = plan.op, plan.mode, plan.count, plan.regions
    binary = plan.b_dtype is not None

    def operand(dt: DType, unsigned: bool, zp, lshift, rescale, mult, shift, double_round, name):
        """One operand's loading and input stage (load_elements, input_stage) and the range
        [lo, hi] of the values it returns. The range decides which wraps are idle (a wrap of
        values inside its range changes nothing) and is left out: each wrap below is taken only
        where the range before it may leave its width."""
        view = "<i8" if dt == DType.INT48 else f"<{'u' if unsigned else 'i'}{ELEMENT_BYTES[dt]}"
        plain = not rescale and lshift == 0
        needs_wrap48 = dt == DType.INT48
        lsh = lshift & 31
        m, s = mult & 0x7FFFFFFF, shift & 63
        rnd = (1 << (s - 1)) if s >= 1 else 0                   # apply_scale_32(require=False)'s round
        extra = 1 << 30 if double_round and s > 31 else 0       # its double-round term, +/- by sign
        if needs_wrap48:
            lo, hi = DType.INT48.min, DType.INT48.max
        elif unsigned:
            lo, hi = 0, (1 << (8 * ELEMENT_BYTES[dt])) - 1
        else:
            lo, hi = dt.min, dt.max
        lo, hi = lo - zp, hi - zp                               # x0
        wrap48_x0 = needs_wrap48 and not _inside(lo, hi, 48)
        if plain:
            out = (lo, hi) if not wrap48_x0 else (DType.INT48.min, DType.INT48.max)
        else:
            wrap32_x0 = not _inside(lo, hi, 32)
            if wrap32_x0:
                lo, hi = _I32
            lo, hi = lo << lsh, hi << lsh                       # < 2^31 * 2^31: inside int64
            wrap32_x1 = not _inside(lo, hi, 32)
            if wrap32_x1:
                lo, hi = _I32
            x1 = (lo, hi)
            if rescale:                                         # m >= 0: monotone in the value
                lo, hi = (lo * m + rnd - extra) >> s, (hi * m + rnd + extra) >> s
                wrap32_x2 = not _inside(lo, hi, 32)
                out = _I32 if wrap32_x2 else (lo, hi)
            else:
                out = x1
        zp64, lsh64, s64, m64, rnd64 = np.int64(zp), np.int64(lsh), np.int64(s), np.int64(m), np.int64(rnd)
        extra64, w32 = np.int64(extra), np.int64(32)

        def stage(raw, probe):
            x = raw.view(view).astype(np.int64)
            if needs_wrap48:
                x = wrap(x, 48)                                 # load_elements' int48 reading
            x -= zp64                                           # x0
            if probe is not None:
                probe(name + "0", x)
            if plain:
                return wrap(x, 48) if wrap48_x0 else x
            x1 = wrap(x, 32) if wrap32_x0 else x.copy() if probe is not None else x
            x1 <<= lsh64
            if wrap32_x1:
                x1 <<= w32
                x1 >>= w32
            if probe is not None:
                probe(name + "1", x1)
            if not rescale:
                return x1
            # apply_scale_32(x1, m, s, double_round, require=False): (x1 * m + round) >> s, wrap32;
            # |x1 * m| < 2^62 and round <= 2^62 + 2^30 stay inside int64
            t = x1 * m64
            t += rnd64
            if extra:
                t += np.where(x1 >= 0, extra64, -extra64)
            t >>= s64
            if wrap32_x2:
                t <<= w32
                t >>= w32
            return t
        return stage, out

    stage_a, a_range = operand(plan.a_dtype, EltMode.A_UNSIGNED in mode, r.elt_a_zp, r.elt_a_lshift,
                               EltMode.A_RESCALE in mode, r.elt_a_mult, r.elt_a_shift,
                               EltMode.A_DOUBLE_ROUND in mode, "A")
    stage_b, b_range = (operand(plan.b_dtype, EltMode.B_UNSIGNED in mode, r.elt_b_zp, r.elt_b_lshift,
                                EltMode.B_RESCALE in mode, r.elt_b_mult, r.elt_b_shift,
                                EltMode.B_DOUBLE_ROUND in mode, "B")
                        if binary else (None, None))
    width = plan.a_dtype.bits if op in SHIFT_OPS else 32
    mul_shift, round_ = r.elt_shift & 63, EltMode.ROUND in mode
    index = np.arange(count) % max(1, r.elt_channels) if "param" in regions else None
    out_stage = prepare_output_stage({int(k): regs.get(int(k), 0) for k in OUTPUT_STAGE_REGS}, plan.stage, "ELTWISE")
    # ADD and SUB on operands whose ranges lie inside int32: eltwise_op's wraps of a and b are
    # idle, and so is apply_add_s' / apply_sub_s' of the result when its range does too
    fast_add = op in (EltOp.ADD, EltOp.SUB) and _inside(*a_range, 32) and _inside(*b_range, 32)
    if fast_add:
        lo = a_range[0] + b_range[0] if op == EltOp.ADD else a_range[0] - b_range[1]
        hi = a_range[1] + b_range[1] if op == EltOp.ADD else a_range[1] - b_range[0]
        wrap_sum = not _inside(lo, hi, 32)
    # a binary operation's result is a fresh int32 array the output stage may overwrite
    fresh32 = binary
    memo = [None]

    def stage_operands(records):
        """(multiplier, shift, scale32 operands or None) per element, for records' arrays (kept
        for the last records seen: decode_param_records hands the same arrays for the same bytes)."""
        made = memo[0]
        if made is not None and made[0] is records[0] and made[1] is records[1]:
            return made[2]
        multiplier, shift = records[0][..., index], records[1][..., index]
        ops = None
        if plan.stage.rescale and plan.stage.scale32:
            ops = scale32_operands(multiplier, shift, plan.stage.double_round)
        made = (multiplier, shift, ops)
        memo[0] = (records[0], records[1], made)
        return made

    def values(a_raw, b_raw, records, mem, probe=None) -> np.ndarray:
        shape = a_raw.shape[:-1] + (count,)
        a = stage_a(a_raw, probe)
        if a.shape != shape:
            a = np.broadcast_to(a, shape)           # A_SCALAR: element 0 for every i
        b = None
        if binary:
            b = stage_b(b_raw, probe)
            if b.shape != shape:
                b = np.broadcast_to(b, shape)
            if probe is not None:
                probe("op", a, b)
        if fast_add:
            value = a + b if op == EltOp.ADD else a - b
            if wrap_sum:
                value = wrap(value, 32)
        else:
            value = eltwise_op(op, a, b, width=width, mul_shift=mul_shift, round_=round_)
        multiplier = shift = ops = None
        if records is not None:
            multiplier, shift, ops = stage_operands(records)
        return out_stage(mem, value, multiplier, shift, probe, ops, wrapped=fresh32)
    return values


_I32 = (DType.INT32.min, DType.INT32.max)


def _inside(lo: int, hi: int, bits: int) -> bool:
    """Whether [lo, hi] lies inside the signed range of `bits` bits (a wrap to it is idle)."""
    return -(1 << (bits - 1)) <= lo and hi < (1 << (bits - 1))


def prepare_eltwise(cfg: NpuConfig, regs: dict[int, int], sub: int, plan: EltPlan):
    """execute_eltwise with its registers decoded once (the golden model's decoded program,
    decoded.py): a function of (memories, probe) that computes and stores what execute_eltwise
    does, the same pipeline with the register values, flags and types bound beforehand
    (prepare_eltwise_values). Equal to execute_eltwise (tests/firmware_model/golden/test_decoded.py)."""
    if plan.count <= SMALL_COUNT:
        return prepare_eltwise_small(cfg, regs, sub, plan)
    return prepare_eltwise_vector(cfg, regs, sub, plan)


def prepare_eltwise_vector(cfg: NpuConfig, regs: dict[int, int], sub: int, plan: EltPlan):
    """prepare_eltwise's form for any ELT_COUNT: prepare_eltwise_values on the command's ranges."""
    regions = plan.regions
    values = prepare_eltwise_values(cfg, regs, sub, plan)
    a_sram, b_sram = plan.a_sram, plan.b_sram
    a0, a1 = regions[plan.a_key]
    b0, b1 = regions.get(plan.b_key, (0, 0))
    binary = plan.b_dtype is not None
    param = regions.get("param")
    out_rng, ofm_dtype = regions["output"], plan.ofm_dtype

    def run(mem: Memories, probe=None) -> None:
        b_raw = mem.sram[b_sram][b0:b1] if binary else None
        records = load_records(mem, param) if param is not None else None
        out = values(mem.sram[a_sram][a0:a1], b_raw, records, mem, probe)
        store_run(mem, out_rng, out, ofm_dtype)
    return run


# ---- A short vector's command in Python integers (issue 16) -----------------------------------
# A command on a few elements (a softmax's scalar chain: ELT_COUNT 1) spends 11-37 us in the two
# dozen numpy calls of prepare_eltwise_values, each ~1 us whatever the size. Up to SMALL_COUNT
# elements prepare_eltwise runs the same pipeline on Python integers instead, one list
# comprehension a step with the idle wraps left out (mlp's one-element commands: 3-6 us against
# 12-20; its ten-element ones 6-15 us against 8-38): each step is the
# primitive's int64 expression, element by element. Python integers do not wrap at 64 bits where
# numpy's int64 does, so every expression below is one that stays inside int64 for every operand
# the registers and element types allow (the bound is stated beside each), or wraps explicitly
# (_w64) where it may not. The REQUIRE probe is shown numpy arrays of the same values as
# prepare_eltwise_values shows it, at every point for any probe, and for the monitor's Probe only
# at the points where it has checks and only when a check may fail (_may_fail: an exact Python
# test of the add, sub, mul, shift and scale32 rescale rules; any other rule always runs).
# tests/firmware_model/golden/test_eltwise_small.py compares this path with execute_eltwise.

SMALL_COUNT = 16

_I64 = 1 << 63


def _w(x: int, bits: int) -> int:
    """wrap(x, bits) of an integer (two's complement)."""
    half = 1 << (bits - 1)
    return ((x + half) & ((half << 1) - 1)) - half


def _w64(x: int) -> int:
    """int64's wrap of an integer (numpy's overflow)."""
    return ((x + _I64) & ((_I64 << 1) - 1)) - _I64


def _fits_int32(values) -> bool:
    for v in values:
        if v < -(1 << 31) or v >= 1 << 31:
            return False
    return True


def _exact_test(c: dict) -> str | None:
    """The monitor's check `c` (require_monitor.CHECKS) as an exact Python condition on one
    element, the check's own expression evaluated on integers: over `p`, `q` and `s`, the
    elements of the lists the probe would be shown (its first, second and third: an operation's
    A and B, a stage's values and its records' shifts); None for a check that has no such test
    (the probe always runs). _passes and the fused small form (_fused_small) both test this."""
    kind = c["kind"]
    if kind == "add":                       # apply_add_s: the int64 sum fits int32
        return f"-{_H32} <= p + q < {_H32}"
    if kind == "sub":
        return f"-{_H32} <= p - q < {_H32}"
    if kind == "mul":                       # check_mul, where its int64 expression cannot overflow
        shift = int(c["shift"])
        if not 1 <= shift <= 62:
            return None
        return (f"-{_H32} <= p < {_H32} and -{_H32} <= q < {_H32} "
                f"and -{_H32} <= (p * q + {1 << (shift - 1)}) >> {shift} < {_H32}")
    if kind == "shift":                     # check_shift on B as read
        return f"0 <= q <= {c['bits'] - 1}"
    if kind == "rescale" and c["scale32"]:  # check_rescale's scale32 range, for 1 <= shift <= 63
        zp = c["input_zp"] or 0
        if "multiplier" in c:
            shift = int(c["shift"])
            if not 1 <= shift <= 63:
                return None
            return f"-{1 << (shift - 1)} <= p - {zp} < {1 << (shift - 1)}"
        return f"(s & 63) >= 1 and -(1 << ((s & 63) - 1)) <= p - {zp} < 1 << ((s & 63) - 1)"
    return None


_ELEMENT = re.compile(r"\b[pqs]\b")     # the element names of an _exact_test condition
_LIST_TESTS: dict = {}      # an _exact_test condition -> its test on the probe's lists


def _passes(c: dict):
    """The monitor's check `c` as a test on Python integers (the lists the probe would be shown as
    arrays): a function lists -> True where _exact_test's condition holds for every element (then
    the probe need not run); None for a check that has none."""
    cond = _exact_test(c)
    if cond is None:
        return None
    test = _LIST_TESTS.get(cond)
    if test is None:
        found = set(_ELEMENT.findall(cond))
        used = [(n, i) for i, n in enumerate("pqs") if n in found]
        names = ", ".join(n for n, _ in used)
        lists = f"zip({', '.join(f'lists[{i}]' for _, i in used)})" if len(used) > 1 else f"lists[{used[0][1]}]"
        src = f"lambda lists: all({cond} for {names} in {lists})"
        test = _LIST_TESTS[cond] = eval(src)      # our own expression, made above
    return test


def _may_fail(c: dict, arrays: tuple) -> bool:
    """Whether the monitor's check `c` may fail on these values (not _passes)."""
    test = _passes(c)
    return test is None or not test(arrays)


def _show_checked(probe) -> tuple:
    """How the small path shows the monitor's Probe a point's lists: as arrays, only where the
    Probe has checks and one of them may fail (_may_fail). The show function for A's points, B's,
    "op" and the output stage's ("stage", "lut"), each None where the Probe has no check there."""
    checks, fast = probe.checks, _fast_checks(probe)

    def show(point, *lists):
        if point in checks:
            tests = fast[point]
            if tests is not None:
                for t in tests:
                    if not t(lists):
                        break
                else:
                    return
            probe(point, *[np.array(x, dtype=np.int64) for x in lists])

    def at(*points):
        return show if any(p in checks for p in points) else None
    return at("A0", "A1"), at("B0", "B1"), at("op"), at("stage", "lut")


def _fast_checks(probe) -> dict:
    """A Probe's checks by point as _passes tests; None at a point where one has none."""
    out = {}
    for point, cs in probe.checks.items():
        tests = [_passes(c) for c in cs]
        out[point] = None if any(t is None for t in tests) else tuple(tests)
    return out


_H32, _M32 = 1 << 31, (1 << 32) - 1
_H48, _M48 = 1 << 47, (1 << 48) - 1
_M64 = (1 << 64) - 1
_STORE = {1: "B", 2: "H", 4: "I", 8: "Q"}
_STORE_SIGNED = {4: "i", 8: "q"}
_INT16 = struct.Struct("<h")
_LOAD = {"<i1": "b", "<u1": "B", "<i2": "h", "<u2": "H", "<i4": "i", "<u4": "I", "<i8": "q"}


def _operand_ranges(dt: DType, unsigned: bool, zp: int, plain: bool, lsh: int, rescale: bool, m: int, s: int,
                    rnd: int, extra: int) -> tuple:
    """An operand stage's idle wraps and result range (prepare_eltwise_values' operand, stated
    once more for the small form): (wrap48 of x0, wrap32 of x0, wrap32 after the shift, wrap32
    after the rescale, (lo, hi) of the result). `plain`: no rescale and ELT_x_LSHIFT 0 (the
    register, not its low 5 bits)."""
    if dt == DType.INT48:
        lo, hi = DType.INT48.min, DType.INT48.max
    elif unsigned:
        lo, hi = 0, (1 << (8 * ELEMENT_BYTES[dt])) - 1
    else:
        lo, hi = dt.min, dt.max
    lo, hi = lo - zp, hi - zp
    w48 = dt == DType.INT48 and not _inside(lo, hi, 48)
    if plain:
        return w48, False, False, False, ((DType.INT48.min, DType.INT48.max) if w48 else (lo, hi))
    w0 = not _inside(lo, hi, 32)
    if w0:
        lo, hi = _I32
    lo, hi = lo << lsh, hi << lsh
    w1 = not _inside(lo, hi, 32)
    if w1:
        lo, hi = _I32
    if not rescale:
        return w48, w0, w1, False, (lo, hi)
    lo, hi = (lo * m + rnd - extra) >> s, (hi * m + rnd + extra) >> s
    w2 = not _inside(lo, hi, 32)
    return w48, w0, w1, w2, (_I32 if w2 else (lo, hi))


def prepare_eltwise_small(cfg: NpuConfig, regs: dict[int, int], sub: int, plan: EltPlan, fused: bool = True):
    """execute_eltwise on Python integers (the section's comment above): a function of (memories,
    probe) that stores what execute_eltwise stores, for ELT_COUNT <= SMALL_COUNT. Each step is one
    list comprehension with its wraps written out ((x + 2^(n-1)) & (2^n - 1)) - 2^(n-1)), and a
    wrap the operand's range proves idle is left out (_operand_ranges, as the vector form does)."""
    from firmware_model.golden.require_monitor import Probe

    r = Registers(regs)
    op, mode, count, regions = plan.op, plan.mode, plan.count, plan.regions
    binary = plan.b_dtype is not None
    st = plan.stage
    a_sram, b_sram = plan.a_sram, plan.b_sram
    a0, a1 = regions[plan.a_key]
    b0, b1 = regions.get(plan.b_key, (0, 0))
    param = regions.get("param")
    o0, o1 = regions["output"]
    out_size = ELEMENT_BYTES[plan.ofm_dtype]
    out_mask = (1 << (8 * out_size)) - 1
    # the store (store_run): every value is an int32 by then (the clamp's bounds are int32, a
    # table's entries int16 or wrapped to int32), so a 4- or 8-byte element takes it as it is
    wide = out_size >= 4
    pack_into = struct.Struct(f"<{count}{_STORE_SIGNED[out_size] if wide else _STORE[out_size]}").pack_into
    channels = max(1, r.elt_channels)

    def operand(dt, unsigned, zp, lshift, rescale, mult, shift, double_round, name, scalar):
        view = "<i8" if dt == DType.INT48 else f"<{'u' if unsigned else 'i'}{ELEMENT_BYTES[dt]}"
        int48 = dt == DType.INT48
        plain = not rescale and lshift == 0
        lsh, m, s = lshift & 31, mult & 0x7FFFFFFF, shift & 63
        rnd = (1 << (s - 1)) if s >= 1 else 0
        extra = (1 << 30) if double_round and s > 31 else 0
        w48, w0, w1, w2, out_range = _operand_ranges(dt, unsigned, zp, plain, lsh, rescale, m, s, rnd, extra)
        n = 1 if scalar else count
        p0, p1 = name + "0", name + "1"
        # the operand's elements as Python integers straight from the SRAM's bytes (what
        # raw.view(view).tolist() gives, without the numpy calls)
        read = struct.Struct(f"<{n}{_LOAD[view]}").unpack_from

        def stage(sram, start, show):
            xs = read(sram, start)
            if int48:                                           # load_elements' int48 reading
                xs = [((x + _H48) & _M48) - _H48 for x in xs]
            if zp:
                xs = [x - zp for x in xs]                       # |x0| < 2^48 + 2^31
            if show is not None:
                show(p0, xs)
            if plain:
                return [((x + _H48) & _M48) - _H48 for x in xs] if w48 else xs
            if w0:
                xs = [((x + _H32) & _M32) - _H32 for x in xs]
            if w1:
                xs = [((x << lsh) + _H32 & _M32) - _H32 for x in xs]
            elif lsh:
                xs = [x << lsh for x in xs]                     # < 2^31 * 2^31
            if show is not None:
                show(p1, xs)
            if not rescale:
                return xs
            # apply_scale_32(require=False): |x * m| < 2^62, rnd <= 2^62 + 2^30
            if extra:
                xs = [(x * m + rnd + (extra if x >= 0 else -extra)) >> s for x in xs]
            else:
                xs = [(x * m + rnd) >> s for x in xs]
            if w2:
                xs = [((x + _H32) & _M32) - _H32 for x in xs]
            return xs
        return stage, n, out_range, dict(int48=int48, zp=zp, plain=plain, lsh=lsh, m=m, s=s, rnd=rnd, extra=extra,
                                         w48=w48, w0=w0, w1=w1, w2=w2, rescale=rescale, read=read, scalar=scalar)

    stage_a, n_a, a_range, a_k = operand(plan.a_dtype, EltMode.A_UNSIGNED in mode, r.elt_a_zp, r.elt_a_lshift,
                                    EltMode.A_RESCALE in mode, r.elt_a_mult, r.elt_a_shift,
                                    EltMode.A_DOUBLE_ROUND in mode, "A", EltMode.A_SCALAR in mode)
    if binary:
        stage_b, n_b, b_range, b_k = operand(plan.b_dtype, EltMode.B_UNSIGNED in mode, r.elt_b_zp, r.elt_b_lshift,
                                        EltMode.B_RESCALE in mode, r.elt_b_mult, r.elt_b_shift,
                                        EltMode.B_DOUBLE_ROUND in mode, "B", EltMode.B_SCALAR in mode)
    width = plan.a_dtype.bits if op in SHIFT_OPS else 32
    mul_shift, round_ = r.elt_shift & 63, EltMode.ROUND in mode
    mul_rnd = (1 << (mul_shift - 1)) if mul_shift > 0 else 0
    wmask, whalf = (1 << width) - 1, 1 << (width - 1)
    # eltwise_op's wraps of a and b to int32, idle where the operand's range lies inside int32
    wrap_a = binary and op != EltOp.COPY and not _inside(*a_range, 32)
    wrap_b = binary and not _inside(*b_range, 32)
    if op in (EltOp.ADD, EltOp.SUB):
        ra = a_range if not wrap_a else _I32
        rb = b_range if not wrap_b else _I32
        lo = ra[0] + rb[0] if op == EltOp.ADD else ra[0] - rb[1]
        hi = ra[1] + rb[1] if op == EltOp.ADD else ra[1] - rb[0]
        wrap_sum = not _inside(lo, hi, 32)

    def operation(A: list, B: list) -> list:
        """eltwise_op on the lists (A, B after their input stages)."""
        if wrap_a:
            A = [((x + _H32) & _M32) - _H32 for x in A]
        if wrap_b:
            B = [((x + _H32) & _M32) - _H32 for x in B]
        if op == EltOp.ADD:
            if wrap_sum:
                return [((x + y + _H32) & _M32) - _H32 for x, y in zip(A, B)]
            return [x + y for x, y in zip(A, B)]
        if op == EltOp.SUB:
            if wrap_sum:
                return [((x - y + _H32) & _M32) - _H32 for x, y in zip(A, B)]
            return [x - y for x, y in zip(A, B)]
        if op == EltOp.MUL:
            if mul_shift > 0:       # a * b <= 2^62, + 2^62 may reach 2^63: int64 wraps
                return [(((((x * y + mul_rnd + _I64) & _M64) - _I64) >> mul_shift) + _H32 & _M32) - _H32
                        for x, y in zip(A, B)]
            return [((x * y + _H32) & _M32) - _H32 for x, y in zip(A, B)]
        if op == EltOp.MINIMUM:
            return [x if x < y else y for x, y in zip(A, B)]
        if op == EltOp.MAXIMUM:
            return [x if x > y else y for x, y in zip(A, B)]
        # the shifts, in the width of A's type: a = wrap_w(a), n = b & 31, the result wrap_w(v)
        A = [((a + whalf) & wmask) - whalf for a in A]
        if op == EltOp.LOGICAL_LEFT_SHIFT:      # v = a << n < 2^31 * 2^31
            return [((a << (b & 31)) + whalf & wmask) - whalf for a, b in zip(A, B)]
        if op == EltOp.LOGICAL_RIGHT_SHIFT:     # v = (a & (2^w - 1)) >> n
            return [(((a & wmask) >> (b & 31)) + whalf & wmask) - whalf for a, b in zip(A, B)]
        out = []                                # ARITHMETIC_RIGHT_SHIFT
        for a, b in zip(A, B):
            n = b & 31
            v = ((a >> n) + whalf & wmask) - whalf
            if round_ and n > 0 and (a >> (n - 1)) & 1:     # bit n-1 of a (a wrap keeps the low bits)
                v += 1
            out.append(((v + whalf) & wmask) - whalf)
        return out

    # the output stage (apply_output_stage): the rescale's saturation and the clamp as one clip
    # where their ranges overlap (prepare_output_stage's reasoning)
    ofm_zp, clamp_min, clamp_max = r.ofm_zp, r.clamp_min, r.clamp_max
    clips = [(clamp_min, clamp_max)]
    if st.rescale:
        rdt = st.rescale_dtype
        lo, hi = (0, rdt.umax) if st.unsigned_out else (rdt.min, rdt.max)
        clips = ([(max(lo, clamp_min), min(hi, clamp_max))] if clamp_min <= hi
                 else [(lo, hi), (clamp_min, clamp_max)])
    lut_range, lut_mode = st.lut_range, st.lut_mode
    lut0 = lut_range[0] if lut_range is not None else 0
    entry = _INT16.unpack_from
    index = [i % channels for i in range(count)]
    memo: dict = {}

    def operands(records: bytes) -> tuple:
        """Per element: the records' multiplier and shift (as the probe sees them) and the
        rescale's (multiplier, shift, round) as it uses them, from the records' bytes
        (load_records' decode); kept per bytes seen (commands with these registers share this
        function)."""
        made = memo.get(records)
        if made is not None:
            return made
        _, multiplier, shift = decode_param_records(np.frombuffer(records, dtype=np.uint8))
        ms, ss = multiplier.tolist(), shift.tolist()
        mults, shifts = [ms[i] for i in index], [ss[i] for i in index]
        use = []
        for mu, sh in zip(mults, shifts):
            sh &= 63
            use.append((mu & (0x7FFFFFFF if st.scale32 else 0x7FFF), sh, (1 << (sh - 1)) if sh >= 1 else 0))
        made = (mults, shifts, use)
        if len(memo) >= 64:
            memo.clear()
        memo[records] = made
        return made

    scale32, double_round, zp_h = st.scale32, st.double_round, ofm_zp + _H32

    def out_stage(values, records, mem, show):
        if st.rescale:
            mults, shifts, use = operands(records)
            if show is not None:
                show("stage", values, mults, shifts)
            # x = apply_scale(v), then wrap32(wrap32(x) + OFM_ZP) = wrap32(x + OFM_ZP) (both wraps
            # reduce modulo 2^32)
            if scale32:                         # apply_scale_32 of wrap32(v): |v * m| < 2^62, t <= 2^62 + 2^30
                values = [((v + _H32) & _M32) - _H32 for v in values]
                if double_round:                # t +/- 2^30 towards v's sign where the shift > 31
                    values = [(((v * mu + t + (0 if sh <= 31 else (1 << 30) if v >= 0 else -(1 << 30))) >> sh)
                               + zp_h & _M32) - _H32 for v, (mu, sh, t) in zip(values, use)]
                else:
                    values = [(((v * mu + t) >> sh) + zp_h & _M32) - _H32 for v, (mu, sh, t) in zip(values, use)]
            else:                               # apply_scale_16 of wrap48(v): |v * m| < 2^47 * 2^15
                values = [((((((v + _H48) & _M48) - _H48) * mu + t) >> sh) + zp_h & _M32) - _H32
                          for v, (mu, sh, t) in zip(values, use)]
        for lo_, hi_ in clips:                  # apply_clip_s: min(max(v, lo), hi), hi where lo > hi
            values = [lo_ if v < lo_ else hi_ if v > hi_ else v for v in values] if lo_ <= hi_ else [hi_] * len(values)
        if lut_range is not None:
            lut = mem.sram[Sram.LUT]            # entry i: the int16 at byte lut0 + 2 * i
            if lut_mode == LutMode.INT8:
                values = [entry(lut, lut0 + 2 * ((v + 128) & 0xFF))[0] for v in values]
            else:
                if show is not None:
                    show("lut", values)
                out = []
                for v in values:                # apply_lookup_s(require=False)
                    c = -32768 if v < -32768 else 32767 if v > 32767 else v
                    i = (c + 32768) >> 7
                    base = entry(lut, lut0 + 2 * i)[0]
                    out.append((((base << 7) + (entry(lut, lut0 + 2 * (i + 1 if i < 512 else 512))[0] - base)
                                 * (c & 0x7F)) + _H32 & _M32) - _H32)
                values = out
        return values

    # the Probes seen (commands with these registers share this function, each with its own
    # Probe): id -> (the Probe, its show functions)
    fast_memo: dict = {}

    def run(mem: Memories, probe=None) -> None:
        show_a = show_b = show_op = show_out = None
        if probe is not None:
            if type(probe) is Probe:
                kept = fast_memo.get(id(probe))
                if kept is None or kept[0] is not probe:
                    if len(fast_memo) >= 64:
                        fast_memo.clear()
                    kept = fast_memo[id(probe)] = (probe, _show_checked(probe))
                show_a, show_b, show_op, show_out = kept[1]
            else:
                def show(point, *lists):
                    probe(point, *[np.array(x, dtype=np.int64) for x in lists])
                show_a = show_b = show_op = show_out = show
        sram = mem.sram
        a = stage_a(sram[a_sram], a0, show_a)
        if n_a != count:
            a = a * count                       # A_SCALAR: element 0 for every i
        if binary:
            b = stage_b(sram[b_sram], b0, show_b)
            if n_b != count:
                b = b * count
            if show_op is not None:
                show_op("op", a, b)
            values = operation(a, b)
        else:
            values = a                          # COPY
        values = out_stage(values, sram[Sram.PARAM][param[0]:param[1]].tobytes() if param is not None else None,
                           mem, show_out)
        if wide:                                # values are int32 after the clamp (or a table): stored as they are
            pack_into(sram[Sram.OUTPUT], o0, *values)
        else:                                   # store_run's wrap to the element
            pack_into(sram[Sram.OUTPUT], o0, *[v & out_mask for v in values])
    if not fused:
        return run
    return _fused_small(locals(), run)


# ---- The small form as one generated function (issue 16) ---------------------------------------
# mlp's softmax chain is ~36 commands of 1-10 elements, and the small form above spends most of
# its 2-15 us on the calls and lists of its dozen steps, not on the arithmetic. _fused_small writes
# the same steps, with the same constants and the same idle wraps left out, as the statements of
# one function (element by element, each element's value through every step at once) and compiles
# it once per prepared command. The monitor's Probe is not shown lists there: each check that has
# an exact Python test (_passes) is the same test written inline on the element, and where one
# fails, or a check has no such test, or the probe is anything but a Probe, the function returns
# False before it stores anything and the small form above runs the command instead (it reads the
# same SRAM bytes and shows the probe what it would have). tests/firmware_model/golden/
# test_eltwise_small.py compares both forms with execute_eltwise, with and without probes.

def _fused_small(k: dict, generic):
    """The fused form of prepare_eltwise_small's command (its locals `k`): a function of (memories,
    probe) equal to `generic`, which it calls where it cannot decide alone (see above)."""
    from firmware_model.golden.require_monitor import Probe

    count, binary, op = k["count"], k["binary"], k["op"]
    st = k["st"]
    if count == 0 or (st.rescale and k["param"] is None):
        return generic          # (ELT_COUNT 0 still shows the probe a scalar operand)
    a_k, b_k = k["a_k"], k.get("b_k")
    g = {"_H32": _H32, "_M32": _M32, "_H48": _H48, "_M48": _M48, "_I64": _I64, "_M64": _M64,
         "read_a": a_k["read"], "read_b": b_k["read"] if binary else None, "operands": k["operands"],
         "entry": k["entry"], "pack_into": k["pack_into"], "S_A": k["a_sram"], "S_W": k["b_sram"],
         "S_P": Sram.PARAM, "S_L": Sram.LUT, "S_O": Sram.OUTPUT}

    def operand_lines(name: str, c: dict, checks: dict) -> list[str]:
        x = name.lower()
        out = []
        if c["int48"]:
            out.append(f"{x} = (({x} + _H48) & _M48) - _H48")
        if c["zp"]:
            out.append(f"{x} = {x} - {c['zp']}")
        out += checks.get(name + "0", [])
        if c["plain"]:
            if c["w48"]:
                out.append(f"{x} = (({x} + _H48) & _M48) - _H48")
            return out
        if c["w0"]:
            out.append(f"{x} = (({x} + _H32) & _M32) - _H32")
        if c["w1"]:
            out.append(f"{x} = (({x} << {c['lsh']}) + _H32 & _M32) - _H32")
        elif c["lsh"]:
            out.append(f"{x} = {x} << {c['lsh']}")
        out += checks.get(name + "1", [])
        if not c["rescale"]:
            return out
        m, rnd, s, extra = c["m"], c["rnd"], c["s"], c["extra"]
        if extra:
            out.append(f"{x} = ({x} * {m} + {rnd} + ({extra} if {x} >= 0 else -{extra})) >> {s}")
        else:
            out.append(f"{x} = ({x} * {m} + {rnd}) >> {s}")
        if c["w2"]:
            out.append(f"{x} = (({x} + _H32) & _M32) - _H32")
        return out

    def body(checks: dict) -> list[str]:
        """One element's statements: a (and b) as read -> v as stored (before the store's mask)."""
        out = operand_lines("A", a_k, checks)
        if binary:
            out += operand_lines("B", b_k, checks)
            out += checks.get("op", [])
            if k["wrap_a"]:
                out.append("a = ((a + _H32) & _M32) - _H32")
            if k["wrap_b"]:
                out.append("b = ((b + _H32) & _M32) - _H32")
            if op == EltOp.ADD:
                out.append("v = ((a + b + _H32) & _M32) - _H32" if k["wrap_sum"] else "v = a + b")
            elif op == EltOp.SUB:
                out.append("v = ((a - b + _H32) & _M32) - _H32" if k["wrap_sum"] else "v = a - b")
            elif op == EltOp.MUL:
                if k["mul_shift"] > 0:
                    out.append(f"v = (((((a * b + {k['mul_rnd']} + _I64) & _M64) - _I64) >> {k['mul_shift']})"
                               " + _H32 & _M32) - _H32")
                else:
                    out.append("v = ((a * b + _H32) & _M32) - _H32")
            elif op == EltOp.MINIMUM:
                out.append("v = a if a < b else b")
            elif op == EltOp.MAXIMUM:
                out.append("v = a if a > b else b")
            else:
                wh, wm = k["whalf"], k["wmask"]
                out.append(f"a = ((a + {wh}) & {wm}) - {wh}")
                if op == EltOp.LOGICAL_LEFT_SHIFT:
                    out.append(f"v = ((a << (b & 31)) + {wh} & {wm}) - {wh}")
                elif op == EltOp.LOGICAL_RIGHT_SHIFT:
                    out.append(f"v = (((a & {wm}) >> (b & 31)) + {wh} & {wm}) - {wh}")
                elif op == EltOp.ARITHMETIC_RIGHT_SHIFT:
                    out.append("n = b & 31")
                    out.append(f"v = ((a >> n) + {wh} & {wm}) - {wh}")
                    if k["round_"]:
                        out.append("if n > 0 and (a >> (n - 1)) & 1:")
                        out.append("    v += 1")
                    out.append(f"v = ((v + {wh}) & {wm}) - {wh}")
                else:
                    return None
        else:
            out.append("v = a")
        if st.rescale:
            out.append("mu, sh, t = use[i]")
            out += checks.get("stage", [])
            zp_h = k["zp_h"]
            if st.scale32:
                out.append("v = ((v + _H32) & _M32) - _H32")
                if st.double_round:
                    out.append(f"v = (((v * mu + t + (0 if sh <= 31 else {1 << 30} if v >= 0 else -{1 << 30})) >> sh)"
                               f" + {zp_h} & _M32) - _H32")
                else:
                    out.append(f"v = (((v * mu + t) >> sh) + {zp_h} & _M32) - _H32")
            else:
                out.append(f"v = ((((((v + _H48) & _M48) - _H48) * mu + t) >> sh) + {zp_h} & _M32) - _H32")
        for lo, hi in k["clips"]:
            out.append(f"v = {lo} if v < {lo} else {hi} if v > {hi} else v" if lo <= hi else f"v = {hi}")
        if st.lut_range is not None:
            lut0 = k["lut0"]
            if st.lut_mode == LutMode.INT8:
                out.append(f"v = entry(lut, {lut0} + 2 * ((v + 128) & 0xFF))[0]")
            else:
                if "lut" in checks:
                    return None
                out.append("c = -32768 if v < -32768 else 32767 if v > 32767 else v")
                out.append("j = (c + 32768) >> 7")
                out.append(f"e = entry(lut, {lut0} + 2 * j)[0]")
                out.append(f"v = (((e << 7) + (entry(lut, {lut0} + 2 * (j + 1 if j < 512 else 512))[0] - e)"
                           " * (c & 0x7F)) + _H32 & _M32) - _H32")
        if not k["wide"]:
            out.append(f"v &= {k['out_mask']}")
        return out

    def inline_checks(probe) -> dict | None:
        """The Probe's checks as statements on the element, each returning False where its
        _exact_test condition fails (_passes' tests, on the element's names at that point: a
        and b at "op", the operand's value at A0/A1/B0/B1, v and the record's shift at "stage");
        None where a check has no such test or is not one the unit shows there."""
        out: dict[str, list[str]] = {}
        for point, cs in probe.checks.items():
            if point not in ("A0", "A1", "B0", "B1", "op", "stage"):
                if point == "lut":
                    return None
                continue                        # a point the unit never shows
            if point in ("B0", "B1", "op") and not binary:
                continue
            if point == "stage" and not st.rescale:
                continue
            names = ({"p": "a", "q": "b"} if point == "op" else {"p": "v", "s": "shifts[i]"} if point == "stage"
                     else {"p": point[0].lower()})
            lines = out.setdefault(point, [])
            for c in cs:
                cond = _exact_test(c)
                if cond is None or (point == "op") != (c["kind"] != "rescale"):
                    return None                 # (an operand or stage check is a RESCALE's)
                if any(n not in names for n in _ELEMENT.findall(cond)):
                    return None                 # (the records' shift is the stage's alone)
                expr = _ELEMENT.sub(lambda m: names[m.group()], cond)
                lines.append(f"if not ({expr}): return False")
        return out

    def compile_for(checks: dict):
        lines = body(checks)
        if lines is None:
            return None
        src = ["def fused(mem):", "    sram = mem.sram"]
        src.append(f"    XA = read_a(sram[S_A], {k['a0']})")
        if binary:
            src.append(f"    XB = read_b(sram[S_W], {k['b0']})")
        if st.rescale:
            p0, p1 = k["param"]
            src.append(f"    mults, shifts, use = operands(sram[S_P][{p0}:{p1}].tobytes())")
        if st.lut_range is not None:
            src.append("    lut = sram[S_L]")
        src.append("    out = []")
        src.append(f"    for i in range({count}):")
        src.append(f"        a = XA[{'0' if k['n_a'] != count else 'i'}]")
        if binary:
            src.append(f"        b = XB[{'0' if k['n_b'] != count else 'i'}]")
        src += ["        " + line for line in lines]
        src.append("        out.append(v)")
        src.append(f"    pack_into(sram[S_O], {k['o0']}, *out)")
        src.append("    return True")
        ns = dict(g)
        exec(compile("\n".join(src), f"<fused eltwise {op.name}>", "exec"), ns)
        return ns["fused"]

    plain = compile_for({})
    if plain is None:
        return generic
    kept: dict = {}         # id(Probe) -> (the Probe, its fused function or None)

    def fused_for(probe):
        """The fused function for this Probe (its checks inline), None where it has none."""
        if len(kept) >= 64:
            kept.clear()
        checks = inline_checks(probe)
        made = kept[id(probe)] = (probe, compile_for(checks) if checks is not None else None)
        return made[1]

    def run(mem: Memories, probe=None) -> None:
        if probe is None:
            plain(mem)
            return
        if type(probe) is Probe:
            made = kept.get(id(probe))
            f = made[1] if made is not None and made[0] is probe else fused_for(probe)
            if f is not None and f(mem):
                return
        generic(mem, probe)
    run.fused, run.fused_for = plain, fused_for
    return run
