"""The output stage the ELTWISE and POOL units share (and the MAC's table lookup may): what
happens to a unit's result on its way into the output SRAM, bit for bit.

Per element, with its parameter record (multiplier, shift) where the stage rescales:

    RESCALE set:   v = rescale(value; multiplier, shift, OFM_ZP, RESCALE_DTYPE)
                   (apply_scale_32 or _16 by SCALE32, double rounding by DOUBLE_ROUND, saturation
                   to RESCALE_DTYPE, its unsigned range with UNSIGNED_OUT)
    RESCALE clear: v = value
    v = clamp(v, CLAMP_MIN, CLAMP_MAX)
    LUT_MODE INT8:  v = entry[LUT_ADDR + ((v + 128) & 0xFF)]        (the entry read as int16)
    LUT_MODE INT16: v = apply_lookup_s(entries LUT_ADDR .. LUT_ADDR + 512, v)   (v clipped to int16; int32)
    stored: the low OFM_DTYPE bytes of v, little-endian (int48 in 8 bytes)

The rescale is the MAC output stage's datapath (`mac_unit.rescale_operands`: an int32 value times
a 31-bit multiplier, or an int48 value times a 15-bit one) through the project's numeric
primitives with require=False: the hardware computes the same arithmetic whether or not TOSA's
REQUIREs hold. The LUT SRAM holds 16-bit little-endian entries, an int8 table sign-extended (the
compiler stores it so). The lookup is the LUT engine's (hw/lut_engine.py, same rules): the
compiler keeps its input within the table's input type (a rescale saturating to it, or a clamp
inside it).

What the stage costs and refuses does not depend on the values: `stage_plan` (the rescale type,
the table mode and the LUT SRAM bytes a table reads) checks it from the registers alone, and the
units' plans call it, as do the helpers below for the byte ranges of element runs and parameter
records (`elements_range`, `run_range`, `records_range`). The data paths use what the plans
found; the timing-only model (timing_model.py) runs the plans without them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_model.golden import mac_unit
from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import ELEMENT_BYTES, LutMode, OutMode, Sram, Status, decode_param_records
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories, box_span, check_range
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType, wrap

LUT_SIZES = {LutMode.INT8: 256, LutMode.INT16: 513}
RESCALE_DTYPES = (DType.INT8, DType.INT16, DType.INT32)


def dtype_of(value: int, what: str, unit: str, allowed=tuple(ELEMENT_BYTES)) -> DType:
    """A DType register's value, or the unit's BAD_MODE error naming the register."""
    try:
        dt = DType(value)
    except ValueError:
        dt = None
    if dt not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise GoldenModelError(f"{unit}: {what} = {value} is not one of {names}", Status.BAD_MODE)
    return dt


def elements_range(cfg: NpuConfig, sram: Sram, addr: int, count: int, dtype: DType, what: str) -> tuple[int, int]:
    """The byte range of `count` consecutive elements of `dtype` from byte `addr` of an SRAM; the
    address must be a multiple of the element size and the range inside the SRAM."""
    size = ELEMENT_BYTES[dtype]
    if addr % size:
        raise GoldenModelError(f"{what}: address {addr} is not a multiple of the {size}-byte element",
                               Status.ADDRESS_RANGE)
    stop = addr + count * size
    check_range(cfg, sram, addr, stop, what)
    return addr, stop


def load_elements(mem: Memories, sram: Sram, rng: tuple[int, int], dtype: DType, unsigned: bool) -> np.ndarray:
    """The elements of a byte range `elements_range` gave, as int64 (zero-extended when `unsigned`)."""
    raw = mem.sram[sram][rng[0]:rng[1]]
    if dtype == DType.INT48:
        v = raw.view("<i8").astype(np.int64)
        return wrap(v, 48)
    return raw.view(f"<{'u' if unsigned else 'i'}{ELEMENT_BYTES[dtype]}").astype(np.int64)


def read_elements(mem: Memories, sram: Sram, addr: int, count: int, dtype: DType, unsigned: bool,
                  what: str) -> tuple[np.ndarray, tuple[int, int]]:
    """`count` consecutive elements of `dtype` from byte `addr` of an SRAM, as int64 (zero-extended
    when `unsigned`), and the byte range read. The address must be a multiple of the element size."""
    rng = elements_range(mem.cfg, sram, addr, count, dtype, what)
    return load_elements(mem, sram, rng, dtype, unsigned), rng


def box_range(cfg: NpuConfig, sram: Sram, addr: int, row: int, pix: int, h: int, w: int, c: int, dtype: DType,
              what: str, misaligned: str) -> tuple[int, int]:
    """The byte range of an (h, w, c) box of `dtype` elements, element (y, x, k) at addr + y*row +
    x*pix + k*size (the strides are unsigned registers: the first element is the lowest): every
    element at a multiple of its size (else ADDRESS_RANGE, "`misaligned` are not multiples of
    ..."), inside the SRAM. An empty box is (0, 0) and checks nothing."""
    if not (h and w and c):
        return (0, 0)
    size = ELEMENT_BYTES[dtype]
    if addr % size or (h > 1 and row % size) or (w > 1 and pix % size):
        raise GoldenModelError(f"{misaligned} are not multiples of the {size}-byte element", Status.ADDRESS_RANGE)
    lo, hi = box_span(h, w, c, addr, row, pix, dtype)
    check_range(cfg, sram, lo, hi, what)
    return lo, hi


def write_elements(mem: Memories, offsets: np.ndarray, values: np.ndarray, dtype: DType, what: str,
                   rng: tuple[int, int] | None = None) -> tuple[int, int]:
    """Store values (int64) as `dtype` at byte offsets of the output SRAM; the byte range written.
    `rng`: the range a plan already checked (box_range); else it is checked here."""
    size = ELEMENT_BYTES[dtype]
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if offsets.size == 0:
        return (0, 0)
    if rng is None:
        lo, hi = int(offsets.min()), int(offsets.max()) + size
        if lo % size or np.any(offsets % size):
            raise GoldenModelError(f"{what}: output addresses are not multiples of the {size}-byte element",
                                   Status.ADDRESS_RANGE)
        mem.check_range(Sram.OUTPUT, lo, hi, what)
        rng = (lo, hi)
    raw = np.asarray(values, dtype=np.int64).reshape(-1).astype(f"<i{size}" if size < 8 else "<i8")
    raw = raw.view(np.uint8).reshape(-1, size)
    dst = mem.sram[Sram.OUTPUT]
    for i in range(size):
        dst[offsets + i] = raw[:, i]
    return rng


def run_range(cfg: NpuConfig, addr: int, count: int, dtype: DType, what: str) -> tuple[int, int]:
    """The output SRAM bytes of `count` consecutive `dtype` elements from byte `addr`, checked;
    (0, 0) when there are none."""
    size = ELEMENT_BYTES[dtype]
    if count == 0:
        return (0, 0)
    if addr % size:
        raise GoldenModelError(f"{what}: output addresses are not multiples of the {size}-byte element",
                               Status.ADDRESS_RANGE)
    lo, hi = box_span(1, 1, count, addr, 0, 0, dtype)
    check_range(cfg, Sram.OUTPUT, lo, hi, what)
    return lo, hi


def store_run(mem: Memories, rng: tuple[int, int], values: np.ndarray, dtype: DType) -> None:
    """Store values (int64) as consecutive `dtype` elements over a range `run_range` gave."""
    if rng[1] > rng[0]:
        size = ELEMENT_BYTES[dtype]
        raw = np.asarray(values, dtype=np.int64).reshape(-1).astype(f"<i{size}" if size < 8 else "<i8")
        mem.sram[Sram.OUTPUT][rng[0]:rng[1]] = raw.view(np.uint8)


def write_run(mem: Memories, addr: int, values: np.ndarray, dtype: DType, what: str) -> tuple[int, int]:
    """Store values (int64) as consecutive `dtype` elements from byte `addr` of the output SRAM
    (what write_elements does for offsets addr, addr+size, ...); the byte range written."""
    rng = run_range(mem.cfg, addr, int(np.size(values)), dtype, what)
    store_run(mem, rng, values, dtype)
    return rng


def records_range(cfg: NpuConfig, first: int, count: int, what: str) -> tuple[int, int]:
    """The parameter SRAM bytes of records first .. first+count-1, checked."""
    a, b = first * PARAM_RECORD_BYTES, (first + count) * PARAM_RECORD_BYTES
    check_range(cfg, Sram.PARAM, a, b, what)
    return a, b


def load_records(mem: Memories, rng: tuple[int, int]):
    """(multiplier, shift) of the records over a range `records_range` gave."""
    _, multiplier, shift = decode_param_records(mem.sram[Sram.PARAM][rng[0]:rng[1]])
    return multiplier, shift


def read_records(mem: Memories, first: int, count: int, what: str):
    """(multiplier, shift) of parameter records first .. first+count-1, and the byte range read."""
    rng = records_range(mem.cfg, first, count, what)
    multiplier, shift = load_records(mem, rng)
    return multiplier, shift, rng


@dataclass(slots=True)
class StagePlan:
    """What the output stage does with a command's registers, before any value: whether and how
    it rescales, which table it reads (LUT SRAM bytes `lut_range`, None without a table)."""
    rescale: bool
    scale32: bool
    double_round: bool
    unsigned_out: bool
    rescale_dtype: DType | None
    lut_mode: int
    lut_range: tuple[int, int] | None


def stage_plan(cfg: NpuConfig, regs, unit: str) -> StagePlan:
    """The stage's checks on the registers (a dict or a `Registers` view), in the order the
    datapath meets them: RESCALE_DTYPE (with RESCALE), LUT_MODE, the table's range."""
    r = regs if isinstance(regs, Registers) else Registers(regs)
    out_mode = OutMode(r.out_mode & 0xF)
    rescale = OutMode.RESCALE in out_mode
    rdt = dtype_of(r.rescale_dtype, "RESCALE_DTYPE", unit, RESCALE_DTYPES) if rescale else None
    lut_mode = r.lut_mode
    lut_range = None
    if lut_mode != LutMode.OFF:
        if lut_mode not in LUT_SIZES:
            raise GoldenModelError(f"{unit}: LUT_MODE = {lut_mode} does not exist", Status.BAD_MODE)
        first = r.lut_addr
        lut_range = (2 * first, 2 * (first + LUT_SIZES[LutMode(lut_mode)]))
        check_range(cfg, Sram.LUT, *lut_range, f"{unit} table")
    return StagePlan(rescale, OutMode.SCALE32 in out_mode, OutMode.DOUBLE_ROUND in out_mode,
                     OutMode.UNSIGNED_OUT in out_mode, rdt, lut_mode, lut_range)


def apply_output_stage(mem: Memories, regs: dict[int, int], value: np.ndarray, multiplier=None, shift=None,
                       *, unit: str, probe=None, plan: StagePlan | None = None) -> tuple[np.ndarray, dict]:
    """The stage on int64 values (any shape) with per-element multiplier/shift arrays that broadcast
    against them (e.g. per channel along the last axis; only read when RESCALE is set). Returns the
    values to store (int64) and the LUT SRAM byte range read (or None). A `probe` (the REQUIRE
    monitor) sees the rescale's input ("stage", with the multiplier and shift) and an int16 table's
    input ("lut"). `plan`: the unit's stage_plan of these registers (made here when not given)."""
    if plan is None:
        plan = stage_plan(mem.cfg, regs, unit)
    r = Registers(regs)
    value = np.asarray(value, dtype=np.int64)
    if plan.rescale:
        if probe is not None:
            probe("stage", value, multiplier, shift)
        v, m = mac_unit.rescale_operands(value, multiplier, plan.scale32)
        value = numerics.rescale_values(
            v, multiplier=m, shift=np.asarray(shift, dtype=np.int64) & 63, input_zp=0,
            output_zp=r.ofm_zp, out_dtype=plan.rescale_dtype, scale32=plan.scale32,
            double_round=plan.double_round, output_unsigned=plan.unsigned_out, require=False)
    value = numerics.apply_clip_s(value, r.clamp_min, r.clamp_max)
    lut_range = plan.lut_range
    if lut_range is not None:
        table = mem.sram[Sram.LUT][lut_range[0]:lut_range[1]].view("<i2").astype(np.int64)
        if plan.lut_mode == LutMode.INT8:
            value = table[(value + 128) & 0xFF]
        else:
            if probe is not None:
                probe("lut", value)
            value = numerics.apply_lookup_s(table, value, require=False).astype(np.int64)
    return value, lut_range


# ---- The stage prepared once per command (issue 16) -------------------------------------------
# apply_output_stage is the spec's reading: rescale_operands, then numerics.rescale_values
# (apply_scale_32 / apply_scale_16, apply_add_s of the output zero point, the saturation), the
# clamp and the table, each primitive on its own. A decoded program (decoded.py) runs the same
# command thousands of times with the same registers, and a layer's tiles read the same
# parameter records again and again, so `prepare_output_stage` binds the registers once and
# `scale32_operands` derives apply_scale_32's per-channel operands once per parameter block.
# The arithmetic is the primitives' own int64 expressions; where two of them are fused the
# equality is stated beside it. tests/firmware_model/golden/test_output_stage_prepared.py checks
# the prepared stage against apply_output_stage on random and edge registers and values.

@dataclass(frozen=True, slots=True)
class Scale32Operands:
    """apply_scale_32's operands (require=False) for per-channel multiplier/shift arrays, as the
    datapath takes them (mac_unit.rescale_operands: a 31-bit multiplier; apply_output_stage: the
    shift's low 6 bits)."""
    multiplier: np.ndarray      # multiplier & 0x7FFFFFFF
    shift: np.ndarray           # shift & 63
    round: np.ndarray           # 1 << (shift - 1); 0 where shift is 0 (no rounding bit)
    double: np.ndarray | None   # DOUBLE_ROUND: 1 << 30 where shift > 31, else 0; None without it


def scale32_operands(multiplier, shift, double_round: bool) -> Scale32Operands:
    """apply_scale_32's per-channel operands from a parameter block's multiplier and shift
    (numerics.apply_scale_32 with require=False computes the same round_ per element)."""
    m = np.asarray(multiplier, dtype=np.int64) & 0x7FFFFFFF
    s = np.asarray(shift, dtype=np.int64) & 63
    round_ = np.where(s >= 1, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    double = np.where(s > 31, np.int64(1 << 30), np.int64(0)) if double_round else None
    return Scale32Operands(m, s, round_, double)


def apply_scale_32_unwrapped(value: np.ndarray, ops: Scale32Operands) -> np.ndarray:
    """numerics.apply_scale_32(value, multiplier, shift, double_round, require=False) before its
    final wrap to int32: (value * multiplier + round) >> shift in int64, the double-round term
    +/- (1 << 30) towards the sign of value. `value`: int64 holding int32 values."""
    round_ = ops.round
    if ops.double is not None:
        round_ = round_ + np.where(value >= 0, ops.double, -ops.double)
    return (value * ops.multiplier + round_) >> ops.shift


def prepare_output_stage(regs: dict[int, int], plan: StagePlan, unit: str):
    """apply_output_stage(mem, regs, value, multiplier, shift, unit=unit, probe, plan=plan) with the
    registers bound: a function stage(mem, value, multiplier, shift, probe, scale32_ops=None,
    wrapped=False) -> the values to store (int64). `scale32_ops`: the scale32_operands of
    (multiplier, shift) made beforehand (a caller that reads the same records again keeps them);
    made here when None. `wrapped`: the caller's values are int64 holding int32 values already
    (then wrap32 of them changes nothing and is left out); `value` may then be overwritten.

    The scale32 rescale runs in place on one array (value * multiplier and what follows): the
    same int64 expressions as apply_scale_32_unwrapped, one temporary instead of one per step. The
    rescale's saturation to RESCALE_DTYPE's range [lo, hi] and the clamp [CLAMP_MIN, CLAMP_MAX]
    are one clip to [max(lo, CLAMP_MIN), min(hi, CLAMP_MAX)] when the two ranges overlap (a clip
    to [lo, hi] then to [cl, ch] with cl <= hi and lo <= ch is the clip to the intersection; with
    ch < lo, both give ch, as the clip to [max(lo, cl), ch] does); when CLAMP_MIN > hi the two
    clips stay apart."""
    r = Registers(regs)
    ofm_zp, clamp_min, clamp_max = np.int64(r.ofm_zp), np.int64(r.clamp_min), np.int64(r.clamp_max)
    rescale, scale32, double_round = plan.rescale, plan.scale32, plan.double_round
    lo = hi = None
    if rescale:
        rdt = plan.rescale_dtype
        lo, hi = (0, rdt.umax) if plan.unsigned_out else (rdt.min, rdt.max)
        lo, hi = np.int64(lo), np.int64(hi)
    # the clips after the rescale: one when the ranges overlap (docstring)
    if rescale and r.clamp_min <= hi:
        clips = ((np.int64(max(lo, clamp_min)), np.int64(min(hi, clamp_max))),)
    elif rescale:
        clips = ((lo, hi), (clamp_min, clamp_max))
    else:
        clips = ((clamp_min, clamp_max),)
    i64_min, i64_max = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    clips = tuple((None if a == i64_min else a, None if b == i64_max else b) for a, b in clips)
    lut_range, lut_mode = plan.lut_range, plan.lut_mode
    s32 = np.int64(32)

    def stage(mem: Memories, value: np.ndarray, multiplier=None, shift=None, probe=None,
              scale32_ops: Scale32Operands | None = None, wrapped: bool = False) -> np.ndarray:
        value = np.asarray(value, dtype=np.int64)
        if rescale:
            if probe is not None:
                probe("stage", value, multiplier, shift)
            if scale32:
                if scale32_ops is None:
                    scale32_ops = scale32_operands(multiplier, shift, double_round)
                v = value if wrapped else wrap(value, 32)               # rescale_operands (int32 value)
                # apply_scale_32_unwrapped(v, ops) + ofm_zp, then wrap32: apply_add_s(wrap32(x), zp,
                # INT32) = wrap32(wrap32(x) + zp) = wrap32(x + zp): both wraps reduce modulo 2^32
                # and x + zp stays far inside int64.
                t = v * scale32_ops.multiplier
                t += scale32_ops.round
                if scale32_ops.double is not None:
                    t += np.where(v >= 0, scale32_ops.double, -scale32_ops.double)
                t >>= scale32_ops.shift
                if ofm_zp:
                    t += ofm_zp
                t <<= s32
                t >>= s32
                value = t
            else:
                v, m = mac_unit.rescale_operands(value, multiplier, False)
                value = numerics.apply_scale_16(v, m, np.asarray(shift, dtype=np.int64) & 63,
                                                require=False).astype(np.int64)
                value = numerics.apply_add_s(value, ofm_zp, DType.INT32, require=False)
        own = rescale or wrapped            # `value` is this call's to overwrite
        for a, b in clips:                                              # apply_clip_s / apply_clip_u
            if a is not None:
                value = np.maximum(value, a, out=value if own else None)
                own = True
            if b is not None:
                value = np.minimum(value, b, out=value if own else None)
                own = True
        if lut_range is not None:
            table = mem.sram[Sram.LUT][lut_range[0]:lut_range[1]].view("<i2").astype(np.int64)
            if lut_mode == LutMode.INT8:
                value = table[(value + 128) & 0xFF]
            else:
                if probe is not None:
                    probe("lut", value)
                value = numerics.apply_lookup_s(table, value, require=False).astype(np.int64)
        return value
    return stage
