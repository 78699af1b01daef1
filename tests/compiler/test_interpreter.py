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


@pytest.mark.parametrize("first", ["checked", "fast"])
def test_a_session_reuses_constants_and_plans_from_its_second_invocation(monkeypatch, first):
    """Which ops are constant is worked out when a second invocation starts (a one-shot session
    never needs it); from then on the constant ops' values are reused and a split kernel whose
    static inputs are constant runs only its prepared execute. Every invocation gives what a
    fresh session gives. A first invocation on the checked path (an op's kernel info not looked
    up yet) keeps its prepared executes for the second; one on the fast path (_run_first) keeps
    no plans, and the second invocation prepares every split op."""
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
    if first == "fast":
        Interpreter(g).run({"x": np.zeros((2, 3), np.int32)})      # (the kernel info looked up)
    session = Interpreter(g)
    for k in range(4):
        x = np.full((2, 3), 10 * k, np.int32)
        prepares.clear()
        got = session.run({"x": x})
        prepared = sorted(prepares)
        assert (session._constant_ops is None) == (k == 0)
        assert (session._plans == [None] * 6) == (first == "fast" and k == 0)
        want = run_graph(g, {"x": x})
        for name in ("y", "z"):
            assert got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name])
        assert np.array_equal(got["y"], x.reshape(3, 2) + np.arange(6, dtype=np.int32).reshape(3, 2))
        # 1st: every split op prepared; 2nd on: none (RESHAPE of x and SUB keep their prepared
        # executes, ADD too: its static inputs are none; the constant RESHAPE is not run from the 3rd)
        assert prepared == (["ADD", "RESHAPE", "RESHAPE", "SUB"] if k == (first == "fast") else [])
    assert session._constant_ops == {0, 1, 2} and [i for i, _ in session._varying_ops] == [3, 4, 5]
    # from the third invocation the varying ops run their prepared executes inline
    # (_prepared_steps); a REQUIRE failing there is still the op's, named with its place
    assert [(step[3], step[0] is not None) for step in session._prepared_steps] == [(3, True), (4, True), (5, True)]
    with pytest.raises(TosaUnpredictable, match="sum fits") as e:
        session.run({"x": np.full((2, 3), 2**31 - 1, np.int32)})
    assert e.value.where == "test.tosa op #4 -> y" and e.value.op == "ADD"
    assert np.array_equal(session.run({"x": np.ones((2, 3), np.int32)})["z"], 1 - np.arange(6, dtype=np.int32).reshape(2, 3))


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


def _outcome(fn):
    """What a call gives: its outputs (name, dtype, shape, values) or its error's type and text."""
    try:
        outs = fn()
    except Exception as e:                                  # noqa: BLE001 - compared, not hidden
        return (type(e), str(e))
    return sorted((k, v.dtype.str, v.shape, v.tobytes()) for k, v in outs.items())


def _checked(g, inputs):
    """The invocation as the checked path runs it (plans made, every rule as each op runs)."""
    return _outcome(lambda: Interpreter(g)._run_checked(inputs))


