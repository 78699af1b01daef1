"""Pass 4 — tiling.

Reads: NPU operations in ctx.graph, ctx.cfg.
Writes: op.annotations["tiles"] (a list of ConvTile) and op.annotations["tile_order"] on each
NPU_CONV2D.

A convolution tile is a box of the output (rows x columns x output channels of one batch image)
with the input box it needs (halo included). A tile must fit: its pixels in the accumulators,
its input box in the input SRAM, its weight blocks in the weight SRAM, its per-channel records in
the parameter SRAM and its output box in the output SRAM — in half of each SRAM when it can, so
the next tile's transfers can overlap (double buffering). Among the shapes that fit, the planner
picks the one that moves the fewest bytes between external memory and the SRAMs, trying both loop
orders (input reused across output-channel slices, or weights reused across spatial tiles).
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import CompileError
from compiler.npu_ops import NPU_CONV2D, NpuConv
from firmware_model.npu_config import PARAM_RECORD_BYTES, NpuConfig



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


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


def geometry(conv: NpuConv, cfg: NpuConfig, th: int, tw: int, tc: int) -> ConvGeometry:
    L, R = cfg.mac_cols, cfg.mac_rows
    kh, kw = conv.kernel
    sh, sw = conv.stride
    dh, dw = conv.dilation
    cb = ceil_div(conv.in_channels, L)
    in_h = (th - 1) * sh + (kh - 1) * dh + 1
    in_w = (tw - 1) * sw + (kw - 1) * dw + 1
    esize = conv.out_dtype.size_bytes
    opix = round_up(tc * esize, L)
    return ConvGeometry(in_h, in_w, in_h * in_w * cb * L, ceil_div(tc, R) * kh * kw * cb * R * L, tc,
                        opix, th * tw * opix, th * tw)


def fits(g: ConvGeometry, cfg: NpuConfig, share: int) -> bool:
    """Does a tile fit when each SRAM is divided into `share` buffers?"""
    return (g.pixels <= cfg.acc_depth
            and g.in_bytes <= cfg.input_sram // share
            and g.weight_bytes <= cfg.weight_sram // share
            and g.params <= cfg.param_records // share
            and g.out_bytes <= cfg.output_sram // share)


def _extents(total: int) -> list[int]:
    """Tile extents that give distinct tile counts (1 tile, 2 tiles, ...)."""
    return sorted({ceil_div(total, k) for k in range(1, total + 1)}, reverse=True)


def traffic(conv: NpuConv, cfg: NpuConfig, th: int, tw: int, tc: int) -> tuple[int, str]:
    """External bytes moved for a tile shape, under the better of the two loop orders."""
    n, oh, ow, oc = conv.out_shape
    _, ih, iw, ic = conv.in_shape
    g = geometry(conv, cfg, th, tw, tc)
    spatial = n * ceil_div(oh, th) * ceil_div(ow, tw)
    slices = ceil_div(oc, tc)
    in_per_tile = g.in_h * g.in_w * ic
    w_total = g.weight_bytes * slices + slices * tc * PARAM_RECORD_BYTES
    out_total = n * oh * ow * oc * conv.out_dtype.size_bytes
    # spatial-outer: the input box stays while every channel slice runs over it
    spatial_outer = spatial * in_per_tile + (w_total if slices == 1 else spatial * w_total) + out_total
    # channels-outer: a slice's weights stay while every spatial tile runs under it
    channels_outer = slices * spatial * in_per_tile + w_total + out_total
    if spatial == 1 or slices == 1 or spatial_outer <= channels_outer:
        return spatial_outer, "spatial-outer"
    return channels_outer, "channels-outer"


def plan_conv(conv: NpuConv, cfg: NpuConfig, where: str) -> tuple[list[ConvTile], str, int]:
    n, oh, ow, oc = conv.out_shape
    R = cfg.mac_rows
    channel_options = sorted({min(oc, R * k) for k in range(1, ceil_div(oc, R) + 1)}, reverse=True)
    best = None
    for share in (2, 1):
        for tc in channel_options:
            for th in _extents(oh):
                for tw in _extents(ow):
                    g = geometry(conv, cfg, th, tw, tc)
                    if not fits(g, cfg, share):
                        continue
                    cost, order = traffic(conv, cfg, th, tw, tc)
                    count = n * ceil_div(oh, th) * ceil_div(ow, tw) * ceil_div(oc, tc)
                    key = (cost, count)
                    if best is None or key < best[0]:
                        best = (key, (th, tw, tc), order)
        if best is not None:
            break
    if best is None:
        g = geometry(conv, cfg, 1, 1, min(oc, R))
        raise CompileError(
            f"{where}: not even a 1x1-pixel tile of {min(oc, R)} channels fits the '{cfg.name}' "
            f"configuration (input box {g.in_bytes} B of {cfg.input_sram}, weights {g.weight_bytes} B of "
            f"{cfg.weight_sram}, output {g.out_bytes} B of {cfg.output_sram})")
    (cost, _), (th, tw, tc), order = best
    share = 2 if fits(geometry(conv, cfg, th, tw, tc), cfg, 2) else 1
    spatial = [(b, y, x) for b in range(n) for y in range(0, oh, th) for x in range(0, ow, tw)]
    channels = list(range(0, oc, tc))
    tiles = []
    if order == "spatial-outer":
        for b, y, x in spatial:
            for c in channels:
                tiles.append(ConvTile(b, y, min(th, oh - y), x, min(tw, ow - x), c, min(tc, oc - c)))
    else:
        for c in channels:
            for b, y, x in spatial:
                tiles.append(ConvTile(b, y, min(th, oh - y), x, min(tw, ow - x), c, min(tc, oc - c)))
    return tiles, order, share


def run(ctx) -> None:
    for i, op in enumerate(ctx.block.operators):
        if op.op == NPU_CONV2D:
            conv: NpuConv = op.attrs["npu"]
            where = f"{ctx.graph.source}: op %{i} ({', '.join(conv.sources)})"
            tiles, order, share = plan_conv(conv, ctx.cfg, where)
            op.annotations["tiles"] = tiles
            op.annotations["tile_order"] = order
            op.annotations["buffers"] = share
