"""Benchmark (issue 13): NPU cycles against Arm's Ethos-U55-256, MAC utilisation per layer, core area.

    python -m sim.benchmarks.throughput [--config NAME ...] [--network NAME ...] [--models DIR ...]
                                        [--no-area] [--markdown] [--json PATH]

Four tables, from the timing-only model (the RTL's cycles, docs/architects.md):

1. per network (models/ and ../shared/models when present) and configuration: NPU cycles and
   useful MACs per invocation, overall MAC utilisation; on `large` (16x16 = 256 MACs, as many as
   the U55-256) Vela 5.2.0's `cycles_npu` for Ethos-U55-256 from the network's .tflite
   (`vela_summary.json` beside it; sim/benchmarks/vela_figures.py), our ratio to it, and whether
   it meets 1.0x (target) and 0.8x (stretch). A network without a .tflite (demo_conv) is compared
   with Vela's figure from its .tosa, marked so.
2. per qualifying layer on `default` and `large`: every CONV2D with at least 16 input and 16 output
   channels and an output of at least 8x8 (target: 80% utilisation), every DEPTHWISE_CONV2D (50%).
   A layer is a row of `npu perf` (a fused group: the convolution with its RESCALE and CLAMP);
   its utilisation is useful MACs / (the row's cycles x MACs of the array). Beside it, "no
   waits": useful MACs / (its MAC commands' clocks x MACs), the utilisation had the array run
   its commands back to back; a layer below target is limited by `commands` when even that
   falls short (the layer's mapping onto the array, each command's fixed clocks: the hardware
   or the tiling must change), by `waits` when the time between its commands is what costs it.
3. the core's Yosys area per configuration (sim/benchmarks/core_area.py; ~10 s a configuration;
   --no-area skips it).
4. which targets are met.

Stateful networks (lstm, gru) run their committed invocations with the state carried over; their
cycles and MACs are the totals divided by the invocations (Vela estimates one invocation).
The exit status is 0 whether or not the targets are met; 1 when a network fails to compile or run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from sim.paths import MODELS_DIR, REPO_ROOT

SHARED = Path(os.environ.get("NPU_SHARED", REPO_ROOT.parent / "shared"))
CONFIGS = ("tiny", "default", "large")
VELA_CONFIG = "large"                  # 256 MACs, the U55-256's count
VELA_ACCEL = "ethos-u55-256"
RATIO_TARGET, RATIO_STRETCH = 1.0, 0.8
LAYER_CONFIGS = ("default", "large")
UTIL_TARGETS = {"CONV2D": 0.80, "DEPTHWISE_CONV2D": 0.50}
MIN_CHANNELS = 16                      # a CONV2D qualifies with this many input and output channels
MIN_OUTPUT = 8                         # ... and an output of at least this many rows and columns


@dataclass
class NetworkRow:
    network: str
    config: str
    macs: int                          # of the array
    invocations: int
    cycles: float                      # per invocation
    useful_macs: float                 # per invocation
    utilisation: float
    vela_cycles: int | None = None     # U55-256 cycles_npu (large only)
    vela_input: str = ""               # model.tflite, or model.tosa when there is no .tflite
    ratio: float | None = None         # ours / Vela's


@dataclass
class LayerShape:
    op: str                            # CONV2D or DEPTHWISE_CONV2D
    cin: int
    cout: int
    out_h: int
    out_w: int


@dataclass
class LayerRow:
    network: str
    config: str
    layer: str
    op: str
    shape: str                         # "16->32, 8x8"
    unit: str                          # MAC, or host CPU when the compiler gave the layer to the host
    cycles: int                        # over all invocations, as useful_macs
    useful_macs: int
    utilisation: float
    target: float
    # useful MACs / (the layer's MAC command clocks x MACs): its utilisation had the array never
    # waited between commands (for a transfer, a register, the command processor); None: unknown
    busy_utilisation: float | None = None
    # useful MACs / (the layer's MAC steps' stream clocks x MACs): its utilisation had every
    # command taken only the clocks its steps read inputs (no weight loads, pipeline ends, output
    # drain or fixed clocks); the ceiling of its mapping onto this array. None: unknown
    stream_utilisation: float | None = None

    @property
    def met(self) -> bool:
        return self.utilisation >= self.target

    @property
    def limit(self) -> str:
        """What keeps a layer below its target: `mapping` when its commands' input streams alone
        fall short (how the layer maps onto the array: channels against rows, taps against lanes,
        input words a clock; no shorter command and no scheduling reaches the target),
        `commands` when its MAC commands back to back do (their fixed clocks: weight loads,
        pipeline ends, the output drain), `waits` when the time between them does."""
        if self.met:
            return "-"
        if self.busy_utilisation is None:
            return "?"
        if self.stream_utilisation is not None and self.stream_utilisation < self.target:
            return "mapping"
        return "commands" if self.busy_utilisation < self.target else "waits"


# ---------------------------------------------------------------------------------------------
# what to measure

def network_dirs(folders: list[Path]) -> list[tuple[str, Path]]:
    """(label, folder) of every network: models/ names as they are, others prefixed by their parent
    folder's parent (`shared/cnn32`) so that two networks of one name stay apart."""
    out = []
    for folder in folders:
        if not folder.is_dir():
            continue
        prefix = "" if folder.resolve() == MODELS_DIR.resolve() else f"{folder.resolve().parent.name}/"
        out += [(prefix + p.parent.name, p.parent) for p in sorted(folder.glob("*/model.tosa"))]
    return out


