"""MATMUL on the MAC array: C[n] = A[n] x B[n] with both operands in external memory at run time.

A row of A is a "pixel" of C input channels; a column of B is an output channel's weights. The
MAC command is a 1x1 convolution over a column of pixels (OFM_W = 1). B is not a constant, so the
weight blocks are built at run time: per block of rows x cols one DMA_LOAD gathers single bytes
(run length 1) with B's row stride as the lane stride and 1 as the row stride — the DMA does the
transpose. Missing rows and lanes are FILLed with B's zero point first.

Lowering: MATMUL of int8 x int8 with constant zero points [-> RESCALE [-> CLAMP]].
Tiles: (batch, a block of A's rows, a slice of output channels); the slice's weights are loaded
once per batch and slice and stay while A's row blocks pass under them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import TileFitError
from compiler.ir import Block, Operator
from compiler.npu.base import (CommandWriter, EmitContext, NpuOperation, TilePlan, ceil_div, const_value,
                               round_up, scalar)
from compiler.npu.conv import mac_output_stage, param_records
from compiler.npu.stage import StageSpec, place_table, table_fits
from firmware_model.arch.isa import MacMode, Opcode, Reg, Sram
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.tosa_ops.dtypes import DType


@dataclass(frozen=True)
class MatmulTile:
    n: int
    h0: int
    th: int
    c0: int
    tc: int

    def describe(self) -> str:
        return f"n{self.n} rows {self.h0}..{self.h0 + self.th - 1} cols {self.c0}..{self.c0 + self.tc - 1}"


@dataclass
class NpuMatmul(NpuOperation):
    a: str
    b: str
    out: str
    a_shape: tuple[int, int, int]      # N, H, C
    b_shape: tuple[int, int, int]      # N, C, W
    a_zp: int
    b_zp: int
    stage: StageSpec
    sources: list[str] = field(default_factory=list)
    kind = "matmul"
    unit = "MAC"

    @property
    def ifm_names(self) -> list[str]:
        return [self.a, self.b]

    @property
    def ofm_names(self) -> list[str]:
        return [self.out]

    @property
    def out_dtype(self) -> DType:
        return self.stage.out_dtype

    @property
    def macs(self) -> int:
        n, h, c = self.a_shape
        return n * h * c * self.b_shape[2]

    def describe(self) -> str:
        n, h, c = self.a_shape
        text = f"matmul {n}x{h}x{c} by {c}x{self.b_shape[2]}"
        return f"{text}, {self.stage.describe()}" if self.stage.describe() else text

    def requires(self) -> list:
        from compiler.npu import requires
        return requires.matmul(self)

    def sizes(self, cfg: NpuConfig, th: int, tc: int) -> tuple[int, int, int, int]:
        """(input bytes, weight bytes, output bytes, output pixel stride) of a tile shape."""
        L, R = cfg.mac_cols, cfg.mac_rows
        cb = ceil_div(self.a_shape[2], L)
        opix = round_up(tc * self.out_dtype.size_bytes, L)
        return th * cb * L, ceil_div(tc, R) * cb * R * L, th * opix, opix

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        if not table_fits(cfg, self.stage):
            raise TileFitError(f"{where}: the table does not fit the '{cfg.name}' LUT SRAM")
        n, h, _ = self.a_shape
        w = self.b_shape[2]
        R = cfg.mac_rows
        choice = None
        for share in (2, 1):
            for tc in sorted({min(w, R * k) for k in range(1, ceil_div(w, R) + 1)}, reverse=True):
                for th in sorted({ceil_div(h, k) for k in range(1, h + 1)}, reverse=True):
                    ib, wb, ob, _ = self.sizes(cfg, th, tc)
                    if (th <= cfg.acc_depth and ib <= cfg.input_sram // share and wb <= cfg.weight_sram // share
                            and ob <= cfg.output_sram // share and tc <= cfg.param_records // share):
                        choice = (th, tc, share)
                        break
                if choice:
                    break
            if choice:
                break
        if choice is None:
            raise TileFitError(f"{where}: not even one row by {min(w, R)} columns of this MATMUL fits the "
                               f"'{cfg.name}' configuration")
        th, tc, share = choice
        tiles = [MatmulTile(b, r, min(th, h - r), c, min(tc, w - c))
                 for b in range(n) for c in range(0, w, tc) for r in range(0, h, th)]
        return TilePlan(tiles, "weights-outer", share, (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.OUTPUT))

    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        bias = np.zeros(self.b_shape[2], dtype=np.int64)
        blobs = {f"params@{c0}": param_records(bias, self.stage, c0, tc)
                 for c0, tc in sorted({(t.c0, t.tc) for t in plan.tiles})}
        if self.stage.table is not None:
            blobs["lut"] = self.stage.blobs()["lut"]
        return blobs

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext) -> list[dict]:
        cfg = ectx.cfg
        L, R = cfg.mac_cols, cfg.mac_rows
        N, H, C = self.a_shape
        W = self.b_shape[2]
        cb = ceil_div(C, L)
        pix = cb * L
        esize = self.out_dtype.size_bytes
        a, b, out = ectx.placements[self.a], ectx.placements[self.b], ectx.placements[self.out]
        bufs = ectx.buffers
        lut_addr = place_table(w, ectx, self.stage) if self.stage.table is not None else 0
        stage_regs = self.stage.regs(lut_addr=lut_addr)
        records = []
        resident_w = None
        n_w = 0
        w_slot = 0
        for k, t in enumerate(plan.tiles):
            tile_id = ectx.first_tile_id + k
            start = len(w.commands)
            w.emit(Opcode.MARK, 0, tile_id)
            in_addr = bufs[Sram.INPUT][k % plan.buffers]
            if C != pix:
                w.dma(Opcode.FILL, Sram.INPUT, sram_addr=in_addr, len0=t.th * pix, value=self.a_zp & 0xFF)
            w.dma(Opcode.DMA_LOAD, Sram.INPUT, ext=a.addr + (t.n * H + t.h0) * C, sram_addr=in_addr,
                  len0=C, len1=t.th, ext_s1=C, sram_s1=pix)
            if resident_w != (t.n, t.c0):
                w_slot = n_w % plan.buffers
                n_w += 1
                resident_w = (t.n, t.c0)
                w_addr = bufs[Sram.WEIGHT][w_slot]
                n_ocb = ceil_div(t.tc, R)
                if t.tc % R or C % L:
                    w.dma(Opcode.FILL, Sram.WEIGHT, sram_addr=w_addr, len0=n_ocb * cb * R * L,
                          value=self.b_zp & 0xFF)
                for ocb in range(n_ocb):
                    rows = min(R, t.tc - ocb * R)
                    for icb in range(cb):
                        lanes = min(L, C - icb * L)
                        # lane l of row r <- B[n, icb*L + l, c0 + ocb*R + r]
                        w.dma(Opcode.DMA_LOAD, Sram.WEIGHT,
                              ext=b.addr + (t.n * C + icb * L) * W + t.c0 + ocb * R,
                              sram_addr=w_addr + (ocb * cb + icb) * R * L,
                              len0=1, len1=lanes, len2=rows, ext_s1=W, ext_s2=1, sram_s1=1, sram_s2=L)
                w.dma(Opcode.DMA_LOAD, Sram.PARAM, ext=ectx.constants[f"params@{t.c0}"],
                      sram_addr=bufs[Sram.PARAM][w_slot] * PARAM_RECORD_BYTES, len0=t.tc * PARAM_RECORD_BYTES)
            _, _, _, opix = self.sizes(cfg, t.th, t.tc)
            out_addr = bufs[Sram.OUTPUT][k % plan.buffers]
            regs = {
                Reg.IFM_SRAM: int(Sram.INPUT),
                Reg.IFM_ADDR: in_addr, Reg.IFM_ROW_STRIDE: pix, Reg.IFM_PIX_STRIDE: pix, Reg.IFM_CBLOCKS: cb,
                Reg.IFM_ZP: self.a_zp, Reg.IFM_DTYPE: int(DType.INT8),
                Reg.WGT_ADDR: bufs[Sram.WEIGHT][w_slot], Reg.WGT_ZP: self.b_zp,
                Reg.KERNEL_H: 1, Reg.KERNEL_W: 1, Reg.STRIDE_H: 1, Reg.STRIDE_W: 1,
                Reg.DILATION_H: 1, Reg.DILATION_W: 1,
                Reg.OFM_ADDR: out_addr, Reg.OFM_ROW_STRIDE: opix, Reg.OFM_PIX_STRIDE: opix,
                Reg.OFM_H: t.th, Reg.OFM_W: 1, Reg.OFM_C: t.tc,
                Reg.PARAM_ADDR: bufs[Sram.PARAM][w_slot], **stage_regs,
            }
            for reg, value in regs.items():
                w.set(reg, value)
            mac_index = w.emit(Opcode.MAC, MacMode.MATMUL)
            w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=out.addr + ((t.n * H + t.h0) * W + t.c0) * esize,
                  sram_addr=out_addr, len0=t.tc * esize, len1=t.th, ext_s1=W * esize, sram_s1=opix)
            records.append({"id": tile_id, "layer": ectx.layer, "unit": "MAC", "commands": [start, len(w.commands)],
                            "unit_command": mac_index, "n": t.n, "y0": t.h0, "th": t.th, "x0": 0, "tw": 1,
                            "c0": t.c0, "tc": t.tc, "output": self.out})
        return records


def match(block: Block, op: Operator, producers: dict, consumers: dict):
    if op.op != "MATMUL":
        return None
    if len(op.inputs) != 4:
        return "MATMUL with an unexpected operand count"
    a, b, azp_name, bzp_name = op.inputs
    ta, tb = block.tensor(a), block.tensor(b)
    if ta.dtype != DType.INT8 or tb.dtype != DType.INT8:
        return f"{ta.dtype.name} x {tb.dtype.name} MATMUL: the MAC array runs int8 x int8"
    azp, bzp = scalar(const_value(block, producers, azp_name)), scalar(const_value(block, producers, bzp_name))
    if azp is None or bzp is None:
        return "zero points are not constants"
    if ta.rank != 3 or tb.rank != 3:
        return "MATMUL operands must have rank 3"
    stage, replaced, out_name = mac_output_stage(block, op, producers, consumers, tb.shape[2], DType.INT32)
    mm = NpuMatmul(a, b, out_name, tuple(ta.shape), tuple(tb.shape), azp, bzp, stage,
                   sources=[f"{o.op}->{o.outputs[0]}" for o in replaced])
    return mm, replaced
