"""TOSA variables on the NPU: state legalization (slots in the variable SRAM), the VAR command of
the golden model, persistence across invocations in one process and across `npu run --backend
golden --state` processes, and the spec's rules (seen, is_written, shape, type) exactly as the
interpreter applies them.

The real stateful networks (models/lstm, models/gru) run their three committed invocations with
the state carried over and must give the reference model's outputs and states bit for bit, and
the interpreter's, on the tiny, default and large configurations.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from sim.paths import REPO_ROOT, TEST_DATA
from compiler.errors import CompileError, TosaRuleError
from compiler.interpreter import Interpreter
from compiler.ir import Block, Graph, Operator, Region, Tensor
from compiler.pipeline import compile_file, compile_graph
from compiler.tosa_io import read_tosa, write_tosa
from firmware_model.errors import GoldenModelError, TosaUnpredictable
from firmware_model.golden.model import GoldenModel
from firmware_model.arch.isa import VAR_SLOTS, Command, Opcode, Reg, Sram, Status, VarOp
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import load_config
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.golden.var_unit import execute_var
from sim.cli.main import main
from sim.vectors.variable_graphs import accumulator_feeds, two_accumulators
from sim.cli.state_file import load_state, save_state
from sim.oracles.tosa_sut import ERROR, UNPREDICTABLE, VALID, execute_test

ROOT = REPO_ROOT
MODELS = ROOT / "models"
VARIABLE_TESTS = TEST_DATA / "conformance" / "variable"
CONFIGS = ("tiny", "default", "large")
I8, I32 = DType.INT8, DType.INT32
READ, WRITE = "VariableReadAttribute", "VariableWriteAttribute"


def _io(name: str) -> dict:
    return json.loads((MODELS / name / "io.json").read_text())


def _graph(tensors, ops, inputs, outputs) -> Graph:
    b = Block("main", operators=ops, tensors={t.name: t for t in tensors}, inputs=inputs, outputs=outputs)
    return Graph([Region("main", [b])], source="test.tosa")


def i32(*v):
    return np.array(v, np.int32)


def accumulator(initial=(1, 2, 3)) -> Graph:
    """out0 = state; state += x; out1 = state (the flatbuffer IDENTITY form)."""
    ts = [Tensor("x", [3], I32), Tensor("v", [3], I32, data=np.array(initial, np.int32), is_variable=True,
                                        variable_name="acc"),
          Tensor("r0", [3], I32), Tensor("s", [3], I32), Tensor("r1", [3], I32)]
    ops = [Operator("IDENTITY", ["v"], ["r0"], attr_kind=READ), Operator("ADD", ["r0", "x"], ["s"]),
           Operator("IDENTITY", ["s"], ["v"], attr_kind=WRITE), Operator("IDENTITY", ["v"], ["r1"], attr_kind=READ)]
    return _graph(ts, ops, ["x"], ["r0", "r1"])


def golden(graph: Graph, config: str = "tiny") -> GoldenModel:
    cfg = load_config(config)
    return GoldenModel(compile_graph(graph, cfg).program, cfg)


# ---- the real stateful networks ---------------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_stateful_network_over_three_invocations_in_one_process(name, config):
    io = _io(name)
    folder = MODELS / name
    cfg = load_config(config)
    ctx = compile_file(folder / "model.tosa", cfg)
    layout = {v["name"]: v for v in ctx.program.manifest["variables"]}
    assert sorted(layout) == sorted(v["variable_name"] for v in io["variables"])
    assert all(v["addr"] % cfg.word_bytes == 0 and v["bytes"] == (32 if name == "lstm" else 24) for v in layout.values())
    model = GoldenModel(ctx.program, cfg)
    interp = Interpreter(read_tosa(folder / "model.tosa"))
    in_name, out_name = io["inputs"][0]["name"], io["outputs"][0]["name"]
    for k in range(io["invocations"]):
        if k:   # the state the previous invocation wrote is the reference state before this one
            state = model.save_state()
            for v in io["variables"]:
                want = np.load(folder / v["state_before"][k])
                assert np.array_equal(state[v["variable_name"]], want), (v["variable_name"], k)
        x = np.load(folder / io["inputs"][0]["files"][k])
        got = model.invoke({in_name: x})[out_name]
        ref = np.load(folder / io["outputs"][0]["files"][k])
        assert got.dtype == ref.dtype and np.array_equal(got, ref), f"invocation {k}"
        assert np.array_equal(got, interp.run({in_name: x})[out_name])
    state = model.save_state()
    for v in io["variables"]:
        want = np.load(folder / v["state_after"][0])
        assert np.array_equal(state[v["variable_name"]], want)
        assert np.array_equal(interp.state[v["variable_name"]], want)
    n = len(io["variables"])
    # the initial values are loaded on the first invocation only; every read and write is a VAR command
    assert model.counters.var["INIT loaded"] == n and model.counters.var["INIT kept"] == 2 * n
    assert model.counters.var["READ"] == model.counters.var["WRITE"] == 3 * n


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_stateful_network_through_three_npu_run_calls(name, config, tmp_path, capsys):
    """Three `npu run --backend golden --state` calls (each a fresh, powered-on NPU that knows the
    state only from the file) give the reference outputs and leave the reference state."""
    io = _io(name)
    folder = MODELS / name
    state = tmp_path / "state.npz"
    for k in range(io["invocations"]):
        out = tmp_path / f"out{k}"
        rc = main(["run", str(folder / "model.tosa"), "-i", f"{io['inputs'][0]['name']}="
                   f"{folder / io['inputs'][0]['files'][k]}", "-o", str(out), "--backend", "golden",
                   "--config", config, "--state", str(state)])
        assert rc == 0, capsys.readouterr().err
        got = np.load(out / f"{io['outputs'][0]['name']}.npy")
        assert np.array_equal(got, np.load(folder / io["outputs"][0]["files"][k]))
        saved = load_state(state)
        for v in io["variables"]:
            want = v["state_before"][k + 1] if k + 1 < io["invocations"] else v["state_after"][0]
            assert np.array_equal(saved[v["variable_name"]], np.load(folder / want))


def test_lstm_across_three_processes(tmp_path):
    """The same with three real processes (the state travels only through the file)."""
    io = _io("lstm")
    folder = MODELS / "lstm"
    state = tmp_path / "state.npz"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for k in range(3):
        out = tmp_path / f"out{k}"
        r = subprocess.run([sys.executable, "-m", "sim.cli.main", "run", str(folder / "model.tosa"), "-i",
                            f"TosaInput_0={folder / io['inputs'][0]['files'][k]}", "-o", str(out),
                            "--backend", "golden", "--config", "tiny", "--state", str(state)],
                           capture_output=True, text=True, cwd=ROOT, env=env)
        assert r.returncode == 0, r.stderr
        assert "golden model on 'tiny'" in r.stdout
        assert np.array_equal(np.load(out / "TosaOutput_0.npy"), np.load(folder / io["outputs"][0]["files"][k]))


# ---- the VAR command --------------------------------------------------------------------------

def _var(mem, cfg, op, *, addr=0, nbytes=8, slot=0, ext=0):
    regs = {Reg.VAR_ADDR: addr, Reg.VAR_BYTES: nbytes, Reg.VAR_SLOT: slot, Reg.VAR_EXT_ADDR: ext}
    return execute_var(cfg, mem, regs, int(op), {slot: "v"})


def test_var_init_loads_only_while_the_slot_is_unwritten():
    cfg = load_config("tiny")
    mem = Memories(cfg)
    mem.ext[100:108] = np.arange(1, 9, dtype=np.uint8)
    r = _var(mem, cfg, VarOp.INIT, addr=8, ext=100, slot=3)
    assert r.bytes == 8 and mem.variable_slots[3] and not mem.variable_slots[2]
    assert np.array_equal(mem.sram[Sram.VARIABLE][8:16], np.arange(1, 9))
    mem.ext[100:108] = 0                          # a later INIT (next invocation) keeps the value
    r = _var(mem, cfg, VarOp.INIT, addr=8, ext=100, slot=3)
    assert r.bytes == 0 and r.cycles == 0        # no transfer: the DMA engine is not used
    assert np.array_equal(mem.sram[Sram.VARIABLE][8:16], np.arange(1, 9))
    mem.ext[200:208] = 7                          # WRITE replaces it, READ returns it
    _var(mem, cfg, VarOp.WRITE, addr=8, ext=200, slot=3)
    _var(mem, cfg, VarOp.READ, addr=8, ext=300, slot=3)
    assert np.all(mem.ext[300:308] == 7)
    mem.power_on_reset()                          # the first reset of a fresh memory is free ...
    mem.power_on_reset()                          # ... a real one clears contents and flags
    assert not mem.variable_slots.any() and not mem.sram[Sram.VARIABLE].any()


def test_var_read_before_write_is_refused_and_copies_nothing():
    cfg = load_config("tiny")
    mem = Memories(cfg)
    mem.ext[0:8] = 5
    with pytest.raises(GoldenModelError, match="variable 'v'.*read before it is written") as e:
        _var(mem, cfg, VarOp.READ, slot=1, ext=0)
    assert e.value.status == Status.VAR_READ_BEFORE_WRITE and np.all(mem.ext[0:8] == 5)


@pytest.mark.parametrize("kw,status", [({"slot": VAR_SLOTS}, Status.ADDRESS_RANGE),
                                       ({"addr": 2}, Status.ADDRESS_RANGE),
                                       ({"addr": "end-4", "nbytes": 8}, Status.ADDRESS_RANGE),
                                       ({"ext": (16 << 20) - 4}, Status.ADDRESS_RANGE)])
def test_var_faults(kw, status):
    cfg = load_config("tiny")
    if kw.get("addr") == "end-4":     # 8 bytes starting 4 before the end of the variable SRAM
        kw = dict(kw, addr=cfg.variable_sram - 4)
    with pytest.raises(GoldenModelError) as e:
        _var(Memories(cfg), cfg, VarOp.WRITE, **kw)
    assert e.value.status == status
    with pytest.raises(GoldenModelError) as e:
        execute_var(cfg, Memories(cfg), {}, 9)
    assert e.value.status == Status.BAD_MODE
    assert Command(Opcode.VAR, VarOp.READ).disassemble() == "VAR READ"


# ---- compiled graphs: persistence, the spec's rules ------------------------------------------

def test_accumulator_persists_across_invocations_until_power_on():
    g = accumulator()
    model, interp = golden(g), Interpreter(g)
    for k in range(3):
        got, want = model.invoke({"x": i32(10, 20, 30)}), interp.run({"x": i32(10, 20, 30)})
        assert all(np.array_equal(got[n], want[n]) for n in ("r0", "r1")), k
    assert np.array_equal(got["r1"], i32(31, 62, 93))
    again = golden(g)                              # a new NPU: powered on, initial value again
    assert np.array_equal(again.invoke({"x": i32(0, 0, 0)})["r0"], i32(1, 2, 3))
    text = [c.disassemble() for c in model.program.commands if c.opcode == Opcode.VAR]
    assert text == ["VAR INIT", "VAR READ", "VAR WRITE", "VAR READ"]


def test_failed_invocation_leaves_the_variables_unchanged():
    """An invocation that faults after writing a variable (here: it then reads a variable that was
    never written) changes no variable: the next one starts from the same state, as in the
    interpreter."""
    ts = [Tensor("x", [2], I32), Tensor("a", [2], I32, data=i32(1, 2), is_variable=True, variable_name="a"),
          Tensor("b", [2], I32, is_variable=True, variable_name="b"), Tensor("ra", [2], I32), Tensor("rb", [2], I32)]
    ops = [Operator("VARIABLE", [], ["a"]), Operator("VARIABLE", [], ["b"]), Operator("VARIABLE_READ", ["a"], ["ra"]),
           Operator("VARIABLE_WRITE", ["x"], ["a"]), Operator("VARIABLE_READ", ["b"], ["rb"])]
    g = _graph(ts, ops, ["x"], ["ra", "rb"])
    model, interp = golden(g), Interpreter(g)
    with pytest.raises(GoldenModelError, match="variable 'b'"):
        model.invoke({"x": i32(7, 7)})
    with pytest.raises(TosaUnpredictable, match="'b' is read before it is written"):
        interp.run({"x": i32(7, 7)})
    assert model.save_state().keys().isdisjoint({"a", "b"}) and interp.state.keys() == {"a"}
    model.load_state({"b": i32(5, 6)})
    interp.load_state({"b": i32(5, 6)})
    for x in (i32(7, 7), i32(8, 9)):
        got, want = model.invoke({"x": x}), interp.run({"x": x})
        assert all(np.array_equal(got[n], want[n]) for n in ("ra", "rb"))
    assert np.array_equal(got["ra"], i32(7, 7)) and np.array_equal(model.save_state()["a"], i32(8, 9))


def _declared(ops) -> Graph:
    ts = [Tensor("x", [2], I32), Tensor("v", [2], I32, is_variable=True, variable_name="st"), Tensor("old", [2], I32)]
    return _graph(ts, ops, ["x"], ["old"])


def test_variable_without_initial_value_read_before_write():
    """VARIABLE without initial value: reading it before any write is REQUIRE(is_written) — the
    interpreter's TosaUnpredictable, the NPU's VAR_READ_BEFORE_WRITE — until a state is loaded."""
    read_first = _declared([Operator("VARIABLE", [], ["v"]), Operator("VARIABLE_READ", ["v"], ["old"]),
                            Operator("VARIABLE_WRITE", ["x"], ["v"])])
    model, interp = golden(read_first), Interpreter(read_first)
    assert not any(c.opcode == Opcode.VAR and c.sub == VarOp.INIT for c in model.program.commands)
    with pytest.raises(GoldenModelError) as e:
        model.invoke({"x": i32(4, 5)})
    assert e.value.status == Status.VAR_READ_BEFORE_WRITE and "'st'" in str(e.value)
    with pytest.raises(TosaUnpredictable, match="before it is written"):
        interp.run({"x": i32(4, 5)})
    model.load_state({"st": i32(7, 8)})
    interp.load_state({"st": i32(7, 8)})
    for x in (i32(4, 5), i32(6, 7)):
        assert np.array_equal(model.invoke({"x": x})["old"], interp.run({"x": x})["old"])
    write_first = _declared([Operator("VARIABLE", [], ["v"]), Operator("VARIABLE_WRITE", ["x"], ["v"]),
                             Operator("VARIABLE_READ", ["v"], ["old"])])
    assert np.array_equal(golden(write_first).invoke({"x": i32(4, 5)})["old"], i32(4, 5))


def test_static_variable_rules_are_compile_errors():
    cfg = load_config("tiny")
    twice = _declared([Operator("VARIABLE", [], ["v"]), Operator("VARIABLE", [], ["v"]),
                       Operator("VARIABLE_WRITE", ["x"], ["v"]), Operator("VARIABLE_READ", ["v"], ["old"])])
    with pytest.raises(TosaRuleError, match="declared twice") as e:
        compile_graph(twice, cfg)
    assert not e.value.is_error_if and "op %1 VARIABLE" in str(e.value)
    before_decl = _declared([Operator("VARIABLE_READ", ["v"], ["old"]), Operator("VARIABLE", [], ["v"]),
                             Operator("VARIABLE_WRITE", ["x"], ["v"])])
    with pytest.raises(TosaRuleError, match="read before it is declared") as e:
        compile_graph(before_decl, cfg)
    assert not e.value.is_error_if
    with pytest.raises(TosaUnpredictable, match="read before it is declared"):
        Interpreter(before_decl).run({"x": i32(1, 2)})
    for shape, dtype, rule in (([3], I32, "has shape"), ([2], I8, "read as INT8")):
        ts = [Tensor("v", [2], I32, data=i32(1, 2), is_variable=True, variable_name="v"), Tensor("r", shape, dtype)]
        g = _graph(ts, [Operator("IDENTITY", ["v"], ["r"], attr_kind=READ)], [], ["r"])
        with pytest.raises(TosaRuleError, match=rule) as e:
            compile_graph(g, cfg)
        assert e.value.is_error_if and "op %0 IDENTITY -> r" in str(e.value)
    ts = [Tensor("x", [2], I8), Tensor("v", [2], I32, data=i32(1, 2), is_variable=True, variable_name="v")]
    with pytest.raises(TosaRuleError, match="written with INT8"):
        compile_graph(_graph(ts, [Operator("IDENTITY", ["x"], ["v"], attr_kind=WRITE)], ["x"], []), cfg)


def test_variables_that_do_not_fit_live_in_external_memory():
    """The variable SRAM takes what fits; the rest get a home in external memory, which the compile
    report names with the reason, and they persist and run exactly as the interpreter's."""
    g = two_accumulators()
    ctx = compile_graph(g, load_config("tiny"))
    placed = {r["name"]: r for r in ctx.program.manifest["variables"]}
    assert placed["big_state"]["placement"] == "sram" and placed["small_state"]["placement"] == "external"
    assert isinstance(placed["small_state"]["home"], int)
    report = "\n".join(ctx.report)
    assert "'small_state'" in report and "external memory" in report and "needs 52 B, 48 B" in report
    ops = [c for c in ctx.program.commands if c.opcode == Opcode.VAR]
    assert {VarOp(c.sub) for c in ops} >= {VarOp.CHECK, VarOp.MARK, VarOp.INIT, VarOp.READ, VarOp.WRITE}
    feeds = accumulator_feeds(np.random.default_rng(5), 3)
    model, interp = golden(g, "tiny"), Interpreter(g)
    for f in feeds:
        got, want = model.invoke(f), interp.run(f)
        for name in ("rb", "rs"):
            assert np.array_equal(got[name], want[name]), name
    # the state moves by name to a configuration where both fit the SRAM, and back
    state = model.save_state()
    wide = golden(g, "default")
    wide.load_state(state)
    f = feeds[0]
    assert all(np.array_equal(wide.invoke(f)[n], interp.run(f)[n]) for n in ("rb", "rs"))
    back = golden(g, "tiny")
    back.load_state(wide.save_state())
    assert all(np.array_equal(back.invoke(f)[n], interp.run(f)[n]) for n in ("rb", "rs"))


