"""Rescale unit: TOSA RESCALE on one element per clock.

Per element (every parameter travels with the element, so per-channel scaling is the caller
feeding each element its channel's multiplier and shift):

    x      = value read as in_dtype (INT8/INT16/INT32/INT48), zero-extended if input_unsigned
    d      = x - input_zp                                   (input_zp as already read: -128..65535)
    result = apply_scale_32(d, multiplier, shift, double_round)   if scale32
           | apply_scale_16(d, multiplier, shift)                  otherwise
    out    = clip(result + output_zp, range of out_dtype)   (unsigned range if output_unsigned)

exactly as firmware_model.tosa_ops.numerics.rescale_values computes it (the same operations in
the same order; it is the golden model of this unit). The multiply is exact: apply_scale_32
multiplies an int32 operand by a 31-bit multiplier, apply_scale_16 an int48 operand by a 15-bit
one (TOSA REQUIREs multiplier >= 0, and RESCALE's ERROR_IFs bound the operand), so product plus
rounding term fits int64; the shifted result wraps to 32 bits as apply_scale_32's
static_cast<int32_t> does, and adding output_zp wraps at 32 bits as apply_add_s does in hardware.
For operands outside those rules the datapath truncates the operand to 32 (48) bits and the
multiplier to 31 (15) bits — firmware_model.golden.mac_unit.rescale_operands states the same
truncation for the golden model.

Pipeline (LATENCY = 4 clocks, one element per clock, the whole pipeline stalls while a result
is offered and not taken):
  1. read and subtract:  operand, multiplier, rounding term (incl. the double-round term)
  2. multiply:           product (one shared 48 x 31 signed x unsigned multiplier)
  3. round and shift:    (product + rounding term) >> shift, low 32 bits
  4. offset, saturate:   + output_zp (32-bit wrap), clip to the output type

`fault` builds a deliberately wrong unit for the core bench's self-check (see
docs/verification.md): "rescale_rounding" drops the rounding term, so results are truncated
instead of rounded. Unit-level faults are injected into the generated Verilog instead
(tests/test_unit_rescale.py, MUTATIONS there).
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.tosa_ops.dtypes import DType

# Element types are TOSA DType codes (INT8 3, INT16 4, INT32 5, INT48 6): 5 bits hold them all.
DTYPE_BITS = 5
RESCALE_FAULTS = ("rescale_rounding",)
LATENCY = 4
VALUE_BITS = 48          # the widest input (int48)
ZP_BITS = 18             # zero points as read: int8 -128..127, uint8 0..255, uint16 0 or 32768


class RescaleIn(data.Struct):
    value: unsigned(VALUE_BITS)   # the input element's bits; the low in_dtype bits are read
    in_dtype: unsigned(DTYPE_BITS)
    input_unsigned: unsigned(1)   # read value zero-extended (uint8, uint16)
    input_zp: signed(ZP_BITS)
    multiplier: signed(32)        # apply_scale_32: bits 0..30; apply_scale_16: bits 0..14
    shift: unsigned(6)
    output_zp: signed(ZP_BITS)
    scale32: unsigned(1)
    double_round: unsigned(1)     # apply_scale_32 only
    out_dtype: unsigned(DTYPE_BITS)
    output_unsigned: unsigned(1)  # saturate to the unsigned range of out_dtype
    tag: unsigned(32)             # carried through unchanged (e.g. the output address)


class RescaleOut(data.Struct):
    result: signed(32)            # the saturated value, sign-extended (unsigned outputs >= 0)
    tag: unsigned(32)


class RescaleUnit(wiring.Component):
    i: In(stream.Signature(RescaleIn))
    o: Out(stream.Signature(RescaleOut))

    def __init__(self, fault=None):
        if fault is not None and fault not in RESCALE_FAULTS:
            raise ValueError(f"unknown rescale fault {fault!r}")
        self.fault = fault
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        # The whole pipeline advances unless a result is offered and not taken.
        advance = self.i.ready
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)
        valid = Signal(LATENCY, name="stage_valid")    # valid[k]: stage k+1 holds an element
        with m.If(advance):
            m.d.sync += valid.eq(Cat(self.i.valid, valid[:-1]))
        m.d.comb += self.o.valid.eq(valid[-1])

        # ---- stage 1: read the input, subtract the zero point, form the rounding term ----
        p = self.i.payload
        x = Signal(signed(VALUE_BITS + 1), name="x_read")
        with m.Switch(p.in_dtype):
            with m.Case(DType.INT8):
                m.d.comb += x.eq(Mux(p.input_unsigned, p.value[:8], p.value[:8].as_signed()))
            with m.Case(DType.INT16):
                m.d.comb += x.eq(Mux(p.input_unsigned, p.value[:16], p.value[:16].as_signed()))
            with m.Case(DType.INT32):
                m.d.comb += x.eq(Mux(p.input_unsigned, p.value[:32], p.value[:32].as_signed()))
            with m.Default():
                m.d.comb += x.eq(Mux(p.input_unsigned, p.value, p.value.as_signed()))
        diff = Signal(signed(48), name="diff")     # wraps like rescale_operands (never, legally)
        m.d.comb += diff.eq(x - p.input_zp)
        # The operand as the multiplier sees it: int32 for apply_scale_32, int48 for apply_scale_16.
        operand = Signal(signed(48), name="operand")
        mult = Signal(unsigned(31), name="mult")
        m.d.comb += [
            operand.eq(Mux(p.scale32, diff[:32].as_signed(), diff[:48].as_signed())),
            mult.eq(Mux(p.scale32, p.multiplier[:31], p.multiplier[:15])),
        ]
        round_bit = Signal(signed(64), name="round_bit")     # 1 << (shift - 1), none for shift 0
        with m.If(p.shift != 0):
            m.d.comb += round_bit.eq(Const(1, unsigned(63)) << (p.shift - 1)[:6])
        if self.fault == "rescale_rounding":
            m.d.comb += round_bit.eq(0)
        dr_on = Signal(name="dr_on")          # apply_scale_32 double rounding applies
        dr_term = Signal(signed(32), name="dr_term")
        m.d.comb += dr_on.eq(p.scale32 & p.double_round & (p.shift > 31))
        with m.If(dr_on):
            m.d.comb += dr_term.eq(Mux(operand >= 0, 1 << 30, -(1 << 30)))
        s1_operand = Signal(signed(48))
        s1_mult = Signal(unsigned(31))
        s1_round = Signal(signed(64))
        s1_shift = Signal(6)
        s1_ctl = Signal(_Control)
        with m.If(advance):
            m.d.sync += [s1_operand.eq(operand), s1_mult.eq(mult), s1_round.eq(round_bit + dr_term),
                         s1_shift.eq(p.shift), s1_ctl.output_zp.eq(p.output_zp),
                         s1_ctl.out_dtype.eq(p.out_dtype), s1_ctl.output_unsigned.eq(p.output_unsigned),
                         s1_ctl.tag.eq(p.tag)]

        # ---- stage 2: multiply (|product| < 2^62 for every operand the widths allow) ----
        product = (s1_operand * s1_mult)[:64].as_signed()
        s2_product = Signal(signed(64))
        s2_round = Signal(signed(64))
        s2_shift = Signal(6)
        s2_ctl = Signal(_Control)
        with m.If(advance):
            m.d.sync += [s2_product.eq(product), s2_round.eq(s1_round), s2_shift.eq(s1_shift),
                         s2_ctl.eq(s1_ctl)]

        # ---- stage 3: add the rounding term, arithmetic shift right, keep 32 bits ----
        total = (s2_product + s2_round)[:64].as_signed()
        shifted = Signal(signed(32), name="shifted")
        m.d.comb += shifted.eq((total >> s2_shift)[:32])
        s3_scaled = Signal(signed(32))
        s3_ctl = Signal(_Control)
        with m.If(advance):
            m.d.sync += [s3_scaled.eq(shifted), s3_ctl.eq(s2_ctl)]

        # ---- stage 4: add the output zero point (32-bit wrap), saturate to the output type ----
        offset = (s3_scaled + s3_ctl.output_zp)[:32].as_signed()
        lo = Signal(signed(32), name="sat_lo")
        hi = Signal(signed(32), name="sat_hi")
        uns = s3_ctl.output_unsigned
        with m.Switch(s3_ctl.out_dtype):
            with m.Case(DType.INT8):
                m.d.comb += [lo.eq(Mux(uns, 0, -(1 << 7))), hi.eq(Mux(uns, (1 << 8) - 1, (1 << 7) - 1))]
            with m.Case(DType.INT16):
                m.d.comb += [lo.eq(Mux(uns, 0, -(1 << 15))), hi.eq(Mux(uns, (1 << 16) - 1, (1 << 15) - 1))]
            with m.Default():
                m.d.comb += [lo.eq(Mux(uns, 0, -(1 << 31))), hi.eq((1 << 31) - 1)]
        clipped = Signal(signed(32), name="clipped")
        m.d.comb += clipped.eq(Mux(offset < lo, lo, Mux(offset > hi, hi, offset)))
        with m.If(advance):
            m.d.sync += [self.o.payload.result.eq(clipped), self.o.payload.tag.eq(s3_ctl.tag)]
        return m


class _Control(data.Struct):
    """What travels down the pipeline beside the arithmetic."""
    output_zp: signed(ZP_BITS)
    out_dtype: unsigned(DTYPE_BITS)
    output_unsigned: unsigned(1)
    tag: unsigned(32)

