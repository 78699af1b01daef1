"""Writing the graph IR as a TOSA 1.x flatbuffer (`.tosa`) with `flatbuffers.Builder`.

The layout follows `schema.py`: one table per region, block, tensor, shape and operator, fields in
their vtable slots; constant data little-endian, each data vector aligned to 8 bytes and padded to
a multiple of 8 (as tosa-opt writes it). SHAPE tensors (the IR's form of a TosaShape) go into the
block's `shapes`, every other tensor into `tensors`. Operators keep the attribute table the IR
names (`Operator.attr_kind`, or the op's own table when it is None), so variable reads and writes
written as IDENTITY ops stay IDENTITY ops with VariableRead/VariableWrite attributes.

A graph the format cannot hold (unknown op, attribute missing or out of range, data that does not
fit its tensor, names that refer to nothing) raises TosaFormatError naming the destination.
"""

from __future__ import annotations

import os
from pathlib import Path

import flatbuffers
import numpy as np

from compiler.errors import TosaFormatError
from compiler.ir import Block, Graph, Operator, Tensor
from compiler.tosa_io import schema as S
from firmware_model.tosa_ops.dtypes import DType

_T, _B, _R, _O, _G, _SH = (S.TosaTensorSlots, S.TosaBasicBlockSlots, S.TosaRegionSlots,
                           S.TosaOperatorSlots, S.TosaGraphSlots, S.TosaShapeSlots)

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


class _Bad(Exception):
    pass


def _q(name) -> str:
    s = str(name)
    return repr(s[:60] + "..." if len(s) > 60 else s)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


# ---------------------------------------------------------------------------------------------
# Element data

def encode_values(values, dtype: DType) -> bytes:
    """Little-endian bytes of `values` (any shape) as elements of `dtype`, unpadded."""
    a = np.asarray(values)
    if dtype == DType.BOOL:
        if a.dtype != np.bool_ and not np.issubdtype(a.dtype, np.integer):
            raise _Bad(f"BOOL data held as {a.dtype}")
        return (a.reshape(-1) != 0).astype(np.uint8).tobytes()
    ftype = S.float_numpy_type(dtype)
    if ftype is not None:
        return a.reshape(-1).astype(ftype).tobytes()
    if not dtype.is_integer:
        raise _Bad(f"constant data of type {dtype.name} is not supported by npu-bench")
    if not np.issubdtype(a.dtype, np.integer):
        raise _Bad(f"{dtype.name} data held as {a.dtype}, not an integer type")
    flat = a.reshape(-1).astype(np.int64)
    if flat.size and (int(flat.min()) < dtype.min or int(flat.max()) > dtype.max):
        raise _Bad(f"data outside the range of {dtype.name} [{dtype.min}, {dtype.max}]")
    if dtype == DType.INT4:
        nib = (flat & 0xF).astype(np.uint8)
        if nib.size % 2:
            nib = np.append(nib, np.uint8(0))
        return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
    if dtype == DType.INT48:
        return flat.astype("<i8").view(np.uint8).reshape(-1, 8)[:, :6].tobytes()
    width = {DType.INT8: "<i1", DType.INT16: "<i2", DType.INT32: "<i4", DType.INT64: "<i8",
             DType.SHAPE: "<i8"}[dtype]
    return flat.astype(width).tobytes()


def _pad8(raw: bytes) -> bytes:
    extra = -len(raw) % 8
    return raw + bytes(extra) if extra else raw


# ---------------------------------------------------------------------------------------------
# Builder helpers (all through flatbuffers' public Builder API)

def _byte_vector(b: flatbuffers.Builder, raw: bytes) -> int:
    """A [ubyte] vector whose data starts on an 8-byte boundary (force_align: 8)."""
    b.Prep(8, len(raw))  # align so that the data, once written, starts 8-aligned
    return b.CreateNumpyVector(np.frombuffer(raw, np.uint8))


def _int32_vector(b: flatbuffers.Builder, values, what: str) -> int:
    vals = list(values)
    for v in vals:
        if not _is_int(v) or not _I32_MIN <= int(v) <= _I32_MAX:
            raise _Bad(f"{what}: {v!r} is not an int32")
    return b.CreateNumpyVector(np.asarray(vals, dtype="<i4").reshape(-1))