def test_a_faulting_invocation_rolls_back_an_external_variable():
    """The host driver's rollback puts an external variable's home back too."""
    g = two_accumulators()
    model = golden(g, "tiny")
    layout = {v["name"]: v for v in model.program.manifest["variables"]}
    home, n = layout["small_state"]["home"], layout["small_state"]["bytes"]
    before = model.mem.ext[home:home + n].copy()
    bad = {"x": np.zeros((1, 500), np.int32), "x2": np.zeros((1, 13), np.int32)}
    model.mem.ext[home:home + n] = before     # nothing changed yet
    # make the program fault after the small variable's write: a read of slot 31, never written
    model.program.commands.insert(len(model.program.commands) - 1, Command(Opcode.VAR, VarOp.CHECK, 0, 0))
    model.program.commands.insert(len(model.program.commands) - 2, Command(Opcode.SET, Reg.VAR_SLOT, 0, 31))
    bad["x2"][0, 0] = 1
    with pytest.raises(GoldenModelError):
        model.invoke(bad)
    assert not np.array_equal(model.fault_variables[2][0][1], before), "the fault must leave the home changed"
    assert np.array_equal(model.mem.ext[home:home + n], before)


def test_more_variables_than_slots_is_a_compile_error():
    ts = [Tensor("x", [1], I8)]
    ops = []
    for k in range(VAR_SLOTS + 1):
        ts.append(Tensor(f"v{k}", [1], I8, data=np.zeros(1, np.int8), is_variable=True, variable_name=f"s{k}"))
        ops.append(Operator("IDENTITY", ["x"], [f"v{k}"], attr_kind=WRITE))
    with pytest.raises(CompileError, match=f"{VAR_SLOTS + 1} variables .*s0, s1.*{VAR_SLOTS} written flags"):
        compile_graph(_graph(ts, ops, ["x"], []), load_config("default"))


