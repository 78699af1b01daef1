"""Strided boxes as DMA commands: how the elementwise, pooling and data-movement kinds move an
N-dimensional box of elements between external memory and an SRAM.

A box is a list of dimensions (size, external stride, SRAM stride), strides in bytes; a stride of
0 on the external side repeats the same elements (broadcasting, TILE). The DMA engine moves
LEN2 x LEN1 runs of LEN0 contiguous bytes (docs/isa.md), so a box becomes one command when it has
at most three dimensions after merging, else one command per index of its outer dimensions:

- dimensions of size 1 are dropped; a dimension is merged into the next outer one when both
  sides are contiguous across the two (outer stride == inner stride x inner size on each side);
- the innermost dimension becomes LEN0 (its size x element bytes) when it is contiguous on both
  sides, else LEN0 is one element and the dimension becomes LEN1 (one run per element: a
  transpose or a broadcast costs a DMA beat per element);
- the next two dimensions become LEN1 / LEN2 with their strides.

`Source` names where a box's elements come from: a tensor's placement in external memory or a
constant blob of the operation, with an element offset and per-dimension element strides.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from compiler.npu.base import CommandWriter, EmitContext
from firmware_model.arch.cycle_model import dma_beats
from firmware_model.arch.isa import Opcode, Sram


def dense_strides(shape) -> tuple[int, ...]:
    """Element strides of a dense row-major tensor."""
    strides, acc = [], 1
    for d in reversed(tuple(shape)):
        strides.append(acc)
        acc *= int(d)
    return tuple(reversed(strides))


def broadcast_strides(shape, out_shape) -> tuple[int, ...]:
    """Element strides reading a dense tensor of `shape` at every index of `out_shape` (same rank;
    a dimension of 1 against a larger one is broadcast: stride 0)."""
    return tuple(0 if s == 1 and o != 1 else st for s, o, st in zip(shape, out_shape, dense_strides(shape)))


@dataclass(frozen=True)
class Source:
    """Elements in external memory: element index e (a tuple over the iteration dims) is at
    element offset + sum(e[d] * strides[d]) of `tensor` (a placement) or of constant blob `blob`."""
    tensor: str | None
    blob: str | None
    offset: int
    strides: tuple[int, ...]
    esize: int

    def ext_addr(self, ectx: EmitContext) -> int:
        base = ectx.constants[self.blob] if self.blob is not None else ectx.placements[self.tensor].addr
        return base + self.offset * self.esize

    @property
    def is_scalar(self) -> bool:
        return all(s == 0 for s in self.strides)


def merge_dims(dims: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop size-1 dimensions and merge contiguous neighbours (outer first in the list)."""
    dims = [d for d in dims if d[0] != 1]
    out: list[tuple[int, int, int]] = []
    for size, es, ss in reversed(dims):           # innermost first
        if out:
            isz, ies, iss = out[-1]
            if es == ies * isz and ss == iss * isz:
                out[-1] = (isz * size, ies, iss)
                continue
        out.append((size, es, ss))
    return list(reversed(out))


@dataclass(frozen=True)
class BoxPattern:
    """One DMA command's part of a box: offsets from the box's first byte, LEN0..2, strides."""
    ext_off: int
    sram_off: int
    len0: int
    len1: int
    len2: int
    ext_s1: int
    ext_s2: int
    sram_s1: int
    sram_s2: int


def box_patterns(dims: list[tuple[int, int, int]], esize: int) -> list[BoxPattern]:
    """The DMA patterns of a box (dims outer first: size, ext stride, SRAM stride in bytes), one per
    index of its dims beyond three (module docstring)."""
    dims = merge_dims(dims)
    if not dims:
        return [BoxPattern(0, 0, esize, 1, 1, 0, 0, 0, 0)]
    size, es, ss = dims[-1]
    if es == esize and ss == esize:
        len0, rest = size * esize, dims[:-1]
    else:
        len0, rest = esize, dims
    (n2, e2, s2), (n1, e1, s1) = ([(1, 0, 0)] * 2 + rest[-2:])[-2:]
    outer = rest[:-2]
    return [BoxPattern(sum(i * d[1] for i, d in zip(idx, outer)), sum(i * d[2] for i, d in zip(idx, outer)),
                       len0, n1, n2, e1, e2, s1, s2)
            for idx in itertools.product(*(range(d[0]) for d in outer))]


