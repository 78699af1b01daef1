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

The vector path (cycle_model.pool_uses_vector: not AVG, no table, no int48 output, pixels
aligned to an element): a window covers a block of `lanes` channels (pool_vector_lanes: as many
as fit the pixels' alignment, at most mac.rows) that lie in one input-SRAM word, so each tap
reads one word for all of them; each lane keeps its running sum, maximum and minimum, and the
window's results go to the core's vector output stage and vector writer (hw/vector_output_stage.py,
hw/vector_writer.py), as the MAC's vector path does. Blocks are the outer loop: RECORDS reads
the block's parameter records first when the command rescales (one a clock), then the windows
in row-major order; GAP holds the next window until the writer has stored this one's words.
Schedule: cycle_model.pool_vector_cycles.
"""

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from firmware_model.arch.checks import POOL_RULES
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import POOL_PIPELINE, VPOOL_AVG_PIPELINE, VPOOL_PIPELINE
from firmware_model.arch.isa import LutMode, OutMode, PoolMode, Status
from firmware_model.tosa_ops.dtypes import DType
from hw.dma_engine import bits_for
from hw.output_stage import LATENCY as OUTPUT_STAGE_LATENCY
from hw.output_stage import vector_sequencer_ports
from hw.output_stage import VALUE_BITS
from hw.pool_unit import FRONT_LATENCY, REGISTER_MAP, PoolFront
from hw.register_map import AmaranthOps, drive_map, rules_pass
from hw.vector_output_stage import LATENCY as VECTOR_STAGE_LATENCY
from hw.vector_output_stage import side_layout, vector_in_layout
from hw.vector_writer import LATENCY as VECTOR_WRITER_LATENCY
from hw.vector_writer import alignment_log2, element_log2, write_words

# tap read 1 + front + output stage + write 1: the pipeline the cycle model counts
assert 1 + FRONT_LATENCY + OUTPUT_STAGE_LATENCY + 1 == POOL_PIPELINE
# the vector path: tap read 1 + the window register 1 + the vector stage + the writer's register
assert 1 + 1 + VECTOR_STAGE_LATENCY + VECTOR_WRITER_LATENCY == VPOOL_PIPELINE
# AVG on the vector path: tap read 1 + the front (its divider) + the vector stage + the writer's register
assert 1 + FRONT_LATENCY + VECTOR_STAGE_LATENCY + VECTOR_WRITER_LATENCY == VPOOL_AVG_PIPELINE


class PoolSequencer(wiring.Component):
    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        W = cfg.word_bytes
        super().__init__({
            # the input box: the input SRAM, or the output SRAM with IFM_SRAM OUTPUT (the core
            # routes the reads)
            **vector_sequencer_ports(cfg, i_addr=Out(bits_for(max(cfg.input_words, cfg.output_words))),
                                     i_data=In(8 * W)),
            # the vector path's windows, into the core's vector output stage (valid only)
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

        m.submodules.front = front = PoolFront(cfg.lut_entries)
        sub = Signal(8)
        status = Signal(8)
        drive_map(m, REGISTER_MAP, front.cfg, regs, sub)
        m.d.comb += [self.out_cfg.eq(front.out_cfg), self.status.eq(status)]
        # the scalar path's results go to the core's output stage; on the vector path the front
        # only runs AVG's divider for the windows (its results feed the vector stage's scaling)
        vec = Signal(name="vec")                        # this command takes the vector path
        m.d.comb += [self.out.valid.eq(front.o.valid & ~vec), self.out.payload.eq(front.o.payload),
                     front.o.ready.eq(vec | self.out.ready)]

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
        rec_j = Signal(range(cfg.mac_rows + 1), name="vec_record")     # RECORDS: the lane whose record is read
        m.d.comb += [self.i_addr.eq(addr >> lg_w), self.p_addr.eq(regs.param_addr + c + rec_j)]

        # the tap enters the front the clock after its read
        issued = Signal()
        avg = Signal(name="vec_avg")    # a vector AVG: the front's divider gives each window's scale
        r_vec = Signal()                # the tap read last clock is a vector path's
        r_off = Signal(range(W))
        r_pad, r_last = Signal(), Signal()
        r_tag = Signal(32)
        m.d.sync += issued.eq(0)
        m.d.comb += [
            front.i.valid.eq(issued & (~r_vec | avg)),
            front.i.payload.value.eq(Mux(r_vec, 0, (self.i_data >> (r_off * 8))[:32])),
            front.i.payload.pad.eq(r_pad),
            front.i.payload.last.eq(r_last),
            front.i.payload.multiplier.eq(self.p_data.multiplier),
            front.i.payload.shift.eq(self.p_data.shift),
            front.i.payload.tag.eq(r_tag),
        ]

        # ---- the vector path (module docstring) ----
        R = cfg.mac_rows
        lg_r = R.bit_length() - 1
        lanes_lg = Signal(range(lg_r + 1), name="vec_lanes_lg")   # log2 of the lanes of a block
        blk_n = Signal(range(R + 1), name="vec_block_n")          # channels of the current block
        i_lg, o_lg = Signal(2), Signal(3)                          # log2 of the element sizes
        rescale = Signal(name="vec_rescale")
        # SETUP's decision (cycle_model.pool_uses_vector, pool_vector_lanes)
        align_lg = Signal(range(lg_w + 1), name="vec_align_lg")
        m.d.comb += align_lg.eq(alignment_log2(regs.ifm_addr | regs.ifm_row_stride | regs.ifm_pix_stride, W))
        size_in = x.size_of(regs.ifm_dtype)
        size_out = x.size_of(regs.ofm_dtype)
        in_lg_now = Signal(2)
        m.d.comb += in_lg_now.eq(element_log2(size_in))
        fit_lg = Signal(range(lg_w + 1))                 # align / size, as a log
        m.d.comb += fit_lg.eq(align_lg - in_lg_now)
        vec_now = Signal()
        m.d.comb += vec_now.eq((regs.lut_mode == LutMode.OFF) & (size_out != 8)
                               & (size_in != 0) & (align_lg >= in_lg_now))

        # the block's lanes: the word at the tap's offset, lane j the j-th element, signed
        lanes = [Signal(signed(32), name=f"vec_x_{j}") for j in range(R)]
        shifted = Signal(8 * W, name="vec_word")
        m.d.comb += shifted.eq(self.i_data >> (r_off * 8))
        for j in range(R):
            by_size = {lg: (shifted[j * bits:(j + 1) * bits].as_signed() if (j + 1) * bits <= 8 * W else 0)
                       for lg, bits in ((0, 8), (1, 16), (2, 32))}
            m.d.comb += lanes[j].eq(Mux(i_lg == 0, by_size[0], Mux(i_lg == 1, by_size[1], by_size[2])))
        run_sum = [Signal(signed(32), name=f"vec_sum_{j}") for j in range(R)]
        run_max = [Signal(signed(32), name=f"vec_max_{j}", init=-(1 << 31)) for j in range(R)]
        run_min = [Signal(signed(32), name=f"vec_min_{j}", init=(1 << 31) - 1) for j in range(R)]
        lane_mult = [Signal(signed(32), name=f"vec_mult_{j}") for j in range(R)]
        lane_shift = [Signal(6, name=f"vec_shift_{j}") for j in range(R)]
        r_nbytes, r_words = Signal(16), Signal(16)
        vin_valid = Signal(name="vec_window_valid")
        vin = Signal(vector_in_layout(R), name="vec_window")
        m.d.sync += vin_valid.eq(0)
        # AVG: a window's lane sums wait in a FIFO for the divider's (multiplier, shift), which
        # the front offers FRONT_LATENCY clocks after the window's last tap (at most that many
        # windows of one tap each are in flight)
        m.submodules.avg_fifo = avg_fifo = SyncFIFOBuffered(width=32 * R + side_layout().size,
                                                            depth=FRONT_LATENCY + 4)
        fifo_in = Signal(data.StructLayout({"sums": data.ArrayLayout(signed(32), R), "side": side_layout()}))
        fifo_out = Signal.like(fifo_in)
        m.d.comb += [avg_fifo.w_data.eq(fifo_in), fifo_out.eq(avg_fifo.r_data),
                     avg_fifo.r_en.eq(vec & avg & front.o.valid)]
        m.d.comb += [self.vout_valid.eq(Mux(avg, vec & front.o.valid, vin_valid)),
                     self.vout.side.eq(Mux(avg, fifo_out.side, vin.side))]
        for j in range(R):
            m.d.comb += [self.vout.values[j].eq(Mux(avg, fifo_out.sums[j], vin.values[j])),
                         self.vout.multipliers[j].eq(Mux(avg, front.o.payload.multiplier, vin.multipliers[j])),
                         self.vout.shifts[j].eq(Mux(avg, front.o.payload.shift, vin.shifts[j]))]
        zp = Signal(signed(32))
        m.d.comb += zp.eq(regs.ifm_zp)
        for j in range(R):
            xj = lanes[j]
            term = Signal(signed(34), name=f"vec_term_{j}")
            total = Signal(signed(32), name=f"vec_total_{j}")
            high = Signal(signed(32), name=f"vec_high_{j}")
            lowv = Signal(signed(32), name=f"vec_lowv_{j}")
            m.d.comb += [term.eq(Mux(r_pad, 0, xj - zp)), total.eq((run_sum[j] + term)[:32]),
                         high.eq(Mux(~r_pad & (xj > run_max[j]), xj, run_max[j])),
                         lowv.eq(Mux(~r_pad & (xj < run_min[j]), xj, run_min[j]))]
            window = Signal(signed(32), name=f"vec_window_{j}")
            m.d.comb += window.eq(Mux(sub == PoolMode.MAX, high, Mux(sub == PoolMode.MIN, lowv, total)))
            m.d.comb += fifo_in.sums[j].eq(total)
            with m.If(r_vec & r_last):
                m.d.sync += [run_sum[j].eq(0), run_max[j].eq(-(1 << 31)), run_min[j].eq((1 << 31) - 1),
                             vin.values[j].eq(window), vin.multipliers[j].eq(lane_mult[j]),
                             vin.shifts[j].eq(lane_shift[j])]
            with m.Elif(r_vec):
                m.d.sync += [run_sum[j].eq(total), run_max[j].eq(high), run_min[j].eq(lowv)]
        m.d.comb += [fifo_in.side.addr.eq(r_tag), fifo_in.side.nbytes.eq(r_nbytes), fifo_in.side.words.eq(r_words),
                     avg_fifo.w_en.eq(r_vec & r_last & avg)]
        with m.If(r_vec & r_last & ~avg):
            m.d.sync += [vin_valid.eq(1), vin.side.addr.eq(r_tag), vin.side.nbytes.eq(r_nbytes),
                         vin.side.words.eq(r_words)]
        # RECORDS: the record of lane rec_j arrives the clock after its read
        rec_take = Signal()
        rec_lane = Signal(range(R + 1))
        m.d.sync += rec_take.eq(0)
        with m.If(rec_take):
            for j in range(R):
                with m.If(rec_lane == j):
                    m.d.sync += [lane_mult[j].eq(self.p_data.multiplier), lane_shift[j].eq(self.p_data.shift)]
        # this window's output words (cycle_model.vector_write_words) and the clocks until the next
        nbytes = Signal(16, name="vec_nbytes")
        words = Signal(16, name="vec_words")
        taps = Signal(32, name="vec_taps")
        gap = Signal(16, name="vec_gap")
        m.d.comb += [nbytes.eq(blk_n << o_lg), words.eq(write_words(tag, nbytes, W))]
        step_c_in, step_c_out = Signal(32), Signal(32)   # a block's bytes in and out
        vdrain = Signal(16, name="vec_drain")
        records_next = Signal()                          # GAP: a block with records follows
        m.d.sync += r_vec.eq(0)

        # the loops' next values, one home for both paths
        more_cols, more_rows = Signal(name="more_cols"), Signal(name="more_rows")
        more_blocks = Signal(name="vec_more_blocks")
        next_x0, next_y0 = Signal(signed(40), name="next_x0"), Signal(signed(40), name="next_y0")
        next_o_col, next_o_row = Signal(32, name="next_out_col"), Signal(32, name="next_out_row")
        m.d.comb += [more_cols.eq(ox + 1 < regs.ofm_w), more_rows.eq(oy + 1 < regs.ofm_h),
                     more_blocks.eq(c + blk_n < regs.ofm_c),
                     next_x0.eq(x0 + regs.stride_w), next_y0.eq(y0 + regs.stride_h),
                     next_o_col.eq(o_col + regs.ofm_pix_stride), next_o_row.eq(o_row + regs.ofm_row_stride)]
        next_col = [ox.eq(ox + 1), x0.eq(next_x0), col_base.eq(col_base + step_ox), o_col.eq(next_o_col)]
        next_row = [ox.eq(0), oy.eq(oy + 1), x0.eq(-regs.pool_pad_left),
                    col_base.eq(-(regs.pool_pad_left * regs.ifm_pix_stride)), o_col.eq(0),
                    y0.eq(next_y0), row_base.eq(row_base + step_oy), o_row.eq(next_o_row)]

        m.d.comb += self.done.eq(0)
        with m.FSM(name="pool"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += sub.eq(self.sub)
                    m.next = "SETUP"
            with m.State("SETUP"):
                lanes_now = Mux(fit_lg > lg_r, lg_r, fit_lg)
                m.d.sync += [vec.eq(vec_now), avg.eq(sub == PoolMode.AVG), lanes_lg.eq(lanes_now), i_lg.eq(in_lg_now),
                             o_lg.eq(element_log2(size_out)),
                             rescale.eq((regs.out_mode & OutMode.RESCALE) != 0),
                             blk_n.eq(Mux(regs.ofm_c < (1 << lanes_now), regs.ofm_c, 1 << lanes_now)),
                             step_c_in.eq(size_in << lanes_now), step_c_out.eq(size_out << lanes_now),
                             taps.eq(regs.kernel_h * regs.kernel_w), rec_j.eq(0)]
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
                    with m.If(~taps_left):
                        m.d.sync += vec.eq(0)        # nothing to pool: the scalar drain
                        m.next = "DRAIN"
                    with m.Elif(vec & rescale):
                        m.next = "RECORDS"
                    with m.Else():
                        m.next = "TAPS"
            with m.State("RECORDS"):
                m.d.sync += [rec_take.eq(1), rec_lane.eq(rec_j)]
                with m.If(rec_j + 1 == blk_n):
                    m.d.sync += rec_j.eq(0)
                    m.next = "TAPS"
                with m.Else():
                    m.d.sync += rec_j.eq(rec_j + 1)
            with m.State("GAP"):
                m.d.sync += gap.eq(gap - 1)
                with m.If(gap == 1):
                    with m.If(records_next):      # a new block that rescales: its records first
                        m.next = "RECORDS"
                    with m.Else():
                        m.next = "TAPS"
            with m.State("TAPS"):
                m.d.sync += [issued.eq(1), r_off.eq(addr[:lg_w] if lg_w else 0), r_pad.eq(pad), r_last.eq(last),
                             r_tag.eq(tag)]
                new_window = [kx.eq(0), ky.eq(0), k_row.eq(0), k_col.eq(0)]
                with m.If(vec):
                    m.d.sync += [r_vec.eq(1), r_nbytes.eq(nbytes), r_words.eq(words)]
                    with m.If(kx + 1 < regs.kernel_w):
                        m.d.sync += [kx.eq(kx + 1), k_col.eq(k_col + regs.ifm_pix_stride)]
                    with m.Elif(ky + 1 < regs.kernel_h):
                        m.d.sync += [kx.eq(0), k_col.eq(0), ky.eq(ky + 1), k_row.eq(k_row + regs.ifm_row_stride)]
                    with m.Else():
                        # the window's last tap: the next window (row-major), else the next block
                        new_block = Signal(name="vec_new_block")
                        m.d.comb += new_block.eq(0)
                        with m.If(more_cols):
                            m.d.sync += new_window + next_col
                        with m.Elif(more_rows):
                            m.d.sync += new_window + next_row
                        with m.Elif(more_blocks):
                            m.d.comb += new_block.eq(1)
                            rest = regs.ofm_c - c - blk_n
                            m.d.sync += new_window + [
                                ox.eq(0), oy.eq(0), x0.eq(-regs.pool_pad_left), y0.eq(-regs.pool_pad_top),
                                col_base.eq(-(regs.pool_pad_left * regs.ifm_pix_stride)),
                                row_base.eq(regs.ifm_addr - regs.pool_pad_top * regs.ifm_row_stride),
                                o_col.eq(0), o_row.eq(0), c.eq(c + blk_n), c_off.eq(c_off + step_c_in),
                                o_c.eq(o_c + step_c_out), blk_n.eq(Mux(rest < (1 << lanes_lg), rest, 1 << lanes_lg))]
                        with m.Else():
                            m.d.sync += [vdrain.eq(Mux(avg, VPOOL_AVG_PIPELINE, VPOOL_PIPELINE) - 1 + words),
                                         drain.eq(0)]
                            m.next = "DRAIN"
                        with m.If(more_cols | more_rows | more_blocks):
                            m.d.sync += records_next.eq(new_block & rescale)
                            with m.If(words > taps):
                                m.d.sync += gap.eq(words - taps)
                                m.next = "GAP"
                            with m.Elif(new_block & rescale):
                                m.next = "RECORDS"
                with m.Elif(kx + 1 < regs.kernel_w):
                    m.d.sync += [kx.eq(kx + 1), k_col.eq(k_col + regs.ifm_pix_stride)]
                with m.Elif(ky + 1 < regs.kernel_h):
                    m.d.sync += [kx.eq(0), k_col.eq(0), ky.eq(ky + 1), k_row.eq(k_row + regs.ifm_row_stride)]
                with m.Elif(c + 1 < regs.ofm_c):
                    m.d.sync += new_window + [c.eq(c + 1), c_off.eq(c_off + i_size), o_c.eq(o_c + o_size)]
                with m.Elif(more_cols):
                    m.d.sync += new_window + [c.eq(0), c_off.eq(0), o_c.eq(0)] + next_col
                with m.Elif(more_rows):
                    m.d.sync += new_window + [c.eq(0), c_off.eq(0), o_c.eq(0)] + next_row
                with m.Else():
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain + 1)
                with m.If(vec):
                    with m.If(drain + 1 == vdrain):
                        m.next = "DONE"
                with m.Elif(drain + 1 == POOL_PIPELINE - 1):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"
        return m
