"""The variable SRAM as a VectorHarness unit: one ordered operation stream in, one record per
operation out, so that a bench can check every access and the error state after it.

sim/verification/gateware/vector_harness.py exposes a unit's plain ports only as static settings, but the variable SRAM's
`invocation_start` must pulse between accesses and its error state must be seen after each one.
`VariableSramHarnessUnit` wraps the unit:

- `op` (in): `kind` READ 0, WRITE 1, START 2 (an invocation-start pulse), `slot`, `addr`, `data`;
- `out` (out): one record per operation, the clock after it took effect at the earliest: the read
  data and `refused` (zero for writes and starts), then the state after the operation: `error`,
  `error_code`, `error_slot`, and the written flag of the operation's slot (0 for slot >= slots).

One operation is in flight at a time; back-pressure on `out` holds it (and the unit's read word).
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.variable_sram import SLOT_BITS, STATUS_BITS, ADDR_BITS, VariableSram

OP_READ, OP_WRITE, OP_START = 0, 1, 2


def op_layout(word_bytes: int) -> data.StructLayout:
    return data.StructLayout({
        "kind": unsigned(2),
        "slot": unsigned(SLOT_BITS),
        "addr": unsigned(ADDR_BITS),
        "data": data.ArrayLayout(unsigned(8), word_bytes),
    })


def record_layout(word_bytes: int) -> data.StructLayout:
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(8), word_bytes),
        "refused": unsigned(1),
        "error": unsigned(1),
        "error_code": unsigned(STATUS_BITS),
        "error_slot": unsigned(SLOT_BITS),
        "written": unsigned(1),
    })


class VariableSramHarnessUnit(wiring.Component):
    def __init__(self, words: int, word_bytes: int, slots: int):
        self.words, self.word_bytes, self.slots = words, word_bytes, slots
        super().__init__({
            "op": In(stream.Signature(op_layout(word_bytes))),
            "out": Out(stream.Signature(record_layout(word_bytes))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sram = u = VariableSram(self.words, self.word_bytes, self.slots)
        op = self.op.payload
        s_valid = Signal()
        s_read = Signal()
        s_slot = Signal(SLOT_BITS)
        free = Signal()
        is_start = Signal()
        fire = Signal()
        m.d.comb += [
            free.eq(~s_valid | self.out.ready),
            is_start.eq(op.kind == OP_START),
            self.op.ready.eq(free & (is_start | u.req.ready)),
            fire.eq(self.op.valid & self.op.ready),
            u.req.valid.eq(self.op.valid & free & ~is_start),
            u.req.payload.write.eq(op.kind == OP_WRITE),
            u.req.payload.slot.eq(op.slot),
            u.req.payload.addr.eq(op.addr),
            u.req.payload.data.eq(op.data),
            u.req.payload.en.eq((1 << self.word_bytes) - 1),      # whole words; raw = 0: slot accesses
            u.invocation_start.eq(self.op.valid & free & is_start),
            u.rsp.ready.eq(s_valid & s_read & self.out.ready),
        ]
        with m.If(fire):
            m.d.sync += [s_valid.eq(1), s_read.eq(op.kind == OP_READ), s_slot.eq(op.slot)]
        with m.Elif(self.out.ready):
            m.d.sync += s_valid.eq(0)

        rec = self.out.payload
        slot_bits = max(1, (self.slots - 1).bit_length())
        m.d.comb += [
            self.out.valid.eq(s_valid),
            rec.data.eq(Mux(s_read, u.rsp.payload.data, 0)),
            rec.refused.eq(s_read & u.rsp.payload.refused),
            rec.error.eq(u.error),
            rec.error_code.eq(u.error_code),
            rec.error_slot.eq(u.error_slot),
            rec.written.eq(Mux(s_slot < self.slots, u.written.bit_select(s_slot[:slot_bits], 1), 0)),
        ]
        return m
