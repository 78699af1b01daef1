"""Pass 3 — lowering and fusion.

Reads: ctx.graph (static shapes).
Writes: ctx.graph with groups of TOSA ops replaced by NPU operations — `Operator(op="NPU",
attrs={"npu": <NpuOperation>})` — and ctx.host_reasons: for every op left to the host CPU, why no
NPU unit runs it (including an operation whose smallest tile does not fit the configuration's
SRAMs). The match rules are the kinds' own (compiler/npu/__init__.py LOWERING_RULES);
constants that only fed fused ops disappear with them.
"""

from __future__ import annotations

from compiler.errors import CompileError, TileFitError
from compiler.ir import Block, Operator
from compiler.npu import LOWERING_RULES
from compiler.npu.base import NPU_OP

DATA_OPS = {"CONST", "CONST_SHAPE"}


def _lower(block: Block, op: Operator, producers, consumers):
    """(NpuOperation, replaced ops) from the first rule that takes the op, else why none does."""
    for rule in LOWERING_RULES:
        found = rule(block, op, producers, consumers)
        if found is not None:
            return found
    return "no NPU unit implements this op"


def run(ctx) -> None:
    block = ctx.block
    producers, consumers = block.producers(), block.consumers()
    replaced: set[int] = set()
    new_ops: list[Operator] = []
    # A group may be found at its first op (e.g. an ADD's input RESCALE); the NPU operation takes
    # the place of the group's last op, where all of its inputs exist. Replaced ops are marked
    # "lowered" so that later rules leave them alone.
    position = {id(o): i for i, o in enumerate(block.operators)}
    deferred: dict[int, Operator] = {}
    for op in block.operators:
        if id(op) in replaced:
            if id(op) in deferred:
                new_ops.append(deferred.pop(id(op)))
            continue
        outcome = None if op.op in DATA_OPS else _lower(block, op, producers, consumers)
        if isinstance(outcome, tuple):
            # An operation whose smallest tile does not fit this configuration runs on the host.
            try:
                outcome[0].plan(ctx.cfg, f"{op.op} -> {', '.join(op.outputs)}")
            except TileFitError as e:
                outcome = f"no tile fits the '{ctx.cfg.name}' configuration ({e})"
        if isinstance(outcome, tuple):
            npu, ops = outcome
            if any(position[id(o)] < position[id(op)] or id(o) in replaced for o in ops):
                raise CompileError(f"{ctx.graph.source}: lowering {op.op} -> {', '.join(op.outputs)}: the "
                                   f"{npu.kind} group takes an op already placed (a lowering-rule bug)")
            replaced.update(id(o) for o in ops)
            for o in ops:
                o.annotations["lowered"] = True
            node = Operator(NPU_OP, list(npu.ifm_names), list(npu.ofm_names), attrs={"npu": npu},
                            location=op.location)
            last = max(ops, key=lambda o: position[id(o)])
            if last is op:
                new_ops.append(node)
            else:
                deferred[id(last)] = node
            continue
        if isinstance(outcome, str):
            ctx.host_reasons[id(op)] = outcome
        new_ops.append(op)
    block.operators = _drop_dead_constants(block, new_ops)
    used = {n for op in block.operators for n in op.inputs + op.outputs} | set(block.inputs) | set(block.outputs)
    block.tensors = {k: t for k, t in block.tensors.items() if k in used or t.is_variable}


def _drop_dead_constants(block: Block, ops: list[Operator]) -> list[Operator]:
    live = set(block.outputs)
    kept: list[Operator] = []
    for op in reversed(ops):
        if op.op in DATA_OPS and not any(o in live for o in op.outputs):
            continue
        kept.append(op)
        live.update(op.inputs)
    return kept[::-1]
