"""Cascades (compiler/passes/cascading.py): a convolution's result read by the 1x1 convolution after
it where it was written, in the output SRAM."""

import io

import numpy as np
import pytest

from compiler import pipeline
from compiler.passes import cascading
from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import EltMode, Opcode, Reg, Sram
from firmware_model.golden.model import GoldenModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def _compile(name: str, config: str):
    return pipeline.compile_graph(read_tosa(MODELS_DIR / name / "model.tosa"), load_config(config), out=io.StringIO())


def _mac_sources(program) -> list[int]:
    """IFM_SRAM of every MAC command."""
    return [regs.get(int(Reg.IFM_SRAM), 0) for _, regs in program.registers_at(Opcode.MAC)]


def _eltwise_a_sources(program) -> list[bool]:
    """Per ELTWISE command, whether it reads A from the output SRAM (A_FROM_OUTPUT)."""
    return [bool(regs.get(int(Reg.ELT_MODE), 0) & EltMode.A_FROM_OUTPUT)
            for _, regs in program.registers_at(Opcode.ELTWISE)]


def _check_against_plain(name: str, config: str, ctx, plain) -> None:
    """`ctx`'s program gives the network's reference outputs on the golden model; `plain` (the
    same network compiled without some cascades) the same outputs in more cycles, with more
    external bytes."""
    data = ModelData.of(MODELS_DIR / name)
    cfg = load_config(config)
    golden, other = GoldenModel(ctx.program, cfg), GoldenModel(plain.program, cfg)
    outs, others = golden.invoke(data.inputs(0)), other.invoke(data.inputs(0))
    for key, want in data.reference_outputs(0).items():
        assert np.array_equal(outs[key], want) and np.array_equal(others[key], want), key
    assert golden.counters.cycles < other.counters.cycles
    ext = lambda g: g.counters.bytes_read["ext"] + g.counters.bytes_written["ext"]   # noqa: E731
    assert ext(golden) < ext(other)


@pytest.mark.parametrize("config", ["default", "large"])
def test_cnn32_pointwise_layers_read_the_depthwise_results_on_chip(config, monkeypatch):
    ctx = _compile("cnn32", config)
    report = "\n".join(ctx.report)
    assert "cascade:" in report and "not stored" in report
    assert Sram.OUTPUT in _mac_sources(ctx.program)
    # the same network without cascades: same outputs, more cycles and more external traffic
    monkeypatch.setattr(cascading, "run", lambda ctx: None)
    plain = _compile("cnn32", config)
    assert Sram.OUTPUT not in _mac_sources(plain.program)
    _check_against_plain("cnn32", config, ctx, plain)


def test_a_fully_connected_result_reaches_the_next_layer_through_its_reshape(monkeypatch):
    """mlp on large: each fully connected layer's result goes through a RESHAPE (an alias, no
    command) before the next one reads it; the cascade follows the alias, and since nothing else
    reads the result, it is not stored. Same outputs as Arm's model, fewer cycles and external
    bytes than without cascades."""
    ctx = _compile("mlp", "large")
    lines = [line for line in ctx.report if "cascade:" in line]
    assert any(line.strip().startswith("cascade: layer_49 ") and line.endswith("not stored") for line in lines), lines
    assert Sram.OUTPUT in _mac_sources(ctx.program)
    monkeypatch.setattr(cascading, "run", lambda ctx: None)
    _check_against_plain("mlp", "large", ctx, _compile("mlp", "large"))


def test_a_result_larger_than_the_regions_share_of_the_output_sram_is_not_cascaded():
    """blazeface on default (32 KiB output SRAM, regions up to 24 KiB: cascading.region_limit):
    its 32x32 depthwise results of 32 channels and more (32 KiB and more) and its 64x64 one stay
    in external memory; the 32x32x24 one (24 KiB) and the 16x16 ones are cascaded."""
    report = "\n".join(_compile("blazeface", "default").report)
    lines = [line for line in report.splitlines() if "cascade:" in line]
    assert cascading.region_limit(load_config("default")) == 24 * 1024
    assert lines and not any(f"(32x32x{c})" in line for line in lines for c in (32, 36, 42))
    assert not any("(64x64x" in line for line in lines)
    assert any("(32x32x24)" in line for line in lines) and any("(16x16x" in line for line in lines)


