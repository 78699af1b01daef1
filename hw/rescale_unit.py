"""Rescale unit: TOSA RESCALE on one value per clock.

    result = apply_scale_32(value - input_zp, multiplier, shift, double_round)   (scale32)
           | apply_scale_16(value - input_zp, multiplier, shift)                 (scale16)
    out    = clip(result + output_zp, range of out_dtype, signed or unsigned)

Four pipeline stages (multiply, round, shift, offset-and-saturate), one result per clock, stalled
as a whole when the output is not taken. The arithmetic is exact for every legal TOSA input and
stays within 64 bits: apply_scale_32 multiplies an int32 value by a 31-bit multiplier, apply_scale_16
an int48 value by a 15-bit one (TOSA REQUIREs multiplier >= 0, and the value ranges follow from
RESCALE's ERROR_IFs), so product plus rounding term fits int64; only the shifted result is wrapped
to 32 bits, as apply_scale_32's final static_cast does. For inputs outside those rules the
operands are truncated to these widths; firmware_model.mac_unit.rescale_operands() states the same
truncation for the golden model.

`fault` builds a deliberately wrong unit for the bench's self-checks (see docs/verification.md):
"rescale_rounding" drops the rounding term, so results are truncated instead of rounded.
"""


from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.tosa_ops.dtypes import DType

# Output element types the unit saturates to (TOSA DType codes, 5 bits hold them all).
DTYPE_BITS = 5
RESCALE_FAULTS = ("rescale_rounding",)


class RescaleIn(data.Struct):
    value: signed(49)        # int48 input, or a zero-extended uint16
    input_zp: signed(18)
    multiplier: signed(32)   # apply_scale_16 uses the low 16 bits, sign-extended
    shift: unsigned(6)
    output_zp: signed(18)
    scale32: unsigned(1)
    double_round: unsigned(1)
    out_dtype: unsigned(DTYPE_BITS)
    output_unsigned: unsigned(1)
    tag: unsigned(32)        # carried through unchanged (e.g. the output address)


class RescaleOut(data.Struct):
    result: signed(32)
    tag: unsigned(32)


LATENCY = 4


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
        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]

        p = self.i.payload
        # Stage 1: subtract the input zero point, multiply, form the rounding term.
        v1 = Signal(5)  # v1[k]: stage k holds a valid value (k = 1..4)
        prod = Signal(signed(63))
        rnd = Signal(signed(63))
        shift1 = Signal(6)
        ctl1 = Signal(RescaleIn)

        value = Signal(signed(50))
        m.d.comb += value.eq(p.value - p.input_zp)
        product = Signal(signed(63))
        with m.If(p.scale32):
            m.d.comb += product.eq(value[:32].as_signed() * p.multiplier[:31])
        with m.Else():
            m.d.comb += product.eq(value[:48].as_signed() * p.multiplier[:15])
        round_bit = Signal(signed(63))
        with m.If(p.shift >= 1):
            m.d.comb += round_bit.eq((Const(1, unsigned(63)) << (p.shift - 1)[:6])[:63])
        if self.fault == "rescale_rounding":
            m.d.comb += round_bit.eq(0)
        extra = Signal(signed(32))
        with m.If(p.scale32 & p.double_round & (p.shift > 31)):
            m.d.comb += extra.eq(Mux(value >= 0, 1 << 30, -(1 << 30)))

        with m.If(advance):
            m.d.sync += [
                v1[1].eq(self.i.valid),
                prod.eq(product),
                rnd.eq(round_bit + extra),
                shift1.eq(p.shift),
                ctl1.eq(p),
            ]

        # Stage 2: add the rounding term.
        total = Signal(signed(64))
        shift2 = Signal(6)
        ctl2 = Signal(RescaleIn)
        with m.If(advance):
            m.d.sync += [v1[2].eq(v1[1]), total.eq(prod + rnd), shift2.eq(shift1), ctl2.eq(ctl1)]

        # Stage 3: arithmetic shift right; keep 32 bits (the spec's static_cast<int32_t>).
        scaled = Signal(signed(32))
        ctl3 = Signal(RescaleIn)
        shifted = Signal(signed(64))
        m.d.comb += shifted.eq(total >> shift2)
        with m.If(advance):
            m.d.sync += [v1[3].eq(v1[2]), scaled.eq(shifted[:32].as_signed()), ctl3.eq(ctl2)]

        # Stage 4: add the output zero point (int32 wrap) and saturate to the output type.
        offset = Signal(signed(32))
        m.d.comb += offset.eq((scaled + ctl3.output_zp)[:32].as_signed())
        lo = Signal(signed(34))
        hi = Signal(signed(34))
        with m.Switch(ctl3.out_dtype):
            with m.Case(DType.INT8):
                m.d.comb += [lo.eq(Mux(ctl3.output_unsigned, 0, -(1 << 7))),
                             hi.eq(Mux(ctl3.output_unsigned, (1 << 8) - 1, (1 << 7) - 1))]
            with m.Case(DType.INT16):
                m.d.comb += [lo.eq(Mux(ctl3.output_unsigned, 0, -(1 << 15))),
                             hi.eq(Mux(ctl3.output_unsigned, (1 << 16) - 1, (1 << 15) - 1))]
            with m.Default():
                m.d.comb += [lo.eq(-(1 << 31)), hi.eq((1 << 31) - 1)]
        clipped = Signal(signed(34))
        m.d.comb += clipped.eq(Mux(offset < lo, lo, Mux(offset > hi, hi, offset)))
        with m.If(advance):
            m.d.sync += [
                v1[4].eq(v1[3]),
                self.o.payload.result.eq(clipped[:32].as_signed()),
                self.o.payload.tag.eq(ctl3.tag),
            ]
        m.d.comb += self.o.valid.eq(v1[4])
        return m

