"""CONV2D_LANE_PAIRS in the golden model (docs/isa.md, "The MAC command"): the steps of the last
input-channel block (the first step of each kernel position) take two output pixels a beat, an even pixel (raster order in the tile) with
the block's weight lanes 0 .. cols/2-1 and the odd one after it with lanes cols/2 .. cols-1, each
on the low half of its own input word; every other step is CONV2D's. Checked against sums written
out here pixel by pixel, and the plan's beats and cycles against CONV2D's."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.cycle_model import conv_streams
from firmware_model.arch.isa import MacMode, OutMode, Reg, Sram, Status, encode_param_records, lane_pair_blocks
from firmware_model.errors import GoldenModelError
from firmware_model.golden.mac_unit import execute_mac, mac_plan
from firmware_model.golden.memories import Memories
from firmware_model.tosa_ops.dtypes import DType
from sim import seeds


def lane_pair_tile(cfg, rng, oh: int, ow: int, oc: int | None = None):
    """A random int8 tile of OFM_C `oc` (random when None) storing its raw int32 accumulators plus
    the bias: (memories, registers, bias)."""
    R, L = cfg.mac_rows, cfg.mac_cols
    kh, kw = (int(v) for v in rng.integers(1, 4, 2))
    sh, sw, dh, dw = (int(v) for v in rng.integers(1, 3, 4))
    cb = int(rng.integers(1, 4))
    oc = int(rng.integers(1, 2 * R + 1)) if oc is None else oc
    ih, iw = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    mem = Memories(cfg)
    for sram in (Sram.INPUT, Sram.WEIGHT):
        mem.sram[sram][:] = rng.integers(0, 256, len(mem.sram[sram]), dtype=np.uint8)
    bias = rng.integers(-(1 << 20), 1 << 20, oc)
    rec = np.frombuffer(encode_param_records(bias, np.ones(oc, np.int64), np.zeros(oc, np.int64)), np.uint8)
    mem.sram[Sram.PARAM][:len(rec)] = rec
    regs = {Reg.IFM_ADDR: L, Reg.IFM_ROW_STRIDE: iw * cb * L, Reg.IFM_PIX_STRIDE: cb * L, Reg.IFM_CBLOCKS: cb,
            Reg.IFM_ZP: int(rng.integers(-128, 128)) & 0xFFFFFFFF, Reg.IFM_DTYPE: int(DType.INT8),
            Reg.WGT_ADDR: 0, Reg.WGT_ZP: int(rng.integers(-128, 128)) & 0xFFFFFFFF,
            Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sh, Reg.STRIDE_W: sw, Reg.DILATION_H: dh,
            Reg.DILATION_W: dw, Reg.OFM_ADDR: 0, Reg.OFM_ROW_STRIDE: ow * oc * 4, Reg.OFM_PIX_STRIDE: oc * 4,
            Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: oc, Reg.OFM_DTYPE: int(DType.INT32), Reg.PARAM_ADDR: 0,
            Reg.OUT_MODE: int(OutMode(0)), Reg.CLAMP_MIN: DType.INT32.min & 0xFFFFFFFF, Reg.CLAMP_MAX: DType.INT32.max}
    return mem, {int(k): int(v) for k, v in regs.items()}, bias


def sums_by_hand(cfg, mem, regs, mode=MacMode.CONV2D_LANE_PAIRS) -> np.ndarray:
    """acc[p, c] written out: for each kernel position and input-channel block, the whole word
    against the block's row c, except in the last block: the low half of the word against lanes
    0 .. cols/2-1 (p even) or cols/2 .. cols-1 (p odd). The weight blocks lie in step order: at
    each kernel position the last input-channel block's first. With row pairs the last output
    block's channel r takes weight row r for an even pixel, rows/2 + r for an odd one, on whole
    words (no lane pairs there)."""
    R, L = cfg.mac_rows, cfg.mac_cols
    g = lambda reg: regs[int(reg)] - (1 << 32 if regs[int(reg)] >= 1 << 31 else 0)   # noqa: E731
    kh, kw, cb = g(Reg.KERNEL_H), g(Reg.KERNEL_W), g(Reg.IFM_CBLOCKS)
    oh, ow, oc = g(Reg.OFM_H), g(Reg.OFM_W), g(Reg.OFM_C)
    x = mem.sram[Sram.INPUT].view(np.int8).astype(np.int64)
    w = mem.sram[Sram.WEIGHT].view(np.int8).astype(np.int64)
    izp, wzp, h = g(Reg.IFM_ZP), g(Reg.WGT_ZP), L // 2
    acc = np.zeros((oh * ow, oc), dtype=np.int64)
    n_ocb = -(-oc // R)
    lanes_paired = mode in (MacMode.CONV2D_LANE_PAIRS, MacMode.CONV2D_PAIRS)
    for p in range(oh * ow):
        oy, ox = divmod(p, ow)
        for c in range(oc):
            ocb, r = divmod(c, R)
            rows_paired = mode in (MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS) and ocb == n_ocb - 1
            if rows_paired and p % 2:
                r += R // 2
            total = 0
            for ky in range(kh):
                for kx in range(kw):
                    for b in range(cb):
                        word = (g(Reg.IFM_ADDR) + (oy * g(Reg.STRIDE_H) + ky * g(Reg.DILATION_H)) * g(Reg.IFM_ROW_STRIDE)
                                + (ox * g(Reg.STRIDE_W) + kx * g(Reg.DILATION_W)) * g(Reg.IFM_PIX_STRIDE) + b * L)
                        step = lane_pair_blocks(cb).index(b) if lanes_paired else b   # the last block first
                        block = (((ocb * kh + ky) * kw + kx) * cb + step) * R * L + r * L
                        xs, ws = x[word:word + L] - izp, w[block:block + L] - wzp
                        if lanes_paired and not rows_paired and b == cb - 1:
                            xs, ws = xs[:h], (ws[h:] if p % 2 else ws[:h])
                        total += int((xs * ws).sum())
            acc[p, c] = total
    return acc


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("config", ["tiny", "large"])
def test_lane_paired_sums_equal_the_definition(config, seed):
    cfg = load_config(config)
    rng = seeds.rng(seed, f"lane pairs {config}")
    oh, ow = int(rng.integers(1, 5)), 2 * int(rng.integers(1, 4))
    mem, regs, bias = lane_pair_tile(cfg, rng, oh, ow)
    result = execute_mac(cfg, mem, regs, MacMode.CONV2D_LANE_PAIRS)
    a, b = result.region.output
    got = mem.sram[Sram.OUTPUT][a:b].view("<i4").reshape(oh * ow, -1)
    want = (sums_by_hand(cfg, mem, regs) + bias) & 0xFFFFFFFF
    want = np.where(want >= 1 << 31, want - (1 << 32), want)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", [MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS])
@pytest.mark.parametrize("config", ["tiny", "large"])
def test_row_paired_sums_equal_the_definition(config, mode, seed):
    cfg = load_config(config)
    rng = seeds.rng(seed, f"row pairs {config} {int(mode)}")
    oh, ow = int(rng.integers(1, 5)), 2 * int(rng.integers(1, 4))
    R = cfg.mac_rows
    oc = int(rng.integers(0, 3)) * R + int(rng.integers(1, R // 2 + 1))     # a last block of <= R/2
    mem, regs, bias = lane_pair_tile(cfg, rng, oh, ow, oc)
    result = execute_mac(cfg, mem, regs, mode)
    a, b = result.region.output
    got = mem.sram[Sram.OUTPUT][a:b].view("<i4").reshape(oh * ow, -1)
    want = (sums_by_hand(cfg, mem, regs, mode) + bias) & 0xFFFFFFFF
    want = np.where(want >= 1 << 31, want - (1 << 32), want)
    assert np.array_equal(got, want)


def test_lane_pairs_halve_the_last_blocks_beats():
    """The plan spends half the beats in each last-block step (conv_streams) and takes fewer
    cycles than CONV2D over the same registers; an odd OFM_W and int16 inputs are refused."""
    cfg = load_config("large")
    rng = seeds.rng(0, "lane pair plan")
    mem, regs, _ = lane_pair_tile(cfg, rng, 4, 8)
    kh, kw, cb = regs[int(Reg.KERNEL_H)], regs[int(Reg.KERNEL_W)], regs[int(Reg.IFM_CBLOCKS)]
    pairs, plain = mac_plan(cfg, regs, MacMode.CONV2D_LANE_PAIRS), mac_plan(cfg, regs, MacMode.CONV2D)
    n_ocb = -(-regs[int(Reg.OFM_C)] // cfg.mac_rows)
    assert pairs.macs == n_ocb * sum(conv_streams(kh, kw, cb, 32, True)) * cfg.mac_rows * cfg.mac_cols
    assert plain.macs - pairs.macs == n_ocb * kh * kw * 16 * cfg.mac_rows * cfg.mac_cols
    assert pairs.cycles < plain.cycles
    for change in ({int(Reg.OFM_W): 7}, {int(Reg.IFM_DTYPE): int(DType.INT16), int(Reg.IFM_ZP): 0}):
        with pytest.raises(GoldenModelError) as err:
            mac_plan(cfg, {**regs, **change}, MacMode.CONV2D_LANE_PAIRS)
        assert err.value.status == Status.BAD_MODE and "pixel pairs" in str(err.value)
    # row pairs: the last output block must hold at most mac.rows / 2 channels
    R = cfg.mac_rows
    for oc, refused in ((R + R // 2, False), (R + R // 2 + 1, True), (2 * R, True)):
        change = {int(Reg.OFM_C): oc, int(Reg.OFM_ROW_STRIDE): 8 * oc * 4, int(Reg.OFM_PIX_STRIDE): oc * 4}
        for mode in (MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS):
            if refused:
                with pytest.raises(GoldenModelError, match="row pairs"):
                    mac_plan(cfg, {**regs, **change}, mode)
            else:
                rows = mac_plan(cfg, {**regs, **change}, mode)
                assert rows.cycles < mac_plan(cfg, {**regs, **change}, MacMode.CONV2D).cycles
