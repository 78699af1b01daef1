"""Elementwise operations on the ELTWISE unit: ADD, SUB, MUL, MINIMUM, MAXIMUM and the shifts with
their operands' input RESCALEs, and the unary COPY that runs a stand-alone RESCALE, CLAMP or
TABLE; each with an output stage (RESCALE -> CLAMP -> TABLE) fused after it.

Lowering (exact forms only; anything else stays on the host CPU with the reason):
- operand chains of ADD/SUB/MUL/MINIMUM/MAXIMUM (int32 operations) from the binary op upwards,
  through RESHAPEs: RESCALE(general) <- RESCALE(pure shift): TFLite's quantised ADD, where the
  first RESCALE only multiplies by 2^(k-s) (ELT_X_LSHIFT) and the second scales (ELT_X_MULT,
  ELT_X_SHIFT); or one RESCALE to int32 (general or pure shift). Per-tensor rescales only, scale32,
  single or double rounding; the zero point (and unsigned reading) of the first RESCALE's input;
- the output chain (compiler/npu/stage.py): RESCALE (per tensor or per channel, input zero point
  0), CLAMP, TABLE (int8 256 / int16 513 entries);
- broadcasting as DMA strides of 0; a one-element operand as A_SCALAR / B_SCALAR; constant
  operands from the constants image; MUL's shift must be a constant;
- a SLICE or a PAD that feeds only an operand (in its shape) is absorbed into that operand's loads:
  the SLICE as an offset into its input, the PAD as its input's real elements loaded and the pad
  value FILLed around them (dma_patterns.load_padded), so the padded tensor is never stored.

Tiling: the output's iteration space (dims of size 1 dropped, neighbours merged where both
operands are contiguous across them and neither is padded; a per-channel stage keeps the channel
axis) is cut into
contiguous element ranges that fit: A in the input SRAM, B in the weight SRAM, the result in the
output SRAM and the channel records in the parameter SRAM — half of each (double buffering).
Emission per tile: MARK, operand loads unless already in the buffer, records unless resident, the
table (first tile only), the ELTWISE registers, ELTWISE, DMA_STORE of the contiguous result.

In the padded layout (`pix`, chosen by compiler/passes/cascading.py for a 1xHxWxC result whose C
is not a whole number of words) the channel axis stays apart, tiles are whole pixels, and in every
SRAM a pixel takes pix elements: operands are loaded and the result stored C elements a pixel at
an SRAM stride of pix, and ELTWISE runs over the pixels x pix elements, the ones past C left over.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import CompileError, TileFitError
from compiler.ir import Block, Operator
from compiler.npu.base import CommandWriter, EmitContext, NpuOperation, TilePlan, result_holding, ring_place, round_up
from compiler.npu.base import const_value, scalar
from compiler.npu.conv import Cascade
from compiler.npu.data_movement import pad_constants
from compiler.npu.prefetch import Prefetched, overlaps
from compiler.npu.dma_patterns import (FlatTile, Source, as_bytes, copy_box, dense_strides, element_bytes_fill,
                                       flat_tiles, load_padded, load_source)
from compiler.npu.stage import (RescaleInfo, StageSpec, claimed, extend_stage, load_params, param_home, place_table,
                                only_consumer, rescale_info, take_clamp, take_table)
from firmware_model.arch.isa import EltMode, EltOp, Opcode, Reg, Sram
from firmware_model.arch.config import NpuConfig
from firmware_model.tosa_ops.dtypes import DType

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48

BINARY = {"ADD": EltOp.ADD, "SUB": EltOp.SUB, "MUL": EltOp.MUL, "MINIMUM": EltOp.MINIMUM,
          "MAXIMUM": EltOp.MAXIMUM, "LOGICAL_LEFT_SHIFT": EltOp.LOGICAL_LEFT_SHIFT,
          "LOGICAL_RIGHT_SHIFT": EltOp.LOGICAL_RIGHT_SHIFT, "ARITHMETIC_RIGHT_SHIFT": EltOp.ARITHMETIC_RIGHT_SHIFT}
# Operations on int32 values: their operands may come through input RESCALEs.
INT32_OPS = {"ADD", "SUB", "MUL", "MINIMUM", "MAXIMUM"}
SHIFTS = {"LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT"}
UNARY = {"RESCALE", "CLAMP", "TABLE"}


# An operation of at least this many elements that would fit one tile takes two (plan). Measured
# on every network and configuration against one tile: blazeface on large 361,540 -> 350,004
# cycles (its residual ADDs of 98 KiB operands), resnet_pool 1.0% / 1.8% fewer on default / large,
# nothing slower; a split in 4 or 8 gained less (351,100 and 351,945), thresholds from 256 to 1024
# the same, 16,384 less (351,894).
PIPELINE_MIN_ELEMENTS = 1024


@dataclass
class Operand:
    """One input of the unit: the external tensor (or constant) it reads, the shape the TOSA op
    sees it in (for broadcasting), and its input stage."""
    tensor: str | None
    const: np.ndarray | None
    shape: tuple[int, ...]
    dtype: DType
    zp: int = 0
    unsigned: bool = False
    lshift: int = 0
    rescale: tuple[int, int, bool] | None = None     # multiplier, shift, double_round
    # A view of `tensor` (a SLICE absorbed into the load): element offset and element strides per
    # dim of `shape`; None: `tensor` itself, dense.
    offset: int = 0
    strides: tuple[int, ...] | None = None
    # A PAD absorbed into the loads: `tensor` is the PAD's input, `shape` its output; per dim of
    # `shape`, the elements before and after the input's, which hold `pad_value` (FILLed into the
    # tile buffers, never stored in external memory); `strides` are then the input's.
    pad: tuple[tuple[int, int], ...] | None = None
    pad_value: int = 0
    # The TOSA RESCALEs the input stage runs, in order, each with the point of the unit where its
    # input values are (A0/B0: the elements minus the zero point; A1/B1: after the left shift):
    # for the REQUIRE monitor (compiler/npu/requires.py).
    rescales: list = field(default_factory=list)

    def describe(self) -> str:
        what = self.tensor if self.tensor is not None else f"const{list(self.shape)}"
        if self.pad is not None:
            what += f"[pad {','.join(f'{a}:{b}' for a, b in self.pad)} with {self.pad_value}]"
        elif self.strides is not None:
            what += f"[view +{self.offset}]"
        parts = [f"{what}:{'u' if self.unsigned else ''}{self.dtype.name.lower()}"]
        if self.zp:
            parts.append(f"-{self.zp}" if self.zp > 0 else f"+{-self.zp}")
        if self.lshift:
            parts.append(f"<<{self.lshift}")
        if self.rescale is not None:
            parts.append(f"*{self.rescale[0]}>>{self.rescale[1]}{'dr' if self.rescale[2] else ''}")
        return "".join(parts)


@dataclass
class NpuEltwise(NpuOperation):
    op: EltOp
    a: Operand
    b: Operand | None
    out: str
    out_shape: tuple[int, ...]
    stage: StageSpec
    mul_shift: int = 0
    round_: bool = False
    sources: list[str] = field(default_factory=list)
    binop: Operator | None = None          # the TOSA binary op (None for COPY)
    # the result kept in the output SRAM for the 1x1 convolutions after it (compiler/passes/cascading.py)
    cascade_out: Cascade | None = None
    # A read where the convolution before wrote it whole, dense, in the output SRAM (cascading.py)
    a_cascade: Cascade | None = None
    # The SRAM layout's pixel stride in elements when the channel axis is padded to a whole number
    # of words (0: operands and result dense in the SRAMs). Set by cascading.py for a result of C
    # channels that is not a whole number of words, so that it is the MAC's input layout (a
    # depthwise consumer reads it on chip) and a convolution's result written in that layout can
    # be its A: every tile computes whole padded pixels, the elements past C are left over (never
    # stored, never read as channels), and loads and stores move C bytes a pixel (padded_layout_ok).
    pix: int = 0
    kind = "eltwise"
    unit = "ELTWISE"

    @property
    def ifm_names(self) -> list[str]:
        names = [x.tensor for x in (self.a, self.b) if x is not None and x.tensor is not None]
        return list(dict.fromkeys(names))

    @property
    def ofm_names(self) -> list[str]:
        return [self.out]

    @property
    def out_dtype(self) -> DType:
        return self.stage.out_dtype

    def describe(self) -> str:
        text = f"{self.op.name.lower()} {'x'.join(map(str, self.out_shape)) or 'scalar'}: {self.a.describe()}"
        if self.b is not None:
            text += f", {self.b.describe()}"
        if self.op == EltOp.MUL and self.mul_shift:
            text += f", shift {self.mul_shift}"
        if self.round_:
            text += ", round"
        stage = self.stage.describe()
        return text + (f"; {stage}" if stage else "")

    # ---- iteration space ------------------------------------------------------------------
    def space(self) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
        """(shape, per-operand element strides) of the collapsed iteration space."""
        dims = self._collapsed()
        shape = tuple(d[0] for d in dims)
        return shape, [tuple(d[1][i] for d in dims) for i in range(len(dims[0][1]))]

    def space_pads(self) -> list[tuple[tuple[int, int], ...] | None]:
        """Per operand, the (before, after) padding of each collapsed dim, or None (no PAD)."""
        dims = self._collapsed()
        operands = [x for x in (self.a, self.b) if x is not None]
        return [tuple(d[2][i] for d in dims) if x.pad is not None else None for i, x in enumerate(operands)]

    def _collapsed(self) -> list[tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]]]:
        """The iteration space's dims, outer first: (size, element stride per operand, padding per
        operand). Size-1 dims are dropped and a dim merges into its inner neighbour when every
        operand is contiguous across the two and neither is padded (a padded dim keeps its own
        range of real elements); a per-channel stage keeps the channel axis."""
        operands = [x for x in (self.a, self.b) if x is not None]
        strides = [tuple(0 if s == 1 and o != 1 else st for s, o, st in
                         zip(x.shape, self.out_shape, x.strides or dense_strides(x.shape))) for x in operands]
        nopad = ((0, 0),) * len(self.out_shape)
        pads = [x.pad or nopad for x in operands]
        dims = [(n, tuple(s[d] for s in strides), tuple(p[d] for p in pads)) for d, n in enumerate(self.out_shape)]
        keep_last = self.stage.channels > 1 or self.pix
        last = dims[-1:] if keep_last else []
        body = dims[:-1] if keep_last else dims
        merged: list = []
        for dim in reversed([d for d in body if d[0] != 1]):
            inner = merged[-1] if merged else None
            if (inner is not None and not any(map(any, dim[2] + inner[2]))
                    and all(dim[1][i] == inner[1][i] * inner[0] for i in range(len(operands)))):
                merged[-1] = (inner[0] * dim[0], inner[1], inner[2])
            else:
                merged.append(dim)
        dims = list(reversed(merged)) + last
        if not dims:
            dims = [(1, (0,) * len(operands), ((0, 0),) * len(operands))]
        return dims

    def _scalar(self, x: Operand | None) -> bool:
        return x is not None and all(s == 1 for s in x.shape)

    # ---- padded layout (pix) ----------------------------------------------------------------
    def padded_layout_ok(self, cfg: NpuConfig) -> bool:
        """Whether the result may be computed in the padded layout (`pix`): a 1xHxWxC int8 result of
        C not a whole number of words, int8 operands, a per-tensor output stage, and no REQUIRE
        any input could break (requires.eltwise: the left-over elements past C hold whatever the
        SRAM held, which must not trip the REQUIRE monitor)."""
        shape = tuple(self.out_shape)
        if not (len(shape) == 4 and shape[0] == 1 and shape[3] > 1 and shape[3] % cfg.word_bytes
                and self.out_dtype == I8 and self.stage.channels == 1):
            return False
        if any(x.dtype != I8 for x in (self.a, self.b) if x is not None):
            return False
        return not self.requires()

    def padded_pix(self, cfg: NpuConfig) -> int:
        """The padded layout's pixel stride: C rounded up to a whole number of words."""
        return round_up(self.out_shape[3], cfg.word_bytes)

    def _sram_strides(self, sizes: tuple[int, ...]) -> tuple[int, ...]:
        """Element strides of a box of the space in an SRAM: dense, or with pixels `pix` apart."""
        if not self.pix:
            return dense_strides(sizes)
        return dense_strides(tuple(sizes[:-1]) + (self.pix,))

    def _sram_count(self, t: FlatTile) -> int:
        """Elements of tile t in the SRAMs (ELT_COUNT): padded pixels, or its own count."""
        return t.count // self.out_shape[-1] * self.pix if self.pix else t.count

    def _sram_first(self, t: FlatTile) -> int:
        """Tile t's first element in the whole result as laid out in the SRAMs (a region)."""
        return t.start // self.out_shape[-1] * self.pix if self.pix else t.start

    def max_tile(self, cfg: NpuConfig, share: int) -> int:
        caps = [(cfg.output_sram // share) // self.out_dtype.size_bytes]
        for x, size in ((self.a, cfg.input_sram), (self.b, cfg.weight_sram)):
            if x is not None:
                cap = (size // share) // x.dtype.size_bytes
                if self._scalar(x):
                    cap = 1 << 62 if cap >= 1 else 0
                caps.append(cap)
        records = cfg.param_records // share
        if self.stage.rescale:
            if records < 1:
                return 0
            if self.stage.channels > records:
                caps.append(records)
        return min(caps)

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        shape, _ = self.space()
        for share in (2, 1):
            cap = self.max_tile(cfg, share)
            if cap >= 1:
                break
        else:
            raise TileFitError(f"{where}: not even a one-element tile fits the '{cfg.name}' configuration")
        if self.stage.table is not None and self.stage.table.size > cfg.lut_entries:
            raise TileFitError(f"{where}: the {self.stage.table.size}-entry table does not fit the "
                               f"{cfg.lut_entries}-entry LUT SRAM of '{cfg.name}'")
        elements = int(np.prod(shape, dtype=np.int64))
        if self.pix:
            # a tile is whole padded pixels: pix SRAM elements hold C of the space's
            cap = cap // self.pix * shape[-1]
            if cap < 1:
                raise TileFitError(f"{where}: not even a one-pixel tile of the padded layout fits the "
                                   f"'{cfg.name}' configuration")
        if share == 2 and elements >= PIPELINE_MIN_ELEMENTS:
            # at least two tiles, so that the second's loads run under the first's ELTWISE and
            # the first's store under the second's (emit's software pipeline)
            cap = min(cap, -(-elements // 2))
        tiles = flat_tiles(shape, cap)
        srams = (Sram.INPUT, Sram.OUTPUT) + ((Sram.WEIGHT,) if self.b is not None else ()) \
            + ((Sram.PARAM,) if self.stage.rescale else ())
        return TilePlan(tiles, f"{len(shape)}-d space {'x'.join(map(str, shape))}", share, srams)

    # ---- constants -------------------------------------------------------------------------
    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        blobs = self.stage.blobs()
        for key, x in (("a", self.a), ("b", self.b)):
            if x is not None and x.const is not None:
                blobs[key] = as_bytes(x.const, x.dtype)
            if x is not None and x.pad is not None and element_bytes_fill(x.pad_value, x.dtype.size_bytes) is None:
                blobs[f"{key}_pad"] = as_bytes(np.array([x.pad_value]), x.dtype)
        return blobs

    def requires(self) -> list:
        from compiler.npu import requires
        return requires.eltwise(self)

    # ---- emission --------------------------------------------------------------------------
    def _source(self, key: str, x: Operand, strides: tuple[int, ...], pads=None) -> Source:
        """Where the operand's elements are, indexed over the collapsed space; a padded operand's
        index counts from the first pad element (its real elements start `before` on)."""
        if x.const is not None:
            return Source(None, key, 0, strides, x.dtype.size_bytes)
        offset = x.offset - sum(p[0] * st for p, st in zip(pads or (), strides))
        return Source(x.tensor, None, offset, strides, x.dtype.size_bytes)

    def mode(self) -> int:
        m = 0
        for x, (resc, uns, dr, sca) in ((self.a, (EltMode.A_RESCALE, EltMode.A_UNSIGNED, EltMode.A_DOUBLE_ROUND,
                                                   EltMode.A_SCALAR)),
                                        (self.b, (EltMode.B_RESCALE, EltMode.B_UNSIGNED, EltMode.B_DOUBLE_ROUND,
                                                  EltMode.B_SCALAR))):
            if x is None:
                continue
            if x.rescale is not None:
                m |= resc | (dr if x.rescale[2] else 0)
            if x.unsigned:
                m |= uns
            if self._scalar(x):
                m |= sca
        if self.round_:
            m |= EltMode.ROUND
        return int(m)

    def _layout(self, ectx: EmitContext):
        """(shape, operands as (key, Operand, SRAM), their DMA sources) of the emission."""
        shape, strides = self.space()
        operands = [(k, x, sram) for k, x, sram in (("a", self.a, Sram.INPUT), ("b", self.b, Sram.WEIGHT))
                    if x is not None]
        sources = {k: self._source(k, x, st, pads) for (k, x, _), st, pads in zip(operands, strides, self.space_pads())}
        return shape, operands, sources

    def _records(self, t: FlatTile, shape) -> tuple[int, int, int]:
        """(first record, records, ELT_CHANNELS) of a tile's output stage."""
        p_first, p_count = 0, 1
        channels = self.stage.channels
        if channels > 1 and t.axis == len(shape) - 1:
            p_first, p_count = t.a, t.b - t.a
        elif channels > 1:
            p_count = channels
        return p_first, p_count, p_count

    def _forwarded(self, ectx: EmitContext, key: str, k: int, t: FlatTile, slot: int, layout, kept) -> int | None:
        """Tile k's operand `key` ("a" or "b") where it already is in the output SRAM, apart from
        the tile's results (which go to _out_addr), or None. A cascade's A (`a_cascade`: the whole
        tensor, dense) is there for every tile; otherwise only the first tile looks, among the
        results `kept` (CommandWriter.results: (SRAM first byte, end byte, external address))."""
        x = self.a if key == "a" else self.b
        if key == "a" and self.a_cascade is not None and self.pix:
            # the region is the result in the padded layout: tile t's pixels from its first on
            return self.a_cascade.addr + self._sram_first(t) * x.dtype.size_bytes
        if key == "a" and self.a_cascade is not None:
            p = ectx.placements[x.tensor]
            region = [(self.a_cascade.addr, self.a_cascade.addr + p.nbytes, p.addr)]
            got = self._in_output(ectx, key, t, slot, layout, region)
            if got is None:
                # the pass (cascading.py) takes only a dense A of the result's shape, whose runs are
                # always inside the region: this is a compiler bug, not a property of the graph
                raise CompileError(f"{', '.join(self.sources)}: operand A of tile {k} is not a dense run of the "
                                   f"cascade region at {self.a_cascade.addr}")
            return got
        if x is None or k != 0 or not kept or x.tensor is None or self.pix:
            return None
        return self._kept_operand(ectx, key, t, slot, layout, kept)

    def _kept_operand(self, ectx: EmitContext, key: str, t: FlatTile, slot: int, layout, kept) -> int | None:
        """The first tile's operand `key` among the results `kept` (_in_output)."""
        return self._in_output(ectx, key, t, slot, layout, kept)

    def _in_output(self, ectx: EmitContext, key: str, t: FlatTile, slot: int, layout, kept) -> int | None:
        """Tile t's operand `key` in the output SRAM, when one of the runs `kept` holds all of its
        elements as a dense run, at an address of their size, apart from the tile's results."""
        x = self.a if key == "a" else self.b
        if x.pad is not None:
            return None
        shape, _, sources = layout
        src = sources[key]
        lo, sizes = ((0,) * len(shape), (1,) * len(shape)) if self._scalar(x) else t.box(shape)
        run = 1
        for n, st in reversed([(n, st) for n, st in zip(sizes, src.strides) if n != 1]):
            if st != run:
                return None
            run *= n
        first = src.ext_addr(ectx) + sum(l * s for l, s in zip(lo, src.strides)) * src.esize
        addr = result_holding(kept, first, run * src.esize)
        if addr is None or addr % src.esize:
            return None
        out0 = self._out_addr(ectx, t, slot)
        out1 = out0 + t.count * self.out_dtype.size_bytes
        if addr < out1 and out0 < addr + run * src.esize:
            return None
        return addr

    def _out_addr(self, ectx: EmitContext, t: FlatTile, slot: int) -> int:
        """Where tile t's results go in the output SRAM: buffer `slot`, or, for a cascade, their
        place in the whole result (its elements are dense, so byte i of the result at addr + i);
        a small result at its place of the ring (base.ring_place)."""
        if self.cascade_out is not None:
            return self.cascade_out.addr + self._sram_first(t) * self.out_dtype.size_bytes
        return ring_place(ectx, slot, ectx.placements[self.out].nbytes)

    def _load(self, w: CommandWriter, ectx: EmitContext, k: int, t: FlatTile, slot: int, layout,
              resident: dict, kept=None) -> int:
        """Tile k's loads into buffer `slot`: its operands unless already there (in the buffer, or
        in the output SRAM: _forwarded, among the results `kept`, decided here for the tile's
        command as resident[("on chip", k)]), its records unless resident, the table (tile 0);
        the DMA commands pushed."""
        shape, operands, sources = layout
        pads = dict(zip((key for key, _, _ in operands), self.space_pads()))
        n0 = w.dma_count
        if k == 0 and self.stage.table is not None:
            resident["lut"] = place_table(w, ectx, self.stage)
        lo, sizes = t.box(shape)
        on_chip = {}
        for key, _, _ in operands:
            addr = self._forwarded(ectx, key, k, t, slot, layout, kept)
            if addr is not None:
                on_chip[key] = addr
        resident[("on chip", k)] = on_chip
        for key, x, sram in operands:
            if key in on_chip:
                continue
            base = ectx.buffers[sram][slot]
            src = sources[key]
            if self._scalar(x):
                tag = ("scalar",)
                box = ((0,) * len(shape), (1,) * len(shape))
            else:
                box = (lo, sizes)
                tag = (sum(l * s for l, s in zip(lo, src.strides)),
                       tuple((n, s) for n, s in zip(sizes, src.strides) if n != 1))
            if resident.get((key, slot)) != tag:
                if x.pad is not None:
                    load_padded(w, ectx, src, sram, base, box[0], box[1], shape, pads[key],
                                element_bytes_fill(x.pad_value, x.dtype.size_bytes), f"{key}_pad",
                                self._sram_strides(box[1]))
                else:
                    load_source(w, ectx, src, sram, base, box[0], box[1], self._sram_strides(box[1]))
                resident[(key, slot)] = tag
        if self.stage.rescale:
            p_first, p_count, _ = self._records(t, shape)
            if resident.get(("params", slot)) != (p_first, p_count):
                load_params(w, ectx, p_first, p_count, param_home(ectx, slot, p_first, p_count))
                resident[("params", slot)] = (p_first, p_count)
        return w.dma_count - n0

    def prefetch(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext, slot: int,
                 kept=None) -> Prefetched | None:
        """The first tile's loads into buffer `slot`, for issuing before the operation before
        finishes (compiler/npu/prefetch.py); a table only when it is resident or goes to the LUT's
        scratch area (whether the running command reads that area is the link's check)."""
        if slot >= plan.buffers:
            return None
        if self.stage.table is not None and (ectx.luts is None or (ectx.luts.entry_of(self.stage) is None
                                                                    and not ectx.luts.scratch_only(self.stage))):
            return None                   # a table to keep: placed when the operation runs
        resident: dict = {}
        n = self._load(w, ectx, 0, plan.tiles[0], slot, self._layout(ectx), resident, kept)
        return Prefetched(slot, resident, n)

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext, *, prefetched: Prefetched | None = None,
             next_loads=None) -> list[dict]:
        """The tiles. `prefetched`: the first tile's loads, issued by prefetch() before the last
        compute command of the operation before; `next_loads(opcode, sub)`: issues the next
        operation's first loads before the last ELTWISE and returns their DMA count
        (compiler/npu/prefetch.py). The first tile reads an operand in the output SRAM when an
        earlier command's result is still there (CommandWriter.results, _forwarded)."""
        layout = self._layout(ectx)
        shape, operands, _ = layout
        bufs = ectx.buffers
        out = ectx.placements[self.out]
        osize = self.out_dtype.size_bytes
        st = self.stage
        channels = st.channels
        nbuf = plan.buffers
        first = prefetched.slot if prefetched else 0
        resident: dict = prefetched.state if prefetched else {}
        loaded = {0} if prefetched else set()
        # the operation before's last store may run on at the first ELTWISE when it reads other
        # output bytes than that tile writes
        stored = 0
        if prefetched and prefetched.store_span is not None:
            t0 = plan.tiles[0]
            o0 = self._out_addr(ectx, t0, first)
            stored = 0 if overlaps(prefetched.store_span, (o0, o0 + self._sram_count(t0) * osize)) else 1
        # Software pipeline (double buffering), as for the MAC (conv.py): tile k+1's loads, or the
        # next operation's first ones, are issued before tile k's ELTWISE, whose DMA slack lets
        # them and tile k-1's store run while it computes; they use the other buffer.
        pipelined = nbuf >= 2
        lut_addr = 0
        records = []
        tiles = plan.tiles
        for k, t in enumerate(tiles):
            t: FlatTile
            tile_id = ectx.first_tile_id + k
            start = len(w.commands)
            w.emit(Opcode.MARK, 0, tile_id)
            slot = (first + k) % nbuf
            if k not in loaded:
                self._load(w, ectx, k, t, slot, layout, resident, w.results)
            on_chip = resident[("on chip", k)]
            if k == 0 and st.table is not None:
                lut_addr = resident["lut"]
            p_first, p_count, elt_channels = self._records(t, shape) if st.rescale else (0, 1, 1)
            if st.rescale:
                w.set(Reg.PARAM_ADDR, param_home(ectx, slot, p_first, p_count))
            addrs = {key: bufs[sram][slot] for key, _, sram in operands}
            out_addr = self._out_addr(ectx, t, slot)
            mode = self.mode()
            for key, addr in on_chip.items():
                addrs[key] = addr
                mode |= EltMode.A_FROM_OUTPUT if key == "a" else EltMode.B_FROM_OUTPUT
            regs = {Reg.ELT_A_ADDR: addrs["a"], Reg.ELT_OUT_ADDR: out_addr, Reg.ELT_COUNT: self._sram_count(t),
                    Reg.ELT_A_DTYPE: int(self.a.dtype), Reg.ELT_A_ZP: self.a.zp, Reg.ELT_A_LSHIFT: self.a.lshift,
                    Reg.ELT_MODE: int(mode), Reg.ELT_CHANNELS: elt_channels}
            if self.a.rescale is not None:
                regs[Reg.ELT_A_MULT], regs[Reg.ELT_A_SHIFT] = self.a.rescale[0], self.a.rescale[1]
            if self.b is not None:
                regs.update({Reg.ELT_B_ADDR: addrs["b"], Reg.ELT_B_DTYPE: int(self.b.dtype), Reg.ELT_B_ZP: self.b.zp,
                             Reg.ELT_B_LSHIFT: self.b.lshift})
                if self.b.rescale is not None:
                    regs[Reg.ELT_B_MULT], regs[Reg.ELT_B_SHIFT] = self.b.rescale[0], self.b.rescale[1]
            if self.op == EltOp.MUL:
                regs[Reg.ELT_SHIFT] = self.mul_shift
            regs.update(st.regs(lut_addr=lut_addr))
            for reg, value in regs.items():
                w.set(reg, value)
            slack = 0
            result = (out.addr + t.start * osize, t.count * osize, out_addr)   # where the store takes it
            # the external bytes still to be written when the next operation's loads are issued
            # (before this last command): this tile's store; the others' were pushed before
            stores = self.cascade_out is None or self.cascade_out.store
            pending = [(result[0], result[0] + result[1])] if stores else []
            if self.pix:
                result_kept = None            # a strided store leaves no dense run to read on chip
            else:
                result_kept = result
            if pipelined:
                ahead = 0
                if k + 1 < len(tiles):
                    ahead = self._load(w, ectx, k + 1, tiles[k + 1], (first + k + 1) % nbuf, layout, resident)
                    loaded.add(k + 1)
                elif next_loads is not None:
                    ahead = next_loads(Opcode.ELTWISE, self.op, result_kept, pending)
                slack = stored + ahead
            elif k + 1 == len(tiles) and next_loads is not None:
                slack = next_loads(Opcode.ELTWISE, self.op, result_kept, pending)
            unit_index = w.emit(Opcode.ELTWISE, self.op, slack)
            before = w.dma_count
            if stores and self.pix:
                lo, sizes = t.box(shape)
                ext_strides = dense_strides(shape)
                copy_box(w, Opcode.DMA_STORE, Sram.OUTPUT, ext=result[0], sram_addr=out_addr,
                         dims=[(n, e * osize, s * osize) for n, e, s in zip(sizes, ext_strides, self._sram_strides(sizes))],
                         esize=osize)
            elif stores:
                w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=result[0], sram_addr=out_addr, len0=result[1])
            stored = w.dma_count - before
            records.append({"id": tile_id, "layer": ectx.layer, "unit": "ELTWISE",
                            "commands": [start, len(w.commands)], "unit_command": unit_index,
                            "start": t.start, "count": t.count, "c0": p_first if channels > 1 else 0,
                            "output": self.out})
        return records


# --------------------------------------------------------------------------------------------
# Lowering

def _skip_reshapes(block: Block, producers: dict, consumers: dict, name: str) -> tuple[str, list[Operator]]:
    """Walk up from `name` through RESHAPEs that only feed the next step; (tensor, the RESHAPEs)."""
    chain = []
    while True:
        p = producers.get(name)
        if p is None or p.op != "RESHAPE" or claimed(p) or only_consumer(block, consumers, name) is None:
            return name, chain
        chain.append(p)
        name = p.inputs[0]


def _absorbable(block: Block, consumers: dict, op: Operator | None, reader_name: str) -> bool:
    return (op is not None and not claimed(op)
            and only_consumer(block, consumers, op.outputs[0]) is not None
            and op.outputs[0] not in block.outputs)


def _source_operand(block: Block, producers: dict, consumers: dict, name: str, shape, dtype: DType,
                    **kw) -> tuple[Operand, list[Operator]]:
    """The operand reading `name` as `shape`: a constant, a view of a SLICE's input (when the SLICE
    has the operand's shape and feeds only this operand: its start is an offset, the input's
    strides stay), or the tensor itself. Returns the operand and the SLICE it absorbs, if any."""
    value = const_value(block, producers, name)
    if value is not None:
        return Operand(None, np.asarray(value).reshape(shape), tuple(shape), dtype, **kw), []
    p = producers.get(name)
    padded = _pad_operand(block, producers, consumers, name, shape, dtype, p, **kw)
    if padded is not None:
        return padded, [p]
    if (p is not None and p.op == "SLICE" and not claimed(p) and only_consumer(block, consumers, name) is not None
            and tuple(block.tensor(name).shape) == tuple(shape)):
        start = const_value(block, producers, p.inputs[1])
        src = block.tensor(p.inputs[0])
        if (start is not None and src.rank == len(shape) and start.size == src.rank
                and const_value(block, producers, p.inputs[0]) is None):
            st = dense_strides(src.shape)
            offset = sum(int(a) * b for a, b in zip(np.asarray(start).reshape(-1), st))
            return Operand(p.inputs[0], None, tuple(shape), dtype, offset=offset, strides=st, **kw), [p]
    return Operand(name, None, tuple(shape), dtype, **kw), []


def _pad_operand(block: Block, producers: dict, consumers: dict, name: str, shape, dtype: DType, p: Operator | None,
                 **kw) -> Operand | None:
    """The operand reading the PAD `p` that makes `name`, as its input with the padding filled in
    the tile buffers (the padded tensor is never stored), when the PAD feeds only this operand, in
    its shape, and its input, padding and pad value allow it; else None."""
    if (p is None or p.op != "PAD" or claimed(p) or only_consumer(block, consumers, name) is None
            or tuple(block.tensor(name).shape) != tuple(shape)):
        return None
    src = block.tensor(p.inputs[0])
    found = pad_constants(block, producers, p)
    if (isinstance(found, str) or src.num_elements == 0 or src.dtype != dtype
            or const_value(block, producers, p.inputs[0]) is not None):
        return None
    pad, value = found
    if [d + a + b for d, (a, b) in zip(src.shape, pad)] != list(shape):
        return None
    return Operand(p.inputs[0], None, tuple(shape), dtype, strides=dense_strides(src.shape), pad=pad,
                   pad_value=value, **kw)


def operand_chain(block: Block, producers: dict, consumers: dict, binop: Operator, k: int) -> tuple[Operand, list[Operator]]:
    """Operand k of a binary op with the input RESCALEs it absorbs (see the module docstring)."""
    name = binop.inputs[k]
    t = block.tensor(name)
    shape = tuple(t.shape)
    raw = _source_operand(block, producers, consumers, name, shape, t.dtype)
    if binop.op not in INT32_OPS:
        return raw
    top, reshapes = _skip_reshapes(block, producers, consumers, name)
    r = producers.get(top)
    if r is None or r.op != "RESCALE" or not _absorbable(block, consumers, r, top):
        return raw
    info = rescale_info(block, producers, r)
    if not isinstance(info, RescaleInfo) or info.out_dtype != I32 or not info.per_tensor:
        return raw
    absorbed = reshapes + [r]
    src = r.inputs[0]
    lshift = info.pure_shift()
    if lshift is not None:
        if lshift > 31:
            return raw
        x, more = _source_operand(block, producers, consumers, src, shape, info.in_dtype, zp=info.input_zp,
                                  unsigned=info.input_unsigned, lshift=lshift)
        x.rescales = [(f"{'AB'[k]}0", info)]
        return x, absorbed + more
    if not info.scale32:
        return raw
    rescale = (int(info.multiplier[0]), int(info.shift[0]), info.double_round)
    # A pure-shift RESCALE before it: TFLite's (x - zp) << left_shift, then the scale.
    top2, reshapes2 = _skip_reshapes(block, producers, consumers, src)
    q = producers.get(top2)
    if info.in_dtype == I32 and q is not None and q.op == "RESCALE" and _absorbable(block, consumers, q, top2):
        qi = rescale_info(block, producers, q)
        if isinstance(qi, RescaleInfo) and qi.pure_shift() is not None and qi.pure_shift() <= 31:
            x, more = _source_operand(block, producers, consumers, q.inputs[0], shape, qi.in_dtype,
                                      zp=qi.input_zp, unsigned=qi.input_unsigned, lshift=qi.pure_shift(),
                                      rescale=rescale)
            x.rescales = [(f"{'AB'[k]}0", qi), (f"{'AB'[k]}1", info)]
            return x, absorbed + reshapes2 + [q] + more
    x, more = _source_operand(block, producers, consumers, src, shape, info.in_dtype, zp=info.input_zp,
                              unsigned=info.input_unsigned, rescale=rescale)
    x.rescales = [(f"{'AB'[k]}0", info)]
    return x, absorbed + more


# Operations whose operands may trade places: A is the operand the unit can also read from the
# output SRAM (A_FROM_OUTPUT), so the one computed last (most likely still there) goes to A.
COMMUTATIVE = {"ADD", "MUL", "MINIMUM", "MAXIMUM"}


def _made_later(producers: dict, x: Operand) -> int:
    """The graph position of the op that computes the tensor an operand reads (-1: an input, a
    variable or a constant)."""
    p = producers.get(x.tensor) if x.tensor is not None else None
    return -1 if p is None else p.annotations.get("graph_index", -1)


def _as_side(x: Operand, side: str) -> Operand:
    """The operand as the unit's A or B: its input RESCALEs' probe points renamed."""
    x.rescales = [(side + at[1:], info) for at, info in x.rescales]
    return x


def build_binary(block: Block, op: Operator, producers: dict, consumers: dict):
    """(NpuEltwise, ops) for a binary elementwise op and what it absorbs, or a reason string."""
    out_t = block.tensor(op.outputs[0])
    ins = [block.tensor(n) for n in op.inputs[:2]]
    if op.op in ("ADD", "SUB", "MINIMUM", "MAXIMUM"):
        if not (ins[0].dtype == ins[1].dtype == out_t.dtype == I32):
            return f"{op.op} of {ins[0].dtype.name}, {ins[1].dtype.name} -> {out_t.dtype.name} (int32 only)"
    elif op.op == "MUL":
        if len(op.inputs) != 3:
            return "MUL without its shift operand"
        if not (ins[0].dtype == ins[1].dtype and ins[0].dtype in (I8, I16, I32) and out_t.dtype == I32):
            return f"MUL of {ins[0].dtype.name}, {ins[1].dtype.name} -> {out_t.dtype.name}"
        shift = scalar(const_value(block, producers, op.inputs[2]))
        if shift is None:
            return "MUL whose shift operand is not a constant"
        if not 0 <= shift <= 63 or (shift and ins[0].dtype != I32):
            return f"MUL with shift {shift} (a REQUIRE fails; the host reports it)"
    else:
        if not (ins[0].dtype == ins[1].dtype == out_t.dtype and out_t.dtype in (I8, I16, I32)):
            return f"{op.op} of {ins[0].dtype.name}, {ins[1].dtype.name} -> {out_t.dtype.name}"
        amount = const_value(block, producers, op.inputs[1])
        if amount is not None and (np.any(amount < 0) or np.any(amount > out_t.dtype.bits - 1)):
            return f"{op.op} by a constant amount outside 0..{out_t.dtype.bits - 1} (a REQUIRE; the host reports it)"
    if not (ins[0].rank == ins[1].rank == out_t.rank):
        return f"{op.op} with operands of ranks {ins[0].rank}, {ins[1].rank} (broadcasting needs equal ranks)"
    for x in ins:
        if any(s != o and s != 1 for s, o in zip(x.shape, out_t.shape)):
            return f"{op.op}: operand shape {x.shape} does not broadcast to {out_t.shape}"
    a, a_ops = operand_chain(block, producers, consumers, op, 0)
    b, b_ops = operand_chain(block, producers, consumers, op, 1)
    if op.op in COMMUTATIVE and _made_later(producers, b) > _made_later(producers, a):
        a, b = _as_side(b, "A"), _as_side(a, "B")
    stage = StageSpec(value_dtype=out_t.dtype)
    channels = out_t.shape[-1] if out_t.rank else 1
    out_name = extend_stage(block, producers, consumers, stage, op.outputs[0], channels=channels,
                            allow_rescale=out_t.dtype == I32)
    ops = a_ops + b_ops + [op] + stage.ops
    mul_shift = scalar(const_value(block, producers, op.inputs[2])) if op.op == "MUL" else 0
    npu = NpuEltwise(BINARY[op.op], a, b, out_name, tuple(out_t.shape), stage, mul_shift=mul_shift or 0,
                     round_=bool(op.attrs.get("round", False)) and op.op == "ARITHMETIC_RIGHT_SHIFT",
                     sources=[f"{o.op}->{o.outputs[0]}" for o in ops], binop=op)
    return npu, ops


def build_copy(block: Block, op: Operator, producers: dict, consumers: dict):
    """(NpuEltwise COPY, ops) for a RESCALE / CLAMP / TABLE and what follows it, or a reason."""
    x = block.tensor(op.inputs[0])
    out_t = block.tensor(op.outputs[0])
    shape = tuple(x.shape)
    channels = shape[-1] if shape else 1
    a, a_ops = _source_operand(block, producers, consumers, op.inputs[0], shape, x.dtype)
    if op.op == "RESCALE":
        info = rescale_info(block, producers, op)
        if isinstance(info, str):
            return info
        if info.multiplier.size not in (1, channels):
            return f"RESCALE with {info.multiplier.size} multipliers for {channels} channels"
        a.zp, a.unsigned = info.input_zp, info.input_unsigned
        stage = StageSpec(value_dtype=I48 if x.dtype == I48 else I32)
        stage.set_rescale(info, channels)
    elif op.op == "CLAMP":
        stage = StageSpec(value_dtype=x.dtype)
        if not take_clamp(block, stage, op):
            return f"CLAMP of {x.dtype.name} -> {out_t.dtype.name} (int8 / int16 with min <= max)"
    else:
        stage = StageSpec(value_dtype=x.dtype)
        if not take_table(block, producers, stage, op):
            return (f"TABLE of {x.dtype.name} -> {out_t.dtype.name} (the LUT runs int8 256 entries -> int8 and "
                    f"int16 513 -> int32 with a constant table)")
    out_name = extend_stage(block, producers, consumers, stage, op.outputs[0], channels=channels,
                            allow_rescale=False)
    ops = a_ops + list(stage.ops)
    npu = NpuEltwise(EltOp.COPY, a, None, out_name, shape, stage,
                     sources=[f"{o.op}->{o.outputs[0]}" for o in ops])
    return npu, ops


def _absorbing_binary(block: Block, op: Operator, producers: dict, consumers: dict):
    """The group of the binary op that takes `op` (a RESCALE or RESHAPE) into an operand chain."""
    name = op.outputs[0]
    for _ in range(8):
        nxt = only_consumer(block, consumers, name)
        if nxt is None:
            return None
        if nxt.op in INT32_OPS:
            found = build_binary(block, nxt, producers, consumers)
            if isinstance(found, tuple) and any(o is op for o in found[1]):
                return found
            return None
        if nxt.op not in ("RESCALE", "RESHAPE"):
            return None
        name = nxt.outputs[0]
    return None


def match(block: Block, op: Operator, producers: dict, consumers: dict):
    """NPU elementwise groups: (NpuEltwise, replaced ops), a reason string, or None."""
    if op.op in ("SLICE", "PAD"):
        # A SLICE or PAD that only feeds an operand becomes a view in that operand's loads.
        found = _absorbing_binary(block, op, producers, consumers)
        if found is not None:
            return found
        nxt = only_consumer(block, consumers, op.outputs[0])
        if nxt is not None and nxt.op in UNARY:
            found = build_copy(block, nxt, producers, consumers)
            if isinstance(found, tuple) and any(o is op for o in found[1]):
                return found
        return None
    if op.op in ("RESCALE", "RESHAPE"):
        found = _absorbing_binary(block, op, producers, consumers)
        if found is not None:
            return found
        if op.op == "RESHAPE":
            return None
    if op.op in BINARY:
        return build_binary(block, op, producers, consumers)
    if op.op in UNARY:
        return build_copy(block, op, producers, consumers)
    return None
