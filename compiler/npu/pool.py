"""Pooling and reductions on the POOL unit: AVG_POOL2D, MAX_POOL2D, and REDUCE_SUM / REDUCE_MAX /
REDUCE_MIN over a contiguous range of axes (a window over the whole range), with an output stage.

Lowering (exact forms only):
- AVG_POOL2D int8/int16 (constant zero points) [-> CLAMP [-> TABLE]]: the unit's AVG mode is the
  spec's arithmetic (padding excluded from the sum and the count, reciprocal_scale, output zero
  point, saturation);
- MAX_POOL2D int8/int16 [-> RESCALE with input zero point 0] [-> CLAMP] [-> TABLE];
- REDUCE_SUM int32, with consecutive REDUCE_SUMs on neighbouring axes (cnn32's global average pool:
  axis 1 then axis 2) merged into one window, optionally fed by a RESCALE that is (x - zp) exactly
  (a pure shift by 0: multiplier 2^k, shift k) from int8/int16, then [RESCALE] [CLAMP] [TABLE].
  Exact: the unit sums in wrap32; TOSA's REDUCE_SUM REQUIREs every partial sum to fit int32, and
  when they do the wrapped sum is the exact one whatever the order;
- REDUCE_MAX / REDUCE_MIN int8/int16/int32 -> MAX / MIN windows.
A reduction over axes [lo, hi] of shape S is a pool over the view N = prod(S[:lo]),
H = prod(S[lo:hi+1]), W = 1, C = prod(S[hi+1:]) with a KERNEL_H = H window (the view is the same
dense bytes).

Tiling: a box of the output (batch image, rows, columns, channels) with its input box (halo
included, only real pixels loaded) in half the input SRAM, the output box in half the output SRAM
and the channel records in half the parameter SRAM; the shape with the shortest estimated time
(`layer_estimate`: the POOL commands against the transfers, which overlap across tiles), then
the fewest input bytes loaded, then the fewest tiles, wins.

Input layout: the vector POOL reduces as many channels at once as the input pixels' alignment
allows (cycle_model.pool_vector_lanes), so packed pixels of 42 int8 channels (a 2-byte alignment)
take two channels a tap where a whole word would take mac.rows. The tile's pixels are laid out a
whole number of words apart (`PoolPlan.pad_pixels`) when that makes the estimated time shorter:
more DMA beats (each pixel its own run) against fewer POOL clocks. The output stays packed: the store is one run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import TileFitError
from compiler.ir import Block, Operator
from compiler.npu.base import CommandWriter, EmitContext, NpuOperation, TilePlan, ceil_div, result_holding, ring_place
from compiler.npu.base import const_value, scalar
from compiler.npu.conv import _extents
from compiler.npu.dma_patterns import copy_box
from firmware_model.arch import cycle_model
from firmware_model.golden.memories import box_span
from compiler.npu.stage import (RescaleInfo, StageSpec, claimed, extend_stage, load_params, place_table,
                                only_consumer, rescale_info)
from firmware_model.arch.isa import Opcode, PoolMode, Reg, Sram
from firmware_model.arch.config import NpuConfig
from firmware_model.tosa_ops.dtypes import DType

I8, I16, I32 = DType.INT8, DType.INT16, DType.INT32
REDUCE_MODES = {"REDUCE_SUM": PoolMode.SUM, "REDUCE_MAX": PoolMode.MAX, "REDUCE_MIN": PoolMode.MIN}


@dataclass(frozen=True)
class PoolTile:
    n: int
    y0: int
    th: int
    x0: int
    tw: int
    c0: int
    tc: int

    def describe(self) -> str:
        return (f"n{self.n} rows {self.y0}..{self.y0 + self.th - 1} cols {self.x0}..{self.x0 + self.tw - 1} "
                f"ch {self.c0}..{self.c0 + self.tc - 1}")


@dataclass
class PoolPlan(TilePlan):
    # input pixels a whole number of SRAM words apart (module docstring: input layout)
    pad_pixels: bool = False


@dataclass
class NpuPool(NpuOperation):
    mode: PoolMode
    ifm: str
    ofm: str
    in_shape: tuple[int, int, int, int]      # N, H, W, C (a view of the input's dense bytes)
    out_shape: tuple[int, int, int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]           # top, bottom, left, right
    in_dtype: DType
    input_zp: int
    output_zp: int                           # AVG's
    stage: StageSpec
    op_name: str = ""
    sources: list[str] = field(default_factory=list)
    # For the REQUIRE monitor (compiler/npu/requires.py): a reduction's input RESCALE (x - zp) and
    # its REDUCE_SUM ops in graph order, with the reduced dims (the window, row-major) and the
    # position of each op's axis among them.
    pre_rescale: RescaleInfo | None = None
    reduce_ops: list = field(default_factory=list)
    reduce_dims: tuple[int, ...] = ()
    reduce_axes: tuple[int, ...] = ()
    kind = "pool"
    unit = "POOL"

    @property
    def ifm_names(self) -> list[str]:
        return [self.ifm]

    @property
    def ofm_names(self) -> list[str]:
        return [self.ofm]

    @property
    def out_dtype(self) -> DType:
        return self.stage.out_dtype

    def describe(self) -> str:
        kh, kw = self.kernel
        parts = [f"{self.mode.name.lower()} {kh}x{kw} over {'x'.join(map(str, self.in_shape))} "
                 f"{self.in_dtype.name.lower()}", f"stride {self.stride[0]},{self.stride[1]}",
                 f"pad {','.join(map(str, self.pad))}"]
        if self.input_zp:
            parts.append(f"input zp {self.input_zp}")
        stage = self.stage.describe()
        return ", ".join(parts) + (f"; {stage}" if stage else "")

    def requires(self) -> list:
        from compiler.npu import requires
        return requires.pool(self)

    # ---- tiling ----------------------------------------------------------------------------
    def in_box(self, th: int, tw: int) -> tuple[int, int]:
        kh, kw = self.kernel
        sh, sw = self.stride
        return (th - 1) * sh + kh, (tw - 1) * sw + kw

    def in_pixel_stride(self, cfg: NpuConfig, tc: int, pad: bool) -> int:
        """Bytes between two input pixels of a tile of `tc` channels in the input SRAM."""
        packed = tc * self.in_dtype.size_bytes
        return -(-packed // cfg.word_bytes) * cfg.word_bytes if pad else packed

    def fits(self, cfg: NpuConfig, share: int, th: int, tw: int, tc: int, pad: bool = False) -> bool:
        ih, iw = self.in_box(th, tw)
        ih, iw = min(ih, self.in_shape[1]), min(iw, self.in_shape[2])
        return (ih * iw * self.in_pixel_stride(cfg, tc, pad) <= cfg.input_sram // share
                and th * tw * tc * self.out_dtype.size_bytes <= cfg.output_sram // share
                and (not self.stage.rescale or tc <= cfg.param_records // share))

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        n, oh, ow, c = self.out_shape
        if self.stage.table is not None and self.stage.table.size > cfg.lut_entries:
            raise TileFitError(f"{where}: the {self.stage.table.size}-entry table does not fit the LUT SRAM")
        best = None
        for share in (2, 1):
            for tc in _extents(c):
                for pad in (False, True):
                    if pad and self.in_pixel_stride(cfg, tc, True) == self.in_pixel_stride(cfg, tc, False):
                        continue
                    for th in _extents(oh):
                        for tw in _extents(ow):
                            if not self.fits(cfg, share, th, tw, tc, pad):
                                continue
                            ih, iw = self.in_box(th, tw)
                            count = ceil_div(oh, th) * ceil_div(ow, tw) * ceil_div(c, tc)
                            loaded = count * min(ih, self.in_shape[1]) * min(iw, self.in_shape[2]) * tc
                            key = (self.layer_estimate(cfg, th, tw, tc, pad, count), loaded, count)
                            if best is None or key < best[0]:
                                best = (key, (th, tw, tc, pad), share)
            if best is not None:
                break
        if best is None:
            ih, iw = self.in_box(1, 1)
            raise TileFitError(f"{where}: not even one output pixel of one channel fits the '{cfg.name}' "
                               f"configuration (its {ih}x{iw} window needs "
                               f"{ih * iw * self.in_dtype.size_bytes} B of the input SRAM, "
                               f"{cfg.input_sram} B)")
        _, (th, tw, tc, pad), share = best
        tiles = [PoolTile(b, y, min(th, oh - y), x, min(tw, ow - x), c0, min(tc, c - c0))
                 for b in range(n) for y in range(0, oh, th) for x in range(0, ow, tw) for c0 in range(0, c, tc)]
        srams = (Sram.INPUT, Sram.OUTPUT) + ((Sram.PARAM,) if self.stage.rescale else ())
        return PoolPlan(tiles, "rows, columns, channels" + (", pixels word-aligned" if pad else ""), share, srams,
                        pad_pixels=pad)

    def layer_estimate(self, cfg: NpuConfig, th: int, tw: int, tc: int, pad: bool, count: int) -> int:
        """The planner's estimate of the operation's clocks in `count` tiles of (th, tw, tc): per
        tile max(the POOL command, the tile's transfers), which overlap across double-buffered
        tiles, plus the first load and the last store, which do not; each by cycle_model's
        formulas for a whole tile at its buffer's start."""
        kh, kw = self.kernel
        es, os_ = self.in_dtype.size_bytes, self.out_dtype.size_bytes
        ih, iw = self.in_box(th, tw)
        ih, iw = min(ih, self.in_shape[1]), min(iw, self.in_shape[2])
        ps = self.in_pixel_stride(cfg, tc, pad)
        geometry = dict(in_size=es, ifm_addr=0, ifm_row_stride=iw * ps, ifm_pix_stride=ps)
        if cycle_model.pool_uses_vector(cfg, mode=int(self.mode), lut_mode=int(self.stage.lut_mode), out_size=os_,
                                        **geometry):
            pool = cycle_model.pool_vector_cycles(
                cfg, lanes=cycle_model.pool_vector_lanes(cfg, **geometry), ofm_h=th, ofm_w=tw, ofm_c=tc, kernel_h=kh,
                kernel_w=kw, out_size=os_, ofm_addr=0, ofm_row_stride=tw * tc * os_, ofm_pix_stride=tc * os_,
                rescale=self.stage.rescale, avg=self.mode == PoolMode.AVG)
        else:
            pool = cycle_model.pool_command_cycles(ofm_h=th, ofm_w=tw, ofm_c=tc, kernel_h=kh, kernel_w=kw)
        # emit's transfers: the box a run per pixel (one run a row when whole packed pixels make
        # rows dense), the output one dense run
        if ps == tc * es == self.in_shape[3] * es:
            load = cycle_model.dma_busy_cycles(cfg, Sram.INPUT, sram_addr=0, len0=iw * ps, len1=ih, len2=1,
                                               sram_stride1=iw * ps)
        else:
            load = cycle_model.dma_busy_cycles(cfg, Sram.INPUT, sram_addr=0, len0=tc * es, len1=iw, len2=ih,
                                               sram_stride1=ps, sram_stride2=iw * ps)
        store = cycle_model.dma_busy_cycles(cfg, Sram.OUTPUT, sram_addr=0, len0=th * tw * tc * os_, len1=1, len2=1)
        return count * max(pool, load + store) + min(pool, load) + store

    # ---- constants -------------------------------------------------------------------------
    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        if self.stage.rescale and self.stage.channels == 1:
            # one record per channel: the unit reads record PARAM_ADDR + c
            c = self.out_shape[3]
            spec = StageSpec(self.stage.value_dtype, np.repeat(self.stage.multiplier, c),
                             np.repeat(self.stage.shift, c))
            blobs = spec.blobs()
            if self.stage.table is not None:
                blobs["lut"] = self.stage.blobs()["lut"]
            return blobs
        return self.stage.blobs()

    # ---- emission --------------------------------------------------------------------------
    def _input_box(self, t: PoolTile) -> tuple[int, int, int, int, int, int]:
        """(r0, r1, c0, c1, pad_top, pad_left): the real input rows and columns tile `t` reads."""
        N, H, W, C = self.in_shape
        sh, sw = self.stride
        pt, _, pl, _ = self.pad
        bh, bw = self.in_box(t.th, t.tw)
        v0, u0 = t.y0 * sh - pt, t.x0 * sw - pl
        r0, r1 = max(0, v0), min(H, v0 + bh)
        c0, c1 = max(0, u0), min(W, u0 + bw)
        return r0, r1, c0, c1, r0 - v0, c0 - u0

    def _box_in_ext(self, ectx: EmitContext, t: PoolTile) -> tuple[int, int, int]:
        """Tile t's input box in external memory: (its first byte, row stride, pixel stride)."""
        N, H, W, C = self.in_shape
        es = self.in_dtype.size_bytes
        r0, _, c0x, _, _, _ = self._input_box(t)
        return ectx.placements[self.ifm].addr + (((t.n * H + r0) * W + c0x) * C + t.c0) * es, W * C * es, C * es

    def _load(self, w: CommandWriter, plan: PoolPlan, ectx: EmitContext, t: PoolTile, slot: int,
              resident: dict) -> int:
        """Tile t's input box (and records) into buffer `slot` unless resident: DMA commands pushed."""
        es = self.in_dtype.size_bytes
        before = w.dma_count
        r0, r1, c0x, c1x, _, _ = self._input_box(t)
        in_h, in_w = r1 - r0, c1x - c0x
        ps = self.in_pixel_stride(ectx.cfg, t.tc, plan.pad_pixels)
        key = (t.n, r0, r1, c0x, c1x, t.c0, t.tc)
        if resident.get(("in", slot)) != key:
            ext, row, pix = self._box_in_ext(ectx, t)
            copy_box(w, Opcode.DMA_LOAD, Sram.INPUT, ext=ext, sram_addr=ectx.buffers[Sram.INPUT][slot],
                     dims=[(in_h, row, in_w * ps), (in_w, pix, ps), (t.tc, es, es)], esize=es)
            resident[("in", slot)] = key
        if self.stage.rescale and resident.get(("params", slot)) != (t.c0, t.tc):
            load_params(w, ectx, t.c0, t.tc, ectx.buffers[Sram.PARAM][slot])
            resident[("params", slot)] = (t.c0, t.tc)
        return w.dma_count - before

    def _kept_box(self, w: CommandWriter, ectx: EmitContext, t: PoolTile, out: tuple[int, int]):
        """Tile t's input box where an earlier command's stored result still holds it in the
        output SRAM (CommandWriter.results), laid out as in external memory, apart from the
        output bytes `out`: (IFM_ADDR, IFM_ROW_STRIDE, IFM_PIX_STRIDE) for IFM_SRAM OUTPUT, or None."""
        r0, r1, c0x, c1x, _, _ = self._input_box(t)
        first, row, pix = self._box_in_ext(ectx, t)
        lo, hi = box_span(r1 - r0, c1x - c0x, t.tc, first, row, pix, self.in_dtype)
        addr = result_holding(w.results, lo, hi - lo)
        if addr is None or addr % self.in_dtype.size_bytes or (addr < out[1] and out[0] < addr + hi - lo):
            return None
        return addr, row, pix

    def emit(self, w: CommandWriter, plan: PoolPlan, ectx: EmitContext) -> list[dict]:
        """The tiles, software-pipelined when the buffers are two (as the MAC and ELTWISE kinds):
        tile k+1's loads are issued before tile k's POOL into the other buffer, and the POOL's
        DMA slack lets them and tile k-1's store run while it computes. A lone tile reads its
        input box where an earlier result left it in the output SRAM when it is still there
        (IFM_SRAM OUTPUT, _kept_box), and puts a small result at its place of the ring
        (base.ring_place)."""
        _, OH, OW, OC = self.out_shape
        kh, kw = self.kernel
        sh, sw = self.stride
        es, os_ = self.in_dtype.size_bytes, self.out_dtype.size_bytes
        ofm = ectx.placements[self.ofm]
        bufs = ectx.buffers
        st = self.stage
        resident: dict = {}
        records = []
        lut_addr = 0
        tiles = plan.tiles
        pipelined = plan.buffers >= 2
        stored = 0
        for k, t in enumerate(tiles):
            tile_id = ectx.first_tile_id + k
            start = len(w.commands)
            w.emit(Opcode.MARK, 0, tile_id)
            slot = k % plan.buffers
            if k == 0 and st.table is not None:
                lut_addr = place_table(w, ectx, st)
            r0, r1, c0x, c1x, pad_top, pad_left = self._input_box(t)
            in_w = c1x - c0x
            ps = self.in_pixel_stride(ectx.cfg, t.tc, plan.pad_pixels)
            out_bytes = t.th * t.tw * t.tc * os_
            out_addr = ring_place(ectx, slot, out_bytes) if len(tiles) == 1 else bufs[Sram.OUTPUT][slot]
            kept = self._kept_box(w, ectx, t, (out_addr, out_addr + out_bytes)) if len(tiles) == 1 else None
            if kept is None and not (pipelined and k):
                self._load(w, plan, ectx, t, slot, resident)
            if st.rescale:
                w.set(Reg.PARAM_ADDR, bufs[Sram.PARAM][slot])
            in_addr, in_row, in_pix = kept if kept is not None else (bufs[Sram.INPUT][slot], in_w * ps, ps)
            regs = {Reg.IFM_SRAM: int(Sram.OUTPUT if kept is not None else Sram.INPUT),
                    Reg.IFM_ADDR: in_addr, Reg.IFM_ROW_STRIDE: in_row, Reg.IFM_PIX_STRIDE: in_pix,
                    Reg.IFM_ZP: self.input_zp, Reg.IFM_DTYPE: int(self.in_dtype),
                    Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sh, Reg.STRIDE_W: sw,
                    Reg.OFM_ADDR: out_addr, Reg.OFM_ROW_STRIDE: t.tw * t.tc * os_, Reg.OFM_PIX_STRIDE: t.tc * os_,
                    Reg.OFM_H: t.th, Reg.OFM_W: t.tw, Reg.OFM_C: t.tc,
                    Reg.POOL_PAD_TOP: pad_top, Reg.POOL_PAD_LEFT: pad_left, Reg.POOL_IN_H: r1 - r0,
                    Reg.POOL_IN_W: in_w}
            regs.update(st.regs(lut_addr=lut_addr))
            if self.mode == PoolMode.AVG:
                regs[Reg.OFM_ZP] = self.output_zp
            for reg, value in regs.items():
                w.set(reg, value)
            slack = 0
            if pipelined:
                ahead = self._load(w, plan, ectx, tiles[k + 1], (k + 1) % plan.buffers, resident) \
                    if k + 1 < len(tiles) else 0
                slack = stored + ahead
            unit_index = w.emit(Opcode.POOL, self.mode, slack)
            before = w.dma_count
            copy_box(w, Opcode.DMA_STORE, Sram.OUTPUT,
                     ext=ofm.addr + (((t.n * OH + t.y0) * OW + t.x0) * OC + t.c0) * os_, sram_addr=out_addr,
                     dims=[(t.th, OW * OC * os_, t.tw * t.tc * os_), (t.tw, OC * os_, t.tc * os_), (t.tc, os_, os_)],
                     esize=os_)
            stored = w.dma_count - before
            records.append({"id": tile_id, "layer": ectx.layer, "unit": "POOL", "commands": [start, len(w.commands)],
                            "unit_command": unit_index, "n": t.n, "y0": t.y0, "th": t.th, "x0": t.x0, "tw": t.tw,
                            "c0": t.c0, "tc": t.tc, "output": self.ofm})
        return records


# --------------------------------------------------------------------------------------------
# Lowering

def _pool2d(block: Block, op: Operator, producers: dict, consumers: dict):
    x, out_t = block.tensor(op.inputs[0]), block.tensor(op.outputs[0])
    if x.dtype not in (I8, I16) or out_t.dtype != x.dtype or x.rank != 4:
        return f"{op.op} of {x.dtype.name} rank {x.rank} -> {out_t.dtype.name} (int8 / int16, rank 4)"
    kernel = tuple(int(v) for v in op.attrs.get("kernel", ()))
    stride = tuple(int(v) for v in op.attrs.get("stride", ()))
    pad = tuple(int(v) for v in op.attrs.get("pad", ()))
    if len(kernel) != 2 or len(stride) != 2 or len(pad) != 4 or min(kernel + stride) < 1 or min(pad) < 0:
        return f"{op.op} with kernel {kernel}, stride {stride}, pad {pad}"
    if pad[0] >= kernel[0] or pad[1] >= kernel[0] or pad[2] >= kernel[1] or pad[3] >= kernel[1]:
        return f"{op.op} with padding as large as the kernel (an ERROR_IF)"
    izp = ozp = 0
    if op.op == "AVG_POOL2D":
        if len(op.inputs) != 3:
            return "AVG_POOL2D without its zero-point operands"
        izp = scalar(const_value(block, producers, op.inputs[1]))
        ozp = scalar(const_value(block, producers, op.inputs[2]))
        if izp is None or ozp is None:
            return "AVG_POOL2D whose zero points are not constants"
        if int(op.attrs.get("acc_type", I32)) != int(I32):
            return f"AVG_POOL2D with acc_type {op.attrs.get('acc_type')}"
        if kernel[0] * kernel[1] * (x.dtype.umax + 256) >= 1 << 31:
            # The unit sums in wrap32 (TOSA's int32 accumulator); the kernel sums such windows in
            # int64, so a sum beyond int32 would differ: only the host's kernel matches it.
            return f"AVG_POOL2D with a {kernel[0]}x{kernel[1]} window whose sum may leave int32"
    stage = StageSpec(value_dtype=x.dtype)
    out_name = extend_stage(block, producers, consumers, stage, op.outputs[0], channels=out_t.shape[3],
                            allow_rescale=op.op == "MAX_POOL2D")
    ops = [op] + stage.ops
    npu = NpuPool(PoolMode.AVG if op.op == "AVG_POOL2D" else PoolMode.MAX, op.inputs[0], out_name,
                  tuple(x.shape), tuple(out_t.shape), kernel, stride, pad, x.dtype, izp, ozp, stage, op.op,
                  sources=[f"{o.op}->{o.outputs[0]}" for o in ops])
    return npu, ops


def _reduce_input(block: Block, producers: dict, consumers: dict, name: str):
    """The tensor a REDUCE_SUM reads and what it absorbs: a RESCALE that is exactly x - zp
    (pure shift 0, per tensor, signed input) from int8/int16; else the input as it is. Returns
    (tensor, its type, zero point, absorbed ops, the RESCALE's info or None)."""
    t = block.tensor(name)
    r = producers.get(name)
    if (r is not None and r.op == "RESCALE" and not claimed(r)
            and only_consumer(block, consumers, name) is not None):
        info = rescale_info(block, producers, r)
        if (isinstance(info, RescaleInfo) and info.pure_shift() == 0 and not info.input_unsigned
                and info.in_dtype in (I8, I16)):
            return r.inputs[0], info.in_dtype, info.input_zp, [r], info
    return name, t.dtype, 0, [], None


def _reduce(block: Block, op: Operator, producers: dict, consumers: dict):
    mode = REDUCE_MODES[op.op]
    x = block.tensor(op.inputs[0])
    allowed = (I32,) if op.op == "REDUCE_SUM" else (I8, I16, I32)
    if x.dtype not in allowed or block.tensor(op.outputs[0]).dtype != x.dtype or x.rank < 1:
        return f"{op.op} of {x.dtype.name}"
    shape = list(x.shape)
    axes = {int(op.attrs.get("axis", 0))}
    if not 0 <= min(axes) < len(shape):
        return f"{op.op} with axis {min(axes)}"
    ops = [op]
    name = op.outputs[0]
    # Following reductions of the same kind on neighbouring axes join the window.
    while True:
        nxt = only_consumer(block, consumers, name)
        if nxt is None or nxt.op != op.op:
            break
        ax = int(nxt.attrs.get("axis", 0))
        cur = set(axes) | {ax}
        lo, hi = min(cur), max(cur)
        if not all(shape[i] == 1 or i in cur for i in range(lo, hi + 1)):
            break
        axes = cur
        ops.append(nxt)
        name = nxt.outputs[0]
    lo, hi = min(axes), max(axes)
    outer = int(np.prod(shape[:lo], dtype=np.int64))
    r = int(np.prod(shape[lo:hi + 1], dtype=np.int64))
    inner = int(np.prod(shape[hi + 1:], dtype=np.int64))
    src, in_dtype, izp, pre, pre_info = (op.inputs[0], x.dtype, 0, [], None)
    if mode == PoolMode.SUM:
        src, in_dtype, izp, pre, pre_info = _reduce_input(block, producers, consumers, op.inputs[0])
    reduced = list(ops)
    out_t = block.tensor(name)
    stage = StageSpec(value_dtype=x.dtype)
    out_name = extend_stage(block, producers, consumers, stage, name, channels=out_t.shape[-1] if out_t.rank else 1,
                            allow_rescale=True)
    if stage.rescale and stage.channels > 1 and (out_t.rank == 0 or out_t.shape[-1] != inner):
        return _reduce_plain(block, op, producers, consumers)
    ops = pre + ops + stage.ops
    npu = NpuPool(mode, src, out_name, (outer, r, 1, inner), (outer, 1, 1, inner), (r, 1), (1, 1), (0, 0, 0, 0),
                  in_dtype, izp, 0, stage, op.op, sources=[f"{o.op}->{o.outputs[0]}" for o in ops])
    if mode == PoolMode.SUM:
        npu.pre_rescale, npu.reduce_ops, npu.reduce_dims = pre_info, reduced, tuple(shape[lo:hi + 1])
        npu.reduce_axes = tuple(int(o.attrs.get("axis", 0)) - lo for o in reduced)
    return npu, ops


def _reduce_plain(block: Block, op: Operator, producers: dict, consumers: dict):
    """One reduction without fusion (when a fused per-channel rescale does not follow the view)."""
    x = block.tensor(op.inputs[0])
    shape = list(x.shape)
    ax = int(op.attrs.get("axis", 0))
    outer = int(np.prod(shape[:ax], dtype=np.int64))
    inner = int(np.prod(shape[ax + 1:], dtype=np.int64))
    stage = StageSpec(value_dtype=x.dtype)
    npu = NpuPool(REDUCE_MODES[op.op], op.inputs[0], op.outputs[0], (outer, shape[ax], 1, inner), (outer, 1, 1, inner),
                  (shape[ax], 1), (1, 1), (0, 0, 0, 0), x.dtype, 0, 0, stage, op.op,
                  sources=[f"{op.op}->{op.outputs[0]}"])
    if op.op == "REDUCE_SUM":
        npu.reduce_ops, npu.reduce_dims, npu.reduce_axes = [op], (shape[ax],), (0,)
    return npu, [op]


def _absorbing_reduce(block: Block, op: Operator, producers: dict, consumers: dict):
    nxt = only_consumer(block, consumers, op.outputs[0])
    if nxt is not None and nxt.op == "REDUCE_SUM":
        found = _reduce(block, nxt, producers, consumers)
        if isinstance(found, tuple) and any(o is op for o in found[1]):
            return found
    return None


def match(block: Block, op: Operator, producers: dict, consumers: dict):
    """NPU pooling groups: (NpuPool, replaced ops), a reason string, or None."""
    if op.op in ("AVG_POOL2D", "MAX_POOL2D"):
        return _pool2d(block, op, producers, consumers)
    if op.op in REDUCE_MODES:
        return _reduce(block, op, producers, consumers)
    if op.op == "RESCALE":
        return _absorbing_reduce(block, op, producers, consumers)
    return None
