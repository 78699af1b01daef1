"""Stimulus, expected results, coverage and mutations for the MAC-array unit bench (hw/mac_array.py).

A *program* is what the bench plays through sim/verification/gateware/mac_harness.py: an ordered list of operations for
its `op` stream (weight rows and vectors), accumulator values preloaded by backdoor before the run
(UnitBench.run's extras), and the accumulator addresses read back afterwards (`rd` stream).
`expected_accumulators()` replays a program on the golden arithmetic (firmware_model.golden.mac_unit:
`mac_block_sums` for the products of a vector with each weight row, `accumulate` for the int48
accumulator lanes); the bench side only keeps track of which bytes each weight row holds and which
accumulator each vector goes to.

Suites (`suites()`): random (int8 and int16 blocks mixed), int16 only, corners (every operand
and zero point at its extremes, accumulators preloaded next to the int48 limits so that
accumulation wraps both ways, back-to-back vectors on one accumulator, a row reloaded mid-block,
`first` after accumulation), back-pressure (gaps in the operations, stalls on the read-back) and
throughput (one block, N vectors, D reads at full speed). Random programs mix the corner cases in
as well. The unit is built at the default NPU's geometry (mac.rows x mac.cols, acc_depth words).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim import seeds
from firmware_model.arch.config import ACC_BITS
from firmware_model.golden.mac_unit import accumulate, mac_block_sums
from firmware_model.arch.config import load_config
from firmware_model.tosa_ops.dtypes import DType
from sim.verification.gateware.mac_harness import OP_VECTOR, OP_WEIGHT_ROW, PHASES
from sim.verification.coverage import CoverageModel, CoverPoint, Cross
from sim.verification.contract import UnitContract
from sim.verification.unit_bench import (GENERATOR_WAIVERS, LintWaiver, Mutation, UnitBench, UnitRunResults, UnitSpec,
                                          VectorRun, lint_verilog)

CONFIG = "default"
_CFG = load_config(CONFIG)
GEOMETRY = (_CFG.mac_rows, _CFG.mac_cols, _CFG.acc_depth)      # rows, cols, accumulator words
SMALL = (4, 4, 64)                                             # the tiny NPU's: mutation builds
ACC_MIN, ACC_MAX = -(1 << (ACC_BITS - 1)), (1 << (ACC_BITS - 1)) - 1
ZP_EXTREMES = (-128, 127, -256, 255)    # TOSA's int8 range ends, then the array's own (signed 9 bits)
ALL_ONES = 0xFFFFFFFF
BENCH_TOP = "mac_array_bench"
ACC_MEM_PATH = "unit.mac.acc_mem"       # the accumulator array below the harness top


@dataclass
class MacProgram:
    rows: int
    cols: int
    depth: int
    kind: list[int] = field(default_factory=list)
    data: list[np.ndarray] = field(default_factory=list)   # cols uint8 per operation
    row: list[int] = field(default_factory=list)
    zp: list[int] = field(default_factory=list)
    int16: list[int] = field(default_factory=list)
    acc: list[int] = field(default_factory=list)
    first: list[int] = field(default_factory=list)
    preload: dict[int, np.ndarray] = field(default_factory=dict)   # acc address -> rows int64
    read_addrs: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.kind)

    def weight_row(self, r: int, data, zp: int, int16: bool) -> None:
        self._op(OP_WEIGHT_ROW, data, row=r, zp=zp, int16=int(int16))

    def vector(self, data, zp: int, int16: bool, acc: int, first: bool) -> None:
        self._op(OP_VECTOR, data, zp=zp, int16=int(int16), acc=acc, first=int(first))

    def _op(self, kind, data, *, row=0, zp=0, int16=0, acc=0, first=0) -> None:
        self.kind.append(kind)
        self.data.append(np.asarray(data, dtype=np.uint8).reshape(self.cols))
        self.row.append(row)
        self.zp.append(zp)
        self.int16.append(int16)
        self.acc.append(acc)
        self.first.append(first)

    def fields(self) -> dict[str, np.ndarray]:
        """The `op` payload fields, as sim.verification.gateware.vector_harness.PayloadCodec takes them."""
        d = np.array(self.data, dtype=np.int64).reshape(-1, self.cols)
        out = {"kind": np.array(self.kind), "row": np.array(self.row), "zp": np.array(self.zp),
               "int16": np.array(self.int16), "acc": np.array(self.acc), "first": np.array(self.first)}
        out.update({f"data.{c}": d[:, c] for c in range(self.cols)})
        return out

    def reads(self) -> np.ndarray:
        return np.arange(self.depth) if self.read_addrs is None else np.asarray(self.read_addrs)


# ---------------------------------------------------------------------------------------------
# Expected values: the golden arithmetic, replayed in program order

def vector_sums(p: MacProgram) -> np.ndarray:
    """(operations, rows) int64: each vector's sums with the weights its rows hold at that point
    (firmware_model.golden.mac_unit.mac_block_sums, one call per row per run of vectors); 0 for rows."""
    sums = np.zeros((len(p), p.rows), dtype=np.int64)
    w_bytes = np.zeros((p.rows, p.cols), dtype=np.uint8)
    w_zp = np.zeros(p.rows, dtype=np.int64)
    i, n = 0, len(p)
    while i < n:
        if p.kind[i] == OP_WEIGHT_ROW:
            w_bytes[p.row[i]], w_zp[p.row[i]] = p.data[i], p.zp[i]
            i += 1
            continue
        j = i
        while j < n and p.kind[j] == OP_VECTOR and p.int16[j] == p.int16[i] and p.zp[j] == p.zp[i]:
            j += 1
        dtype = DType.INT16 if p.int16[i] else DType.INT8
        izp = 0 if p.int16[i] else p.zp[i]      # int16 vectors carry no zero point: x.zp is ignored
        x = np.array(p.data[i:j], dtype=np.uint8)
        for r in range(p.rows):
            sums[i:j, r] = mac_block_sums(x, w_bytes[r:r + 1], ifm_dtype=dtype, input_zp=izp,
                                          weight_zp=int(w_zp[r]))[:, 0]
        i = j
    return sums


def accumulator_history(p: MacProgram) -> tuple[np.ndarray, np.ndarray]:
    """(before, after): each vector's accumulator before and after it, (operations, rows) int64,
    and the final accumulators (depth, rows); firmware_model.golden.mac_unit.accumulate per vector."""
    acc = np.zeros((p.depth, p.rows), dtype=np.int64)
    for a, v in p.preload.items():
        acc[a] = v
    sums = vector_sums(p)
    before = np.zeros((len(p), p.rows), dtype=np.int64)
    for k in range(len(p)):
        if p.kind[k] == OP_VECTOR:
            a = p.acc[k]
            before[k] = 0 if p.first[k] else acc[a]
            acc[a] = accumulate(before[k], sums[k])
    return before, acc


def expected_accumulators(p: MacProgram) -> np.ndarray:
    """Every accumulator after the program, (depth, rows) int64."""
    return accumulator_history(p)[1]


# ---------------------------------------------------------------------------------------------
# Programs

def _zp(rng) -> int:
    return int(rng.choice((0, 0, 0) + ZP_EXTREMES)) if rng.integers(0, 2) else int(rng.integers(-256, 256))


def _operand(rng, cols: int, int16: bool) -> np.ndarray:
    """One word: uniform bytes, or every element at its type's minimum or maximum."""
    pick = rng.integers(0, 10)
    if pick < 2:
        if int16:
            return np.full(cols // 2, -(1 << 15) if pick == 0 else (1 << 15) - 1, "<i2").view(np.uint8).copy()
        return np.full(cols, 0x80 if pick == 0 else 0x7F, np.uint8)
    return rng.integers(0, 256, cols, dtype=np.uint8)


def _preload_near_limits(p: MacProgram, rng, n: int) -> None:
    for a in rng.choice(p.depth, size=min(p.depth, n), replace=False):
        p.preload[int(a)] = np.where(rng.integers(0, 2, p.rows) == 1, ACC_MAX - rng.integers(0, 1 << 12, p.rows),
                                     ACC_MIN + rng.integers(0, 1 << 12, p.rows)).astype(np.int64)


def random_program(geometry, rng: np.random.Generator, *, steps: int, max_vectors: int = 24,
                   int16_share: float = 1 / 3, preload: int = 4) -> MacProgram:
    """`steps` weight blocks, each followed by vectors (int8 or int16 per block) to random
    accumulators, with corner cases mixed in (see the module docstring)."""
    rows, cols, depth = geometry
    p = MacProgram(rows, cols, depth)
    _preload_near_limits(p, rng, preload)
    touched = set(p.preload)
    for _ in range(steps):
        int16 = bool(rng.random() < int16_share)
        wzp = _zp(rng)
        for r in range(rows):
            p.weight_row(r, _operand(rng, cols, False), wzp, int16)
        izp = _zp(rng)
        for v in range(int(rng.integers(1, max_vectors + 1))):
            if v and rng.integers(0, 12) == 0:            # one row reloaded mid-block, its own zp
                p.weight_row(int(rng.integers(0, rows)), _operand(rng, cols, False), _zp(rng), int16)
            if p.preload and rng.integers(0, 5) == 0:
                a = int(rng.choice(sorted(p.preload)))
            elif touched and rng.integers(0, 5) == 0:
                a = int(rng.choice(sorted(touched)))
            else:
                a = int(rng.integers(0, depth))
            first = a not in touched or (a not in p.preload and rng.integers(0, 6) == 0)
            for _ in range(int(rng.choice([1, 1, 1, 2, 3]))):     # repeats: one accumulator back to back
                p.vector(_operand(rng, cols, int16), izp, int16, a, first)
                first = False
            touched.add(a)
    order = rng.permutation(depth)
    p.read_addrs = np.concatenate([order, order[:min(4, depth)]])     # every accumulator, a few twice
    return p


def corner_program(geometry, rng: np.random.Generator) -> MacProgram:
    """Every operand extreme against every weight extreme and zero-point extreme, in both modes;
    accumulation across the int48 limits both ways; back-to-back vectors on one accumulator;
    `first` after accumulation; a row reloaded mid-block."""
    rows, cols, depth = geometry
    p = MacProgram(rows, cols, depth)
    lo8, hi8 = np.full(cols, 0x80, np.uint8), np.full(cols, 0x7F, np.uint8)
    lo16 = np.full(cols // 2, -(1 << 15), "<i2").view(np.uint8).copy()
    hi16 = np.full(cols // 2, (1 << 15) - 1, "<i2").view(np.uint8).copy()
    a = 0
    for int16 in (False, True):
        xs = (lo16, hi16) if int16 else (lo8, hi8)
        for wdata in (lo8, hi8):
            for wzp in (0,) + ZP_EXTREMES:
                for r in range(rows):
                    p.weight_row(r, wdata, wzp, int16)
                for izp in ((0,) if int16 else (0,) + ZP_EXTREMES):
                    for x in xs:
                        p.vector(x, izp if not int16 else 255, int16, a % depth, True)
                        a += 1
    # Accumulation across the int48 limits: the largest sums onto accumulators at the limits.
    big = depth - 4
    p.preload[big] = np.full(rows, ACC_MAX, np.int64)
    p.preload[big + 1] = np.full(rows, ACC_MIN, np.int64)
    p.preload[big + 2] = np.full(rows, ACC_MAX - 5, np.int64)
    for r in range(rows):
        p.weight_row(r, lo8, 255, True)                  # weight - zp = -383
    for k in range(3):
        p.vector(lo16, 0, True, big, False)               # -32768 * -383 > 0: past ACC_MAX
        p.vector(hi16, 0, True, big + 1, False)           # 32767 * -383 < 0: past ACC_MIN
        p.vector(lo16, 0, True, big + 2, False)
    # Back to back on one accumulator (the read of the write one clock before), then `first`.
    for r in range(rows):
        p.weight_row(r, rng.integers(0, 256, cols, dtype=np.uint8), _zp(rng), False)
    for k in range(6):
        p.vector(_operand(rng, cols, False), -3, False, big + 3, k == 0)
    p.vector(_operand(rng, cols, False), -3, False, big + 3, True)
    p.vector(_operand(rng, cols, False), -3, False, big + 3, False)
    # One row reloaded between two vectors on the same accumulator.
    p.vector(_operand(rng, cols, False), 7, False, 1, True)
    p.weight_row(rows - 1, hi8, -256, False)
    p.vector(_operand(rng, cols, False), 7, False, 1, False)
    p.read_addrs = np.concatenate([np.arange(depth), [big, big, 1]])
    return p


def throughput_program(geometry, rng, n: int, d: int) -> MacProgram:
    """One weight block, `n` vectors to distinct accumulators, `d` reads: at full speed the run
    takes rows + n + 1 + d + 1 clocks (one clock to change phase, one for the last read)."""
    rows, cols, depth = geometry
    p = MacProgram(rows, cols, depth)
    for r in range(rows):
        p.weight_row(r, rng.integers(0, 256, cols, dtype=np.uint8), 3, False)
    for k in range(n):
        p.vector(rng.integers(0, 256, cols, dtype=np.uint8), -5, False, k % depth, True)
    p.read_addrs = np.arange(d) % depth
    return p


# ---------------------------------------------------------------------------------------------
# Runs

def unit_spec(geometry=GEOMETRY, stim_depth: int = 16384) -> UnitSpec:
    from sim.verification.gateware.mac_harness import MacArrayHarnessUnit

    rows, cols, depth = geometry
    return UnitSpec(name=BENCH_TOP, factory=lambda: MacArrayHarnessUnit(rows, cols, depth),
                    params=(("rows", rows), ("cols", cols), ("depth", depth)), depth=stim_depth,
                    out_depth=max(depth + 16, 64), phases=tuple(tuple(ph) for ph in PHASES),
                    unit_name="mac_array_unit")


SPEC = unit_spec()
def bench(geometry=GEOMETRY) -> UnitBench:
    return UnitBench.shared(unit_spec(geometry))


def packed_accumulator(values) -> int:
    """One accumulator word (rows int48 lanes, lane 0 in the low bits) as the SRAM holds it."""
    word = 0
    for r, v in enumerate(np.asarray(values, dtype=np.int64)):
        word |= (int(v) & ((1 << ACC_BITS) - 1)) << (ACC_BITS * r)
    return word


@dataclass
class MacRun:
    run: VectorRun
    extra: dict          # UnitBench.run extras: the accumulator image before the run
    program: MacProgram


def make_run(label: str, p: MacProgram, *, valid_pattern: int = ALL_ONES, ready_pattern: int = ALL_ONES) -> MacRun:
    reads = p.reads()
    exp = expected_accumulators(p)[reads]
    run = VectorRun(inputs={"op": p.fields(), "rd": {"": reads}}, n_out={"acc": len(reads)},
                    expected={"acc": {str(r): exp[:, r] for r in range(p.rows)}},
                    valid_pattern=valid_pattern, ready_pattern=ready_pattern, label=label)
    # Every accumulator is written before the run (the preload, zero elsewhere): runs in one
    # simulator process do not see each other's accumulators.
    image = [(a, packed_accumulator(p.preload[a]) if a in p.preload else 0) for a in range(p.depth)]
    return MacRun(run, {"backdoor": {ACC_MEM_PATH: image}}, p)


THROUGHPUT = (200, 40)      # vectors, reads


def suites(seed: int, geometry=GEOMETRY, scale: float = 1.0) -> list[MacRun]:
    rng = seeds.rng(seed)
    st = lambda n: max(2, int(n * scale))  # noqa: E731
    return [
        make_run("random", random_program(geometry, rng, steps=st(80))),
        make_run("int16", random_program(geometry, rng, steps=st(30), int16_share=1.0)),
        make_run("corners", corner_program(geometry, rng)),
        make_run("backpressure", random_program(geometry, rng, steps=st(30)),
                 valid_pattern=0x5A3C96E1, ready_pattern=0x6DB6DB6D),
        make_run("throughput", throughput_program(geometry, rng, *THROUGHPUT)),
    ]


def run_suites(simulator: str, runs: list[MacRun], geometry=GEOMETRY, mutation: Mutation | None = None
               ) -> UnitRunResults:
    return bench(geometry).run(simulator, [r.run for r in runs], mutation=mutation,
                               extras=[r.extra for r in runs])


# ---------------------------------------------------------------------------------------------
# Coverage: one transaction per operation and per accumulator read back

KIND_READ = 2


def coverage_model() -> CoverageModel:
    zp_bins = {"zero": 0, "int8 extreme": [-128, 127], "array limit": [-256, 255]}
    is_vec = lambda s: s["kind"] == OP_VECTOR  # noqa: E731
    is_row = lambda s: s["kind"] == OP_WEIGHT_ROW  # noqa: E731
    return CoverageModel("mac_array", [
        CoverPoint.values("operation", "kind", {"weight row": OP_WEIGHT_ROW, "vector": OP_VECTOR,
                                                "accumulator read": KIND_READ}),
        CoverPoint("mode", {"int8": lambda s: is_vec(s) & (s["int16"] == 0),
                            "int16": lambda s: is_vec(s) & (s["int16"] == 1)}),
        CoverPoint("accumulate", {"first (overwrite)": lambda s: is_vec(s) & (s["first"] == 1),
                                  "accumulate": lambda s: is_vec(s) & (s["first"] == 0)}),
        CoverPoint("input_zp", {k: (lambda v: lambda s: is_vec(s) & (s["int16"] == 0) & np.isin(s["zp"], v))(v)
                                for k, v in zp_bins.items()}
                   | {"other": lambda s: is_vec(s) & (s["int16"] == 0) & ~np.isin(s["zp"], [0, *ZP_EXTREMES]),
                      "int16: ignored, non-zero": lambda s: is_vec(s) & (s["int16"] == 1) & (s["zp"] != 0)}),
        CoverPoint("weight_zp", {k: (lambda v: lambda s: is_row(s) & np.isin(s["zp"], v))(v)
                                 for k, v in zp_bins.items()}
                   | {"other": lambda s: is_row(s) & ~np.isin(s["zp"], [0, *ZP_EXTREMES])}),
        CoverPoint.values("operand", "extreme", {"all lanes at the minimum": 1, "all lanes at the maximum": 2}),
        CoverPoint("sequence", {"same accumulator back to back": lambda s: s["b2b"] == 1,
                                "vector after a row reloaded mid-block": lambda s: s["reload"] == 1}),
        CoverPoint("accumulator", {"negative": lambda s: (s["kind"] == KIND_READ) & (s["sign"] < 0),
                                   "positive": lambda s: (s["kind"] == KIND_READ) & (s["sign"] > 0),
                                   "wrapped past +2^47": lambda s: s["wrap"] == 1,
                                   "wrapped past -2^47": lambda s: s["wrap"] == -1}),
    ], crosses=[
        Cross("mode x accumulate", ["mode", "accumulate"]),
        Cross("mode x operand", ["mode", "operand"]),
        Cross("mode x sequence", ["mode", "sequence"]),
    ])


def coverage_sample(p: MacProgram) -> dict:
    """Transactions: the program's operations, then its read-back accumulators (golden values)."""
    n = len(p)
    kind = np.array(p.kind, dtype=np.int64)
    data = np.array(p.data, dtype=np.uint8).reshape(n, p.cols)
    i16 = data.view("<i2") if p.cols % 2 == 0 else None
    int16 = np.array(p.int16)
    ext = np.zeros(n, np.int64)
    as_int8 = (kind == OP_WEIGHT_ROW) | (int16 == 0)
    ext[as_int8 & np.all(data == 0x80, axis=1)] = 1
    ext[as_int8 & np.all(data == 0x7F, axis=1)] = 2
    ext[~as_int8 & np.all(i16 == -(1 << 15), axis=1)] = 1
    ext[~as_int8 & np.all(i16 == (1 << 15) - 1, axis=1)] = 2
    accs = np.array(p.acc)
    b2b = np.zeros(n, np.int64)
    b2b[1:] = (kind[1:] == OP_VECTOR) & (kind[:-1] == OP_VECTOR) & (accs[1:] == accs[:-1])
    # A vector right after a row reloaded between two vectors (it uses the new row).
    reload = np.zeros(n, np.int64)
    reload[2:] = (kind[2:] == OP_VECTOR) & (kind[1:-1] == OP_WEIGHT_ROW) & (kind[:-2] == OP_VECTOR)
    # Wraps: a vector whose golden accumulation crossed an int48 limit.
    before, final = accumulator_history(p)
    sums = vector_sums(p)
    exact = before + sums
    wrap = np.where((kind == OP_VECTOR)[:, None] & (exact > ACC_MAX), 1,
                    np.where((kind == OP_VECTOR)[:, None] & (exact < ACC_MIN), -1, 0))
    wrap = np.where((wrap == 1).any(axis=1), 1, np.where((wrap == -1).any(axis=1), -1, 0))
    reads = p.reads()
    m = len(reads)
    vals = final[reads]
    sign = np.where((vals < 0).any(axis=1), -1, np.where((vals > 0).any(axis=1), 1, 0))
    z = np.zeros(m, np.int64)
    # An int16 vector's mode bit is its own; a weight row counts as neither mode.
    return {"kind": np.concatenate([kind, np.full(m, KIND_READ)]),
            "int16": np.concatenate([int16, z]), "first": np.concatenate([np.array(p.first), z]),
            "zp": np.concatenate([np.array(p.zp), z]), "extreme": np.concatenate([ext, z]),
            "b2b": np.concatenate([b2b, z]), "reload": np.concatenate([reload, z]),
            "wrap": np.concatenate([wrap, z]), "sign": np.concatenate([np.zeros(n, np.int64), sign])}


# ---------------------------------------------------------------------------------------------
# Mutations (at the SMALL geometry: the counts are its rows and cols) and lint waivers
#
# The patterns match logic lines of the generated Verilog, not alias wires (docs/verification.md).

MUTATIONS = (
    Mutation("acc_bit_stuck", "accumulator write data: lane 0 bit 20 stuck at 1",
             r"(acc_mem\[.*?\] <= )(\{[^;]*\});", r"\1\2 | 48'h000000100000;"),
    Mutation("input_zp_dropped", "the input zero point is not subtracted (every int8 lane)",
             r"(\$signed\(x__payload\[\d+:\d+\]\)) - \$signed\(x__payload\[\d+:\d+\]\)", r"\1",
             count=SMALL[1]),
    Mutation("weight_zp_dropped", "the weight zero point is not subtracted (every weight)",
             r" - \$signed\(w__payload\[\d+:\d+\]\)", "", count=SMALL[0] * SMALL[1]),
    Mutation("int16_low_byte_signed", "int16 mode reads element 0's low byte as signed",
             r"(assign x_0 = \S+ \? )\{ 2'h0, (x__payload\[7:0\]) \}", r"\1{ {2{x__payload[7]}}, \2 }"),
    Mutation("int16_high_byte_shift", "int16 mode: row 0's high-byte tree shifted by 7, not 8",
             r"(assign \\\$\d+\s*= \{ (?:odd_0\[31\], )+)odd_0, 8'h00 \};", r"\1odd_0[31], odd_0, 7'h00 };"),
    Mutation("first_ignored", "`first` does not restart the accumulator (every lane)",
             r"s1_first \? 48'h0+ : ", "", count=SMALL[0]),
)

LINT_WAIVERS = (
    LintWaiver("UNUSEDSIGNAL", "*'rd_data[*]'*",
               "Amaranth emits one alias wire per element of the rd_data array view (an output port) "
               "for waveforms; the port is driven from the packed vector (as the generator waiver "
               "for struct fields a.b)."),
    LintWaiver("UNUSEDSIGNAL", "*'acc_wr__data'*",
               "The accumulator write port's data is a concatenation of the lanes' sums; Yosys writes "
               "that concatenation straight into the memory's always block and keeps the port wire "
               "unread."),
)


# ---------------------------------------------------------------------------------------------
# Benchmark vectors (sim.benchmarks.units): random int8/int16 programs at full speed, no preload

BENCHMARK_STEPS = {"verilator": 500, "icarus": 60, "amaranth": 6}


def benchmark_runs(simulator: str, seed: int = 7) -> list[VectorRun]:
    rng = seeds.rng(seed)
    p = random_program(GEOMETRY, rng, steps=BENCHMARK_STEPS[simulator], preload=0)
    p.read_addrs = np.arange(GEOMETRY[2])
    return [make_run("benchmark", p).run]


def area_component():
    """The MAC array alone (without sim/verification/gateware/mac_harness.py's adapter), for sim.benchmarks.units' area figure."""
    from hw.mac_array import MacArray

    return MacArray(*GEOMETRY)


# ---------------------------------------------------------------------------------------------
# amaranth.sim: the Python design, driven directly

def simulate(geometry, p: MacProgram, rng) -> np.ndarray:
    """Run a program on MacArray in amaranth.sim (random idle clocks between beats); the
    accumulators read back at p.reads()."""
    from amaranth.sim import Simulator

    from hw.mac_array import MacArray

    rows, cols, depth = geometry
    dut = MacArray(rows, cols, depth)
    got: list = []

    async def tb(ctx):
        for a in range(depth):
            ctx.set(dut.acc_mem.data[a], packed_accumulator(p.preload[a]) if a in p.preload else 0)
        for i in range(len(p)):
            beat, other = (dut.x, dut.w) if p.kind[i] == OP_VECTOR else (dut.w, dut.x)
            payload = {"data": [int(b) for b in p.data[i]], "zp": p.zp[i], "int16": p.int16[i]}
            payload.update({"acc": p.acc[i], "first": p.first[i]} if beat is dut.x else {"row": p.row[i]})
            ctx.set(other.valid, 0)
            ctx.set(beat.payload, payload)
            ctx.set(beat.valid, 1)
            await ctx.tick()
            if rng.integers(0, 8) == 0:
                ctx.set(beat.valid, 0)
                await ctx.tick()
        ctx.set(dut.x.valid, 0)
        ctx.set(dut.w.valid, 0)
        for a in p.reads():
            ctx.set(dut.rd_addr, int(a))
            await ctx.tick()
            v = ctx.get(dut.rd_data)
            got.append([int(v[r]) for r in range(rows)])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return np.array(got, dtype=np.int64)


AMARANTH_GEOMETRIES = ((4, 4, 64), (8, 8, 32), (3, 2, 16), (1, 16, 8))


def _amaranth_check() -> None:
    """Random and corner programs at several geometries, with idle clocks between beats."""
    for geometry in AMARANTH_GEOMETRIES:
        rng = seeds.rng(sum(geometry))
        for p in (random_program(geometry, rng, steps=8), corner_program(geometry, rng)):
            got = simulate(geometry, p, rng)
            want = expected_accumulators(p)[p.reads()]
            assert np.array_equal(got, want), f"{geometry}: first difference at read {np.argwhere(got != want)[0]}"


def _lint():
    from amaranth.back import verilog

    from hw.mac_array import MacArray

    text = verilog.convert(MacArray(*GEOMETRY), name="mac_array", emit_src=False)
    return lint_verilog(text, "mac_array", GENERATOR_WAIVERS + LINT_WAIVERS)


# ---------------------------------------------------------------------------------------------
# The unit contract (sim/verification/contract.py): mutants at the tiny NPU's geometry

SEED = 20240613

CONTRACT = UnitContract(
    unit="mac_array", mutations=MUTATIONS,
    mutant_runs=lambda: suites(SEED + 1, geometry=SMALL, scale=0.15),
    run=lambda simulator, runs, mutation=None: run_suites(simulator, runs, geometry=SMALL, mutation=mutation),
    lint=_lint,
    amaranth=_amaranth_check,
)
