"""Output writer: stores the output stage's results into the output SRAM.

Each result (`i`: the value and its tag, the byte address of the element in the output SRAM)
becomes the low `esize` bytes of the value, little-endian, at that address: one word write
with byte enables in the clock the result is offered (elements are aligned to their size, so one
fits a word), or, for an 8-byte element (int48) on a 4-byte word, two writes on two clocks, the
stream held for the second (cycle_model.element_write_clocks).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.output_stage import OUT_LAYOUT


def write_port_signature(word_bytes: int, depth: int) -> wiring.Signature:
    return wiring.Signature({
        "addr": Out(max(1, (depth - 1).bit_length())),
        "data": Out(8 * word_bytes),
        "en": Out(word_bytes),
    })


class OutputWriter(wiring.Component):
    def __init__(self, word_bytes: int, depth: int):
        self.word_bytes, self.depth = word_bytes, depth
        super().__init__({
            "i": In(stream.Signature(OUT_LAYOUT)),
            "esize": In(4),                      # element bytes: 1, 2, 4 or 8
            "sram": Out(write_port_signature(word_bytes, depth)),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.word_bytes
        lg_w = W.bit_length() - 1
        p = self.i.payload
        value = Signal(64, name="element_bytes")
        m.d.comb += value.eq(p.result.as_signed())              # sign-extended to 8 bytes
        mask = Signal(8, name="element_mask")
        m.d.comb += mask.eq(Mux(self.esize == 1, 0x01, Mux(self.esize == 2, 0x03, Mux(self.esize == 4, 0x0F, 0xFF))))

        if W >= 8:
            addr, part, part_mask = p.tag, value, mask
            m.d.comb += self.i.ready.eq(1)
        else:                                   # 4-byte words: an 8-byte element in two halves
            half = Signal(name="second_half")
            split = Signal()
            m.d.comb += [split.eq(self.esize > W), self.i.ready.eq(~split | half)]
            with m.If(self.i.valid & split):
                m.d.sync += half.eq(~half)
            addr = Signal(32, name="write_addr")
            part = Signal(8 * W, name="write_part")
            part_mask = Signal(W, name="write_mask")
            m.d.comb += [addr.eq(p.tag + Mux(half, W, 0)),
                         part.eq(Mux(half, value[8 * W:], value[:8 * W])),
                         part_mask.eq(Mux(split, (1 << W) - 1, mask[:W]))]
        offset = Signal(range(W), name="write_offset")
        m.d.comb += offset.eq(addr[:lg_w] if lg_w else 0)
        m.d.comb += [
            self.sram.addr.eq(addr >> lg_w),
            self.sram.data.eq((part << (offset * 8))[:8 * W]),
            self.sram.en.eq(Mux(self.i.valid, (Cat(part_mask, Const(0, W)) << offset)[:W], 0)),
        ]
        return m
