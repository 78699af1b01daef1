"""Command rules (firmware_model/arch/checks.py): one table, two evaluators that must agree.

The golden model evaluates the rules in Python on a register view; the RTL's CHECK state
elaborates the same rules as logic (hw.register_map.elaborate_rules). Here both run on the same
random and boundary register files (amaranth.sim for the logic) and must flag the same rules.
"""

from __future__ import annotations

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from sim import seeds
from firmware_model.arch.checks import MAC_RTL_GAPS, MAC_RULES, PyOps, first_violation
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import SIGNED_REGS, LutMode, MacMode, OutMode, Reg, Status
from firmware_model.arch.registers import Registers
from firmware_model.tosa_ops.dtypes import DType
from hw.register_file import REGISTER_FILE
from hw.register_map import elaborate_rules

RULES = MAC_RULES + MAC_RTL_GAPS
CFG = load_config("tiny")


class RuleChecker(wiring.Component):
    def __init__(self):
        super().__init__({"regs": In(REGISTER_FILE), "sub": In(8), "violated": Out(len(RULES))})

    def elaborate(self, platform):
        m = Module()
        for k, (_, bit) in enumerate(elaborate_rules(RULES, self.regs, self.sub, CFG)):
            m.d.comb += self.violated[k].eq(bit)
        return m


def _register_files(rng, n: int) -> list[tuple[dict[int, int], int]]:
    """Register files near the rules' edges: legal and illegal types, zero and huge sizes,
    aligned and misaligned addresses, every mode."""
    picks = {
        Reg.IFM_DTYPE: [DType.INT8, DType.INT16, DType.INT32, 0, 200],
        Reg.OFM_DTYPE: [DType.INT8, DType.INT16, DType.INT32, DType.INT48, 1, 77],
        Reg.RESCALE_DTYPE: [DType.INT8, DType.INT16, DType.INT32, DType.INT48, 0],
        Reg.OUT_MODE: [0, int(OutMode.RESCALE), int(OutMode.RESCALE | OutMode.SCALE32), 0xF, 0xFFFFFFFF],
        Reg.LUT_MODE: [LutMode.OFF, LutMode.INT8, LutMode.INT16, 3, 0x80000000],
        Reg.IFM_ZP: [0, 1, (-3) & 0xFFFFFFFF, 0x80000000],
    }
    sizes = [0, 1, 2, 7, 8, 9, 64, 65, 1 << 16, 0xFFFFFFFF]
    out = []
    for _ in range(n):
        regs = {int(r): int(rng.choice(v)) for r, v in picks.items()}
        for r in (Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.KERNEL_H, Reg.KERNEL_W, Reg.IFM_CBLOCKS):
            regs[int(r)] = int(rng.choice(sizes[:7])) if rng.random() < 0.8 else int(rng.choice(sizes))
        for r in (Reg.IFM_ADDR, Reg.IFM_ROW_STRIDE, Reg.IFM_PIX_STRIDE, Reg.WGT_ADDR):
            regs[int(r)] = int(rng.integers(0, 64)) * (CFG.word_bytes if rng.random() < 0.8 else 1)
        sub = int(rng.choice([MacMode.CONV2D, MacMode.DEPTHWISE, MacMode.MATMUL, 3, 255]))
        if rng.random() < 0.3:      # a command every rule accepts
            regs.update({int(Reg.IFM_DTYPE): DType.INT8, int(Reg.IFM_ZP): 0, int(Reg.OFM_DTYPE): DType.INT8,
                         int(Reg.OUT_MODE): int(OutMode.RESCALE), int(Reg.RESCALE_DTYPE): DType.INT8,
                         int(Reg.LUT_MODE): LutMode.OFF, int(Reg.OFM_H): 2, int(Reg.OFM_W): 3, int(Reg.OFM_C): 5,
                         int(Reg.KERNEL_H): 1, int(Reg.KERNEL_W): 3, int(Reg.IFM_CBLOCKS): 2})
            for r in (Reg.IFM_ADDR, Reg.IFM_ROW_STRIDE, Reg.IFM_PIX_STRIDE, Reg.WGT_ADDR):
                regs[int(r)] = int(rng.integers(0, 64)) * CFG.word_bytes
            sub = int(MacMode.CONV2D)
        out.append((regs, sub))
    return out


def test_rtl_and_golden_evaluate_the_rules_alike():
    rng = seeds.rng(1, "rule evaluators")
    cases = _register_files(rng, 400)
    dut = RuleChecker()
    got = []

    async def bench(ctx):
        for regs, sub in cases:
            for reg in Reg:
                ctx.set(getattr(dut.regs, reg.name.lower()), regs.get(int(reg), 0))
            ctx.set(dut.sub, sub)
            got.append(ctx.get(dut.violated))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    statuses = set()
    for (regs, sub), bits in zip(cases, got):
        view = Registers(regs)
        want = [bool(rule.violated(PyOps, view, sub, CFG)) for rule in RULES]
        have = [bool(bits >> k & 1) for k in range(len(RULES))]
        assert have == want, f"registers {regs}, sub {sub}: RTL {have}, Python {want}"
        broken = first_violation(RULES, view, sub, CFG)
        statuses.add(broken.status if broken else Status.OK)
    assert statuses == {Status.OK, Status.BAD_MODE, Status.ADDRESS_RANGE}


def test_every_rule_is_broken_by_some_case_and_names_its_registers():
    rng = seeds.rng(2, "rule coverage")
    broken = {rule.name for regs, sub in _register_files(rng, 400) for rule in RULES
              if rule.violated(PyOps, Registers(regs), sub, CFG)}
    assert broken == {rule.name for rule in RULES}
    for rule in RULES:
        assert rule.reads and all(r == "sub" or Reg[r] is not None for r in rule.reads)
        message = rule.message("MAC", Registers({}), 0)
        assert rule.text in message and rule.name in message


@pytest.mark.parametrize("reg", sorted(SIGNED_REGS))
def test_signed_registers_read_signed(reg):
    assert Registers({int(reg): 0xFFFFFFFE})[reg] == -2
    assert getattr(Registers({int(reg): 0x7FFFFFFF}), reg.name.lower()) == 0x7FFFFFFF
    assert Registers({})[reg] == 0
