"""The MAC array as a VectorHarness unit: one ordered operation stream in, accumulators out.

sim/verification/gateware/vector_harness.py plays each input stream of a phase at its own pace, but the MAC array needs
its weight rows and vectors in one order (load a block, stream its vectors, load the next ...).
`MacArrayHarnessUnit` wraps the array so that the harness can play it:

- `op` (phase 1): one operation per payload, `kind` 0 = weight row (-> `w`), 1 = vector (-> `x`),
  with the fields of both beats (docs/units.md, "MAC array"); always ready.
- `rd` (phase 2): accumulator addresses to read back;
- `acc` (out): the accumulator words read, in request order (rows int48 lanes).

The read-back path keeps the array's read address on the last request while its word waits for
`acc.ready`, so back-pressure on `acc` holds the data. It shares the accumulator read port with
the vectors, so `rd` must not be played while vectors still arrive (a later phase ensures that).
"""

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import ACC_BITS
from hw.mac_array import MacArray, ZP_BITS, _bits

OP_WEIGHT_ROW = 0
OP_VECTOR = 1
PHASES = [["op"], ["rd"]]


def op_layout(rows: int, cols: int, depth: int) -> data.StructLayout:
    return data.StructLayout({
        "kind": unsigned(1),
        "data": data.ArrayLayout(unsigned(8), cols),
        "row": unsigned(_bits(rows)),
        "zp": signed(ZP_BITS),
        "int16": unsigned(1),
        "acc": unsigned(_bits(depth)),
        "first": unsigned(1),
    })


class MacArrayHarnessUnit(wiring.Component):
    def __init__(self, rows: int, cols: int, depth: int):
        self.rows, self.cols, self.depth = rows, cols, depth
        super().__init__({
            "op": In(stream.Signature(op_layout(rows, cols, depth))),
            "rd": In(stream.Signature(unsigned(_bits(depth)))),
            "acc": Out(stream.Signature(data.ArrayLayout(signed(ACC_BITS), rows))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = MacArray(self.rows, self.cols, self.depth)
        op = self.op.payload
        is_vector = op.kind == OP_VECTOR
        m.d.comb += [
            self.op.ready.eq(1),
            mac.w.valid.eq(self.op.valid & ~is_vector),
            mac.w.payload.data.eq(op.data),
            mac.w.payload.row.eq(op.row),
            mac.w.payload.zp.eq(op.zp),
            mac.w.payload.int16.eq(op.int16),
            mac.x.valid.eq(self.op.valid & is_vector),
            mac.x.payload.data.eq(op.data),
            mac.x.payload.zp.eq(op.zp),
            mac.x.payload.int16.eq(op.int16),
            mac.x.payload.acc.eq(op.acc),
            mac.x.payload.first.eq(op.first),
        ]

        held = Signal(unsigned(_bits(self.depth)))
        out_valid = Signal()
        take = Signal()
        m.d.comb += [
            self.rd.ready.eq(~out_valid | self.acc.ready),
            take.eq(self.rd.valid & self.rd.ready),
            mac.rd_addr.eq(Mux(take, self.rd.payload, held)),
            self.acc.valid.eq(out_valid),
            self.acc.payload.eq(mac.rd_data),
        ]
        with m.If(take):
            m.d.sync += [held.eq(self.rd.payload), out_valid.eq(1)]
        with m.Elif(self.acc.ready):
            m.d.sync += out_valid.eq(0)
        return m
