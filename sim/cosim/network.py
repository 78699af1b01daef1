"""`npu sim`: a network on the RTL, every tile checked against the golden model.

1. compile the .tosa graph for the configuration;
2. run it on the golden model alone (expected outputs, modelled cycles);
3. run it again inside the simulator with every MAC tile also executed by the RTL (chained: the
   RTL's result is what later commands read), comparing each tile byte for byte;
4. compare the network outputs the RTL produced with the golden model's, the TOSA interpreter's
   and Arm's reference model's;
5. report per tile (text), and as report.json and JUnit XML.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmware_model.errors import NpuBenchError
from firmware_model.arch.isa import ELEMENT_BYTES, Status
from firmware_model.arch.registers import Registers
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.arch.config import NpuConfig, load_config
from sim import seeds
from sim.models.model_data import ModelData
from sim.paths import BUILD_ROOT, MODELS_DIR

DEFAULT_MODEL = MODELS_DIR / "demo_conv" / "model.tosa"


@dataclass
class TileReport:
    tile: int
    layer: int
    layer_name: str
    box: str
    ok: bool
    status: str
    cycles: int
    expected_cycles: int
    mismatches: list[dict] = field(default_factory=list)   # first few differing elements
    n_mismatch: int = 0
    sim_ns: tuple[float, float] = (0.0, 0.0)


@dataclass
class SimReport:
    model: str
    config: NpuConfig
    simulator: str
    tiles: list[TileReport]
    golden_cycles: int
    rtl_cycles: int
    output_checks: dict[str, bool]
    output_notes: list[str]
    build_seconds: float
    build_reused: bool
    wall_seconds: float
    waves: str | None = None
    golden_only: int = 0      # tiles the RTL could not run (reported, never counted as passing)

    @property
    def passed(self) -> int:
        return sum(t.ok for t in self.tiles)

    @property
    def ok(self) -> bool:
        return bool(self.tiles) and self.passed == len(self.tiles) and all(self.output_checks.values())


def mismatched_elements(rec: dict) -> list[tuple[int, int, int, int]]:
    """The distinct output elements (oy, ox, c within the tile, and the byte offset of the element
    in the compared range) that hold a differing byte, in address order."""
    r = Registers(rec["regs"])
    esize = ELEMENT_BYTES[DType(r.ofm_dtype)]
    a, _ = rec["output_range"]
    seen: dict[tuple[int, int, int], int] = {}
    for off in rec["mismatch_offsets"]:
        oy, rem = divmod(a + off - r.ofm_addr, r.ofm_row_stride)
        ox, rem = divmod(rem, r.ofm_pix_stride)
        c = rem // esize
        seen.setdefault((oy, ox, c), r.ofm_addr + oy * r.ofm_row_stride + ox * r.ofm_pix_stride + c * esize - a)
    return [(oy, ox, c, start) for (oy, ox, c), start in seen.items()]


def describe_mismatches(rec: dict, tile_meta: dict, limit: int = 4) -> tuple[list[dict], int]:
    """The first `limit` differing elements with global coordinates, expected and actual values,
    and how many elements differ."""
    esize = ELEMENT_BYTES[DType(Registers(rec["regs"]).ofm_dtype)]
    elements = mismatched_elements(rec)
    out = []
    for oy, ox, c, start in elements[:limit]:
        exp = int.from_bytes(rec["expected"][start:start + esize].tobytes(), "little", signed=True)
        act = int.from_bytes(rec["actual"][start:start + esize].tobytes(), "little", signed=True)
        out.append({"n": tile_meta.get("n", 0), "y": tile_meta.get("y0", 0) + oy, "x": tile_meta.get("x0", 0) + ox,
                    "c": tile_meta.get("c0", 0) + c, "expected": exp, "actual": act})
    return out, len(elements)


def load_inputs(model: Path, specs: list[str], placements) -> list[dict[str, np.ndarray]]:
    """Graph inputs: -i NAME=FILE.npy, else the model's committed input, else seeded random data."""
    from sim.cli.run import load_input, parse_bindings  # the same -i handling as `npu run`

    if specs:
        files = parse_bindings(specs, [p.name for p in placements])
        return [{name: load_input(name, path) for name, path in files.items()}]
    data = ModelData.of(model)
    if data is not None:
        return data.all_inputs()
    rng = seeds.rng(0, "network inputs")
    out = {}
    for p in placements:
        info = np.iinfo(p.dtype.storage)
        out[p.name] = rng.integers(info.min, info.max + 1, p.shape).astype(p.dtype.storage)
    return [out]


