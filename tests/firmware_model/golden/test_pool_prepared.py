"""The POOL command prepared once (pool_unit.prepare_pool, what the decoded program runs) against
execute_pool: the same output SRAM and the same probe calls, on random commands of every mode
(MAX, MIN, AVG, SUM) and type, with padding, strides, overlapping input windows and output
elements that share bytes (the store's fallback), zero points at their extremes (the SUM/AVG
wraps), output-stage rescales, tables and clamps, and a second run (what the first one kept)."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import ELEMENT_BYTES, LutMode, PoolMode, Reg, Sram
from firmware_model.errors import GoldenModelError
from firmware_model.golden.memories import Memories
from firmware_model.golden.pool_unit import execute_pool, pool_plan, prepare_pool
from firmware_model.tosa_ops.dtypes import DType

CFG = load_config("tiny")


def _pick(rng, options):
    return options[int(rng.integers(0, len(options)))]


class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, point, *arrays):
        self.seen.append((point, [np.array(a, dtype=np.int64, copy=True) for a in arrays]))


def _clone(mem: Memories) -> Memories:
    out = Memories(CFG)
    for s, a in mem.sram.items():
        out.sram[s][:] = a
    return out


def random_case(rng):
    sub = int(_pick(rng, list(PoolMode)))
    in_dt = _pick(rng, [DType.INT8, DType.INT16, DType.INT32])
    out_dt = _pick(rng, [DType.INT8, DType.INT16, DType.INT32, DType.INT48])
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    oh, ow, oc = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
    pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
    ih = max(1, (oh - 1) * sh + kh - pt - int(rng.integers(0, 2)))
    iw = max(1, (ow - 1) * sw + kw - pl - int(rng.integers(0, 2)))
    isz, osz = ELEMENT_BYTES[in_dt], ELEMENT_BYTES[out_dt]
    pix = oc * isz * int(rng.integers(1, 3))
    opix = _pick(rng, [oc * osz, oc * osz * 2, osz])          # osz: output elements share bytes
    edge = int(_pick(rng, [0, 0, -128, 127, -32768, 32767, int(rng.integers(-(1 << 31), 1 << 31))]))
    regs = {
        Reg.IFM_ADDR: int(rng.integers(0, 4)) * isz, Reg.IFM_ROW_STRIDE: iw * pix, Reg.IFM_PIX_STRIDE: pix,
        Reg.IFM_DTYPE: int(in_dt), Reg.IFM_ZP: edge & 0xFFFFFFFF,
        Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sh, Reg.STRIDE_W: sw,
        Reg.POOL_PAD_TOP: pt, Reg.POOL_PAD_LEFT: pl, Reg.POOL_IN_H: ih, Reg.POOL_IN_W: iw,
        Reg.OFM_ADDR: int(rng.integers(0, 4)) * osz, Reg.OFM_ROW_STRIDE: ow * opix + _pick(rng, [0, osz]),
        Reg.OFM_PIX_STRIDE: opix, Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: oc, Reg.OFM_DTYPE: int(out_dt),
        Reg.OFM_ZP: int(_pick(rng, [0, 0, 5, -128, 127])) & 0xFFFFFFFF,
        Reg.PARAM_ADDR: int(rng.integers(0, 3)), Reg.OUT_MODE: int(rng.integers(0, 16)) if rng.random() < 0.5 else 0,
        Reg.RESCALE_DTYPE: int(_pick(rng, [DType.INT8, DType.INT16, DType.INT32])),
        Reg.CLAMP_MIN: int(_pick(rng, [-(1 << 31), -128, -100, 0])) & 0xFFFFFFFF,
        Reg.CLAMP_MAX: int(_pick(rng, [(1 << 31) - 1, 127, 100, 30000])) & 0xFFFFFFFF,
        Reg.LUT_MODE: int(_pick(rng, [LutMode.OFF, LutMode.OFF, LutMode.OFF, LutMode.INT8, LutMode.INT16])),
        Reg.LUT_ADDR: int(rng.integers(0, 3)),
    }
    return {int(k): v for k, v in regs.items()}, sub


def random_memories(rng) -> Memories:
    mem = Memories(CFG)
    for s in (Sram.INPUT, Sram.PARAM, Sram.LUT, Sram.OUTPUT):
        mem.sram[s][:] = rng.integers(0, 256, len(mem.sram[s]), dtype=np.uint8)
    if rng.random() < 0.4:                               # extremes: every byte 0x80 or 0x7F
        mem.sram[Sram.INPUT][:] = rng.choice(np.array([0x80, 0x7F, 0xFF, 0x00], dtype=np.uint8),
                                            len(mem.sram[Sram.INPUT]))
    return mem


@pytest.mark.parametrize("seed", range(40))
def test_prepared_pool_equals_execute_pool(seed):
    rng = np.random.default_rng(seed)
    done = 0
    while done < 25:
        regs, sub = random_case(rng)
        try:
            plan = pool_plan(CFG, regs, sub)
        except GoldenModelError:
            continue
        done += 1
        mem = random_memories(rng)
        want, got = _clone(mem), _clone(mem)
        pa, pb = Recorder(), Recorder()
        execute_pool(CFG, want, regs, sub, pa, plan)
        run = prepare_pool(CFG, regs, sub, plan)
        run(got, pb)
        assert np.array_equal(got.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT]), (regs, sub)
        assert [p for p, _ in pa.seen] == [p for p, _ in pb.seen]
        for (_, x), (_, y) in zip(pa.seen, pb.seen):
            assert all(np.array_equal(u, v) for u, v in zip(x, y)), (regs, sub)
        again = _clone(mem)
        run(again, None)
        assert np.array_equal(again.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT]), (regs, sub)


def _planned_cases(n: int = 400):
    """(registers, mode, plan) of the random cases pool_plan accepts, among the first `n`."""
    rng = np.random.default_rng(0)
    for _ in range(n):
        regs, sub = random_case(rng)
        try:
            plan = pool_plan(CFG, regs, sub)
        except GoldenModelError:
            continue
        yield regs, sub, plan


def test_cases_reach_every_mode_padding_and_shared_output_bytes():
    """The random cases above do meet each mode, windows with padding and outputs whose
    elements share bytes (so the test above exercises each branch)."""
    seen = set()
    for regs, sub, plan in _planned_cases():
        seen.add(("mode", sub))
        rows_real = (plan.rows >= 0) & (plan.rows < regs[int(Reg.POOL_IN_H)])
        if not rows_real.all():
            seen.add("padding")
        n = regs[int(Reg.OFM_C)] * ELEMENT_BYTES[plan.out_dtype]
        if regs[int(Reg.OFM_W)] > 1 and regs[int(Reg.OFM_PIX_STRIDE)] < n:
            seen.add("shared")
    assert {("mode", int(m)) for m in PoolMode} | {"padding", "shared"} <= seen


# ---- the Python-integer form of a small box (pool_unit.prepare_pool_small) ----------------------

def test_random_cases_reach_the_small_form_and_the_vector_form():
    """The random cases of test_prepared_pool_equals_execute_pool take both of prepare_pool's
    forms (so that test compares each with execute_pool)."""
    forms = set()
    for regs, sub, plan in _planned_cases():
        forms.add(prepare_pool(CFG, regs, sub, plan).__qualname__.split(".")[0])
    assert forms == {"prepare_pool", "prepare_pool_small"}


class FailureLog:
    """A RequireMonitor's record() as the probe calls it: every failure, in order."""

    def __init__(self):
        self.failures = []

    def record(self, index, rank, error):
        self.failures.append((index, rank, str(error)))


