"""Unit mutants inside the core (sim/verification/core_mutants.py): a sample in the default run.

For each unit, one of its contract's mutations (drawn with the run's seed, so NPU_BENCH_SEED
changes the sample; not one the core cannot observe) is made in every instance of the unit in
the core's Verilog; programs that use the unit run on the mutated core (Icarus) and must differ
from golden somewhere, while the same program on the unmutated core does not. `make core-mutants` runs every mutation of every unit.
"""

from __future__ import annotations

import pytest

from sim import seeds
from sim.verification.contract import MUTANT_SIMULATOR, UNITS, contract
from sim.verification.core_mutants import (CORE_MODULES, NOT_OBSERVABLE_IN_CORE, UNIT_RUNS, apply_in_core,
                                          control_differences, run_mutant)
from sim.verification.unit_bench import Mutation, MutationError


@pytest.mark.rtl
@pytest.mark.parametrize("unit", list(UNITS))
def test_a_unit_mutant_is_caught_inside_the_core(unit):
    mutations = [m for m in contract(unit).mutations if (unit, m.name) not in NOT_OBSERVABLE_IN_CORE]
    mutation = mutations[int(seeds.rng(0, f"core mutant {unit}").integers(len(mutations)))]
    v = run_mutant(unit, mutation, MUTANT_SIMULATOR)
    assert v.caught, f"{unit}: {mutation.name} ({mutation.description}) went unnoticed inside the core"
    assert control_differences(v.by, MUTANT_SIMULATOR) == (), f"the unmutated core differs from golden on {v.by}"


def test_every_unit_has_core_modules_and_runs():
    assert set(CORE_MODULES) == set(UNITS) == set(UNIT_RUNS)
    for unit, name in NOT_OBSERVABLE_IN_CORE:
        assert name in {m.name for m in contract(unit).mutations}, (unit, name)


def test_a_mutation_that_matches_no_instance_is_refused():
    core = ("module \\npu_core.output_stage.lut (a);\n  assign x = a;\n  assign y = a;\nendmodule\n"
            "module \\npu_core.mac (a);\n  assign z = a;\nendmodule\n")
    with pytest.raises(MutationError, match="matches no module"):
        apply_in_core(Mutation("m", "", r"assign z = a", "assign z = 0"), "lut_engine", core)
    with pytest.raises(MutationError, match="2 match"):
        apply_in_core(Mutation("m", "", r"= a;", "= 0;", count=1), "lut_engine", core)
    out = apply_in_core(Mutation("m", "", r"= a;", "= 0;", count=2), "lut_engine", core)
    assert out.count("= 0;") == 2 and "assign z = a;" in out
