"""Pass 6 — emission.

Reads: the scheduled graph (ctx.schedule), ctx.cfg.
Writes: ctx.program (firmware_model.arch.program.Program): the command stream, the constants image and
the manifest (graph I/O placements, host ops, layers with their tiles and command ranges), and
the compile report lines in ctx.report.

Registers keep their values between commands, so a SET is emitted only when a value changes (a
DMA stride only when its length is above 1), and a constant load whose bytes are still in SRAM
not at all (compiler/npu/base.CommandWriter).
Consecutive NPU operations are linked (compiler/npu/prefetch.py): the next one's first loads are
issued before this one's last compute command when that is safe, so they overlap it.
Each NPU operation emits its own tiles (compiler/npu/<kind>.py); each tile is preceded by MARK
<tile id> so the RTL and the waveform show which tile is running.
"""

from __future__ import annotations

from compiler.npu.base import NPU_OP, CommandWriter, ConstantHomes, EmitContext
from compiler.npu.prefetch import PrefetchLink, pending_store_span
from compiler.npu.stage import LutTables
from compiler.passes.scheduler import Schedule
from firmware_model.arch.isa import Opcode
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.program import Program


def _host_op_entry(op, block, sched: Schedule, where: str) -> dict:
    def place(name):
        return sched.placements[name].to_json()

    attrs = {}
    for k, v in op.attrs.items():
        attrs[k] = v.tolist() if hasattr(v, "tolist") else v
    return {"op": op.op, "attrs": attrs, "attr_kind": op.attr_kind, "where": where,
            "inputs": [place(n) if n else None for n in op.inputs],
            "outputs": [place(n) for n in op.outputs]}


# Operations a prefetch link passes over: an alias emits no command; a data movement only moves
# bytes between external memory and its own output-SRAM buffers, never the weight, parameter or
# input SRAMs a MAC's or an ELTWISE's first loads fill, and its external outputs are excluded from
# what the prefetch may read (PrefetchLink.outputs).
PASSED_OVER = ("alias", "move")


def _next_link(cfg, w: CommandWriter, ops: list, pos: int, npu, sched: Schedule, layer: int,
               first_tile_id: int, luts: LutTables, homes: ConstantHomes) -> PrefetchLink | None:
    """The prefetch link from `npu` to the NPU operation right after it, when both take part
    (compiler/npu/prefetch.py); None otherwise (a host operation between them, or a kind without
    prefetch)."""
    if not hasattr(npu, "prefetch"):
        return None
    nxt = None
    outputs = list(npu.ofm_names)
    moved = []                  # the data movements' outputs: written after the prefetch
    for _, op in ops[pos + 1:]:
        if op.op != NPU_OP:
            return None
        nxt = op.attrs["npu"]
        if nxt.kind not in PASSED_OVER:
            break
        outputs += nxt.ofm_names
        if nxt.kind != "alias":
            moved += nxt.ofm_names
    else:
        return None
    if not hasattr(nxt, "prefetch"):
        return None
    n_sched = sched.ops[id(op)]
    ectx = EmitContext(cfg, sched.placements, n_sched.constants, n_sched.buffers, layer, first_tile_id, luts, homes)
    return PrefetchLink(cfg, w, nxt, op.annotations["plan"], ectx, [sched.placements[n] for n in outputs],
                        [sched.placements[n] for n in moved])