def vela_figure(folder: Path) -> tuple[int, str] | None:
    """Vela's U55-256 cycles_npu and the file it came from: the .tflite's, else the .tosa's."""
    path = folder / "vela_summary.json"
    if not path.exists():
        return None
    ok = {e["input"]: e["cycles_npu"] for e in json.loads(path.read_text()) if e["accel"] == VELA_ACCEL and not e["rc"]}
    for name in ("model.tflite", "model.tosa"):
        if name in ok:
            return ok[name], name
    return None


# ---------------------------------------------------------------------------------------------
# per network

def network_row(label: str, folder: Path, report) -> NetworkRow:
    """Cycles and useful MACs per invocation; Vela's figure beside `large`."""
    cfg, n = report.config, report.invocations
    row = NetworkRow(label, cfg.name, cfg.macs, n, report.total.cycles / n, report.total.useful_macs / n,
                     report.total.utilisation(cfg))
    vela = vela_figure(folder) if cfg.name == VELA_CONFIG else None
    if vela is not None:
        row.vela_cycles, row.vela_input = vela
        row.ratio = row.cycles / row.vela_cycles
    return row


# ---------------------------------------------------------------------------------------------
# per layer

def mac_shape(ops: str, block, producers: dict) -> LayerShape | None:
    """The convolution of a fused row (its `ops`: "CONV2D->layer_37, RESCALE->layer_38, ...") and
    its shapes from the graph, or None for a row without one."""
    for source in ops.split(", "):
        op, _, tensor = source.partition("->")
        if op in UTIL_TARGETS and tensor in producers:
            _, _, _, cin = block.tensor(producers[tensor].inputs[0]).shape
            _, out_h, out_w, cout = block.tensor(tensor).shape
            return LayerShape(op, cin, cout, out_h, out_w)
    return None


def qualifies(shape: LayerShape) -> bool:
    """Issue 13's layers: every depthwise convolution; a CONV2D wide and large enough to fill an
    array (16 channels in and out, 8x8 outputs at least)."""
    if shape.op == "DEPTHWISE_CONV2D":
        return True
    return min(shape.cin, shape.cout) >= MIN_CHANNELS and min(shape.out_h, shape.out_w) >= MIN_OUTPUT


def layer_rows(label: str, report, graph) -> list[LayerRow]:
    """The qualifying layers of one perf report, with their utilisation and target."""
    block = graph.main
    producers = block.producers()
    cfg = report.config
    out = []
    for lay in report.layers:
        shape = mac_shape(lay.ops, block, producers)
        if shape is None or not qualifies(shape):
            continue
        busy, stream = lay.unit_cycles.get("mac", 0), lay.unit_cycles.get("mac_stream", 0)
        out.append(LayerRow(label, cfg.name, lay.name, shape.op,
                            f"{shape.cin}->{shape.cout}, {shape.out_h}x{shape.out_w}", lay.unit, lay.cycles,
                            lay.useful_macs, lay.utilisation(cfg), UTIL_TARGETS[shape.op],
                            lay.useful_macs / (busy * cfg.macs) if busy else None,
                            lay.useful_macs / (stream * cfg.macs) if stream else None))
    return out


# ---------------------------------------------------------------------------------------------
# measuring

def measure(networks: list[tuple[str, Path]],
            configs: list[str]) -> tuple[list[NetworkRow], list[LayerRow], list[str]]:
    """Every network on every configuration: its row, its qualifying layers, and the errors."""
    from compiler.tosa_io import read_tosa
    from firmware_model.arch.config import load_config
    from firmware_model.errors import NpuBenchError
    from sim.perf.layer_report import perf_report

    cfgs = {config: load_config(config) for config in configs}
    nets, layers, errors = [], [], []
    for label, folder in networks:
        model = folder / "model.tosa"
        for config, cfg in cfgs.items():
            try:
                report = perf_report(model, cfg, engine="timing")
            except NpuBenchError as e:
                errors.append(f"{label} on {config}: {e}")
                continue
            nets.append(network_row(label, folder, report))
            if config in LAYER_CONFIGS:
                layers += layer_rows(label, report, read_tosa(model))
    return nets, layers, errors


