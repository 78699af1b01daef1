"""MAC array: `rows` x `cols` multipliers with zero points, one input vector per clock.

A weight block of rows x cols int8 values is loaded one row per clock (`load`), stored with the
weight zero point already subtracted; it then stays while input vectors stream past. For each
input vector x (cols int8 lanes) the array presents, one clock later (LATENCY), the rows dot
products

    sums[r] = sum over l of (x[l] - input_zp) * (w[r][l] - weight_zp)      (10-bit factors)

as 32-bit values (|sum| < cols * 2^16, far inside 32 bits). The accumulation across input-channel
blocks and kernel positions happens in the accumulator SRAM of the MAC sequencer.
"""

from amaranth import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

SUM_BITS = 32
LATENCY = 1


class MacArray(wiring.Component):
    def __init__(self, rows: int, cols: int):
        self.rows = rows
        self.cols = cols
        super().__init__({
            # weight loading: row `load_row` <- `load_data` (cols bytes), minus `weight_zp`
            "load": In(1),
            "load_row": In(range(max(rows, 2))),
            "load_data": In(8 * cols),
            "weight_zp": In(signed(9)),
            # one input vector per clock
            "x": In(8 * cols),
            "input_zp": In(signed(9)),
            "sums": Out(data.ArrayLayout(signed(SUM_BITS), rows)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols = self.rows, self.cols
        weights = [[Signal(signed(10), name=f"w_{r}_{c}") for c in range(cols)] for r in range(rows)]
        for r in range(rows):
            with m.If(self.load & (self.load_row == r)):
                for c in range(cols):
                    m.d.sync += weights[r][c].eq(self.load_data[8 * c:8 * c + 8].as_signed() - self.weight_zp)
        xs = []
        for c in range(cols):
            xc = Signal(signed(10), name=f"x_{c}")
            m.d.comb += xc.eq(self.x[8 * c:8 * c + 8].as_signed() - self.input_zp)
            xs.append(xc)
        for r in range(rows):
            # Products into named 20-bit signals, a balanced adder tree (log2(cols) levels), and a
            # register at the output: the critical path stays short, and an event-driven simulator
            # does not re-propagate every lane's change through the wide result bus.
            level = []
            for c in range(cols):
                prod = Signal(signed(20), name=f"p_{r}_{c}")
                m.d.comb += prod.eq(xs[c] * weights[r][c])
                level.append(prod)
            depth = 0
            while len(level) > 1:
                depth += 1
                nxt = []
                for i in range(0, len(level), 2):
                    if i + 1 == len(level):
                        nxt.append(level[i])
                        continue
                    s = Signal(signed(20 + depth), name=f"s_{r}_{depth}_{i // 2}")
                    m.d.comb += s.eq(level[i] + level[i + 1])
                    nxt.append(s)
                level = nxt
            m.d.sync += self.sums[r].eq(level[0])
        return m
