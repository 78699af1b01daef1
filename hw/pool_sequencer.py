"""Pooling sequencer: runs one POOL command of the core over its SRAMs.

For each output element (oy, ox, c) in row-major order over OFM_H x OFM_W x OFM_C, every tap
(ky, kx) of its window, one per clock (docs/isa.md, "The POOL command"): the input element at
box row y = oy*STRIDE_H + ky - POOL_PAD_TOP, column x = ox*STRIDE_W + kx - POOL_PAD_LEFT,
IFM_ADDR + y*IFM_ROW_STRIDE + x*IFM_PIX_STRIDE + c*size of the input SRAM, a padding tap when
(y, x) lies outside POOL_IN_H x POOL_IN_W (read, but masked); the window's last tap carries the
parameter record PARAM_ADDR + c and the output address OFM_ADDR + oy*OFM_ROW_STRIDE +
ox*OFM_PIX_STRIDE + c*size(OFM_DTYPE). The pooling unit's front (hw/pool_unit.py, configured by
its REGISTER_MAP) reduces the windows; the core's shared output stage and writer store them.

Schedule (cycle_model.pool_command_cycles): SETUP, CHECK (the POOL rules of
firmware_model/arch/checks.py), TAPS (one clock per tap), DRAIN until the last result is
written, DONE.
"""

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.checks import POOL_RULES
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import POOL_PIPELINE
from firmware_model.arch.isa import Status
from hw.dma_engine import bits_for
from hw.output_stage import LATENCY as OUTPUT_STAGE_LATENCY
from hw.output_stage import vector_sequencer_ports
from hw.pool_unit import FRONT_LATENCY, REGISTER_MAP, PoolFront
from hw.register_map import AmaranthOps, drive_map, rules_pass

# tap read 1 + front + output stage + write 1: the pipeline the cycle model counts
assert 1 + FRONT_LATENCY + OUTPUT_STAGE_LATENCY + 1 == POOL_PIPELINE


