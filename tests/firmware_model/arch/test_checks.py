"""Command rules (firmware_model/arch/checks.py): one table per unit, two evaluators that must agree.

The golden model evaluates the rules in Python on a register view; the RTL's CHECK states
elaborate the same rules as logic (hw.register_map.elaborate_rules). Here both run on the same
register files — the real ones of a compiled network's MAC, ELTWISE and POOL commands, with one
to three registers pushed to the edges of what the rules allow — and must pick the same first
broken rule (or none). Every rule is broken by some case.
"""

from __future__ import annotations

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from compiler.pipeline import compile_file
from firmware_model.arch.checks import ELT_RULES, MAC_RTL_GAPS, MAC_RULES, POOL_RULES, PyOps, first_violation
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import SIGNED_REGS, EltMode, EltOp, MacMode, OutMode, PoolMode, Reg, Sram, Status
from firmware_model.arch.registers import Registers
from firmware_model.golden.model import GoldenModel
from firmware_model.tosa_ops.dtypes import DType
from hw.register_file import REGISTER_FILE
from hw.register_map import elaborate_rules
from sim import seeds
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR

CFG = load_config("tiny")
TABLES = {"MAC": MAC_RULES + MAC_RTL_GAPS, "ELTWISE": ELT_RULES, "POOL": POOL_RULES}


class RuleChecker(wiring.Component):
    def __init__(self, rules):
        self.rules = rules
        super().__init__({"regs": In(REGISTER_FILE), "sub": In(8), "violated": Out(len(rules))})

    def elaborate(self, platform):
        m = Module()
        for k, (_, bit) in enumerate(elaborate_rules(self.rules, self.regs, self.sub, CFG)):
            m.d.comb += self.violated[k].eq(bit)
        return m


@pytest.fixture(scope="module")
def real_commands() -> dict[str, list[tuple[dict, int]]]:
    """(registers, sub) of every compute command of resnet_pool and cnn32 on tiny."""
    out = {u: [] for u in TABLES}
    for name in ("resnet_pool", "cnn32"):
        data = ModelData.of(MODELS_DIR / name)
        golden = GoldenModel(compile_file(data.folder / "model.tosa", CFG).program, CFG)
        golden.event_hook = lambda ev: out[ev.opcode.name].append((dict(ev.regs), ev.sub))
        golden.invoke(data.inputs(0))
    return out


def _edges(reg: Reg, regs: dict) -> list[int]:
    v = regs.get(int(reg), 0)
    near = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 255, 256, 512, 513, v - 1, v + 1, v + 4, 2 * v + 1,
            CFG.input_sram, CFG.output_sram, CFG.weight_sram, CFG.lut_entries, CFG.lut_entries - 300,
            0x7FFFFFFF, 0xFFFFFFFF]
    near += [v ^ (1 << b) for b in range(9)]          # one mode flag or low address bit flipped
    return [n & 0xFFFFFFFF for n in near]


# Coordinated changes that single-register edges rarely make: (registers, sub or None)
RECIPES = {
    "MAC": [({Reg.OFM_DTYPE: DType.INT32, Reg.OFM_ADDR: 2}, None), ({Reg.OFM_DTYPE: DType.INT48}, None),
            ({Reg.IFM_DTYPE: DType.INT16, Reg.IFM_ZP: 3}, None),
            # the input read from the output SRAM where the tile writes
            ({Reg.IFM_SRAM: Sram.OUTPUT, Reg.IFM_ADDR: 0, Reg.OFM_ADDR: 0}, MacMode.CONV2D),
            # three kernel rows a step: a kernel row wider than a third of the lanes, and kernel
            # heights around the weight SRAM's end (ceil(KERNEL_H / 3) blocks)
            ({Reg.IFM_DTYPE: DType.INT8, Reg.IFM_CBLOCKS: 1, Reg.OFM_C: 1, Reg.KERNEL_W: 3, Reg.DILATION_W: 1},
             MacMode.DEPTHWISE_TRIPLE),
            ({Reg.IFM_DTYPE: DType.INT8, Reg.IFM_CBLOCKS: 1, Reg.OFM_C: 1, Reg.KERNEL_W: 1, Reg.KERNEL_H: 7,
              Reg.WGT_ADDR: CFG.weight_sram - 2 * CFG.mac_rows * CFG.word_bytes}, MacMode.DEPTHWISE_TRIPLE),
            ({Reg.IFM_DTYPE: DType.INT8, Reg.IFM_CBLOCKS: 1, Reg.OFM_C: 1, Reg.KERNEL_W: 1, Reg.KERNEL_H: 6,
              Reg.WGT_ADDR: CFG.weight_sram - 2 * CFG.mac_rows * CFG.word_bytes}, MacMode.DEPTHWISE_TRIPLE),
            # the taps packed mac.cols a step: a kernel row too narrow for three rows a step, and
            # kernels around the weight SRAM's end (ceil(KERNEL_H x span / mac.cols) blocks)
            ({Reg.IFM_DTYPE: DType.INT8, Reg.IFM_CBLOCKS: 1, Reg.OFM_C: 1, Reg.KERNEL_W: 1, Reg.DILATION_W: 1},
             MacMode.DEPTHWISE_PACKED),
            ({Reg.IFM_DTYPE: DType.INT8, Reg.IFM_CBLOCKS: 1, Reg.OFM_C: 1, Reg.KERNEL_W: 5, Reg.DILATION_W: 1,
              Reg.KERNEL_H: 7, Reg.WGT_ADDR: CFG.weight_sram - 4 * CFG.mac_rows * CFG.word_bytes},
             MacMode.DEPTHWISE_PACKED),
            ({Reg.IFM_DTYPE: DType.INT8, Reg.IFM_CBLOCKS: 1, Reg.OFM_C: 1, Reg.KERNEL_W: 5, Reg.DILATION_W: 1,
              Reg.KERNEL_H: 6, Reg.WGT_ADDR: CFG.weight_sram - 4 * CFG.mac_rows * CFG.word_bytes},
             MacMode.DEPTHWISE_PACKED)],
    "ELTWISE": [({Reg.ELT_A_DTYPE: DType.INT48}, EltOp.LOGICAL_LEFT_SHIFT),
                ({Reg.ELT_MODE: EltMode.B_UNSIGNED, Reg.ELT_B_DTYPE: DType.INT32}, EltOp.ADD),
                ({Reg.ELT_MODE: EltMode.A_UNSIGNED, Reg.ELT_A_DTYPE: DType.INT32}, EltOp.ADD)],
    "POOL": [({Reg.IFM_DTYPE: DType.INT32}, PoolMode.AVG),
             # the input box read from the output SRAM where the results go
             ({Reg.IFM_SRAM: Sram.OUTPUT, Reg.IFM_ADDR: 0, Reg.OFM_ADDR: 0}, PoolMode.MAX),
             ({Reg.OUT_MODE: OutMode.RESCALE, Reg.RESCALE_DTYPE: DType.INT48}, PoolMode.MAX)],
}


