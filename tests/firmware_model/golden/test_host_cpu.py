"""The host CPU's op read once per program (host_cpu._HostOp): what it keeps is what the manifest
entry says (placements, tensor specs, place in the graph), its cycles are host_cycles', and its
kernel's execute half (prepared after a first run through run_op) computes and refuses what
run_op does."""

from __future__ import annotations

import io

import numpy as np

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.program import Placement
from firmware_model.golden.host_cpu import _HostOp, host_cycles
from firmware_model.tosa_ops.registry import TensorSpec
from sim.paths import MODELS_DIR


def test_host_op_keeps_the_manifest_entry():
    program = compile_file(MODELS_DIR / "mlp" / "model.tosa", load_config("tiny"), out=io.StringIO()).program
    ops = program.manifest["host_ops"]
    assert ops
    for index, entry in enumerate(ops):
        op = _HostOp(ops, index)
        assert op.cycles == host_cycles(ops, index)
        assert op.ins == [Placement.from_json(p) if p else None for p in entry["inputs"]]
        assert op.outs == [Placement.from_json(p) for p in entry["outputs"]]
        assert list(op.input_specs) == [TensorSpec(tuple(p.shape), p.dtype) if p else None for p in op.ins]
        assert list(op.output_specs) == [TensorSpec(tuple(p.shape), p.dtype) for p in op.outs]
        assert op.where == (entry.get("graph_where") or f"host op {index}: {entry['where']}")


def _add_program():
    """A program of one host op, ADD of two int32 tensors in external memory (its kernel is
    prepared once and checks apply_add_s's REQUIRE), then END."""
    from firmware_model.arch.isa import Command, Opcode
    from firmware_model.arch.program import Program

    place = lambda name, addr: {"name": name, "addr": addr, "shape": [1, 4], "dtype": "INT32"}   # noqa: E731
    entry = {"op": "ADD", "attrs": {}, "attr_kind": None, "where": "op #3 ADD -> c",
             "inputs": [place("a", 0), place("b", 64)], "outputs": [place("c", 128)]}
    return Program([Command(Opcode.HOST, 0, 0, 0), Command(Opcode.END)], b"",
                   {"memory": {"constants": {"addr": 0}}, "host_ops": [entry]})


def test_prepared_execute_runs_what_run_op_runs():
    """The host op's first run goes through run_op, later ones through the kernel's execute half:
    the same outputs, and the same REQUIRE failure (type and message) on inputs that overflow."""
    from firmware_model.errors import TosaUnpredictable
    from firmware_model.golden.host_cpu import HostCpu
    from firmware_model.golden.model import GoldenModel
    from firmware_model.tosa_ops.registry import OpCall, run_op

    program = _add_program()
    model = GoldenModel(program, load_config("tiny"), requires=False)
    host = HostCpu(program)
    op = program.manifest["host_ops"][0]
    ins = [Placement.from_json(p) for p in op["inputs"]]
    out = Placement.from_json(op["outputs"][0])
    rng = np.random.default_rng(1)
    seen = set()
    for k in range(40):
        big = k % 3 == 2
        for p in ins:
            model.write_tensor(p, rng.integers(-(1 << 31), 1 << 31, (1, 4)) if big
                               else rng.integers(-1000, 1000, (1, 4)))
        arrays = [model.read_tensor(p) for p in ins]
        call = OpCall(op="ADD", attrs={}, inputs=arrays, input_specs=[TensorSpec((1, 4), p.dtype) for p in ins],
                      output_specs=[TensorSpec((1, 4), out.dtype)], where=f"host op 0: {op['where']}",
                      attr_kind=None)
        try:
            want = ("ok", run_op(call)[0])
        except TosaUnpredictable as e:
            want = ("raised", str(e))
        try:
            host.run(model, 0)
            got = ("ok", model.read_tensor(out))
        except TosaUnpredictable as e:
            got = ("raised", str(e))
        assert got[0] == want[0]
        if got[0] == "ok":
            assert np.array_equal(got[1], want[1].reshape(1, 4))
        else:
            assert got[1] == want[1]
        seen.add((got[0], host._prepared[0].execute is not None))
    assert {("ok", True), ("raised", True)} <= seen


def test_small_clz_runs_on_the_words_as_the_kernel_does():
    """mlp's host CLZ takes HostCpu's small path from its second run (_HostOp.fast): on int32
    edges and random words its result bytes are count_leading_zeros' (a wrong answer for 0,
    negatives or a power of two fails this)."""
    from firmware_model.golden.host_cpu import HostCpu
    from firmware_model.golden.model import GoldenModel
    from firmware_model.tosa_ops.numerics import count_leading_zeros

    cfg = load_config("default")
    program = compile_file(MODELS_DIR / "mlp" / "model.tosa", cfg, out=io.StringIO()).program
    ops = program.manifest["host_ops"]
    index = next(k for k, e in enumerate(ops) if e["op"] == "CLZ")
    model = GoldenModel(program, cfg)
    host = HostCpu(program)
    src, dst = Placement.from_json(ops[index]["inputs"][0]), Placement.from_json(ops[index]["outputs"][0])
    rng = np.random.default_rng(5)
    edges = [0, 1, -1, 2, 3, 4, 7, 8, (1 << 31) - 1, -(1 << 31), 1 << 30, (1 << 30) - 1, -(1 << 30), 1 << 16]
    values = edges + [int(v) for v in rng.integers(-(1 << 31), 1 << 31, 200)] \
        + [int(v) >> int(s) for v, s in zip(rng.integers(0, 1 << 31, 100), rng.integers(0, 31, 100))]
    seen_fast = 0
    for v in values:
        model.write_tensor(src, np.full(src.shape, v, dtype=np.int32))
        seen_fast += host._prepared.get(index) is not None and host._prepared[index].fast is not None
        host.run(model, index)
        want = count_leading_zeros(np.full(src.shape, v, dtype=np.int32))
        assert np.array_equal(model.read_tensor(dst), want), v
    assert seen_fast == len(values) - 1
