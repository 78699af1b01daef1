"""Cases for the `npu` fuzz campaign: hypothesis strategies over what a user can hand the CLI.

A case is drawn in two steps, so that drawing stays cheap (the campaign's generator runs beside the
workers) and shrinking stays meaningful:

- `case_specs(target)` is a hypothesis strategy of `CaseSpec`: a seed graph plus a short list of
  edits, each a small frozen dataclass (which tensor, which new shape, which byte, which broken
  .npy, which TOML key...). Indices are taken modulo what the seed has, so any draw applies to any
  seed and shrinks towards "the first tensor, the first op".
- `build_case(spec)` turns a spec into a `Case`: the files (the .tosa, the .npy inputs, the state
  file, the .toml) and the argv of one `npu` command, with `{case}` standing for the case's own
  folder and `{repo}` for the repository. It runs in the campaign's workers.

What is mutated (docs/verification.md, "The fuzz campaign"):

- the .tosa bytes: bit flips, byte and word overwrites, truncations, insertions, deletions;
- the graph, through the project's own IR and writer (`compiler.tosa_io`): shapes (zero, -1,
  negative, huge, other ranks), element types (every `DType`), op codes, attributes, constant
  data, variable flags (a CONST output marked variable...), operand wiring, op order, block
  inputs and outputs, regions and blocks, tensor names. Values the writer refuses (a dimension
  below -1) are written as a sentinel and patched into the bytes afterwards;
- the `-i` inputs: wrong shape or dtype, empty file, .npz, broken or huge headers, 0-d, pickled
  object arrays, truncated data, folders, missing paths; and the `-i` strings themselves;
- `--config`: named configurations, broken paths, and TOML documents with keys dropped, added,
  retyped or pushed out of range, or bytes that are not TOML;
- `--state`: for the stateful seeds (models/lstm, models/gru and small graphs built here), files
  with wrong names, shapes, dtypes, NaN, 0-d arrays, missing variables, empty archives, garbage,
  and golden-model images with a broken layout or SRAM image;
- other arguments: `--bind` strings, `-o` at an existing file or a place that cannot be written,
  `--print-after` with an unknown pass, `--ops`, a stdout closed early (`| head`), `npu sim`'s
  `--invocations`, `--report`, `--inject-fault`.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import struct
import tomllib
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from compiler.ir import Block, Graph, Operator, Region, Tensor
from compiler.tosa_io import read_tosa, tosa_bytes
from compiler.tosa_io import schema as S
from firmware_model.tosa_ops.dtypes import DType
from sim.paths import REPO_ROOT

# What a case runs. `run` is split by backend because the two backends share almost nothing.
TARGETS = ("inspect", "run-interp", "run-golden", "compile", "sim")
COMMAND_OF = {"inspect": "inspect", "run-interp": "run", "run-golden": "run", "compile": "compile", "sim": "sim"}

CONFIG_NAMES = ("tiny", "default", "large")


# ---------------------------------------------------------------------------------------------
# Seed graphs

def _t(name: str, shape: list[int], dtype: DType = DType.INT32, data=None, **kw) -> Tensor:
    return Tensor(name, list(shape), dtype, data=data, **kw)


def _graph(name: str, tensors: list[Tensor], ops: list[Operator], inputs: list[str], outputs: list[str]) -> Graph:
    block = Block("main", operators=ops, tensors={t.name: t for t in tensors}, inputs=inputs, outputs=outputs)
    return Graph([Region("main", [block])], source=name)


def add_i32() -> Graph:
    """y = x + c: the smallest graph every backend runs (one ELTWISE tile)."""
    c = np.arange(-4, 4, dtype=np.int32).reshape(1, 8)
    return _graph("add_i32", [_t("x", [1, 8]), _t("c", [1, 8], data=c), _t("y", [1, 8])],
                  [Operator("CONST", [], ["c"]), Operator("ADD", ["x", "c"], ["y"])], ["x"], ["y"])


def symbolic_add() -> Graph:
    """y = x + c with an unknown batch (-1): the inputs or `--bind x[0]=N` fix it."""
    c = np.arange(8, dtype=np.int32).reshape(1, 8)
    return _graph("symbolic_add", [_t("x", [-1, 8]), _t("c", [1, 8], data=c), _t("y", [-1, 8])],
                  [Operator("CONST", [], ["c"]), Operator("ADD", ["x", "c"], ["y"])], ["x"], ["y"])


def accumulator() -> Graph:
    """out = acc; acc += x: one INT32 variable read and written by IDENTITY ops (tosa-opt's form)."""
    read, write = S.VARIABLE_READ_ATTRIBUTE, S.VARIABLE_WRITE_ATTRIBUTE
    acc = np.array([[5, -3, 0, 7]], dtype=np.int32)
    ts = [_t("x", [1, 4]), _t("acc", [1, 4], data=acc, is_variable=True, variable_name="acc_state"),
          _t("r", [1, 4]), _t("s", [1, 4])]
    ops = [Operator("IDENTITY", ["acc"], ["r"], attr_kind=read), Operator("ADD", ["r", "x"], ["s"]),
           Operator("IDENTITY", ["s"], ["acc"], attr_kind=write)]
    return _graph("accumulator", ts, ops, ["x"], ["r"])


def max_state() -> Graph:
    """out = max(state, x); state = out: an INT8 variable through the VARIABLE / VARIABLE_READ /
    VARIABLE_WRITE ops, with no initial value (read before its first write is the spec's REQUIRE)."""
    ts = [_t("x", [1, 8], DType.INT8), _t("v", [1, 8], DType.INT8, is_variable=True, variable_name="peak"),
          _t("old", [1, 8], DType.INT8), _t("x32", [1, 8]), _t("old32", [1, 8]), _t("m32", [1, 8]),
          _t("m", [1, 8], DType.INT8)]
    ops = [Operator("VARIABLE", [], ["v"]), Operator("VARIABLE_READ", ["v"], ["old"]),
           Operator("CAST", ["x"], ["x32"]), Operator("CAST", ["old"], ["old32"]),
           Operator("MAXIMUM", ["x32", "old32"], ["m32"], attrs={"nan_mode": 1}),
           Operator("CAST", ["m32"], ["m"]), Operator("VARIABLE_WRITE", ["m"], ["v"])]
    g = _graph("max_state", ts, ops, ["x"], ["m"])
    # a first value, so that the first read is legal
    g.main.tensors["v"].data = np.full((1, 8), -128, np.int8)
    return g


def pool_table() -> Graph:
    """MAX_POOL2D 2x2 over 1x4x4x4 int8, then an int8 TABLE: the pooling unit and the LUT."""
    table = (np.arange(256) - 128).astype(np.int8)[::-1].copy()
    ts = [_t("x", [1, 4, 4, 4], DType.INT8), _t("p", [1, 2, 2, 4], DType.INT8),
          _t("table", [256], DType.INT8, data=table), _t("y", [1, 2, 2, 4], DType.INT8)]
    ops = [Operator("MAX_POOL2D", ["x"], ["p"], attrs={"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0],
                                                      "nan_mode": 1}),
           Operator("CONST", [], ["table"]), Operator("TABLE", ["p", "table"], ["y"])]
    return _graph("pool_table", ts, ops, ["x"], ["y"])


def small_conv() -> Graph:
    """models/demo_conv (CONV2D + per-channel RESCALE, zero points, bias) on a 6x6 image."""
    g = read_tosa(REPO_ROOT / "models" / "demo_conv" / "model.tosa")
    g.source = "small_conv"
    for t in g.main.tensors.values():
        if len(t.shape) == 4 and t.shape[1] == 48:
            t.shape = [t.shape[0], 6, 6, t.shape[3]]
    return g


def two_accumulators() -> Graph:
    from sim.vectors.variable_graphs import two_accumulators as build

    return build()


@dataclass(frozen=True)
class Seed:
    name: str
    stateful: bool
    small: bool                        # cheap enough for `npu sim` and for fuzzed configurations
    path: str | None = None            # a committed model (repository-relative), else built here
    build: Callable[[], Graph] | None = None


# Smallest first: hypothesis shrinks a sampled choice towards the front.
SEEDS: tuple[Seed, ...] = (
    Seed("add_i32", False, True, build=add_i32),
    Seed("accumulator", True, True, build=accumulator),
    Seed("symbolic_add", False, True, build=symbolic_add),
    Seed("max_state", True, True, build=max_state),
    Seed("pool_table", False, True, build=pool_table),
    Seed("small_conv", False, True, build=small_conv),
    Seed("two_accumulators", True, True, build=two_accumulators),
    Seed("demo_conv", False, False, path="models/demo_conv/model.tosa"),
    Seed("resnet_pool", False, False, path="models/resnet_pool/model.tosa"),
    Seed("cnn32", False, False, path="models/cnn32/model.tosa"),
    Seed("mlp", False, False, path="models/mlp/model.tosa"),
    Seed("gru", True, False, path="models/gru/model.tosa"),
    Seed("lstm", True, False, path="models/lstm/model.tosa"),
    Seed("blazeface", False, False, path="models/blazeface/model.tosa"),
)
SEED_BY_NAME = {s.name: s for s in SEEDS}
STATEFUL_SEEDS = tuple(s.name for s in SEEDS if s.stateful)
SMALL_SEEDS = tuple(s.name for s in SEEDS if s.small)
# Seeds a compile on `tiny` takes seconds for (BlazeFace: 43k tiles): they run on default/large only.
TINY_TOO_SLOW = ("blazeface",)


@lru_cache(maxsize=None)
def seed_graph(name: str) -> Graph:
    """The seed's graph, read or built once per process (callers copy it before editing)."""
    seed = SEED_BY_NAME[name]
    if seed.path:
        return read_tosa(REPO_ROOT / seed.path)
    return seed.build()


@lru_cache(maxsize=None)
def seed_bytes(name: str) -> bytes:
    seed = SEED_BY_NAME[name]
    if seed.path:
        return (REPO_ROOT / seed.path).read_bytes()
    return tosa_bytes(seed_graph(name))


# ---------------------------------------------------------------------------------------------
# Interesting values (simplest first: shrinking moves towards the front)

DIMS = (1, 2, 3, 0, -1, 4, 8, 16, 7, 255, 1000, 65536, 1 << 20, (1 << 31) - 1, -2, -(1 << 31))
INT32S = (0, 1, -1, 2, 3, 8, 31, 32, 63, 127, -128, 255, 32767, -32768, 65535, 1 << 20, (1 << 31) - 1, -(1 << 31))
# Names with a line break in them, as a file may hold them: an error that prints one raw is on
# two lines (the campaign recognises these two and reports them as one finding).
BROKEN_NAMES = ("line\nbreak", "a\nb")
TENSOR_NAMES = ("renamed", "", " ", "x", "a=b", "line\nbreak", "tab\there", "ü/../é", "n" * 300, "TosaInput_0",
                "input-0", "__npu_variable_sram")
NUMPY_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "float16",
                "float32", "float64", "complex64", ">i4", ">i2", "<U3", "V4", "datetime64[s]", "object")
