"""Bad input ends in one line naming what is wrong, exit status 2, and changes nothing.

Each case here is a signature the first fuzz campaign (issue 17) found ending in a traceback, a
silent answer or a half-written result: non-integer inputs and variables, a CONST writing a
variable, damaged .npy files, tensors too large to allocate, truncated .tosa files, state files
that do not fit the graph, an output folder that is a file, a closed pipe. Internal errors keep
their traceback and exit 3.
"""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from compiler.ir import Block, Graph, Operator, Region, Tensor
from compiler.tosa_io.writer import write_tosa
from firmware_model.tosa_ops import limits
from firmware_model.tosa_ops.dtypes import DType
from sim.cli import main as cli
from sim.cli.main import main
from sim.cli.state_file import UNWRITTEN_KEY, load_state, save_state
from sim.paths import MODELS_DIR, TEST_DATA

ACCUM = TEST_DATA / "conformance" / "variable" / "variable_accum_3_i32"


def one_line_error(capsys, *words) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("npu ") and ": error: " in err, err
    for w in words:
        assert w in err, err
    return err


def identity_graph(path, dtype=DType.INT8, shape=(1, 4), extra=None):
    b = Block("main")
    b.tensors["x"] = Tensor("x", list(shape), dtype)
    b.tensors["y"] = Tensor("y", list(shape), dtype)
    b.operators.append(Operator("IDENTITY", ["x"], ["y"]))
    b.inputs, b.outputs = ["x"], ["y"]
    if extra:
        extra(b)
    write_tosa(Graph([Region("main", [b])]), path)
    return path


@pytest.fixture
def accum(tmp_path):
    d = tmp_path / "t"
    shutil.copytree(ACCUM, d)
    return d


@pytest.fixture
def x_i8(tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.zeros((1, 4), np.int8))
    return p


# ---- .npy inputs --------------------------------------------------------------------------

def test_damaged_npy_inputs_are_named(tmp_path, x_i8, capsys):
    g = identity_graph(tmp_path / "g.tosa")
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    npz = tmp_path / "z.npz"
    np.savez(npz, a=np.zeros(3))
    header = tmp_path / "header.npy"
    header.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<i1' ((((   \n")
    cut = tmp_path / "cut.npy"
    cut.write_bytes(x_i8.read_bytes()[:-2])
    for f, words in ((empty, ("not a .npy file",)), (npz, (".npz archive",)), (header, ("not a readable .npy",)),
                     (cut, ("not a readable .npy",)), (tmp_path, ("is a folder",))):
        assert main(["run", str(g), "-i", f"x={f}", "-o", str(tmp_path / "o")]) == 2
        one_line_error(capsys, "input 'x'", str(f))


# ---- what the graph declares ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [DType.BF16, DType.FP6E3M2, DType.MXINT8, DType.FP32])
def test_a_non_integer_input_is_refused_by_name(tmp_path, x_i8, capsys, dtype):
    g = identity_graph(tmp_path / "g.tosa", dtype)
    for backend in ("interp", "golden"):
        assert main(["run", str(g), "-i", f"x={x_i8}", "-o", str(tmp_path / "o"), "--backend", backend]) == 2
        one_line_error(capsys, "'x' has element type", dtype.name)


def test_a_floating_point_variable_is_refused_by_name(tmp_path, x_i8, capsys):
    def fp_variable(b):
        b.tensors["v"] = Tensor("v", [1, 4], DType.FP32, data=np.zeros((1, 4), np.float32), is_variable=True,
                                variable_name="v")
    g = identity_graph(tmp_path / "g.tosa", extra=fp_variable)
    for backend in ("interp", "golden"):
        assert main(["run", str(g), "-i", f"x={x_i8}", "-o", str(tmp_path / "o"), "--backend", backend,
                     "--config", "tiny"]) == 2
        one_line_error(capsys, "variable 'v' has element type FP32")


