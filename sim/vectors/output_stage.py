"""The output stage's share of the vector benches (hw/output_stage.py sits inside the elementwise and
the pooling unit): its register settings, random settings aimed at a command's value range, the
resident LUT tables a suite writes first, and the output stage's lint waivers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import LutMode, OutMode, Reg, Sram
from firmware_model.golden.memories import Memories
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType
from sim.vectors.lut import random_table
from sim.verification.unit_bench import LintWaiver, VectorRun

CONFIG = "default"
NPU = load_config(CONFIG)
ENTRIES = NPU.lut_entries
ALL_ONES = 0xFFFFFFFF

# Output-stage rescale kinds: (label, dtype, unsigned)
OUT_KINDS = (("int8", DType.INT8, False), ("uint8", DType.INT8, True), ("int16", DType.INT16, False),
             ("uint16", DType.INT16, True), ("int32", DType.INT32, False))
I32 = (numerics.INT32_MIN, numerics.INT32_MAX)

# Resident tables (written by each suite's first run): an int8 table at an even base, an int16
# table at an odd base (the LUT engine's bank swap).
LUT_INT8_BASE = 1536
LUT_INT16_BASE = 1001


@dataclass
class OutStage:
    rescale: bool = False
    scale32: bool = True
    double_round: bool = False
    kind: int = 4                # index into OUT_KINDS (the rescale's saturation)
    zp: int = 0
    multipliers: np.ndarray = field(default_factory=lambda: np.array([1 << 30]))   # per channel
    shifts: np.ndarray = field(default_factory=lambda: np.array([30]))
    channels: int = 0            # ELT_CHANNELS (0 reads as 1)
    clamp: tuple[int, int] = I32
    lut_mode: int = int(LutMode.OFF)
    ofm_dtype: DType = DType.INT32   # only the golden model's store sees it (the unit returns int32)


def output_registers(o: OutStage) -> dict[int, int]:
    """The output stage's registers (records from PARAM_ADDR 0, tables at the resident bases)."""
    out_mode = OutMode(0)
    if o.rescale:
        out_mode |= OutMode.RESCALE
        if o.scale32:
            out_mode |= OutMode.SCALE32
        if o.double_round:
            out_mode |= OutMode.DOUBLE_ROUND
        if OUT_KINDS[o.kind][2]:
            out_mode |= OutMode.UNSIGNED_OUT
    return {Reg.OFM_DTYPE: int(o.ofm_dtype), Reg.OFM_ZP: o.zp & ALL_ONES, Reg.PARAM_ADDR: 0,
            Reg.OUT_MODE: int(out_mode), Reg.CLAMP_MIN: o.clamp[0] & ALL_ONES, Reg.CLAMP_MAX: o.clamp[1] & ALL_ONES,
            Reg.LUT_MODE: o.lut_mode, Reg.RESCALE_DTYPE: int(OUT_KINDS[o.kind][1]),
            Reg.LUT_ADDR: LUT_INT8_BASE if o.lut_mode == LutMode.INT8 else LUT_INT16_BASE}


def _value_bits(values: np.ndarray) -> float:
    m = float(np.max(np.abs(values))) if values.size else 1.0
    return np.log2(m + 1)


