"""The modelled host CPU: runs the TOSA ops the NPU cannot, on tensors in external memory.

The compiler lists them in manifest["host_ops"]; command `HOST k` runs entry k: the host reads
the op's inputs from external memory (constants included), runs the interpreter's kernel for the
op (firmware_model.tosa_ops, the same code the TOSA interpreter uses) and writes the outputs back.
The kernel checks the op's ERROR_IFs and REQUIREs as in the interpreter (registry.run_op: a
REQUIRE failure names the op, with the interpreter's place for it, `graph_where`, when the
manifest has it).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from firmware_model.arch.cycle_model import host_op_cycles
from firmware_model.arch.program import Placement, Program
from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.numerics import count_leading_zeros_int
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, op_unpredictable, prepare_for, run_op


def host_cycles(ops: list[dict], index: int) -> int:
    """The modelled host time of host op `index` (cycle_model.host_op_cycles): it depends on the
    op's output shapes in the manifest alone, so the timing-only model runs no kernel for it."""
    outs = [Placement.from_json(p) for p in ops[index]["outputs"]]
    return host_op_cycles(sum(int(np.prod(p.shape, dtype=np.int64)) for p in outs))


class HostCpu:
    def __init__(self, program: Program):
        self.ops = program.manifest.get("host_ops", [])
        self._prepared: dict[int, _HostOp] = {}

    def run(self, model, index: int) -> int:
        op = self._prepared.get(index)
        if op is None:
            op = self._prepared[index] = _HostOp(self.ops, index)
        fast = op.fast
        if fast is not None:            # a small CLZ (_HostOp.prepare_from): Python integers on the bytes
            src, dst, words = fast
            ext = model.mem.ext
            words.pack_into(ext, dst, *map(count_leading_zeros_int, words.unpack_from(ext, src)))
            return op.cycles
        arrays = [model.read_tensor(p) if p else None for p in op.ins]
        if op.execute is not None:      # the kernel's execute half, prepared at an earlier run
            try:
                results = op.execute(arrays)
            except TosaUnpredictable as e:      # as run_op names it
                named = op_unpredictable(op.call(arrays), e)
                if named is e:
                    raise
                raise named from e
        else:
            call = op.call(arrays)
            results = run_op(call)
            op.prepare_from(call)
        for place, value in zip(op.outs, results):
            model.write_tensor(place, np.asarray(value).reshape(place.shape))
        if op.fast_next is not None:
            op.fast, op.fast_next = op.fast_next, None
        return op.cycles


class _HostOp:
    """Host op `index` of the manifest read once: its placements, tensor specs, place in the
    graph and host cycles (host_cycles), which the manifest alone decides."""

    def __init__(self, ops: list[dict], index: int):
        entry = self.entry = ops[index]
        self.ins = [Placement.from_json(p) if p else None for p in entry["inputs"]]
        self.outs = [Placement.from_json(p) for p in entry["outputs"]]
        self.input_specs = tuple(TensorSpec(tuple(p.shape), p.dtype) if p else None for p in self.ins)
        self.output_specs = tuple(TensorSpec(tuple(p.shape), p.dtype) for p in self.outs)
        self.where = entry.get("graph_where") or f"host op {index}: {entry['where']}"
        self.cycles = host_cycles(ops, index)
        # A kernel written in two halves (registry.register_plan) whose prepare reads no input's
        # value: its execute, made from this op's call once a run has gone through (prepare_from),
        # is what run_op runs at every run, prepare(call)(call.inputs): the interpreter's "prepare
        # once, execute many".
        self.execute = None
        # A CLZ of a few int32 elements (mlp's softmax: one), once a run has gone through: its
        # result computed on the words in external memory (count_leading_zeros_int), without the
        # tensors and numpy calls (~10 of the ~18 us it took in an invocation). (source address,
        # result address, the words' Struct). Taken up (fast_next -> fast) once that run has also
        # written its result (every range checked).
        self.fast = self.fast_next = None

    def call(self, arrays: list) -> OpCall:
        entry = self.entry
        return OpCall(op=entry["op"], attrs=dict(entry["attrs"]), inputs=arrays,
                      input_specs=list(self.input_specs), output_specs=list(self.output_specs),
                      where=self.where, attr_kind=entry.get("attr_kind"))

    def prepare_from(self, call: OpCall) -> None:
        """Keep the kernel's execute half (see __init__) after `call` ran through run_op."""
        split = prepare_for(call.op)
        if split is not None and not split[1]:
            self.execute = split[0](call)
        ins, outs = self.ins, self.outs
        if call.op == "CLZ" and len(ins) == 1 and ins[0] is not None and len(outs) == 1:
            n = math.prod(ins[0].shape)
            if (ins[0].dtype == outs[0].dtype == DType.INT32 and n == math.prod(outs[0].shape)
                    and 0 < n <= CLZ_FAST_MAX):
                self.fast_next = (ins[0].addr, outs[0].addr, struct.Struct(f"<{n}i"))


CLZ_FAST_MAX = 64       # elements: a larger CLZ runs the kernel (numpy's pass pays there)
