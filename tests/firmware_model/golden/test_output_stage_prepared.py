"""The output stage prepared once per command (output_stage.prepare_output_stage, what the decoded
program's MAC tiles run) against the spec's reading (output_stage.apply_output_stage): the same
int64 values and the same probe calls, on random registers (every OUT_MODE, each rescale type,
zero points and clamps anywhere in int32, both tables) and on values, multipliers and shifts at
the edges of their fields (shift 0, 1, 31, 32, 62, 63 and negative, negative multipliers, int48
values). Also the MAC's per-block record operands (mac_unit.record_operands) and its accumulator
bound (mac_unit.accumulator_bound) against the wraps they stand for."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import LutMode, OutMode, Reg, Sram, encode_param_records
from firmware_model.golden import mac_unit
from firmware_model.golden.memories import Memories
from firmware_model.golden.output_stage import apply_output_stage, prepare_output_stage, stage_plan
from firmware_model.tosa_ops.dtypes import DType, wrap

CFG = load_config("tiny")


class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, point, *arrays):
        self.seen.append((point, [np.array(a, copy=True) for a in arrays]))


def edge_values(rng, n: int) -> np.ndarray:
    edges = np.array([0, 1, -1, 127, -128, (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 47) - 1, -(1 << 47),
                      (1 << 30), -(1 << 30) - 1], dtype=np.int64)
    v = rng.integers(-(1 << 47), 1 << 47, n, dtype=np.int64)
    small = rng.integers(-(1 << 20), 1 << 20, n, dtype=np.int64)
    v = np.where(rng.random(n) < 0.5, small, v)
    k = min(n, len(edges))
    v[:k] = rng.permutation(edges)[:k]
    return v


def random_case(rng):
    out_mode = int(rng.integers(0, 16))
    regs = {Reg.OUT_MODE: out_mode,
            Reg.RESCALE_DTYPE: int(rng.choice([DType.INT8, DType.INT16, DType.INT32])),
            Reg.OFM_ZP: int(rng.choice([0, -128, 127, int(rng.integers(-(1 << 31), 1 << 31))])) & 0xFFFFFFFF,
            Reg.CLAMP_MIN: int(rng.choice([-(1 << 31), -128, int(rng.integers(-(1 << 31), 1 << 31))])) & 0xFFFFFFFF,
            Reg.CLAMP_MAX: int(rng.choice([(1 << 31) - 1, 127, int(rng.integers(-(1 << 31), 1 << 31))])) & 0xFFFFFFFF,
            Reg.LUT_MODE: int(rng.choice([LutMode.OFF, LutMode.OFF, LutMode.INT8, LutMode.INT16])),
            Reg.LUT_ADDR: int(rng.integers(0, 4))}
    return {int(k): v for k, v in regs.items()}


@pytest.mark.parametrize("seed", range(100))
def test_prepared_stage_equals_apply_output_stage(seed):
    rng = np.random.default_rng(seed)
    regs = random_case(rng)
    mem = Memories(CFG)
    mem.sram[Sram.LUT][:] = rng.integers(0, 256, len(mem.sram[Sram.LUT]), dtype=np.uint8)
    plan = stage_plan(CFG, regs, "MAC")
    channels = int(rng.integers(1, 9))
    value = edge_values(rng, 6 * channels).reshape(6, channels)
    if OutMode.SCALE32 in OutMode(regs[Reg.OUT_MODE]) and rng.random() < 0.5:
        value = wrap(value, 32)
    multiplier = rng.integers(-(1 << 31), 1 << 31, channels, dtype=np.int64)
    multiplier[0] = (1 << 31) - 1
    shift = rng.choice(np.array([0, 1, 2, 31, 32, 33, 62, 63, -1, -64, 40], dtype=np.int64), channels)
    pa, pb = Recorder(), Recorder()
    want, _ = apply_output_stage(mem, regs, value, multiplier, shift, unit="MAC", probe=pa, plan=plan)
    stage = prepare_output_stage(regs, plan, "MAC")
    before = value.copy()
    got = stage(mem, value, multiplier, shift, pb)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert np.array_equal(value, before)            # the caller's values are left as they were
    assert [p for p, _ in pa.seen] == [p for p, _ in pb.seen]
    assert all(np.array_equal(u, v) for (_, x), (_, y) in zip(pa.seen, pb.seen) for u, v in zip(x, y))
    # wrapped=True: values already int32 (what a MAC group hands over), overwritten at will
    v32 = wrap(value, 32)
    want32, _ = apply_output_stage(mem, regs, v32, multiplier, shift, unit="MAC", plan=plan)
    assert np.array_equal(stage(mem, v32.copy(), multiplier, shift, None, wrapped=True), want32)


@pytest.mark.parametrize("seed", range(200))
def test_prepared_stage_clips(seed):
    """The rescale's saturation and the clamp made one clip where their ranges overlap (and kept
    apart where CLAMP_MIN is above the rescale type's maximum): clamps drawn around the rescale
    type's range, including empty ones (CLAMP_MIN > CLAMP_MAX)."""
    rng = np.random.default_rng(1000 + seed)
    rdt = DType(int(rng.choice([DType.INT8, DType.INT16, DType.INT32])))
    out_mode = int(OutMode.RESCALE | OutMode.SCALE32 | (OutMode.UNSIGNED_OUT if rng.random() < 0.3 else 0)
                   | (OutMode.DOUBLE_ROUND if rng.random() < 0.3 else 0))
    if rng.random() < 0.2:
        out_mode = int(rng.integers(0, 16))
    near = np.array([rdt.min, rdt.max, rdt.umax, 0, -1, 1, rdt.min - 1, rdt.max + 1, -(1 << 31), (1 << 31) - 1])
    pick = lambda: int(np.clip(rng.choice(near) + rng.integers(-2, 3), -(1 << 31), (1 << 31) - 1))  # noqa: E731
    regs = {int(Reg.OUT_MODE): out_mode, int(Reg.RESCALE_DTYPE): int(rdt), int(Reg.OFM_ZP): 0,
            int(Reg.CLAMP_MIN): pick() & 0xFFFFFFFF, int(Reg.CLAMP_MAX): pick() & 0xFFFFFFFF}
    mem = Memories(CFG)
    plan = stage_plan(CFG, regs, "MAC")
    value = edge_values(rng, 40).reshape(5, 8)
    multiplier = rng.integers(0, 1 << 31, 8, dtype=np.int64)
    shift = rng.choice(np.array([1, 2, 20, 31, 32, 40], dtype=np.int64), 8)
    want, _ = apply_output_stage(mem, regs, value, multiplier, shift, unit="MAC", plan=plan)
    stage = prepare_output_stage(regs, plan, "MAC")
    assert np.array_equal(stage(mem, value, multiplier, shift), want)