def _offset_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _string_vector(b: flatbuffers.Builder, strings: list[str]) -> int:
    return _offset_vector(b, [b.CreateString(s) for s in strings])


# ---------------------------------------------------------------------------------------------
# The graph

class _GraphWriter:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.b = flatbuffers.Builder(1 << 16)
        self.variables = {t.name: t for blk in graph.blocks() for t in blk.tensors.values() if t.is_variable}

    def build(self) -> bytes:
        b = self.b
        g = self.graph
        if not any(r.name == "main" and any(blk.name == "main" for blk in r.blocks) for r in g.regions):
            raise _Bad("the graph has no 'main' block in a 'main' region (the entry point)")
        regions = []
        for r in g.regions:
            blocks = []
            for blk in r.blocks:
                try:
                    blocks.append(self._block(blk))
                except _Bad as e:
                    raise _Bad(f"block {_q(blk.name)}: {e}") from None
            name = b.CreateString(r.name)
            blocks_vec = _offset_vector(b, blocks)
            b.StartObject(_R.COUNT)
            b.PrependUOffsetTRelativeSlot(_R.name, name, 0)
            b.PrependUOffsetTRelativeSlot(_R.blocks, blocks_vec, 0)
            regions.append(b.EndObject())
        regions_vec = _offset_vector(b, regions)

        try:
            major, minor, patch, draft = g.version
        except (TypeError, ValueError):
            raise _Bad(f"Graph.version {g.version!r} is not (major, minor, patch, draft)") from None
        if major != S.SUPPORTED_MAJOR_VERSION or not all(_is_int(v) for v in (major, minor, patch)):
            raise _Bad(f"Graph.version {g.version!r}: npu-bench writes TOSA {S.SUPPORTED_MAJOR_VERSION}.x")
        V = S.VersionSlots
        b.StartObject(V.COUNT)
        b.PrependInt32Slot(V.major, int(major), -1)
        b.PrependInt32Slot(V.minor, int(minor), -1)
        b.PrependInt32Slot(V.patch, int(patch), -1)
        b.PrependBoolSlot(V.draft, bool(draft), True)
        version = b.EndObject()

        SV = S.SoftwareVersionSlots
        modifier = b.CreateString("")
        b.StartObject(SV.COUNT)
        b.PrependInt32Slot(SV.major, S.SCHEMA_RELEASE[0], -1)
        b.PrependInt32Slot(SV.minor, S.SCHEMA_RELEASE[1], -1)
        b.PrependInt32Slot(SV.micro, S.SCHEMA_RELEASE[2], -1)
        b.PrependUOffsetTRelativeSlot(SV.modifier, modifier, 0)
        software_version = b.EndObject()

        b.StartObject(_G.COUNT)
        b.PrependUOffsetTRelativeSlot(_G.version, version, 0)
        b.PrependUOffsetTRelativeSlot(_G.regions, regions_vec, 0)
        b.PrependUOffsetTRelativeSlot(_G.software_version, software_version, 0)
        root = b.EndObject()
        b.Finish(root, S.FILE_IDENTIFIER)
        return bytes(b.Output())

    def _block(self, blk: Block) -> int:
        b = self.b
        tensors = blk.tensors
        for kind, names in (("input", blk.inputs), ("output", blk.outputs)):
            for name in names:
                if name not in tensors:
                    raise _Bad(f"block {kind} {_q(name)} is not a tensor of the block")
        ops = []
        for i, op in enumerate(blk.operators):
            try:
                ops.append(self._operator(op, tensors))
            except _Bad as e:
                raise _Bad(f"operator #{i} ({op.op}): {e}") from None
        ops_vec = _offset_vector(b, ops)
        tens, shapes = [], []
        for key, t in tensors.items():
            try:
                if key != t.name:
                    raise _Bad(f"is stored under the key {_q(key)}")
                if t.dtype == DType.SHAPE:
                    shapes.append(self._shape(t))
                else:
                    tens.append(self._tensor(t))
            except _Bad as e:
                raise _Bad(f"tensor {_q(t.name)}: {e}") from None
        tens_vec = _offset_vector(b, tens)
        shapes_vec = _offset_vector(b, shapes)
        inputs = _string_vector(b, blk.inputs)
        outputs = _string_vector(b, blk.outputs)
        name = b.CreateString(blk.name)
        b.StartObject(_B.COUNT)
        b.PrependUOffsetTRelativeSlot(_B.name, name, 0)
        b.PrependUOffsetTRelativeSlot(_B.operators, ops_vec, 0)
        b.PrependUOffsetTRelativeSlot(_B.tensors, tens_vec, 0)
        b.PrependUOffsetTRelativeSlot(_B.inputs, inputs, 0)
        b.PrependUOffsetTRelativeSlot(_B.outputs, outputs, 0)
        b.PrependUOffsetTRelativeSlot(_B.shapes, shapes_vec, 0)
        return b.EndObject()

    # -- tensors --------------------------------------------------------------------------

    @staticmethod
    def _data(t: Tensor) -> bytes | None:
        if t.data is None:
            return None
        if t.is_unranked or not t.is_static:
            raise _Bad(f"has data but its shape {t.shape} is not static")
        count = t.num_elements
        if np.size(t.data) != count:
            raise _Bad(f"has {np.size(t.data)} data elements, its shape {t.shape} holds {count}")
        if count == 0:
            return None
        return _pad8(encode_values(t.data, t.dtype))

    def _tensor(self, t: Tensor) -> int:
        b = self.b
        if not isinstance(t.dtype, DType) or t.dtype == DType.UNKNOWN:
            raise _Bad(f"element type {t.dtype!r} is not a TOSA DType")
        for d in t.shape:
            if not _is_int(d) or d < -1:
                raise _Bad(f"dimension {d!r} in shape {t.shape} (only -1, unknown, may be negative)")
        raw = self._data(t)
        name = b.CreateString(t.name)
        shape = _int32_vector(b, t.shape, "shape")
        vname = b.CreateString(t.variable_name) if t.variable_name is not None else None
        data = _byte_vector(b, raw) if raw is not None else None
        b.StartObject(_T.COUNT)
        b.PrependUOffsetTRelativeSlot(_T.name, name, 0)
        b.PrependUOffsetTRelativeSlot(_T.shape, shape, 0)
        b.PrependUint32Slot(_T.type, int(t.dtype), 0)
        if data is not None:
            b.PrependUOffsetTRelativeSlot(_T.data, data, 0)
        b.PrependBoolSlot(_T.variable, bool(t.is_variable), False)
        b.PrependBoolSlot(_T.is_unranked, bool(t.is_unranked), False)
        if vname is not None:
            b.PrependUOffsetTRelativeSlot(_T.variable_name, vname, 0)
        return b.EndObject()

    def _shape(self, t: Tensor) -> int:
        b = self.b
        if len(t.shape) != 1 or not _is_int(t.shape[0]) or t.shape[0] < 0:
            raise _Bad(f"a SHAPE tensor has shape [rank], not {t.shape}")
        if t.is_variable or t.is_unranked:
            raise _Bad("a SHAPE tensor cannot be a variable or unranked")
        raw = self._data(t)
        name = b.CreateString(t.name)
        data = _byte_vector(b, raw) if raw is not None else None
        b.StartObject(_SH.COUNT)
        b.PrependUOffsetTRelativeSlot(_SH.name, name, 0)
        b.PrependUint32Slot(_SH.rank, int(t.shape[0]), 0)
        if data is not None:
            b.PrependUOffsetTRelativeSlot(_SH.data, data, 0)
        return b.EndObject()

    # -- operators ------------------------------------------------------------------------

    def _operator(self, op: Operator, tensors: dict[str, Tensor]) -> int:
        b = self.b
        code = S.OP_VALUE.get(op.op, 0)
        if code == 0:
            raise _Bad(f"{op.op!r} is not a TOSA op")
        kind = op.attr_kind or S.expected_attribute(op.op)
        if kind not in S.allowed_attributes(op.op):
            raise _Bad(f"cannot carry a {kind} (expected {S.expected_attribute(op.op)})")

        def lookup(name: str) -> Tensor:
            t = tensors.get(name) or self.variables.get(name)
            if t is None:
                raise _Bad(f"{_q(name)} is not a tensor of the block")
            return t

        for name in (*op.inputs, *op.outputs):
            lookup(name)
        attribute = self._attribute(op, kind, lookup)
        inputs = _string_vector(b, op.inputs)
        outputs = _string_vector(b, op.outputs)
        location = None
        if op.location is not None:
            text = b.CreateString(op.location)
            b.StartObject(S.OpLocationSlots.COUNT)
            b.PrependUOffsetTRelativeSlot(S.OpLocationSlots.text, text, 0)
            location = b.EndObject()
        b.StartObject(_O.COUNT)
        b.PrependUint32Slot(_O.op, code, 0)
        b.PrependUint8Slot(_O.attribute_type, S.ATTRIBUTE_VALUE[kind], 0)
        b.PrependUOffsetTRelativeSlot(_O.attribute, attribute, 0)
        b.PrependUOffsetTRelativeSlot(_O.inputs, inputs, 0)
        b.PrependUOffsetTRelativeSlot(_O.outputs, outputs, 0)
        if location is not None:
            b.PrependUOffsetTRelativeSlot(_O.location, location, 0)
        return b.EndObject()

    def _attribute(self, op: Operator, kind: str, lookup) -> int:
        b = self.b
        fields = S.ATTRIBUTE_FIELDS[kind]
        known = {f.name for f in fields}
        for key in op.attrs:
            if key not in known:
                raise _Bad(f"attribute {key!r} is not a field of {kind}")
        # Offsets (vectors, strings) first: a table is built without nesting.
        offsets: dict[str, int] = {}
        for f in fields:
            if f.name not in op.attrs:
                raise _Bad(f"attribute {f.name!r} of {kind} is missing")
            v = op.attrs[f.name]
            if f.kind == "[int32]":
                offsets[f.name] = _int32_vector(b, v, f"attribute {f.name}")
            elif f.kind == "string":
                if not isinstance(v, str):
                    raise _Bad(f"attribute {f.name}: {v!r} is not a string")
                offsets[f.name] = b.CreateString(v)
            elif f.kind == "[ubyte]":
                if f.value:
                    if not op.inputs:
                        raise _Bad(f"attribute {f.name} takes the input's type, but the op has no input")
                    dtype = lookup(op.inputs[0]).dtype
                    try:
                        raw = _pad8(encode_values(np.asarray([v]), dtype))
                    except _Bad as e:
                        raise _Bad(f"attribute {f.name} = {v!r}: {e}") from None
                else:
                    if not isinstance(v, (bytes, bytearray)):
                        raise _Bad(f"attribute {f.name}: {v!r} is not bytes")
                    raw = bytes(v)
                offsets[f.name] = _byte_vector(b, raw)
        b.StartObject(len(fields))
        for slot, f in enumerate(fields):
            v = op.attrs[f.name]
            if f.name in offsets:
                b.PrependUOffsetTRelativeSlot(slot, offsets[f.name], 0)
            elif f.kind == "bool":
                if not isinstance(v, (bool, np.bool_)) and v not in (0, 1):
                    raise _Bad(f"attribute {f.name}: {v!r} is not a bool")
                b.PrependBoolSlot(slot, bool(v), False)
            elif f.kind == "int32":
                if not _is_int(v) or not _I32_MIN <= int(v) <= _I32_MAX:
                    raise _Bad(f"attribute {f.name}: {v!r} is not an int32")
                b.PrependInt32Slot(slot, int(v), 0)
            else:
                if not _is_int(v) or int(v) not in S.ENUM_NAMES[f.enum]:
                    raise _Bad(f"attribute {f.name}: {v!r} is not a {f.enum} value")
                b.PrependUint32Slot(slot, int(v), 0)
        return b.EndObject()


def _build(graph: Graph, dest: str) -> bytes:
    try:
        return _GraphWriter(graph).build()
    except _Bad as e:
        raise TosaFormatError(dest, f"cannot write the graph: {e}") from None


def tosa_bytes(graph: Graph) -> bytes:
    """The graph as a TOSA flatbuffer. Errors name `graph.source`."""
    return _build(graph, graph.source)


def write_tosa(graph: Graph, path: str | os.PathLike) -> None:
    """Write the graph to `path` as a .tosa flatbuffer."""
    data = _build(graph, str(path))
    try:
        Path(path).write_bytes(data)
    except OSError as e:
        raise TosaFormatError(str(path), f"cannot write the file: {e.strerror or e}") from None
