"""MAC array: `rows` x `cols` multipliers with zero points and the int48 accumulators behind them.

Two streams feed it and a read port serves the output stage (docs/units.md, "MAC array"):

- `w` (weight rows): row `row` of the weight block <- `data` (cols bytes), stored with the weight
  zero point `zp` already subtracted. A block stays while vectors stream past.
- `x` (input vectors): one word of `data` per clock; the array forms, for every row r,

      sums[r] = sum over lanes l of (x[l] - zp) * (w[r][l] - weight_zp)

  and adds it into accumulator `acc` (int48 lanes, two's-complement wrap), or overwrites the
  accumulator with it when `first` is set.
- `rd_addr` / `rd_data`: accumulator word `rd_addr` (rows int48 lanes) one clock after the
  address, for the output stage. A vector beat uses the same SRAM read port in its clock, so
  `rd_addr` is served only in clocks without an `x` beat.

Both streams are always ready (`ready` = 1): one weight row and one vector per clock. Element types
(`int16` in both beats, equal for a block and its vectors):

- int8 x int8 (`int16` = 0): `cols` int8 lanes per word, input and weight zero points;
- int16 x int8 (`int16` = 1, the TOSA int16 extension): a word holds cols/2 int16 elements,
  little-endian (element i in bytes 2i, 2i+1); a weight row holds the cols/2 int8 weights in bytes
  0 .. cols/2-1 (the upper half is ignored); no input zero point (TOSA: it is 0; `x.zp` is
  ignored). Each int16 element is split into its unsigned low byte and signed high byte, both
  multiplied by the element's weight on the int8 multipliers; the high bytes' products sum in
  their own adder tree, shifted left by 8 before the two trees are added. Exact for every input.

Timing: a vector accepted in clock t has its two tree sums per row registered at the end of t
(registered adder trees: short paths, and an event-driven simulator such as Icarus does not
re-propagate every lane's change through the wide accumulator bus) and its accumulator written at
the end of t+1 (the trees combined, plus the old value); the accumulator read port is transparent
to that write, so a vector for the same accumulator in t+1, or an `rd_addr` in t+1, sees the new
value. LATENCY (2) is the clocks from a beat to its write. No data-dependent stalls.

Window mode (`window=True`, for MacMode.DEPTHWISE): a register of `cols` words of factors, each
word one input pixel's cols int8 channels minus the zero point. `win_shift` shifts the clock's `x`
word in at lane 0 (the older words move up a lane); lanes at or past `win_len` hold zero. A beat
with `dw` set takes, for row r, lane l's factor from channel r mod cols of window word l (the
window as shifted in that clock): the rows become channels and the lanes a run of input pixels
along the row, and the weight block holds each channel's taps (firmware_model.golden.mac_unit.
depthwise_sums). int8 only. With `pair` (MacMode.DEPTHWISE_PAIRED) the window splits into two
halves of cols/2 lanes: the lower half as before (lengths up to cols/2), the upper half shifting
in `x2_data`, the next kernel row's word read in the same clock, masked with `win_len_hi`; so a
row's adder tree sums two kernel rows' taps a beat (mac_unit.depthwise_lanes). With `triple`
(MacMode.DEPTHWISE_TRIPLE) the window splits into three groups of cols // 3 lanes (the lanes past
them hold zero): the first as before, the second shifting in `x2_data` (masked with
`win_len_hi`), the third `x3_data`, the kernel row after it (masked with `win_len_3`). With
`packed` (MacMode.DEPTHWISE_PACKED) the groups have the lengths of the step's windows
(isa.packed_groups): the second starts at lane `grp1` and takes `x2_data`, the third at `grp2` and
takes `x3_data`, the lanes from `win_len` on hold zero. Every window shifts with the stream: one
keeps the last words its port read, and the sequencer gives a window shorter than the longest the
right ones (its pointer held at the window's first word until the words are due). In the
DEPTHWISE mode a shift with `win_double` takes two words at once, the `x` word and the next
pixel's in `x2_data` (newer, at lane 0): the sequencer fills a window, and steps a stride of 2, at
two words a clock through the second port the other modes use for kernel rows.

The arithmetic is firmware_model.golden.mac_unit's (`mac_block_sums`, `accumulate`); the unit bench
(tests/test_unit_mac_array.py) checks it against those functions.
"""

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import ACC_BITS
from firmware_model.arch.isa import depthwise_group_lanes

