"""Stimulus, expected results, coverage and mutations for the LUT engine bench (hw/lut_engine.py).

Each run first writes tables into the LUT SRAM through the engine's write stream (harness phase
1), then plays lookups (phase 2). The test side keeps an image of the SRAM — the writes applied in
order, nothing else — and the expected result of a lookup is the golden primitive on the table
the lookup names: numerics.apply_lookup_8(entries[base : base + 256] read as int8, value) or
numerics.apply_lookup_s(entries[base : base + 513] read as int16, value, require=False) (the
hardware computes the 17-bit slope exactly where the REQUIRE "slope fits int16" fails).

Runs (`suites()`): every int8 input (256) and, on Verilator, every int16 input (65536) in one run
each; on Icarus the int16 inputs at a stride plus every index boundary; tables at odd and even
bases; random mixed int8/int16/OFF lookups over several resident tables with back-pressure;
smooth (sine, tanh) tables; tables with extreme slopes; a reload of new tables over old ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim import seeds
from firmware_model.arch.isa import LutMode
from firmware_model.arch.config import INT8_TABLE_ENTRIES, INT16_TABLE_ENTRIES, load_config
from firmware_model.tosa_ops import numerics
from sim.verification.coverage import CoverageModel, CoverPoint, Cross
from sim.verification.contract import UnitContract
from sim.verification.unit_bench import LintWaiver, Mutation, UnitBench, UnitSpec, VectorRun, assert_results_match, lint_unit

CONFIG = "default"
ENTRIES = load_config(CONFIG).lut_entries
SIZE = {int(LutMode.INT8): INT8_TABLE_ENTRIES, int(LutMode.INT16): INT16_TABLE_ENTRIES}


@dataclass
class LutImage:
    """The test's image of the LUT SRAM: 16-bit entries as the writes left them."""
    entries: np.ndarray = field(default_factory=lambda: np.zeros(ENTRIES, dtype=np.uint16))
    kinds: np.ndarray = field(default_factory=lambda: np.full(ENTRIES, -1))   # for coverage

    def write(self, addr: np.ndarray, data: np.ndarray, kind: np.ndarray) -> None:
        self.entries[np.asarray(addr)] = np.asarray(data, dtype=np.int64).astype(np.uint16)
        self.kinds[np.asarray(addr)] = kind

    def int8_table(self, base: int) -> np.ndarray:
        """An int8 table's entries are read as int16 (stored sign-extended), as the golden output
        stage (firmware_model.golden.output_stage) reads them."""
        return self.entries[base:base + INT8_TABLE_ENTRIES].view(np.int16)

    def int16_table(self, base: int) -> np.ndarray:
        return self.entries[base:base + INT16_TABLE_ENTRIES].view(np.int16)


@dataclass
class Lookups:
    value: np.ndarray
    mode: np.ndarray
    base: np.ndarray

    def __len__(self):
        return len(self.value)

    def fields(self) -> dict:
        return {"value": self.value, "mode": self.mode, "base": self.base, "tag": np.arange(len(self))}


def expected(image: LutImage, lk: Lookups) -> np.ndarray:
    out = np.zeros(len(lk), dtype=np.int64)
    for mode in np.unique(lk.mode):
        for base in np.unique(lk.base[lk.mode == mode]):
            idx = np.flatnonzero((lk.mode == mode) & (lk.base == base))
            v = lk.value[idx]
            if mode == LutMode.INT8:
                out[idx] = numerics.apply_lookup_8(image.int8_table(int(base)), v)
            elif mode == LutMode.INT16:
                out[idx] = numerics.apply_lookup_s(image.int16_table(int(base)), v, require=False)
            else:
                out[idx] = v            # OFF: the engine passes its input through
    return out


# ---------------------------------------------------------------------------------------------
# Tables and lookups

def random_table(rng, mode: int, kind: str) -> np.ndarray:
    """Entries as 16-bit patterns: int8 tables sign-extended ("sext") or with entries beyond int8
    ("wide": the engine returns the entry read as int16 whatever its table); int16 tables random ("random": extreme slopes included), smooth ("sine",
    "tanh") or at the extremes ("extreme")."""
    n = SIZE[mode]
    if mode == LutMode.INT8:
        t = rng.integers(-128, 128, n)
        t[rng.choice(n, 4, replace=False)] = [-128, 127, -128, 127]
        if kind == "wide":
            return (t & 0xFF) | (rng.integers(0, 256, n) << 8)
        return t & 0xFFFF
    x = np.linspace(-8.0, 8.0, n)
    if kind == "sine":
        t = np.round(32767 * np.sin(x))
    elif kind == "tanh":
        t = np.round(32767 * np.tanh(x / 2))
    elif kind == "extreme":
        t = rng.choice([-32768, 32767, -32767, 32766, 0], n)
    else:
        t = rng.integers(-32768, 32768, n)
        t[rng.choice(n, 4, replace=False)] = [-32768, 32767, -32768, 32767]
    return t.astype(np.int64) & 0xFFFF


