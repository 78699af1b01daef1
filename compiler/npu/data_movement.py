"""Data movement as DMA patterns: RESHAPE, TRANSPOSE, SLICE, TILE, CONCAT, PAD.

Tensors in external memory are dense and row-major, so:
- RESHAPE is an alias: its output is placed on its input's bytes (the scheduler asks
  `aliases`), no command at all;
- the others copy through an SRAM: each output element comes from one input element at an
  address that is affine in the output index (a `Source`: offset + strides, 0 strides for
  TILE's repetitions), or is PAD's pad value. TILE runs over the expanded index space
  (multiple_0, d_0, multiple_1, d_1, ...) with strides (0, s_0, 0, s_1, ...): the same row-major
  order as the output.

Tiling: the output's index space is cut into contiguous element ranges that fit half the output
SRAM (double buffering). Per tile: MARK; PAD: a FILL of the pad value (one byte repeated) or, when
its bytes differ, a DMA_LOAD of the pad element from the constants image with an external stride
of 0; then one DMA_LOAD per source that overlaps the tile (the DMA gathers: a transpose moves one
element per beat); then one DMA_STORE of the contiguous range. The tile holds no unit command: the
bench plays the DMA and checks the stored bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import TileFitError
from compiler.ir import Block, Operator
from compiler.npu.base import CommandWriter, EmitContext, NpuOperation, TilePlan
from compiler.npu.base import const_value
from compiler.npu.dma_patterns import (FlatTile, Source, as_bytes, dense_strides, element_bytes_fill, flat_tiles,
                                       load_source)
from firmware_model.arch.isa import Opcode, Sram
from firmware_model.arch.config import NpuConfig
from firmware_model.tosa_ops.dtypes import DType

MOVE_DTYPES = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32)


class _NoCommand(NpuOperation):
    """An operation whose output is placed on bytes that are already there: no tile, no command.
    Its kind, "alias", is what the passes that look past such operations test (cascading,
    ramp-down, the emitter's prefetch link)."""
    kind = "alias"
    unit = "none (alias)"

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        return TilePlan([], "alias", 1, ())

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext) -> list[dict]:
        return []


@dataclass
class NpuAlias(_NoCommand):
    """RESHAPE: the output is the input's bytes under another shape."""
    src: str
    out: str
    sources: list[str] = field(default_factory=list)

    @property
    def ifm_names(self) -> list[str]:
        return [self.src]

    @property
    def ofm_names(self) -> list[str]:
        return [self.out]

    @property
    def aliases(self) -> dict[str, str]:
        return {self.out: self.src}

    def describe(self) -> str:
        return f"{self.out} aliases {self.src} (dense bytes, no command)"


@dataclass
class NpuGather(_NoCommand):
    """CONCAT along an outer axis, its inputs written in place: each input is placed on its byte
    range of the output (compiler/passes/concat_placement.py), so that the operations producing
    them store straight into the output and nothing is copied."""
    out: str
    parts: dict[str, int]            # input tensor -> its first byte in the output
    sources: list[str] = field(default_factory=list)

    @property
    def ifm_names(self) -> list[str]:
        return list(self.parts)

    @property
    def ofm_names(self) -> list[str]:
        return [self.out]

    @property
    def placed_inside(self) -> dict[str, tuple[str, int]]:
        """Input tensors placed inside the output: {input: (output, byte offset)}."""
        return {name: (self.out, offset) for name, offset in self.parts.items()}

    def describe(self) -> str:
        return f"{self.out} gathers {', '.join(self.parts)} in place (written there by their producers, no command)"


@dataclass(frozen=True)
class Piece:
    """Output elements [lo, lo + sizes) of the index space come from `source` (index relative to
    lo), or are `fill` when source is None."""
    lo: tuple[int, ...]
    sizes: tuple[int, ...]
    source: Source | None
    fill: int = 0


