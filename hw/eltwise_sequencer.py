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

The vector path (cycle_model.eltwise_uses_vector: no table, one record for every element, no
8-byte element, `lanes` from the operands' alignment, eltwise_vector_lanes): each STREAM clock
reads one word of A and one of B for `lanes` elements, which enter `lanes` fronts side by side;
their results go to the core's vector output stage and vector writer (hw/vector_output_stage.py,
hw/vector_writer.py), as the MAC's and the POOL's vector paths do. GAP holds the next vector
until the writer has stored this one's words. Schedule: cycle_model.eltwise_vector_cycles.
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.checks import ELT_RULES
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import ELT_PIPELINE, VELT_PIPELINE
from firmware_model.arch.isa import EltMode, EltOp, LutMode, Status
from hw.dma_engine import bits_for
from hw.eltwise_unit import FRONT_LATENCY, REGISTER_MAP, EltwiseFront
from hw.layouts import PARAM_RECORD_LAYOUT
from hw.output_stage import LATENCY as OUTPUT_STAGE_LATENCY
from hw.output_stage import vector_sequencer_ports
from hw.register_map import AmaranthOps, drive_map, rules_pass
from hw.vector_output_stage import LATENCY as VECTOR_STAGE_LATENCY
from hw.vector_output_stage import side_layout, vector_in_layout
from hw.vector_writer import LATENCY as VECTOR_WRITER_LATENCY
from hw.vector_writer import alignment_log2, element_log2, write_words

# SRAM read 1 + front + output stage + write 1: the pipeline the cycle model counts
assert 1 + FRONT_LATENCY + OUTPUT_STAGE_LATENCY + 1 == ELT_PIPELINE
# the vector path: SRAM read 1 + front + the vector stage + the writer's register
assert 1 + FRONT_LATENCY + VECTOR_STAGE_LATENCY + VECTOR_WRITER_LATENCY == VELT_PIPELINE