def copy_box(w: CommandWriter, opcode: Opcode, sram: Sram, *, ext: int, sram_addr: int,
             dims: list[tuple[int, int, int]], esize: int) -> int:
    """DMA_LOAD / DMA_STORE of a box (dims outer first: size, ext stride, SRAM stride in bytes).
    Returns the number of commands emitted."""
    patterns = box_patterns(dims, esize)
    for p in patterns:
        w.dma(opcode, sram, ext=ext + p.ext_off, sram_addr=sram_addr + p.sram_off, len0=p.len0, len1=p.len1,
              len2=p.len2, ext_s1=p.ext_s1, ext_s2=p.ext_s2, sram_s1=p.sram_s1, sram_s2=p.sram_s2)
    return len(patterns)


def load_source(w: CommandWriter, ectx: EmitContext, src: Source, sram: Sram, sram_addr: int,
                lo: tuple[int, ...], sizes: tuple[int, ...], sram_strides: tuple[int, ...]) -> int:
    """DMA_LOAD the box [lo, lo + sizes) of a source into an SRAM with the given SRAM element strides."""
    off = sum(l * s for l, s in zip(lo, src.strides))
    dims = [(n, st * src.esize, ss * src.esize) for n, st, ss in zip(sizes, src.strides, sram_strides)]
    return copy_box(w, Opcode.DMA_LOAD, sram, ext=src.ext_addr(ectx) + off * src.esize, sram_addr=sram_addr,
                    dims=dims, esize=src.esize)


def fill_box(w: CommandWriter, ectx: EmitContext, sram: Sram, sram_addr: int, dims: list[tuple[int, int]],
             esize: int, byte: int | None, pad_blob: str | None) -> None:
    """A box of SRAM elements (dims outer first: size, SRAM stride in bytes) set to one value: FILLs
    of `byte`, or, when the value's bytes differ (byte None), DMA_LOADs of the one element in
    constant blob `pad_blob` with an external stride of 0."""
    if byte is None:
        copy_box(w, Opcode.DMA_LOAD, sram, ext=ectx.constants[pad_blob], sram_addr=sram_addr,
                 dims=[(n, 0, ss) for n, ss in dims], esize=esize)
        return
    for p in box_patterns([(n, ss, ss) for n, ss in dims], esize):
        w.dma(Opcode.FILL, sram, sram_addr=sram_addr + p.sram_off, len0=p.len0, len1=p.len1, len2=p.len2,
              sram_s1=p.sram_s1, sram_s2=p.sram_s2, value=byte)


# An extra DMA command costs its SETs and decode on the command processor, which runs beside the
# DMA engine: counted as this many beats when choosing between one FILL and several.
FILL_COMMAND_BEATS = 4


