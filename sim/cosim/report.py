"""The co-simulation's report: per tile and per invocation, as text, report.json and JUnit XML.

report.json (schema version 1, docs/verification.md "report.json") is the stable, documented form:

    schema, model, config {...}, simulator, simulator_version, rtl_hash, inputs, seed (of the
    random inputs, when they were), run_seed (NPU_BENCH_SEED or --seed; "" for the committed
    defaults), seeds {stream: seed} (every random stream the run drew: inputs, cocotb)
    tiles      {total, passed, failed, golden_only}      counted per executed tile, per invocation
    invocations [{index, status, golden_status, rtl_cycles, model_cycles, host_cycles,
                  outputs_match, variables_match, wall_seconds, note}]
    cycles     {rtl, model}                               summed over the invocations
    speed      {sim_seconds, run_seconds, bench_seconds, simulated_cycles_per_second,
                process_cycles_per_second}
    wall_seconds, build {seconds, reused}, outputs {check: bool}, notes [...], waves
    failures   [{invocation, tile, command, unit, layer, layer_name, box, rtl_end, golden_end,
                 cycle_window, sim_ns, n_mismatch, mismatches: [{coords, expected, actual}]}]
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import ELEMENT_BYTES, Status
from firmware_model.arch.registers import Registers
from firmware_model.tosa_ops.dtypes import DType

SCHEMA_VERSION = 1


@dataclass
class TileReport:
    invocation: int
    tile: int
    command: int
    unit: str
    layer: int
    layer_name: str
    box: str
    ok: bool
    rtl_end: int                  # the core's clock when the unit reported done (-1: never)
    golden_end: int               # the cycle model's
    cycle_window: tuple[int, int]  # from the previous tile's end to this one's (for the waveform)
    sim_ns: tuple[float, float]
    n_mismatch: int = 0           # differing output elements
    mismatches: list[dict] = field(default_factory=list)   # the first few


@dataclass
class InvocationReport:
    index: int
    status: str
    golden_status: str
    rtl_cycles: int
    model_cycles: int | None
    host_cycles: int
    outputs_match: bool
    variables_match: bool
    wall_seconds: float
    note: str = ""
    bench_seconds: float = 0.0    # of wall_seconds, the bench's own work (scoreboard, host ops, I/O)

    @property
    def ok(self) -> bool:
        return (self.status == self.golden_status and self.outputs_match and self.variables_match
                and self.rtl_cycles == (self.model_cycles if self.model_cycles is not None else self.rtl_cycles)
                and not self.note)


@dataclass
class SimReport:
    model: str
    config: NpuConfig
    simulator: str
    inputs: str                   # what the inputs were: files, committed data, "seeded random, seed N"
    seed: int | None
    tiles: list[TileReport]
    invocations: list[InvocationReport]
    output_checks: dict[str, bool]
    notes: list[str]
    build_seconds: float
    build_reused: bool
    wall_seconds: float
    sim_seconds: float
    waves: str | None = None
    golden_only: int = 0          # tiles the RTL could not run (none since every unit is in the core)
    final_state: dict | None = None   # the variables after the run (golden's, which the RTL matched)
    host_layers: list[tuple[int, str, str, str]] = field(default_factory=list)   # (index, name, op, reason)
    not_run: dict[int, int] = field(default_factory=dict)   # invocation -> tiles not reached (stopped early)
    rtl_hash: str = ""            # the generated Verilog's (sha256, 16 hex digits)
    simulator_version: str = ""
    started: float = 0.0          # epoch seconds
    run_seed: str = ""            # NPU_BENCH_SEED (or --seed); "" when the committed defaults ran
    seeds: list[tuple[str, int]] = field(default_factory=list)   # every random stream drawn: (label, seed)
    coverage: object = None       # sim.verification.core_coverage.CoreCoverage of the run

    @property
    def passed(self) -> int:
        return sum(t.ok for t in self.tiles)

    @property
    def rtl_cycles(self) -> int:
        return sum(i.rtl_cycles for i in self.invocations)

    @property
    def model_cycles(self) -> int:
        return sum(i.model_cycles or 0 for i in self.invocations)

    @property
    def run_seconds(self) -> float:
        """Wall time of the invocations in the simulator (program start to outputs read back)."""
        return sum(i.wall_seconds for i in self.invocations)

    @property
    def bench_seconds(self) -> float:
        return sum(i.bench_seconds for i in self.invocations)

    @property
    def cycles_per_second(self) -> float:
        """The simulation's speed while it runs the programs, every tile checked."""
        return self.rtl_cycles / self.run_seconds if self.run_seconds > 0 else 0.0

    @property
    def process_cycles_per_second(self) -> float:
        """The same over the whole simulator process: its start-up and the image load too."""
        return self.rtl_cycles / self.sim_seconds if self.sim_seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return (bool(self.tiles) and self.passed == len(self.tiles) and all(self.output_checks.values())
                and all(i.ok for i in self.invocations) and self.golden_only == 0)