def random_out_stage(rng, raw: np.ndarray, count: int, *, rescale: bool | None = None,
                     records: int | None = None) -> OutStage:
    """The output stage for a command whose operation gives `raw` (golden values without the
    stage): scales that map them onto the output range, near its edges and beyond. `records`:
    a fixed number of parameter records (POOL: one per channel), else ELT_CHANNELS at random."""
    o = OutStage()
    o.rescale = bool(rng.random() < 0.6) if rescale is None else rescale
    if records is None:
        o.channels = int(rng.choice([0, 1, int(rng.integers(1, min(count, 256) + 1))]))
    else:
        o.channels = records
    nrec = max(1, o.channels)
    if o.rescale:
        o.scale32 = bool(rng.random() < 0.75)
        o.double_round = bool(rng.random() < 0.4)
        o.kind = int(rng.integers(0, len(OUT_KINDS)))
        label = OUT_KINDS[o.kind][0]
        o.zp = {"int8": int(rng.integers(-128, 128)), "uint8": int(rng.integers(0, 256)),
                "uint16": int(rng.choice([0, 32768]))}.get(label, 0)
        out_bits = OUT_KINDS[o.kind][1].bits
        in_bits = _value_bits(raw)
        mbits = 31 if o.scale32 else 15
        gain = out_bits - in_bits + rng.uniform(-3, 3, nrec)
        o.shifts = np.clip(np.round(mbits - 0.5 - gain), 2, 62).astype(np.int64)
        o.multipliers = rng.integers(1 << (mbits - 1), 1 << mbits, nrec)
        odd = rng.random(nrec) < 0.1
        o.shifts[odd] = rng.choice([0, 1, 31, 32, 63], odd.sum())
        o.multipliers[odd] = rng.integers(-(1 << 31), 1 << 31, odd.sum())   # bits beyond the width
    else:
        o.multipliers = rng.integers(-(1 << 31), 1 << 31, nrec)             # not read
        o.shifts = rng.integers(0, 64, nrec)
    r = rng.random()
    if r < 0.5:
        o.clamp = I32
    elif r < 0.8:
        centre = int(np.median(raw)) if raw.size else 0
        width = int(2 ** rng.uniform(0, 20))
        o.clamp = (max(I32[0], centre - width), min(I32[1], centre + int(2 ** rng.uniform(0, 20))))
    elif r < 0.93:
        o.clamp = {8: (-128, 127), 16: (-32768, 32767)}.get(OUT_KINDS[o.kind][1].bits, I32)
    else:
        lo = int(rng.integers(-1000, 1000))
        o.clamp = (lo, lo - int(rng.integers(1, 50)))                      # min > max: max wins
    r = rng.random()
    o.lut_mode = int(LutMode.OFF if r < 0.7 else LutMode.INT8 if r < 0.85 else LutMode.INT16)
    return o


def table_run(rng, mem: Memories, label: str) -> VectorRun:
    """Write the resident int8 and int16 tables into the LUT SRAM (and the golden image)."""
    t8 = random_table(rng, int(LutMode.INT8), "sext")
    t16 = random_table(rng, int(LutMode.INT16), "random")
    addr = np.concatenate([LUT_INT8_BASE + np.arange(len(t8)), LUT_INT16_BASE + np.arange(len(t16))])
    data = np.concatenate([t8, t16])
    order = rng.permutation(len(addr))
    lut = mem.sram[Sram.LUT].view("<u2")
    lut[addr] = data.astype(np.uint16)
    return VectorRun(inputs={"w": {"addr": addr[order], "data": data[order], "en": 3}}, n_out={"o": 0}, label=label)


# Lint waivers of the output stage (hw/output_stage.py), which both the elementwise and the
# pooling unit contain.
OUTPUT_STAGE_WAIVERS = (
    LintWaiver("DECLFILENAME", "*MODULE name: '*.*'*",
               "Amaranth writes each sub-component (the output stage, its rescale unit and LUT "
               "engine, the input rescale units) as a module named <top>.<path> in the design's "
               "one Verilog file, which is named after the top module"),
    LintWaiver("UNUSEDSIGNAL", "*: 'w__ready'*",
               "the LUT engine's write stream is always ready (w.ready = 1): Amaranth drops the "
               "constant port from the sub-components' modules and leaves their w__ready wire "
               "assigned 1'h1; the unit's own w.ready port is driven by the same constant"),
    LintWaiver("UNUSEDSIGNAL", "*: 'w__ready$*'*",
               "the parent's copy of that constant ready (assign w__ready$N = 1'h1), likewise unread"),
)
