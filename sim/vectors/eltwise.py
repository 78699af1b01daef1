"""Stimulus, expected results, coverage and mutations for the elementwise unit bench (hw/eltwise_unit.py).

The unit's `cfg` port holds one ELTWISE command's registers, so a run is one *command*: random
registers (operation, operand types, zero points, left shifts, input rescales with single or
double rounding, MUL shift, ROUND, scalar operands, per-channel output records, the output
stage's RESCALE / CLAMP / TABLE) and operand data. The expected results are the golden model's
own: `firmware_model.golden.eltwise_unit.execute_eltwise` runs the command on a `Memories` holding the
operands (A in the input SRAM, B in the weight SRAM), the parameter records and the LUT tables,
and its `out_values` are what the unit must produce element by element. The test side only lays
data out as the sequencer would: the registers onto the unit's `cfg` fields (`unit_config`),
element i of A and B (element 0 with A_SCALAR / B_SCALAR; the unused upper bits of each element
field filled with garbage, which the unit must ignore), record i % ELT_CHANNELS.

Coverage classifies every element with golden calls too (`input_stage`, `eltwise_op`,
`output_stage.apply_output_stage` with the rescale widened to int32 or the clamp opened): which
operation, which operands were rescaled and how they rounded, whether ADD/SUB/MUL wrapped past
int32 on which side, whether the output rescale saturated or the clamp cut on which side, the
operand types.

Each suite starts with a run that writes the LUT tables (the `w` stream) and no elements; the
LUT SRAM keeps them for the suite's commands. Suites (`suites()`): random commands, corner
commands (every operation at its operand extremes and types, wraps, shift amounts 0..31 and
beyond, lshift 0 / 31 / >= 32, zero points at their extremes, input rescale shifts 0, 1, 2, 31,
32, 62, 63, MUL shifts 0..63, tables, clamps), coverage closure (random commands aimed at the
bins the first two left unhit, kept only when they hit one), long commands at full speed
(throughput) and the random commands again with gaps and back-pressure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim import seeds
from firmware_model.golden.eltwise_unit import SHIFT_OPS, eltwise_op, execute_eltwise, input_stage
from firmware_model.arch.isa import ELEMENT_BYTES, EltMode, EltOp, LutMode, OutMode, Reg, Sram
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories
from firmware_model.arch.isa import encode_param_records
from firmware_model.golden.output_stage import apply_output_stage
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType
from hw.register_map import map_values
from sim.verification.gateware.vector_harness import PayloadCodec
from sim.verification.coverage import CoverageModel, CoverPoint, Cross, close_coverage
from sim.vectors.output_stage import (ALL_ONES, ENTRIES, I32, NPU, OUT_KINDS, OUTPUT_STAGE_WAIVERS, OutStage, output_registers, random_out_stage, table_run)
from sim.verification.contract import UnitContract
from sim.verification.unit_bench import LintWaiver, Mutation, UnitBench, UnitSpec, VectorRun, assert_results_match, lint_unit

DEPTH = 16384

# Operand kinds: (label, dtype, read unsigned)
KINDS = (("int8", DType.INT8, False), ("uint8", DType.INT8, True), ("int16", DType.INT16, False),
         ("uint16", DType.INT16, True), ("int32", DType.INT32, False), ("int48", DType.INT48, False))
KIND = {k[0]: i for i, k in enumerate(KINDS)}
OPS = tuple(EltOp)


def kind_range(label: str) -> tuple[int, int]:
    _, dt, uns = KINDS[KIND[label]]
    return (0, dt.umax) if uns else (dt.min, dt.max)


# ---------------------------------------------------------------------------------------------
# The unit's configuration from the registers (the sequencer's mapping)

def _unit():
    from hw.eltwise_unit import EltwiseUnit

    return EltwiseUnit(ENTRIES)


def config_codec() -> PayloadCodec:
    from hw.eltwise_unit import config_layout

    return PayloadCodec(config_layout(ENTRIES))


_CODEC: list = []


def unit_config(regs: dict[int, int], op: int) -> int:
    """The `cfg` port's bits for an ELTWISE command: the unit's register map (hw/eltwise_unit.py)
    evaluated on the registers, packed as the port's layout."""
    from hw.eltwise_unit import REGISTER_MAP

    if not _CODEC:
        _CODEC.append(config_codec())
    return _CODEC[0].pack(map_values(REGISTER_MAP, regs, op), n=1)[0]


# ---------------------------------------------------------------------------------------------
# Commands

@dataclass
class Operand:
    kind: int                    # index into KINDS
    values: np.ndarray           # the elements as read (signed, or zero-extended when unsigned)
    zp: int = 0
    lshift: int = 0
    rescale: bool = False
    multiplier: int = 1 << 30
    shift: int = 30
    double_round: bool = False
    scalar: bool = False


@dataclass
class EltCommand:
    label: str
    op: int
    a: Operand
    b: Operand | None
    out: OutStage
    count: int
    mul_shift: int = 0
    round_: bool = False
    regs: dict = field(default_factory=dict)
    expected: np.ndarray | None = None
    fields: dict = field(default_factory=dict)


