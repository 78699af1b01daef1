"""The interpreter on graphs built in memory: execution order, constants, dynamic dims, errors,
and variables (persistence, the spec's rules, transactions, state load/save)."""

import numpy as np
import pytest

from compiler.interpreter import Interpreter, InterpreterError, run_graph
from compiler.ir import Block, Graph, Operator, Region, Tensor
from firmware_model.errors import TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops.dtypes import DType

I8, I32, SHAPE = DType.INT8, DType.INT32, DType.SHAPE
READ, WRITE = "VariableReadAttribute", "VariableWriteAttribute"


def graph(tensors, ops, inputs, outputs):
    b = Block("main", operators=ops, tensors={t.name: t for t in tensors}, inputs=inputs, outputs=outputs)
    return Graph([Region("main", [b])], source="test.tosa")


def accumulator(initial=(1, 2, 3), dtype=I32):
    """out0 = state; state += x; out1 = state (the flatbuffer IDENTITY form)."""
    ts = [Tensor("x", [3], dtype), Tensor("v", [3], dtype, data=np.array(initial, dtype.storage),
                                          is_variable=True, variable_name="acc"),
          Tensor("r0", [3], dtype), Tensor("s", [3], dtype), Tensor("r1", [3], dtype)]
    ops = [Operator("IDENTITY", ["v"], ["r0"], attr_kind=READ),
           Operator("ADD", ["r0", "x"], ["s"]),
           Operator("IDENTITY", ["s"], ["v"], attr_kind=WRITE),
           Operator("IDENTITY", ["v"], ["r1"], attr_kind=READ)]
    return graph(ts, ops, ["x"], ["r0", "r1"])


def i32(*v):
    return np.array(v, np.int32)


def test_ops_run_in_order_with_constants_and_shape_operands():
    ts = [Tensor("x", [2, 3], I8), Tensor("shape", [2], SHAPE, data=np.array([3, 2], np.int64)),
          Tensor("c", [3, 2], I8, data=np.full((3, 2), 5, np.int8)), Tensor("r", [3, 2], I8),
          Tensor("t", [2, 3], I8), Tensor("y", [2, 3], I32)]
    ops = [Operator("CONST_SHAPE", [], ["shape"]), Operator("CONST", [], ["c"]),
           Operator("RESHAPE", ["x", "shape"], ["r"]),
           Operator("TRANSPOSE", ["r"], ["t"], attrs={"perms": [1, 0]}),
           Operator("CAST", ["t"], ["y"])]
    g = graph(ts, ops, ["x"], ["y", "c"])
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    out = run_graph(g, {"x": x})
    exp = x.reshape(3, 2).T.astype(np.int32)
    assert out["y"].dtype == np.int32 and np.array_equal(out["y"], exp)
    assert np.array_equal(out["c"], np.full((3, 2), 5, np.int8))


def test_a_session_reuses_constants_and_plans_from_its_second_invocation(monkeypatch):
    """Which ops are constant is worked out when a second invocation starts (a one-shot session
    never needs it); from then on the constant ops' values are reused and a split kernel whose
    static inputs are constant runs only its prepared execute. Every invocation gives what a
    fresh session gives."""
    from compiler import interpreter
    from firmware_model.tosa_ops import registry
    registry.supported_ops()                    # the kernel modules loaded
    monkeypatch.setattr(interpreter, "_KERNEL_INFO", {})
    ts = [Tensor("x", [2, 3], I32), Tensor("c", [2, 3], I32, data=np.arange(6, dtype=np.int32).reshape(2, 3)),
          Tensor("shape", [2], SHAPE, data=np.array([3, 2], np.int64)), Tensor("cr", [3, 2], I32),
          Tensor("xr", [3, 2], I32), Tensor("y", [3, 2], I32), Tensor("z", [2, 3], I32)]
    ops = [Operator("CONST", [], ["c"]), Operator("CONST_SHAPE", [], ["shape"]),
           Operator("RESHAPE", ["c", "shape"], ["cr"]),           # fed by constants only
           Operator("RESHAPE", ["x", "shape"], ["xr"]),
           Operator("ADD", ["xr", "cr"], ["y"]),
           Operator("SUB", ["x", "c"], ["z"])]
    g = graph(ts, ops, ["x"], ["y", "z"])
    prepares = []
    for op in ("RESHAPE", "ADD", "SUB"):
        prepare, static = registry._PREPARES[op]
        counted = (lambda p, o: lambda call: (prepares.append(o), p(call))[1])(prepare, op)
        monkeypatch.setitem(registry._PREPARES, op, (counted, static))
    session = Interpreter(g)
    for k in range(4):
        x = np.full((2, 3), 10 * k, np.int32)
        prepares.clear()
        got = session.run({"x": x})
        prepared = sorted(prepares)
        assert (session._constant_ops is None) == (k == 0)
        want = run_graph(g, {"x": x})
        for name in ("y", "z"):
            assert got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name])
        assert np.array_equal(got["y"], x.reshape(3, 2) + np.arange(6, dtype=np.int32).reshape(3, 2))
        # 1st: every split op prepared; 2nd on: none (RESHAPE of x and SUB keep their prepared
        # executes, ADD too: its static inputs are none; the constant RESHAPE is not run from the 3rd)
        assert prepared == (["ADD", "RESHAPE", "RESHAPE", "SUB"] if k == 0 else [])
    assert session._constant_ops == {0, 1, 2} and [i for i, _ in session._varying_ops] == [3, 4, 5]


