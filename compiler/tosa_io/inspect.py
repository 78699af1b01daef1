"""Text summary of a graph for `npu inspect MODEL.tosa [--ops]`.

Shows the entry block's inputs and outputs (name, shape, element type), the variables (tensor,
variable name, shape, type), an op histogram and, with --ops, every op in order with its
attributes and the shapes of its input and output tensors.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from compiler.ir import Block, Graph, Operator, Tensor
from compiler.tosa_io import schema as S

_SHOW_VALUES = 8  # constants with at most this many elements show their values


def _dims(t: Tensor) -> str:
    if t.is_unranked:
        return "unranked"
    return "x".join(str(d) if d >= 0 else "?" for d in t.shape) or "scalar"


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    if not rows:
        return [indent + "(none)"]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _op_label(op: Operator) -> str:
    if op.attr_kind == S.VARIABLE_READ_ATTRIBUTE:
        return f"{op.op} (variable read)"
    if op.attr_kind == S.VARIABLE_WRITE_ATTRIBUTE:
        return f"{op.op} (variable write)"
    return op.op


def _attr_value(field: S.Field | None, value) -> str:
    if field is not None and field.enum is not None:
        return S.ENUM_NAMES[field.enum].get(value, str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def format_attrs(op: Operator) -> str:
    """The op's attributes, short: `pad=[0,1,0,1] stride=[2,2] acc_type=INT32`."""
    fields = {f.name: f for f in S.ATTRIBUTE_FIELDS.get(op.attr_kind or "", ())}
    return " ".join(f"{k}={_attr_value(fields.get(k), v)}" for k, v in op.attrs.items())


def _values(t: Tensor) -> str:
    if t.data is None or np.size(t.data) > _SHOW_VALUES:
        return ""
    return " = " + str(np.asarray(t.data).reshape(-1).tolist())


def _lookup(block: Block, variables: dict[str, Tensor], name: str) -> str:
    t = block.tensors.get(name) or variables.get(name)
    if t is None:
        return f"{name} (undefined)"
    return f"{name} {_dims(t)} {t.dtype.name}"


def _format_ops(block: Block, variables: dict[str, Tensor]) -> list[str]:
    lines = []
    width = len(str(max(len(block.operators) - 1, 0)))
    for i, op in enumerate(block.operators):
        head = f"  #{str(i).ljust(width)} {_op_label(op)}"
        if op.op in ("CONST", "CONST_SHAPE") and len(op.outputs) == 1:
            t = block.tensors.get(op.outputs[0])
            lines.append(f"{head} -> {_lookup(block, variables, op.outputs[0])}{_values(t) if t else ''}")
            continue
        attrs = format_attrs(op)
        lines.append(f"{head}  {attrs}".rstrip())
        pad = " " * (width + 4)
        lines.append(f"  {pad}in:  " + (", ".join(_lookup(block, variables, n) for n in op.inputs) or "-"))
        lines.append(f"  {pad}out: " + (", ".join(_lookup(block, variables, n) for n in op.outputs) or "-"))
    return lines


def format_graph(graph: Graph, show_ops: bool = False) -> str:
    main = graph.main
    blocks = list(graph.blocks())
    n_ops = sum(len(b.operators) for b in blocks)
    n_tensors = sum(len(b.tensors) for b in blocks)
    major, minor, patch, draft = graph.version
    lines = [f"{graph.source}: TOSA {major}.{minor}.{patch}{' draft' if draft else ''}, "
             f"{n_ops} ops, {n_tensors} tensors, {len(graph.regions)} region(s), {len(blocks)} block(s)"]

    def io_rows(names: list[str]) -> list[tuple[str, ...]]:
        rows = []
        for name in names:
            t = main.tensors.get(name)
            rows.append((name, _dims(t), t.dtype.name) if t else (name, "?", "?"))
        return rows

    lines.append("inputs:")
    lines += _table(io_rows(main.inputs))
    lines.append("outputs:")
    lines += _table(io_rows(main.outputs))

    variables = {t.name: t for b in blocks for t in b.variables()}
    lines.append("variables:")
    lines += _table([(t.name, t.variable_name or "-", _dims(t), t.dtype.name) for t in variables.values()])

    hist = Counter(_op_label(op) for b in blocks for op in b.operators)
    lines.append("op histogram:")
    lines += _table([(name, str(count)) for name, count in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))])

    if show_ops:
        for region in graph.regions:
            for block in region.blocks:
                title = f"block {block.name!r}" if region.name == block.name else \
                    f"region {region.name!r} block {block.name!r}"
                lines.append(f"ops of {title}:")
                lines += _format_ops(block, variables) or ["  (none)"]
    return "\n".join(lines)