ALL_DTYPES = tuple(d for d in DType if d != DType.UNKNOWN)


# ---------------------------------------------------------------------------------------------
# Graph edits (through the IR and the writer)

class _Patches:
    """Raw int32 values the writer refuses (a dimension below -1), written as unique sentinels
    and replaced in the bytes afterwards."""

    BASE = 0x4E5A0000

    def __init__(self):
        self.values: dict[int, int] = {}

    def sentinel(self, value: int) -> int:
        s = self.BASE + len(self.values) * 17 + 3
        self.values[s] = value
        return s

    def apply(self, data: bytes) -> bytes:
        for s, v in self.values.items():
            data = data.replace(struct.pack("<i", s), struct.pack("<i", v))
        return data


def _tensors(block: Block, shapes: bool = True) -> list[Tensor]:
    return [t for t in block.tensors.values() if shapes or t.dtype != DType.SHAPE]


ROLES = ("input", "any", "variable", "output", "const")


def _role_tensors(block: Block, role: str, shapes: bool = False) -> list[Tensor]:
    """The block's tensors that play `role` (all of them when none does)."""
    ts = _tensors(block, shapes)
    if role == "input":
        picked = [block.tensors[n] for n in block.inputs if n in block.tensors]
    elif role == "output":
        picked = [block.tensors[n] for n in block.outputs if n in block.tensors]
    elif role == "variable":
        picked = [t for t in ts if t.is_variable]
    elif role == "const":
        picked = [t for t in ts if t.data is not None]
    else:
        picked = ts
    return [t for t in picked if shapes or t.dtype != DType.SHAPE] or ts


def _fits(shape, limit: int) -> bool:
    """Whether an array of `shape` has at most `limit` elements and no dimension past it (a zero
    dimension does not make 2^31 x 2^31 x 0 allocatable: numpy multiplies the others first)."""
    dims = [int(d) for d in shape]
    return all(0 <= d <= limit for d in dims) and math.prod(dims) <= limit


def _pick(items: list, index: int):
    if not items:
        raise _NotApplicable
    return items[index % len(items)]


class _NotApplicable(Exception):
    """The edit has nothing to act on in this graph (no ops, no data...): it is skipped."""


def _convert_data(data: np.ndarray | None, dtype: DType) -> np.ndarray | None:
    """Constant data re-typed for a new element type, or None when the writer cannot hold it."""
    if data is None:
        return None
    a = np.asarray(data)
    if dtype == DType.BOOL:
        return a != 0
    ftype = S.float_numpy_type(dtype)
    if ftype is not None:
        return a.astype(np.float32).astype(ftype)
    if dtype.is_integer:
        if not np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_:
            a = np.nan_to_num(a.astype(np.float64))
        return np.clip(a.astype(np.int64), dtype.min, dtype.max).astype(dtype.storage)
    return None


def _default_attrs(op: str) -> dict:
    """Attribute values the writer accepts for `op`'s own table (zeros, empties, first enum)."""
    attrs = {}
    for f in S.ATTRIBUTE_FIELDS[S.expected_attribute(op)]:
        if f.kind == "int32":
            attrs[f.name] = 0
        elif f.kind == "bool":
            attrs[f.name] = False
        elif f.kind == "[int32]":
            attrs[f.name] = []
        elif f.kind == "string":
            attrs[f.name] = ""
        elif f.kind == "[ubyte]":
            attrs[f.name] = 0 if f.value else b""
        else:
            attrs[f.name] = min(S.ENUM_NAMES[f.enum])
    return attrs


@dataclass(frozen=True)
class ShapeEdit:
    """A tensor's shape replaced (data resized when it stays small, dropped otherwise)."""
    tensor: int
    dims: tuple[int, ...]
    role: str = "any"      # which tensors `tensor` indexes: ROLES

    def apply(self, g: Graph, p: _Patches) -> None:
        t = _pick(_role_tensors(g.main, self.role), self.tensor)
        t.shape = [d if d >= -1 else p.sentinel(d) for d in self.dims]
        if t.data is not None:
            if _fits(self.dims, 4096):
                t.data = np.resize(np.asarray(t.data), self.dims).astype(np.asarray(t.data).dtype)
            else:
                t.data = None

    def describe(self) -> str:
        return f"shape of {self.role} tensor #{self.tensor} -> {list(self.dims)}"


@dataclass(frozen=True)
class DTypeEdit:
    """A tensor's element type replaced by any DType (its data converted when the writer can)."""
    tensor: int
    dtype: DType
    role: str = "any"      # which tensors `tensor` indexes: ROLES

    def apply(self, g: Graph, p: _Patches) -> None:
        t = _pick(_role_tensors(g.main, self.role), self.tensor)
        t.dtype = self.dtype
        t.data = _convert_data(t.data, self.dtype)
        if self.dtype == DType.SHAPE:
            t.is_variable, t.variable_name, t.is_unranked = False, None, False
            t.shape = [max(1, len(t.shape))]
            t.data = None if t.data is None else np.zeros(t.shape, np.int64)

    def describe(self) -> str:
        return f"element type of {self.role} tensor #{self.tensor} -> {self.dtype.name}"


@dataclass(frozen=True)
class VariableEdit:
    """A tensor marked a variable (or unmarked), under some name."""
    tensor: int
    flag: bool
    name: str | None   # None: the tensor's own name; "=other": the name of another variable
    role: str = "any"      # which tensors `tensor` indexes: ROLES

    def apply(self, g: Graph, p: _Patches) -> None:
        t = _pick(_role_tensors(g.main, self.role), self.tensor)
        t.is_variable = self.flag
        if self.name is None:
            t.variable_name = t.name if self.flag else None
        elif self.name == "=other":
            others = [v.variable_name or v.name for v in g.main.variables() if v is not t]
            t.variable_name = others[0] if others else t.name
        else:
            t.variable_name = self.name

    def describe(self) -> str:
        return f"{self.role} tensor #{self.tensor} variable={self.flag} name={self.name!r}"


@dataclass(frozen=True)
class ConstVariableEdit:
    """The output of a CONST op marked a variable (its data becomes the initial value)."""
    op: int

    def apply(self, g: Graph, p: _Patches) -> None:
        consts = [o for o in g.main.operators if o.op == "CONST" and o.outputs]
        t = g.main.tensors.get(_pick(consts, self.op).outputs[0])
        if t is None:
            raise _NotApplicable
        t.is_variable, t.variable_name = True, t.name

    def describe(self) -> str:
        return f"output of CONST #{self.op} marked a variable"


@dataclass(frozen=True)
class OpCodeEdit:
    """An op replaced by another op code (attributes reset to the new op's table)."""
    op: int
    code: str

    def apply(self, g: Graph, p: _Patches) -> None:
        o = _pick(g.main.operators, self.op)
        o.op, o.attr_kind, o.attrs = self.code, None, _default_attrs(self.code)

    def describe(self) -> str:
        return f"op #{self.op} -> {self.code}"