def test_a_const_writing_a_variable_is_refused_everywhere(tmp_path, x_i8, capsys):
    """The interpreter used to run it and the compiler to fail with a KeyError: both now refuse
    it with the same rule."""
    def const_variable(b):
        b.tensors["c"] = Tensor("c", [1, 4], DType.INT8, data=np.zeros((1, 4), np.int8), is_variable=True,
                                variable_name="c")
        b.operators.insert(0, Operator("CONST", [], ["c"]))
    g = identity_graph(tmp_path / "g.tosa", extra=const_variable)
    for argv in (["run", str(g), "-i", f"x={x_i8}", "-o", str(tmp_path / "o")],
                 ["run", str(g), "-i", f"x={x_i8}", "-o", str(tmp_path / "o"), "--backend", "golden"],
                 ["compile", str(g), "-o", str(tmp_path / "p")]):
        assert main(argv) == 2
        one_line_error(capsys, "CONST", "'c' is variable 'c'", "only a variable write")


@pytest.mark.parametrize("shape", [(65536,) * 4, (1 << 20,) * 3, ((1 << 31) - 1, (1 << 31) - 1)])
def test_tensors_too_large_are_refused_before_allocation(tmp_path, x_i8, capsys, shape):
    g = identity_graph(tmp_path / "g.tosa", shape=shape)
    for argv in (["run", str(g), "-i", f"x={x_i8}", "-o", str(tmp_path / "o")],
                 ["compile", str(g), "-o", str(tmp_path / "p")]):
        assert main(argv) == 2
        one_line_error(capsys, "tensor 'x'", "over the limit of 1 GiB per tensor")


def test_the_tensor_limit_is_configurable(tmp_path, capsys, monkeypatch):
    g = identity_graph(tmp_path / "g.tosa", shape=(1024, 1024))          # 1 MiB
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1024, 1024), np.int8))
    assert main(["--tensor-limit-mib", "0.5", "run", str(g), "-i", f"x={x}", "-o", str(tmp_path / "o")]) == 2
    one_line_error(capsys, "tensor 'x'", "1 MiB", "512 KiB per tensor")
    assert limits.tensor_limit() == limits.DEFAULT_TENSOR_LIMIT_BYTES      # the option does not outlive main()
    assert main(["run", str(g), "-i", f"x={x}", "-o", str(tmp_path / "o")]) == 0
    monkeypatch.setenv(limits.ENV_VAR, "0.25")
    assert main(["compile", str(g), "-o", str(tmp_path / "p")]) == 2
    one_line_error(capsys, "tensor 'x'", "256 KiB per tensor")
    monkeypatch.setenv(limits.ENV_VAR, "lots")
    assert main(["compile", str(g), "-o", str(tmp_path / "p")]) == 2
    one_line_error(capsys, limits.ENV_VAR, "not a number")


def test_a_graph_whose_tensors_together_are_too_large(tmp_path, capsys):
    def many(b):      # 8 tensors of 600 MiB each: each under the limit, 4.7 GiB together
        prev = "x"
        for k in range(8):
            b.tensors[f"t{k}"] = Tensor(f"t{k}", [600, 1 << 20], DType.INT8)
            b.operators.append(Operator("IDENTITY", [prev], [f"t{k}"]))
            prev = f"t{k}"
    g = identity_graph(tmp_path / "g.tosa", shape=(600, 1 << 20), extra=many)
    assert main(["compile", str(g), "-o", str(tmp_path / "p")]) == 2
    one_line_error(capsys, "declared tensors", "together")


