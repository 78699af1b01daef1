"""Reading TOSA 1.x flatbuffers (`.tosa`) into the graph IR.

The reader walks the flatbuffer with `flatbuffers.table.Table` and the slot numbers of
`schema.py`. The flatbuffers runtime does no bounds checking, so every access goes through
`_CheckedTable`, which validates each vtable, field, offset and vector length against the size of
the buffer before reading it. Offsets in a flatbuffer point forward (uoffsets are unsigned) and the
schema's nesting is fixed, so the walk cannot loop or recurse without bound.

Whatever is wrong with a file ends as one `TosaFormatError(path, problem)` naming where in the
graph the problem is: a truncated buffer, a wrong identifier, offsets or vectors out of range,
unknown op codes, element types or attribute tables, data that does not fit the tensor's shape,
operators referring to tensors the block does not define, block inputs/outputs that are not tensors.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from flatbuffers import number_types as N
from flatbuffers.table import Table

from compiler.errors import TosaFormatError
from compiler.ir import Block, Graph, Operator, Region, Tensor
from compiler.tosa_io import schema as S
from firmware_model.tosa_ops.dtypes import DType

_U8 = N.Uint8Flags.packer_type.unpack_from
_U16 = N.Uint16Flags.packer_type.unpack_from
_I32 = N.Int32Flags.packer_type.unpack_from
_U32 = N.Uint32Flags.packer_type.unpack_from
_U64 = N.Uint64Flags.packer_type.unpack_from

_DTYPES = {int(d): d for d in DType}
_ENUM_NAMES = S.ENUM_NAMES

_T, _B, _R, _O, _G, _SH = (S.TosaTensorSlots, S.TosaBasicBlockSlots, S.TosaRegionSlots,
                           S.TosaOperatorSlots, S.TosaGraphSlots, S.TosaShapeSlots)

_MAX_NAME_IN_MESSAGE = 60


class _Bad(Exception):
    """A problem found in the buffer. The reader prefixes where it was found and turns it into a
    TosaFormatError naming the file."""


class _PastEnd(_Bad):
    """Something the buffer refers to lies beyond its end: the usual sign of a file cut short
    (a flatbuffer is written back to front, so a truncation loses what early tables point to)."""


def _q(name: str) -> str:
    """A name from the file, quoted for a one-line message (newlines and the like escaped)."""
    if len(name) > _MAX_NAME_IN_MESSAGE:
        name = name[:_MAX_NAME_IN_MESSAGE] + "..."
    return repr(name)


def _round8(n: int) -> int:
    return (n + 7) & ~7


class _Budget:
    """How many bytes of tables and vectors the reader may still visit.

    Offsets may share data (many slots pointing at the same table or vector), so a small file
    could make a naive reader expand it without bound. A real file visits each byte about once;
    the reader stops at 16 times the file's size plus 4 MB.
    """

    __slots__ = ("left",)

    def __init__(self, n: int):
        self.left = 16 * n + (4 << 20)

    def spend(self, nbytes: int) -> None:
        self.left -= nbytes
        if self.left < 0:
            raise _Bad("the file's offsets refer to the same data over and over (more than 16 times "
                       "the file's size): refusing to expand it")


class _CheckedTable(Table):
    """A flatbuffers table whose every access is checked against the buffer.

    Construction validates the table's position, its vtable and the object size the vtable
    declares; field accessors validate the field's place inside the object and every offset,
    string and vector they follow, and charge what they visit to the reader's budget.
    """

    __slots__ = ("_n", "_vt", "_vtsize", "_objsize", "_budget")

    def __init__(self, buf: bytes, pos: int, budget: _Budget):
        n = len(buf)
        if pos < 0:
            raise _Bad(f"a table at byte {pos} lies outside the buffer ({n} bytes)")
        if pos + 4 > n:
            raise _PastEnd(f"a table at byte {pos} lies outside the buffer ({n} bytes)")
        Table.__init__(self, buf, pos)
        vt = pos - _I32(buf, pos)[0]
        if vt < 0 or vt + 4 > n:
            raise (_Bad if vt < 0 else _PastEnd)(f"the vtable of the table at byte {pos} lies outside the buffer ({n} bytes)")
        vtsize = _U16(buf, vt)[0]
        objsize = _U16(buf, vt + 2)[0]
        if vtsize < 4 or vtsize & 1 or vt + vtsize > n:
            raise _Bad(f"the vtable at byte {vt} has an impossible size {vtsize}")
        if objsize < 4 or pos + objsize > n:
            raise _PastEnd(f"the table at byte {pos} (size {objsize}) runs past the end of the buffer ({n} bytes)")
        self._n = n
        self._vt = vt
        self._vtsize = vtsize
        self._objsize = objsize
        self._budget = budget
        budget.spend(objsize)

    # -- fields ---------------------------------------------------------------------------

    def _field(self, slot: int, size: int) -> int | None:
        """Absolute position of the field in `slot` (None if absent), checked to lie inside the table."""
        vo = 4 + 2 * slot
        if vo >= self._vtsize:
            return None
        off = _U16(self.Bytes, self._vt + vo)[0]
        if off == 0:
            return None
        if off < 4 or off + size > self._objsize:
            raise _Bad(f"field {slot} of the table at byte {self.Pos} lies outside the table")
        return self.Pos + off

    def u8(self, slot: int, default: int = 0) -> int:
        p = self._field(slot, 1)
        return default if p is None else _U8(self.Bytes, p)[0]

    def boolean(self, slot: int, default: bool = False) -> bool:
        p = self._field(slot, 1)
        return default if p is None else _U8(self.Bytes, p)[0] != 0

    def i32(self, slot: int, default: int = 0) -> int:
        p = self._field(slot, 4)
        return default if p is None else _I32(self.Bytes, p)[0]

    def u32(self, slot: int, default: int = 0) -> int:
        p = self._field(slot, 4)
        return default if p is None else _U32(self.Bytes, p)[0]

    def u64(self, slot: int, default: int = 0) -> int:
        p = self._field(slot, 8)
        return default if p is None else _U64(self.Bytes, p)[0]

    def _follow(self, at: int) -> int:
        """The position a uoffset stored at `at` points to, checked to leave room for a length
        or vtable offset."""
        target = at + _U32(self.Bytes, at)[0]
        if target + 4 > self._n:
            raise _PastEnd(f"an offset at byte {at} points to byte {target}, beyond the end of the buffer "
                       f"({self._n} bytes)")
        return target

    def _vector_at(self, target: int, elem_size: int) -> tuple[int, int]:
        length = _U32(self.Bytes, target)[0]
        start = target + 4
        if start + length * elem_size > self._n:
            raise _PastEnd(f"a vector of {length} elements at byte {target} runs past the end of the buffer "
                       f"({self._n} bytes)")
        self._budget.spend(4 + length * elem_size)
        return start, length

    def vector(self, slot: int, elem_size: int) -> tuple[int, int] | None:
        """(start, length) of the vector in `slot`, or None if absent."""
        p = self._field(slot, 4)
        if p is None:
            return None
        return self._vector_at(self._follow(p), elem_size)

    def _string_at(self, target: int) -> str:
        start, length = self._vector_at(target, 1)
        if start + length >= self._n or self.Bytes[start + length] != 0:
            raise _Bad(f"the string at byte {target} has no terminating zero byte (truncated?)")
        try:
            return self.Bytes[start:start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"the string at byte {target} is not valid UTF-8") from None

    def string(self, slot: int) -> str | None:
        p = self._field(slot, 4)
        return None if p is None else self._string_at(self._follow(p))

    def table(self, slot: int) -> "_CheckedTable | None":
        p = self._field(slot, 4)
        return None if p is None else _CheckedTable(self.Bytes, self._follow(p), self._budget)

    def tables(self, slot: int) -> list["_CheckedTable"]:
        v = self.vector(slot, 4)
        if v is None:
            return []
        start, length = v
        return [_CheckedTable(self.Bytes, self._follow(start + 4 * i), self._budget) for i in range(length)]

    def strings(self, slot: int) -> list[str]:
        v = self.vector(slot, 4)
        if v is None:
            return []
        start, length = v
        return [self._string_at(self._follow(start + 4 * i)) for i in range(length)]

    def int32s(self, slot: int) -> list[int] | None:
        v = self.vector(slot, 4)
        if v is None:
            return None
        start, length = v
        return list(np.frombuffer(self.Bytes, "<i4", length, start).tolist())

    def ubytes(self, slot: int) -> bytes | None:
        v = self.vector(slot, 1)
        if v is None:
            return None
        start, length = v
        return self.Bytes[start:start + length]


# ---------------------------------------------------------------------------------------------
# Element data

def _data_nbytes(dtype: DType, count: int) -> int:
    if dtype == DType.INT4:
        return (count + 1) // 2
    size = S.DATA_BYTES.get(dtype)
    if size is None:
        raise _Bad(f"constant data of type {dtype.name} is not supported by npu-bench")
    return count * size


def decode_values(raw: bytes, dtype: DType, count: int) -> np.ndarray:
    """`count` elements of `dtype` from little-endian bytes (padded to 8 bytes at most) as a flat
    array in the type's storage type (`DType.storage`; numpy/ml_dtypes floats for float types)."""
    need = _data_nbytes(dtype, count)
    if len(raw) < need:
        raise _Bad(f"{len(raw)} bytes of data, {count} elements of {dtype.name} need {need}")
    if len(raw) > max(_round8(need), 8):  # (Arm's generator gives rank-0 shapes 8 bytes of data)
        raise _Bad(f"{len(raw)} bytes of data, more than the {need} bytes (padded to {_round8(need)}) "
                   f"that {count} elements of {dtype.name} take")
    if dtype == DType.INT8:
        return np.frombuffer(raw, np.int8, count).copy()
    if dtype == DType.INT16:
        return np.frombuffer(raw, "<i2", count).astype(np.int16)
    if dtype == DType.INT32:
        return np.frombuffer(raw, "<i4", count).astype(np.int32)
    if dtype in (DType.INT64, DType.SHAPE):
        return np.frombuffer(raw, "<i8", count).astype(np.int64)
    if dtype == DType.BOOL:
        return np.frombuffer(raw, np.uint8, count) != 0
    if dtype == DType.INT48:
        wide = np.zeros((count, 8), np.uint8)
        wide[:, :6] = np.frombuffer(raw, np.uint8, 6 * count).reshape(count, 6)
        v = wide.view("<i8").reshape(count).astype(np.int64)
        return (v << np.int64(16)) >> np.int64(16)
    if dtype == DType.INT4:
        b = np.frombuffer(raw, np.uint8, need)
        nibbles = np.empty(2 * need, np.uint8)
        nibbles[0::2] = b & 0xF
        nibbles[1::2] = b >> 4
        v = nibbles[:count].astype(np.int8)
        return (v ^ np.int8(8)) - np.int8(8)
    ftype = S.float_numpy_type(dtype)
    if ftype is None:  # pragma: no cover - DATA_BYTES and float_numpy_type list the same types
        raise _Bad(f"constant data of type {dtype.name} is not supported by npu-bench")
    return np.frombuffer(raw, ftype, count).copy()