def load_padded(w: CommandWriter, ectx: EmitContext, src: Source, sram: Sram, sram_addr: int,
                lo: tuple[int, ...], sizes: tuple[int, ...], shape: tuple[int, ...],
                pads: tuple[tuple[int, int], ...], byte: int | None, pad_blob: str | None,
                sram_strides: tuple[int, ...] | None = None) -> None:
    """The box [lo, lo + sizes) of a padded operand (an absorbed PAD: per dim of `shape`, `pads`
    elements before and after the real ones, which `src` indexes from the first pad element) into
    an SRAM, dense (or at `sram_strides` elements): the real elements' part by DMA_LOAD, the rest
    the pad value (fill_box), either as one FILL of the whole box under the load or as FILLs of
    the pad slabs around it, whichever the DMA engine takes fewer beats for."""
    esize = src.esize
    bst = dense_strides(sizes) if sram_strides is None else tuple(sram_strides)
    ilo = tuple(max(l, b) for l, (b, _) in zip(lo, pads))
    ihi = tuple(min(l + n, d - a) for l, n, d, (_, a) in zip(lo, sizes, shape, pads))
    whole = [(n, st * esize) for n, st in zip(sizes, bst)]
    if any(h <= l for l, h in zip(ilo, ihi)):
        fill_box(w, ectx, sram, sram_addr, whole, esize, byte, pad_blob)
        return
    slabs = []        # (sram address, dims) of the pad around the real part, one per dim and side
    for d in range(len(sizes)):
        for a, b in ((lo[d], ilo[d]), (ihi[d], lo[d] + sizes[d])):
            if b <= a:
                continue
            start = tuple(ilo[:d]) + (a,) + tuple(lo[d + 1:])
            ext = tuple(h - l for l, h in zip(ilo[:d], ihi[:d])) + (b - a,) + tuple(sizes[d + 1:])
            addr = sram_addr + sum((s - l) * st for s, l, st in zip(start, lo, bst)) * esize
            slabs.append((addr, [(n, st * esize) for n, st in zip(ext, bst)]))
    if slabs:
        if byte is not None:
            cfg = ectx.cfg

            def beats(addr, dims):
                return sum(FILL_COMMAND_BEATS + dma_beats(cfg, sram, sram_addr=addr + p.sram_off, len0=p.len0,
                                                          len1=p.len1, len2=p.len2, sram_stride1=p.sram_s1,
                                                          sram_stride2=p.sram_s2, fill=True)
                           for p in box_patterns([(n, ss, ss) for n, ss in dims], esize))
            if beats(sram_addr, whole) <= sum(beats(a, dims) for a, dims in slabs):
                slabs = [(sram_addr, whole)]
        for addr, dims in slabs:
            fill_box(w, ectx, sram, addr, dims, esize, byte, pad_blob)
    inner = sram_addr + sum((i - l) * st for i, l, st in zip(ilo, lo, bst)) * esize
    load_source(w, ectx, src, sram, inner, ilo, tuple(h - l for l, h in zip(ilo, ihi)), bst)


@dataclass(frozen=True)
class FlatTile:
    """A tile of an iteration space: fixed indices of the dims before `axis`, the range
    [a, b) of `axis`, all of the dims after it. Its elements are a contiguous range of the
    space's row-major order: [start, start + count)."""
    outer: tuple[int, ...]
    axis: int
    a: int
    b: int
    start: int
    count: int

    def box(self, shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(lo, sizes) of the tile in the iteration space."""
        lo = tuple(self.outer) + (self.a,) + (0,) * (len(shape) - self.axis - 1)
        sizes = (1,) * self.axis + (self.b - self.a,) + tuple(shape[self.axis + 1:])
        return lo, sizes

    def describe(self) -> str:
        return f"elements {self.start}..{self.start + self.count - 1}"


def flat_tiles(shape: tuple[int, ...], max_count: int) -> list[FlatTile]:
    """Split a row-major iteration space into tiles of at most `max_count` elements, each a
    contiguous range: whole trailing dims, a balanced chunk of one dim, fixed outer indices."""
    shape = tuple(int(d) for d in shape) or (1,)
    if max_count < 1:
        raise ValueError("max_count < 1")
    axis = len(shape) - 1
    inner = 1
    # the outermost axis whose trailing block still fits
    while axis > 0 and inner * shape[axis] <= max_count:
        inner *= shape[axis]
        axis -= 1
    if inner * shape[axis] <= max_count:
        chunk = shape[axis]
    else:
        limit = max(1, max_count // inner)
        pieces = -(-shape[axis] // limit)
        chunk = -(-shape[axis] // pieces)
    tiles = []
    strides = dense_strides(shape)
    for outer in itertools.product(*(range(d) for d in shape[:axis])):
        base = sum(i * s for i, s in zip(outer, strides))
        for a in range(0, shape[axis], chunk):
            b = min(shape[axis], a + chunk)
            tiles.append(FlatTile(tuple(outer), axis, a, b, base + a * strides[axis], (b - a) * inner))
    return tiles


def element_bytes_fill(value: int, esize: int) -> int | None:
    """The byte a FILL repeats to write `value` as `esize`-byte elements, or None when its bytes differ."""
    raw = int(value).to_bytes(esize, "little", signed=True) if esize > 1 else bytes([int(value) & 0xFF])
    return raw[0] if all(b == raw[0] for b in raw) else None


def as_bytes(values: np.ndarray, dtype) -> bytes:
    return np.ascontiguousarray(values, dtype=dtype.storage.newbyteorder("<")).tobytes()
