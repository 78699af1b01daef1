"""The pooling unit (hw/pool_unit.py, with hw/output_stage.py) against the golden model.

Every run is one POOL command played tap by tap as the sequencer plays it: the expected results
are `firmware_model.golden.pool_unit.execute_pool`'s own output values (sim/vectors/pool.py).
amaranth.sim: a few random commands. Verilator and Icarus: every suite (random commands, corner
commands, AVG windows built for the reciprocal divider, random commands with gaps and
back-pressure) in one simulator process per simulator. Coverage from what ran; mutations of the
generated Verilog must be caught; the unit's Verilog must lint clean.
"""

from __future__ import annotations


import numpy as np
import pytest

from firmware_model.arch.isa import PoolMode
from hw.pool_unit import LATENCY
from sim.vectors import pool as pv
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240615
N_RANDOM = {"verilator": 120, "icarus": 60}


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request):
    suites = pv.suites(SEED, request.param, n_random=N_RANDOM[request.param])
    runs = [r for s in suites for r in s.runs]
    return request.param, suites, pv.bench().run(request.param, runs)


def _check_suite(rtl, name: str):
    _, suites, results = rtl
    suite = next(s for s in suites if s.name == name)
    return suite, assert_runs_match(results, suite.runs)


@pytest.mark.rtl
def test_pool_random(rtl):
    suite, _ = _check_suite(rtl, "random")
    assert {c.mode for c in suite.commands} == {int(m) for m in PoolMode}


@pytest.mark.rtl
def test_pool_corners(rtl):
    _check_suite(rtl, "corners")


@pytest.mark.rtl
def test_pool_reciprocal(rtl):
    """AVG windows of many real-tap counts whose rounding the reciprocal's last bit decides."""
    simulator = rtl[0]
    suite, _ = _check_suite(rtl, "reciprocal")
    counts = set(np.unique(np.concatenate([c.count for c in suite.commands])).tolist())
    assert counts == set(pv.RECIPROCAL_COUNTS[simulator]), "every listed count of real taps ran"
    assert max(counts) > 1024


@pytest.mark.rtl
def test_pool_backpressure(rtl):
    _check_suite(rtl, "backpressure")


@pytest.mark.rtl
def test_pool_throughput(rtl):
    """One tap per clock: T taps at full speed give the last result T + LATENCY clocks in."""
    simulator, suites, results = rtl
    suite = next(s for s in suites if s.name == "random")
    for c, run in zip(suite.commands, suite.runs[1:]):
        r = results.by_label(run.label)
        taps = len(run.inputs["i"]["value"])
        assert r.cycles == taps + LATENCY, f"{run.label}: {r.cycles} clocks for {taps} taps"


@pytest.mark.rtl
def test_pool_coverage(rtl):
    simulator, suites, results = rtl
    assert results.ok
    cov = pv.coverage_model()
    for s in suites:
        for c in s.commands:
            cov.sample(pv.coverage_sample(c))
    cov.save_and_check("pool_unit", simulator)
