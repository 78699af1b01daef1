"""Fusion helpers of the elementwise and pooling kinds: reading a TOSA RESCALE's constant
operands, and the output stage (RESCALE -> CLAMP -> TABLE after a unit's result) with its
registers, parameter records and table.

Everything here decides whether a fused form computes exactly what the TOSA ops compute; each
rule says why (docs/compiler.md, "Elementwise, pooling, data movement").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.ir import Block, Operator
from compiler.npu.base import CommandWriter, EmitContext, home_addresses
from compiler.npu.base import const_value, scalar
from firmware_model.errors import NpuBenchError
from firmware_model.arch.isa import LutMode, Opcode, OutMode, Reg, Sram
from firmware_model.arch.isa import encode_param_records
from firmware_model.arch.checks import LUT_ENTRIES
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import attr_value
from firmware_model.tosa_ops.registry import OpCall

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48


def claimed(op: Operator) -> bool:
    """An op an earlier lowering decision already put into an NPU operation."""
    return bool(op.annotations.get("lowered"))


def only_consumer(block: Block, consumers: dict, name: str) -> Operator | None:
    """The one op reading `name` when exactly one does, it is not a graph output and no NPU
    operation claimed the reader yet."""
    users = consumers.get(name, [])
    if len(users) != 1 or name in block.outputs or claimed(users[0]):
        return None
    return users[0]


def zero_extend(v: int, dtype: DType) -> int:
    return int(v) & dtype.umax


@dataclass
class RescaleInfo:
    """A RESCALE's constant operands and attributes, zero points zero-extended where unsigned."""
    op: Operator
    multiplier: np.ndarray      # int64 (1 or per-channel values)
    shift: np.ndarray           # int64
    input_zp: int
    output_zp: int
    scale32: bool
    double_round: bool
    input_unsigned: bool
    output_unsigned: bool
    in_dtype: DType
    out_dtype: DType

    @property
    def per_tensor(self) -> bool:
        return self.multiplier.size == 1

    def pure_shift(self) -> int | None:
        """k - s when the rescale is x * 2^(k - s) exactly (multiplier 2^k with k >= s, scale32,
        int32 output): (v * 2^k + 2^(s-1)) >> s = v << (k - s) since 2^(s-1) < 2^s divides
        v * 2^k; no double-rounding term (s <= k <= 30 < 32); output zero point 0 (int32 output)
        and the int32 clip does nothing. Else None."""
        if not (self.scale32 and self.per_tensor and self.out_dtype == I32 and self.output_zp == 0):
            return None
        m, s = int(self.multiplier[0]), int(self.shift[0])
        if m <= 0 or m & (m - 1):
            return None
        k = m.bit_length() - 1
        return k - s if k >= s else None


