"""MAC sequencer: runs one MAC command (a convolution tile) over the SRAMs.

Loop order (weight-stationary, accumulators in SRAM), for each block of `rows` output channels:

    for ky, kx, icb:                       one reduction step per kernel position and channel block
        load the rows x cols weight block  (rows + 1 clocks; after a block's first step it was
                                            prefetched into the shadow block during the previous
                                            step's pass: one SWAP clock, or the loader's rest)
        for each output pixel p of the tile: acc[p] (+)= MAC(input vector at p, block)   (P + 1 clocks)
    for each output pixel p, for each channel lane r:   (P x (1 + lanes x write clocks) clocks)
        bias -> `out`: the core's output stage (rescale, clamp, table) -> the output writer

The timing is fixed by this loop and nothing else (no data-dependent stalls), so
`firmware_model.arch.cycle_model.mac_command_cycles` predicts it exactly; docs/isa.md gives the formula.
One exception, which the model's Timeline.unit times: the next command's first weight block. Once
a command's last block is with the output engine, and the command processor holds the next
command, a MAC ready to start (`next_mac`), the loader reads that block and its parameter records
into the shadow block and the `next` records; the next command then swaps them in (CHECK -> SWAP)
instead of loading them itself (W_LOAD).

MacMode DEPTHWISE runs the same loop with the array in window mode (hw/mac_array.py): a step is a
kernel row and a window pass (cycle_model.depthwise_passes) instead of a kernel position and a
channel block, and its stream reads the input words of each output row one a clock, in order,
shifting each into the window: the pass's length for the row's first pixel, then STRIDE_W per
pixel, a beat when a pixel's last word arrives (cycle_model.depthwise_stream_clocks); while two
or more words are still needed for the next beat, a clock reads two, the second (the next pixel's
word) through the input SRAM's second port, and the window shifts both in.
DEPTHWISE_PAIRED takes two kernel rows a step: the same stream also reads, through the input
SRAM's second port (`ifm_addr2`), the word DILATION_H rows below, which the array's upper window
half takes (mac_unit.depthwise_lanes); the step count halves (rounded up), nothing else changes.
DEPTHWISE_TRIPLE takes three: the third port (`ifm_addr3`) reads the word 2 x DILATION_H rows
below, and the array's window is three groups of mac.cols // 3 lanes; a step past the last
kernel row masks its group (as the paired upper half for an odd KERNEL_H).
DEPTHWISE_PACKED takes the kernel's taps mac.cols a step in raster order (isa.packed_groups): a
cursor (the kernel row and offset the step starts at) gives the step's windows, up to three side
by side in the lanes, each read through its own port (the second and third from their own
pointers, a kernel row on); the stream primes the longest window, a shorter one's port holds
its first word until its words are due, and one shorter than STRIDE_W shifts the words between
its beats through (each window keeps the last words its port read).

MacMode CONV2D_LANE_PAIRS runs CONV2D's loop with each kernel position's last input-channel block
first (isa.lane_pair_blocks); that block's steps stream two output pixels a beat, the next
pixel's word through the second port (`ifm_addr2`) into the array's upper lanes, and the array
writes both pixels' accumulators (hw/mac_array.py, lane pairs). CONV2D_ROW_PAIRS streams every
step of the last block of output channels (at most mac.rows / 2 of them) two pixels a beat, the
next pixel's word into the array's upper rows; CONV2D_PAIRS does both (lane pairs in the other
blocks).

MacMode CONV2D and MATMUL; int8 inputs (int32 accumulator: the sum and the bias add wrap at 32
bits) and int16 inputs (the array's int16 x int8 mode, docs/units.md: cols/2 int16 lanes per
word, IFM_ZP 0; the bias add saturates to int48 once); results rescaled to int8/int16/int32, with
an optional fused table, or raw (int32 for int8 inputs, int48 for int16 inputs). The command's
checks are firmware_model/arch/checks.py's MAC rules, elaborated in CHECK.
"""

from types import SimpleNamespace

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import (DEPTHWISE_MODES, LANE_PAIR_MODES, ROW_PAIR_MODES, MacMode, OutMode, Status,
                                     depthwise_group_lanes)
from firmware_model.arch.config import NpuConfig
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.arch.checks import MAC_RTL_GAPS, MAC_RULES
from firmware_model.arch.cycle_model import MAC_OUTPUT_DRAIN, MAC_VECTOR_DRAIN, uses_vector_output
from hw.layouts import PARAM_RECORD_LAYOUT
from hw.mac_array import MacArray
from hw.register_file import REGISTER_FILE
from hw.register_map import rules_pass
from hw.output_stage import LATENCY as OUTPUT_STAGE_LATENCY
from hw.output_stage import OutputStageIn
from hw.vector_output_stage import LATENCY as VECTOR_STAGE_LATENCY
from hw.vector_output_stage import vector_in_layout
from hw.vector_writer import LATENCY as VECTOR_WRITER_LATENCY
from hw.vector_writer import write_words

# Register-file fields the sequencer uses after SETUP (latched there).
LATCHED = ('dilation_h', 'dilation_w', 'ifm_cblocks', 'ifm_in_h', 'ifm_in_w', 'ifm_pad_left', 'ifm_pad_top', 'ifm_zp', 'kernel_h', 'kernel_w', 'ofm_addr', 'ofm_c', 'ofm_h', 'ofm_pix_stride', 'ofm_row_stride', 'ofm_w', 'param_addr', 'stride_h', 'stride_w', 'wgt_addr', 'wgt_zp')

INT48_MIN, INT48_MAX = DType.INT48.min, DType.INT48.max

# Clocks between the last lane entering the output pipeline and the sequencer moving on: the bias
# stage, the shared output stage, the write.
OUTPUT_DRAIN = 1 + OUTPUT_STAGE_LATENCY + 1
assert OUTPUT_DRAIN == MAC_OUTPUT_DRAIN
# The vector path, after the last pixel's write clocks: its accumulator read, the bias stage, the
# vector stage and the writer's register (the last word is written in the done clock's predecessor).
VECTOR_DRAIN = 1 + 1 + VECTOR_STAGE_LATENCY + VECTOR_WRITER_LATENCY
assert VECTOR_DRAIN == MAC_VECTOR_DRAIN


def _bits(n: int) -> int:
    return max(1, (n - 1).bit_length())