def test_write_of_a_constant_and_read_into_a_graph_output():
    ts = [Tensor("c", [3], I32, data=i32(9, 8, 7)), Tensor("v", [3], I32, data=i32(1, 2, 3), is_variable=True,
                                                           variable_name="v"),
          Tensor("r0", [3], I32), Tensor("r1", [3], I32)]
    ops = [Operator("CONST", [], ["c"]), Operator("IDENTITY", ["v"], ["r0"], attr_kind=READ),
           Operator("IDENTITY", ["c"], ["v"], attr_kind=WRITE), Operator("IDENTITY", ["v"], ["r1"], attr_kind=READ)]
    out = golden(_graph(ts, ops, [], ["r0", "r1"])).invoke({})
    assert np.array_equal(out["r0"], i32(1, 2, 3)) and np.array_equal(out["r1"], i32(9, 8, 7))


# ---- state files ------------------------------------------------------------------------------

SEQ = VARIABLE_TESTS / "variable_accum_3_i32"


def test_state_files_between_backends_and_errors(tmp_path, capsys):
    d = tmp_path / "t"
    shutil.copytree(SEQ, d)
    x = d / "input-0.npy"
    np.save(x, i32(1, 2, 3))
    state = tmp_path / "s.npz"
    run = lambda backend, st=state: main(["run", str(d / "test.tosa"), "-i", f"input-0={x}", "-o",  # noqa: E731
                                          str(tmp_path / "o"), "--backend", backend, "--config", "tiny",
                                          "--state", str(st)])
    assert run("interp") == 0
    after_interp = load_state(state)["acc"]
    assert run("golden") == 0                     # golden continues from the interpreter's state
    saved = load_state(state)
    assert np.array_equal(saved["acc"], after_interp + i32(1, 2, 3))
    assert {"__npu_variable_sram", "__npu_slot_written", "__npu_layout"} <= set(saved)
    assert run("interp") == 0                     # and the interpreter from golden's
    assert np.array_equal(load_state(state)["acc"], after_interp + 2 * i32(1, 2, 3))
    capsys.readouterr()

    # a state of another graph: an error naming the variable; the file is left as it was
    other = tmp_path / "other.npz"
    g = golden(accumulator())
    arrays = g.save_state()
    arrays["__npu_layout"] = np.array(str(arrays["__npu_layout"]).replace('"acc"', '"counter"'))
    save_state(other, arrays)
    before = other.read_bytes()
    assert run("golden", other) == 2
    err = capsys.readouterr().err
    assert "'counter'" in err and str(other) in err and len(err.strip().splitlines()) == 1
    assert other.read_bytes() == before

    # a failed run leaves the file untouched
    before = state.read_bytes()
    np.save(x, np.zeros(3, np.int8))
    assert run("golden") == 2 and "input 'input-0' is int8" in capsys.readouterr().err
    assert state.read_bytes() == before and not list(tmp_path.glob(".s.npz.*"))
    np.save(x, i32(1, 2, 3))
    # a shape that does not fit the variable
    save_state(state, {"acc": i32(1, 2)})
    assert run("golden") == 2 and "shape" in capsys.readouterr().err


