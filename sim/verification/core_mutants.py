"""The fault campaign on the integrated core: every RTL mutant against a regression set.

Two catalogues of Verilog mutants are made in the core's generated Verilog:

- each unit's contract mutants (sim/verification/contract.py): the same edit is made in every
  module of the core that is an instance of the unit (CORE_MODULES: a fault in the unit's Python
  design is in each instance);
- the core-level mutants (sim/verification/core_level_mutants.py): the command processor and its
  register file, the DMA engine, the MAC / elementwise / pooling sequencers, the output writer,
  the output stage's control and the VAR handling.

Each mutant runs its part's programs first (UNIT_RUNS / PART_RUNS: random tiles of
sim/vectors/random_programs.py wrapped in real programs, the variable programs, small programs on
the command processor's edges), then the regression networks (models/mlp, resnet_pool, cnn32, gru
on `tiny`, with their committed inputs), and stops at the first run that catches it. Golden runs
each program once, unmutated, for the expectations, and the unmutated core must match it on a
program before any mutant runs it; a mutant is caught when any tile's bytes or done clock, an
invocation's status, cycles, outputs or variables differ on the RTL.

    python -m sim.verification.core_mutants [--simulator icarus|verilator|both] [--part P ...]
                                            [--mutant NAME ...] [--json PATH]   (make core-mutants)

prints one line per mutant (caught or not, by which run and what differed) and the mutation score,
caught / (total - shown equivalent). A few mutants cannot be seen from inside the core at all
(NOT_OBSERVABLE_IN_CORE, each with the reason why it is equivalent there); they run their part's
programs only and are reported as such (were one caught, the claim would be wrong and is said so).
`--markdown A.json B.json` prints the table of docs/mutants.md from the campaigns' JSON files.
A sample runs in `make test` (tests/sim/verification/test_core_mutants.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from sim import seeds
from sim.cosim.program_run import result_differences
from sim.verification.contract import UNITS, contract
from sim.verification.core_level_mutants import PART_MODULES, PART_RUNS, catalogue
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

# The regression networks every mutant runs after its part's own programs (on `tiny`, with the
# inputs committed beside them); cheapest first.
NETWORKS = ("mlp", "resnet_pool", "cnn32", "gru")
RUNS = ("mac8", "mac16", "eltwise", "eltwise_corners", "pool", "pool_corners", "pool_strides", "variables",
        "var_fault",
        "cp_edges") + tuple(f"net_{n}" for n in NETWORKS)

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


# issue 15: at least this share of the mutants that are not shown equivalent must be caught
TARGET_SCORE = 0.95


class CampaignError(Exception):
    """The campaign cannot run as asked (an unknown mutant or part, a control run that fails)."""


def scope_modules(scope: str) -> str:
    """The module-name pattern of a unit (CORE_MODULES) or of a core-level part (PART_MODULES)."""
    if scope in CORE_MODULES:
        return CORE_MODULES[scope]
    if scope in PART_MODULES:
        return PART_MODULES[scope]
    raise MutationError(f"{scope!r} is neither a unit nor a part of the core")


def apply_in_core(mutation: Mutation, unit: str, text: str) -> str:
    """The core's Verilog with `mutation` made in each module of `unit` (a unit of CORE_MODULES or
    a part of PART_MODULES; the pattern must match there exactly `mutation.count` times)."""
    parts = re.split(r"(?m)^(?=module )", text)
    name_re = re.compile(r"module (" + scope_modules(unit) + r")\s*\(")
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


@dataclass(frozen=True)
class Mutant:
    """One entry of the campaign: a unit's contract mutation or a core-level one."""
    kind: str                   # "unit" or "core"
    scope: str                  # the unit (CORE_MODULES) or the part (PART_MODULES)
    mutation: Mutation

    @property
    def name(self) -> str:
        return self.mutation.name

    @property
    def runs(self) -> tuple[str, ...]:
        own = UNIT_RUNS[self.scope] if self.kind == "unit" else PART_RUNS[self.scope]
        if self.equivalent_reason:
            return own
        return own + tuple(f"net_{n}" for n in NETWORKS)

    @property
    def equivalent_reason(self) -> str | None:
        return NOT_OBSERVABLE_IN_CORE.get((self.scope, self.name))


