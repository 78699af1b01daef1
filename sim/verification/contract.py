"""The contract every datapath unit of hw/ keeps, and the registry of units that keep it.

Each unit's vectors module (sim/vectors/<unit>.py) ends with a `CONTRACT`:

- `mutations`: named edits of the unit's generated Verilog (sim.verification.unit_bench.Mutation);
- `mutant_runs()`: the vector runs every mutant must fail, and the unmutated design must pass;
- `run(simulator, runs, mutation)`: those runs on a simulator (the bench of that unit);
- `lint()`: the unit's own Verilog through `verilator --lint-only -Wall`, justified waivers only;
- `amaranth()`: the Python design on amaranth.sim against golden; raises AssertionError.

tests/hw/test_unit_contract.py runs the contract of every unit in `UNITS` (one parametrised
test per clause), so a new unit gets every check by adding one line here. The unit's own
functional suites, coverage and throughput stay in tests/hw/test_<unit>.py.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

# unit (its hw/ module) -> the vectors module that holds its CONTRACT
UNITS = {
    "rescale_unit": "sim.vectors.rescale",
    "lut_engine": "sim.vectors.lut",
    "mac_array": "sim.vectors.mac_array",
    "variable_sram": "sim.vectors.variable_sram",
    "eltwise_unit": "sim.vectors.eltwise",
    "pool_unit": "sim.vectors.pool",
}

# Mutants run on Icarus: a build takes about a second (Verilator's takes tens).
MUTANT_SIMULATOR = "icarus"


@dataclass(frozen=True)
class UnitContract:
    unit: str
    mutations: tuple
    mutant_runs: Callable[[], list]
    run: Callable[..., object]            # (simulator, runs, mutation=None) -> UnitRunResults
    lint: Callable[[], object]            # () -> LintReport
    amaranth: Callable[[], None]


def vectors_module(unit: str):
    return importlib.import_module(UNITS[unit])


def contract(unit: str) -> UnitContract:
    return vectors_module(unit).CONTRACT
