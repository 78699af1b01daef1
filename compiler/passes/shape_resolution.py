"""Pass 1 — shape resolution (TOSA's symbolic shapes: fixed ranks, unknown dims).

Reads: ctx.graph, ctx.binds (from `--bind`), ctx.input_shapes (shapes of the actual inputs).
Writes: ctx.graph with every used tensor's shape static, and every shape value computed by the
graph (DIM, ADD_SHAPE, CONCAT_SHAPE, ...) evaluated into a CONST_SHAPE; ASSERT_EQUAL_SHAPE ops,
once they hold, are dropped.

Binding. An unknown dim (-1 in the file) is bound, in this order, by
1. `--bind TENSOR[i]=N`: dim i of the named tensor (a graph input, a variable, or any tensor whose
   dim the graph leaves open) is N >= 1. The .tosa format carries no names for symbolic dims, so
   dims are named by tensor and position; the tensor's name is the one `npu inspect` prints;
2. the shape of the array given for a graph input (`npu run`, the conformance SUT).
A bind for a dim the graph fixes must agree with it; a bind that names no tensor or no dim, or
disagrees with a given input, is a CompileError.

Propagation. The graph then runs once on placeholder data (compiler/placeholder_run.py): every op
through the interpreter's own step, so each output's shape is what the op's kernel computes from
its inputs' shapes — the shape rules exist once, in firmware_model/tosa_ops. Shape operands are
evaluated exactly (they derive from constants and from shapes, never from input data). A dim that
stays unknown — an input nobody gave, a variable declared with -1, a shape value computed from
input data — is a CompileError naming the tensor and the dim.
"""

from __future__ import annotations

import re

from compiler.errors import CompileError, TosaRuleError
from compiler.interpreter import InterpreterError
from compiler.ir import Block, Operator
from compiler.placeholder_run import PlaceholderRun
from firmware_model.errors import NpuBenchError, TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops.dtypes import DType

# Shape operators of TOSA (their values are shapes; the compiler evaluates them).
SHAPE_OPS = frozenset({"DIM", "CONCAT_SHAPE", "ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "SLICE_SHAPE",
                       "EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE", "MAX_SHAPE", "MIN_SHAPE",
                       "MOD_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE", "ASSERT_EQUAL_SHAPE"})

_BIND_KEY = re.compile(r"^(?P<name>.+)\[(?P<dim>\d+)\]$")


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


def apply_binds(block: Block, binds: dict[str, int], given: dict[str, tuple[int, ...]], src: str) -> None:
    """Fix the dims named by `--bind TENSOR[i]=N` (checked against the graph and the given inputs)."""
    for key, value in binds.items():
        m = _BIND_KEY.match(key)
        if m is None:
            raise CompileError(f"--bind {key}={value}: expected TENSOR[DIM]=N, e.g. --bind "
                               f"{(block.inputs or ['input'])[0]}[0]={value} (dims are named by tensor and position)")
        name, dim = m["name"], int(m["dim"])
        t = block.tensors.get(name)
        if t is None:
            raise CompileError(f"--bind {key}={value}: the graph has no tensor named '{name}' "
                               f"(inputs: {', '.join(block.inputs) or 'none'})")
        if dim >= t.rank:
            raise CompileError(f"--bind {key}={value}: tensor '{name}' has rank {t.rank} "
                               f"(shape {_fmt(t.shape)}), so no dim {dim}")
        if value < 1:
            raise CompileError(f"--bind {key}={value}: a dim must be at least 1")
        if t.shape[dim] >= 0 and t.shape[dim] != value:
            raise CompileError(f"--bind {key}={value}: dim {dim} of '{name}' is {t.shape[dim]} in the graph")
        if name in given and len(given[name]) == t.rank and given[name][dim] != value:
            raise CompileError(f"--bind {key}={value}: the array given for input '{name}' has "
                               f"dim {dim} = {given[name][dim]}")
        t.shape[dim] = value


def bind_inputs(block: Block, given: dict[str, tuple[int, ...]], src: str) -> None:
    """Unknown dims of graph inputs from the given arrays' shapes (which must fit the graph)."""
    for name, shape in given.items():
        if name not in block.inputs:
            raise CompileError(f"{src}: '{name}' is not an input of the graph "
                               f"(inputs: {', '.join(block.inputs) or 'none'})")
        t = block.tensor(name)
        if len(shape) != t.rank:
            raise CompileError(f"{src}: input '{name}' has rank {t.rank} (shape {_fmt(t.shape)}), "
                               f"the array given has shape {list(shape)}")
        for i, (d, g) in enumerate(zip(t.shape, shape)):
            if d >= 0 and d != g:
                raise CompileError(f"{src}: input '{name}' has shape {_fmt(t.shape)}, the array given has "
                                   f"shape {list(shape)} (dim {i})")
        t.shape = [int(g) for g in shape]


