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
from amaranth import Signal
from amaranth.hdl import ResetInserter
from amaranth.sim import Simulator

from sim import seeds
from firmware_model.arch.isa import VAR_SLOTS, Sram, Status
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import load_config
from firmware_model.golden.variable_sram import VariableSramModel
from hw.variable_sram import VariableSram
from sim.verification.gateware.variable_sram_harness import OP_READ, OP_START, OP_WRITE
from sim.vectors import variable_sram as vv
from sim.verification.unit_bench import GENERATOR_WAIVERS, assert_mutant_caught, assert_results_match, assert_runs_match, lint_verilog

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

def simulate(geometry, runs: list[vv.VarRun], rng) -> list[list[dict]]:
    """The runs in order on VariableSram in amaranth.sim (a reset first where a run asks for it),
    with random read-response stalls; one record per operation."""
    words, W, slots = geometry
    rst = Signal()
    unit = VariableSram(words, W, slots)
    out: list[list[dict]] = []

    async def tb(ctx):
        for r in runs:
            p = r.program
            if r.extra.get("reset_before"):
                ctx.set(rst, 1)
                await ctx.tick()
                ctx.set(rst, 0)
            recs = []
            for i in range(len(p)):
                k, s = p.kind[i], p.slot[i]
                rec = {"data": [0] * W, "refused": 0}
                if k == OP_START:
                    ctx.set(unit.invocation_start, 1)
                    await ctx.tick()
                    ctx.set(unit.invocation_start, 0)
                else:
                    ctx.set(unit.req.payload, {"write": int(k == OP_WRITE), "slot": s, "addr": p.addr[i],
                                               "data": [int(b) for b in p.data[i]]})
                    ctx.set(unit.req.valid, 1)
                    await ctx.tick().until(unit.req.ready)
                    ctx.set(unit.req.valid, 0)
                    if k == OP_READ:
                        for _ in range(int(rng.integers(0, 3))):      # the response waits
                            await ctx.tick()
                        assert ctx.get(unit.rsp.valid)
                        v = ctx.get(unit.rsp.payload)
                        rec = {"data": [int(v.data[b]) for b in range(W)], "refused": int(v.refused)}
                        ctx.set(unit.rsp.ready, 1)
                        await ctx.tick()
                        ctx.set(unit.rsp.ready, 0)
                rec.update(error=ctx.get(unit.error), error_code=ctx.get(unit.error_code),
                           error_slot=ctx.get(unit.error_slot),
                           written=(ctx.get(unit.written) >> s) & 1 if s < slots else 0)
                recs.append(rec)
            out.append(recs)

    sim = Simulator(ResetInserter(rst)(unit))
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out


def check_records(got: list[dict], want: dict[str, np.ndarray], label: str) -> None:
    assert len(got) == len(want["refused"])
    for f in vv.RECORD_FIELDS:
        g = np.array([r[f] for r in got], dtype=np.int64)
        assert np.array_equal(g, want[f].astype(np.int64)), \
            f"{label}: {f} differs first at op {np.flatnonzero(g != want[f])[0]}"
    g = np.array([r["data"] for r in got], dtype=np.uint8)
    assert np.array_equal(g, want["data"]), f"{label}: data differs first at op {np.argwhere(g != want['data'])[0]}"


@pytest.mark.parametrize("geometry", [vv.SMALL, (16, 8, 3), (8, 1, 1)], ids=["64x4-8slots", "16x8-3slots", "8x1-1slot"])
def test_variable_sram_amaranth_sim(geometry):
    runs = vv.suites(sum(geometry), geometry=geometry, n=300)
    got = simulate(geometry, runs, seeds.rng(sum(geometry)))
    for r, g in zip(runs, got):
        check_records(g, r.records, r.run.label)


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

@pytest.fixture(scope="module")
def small_suites():
    return vv.suites(SEED + 1, geometry=vv.SMALL, n=300)


@pytest.mark.rtl
def test_variable_sram_clean_small_passes(small_suites):
    """The unmutated design at the mutation geometry passes the suites the mutants must fail."""
    results = vv.run_suites("icarus", small_suites, geometry=vv.SMALL)
    assert_results_match(results, [s.run for s in small_suites])


@pytest.mark.rtl
@pytest.mark.parametrize("mutation", vv.MUTATIONS, ids=[m.name for m in vv.MUTATIONS])
def test_variable_sram_mutation_is_caught(mutation, small_suites):
    results = vv.run_suites("icarus", small_suites, geometry=vv.SMALL, mutation=mutation)
    assert_mutant_caught(results, mutation)


# ---------------------------------------------------------------------------------------------
# Lint

def test_variable_sram_lint():
    from amaranth.back import verilog

    text = verilog.convert(VariableSram(*vv.GEOMETRY), name="variable_sram", emit_src=False)
    report = lint_verilog(text, "variable_sram", GENERATOR_WAIVERS + vv.LINT_WAIVERS)
    assert report.clean, "\n".join(report.warnings[:30])