@dataclass(frozen=True)
class AttrEdit:
    """One attribute field of an op set to a drawn value, coerced to the field's kind."""
    op: int
    field: int
    value: int | bool | tuple[int, ...]

    def apply(self, g: Graph, p: _Patches) -> None:
        ops = [o for o in g.main.operators if S.ATTRIBUTE_FIELDS[o.attr_kind or S.expected_attribute(o.op)]]
        o = _pick(ops, self.op)
        fields = S.ATTRIBUTE_FIELDS[o.attr_kind or S.expected_attribute(o.op)]
        f = fields[self.field % len(fields)]
        v = self.value
        ints = list(v) if isinstance(v, tuple) else [int(v)]
        first = ints[0] if ints else 0
        if f.kind == "int32":
            o.attrs[f.name] = first
        elif f.kind == "bool":
            o.attrs[f.name] = bool(first)
        elif f.kind == "[int32]":
            o.attrs[f.name] = ints
        elif f.kind == "string":
            o.attrs[f.name] = str(first)
        elif f.kind == "[ubyte]":
            if f.value:
                dtype = None
                for name in o.inputs[:1]:
                    t = g.main.tensors.get(name)
                    dtype = t.dtype if t is not None else None
                if dtype is not None and dtype.is_integer:
                    first = max(dtype.min, min(dtype.max, first))
                o.attrs[f.name] = first
            else:
                o.attrs[f.name] = bytes(i & 0xFF for i in ints)
        else:
            values = sorted(S.ENUM_NAMES[f.enum])
            o.attrs[f.name] = values[first % len(values)]

    def describe(self) -> str:
        return f"attribute field #{self.field} of attributed op #{self.op} -> {self.value!r}"


DATA_FILLS = ("zeros", "max", "min", "alternate", "random", "minus_one", "nan")


@dataclass(frozen=True)
class DataEdit:
    """The data of a tensor that has some replaced: zeros, extremes, random, NaN for floats."""
    tensor: int
    fill: str
    seed: int

    def apply(self, g: Graph, p: _Patches) -> None:
        t = _pick([t for t in _tensors(g.main) if t.data is not None], self.tensor)
        a = np.asarray(t.data)
        if a.dtype == np.bool_:
            lo, hi = 0, 1
        elif np.issubdtype(a.dtype, np.integer):
            lo, hi = (t.dtype.min, t.dtype.max) if t.dtype.is_integer else (int(np.iinfo(a.dtype).min),
                                                                              int(np.iinfo(a.dtype).max))
        else:
            lo, hi = -65504, 65504
        rng = np.random.default_rng(self.seed)
        if self.fill == "zeros":
            v = np.zeros(a.shape)
        elif self.fill == "max":
            v = np.full(a.shape, hi)
        elif self.fill == "min":
            v = np.full(a.shape, lo)
        elif self.fill == "alternate":
            v = np.where(np.arange(a.size).reshape(a.shape) % 2 == 0, lo, hi) if a.size else np.zeros(a.shape)
        elif self.fill == "minus_one":
            v = np.full(a.shape, max(lo, -1))
        elif self.fill == "nan" and not np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_:
            v = np.full(a.shape, np.nan)
        else:
            v = rng.integers(lo, hi, a.shape, endpoint=True)
        t.data = v.astype(a.dtype)

    def describe(self) -> str:
        return f"data of constant #{self.tensor} -> {self.fill}"


@dataclass(frozen=True)
class WireEdit:
    """An op's operand list changed: an operand replaced by another tensor, dropped or repeated."""
    op: int
    outputs: bool
    slot: int
    action: str        # replace | drop | duplicate | add
    tensor: int

    def apply(self, g: Graph, p: _Patches) -> None:
        o = _pick(g.main.operators, self.op)
        names = o.outputs if self.outputs else o.inputs
        other = _pick(list(g.main.tensors), self.tensor)
        if self.action == "add" or not names:
            names.append(other)
        elif self.action == "replace":
            names[self.slot % len(names)] = other
        elif self.action == "drop":
            del names[self.slot % len(names)]
        else:
            names.append(names[self.slot % len(names)])

    def describe(self) -> str:
        role = "output" if self.outputs else "input"
        return f"{role} {self.slot} of op #{self.op}: {self.action} (tensor #{self.tensor})"


@dataclass(frozen=True)
class OrderEdit:
    """An op dropped, duplicated or moved (a use before its definition, a tensor written twice)."""
    op: int
    action: str        # drop | duplicate | first | last | swap

    def apply(self, g: Graph, p: _Patches) -> None:
        ops = g.main.operators
        i = self.op % len(ops) if ops else _pick(ops, 0)
        o = ops[i]
        if self.action == "drop":
            del ops[i]
        elif self.action == "duplicate":
            ops.insert(i, dataclasses.replace(o, inputs=list(o.inputs), outputs=list(o.outputs), attrs=dict(o.attrs)))
        elif self.action == "first":
            ops.insert(0, ops.pop(i))
        elif self.action == "last":
            ops.append(ops.pop(i))
        else:
            j = (i + 1) % len(ops)
            ops[i], ops[j] = ops[j], ops[i]

    def describe(self) -> str:
        return f"op #{self.op}: {self.action}"


@dataclass(frozen=True)
class BlockIOEdit:
    """The block's input or output list changed."""
    outputs: bool
    action: str        # drop | duplicate | add | clear | replace
    slot: int
    tensor: int

    def apply(self, g: Graph, p: _Patches) -> None:
        b = g.main
        names = b.outputs if self.outputs else b.inputs
        other = _pick(list(b.tensors), self.tensor)
        if self.action == "clear":
            names.clear()
        elif self.action == "add" or not names:
            names.append(other)
        elif self.action == "drop":
            del names[self.slot % len(names)]
        elif self.action == "duplicate":
            names.append(names[self.slot % len(names)])
        else:
            names[self.slot % len(names)] = other

    def describe(self) -> str:
        return f"block {'outputs' if self.outputs else 'inputs'}: {self.action} #{self.slot} (tensor #{self.tensor})"


@dataclass(frozen=True)
class RenameEdit:
    """A tensor renamed everywhere it is used, to an awkward name (empty, '=', newline, long...)."""
    tensor: int
    name: str
    role: str = "any"      # which tensors `tensor` indexes: ROLES

    def apply(self, g: Graph, p: _Patches) -> None:
        b = g.main
        t = _pick(_role_tensors(b, self.role, shapes=True), self.tensor)
        old, new = t.name, self.name
        if new in b.tensors:
            raise _NotApplicable
        t.name = new
        b.tensors = {(new if k == old else k): v for k, v in b.tensors.items()}
        for o in b.operators:
            o.inputs = [new if n == old else n for n in o.inputs]
            o.outputs = [new if n == old else n for n in o.outputs]
        b.inputs = [new if n == old else n for n in b.inputs]
        b.outputs = [new if n == old else n for n in b.outputs]

    def describe(self) -> str:
        return f"{self.role} tensor #{self.tensor} renamed {self.name[:40]!r}"


ADD_KINDS = ("const_variable", "unused_variable", "variable_no_data", "const", "dangling", "shape_const")


@dataclass(frozen=True)
class AddTensorEdit:
    """A new declaration beside the graph's own: a variable written only by a CONST, a variable
    nothing reads, a variable without an initial value, an unused CONST, a tensor nothing writes,
    a CONST_SHAPE."""
    kind: str
    dtype: DType
    dims: tuple[int, ...]

    def apply(self, g: Graph, p: _Patches) -> None:
        b = g.main
        name = f"added_{len(b.tensors)}"
        dims = [d if d >= 0 else 1 for d in self.dims]
        if not _fits(dims, 4096):
            dims = [1] * len(dims)
        try:
            data = np.zeros(dims, self.dtype.storage)
        except ValueError:
            data = None if S.float_numpy_type(self.dtype) is None else np.zeros(dims, S.float_numpy_type(self.dtype))
        k = self.kind
        if k == "shape_const":
            t = Tensor(name, [len(dims)], DType.SHAPE, data=np.asarray(dims, np.int64))
            b.operators.insert(0, Operator("CONST_SHAPE", [], [name]))
        else:
            t = Tensor(name, dims, self.dtype, data=None if k in ("dangling", "variable_no_data") else data,
                       is_variable=k in ("const_variable", "unused_variable", "variable_no_data"),
                       variable_name=name if "variable" in k else None)
            if k in ("const_variable", "const"):
                b.operators.insert(0, Operator("CONST", [], [name]))
        b.tensors[name] = t

    def describe(self) -> str:
        return f"added {self.kind} {self.dtype.name}{list(self.dims)}"


STRUCTURE_ACTIONS = ("rename_block", "rename_region", "add_region", "add_block", "copy_main_region",
                     "main_last", "version_minor", "drop_all_ops", "unranked", "cond_if")