def tile_coordinates(unit: str, regs: dict, meta: dict, offset_in_sram: int) -> dict:
    """The output element (global coordinates of the layer's output) whose bytes hold
    `offset_in_sram`, from the command's registers and the manifest's tile record."""
    r = Registers(regs)
    if unit == "ELTWISE":
        size = ELEMENT_BYTES.get(DType(r.ofm_dtype), 1)
        return {"i": meta.get("start", 0) + (offset_in_sram - r.elt_out_addr) // size}
    size = ELEMENT_BYTES.get(DType(r.ofm_dtype), 1) if r.ofm_dtype in {int(d) for d in ELEMENT_BYTES} else 1
    rel = offset_in_sram - r.ofm_addr
    oy, rem = divmod(rel, r.ofm_row_stride) if r.ofm_row_stride else (0, rel)
    ox, rem = divmod(rem, r.ofm_pix_stride) if r.ofm_pix_stride else (0, rem)
    return {"n": meta.get("n", 0), "y": meta.get("y0", 0) + oy, "x": meta.get("x0", 0) + ox,
            "c": meta.get("c0", 0) + rem // size}


def describe_mismatches(check, meta: dict, limit: int = 4) -> tuple[list[dict], int]:
    """The differing elements of a tile: (the first `limit` with coordinates, expected and actual
    values — "X" where the RTL held unknown bits —, how many elements differ)."""
    r = Registers(check.regs)
    try:
        size = ELEMENT_BYTES[DType(r.ofm_dtype)]
    except (ValueError, KeyError):
        size = 1
    a, _ = check.output
    unknown = set(check.unknown_offsets)
    seen: dict[tuple, int] = {}
    for off in check.mismatch_offsets:
        coords = tile_coordinates(check.opcode, check.regs, meta, a + off)
        start = off - ((a + off - (r.elt_out_addr if check.opcode == "ELTWISE" else r.ofm_addr)) % size)
        seen.setdefault(tuple(coords.items()), start)
    out = []
    for coords, start in list(seen.items())[:limit]:
        exp = int.from_bytes(check.expected[start:start + size].tobytes(), "little", signed=True)
        if len(check.actual) >= start + size:
            act = int.from_bytes(check.actual[start:start + size].tobytes(), "little", signed=True)
            if any(o in unknown for o in range(start, start + size)):
                act = "X"
        else:
            act = "none (the unit never finished)"
        out.append({"coords": dict(coords), "expected": exp, "actual": act})
    return out, len(seen)


def _box(meta: dict) -> str:
    if not meta:
        return ""
    if "th" in meta:
        return (f"rows {meta['y0']}..{meta['y0'] + meta['th'] - 1} cols {meta['x0']}..{meta['x0'] + meta['tw'] - 1} "
                f"ch {meta['c0']}..{meta['c0'] + meta['tc'] - 1}")
    if "count" in meta:
        return f"elements {meta['start']}..{meta['start'] + meta['count'] - 1}"
    return ""


def tile_reports(k: int, checks, manifest: dict) -> list[TileReport]:
    meta = {t["id"]: t for layer in manifest.get("layers", []) for t in layer.get("tiles", [])}
    layers = manifest.get("layers", [])
    out = []
    for c in checks:
        m = meta.get(c.tile_id, {})
        layer = layers[m["layer"]] if m else {"index": -1, "name": "?"}
        mism, n = describe_mismatches(c, m) if c.mismatch_offsets else ([], 0)
        out.append(TileReport(k, c.tile_id, c.command_index, c.opcode, layer["index"], layer["name"], _box(m), c.ok,
                              c.rtl_end, c.golden_end, (c.start_clock, max(c.rtl_end, c.golden_end)),
                              tuple(c.sim_ns), n, mism))
    return out


def format_report(rep: SimReport, max_lines: int = 64) -> str:
    cfg = rep.config
    lines = [f"graph:  {rep.model}",
             f"config: {cfg.summary()}",
             f"rtl:    {rep.simulator}, {'reused build' if rep.build_reused else f'built in {rep.build_seconds:.1f} s'}",
             f"inputs: {rep.inputs}",
             "seeds:  " + (", ".join(f"{label} {v}" for label, v in rep.seeds) or "none drawn")
             + (f" (from --seed/NPU_BENCH_SEED {rep.run_seed})" if rep.run_seed else
                " (the committed defaults; --seed N draws others)"),
             "tiles:"]
    shown = 0
    many = len(rep.invocations) > 1
    for t in rep.tiles:
        if shown >= max_lines and t.ok:
            continue
        shown += 1
        inv = f"inv {t.invocation} " if many else ""
        lines.append(f"  {inv}tile {t.tile:4d}  {t.unit:7s} layer {t.layer} {t.layer_name}  {t.box:<36s} "
                     f"{'PASS' if t.ok else 'FAIL'}  done at cycle {t.rtl_end}")
        if not t.ok:
            if t.rtl_end < 0:
                lines.append("      the RTL never finished this command")
            elif t.rtl_end != t.golden_end:
                lines.append(f"      done at cycle {t.rtl_end}, the cycle model says {t.golden_end}")
            if t.n_mismatch:
                lines.append(f"      {t.n_mismatch} element(s) differ; the first:")
            for m in t.mismatches:
                coords = ", ".join(f"{k} {v}" for k, v in m["coords"].items())
                lines.append(f"      at ({coords}): expected {m['expected']}, actual {m['actual']}")
            lines.append(f"      look at cycles {t.cycle_window[0]}..{t.cycle_window[1]} of the invocation "
                         f"(sim time {t.sim_ns[0]:.0f}..{t.sim_ns[1]:.0f} ns)")
    hidden = len(rep.tiles) - shown
    if hidden:
        lines.append(f"  ... {hidden} more passing tiles (all in report.json)")
    for i in rep.invocations:
        model = "faulted in golden" if i.model_cycles is None else f"model {i.model_cycles}"
        lines.append(f"invocation {i.index}: {i.status} (golden {i.golden_status}), RTL {i.rtl_cycles} cycles, {model}"
                     + (f", host {i.host_cycles}" if i.host_cycles else "")
                     + ("" if i.variables_match else "; the variable SRAM differs from golden's")
                     + ("" if i.outputs_match else "; the outputs differ from golden's")
                     + (f"; {i.note}" if i.note else ""))
    for name, ok in rep.output_checks.items():
        lines.append(f"outputs: {name}: {'yes' if ok else 'NO'}")
    lines += [f"note: {n}" for n in rep.notes]
    lines.append(f"speed: {rep.rtl_cycles} cycles in {rep.run_seconds:.2f} s ({rep.cycles_per_second / 1e3:.0f} k cycles/s, "
                 f"of which the scoreboard and host {rep.bench_seconds:.2f} s); simulator process "
                 f"{rep.sim_seconds:.2f} s, {rep.wall_seconds:.1f} s in all")
    if rep.waves:
        lines.append(f"waves: {rep.waves}")
    tail = f" ({rep.golden_only} more on golden only)" if rep.golden_only else ""
    lines.append(f"sim: {rep.passed}/{len(rep.tiles)} tiles match golden ({rep.simulator}), "
                 f"{rep.rtl_cycles} cycles{tail}")
    return "\n".join(lines)


def report_json(rep: SimReport) -> dict:
    cfg = {**asdict(rep.config), "hash": rep.config.hash}
    failures = [asdict(t) for t in rep.tiles if not t.ok]
    return {
        "schema": SCHEMA_VERSION, "model": rep.model, "config": cfg, "simulator": rep.simulator,
        "simulator_version": rep.simulator_version, "rtl_hash": rep.rtl_hash, "inputs": rep.inputs, "seed": rep.seed,
        "run_seed": rep.run_seed, "seeds": dict(rep.seeds),
        "tiles": {"total": len(rep.tiles), "passed": rep.passed, "failed": len(rep.tiles) - rep.passed,
                  "golden_only": rep.golden_only},
        "invocations": [asdict(i) for i in rep.invocations],
        "cycles": {"rtl": rep.rtl_cycles, "model": rep.model_cycles},
        "speed": {"sim_seconds": round(rep.sim_seconds, 3), "run_seconds": round(rep.run_seconds, 3),
                  "bench_seconds": round(rep.bench_seconds, 3),
                  "simulated_cycles_per_second": round(rep.cycles_per_second),
                  "process_cycles_per_second": round(rep.process_cycles_per_second)},
        "wall_seconds": round(rep.wall_seconds, 2),
        "build": {"seconds": rep.build_seconds, "reused": rep.build_reused},
        "outputs": rep.output_checks, "notes": rep.notes, "waves": rep.waves,
        "failures": failures, "tile_results": [[t.invocation, t.tile, t.ok, t.rtl_end] for t in rep.tiles],
    }


def write_reports(rep: SimReport, outdir: Path) -> tuple[Path, Path]:
    """report.json, report.xml (JUnit, sim/cosim/junit_report.py) and coverage.xml (the run's
    functional coverage, sim/verification/core_coverage.py) in `outdir`."""
    from sim.cli.files import write_text_atomic
    from sim.cosim.junit_report import sim_suite, write_suite

    jpath = outdir / "report.json"
    write_text_atomic(jpath, json.dumps(report_json(rep), indent=1, default=_plain))
    if rep.coverage is not None:
        rep.coverage.export(outdir / "coverage.xml")
    return jpath, write_suite(sim_suite(rep), outdir / "report.xml")


def _plain(v):
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (Status,)):
        return v.name
    return str(v)
