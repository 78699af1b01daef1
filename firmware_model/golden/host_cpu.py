"""The modelled host CPU: runs the TOSA ops the NPU cannot, on tensors in external memory.

The compiler lists them in manifest["host_ops"]; command `HOST k` runs entry k: the host reads
the op's inputs from external memory (constants included), runs the interpreter's kernel for the
op (firmware_model.tosa_ops, the same code the TOSA interpreter uses) and writes the outputs back.
The kernel checks the op's ERROR_IFs and REQUIREs as in the interpreter (registry.run_op: a
REQUIRE failure names the op, with the interpreter's place for it, `graph_where`, when the
manifest has it).
"""

from __future__ import annotations

import numpy as np

from firmware_model.arch.cycle_model import host_op_cycles
from firmware_model.arch.program import Placement, Program
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, run_op


def host_cycles(ops: list[dict], index: int) -> int:
    """The modelled host time of host op `index` (cycle_model.host_op_cycles): it depends on the
    op's output shapes in the manifest alone, so the timing-only model runs no kernel for it."""
    outs = [Placement.from_json(p) for p in ops[index]["outputs"]]
    return host_op_cycles(sum(int(np.prod(p.shape, dtype=np.int64)) for p in outs))


class HostCpu:
    def __init__(self, program: Program):
        self.ops = program.manifest.get("host_ops", [])

    def run(self, model, index: int) -> int:
        entry = self.ops[index]
        ins = [Placement.from_json(p) if p else None for p in entry["inputs"]]
        outs = [Placement.from_json(p) for p in entry["outputs"]]
        arrays = [model.read_tensor(p) if p else None for p in ins]
        call = OpCall(
            op=entry["op"], attrs=dict(entry["attrs"]), inputs=arrays,
            input_specs=[TensorSpec(tuple(p.shape), p.dtype) if p else None for p in ins],
            output_specs=[TensorSpec(tuple(p.shape), p.dtype) for p in outs],
            where=entry.get("graph_where") or f"host op {index}: {entry['where']}", attr_kind=entry.get("attr_kind"))
        results = run_op(call)
        for place, value in zip(outs, results):
            model.write_tensor(place, np.asarray(value).reshape(place.shape))
        return host_cycles(self.ops, index)
