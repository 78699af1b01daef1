"""Pass 3 — state legalization: TOSA variables become explicit loads and stores of slots in the
persistent variable SRAM (Relay's rewrite of effects on global state into explicit state).

Reads: ctx.graph (validated: the variables' rules hold statically), ctx.cfg.
Writes: ctx.variables — the layout, one record per variable: name (the variable's uid), tensor,
shape, dtype, addr (byte address, word-aligned), bytes, slot (written flag), initial (whether the
graph gives an initial value) — and ctx.graph, where
- the declarations become one `VARIABLE` op per variable at the start of the block (the spec
  declares every variable at the start of an invocation; the flatbuffer form does so implicitly),
- the reads (IDENTITY with VariableReadAttribute, VARIABLE_READ) and writes (IDENTITY with
  VariableWriteAttribute, VARIABLE_WRITE) stay where they are,
each annotated with `annotations["variable"]` = its slot record. The lowering turns them into the
variable kind's NPU operations (compiler/npu/variable.py: VAR INIT / READ / WRITE).

The variables are the interpreter's (`Interpreter.graph_variables`: one implementation of which
tensors are variables, their uids, types, shapes and initial values). A slot holds the variable's
dense storage bytes (as in external memory), rounded up to whole words of `mac.cols` bytes. A
variable SRAM too small for all of them, or more variables than written flags, is a CompileError
naming the variables.

What is checked where (the interpreter's semantics): read/write shape and type (ERROR_IF) and
access before declaration or a second declaration (REQUIRE, in every invocation) are static and
found by the validation pass; `is_written` depends on the invocation history, so a read of a
variable without initial value before any write is the NPU's VAR_READ_BEFORE_WRITE at run time.
"""

from __future__ import annotations

from compiler.errors import CompileError
from compiler.interpreter import Interpreter
from compiler.ir import Operator
from compiler.npu.base import round_up
from compiler.placeholder_run import is_variable_op
from firmware_model.arch.isa import VAR_SLOTS


def run(ctx) -> None:
    block = ctx.block
    src = ctx.graph.source
    cfg = ctx.cfg
    interp = Interpreter(ctx.graph)
    variables = interp.graph_variables()
    if not variables:
        ctx.variables = []
        return
    word = cfg.word_bytes
    records, addr = [], 0
    for k, v in enumerate(variables):
        nbytes = int(v.dtype.size_bytes) * _elements(v.shape)
        records.append({"name": v.uid, "tensor": v.tensor, "shape": list(v.shape), "dtype": v.dtype.name,
                        "addr": addr, "bytes": nbytes, "slot": k, "initial": v.initial is not None})
        addr += max(round_up(nbytes, word), word)
    sizes = ", ".join(f"'{r['name']}' {r['dtype']}{r['shape']} {r['bytes']} B" for r in records)
    if addr > cfg.variable_sram:
        raise CompileError(f"{src}: the variables need {addr} bytes of variable SRAM ({sizes}; each slot whole "
                           f"{word}-byte words); the '{cfg.name}' configuration has {cfg.variable_sram} B "
                           f"(sram.variable)")
    if len(records) > VAR_SLOTS:
        raise CompileError(f"{src}: {len(records)} variables ({', '.join(r['name'] for r in records)}); the "
                           f"variable SRAM has {VAR_SLOTS} slots")
    by_uid = {r["name"]: r for r in records}
    new_ops = [Operator("VARIABLE", [], [], attrs={"uid": r["name"]}, annotations={"variable": r})
               for r in records]
    for idx, op in enumerate(block.operators):
        if not is_variable_op(op):
            new_ops.append(op)
            continue
        record = by_uid[interp.variable_of(op, idx).uid]
        if op.op == "VARIABLE":
            continue                 # declared at the start (above)
        op.annotations["variable"] = record
        new_ops.append(op)
    block.operators = new_ops
    ctx.variables = records
    ctx.report.append(f"state: {len(records)} variable(s) in {addr} of {cfg.variable_sram} B of variable SRAM "
                      f"({sizes})")


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