@dataclass
class NpuDataMove(NpuOperation):
    op_name: str
    out: str
    dtype: DType
    space: tuple[int, ...]           # the index space (the output's shape, or TILE's expansion)
    pieces: list[Piece]
    const_blobs: dict[str, bytes]
    inputs: list[str]
    sources: list[str] = field(default_factory=list)
    kind = "move"
    unit = "DMA"

    @property
    def ifm_names(self) -> list[str]:
        return list(dict.fromkeys(self.inputs))

    @property
    def ofm_names(self) -> list[str]:
        return [self.out]


    def describe(self) -> str:
        n_src = sum(p.source is not None for p in self.pieces)
        fill = [p.fill for p in self.pieces if p.source is None]
        text = f"{self.op_name.lower()} to {'x'.join(map(str, self.space))} {self.dtype.name.lower()}: {n_src} source(s)"
        return text + (f", pad value {fill[0]}" if fill else "")

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        esize = self.dtype.size_bytes
        for share in (2, 1):
            cap = (cfg.output_sram // share) // esize
            if cap >= 1:
                break
        else:
            raise TileFitError(f"{where}: the output SRAM cannot hold one element")
        return TilePlan(flat_tiles(self.space, cap), "row-major ranges", share, (Sram.OUTPUT,))

    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        return dict(self.const_blobs)

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext) -> list[dict]:
        esize = self.dtype.size_bytes
        out = ectx.placements[self.out]
        records = []
        for k, t in enumerate(plan.tiles):
            t: FlatTile
            tile_id = ectx.first_tile_id + k
            start = len(w.commands)
            w.emit(Opcode.MARK, 0, tile_id)
            base = ectx.buffers[Sram.OUTPUT][k % plan.buffers]
            tlo, tsizes = t.box(self.space)
            tstr = dense_strides(tsizes)
            for p in self.pieces:
                if p.source is None:
                    # PAD's value covers the whole space (the input piece overwrites its part)
                    self._fill(w, ectx, base, t.count, p.fill, esize)
                    continue
                lo = tuple(max(a, b) for a, b in zip(p.lo, tlo))
                hi = tuple(min(a + n, b + m) for a, n, b, m in zip(p.lo, p.sizes, tlo, tsizes))
                if any(h <= l for l, h in zip(lo, hi)):
                    continue
                sizes = tuple(h - l for l, h in zip(lo, hi))
                addr = base + sum((l - b) * s for l, b, s in zip(lo, tlo, tstr)) * esize
                rel = tuple(l - pl for l, pl in zip(lo, p.lo))
                load_source(w, ectx, p.source, Sram.OUTPUT, addr, rel, sizes, tstr)
            w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=out.addr + t.start * esize, sram_addr=base,
                  len0=t.count * esize)
            records.append({"id": tile_id, "layer": ectx.layer, "unit": "DMA", "commands": [start, len(w.commands)],
                            "start": t.start, "count": t.count, "output": self.out})
        return records

    @staticmethod
    def _fill(w: CommandWriter, ectx: EmitContext, addr: int, count: int, value: int, esize: int) -> None:
        """The pad value over `count` elements of the tile buffer: one FILL when its bytes are all
        equal, else a DMA_LOAD of the pad element from the constants image with external stride 0."""
        byte = element_bytes_fill(value, esize)
        if byte is not None:
            w.dma(Opcode.FILL, Sram.OUTPUT, sram_addr=addr, len0=count * esize, value=byte)
        else:
            w.dma(Opcode.DMA_LOAD, Sram.OUTPUT, ext=ectx.constants["pad"], sram_addr=addr, len0=esize,
                  len1=count, ext_s1=0, sram_s1=esize)


# --------------------------------------------------------------------------------------------
# Lowering

def _source(block: Block, producers: dict, name: str, key: str, blobs: dict, offset: int, strides, inputs: list):
    t = block.tensor(name)
    value = const_value(block, producers, name)
    if value is not None:
        blobs[key] = as_bytes(np.asarray(value).reshape(t.shape), t.dtype)
        return Source(None, key, offset, tuple(strides), t.dtype.size_bytes)
    inputs.append(name)
    return Source(name, None, offset, tuple(strides), t.dtype.size_bytes)


def _ints(values) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def pad_constants(block: Block, producers: dict, op: Operator) -> tuple[tuple[tuple[int, int], ...], int] | str:
    """A PAD's constant padding, as (elements before, after) per dim of its input, and pad value;
    or why the NPU cannot take it (not constants, or an ERROR_IF)."""
    x = block.tensor(op.inputs[0])
    padding = const_value(block, producers, op.inputs[1])
    pad_const = const_value(block, producers, op.inputs[2]) if len(op.inputs) > 2 else None
    if padding is None or pad_const is None or np.asarray(pad_const).size != 1:
        return "PAD whose padding or pad value is not a constant"
    padding = _ints(padding)
    if len(padding) != 2 * x.rank or min(padding) < 0:
        return f"PAD with padding {padding} (an ERROR_IF)"
    return tuple(zip(padding[0::2], padding[1::2])), int(np.asarray(pad_const).reshape(-1)[0])


