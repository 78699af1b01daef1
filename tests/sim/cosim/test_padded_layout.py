"""The padded layout (NpuEltwise.pix, compiler/passes/cascading.py): a 1x1 convolution's result of
C channels, C not a whole number of SRAM words, stays in the output SRAM with its pixels a whole
number of words apart, the residual ADD reads it there as A and computes whole padded pixels (the
elements past C left over, never stored), loading its other operand and storing its sum C bytes a
pixel, and the depthwise layer after it reads the sum on chip.

A seeded residual block (sim.models.mlir_graphs.residual_block_mlir) of 6 channels, serialised by
tosa-tools: on every configuration the outputs equal Arm's reference model's on the golden model,
in fewer cycles than with the padded cascades refused; on tiny and default the RTL runs it and
every tile, the cycle count and the outputs match (golden, interpreter, Arm's model)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from compiler import pipeline
from compiler.npu.base import round_up
from compiler.npu.eltwise import NpuEltwise
from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import EltMode, Opcode, Reg, Sram
from firmware_model.golden.model import GoldenModel
from sim import seeds
from sim.models.mlir_graphs import residual_block_mlir, serialize
from sim.oracles.arm_oracle import VALID, run_inprocess

H, W, C = 8, 8, 6


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    """(the .tosa, an input, Arm's reference model's output for it)."""
    model = serialize(residual_block_mlir(seeds.rng(7), (H, W, C)), tmp_path_factory.mktemp("residual"))
    x = seeds.rng(8).integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_inprocess(model.read_bytes(), [x])
    assert ref.status == VALID
    return model, x, ref.outputs[0]


def _compile(model, config):
    return pipeline.compile_graph(read_tosa(model), load_config(config), out=io.StringIO())


def _padded_adds(ctx) -> list[NpuEltwise]:
    return [op.attrs["npu"] for op in ctx.block.operators
            if isinstance(op.attrs.get("npu"), NpuEltwise) and op.attrs["npu"].pix]


@pytest.mark.parametrize("config", ["tiny", "default", "large"])
def test_the_residual_add_computes_in_the_padded_layout(block, config, monkeypatch):
    model, x, ref = block
    cfg = load_config(config)
    assert C % cfg.word_bytes, "the block's channels must not fill whole words here"
    pix = round_up(C, cfg.word_bytes)
    ctx = _compile(model, config)
    (add,) = _padded_adds(ctx)
    assert add.pix == pix and add.a_cascade is not None and add.a_cascade.pix == pix
    assert any("(its A); not stored" in line and f"({H}x{W}x{C})" in line for line in ctx.report), ctx.report
    if config != "tiny":        # tiny's 2 KiB output SRAM has no room left for the sum's region
        assert add.cascade_out is not None and add.cascade_out.pix == pix
    # every ELTWISE command takes whole padded pixels, A from the output SRAM
    for _, regs in ctx.program.registers_at(Opcode.ELTWISE):
        assert regs[int(Reg.ELT_COUNT)] % pix == 0 and regs[int(Reg.ELT_MODE)] & EltMode.A_FROM_OUTPUT
    # the sum's stores (when it is stored) and the other operand's loads move C bytes a pixel
    runs = [regs for _, regs in ctx.program.registers_at(Opcode.DMA_STORE) + ctx.program.registers_at(Opcode.DMA_LOAD)
            if regs.get(int(Reg.DMA_LEN0)) == C and regs.get(int(Reg.DMA_SRAM_STRIDE1)) == pix]
    assert runs
    golden = GoldenModel(ctx.program, cfg)
    out = golden.invoke({"TosaInput_0": x})
    (got,) = out.values()
    assert got.dtype == ref.dtype and np.array_equal(got, ref)
    # refused, the ADD loads its operand back and stores its sum dense: same bits, more cycles
    monkeypatch.setattr(NpuEltwise, "padded_layout_ok", lambda self, cfg: False)
    plain = _compile(model, config)
    assert not _padded_adds(plain)
    other = GoldenModel(plain.program, cfg)
    (again,) = other.invoke({"TosaInput_0": x}).values()
    assert np.array_equal(again, ref)
    assert golden.counters.cycles < other.counters.cycles


@pytest.mark.rtl
@pytest.mark.parametrize("config", ["tiny", "default"])
def test_the_padded_layout_on_the_rtl(block, config, tmp_path):
    from sim.cosim.network import run_sim

    model, _, _ = block
    rep = run_sim(model, load_config(config), "verilator", workdir=tmp_path, progress=False)
    assert rep.ok and rep.passed == len(rep.tiles) > 0 and rep.golden_only == 0
    assert {t.unit for t in rep.tiles} == {"MAC", "ELTWISE"}
    assert all(i.rtl_cycles == i.model_cycles for i in rep.invocations)
    assert rep.output_checks == {"rtl == golden": True, "rtl == interpreter": True, "rtl == reference model": True}
