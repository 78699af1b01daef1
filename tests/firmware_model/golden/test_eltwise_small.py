"""A short vector's ELTWISE command in Python integers (eltwise_unit.prepare_eltwise_small, what
the decoded program runs for ELT_COUNT <= SMALL_COUNT) against the spec's reading
(execute_eltwise): the same output SRAM bytes, the same probe calls with the same values for any
probe, and the same REQUIRE failures recorded for the monitor's Probe (whose calls the small path
makes only where a check may fail). Random registers over every operation, operand type, mode
flag, output stage (both rescales, both tables, clamps) and register edges; random SRAM bytes
with int32/int48 extremes planted (a MUL of -2^31 by -2^31 with ELT_SHIFT 63 overflows numpy's
int64, which the small path reproduces)."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import ELEMENT_BYTES, EltMode, EltOp, LutMode, Reg, Sram
from firmware_model.errors import GoldenModelError
from firmware_model.golden import eltwise_unit
from firmware_model.golden.eltwise_unit import (SMALL_COUNT, eltwise_plan, execute_eltwise, prepare_eltwise,
                                                prepare_eltwise_small, prepare_eltwise_vector)
from firmware_model.golden.memories import Memories
from firmware_model.golden.require_monitor import Probe
from firmware_model.tosa_ops.dtypes import DType

CFG = load_config("tiny")
TYPES = [DType.INT8, DType.INT16, DType.INT32, DType.INT48]
EDGE32 = [0, 1, -1, 127, -128, 32767, -32768, (1 << 31) - 1, -(1 << 31), 1 << 30, -(1 << 30)]


def _pick(rng, options):
    return options[int(rng.integers(0, len(options)))]


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def random_regs(rng, max_count: int = SMALL_COUNT) -> tuple[dict, int]:
    sub = int(_pick(rng, list(EltOp)))
    a_dt = _pick(rng, TYPES[:3] if sub in eltwise_unit.SHIFT_OPS else TYPES)
    b_dt = _pick(rng, TYPES)
    mode = int(rng.integers(0, 1 << 9))
    if a_dt not in (DType.INT8, DType.INT16):
        mode &= ~int(EltMode.A_UNSIGNED)
    if b_dt not in (DType.INT8, DType.INT16):
        mode &= ~int(EltMode.B_UNSIGNED)
    count = int(rng.integers(0, max_count + 1))
    out_dt = _pick(rng, TYPES)
    edge = lambda: int(_pick(rng, EDGE32 + [int(rng.integers(-(1 << 31), 1 << 31))]))   # noqa: E731
    small_zp = lambda: int(_pick(rng, [0, 0, 1, -1, 128, -128, 127, edge()]))            # noqa: E731
    regs = {
        Reg.ELT_A_ADDR: int(rng.integers(0, 8)) * ELEMENT_BYTES[a_dt],
        Reg.ELT_B_ADDR: int(rng.integers(0, 8)) * ELEMENT_BYTES[b_dt],
        Reg.ELT_OUT_ADDR: int(rng.integers(0, 8)) * ELEMENT_BYTES[out_dt],
        Reg.ELT_COUNT: count, Reg.ELT_A_DTYPE: int(a_dt), Reg.ELT_B_DTYPE: int(b_dt), Reg.ELT_MODE: mode,
        Reg.ELT_A_ZP: _u32(small_zp()), Reg.ELT_B_ZP: _u32(small_zp()),
        Reg.ELT_A_MULT: int(rng.integers(0, 1 << 32)), Reg.ELT_B_MULT: int(rng.integers(0, 1 << 32)),
        Reg.ELT_A_SHIFT: int(_pick(rng, [0, 1, 2, 30, 31, 32, 33, 62, 63, 64, 100])),
        Reg.ELT_B_SHIFT: int(_pick(rng, [0, 1, 2, 30, 31, 32, 33, 62, 63, 64, 100])),
        Reg.ELT_A_LSHIFT: int(_pick(rng, [0, 0, 0, 1, 12, 31, 32, 45])),
        Reg.ELT_B_LSHIFT: int(_pick(rng, [0, 0, 0, 1, 12, 31, 32, 45])),
        Reg.ELT_SHIFT: int(_pick(rng, [0, 0, 1, 15, 31, 32, 62, 63, 64])),
        Reg.ELT_CHANNELS: int(rng.integers(0, count + 3)),
        Reg.OFM_DTYPE: int(out_dt), Reg.OFM_ZP: _u32(small_zp()), Reg.PARAM_ADDR: int(rng.integers(0, 4)),
        Reg.OUT_MODE: int(rng.integers(0, 16)),
        Reg.RESCALE_DTYPE: int(_pick(rng, [DType.INT8, DType.INT16, DType.INT32])),
        Reg.CLAMP_MIN: _u32(_pick(rng, [-(1 << 31), -128, -32768, 0, edge()])),
        Reg.CLAMP_MAX: _u32(_pick(rng, [(1 << 31) - 1, 127, 32767, 255, edge()])),
        Reg.LUT_MODE: int(_pick(rng, [LutMode.OFF, LutMode.OFF, LutMode.INT8, LutMode.INT16])),
        Reg.LUT_ADDR: int(rng.integers(0, 3)),
    }
    return {int(k): v for k, v in regs.items()}, sub


def random_memories(rng) -> Memories:
    mem = Memories(CFG)
    for s in (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.LUT, Sram.OUTPUT):
        mem.sram[s][:] = rng.integers(0, 256, len(mem.sram[s]), dtype=np.uint8)
    for s in (Sram.INPUT, Sram.WEIGHT):             # extremes: int32 and int48 edges, small values
        if rng.random() < 0.6:
            kind = rng.random()
            n = 64
            if kind < 0.4:
                vals = rng.choice(np.array(EDGE32, dtype=np.int64), n).astype("<i4").view(np.uint8)
            elif kind < 0.7:
                vals = rng.choice(np.array([-(1 << 47), (1 << 47) - 1, -(1 << 31), 1 << 40, 5], dtype=np.int64),
                                  n // 2).astype("<i8").view(np.uint8)
            else:
                vals = rng.integers(-4, 5, n).astype("<i4").view(np.uint8)
            mem.sram[s][:len(vals)] = vals
    return mem


def clone(mem: Memories) -> Memories:
    out = Memories(CFG)
    for s, a in mem.sram.items():
        out.sram[s][:] = a
    return out


class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, point, *arrays):
        self.seen.append((point, [np.array(a, dtype=np.int64, copy=True).reshape(-1) for a in arrays]))


class FailureLog:
    """A RequireMonitor's record() as the probe calls it: every failure, in order."""

    def __init__(self):
        self.failures = []

    def record(self, index, rank, error):
        self.failures.append((index, rank, str(error)))


