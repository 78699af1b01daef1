"""The contract every datapath unit keeps (sim/verification/contract.py), one parametrised test
per clause over the registry of units: every Verilog mutant is caught by the unit's bench, and the
unmutated design passes the very runs the mutants fail; the unit's Verilog lints clean with
justified waivers only; the Python design matches golden on amaranth.sim."""

from __future__ import annotations

import pytest

from sim.verification.contract import MUTANT_SIMULATOR, UNITS, contract
from sim.verification.unit_bench import assert_mutant_caught

MUTANTS = [(unit, m) for unit in UNITS for m in contract(unit).mutations]


@pytest.fixture(scope="module")
def mutant_runs():
    """The runs the mutants must fail, per unit (drawn once per module)."""
    cache = {}

    def get(unit):
        if unit not in cache:
            cache[unit] = contract(unit).mutant_runs()
        return cache[unit]
    return get


@pytest.mark.rtl
@pytest.mark.parametrize("unit", UNITS)
def test_clean_design_passes_the_mutant_runs(unit, mutant_runs):
    runs = mutant_runs(unit)
    results = contract(unit).run(MUTANT_SIMULATOR, runs)
    assert results.ok and len(results.runs) == len(runs), f"{unit}: the unmutated design fails its mutant runs"


@pytest.mark.rtl
@pytest.mark.parametrize("unit,mutation", MUTANTS, ids=[f"{u}-{m.name}" for u, m in MUTANTS])
def test_mutant_is_caught(unit, mutation, mutant_runs):
    results = contract(unit).run(MUTANT_SIMULATOR, mutant_runs(unit), mutation=mutation)
    assert_mutant_caught(results, mutation)


@pytest.mark.parametrize("unit", UNITS)
def test_lint_clean(unit):
    report = contract(unit).lint()
    assert report.clean, "\n".join(report.warnings[:30])


@pytest.mark.parametrize("unit", UNITS)
def test_amaranth_sim_matches_golden(unit):
    contract(unit).amaranth()


def test_every_unit_has_mutants():
    assert all(len(contract(u).mutations) >= 5 for u in UNITS)
