"""Stimulus, expected results, coverage and mutations for the pooling unit bench (hw/pool_unit.py).

As for the elementwise unit (sim/vectors/eltwise.py), a run is one POOL *command*: random
registers (mode MAX/AVG/SUM/MIN, input type and zero point, kernel, stride, padding, the input
box, output zero point and type, the output stage) and an input box. The expected results are
the golden model's own: `firmware_model.golden.pool_unit.execute_pool` runs the command on a `Memories`
holding the box, the parameter records and the LUT tables; its `out_values` (OFM_H x OFM_W x
OFM_C, row-major) are what the unit must produce, one result per window. The test side plays
the sequencer: for each output element in row-major order, every tap of its window in kernel
order (firmware_model/arch/cycle_model.py's schedule), `pad` where the tap lies outside the box (with garbage
in the value, which the unit must ignore), `last` on the window's last tap together with the
channel's parameter record and the tag; the element's bits above its type hold garbage too.

AVG windows are also built on purpose for the divider (`reciprocal_commands`): for each count of
real taps in a list (1..70, around powers of two, up to 4097 taps on Verilator), int16 windows
whose sums sit where the reciprocal's least significant bit decides the rounding
(numerics.apply_scale_32 with multiplier m + 1 or m - 1 differs from m), so a quotient off by
one in any bit shows in the result.

Coverage classifies every window with golden calls (numerics.reciprocal_scale, apply_scale_32,
apply_add_s for AVG's saturation; output_stage.apply_output_stage widened for the output
rescale's): mode, count of real taps, padding, saturation side, input type, zero point, the
output stage's rescale / clamp / table, and the divider's rounding sensitivity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim import seeds
from firmware_model.arch.isa import ELEMENT_BYTES, LutMode, OutMode, PoolMode, Reg, Sram
from firmware_model.arch.registers import Registers
from firmware_model.arch.isa import encode_param_records
from firmware_model.golden.memories import Memories
from firmware_model.golden.output_stage import apply_output_stage
from firmware_model.golden.pool_unit import execute_pool
from firmware_model.errors import GoldenModelError
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType
from hw.register_map import map_values
from sim.verification.gateware.vector_harness import PayloadCodec
from sim.verification.coverage import CoverageModel, CoverPoint, Cross
from sim.vectors.output_stage import (ALL_ONES, ENTRIES, I32, NPU, OUT_KINDS, OUTPUT_STAGE_WAIVERS, OutStage,
                                      output_registers, random_out_stage, table_run)
from sim.verification.contract import UnitContract
from sim.verification.unit_bench import LintWaiver, Mutation, UnitBench, UnitSpec, VectorRun, assert_results_match, lint_unit

DEPTH = 16384
IN_DTYPES = (DType.INT8, DType.INT16, DType.INT32)
MODES = tuple(PoolMode)


def _unit():
    from hw.pool_unit import PoolUnit

    return PoolUnit(ENTRIES)


_CODEC: list = []


def unit_config(regs: dict[int, int], mode: int) -> int:
    """The `cfg` port's bits for a POOL command: the unit's register map (hw/pool_unit.py)."""
    from hw.pool_unit import REGISTER_MAP, config_layout

    if not _CODEC:
        _CODEC.append(PayloadCodec(config_layout(ENTRIES)))
    return _CODEC[0].pack(map_values(REGISTER_MAP, regs, mode), n=1)[0]


@dataclass
class Geometry:
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    ih: int
    iw: int
    oh: int
    ow: int
    oc: int

    def rows(self):
        return np.arange(self.oh)[:, None] * self.sh + np.arange(self.kh)[None, :] - self.pt

    def cols(self):
        return np.arange(self.ow)[:, None] * self.sw + np.arange(self.kw)[None, :] - self.pl

    @property
    def taps(self) -> int:
        return self.oh * self.ow * self.oc * self.kh * self.kw


@dataclass
class PoolCommand:
    label: str
    mode: int
    in_dtype: DType
    zp: int
    geo: Geometry
    box: np.ndarray                    # (ih, iw, oc) elements as read (signed)
    out: OutStage
    out_dtype: DType = DType.INT8
    regs: dict = field(default_factory=dict)
    expected: np.ndarray | None = None     # one per window, row-major (oy, ox, c)
    fields: dict = field(default_factory=dict)
    count: np.ndarray | None = None        # real taps per window
    padded: np.ndarray | None = None       # window has padding taps
    raw: np.ndarray | None = None          # window value before the output stage (AVG: the sum)

    @property
    def windows(self) -> int:
        return self.geo.oh * self.geo.ow * self.geo.oc


def _registers(c: PoolCommand) -> dict[int, int]:
    g, size = c.geo, ELEMENT_BYTES[c.in_dtype]
    regs = {
        Reg.IFM_ADDR: 0, Reg.IFM_ROW_STRIDE: g.iw * g.oc * size, Reg.IFM_PIX_STRIDE: g.oc * size,
        Reg.IFM_ZP: c.zp & ALL_ONES, Reg.IFM_DTYPE: int(c.in_dtype), Reg.KERNEL_H: g.kh, Reg.KERNEL_W: g.kw,
        Reg.STRIDE_H: g.sh, Reg.STRIDE_W: g.sw, Reg.OFM_ADDR: 0, Reg.OFM_ROW_STRIDE: 0, Reg.OFM_PIX_STRIDE: 0,
        Reg.OFM_H: g.oh, Reg.OFM_W: g.ow, Reg.OFM_C: g.oc, Reg.POOL_PAD_TOP: g.pt, Reg.POOL_PAD_LEFT: g.pl,
        Reg.POOL_IN_H: g.ih, Reg.POOL_IN_W: g.iw, **output_registers(c.out),
    }
    regs[Reg.OFM_DTYPE] = int(c.out_dtype)
    esize = ELEMENT_BYTES[c.out_dtype]
    regs[Reg.OFM_PIX_STRIDE] = g.oc * esize
    regs[Reg.OFM_ROW_STRIDE] = g.ow * g.oc * esize
    return regs


def finish(c: PoolCommand, mem: Memories, rng) -> PoolCommand:
    """Registers, golden expected values (execute_pool) and the unit's tap fields."""
    c.regs = _registers(c)
    g = c.geo
    size = ELEMENT_BYTES[c.in_dtype]
    raw = np.asarray(c.box, dtype=np.int64).reshape(-1).astype(f"<i{size}").view(np.uint8)
    mem.sram[Sram.INPUT][:raw.size] = raw
    rec = encode_param_records(np.zeros(g.oc, np.int64), np.resize(c.out.multipliers, g.oc), np.resize(c.out.shifts, g.oc))
    mem.sram[Sram.PARAM][:len(rec)] = np.frombuffer(rec, dtype=np.uint8)
    res = execute_pool(NPU, mem, c.regs, c.mode)
    c.expected = res.out_values.reshape(-1).astype(np.int64)
    # for coverage: the window values before the output stage (AVG: the sums, i.e. SUM mode)
    bare = {**c.regs, **output_registers(OutStage()), Reg.OFM_DTYPE: int(DType.INT32),
            Reg.OFM_PIX_STRIDE: g.oc * 4, Reg.OFM_ROW_STRIDE: g.ow * g.oc * 4}
    raw_mode = PoolMode.SUM if c.mode == PoolMode.AVG else c.mode
    c.raw = execute_pool(NPU, mem, bare, raw_mode).out_values.reshape(-1).astype(np.int64)

    # the taps, as the sequencer plays them: (oy, ox, c) row-major, then (ky, kx)
    rows, cols = g.rows(), g.cols()                               # (oh, kh), (ow, kw)
    oy, ox, ch, ky, kx = np.meshgrid(np.arange(g.oh), np.arange(g.ow), np.arange(g.oc), np.arange(g.kh),
                                     np.arange(g.kw), indexing="ij")
    y, x = rows[oy, ky], cols[ox, kx]
    real = (y >= 0) & (y < g.ih) & (x >= 0) & (x < g.iw)
    vals = c.box[np.clip(y, 0, g.ih - 1), np.clip(x, 0, g.iw - 1), ch]
    bits = c.in_dtype.bits
    garbage_hi = rng.integers(0, 1 << 32, vals.size).reshape(vals.shape) & ~((1 << bits) - 1) & ALL_ONES
    tap_bits = np.where(real, (vals & ((1 << bits) - 1)) | garbage_hi, rng.integers(0, 1 << 32, vals.shape))
    last = (ky == g.kh - 1) & (kx == g.kw - 1)
    mult = np.resize(c.out.multipliers, g.oc)[ch]
    shift = np.resize(c.out.shifts, g.oc)[ch]
    if not c.out.rescale or c.mode == PoolMode.AVG:             # not read: garbage
        mult = rng.integers(-(1 << 31), 1 << 31, vals.shape)
        shift = rng.integers(0, 64, vals.shape)
    # record and tag matter on the last tap only: garbage on the others
    mult = np.where(last, mult, rng.integers(-(1 << 31), 1 << 31, vals.shape))
    shift = np.where(last, shift, rng.integers(0, 64, vals.shape))
    window = (oy * g.ow + ox) * g.oc + ch
    c.fields = {"value": tap_bits.reshape(-1), "pad": (~real).astype(np.int64).reshape(-1),
                "last": last.astype(np.int64).reshape(-1), "multiplier": mult.reshape(-1),
                "shift": shift.reshape(-1), "window": window.reshape(-1)}
    c.count = real.sum(axis=(3, 4)).reshape(-1)
    c.padded = (~real).any(axis=(3, 4)).reshape(-1)
    return c