def committed_references(model: Path, input_specs: list[str], count: int) -> list[dict] | None:
    """The reference model's outputs committed beside the model (models/*/io.json), when the run
    uses the committed inputs; one dict per invocation."""
    data = ModelData.of(model)
    if input_specs or data is None or data.invocations < count:
        return None
    return data.all_reference_outputs()[:count]


def reference_outputs(model: Path, inputs: dict[str, np.ndarray], out_names: list[str]) -> dict | None:
    """Arm's reference model's outputs for these inputs (None when tosa-tools is not installed)."""
    from sim.oracles.refmodel import run_reference

    return run_reference(model, inputs, out_names)


def run_sim(model: Path, cfg: NpuConfig, simulator: str, *, input_specs: list[str] = (), waves: bool = False,
            fault: str | None = None, workdir: Path | None = None) -> SimReport:
    from compiler.tosa_io import read_tosa
    from sim.oracles.backends import GoldenSession, open_session
    from sim.rtl.core import cached_core, run_core_job

    t_start = time.monotonic()
    graph = read_tosa(model)
    golden = GoldenSession(graph, cfg)
    program = golden.program
    workdir = Path(workdir or BUILD_ROOT / "sim" / f"{model.stem}-{cfg.name}-{simulator}")
    prog_dir = workdir / "program"
    program.save(prog_dir)
    invocations = load_inputs(model, list(input_specs), program.inputs)

    golden_out = [golden.run(inp) for inp in invocations]
    golden_cycles = golden.model.counters.cycles

    built = cached_core(cfg, simulator, fault=fault, waves=waves)
    results, bench = run_core_job(built, "cosim_program",
                                  {"config": cfg.source if cfg.source != "<built-in>" else cfg.name,
                                   "program_dir": str(prog_dir), "invocations": invocations},
                                  job_dir=workdir / "run", waves=waves)
    if "tiles" not in results:
        raise NpuBenchError(f"the {simulator} co-simulation stopped before reporting: "
                            f"{'; '.join(bench.failures) or 'no results'} (log: {workdir / 'run' / 'sim.log'})")
    meta = {t["id"]: t for t in program.tiles}
    layers = program.manifest["layers"]
    tiles = []
    for rec in results["tiles"]:
        m = meta.get(rec["tile"], {})
        layer = layers[m["layer"]] if m else {"index": -1, "name": "?"}
        box = (f"rows {m['y0']}..{m['y0'] + m['th'] - 1} cols {m['x0']}..{m['x0'] + m['tw'] - 1} "
               f"ch {m['c0']}..{m['c0'] + m['tc'] - 1}") if m else ""
        status = Status(rec["status"]).name
        mism, n_elem = describe_mismatches(rec, m) if rec["mismatch_offsets"] else ([], 0)
        tiles.append(TileReport(rec["tile"], layer["index"], layer["name"], box, rec["ok"], status, rec["cycles"],
                                rec["expected_cycles"], mism, n_elem, tuple(rec["sim_ns"])))

    # Tiles the RTL did not run: MAC tiles needing features it lacks, and tiles of other units.
    ran = {rec["tile"] for rec in results["tiles"]}
    golden_only = [(s["tile"], s["reason"]) for s in results.get("skipped", [])]
    lacking_unit = [t["id"] for t in program.tiles if t["id"] not in ran and t["id"] not in {g for g, _ in golden_only}]
    # Whole-network outputs: the RTL-chained run against golden, the interpreter and Arm's model.
    checks, notes = {}, []
    rtl_out = results["outputs"]
    names = [p.name for p in program.outputs]
    checks["rtl == golden"] = all(np.array_equal(r[n], g[n]) for r, g in zip(rtl_out, golden_out) for n in names)
    try:
        interp = open_session(graph, "interp")
        interp_out = [interp.run(inp) for inp in invocations]
        checks["rtl == interpreter"] = all(np.array_equal(r[n], i[n]) for r, i in zip(rtl_out, interp_out) for n in names)
    except NpuBenchError as e:
        checks["rtl == interpreter"] = False
        notes.append(f"interpreter: {e}")
    # Stateless graphs: Arm's model runs now. Stateful ones: its command line cannot carry the
    # variables from one invocation to the next, so the outputs it gave for the committed inputs
    # (models/*/io.json, made by `make models` with the state carried) are the reference.
    ref = None
    if not graph.main.variables():
        ref = [reference_outputs(model, inp, names) for inp in invocations]
        if not all(r is not None for r in ref):
            ref = committed_references(model, list(input_specs), len(invocations))
            if ref is None:
                notes.append("Arm's reference model is not installed (pip install 'npu-bench[test]'); not compared")
    else:
        ref = committed_references(model, list(input_specs), len(invocations))
        if ref is None:
            notes.append("Arm's reference model was not compared: its command line cannot carry variable state "
                         "between invocations, and these inputs have no committed reference outputs")
    if ref is not None:
        checks["rtl == reference model"] = all(np.array_equal(r[n], f[n]) for r, f in zip(rtl_out, ref) for n in names)

    wave_file = None
    if waves:
        candidates = [workdir / "run" / "dump.vcd", workdir / "run" / "dump.fst", built.build_dir / "npu_core.fst"]
        wave_file = next((str(p) for p in candidates if p.exists()), None)
    if golden_only or lacking_unit:
        reasons = sorted({r for _, r in golden_only})
        notes.append(f"{len(golden_only) + len(lacking_unit)} tile(s) were checked on the golden model only: "
                     f"{len(golden_only)} MAC tile(s) need {', '.join(reasons) or 'nothing'}, "
                     f"{len(lacking_unit)} belong to units this RTL does not have yet")
    rep = SimReport(str(model), cfg, simulator, tiles, golden_cycles, sum(t.cycles for t in tiles), checks, notes,
                    built.build_seconds, built.reused, time.monotonic() - t_start, wave_file)
    rep.golden_only = len(golden_only) + len(lacking_unit)
    return rep


