"""The command writer's SETs (compiler/npu/base.CommandWriter): a register is set only when its
value changes, and a DMA stride only when its length is above 1 — the transfer a stale stride
leaves in the register is the one meant, as the golden model and the timing model read it."""

from __future__ import annotations

from compiler.npu.base import CommandWriter
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Opcode, Reg, Sram
from firmware_model.golden.dma import dma_plan


def _regs_at_last(w: CommandWriter) -> dict[int, int]:
    regs = {}
    for c in w.commands:
        if c.opcode == Opcode.SET:
            regs[c.sub] = c.value
    return regs


def test_a_one_run_transfer_leaves_the_strides_as_they_are_and_means_the_same_bytes():
    cfg = load_config("default")
    w = CommandWriter()
    w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=4096, sram_addr=64, len0=24, len1=5, len2=3,
          ext_s1=96, ext_s2=960, sram_s1=32, sram_s2=320)
    before = len(w.commands)
    w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=8192, sram_addr=128, len0=40)
    sets = {Reg(c.sub) for c in w.commands[before:] if c.opcode == Opcode.SET}
    assert sets == {Reg.DMA_EXT_ADDR, Reg.DMA_SRAM_ADDR, Reg.DMA_LEN0, Reg.DMA_LEN1, Reg.DMA_LEN2}
    stale = _regs_at_last(w)
    assert stale[int(Reg.DMA_SRAM_STRIDE1)] == 32 and stale[int(Reg.DMA_EXT_STRIDE2)] == 960
    clean = dict(stale)
    for reg in (Reg.DMA_EXT_STRIDE1, Reg.DMA_EXT_STRIDE2, Reg.DMA_SRAM_STRIDE1, Reg.DMA_SRAM_STRIDE2):
        clean[int(reg)] = 0
    got, want = dma_plan(cfg, stale, Sram.WEIGHT, True), dma_plan(cfg, clean, Sram.WEIGHT, True)
    assert got.sram_range == want.sram_range == (128, 168) and got.cycles == want.cycles
    # a second dimension of length 1: its stride is not set either; the first one is
    before = len(w.commands)
    w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=0, sram_addr=0, len0=8, len1=4, len2=1, ext_s1=16, sram_s1=8)
    sets = {Reg(c.sub) for c in w.commands[before:] if c.opcode == Opcode.SET}
    assert Reg.DMA_EXT_STRIDE1 in sets and Reg.DMA_SRAM_STRIDE1 in sets
    assert Reg.DMA_EXT_STRIDE2 not in sets and Reg.DMA_SRAM_STRIDE2 not in sets
