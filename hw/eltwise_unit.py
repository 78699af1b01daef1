"""Elementwise unit: one ELTWISE element per clock (docs/isa.md, "The ELTWISE command").

The datapath of firmware_model/golden/eltwise_unit.py for one element, stage by stage:

    input stage, for X in A, B (`input_stage`):
        x  = X read as its dtype (INT8/INT16 signed, or zero-extended with read_unsigned; INT32;
             INT48 and any other code: 48 bits signed)
        x0 = x - zp                                   (zp: the 32-bit ELT_X_ZP register)
        x1 = wrap32(wrap32(x0) << (lshift & 31))      when rescale is set or lshift != 0,
             else wrap48(x0)
        x  = apply_scale_32(x1, multiplier, shift, double_round)   with rescale (a rescale unit,
             hw/rescale_unit.py, read as int32 with no zero point and no saturation), else x1
    the operation (`eltwise_op`) on a = wrap32(a), b = wrap32(b):
        ADD / SUB                wrap32(a + b) / wrap32(a - b)
        MUL                      p = a * b (64 bits); mul_shift > 0: p = (p + 2^(mul_shift-1)) >> mul_shift,
                                 the sum wrapping at 64 bits as the golden int64 does; wrap32(p)
        MINIMUM / MAXIMUM        min / max
        LOGICAL_LEFT_SHIFT       wrap_w(a << n)                  n = b & 31, w = bits of A's dtype
        LOGICAL_RIGHT_SHIFT      wrap_w((a & (2^w - 1)) >> n)    (8, 16; 32 for INT32 and others)
        ARITHMETIC_RIGHT_SHIFT   wrap_w((wrap_w(a) >> n) + (round and n > 0 and bit n-1 of wrap_w(a)))
        COPY                     a, 48 bits (B is ignored)
        any other code           0 (the sequencer refuses it: BAD_MODE)
    the output stage (`output_stage.apply_output_stage`): hw/output_stage.py (rescale unit,
        clamp, LUT engine) with the element's parameter record (multiplier, shift).

Ports: `i` (stream, one element per clock: A's and B's element bits, the output record's
multiplier and shift, a tag carried to the result), `o` (stream: the result as an int32 — the
value whose low OFM_DTYPE bytes are stored — and the tag), `w` (LUT SRAM writes, as the LUT
engine's), `cfg` (the command's registers, constant while elements are in flight: a command
drains the pipeline before the next starts, as firmware_model/arch/cycle_model.py counts it). The sequencer
maps the registers onto `cfg` (EltMode bits onto the operands' flags) and plays the broadcast
(A_SCALAR / B_SCALAR) and per-channel record (PARAM_ADDR + i % ELT_CHANNELS) addressing.

Pipeline, LATENCY = 14 clocks from an accepted element to its offered result, one element per
clock: zero point and left shift 1, input rescale 4 (two rescale units, A and B, in lockstep),
operation 2 (product; rounding shift and the other operations), output stage 7 (rescale 4, clamp
1, table 2). With the SRAM read before and the write after, that is perf.ELT_PIPELINE = 16. Every
element takes every stage whether its command uses it or not. The whole unit stalls while a
result is offered and not taken.
"""

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import EltMode, EltOp, Reg
from firmware_model.tosa_ops.dtypes import DType
from hw.output_stage import LATENCY as OUTPUT_LATENCY
from hw.output_stage import OUT_LAYOUT, OutputStage, OutputStageIn, lut_write_layout, out_config_layout
from hw.output_stage import REGISTER_MAP as OUTPUT_STAGE_MAP
from hw.register_map import FromFlag, FromReg, FromSub, prefixed
from hw.rescale_unit import DTYPE_BITS, RescaleUnit
from hw.rescale_unit import LATENCY as RESCALE_LATENCY

INPUT_LATENCY = 1
OP_LATENCY = 2
FRONT_LATENCY = INPUT_LATENCY + RESCALE_LATENCY + OP_LATENCY                 # 7
LATENCY = FRONT_LATENCY + OUTPUT_LATENCY                                      # 14
ELEMENT_BITS = 48         # an operand element's bits (int48 is the widest)
OP_BITS = 4


class OperandConfig(data.Struct):
    """One operand's input stage (registers ELT_X_*, EltMode bits X_*)."""
    dtype: unsigned(DTYPE_BITS)   # ELT_X_DTYPE: INT8 3, INT16 4, INT32 5, INT48 6
    read_unsigned: unsigned(1)    # X_UNSIGNED: int8 / int16 elements zero-extended
    zp: signed(32)                # ELT_X_ZP
    lshift: unsigned(32)          # ELT_X_LSHIFT: non-zero enables the shift stage; amount & 31
    rescale: unsigned(1)          # X_RESCALE
    multiplier: signed(32)        # ELT_X_MULT (bits 0..30 used)
    shift: unsigned(6)            # ELT_X_SHIFT & 63
    double_round: unsigned(1)     # X_DOUBLE_ROUND