def format_report(rep: SimReport, max_lines: int = 64) -> str:
    cfg = rep.config
    lines = [f"graph:  {rep.model}",
             f"config: {cfg.summary()}",
             f"rtl:    {rep.simulator}, {'reused build' if rep.build_reused else f'built in {rep.build_seconds:.1f} s'}",
             "tiles:"]
    shown = 0
    for t in rep.tiles:
        if shown >= max_lines and t.ok:
            continue
        shown += 1
        verdict = "PASS" if t.ok else "FAIL"
        lines.append(f"  tile {t.tile:4d}  layer {t.layer} {t.layer_name}  {t.box:<36s} {verdict}  {t.cycles:8d} cycles")
        if not t.ok:
            if t.status != "OK":
                lines.append(f"      the RTL reported {t.status}")
            if t.cycles != t.expected_cycles:
                lines.append(f"      cycle count {t.cycles}, the cycle model predicts {t.expected_cycles}")
            for m in t.mismatches:
                lines.append(f"      at (n {m['n']}, y {m['y']}, x {m['x']}, c {m['c']}): expected {m['expected']}, "
                             f"actual {m['actual']}")
            if t.mismatches:
                lines.append(f"      look at sim time {t.sim_ns[0]:.0f}..{t.sim_ns[1]:.0f} ns")
    hidden = len(rep.tiles) - shown
    if hidden:
        lines.append(f"  ... {hidden} more passing tiles (all in report.json)")
    for name, ok in rep.output_checks.items():
        lines.append(f"outputs: {name}: {'yes' if ok else 'NO'}")
    lines += [f"note: {n}" for n in rep.output_notes]
    lines.append(f"cycles: RTL MAC tiles {rep.rtl_cycles}; whole program on the cycle model {rep.golden_cycles} "
                 f"({rep.golden_cycles / (cfg.clock_mhz * 1e3):.3f} ms at {cfg.clock_mhz:g} MHz)")
    if rep.waves:
        lines.append(f"waves: {rep.waves}")
    tail = f" ({rep.golden_only} more on golden only)" if rep.golden_only else ""
    lines.append(f"sim: {rep.passed}/{len(rep.tiles)} tiles match golden ({rep.simulator}), {rep.rtl_cycles} cycles{tail}")
    return "\n".join(lines)


