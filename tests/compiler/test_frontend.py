"""The compiler's front end: shape resolution (unknown dims bound from the inputs and --bind, shape
operators evaluated), validation (the TOSA rules checked with the interpreter's own step, so the
golden backend refuses every negative conformance test), and the CompileErrors a user can meet,
each naming the op or tensor at fault."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from sim.paths import TEST_DATA
from compiler.errors import CompileError, TosaFormatError, TosaRuleError
from compiler.interpreter import Interpreter
from compiler.ir import Block, Graph, Operator, Region, Tensor
from compiler.pipeline import compile_file, compile_graph, parse_binds
from compiler.tosa_io import read_tosa
from firmware_model.errors import TosaUnpredictable
from firmware_model.golden.model import GoldenModel
from firmware_model.arch.config import load_config
from firmware_model.tosa_ops.dtypes import DType
from sim.cli.main import main
from sim.models.mlir_graphs import serialize
from sim.oracles.tosa_sut import ERROR, VALID, execute_test

DATA = TEST_DATA
I8, I16, I32, SHAPE, FP32 = DType.INT8, DType.INT16, DType.INT32, DType.SHAPE, DType.FP32


def _graph(tensors, ops, inputs, outputs) -> Graph:
    b = Block("main", operators=ops, tensors={t.name: t for t in tensors}, inputs=inputs, outputs=outputs)
    return Graph([Region("main", [b])], source="test.tosa")


def dynamic_add() -> Graph:
    """s = a + b (a: ?x4), m = REDUCE_MAX(s, axis 0)."""
    ts = [Tensor("a", [-1, 4], I32), Tensor("b", [1, 4], I32), Tensor("s", [-1, 4], I32), Tensor("m", [1, 4], I32)]
    ops = [Operator("ADD", ["a", "b"], ["s"]), Operator("REDUCE_MAX", ["s"], ["m"], attrs={"axis": 0})]
    return _graph(ts, ops, ["a", "b"], ["s", "m"])


def run_both(graph: Graph, inputs: dict, config: str = "tiny", **kw) -> tuple[dict, dict]:
    cfg = load_config(config)
    ctx = compile_graph(graph, cfg, input_shapes={n: a.shape for n, a in inputs.items()}, **kw)
    return GoldenModel(ctx.program, cfg).invoke(inputs), Interpreter(graph).run(inputs)


def assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for n in want:
        assert got[n].dtype == want[n].dtype and got[n].shape == want[n].shape and np.array_equal(got[n], want[n]), n


# ---- shape resolution -------------------------------------------------------------------------

@pytest.mark.parametrize("rows", [1, 5])
def test_unknown_dims_are_bound_from_the_inputs(rows):
    a = np.arange(4 * rows, dtype=np.int32).reshape(rows, 4)
    got, want = run_both(dynamic_add(), {"a": a, "b": np.ones((1, 4), np.int32)})
    assert_same(got, want)
    assert got["s"].shape == (rows, 4)


def test_bind_fixes_a_dim_and_the_compiled_graph_is_static():
    ctx = compile_graph(dynamic_add(), load_config("tiny"), binds={"a[0]": 3})
    assert all(t.is_static for t in ctx.block.tensors.values())
    assert ctx.block.tensors["s"].shape == [3, 4]
    assert [p["shape"] for p in ctx.program.manifest["graph"]["outputs"]] == [[3, 4], [1, 4]]


SHAPE_MLIR = """module {
  func.func @main(%x: tensor<?x6xi32>, %y: tensor<1x6xi32>) -> (tensor<?x6xi32>, tensor<?xi32>) {
    %s = tosa.add %x, %y : (tensor<?x6xi32>, tensor<1x6xi32>) -> tensor<?x6xi32>
    %d = tosa.dim %s {axis = 0 : i32} : (tensor<?x6xi32>) -> !tosa.shape<1>
    %c6 = tosa.const_shape {values = dense<[6]> : tensor<1xindex>} : () -> !tosa.shape<1>
    %n = tosa.mul_shape %d, %c6 : (!tosa.shape<1>, !tosa.shape<1>) -> !tosa.shape<1>
    tosa.assert_equal_shape %n, %n {allow_broadcast = false} : (!tosa.shape<1>, !tosa.shape<1>) -> ()
    %r = tosa.reshape %s, %n : (tensor<?x6xi32>, !tosa.shape<1>) -> tensor<?xi32>
    return %s, %r : tensor<?x6xi32>, tensor<?xi32>
  }
}
"""


@pytest.fixture(scope="module")
def shape_model(tmp_path_factory) -> Path:
    """A tosa-opt graph with a dynamic dim and shape operators (DIM, MUL_SHAPE, ASSERT_EQUAL_SHAPE)."""
    return serialize(SHAPE_MLIR, tmp_path_factory.mktemp("shape_model"))


@pytest.mark.parametrize("rows", [1, 3, 7])
def test_shape_operators_are_evaluated_at_compile_time(shape_model, rows):
    graph = read_tosa(shape_model)
    assert graph.main.tensors["TosaInput_0"].shape == [-1, 6]
    x = np.arange(6 * rows, dtype=np.int32).reshape(rows, 6) - 20
    inputs = {"TosaInput_0": x, "TosaInput_1": np.full((1, 6), 3, np.int32)}
    cfg = load_config("default")
    ctx = compile_graph(graph, cfg, input_shapes={n: a.shape for n, a in inputs.items()}, print_after=())
    assert "shape resolution: 3 shape op(s) evaluated at compile time" in ctx.report
    ops = [op.op for op in read_tosa(shape_model).main.operators]
    assert {"DIM", "MUL_SHAPE", "ASSERT_EQUAL_SHAPE"} <= set(ops)
    got = GoldenModel(ctx.program, cfg).invoke(inputs)
    want = Interpreter(graph).run(inputs)
    assert_same(got, want)
    assert got["TosaOutput_1"].shape == (6 * rows,) and np.array_equal(got["TosaOutput_1"], (x + 3).reshape(-1))


def test_npu_run_golden_with_bind_and_npu_compile(shape_model, tmp_path, capsys):
    x = tmp_path / "x.npy"
    y = tmp_path / "y.npy"
    np.save(x, np.arange(12, dtype=np.int32).reshape(2, 6))
    np.save(y, np.ones((1, 6), np.int32))
    args = ["run", str(shape_model), "-i", f"TosaInput_0={x}", "-i", f"TosaInput_1={y}", "--backend", "golden"]
    assert main(args + ["-o", str(tmp_path / "o"), "--bind", "TosaInput_0[0]=2"]) == 0
    assert np.load(tmp_path / "o" / "TosaOutput_1.npy").shape == (12,)
    capsys.readouterr()
    assert main(args + ["-o", str(tmp_path / "o"), "--bind", "TosaInput_0[0]=3"]) == 2
    err = capsys.readouterr().err
    assert "--bind TosaInput_0[0]=3: the array given for input 'TosaInput_0' has dim 0 = 2" in err
    # npu compile: without the dim a CompileError naming the tensor and the dim; with --bind it compiles
    assert main(["compile", str(shape_model), "-o", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "graph input 'TosaInput_0' has unknown dim 0" in err and "--bind TosaInput_0[0]=N" in err
    assert main(["compile", str(shape_model), "-o", str(tmp_path / "p"), "--bind", "TosaInput_0[0]=4"]) == 0
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert [p["shape"] for p in manifest["graph"]["outputs"]] == [[4, 6], [24]]


@pytest.mark.parametrize("binds,match", [
    ({"a": 3}, r"--bind a=3: expected TENSOR\[DIM\]=N"),
    ({"zz[0]": 3}, "the graph has no tensor named 'zz'"),
    ({"a[2]": 3}, "tensor 'a' has rank 2"),
    ({"a[0]": 0}, "a dim must be at least 1"),
    ({"a[1]": 5}, "dim 1 of 'a' is 4 in the graph"),
])
def test_bad_binds_are_compile_errors(binds, match):
    with pytest.raises(CompileError, match=match):
        compile_graph(dynamic_add(), load_config("tiny"), binds=binds)


def test_bad_bind_syntax_and_inputs_that_do_not_fit(tmp_path, capsys):
    with pytest.raises(CompileError, match="expected NAME=VALUE"):
        parse_binds(["a[0]"])
    with pytest.raises(CompileError, match="'x' is not an integer"):
        parse_binds(["a[0]=x"])
    with pytest.raises(CompileError, match=r"input 'a' has shape \[\?,4\], the array given has shape \[2, 5\]"):
        compile_graph(dynamic_add(), load_config("tiny"), input_shapes={"a": (2, 5)})
    with pytest.raises(CompileError, match="input 'a' has rank 2"):
        compile_graph(dynamic_add(), load_config("tiny"), input_shapes={"a": (8,)})
    with pytest.raises(CompileError, match="'q' is not an input"):
        compile_graph(dynamic_add(), load_config("tiny"), input_shapes={"q": (1,)})


def test_unresolvable_dims_name_the_tensor_and_the_dim():
    with pytest.raises(CompileError, match=r"graph input 'a' has unknown dim 0 \(shape \[\?,4\]\).*--bind a\[0\]=N"):
        compile_graph(dynamic_add(), load_config("tiny"))
    # a variable declared with an open dim
    ts = [Tensor("x", [2, 3], I8), Tensor("v", [2, -1], I8, is_variable=True, variable_name="st")]
    g = _graph(ts, [Operator("IDENTITY", ["x"], ["v"], attr_kind="VariableWriteAttribute")], ["x"], [])
    with pytest.raises(CompileError, match=r"variable 'st': tensor 'v' has unknown dim 1.*--bind v\[1\]=N"):
        compile_graph(g, load_config("tiny"))
    assert compile_graph(g, load_config("tiny"), binds={"v[1]": 3}).variables[0]["shape"] == [2, 3]
    # a shape value computed from input data cannot be evaluated at compile time
    ts = [Tensor("x", [6], I8), Tensor("sh", [2], SHAPE), Tensor("k", [2], SHAPE, data=np.array([1, 1], np.int64)),
          Tensor("n", [2], SHAPE), Tensor("y", [-1, -1], I8)]
    ops = [Operator("CONST_SHAPE", [], ["k"]), Operator("ADD_SHAPE", ["sh", "k"], ["n"]),
           Operator("RESHAPE", ["x", "n"], ["y"])]
    g = _graph(ts, ops, ["x", "sh"], ["y"])
    with pytest.raises(CompileError, match=r"op %1 ADD_SHAPE -> n: the shape value 'n' depends on input data"):
        compile_graph(g, load_config("tiny"), input_shapes={"x": (6,), "sh": (2,)})


def test_committed_shape_operator_tests_on_both_backends():
    """Arm's generator's tests of the shape operators (tests/data/shape_ops, one or two positive
    tests per op with the reference model's answers, one negative test per ERROR_IF kind)."""
    tests = sorted(p.parent for p in (DATA / "shape_ops").rglob("desc.json"))
    assert len(tests) >= 90
    ops = {t.parent.name for t in tests}
    assert ops == {"dim", "add_shape", "sub_shape", "mul_shape", "div_floor_shape", "div_ceil_shape", "mod_shape",
                   "max_shape", "min_shape", "exp2_shape", "log2_ceil_shape", "log2_floor_shape", "concat_shape",
                   "slice_shape", "assert_equal_shape"}
    problems = []
    for t in tests:
        desc = json.loads((t / "desc.json").read_text())
        for backend in ("interp", "golden"):
            code, msg, outs = execute_test(t, desc, backend=backend, write=False, config="tiny")
            if desc["expected_failure"]:
                if code != ERROR:
                    problems.append(f"{backend} {t.name}: expected TOSA_ERROR, got {code} {msg}")
                continue
            if code != VALID:
                problems.append(f"{backend} {t.name}: {code} {msg}")
                continue
            for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
                exp = np.load(t / f"expected_{f}")
                if outs[name].dtype != exp.dtype or not np.array_equal(outs[name], exp):
                    problems.append(f"{backend} {t.name}: output {name} differs from the reference model")
    assert not problems, "\n".join(problems)


# ---- validation -------------------------------------------------------------------------------

CONFORMANCE = DATA / "conformance"


def test_golden_backend_on_the_conformance_slice():
    """Every test of the committed slice through the golden backend ('default'): negative tests are
    TOSA_ERROR (refused by the compiler's validation or the reader), positive ones bit-exact."""
    problems, negatives = [], 0
    for t in sorted(p.parent for p in CONFORMANCE.rglob("desc.json")):
        desc = json.loads((t / "desc.json").read_text())
        code, msg, outs = execute_test(t, desc, backend="golden", write=False, config="default")
        if desc["expected_failure"]:
            negatives += 1
            if code != ERROR:
                problems.append(f"{t.name}: expected TOSA_ERROR, got {code} {msg}")
            continue
        if code != VALID:
            problems.append(f"{t.name}: {code}: {msg}")
            continue
        for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
            exp = np.load(t / f"expected_{f}")
            got = outs[name]
            if got.dtype != exp.dtype or got.shape != exp.shape or not np.array_equal(got, exp):
                problems.append(f"{t.name}: output {name} differs from the reference model")
    assert negatives >= 100 and not problems, "\n".join(problems)


def test_negative_conformance_tests_are_refused_by_the_compiler_naming_op_and_rule():
    refused = 0
    for t in sorted(p.parent for p in CONFORMANCE.rglob("desc.json") if "_ERRORIF_" in p.parent.name)[::5]:
        desc = json.loads((t / "desc.json").read_text())
        try:
            graph = read_tosa(t / desc["tosa_file"])
        except TosaFormatError:   # the reader refuses structurally malformed graphs itself
            continue
        inputs = {n: np.load(t / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
        with pytest.raises(TosaRuleError) as e:
            compile_graph(graph, load_config("tiny"), input_shapes={n: a.shape for n, a in inputs.items()})
        assert e.value.is_error_if and "ERROR_IF" in str(e.value)
        assert re.search(r": op %\d+ [A-Z_0-9]+ -> |: GRAPH|: VARIABLE", str(e.value)), str(e.value)
        refused += 1
    assert refused >= 20


def test_validation_names_the_op_and_the_rule():
    ts = [Tensor("a", [2, 3], I32), Tensor("b", [3, 2], I32), Tensor("s", [2, 3], I32)]
    with pytest.raises(TosaRuleError, match=r"test.tosa: op %0 ADD -> s: ERROR_IF shapes \(2, 3\) and \(3, 2\) "
                                            r"do not broadcast") as e:
        compile_graph(_graph(ts, [Operator("ADD", ["a", "b"], ["s"])], ["a", "b"], ["s"]), load_config("tiny"))
    assert e.value.is_error_if
    # the declared output shape is checked like the interpreter checks it
    ts = [Tensor("a", [2], I32), Tensor("s", [3], I32)]
    with pytest.raises(TosaRuleError, match=r"op %0 ABS -> s: ERROR_IF output shape"):
        compile_graph(_graph(ts, [Operator("ABS", ["a"], ["s"])], ["a"], ["s"]), load_config("tiny"))
    # a graph output nobody writes
    with pytest.raises(TosaRuleError, match="graph output 's' is never written"):
        compile_graph(_graph(ts, [], ["a"], ["s"]), load_config("tiny"))
    # an operand list of the wrong length (Arm's WrongInputList tests)
    ts = [Tensor("a", [2], I32), Tensor("s", [2], I32)]
    with pytest.raises(TosaRuleError, match=r"op %0 ADD -> s: ERROR_IF has 3 inputs"):
        compile_graph(_graph(ts, [Operator("ADD", ["a", "a", "a"], ["s"])], ["a"], ["s"]), load_config("tiny"))


def test_require_on_placeholder_data_is_not_an_error():
    """INTDIV by a graph input: zeros would divide by zero (a REQUIRE), but the compiler does not
    know the input; the divide-by-zero is reported at run time, as the interpreter does."""
    ts = [Tensor("a", [3], I32), Tensor("b", [3], I32), Tensor("q", [3], I32)]
    g = _graph(ts, [Operator("INTDIV", ["a", "b"], ["q"])], ["a", "b"], ["q"])
    a, b = np.array([7, -9, 100], np.int32), np.array([2, 4, -7], np.int32)
    got, want = run_both(g, {"a": a, "b": b})
    assert_same(got, want)
    cfg = load_config("tiny")
    model = GoldenModel(compile_graph(g, cfg).program, cfg)
    with pytest.raises(TosaUnpredictable, match="INTDIV"):
        model.invoke({"a": a, "b": np.zeros(3, np.int32)})


def test_unsupported_ops_are_compile_errors_naming_the_op():
    ts = [Tensor("a", [2], I32), Tensor("s", [2], I32)]
    with pytest.raises(CompileError, match=r"op %0 COS -> s: not supported: COS: npu-bench has no implementation"):
        compile_graph(_graph(ts, [Operator("COS", ["a"], ["s"])], ["a"], ["s"]), load_config("tiny"))
    ts = [Tensor("a", [2], FP32), Tensor("b", [2], FP32), Tensor("s", [2], FP32)]
    with pytest.raises(CompileError, match=r"'a' has element type FP32, outside npu-bench's integer profile"):
        compile_graph(_graph(ts, [Operator("ADD", ["a", "b"], ["s"])], ["a", "b"], ["s"]), load_config("tiny"))
    with pytest.raises(CompileError, match=r"graph output 's' has element type FP32, outside"):
        compile_graph(_graph([Tensor("a", [2], I32), Tensor("s", [2], FP32)],
                             [Operator("ABS", ["a"], ["s"])], ["a"], ["s"]), load_config("tiny"))


def test_graph_larger_than_external_memory_names_the_tensors():
    ts = [Tensor("big_in", [2048, 4096], I8), Tensor("wide_out", [2048, 4096], I16)]
    g = _graph(ts, [Operator("CAST", ["big_in"], ["wide_out"])], ["big_in"], ["wide_out"])
    with pytest.raises(CompileError, match=r"needs \d+ bytes of external memory .*'wide_out' 16777216 B, "
                                           r"'big_in' 8388608 B.*'tiny' configuration has 16777216 B \(external.size\)"):
        compile_graph(g, load_config("tiny"))
    assert compile_graph(g, load_config("default")).program is not None


def test_print_after_shows_the_passes(capsys):
    import io

    buf = io.StringIO()
    compile_file(DATA.parent.parent / "models" / "gru" / "model.tosa", load_config("tiny"),
                 print_after=("validation", "state_legalization"), out=buf)
    text = buf.getvalue()
    assert "IR after validation" in text and "IR after state_legalization" in text
    assert "variable gru/state_h: {'name': 'gru/state_h'" in text and "%0 VARIABLE()" in text


def test_golden_backend_through_arms_runner(tmp_path):
    """Arm's runner with `--sut-module-args sim.oracles.tosa_sut:backend=golden` and `...:config=tiny`: a
    positive and a negative test of a few ops, and two variable tests; the runner compares with
    the reference model (tosa_verify, EXACT)."""
    from sim.oracles.conformance import run_runner

    subset = tmp_path / "tests"
    n = 0
    for op in ("add", "conv2d", "rescale", "reshape", "variable"):
        tests = sorted(p.parent for p in (CONFORMANCE / op).glob("*/desc.json"))
        pos = [t for t in tests if "_ERRORIF_" not in t.name][:1]
        neg = [t for t in tests if "_ERRORIF_" in t.name][:1]
        for t in pos + neg:
            shutil.copytree(t, subset / op / t.name)
            n += 1
    res = run_runner(subset, backend="golden", jobs=2, config="tiny")
    counts = res["counts"]
    assert counts.get("unexpected_failure", 0) == 0 and counts.get("unexpected_pass", 0) == 0, res["failures"]
    assert counts.get("internal_error", 0) == 0, res["failures"]
    assert counts.get("expected_pass", 0) == n // 2 and counts.get("expected_failure", 0) == n // 2, res["totals"]
    # the options reach the SUT: a configuration that does not exist fails the positive test
    one = tmp_path / "one"
    shutil.copytree(subset / "add", one / "add")
    shutil.rmtree(next(p for p in (one / "add").iterdir() if "_ERRORIF_" in p.name))
    res = run_runner(one, backend="golden", jobs=1, config="no_such_config")
    assert res["counts"].get("unexpected_failure", 0) == 1, res["totals"]