# ---------------------------------------------------------------------------------------------
# Random commands

def _draw(rng, dt: DType, n: int, extremes: float = 0.25) -> np.ndarray:
    v = rng.integers(dt.min, dt.max, n, endpoint=True)
    pick = rng.random(n) < extremes
    v[pick] = rng.choice([dt.min, dt.min + 1, -1, 0, 1, dt.max - 1, dt.max], pick.sum())
    return v


def random_geometry(rng, max_taps: int = 900) -> Geometry:
    while True:
        r = rng.random()
        if r < 0.15:        # a REDUCE-like column: KERNEL_H = R, KERNEL_W = 1
            kh, kw, sh, sw = int(rng.integers(2, 40)), 1, 1, 1
        else:
            kh, kw = (int(v) for v in rng.integers(1, 6, 2))
            sh, sw = (int(v) for v in rng.integers(1, 4, 2))
        pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
        pb, pr = int(rng.integers(0, kh)), int(rng.integers(0, kw))
        ih = int(rng.integers(1, 8)) if r >= 0.15 else kh - pt - pb if kh - pt - pb > 0 else kh
        iw = int(rng.integers(1, 8))
        oh = (ih + pt + pb - kh) // sh + 1
        ow = (iw + pl + pr - kw) // sw + 1
        oc = int(rng.integers(1, 7))
        g = Geometry(kh, kw, sh, sw, pt, pl, ih, iw, oh, ow, oc)
        if oh >= 1 and ow >= 1 and g.taps <= max_taps:
            return g


