"""Running a graph at compile time on placeholder data, with the interpreter's own op step.

Shape resolution and validation both need to know what every op does to shapes and whether its
TOSA rules hold, before any input exists. They run the main block op by op through
`Interpreter.execute_op` — the operand checks, kernels (with their ERROR_IF and REQUIRE rules),
declared-shape checks and variable rules of a real invocation — on values that are

- *exact* for constants (CONST / CONST_SHAPE data) and for everything computed only from exact
  values or from shapes (DIM): these are the values every invocation sees;
- *placeholders* (zeros of the tensor's shape and type) for graph inputs, variable contents and
  everything computed from them.

An ERROR_IF found this way holds in every invocation: the rules are on shapes, types, attributes
and constant operands. A REQUIRE that fails on placeholder data says nothing about real data, so
callers treat TosaUnpredictable from an op with placeholder inputs as "not an error" and carry on
with placeholder outputs (`fill_outputs`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from compiler.interpreter import VARIABLE_READ_KIND, VARIABLE_WRITE_KIND, Interpreter
from compiler.ir import Graph, Operator, Tensor
from firmware_model.errors import TosaUnsupported
from firmware_model.tosa_ops import limits

# Ops whose output depends only on the shapes of their inputs, never on the values.
SHAPE_OF_INPUT_OPS = frozenset({"DIM"})
VARIABLE_OPS = frozenset({"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE"})


def is_variable_op(op: Operator) -> bool:
    return op.op in VARIABLE_OPS or (op.op == "IDENTITY" and op.attr_kind in (VARIABLE_READ_KIND,
                                                                              VARIABLE_WRITE_KIND))


def placeholder(t: Tensor, shape=None) -> np.ndarray:
    """Zeros of the tensor's (or the given) static shape, in its storage type."""
    shape = list(t.shape if shape is None else shape)
    try:
        storage = t.dtype.storage
    except ValueError:
        raise TosaUnsupported(f"tensor '{t.name}' has element type {t.dtype.name}, outside npu-bench's "
                              "integer profile") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"tensor '{t.name}' has no static shape ({shape})")
    limits.check_tensor(f"tensor '{t.name}'", shape, storage.itemsize)
    return np.zeros(shape, dtype=storage)


class PlaceholderRun:
    """One compile-time invocation of `graph`: `execute(idx, op)` per op, in order.

    `input_shapes` gives each graph input's static shape; variables take their declared (static)
    shapes. Exceptions from the interpreter propagate unchanged; the caller decides what they
    mean at compile time.
    """

    def __init__(self, graph: Graph, input_shapes: Mapping[str, tuple[int, ...]] | None = None):
        self.graph = graph
        self.block = graph.main
        self.interp = Interpreter(graph)     # raises for badly declared variables
        shapes = dict(input_shapes or {})
        inputs = {}
        for name in self.block.inputs:
            t = self.block.tensors.get(name)
            if t is None:
                continue                      # the interpreter's input binding reports it
            inputs[name] = placeholder(t, shapes.get(name))
        values = {v.uid: placeholder(self.block.tensors.get(v.tensor) or Tensor(v.tensor, list(v.shape), v.dtype),
                                     v.shape)
                  for v in self.interp.graph_variables()}
        self.env, self._invocation = self.interp.checking_invocation(inputs, values)
        self.exact: set[str] = set()

    def inputs_exact(self, op: Operator) -> bool:
        return all(name in self.exact for name in op.inputs if name)

    def execute(self, idx: int, op: Operator) -> None:
        """Run the op with every check of a real invocation; its outputs join the values."""
        self.interp.execute_op(idx, op, self.env, self._invocation)
        if op.op in ("CONST", "CONST_SHAPE") or op.op in SHAPE_OF_INPUT_OPS or (
                not is_variable_op(op) and op.inputs and self.inputs_exact(op)):
            self.exact.update(op.outputs)

    def fill_outputs(self, op: Operator) -> None:
        """Placeholder values for the outputs of an op that could not run (their declared shapes
        must be static)."""
        for name in op.outputs:
            t = self.block.tensors.get(name)
            if t is not None and name not in self.env and not t.is_variable:
                self.env[name] = placeholder(t)
            self.exact.discard(name)

    def outputs(self) -> dict[str, np.ndarray]:
        return self.interp.graph_outputs(self.env)
