"""Pass 1 — shape resolution.

Reads: ctx.graph, ctx.binds (NAME=VALUE from --bind), ctx.input_shapes (shapes of actual inputs).
Writes: ctx.graph with every tensor shape static.

Unknown graph-input dims are bound from the inputs' shapes; the graph is then reduced to a static
one by propagating shapes op by op. A dim that stays unknown is a CompileError naming the tensor
and the dim.
"""

from __future__ import annotations

from compiler.errors import CompileError


def run(ctx) -> None:
    block = ctx.block
    for name in block.inputs:
        t = block.tensor(name)
        given = ctx.input_shapes.get(name)
        if given is not None and not t.is_static:
            if len(given) != t.rank:
                raise CompileError(f"{ctx.graph.source}: input '{name}' has rank {t.rank}, "
                                   f"the array given has rank {len(given)}")
            t.shape = [g if d < 0 else d for d, g in zip(t.shape, given)]
    for t in block.tensors.values():
        for i, d in enumerate(t.shape):
            if d < 0:
                key = f"{t.name}[{i}]"
                if key in ctx.binds:
                    t.shape[i] = ctx.binds[key]
    for t in block.tensors.values():
        if not t.is_static:
            dims = [i for i, d in enumerate(t.shape) if d < 0]
            raise CompileError(f"{ctx.graph.source}: tensor '{t.name}' has unknown dim {dims[0]} "
                               f"(shape {t.shape}); give the input's shape or --bind {t.name}[{dims[0]}]=N")
