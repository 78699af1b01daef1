"""compiler.tosa_io: the project's TOSA flatbuffer reader and writer, and `npu inspect`.

Oracles (test-time only): Arm's tosa-tools — `tosa-opt --tosa-serialize` and the `serializer`
package write the input files, the generated `tosa` package checks the schema facts and parses
what our writer produces, and the TOSA reference model runs original and rewritten files, whose
outputs must be identical (np.array_equal, dtype and shape included).
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")

import tosa_reference_model as trm  # noqa: E402

with warnings.catch_warnings():
    # The pure-Python serializer (what Arm's own test generator uses) warns that it is deprecated.
    warnings.simplefilter("ignore", DeprecationWarning)
    from serializer import tosa_serializer as ts  # noqa: E402
from tosa.TosaGraph import TosaGraph  # noqa: E402

from sim import seeds
from compiler.errors import TosaFormatError  # noqa: E402
from compiler.ir import Block, Graph, Operator, Region, Tensor  # noqa: E402
from compiler.tosa_io import read_tosa, read_tosa_bytes, tosa_bytes, write_tosa  # noqa: E402
from compiler.tosa_io import schema as S  # noqa: E402
from compiler.tosa_io.inspect import format_graph  # noqa: E402
from firmware_model.tosa_ops.dtypes import DType  # noqa: E402
from sim.cli.main import main as npu_main  # noqa: E402

Op = ts.TosaOp.Op()
TS = ts.DType  # tosa-tools' DType constants


def _tosa_opt() -> str:
    here = Path(sys.executable).with_name("tosa-opt")
    found = str(here) if here.exists() else shutil.which("tosa-opt")
    assert found, "tosa-opt (from tosa-tools) not found next to the Python interpreter or on PATH"
    return found


def serialize_mlir(text: str, folder: Path, name: str) -> Path:
    """`tosa-opt --tosa-serialize` on MLIR text (run inside `folder` with a relative file name, so
    op locations do not depend on the machine)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.mlir").write_text(text)
    res = subprocess.run([_tosa_opt(), f"{name}.mlir", "--tosa-serialize",
                          f"--tosa-flatbuffer-filename={name}.tosa", "-o", "/dev/null"],
                         cwd=folder, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return folder / f"{name}.tosa"


def _dense(values) -> str:
    return "[" + ", ".join(_dense(v) if isinstance(v, list) else str(int(v)) for v in values) + "]"


_rng = seeds.rng(2024)
_W = _rng.integers(-128, 128, size=(4, 3, 3, 2)).tolist()
_TABLE8 = _rng.integers(-128, 128, size=256).tolist()
_TABLE16 = np.sort(_rng.integers(-32768, 32768, size=513)).tolist()

MLIR = {
    # CONV2D + per-channel RESCALE + CLAMP: the NPU's main path.
    "conv_rescale": f"""
module {{
  func.func @main(%arg0: tensor<1x6x6x2xi8>) -> tensor<1x6x6x4xi8> {{
    %w = "tosa.const"() <{{values = dense<{_dense(_W)}> : tensor<4x3x3x2xi8>}}> : () -> tensor<4x3x3x2xi8>
    %b = "tosa.const"() <{{values = dense<[100, -2000, 30000, 0]> : tensor<4xi32>}}> : () -> tensor<4xi32>
    %izp = "tosa.const"() <{{values = dense<-3> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %wzp = "tosa.const"() <{{values = dense<0> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %0 = tosa.conv2d %arg0, %w, %b, %izp, %wzp {{acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}} : (tensor<1x6x6x2xi8>, tensor<4x3x3x2xi8>, tensor<4xi32>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x6x6x4xi32>
    %mul = "tosa.const"() <{{values = dense<[1073741824, 1500000000, 1999999999, 1234567890]> : tensor<4xi32>}}> : () -> tensor<4xi32>
    %sh = "tosa.const"() <{{values = dense<[38, 39, 40, 37]> : tensor<4xi8>}}> : () -> tensor<4xi8>
    %zp32 = "tosa.const"() <{{values = dense<0> : tensor<1xi32>}}> : () -> tensor<1xi32>
    %ozp = "tosa.const"() <{{values = dense<5> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %1 = tosa.rescale %0, %mul, %sh, %zp32, %ozp {{input_unsigned = false, output_unsigned = false, per_channel = true, rounding_mode = DOUBLE_ROUND, scale32 = true}} : (tensor<1x6x6x4xi32>, tensor<4xi32>, tensor<4xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<1x6x6x4xi8>
    %2 = tosa.clamp %1 {{max_val = 100 : i8, min_val = -100 : i8}} : (tensor<1x6x6x4xi8>) -> tensor<1x6x6x4xi8>
    return %2 : tensor<1x6x6x4xi8>
  }}
}}
""",
    # TABLE: int8 (256 entries) and int16 (513 entries, int32 output).
    "table": f"""
module {{
  func.func @main(%arg0: tensor<3x5xi8>, %arg1: tensor<2x7xi16>) -> (tensor<3x5xi8>, tensor<2x7xi32>) {{
    %t8 = "tosa.const"() <{{values = dense<{_dense(_TABLE8)}> : tensor<256xi8>}}> : () -> tensor<256xi8>
    %t16 = "tosa.const"() <{{values = dense<{_dense(_TABLE16)}> : tensor<513xi16>}}> : () -> tensor<513xi16>
    %0 = tosa.table %arg0, %t8 : (tensor<3x5xi8>, tensor<256xi8>) -> tensor<3x5xi8>
    %1 = tosa.table %arg1, %t16 : (tensor<2x7xi16>, tensor<513xi16>) -> tensor<2x7xi32>
    return %0, %1 : tensor<3x5xi8>, tensor<2x7xi32>
  }}
}}
""",
    # CLAMP on int8 and int16 (the integer profile's types): min_val/max_val are bytes of the
    # input's type.
    "clamp": """
module {
  func.func @main(%arg0: tensor<4x4xi8>, %arg1: tensor<8xi16>) -> (tensor<4x4xi8>, tensor<8xi16>) {
    %0 = tosa.clamp %arg0 {max_val = 50 : i8, min_val = -20 : i8} : (tensor<4x4xi8>) -> tensor<4x4xi8>
    %1 = tosa.clamp %arg1 {max_val = 30000 : i16, min_val = -1000 : i16} : (tensor<8xi16>) -> tensor<8xi16>
    return %0, %1 : tensor<4x4xi8>, tensor<8xi16>
  }
}
""",
    # CONST_SHAPE operands: RESHAPE, SLICE, TILE, PAD.
    "shapes": """
module {
  func.func @main(%arg0: tensor<2x3x4xi8>) -> (tensor<4x6xi8>, tensor<1x2x2xi8>, tensor<4x3x4xi8>, tensor<3x5x4xi8>) {
    %s0 = tosa.const_shape {values = dense<[4, 6]> : tensor<2xindex>} : () -> !tosa.shape<2>
    %0 = tosa.reshape %arg0, %s0 : (tensor<2x3x4xi8>, !tosa.shape<2>) -> tensor<4x6xi8>
    %st = tosa.const_shape {values = dense<[1, 1, 2]> : tensor<3xindex>} : () -> !tosa.shape<3>
    %sz = tosa.const_shape {values = dense<[1, 2, 2]> : tensor<3xindex>} : () -> !tosa.shape<3>
    %1 = tosa.slice %arg0, %st, %sz : (tensor<2x3x4xi8>, !tosa.shape<3>, !tosa.shape<3>) -> tensor<1x2x2xi8>
    %m = tosa.const_shape {values = dense<[2, 1, 1]> : tensor<3xindex>} : () -> !tosa.shape<3>
    %2 = tosa.tile %arg0, %m : (tensor<2x3x4xi8>, !tosa.shape<3>) -> tensor<4x3x4xi8>
    %p = tosa.const_shape {values = dense<[0, 1, 1, 1, 0, 0]> : tensor<6xindex>} : () -> !tosa.shape<6>
    %pv = "tosa.const"() <{values = dense<-7> : tensor<1xi8>}> : () -> tensor<1xi8>
    %3 = tosa.pad %arg0, %p, %pv : (tensor<2x3x4xi8>, !tosa.shape<6>, tensor<1xi8>) -> tensor<3x5x4xi8>
    return %0, %1, %2, %3 : tensor<4x6xi8>, tensor<1x2x2xi8>, tensor<4x3x4xi8>, tensor<3x5x4xi8>
  }
}
""",
    # Variables as tosa-opt writes them: variable tensors with initial data, IDENTITY ops with
    # VariableRead/VariableWrite attributes. The outputs depend on the initial values.
    "variables": """
module {
  tosa.variable @acc = dense<[[5, -7, 100000, 2]]> : tensor<1x4xi32>
  tosa.variable @hist = dense<[[1, -2, 3, -4]]> : tensor<1x4xi8>
  func.func @main(%arg0: tensor<1x4xi32>, %arg1: tensor<1x4xi8>) -> (tensor<1x4xi32>, tensor<1x4xi8>, tensor<1x4xi32>) {
    %0 = tosa.variable_read @acc : tensor<1x4xi32>
    %1 = tosa.add %0, %arg0 : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
    tosa.variable_write @acc, %1 : tensor<1x4xi32>
    %2 = tosa.variable_read @hist : tensor<1x4xi8>
    tosa.variable_write @hist, %arg1 : tensor<1x4xi8>
    %3 = tosa.variable_read @acc : tensor<1x4xi32>
    return %1, %2, %3 : tensor<1x4xi32>, tensor<1x4xi8>, tensor<1x4xi32>
  }
}
""",
    # A multi-op graph: conv, rescale, clamp, pools, cast, add, mul, reshape, transpose,
    # reductions, concat, shift.
    "multi": f"""
module {{
  func.func @main(%arg0: tensor<1x6x6x2xi8>, %arg1: tensor<1x3x3x4xi16>) -> (tensor<1x3x3x4xi8>, tensor<1x3x3x4xi32>, tensor<2x9xi32>, tensor<1x3x3x4xi8>) {{
    %w = "tosa.const"() <{{values = dense<{_dense(_W)}> : tensor<4x3x3x2xi8>}}> : () -> tensor<4x3x3x2xi8>
    %b = "tosa.const"() <{{values = dense<[100, -200, 300, 0]> : tensor<4xi32>}}> : () -> tensor<4xi32>
    %izp = "tosa.const"() <{{values = dense<-3> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %wzp = "tosa.const"() <{{values = dense<0> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %0 = tosa.conv2d %arg0, %w, %b, %izp, %wzp {{acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}} : (tensor<1x6x6x2xi8>, tensor<4x3x3x2xi8>, tensor<4xi32>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x6x6x4xi32>
    %mul = "tosa.const"() <{{values = dense<[1073741824, 1500000000, 1999999999, 1234567890]> : tensor<4xi32>}}> : () -> tensor<4xi32>
    %sh = "tosa.const"() <{{values = dense<[38, 39, 40, 37]> : tensor<4xi8>}}> : () -> tensor<4xi8>
    %zp32 = "tosa.const"() <{{values = dense<0> : tensor<1xi32>}}> : () -> tensor<1xi32>
    %ozp = "tosa.const"() <{{values = dense<5> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %1 = tosa.rescale %0, %mul, %sh, %zp32, %ozp {{input_unsigned = false, output_unsigned = false, per_channel = true, rounding_mode = DOUBLE_ROUND, scale32 = true}} : (tensor<1x6x6x4xi32>, tensor<4xi32>, tensor<4xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<1x6x6x4xi8>
    %2 = tosa.clamp %1 {{max_val = 100 : i8, min_val = -100 : i8}} : (tensor<1x6x6x4xi8>) -> tensor<1x6x6x4xi8>
    %3 = tosa.max_pool2d %2 {{kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}} : (tensor<1x6x6x4xi8>) -> tensor<1x3x3x4xi8>
    %4 = tosa.cast %3 : (tensor<1x3x3x4xi8>) -> tensor<1x3x3x4xi32>
    %5 = tosa.cast %arg1 : (tensor<1x3x3x4xi16>) -> tensor<1x3x3x4xi32>
    %6 = tosa.add %4, %5 : (tensor<1x3x3x4xi32>, tensor<1x3x3x4xi32>) -> tensor<1x3x3x4xi32>
    %shift = "tosa.const"() <{{values = dense<3> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %7 = tosa.mul %6, %5, %shift : (tensor<1x3x3x4xi32>, tensor<1x3x3x4xi32>, tensor<1xi8>) -> tensor<1x3x3x4xi32>
    %s = tosa.const_shape {{values = dense<[9, 4]> : tensor<2xindex>}} : () -> !tosa.shape<2>
    %8 = tosa.reshape %7, %s : (tensor<1x3x3x4xi32>, !tosa.shape<2>) -> tensor<9x4xi32>
    %9 = tosa.transpose %8 {{perms = array<i32: 1, 0>}} : (tensor<9x4xi32>) -> tensor<4x9xi32>
    %10 = tosa.reduce_max %9 {{axis = 0 : i32}} : (tensor<4x9xi32>) -> tensor<1x9xi32>
    %11 = tosa.reduce_sum %9 {{axis = 0 : i32}} : (tensor<4x9xi32>) -> tensor<1x9xi32>
    %12 = tosa.concat %10, %11 {{axis = 0 : i32}} : (tensor<1x9xi32>, tensor<1x9xi32>) -> tensor<2x9xi32>
    %ars = "tosa.const"() <{{values = dense<2> : tensor<1x1xi32>}}> : () -> tensor<1x1xi32>
    %13 = tosa.arithmetic_right_shift %12, %ars {{round = true}} : (tensor<2x9xi32>, tensor<1x1xi32>) -> tensor<2x9xi32>
    %14 = tosa.avg_pool2d %2, %izp, %ozp {{acc_type = i32, kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}} : (tensor<1x6x6x4xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x3x3x4xi8>
    return %3, %7, %13, %14 : tensor<1x3x3x4xi8>, tensor<1x3x3x4xi32>, tensor<2x9xi32>, tensor<1x3x3x4xi8>
  }}
}}
""",
    # Constant data of the odd widths: INT48 (6 bytes), BOOL, INT4 (packed two per byte).
    "types": """
module {
  func.func @main(%arg0: tensor<4xi16>, %arg1: tensor<1x2x2x3xi8>) -> (tensor<4xi16>, tensor<4xi16>, tensor<1x2x2x2xi32>) {
    %c48 = "tosa.const"() <{values = dense<[140737488355327, -140737488355328, 12345678901, -5]> : tensor<4xi48>}> : () -> tensor<4xi48>
    %m = "tosa.const"() <{values = dense<16384> : tensor<1xi16>}> : () -> tensor<1xi16>
    %s = "tosa.const"() <{values = dense<40> : tensor<1xi8>}> : () -> tensor<1xi8>
    %z48 = "tosa.const"() <{values = dense<0> : tensor<1xi48>}> : () -> tensor<1xi48>
    %z16 = "tosa.const"() <{values = dense<0> : tensor<1xi16>}> : () -> tensor<1xi16>
    %0 = tosa.rescale %c48, %m, %s, %z48, %z16 {input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = SINGLE_ROUND, scale32 = false} : (tensor<4xi48>, tensor<1xi16>, tensor<1xi8>, tensor<1xi48>, tensor<1xi16>) -> tensor<4xi16>
    %cond = "tosa.const"() <{values = dense<[true, false, true, false]> : tensor<4xi1>}> : () -> tensor<4xi1>
    %1 = tosa.select %cond, %arg0, %0 : (tensor<4xi1>, tensor<4xi16>, tensor<4xi16>) -> tensor<4xi16>
    %w = "tosa.const"() <{values = dense<[[[[-7, 7, 1]]], [[[3, -1, -2]]]]> : tensor<2x1x1x3xi4>}> : () -> tensor<2x1x1x3xi4>
    %b = "tosa.const"() <{values = dense<[1, -1]> : tensor<2xi32>}> : () -> tensor<2xi32>
    %izp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
    %wzp = "tosa.const"() <{values = dense<0> : tensor<1xi4>}> : () -> tensor<1xi4>
    %2 = tosa.conv2d %arg1, %w, %b, %izp, %wzp {acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x2x2x3xi8>, tensor<2x1x1x3xi4>, tensor<2xi32>, tensor<1xi8>, tensor<1xi4>) -> tensor<1x2x2x2xi32>
    return %0, %1, %2 : tensor<4xi16>, tensor<4xi16>, tensor<1x2x2x2xi32>
  }
}
""",
    # Several regions: COND_IF names its then/else regions.
    "cond_if": """
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


@pytest.fixture(scope="module")
def mlir_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tosa_io_mlir")
    return {name: serialize_mlir(text, folder, name) for name, text in MLIR.items()}


# ---------------------------------------------------------------------------------------------
# Helpers

def random_inputs(graph: Graph, seed: int) -> list[np.ndarray]:
    rng = seeds.rng(seed)
    arrays = []
    for name in graph.main.inputs:
        t = graph.main.tensors[name]
        if t.dtype == DType.BOOL:
            arrays.append(rng.integers(0, 2, size=t.shape).astype(np.bool_))
        else:
            # int32 inputs stay within 24 bits so that ADD/MUL chains do not overflow (which the
            # reference model reports as unpredictable).
            lo, hi = (-(1 << 24), 1 << 24) if t.dtype == DType.INT32 else (t.dtype.min, t.dtype.max)
            arrays.append(rng.integers(lo, hi, size=t.shape, endpoint=True).astype(t.dtype.storage))
    return arrays


def run_reference(data: bytes, inputs: list[np.ndarray]):
    outputs, status = trm.run(bytes(data), inputs)
    return outputs, str(status)


def assert_same_outputs(original: bytes, rewritten: bytes, inputs: list[np.ndarray]) -> None:
    out1, st1 = run_reference(original, inputs)
    out2, st2 = run_reference(rewritten, inputs)
    assert st1 == "GraphStatus.TOSA_VALID", st1  # the original must run, or the check is empty
    assert st2 == st1
    assert len(out1) == len(out2) > 0
    for a, b in zip(out1, out2):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b)


def assert_same_graph(g1: Graph, g2: Graph) -> None:
    assert g1.version == g2.version
    assert [r.name for r in g1.regions] == [r.name for r in g2.regions]
    for r1, r2 in zip(g1.regions, g2.regions):
        assert [b.name for b in r1.blocks] == [b.name for b in r2.blocks]
        for b1, b2 in zip(r1.blocks, r2.blocks):
            assert b1.inputs == b2.inputs and b1.outputs == b2.outputs
            assert b1.tensors.keys() == b2.tensors.keys()
            for name, t1 in b1.tensors.items():
                t2 = b2.tensors[name]
                assert (t1.name, t1.shape, t1.dtype, t1.is_variable, t1.variable_name, t1.is_unranked) == \
                       (t2.name, t2.shape, t2.dtype, t2.is_variable, t2.variable_name, t2.is_unranked), name
                assert (t1.data is None) == (t2.data is None), name
                if t1.data is not None:
                    assert t1.data.dtype == t2.data.dtype and t1.data.shape == t2.data.shape, name
                    assert np.array_equal(t1.data, t2.data), name
            assert len(b1.operators) == len(b2.operators)
            for o1, o2 in zip(b1.operators, b2.operators):
                assert (o1.op, o1.inputs, o1.outputs, o1.attr_kind, o1.location) == \
                       (o2.op, o2.inputs, o2.outputs, o2.attr_kind, o2.location)
                assert o1.attrs == o2.attrs, o1.describe()


def roundtrip(path: Path) -> tuple[Graph, bytes, Graph]:
    g = read_tosa(path)
    data = tosa_bytes(g)
    return g, data, read_tosa_bytes(data, "rewritten.tosa")


# ---------------------------------------------------------------------------------------------
# Files written by tosa-opt: read, write back, run both with the reference model.

@pytest.mark.parametrize("name", sorted(MLIR))
def test_roundtrip_runs_identically_in_reference_model(mlir_files, name):
    path = mlir_files[name]
    g, data, g2 = roundtrip(path)
    assert data[4:8] == b"TOSA"
    for seed in (1, 2):
        inputs = random_inputs(g, seed)
        assert_same_outputs(path.read_bytes(), data, inputs)
    # read(write(g)) reproduces g, and writing is deterministic and idempotent.
    assert_same_graph(g, g2)
    assert tosa_bytes(g2) == data


def test_write_tosa_to_file(mlir_files, tmp_path):
    g = read_tosa(mlir_files["conv_rescale"])
    out = tmp_path / "copy.tosa"
    write_tosa(g, out)
    assert out.read_bytes() == tosa_bytes(g)
    g2 = read_tosa(out)
    assert g2.source == str(out)
    assert_same_graph(g, g2)


def test_conv_rescale_clamp_contents(mlir_files):
    g = read_tosa(mlir_files["conv_rescale"])
    assert g.version == (1, 1, 0, True)
    main = g.main
    assert main.inputs == ["TosaInput_0"] and main.outputs == ["TosaOutput_0"]
    inp = main.tensors["TosaInput_0"]
    assert (inp.shape, inp.dtype, inp.data) == ([1, 6, 6, 2], DType.INT8, None)
    conv = next(op for op in main.operators if op.op == "CONV2D")
    assert conv.attr_kind == "Conv2dAttribute"
    assert conv.attrs == {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "local_bound": False,
                          "acc_type": int(DType.INT32)}
    assert conv.location and "conv_rescale.mlir" in conv.location
    w = main.tensors[conv.inputs[1]]
    assert w.data.dtype == np.int8 and np.array_equal(w.data, np.array(_W, np.int8))
    bias = main.tensors[conv.inputs[2]]
    assert bias.data.dtype == np.int32 and np.array_equal(bias.data, np.array([100, -2000, 30000, 0], np.int32))
    resc = next(op for op in main.operators if op.op == "RESCALE")
    assert resc.attrs == {"scale32": True, "rounding_mode": S.ENUMS["RoundingMode"]["DOUBLE_ROUND"],
                          "per_channel": True, "input_unsigned": False, "output_unsigned": False}
    shifts = main.tensors[resc.inputs[2]]
    assert np.array_equal(shifts.data, np.array([38, 39, 40, 37], np.int8))
    clamp = next(op for op in main.operators if op.op == "CLAMP")
    assert clamp.attrs["min_val"] == -100 and clamp.attrs["max_val"] == 100
    assert isinstance(clamp.attrs["min_val"], int)


def test_clamp_values_decoded_with_input_type(mlir_files):
    g = read_tosa(mlir_files["clamp"])
    got = [(g.main.tensors[op.inputs[0]].dtype, op.attrs["min_val"], op.attrs["max_val"])
           for op in g.main.operators if op.op == "CLAMP"]
    assert got == [(DType.INT8, -20, 50), (DType.INT16, -1000, 30000)]


def test_table_and_shapes_contents(mlir_files):
    g = read_tosa(mlir_files["table"])
    tables = [g.main.tensors[op.inputs[1]] for op in g.main.operators if op.op == "TABLE"]
    assert tables[0].dtype == DType.INT8 and np.array_equal(tables[0].data, np.array(_TABLE8, np.int8))
    assert tables[1].dtype == DType.INT16 and np.array_equal(tables[1].data, np.array(_TABLE16, np.int16))
    assert g.main.tensors[g.main.outputs[1]].dtype == DType.INT32

    g = read_tosa(mlir_files["shapes"])
    shapes = {op.outputs[0]: g.main.tensors[op.outputs[0]] for op in g.main.operators if op.op == "CONST_SHAPE"}
    values = sorted(t.data.tolist() for t in shapes.values())
    assert values == sorted([[4, 6], [1, 1, 2], [1, 2, 2], [2, 1, 1], [0, 1, 1, 1, 0, 0]])
    for t in shapes.values():
        assert t.dtype == DType.SHAPE and t.data.dtype == np.int64 and t.shape == [len(t.data)]
    reshape = next(op for op in g.main.operators if op.op == "RESHAPE")
    assert g.main.tensors[reshape.inputs[1]].data.tolist() == [4, 6]


def test_odd_width_constant_data(mlir_files):
    g = read_tosa(mlir_files["types"])
    consts = [g.main.tensors[op.outputs[0]] for op in g.main.operators if op.op == "CONST"]
    by_type = {}
    for t in consts:
        by_type.setdefault(t.dtype, []).append(t)
    i48 = by_type[DType.INT48][0]
    assert i48.data.dtype == np.int64
    assert i48.data.tolist() == [2**47 - 1, -2**47, 12345678901, -5]
    assert by_type[DType.BOOL][0].data.dtype == np.bool_
    assert by_type[DType.BOOL][0].data.tolist() == [True, False, True, False]
    w4 = next(t for t in by_type[DType.INT4] if t.shape == [2, 1, 1, 3])
    assert w4.data.dtype == np.int8
    assert w4.data.reshape(-1).tolist() == [-7, 7, 1, 3, -1, -2]


def test_variables_identity_form(mlir_files):
    g = read_tosa(mlir_files["variables"])
    variables = {t.variable_name: t for t in g.main.variables()}
    assert set(variables) == {"acc", "hist"}
    acc, hist = variables["acc"], variables["hist"]
    assert acc.is_variable and acc.shape == [1, 4] and acc.dtype == DType.INT32
    assert np.array_equal(acc.data, np.array([[5, -7, 100000, 2]], np.int32))
    assert np.array_equal(hist.data, np.array([[1, -2, 3, -4]], np.int8))
    reads = [op for op in g.main.operators if op.attr_kind == "VariableReadAttribute"]
    writes = [op for op in g.main.operators if op.attr_kind == "VariableWriteAttribute"]
    assert [op.op for op in reads + writes] == ["IDENTITY"] * 5
    assert [op.inputs for op in reads] == [[acc.name], [hist.name], [acc.name]]
    assert [op.outputs for op in writes] == [[acc.name], [hist.name]]
    # Ordinary tensors carry no variable name.
    assert all(t.variable_name is None for t in g.main.tensors.values() if not t.is_variable)
    # The rewritten file keeps the IDENTITY + attribute form (parsed with Arm's generated code).
    data = tosa_bytes(g)
    block = TosaGraph.GetRootAs(data, 0).Regions(0).Blocks(0)
    kinds = sorted((block.Operators(i).Op(), block.Operators(i).AttributeType()) for i in range(block.OperatorsLength()))
    assert kinds.count((Op.IDENTITY, S.ATTRIBUTE_VALUE["VariableReadAttribute"])) == 3
    assert kinds.count((Op.IDENTITY, S.ATTRIBUTE_VALUE["VariableWriteAttribute"])) == 2


def test_variable_initial_values_reach_the_reference_model(mlir_files):
    """Changing a variable's initial value in the IR changes what the reference model computes
    from the written file: the writer really writes variable data."""
    g = read_tosa(mlir_files["variables"])
    acc = next(t for t in g.main.variables() if t.variable_name == "acc")
    inputs = [np.zeros((1, 4), np.int32), np.zeros((1, 4), np.int8)]
    out, status = run_reference(tosa_bytes(g), inputs)
    assert status == "GraphStatus.TOSA_VALID"
    assert np.array_equal(out[0], np.array([[5, -7, 100000, 2]], np.int32))
    acc.data = np.array([[9, 8, 7, 6]], np.int32)
    out, _ = run_reference(tosa_bytes(g), inputs)
    assert np.array_equal(out[0], np.array([[9, 8, 7, 6]], np.int32))
    assert np.array_equal(out[2], out[0])


def test_multi_region_graph(mlir_files):
    g = read_tosa(mlir_files["cond_if"])
    assert len(g.regions) == 3 and g.main.name == "main"
    cond = g.main.operators[0]
    assert cond.op == "COND_IF"
    region_names = {r.name for r in g.regions}
    assert cond.attrs["then_graph"] in region_names and cond.attrs["else_graph"] in region_names
    for flag in (True, False):
        inputs = [np.array(flag), np.array([1, -2, 3, 2**29], np.int32)]
        assert_same_outputs(mlir_files["cond_if"].read_bytes(), tosa_bytes(g), inputs)


# ---------------------------------------------------------------------------------------------
# Files written by tosa-tools' serializer package

def _serializer(tmp_path) -> "ts.TosaSerializer":
    return ts.TosaSerializer(str(tmp_path))


def test_constant_data_of_every_integer_type(tmp_path):
    """Constants written by Arm's serializer read back as exactly the values it was given, in the
    storage type of each DType; our writer's bytes parse to the same bytes with Arm's generated code."""
    rng = seeds.rng(7)
    cases = {
        TS.INT4: (DType.INT4, np.array([-8, 7, 0, -1, 5], np.int8)),  # odd count: a half-filled byte
        TS.INT8: (DType.INT8, rng.integers(-128, 128, size=(3, 5)).astype(np.int8)),
        TS.INT16: (DType.INT16, np.array([-32768, 32767, -1, 0, 12345], np.int16)),
        TS.INT32: (DType.INT32, np.array([[-2**31, 2**31 - 1], [-1, 7]], np.int32)),
        TS.INT48: (DType.INT48, np.array([-2**47, 2**47 - 1, -1, 1 << 40, -(1 << 33) + 5], np.int64)),
        TS.INT64: (DType.INT64, np.array([-2**63, 2**63 - 1, 3], np.int64)),
        TS.BOOL: (DType.BOOL, np.array([True, False, False, True, True], np.bool_)),
    }
    ser = _serializer(tmp_path)
    names = {}
    for ts_type, (dtype, values) in cases.items():
        t = ser.addConst(list(values.shape), ts_type, values)
        names[t.name] = (dtype, values)
    shp = ser.addConst([3], TS.SHAPE, np.array([2, -1, 9], np.int64))
    out = ser.addOutput([2, 2], TS.INT32)
    ser.addOperator(Op.IDENTITY, [list(names)[3]], [out.name])
    data = bytes(ser.serialize())
    g = read_tosa_bytes(data, "consts.tosa")
    for name, (dtype, values) in names.items():
        t = g.main.tensors[name]
        assert t.dtype == dtype and t.shape == list(values.shape)
        assert t.data.dtype == dtype.storage and np.array_equal(t.data, values), dtype
    s = g.main.tensors[shp.name]
    assert s.dtype == DType.SHAPE and s.shape == [3] and s.data.tolist() == [2, -1, 9]

    # Our writer's tensors, parsed with Arm's generated code, hold the same data bytes.
    ours = tosa_bytes(g)
    theirs = TosaGraph.GetRootAs(data, 0).Regions(0).Blocks(0)
    mine = TosaGraph.GetRootAs(ours, 0).Regions(0).Blocks(0)

    def tensor_bytes(block):
        out = {}
        for i in range(block.TensorsLength()):
            t = block.Tensors(i)
            out[t.Name().decode()] = bytes(t.DataAsNumpy().tobytes()) if t.DataLength() else b""
        for i in range(block.ShapesLength()):
            t = block.Shapes(i)
            out[t.Name().decode()] = bytes(t.DataAsNumpy().tobytes()) if t.DataLength() else b""
        return out

    a, b = tensor_bytes(theirs), tensor_bytes(mine)
    assert a.keys() == b.keys()
    for name in a:
        n = len(a[name])
        assert b[name][:n] == a[name] and not any(b[name][n:]), name  # ours is zero-padded to 8
        assert len(b[name]) % 8 == 0
    # Data vectors start on an 8-byte boundary (force_align: 8).
    for i in range(mine.TensorsLength()):
        t = mine.Tensors(i)
        if t.DataLength():
            assert t._tab.Vector(t._tab.Offset(10)) % 8 == 0


def test_variable_opcodes_form(tmp_path):
    """The VARIABLE / VARIABLE_READ / VARIABLE_WRITE opcodes read as themselves (the reference model
    rejects them, so this form is checked structurally)."""
    ser = _serializer(tmp_path)
    x = ser.addPlaceholder([2], TS.INT16, None)
    blk = ser.currRegion.currBasicBlock
    blk.addTensor("state", [2], TS.INT16, np.array([3, -4]), None, False, True, "my_state")
    r = ser.addIntermediate([2], TS.INT16)
    out = ser.addOutput([2], TS.INT16)
    ser.addOperator(Op.VARIABLE, [], ["state"])
    ser.addOperator(Op.VARIABLE_READ, ["state"], [r.name])
    ser.addOperator(Op.ADD, [r.name, x.name], [out.name])
    ser.addOperator(Op.VARIABLE_WRITE, [out.name], ["state"])
    g = read_tosa_bytes(bytes(ser.serialize()), "varops.tosa")
    ops = [(op.op, op.attr_kind, op.inputs, op.outputs) for op in g.main.operators]
    assert ops == [("VARIABLE", "VariableAttribute", [], ["state"]),
                   ("VARIABLE_READ", "VariableReadAttribute", ["state"], [r.name]),
                   ("ADD", "AddAttribute", [r.name, x.name], [out.name]),
                   ("VARIABLE_WRITE", "VariableWriteAttribute", [out.name], ["state"])]
    state = g.main.tensors["state"]
    assert state.is_variable and state.variable_name == "my_state"
    assert np.array_equal(state.data, np.array([3, -4], np.int16))
    assert_same_graph(g, read_tosa_bytes(tosa_bytes(g), "again.tosa"))


def test_serializer_clamp_bytes(tmp_path):
    """ClampAttribute as Arm's test generator writes it (value bytes padded to 8)."""
    ser = _serializer(tmp_path)
    results = []
    for ts_type, lo, hi in ((TS.INT8, -128, 17), (TS.INT16, -300, 32767), (TS.INT32, -2**31, 5)):
        x = ser.addPlaceholder([3], ts_type, None)
        out = ser.addOutput([3], ts_type)
        pad = lambda v: v + [0] * (-len(v) % 8)  # noqa: E731
        attr = ts.TosaSerializerAttribute()
        attr.ClampAttribute(ser.builder, pad(ts.TosaSerializer.convertDataToUint8Vec(ts_type, [lo])),
                            pad(ts.TosaSerializer.convertDataToUint8Vec(ts_type, [hi])), 1)
        ser.addOperator(Op.CLAMP, [x.name], [out.name], attr)
        results.append((lo, hi))
    g = read_tosa_bytes(bytes(ser.serialize()), "clamp.tosa")
    got = [(op.attrs["min_val"], op.attrs["max_val"]) for op in g.main.operators]
    assert got == results
    assert all(op.attrs["nan_mode"] == 1 for op in g.main.operators)


# ---------------------------------------------------------------------------------------------
# The schema facts against Arm's generated code, and every attribute table through the writer

class _SlotRecorder:
    """Stands in for flatbuffers.Builder: records which slot each generated Add* call writes."""

    def __init__(self):
        self.slots: list[int] = []
        self.count = None

    def StartObject(self, n):
        self.count = n

    def __getattr__(self, name):
        if name.startswith("Prepend") and name.endswith("Slot"):
            return lambda slot, *args: self.slots.append(slot)
        raise AttributeError(name)


def _generated_slot(module, func: str) -> int:
    rec = _SlotRecorder()
    getattr(module, func)(rec, 0)
    return rec.slots[0]


def _generated_count(module) -> int:
    rec = _SlotRecorder()
    module.Start(rec)
    return rec.count


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def test_schema_enums_match_generated_code():
    gen_ops = {k: v for k, v in vars(importlib.import_module("tosa.Op").Op).items() if not k.startswith("_")}
    assert gen_ops == S.OP_VALUE
    gen_attrs = {k: v for k, v in vars(importlib.import_module("tosa.Attribute").Attribute).items()
                 if not k.startswith("_")}
    assert gen_attrs == S.ATTRIBUTE_VALUE
    for enum, values in S.ENUMS.items():
        gen = {k: v for k, v in vars(getattr(importlib.import_module(f"tosa.{enum}"), enum)).items()
               if not k.startswith("_")}
        assert gen == values, enum
    # The schema pairs op k with attribute k.
    assert len(S.OPS) == len(S.ATTRIBUTES)


def test_schema_slots_match_generated_code():
    structures = {
        "TosaGraph": (S.TosaGraphSlots, {"version": "AddVersion", "regions": "AddRegions",
                                         "software_version": "AddSoftwareVersion", "compatibility": "AddCompatibility"}),
        "Version": (S.VersionSlots, {"major": "Add_Major", "minor": "Add_Minor", "patch": "Add_Patch", "draft": "Add_Draft"}),
        "SoftwareVersion": (S.SoftwareVersionSlots, {"major": "Add_Major", "minor": "Add_Minor", "micro": "Add_Micro",
                                                     "modifier": "Add_Modifier"}),
        "SerializationCompatibility": (S.SerializationCompatibilitySlots,
                                       {"min_reader_version": "AddMinReaderVersion", "features": "AddFeatures"}),
        "TosaRegion": (S.TosaRegionSlots, None),
        "TosaBasicBlock": (S.TosaBasicBlockSlots, None),
        "TosaTensor": (S.TosaTensorSlots, None),
        "TosaShape": (S.TosaShapeSlots, None),
        "TosaOperator": (S.TosaOperatorSlots, None),
        "OpLocation": (S.OpLocationSlots, None),
    }
    for table, (slots, names) in structures.items():
        module = importlib.import_module(f"tosa.{table}")
        fields = {k: v for k, v in vars(slots).items() if not k.startswith("_") and k != "COUNT"}
        assert _generated_count(module) == slots.COUNT == len(fields), table
        for field, slot in fields.items():
            func = names[field] if names else "Add" + _camel(field)
            assert _generated_slot(module, func) == slot, (table, field)
    for kind, fields in S.ATTRIBUTE_FIELDS.items():
        module = importlib.import_module(f"tosa.{kind}")
        assert _generated_count(module) == len(fields), kind
        for slot, f in enumerate(fields):
            assert _generated_slot(module, "Add" + _camel(f.name)) == slot, (kind, f.name)


def _sample_attrs(kind: str) -> dict:
    """Non-default values for every field of an attribute table."""
    attrs = {}
    for i, f in enumerate(S.ATTRIBUTE_FIELDS[kind]):
        if f.kind == "int32":
            attrs[f.name] = -3 - i
        elif f.kind == "bool":
            attrs[f.name] = True
        elif f.kind == "[int32]":
            attrs[f.name] = [i + 1, -2, 2**31 - 1][: 2 + i % 2]
        elif f.kind == "string":
            attrs[f.name] = "main"  # names of graphs (COND_IF/WHILE_LOOP) must exist
        elif f.kind == "[ubyte]":
            attrs[f.name] = (-5 - i) if f.value else bytes([1, 2, 3, 250])
        else:
            values = sorted(S.ENUMS[f.enum].values())
            attrs[f.name] = values[-1]
    return attrs


def test_every_attribute_table_roundtrips_and_parses_with_generated_code():
    # x is a variable with data, so that every op may use it (CONST outputs need data, variable
    # reads and writes need a variable).
    tensors = {"x": Tensor("x", [2], DType.INT16, data=np.array([7, -7], np.int16), is_variable=True,
                           variable_name="x_state")}
    ops = []
    for kind in S.ATTRIBUTES[1:]:
        op = S.OPS[S.ATTRIBUTE_VALUE[kind]]
        ops.append(Operator(op=op, inputs=["x"], outputs=["x"], attrs=_sample_attrs(kind), attr_kind=kind,
                            location=f"loc({kind})"))
    g = Graph(regions=[Region("main", [Block("main", ops, tensors, ["x"], ["x"])])])
    data = tosa_bytes(g)
    g2 = read_tosa_bytes(data, "attrs.tosa")
    assert_same_graph(g, g2)

    block = TosaGraph.GetRootAs(data, 0).Regions(0).Blocks(0)
    assert block.OperatorsLength() == len(ops)
    for i, op in enumerate(ops):
        fo = block.Operators(i)
        assert fo.Op() == S.OP_VALUE[op.op]
        assert fo.AttributeType() == S.ATTRIBUTE_VALUE[op.attr_kind]
        cls = getattr(importlib.import_module(f"tosa.{op.attr_kind}"), op.attr_kind)
        a = cls()
        tab = fo.Attribute()
        a.Init(tab.Bytes, tab.Pos)
        for f in S.ATTRIBUTE_FIELDS[op.attr_kind]:
            name = _camel(f.name)
            want = op.attrs[f.name]
            if f.kind in ("[int32]", "[ubyte]"):
                got = [getattr(a, name)(j) for j in range(getattr(a, name + "Length")())]
                if f.value:  # one INT16 value, little-endian, padded to 8 bytes
                    assert len(got) == 8
                    got = int(np.array(got[:2], np.uint8).view("<i2")[0])
                elif f.kind == "[ubyte]":
                    got = bytes(got)
            elif f.kind == "string":
                got = getattr(a, name)().decode()
            else:
                got = getattr(a, name)()
            assert got == want, (op.attr_kind, f.name)


# ---------------------------------------------------------------------------------------------
# Writer checks

def _tiny_graph() -> Graph:
    t = {"a": Tensor("a", [2], DType.INT32), "c": Tensor("c", [2], DType.INT32, data=np.array([1, 2], np.int32)),
         "o": Tensor("o", [2], DType.INT32)}
    ops = [Operator("CONST", [], ["c"]), Operator("ADD", ["a", "c"], ["o"])]
    return Graph(regions=[Region("main", [Block("main", ops, t, ["a"], ["o"])])], source="tiny")


def test_ir_built_graph_runs_in_reference_model():
    g = _tiny_graph()
    out, status = run_reference(tosa_bytes(g), [np.array([5, -128], np.int32)])
    assert status == "GraphStatus.TOSA_VALID"
    assert np.array_equal(out[0], np.array([6, -126], np.int32))
    g2 = read_tosa_bytes(tosa_bytes(g), "tiny.tosa")
    assert [op.attr_kind for op in g2.main.operators] == ["ConstAttribute", "AddAttribute"]


@pytest.mark.parametrize("break_it, message", [
    (lambda g: setattr(g.main.operators[1], "op", "FROBNICATE"), "'FROBNICATE' is not a TOSA op"),
    (lambda g: g.main.operators[1].inputs.append("nowhere"), "'nowhere' is not a tensor of the block"),
    (lambda g: setattr(g.main.tensors["c"], "data", np.array([1, 2**31], np.int64)), "outside the range of INT32"),
    (lambda g: setattr(g.main.tensors["c"], "data", np.array([1, 2, 3], np.int32)), "has 3 data elements"),
    (lambda g: setattr(g.main.tensors["c"], "data", np.array([1.0, 2.0])), "INT32 data held as float64"),
    (lambda g: g.main.outputs.append("ghost"), "block output 'ghost' is not a tensor"),
    (lambda g: setattr(g.main.operators[1], "attrs", {"axis": 1}), "'axis' is not a field of AddAttribute"),
    (lambda g: setattr(g.main.operators[1], "attr_kind", "Conv2dAttribute"), "cannot carry a Conv2dAttribute"),
    (lambda g: setattr(g, "version", (0, 80, 0, False)), "writes TOSA 1.x"),
])
def test_writer_rejects_graphs_the_format_cannot_hold(break_it, message):
    g = _tiny_graph()
    break_it(g)
    with pytest.raises(TosaFormatError) as e:
        tosa_bytes(g)
    assert str(e.value).startswith("tiny: cannot write the graph: ")
    assert message in str(e.value)


def test_writer_needs_every_attribute_field():
    g = _tiny_graph()
    g.main.operators.append(Operator("CONCAT", ["a", "c"], ["o"], attrs={}))
    with pytest.raises(TosaFormatError, match="attribute 'axis' of ConcatAttribute is missing"):
        tosa_bytes(g)


# ---------------------------------------------------------------------------------------------
# Speed

def _big_graph(n_blocks: int = 150) -> Graph:
    """A graph shaped like the LSTM (CONST/RESCALE-heavy, ~600 ops, ~160 KB)."""
    rng = seeds.rng(3)
    t: dict[str, Tensor] = {"x": Tensor("x", [1, 32], DType.INT32)}
    ops: list[Operator] = []
    prev = "x"
    for i in range(n_blocks):
        names = [f"m{i}", f"s{i}", f"z{i}", f"y{i}", f"r{i}", f"w{i}", f"a{i}"]
        t[names[0]] = Tensor(names[0], [1], DType.INT32, data=np.array([1 << 30], np.int32))
        t[names[1]] = Tensor(names[1], [1], DType.INT8, data=np.array([31], np.int8))
        t[names[2]] = Tensor(names[2], [1], DType.INT32, data=np.array([0], np.int32))
        t[names[3]] = Tensor(names[3], [1], DType.INT32, data=np.array([0], np.int32))
        t[names[4]] = Tensor(names[4], [1, 32], DType.INT32)
        t[names[5]] = Tensor(names[5], [1, 32], DType.INT32,
                             data=rng.integers(-1000, 1000, size=(1, 32)).astype(np.int32))
        t[names[6]] = Tensor(names[6], [1, 32], DType.INT32)
        ops += [Operator("CONST", [], [n]) for n in (names[0], names[1], names[2], names[3], names[5])]
        ops.append(Operator("RESCALE", [prev, names[0], names[1], names[2], names[3]], [names[4]],
                            attrs={"scale32": True, "rounding_mode": 1, "per_channel": False,
                                   "input_unsigned": False, "output_unsigned": False},
                            location=f'loc("model.mlir":{i}:5)'))
        ops.append(Operator("ADD", [names[4], names[5]], [names[6]], location=f'loc("model.mlir":{i}:9)'))
        prev = names[6]
    return Graph(regions=[Region("main", [Block("main", ops, t, ["x"], [prev])])])


def test_read_speed():
    data = tosa_bytes(_big_graph())
    g = read_tosa_bytes(data, "big.tosa")
    assert len(g.main.operators) >= 1000
    best = min(_timed(lambda: read_tosa_bytes(data, "big.tosa")) for _ in range(3))
    # ~1000 ops: the real 590-op LSTM reads in about 10 ms on the development machine.
    assert best < 0.25, f"reading {len(g.main.operators)} ops took {best * 1e3:.0f} ms"


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# npu inspect

def test_inspect_summary(mlir_files, capsys):
    path = mlir_files["variables"]
    assert npu_main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"{path}: TOSA 1.1.0 draft, ")
    assert out.index("inputs:") < out.index("outputs:") < out.index("variables:") < out.index("op histogram:")
    assert any(line.split() == ["TosaInput_0", "1x4", "INT32"] for line in lines)
    assert any(line.split() == ["TosaInput_1", "1x4", "INT8"] for line in lines)
    var_lines = [line.split() for line in lines if "acc" in line.split() or "hist" in line.split()]
    assert sorted(v[1:] for v in var_lines) == [["acc", "1x4", "INT32"], ["hist", "1x4", "INT8"]]
    assert any(line.split() == ["IDENTITY", "(variable", "read)", "3"] for line in lines)
    assert any(line.split() == ["IDENTITY", "(variable", "write)", "2"] for line in lines)
    assert "ops of" not in out


def test_inspect_ops(mlir_files, capsys):
    assert npu_main(["inspect", str(mlir_files["conv_rescale"]), "--ops"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.split() == ["CONV2D", "1"] for line in lines)  # histogram
    conv = next(i for i, line in enumerate(lines) if "CONV2D " in line and "pad=" in line)
    assert "pad=[1,1,1,1] stride=[1,1] dilation=[1,1] local_bound=false acc_type=INT32" in lines[conv]
    assert lines[conv + 1].strip().startswith("in:  TosaInput_0 1x6x6x2 INT8, ")
    assert "4x3x3x2 INT8" in lines[conv + 1]
    assert lines[conv + 2].strip().endswith("1x6x6x4 INT32")
    assert "rounding_mode=DOUBLE_ROUND" in out and "min_val=-100 max_val=100" in out
    # Small constants show their values.
    assert "= [38, 39, 40, 37]" in out


def test_format_graph_directly(mlir_files):
    g = read_tosa(mlir_files["shapes"])
    text = format_graph(g, show_ops=True)
    assert "CONST_SHAPE" in text and "SHAPE = [4, 6]" in text
    assert text.count("\n") > format_graph(g, show_ops=False).count("\n")


def test_inspect_bad_file_exit_status_and_one_line(tmp_path, capsys):
    bad = tmp_path / "broken.tosa"
    bad.write_bytes(b"\x10\x00\x00\x00TFL3" + bytes(40))
    assert npu_main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"npu inspect: error: {bad}: not a TOSA flatbuffer")
    assert npu_main(["inspect", str(tmp_path / "missing.tosa")]) == 2
    err = capsys.readouterr().err
    assert err == f"npu inspect: error: {tmp_path / 'missing.tosa'}: no such file\n"
