"""The MAC array and its output stage: what one MAC command computes, bit for bit.

Operands (see docs/isa.md for the layouts):
- input SRAM: the tile's input pixels, pixel (y, x) channel block b at word
  IFM_ADDR/L + y*IFM_ROW_STRIDE/L + x*IFM_PIX_STRIDE/L + b, each word L int8 channels;
- weight SRAM: blocks of rows x L int8 weights in the order (output-channel block, ky, kx, b),
  row r of a block is output channel ocb*rows + r;
- parameter SRAM: one 11-byte record per output channel (bias int48, multiplier int32, shift int8);
- output SRAM: element (oy, ox, c) at byte OFM_ADDR + oy*OFM_ROW_STRIDE + ox*OFM_PIX_STRIDE + c*size.

Arithmetic, per output element:
    acc    = sum over ky, kx, ic of (x - IFM_ZP) * (w - WGT_ZP)          (int48 accumulator lanes)
    value  = wrap32(wrap32(acc) + bias)                                   (int8 inputs: int32 acc_t)
    RESCALE: out = clamp(rescale(value; multiplier, shift, OFM_ZP, RESCALE_DTYPE), CLAMP_MIN, CLAMP_MAX)
    else:    out = value (stored as int32)
using the project's numeric primitives with require=False: the hardware computes the same
arithmetic whether or not the TOSA REQUIREs hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_model.errors import GoldenModelError
from firmware_model.isa import LutMode, MacMode, OutMode, Reg, Sram, Status
from firmware_model.memories import Memories
from firmware_model.npu_config import PARAM_RECORD_BYTES, NpuConfig
from firmware_model.perf import mac_command_cycles
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType, wrap

OUTPUT_ELEMENT_BYTES = {DType.INT8: 1, DType.INT16: 2, DType.INT32: 4}


@dataclass
class MacRegion:
    """Where a MAC command read and wrote: [start, stop) byte ranges per SRAM."""
    input: tuple[int, int]
    weight: tuple[int, int]
    param: tuple[int, int]
    output: tuple[int, int]


@dataclass
class MacResult:
    cycles: int
    macs: int                 # multiply-accumulates the array performed (padding lanes included)
    region: MacRegion
    out_offsets: np.ndarray   # byte offset (in the output SRAM) of each element written
    out_shape: tuple[int, int, int]
    out_values: np.ndarray    # the values written, shape (OH, OW, OC), int64
    out_bytes: int            # bytes written to the output SRAM


def rescale_operands(value, multiplier, scale32: bool) -> tuple[np.ndarray, np.ndarray]:
    """The (value, multiplier) the rescale datapath multiplies (hw/rescale_unit.py): an int32 value
    by a 31-bit multiplier for apply_scale_32, an int48 value by a 15-bit one for apply_scale_16.
    Equal to the inputs whenever TOSA's REQUIREs (multiplier >= 0) and ERROR_IFs hold."""
    v, m = np.asarray(value, dtype=np.int64), np.asarray(multiplier, dtype=np.int64)
    if scale32:
        return wrap(v, 32), m & 0x7FFFFFFF
    return wrap(v, 48), m & 0x7FFF


def _fail(status: Status, message: str):
    raise GoldenModelError(f"MAC: {message}", status)