def run(ctx) -> None:
    cfg: NpuConfig = ctx.cfg
    sched: Schedule = ctx.schedule
    block = ctx.block
    w = CommandWriter(read_only=_read_only_spans(sched))
    layers, host_ops = [], []
    tile_id = 0
    npu_macs = host_macs = 0
    ops = [(i, op) for i, op in enumerate(block.operators) if op.op not in ("CONST", "CONST_SHAPE")]
    prefetched = None           # this operation's first loads, issued by the one before
    homes = ConstantHomes(frozenset(sched.constants_addr + off for off in sched.constants.shared))
    luts = LutTables(cfg.lut_entries, cfg.mac_cols // 2,
                     LutTables.reused_tables(getattr(op.attrs["npu"], "stage", None) for _, op in ops if op.op == NPU_OP))
    for pos, (i, op) in enumerate(ops):
        where = f"op %{i} {op.op} -> {', '.join(op.outputs)}"
        if op.op == NPU_OP:
            npu = op.attrs["npu"]
            plan = op.annotations["plan"]
            op_sched = sched.ops[id(op)]
            ectx = EmitContext(cfg, sched.placements, op_sched.constants, op_sched.buffers, len(layers), tile_id, luts, homes)
            kw = {}
            if hasattr(npu, "prefetch"):
                link = _next_link(cfg, w, ops, pos, npu, sched, len(layers) + 1, tile_id + len(plan.tiles), luts, homes)
                kw = {"prefetched": prefetched, "next_loads": link}
            tiles = npu.emit(w, plan, ectx, **kw)
            if npu.kind in PASSED_OVER and prefetched is not None:
                # the next operation's first loads, issued before it, pass over it; a data
                # movement's last store is now the one they may run beside (an alias emits nothing)
                if npu.kind != "alias":
                    prefetched.store_span = pending_store_span(cfg, w)
            elif npu.kind != "alias":
                prefetched = None
            if kw and kw["next_loads"] is not None and kw["next_loads"].taken is not None:
                prefetched = kw["next_loads"].taken
                prefetched.store_span = pending_store_span(cfg, w)
            tile_id += len(tiles)
            npu_macs += npu.macs
            layers.append({"index": len(layers), "kind": "npu", "unit": npu.unit, "name": ", ".join(npu.ofm_names),
                           "op": npu.describe(), "sources": npu.sources, "macs": npu.macs,
                           "order": plan.order, "tiles": tiles})
        else:
            prefetched = None
            entry = _host_op_entry(op, block, sched, where)
            w.emit(Opcode.HOST, 0, len(host_ops))
            host_ops.append(entry)
            macs = _op_macs(op, block)
            host_macs += macs
            layers.append({"index": len(layers), "kind": "host", "unit": "host CPU", "name": ", ".join(op.outputs),
                           "op": op.op, "reason": ctx.host_reasons.get(id(op), ""), "macs": macs, "tiles": []})
    w.emit(Opcode.END)
    manifest = {
        "config": cfg.to_dict(),
        "source": ctx.graph.source,
        "memory": {"constants": {"addr": sched.constants_addr, "size": sched.constants.size},
                   "ext_used": sched.ext_used},
        "graph": {"inputs": [sched.placements[n].to_json() for n in block.inputs],
                  "outputs": [sched.placements[n].to_json() for n in block.outputs]},
        "variables": ctx.variables,
        "host_ops": host_ops,
        "layers": layers,
        "stats": {"commands": len(w.commands), "tiles": tile_id, "npu_macs": npu_macs, "host_macs": host_macs},
    }
    ctx.program = Program(w.commands, sched.constants.bytes(), manifest)
    total = npu_macs + host_macs
    share = 100.0 * npu_macs / total if total else 100.0
    ctx.report.insert(0, f"compile: {ctx.graph.source} for '{cfg.name}' ({cfg.mac_rows}x{cfg.mac_cols} MACs)")
    for layer in layers:
        if layer["kind"] == "npu":
            ctx.report.append(f"  layer {layer['index']:3d} NPU  {layer['name']}: {layer['op']}; "
                              f"{len(layer['tiles'])} tile(s), {layer['macs']} MACs")
        else:
            ctx.report.append(f"  layer {layer['index']:3d} HOST {layer['op']} -> {layer['name']}: {layer['reason']}")
    ctx.report.append(f"summary: {len(layers)} layers, {tile_id} NPU tiles, {len(host_ops)} host ops, "
                      f"{share:.1f}% of {total} MACs on the NPU, {len(w.commands)} commands, "
                      f"{w.skipped} constant load(s) left out (already in SRAM)")


def _read_only_spans(sched: Schedule) -> tuple[tuple[int, int], ...]:
    """The external spans no command writes: the constants image but the variables' homes."""
    base, spans, start = sched.constants_addr, [], 0
    for lo, hi in sorted(sched.constants.writable) + [(sched.constants.size, sched.constants.size)]:
        if lo > start:
            spans.append((base + start, base + lo))
        start = max(start, hi)
    return tuple(spans)


def _op_macs(op, block) -> int:
    """MACs of a tensor op left to the host (for the NPU share in the report)."""
    if op.op in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL"):
        out = block.tensors.get(op.outputs[0])
        wt = block.tensors.get(op.inputs[1])
        if out is None or wt is None or not out.is_static:
            return 0
        n_out = out.num_elements
        if op.op == "MATMUL":
            return n_out * block.tensors[op.inputs[0]].shape[-1]
        if op.op == "DEPTHWISE_CONV2D":
            return n_out * wt.shape[0] * wt.shape[1]
        return n_out * (wt.num_elements // wt.shape[0])
    return 0