def test_an_elementwise_result_feeds_the_pointwise_convolutions_after_it_on_chip(monkeypatch):
    """blazeface on large: the residual ADD before the first detection heads (16x16x80: 80 channels
    are five words, so its dense bytes are the MAC's input layout) stays in the output SRAM for
    both 1x1 heads that follow it; it is still stored, since the next block's depthwise
    convolution reads it too. Same outputs as Arm's model, fewer cycles and external bytes than
    without elementwise producers."""
    ctx = _compile("blazeface", "large")
    lines = [line for line in ctx.report if "cascade:" in line and "(16x16x80)" in line and ", " in line]
    assert lines and not lines[0].endswith("not stored"), ctx.report
    # the last ADD's result reaches the second head past the CONCAT between them (a data
    # movement, planned again below the region)
    assert any("(8x8x80)" in line and "layer_370, layer_374" in line for line in ctx.report), ctx.report
    real = cascading._producer
    monkeypatch.setattr(cascading, "_producer",
                        lambda npu, cfg: not isinstance(npu, cascading.NpuEltwise) and real(npu, cfg))
    plain = _compile("blazeface", "large")
    assert not any("(16x16x80)" in line and ", " in line for line in plain.report if "cascade:" in line)
    assert _mac_sources(plain.program).count(Sram.OUTPUT) < _mac_sources(ctx.program).count(Sram.OUTPUT)
    _check_against_plain("blazeface", "large", ctx, plain)


@pytest.mark.parametrize("config", ["default", "large"])
def test_a_pointwise_result_is_the_residual_adds_operand_on_chip(config, monkeypatch):
    """blazeface: a pointwise convolution whose result only the residual ADD after it reads (as
    its A, or as its B: the operands of ADD trade places), with channels a whole number of words,
    leaves it dense in the output SRAM; every tile of the ADD reads A there, and the result is
    never stored. Same outputs as Arm's model; without these cascades the same outputs with more
    cycles and external bytes."""
    ctx = _compile("blazeface", config)
    lines = [line for line in ctx.report if "cascade:" in line and "(its A); not stored" in line]
    assert lines, ctx.report
    if config == "large":
        # layer_224 is the ADD's B, and a max pool and a channel PAD run between the two: the
        # operands trade places (ADD commutes) and the two are planned below the region
        assert any("layer_224 (32x32x32)" in line and "layer_232 (its A)" in line for line in lines), lines
    monkeypatch.setattr(cascading, "_to_eltwise", lambda *a: False)
    plain = _compile("blazeface", config)
    assert sum(_eltwise_a_sources(plain.program)) < sum(_eltwise_a_sources(ctx.program))
    _check_against_plain("blazeface", config, ctx, plain)


@pytest.mark.parametrize("config", ["default", "large"])
def test_depthwise_layers_read_the_residual_adds_result_on_chip(config, monkeypatch):
    """blazeface: a BlazeBlock's residual ADD leaves its result in the output SRAM for the next
    block's 5x5 depthwise layer, which reads it there (IFM_SRAM OUTPUT, its boxes' padding as
    IFM_ZP: the region keeps two rows and columns free on each side) and, on `large`, writes its
    own result into a region below for the pointwise layer after it (the cascades chain; on
    `default` the 32 KiB output SRAM holds one of the two, whichever the pass meets first). The ADD
    still stores its result (the skip path reads it). Same outputs as Arm's model, fewer cycles
    and external bytes than with the depthwise layers loading their input."""
    from firmware_model.arch.isa import DEPTHWISE_MODES

    ctx = _compile("blazeface", config)
    lines = [line for line in ctx.report if "cascade:" in line]
    add, dw = ("layer_281", "layer_285") if config == "default" else ("layer_293", "layer_297")
    into_dw = [line for line in lines if line.strip().startswith(f"cascade: {add} ") and line.endswith(f"for {dw}")]
    assert into_dw, lines
    dw_from_output = [regs for c, regs in ctx.program.registers_at(Opcode.MAC)
                      if c.sub in DEPTHWISE_MODES and regs.get(int(Reg.IFM_SRAM), 0) == Sram.OUTPUT]
    assert dw_from_output and all(regs.get(int(Reg.IFM_IN_H), 0) > 0 for regs in dw_from_output)
    if config == "large":                          # and the depthwise result goes on to layer_299
        assert any(line.strip().startswith(f"cascade: {dw} ") for line in lines), lines
    consumer = cascading._consumer
    monkeypatch.setattr(cascading, "_consumer",
                        lambda npu, *a: not getattr(npu, "depthwise", False) and consumer(npu, *a))
    plain = _compile("blazeface", config)
    assert not any(c.sub in DEPTHWISE_MODES and regs.get(int(Reg.IFM_SRAM), 0) == Sram.OUTPUT
                   for c, regs in plain.program.registers_at(Opcode.MAC))
    _check_against_plain("blazeface", config, ctx, plain)


