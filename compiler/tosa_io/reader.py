"""Reading TOSA 1.x flatbuffers (`.tosa`) into the graph IR.

The reader walks the flatbuffer with the slot numbers of `schema.py` through `_CheckedTable`,
which validates each vtable (once per file: tables with the same layout share it), field, offset
and vector length against the size of the buffer before reading it. Offsets in a flatbuffer point forward (uoffsets are unsigned) and the
schema's nesting is fixed, so the walk cannot loop or recurse without bound.

Whatever is wrong with a file ends as one `TosaFormatError(path, problem)` naming where in the
graph the problem is: a truncated buffer, a wrong identifier, offsets or vectors out of range,
unknown op codes, element types or attribute tables, data that does not fit the tensor's shape,
operators referring to tensors the block does not define, block inputs/outputs that are not tensors.
"""

from __future__ import annotations

import errno
import os
from math import prod
import stat
import struct
from typing import Callable, NoReturn

import numpy as np
from flatbuffers import number_types as N

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

# By op code: the attribute table the schema pairs with the op, and the ones it may carry
_EXPECTED = tuple(S.expected_attribute(op) for op in S.OPS)
_ALLOWED = tuple(S.allowed_attributes(op) for op in S.OPS)
_LOCATION_TEXT = S.OpLocationSlots.text
# _check_operator has something to check for these ops and attribute tables only
_CONSTANT_OPS = frozenset({"CONST", "CONST_SHAPE"})
_CHECKED_KINDS = frozenset({S.VARIABLE_READ_ATTRIBUTE, S.VARIABLE_WRITE_ATTRIBUTE} | {
    kind for kind, fields in S.ATTRIBUTE_FIELDS.items()
    if any(f.value or f.name in S.GRAPH_REFERENCE_FIELDS for f in fields)})


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
    """How many bytes of tables and vectors the reader may still visit, and the vtables it has
    checked (by position: a writer shares one vtable among the tables with the same layout).

    Offsets may share data (many slots pointing at the same table or vector), so a small file
    could make a naive reader expand it without bound. A real file visits each byte about once;
    the reader stops at 16 times the file's size plus 4 MB.
    """

    __slots__ = ("left", "vtables")

    def __init__(self, n: int):
        self.left = 16 * n + (4 << 20)
        self.vtables: dict[int, tuple] = {}     # vtable position -> (field offsets, object size)

    def spend(self, nbytes: int) -> None:
        self.left -= nbytes
        if self.left < 0:
            self.overspent()

    @staticmethod
    def overspent():
        raise _Bad("the file's offsets refer to the same data over and over (more than 16 times "
                   "the file's size): refusing to expand it")


# unpack_from of k little-endian uint16 (vtable entries) or int32 (shapes, attribute lists), made
# once for each k up to 64 (the schema's tables have at most 14 fields)
_VT_ENTRIES: dict[int, Callable] = {}
_I32S: dict[int, Callable] = {}


def _vt_entries(k: int) -> Callable:
    f = _VT_ENTRIES.get(k)
    if f is None:
        f = struct.Struct(f"<{k}H").unpack_from
        if k <= 64:
            _VT_ENTRIES[k] = f
    return f


def _i32s(k: int) -> Callable:
    f = _I32S.get(k)
    if f is None:
        f = _I32S[k] = struct.Struct(f"<{k}i").unpack_from
    return f


_SLOTS = 16      # every table of the schema has fewer fields: a field's vtable entry is offs[slot]