def random_checks(rng) -> dict:
    """The monitor's checks at every point the unit shows (require_monitor.CHECKS' forms)."""
    points: dict[str, list] = {}
    k = 0

    def add(point, **c):
        nonlocal k
        c.update(index=int(rng.integers(0, 5)), op=c["kind"].upper(), where=f"op #{k}")
        points.setdefault(point, []).append(c)
        k += 1

    for _ in range(int(rng.integers(1, 5))):
        kind = _pick(rng, ["add", "sub", "mul", "shift", "rescale32", "rescale32c", "rescale16", "table16"])
        if kind in ("add", "sub"):
            add("op", kind=kind)
        elif kind == "mul":
            add("op", kind="mul", shift=int(_pick(rng, [0, 1, 15, 31, 40, 62, 63])))
        elif kind == "shift":
            add("op", kind="shift", bits=int(_pick(rng, [8, 16, 32])), dtype="INT32")
        elif kind == "table16":
            add("lut", kind="table16", bad=sorted(set(rng.integers(0, 513, 40).tolist())))
        else:
            c = dict(kind="rescale", scale32=kind != "rescale16", input_zp=int(_pick(rng, [0, 0, 3, -128])),
                     output_zp=int(_pick(rng, [0, 5])), out_dtype=_pick(rng, ["INT8", "INT16", "INT32"]),
                     double_round=bool(rng.random() < 0.5), output_unsigned=False)
            point = _pick(rng, ["stage", "A0", "A1", "B0", "B1"])
            if kind == "rescale32c" or point != "stage":      # an operand's check has its own scale
                c.update(multiplier=int(rng.integers(1, 1 << 31)), shift=int(_pick(rng, [0, 1, 10, 31, 40, 63, 70])))
            add(point, **c)
    return points