class MacSequencer(wiring.Component):
    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        R, L = cfg.mac_rows, cfg.mac_cols
        self.lg_l = L.bit_length() - 1
        self.lg_r = R.bit_length() - 1
        super().__init__({
            "start": In(1),
            "mode": In(8),                # the command's sub (MacMode), read with start
            "busy": Out(1),
            "done": Out(1),               # one-clock pulse when the command has finished
            "status": Out(8),             # valid with done
            "regs": In(REGISTER_FILE),
            # the command processor holds the next command, a MAC ready to start after this one's
            # done: its first weight block and records may be preloaded (from its WGT_ADDR and
            # PARAM_ADDR, the architectural registers; the rows go into the array less its WGT_ZP,
            # in its IFM_DTYPE's mode)
            "next_mac": In(1),
            "next_wgt_addr": In(32),
            "next_param_addr": In(32),
            "next_wgt_zp": In(32),
            "next_ifm_dtype": In(32),
            # SRAM ports (read data arrives one clock after the address)
            # (IFM_SRAM: the input SRAM's words, or the output SRAM's)
            "ifm_addr": Out(_bits(max(cfg.input_words, cfg.output_words))),
            "ifm_data": In(8 * L),
            # DEPTHWISE_PAIRED and _TRIPLE: the next kernel row's word, read in the same clock (a
            # second port); _TRIPLE also the row after it (a third port)
            "ifm_addr2": Out(_bits(max(cfg.input_words, cfg.output_words))),
            "ifm_data2": In(8 * L),
            "ifm_addr3": Out(_bits(max(cfg.input_words, cfg.output_words))),
            "ifm_data3": In(8 * L),
            "wgt_addr": Out(_bits(cfg.weight_words)),
            "wgt_data": In(8 * L),
            "prm_addr": Out(_bits(cfg.param_records)),
            "prm_data": In(PARAM_RECORD_LAYOUT),
            # the output stage's input (the core's shared hw/output_stage.py, then the writer)
            "out": Out(stream.Signature(OutputStageIn)),
            # the vector path: a pixel's lanes at once (hw/vector_output_stage.py, then the vector
            # writer); no back-pressure, the sequencer spaces the vectors by their write clocks
            "vout_valid": Out(1),
            "vout": Out(vector_in_layout(R)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, L, lg_l, lg_r = cfg.mac_rows, cfg.mac_cols, self.lg_l, self.lg_r
        regs = self.regs
        op = SimpleNamespace(**{name: Signal(32, name=f"op_{name}") for name in LATCHED})

        # The MAC array holds the accumulator SRAM (acc_depth words of R int48 lanes).
        m.submodules.mac_array = mac = MacArray(R, L, cfg.acc_depth, output_port=True, prefetch=True, window=True,
                                                lane_pairs=True)
        half = cfg.acc_depth // 2

        # ---- operation parameters, latched at SETUP/CHECK ----
        ifm_word0 = Signal(32)
        row_words = Signal(32)
        pix_words = Signal(32)
        row_step = Signal(32)
        pix_step = Signal(32)
        ky_step = Signal(32)
        kx_step = Signal(32)
        n_ocb = Signal(32)
        esize = Signal(4)
        rescale_on = Signal()
        int16 = Signal()            # IFM_DTYPE is INT16: the array's int16 x int8 mode
        dwm = Signal()              # a MacMode.DEPTHWISE mode (_PAIRED, _TRIPLE, _PACKED too): the array's window mode
        pair = Signal()             # DEPTHWISE_PAIRED: two kernel rows a step
        triple = Signal()           # DEPTHWISE_TRIPLE: three kernel rows a step
        packed = Signal()           # DEPTHWISE_PACKED: mac.cols taps a step in raster order
        span_adv = Signal(32)       # packed: words from a kernel row's tap `span` to the next row's tap 0
        lp_mode = Signal()          # CONV2D_LANE_PAIRS, _PAIRS: the last input-channel block's steps pair pixels
        lp_step = Signal()          # ... and the step streaming is one (not in a row-paired block)
        rp_mode = Signal()          # CONV2D_ROW_PAIRS, _PAIRS: the last output-channel block pairs pixels
        rp_block = Signal()         # ... and the block streaming is it
        two_px = Signal()           # the step streaming takes two output pixels a beat
        ky_adv = Signal(32)         # input words from a step's first kernel row to the next step's
        second = Signal()           # the step streaming has a second kernel row (paired, triple)
        third_row = Signal()        # ... and a third (triple)
        n_kx = Signal(32)           # steps along the kernel row: KERNEL_W, or the window passes
        span = Signal(32)           # DEPTHWISE: input pixels the kernel row's taps span
        rem = Signal(32)            # DEPTHWISE: span left from this pass on
        win_len = Signal(range(L + 1))
        need = Signal(32)           # DEPTHWISE: words still to read for the stream's next beat
        # window modes: the input box's row and column of the words read (IFM_PAD_*, IFM_IN_*:
        # a position outside the image reads as IFM_ZP)
        ky_row = Signal(32)         # the step's first kernel row (box row at output row 0)
        kx_col = Signal(32)         # the pass's first column
        row_y = Signal(32)          # the box row the stream reads (its first kernel row)
        col_x = Signal(32)          # the box column of the port-1 word
        # packed: the second and third windows' pointers and box columns, group 1's row start
        # (group 0 is the port-1 stream), and whether the output row had its first beat
        ptr1, ptr2, row1_ptr = Signal(32, name="ptr1"), Signal(32, name="ptr2"), Signal(32, name="row1_ptr")
        col1, col2 = Signal(32, name="col1"), Signal(32, name="col2")
        primed = Signal()

        # ---- loop state ----
        ocb = Signal(32)
        ky = Signal(32)
        kx = Signal(32)
        icb = Signal(32)
        ky_base = Signal(32)
        kx_base = Signal(32)
        wblk = Signal(32)
        k = Signal(range(R + 2))
        oy = Signal(32)
        ox = Signal(32)
        p = Signal(32)
        row_ptr = Signal(32)
        pix_ptr = Signal(32)
        lane = Signal(range(R + 1))
        lanes = Signal(range(R + 1))
        out_row = Signal(32)
        out_pix = Signal(32)
        chan_addr = Signal(32)
        drain = Signal(range(OUTPUT_DRAIN + 1))
        first_step = Signal()
        after_gap = Signal(2)
        status = Signal(8)
        mode = Signal(8)
        vec_out = Signal()          # this command stores through the vector path
        overlap = Signal()          # ... and its tile fits half the accumulators: blocks alternate halves
        early = Signal()            # ... of one block: the output engine starts with the last step
        last_stream = Signal()      # the step streaming is its block's last
        acc_half = Signal()         # the half the array accumulates into (0 unless overlapping)

        # A window-mode read outside the image's pixels takes IFM_ZP in every lane instead of the
        # word, a clock later with the data (box_holds_pixel in firmware_model/golden/mac_unit.py).
        def holds_pixel(y, x):
            return ((op.ifm_in_h == 0) | (((y - op.ifm_pad_top)[:32] < op.ifm_in_h)
                                          & ((x - op.ifm_pad_left)[:32] < op.ifm_in_w)))
        zp_word = Cat(*[op.ifm_zp[:8]] * L)
        s1_pad = [Signal(name=f"s1_pad{i}") for i in (1, 2, 3)]
        m.d.sync += [pad.eq(0) for pad in s1_pad]
        # (the weight preload below: the shadow block and `next` records hold the next command's
        # first block, whose rows go in less its own zero point, in its own int16 mode)
        preload = Signal()
        pl_zp = Signal(9)
        pl_int16 = Signal()
        m.d.comb += [
            mac.w.payload.data.eq(self.wgt_data),
            mac.w.payload.zp.eq(Mux(preload, pl_zp, op.wgt_zp[:9]).as_signed()),
            mac.w.payload.int16.eq(Mux(preload, pl_int16, int16)),
            mac.x.payload.data.eq(Mux(s1_pad[0], zp_word, self.ifm_data)),
            mac.x.payload.zp.eq(op.ifm_zp[:9].as_signed()),
            mac.x.payload.int16.eq(int16),
        ]

        # packed: the windows of the step whose cursor is (kernel row `ky`, offset `t`), and the
        # kernel rows the cursor wraps into when it moves on mac.cols taps (isa.packed_groups)
        def packed_windows(ky_v, t_v, name):
            n0, n1, n2 = (Signal(range(L + 1), name=f"{name}_n{g}") for g in range(3))
            r1, r2 = Signal(range(L + 1), name=f"{name}_r1"), Signal(range(L + 1), name=f"{name}_r2")
            longest = Signal(range(L + 1), name=f"{name}_longest")
            left = (span - t_v)[:32]
            m.d.comb += [n0.eq(Mux(left < L, left, L)), r1.eq(L - n0),
                         n1.eq(Mux(ky_v + 1 < op.kernel_h, Mux(span < r1, span, r1), 0)), r2.eq(r1 - n1),
                         n2.eq(Mux(ky_v + 2 < op.kernel_h, Mux(span < r2, span, r2), 0)),
                         longest.eq(Mux((n1 > n0) & (n1 >= n2), n1, Mux(n2 > n0, n2, n0)))]
            return n0, n1, n2, longest

        def packed_advance(t_v, name):
            wraps = Signal(2, name=f"{name}_wraps")
            t_next = Signal(32, name=f"{name}_t")
            t1 = (t_v + L)[:32]
            t2 = (t1 - span)[:32]
            m.d.comb += [wraps.eq(Mux(t1 >= span, Mux(t2 >= span, 2, 1), 0)),
                         t_next.eq(Mux(t1 >= span, Mux(t2 >= span, t2 - span, t2), t1))]
            return wraps, t_next
        pk_n0, pk_n1, pk_n2, pk_longest = packed_windows(ky, kx_col, "pk")
        pk_wraps, pk_t = packed_advance(kx_col, "pk_next")

        def per_wrap(step):
            """`step` times the kernel rows the cursor wraps into (0, 1 or 2)."""
            return Mux(pk_wraps == 2, step << 1, Mux(pk_wraps == 1, step, 0))
        m.d.comb += win_len.eq(Mux(packed, pk_longest, Mux(rem < L, rem, L)))
        # the array masks a word's lanes with the length of the pass that read it: a clock later
        # (a stream that runs on into the next pass changes the length with its last read)
        win_len_d = Signal.like(win_len)
        m.d.sync += win_len_d.eq(Mux(packed, pk_n0 + pk_n1 + pk_n2, win_len))
        m.d.comb += [mac.dw.eq(dwm), mac.win_len.eq(win_len_d)]
        # packed: where the second and third windows start (L: none)
        grp1_d, grp2_d = Signal(range(L + 1), name="grp1_d"), Signal(range(L + 1), name="grp2_d")
        m.d.sync += [grp1_d.eq(Mux(pk_n1 != 0, pk_n0, L)), grp2_d.eq(Mux(pk_n2 != 0, pk_n0 + pk_n1, L))]
        m.d.comb += [mac.packed.eq(packed), mac.grp1.eq(grp1_d), mac.grp2.eq(grp2_d)]
        # paired: the upper half's word is the next kernel row's, at the same column; a step
        # without one (the last of an odd KERNEL_H) reads the first row's word again, masked
        win_len_hi_d = Signal(range(depthwise_group_lanes(L, 2) + 1))
        m.d.sync += win_len_hi_d.eq(Mux(second, win_len, 0))
        m.d.comb += [mac.pair.eq(pair), mac.win_len_hi.eq(win_len_hi_d),
                     mac.x2_data.eq(Mux(s1_pad[1], zp_word, self.ifm_data2))]
        # triple: the third group's word is the row after the second's, masked likewise
        win_len_3_d = Signal(range(depthwise_group_lanes(L, 3) + 1))
        m.d.sync += win_len_3_d.eq(Mux(third_row, win_len, 0))
        m.d.comb += [mac.triple.eq(triple), mac.win_len_3.eq(win_len_3_d),
                     mac.x3_data.eq(Mux(s1_pad[2], zp_word, self.ifm_data3))]
        s1_shift = Signal()
        m.d.sync += s1_shift.eq(0)
        m.d.comb += mac.win_shift.eq(s1_shift)
        # DEPTHWISE (one kernel row a step: the second port is free): a clock that still needs two
        # or more words for the next beat reads two, the second through the second port
        two = Signal()
        s1_two = Signal()
        m.d.sync += s1_two.eq(0)
        m.d.comb += [two.eq(dwm & ~pair & ~triple & ~packed & (need >= 2)), mac.win_double.eq(s1_two)]

        # ---- accumulate pipeline: clock t issues the input read of pixel p; t+1 has the vector
        # and hands it to the MAC array (which reads acc[p] then); the array writes acc[p] at the
        # end of t+2 (hw/mac_array.py).
        s1_valid = Signal()
        s1_p = Signal(range(cfg.acc_depth))
        s1_first = Signal()
        m.d.sync += s1_valid.eq(0)
        s1_lp = Signal()
        s1_rp = Signal()
        m.d.comb += [mac.lane_pair.eq(s1_lp), mac.row_pair.eq(s1_rp)]
        m.d.comb += [mac.x.valid.eq(s1_valid), mac.x.payload.acc.eq(s1_p), mac.x.payload.first.eq(s1_first)]

        # ---- output pipeline: lane select (OUT_LANE) -> bias add (stage B) -> rescale -> write ----
        b_valid = Signal()
        b_value = Signal(signed(48))
        b_addr = Signal(32)
        m.d.sync += b_valid.eq(0)
        bias = Signal(signed(48))
        mult = Signal(signed(32))
        shamt = Signal(8)
        m.d.comb += [bias.eq(self.prm_data.bias), mult.eq(self.prm_data.multiplier), shamt.eq(self.prm_data.shift)]
        # int8 x int8 accumulates in int32: the sum and the bias add wrap at 32 bits. int16 x int8
        # accumulates in int48: the bias add is exact and saturates to int48 once
        # (firmware_model.golden.mac_unit.finish_accumulator).
        biased = Signal(signed(48))
        wide = Signal(signed(49))
        m.d.comb += wide.eq(b_value + bias)
        with m.If(int16):
            m.d.comb += biased.eq(Mux(wide > INT48_MAX, INT48_MAX, Mux(wide < INT48_MIN, INT48_MIN, wide)))
        with m.Else():
            m.d.comb += biased.eq((b_value[:32].as_signed() + bias[:32].as_signed())[:32].as_signed())
        m.d.comb += [
            self.out.valid.eq(b_valid),
            self.out.payload.value.eq(biased),
            self.out.payload.multiplier.eq(mult),
            self.out.payload.shift.eq(shamt[:6]),
            self.out.payload.tag.eq(b_addr),
        ]

        # ---- vector path: every lane's parameter record, read during the first weight-block load
        # of each output-channel block (the parameter port is idle then) into `next` registers,
        # taken over by the output engine when the block's accumulation ends; the engine then
        # drains the block's accumulators (the array's second read port) pixel by pixel:
        # accumulator word -> bias add (all lanes) -> hw/vector_output_stage.py -> vector writer,
        # while the array goes on with the next block in the other half of the accumulators
        # (when the tile fits half of them; else the next block waits for the engine) ----
        nxt_bias = [Signal(signed(48), name=f"next_bias_{r}") for r in range(R)]
        nxt_mult = [Signal(signed(32), name=f"next_mult_{r}") for r in range(R)]
        nxt_shift = [Signal(6, name=f"next_shift_{r}") for r in range(R)]
        lane_bias = [Signal(signed(48), name=f"lane_bias_{r}") for r in range(R)]
        lane_mult = [Signal(signed(32), name=f"lane_mult_{r}") for r in range(R)]
        lane_shift = [Signal(6, name=f"lane_shift_{r}") for r in range(R)]
        in_wload = Signal()
        # (the weight preload below fills them likewise, row kl - 1 a clock behind its read)
        loading = Signal()
        kl = Signal(range(R + 2))
        preloading = Signal()
        rec = Signal(range(R + 2))     # 1 + the row whose record arrives now
        m.d.comb += [preloading.eq(preload & loading), rec.eq(Mux(preloading, kl, k))]
        with m.If(((in_wload & first_step) | preloading) & (rec != 0)):
            for r in range(R):
                with m.If(rec == r + 1):
                    m.d.sync += [nxt_bias[r].eq(self.prm_data.bias), nxt_mult[r].eq(self.prm_data.multiplier),
                                 nxt_shift[r].eq(self.prm_data.shift[:6])]
        # the output engine's own loop state (it runs beside the sequencer's next block)
        oe_start = Signal()
        oe_busy = Signal()
        oe_half = Signal()
        oe_p = Signal(32)
        oe_ox = Signal(32)
        oe_oy = Signal(32)
        oe_row = Signal(32)
        oe_pix = Signal(32)
        oe_lanes = Signal(range(R + 1))
        oe_chan = Signal(32)
        oe_wait = Signal(16)        # write clocks still owed to the last pixel
        oe_drain = Signal(range(VECTOR_DRAIN + 1))
        oe_gated = Signal()         # the engine started early: a pixel waits for its last beat
        oe_pairs = Signal()         # ... by a row-paired block: a pixel pair a clock (one word of both)
        avail = Signal(32)          # pixels the block's last step has accumulated (readable)
        last_beat = Signal()        # the array's beat of the last step, one clock later
        last_pair = Signal()        # ... a paired one: two pixels
        s1_last = Signal()          # the beat's read was its block's last step's
        m.d.sync += [last_beat.eq(mac.x.valid & s1_last), last_pair.eq(s1_lp | s1_rp),
                     avail.eq(avail + Mux(last_beat, Mux(last_pair, 2, 1), 0))]
        v_issue = Signal()                       # the clock a pixel's accumulator read is issued
        v_addr = Signal(32)
        v_words = Signal(16)
        v1_valid = Signal()
        v1_side = Signal.like(self.vout.side)
        v1_pair = Signal()
        v2_valid = Signal()
        v2_values = [Signal(signed(48), name=f"v_biased_{r}") for r in range(R)]
        v2_side = Signal.like(self.vout.side)
        v2_pair = Signal()
        v_addr2 = Signal(32)
        v_words2 = Signal(16)
        v_clocks = Signal(16)       # the writer's clocks: the pixel's words, or the pair's larger count
        m.d.comb += v_clocks.eq(Mux(oe_pairs & (v_words2 > v_words), v_words2, v_words))
        m.d.sync += [v1_valid.eq(v_issue), v1_side.addr.eq(v_addr), v1_side.nbytes.eq(oe_lanes * esize),
                     v1_side.words.eq(v_clocks),
                     v1_side.addr2.eq(Mux(oe_pairs, v_addr2, 0)), v1_side.nbytes2.eq(Mux(oe_pairs, oe_lanes * esize, 0)),
                     v1_pair.eq(oe_pairs), v2_valid.eq(v1_valid), v2_side.eq(v1_side), v2_pair.eq(v1_pair)]
        m.d.comb += mac.out_addr.eq(oe_p + Mux(oe_half, half, 0))
        # The lanes load only with a pixel: while the array accumulates, the vector stage's inputs
        # hold still (an event-driven simulator then has nothing to do in its R rescale units).
        # A pixel pair: the upper half of the lanes takes the odd pixel's channels (the lower half
        # of its accumulator lanes) with their records.
        H = R // 2
        for r in range(R):
            acc = Signal(signed(48), name=f"v_acc_{r}")
            wide_r = Signal(signed(49), name=f"v_wide_{r}")
            bias_r = lane_bias[r] if r < H else Mux(v1_pair, lane_bias[r - H], lane_bias[r])
            data_r = mac.out_data[r] if r < H else Mux(v1_pair, mac.out_pair[r - H], mac.out_data[r])
            m.d.comb += [acc.eq(data_r), wide_r.eq(acc + bias_r)]
            with m.If(v1_valid & int16):
                m.d.sync += v2_values[r].eq(Mux(wide_r > INT48_MAX, INT48_MAX, Mux(wide_r < INT48_MIN, INT48_MIN, wide_r)))
            with m.Elif(v1_valid):
                m.d.sync += v2_values[r].eq((acc[:32].as_signed() + bias_r[:32].as_signed())[:32].as_signed())
        m.d.comb += [self.vout_valid.eq(v2_valid), self.vout.side.eq(v2_side)]
        m.d.comb += [self.vout.values[r].eq(v2_values[r]) for r in range(R)]
        m.d.comb += [self.vout.multipliers[r].eq(lane_mult[r] if r < H else Mux(v2_pair, lane_mult[r - H], lane_mult[r]))
                     for r in range(R)]
        m.d.comb += [self.vout.shifts[r].eq(lane_shift[r] if r < H else Mux(v2_pair, lane_shift[r - H], lane_shift[r]))
                     for r in range(R)]
        # words the pixel's bytes touch in the output SRAM (cycle_model.vector_write_words); a
        # pair's second pixel is the next one of its row (OFM_W is even: the rule 'pixel pairs')
        lg_w = (cfg.word_bytes).bit_length() - 1
        m.d.comb += v_addr.eq(oe_pix + oe_chan)
        m.d.comb += v_words.eq(write_words(v_addr, oe_lanes * esize, cfg.word_bytes))
        m.d.comb += v_addr2.eq(oe_pix + op.ofm_pix_stride + oe_chan)
        m.d.comb += v_words2.eq(write_words(v_addr2, oe_lanes * esize, cfg.word_bytes))

        # busy as a function of the state (a continuous assignment: an `always @*` driven only by
        # a state that never changed would stay X in an event-driven simulator such as Icarus)
        with m.FSM(name="output_engine") as oe_fsm:
            with m.State("IDLE"):
                with m.If(oe_start):
                    m.d.sync += [oe_p.eq(0), oe_ox.eq(0), oe_oy.eq(0), oe_row.eq(op.ofm_addr),
                                 oe_pix.eq(op.ofm_addr), oe_wait.eq(0), oe_half.eq(acc_half),
                                 oe_lanes.eq(lanes), oe_chan.eq(chan_addr), oe_gated.eq(early),
                                 oe_pairs.eq(early & rp_mode), avail.eq(0)]
                    m.d.sync += [lane_bias[r].eq(nxt_bias[r]) for r in range(R)]
                    m.d.sync += [lane_mult[r].eq(nxt_mult[r]) for r in range(R)]
                    m.d.sync += [lane_shift[r].eq(nxt_shift[r]) for r in range(R)]
                    # An early start at the end of a one-step block's weight load comes in the
                    # clock the last lane's record arrives: that lane takes it from the port.
                    with m.If(in_wload & first_step & (k == R)):
                        m.d.sync += [lane_bias[R - 1].eq(self.prm_data.bias),
                                     lane_mult[R - 1].eq(self.prm_data.multiplier),
                                     lane_shift[R - 1].eq(self.prm_data.shift[:6])]
                    m.next = "RUN"
            with m.State("RUN"):
                # one pixel's accumulator word per issue clock, then its write clocks less one
                with m.If(oe_wait != 0):
                    m.d.sync += oe_wait.eq(oe_wait - 1)
                with m.Elif(~oe_gated | (oe_p + oe_pairs < avail)):
                    # (a pair: both its pixels accumulated, its larger word count)
                    m.d.comb += v_issue.eq(1)
                    m.d.sync += [oe_wait.eq(v_clocks - 1),
                                 oe_p.eq(oe_p + 1 + oe_pairs)]
                    with m.If(oe_ox + 1 + oe_pairs == op.ofm_w):
                        m.d.sync += [oe_ox.eq(0), oe_oy.eq(oe_oy + 1), oe_row.eq(oe_row + op.ofm_row_stride),
                                     oe_pix.eq(oe_row + op.ofm_row_stride)]
                        with m.If(oe_oy + 1 == op.ofm_h):
                            m.next = "LAST"
                    with m.Else():
                        m.d.sync += [oe_ox.eq(oe_ox + 1 + oe_pairs),
                                     oe_pix.eq(oe_pix + Mux(oe_pairs, op.ofm_pix_stride << 1, op.ofm_pix_stride))]
            with m.State("LAST"):
                # the last pixel's remaining write clocks, then the drain
                with m.If(oe_wait != 0):
                    m.d.sync += oe_wait.eq(oe_wait - 1)
                with m.Else():
                    m.d.sync += oe_drain.eq(1)         # this clock is the drain's first
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += oe_drain.eq(oe_drain + 1)
                with m.If(oe_drain == VECTOR_DRAIN - 1):
                    m.next = "IDLE"
        m.d.comb += oe_busy.eq(~oe_fsm.ongoing("IDLE"))

        # ---- weight prefetch: while a step's pixels stream, the loader reads the next step's weight
        # block (the weight port is idle then) into the array's shadow block, swapped in at SWAP;
        # only a block's first step waits for its weights (W_LOAD) ----
        kl_base = Signal(32)       # the next block's first weight word (NEXT_STEP moves wblk on)
        loaded = Signal()
        has_next = Signal()        # the step about to stream is not its block's last
        start_loader = Signal()
        ky_inc = Signal(2)          # kernel rows a step takes
        m.d.comb += [ky_inc.eq(Mux(packed, pk_wraps, Mux(triple, 3, Mux(pair, 2, 1)))),
                     second.eq((pair | triple) & (ky + 1 < op.kernel_h)),
                     third_row.eq(triple & (ky + 2 < op.kernel_h))]
        # CONV2D_LANE_PAIRS takes a kernel position's lane-paired last input-channel block first
        # (isa.lane_pair_blocks): its blocks run IFM_CBLOCKS - 1, 0, 1, .., IFM_CBLOCKS - 2
        first_icb = Signal(32)
        reorder = Signal()
        m.d.comb += [first_icb.eq(Mux(lp_mode, op.ifm_cblocks - 1, 0)), reorder.eq(lp_mode & (op.ifm_cblocks > 1))]

        def position_ends(b, b_next):
            """block b (b_next = b + 1) is its kernel position's last step"""
            return Mux(reorder, b + 2 == op.ifm_cblocks, b_next >= op.ifm_cblocks)
        icb_next = Signal(32)
        pos_end = Signal()          # the step streaming is its kernel position's last
        m.d.comb += [icb_next.eq(icb + 1), pos_end.eq(position_ends(icb, icb_next))]
        m.d.comb += has_next.eq(~(pos_end & (kx + 1 >= n_kx) & (ky + ky_inc >= op.kernel_h)))
        last_block = Signal()       # the step streaming is its kernel position's last input-channel block
        m.d.comb += [last_block.eq(icb + 1 >= op.ifm_cblocks), rp_block.eq(rp_mode & (ocb + 1 >= n_ocb)),
                     lp_step.eq(lp_mode & last_block & ~rp_block), two_px.eq(lp_step | rp_block)]
        # The step after this one (when has_next): its indices, bases and span left, for NEXT_STEP
        # and for the stream that runs straight on into it (STREAM's step change).
        nx_icb, nx_kx, nx_ky = Signal(32), Signal(32), Signal(32)
        nx_kx_base, nx_ky_base, nx_rem = Signal(32), Signal(32), Signal(32)
        nx_ky_row, nx_kx_col = Signal(32), Signal(32)
        with m.If(~pos_end):
            m.d.comb += [nx_icb.eq(Mux(lp_mode & last_block, 0, icb_next)), nx_kx.eq(kx), nx_ky.eq(ky), nx_kx_base.eq(kx_base),
                         nx_ky_base.eq(ky_base), nx_rem.eq(rem), nx_ky_row.eq(ky_row), nx_kx_col.eq(kx_col)]
        with m.Elif(packed):
            # the cursor moves on mac.cols taps, into the next rows when it passes a row's span
            m.d.comb += [nx_icb.eq(0), nx_kx.eq(0), nx_ky.eq(ky + pk_wraps), nx_rem.eq(span),
                         nx_kx_base.eq(kx_base + kx_step + per_wrap(span_adv)),
                         nx_ky_base.eq(ky_base + per_wrap(ky_step)),
                         nx_ky_row.eq(ky_row + per_wrap(op.dilation_h)),
                         nx_kx_col.eq(pk_t)]
        with m.Elif(kx + 1 < n_kx):
            m.d.comb += [nx_icb.eq(first_icb), nx_kx.eq(kx + 1), nx_ky.eq(ky), nx_kx_base.eq(kx_base + kx_step),
                         nx_ky_base.eq(ky_base), nx_rem.eq(rem - L), nx_ky_row.eq(ky_row), nx_kx_col.eq(kx_col + L)]
        with m.Else():
            m.d.comb += [nx_icb.eq(first_icb), nx_kx.eq(0), nx_ky.eq(ky + ky_inc), nx_kx_base.eq(ky_base + ky_adv),
                         nx_ky_base.eq(ky_base + ky_adv), nx_rem.eq(span),
                         nx_ky_row.eq(ky_row + ky_inc * op.dilation_h), nx_kx_col.eq(0)]
        nx_has_next = Signal()     # ... and it is not the block's last either
        nx_wraps, _ = packed_advance(nx_kx_col, "nx_next")
        m.d.comb += nx_has_next.eq(~(position_ends(nx_icb, nx_icb + 1) & (nx_kx + 1 >= n_kx)
                                     & (nx_ky + Mux(packed, nx_wraps, ky_inc) >= op.kernel_h)))
        _, _, _, nx_longest = packed_windows(nx_ky, nx_kx_col, "nx")
        step_on = Signal()         # STREAM runs straight on into the next step (its weights are in)
        swap_next = Signal()       # ... whose weights the array swaps in the clock after
        m.d.sync += swap_next.eq(step_on)
        # ---- preload: once the command's last block is with the output engine (the shadow block
        # and the `next` records free), the loader reads the next command's first block and its
        # records, when the command processor holds that MAC ready to start (its DMA slack met,
        # so those bytes stay as they are until it has run). It then swaps them in at once
        # (CHECK -> SWAP) instead of its first weight load. A refused next command drops them. ----
        pl_open = Signal()
        pl_go = Signal()
        pl_param = Signal(32)      # the next command's PARAM_ADDR, latched with the preload
        m.d.comb += pl_go.eq(pl_open & self.next_mac & ~preload & ~loading)
        with m.If(step_on):
            m.d.sync += [kl.eq(0), kl_base.eq(wblk + 2 * R), loading.eq(nx_has_next)]
        with m.Elif(start_loader):
            m.d.sync += [kl.eq(0), kl_base.eq(wblk + R), loading.eq(has_next)]
        with m.Elif(pl_go):
            m.d.sync += [kl.eq(0), kl_base.eq(self.next_wgt_addr >> lg_l), loading.eq(1), preload.eq(1),
                         pl_param.eq(self.next_param_addr), pl_zp.eq(self.next_wgt_zp[:9]),
                         pl_int16.eq(self.next_ifm_dtype == DType.INT16)]
        with m.Elif(loading):
            m.d.sync += kl.eq(kl + 1)
            with m.If(kl == R):
                m.d.sync += [loading.eq(0), loaded.eq(1)]

        # shared by the scalar and the vector output loops
        next_out_row = Signal(32)
        more_ocb = Signal()
        m.d.comb += [next_out_row.eq(out_row + op.ofm_row_stride), more_ocb.eq(ocb + 1 < n_ocb)]
        with m.If(oe_start & ~more_ocb):
            m.d.sync += pl_open.eq(1)

        # ---- control ----
        m.d.comb += [self.busy.eq(0), self.done.eq(0), self.status.eq(status)]
        m.d.comb += [self.ifm_addr.eq(pix_ptr),
                     # (a paired step: the next pixel's word)
                     self.ifm_addr2.eq(Mux(packed, ptr1, pix_ptr + Mux(two_px, pix_step, Mux(second, ky_step,
                                                                                          Mux(two, pix_words, 0))))),
                     self.ifm_addr3.eq(Mux(packed, ptr2, pix_ptr + Mux(third_row, ky_step << 1, 0))), mac.rd_addr.eq(p)]
        m.d.comb += self.wgt_addr.eq(Mux(loading, kl_base + kl, wblk + k))
        m.d.comb += self.prm_addr.eq(Mux(preloading, pl_param + kl,
                                         op.param_addr + (ocb << lg_r) + Mux(in_wload, k, lane)))
        m.d.comb += [mac.w.valid.eq(loading & (kl != 0)), mac.w.payload.row.eq(Mux(loading, kl - 1, k - 1)),
                     mac.w_shadow.eq(loading), mac.swap.eq(swap_next)]

        with m.FSM(name="seq"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += mode.eq(self.mode)
                    m.next = "SETUP"
            with m.State("SETUP"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [
                    ifm_word0.eq(regs.ifm_addr >> lg_l),
                    row_words.eq(regs.ifm_row_stride >> lg_l),
                    pix_words.eq(regs.ifm_pix_stride >> lg_l),
                    n_ocb.eq((regs.ofm_c + (R - 1)) >> lg_r),
                    rescale_on.eq((regs.out_mode & OutMode.RESCALE) != 0),
                    # a table or an 8-byte element takes the shared scalar stage (vector_output_stage.py)
                    vec_out.eq(uses_vector_output(regs.ofm_dtype, regs.lut_mode)),
                    esize.eq(Mux(regs.ofm_dtype == DType.INT8, 1, Mux(regs.ofm_dtype == DType.INT16, 2,
                                 Mux(regs.ofm_dtype == DType.INT48, 8, 4)))),
                    status.eq(Status.OK),
                ]
                # The unit works from its own copy of the parameters: later SETs cannot disturb a
                # running command, and the wide register file stays out of the per-clock logic.
                m.d.sync += [getattr(op, name).eq(getattr(regs, name)) for name in LATCHED]
                m.d.sync += int16.eq(regs.ifm_dtype == DType.INT16)
                # (24-bit operands: a span the weight-range rule accepts is below 2^24)
                m.d.sync += [dwm.eq(Cat(*(mode == m for m in DEPTHWISE_MODES)).any()),
                             pair.eq(mode == MacMode.DEPTHWISE_PAIRED),
                             triple.eq(mode == MacMode.DEPTHWISE_TRIPLE),
                             packed.eq(mode == MacMode.DEPTHWISE_PACKED),
                             lp_mode.eq(Cat(*(mode == m for m in LANE_PAIR_MODES)).any()),
                             rp_mode.eq(Cat(*(mode == m for m in ROW_PAIR_MODES)).any()),
                             span.eq(((regs.kernel_w[:24] - 1) * regs.dilation_w[:24] + 1)[:32])]
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [
                    row_step.eq(op.stride_h * row_words),
                    pix_step.eq(op.stride_w * pix_words),
                    ky_step.eq(op.dilation_h * row_words),
                    ky_adv.eq(Mux(triple, op.dilation_h * row_words * 3,
                                  Mux(pair, (op.dilation_h * row_words) << 1, op.dilation_h * row_words))),
                    # a DEPTHWISE pass starts mac.cols pixels after the one before
                    kx_step.eq(Mux(dwm, pix_words << lg_l, op.dilation_w * pix_words)),
                    n_kx.eq(Mux(packed, 1, Mux(dwm, (span + (L - 1)) >> lg_l, op.kernel_w))),
                    span_adv.eq(op.dilation_h * row_words - span * pix_words),
                    rem.eq(span),
                    ocb.eq(0), ky.eq(0), kx.eq(0), icb.eq(first_icb), k.eq(0),
                    ky_base.eq(ifm_word0), kx_base.eq(ifm_word0), ky_row.eq(0), kx_col.eq(0),
                    wblk.eq(op.wgt_addr >> lg_l),
                    first_step.eq(1),
                    overlap.eq(vec_out & (op.ofm_h * op.ofm_w <= half)),
                    acc_half.eq(0),
                    # one block: its lanes and channel offset are known now, for the early engine
                    early.eq(vec_out & (n_ocb == 1)),
                    lanes.eq(Mux(op.ofm_c > R, R, op.ofm_c)), chan_addr.eq(0),
                ]
                # The ISA's MAC rules and this RTL's gaps (firmware_model/arch/checks.py): the first
                # rule broken decides the status, as in the golden model.
                with rules_pass(m, MAC_RULES + MAC_RTL_GAPS, regs, mode, cfg, status):
                    with m.If(preload):
                        m.next = "SWAP"
                    with m.Else():
                        m.next = "W_LOAD"
            with m.State("W_LOAD"):
                # clock k issues the read of row k; the row read at clock k-1 lands now
                m.d.comb += [self.busy.eq(1), in_wload.eq(1)]
                m.d.comb += mac.w.valid.eq(k != 0)
                m.d.sync += k.eq(k + 1)
                with m.If(k == R):
                    m.d.sync += [k.eq(0), oy.eq(0), ox.eq(0), p.eq(0),
                                 row_ptr.eq(kx_base + icb), pix_ptr.eq(kx_base + icb), need.eq(win_len),
                                 last_stream.eq(~has_next), row_y.eq(ky_row), col_x.eq(kx_col),
                                 row1_ptr.eq(ky_base + ky_step), ptr1.eq(ky_base + ky_step),
                                 ptr2.eq(ky_base + (ky_step << 1)), col1.eq(0), col2.eq(0), primed.eq(0)]
                    m.d.comb += [start_loader.eq(1), oe_start.eq(early & ~has_next)]
                    m.next = "STREAM"
            with m.State("SWAP"):
                # the next step's weights are in the shadow block once the loader is done
                m.d.comb += self.busy.eq(1)
                with m.If(loaded):
                    m.d.comb += [mac.swap.eq(1), start_loader.eq(1), oe_start.eq(early & ~has_next)]
                    m.d.sync += [loaded.eq(0), preload.eq(0), k.eq(0), oy.eq(0), ox.eq(0), p.eq(0),
                                 row_ptr.eq(kx_base + icb), pix_ptr.eq(kx_base + icb), need.eq(win_len),
                                 last_stream.eq(~has_next), row_y.eq(ky_row), col_x.eq(kx_col),
                                 row1_ptr.eq(ky_base + ky_step), ptr1.eq(ky_base + ky_step),
                                 ptr2.eq(ky_base + (ky_step << 1)), col1.eq(0), col2.eq(0), primed.eq(0)]
                    m.next = "STREAM"
            with m.State("STREAM"):
                m.d.comb += self.busy.eq(1)
                # CONV2D/MATMUL: a pixel's vector every clock. DEPTHWISE: the row's words in order,
                # each shifted into the window; a beat with a pixel's last word.
                beat = Signal()
                m.d.comb += beat.eq(~dwm | (need == 1) | (two & (need == 2)))
                m.d.sync += [s1_valid.eq(beat), s1_shift.eq(dwm), s1_two.eq(two), s1_p.eq(p + Mux(acc_half, half, 0)),
                             s1_first.eq(first_step), s1_last.eq(last_stream), s1_lp.eq(lp_step),
                             s1_rp.eq(rp_block)]
                # the ports' words: port 1 at (row_y, col_x); port 2 the next column (two words)
                # or the next kernel row; port 3 the row after that
                # (packed: each window's port reads at its own column, the second and third a
                # kernel row and two below the first's)
                m.d.sync += [s1_pad[0].eq(dwm & ~holds_pixel(row_y, col_x)),
                             s1_pad[1].eq(dwm & ~Mux(packed, holds_pixel(row_y + op.dilation_h, col1),
                                                     Mux(second, holds_pixel(row_y + op.dilation_h, col_x),
                                                         holds_pixel(row_y, col_x + 1)))),
                             s1_pad[2].eq(dwm & ~holds_pixel(row_y + (op.dilation_h << 1), Mux(packed, col2, col_x)))]
                # packed: a window's port holds its first word of an output row until the row's
                # words are due (the longest window's need has come down to its length), then
                # runs on a word a clock (a window shifts every word in and keeps the last ones
                # its port read: the held copies, or those a window shorter than STRIDE_W passes
                # between its beats, leave it before the beat)
                adv = [primed | (need <= n) for n in (pk_n0, pk_n1, pk_n2)]
                with m.If(~beat):
                    m.d.sync += need.eq(need - Mux(two, 2, 1))
                    with m.If(~packed | adv[0]):
                        m.d.sync += [pix_ptr.eq(pix_ptr + Mux(two, pix_words << 1, pix_words)), col_x.eq(col_x + two + 1)]
                    with m.If(adv[1]):
                        m.d.sync += [ptr1.eq(ptr1 + pix_words), col1.eq(col1 + 1)]
                    with m.If(adv[2]):
                        m.d.sync += [ptr2.eq(ptr2 + pix_words), col2.eq(col2 + 1)]
                with m.Else():
                    # (a lane-paired step: pixels p and p + 1 of a row, OFM_W even)
                    m.d.sync += [p.eq(p + 1 + two_px), need.eq(op.stride_w), primed.eq(1),
                                 ptr1.eq(ptr1 + pix_words), col1.eq(col1 + 1),
                                 ptr2.eq(ptr2 + pix_words), col2.eq(col2 + 1)]
                    last_x = ox + 1 + two_px == op.ofm_w
                    with m.If(last_x):
                        m.d.sync += [ox.eq(0), oy.eq(oy + 1), row_ptr.eq(row_ptr + row_step),
                                     pix_ptr.eq(row_ptr + row_step), need.eq(win_len),
                                     row_y.eq(row_y + op.stride_h), col_x.eq(kx_col),
                                     row1_ptr.eq(row1_ptr + row_step), ptr1.eq(row1_ptr + row_step),
                                     ptr2.eq(row1_ptr + row_step + ky_step), col1.eq(0), col2.eq(0), primed.eq(0)]
                        with m.If(oy + 1 == op.ofm_h):
                            with m.If(has_next & loaded):
                                # the step's last read: the next step streams from the next clock
                                # (the accumulate pipeline keeps their beats apart), its weights
                                # swapped in after this step's last beat
                                m.d.comb += [step_on.eq(1), oe_start.eq(early & ~nx_has_next)]
                                nx_win_len = Mux(packed, nx_longest, Mux(nx_rem < L, nx_rem, L))
                                m.d.sync += [first_step.eq(0), wblk.eq(wblk + R), icb.eq(nx_icb), kx.eq(nx_kx),
                                             ky.eq(nx_ky), kx_base.eq(nx_kx_base), ky_base.eq(nx_ky_base),
                                             rem.eq(nx_rem), loaded.eq(0), k.eq(0), oy.eq(0), ox.eq(0), p.eq(0),
                                             row_ptr.eq(nx_kx_base + nx_icb), pix_ptr.eq(nx_kx_base + nx_icb),
                                             need.eq(nx_win_len), last_stream.eq(~nx_has_next),
                                             ky_row.eq(nx_ky_row), kx_col.eq(nx_kx_col),
                                             row_y.eq(nx_ky_row), col_x.eq(nx_kx_col),
                                             row1_ptr.eq(nx_ky_base + ky_step), ptr1.eq(nx_ky_base + ky_step),
                                             ptr2.eq(nx_ky_base + (ky_step << 1)), col1.eq(0), col2.eq(0)]
                            with m.Else():
                                m.d.sync += drain.eq(0)
                                m.next = "STREAM_TAIL"
                    with m.Else():
                        m.d.sync += [ox.eq(ox + 1 + two_px),
                                     pix_ptr.eq(pix_ptr + Mux(dwm, Mux(two, pix_words << 1, pix_words),
                                                              Mux(two_px, pix_step << 1, pix_step))),
                                     col_x.eq(col_x + two + 1)]
            with m.State("STREAM_TAIL"):
                # two clocks: the last pixel's MAC, then its accumulator write
                m.d.comb += self.busy.eq(1)
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == 1):
                    m.next = "NEXT_STEP"
            with m.State("NEXT_STEP"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [first_step.eq(0), wblk.eq(wblk + R)]
                with m.If(has_next):
                    m.d.sync += [icb.eq(nx_icb), kx.eq(nx_kx), ky.eq(nx_ky), kx_base.eq(nx_kx_base),
                                 ky_base.eq(nx_ky_base), rem.eq(nx_rem), ky_row.eq(nx_ky_row), kx_col.eq(nx_kx_col)]
                    m.next = "SWAP"
                with m.Else():
                    remaining = op.ofm_c - (ocb << lg_r)
                    m.d.sync += [
                        p.eq(0), oy.eq(0), ox.eq(0),
                        lanes.eq(Mux(remaining > R, R, remaining)),
                        out_row.eq(op.ofm_addr), out_pix.eq(op.ofm_addr),
                        chan_addr.eq((ocb << lg_r) * esize),
                    ]
                    with m.If(vec_out):
                        m.next = "HANDOFF"
                    with m.Else():
                        m.next = "OUT_READ"
            with m.State("HANDOFF"):
                # the block's accumulators go to the output engine once it has finished the last
                # (one block: the engine took them with the last step already)
                m.d.comb += self.busy.eq(1)
                with m.If(early):
                    m.next = "FINISH"
                with m.Elif(~oe_busy):
                    m.d.comb += oe_start.eq(1)
                    with m.If(more_ocb):
                        m.d.sync += [ocb.eq(ocb + 1), ky.eq(0), kx.eq(0), icb.eq(first_icb), rem.eq(span),
                                     ky_base.eq(ifm_word0), kx_base.eq(ifm_word0), first_step.eq(1),
                                     ky_row.eq(0), kx_col.eq(0), acc_half.eq(acc_half ^ overlap)]
                        with m.If(overlap):
                            m.next = "W_LOAD"
                        with m.Else():
                            m.next = "OE_WAIT"
                    with m.Else():
                        m.next = "FINISH"
            with m.State("OE_WAIT"):
                # the tile fills more than half the accumulators: the next block waits for the engine
                m.d.comb += self.busy.eq(1)
                with m.If(~oe_busy):
                    m.next = "W_LOAD"
            with m.State("FINISH"):
                m.d.comb += self.busy.eq(1)
                with m.If(~oe_busy):
                    m.next = "DONE"
            with m.State("OUT_READ"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += lane.eq(0)
                m.next = "OUT_LANE"
            with m.State("OUT_LANE"):
                m.d.comb += self.busy.eq(1)
                lane_value = Signal(signed(48))
                m.d.comb += lane_value.eq(mac.rd_data[lane])
                m.d.sync += [b_valid.eq(1), b_value.eq(lane_value),
                             b_addr.eq(out_pix + chan_addr + lane * esize), lane.eq(lane + 1)]
                # An 8-byte element on a 4-byte word takes two write clocks: the lane's second
                # clock is OUT_GAP (cycle_model.element_write_clocks).
                after = Signal(2)       # 0: OUT_LANE, 1: OUT_READ, 2: OUT_DRAIN
                with m.If(lane + 1 == lanes):
                    m.d.sync += p.eq(p + 1)
                    with m.If(ox + 1 == op.ofm_w):
                        m.d.sync += [ox.eq(0), oy.eq(oy + 1), out_row.eq(next_out_row), out_pix.eq(next_out_row)]
                        with m.If(oy + 1 == op.ofm_h):
                            m.d.sync += drain.eq(0)
                            m.d.comb += after.eq(2)
                        with m.Else():
                            m.d.comb += after.eq(1)
                    with m.Else():
                        m.d.sync += [ox.eq(ox + 1), out_pix.eq(out_pix + op.ofm_pix_stride)]
                        m.d.comb += after.eq(1)
                with m.Else():
                    m.d.comb += after.eq(0)
                m.d.sync += after_gap.eq(after)
                if L < 8:
                    with m.If(esize > L):
                        m.next = "OUT_GAP"
                with m.If((esize <= L) if L < 8 else 1):
                    with m.Switch(after):
                        with m.Case(1):
                            m.next = "OUT_READ"
                        with m.Case(2):
                            m.next = "OUT_DRAIN"
            with m.State("OUT_GAP"):
                m.d.comb += self.busy.eq(1)
                with m.Switch(after_gap):
                    with m.Case(0):
                        m.next = "OUT_LANE"
                    with m.Case(1):
                        m.next = "OUT_READ"
                    with m.Default():
                        m.next = "OUT_DRAIN"
            with m.State("OUT_DRAIN"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == OUTPUT_DRAIN - 1):
                    with m.If(more_ocb):
                        m.d.sync += [ocb.eq(ocb + 1), ky.eq(0), kx.eq(0), icb.eq(first_icb), rem.eq(span),
                                     ky_base.eq(ifm_word0), kx_base.eq(ifm_word0), first_step.eq(1),
                                     ky_row.eq(0), kx_col.eq(0)]
                        m.next = "W_LOAD"
                    with m.Else():
                        m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.busy.eq(1), self.done.eq(1)]
                m.d.sync += pl_open.eq(0)
                with m.If(status != Status.OK):
                    # a refused command: what was preloaded for it goes
                    m.d.sync += [preload.eq(0), loaded.eq(0), loading.eq(0)]
                m.next = "IDLE"
        return m