def all_mutants() -> list[Mutant]:
    """Every unit's contract mutants, then the core-level catalogue."""
    out = [Mutant("unit", unit, m) for unit in UNITS for m in contract(unit).mutations]
    out += [Mutant("core", m.part, m.mutation) for m in catalogue()]
    return out


@dataclass
class CoreRun:
    name: str
    cfg: object
    cases: list                  # [(ProgramJob, GoldenRun)]: one job each, run in order
    programs: list               # the Program of each case

    @property
    def program(self):
        return self.programs[0]

    @property
    def job(self):
        return self.cases[0][0]

    @property
    def golden(self):
        return self.cases[0][1]


@dataclass
class Verdict:
    unit: str
    mutation: str
    description: str
    caught: bool
    by: str = ""                       # the run that caught it
    found: list[str] = field(default_factory=list)
    seconds: float = 0.0
    kind: str = "unit"
    verdict: str = ""                  # caught / equivalent / missed / error
    note: str = ""                     # why equivalent, or what went wrong
    runs: list[str] = field(default_factory=list)      # the runs it went through


def _network_cases(name: str, cfg) -> tuple[list, list]:
    import io

    from compiler.pipeline import compile_file
    from sim.cosim.program_run import prepare
    from sim.models.model_data import ModelData
    from sim.paths import REPO_ROOT

    folder = REPO_ROOT / "models" / name
    data = ModelData.of(folder)
    if data is None:
        raise CampaignError(f"models/{name} has no committed inputs (io.json)")
    program = compile_file(folder / "model.tosa", cfg, out=io.StringIO()).program
    return [prepare(program, cfg, data.all_inputs(), stop_at_first_mismatch=True)], [program]


def _fault_programs(cfg) -> list:
    """Small programs on the command processor's edges: a MAC whose unit refuses it (BAD_MODE from
    the unit), a stream without END (COMMAND_OVERRUN), a DMA that ends exactly at the input SRAM's
    last byte (allowed), a BARRIER behind a long DMA with
    commands after it (its wait shows in the cycles), 3-D DMA patterns and a full DMA queue."""
    from compiler.npu.base import CommandWriter
    from firmware_model.arch.isa import Opcode, Reg, Sram
    from firmware_model.arch.program import Placement, Program
    from firmware_model.tosa_ops.dtypes import DType
    from sim.vectors import random_programs as rp

    rng = seeds.rng(31, "core mutants cp_edges")
    programs = []
    # a MAC tile with an output type no unit accepts: the unit reports BAD_MODE
    tiles = rp.mac_tiles(cfg, rng, 2)
    tiles[1].regs[int(Reg.OFM_DTYPE)] = 0x7F
    programs.append(rp.tile_program(cfg, tiles, name="MAC refused by its unit"))

    def bare(build, source: str, consts: bytes = bytes(range(64)), outputs=()) -> Program:
        w = CommandWriter()
        build(w)
        ext_used = max([len(consts)] + [p.addr + p.nbytes for p in outputs])
        manifest = {"config": cfg.to_dict(), "source": source,
                    "memory": {"constants": {"addr": 0, "size": len(consts)}, "ext_used": ext_used},
                    "graph": {"inputs": [], "outputs": [p.to_json() for p in outputs]}, "variables": [],
                    "host_ops": [], "layers": [],
                    "stats": {"commands": len(w.commands), "tiles": 0, "npu_macs": 0, "host_macs": 0}}
        return Program(w.commands, consts, manifest)

    def no_end(w):
        w.set(Reg.OFM_C, 3)
        w.emit(Opcode.NOP)
        w.emit(Opcode.MARK, 0, 7)

    def sram_edge(w):
        w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=0, sram_addr=cfg.input_sram - 64, len0=64)
        w.emit(Opcode.END)

    def barrier(w):
        w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=0, sram_addr=0, len0=64, len1=8, sram_s1=64)
        w.emit(Opcode.BARRIER)
        for k in range(8):
            w.emit(Opcode.MARK, 0, k)
        w.emit(Opcode.END)

    # DMA patterns: a 3-D load whose external and SRAM strides differ, then loads of different
    # lengths back to back (the queue fills), all stored back to external memory and compared
    pattern_out, queue_out = Placement("dma_pattern", 512, [108], DType.INT8), Placement("dma_queue", 640, [240], DType.INT8)

    def dma_patterns(w):
        w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=0, sram_addr=0, len0=12, len1=3, len2=2,
              ext_s1=20, ext_s2=70, sram_s1=16, sram_s2=64)
        for k in range(6):
            w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=7 * k, sram_addr=256 + 40 * k, len0=5 + 3 * k)
        w.dma(Opcode.DMA_STORE, Sram.INPUT, ext=pattern_out.addr, sram_addr=0, len0=108)
        w.dma(Opcode.DMA_STORE, Sram.INPUT, ext=queue_out.addr, sram_addr=256, len0=240)
        w.emit(Opcode.END)

    programs.append(bare(dma_patterns, "DMA patterns", bytes(range(256)), (pattern_out, queue_out)))
    programs.append(bare(no_end, "no END"))
    programs.append(bare(sram_edge, "DMA at the SRAM's edge"))
    programs.append(bare(barrier, "BARRIER behind a DMA"))
    return programs