class _CheckedTable:
    """A flatbuffers table whose every access is checked against the buffer.

    Construction validates the table's position, its vtable and the object size the vtable
    declares (a vtable once per file: its field offsets are kept); field accessors validate the
    field's place inside the object and every offset, string and vector they follow, and charge
    what they visit to the reader's budget. (The accessors look their field up themselves: a
    file has some hundred fields, and a call per step was most of the reading time.)
    """

    __slots__ = ("Bytes", "Pos", "_n", "_offs", "_objsize", "_budget")

    def __init__(self, buf: bytes, pos: int, budget: _Budget):
        n = len(buf)
        if pos < 0:
            raise _Bad(f"a table at byte {pos} lies outside the buffer ({n} bytes)")
        if pos + 4 > n:
            raise _PastEnd(f"a table at byte {pos} lies outside the buffer ({n} bytes)")
        self.Bytes = buf
        self.Pos = pos
        vt = pos - _I32(buf, pos)[0]
        known = budget.vtables.get(vt)
        if known is None:
            known = self._vtable(buf, pos, vt, budget)
        offs, objsize = known
        if pos + objsize > n:
            raise _PastEnd(f"the table at byte {pos} (size {objsize}) runs past the end of the buffer ({n} bytes)")
        self._n = n
        self._offs = offs
        self._objsize = objsize
        self._budget = budget
        budget.left -= objsize                  # budget.spend(objsize), inline
        if budget.left < 0:
            budget.overspent()

    @staticmethod
    def _vtable(buf: bytes, pos: int, vt: int, budget: _Budget) -> tuple:
        """The vtable at `vt` (of the table at `pos`), checked: (its field offsets, 0 for an absent
        field, at least _SLOTS of them; the object size)."""
        n = len(buf)
        if vt < 0 or vt + 4 > n:
            raise (_Bad if vt < 0 else _PastEnd)(f"the vtable of the table at byte {pos} lies outside the buffer ({n} bytes)")
        vtsize = _U16(buf, vt)[0]
        objsize = _U16(buf, vt + 2)[0]
        if vtsize < 4 or vtsize & 1 or vt + vtsize > n:
            raise _Bad(f"the vtable at byte {vt} has an impossible size {vtsize}")
        if objsize < 4:
            raise _PastEnd(f"the table at byte {pos} (size {objsize}) runs past the end of the buffer ({n} bytes)")
        k = (vtsize - 4) >> 1
        offs = _vt_entries(k)(buf, vt + 4)
        if k < _SLOTS:
            offs += (0,) * (_SLOTS - k)
        known = budget.vtables[vt] = (offs, objsize)
        return known

    # -- fields ---------------------------------------------------------------------------

    def _outside(self, slot: int) -> NoReturn:
        raise _Bad(f"field {slot} of the table at byte {self.Pos} lies outside the table")

    def _field(self, slot: int, size: int) -> int | None:
        """Absolute position of the field in `slot` (None if absent), checked to lie inside the table."""
        off = self._offs[slot]
        if off == 0:
            return None
        if off < 4 or off + size > self._objsize:
            self._outside(slot)
        return self.Pos + off

    def present(self, first: int, stop: int) -> bool:
        """Whether any field in slots first..stop-1 is present."""
        return any(self._offs[first:stop])

    def u8(self, slot: int, default: int = 0) -> int:
        off = self._offs[slot]                  # _field(slot, 1), inline (and in the accessors below)
        if off == 0:
            return default
        if off < 4 or off + 1 > self._objsize:
            self._outside(slot)
        return self.Bytes[self.Pos + off]

    def boolean(self, slot: int, default: bool = False) -> bool:
        off = self._offs[slot]
        if off == 0:
            return default
        if off < 4 or off + 1 > self._objsize:
            self._outside(slot)
        return self.Bytes[self.Pos + off] != 0

    def i32(self, slot: int, default: int = 0) -> int:
        off = self._offs[slot]
        if off == 0:
            return default
        if off < 4 or off + 4 > self._objsize:
            self._outside(slot)
        return _I32(self.Bytes, self.Pos + off)[0]

    def u32(self, slot: int, default: int = 0) -> int:
        off = self._offs[slot]
        if off == 0:
            return default
        if off < 4 or off + 4 > self._objsize:
            self._outside(slot)
        return _U32(self.Bytes, self.Pos + off)[0]

    def u64(self, slot: int, default: int = 0) -> int:
        off = self._offs[slot]
        if off == 0:
            return default
        if off < 4 or off + 8 > self._objsize:
            self._outside(slot)
        return _U64(self.Bytes, self.Pos + off)[0]

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
        budget = self._budget                   # budget.spend(4 + length * elem_size), inline
        budget.left -= 4 + length * elem_size
        if budget.left < 0:
            budget.overspent()
        return start, length

    def vector(self, slot: int, elem_size: int) -> tuple[int, int] | None:
        """(start, length) of the vector in `slot`, or None if absent."""
        off = self._offs[slot]
        if off == 0:
            return None
        if off < 4 or off + 4 > self._objsize:
            self._outside(slot)
        buf, n, at = self.Bytes, self._n, self.Pos + off
        target = at + _U32(buf, at)[0]          # _follow(at) and _vector_at(target, elem_size), inline
        if target + 4 > n:
            self._follow(at)
        length = _U32(buf, target)[0]
        start = target + 4
        if start + length * elem_size > n:
            self._vector_at(target, elem_size)
        budget = self._budget
        budget.left -= 4 + length * elem_size
        if budget.left < 0:
            budget.overspent()
        return start, length

    def _string_at(self, target: int) -> str:
        buf, n = self.Bytes, self._n
        length = _U32(buf, target)[0]           # _vector_at(target, 1), inline
        start = target + 4
        end = start + length
        if end > n:
            raise _PastEnd(f"a vector of {length} elements at byte {target} runs past the end of the buffer "
                           f"({n} bytes)")
        budget = self._budget
        budget.left -= 4 + length
        if budget.left < 0:
            budget.overspent()
        if end >= n or buf[end] != 0:
            raise _Bad(f"the string at byte {target} has no terminating zero byte (truncated?)")
        try:
            return buf[start:end].decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"the string at byte {target} is not valid UTF-8") from None

    def string(self, slot: int) -> str | None:
        off = self._offs[slot]
        if off == 0:
            return None
        if off < 4 or off + 4 > self._objsize:
            self._outside(slot)
        at = self.Pos + off
        target = at + _U32(self.Bytes, at)[0]   # _follow(at), inline
        if target + 4 > self._n:
            self._follow(at)
        return self._string_at(target)

    def table(self, slot: int) -> "_CheckedTable | None":
        off = self._offs[slot]
        if off == 0:
            return None
        if off < 4 or off + 4 > self._objsize:
            self._outside(slot)
        at = self.Pos + off
        target = at + _U32(self.Bytes, at)[0]   # _follow(at), inline
        if target + 4 > self._n:
            self._follow(at)
        return _CheckedTable(self.Bytes, target, self._budget)

    def tables(self, slot: int) -> list["_CheckedTable"]:
        v = self.vector(slot, 4)
        if v is None:
            return []
        start, length = v
        buf, n, budget = self.Bytes, self._n, self._budget
        found = []
        for at in range(start, start + 4 * length, 4):
            target = at + _U32(buf, at)[0]      # _follow(at), inline
            if target + 4 > n:
                self._follow(at)
            found.append(_CheckedTable(buf, target, budget))
        return found

    def strings(self, slot: int) -> list[str]:
        v = self.vector(slot, 4)
        if v is None:
            return []
        start, length = v
        buf, n = self.Bytes, self._n
        found = []
        for at in range(start, start + 4 * length, 4):
            target = at + _U32(buf, at)[0]      # _follow(at), inline
            if target + 4 > n:
                self._follow(at)
            found.append(self._string_at(target))
        return found

    def int32s(self, slot: int) -> list[int] | None:
        v = self.vector(slot, 4)
        if v is None:
            return None
        start, length = v
        if length <= 64:                        # a shape or an attribute's few values
            return list(_i32s(length)(self.Bytes, start))
        return np.frombuffer(self.Bytes, "<i4", length, start).tolist()

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