def cases(seed: int, n: int, max_count: int = SMALL_COUNT):
    rng = np.random.default_rng(seed)
    made = 0
    while made < n:
        regs, sub = random_regs(rng, max_count)
        try:
            plan = eltwise_plan(CFG, regs, sub)
        except GoldenModelError:
            continue
        made += 1
        yield rng, regs, sub, plan


PREPARED = {"small": (prepare_eltwise_small, SMALL_COUNT), "vector": (prepare_eltwise_vector, 40),
            "unfused": (lambda *a: prepare_eltwise_small(*a, fused=False), SMALL_COUNT)}


@pytest.mark.parametrize("form", ["small", "vector", "unfused"])
@pytest.mark.parametrize("seed", range(30))
def test_prepared_forms_equal_execute_eltwise(form, seed):
    """Both prepared forms (the vector form on up to 40 elements: its ranges decide which wraps
    it leaves out) against the spec's reading."""
    prepare, max_count = PREPARED[form]
    for rng, regs, sub, plan in cases(seed, 40, max_count):
        mem = random_memories(rng)
        want_mem, got_mem = clone(mem), clone(mem)
        pa, pb = Recorder(), Recorder()
        execute_eltwise(CFG, want_mem, regs, sub, pa, plan)
        run = prepare(CFG, regs, sub, plan)
        run(got_mem, pb)
        again = clone(mem)                          # a second run: what the first one kept
        run(again, None)
        assert np.array_equal(again.sram[Sram.OUTPUT], want_mem.sram[Sram.OUTPUT]), (regs, sub)
        assert np.array_equal(got_mem.sram[Sram.OUTPUT], want_mem.sram[Sram.OUTPUT]), (regs, sub)
        assert [p for p, _ in pa.seen] == [p for p, _ in pb.seen]
        for (_, x), (_, y) in zip(pa.seen, pb.seen):
            assert len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y)), (regs, sub)


@pytest.mark.parametrize("form", ["small", "vector", "unfused"])
@pytest.mark.parametrize("seed", range(30))
def test_prepared_forms_report_the_monitors_failures(form, seed):
    prepare, max_count = PREPARED[form]
    for rng, regs, sub, plan in cases(100 + seed, 40, max_count):
        mem = random_memories(rng)
        checks = random_checks(rng)
        la, lb = FailureLog(), FailureLog()
        execute_eltwise(CFG, clone(mem), regs, sub, Probe(la, checks), plan)
        prepare(CFG, regs, sub, plan)(clone(mem), Probe(lb, checks))
        assert la.failures == lb.failures, (regs, sub, checks)


def test_failures_are_met():
    """The random cases reach failing and passing checks of each kind (the test above can fail)."""
    failed, passed = set(), set()
    for seed in range(30):
        for rng, regs, sub, plan in cases(100 + seed, 40):
            mem = random_memories(rng)
            checks = random_checks(rng)
            log = FailureLog()
            execute_eltwise(CFG, clone(mem), regs, sub, Probe(log, checks), plan)
            where = {e[2].split("(")[1].split(")")[0] for e in log.failures}
            for cs in checks.values():
                for c in cs:
                    (failed if c["where"] in where else passed).add(c["kind"])
    assert {"add", "sub", "mul", "shift", "rescale"} <= failed
    assert {"add", "sub", "mul", "shift", "rescale"} <= passed