def _element_count(shape: list[int]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


# ---------------------------------------------------------------------------------------------
# The graph

class _GraphReader:
    def __init__(self, buf: bytes, source: str):
        self.buf = buf
        self.source = source

    def read(self) -> Graph:
        buf = self.buf
        n = len(buf)
        if n == 0:
            raise _Bad("the file is empty")
        if n < 8:
            raise _Bad(f"only {n} bytes: too short for a TOSA flatbuffer (truncated?)")
        ident = buf[4:8]
        if ident != S.FILE_IDENTIFIER:
            raise _Bad(f"not a TOSA flatbuffer: the file identifier is {ident!r}, expected {S.FILE_IDENTIFIER!r}")
        root = _CheckedTable(buf, _U32(buf, 0)[0], _Budget(n))

        vt = root.table(_G.version)
        if vt is None:
            raise _Bad("the graph has no Version table")
        V = S.VersionSlots
        version = (vt.i32(V.major, -1), vt.i32(V.minor, -1), vt.i32(V.patch, -1), vt.boolean(V.draft, True))
        if version[0] != S.SUPPORTED_MAJOR_VERSION:
            raise _Bad(f"TOSA version {version[0]}.{version[1]}.{version[2]} is not supported "
                       f"(npu-bench reads TOSA {S.SUPPORTED_MAJOR_VERSION}.x files)")

        graph = Graph(regions=[], version=version, source=self.source)
        seen_regions: set[str] = set()
        for ri, rt in enumerate(root.tables(_G.regions)):
            try:
                name = rt.string(_R.name) or ""
                block_tables = rt.tables(_R.blocks)
            except _Bad as e:
                raise _Bad(f"region #{ri}: {e}") from None
            if name in seen_regions:
                raise _Bad(f"two regions are named {_q(name)}")
            seen_regions.add(name)
            region = Region(name=name)
            seen_blocks: set[str] = set()
            for bi, bt in enumerate(block_tables):
                try:
                    bname = bt.string(_B.name) or ""
                except _Bad as e:
                    raise _Bad(f"region {_q(name)} block #{bi}: {e}") from None
                where = f"block {_q(bname)}" if name == bname else f"region {_q(name)} block {_q(bname)}"
                if bname in seen_blocks:
                    raise _Bad(f"region {_q(name)} has two blocks named {_q(bname)}")
                seen_blocks.add(bname)
                try:
                    region.blocks.append(self._block(bt, bname))
                except _Bad as e:
                    raise _Bad(f"{where}: {e}") from None
            graph.regions.append(region)

        if not any(r.name == "main" and any(b.name == "main" for b in r.blocks) for r in graph.regions):
            raise _Bad("the graph has no 'main' block in a 'main' region (the entry point)")
        self._check_references(graph)
        return graph

    # -- blocks ---------------------------------------------------------------------------

    def _block(self, bt: _CheckedTable, name: str) -> Block:
        block = Block(name=name)
        tensors = block.tensors
        for i, tt in enumerate(bt.tables(_B.tensors)):
            t = self._tensor(tt, i, tensors)
            tensors[t.name] = t
        for i, st in enumerate(bt.tables(_B.shapes)):
            t = self._shape(st, i, tensors)
            tensors[t.name] = t
        for i, ot in enumerate(bt.tables(_B.operators)):
            block.operators.append(self._operator(ot, i))
        block.inputs = bt.strings(_B.inputs)
        block.outputs = bt.strings(_B.outputs)
        return block

    def _tensor(self, tt: _CheckedTable, index: int, seen: dict) -> Tensor:
        try:
            name = tt.string(_T.name)
        except _Bad as e:
            raise _Bad(f"tensor #{index}: {e}") from None
        if not name:
            raise _Bad(f"tensor #{index} has no name")
        if name in seen:
            raise _Bad(f"two tensors are named {_q(name)}")
        try:
            shape = tt.int32s(_T.shape) or []
            for d in shape:
                if d < -1:
                    raise _Bad(f"dimension {d} in shape {shape} (only -1, unknown, may be negative)")
            code = tt.u32(_T.type, 0)
            dtype = _DTYPES.get(code)
            if dtype is None or dtype == DType.UNKNOWN:
                raise _Bad(f"unknown element type (DType value {code})")
            variable = tt.boolean(_T.variable)
            is_unranked = tt.boolean(_T.is_unranked)
            variable_name = tt.string(_T.variable_name)
            if not variable and not variable_name:
                variable_name = None  # writers leave an empty name on ordinary tensors
            if tt.u64(_T.offset) > 1 or tt.u64(_T.size) != 0:
                raise _Bad("data stored outside the flatbuffer (offset/size) is not supported")
            scale_data = tt.vector(_T.scale_data, 1)
            if (tt.u32(_T.scale_type) != 0 or (scale_data is not None and scale_data[1] != 0)
                    or tt.u32(_T.block_shape) != 0 or tt.u64(_T.scale_offset) != 0 or tt.u64(_T.scale_size) != 0):
                raise _Bad("block-scaled tensors (scale_type/scale_data/block_shape) are not supported")
            raw = tt.ubytes(_T.data)
            data = None
            if raw:  # writers leave an empty vector on tensors without data
                if is_unranked or any(d < 0 for d in shape):
                    raise _Bad(f"has data but its shape {shape} is not static")
                data = decode_values(raw, dtype, _element_count(shape)).reshape(shape)
        except _Bad as e:
            raise _Bad(f"tensor {_q(name)}: {e}") from None
        return Tensor(name=name, shape=shape, dtype=dtype, data=data, is_variable=variable,
                      variable_name=variable_name, is_unranked=is_unranked)

    def _shape(self, st: _CheckedTable, index: int, seen: dict) -> Tensor:
        """A TosaShape (a value of type shape_t) becomes a SHAPE tensor of shape [rank]."""
        try:
            name = st.string(_SH.name)
        except _Bad as e:
            raise _Bad(f"shape #{index}: {e}") from None
        if not name:
            raise _Bad(f"shape #{index} has no name")
        if name in seen:
            raise _Bad(f"a shape and another tensor or shape are both named {_q(name)}")
        try:
            rank = st.u32(_SH.rank, 0)
            raw = st.ubytes(_SH.data)
            data = None
            if raw:
                data = decode_values(raw, DType.SHAPE, rank)
        except _Bad as e:
            raise _Bad(f"shape {_q(name)}: {e}") from None
        return Tensor(name=name, shape=[rank], dtype=DType.SHAPE, data=data)

    # -- operators ------------------------------------------------------------------------

    def _operator(self, ot: _CheckedTable, index: int) -> Operator:
        try:
            code = ot.u32(_O.op, 0)
            if code == 0 or code >= len(S.OPS):
                raise _Bad(f"unknown op code {code}")
            op = S.OPS[code]
        except _Bad as e:
            raise _Bad(f"operator #{index}: {e}") from None
        try:
            akind_code = ot.u8(_O.attribute_type, 0)
            if akind_code >= len(S.ATTRIBUTES):
                raise _Bad(f"unknown attribute type {akind_code}")
            expected = S.expected_attribute(op)
            if akind_code == 0:
                kind = expected
                table = None
            else:
                kind = S.ATTRIBUTES[akind_code]
                if kind not in S.allowed_attributes(op):
                    raise _Bad(f"carries a {kind}, expected {expected}")
                table = ot.table(_O.attribute)
            fields = S.ATTRIBUTE_FIELDS[kind]
            if table is None and fields:
                raise _Bad(f"has no {kind} table")
            attrs = self._attributes(table, fields) if fields else {}
            inputs = ot.strings(_O.inputs)
            outputs = ot.strings(_O.outputs)
            loc = ot.table(_O.location)
            location = loc.string(S.OpLocationSlots.text) if loc is not None else None
        except _Bad as e:
            raise _Bad(f"operator #{index} ({op}): {e}") from None
        return Operator(op=op, inputs=inputs, outputs=outputs, attrs=attrs, attr_kind=kind, location=location)

    @staticmethod
    def _attributes(table: _CheckedTable, fields) -> dict:
        attrs = {}
        for slot, f in enumerate(fields):
            kind = f.kind
            if kind == "int32":
                attrs[f.name] = table.i32(slot, 0)
            elif kind == "bool":
                attrs[f.name] = table.boolean(slot)
            elif kind == "[int32]":
                attrs[f.name] = table.int32s(slot) or []
            elif kind == "[ubyte]":
                attrs[f.name] = table.ubytes(slot) or b""
            elif kind == "string":
                attrs[f.name] = table.string(slot) or ""
            else:
                enum = f.enum
                value = table.u32(slot, 0)
                if value not in _ENUM_NAMES[enum]:
                    raise _Bad(f"attribute {f.name}: unknown {enum} value {value}")
                attrs[f.name] = value
        return attrs

    # -- whole-graph checks ---------------------------------------------------------------

    def _check_references(self, graph: Graph) -> None:
        """Every name an operator or block uses must be a tensor of its block (variables are
        visible from every block); value-carrying attributes are decoded with their input's type."""
        variables = {t.name: t for b in graph.blocks() for t in b.tensors.values() if t.is_variable}
        graph_names = {r.name for r in graph.regions} | {b.name for b in graph.blocks()}
        for region in graph.regions:
            for block in region.blocks:
                where = f"block {_q(block.name)}" if region.name == block.name else \
                    f"region {_q(region.name)} block {_q(block.name)}"
                tensors = block.tensors
                for kind, names in (("input", block.inputs), ("output", block.outputs)):
                    for name in names:
                        if name not in tensors:
                            raise _Bad(f"{where}: block {kind} {_q(name)} is not a tensor of the block")

                def lookup(name: str) -> Tensor | None:
                    t = tensors.get(name)
                    return t if t is not None else variables.get(name)

                for i, op in enumerate(block.operators):
                    try:
                        for role, names in (("input", op.inputs), ("output", op.outputs)):
                            for name in names:
                                if lookup(name) is None:
                                    raise _Bad(f"{role} {_q(name)} is not a tensor of the block")
                        self._check_operator(op, lookup, graph_names)
                    except _Bad as e:
                        raise _Bad(f"{where}: operator #{i} ({op.op}): {e}") from None

    @staticmethod
    def _check_operator(op: Operator, lookup, graph_names: set[str]) -> None:
        kind = op.attr_kind
        if op.op in ("CONST", "CONST_SHAPE"):
            if len(op.outputs) != 1:
                raise _Bad(f"a constant has 1 output, not {len(op.outputs)}")
            t = lookup(op.outputs[0])
            if t.data is None:
                if t.is_unranked or not t.is_static:
                    raise _Bad(f"output {_q(t.name)} has no data and no static shape")
                if t.num_elements != 0:
                    raise _Bad(f"output {_q(t.name)} has no data")
                try:
                    t.data = np.zeros(t.shape, decode_values(b"", t.dtype, 0).dtype)
                except ValueError:     # no elements, but dims numpy cannot index (2^31 x 2^31 x 0)
                    raise _Bad(f"output {_q(t.name)}: shape {list(t.shape)} is too large to hold") from None
        elif kind == S.VARIABLE_READ_ATTRIBUTE:
            if len(op.inputs) != 1 or len(op.outputs) != 1:
                raise _Bad(f"a variable read takes 1 input and 1 output, not {len(op.inputs)} and {len(op.outputs)}")
            if not lookup(op.inputs[0]).is_variable:
                raise _Bad(f"{kind} reads {_q(op.inputs[0])}, which is not a variable tensor")
        elif kind == S.VARIABLE_WRITE_ATTRIBUTE:
            if len(op.inputs) != 1 or len(op.outputs) != 1:
                raise _Bad(f"a variable write takes 1 input and 1 output, not {len(op.inputs)} and {len(op.outputs)}")
            if not lookup(op.outputs[0]).is_variable:
                raise _Bad(f"{kind} writes {_q(op.outputs[0])}, which is not a variable tensor")
        for f in S.ATTRIBUTE_FIELDS[kind]:
            if f.value:
                if not op.inputs:
                    raise _Bad(f"attribute {f.name} needs the op's input type, but the op has no input")
                dtype = lookup(op.inputs[0]).dtype
                try:
                    op.attrs[f.name] = decode_value(op.attrs[f.name], dtype)
                except _Bad as e:
                    raise _Bad(f"attribute {f.name}: {e}") from None
            elif f.name in S.GRAPH_REFERENCE_FIELDS:
                ref = op.attrs[f.name]
                if ref not in graph_names:
                    raise _Bad(f"attribute {f.name} names {_q(ref)}, which is no region or block of the graph")


def decode_value(raw: bytes, dtype: DType):
    """One value of `dtype` from its (padded) little-endian bytes, as a Python int (bool for
    BOOL, float for float types)."""
    v = decode_values(raw, dtype, 1)[0]
    return v.item() if hasattr(v, "item") else v


# ---------------------------------------------------------------------------------------------
# Entry points

def read_tosa_bytes(data: bytes, source: str = "<memory>") -> Graph:
    """Read a TOSA flatbuffer held in memory; `source` names it in error messages."""
    try:
        return _GraphReader(bytes(data), str(source)).read()
    except _PastEnd as e:
        raise TosaFormatError(str(source), f"truncated or damaged: {e}") from None
    except _Bad as e:
        raise TosaFormatError(str(source), str(e)) from None


def read_tosa(path: str | os.PathLike) -> Graph:
    """Read a .tosa file into a Graph (Graph.source = path)."""
    source = str(path)
    p = Path(path)
    if p.is_dir():
        raise TosaFormatError(source, "is a directory, not a .tosa file")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise TosaFormatError(source, "no such file") from None
    except OSError as e:
        raise TosaFormatError(source, f"cannot read the file: {e.strerror or e}") from None
    return read_tosa_bytes(data, source)