TABLE_KINDS = ("sign-extended int8", "int8 with wide entries", "random int16", "smooth int16", "extreme int16")


def table_writes(tables: list[tuple[int, np.ndarray]], rng, kind: str):
    """Write-stream payloads (addr, data, kind) for (base, entries) pairs, in a random order."""
    addr = np.concatenate([base + np.arange(len(t)) for base, t in tables])
    data = np.concatenate([t for _, t in tables])
    order = rng.permutation(len(addr))
    return addr[order], data[order], np.full(len(addr), TABLE_KINDS.index(kind))


NO_WRITES = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


def _join(a, b):
    return tuple(np.concatenate([x, y]) for x, y in zip(a, b))


INT16_INPUTS = np.arange(-32768, 32768)


def index_edges() -> np.ndarray:
    """Every int16 input at an index boundary (fraction 0 and 127) and the extremes."""
    lo = np.arange(-32768, 32768, 128)
    return np.unique(np.concatenate([lo, lo + 127, lo + 1, [-32768, -1, 0, 1, 32767]]))


@dataclass
class LutRun:
    run: VectorRun
    lookups: Lookups
    image_after: LutImage
    writes: int


def make_run(label: str, image: LutImage, writes, lk: Lookups, **kw) -> LutRun:
    addr, data, kind = writes
    image.write(addr, data, kind)
    exp = expected(image, lk)
    run = VectorRun(inputs={"w": {"addr": addr, "data": data, "en": 3}, "i": lk.fields()}, n_out={"o": len(lk)},
                    expected={"o": {"result": exp, "tag": np.arange(len(lk))}}, label=label, **kw)
    snapshot = LutImage(image.entries.copy(), image.kinds.copy())
    return LutRun(run, lk, snapshot, len(addr))


# Where the tables live in the 2048-entry SRAM of the default configuration (even and odd bases).
BASE_INT16_RANDOM = 0          # 0..512, later overwritten by a tanh table
BASE_INT16_EXTREME = 515       # 515..1027 (odd)
BASE_INT8_RELOAD = 1027        # 1027..1282 (odd; the reload writes it over the ends of two tables)
BASE_INT16_SINE = 1279         # 1279..1791 (odd)
BASE_INT8 = 1792               # 1792..2047


def suites(seed: int, int16_stride: int = 1) -> list[LutRun]:
    """The runs of a full check, in order (the SRAM keeps its contents from run to run)."""
    rng = seeds.rng(seed)
    image = LutImage()
    out = []
    I8, I16, OFF = int(LutMode.INT8), int(LutMode.INT16), int(LutMode.OFF)
    full = lambda v, n: np.full(n, v)  # noqa: E731

    # 1. every int8 input
    t8 = random_table(rng, I8, "sext")
    v = np.arange(-128, 128)
    out.append(make_run("int8_exhaustive", image, table_writes([(BASE_INT8, t8)], rng, "sign-extended int8"),
                        Lookups(v, full(I8, 256), full(BASE_INT8, 256))))

    # 2. every int16 input (stride 1), or a stride plus every index edge
    t16 = random_table(rng, I16, "random")
    if int16_stride == 1:
        v, label = INT16_INPUTS, "int16_exhaustive"
    else:
        v, label = np.unique(np.concatenate([INT16_INPUTS[::int16_stride], index_edges()])), "int16_strided"
    out.append(make_run(label, image, table_writes([(BASE_INT16_RANDOM, t16)], rng, "random int16"),
                        Lookups(v, full(I16, len(v)), full(BASE_INT16_RANDOM, len(v)))))

    # 3. a smooth table at an odd base (the bank swap), every index edge
    ts = random_table(rng, I16, "sine")
    ve = index_edges()
    out.append(make_run("int16_odd_base", image, table_writes([(BASE_INT16_SINE, ts)], rng, "smooth int16"),
                        Lookups(ve, full(I16, len(ve)), full(BASE_INT16_SINE, len(ve)))))

    # 4. mixed random lookups over four resident tables (one new), then again with back-pressure
    tx = random_table(rng, I16, "extreme")
    writes = table_writes([(BASE_INT16_EXTREME, tx)], rng, "extreme int16")
    n = 4096
    mode = rng.choice([I8, I16, OFF, I16], n)
    base = np.where(mode == I8, BASE_INT8,
                    rng.choice([BASE_INT16_RANDOM, BASE_INT16_SINE, BASE_INT16_EXTREME], n))
    value = np.where(mode == I8, rng.integers(-128, 128, n), rng.integers(-32768, 32768, n))
    edge = (rng.random(n) < 0.25) & (mode != I8)
    value[edge] = rng.choice(index_edges(), edge.sum())
    # int32 inputs beyond int16 (apply_lookup_s clips them), and OFF passes any int32 through
    wide = (rng.random(n) < 0.1) & (mode != I8)
    value[wide] = rng.choice([-(1 << 31), -32769, 32768, (1 << 31) - 1, 1 << 20], wide.sum())
    lk = Lookups(value, mode, base)
    out.append(make_run("mixed_random", image, writes, lk))
    out.append(make_run("backpressure", image, NO_WRITES, lk, valid_pattern=0x9D2C5681, ready_pattern=0xB6E3D1A5))

    # 5. reload at run time: tanh over the random int16 table, an int8 table with entries beyond
    # int8 at an odd base (over the ends of the extreme and sine tables); lookups on both
    tt = random_table(rng, I16, "tanh")
    t8j = random_table(rng, I8, "wide")
    writes = table_writes([(BASE_INT16_RANDOM, tt)], rng, "smooth int16")
    writes = _join(writes, table_writes([(BASE_INT8_RELOAD, t8j)], rng, "int8 with wide entries"))
    n = 2048
    mode = rng.choice([I8, I16], n)
    base = np.where(mode == I8, BASE_INT8_RELOAD, BASE_INT16_RANDOM)
    value = np.where(mode == I8, rng.integers(-128, 128, n), rng.integers(-32768, 32768, n))
    out.append(make_run("reload", image, writes, Lookups(value, mode, base)))
    return out


