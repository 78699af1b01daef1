"""Register maps (hw/register_map.py): the Python evaluator (the unit benches) and the Amaranth one
(the core's sequencers) give the same configuration bits for the same registers."""

from __future__ import annotations

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Reg
from hw import eltwise_unit, pool_unit
from hw.register_file import REGISTER_FILE
from hw.register_map import FromFlag, FromReg, FromSub, drive_map, map_values
from sim import seeds
from sim.verification.gateware.vector_harness import PayloadCodec

ENTRIES = load_config("default").lut_entries
UNITS = {
    "eltwise_unit": (eltwise_unit.REGISTER_MAP, eltwise_unit.config_layout(ENTRIES)),
    "pool_unit": (pool_unit.REGISTER_MAP, pool_unit.config_layout(ENTRIES)),
}


class MapDriver(wiring.Component):
    def __init__(self, register_map, layout):
        self.register_map = register_map
        super().__init__({"regs": In(REGISTER_FILE), "sub": In(8), "cfg": Out(layout)})

    def elaborate(self, platform):
        m = Module()
        drive_map(m, self.register_map, self.cfg, self.regs, self.sub)
        return m


@pytest.mark.parametrize("unit", UNITS)
def test_python_and_rtl_evaluators_agree(unit):
    from amaranth.sim import Simulator

    register_map, layout = UNITS[unit]
    codec = PayloadCodec(layout)
    assert set(register_map) == set(codec.names), "the map must give every cfg field, and only those"
    rng = seeds.rng(4, f"register map {unit}")
    used = sorted({int(s.reg) for s in register_map.values() if isinstance(s, (FromReg, FromFlag))})
    cases = [({r: int(rng.integers(0, 1 << 32)) for r in used}, int(rng.integers(0, 16))) for _ in range(200)]
    dut = MapDriver(register_map, layout)
    got = []

    async def bench(ctx):
        for regs, sub in cases:
            for reg in Reg:
                ctx.set(getattr(dut.regs, reg.name.lower()), regs.get(int(reg), 0))
            ctx.set(dut.sub, sub)
            got.append(ctx.get(dut.cfg.as_value()))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for (regs, sub), rtl in zip(cases, got):
        assert rtl == codec.pack(map_values(register_map, regs, sub), n=1)[0], f"registers {regs}, sub {sub}"
    assert any(isinstance(s, FromSub) for s in register_map.values())
