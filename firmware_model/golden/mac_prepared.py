"""MAC commands with their registers decoded once (issue 16): what the decoded program
(decoded.py) runs for execute_mac, the one prepared form of a MAC command (mac_unit's own
prepare_mac went: it did the same arithmetic less well; execute_mac stays the spec's form).

## DEPTHWISE (prepare_depthwise)

execute_mac runs a DEPTHWISE command as the spec reads (mac_unit.depthwise_sums, then the bias
add and apply_output_stage): on
cnn32's 8x8 tiles ~115 us a command, most of it gathering the window's lanes and channels
(`words[:, :, :, offset][..., chan]`), decoding the weights and the records again and running the
spec's stage. Everything but the data is a function of the registers, so `prepare_depthwise`
makes once:

- the input SRAM byte of each operand x[p, i, l, row] (depthwise_sums' gather: pixel p's
  window word at step i's lane l, mac_unit.depthwise_lanes, channel row mod mac.cols; also for
  DEPTHWISE_PAIRED, DEPTHWISE_TRIPLE, DEPTHWISE_PACKED) as one index array, read
  with one gather; only the lanes inside a pass (the others are multiplied by zero) and the rows
  of the OFM_C channels kept (large's 3x3 tiles: 9 of 48 lanes, 8 of 16 rows);
- the weight matrix (kernel row, lane inside a pass) x row, less WGT_ZP,
  kept with the weight bytes it was made from (a layer's tiles read the same bytes at every
  invocation); the records' operands likewise (mac_unit.record_operands, spread over the tile's
  pixels);
- which wraps a bound proves idle (mac_unit.accumulator_bound over the products a sum holds: accumulate's to 48 bits and finish_accumulator's to 32 bits; with the
  largest |bias| of the records, the wrap of acc + bias);
- the output stage (output_stage.prepare_output_stage) and execute_mac's strided store.

The sums are exact: each product is below 2^16 and a sum holds fewer than 2^30 of them, so float64
adds them exactly in any order.

## CONV2D and MATMUL (prepare_conv)

execute_mac's arithmetic (the input vectors a strided view of the input SRAM, one exact
float64 product), with what it redoes at every command made once: the weight matrix (the lanes
of each weight row, transposed, less WGT_ZP, cut to OFM_C columns) kept with its weight bytes,
the records' operands spread over the tile's (P, oc) values (numpy runs a broadcast (oc,)
operand an inner loop of oc elements at a time), and finish_accumulator's wrap32 of acc + bias
left out where accumulator_bound plus the largest |bias| proves it idle. mlp's one-pixel layers:
~27 -> ~12 us a command.

Equal to execute_mac (tests/firmware_model/golden/test_mac_prepared.py on random DEPTHWISE,
CONV2D and MATMUL tiles, int8 and int16, probe calls included; test_decoded.py on every network).
"""

from __future__ import annotations

import numpy as np

from firmware_model.arch.config import ACC_BITS, NpuConfig
from firmware_model.arch.isa import ELEMENT_BYTES, LANE_PAIR_MODES, OUTPUT_STAGE_REGS, PIXEL_PAIR_MODES, Sram
from firmware_model.arch.registers import Registers
from firmware_model.golden.mac_unit import (accumulate, accumulator_bound, blocks_in_channel_order, box_holds_pixel,
                                           depthwise_lanes, exact_dot,
                                           finish_accumulator, lanes_per_word, pixel_pair_dot, pixel_pair_weights,
                                           record_operands)
from firmware_model.golden.memories import Memories
from firmware_model.golden.output_stage import Scale32Operands, prepare_output_stage
from firmware_model.tosa_ops.dtypes import DType, wrap


# How many byte strings a prepared MAC command keeps `make`'s answers for (_last_bytes).
LAST_BYTES_KEPT = 8