def test_prepare_eltwise_takes_the_small_path_up_to_small_count():
    rng = np.random.default_rng(7)
    seen = set()
    while len(seen) < 2:
        regs, sub = random_regs(rng)
        regs[int(Reg.ELT_COUNT)] = int(rng.integers(SMALL_COUNT - 2, SMALL_COUNT + 3))
        try:
            plan = eltwise_plan(CFG, regs, sub)
        except GoldenModelError:
            continue
        small = plan.count <= SMALL_COUNT
        name = prepare_eltwise(CFG, regs, sub, plan).__qualname__
        assert name.startswith(("prepare_eltwise_small", "_fused_small")) == small
        seen.add(small)


def _directed(sub: EltOp, a_dt: DType, b_dt: DType, a_values, b_values, extra=None) -> tuple[dict, Memories]:
    regs = {int(Reg.ELT_A_ADDR): 0, int(Reg.ELT_B_ADDR): 0, int(Reg.ELT_OUT_ADDR): 0,
            int(Reg.ELT_COUNT): len(a_values), int(Reg.ELT_A_DTYPE): int(a_dt), int(Reg.ELT_B_DTYPE): int(b_dt),
            int(Reg.OFM_DTYPE): int(DType.INT32), int(Reg.CLAMP_MIN): _u32(-(1 << 31)),
            int(Reg.CLAMP_MAX): (1 << 31) - 1}
    regs.update({int(k): v for k, v in (extra or {}).items()})
    mem = Memories(CFG)
    view = "<i8" if a_dt == DType.INT48 else f"<i{ELEMENT_BYTES[a_dt]}"
    raw = np.array(a_values, dtype=np.int64).astype(view).view(np.uint8)
    mem.sram[Sram.INPUT][:len(raw)] = raw
    view = "<i8" if b_dt == DType.INT48 else f"<i{ELEMENT_BYTES[b_dt]}"
    raw = np.array(b_values, dtype=np.int64).astype(view).view(np.uint8)
    mem.sram[Sram.WEIGHT][:len(raw)] = raw
    return regs, mem


def test_mul_rounding_wraps_as_int64():
    """MUL with ELT_SHIFT 63 of -2^31 by -2^31: the product plus the rounding bit is 2^63, which
    numpy's int64 wraps to -2^63 (the datapath's arithmetic); the small path wraps it too."""
    edge = [-(1 << 31), -(1 << 31), (1 << 31) - 1, 5]
    regs, mem = _directed(EltOp.MUL, DType.INT32, DType.INT32, edge, edge, {Reg.ELT_SHIFT: 63})
    plan = eltwise_plan(CFG, regs, EltOp.MUL)
    want, got = clone(mem), clone(mem)
    execute_eltwise(CFG, want, regs, EltOp.MUL, None, plan)
    prepare_eltwise_small(CFG, regs, EltOp.MUL, plan)(got, None)
    assert np.array_equal(got.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT])


def test_mul_check_on_operands_wider_than_int32():
    """check_mul on int48 operands whose product leaves int64 (numpy wraps it): the small path
    hands such values to the monitor's own check instead of deciding in Python integers."""
    a = [1 << 40, -(1 << 40), 1 << 33, 3]
    b = [1 << 40, 1 << 41, -(1 << 33), 7]
    regs, mem = _directed(EltOp.MUL, DType.INT48, DType.INT48, a, b)
    plan = eltwise_plan(CFG, regs, EltOp.MUL)
    checks = {"op": [dict(kind="mul", shift=10, index=0, op="MUL", where="op #0")]}
    la, lb = FailureLog(), FailureLog()
    execute_eltwise(CFG, clone(mem), regs, EltOp.MUL, Probe(la, checks), plan)
    prepare_eltwise_small(CFG, regs, EltOp.MUL, plan)(clone(mem), Probe(lb, checks))
    assert la.failures == lb.failures


