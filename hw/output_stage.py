"""Output stage of the MAC, ELTWISE and POOL units: RESCALE, CLAMP and TABLE on one element per clock.

firmware_model/golden/output_stage.py's `apply_output_stage` for one element (docs/isa.md, "The output
stage"), built from the project's units rather than written again:

    RESCALE set:   v = the rescale unit (hw/rescale_unit.py) on (value; multiplier, shift,
                   output_zp, rescale_dtype), read as an int48 (`mac_unit.rescale_operands`:
                   apply_scale_32 sees its low 32 bits and a 31-bit multiplier, apply_scale_16
                   the 48 bits and a 15-bit one), SCALE32 / DOUBLE_ROUND / UNSIGNED_OUT from out_mode
    RESCALE clear: v = value (48 bits)
    v = clamp(v, clamp_min, clamp_max)        (always within int32 afterwards)
    v = the LUT engine (hw/lut_engine.py) on v with lut_mode, lut_base (OFF passes v through)
    result = v (int32; storing the low OFM_DTYPE bytes is the writer's business)
    raw (the MAC's raw int48 result: OFM_DTYPE INT48 without RESCALE): result = value, all 48 bits,
        neither clamped nor looked up (the clamp and table stages take their clocks and pass it)

The core has one output stage, shared by the units (one command runs at a time); its LUT engine
holds the LUT SRAM, which the DMA writes through `w`. The stand-alone elementwise and pooling
units (their own benches) each contain one.

Per element (`i` stream): the value, the element's parameter record (multiplier, shift) and a
tag. Per command (`cfg` port, constant while elements are in flight — a command drains the
pipeline before the next one starts, as firmware_model/arch/cycle_model.py counts it): OUT_MODE, RESCALE_DTYPE,
OFM_ZP, CLAMP_MIN, CLAMP_MAX, LUT_MODE, LUT_ADDR, and `raw`. `w` writes the LUT SRAM (the LUT
engine's write stream, one 16-bit entry per clock, byte enables).

OFM_ZP enters the rescale unit's 18-bit output zero point (as in hw/mac_sequencer.py): every zero
point TOSA allows (int8 -128..127, uint8 0..255, uint16 0 or 32768, otherwise 0) fits.

Pipeline: LATENCY = 7 clocks (rescale unit 4, clamp 1, LUT engine 2), one element per clock; a
stage that a command does not use still takes its clocks. The stage stalls as a whole while a
result is offered and not taken (each part's ready is `~valid | downstream ready`). Values that
bypass the rescale unit (the 48-bit value, the clamp/LUT controls) travel in a side pipeline
that shifts exactly when the rescale unit's pipeline does (its `i.ready`, docs/units.md).
"""

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import OutMode, Reg
from firmware_model.tosa_ops.dtypes import DType
from hw.dma_engine import bits_for
from hw.layouts import PARAM_RECORD_LAYOUT
from hw.lut_engine import LATENCY as LUT_LATENCY
from hw.lut_engine import LutEngine, address_bits
from hw.lut_engine import write_layout as lut_engine_write_layout
from hw.rescale_unit import DTYPE_BITS, ZP_BITS, RescaleUnit
from hw.register_map import FromConst, FromReg
from hw.rescale_unit import LATENCY as RESCALE_LATENCY
from hw.register_file import REGISTER_FILE

CLAMP_LATENCY = 1
LATENCY = RESCALE_LATENCY + CLAMP_LATENCY + LUT_LATENCY     # 7
VALUE_BITS = 48
OUT_MODE_BITS = 4
LUT_MODE_BITS = 2


def _bit(flag: OutMode) -> int:
    return flag.value.bit_length() - 1