class PoolSequencer(wiring.Component):
    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        W = cfg.word_bytes
        super().__init__(vector_sequencer_ports(cfg, i_addr=Out(bits_for(cfg.input_words)), i_data=In(8 * W)))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W = cfg.word_bytes
        lg_w = W.bit_length() - 1
        regs = self.regs
        x = AmaranthOps

        m.submodules.front = front = PoolFront(cfg.lut_entries)
        sub = Signal(8)
        status = Signal(8)
        drive_map(m, REGISTER_MAP, front.cfg, regs, sub)
        m.d.comb += [self.out_cfg.eq(front.out_cfg), self.status.eq(status)]
        wiring.connect(m, front.o, wiring.flipped(self.out))

        i_size, o_size = Signal(4), Signal(4)
        m.d.comb += self.esize.eq(o_size)
        oy, ox, c, ky, kx = (Signal(32, name=n) for n in ("oy", "ox", "c", "ky", "kx"))
        taps_left = Signal(1)          # 1 while TAPS has a tap to issue
        drain = Signal(range(POOL_PIPELINE + 1))

        # The tap's box position and addresses, kept by additions as the loops advance (no
        # multiplier per tap): y = y0 + ky with y0 = oy*STRIDE_H - PAD_TOP, x = x0 + kx likewise;
        # the input address wraps at 32 bits like the registers (exact for every real tap, which
        # the rules keep inside the SRAM; a padding tap's read is masked).
        y0, x0 = Signal(signed(40), name="tap_y0"), Signal(signed(40), name="tap_x0")
        y = Signal(signed(40), name="tap_y")
        xx = Signal(signed(40), name="tap_x")
        m.d.comb += [y.eq(y0 + ky), xx.eq(x0 + kx)]
        pad = Signal(name="tap_pad")
        m.d.comb += pad.eq((y < 0) | (y >= regs.pool_in_h) | (xx < 0) | (xx >= regs.pool_in_w))
        row_base, col_base, c_off, k_row, k_col = (Signal(32, name=n) for n in
                                                   ("tap_row_base", "tap_col_base", "tap_c_off", "tap_k_row", "tap_k_col"))
        addr = Signal(32, name="tap_addr")
        m.d.comb += addr.eq(row_base + col_base + c_off + k_row + k_col)
        o_row, o_col, o_c = Signal(32, name="out_row"), Signal(32, name="out_col"), Signal(32, name="out_c")
        tag = Signal(32, name="tap_tag")
        m.d.comb += tag.eq(regs.ofm_addr + o_row + o_col + o_c)
        last = Signal(name="tap_last")
        m.d.comb += last.eq((ky + 1 == regs.kernel_h) & (kx + 1 == regs.kernel_w))
        # per-command steps (products of two registers: 64 bits, once per command)
        step_oy, step_ox = Signal(32), Signal(32)
        m.d.comb += [self.i_addr.eq(addr >> lg_w), self.p_addr.eq(regs.param_addr + c)]

        # the tap enters the front the clock after its read
        issued = Signal()
        r_off = Signal(range(W))
        r_pad, r_last = Signal(), Signal()
        r_tag = Signal(32)
        m.d.sync += issued.eq(0)
        m.d.comb += [
            front.i.valid.eq(issued),
            front.i.payload.value.eq((self.i_data >> (r_off * 8))[:32]),
            front.i.payload.pad.eq(r_pad),
            front.i.payload.last.eq(r_last),
            front.i.payload.multiplier.eq(self.p_data.multiplier),
            front.i.payload.shift.eq(self.p_data.shift),
            front.i.payload.tag.eq(r_tag),
        ]

        m.d.comb += self.done.eq(0)
        with m.FSM(name="pool"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += sub.eq(self.sub)
                    m.next = "SETUP"
            with m.State("SETUP"):
                m.d.sync += [i_size.eq(x.size_of(regs.ifm_dtype)), o_size.eq(x.size_of(regs.ofm_dtype)),
                             oy.eq(0), ox.eq(0), c.eq(0), ky.eq(0), kx.eq(0), drain.eq(0), status.eq(Status.OK),
                             y0.eq(-regs.pool_pad_top), x0.eq(-regs.pool_pad_left),
                             row_base.eq(regs.ifm_addr - regs.pool_pad_top * regs.ifm_row_stride),
                             col_base.eq(-(regs.pool_pad_left * regs.ifm_pix_stride)),
                             c_off.eq(0), k_row.eq(0), k_col.eq(0), o_row.eq(0), o_col.eq(0), o_c.eq(0),
                             step_oy.eq(regs.stride_h * regs.ifm_row_stride),
                             step_ox.eq(regs.stride_w * regs.ifm_pix_stride),
                             taps_left.eq((regs.ofm_h != 0) & (regs.ofm_w != 0) & (regs.ofm_c != 0)
                                          & (regs.kernel_h != 0) & (regs.kernel_w != 0))]
                m.next = "CHECK"
            with m.State("CHECK"):
                with rules_pass(m, POOL_RULES, regs, sub, cfg, status):
                    with m.If(taps_left):
                        m.next = "TAPS"
                    with m.Else():
                        m.next = "DRAIN"
            with m.State("TAPS"):
                m.d.sync += [issued.eq(1), r_off.eq(addr[:lg_w] if lg_w else 0), r_pad.eq(pad), r_last.eq(last),
                             r_tag.eq(tag)]
                new_window = [kx.eq(0), ky.eq(0), k_row.eq(0), k_col.eq(0)]
                with m.If(kx + 1 < regs.kernel_w):
                    m.d.sync += [kx.eq(kx + 1), k_col.eq(k_col + regs.ifm_pix_stride)]
                with m.Elif(ky + 1 < regs.kernel_h):
                    m.d.sync += [kx.eq(0), k_col.eq(0), ky.eq(ky + 1), k_row.eq(k_row + regs.ifm_row_stride)]
                with m.Elif(c + 1 < regs.ofm_c):
                    m.d.sync += new_window + [c.eq(c + 1), c_off.eq(c_off + i_size), o_c.eq(o_c + o_size)]
                with m.Elif(ox + 1 < regs.ofm_w):
                    m.d.sync += new_window + [c.eq(0), c_off.eq(0), o_c.eq(0), ox.eq(ox + 1), x0.eq(x0 + regs.stride_w),
                                              col_base.eq(col_base + step_ox), o_col.eq(o_col + regs.ofm_pix_stride)]
                with m.Elif(oy + 1 < regs.ofm_h):
                    m.d.sync += new_window + [c.eq(0), c_off.eq(0), o_c.eq(0), ox.eq(0), oy.eq(oy + 1),
                                              x0.eq(-regs.pool_pad_left),
                                              col_base.eq(-(regs.pool_pad_left * regs.ifm_pix_stride)), o_col.eq(0),
                                              y0.eq(y0 + regs.stride_h), row_base.eq(row_base + step_oy),
                                              o_row.eq(o_row + regs.ofm_row_stride)]
                with m.Else():
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain + 1 == POOL_PIPELINE - 1):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"
        return m
