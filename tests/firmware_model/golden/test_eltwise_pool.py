"""The ELTWISE and POOL units of the golden model and the compiler kinds that use them.

Part 1: the units on constrained-random register settings against the interpreter's kernels (the
TOSA op each mode implements), every operand type, mode and edge the units support, and their
typed errors.
Part 2: small TOSA graphs (MLIR serialised by tosa-opt) compiled for the tiny and default
configurations and run on the golden model, against the interpreter, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim import seeds
from sim.paths import MODELS_DIR, TEST_DATA
from firmware_model.golden.eltwise_unit import execute_eltwise
from firmware_model.errors import GoldenModelError, TosaUnpredictable
from firmware_model.arch.isa import EltMode, EltOp, LutMode, OutMode, PoolMode, Reg, Sram, Status
from firmware_model.arch.isa import encode_param_records
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.arch.cycle_model import (eltwise_command_cycles, eltwise_uses_vector, eltwise_vector_cycles,
                                             eltwise_vector_lanes, pool_command_cycles, pool_uses_vector,
                                             pool_vector_cycles, pool_vector_lanes)
from firmware_model.golden.pool_unit import execute_pool
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, run_op

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
CFG = load_config("default")


# ----------------------------------------------------------------------------------------------
# Helpers: one unit command on hand-set memories and registers; one interpreter kernel

def kernel(op: str, inputs, in_dtypes, out_shape, out_dtype, **attrs):
    call = OpCall(op, attrs, [None if x is None else np.asarray(x) for x in inputs],
                  [TensorSpec(tuple(np.shape(x)), d) for x, d in zip(inputs, in_dtypes)],
                  [TensorSpec(tuple(out_shape), out_dtype)], where="test")
    return run_op(call)[0]


def store(mem: Memories, sram: Sram, addr: int, values, dtype: DType) -> None:
    raw = np.ascontiguousarray(np.asarray(values), dtype=dtype.storage.newbyteorder("<")).view(np.uint8).reshape(-1)
    mem.sram[sram][addr:addr + raw.size] = raw


def load(mem: Memories, sram: Sram, addr: int, count: int, dtype: DType) -> np.ndarray:
    size = dtype.size_bytes
    raw = mem.sram[sram][addr:addr + count * size].copy()
    return raw.view(dtype.storage.newbyteorder("<")).astype(dtype.storage)


def put_params(mem: Memories, first: int, multiplier, shift) -> None:
    multiplier = np.asarray(multiplier).reshape(-1)
    rec = encode_param_records(np.zeros(multiplier.size, np.int64), multiplier, np.asarray(shift).reshape(-1))
    mem.sram[Sram.PARAM][first * PARAM_RECORD_BYTES:first * PARAM_RECORD_BYTES + len(rec)] = np.frombuffer(rec, np.uint8)


def put_table(mem: Memories, entry: int, table) -> None:
    t = np.asarray(table, dtype="<i2")
    mem.sram[Sram.LUT][2 * entry:2 * entry + 2 * t.size] = t.view(np.uint8)


def stage_regs(out_dtype: DType, *, rescale=None, clamp=None, lut=LutMode.OFF, lut_addr=0, param_addr=0) -> dict:
    """Output-stage registers: rescale = dict(scale32, double_round, unsigned, zp, dtype)."""
    regs = {Reg.OFM_DTYPE: int(out_dtype), Reg.LUT_MODE: int(lut), Reg.LUT_ADDR: lut_addr,
            Reg.PARAM_ADDR: param_addr, Reg.OUT_MODE: 0, Reg.OFM_ZP: 0, Reg.RESCALE_DTYPE: int(I32)}
    lo, hi = (clamp if clamp is not None else (I32.min, I32.max))
    if rescale is not None:
        t = rescale["dtype"]
        regs[Reg.OUT_MODE] = int(OutMode.RESCALE | (OutMode.SCALE32 if rescale["scale32"] else 0)
                                 | (OutMode.DOUBLE_ROUND if rescale["double_round"] else 0)
                                 | (OutMode.UNSIGNED_OUT if rescale["unsigned"] else 0))
        regs[Reg.OFM_ZP] = rescale["zp"]
        regs[Reg.RESCALE_DTYPE] = int(t)
        if clamp is None:
            lo, hi = (0, t.umax) if rescale["unsigned"] else (t.min, t.max)
    regs[Reg.CLAMP_MIN], regs[Reg.CLAMP_MAX] = lo, hi
    return {int(k): v & 0xFFFFFFFF for k, v in regs.items()}


def eltwise(op: EltOp, a, a_dt: DType, b=None, b_dt: DType | None = None, *, out_dt: DType, mode=0,
            a_stage=(0, 0, None), b_stage=(0, 0, None), mul_shift=0, stage=None, channels=1, params=None,
            table=None, out_addr=64):
    """Run one ELTWISE command; returns (values read back from the output SRAM, result).
    x_stage = (zero point, left shift, (multiplier, shift) or None)."""
    mem = Memories(CFG)
    a = np.asarray(a)
    count = a.size if not (EltMode.A_SCALAR & mode) else np.asarray(b).size
    store(mem, Sram.INPUT, 0, a, a_dt)
    regs = {Reg.ELT_A_ADDR: 0, Reg.ELT_OUT_ADDR: out_addr, Reg.ELT_COUNT: count, Reg.ELT_A_DTYPE: int(a_dt),
            Reg.ELT_A_ZP: a_stage[0], Reg.ELT_A_LSHIFT: a_stage[1], Reg.ELT_MODE: int(mode),
            Reg.ELT_SHIFT: mul_shift, Reg.ELT_CHANNELS: channels}
    if a_stage[2] is not None:
        regs[Reg.ELT_A_MULT], regs[Reg.ELT_A_SHIFT] = a_stage[2]
    if b is not None:
        store(mem, Sram.WEIGHT, 32, b, b_dt)
        regs.update({Reg.ELT_B_ADDR: 32, Reg.ELT_B_DTYPE: int(b_dt), Reg.ELT_B_ZP: b_stage[0],
                     Reg.ELT_B_LSHIFT: b_stage[1]})
        if b_stage[2] is not None:
            regs[Reg.ELT_B_MULT], regs[Reg.ELT_B_SHIFT] = b_stage[2]
    regs = {int(k): int(v) & 0xFFFFFFFF for k, v in regs.items()}
    regs.update(stage if stage is not None else stage_regs(out_dt))
    if params is not None:
        put_params(mem, 3, *params)
        regs[int(Reg.PARAM_ADDR)] = 3
    if table is not None:
        put_table(mem, 7, table)
        regs[int(Reg.LUT_ADDR)] = 7
    result = execute_eltwise(CFG, mem, regs, op)
    # the cycle model's path for these registers (both are checked against the RTL by the co-simulation)
    sizes = [a_dt.size_bytes, out_dt.size_bytes] + ([b_dt.size_bytes] if b is not None else [])
    lanes = eltwise_vector_lanes(CFG, a_size=a_dt.size_bytes, b_size=b_dt.size_bytes if b is not None else 0,
                                 a_addr=0, b_addr=32, a_scalar=EltMode.A_SCALAR in EltMode(mode),
                                 b_scalar=EltMode.B_SCALAR in EltMode(mode))
    vector = eltwise_uses_vector(lanes=lanes, lut_mode=regs.get(int(Reg.LUT_MODE), 0), channels=channels,
                                 sizes=sizes)
    assert result.cycles == (eltwise_vector_cycles(CFG, lanes=lanes, count=count, out_addr=out_addr,
                                                   out_size=out_dt.size_bytes) if vector and count
                             else eltwise_command_cycles(count))
    return load(mem, Sram.OUTPUT, out_addr, count, out_dt), result


def same(a, b) -> bool:
    return np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b)


def int32_values(rng, n, lo=-(1 << 30), hi=1 << 30):
    v = rng.integers(lo, hi, n, dtype=np.int64)
    v[: min(n, 4)] = [0, -1, 1, lo][: min(n, 4)]
    return v.astype(np.int32)


# ----------------------------------------------------------------------------------------------
# Part 1: the units against the kernels

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("op", ["ADD", "SUB", "MINIMUM", "MAXIMUM"])
def test_int32_binary_ops_match_the_kernels(op, seed):
    rng = seeds.rng(seed)
    n = int(rng.integers(1, 300))
    a, b = int32_values(rng, n), int32_values(rng, n)
    if op in ("MINIMUM", "MAXIMUM"):
        a[-1], b[-1] = I32.min, I32.max
    got, _ = eltwise(EltOp[op], a, I32, b, I32, out_dt=I32)
    assert same(got, kernel(op, [a, b], [I32, I32], (n,), I32))


def test_add_sub_wrap_where_tosa_requires_no_overflow():
    a = np.array([I32.max, I32.min, 5], np.int32)
    b = np.array([1, 1, 7], np.int32)
    with pytest.raises(TosaUnpredictable):
        kernel("ADD", [a, b], [I32, I32], (3,), I32)
    got, _ = eltwise(EltOp.ADD, a, I32, b, I32, out_dt=I32)
    assert got.tolist() == [I32.min, I32.min + 1, 12]            # the datapath wraps (docs/isa.md)
    got, _ = eltwise(EltOp.SUB, b, I32, a, I32, out_dt=I32)
    assert got.tolist() == [1 - I32.max, 1 - I32.min - (1 << 32), 2]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [I8, I16, I32])
def test_mul_matches_the_kernel(dtype, seed):
    rng = seeds.rng(10 + seed)
    n = int(rng.integers(1, 200))
    if dtype == I32:
        shift = int(rng.integers(0, 40)) if seed else 0
        bound = 1 << (15 + min(shift, 15) // 2) if shift else 1 << 31
        a = rng.integers(-bound, bound, n).astype(np.int32)
        b = rng.integers(-bound, bound, n).astype(np.int32)
    else:
        shift = 0
        a = rng.integers(dtype.min, dtype.max + 1, n).astype(dtype.storage)
        b = rng.integers(dtype.min, dtype.max + 1, n).astype(dtype.storage)
        a[0], b[0] = dtype.min, dtype.min
    want = kernel("MUL", [a, b, np.array([shift], np.int8)], [dtype, dtype, I8], (n,), I32)
    got, _ = eltwise(EltOp.MUL, a, dtype, b, dtype, out_dt=I32, mul_shift=shift)
    assert same(got, want)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", [I8, I16, I32])
@pytest.mark.parametrize("op", ["LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT"])
def test_shifts_match_the_kernels(op, dtype, seed):
    rng = seeds.rng(20 + seed)
    n = int(rng.integers(1, 200))
    a = rng.integers(dtype.min, dtype.max + 1, n).astype(dtype.storage)
    a[0] = dtype.min
    scalar = seed == 2
    b = (np.array([int(rng.integers(0, dtype.bits))]) if scalar else rng.integers(0, dtype.bits, n)).astype(dtype.storage)
    round_ = bool(seed % 2) and op == "ARITHMETIC_RIGHT_SHIFT"
    mode = (EltMode.B_SCALAR if scalar else 0) | (EltMode.ROUND if round_ else 0)
    attrs = {"round": round_} if op == "ARITHMETIC_RIGHT_SHIFT" else {}
    want = kernel(op, [a, np.broadcast_to(b, (n,))], [dtype, dtype], (n,), dtype, **attrs)
    got, _ = eltwise(EltOp[op], a, dtype, b, dtype, out_dt=dtype, mode=mode)
    assert same(got, want)


def _random_rescale(rng):
    """A legal RESCALE (attributes and operands) for the kernel, or None."""
    in_t = [I8, I16, I32, I48][int(rng.integers(0, 4))]
    out_t = [I8, I16, I32][int(rng.integers(0, 3))]
    scale32 = in_t != I48 and bool(rng.integers(0, 2))
    double = scale32 and bool(rng.integers(0, 2))
    in_u = in_t in (I8, I16) and out_t != I32 and bool(rng.integers(0, 3) == 0)
    out_u = not in_u and out_t in (I8, I16) and in_t in (I8, I16) and bool(rng.integers(0, 3) == 0)
    per_channel = bool(rng.integers(0, 2))
    c = int(rng.integers(1, 9))
    shape = (int(rng.integers(1, 6)), c)
    nm = c if per_channel else 1
    if scale32:
        mult = rng.integers(1 << 29, (1 << 31) - 1, nm).astype(np.int32)
    else:
        mult = rng.integers(1 << 13, 1 << 15, nm).astype(np.int16)
    span = {I8: 8, I16: 16, I32: 31, I48: 47}[in_t]
    shift = rng.integers(span + 2 if in_t != I48 else 30, min(62, span + 28), nm).astype(np.int8)
    izp = 0
    if in_t == I8:
        izp = int(rng.integers(-128, 128))
    elif in_t == I16 and in_u:
        izp = [0, -32768][int(rng.integers(0, 2))]      # 32768 as int16
    ozp = 0
    if out_t == I8:
        ozp = int(rng.integers(-128, 128))
    elif out_t == I16 and out_u:
        ozp = [0, -32768][int(rng.integers(0, 2))]
    lo, hi = (0, in_t.umax) if in_u else (in_t.min, in_t.max)
    x = rng.integers(lo, hi + 1, shape, dtype=np.int64)
    x = (x if not in_u else x.astype(np.uint64).astype(in_t.storage)).astype(in_t.storage)
    attrs = dict(scale32=scale32, rounding_mode=3 if double else 1, per_channel=per_channel,
                 input_unsigned=in_u, output_unsigned=out_u)
    ops = [x, mult, shift, np.array([izp], in_t.storage), np.array([ozp], out_t.storage)]
    try:
        want = kernel("RESCALE", ops, [in_t, I32 if scale32 else I16, I8, in_t, out_t], shape, out_t, **attrs)
    except TosaUnpredictable:
        return None
    return in_t, out_t, attrs, ops, want


@pytest.mark.parametrize("seed", range(6))
def test_copy_with_output_rescale_is_the_rescale_kernel(seed):
    """Stand-alone RESCALE as ELTWISE COPY: every input/output type, scale32/scale16, single and
    double rounding, unsigned input or output, per-channel parameters, zero points."""
    rng = seeds.rng(30 + seed)
    ran = 0
    for _ in range(40):
        case = _random_rescale(rng)
        if case is None:
            continue
        in_t, out_t, attrs, (x, mult, shift, izp, ozp), want = case
        izp_v = int(izp[0]) & in_t.umax if attrs["input_unsigned"] else int(izp[0])
        ozp_v = int(ozp[0]) & out_t.umax if attrs["output_unsigned"] else int(ozp[0])
        c = x.shape[-1]
        stage = stage_regs(out_t, rescale=dict(scale32=attrs["scale32"], double_round=attrs["rounding_mode"] == 3,
                                               unsigned=attrs["output_unsigned"], zp=ozp_v, dtype=out_t))
        got, _ = eltwise(EltOp.COPY, x.reshape(-1), in_t, out_dt=out_t,
                         mode=EltMode.A_UNSIGNED if attrs["input_unsigned"] else 0, a_stage=(izp_v, 0, None),
                         stage=stage, channels=c if attrs["per_channel"] else 1, params=(mult, shift))
        assert same(got.reshape(want.shape), want), (in_t, out_t, attrs)
        ran += 1
    assert ran >= 20


@pytest.mark.parametrize("seed", range(3))
def test_tables_int8_and_int16(seed):
    rng = seeds.rng(40 + seed)
    n = int(rng.integers(1, 300))
    t8 = rng.integers(-128, 128, 256).astype(np.int8)
    x8 = rng.integers(-128, 128, n).astype(np.int8)
    x8[:2] = [-128, 127]
    got, res = eltwise(EltOp.COPY, x8, I8, out_dt=I8, stage=stage_regs(I8, clamp=(-128, 127), lut=LutMode.INT8),
                       table=t8)
    assert same(got, kernel("TABLE", [x8, t8], [I8, I8], (n,), I8))
    assert res.regions["lut"] == (14, 14 + 512)
    # entries are read as int16 (int8 tables are stored sign-extended; the LUT engine does the same)
    wide = rng.integers(-32768, 32768, 256).astype(np.int16)
    got, _ = eltwise(EltOp.COPY, x8, I8, out_dt=I32, stage=stage_regs(I32, clamp=(-128, 127), lut=LutMode.INT8),
                     table=wide)
    assert same(got, wide[x8.astype(np.int64) + 128].astype(np.int32))
    # int16: a table whose slopes fit int16 (the REQUIRE the reference model checks)
    t16 = np.clip(np.cumsum(rng.integers(-3000, 3000, 513)), -32768, 32767).astype(np.int16)
    x16 = rng.integers(-32768, 32768, n).astype(np.int16)
    x16[:2] = [-32768, 32767]
    got, _ = eltwise(EltOp.COPY, x16, I16, out_dt=I32,
                     stage=stage_regs(I32, clamp=(-32768, 32767), lut=LutMode.INT16), table=t16)
    assert same(got, kernel("TABLE", [x16, t16], [I16, I16], (n,), I32))
    # an int16 lookup clips its input to int16 first (as apply_lookup_s and the LUT engine do)
    x32 = np.array([-40000, -32768, 32767, 99999], np.int32)
    got, _ = eltwise(EltOp.COPY, x32, I32, out_dt=I32, stage=stage_regs(I32, lut=LutMode.INT16), table=t16)
    clipped = np.clip(x32, -32768, 32767).astype(np.int16)
    assert same(got, kernel("TABLE", [clipped, t16], [I16, I16], (4,), I32))


@pytest.mark.parametrize("dtype", [I8, I16])
def test_clamp_as_copy(dtype):
    rng = seeds.rng(5)
    x = rng.integers(dtype.min, dtype.max + 1, 77).astype(dtype.storage)
    lo, hi = -50, 70
    got, _ = eltwise(EltOp.COPY, x, dtype, out_dt=dtype, stage=stage_regs(dtype, clamp=(lo, hi)))
    assert same(got, kernel("CLAMP", [x], [dtype], x.shape, dtype, min_val=lo, max_val=hi))


def _rescale(x, in_t, out_t, m, s, izp=0, ozp=0, double=True, in_u=False):
    return kernel("RESCALE", [x, np.array([m], np.int32), np.array([s], np.int8), np.array([izp], in_t.storage),
                              np.array([ozp], out_t.storage)], [in_t, I32, I8, in_t, out_t], x.shape, out_t,
                  scale32=True, rounding_mode=3 if double else 1, per_channel=False, input_unsigned=in_u,
                  output_unsigned=False)


@pytest.mark.parametrize("seed", range(4))
def test_tflite_quantised_add_in_one_command(seed):
    """(a - zpa) << la, scaled; (b - zpb) << lb, scaled; ADD; output rescale; CLAMP; TABLE:
    the chain of kernels RESCALE, RESCALE, ADD, RESCALE, CLAMP, TABLE in one ELTWISE."""
    rng = seeds.rng(50 + seed)
    n = int(rng.integers(1, 256))
    a = rng.integers(-128, 128, n).astype(np.int8)
    b = rng.integers(-128, 128, n).astype(np.int8)
    zpa, zpb = (int(v) for v in rng.integers(-128, 128, 2))
    la, lb = 20, int(rng.integers(16, 21))
    ma, sa = int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(31, 36))
    mb, sb = int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(31, 36))
    mo, so, zpo = int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(36, 44)), int(rng.integers(-20, 20))
    lo, hi = -100, 90
    ra = _rescale(_rescale(a, I8, I32, 1 << 30, 30 - la, izp=zpa), I32, I32, ma, sa)
    rb = _rescale(_rescale(b, I8, I32, 1 << 30, 30 - lb, izp=zpb), I32, I32, mb, sb)
    s = kernel("ADD", [ra, rb], [I32, I32], (n,), I32)
    o = kernel("CLAMP", [_rescale(s, I32, I8, mo, so, ozp=zpo)], [I8], (n,), I8, min_val=lo, max_val=hi)
    table = rng.integers(-128, 128, 256).astype(np.int8)
    want = kernel("TABLE", [o, table], [I8, I8], (n,), I8)
    stage = stage_regs(I8, rescale=dict(scale32=True, double_round=False, unsigned=False, zp=zpo, dtype=I8),
                       clamp=(lo, hi), lut=LutMode.INT8)
    stage[int(Reg.OUT_MODE)] |= int(OutMode.DOUBLE_ROUND)
    got, _ = eltwise(EltOp.ADD, a, I8, b, I8, out_dt=I8, a_stage=(zpa, la, (ma, sa)), b_stage=(zpb, lb, (mb, sb)),
                     mode=EltMode.A_RESCALE | EltMode.B_RESCALE | EltMode.A_DOUBLE_ROUND | EltMode.B_DOUBLE_ROUND,
                     stage=stage, params=([mo], [so]), table=table)
    assert same(got, want)


def test_scalars_unsigned_reading_and_channel_records():
    rng = seeds.rng(6)
    n = 24
    # A_SCALAR: const - x (mlp's softmax does 2^29 - x)
    b = int32_values(rng, n, -1000, 1000)
    got, _ = eltwise(EltOp.SUB, np.array([1 << 29], np.int32), I32, b, I32, out_dt=I32, mode=EltMode.A_SCALAR)
    assert same(got, kernel("SUB", [np.full(n, 1 << 29, np.int32), b], [I32, I32], (n,), I32))
    # unsigned int8 input with zero point 128 (uint8 -> int16 RESCALE)
    x = rng.integers(0, 256, n).astype(np.uint8).view(np.int8)
    x[:2] = [-1, 0]                                            # 255 and 0 as uint8
    want = _rescale(x, I8, I16, 1 << 30, 26, izp=-128, in_u=True)
    got, _ = eltwise(EltOp.COPY, x, I8, out_dt=I16, mode=EltMode.A_UNSIGNED, a_stage=(128, 0, None),
                     stage=stage_regs(I16, rescale=dict(scale32=True, double_round=True, unsigned=False, zp=0,
                                                        dtype=I16)), params=([1 << 30], [26]))
    assert same(got, want) and want[0] == 127 << 4 and want[1] == -128 << 4
    # per-channel output records: element i uses record PARAM_ADDR + i % ELT_CHANNELS
    c = 6
    a = int32_values(rng, n, -5000, 5000)
    mult = rng.integers(1 << 30, 1 << 31, c).astype(np.int32)
    shift = rng.integers(30, 40, c).astype(np.int8)
    s = kernel("MAXIMUM", [a, np.zeros(n, np.int32)], [I32, I32], (n,), I32)
    want = kernel("RESCALE", [s.reshape(-1, c), mult, shift, np.array([0], np.int32), np.array([3], np.int8)],
                  [I32, I32, I8, I32, I8], (n // c, c), I8, scale32=True, rounding_mode=1, per_channel=True,
                  input_unsigned=False, output_unsigned=False)
    got, _ = eltwise(EltOp.MAXIMUM, a, I32, np.zeros(1, np.int32), I32, out_dt=I8, mode=EltMode.B_SCALAR,
                     stage=stage_regs(I8, rescale=dict(scale32=True, double_round=False, unsigned=False, zp=3,
                                                       dtype=I8)), channels=c, params=(mult, shift))
    assert same(got, want.reshape(-1))


@pytest.mark.parametrize("n", [3, 40])
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("sides", ["A", "B", "AB"])
def test_operands_from_output_read_an_earlier_result_where_it_was_written(sides, fast, n):
    """A_FROM_OUTPUT, B_FROM_OUTPUT: A, B or both are read from the output SRAM; the same values
    as from the input and weight SRAMs, through execute_eltwise and the prepared form the decoded
    program runs (SUB: the two sides are not interchangeable); the DMA-slack rule and the byte
    counters see each as output-SRAM bytes read. An operand over the results, or past the output
    SRAM, is refused."""
    from firmware_model.golden.command_plan import unit_ranges
    from firmware_model.golden.eltwise_unit import eltwise_plan, prepare_eltwise
    from firmware_model.arch.isa import Opcode
    rng = seeds.rng(7)
    a = int32_values(rng, n, -100000, 100000)
    b = int32_values(rng, n, -100000, 100000)
    want, _ = eltwise(EltOp.SUB, a, I32, b, I32, out_dt=I32)
    mem = Memories(CFG)
    mode = EltMode(0)
    home = {"A": (Sram.INPUT, 512), "B": (Sram.WEIGHT, 32)}
    on_chip = {"A": 512, "B": 1024}                 # where each lies in the output SRAM
    for side, x in (("A", a), ("B", b)):
        sram, addr = home[side]
        if side in sides:
            mode |= EltMode[f"{side}_FROM_OUTPUT"]
            store(mem, Sram.OUTPUT, on_chip[side], x, I32)
            store(mem, sram, addr, np.zeros(n, np.int32), I32)     # what it would read without the flag
        else:
            store(mem, sram, addr, x, I32)
    addr_of = {s: on_chip[s] if s in sides else home[s][1] for s in "AB"}
    regs = {Reg.ELT_A_ADDR: addr_of["A"], Reg.ELT_B_ADDR: addr_of["B"], Reg.ELT_OUT_ADDR: 64, Reg.ELT_COUNT: n,
            Reg.ELT_A_DTYPE: int(I32), Reg.ELT_B_DTYPE: int(I32), Reg.ELT_MODE: int(mode)}
    regs = {int(k): int(v) for k, v in regs.items()}
    regs.update(stage_regs(I32))
    plan = eltwise_plan(CFG, regs, EltOp.SUB)
    if fast:
        prepare_eltwise(CFG, regs, EltOp.SUB, plan)(mem)
    else:
        execute_eltwise(CFG, mem, regs, EltOp.SUB)
    assert same(load(mem, Sram.OUTPUT, 64, n, I32), want)
    reads, writes = unit_ranges(Opcode.ELTWISE, plan)
    want_reads = {("output" if s in sides else home[s][0].name.lower(), (addr_of[s], addr_of[s] + 4 * n))
                  for s in "AB"}
    assert set(reads) == want_reads and writes == [("output", (64, 64 + 4 * n))]
    for side in sides:
        for addr, rule in ((64 + 4 * n - 4, f"{side} apart from the results"),
                           (CFG.output_sram - 8, f"{side} range")):
            bad = dict(regs)
            bad[int(Reg[f"ELT_{side}_ADDR"])] = addr
            with pytest.raises(GoldenModelError) as e:
                execute_eltwise(CFG, mem, bad, EltOp.SUB)
            assert e.value.status == Status.ADDRESS_RANGE and rule in str(e.value)


def pool(mode: PoolMode, x, in_dt, *, kernel_hw, stride, pad_tl, out_hw, out_dt, izp=0, ozp=0, stage=None,
         params=None, in_hw=None):
    """Run one POOL command over one (H, W, C) image stored densely at input address 0."""
    mem = Memories(CFG)
    h, w, c = x.shape
    store(mem, Sram.INPUT, 0, x, in_dt)
    es, os_ = in_dt.size_bytes, out_dt.size_bytes
    oh, ow = out_hw
    regs = {Reg.IFM_ADDR: 0, Reg.IFM_ROW_STRIDE: w * c * es, Reg.IFM_PIX_STRIDE: c * es, Reg.IFM_ZP: izp,
            Reg.IFM_DTYPE: int(in_dt), Reg.KERNEL_H: kernel_hw[0], Reg.KERNEL_W: kernel_hw[1],
            Reg.STRIDE_H: stride[0], Reg.STRIDE_W: stride[1], Reg.OFM_ADDR: 128, Reg.OFM_ROW_STRIDE: ow * c * os_,
            Reg.OFM_PIX_STRIDE: c * os_, Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: c,
            Reg.POOL_PAD_TOP: pad_tl[0], Reg.POOL_PAD_LEFT: pad_tl[1], Reg.POOL_IN_H: (in_hw or (h, w))[0],
            Reg.POOL_IN_W: (in_hw or (h, w))[1]}
    regs = {int(k): int(v) & 0xFFFFFFFF for k, v in regs.items()}
    regs.update(stage if stage is not None else stage_regs(out_dt, clamp=(out_dt.min, out_dt.max)))
    if mode == PoolMode.AVG:
        regs[int(Reg.OFM_ZP)] = ozp & 0xFFFFFFFF
    if params is not None:
        put_params(mem, 0, *params)
    result = execute_pool(CFG, mem, regs, mode)
    pixels = dict(in_size=es, ifm_addr=0, ifm_row_stride=w * c * es, ifm_pix_stride=c * es)
    if oh * ow * c and pool_uses_vector(CFG, mode=mode, lut_mode=regs.get(int(Reg.LUT_MODE), 0), out_size=os_,
                                        **pixels):
        rescale = bool(regs.get(int(Reg.OUT_MODE), 0) & OutMode.RESCALE)
        expect = pool_vector_cycles(CFG, lanes=pool_vector_lanes(CFG, **pixels), ofm_h=oh, ofm_w=ow, ofm_c=c,
                                    kernel_h=kernel_hw[0], kernel_w=kernel_hw[1], out_size=os_, ofm_addr=128,
                                    ofm_row_stride=ow * c * os_, ofm_pix_stride=c * os_, rescale=rescale,
                                    avg=mode == PoolMode.AVG)
    else:
        expect = pool_command_cycles(ofm_h=oh, ofm_w=ow, ofm_c=c, kernel_h=kernel_hw[0], kernel_w=kernel_hw[1])
    assert result.cycles == expect
    return load(mem, Sram.OUTPUT, 128, oh * ow * c, out_dt).reshape(oh, ow, c), result


@pytest.mark.parametrize("small", [True, False])
@pytest.mark.parametrize("fast", [False, True])
def test_a_pool_reads_its_input_box_from_the_output_sram(fast, small):
    """IFM_SRAM OUTPUT for POOL: the input box is read from the output SRAM; the same results as
    from the input SRAM through execute_pool and the prepared forms (the small one on Python
    integers, and the numpy one), the box's bytes counted as output-SRAM bytes read; a box over
    the results, or past the output SRAM, is refused."""
    from firmware_model.golden.command_plan import unit_ranges
    from firmware_model.arch.registers import Registers
    from firmware_model.golden.pool_unit import _small, pool_plan, prepare_pool
    from firmware_model.arch.isa import Opcode
    rng = seeds.rng(11)
    h, w, c = (1, 10, 1) if small else (9, 8, 12)
    x = rng.integers(-128, 128, (h, w, c)).astype(np.int8)
    want, _ = pool(PoolMode.MAX, x, I8, kernel_hw=(1, w) if small else (3, 3), stride=(1, 1) if small else (2, 2),
                   pad_tl=(0, 0) if small else (1, 1), out_hw=(1, 1) if small else (5, 4), out_dt=I8)
    oh, ow = want.shape[:2]
    at = 1024                                      # the box's place in the output SRAM
    mem = Memories(CFG)
    store(mem, Sram.OUTPUT, at, x, I8)
    store(mem, Sram.INPUT, 0, np.zeros_like(x), I8)          # what the box would read without it
    regs = {Reg.IFM_SRAM: int(Sram.OUTPUT), Reg.IFM_ADDR: at, Reg.IFM_ROW_STRIDE: w * c, Reg.IFM_PIX_STRIDE: c,
            Reg.IFM_DTYPE: int(I8), Reg.KERNEL_H: 1 if small else 3, Reg.KERNEL_W: w if small else 3,
            Reg.STRIDE_H: 1 if small else 2, Reg.STRIDE_W: 1 if small else 2, Reg.OFM_ADDR: 128,
            Reg.OFM_ROW_STRIDE: ow * c, Reg.OFM_PIX_STRIDE: c, Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: c,
            Reg.POOL_PAD_TOP: 0 if small else 1, Reg.POOL_PAD_LEFT: 0 if small else 1, Reg.POOL_IN_H: h,
            Reg.POOL_IN_W: w}
    regs = {int(k): int(v) for k, v in regs.items()}
    regs.update(stage_regs(I8, clamp=(I8.min, I8.max)))
    plan = pool_plan(CFG, regs, PoolMode.MAX)
    assert _small(Registers(regs), plan) == small      # the form each case means to run
    if fast:
        prepare_pool(CFG, regs, PoolMode.MAX, plan)(mem)
    else:
        execute_pool(CFG, mem, regs, PoolMode.MAX)
    assert same(load(mem, Sram.OUTPUT, 128, oh * ow * c, I8).reshape(oh, ow, c), want)
    reads, _ = unit_ranges(Opcode.POOL, plan)
    assert ("output", (at, at + h * w * c)) in reads and not any(name == "input" for name, _ in reads)
    for addr, rule in ((128 + oh * ow * c - 1, "input apart from the results"), (CFG.output_sram - 4, "input range")):
        bad = dict(regs)
        bad[int(Reg.IFM_ADDR)] = addr
        with pytest.raises(GoldenModelError) as e:
            execute_pool(CFG, mem, bad, PoolMode.MAX)
        assert e.value.status == Status.ADDRESS_RANGE and rule in str(e.value)


def _pool_geometry(rng):
    while True:
        h, w = (int(v) for v in rng.integers(1, 12, 2))
        kh, kw = (int(v) for v in rng.integers(1, 5, 2))
        sh, sw = (int(v) for v in rng.integers(1, 4, 2))
        pad = [int(rng.integers(0, kh)), int(rng.integers(0, kh)), int(rng.integers(0, kw)), int(rng.integers(0, kw))]
        ny, nx = h + pad[0] + pad[1] - kh, w + pad[2] + pad[3] - kw
        if ny >= 0 and nx >= 0 and ny % sh == 0 and nx % sw == 0:
            return h, w, (kh, kw), (sh, sw), pad, (ny // sh + 1, nx // sw + 1)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dtype", [I8, I16])
def test_avg_and_max_pool_match_the_kernels(dtype, seed):
    rng = seeds.rng(60 + seed)
    h, w, k, s, pad, (oh, ow) = _pool_geometry(rng)
    c = int(rng.integers(1, 9))
    x = rng.integers(dtype.min, dtype.max + 1, (1, h, w, c)).astype(dtype.storage)
    izp = int(rng.integers(-128, 128)) if dtype == I8 else 0
    ozp = int(rng.integers(-128, 128)) if dtype == I8 else 0
    attrs = dict(kernel=list(k), stride=list(s), pad=pad)
    want = kernel("AVG_POOL2D", [x, np.array([izp], dtype.storage), np.array([ozp], dtype.storage)],
                  [dtype] * 3, (1, oh, ow, c), dtype, acc_type=int(I32), **attrs)
    got, _ = pool(PoolMode.AVG, x[0], dtype, kernel_hw=k, stride=s, pad_tl=(pad[0], pad[2]), out_hw=(oh, ow),
                  out_dt=dtype, izp=izp, ozp=ozp)
    assert same(got, want[0])
    want = kernel("MAX_POOL2D", [x], [dtype], (1, oh, ow, c), dtype, **attrs)
    got, _ = pool(PoolMode.MAX, x[0], dtype, kernel_hw=k, stride=s, pad_tl=(pad[0], pad[2]), out_hw=(oh, ow),
                  out_dt=dtype)
    assert same(got, want[0])


@pytest.mark.parametrize("op,mode,dtype", [("REDUCE_SUM", PoolMode.SUM, I32), ("REDUCE_MAX", PoolMode.MAX, I8),
                                           ("REDUCE_MAX", PoolMode.MAX, I32), ("REDUCE_MIN", PoolMode.MIN, I16),
                                           ("REDUCE_MIN", PoolMode.MIN, I32)])
def test_reductions_as_windows(op, mode, dtype):
    """REDUCE_* over axis 1 of (outer, R, inner): a POOL window R x 1 over the view H=R, W=outer."""
    rng = seeds.rng(7)
    outer, r, inner = 3, 9, 5
    hi = 1 << 26 if dtype == I32 else dtype.max
    x = rng.integers(-hi, hi, (outer, r, inner)).astype(dtype.storage)
    want = kernel(op, [x], [dtype], (outer, 1, inner), dtype, axis=1)
    mem = Memories(CFG)
    store(mem, Sram.INPUT, 0, x, dtype)
    es = dtype.size_bytes
    # the (outer, r, inner) bytes seen as H = r rows, W = outer pixels: row stride inner, pixel stride r*inner
    regs = {Reg.IFM_ADDR: 0, Reg.IFM_ROW_STRIDE: inner * es, Reg.IFM_PIX_STRIDE: r * inner * es,
            Reg.IFM_DTYPE: int(dtype), Reg.KERNEL_H: r, Reg.KERNEL_W: 1, Reg.STRIDE_H: 1, Reg.STRIDE_W: 1,
            Reg.OFM_ADDR: 0, Reg.OFM_ROW_STRIDE: outer * inner * es, Reg.OFM_PIX_STRIDE: inner * es,
            Reg.OFM_H: 1, Reg.OFM_W: outer, Reg.OFM_C: inner, Reg.POOL_IN_H: r, Reg.POOL_IN_W: outer}
    regs = {int(k): int(v) for k, v in regs.items()}
    regs.update(stage_regs(dtype, clamp=(max(dtype.min, I32.min), dtype.max)))
    execute_pool(CFG, mem, regs, mode)
    assert same(load(mem, Sram.OUTPUT, 0, x.size // r, dtype).reshape(outer, 1, inner), want)


def test_sum_pool_wraps_and_rescales_with_zero_point():
    """SUM of (x - zp) over int8, then the output stage's rescale: REDUCE_SUM of RESCALE, then RESCALE."""
    rng = seeds.rng(8)
    x = rng.integers(-128, 128, (4, 4, 6)).astype(np.int8)
    zp = -128
    shifted = _rescale(x, I8, I32, 1 << 30, 30, izp=zp)
    s = kernel("REDUCE_SUM", [kernel("REDUCE_SUM", [shifted[None]], [I32], (1, 1, 4, 6), I32, axis=1)],
               [I32], (1, 1, 1, 6), I32, axis=2)
    want = _rescale(s, I32, I8, 1500000000, 36, ozp=-5)
    stage = stage_regs(I8, rescale=dict(scale32=True, double_round=True, unsigned=False, zp=-5, dtype=I8))
    got, _ = pool(PoolMode.SUM, x, I8, kernel_hw=(4, 4), stride=(1, 1), pad_tl=(0, 0), out_hw=(1, 1), out_dt=I8,
                  izp=zp, stage=stage, params=(np.full(6, 1500000000), np.full(6, 36)))
    assert same(got, want[0])