def _operand_mode(x: Operand, side: str) -> EltMode:
    """The ELT_MODE bits of operand A or B (`side`)."""
    mode = EltMode(0)
    for on, flag in ((x.rescale, "RESCALE"), (x.double_round, "DOUBLE_ROUND"), (KINDS[x.kind][2], "UNSIGNED"),
                     (x.scalar, "SCALAR")):
        if on:
            mode |= EltMode[f"{side}_{flag}"]
    return mode


def _registers(c: EltCommand) -> dict[int, int]:
    a, b, o = c.a, c.b, c.out
    mode = _operand_mode(a, "A")
    if c.round_:
        mode |= EltMode.ROUND
    regs = {
        Reg.ELT_A_ADDR: 0, Reg.ELT_B_ADDR: 0, Reg.ELT_OUT_ADDR: 0, Reg.ELT_COUNT: c.count,
        Reg.ELT_A_DTYPE: int(KINDS[a.kind][1]), Reg.ELT_A_ZP: a.zp & ALL_ONES, Reg.ELT_A_LSHIFT: a.lshift & ALL_ONES,
        Reg.ELT_A_MULT: a.multiplier & ALL_ONES, Reg.ELT_A_SHIFT: a.shift, Reg.ELT_SHIFT: c.mul_shift,
        Reg.ELT_CHANNELS: o.channels, **output_registers(o),
    }
    if b is not None:
        mode |= _operand_mode(b, "B")
        regs.update({Reg.ELT_B_DTYPE: int(KINDS[b.kind][1]), Reg.ELT_B_ZP: b.zp & ALL_ONES,
                     Reg.ELT_B_LSHIFT: b.lshift & ALL_ONES, Reg.ELT_B_MULT: b.multiplier & ALL_ONES,
                     Reg.ELT_B_SHIFT: b.shift})
    regs[Reg.ELT_MODE] = int(mode)
    return regs


def _store(mem: Memories, sram: Sram, values: np.ndarray, dtype: DType, rng) -> None:
    size = ELEMENT_BYTES[dtype]
    v = np.asarray(values, dtype=np.int64)
    if dtype == DType.INT48:
        # int48 elements travel in 8 bytes; the upper two are not part of the element
        v = (v & ((1 << 48) - 1)) | (rng.integers(0, 1 << 16, v.size) << 48)
    raw = v.astype(f"<i{size}" if size < 8 else "<i8").view(np.uint8)
    mem.sram[sram][:raw.size] = raw


def _element_bits(values: np.ndarray, dtype: DType, rng) -> np.ndarray:
    """The unit's 48-bit element field: the element's bits, garbage above them."""
    bits = dtype.bits
    low = np.asarray(values, dtype=np.int64) & ((1 << bits) - 1)
    if bits >= 48:
        return low
    return low | (rng.integers(0, 1 << (48 - bits), low.size) << bits)


def finish(c: EltCommand, mem: Memories, rng) -> EltCommand:
    """Registers, golden expected values (execute_eltwise) and the unit's element fields."""
    c.regs = _registers(c)
    a_dt = KINDS[c.a.kind][1]
    _store(mem, Sram.INPUT, c.a.values, a_dt, rng)
    if c.b is not None:
        _store(mem, Sram.WEIGHT, c.b.values, KINDS[c.b.kind][1], rng)
    nrec = max(1, c.out.channels)
    mult = np.resize(c.out.multipliers, nrec)
    shift = np.resize(c.out.shifts, nrec)
    rec = encode_param_records(np.zeros(nrec, np.int64), mult, shift)
    mem.sram[Sram.PARAM][:len(rec)] = np.frombuffer(rec, dtype=np.uint8)
    res = execute_eltwise(NPU, mem, c.regs, int(c.op))
    c.expected = res.out_values.astype(np.int64)
    n = c.count
    idx = np.arange(n)
    a_vals = np.broadcast_to(c.a.values[:1], (n,)) if c.a.scalar else c.a.values[:n]
    if c.b is not None:
        b_vals = np.broadcast_to(c.b.values[:1], (n,)) if c.b.scalar else c.b.values[:n]
        b_bits = _element_bits(b_vals, KINDS[c.b.kind][1], rng)
    else:
        b_bits = rng.integers(0, 1 << 48, n)          # COPY reads no B: garbage
    rec_i = idx % nrec
    if c.out.rescale:
        m_el, s_el = mult[rec_i], shift[rec_i]
    else:                                              # not read without RESCALE: garbage
        m_el, s_el = rng.integers(-(1 << 31), 1 << 31, n), rng.integers(0, 64, n)
    c.fields = {"a": _element_bits(a_vals, a_dt, rng), "b": b_bits, "multiplier": m_el, "shift": s_el}
    return c


# ---------------------------------------------------------------------------------------------
# Random commands

def _draw(rng, label: str, n: int, extremes: float = 0.25) -> np.ndarray:
    lo, hi = kind_range(label)
    v = rng.integers(lo, hi, n, endpoint=True)
    ext = np.array([lo, lo + 1, -1 if lo < 0 else 1, 0, 1, hi - 1, hi])
    pick = rng.random(n) < extremes
    v[pick] = rng.choice(ext, pick.sum())
    return v