def random_command(rng, mem: Memories, label: str, *, mode: int | None = None) -> PoolCommand:
    while True:
        m = PoolMode(int(rng.choice(MODES)) if mode is None else mode)
        if m == PoolMode.AVG:
            in_dt = DType(int(rng.choice([DType.INT8, DType.INT16])))
            out_dt = in_dt if rng.random() < 0.8 else DType(int(rng.choice([DType.INT8, DType.INT16])))
        else:
            in_dt = DType(int(rng.choice(IN_DTYPES)))
            out_dt = DType.INT32
        g = random_geometry(rng)
        box = _draw(rng, in_dt, g.ih * g.iw * g.oc).reshape(g.ih, g.iw, g.oc)
        r = rng.random()
        zp = 0 if r < 0.4 else int(rng.integers(-128, 128)) if r < 0.8 else int(rng.integers(-(1 << 31), 1 << 31)) \
            if r < 0.9 else int(rng.choice([-128, 127]))
        c = PoolCommand(label, int(m), in_dt, zp, g, box, OutStage(), out_dt)
        if m == PoolMode.AVG:
            lo, hi = (-128, 127) if out_dt == DType.INT8 else (-32768, 32767)
            c.out.zp = int(rng.choice([0, lo, hi, int(rng.integers(lo, hi + 1))])) if out_dt == DType.INT8 \
                else int(rng.choice([0, 0, 0, int(rng.integers(-300, 300))]))
        try:
            finish(c, mem, rng)
        except GoldenModelError:          # a window without a real tap: draw again
            continue
        if m == PoolMode.AVG:
            o = random_out_stage(rng, c.expected, c.windows, rescale=False, records=g.oc)
            o.zp, o.ofm_dtype = c.out.zp, out_dt
        else:
            o = random_out_stage(rng, c.expected, c.windows, records=g.oc)
            out_dt = OUT_KINDS[o.kind][1] if o.rescale else DType.INT32
            o.ofm_dtype = out_dt
        c.out, c.out_dtype = o, out_dt
        return finish(c, mem, rng)


