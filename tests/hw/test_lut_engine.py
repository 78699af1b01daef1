"""The LUT engine (hw/lut_engine.py) against the golden TABLE primitives, bit for bit.

amaranth.sim: word-wide table writes (as the core's DMA makes them: 1, 2 and 8 entries a word,
partial byte enables included) then int8 and int16 lookups at odd and even bases, through the
Python model of the design. Verilator and Icarus: the generated Verilog in the vector harness runs every
suite of sim/vectors/lut.py in one simulator process — each suite writes its tables through the
engine's write stream, then looks up its whole vector in one free-running run: the int8 table
over all 256 inputs, the int16 table over all 65536 inputs (Verilator; Icarus takes every 4th
input plus every index edge), odd table bases, mixed modes over four resident tables, stalls, a
reload of new tables. Coverage from what ran; mutations of the generated Verilog must be caught;
the unit's Verilog must lint clean.
"""

from __future__ import annotations


import numpy as np
import pytest
from amaranth.sim import Simulator

from firmware_model.arch.isa import LutMode
from firmware_model.tosa_ops.numerics import apply_lookup_8, apply_lookup_s
from hw.lut_engine import LATENCY, LutEngine
from sim.vectors import lut as lv
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240612
INT16_STRIDE = {"verilator": 1, "icarus": 4}


@pytest.mark.parametrize("word_entries", [1, 2, 8])
def test_lut_word_writes_then_lookups(word_entries):
    """The SRAM written a word per clock (random bytes, some bytes of some words left out by their
    enables and written again later, as a DMA beat narrower than a word does); then int8 and int16
    lookups from tables at even and odd bases equal apply_lookup_8 / apply_lookup_s on the
    entries written, one per clock, LATENCY clocks later."""
    rng = np.random.default_rng(100 + word_entries)
    entries, K = 1040, word_entries
    dut = LutEngine(entries, K)
    image = rng.integers(0, 256, 2 * entries, dtype=np.uint8)
    writes = []                       # (word, data, byte enables)
    for w in range(entries // K):
        en = (1 << 2 * K) - 1
        if rng.integers(0, 4) == 0:   # a partial word now, its other bytes later
            part = int(rng.integers(1, (1 << 2 * K)))
            writes.append((w, image[2 * K * w:2 * K * (w + 1)], part))
            en &= ~part & ((1 << 2 * K) - 1)
            junk = rng.integers(0, 256, 2 * K, dtype=np.uint8)   # ignored: its bytes are enabled later
            writes.insert(int(rng.integers(0, len(writes))), (w, junk, 0))
        if en:
            writes.append((w, image[2 * K * w:2 * K * (w + 1)], en))
    table = image.view("<i2").astype(np.int64)
    lookups = []                      # (value, mode, base, expected)
    for base in (0, 1, entries - 513, int(rng.integers(0, entries - 513))):
        for v in rng.integers(-128, 128, 40):
            lookups.append((int(v), LutMode.INT8, base, int(apply_lookup_8(table[base:base + 256], v))))
        for v in np.concatenate([rng.integers(-40000, 40000, 60), [-32768, 32767, -32641, 127, 128]]):
            lookups.append((int(v), LutMode.INT16, base,
                            int(apply_lookup_s(table[base:base + 513], v, require=False))))
    got = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        for w, data, en in writes:
            ctx.set(dut.w.valid, 1)
            ctx.set(dut.w.payload.addr, w)
            ctx.set(dut.w.payload.data, int.from_bytes(bytes(data), "little"))
            ctx.set(dut.w.payload.en, en)
            await ctx.tick()
        ctx.set(dut.w.valid, 0)
        for t in range(len(lookups) + LATENCY):
            if t < len(lookups):
                v, mode, base, _ = lookups[t]
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.value, v)
                ctx.set(dut.i.payload.mode, mode)
                ctx.set(dut.i.payload.base, base)
                ctx.set(dut.i.payload.tag, t)
            else:
                ctx.set(dut.i.valid, 0)
            if ctx.get(dut.o.valid):
                assert ctx.get(dut.o.payload.tag) == t - LATENCY
                got.append(ctx.get(dut.o.payload.result))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [e for *_, e in lookups]


def test_lut_word_entries_must_divide_the_sram():
    for bad in (3, 6, 16 * 1024):
        with pytest.raises(ValueError, match="entries at a time"):
            LutEngine(1040, bad)


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request):
    """(simulator, suites, results): every suite in one simulator process."""
    suites = lv.suites(SEED, int16_stride=INT16_STRIDE[request.param])
    return request.param, suites, lv.bench().run(request.param, [s.run for s in suites])


def _check(rtl, label: str):
    _, suites, results = rtl
    s = next(s for s in suites if s.run.label == label)
    return s, assert_runs_match(results, [s.run])[0]


@pytest.mark.rtl
def test_lut_int8_exhaustive(rtl):
    s, res = _check(rtl, "int8_exhaustive")
    assert np.array_equal(np.sort(s.lookups.value), np.arange(-128, 128))


@pytest.mark.rtl
def test_lut_int16_exhaustive(rtl):
    """All 65536 int16 inputs in one run on Verilator; on Icarus every 4th plus every index edge."""
    simulator, _, _ = rtl
    label = "int16_exhaustive" if INT16_STRIDE[simulator] == 1 else "int16_strided"
    s, res = _check(rtl, label)
    if simulator == "verilator":
        assert np.array_equal(s.lookups.value, np.arange(-32768, 32768))


@pytest.mark.rtl
def test_lut_int16_odd_base(rtl):
    _check(rtl, "int16_odd_base")


@pytest.mark.rtl
def test_lut_mixed_random(rtl):
    _check(rtl, "mixed_random")


@pytest.mark.rtl
def test_lut_backpressure(rtl):
    s, res = _check(rtl, "backpressure")
    assert res.cycles > len(s.lookups) + LATENCY


@pytest.mark.rtl
def test_lut_reload(rtl):
    """New tables written at run time over old ones are the ones looked up."""
    _check(rtl, "reload")


@pytest.mark.rtl
def test_lut_throughput(rtl):
    """One table write and one lookup per clock: W writes and N lookups take W + 1 + N + LATENCY
    clocks (one clock to change from the write phase to the lookup phase)."""
    _, suites, results = rtl
    for s in suites:
        res = results.by_label(s.run.label)
        if s.run.valid_pattern != 0xFFFFFFFF:
            continue
        w, n = s.writes, len(s.lookups)
        assert res.cycles == w + (1 if w else 0) + n + LATENCY, f"{s.run.label}: {res.cycles} clocks"


@pytest.mark.rtl
def test_lut_coverage(rtl):
    simulator, suites, results = rtl
    assert results.ok
    cov = lv.coverage_model()
    for s in suites:
        assert results.by_label(s.run.label).ok
        cov.sample(lv.coverage_sample(s))
    cov.save_and_check("lut_engine", simulator)