def match(block: Block, op: Operator, producers: dict, consumers: dict):
    """NPU data-movement operations: (NpuAlias | NpuDataMove, [op]), a reason string, or None."""
    if op.op not in ("RESHAPE", "TRANSPOSE", "SLICE", "TILE", "CONCAT", "PAD"):
        return None
    out_t = block.tensor(op.outputs[0])
    if out_t.dtype not in MOVE_DTYPES:
        return f"{op.op} of {out_t.dtype.name}"
    src_name = [f"{op.op}->{op.outputs[0]}"]
    if op.op == "RESHAPE":
        x = block.tensor(op.inputs[0])
        if x.num_elements != out_t.num_elements or x.dtype != out_t.dtype:
            return "RESHAPE that changes the element count or type (an ERROR_IF)"
        return NpuAlias(op.inputs[0], op.outputs[0], sources=src_name), [op]
    shape = tuple(out_t.shape)
    blobs: dict[str, bytes] = {}
    inputs: list[str] = []
    esize = out_t.dtype.size_bytes
    if op.op == "TRANSPOSE":
        x = block.tensor(op.inputs[0])
        perms = _ints(op.attrs.get("perms", []))
        if sorted(perms) != list(range(x.rank)) or [x.shape[p] for p in perms] != list(shape):
            return f"TRANSPOSE with perms {perms} (an ERROR_IF)"
        st = dense_strides(x.shape)
        src = _source(block, producers, op.inputs[0], "in0", blobs, 0, [st[p] for p in perms], inputs)
        pieces = [Piece((0,) * len(shape), shape, src)]
        space = shape
    elif op.op == "SLICE":
        x = block.tensor(op.inputs[0])
        start = const_value(block, producers, op.inputs[1])
        if start is None:
            return "SLICE whose start is not a constant"
        start = _ints(start)
        if len(start) != x.rank or any(s < 0 or s + n > d for s, n, d in zip(start, shape, x.shape)):
            return f"SLICE with start {start} (an ERROR_IF)"
        st = dense_strides(x.shape)
        src = _source(block, producers, op.inputs[0], "in0", blobs, sum(a * b for a, b in zip(start, st)), st, inputs)
        pieces = [Piece((0,) * len(shape), shape, src)]
        space = shape
    elif op.op == "TILE":
        x = block.tensor(op.inputs[0])
        mult = const_value(block, producers, op.inputs[1])
        if mult is None:
            return "TILE whose multiples are not a constant"
        mult = _ints(mult)
        if len(mult) != x.rank or [d * m for d, m in zip(x.shape, mult)] != list(shape):
            return f"TILE with multiples {mult} (an ERROR_IF)"
        st = dense_strides(x.shape)
        space = tuple(v for d, m in zip(x.shape, mult) for v in (m, d))
        strides = tuple(v for s in st for v in (0, s))
        src = _source(block, producers, op.inputs[0], "in0", blobs, 0, strides, inputs)
        pieces = [Piece((0,) * len(space), space, src)]
    elif op.op == "CONCAT":
        axis = int(op.attrs.get("axis", 0))
        pieces, pos = [], 0
        for k, name in enumerate(op.inputs):
            x = block.tensor(name)
            if x.dtype != out_t.dtype:
                return "CONCAT of different types (an ERROR_IF)"
            if x.num_elements == 0:
                continue
            lo = tuple(pos if d == axis else 0 for d in range(len(shape)))
            src = _source(block, producers, name, f"in{k}", blobs, 0, dense_strides(x.shape), inputs)
            pieces.append(Piece(lo, tuple(x.shape), src))
            pos += x.shape[axis]
        if pos != shape[axis]:
            return "CONCAT whose inputs do not add up to the output (an ERROR_IF)"
        space = shape
    else:  # PAD
        x = block.tensor(op.inputs[0])
        found = pad_constants(block, producers, op)
        if isinstance(found, str):
            return found
        pads, value = found
        blobs["pad"] = as_bytes(np.array([value]), out_t.dtype)
        lo = tuple(before for before, _ in pads)
        pieces = [Piece((0,) * len(shape), shape, None, value)]
        if x.num_elements:
            src = _source(block, producers, op.inputs[0], "in0", blobs, 0, dense_strides(x.shape), inputs)
            pieces.append(Piece(lo, tuple(x.shape), src))
        space = shape
    if int(np.prod(space, dtype=np.int64)) == 0:
        return f"{op.op} with an empty output"
    return NpuDataMove(op.op, op.outputs[0], out_t.dtype, space, pieces, blobs, inputs, sources=src_name), [op]
