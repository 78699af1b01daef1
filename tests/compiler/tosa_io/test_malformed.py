"""Malformed .tosa input: every defect gives one TosaFormatError naming the file and the problem in
one line — never an IndexError, struct.error, RecursionError, a hang or a silently wrong graph.

Broken files are built here with flatbuffers and tosa-tools' generated `tosa` modules (which do
not check what they write), or by patching bytes of real files written by `tosa-opt`.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
import tosa.ClampAttribute as ClampAttr
import tosa.CondIfAttribute as CondIfAttr
import tosa.Conv2dAttribute as Conv2dAttr
import tosa.OpLocation as OpLocation
import tosa.TosaBasicBlock as TBlock
import tosa.TosaGraph as TGraph
import tosa.TosaOperator as TOp
import tosa.TosaRegion as TRegion
import tosa.TosaTensor as TTensor
import tosa.Version as TVersion

from compiler.errors import TosaFormatError
from compiler.ir import Graph
from compiler.tosa_io import read_tosa, read_tosa_bytes, tosa_bytes
from compiler.tosa_io import schema as S
from firmware_model.tosa_ops.dtypes import DType

OP = S.OP_VALUE
ATTR = S.ATTRIBUTE_VALUE
SOURCE = "bad.tosa"


# ---------------------------------------------------------------------------------------------
# A raw TOSA flatbuffer builder that writes whatever it is told (including nonsense)

def _string_vector(b, strings, start):
    offs = [b.CreateString(s) for s in strings]
    start(b, len(offs))
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _table_vector(b, offsets, start):
    start(b, len(offsets))
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _empty_table(b):
    b.StartObject(0)
    return b.EndObject()


def tensor(name, shape, dtype, data=None, **extra) -> dict:
    return dict(name=name, shape=shape, type=int(dtype), data=data, **extra)


def op(code, inputs, outputs, attr_type=None, attr=None) -> dict:
    return dict(op=code, inputs=inputs, outputs=outputs,
                attr_type=code if attr_type is None else attr_type, attr=attr)


def raw_tosa(tensors, ops, inputs, outputs, *, blocks=None, version=(1, 1, 0, True),
             identifier=b"TOSA", with_version=True) -> bytes:
    """A TosaGraph with one region `main` holding block `main` (plus `blocks`: extra regions,
    each [(region name, block name, tensors, ops, inputs, outputs)])."""
    b = flatbuffers.Builder(1024)

    def block(name, tensors, ops, inputs, outputs):
        t_offs = []
        for t in tensors:
            name_off = b.CreateString(t["name"]) if t["name"] is not None else None
            shape_off = b.CreateNumpyVector(np.asarray(t["shape"], np.int32))
            data_off = b.CreateByteVector(bytes(t["data"])) if t["data"] is not None else None
            vname_off = b.CreateString(t["variable_name"]) if t.get("variable_name") else None
            TTensor.Start(b)
            if name_off is not None:
                TTensor.AddName(b, name_off)
            TTensor.AddShape(b, shape_off)
            TTensor.AddType(b, t["type"])
            if data_off is not None:
                TTensor.AddData(b, data_off)
            TTensor.AddVariable(b, bool(t.get("variable", False)))
            if vname_off is not None:
                TTensor.AddVariableName(b, vname_off)
            if "offset" in t:
                TTensor.AddOffset(b, t["offset"])
            t_offs.append(TTensor.End(b))
        o_offs = []
        for o in ops:
            ins = _string_vector(b, o["inputs"], TOp.StartInputsVector)
            outs = _string_vector(b, o["outputs"], TOp.StartOutputsVector)
            attr = o["attr"](b) if o["attr"] else _empty_table(b)
            text = b.CreateString("loc(test)")
            OpLocation.Start(b)
            OpLocation.AddText(b, text)
            loc = OpLocation.End(b)
            TOp.Start(b)
            TOp.AddOp(b, o["op"])
            TOp.AddAttributeType(b, o["attr_type"])
            TOp.AddAttribute(b, attr)
            TOp.AddInputs(b, ins)
            TOp.AddOutputs(b, outs)
            TOp.AddLocation(b, loc)
            o_offs.append(TOp.End(b))
        tv = _table_vector(b, t_offs, TBlock.StartTensorsVector)
        ov = _table_vector(b, o_offs, TBlock.StartOperatorsVector)
        iv = _string_vector(b, inputs, TBlock.StartInputsVector)
        outv = _string_vector(b, outputs, TBlock.StartOutputsVector)
        nm = b.CreateString(name)
        TBlock.Start(b)
        TBlock.AddName(b, nm)
        TBlock.AddOperators(b, ov)
        TBlock.AddTensors(b, tv)
        TBlock.AddInputs(b, iv)
        TBlock.AddOutputs(b, outv)
        return TBlock.End(b)

    def region(name, block_offs):
        bv = _table_vector(b, block_offs, TRegion.StartBlocksVector)
        nm = b.CreateString(name)
        TRegion.Start(b)
        TRegion.AddName(b, nm)
        TRegion.AddBlocks(b, bv)
        return TRegion.End(b)

    regions = [region("main", [block("main", tensors, ops, inputs, outputs)])]
    for rname, bname, *rest in blocks or []:
        regions.append(region(rname, [block(bname, *rest)]))
    rv = _table_vector(b, regions, TGraph.StartRegionsVector)
    ver = None
    if with_version:
        TVersion.Start(b)
        TVersion.Add_Major(b, version[0])
        TVersion.Add_Minor(b, version[1])
        TVersion.Add_Patch(b, version[2])
        TVersion.Add_Draft(b, version[3])
        ver = TVersion.End(b)
    TGraph.Start(b)
    if ver is not None:
        TGraph.AddVersion(b, ver)
    TGraph.AddRegions(b, rv)
    b.Finish(TGraph.End(b), identifier)
    return bytes(b.Output())


def _i8(*values) -> bytes:
    return np.array(values, np.int8).tobytes()


def _clamp(lo: bytes, hi: bytes):
    def build(b):
        lo_off = b.CreateByteVector(lo)
        hi_off = b.CreateByteVector(hi)
        ClampAttr.Start(b)
        ClampAttr.AddMinVal(b, lo_off)
        ClampAttr.AddMaxVal(b, hi_off)
        return ClampAttr.End(b)
    return build


def _conv_attr(acc_type: int):
    def build(b):
        vecs = [b.CreateNumpyVector(np.array(v, np.int32)) for v in ([0, 0, 0, 0], [1, 1], [1, 1])]
        Conv2dAttr.Start(b)
        Conv2dAttr.AddPad(b, vecs[0])
        Conv2dAttr.AddStride(b, vecs[1])
        Conv2dAttr.AddDilation(b, vecs[2])
        Conv2dAttr.AddAccType(b, acc_type)
        return Conv2dAttr.End(b)
    return build


def _cond_attr(then_graph: str, else_graph: str):
    def build(b):
        t, e = b.CreateString(then_graph), b.CreateString(else_graph)
        CondIfAttr.Start(b)
        CondIfAttr.AddThenGraph(b, t)
        CondIfAttr.AddElseGraph(b, e)
        return CondIfAttr.End(b)
    return build


def good_parts():
    """A valid graph: CONST c; y = CLAMP(x); z = IDENTITY(c)."""
    tensors = [tensor("x", [2, 3], DType.INT8), tensor("y", [2, 3], DType.INT8),
               tensor("c", [3], DType.INT8, _i8(1, 2, 3) + bytes(5)), tensor("z", [3], DType.INT8)]
    ops = [op(OP["CONST"], [], ["c"]),
           op(OP["CLAMP"], ["x"], ["y"], attr=_clamp(_i8(-5) + bytes(7), _i8(9) + bytes(7))),
           op(OP["IDENTITY"], ["c"], ["z"])]
    return tensors, ops, ["x"], ["y", "z"]


def assert_format_error(data: bytes, *fragments: str, source: str = SOURCE) -> str:
    with pytest.raises(TosaFormatError) as e:
        read_tosa_bytes(data, source)
    msg = str(e.value)
    assert msg.startswith(f"{source}: "), msg
    assert "\n" not in msg and "\r" not in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


# ---------------------------------------------------------------------------------------------
# The builder itself makes readable files (so each defect below is the only thing wrong).

def test_raw_builder_baseline():
    g = read_tosa_bytes(raw_tosa(*good_parts()), SOURCE)
    assert [o.op for o in g.main.operators] == ["CONST", "CLAMP", "IDENTITY"]
    assert g.main.operators[1].attrs["min_val"] == -5 and g.main.operators[1].attrs["max_val"] == 9
    assert g.main.tensors["c"].data.tolist() == [1, 2, 3]


# ---------------------------------------------------------------------------------------------
# Files that are not there or not flatbuffers

def test_missing_file(tmp_path):
    p = tmp_path / "nope.tosa"
    with pytest.raises(TosaFormatError, match=r"nope.tosa: no such file$"):
        read_tosa(p)


def test_directory(tmp_path):
    with pytest.raises(TosaFormatError, match="is a directory"):
        read_tosa(tmp_path)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.tosa"
    p.write_bytes(b"")
    with pytest.raises(TosaFormatError) as e:
        read_tosa(p)
    assert str(e.value) == f"{p}: the file is empty"


def test_too_short():
    assert_format_error(b"\x08\x00\x00\x00TO", "too short")


def test_wrong_identifier():
    data = bytearray(raw_tosa(*good_parts()))
    data[4:8] = b"TFL3"
    assert_format_error(bytes(data), "not a TOSA flatbuffer", "b'TFL3'")


def test_not_a_flatbuffer_at_all():
    assert_format_error(b"hello world, this is text\n" * 10, "not a TOSA flatbuffer")


def test_every_truncation_of_a_small_file():
    data = raw_tosa(*good_parts())
    full = tosa_bytes(read_tosa_bytes(data, SOURCE))
    readable = []
    for n in range(len(data)):
        try:
            g = read_tosa_bytes(data[:n], SOURCE)
        except TosaFormatError as e:
            assert str(e).startswith(f"{SOURCE}: ") and "\n" not in str(e)
        else:
            # Only cutting trailing alignment padding leaves a readable file, and then the
            # very same graph.
            readable.append(n)
            assert tosa_bytes(g) == full
    assert all(n > len(data) - 4 for n in readable), readable


# ---------------------------------------------------------------------------------------------
# Offsets and vectors out of range (patched into a valid file)

def _root_field(data: bytes, slot: int) -> int:
    """Byte position of field `slot` of the root table (test-side flatbuffer arithmetic)."""
    root = struct.unpack_from("<I", data, 0)[0]
    vt = root - struct.unpack_from("<i", data, root)[0]
    return root + struct.unpack_from("<H", data, vt + 4 + 2 * slot)[0]


def test_root_offset_out_of_range():
    data = bytearray(raw_tosa(*good_parts()))
    struct.pack_into("<I", data, 0, len(data) + 100)
    assert_format_error(bytes(data), "outside the buffer")


def test_vtable_out_of_range():
    data = bytearray(raw_tosa(*good_parts()))
    root = struct.unpack_from("<I", data, 0)[0]
    struct.pack_into("<i", data, root, -(1 << 30))
    assert_format_error(bytes(data), "vtable", "outside the buffer")


def test_table_offset_out_of_range():
    data = bytearray(raw_tosa(*good_parts()))
    struct.pack_into("<I", data, _root_field(bytes(data), S.TosaGraphSlots.regions), 0x7FFF0000)
    assert_format_error(bytes(data), "beyond the end of the buffer")


def test_vector_length_out_of_range():
    data = bytearray(raw_tosa(*good_parts()))
    at = _root_field(bytes(data), S.TosaGraphSlots.regions)
    vec = at + struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, vec, 0x3FFFFFFF)  # a billion regions in a tiny file
    assert_format_error(bytes(data), "vector of 1073741823 elements", "runs past the end")


def test_string_length_out_of_range():
    data = bytearray(raw_tosa(*good_parts()))
    i = data.index(b"loc(test)")
    struct.pack_into("<I", data, i - 4, 0xFFFFFFF0)
    assert_format_error(bytes(data), "runs past the end")


def test_field_outside_its_table():
    data = bytearray(raw_tosa(*good_parts()))
    root = struct.unpack_from("<I", data, 0)[0]
    vt = root - struct.unpack_from("<i", data, root)[0]
    struct.pack_into("<H", data, vt + 4 + 2 * S.TosaGraphSlots.regions, 0xFFF0)
    assert_format_error(bytes(data), "lies outside the table")


# ---------------------------------------------------------------------------------------------
# Unknown codes

def test_unknown_op_code():
    t, o, i, out = good_parts()
    o[2] = op(250, ["c"], ["z"], attr_type=ATTR["IdentityAttribute"])
    assert_format_error(raw_tosa(t, o, i, out), "operator #2", "unknown op code 250")


def test_op_code_unknown_zero():
    t, o, i, out = good_parts()
    o[2] = op(0, ["c"], ["z"], attr_type=ATTR["IdentityAttribute"])
    assert_format_error(raw_tosa(t, o, i, out), "unknown op code 0")


def test_unknown_dtype():
    t, o, i, out = good_parts()
    t[3]["type"] = 77
    assert_format_error(raw_tosa(t, o, i, out), "tensor 'z'", "unknown element type (DType value 77)")


def test_unknown_attribute_type():
    t, o, i, out = good_parts()
    o[2]["attr_type"] = 200
    assert_format_error(raw_tosa(t, o, i, out), "operator #2 (IDENTITY)", "unknown attribute type 200")


def test_attribute_table_of_another_op():
    t, o, i, out = good_parts()
    o[2]["attr_type"] = ATTR["AddAttribute"]
    assert_format_error(raw_tosa(t, o, i, out), "carries a AddAttribute, expected IdentityAttribute")


def test_unknown_enum_value_in_attribute():
    tensors = [tensor("x", [1, 2, 2, 1], DType.INT8), tensor("w", [1, 1, 1, 1], DType.INT8, _i8(1) + bytes(7)),
               tensor("b", [1], DType.INT32, bytes(8)), tensor("zp", [1], DType.INT8, bytes(8)),
               tensor("y", [1, 2, 2, 1], DType.INT32)]
    ops = [op(OP["CONST"], [], [n]) for n in ("w", "b", "zp")]
    ops.append(op(OP["CONV2D"], ["x", "w", "b", "zp", "zp"], ["y"], attr=_conv_attr(99)))
    assert_format_error(raw_tosa(tensors, ops, ["x"], ["y"]), "acc_type", "unknown DType value 99")
    ops[-1] = op(OP["CONV2D"], ["x", "w", "b", "zp", "zp"], ["y"], attr=_conv_attr(int(DType.INT32)))
    g = read_tosa_bytes(raw_tosa(tensors, ops, ["x"], ["y"]), SOURCE)
    assert g.main.operators[-1].attrs["acc_type"] == int(DType.INT32)


# ---------------------------------------------------------------------------------------------
# Graphs whose names do not resolve

def test_op_input_not_defined():
    t, o, i, out = good_parts()
    o[2]["inputs"] = ["ghost"]
    assert_format_error(raw_tosa(t, o, i, out), "operator #2 (IDENTITY)", "input 'ghost' is not a tensor of the block")


def test_op_output_not_defined():
    t, o, i, out = good_parts()
    o[1]["outputs"] = ["ghost"]
    assert_format_error(raw_tosa(t, o, i, out), "output 'ghost' is not a tensor of the block")


def test_block_input_not_a_tensor():
    t, o, i, out = good_parts()
    assert_format_error(raw_tosa(t, o, ["x", "nothing"], out), "block input 'nothing' is not a tensor of the block")


def test_block_output_not_a_tensor():
    t, o, i, out = good_parts()
    assert_format_error(raw_tosa(t, o, i, ["y", "nothing"]), "block output 'nothing' is not a tensor of the block")


def test_variable_read_of_an_ordinary_tensor():
    t, o, i, out = good_parts()
    o[2]["attr_type"] = ATTR["VariableReadAttribute"]
    assert_format_error(raw_tosa(t, o, i, out), "reads 'c', which is not a variable tensor")
    t[2].update(variable=True, variable_name="state_c")  # now it is a variable: fine
    g = read_tosa_bytes(raw_tosa(t, o, i, out), SOURCE)
    assert g.main.operators[2].attr_kind == "VariableReadAttribute"


def test_variable_write_into_an_ordinary_tensor():
    t, o, i, out = good_parts()
    o[2]["attr_type"] = ATTR["VariableWriteAttribute"]
    assert_format_error(raw_tosa(t, o, i, out), "writes 'z', which is not a variable tensor")


def test_variables_are_visible_from_other_blocks():
    t, o, i, out = good_parts()
    t[2].update(variable=True, variable_name="state_c")
    other = ("sub", "sub_bb", [tensor("w", [3], DType.INT8)],
             [op(OP["IDENTITY"], ["c"], ["w"], attr_type=ATTR["VariableReadAttribute"])], [], ["w"])
    g = read_tosa_bytes(raw_tosa(t, o, i, out, blocks=[other]), SOURCE)
    assert g.regions[1].blocks[0].operators[0].inputs == ["c"]
    # An ordinary tensor of another block is not visible.
    t[2].update(variable=False, variable_name=None)
    assert_format_error(raw_tosa(t, o, i, out, blocks=[other]), "region 'sub' block 'sub_bb'",
                        "input 'c' is not a tensor of the block")


def test_cond_if_naming_a_missing_region():
    t = [tensor("p", [], DType.BOOL), tensor("x", [2], DType.INT32), tensor("y", [2], DType.INT32)]
    o = [op(OP["COND_IF"], ["p", "x"], ["y"], attr=_cond_attr("then_region", "nowhere"))]
    then = ("then_region", "then_bb", [tensor("a", [2], DType.INT32)], [], ["a"], ["a"])
    assert_format_error(raw_tosa(t, o, ["p", "x"], ["y"], blocks=[then]),
                        "else_graph names 'nowhere', which is no region or block")


def test_no_main_block():
    t, o, i, out = good_parts()
    data = raw_tosa(t, o, i, out)
    data = data.replace(b"main", b"mane")  # renames the region and the block
    assert_format_error(data, "no 'main' block")


# ---------------------------------------------------------------------------------------------
# Tensors and data

def test_data_shorter_than_the_shape():
    t, o, i, out = good_parts()
    t[2] = tensor("c", [4], DType.INT32, bytes(8))
    t[3] = tensor("z", [4], DType.INT32)
    assert_format_error(raw_tosa(t, o, i, out), "tensor 'c'", "8 bytes of data, 4 elements of INT32 need 16")


def test_data_much_longer_than_the_shape():
    t, o, i, out = good_parts()
    t[2]["data"] = bytes(64)
    assert_format_error(raw_tosa(t, o, i, out), "tensor 'c'", "64 bytes of data, more than the 3 bytes")


def test_const_without_data():
    t, o, i, out = good_parts()
    t[2]["data"] = None
    assert_format_error(raw_tosa(t, o, i, out), "operator #0 (CONST)", "output 'c' has no data")


def test_data_on_a_dynamic_shape():
    t, o, i, out = good_parts()
    t[2]["shape"] = [-1]
    assert_format_error(raw_tosa(t, o, i, out), "tensor 'c'", "not static")


def test_negative_dimension():
    t, o, i, out = good_parts()
    t[0]["shape"] = [2, -5]
    assert_format_error(raw_tosa(t, o, i, out), "tensor 'x'", "dimension -5")


def test_huge_shape_with_little_data():
    t, o, i, out = good_parts()
    t[2]["shape"] = [2**31 - 1, 2**31 - 1]
    assert_format_error(raw_tosa(t, o, i, out), "tensor 'c'", "need")


def test_external_data_is_refused():
    t, o, i, out = good_parts()
    t[0]["offset"] = 4096
    assert_format_error(raw_tosa(t, o, i, out), "outside the flatbuffer")


def test_tensor_without_name():
    t, o, i, out = good_parts()
    t[1]["name"] = None
    assert_format_error(raw_tosa(t, o, i, out), "tensor #1 has no name")


def test_duplicate_tensor_names():
    t, o, i, out = good_parts()
    t.append(tensor("x", [1], DType.INT8))
    assert_format_error(raw_tosa(t, o, i, out), "two tensors are named 'x'")


def test_name_not_utf8():
    t, o, i, out = good_parts()
    t[3]["name"] = b"z\xff\xfe"
    assert_format_error(raw_tosa(t, o, i, out), "not valid UTF-8")


def test_name_with_newline_stays_on_one_line():
    t, o, i, out = good_parts()
    o[2]["inputs"] = ["evil\nname"]
    msg = assert_format_error(raw_tosa(t, o, i, out), "is not a tensor of the block")
    assert "'evil\\nname'" in msg


# ---------------------------------------------------------------------------------------------
# Attributes that need their input

def test_clamp_without_input():
    t, o, i, out = good_parts()
    o[1]["inputs"] = []
    assert_format_error(raw_tosa(t, o, i, out), "operator #1 (CLAMP)", "min_val needs the op's input type")


def test_clamp_value_too_short_for_input_type():
    t, o, i, out = good_parts()
    t[0]["type"] = int(DType.INT16)
    t[1]["type"] = int(DType.INT16)
    o[1]["attr"] = _clamp(_i8(-5), _i8(9))  # one byte each: an INT16 value needs two
    assert_format_error(raw_tosa(t, o, i, out), "attribute min_val", "elements of INT16 need 2")
    o[1]["attr"] = _clamp(np.array([-300], "<i2").tobytes(), np.array([300], "<i2").tobytes())
    g = read_tosa_bytes(raw_tosa(t, o, i, out), SOURCE)
    assert (g.main.operators[1].attrs["min_val"], g.main.operators[1].attrs["max_val"]) == (-300, 300)


def test_clamp_missing_table():
    t, o, i, out = good_parts()
    o[1]["attr"] = None
    # An empty ClampAttribute table: min_val has no bytes.
    assert_format_error(raw_tosa(t, o, i, out), "attribute min_val", "0 bytes of data")


# ---------------------------------------------------------------------------------------------
# Versions

def test_version_0_80_is_refused():
    t, o, i, out = good_parts()
    assert_format_error(raw_tosa(t, o, i, out, version=(0, 80, 0, False)),
                        "TOSA version 0.80.0 is not supported")


def test_missing_version_table():
    t, o, i, out = good_parts()
    assert_format_error(raw_tosa(t, o, i, out, with_version=False), "no Version table")


# ---------------------------------------------------------------------------------------------
# Mutation fuzzing of real files

_FUZZ_MLIR = {
    "net": """