def config_layout(lut_entries: int) -> data.StructLayout:
    return data.StructLayout({
        "a": OperandConfig,
        "b": OperandConfig,
        "op": unsigned(OP_BITS),          # the command's sub: EltOp
        "mul_shift": unsigned(6),         # ELT_SHIFT & 63 (MUL)
        "round": unsigned(1),             # EltMode.ROUND (ARITHMETIC_RIGHT_SHIFT)
        "out": out_config_layout(lut_entries),
    })


def _operand_map(x: str) -> dict:
    regs = {f: Reg[f"ELT_{x.upper()}_{name}"] for f, name in (("dtype", "DTYPE"), ("zp", "ZP"), ("lshift", "LSHIFT"),
                                                               ("multiplier", "MULT"), ("shift", "SHIFT"))}
    flags = {f: EltMode[f"{x.upper()}_{name}"] for f, name in (("read_unsigned", "UNSIGNED"), ("rescale", "RESCALE"),
                                                               ("double_round", "DOUBLE_ROUND"))}
    return {**{f"{x}.{f}": FromReg(r) for f, r in regs.items()},
            **{f"{x}.{f}": FromFlag(Reg.ELT_MODE, flag) for f, flag in flags.items()}}


# Where each `cfg` field comes from (hw/register_map.py): the ELTWISE registers of docs/isa.md.
# The broadcast (A_SCALAR, B_SCALAR), the addresses and the per-channel records are the
# sequencer's business, not the unit's.
REGISTER_MAP = {
    "op": FromSub(),
    "mul_shift": FromReg(Reg.ELT_SHIFT),
    "round": FromFlag(Reg.ELT_MODE, EltMode.ROUND),
    **_operand_map("a"),
    **_operand_map("b"),
    **prefixed("out", OUTPUT_STAGE_MAP),
}


class EltIn(data.Struct):
    a: unsigned(ELEMENT_BITS)     # A's element (the low dtype bits are read)
    b: unsigned(ELEMENT_BITS)     # B's element (ignored by COPY)
    multiplier: signed(32)        # the element's output parameter record (used with RESCALE)
    shift: unsigned(6)
    tag: unsigned(32)             # carried through unchanged