# ---------------------------------------------------------------------------------------------
# AVG windows for the divider

def sensitive_sums(rng, count: int, lo: int, hi: int, want: int = 4) -> list[int]:
    """Sums in [lo*count, hi*count] whose AVG result changes when reciprocal_scale's multiplier
    is one more or one less (numerics.apply_scale_32 on the golden (m, s) and on m +- 1)."""
    m, s = (int(v[0]) for v in numerics.reciprocal_scale(np.array([count])))
    cand = rng.integers(lo * count, hi * count + 1, 200_000)
    base = numerics.apply_scale_32(cand, m, s, require=False)
    up = numerics.apply_scale_32(cand, m + 1, s, require=False)
    down = numerics.apply_scale_32(cand, m - 1, s, require=False)
    out = []
    for hits in (np.unique(cand[base != up]), np.unique(cand[base != down])):
        k = min(want // 2, hits.size)
        out += [int(v) for v in rng.choice(hits, k, replace=False)] if k else []
    while len(out) < want:
        out.append(int(rng.integers(lo * count, hi * count + 1)))
    return out


def window_values(rng, total: int, count: int, lo: int, hi: int) -> np.ndarray:
    """count values in [lo, hi] summing to total (a level, then pairs moved apart)."""
    q, r = divmod(total, count)
    v = np.full(count, q, dtype=np.int64)
    v[:r] += 1
    for _ in range(count):
        i, j = rng.integers(0, count, 2)
        d = int(rng.integers(0, 2000))
        if i != j and v[i] + d <= hi and v[j] - d >= lo:
            v[i] += d
            v[j] -= d
    return rng.permutation(v)


def reciprocal_commands(rng, mem: Memories, counts) -> list[PoolCommand]:
    """Per count: one AVG command over an int16 column of `count` real taps (kernel count x 1)
    with up to four channels whose sums are rounding-sensitive, and the same window half in
    padding (kernel 2*count - 1 rows, pad_top count - 1) for odd counts."""
    out = []
    for n in counts:
        sums = sensitive_sums(rng, n, -32768, 32767, want=4 if n < 1024 else 2)
        oc = len(sums)
        box = np.stack([window_values(rng, t, n, -32768, 32767) for t in sums], axis=-1).reshape(n, 1, oc)
        geos = [Geometry(n, 1, 1, 1, 0, 0, n, 1, 1, 1, oc)]
        if n % 2 and n < 200:
            geos = [Geometry(2 * n - 1, 1, 1, 1, n - 1, 0, n, 1, 1, 1, oc)]
        elif n >= 256:      # and three padding taps before the real ones
            geos.append(Geometry(n + 3, 1, 1, 1, 3, 0, n, 1, 1, 1, oc))
        for g in geos:
            c = PoolCommand("reciprocal", int(PoolMode.AVG), DType.INT16, 0, g, box,
                            OutStage(ofm_dtype=DType.INT16), DType.INT16)
            out.append(finish(c, mem, rng))
    return out


RECIPROCAL_COUNTS = {
    "verilator": list(range(1, 71)) + [100, 127, 128, 129, 255, 256, 257, 511, 1000, 1023, 1024, 1025, 2047,
                                        2048, 2049, 4095, 4096, 4097],
    "icarus": list(range(1, 41)) + [64, 65, 100, 127, 128, 129, 255, 256, 257, 1025],
}


def corner_commands(rng, mem: Memories) -> list[PoolCommand]:
    out = []

    def cmd(mode, in_dt, zp, g, box, o: OutStage | None = None, out_dt=DType.INT32):
        c = PoolCommand("corners", int(mode), in_dt, zp, g, np.asarray(box).reshape(g.ih, g.iw, g.oc),
                        o or OutStage(ofm_dtype=out_dt), out_dt)
        out.append(finish(c, mem, rng))

    # every mode on every input type at its extremes, 3x3 windows with padding on all sides
    for in_dt in IN_DTYPES:
        ext = np.array([in_dt.min, in_dt.min + 1, -1, 0, 1, in_dt.max - 1, in_dt.max, in_dt.max, in_dt.min])
        g = Geometry(3, 3, 1, 1, 1, 1, 3, 3, 3, 3, 4)
        box = np.stack([ext, ext[::-1], np.full(9, in_dt.max), np.full(9, in_dt.min)], axis=-1)
        for mode in MODES:
            if mode == PoolMode.AVG and in_dt == DType.INT32:
                continue
            for zp in ((0, in_dt.min, in_dt.max) if mode in (PoolMode.SUM, PoolMode.AVG) else (0,)):
                od = in_dt if mode == PoolMode.AVG else DType.INT32
                if mode == PoolMode.AVG and in_dt == DType.INT16:
                    zp = 0
                cmd(mode, in_dt, zp, g, box, out_dt=od)
    # SUM wrapping past int32 both ways (int32 extremes, 5 taps)
    g = Geometry(5, 1, 1, 1, 0, 0, 5, 1, 1, 1, 3)
    box = np.stack([np.full(5, I32[1]), np.full(5, I32[0]), np.array([I32[1], I32[1], I32[0], 5, -7])], axis=-1)
    cmd(PoolMode.SUM, DType.INT32, 0, g, box)
    cmd(PoolMode.SUM, DType.INT32, I32[0], g, box)
    # AVG saturating: int8 windows with extreme output zero points, int16 out of int8 range
    for ozp in (-128, 127):
        g = Geometry(2, 2, 1, 1, 1, 1, 2, 2, 3, 3, 2)
        box = np.stack([np.full(4, 127), np.full(4, -128)], axis=-1)
        cmd(PoolMode.AVG, DType.INT8, -128, g, box, OutStage(zp=ozp, ofm_dtype=DType.INT8), DType.INT8)
        cmd(PoolMode.AVG, DType.INT8, 127, g, box, OutStage(zp=ozp, ofm_dtype=DType.INT8), DType.INT8)
    g = Geometry(2, 2, 2, 2, 0, 0, 2, 2, 1, 1, 2)
    cmd(PoolMode.AVG, DType.INT16, 0, g, np.stack([np.full(4, 32767), np.full(4, -32768)], axis=-1),
        OutStage(ofm_dtype=DType.INT8), DType.INT8)
    # windows with a single real tap in a corner of a large padded kernel (count 1, padding 24)
    g = Geometry(5, 5, 4, 4, 4, 4, 1, 1, 1, 1, 3)
    for mode in MODES:
        cmd(mode, DType.INT16, 0, g, np.array([-32768, 32767, -5]),
            out_dt=DType.INT16 if mode == PoolMode.AVG else DType.INT32)
    # long windows (REDUCE-like columns of 100, 300 and 1100 taps) for MAX, MIN, SUM
    for n in (100, 300, 1100):
        g = Geometry(n, 1, 1, 1, 0, 0, n, 1, 1, 1, 1)
        box = _draw(rng, DType.INT16, n)
        for mode in (PoolMode.MAX, PoolMode.MIN, PoolMode.SUM):
            cmd(mode, DType.INT16, -7, g, box)
    # kernel 1x1 (every tap is a window: one result per clock), with a table and a rescale
    g = Geometry(1, 1, 1, 1, 0, 0, 4, 8, 4, 8, 8)
    box = _draw(rng, DType.INT8, 256)
    for mode in MODES:
        o = OutStage(lut_mode=int(LutMode.INT8), clamp=(-128, 127))
        cmd(mode, DType.INT8, 0, g, box, o, out_dt=DType.INT8)
    o = OutStage(rescale=True, scale32=True, double_round=True, kind=0, zp=-3,
                 multipliers=rng.integers(1 << 30, 1 << 31, 8), shifts=rng.integers(30, 40, 8), ofm_dtype=DType.INT8)
    cmd(PoolMode.MAX, DType.INT8, 0, g, box, o, out_dt=DType.INT8)
    o = OutStage(rescale=True, scale32=False, kind=2, multipliers=rng.integers(1 << 14, 1 << 15, 8),
                 shifts=rng.integers(10, 20, 8), lut_mode=int(LutMode.INT16), ofm_dtype=DType.INT32)
    cmd(PoolMode.SUM, DType.INT8, 5, g, box, o)
    return out


# ---------------------------------------------------------------------------------------------
# Runs

def make_run(c: PoolCommand, tag0: int = 0, **kw) -> VectorRun:
    fields = dict(c.fields)
    window = fields.pop("window")
    tags = tag0 + np.arange(c.windows)
    fields["tag"] = tag0 + window
    return VectorRun(inputs={"i": fields}, n_out={"o": c.windows},
                     expected={"o": {"result": c.expected, "tag": tags}},
                     static={"u_cfg": unit_config(c.regs, c.mode)}, label=f"{c.label}:{tag0}", **kw)


@dataclass
class Suite:
    name: str
    runs: list[VectorRun]
    commands: list[PoolCommand]


def _suite(name: str, rng, commands_fn, **kw) -> Suite:
    mem = Memories(NPU)
    runs = [table_run(rng, mem, f"{name}:tables")]
    commands = commands_fn(mem)
    tag = 0
    for c in commands:
        runs.append(make_run(c, tag, **kw))
        tag += c.windows
    return Suite(name, runs, commands)


def suites(seed: int, simulator: str = "verilator", n_random: int = 120) -> list[Suite]:
    rng = seeds.rng(seed)
    out = [
        _suite("random", rng, lambda mem: [random_command(rng, mem, "random") for _ in range(n_random)]),
        _suite("corners", rng, lambda mem: corner_commands(rng, mem)),
        _suite("reciprocal", rng, lambda mem: reciprocal_commands(rng, mem, RECIPROCAL_COUNTS[simulator])),
    ]
    rng_bp = seeds.rng(seed + 1)
    out.append(_suite("backpressure", rng_bp,
                      lambda mem: [random_command(rng_bp, mem, "backpressure") for _ in range(max(8, n_random // 4))],
                      valid_pattern=0x9D2C5681, ready_pattern=0xB6E3D1A5))
    return out


def mutation_suites(seed: int) -> list[Suite]:
    """A smaller set for the mutants (run on Icarus): random commands, every other corner
    command without the long windows, AVG windows of 2..24 and a few larger counts."""
    rng = seeds.rng(seed)
    return [_suite("random", rng, lambda mem: [random_command(rng, mem, "random") for _ in range(24)]),
            _suite("corners", rng, lambda mem: [c for c in corner_commands(rng, mem) if c.geo.kh < 100][::2]),
            _suite("reciprocal", rng, lambda mem: reciprocal_commands(rng, mem, list(range(2, 25)) + [100, 129]))]


# ---------------------------------------------------------------------------------------------
# Coverage

SIDES = ("none", "low", "high")
COUNT_BINS = {"1": (1, 1), "2": (2, 2), "3": (3, 3), "4..8": (4, 8), "9..63": (9, 63), "64..255": (64, 255),
              "256..1024": (256, 1024), "> 1024": (1025, 1 << 30)}


def coverage_sample(c: PoolCommand) -> dict:
    """Per window: classifications computed with the golden functions."""
    n = c.windows
    r = Registers(c.regs)
    sat = np.zeros(n, np.int64)
    sensitive = np.zeros(n, np.int64)
    if not _SCRATCH:
        _SCRATCH.append(Memories(NPU))
    mem = _SCRATCH[0]
    if c.mode == PoolMode.AVG:
        # AVG's scaling without its final clip, and with the multiplier one off either way
        m, s = numerics.reciprocal_scale(c.count)
        m = m.astype(np.int64)
        base = numerics.apply_scale_32(c.raw, m, s, require=False)
        unclipped = numerics.apply_add_s(base, r.ofm_zp, DType.INT32, require=False)
        sat = np.where(unclipped < c.out_dtype.min, 1, np.where(unclipped > c.out_dtype.max, 2, 0))
        up = numerics.apply_scale_32(c.raw, m + 1, s, require=False)
        down = numerics.apply_scale_32(c.raw, m - 1, s, require=False)
        sensitive = ((base != up) | (base != down)).astype(np.int64)
    elif c.out.rescale:
        value = c.raw
        ch = np.arange(n) % c.geo.oc
        mult, shift = np.resize(c.out.multipliers, c.geo.oc)[ch], np.resize(c.out.shifts, c.geo.oc)[ch]
        wide_regs = {**c.regs, Reg.RESCALE_DTYPE: int(DType.INT32), Reg.CLAMP_MIN: I32[0] & ALL_ONES,
                     Reg.CLAMP_MAX: I32[1], Reg.LUT_MODE: 0,
                     Reg.OUT_MODE: c.regs[Reg.OUT_MODE] & ~int(OutMode.UNSIGNED_OUT)}
        wide, _ = apply_output_stage(mem, wide_regs, value, mult, shift, unit="POOL")
        _, odt, uns = OUT_KINDS[c.out.kind]
        lo, hi = (0, odt.umax) if uns else (odt.min, odt.max)
        sat = np.where(wide < lo, 1, np.where(wide > hi, 2, 0))
    return {
        "mode": np.full(n, c.mode), "count": c.count, "padded": c.padded.astype(np.int64),
        "in_dtype": np.full(n, int(c.in_dtype)), "zp": np.full(n, int(c.zp != 0)), "sat": sat,
        "out_rescale": np.full(n, int(c.out.rescale and c.mode != PoolMode.AVG)),
        "lut": np.full(n, c.out.lut_mode), "sensitive": sensitive,
        "kernel_1x1": np.full(n, int(c.geo.kh * c.geo.kw == 1)),
    }


_SCRATCH: list = []


def coverage_model() -> CoverageModel:
    mode_bins = {m.name: int(m) for m in MODES}
    return CoverageModel("pool_unit", [
        CoverPoint.values("mode", "mode", mode_bins),
        CoverPoint.ranges("real taps", "count", COUNT_BINS),
        CoverPoint.values("padding", "padded", {"no padding taps": 0, "padding taps": 1}),
        CoverPoint.values("saturation", "sat", {s: i for i, s in enumerate(SIDES)}),
        CoverPoint.values("input type", "in_dtype", {d.name.lower(): int(d) for d in IN_DTYPES}),
        CoverPoint.values("input zero point", "zp", {"zero": 0, "non-zero": 1}),
        CoverPoint.values("output rescale", "out_rescale", {"off": 0, "on": 1}),
        CoverPoint.values("table", "lut", {"off": 0, "int8": 1, "int16": 2}),
        CoverPoint.values("AVG rounding decided by the reciprocal's last bit", "sensitive", {"yes": 1}),
        CoverPoint.values("kernel", "kernel_1x1", {"1x1 (a result per tap)": 1, "larger": 0}),
    ], crosses=[
        Cross("mode x real taps", ["mode", "real taps"]),
        Cross("mode x padding", ["mode", "padding"]),
        Cross("mode x saturation", ["mode", "saturation"]),
        Cross("mode x input type", ["mode", "input type"], ignore=lambda c: c == ("AVG", "int32")),
        Cross("real taps x padding", ["real taps", "padding"]),
        Cross("mode x input zero point", ["mode", "input zero point"]),
    ])


# ---------------------------------------------------------------------------------------------
# The bench, mutations, lint

SPEC = UnitSpec("pool_bench", _unit, params=(("entries", ENTRIES),), depth=DEPTH,
                phases=(("w",), ("i",)), unit_name="pool_unit")


def bench() -> UnitBench:
    return UnitBench.shared(SPEC)


# Faults injected into the generated Verilog (hw/pool_unit.py names the signals they edit).
MUTATIONS = (
    Mutation("padding_counted", "padding taps count towards AVG's divisor",
             r"(assign \\\$\d+\s*= run_count) \+ tap_real;", r"\1 + 1'h1;"),
    Mutation("padding_in_max", "MAX takes padding taps (their garbage values) into the maximum",
             r"assign window_max = \\\$\d+\s*\? tap_read : run_max;",
             "assign window_max = $signed(tap_read) > $signed(run_max) ? tap_read : run_max;"),
    Mutation("reciprocal_k_off_by_one", "reciprocal_scale's k from the count instead of count - 1",
             r"(assign \\\$\d+\s*= w_count) - 1'h1;", r"\1;"),
    Mutation("reciprocal_dividend_off_by_one", "the divider divides 1 << 30 instead of (1 << 30) + 1",
             r"recip_rem_25, 1'h1 \}", "recip_rem_25, 1'h0 }", count=3),
    Mutation("sum_zero_point_ignored", "SUM/AVG add x instead of x - IFM_ZP",
             r"\$signed\(tap_read\) - \$signed\(cfg\[\d+:\d+\]\)", "$signed(tap_read)"),
    Mutation("window_sum_not_reset", "a window's sum starts from the previous window's",
             r"(if \(i__payload\[\d+\]\) begin\n\s*\\\$\d+\s*= )32'd0;", r"\1run_sum + sum_term[31:0];"),
    Mutation("avg_double_round", "AVG's apply_scale_32 uses double rounding",
             r"(\[3:0\] = )4'h3;", r"\g<1>4'h7;"),
)

# Only the output stage's waivers (sim/vectors/eltwise.py).
LINT_WAIVERS: tuple[LintWaiver, ...] = OUTPUT_STAGE_WAIVERS

BENCHMARK_SIZES = {"verilator": DEPTH, "icarus": 4096, "amaranth": 512}     # taps at most


def benchmark_runs(simulator: str, seed: int = 7) -> list[VectorRun]:
    """A table run, then one AVG_POOL2D command: 3x3 windows, stride 1, padding 1, int8."""
    rng = seeds.rng(seed)
    mem = Memories(NPU)
    tables = table_run(rng, mem, "setup")
    side = int(np.sqrt(BENCHMARK_SIZES[simulator] // (8 * 9)))     # 8 channels, 9 taps a window
    g = Geometry(3, 3, 1, 1, 1, 1, side, side, side, side, 8)
    box = _draw(rng, DType.INT8, side * side * 8).reshape(side, side, 8)
    c = PoolCommand("benchmark", int(PoolMode.AVG), DType.INT8, -3, g, box,
                    OutStage(zp=2, ofm_dtype=DType.INT8), DType.INT8)
    run = make_run(finish(c, mem, rng))
    run.label = "benchmark"
    return [tables, run]


# ---------------------------------------------------------------------------------------------
# The unit contract (sim/verification/contract.py)

SEED = 20240615


def _amaranth_check() -> None:
    s = suites(SEED, "icarus", n_random=6)
    runs = s[0].runs[:5] + s[-1].runs[:2]
    assert_results_match(bench().run_amaranth(runs), runs)


CONTRACT = UnitContract(
    unit="pool_unit", mutations=MUTATIONS,
    mutant_runs=lambda: [r for s in mutation_suites(SEED) for r in s.runs],
    run=lambda simulator, runs, mutation=None: bench().run(simulator, runs, mutation=mutation),
    lint=lambda: lint_unit(bench(), LINT_WAIVERS),
    amaranth=_amaranth_check,
)
