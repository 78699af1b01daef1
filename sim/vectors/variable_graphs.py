"""Small graphs with TOSA variables, built in the IR, for the tests of variable placement.

`two_accumulators()`: out_k = state_k; state_k += x_k, for a 2000-byte and a 52-byte INT32
variable. On `tiny` (2 KiB of variable SRAM) the big one takes 2000 bytes and the small one does
not fit the 48 left, so the compiler keeps it in external memory; on `default` both fit. The
golden model, the interpreter and the RTL must agree on it invocation after invocation.
"""

from __future__ import annotations

import numpy as np

from compiler.ir import Block, Graph, Operator, Region, Tensor
from firmware_model.tosa_ops.dtypes import DType

READ, WRITE = "VariableReadAttribute", "VariableWriteAttribute"


def two_accumulators() -> Graph:
    i32 = DType.INT32
    ts = [Tensor("x", [1, 500], i32), Tensor("x2", [1, 13], i32),
          Tensor("big", [1, 500], i32, data=np.arange(500, dtype=np.int32).reshape(1, -1), is_variable=True,
                 variable_name="big_state"),
          Tensor("small", [1, 13], i32, data=np.arange(13, dtype=np.int32).reshape(1, -1) * 7, is_variable=True,
                 variable_name="small_state"),
          Tensor("rb", [1, 500], i32), Tensor("rs", [1, 13], i32), Tensor("sb", [1, 500], i32),
          Tensor("ss", [1, 13], i32)]
    ops = [Operator("IDENTITY", ["big"], ["rb"], attr_kind=READ), Operator("IDENTITY", ["small"], ["rs"], attr_kind=READ),
           Operator("ADD", ["rb", "x"], ["sb"]), Operator("ADD", ["rs", "x2"], ["ss"]),
           Operator("IDENTITY", ["sb"], ["big"], attr_kind=WRITE), Operator("IDENTITY", ["ss"], ["small"], attr_kind=WRITE)]
    block = Block("main", operators=ops, tensors={t.name: t for t in ts}, inputs=["x", "x2"], outputs=["rb", "rs"])
    return Graph([Region("main", [block])], source="two_accumulators")


def accumulator_feeds(rng, n: int) -> list[dict[str, np.ndarray]]:
    return [{"x": rng.integers(-1000, 1000, (1, 500), dtype=np.int32),
             "x2": rng.integers(-1000, 1000, (1, 13), dtype=np.int32)} for _ in range(n)]
