"""The variable SRAM (hw/variable_sram.py) against the golden rules
(firmware_model.golden.variable_sram.VariableSramModel), record for record.

amaranth.sim: the Python design driven directly at several geometries: random traffic with
invocation starts, a second program over the same slots (persistence), a reset and the reads that
show it cleared flags and contents; the reset walk's length. Verilator and Icarus: the generated
Verilog (default NPU geometry, isa.VAR_SLOTS slots) in the vector harness
(sim/verification/gateware/variable_sram_harness.py adapts it) runs every suite of sim/vectors/variable_sram.py in one
simulator process — contents and flags carried from run to run as the golden model carries them,
a reset before the after-reset suite. Coverage from what ran; mutations of the generated Verilog
must be caught; the unit's Verilog must lint clean.
"""

from __future__ import annotations


import numpy as np
import pytest
from amaranth.sim import Simulator

from firmware_model.arch.isa import VAR_SLOTS, Sram, Status
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import load_config
from firmware_model.golden.variable_sram import VariableSramModel
from hw.variable_sram import VariableSram
from sim.verification.gateware.variable_sram_harness import OP_START
from sim.vectors import variable_sram as vv
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240614
N_OPS = {"verilator": 2400, "icarus": 1200}


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request):
    """(simulator, suites, results): every suite in one simulator process, in order."""
    suites = vv.suites(SEED, n=N_OPS[request.param])
    return request.param, suites, vv.run_suites(request.param, suites)


def _check(rtl, label: str):
    _, suites, results = rtl
    s = next(s for s in suites if s.run.label == label)
    return s, assert_runs_match(results, [s.run])[0]


@pytest.mark.rtl
def test_variable_sram_traffic(rtl):
    s, _ = _check(rtl, "traffic")
    assert s.records["refused"].any() and not s.records["refused"].all()


@pytest.mark.rtl
def test_variable_sram_persists_across_runs_and_starts(rtl):
    """A later run (and invocation starts inside it) reads what earlier runs wrote."""
    s, _ = _check(rtl, "persisted")
    assert s.notes["persisted"].sum() > 50


@pytest.mark.rtl
def test_variable_sram_backpressure(rtl):
    s, res = _check(rtl, "backpressure")
    assert res.cycles > len(s.program) + 2


@pytest.mark.rtl
def test_variable_sram_reset_clears_flags_and_contents(rtl):
    """After a reset every word written before it reads refused; after one new write per slot,
    the slot's other words read zero. The run includes the reset walk (one clock per word)."""
    s, res = _check(rtl, "after_reset")
    first_start = s.program.kind.index(OP_START)
    assert s.records["refused"][:first_start].all()
    assert s.notes["reset_cleared"].sum() > 100
    assert res.cycles >= vv.GEOMETRY[0]


@pytest.mark.rtl
def test_variable_sram_throughput(rtl):
    """One access per clock: N writes and N reads take 2N + 1 clocks (the last record arrives the
    clock after its read), the first record in clock 2."""
    s, res = _check(rtl, "throughput")
    assert res.cycles == 2 * vv.THROUGHPUT + 1, f"{res.cycles} clocks"
    assert res.first_out == 2


@pytest.mark.rtl
def test_variable_sram_coverage(rtl):
    simulator, suites, results = rtl
    assert results.ok
    cov = vv.coverage_model()
    for s in suites:
        assert results.by_label(s.run.label).ok
        cov.sample(vv.coverage_sample(s))
    cov.save_and_check("variable_sram", simulator)


# ---------------------------------------------------------------------------------------------
# The golden rules themselves

def test_golden_rules():
    m = vv.new_model(vv.SMALL)
    W = vv.SMALL[1]
    word = np.arange(1, W + 1, dtype=np.uint8)
    assert m.read(1, 0)[1] == Status.VAR_READ_BEFORE_WRITE and m.error_slot == 1
    assert m.write(2, 3, word) == Status.ADDRESS_RANGE and m.error == Status.VAR_READ_BEFORE_WRITE
    m.start_invocation()
    assert m.error is None
    assert m.write(1, 8, word) == Status.OK and m.is_written(1)
    m.start_invocation()
    got, st = m.read(1, 8)
    assert st == Status.OK and np.array_equal(got, word)          # persists across invocations
    assert m.write(vv.SMALL[2], 0, word) == Status.ADDRESS_RANGE   # no such slot
    assert m.read(0, vv.SMALL[0] * W)[1] == Status.ADDRESS_RANGE   # past the end
    m.power_on_reset()
    assert not m.is_written(1) and m.error is None and not m.data.any()


def test_golden_model_shares_memories_state():
    """Over a Memories, the model uses its variable SRAM and the slot flags var_unit.py uses."""
    cfg = load_config(vv.CONFIG)
    mem = Memories(cfg)
    m = VariableSramModel(cfg, mem=mem)
    W = cfg.word_bytes
    m.write(3, 2 * W, np.full(W, 7, np.uint8))
    assert mem.sram[Sram.VARIABLE][2 * W:3 * W].tolist() == [7] * W
    assert mem.variable_written[2 * W:3 * W].all() and mem.variable_written.sum() == W
    assert mem.variable_slots[3] and mem.variable_slots.sum() == 1
    mem.start_invocation()
    assert m.read(3, 2 * W)[1] == Status.OK
    mem.power_on_reset()
    assert m.read(3, 2 * W)[1] == Status.VAR_READ_BEFORE_WRITE
    assert len(m.written) == VAR_SLOTS


# ---------------------------------------------------------------------------------------------
# amaranth.sim: the Python design, driven directly

def test_variable_sram_reset_walk_amaranth_sim():
    """After reset the SRAM is not ready for exactly `words` clocks (the clearing walk)."""
    words, W, slots = vv.SMALL
    unit = VariableSram(words, W, slots)
    seen = []

    async def tb(ctx):
        for _ in range(words + 3):
            seen.append((ctx.get(unit.clearing), ctx.get(unit.req.ready)))
            await ctx.tick()

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert [c for c, _ in seen] == [1] * words + [0] * 3
    assert [r for _, r in seen] == [0] * words + [1] * 3


# ---------------------------------------------------------------------------------------------
# Mutations: faults injected into the generated Verilog must make the bench fail
