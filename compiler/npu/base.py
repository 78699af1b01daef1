"""What every NPU operation kind provides to the generic compiler passes.

An `NpuOperation` sits in the graph IR as `Operator(op=NPU_OP, attrs={"npu": the operation})`.
Pass by pass:
    tile_planner  calls plan(cfg, where)            -> TilePlan (tiles, loop order, buffers per SRAM)
    scheduler     calls constants(cfg, plan)        -> named byte blobs for the constants image
                  and gives each SRAM the operation uses `plan.buffers` equal buffers
    emitter       calls emit(writer, ectx)          -> commands, and one manifest record per tile
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from firmware_model.arch.isa import Command, Opcode, Reg, Sram, set_reg
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.program import Placement

NPU_OP = "NPU"


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


@dataclass
class TilePlan:
    tiles: list[Any]
    order: str = ""
    buffers: int = 1                       # equal buffers each used SRAM is divided into
    srams: tuple[Sram, ...] = ()           # the SRAMs the operation's tiles use
    # bytes of the output SRAM the buffers may take (compiler/passes/cascading.py: a region above
    # holds the operation before's result); None: all of it
    output_limit: int | None = None

    def describe(self) -> str:
        if not self.tiles:
            return "no tiles"
        first = self.tiles[0].describe() if hasattr(self.tiles[0], "describe") else str(self.tiles[0])
        more = ", ..." if len(self.tiles) > 1 else ""
        return f"{len(self.tiles)} tile(s) ({first}{more}); {self.order}; {self.buffers} buffer(s) per SRAM"


class CommandWriter:
    """Appends commands; a SET is emitted only when the register's value changes."""

    def __init__(self):
        self.commands: list[Command] = []
        self.regs: dict[Reg, int] = {}
        self.dma_count = 0          # DMA_LOAD, DMA_STORE and FILL commands emitted (DMA slack counts them)

    def set(self, reg: Reg, value: int) -> None:
        value = int(value)
        if self.regs.get(reg) != value:
            self.commands.append(set_reg(reg, value))
            self.regs[reg] = value

    def emit(self, opcode: Opcode, sub: int = 0, value: int = 0) -> int:
        self.commands.append(Command(opcode, int(sub), 0, int(value) & 0xFFFFFFFF))
        if opcode in (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL):
            self.dma_count += 1
        return len(self.commands) - 1

    def dma(self, opcode: Opcode, sram: Sram, *, ext: int = 0, sram_addr: int, len0: int, len1: int = 1,
            len2: int = 1, ext_s1: int = 0, ext_s2: int = 0, sram_s1: int = 0, sram_s2: int = 0,
            value: int = 0) -> None:
        """A DMA_LOAD / DMA_STORE / FILL of len2 x len1 runs of len0 bytes."""
        if opcode != Opcode.FILL:
            self.set(Reg.DMA_EXT_ADDR, ext)
            self.set(Reg.DMA_EXT_STRIDE1, ext_s1)
            self.set(Reg.DMA_EXT_STRIDE2, ext_s2)
        self.set(Reg.DMA_SRAM_ADDR, sram_addr)
        self.set(Reg.DMA_LEN0, len0)
        self.set(Reg.DMA_LEN1, len1)
        self.set(Reg.DMA_LEN2, len2)
        self.set(Reg.DMA_SRAM_STRIDE1, sram_s1)
        self.set(Reg.DMA_SRAM_STRIDE2, sram_s2)
        self.emit(opcode, sram, value)


@dataclass
class EmitContext:
    cfg: NpuConfig
    placements: dict[str, Placement]       # every tensor in external memory
    constants: dict[str, int]              # this operation's blobs: name -> external address
    buffers: dict[Sram, list[int]]         # SRAM -> byte address of each buffer (PARAM: record index)
    layer: int
    first_tile_id: int
    luts: object = None                    # stage.LutTables: the tables the LUT SRAM holds (shared)


class NpuOperation:
    """Base of the NPU operation kinds. Subclasses are dataclasses with the operation's data."""
    kind = "npu"
    unit = "none"                          # the NPU unit its commands run on (reports)
    sources: list[str]

    @property
    def ifm_names(self) -> list[str]:
        """Tensors the operation reads from external memory."""
        raise NotImplementedError

    @property
    def ofm_names(self) -> list[str]:
        raise NotImplementedError

    @property
    def macs(self) -> int:
        return 0

    @property
    def aliases(self) -> dict[str, str]:
        """Output tensors placed on an input's bytes (RESHAPE): {output: input}; no data moves."""
        return {}

    def describe(self) -> str:
        raise NotImplementedError

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        raise NotImplementedError

    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        return {}

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext) -> list[dict]:
        raise NotImplementedError

    def requires(self) -> list:
        """The fused TOSA ops' REQUIREs on data that some input can break, for the golden model's
        monitor (compiler/npu/requires.py); none by default (data movement, variables)."""
        return []


# --------------------------------------------------------------------------------------------
# Graph queries the lowering rules share

DATA_OPS = ("CONST", "CONST_SHAPE")


def const_value(block, producers: dict, name: str) -> np.ndarray | None:
    """The value of a tensor produced by CONST/CONST_SHAPE, else None."""
    t = block.tensors.get(name)
    if t is None:
        return None
    op = producers.get(name)
    if op is not None and op.op in DATA_OPS and t.data is not None:
        return t.data
    return None


def scalar(arr: np.ndarray | None) -> int | None:
    if arr is None or arr.size != 1:
        return None
    return int(arr.reshape(-1)[0])