def decode_params(cfg: NpuConfig, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel (bias, multiplier, shift) from parameter records (uint8, n x 11)."""
    rec = words.reshape(-1, PARAM_RECORD_BYTES)
    b = rec[:, 0:6].astype(np.int64)
    bias = sum(b[:, i] << (8 * i) for i in range(6))
    bias = wrap(bias, 48)
    multiplier = rec[:, 6:10].copy().view("<i4").reshape(-1).astype(np.int64)
    shift = rec[:, 10].astype(np.int64)
    return bias, multiplier, shift


def encode_params(bias, multiplier, shift) -> bytes:
    """Parameter records for output channels: bias int48, multiplier int32, shift int8 (LE)."""
    bias = np.asarray(bias, dtype=np.int64)
    n = len(bias)
    rec = np.zeros((n, PARAM_RECORD_BYTES), dtype=np.uint8)
    bu = bias.astype(np.uint64)
    for i in range(6):
        rec[:, i] = ((bu >> np.uint64(8 * i)) & np.uint64(0xFF)).astype(np.uint8)
    rec[:, 6:10] = np.asarray(multiplier, dtype="<i4").reshape(n, 1).view(np.uint8)
    rec[:, 10] = np.asarray(shift, dtype=np.int64).astype(np.int8).view(np.uint8)
    return rec.tobytes()


def execute_mac(cfg: NpuConfig, mem: Memories, regs: dict[int, int], mode: int) -> MacResult:
    from firmware_model.isa import reg_value

    R, L = cfg.mac_rows, cfg.mac_cols
    g = lambda reg: reg_value(reg, regs.get(reg, 0))  # noqa: E731

    if mode not in (MacMode.CONV2D, MacMode.MATMUL):
        _fail(Status.BAD_MODE, f"mode {mode} is not implemented")
    ifm_dtype, ofm_dtype = g(Reg.IFM_DTYPE), g(Reg.OFM_DTYPE)
    out_mode = OutMode(g(Reg.OUT_MODE) & 0xF)
    rescale_on = OutMode.RESCALE in out_mode
    if ifm_dtype != DType.INT8:
        _fail(Status.BAD_MODE, f"input type {ifm_dtype} is not implemented (int8 only)")
    if g(Reg.LUT_MODE) != LutMode.OFF:
        _fail(Status.BAD_MODE, "a fused table lookup is not implemented in the MAC output stage")
    if ofm_dtype not in OUTPUT_ELEMENT_BYTES or (not rescale_on and ofm_dtype != DType.INT32):
        _fail(Status.BAD_MODE, f"output type {ofm_dtype} with OUT_MODE {int(out_mode)} is not implemented")

    oh, ow, oc = g(Reg.OFM_H), g(Reg.OFM_W), g(Reg.OFM_C)
    kh, kw, cb = g(Reg.KERNEL_H), g(Reg.KERNEL_W), g(Reg.IFM_CBLOCKS)
    if oh * ow > cfg.acc_depth or oc == 0:
        _fail(Status.ADDRESS_RANGE, f"{oh}x{ow} output pixels exceed the {cfg.acc_depth} accumulators "
                                    f"or no output channels")
    for reg in (Reg.IFM_ADDR, Reg.IFM_ROW_STRIDE, Reg.IFM_PIX_STRIDE, Reg.WGT_ADDR):
        if g(reg) % L:
            _fail(Status.ADDRESS_RANGE, f"{reg.name} = {g(reg)} is not a multiple of the {L}-byte word")
    n_ocb = -(-oc // R)
    esize = OUTPUT_ELEMENT_BYTES[DType(ofm_dtype)]

    # Input vectors: word index of (oy, ox, ky, kx, b).
    word0 = g(Reg.IFM_ADDR) // L
    row_w, pix_w = g(Reg.IFM_ROW_STRIDE) // L, g(Reg.IFM_PIX_STRIDE) // L
    sh, sw, dh, dw = g(Reg.STRIDE_H), g(Reg.STRIDE_W), g(Reg.DILATION_H), g(Reg.DILATION_W)
    oy = np.arange(oh).reshape(-1, 1, 1, 1, 1)
    ox = np.arange(ow).reshape(1, -1, 1, 1, 1)
    ky = np.arange(kh).reshape(1, 1, -1, 1, 1)
    kx = np.arange(kw).reshape(1, 1, 1, -1, 1)
    b = np.arange(cb).reshape(1, 1, 1, 1, -1)
    words = word0 + (oy * sh + ky * dh) * row_w + (ox * sw + kx * dw) * pix_w + b
    in_bytes = mem.sram[Sram.INPUT]
    lo, hi = int(words.min()), int(words.max()) + 1
    mem.check_range(Sram.INPUT, lo * L, hi * L, "MAC input")
    x = in_bytes.view(np.int8).reshape(-1, L)[words].astype(np.int64)          # (oh, ow, kh, kw, cb, L)
    x = (x - g(Reg.IFM_ZP)).reshape(oh * ow, kh * kw * cb * L)

    wword0 = g(Reg.WGT_ADDR) // L
    n_wwords = n_ocb * kh * kw * cb * R
    mem.check_range(Sram.WEIGHT, wword0 * L, (wword0 + n_wwords) * L, "MAC weights")
    w = mem.sram[Sram.WEIGHT].view(np.int8).reshape(-1, L)[wword0:wword0 + n_wwords].astype(np.int64)
    w = w.reshape(n_ocb, kh * kw * cb, R, L).transpose(0, 2, 1, 3).reshape(n_ocb * R, kh * kw * cb * L)
    w = w - g(Reg.WGT_ZP)

    # Products are exact; the accumulator lanes hold 48 bits.
    acc = wrap(x @ w.T, 48)[:, :oc]                                            # (P, oc)

    p0 = g(Reg.PARAM_ADDR)
    mem.check_range(Sram.PARAM, p0 * PARAM_RECORD_BYTES, (p0 + oc) * PARAM_RECORD_BYTES, "MAC parameters")
    bias, multiplier, shift = decode_params(
        cfg, mem.sram[Sram.PARAM][p0 * PARAM_RECORD_BYTES:(p0 + oc) * PARAM_RECORD_BYTES])
    value = wrap(wrap(acc, 32) + wrap(bias, 32), 32)
    if rescale_on:
        scale32 = OutMode.SCALE32 in out_mode
        value, multiplier = rescale_operands(value, multiplier, scale32)
        out = numerics.rescale_values(
            value, multiplier=multiplier, shift=shift & 63, input_zp=0, output_zp=g(Reg.OFM_ZP),
            out_dtype=DType(g(Reg.RESCALE_DTYPE)), scale32=scale32,
            double_round=OutMode.DOUBLE_ROUND in out_mode,
            output_unsigned=OutMode.UNSIGNED_OUT in out_mode, channel_axis=1, require=False)
        out = numerics.apply_clip_s(out, g(Reg.CLAMP_MIN), g(Reg.CLAMP_MAX))
    else:
        out = value

    # Scatter the elements into the output SRAM, little-endian.
    base = (g(Reg.OFM_ADDR) + np.arange(oh).reshape(-1, 1, 1) * g(Reg.OFM_ROW_STRIDE)
            + np.arange(ow).reshape(1, -1, 1) * g(Reg.OFM_PIX_STRIDE)
            + np.arange(oc).reshape(1, 1, -1) * esize)
    offsets = base.reshape(-1)
    mem.check_range(Sram.OUTPUT, int(offsets.min()), int(offsets.max()) + esize, "MAC output")
    raw = out.reshape(-1).astype(f"<i{esize}").view(np.uint8).reshape(-1, esize)
    dst = mem.sram[Sram.OUTPUT]
    for i in range(esize):
        dst[offsets + i] = raw[:, i]

    pixels = oh * ow
    return MacResult(
        cycles=mac_command_cycles(cfg, ofm_h=oh, ofm_w=ow, ofm_c=oc, kernel_h=kh, kernel_w=kw, ifm_cblocks=cb),
        macs=n_ocb * kh * kw * cb * pixels * R * L,
        region=MacRegion(input=(lo * L, hi * L), weight=(wword0 * L, (wword0 + n_wwords) * L),
                         param=(p0 * PARAM_RECORD_BYTES, (p0 + oc) * PARAM_RECORD_BYTES),
                         output=(int(offsets.min()), int(offsets.max()) + esize)),
        out_offsets=offsets, out_shape=(oh, ow, oc), out_values=out.reshape(oh, ow, oc),
        out_bytes=len(offsets) * esize,
    )