# ---------------------------------------------------------------------------------------------
# Coverage

def coverage_model() -> CoverageModel:
    return CoverageModel("lut_engine", [
        CoverPoint.values("mode", "mode", {"int8": int(LutMode.INT8), "int16": int(LutMode.INT16),
                                           "off": int(LutMode.OFF)}),
        CoverPoint.values("base parity", "base_odd", {"even base": 0, "odd base": 1}),
        CoverPoint.values("int8 input", "v8", {"-128": -128, "-1": -1, "0": 0, "127": 127}),
        CoverPoint.values("int16 index", "index", {"0": 0, "255": 255, "256": 256, "511": 511}),
        CoverPoint.values("int16 fraction", "fraction", {"0": 0, "1": 1, "64": 64, "127": 127}),
        CoverPoint.values("int16 input beyond int16", "clipped", {"below -32768": -1, "above 32767": 1}),
        CoverPoint.values("slope", "slope_class", {"negative": 0, "zero": 1, "positive": 2,
                                                   "beyond int16 (REQUIRE fails)": 3}),
        CoverPoint.values("result extremes", "result_class", {"int8 table -128": 0, "int8 table 127": 1,
                                                              "int16 minimum (-32768 << 7)": 2,
                                                              "int16 maximum (32767 << 7 + ...)": 3}),
        CoverPoint.values("table content", "table_kind", {k: i for i, k in enumerate(TABLE_KINDS)}),
        CoverPoint.values("stalls", "stalled", {"full speed": 0, "back-pressure": 1}),
    ], crosses=[
        Cross("index x fraction", ["int16 index", "int16 fraction"]),
        Cross("mode x base parity", ["mode", "base parity"], ignore=lambda c: c[0] == "off"),
        Cross("slope x base parity", ["slope", "base parity"]),
    ])


def coverage_sample(r: LutRun) -> dict:
    lk, img = r.lookups, r.image_after
    i16 = lk.mode == LutMode.INT16
    i8 = lk.mode == LutMode.INT8
    v = lk.value
    vc = np.clip(v, -32768, 32767)
    index = np.where(i16, (vc + 32768) >> 7, -1)
    fraction = np.where(i16, vc & 0x7F, -1)
    ent = img.entries.view(np.int16).astype(np.int64)
    a = np.clip(lk.base + np.maximum(index, 0), 0, ENTRIES - 2)
    slope = ent[a + 1] - ent[a]
    slope_class = np.where(~i16, -1, np.where((slope < -32768) | (slope > 32767), 3,
                                              np.where(slope < 0, 0, np.where(slope == 0, 1, 2))))
    res = r.run.expected["o"]["result"]
    result_class = np.where(i8 & (res == -128), 0, np.where(i8 & (res == 127), 1,
                   np.where(i16 & (res == -32768 * 128), 2, np.where(i16 & (res >= 32767 * 128), 3, -1))))
    kind = np.where(lk.mode == LutMode.OFF, -1, img.kinds[lk.base])   # the table each lookup read
    return {"mode": lk.mode, "base_odd": lk.base & 1, "v8": np.where(i8, v, 999), "index": index,
            "fraction": fraction, "clipped": np.where(i16, np.sign(v - vc), 0), "slope_class": slope_class, "result_class": result_class,
            "table_kind": kind, "stalled": np.full(len(lk), int(r.run.valid_pattern != 0xFFFFFFFF))}


