"""Pooling unit: MAX / AVG / SUM / MIN over window taps, one tap per clock (docs/isa.md, "The POOL
command").

The sequencer plays every tap of every window (KERNEL_H x KERNEL_W, padding included, output
elements in row-major order over OFM_H x OFM_W x OFM_C, as firmware_model/arch/cycle_model.py counts them)
into `i`: the element's bits, `pad` (the tap lies outside the input box: it takes no part) and
`last` (the window's last tap; the window's parameter record and tag come with it). Per window
the unit computes what firmware_model/golden/pool_unit.py computes per output element:

    x      = the tap read as in_dtype (INT8, INT16; INT32 and other codes: 32 bits), signed
    count  = real (non-padding) taps
    MAX    max of x over the real taps               MIN   min of x over the real taps
    SUM    wrap32(sum of (x - zp) over the real taps)
    AVG    acc = wrap32(sum of (x - zp)); (m, s) = reciprocal_scale(count);
           clip(apply_add_s(apply_scale_32(acc, m, s), OFM_ZP), out_dtype)
    then the output stage (hw/output_stage.py: rescale with the window's record — not for AVG —,
    clamp, table); the result is an int32 (its low OFM_DTYPE bytes are stored) with the tag.

AVG's scaling is the output stage's own rescale unit, fed (m, s) = reciprocal_scale(count),
SCALE32 and single rounding, saturating to out_dtype with OFM_ZP (an AVG command has no
output-stage RESCALE: the golden model refuses one), so one rescale unit serves both.

reciprocal_scale(count) — TOSA: k = 32 - count_leading_zeros(count - 1), multiplier =
((1 << 30) + 1 << k) / count, shift = 30 + k — comes from a pipelined restoring divider, one
quotient bit per stage (the count is normalised first: count << (C - k) divides the constant
((1 << 30) + 1) << C, the same quotient). `count_bits` = C (default 24) bounds the real taps of a
window: 2^C - 1 (the compiler keeps an AVG window's sum within int32, i.e. int8 windows under
2^22 taps; MAX/MIN/SUM do not use the count). A window without a real tap (the golden model
refuses one) gives MAX int32 min, MIN int32 max, SUM/AVG from a sum of 0.

Ports: `i` (taps), `o` ({result s32, tag u32}, one per window), `w` (LUT SRAM writes), `cfg`
(the command's registers: mode, IFM_DTYPE, IFM_ZP, OFM_DTYPE and the output stage's; constant
while taps are in flight).

Pipeline: the window result is registered one clock after its last tap (1), the divider takes 32
(normalise 1, 31 quotient bits), the output stage 7: LATENCY = 40 clocks from the last tap to the
result, the same for every mode; with the tap's SRAM read before and the write after, that is
perf.POOL_PIPELINE = 42. One tap per clock; the whole unit stalls while a result is offered and
not taken.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import OutMode, PoolMode, Reg
from firmware_model.tosa_ops.dtypes import DType
from hw.output_stage import LATENCY as OUTPUT_LATENCY
from hw.output_stage import OUT_LAYOUT, OutputStage, OutputStageIn, lut_write_layout, out_config_layout
from hw.output_stage import REGISTER_MAP as OUTPUT_STAGE_MAP
from hw.register_map import FromReg, FromSub, prefixed
from hw.rescale_unit import DTYPE_BITS

QUOTIENT_BITS = 31        # reciprocal_scale's multiplier: < 2^31 for every count below 2^30
WINDOW_LATENCY = 1
DIVIDER_LATENCY = 1 + QUOTIENT_BITS
FRONT_LATENCY = WINDOW_LATENCY + DIVIDER_LATENCY                 # 33
LATENCY = FRONT_LATENCY + OUTPUT_LATENCY                          # 40
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class PoolTap(data.Struct):
    value: unsigned(32)           # the element's bits (the low in_dtype bits are read, signed)
    pad: unsigned(1)              # a padding tap: takes no part
    last: unsigned(1)             # the window's last tap: the window's result follows
    multiplier: signed(32)        # the window's parameter record (read with `last`; RESCALE only)
    shift: unsigned(6)
    tag: unsigned(32)             # read with `last`, carried to the window's result


def config_layout(lut_entries: int) -> data.StructLayout:
    return data.StructLayout({
        "mode": unsigned(2),              # the command's sub: PoolMode
        "in_dtype": unsigned(DTYPE_BITS), # IFM_DTYPE
        "zp": signed(32),                 # IFM_ZP (SUM, AVG)
        "out_dtype": unsigned(DTYPE_BITS),  # OFM_DTYPE (AVG's saturation: INT8, INT16)
        "out": out_config_layout(lut_entries),
    })


# Where each `cfg` field comes from (hw/register_map.py): the POOL registers of docs/isa.md (the
# window geometry, padding and addresses are the sequencer's, which plays the taps).
REGISTER_MAP = {
    "mode": FromSub(),
    "in_dtype": FromReg(Reg.IFM_DTYPE),
    "zp": FromReg(Reg.IFM_ZP),
    "out_dtype": FromReg(Reg.OFM_DTYPE),
    **prefixed("out", OUTPUT_STAGE_MAP),
}


class PoolFront(wiring.Component):
    """The pooling unit up to its output stage: the taps, the window and the reciprocal divider.
    `o` carries the output stage's input; `out_cfg` the output stage's configuration for the
    command (the registers', or AVG's scaling). FRONT_LATENCY clocks deep."""

    def __init__(self, lut_entries: int = 2048, count_bits: int = 24):
        if not 1 <= count_bits <= 30:
            raise ValueError(f"count_bits = {count_bits}: must lie in 1 .. 30")
        self.lut_entries, self.count_bits = lut_entries, count_bits
        self.config = config_layout(lut_entries)
        super().__init__({
            "i": In(stream.Signature(PoolTap)),
            "o": Out(stream.Signature(OutputStageIn)),
            "cfg": In(self.config),
            "out_cfg": Out(out_config_layout(lut_entries)),
        })

    def elaborate(self, platform):
        m = Module()
        C = self.count_bits
        cfg, p = self.cfg, self.i.payload
        ost = SimpleNamespace(i=self.o, cfg=self.out_cfg)
        stages = WINDOW_LATENCY + DIVIDER_LATENCY
        valid = Signal(stages, name="stage_valid")
        advance = self.i.ready
        m.d.comb += advance.eq(~valid[-1] | ost.i.ready)
        fire = Signal()
        m.d.comb += fire.eq(self.i.valid & advance)
        with m.If(advance):
            m.d.sync += valid.eq(Cat(fire & p.last, valid[:-1]))

        # ---- taps: running count, sum, maximum, minimum of the window ----
        x = Signal(signed(32), name="tap_read")
        with m.Switch(cfg.in_dtype):
            with m.Case(DType.INT8):
                m.d.comb += x.eq(p.value[:8].as_signed())
            with m.Case(DType.INT16):
                m.d.comb += x.eq(p.value[:16].as_signed())
            with m.Default():
                m.d.comb += x.eq(p.value.as_signed())
        real = Signal(name="tap_real")
        m.d.comb += real.eq(~p.pad)
        run_count = Signal(C)
        run_sum = Signal(signed(32))
        run_max = Signal(signed(32), init=INT32_MIN)
        run_min = Signal(signed(32), init=INT32_MAX)
        count = Signal(C, name="window_count")
        term = Signal(signed(34), name="sum_term")
        total = Signal(signed(32), name="window_sum")
        high = Signal(signed(32), name="window_max")
        low = Signal(signed(32), name="window_min")
        m.d.comb += [
            count.eq(run_count + real),
            term.eq(Mux(real, x - cfg.zp, 0)),
            total.eq((run_sum + term)[:32]),
            high.eq(Mux(real & (x > run_max), x, run_max)),
            low.eq(Mux(real & (x < run_min), x, run_min)),
        ]
        with m.If(fire):
            with m.If(p.last):
                m.d.sync += [run_count.eq(0), run_sum.eq(0), run_max.eq(INT32_MIN), run_min.eq(INT32_MAX)]
            with m.Else():
                m.d.sync += [run_count.eq(count), run_sum.eq(total), run_max.eq(high), run_min.eq(low)]
        window = Signal(signed(32), name="window_value")
        with m.Switch(cfg.mode):
            with m.Case(PoolMode.MAX):
                m.d.comb += window.eq(high)
            with m.Case(PoolMode.MIN):
                m.d.comb += window.eq(low)
            with m.Default():
                m.d.comb += window.eq(total)

        # What travels with a window down the divider.
        carry = data.StructLayout({"value": signed(32), "multiplier": signed(32), "shift": unsigned(6),
                                   "tag": unsigned(32)})
        w_carry = Signal(carry)
        w_count = Signal(C)
        with m.If(advance):
            m.d.sync += [w_carry.value.eq(window), w_carry.multiplier.eq(p.multiplier),
                         w_carry.shift.eq(p.shift), w_carry.tag.eq(p.tag), w_count.eq(count)]

        # ---- divider stage 0: k = bit length of count - 1, divisor = count << (C - k) ----
        count_m1 = Signal(C, name="count_m1")
        k = Signal(range(C + 1), name="recip_k")
        m.d.comb += count_m1.eq(w_count - 1)
        for b in range(C):
            with m.If(count_m1[b]):
                m.d.comb += k.eq(b + 1)
        normalise = Signal(range(C + 1), name="recip_normalise")
        divisor = Signal(C + 1, name="recip_divisor")
        m.d.comb += [normalise.eq(C - k), divisor.eq((w_count << normalise)[:C + 1])]
        d_carry = Signal(carry)
        d_k = Signal(range(C + 1))
        d_div = Signal(C + 1)
        with m.If(advance):
            m.d.sync += [d_carry.eq(w_carry), d_k.eq(k), d_div.eq(divisor)]

        # ---- divider stages 1..31: quotient bits 30..0 of (((1 << 30) + 1) << C) / divisor ----
        # The remainder starts at the dividend's bits above bit 30, 2^(C-1); of the bits 30..0
        # only bit C is set.
        rem = Const(1 << (C - 1), C + 1)
        quo = Const(0, 0)
        for j in range(QUOTIENT_BITS):
            bit = QUOTIENT_BITS - 1 - j
            trial = Cat(Const(int(bit == C), 1), rem)          # 2 * remainder + dividend bit
            take = Signal(name=f"recip_take_{bit}")
            m.d.comb += take.eq(trial >= d_div)
            n_rem = Signal(C + 1, name=f"recip_rem_{bit}")
            n_quo = Signal(j + 1, name=f"recip_quo_{bit}")
            n_carry = Signal(carry, name=f"recip_carry_{bit}")
            n_k = Signal(range(C + 1), name=f"recip_k_{bit}")
            n_div = Signal(C + 1, name=f"recip_div_{bit}")
            with m.If(advance):
                m.d.sync += [n_quo.eq(Cat(take, quo)), n_carry.eq(d_carry), n_k.eq(d_k)]
                if bit:     # the last stage needs no remainder
                    m.d.sync += [n_rem.eq(Mux(take, trial - d_div, trial)), n_div.eq(d_div)]
            rem, quo, d_carry, d_k, d_div = n_rem, n_quo, n_carry, n_k, n_div

        # ---- output stage (AVG: its rescale applies reciprocal_scale) ----
        avg = Signal(name="avg")
        m.d.comb += avg.eq(cfg.mode == PoolMode.AVG)
        recip_shift = Signal(6, name="recip_shift")
        m.d.comb += recip_shift.eq(30 + d_k)
        m.d.comb += [
            ost.i.valid.eq(valid[-1]),
            ost.i.payload.value.eq(d_carry.value),
            ost.i.payload.multiplier.eq(Mux(avg, quo, d_carry.multiplier)),
            ost.i.payload.shift.eq(Mux(avg, recip_shift, d_carry.shift)),
            ost.i.payload.tag.eq(d_carry.tag),
            ost.cfg.eq(cfg.out),
        ]
        with m.If(avg):
            m.d.comb += [ost.cfg.out_mode.eq(OutMode.RESCALE | OutMode.SCALE32),
                         ost.cfg.rescale_dtype.eq(cfg.out_dtype)]
        return m


class PoolUnit(wiring.Component):
    """`lut_entries`: the LUT SRAM's size in 16-bit entries; `count_bits`: the real-tap counter."""

    def __init__(self, lut_entries: int = 2048, count_bits: int = 24):
        self.lut_entries, self.count_bits = lut_entries, count_bits
        self.config = config_layout(lut_entries)
        super().__init__({
            "w": In(stream.Signature(lut_write_layout(lut_entries))),     # LUT SRAM writes: addr, data
            "i": In(stream.Signature(PoolTap)),
            "o": Out(stream.Signature(OUT_LAYOUT)),      # the result and the tag
            "cfg": In(self.config),
        })

    @classmethod
    def for_config(cls, cfg) -> "PoolUnit":
        return cls(cfg.lut_entries)

    def elaborate(self, platform):
        m = Module()
        m.submodules.front = front = PoolFront(self.lut_entries, self.count_bits)
        m.submodules.out_stage = ost = OutputStage(self.lut_entries)
        wiring.connect(m, wiring.flipped(self.i), front.i)
        m.d.comb += [front.cfg.eq(self.cfg), ost.cfg.eq(front.out_cfg)]
        wiring.connect(m, front.o, ost.i)
        wiring.connect(m, wiring.flipped(self.w), ost.w)
        wiring.connect(m, ost.o, wiring.flipped(self.o))
        return m