def _draw_zp(rng, label: str) -> int:
    r = rng.random()
    if r < 0.08:
        return int(rng.integers(-(1 << 31), 1 << 31))     # any register value: the datapath's own
    if label == "int8":
        return int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    if label == "uint8":
        return int(rng.choice([0, 255, 128, int(rng.integers(0, 256))]))
    if label == "uint16":
        return int(rng.choice([0, 32768]))
    return 0 if r < 0.8 else int(rng.integers(-1000, 1000))


def _input_scale(rng, bits: int, lshift: int) -> tuple[int, int]:
    """Multiplier and shift: a gain that maps the shifted operand onto a random magnitude."""
    target = rng.uniform(4, 31)
    mult = int(rng.integers(1 << 30, 1 << 31))
    shift = int(np.clip(np.round(30.5 + min(bits + lshift, 32) - target), 2, 62))
    r = rng.random()
    if r < 0.08:
        shift = int(rng.choice([0, 1, 2, 31, 32, 62, 63]))
    elif r < 0.15:
        mult = int(rng.integers(0, 1 << 31))
    return mult, shift


def random_operand(rng, n: int, *, label: str | None = None, shift_amounts: bool = False,
                   allow_int48: bool = True) -> Operand:
    labels = [k[0] for k in KINDS if allow_int48 or k[0] != "int48"]
    label = label or str(rng.choice(labels))
    bits = KINDS[KIND[label]][1].bits
    values = _draw(rng, label, n)
    if shift_amounts:                                   # mostly amounts 0..31, some anything
        small = rng.random(n) < 0.75
        lo, hi = kind_range(label)
        values[small] = np.clip(rng.integers(0, 32, small.sum()), lo, hi)
    op = Operand(KIND[label], values, zp=_draw_zp(rng, label))
    if shift_amounts and rng.random() < 0.7:
        op.zp = 0
    op.rescale = bool(rng.random() < 0.5)
    r = rng.random()
    if op.rescale:
        op.lshift = {8: 20, 16: 15}.get(bits, 0) if r < 0.6 else int(rng.integers(0, 32)) if r < 0.9 \
            else int(rng.choice([32, 33, 63, ALL_ONES]))
        op.multiplier, op.shift = _input_scale(rng, bits, op.lshift & 31)
        op.double_round = bool(rng.random() < 0.5)
    else:
        op.lshift = 0 if r < 0.7 else int(rng.integers(1, 32)) if r < 0.95 else int(rng.choice([32, 64, ALL_ONES]))
        if rng.random() < 0.2:                          # registers the command does not use
            op.multiplier, op.shift = int(rng.integers(0, 1 << 31)), int(rng.integers(0, 64))
            op.double_round = bool(rng.random() < 0.5)
    return op


def random_command(rng, mem: Memories, label: str, *, op: int | None = None, count: int | None = None,
                   out_rescale: bool | None = None) -> EltCommand:
    op = EltOp(int(rng.choice(OPS)) if op is None else op)
    count = int(rng.integers(1, 49)) if count is None else count
    shift_op = op in SHIFT_OPS
    a = random_operand(rng, count, allow_int48=not shift_op)
    b = None if op == EltOp.COPY else random_operand(rng, count, shift_amounts=shift_op)
    a.scalar = bool(rng.random() < 0.08)
    if b is not None:
        b.scalar = bool(rng.random() < 0.12)
    c = EltCommand(label, int(op), a, b, OutStage(), count)
    if op == EltOp.MUL:
        c.mul_shift = 0 if rng.random() < 0.35 else int(rng.integers(1, 64))
    if op == EltOp.ARITHMETIC_RIGHT_SHIFT:
        c.round_ = bool(rng.random() < 0.5)
    # the operation's values without an output stage, to choose the stage's scales
    finish(c, mem, rng)
    c.out = random_out_stage(rng, c.expected, count, rescale=out_rescale)
    return finish(c, mem, rng)


# ---------------------------------------------------------------------------------------------
# Corner commands