class EltwiseFront(wiring.Component):
    """The elementwise unit up to its output stage: input stages and the operation. `o` carries
    the output stage's input (the value, the element's record, its tag); the core feeds it to its
    shared output stage, EltwiseUnit to its own. FRONT_LATENCY clocks deep."""

    def __init__(self, lut_entries: int = 2048):
        self.lut_entries = lut_entries
        self.config = config_layout(lut_entries)
        super().__init__({
            "i": In(stream.Signature(EltIn)),
            "o": Out(stream.Signature(OutputStageIn)),
            "cfg": In(self.config),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.rescale_a = ra = RescaleUnit()
        m.submodules.rescale_b = rb = RescaleUnit()
        cfg, p = self.cfg, self.i.payload

        # ---- stage 1: read, subtract the zero point, shift left ----
        def operand(name, bits, oc, width):
            """The operand after zero point and left shift, `width` bits (A 48, B 32: the
            operation reads B as wrap32)."""
            x = Signal(signed(ELEMENT_BITS + 1), name=f"{name}_read")
            with m.Switch(oc.dtype):
                for dt in (DType.INT8, DType.INT16, DType.INT32):
                    with m.Case(dt):
                        m.d.comb += x.eq(Mux(oc.read_unsigned, bits[:dt.bits], bits[:dt.bits].as_signed()))
                with m.Default():
                    m.d.comb += x.eq(bits.as_signed())
            x0 = Signal(signed(width), name=f"{name}_x0")          # wrap48 (wrap32 for B)
            x1 = Signal(signed(32), name=f"{name}_x1")
            shifted = Signal(name=f"{name}_shift_stage")
            staged = Signal(signed(width), name=f"{name}_staged")
            m.d.comb += [
                x0.eq(x - oc.zp),
                x1.eq((x0[:32] << oc.lshift[:5])[:32]),
                shifted.eq(oc.rescale | (oc.lshift != 0)),
                staged.eq(Mux(shifted, x1, x0)),
            ]
            return staged

        a_in, b_in = operand("a", p.a, cfg.a, ELEMENT_BITS), operand("b", p.b, cfg.b, 32)
        s1_valid = Signal()
        s1_a = Signal(signed(ELEMENT_BITS))
        s1_b = Signal(signed(32))
        s1_mult = Signal(signed(32))
        s1_shift = Signal(6)
        s1_tag = Signal(32)
        adv1 = self.i.ready
        m.d.comb += adv1.eq(~s1_valid | (ra.i.ready & rb.i.ready))
        with m.If(adv1):
            m.d.sync += [s1_valid.eq(self.i.valid), s1_a.eq(a_in), s1_b.eq(b_in),
                         s1_mult.eq(p.multiplier), s1_shift.eq(p.shift), s1_tag.eq(p.tag)]

        # ---- input rescale: apply_scale_32 on the int32 x1 ----
        # A and B enter together and leave together (a fork and a join of two identical
        # pipelines, which therefore run in lockstep).
        for ru, other, v, oc in ((ra, rb, s1_a, cfg.a), (rb, ra, s1_b, cfg.b)):
            m.d.comb += [
                ru.i.valid.eq(s1_valid & other.i.ready),
                ru.i.payload.value.eq(v),
                ru.i.payload.in_dtype.eq(DType.INT32),
                ru.i.payload.input_unsigned.eq(0),
                ru.i.payload.input_zp.eq(0),
                ru.i.payload.multiplier.eq(oc.multiplier),
                ru.i.payload.shift.eq(oc.shift),
                ru.i.payload.output_zp.eq(0),
                ru.i.payload.scale32.eq(1),
                ru.i.payload.double_round.eq(oc.double_round),
                ru.i.payload.out_dtype.eq(DType.INT32),
                ru.i.payload.output_unsigned.eq(0),
            ]
        # The rescale units' tags carry the element's tag (A) and its record's multiplier (B);
        # beside them, shifting exactly when their pipelines do, travel the unrescaled operands
        # and the record's shift.
        m.d.comb += [ra.i.payload.tag.eq(s1_tag), rb.i.payload.tag.eq(s1_mult)]
        side_a = [Signal(signed(ELEMENT_BITS), name=f"side_a_{k}") for k in range(RESCALE_LATENCY)]
        side_b = [Signal(signed(32), name=f"side_b_{k}") for k in range(RESCALE_LATENCY)]
        side_shift = [Signal(6, name=f"side_shift_{k}") for k in range(RESCALE_LATENCY)]
        with m.If(ra.i.ready):
            for pipe, first in ((side_a, s1_a), (side_b, s1_b), (side_shift, s1_shift)):
                m.d.sync += [pipe[0].eq(first)] + [pipe[k].eq(pipe[k - 1]) for k in range(1, RESCALE_LATENCY)]

        # ---- operation, clock 1: operands and the product ----
        a_op = Signal(signed(ELEMENT_BITS), name="a_op")
        b_op = Signal(signed(32), name="b_op")
        m.d.comb += [a_op.eq(Mux(cfg.a.rescale, ra.o.payload.result, side_a[-1])),
                     b_op.eq(Mux(cfg.b.rescale, rb.o.payload.result, side_b[-1]))]
        o1_valid, o2_valid = Signal(), Signal()
        o1_a48 = Signal(signed(ELEMENT_BITS))
        o1_a = Signal(signed(32))
        o1_b = Signal(signed(32))
        o1_product = Signal(signed(64))
        o1_mult = Signal(signed(32))
        o1_shift = Signal(6)
        o1_tag = Signal(32)
        adv_op = Signal()
        m.d.comb += [adv_op.eq(~o2_valid | self.o.ready),
                     ra.o.ready.eq(adv_op & rb.o.valid), rb.o.ready.eq(adv_op & ra.o.valid)]
        with m.If(adv_op):
            m.d.sync += [o1_valid.eq(ra.o.valid & rb.o.valid), o1_a48.eq(a_op), o1_a.eq(a_op[:32]), o1_b.eq(b_op),
                         o1_product.eq(a_op[:32].as_signed() * b_op),
                         o1_mult.eq(rb.o.payload.tag), o1_shift.eq(side_shift[-1]), o1_tag.eq(ra.o.payload.tag)]

        # ---- operation, clock 2 ----
        op_result = Signal(signed(ELEMENT_BITS), name="op_result")
        mul_round = Signal(signed(64), name="mul_round")        # 1 << (mul_shift - 1), none for 0
        with m.If(cfg.mul_shift != 0):
            m.d.comb += mul_round.eq(1 << (cfg.mul_shift - 1)[:6])
        mul_total = Signal(signed(64), name="mul_total")        # wraps at 64 bits like the int64 golden
        m.d.comb += mul_total.eq(o1_product + mul_round)
        mul_result = Signal(signed(32), name="mul_result")
        m.d.comb += mul_result.eq((mul_total >> cfg.mul_shift)[:32])

        amount = Signal(5, name="shift_amount")                 # n = b & 31
        m.d.comb += amount.eq(o1_b[:5])
        shifts = {}
        for w in (8, 16, 32):
            aw = o1_a[:w].as_signed()
            lls = Signal(signed(w), name=f"lls{w}")
            lrs = Signal(signed(w), name=f"lrs{w}")
            ars = Signal(signed(w), name=f"ars{w}")
            ars_round = Signal(name=f"ars_round{w}")             # bit n-1 of a, with ROUND and n > 0
            m.d.comb += [
                lls.eq((o1_a[:w] << amount)[:w]),
                lrs.eq((o1_a[:w] >> amount)[:w]),
                ars_round.eq(cfg.round & (amount != 0) & (aw >> (amount - 1)[:5])[0]),
                ars.eq(((aw >> amount) + ars_round)[:w]),
            ]
            shifts[w] = (lls, lrs, ars)

        def by_width(k):
            r = Signal(signed(32), name=("lls", "lrs", "ars")[k])
            with m.Switch(cfg.a.dtype):
                with m.Case(DType.INT8):
                    m.d.comb += r.eq(shifts[8][k])
                with m.Case(DType.INT16):
                    m.d.comb += r.eq(shifts[16][k])
                with m.Default():
                    m.d.comb += r.eq(shifts[32][k])
            return r

        lls, lrs, ars = by_width(0), by_width(1), by_width(2)
        with m.Switch(cfg.op):
            with m.Case(EltOp.ADD):
                m.d.comb += op_result.eq((o1_a + o1_b)[:32].as_signed())
            with m.Case(EltOp.SUB):
                m.d.comb += op_result.eq((o1_a - o1_b)[:32].as_signed())
            with m.Case(EltOp.MUL):
                m.d.comb += op_result.eq(mul_result)
            with m.Case(EltOp.MINIMUM):
                m.d.comb += op_result.eq(Mux(o1_a < o1_b, o1_a, o1_b))
            with m.Case(EltOp.MAXIMUM):
                m.d.comb += op_result.eq(Mux(o1_a > o1_b, o1_a, o1_b))
            with m.Case(EltOp.LOGICAL_LEFT_SHIFT):
                m.d.comb += op_result.eq(lls)
            with m.Case(EltOp.LOGICAL_RIGHT_SHIFT):
                m.d.comb += op_result.eq(lrs)
            with m.Case(EltOp.ARITHMETIC_RIGHT_SHIFT):
                m.d.comb += op_result.eq(ars)
            with m.Case(EltOp.COPY):
                m.d.comb += op_result.eq(o1_a48)
            with m.Default():
                m.d.comb += op_result.eq(0)
        o2_rec = Signal(OutputStageIn)
        with m.If(adv_op):
            m.d.sync += [o2_valid.eq(o1_valid), o2_rec.value.eq(op_result), o2_rec.multiplier.eq(o1_mult),
                         o2_rec.shift.eq(o1_shift), o2_rec.tag.eq(o1_tag)]

        m.d.comb += [self.o.valid.eq(o2_valid), self.o.payload.eq(o2_rec)]
        return m


class EltwiseUnit(wiring.Component):
    """`lut_entries`: the LUT SRAM's size in 16-bit entries (cfg.lut_entries)."""

    def __init__(self, lut_entries: int = 2048):
        self.lut_entries = lut_entries
        self.config = config_layout(lut_entries)
        super().__init__({
            "w": In(stream.Signature(lut_write_layout(lut_entries))),     # LUT SRAM writes: addr, data
            "i": In(stream.Signature(EltIn)),
            "o": Out(stream.Signature(OUT_LAYOUT)),      # the result and the tag
            "cfg": In(self.config),
        })

    @classmethod
    def for_config(cls, cfg) -> "EltwiseUnit":
        return cls(cfg.lut_entries)

    def elaborate(self, platform):
        m = Module()
        m.submodules.front = front = EltwiseFront(self.lut_entries)
        m.submodules.out_stage = ost = OutputStage(self.lut_entries)
        wiring.connect(m, wiring.flipped(self.i), front.i)
        m.d.comb += [front.cfg.eq(self.cfg), ost.cfg.eq(self.cfg.out)]
        wiring.connect(m, front.o, ost.i)
        wiring.connect(m, wiring.flipped(self.w), ost.w)
        wiring.connect(m, ost.o, wiring.flipped(self.o))
        return m
