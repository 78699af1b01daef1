"""The MAC's vector output path: hw/vector_output_stage.py against the golden output stage, and
hw/vector_writer.py against the byte layout and clock count the cycle model states.

amaranth.sim, the Python designs driven directly. Their generated Verilog runs inside the core on
both simulators (every MAC tile of the networks and random programs is compared with golden, bytes
and done clock, by tests/sim/cosim), and the core-level mutants of the vector writer
(sim/verification/core_level_mutants.py) must be caught there.
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from compiler.npu.base import round_up
from firmware_model.arch.config import load_config
from firmware_model.arch.cycle_model import MAC_VECTOR_DRAIN, vector_write_words
from firmware_model.arch.isa import LutMode, OutMode, Reg
from firmware_model.golden.memories import Memories
from firmware_model.golden.output_stage import apply_output_stage
from firmware_model.tosa_ops.dtypes import DType
from hw.vector_output_stage import LATENCY as STAGE_LATENCY
from hw.vector_output_stage import VectorOutputStage
from hw.vector_writer import LATENCY as WRITER_LATENCY
from hw.vector_writer import VectorWriter


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_drain_is_the_paths_latency():
    """MAC_VECTOR_DRAIN: the accumulator read, the bias stage, the stage and the writer's register."""
    assert MAC_VECTOR_DRAIN == 1 + 1 + STAGE_LATENCY + WRITER_LATENCY


def _store(value: int, esize: int) -> np.ndarray:
    """An element's bytes as the writer stores them (the low `esize` bytes, little-endian)."""
    return np.frombuffer(int(value & 0xFFFFFFFF).to_bytes(4, "little"), np.uint8)[:esize]


def _drive_writer(dut, W: int, sram: np.ndarray, vectors: list[dict]) -> tuple[list, list]:
    """Feed `vectors` (side fields, esize, results) to a VectorWriter, each followed by its
    `words` - 1 idle clocks, applying every port's writes to `sram`. Returns (the writes as
    (clock, port, word address), each vector's arrival clock)."""
    writes, arrivals = [], []

    async def bench(ctx):
        clock = 0

        async def tick():
            nonlocal clock
            for k, port in enumerate((dut.sram, dut.sram2)):
                en = ctx.get(port.en)
                if en:
                    a, d = ctx.get(port.addr), ctx.get(port.data)
                    for b in range(W):
                        if en >> b & 1:
                            sram[a * W + b] = (d >> (8 * b)) & 0xFF
                    writes.append((clock, k, a))
            await ctx.tick()
            clock += 1

        for v in vectors:
            ctx.set(dut.esize, v["esize"])
            ctx.set(dut.i_valid, 1)
            for field, value in v["side"].items():
                ctx.set(getattr(dut.i.side, field), value)
            for i, x in enumerate(v["results"]):
                ctx.set(dut.i.results[i], x)
            arrivals.append(clock)
            await tick()
            ctx.set(dut.i_valid, 0)
            for _ in range(v["side"]["words"] - 1):
                await tick()
        for _ in range(2):
            await tick()

    _run(dut, bench)
    return writes, arrivals


def _writer(R: int, W: int, depth: int) -> tuple[VectorWriter, np.ndarray, np.ndarray]:
    """A VectorWriter of R lanes into an SRAM of `depth` W-byte words, that SRAM (zeros) and the
    bytes it should hold once written (a copy to fill in)."""
    sram = np.zeros(W * depth, np.uint8)
    return VectorWriter(R, W, depth), sram, sram.copy()


def _draw_pixel(rng, R: int, max_lanes: int) -> tuple[int, int, list[int]]:
    """A random pixel's element size (1, 2 or 4 bytes), lane count (1..max_lanes) and the R
    lanes' results."""
    esize = int(rng.choice([1, 2, 4]))
    lanes = int(rng.integers(1, max_lanes + 1))
    return esize, lanes, [int(v) for v in rng.integers(-(1 << 31), 1 << 31, R)]


def _expect_pixel(expect: np.ndarray, addr: int, results: list[int], first: int, lanes: int, esize: int) -> None:
    """The bytes lanes first.. first + lanes - 1 of a pixel store from `addr`."""
    for i in range(lanes):
        expect[addr + i * esize:addr + (i + 1) * esize] = _store(results[first + i], esize)