def test_unknown_dims_are_fixed_by_the_inputs():
    ts = [Tensor("a", [-1, 4], I32), Tensor("b", [1, 4], I32), Tensor("s", [-1, 4], I32),
          Tensor("m", [1, 4], I32)]
    ops = [Operator("ADD", ["a", "b"], ["s"]), Operator("REDUCE_MAX", ["s"], ["m"], attrs={"axis": 0})]
    it = Interpreter(graph(ts, ops, ["a", "b"], ["s", "m"]))
    for n in (1, 5):
        a = np.arange(4 * n, dtype=np.int32).reshape(n, 4)
        out = it.run({"a": a, "b": np.ones((1, 4), np.int32)})
        assert out["s"].shape == (n, 4) and np.array_equal(out["m"], a[-1:] + 1)


def test_graph_errors_are_typed():
    ts = [Tensor("a", [2], I32), Tensor("b", [2], I32), Tensor("s", [2], I32)]
    with pytest.raises(TosaError, match="not a tensor"):
        run_graph(graph(ts, [Operator("ADD", ["a", "missing"], ["s"])], ["a"], ["s"]), {"a": i32(1, 2)})
    with pytest.raises(TosaError, match="3 inputs"):
        run_graph(graph(ts, [Operator("ADD", ["a", "a", "a"], ["s"])], ["a"], ["s"]), {"a": i32(1, 2)})
    with pytest.raises(TosaError, match="before any op writes it"):
        run_graph(graph(ts, [Operator("ADD", ["a", "b"], ["s"])], ["a"], ["s"]), {"a": i32(1, 2)})
    with pytest.raises(TosaError, match="never written"):
        run_graph(graph(ts, [], ["a"], ["s"]), {"a": i32(1, 2)})
    with pytest.raises(TosaUnsupported, match="COS"):
        run_graph(graph(ts, [Operator("COS", ["a"], ["s"])], ["a"], ["s"]), {"a": i32(1, 2)})
    # the declared output shape must agree with the result
    bad = [Tensor("a", [2], I32), Tensor("s", [3], I32)]
    with pytest.raises(TosaError, match="output shape"):
        run_graph(graph(bad, [Operator("ABS", ["a"], ["s"])], ["a"], ["s"]), {"a": i32(1, 2)})


def test_input_binding_errors_name_the_input():
    g = accumulator()
    with pytest.raises(InterpreterError, match="no value given for graph input 'x'"):
        Interpreter(g).run({})
    with pytest.raises(InterpreterError, match="'y' is not an input"):
        Interpreter(g).run({"x": i32(1, 2, 3), "y": i32(1)})
    with pytest.raises(InterpreterError, match="input 'x' is int8"):
        Interpreter(g).run({"x": np.zeros(3, np.int8)})
    with pytest.raises(InterpreterError, match="input 'x' has shape"):
        Interpreter(g).run({"x": i32(1, 2)})


def test_variables_persist_across_invocations():
    it = Interpreter(accumulator())
    outs = [it.run({"x": i32(10, 20, 30)}) for _ in range(3)]
    assert np.array_equal(outs[0]["r0"], i32(1, 2, 3)) and np.array_equal(outs[0]["r1"], i32(11, 22, 33))
    assert np.array_equal(outs[2]["r0"], i32(21, 42, 63)) and np.array_equal(outs[2]["r1"], i32(31, 62, 93))
    assert list(it.state) == ["acc"] and np.array_equal(it.state["acc"], i32(31, 62, 93))
    assert it.invocations == 3
    it.reset_state()
    assert np.array_equal(it.run({"x": i32(0, 0, 0)})["r0"], i32(1, 2, 3))


