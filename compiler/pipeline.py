"""The compiler: a short pipeline of passes over one graph IR (compiler/ir.py).

    shape_resolution    bind unknown dims, evaluate shape operands: a static graph
    validation          the TOSA rules (ERROR_IF, static REQUIREs) checked by the interpreter's own step
    state_legalization  variables -> slots of the persistent variable SRAM
    constant_folding    ops on constants evaluated at compile time (by the interpreter's kernels)
    lowering            TOSA ops -> NPU operations (fusing bias, RESCALE, CLAMP); the rest -> host CPU
    concat_placement    an outer-axis CONCAT's inputs placed on its output's bytes: no copy
    tile_planner        split each NPU operation into tiles that fit the configured SRAMs
    cascading           results kept in the output SRAM for the operations after them
    ramp_down           a convolution's last block split by rows where the next one's first input waits on it
    scheduler           order, external-memory placement, SRAM allocation per tile
    emitter             command stream, constants image and manifest
    lookahead           the stream reordered and flagged so that the command processor runs ahead
    requires            the fused ops' data-dependent REQUIREs, for the golden model's monitor

Each pass is a module in compiler/passes with a `run(ctx)` function; its docstring states what it
reads from and adds to the context. `--print-after PASS` prints the IR after that pass.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from compiler.errors import CompileError
from compiler.ir import Graph
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.program import Program

PASSES = ("shape_resolution", "validation", "state_legalization", "constant_folding", "lowering", "concat_placement",
          "tile_planner", "cascading", "ramp_down", "scheduler", "emitter", "lookahead", "requires")


@dataclass
class CompileContext:
    graph: Graph
    cfg: NpuConfig
    binds: dict[str, int] = field(default_factory=dict)
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Filled by the passes:
    variables: list[dict] = field(default_factory=list)          # state_legalization
    host_reasons: dict[int, str] = field(default_factory=dict)   # lowering: id(op) -> why not on the NPU
    schedule: Any = None                                         # scheduler
    program: Program | None = None                               # emitter
    report: list[str] = field(default_factory=list)

    @property
    def block(self):
        return self.graph.main


def _pass_module(name: str):
    return importlib.import_module(f"compiler.passes.{name}")


def compile_graph(graph: Graph, cfg: NpuConfig, *, binds: dict[str, int] | None = None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None,
                  print_after: tuple[str, ...] = (), out: TextIO | None = None) -> CompileContext:
    unknown = [p for p in print_after if p not in PASSES and p != "all"]
    if unknown:
        raise CompileError(f"--print-after {unknown[0]}: no such pass (passes: {', '.join(PASSES)})")
    ctx = CompileContext(graph.copy(), cfg, dict(binds or {}), dict(input_shapes or {}))
    # Each op remembers its place in the graph as read: the interpreter names an op by it, and so
    # does the golden model's REQUIRE monitor (passes/requires.py).
    for i, op in enumerate(ctx.block.operators):
        op.annotations["graph_index"] = i
    for name in PASSES:
        _pass_module(name).run(ctx)
        if name in print_after or "all" in print_after:
            # sys.stdout looked up now, not when the module was imported (pytest's capsys replaces it)
            (out or sys.stdout).write(f"// ----- IR after {name} -----\n{format_ir(ctx)}\n")
    return ctx


def format_ir(ctx: CompileContext) -> str:
    """The main block as text: each op with its operands, shapes and the passes' annotations."""
    from compiler.npu.base import NPU_OP

    block = ctx.block
    lines = [f"block {block.name}: inputs {', '.join(block.inputs)} -> outputs {', '.join(block.outputs)}"]
    for v in ctx.variables:
        lines.append(f"  variable {v['name']}: {v}")
    for i, op in enumerate(block.operators):
        outs = ", ".join(block.tensors[o].describe() if o in block.tensors else o for o in op.outputs)
        name = op.op
        if op.op == NPU_OP:
            name = f"NPU.{op.attrs['npu'].kind}"
        text = f"  %{i} {name}({', '.join(op.inputs)}) -> {outs}"
        if op.op == NPU_OP:
            npu = op.attrs["npu"]
            text += f"\n      npu {npu.unit}: {npu.describe()}  [from {', '.join(npu.sources)}]"
        if id(op) in ctx.host_reasons:
            text += f"\n      host: {ctx.host_reasons[id(op)]}"
        plan = op.annotations.get("plan")
        if plan is not None:
            text += f"\n      tiles: {plan.describe()}"
        sched = op.annotations.get("schedule")
        if sched:
            text += f"\n      schedule: {sched}"
        lines.append(text)
    return "\n".join(lines)


def parse_binds(items: list[str]) -> dict[str, int]:
    binds = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CompileError(f"--bind {item!r}: expected NAME=VALUE")
        try:
            binds[name] = int(value)
        except ValueError:
            raise CompileError(f"--bind {item!r}: {value!r} is not an integer") from None
    return binds


def compile_file(model: str | Path, cfg: NpuConfig, **kw) -> CompileContext:
    from compiler.tosa_io import read_tosa

    return compile_graph(read_tosa(model), cfg, **kw)


def compile_cli(args) -> int:
    from firmware_model.arch.config import load_config

    cfg = load_config(args.config, getattr(args, "set", ()) or ())
    print_after = tuple(args.print_after) + (("all",) if args.print_after_all else ())
    ctx = compile_file(args.model, cfg, binds=parse_binds(args.bind), print_after=print_after)
    ctx.program.save(args.output_dir)
    print("\n".join(ctx.report))
    print(f"compile: wrote {args.output_dir}/commands.bin ({len(ctx.program.commands)} commands), "
          f"constants.bin ({len(ctx.program.constants)} bytes), manifest.json")
    return 0
