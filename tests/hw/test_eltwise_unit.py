"""The elementwise unit (hw/eltwise_unit.py, with hw/output_stage.py) against the golden model.

Every run is one ELTWISE command: the expected results are `firmware_model.golden.eltwise_unit.
execute_eltwise`'s own output values for the same registers and operands (sim/vectors/eltwise.py).
amaranth.sim: a few random commands through the Python model of the design. Verilator and Icarus:
the generated Verilog in the vector harness runs every suite (random commands, corner commands,
coverage-closure commands, long commands at full speed, random commands with gaps and back-pressure) in one simulator
process per simulator. Coverage from what ran; mutations of the generated Verilog must be caught;
the unit's Verilog must lint clean.
"""

from __future__ import annotations


import pytest

from firmware_model.arch.isa import EltOp
from hw.eltwise_unit import LATENCY
from sim.vectors import eltwise as ev
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240614
N_RANDOM = {"verilator": 160, "icarus": 80}


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request):
    """(simulator, suites, results): every suite in one simulator process."""
    suites = ev.suites(SEED, n_random=N_RANDOM[request.param])
    runs = [r for s in suites for r in s.runs]
    return request.param, suites, ev.bench().run(request.param, runs)


def _check_suite(rtl, name: str):
    _, suites, results = rtl
    suite = next(s for s in suites if s.name == name)
    return suite, assert_runs_match(results, suite.runs)


@pytest.mark.rtl
def test_eltwise_random(rtl):
    suite, _ = _check_suite(rtl, "random")
    ops = {c.op for c in suite.commands}
    assert ops == {int(o) for o in EltOp}, "every operation among the random commands"


@pytest.mark.rtl
def test_eltwise_corners(rtl):
    """Every binary operation on extremes of every operand type, int32 wraps, MUL at every shift
    0..63 and its rounding ties, shift amounts 0..31 and beyond, int48 COPY through both
    rescales, the input stage's lshift / zero point / rescale corners, double-round ties,
    scalars, 256 per-channel records, tables, output saturation into every type."""
    suite, _ = _check_suite(rtl, "corners")
    assert len(suite.commands) > 300


@pytest.mark.rtl
def test_eltwise_closure(rtl):
    """The commands drawn to hit the bins random and corner commands missed."""
    _check_suite(rtl, "closure")


@pytest.mark.rtl
def test_eltwise_backpressure(rtl):
    suite, res = _check_suite(rtl, "backpressure")
    for c, r in zip(suite.commands, res[1:]):
        assert r.cycles > c.count + LATENCY


@pytest.mark.rtl
def test_eltwise_throughput(rtl):
    """One element per clock: a command of N elements at full speed takes N + LATENCY clocks."""
    suite, res = _check_suite(rtl, "long")
    for c, r in zip(suite.commands, res[1:]):
        assert r.cycles == c.count + LATENCY, f"{c.label} {EltOp(c.op).name}: {r.cycles} clocks"


@pytest.mark.rtl
def test_eltwise_coverage(rtl):
    simulator, suites, results = rtl
    assert results.ok
    cov = ev.coverage_model()
    for s in suites:
        for c in s.commands:
            cov.sample(ev.coverage_sample(c))
    cov.save_and_check("eltwise_unit", simulator)
