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


def _store(w: CommandWriter, sram_addr: int, ext: int, n: int) -> None:
    w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=ext, sram_addr=sram_addr, len0=n)


def test_a_stored_result_is_kept_until_its_bytes_are_written_over():
    """CommandWriter.results: a dense run stored from the output SRAM is found by its external
    bytes (result_holding) until a command writes its SRAM bytes (an ELTWISE's results, a MAC's
    or POOL's output box, a DMA_LOAD or FILL into the output SRAM) or its external bytes change
    (a later store over them, a HOST or VAR command); commands elsewhere leave it."""
    from compiler.npu.base import result_holding
    from firmware_model.tosa_ops.dtypes import DType

    w = CommandWriter()
    _store(w, 64, 4096, 40)
    _store(w, 128, 8192, 16)
    assert result_holding(w.results, 4096 + 8, 8) == 72 and result_holding(w.results, 8192, 16) == 128
    assert result_holding(w.results, 4096 + 36, 8) is None          # past the run's end
    # an ELTWISE whose 4 int32 results end just below the first run leaves it
    for reg, v in ((Reg.ELT_OUT_ADDR, 48), (Reg.ELT_COUNT, 4), (Reg.OFM_DTYPE, int(DType.INT32))):
        w.set(reg, v)
    w.emit(Opcode.ELTWISE)
    assert len(w.results) == 2
    w.set(Reg.ELT_COUNT, 5)                                          # ... one more reaches it
    w.emit(Opcode.ELTWISE)
    assert result_holding(w.results, 4096, 40) is None and result_holding(w.results, 8192, 16) == 128
    # a MAC's output box: 2 x 2 pixels of 4 int8 channels, rows 64 bytes apart, from 0
    _store(w, 64, 4096, 40)
    for reg, v in ((Reg.OFM_ADDR, 0), (Reg.OFM_H, 2), (Reg.OFM_W, 2), (Reg.OFM_C, 4), (Reg.OFM_ROW_STRIDE, 64),
                   (Reg.OFM_PIX_STRIDE, 4), (Reg.OFM_DTYPE, int(DType.INT8))):
        w.set(reg, v)
    w.emit(Opcode.MAC)
    assert result_holding(w.results, 4096, 4) is None and result_holding(w.results, 8192, 16) == 128
    # a store of other bytes over the same external bytes: the older run is forgotten
    _store(w, 512, 8192 + 8, 16)
    assert result_holding(w.results, 8192, 8) is None and result_holding(w.results, 8192 + 8, 16) == 512
    # a FILL over it, then a HOST with another kept
    w.dma(Opcode.FILL, Sram.OUTPUT, sram_addr=520, len0=4)
    assert result_holding(w.results, 8192 + 8, 4) is None
    _store(w, 1024, 0, 8)
    w.emit(Opcode.HOST)
    assert w.results == []
    # a scratch writer takes them along (fork / adopt)
    _store(w, 1024, 0, 8)
    scratch = w.fork()
    _store(scratch, 2048, 64, 8)
    assert len(w.results) == 1
    w.adopt(scratch)
    assert result_holding(w.results, 64, 8) == 2048