def _strided_pool_tiles(rng, n: int):
    """Random AVG POOL commands (the pooling unit's vectors, the default configuration) whose
    vertical and horizontal strides differ and whose windows cross the right edge of the input:
    where the window's column origin moves decides which taps are padding."""
    from firmware_model.arch.isa import Opcode, PoolMode, Sram
    from firmware_model.arch.registers import Registers
    from firmware_model.golden.memories import Memories
    from firmware_model.tosa_ops.dtypes import DType
    from sim.vectors import pool as pv
    from sim.vectors import random_programs as rp
    from sim.vectors.output_stage import table_run

    mem = Memories(pv.NPU)
    table_run(rng, mem, "tables")
    out = []
    for k in range(2000):
        c = pv.random_command(rng, mem, f"strided {k}", mode=int(PoolMode.AVG))
        g = c.geo
        if g.sh == g.sw or g.ow < 2 or (g.ow - 1) * g.sw + g.kw - g.pl <= g.iw:
            continue
        r = Registers(c.regs)
        end = r.ofm_addr + (r.ofm_h - 1) * r.ofm_row_stride + (r.ofm_w - 1) * r.ofm_pix_stride \
            + r.ofm_c * DType(r.ofm_dtype).size_bytes
        out.append(rp.TileSpec(Opcode.POOL, int(c.mode), dict(c.regs),
                               rp._whole(mem, (Sram.INPUT, Sram.PARAM, Sram.LUT)), (r.ofm_addr, end),
                               fill=int(rng.integers(0, 256))))
        if len(out) == n:
            return pv.NPU, out
    raise CampaignError(f"no {n} strided POOL commands in 2000 draws")