def out_config_layout(lut_entries: int) -> data.StructLayout:
    """The output stage's per-command registers (docs/isa.md names in brackets)."""
    return data.StructLayout({
        "out_mode": unsigned(OUT_MODE_BITS),         # OUT_MODE: OutMode bits
        "rescale_dtype": unsigned(DTYPE_BITS),       # RESCALE_DTYPE: INT8, INT16, INT32
        "output_zp": signed(ZP_BITS),                # OFM_ZP (18 bits, see the module docstring)
        "clamp_min": signed(32),                     # CLAMP_MIN
        "clamp_max": signed(32),                     # CLAMP_MAX
        "lut_mode": unsigned(LUT_MODE_BITS),         # LUT_MODE: LutMode
        "lut_base": unsigned(address_bits(lut_entries)),   # LUT_ADDR (entries)
        "raw": unsigned(1),                          # the MAC's raw int48 result: the value, unclamped
    })


def lut_write_layout(lut_entries: int, word_entries: int = 1) -> data.StructLayout:
    """A LUT SRAM write: word address, `word_entries` 16-bit entries, byte enables (the LUT
    engine's `w` payload, hw/lut_engine.write_layout; wiring.connect refuses the two if they ever
    differ)."""
    return lut_engine_write_layout(lut_entries, word_entries)


# Where each `cfg` field comes from (hw/register_map.py): the output-stage registers of docs/isa.md.
REGISTER_MAP = {
    "out_mode": FromReg(Reg.OUT_MODE),
    "rescale_dtype": FromReg(Reg.RESCALE_DTYPE),
    "output_zp": FromReg(Reg.OFM_ZP),
    "clamp_min": FromReg(Reg.CLAMP_MIN),
    "clamp_max": FromReg(Reg.CLAMP_MAX),
    "lut_mode": FromReg(Reg.LUT_MODE),
    "lut_base": FromReg(Reg.LUT_ADDR),
    "raw": FromConst(0),          # the core sets it for a MAC's raw int48 result
}


# A result: the value to store (its low OFM_DTYPE bytes; int32 but for a raw int48) and the tag.
OUT_LAYOUT = data.StructLayout({"result": signed(VALUE_BITS), "tag": unsigned(32)})


class OutputStageIn(data.Struct):
    value: signed(VALUE_BITS)     # the unit's result (COPY: up to 48 bits)
    multiplier: signed(32)        # the element's parameter record (used with RESCALE)
    shift: unsigned(6)
    tag: unsigned(32)             # carried through unchanged


def vector_sequencer_ports(cfg, **sram_ports) -> dict:
    """The ports of a sequencer that feeds this stage (ELTWISE, POOL): the command processor's
    handshake (`start` with the command's `sub`, `done`, `status`) and register file, its
    parameter-SRAM read port, the stream into the core's output stage with the stage's
    configuration and the element size the output writer stores; `sram_ports` adds the unit's own
    SRAM read ports (name -> member)."""
    return {
        "start": In(1), "sub": In(8), "done": Out(1), "status": Out(8), "regs": In(REGISTER_FILE),
        **sram_ports,
        "p_addr": Out(bits_for(cfg.param_records)),
        "p_data": In(PARAM_RECORD_LAYOUT),
        "out": Out(stream.Signature(OutputStageIn)),
        "out_cfg": Out(out_config_layout(cfg.lut_entries)),
        "esize": Out(4),
    }


