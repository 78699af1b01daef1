"""The DMA engine: 3-D strided copies between external memory and an SRAM, and SRAM fills.

A transfer moves LEN2 x LEN1 runs of LEN0 contiguous bytes; run (i2, i1) starts at
    external: DMA_EXT_ADDR  + i2*DMA_EXT_STRIDE2  + i1*DMA_EXT_STRIDE1
    SRAM:     DMA_SRAM_ADDR + i2*DMA_SRAM_STRIDE2 + i1*DMA_SRAM_STRIDE1
FILL writes the byte `value` over the same SRAM pattern (used for padding halos with the input
zero point before a load, and for padding weight blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_model.isa import Reg, Sram
from firmware_model.memories import Memories
from firmware_model.npu_config import NpuConfig
from firmware_model.perf import dma_cycles, fill_cycles


@dataclass
class DmaResult:
    cycles: int
    bytes: int
    sram: Sram
    sram_range: tuple[int, int]


def _offsets(base: int, len0: int, len1: int, len2: int, stride1: int, stride2: int) -> np.ndarray:
    i2 = np.arange(len2, dtype=np.int64).reshape(-1, 1, 1) * stride2
    i1 = np.arange(len1, dtype=np.int64).reshape(1, -1, 1) * stride1
    i0 = np.arange(len0, dtype=np.int64).reshape(1, 1, -1)
    return (base + i2 + i1 + i0).reshape(-1)


def _geometry(regs: dict[int, int]):
    g = lambda r: regs.get(r, 0)  # noqa: E731
    return g(Reg.DMA_LEN0), g(Reg.DMA_LEN1), g(Reg.DMA_LEN2)


def dma_transfer(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sram: Sram, to_sram: bool) -> DmaResult:
    g = lambda r: regs.get(r, 0)  # noqa: E731
    len0, len1, len2 = _geometry(regs)
    ext = _offsets(g(Reg.DMA_EXT_ADDR), len0, len1, len2, g(Reg.DMA_EXT_STRIDE1), g(Reg.DMA_EXT_STRIDE2))
    on_chip = _offsets(g(Reg.DMA_SRAM_ADDR), len0, len1, len2, g(Reg.DMA_SRAM_STRIDE1), g(Reg.DMA_SRAM_STRIDE2))
    n = len(ext)
    rng = (int(on_chip.min()), int(on_chip.max()) + 1) if n else (0, 0)
    if n:
        what = f"DMA_{'LOAD' if to_sram else 'STORE'} {sram.name}"
        mem.check_range("ext", int(ext.min()), int(ext.max()) + 1, what)
        mem.check_range(sram, rng[0], rng[1], what)
        if to_sram:
            mem.sram[sram][on_chip] = mem.ext[ext]
        else:
            mem.ext[ext] = mem.sram[sram][on_chip]
    return DmaResult(dma_cycles(cfg, len0=len0, len1=len1, len2=len2), n, sram, rng)


def fill(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sram: Sram, value: int) -> DmaResult:
    g = lambda r: regs.get(r, 0)  # noqa: E731
    len0, len1, len2 = _geometry(regs)
    on_chip = _offsets(g(Reg.DMA_SRAM_ADDR), len0, len1, len2, g(Reg.DMA_SRAM_STRIDE1), g(Reg.DMA_SRAM_STRIDE2))
    rng = (int(on_chip.min()), int(on_chip.max()) + 1) if len(on_chip) else (0, 0)
    if len(on_chip):
        mem.check_range(sram, rng[0], rng[1], f"FILL {sram.name}")
        mem.sram[sram][on_chip] = value & 0xFF
    return DmaResult(fill_cycles(cfg, len0=len0, len1=len1, len2=len2), len(on_chip), sram, rng)