def test_a_truncated_tosa_file_is_called_truncated(tmp_path, capsys):
    data = (MODELS_DIR / "cnn32" / "model.tosa").read_bytes()
    for n in (10, 100, len(data) // 2, len(data) - 8):
        f = tmp_path / f"cut{n}.tosa"
        f.write_bytes(data[:n])
        assert main(["inspect", str(f)]) == 2
        one_line_error(capsys, str(f), "truncated")


# ---- where results go -----------------------------------------------------------------------

def test_compile_into_a_file_is_an_error(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("keep me")
    assert main(["compile", str(MODELS_DIR / "mlp" / "model.tosa"), "-o", str(f)]) == 2
    one_line_error(capsys, str(f), "is a file")
    assert f.read_text() == "keep me"


def test_a_closed_pipe_ends_inspect_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli.main", "inspect", "--ops",
                             str(MODELS_DIR / "blazeface" / "model.tosa")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()            # as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and not err.strip(), err


def test_an_internal_error_keeps_its_traceback_and_exits_3(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("a bug")
    monkeypatch.setattr(cli, "cmd_inspect", broken)
    assert main(["inspect", "whatever.tosa"]) == cli.EXIT_INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug" in err and "internal error" in err


# ---- state files ----------------------------------------------------------------------------

def _x(tmp_path, value=(1, 2, 3)):
    p = tmp_path / "x.npy"
    np.save(p, np.array(value, np.int32))
    return p


def _golden_state(accum, tmp_path):
    """A state file as the golden backend writes it: the SRAM image and the values by name."""
    state = tmp_path / "golden.npz"
    assert main(["run", str(accum / "test.tosa"), "-i", f"input-0={_x(tmp_path)}", "-o", str(tmp_path / "o0"),
                 "--backend", "golden", "--config", "tiny", "--state", str(state)]) == 0
    return state


@pytest.mark.parametrize("backend", ["interp", "golden"])
@pytest.mark.parametrize("edit, words", [
    (lambda a: a.update(nosuch=np.zeros(3, np.int32)), ("'nosuch' is not a variable",)),
    (lambda a: a.update(acc=np.zeros(4, np.int32)), ("variable 'acc' has shape [4]",)),
    (lambda a: a.update(acc=np.zeros(3, np.int16)), ("variable 'acc' is stored as int16",)),
    (lambda a: a.update(acc=np.full(3, np.nan)), ("variable 'acc' is stored as float64",)),
    (lambda a: a.update(acc=np.array(5, np.int32)), ("variable 'acc' has shape []",)),
    (lambda a: a.update(acc=a["acc"] + 1), ("disagrees with its variable-SRAM image",)),
    (lambda a: a.update(__npu_other=np.zeros(1)), ("'__npu_other' is not part of a state file",)),
    (lambda a: a.update(__npu_slot_written=np.full(32, np.nan, np.float32)), ("slot flags", "not 32 booleans")),
    (lambda a: a.update(__npu_variable_sram=a["__npu_variable_sram"].astype(np.int16)), ("not a row of bytes",)),
])
def test_every_value_of_a_golden_state_file_is_checked(accum, tmp_path, capsys, backend, edit, words):
    arrays = load_state(_golden_state(accum, tmp_path))
    edit(arrays)
    state = tmp_path / "edited.npz"
    save_state(state, arrays)
    before = state.read_bytes()
    capsys.readouterr()
    rc = main(["run", str(accum / "test.tosa"), "-i", f"input-0={_x(tmp_path)}", "-o", str(tmp_path / "o"),
               "--backend", backend, "--config", "tiny", "--state", str(state)])
    if backend == "interp" and "image" in words[0]:
        assert rc == 0        # the interpreter reads the values by name; the image is golden's
        return
    assert rc == 2
    one_line_error(capsys, str(state), *words)
    assert state.read_bytes() == before and not (tmp_path / "o").exists()


@pytest.mark.parametrize("backend", ["interp", "golden"])
def test_a_missing_variable_is_an_error_unless_asked_for(accum, tmp_path, capsys, backend):
    empty = tmp_path / "empty.npz"
    save_state(empty, {})
    before = empty.read_bytes()
    argv = ["run", str(accum / "test.tosa"), "-i", f"input-0={_x(tmp_path)}", "-o", str(tmp_path / "o"),
            "--backend", backend, "--config", "tiny", "--state", str(empty)]
    assert main(argv) == 2
    one_line_error(capsys, str(empty), "no value for variable 'acc'", "--init-missing")
    assert empty.read_bytes() == before
    assert main(argv + ["--init-missing"]) == 0
    assert set(load_state(empty)) >= {"acc"}


def test_a_state_file_records_the_variables_with_no_value_yet(tmp_path, capsys):
    """A variable declared but never written is listed as such, so that the file is complete
    and the next run does not mistake it for a missing one."""
    def unwritten(b):
        b.tensors["v"] = Tensor("v", [1, 4], DType.INT8, is_variable=True, variable_name="v")
        b.operators.insert(0, Operator("VARIABLE", [], ["v"]))
    g = identity_graph(tmp_path / "g.tosa", extra=unwritten)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 4), np.int8))
    state = tmp_path / "s.npz"
    argv = ["run", str(g), "-i", f"x={x}", "-o", str(tmp_path / "o"), "--state", str(state)]
    assert main(argv) == 0, capsys.readouterr().err
    assert UNWRITTEN_KEY in load_state(state)
    assert main(argv) == 0, capsys.readouterr().err