@dataclass(frozen=True)
class StructureEdit:
    """Regions and blocks: renamed, added, duplicated, reordered; a later TOSA minor version;
    all ops dropped; a tensor made unranked; a COND_IF into another region."""
    action: str
    arg: int

    def apply(self, g: Graph, p: _Patches) -> None:
        main_region = next((r for r in g.regions if r.name == "main"), g.regions[0])
        a = self.action
        if a == "rename_block":
            g.main.name = "entry"
        elif a == "rename_region":
            main_region.name = "entry"
        elif a == "add_region":
            g.regions.append(Region(f"r{self.arg}", [Block(f"r{self.arg}")]))
        elif a == "add_block":
            main_region.blocks.append(Block(f"b{self.arg}"))
        elif a == "copy_main_region":
            g.regions.append(Region("copy", [dataclasses.replace(g.copy().main, name="copy")]))
        elif a == "main_last":
            main_region.blocks.insert(0, Block("first"))
        elif a == "version_minor":
            g.version = (1, self.arg % 256, self.arg % 7, bool(self.arg % 2))
        elif a == "drop_all_ops":
            g.main.operators.clear()
        elif a == "unranked":
            t = _pick(_tensors(g.main, shapes=False), self.arg)
            t.is_unranked, t.shape, t.data = True, [], None
        elif a == "cond_if":
            inputs = list(g.main.inputs)
            if not inputs:
                raise _NotApplicable
            sub = g.copy().main
            sub.name = "branch"
            g.regions.append(Region("branch", [sub]))
            cond = Tensor("cond_flag", [], DType.BOOL, data=np.array(True))
            g.main.tensors["cond_flag"] = cond
            out = Tensor("if_out", list(g.main.tensors[g.main.outputs[0]].shape) if g.main.outputs else [1],
                         g.main.tensors[g.main.outputs[0]].dtype if g.main.outputs else DType.INT32)
            g.main.tensors["if_out"] = out
            g.main.operators += [Operator("CONST", [], ["cond_flag"]),
                                 Operator("COND_IF", ["cond_flag", *inputs], ["if_out"],
                                          attrs={"then_graph": "branch", "else_graph": "branch"})]
            g.main.outputs.append("if_out")

    def describe(self) -> str:
        return f"structure: {self.action} ({self.arg})"


GraphEdit = (ShapeEdit | DTypeEdit | VariableEdit | ConstVariableEdit | OpCodeEdit | AttrEdit | DataEdit
             | WireEdit | OrderEdit | BlockIOEdit | RenameEdit | StructureEdit | AddTensorEdit)


# ---------------------------------------------------------------------------------------------
# Byte edits (after writing)

BYTE_ACTIONS = ("flip", "set", "word", "truncate", "insert", "delete", "duplicate")
WORDS = (0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 1, 4, 8, 0x10000)


@dataclass(frozen=True)
class ByteEdit:
    """One raw edit of the .tosa bytes at a position given as a fraction of the length (of 65536)."""
    action: str
    at: int
    value: int
    length: int

    def apply(self, data: bytes) -> bytes:
        n = len(data)
        pos = (self.at * n) >> 16
        if self.action == "flip" and n:
            b = bytearray(data)
            b[min(pos, n - 1)] ^= 1 << (self.value % 8)
            return bytes(b)
        if self.action == "set" and n:
            b = bytearray(data)
            b[min(pos, n - 1)] = self.value & 0xFF
            return bytes(b)
        if self.action == "word":
            pos = min(pos & ~3, max(0, n - 4))
            word = WORDS[self.value % len(WORDS)] if self.value < 100 else (n + self.value) & 0xFFFFFFFF
            return data[:pos] + struct.pack("<I", word) + data[pos + 4:]
        if self.action == "truncate":
            return data[:pos]
        if self.action == "insert":
            return data[:pos] + bytes([self.value & 0xFF]) * self.length + data[pos:]
        if self.action == "delete":
            return data[:pos] + data[pos + self.length:]
        if self.action == "duplicate":
            return data[:pos + self.length] + data[pos:]
        return data

    def describe(self) -> str:
        return f"bytes: {self.action} at {self.at}/65536 value {self.value} length {self.length}"


# ---------------------------------------------------------------------------------------------
# .npy inputs

NPY_KINDS = ("good", "extreme", "shape", "dtype", "zero_d", "empty_file", "npz", "garbage_header",
             "huge_header", "bad_magic", "truncated", "object", "text", "missing", "directory", "big_endian",
             "fortran", "bool")
GARBAGE_HEADERS = (
    b"{'descr': '<i4', 'fortran_order': False, 'shape': (1, 8), ",              # never closed
    b"{'descr': '<i4', 'fortran_order': False, 'shape': (1, 8)",                # no closing brace
    b"{'descr': '<q7', 'fortran_order': False, 'shape': (8,), }",               # unknown type
    b"{'descr': '<i4', 'fortran_order': False, 'shape': (-1,), }",              # negative dim
    b"{'descr': '<i4', 'fortran_order': 'yes', 'shape': 8, }",                  # wrong field types
    b"[1, 2, 3]",                                                               # not a dict
    b"{'descr': '<i4', 'shape': (8,), }",                                       # missing key
    b"\"\"\"",                                                                  # a string never closed
    b"{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
    b"\xff\xfe\x00garbage",
)


@dataclass(frozen=True)
class NpyEdit:
    """How one -i input file is made: a good array of the graph's input, or something broken."""
    kind: str
    arg: int

    def describe(self) -> str:
        return f"input {self.kind} ({self.arg})"


def _npy_bytes(a: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


def _npy_header(header: bytes, version: tuple[int, int] = (1, 0), declared: int | None = None) -> bytes:
    n = len(header) if declared is None else declared
    if version[0] == 1:
        return b"\x93NUMPY" + bytes(version) + struct.pack("<H", n & 0xFFFF) + header
    return b"\x93NUMPY" + bytes(version) + struct.pack("<I", n & 0xFFFFFFFF) + header


def _input_array(t: Tensor | None, arg: int, extreme: bool = False) -> np.ndarray:
    """An array the graph input `t` accepts (dims it leaves open take 1..4); huge dims shrink."""
    if t is None:
        return np.zeros((1, 8), np.int32)
    shape = [(1 + arg % 4) if d < 0 else d for d in t.shape]
    if not _fits(shape, 1 << 20):
        shape = [min(d, 4) for d in shape]
    try:
        dtype = t.dtype.storage
    except ValueError:
        dtype = np.dtype(S.float_numpy_type(t.dtype) or np.float32)
        return np.full(shape, 0.5, dtype)
    rng = np.random.default_rng(arg)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    lo, hi = (t.dtype.min, t.dtype.max) if extreme else (-4, 4)
    if extreme and arg % 3 == 0:
        return np.full(shape, hi if arg % 2 else lo, dtype)
    return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)