def _last_bytes(make):
    """`make(raw)` kept for the last few bytes it was made from (up to LAST_BYTES_KEPT; `make` is
    a function of the bytes): a layer's tiles read the same weight and record bytes at every
    invocation, and the commands that share a prepared function (the same registers but their
    addresses) read a few different ones in turn (cnn32 on default: two commands' weights and
    records alternating, every lookup a miss when only the last bytes were kept)."""
    kept: dict = {}

    def made(raw: np.ndarray):
        key = raw.tobytes()
        value = kept.get(key)
        if value is None:
            if len(kept) >= LAST_BYTES_KEPT:
                kept.clear()
            value = kept[key] = make(raw)
        return value
    return made


def _spread_records(raw: np.ndarray, ifm_dtype: DType, stage_plan_, P: int, oc: int, bound: int,
                    acc32_wraps: bool) -> tuple:
    """(bias, multiplier, shift, scale32 operands, acc + bias fits int32): record_operands' bias
    and operands spread over the tile's (P, oc) values (a (1, oc) operand makes numpy loop per
    channel). `fits` holds when int8 sums within `bound` plus the largest |bias| stay in int32."""
    bias, multiplier, shift, ops = record_operands(raw, ifm_dtype, stage_plan_)
    spread = lambda a: np.ascontiguousarray(np.broadcast_to(a, (P, oc)))      # noqa: E731
    if ops is not None:
        ops = Scale32Operands(spread(ops.multiplier), spread(ops.shift), spread(ops.round),
                              None if ops.double is None else spread(ops.double))
    fits = (ifm_dtype != DType.INT16 and not acc32_wraps
            and bound + int(np.abs(bias).max(initial=0)) < 1 << 31)
    return spread(bias), multiplier, shift, ops, fits


