"""Convolution on the MAC array: CONV2D and DEPTHWISE_CONV2D with the output stage (bias,
RESCALE, CLAMP) fused.

Lowering: CONV2D / DEPTHWISE_CONV2D (channel multiplier 1) [-> RESCALE [-> CLAMP]] with int8 input
and weights and constant weights, bias and zero points, when the intermediate tensors feed
nothing else. A depthwise tile's input box holds only its own channels (one word a pixel). An int8
depthwise layer runs in the array's DEPTHWISE mode (`window_mode`: rows are channels, the lanes a
window of input pixels along the row, docs/isa.md); int16 inputs, and arrays with fewer rows than
lanes, take the block-diagonal CONV2D form (the off-diagonal weights equal the weight zero point
and so contribute nothing), one lane per row.

Width unfolding (`NpuConv.unfolded`): when a word holds the channels of two or more input pixels,
the layer runs over its input unfolded along the width (a word holds u = mac.cols // C pixels'
channels, all KW taps when they fit), which the DMA gathers as overlapping runs; KH*ceil(KW/u)
reduction steps instead of KH*KW.

Tiling: a tile is a box of the output (rows x columns x output channels of one batch image) with
the input box it needs (halo included). It must fit: its pixels in the accumulators, its input box
in the input SRAM, its weight blocks in the weight SRAM, its records in the parameter SRAM and its
output box in the output SRAM — in half of each when it can (double buffering). Among the shapes
that fit, the planner picks the one that moves the fewest bytes between external memory and the
SRAMs, trying both loop orders (input reused across output-channel slices, or weights reused
across spatial tiles).

Emission per tile: MARK, the input box (FILL with the input zero point where the box leaves the
image, DMA_LOAD of the rest; the lanes past a pixel's channels are not filled: their weights are
the weight zero point) unless resident, the weights and
parameter records of the tile's channel slice unless resident, the MAC registers, MAC, and the
DMA_STORE of the output box. With two buffers per SRAM the tiles are software-pipelined: tile
k+1's loads come before tile k's MAC, whose DMA slack (docs/isa.md) lets them and tile k-1's
store run while it computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import TileFitError
from compiler.ir import Block, Operator
from compiler.npu.base import (CommandWriter, EmitContext, NpuOperation, TilePlan, ceil_div, const_value,
                               home_addresses, round_up, scalar)
from compiler.npu.stage import StageSpec, extend_stage, only_consumer, place_table, table_fits
from compiler.npu.prefetch import Prefetched, overlaps
from firmware_model.arch.isa import (DEPTHWISE_MODES, DEPTHWISE_ROWS, MacMode, Opcode, Reg, Sram,
                                     depthwise_group_lanes, lane_pair_blocks, packed_span_fits)
from firmware_model.golden.dma import pattern_span
from firmware_model.golden.mac_unit import depthwise_lanes, lanes_per_word
from firmware_model.arch.isa import encode_param_records
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import (depthwise_stream_clocks, depthwise_windows, dma_beats,
                                             dma_busy_cycles,
                                             conv_streams, element_write_clocks, mac_command_cycles,
                                             uses_vector_output)
from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.tosa_ops.dtypes import DType


# --------------------------------------------------------------------------------------------
# The operation

@dataclass(frozen=True)
class ConvTile:
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


@dataclass(frozen=True)
class ConvGeometry:
    """Sizes of one tile shape in each SRAM (bytes; records for params)."""
    in_h: int
    in_w: int
    in_bytes: int
    weight_bytes: int
    params: int
    out_pix_bytes: int
    out_bytes: int
    pixels: int


@dataclass(frozen=True)
class Cascade:
    """A result kept in the output SRAM for the 1x1 or depthwise convolutions after it
    (compiler/passes/cascading.py): the whole result at `addr`, pixel (y, x) at addr + y*row + x*pix,
    channel c at byte c (pix a whole number of words: the MAC's input layout). A depthwise
    consumer's boxes reach `before` bytes below it and `after` above its end (their padding, read
    as the input zero point: the region keeps those bytes apart from every other buffer)."""
    addr: int
    pix: int
    row: int
    store: bool                  # the producer also stores its result (something else reads it)
    before: int = 0
    after: int = 0

    @property
    def floor(self) -> int:
        """The lowest byte its consumers read: a region written below stays under it."""
        return self.addr - self.before


@dataclass
class NpuConv(NpuOperation):
    """CONV2D with its fused output stage."""
    ifm: str                     # input tensor (N, H, W, C), int8
    ofm: str                     # final output tensor (after fused ops)
    weights: np.ndarray          # int8 (OC, KH, KW, IC)
    bias: np.ndarray             # int64 (OC,)
    input_zp: int
    weight_zp: int
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]   # top, bottom, left, right
    dilation: tuple[int, int]
    in_shape: tuple[int, int, int, int]
    out_shape: tuple[int, int, int, int]
    stage: StageSpec             # the fused output stage (RESCALE, CLAMP, TABLE) after bias
    sources: list[str] = field(default_factory=list)
    # INT8, or INT16 (the int16 extension: int16 x int8 into int48; an input word then holds
    # mac.cols/2 elements and a weight row its mac.cols/2 weights in the low bytes).
    ifm_dtype: DType = DType.INT8
    # DEPTHWISE_CONV2D (channel multiplier 1): output channel c sums over input channel c only;
    # weights are then (C, KH, KW, 1).
    depthwise: bool = False
    # TRANSPOSE_CONV2D runs as a stride-1 convolution over the input upsampled by `upsample`
    # (real pixels every upsample[0] rows / upsample[1] columns, the input zero point between).
    upsample: tuple[int, int] = (1, 1)
    # Set on the width-unfolded form of a convolution (`unfolded`): (KW, STRIDE_W, PAD_LEFT, W, C)
    # of the original, whose input box the DMA gathers.
    unfold: tuple[int, int, int, int, int] | None = None
    # compiler/passes/cascading.py: this convolution's result stays in the output SRAM for the next
    # (cascade_out), or its input is the one before's result there (cascade_in)
    cascade_out: Cascade | None = None
    cascade_in: Cascade | None = None
    kind = "conv"
    unit = "MAC"

    @property
    def ifm_names(self) -> list[str]:
        return [self.ifm]

    @property
    def ofm_names(self) -> list[str]:
        return [self.ofm]

    @property
    def out_dtype(self) -> DType:
        return self.stage.out_dtype

    def lanes(self, cfg: NpuConfig) -> int:
        """Input channels in one SRAM word."""
        return lanes_per_word(cfg.mac_cols, self.ifm_dtype)

    def window_mode(self, cfg: NpuConfig) -> bool:
        """Does the layer run in the MAC array's DEPTHWISE mode (docs/isa.md): rows are channels,
        lanes a window of input pixels along the row? For int8 depthwise layers when a block of
        rows covers a word's channels (mac.rows >= mac.cols); else the block-diagonal CONV2D form,
        one lane per row."""
        return self.depthwise and self.ifm_dtype == DType.INT8 and cfg.mac_rows >= cfg.mac_cols

    def window_mac_mode(self, cfg: NpuConfig) -> MacMode:
        """The window mode of the layer (docs/isa.md): DEPTHWISE (a kernel row and window pass a
        step, two input words a clock), DEPTHWISE_PAIRED or _TRIPLE (two or three kernel rows a
        step, one group of lanes and one input-SRAM read port each; a kernel row spans at most a
        group's lanes, isa.depthwise_group_lanes) or DEPTHWISE_PACKED (the kernel's taps mac.cols a
        step in raster order, isa.packed_span_fits). The fewest stream clocks over an output row
        of the layer's width win (cycle_model.depthwise_windows), then the fewest steps, then the
        mode first in isa.DEPTHWISE_MODES (the fewer kernel rows a step, PACKED last): a 5x5 layer takes 2 steps on 16 lanes (TRIPLE: 3 + 2 rows), 4
        on 8 (PACKED: 8 + 8 + 8 + 1 taps) where DEPTHWISE takes 5; at stride 2 on 8 lanes
        DEPTHWISE's two words a clock beat PACKED's one."""
        kh, kw = self.kernel
        span = (kw - 1) * self.dilation[1] + 1
        L, width, stride = cfg.mac_cols, self.out_shape[2], self.stride[1]
        if kh == 1:
            return MacMode.DEPTHWISE
        fitting = [mode for mode, k in DEPTHWISE_ROWS.items() if k == 1 or span <= depthwise_group_lanes(L, k)]
        if packed_span_fits(L, span):
            fitting.append(MacMode.DEPTHWISE_PACKED)

        def cost(mode):
            windows = depthwise_windows(cfg, mode, kh, kw, self.dilation[1])
            return (sum(depthwise_stream_clocks(1, width, stride, n, two) for n, two in windows),
                    len(windows), DEPTHWISE_MODES.index(mode))
        return min(fitting, key=cost)

    def lane_pairs(self, cfg: NpuConfig) -> bool:
        """Does the layer run in the MAC array's CONV2D_LANE_PAIRS mode (docs/isa.md): its last
        input-channel block holds at most mac.cols/2 channels, so each of that block's steps takes
        two output pixels a beat, one in each half of the lanes? For int8 CONV2D layers with an even
        output width (the planner then gives every tile an even width)."""
        return self._pairs_apply(cfg) and _pairs_last_block(cfg.mac_cols, self.in_channels, self.out_shape[2])

    def row_pairs(self, cfg: NpuConfig, tc: int) -> bool:
        """Does a tile of `tc` output channels take row pairs (CONV2D_ROW_PAIRS, docs/isa.md): its
        last block of output channels holds at most mac.rows/2 of them, so that each half of the
        rows takes one of two output pixels a beat? For int8 CONV2D layers with an even output
        width on an array of a power-of-two number of rows."""
        R = cfg.mac_rows
        # (with lane pairs over one input-channel block every step is paired already: nothing to gain)
        whole_lanes = not self.lane_pairs(cfg) or self.in_channels > cfg.mac_cols
        return (self._pairs_apply(cfg) and R >= 2 and R & (R - 1) == 0 and 0 < tc % R <= R // 2 and whole_lanes)

    def pixel_pairs(self, cfg: NpuConfig) -> bool:
        """Do some of the layer's tiles take two output pixels a beat (lane or row pairs)? Then every
        tile's width is even."""
        return self.lane_pairs(cfg) or self.row_pairs(cfg, self.out_channels)

    def _pairs_apply(self, cfg: NpuConfig) -> bool:
        return not self.depthwise and self.ifm_dtype == DType.INT8 and self.out_shape[2] % 2 == 0

    def mac_mode(self, cfg: NpuConfig, tc: int | None = None) -> MacMode:
        """The MAC mode of the layer's tiles (of one of `tc` output channels: row pairs)."""
        if not self.window_mode(cfg):
            rows = tc is not None and self.row_pairs(cfg, tc)
            if self.lane_pairs(cfg):
                return MacMode.CONV2D_PAIRS if rows else MacMode.CONV2D_LANE_PAIRS
            return MacMode.CONV2D_ROW_PAIRS if rows else MacMode.CONV2D
        return self.window_mac_mode(cfg)

    def mac_steps(self, cfg: NpuConfig) -> int:
        """Reduction steps (weight blocks) per block of output channels."""
        kh, kw = self.kernel
        if self.window_mode(cfg):
            return len(depthwise_windows(cfg, self.window_mac_mode(cfg), kh, kw, self.dilation[1]))
        return kh * kw * (1 if self.depthwise else ceil_div(self.in_channels, self.lanes(cfg)))

    @property
    def kernel(self) -> tuple[int, int]:
        return self.weights.shape[1], self.weights.shape[2]

    @property
    def in_channels(self) -> int:
        return self.in_shape[3]

    @property
    def out_channels(self) -> int:
        return self.weights.shape[0]

    @property
    def macs(self) -> int:
        n, oh, ow, oc = self.out_shape
        kh, kw = self.kernel
        return n * oh * ow * oc * kh * kw * (1 if self.depthwise else self.in_channels)

    def describe(self) -> str:
        kh, kw = self.kernel
        what = ("depthwise" if self.depthwise else "transpose conv" if self.upsample != (1, 1)
                else "width-unfolded conv" if self.unfold is not None else "conv")
        parts = [f"{kh}x{kw} {what} {self.in_channels}->{self.out_channels}",
                 f"stride {self.stride[0]},{self.stride[1]}", f"pad {','.join(map(str, self.pad))}"]
        if self.dilation != (1, 1):
            parts.append(f"dilation {self.dilation[0]},{self.dilation[1]}")
        if self.stage.describe():
            parts.append(self.stage.describe())
        return ", ".join(parts)

    # ---- width unfolding ---------------------------------------------------------------------
    def unfolded(self, cfg: NpuConfig) -> "NpuConv | None":
        """This convolution as one over its input unfolded along the width (int8, no dilation),
        so that the lanes C channels alone would leave idle take other taps of the kernel row,
        when that takes fewer reduction steps per kernel row than KW x ceil(C / mac.cols):

        - all KW taps in one unfolded pixel over ceil(KW*C / mac.cols) channel blocks (an RGB stem:
          a 5x5 one on 8 lanes takes 2 steps a kernel row, not 5): a "pixel" (y, ox) of the
          unfolded input holds input pixels ox*STRIDE_W - PAD_LEFT .. + KW-1 of row y, and the
          kernel becomes KH x 1 over KW*C channels, stride (STRIDE_H, 1);
        - or, when a word holds the C channels of u = mac.cols // C >= 2 pixels and that takes
          fewer steps (ties go to this form), groups of u taps a word: column j of the unfolded
          input holds input pixels j - PAD_LEFT .. + u-1, and the kernel becomes KH x ceil(KW/u)
          over u*C channels, stride as before, dilation (1, u) (a group's missing taps have
          weights at the weight zero point: they add nothing).

        The weights are regrouped once; the DMA gathers the unfolded box from the original input
        (overlapping runs of KW*C or u*C bytes, clipped at the row's edges, the FILL giving the
        padding). None when it does not apply."""
        kh, kw = self.kernel
        n, H, W, C = self.in_shape
        L = self.lanes(cfg)
        if (self.unfold is not None or self.depthwise or self.upsample != (1, 1) or self.dilation != (1, 1)
                or self.ifm_dtype != DType.INT8 or kw == 1):
            return None
        # a kernel row's reduction steps, a lane-paired step (CONV2D_LANE_PAIRS) counting half
        plain = kw * self._block_steps(cfg, C, self.out_shape[2])   # as it is
        whole = self._block_steps(cfg, kw * C, self.out_shape[2])   # with all taps in one unfolded pixel
        u = L // C
        grouped = ceil_div(kw, u) if u >= 2 else plain      # ... with groups of u taps a word
        if min(whole, grouped) >= plain:
            return None
        sh, sw = self.stride
        pt, pb, pl, _ = self.pad
        OC, OW = self.out_channels, self.out_shape[2]
        common = dict(ifm=self.ifm, ofm=self.ofm, bias=self.bias, input_zp=self.input_zp, weight_zp=self.weight_zp,
                      out_shape=self.out_shape, stage=self.stage, sources=self.sources, ifm_dtype=self.ifm_dtype)
        if whole < grouped or kw * C <= L:
            return NpuConv(weights=self.weights.reshape(OC, kh, 1, kw * C), stride=(sh, 1), pad=(pt, pb, 0, 0),
                           dilation=(1, 1), in_shape=(n, H, OW, kw * C), unfold=(kw, sw, pl, W, C), **common)
        groups = ceil_div(kw, u)
        w = np.full((OC, kh, groups * u, C), self.weight_zp, dtype=np.int8)
        w[:, :, :kw] = self.weights
        width = (OW - 1) * sw + (groups - 1) * u + 1           # unfolded columns the outputs reach
        return NpuConv(weights=w.reshape(OC, kh, groups, u * C), stride=(sh, sw), pad=(pt, pb, 0, 0),
                       dilation=(1, u), in_shape=(n, H, width, u * C), unfold=(u, 1, pl, W, C), **common)

    def _block_steps(self, cfg: NpuConfig, channels: int, out_w: int) -> float:
        """Reduction steps of one kernel position over `channels` int8 input channels, the last
        block counting half when it would take lane pairs (lane_pairs)."""
        return ceil_div(channels, cfg.mac_cols) - (0.5 if _pairs_last_block(cfg.mac_cols, channels, out_w) else 0)

    # ---- tiling ----------------------------------------------------------------------------
    def requires(self) -> list:
        from compiler.npu import requires
        return requires.conv(self)

    def geometry(self, cfg: NpuConfig, th: int, tw: int, tc: int) -> ConvGeometry:
        L, R = cfg.mac_cols, cfg.mac_rows
        kh, kw = self.kernel
        sh, sw = self.stride
        dh, dw = self.dilation
        cb = ceil_div(self.in_channels, self.lanes(cfg))
        in_h = (th - 1) * sh + (kh - 1) * dh + 1
        in_w = (tw - 1) * sw + (kw - 1) * dw + 1
        opix = round_up(tc * self.out_dtype.size_bytes, L)
        if self.depthwise:
            cb = 1          # a depthwise tile's box holds only its own channels' word
        return ConvGeometry(in_h, in_w, in_h * in_w * cb * L, ceil_div(tc, R) * self.mac_steps(cfg) * R * L, tc,
                            opix, th * tw * opix, th * tw)

    @staticmethod
    def fits(g: ConvGeometry, cfg: NpuConfig, share: int) -> bool:
        """Does a tile fit when each SRAM is divided into `share` buffers?"""
        return (g.pixels <= cfg.acc_depth
                and g.in_bytes <= cfg.input_sram // share
                and g.weight_bytes <= cfg.weight_sram // share
                and g.params <= cfg.param_records // share
                and g.out_bytes <= cfg.output_sram // share)

    def traffic(self, cfg: NpuConfig, th: int, tw: int, tc: int) -> tuple[int, str]:
        """External bytes moved for a tile shape, under the better of the two loop orders."""
        n, oh, ow, oc = self.out_shape
        ic = self.in_shape[3]
        g = self.geometry(cfg, th, tw, tc)
        spatial = n * ceil_div(oh, th) * ceil_div(ow, tw)
        slices = ceil_div(oc, tc)
        # a depthwise channel slice loads its own channels' box: the whole input once per spatial
        # tile; nothing when the input is on chip already (cascading.py)
        in_per_tile = g.in_h * g.in_w * (tc if self.depthwise else ic) * self.ifm_dtype.size_bytes
        if self.cascade_in is not None:
            in_per_tile = 0
        if self.depthwise:
            w_total = g.weight_bytes * slices + slices * tc * PARAM_RECORD_BYTES
            out_total = n * oh * ow * oc * self.out_dtype.size_bytes
            return spatial * slices * in_per_tile + w_total + out_total, "channels-outer"
        w_total = g.weight_bytes * slices + slices * tc * PARAM_RECORD_BYTES
        out_total = n * oh * ow * oc * self.out_dtype.size_bytes
        # spatial-outer: the input box stays while every channel slice runs over it
        spatial_outer = spatial * in_per_tile + (w_total if slices == 1 else spatial * w_total) + out_total
        # channels-outer: a slice's weights stay while every spatial tile runs under it
        channels_outer = slices * spatial * in_per_tile + w_total + out_total
        if spatial == 1 or slices == 1 or spatial_outer <= channels_outer:
            return spatial_outer, "spatial-outer"
        return channels_outer, "channels-outer"

    def reads_padding(self, cfg: NpuConfig) -> bool:
        """Whether the MAC reads the padding of this layer's input boxes as IFM_ZP (the window
        modes: IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H, IFM_IN_W, docs/isa.md) instead of the tiles
        FILLing it."""
        return self.window_mode(cfg) and self.upsample == (1, 1)

    def _box_origin(self, t) -> tuple[int, int]:
        """The image row and column of tile t's input box's first position (negative in the padding)."""
        return t.y0 * self.stride[0] - self.pad[0], t.x0 * self.stride[1] - self.pad[2]

    def _box_registers(self, cfg: NpuConfig, t, g: ConvGeometry) -> dict[Reg, int]:
        """A tile's IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H, IFM_IN_W when the MAC reads its padding
        (reads_padding): where the image's pixels lie in its box. IFM_IN_H 0 when the whole box is
        real, or when it holds no pixel at all (a FILL covers that box)."""
        iy0, ix0 = self._box_origin(t)
        ry0, ry1 = _real_range(iy0, g.in_h, self.in_shape[1], 1)
        rx0, rx1 = _real_range(ix0, g.in_w, self.in_shape[2], 1)
        if ry1 <= ry0 or rx1 <= rx0 or (ry1 - ry0 == g.in_h and rx1 - rx0 == g.in_w):
            return NO_PADDING
        return {Reg.IFM_PAD_TOP: ry0 - iy0, Reg.IFM_PAD_LEFT: rx0 - ix0, Reg.IFM_IN_H: ry1 - ry0,
                Reg.IFM_IN_W: rx1 - rx0}

    def tile_costs(self, cfg: NpuConfig, th: int, tw: int, tc: int) -> tuple[int, int, int, int]:
        """Clocks of one tile of this shape, for estimates: (its MAC command as the cycle model
        counts it, the output at its buffer's start, plus TILE_COMMAND_CLOCKS; its input box's
        load; its weights' and records' loads; its store)."""
        kh, kw = self.kernel
        g = self.geometry(cfg, th, tw, tc)
        esize = self.out_dtype.size_bytes
        mac = mac_command_cycles(cfg, ofm_h=th, ofm_w=tw, ofm_c=tc, kernel_h=kh, kernel_w=kw,
                                 ifm_cblocks=1 if self.depthwise else ceil_div(self.in_channels, self.lanes(cfg)),
                                 write_clocks=element_write_clocks(cfg, esize),
                                 vector=uses_vector_output(self.out_dtype, self.stage.lut_mode),
                                 ofm_addr=0, ofm_row_stride=tw * g.out_pix_bytes, ofm_pix_stride=g.out_pix_bytes,
                                 element_bytes=esize, window=self.mac_mode(cfg) if self.window_mode(cfg) else None,
                                 stride_w=self.stride[1], dilation_w=self.dilation[1],
                                 lane_pairs=self.lane_pairs(cfg), row_pairs=self.row_pairs(cfg, tc))
        pix = g.in_bytes // (g.in_h * g.in_w)
        row_bytes = (tc if self.depthwise else self.in_shape[3]) * self.ifm_dtype.size_bytes
        load_in = dma_busy_cycles(cfg, Sram.INPUT, sram_addr=0, len0=row_bytes, len1=g.in_w, len2=g.in_h,
                                  sram_stride1=pix, sram_stride2=g.in_w * pix)
        # The estimate charges a FILL of the whole box, though the emission fills only the padding
        # (_fill_border) and never the lanes past the channels: counting the border alone made the
        # planner pick shapes that ran slower (demo_conv on large 15,434 -> 17,770 cycles,
        # resnet_pool 6,993 -> 7,889); the whole box keeps the comparison between shapes as before.
        if not self.reads_padding(cfg):
            load_in += dma_busy_cycles(cfg, Sram.INPUT, fill=True, sram_addr=0, len0=g.in_bytes, len1=1, len2=1)
        if self.cascade_in is not None:         # the input is on chip already (cascading.py)
            load_in = 0
        load_w = (dma_busy_cycles(cfg, Sram.WEIGHT, sram_addr=0, len0=g.weight_bytes, len1=1, len2=1)
                  + dma_busy_cycles(cfg, Sram.PARAM, sram_addr=0, len0=tc * PARAM_RECORD_BYTES, len1=1, len2=1))
        store = dma_busy_cycles(cfg, Sram.OUTPUT, sram_addr=0, len0=tc * esize, len1=tw, len2=th,
                                sram_stride1=g.out_pix_bytes, sram_stride2=tw * g.out_pix_bytes)
        # a tile's commands run between MACs, while the DMA engine may be busy
        return mac + TILE_COMMAND_CLOCKS, load_in, load_w, store

    def estimate_cycles(self, cfg: NpuConfig, th: int, tw: int, tc: int, share: int, order: str) -> int:
        """A quick estimate of the layer's clocks with this tile shape, for choosing among shapes
        (the cycle model decides the real count): MAC commands by their formula (the output at
        its buffer's start), an interior tile's transfers by the DMA's (beats per SRAM word). With two buffers (share 2) the tiles
        are software-pipelined (emit): past the first loads and before the last store, each tile
        costs the larger of its MAC and its commands (TILE_COMMAND_CLOCKS: they run between the
        MACs, beside the DMA engine) and the transfers that overlap them."""
        n, oh, ow, oc = self.out_shape
        spatial = n * ceil_div(oh, th) * ceil_div(ow, tw)
        slices = ceil_div(oc, tc)
        tiles = spatial * slices
        mac, load_in, load_w, store = self.tile_costs(cfg, th, tw, tc)
        if order == "spatial-outer":
            loads = spatial * load_in + (load_w if slices == 1 else tiles * load_w)
        else:
            loads = tiles * load_in + slices * load_w
        if share < 2 or tiles == 1:
            return loads + tiles * (mac + store)
        first = load_in + load_w
        return first + store + max(tiles * mac, loads - first + (tiles - 1) * store)

    def ramp_pays(self, cfg: NpuConfig, th: int, tw: int, tc: int) -> bool:
        """Whether splitting the first spatial block in two by rows (_ramp_first; spatial-outer
        order, two buffers) is estimated to pay. The MACs then start after half of its input box
        has loaded, but the lower half's tiles, at half the compute, must cover the next block's
        transfers, and each extra tile costs its commands and its MAC's fixed clocks. Both tile
        sequences are estimated as a software pipeline (_pipeline_clocks) over the first two
        blocks (the rest is the same in both), and the split is taken when it saves RAMP_MARGIN
        of them."""
        _, oh, _, oc = self.out_shape
        slices = ceil_div(oc, tc)
        full = self.tile_costs(cfg, th, tw, tc)
        half = self.tile_costs(cfg, th // 2, tw, tc)
        lower = self.tile_costs(cfg, th - th // 2, tw, tc)

        def block(costs):
            mac, load_in, load_w, store = costs
            w = load_w if slices > 1 else 0
            return [(mac, load_in + w, store)] + [(mac, w, store)] * (slices - 1)

        plain = block(full) + block(full)
        ramped = block(half) + block(lower) + block(full)
        plain_clocks = _pipeline_clocks(plain + [(0, full[1], 0)])
        ramped_clocks = _pipeline_clocks(ramped + [(0, full[1], 0)])
        return ramped_clocks < (1 - RAMP_MARGIN) * plain_clocks

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        unfolded = self.unfolded(cfg)
        if unfolded is not None:
            return unfolded.plan(cfg, where)
        if not table_fits(cfg, self.stage):
            raise TileFitError(f"{where}: the {self.stage.table.size}-entry table does not fit the "
                               f"'{cfg.name}' LUT SRAM ({cfg.lut_entries} entries)")
        n, oh, ow, oc = self.out_shape
        R = cfg.mac_rows
        if self.depthwise:
            # One MAC command covers the channels of one input word that the array's rows reach.
            channel_options = [min(oc, R, self.lanes(cfg))]
        else:
            channel_options = sorted({min(oc, R * k) for k in range(1, ceil_div(oc, R) + 1)}, reverse=True)
        # The shape that moves the fewest bytes (then the fewest tiles), with double buffering when
        # it fits; but a shape estimated (estimate_cycles) at least PIPELINE_GAIN faster wins: with
        # double buffering, a few tiles let the transfers overlap the MACs even where one tile
        # would fit. The estimate is rough, so only a clear gain overrides the traffic rule.
        best = fastest = None
        for share in (2, 1):
            for tc in channel_options:
                for th in _extents(oh):
                    for tw in _extents(ow, even=self.pixel_pairs(cfg)):
                        if not self.fits(self.geometry(cfg, th, tw, tc), cfg, share):
                            continue
                        cost, order = self.traffic(cfg, th, tw, tc)
                        count = n * ceil_div(oh, th) * ceil_div(ow, tw) * ceil_div(oc, tc)
                        est = self.estimate_cycles(cfg, th, tw, tc, share, order)
                        if best is None or (best[3] == share and (cost, count) < best[0]):
                            best = ((cost, count), (th, tw, tc), order, share, est)
                        if fastest is None or (est, cost, count) < fastest[0]:
                            fastest = ((est, cost, count), (th, tw, tc), order, share, est)
        if best is not None and fastest[4] < PIPELINE_GAIN * best[4]:
            best = fastest
        if best is None:
            g = self.geometry(cfg, 1, 1, min(oc, R))
            raise TileFitError(
                f"{where}: not even a 1x1-pixel tile of {min(oc, R)} channels fits the '{cfg.name}' "
                f"configuration (input box {g.in_bytes} B of {cfg.input_sram}, weights {g.weight_bytes} B "
                f"of {cfg.weight_sram}, output {g.out_bytes} B of {cfg.output_sram})")
        _, (th, tw, tc), order, share, _ = best
        spatial = [(b, y, x) for b in range(n) for y in range(0, oh, th) for x in range(0, ow, tw)]
        channels = list(range(0, oc, tc))
        pairs = ([(s, c) for s in spatial for c in channels] if order == "spatial-outer"
                 else [(s, c) for c in channels for s in spatial])
        tiles = [ConvTile(b, y, min(th, oh - y), x, min(tw, ow - x), c, min(tc, oc - c)) for (b, y, x), c in pairs]
        if (order == "spatial-outer" and share == 2 and len(spatial) > 1 and min(th, oh) >= 2
                and self.ramp_pays(cfg, th, tw, tc)):
            tiles = _ramp_first(tiles, spatial[0])
        return TilePlan(tiles, order, share, (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.OUTPUT))

    # ---- constants -------------------------------------------------------------------------
    def weight_blocks(self, cfg: NpuConfig, c0: int, tc: int) -> bytes:
        """Weights of output channels [c0, c0+tc) in MAC-array block order (docs/isa.md): blocks
        (ocb, ky, kx, icb) of rows x cols, missing rows/lanes filled with the weight zero point."""
        R, L = cfg.mac_rows, cfg.mac_cols
        lanes = self.lanes(cfg)
        _, kh, kw, wic = self.weights.shape
        n_ocb = ceil_div(tc, R)
        if self.window_mode(cfg):
            return self.window_blocks(cfg, c0, tc)
        if self.depthwise:
            # Block-diagonal: row r holds channel c0+r's weight in lane r (the tile's input box
            # holds its own channels from lane 0), every other entry the weight zero point, which
            # adds nothing: one input word feeds the rows.
            w = np.full((n_ocb * R, kh, kw, 1, lanes), self.weight_zp, dtype=np.int8)
            rows = np.arange(tc)
            w[rows, :, :, 0, rows] = self.weights[c0:c0 + tc, :, :, 0]
            cb = 1
        else:
            cb = ceil_div(wic, lanes)
            w = np.full((n_ocb * R, kh, kw, cb * lanes), self.weight_zp, dtype=np.int8)
            w[:tc, :, :, :wic] = self.weights[c0:c0 + tc]
            w = w.reshape(n_ocb * R, kh, kw, cb, lanes)
            if self.lane_pairs(cfg):
                # the last block's upper lanes weigh the odd pixels' words: the lower lanes again
                w[..., cb - 1, L // 2:] = w[..., cb - 1, :L // 2]
            if self.row_pairs(cfg, tc):
                # the last block of output channels: its upper rows weigh the odd pixels' words (the
                # lower rows again), on whole words (no lane pairs there: the upper lanes meet the
                # input lanes past the channels, which nothing fills)
                base, h = (n_ocb - 1) * R, R // 2
                if self.lane_pairs(cfg):
                    w[base:, :, :, cb - 1, L // 2:] = self.weight_zp
                w[base + h:base + 2 * h] = w[base:base + h]
        if lanes < L:   # int16 inputs: a weight row uses its low `lanes` bytes
            w = np.concatenate([w, np.zeros(w.shape[:-1] + (L - lanes,), np.int8)], axis=-1)
        blocks = w.reshape(n_ocb, R, kh, kw, cb, L).transpose(0, 2, 3, 4, 1, 5)
        if self.lane_pairs(cfg):    # in step order: the lane-paired block first at each position
            blocks = blocks[:, :, :, lane_pair_blocks(cb)]
        return np.ascontiguousarray(blocks).tobytes()

    def window_blocks(self, cfg: NpuConfig, c0: int, tc: int) -> bytes:
        """Weights of channels [c0, c0+tc) for the window modes: a block of rows x cols per step
        (mac_unit.depthwise_lanes: a kernel row and window pass, or two or three kernel rows, one
        per group of lanes), row r channel c0+r, lane l the tap of the kernel row the lane reads whose
        input pixel the lane sees (offset in the row's span, where tap kx sits at kx*DILATION_W);
        every other entry the weight zero point (adds nothing)."""
        R, L = cfg.mac_rows, cfg.mac_cols
        _, kh, kw, _ = self.weights.shape
        dw = self.dilation[1]
        krow, offset, inside = depthwise_lanes(cfg, self.mac_mode(cfg), kh, kw, dw)
        w = np.full((len(offset), R, L), self.weight_zp, dtype=np.int8)
        taps = self.weights[c0:c0 + tc, :, :, 0]                      # (tc, kh, kw)
        for i, lane in zip(*np.nonzero(inside & (offset % dw == 0))):
            w[i, :tc, lane] = taps[:, krow[i, lane], offset[i, lane] // dw]
        return np.ascontiguousarray(w).tobytes()

    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        unfolded = self.unfolded(cfg)
        if unfolded is not None:
            return unfolded.constants(cfg, plan)
        blobs = {}
        for c0, tc in sorted({(t.c0, t.tc) for t in plan.tiles}):
            blobs[f"weights@{c0}"] = self.weight_blocks(cfg, c0, tc)
            blobs[f"params@{c0}"] = param_records(self.bias, self.stage, c0, tc)
        if self.stage.table is not None:
            blobs["lut"] = self.stage.blobs()["lut"]
        return blobs

    def _load_unfolded(self, w: CommandWriter, ext_base: int, in_addr: int, t: ConvTile, iy0: int, ix0: int,
                       g: ConvGeometry, pix: int) -> None:
        """The width-unfolded input box of tile `t` (see `unfolded`): the zero point everywhere,
        then per input row the `run` pixels of each unfolded column, one pattern for the columns
        inside the row and one per column clipped at its edges."""
        run, step, pl, width, C = self.unfold
        H = self.in_shape[1]
        ry0, ry1 = _real_range(iy0, g.in_h, H, 1)
        w.dma(Opcode.FILL, Sram.INPUT, sram_addr=in_addr, len0=g.in_bytes, value=self.input_zp & 0xFF)
        if ry1 <= ry0:
            return
        rows = ry1 - ry0
        row0_ext = ext_base + (t.n * H + ry0) * width * C
        row0_sram = in_addr + (ry0 - iy0) * g.in_w * pix
        span, edges = _unfold_columns(ix0, g.in_w, run, step, pl, width)
        if span is not None:
            j0, j1 = span
            w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=row0_ext + ((ix0 + j0) * step - pl) * C,
                  sram_addr=row0_sram + j0 * pix, len0=run * C, len1=j1 - j0, len2=rows,
                  ext_s1=step * C, ext_s2=width * C, sram_s1=pix, sram_s2=g.in_w * pix)
        for j, lo, hi in edges:
            sx = (ix0 + j) * step - pl
            w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=row0_ext + lo * C,
                  sram_addr=row0_sram + j * pix + (lo - sx) * C, len0=(hi - lo) * C, len1=rows, len2=1,
                  ext_s1=width * C, ext_s2=0, sram_s1=g.in_w * pix, sram_s2=0)

    # ---- emission ----------------------------------------------------------------------
    # PrefetchLink asks for the first loads with the input box (prefetch's `input_box`), then
    # without it
    prefetches_input = True

    def prefetch(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext, slot: int,
                 kept=None, input_box: bool = False, in_slot: int | None = None) -> Prefetched | None:
        """The first tile's weights and records into weight buffer `slot`, and its input box into
        input buffer `in_slot` (`slot` by default; unless a cascade holds it on chip), for issuing
        before the operation before finishes (compiler/npu/prefetch.py). The input is usually the
        operation before's result: PrefetchLink takes the loads only where the bytes they read are
        stored already (its stores still to come read others). State: (the weights' first channel,
        the input box's key or None, its input buffer)."""
        unfolded = self.unfolded(ectx.cfg)
        if unfolded is not None:
            return unfolded.prefetch(w, plan, ectx, slot, kept, input_box, in_slot)
        in_slot = slot if in_slot is None else in_slot
        if slot >= plan.buffers or in_slot >= plan.buffers:
            return None
        n0 = w.dma_count
        t = plan.tiles[0]
        self._load_weights(w, ectx, t, slot)
        box = None
        if self.cascade_in is None and input_box:
            box = self.input_box_key(ectx.cfg, t)
            self._load_input(w, ectx, t, ectx.buffers[Sram.INPUT][in_slot])
        return Prefetched(slot, (t.c0, box, in_slot), w.dma_count - n0)

    def weight_home(self, ectx: EmitContext, slot: int, t) -> tuple[int, int]:
        """Where tile t keeps its weights and parameter records in weight buffer `slot`: (weight
        SRAM byte address, parameter record index). At the buffers' start, unless several
        operations load them (ConstantHomes): then at a place of their own at the buffers' end,
        so that the short operands and records of the elementwise operations between a recurrent
        cell's products, which start at the beginning, leave them resident for the next step."""
        cfg, bufs = ectx.cfg, ectx.buffers
        w_need = round_up(self.geometry(cfg, t.th, t.tw, t.tc).weight_bytes, cfg.word_bytes)
        home = home_addresses(ectx, slot, ectx.constants[f"weights@{t.c0}"], {Sram.WEIGHT: w_need, Sram.PARAM: t.tc})
        if home is None:
            return bufs[Sram.WEIGHT][slot], bufs[Sram.PARAM][slot]
        return home[Sram.WEIGHT], home[Sram.PARAM]

    def _weight_loads(self, ectx: EmitContext, t, slot: int) -> list[tuple[Sram, dict]]:
        """A tile's weights and parameter records for weight buffer `slot`: the two loads."""
        g = self.geometry(ectx.cfg, t.th, t.tw, t.tc)
        w_addr, p_index = self.weight_home(ectx, slot, t)
        return [(Sram.WEIGHT, dict(ext=ectx.constants[f"weights@{t.c0}"], sram_addr=w_addr, len0=g.weight_bytes)),
                (Sram.PARAM, dict(ext=ectx.constants[f"params@{t.c0}"],
                                  sram_addr=p_index * PARAM_RECORD_BYTES, len0=t.tc * PARAM_RECORD_BYTES))]

    def _load_weights(self, w: CommandWriter, ectx: EmitContext, t, slot: int) -> None:
        """A tile's weights and parameter records into weight buffer `slot` (nothing where they
        are resident: CommandWriter)."""
        for sram, load in self._weight_loads(ectx, t, slot):
            w.dma(Opcode.DMA_LOAD, sram, **load)

    def _resident_slot(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext, t=None) -> int | None:
        """The weight buffer that still holds tile t's weights and records (the first tile's by
        default) from an earlier operation with the same constants, if one does: the tile takes
        that buffer and loads nothing (a recurrent cell's weights, step after step)."""
        t = plan.tiles[0] if t is None else t
        return next((s for s in range(plan.buffers)
                     if all(w.holds(sram, **load) for sram, load in self._weight_loads(ectx, t, s))), None)

    def input_box_key(self, cfg: NpuConfig, t) -> tuple:
        """What a tile's input box holds: (batch, box origin, box size, a depthwise tile's channels);
        a buffer holding it needs no load."""
        g = self.geometry(cfg, t.th, t.tw, t.tc)
        iy0, ix0 = self._box_origin(t)
        return (t.n, iy0, ix0, g.in_h, g.in_w, t.c0 if self.depthwise else 0)

    def _load_input(self, w: CommandWriter, ectx: EmitContext, t, in_addr: int) -> None:
        """Tile t's input box into the input SRAM at `in_addr`: the image's pixels it covers, and
        its padding FILLed with the input zero point unless the MAC reads it as IFM_ZP."""
        cfg = ectx.cfg
        ifm = ectx.placements[self.ifm]
        _, H, W, C = self.in_shape
        isize = self.ifm_dtype.size_bytes
        row_bytes = C * isize
        cb = 1 if self.depthwise else ceil_div(C, self.lanes(cfg))
        pix = cb * cfg.mac_cols
        g = self.geometry(cfg, t.th, t.tw, t.tc)
        iy0, ix0 = self._box_origin(t)
        if self.unfold is not None:
            self._load_unfolded(w, ifm.addr, in_addr, t, iy0, ix0, g, pix)
        else:
            # Rows/columns of the (upsampled) image the box covers that hold real pixels.
            uy, ux = self.upsample
            ry0, ry1 = _real_range(iy0, g.in_h, H, uy)
            rx0, rx1 = _real_range(ix0, g.in_w, W, ux)
            # the bytes of a pixel the box takes: all its channels, or a depthwise tile's
            run, first = (t.tc * isize, t.c0 * isize) if self.depthwise else (row_bytes, 0)
            whole = (uy == ux == 1 and run == pix and ry0 * uy == iy0 and rx0 * ux == ix0
                     and ry1 - ry0 == g.in_h and rx1 - rx0 == g.in_w)
            if self.reads_padding(cfg) and self._box_registers(cfg, t, g)[Reg.IFM_IN_H]:
                pass                    # the MAC reads the padding as IFM_ZP: no FILL
            elif uy != 1 or ux != 1 or ry1 <= ry0 or rx1 <= rx0:
                w.dma(Opcode.FILL, Sram.INPUT, sram_addr=in_addr, len0=g.in_bytes,
                      value=self.input_zp & 0xFF)
            elif not whole:
                _fill_border(w, ectx.cfg, in_addr, g, pix, ry0 - iy0, ry1 - iy0, rx0 - ix0, rx1 - ix0,
                             self.input_zp & 0xFF)
            if ry1 > ry0 and rx1 > rx0:
                w.dma(Opcode.DMA_LOAD, Sram.INPUT,
                      ext=ifm.addr + ((t.n * H + ry0) * W + rx0) * row_bytes + first,
                      sram_addr=in_addr + ((ry0 * uy - iy0) * g.in_w + (rx0 * ux - ix0)) * pix,
                      len0=run, len1=rx1 - rx0, len2=ry1 - ry0,
                      ext_s1=row_bytes, ext_s2=W * row_bytes, sram_s1=ux * pix,
                      sram_s2=uy * g.in_w * pix)

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext, *, prefetched: Prefetched | None = None,
             next_loads=None) -> list[dict]:
        """The tiles. `prefetched`: the first tile's weights, issued by prefetch() before the
        last compute command of the operation before; `next_loads(opcode, sub)`: issues the next
        operation's first loads before the last MAC and returns their DMA count
        (compiler/npu/prefetch.py)."""
        unfolded = self.unfolded(ectx.cfg)
        if unfolded is not None:
            return unfolded.emit(w, plan, ectx, prefetched=prefetched, next_loads=next_loads)
        cfg = ectx.cfg
        L = cfg.mac_cols
        _, H, W, C = self.in_shape
        _, OH, OW, OC = self.out_shape
        kh, kw = self.kernel
        sh, sw = self.stride
        dh, dw = self.dilation
        pt, _, pl, _ = self.pad
        lanes = self.lanes(cfg)
        cb = 1 if self.depthwise else ceil_div(C, lanes)
        pix = cb * L                   # a pixel in the input box (a depthwise tile: its channels' word)
        isize = self.ifm_dtype.size_bytes
        row_bytes = C * isize          # one pixel's channels in external memory
        esize = self.out_dtype.size_bytes
        ifm, ofm = ectx.placements[self.ifm], ectx.placements[self.ofm]
        bufs = ectx.buffers
        resident_in: dict[int, tuple] = {}
        resident_w: dict[int, int] = {}
        n_in = n_w = 0
        if prefetched is not None:
            c0, box, in_slot = prefetched.state
            resident_w[prefetched.slot] = c0
            n_w = prefetched.slot + 1
            if box is not None:
                resident_in[in_slot] = box
                n_in = in_slot + 1
        lut_addr = place_table(w, ectx, self.stage) if self.stage.table is not None else 0
        stage_regs = self.stage.regs(lut_addr=lut_addr)
        def load(t) -> tuple[int, int, int]:
            """The tile's input box, weights and records unless resident: (input slot, weight
            slot, DMA commands emitted)."""
            n0 = w.dma_count
            nonlocal n_in, n_w
            key = self.input_box_key(cfg, t)
            in_slot = next((s for s, v in resident_in.items() if v == key), None)
            if self.cascade_in is not None:
                in_slot = 0            # read where the operation before wrote it: nothing to load
            elif in_slot is None:
                in_slot = n_in % plan.buffers
                n_in += 1
                resident_in[in_slot] = key
                self._load_input(w, ectx, t, bufs[Sram.INPUT][in_slot])
            w_slot = next((s for s, c in resident_w.items() if c == t.c0), None)
            if w_slot is None:
                w_slot = self._resident_slot(w, plan, ectx, t)
                if w_slot is not None:          # left by an earlier operation: alternate from it
                    n_w = w_slot + 1
                else:
                    w_slot = n_w % plan.buffers
                    n_w += 1
                resident_w[w_slot] = t.c0
                self._load_weights(w, ectx, t, w_slot)
            return in_slot, w_slot, w.dma_count - n0

        # Software pipeline (double buffering): tile k+1's loads are issued before tile k's MAC,
        # and the MAC's DMA slack lets them and tile k-1's store run while it computes; they use
        # the other buffer of each SRAM (the golden model refuses an overlap: DMA_HAZARD).
        pipelined = plan.buffers >= 2
        tiles = plan.tiles
        slots = [None] * len(tiles)
        records = []
        stored = 0                  # DMA commands of the previous tile's store
        # The operation before's last store (or a data movement's, passed over) may run on under
        # the first MAC, as for ELTWISE, when it reads other output bytes than that tile writes and
        # nothing of the tile's own was pushed after it (all its loads came early or are
        # resident): the first tile then takes an output buffer apart from the store's bytes (a
        # tile writing into its cascade region: when its part is apart from them).
        span = prefetched.store_span if prefetched is not None and pipelined else None
        out_first = 0
        for k, t in enumerate(tiles):
            tile_id = ectx.first_tile_id + k
            start = len(w.commands)
            w.emit(Opcode.MARK, 0, tile_id)
            g = self.geometry(cfg, t.th, t.tw, t.tc)
            if slots[k] is None:
                slots[k] = load(t)
            in_slot, w_slot, pushed = slots[k]
            cout = self.cascade_out
            # a tile of a cascade producer writes its part of the region
            region_out = None if cout is None else cout.addr + t.y0 * cout.row + t.x0 * cout.pix + t.c0 * esize
            if k == 0 and span is not None and pushed == 0:
                if cout is not None:            # (a depthwise consumer of a cascade, chaining on)
                    if not overlaps(span, (region_out, region_out + (t.th - 1) * cout.row + (t.tw - 1) * cout.pix
                                           + t.tc * esize)):
                        stored = 1
                else:
                    size = t.th * t.tw * g.out_pix_bytes
                    apart = [b for b, a in enumerate(bufs[Sram.OUTPUT]) if not overlaps(span, (a, a + size))]
                    if apart:
                        out_first, stored = apart[0], 1
            in_addr = bufs[Sram.INPUT][in_slot]
            in_regs = {Reg.IFM_SRAM: int(Sram.INPUT), Reg.IFM_ADDR: in_addr, Reg.IFM_ROW_STRIDE: g.in_w * pix,
                       Reg.IFM_PIX_STRIDE: pix}
            if (cin := self.cascade_in) is not None:
                # the box's first pixel in the region (a depthwise box's padding lies outside it,
                # read as IFM_ZP), and a depthwise tile's channels
                iy0, ix0 = self._box_origin(t)
                in_regs = {Reg.IFM_SRAM: int(Sram.OUTPUT),
                           Reg.IFM_ADDR: cin.addr + iy0 * cin.row + ix0 * cin.pix + (t.c0 * isize if self.depthwise else 0),
                           Reg.IFM_ROW_STRIDE: cin.row, Reg.IFM_PIX_STRIDE: cin.pix}
            out_addr = bufs[Sram.OUTPUT][(k + out_first) % plan.buffers]
            w_addr, p_index = self.weight_home(ectx, w_slot, t)
            out_row, out_pix = t.tw * g.out_pix_bytes, g.out_pix_bytes
            if cout is not None:
                out_addr, out_row, out_pix = region_out, cout.row, cout.pix
            if self.reads_padding(cfg):
                in_regs.update(self._box_registers(cfg, t, g))
            regs = {
                **in_regs,
                Reg.IFM_CBLOCKS: 1 if self.depthwise else cb, Reg.IFM_ZP: self.input_zp,
                Reg.IFM_DTYPE: int(self.ifm_dtype),
                Reg.WGT_ADDR: w_addr, Reg.WGT_ZP: self.weight_zp,
                Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sh, Reg.STRIDE_W: sw,
                Reg.DILATION_H: dh, Reg.DILATION_W: dw,
                Reg.OFM_ADDR: out_addr, Reg.OFM_ROW_STRIDE: out_row,
                Reg.OFM_PIX_STRIDE: out_pix, Reg.OFM_H: t.th, Reg.OFM_W: t.tw, Reg.OFM_C: t.tc,
                Reg.PARAM_ADDR: p_index, **stage_regs,
            }
            for reg, value in regs.items():
                w.set(reg, value)
            slack = 0
            mode = self.mac_mode(cfg, t.tc)
            ext_out = ofm.addr + (((t.n * OH + t.y0) * OW + t.x0) * OC + t.c0) * esize
            # a one-pixel tile's result is one dense run: the next ELTWISE may read it on chip
            result = (ext_out, t.tc * esize, out_addr) if t.tw == t.th == 1 and cout is None else None
            stores = cout is None or cout.store
            store = dict(ext=ext_out, sram_addr=out_addr, len0=t.tc * esize, len1=t.tw, len2=t.th,
                         ext_s1=OC * esize, ext_s2=OW * OC * esize, sram_s1=out_pix, sram_s2=out_row)
            # the external bytes still to be written when the next operation's loads are issued
            # (before this last MAC): this tile's store; the others' were pushed before
            pending = ([pattern_span(ext_out, store["len0"], t.tw, t.th, store["ext_s1"], store["ext_s2"])]
                       if stores else [])
            if pipelined:
                ahead = 0
                if k + 1 < len(tiles):
                    slots[k + 1] = load(tiles[k + 1])
                    ahead = slots[k + 1][2]
                elif next_loads is not None:
                    ahead = next_loads(Opcode.MAC, mode, result, pending)
                slack = stored + ahead
            elif k + 1 == len(tiles) and next_loads is not None:
                slack = next_loads(Opcode.MAC, mode, result, pending)
            mac_index = w.emit(Opcode.MAC, mode, slack)
            before = w.dma_count
            if stores:
                w.dma(Opcode.DMA_STORE, Sram.OUTPUT, **store)
            stored = w.dma_count - before
            records.append({"id": tile_id, "layer": ectx.layer, "unit": "MAC", "commands": [start, len(w.commands)],
                            "unit_command": mac_index, "n": t.n, "y0": t.y0, "th": t.th, "x0": t.x0,
                            "tw": t.tw, "c0": t.c0, "tc": t.tc, "output": self.ofm})
        return records


# A tile's loads go into the DMA queue (4 descriptors) before the MAC command that overlaps them;
# a push that finds the queue full holds the command processor, and so the MAC, until a slot
# frees. So a border needing three FILLs takes one FILL of the whole box instead, unless the whole
# box costs the DMA engine more than BORDER_FILL_SAVING beats over the three. Swept on the timing
# model over every network and configuration (against always the whole box): 0 gave blazeface on
# large -5.9% and cnn32 -7.1%, but blazeface on tiny +0.6% and on default +0.2%, resnet_pool
# +0.2%; 256 still +0.2% on default; from 384 to 512 blazeface on large -5.1% (its 64x64 and
# 32x32 depthwise boxes, 4,491 FILL beats each for a border of about 400) and nothing else moves
# by more than 23 cycles; 1024 -3.4%.
BORDER_FILL_SAVING = 512

# The box registers of a tile whose box is all image, or which the MAC does not pad itself.
NO_PADDING = {Reg.IFM_PAD_TOP: 0, Reg.IFM_PAD_LEFT: 0, Reg.IFM_IN_H: 0, Reg.IFM_IN_W: 0}


def _fill_border(w: CommandWriter, cfg: NpuConfig, in_addr: int, g: ConvGeometry, pix: int, y0: int, y1: int,
                 x0: int, x1: int, value: int) -> None:
    """FILL the input box's pixels outside rows [y0, y1) x columns [x0, x1) (box coordinates: the
    part the DMA_LOAD writes) with the input zero point: from the box's start to the first real
    pixel (the rows above and the left of row y0), one pattern of runs from the right of each real
    row to the left of the next (they are contiguous in the box), and from the right of the last
    real row to the box's end; or the whole box when the border needs all three and they save
    the DMA engine at most BORDER_FILL_SAVING beats. The lanes of a pixel past its real channels need no fill: their
    weights are the weight zero point (docs/isa.md), so they add nothing whatever the SRAM holds;
    a DEPTHWISE row reads only its own channel."""
    row = g.in_w * pix
    first, last = y0 * row + x0 * pix, (y1 - 1) * row + x1 * pix
    gap = (g.in_w - x1 + x0) * pix if y1 - y0 > 1 else 0
    fills = [(0, first, 1)] if first > 0 else []
    if gap > 0:
        fills.append((y0 * row + x1 * pix, gap, y1 - y0 - 1))
    if last < g.in_h * row:
        fills.append((last, g.in_h * row - last, 1))
    if len(fills) > 2:
        def beats(addr, length, runs):
            return dma_beats(cfg, Sram.INPUT, sram_addr=in_addr + addr, len0=length, len1=runs, len2=1,
                             sram_stride1=row, fill=True)
        whole = (0, g.in_h * row, 1)
        if beats(*whole) - sum(beats(*f) for f in fills) <= BORDER_FILL_SAVING:
            fills = [whole]
    for addr, length, runs in fills:
        w.dma(Opcode.FILL, Sram.INPUT, sram_addr=in_addr + addr, len0=length, len1=runs, sram_s1=row, value=value)


def _unfold_columns(ix0: int, columns: int, run: int, step: int, pl: int, width: int):
    """The unfolded box's columns j < `columns` (unfolded column ix0 + j holds input pixels
    (ix0 + j)*step - pl .. + run-1) as (first j, last j + 1) of those whose pixels all lie inside
    the row, and the others that reach some: (j, first pixel, last pixel + 1) clipped to the row."""
    inside, edges = [], []
    for j in range(columns):
        sx = (ix0 + j) * step - pl
        lo, hi = max(0, sx), min(width, sx + run)
        if lo == sx and hi == sx + run:
            inside.append(j)
        elif hi > lo:
            edges.append((j, lo, hi))
    span = (inside[0], inside[-1] + 1) if inside else None
    assert span is None or span[1] - span[0] == len(inside), "inside columns are contiguous"
    return span, edges


def param_records(bias: np.ndarray, stage: StageSpec, c0: int, tc: int) -> bytes:
    """Output-stage records of channels [c0, c0+tc): the bias, and the stage's multiplier and shift
    (one per channel, or the per-tensor pair repeated)."""
    if stage.rescale:
        mult = np.broadcast_to(stage.multiplier.reshape(-1), bias.shape)[c0:c0 + tc]
        shift = np.broadcast_to(stage.shift.reshape(-1), bias.shape)[c0:c0 + tc]
    else:
        mult, shift = np.zeros(tc, np.int64), np.zeros(tc, np.int64)
    return encode_param_records(bias[c0:c0 + tc], mult, shift)


def _pipeline_clocks(tiles: list[tuple[int, int, int]]) -> int:
    """Clocks of software-pipelined tiles (mac, its loads, its store) as NpuConv.estimate_cycles
    sees them: the first tile's loads, then each tile's MAC beside the next tile's loads and the
    store of the tile before it, then the last store."""
    total = tiles[0][1]
    for i, (mac, _, _) in enumerate(tiles):
        nxt = tiles[i + 1][1] if i + 1 < len(tiles) else 0
        prev = tiles[i - 1][2] if i else 0
        total += max(mac, nxt + prev)
    return total + tiles[-1][2]


def split_block(tiles: list[ConvTile], block: tuple[int, int, int]) -> tuple[list, list, list]:
    """The tiles of spatial block `block` (n, y0, x0) split in two by rows: (every channel block of
    the upper half, those of the lower half, the other tiles in their order)."""
    head = [t for t in tiles if (t.n, t.y0, t.x0) == block]
    rest = [t for t in tiles if (t.n, t.y0, t.x0) != block]
    upper = [ConvTile(t.n, t.y0, t.th // 2, t.x0, t.tw, t.c0, t.tc) for t in head]
    lower = [ConvTile(t.n, t.y0 + t.th // 2, t.th - t.th // 2, t.x0, t.tw, t.c0, t.tc) for t in head]
    return upper, lower, rest


def _ramp_first(tiles: list[ConvTile], first: tuple[int, int, int]) -> list[ConvTile]:
    """`tiles` (spatial-outer order) with spatial block `first` split in two by rows, first."""
    upper, lower, rest = split_block(tiles, first)
    return upper + lower + rest


def _real_range(start: int, length: int, size: int, step: int) -> tuple[int, int]:
    """Image rows r (0 <= r < size) whose upsampled position r*step lies in [start, start+length)."""
    first = max(0, ceil_div(start, step))
    last = min(size, ceil_div(start + length, step))
    return first, max(first, last)


# How much faster (estimate_cycles) a tile shape must look than the least-traffic one to be taken.
# 0.93, measured over every network and configuration on the timing model against 0.9 (with the
# cascades and pipelined POOLs of issue 13): no network slower; blazeface 1.2% / 1.8% / 0.6%
# fewer cycles on tiny / default / large, resnet_pool tiny 2.0%, cnn32 and shared/cnn32 large
# 1.7% (their 1x1 layers back to one tile). 0.94-1.0 cost gru on default 1.9% (0.96 and up, mlp
# on default 0.7% too); 0.92 gained almost nothing. Measured again once DEPTHWISE windows filled
# two words a clock (cheaper narrow tiles): 0.94 is nothing slower than 0.93, gru default -2.7%,
# blazeface default -0.4% (its 32x32 depthwise layer_236 back to 32x8-row tiles: 47.6% -> 50%+ of
# the MACs); 0.95-0.96 faster still on blazeface default (-0.9%) but its 1x1 layer_238 falls below
# 80% (80.1% -> 78.5%), and 0.96 costs mlp default 0.7%.
PIPELINE_GAIN = 0.94
# The first tile of an operation waits for its whole input box (the operation before's result
# comes from external memory); its later tiles' loads run under the tile before. When that wait is
# long, the first tile is split in two by rows (_ramp_first), so that the MACs start after half of
# it, when the estimate says it pays (NpuConv.ramp_pays): by RAMP_MARGIN of the clocks of the
# layer's first blocks. Swept over every network and configuration: at 0.02 nothing is slower
# (blazeface default -0.21%, its layer_238 79.5% -> 81.0% MAC utilisation; demo_conv large -1.5%);
# at 0 resnet_pool default is 0.09% slower; at 0.05 blazeface default gains only half as much.
# Without the estimate (every first box of 1,024 load clocks or more split) a 48x48, 32->24
# channel 1x1 convolution on default was 0.5% slower: its lower half's tiles could not cover
# the next block's load.
RAMP_MARGIN = 0.02
# Command-processor clocks a tile costs beside its MAC (its SETs, DMA commands, MARK and MAC, two
# clocks each, some of them while the DMA engine is busy). Measured: 71 command clocks a tile on
# demo_conv (large), 51 on blazeface's first depthwise layer (default); 40 chosen by the cycles
# the networks take (demo_conv on large 16,003 -> 15,711; cnn32 and resnet_pool on default 1% and
# 5% fewer; 60 and 80 cost lstm, gru and cnn32 up to 7%).
TILE_COMMAND_CLOCKS = 40


def _pairs_last_block(cols: int, channels: int, out_w: int) -> bool:
    """Whether int8 input channels leave their last block of `cols` lanes at most half full, so
    that CONV2D_LANE_PAIRS can take its steps two pixels a beat (an even output width: every tile's
    width even)."""
    return channels - (ceil_div(channels, cols) - 1) * cols <= cols // 2 and out_w % 2 == 0


def _extents(total: int, even: bool = False) -> list[int]:
    """Tile extents that give distinct tile counts (1 tile, 2 tiles, ...); `even`: even extents
    only, for an even `total` (every tile then even, the last included)."""
    if even:
        return sorted({round_up(ceil_div(total, k), 2) for k in range(1, total + 1)}, reverse=True)
    return sorted({ceil_div(total, k) for k in range(1, total + 1)}, reverse=True)


# --------------------------------------------------------------------------------------------
# Lowering

def mac_output_stage(block: Block, op: Operator, producers: dict, consumers: dict, channels: int,
                     value_dtype: DType) -> tuple[StageSpec, list[Operator], str]:
    """The output stage after a MAC op's result: RESCALE (per channel on the last axis), CLAMP and
    TABLE, each taken when it is the sole reader of the previous result (compiler/npu/stage.py
    states the exactness rules), also across RESHAPEs, which change no bytes. Returns the stage,
    the ops it absorbs (the MAC op first) and the name of the final result."""
    stage = StageSpec(value_dtype=value_dtype)
    replaced = [op]
    name = op.outputs[0]
    while True:
        before = len(stage.ops)
        name = extend_stage(block, producers, consumers, stage, name, channels=channels,
                            allow_rescale=not stage.rescale)
        replaced.extend(stage.ops[before:])
        nxt = only_consumer(block, consumers, name)
        if nxt is None or nxt.op != "RESHAPE" or (stage.rescale and stage.output_unsigned):
            return stage, replaced, name
        follow = only_consumer(block, consumers, nxt.outputs[0])
        if follow is None or follow.op not in ("RESCALE", "CLAMP", "TABLE"):
            return stage, replaced, name
        replaced.append(nxt)
        name = nxt.outputs[0]


def match(block: Block, op: Operator, producers: dict, consumers: dict):
    """(NpuConv, replaced ops) for a CONV2D or DEPTHWISE_CONV2D chain; a reason string when one
    cannot run on the NPU; None for other ops."""
    if op.op not in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"):
        return None
    if len(op.inputs) != 5:
        return f"{op.op} with an unexpected operand count"
    x, w, b, izp_name, wzp_name = op.inputs
    tx, tw, tout = block.tensor(x), block.tensor(w), block.tensor(op.outputs[0])
    if tx.dtype not in (DType.INT8, DType.INT16) or tw.dtype != DType.INT8:
        return f"{tx.dtype.name} x {tw.dtype.name} convolution: the MAC array runs int8 or int16 x int8"
    weights, bias = const_value(block, producers, w), const_value(block, producers, b)
    izp, wzp = scalar(const_value(block, producers, izp_name)), scalar(const_value(block, producers, wzp_name))
    if weights is None or bias is None or izp is None or wzp is None:
        return "weights, bias or zero points are not constants"
    if tx.rank != 4:
        return f"input of rank {tx.rank}"
    depthwise = op.op == "DEPTHWISE_CONV2D"
    if depthwise:
        kh, kw, c, mult = weights.shape
        if mult != 1:
            return f"depthwise channel multiplier {mult}: the MAC array's depthwise mapping takes 1"
        weights = np.ascontiguousarray(weights.reshape(kh, kw, c).transpose(2, 0, 1))[..., None]
    stride = tuple(int(v) for v in op.attrs.get("stride", (1, 1)))
    pad = tuple(int(v) for v in op.attrs.get("pad", (0, 0, 0, 0)))
    dilation = tuple(int(v) for v in op.attrs.get("dilation", (1, 1)))
    upsample = (1, 1)
    if op.op == "TRANSPOSE_CONV2D":
        # out[oy] gathers in[iy] * w[ky] where oy = iy*stride + out_pad_top + ky: a stride-1
        # convolution of the upsampled input with the flipped kernel and padding KH-1+out_pad.
        kh, kw = weights.shape[1], weights.shape[2]
        opt, opb, opl, opr = (int(v) for v in op.attrs.get("out_pad", (0, 0, 0, 0)))
        weights = np.ascontiguousarray(weights[:, ::-1, ::-1, :])
        upsample, stride, dilation = stride, (1, 1), (1, 1)
        pad = (kh - 1 + opt, kh - 1 + opb, kw - 1 + opl, kw - 1 + opr)
    oc = tout.shape[3]
    bias = np.broadcast_to(bias.astype(np.int64).reshape(-1), (oc,)).copy()
    acc = DType.INT32 if tx.dtype == DType.INT8 else DType.INT48
    stage, replaced, out_name = mac_output_stage(block, op, producers, consumers, oc, acc)
    conv = NpuConv(
        ifm=x, ofm=out_name, weights=weights.astype(np.int8), bias=bias, input_zp=izp, weight_zp=wzp,
        stride=stride, pad=pad, dilation=dilation, upsample=upsample,
        in_shape=tuple(tx.shape), out_shape=tuple(tout.shape), stage=stage,
        sources=[f"{o.op}->{o.outputs[0]}" for o in replaced], depthwise=depthwise, ifm_dtype=tx.dtype)
    return conv, replaced