def rescale_info(block: Block, producers: dict, op: Operator) -> RescaleInfo | str:
    """The RESCALE's constants, or why the NPU cannot run it exactly (then it stays on the host)."""
    if len(op.inputs) != 5:
        return "RESCALE with an unexpected operand count"
    x, mult, shift, izp_name, ozp_name = op.inputs
    m, s = const_value(block, producers, mult), const_value(block, producers, shift)
    izp, ozp = scalar(const_value(block, producers, izp_name)), scalar(const_value(block, producers, ozp_name))
    if m is None or s is None or izp is None or ozp is None:
        return "RESCALE whose multiplier, shift or zero points are not constants"
    a = op.attrs
    in_t, out_t = block.tensor(x).dtype, block.tensor(op.outputs[0]).dtype
    if in_t not in (I8, I16, I32, I48) or out_t not in (I8, I16, I32):
        return f"RESCALE {in_t.name} -> {out_t.name}"
    rounding = int(a.get("rounding_mode", numerics.SINGLE_ROUND))
    scale32 = bool(a.get("scale32", False))
    if rounding not in (numerics.SINGLE_ROUND, numerics.DOUBLE_ROUND):
        return "RESCALE with INEXACT_ROUND (not implemented)"
    if rounding == numerics.DOUBLE_ROUND and not scale32:
        return "RESCALE with DOUBLE_ROUND and scale32 false (an ERROR_IF)"
    if scale32 and in_t == I48:
        return "RESCALE of int48 with scale32 (an ERROR_IF)"
    m = m.astype(np.int64).reshape(-1)
    s = s.astype(np.int64).reshape(-1)
    if m.size != s.size or m.size == 0:
        return "RESCALE with multiplier and shift of different lengths"
    if np.any(s < 2) or np.any(s > 62) or np.any(m < 0):
        return "RESCALE whose multiplier or shift breaks a REQUIRE (the host reports it)"
    in_u, out_u = bool(a.get("input_unsigned", False)), bool(a.get("output_unsigned", False))
    if in_u and in_t not in (I8, I16) or out_u and out_t not in (I8, I16) or in_u and out_u:
        return "RESCALE with an unsigned type combination the spec forbids"
    return RescaleInfo(op, m, s, zero_extend(izp, in_t) if in_u else izp, zero_extend(ozp, out_t) if out_u else ozp,
                       scale32, rounding == numerics.DOUBLE_ROUND, in_u, out_u, in_t, out_t)


def clamp_bounds(op: Operator, dtype: DType) -> tuple[int, int] | None:
    """CLAMP's min_val / max_val as ints, read as the kernel reads them (op_utils.attr_value: an
    int or the element's little-endian bytes); None when they are missing or min > max."""
    call = OpCall(op.op, dict(op.attrs), [], [], [], where="lowering")
    try:
        lo, hi = attr_value(call, "min_val", dtype), attr_value(call, "max_val", dtype)
    except NpuBenchError:
        return None
    return (lo, hi) if lo <= hi else None


# --------------------------------------------------------------------------------------------
# The output stage

