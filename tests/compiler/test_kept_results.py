"""Results kept in the output SRAM (compiler/npu/base.CommandWriter.results, compiler/npu/eltwise.py):
an elementwise operation's first tile reads an operand, A or B, where an earlier command left it
(A_FROM_OUTPUT, B_FROM_OUTPUT), a one-tile POOL its input box (IFM_SRAM OUTPUT), and small results
go to a ring of places so that they stay there while the operations after them run."""

import io

import numpy as np
import pytest

from compiler import pipeline
from compiler.npu import base, eltwise, pool
from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import EltMode, Opcode, Reg, Sram
from firmware_model.golden.model import GoldenModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def _compile(name: str, config: str):
    return pipeline.compile_graph(read_tosa(MODELS_DIR / name / "model.tosa"), load_config(config), out=io.StringIO())


def _from_output(program) -> tuple[int, int]:
    """(ELTWISE commands with A_FROM_OUTPUT, with B_FROM_OUTPUT)."""
    modes = [EltMode(regs.get(int(Reg.ELT_MODE), 0)) for _, regs in program.registers_at(Opcode.ELTWISE)]
    return sum(EltMode.A_FROM_OUTPUT in m for m in modes), sum(EltMode.B_FROM_OUTPUT in m for m in modes)


def _pools_on_chip(program) -> int:
    """POOL commands that read their input box from the output SRAM (IFM_SRAM OUTPUT)."""
    return sum(regs.get(int(Reg.IFM_SRAM), 0) == Sram.OUTPUT for _, regs in program.registers_at(Opcode.POOL))


def _run(program, config: str, data: ModelData) -> GoldenModel:
    golden = GoldenModel(program, load_config(config))
    for k in range(data.invocations):
        outs = golden.invoke(data.inputs(k))
        for key, want in data.reference_outputs(k).items():
            assert np.array_equal(outs[key], want), (k, key)
    return golden


@pytest.mark.parametrize("name,config", [("mlp", "large"), ("lstm", "default"), ("gru", "tiny")])
def test_elementwise_chains_read_their_operands_where_they_were_written(name, config, monkeypatch):
    """mlp's softmax and the recurrent cells' gates: some ELTWISE commands read B (and A) from
    the output SRAM, mlp's two reductions their input box. Against the same network compiled without kept results (each operand loaded
    back, each small result at its buffer's start): Arm's reference outputs on every committed
    invocation from both, in fewer cycles and fewer external bytes."""
    data = ModelData.of(MODELS_DIR / name)
    ctx = _compile(name, config)
    a_kept, b_kept = _from_output(ctx.program)
    assert b_kept > 0 and a_kept > 0
    if name == "mlp":
        assert _pools_on_chip(ctx.program) == 2          # the softmax's REDUCE_MAX and REDUCE_SUM
    monkeypatch.setattr(eltwise.NpuEltwise, "_kept_operand", lambda *args: None)
    monkeypatch.setattr(pool.NpuPool, "_kept_box", lambda *args: None)
    monkeypatch.setattr(base, "RING_PLACES", 1)
    plain = _compile(name, config)
    assert _from_output(plain.program)[1] == 0 and _pools_on_chip(plain.program) == 0
    kept, loaded = _run(ctx.program, config, data), _run(plain.program, config, data)
    assert kept.counters.cycles < loaded.counters.cycles
    ext = lambda g: g.counters.bytes_read["ext"] + g.counters.bytes_written["ext"]   # noqa: E731
    assert ext(kept) < ext(loaded)


def test_small_results_of_consecutive_operations_go_to_different_places():
    """The ring (base.ring_place): mlp's Newton-Raphson steps on one int32 each
    write their results at different output-SRAM addresses, so that the value two or three
    operations back is still there to read."""
    ctx = _compile("mlp", "large")
    outs = [regs[int(Reg.ELT_OUT_ADDR)] for _, regs in ctx.program.registers_at(Opcode.ELTWISE)
            if regs.get(int(Reg.ELT_COUNT)) == 1]
    assert len(outs) > 10
    assert all(len(set(outs[k:k + 3])) == 3 for k in range(len(outs) - 2))
    assert all(a % base.RING_SLOT == 0 for a in outs)