# ---------------------------------------------------------------------------------------------
# The bench, mutations, lint

def _unit():
    from hw.lut_engine import LutEngine

    return LutEngine(ENTRIES)


SPEC = UnitSpec("lut_bench", _unit, params=(("entries", ENTRIES),), depth=65536, out_depth=65536,
                phases=(("w",), ("i",)), unit_name="lut_engine")


def bench() -> UnitBench:
    return UnitBench.shared(SPEC)


MUTATIONS = (
    Mutation("interpolation_index", "the even bank reads row (a + 2) >> 1: wrong entry pair",
             r"^(\s*assign \\\$\d+\s*= \\\$\d+ \[\d+:0\]) \+ 1'h1;", r"\1 + 2'h2;"),
    Mutation("dropped_fraction", "the slope is multiplied by 0 instead of the fraction",
             r"\{ 1'h0, s1_fraction \}", "{ 1'h0, 7'h00 }"),
    Mutation("fraction_bits", "the fraction is taken one bit too high",
             r"fraction = (\\\$\d+) \[6:0\];", r"fraction = \1 [7:1];"),
    Mutation("no_int16_clip", "int16 inputs above 32767 are not clipped (they wrap)",
             r"> \$signed\(16'h7fff\);", "> $signed(32'h7fffffff);"),
    Mutation("int8_index_unflipped", "int8 index = value's bits, not value + 128",
             r"table_index = \{ 1'h0, \\\$\d+ , i__payload\[6:0\] \};", "table_index = { 1'h0, i__payload[7:0] };"),
    Mutation("bank_swap", "the bank parity is ignored: base from the wrong bank",
             r"assign base_entry = s1_odd \? odd_read : even_read;", "assign base_entry = s1_odd ? even_read : odd_read;"),
)

# The LUT engine needs no lint waivers beyond sim.verification.unit_bench's generator waivers.
LINT_WAIVERS: tuple[LintWaiver, ...] = ()


# Benchmark vectors (sim.benchmarks.units): a "setup" run writes one int16 table, then the
# "benchmark" run looks up int16 inputs at full speed.
BENCHMARK_SIZES = {"verilator": 65536, "icarus": 16384, "amaranth": 512}


def benchmark_runs(simulator: str, seed: int = 7) -> list[VectorRun]:
    rng = seeds.rng(seed)
    n = BENCHMARK_SIZES[simulator]
    image = LutImage()
    table = random_table(rng, LutMode.INT16, "random")
    none = Lookups(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    setup = make_run("setup", image, table_writes([(BASE_INT16_RANDOM, table)], rng, "random int16"), none)
    v = rng.integers(-32768, 32768, n)
    run = make_run("benchmark", image, NO_WRITES, Lookups(v, np.full(n, int(LutMode.INT16)),
                                                          np.full(n, BASE_INT16_RANDOM)))
    return [setup.run, run.run]


# ---------------------------------------------------------------------------------------------
# The unit contract (sim/verification/contract.py)

SEED = 20240612


def _amaranth_check() -> None:
    """The int8 table over all inputs, then int16 lookups with stalls, on the Python design."""
    rng = seeds.rng(SEED)
    image = LutImage()
    t8 = random_table(rng, LutMode.INT8, "sext")
    t16 = random_table(rng, LutMode.INT16, "random")
    v8 = np.arange(-128, 128)
    run8 = make_run("int8", image, table_writes([(BASE_INT8, t8)], rng, "sign-extended int8"),
                    Lookups(v8, np.full(256, int(LutMode.INT8)), np.full(256, BASE_INT8)))
    v16 = rng.choice(index_edges(), 200)
    run16 = make_run("int16", image, table_writes([(BASE_INT16_SINE, t16)], rng, "random int16"),
                     Lookups(v16, np.full(200, int(LutMode.INT16)), np.full(200, BASE_INT16_SINE)),
                     valid_pattern=0x6DB6DB6D, ready_pattern=0xA5A5F00F)
    runs = [run8.run, run16.run]
    assert_results_match(bench().run_amaranth(runs), runs)


CONTRACT = UnitContract(
    unit="lut_engine", mutations=MUTATIONS,
    mutant_runs=lambda: [s.run for s in suites(SEED, int16_stride=16)],
    run=lambda simulator, runs, mutation=None: bench().run(simulator, runs, mutation=mutation),
    lint=lambda: lint_unit(bench(), LINT_WAIVERS),
    amaranth=_amaranth_check,
)