@lru_cache(maxsize=None)
def core_run(name: str) -> CoreRun:
    """Program `name`, prepared (golden's expectations) once per process."""
    from compiler.pipeline import compile_graph
    from firmware_model.arch.config import load_config
    from firmware_model.arch.isa import MacMode
    from firmware_model.tosa_ops.dtypes import DType
    from sim.cosim.program_run import prepare
    from sim.vectors import random_programs as rp
    from sim.vectors.variable_graphs import accumulator_feeds, two_accumulators

    rng = seeds.rng(31, f"core mutants {name}")
    feeds = [{}]
    if name.startswith("net_"):
        cfg = load_config("tiny")
        return CoreRun(name, cfg, *_network_cases(name[4:], cfg))
    if name == "cp_edges":
        cfg = load_config("tiny")
        programs = _fault_programs(cfg)
        return CoreRun(name, cfg, [prepare(p, cfg, [{}]) for p in programs], programs)
    if name in ("mac8", "mac16"):
        cfg = load_config("tiny")
        tiles = rp.mac_tiles(cfg, rng, 10 if name == "mac8" else 8, DType.INT8 if name == "mac8" else DType.INT16)
        if name == "mac8":      # and a tile whose int16 table is fed values past int16 (the LUT's clip)
            tiles.append(rp.int16_table_past_int16_tile(cfg, rng, len(tiles)))
            # and a DEPTHWISE tile with a strided output row and a short last window pass
            tiles.append(rp.strided_depthwise_tile(cfg, rng, len(tiles)))
            # and a one-step tile of mac.rows channels (its output engine starts early)
            tiles.append(rp.one_step_full_block_tile(cfg, rng, len(tiles)))
            # and a DEPTHWISE_PAIRED tile whose last step has one kernel row
            tiles.append(rp.paired_depthwise_tile(cfg, rng, len(tiles)))
            # and a DEPTHWISE_TRIPLE tile whose last step has one or two kernel rows
            tiles.append(rp.triple_depthwise_tile(cfg, rng, len(tiles)))
            # and a CONV2D tile reading its input from the output SRAM
            tiles.append(rp.output_sram_input_tile(cfg, rng, len(tiles)))
            # and CONV2D_LANE_PAIRS tiles of one output block (the early engine) and of two
            for blocks in (1, 2):
                tiles.append(rp.lane_paired_tile(cfg, rng, len(tiles), blocks))
            # and CONV2D_ROW_PAIRS and CONV2D_PAIRS tiles of two output blocks
            for mode in (MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS):
                tiles.append(rp.row_paired_tile(cfg, rng, len(tiles), mode))
            # and a DEPTHWISE_PACKED tile with windows of several lengths, one shorter than the stride
            tiles.append(rp.packed_depthwise_tile(cfg, rng, len(tiles)))
            # and a tile of each window mode with padding on four sides of its input box
            for mode in (MacMode.DEPTHWISE, MacMode.DEPTHWISE_PAIRED, MacMode.DEPTHWISE_TRIPLE,
                         MacMode.DEPTHWISE_PACKED):
                tiles.append(rp.padded_window_tile(cfg, rng, len(tiles), mode))
            # and a DEPTHWISE (two words a clock) and a DEPTHWISE_TRIPLE tile reading the output SRAM
            for mode in (MacMode.DEPTHWISE, MacMode.DEPTHWISE_TRIPLE):
                tiles.append(rp.output_sram_window_tile(cfg, rng, len(tiles), mode))
            # and CONV2D_ROW_PAIRS and CONV2D_PAIRS tiles of one output block, rescaled (the output
            # engine drains a pixel pair a clock, the odd pixel with its channels' records)
            for mode in (MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS):
                tiles.append(rp.row_paired_tile(cfg, rng, len(tiles), mode, blocks=1))
        program = rp.tile_program(cfg, tiles)
    elif name in ("eltwise", "eltwise_corners"):
        cfg, tiles = rp.eltwise_tiles(rng, 10, corners=name == "eltwise_corners")
        program = rp.tile_program(cfg, tiles)
    elif name in ("pool", "pool_corners"):
        cfg, tiles = rp.pool_tiles(rng, 6, corners=name == "pool_corners")
        program = rp.tile_program(cfg, tiles)
    elif name == "pool_strides":
        cfg, tiles = _strided_pool_tiles(rng, 6)
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
    return CoreRun(name, cfg, [prepare(program, cfg, feeds)], [program])


def differences(run: CoreRun, result, case: int = 0) -> list[str]:
    """What the RTL did differently from golden on case `case` of `run` (empty: nothing)."""
    job, golden = run.cases[case]
    return result_differences(job, golden, result)


def _run_case(built, run: CoreRun, case: int) -> list[str]:
    from sim.cosim.program_run import run_on_rtl
    from sim.rtl.build import SimulatorCrash

    try:
        result, bench = run_on_rtl(built, run.cases[case][0])
    except SimulatorCrash as e:
        return [f"the simulator stopped: {str(e).splitlines()[0]}"]
    found = differences(run, result, case)
    if len(run.cases) > 1 and found:
        found[0] = f"case {case}: {found[0]}"
    return found


@lru_cache(maxsize=None)
def control_differences(name: str, simulator: str) -> tuple[str, ...]:
    """What the unmutated core gets wrong on program `name` (run once per process: several units
    share a program)."""
    from sim.rtl.core import cached_core

    run = core_run(name)
    built = cached_core(run.cfg, simulator)
    found = []
    for case in range(len(run.cases)):
        found += _run_case(built, run, case)
    return tuple(found)


