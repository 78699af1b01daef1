"""Stimulus, expected results, coverage and mutations for the variable-SRAM unit bench
(hw/variable_sram.py).

A *program* is an ordered list of operations for sim/verification/gateware/variable_sram_harness.py's `op` stream:
READ, WRITE and START (an invocation-start pulse). `replay()` runs it on the golden rules
(firmware_model.golden.variable_sram.VariableSramModel) and gives the record the harness must produce for
each operation — read data, `refused`, then the error state and the operation's slot's written
flag after it — plus what each operation exercised (for coverage). One model is carried through
all runs of a simulator process, as the SRAM is: contents and flags persist from run to run, and
`power_on_reset()` on the model goes with a run that asks for a reset first.

Suites (`suites()`): traffic (slots laid out the way a compiler does: disjoint word-aligned
regions; legal reads and writes mixed with the corner cases: reads of slots never written,
misaligned addresses, addresses just and far past the end, slot numbers past the slot count,
invocation starts with and without a pending error, second refusals while one is pending, a read
right after a write of the same word, the SRAM's first and last words), persisted (more traffic
and starts over the same slots, in a later run), back-pressure (the same with gaps and stalls),
after-reset (a reset, then every word written before it read back — all refused — then one word
per slot written and the whole slot read — the other words read zero: the reset cleared the
contents, not just the flags) and throughput (writes then reads at full speed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from sim import seeds
from firmware_model.arch.isa import VAR_SLOTS, Status
from firmware_model.arch.config import load_config
from firmware_model.golden.variable_sram import VariableSramModel
from sim.verification.gateware.variable_sram_harness import OP_READ, OP_START, OP_WRITE
from sim.verification.coverage import CoverageModel, CoverPoint, Cross
from sim.verification.contract import UnitContract
from sim.verification.unit_bench import (GENERATOR_WAIVERS, LintWaiver, Mutation, UnitBench, UnitRunResults, UnitSpec,
                                          VectorRun, lint_verilog)

CONFIG = "default"
_CFG = load_config(CONFIG)
GEOMETRY = (_CFG.variable_words, _CFG.word_bytes, VAR_SLOTS)   # words, bytes per word, slots
SMALL = (64, 4, 8)                                             # mutation builds
MAX_SLOT_FIELD = 255
ALL_ONES = 0xFFFFFFFF
BENCH_TOP = "variable_sram_bench"
RECORD_FIELDS = ("refused", "error", "error_code", "error_slot", "written")


@dataclass
class VarProgram:
    words: int
    word_bytes: int
    slots: int
    kind: list[int] = field(default_factory=list)
    slot: list[int] = field(default_factory=list)
    addr: list[int] = field(default_factory=list)
    data: list[np.ndarray] = field(default_factory=list)
    regions: list[tuple[int, int]] | None = None   # (first word, words) per slot, when laid out

    def __len__(self) -> int:
        return len(self.kind)

    def op(self, kind: int, slot: int = 0, addr: int = 0, data=None) -> None:
        self.kind.append(kind)
        self.slot.append(slot)
        self.addr.append(addr)
        self.data.append(np.zeros(self.word_bytes, np.uint8) if data is None
                         else np.asarray(data, dtype=np.uint8).reshape(self.word_bytes))

    def fields(self) -> dict[str, np.ndarray]:
        d = np.array(self.data, dtype=np.int64).reshape(-1, self.word_bytes)
        out = {"kind": np.array(self.kind), "slot": np.array(self.slot), "addr": np.array(self.addr)}
        out.update({f"data.{b}": d[:, b] for b in range(self.word_bytes)})
        return out


def new_model(geometry) -> VariableSramModel:
    """A golden model of the geometry (words, word_bytes, slots), as after reset."""
    words, w, slots = geometry
    return VariableSramModel(SimpleNamespace(word_bytes=w, variable_sram=words * w), slots=slots)


@dataclass
class GoldenState:
    """The golden model carried through a simulator process's runs, and the bench's bookkeeping
    of which words were written since / before the last reset (for the coverage notes)."""
    model: VariableSramModel
    since_reset: set = field(default_factory=set)
    before_reset: set = field(default_factory=set)

    def reset(self) -> None:
        self.before_reset, self.since_reset = self.since_reset, set()
        self.model.power_on_reset()


# ---------------------------------------------------------------------------------------------
# Expected records: the golden rules, replayed in order

def replay(p: VarProgram, state: GoldenState) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(records, notes): the harness's record per operation, and per operation what it exercised
    (status, the error state before it, persistence cases). `state` is updated in place."""
    model = state.model
    n, W = len(p), p.word_bytes
    rec = {"data": np.zeros((n, W), np.uint8), "refused": np.zeros(n, np.int64),
           "error": np.zeros(n, np.int64), "error_code": np.zeros(n, np.int64),
           "error_slot": np.zeros(n, np.int64), "written": np.zeros(n, np.int64)}
    notes = {k: np.zeros(n, np.int64) for k in ("status", "pending", "persisted", "raw", "reset_refused",
                                                "reset_cleared")}
    written_before_start = np.zeros(model.slots, bool)     # flags as the last start found them
    pre_reset, written_since_reset = state.before_reset, state.since_reset
    for i in range(n):
        k, s, a = p.kind[i], p.slot[i], p.addr[i]
        notes["pending"][i] = model.error is not None
        if k == OP_READ:
            word, status = model.read(s, a)
            rec["data"][i] = word
            rec["refused"][i] = status != Status.OK
            notes["status"][i] = status
            if status == Status.OK and written_before_start[s]:
                notes["persisted"][i] = 1
            if i and p.kind[i - 1] == OP_WRITE and p.slot[i - 1] == s and p.addr[i - 1] == a and status == Status.OK:
                notes["raw"][i] = 1
            if status != Status.OK and a in pre_reset:
                notes["reset_refused"][i] = 1
            if status == Status.OK and a in pre_reset and a not in written_since_reset and not word.any():
                notes["reset_cleared"][i] = 1
        elif k == OP_WRITE:
            status = model.write(s, a, p.data[i])
            notes["status"][i] = status
            if status == Status.OK:
                written_since_reset.add(a)
        else:
            model.start_invocation()
            written_before_start = model.written.copy()
        rec["error"][i] = model.error is not None
        rec["error_code"][i] = int(model.error or 0)
        rec["error_slot"][i] = model.error_slot
        rec["written"][i] = model.is_written(s)
    return rec, notes