def measure_area(configs: list[str]) -> dict[str, dict]:
    """The whole core's Yosys figures per configuration."""
    from firmware_model.arch.config import load_config
    from sim.benchmarks.core_area import core_area

    area = {}
    for config in configs:
        total = core_area(load_config(config), depth=0)["total"]
        area[config] = {k: total[k] for k in ("cells", "ff_bits", "mul_pp_bits", "memory_bits")}
    return area


# ---------------------------------------------------------------------------------------------
# tables

def render(headers: list[str], rows: list[list], markdown: bool, left: int = 1) -> str:
    """A table as Markdown or as aligned text: the first `left` columns (names) to the left, the
    numbers to the right."""
    cells = [[str(c) for c in r] for r in rows]
    if markdown:
        align = ["---"] * left + ["---:"] * (len(headers) - left)
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])
    widths = [max(len(x) for x in col) for col in zip(headers, *cells)]

    def line(r):
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(headers), "-" * len(line(headers))] + [line(r) for r in cells])


def _met(value: float | None, limit: float) -> str:
    return "-" if value is None else ("met" if value <= limit else "not met")


def network_table(rows: list[NetworkRow], markdown: bool) -> str:
    head = ["network", "config", "MACs", "inv.", "cycles/inv.", "useful MACs/inv.", "util",
            "Vela U55-256", "ratio", "<= 1.0x", "<= 0.8x"]
    body = []
    for r in rows:
        vela = "-" if r.vela_cycles is None else f"{r.vela_cycles:,}"
        if r.vela_input == "model.tosa":
            vela += " (.tosa)"
        body.append([r.network, r.config, r.macs, r.invocations, f"{r.cycles:,.0f}", f"{r.useful_macs:,.0f}",
                     f"{100 * r.utilisation:.1f}%", vela, "-" if r.ratio is None else f"{r.ratio:.2f}",
                     _met(r.ratio, RATIO_TARGET), _met(r.ratio, RATIO_STRETCH)])
    return render(head, body, markdown, left=2)


def layer_table(rows: list[LayerRow], markdown: bool) -> str:
    head = ["network", "config", "layer", "op", "cin->cout, out", "unit", "cycles", "useful MACs", "util",
            "no waits", "streams", "target", "met", "limit"]

    def pct(value):
        return "-" if value is None else f"{100 * value:.1f}%"
    body = [[r.network, r.config, r.layer, r.op, r.shape, r.unit, f"{r.cycles:,}", f"{r.useful_macs:,}",
             pct(r.utilisation), pct(r.busy_utilisation), pct(r.stream_utilisation),
             f"{100 * r.target:.0f}%", "met" if r.met else "not met", r.limit] for r in rows]
    return render(head, body, markdown, left=6)


def area_table(area: dict[str, dict], macs: dict[str, int], markdown: bool) -> str:
    head = ["config", "MACs", "cells", "FF bits", "multiplier pp bits", "memory bits"]
    body = [[c, macs.get(c, "-"), f"{a['cells']:,}", f"{a['ff_bits']:,}", f"{a['mul_pp_bits']:,}",
             f"{a['memory_bits']:,}"] for c, a in area.items()]
    return render(head, body, markdown)


def summary(nets: list[NetworkRow], layers: list[LayerRow]) -> dict:
    """Issue 13's targets, each with how many cases meet it and which do not."""
    compared = [r for r in nets if r.ratio is not None]
    out = {}
    for key, limit in (("vela_1.0x", RATIO_TARGET), ("vela_0.8x", RATIO_STRETCH)):
        out[key] = {"met": sum(r.ratio <= limit for r in compared), "of": len(compared),
                    "not_met": [f"{r.network} {r.ratio:.2f}x" for r in compared if r.ratio > limit]}
    for op, target in UTIL_TARGETS.items():
        rows = [r for r in layers if r.op == op]
        out[f"{op}_{target:.0%}"] = {"met": sum(r.met for r in rows), "of": len(rows),
                                     "not_met": [f"{r.network}/{r.layer} on {r.config} {100 * r.utilisation:.1f}%"
                                                 for r in rows if not r.met],
                                     # the misses no scheduling between commands can lift (LayerRow.limit),
                                     # and of those the ones no shorter command can either
                                     "commands": sum(r.limit in ("commands", "mapping") for r in rows),
                                     "mapping": sum(r.limit == "mapping" for r in rows)}
    return out