def test_pool_only_reads_the_real_box():
    """A tile's box holds only real pixels: POOL_PAD_TOP / POOL_IN_H place it in the virtual window."""
    rng = seeds.rng(9)
    x = rng.integers(-128, 128, (1, 5, 5, 2)).astype(np.int8)
    want = kernel("MAX_POOL2D", [x], [I8], (1, 5, 5, 2), I8, kernel=[3, 3], stride=[1, 1], pad=[1, 1, 1, 1])
    # output rows 0..1 need image rows -1..2: the box holds rows 0..2, one padding row above it
    got, _ = pool(PoolMode.MAX, x[0, 0:3], I8, kernel_hw=(3, 3), stride=(1, 1), pad_tl=(1, 1), out_hw=(2, 5),
                  out_dt=I8)
    assert same(got, want[0, 0:2])


def test_unit_errors_are_typed():
    x = np.zeros(4, np.int32)
    with pytest.raises(GoldenModelError) as e:
        eltwise(EltOp.COPY, x, I32, out_dt=I32, mode=EltMode.A_UNSIGNED)
    assert e.value.status == Status.BAD_MODE and "A_UNSIGNED" in str(e.value)
    with pytest.raises(GoldenModelError) as e:
        eltwise(99, x, I32, x, I32, out_dt=I32)
    assert e.value.status == Status.BAD_MODE
    with pytest.raises(GoldenModelError) as e:
        eltwise(EltOp.ADD, x, I32, x, I32, out_dt=I32, out_addr=CFG.output_sram - 8)
    assert e.value.status == Status.ADDRESS_RANGE and "output range" in str(e.value)
    with pytest.raises(GoldenModelError) as e:
        eltwise(EltOp.ADD, x, I32, x, I32, out_dt=I32, out_addr=2)
    assert e.value.status == Status.ADDRESS_RANGE
    with pytest.raises(GoldenModelError) as e:
        eltwise(EltOp.COPY, x, I32, out_dt=I32, stage=stage_regs(I32, lut=LutMode.INT16, lut_addr=CFG.lut_entries - 10))
    assert e.value.status == Status.ADDRESS_RANGE and "table" in str(e.value)
    img = np.zeros((2, 2, 1), np.int8)
    with pytest.raises(GoldenModelError) as e:
        pool(PoolMode.MAX, img, I8, kernel_hw=(2, 2), stride=(1, 1), pad_tl=(3, 0), out_hw=(1, 1), out_dt=I8)
    assert e.value.status == Status.BAD_MODE and "real taps" in str(e.value)
    with pytest.raises(GoldenModelError) as e:
        pool(PoolMode.AVG, img.astype(np.int32), I32, kernel_hw=(1, 1), stride=(1, 1), pad_tl=(0, 0), out_hw=(2, 2),
             out_dt=I32)
    assert e.value.status == Status.BAD_MODE