# ---------------------------------------------------------------------------------------------
# Programs

def slot_regions(words: int, slots: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(first word, words) of each slot: disjoint regions, as a compiler allocates them."""
    cuts = np.sort(rng.choice(np.arange(1, words), size=min(slots - 1, words - 1), replace=False))
    bounds = [0, *cuts.tolist(), words]
    regions = [(bounds[i], bounds[i + 1] - bounds[i]) for i in range(len(bounds) - 1)]
    while len(regions) < slots:
        regions.append(regions[-1])
    return regions


def random_program(geometry, rng: np.random.Generator, *, n: int, regions=None, start_every: int = 40,
                   error_rate: float = 0.08) -> VarProgram:
    """`n` operations over the slot layout `regions` (drawn when not given; p.regions)."""
    words, word_bytes, slots = geometry
    p = VarProgram(words, word_bytes, slots)
    regions = regions or slot_regions(words, slots, rng)
    p.regions = regions
    last_write = None
    while len(p) < n:
        r = rng.random()
        if rng.integers(0, start_every) == 0:
            p.op(OP_START, int(rng.integers(0, slots)))
            continue
        if r < error_rate:
            _error_access(p, rng)
            continue
        s = int(rng.integers(0, len(regions)))
        w0, nw = regions[s]
        w = w0 + int(rng.choice([0, nw - 1, int(rng.integers(0, nw))]))
        if r < 0.5:
            p.op(OP_WRITE, s, w * word_bytes, rng.integers(0, 256, word_bytes, dtype=np.uint8))
            last_write = (s, w)
        elif last_write is not None and rng.integers(0, 4) == 0:
            s, w = last_write
            p.op(OP_READ, s, w * word_bytes)
        else:
            p.op(OP_READ, s, w * word_bytes)
    return p


def _error_access(p: VarProgram, rng) -> None:
    words, W, slots = p.words, p.word_bytes, p.slots
    kind = OP_READ if rng.integers(0, 2) else OP_WRITE
    data = rng.integers(0, 256, W, dtype=np.uint8)
    pick = rng.integers(0, 3)
    if pick == 0 and W > 1:                 # misaligned
        p.op(kind, int(rng.integers(0, slots)), int(rng.integers(0, words)) * W + int(rng.integers(1, W)), data)
    elif pick <= 1:                         # past the end: just past, or far
        far = W * int(rng.integers(1, 1 << 20))
        p.op(kind, int(rng.integers(0, slots)), words * W + int(rng.choice([0, far])), data)
    else:                                   # a slot number past the slot count
        p.op(kind, int(rng.integers(slots, MAX_SLOT_FIELD + 1)) if slots <= MAX_SLOT_FIELD else 0, 0, data)


def after_reset_program(before: list[VarProgram], rng, regions) -> VarProgram:
    """Every word the earlier programs wrote, read (refused: no flag survives a reset); then per
    slot one word written and the whole slot read (the other words read zero)."""
    p0 = before[0]
    p = VarProgram(p0.words, p0.word_bytes, p0.slots)
    W = p.word_bytes
    seen = set()
    for q in before:
        for k, s, a in zip(q.kind, q.slot, q.addr):
            if k == OP_WRITE and 0 <= s < p.slots and a % W == 0 and a < p.words * W and (s, a) not in seen:
                seen.add((s, a))
                p.op(OP_READ, s, a)
    p.op(OP_START, 0)
    for s, (w0, nw) in enumerate(regions):
        p.op(OP_WRITE, s, (w0 + int(rng.integers(0, nw))) * W, rng.integers(1, 256, W, dtype=np.uint8))
        for k in range(nw):
            p.op(OP_READ, s, (w0 + k) * W)
    return p


def throughput_program(geometry, rng, regions, n: int) -> VarProgram:
    """`n` writes, then `n` reads of the words written (no refusals): one operation per clock."""
    words, W, slots = geometry
    p = VarProgram(words, W, slots)
    picks = []
    for _ in range(n):
        s = int(rng.integers(0, len(regions)))
        w0, nw = regions[s]
        picks.append((s, (w0 + int(rng.integers(0, nw))) * W))
        p.op(OP_WRITE, *picks[-1], rng.integers(0, 256, W, dtype=np.uint8))
    for s, a in picks:
        p.op(OP_READ, s, a)
    return p


# ---------------------------------------------------------------------------------------------
# Runs

def unit_spec(geometry=GEOMETRY, stim_depth: int = 16384) -> UnitSpec:
    from sim.verification.gateware.variable_sram_harness import VariableSramHarnessUnit

    words, w, slots = geometry
    return UnitSpec(name=BENCH_TOP, factory=lambda: VariableSramHarnessUnit(words, w, slots),
                    params=(("words", words), ("word_bytes", w), ("slots", slots)), depth=stim_depth,
                    unit_name="variable_sram_unit")


SPEC = unit_spec()
def bench(geometry=GEOMETRY) -> UnitBench:
    return UnitBench.shared(unit_spec(geometry))


@dataclass
class VarRun:
    run: VectorRun
    extra: dict                 # UnitBench.run extras: {"reset_before": bool}
    program: VarProgram
    records: dict[str, np.ndarray]
    notes: dict[str, np.ndarray]


def make_run(label: str, p: VarProgram, state: GoldenState, *, reset_before: bool = False,
             valid_pattern: int = ALL_ONES, ready_pattern: int = ALL_ONES) -> VarRun:
    """The run of `p` on the SRAM as `state` holds it (after a reset first, if asked)."""
    if reset_before:
        state.reset()
    rec, notes = replay(p, state)
    exp = {f: rec[f] for f in RECORD_FIELDS}
    exp.update({f"data.{b}": rec["data"][:, b].astype(np.int64) for b in range(p.word_bytes)})
    run = VectorRun(inputs={"op": p.fields()}, n_out={"out": len(p)}, expected={"out": exp},
                    valid_pattern=valid_pattern, ready_pattern=ready_pattern, label=label)
    return VarRun(run, {"reset_before": reset_before}, p, rec, notes)


THROUGHPUT = 256


def suites(seed: int, geometry=GEOMETRY, n: int = 2000) -> list[VarRun]:
    """The suites in run order, expected values from one golden model carried through them."""
    rng = seeds.rng(seed)
    words, W, slots = geometry
    regions = slot_regions(words, slots, rng)
    model = GoldenState(new_model(geometry))
    p1 = random_program(geometry, rng, n=n, regions=regions)
    p2 = random_program(geometry, rng, n=n // 2, regions=regions, start_every=15, error_rate=0.15)
    p3 = random_program(geometry, rng, n=n // 2, regions=regions)
    runs = [make_run("traffic", p1, model), make_run("persisted", p2, model),
            make_run("backpressure", p3, model, valid_pattern=0x5A3C96E1, ready_pattern=0x6DB6DB6D)]
    p4 = after_reset_program([p1, p2, p3], rng, regions)
    runs.append(make_run("after_reset", p4, model, reset_before=True))
    runs.append(make_run("throughput", throughput_program(geometry, rng, regions, THROUGHPUT), model))
    return runs


def run_suites(simulator: str, runs: list[VarRun], geometry=GEOMETRY, mutation: Mutation | None = None
               ) -> UnitRunResults:
    return bench(geometry).run(simulator, [r.run for r in runs], mutation=mutation,
                               extras=[r.extra for r in runs])


# ---------------------------------------------------------------------------------------------
# Coverage: one transaction per operation

OUTCOMES = {"ok": 0, "read before write": 1, "misaligned": 2, "past the end": 3, "slot past the count": 4}


def coverage_model(slots: int = GEOMETRY[2]) -> CoverageModel:
    return CoverageModel("variable_sram", [
        CoverPoint.values("operation", "kind", {"read": OP_READ, "write": OP_WRITE, "start": OP_START}),
        CoverPoint.values("outcome", "outcome", OUTCOMES),
        CoverPoint("error", {
            "first refusal": lambda s: (s["outcome"] > 0) & (s["pending"] == 0),
            "refusal while one is pending (kept)": lambda s: (s["outcome"] > 0) & (s["pending"] == 1),
            "start clears a pending error": lambda s: (s["kind"] == OP_START) & (s["pending"] == 1),
            "start without an error": lambda s: (s["kind"] == OP_START) & (s["pending"] == 0)}),
        CoverPoint("persistence", {
            "read of a slot written before the last start": lambda s: s["persisted"] == 1,
            "read right after a write of the word": lambda s: s["raw"] == 1,
            "after reset: a word written before it refused": lambda s: s["reset_refused"] == 1,
            "after reset: a word not rewritten reads zero": lambda s: s["reset_cleared"] == 1}),
        CoverPoint("address", {
            "first word": lambda s: (s["outcome"] == 0) & (s["kind"] != OP_START) & (s["word"] == 0),
            "last word": lambda s: (s["outcome"] == 0) & (s["kind"] != OP_START) & (s["word"] == s["words"] - 1)}),
        CoverPoint("slot written", {str(k): (lambda k: lambda s: (s["kind"] == OP_WRITE) & (s["outcome"] == 0)
                                             & (s["slot"] == k))(k) for k in range(slots)}),
    ], crosses=[
        # A start has no outcome of its own; a write cannot be refused for its flag.
        Cross("operation x outcome", ["operation", "outcome"],
              ignore=lambda c: c[0] == "start" and c[1] != "ok" or c == ("write", "read before write")),
    ])


def coverage_sample(r: VarRun) -> dict:
    p, notes = r.program, r.notes
    kind = np.array(p.kind)
    addr = np.array(p.addr)
    status = notes["status"]
    outcome = np.zeros(len(p), np.int64)
    bad = status == Status.ADDRESS_RANGE
    slot = np.array(p.slot)
    outcome[status == Status.VAR_READ_BEFORE_WRITE] = OUTCOMES["read before write"]
    outcome[bad & (slot >= p.slots)] = OUTCOMES["slot past the count"]
    outcome[bad & (slot < p.slots) & (addr % p.word_bytes != 0)] = OUTCOMES["misaligned"]
    outcome[bad & (slot < p.slots) & (addr % p.word_bytes == 0)] = OUTCOMES["past the end"]
    return {"kind": kind, "outcome": outcome, "pending": notes["pending"], "persisted": notes["persisted"],
            "raw": notes["raw"], "reset_refused": notes["reset_refused"], "reset_cleared": notes["reset_cleared"],
            "word": addr // p.word_bytes, "words": p.words, "slot": slot}


# ---------------------------------------------------------------------------------------------
# Mutations (logic lines of the generated Verilog, docs/verification.md) and lint waivers

MUTATIONS = (
    Mutation("written_never_sets", "a stored write does not set its slot's written flag",
             r"(\s)if \(set_written\) begin", r"\1if (1'h0) begin"),
    Mutation("start_clears_flags", "the invocation start clears the written flags",
             r"(\\\$\d+\s+= )written;", r"\1invocation_start ? 0 : written;"),
    Mutation("read_before_write_unchecked", "a read of an unwritten slot is not refused",
             r"(assign read_before_write = ).*;", r"\g<1>1'h0;"),
    Mutation("error_not_sticky", "a later refusal overwrites the first one",
             r"(assign pending = ).*;", r"\g<1>1'h0;"),
    Mutation("alignment_unchecked", "a misaligned address is accepted",
             r"(assign aligned = ).*;", r"\g<1>1'h1;"),
    Mutation("refused_data_kept", "a refused read returns the memory word instead of zero",
             r"rsp_refused \? \d+'d0 : ", ""),
    Mutation("reset_walk_skipped", "reset clears the flags but not the contents (no clearing walk)",
             r"(\\\$\d+\s+= clearing;\n(?:.*\n){5}\s+if \(rst\) begin\n\s+\\\$\d+\s+= )1'h1;", r"\g<1>1'h0;"),
)

# The variable SRAM needs no lint waivers beyond sim.verification.unit_bench's generator and alias waivers.
LINT_WAIVERS: tuple[LintWaiver, ...] = ()


# ---------------------------------------------------------------------------------------------
# Benchmark vectors (sim.benchmarks.units): a "setup" run lets the reset walk finish, then legal
# random traffic at full speed.

BENCHMARK_SIZES = {"verilator": 16000, "icarus": 4000, "amaranth": 300}


def benchmark_runs(simulator: str, seed: int = 7) -> list[VectorRun]:
    rng = seeds.rng(seed)
    model = GoldenState(new_model(GEOMETRY))
    setup = VarProgram(*GEOMETRY)       # one write: it waits for the reset walk to finish
    setup.op(OP_WRITE, 0, 0, np.zeros(GEOMETRY[1], np.uint8))
    p = random_program(GEOMETRY, rng, n=BENCHMARK_SIZES[simulator], error_rate=0.0, start_every=1000)
    return [make_run("setup", setup, model).run, make_run("benchmark", p, model).run]


def area_component():
    """The variable SRAM alone (without the harness adapter), for sim.benchmarks.units' area figure."""
    from hw.variable_sram import VariableSram

    return VariableSram(*GEOMETRY)


# ---------------------------------------------------------------------------------------------
# amaranth.sim: the Python design, driven directly

def simulate(geometry, runs: list[VarRun], rng) -> list[list[dict]]:
    """The runs in order on VariableSram in amaranth.sim (a reset first where a run asks for it),
    with random read-response stalls; one record per operation."""
    from amaranth import Signal
    from amaranth.hdl import ResetInserter
    from amaranth.sim import Simulator

    from hw.variable_sram import VariableSram

    words, W, slots = geometry
    rst = Signal()
    unit = VariableSram(words, W, slots)
    out: list[list[dict]] = []

    async def tb(ctx):
        for r in runs:
            p = r.program
            if r.extra.get("reset_before"):
                ctx.set(rst, 1)
                await ctx.tick()
                ctx.set(rst, 0)
            recs = []
            for i in range(len(p)):
                k, s = p.kind[i], p.slot[i]
                rec = {"data": [0] * W, "refused": 0}
                if k == OP_START:
                    ctx.set(unit.invocation_start, 1)
                    await ctx.tick()
                    ctx.set(unit.invocation_start, 0)
                else:
                    ctx.set(unit.req.payload, {"write": int(k == OP_WRITE), "slot": s, "addr": p.addr[i],
                                               "data": [int(b) for b in p.data[i]], "en": (1 << W) - 1})
                    ctx.set(unit.req.valid, 1)
                    await ctx.tick().until(unit.req.ready)
                    ctx.set(unit.req.valid, 0)
                    if k == OP_READ:
                        for _ in range(int(rng.integers(0, 3))):      # the response waits
                            await ctx.tick()
                        assert ctx.get(unit.rsp.valid)
                        v = ctx.get(unit.rsp.payload)
                        rec = {"data": [int(v.data[b]) for b in range(W)], "refused": int(v.refused)}
                        ctx.set(unit.rsp.ready, 1)
                        await ctx.tick()
                        ctx.set(unit.rsp.ready, 0)
                rec.update(error=ctx.get(unit.error), error_code=ctx.get(unit.error_code),
                           error_slot=ctx.get(unit.error_slot),
                           written=(ctx.get(unit.written) >> s) & 1 if s < slots else 0)
                recs.append(rec)
            out.append(recs)

    sim = Simulator(ResetInserter(rst)(unit))
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out


def check_records(got: list[dict], want: dict[str, np.ndarray], label: str) -> None:
    assert len(got) == len(want["refused"])
    for f in RECORD_FIELDS:
        g = np.array([r[f] for r in got], dtype=np.int64)
        assert np.array_equal(g, want[f].astype(np.int64)), \
            f"{label}: {f} differs first at op {np.flatnonzero(g != want[f])[0]}"
    g = np.array([r["data"] for r in got], dtype=np.uint8)
    assert np.array_equal(g, want["data"]), f"{label}: data differs first at op {np.argwhere(g != want['data'])[0]}"


AMARANTH_GEOMETRIES = (SMALL, (16, 8, 3), (8, 1, 1))


def _amaranth_check() -> None:
    for geometry in AMARANTH_GEOMETRIES:
        runs = suites(sum(geometry), geometry=geometry, n=300)
        got = simulate(geometry, runs, seeds.rng(sum(geometry)))
        for r, g in zip(runs, got):
            check_records(g, r.records, f"{geometry} {r.run.label}")


def _lint():
    from amaranth.back import verilog

    from hw.variable_sram import VariableSram

    text = verilog.convert(VariableSram(*GEOMETRY), name="variable_sram", emit_src=False)
    return lint_verilog(text, "variable_sram", GENERATOR_WAIVERS + LINT_WAIVERS)


# ---------------------------------------------------------------------------------------------
# The unit contract (sim/verification/contract.py): mutants at a small geometry

SEED = 20240614

CONTRACT = UnitContract(
    unit="variable_sram", mutations=MUTATIONS,
    mutant_runs=lambda: suites(SEED + 1, geometry=SMALL, n=300),
    run=lambda simulator, runs, mutation=None: run_suites(simulator, runs, geometry=SMALL, mutation=mutation),
    lint=_lint,
    amaranth=_amaranth_check,
)