@dataclass
class StageSpec:
    """What the output stage does after the unit's result (docs/isa.md, the output stage)."""
    value_dtype: DType                       # type of the unit's result (before the stage)
    multiplier: np.ndarray | None = None     # per channel (int64); None: no rescale
    shift: np.ndarray | None = None
    scale32: bool = True
    double_round: bool = False
    output_unsigned: bool = False
    output_zp: int = 0
    rescale_dtype: DType | None = None
    clamp: tuple[int, int] | None = None
    lut_mode: LutMode = LutMode.OFF
    table: np.ndarray | None = None          # int16 entries (int8 tables sign-extended)
    ops: list[Operator] = field(default_factory=list)
    rescale_info: "RescaleInfo | None" = None   # the fused RESCALE (its REQUIREs: compiler/npu/requires.py)

    @property
    def rescale(self) -> bool:
        return self.multiplier is not None

    @property
    def channels(self) -> int:
        return 0 if self.multiplier is None else int(self.multiplier.size)

    @property
    def out_dtype(self) -> DType:
        if self.lut_mode == LutMode.INT16:
            return I32
        if self.lut_mode == LutMode.INT8:
            return I8
        return self.rescale_dtype if self.rescale else self.value_dtype

    def range(self) -> tuple[int, int]:
        """The clamp registers: the type's range (unsigned after an unsigned rescale) cut by CLAMP."""
        t = self.rescale_dtype if self.rescale else self.value_dtype
        if t == I48:
            lo, hi = I32.min, I32.max      # only with a rescale, which saturates first
        elif self.rescale and self.output_unsigned:
            lo, hi = 0, t.umax
        else:
            lo, hi = t.min, t.max
        if self.clamp is not None:
            lo, hi = max(lo, self.clamp[0]), min(hi, self.clamp[1])
        return lo, hi

    def describe(self) -> str:
        parts = []
        if self.rescale:
            parts.append(f"rescale->{'u' if self.output_unsigned else ''}{self.rescale_dtype.name.lower()}"
                         f"{' per-channel' if self.channels > 1 else ''}{' double-round' if self.double_round else ''}"
                         f"{'' if self.scale32 else ' scale16'}")
        if self.clamp is not None:
            parts.append(f"clamp [{self.clamp[0]}, {self.clamp[1]}]")
        if self.lut_mode != LutMode.OFF:
            parts.append(f"table {self.lut_mode.name.lower()}")
        return ", ".join(parts)

    def regs(self, lut_addr: int = 0) -> dict[Reg, int]:
        mode = 0
        if self.rescale:
            mode = (OutMode.RESCALE | (OutMode.SCALE32 if self.scale32 else 0)
                    | (OutMode.DOUBLE_ROUND if self.double_round else 0)
                    | (OutMode.UNSIGNED_OUT if self.output_unsigned else 0))
        lo, hi = self.range()
        regs = {Reg.OUT_MODE: int(mode), Reg.OFM_ZP: self.output_zp if self.rescale else 0,
                Reg.CLAMP_MIN: lo, Reg.CLAMP_MAX: hi, Reg.LUT_MODE: int(self.lut_mode),
                Reg.RESCALE_DTYPE: int(self.rescale_dtype if self.rescale else I32),
                Reg.OFM_DTYPE: int(self.out_dtype)}
        if self.lut_mode != LutMode.OFF:       # read only with a table: left as it is otherwise
            regs[Reg.LUT_ADDR] = lut_addr
        return regs

    def blobs(self) -> dict[str, bytes]:
        out = {}
        if self.rescale:
            out["params"] = encode_param_records(np.zeros(self.channels, np.int64), self.multiplier, self.shift)
        if self.table is not None:
            out["lut"] = np.ascontiguousarray(self.table, dtype="<i2").tobytes()
        return out

    def set_rescale(self, info: RescaleInfo, channels: int) -> bool:
        """Take a RESCALE into the stage (per tensor, or per channel along the last axis of
        `channels`); False when its parameter count does not fit."""
        if info.multiplier.size not in (1, channels):
            return False
        self.multiplier, self.shift = info.multiplier, info.shift
        self.scale32, self.double_round = info.scale32, info.double_round
        self.output_unsigned, self.output_zp, self.rescale_dtype = info.output_unsigned, info.output_zp, info.out_dtype
        self.rescale_info = info
        self.ops.append(info.op)
        return True


def extend_stage(block: Block, producers: dict, consumers: dict, stage: StageSpec, name: str, *,
                 channels: int, allow_rescale: bool, rescale_input_zp_ok: bool = False) -> str:
    """Follow `name` (the unit's result, or the stage's output so far) through a RESCALE (when
    allowed and the stage has none), a CLAMP and a TABLE, each only when it is the sole reader of
    the previous result. Returns the name of the final output.

    Exactness: the stage's rescale has no input zero point, so a RESCALE is taken only with input
    zero point 0 and a signed input (its int32/int8 value is the unit's value); a CLAMP or TABLE
    reads the stored type signed, so neither is taken after an unsigned rescale; a CLAMP is taken
    with the type it clamps; a TABLE whose input type has its table length (int8: 256 entries,
    int16: 513)."""
    nxt = only_consumer(block, consumers, name)
    if (allow_rescale and not stage.rescale and nxt is not None and nxt.op == "RESCALE"
            and stage.lut_mode == LutMode.OFF and stage.clamp is None):
        info = rescale_info(block, producers, nxt)
        if (isinstance(info, RescaleInfo) and info.input_zp == 0 and not info.input_unsigned
                and info.in_dtype == block.tensor(name).dtype and stage.set_rescale(info, channels)):
            name = nxt.outputs[0]
            nxt = only_consumer(block, consumers, name)
    if stage.rescale and stage.output_unsigned:
        return name
    if nxt is not None and nxt.op == "CLAMP" and take_clamp(block, stage, nxt):
        name = nxt.outputs[0]
        nxt = only_consumer(block, consumers, name)
    if nxt is not None and nxt.op == "TABLE" and take_table(block, producers, stage, nxt):
        name = nxt.outputs[0]
    return name