class OutputStage(wiring.Component):
    """`lut_entries`: the LUT SRAM's size in 16-bit entries (cfg.lut_entries); `lut_word_entries`:
    entries per LUT write (hw/lut_engine.py: the core writes a DMA word, lut_word_entries(cfg))."""

    def __init__(self, lut_entries: int = 2048, fault=None, lut_word_entries: int = 1):
        self.lut_entries = lut_entries
        self.lut_word_entries = lut_word_entries
        self.fault = fault          # a rescale-unit fault (hw/rescale_unit.py) for the core's self-check
        self.config_layout = out_config_layout(lut_entries)
        self.write_layout = lut_write_layout(lut_entries, lut_word_entries)
        self.out_layout = OUT_LAYOUT
        super().__init__({
            "w": In(stream.Signature(self.write_layout)),
            "i": In(stream.Signature(OutputStageIn)),
            "o": Out(stream.Signature(self.out_layout)),
            "cfg": In(self.config_layout),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.rescale = rsu = RescaleUnit(fault=self.fault)
        m.submodules.lut = lut = LutEngine(self.lut_entries, self.lut_word_entries)
        cfg, p = self.cfg, self.i.payload

        # ---- RESCALE: the rescale unit, read as an int48 with no input zero point ----
        mode = cfg.out_mode
        m.d.comb += [
            rsu.i.valid.eq(self.i.valid),
            self.i.ready.eq(rsu.i.ready),
            rsu.i.payload.value.eq(p.value),
            rsu.i.payload.in_dtype.eq(DType.INT48),
            rsu.i.payload.input_unsigned.eq(0),
            rsu.i.payload.input_zp.eq(0),
            rsu.i.payload.multiplier.eq(p.multiplier),
            rsu.i.payload.shift.eq(p.shift),
            rsu.i.payload.output_zp.eq(cfg.output_zp),
            rsu.i.payload.scale32.eq(mode[_bit(OutMode.SCALE32)]),
            rsu.i.payload.double_round.eq(mode[_bit(OutMode.DOUBLE_ROUND)]),
            rsu.i.payload.out_dtype.eq(cfg.rescale_dtype),
            rsu.i.payload.output_unsigned.eq(mode[_bit(OutMode.UNSIGNED_OUT)]),
            rsu.i.payload.tag.eq(p.tag),
        ]
        # The unrescaled value beside the rescale unit, shifting when its pipeline shifts.
        bypass = [Signal(signed(VALUE_BITS), name=f"bypass_{k}") for k in range(RESCALE_LATENCY)]
        with m.If(rsu.i.ready):
            m.d.sync += [bypass[0].eq(p.value)] + [bypass[k].eq(bypass[k - 1]) for k in range(1, RESCALE_LATENCY)]

        # ---- CLAMP (1 clock) ----
        c_valid = Signal()
        c_value = Signal(signed(32))
        c_tag = Signal(32)
        advance = Signal()
        m.d.comb += [advance.eq(~c_valid | lut.i.ready), rsu.o.ready.eq(advance)]
        rescaled = Signal(signed(VALUE_BITS), name="rescaled")
        m.d.comb += rescaled.eq(Mux(mode[_bit(OutMode.RESCALE)], rsu.o.payload.result, bypass[-1]))
        low = Signal(signed(VALUE_BITS), name="clamp_low")
        clamped = Signal(signed(32), name="clamped")
        m.d.comb += [low.eq(Mux(rescaled < cfg.clamp_min, cfg.clamp_min, rescaled)),
                     clamped.eq(Mux(low > cfg.clamp_max, cfg.clamp_max, low))]
        c_raw = Signal(signed(VALUE_BITS), name="clamp_raw")       # the unclamped value beside
        with m.If(advance):
            m.d.sync += [c_valid.eq(rsu.o.valid), c_value.eq(clamped), c_tag.eq(rsu.o.payload.tag),
                         c_raw.eq(rescaled)]

        # ---- TABLE: the LUT engine (OFF passes the value through) ----
        wiring.connect(m, wiring.flipped(self.w), lut.w)
        m.d.comb += [
            lut.i.valid.eq(c_valid),
            lut.i.payload.value.eq(c_value),
            lut.i.payload.mode.eq(cfg.lut_mode),
            lut.i.payload.base.eq(cfg.lut_base),
            lut.i.payload.tag.eq(c_tag),
        ]
        # The raw value travels beside the LUT engine's two stages (they shift on its i.ready).
        raw1 = Signal(signed(VALUE_BITS), name="raw_1")
        raw2 = Signal(signed(VALUE_BITS), name="raw_2")
        with m.If(lut.i.ready):
            m.d.sync += [raw1.eq(c_raw), raw2.eq(raw1)]
        m.d.comb += [
            self.o.valid.eq(lut.o.valid), lut.o.ready.eq(self.o.ready),
            self.o.payload.result.eq(Mux(cfg.raw, raw2, lut.o.payload.result)),
            self.o.payload.tag.eq(lut.o.payload.tag),
        ]
        return m