@pytest.mark.parametrize("kind", ["add", "sub", "mul", "shift", "rescale32", "rescale32c"])
def test_fast_check_tests_agree_with_the_monitors_checks(kind):
    """eltwise_unit._passes (what lets the small form skip the probe) against the monitor's own
    check on values at and around each rule's edges: where the test says the check passes, the
    check passes, and where the check passes the test says so (but for the mul check's int64
    guard, which hands wide operands to the check)."""
    from firmware_model.golden.eltwise_unit import _passes
    from firmware_model.golden.require_monitor import CHECKS

    rng = np.random.default_rng(hash(kind) % 1000)
    edges = np.array([0, 1, -1, (1 << 31) - 1, -(1 << 31), 1 << 31, -(1 << 31) - 1, (1 << 30), 1 << 29,
                      (1 << 29) - 1, -(1 << 29), -(1 << 29) - 1, 31, 32, 7, 8, 15, 16, 1 << 40, 3, -128],
                     dtype=np.int64)
    agree = 0
    for _ in range(3000):
        c = {"kind": kind.replace("32c", "").replace("32", ""), "index": 0, "op": "X", "where": ""}
        if kind == "mul":
            c["shift"] = int(rng.choice([1, 2, 15, 31, 40, 62]))
        elif kind == "shift":
            c.update(bits=int(rng.choice([8, 16, 32])), dtype="INT32")
        elif kind.startswith("rescale"):
            c.update(scale32=True, input_zp=int(rng.choice([0, 3, -128, 1 << 20])), output_zp=0,
                     out_dtype="INT32", double_round=False, output_unsigned=False)
            if kind == "rescale32c":
                c.update(multiplier=1 << 30, shift=int(rng.choice([1, 2, 10, 30, 31, 40, 63])))
        n = int(rng.integers(1, 4))
        pick = lambda: [int(v) + int(rng.integers(-2, 3)) for v in rng.choice(edges, n)]      # noqa: E731
        if kind.startswith("rescale"):
            lists = (pick(), [1 << 30] * n, [int(s) for s in rng.choice([1, 2, 10, 30, 31, 63, 64, 0], n)])
        else:
            lists = (pick(), pick())
        test = _passes(c)
        real_ok = CHECKS[c["kind"]](c, *[np.array(x, dtype=np.int64) for x in lists]) is None
        if test is None:
            continue
        fast_ok = test(lists)
        if fast_ok:
            assert real_ok, (c, lists)
        elif kind != "mul" or (all(abs(v) < 1 << 31 for v in lists[0] + lists[1])):
            assert not real_ok, (c, lists)
        agree += 1
    assert agree > 1000


@pytest.mark.parametrize("seed", range(30))
def test_fused_form_equals_execute_eltwise(seed):
    """The small form's generated function (eltwise_unit._fused_small) on its own: without a
    probe it stores what execute_eltwise stores; with the monitor's Probe, where it does not hand
    the command back (False: a check may fail), it stores the same and the spec's reading records
    no failure. Both outcomes are met (the test above would not see the fused function's
    mistakes where it always handed back)."""
    taken = handed = plain = 0
    for rng, regs, sub, plan in cases(200 + seed, 40):
        mem = random_memories(rng)
        checks = random_checks(rng)
        want = clone(mem)
        log = FailureLog()
        execute_eltwise(CFG, want, regs, sub, Probe(log, checks), plan)
        run = prepare_eltwise_small(CFG, regs, sub, plan)
        if not hasattr(run, "fused"):
            assert plan.count == 0 or plan.stage.rescale
            continue
        got = clone(mem)
        assert run.fused(got) is True
        assert np.array_equal(got.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT]), (regs, sub)
        plain += 1
        f = run.fused_for(Probe(FailureLog(), checks))
        if f is None:
            continue
        got = clone(mem)
        if f(got):
            assert np.array_equal(got.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT]), (regs, sub, checks)
            assert log.failures == [], (regs, sub, checks)
            taken += 1
        else:
            assert np.array_equal(got.sram[Sram.OUTPUT], mem.sram[Sram.OUTPUT])     # nothing stored
            handed += 1
    assert plain >= 20 and taken >= 3 and handed >= 3, (plain, taken, handed)