def run_mutant(unit: str, mutation: Mutation | None, simulator: str = "icarus",
               runs: tuple[str, ...] | None = None, check_control: bool = False) -> Verdict:
    """Run `runs` (default: the unit's or part's own programs) on the core with `mutation`
    (None: unmutated) until one differs. `check_control`: before a program's first use in this
    process, the unmutated core must run it as golden does (CampaignError if not)."""
    from sim.rtl.core import cached_core

    t0 = time.monotonic()
    kind = "unit" if unit in CORE_MODULES else "core"
    if runs is None:
        runs = UNIT_RUNS[unit] if kind == "unit" else PART_RUNS[unit]
    v = Verdict(unit, mutation.name if mutation else "(none)", mutation.description if mutation else "", False,
                kind=kind)
    for name in runs:
        run = core_run(name)
        if check_control:
            wrong = control_differences(name, simulator)
            if wrong:
                raise CampaignError(f"the UNMUTATED core already differs from golden on {name} ({simulator}): "
                                    f"{list(wrong[:3])}")
        built = cached_core(run.cfg, simulator, mutation=(unit, mutation) if mutation else None)
        v.runs.append(name)
        for case in range(len(run.cases)):
            found = _run_case(built, run, case)
            if found:
                v.caught, v.by, v.found = True, name, found
                break
        if v.caught:
            break
    v.seconds = time.monotonic() - t0
    return v


def _result(simulator: str, rows: list[Verdict], seconds: float) -> dict:
    counts = {k: sum(1 for v in rows if v.verdict == k) for k in ("caught", "equivalent", "missed", "error")}
    scored = len(rows) - counts["equivalent"]
    return {"simulator": simulator, "score": counts["caught"] / scored if scored else 1.0, "counts": counts,
            "total": len(rows), "seconds": round(seconds, 1), "rows": [asdict(v) for v in rows]}


def campaign(mutants: list[Mutant], simulator: str, out=sys.stdout, json_path: Path | None = None) -> dict:
    """Run every mutant on `simulator`; the table's rows and the score (written to `json_path`
    after each mutant, so an interrupted campaign keeps what it found)."""
    t0 = time.monotonic()
    rows = []
    for m in mutants:
        try:
            # each program is first run on the unmutated core, which must match golden
            v = run_mutant(m.scope, m.mutation, simulator, m.runs, check_control=True)
        except MutationError as e:
            v = Verdict(m.scope, m.name, m.mutation.description, False, kind=m.kind, verdict="error", note=str(e))
        else:
            v.kind = m.kind
            why = m.equivalent_reason
            if v.caught:
                v.verdict = "caught"
                if why:
                    v.note = "listed as not observable in the core, but caught: the reason is wrong"
            elif why:
                v.verdict, v.note = "equivalent", why
            else:
                v.verdict = "missed"
        what = (f"caught by {v.by}: {v.found[0]}" if v.verdict == "caught"
                else f"not observable in the core: {v.note}" if v.verdict == "equivalent"
                else f"ERROR: {v.note}" if v.verdict == "error" else f"NOT CAUGHT by {', '.join(v.runs)}")
        print(f"{simulator:9s} {m.scope:18s} {m.name:32s} {what}  ({v.seconds:.0f} s)", file=out, flush=True)
        rows.append(v)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(_result(simulator, rows, time.monotonic() - t0), indent=1))
    res = _result(simulator, rows, time.monotonic() - t0)
    c = res["counts"]
    print(f"{simulator}: {len(rows)} mutants, {c['caught']} caught, {c['equivalent']} shown equivalent, "
          f"{c['missed']} missed, {c['error']} errors: mutation score {c['caught']}/{len(rows) - c['equivalent']} = "
          f"{100 * res['score']:.1f}% ({res['seconds'] / 60:.1f} min)", file=out, flush=True)
    return res


def merge_results(results: list[dict]) -> list[dict]:
    """Campaign results of the same simulator made one (a campaign run in parts, or a mutant run
    again): a later row of a mutant replaces an earlier one; the counts and the score are counted
    again from the rows, the times added up."""
    merged: dict[str, dict] = {}
    for r in results:
        m = merged.setdefault(r["simulator"], {"simulator": r["simulator"], "rows": {}, "seconds": 0.0})
        m["seconds"] += r["seconds"]
        for row in r["rows"]:
            m["rows"][(row["unit"], row["mutation"])] = row
    out = []
    for m in merged.values():
        rows = list(m["rows"].values())
        counts = {k: sum(1 for v in rows if v["verdict"] == k) for k in ("caught", "equivalent", "missed", "error")}
        scored = len(rows) - counts["equivalent"]
        out.append({"simulator": m["simulator"], "rows": rows, "counts": counts, "total": len(rows),
                    "score": counts["caught"] / scored if scored else 1.0, "seconds": round(m["seconds"], 1)})
    return out


