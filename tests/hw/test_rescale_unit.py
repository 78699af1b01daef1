"""The rescale unit (hw/rescale_unit.py) against the golden numerics, bit for bit.

amaranth.sim: a short mixed vector through the Python model of the design. Verilator and Icarus:
the generated Verilog in the vector harness runs every suite of sim/vectors/rescale.py (random,
corners, dense shift sweep, per-channel, the MAC stage's operands, back-pressure) in one simulator
process, each suite one free-running start/done run. Coverage is sampled from the elements those
runs played; mutations of the generated Verilog must be caught; the unit's Verilog must lint clean
(justified waivers only).
"""

from __future__ import annotations


import numpy as np
import pytest

from hw.rescale_unit import LATENCY
from sim.vectors import rescale as rv
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240611
# Suites whose stimulus plays at full speed: one result per clock after the pipeline latency.
FULL_SPEED = ("random", "corners", "shift_sweep", "per_channel", "mac_stage")


@pytest.fixture(scope="module")
def suites():
    return rv.suites(SEED)


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request, suites):
    """(simulator, runs, results): every suite in one simulator process."""
    runs = [r for r, _ in suites]
    return request.param, runs, rv.bench().run(request.param, runs)


def _check(rtl, label: str):
    _, runs, results = rtl
    run = next(r for r in runs if r.label == label)
    return run, assert_runs_match(results, [run])[0]


@pytest.mark.rtl
def test_rescale_random(rtl):
    run, res = _check(rtl, "random")
    assert res.n_in == 4096


@pytest.mark.rtl
def test_rescale_corners(rtl):
    """shift 2 and 62, double rounding around shift 31/32, ties, extremes, zero-point extremes
    (uint16 32768 included), saturation on both sides for every legal type combination."""
    _check(rtl, "corners")


@pytest.mark.rtl
def test_rescale_shift_sweep(rtl):
    """apply_scale_16 (int48 values) and apply_scale_32 (both roundings) at every shift 2..62."""
    run, res = _check(rtl, "shift_sweep")
    shifts = np.unique(run.inputs["i"]["shift"])
    assert np.array_equal(shifts, np.arange(2, 63))


@pytest.mark.rtl
def test_rescale_per_channel(rtl):
    _check(rtl, "per_channel")


@pytest.mark.rtl
def test_rescale_mac_stage(rtl):
    """The MAC output stage's operands (any int32 multiplier, shift 0..63) against
    mac_unit.rescale_operands + numerics.rescale_values, as the golden MAC model computes them."""
    _check(rtl, "mac_stage")


@pytest.mark.rtl
def test_rescale_backpressure(rtl):
    """Gaps on the input and stalls on the output change nothing but the clock count."""
    run, res = _check(rtl, "backpressure")
    assert res.cycles > res.n_in + LATENCY


@pytest.mark.rtl
def test_rescale_throughput(rtl):
    """One result per clock: N elements take N + LATENCY clocks from start to the last result."""
    _, _, results = rtl
    for label in FULL_SPEED:
        res = results.by_label(label)
        assert res.cycles == res.n_in + LATENCY, f"{label}: {res.cycles} clocks for {res.n_in} elements"
        assert res.first_out == LATENCY + 1


@pytest.mark.rtl
def test_rescale_coverage(rtl, suites):
    """Functional coverage of what the RTL ran (and matched): every bin and cross bin hit."""
    simulator, _, results = rtl
    assert results.ok
    cov = rv.coverage_model()
    for run, elements in suites:
        assert results.by_label(run.label).ok
        cov.sample(rv.coverage_sample(elements))
    cov.save_and_check("rescale_unit", simulator)
