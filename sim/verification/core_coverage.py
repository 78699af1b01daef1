"""Functional coverage of the integrated core, sampled from what the scoreboard verified.

Only what the RTL was seen to do right is counted: a compute tile when the scoreboard found its
bytes and done clock equal to golden's; a program's commands and VAR kinds for an invocation whose
status, cycles, outputs and variable SRAM all matched. The model is cocotb-coverage's (cover points
with bins, crosses), so the files are its XML, merged across runs by its `merge_coverage`:

| item | bins | counted per |
|---|---|---|
| core.command | every opcode, with its SRAM (DMA_LOAD, DMA_STORE, FILL) or mode (MAC, ELTWISE, POOL, VAR) | invocation that ran it |
| core.mac.mode_x_dtype | MAC mode x input type | tile |
| core.mac.out_dtype | the type the MAC tile stores | tile |
| core.eltwise.op_x_dtype | ELTWISE operation x operand A's type | tile |
| core.pool.mode_x_dtype | POOL mode x input type | tile |
| core.edges.{MAC,POOL} | where the tile sits in its layer: rows x columns, each first / last / only / interior | tile |
| core.channels | unit x full or partial channel block (a tile's channels not a multiple of the lanes) | tile |
| core.stall | unit x whether the command processor stalled (DMA queue full or DMA busy) since the previous tile | tile |
| core.var | each VAR kind: INIT that loads / that keeps, READ, WRITE, CHECK, MARK, and a READ or CHECK of an unwritten slot (the VAR_READ_BEFORE_WRITE fault) | invocation |

Bins no legal program can reach are not bins: UNREACHABLE lists them with the reason.

    python -m sim.verification.core_coverage [--sim verilator] [-o DIR]   (make coverage)

runs the closing regression: the networks in models/ on `tiny` and `default`, and the random and
variable programs of the mutant campaign, on the RTL; merges every run's coverage into
DIR/coverage.xml (default build/coverage) and prints the summary with every hole. `npu sim` writes
its run's coverage.xml beside report.json, and `npu regress` merges its runs' into its folder.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from firmware_model.errors import NpuBenchError
from firmware_model.arch.isa import (DEPTHWISE_MODES, PIXEL_PAIR_MODES, EltOp, MacMode, Opcode, PoolMode, Reg, Sram,
                                     Status, VarOp)
from firmware_model.tosa_ops.dtypes import DType

SRAM_NAMES = [s.name for s in Sram]
# Commands the ISA refuses (the RTL and golden end the invocation with BAD_MODE or BAD_OPCODE):
# not bins of what a program can do (their refusal is the fault campaign's cp_edges program's)
UNREACHABLE = {
    "DMA_STORE.LUT": "BAD_MODE: the DMA cannot read the LUT SRAM",
    "LUT": "reserved opcode: a table is ELTWISE COPY with LUT_MODE set",
}


# (mode, input type) pairs of MAC the compiler never emits
UNREACHABLE_MAC = {("MATMUL", "INT16"): "the compiler lowers only int8 x int8 MATMUL to the NPU (int16 runs on the "
                                        "host); the array's int16 path is CONV2D INT16's",
                   **{(m.name, "INT16"): "BAD_MODE: the window modes take int8 inputs (rule 'depthwise operands')"
                      for m in DEPTHWISE_MODES},
                   **{(m.name, "INT16"): "BAD_MODE: the pixel-pair modes take int8 inputs (rule 'pixel pairs')"
                      for m in PIXEL_PAIR_MODES}}
# (mode, input type) pairs of POOL no TOSA op maps to
UNREACHABLE_POOL = {("AVG", "INT32"): "AVG_POOL2D takes int8 and int16 only (TOSA 1.0)"}


def command_bins() -> list[str]:
    bins = ["NOP", "SET", "MARK", "BARRIER", "HOST", "END"]
    bins += [f"{op}.{s}" for op in ("DMA_LOAD", "DMA_STORE", "FILL") for s in SRAM_NAMES]
    bins += [f"MAC.{m.name}" for m in MacMode] + [f"ELTWISE.{m.name}" for m in EltOp]
    bins += [f"POOL.{m.name}" for m in PoolMode] + [f"VAR.{m.name}" for m in VarOp]
    return [b for b in bins if b not in UNREACHABLE]


def command_bin(op: Opcode, sub: int) -> str:
    if op in (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL):
        return f"{op.name}.{_name(Sram, sub)}"
    mode = {Opcode.MAC: MacMode, Opcode.ELTWISE: EltOp, Opcode.POOL: PoolMode, Opcode.VAR: VarOp}.get(op)
    return f"{op.name}.{_name(mode, sub)}" if mode else op.name


def _name(enum, value) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"?{value}"


def _dtype(value) -> str:
    return _name(DType, value)


POSITIONS = ["first", "last", "only", "interior"]
VAR_BINS = ["INIT loaded", "INIT kept", "READ", "WRITE", "CHECK", "MARK", "read before write (fault)"]
MAC_DTYPES, ELT_DTYPES, POOL_DTYPES = ["INT8", "INT16"], ["INT8", "INT16", "INT32"], ["INT8", "INT16", "INT32"]


def _position(lo: int, n: int, extent: int) -> str:
    first, last = lo == 0, lo + n >= extent
    return "only" if first and last else "first" if first else "last" if last else "interior"


class CoreCoverage:
    """The cover items (cocotb-coverage's global database, cleared when made, so that each run's
    file holds that run's hits only) and the samplers."""

    def __init__(self):
        from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db

        self.db = coverage_db
        coverage_db.clear()
        self.samples = 0
        self.unexpected: set[str] = set()   # commands seen whose bin UNREACHABLE says cannot happen

        @CoverPoint("core.command", vname="kind", bins=command_bins())
        def command(kind):
            pass

        @CoverPoint("core.mac.mode_x_dtype", bins=[(m.name, d) for m in MacMode for d in MAC_DTYPES
                                                    if f"MAC.{m.name}" not in UNREACHABLE
                                                    and (m.name, d) not in UNREACHABLE_MAC])
        def mac_mode(mode, dtype):
            pass

        @CoverPoint("core.mac.out_dtype", vname="dtype", bins=["INT8", "INT16", "INT32", "INT48"])
        def mac_out(dtype):
            pass

        @CoverPoint("core.eltwise.op_x_dtype", bins=[(m.name, d) for m in EltOp for d in ELT_DTYPES])
        def eltwise(op, dtype):
            pass

        @CoverPoint("core.pool.mode_x_dtype", bins=[(m.name, d) for m in PoolMode for d in POOL_DTYPES
                                                     if (m.name, d) not in UNREACHABLE_POOL])
        def pool(mode, dtype):
            pass

        @CoverPoint("core.edges.MAC.rows", vname="rows", bins=POSITIONS)
        @CoverPoint("core.edges.MAC.cols", vname="cols", bins=POSITIONS)
        @CoverCross("core.edges.MAC.rows_x_cols", items=["core.edges.MAC.rows", "core.edges.MAC.cols"])
        def mac_edges(rows, cols):
            pass

        @CoverPoint("core.edges.POOL.rows", vname="rows", bins=POSITIONS)
        @CoverPoint("core.edges.POOL.cols", vname="cols", bins=POSITIONS)
        @CoverCross("core.edges.POOL.rows_x_cols", items=["core.edges.POOL.rows", "core.edges.POOL.cols"])
        def pool_edges(rows, cols):
            pass

        @CoverPoint("core.channels", bins=[(u, b) for u in ("MAC", "POOL") for b in ("full", "partial")])
        def channels(unit, block):
            pass

        @CoverPoint("core.stall", bins=[(u, s) for u in ("MAC", "ELTWISE", "POOL") for s in ("stalled", "no stall")])
        def stall(unit, state):
            pass

        @CoverPoint("core.var", vname="kind", bins=VAR_BINS)
        def var(kind):
            pass

        self._command, self._mac_mode, self._mac_out, self._eltwise, self._pool = command, mac_mode, mac_out, eltwise, pool
        self._mac_edges, self._pool_edges, self._channels, self._stall, self._var = \
            mac_edges, pool_edges, channels, stall, var

    # ---- sampling ------------------------------------------------------------------------
    def sample_run(self, program, cfg, job, golden, result) -> int:
        """Sample one run on the RTL: `job`, `golden` from program_run.prepare, `result` the RTL's
        ProgramResult. Returns the tiles counted."""
        from sim.cosim.program_run import invocation_differences

        if result is None:
            return 0
        meta = {t["id"]: t for t in program.tiles}
        extents = _layer_extents(program)
        counted = 0
        for k, (exp, r) in enumerate(zip(job.invocations, result.invocations)):
            checks = {c.command_index: c for c in r.tiles}
            prev_stall = 0
            for t in exp.tiles:
                c = checks.get(t.command_index)
                stalled = t.stall_before > prev_stall
                prev_stall = t.stall_before
                if c is None or not c.ok:
                    continue
                self._tile(t, program.commands[t.command_index].sub, meta.get(t.tile_id), extents, cfg, stalled)
                counted += 1
            matched = not invocation_differences(exp, golden.outputs[k], r)
            if not matched:
                continue
            if exp.status == Status.OK:
                for kind in sorted({command_bin(c.opcode, c.sub) for c in program.commands}):
                    if kind in UNREACHABLE:
                        self.unexpected.add(kind)
                    else:
                        self._command(kind)
            elif exp.status == Status.VAR_READ_BEFORE_WRITE:
                self._var("read before write (fault)")
            for kind in golden.var_kinds[k] if k < len(golden.var_kinds) else {}:
                self._var(kind)
        self.samples += counted
        return counted

    def _tile(self, t, sub: int, meta: dict | None, extents: dict, cfg, stalled: bool) -> None:
        regs = t.regs
        unit = t.opcode
        self._stall(unit, "stalled" if stalled else "no stall")
        if unit == "MAC":
            self._mac_mode(_name(MacMode, sub), _dtype(regs.get(Reg.IFM_DTYPE, 0)))
            self._mac_out(_dtype(regs.get(Reg.OFM_DTYPE, 0)))
        elif unit == "ELTWISE":
            self._eltwise(_name(EltOp, sub), _dtype(regs.get(Reg.ELT_A_DTYPE, 0)))
        elif unit == "POOL":
            self._pool(_name(PoolMode, sub), _dtype(regs.get(Reg.IFM_DTYPE, 0)))
        if unit in ("MAC", "POOL") and meta is not None and "y0" in meta:
            h, w, _ = extents.get(meta["layer"], (0, 0, 0))
            rows, cols = _position(meta["y0"], meta["th"], h), _position(meta["x0"], meta["tw"], w)
            (self._mac_edges if unit == "MAC" else self._pool_edges)(rows, cols)
            lanes = cfg.mac_rows if unit == "MAC" else cfg.mac_cols
            self._channels(unit, "partial" if meta["tc"] % lanes else "full")

    # ---- output --------------------------------------------------------------------------
    def export(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db.export_to_xml(str(path))
        return path


def _layer_extents(program) -> dict[int, tuple[int, int, int]]:
    """Each layer's output rows, columns and channels, from its tiles' boxes."""
    out: dict[int, tuple[int, int, int]] = {}
    for t in program.tiles:
        if "y0" not in t:
            continue
        h, w, c = out.get(t["layer"], (0, 0, 0))
        out[t["layer"]] = (max(h, t["y0"] + t["th"]), max(w, t["x0"] + t["tw"]), max(c, t["c0"] + t["tc"]))
    return out


# ---- merged files and their summary -------------------------------------------------------------

def merge(files: list[Path], out: Path) -> Path | None:
    """cocotb-coverage's merge of the runs' XML files (hits summed) into `out`."""
    from cocotb_coverage.coverage import merge_coverage

    files = [str(f) for f in files if Path(f).exists()]
    if not files:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    if len(files) == 1:
        out.write_text(Path(files[0]).read_text())
    else:
        merge_coverage(logging.getLogger("npu-bench.coverage").debug, str(out), *files)
    return out



# legal DMA transfers no compiled program makes (the compiler's data flow never needs them)
_NOT_EMITTED = "legal, but the compiler's data flow never issues it and no random or directed program does yet"

# Holes the closing regression leaves, each with why (not unreachable: no stimulus reaches them yet)
EXPLAINED_HOLES = {
    **{("core.command", kind): _NOT_EMITTED for kind in
       ("DMA_LOAD.VARIABLE", "DMA_STORE.INPUT", "DMA_STORE.WEIGHT", "DMA_STORE.PARAM", "DMA_STORE.VARIABLE", "FILL.PARAM", "FILL.LUT",
        "FILL.VARIABLE")},
    ("core.stall", "('MAC', 'no stall')"):
        "every MAC tile of a compiled or random program is issued right behind its own DMA loads, which "
        "are still in flight when it is decoded; a program that reuses resident operands would reach it",
    ("core.stall", "('ELTWISE', 'no stall')"):
        "likewise: every ELTWISE tile loads its operands just before it",
}


def holes(path: Path) -> list[tuple[str, str]]:
    """(item, bin) of every bin with fewer hits than its item asks, from a coverage XML file."""
    import xml.etree.ElementTree as ET

    found = []
    for item in ET.parse(path).getroot().iter():
        at_least = item.get("at_least")
        if at_least is None:
            continue
        for b in item:
            if b.get("hits") is not None and int(b.get("hits")) < int(at_least):
                found.append((item.get("abs_name", item.tag).removeprefix("top."), b.get("bin")))
    return found


def summary(path: Path) -> str:
    """A text summary of a coverage XML file: each item's bins hit, then every hole."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    lines = [f"coverage: {root.get('coverage')}/{root.get('size')} bins ({root.get('cover_percentage')}%) in {path}"]
    for item in root.iter():
        if item.get("at_least") is None:
            continue
        lines.append(f"  {item.get('abs_name', '').removeprefix('top.'):34s} {item.get('coverage'):>4s}/"
                     f"{item.get('size'):<4s} {item.get('cover_percentage')}%")
    found = holes(path)
    unexplained = [h for h in found if h not in EXPLAINED_HOLES]
    lines.append(f"holes: {len(found)}, {len(unexplained)} unexplained" + ("" if found else " (every bin hit)"))
    lines += [f"  {item}: {b}" + (f"  (explained: {EXPLAINED_HOLES[(item, b)]})" if (item, b) in EXPLAINED_HOLES
                                   else "  UNEXPLAINED") for item, b in found]
    lines.append(f"not bins (commands the ISA refuses): {len(UNREACHABLE)}; see "
                 "sim/verification/core_coverage.UNREACHABLE")
    return "\n".join(lines)


# ---- the closing regression ---------------------------------------------------------------------

RANDOM_RUNS = ("mac8", "mac16", "eltwise", "eltwise_corners", "pool", "pool_corners", "variables", "var_fault",
               "cp_edges", "pool_strides")
# committed conformance tests (tests/data/conformance) that reach what the networks do not: MATMUL
# with run-time weights (MAC.MATMUL, FILL.WEIGHT), pooling layers tiled by rows on `tiny`
CONFORMANCE_FOLDERS = ("matmul", "avg_pool2d", "max_pool2d", "conv2d_3x3", "conv2d_5x5")
# ... also on `tiny` with a 64-byte output SRAM (convolutions split by rows) and the pooling tests
# with a 32-byte one (split by rows and columns at once, into first, interior and last tiles): the
# shipped configurations never need it for tests this small
SMALL_OUTPUT = {"sram.output=64": CONFORMANCE_FOLDERS, "sram.output=32": ("avg_pool2d", "max_pool2d")}


def closing_regression(out: Path, simulator: str = "verilator", configs=("tiny", "default"),
                       log=sys.stdout) -> tuple[Path, list[str]]:
    """The networks of models/ on `configs` and the campaign's random programs, on the RTL; every
    run's coverage in out/runs/, merged into out/coverage.xml; and the commands run that
    UNREACHABLE says cannot be (then UNREACHABLE is wrong)."""
    from compiler.pipeline import compile_file
    from firmware_model.arch.config import load_config
    from sim.cosim.program_run import prepare, run_on_rtl
    from sim.models.model_data import ModelData
    from sim.paths import MODELS_DIR, TEST_DATA
    from sim.rtl.core import cached_core
    from sim.verification.core_mutants import core_run

    runs_dir = out / "runs"
    files = []
    unexpected: set[str] = set()

    def one(name, program, cfg, job, golden):
        t0 = time.monotonic()
        cov = CoreCoverage()
        result, bench = run_on_rtl(cached_core(cfg, simulator), job)
        n = cov.sample_run(program, cfg, job, golden, result)
        unexpected.update(cov.unexpected)
        files.append(cov.export(runs_dir / f"{name}.xml"))
        print(f"  {name:32s} {n:6d} tiles sampled ({time.monotonic() - t0:.1f} s)", file=log, flush=True)

    for cfg_name in configs:
        cfg = load_config(cfg_name)
        for model in sorted(MODELS_DIR.glob("*/model.tosa")):
            data = ModelData.of(model)
            if data is None or model.parent.name == "blazeface" and cfg_name == "tiny":
                continue      # blazeface on tiny: 23.7 M cycles, and nothing its default run lacks
            feeds = data.all_inputs()
            program = compile_file(model, cfg, out=io.StringIO(),
                                   input_shapes={n: a.shape for n, a in feeds[0].items()}).program
            job, golden = prepare(program, cfg, feeds)
            one(f"{model.parent.name}-{cfg_name}", program, cfg, job, golden)
    for name in RANDOM_RUNS:      # the mutant campaign's programs (sim/verification/core_mutants.core_run)
        run = core_run(name)
        for program, (job, golden) in zip(run.programs, run.cases):
            one(f"random-{name}", program, run.cfg, job, golden)
    program, cfg, feeds = control_program()
    job, golden = prepare(program, cfg, feeds)
    one("random-control", program, cfg, job, golden)
    variants = [(load_config("tiny"), CONFORMANCE_FOLDERS)]
    variants += [(load_config("tiny", [key]), folders) for key, folders in SMALL_OUTPUT.items()]
    for cfg, folders in variants:
        for folder in folders:
            for test in sorted((TEST_DATA / "conformance" / folder).glob("*/desc.json")):
                desc = json.loads(test.read_text())
                if desc["expected_failure"]:
                    continue
                feeds = [{n: np.load(test.parent / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}]
                try:
                    program = compile_file(test.parent / desc["tosa_file"], cfg, out=io.StringIO(),
                                           input_shapes={n: a.shape for n, a in feeds[0].items()}).program
                except NpuBenchError as e:      # a test the configuration cannot take: said, not sampled
                    print(f"  {test.parent.name}: not compiled for tiny: {e}", file=log)
                    continue
                if not program.tiles:
                    continue                    # ran on the host: nothing for the RTL
                job, golden = prepare(program, cfg, feeds)
                one(f"conformance-{cfg.report_key}-{test.parent.name}"[:70], program, cfg, job, golden)
    return merge(files, out / "coverage.xml"), sorted(unexpected)


def control_program():
    """(program, configuration, inputs) with NOP and BARRIER, which no compiled program has:
    the mutant campaign's MAC tiles, then both before END."""
    from firmware_model.arch.isa import Command
    from firmware_model.arch.program import Program
    from sim.verification.core_mutants import core_run

    run = core_run("mac8")
    commands = list(run.program.commands)
    commands[-1:-1] = [Command(Opcode.NOP), Command(Opcode.BARRIER), Command(Opcode.NOP)]
    return Program(commands, run.program.constants, run.program.manifest), run.cfg, [{}]


def main(argv: list[str] | None = None) -> int:
    from sim.paths import BUILD_ROOT

    ap = argparse.ArgumentParser(prog="python -m sim.verification.core_coverage", description=__doc__.splitlines()[0])
    ap.add_argument("--sim", dest="simulator", default="verilator", choices=("verilator", "icarus"))
    ap.add_argument("-o", "--output-dir", default=str(BUILD_ROOT / "coverage"))
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    merged, unexpected = closing_regression(Path(args.output_dir), args.simulator)
    print(summary(merged))
    if unexpected:
        print(f"commands run that UNREACHABLE says no program has: {', '.join(unexpected)}")
    print(f"({time.monotonic() - t0:.0f} s)")
    return 1 if unexpected or [h for h in holes(merged) if h not in EXPLAINED_HOLES] else 0


if __name__ == "__main__":
    sys.exit(main())
