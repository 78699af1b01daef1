"""Per-layer performance of a network on a configuration: `npu perf MODEL --config C`.

A layer is what the compiler made of one TOSA op or a fused group of them (the manifest's
layers, named after their output and listing their source ops). Every command of the program is
given to exactly one row, so the rows' cycles add up to the program's:

- the commands of a tile (manifest tile["commands"]) belong to the tile's layer;
- HOST k belongs to the host layer that runs host op k;
- the variable commands (SET VAR_*, VAR) outside tiles form the row "variables";
- END forms the row "end" (its wait for the last DMA transfer);
- any other command outside a tile (a LUT or parameter load shared by the next layer's tiles)
  belongs to the layer of the next tile, whose work it prepares.

A command's cycles are the clocks from its fetch to the next command's fetch (END: to the end of
the invocation), so waits for the DMA engine count where the command processor waits. The units'
busy clocks (MAC, ELTWISE, POOL, DMA, FILL, VAR, command decode, stall) are listed per row as
well; they overlap (the DMA engine works while the command processor runs compute), so they do
not add up to the row's cycles. Host time is modelled apart from NPU clocks, as the golden model
counts it.

The numbers come from the golden model or, by default, the timing-only model, which gives the
same counters without computing data; both are checked against the RTL's cycle counter by the
co-simulation.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import Opcode, Reg
from firmware_model.errors import NpuBenchError

ENGINES = ("timing", "golden")
COMPUTE_UNITS = ("mac", "eltwise", "pool")
MEMORY_UNITS = ("dma", "fill", "var")
UNIT_COLUMNS = ("mac", "mac_stream", "eltwise", "pool", "dma", "fill", "var", "command", "stall")
VAR_REGISTERS = frozenset(int(r) for r in Reg if r.name.startswith("VAR_"))


class PerfError(NpuBenchError):
    """A performance report that cannot be made (an unknown engine, a network that faults)."""


@dataclass
class LayerPerf:
    index: int                      # row number
    name: str                       # the layer's name (its output tensor), or "variables" / "end"
    kind: str                       # npu, host, variables, end
    unit: str                       # MAC, ELTWISE, POOL, host CPU, VAR, -
    ops: str                        # the TOSA ops fused into it
    commands: int = 0               # of the program (not multiplied by the invocations)
    tiles: int = 0                  # of the program
    cycles: int = 0                 # NPU clocks that belong to this row (the rows add up to the total)
    host_cycles: int = 0            # modelled host time (not NPU clocks)
    unit_cycles: dict = field(default_factory=dict)   # busy clocks per unit (they overlap)
    useful_macs: int = 0            # the TOSA ops' multiply-accumulates
    mac_slots: int = 0              # MAC lane slots the array spent (padding lanes and channels included)
    bytes_read: dict = field(default_factory=dict)     # by memory: ext, input, weight, param, lut, output, variable
    bytes_written: dict = field(default_factory=dict)

    def utilisation(self, cfg: NpuConfig) -> float:
        """Useful MACs / (cycles x MACs per cycle)."""
        return self.useful_macs / (self.cycles * cfg.macs) if self.cycles else 0.0

    def slot_utilisation(self, cfg: NpuConfig) -> float:
        """MAC lane slots / (cycles x MACs per cycle): how busy the array was, useful or not."""
        return self.mac_slots / (self.cycles * cfg.macs) if self.cycles else 0.0

    @property
    def bound(self) -> str:
        """compute or memory: which of the compute units and the DMA engine was busy longer."""
        if self.kind == "host":
            return "host"
        compute = sum(self.unit_cycles.get(u, 0) for u in COMPUTE_UNITS)
        memory = sum(self.unit_cycles.get(u, 0) for u in MEMORY_UNITS)
        if not compute and not memory:
            return "-"
        return "memory" if memory > compute else "compute"

    def time_us(self, cfg: NpuConfig) -> float:
        return self.cycles / cfg.clock_mhz


@dataclass
class PerfReport:
    model: str
    config: NpuConfig
    engine: str
    invocations: int
    layers: list[LayerPerf]
    total: LayerPerf
    counters: dict                  # the engine's own counters (Counters.as_dict()), for checks

    def rows(self) -> list[dict]:
        """One flat dict per row (the layers, then the total), as the CSV holds them."""
        out = []
        for lay in [*self.layers, self.total]:
            row = {"model": Path(self.model).parent.name if Path(self.model).stem == "model" else Path(self.model).stem,
                   "config": self.config.name, "config_hash": self.config.hash, "engine": self.engine,
                   "row": lay.index, "layer": lay.name, "kind": lay.kind, "unit": lay.unit, "ops": lay.ops,
                   "commands": lay.commands, "tiles": lay.tiles, "cycles": lay.cycles,
                   "time_us": round(lay.time_us(self.config), 3), "host_cycles": lay.host_cycles,
                   "useful_macs": lay.useful_macs, "mac_slots": lay.mac_slots,
                   "utilisation": round(lay.utilisation(self.config), 4),
                   "slot_utilisation": round(lay.slot_utilisation(self.config), 4), "bound": lay.bound}
            for u in UNIT_COLUMNS:
                row[f"{u}_cycles"] = lay.unit_cycles.get(u, 0)
            for mem in MEMORIES:
                row[f"{mem}_read"] = lay.bytes_read.get(mem, 0)
                row[f"{mem}_written"] = lay.bytes_written.get(mem, 0)
            out.append(row)
        return out

    def csv_text(self) -> str:
        rows = self.rows()
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue()

    def to_json(self) -> dict:
        cfg = {**asdict(self.config), "hash": self.config.hash}
        return {"model": self.model, "config": cfg, "engine": self.engine, "invocations": self.invocations,
                "layers": self.rows()[:-1], "total": self.rows()[-1], "counters": self.counters}

    def format_table(self, top: int | None = None) -> str:
        cfg = self.config
        head = (f"{'#':>3} {'layer':24} {'unit':8} {'cycles':>10} {'share':>6} {'us':>9} {'useful MACs':>12} "
                f"{'util':>6} {'MAC':>9} {'DMA':>9} {'ext bytes':>10} {'bound':7}")
        lines = [f"npu perf: {self.model} on '{cfg.name}' [{cfg.hash}] ({cfg.mac_rows}x{cfg.mac_cols} MACs @ "
                 f"{cfg.clock_mhz:g} MHz), {self.invocations} invocation(s), {self.engine} model", head,
                 "-" * len(head)]
        layers = self.layers
        if top is not None and len(layers) > top:
            layers = sorted(layers, key=lambda lay: -lay.cycles)[:top]
        total = max(self.total.cycles, 1)
        for lay in [*layers, self.total]:
            if lay is self.total:
                lines.append("-" * len(head))
            ext = lay.bytes_read.get("ext", 0) + lay.bytes_written.get("ext", 0)
            lines.append(
                f"{lay.index if lay is not self.total else '':>3} {lay.name[:24]:24} {lay.unit[:8]:8} {lay.cycles:>10} "
                f"{100 * lay.cycles / total:5.1f}% {lay.time_us(cfg):9.2f} {lay.useful_macs:>12} "
                f"{100 * lay.utilisation(cfg):5.1f}% {lay.unit_cycles.get('mac', 0):>9} "
                f"{lay.unit_cycles.get('dma', 0) + lay.unit_cycles.get('fill', 0):>9} {ext:>10} {lay.bound:7}")
        if top is not None and len(self.layers) > top:
            lines.append(f"(the {top} slowest of {len(self.layers)} rows; every row is in the CSV and JSON files)")
        if self.total.host_cycles:
            lines.append(f"host CPU: {self.total.host_cycles} modelled cycles besides the NPU's")
        return "\n".join(lines)


MEMORIES = ("ext", "input", "weight", "param", "lut", "output", "variable", "accumulator")


def command_rows(program) -> tuple[list[LayerPerf], list[int]]:
    """The report's rows and, per command, the index of the row it belongs to."""
    manifest = program.manifest
    commands = program.commands
    rows: list[LayerPerf] = []
    row_of_layer: dict[int, int] = {}
    owner = [-1] * len(commands)
    host_rows: dict[int, int] = {}
    host_layers = [lay for lay in manifest.get("layers", []) if lay.get("kind") == "host"]
    for lay in manifest.get("layers", []):
        row_of_layer[lay["index"]] = len(rows)
        rows.append(LayerPerf(len(rows), lay.get("name", f"layer {lay['index']}"), lay.get("kind", "npu"),
                              lay.get("unit", "-"), ", ".join(lay.get("sources", [])) or lay.get("op", ""),
                              useful_macs=int(lay.get("macs", 0)) if lay.get("kind", "npu") == "npu" else 0))
        for t in lay.get("tiles", []):
            a, b = t["commands"]
            for i in range(a, b):
                owner[i] = row_of_layer[lay["index"]]
            rows[-1].tiles += 1
    # HOST k runs host op k; host layers are listed in the order of their ops
    for k, lay in enumerate(host_layers):
        host_rows[k] = row_of_layer[lay["index"]]
    var_row = end_row = None
    for i, cmd in enumerate(commands):
        if owner[i] >= 0:
            continue
        if cmd.opcode == Opcode.HOST and cmd.value in host_rows:
            owner[i] = host_rows[cmd.value]
        elif cmd.opcode == Opcode.VAR or (cmd.opcode == Opcode.SET and cmd.sub in VAR_REGISTERS):
            if var_row is None:
                var_row = len(rows)
                rows.append(LayerPerf(var_row, "variables", "variables", "VAR", "variable reads, writes, declarations"))
            owner[i] = var_row
        elif cmd.opcode == Opcode.END:
            if end_row is None:
                end_row = len(rows)
                rows.append(LayerPerf(end_row, "end", "end", "-", "END: the wait for the last transfers"))
            owner[i] = end_row
    # the rest prepares the next tile's layer (or, after the last tile, closes the previous one)
    nxt = -1
    for i in range(len(commands) - 1, -1, -1):
        if owner[i] >= 0 and rows[owner[i]].kind == "npu":
            nxt = owner[i]
        elif owner[i] < 0:
            owner[i] = nxt
    prev = -1
    for i in range(len(commands)):
        if owner[i] < 0:
            if prev < 0:
                prev = len(rows)
                rows.append(LayerPerf(prev, "setup", "setup", "-", "commands before any layer"))
            owner[i] = prev
        elif rows[owner[i]].kind == "npu":
            prev = owner[i]
    for i in range(len(commands)):
        rows[owner[i]].commands += 1
    return rows, owner