def corner_commands(rng, mem: Memories) -> list[EltCommand]:
    out = []

    def cmd(op, a: Operand, b: Operand | None, *, mul_shift=0, round_=False, o: OutStage | None = None):
        n = len(a.values) if not a.scalar else (len(b.values) if b is not None else 1)
        assert n > 0, "a corner command without elements"
        c = EltCommand("corners", int(op), a, b, o or OutStage(), n, mul_shift, round_)
        out.append(finish(c, mem, rng))

    def grid(la, lb):
        """Every pair of the two kinds' extremes and some values between."""
        ea = np.array(sorted({*kind_range(la), kind_range(la)[0] + 1, kind_range(la)[1] - 1, -1 if kind_range(la)[0] < 0 else 2, 0, 1}))
        eb = np.array(sorted({*kind_range(lb), kind_range(lb)[0] + 1, kind_range(lb)[1] - 1, -1 if kind_range(lb)[0] < 0 else 2, 0, 1}))
        return np.repeat(ea, len(eb)), np.tile(eb, len(ea))

    # every binary operation on every pair of operand kinds, extremes against extremes
    for op in (EltOp.ADD, EltOp.SUB, EltOp.MUL, EltOp.MINIMUM, EltOp.MAXIMUM):
        for la in (k[0] for k in KINDS):
            for lb in ("int8", "uint16", "int32", "int48"):
                va, vb = grid(la, lb)
                cmd(op, Operand(KIND[la], va), Operand(KIND[lb], vb), mul_shift=int(rng.integers(0, 64)) if op == EltOp.MUL else 0)
    # int32 wraps both ways: ADD/SUB/MUL of the extremes, MUL at every shift 0..63
    big = np.array([I32[0], I32[0] + 1, -(1 << 30), -1, 0, 1, 1 << 30, I32[1] - 1, I32[1]])
    va, vb = np.repeat(big, len(big)), np.tile(big, len(big))
    for op in (EltOp.ADD, EltOp.SUB):
        cmd(op, Operand(KIND["int32"], va), Operand(KIND["int32"], vb))
    for sh in range(64):
        cmd(EltOp.MUL, Operand(KIND["int32"], va), Operand(KIND["int32"], vb), mul_shift=sh)
    # rounding ties of the MUL shift: products (2k + 1) << (sh - 1)
    for sh in range(1, 32):
        k = rng.integers(-(1 << min(10, 31 - sh)), 1 << min(10, 31 - sh), 12)
        prod = (2 * k + 1) << (sh - 1)
        prod = prod[(prod >= I32[0]) & (prod <= I32[1])]
        cmd(EltOp.MUL, Operand(KIND["int32"], prod), Operand(KIND["int32"], np.ones_like(prod)), mul_shift=sh)
    # shifts: every amount 0..31 (and amounts beyond, masked to 5 bits) on each width's extremes
    for op in SHIFT_OPS:
        for la in ("int8", "uint8", "int16", "uint16", "int32"):
            lo, hi = kind_range(la)
            vals = np.array([lo, lo + 1, -1 if lo < 0 else 3, 1, 0x55 & hi, hi - 1, hi, -85 if lo < 0 else 170])
            amounts = np.concatenate([np.arange(32), [32, 33, 40, 127, -1, -32]])
            amounts = np.clip(amounts, *kind_range("int8")) if la.endswith("int8") else amounts
            va, vb = np.repeat(vals, len(amounts)), np.tile(amounts, len(vals))
            for rnd in ((False, True) if op == EltOp.ARITHMETIC_RIGHT_SHIFT else (False,)):
                cmd(op, Operand(KIND[la], va), Operand(KIND["int8" if la.endswith("int8") else "int32"], vb),
                    round_=rnd)
    # COPY of int48 extremes through no stage (48 bits into the clamp), the clamp cutting them
    v48 = np.array([-(1 << 47), -(1 << 47) + 1, I32[0] - 1, I32[0], -1, 0, 1, I32[1], I32[1] + 1, (1 << 47) - 1])
    cmd(EltOp.COPY, Operand(KIND["int48"], v48), None)
    cmd(EltOp.COPY, Operand(KIND["int48"], v48), None, o=OutStage(clamp=(-5, 7)))
    # COPY through apply_scale_16 (48-bit operand) and apply_scale_32 (its low 32 bits)
    for scale32 in (False, True):
        for kind in range(len(OUT_KINDS)):
            o = OutStage(rescale=True, scale32=scale32, kind=kind,
                         zp={"uint16": 32768, "uint8": 255, "int8": -128}.get(OUT_KINDS[kind][0], 0),
                         multipliers=np.array([(1 << 14) if not scale32 else (1 << 30), 32767 if not scale32 else (1 << 31) - 1, 12345]),
                         shifts=np.array([14 if not scale32 else 30, 20, 62]), channels=3)
            cmd(EltOp.COPY, Operand(KIND["int48"], np.repeat(v48, 3)), None, o=o)
    # the input stage: lshift 0, 1, 31, 32 (a register value >= 32 enables the stage, shifts by & 31),
    # zero points at their extremes, rescale shifts 0, 1, 2, 31, 32, 62, 63 with both roundings
    for la in (k[0] for k in KINDS):
        lo, hi = kind_range(la)
        vals = np.array([lo, lo + 1, -1 if lo < 0 else 2, 0, 1, hi - 1, hi])
        zps = {"int8": (-128, 127), "uint8": (0, 255), "uint16": (0, 32768)}.get(la, (0, I32[0], I32[1]))
        for zp in zps:
            for lshift in (0, 1, 20, 31, 32, 0xFFFFFFFF):
                cmd(EltOp.COPY, Operand(KIND[la], vals, zp=zp, lshift=lshift), None)
            for sh in (0, 1, 2, 31, 32, 62, 63):
                for dr in (False, True):
                    for lshift in (0, 15):
                        cmd(EltOp.ADD, Operand(KIND[la], vals, zp=zp, lshift=lshift, rescale=True,
                                               multiplier=(1 << 31) - 1, shift=sh, double_round=dr),
                            Operand(KIND["int8"], np.zeros_like(vals)))
    # double rounding around its tie with multiplier 2^30: (q << (sh - 30)) + r at shift 31..40
    for sh in range(30, 41):
        q = rng.integers(-(1 << 10), 1 << 10, 6)
        tie = 1 << (sh - 31) if sh >= 31 else 0
        v = np.concatenate([(q << max(sh - 30, 0)) + r for r in (tie - 1, tie, tie + 1)])
        for dr in (False, True):
            cmd(EltOp.SUB, Operand(KIND["int32"], np.clip(v, *I32), rescale=True, multiplier=1 << 30, shift=sh,
                                   double_round=dr),
                Operand(KIND["int32"], v[::-1].copy(), rescale=True, multiplier=1 << 30, shift=sh, double_round=dr))
    # a quantised ADD as TFLite lowers it (both inputs rescaled with single rounding) whose output
    # rescale saturates int8 on both sides
    va, vb = _draw(rng, "int8", 64, extremes=0.6), _draw(rng, "int8", 64, extremes=0.6)
    for dr in (False, True):
        cmd(EltOp.ADD, Operand(KIND["int8"], va, zp=-5, lshift=20, rescale=True, multiplier=1 << 30, shift=31,
                               double_round=dr),
            Operand(KIND["int8"], vb, zp=3, lshift=20, rescale=True, multiplier=(1 << 30) + 12345, shift=31,
                    double_round=dr),
            o=OutStage(rescale=True, kind=0, zp=7, multipliers=np.array([1 << 30]), shifts=np.array([20])))
    # shift results through the int16 table
    sv = _draw(rng, "int16", 64)
    cmd(EltOp.LOGICAL_LEFT_SHIFT, Operand(KIND["int16"], sv), Operand(KIND["int32"], rng.integers(0, 32, 64)),
        o=OutStage(lut_mode=int(LutMode.INT16)))
    # scalars on both sides, per-channel records at the parameter SRAM's end (256 channels)
    cmd(EltOp.ADD, Operand(KIND["int8"], np.array([-128]), scalar=True),
        Operand(KIND["int8"], _draw(rng, "int8", 64)))
    cmd(EltOp.MUL, Operand(KIND["int16"], _draw(rng, "int16", 64)),
        Operand(KIND["int16"], np.array([-32768]), scalar=True), mul_shift=7)
    n = 300
    o = OutStage(rescale=True, kind=0, zp=-3, channels=256, multipliers=rng.integers(1 << 30, 1 << 31, 256),
                 shifts=rng.integers(30, 40, 256))
    cmd(EltOp.ADD, Operand(KIND["int8"], _draw(rng, "int8", n)), Operand(KIND["int8"], _draw(rng, "int8", n)), o=o)
    # tables: every int8 input through the int8 table, int16 index edges through the int16 table,
    # int32 values beyond int16 (clipped by the lookup)
    o = OutStage(lut_mode=int(LutMode.INT8))
    cmd(EltOp.COPY, Operand(KIND["int8"], np.arange(-128, 128)), None, o=o)
    edges = np.unique(np.concatenate([np.arange(-32768, 32768, 128), np.arange(-32768, 32768, 128) + 127,
                                      [-32768, -1, 0, 1, 32767]]))
    cmd(EltOp.COPY, Operand(KIND["int16"], edges), None, o=OutStage(lut_mode=int(LutMode.INT16)))
    cmd(EltOp.COPY, Operand(KIND["int32"], np.array([I32[0], -32769, 32768, I32[1], 1 << 20])), None,
        o=OutStage(lut_mode=int(LutMode.INT16)))
    # the output rescale saturating both ways into every output kind, then the clamp and a table
    for kind in range(len(OUT_KINDS)):
        for lut in (LutMode.OFF, LutMode.INT16):
            o = OutStage(rescale=True, kind=kind, zp={"uint16": 32768, "uint8": 0}.get(OUT_KINDS[kind][0], 0),
                         multipliers=np.array([1 << 30]), shifts=np.array([20]), lut_mode=int(lut),
                         clamp=(-100, 30000) if lut == LutMode.OFF else I32)
            cmd(EltOp.ADD, Operand(KIND["int32"], big), Operand(KIND["int8"], np.zeros_like(big)), o=o)
    return out