# bytes per element, file type and storage type of the integer types stored whole (astype copies
# the values out of the file's buffer, in native byte order)
_PLAIN = {DType.INT8: (1, np.int8, np.int8), DType.INT16: (2, "<i2", np.int16),
          DType.INT32: (4, "<i4", np.int32), DType.INT64: (8, "<i8", np.int64),
          DType.SHAPE: (8, "<i8", np.int64)}


def decode_values(raw: bytes, dtype: DType, count: int) -> np.ndarray:
    """`count` elements of `dtype` from little-endian bytes (padded to 8 bytes at most) as a flat
    array in the type's storage type (`DType.storage`; numpy/ml_dtypes floats for float types)."""
    size = _PLAIN.get(dtype)
    if size is not None:                    # the usual types, the checks below without calls
        need = count * size[0]
        if need <= len(raw) <= max((need + 7) & ~7, 8):
            return np.frombuffer(raw, size[1], count).astype(size[2])
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
    return prod(shape)


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
            if shape and min(shape) < -1:
                d = next(d for d in shape if d < -1)
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
            # (offset, size, scale_type, block_shape, scale_offset, scale_size: fields writers leave
            # out, looked at only when present; scale_data: an empty vector)
            if tt.present(_T.offset, _T.scale_type) and (tt.u64(_T.offset) > 1 or tt.u64(_T.size) != 0):
                raise _Bad("data stored outside the flatbuffer (offset/size) is not supported")
            scale_data = tt.vector(_T.scale_data, 1)
            if ((scale_data is not None and scale_data[1] != 0) or tt.present(_T.scale_type, _T.scale_data)
                    or tt.present(_T.block_shape, _T.COUNT)):
                if (tt.u32(_T.scale_type) != 0 or (scale_data is not None and scale_data[1] != 0)
                        or tt.u32(_T.block_shape) != 0 or tt.u64(_T.scale_offset) != 0 or tt.u64(_T.scale_size) != 0):
                    raise _Bad("block-scaled tensors (scale_type/scale_data/block_shape) are not supported")
            raw = tt.ubytes(_T.data)
            data = None
            if raw:  # writers leave an empty vector on tensors without data
                if is_unranked or (shape and min(shape) < 0):
                    raise _Bad(f"has data but its shape {shape} is not static")
                data = decode_values(raw, dtype, _element_count(shape)).reshape(shape)
        except _Bad as e:
            raise _Bad(f"tensor {_q(name)}: {e}") from None
        return Tensor(name, shape, dtype, data, variable, variable_name, is_unranked)

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
            if akind_code == 0:
                kind = _EXPECTED[code]
                table = None
            else:
                kind = S.ATTRIBUTES[akind_code]
                if kind not in _ALLOWED[code]:
                    raise _Bad(f"carries a {kind}, expected {_EXPECTED[code]}")
                table = ot.table(_O.attribute)
            fields = S.ATTRIBUTE_FIELDS[kind]
            if table is None and fields:
                raise _Bad(f"has no {kind} table")
            attrs = self._attributes(table, fields) if fields else {}
            inputs = ot.strings(_O.inputs)
            outputs = ot.strings(_O.outputs)
            loc = ot.table(_O.location)
            location = loc.string(_LOCATION_TEXT) if loc is not None else None
        except _Bad as e:
            raise _Bad(f"operator #{index} ({op}): {e}") from None
        return Operator(op, inputs, outputs, attrs, kind, location)

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
                def where() -> str:
                    return f"block {_q(block.name)}" if region.name == block.name else \
                        f"region {_q(region.name)} block {_q(block.name)}"
                tensors = block.tensors
                for kind, names in (("input", block.inputs), ("output", block.outputs)):
                    for name in names:
                        if name not in tensors:
                            raise _Bad(f"{where()}: block {kind} {_q(name)} is not a tensor of the block")

                def lookup(name: str) -> Tensor | None:
                    t = tensors.get(name)
                    return t if t is not None else variables.get(name)

                for i, op in enumerate(block.operators):
                    try:
                        for role, names in (("input", op.inputs), ("output", op.outputs)):
                            for name in names:
                                if name not in tensors and name not in variables:   # lookup(name) is None
                                    raise _Bad(f"{role} {_q(name)} is not a tensor of the block")
                        if op.op in _CONSTANT_OPS or op.attr_kind in _CHECKED_KINDS:
                            self._check_operator(op, lookup, graph_names)
                    except _Bad as e:
                        raise _Bad(f"{where()}: operator #{i} ({op.op}): {e}") from None

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
    try:
        data = _read_file(path)
    except FileNotFoundError:
        raise TosaFormatError(source, "no such file") from None
    except IsADirectoryError:
        raise TosaFormatError(source, "is a directory, not a .tosa file") from None
    except OSError as e:
        raise TosaFormatError(source, f"cannot read the file: {e.strerror or e}") from None
    return read_tosa_bytes(data, source)


def _read_file(path: str | os.PathLike) -> bytes:
    """The file's bytes, by one open, fstat and read (Path.read_bytes takes three times as long
    on a small file); IsADirectoryError for a directory."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        size = st.st_size
        data = os.read(fd, size + 1) if size < (1 << 30) else b""
        if len(data) != size:                   # a short read, a file that changed, a large one
            chunks = [data]
            while True:
                more = os.read(fd, 1 << 24)
                if not more:
                    break
                chunks.append(more)
            data = b"".join(chunks)
        return data
    finally:
        os.close(fd)