def test_first_invocation_fast_path_gives_what_the_checked_path_gives():
    """A session's first invocation without variables runs the usual case without plans
    (Interpreter._run_first) and leaves anything else to the checked path. Over the committed
    conformance slice (every op, positive and negative tests): run() gives the checked path's
    outputs or error, the fast path is taken for the positive tests (it is not always falling
    back) and never gives outputs where the checked path raises; a session's later invocations
    (planned then, prepared executes and constants reused) give the same again."""
    import json

    from compiler.tosa_io import read_tosa
    from sim.paths import TEST_DATA

    root = TEST_DATA / "conformance"
    if not root.is_dir():
        pytest.skip("no conformance slice")
    Interpreter(read_tosa(next(root.glob("add/*/test.tosa"))))   # (any op's kernel info looked up once)
    fast = fell_back = 0
    for desc_path in sorted(root.glob("*/*/desc.json")):
        d = desc_path.parent
        desc = json.loads(desc_path.read_text())
        try:
            g = read_tosa(d / "test.tosa")
        except Exception:                                   # noqa: BLE001 - a reader test
            continue
        inputs = {n: np.load(d / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
        want = _checked(g, inputs)
        try:
            Interpreter(g)._run_checked(inputs)             # the op's kernel info known, as in a long run
        except Exception:                                   # noqa: BLE001
            pass
        try:
            first = Interpreter(g)._run_first(inputs)
        except Exception as e:                              # noqa: BLE001
            first = e
        if isinstance(first, dict):
            fast += 1
            assert _outcome(lambda: first) == want, d.name
        else:
            assert first is None, (d.name, first)           # _run_first raises nothing
            fell_back += 1
        session, checked = Interpreter(g), Interpreter(g)
        for _ in range(3):                                  # (variables: the same states too)
            assert _outcome(lambda: session.run(inputs)) == _outcome(lambda: checked._run_checked(inputs)), d.name
    assert fast > 250 and fell_back > 300, (fast, fell_back)


def test_first_invocation_fast_path_leaves_every_fault_to_the_checked_path(monkeypatch):
    """Each rule the fast path sees at once, broken one at a time on a small graph (inputs,
    CONST data, operand lists, kernels' ERROR_IF and REQUIRE, declared output shapes and types,
    variable ops without variables), and graphs it leaves to the checked path that are no fault
    (None: unknown dims, an int48 input, an input to convert): _run_first gives no outputs, and
    run() gives the checked path's error or outputs, with its message."""
    i16, i48 = DType.INT16, DType.INT48

    def g(ops, inputs=("x", "a"), outputs=("y",), extra=(), c=None, cdt=I32, y=(2,), ydt=I32):
        ts = {t.name: t for t in [Tensor("x", [2], I32), Tensor("a", [2], I32), Tensor("y", list(y), ydt),
                                  Tensor("c", [2], cdt, data=np.array([1, 2], np.int32) if c is None else c),
                                  Tensor("s", [2], SHAPE, data=np.array([2, 1], np.int64)), Tensor("t", [2, 1], I32),
                                  *extra]}
        return graph(list(ts.values()), ops, list(inputs), list(outputs))

    x = np.array([5, -7], np.int32)
    add = [Operator("ADD", ["x", "a"], ["y"])]
    add_c = [Operator("CONST", [], ["c"]), Operator("ADD", ["x", "c"], ["y"])]
    good = {"x": x, "a": x}
    cases = [
        ("usual", g(add_c), good, True),
        ("usual, CONST_SHAPE and RESHAPE", g([Operator("CONST_SHAPE", [], ["s"]), Operator("RESHAPE", ["x", "s"], ["t"])],
                                             outputs=("t",)), good, True),
        ("input of another type", g(add), {"x": x.astype(np.int16), "a": x}, False),
        ("input not an array", g(add), {"x": [5, -7], "a": x}, False),
        ("input dtype equal, another object", g(add), {"x": x.astype(np.dtype("i4", metadata={"m": 1})), "a": x}, None),
        ("input of another shape", g(add), {"x": x[:1], "a": x}, False),
        ("input missing", g(add), {"x": x}, False),
        ("input unknown", g(add), {"x": x, "a": x, "b": x}, False),
        ("int48 input", g([Operator("CONST", [], [n]) for n in ("m", "sh", "zi", "zo")]
                          + [Operator("RESCALE", ["x", "m", "sh", "zi", "zo"], ["y"],
                                      attrs={"scale32": False, "rounding_mode": 1, "per_channel": False,
                                             "input_unsigned": False, "output_unsigned": False})],
                          extra=[Tensor("x", [2], i48), Tensor("m", [1], i16, data=np.array([1 << 14], np.int16)),
                                 Tensor("sh", [1], I8, data=np.array([14], np.int8)),
                                 Tensor("zi", [1], i48, data=np.zeros(1, np.int64)),
                                 Tensor("zo", [1], I32, data=np.zeros(1, np.int32))]),
         {"x": x.astype(np.int64), "a": x}, None),
        ("int48 input out of range", g(add, extra=[Tensor("x", [2], i48)]), {"x": np.array([1 << 50, 0]), "a": x}, False),
        ("input declared with an unknown dim", g(add, extra=[Tensor("x", [-1], I32)]), good, None),
        ("CONST data of another type", g(add_c, c=np.array([1, 2], np.int16)), good, False),
        ("CONST data not an array", g(add_c, c=[1, 2]), good, False),
        ("CONST data of another shape", g(add_c, c=np.array([1, 2, 3], np.int32)), good, False),
        ("CONST_SHAPE of an INT32 tensor", g([Operator("CONST_SHAPE", [], ["c"]), Operator("ADD", ["x", "c"], ["y"])]), good, False),
        ("CONST with an input", g([Operator("CONST", ["x"], ["c"]), Operator("ADD", ["x", "c"], ["y"])]), good, False),
        ("CONST with two outputs", g([Operator("CONST", [], ["c", "t"]), Operator("ADD", ["x", "c"], ["y"])]), good, False),
        ("CONST written twice", g([Operator("CONST", [], ["c"])] + add_c), good, False),
        ("CONST of a graph input", g([Operator("CONST", [], ["x"])] + add), good, False),
        ("CONST of no tensor", g([Operator("CONST", [], ["nope"])] + add), good, False),
        ("too few inputs", g([Operator("ADD", ["x"], ["y"])]), good, False),
        ("too many outputs", g([Operator("ADD", ["x", "a"], ["y", "t"])]), good, False),
        ("CONCAT of nothing", g([Operator("CONCAT", [], ["y"], attrs={"axis": 0})]), good, False),
        ("no such op", g([Operator("FROBNICATE", ["x", "a"], ["y"])]), good, False),
        ("an input no tensor", g([Operator("ADD", ["x", "nope"], ["y"])]), good, False),
        ("an input not written", g([Operator("ADD", ["x", "y"], ["y"])]), good, False),
        ("an output no tensor", g([Operator("ADD", ["x", "a"], ["nope"])], outputs=()), good, False),
        ("an output written twice", g(add + add), good, False),
        ("an output that is an input", g([Operator("ADD", ["x", "a"], ["x"])], outputs=("x",)), good, False),
        ("a kernel's ERROR_IF", g(add, y=(3,)), good, False),
        ("a kernel's REQUIRE", g(add), {"x": np.array([2**31 - 1, 0], np.int32), "a": np.array([1, 0], np.int32)}, False),
        ("an output declared with an unknown dim", g(add, y=(-1,)), good, None),
        ("an output of a type without storage", g(add, ydt=DType.FP32, outputs=()), good, False),
        ("a graph output never written", g(add, outputs=("y", "t")), good, False),
        ("a variable read without variables", g([Operator("IDENTITY", ["x"], ["y"], attr_kind=READ)]), good, False),
        ("a variable write without variables", g([Operator("IDENTITY", ["x"], ["y"], attr_kind=WRITE)]), good, False),
        ("VARIABLE_READ without variables", g([Operator("VARIABLE_READ", ["x"], ["y"])]), good, False),
        ("IDENTITY", g([Operator("IDENTITY", ["x"], ["y"])]), good, True),
    ]
    Interpreter(cases[0][1]).run(good)                      # (ADD's and CONST's kernel info looked up)
    for name, gr, inputs, usual in cases:
        want = _checked(gr, inputs)
        try:
            session = Interpreter(gr)
        except Exception as e:                              # noqa: BLE001 - refused before any run
            assert not usual and _outcome(lambda: Interpreter(gr)) == (type(e), str(e)), name
            continue
        for _ in range(2):                                  # (the second with the kernel info known)
            first = Interpreter(gr)._run_first(inputs)
        assert (first is not None) == bool(usual), name
        if usual:
            assert _outcome(lambda: first) == want, name
        got = _outcome(lambda: session.run(inputs))
        assert got == want, (name, got, want)
        assert isinstance(want[0], type) == (usual is False), (name, want)     # a fault case is one

    # kernels that return what the checked path refuses or converts (the kernel info replaced)
    from compiler import interpreter
    results = [("another type", lambda c: [c.inputs[0].astype(np.int16)], False),
               ("two results", lambda c: [c.inputs[0], c.inputs[0]], False),
               ("not an array", lambda c: [[5, -7]], False),
               ("not an array, converted to the type", lambda c: [np.int32(5)], False),
               ("another shape", lambda c: [c.inputs[0][:1]], False),
               ("a kernel bug", lambda c: [{}["k"]], False),
               ("an int64 result as longlong", lambda c: [c.inputs[0].astype(np.longlong)], None),
               ("a usual result", lambda c: [c.inputs[0] + c.inputs[1]], True)]
    for name, kernel, usual in results:
        monkeypatch.setitem(interpreter._KERNEL_INFO, "ADD", (2, 1, kernel, None))
        ydt = DType.INT64 if "longlong" in name else I32
        gr = g(add, ydt=ydt)
        want = _checked(gr, good)
        first = Interpreter(gr)._run_first(good)
        assert (first is not None) == bool(usual), name
        assert _outcome(lambda: Interpreter(gr).run(good)) == want, name
        assert isinstance(want[0], type) == (usual is False), (name, want)