# ----------------------------------------------------------------------------------------------
# Part 2: compiled graphs on the golden model against the interpreter

from compiler.interpreter import Interpreter  # noqa: E402
from compiler.pipeline import compile_graph  # noqa: E402
from compiler.tosa_io import read_tosa  # noqa: E402
from firmware_model.golden.model import GoldenModel  # noqa: E402
from compiler.npu.pool import NpuPool  # noqa: E402
from firmware_model.arch.isa import Opcode  # noqa: E402
from sim.models.mlir_graphs import serialize, tensor_type  # noqa: E402

NUMPY = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i48": np.int64}
DTYPE = {"i8": I8, "i16": I16, "i32": I32, "i48": I48}


class Mlir:
    """A small TOSA MLIR function under construction; values are (name, shape, element type)."""

    def __init__(self):
        self.args: list[tuple[str, str]] = []
        self.body: list[str] = []
        self.n = 0

    def _name(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def input(self, shape, elem):
        name = f"arg{len(self.args)}"
        self.args.append((name, tensor_type(shape, elem)))
        return (name, tuple(shape), elem)

    def const(self, values, elem, shape=None):
        values = np.asarray(values).astype(NUMPY[elem])
        shape = tuple(values.shape if shape is None else shape)
        ty = tensor_type(shape, elem)
        flat = values.reshape(-1)
        if flat.size and np.all(flat == flat[0]):
            lit = f"dense<{int(flat[0])}>"
        else:
            lit = f"dense<[{', '.join(str(int(v)) for v in flat)}]>" if len(shape) <= 1 else \
                f'dense<"0x{np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes().hex().upper()}">'
        name = self._name()
        self.body.append(f'    %{name} = "tosa.const"() <{{values = {lit} : {ty}}}> : () -> {ty}')
        return (name, shape, elem)

    def shape(self, values):
        name = self._name()
        vals = ", ".join(str(int(v)) for v in values)
        self.body.append(f"    %{name} = tosa.const_shape {{values = dense<[{vals}]> : tensor<{len(values)}xindex>}} "
                         f": () -> !tosa.shape<{len(values)}>")
        return name

    def op(self, text: str, operands, out_shape, out_elem, attrs: str = "", extra_types=()):
        name = self._name()
        names = ", ".join("%" + (o[0] if isinstance(o, tuple) else o) for o in operands)
        types = ", ".join([tensor_type(o[1], o[2]) if isinstance(o, tuple) else t
                           for o, t in zip(operands, list(extra_types) + [None] * len(operands))])
        attr = f" {{{attrs}}}" if attrs else ""
        self.body.append(f"    %{name} = tosa.{text} {names}{attr} : ({types}) -> {tensor_type(out_shape, out_elem)}")
        return (name, tuple(out_shape), out_elem)

    # ---- ops
    def rescale(self, x, m, s, izp, ozp, out_elem, *, double=True, scale32=True, per_channel=False, in_u=False,
                out_u=False):
        mult = self.const(m, "i32" if scale32 else "i16", (np.size(m),))
        shift = self.const(s, "i8", (np.size(s),))
        zi, zo = self.const([izp], x[2]), self.const([ozp], out_elem)
        attrs = (f"input_unsigned = {str(in_u).lower()}, output_unsigned = {str(out_u).lower()}, per_channel = "
                 f"{str(per_channel).lower()}, rounding_mode = {'DOUBLE_ROUND' if double else 'SINGLE_ROUND'}, "
                 f"scale32 = {str(scale32).lower()}")
        return self.op("rescale", [x, mult, shift, zi, zo], x[1], out_elem, attrs)

    def binary(self, op, a, b, out_elem="i32", attrs=""):
        shape = tuple(max(p, q) for p, q in zip(a[1], b[1]))
        return self.op(op, [a, b], shape, out_elem, attrs)

    def mul(self, a, b, shift):
        shape = tuple(max(p, q) for p, q in zip(a[1], b[1]))
        return self.op("mul", [a, b, self.const([shift], "i8")], shape, "i32")

    def clamp(self, x, lo, hi):
        return self.op("clamp", [x], x[1], x[2], f"max_val = {hi} : {x[2]}, min_val = {lo} : {x[2]}")

    def table(self, x, tab):
        t = self.const(tab, x[2], (np.size(tab),))
        return self.op("table", [x, t], x[1], "i8" if x[2] == "i8" else "i32")

    def pool(self, kind, x, kernel, stride, pad, izp=0, ozp=0):
        n, h, w, c = x[1]
        oh = (h + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (w + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        attrs = (f"kernel = array<i64: {kernel[0]}, {kernel[1]}>, pad = array<i64: {', '.join(map(str, pad))}>, "
                 f"stride = array<i64: {stride[0]}, {stride[1]}>")
        if kind == "avg_pool2d":
            zi, zo = self.const([izp], x[2]), self.const([ozp], x[2])
            return self.op("avg_pool2d", [x, zi, zo], (n, oh, ow, c), x[2], "acc_type = i32, " + attrs)
        return self.op("max_pool2d", [x], (n, oh, ow, c), x[2], attrs)

    def reduce(self, op, x, axis):
        shape = tuple(1 if i == axis else d for i, d in enumerate(x[1]))
        return self.op(op, [x], shape, x[2], f"axis = {axis} : i32")

    def _with_shape(self, op, x, values, out_shape, attrs=""):
        s = self.shape(values)
        return self.op(op, [x, s], out_shape, x[2], attrs, extra_types=[None, f"!tosa.shape<{len(values)}>"])

    def reshape(self, x, shape):
        return self._with_shape("reshape", x, shape, shape)

    def tile(self, x, mult):
        return self._with_shape("tile", x, mult, tuple(d * m for d, m in zip(x[1], mult)))

    def transpose(self, x, perms):
        return self.op("transpose", [x], tuple(x[1][p] for p in perms), x[2],
                       f"perms = array<i32: {', '.join(map(str, perms))}>")

    def slice(self, x, start, size):
        s0, s1 = self.shape(start), self.shape(size)
        r = f"!tosa.shape<{len(start)}>"
        return self.op("slice", [x, s0, s1], tuple(size), x[2], extra_types=[None, r, r])

    def concat(self, xs, axis):
        shape = list(xs[0][1])
        shape[axis] = sum(x[1][axis] for x in xs)
        return self.op("concat", xs, shape, xs[0][2], f"axis = {axis} : i32")

    def pad(self, x, padding, value):
        p = self.shape(padding)
        v = self.const([value], x[2])
        shape = tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(x[1]))
        return self.op("pad", [x, p, v], shape, x[2], extra_types=[None, f"!tosa.shape<{len(padding)}>", None])

    def text(self, outputs) -> str:
        sig = ", ".join(f"%{n}: {t}" for n, t in self.args)
        rtypes = ", ".join(tensor_type(o[1], o[2]) for o in outputs)
        return "\n".join(["module {", f"  func.func @main({sig}) -> ({rtypes}) {{", *self.body,
                          f"    return {', '.join('%' + o[0] for o in outputs)} : {rtypes}", "  }", "}"]) + "\n"


def run_graph(tmp_path, g: Mlir, outputs, inputs, *, host=(), configs=("tiny", "default")):
    """Compile for each configuration, run on the golden model, compare with the interpreter; the
    ops left to the host must be exactly `host`. Returns {config: CompileContext}."""
    model = serialize(g.text(outputs), tmp_path)
    graph = read_tosa(model)
    feed = {f"TosaInput_{i}": x for i, x in enumerate(inputs)}
    want = Interpreter(graph).run(feed)
    ctxs = {}
    for name in configs:
        cfg = load_config(name)
        ctx = compile_graph(graph, cfg)
        on_host = sorted(layer["op"] for layer in ctx.program.manifest["layers"] if layer["kind"] == "host")
        assert on_host == sorted(host), "\n".join(ctx.report)
        got = GoldenModel(ctx.program, cfg).invoke(feed)
        for k, v in want.items():
            assert same(got[k], v), f"{name}: output {k} differs from the interpreter\n" + "\n".join(ctx.report)
        ctxs[name] = ctx
    return ctxs


def units(ctx) -> list[str]:
    return [layer["unit"] for layer in ctx.program.manifest["layers"]]


def rand(rng, shape, elem, lo=None, hi=None):
    dt = DTYPE[elem]
    lo = dt.min if lo is None else lo
    hi = dt.max if hi is None else hi
    return rng.integers(lo, hi + 1, shape).astype(NUMPY[elem])


@pytest.mark.parametrize("seed", range(4))
def test_compiled_quantised_add_is_one_eltwise_command_per_tile(tmp_path, seed):
    """TFLite's int8 ADD as the converter writes it (RESCALE<<20 then RESCALE per operand, ADD,
    RESCALE, CLAMP) with broadcasting, plus a TABLE: one ELTWISE layer."""
    rng = seeds.rng(100 + seed)
    h, w, c = (int(v) for v in rng.integers(1, 13, 3))
    bshape = [(1, h, w, c), (1, 1, 1, c), (1, h, 1, 1), (1, 1, 1, 1)][seed]
    g = Mlir()
    x, y = g.input((1, h, w, c), "i8"), g.input(bshape, "i8")
    zx, zy, zo = (int(v) for v in rng.integers(-128, 128, 3))
    a = g.rescale(g.rescale(x, 1 << 30, 10, zx, 0, "i32"), int(rng.integers(1 << 30, 1 << 31)),
                  int(rng.integers(31, 36)), 0, 0, "i32")
    b = g.rescale(y, 1 << 30, 11, zy, 0, "i32")
    s = g.binary("add", a, b)
    o = g.clamp(g.rescale(s, int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(37, 42)), 0, zo, "i8"), -100, 110)
    outs = [g.table(o, rng.integers(-128, 128, 256))] if seed % 2 else [o]
    ctxs = run_graph(tmp_path, g, outs, [rand(rng, (1, h, w, c), "i8"), rand(rng, bshape, "i8")])
    for ctx in ctxs.values():
        assert units(ctx) == ["ELTWISE"], ctx.report


def test_a_large_elementwise_operation_is_pipelined_in_two_tiles(tmp_path, monkeypatch):
    """An ADD of 32x32x32 int8 operands fits one tile on large but takes two
    (eltwise.PIPELINE_MIN_ELEMENTS): the second ELTWISE's slack lets the first's store run under
    it, and the second's loads went under the first. Fewer cycles than in one tile, the same
    results as the interpreter."""
    from compiler.npu import eltwise

    rng = seeds.rng(175)
    g = Mlir()
    x, y = g.input((1, 32, 32, 32), "i8"), g.input((1, 32, 32, 32), "i8")
    a = g.rescale(x, 1 << 30, 10, 3, 0, "i32")
    b = g.rescale(y, 1 << 30, 11, -5, 0, "i32")
    o = g.clamp(g.rescale(g.binary("add", a, b), 1 << 30, 39, 0, 7, "i8"), -100, 110)
    feed = [rand(rng, (1, 32, 32, 32), "i8"), rand(rng, (1, 32, 32, 32), "i8")]
    ctx = run_graph(tmp_path, g, [o], feed, configs=("large",))["large"]
    (layer,) = ctx.program.manifest["layers"]
    assert len(layer["tiles"]) == 2, ctx.report
    slacks = [c.value for c in ctx.program.commands if c.opcode == Opcode.ELTWISE]
    assert slacks[0] > 0 and slacks[1] > 0, slacks
    inputs = {f"TosaInput_{i}": v for i, v in enumerate(feed)}
    two = GoldenModel(ctx.program, ctx.cfg)
    want = two.invoke(inputs)
    monkeypatch.setattr(eltwise, "PIPELINE_MIN_ELEMENTS", 1 << 62)
    one_ctx = run_graph(tmp_path / "one", g, [o], feed, configs=("large",))["large"]
    assert len(one_ctx.program.manifest["layers"][0]["tiles"]) == 1
    one = GoldenModel(one_ctx.program, one_ctx.cfg)
    assert all(np.array_equal(v, want[k]) for k, v in one.invoke(inputs).items())
    assert two.counters.cycles < one.counters.cycles


@pytest.mark.parametrize("seed", range(2))
def test_compiled_mul_sub_min_max_and_shifts(tmp_path, seed):
    rng = seeds.rng(110 + seed)
    n = int(rng.integers(3, 40))
    g = Mlir()
    x8, y8 = g.input((2, n), "i8"), g.input((2, n), "i8")
    x32, k32 = g.input((2, n), "i32"), g.input((1, 1), "i32")
    x16 = g.input((1, n), "i16")
    # lstm's gate product: (x - zx) * (y - zy) through pure-shift RESCALEs, then a RESCALE to int8
    prod = g.mul(g.rescale(x8, 1 << 30, 30, 7, 0, "i32"), g.rescale(y8, 1 << 30, 30, -128, 0, "i32"), 0)
    gate = g.rescale(prod, 1518500250, 38, 0, 5, "i8")
    raw8 = g.mul(x8, y8, 0)                                      # int8 x int8 -> int32
    big = g.mul(x32, g.const(rng.integers(-(1 << 20), 1 << 20, (1, 1)), "i32"), 31)   # int32 with rounding shift
    sub = g.binary("sub", g.const([[1 << 29]], "i32"), x32)      # scalar constant minus a tensor
    mx = g.binary("maximum", x32, k32)
    mn = g.binary("minimum", g.const(rng.integers(-(1 << 25), 1 << 25, (1, n)), "i32"), x32)
    sh16 = g.binary("arithmetic_right_shift", x16, g.const(rng.integers(0, 16, (1, n)), "i16"), "i16", "round = true")
    shl = g.binary("logical_left_shift", x32, g.const([[3]], "i32"))
    shr = g.binary("logical_right_shift", x8, g.const(rng.integers(0, 8, (1, n)), "i8"), "i8")
    outs = [gate, raw8, big, sub, mx, mn, sh16, shl, shr]
    inputs = [rand(rng, (2, n), "i8"), rand(rng, (2, n), "i8"), rand(rng, (2, n), "i32", -(1 << 24), 1 << 24),
              rand(rng, (1, 1), "i32", -(1 << 24), 1 << 24), rand(rng, (1, n), "i16")]
    ctxs = run_graph(tmp_path, g, outs, inputs)
    for ctx in ctxs.values():
        assert units(ctx) == ["ELTWISE"] * len(outs), ctx.report


@pytest.mark.parametrize("seed", range(3))
def test_compiled_stand_alone_rescale_table_clamp(tmp_path, seed):
    """RESCALE as COPY: per-channel (more channels than tiny's parameter SRAM half holds), int32 ->
    int16, uint8 output, uint8 input; TABLE int8 / int16; CLAMP int16."""
    rng = seeds.rng(120 + seed)
    c = int(rng.integers(17, 45))
    g = Mlir()
    x8 = g.input((1, 3, c), "i8")
    x32 = g.input((4, 5), "i32")
    x16 = g.input((2, 33), "i16")
    pc = g.rescale(x8, rng.integers(1 << 29, 1 << 31, c), rng.integers(20, 30, c), int(rng.integers(-128, 128)),
                   int(rng.integers(-128, 128)), "i8", per_channel=True, double=bool(seed % 2))
    to16 = g.rescale(x32, int(rng.integers(1 << 29, 1 << 31)), 36, 0, 0, "i16", double=False)
    u8 = g.rescale(x16, [20000], [26], 0, 200 - 256, "i8", scale32=False, double=False, out_u=True)
    from_u8 = g.rescale(g.rescale(x8, [1 << 30], [30], 3, -128, "i8", out_u=True, double=False),
                        1 << 30, 26, -128, 0, "i16", in_u=True)
    t8 = g.table(x8, rng.integers(-128, 128, 256))
    t16 = g.table(x16, np.clip(np.cumsum(rng.integers(-2000, 2000, 513)), -32768, 32767))
    cl = g.clamp(x16, -1000, 2000)
    outs = [pc, to16, u8, from_u8, t8, t16, cl]
    inputs = [rand(rng, (1, 3, c), "i8"), rand(rng, (4, 5), "i32", -(1 << 28), 1 << 28), rand(rng, (2, 33), "i16")]
    ctxs = run_graph(tmp_path, g, outs, inputs)
    for ctx in ctxs.values():
        assert set(units(ctx)) == {"ELTWISE"}, ctx.report
    tiny = [layer for layer in ctxs["tiny"].program.manifest["layers"] if layer["name"] == ctxs["tiny"].block.outputs[0]]
    assert len(tiny[0]["tiles"]) > 1 and any(t["c0"] > 0 for t in tiny[0]["tiles"])


def test_compiled_int48_rescale(tmp_path):
    """int48 input (a MAC's raw int16 result type) rescaled with apply_scale_16."""
    rng = seeds.rng(130)
    g = Mlir()
    x = g.input((3, 7), "i48")
    r = g.rescale(x, [12345], [40], 0, 0, "i16", scale32=False, double=False)
    run_graph(tmp_path, g, [r], [rng.integers(-(1 << 44), 1 << 44, (3, 7)).astype(np.int64)])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("elem", ["i8", "i16"])
def test_compiled_pooling(tmp_path, elem, seed):
    """AVG_POOL2D / MAX_POOL2D with padding, strides and zero points, tiled with halos on tiny,
    a CLAMP fused after each."""
    rng = seeds.rng(140 + seed)
    _, _, k, s, pad, _ = _pool_geometry(rng)
    while True:
        h, w = (int(v) for v in rng.integers(k[0] + 6, 26, 2))
        if (h + pad[0] + pad[1] - k[0]) % s[0] == 0 and (w + pad[2] + pad[3] - k[1]) % s[1] == 0:
            break
    c = int(rng.integers(1, 20))
    g = Mlir()
    x = g.input((1, h, w, c), elem)
    zi, zo = (int(v) for v in rng.integers(-128, 128, 2)) if elem == "i8" else (0, 0)
    avg = g.clamp(g.pool("avg_pool2d", x, k, s, pad, zi, zo), -120, 100)
    mx = g.clamp(g.pool("max_pool2d", x, k, s, pad), -50, 127)
    ctxs = run_graph(tmp_path, g, [avg, mx], [rand(rng, (1, h, w, c), elem)])
    tiny = ctxs["tiny"]
    assert units(tiny) == ["POOL", "POOL"]
    if h * w * c * DTYPE[elem].size_bytes > tiny.cfg.input_sram // 2:
        assert all(len(layer["tiles"]) > 1 for layer in tiny.program.manifest["layers"])


def _pool_commands(program) -> list[dict]:
    """Each POOL command's registers as they stand when it runs, and its DMA slack."""
    return [{**regs, "slack": c.value} for c, regs in program.registers_at(Opcode.POOL)]


@pytest.mark.parametrize("kind", ["max_pool2d", "avg_pool2d"])
def test_pool_inputs_laid_out_for_the_vector_lanes(tmp_path, monkeypatch, kind):
    """42 int8 channels packed (pixels 42 bytes apart) give the vector POOL 2 channels a tap; laid
    out a whole number of words apart, mac.rows. The planner takes that layout when it is faster,
    and the tiles are software-pipelined (a POOL's slack lets the next tile's load run); the
    results stay the interpreter's."""
    rng = seeds.rng(170)
    g = Mlir()
    x = g.input((1, 32, 32, 42), "i8")
    y = g.pool(kind, x, (2, 2), (2, 2), (0, 0, 0, 0), -3, 5)
    ctxs = run_graph(tmp_path, g, [y], [rand(rng, (1, 32, 32, 42), "i8")], configs=("default", "large"))
    feed = {"TosaInput_0": rand(rng, (1, 32, 32, 42), "i8")}
    aligned = {}
    for name, ctx in ctxs.items():
        cfg = ctx.cfg
        pools = _pool_commands(ctx.program)
        assert all(p[int(Reg.IFM_PIX_STRIDE)] % cfg.word_bytes == 0 for p in pools), name
        # several tiles, the next one's load under each POOL but the last
        assert len(pools) > 1 and all(p["slack"] > 0 for p in pools[:-1]), (name, pools)
        golden = GoldenModel(ctx.program, cfg)
        aligned[name] = (golden.invoke(feed), golden.counters.cycles)
    # the same pools with the pixels packed: slower, same results
    monkeypatch.setattr(NpuPool, "in_pixel_stride", lambda self, cfg, tc, pad: tc * self.in_dtype.size_bytes)
    model = serialize(g.text([y]), tmp_path / "packed")
    for name, (out, cycles) in aligned.items():
        cfg = load_config(name)
        ctx = compile_graph(read_tosa(model), cfg)
        assert all(p[int(Reg.IFM_PIX_STRIDE)] == p[int(Reg.OFM_C)] for p in _pool_commands(ctx.program))
        golden = GoldenModel(ctx.program, cfg)
        assert all(np.array_equal(out[k], v) for k, v in golden.invoke(feed).items())
        assert cycles < golden.counters.cycles, name


def test_compiled_reductions(tmp_path):
    """cnn32's global average pool (RESCALE x - zp, REDUCE_SUM over two axes, RESCALE) in one POOL
    command per tile; REDUCE_MAX / REDUCE_MIN over one axis."""
    rng = seeds.rng(150)
    g = Mlir()
    x = g.input((1, 6, 5, 40), "i8")
    y = g.input((3, 9, 4), "i32")
    s = g.reduce("reduce_sum", g.reduce("reduce_sum", g.rescale(x, 1 << 30, 30, -128, 0, "i32"), 1), 2)
    gap = g.rescale(s, 1096328669, 44, 0, 36, "i8")
    rmax = g.reduce("reduce_max", x, 2)
    rmin = g.reduce("reduce_min", y, 1)
    rsum = g.reduce("reduce_sum", y, 2)
    ctxs = run_graph(tmp_path, g, [gap, rmax, rmin, rsum],
                     [rand(rng, (1, 6, 5, 40), "i8"), rand(rng, (3, 9, 4), "i32", -(1 << 26), 1 << 26)])
    for ctx in ctxs.values():
        assert units(ctx) == ["POOL"] * 4, ctx.report


@pytest.mark.parametrize("seed", range(2))
def test_compiled_data_movement(tmp_path, seed):
    """TRANSPOSE, SLICE, TILE, CONCAT (with a constant input), PAD (a pad value whose bytes differ:
    DMA_LOAD with stride 0; and a FILL), RESHAPE (an alias, no command)."""
    rng = seeds.rng(160 + seed)
    n, h, w, c = 1, int(rng.integers(2, 9)), int(rng.integers(2, 9)), int(rng.integers(1, 6))
    g = Mlir()
    x = g.input((n, h, w, c), "i8")
    y = g.input((h, w * c), "i16")
    tr = g.transpose(x, (0, 3, 1, 2))
    sl = g.slice(x, (0, 1, 0, 0), (1, h - 1, w, c))
    tl = g.tile(y, (3, 2))
    cc = g.concat([y, g.const(rng.integers(-500, 500, (2, w * c)), "i16"), y], 0)
    pd = g.pad(y, (1, 2, 0, 3), 258)
    pd8 = g.pad(x, (0, 0, 1, 1, 2, 0, 0, 1), -1)
    rs = g.reshape(x, (h * w, c))
    ctxs = run_graph(tmp_path, g, [tr, sl, tl, cc, pd, pd8, rs], [rand(rng, (n, h, w, c), "i8"), rand(rng, (h, w * c), "i16")])
    for ctx in ctxs.values():
        assert units(ctx) == ["DMA"] * 6 + ["none (alias)"], ctx.report
        commands = ctx.program.commands
        assert any(cmd.opcode.name == "FILL" for cmd in commands)


def test_reshape_is_absorbed_into_operand_chains_and_large_tensors_tile(tmp_path):
    """A RESHAPE between an input RESCALE and an ADD (lstm) is absorbed; a large broadcast ADD on
    tiny needs many tiles, each a MARK, loads, one ELTWISE and one DMA_STORE."""
    rng = seeds.rng(170)
    g = Mlir()
    x = g.input((1, 24, 24, 20), "i32")
    bias = g.input((1, 1, 1, 20), "i32")
    v = g.input((480,), "i8")
    a = g.rescale(g.rescale(v, 1 << 30, 10, 3, 0, "i32"), 1602265296, 32, 0, 0, "i32")
    s = g.binary("add", g.reshape(a, (1, 480)), g.const(rng.integers(-1000, 1000, (1, 480)), "i32"))
    big = g.binary("add", x, bias)
    ctxs = run_graph(tmp_path, g, [s, big], [rand(rng, (1, 24, 24, 20), "i32", -(1 << 28), 1 << 28),
                                            rand(rng, (1, 1, 1, 20), "i32", -(1 << 28), 1 << 28), rand(rng, (480,), "i8")])
    tiny = ctxs["tiny"]
    assert units(tiny) == ["ELTWISE", "ELTWISE"], tiny.report
    tiles = tiny.program.manifest["layers"][1]["tiles"]
    assert len(tiles) >= 24 * 24 * 20 * 4 // (tiny.cfg.output_sram // 2)
    cmds = tiny.program.commands
    for t in tiles[:3]:
        ops = [c.opcode.name for c in cmds[t["commands"][0]:t["commands"][1]]]
        assert ops[0] == "MARK" and ops.count("ELTWISE") == 1 and ops[-1] == "DMA_STORE"
    # the broadcast bias stays in the weight SRAM: loaded once per buffer, not per tile
    first, last = tiles[0]["commands"][0], tiles[-1]["commands"][1]
    loads = sum(1 for c in cmds[first:last] if c.opcode.name == "DMA_LOAD" and c.sub == Sram.WEIGHT)
    assert loads <= 3 < len(tiles)


def test_ops_the_npu_cannot_run_stay_on_the_host_with_a_reason(tmp_path):
    """CLZ (no such ELTWISE operation) and a MUL whose shift is a run-time tensor run on the host
    CPU, the compile report says why; an int16 TABLE with slopes beyond int16 runs on the NPU (the
    REQUIRE concerns the entries used: a condition on the data) and agrees wherever the kernel
    returns a value."""
    rng = seeds.rng(180)
    g = Mlir()
    x = g.input((1, 9), "i32")
    y = g.input((1, 9), "i16")
    sh = g.input((1,), "i8")
    clz = g.op("clz", [x], (1, 9), "i32")
    mul = g.op("mul", [x, x, sh], (1, 9), "i32")
    table = np.zeros(513, np.int64)
    table[400:] = 30000
    table[401:] = -30000                       # slope -60000 between entries 400 and 401 only
    tab = g.table(y, table)
    ctxs = run_graph(tmp_path, g, [clz, mul, tab], [rand(rng, (1, 9), "i32", -1000, 1000),
                                                   rand(rng, (1, 9), "i16", -32768, 0), np.zeros(1, np.int8)],
                     host=("CLZ", "MUL"))
    report = "\n".join(ctxs["tiny"].report)
    assert "HOST CLZ" in report and "HOST MUL" in report and "shift operand is not a constant" in report
    assert "table int16" in report


def test_slices_feeding_elementwise_operands_become_load_views(tmp_path):
    """lstm's gates: a [1, 128] tensor sliced in four, each slice through a TABLE, two through an
    input RESCALE into a MUL: no DMA tile, every slice is an offset in an operand's load."""
    rng = seeds.rng(190)
    g = Mlir()
    x = g.input((2, 128), "i8")
    gates = [g.slice(x, (0, 32 * k), (2, 32)) for k in range(4)]
    sig = [g.table(gates[k], rng.integers(-128, 128, 256)) for k in range(2)]
    prod = g.mul(g.rescale(gates[2], 1 << 30, 30, 5, 0, "i32"), g.rescale(gates[3], 1 << 30, 30, -7, 0, "i32"), 0)
    out = g.rescale(prod, 1518500250, 40, 0, 3, "i8")
    ctxs = run_graph(tmp_path, g, sig + [out], [rand(rng, (2, 128), "i8")])
    for ctx in ctxs.values():
        assert units(ctx) == ["ELTWISE"] * 3, ctx.report
        assert "view +96" in "\n".join(ctx.report)


@pytest.mark.parametrize("case", ["channels", "spatial", "int16_value", "all_pad_tiles"])
def test_pads_feeding_elementwise_operands_are_filled_in_the_loads(tmp_path, case):
    """A PAD that only feeds an elementwise operand (BlazeFace's skip path: the pooled input padded
    with channels, then rescaled into the residual ADD) is no DMA tile of its own: the operand's
    loads FILL the pad and load the real elements around it, and nothing is stored for the padded
    tensor. Bit-exact against the interpreter on tiny (many tiles, boxes cut through the padding)
    and default, with the pad value going through the operand's zero point and rescale."""
    rng = seeds.rng(200 + ["channels", "spatial", "int16_value", "all_pad_tiles"].index(case))
    g = Mlir()
    elem = "i16" if case == "int16_value" else "i8"
    shape, padding, value = {
        "channels": ((1, 9, 7, 20), (0, 0, 0, 0, 0, 0, 0, 12), -3),
        "spatial": ((1, 6, 5, 8), (0, 0, 1, 2, 3, 0, 0, 0), 7),
        "int16_value": ((1, 5, 4, 6), (0, 0, 2, 1, 0, 0, 1, 1), 258),       # bytes 02 01: loaded, not FILLed
        "all_pad_tiles": ((1, 2, 3, 4), (0, 0, 30, 29, 0, 0, 0, 0), -128),  # tiles entirely in the padding
    }[case]
    x = g.input(shape, elem)
    padded = g.pad(x, padding, value)
    y = g.input(padded[1], "i8")
    zx, zy, zo = (0 if elem == "i16" else int(rng.integers(-128, 128)),) + tuple(int(v) for v in rng.integers(-128, 128, 2))
    a = g.rescale(g.rescale(padded, 1 << 30, 16 if elem == "i16" else 10, zx, 0, "i32"),
                  int(rng.integers(1 << 30, 1 << 31)), 33, 0, 0, "i32")
    b = g.rescale(y, 1 << 30, 11, zy, 0, "i32")
    out = g.rescale(g.binary("add", a, b), int(rng.integers(1 << 30, 1 << 31)), 38, 0, zo, "i8")
    ctxs = run_graph(tmp_path, g, [out], [rand(rng, shape, elem), rand(rng, padded[1], "i8")])
    for name, ctx in ctxs.items():
        assert units(ctx) == ["ELTWISE"], ctx.report
        assert f"with {value}]" in "\n".join(ctx.report)
        cmds = ctx.program.commands
        fills = [c for c in cmds if c.opcode == Opcode.FILL]
        loads = [c for c in cmds if c.opcode == Opcode.DMA_LOAD]
        stores = [c for c in cmds if c.opcode == Opcode.DMA_STORE]
        # one store per tile of the result: the padded tensor is never written out
        assert len(stores) == len(ctx.program.manifest["layers"][0]["tiles"]), name
        if case == "int16_value":
            assert not fills and len(loads) > 2 * len(stores)
        else:
            assert fills, name


# ----------------------------------------------------------------------------------------------
# Arm's generated tests (the committed conformance slice) for the ops these units run

import json  # noqa: E402

SLICE = TEST_DATA / "conformance"
UNIT_OPS = ("add", "sub", "mul", "minimum", "maximum", "logical_left_shift", "logical_right_shift",
            "arithmetic_right_shift", "rescale", "table", "clamp", "avg_pool2d", "max_pool2d", "reduce_sum",
            "reduce_max", "reduce_min", "transpose", "slice", "tile", "concat", "pad", "reshape")


@pytest.mark.parametrize("op", UNIT_OPS)
def test_conformance_slice_on_the_npu_units_tiny(op):
    """Every positive test of the op on the 'tiny' configuration (many tiles): no op left to the
    host, golden == Arm's reference model, bit for bit."""
    cfg = load_config("tiny")
    ran = 0
    for desc_file in sorted((SLICE / op).glob("*/desc.json")):
        desc = json.loads(desc_file.read_text())
        if desc["expected_failure"]:
            continue
        t = desc_file.parent
        graph = read_tosa(t / desc["tosa_file"])
        feed = {n: np.load(t / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
        ctx = compile_graph(graph, cfg, input_shapes={n: a.shape for n, a in feed.items()})
        host = [layer["op"] for layer in ctx.program.manifest["layers"] if layer["kind"] == "host"]
        assert not host, f"{t.name}: {ctx.report}"
        got = GoldenModel(ctx.program, cfg).invoke(feed)
        for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
            assert same(got[name], np.load(t / f"expected_{f}")), t.name
        ran += 1
    assert ran >= 2


def test_avg_pool_whose_window_sum_may_leave_int32_stays_on_the_host(tmp_path):
    """The POOL unit accumulates in int32 like TOSA's acc_t; the kernel sums a huge int16 window in
    int64, so such a window stays with the kernel (on the host)."""
    rng = seeds.rng(200)
    g = Mlir()
    x = g.input((1, 182, 182, 1), "i16")
    avg = g.pool("avg_pool2d", x, (182, 182), (1, 1), (0, 0, 0, 0))
    ctxs = run_graph(tmp_path, g, [avg], [rand(rng, (1, 182, 182, 1), "i16")], host=("AVG_POOL2D",),
                     configs=("default",))
    assert "may leave int32" in "\n".join(ctxs["default"].report)


def test_event_hook_sees_every_tile_and_can_substitute():
    """The hook a bench uses to see each compute command: one event per MAC, ELTWISE and POOL tile
    with its tile id, registers and clocks; bytes it returns replace golden's (a corrupted tile
    changes the output)."""
    model = MODELS_DIR / "resnet_pool"
    cfg = load_config("default")
    ctx = compile_graph(read_tosa(model / "model.tosa"), cfg)
    x = np.load(model / "input_0.npy")
    ref = np.load(model / "ref_output_0.npy")
    events = []
    golden = GoldenModel(ctx.program, cfg)
    golden.event_hook = lambda ev: events.append(ev)
    assert same(golden.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
    tiles = [t for layer in ctx.program.manifest["layers"] for t in layer["tiles"] if "unit_command" in t]
    assert [e.tile_id for e in events] == [t["id"] for t in tiles]
    assert [e.command_index for e in events] == [t["unit_command"] for t in tiles]
    vector = [e for e in events if e.opcode.name in ("ELTWISE", "POOL")]
    assert vector and vector[0].opcode.name == "ELTWISE" and vector[0].regs[int(Reg.ELT_COUNT)] == vector[0].result.elements
    # clocks: each tile ends after it starts, later tiles later, all inside the invocation
    assert all(e.start < e.end for e in events) and all(a.end < b.start for a, b in zip(events, events[1:]))
    assert events[-1].end < golden.counters.cycles
    vector_tiles = [t for t in tiles if t.get("unit") in ("ELTWISE", "POOL")]

    def corrupt(ev):
        a, b = ev.output
        return np.zeros(b - a, np.uint8) if ev.tile_id == vector_tiles[0]["id"] else None

    golden = GoldenModel(ctx.program, cfg)
    golden.event_hook = corrupt
    assert not np.array_equal(golden.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
