"""Variable SRAM: the persistent store of TOSA variables, with per-slot written flags.

The rules are firmware_model/golden/variable_sram.py's (`VariableSramModel`); docs/units.md describes the
interface. In short:

- `req` (stream): one access per clock: `write`, `slot` (the variable's written flag), `addr` (a
  byte address, word-aligned) and, for writes, `data` (one word of `word_bytes` bytes) with its
  byte enables `en`. A `raw` access (the DMA's DMA_LOAD/DMA_STORE of the variable SRAM, not a
  VAR command) ignores the slot: it is never refused for a clear flag and sets no flag.
- `rsp` (stream): one payload per read, in order, one clock after the request at the earliest:
  the word, and `refused` when the read was refused (its data is then zero).
- A refused access (misaligned, past the SRAM, slot >= slots: ADDRESS_RANGE; a read of a slot
  whose written flag is clear: VAR_READ_BEFORE_WRITE) raises the sticky `error` with
  `error_code` (firmware_model.arch.isa.Status) and `error_slot`; the first refusal is kept.
- `written` shows every slot's flag; a write that is not refused sets its slot's flag.
- `invocation_start` (a one-clock pulse) clears the error only: contents and written flags persist
  across invocations. An access in the same clock belongs to the new invocation.
- Reset clears everything: flags and error at once, the contents by a walk that writes zero to
  every word (`clearing` is high and `req` not ready for `words` clocks after reset).

A read holds its word while `rsp` is not ready, and `req` is not ready then (one access in flight).
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import VAR_SLOTS, Status
from firmware_model.arch.config import NpuConfig

ADDR_BITS = 32       # byte addresses, as the VAR_ADDR register holds them
SLOT_BITS = 8        # slot numbers; slots >= `slots` are refused
STATUS_BITS = 8


def request_layout(word_bytes: int) -> data.StructLayout:
    return data.StructLayout({
        "write": unsigned(1),
        "slot": unsigned(SLOT_BITS),
        "addr": unsigned(ADDR_BITS),
        "data": data.ArrayLayout(unsigned(8), word_bytes),
        "en": unsigned(word_bytes),       # byte enables of a write
        "raw": unsigned(1),               # a plain DMA access: no slot, no flag rule
    })


def response_layout(word_bytes: int) -> data.StructLayout:
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(8), word_bytes),
        "refused": unsigned(1),
    })


class VariableSram(wiring.Component):
    def __init__(self, words: int, word_bytes: int, slots: int = VAR_SLOTS):
        if word_bytes < 1 or word_bytes & (word_bytes - 1):
            raise ValueError(f"word_bytes = {word_bytes}: must be a power of two")
        if not 1 <= slots <= (1 << SLOT_BITS):
            raise ValueError(f"slots = {slots}: must lie in 1 .. {1 << SLOT_BITS}")
        if words < 1:
            raise ValueError("the variable SRAM needs at least one word")
        self.words, self.word_bytes, self.slots = words, word_bytes, slots
        self.mem = memory.Memory(shape=unsigned(8 * word_bytes), depth=words, init=[])
        super().__init__({
            "req": In(stream.Signature(request_layout(word_bytes))),
            "rsp": Out(stream.Signature(response_layout(word_bytes))),
            "invocation_start": In(1),
            "clearing": Out(1, init=1),
            "error": Out(1),
            "error_code": Out(STATUS_BITS),
            "error_slot": Out(SLOT_BITS),
            "written": Out(slots),
        })

    @classmethod
    def for_config(cls, cfg: NpuConfig, slots: int = VAR_SLOTS) -> "VariableSram":
        return cls(cfg.variable_words, cfg.word_bytes, slots)

    def elaborate(self, platform):
        m = Module()
        W = self.word_bytes
        lg_w = W.bit_length() - 1
        m.submodules.mem = mem = self.mem
        wr = mem.write_port(granularity=8)
        rd = mem.read_port()
        req = self.req.payload

        # ---- reset: walk the contents to zero ----
        clearing = self.clearing
        clear_addr = Signal(range(self.words))
        with m.If(clearing):
            m.d.sync += clear_addr.eq(clear_addr + 1)
            with m.If(clear_addr == self.words - 1):
                m.d.sync += clearing.eq(0)

        # ---- the access rules ----
        word = req.addr[lg_w:]
        aligned = Signal()
        in_range = Signal()
        written = self.written
        slot_written = Signal()
        range_ok = Signal()
        read_before_write = Signal()
        refused = Signal()
        m.d.comb += [
            aligned.eq(req.addr[:lg_w] == 0 if lg_w else 1),
            in_range.eq((word < self.words) & (req.raw | (req.slot < self.slots))),
            range_ok.eq(aligned & in_range),
            slot_written.eq(written.bit_select(req.slot[:max(1, (self.slots - 1).bit_length())], 1)),
            read_before_write.eq(~req.write & ~req.raw & range_ok & ~slot_written),
            refused.eq(~range_ok | read_before_write),
        ]

        # ---- handshakes: one access in flight; a read's word waits in the read port ----
        advance = Signal()
        fire = Signal()
        rsp_valid = self.rsp.valid
        rsp_refused = Signal()
        m.d.comb += [
            advance.eq(~rsp_valid | self.rsp.ready),
            self.req.ready.eq(advance & ~clearing),
            fire.eq(self.req.valid & self.req.ready),
        ]
        with m.If(advance):
            m.d.sync += [rsp_valid.eq(fire & ~req.write), rsp_refused.eq(refused)]
        m.d.comb += [
            rd.addr.eq(word),
            rd.en.eq(advance),
            self.rsp.payload.data.eq(Mux(rsp_refused, 0, rd.data)),
            self.rsp.payload.refused.eq(rsp_refused),
        ]

        # ---- writes: the access, or the reset walk ----
        stored = Signal()           # a write that is not refused
        set_written = Signal()      # ... to a slot: its flag sets
        m.d.comb += [stored.eq(fire & req.write & range_ok), set_written.eq(stored & ~req.raw)]
        m.d.comb += [
            wr.addr.eq(Mux(clearing, clear_addr, word)),
            wr.data.eq(Mux(clearing, 0, req.data)),
            wr.en.eq(Mux(clearing, (1 << W) - 1, Mux(stored, req.en, 0))),
        ]

        # ---- written flags: set by a stored write, cleared only by reset ----
        with m.If(set_written):
            m.d.sync += written.bit_select(req.slot[:max(1, (self.slots - 1).bit_length())], 1).eq(1)

        # ---- the sticky error: the first refusal of an invocation ----
        error, error_code, error_slot = self.error, self.error_code, self.error_slot
        pending = Signal()
        m.d.comb += pending.eq(error & ~self.invocation_start)
        with m.If(fire & refused & ~pending):
            m.d.sync += [error.eq(1), error_slot.eq(req.slot),
                         error_code.eq(Mux(range_ok, Status.VAR_READ_BEFORE_WRITE, Status.ADDRESS_RANGE))]
        with m.Elif(self.invocation_start):
            m.d.sync += [error.eq(0), error_code.eq(Status.OK), error_slot.eq(0)]
        return m