def test_failed_invocation_leaves_the_state_unchanged():
    it = Interpreter(accumulator())
    it.run({"x": i32(1, 1, 1)})
    before = it.state
    with pytest.raises(TosaUnpredictable):      # the ADD overflows int32
        it.run({"x": i32(2**31 - 1, 0, 0)})
    assert np.array_equal(it.state["acc"], before["acc"]) and it.invocations == 1


def test_load_state_checks_names_shapes_and_types():
    it = Interpreter(accumulator())
    it.load_state({"acc": i32(100, 200, 300)})
    assert np.array_equal(it.run({"x": i32(1, 1, 1)})["r0"], i32(100, 200, 300))
    with pytest.raises(InterpreterError, match="not a variable"):
        it.load_state({"nope": i32(1, 2, 3)})
    with pytest.raises(InterpreterError, match="shape"):
        it.load_state({"acc": i32(1, 2)})
    with pytest.raises(InterpreterError, match="int8"):
        it.load_state({"acc": np.zeros(3, np.int8)})


def test_variable_read_with_wrong_shape_or_type_is_a_tosa_error():
    for shape, dtype in (([2], I32), ([3], I8)):
        ts = [Tensor("v", [3], I32, data=i32(1, 2, 3), is_variable=True, variable_name="v"),
              Tensor("r", shape, dtype)]
        g = graph(ts, [Operator("IDENTITY", ["v"], ["r"], attr_kind=READ)], [], ["r"])
        with pytest.raises(TosaError, match="variable 'v'"):
            Interpreter(g).run({})


def test_variable_write_with_wrong_type_is_a_tosa_error():
    ts = [Tensor("x", [3], I8), Tensor("v", [3], I32, data=i32(1, 2, 3), is_variable=True, variable_name="v")]
    g = graph(ts, [Operator("IDENTITY", ["x"], ["v"], attr_kind=WRITE)], ["x"], [])
    with pytest.raises(TosaError, match="written with INT8"):
        Interpreter(g).run({"x": np.zeros(3, np.int8)})


def test_variable_ops_form_declare_read_write():
    """VARIABLE / VARIABLE_READ / VARIABLE_WRITE: no initial value, so the first read before a
    write is unpredictable; a second declaration in one invocation too."""
    ts = [Tensor("x", [2], I32), Tensor("v", [2], I32, is_variable=True, variable_name="st"),
          Tensor("old", [2], I32)]
    write_then_read = [Operator("VARIABLE", [], ["v"]), Operator("VARIABLE_WRITE", ["x"], ["v"]),
                       Operator("VARIABLE_READ", ["v"], ["old"])]
    it = Interpreter(graph(ts, write_then_read, ["x"], ["old"]))
    assert np.array_equal(it.run({"x": i32(4, 5)})["old"], i32(4, 5))
    read_first = [Operator("VARIABLE", [], ["v"]), Operator("VARIABLE_READ", ["v"], ["old"]),
                  Operator("VARIABLE_WRITE", ["x"], ["v"])]
    it = Interpreter(graph(ts, read_first, ["x"], ["old"]))
    with pytest.raises(TosaUnpredictable, match="before it is written"):
        it.run({"x": i32(4, 5)})
    twice = [Operator("VARIABLE", [], ["v"]), Operator("VARIABLE", [], ["v"])]
    with pytest.raises(TosaUnpredictable, match="declared twice"):
        Interpreter(graph(ts, twice, ["x"], [])).run({"x": i32(1, 2)})
    # without a VARIABLE op the declaration is implicit (the flatbuffer form)
    out = Interpreter(graph(ts, write_then_read[1:], ["x"], ["old"])).run({"x": i32(1, 2)})
    assert np.array_equal(out["old"], i32(1, 2))