# ---- conformance: variable tests, every step, and the SUT's answers -----------------------------

def _config(name: str):
    """A named configuration, or "tiny-8B": tiny with 8 bytes of variable SRAM, so that most
    variables of the tests live in external memory."""
    import dataclasses

    if name == "tiny-8B":
        return dataclasses.replace(load_config("tiny"), name="tiny-8B", variable_sram=8)
    return load_config(name)


@pytest.mark.parametrize("config", CONFIGS + ("tiny-8B",))
def test_conformance_variable_sequences_on_golden(config):
    cfg = _config(config)
    checked, problems, external = 0, [], 0
    for seq_p in sorted(VARIABLE_TESTS.rglob("sequence.json")):
        d = seq_p.parent
        seq, desc = json.loads(seq_p.read_text()), json.loads((d / "desc.json").read_text())
        graph = read_tosa(d / desc["tosa_file"])
        first = {n: np.load(d / f) for n, f in zip(desc["ifm_name"], seq["steps"][0]["ifm_file"])}
        model = GoldenModel(compile_graph(graph, cfg, input_shapes={n: a.shape for n, a in first.items()}).program, cfg)
        external += len(model.external_variables())
        for k, step in enumerate(seq["steps"]):
            checked += 1
            outs = model.invoke({n: np.load(d / f) for n, f in zip(desc["ifm_name"], step["ifm_file"])})
            state = model.save_state()
            for n, f in zip(desc["ofm_name"], step["expected_ofm_file"]):
                exp = np.load(d / f)
                if not (outs[n].dtype == exp.dtype and np.array_equal(outs[n], exp)):
                    problems.append(f"{d.name} step {k}: output {n}")
            for var, f in step.get("variable_state_after", {}).items():
                if not np.array_equal(state[var], np.load(d / f)):
                    problems.append(f"{d.name} step {k}: state {var}")
    assert checked >= 40 and not problems, problems
    assert (external >= 8) == (config == "tiny-8B"), f"{external} variables in external memory"


def test_sut_golden_answers_for_variable_tests():
    for t in sorted(p.parent for p in VARIABLE_TESTS.glob("*/desc.json")):
        desc = json.loads((t / "desc.json").read_text())
        code, msg, _ = execute_test(t, desc, backend="golden", write=False, config="tiny")
        assert code == (ERROR if desc["expected_failure"] else VALID), (t.name, code, msg)


def test_sut_golden_read_before_write_is_unpredictable(tmp_path):
    g = _declared([Operator("VARIABLE", [], ["v"]), Operator("VARIABLE_READ", ["v"], ["old"]),
                   Operator("VARIABLE_WRITE", ["x"], ["v"])])
    write_tosa(g, tmp_path / "test.tosa")
    np.save(tmp_path / "x.npy", i32(1, 2))
    desc = {"tosa_file": "test.tosa", "ifm_name": ["x"], "ifm_file": ["x.npy"], "ofm_name": ["old"],
            "ofm_file": ["old.npy"], "expected_failure": False}
    for backend in ("interp", "golden"):
        code, msg, _ = execute_test(tmp_path, desc, backend=backend, write=False)
        assert code == UNPREDICTABLE, (backend, msg)
