"""The host CPU's op read once per program (host_cpu._HostOp): what it keeps is what the manifest
entry says (placements, tensor specs, place in the graph) and its cycles are host_cycles'."""

from __future__ import annotations

import io

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.program import Placement
from firmware_model.golden.host_cpu import _HostOp, host_cycles
from firmware_model.tosa_ops.registry import TensorSpec
from sim.paths import MODELS_DIR


def test_host_op_keeps_the_manifest_entry():
    program = compile_file(MODELS_DIR / "mlp" / "model.tosa", load_config("tiny"), out=io.StringIO()).program
    ops = program.manifest["host_ops"]
    assert ops
    for index, entry in enumerate(ops):
        op = _HostOp(ops, index)
        assert op.cycles == host_cycles(ops, index)
        assert op.ins == [Placement.from_json(p) if p else None for p in entry["inputs"]]
        assert op.outs == [Placement.from_json(p) for p in entry["outputs"]]
        assert list(op.input_specs) == [TensorSpec(tuple(p.shape), p.dtype) if p else None for p in op.ins]
        assert list(op.output_specs) == [TensorSpec(tuple(p.shape), p.dtype) for p in op.outs]
        assert op.where == (entry.get("graph_where") or f"host op {index}: {entry['where']}")