@pytest.mark.parametrize("ifm_dtype", [DType.INT8, DType.INT16])
@pytest.mark.parametrize("out_mode", [OutMode.RESCALE | OutMode.SCALE32,
                                      OutMode.RESCALE | OutMode.SCALE32 | OutMode.DOUBLE_ROUND, OutMode.RESCALE, 0])
def test_record_operands(ifm_dtype, out_mode):
    """The block's bias (wrapped to int32 for int8 inputs) and apply_scale_32's operands are those
    of the records' decode; a prepared stage given them computes what it computes without."""
    rng = np.random.default_rng(int(out_mode) * 3 + int(ifm_dtype))
    n = 7
    bias = rng.integers(-(1 << 47), 1 << 47, n)
    multiplier = rng.integers(-(1 << 31), 1 << 31, n)
    shift = rng.choice(np.array([0, 1, 31, 32, 40, 62, 63, -3]), n)
    raw = np.frombuffer(encode_param_records(bias, multiplier, shift), np.uint8)
    regs = {int(Reg.OUT_MODE): int(out_mode), int(Reg.RESCALE_DTYPE): int(DType.INT8)}
    plan = stage_plan(CFG, regs, "MAC")
    b, m, s, ops = mac_unit.record_operands(raw, ifm_dtype, plan)
    assert np.array_equal(b, bias if ifm_dtype == DType.INT16 else wrap(bias, 32))
    assert np.array_equal(m, multiplier) and np.array_equal(s, shift)
    out_mode = OutMode(out_mode)
    assert (ops is not None) == (OutMode.SCALE32 in out_mode and OutMode.RESCALE in out_mode)
    mem = Memories(CFG)
    value = edge_values(rng, 4 * n).reshape(4, n)
    stage = prepare_output_stage(regs, plan, "MAC")
    assert np.array_equal(stage(mem, value, m, s, None, ops), stage(mem, value, m, s, None, None))


@pytest.mark.parametrize("ifm_dtype", [DType.INT8, DType.INT16])
def test_accumulator_bound(ifm_dtype):
    """The bound is reached: a sum of k products of extreme inputs and weights equals it, so a
    bound below 2^47 (2^31) proves the 48-bit (32-bit) wrap changes nothing."""
    for ifm_zp, wgt_zp in ((0, 0), (-128, 127), (127, -128), (5, -3)):
        if ifm_dtype == DType.INT16 and ifm_zp:
            continue
        k = 9
        lo, hi = (-32768, 32767) if ifm_dtype == DType.INT16 else (-128, 127)
        best = max(abs(x - ifm_zp) * abs(w - wgt_zp) for x in (lo, hi) for w in (-128, 127))
        assert mac_unit.accumulator_bound(k, ifm_dtype, ifm_zp, wgt_zp) == k * best
