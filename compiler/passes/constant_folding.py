"""Pass — constant folding.

Reads: ctx.graph (static shapes).
Writes: ctx.graph where every op whose inputs are all constants (CONST / CONST_SHAPE outputs) is
replaced by a CONST holding its result. Converters reshape and transpose weights with such ops
(e.g. a RESHAPE of the depthwise weights); folding them lets the lowering see constant weights.

The op is evaluated by the interpreter's own kernel (firmware_model.tosa_ops): one definition of
each op. Variable reads and ops without outputs are never folded; an op whose evaluation raises
a TOSA error is left alone for the validation and the host to report.
"""

from __future__ import annotations

import numpy as np

from compiler.ir import Operator
from firmware_model.errors import NpuBenchError
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, run_op

DATA_OPS = ("CONST", "CONST_SHAPE")
NEVER_FOLD = {"IDENTITY", "VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "CUSTOM", "COND_IF", "WHILE_LOOP"}


def run(ctx) -> None:
    block = ctx.block
    constant = {name for op in block.operators if op.op in DATA_OPS for name in op.outputs
                if block.tensors.get(name) is not None and block.tensors[name].data is not None}
    folded = 0
    new_ops: list[Operator] = []
    for i, op in enumerate(block.operators):
        if (op.op in DATA_OPS or op.op in NEVER_FOLD or not op.inputs or not op.outputs
                or not all(name in constant for name in op.inputs if name)):
            new_ops.append(op)
            continue
        ins = [block.tensors[n] if n else None for n in op.inputs]
        outs = [block.tensors[n] for n in op.outputs]
        call = OpCall(op=op.op, attrs=dict(op.attrs), inputs=[t.data if t is not None else None for t in ins],
                      input_specs=[TensorSpec(tuple(t.shape), t.dtype) if t is not None else None for t in ins],
                      output_specs=[TensorSpec(tuple(t.shape), t.dtype) for t in outs],
                      where=f"{ctx.graph.source}: op %{i} {op.op} (constant folding)", attr_kind=op.attr_kind)
        try:
            results = run_op(call)
        except NpuBenchError:
            new_ops.append(op)
            continue
        for t, value in zip(outs, results):
            t.data = np.asarray(value).astype(t.dtype.storage).reshape(t.shape)
            kind = "CONST_SHAPE" if t.dtype.name == "SHAPE" else "CONST"
            new_ops.append(Operator(kind, [], [t.name], location=op.location))
            constant.add(t.name)
        folded += 1
    block.operators = new_ops
    if folded:
        ctx.report.append(f"constant folding: {folded} op(s) evaluated at compile time")