def npy_file(edit: NpyEdit, t: Tensor | None) -> bytes | None:
    """The file's bytes (None: the file is not made; "directory" makes a folder)."""
    k, arg = edit.kind, edit.arg
    good = _input_array(t, arg)
    if k == "good":
        return _npy_bytes(good)
    if k == "extreme":
        return _npy_bytes(_input_array(t, arg, extreme=True))
    if k == "shape":
        dims = [DIMS[(arg >> (4 * i)) % 9] for i in range(arg % 5)]
        dims = [max(d, 0) for d in dims]
        if not _fits(dims, 1 << 20):
            dims = [1] * len(dims)
        return _npy_bytes(np.zeros(dims, good.dtype))
    if k == "dtype":
        name = NUMPY_DTYPES[arg % len(NUMPY_DTYPES)]
        if name == "object":
            return _npy_bytes(np.array([1, None, "x"], dtype=object), allow_pickle=True)
        return _npy_bytes(np.zeros(good.shape, np.dtype(name)))
    if k == "zero_d":
        return _npy_bytes(np.array(3, good.dtype))
    if k == "empty_file":
        return b""
    if k == "npz":
        buf = io.BytesIO()
        np.savez(buf, **{t.name if t is not None else "x": good})
        return buf.getvalue()
    if k == "garbage_header":
        header = GARBAGE_HEADERS[arg % len(GARBAGE_HEADERS)]
        return _npy_header(header.ljust(((len(header) + 10) // 64 + 1) * 64 - 10, b" ")[:-1] + b"\n")
    if k == "huge_header":
        if arg % 2:
            return _npy_header(b"{'descr': '<i4',", (2, 0), declared=1 << 31)
        pad = b"{'descr': '" + good.dtype.str.encode() + b"', 'fortran_order': False, 'shape': " \
            + str(tuple(good.shape)).encode() + b", }" + b" " * 20000 + b"\n"
        return _npy_header(pad, (2, 0)) + good.tobytes()
    if k == "bad_magic":
        raw = bytearray(_npy_bytes(good))
        raw[6] = 9 if arg % 2 else raw[6]
        raw[arg % 6] ^= 0x20
        return bytes(raw)
    if k == "truncated":
        raw = _npy_bytes(good)
        return raw[:max(0, len(raw) - 1 - arg % 16)]
    if k == "object":
        return _npy_bytes(np.array([[1, 2], [3, None]], dtype=object), allow_pickle=True)
    if k == "text":
        return b"1 2 3 4\n5 6 7 8\n"
    if k == "big_endian":
        return _npy_bytes(good.astype(good.dtype.newbyteorder(">")))
    if k == "fortran":
        return _npy_bytes(np.asfortranarray(good.reshape(good.shape[::-1]).T) if good.ndim > 1 else good)
    if k == "bool":
        return _npy_bytes(good != 0)
    return None   # missing, directory


BINDING_KINDS = ("normal", "drop", "duplicate", "unknown_name", "no_equals", "empty_name", "empty_file",
                 "extra", "case_changed", "equals_in_file")


@dataclass(frozen=True)
class BindingEdit:
    """How the `-i NAME=FILE` strings are written."""
    kind: str
    slot: int

    def describe(self) -> str:
        return f"-i strings: {self.kind} ({self.slot})"


# ---------------------------------------------------------------------------------------------
# Configurations (--config)

CONFIG_KINDS = ("named", "unknown_name", "missing_path", "directory", "no_suffix", "toml", "raw")
TOML_VALUES: tuple = (0, -1, 1, 3, 4, 5, 64, 128, (1 << 24) + 8, 1 << 32, 1 << 40, (1 << 63) - 1, 1.5, -0.0,
                      math.inf, math.nan, "8", True, (), ("a", 1))
RAW_TOML = (b"", b"\xff\xfe\x00not toml", b"[mac\nrows = ", b"name = \"x\"\n", b"= 4\n", b"[mac]\nrows = 4\n[mac]\n",
            b"name = 'tiny'\nname = 'tiny'\n", b"\x00" * 64, "名前 = 1\n".encode("utf-16"))


# `extends = ...`: a named base, the file itself (a cycle), a second file that extends this one
# back, missing files, not a string
EXTENDS = ("tiny", "default", "cfg.toml", "other.toml", "missing.toml", "", 5, "../cfg.toml", "cfgdir.toml",
           "/dev/null")


@dataclass(frozen=True)
class TomlEdit:
    """One change to a configuration document: a key or section dropped, added, retyped, renamed;
    an `extends` line."""
    action: str        # drop_key | drop_section | add_key | set | section_scalar | rename_key | extends
    section: int
    key: int
    value: int         # index into TOML_VALUES

    def apply(self, doc: dict) -> None:
        sections = [""] + [k for k, v in doc.items() if isinstance(v, dict)]
        sec = sections[self.section % len(sections)]
        table = doc if sec == "" else doc[sec]
        keys = [k for k, v in table.items() if not isinstance(v, dict)]
        value = TOML_VALUES[self.value % len(TOML_VALUES)]
        if isinstance(value, tuple):
            value = list(value) if value and not isinstance(value[0], str) else ({"a": 1} if value else [])
        if self.action == "extends":
            doc["extends"] = EXTENDS[self.value % len(EXTENDS)]
        elif self.action == "drop_section" and sec:
            del doc[sec]
        elif self.action == "section_scalar" and sec:
            doc[sec] = value
        elif self.action == "add_key":
            table[f"extra_{self.key % 3}"] = value
        elif not keys:
            return
        elif self.action == "drop_key":
            del table[keys[self.key % len(keys)]]
        elif self.action == "rename_key":
            k = keys[self.key % len(keys)]
            table[k.upper() if k.upper() != k else k + "_"] = table.pop(k)
        else:
            table[keys[self.key % len(keys)]] = value

    def describe(self) -> str:
        if self.action == "extends":
            return f"toml: extends = {EXTENDS[self.value % len(EXTENDS)]!r}"
        value = TOML_VALUES[self.value % len(TOML_VALUES)]
        return f"toml: {self.action} section {self.section} key {self.key} value {value!r}"


@dataclass(frozen=True)
class ConfigChoice:
    kind: str
    base: str = "default"
    edits: tuple[TomlEdit, ...] = ()
    raw: int = 0

    def describe(self) -> str:
        if self.kind == "named":
            return f"config {self.base}"
        if self.kind == "toml":
            return f"config {self.base}.toml with " + "; ".join(e.describe() for e in self.edits)
        return f"config {self.kind} ({self.raw})"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def _toml_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) and k.isascii() else json.dumps(k)


def toml_text(doc: dict) -> str:
    """A TOML document for `doc` (scalars first, then one [table] per section)."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items() if not _is_section(v)]
    for k, v in doc.items():
        if _is_section(v):
            lines.append(f"\n[{_toml_key(k)}]")
            lines += [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def _is_section(v) -> bool:
    return isinstance(v, dict) and not any(isinstance(x, dict) for x in v.values())


@lru_cache(maxsize=None)
def _base_config(name: str) -> str:
    from firmware_model.arch.config import CONFIG_DIR

    return (CONFIG_DIR / f"{name}.toml").read_text()


def config_argument(choice: ConfigChoice, files: dict[str, bytes]) -> str:
    """The --config argument for `choice`, adding the file it needs to `files`."""
    k = choice.kind
    if k == "named":
        return choice.base
    if k == "unknown_name":
        return ("huge", "Tiny", "", "default.toml", "../tiny")[choice.raw % 5]
    if k == "missing_path":
        return "{case}/nope.toml"
    if k == "directory":
        files["cfgdir.toml/"] = b""
        return "{case}/cfgdir.toml"
    if k == "no_suffix":
        files["cfg.txt"] = _base_config(choice.base).encode()
        return "{case}/cfg.txt"
    if k == "raw":
        files["cfg.toml"] = RAW_TOML[choice.raw % len(RAW_TOML)]
        return "{case}/cfg.toml"
    doc = tomllib.loads(_base_config(choice.base))
    for e in choice.edits:
        e.apply(doc)
    files["cfg.toml"] = toml_text(doc).encode()
    if doc.get("extends") == "other.toml":
        files["other.toml"] = b'extends = "cfg.toml"\n'
    elif doc.get("extends") == "cfgdir.toml":
        files["cfgdir.toml/"] = b""
    return "{case}/cfg.toml"


# ---------------------------------------------------------------------------------------------
# State files (--state)

STATE_KINDS = ("absent", "good", "golden_image", "wrong_name", "extra_name", "missing_var", "wrong_shape",
               "wrong_dtype", "nan", "zero_d", "empty_npz", "garbage", "truncated_zip", "directory", "npy",
               "object", "no_folder", "image_broken", "layout_broken", "flags_broken")


@dataclass(frozen=True)
class StateChoice:
    kind: str
    variable: int
    arg: int

    def describe(self) -> str:
        return f"state {self.kind} (variable #{self.variable}, {self.arg})"


def _variable_values(g: Graph) -> dict[str, np.ndarray]:
    """The graph's variables by name, at their initial values (zeros where none is given)."""
    out = {}
    for t in g.main.variables():
        try:
            dtype = t.dtype.storage
        except ValueError:
            dtype = np.dtype(np.float32)
        shape = [max(d, 1) for d in t.shape]
        if not _fits(shape, 1 << 16):
            shape = [1] * len(shape)
        v = np.asarray(t.data) if t.data is not None and list(np.shape(t.data)) == shape else np.zeros(shape, dtype)
        out[t.variable_name or t.name] = v.astype(dtype)
    return out


def _npz(arrays: dict[str, np.ndarray], allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _golden_image(g: Graph, config: str, input_shapes: dict) -> dict[str, np.ndarray] | None:
    """A real golden-model state (SRAM image, flags, layout) of the graph on `config`, or None."""
    from sim.oracles.backends import GoldenSession

    try:
        return dict(GoldenSession(g, config, input_shapes=input_shapes).state)
    except Exception:   # the graph or config does not compile: the case simply has no image
        return None


def state_file(choice: StateChoice, g: Graph, config: str, input_shapes: dict) -> tuple[bytes | None, str]:
    """The state file's bytes (None: not made) and its path relative to the case folder."""
    k, arg = choice.kind, choice.arg
    values = _variable_values(g)
    names = list(values)
    pick = names[choice.variable % len(names)] if names else None
    if k == "absent":
        return None, "state.npz"
    if k == "no_folder":
        return None, "nodir/state.npz"
    if k == "directory":
        return None, "statedir.npz/"
    if k == "garbage":
        return bytes((arg * 7 + i * 13) & 0xFF for i in range(64 + arg % 64)), "state.npz"
    if k == "empty_npz":
        return _npz({}), "state.npz"
    if k == "npy":
        return _npy_bytes(np.zeros(4, np.int32)), "state.npz"
    if k in ("golden_image", "image_broken", "layout_broken", "flags_broken"):
        image = _golden_image(g, config, input_shapes)
        if image is None:
            return _npz(values), "state.npz"
        keys = sorted(image)
        if k == "image_broken":
            sram = [n for n in keys if n.endswith("variable_sram")]
            for n in sram:
                a = image[n]
                image[n] = (a[: (arg % 5) * max(1, a.size // 4)] if arg % 3 else a.astype(np.float64))
        elif k == "layout_broken":
            for n in [n for n in keys if n.endswith("layout")]:
                layout = image[n]
                image[n] = _broken_layout(str(layout), arg)
        elif k == "flags_broken":
            for n in [n for n in keys if n.endswith("slot_written")]:
                a = image[n]
                image[n] = (np.ones(a.shape[0] * 2 + 1, a.dtype) if arg % 2 else a.astype(np.float32) * np.nan)
        return _npz(image), "state.npz"
    if pick is None:
        values = {"phantom": np.zeros((1, 4), np.int32)}
        names, pick = ["phantom"], "phantom"
    if k == "wrong_name":
        values[pick + "_renamed"] = values.pop(pick)
    elif k == "extra_name":
        values["not_a_variable"] = np.zeros(3, np.int32)
    elif k == "missing_var":
        del values[pick]
    elif k == "wrong_shape":
        a = values[pick]
        values[pick] = np.zeros((a.size + 1 + arg % 3,) if arg % 2 else (1, *a.shape), a.dtype)
    elif k == "wrong_dtype":
        values[pick] = values[pick].astype(NUMPY_DTYPES[arg % (len(NUMPY_DTYPES) - 1)])
    elif k == "nan":
        values[pick] = np.full(values[pick].shape, np.nan, np.float32)
    elif k == "zero_d":
        values[pick] = np.array(1, values[pick].dtype)
    elif k == "truncated_zip":
        raw = _npz(values)
        return raw[: len(raw) * (1 + arg % 7) // 8], "state.npz"
    elif k == "object":
        values[pick] = np.array([None, 1], dtype=object)
        return _npz(values, allow_pickle=True), "state.npz"
    return _npz(values), "state.npz"


def _broken_layout(text: str, arg: int) -> np.ndarray:
    try:
        layout = json.loads(text)
    except ValueError:
        return np.array("[")
    choice = arg % 6
    if choice == 0:
        return np.array("not json")
    if choice == 1:
        return np.array(json.dumps({"a": 1}))
    if choice == 2 and layout:
        k0 = arg % max(1, len(layout[0]))
        layout[0] = {k: (None if i == k0 else v) for i, (k, v) in enumerate(layout[0].items())}
    elif choice == 3 and layout:
        layout[0] = {k: v for i, (k, v) in enumerate(layout[0].items()) if i != arg % max(1, len(layout[0]))}
    elif choice == 4 and layout:
        layout[0] = {k: (10 ** 12 if isinstance(v, int) else v) for k, v in layout[0].items()}
    else:
        layout = layout + layout
    return np.array(json.dumps(layout))


# ---------------------------------------------------------------------------------------------
# Other arguments

# --set SECTION.KEY=VALUE; the first ones leave a valid configuration, the rest are refused
SET_VALID = ("mac.rows=16", "sram.input=4096", "clock_mhz=800.5", "external.size=4294967296", "name=\"x\"")
SET_INVALID = ("mac.rows=3", "sram.input=-1", "clock_mhz=0", "mac.rows", "=4", "bogus=1", "sram.bogus=1",
               "mac.rows=abc", "name=x/y", "mac=4", "sram.input=1.5", "extends=tiny", "mac.rows=1e400",
               "description=[1]", "external.latency=-1", ".rows=4", "mac..rows=4")
CLI_KINDS = ("set", "out_is_file", "out_under_file", "out_readonly", "out_proc", "out_long_name", "bind", "print_after",
             "print_after_all", "ops", "closed_pipe", "model_missing", "model_directory", "invocations",
             "stop_at_first", "inject_fault", "report_is_file", "unknown_flag")
BIND_FORMS = ("{t}[{i}]={v}", "{t}={v}", "={v}", "{t}[{i}]=abc", "{t}[99]={v}", "{t}[-1]={v}", "{t}[{i}]",
              "nope[0]={v}", "{t}[{i}]={v}={v}", "{t}[{i}]= {v}")
BIND_VALUES = (2, 1, 0, -1, 3, 1 << 20, 1 << 40, 10 ** 30)


@dataclass(frozen=True)
class CliEdit:
    kind: str
    arg: int

    def describe(self) -> str:
        return f"cli {self.kind} ({self.arg})"


# ---------------------------------------------------------------------------------------------
# A case

@dataclass(frozen=True)
class CaseSpec:
    """Everything drawn for one case; `build_case` makes its files and argv."""
    target: str                                   # one of TARGETS
    seed: str
    graph_edits: tuple = ()
    byte_edits: tuple[ByteEdit, ...] = ()
    inputs: tuple[NpyEdit, ...] = ()              # per graph input, by position (missing: good)
    binding: BindingEdit | None = None
    config: ConfigChoice = ConfigChoice("named")
    state: StateChoice | None = None
    cli: tuple[CliEdit, ...] = ()
    invocations: int = 1                          # npu sim: -i per input repeated this many times

    def describe(self) -> str:
        parts = [f"{self.target} on {self.seed}"]
        parts += [e.describe() for e in self.graph_edits]
        parts += [e.describe() for e in self.byte_edits]
        parts += [e.describe() for e in self.inputs if e.kind != "good"]
        if self.binding is not None:
            parts.append(self.binding.describe())
        if self.target in ("run-golden", "compile", "sim"):
            parts.append(self.config.describe())
        if self.state is not None:
            parts.append(self.state.describe())
        parts += [e.describe() for e in self.cli]
        return "; ".join(parts)


@dataclass
class Case:
    """One `npu` invocation with its files, ready to run in a folder of its own."""
    command: str                                  # inspect | run | compile | sim
    argv: list[str]                               # "{case}": the case folder; "{repo}": the repository
    files: dict[str, bytes] = field(default_factory=dict)   # relative path -> bytes ("x/" a folder)
    readonly: tuple[str, ...] = ()                # folders made read-only (chmod 555)
    state: str | None = None                      # the --state file, relative: kept unchanged unless exit 0
    stdout_limit: int | None = None               # stdout closes after this many bytes (`| head`)
    what: str = ""                                # the spec's description

    def resolve(self, case_dir: Path, repo: Path = REPO_ROOT) -> list[str]:
        return [a.replace("{case}", str(case_dir)).replace("{repo}", str(repo)) for a in self.argv]

    def materialise(self, case_dir: Path) -> None:
        case_dir.mkdir(parents=True, exist_ok=True)
        for rel, data in self.files.items():
            p = case_dir / rel
            if rel.endswith("/"):
                p.mkdir(parents=True, exist_ok=True)
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        for rel in self.readonly:
            (case_dir / rel).mkdir(parents=True, exist_ok=True)
            (case_dir / rel).chmod(0o555)

    # -- saved reproducers (tests/data/fuzz/<slug>/case.json + files/) --------------------

    def save(self, folder: Path, signature: str, example: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        files_dir = folder / "files"
        for rel, data in self.files.items():
            p = files_dir / rel
            if rel.endswith("/"):
                p.mkdir(parents=True, exist_ok=True)
                (p / ".keep").write_bytes(b"")     # git keeps no empty folder
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        doc = {"signature": signature, "example": example, "what": self.what, "command": self.command,
               "argv": self.argv, "files": sorted(self.files), "readonly": list(self.readonly),
               "state": self.state, "stdout_limit": self.stdout_limit}
        (folder / "case.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")

    @staticmethod
    def load(folder: Path) -> tuple["Case", dict]:
        doc = json.loads((folder / "case.json").read_text())
        files = {}
        for rel in doc["files"]:
            files[rel] = b"" if rel.endswith("/") else (folder / "files" / rel).read_bytes()
        case = Case(doc["command"], list(doc["argv"]), files, tuple(doc["readonly"]), doc["state"],
                    doc["stdout_limit"], doc["what"])
        return case, doc


def _write_graph(g: Graph, edits: tuple, patches: _Patches) -> tuple[bytes, Graph]:
    """The graph's bytes after the edits the writer accepts (an edit it refuses is dropped), and
    the graph as edited."""
    from compiler.errors import TosaFormatError

    base = g
    for e in edits:
        trial = base.copy()
        try:
            e.apply(trial, patches)
            tosa_bytes(trial)
        except (_NotApplicable, TosaFormatError, ValueError, TypeError, KeyError, IndexError, OverflowError):
            continue
        base = trial
    return patches.apply(tosa_bytes(base)), base


def build_case(spec: CaseSpec) -> tuple[Case, Graph]:
    """The files and argv of `spec`, and the graph as edited (before byte edits)."""
    # casts of fuzzed data overflow on purpose: no warning on the campaign's terminal
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _build_case(spec)


def _build_case(spec: CaseSpec) -> tuple[Case, Graph]:
    command = COMMAND_OF[spec.target]
    seed = SEED_BY_NAME[spec.seed]
    g = seed_graph(spec.seed).copy()
    patches = _Patches()
    files: dict[str, bytes] = {}
    if spec.graph_edits:
        tosa, g = _write_graph(g, spec.graph_edits, patches)
    else:
        tosa = seed_bytes(spec.seed)
    for e in spec.byte_edits:
        tosa = e.apply(tosa)
    cli = {e.kind: e.arg for e in spec.cli}

    # the model: a committed file is used in place when it is unchanged
    if "model_missing" in cli:
        model = "{case}/missing.tosa"
    elif "model_directory" in cli:
        files["model.tosa/"] = b""
        model = "{case}/model.tosa"
    elif seed.path and tosa == seed_bytes(spec.seed) and command != "sim":
        model = "{repo}/" + seed.path
    else:
        files["model.tosa"] = tosa
        model = "{case}/model.tosa"

    argv = [command, model]
    readonly: tuple[str, ...] = ()
    stdout_limit = None
    state_rel = None

    if command == "inspect":
        if "ops" in cli or "closed_pipe" in cli:
            argv.append("--ops")
        if "closed_pipe" in cli:
            stdout_limit = (0, 1, 80, 1000)[cli["closed_pipe"] % 4]
    else:
        block = g.main if g.regions else None
        graph_inputs = list(block.inputs) if block is not None else []
        tensors = block.tensors if block is not None else {}
        invocations = spec.invocations if command == "sim" else 1
        input_args: list[str] = []
        shapes: dict[str, tuple] = {}
        if command != "compile":
            for i, name in enumerate(graph_inputs):
                edit = spec.inputs[i] if i < len(spec.inputs) else NpyEdit("good", i)
                for k in range(invocations):
                    e = edit if k == 0 else NpyEdit(edit.kind if edit.kind != "good" else "good", edit.arg + k)
                    rel = f"in{i}_{k}.npy"
                    if e.kind == "missing":
                        rel = f"missing{i}.npy"
                    elif e.kind == "directory":
                        files[f"in{i}_{k}.npy/"] = b""
                    else:
                        data = npy_file(e, tensors.get(name))
                        files[rel] = data
                        if k == 0 and e.kind in ("good", "extreme"):
                            shapes[name] = _input_array(tensors.get(name), e.arg).shape
                    input_args.append(f"{name}={{case}}/{rel}")
            input_args = _bindings(spec.binding, input_args, graph_inputs)
            for a in input_args:
                argv += ["-i", a]
        if command in ("run", "compile"):
            out = "{case}/out"
            if "out_is_file" in cli:
                files["afile"] = b"x"
                out = "{case}/afile"
            elif "out_under_file" in cli:
                files["afile"] = b"x"
                out = "{case}/afile/sub"
            elif "out_readonly" in cli:
                readonly = ("ro",)
                out = "{case}/ro/out"
            elif "out_proc" in cli:
                out = "/proc/npu-fuzz-out"
            elif "out_long_name" in cli:
                out = "{case}/" + "n" * (255 + cli["out_long_name"] % 10)
            argv += ["-o", out]
        if spec.target == "run-golden":
            argv += ["--backend", "golden"]
        if command != "run" or spec.target == "run-golden":
            argv += ["--config", config_argument(spec.config, files)]
        elif "bind" in cli:
            argv += ["--backend", "interp"]
        if "bind" in cli:
            argv += ["--bind", _bind_string(cli["bind"], graph_inputs, tensors)]
        if "set" in cli and (command != "run" or spec.target == "run-golden"):
            # npu sim gets only settings that are refused: another valid configuration builds a core
            forms = SET_INVALID if command == "sim" else SET_VALID + SET_INVALID
            argv += ["--set", forms[cli["set"] % len(forms)]]
        if command == "compile":
            if "print_after" in cli:
                from compiler.pipeline import PASSES

                names = PASSES + ("all", "nonexistent_pass", "", "EMITTER")
                argv += ["--print-after", names[cli["print_after"] % len(names)]]
            if "print_after_all" in cli:
                argv.append("--print-after-all")
        if spec.state is not None and command in ("run", "sim"):
            config = spec.config.base if spec.config.kind == "named" else "default"
            data, state_rel = state_file(spec.state, g, config if spec.target != "run-interp" else "default", shapes)
            if state_rel.endswith("/"):
                files[state_rel] = b""
                state_rel = state_rel[:-1]
            elif data is not None:
                files[state_rel] = data
            argv += ["--state", "{case}/" + state_rel]
        if command == "sim":
            argv += ["--report", "{case}/report" if "report_is_file" not in cli else "{case}/afile"]
            if "report_is_file" in cli:
                files["afile"] = b"x"
            if "invocations" in cli:
                argv += ["--invocations", str((-1, 0, 1, 2, 3)[cli["invocations"] % 5])]
            if "stop_at_first" in cli:
                argv.append("--stop-at-first-mismatch")
            if "inject_fault" in cli:
                argv += ["--inject-fault", ("no_such_fault", "", "RESCALE_ROUNDING")[cli["inject_fault"] % 3]]
    if "unknown_flag" in cli:
        argv.insert(1 + cli["unknown_flag"] % 2, ("--frobnicate", "-x", "--ops=3", "--")[cli["unknown_flag"] % 4])
    return Case(command, argv, files, readonly, state_rel, stdout_limit, spec.describe()), g


def _bindings(edit: BindingEdit | None, args: list[str], names: list[str]) -> list[str]:
    if edit is None or edit.kind == "normal":
        return args
    k, s = edit.kind, edit.slot
    args = list(args)
    if k == "drop" and args:
        del args[s % len(args)]
    elif k == "duplicate" and args:
        args.append(args[s % len(args)])
    elif k == "unknown_name":
        args.append("no_such_input={case}/in0_0.npy")
    elif k == "no_equals" and args:
        args[s % len(args)] = args[s % len(args)].replace("=", ":", 1)
    elif k == "empty_name" and args:
        args[s % len(args)] = "=" + args[s % len(args)].partition("=")[2]
    elif k == "empty_file" and args:
        args[s % len(args)] = args[s % len(args)].partition("=")[0] + "="
    elif k == "extra":
        args.append(args[0] if args else "x={case}/in0_0.npy")
    elif k == "case_changed" and args:
        name, _, f = args[s % len(args)].partition("=")
        args[s % len(args)] = name.swapcase() + "=" + f
    elif k == "equals_in_file" and args:
        args[s % len(args)] += "=extra"
    return args


def _bind_string(arg: int, names: list[str], tensors: dict) -> str:
    t = names[arg % len(names)] if names else "x"
    rank = len(tensors[t].shape) if t in tensors else 1
    return BIND_FORMS[arg % len(BIND_FORMS)].format(t=t, i=(arg >> 4) % max(rank, 1),
                                                    v=BIND_VALUES[(arg >> 8) % len(BIND_VALUES)])


# ---------------------------------------------------------------------------------------------
# Strategies

def _index() -> st.SearchStrategy[int]:
    return st.integers(0, 1 << 16)


def _dims() -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.sampled_from(DIMS), min_size=0, max_size=6).map(tuple)


def graph_edits() -> st.SearchStrategy:
    """One structure-aware edit of a graph."""
    ints = st.sampled_from(INT32S)
    role = st.sampled_from(ROLES)
    return st.one_of(
        st.builds(ShapeEdit, _index(), _dims(), role),
        st.builds(DTypeEdit, _index(), st.sampled_from(ALL_DTYPES), role),
        st.builds(VariableEdit, _index(), st.booleans(),
                  st.sampled_from((None, "=other", "", "v", "lstm/state_h", "a\nb")), role),
        st.builds(ConstVariableEdit, _index()),
        st.builds(OpCodeEdit, _index(), st.sampled_from(S.OPS[1:])),
        st.builds(AttrEdit, _index(), _index(),
                  st.one_of(ints, st.booleans(), st.lists(ints, max_size=6).map(tuple))),
        st.builds(DataEdit, _index(), st.sampled_from(DATA_FILLS), _index()),
        st.builds(WireEdit, _index(), st.booleans(), _index(), st.sampled_from(("replace", "drop", "duplicate", "add")),
                  _index()),
        st.builds(OrderEdit, _index(), st.sampled_from(("drop", "duplicate", "first", "last", "swap"))),
        st.builds(BlockIOEdit, st.booleans(), st.sampled_from(("drop", "duplicate", "add", "clear", "replace")),
                  _index(), _index()),
        st.builds(RenameEdit, _index(), st.sampled_from(TENSOR_NAMES), role),
        st.builds(StructureEdit, st.sampled_from(STRUCTURE_ACTIONS), _index()),
        st.builds(AddTensorEdit, st.sampled_from(ADD_KINDS), st.sampled_from(ALL_DTYPES), _dims()),
    )


def byte_edits() -> st.SearchStrategy[ByteEdit]:
    return st.builds(ByteEdit, st.sampled_from(BYTE_ACTIONS), st.integers(0, (1 << 16) - 1), st.integers(0, 255),
                     st.integers(1, 64))


def npy_edits() -> st.SearchStrategy[NpyEdit]:
    return st.builds(NpyEdit, st.sampled_from(NPY_KINDS), _index())


def config_choices() -> st.SearchStrategy[ConfigChoice]:
    """Any --config: a named configuration, a broken name or path, a fuzzed TOML document."""
    named = st.builds(ConfigChoice, st.just("named"), st.sampled_from(CONFIG_NAMES))
    broken = st.builds(ConfigChoice, st.sampled_from(("unknown_name", "missing_path", "directory", "no_suffix", "raw")),
                       st.sampled_from(CONFIG_NAMES), st.just(()), _index())
    toml_edit = st.builds(TomlEdit, st.sampled_from(("set", "drop_key", "add_key", "drop_section", "section_scalar",
                                                     "rename_key", "extends")), _index(), _index(), _index())
    fuzzed = st.builds(ConfigChoice, st.just("toml"), st.sampled_from(CONFIG_NAMES),
                       st.lists(toml_edit, min_size=1, max_size=3).map(tuple))
    return st.one_of(named, broken, fuzzed)


def state_choices() -> st.SearchStrategy[StateChoice]:
    return st.builds(StateChoice, st.sampled_from(STATE_KINDS), _index(), _index())


FOCI = ("clean", "bytes", "graph", "inputs", "bindings", "config", "state", "cli", "mixed")
CLI_FOR = {
    "inspect": ("ops", "closed_pipe", "model_missing", "model_directory", "unknown_flag"),
    "run-interp": ("out_is_file", "out_under_file", "out_readonly", "out_proc", "out_long_name", "bind",
                   "model_missing", "model_directory", "unknown_flag"),
    "run-golden": ("out_is_file", "out_under_file", "out_readonly", "out_proc", "out_long_name", "bind",
                   "model_missing", "model_directory", "unknown_flag", "set"),
    "compile": ("set", "out_is_file", "out_under_file", "out_readonly", "out_proc", "out_long_name", "bind",
                "print_after", "print_after_all", "model_missing", "model_directory", "unknown_flag"),
    "sim": ("bind", "invocations", "stop_at_first", "inject_fault", "report_is_file", "model_missing", "set"),
}


@dataclass(frozen=True)
class Drawn:
    """Everything drawn for one case before it is fitted to a target (`fit`). The draws do not
    depend on the target, so one hypothesis run can serve a campaign whose targets are scheduled
    from outside (hypothesis requires a draw to ask for the same choices when replayed)."""
    focus: str
    seed: int
    graph_edits: tuple
    byte_edits: tuple[ByteEdit, ...]
    inputs: tuple[NpyEdit, ...]
    binding: BindingEdit | None
    named: str
    config: ConfigChoice
    state: StateChoice | None
    cli: tuple[CliEdit, ...]
    invocations: int
    mix: tuple[bool, ...]


# A focus that means nothing to a target (inputs for `inspect`) is replaced by one that does.
INSTEAD = {"inputs": "bytes", "bindings": "cli", "config": "graph", "state": "graph"}
# The parts each focus draws (its own, and those of its replacement).
PARTS = {"clean": (), "bytes": ("bytes",), "graph": ("graph",), "inputs": ("inputs", "bytes"),
         "bindings": ("binding", "cli"), "config": ("config", "graph"), "state": ("state", "graph"), "cli": ("cli",),
         "mixed": ("graph", "bytes", "inputs", "config", "state", "cli")}


@st.composite
def drawn_cases(draw) -> Drawn:
    """The raw material of a case; `fit(drawn, target)` makes a CaseSpec of it. What is drawn
    depends on the focus only, never on the target."""
    focus = draw(st.sampled_from(FOCI))
    parts = PARTS[focus]
    cli_edit = st.builds(CliEdit, st.sampled_from(CLI_KINDS), _index())
    return Drawn(
        focus=focus, seed=draw(st.integers(0, len(SEEDS) - 1)),
        graph_edits=tuple(draw(st.lists(graph_edits(), min_size=1, max_size=3))) if "graph" in parts else (),
        byte_edits=tuple(draw(st.lists(byte_edits(), min_size=1, max_size=4))) if "bytes" in parts else (),
        inputs=tuple(draw(st.lists(npy_edits(), min_size=1, max_size=3))) if "inputs" in parts else (),
        binding=draw(st.builds(BindingEdit, st.sampled_from(BINDING_KINDS), _index())) if "binding" in parts else None,
        named=draw(st.sampled_from(CONFIG_NAMES)),
        config=draw(config_choices()) if "config" in parts else ConfigChoice("named"),
        state=draw(state_choices()) if "state" in parts else None,
        cli=tuple(draw(st.lists(cli_edit, min_size=1, max_size=2, unique_by=lambda e: e.kind)))
        if "cli" in parts else (),
        invocations=draw(st.integers(1, 3)),
        mix=tuple(draw(st.lists(st.booleans(), min_size=4, max_size=4))) if focus == "mixed" else (False,) * 4,
    )


def _focus_applies(focus: str, target: str) -> bool:
    if focus in ("inputs", "bindings"):
        return target not in ("inspect", "compile")
    if focus == "config":
        return target in ("run-golden", "compile", "sim")
    if focus == "state":
        return target in ("run-interp", "run-golden", "sim")
    return True


def fit(d: Drawn, target: str) -> CaseSpec:
    """The case `d` makes for `target`: a seed the target can afford, and the drawn edits that
    mean something to its command (a focus that does not apply, such as inputs for `inspect`,
    becomes a byte-level case)."""
    focus = d.focus if _focus_applies(d.focus, target) else INSTEAD[d.focus]
    mixed = focus == "mixed"
    pool = [s.name for s in SEEDS]
    if target == "sim":
        pool = [n for n in pool if n in SMALL_SEEDS]
    if focus == "state":
        pool = [n for n in pool if n in STATEFUL_SEEDS]
    if focus == "config" or (mixed and d.config.kind == "toml"):
        pool = [n for n in pool if n in SMALL_SEEDS]
    seed = pool[d.seed % len(pool)]
    spec = CaseSpec(target, seed)
    if focus == "graph" or (mixed and d.mix[3]):
        spec = dataclasses.replace(spec, graph_edits=d.graph_edits[:2] if mixed else d.graph_edits)
    if focus == "bytes" or (mixed and d.mix[0]):
        spec = dataclasses.replace(spec, byte_edits=d.byte_edits)
    if target not in ("inspect", "compile"):
        if focus == "inputs" or (mixed and d.mix[1]):
            spec = dataclasses.replace(spec, inputs=d.inputs)
        if focus == "bindings":
            spec = dataclasses.replace(spec, binding=d.binding)
    if target in ("run-golden", "compile", "sim"):
        config = d.config if focus in ("config", "mixed") else ConfigChoice("named", d.named)
        if target == "sim" and config.kind in ("named", "toml", "no_suffix"):
            config = ConfigChoice("named", "tiny")   # another valid configuration builds another core (minutes)
        elif target == "sim":
            config = dataclasses.replace(config, base="tiny")
        if seed in TINY_TOO_SLOW and config.base == "tiny":
            config = dataclasses.replace(config, base="default")
        spec = dataclasses.replace(spec, config=config)
    if d.state is not None and target in ("run-interp", "run-golden", "sim") and (
            focus == "state" or (SEED_BY_NAME[seed].stateful and d.mix[2])):
        spec = dataclasses.replace(spec, state=d.state)
    if focus in ("cli", "mixed"):
        kinds = CLI_FOR[target]
        cli = {}
        for e in d.cli:
            kind = e.kind if e.kind in kinds else kinds[CLI_KINDS.index(e.kind) % len(kinds)]
            cli.setdefault(kind, CliEdit(kind, e.arg))
        spec = dataclasses.replace(spec, cli=tuple(cli.values()))
    if target == "sim" and SEED_BY_NAME[seed].stateful:
        spec = dataclasses.replace(spec, invocations=d.invocations)
    return spec


def case_specs(target: str) -> st.SearchStrategy[CaseSpec]:
    """Cases for `target` (one of TARGETS)."""
    return drawn_cases().map(lambda d: fit(d, target))


# ---------------------------------------------------------------------------------------------
# Shrinking: simpler variants of a failing spec

@st.composite
def simplifications(draw, spec: CaseSpec) -> CaseSpec:
    """Specs made from `spec` by dropping some of its edits and trying smaller seeds: the space
    hypothesis searches and shrinks in when the campaign minimises a failure (booleans shrink to
    False = "drop", seeds towards the smallest)."""
    def keep(items: tuple) -> tuple:
        flags = draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
        return tuple(x for x, f in zip(items, flags) if f)

    allowed = SMALL_SEEDS if spec.target == "sim" else tuple(s.name for s in SEEDS)
    if spec.state is not None:
        allowed = tuple(s for s in allowed if s in STATEFUL_SEEDS)
    smaller = list(allowed[:allowed.index(spec.seed)]) if spec.seed in allowed else []
    seed = draw(st.sampled_from(smaller + [spec.seed]))
    if seed in TINY_TOO_SLOW and spec.config == ConfigChoice("named", "tiny"):
        seed = spec.seed
    config = spec.config
    if config.kind != "named" and not draw(st.booleans()):
        config = ConfigChoice("named", "tiny" if spec.target == "sim" else "default")
    elif config.kind == "toml":
        config = dataclasses.replace(config, edits=keep(config.edits) or config.edits[:1])
    inputs = tuple(e if draw(st.booleans()) else NpyEdit("good", 0) for e in spec.inputs)
    while inputs and inputs[-1] == NpyEdit("good", 0):
        inputs = inputs[:-1]
    state = spec.state if spec.state is None or draw(st.booleans()) else None
    return dataclasses.replace(
        spec, seed=seed, graph_edits=keep(spec.graph_edits), byte_edits=keep(spec.byte_edits), inputs=inputs,
        binding=spec.binding if spec.binding is None or draw(st.booleans()) else None, config=config, state=state,
        cli=keep(spec.cli), invocations=draw(st.integers(1, spec.invocations)))
