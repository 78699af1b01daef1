"""Pass 3 — state legalization: TOSA variables become explicit loads and stores of slots in the
persistent variable SRAM (Relay's rewrite of effects on global state into explicit state).

Reads: ctx.graph (validated: the variables' rules hold statically), ctx.cfg.
Writes: ctx.variables — the layout, one record per variable: name (the variable's uid), tensor,
shape, dtype, bytes, slot (written flag), initial (whether the graph gives an initial value),
placement ("sram": addr, its byte address in the variable SRAM, word-aligned; "external": home,
its address in external memory, which the scheduler fills in, and the reason) — and ctx.graph, where
- the declarations become one `VARIABLE` op per variable at the start of the block (the spec
  declares every variable at the start of an invocation; the flatbuffer form does so implicitly),
- the reads (IDENTITY with VariableReadAttribute, VARIABLE_READ) and writes (IDENTITY with
  VariableWriteAttribute, VARIABLE_WRITE) stay where they are,
each annotated with `annotations["variable"]` = its slot record. The lowering turns them into the
variable kind's NPU operations (compiler/npu/variable.py: VAR INIT / READ / WRITE).

The variables are the interpreter's (`Interpreter.graph_variables`: one implementation of which
tensors are variables, their uids, types, shapes and initial values). A slot holds the variable's
dense storage bytes (as in external memory), rounded up to whole words of `mac.cols` bytes. The
variables take the variable SRAM in declaration order; one that does not fit what is left lives in
external memory instead (docs/isa.md, "The VAR command"), and the compile report says which and
why. More variables than written flags is a CompileError naming them.

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
        need = max(round_up(nbytes, word), word)
        record = {"name": v.uid, "tensor": v.tensor, "shape": list(v.shape), "dtype": v.dtype.name,
                  "addr": 0, "bytes": nbytes, "slot": k, "initial": v.initial is not None}
        if addr + need <= cfg.variable_sram:
            record.update(placement="sram", addr=addr)
            addr += need
        else:
            # Too big for what is left: its home is in external memory (the scheduler places it in
            # the constants image); the DMA moves its bytes, VAR CHECK/MARK keep its flag.
            record.update(placement="external", home=None,
                          reason=f"needs {need} B, {cfg.variable_sram - addr} B of the {cfg.variable_sram} B "
                                 f"variable SRAM left")
        records.append(record)
    if len(records) > VAR_SLOTS:
        raise CompileError(f"{src}: {len(records)} variables ({', '.join(r['name'] for r in records)}); the "
                           f"variable SRAM has {VAR_SLOTS} written flags (isa.VAR_SLOTS)")
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
    inside = [r for r in records if r["placement"] == "sram"]
    ctx.report.append(f"state: {len(records)} variable(s); {len(inside)} in {addr} of {cfg.variable_sram} B of "
                      f"variable SRAM")
    for r in records:
        where = (f"variable SRAM @ {r['addr']}" if r["placement"] == "sram"
                 else f"external memory (its home in the constants image): it {r['reason']}")
        ctx.report.append(f"  '{r['name']}' {r['dtype']}{r['shape']} {r['bytes']} B, slot {r['slot']}: {where}")


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
