"""Pass 7 — the REQUIRE monitor's records.

Reads: the emitted program (ctx.program) and the lowered graph (ctx.block), whose ops carry their
index in the graph as read (`annotations["graph_index"]`, set by compiler.pipeline).
Writes: into the manifest, for each NPU layer, `requires`: the data-dependent REQUIREs of the
TOSA ops it fuses that some input can break (compiler/npu/requires.py), each
`{"op", "index", "where", "at", "kind", ...}`; and for each host op its `graph_index` and
`graph_where`. `where` is the interpreter's own text for the op ("model.tosa op #7 -> y"), so
the golden model's monitor (firmware_model/golden/require_monitor.py) refuses an input with the
interpreter's message.

The layers are the emitter's, in block order: one per NPU operation and one per host op.
"""

from __future__ import annotations

from compiler.errors import CompileError
from compiler.npu.base import NPU_OP

DATA_OPS = ("CONST", "CONST_SHAPE")


def graph_where(source: str, op) -> tuple[int | None, str]:
    """(index, the interpreter's `where`) of a TOSA op of the graph as read."""
    idx = op.annotations.get("graph_index")
    outs = ", ".join(op.outputs) if op.outputs else "-"
    return idx, f"{source} op #{idx} -> {outs}"


def run(ctx) -> None:
    manifest = ctx.program.manifest
    source = ctx.graph.source
    layers = iter(manifest["layers"])
    host_ops = iter(manifest.get("host_ops", []))
    for op in ctx.block.operators:
        if op.op in DATA_OPS:
            continue
        layer = next(layers, None)
        if layer is None:
            raise CompileError(f"{source}: the manifest has fewer layers than the graph has operations")
        if op.op == NPU_OP:
            npu = op.attrs["npu"]
            if layer["kind"] != "npu" or layer["name"] != ", ".join(npu.ofm_names):
                raise CompileError(f"{source}: manifest layer {layer['index']} is not the NPU operation "
                                   f"{npu.describe()} (a compiler bug)")
            records = []
            for req in npu.requires():
                idx, where = graph_where(source, req.op)
                if idx is None:
                    continue
                records.append({"op": req.op.op, "index": idx, "where": where, "at": req.at, "kind": req.kind,
                                **req.params})
            if records:
                layer["requires"] = records
        else:
            entry = next(host_ops, None)
            if layer["kind"] != "host" or entry is None or entry["op"] != op.op:
                raise CompileError(f"{source}: manifest layer {layer['index']} is not the host op {op.op} (a compiler bug)")
            idx, where = graph_where(source, op)
            if idx is not None:
                entry["graph_index"], entry["graph_where"] = idx, where