def markdown_table(results: list[dict]) -> str:
    """The table of docs/mutants.md from campaign results (one per simulator, or parts of one:
    merge_results)."""
    results = merge_results(results)
    sims = [r["simulator"] for r in results]
    by = [{(row["unit"], row["mutation"]): row for row in r["rows"]} for r in results]
    lines = ["| part | mutant | what it breaks | " + " | ".join(sims) + " |",
             "|---|---|---|" + "---|" * len(sims)]
    keys = list(dict.fromkeys(k for b in by for k in b))
    order = {(m.scope, m.name): i for i, m in enumerate(all_mutants())}
    keys.sort(key=lambda k: order.get(k, len(order)))
    for key in keys:
        row = next(b[key] for b in by if key in b)
        cells = []
        for b in by:
            r = b.get(key)
            if r is None:
                cells.append("not run")
            elif r["verdict"] == "caught":
                cells.append(f"caught by {r['by']}")
            elif r["verdict"] == "equivalent":
                cells.append("equivalent")
            else:
                cells.append(f"**{r['verdict'].upper()}**")
        kind = "" if row.get("kind") == "core" else " (unit)"
        lines.append(f"| {row['unit']}{kind} | `{row['mutation']}` | {row['description']} | " + " | ".join(cells) + " |")
    lines.append("")
    for r in results:
        c = r["counts"]
        lines.append(f"- **{r['simulator']}**: {r['total']} mutants, {c['caught']} caught, {c['equivalent']} shown "
                     f"equivalent, {c['missed']} missed, {c['error']} errors: mutation score "
                     f"{c['caught']}/{r['total'] - c['equivalent']} = **{100 * r['score']:.1f}%**, "
                     f"{r['seconds'] / 60:.0f} min")
    return "\n".join(lines) + "\n"


def select(parts: list[str] | None, names: list[str] | None) -> list[Mutant]:
    mutants = all_mutants()
    known_scopes = set(CORE_MODULES) | set(PART_MODULES)
    for p in parts or ():
        if p not in known_scopes:
            raise CampaignError(f"unknown part {p!r}; known: {', '.join(sorted(known_scopes))}")
    if parts:
        mutants = [m for m in mutants if m.scope in parts]
    if names:
        unknown = set(names) - {m.name for m in mutants}
        if unknown:
            raise CampaignError(f"unknown mutant(s) {sorted(unknown)}")
        mutants = [m for m in mutants if m.name in names]
    return mutants


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.verification.core_mutants", description=__doc__.splitlines()[0])
    ap.add_argument("--part", "--unit", action="append", dest="part",
                    help="only this unit or core part (repeatable)")
    ap.add_argument("--mutant", action="append", help="only this mutant (repeatable)")
    ap.add_argument("--simulator", default="icarus", choices=("icarus", "verilator", "both"))
    ap.add_argument("--json", type=Path, help="write the results here (with --simulator both: one file per "
                                              "simulator, the simulator's name added to the stem)")
    ap.add_argument("--markdown", nargs="+", type=Path, metavar="JSON",
                    help="print the markdown table of these results files (parts of a campaign, or "
                         "mutants run again, merged per simulator) and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        results = []
        for p in args.markdown:
            try:
                results.append(json.loads(p.read_text()))
            except (OSError, ValueError) as e:
                print(f"core_mutants: cannot read campaign results {p}: {e}", file=sys.stderr)
                return 2
        print(markdown_table(results), end="")
        return 0
    try:
        mutants = select(args.part, args.mutant)
        sims = ("icarus", "verilator") if args.simulator == "both" else (args.simulator,)
        results = []
        for sim in sims:
            path = None
            if args.json:
                path = args.json if len(sims) == 1 else args.json.with_name(f"{args.json.stem}-{sim}{args.json.suffix}")
            results.append(campaign(mutants, sim, json_path=path))
    except CampaignError as e:
        print(f"core_mutants: {e}", file=sys.stderr)
        return 2
    return 0 if all(r["score"] >= TARGET_SCORE and r["counts"]["error"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
