"""Elementwise sequencer: runs one ELTWISE command of the core over its SRAMs.

Per element i < ELT_COUNT (docs/isa.md, "The ELTWISE command"): operand A from the input SRAM at
ELT_A_ADDR + i*size (element 0 with A_SCALAR), B from the weight SRAM likewise, the parameter
record PARAM_ADDR + i % ELT_CHANNELS; the elementwise unit's front (hw/eltwise_unit.py, its
configuration from the unit's REGISTER_MAP) computes the value, the core's shared output stage
and writer store it at ELT_OUT_ADDR + i*size(OFM_DTYPE).

Schedule (cycle_model.eltwise_command_cycles): SETUP, CHECK (the ELTWISE rules of
firmware_model/arch/checks.py), STREAM: k clocks per element (k = 2 when an 8-byte element
meets a 4-byte word: the element's words are read on two clocks and it is written in two; else
1), then DRAIN until the last result is written (one clock more for a two-clock element's second
half), DONE. An element's reads are issued in
STREAM, its data enters the front the clock after its last read; front 7, output stage 7, write.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.checks import ELT_RULES
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import ELT_PIPELINE
from firmware_model.arch.isa import EltMode, EltOp, Status
from hw.dma_engine import bits_for
from hw.eltwise_unit import FRONT_LATENCY, REGISTER_MAP, EltwiseFront
from hw.layouts import PARAM_RECORD_LAYOUT
from hw.output_stage import LATENCY as OUTPUT_STAGE_LATENCY
from hw.output_stage import vector_sequencer_ports
from hw.register_map import AmaranthOps, drive_map, rules_pass

# SRAM read 1 + front + output stage + write 1: the pipeline the cycle model counts
assert 1 + FRONT_LATENCY + OUTPUT_STAGE_LATENCY + 1 == ELT_PIPELINE


class EltwiseSequencer(wiring.Component):
    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        W = cfg.word_bytes
        self.two_words = W < 8          # an 8-byte element spans two words
        super().__init__(vector_sequencer_ports(
            cfg, a_addr=Out(bits_for(cfg.input_words)), a_data=In(8 * W),
            b_addr=Out(bits_for(cfg.weight_words)), b_data=In(8 * W)))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W = cfg.word_bytes
        lg_w = W.bit_length() - 1
        regs = self.regs
        x = AmaranthOps

        m.submodules.front = front = EltwiseFront(cfg.lut_entries)
        sub = Signal(8)
        status = Signal(8)
        drive_map(m, REGISTER_MAP, front.cfg, regs, sub)
        m.d.comb += [self.out_cfg.eq(front.cfg.out), self.status.eq(status)]
        wiring.connect(m, front.o, wiring.flipped(self.out))

        a_size, b_size, o_size = Signal(4), Signal(4), Signal(4)
        k2 = Signal()                  # two clocks per element
        m.d.comb += self.esize.eq(o_size)
        count = Signal(32)
        a_ptr, b_ptr, o_ptr = Signal(32), Signal(32), Signal(32)
        a_step, b_step = Signal(4), Signal(4)
        rec = Signal(32)
        channels = Signal(32)
        phase = Signal()
        left = Signal(32)
        drain = Signal(range(ELT_PIPELINE + 2))
        drain_len = Signal(range(ELT_PIPELINE + 2))

        # reads: this clock's addresses (phase 1 reads the upper words of 8-byte elements)
        hi = Signal()
        m.d.comb += hi.eq(phase)
        m.d.comb += [
            self.a_addr.eq((a_ptr >> lg_w) + hi),
            self.b_addr.eq((b_ptr >> lg_w) + hi),
            self.p_addr.eq(regs.param_addr + rec),
        ]

        # the data of the reads issued last clock; for 8-byte elements on 4-byte words, the low
        # words are kept from the phase before
        issued = Signal()              # an element's last read was issued last clock
        r_a_off, r_b_off = Signal(range(W)), Signal(range(W))
        r_tag = Signal(32)
        a_lo, b_lo = Signal(8 * W), Signal(8 * W)
        p_hold = Signal(PARAM_RECORD_LAYOUT)
        r_two = Signal()
        a_words, b_words = Signal(16 * W), Signal(16 * W)
        m.d.comb += [a_words.eq(Mux(r_two, Cat(a_lo, self.a_data), self.a_data)),
                     b_words.eq(Mux(r_two, Cat(b_lo, self.b_data), self.b_data))]
        rec_now = Signal(PARAM_RECORD_LAYOUT)
        m.d.comb += rec_now.eq(Mux(r_two, p_hold, self.p_data))
        m.d.comb += [
            front.i.valid.eq(issued),
            front.i.payload.a.eq((a_words >> (r_a_off * 8))[:48]),
            front.i.payload.b.eq((b_words >> (r_b_off * 8))[:48]),
            front.i.payload.multiplier.eq(rec_now.multiplier),
            front.i.payload.shift.eq(rec_now.shift),
            front.i.payload.tag.eq(r_tag),
        ]
        m.d.sync += issued.eq(0)

        m.d.comb += self.done.eq(0)
        with m.FSM(name="eltwise"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += sub.eq(self.sub)
                    m.next = "SETUP"
            with m.State("SETUP"):
                mode = regs.elt_mode
                sa, sb, so = x.size_of(regs.elt_a_dtype), x.size_of(regs.elt_b_dtype), x.size_of(regs.ofm_dtype)
                m.d.sync += [
                    a_size.eq(sa), b_size.eq(sb), o_size.eq(so),
                    a_step.eq(Mux((mode & EltMode.A_SCALAR) != 0, 0, sa)),
                    b_step.eq(Mux((mode & EltMode.B_SCALAR) != 0, 0, sb)),
                    count.eq(regs.elt_count), left.eq(regs.elt_count),
                    a_ptr.eq(regs.elt_a_addr), b_ptr.eq(regs.elt_b_addr), o_ptr.eq(regs.elt_out_addr),
                    channels.eq(Mux(regs.elt_channels == 0, 1, regs.elt_channels)), rec.eq(0),
                    phase.eq(0), status.eq(Status.OK),
                ]
                if self.two_words:
                    binary = sub != EltOp.COPY
                    m.d.sync += k2.eq((sa > W) | (so > W) | (binary & (sb > W)))
                m.next = "CHECK"
            with m.State("CHECK"):
                with rules_pass(m, ELT_RULES, regs, sub, cfg, status):
                    m.d.sync += [drain.eq(0), drain_len.eq(Mux(k2, ELT_PIPELINE, ELT_PIPELINE - 1))]
                    with m.If(count == 0):
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "STREAM"
            with m.State("STREAM"):
                m.d.sync += [r_a_off.eq(a_ptr[:lg_w] if lg_w else 0), r_b_off.eq(b_ptr[:lg_w] if lg_w else 0),
                             r_tag.eq(o_ptr), r_two.eq(k2)]
                with m.If(k2 & ~phase):
                    m.d.sync += [phase.eq(1)]
                with m.Else():
                    m.d.sync += [phase.eq(0), issued.eq(1), left.eq(left - 1),
                                 a_ptr.eq(a_ptr + a_step), b_ptr.eq(b_ptr + b_step), o_ptr.eq(o_ptr + o_size),
                                 rec.eq(Mux(rec + 1 == channels, 0, rec + 1))]
                    with m.If(left == 1):
                        m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain + 1 == drain_len):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"
        # the low words of a two-word element arrive in its phase-1 clock: hold them (and the
        # record, read in phase 0) for the clock the element enters the front
        with m.If(~issued):
            m.d.sync += [a_lo.eq(self.a_data), b_lo.eq(self.b_data), p_hold.eq(self.p_data)]
        return m
