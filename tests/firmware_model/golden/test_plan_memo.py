"""The golden model makes each command's plan once per register values (issue 16): a MAC, ELTWISE
or POOL plan per (opcode, sub, the unit's registers), a DMA_LOAD / DMA_STORE / FILL plan per
(opcode, SRAM, the DMA registers), kept with the program's decodes. These tests show that the
keys hold everything a plan reads (the DMA plans here; the unit plans in test_timing_model.py) and
that a model reusing plans computes what a model making every plan afresh computes: outputs,
counters and every compute command's result, on every network and configuration."""

from __future__ import annotations

import dataclasses
import functools
import io

import numpy as np
import pytest

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Opcode, Reg, Sram
from firmware_model.arch.registers import RecordingRegisters
from firmware_model.errors import GoldenModelError
from firmware_model.golden.dma import DMA_REGS, dma_plan, fill_plan
from firmware_model.golden.model import GoldenModel
from sim import seeds
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR

NETWORKS = sorted(p.parent.name for p in MODELS_DIR.glob("*/model.tosa"))
CONFIGS = ("tiny", "default", "large")


@functools.lru_cache(maxsize=None)
def compiled(name: str, config: str):
    return compile_file(MODELS_DIR / name / "model.tosa", load_config(config), out=io.StringIO()).program


def same(a, b) -> bool:
    """Deep equality of plans (dataclasses, tuples, dicts, numpy arrays)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


class _NoMemo(dict):
    """A memo that keeps nothing: every plan is made afresh."""

    def __setitem__(self, key, value):
        pass


def test_dma_plans_read_only_the_dma_registers():
    rng = np.random.default_rng(seeds.seed_for("dma plan register reads", 16))
    cfg = load_config("default")
    cases = []
    for name in NETWORKS:
        regs: dict[int, int] = {}
        for cmd in compiled(name, "default").commands:
            if cmd.opcode == Opcode.SET:
                regs[cmd.sub] = cmd.value
            elif cmd.opcode in (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL):
                cases.append((cmd.opcode, Sram(cmd.sub), dict(regs)))
    for _ in range(200):
        regs = {int(r): int(rng.choice([0, 1, 4, 64, rng.integers(0, 1 << 32)])) for r in Reg}
        cases.append(((Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL)[rng.integers(3)], Sram.INPUT, regs))
    for op, sram, regs in cases:
        view = RecordingRegisters(regs)
        try:
            if op == Opcode.FILL:
                fill_plan(cfg, view, sram)
            else:
                dma_plan(cfg, view, sram, op == Opcode.DMA_LOAD)
        except GoldenModelError:
            pass
        extra = view.seen - {int(r) for r in DMA_REGS}
        assert not extra, f"{op.name} plan reads {[Reg(r).name for r in extra]}"


# blazeface on tiny (43,000 tiles, half a minute here) left out: its commands are the kinds the
# other 20 cases run.
@pytest.mark.parametrize("name,config", [(n, c) for n in NETWORKS for c in CONFIGS if (n, c) != ("blazeface", "tiny")])
def test_reused_plans_compute_what_fresh_plans_compute(name, config):
    cfg = load_config(config)
    program = compiled(name, config)
    data = ModelData.of(MODELS_DIR / name)
    fresh = GoldenModel(program, cfg)
    fresh._unit_memo, fresh._dma_memo = _NoMemo(), _NoMemo()
    reusing = GoldenModel(program, cfg)
    seen = {id(m): [] for m in (fresh, reusing)}
    for model in (fresh, reusing):
        model.event_hook = (lambda log: lambda ev: log.append((ev.command_index, ev.result.plan,
                                                               bytes(ev.memories.sram[Sram.OUTPUT]))))(seen[id(model)])
    for k in range(data.invocations):
        feeds = data.inputs(k)
        a, b = fresh.invoke(feeds), reusing.invoke(feeds)
        assert a.keys() == b.keys() and all(np.array_equal(a[n], b[n]) for n in a)
        assert fresh.counters.as_dict() == reusing.counters.as_dict()
    for (pc_a, plan_a, out_a), (pc_b, plan_b, out_b) in zip(seen[id(fresh)], seen[id(reusing)], strict=True):
        assert pc_a == pc_b and same(plan_a, plan_b) and out_a == out_b
