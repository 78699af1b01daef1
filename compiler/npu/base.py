"""What every NPU operation kind provides to the generic compiler passes.

An `NpuOperation` sits in the graph IR as `Operator(op=NPU_OP, attrs={"npu": the operation})`.
Pass by pass:
    tile_planner  calls plan(cfg, where)            -> TilePlan (tiles, loop order, buffers per SRAM)
    scheduler     calls constants(cfg, plan)        -> named byte blobs for the constants image
                  and gives each SRAM the operation uses `plan.buffers` equal buffers
    emitter       calls emit(writer, ectx)          -> commands, and one manifest record per tile
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from firmware_model.arch.isa import DMA_AHEAD, PARAM_RECORD_BYTES, Command, Opcode, Reg, Sram, set_reg
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.program import Placement
from firmware_model.golden.dma import dma_registers, pattern_span
from firmware_model.golden.memories import box_span, memory_bytes

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


def result_holding(kept, ext: int, nbytes: int) -> int | None:
    """The output-SRAM address where one of the results `kept` (CommandWriter.results: (SRAM
    first byte, end byte, external address)) holds external bytes [ext, ext + nbytes), or None."""
    for lo, hi, at in kept:
        if at <= ext and ext + nbytes <= at + (hi - lo):
            return lo + (ext - at)
    return None


# A result of at most RING_SLOT bytes goes to one of RING_PLACES places at the start of its output
# buffer, by tile id (ring_place): 64 bytes keep every vector lane's alignment.
RING_SLOT = 64
RING_PLACES = 32


def ring_place(ectx: "EmitContext", slot: int, nbytes: int) -> int:
    """Where a one-tile operation's result of `nbytes` goes in output buffer `slot`: for a small
    one (RING_SLOT bytes at most), one of the places of a ring at the buffer's start, by the tile
    id, so that a chain of small operations (a softmax, a recurrent cell's gates) leaves each
    result where the operations after it may still read it (CommandWriter.results) instead of
    writing each over the one before; else the buffer's start."""
    bufs = ectx.buffers[Sram.OUTPUT]
    if len(bufs) > 1 and nbytes <= RING_SLOT:
        places = min(RING_PLACES, (bufs[1] - bufs[0]) // RING_SLOT)
        if places > 1:
            return bufs[slot] + (ectx.first_tile_id % places) * RING_SLOT
    return bufs[slot]


# SRAMs whose bytes only DMA_LOAD and FILL write (the units write the output SRAM, VAR the
# variable SRAM): a constant blob loaded there stays until one of them writes over it.
RESIDENT_SRAMS = (Sram.INPUT, Sram.WEIGHT, Sram.PARAM)


class CommandWriter:
    """Appends commands; a SET is emitted only when the register's value changes.

    Resident loads: given the external spans whose bytes no command writes (`read_only`: the
    constants image without the variables' homes), the writer remembers each DMA_LOAD of such
    bytes into the input, weight or parameter SRAM until a later DMA_LOAD or FILL writes over its SRAM
    bytes, and emits nothing for a DMA_LOAD with the same registers meanwhile: the bytes are
    already there. (The transfer that brought them is older than any the skipped one would have
    been, so a compute command that waited for the one waits for the other: it is not counted in
    `dma_count`, from which the kinds compute their DMA slack.) A recurrent network's cells load
    the same weights and records each step.

    Results kept on chip: the writer also remembers each dense run a DMA_STORE took from the
    output SRAM, (first byte, end byte, external address), until a command writes over its SRAM
    bytes (the results of an ELTWISE, a MAC or a POOL, a DMA_LOAD or FILL) or its
    external bytes change (a later store over them, HOST, VAR). In program order those SRAM bytes
    then hold those external bytes' values, so a later ELTWISE may read an operand there
    (A_FROM_OUTPUT, B_FROM_OUTPUT: `result_holding`) instead of loading it back."""

    def __init__(self, read_only: tuple[tuple[int, int], ...] = ()):
        self.commands: list[Command] = []
        self.regs: dict[Reg, int] = {}
        self.dma_count = 0          # DMA_LOAD, DMA_STORE and FILL commands emitted (DMA slack counts them)
        self.read_only = read_only
        # SRAM -> [(first byte, end byte, the load's registers)] of the loads whose bytes are still there
        self.resident: dict[Sram, list[tuple[int, int, tuple]]] = {}
        self.skipped = 0            # DMA_LOADs not emitted: their bytes were resident
        # [(output-SRAM first byte, end byte, external address)] of the stored runs still there
        self.results: list[tuple[int, int, int]] = []

    def _forget_results(self, sram_span=None, ext_span=None) -> None:
        """Forget the kept results whose SRAM bytes are in `sram_span` or external bytes in `ext_span`."""
        def hit(span, a, b):
            return span is not None and span[0] < b and a < span[1]
        self.results = [r for r in self.results
                        if not hit(sram_span, r[0], r[1]) and not hit(ext_span, r[2], r[2] + r[1] - r[0])]

    def holds(self, sram: Sram, ext: int, sram_addr: int, len0: int, len1: int = 1, len2: int = 1,
              ext_s1: int = 0, ext_s2: int = 0, sram_s1: int = 0, sram_s2: int = 0) -> bool:
        """Whether a DMA_LOAD with these registers would be left out: its bytes are resident."""
        return self._held(sram, (ext, sram_addr, len0, len1, len2, ext_s1, ext_s2, sram_s1, sram_s2))

    def _held(self, sram: Sram, key: tuple) -> bool:
        return any(k == key for _, _, k in self.resident.get(sram, ()))

    def fork(self) -> "CommandWriter":
        """A scratch writer continuing from this one's registers and resident loads (adopt() takes
        what it wrote)."""
        scratch = CommandWriter(self.read_only)
        scratch.regs = dict(self.regs)
        scratch.resident = {s: list(v) for s, v in self.resident.items()}
        scratch.results = list(self.results)
        return scratch

    def adopt(self, scratch: "CommandWriter") -> None:
        """Append what a fork() wrote, as if written here."""
        self.commands.extend(scratch.commands)
        self.regs = scratch.regs
        self.dma_count += scratch.dma_count
        self.resident = scratch.resident
        self.results = scratch.results
        self.skipped += scratch.skipped

    def set(self, reg: Reg, value: int) -> None:
        value = int(value)
        if self.regs.get(reg) != value:
            self.commands.append(set_reg(reg, value))
            self.regs[reg] = value

    def emit(self, opcode: Opcode, sub: int = 0, value: int = 0, imm: int = 0) -> int:
        self.commands.append(Command(opcode, int(sub), imm, int(value) & 0xFFFFFFFF))
        if opcode in (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL):
            self.dma_count += 1
        elif self.results:
            r = self.regs.get
            if opcode == Opcode.ELTWISE:
                self._forget_results(sram_span=box_span(1, 1, r(Reg.ELT_COUNT, 0), r(Reg.ELT_OUT_ADDR, 0), 0, 0,
                                                        r(Reg.OFM_DTYPE, 0)))
            elif opcode in (Opcode.MAC, Opcode.POOL):
                self._forget_results(sram_span=box_span(r(Reg.OFM_H, 0), r(Reg.OFM_W, 0), r(Reg.OFM_C, 0),
                                                        r(Reg.OFM_ADDR, 0), r(Reg.OFM_ROW_STRIDE, 0),
                                                        r(Reg.OFM_PIX_STRIDE, 0), r(Reg.OFM_DTYPE, 0)))
            elif opcode in (Opcode.HOST, Opcode.VAR):
                self.results = []
        return len(self.commands) - 1

    def dma(self, opcode: Opcode, sram: Sram, *, ext: int = 0, sram_addr: int, len0: int, len1: int = 1,
            len2: int = 1, ext_s1: int = 0, ext_s2: int = 0, sram_s1: int = 0, sram_s2: int = 0,
            value: int = 0, ahead: bool = False) -> None:
        """A DMA_LOAD / DMA_STORE / FILL of len2 x len1 runs of len0 bytes (a DMA_LOAD whose bytes
        are resident: nothing); `ahead`: flagged DMA_AHEAD."""
        ext_span = pattern_span(ext, len0, len1, len2, ext_s1, ext_s2)
        if opcode == Opcode.DMA_STORE:
            self._forget_results(ext_span=ext_span)
            if sram == Sram.OUTPUT and len1 == 1 and len2 == 1 and len0 > 0:
                self.results.append((sram_addr, sram_addr + len0, ext))
        elif sram == Sram.OUTPUT:
            self._forget_results(sram_span=pattern_span(sram_addr, len0, len1, len2, sram_s1, sram_s2))
        if sram in RESIDENT_SRAMS and opcode != Opcode.DMA_STORE:
            key = (ext, sram_addr, len0, len1, len2, ext_s1, ext_s2, sram_s1, sram_s2)
            if opcode == Opcode.DMA_LOAD and self._held(sram, key):
                self.skipped += 1
                return
            lo, hi = pattern_span(sram_addr, len0, len1, len2, sram_s1, sram_s2)
            kept = self.resident.setdefault(sram, [])
            kept[:] = [r for r in kept if r[1] <= lo or r[0] >= hi]
            ext_lo, ext_hi = pattern_span(ext, len0, len1, len2, ext_s1, ext_s2)
            if opcode == Opcode.DMA_LOAD and any(a <= ext_lo and ext_hi <= b for a, b in self.read_only):
                kept.append((lo, hi, key))
        # A stride moves nothing when its length is 1 (run i1 < LEN1 starts i1 strides on): the
        # register keeps whatever it holds, and a SET is saved (a clock each; a recurrent cell's
        # one-run transfers between two-dimensional ones took four).
        values = {Reg.DMA_EXT_ADDR: ext, Reg.DMA_EXT_STRIDE1: ext_s1, Reg.DMA_EXT_STRIDE2: ext_s2,
                  Reg.DMA_SRAM_ADDR: sram_addr, Reg.DMA_LEN0: len0, Reg.DMA_LEN1: len1, Reg.DMA_LEN2: len2,
                  Reg.DMA_SRAM_STRIDE1: sram_s1, Reg.DMA_SRAM_STRIDE2: sram_s2}
        for reg in dma_registers(opcode == Opcode.FILL, len1, len2):
            self.set(reg, values[reg])
        self.emit(opcode, sram, value, DMA_AHEAD if ahead else 0)


class ConstantHomes:
    """Places at the end of the buffers (weight and parameter: conv's weights and records, the
    elementwise operations' records) for the constants several operations load (a recurrent
    cell's, step after step), one apart from another, so that each stays resident (CommandWriter)
    while the others and the loads of the operations between, which start at the buffers'
    beginnings, come and go.
    `shared`: the external addresses of such blobs (scheduler.ConstImage.shared). A blob that does
    not fit in the buffers beside the homes before it, or that only one operation loads, has none.
    (A load over a home only makes the writer forget what was there: residency is a saving, never
    a condition.)"""

    def __init__(self, shared: frozenset[int] = frozenset()):
        self.shared = shared
        self.placed: dict[tuple, dict[Sram, int]] = {}     # (ext, needs) -> offsets from the end
        self.used: dict[Sram, int] = {}                    # per SRAM, what the homes take

    def offsets(self, ext: int, needs: dict[Sram, int], parts: dict[Sram, int],
                blob: int | None = None) -> dict[Sram, int] | None:
        """Per SRAM, the offset from its buffer's end of the `needs[sram]` bytes (PARAM: records)
        loaded from `ext` (a part of blob `blob`, by default the blob itself), in buffers of
        `parts[sram]`; None: no home."""
        if (ext if blob is None else blob) not in self.shared:
            return None
        key = (ext, tuple(sorted(needs.items())))
        got = self.placed.get(key)
        if got is None:
            if any(self.used.get(sram, 0) + n > parts[sram] for sram, n in needs.items()):
                return None
            got = self.placed[key] = {sram: self.used.get(sram, 0) for sram in needs}
            for sram, n in needs.items():
                self.used[sram] = self.used.get(sram, 0) + n
        return got


def buffer_end(buffers: list[int], slot: int, total: int) -> int:
    """The end of buffer `slot` of an SRAM split in equal buffers (scheduler.sram_buffers)."""
    return buffers[slot] + (buffers[1] - buffers[0] if len(buffers) > 1 else total - buffers[0])


def home_addresses(ectx: "EmitContext", slot: int, ext: int, needs: dict[Sram, int],
                   blob: int | None = None) -> dict[Sram, int] | None:
    """Where buffer `slot` keeps the constants loaded from `ext` when they have a home
    (ConstantHomes): per SRAM, the address (PARAM: record index) of its `needs[sram]` bytes
    (records) at the end of the slot's buffer; None when they have none, or when this operation's
    buffers are too small for it (the buffer's start is then theirs, as for any load)."""
    cfg, out, parts = ectx.cfg, {}, {}
    ends = {}
    for sram in needs:
        bufs = ectx.buffers[sram]
        total = memory_bytes(cfg, sram) // (PARAM_RECORD_BYTES if sram == Sram.PARAM else 1)   # PARAM: records
        ends[sram] = buffer_end(bufs, slot, total)
        parts[sram] = ends[sram] - bufs[slot]
    home = ectx.homes.offsets(ext, needs, parts, blob)
    if home is None:
        return None
    for sram, n in needs.items():
        out[sram] = ends[sram] - n - home[sram]
        if out[sram] < ectx.buffers[sram][slot]:
            return None
    return out


@dataclass
class EmitContext:
    cfg: NpuConfig
    placements: dict[str, Placement]       # every tensor in external memory
    constants: dict[str, int]              # this operation's blobs: name -> external address
    buffers: dict[Sram, list[int]]         # SRAM -> byte address of each buffer (PARAM: record index)
    layer: int
    first_tile_id: int
    luts: object = None                    # stage.LutTables: the tables the LUT SRAM holds (shared)
    homes: ConstantHomes = field(default_factory=ConstantHomes)    # shared constants' places (shared)


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

    @property
    def placed_inside(self) -> dict[str, tuple[str, int]]:
        """Input tensors placed inside the output's bytes (an outer-axis CONCAT gathered in
        place): {input: (output, byte offset)}; no data moves."""
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