class EltwiseSequencer(wiring.Component):
    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        W = cfg.word_bytes
        self.two_words = W < 8          # an 8-byte element spans two words
        super().__init__({
            # A: the input SRAM, or the output SRAM with A_FROM_OUTPUT; B: the weight SRAM, or the
            # output SRAM with B_FROM_OUTPUT (the core routes the reads)
            **vector_sequencer_ports(cfg, a_addr=Out(bits_for(max(cfg.input_words, cfg.output_words))),
                                     a_data=In(8 * W),
                                     b_addr=Out(bits_for(max(cfg.weight_words, cfg.output_words))), b_data=In(8 * W)),
            # the vector path's results, into the core's vector output stage (valid only)
            "vout_valid": Out(1),
            "vout": Out(vector_in_layout(cfg.mac_rows)),
        })

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
        drain = Signal(range(ELT_PIPELINE + 16))
        drain_len = Signal(range(ELT_PIPELINE + 16))

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

        # ---- the vector path (module docstring) ----
        R = cfg.mac_rows
        lg_r = R.bit_length() - 1
        vec = Signal(name="vec")
        lanes_lg = Signal(range(lg_r + 1), name="vec_lanes_lg")
        o_lg = Signal(2, name="vec_out_lg")
        a_lg, b_lg = Signal(2, name="vec_a_lg"), Signal(2, name="vec_b_lg")
        a_scalar, b_scalar = Signal(name="vec_a_scalar"), Signal(name="vec_b_scalar")

        vn = Signal(range(R + 1), name="vec_n")            # elements of the vector issued now
        nbytes = Signal(16, name="vec_nbytes")
        words = Signal(16, name="vec_words")
        m.d.comb += [vn.eq(Mux(left < (1 << lanes_lg), left, 1 << lanes_lg)), nbytes.eq(vn << o_lg),
                     words.eq(write_words(o_ptr, nbytes, W))]
        gap = Signal(16, name="vec_gap")
        vdrain = Signal(range(ELT_PIPELINE + 16), name="vec_drain")

        # the vector issued last clock: its words arrive now and enter the fronts
        vissued = Signal(name="vec_issued")
        m.d.sync += vissued.eq(0)
        side = [Signal(side_layout(), name=f"vec_side_{k}") for k in range(1 + FRONT_LATENCY)]
        m.d.sync += [side[k].eq(side[k - 1]) for k in range(1, len(side))]
        a_shifted, b_shifted = Signal(8 * W, name="vec_a_word"), Signal(8 * W, name="vec_b_word")
        m.d.comb += [a_shifted.eq(self.a_data >> (r_a_off * 8)), b_shifted.eq(self.b_data >> (r_b_off * 8))]

        def element(word, lg, scalar, j):
            """Lane j's element bits (48, the front reads its dtype's low bits): element j of the
            block, or element 0 for a scalar operand."""
            def at(size):
                lo = j * size * 8
                return word[lo:lo + 48] if lo < 8 * W else 0
            return Mux(scalar, word[:48], Mux(lg == 2, at(4), Mux(lg == 1, at(2), at(1))))

        lane_fronts = []
        for j in range(R):
            vf = EltwiseFront(cfg.lut_entries)
            m.submodules[f"vfront_{j}"] = vf
            lane_fronts.append(vf)
            m.d.comb += [
                vf.cfg.eq(front.cfg), vf.o.ready.eq(1),
                vf.i.valid.eq(vissued),
                vf.i.payload.a.eq(element(a_shifted, a_lg, a_scalar, j)),
                vf.i.payload.b.eq(element(b_shifted, b_lg, b_scalar, j)),
                vf.i.payload.multiplier.eq(self.p_data.multiplier),
                vf.i.payload.shift.eq(self.p_data.shift),
                vf.i.payload.tag.eq(0),
                self.vout.values[j].eq(vf.o.payload.value),
                self.vout.multipliers[j].eq(vf.o.payload.multiplier),
                self.vout.shifts[j].eq(vf.o.payload.shift),
            ]
        m.d.comb += [self.vout_valid.eq(lane_fronts[0].o.valid), self.vout.side.eq(side[-1])]

        # SETUP's decision for the vector path, from the registers
        v_mode = regs.elt_mode
        sa, sb, so = x.size_of(regs.elt_a_dtype), x.size_of(regs.elt_b_dtype), x.size_of(regs.ofm_dtype)
        unary = sub == EltOp.COPY
        a_sc, b_sc = (v_mode & EltMode.A_SCALAR) != 0, (v_mode & EltMode.B_SCALAR) != 0
        al_a, al_b = alignment_log2(regs.elt_a_addr, W), alignment_log2(regs.elt_b_addr, W)
        sa_lg, sb_lg = element_log2(sa), element_log2(sb)
        fit_a = Signal(signed(5), name="vec_fit_a")
        fit_b = Signal(signed(5), name="vec_fit_b")
        m.d.comb += [fit_a.eq(Mux(a_sc, lg_r, al_a - sa_lg)),
                     fit_b.eq(Mux(unary | b_sc, lg_r, al_b - sb_lg))]
        lanes_now = Signal(signed(5), name="vec_lanes_now")
        m.d.comb += lanes_now.eq(Mux(fit_a < fit_b, fit_a, fit_b))
        small = Signal(name="vec_small_elements")
        m.d.comb += small.eq((sa != 0) & (sa <= 4) & (so != 0) & (so <= 4) & (unary | ((sb != 0) & (sb <= 4))))

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
                # the vector path's decision (cycle_model.eltwise_vector_lanes, eltwise_uses_vector)
                m.d.sync += [
                    vec.eq(small & (lanes_now >= 0) & (regs.lut_mode == LutMode.OFF) & (regs.elt_channels <= 1)),
                    lanes_lg.eq(Mux(lanes_now > lg_r, lg_r, lanes_now)),
                    o_lg.eq(element_log2(so)), a_lg.eq(sa_lg), b_lg.eq(sb_lg), a_scalar.eq(a_sc), b_scalar.eq(b_sc),
                ]
                m.next = "CHECK"
            with m.State("CHECK"):
                with rules_pass(m, ELT_RULES, regs, sub, cfg, status):
                    m.d.sync += [drain.eq(0), drain_len.eq(Mux(k2, ELT_PIPELINE, ELT_PIPELINE - 1))]
                    with m.If(count == 0):
                        m.d.sync += vec.eq(0)        # nothing to compute: the scalar drain
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "STREAM"
            with m.State("STREAM"):
                m.d.sync += [r_a_off.eq(a_ptr[:lg_w] if lg_w else 0), r_b_off.eq(b_ptr[:lg_w] if lg_w else 0),
                             r_tag.eq(o_ptr), r_two.eq(k2)]
                with m.If(vec):
                    m.d.sync += [vissued.eq(1), side[0].addr.eq(o_ptr), side[0].nbytes.eq(nbytes),
                                 side[0].words.eq(words), left.eq(left - vn),
                                 a_ptr.eq(a_ptr + (a_step << lanes_lg)), b_ptr.eq(b_ptr + (b_step << lanes_lg)),
                                 o_ptr.eq(o_ptr + (o_size << lanes_lg))]
                    with m.If(left == vn):
                        m.d.sync += [drain.eq(0), vdrain.eq(VELT_PIPELINE - 1 + words)]
                        m.next = "DRAIN"
                    with m.Elif(words > 1):
                        m.d.sync += gap.eq(words - 1)
                        m.next = "GAP"
                with m.Elif(k2 & ~phase):
                    m.d.sync += [phase.eq(1)]
                with m.Else():
                    m.d.sync += [phase.eq(0), issued.eq(1), left.eq(left - 1),
                                 a_ptr.eq(a_ptr + a_step), b_ptr.eq(b_ptr + b_step), o_ptr.eq(o_ptr + o_size),
                                 rec.eq(Mux(rec + 1 == channels, 0, rec + 1))]
                    with m.If(left == 1):
                        m.next = "DRAIN"
            with m.State("GAP"):
                m.d.sync += gap.eq(gap - 1)
                with m.If(gap == 1):
                    m.next = "STREAM"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain + 1)
                with m.If(Mux(vec, drain + 1 == vdrain, drain + 1 == drain_len)):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"
        # the low words of a two-word element arrive in its phase-1 clock: hold them (and the
        # record, read in phase 0) for the clock the element enters the front
        with m.If(~issued):
            m.d.sync += [a_lo.eq(self.a_data), b_lo.eq(self.b_data), p_hold.eq(self.p_data)]
        return m
