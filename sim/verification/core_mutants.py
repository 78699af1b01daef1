"""Each unit's Verilog mutants, run inside the core: the whole-program bench must catch them too.

A unit's contract (sim/verification/contract.py) lists mutations of its generated Verilog that its
own bench catches. Here the same edit is made to the core's Verilog, in every module that is an
instance of the unit (CORE_MODULES: a fault in the unit's Python design is in each instance), and
the core runs programs that use the unit (UNIT_RUNS): random tiles of sim/vectors/random_programs.py
wrapped in real programs, or the variable programs. Golden runs each program once, unmutated, for
the expectations; a mutant is caught when any tile's bytes or done clock, an invocation's status,
cycles, outputs or variables differ on the RTL.

    python -m sim.verification.core_mutants [--unit U ...] [--simulator icarus]   (make core-mutants)

prints one line per mutant: caught or not, by which run and what differed. A few mutants cannot
be seen from inside the core at all (NOT_OBSERVABLE_IN_CORE, each with the reason); they are
reported as such. A sample (one mutant per unit) runs in `make test`
(tests/sim/verification/test_core_mutants.py).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache

from sim import seeds
from sim.cosim.program_run import result_differences
from sim.verification.contract import UNITS, contract
from sim.verification.unit_bench import Mutation, MutationError

# unit -> the core modules that are instances of it (names as Amaranth gives them)
CORE_MODULES = {
    "rescale_unit": r"\\npu_core\.(output_stage\.rescale|eltwise\.front\.rescale_[ab])",
    "lut_engine": r"\\npu_core\.output_stage\.lut",
    "mac_array": r"\\npu_core\.mac\.mac_array",
    "variable_sram": r"\\npu_core\.variable_sram",
    # the elementwise and pooling units are their fronts plus the shared output stage
    "eltwise_unit": r"\\npu_core\.(eltwise\.front|output_stage)",
    "pool_unit": r"\\npu_core\.(pool\.front|output_stage)",
}

# unit -> the programs that exercise it, cheapest first (RUNS below)
UNIT_RUNS = {
    "rescale_unit": ("mac8", "eltwise", "eltwise_corners", "mac16"),
    "lut_engine": ("mac8", "eltwise", "mac16", "eltwise_corners"),
    "mac_array": ("mac8", "mac16"),
    "variable_sram": ("variables", "var_fault"),
    "eltwise_unit": ("eltwise", "eltwise_corners"),
    "pool_unit": ("pool", "pool_corners"),
}

# Mutants of checks the command processor makes before the unit sees the request, or of inputs
# and outputs the core ties off: no program can tell them apart inside the core (their own bench
# catches them). Listed with the reason rather than counted as missed.
NOT_OBSERVABLE_IN_CORE = {
    ("rescale_unit", "uint16_read_signed"):
        "the core's rescale units read int32 (the elementwise input stage zero-extends unsigned "
        "elements itself, before its rescale) or int48 (the output stage); their input_unsigned is tied to 0",
    ("variable_sram", "read_before_write_unchecked"):
        "the command processor ends a VAR READ of an unwritten slot before the SRAM sees a request",
    ("variable_sram", "alignment_unchecked"):
        "the command processor refuses a misaligned VAR_ADDR (ADDRESS_RANGE) before any request",
    ("variable_sram", "refused_data_kept"):
        "no request the command processor lets through is refused, so no refused read returns data",
    ("variable_sram", "error_not_sticky"):
        "the core does not use the SRAM's error outputs (the command processor's checks come first)",
}


def apply_in_core(mutation: Mutation, unit: str, text: str) -> str:
    """The core's Verilog with `mutation` made in each module of `unit` (the pattern must match
    there exactly as often as in the unit's own Verilog)."""
    parts = re.split(r"(?m)^(?=module )", text)
    name_re = re.compile(r"module (" + CORE_MODULES[unit] + r")\s*\(")
    changed = 0
    for k, part in enumerate(parts):
        if not name_re.match(part):
            continue
        found = len(re.findall(mutation.pattern, part, flags=re.MULTILINE))
        if found == 0:
            continue
        if found != mutation.count:
            raise MutationError(f"mutation {mutation.name!r}: {found} match(es) in core module "
                                f"{part.split('(')[0][7:]}, expected {mutation.count}")
        parts[k] = re.sub(mutation.pattern, mutation.replacement, part, flags=re.MULTILINE)
        changed += 1
    if not changed:
        raise MutationError(f"mutation {mutation.name!r} matches no module of {unit} in the core")
    return "".join(parts)


@dataclass
class CoreRun:
    name: str
    cfg: object
    job: object
    golden: object
    program: object