SUM_BITS = 32        # |sums| < 2^31 for every mode, zero point (signed 9 bits) and cols <= 64
ZP_BITS = 9
PRODUCT_BITS = 20    # a 10-bit signed factor times a 10-bit signed factor
LATENCY = 2          # clocks from an accepted vector to its accumulator write


def _bits(n: int) -> int:
    return max(1, (n - 1).bit_length())


def weight_row_layout(rows: int, cols: int) -> data.StructLayout:
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(8), cols),
        "row": unsigned(_bits(rows)),
        "zp": signed(ZP_BITS),
        "int16": unsigned(1),
    })


def vector_layout(cols: int, depth: int) -> data.StructLayout:
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(8), cols),
        "zp": signed(ZP_BITS),
        "int16": unsigned(1),
        "acc": unsigned(_bits(depth)),
        "first": unsigned(1),
    })


class MacArray(wiring.Component):
    """rows x cols MACs and `depth` accumulator words of rows int48 lanes."""

    def __init__(self, rows: int, cols: int, depth: int, output_port: bool = False, prefetch: bool = False,
                 window: bool = False, lane_pairs: bool = False):
        if cols < 2 or cols & (cols - 1):
            raise ValueError(f"cols = {cols}: the MAC array needs a power of two >= 2 (int16 lane pairs)")
        if not 1 <= rows <= 64 or cols > 64:
            raise ValueError(f"{rows} x {cols}: rows and cols must lie in 1 .. 64")
        self.rows, self.cols, self.depth = rows, cols, depth
        self.output_port = output_port
        self.prefetch = prefetch
        self.window = window
        self.lane_pairs = lane_pairs
        if lane_pairs and not window:
            # (and the window mode takes 4 columns or more: cols/2 lanes a half of even size)
            raise ValueError("lane pairs take the window mode's second word (x2_data)")
        # The accumulator SRAM (a bench may load or read it by backdoor). With lane pairs a word
        # holds two pixels' accumulators (pixel a in half a % 2 of word a // 2), written back whole.
        if lane_pairs:
            self.acc_mem = memory.Memory(shape=unsigned(2 * ACC_BITS * rows), depth=(depth + 1) // 2, init=[])
        else:
            self.acc_mem = memory.Memory(shape=unsigned(ACC_BITS * rows), depth=depth, init=[])
        members = {
            "w": In(stream.Signature(weight_row_layout(rows, cols))),
            "x": In(stream.Signature(vector_layout(cols, depth))),
            "rd_addr": In(unsigned(_bits(depth))),
            "rd_data": Out(data.ArrayLayout(signed(ACC_BITS), rows)),
            "busy": Out(1),     # a vector's accumulator write is still pending
        }
        if output_port:
            # A second read port for an output stage that drains one half of the accumulators
            # while the array accumulates into the other (hw/mac_sequencer.py); data one clock
            # after the address, not transparent (the halves never meet).
            members["out_addr"] = In(unsigned(_bits(depth)))
            members["out_data"] = Out(data.ArrayLayout(signed(ACC_BITS), rows))
            if lane_pairs:
                # the odd pixel of the word `out_addr` reads (the even one's pair), beside it: a
                # row-paired block's output engine takes both pixels a clock
                members["out_pair"] = Out(data.ArrayLayout(signed(ACC_BITS), rows))
        if prefetch:
            # A second (shadow) weight block: `w_shadow` steers the weight rows into it while the
            # vectors stream past the active one; `swap` makes it the active block (next clock).
            members["w_shadow"] = In(1)
            members["swap"] = In(1)
        if window:
            members["dw"] = In(1)
            members["win_shift"] = In(1)
            members["win_len"] = In(range(cols + 1))
            # DEPTHWISE_PAIRED: the upper half of the window takes its own input word (the next
            # kernel row's, read in the same clock) and its own length (0: no second row)
            members["pair"] = In(1)
            members["x2_data"] = In(data.ArrayLayout(unsigned(8), cols))
            members["win_len_hi"] = In(range(depthwise_group_lanes(cols, 2) + 1))
            # DEPTHWISE_TRIPLE: three groups of cols // 3 lanes, the second taking `x2_data` with
            # `win_len_hi`, the third its own word (the kernel row after) with `win_len_3`
            members["triple"] = In(1)
            members["x3_data"] = In(data.ArrayLayout(unsigned(8), cols))
            members["win_len_3"] = In(range(depthwise_group_lanes(cols, 3) + 1))
            # DEPTHWISE, a clock with two words: `x2_data` (the next pixel's word, the newer) shifts
            # in at lane 0 and the `x` word at lane 1, the older words moving up two lanes
            members["win_double"] = In(1)
            # DEPTHWISE_PACKED: up to three windows side by side, the second from lane `grp1`
            # taking `x2_data`, the third from lane `grp2` taking `x3_data` (cols: no such
            # window), the lanes at or past `win_len` holding zero
            members["packed"] = In(1)
            members["grp1"] = In(range(cols + 1))
            members["grp2"] = In(range(cols + 1))
        if lane_pairs:
            # MacMode.CONV2D_LANE_PAIRS, valid with `x`: the beat takes two output pixels, acc (even)
            # from the low lanes of `x` and acc + 1 from the low lanes of `x2_data`, which the upper
            # half of the lanes multiplies (each half of a row's tree sums its own pixel)
            members["lane_pair"] = In(1)
            # MacMode.CONV2D_ROW_PAIRS, valid with `x`: the upper half of the rows multiplies the
            # whole `x2_data` word (the odd pixel's), and its sums go to acc + 1's lower lanes
            members["row_pair"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        rows, cols = self.rows, self.cols
        w, x = self.w.payload, self.x.payload
        m.d.comb += [self.w.ready.eq(1), self.x.ready.eq(1)]

        # ---- weight block: w_r_c = weight byte - weight zero point (10-bit signed) ----
        # int16 mode: lanes 2i and 2i+1 (low and high byte of element i) share weight byte i.
        weights = [[Signal(signed(10), name=f"w_{r}_{c}") for c in range(cols)] for r in range(rows)]
        wbytes = []
        for c in range(cols):
            b = Signal(signed(8), name=f"wbyte_{c}")
            m.d.comb += b.eq(Mux(w.int16, w.data[c // 2], w.data[c]))
            wbytes.append(b)
        if self.prefetch:
            shadow = [[Signal(signed(10), name=f"ws_{r}_{c}") for c in range(cols)] for r in range(rows)]
            for r in range(rows):
                row_values = [Signal(signed(10), name=f"wv_{r}_{c}") for c in range(cols)]
                m.d.comb += [row_values[c].eq(wbytes[c] - w.zp) for c in range(cols)]
                with m.If(self.w.valid & (w.row == r) & self.w_shadow):
                    m.d.sync += [shadow[r][c].eq(row_values[c]) for c in range(cols)]
                with m.Elif(self.w.valid & (w.row == r)):
                    m.d.sync += [weights[r][c].eq(row_values[c]) for c in range(cols)]
                with m.Elif(self.swap):
                    m.d.sync += [weights[r][c].eq(shadow[r][c]) for c in range(cols)]
        else:
            for r in range(rows):
                with m.If(self.w.valid & (w.row == r)):
                    m.d.sync += [weights[r][c].eq(wbytes[c] - w.zp) for c in range(cols)]

        # ---- input factors: int8 lane minus the input zero point, or an int16 element's bytes ----
        xs = []
        for c in range(cols):
            xc = Signal(signed(10), name=f"x_{c}")
            byte = x.data[c]
            int16_factor = byte.as_signed() if c % 2 else byte.as_unsigned()
            m.d.comb += xc.eq(Mux(x.int16, int16_factor, byte.as_signed() - x.zp))
            xs.append(xc)
        # per row: the broadcast word's factors, or (window mode, dw) the window's channel r
        if self.window:
            # the second word's factors (int8 only: the window modes and lane pairs take int8 inputs)
            x2s = []
            for c in range(cols):
                f2 = Signal(signed(10), name=f"x2_{c}")
                m.d.comb += f2.eq(self.x2_data[c].as_signed() - x.zp)
                x2s.append(f2)
        # the factors every row multiplies outside the window mode
        bxs = list(xs)
        if self.lane_pairs:
            # a lane-paired beat: the upper half of the lanes takes the second word's low half
            for c in range(cols // 2, cols):
                bxs[c] = Signal(signed(10), name=f"xp_{c}")
                m.d.comb += bxs[c].eq(Mux(self.lane_pair, x2s[c - cols // 2], xs[c]))
        row_xs = [bxs] * rows
        if self.lane_pairs:
            # a row-paired beat: the upper half of the rows takes the second word whole
            uxs = []
            for c in range(cols):
                uxs.append(Signal(signed(10), name=f"xu_{c}"))
                m.d.comb += uxs[c].eq(Mux(self.row_pair, x2s[c], bxs[c]))
            row_xs = [bxs] * (rows // 2) + [uxs] * (rows - rows // 2)
        if self.window:
            win = [[Signal(signed(10), name=f"win_{l}_{c}") for c in range(cols)] for l in range(cols)]
            view = [[Signal(signed(10), name=f"wview_{l}_{c}") for c in range(cols)] for l in range(cols)]
            # the groups of DEPTHWISE_PAIRED and _TRIPLE (isa.depthwise_group_lanes)
            half, third = depthwise_group_lanes(cols, 2), depthwise_group_lanes(cols, 3)
            # the third word's factors
            x3s = []
            for c in range(cols):
                f3 = Signal(signed(10), name=f"x3_{c}")
                m.d.comb += f3.eq(self.x3_data[c].as_signed() - x.zp)
                x3s.append(f3)
            for lane in range(cols):
                if lane == 0:
                    newer = xs
                else:
                    # each group of lanes is a window of its own, its newest word its kernel row's:
                    # paired, the upper half the second row's; triple, each third its row's
                    newer = win[lane - 1]
                    if lane == 2 * third:
                        newer = [Mux(self.triple, x3s[c], newer[c]) for c in range(cols)]
                    if lane == third:
                        newer = [Mux(self.triple, x2s[c], newer[c]) for c in range(cols)]
                    if lane == half:
                        newer = [Mux(self.pair, x2s[c], newer[c]) for c in range(cols)]
                # two words a clock (DEPTHWISE only): the window moves up two lanes
                doubled = x2s if lane == 0 else xs if lane == 1 else win[lane - 2]
                newer = [Mux(self.win_double, doubled[c], newer[c]) for c in range(cols)]
                # packed: a lane that starts the second or third window takes its word
                starts2, starts3 = Signal(name=f"grp1_at_{lane}"), Signal(name=f"grp2_at_{lane}")
                m.d.comb += [starts2.eq(self.packed & (self.grp1 == lane)), starts3.eq(self.packed & (self.grp2 == lane))]
                newer = [Mux(starts2, x2s[c], Mux(starts3, x3s[c], newer[c])) for c in range(cols)]
                pair_inside = lane < self.win_len if lane < half else lane - half < self.win_len_hi
                group = lane // third
                triple_inside = (lane < self.win_len if group == 0 else
                                 lane - third < self.win_len_hi if group == 1 else
                                 lane - 2 * third < self.win_len_3 if group == 2 else False)
                inside = Mux(self.triple, triple_inside, Mux(self.pair, pair_inside, lane < self.win_len))
                for c in range(cols):
                    m.d.comb += view[lane][c].eq(Mux(inside, Mux(self.win_shift, newer[c], win[lane][c]), 0))
                    with m.If(self.win_shift):
                        m.d.sync += win[lane][c].eq(view[lane][c])
            broadcast, row_xs = row_xs, []
            for r in range(rows):
                per_lane = []
                for lane in range(cols):
                    f = Signal(signed(10), name=f"xr_{r}_{lane}")
                    m.d.comb += f.eq(Mux(self.dw, view[lane][r % cols], broadcast[r][lane]))
                    per_lane.append(f)
                row_xs.append(per_lane)

        # ---- products and two balanced adder trees per row (even lanes, odd lanes) ----
        # The two trees' results are registered separately and combined (int16: odd << 8) in the
        # write stage, which otherwise holds only the accumulator add: it balances the two stages.
        even_sums = [Signal(signed(SUM_BITS), name=f"even_{r}") for r in range(rows)]
        odd_sums = [Signal(signed(SUM_BITS), name=f"odd_{r}") for r in range(rows)]
        low_sums = []           # lane pairs: per row, the lower half of the lanes' sum
        for r in range(rows):
            prods = []
            for c in range(cols):
                prod = Signal(signed(PRODUCT_BITS), name=f"p_{r}_{c}")
                m.d.comb += prod.eq(row_xs[r][c] * weights[r][c])
                prods.append(prod)
            if self.lane_pairs:
                # each tree's top node adds its two halves (the lanes below cols/2, the rest): the
                # lower half's sum is registered too, for a lane-paired beat's even pixel (the odd
                # one takes the rest)
                h = cols // 2
                tops = []
                for name, tree_lanes in (("e", prods[0::2]), ("o", prods[1::2])):
                    lo = self._tree(m, tree_lanes[:h // 2], f"{name}l_{r}")
                    hi = self._tree(m, tree_lanes[h // 2:], f"{name}h_{r}")
                    top = Signal(signed(PRODUCT_BITS + (cols // 2 - 1).bit_length()), name=f"{name}_{r}")
                    m.d.comb += top.eq(lo + hi)
                    tops.append((top, lo))
                (even, even_lo), (odd, odd_lo) = tops
                low = Signal(signed(SUM_BITS), name=f"low_{r}")
                m.d.sync += low.eq(even_lo + odd_lo)
                low_sums.append(low)
            else:
                even = self._tree(m, prods[0::2], f"e_{r}")
                odd = self._tree(m, prods[1::2], f"o_{r}")
            m.d.sync += [even_sums[r].eq(even), odd_sums[r].eq(odd)]

        # ---- accumulators: read in the beat's clock, written one clock later ----
        m.submodules.acc_mem = acc_mem = self.acc_mem
        acc_wr = acc_mem.write_port()
        acc_rd = acc_mem.read_port(transparent_for=(acc_wr,))
        s1_valid = Signal()
        s1_acc = Signal.like(x.acc)
        s1_first = Signal()
        s1_int16 = Signal()
        m.d.sync += [s1_valid.eq(self.x.valid), s1_acc.eq(x.acc), s1_first.eq(x.first), s1_int16.eq(x.int16)]
        rd_pixel = Signal.like(x.acc)
        m.d.comb += rd_pixel.eq(Mux(self.x.valid, x.acc, self.rd_addr))
        if self.lane_pairs:
            self._paired_accumulators(m, acc_rd, acc_wr, rd_pixel, s1_valid, s1_acc, s1_first, s1_int16, low_sums,
                                      even_sums, odd_sums)
            return m
        m.d.comb += acc_rd.addr.eq(rd_pixel)
        lanes = []
        for r in range(rows):
            old = acc_rd.data[ACC_BITS * r:ACC_BITS * (r + 1)].as_signed()
            e, o = even_sums[r], odd_sums[r]
            lanes.append((Mux(s1_first, 0, old) + Mux(s1_int16, e + (o << 8), e + o))[:ACC_BITS])
        if self.output_port:
            out_rd = acc_mem.read_port()
            m.d.comb += [out_rd.addr.eq(self.out_addr), self.out_data.eq(out_rd.data)]
        m.d.comb += [
            acc_wr.addr.eq(s1_acc),
            acc_wr.data.eq(Cat(*lanes)),
            acc_wr.en.eq(s1_valid),
            self.rd_data.eq(acc_rd.data),
            self.busy.eq(s1_valid),
        ]
        return m

    def _paired_accumulators(self, m, acc_rd, acc_wr, rd_pixel, s1_valid, s1_acc, s1_first, s1_int16, low_sums,
                             even_sums, odd_sums):
        """The accumulators of a lane-pairs array: word a // 2 holds pixel a in half a % 2. A beat
        reads the word of its pixel and writes it back whole one clock later (the read port is
        transparent to the write: a beat on the other pixel of the word in the next clock sees
        it): its pixel's half with the row's sum; for a lane-paired beat (acc even) the even
        pixel with the lower half of the lanes' sum and the odd pixel with the rest; for a
        row-paired one the even pixel's lower lanes with the lower rows' sums and the odd pixel's
        with the upper rows' (its upper lanes as they were); the other half as it was. A read for
        the output stage takes its pixel's half a clock later."""
        rows, width = self.rows, ACC_BITS * self.rows
        x = self.x.payload
        s1_pair = Signal()
        s1_rows = Signal()
        s1_second_first = Signal()   # a paired beat's odd pixel starts its sum
        m.d.sync += [s1_pair.eq(self.lane_pair), s1_rows.eq(self.row_pair),
                     s1_second_first.eq((self.lane_pair | self.row_pair) & x.first)]
        m.d.comb += acc_rd.addr.eq(rd_pixel >> 1)
        word = [acc_rd.data[:width], acc_rd.data[width:]]
        odd_pixel = s1_acc[0]
        halves = ([], [])
        wholes = []
        for r in range(rows):
            e, o = even_sums[r], odd_sums[r]
            wholes.append(Signal(signed(SUM_BITS + 9), name=f"whole_{r}"))
            m.d.comb += wholes[r].eq(Mux(s1_int16, e + (o << 8), e + o))
        for r in range(rows):
            old_even = word[0][ACC_BITS * r:ACC_BITS * (r + 1)].as_signed()
            old_odd = word[1][ACC_BITS * r:ACC_BITS * (r + 1)].as_signed()
            mine = Mux(odd_pixel, old_odd, old_even)
            new = Signal(ACC_BITS, name=f"acc_new_{r}")      # (a signal: both halves take it)
            m.d.comb += new.eq(Mux(s1_first, 0, mine) + Mux(s1_pair, low_sums[r], wholes[r]))
            odd_old = Mux(s1_second_first, 0, old_odd)
            paired_odd = (odd_old + (even_sums[r] + odd_sums[r] - low_sums[r]))[:ACC_BITS]
            single = Mux(odd_pixel, new, old_odd)
            if r < rows // 2:       # a row-paired beat's odd pixel: the upper rows' sums
                single = Mux(s1_rows, (odd_old + wholes[r + rows // 2])[:ACC_BITS], single)
            halves[0].append(Mux(odd_pixel, old_even, new)[:ACC_BITS])
            halves[1].append(Mux(s1_pair, paired_odd, single)[:ACC_BITS])
        rd_half = Signal()
        m.d.sync += rd_half.eq(rd_pixel[0])
        m.d.comb += [
            acc_wr.addr.eq(s1_acc >> 1),
            acc_wr.data.eq(Cat(*halves[0], *halves[1])),
            acc_wr.en.eq(s1_valid),
            self.rd_data.eq(Mux(rd_half, word[1], word[0])),
            self.busy.eq(s1_valid),
        ]
        if self.output_port:
            out_rd = self.acc_mem.read_port()
            out_half = Signal()
            m.d.sync += out_half.eq(self.out_addr[0])
            m.d.comb += [out_rd.addr.eq(self.out_addr >> 1),
                         self.out_data.eq(Mux(out_half, out_rd.data[width:], out_rd.data[:width])),
                         self.out_pair.eq(out_rd.data[width:])]

    @staticmethod
    def _tree(m: Module, level: list, prefix: str):
        """A balanced adder tree over `level` (named sums, one level per log2 step)."""
        depth = 0
        while len(level) > 1:
            depth += 1
            nxt = []
            for i in range(0, len(level), 2):
                if i + 1 == len(level):
                    nxt.append(level[i])
                    continue
                s = Signal(signed(PRODUCT_BITS + depth), name=f"{prefix}_{depth}_{i // 2}")
                m.d.comb += s.eq(level[i] + level[i + 1])
                nxt.append(s)
            level = nxt
        return level[0]