def _reduce_sum_case(rng):
    """A SUM (or MAX) over a column box (POOL_IN_W 1, as a REDUCE_SUM's window) of int32 values at
    and near the partial sums' int32 edges, with a REDUCE_SUM check of the box's shape (or, now
    and then, of another shape: the check raises)."""
    ih, oc = int(rng.integers(1, 9)), int(rng.integers(1, 4))
    dims = _pick(rng, [[ih], [ih], [1, ih]] + ([[2, ih // 2]] if ih % 2 == 0 else []) + [[ih + 1]])
    axis = int(rng.integers(0, len(dims)))
    before = [a for a in range(len(dims)) if a != axis and rng.random() < 0.5]
    zp = int(_pick(rng, [0, 0, 5, -(1 << 20)]))
    checks = {"box": [dict(kind="reduce_sum", dims=dims, axis=axis, before=before, input_zp=zp,
                           index=int(rng.integers(0, 3)), op="REDUCE_SUM", where="op #1")]}
    regs = {
        Reg.IFM_ADDR: 4 * int(rng.integers(0, 4)), Reg.IFM_ROW_STRIDE: oc * 4 * int(rng.integers(1, 3)),
        Reg.IFM_PIX_STRIDE: oc * 4, Reg.IFM_DTYPE: int(DType.INT32), Reg.IFM_ZP: zp & 0xFFFFFFFF,
        Reg.KERNEL_H: ih, Reg.KERNEL_W: 1, Reg.STRIDE_H: 1, Reg.STRIDE_W: 1, Reg.POOL_PAD_TOP: 0,
        Reg.POOL_PAD_LEFT: 0, Reg.POOL_IN_H: ih, Reg.POOL_IN_W: 1, Reg.OFM_ADDR: 0, Reg.OFM_ROW_STRIDE: oc * 4,
        Reg.OFM_PIX_STRIDE: oc * 4, Reg.OFM_H: 1, Reg.OFM_W: 1, Reg.OFM_C: oc, Reg.OFM_DTYPE: int(DType.INT32),
        Reg.CLAMP_MIN: 0x80000000, Reg.CLAMP_MAX: 0x7FFFFFFF,
    }
    mem = random_memories(rng)
    top = 1 << 31
    values = rng.choice(np.array([top - 1, -top, top // 2, -(top // 2), top // 8, 1, -1, 0], dtype=np.int64),
                        64 * 4).astype("<i4").view(np.uint8)
    if rng.random() < 0.5:
        values = rng.integers(-1000, 1000, 64 * 4).astype("<i4").view(np.uint8)
    mem.sram[Sram.INPUT][:len(values)] = values
    return {int(k): v for k, v in regs.items()}, int(_pick(rng, [PoolMode.SUM, PoolMode.SUM, PoolMode.MAX])), \
        checks, mem


def _outcome(run, mem, probe):
    try:
        run(mem, probe)
    except RuntimeError as e:               # check_reduce_sum on a box not of its window's shape
        return "raised", str(e)
    return "ran", mem.sram[Sram.OUTPUT].tobytes()


def test_small_form_reports_the_monitors_failures():
    """The small form with the monitor's Probe (which it calls only when a check may fail) records
    the failures execute_pool's probe records, raises where it raises, and stores the same bytes."""
    from firmware_model.golden.pool_unit import prepare_pool_small
    from firmware_model.golden.require_monitor import Probe

    rng = np.random.default_rng(5)
    met = set()
    for _ in range(600):
        regs, sub, checks, mem = _reduce_sum_case(rng)
        plan = pool_plan(CFG, regs, sub)
        run = prepare_pool(CFG, regs, sub, plan)
        assert run.__qualname__.startswith("prepare_pool_small")
        la, lb = FailureLog(), FailureLog()
        want = _outcome(lambda m, p: execute_pool(CFG, m, regs, sub, p, plan), _clone(mem), Probe(la, checks))
        got = _outcome(run, _clone(mem), Probe(lb, checks))
        assert want == got and la.failures == lb.failures, (regs, sub, checks)
        met.add("raised" if want[0] == "raised" else "failed" if la.failures else "passed")
    assert met == {"raised", "failed", "passed"}
