"""The DMA engine: 3-D strided copies between external memory and an SRAM, and SRAM fills.

A transfer moves LEN2 x LEN1 runs of LEN0 contiguous bytes; run (i2, i1) starts at
    external: DMA_EXT_ADDR  + i2*DMA_EXT_STRIDE2  + i1*DMA_EXT_STRIDE1
    SRAM:     DMA_SRAM_ADDR + i2*DMA_SRAM_STRIDE2 + i1*DMA_SRAM_STRIDE1
FILL writes the byte `value` over the same SRAM pattern (used for padding halos with the input
zero point before a load, and for padding weight blocks).

`dma_plan` / `fill_plan` are a command's checks and busy clocks from the registers alone; the
copies below run on what they found, and the timing-only model counts with them alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_model.arch.isa import Reg, Sram
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories, check_range
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import dma_busy_cycles


@dataclass
class DmaResult:
    cycles: int                 # the DMA engine's busy clocks (cycle_model.dma_busy_cycles)
    bytes: int
    sram: Sram
    sram_range: tuple[int, int]


@dataclass(slots=True)
class DmaPlan:
    """What a DMA_LOAD, DMA_STORE or FILL costs and touches, from its registers alone (dma_plan,
    fill_plan): the accounting the golden model counts and the timing-only model replays."""
    sram: Sram
    cycles: int                 # the DMA engine's busy clocks (cycle_model.dma_busy_cycles)
    bytes: int
    sram_range: tuple[int, int]
    ext: tuple | None           # (base, len0, len1, len2, stride1, stride2) in external memory (None: FILL)
    on_chip: tuple              # the same in the SRAM

    @property
    def ext_range(self) -> tuple[int, int]:
        """External-memory bytes [first, last + 1) of the pattern (a non-empty transfer's)."""
        return pattern_span(*self.ext)


# The registers a DMA_LOAD, DMA_STORE or FILL reads (dma_plan, fill_plan).
DMA_REGS = (Reg.DMA_EXT_ADDR, Reg.DMA_SRAM_ADDR, Reg.DMA_LEN0, Reg.DMA_LEN1, Reg.DMA_LEN2, Reg.DMA_EXT_STRIDE1,
            Reg.DMA_EXT_STRIDE2, Reg.DMA_SRAM_STRIDE1, Reg.DMA_SRAM_STRIDE2)


def dma_registers(fill: bool, len1: int, len2: int) -> tuple[Reg, ...]:
    """The DMA registers a transfer with these lengths reads, in the order a compiler sets them:
    a stride only when its length is above 1 (run i of a length of 1 never moves by it), and a
    FILL no external register."""
    regs = []
    if not fill:
        regs.append(Reg.DMA_EXT_ADDR)
        regs += [Reg.DMA_EXT_STRIDE1] if len1 > 1 else []
        regs += [Reg.DMA_EXT_STRIDE2] if len2 > 1 else []
    regs += [Reg.DMA_SRAM_ADDR, Reg.DMA_LEN0, Reg.DMA_LEN1, Reg.DMA_LEN2]
    regs += [Reg.DMA_SRAM_STRIDE1] if len1 > 1 else []
    regs += [Reg.DMA_SRAM_STRIDE2] if len2 > 1 else []
    return tuple(regs)


def pattern_span(base: int, len0: int, len1: int, len2: int, stride1: int, stride2: int) -> tuple[int, int]:
    """[first byte, end) a transfer's pattern touches: run (i2, i1) starts at base + i2*stride2 +
    i1*stride1 (docs/isa.md, "DMA and FILL"); the runs may leave gaps between them."""
    return base, base + (len2 - 1) * stride2 + (len1 - 1) * stride1 + len0


def dma_plan(cfg: NpuConfig, regs, sram: Sram, to_sram: bool) -> DmaPlan:
    """A transfer's checks (external memory, then the SRAM: a non-empty pattern must lie inside
    both) and busy clocks, from the registers (a dict or a `Registers` view)."""
    r = regs if isinstance(regs, Registers) else Registers(regs)
    len0, len1, len2 = r.dma_len0, r.dma_len1, r.dma_len2
    n = len0 * len1 * len2
    on_chip = (r.dma_sram_addr, len0, len1, len2, r.dma_sram_stride1, r.dma_sram_stride2)
    ext, rng = None, (0, 0)
    if n:
        ext = (r.dma_ext_addr, len0, len1, len2, r.dma_ext_stride1, r.dma_ext_stride2)
        what = f"DMA_{'LOAD' if to_sram else 'STORE'} {sram.name}"
        check_range(cfg, "ext", *pattern_span(*ext), what)
        rng = pattern_span(*on_chip)
        check_range(cfg, sram, *rng, what)
    cycles = dma_busy_cycles(cfg, sram, sram_addr=on_chip[0], len0=len0, len1=len1, len2=len2,
                             sram_stride1=on_chip[4], sram_stride2=on_chip[5])
    return DmaPlan(sram, cycles, n, rng, ext, on_chip)


def fill_plan(cfg: NpuConfig, regs, sram: Sram) -> DmaPlan:
    """A FILL's check (a non-empty pattern inside the SRAM) and busy clocks."""
    r = regs if isinstance(regs, Registers) else Registers(regs)
    len0, len1, len2 = r.dma_len0, r.dma_len1, r.dma_len2
    n = len0 * len1 * len2
    on_chip = (r.dma_sram_addr, len0, len1, len2, r.dma_sram_stride1, r.dma_sram_stride2)
    rng = (0, 0)
    if n:
        rng = pattern_span(*on_chip)
        check_range(cfg, sram, *rng, f"FILL {sram.name}")
    cycles = dma_busy_cycles(cfg, sram, fill=True, sram_addr=on_chip[0], len0=len0, len1=len1, len2=len2,
                             sram_stride1=on_chip[4], sram_stride2=on_chip[5])
    return DmaPlan(sram, cycles, n, rng, None, on_chip)


def _box(buf: np.ndarray, base: int, len0: int, len1: int, len2: int, stride1: int, stride2: int) -> np.ndarray:
    """The len2 x len1 x len0 bytes of `buf` the pattern addresses, as a strided view (no copy).
    Strides are unsigned registers, so the pattern spans [base, last] (_span); the plan checks
    that range first. Assigning to a view whose runs overlap keeps the last write of each byte,
    in the order the DMA writes them (i2, i1, i0)."""
    return np.ndarray((len2, len1, len0), np.uint8, buffer=buf, offset=base, strides=(stride2, stride1, 1))


def dma_transfer(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sram: Sram, to_sram: bool,
                 plan: DmaPlan | None = None) -> DmaResult:
    if plan is None:                    # else the plan of these registers, made before
        plan = dma_plan(cfg, regs, sram, to_sram)
    if plan.bytes:
        if plan.ext[2] == 1 and plan.ext[3] == 1:       # one run of len0 bytes: the box as slices
            e, n, a = plan.ext[0], plan.ext[1], plan.on_chip[0]
            if to_sram:
                mem.sram[sram][a:a + n] = mem.ext[e:e + n]
            else:
                mem.ext[e:e + n] = mem.sram[sram][a:a + n]
        else:
            src, dst = (_box(mem.ext, *plan.ext), _box(mem.sram[sram], *plan.on_chip))
            if not to_sram:
                src, dst = dst, src
            dst[...] = src
    return DmaResult(plan.cycles, plan.bytes, sram, plan.sram_range)


def fill(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sram: Sram, value: int,
         plan: DmaPlan | None = None) -> DmaResult:
    if plan is None:
        plan = fill_plan(cfg, regs, sram)
    if plan.bytes:
        _box(mem.sram[sram], *plan.on_chip)[...] = value & 0xFF
    return DmaResult(plan.cycles, plan.bytes, sram, plan.sram_range)