# ---------------------------------------------------------------------------------------------
# Runs

def make_run(c: EltCommand, tag0: int = 0, **kw) -> VectorRun:
    n = c.count
    tags = tag0 + np.arange(n)
    return VectorRun(inputs={"i": {**c.fields, "tag": tags}}, n_out={"o": n},
                     expected={"o": {"result": c.expected, "tag": tags}},
                     static={"u_cfg": unit_config(c.regs, c.op)}, label=f"{c.label}:{tag0}", **kw)


@dataclass
class Suite:
    name: str
    runs: list[VectorRun]            # the table run first, then one run per command
    commands: list[EltCommand]       # the commands of runs[1:]


def _suite(name: str, rng, commands_fn, **kw) -> Suite:
    mem = Memories(NPU)
    runs = [table_run(rng, mem, f"{name}:tables")]
    commands = commands_fn(mem)
    tag = 0
    for c in commands:
        runs.append(make_run(c, tag, **kw))
        tag += c.count
    return Suite(name, runs, commands)


def closure_commands(rng, mem: Memories, earlier: list[EltCommand], max_draws: int = 3000) -> list[EltCommand]:
    """Coverage closure (sim.verification.coverage.close_coverage): random commands aimed at the bins `earlier`
    commands left unhit, kept only when they hit one. A missing bin that names an operation draws
    commands of that operation (with an output rescale when the bin is a saturation side); the
    others draw any operation."""
    cov = coverage_model()
    for c in earlier:
        cov.sample(coverage_sample(c))
    op_names = {o.name: o for o in OPS}

    def draw(target: str) -> EltCommand:
        group, _, combo = target.partition(": ")
        op = next((op_names[v] for v in combo.split(" x ") if v in op_names), None)
        return random_command(rng, mem, "closure", op=op, out_rescale=True if "saturation" in group else None)

    return close_coverage(cov, draw, coverage_sample, rng, max_draws)