@dataclass
class Verdict:
    unit: str
    mutation: str
    description: str
    caught: bool
    by: str = ""                       # the run that caught it
    found: list[str] = field(default_factory=list)
    seconds: float = 0.0


@lru_cache(maxsize=None)
def core_run(name: str) -> CoreRun:
    """Program `name`, prepared (golden's expectations) once per process."""
    from compiler.pipeline import compile_graph
    from firmware_model.arch.config import load_config
    from firmware_model.tosa_ops.dtypes import DType
    from sim.cosim.program_run import prepare
    from sim.vectors import random_programs as rp
    from sim.vectors.variable_graphs import accumulator_feeds, two_accumulators

    rng = seeds.rng(31, f"core mutants {name}")
    feeds = [{}]
    if name in ("mac8", "mac16"):
        cfg = load_config("tiny")
        program = rp.tile_program(cfg, rp.mac_tiles(cfg, rng, 10 if name == "mac8" else 8,
                                                    DType.INT8 if name == "mac8" else DType.INT16))
    elif name in ("eltwise", "eltwise_corners"):
        cfg, tiles = rp.eltwise_tiles(rng, 10, corners=name == "eltwise_corners")
        program = rp.tile_program(cfg, tiles)
    elif name in ("pool", "pool_corners"):
        cfg, tiles = rp.pool_tiles(rng, 6, corners=name == "pool_corners")
        program = rp.tile_program(cfg, tiles)
    elif name == "variables":
        cfg = load_config("tiny")
        program = compile_graph(two_accumulators(), cfg).program
        feeds = accumulator_feeds(rng, 3)
    elif name == "var_fault":
        cfg = load_config("tiny")
        program = rp.faulting_variable_program(cfg)
    else:
        raise KeyError(name)
    job, golden = prepare(program, cfg, feeds)
    return CoreRun(name, cfg, job, golden, program)


def differences(run: CoreRun, result) -> list[str]:
    """What the RTL did differently from golden on `run` (empty: nothing)."""
    return result_differences(run.job, run.golden, result)


@lru_cache(maxsize=None)
def control_differences(name: str, simulator: str) -> tuple[str, ...]:
    """What the unmutated core gets wrong on program `name` (run once per process: several units
    share a program)."""
    from sim.cosim.program_run import run_on_rtl
    from sim.rtl.core import cached_core

    run = core_run(name)
    result, bench = run_on_rtl(cached_core(run.cfg, simulator), run.job)
    return tuple(differences(run, result))


def run_mutant(unit: str, mutation: Mutation | None, simulator: str = "icarus") -> Verdict:
    """Run the unit's programs on the core with `mutation` (None: unmutated) until one differs."""
    from sim.cosim.program_run import run_on_rtl
    from sim.rtl.core import cached_core

    t0 = time.monotonic()
    v = Verdict(unit, mutation.name if mutation else "(none)", mutation.description if mutation else "", False)
    for name in UNIT_RUNS[unit]:
        run = core_run(name)
        built = cached_core(run.cfg, simulator, mutation=(unit, mutation) if mutation else None)
        result, bench = run_on_rtl(built, run.job)
        found = differences(run, result)
        if found:
            v.caught, v.by, v.found = True, name, found
            break
    v.seconds = time.monotonic() - t0
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.verification.core_mutants", description=__doc__.splitlines()[0])
    ap.add_argument("--unit", action="append", choices=list(UNITS), help="only this unit (repeatable)")
    ap.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"))
    args = ap.parse_args(argv)
    units = args.unit or list(UNITS)
    missed, counts = 0, {"caught": 0, "not observable": 0}
    for unit in units:
        for name in UNIT_RUNS[unit]:
            wrong = control_differences(name, args.simulator)
            if wrong:
                print(f"{unit}: the UNMUTATED core already differs from golden on {name}: {list(wrong[:3])}")
                return 1
        for mutation in contract(unit).mutations:
            v = run_mutant(unit, mutation, args.simulator)
            why = NOT_OBSERVABLE_IN_CORE.get((unit, mutation.name))
            if v.caught:
                verdict = f"caught by {v.by}: {v.found[0]}"
                counts["caught"] += 1
            elif why:
                verdict = f"not observable in the core: {why}"
                counts["not observable"] += 1
            else:
                verdict = "NOT CAUGHT"
                missed += 1
            print(f"{unit:14s} {v.mutation:30s} {verdict}  ({v.seconds:.0f} s)", flush=True)
    print(f"{counts['caught']} caught, {counts['not observable']} not observable in the core, "
          f"{missed} missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
