"""The pooling unit: what one POOL command computes, bit for bit.

Layouts (docs/isa.md, "The POOL command"): input element (y, x, c) at byte IFM_ADDR +
y*IFM_ROW_STRIDE + x*IFM_PIX_STRIDE + c*size(IFM_DTYPE) of the input SRAM for y < POOL_IN_H,
x < POOL_IN_W, c < OFM_C (the real part of the tile's input box: the compiler loads only real
pixels); output element (oy, ox, c) at OFM_ADDR + oy*OFM_ROW_STRIDE + ox*OFM_PIX_STRIDE +
c*size(OFM_DTYPE) of the output SRAM.

The window of output (oy, ox) covers box rows oy*STRIDE_H + ky - POOL_PAD_TOP (ky < KERNEL_H) and
columns ox*STRIDE_W + kx - POOL_PAD_LEFT (kx < KERNEL_W); a tap is real when its row lies in
[0, POOL_IN_H) and its column in [0, POOL_IN_W), else it is padding and takes no part (TOSA:
padding is excluded from the maximum, the sum and the divisor). Per output element and channel:

    MAX   max of the real taps                      MIN  min of the real taps      (IFM_ZP unused)
    SUM   wrap32(sum of (x - IFM_ZP) over the real taps)                          (REDUCE_SUM)
    AVG   acc = wrap32(sum of (x - IFM_ZP)); (m, s) = reciprocal_scale(count of real taps);
          clip(apply_add_s(apply_scale_32(acc, m, s), OFM_ZP), OFM_DTYPE)         (AVG_POOL2D)

then the shared output stage (firmware_model/golden/output_stage.py; record PARAM_ADDR + c when it
rescales — not with AVG, which has its own scaling). A window without a real tap is a BAD_MODE
error (TOSA's pad < kernel rule makes it impossible in a legal graph).

`pool_plan` is the command without its data (POOL_RULES, the mode and types, the boxes' byte
ranges, every window's real taps, the cycles), which execute_pool calls first and the
timing-only model calls alone.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import ELEMENT_BYTES, OutMode, PoolMode, Sram, Status
from firmware_model.arch.checks import POOL_RULES, first_violation
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import NpuConfig
from firmware_model.golden.output_stage import (apply_output_stage, box_range, dtype_of, load_records,
                                                records_range, stage_plan, write_elements)
from firmware_model.arch.cycle_model import (pool_command_cycles, pool_uses_vector, pool_vector_cycles,
                                             pool_vector_lanes)
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType, wrap

INPUT_DTYPES = (DType.INT8, DType.INT16, DType.INT32)


@dataclass
class PoolResult:
    cycles: int
    elements: int                          # output elements
    taps: int                              # window taps visited (padding included)
    regions: dict[str, tuple[int, int]]    # memory -> byte range read / written
    out_values: np.ndarray                 # (OFM_H, OFM_W, OFM_C) int64
    plan: "PoolPlan | None" = None         # the accounting these came from (pool_plan)


def _fail(status: Status, message: str):
    raise GoldenModelError(f"POOL: {message}", status)


@dataclass(slots=True)
class PoolPlan:
    """What a POOL command costs, touches and refuses, from its registers alone (pool_plan)."""
    mode: PoolMode
    in_dtype: DType
    out_dtype: DType
    rows: np.ndarray                       # (OFM_H, KERNEL_H) box rows of the windows' taps
    cols: np.ndarray                       # (OFM_W, KERNEL_W) box columns
    count: np.ndarray                      # (OFM_H, OFM_W) real taps per window
    regions: dict[str, tuple[int, int]]    # memory -> bytes read / written, in the order the unit meets them
    stage: object                          # output_stage.StagePlan
    cycles: int
    elements: int
    taps: int

    # where the input box is read (IFM_SRAM: INPUT, or OUTPUT: its range is "i_output" in `regions`)
    in_sram: Sram = Sram.INPUT

    @property
    def reads(self) -> list[tuple[str, tuple[int, int]]]:
        """(memory, [start, stop)) of each range read."""
        return [(k.removeprefix("i_"), v) for k, v in self.regions.items() if k != "output"]


def pool_plan(cfg: NpuConfig, regs, sub: int) -> PoolPlan:
    """The POOL command's checks (arch/checks.py POOL_RULES, the mode and types, the input box,
    every window's real taps, then the records, the table and the output box), cycles and
    regions, from the registers (a dict or a `Registers` view); a refused command raises its
    GoldenModelError."""
    r = regs if isinstance(regs, Registers) else Registers(regs)
    broken = first_violation(POOL_RULES, r, sub, cfg)
    if broken is not None:
        raise GoldenModelError(broken.message("POOL", r, sub), broken.status)
    try:
        mode = PoolMode(sub)
    except ValueError:
        _fail(Status.BAD_MODE, f"mode {sub} does not exist")
    in_dt = dtype_of(r.ifm_dtype, "IFM_DTYPE", "POOL", INPUT_DTYPES)
    out_dt = dtype_of(r.ofm_dtype, "OFM_DTYPE", "POOL", tuple(ELEMENT_BYTES))
    rescale_on = OutMode.RESCALE in OutMode(r.out_mode & 0xF)
    if mode == PoolMode.AVG and (in_dt == DType.INT32 or out_dt not in (DType.INT8, DType.INT16) or rescale_on):
        _fail(Status.BAD_MODE, f"AVG takes int8/int16 to int8/int16 without an output-stage rescale "
                               f"(IFM_DTYPE {in_dt.name}, OFM_DTYPE {out_dt.name}, OUT_MODE {r.out_mode})")
    oh, ow, oc = r.ofm_h, r.ofm_w, r.ofm_c
    kh, kw, sh, sw = r.kernel_h, r.kernel_w, r.stride_h, r.stride_w
    pt, pl, ih, iw = r.pool_pad_top, r.pool_pad_left, r.pool_in_h, r.pool_in_w
    if min(kh, kw, sh, sw) < 1:
        _fail(Status.BAD_MODE, f"kernel {kh}x{kw} and stride {sh}x{sw} must be at least 1")

    regions: dict[str, tuple[int, int]] = {}
    # the input box (ih, iw, oc); an empty one reads nothing from IFM_ADDR
    in_sram = Sram.OUTPUT if r.ifm_sram == Sram.OUTPUT else Sram.INPUT
    regions["input" if in_sram == Sram.INPUT else "i_output"] = (
        box_range(cfg, in_sram, r.ifm_addr, r.ifm_row_stride, r.ifm_pix_stride, ih, iw, oc, in_dt, "POOL input",
                  "POOL: input addresses") if ih and iw and oc else (r.ifm_addr, r.ifm_addr))
    rows = np.arange(oh)[:, None] * sh + np.arange(kh)[None, :] - pt        # (oh, kh)
    cols = np.arange(ow)[:, None] * sw + np.arange(kw)[None, :] - pl        # (ow, kw)
    real_r, real_c = (rows >= 0) & (rows < ih), (cols >= 0) & (cols < iw)
    count = real_r.sum(axis=1)[:, None] * real_c.sum(axis=1)[None, :]       # (oh, ow)
    if count.size and count.min() == 0:
        oy, ox = np.argwhere(count == 0)[0]
        _fail(Status.BAD_MODE, f"the window of output ({oy}, {ox}) has no real position")
    if rescale_on:
        regions["param"] = records_range(cfg, r.param_addr, oc, "POOL parameters")
    stage = stage_plan(cfg, r, "POOL")
    if stage.lut_range is not None:
        regions["lut"] = stage.lut_range
    regions["output"] = box_range(cfg, Sram.OUTPUT, r.ofm_addr, r.ofm_row_stride, r.ofm_pix_stride, oh, ow, oc,
                                  out_dt, "POOL output", "POOL output: output addresses")
    in_size, out_size = ELEMENT_BYTES[in_dt], ELEMENT_BYTES[out_dt]
    pixels = dict(in_size=in_size, ifm_addr=r.ifm_addr, ifm_row_stride=r.ifm_row_stride, ifm_pix_stride=r.ifm_pix_stride)
    if oh * ow * oc and pool_uses_vector(cfg, mode=mode, lut_mode=r.lut_mode, out_size=out_size, **pixels):
        cycles = pool_vector_cycles(cfg, lanes=pool_vector_lanes(cfg, **pixels), ofm_h=oh, ofm_w=ow, ofm_c=oc,
                                    kernel_h=kh, kernel_w=kw, out_size=out_size, ofm_addr=r.ofm_addr,
                                    ofm_row_stride=r.ofm_row_stride, ofm_pix_stride=r.ofm_pix_stride,
                                    rescale=rescale_on, avg=mode == PoolMode.AVG)
    else:
        cycles = pool_command_cycles(ofm_h=oh, ofm_w=ow, ofm_c=oc, kernel_h=kh, kernel_w=kw)
    return PoolPlan(mode, in_dt, out_dt, rows, cols, count, regions, stage, cycles, oh * ow * oc, oh * ow * oc * kh * kw,
                    in_sram)


def _read_box(mem: Memories, sram: Sram, addr: int, row: int, pix: int, h: int, w: int, c: int, dtype: DType):
    """The input box (h, w, c) as int64 (its range checked by pool_plan)."""
    size = ELEMENT_BYTES[dtype]
    if not (h and w and c):
        return np.zeros((h, w, c), np.int64)
    offs = (addr + np.arange(h, dtype=np.int64)[:, None, None] * row
            + np.arange(w, dtype=np.int64)[None, :, None] * pix + np.arange(c, dtype=np.int64)[None, None, :] * size)
    raw = mem.sram[sram]
    b = np.stack([raw[offs + i] for i in range(size)], axis=-1)
    return np.ascontiguousarray(b).view(f"<i{size}")[..., 0].astype(np.int64)


def execute_pool(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sub: int, probe=None,
                 plan=None) -> PoolResult:
    """One POOL command (its checks and accounting: pool_plan). A `probe` (the golden model's
    REQUIRE monitor) is shown the input box ("box") and the output stage's input; it changes
    nothing."""
    if plan is None:            # else the plan of these registers, made before (pool_plan)
        plan = pool_plan(cfg, regs, sub)
    r = Registers(regs)
    mode, out_dt = plan.mode, plan.out_dtype
    oh, ow, oc = r.ofm_h, r.ofm_w, r.ofm_c
    kh, kw = r.kernel_h, r.kernel_w
    ih, iw = r.pool_in_h, r.pool_in_w
    regions = plan.regions
    x = _read_box(mem, plan.in_sram, r.ifm_addr, r.ifm_row_stride, r.ifm_pix_stride, ih, iw, oc, plan.in_dtype)
    if probe is not None:
        probe("box", x)
    rows, cols, count = plan.rows, plan.cols, plan.count
    real_r, real_c = (rows >= 0) & (rows < ih), (cols >= 0) & (cols < iw)
    if x.size:
        taps = x[np.clip(rows, 0, ih - 1)[:, :, None, None], np.clip(cols, 0, iw - 1)[None, None, :, :]]
    else:
        taps = np.zeros((oh, kh, ow, kw, oc), np.int64)
    real = (real_r[:, :, None, None] & real_c[None, None, :, :])[..., None]  # (oh, kh, ow, kw, 1)
    if mode in (PoolMode.MAX, PoolMode.MIN):
        fill = np.iinfo(np.int64).min if mode == PoolMode.MAX else np.iinfo(np.int64).max
        reduce_ = np.max if mode == PoolMode.MAX else np.min
        value = reduce_(np.where(real, taps, fill), axis=(1, 3)) if taps.size else np.zeros((oh, ow, oc), np.int64)
    else:
        acc = wrap(np.where(real, taps - r.ifm_zp, 0).sum(axis=(1, 3)), 32)
        if mode == PoolMode.SUM:
            value = acc
        else:
            m, s = numerics.reciprocal_scale(count)
            scaled = numerics.apply_scale_32(acc, m.astype(np.int64)[:, :, None], s.astype(np.int64)[:, :, None],
                                             False, require=False)
            value = numerics.apply_add_s(scaled, r.ofm_zp, DType.INT32, require=False)
            value = numerics.apply_clip_s(value, out_dt.min, out_dt.max)

    multiplier = shift = None
    if "param" in regions:
        m, s = load_records(mem, regions["param"])
        multiplier = np.broadcast_to(m, value.shape)
        shift = np.broadcast_to(s, value.shape)
    out, _ = apply_output_stage(mem, regs, value, multiplier, shift, unit="POOL", probe=probe, plan=plan.stage)
    esize = ELEMENT_BYTES[out_dt]
    offsets = (r.ofm_addr + np.arange(oh, dtype=np.int64)[:, None, None] * r.ofm_row_stride
               + np.arange(ow, dtype=np.int64)[None, :, None] * r.ofm_pix_stride
               + np.arange(oc, dtype=np.int64)[None, None, :] * esize)
    write_elements(mem, offsets, out, out_dt, "POOL output", rng=regions["output"])
    return PoolResult(plan.cycles, plan.elements, plan.taps, dict(regions), np.asarray(out).reshape(oh, ow, oc), plan)


def prepare_pool(cfg: NpuConfig, regs: dict[int, int], sub: int, plan: PoolPlan):
    """execute_pool with its registers decoded once (the golden model's decoded program,
    decoded.py): a function of (memories, probe) that computes and stores what execute_pool does,
    with what depends on the registers alone made beforehand: the input box's view (_read_box's
    elements), the windows' clipped tap indices and real-position mask, AVG's
    reciprocal_scale of each window's count, the output element addresses and the prepared
    output stage. Equal to execute_pool (tests/firmware_model/golden/test_decoded.py)."""
    from firmware_model.arch.isa import OUTPUT_STAGE_REGS
    from firmware_model.golden.output_stage import prepare_output_stage, scale32_operands, write_elements

    r = Registers(regs)
    if _small(r, plan):
        return prepare_pool_small(cfg, regs, sub, plan)
    mode, in_dt, out_dt = plan.mode, plan.in_dtype, plan.out_dtype
    oh, ow, oc = r.ofm_h, r.ofm_w, r.ofm_c
    kh, kw = r.kernel_h, r.kernel_w
    ih, iw = r.pool_in_h, r.pool_in_w
    regions = plan.regions
    size = ELEMENT_BYTES[in_dt]
    in_sram = plan.in_sram
    box = bool(ih and iw and oc)    # _read_box: element (y, x, k) at IFM_ADDR + y*row + x*pix + k*size
    rows, cols, count = plan.rows, plan.cols, plan.count
    real_r, real_c = (rows >= 0) & (rows < ih), (cols >= 0) & (cols < iw)
    tap_r = np.clip(rows, 0, ih - 1)[:, :, None, None]
    tap_c = np.clip(cols, 0, iw - 1)[None, None, :, :]
    real = (real_r[:, :, None, None] & real_c[None, None, :, :])[..., None]     # (oh, kh, ow, kw, 1)
    ifm_zp = r.ifm_zp
    if mode == PoolMode.AVG:
        m, s = numerics.reciprocal_scale(count)
        avg_m, avg_s = m.astype(np.int64)[:, :, None], s.astype(np.int64)[:, :, None]
    stage = prepare_output_stage({int(k): regs.get(int(k), 0) for k in OUTPUT_STAGE_REGS}, plan.stage, "POOL")
    param = regions.get("param")
    esize = ELEMENT_BYTES[out_dt]
    out_offsets = (r.ofm_addr + np.arange(oh, dtype=np.int64)[:, None, None] * r.ofm_row_stride
                   + np.arange(ow, dtype=np.int64)[None, :, None] * r.ofm_pix_stride
                   + np.arange(oc, dtype=np.int64)[None, None, :] * esize)
    out_rng = regions["output"]

    # Made once as well (issue 16): the box read through a strided view of the input SRAM (its
    # addresses and strides are multiples of the element size: box_range), the windows' taps of
    # real positions only where a window has padding (else the reduction takes them as they are),
    # the AVG sum's wrap32 left out when |tap - IFM_ZP| * KH * KW cannot leave int32, AVG's
    # apply_scale_32 as its int64 expression on operands spread over the output, the records'
    # scale32 operands once per records, and the store as a strided view when no two output
    # elements share a byte (else write_elements' scatter, in its order).
    all_real = bool(real.all())
    if box:
        in_view = ((ih, iw, oc), f"<i{size}", r.ifm_addr, (r.ifm_row_stride, r.ifm_pix_stride, size))
    lo_in, hi_in = (in_dt.min, in_dt.max)
    sum_wraps = max(abs(lo_in - ifm_zp), abs(hi_in - ifm_zp)) * kh * kw >= 1 << 31
    if mode == PoolMode.AVG:
        full = (oh, ow, oc)
        avg_mul = np.ascontiguousarray(np.broadcast_to(avg_m, full))
        avg_sh = np.ascontiguousarray(np.broadcast_to(avg_s, full))
        avg_round = np.ascontiguousarray(np.broadcast_to(
            np.where(avg_s >= 1, np.left_shift(np.int64(1), np.maximum(avg_s - 1, 0)), 0), full))
        ofm_zp64 = np.int64(r.ofm_zp)
        out_lo, out_hi = np.int64(out_dt.min), np.int64(out_dt.max)
    row_o, pix_o, n_o = r.ofm_row_stride, r.ofm_pix_stride, oc * esize
    out_apart = (ow == 1 or pix_o >= n_o) and (oh == 1 or row_o >= (ow - 1) * pix_o + n_o)
    out_dtype = f"<i{esize}" if esize < 8 else "<i8"
    w32 = np.int64(32)
    memo = [None]

    def records(mem: Memories, shape) -> tuple:
        m_, s_ = load_records(mem, param)
        made = memo[0]
        if made is not None and made[0] is m_ and made[1] is s_:
            return made[2]
        multiplier, shift = np.broadcast_to(m_, shape), np.broadcast_to(s_, shape)
        ops = None
        if plan.stage.rescale and plan.stage.scale32:
            ops = scale32_operands(multiplier, shift, plan.stage.double_round)
        made = (multiplier, shift, ops)
        memo[0] = (m_, s_, made)
        return made

    def run(mem: Memories, probe=None) -> None:
        if box:
            shape_, dt_, off_, strides_ = in_view
            x = np.ndarray(shape_, dt_, buffer=mem.sram[in_sram], offset=off_, strides=strides_).astype(np.int64)
        else:
            x = np.zeros((ih, iw, oc), np.int64)
        if probe is not None:
            probe("box", x)
        taps = x[tap_r, tap_c] if x.size else np.zeros((oh, kh, ow, kw, oc), np.int64)
        if mode in (PoolMode.MAX, PoolMode.MIN):
            if not taps.size:
                value = np.zeros((oh, ow, oc), np.int64)
            else:
                if not all_real:
                    fill = np.iinfo(np.int64).min if mode == PoolMode.MAX else np.iinfo(np.int64).max
                    taps = np.where(real, taps, fill)
                value = (np.max if mode == PoolMode.MAX else np.min)(taps, axis=(1, 3))
        else:
            if ifm_zp:
                taps = taps - ifm_zp
            if not all_real:
                taps = np.where(real, taps, 0)
            acc = taps.sum(axis=(1, 3))
            if sum_wraps:
                acc = wrap(acc, 32)
            if mode == PoolMode.SUM:
                value = acc
            else:
                # apply_scale_32(acc, m, s, False, require=False), apply_add_s(ofm_zp), apply_clip_s
                t = acc * avg_mul
                t += avg_round
                t >>= avg_sh
                t += ofm_zp64
                t <<= w32
                t >>= w32
                value = np.minimum(np.maximum(t, out_lo, out=t), out_hi, out=t)
        multiplier = shift = ops = None
        if param is not None:
            multiplier, shift, ops = records(mem, value.shape)
        out = stage(mem, value, multiplier, shift, probe, ops)
        if out_apart:
            raw = np.ascontiguousarray(np.asarray(out, dtype=np.int64).reshape(oh, ow, oc).astype(out_dtype))
            dst = np.ndarray((oh, ow, n_o), np.uint8, buffer=mem.sram[Sram.OUTPUT], offset=r.ofm_addr,
                             strides=(row_o, pix_o, 1))
            dst[...] = raw.view(np.uint8).reshape(oh, ow, n_o)
        else:
            write_elements(mem, out_offsets, out, out_dt, "POOL output", rng=out_rng)
    return run


# ---- A small box in Python integers (issue 16) --------------------------------------------------
# A POOL command on a few elements (mlp's softmax: a MAX and a REDUCE_SUM over ten int32 values)
# spends ~20-40 us in prepare_pool's numpy calls (and ~10 us more in the REDUCE_SUM check), each
# ~1 us whatever the size. Up to SMALL_BOX input elements, for MAX, MIN and SUM with an output
# stage that only clamps (no rescale, no table) and output elements apart, prepare_pool runs the
# same reduction on Python integers instead: each output element is the max, min or wrapped sum
# of its window's real taps (Python integers are exact: the int64 sum of at most SMALL_BOX
# values below 2^33 each is too), then the clamp, stored at the element's bytes. The REQUIRE
# probe is shown the box as prepare_pool shows it (an int64 array (POOL_IN_H, POOL_IN_W, OFM_C)),
# for any probe; for the monitor's Probe only when one of its checks may fail (_box_may_fail).
# tests/firmware_model/golden/test_pool_prepared.py compares this path with execute_pool.

SMALL_BOX = 64

_LOAD = {1: "b", 2: "h", 4: "i"}
_STORE = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _small(r: Registers, plan: PoolPlan) -> bool:
    """Whether prepare_pool takes the Python-integer form (the section's comment above)."""
    oh, ow, oc = r.ofm_h, r.ofm_w, r.ofm_c
    n_o = oc * ELEMENT_BYTES[plan.out_dtype]
    out_apart = (ow == 1 or r.ofm_pix_stride >= n_o) and (oh == 1 or r.ofm_row_stride >= (ow - 1) * r.ofm_pix_stride + n_o)
    return (plan.mode in (PoolMode.MAX, PoolMode.MIN, PoolMode.SUM) and not plan.stage.rescale
            and plan.stage.lut_range is None and out_apart
            and 0 < r.pool_in_h * r.pool_in_w * oc <= SMALL_BOX)


def _box_may_fail(checks: list, values: list, ih: int, iw: int) -> bool:
    """Whether one of the monitor's checks at "box" may fail on these box values (row-major
    (y, x, c)): a REDUCE_SUM check (require_monitor.check_reduce_sum) passes when the sum of
    |value - input_zp| over the box is below 2^31, since every partial sum it tests is a sum of
    some of those terms; a box not of its window's shape (the check raises) and any other check
    are handed to the probe."""
    for c in checks:
        if c["kind"] != "reduce_sum" or iw != 1 or ih != math.prod(c["dims"]):
            return True
        zp = c["input_zp"]
        if sum(abs(v - zp) for v in values) >= 1 << 31:
            return True
    return False


def prepare_pool_small(cfg: NpuConfig, regs: dict[int, int], sub: int, plan: PoolPlan):
    """execute_pool on Python integers (the section's comment above) for a command _small admits:
    a function of (memories, probe) that stores what execute_pool stores."""
    from firmware_model.golden.require_monitor import Probe

    r = Registers(regs)
    mode, in_dt, out_dt = plan.mode, plan.in_dtype, plan.out_dtype
    oh, ow, oc = r.ofm_h, r.ofm_w, r.ofm_c
    ih, iw = r.pool_in_h, r.pool_in_w
    size, esize = ELEMENT_BYTES[in_dt], ELEMENT_BYTES[out_dt]
    in_sram = plan.in_sram
    # the box (_read_box): element (y, x, k) at IFM_ADDR + y*row + x*pix + k*size, read a pixel at
    # a time, or at once where the box's pixels are consecutive
    row, pix = r.ifm_row_stride, r.ifm_pix_stride
    if pix == oc * size and (ih == 1 or row == iw * pix):
        reads = ((struct.Struct(f"<{ih * iw * oc}{_LOAD[size]}").unpack_from, r.ifm_addr),)
    else:
        pixel = struct.Struct(f"<{oc}{_LOAD[size]}").unpack_from
        reads = tuple((pixel, r.ifm_addr + y * row + x * pix) for y in range(ih) for x in range(iw))
    # each output element's real taps (oy, ox, k order), as indices into the box's values
    windows = []
    for oy in range(oh):
        for ox in range(ow):
            taps = [y * iw + x for y in plan.rows[oy].tolist() if 0 <= y < ih
                    for x in plan.cols[ox].tolist() if 0 <= x < iw]
            windows.extend(tuple(t * oc + k for t in taps) for k in range(oc))
    ifm_zp, clamp_min, clamp_max = r.ifm_zp, r.clamp_min, r.clamp_max
    # the store: output pixel (oy, ox) at OFM_ADDR + oy*row + ox*pix, its OFM_C elements together
    out_mask = (1 << (8 * esize)) - 1
    put = struct.Struct(f"<{oc}{_STORE[esize]}").pack_into
    out_pixels = [r.ofm_addr + oy * r.ofm_row_stride + ox * r.ofm_pix_stride for oy in range(oh) for ox in range(ow)]

    def run(mem: Memories, probe=None) -> None:
        sram = mem.sram[in_sram]
        xs = []
        for read, at in reads:
            xs.extend(read(sram, at))
        if probe is not None:
            if type(probe) is not Probe:
                probe("box", np.array(xs, dtype=np.int64).reshape(ih, iw, oc))
            else:
                checks = probe.checks.get("box")
                if checks and _box_may_fail(checks, xs, ih, iw):
                    probe("box", np.array(xs, dtype=np.int64).reshape(ih, iw, oc))
        if mode == PoolMode.MAX:
            values = [max([xs[t] for t in w]) for w in windows]
        elif mode == PoolMode.MIN:
            values = [min([xs[t] for t in w]) for w in windows]
        else:                                   # SUM: wrap32 of the exact sum
            values = [((sum([xs[t] for t in w]) - ifm_zp * len(w) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
                      for w in windows]
        values = [clamp_min if v < clamp_min else v for v in values]        # apply_clip_s
        values = [clamp_max if v > clamp_max else v for v in values]
        out = mem.sram[Sram.OUTPUT]
        for k, at in enumerate(out_pixels):
            put(out, at, *[v & out_mask for v in values[k * oc:(k + 1) * oc]])
    return run
