"""The graph IR: one representation of a TOSA graph, shared by the reader, the writer, the
interpreter and every compiler pass.

It mirrors the TOSA serialization's structure (a graph of regions, a region of basic blocks, a
block of tensors and operators by name, `main` the entry) so that reading and writing are
lossless, and adds nothing NPU-specific: passes that lower the graph record their decisions in
`Operator.annotations` or in their own outputs, never by changing the meaning of a TOSA op.

Conventions:
- `Tensor.shape` uses -1 for a dimension that is not known until the graph's inputs fix it.
- Constant data (CONST and CONST_SHAPE outputs, variable initial values) is a numpy array in the
  storage type of the tensor's DType (`DType.storage`), shaped like the tensor.
- `Operator.attrs` holds the attribute table's fields under the schema's names (e.g. "pad",
  "stride", "rounding_mode", "scale32"); enum-valued fields hold the schema's integer values.
- Variables: a tensor with `is_variable` set, named by `variable_name`; reads and writes are
  IDENTITY ops with the attribute kind "VariableReadAttribute" / "VariableWriteAttribute", or the
  VARIABLE / VARIABLE_READ / VARIABLE_WRITE ops. `Operator.attr_kind` keeps which attribute table
  the file used, because the reader must dispatch on it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import math
from typing import Any, Iterator

import numpy as np

from firmware_model.tosa_ops.dtypes import DType


@dataclass
class Tensor:
    name: str
    shape: list[int]
    dtype: DType
    data: np.ndarray | None = None
    is_variable: bool = False
    variable_name: str | None = None
    is_unranked: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(d >= 0 for d in self.shape)

    @property
    def num_elements(self) -> int:
        # Python integers: a declared 2^70 elements must not wrap to 0 in int64
        return math.prod(int(d) for d in self.shape) if self.shape else 1

    def describe(self) -> str:
        dims = "x".join(str(d) if d >= 0 else "?" for d in self.shape) or "scalar"
        return f"{self.name}: {dims} {self.dtype.name}"


@dataclass
class Operator:
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    attr_kind: str | None = None
    location: str | None = None
    # Free-form notes that compiler passes attach (e.g. which NPU operation an op was fused into).
    annotations: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.op}({', '.join(self.inputs)}) -> {', '.join(self.outputs)}"


@dataclass
class Block:
    name: str
    operators: list[Operator] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"block '{self.name}' has no tensor named '{name}'") from None

    def producers(self) -> dict[str, Operator]:
        """Map from tensor name to the operator that writes it."""
        return {out: op for op in self.operators for out in op.outputs}

    def consumers(self) -> dict[str, list[Operator]]:
        users: dict[str, list[Operator]] = {}
        for op in self.operators:
            for name in op.inputs:
                users.setdefault(name, []).append(op)
        return users

    def variables(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.is_variable]


@dataclass
class Region:
    name: str
    blocks: list[Block] = field(default_factory=list)

    def block(self, name: str) -> Block:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"region '{self.name}' has no block named '{name}'")


@dataclass
class Graph:
    regions: list[Region] = field(default_factory=list)
    version: tuple[int, int, int, bool] = (1, 1, 0, True)
    # Where the graph came from, for error messages ("model.tosa: ...").
    source: str = "<memory>"

    @property
    def main(self) -> Block:
        """The entry block: block `main` of region `main` (or the first block of the first region)."""
        regions = self.regions
        if regions:                         # the usual graph: region `main` first, block `main` first in it
            r = regions[0]
            if r.name == "main" and r.blocks and r.blocks[0].name == "main":
                return r.blocks[0]
        for r in regions:
            if r.name == "main":
                for b in r.blocks:
                    if b.name == "main":
                        return b
        if self.regions and self.regions[0].blocks:
            return self.regions[0].blocks[0]
        raise KeyError(f"{self.source}: the graph has no blocks")

    def blocks(self) -> Iterator[Block]:
        for r in self.regions:
            yield from r.blocks

    def copy(self) -> "Graph":
        """A deep copy of the structure; constant arrays are shared (passes never mutate them)."""
        def copy_block(b: Block) -> Block:
            return Block(
                name=b.name,
                operators=[dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs),
                                               attrs=dict(op.attrs), annotations=dict(op.annotations))
                           for op in b.operators],
                tensors={k: dataclasses.replace(t, shape=list(t.shape)) for k, t in b.tensors.items()},
                inputs=list(b.inputs),
                outputs=list(b.outputs),
            )
        return Graph(regions=[Region(r.name, [copy_block(b) for b in r.blocks]) for r in self.regions],
                     version=self.version, source=self.source)