def test_declared_sizes_are_checked_against_the_tensor_limit(monkeypatch):
    """Each declared tensor (Python or numpy dimensions, unknown ones counting 0) against the
    per-tensor limit, and all of them together against GRAPH_FACTOR limits, before any op runs;
    the limit read from $NPU_TENSOR_LIMIT_MIB as the environment holds it at that moment."""
    from firmware_model.tosa_ops import limits

    def g(shapes):
        ts = [Tensor("x", [4], I8), Tensor("y", [4], I8)] + [Tensor(f"t{i}", s, I32) for i, s in enumerate(shapes)]
        return graph(ts, [Operator("IDENTITY", ["x"], ["y"])], ["x"], ["y"])

    x = np.arange(4, dtype=np.int8)
    monkeypatch.delenv(limits.ENV_VAR, raising=False)
    assert limits._env_text() is None and limits.tensor_limit() == limits.DEFAULT_TENSOR_LIMIT_BYTES
    monkeypatch.setenv(limits.ENV_VAR, "1")                        # 1 MiB: 262144 int32 elements
    assert limits._env_text() == "1" == __import__("os").environ.get(limits.ENV_VAR)
    assert limits.tensor_limit() == 1 << 20
    assert np.array_equal(Interpreter(g([[512, 512], [-1, 1 << 40]])).run({"x": x})["y"], x)
    for shape in ([512, 513], [np.int64(512), np.int64(513)], [np.int64(1 << 31), np.int64(1 << 33)]):
        with pytest.raises(limits.ResourceLimitError, match="tensor 't1'"), np.errstate(over="ignore"):
            Interpreter(g([[4], shape]))            # (numpy's product wraps: counted again exactly)
    with pytest.raises(limits.ResourceLimitError, match="together"):
        Interpreter(g([[512, 512]] * 4 + [[1]]))
    Interpreter(g([[512, 512]] * 3 + [[1]]))
    monkeypatch.setenv(limits.ENV_VAR, "2")
    Interpreter(g([[512, 513]]))
    monkeypatch.delenv(limits.ENV_VAR)
    assert limits._env_text() is None
    Interpreter(g([[1024, 1024]]))


def test_kernel_errors_say_where_the_op_is():
    """A kernel's ERROR_IF, REQUIRE and the interpreter's own checks name the op's place,
    "<source> op #<index> -> <outputs>" (formatted only when a message needs it)."""
    ts = [Tensor("x", [2], I32), Tensor("a", [2], I32), Tensor("y", [3], I32), Tensor("s", [2], I32)]
    bad_shape = graph(ts, [Operator("ADD", ["x", "a"], ["s"]), Operator("ADD", ["s", "x"], ["y"])], ["x", "a"], ["y"])
    with pytest.raises(TosaError, match="output shape") as e:
        run_graph(bad_shape, {"x": np.zeros(2, np.int32), "a": np.zeros(2, np.int32)})
    assert e.value.where == "test.tosa op #1 -> y" and "(test.tosa op #1 -> y)" in str(e.value)
    ts = [Tensor("x", [2], I8), Tensor("a", [2], I8), Tensor("z", [2], I8)]
    shift = graph(ts, [Operator("ARITHMETIC_RIGHT_SHIFT", ["x", "a"], ["z"], attrs={"round": False})], ["x", "a"], ["z"])
    with pytest.raises(TosaUnpredictable) as e:
        run_graph(shift, {"x": np.zeros(2, np.int8), "a": np.array([1, 9], np.int8)})
    assert e.value.where == "test.tosa op #0 -> z"
    twice = graph(ts, [Operator("BITWISE_AND", ["x", "a"], ["z"]), Operator("BITWISE_AND", ["x", "a"], ["z"])], ["x", "a"], ["z"])
    with pytest.raises(TosaError, match="written twice") as e:
        run_graph(twice, {"x": np.zeros(2, np.int8), "a": np.zeros(2, np.int8)})
    assert e.value.where == "test.tosa op #1 -> z"


def test_plan_call_sets_every_opcall_field():
    """_PlanCall builds its OpCall fields itself: every field OpCall declares is set, and `where`
    is the plan's text."""
    import dataclasses

    from compiler import interpreter
    from firmware_model.tosa_ops.registry import OpCall

    op = Operator("ADD", ["x", "a"], ["y"])
    plan = interpreter._OpPlan(op, 3, "m.tosa", "kernel")
    call = interpreter._PlanCall("ADD", {"k": 1}, [1], [2], [3], plan, "kind", {"e": 0})
    want = OpCall("ADD", {"k": 1}, [1], [2], [3], "m.tosa op #3 -> y", "kind", {"e": 0})
    for f in dataclasses.fields(OpCall):
        assert getattr(call, f.name) == getattr(want, f.name), f.name


