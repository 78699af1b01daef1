"""Vector output stage: RESCALE and CLAMP on a whole accumulator word (`lanes` channels) per clock.

The MAC sequencer's fast output path (docs/isa.md, "The MAC command"): a pixel's `lanes` output
channels leave the accumulators together and are rescaled and clamped side by side, one rescale
unit per lane (hw/rescale_unit.py, the same unit as the shared output stage's), then the vector
writer (hw/vector_writer.py) stores them. Per lane it is `apply_output_stage` of
firmware_model/golden/output_stage.py without the TABLE stage:

    RESCALE set:   v = the rescale unit on (value; the lane's multiplier and shift, OFM_ZP,
                   RESCALE_DTYPE), read as an int48 with no input zero point
    RESCALE clear: v = value
    result = clamp(v, CLAMP_MIN, CLAMP_MAX)

A command with a table (LUT_MODE not OFF) or a raw int48 result takes the shared scalar output
stage instead: one LUT SRAM read port cannot serve `lanes` lookups per clock, and an 8-byte
element is the writer's two-clock case. The MAC sequencer chooses per command.

Ports: `i` (valid only: one vector per clock at most, never stalled — the sequencer spaces the
vectors by their write clocks, so the pipeline never needs back-pressure), `o` (valid only: the
results and what travels beside them), `cfg` (the shared stage's per-command registers).

Pipeline: LATENCY = 5 clocks (rescale 4, clamp 1), one vector per clock.
"""

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import OutMode
from firmware_model.tosa_ops.dtypes import DType
from hw.output_stage import VALUE_BITS, out_config_layout
from hw.rescale_unit import LATENCY as RESCALE_LATENCY
from hw.rescale_unit import RescaleUnit

CLAMP_LATENCY = 1
LATENCY = RESCALE_LATENCY + CLAMP_LATENCY        # 5


def _bit(flag: OutMode) -> int:
    return flag.value.bit_length() - 1


def side_layout() -> data.StructLayout:
    """What travels beside the lanes: the first element's byte address in the output SRAM, the
    bytes to store (lanes x element size) and the word writes that takes; for a pixel pair (a
    row-paired block's two pixels, each in half of the lanes) the second pixel's address and bytes,
    stored from the upper half of the lanes through the second write port in the same clocks
    (`words` is then the larger pixel's)."""
    return data.StructLayout({"addr": unsigned(32), "nbytes": unsigned(16), "words": unsigned(16),
                              "addr2": unsigned(32), "nbytes2": unsigned(16)})


def vector_in_layout(lanes: int) -> data.StructLayout:
    return data.StructLayout({
        "values": data.ArrayLayout(signed(VALUE_BITS), lanes),     # biased accumulators
        "multipliers": data.ArrayLayout(signed(32), lanes),        # each lane's parameter record
        "shifts": data.ArrayLayout(unsigned(6), lanes),
        "side": side_layout(),
    })


def vector_out_layout(lanes: int) -> data.StructLayout:
    return data.StructLayout({"results": data.ArrayLayout(signed(32), lanes), "side": side_layout()})


class VectorOutputStage(wiring.Component):
    def __init__(self, lanes: int, lut_entries: int = 2048, fault=None):
        self.lanes = lanes
        self.fault = fault            # a rescale-unit fault (hw/rescale_unit.py) for the core's self-check
        super().__init__({
            "i_valid": In(1),
            "i": In(vector_in_layout(lanes)),
            "o_valid": Out(1),
            "o": Out(vector_out_layout(lanes)),
            "cfg": In(out_config_layout(lut_entries)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        mode = cfg.out_mode
        rescale_on = mode[_bit(OutMode.RESCALE)]

        # what travels beside the rescale units, shifting every clock (they never stall)
        valid = Signal(LATENCY, name="stage_valid")
        m.d.sync += valid.eq(valid.shift_left(1) | self.i_valid)
        sides = [Signal(side_layout(), name=f"side_{k}") for k in range(LATENCY)]
        m.d.sync += [sides[0].eq(self.i.side)] + [sides[k].eq(sides[k - 1]) for k in range(1, LATENCY)]

        for lane in range(self.lanes):
            rsu = RescaleUnit(fault=self.fault)
            m.submodules[f"rescale_{lane}"] = rsu
            m.d.comb += [
                rsu.i.valid.eq(self.i_valid),
                rsu.o.ready.eq(1),
                rsu.i.payload.value.eq(self.i.values[lane]),
                rsu.i.payload.in_dtype.eq(DType.INT48),
                rsu.i.payload.input_unsigned.eq(0),
                rsu.i.payload.input_zp.eq(0),
                rsu.i.payload.multiplier.eq(self.i.multipliers[lane]),
                rsu.i.payload.shift.eq(self.i.shifts[lane]),
                rsu.i.payload.output_zp.eq(cfg.output_zp),
                rsu.i.payload.scale32.eq(mode[_bit(OutMode.SCALE32)]),
                rsu.i.payload.double_round.eq(mode[_bit(OutMode.DOUBLE_ROUND)]),
                rsu.i.payload.out_dtype.eq(cfg.rescale_dtype),
                rsu.i.payload.output_unsigned.eq(mode[_bit(OutMode.UNSIGNED_OUT)]),
                rsu.i.payload.tag.eq(0),
            ]
            # the unrescaled value beside the rescale unit (RESCALE clear)
            bypass = [Signal(signed(VALUE_BITS), name=f"bypass_{lane}_{k}") for k in range(RESCALE_LATENCY)]
            m.d.sync += [bypass[0].eq(self.i.values[lane])] + [bypass[k].eq(bypass[k - 1])
                                                               for k in range(1, RESCALE_LATENCY)]
            v = Signal(signed(VALUE_BITS), name=f"rescaled_{lane}")
            m.d.comb += v.eq(Mux(rescale_on, rsu.o.payload.result, bypass[-1]))
            low = Signal(signed(VALUE_BITS), name=f"clamp_low_{lane}")
            m.d.comb += low.eq(Mux(v < cfg.clamp_min, cfg.clamp_min, v))
            m.d.sync += self.o.results[lane].eq(Mux(low > cfg.clamp_max, cfg.clamp_max, low))

        m.d.comb += [self.o_valid.eq(valid[-1]), self.o.side.eq(sides[-1])]
        return m