def take_clamp(block: Block, stage: StageSpec, op: Operator) -> bool:
    """Put a CLAMP into the stage (before any table; on int8/int16, its own type in and out)."""
    cur = block.tensor(op.inputs[0]).dtype
    if stage.lut_mode != LutMode.OFF or cur not in (I8, I16) or block.tensor(op.outputs[0]).dtype != cur:
        return False
    bounds = clamp_bounds(op, cur)
    if bounds is None:
        return False
    lo, hi = bounds
    if stage.clamp is not None:
        lo, hi = max(lo, stage.clamp[0]), min(hi, stage.clamp[1])
    if lo > hi:
        return False
    stage.clamp = (lo, hi)
    stage.ops.append(op)
    return True


def take_table(block: Block, producers: dict, stage: StageSpec, op: Operator) -> bool:
    """Put a TABLE with a constant table into the stage: int8 (256 entries) -> int8, or int16 (513
    entries, interpolated) -> int32. An int16 table may have slopes beyond int16: apply_lookup_s
    REQUIREs only the slopes of the entries used to fit, a condition on the data like ADD's
    overflow; the LUT engine computes the slope exactly in 17 bits, so every result the kernel
    returns is the engine's too."""
    if stage.lut_mode != LutMode.OFF or len(op.inputs) != 2:
        return False
    table = const_value(block, producers, op.inputs[1])
    cur, out_t = block.tensor(op.inputs[0]).dtype, block.tensor(op.outputs[0]).dtype
    mode = {(I8, 256, I8): LutMode.INT8, (I16, 513, I32): LutMode.INT16}.get(
        (cur, None if table is None else table.size, out_t))
    if mode is None:
        return False
    stage.lut_mode = mode
    stage.table = table.astype(np.int64).reshape(-1)
    stage.ops.append(op)
    return True


def load_params(w: CommandWriter, ectx: EmitContext, first: int, count: int, record: int) -> None:
    """DMA_LOAD parameter records [first, first+count) of the stage to record index `record`."""
    w.dma(Opcode.DMA_LOAD, Sram.PARAM, ext=ectx.constants["params"] + first * PARAM_RECORD_BYTES,
          sram_addr=record * PARAM_RECORD_BYTES, len0=count * PARAM_RECORD_BYTES)


def param_home(ectx: EmitContext, slot: int, first: int, count: int) -> int:
    """The record index where parameter buffer `slot` takes the stage's records [first,
    first+count): the buffer's start, or, when several operations load the same records (an
    elementwise operation of a recurrent cell, step after step), their home at the buffer's end
    (base.ConstantHomes), where they stay resident."""
    blob = ectx.constants["params"]
    home = home_addresses(ectx, slot, blob + first * PARAM_RECORD_BYTES, {Sram.PARAM: count}, blob)
    return ectx.buffers[Sram.PARAM][slot] if home is None else home[Sram.PARAM]


def load_table(w: CommandWriter, ectx: EmitContext, stage: StageSpec, entry: int = 0) -> None:
    """DMA_LOAD the stage's table into the LUT SRAM from entry `entry` (16-bit entries)."""
    w.dma(Opcode.DMA_LOAD, Sram.LUT, ext=ectx.constants["lut"], sram_addr=2 * entry, len0=2 * stage.table.size)