def suites(seed: int, n_random: int = 160) -> list[Suite]:
    rng = seeds.rng(seed)
    random_suite = _suite("random", rng, lambda mem: [random_command(rng, mem, "random") for _ in range(n_random)])
    corner_suite = _suite("corners", rng, lambda mem: corner_commands(rng, mem))
    earlier = random_suite.commands + corner_suite.commands
    out = [
        random_suite,
        corner_suite,
        _suite("closure", rng, lambda mem: closure_commands(rng, mem, earlier)),
        _suite("long", rng, lambda mem: [random_command(rng, mem, "long", op=op, count=1024)
                                         for op in (EltOp.ADD, EltOp.MUL, EltOp.COPY)]),
    ]
    rng_bp = seeds.rng(seed + 1)
    out.append(_suite("backpressure", rng_bp,
                      lambda mem: [random_command(rng_bp, mem, "backpressure") for _ in range(max(8, n_random // 4))],
                      valid_pattern=0x9D2C5681, ready_pattern=0xB6E3D1A5))
    return out


# ---------------------------------------------------------------------------------------------
# Coverage

RESCALE_COMBOS = ("none", "A", "B", "A and B")
ROUNDINGS = ("single", "double")
SIDES = ("none", "low", "high")


def coverage_sample(c: EltCommand) -> dict:
    """Per element: classifications computed with the golden functions."""
    n = c.count
    op = EltOp(c.op)
    r = Registers(c.regs)

    def stage(x: Operand):
        vals = np.broadcast_to(x.values[:1], (n,)) if x.scalar else x.values[:n]
        return input_stage(vals, zp=r.elt_a_zp if x is c.a else r.elt_b_zp, lshift=x.lshift & ALL_ONES,
                           rescale=x.rescale, multiplier=x.multiplier & ALL_ONES, shift=x.shift,
                           double_round=x.double_round)

    a = stage(c.a)
    b = stage(c.b) if c.b is not None else None
    wrap_side = np.zeros(n, np.int64)
    if op in (EltOp.ADD, EltOp.SUB, EltOp.MUL):
        a32, b32 = numerics.apply_add_s(a, 0, DType.INT32, require=False), numerics.apply_add_s(b, 0, DType.INT32, require=False)
        if op == EltOp.MUL:
            exact = (a32.astype(object) * b32.astype(object))
            if c.mul_shift:
                exact = (exact + (1 << (c.mul_shift - 1))) >> c.mul_shift
            exact = np.array([int(v) for v in exact], dtype=object)
        else:
            exact = a32.astype(object) + (b32.astype(object) if op == EltOp.ADD else -b32.astype(object))
        wrap_side = np.array([2 if v > I32[1] else 1 if v < I32[0] else 0 for v in exact])
    width = KINDS[c.a.kind][1].bits if op in SHIFT_OPS else 32
    value = eltwise_op(op, a, b, width=width, mul_shift=c.mul_shift, round_=c.round_)
    mem = _scratch_memories()
    nrec = max(1, c.out.channels)
    idx = np.arange(n) % nrec
    mult, shift = np.resize(c.out.multipliers, nrec)[idx], np.resize(c.out.shifts, nrec)[idx]
    # the output rescale's saturation: the same rescale widened to int32, against the kind's range
    sat = np.zeros(n, np.int64)
    rescaled = value
    if c.out.rescale:
        wide_regs = {**c.regs, Reg.RESCALE_DTYPE: int(DType.INT32), Reg.CLAMP_MIN: I32[0] & ALL_ONES,
                     Reg.CLAMP_MAX: I32[1], Reg.LUT_MODE: 0,
                     Reg.OUT_MODE: c.regs[Reg.OUT_MODE] & ~int(OutMode.UNSIGNED_OUT)}
        wide, _ = apply_output_stage(mem, wide_regs, value, mult, shift, unit="ELTWISE")
        _, odt, uns = OUT_KINDS[c.out.kind]
        lo, hi = (0, odt.umax) if uns else (odt.min, odt.max)
        sat = np.where(wide < lo, 1, np.where(wide > hi, 2, 0))
        narrow_regs = {**c.regs, Reg.CLAMP_MIN: I32[0] & ALL_ONES, Reg.CLAMP_MAX: I32[1], Reg.LUT_MODE: 0}
        rescaled, _ = apply_output_stage(mem, narrow_regs, value, mult, shift, unit="ELTWISE")
    lo, hi = c.out.clamp
    clamp_side = np.where(rescaled < lo, 1, np.where(rescaled > hi, 2, 0))
    resc = int(c.a.rescale) + 2 * int(c.b is not None and c.b.rescale)
    rnd = []
    for x in (c.a, c.b):
        rnd.append(-1 if x is None or not x.rescale else int(x.double_round))
    lsh = c.a.lshift & ALL_ONES
    return {
        "op": np.full(n, c.op), "a_kind": np.full(n, c.a.kind), "b_kind": np.full(n, -1 if c.b is None else c.b.kind),
        "rescale": np.full(n, resc), "a_round": np.full(n, rnd[0]), "b_round": np.full(n, rnd[1]),
        "in_round": np.full(n, max(rnd)), "wrap": wrap_side, "sat": sat, "clamp": clamp_side,
        "out_rescale": np.full(n, (2 if c.out.scale32 else 1) if c.out.rescale else 0),
        "out_dr": np.full(n, int(c.out.rescale and c.out.scale32 and c.out.double_round)),
        "lut": np.full(n, c.out.lut_mode),
        "lshift": np.full(n, 0 if lsh == 0 else 1 if lsh < 32 else 2),
        "mul_shift": np.full(n, -1 if op != EltOp.MUL else (0 if c.mul_shift == 0 else 1 if c.mul_shift < 32 else 2)),
        "ars_round": np.full(n, -1 if op != EltOp.ARITHMETIC_RIGHT_SHIFT else int(c.round_)),
        "scalar": np.full(n, int(c.a.scalar) + 2 * int(c.b is not None and c.b.scalar)),
        "channels": np.full(n, 0 if c.out.channels <= 1 else 1),
        "shift_amount": (b & 31) if op in SHIFT_OPS else np.full(n, -1),
    }


_SCRATCH: list = []


def _scratch_memories() -> Memories:
    if not _SCRATCH:
        _SCRATCH.append(Memories(NPU))
    return _SCRATCH[0]


def coverage_model() -> CoverageModel:
    op_bins = {o.name: int(o) for o in OPS}
    kind_bins = {k[0]: i for i, k in enumerate(KINDS)}

    def op_rescale_ignore(combo):
        op, resc = combo
        return op == "COPY" and resc in ("B", "A and B")

    def op_kind_ignore(combo):
        op, kind = combo
        return op in ("LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT") and kind == "int48"

    return CoverageModel("eltwise_unit", [
        CoverPoint.values("operation", "op", op_bins),
        CoverPoint.values("input rescale", "rescale", {r: i for i, r in enumerate(RESCALE_COMBOS)}),
        CoverPoint.values("input rounding", "in_round", {"single": 0, "double": 1}),
        CoverPoint.values("A type", "a_kind", kind_bins),
        CoverPoint.values("B type", "b_kind", kind_bins),
        CoverPoint.values("int32 wrap (ADD/SUB/MUL)", "wrap", {"below int32": 1, "above int32": 2}),
        CoverPoint.values("output rescale saturation", "sat", {s: i for i, s in enumerate(SIDES)}),
        CoverPoint.values("clamp", "clamp", {s: i for i, s in enumerate(SIDES)}),
        CoverPoint.values("output rescale", "out_rescale", {"off": 0, "apply_scale_16": 1, "apply_scale_32": 2}),
        CoverPoint.values("output double rounding", "out_dr", {"on": 1}),
        CoverPoint.values("table", "lut", {"off": 0, "int8": 1, "int16": 2}),
        CoverPoint.values("A left shift register", "lshift", {"0": 0, "1..31": 1, ">= 32": 2}),
        CoverPoint.values("MUL shift", "mul_shift", {"0": 0, "1..31": 1, "32..63": 2}),
        CoverPoint.values("ARITHMETIC_RIGHT_SHIFT round", "ars_round", {"off": 0, "on": 1}),
        CoverPoint.values("scalar operand", "scalar", {"none": 0, "A": 1, "B": 2}),
        CoverPoint.values("output records", "channels", {"per tensor": 0, "per channel": 1}),
        CoverPoint.ranges("shift amount (b & 31)", "shift_amount", {"0": (0, 0), "1..7": (1, 7), "8..15": (8, 15),
                                                                   "16..30": (16, 30), "31": (31, 31)}),
    ], crosses=[
        Cross("operation x input rescale", ["operation", "input rescale"], ignore=op_rescale_ignore),
        Cross("operation x A type", ["operation", "A type"], ignore=op_kind_ignore),
        Cross("operation x input rounding", ["operation", "input rounding"]),
        Cross("operation x output rescale saturation", ["operation", "output rescale saturation"]),
        Cross("input rescale x input rounding x output rescale saturation",
              ["input rescale", "input rounding", "output rescale saturation"],
              ignore=lambda c: c[0] == "none"),
        Cross("output rescale x output rescale saturation", ["output rescale", "output rescale saturation"],
              ignore=lambda c: c[0] == "off" and c[1] != "none"),
        Cross("operation x clamp", ["operation", "clamp"]),
        Cross("operation x table", ["operation", "table"]),
    ])


# ---------------------------------------------------------------------------------------------
# The bench, mutations, lint

SPEC = UnitSpec("eltwise_bench", _unit, params=(("entries", ENTRIES),), depth=DEPTH,
                phases=(("w",), ("i",)), unit_name="eltwise_unit")


def bench() -> UnitBench:
    return UnitBench.shared(SPEC)


# Faults injected into the generated Verilog (hw/eltwise_unit.py and hw/output_stage.py name the
# signals they edit).
MUTATIONS = (
    Mutation("drop_mul_round", "MUL with a shift truncates: the rounding term is never added",
             r"^(\s*)mul_round = \\\$\d+ ;", r"\1mul_round = 64'h0;"),
    Mutation("shift_amount_mod64", "the shift amount is b & 63 instead of b & 31",
             r"o1_b\[4:0\]", "o1_b[5:0]", count=16),
    Mutation("ars_round_bit_n", "ARITHMETIC_RIGHT_SHIFT rounds on bit n instead of bit n - 1",
             r">>> \\\$\d+ \[4:0\];", ">>> o1_b[4:0];", count=3),
    Mutation("zero_point_added", "A's zero point is added instead of subtracted",
             r"(assign \\\$\d+\s*= \$signed\(a_read\)) - ", r"\1 + "),
    Mutation("lshift_only_with_rescale", "a non-zero left shift without a rescale is ignored",
             r"(assign a_shift_stage = cfg\[\d+\]) \| \\\$\d+ ;", r"\1;"),
    Mutation("copy_wraps32", "COPY passes 32 bits instead of 48",
             r"op_result = o1_a48;", "op_result = { {16{o1_a48[31]}}, o1_a48[31:0] };"),
    Mutation("b_rescale_ignored", "B's input rescale result is dropped (the unrescaled B is used)",
             r"assign b_op = cfg\[\d+\] \?[^;]*: side_b_3;", "assign b_op = side_b_3;"),
    Mutation("clamp_max_ignored", "the output stage's clamp never applies CLAMP_MAX",
             r"\? \{ (cfg\[\d+\], ){16}cfg\[\d+:\d+\] \} : clamp_low;", "? clamp_low : clamp_low;"),
    Mutation("bypass_one_clock_early", "an unrescaled value reaches the clamp one element early",
             r"\} : bypass_3;", "} : bypass_2;"),
)

LINT_WAIVERS: tuple[LintWaiver, ...] = OUTPUT_STAGE_WAIVERS

BENCHMARK_SIZES = {"verilator": DEPTH, "icarus": 4096, "amaranth": 512}


def benchmark_runs(simulator: str, seed: int = 7) -> list[VectorRun]:
    """A table run, then one long quantised ADD (both inputs rescaled, output rescaled to int8)."""
    rng = seeds.rng(seed)
    mem = Memories(NPU)
    tables = table_run(rng, mem, "setup")
    n = BENCHMARK_SIZES[simulator]
    a = Operand(KIND["int8"], _draw(rng, "int8", n), zp=-3, lshift=20, rescale=True, multiplier=1 << 30, shift=30)
    b = Operand(KIND["int8"], _draw(rng, "int8", n), zp=5, lshift=20, rescale=True, multiplier=1717986918, shift=31)
    o = OutStage(rescale=True, kind=0, zp=-1, multipliers=np.array([1 << 30]), shifts=np.array([40]),
                 clamp=(-128, 127), ofm_dtype=DType.INT8)
    c = EltCommand("benchmark", int(EltOp.ADD), a, b, o, n)
    finish(c, mem, rng)
    run = make_run(c)
    run.label = "benchmark"
    return [tables, run]


def mutation_suites(seed: int) -> list[Suite]:
    """A smaller set for the mutants (run on Icarus): random commands and every fifth corner command."""
    rng = seeds.rng(seed)
    return [_suite("random", rng, lambda mem: [random_command(rng, mem, "random") for _ in range(40)]),
            _suite("corners", rng, lambda mem: corner_commands(rng, mem)[::5])]


# ---------------------------------------------------------------------------------------------
# The unit contract (sim/verification/contract.py)

SEED = 20240614


def _amaranth_check() -> None:
    """A handful of random commands (some with stalls) on the Python design."""
    s = suites(SEED, n_random=8)
    runs = s[0].runs[:7] + s[-1].runs[:3]
    assert_results_match(bench().run_amaranth(runs), runs)


CONTRACT = UnitContract(
    unit="eltwise_unit", mutations=MUTATIONS,
    mutant_runs=lambda: [r for s in mutation_suites(SEED) for r in s.runs],
    run=lambda simulator, runs, mutation=None: bench().run(simulator, runs, mutation=mutation),
    lint=lambda: lint_unit(bench(), LINT_WAIVERS),
    amaranth=_amaranth_check,
)
