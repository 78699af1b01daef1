"""LUT engine: TOSA TABLE, one lookup per clock, from a table SRAM loaded at run time.

The table SRAM is the NPU configuration's LUT SRAM: `entries` 16-bit entries (cfg.lut_entries),
written through the `w` stream one word of `word_entries` entries per clock (always ready): the
word's address, its 16 * word_entries data bits (entry k in bits 16k..16k+15) and byte enables
`en` (the DMA may write any bytes of a word). In the core a word is an SRAM word of the DMA
(mac.cols bytes: cycle_model.sram_word_bytes), so a table loads at the external bandwidth;
`word_entries` = 1 writes single entries (the unit's own bench, the ELTWISE and POOL units'
stand-alone output stages).
A lookup names its table by `base`, the address of the table's first entry (the LUT_ADDR
register), and its kind by `mode` (firmware_model.arch.isa.LutMode):

    INT8:  result = entry[base + ((value + 128) & 0xFF)]      (a 256-entry table; the entry read
           as int16 — an int8 table is stored sign-extended — as numerics.apply_lookup_8 and
           firmware_model.golden.output_stage do; `value` is an int8, or any int32 whose low byte is one)
    INT16: v = clip(value, -32768, 32767), index = (v + 32768) >> 7, fraction = v & 0x7F,
           b = entry[base + index], n = entry[base + index + 1]    (int16 entries, a 513-entry table)
           result = (b << 7) + (n - b) * fraction                   (int32, numerics.apply_lookup_s)
    OFF:   result = value (the engine passes its input through; mode 3 does the same)

The slope n - b is computed exactly in 17 bits: where TOSA's REQUIRE (slope fits int16) does not
hold the result is still apply_lookup_s' arithmetic (numerics.apply_lookup_s with require=False).
A table must lie inside the SRAM (base + size <= entries): addresses are not checked and wrap at
the address width.

Two reads per lookup, one clock: the SRAM is two banks, even entries and odd entries. Entries
a and a + 1 always sit in different banks, so every lookup reads each bank once: even entry
(a + 1) >> 1, odd entry a >> 1, and a's parity says which is which. A bank row holds
H = max(1, word_entries / 2) entries of its parity, so one written word is one row of each bank
(its even entries and its odd entries); a read takes bank entry j from row j // H, lane j % H.

Pipeline: LATENCY = 2 clocks (bank read; interpolate and register), one lookup per clock, the
whole pipeline stalls while a result is offered and not taken. Writes go straight to the banks;
a lookup issued in the same clock as a write to the entry it reads gets the old entry.
"""

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.cycle_model import sram_word_bytes
from firmware_model.arch.isa import LutMode, Sram
from firmware_model.arch.config import INT16_TABLE_ENTRIES, LUT_ENTRY_BYTES, NpuConfig

LATENCY = 2
MODE_BITS = 2
FRACTION_BITS = 7


def address_bits(entries: int) -> int:
    return max(1, (entries - 1).bit_length())


def lut_word_entries(cfg: NpuConfig) -> int:
    """Entries in one word the core's DMA writes (cycle_model.sram_word_bytes)."""
    return sram_word_bytes(cfg, Sram.LUT) // LUT_ENTRY_BYTES