class LutTables:
    """The tables the LUT SRAM holds at this point of the program (in emission order), so that an
    operation whose table is already there points LUT_ADDR at it instead of loading it again: an
    LSTM cell's sigmoid and tanh are loaded once per invocation, not once per gate and step.

    A table that more than one operation uses (`reused`, known from the whole graph) goes to the
    next free place after the scratch areas, from a word boundary (`align` entries); when the
    rest of the SRAM is too small it starts again after them, and the tables it covers are
    forgotten. A table used once is loaded into a scratch area and not kept. There are two
    scratch areas of one table each when the SRAM has room for three tables, else one, at entry
    0: a single-use table takes the one the last took, or the other one when the command before
    it reads a table there, so that it can be loaded while that command runs. A table kept is only ever loaded between compute commands; one
    for a scratch area may be prefetched under a command that reads no byte of it
    (compiler/npu/prefetch.py checks that). No command reads a table it did not point at, so
    overwriting a forgotten one is safe. The program starts each invocation with nothing assumed
    resident."""

    def __init__(self, entries: int, align: int, reused: set[bytes] = frozenset()):
        self.entries = entries
        self.align = max(1, align)
        self.reused = reused
        one = -(-max(LUT_ENTRIES.values()) // self.align) * self.align
        self.areas = (0, one) if 3 * one <= entries else (0,)
        self.turn = 0                                    # the scratch area the last one took
        self.scratch = one * len(self.areas)             # where the kept tables start
        self.held: dict[bytes, tuple[int, int]] = {}     # table bytes -> (first entry, entries)
        self.next = self.scratch

    def entry_of(self, stage: StageSpec) -> int | None:
        """Where the stage's table is resident, or None."""
        got = self.held.get(_table_key(stage))
        return None if got is None else got[0]

    def scratch_only(self, stage: StageSpec) -> bool:
        """Whether the stage's table goes to a scratch area (used once): placing it changes
        nothing this object remembers but which scratch area the last one took."""
        return _table_key(stage) not in self.reused or self.scratch + stage.table.size > self.entries

    def place(self, w: CommandWriter, ectx: EmitContext, stage: StageSpec) -> int:
        """The stage's table's first entry, loading it there unless resident."""
        key = _table_key(stage)
        if key in self.held:
            return self.held[key][0]
        size = stage.table.size
        start = -(-self.next // self.align) * self.align
        if self.scratch_only(stage):
            # the area the last one took (its address registers need no SET), unless the
            # command whose registers are set (the one before, or the one running while this
            # load is prefetched) reads a table there
            in_use = w.regs.get(Reg.LUT_ADDR, 0) if w.regs.get(Reg.LUT_MODE, 0) != LutMode.OFF else None
            entry = self.areas[self.turn]
            if entry == in_use and len(self.areas) > 1:
                self.turn = 1 - self.turn
                entry = self.areas[self.turn]
            load_table(w, ectx, stage, entry=entry)
            return entry
        if start + size > self.entries:
            start = self.scratch
        end = start + size
        self.held = {k: (e, n) for k, (e, n) in self.held.items() if e + n <= start or e >= end}
        load_table(w, ectx, stage, entry=start)
        self.held[key] = (start, size)
        self.next = end
        return start

    @staticmethod
    def reused_tables(stages) -> set[bytes]:
        """The tables more than one of these stages uses."""
        seen: dict[bytes, int] = {}
        for st in stages:
            if st is not None and st.table is not None:
                k = _table_key(st)
                seen[k] = seen.get(k, 0) + 1
        return {k for k, n in seen.items() if n > 1}


def _table_key(stage: StageSpec) -> bytes:
    return np.ascontiguousarray(stage.table, dtype="<i2").tobytes()


def place_table(w: CommandWriter, ectx: EmitContext, stage: StageSpec) -> int:
    """The first LUT entry of the stage's table, loaded there unless the LUT SRAM holds it already
    (`ectx.luts`; without it, loaded at entry 0)."""
    if ectx.luts is None:
        load_table(w, ectx, stage)
        return 0
    return ectx.luts.place(w, ectx, stage)


def table_fits(cfg: NpuConfig, stage: StageSpec) -> bool:
    return stage.table is None or stage.table.size <= cfg.lut_entries