module {
  tosa.variable @state = dense<[[3, -1, 4, -1]]> : tensor<1x4xi8>
  func.func @main(%arg0: tensor<1x4x4x2xi8>, %arg1: tensor<1x4xi8>) -> (tensor<1x4x4x3xi8>, tensor<1x32xi8>, tensor<1x4xi8>) {
    %w = "tosa.const"() <{values = dense<[[[[1, -2]]], [[[3, 4]]], [[[-5, 6]]]]> : tensor<3x1x1x2xi8>}> : () -> tensor<3x1x1x2xi8>
    %b = "tosa.const"() <{values = dense<[10, -20, 30]> : tensor<3xi32>}> : () -> tensor<3xi32>
    %zp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
    %0 = tosa.conv2d %arg0, %w, %b, %zp, %zp {acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x4x4x2xi8>, tensor<3x1x1x2xi8>, tensor<3xi32>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x4x4x3xi32>
    %m = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
    %s = "tosa.const"() <{values = dense<33> : tensor<1xi8>}> : () -> tensor<1xi8>
    %z32 = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
    %1 = tosa.rescale %0, %m, %s, %z32, %zp {input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = SINGLE_ROUND, scale32 = true} : (tensor<1x4x4x3xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<1x4x4x3xi8>
    %2 = tosa.clamp %1 {max_val = 100 : i8, min_val = -100 : i8} : (tensor<1x4x4x3xi8>) -> tensor<1x4x4x3xi8>
    %t = "tosa.const"() <{values = dense<7> : tensor<256xi8>}> : () -> tensor<256xi8>
    %3 = tosa.table %arg0, %t : (tensor<1x4x4x2xi8>, tensor<256xi8>) -> tensor<1x4x4x2xi8>
    %sh = tosa.const_shape {values = dense<[1, 32]> : tensor<2xindex>} : () -> !tosa.shape<2>
    %4 = tosa.reshape %3, %sh : (tensor<1x4x4x2xi8>, !tosa.shape<2>) -> tensor<1x32xi8>
    %5 = tosa.variable_read @state : tensor<1x4xi8>
    tosa.variable_write @state, %arg1 : tensor<1x4xi8>
    return %2, %4, %5 : tensor<1x4x4x3xi8>, tensor<1x32xi8>, tensor<1x4xi8>
  }
}
""",
    "cond": """
module {
  func.func @main(%arg0: tensor<i1>, %arg1: tensor<4xi32>) -> tensor<4xi32> {
    %r = "tosa.cond_if"(%arg0, %arg1) ({
    ^bb0(%a: tensor<4xi32>):
      %y = tosa.add %a, %a : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
      "tosa.yield"(%y) : (tensor<4xi32>) -> ()
    }, {
    ^bb0(%a: tensor<4xi32>):
      %y = tosa.sub %a, %a : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
      "tosa.yield"(%y) : (tensor<4xi32>) -> ()
    }) : (tensor<i1>, tensor<4xi32>) -> tensor<4xi32>
    return %r : tensor<4xi32>
  }
}
""",
}


def _tosa_opt() -> str:
    here = Path(sys.executable).with_name("tosa-opt")
    found = str(here) if here.exists() else shutil.which("tosa-opt")
    assert found, "tosa-opt (from tosa-tools) not found"
    return found


@pytest.fixture(scope="module")
def seed_files(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("tosa_io_fuzz")
    files = {}
    for name, text in _FUZZ_MLIR.items():
        (folder / f"{name}.mlir").write_text(text)
        res = subprocess.run([_tosa_opt(), f"{name}.mlir", "--tosa-serialize",
                              f"--tosa-flatbuffer-filename={name}.tosa", "-o", "/dev/null"],
                             cwd=folder, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        files[name] = (folder / f"{name}.tosa").read_bytes()
    # Our own writer's layout too, and the raw builder's.
    files["rewritten"] = tosa_bytes(read_tosa_bytes(files["net"], "net.tosa"))
    files["raw"] = raw_tosa(*good_parts())
    for name, data in files.items():
        assert isinstance(read_tosa_bytes(data, name), Graph), name
    return files


def _mutate(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    buf = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0:
        n = rng.randrange(len(buf))
        return f"truncate to {n}", bytes(buf[:n])
    if kind == 1:
        at = [rng.randrange(len(buf)) for _ in range(rng.randint(1, 4))]
        for i in at:
            buf[i] ^= rng.randrange(1, 256)
        return f"flip bytes at {at}", bytes(buf)
    if kind == 2:  # a 32-bit word (offsets, lengths, enum values) set to something odd
        i = rng.randrange(0, len(buf) - 4) & ~3
        v = rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, len(buf), len(buf) - 4,
                        rng.randrange(1 << 32), rng.randrange(256)])
        struct.pack_into("<I", buf, i, v)
        return f"word at {i} = {v:#x}", bytes(buf)
    if kind == 3:  # a 16-bit vtable entry
        i = rng.randrange(0, len(buf) - 2) & ~1
        v = rng.choice([0, 2, 4, 0xFFFF, rng.randrange(1 << 16)])
        struct.pack_into("<H", buf, i, v)
        return f"half-word at {i} = {v:#x}", bytes(buf)
    if kind == 4:  # cut out a slice
        i = rng.randrange(len(buf))
        j = min(len(buf), i + rng.randint(1, 64))
        return f"delete {i}:{j}", bytes(buf[:i] + buf[j:])
    i = rng.randrange(len(buf))  # insert random bytes
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return f"insert {len(junk)} bytes at {i}", bytes(buf[:i] + junk + buf[i:])


def test_mutation_fuzz(seed_files):
    rng = random.Random(20260801)
    names = sorted(seed_files)
    outcomes = {"graph": 0, "error": 0}
    slowest = 0.0
    t_start = time.perf_counter()
    for i in range(4000):
        name = names[i % len(names)]
        what, data = _mutate(rng, seed_files[name])
        t0 = time.perf_counter()
        try:
            g = read_tosa_bytes(data, "fuzz.tosa")
        except TosaFormatError as e:
            msg = str(e)
            assert msg.startswith("fuzz.tosa: ") and "\n" not in msg, (name, what, msg)
            outcomes["error"] += 1
        except Exception as e:  # anything else is a reader bug
            pytest.fail(f"case {i} ({name}, {what}): {type(e).__name__}: {e}")
        else:
            assert isinstance(g, Graph)
            outcomes["graph"] += 1
        slowest = max(slowest, time.perf_counter() - t0)
    elapsed = time.perf_counter() - t_start
    # Both outcomes occur (the mutations are neither all harmless nor all fatal) ...
    assert outcomes["graph"] > 100 and outcomes["error"] > 1000, outcomes
    # ... and no input makes the reader hang.
    assert slowest < 1.0, f"slowest single read {slowest:.2f} s"
    assert elapsed < 30, f"fuzzing took {elapsed:.1f} s"


def test_shared_offsets_do_not_expand_without_bound():
    """20000 operator slots pointing at one operator whose 20000 inputs all point at one string:
    a 160 KB file that a naive reader would expand into 400 million names."""
    n = 20000
    b = flatbuffers.Builder(1 << 20)
    x = b.CreateString("x")
    TOp.StartInputsVector(b, n)
    for _ in range(n):
        b.PrependUOffsetTRelative(x)
    ins = b.EndVector()
    outs = _string_vector(b, ["x"], TOp.StartOutputsVector)
    attr = _empty_table(b)
    TOp.Start(b)
    TOp.AddOp(b, OP["IDENTITY"])
    TOp.AddAttributeType(b, ATTR["IdentityAttribute"])
    TOp.AddAttribute(b, attr)
    TOp.AddInputs(b, ins)
    TOp.AddOutputs(b, outs)
    the_op = TOp.End(b)
    TBlock.StartOperatorsVector(b, n)
    for _ in range(n):
        b.PrependUOffsetTRelative(the_op)
    ops = b.EndVector()
    shape = b.CreateNumpyVector(np.array([1], np.int32))
    TTensor.Start(b)
    TTensor.AddName(b, x)
    TTensor.AddShape(b, shape)
    TTensor.AddType(b, int(DType.INT8))
    tv = _table_vector(b, [TTensor.End(b)], TBlock.StartTensorsVector)
    name = b.CreateString("main")
    TBlock.Start(b)
    TBlock.AddName(b, name)
    TBlock.AddOperators(b, ops)
    TBlock.AddTensors(b, tv)
    blk = TBlock.End(b)
    bv = _table_vector(b, [blk], TRegion.StartBlocksVector)
    TRegion.Start(b)
    TRegion.AddName(b, name)
    TRegion.AddBlocks(b, bv)
    rv = _table_vector(b, [TRegion.End(b)], TGraph.StartRegionsVector)
    TVersion.Start(b)
    TVersion.Add_Major(b, 1)
    ver = TVersion.End(b)
    TGraph.Start(b)
    TGraph.AddVersion(b, ver)
    TGraph.AddRegions(b, rv)
    b.Finish(TGraph.End(b), b"TOSA")
    data = bytes(b.Output())
    assert len(data) < 200_000
    t0 = time.perf_counter()
    assert_format_error(data, "refer to the same data over and over")
    assert time.perf_counter() - t0 < 2.0
