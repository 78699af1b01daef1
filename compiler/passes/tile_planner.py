"""Pass 4 — tiling.

Reads: NPU operations in ctx.graph, ctx.cfg.
Writes: op.annotations["plan"] (a compiler.npu.base.TilePlan) on each NPU operation: its tiles,
loop order and how many buffers each SRAM it uses is divided into. The rules are the kinds' own
(`NpuOperation.plan`); an operation that cannot fit even its smallest tile is a CompileError
naming the op and the SRAM.
"""

from __future__ import annotations

from compiler.npu.base import NPU_OP


def run(ctx) -> None:
    for i, op in enumerate(ctx.block.operators):
        if op.op == NPU_OP:
            npu = op.attrs["npu"]
            where = f"{ctx.graph.source}: op %{i} ({', '.join(npu.sources)})"
            op.annotations["plan"] = npu.plan(ctx.cfg, where)