def summary_text(s: dict) -> str:
    names = {"vela_1.0x": f"NPU cycles on {VELA_CONFIG} <= Vela U55-256 (1.0x)",
             "vela_0.8x": f"NPU cycles on {VELA_CONFIG} <= 0.8x Vela U55-256 (stretch)",
             "CONV2D_80%": "CONV2D layers (>=16 in, >=16 out, >=8x8) >= 80% utilisation",
             "DEPTHWISE_CONV2D_50%": "DEPTHWISE_CONV2D layers >= 50% utilisation"}
    lines = []
    for key, v in s.items():
        verdict = "met" if v["met"] == v["of"] and v["of"] else ("nothing to judge" if not v["of"] else "NOT met")
        lines.append(f"- {names.get(key, key)}: {v['met']}/{v['of']} — {verdict}")
        if v["not_met"]:
            shown = v["not_met"][:8]
            more = f", ... {len(v['not_met']) - len(shown)} more" if len(v["not_met"]) > len(shown) else ""
            lines.append(f"  not met: {', '.join(shown)}{more}")
        if v.get("commands"):
            lines.append(f"  of those, {v['commands']} fall short with their MAC commands alone (limit 'commands' or "
                         f"'mapping': the array's mapping and the commands' fixed clocks)")
        if v.get("mapping"):
            lines.append(f"  and of those, {v['mapping']} with their input streams alone (limit 'mapping': the "
                         f"ceiling of the layer's mapping onto this array, column 'streams')")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------

def _names(values: list[str]) -> list[str]:
    """Repeated or comma-separated option values."""
    return [n for v in values for n in v.split(",") if n]


def select(networks: list[tuple[str, Path]], wanted: list[str]) -> list[tuple[str, Path]]:
    """The networks a --network names: by label (`shared/cnn32`) or folder name (`cnn32`: both)."""
    if not wanted:
        return networks
    return [(label, d) for label, d in networks if label in wanted or d.name in wanted]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.throughput", description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", default=[], help=f"configurations (default: {','.join(CONFIGS)})")
    ap.add_argument("--network", action="append", default=[], help="networks by name (default: all)")
    ap.add_argument("--models", action="append", help="folders of networks (default: models/ and ../shared/models)")
    ap.add_argument("--no-area", action="store_true", help="skip the core's Yosys area")
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (for a closing note)")
    ap.add_argument("--json", metavar="PATH", help="write every row and the summary as JSON")
    args = ap.parse_args(argv)
    configs = _names(args.config) or list(CONFIGS)
    folders = [Path(m) for m in args.models] if args.models else [MODELS_DIR, SHARED / "models"]
    networks = select(network_dirs(folders), _names(args.network))
    if not networks:
        print(f"throughput: no network selected under {', '.join(map(str, folders))}")
        return 2

    from firmware_model.errors import NpuBenchError

    try:
        nets, layers, errors = measure(networks, configs)
    except NpuBenchError as e:                # a configuration that does not exist or is invalid
        print(f"throughput: {e}")
        return 2
    area = {} if args.no_area else measure_area(configs)
    result = summary(nets, layers)
    print_report(nets, layers, area, result, args.markdown)
    for e in errors:
        print(f"error: {e}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "networks": [asdict(r) for r in nets], "layers": [asdict(r) | {"met": r.met} for r in layers],
            "area": area, "summary": result, "errors": errors}, indent=1) + "\n")
    return 1 if errors else 0


def print_report(nets, layers, area, result, markdown: bool) -> None:
    title = "###" if markdown else "=="
    print(f"{title} Issue 13: NPU cycles per invocation (timing model) against Vela 5.2.0's Ethos-U55-256")
    print(network_table(nets, markdown))
    print("\ncycles and useful MACs per invocation: a stateful network's totals over its committed invocations "
          "(inv.) divided by them; Vela's cycles_npu is one inference from the .tflite (from the .tosa where "
          "marked); ratio = ours / Vela's")
    print(f"\n{title} MAC utilisation of the qualifying layers (CONV2D >= {MIN_CHANNELS} in and out channels and "
          f">= {MIN_OUTPUT}x{MIN_OUTPUT} out: 80%; DEPTHWISE_CONV2D: 50%)")
    print(layer_table(layers, markdown) if layers else "(no qualifying layer on default or large)")
    if area:
        print(f"\n{title} Core area (Yosys, whole npu_core; cells are coarse cells, not gates)")
        print(area_table(area, {r.config: r.macs for r in nets}, markdown))
    print(f"\n{title} Targets")
    print(summary_text(result))


if __name__ == "__main__":
    sys.exit(main())
