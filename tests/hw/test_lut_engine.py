"""The LUT engine (hw/lut_engine.py) against the golden TABLE primitives, bit for bit.

amaranth.sim: the int8 table over all 256 inputs and a short int16 vector through the Python
model of the design. Verilator and Icarus: the generated Verilog in the vector harness runs every
suite of sim/vectors/lut.py in one simulator process — each suite writes its tables through the
engine's write stream, then looks up its whole vector in one free-running run: the int8 table
over all 256 inputs, the int16 table over all 65536 inputs (Verilator; Icarus takes every 4th
input plus every index edge), odd table bases, mixed modes over four resident tables, stalls, a
reload of new tables. Coverage from what ran; mutations of the generated Verilog must be caught;
the unit's Verilog must lint clean.
"""

from __future__ import annotations


import numpy as np
import pytest

from hw.lut_engine import LATENCY
from sim.vectors import lut as lv
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240612
INT16_STRIDE = {"verilator": 1, "icarus": 4}


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request):
    """(simulator, suites, results): every suite in one simulator process."""
    suites = lv.suites(SEED, int16_stride=INT16_STRIDE[request.param])
    return request.param, suites, lv.bench().run(request.param, [s.run for s in suites])


def _check(rtl, label: str):
    _, suites, results = rtl
    s = next(s for s in suites if s.run.label == label)
    return s, assert_runs_match(results, [s.run])[0]


@pytest.mark.rtl
def test_lut_int8_exhaustive(rtl):
    s, res = _check(rtl, "int8_exhaustive")
    assert np.array_equal(np.sort(s.lookups.value), np.arange(-128, 128))


@pytest.mark.rtl
def test_lut_int16_exhaustive(rtl):
    """All 65536 int16 inputs in one run on Verilator; on Icarus every 4th plus every index edge."""
    simulator, _, _ = rtl
    label = "int16_exhaustive" if INT16_STRIDE[simulator] == 1 else "int16_strided"
    s, res = _check(rtl, label)
    if simulator == "verilator":
        assert np.array_equal(s.lookups.value, np.arange(-32768, 32768))


@pytest.mark.rtl
def test_lut_int16_odd_base(rtl):
    _check(rtl, "int16_odd_base")


@pytest.mark.rtl
def test_lut_mixed_random(rtl):
    _check(rtl, "mixed_random")


@pytest.mark.rtl
def test_lut_backpressure(rtl):
    s, res = _check(rtl, "backpressure")
    assert res.cycles > len(s.lookups) + LATENCY


@pytest.mark.rtl
def test_lut_reload(rtl):
    """New tables written at run time over old ones are the ones looked up."""
    _check(rtl, "reload")


@pytest.mark.rtl
def test_lut_throughput(rtl):
    """One table write and one lookup per clock: W writes and N lookups take W + 1 + N + LATENCY
    clocks (one clock to change from the write phase to the lookup phase)."""
    _, suites, results = rtl
    for s in suites:
        res = results.by_label(s.run.label)
        if s.run.valid_pattern != 0xFFFFFFFF:
            continue
        w, n = s.writes, len(s.lookups)
        assert res.cycles == w + (1 if w else 0) + n + LATENCY, f"{s.run.label}: {res.cycles} clocks"


@pytest.mark.rtl
def test_lut_coverage(rtl):
    simulator, suites, results = rtl
    assert results.ok
    cov = lv.coverage_model()
    for s in suites:
        assert results.by_label(s.run.label).ok
        cov.sample(lv.coverage_sample(s))
    cov.save_and_check("lut_engine", simulator)