def write_layout(entries: int, word_entries: int = 1) -> data.StructLayout:
    """A LUT SRAM write: word address, `word_entries` 16-bit entries, a byte enable per byte."""
    return data.StructLayout({"addr": unsigned(address_bits(entries // word_entries)),
                              "data": unsigned(16 * word_entries), "en": unsigned(2 * word_entries)})


class LutEngine(wiring.Component):
    """`entries`: the LUT SRAM's size in 16-bit entries (at least one int16 table, 513);
    `word_entries`: entries per write (1, or an even number dividing `entries`)."""

    def __init__(self, entries: int = 2048, word_entries: int = 1):
        if entries < INT16_TABLE_ENTRIES:
            raise ValueError(f"a LUT SRAM of {entries} entries cannot hold an int16 table "
                             f"({INT16_TABLE_ENTRIES} entries)")
        if word_entries < 1 or (word_entries > 1 and (word_entries % 2 or entries % word_entries)) \
                or word_entries & (word_entries - 1):
            raise ValueError(f"a LUT SRAM written {word_entries} entries at a time: that must be 1 or "
                             f"an even power of two dividing its {entries} entries")
        self.entries = entries
        self.word_entries = word_entries
        self.abits = address_bits(entries)
        self.write_layout = write_layout(entries, word_entries)
        self.in_layout = data.StructLayout({
            "value": signed(32),          # the input element (int8 mode: its low 8 bits)
            "mode": unsigned(MODE_BITS),  # LutMode
            "base": unsigned(self.abits), # LUT_ADDR: the table's first entry
            "tag": unsigned(32),          # carried through unchanged
        })
        self.out_layout = data.StructLayout({"result": signed(32), "tag": unsigned(32)})
        super().__init__({
            "w": In(stream.Signature(self.write_layout)),
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    @classmethod
    def for_config(cls, cfg: NpuConfig) -> "LutEngine":
        return cls(cfg.lut_entries, lut_word_entries(cfg))

    def elaborate(self, platform):
        m = Module()
        K = self.word_entries
        H = max(1, K // 2)                              # entries of one parity in a bank row
        hbits = H.bit_length() - 1
        even_rows = -(-((self.entries + 1) // 2) // H)
        odd_rows = -(-(self.entries // 2) // H)
        m.submodules.lut_even = even = memory.Memory(shape=16 * H, depth=even_rows, init=[])
        m.submodules.lut_odd = odd = memory.Memory(shape=16 * H, depth=odd_rows, init=[])

        # ---- table writes ----
        we, wo = even.write_port(granularity=8), odd.write_port(granularity=8)
        w = self.w.payload
        m.d.comb += self.w.ready.eq(1)
        if K == 1:          # one entry: bank addr[0], row addr >> 1
            m.d.comb += [
                we.addr.eq(w.addr >> 1), we.data.eq(w.data), we.en.eq(Mux(self.w.valid & ~w.addr[0], w.en, 0)),
                wo.addr.eq(w.addr >> 1), wo.data.eq(w.data), wo.en.eq(Mux(self.w.valid & w.addr[0], w.en, 0)),
            ]
        else:               # a word: its even entries are one even row, its odd entries one odd row
            m.d.comb += [
                we.addr.eq(w.addr), wo.addr.eq(w.addr),
                we.data.eq(Cat(*(w.data[32 * k:32 * k + 16] for k in range(H)))),
                wo.data.eq(Cat(*(w.data[32 * k + 16:32 * k + 32] for k in range(H)))),
                we.en.eq(Mux(self.w.valid, Cat(*(w.en[4 * k:4 * k + 2] for k in range(H))), 0)),
                wo.en.eq(Mux(self.w.valid, Cat(*(w.en[4 * k + 2:4 * k + 4] for k in range(H))), 0)),
            ]

        # ---- lookups ----
        advance = self.i.ready
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)
        p = self.i.payload
        index = Signal(9, name="table_index")      # entry of the table (int8: 0..255, int16: 0..511)
        fraction = Signal(FRACTION_BITS, name="fraction")
        v16 = Signal(signed(16), name="v16")       # apply_lookup_s' clip to int16
        m.d.comb += v16.eq(Mux(p.value < -(1 << 15), -(1 << 15), Mux(p.value > (1 << 15) - 1, (1 << 15) - 1, p.value)))
        with m.Switch(p.mode):
            with m.Case(LutMode.INT8):
                m.d.comb += index.eq(Cat(p.value[:7], ~p.value[7]))          # (value + 128) & 0xFF
            with m.Case(LutMode.INT16):
                m.d.comb += [index.eq(Cat(v16[7:15], ~v16[15])),             # (v + 32768) >> 7
                             fraction.eq(v16[:FRACTION_BITS])]
            with m.Default():                                                 # OFF: nothing to read
                m.d.comb += [index.eq(0), fraction.eq(0)]
        addr = Signal(self.abits, name="entry_addr")  # the first entry read; the second is addr + 1
        m.d.comb += addr.eq(p.base + index)
        even_at = Signal(self.abits, name="even_entry")    # bank entries read: (addr + 1) >> 1, addr >> 1
        odd_at = Signal(self.abits, name="odd_entry")
        m.d.comb += [even_at.eq((addr + 1) >> 1), odd_at.eq(addr >> 1)]
        re, ro = even.read_port(), odd.read_port()
        m.d.comb += [re.addr.eq(even_at >> hbits), ro.addr.eq(odd_at >> hbits), re.en.eq(advance), ro.en.eq(advance)]

        s1_valid = Signal()
        s1_mode = Signal(MODE_BITS)
        s1_odd = Signal()
        s1_fraction = Signal(FRACTION_BITS)
        s1_value = Signal(signed(32))
        s1_tag = Signal(32)
        s1_even_lane = Signal(max(1, hbits))            # the entries' lanes in the rows read
        s1_odd_lane = Signal(max(1, hbits))
        with m.If(advance):
            m.d.sync += [s1_valid.eq(self.i.valid), s1_mode.eq(p.mode), s1_odd.eq(addr[0]),
                         s1_fraction.eq(fraction), s1_value.eq(p.value), s1_tag.eq(p.tag)]
            if hbits:
                m.d.sync += [s1_even_lane.eq(even_at[:hbits]), s1_odd_lane.eq(odd_at[:hbits])]

        # ---- stage 2: the two entries arrive; interpolate ----
        base_entry = Signal(signed(16), name="base_entry")
        next_entry = Signal(signed(16), name="next_entry")
        even_entry = Signal(16, name="even_read")
        odd_entry = Signal(16, name="odd_read")
        if hbits:
            m.d.comb += [even_entry.eq(re.data.word_select(s1_even_lane, 16)),
                         odd_entry.eq(ro.data.word_select(s1_odd_lane, 16))]
        else:
            m.d.comb += [even_entry.eq(re.data), odd_entry.eq(ro.data)]
        m.d.comb += [base_entry.eq(Mux(s1_odd, odd_entry, even_entry)),
                     next_entry.eq(Mux(s1_odd, even_entry, odd_entry))]
        slope = Signal(signed(17), name="slope")
        m.d.comb += slope.eq(next_entry - base_entry)
        interpolated = Signal(signed(32), name="interpolated")
        m.d.comb += interpolated.eq((base_entry << FRACTION_BITS) + slope * s1_fraction)
        result = Signal(signed(32), name="lut_result")
        with m.Switch(s1_mode):
            with m.Case(LutMode.INT8):
                m.d.comb += result.eq(base_entry)
            with m.Case(LutMode.INT16):
                m.d.comb += result.eq(interpolated)
            with m.Default():
                m.d.comb += result.eq(s1_value)
        s2_valid = Signal()
        with m.If(advance):
            m.d.sync += [s2_valid.eq(s1_valid), self.o.payload.result.eq(result), self.o.payload.tag.eq(s1_tag)]
        m.d.comb += self.o.valid.eq(s2_valid)
        return m