def write_reports(rep: SimReport, outdir: Path) -> tuple[Path, Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    doc = {"model": rep.model, "config": rep.config.to_dict(), "simulator": rep.simulator,
           "tiles": [t.__dict__ for t in rep.tiles], "passed": rep.passed, "total": len(rep.tiles),
           "rtl_cycles": rep.rtl_cycles, "golden_cycles": rep.golden_cycles, "outputs": rep.output_checks,
           "notes": rep.output_notes, "golden_only": rep.golden_only, "waves": rep.waves,
           "wall_seconds": round(rep.wall_seconds, 2)}
    jpath = outdir / "report.json"
    jpath.write_text(json.dumps(doc, indent=1, default=list))
    suite = ET.Element("testsuite", name=f"npu-sim.{Path(rep.model).stem}.{rep.config.name}.{rep.simulator}",
                       tests=str(len(rep.tiles) + len(rep.output_checks)),
                       failures=str(len(rep.tiles) - rep.passed + sum(not v for v in rep.output_checks.values())))
    for t in rep.tiles:
        case = ET.SubElement(suite, "testcase", classname=f"layer{t.layer}.{t.layer_name}", name=f"tile_{t.tile}",
                             time=f"{(t.sim_ns[1] - t.sim_ns[0]) / 1e9:.9f}")
        if not t.ok:
            msg = "; ".join(f"({m['n']},{m['y']},{m['x']},{m['c']}) expected {m['expected']} actual {m['actual']}"
                            for m in t.mismatches) or f"status {t.status}, cycles {t.cycles}/{t.expected_cycles}"
            ET.SubElement(case, "failure", message=msg)
    for name, ok in rep.output_checks.items():
        case = ET.SubElement(suite, "testcase", classname="outputs", name=name.replace(" ", "_"))
        if not ok:
            ET.SubElement(case, "failure", message=f"{name} does not hold")
    xpath = outdir / "report.xml"
    ET.ElementTree(suite).write(xpath, encoding="utf-8", xml_declaration=True)
    return jpath, xpath


def sim_cli(args) -> int:
    cfg = load_config(args.config)
    model = Path(args.model) if args.model else DEFAULT_MODEL
    if not model.exists():
        raise NpuBenchError(f"{model}: no such file")
    stem = model.parent.name if model.stem == "model" else model.stem
    workdir = BUILD_ROOT / "sim" / f"{stem}-{cfg.name}-{args.simulator}{'-' + args.inject_fault if args.inject_fault else ''}"
    rep = run_sim(model, cfg, args.simulator, input_specs=args.input, waves=args.waves, fault=args.inject_fault,
                  workdir=workdir)
    jpath, xpath = write_reports(rep, Path(args.report) if args.report else workdir)
    print(format_report(rep))
    print(f"reports: {jpath} {xpath}")
    return 0 if rep.ok else 1
