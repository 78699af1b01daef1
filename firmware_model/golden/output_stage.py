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
"""

from __future__ import annotations

import numpy as np

from firmware_model.golden import mac_unit
from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import ELEMENT_BYTES, LutMode, OutMode, Sram, Status, decode_param_records
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories
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


def read_elements(mem: Memories, sram: Sram, addr: int, count: int, dtype: DType, unsigned: bool,
                  what: str) -> tuple[np.ndarray, tuple[int, int]]:
    """`count` consecutive elements of `dtype` from byte `addr` of an SRAM, as int64 (zero-extended
    when `unsigned`), and the byte range read. The address must be a multiple of the element size."""
    size = ELEMENT_BYTES[dtype]
    if addr % size:
        raise GoldenModelError(f"{what}: address {addr} is not a multiple of the {size}-byte element",
                               Status.ADDRESS_RANGE)
    stop = addr + count * size
    mem.check_range(sram, addr, stop, what)
    raw = mem.sram[sram][addr:stop]
    if dtype == DType.INT48:
        v = raw.view("<i8").astype(np.int64)
        return wrap(v, 48), (addr, stop)
    v = raw.view(f"<{'u' if unsigned else 'i'}{size}").astype(np.int64)
    return v, (addr, stop)


def write_elements(mem: Memories, offsets: np.ndarray, values: np.ndarray, dtype: DType, what: str) -> tuple[int, int]:
    """Store values (int64) as `dtype` at byte offsets of the output SRAM; the byte range written."""
    size = ELEMENT_BYTES[dtype]
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if offsets.size == 0:
        return (0, 0)
    lo, hi = int(offsets.min()), int(offsets.max()) + size
    if lo % size or np.any(offsets % size):
        raise GoldenModelError(f"{what}: output addresses are not multiples of the {size}-byte element",
                               Status.ADDRESS_RANGE)
    mem.check_range(Sram.OUTPUT, lo, hi, what)
    raw = np.asarray(values, dtype=np.int64).reshape(-1).astype(f"<i{size}" if size < 8 else "<i8")
    raw = raw.view(np.uint8).reshape(-1, size)
    dst = mem.sram[Sram.OUTPUT]
    for i in range(size):
        dst[offsets + i] = raw[:, i]
    return lo, hi


def write_run(mem: Memories, addr: int, values: np.ndarray, dtype: DType, what: str) -> tuple[int, int]:
    """Store values (int64) as consecutive `dtype` elements from byte `addr` of the output SRAM
    (what write_elements does for offsets addr, addr+size, ...); the byte range written."""
    size = ELEMENT_BYTES[dtype]
    n = int(np.size(values))
    if n == 0:
        return (0, 0)
    if addr % size:
        raise GoldenModelError(f"{what}: output addresses are not multiples of the {size}-byte element",
                               Status.ADDRESS_RANGE)
    lo, hi = addr, addr + n * size
    mem.check_range(Sram.OUTPUT, lo, hi, what)
    raw = np.asarray(values, dtype=np.int64).reshape(-1).astype(f"<i{size}" if size < 8 else "<i8")
    mem.sram[Sram.OUTPUT][lo:hi] = raw.view(np.uint8)
    return lo, hi


def read_records(mem: Memories, first: int, count: int, what: str):
    """(multiplier, shift) of parameter records first .. first+count-1, and the byte range read."""
    a, b = first * PARAM_RECORD_BYTES, (first + count) * PARAM_RECORD_BYTES
    mem.check_range(Sram.PARAM, a, b, what)
    _, multiplier, shift = decode_param_records(mem.sram[Sram.PARAM][a:b])
    return multiplier, shift, (a, b)


def apply_output_stage(mem: Memories, regs: dict[int, int], value: np.ndarray, multiplier=None, shift=None,
                       *, unit: str, probe=None) -> tuple[np.ndarray, dict]:
    """The stage on int64 values (any shape) with per-element multiplier/shift arrays that broadcast
    against them (e.g. per channel along the last axis; only read when RESCALE is set). Returns the
    values to store (int64) and the LUT SRAM byte range read (or None). A `probe` (the REQUIRE
    monitor) sees the rescale's input ("stage", with the multiplier and shift) and an int16 table's
    input ("lut")."""
    r = Registers(regs)
    out_mode = OutMode(r.out_mode & 0xF)
    value = np.asarray(value, dtype=np.int64)
    if OutMode.RESCALE in out_mode:
        if probe is not None:
            probe("stage", value, multiplier, shift)
        scale32 = OutMode.SCALE32 in out_mode
        rdt = dtype_of(r.rescale_dtype, "RESCALE_DTYPE", unit, RESCALE_DTYPES)
        v, m = mac_unit.rescale_operands(value, multiplier, scale32)
        value = numerics.rescale_values(
            v, multiplier=m, shift=np.asarray(shift, dtype=np.int64) & 63, input_zp=0,
            output_zp=r.ofm_zp, out_dtype=rdt, scale32=scale32,
            double_round=OutMode.DOUBLE_ROUND in out_mode,
            output_unsigned=OutMode.UNSIGNED_OUT in out_mode, require=False)
    value = numerics.apply_clip_s(value, r.clamp_min, r.clamp_max)
    lut_range = None
    lut_mode = r.lut_mode
    if lut_mode != LutMode.OFF:
        if lut_mode not in LUT_SIZES:
            raise GoldenModelError(f"{unit}: LUT_MODE = {lut_mode} does not exist", Status.BAD_MODE)
        n = LUT_SIZES[LutMode(lut_mode)]
        first = r.lut_addr
        lut_range = (2 * first, 2 * (first + n))
        mem.check_range(Sram.LUT, *lut_range, f"{unit} table")
        table = mem.sram[Sram.LUT][lut_range[0]:lut_range[1]].view("<i2").astype(np.int64)
        if lut_mode == LutMode.INT8:
            value = table[(value + 128) & 0xFF]
        else:
            if probe is not None:
                probe("lut", value)
            value = numerics.apply_lookup_s(table, value, require=False).astype(np.int64)
    return value, lut_range