def test_outputs_and_state_are_written_together_or_not_at_all(accum, tmp_path, capsys, monkeypatch):
    state = tmp_path / "state.npz"
    out = tmp_path / "o"
    argv = ["run", str(accum / "test.tosa"), "-i", f"input-0={_x(tmp_path)}", "-o", str(out), "--state", str(state)]
    assert main(argv) == 0
    outputs_before = {f.name: f.read_bytes() for f in out.iterdir()}
    state_before = state.read_bytes()
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst) == str(state):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)
    monkeypatch.setattr(os, "replace", failing_replace)
    assert main(argv) == 2
    one_line_error(capsys, str(state), "No space left")
    monkeypatch.setattr(os, "replace", real_replace)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == outputs_before     # put back
    assert state.read_bytes() == state_before
    assert not [f for f in [*out.iterdir(), *tmp_path.iterdir()] if f.name.startswith(".")]


def test_a_state_file_in_a_missing_folder_fails_before_the_run(accum, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", str(accum / "test.tosa"), "-i", f"input-0={_x(tmp_path)}", "-o", str(out),
                 "--state", str(tmp_path / "nofolder" / "s.npz")]) == 2
    one_line_error(capsys, "nofolder", "does not exist")
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize("shape", [[65536, 1048576, 65536, 65536, 4], [16, 0, 1048576, 65536, 7, (1 << 31) - 1]])
def test_a_constant_without_data_and_a_huge_shape_is_a_format_error(tmp_path, capsys, shape):
    """Found by make fuzz: the element count wrapped to 0 in int64, and a zero-element shape
    with huge dims is still more than numpy can index; both ended in tracebacks in the reader."""
    def const(b):
        b.tensors["c"] = Tensor("c", shape, DType.INT8)
        b.operators.insert(0, Operator("CONST", [], ["c"]))
    g = identity_graph(tmp_path / "g.tosa", extra=const)
    assert main(["inspect", str(g)]) == 2
    one_line_error(capsys, "'c'")


@pytest.mark.parametrize("value, words", [
    (np.zeros(4, np.int32), "has shape [4]"),
    (np.zeros(3, np.int16), "is stored as int16"),
    (np.full(3, np.nan), "is stored as float64"),
    (np.array(5, np.int32), "has shape []"),
])
def test_every_reader_of_a_variable_value_refuses_it_alike(accum, value, words):
    """The interpreter, the golden model's variable SRAM and the state-file check ask one
    question (dtypes.value_problem) and give its answer."""
    from compiler.interpreter import Interpreter, InterpreterError
    from compiler.tosa_io import read_tosa
    from firmware_model.errors import GoldenModelError
    from firmware_model.tosa_ops.dtypes import value_problem
    from sim.cli.state_file import StateFileError, check_state
    from sim.oracles.backends import GoldenSession

    assert words in value_problem(value, DType.INT32, (3,))
    assert value_problem(np.zeros(3, np.int32), DType.INT32, (3,)) is None
    graph = read_tosa(accum / "test.tosa")
    with pytest.raises(InterpreterError, match=re.escape(words)):
        Interpreter(graph).load_state({"acc": value})
    with pytest.raises(GoldenModelError, match=re.escape(words)):
        GoldenSession(graph, "tiny").load_state({"acc": value})
    with pytest.raises(StateFileError, match=re.escape(words)):
        check_state("s.npz", {"acc": value}, Interpreter(graph).variables)