def _unknown(block: Block, name: str, what: str, src: str) -> CompileError:
    t = block.tensor(name)
    i = next(i for i, d in enumerate(t.shape) if d < 0)
    return CompileError(f"{src}: {what} '{name}' has unknown dim {i} (shape {_fmt(t.shape)}): give the input "
                        f"array or --bind {name}[{i}]=N")


def _used_tensors(block: Block) -> set[str]:
    used = set(block.inputs) | set(block.outputs)
    for op in block.operators:
        used.update(n for n in op.inputs + op.outputs if n)
    return used


def run(ctx) -> None:
    block = ctx.block
    src = ctx.graph.source
    given = {k: tuple(int(d) for d in v) for k, v in ctx.input_shapes.items()}
    apply_binds(block, ctx.binds, given, src)
    bind_inputs(block, given, src)
    used = _used_tensors(block)
    has_shape_ops = any(op.op in SHAPE_OPS for op in block.operators)
    if not has_shape_ops and all(block.tensors[n].is_static for n in used if n in block.tensors):
        return                                   # static already: nothing to propagate
    for name in block.inputs:
        if name in block.tensors and not block.tensors[name].is_static:
            raise _unknown(block, name, "graph input", src)
    for t in block.variables():
        if not t.is_static:
            raise _unknown(block, t.name, f"variable '{t.variable_name or t.name}': tensor", src)
    propagate(ctx)
    for name in sorted(used):
        t = block.tensors.get(name)
        if t is not None and not t.is_static:
            raise _unknown(block, name, "tensor", src)


def propagate(ctx) -> None:
    """Run the graph on placeholders; fix each output's unknown dims from what its op computed,
    fold shape values into CONST_SHAPE."""
    block = ctx.block
    src = ctx.graph.source
    try:
        prun = PlaceholderRun(ctx.graph, {n: tuple(block.tensors[n].shape) for n in block.inputs
                                          if n in block.tensors})
    except (TosaError, TosaUnpredictable) as e:
        raise TosaRuleError(f"{src}: {e}", e) from None
    except (InterpreterError, TosaUnsupported, NpuBenchError) as e:
        raise CompileError(str(e) if str(e).startswith(src) else f"{src}: {e}") from None
    new_ops: list[Operator] = []
    folded = 0
    for idx, op in enumerate(block.operators):
        where = f"{src}: op %{idx} {op.op} -> {', '.join(op.outputs) or '-'}"
        try:
            prun.execute(idx, op)
        except TosaError as e:
            raise TosaRuleError(f"{where}: ERROR_IF {e.rule}", e) from None
        except (TosaUnpredictable, TosaUnsupported) as e:
            # The op cannot run on placeholder data (or at all); its declared shapes stand if static.
            open_dims = [n for n in op.outputs if n in block.tensors and not block.tensors[n].is_static]
            if open_dims:
                raise CompileError(f"{where}: cannot resolve the shape of '{open_dims[0]}' "
                                   f"({_fmt(block.tensors[open_dims[0]].shape)}): {e}") from None
            prun.fill_outputs(op)
            new_ops.append(op)
            continue
        except NpuBenchError as e:
            raise CompileError(f"{where}: {e}") from None
        for name in op.outputs:
            t = block.tensors.get(name)
            if t is None or t.is_variable or name not in prun.env:
                continue
            t.shape = [int(d) for d in prun.env[name].shape]
            t.is_unranked = False
        if op.op in SHAPE_OPS:
            if not op.outputs:
                folded += 1                       # ASSERT_EQUAL_SHAPE held: nothing left to do
                continue
            not_exact = [n for n in op.outputs if n not in prun.exact]
            if not_exact:
                raise CompileError(f"{where}: the shape value '{not_exact[0]}' depends on input data; "
                                   "npu-bench evaluates shapes at compile time")
            for name in op.outputs:
                t = block.tensors[name]
                t.data = prun.env[name].astype(DType.SHAPE.storage).reshape(t.shape)
                new_ops.append(Operator("CONST_SHAPE", [], [name], location=op.location))
            folded += 1
            continue
        new_ops.append(op)
    block.operators = new_ops
    if folded:
        ctx.report.append(f"shape resolution: {folded} shape op(s) evaluated at compile time")