@pytest.mark.parametrize("config", ["default", "large"])
def test_a_producer_reading_a_region_writes_its_own_apart_from_it(config):
    """Every operation that both reads a cascade region (a depthwise layer's input, an ADD's A)
    and writes one puts the two apart, counting the bytes a depthwise consumer's padded boxes
    reach outside a region (Cascade.before / after): the bytes it reads, [floor, end), and the
    bytes its own consumers read. blazeface chains such cascades on both configurations."""
    from compiler.npu.base import NPU_OP
    from compiler.npu.eltwise import NpuEltwise

    ctx = _compile("blazeface", config)
    chained = 0
    for op in ctx.block.operators:
        if op.op != NPU_OP:
            continue
        npu = op.attrs["npu"]
        out = getattr(npu, "cascade_out", None)
        read = npu.a_cascade if isinstance(npu, NpuEltwise) else getattr(npu, "cascade_in", None)
        if out is None or read is None:
            continue
        chained += 1
        read_rows = npu.out_shape[1] if isinstance(npu, NpuEltwise) else npu.in_shape[1]
        read_span = (read.floor, read.addr + read.row * read_rows + read.after)
        out_span = (out.floor, out.addr + out.row * npu.out_shape[1] + out.after)
        assert read_span[1] <= out_span[0] or out_span[1] <= read_span[0], (npu.sources, read_span, out_span)
    assert chained >= 3


def test_channels_short_of_a_word_reach_the_residual_add_and_the_depthwise_layer_padded(monkeypatch):
    """blazeface on large (16-byte words): the pointwise results of 36, 42, 56 and 72 channels go
    to their residual ADDs as A in the padded layout (pixels a whole number of words apart), never
    stored; the ADDs compute whole padded pixels and leave their sums, in that layout, for the next
    depthwise layers (and store them C bytes a pixel for the skip path). Same outputs as Arm's
    model, fewer cycles and external bytes than with the padded layout refused."""
    from compiler.npu.eltwise import NpuEltwise

    ctx = _compile("blazeface", "large")
    lines = [line.strip() for line in ctx.report if "cascade:" in line]
    for conv, add, dw, shape in (("layer_238", "layer_244", "layer_248", "32x32x36"),
                                 ("layer_250", "layer_256", "layer_259", "32x32x42"),
                                 ("layer_275", "layer_281", "layer_285", "16x16x56"),
                                 ("layer_299", "layer_305", "layer_309", "16x16x72")):
        assert any(line.startswith(f"cascade: {conv} ({shape})") and line.endswith(f"for {add} (its A); not stored")
                   for line in lines), (conv, lines)
        assert any(line.startswith(f"cascade: {add} ({shape})") and line.endswith(f"for {dw}") for line in lines)
    padded = [op.attrs["npu"] for op in ctx.block.operators
              if isinstance(op.attrs.get("npu"), NpuEltwise) and op.attrs["npu"].pix]
    assert sorted(npu.out_shape[3] for npu in padded) == [36, 42, 56, 72]
    assert all(npu.pix % 16 == 0 and npu.cascade_out is not None and npu.cascade_out.store for npu in padded)
    monkeypatch.setattr(NpuEltwise, "padded_layout_ok", lambda self, cfg: False)
    _check_against_plain("blazeface", "large", ctx, _compile("blazeface", "large"))
