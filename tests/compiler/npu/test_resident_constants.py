"""Constants several operations load (a recurrent cell's weights and records, step after step):
one copy in the constants image (scheduler.ConstImage), a place of their own at the end of the
weight and parameter buffers (base.ConstantHomes), and no second DMA_LOAD while the SRAM still
holds them (base.CommandWriter's resident loads)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from compiler import pipeline
from compiler.npu import base
from compiler.npu.base import CommandWriter, ConstantHomes
from compiler.passes.scheduler import ConstImage
from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Opcode, Reg, Sram
from firmware_model.golden.model import GoldenModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def test_identical_read_only_blobs_share_one_place_in_the_image():
    image = ConstImage()
    a = image.add(b"weights" * 10)
    b = image.add(b"other")
    assert image.add(b"weights" * 10) == a and image.shared == {a}
    home = image.add(b"other", writable=True)         # a variable's home: its own bytes, never shared
    assert home not in (a, b) and image.writable == [(home, home + 5)]
    assert image.add(b"other") == b and image.shared == {a, b}
    assert image.bytes()[home:home + 5] == b"other" and len(image.bytes()) == image.size


def _loads(w: CommandWriter) -> list[tuple[int, int]]:
    """(SRAM, external address) of each DMA_LOAD written, from the registers as the stream sets them."""
    regs, out = {}, []
    for c in w.commands:
        if c.opcode == Opcode.SET:
            regs[c.sub] = c.value
        elif c.opcode == Opcode.DMA_LOAD:
            out.append((c.sub, regs.get(int(Reg.DMA_EXT_ADDR), 0)))
    return out


def test_a_constant_load_whose_bytes_are_in_sram_is_left_out_until_they_are_written_over():
    w = CommandWriter(read_only=((0, 4096),))
    w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=128, sram_addr=256, len0=64)
    w.dma(Opcode.DMA_LOAD, Sram.PARAM, ext=512, sram_addr=256, len0=33)
    w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=128, sram_addr=256, len0=64)      # resident: nothing
    w.dma(Opcode.DMA_LOAD, Sram.PARAM, ext=512, sram_addr=256, len0=33)
    assert _loads(w) == [(Sram.WEIGHT, 128), (Sram.PARAM, 512)] and w.dma_count == 2 and w.skipped == 2
    assert w.holds(Sram.WEIGHT, ext=128, sram_addr=256, len0=64)
    assert not w.holds(Sram.WEIGHT, ext=128, sram_addr=320, len0=64)        # elsewhere: a new load
    # the same bytes elsewhere, a store, the output SRAM: loaded as written
    w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=128, sram_addr=1024, len0=64)
    w.dma(Opcode.DMA_STORE, Sram.WEIGHT, ext=8192, sram_addr=256, len0=64)
    w.dma(Opcode.DMA_LOAD, Sram.OUTPUT, ext=128, sram_addr=256, len0=64)
    w.dma(Opcode.DMA_LOAD, Sram.OUTPUT, ext=128, sram_addr=256, len0=64)
    assert w.dma_count == 6 and w.holds(Sram.WEIGHT, ext=128, sram_addr=256, len0=64)
    # a FILL over one byte of it, or a load of bytes some command may write, forgets it
    w.dma(Opcode.FILL, Sram.WEIGHT, sram_addr=319, len0=1, value=0)
    assert not w.holds(Sram.WEIGHT, ext=128, sram_addr=256, len0=64)
    assert w.holds(Sram.WEIGHT, ext=128, sram_addr=1024, len0=64)           # (not under the FILL)
    w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=8192, sram_addr=1000, len0=32)   # outside read_only
    assert not w.holds(Sram.WEIGHT, ext=128, sram_addr=1024, len0=64)
    w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=8192, sram_addr=1000, len0=32)
    assert w.dma_count == 9                                                  # never resident
    assert w.holds(Sram.PARAM, ext=512, sram_addr=256, len0=33)              # another SRAM: kept
    # a scratch writer sees what is resident; what it writes counts once adopted
    scratch = w.fork()
    scratch.dma(Opcode.DMA_LOAD, Sram.PARAM, ext=512, sram_addr=256, len0=33)
    scratch.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=64, sram_addr=0, len0=16)
    assert scratch.dma_count == 1 and w.dma_count == 9 and not w.holds(Sram.INPUT, ext=64, sram_addr=0, len0=16)
    w.adopt(scratch)
    assert w.dma_count == 10 and w.skipped == 3 and w.holds(Sram.INPUT, ext=64, sram_addr=0, len0=16)


def test_homes_are_apart_and_only_for_shared_blobs_that_fit():
    W, P = Sram.WEIGHT, Sram.PARAM
    parts = {W: 1024, P: 32}
    homes = ConstantHomes(frozenset({100, 200, 300}))
    assert homes.offsets(999, {W: 64, P: 4}, parts) is None                    # loaded by one operation
    assert homes.offsets(100, {W: 512, P: 8}, parts) == {W: 0, P: 0}
    assert homes.offsets(200, {W: 256, P: 16}, parts) == {W: 512, P: 8}
    assert homes.offsets(100, {W: 512, P: 8}, parts) == {W: 0, P: 0}          # the same blob: its place
    assert homes.offsets(300, {W: 512, P: 4}, parts) is None                  # does not fit beside them
    assert homes.offsets(300 + 11, {P: 2}, parts, blob=300) == {P: 24}        # records of a shared blob


def _compile(name: str, config: str):
    return pipeline.compile_graph(read_tosa(MODELS_DIR / name / "model.tosa"), load_config(config), out=io.StringIO())


@pytest.mark.parametrize("name,config", [("gru", "large"), ("lstm", "default")])
def test_a_recurrent_cell_keeps_its_weights_in_sram_across_steps(name, config, monkeypatch):
    """The cell's constants are loaded once per invocation, not once per step; the outputs are
    the reference outputs over the committed invocations (state carried), in fewer cycles and
    with fewer external bytes read than with every load written out."""
    ctx = _compile(name, config)
    summary = next(line for line in ctx.report if line.startswith("summary"))
    skipped = int(summary.split("commands, ")[1].split()[0])
    assert skipped >= 5, summary
    monkeypatch.setattr(base, "RESIDENT_SRAMS", ())
    plain = _compile(name, config)
    loads = lambda p: sum(1 for c in p.commands if c.opcode == Opcode.DMA_LOAD)    # noqa: E731
    assert loads(ctx.program) == loads(plain.program) - skipped
    data = ModelData.of(MODELS_DIR / name)
    cfg = load_config(config)
    golden, other = GoldenModel(ctx.program, cfg), GoldenModel(plain.program, cfg)
    for k in range(data.invocations):
        outs, others = golden.invoke(data.inputs(k)), other.invoke(data.inputs(k))
        for key, want in data.reference_outputs(k).items():
            assert np.array_equal(outs[key], want) and np.array_equal(others[key], want), (k, key)
    assert golden.counters.cycles < other.counters.cycles
    assert golden.counters.bytes_read["ext"] < other.counters.bytes_read["ext"]