def _cases(commands, rules, rng, n: int, recipes=()):
    regs_read = sorted({Reg[name] for rule in rules for name in rule.reads if name != "sub"} |
                       {Reg.STRIDE_H, Reg.STRIDE_W, Reg.DILATION_H, Reg.DILATION_W, Reg.POOL_PAD_TOP})
    cases = []
    for k in range(n):
        regs, sub = commands[int(rng.integers(len(commands)))]
        regs = dict(regs)
        if k % 4:                      # three of four cases move one to three registers to an edge
            for reg in rng.choice(regs_read, int(rng.integers(1, 4)), replace=False):
                regs[int(reg)] = int(rng.choice(_edges(Reg(reg), regs)))
            if rng.random() < 0.15:
                sub = int(rng.integers(0, 12))
            if rng.random() < 0.15:       # a table: its mode and place
                regs[int(Reg.LUT_MODE)] = int(rng.integers(1, 3))
                regs[int(Reg.LUT_ADDR)] = int(CFG.lut_entries - rng.integers(1, 700))
        if recipes and k % 7 == 3:
            change, new_sub = recipes[int(rng.integers(len(recipes)))]
            regs.update({int(r): int(v) for r, v in change.items()})
            sub = sub if new_sub is None else int(new_sub)
        cases.append((regs, sub))
    return cases


@pytest.mark.parametrize("unit", TABLES)
def test_rtl_and_golden_pick_the_same_rule(unit, real_commands):
    rules = TABLES[unit]
    rng = seeds.rng(1, f"rule evaluators {unit}")
    cases = _cases(real_commands[unit], rules, rng, 600, RECIPES[unit])
    dut = RuleChecker(rules)
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
    broken, statuses = set(), set()
    for (regs, sub), bits in zip(cases, got):
        rtl_first = next((rules[k] for k in range(len(rules)) if bits >> k & 1), None)
        golden_first = first_violation(rules, Registers(regs), sub, CFG)
        assert rtl_first == golden_first, f"registers {regs}, sub {sub}: RTL {rtl_first}, Python {golden_first}"
        if golden_first is not None:
            broken.add(golden_first.name)
        statuses.add(golden_first.status if golden_first else Status.OK)
    assert broken == {rule.name for rule in rules}, f"rules no case broke: {sorted({r.name for r in rules} - broken)}"
    assert {Status.OK, Status.BAD_MODE, Status.ADDRESS_RANGE} <= statuses


@pytest.mark.parametrize("unit", TABLES)
def test_rules_name_their_registers(unit):
    for rule in TABLES[unit]:
        assert rule.reads and all(r == "sub" or Reg[r] is not None for r in rule.reads)
        message = rule.message(unit, Registers({}), 0)
        assert rule.text in message and rule.name in message


def test_the_golden_units_refuse_by_the_rules(real_commands):
    """A unit command the rules refuse ends with the rule's status and names it."""
    from firmware_model.errors import GoldenModelError
    from firmware_model.golden.eltwise_unit import execute_eltwise
    from firmware_model.golden.memories import Memories

    regs, sub = real_commands["ELTWISE"][0]
    regs = {**regs, int(Reg.ELT_A_DTYPE): 77}
    with pytest.raises(GoldenModelError, match="rule 'A type'") as e:
        execute_eltwise(CFG, Memories(CFG), regs, sub)
    assert e.value.status == Status.BAD_MODE


@pytest.mark.parametrize("reg", sorted(SIGNED_REGS))
def test_signed_registers_read_signed(reg):
    assert Registers({int(reg): 0xFFFFFFFE})[reg] == -2
    assert getattr(Registers({int(reg): 0x7FFFFFFF}), reg.name.lower()) == 0x7FFFFFFF
    assert Registers({})[reg] == 0


def test_isa_doc_lists_every_rule():
    """docs/isa.md shows the tables as checks.markdown() prints them (regenerate: python -m
    firmware_model.arch.checks)."""
    from firmware_model.arch.checks import markdown
    from sim.paths import REPO_ROOT

    assert markdown() in (REPO_ROOT / "docs" / "isa.md").read_text()
