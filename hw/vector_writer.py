"""Vector writer: stores a vector of results (hw/vector_output_stage.py) into the output SRAM.

Lane i's result becomes the low `esize` bytes (1, 2 or 4), little-endian, at byte address
`addr + i * esize`: `nbytes` = lanes x esize contiguous bytes from `addr`, which need not be
word-aligned. They are written one SRAM word per clock with byte enables, `words` clocks in all
(the words the byte range touches: `cycle_model.vector_write_words`), starting the clock after the
vector arrives (LATENCY 1). The next vector must not arrive before the last word's clock: the MAC
sequencer spaces its pixels by their word counts, so there is no back-pressure.

A pixel pair (side.nbytes2 > 0: a row-paired block's two pixels, each in half of the lanes) also
stores the upper half's lanes from `addr2`, `nbytes2` bytes, through the second write port
(`sram2`) in the same clocks: `words` is then the larger of the two pixels' word counts.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.output_writer import write_port_signature
from hw.vector_output_stage import vector_out_layout

LATENCY = 1


def write_words(addr, nbytes, word_bytes: int):
    """The words `nbytes` contiguous bytes from byte address `addr` touch: the writer's clocks for
    one vector (cycle_model.vector_write_words, as logic). The sequencers space their vectors by
    it."""
    lg_w = word_bytes.bit_length() - 1
    return (addr[:lg_w] + nbytes + (word_bytes - 1)) >> lg_w


def element_log2(size):
    """log2 of an element size of 1, 2 or 4 bytes (a register's size_of), as logic."""
    return Mux(size == 4, 2, Mux(size == 2, 1, 0))


def alignment_log2(value, word_bytes: int):
    """log2 of the largest power of two, at most the word, dividing `value`'s offset in its word
    (cycle_model._alignment, as logic): how many elements a vector path may read at once."""
    lg_w = word_bytes.bit_length() - 1
    out = Const(lg_w, range(lg_w + 1))
    for bit in reversed(range(lg_w)):
        out = Mux(value[bit], bit, out)
    return out


class VectorWriter(wiring.Component):
    def __init__(self, lanes: int, word_bytes: int, depth: int):
        self.lanes, self.word_bytes, self.depth = lanes, word_bytes, depth
        super().__init__({
            "i_valid": In(1),
            "i": In(vector_out_layout(lanes)),
            "esize": In(4),                      # element bytes: 1, 2 or 4
            "busy": Out(1),                      # words of the last vector are still being written
            "sram": Out(write_port_signature(word_bytes, depth)),
            "sram2": Out(write_port_signature(word_bytes, depth)),     # a pair's second pixel
        })

    def elaborate(self, platform):
        m = Module()
        W, R = self.word_bytes, self.lanes
        lg_w = W.bit_length() - 1
        span = -(-(4 * R + W) // W) * W         # bytes a shifted vector can reach, in whole words
        results = self.i.results

        # any other element size stores zeros: nothing legal reaches here with one, and a wrong
        # size decode upstream must show in the bytes
        is1, is2, is4 = Signal(name="esize_1"), Signal(name="esize_2"), Signal(name="esize_4")
        m.d.comb += [is1.eq(self.esize == 1), is2.eq(self.esize == 2), is4.eq(self.esize == 4)]

        def pack(lanes, name):
            """The lanes' results as their elements' bytes, back to back."""
            packed = Signal(8 * 4 * len(lanes), name=name)
            by_size = {n: Cat(*(results[i][:8 * n] for i in lanes)) for n in (1, 2, 4)}
            m.d.comb += packed.eq(Mux(is1, by_size[1], Mux(is2, by_size[2], Mux(is4, by_size[4], 0))))
            return packed
        packed = pack(range(R), "packed")
        # the upper half of the lanes, a pair's second pixel
        half = R // 2
        packed2 = pack(range(half, R), "packed2")
        offset = Signal(range(W), name="offset")
        offset2 = Signal(range(W), name="offset2")
        m.d.comb += [offset.eq(self.i.side.addr[:lg_w] if lg_w else 0),
                     offset2.eq(self.i.side.addr2[:lg_w] if lg_w else 0)]
        mask = Signal(4 * R, name="mask")
        mask2 = Signal(4 * half, name="mask2")
        m.d.comb += [mask.eq(Cat(*(self.i.side.nbytes > b for b in range(4 * R)))),
                     mask2.eq(Cat(*(self.i.side.nbytes2 > b for b in range(4 * half))))]

        buf = Signal(8 * span, name="shifted_bytes")
        buf_en = Signal(span, name="shifted_enables")
        buf2 = Signal(8 * span, name="shifted_bytes2")
        buf2_en = Signal(span, name="shifted_enables2")
        base = Signal(32, name="base_word")
        base2 = Signal(32, name="base_word2")
        left = Signal(16, name="words_left")
        j = Signal(16, name="word_index")
        with m.If(self.i_valid):
            m.d.sync += [buf.eq(packed << (offset * 8)), buf_en.eq(mask << offset),
                         buf2.eq(packed2 << (offset2 * 8)), buf2_en.eq(mask2 << offset2),
                         base.eq(self.i.side.addr >> lg_w), base2.eq(self.i.side.addr2 >> lg_w),
                         left.eq(self.i.side.words), j.eq(0)]
        with m.Elif(left != 0):
            m.d.sync += [left.eq(left - 1), j.eq(j + 1)]
        m.d.comb += [
            self.busy.eq(left != 0),
            self.sram.addr.eq(base + j),
            self.sram.data.eq(buf.word_select(j, 8 * W)),
            self.sram.en.eq(Mux(left != 0, buf_en.word_select(j, W), 0)),
            self.sram2.addr.eq(base2 + j),
            self.sram2.data.eq(buf2.word_select(j, 8 * W)),
            self.sram2.en.eq(Mux(left != 0, buf2_en.word_select(j, W), 0)),
        ]
        return m