def test_declared_size_bound_gives_the_exact_rules_answer(monkeypatch):
    """The tensor pass's bound (sum of |product of dims| x the widest item) lets a graph through
    only when the exact size rules do; either way Interpreter(graph) says what the exact rules
    (_check_sizes, always run when the bound is made useless) say: over random declared shapes
    with unknown dimensions, numpy dimensions and tensors near the limit, per tensor and in total."""
    import random

    from compiler import interpreter
    from firmware_model.tosa_ops import limits

    def g(shapes):
        ts = [Tensor("x", [4], I8), Tensor("y", [4], I8)] + [Tensor(f"t{i}", s, dt) for i, (s, dt) in enumerate(shapes)]
        return graph(ts, [Operator("IDENTITY", ["x"], ["y"])], ["x"], ["y"])

    def outcome(gr):
        try:
            Interpreter(gr)
            return None
        except limits.ResourceLimitError as e:
            return str(e)

    monkeypatch.setenv(limits.ENV_VAR, "0.0625")            # 64 KiB
    rng = random.Random(16)
    dims = [-1, 0, 1, 2, 3, 16, 64, 100]
    at_limit = [([256, 256], I8), ([128, 128], I32), ([64, 256], DType.INT16), ([64, 128], DType.INT48),
                ([2, 64, 256], I8), ([-1, 256, 256], I32), ([257, 256], I8)]
    seen = {None: 0, "tensor": 0, "together": 0}
    for _ in range(3000):
        shapes = []
        for _ in range(rng.randint(1, 9)):
            if rng.random() < 0.5:                              # at (or just over) the limit
                shapes.append(rng.choice(at_limit))
                continue
            s = [rng.choice(dims) for _ in range(rng.randint(0, 4))]
            if rng.random() < 0.1:
                s = [np.int64(d) for d in s]
            shapes.append((s, rng.choice([I8, DType.INT16, I32, DType.INT48, DType.BOOL, DType.FP32])))
        gr = g(shapes)
        fast = outcome(gr)
        with monkeypatch.context() as m:
            m.setattr(interpreter, "_MAX_ITEMSIZE", 1 << 80)    # the bound never lets a graph through
            exact = outcome(gr)
        assert fast == exact, shapes
        seen[None if exact is None else "together" if "together" in exact else "tensor"] += 1
    assert min(seen.values()) > 50, seen


def test_operand_faults_and_caller_value_types():
    """A kernel op's operands are looked at in order (inputs: not a tensor, not written yet; then
    outputs: not a tensor, written twice), and execute_op, whose caller places values itself,
    checks each input value's type against its declaration."""
    ts = [Tensor("x", [2], I32), Tensor("a", [2], I32), Tensor("s", [2], I32)]
    x = np.zeros(2, np.int32)
    cases = [(["x", "nope"], ["s"], "input 1 'nope' is not a tensor"),
             (["s", "nope"], ["s"], "input 0 's' is read before"),
             (["x", "a"], ["nope"], "output 0 'nope' is not a tensor"),
             (["x", "a"], ["x"], "output 'x' is written twice")]
    for ins, outs, message in cases:
        gr = graph(ts, [Operator("ADD", ins, outs)], ["x", "a"], [])
        with pytest.raises(TosaError, match=message):
            Interpreter(gr).run({"x": x, "a": x})
    gr = graph(ts, [Operator("ADD", ["x", "a"], ["s"])], ["x", "a"], ["s"])
    it = Interpreter(gr)
    env, inv = it.checking_invocation({"x": x, "a": x}, {})
    env["a"] = np.zeros(2, np.int8)
    with pytest.raises(TosaError, match="input 'a' holds int8 data, declared INT32"):
        it.execute_op(0, gr.main.operators[0], env, inv)
    env["a"] = x
    it.execute_op(0, gr.main.operators[0], env, inv)
    assert env["s"].dtype == np.int32


def test_a_session_leaves_no_reference_cycle():
    """A session is freed when it goes (reference counting), not left to the cyclic garbage
    collector: a prepared execute keeps its call, and the call keeps the op's place, not the plan
    holding the execute (MUL's execute keeps its call)."""
    import gc

    from compiler.tosa_io import read_tosa_bytes, tosa_bytes

    ts = [Tensor("x", [2, 3], I32), Tensor("a", [2, 3], I32), Tensor("s", [2, 3], I32), Tensor("y", [2, 3], I32),
          Tensor("sh", [1], I8, data=np.array([0], np.int8))]
    ops = [Operator("CONST", [], ["sh"]), Operator("MUL", ["x", "a", "sh"], ["s"]), Operator("SUB", ["s", "x"], ["y"])]
    g = graph(ts, ops, ["x", "a"], ["y"])
    g = read_tosa_bytes(tosa_bytes(g), "test.tosa")         # the reader's graph, as the benches run it
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(3):
            s = Interpreter(g)
            s.run({"x": x, "a": x})
            s.run({"x": x, "a": x})                        # (a prepared execute kept)
            del s
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