def test_vector_writer_bytes_and_clocks():
    """Random pixels (1..R lanes, int8/int16/int32, any element-aligned address) land at their bytes
    and nowhere else, one word per clock from the clock after they arrive, `vector_write_words`
    clocks each."""
    rng = np.random.default_rng(7)
    R, W, depth = 4, 4, 64
    dut, sram, expect = _writer(R, W, depth)
    vectors = []
    for _ in range(60):
        esize, lanes, values = _draw_pixel(rng, R, R)
        n = lanes * esize
        addr = int(rng.integers(0, (W * depth - n) // esize + 1)) * esize
        vectors.append({"esize": esize, "results": values,
                        "side": {"addr": addr, "nbytes": n, "words": int(vector_write_words(W, addr, n))}})
        _expect_pixel(expect, addr, values, 0, lanes, esize)
    writes, arrivals = _drive_writer(dut, W, sram, vectors)
    # each pixel's writes: the `words` clocks after its arrival, consecutive words, the first port
    assert writes == [(t + 1 + j, 0, v["side"]["addr"] // W + j) for v, t in zip(vectors, arrivals)
                      for j in range(v["side"]["words"])]
    assert np.array_equal(sram, expect)


def test_vector_writer_pixel_pairs():
    """Random pixel pairs (a row-paired block: up to R/2 lanes each, the second pixel from the upper
    half of the lanes at its own address): both land at their bytes and nowhere else, the second
    through the second write port in the same clocks, the pair taking the larger of the two
    pixels' word counts."""
    rng = np.random.default_rng(8)
    R, W, depth = 8, 4, 64
    H = R // 2
    dut, sram, expect = _writer(R, W, depth)
    vectors = []
    for _ in range(40):
        esize, lanes, values = _draw_pixel(rng, R, H)
        n = lanes * esize
        stride = round_up(int(rng.integers(n, 3 * n + 1)), esize)                  # pixels apart
        addr = int(rng.integers(0, (W * depth - n - stride) // esize + 1)) * esize
        words = max(int(vector_write_words(W, a, n)) for a in (addr, addr + stride))
        vectors.append({"esize": esize, "results": values,
                        "side": {"addr": addr, "nbytes": n, "addr2": addr + stride, "nbytes2": n, "words": words}})
        for base, first in ((addr, 0), (addr + stride, H)):
            _expect_pixel(expect, base, values, first, lanes, esize)
    writes, arrivals = _drive_writer(dut, W, sram, vectors)
    # each pair writes in its `words` clocks only, the second pixel through the second port
    clocks = sorted({t for t, _, _ in writes})
    assert clocks == [t + 1 + j for v, t in zip(vectors, arrivals) for j in range(v["side"]["words"])]
    assert any(port == 1 for _, port, _ in writes)
    assert np.array_equal(sram, expect)


def _stage_regs(rng, out_dtype: DType) -> dict[int, int]:
    rescale = bool(rng.integers(0, 4))
    scale32 = bool(rng.integers(0, 2))
    mode = (OutMode.RESCALE if rescale else 0) | (OutMode.SCALE32 if scale32 else 0) \
        | (OutMode.DOUBLE_ROUND if scale32 and rng.integers(0, 2) else 0)
    lo, hi = (out_dtype.min, out_dtype.max) if rescale else (DType.INT32.min, DType.INT32.max)
    cmin = int(rng.integers(lo, 1)) if rng.integers(0, 2) else lo
    cmax = int(rng.integers(0, hi + 1)) if rng.integers(0, 2) else hi
    return {int(Reg.OUT_MODE): int(mode), int(Reg.RESCALE_DTYPE): int(out_dtype),
            int(Reg.OFM_ZP): int(rng.integers(-20, 20)) & 0xFFFFFFFF if rescale and out_dtype != DType.INT32 else 0,
            int(Reg.CLAMP_MIN): cmin & 0xFFFFFFFF, int(Reg.CLAMP_MAX): cmax & 0xFFFFFFFF,
            int(Reg.LUT_MODE): int(LutMode.OFF), int(Reg.LUT_ADDR): 0, int(Reg.OFM_DTYPE): int(out_dtype)}


def test_vector_output_stage_equals_the_golden_stage():
    """Every lane of every vector equals apply_output_stage (no table) on that lane's value,
    multiplier and shift, LATENCY clocks after it entered; a new vector every clock."""
    rng = np.random.default_rng(11)
    cfg = load_config("tiny")
    lanes = 4
    dut = VectorOutputStage(lanes, cfg.lut_entries)
    mem = Memories(cfg)
    for case in range(12):
        out_dtype = DType(int(rng.choice([DType.INT8, DType.INT16, DType.INT32])))
        regs = _stage_regs(rng, out_dtype)
        n = 24
        values = rng.integers(-(1 << 40), 1 << 40, (n, lanes)) >> rng.integers(0, 40, (n, lanes))
        mult = rng.integers(1 << 13, 1 << 31, (n, lanes))
        shift = rng.integers(2, 63, (n, lanes))
        scale32 = bool(regs[int(Reg.OUT_MODE)] & OutMode.SCALE32)
        if not scale32:
            mult &= 0x7FFF
            shift = rng.integers(2, 48, (n, lanes))
        expect, _ = apply_output_stage(mem, regs, values, mult, shift, unit="MAC")
        got = []

        async def bench(ctx):
            c = ctx.get
            ctx.set(dut.cfg.out_mode, regs[int(Reg.OUT_MODE)])
            ctx.set(dut.cfg.rescale_dtype, regs[int(Reg.RESCALE_DTYPE)])
            zp = regs[int(Reg.OFM_ZP)]
            ctx.set(dut.cfg.output_zp, zp - (1 << 32) if zp >= 1 << 31 else zp)
            for name, reg in (("clamp_min", Reg.CLAMP_MIN), ("clamp_max", Reg.CLAMP_MAX)):
                v = regs[int(reg)]
                ctx.set(getattr(dut.cfg, name), v - (1 << 32) if v >= 1 << 31 else v)
            for t in range(n + STAGE_LATENCY + 1):
                if t < n:
                    ctx.set(dut.i_valid, 1)
                    ctx.set(dut.i.side.addr, t)
                    for ln in range(lanes):
                        ctx.set(dut.i.values[ln], int(values[t, ln]))
                        ctx.set(dut.i.multipliers[ln], int(mult[t, ln]))
                        ctx.set(dut.i.shifts[ln], int(shift[t, ln]))
                else:
                    ctx.set(dut.i_valid, 0)
                if c(dut.o_valid):
                    assert c(dut.o.side.addr) == t - STAGE_LATENCY
                    got.append([c(dut.o.results[ln]) for ln in range(lanes)])
                await ctx.tick()

        _run(dut, bench)
        assert np.array_equal(np.array(got, dtype=np.int64), expect), f"case {case}: {regs}"
