"""Constrained-random MAC tiles with their golden results, for checking the core RTL directly.

Each tile is a full MAC command: random operand SRAM contents, random geometry within the
configuration (kernel, strides, dilation, channel blocks, output extent that fits the
accumulators), random zero points and per-channel rescale parameters (both rounding modes,
shifts over the whole legal range, int8/int16/int32 outputs, signed and unsigned, clamps). The
expected output bytes and cycle count come from the golden model (firmware_model.golden.mac_unit).
"""

from __future__ import annotations

import numpy as np

from sim import seeds
from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import (LutMode, MacMode, OutMode, Reg, Sram, Status, depthwise_group_lanes, depthwise_rows,
                                     packed_span_fits)
from firmware_model.arch.cycle_model import depthwise_windows
from firmware_model.golden.mac_unit import execute_mac
from firmware_model.arch.isa import encode_param_records
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import NpuConfig
from firmware_model.tosa_ops.dtypes import DType


def random_tile(cfg: NpuConfig, rng: np.random.Generator, tile_id: int,
                ifm_dtype: DType = DType.INT8) -> dict:
    """One tile; `ifm_dtype` INT16 makes an int16 x int8 tile (docs/units.md: cols/2 int16 lanes per
    input word, weights in the low half of each weight row; IFM_ZP 0; rescaled with apply_scale_16,
    biases over the int48 range so that the saturating bias add is exercised). A third of the int8
    tiles are DEPTHWISE (the array's window mode): kernel rows up to 2*cols+1 taps wide, so that a
    row takes one to three window passes, strides up to 3 (past a short last pass's length); a
    quarter of the tiles read their input from the output SRAM (IFM_SRAM OUTPUT); half
    of the DEPTHWISE tiles take several kernel rows a step, as many DEPTHWISE_PAIRED as
    DEPTHWISE_TRIPLE (kernel rows spanning up to a group's lanes, cols/2 or cols//3 pixels; 1 to 5
    or 1 to 7 of them, so that a last step with fewer rows leaves groups idle), and two in five of
    the others DEPTHWISE_PACKED (1 to 6 kernel rows spanning (cols - 1) / 2 to cols + 2 pixels:
    windows split across steps, and up to three of them in a step). Two thirds of the
    tiles mark part of their input box as padding (IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H, IFM_IN_W)."""
    R, L = cfg.mac_rows, cfg.mac_cols
    int16 = ifm_dtype == DType.INT16
    mem = Memories(cfg)
    for sram in (Sram.INPUT, Sram.WEIGHT, Sram.OUTPUT):
        mem.sram[sram][:] = rng.integers(0, 256, len(mem.sram[sram]), dtype=np.uint8)
    mode = MacMode.DEPTHWISE if not int16 and rng.random() < 1 / 3 else MacMode.CONV2D
    if mode == MacMode.DEPTHWISE and rng.random() < 0.5:
        mode = MacMode.DEPTHWISE_PAIRED if rng.random() < 0.5 else MacMode.DEPTHWISE_TRIPLE
    elif mode == MacMode.DEPTHWISE and rng.random() < 0.4:
        mode = MacMode.DEPTHWISE_PACKED
    rows = depthwise_rows(mode)
    while True:
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        sh, sw = (int(v) for v in rng.integers(1, 3, 2))
        dh, dw = (int(v) for v in rng.integers(1, 3, 2))
        cb = int(rng.integers(1, 3))
        oc = int(rng.integers(1, 2 * R + 1))
        if mode != MacMode.CONV2D:
            kw = int(rng.integers(1, 2 * L + 2))
            sw = int(rng.integers(1, 4))
            cb = 1
            oc = int(rng.integers(1, min(R, L) + 1))
        if rows > 1:
            group = depthwise_group_lanes(L, rows)
            kh = int(rng.integers(1, 2 * rows + 2))
            kw = int(rng.integers(1, group + 1))
            dw = int(rng.integers(1, 3))
            if (kw - 1) * dw + 1 > group:
                dw = 1
        if mode == MacMode.DEPTHWISE_PACKED:
            kh = int(rng.integers(1, 7))
            dw = int(rng.integers(1, 3))
            # a kernel row of at least (cols - 1) / 2 pixels (isa.packed_span_fits), up to cols + 2
            span = int(rng.integers(L // 2, L + 3))
            kw = 1 + (span - 1) // dw
            if not packed_span_fits(L, (kw - 1) * dw + 1):
                kw += 1
        oh, ow = (int(v) for v in rng.integers(1, 7, 2))
        if oh * ow > cfg.acc_depth:
            continue
        ih, iw = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
        pix = cb * L
        in_bytes = ih * iw * pix
        n_ocb = -(-oc // R)
        steps = len(depthwise_windows(cfg, mode, kh, kw, dw)) if mode != MacMode.CONV2D else kh * kw * cb
        w_bytes = n_ocb * steps * R * L
        raw48 = int16 and rng.random() < 0.3          # the raw int48 result of an int16 tile
        out_dtype = DType.INT48 if raw48 else DType(int(rng.choice([DType.INT8, DType.INT16, DType.INT32])))
        esize = out_dtype.size_bytes
        # Half the tiles pack their pixels tight (elements aligned to their size only, so a pixel
        # may start inside a word and span several: the vector writer's unaligned case), half
        # start every pixel on a word. An element never straddles a word either way.
        tight = not raw48 and rng.random() < 0.5
        align = esize if tight else max(L, esize)
        opix = -(-(oc * esize) // align) * align
        out_bytes = oh * ow * opix
        if (in_bytes <= cfg.input_sram and w_bytes <= cfg.weight_sram and out_bytes <= cfg.output_sram
                and oc <= cfg.param_records):
            break
    in_addr = int(rng.integers(0, (cfg.input_sram - in_bytes) // L + 1)) * L
    w_addr = int(rng.integers(0, (cfg.weight_sram - w_bytes) // L + 1)) * L
    out_addr = int(rng.integers(0, (cfg.output_sram - out_bytes) // align + 1)) * align
    # A quarter of the CONV2D tiles read their input from the output SRAM (IFM_SRAM OUTPUT, an
    # earlier command's result), in a part apart from the output box, on either side of it.
    # A window-mode tile does likewise, drawn from a stream of its own (the tiles drawn after are
    # as before this was added).
    ifm_sram = Sram.INPUT
    in_words = -(-in_bytes // L) * L
    fits = in_words + out_bytes + L + align <= cfg.output_sram
    src = rng if mode == MacMode.CONV2D else np.random.default_rng((tile_id, in_addr, w_addr, out_addr, 1))
    if src.random() < 0.25 and fits:
        ifm_sram = Sram.OUTPUT
        if src.random() < 0.5:        # the input below the output box
            in_addr = int(src.integers(0, (cfg.output_sram - out_bytes - in_words) // L + 1)) * L
            lo = -(-(in_addr + in_words) // align) * align
            out_addr = int(src.integers(lo // align, (cfg.output_sram - out_bytes) // align + 1)) * align
        else:                         # above it
            out_addr = int(src.integers(0, (cfg.output_sram - out_bytes - in_words - L) // align + 1)) * align
            lo = -(-(out_addr + out_bytes) // L) * L
            in_addr = int(src.integers(lo // L, (cfg.output_sram - in_words) // L + 1)) * L
    p_addr = int(rng.integers(0, cfg.param_records - oc + 1))

    rescale = not raw48 and (out_dtype != DType.INT32 or bool(rng.integers(0, 2)) or int16)
    scale32 = (bool(rng.integers(0, 2)) if out_dtype != DType.INT32 else True) and not int16
    double_round = scale32 and bool(rng.integers(0, 2))
    unsigned_out = rescale and out_dtype != DType.INT32 and bool(rng.integers(0, 4) == 0) and not int16
    bias = rng.integers(-(1 << 20), 1 << 20, oc)
    if int16:
        bias = rng.integers(-(1 << 47), 1 << 47, oc) >> rng.integers(0, 30, oc)
        bias[rng.integers(0, 4, oc) == 0] = DType.INT48.max - 5
        mult = rng.integers(1 << 13, 1 << 15, oc)
        shift = rng.integers(16, 56, oc)
    elif scale32:
        mult = rng.integers(1 << 29, 1 << 31, oc)
        shift = rng.integers(20, 63, oc)
    else:
        mult = rng.integers(1 << 13, 1 << 15, oc)
        shift = rng.integers(8, 40, oc)
    rec = np.frombuffer(encode_param_records(bias, mult, shift), dtype=np.uint8)
    mem.sram[Sram.PARAM][p_addr * 11:p_addr * 11 + len(rec)] = rec

    rdtype = out_dtype if rescale else DType.INT32
    lo, hi = (0, rdtype.umax) if unsigned_out else (rdtype.min, rdtype.max)
    # a fused table lookup (TABLE after the rescale) on a quarter of the rescaled tiles
    lut_mode, lut_addr, lut_range = LutMode.OFF, 0, None
    if rescale and rng.random() < 0.25:
        lut_mode = LutMode(int(rng.choice([LutMode.INT8, LutMode.INT16])))
        n_entries = 256 if lut_mode == LutMode.INT8 else 513
        lut_addr = int(rng.integers(0, cfg.lut_entries - n_entries + 1))
        lut_range = (2 * lut_addr, 2 * (lut_addr + n_entries))
        mem.sram[Sram.LUT][lut_range[0]:lut_range[1]] = rng.integers(0, 256, lut_range[1] - lut_range[0], dtype=np.uint8)
    cmin = int(rng.integers(lo, (lo + hi) // 2 + 1)) if rng.integers(0, 2) else lo
    cmax = int(rng.integers((lo + hi) // 2, hi + 1)) if rng.integers(0, 2) else hi
    out_mode = ((OutMode.RESCALE if rescale else 0) | (OutMode.SCALE32 if scale32 else 0)
                | (OutMode.DOUBLE_ROUND if double_round else 0) | (OutMode.UNSIGNED_OUT if unsigned_out else 0))
    regs = {
        Reg.IFM_ADDR: in_addr, Reg.IFM_ROW_STRIDE: iw * pix, Reg.IFM_PIX_STRIDE: pix, Reg.IFM_CBLOCKS: cb,
        Reg.IFM_ZP: 0 if int16 else int(rng.integers(-128, 128)) & 0xFFFFFFFF, Reg.IFM_DTYPE: int(ifm_dtype),
        Reg.IFM_SRAM: int(ifm_sram),
        Reg.WGT_ADDR: w_addr, Reg.WGT_ZP: int(rng.integers(-128, 128)) & 0xFFFFFFFF,
        Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sh, Reg.STRIDE_W: sw,
        Reg.DILATION_H: dh, Reg.DILATION_W: dw,
        Reg.OFM_ADDR: out_addr, Reg.OFM_ROW_STRIDE: ow * opix, Reg.OFM_PIX_STRIDE: opix,
        Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: oc, Reg.OFM_DTYPE: int(out_dtype),
        Reg.OFM_ZP: (int(rng.integers(lo // 2, hi // 2 + 1)) if rescale and out_dtype != DType.INT32 else 0) & 0xFFFFFFFF,
        Reg.PARAM_ADDR: p_addr, Reg.OUT_MODE: int(out_mode), Reg.CLAMP_MIN: cmin & 0xFFFFFFFF,
        Reg.CLAMP_MAX: cmax & 0xFFFFFFFF, Reg.LUT_MODE: int(lut_mode), Reg.LUT_ADDR: lut_addr,
        Reg.RESCALE_DTYPE: int(rdtype),
    }
    # The input box's image region (IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H, IFM_IN_W), from a stream of
    # its own so that the tiles drawn after are as before: for two thirds of the tiles a region of
    # the box (possibly running past it, possibly empty of the box's positions), else 0 (the whole
    # box). A CONV2D tile ignores it.
    side = np.random.default_rng((tile_id, in_addr, w_addr, out_addr, p_addr))
    # (set on every tile: a program's registers persist from the tile before)
    regs.update({Reg.IFM_PAD_TOP: 0, Reg.IFM_PAD_LEFT: 0, Reg.IFM_IN_H: 0, Reg.IFM_IN_W: 0})
    if side.random() < 2 / 3:
        top, left = int(side.integers(0, ih + 1)), int(side.integers(0, iw + 1))
        regs.update({Reg.IFM_PAD_TOP: top, Reg.IFM_PAD_LEFT: left,
                     Reg.IFM_IN_H: int(side.integers(1, ih - top + 2)), Reg.IFM_IN_W: int(side.integers(1, iw - left + 2))})
    regs = {int(k): int(v) for k, v in regs.items()}
    # Two fifths of the int8 CONV2D tiles with an even OFM_W take lane pairs (CONV2D_LANE_PAIRS: the
    # last input-channel block's steps two pixels a beat), from a stream of their own.
    # Of those whose last output block holds at most mac.rows/2 channels, half take row pairs too
    # (CONV2D_PAIRS) or instead (CONV2D_ROW_PAIRS).
    pairs = np.random.default_rng((tile_id, in_addr, w_addr, out_addr, 3))
    if mode == MacMode.CONV2D and not int16 and ow % 2 == 0 and pairs.random() < 0.4:
        mode = MacMode.CONV2D_LANE_PAIRS
        if R % 2 == 0 and 0 < oc % R <= R // 2 and pairs.random() < 0.5:
            mode = MacMode.CONV2D_PAIRS if pairs.random() < 0.5 else MacMode.CONV2D_ROW_PAIRS
    before = mem.sram[Sram.OUTPUT].copy()
    result = execute_mac(cfg, mem, regs, mode)
    a, b = result.region.output
    return {
        "tile": tile_id, "regs": regs, "mode": int(mode),
        "images": {ifm_sram: (before if ifm_sram == Sram.OUTPUT else mem.sram[Sram.INPUT], result.region.input),
                   Sram.WEIGHT: (mem.sram[Sram.WEIGHT], result.region.weight),
                   Sram.PARAM: (mem.sram[Sram.PARAM], result.region.param),
                   **({Sram.LUT: (mem.sram[Sram.LUT], lut_range)} if lut_range else {})},
        "output_before": before, "output_range": (a, b), "expected": mem.sram[Sram.OUTPUT][a:b].copy(),
        "golden_cycles": result.cycles,
    }


def random_tiles(cfg: NpuConfig, n: int, seed: int, ifm_dtype: DType = DType.INT8) -> list[dict]:
    rng = seeds.rng(seed)
    return [random_tile(cfg, rng, i, ifm_dtype) for i in range(n)]


# Register changes that make a valid tile fault: (what, registers to change). The golden model
# decides the status each must end with; the core must report the same and write nothing.
FAULTS = (
    ("no output rows", {Reg.OFM_H: 0}),
    ("no output columns", {Reg.OFM_W: 0}),
    ("no output channels", {Reg.OFM_C: 0}),
    ("no kernel rows", {Reg.KERNEL_H: 0}),
    ("no kernel columns", {Reg.KERNEL_W: 0}),
    ("no input blocks", {Reg.IFM_CBLOCKS: 0}),
    ("more pixels than accumulators", {Reg.OFM_H: 1 << 10, Reg.OFM_W: 1 << 10}),
    ("int32 inputs", {Reg.IFM_DTYPE: int(DType.INT32)}),
    ("int8 result without RESCALE", {Reg.OUT_MODE: 0, Reg.OFM_DTYPE: int(DType.INT8)}),
    ("raw int48 result", {Reg.OUT_MODE: 0, Reg.OFM_DTYPE: int(DType.INT48)}),
    ("int16 inputs with an input zero point", {Reg.IFM_DTYPE: int(DType.INT16), Reg.IFM_ZP: 5}),
)


def faulty_tiles(cfg: NpuConfig, seed: int) -> list[dict]:
    """One tile per FAULTS entry: a random valid tile with the registers changed, its expected
    status the golden model's (`expected_status`); `expected` is the valid tile's output range as it
    was before the command (nothing may be written)."""
    rng = seeds.rng(seed)
    out = []
    for i, (what, change) in enumerate(FAULTS):
        t = random_tile(cfg, rng, i)
        regs = {**t["regs"], **{int(r): v for r, v in change.items()}}
        mem = Memories(cfg)
        try:
            execute_mac(cfg, mem, regs, t["mode"])
        except GoldenModelError as e:
            status = e.status
        else:
            raise AssertionError(f"{what}: the golden model accepts the tile")
        # Where the valid tile would have written, the output SRAM must keep what it held.
        a, b = t["output_range"]
        out.append({**t, "regs": regs, "what": what, "expected_status": int(status),
                    "expected": t["output_before"][a:b].copy(), "golden_cycles": 0})
    assert {t["expected_status"] for t in out} == {Status.BAD_MODE, Status.ADDRESS_RANGE}
    return out