def prepare_depthwise(cfg: NpuConfig, regs: dict[int, int], mode: int, plan):
    """execute_mac(cfg, mem, regs, mode, probe, plan) for a window-mode (DEPTHWISE, _PAIRED, _TRIPLE, _PACKED) command,
    as a function run(mem, probe) (module docstring). The command is int8 (the "depthwise
    operands" rule mac_plan checked)."""
    R, L = cfg.mac_rows, cfg.mac_cols
    r = Registers(regs)
    oh, ow, oc = plan.out_shape
    P = oh * ow
    krow, offset, inside = depthwise_lanes(cfg, mode, r.kernel_h, r.kernel_w, r.dilation_w)
    steps = len(offset)
    # only the lanes inside a pass (the others are multiplied by zero) and the rows of the OFM_C
    # channels kept (the others are cut from the accumulators): (step, lane) pairs q
    q_step, q_lane = np.nonzero(inside)
    K = len(q_step)
    row_b, pix_b = (r.ifm_row_stride // L) * L, (r.ifm_pix_stride // L) * L
    ar = lambda n: np.arange(n, dtype=np.intp)      # noqa: E731
    # depthwise_sums' x[p, i, l, row] = words[oy, ox, krow[i, l], offset[i, l], row % L], words the
    # strided view (oy*SH*row + ox*SW*pix + ky*DH*row + s*pix + c bytes from the first word),
    # laid out (row, p, k) for one product per row
    index = ((r.ifm_addr // L) * L
             + (ar(oc) % L)[:, None, None, None]
             + (ar(oh) * (r.stride_h * row_b))[None, :, None, None]
             + (ar(ow) * (r.stride_w * pix_b))[None, None, :, None]
             + (krow[q_step, q_lane].astype(np.intp) * (r.dilation_h * row_b)
                + offset[q_step, q_lane].astype(np.intp) * pix_b)[None, None, None, :]).reshape(oc, P, K)
    # box_holds_pixel over the same (p, k) pairs: a position without a pixel contributes 0
    real = box_holds_pixel(r, (ar(oh) * r.stride_h)[:, None, None] + (krow[q_step, q_lane] * r.dilation_h)[None, None],
                           (ar(ow) * r.stride_w)[None, :, None] + offset[q_step, q_lane][None, None])
    real = None if real is None else real.reshape(1, P, K).astype(np.float64)
    ifm_zp, wgt_zp = r.ifm_zp, r.wgt_zp
    in_sram = plan.region.input_sram          # IFM_SRAM: the input SRAM, or the output SRAM
    wa, wb = plan.region.weight
    pa, pb = plan.region.param
    bound = accumulator_bound(K, DType.INT8, ifm_zp, wgt_zp)
    acc_wraps = bound >= 1 << (ACC_BITS - 1)        # else accumulate(0, sums) = sums
    acc32_wraps = bound >= 1 << 31                  # else wrap32(acc) = acc
    stage_plan_ = plan.stage
    stage = None if stage_plan_ is None else prepare_output_stage(
        {int(k): regs.get(int(k), 0) for k in OUTPUT_STAGE_REGS}, stage_plan_, "MAC")
    esize = ELEMENT_BYTES[DType(r.ofm_dtype)]
    out_dtype = f"<i{esize}"
    dst_shape, dst_offset = (oh, ow, oc * esize), plan.region.output[0]
    dst_strides = (r.ofm_row_stride, r.ofm_pix_stride, 1)
    @_last_bytes
    def weights(raw: np.ndarray) -> np.ndarray:
        """(OFM_C, K, 1) float64: row r's weights over the (step, lane) pairs inside a pass, less
        WGT_ZP (depthwise_sums' w at the lanes inside, transposed)."""
        w = raw.view(np.int8).reshape(steps, R, L).transpose(1, 0, 2)[:oc][:, q_step, q_lane]
        w = w.astype(np.float64)                                                    # (oc, K)
        w -= wgt_zp
        return np.ascontiguousarray(w.reshape(oc, K, 1))

    records = _last_bytes(lambda raw: _spread_records(raw, DType.INT8, stage_plan_, P, oc, bound, acc32_wraps))

    def run(mem: Memories, probe=None) -> None:
        x = mem.sram[in_sram].view(np.int8)[index].astype(np.float64)         # (oc, P, K)
        x -= ifm_zp
        if real is not None:
            x *= real
        sums = np.matmul(x, weights(mem.sram[Sram.WEIGHT][wa:wb]))           # (oc, P, 1), exact
        acc = sums.reshape(oc, P).T.astype(np.int64)
        if acc_wraps:
            acc = accumulate(0, acc)
        bias, multiplier, shift, ops, fits = records(mem.sram[Sram.PARAM][pa:pb])
        if acc32_wraps:                                 # finish_accumulator (int8), bias wrapped
            acc = wrap(acc, 32)
        value = acc + bias
        if not fits:
            value = wrap(value, 32)
        out = value if stage is None else stage(mem, value, multiplier, shift, probe, ops, wrapped=True)
        raw = np.ascontiguousarray(out.reshape(oh, ow, oc).astype(out_dtype)).view(np.uint8)
        dst = np.ndarray(dst_shape, np.uint8, buffer=mem.sram[Sram.OUTPUT], offset=dst_offset, strides=dst_strides)
        dst[...] = raw.reshape(dst_shape)
    return run


def prepare_conv(cfg: NpuConfig, regs: dict[int, int], mode: int, plan):
    """execute_mac(cfg, mem, regs, mode, probe, plan) for CONV2D and MATMUL as a function
    run(mem, probe) (module docstring)."""
    R, L = cfg.mac_rows, cfg.mac_cols
    r = Registers(regs)
    ifm_dtype = DType(r.ifm_dtype)
    int16 = ifm_dtype == DType.INT16
    oh, ow, oc = plan.out_shape
    P = oh * ow
    kh, kw, cb = r.kernel_h, r.kernel_w, r.ifm_cblocks
    n_ocb = -(-oc // R)
    row_b, pix_b = (r.ifm_row_stride // L) * L, (r.ifm_pix_stride // L) * L
    lanes = lanes_per_word(L, ifm_dtype)
    esz = L // lanes
    in_shape = (oh, ow, kh, kw, cb * lanes)
    in_dtype = np.dtype(np.int8 if esz == 1 else "<i2")
    in_offset = (r.ifm_addr // L) * L
    in_sram = plan.region.input_sram          # IFM_SRAM: the input SRAM, or the output SRAM
    in_strides = (r.stride_h * row_b, r.stride_w * pix_b, r.dilation_h * row_b, r.dilation_w * pix_b, esz)
    K = kh * kw * cb * lanes
    ifm_zp, wgt_zp = r.ifm_zp, r.wgt_zp
    wa, wb = plan.region.weight
    pa, pb = plan.region.param
    w_shape = (n_ocb, kh * kw * cb, R, L)
    stage_plan_ = plan.stage
    stage = None if stage_plan_ is None else prepare_output_stage(
        {int(k): regs.get(int(k), 0) for k in OUTPUT_STAGE_REGS}, stage_plan_, "MAC")
    bound = accumulator_bound(K, ifm_dtype, ifm_zp, wgt_zp)
    acc_wraps = bound >= 1 << (ACC_BITS - 1)            # else accumulate(0, sums) = sums
    acc32_wraps = bound >= 1 << 31                      # else wrap32(acc) = acc (int8 inputs)
    esize = ELEMENT_BYTES[DType(r.ofm_dtype)]
    out_dtype = f"<i{esize}"
    dst_shape, dst_offset = (oh, ow, oc * esize), plan.region.output[0]
    dst_strides = (r.ofm_row_stride, r.ofm_pix_stride, 1)
    paired = mode in PIXEL_PAIR_MODES

    @_last_bytes
    def weights(raw: np.ndarray):
        """(K, OFM_C) float64: execute_mac's weight matrix less WGT_ZP, its first OFM_C columns;
        with pixel pairs the even and the odd pixels' (mac_unit.pixel_pair_weights)."""
        w = raw.reshape(w_shape)[..., :lanes].view(np.int8).astype(np.float64)
        if mode in LANE_PAIR_MODES:
            w = blocks_in_channel_order(w, kh * kw, cb, axis=1)
        w = w.transpose(1, 3, 0, 2).reshape(K, n_ocb * R) - wgt_zp
        if paired:
            return tuple(np.ascontiguousarray(m[:, :oc]) for m in pixel_pair_weights(w, mode, kh * kw, cb, L, R, n_ocb))
        return np.ascontiguousarray(w[:, :oc])

    def dot(x: np.ndarray, w) -> np.ndarray:
        return pixel_pair_dot(x, *w) if paired else exact_dot(x, w)

    records = _last_bytes(lambda raw: _spread_records(raw, ifm_dtype, stage_plan_, P, oc, bound, acc32_wraps))

    def run(mem: Memories, probe=None) -> None:
        vectors = np.ndarray(in_shape, dtype=in_dtype, buffer=mem.sram[in_sram], offset=in_offset,
                             strides=in_strides)
        x = vectors.astype(np.float64).reshape(P, K)
        x -= ifm_zp
        acc = dot(x, weights(mem.sram[Sram.WEIGHT][wa:wb]))                   # (P, oc)
        if acc_wraps:
            acc = accumulate(0, acc)
        bias, multiplier, shift, ops, fits = records(mem.sram[Sram.PARAM][pa:pb])
        if int16:
            value = finish_accumulator(acc, bias, ifm_dtype)
        else:                                           # finish_accumulator, bias wrapped beforehand
            if acc32_wraps:
                acc = wrap(acc, 32)
            value = acc + bias
            if not fits:
                value = wrap(value, 32)
        out = value if stage is None else stage(mem, value, multiplier, shift, probe, ops, wrapped=not int16)
        raw = np.ascontiguousarray(out.reshape(oh, ow, oc).astype(out_dtype)).view(np.uint8)
        dst = np.ndarray(dst_shape, np.uint8, buffer=mem.sram[Sram.OUTPUT], offset=dst_offset, strides=dst_strides)
        dst[...] = raw.reshape(dst_shape)
    return run