def make_engine(engine: str, program, cfg: NpuConfig):
    if engine == "golden":
        from firmware_model.golden.model import GoldenModel

        return GoldenModel(program, cfg)
    if engine == "timing":
        from firmware_model.golden.timing_model import TimingModel

        return TimingModel(program, cfg)
    raise PerfError(f"--engine {engine}: no such engine (engines: {', '.join(ENGINES)})")


def _inputs_for(model: Path, graph, program, count: int | None) -> list[dict]:
    """Inputs for the golden engine: the model's committed ones, else seeded random data."""
    from sim import seeds
    from sim.models.model_data import ModelData

    data = ModelData.of(model)
    names = list(graph.main.inputs)
    if data is not None and set(data.input_names) == set(names):
        invs = data.all_inputs()
        return invs[:count] if count else invs
    rng = np.random.default_rng(seeds.seed_for("perf inputs", 0))
    out = []
    for _ in range(count or 1):
        out.append({p.name: rng.integers(np.iinfo(p.dtype.storage).min, np.iinfo(p.dtype.storage).max + 1,
                                         p.shape).astype(p.dtype.storage) for p in program.inputs})
    return out


def perf_report(model: str | Path, cfg: NpuConfig, *, engine: str = "timing", binds: dict | None = None,
                invocations: int | None = None, program=None) -> PerfReport:
    """Run the network's program on `engine` and give every cycle to one row."""
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa
    from firmware_model.errors import GoldenModelError

    if engine not in ENGINES:
        raise PerfError(f"--engine {engine}: no such engine (engines: {', '.join(ENGINES)})")
    model = Path(model)
    graph = read_tosa(model)
    if program is None:
        program = compile_graph(graph, cfg, binds=binds, out=io.StringIO()).program
    rows, owner = command_rows(program)
    # the last command of each run of one row's commands (END always closes one)
    boundary = [i + 1 >= len(owner) or owner[i + 1] != owner[i] or program.commands[i].opcode == Opcode.END
                for i in range(len(owner))]
    sim = make_engine(engine, program, cfg)
    if engine == "golden" or invocations is None:
        invs = _inputs_for(model, graph, program, invocations)
    else:
        invs = [None] * invocations
    counters = sim.counters
    for inputs in invs:
        if engine == "golden":
            sim.begin_invocation(inputs)
        prev_fetch, prev_stall = 0, 0           # each invocation's timeline starts at clock 0
        last = _snapshot(counters)
        try:
            # The program runs straight from command 0 to END, so a run of commands of one row
            # is charged at once, when the next command belongs to another row: a snapshot per
            # run rather than per command (blazeface on tiny: 1.08 M commands, 0.1 M runs).
            for pc in sim.run_steps():
                if not boundary[pc]:
                    continue
                row = rows[owner[pc]]
                tl = sim.timeline
                row.cycles += tl.reached - prev_fetch
                row.unit_cycles["stall"] = row.unit_cycles.get("stall", 0) + tl.stall - prev_stall
                prev_fetch, prev_stall = tl.reached, tl.stall
                now = _snapshot(counters)
                _charge(row, now, last)
                last = now
        except GoldenModelError as e:
            raise PerfError(f"{model}: the program stopped on the {engine} model: {e}") from None
    total = LayerPerf(-1, "total", "total", "-", "")
    for row in rows:
        total.cycles += row.cycles
        total.host_cycles += row.host_cycles
        total.commands += row.commands
        total.tiles += row.tiles
        total.mac_slots += row.mac_slots
        total.useful_macs += row.useful_macs
        for d, t in ((row.unit_cycles, total.unit_cycles), (row.bytes_read, total.bytes_read),
                     (row.bytes_written, total.bytes_written)):
            for k, v in d.items():
                t[k] = t.get(k, 0) + v
    n = len(invs)
    for row in rows:
        row.useful_macs *= n
    total.useful_macs *= n
    return PerfReport(str(model), cfg, engine, n, rows, total, counters.as_dict())


def _snapshot(c) -> tuple:
    return (Counter(c.unit_cycles), c.macs, c.host_cycles, Counter(c.bytes_read), Counter(c.bytes_written))


def _charge(row: LayerPerf, now: tuple, last: tuple) -> None:
    """Add to `row` what the counters gained since `last` (the snapshot after the previous command)."""
    units, macs, host, rd, wr = now
    lu, lm, lh, lrd, lwr = last
    for k, v in (units - lu).items():
        if k not in ("stall",):          # stalls are taken from the timeline per command
            row.unit_cycles[k] = row.unit_cycles.get(k, 0) + v
    row.mac_slots += macs - lm
    row.host_cycles += host - lh
    for k, v in (rd - lrd).items():
        row.bytes_read[k] = row.bytes_read.get(k, 0) + v
    for k, v in (wr - lwr).items():
        row.bytes_written[k] = row.bytes_written.get(k, 0) + v
