"""The fault campaign on the core (sim/verification/core_mutants.py): a sample in the default run.

For each unit, one of its contract's mutations (drawn with the run's seed, so NPU_BENCH_SEED
changes the sample; not one the core cannot observe) is made in every instance of the unit in
the core's Verilog; programs that use the unit run on the mutated core (Icarus) and must differ
from golden somewhere, while the same program on the unmutated core does not. A few cheap
core-level mutants (sim/verification/core_level_mutants.py) run likewise, and every mutant of
both catalogues must still apply to the core's Verilog of the configurations the campaign runs
(no simulation): an RTL change that moves a pattern fails here first. `make core-mutants` runs
the whole campaign.
"""

from __future__ import annotations

import pytest

from sim import seeds
from sim.verification.contract import MUTANT_SIMULATOR, UNITS, contract
from sim.verification.core_level_mutants import PART_MODULES, PART_RUNS, catalogue
from sim.verification.core_mutants import (CORE_MODULES, NOT_OBSERVABLE_IN_CORE, RUNS, UNIT_RUNS, CampaignError,
                                          all_mutants, apply_in_core, control_differences, core_run,
                                          markdown_table, run_mutant, select)
from sim.verification.unit_bench import Mutation, MutationError


@pytest.mark.rtl
@pytest.mark.parametrize("unit", list(UNITS))
def test_a_unit_mutant_is_caught_inside_the_core(unit):
    mutations = [m for m in contract(unit).mutations if (unit, m.name) not in NOT_OBSERVABLE_IN_CORE]
    mutation = mutations[int(seeds.rng(0, f"core mutant {unit}").integers(len(mutations)))]
    v = run_mutant(unit, mutation, MUTANT_SIMULATOR)
    assert v.caught, f"{unit}: {mutation.name} ({mutation.description}) went unnoticed inside the core"
    assert control_differences(v.by, MUTANT_SIMULATOR) == (), f"the unmutated core differs from golden on {v.by}"


# cheap core-level mutants (each caught by the first tiny-configuration program it runs)
CORE_SAMPLE = (("command_processor", "end_ignores_dma_queue"), ("dma_engine", "latency_one_short"),
               ("register_file", "ofm_zp_enable_on_ofm_dtype"))


@pytest.mark.rtl
@pytest.mark.parametrize("part,name", CORE_SAMPLE)
def test_a_core_level_mutant_is_caught(part, name):
    [mutant] = [m for m in catalogue() if (m.part, m.name) == (part, name)]
    v = run_mutant(part, mutant.mutation, MUTANT_SIMULATOR, runs=("mac8",))
    assert v.caught, f"{part}: {name} ({mutant.description}) went unnoticed on the core"
    assert control_differences("mac8", MUTANT_SIMULATOR) == ()


@pytest.fixture(scope="module")
def core_verilog():
    """The core's Verilog of each configuration the campaign's programs run on."""
    from amaranth.back import verilog

    from hw.npu_core import NpuCore
    from sim.rtl.sim_top import CORE

    out = {}
    for name in RUNS:
        if name.startswith("net_"):
            name = "mac8"            # the networks run on `tiny`, as mac8 does
        cfg = core_run(name).cfg
        if cfg.key() not in out:
            out[cfg.key()] = (cfg.name, verilog.convert(NpuCore(cfg), name=CORE, emit_src=False))
    return out


def test_every_mutant_applies_to_the_core(core_verilog):
    """Each mutant of both catalogues matches its module exactly as often as it says, in the core
    of every configuration its runs use, and changes it."""
    problems = []
    for m in all_mutants():
        configs = {core_run(r if not r.startswith("net_") else "mac8").cfg.key() for r in m.runs}
        for key in configs:
            cfg_name, text = core_verilog[key]
            try:
                out = apply_in_core(m.mutation, m.scope, text)
            except MutationError as e:
                problems.append(f"{m.scope}/{m.name} on {cfg_name}: {e}")
                continue
            if out == text:
                problems.append(f"{m.scope}/{m.name} on {cfg_name}: leaves the Verilog unchanged")
    assert not problems, "\n".join(problems)


def test_the_catalogue_spreads_over_the_core():
    parts = {m.part for m in catalogue()}
    assert parts == set(PART_MODULES) == set(PART_RUNS)
    assert len(catalogue()) >= 15
    assert len(all_mutants()) >= 30
    for m in catalogue():
        assert m.description and m.mutation.count >= 1
        assert set(PART_RUNS[m.part]) <= set(RUNS)


def test_every_unit_has_core_modules_and_runs():
    assert set(CORE_MODULES) == set(UNITS) == set(UNIT_RUNS)
    for unit, name in NOT_OBSERVABLE_IN_CORE:
        assert name in {m.name for m in contract(unit).mutations}, (unit, name)


def test_selection_refuses_unknown_names():
    with pytest.raises(CampaignError, match="unknown part"):
        select(["dma"], None)
    with pytest.raises(CampaignError, match="unknown mutant"):
        select(None, ["no_such_mutant"])
    assert {m.scope for m in select(["dma_engine"], None)} == {"dma_engine"}


def test_a_mutation_that_matches_no_instance_is_refused():
    core = ("module \\npu_core.output_stage.lut (a);\n  assign x = a;\n  assign y = a;\nendmodule\n"
            "module \\npu_core.mac (a);\n  assign z = a;\nendmodule\n")
    with pytest.raises(MutationError, match="matches no module"):
        apply_in_core(Mutation("m", "", r"assign z = a", "assign z = 0"), "lut_engine", core)
    with pytest.raises(MutationError, match="2 match"):
        apply_in_core(Mutation("m", "", r"= a;", "= 0;", count=1), "lut_engine", core)
    out = apply_in_core(Mutation("m", "", r"= a;", "= 0;", count=2), "lut_engine", core)
    assert out.count("= 0;") == 2 and "assign z = a;" in out
    # a core-level part's module
    out = apply_in_core(Mutation("m", "", r"assign z = a;", "assign z = 1;"), "mac_sequencer", core)
    assert "assign z = 1;" in out
    with pytest.raises(MutationError, match="neither a unit nor a part"):
        apply_in_core(Mutation("m", "", r"a", "b"), "no_part", core)


def test_markdown_table_and_score():
    rows = [{"unit": "dma_engine", "mutation": "a", "description": "d", "verdict": "caught", "by": "mac8", "kind": "core"},
            {"unit": "variable_sram", "mutation": "b", "description": "e", "verdict": "equivalent", "by": "",
             "kind": "unit"},
            {"unit": "dma_engine", "mutation": "c", "description": "f", "verdict": "missed", "by": "", "kind": "core"}]
    res = {"simulator": "icarus", "rows": rows, "total": 3, "score": 0.5, "seconds": 60,
           "counts": {"caught": 1, "equivalent": 1, "missed": 1, "error": 0}}
    text = markdown_table([res])
    assert "| dma_engine | `a` | d | caught by mac8 |" in text
    assert "| variable_sram (unit) | `b` | e | equivalent |" in text
    assert "**MISSED**" in text and "1/2 = **50.0%**" in text
