"""Pass 2 — state legalization.

Reads: ctx.graph (variable tensors and their read/write ops).
Writes: ctx.variables (one slot per variable in the persistent variable SRAM).

This version of the compiler does not map variables yet: a graph with variables is refused with a
CompileError naming them, rather than compiled wrongly.
"""

from __future__ import annotations

from compiler.errors import CompileError


def run(ctx) -> None:
    names = [t.variable_name or t.name for t in ctx.block.variables()]
    if names:
        raise CompileError(f"{ctx.graph.source}: variables {', '.join(names)}: the compiler does not "
                           f"map TOSA variables onto the variable SRAM yet")
