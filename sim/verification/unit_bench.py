"""Unit-level benches: one datapath unit in the vector harness, on amaranth.sim, Verilator or Icarus.

A unit is described by a `UnitSpec` (how to construct it, and the harness geometry). `UnitBench`
then

- builds its harnessed design for a simulator once per process (`built()`; sim.rtl.build caches
  the compiled model across processes too), optionally with a *mutation* applied to the generated
  Verilog (`Mutation`: a named text edit, built under its own hash);
- runs a list of `VectorRun`s in one simulator process (`run()`): for each run the cocotb bench
  (sim/verification/vector_bench.py) loads the stimulus memories by backdoor, pulses start and
  waits once for done, then reads the response memories back. Expected results, when given, are
  compared word for word inside the bench (the cocotb test fails on a difference) and again here;
- runs the same runs on amaranth.sim (`run_amaranth()`), for fast tests of the Python design;
- lints the unit's own Verilog with Verilator (`lint_unit()`, `lint_verilog()`), with waivers
  that each carry their justification into the Verilator configuration file.

Stimulus and results are dictionaries of numpy arrays keyed by payload field name; the harness's
`PayloadCodec` packs and unpacks them. Expected values are computed by the caller from the
project's golden primitives (firmware_model.tosa_ops.numerics and friends), never here.
docs/verification.md describes the whole flow.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from firmware_model.errors import NpuBenchError
from sim.paths import BUILD_ROOT
from sim.rtl.build import BenchResult, BuiltRtl, RtlDesign, build, run_bench
from sim.rtl.toolchain import ensure_simulator_env

BENCH_MODULE = "sim.verification.vector_bench"
ALL_ONES = 0xFFFFFFFF


class UnitBenchError(NpuBenchError):
    """A unit bench could not run (bad stimulus, a stale mutation, a simulator failure)."""


# ---------------------------------------------------------------------------------------------
# Describing a unit and its runs

@dataclass(frozen=True)
class UnitSpec:
    name: str                           # the harnessed design's Verilog top (e.g. "rescale_bench")
    factory: Callable[[], object]       # a fresh unit component
    params: tuple = ()                  # what distinguishes builds (unit parameters)
    depth: int = 4096                   # stimulus words per input stream
    out_depth: int | None = None        # response words per output stream (default: depth)
    phases: tuple | None = None         # input streams in play order, e.g. (("w",), ("i",))
    unit_name: str = "unit"             # the unit's own Verilog module name when linted alone

    def harness(self, verilog_memories: bool):
        from sim.verification.gateware.vector_harness import VectorHarness

        return VectorHarness(self.factory(), depth=self.depth, out_depth=self.out_depth,
                             phases=[list(p) for p in self.phases] if self.phases else None,
                             verilog_memories=verilog_memories)


def assert_mutant_caught(results: "UnitRunResults", mutation: "Mutation") -> None:
    """A mutation test's verdict: the bench failed on the mutant and found differing results."""
    caught = sum(len(v) for r in results.runs for v in r.mismatches.values())
    assert not results.ok and not results.bench.ok, f"{mutation.name}: {mutation.description} went unnoticed"
    assert caught > 0, f"{mutation.name}: the bench failed without a differing result"


@dataclass
class VectorRun:
    """One start/done run: stimulus per input stream, result counts, optional expected results."""
    inputs: dict[str, dict[str, object]]                 # stream -> field -> array (or scalar)
    n_out: dict[str, int]                                # output stream -> results to capture
    expected: dict[str, dict[str, object]] | None = None  # output stream -> field -> array
    static: dict[str, int] = field(default_factory=dict)  # u_<port> -> value (set before start)
    valid_pattern: int = ALL_ONES
    ready_pattern: int = ALL_ONES
    label: str = ""
    timeout_cycles: int | None = None


@dataclass
class RunResult:
    label: str
    outputs: dict[str, dict[str, np.ndarray]]   # stream -> field -> values as captured
    words: dict[str, list[int]]                 # raw response words
    mismatches: dict[str, list[int]]            # stream -> indices differing from expected
    cycles: int
    first_out: int
    run_seconds: float      # wall time from start to done (the free-running part)
    load_seconds: float
    read_seconds: float
    n_in: int

    @property
    def ok(self) -> bool:
        return not any(self.mismatches.values())


@dataclass
class UnitRunResults:
    simulator: str
    runs: list[RunResult]
    bench: BenchResult | None
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs) and (self.bench is None or self.bench.ok)

    def by_label(self, label: str) -> RunResult:
        found = [r for r in self.runs if r.label == label]
        if len(found) != 1:
            # two runs under one label would let a test check the wrong one
            raise KeyError(f"{len(found)} runs labelled {label!r}")
        return found[0]


# ---------------------------------------------------------------------------------------------
# Mutations of the generated Verilog

class MutationError(UnitBenchError):
    """A mutation's pattern no longer matches the generated Verilog as it expects."""


@dataclass(frozen=True)
class Mutation:
    """A named fault: replace `pattern` (a regular expression, MULTILINE) by `replacement` in the
    generated Verilog. `count` is how many matches the pattern must have: if the RTL changes so
    that it matches differently, applying it fails loudly instead of silently testing nothing."""
    name: str
    description: str
    pattern: str
    replacement: str
    count: int = 1

    def apply(self, text: str) -> str:
        found = len(re.findall(self.pattern, text, flags=re.MULTILINE))
        if found != self.count:
            raise MutationError(f"mutation {self.name!r}: pattern {self.pattern!r} matches {found} "
                                f"time(s) in the generated Verilog, expected {self.count}")
        out = re.sub(self.pattern, self.replacement, text, flags=re.MULTILINE)
        if out == text:
            raise MutationError(f"mutation {self.name!r} leaves the Verilog unchanged")
        return out


_VERILOG_CACHE: dict = {}


def _harness_verilog(spec: UnitSpec) -> str:
    key = (spec.name, spec.params, spec.depth, spec.out_depth, spec.phases)
    if key not in _VERILOG_CACHE:
        from amaranth.back import verilog

        from sim.verification.gateware.vector_harness import VECTOR_MEM_VERILOG

        text = verilog.convert(spec.harness(verilog_memories=True), name=spec.name, emit_src=False)
        _VERILOG_CACHE[key] = text + VECTOR_MEM_VERILOG
    return _VERILOG_CACHE[key]


@dataclass(frozen=True)
class UnitDesign(RtlDesign):
    """The harnessed unit as an sim.rtl.build design; a mutation changes the text and so the hash."""
    spec: UnitSpec | None = None
    mutation: Mutation | None = None

    def verilog_text(self) -> str:
        text = _harness_verilog(self.spec)
        return self.mutation.apply(text) if self.mutation else text


# ---------------------------------------------------------------------------------------------
# The bench

class UnitBench:
    _shared: dict = {}

    @classmethod
    def shared(cls, spec: UnitSpec) -> "UnitBench":
        """The process's one bench for this spec (its builds are memoised on the bench, so every
        test module and benchmark of a unit reuses them)."""
        key = (spec.name, spec.params, spec.depth, spec.out_depth, spec.phases)
        if key not in cls._shared:
            cls._shared[key] = cls(spec)
        return cls._shared[key]

    def __init__(self, spec: UnitSpec):
        self.spec = spec
        h = spec.harness(verilog_memories=False)
        self.codecs = h.codecs
        self.layout = h.describe()
        _never_elaborated(h, h.unit, *(m.memory for m in (*h.stim.values(), *h.resp.values())))
        self._built: dict = {}

    # ---- building ----
    def design(self, mutation: Mutation | None = None) -> UnitDesign:
        params = self.spec.params + ((("mutation", mutation.name),) if mutation else ())
        return UnitDesign(name=self.spec.name, elaborate=lambda: self.spec.harness(True), params=params,
                          spec=self.spec, mutation=mutation)

    def built(self, simulator: str, mutation: Mutation | None = None) -> BuiltRtl:
        """The compiled harness for `simulator`, built at most once per process."""
        key = (simulator, mutation)
        if key not in self._built:
            self._built[key] = build(self.design(mutation), simulator)
        return self._built[key]

    # ---- stimulus ----
    def _pack_run(self, run: VectorRun) -> dict:
        lay = self.layout
        words = {}
        for name, values in run.inputs.items():
            if name not in lay["inputs"]:
                raise UnitBenchError(f"{self.spec.name}: no input stream {name!r}")
            w = self.codecs[name].pack(values)
            if len(w) > lay["depth"]:
                raise UnitBenchError(f"{self.spec.name}: {len(w)} payloads for stream {name!r} exceed "
                                     f"the harness depth {lay['depth']}")
            words[name] = w
        for name in lay["inputs"]:
            words.setdefault(name, [])
        for name, n in run.n_out.items():
            if name not in lay["outputs"]:
                raise UnitBenchError(f"{self.spec.name}: no output stream {name!r}")
            if n > lay["out_depth"]:
                raise UnitBenchError(f"{self.spec.name}: {n} results exceed the response depth {lay['out_depth']}")
        expected = None
        if run.expected is not None:
            expected = {n: self.codecs[n].pack(v, n=run.n_out[n]) for n, v in run.expected.items()}
        if not run.valid_pattern or not run.ready_pattern:
            raise UnitBenchError("valid_pattern and ready_pattern must be non-zero")
        n_total = sum(len(w) for w in words.values()) + sum(run.n_out.values())
        timeout = run.timeout_cycles or 40 * n_total + 2000
        return {"label": run.label, "inputs": words, "n_out": dict(run.n_out), "expected": expected,
                "static": dict(run.static), "valid_pattern": run.valid_pattern,
                "ready_pattern": run.ready_pattern, "timeout_cycles": timeout}

    def _pack_runs(self, runs: list[VectorRun]) -> list[dict]:
        """Pack every run; a run whose `inputs` is the very object of the run before reuses its
        words (and the bench skips reloading the memories)."""
        packed = []
        for i, r in enumerate(runs):
            p = self._pack_run(r)
            if i and r.inputs is runs[i - 1].inputs:
                p["inputs"] = packed[-1]["inputs"]
            packed.append(p)
        return packed

    def _result(self, packed: dict, raw: dict) -> RunResult:
        outputs = {n: self.codecs[n].unpack(w) for n, w in raw["words"].items()}
        mismatches = {}
        if packed["expected"] is not None:
            for n, exp in packed["expected"].items():
                act = raw["words"].get(n, [])
                mismatches[n] = [i for i, (a, e) in enumerate(zip(act, exp)) if a != e]
                if len(act) != len(exp):
                    mismatches[n].append(min(len(act), len(exp)))
        return RunResult(packed["label"], outputs, raw["words"], mismatches, raw["cycles"], raw["first_out"],
                         raw["run_seconds"], raw["load_seconds"], raw["read_seconds"],
                         sum(len(w) for w in packed["inputs"].values()))

    # ---- running on a simulator ----
    def run(self, simulator: str, runs: list[VectorRun], *, mutation: Mutation | None = None,
            job_dir: Path | None = None, keep: bool = False, extras: list[dict] | None = None) -> UnitRunResults:
        """Run vectors on a simulator. `extras`, one dict per run, asks for what happens before
        that run: {"reset_before": bool, "backdoor": {"path.below.harness": [(index, word), ...]}}
        (sim/verification/vector_bench.run_extras)."""
        built = self.built(simulator, mutation)
        packed = self._pack_runs(runs)
        if extras is not None:
            if len(extras) != len(runs):
                raise UnitBenchError(f"{len(extras)} extras for {len(runs)} runs")
            for p, e in zip(packed, extras):
                unknown = set(e) - {"reset_before", "backdoor"}
                if unknown:
                    raise UnitBenchError(f"unknown run extras {sorted(unknown)}")
                p.update(e)
        own = job_dir is None
        job_dir = Path(job_dir or tempfile.mkdtemp(prefix=f"{self.spec.name}-", dir=_jobs_root()))
        job_dir.mkdir(parents=True, exist_ok=True)
        with open(job_dir / "job.pkl", "wb") as f:
            pickle.dump({"layout": self.layout, "runs": packed}, f)
        res_file = job_dir / "results.pkl"
        if res_file.exists():
            res_file.unlink()
        t0 = time.monotonic()
        bench = run_bench(built, BENCH_MODULE, testcase="run_vectors", test_dir=job_dir,
                          extra_env={"NPU_BENCH_JOB": str(job_dir)})
        wall = time.monotonic() - t0
        if not res_file.exists():
            raise UnitBenchError(f"{self.spec.name} on {simulator}: the bench wrote no results "
                                 f"({'; '.join(bench.failures) or 'no failure recorded'}); see {job_dir}")
        with open(res_file, "rb") as f:
            raw = pickle.load(f)
        results = [self._result(p, r) for p, r in zip(packed, raw["runs"])]
        if len(results) != len(packed):
            raise UnitBenchError(f"{self.spec.name} on {simulator}: {len(results)} of {len(packed)} runs "
                                 f"finished ({'; '.join(bench.failures)[:500]}); see {job_dir}")
        out = UnitRunResults(simulator, results, bench, wall)
        if own and out.ok and not keep:
            shutil.rmtree(job_dir, ignore_errors=True)
        return out

    # ---- running on amaranth.sim ----
    def run_amaranth(self, runs: list[VectorRun]) -> UnitRunResults:
        """The same runs on Amaranth's Python simulator (small vectors: it runs ~10^4 clocks/s)."""
        from amaranth import Value
        from amaranth.sim import Simulator

        packed = self._pack_runs(runs)
        h = self.spec.harness(verilog_memories=False)
        raws: list[dict] = []

        async def testbench(ctx):
            for p in packed:
                t0 = time.perf_counter()
                for name, words in p["inputs"].items():
                    data = h.stim[name].memory.data
                    for i, w in enumerate(words):
                        ctx.set(data[i], w)
                    ctx.set(getattr(h, f"count_{name}"), len(words))
                for name, n in p["n_out"].items():
                    ctx.set(getattr(h, f"count_{name}"), n)
                for port, v in p["static"].items():
                    # a struct-typed port (data.View) takes its packed bits
                    ctx.set(Value.cast(getattr(h, port)), v)
                ctx.set(h.valid_pattern, p["valid_pattern"])
                ctx.set(h.ready_pattern, p["ready_pattern"])
                t1 = time.perf_counter()
                ctx.set(h.start, 1)
                await ctx.tick()
                ctx.set(h.start, 0)
                for _ in range(p["timeout_cycles"]):
                    if ctx.get(h.done):
                        break
                    await ctx.tick()
                else:
                    raise UnitBenchError(f"{self.spec.name} (amaranth.sim) run {p['label']!r}: no done "
                                         f"within {p['timeout_cycles']} clocks")
                t2 = time.perf_counter()
                words = {name: [ctx.get(h.resp[name].memory.data[i]) for i in range(n)]
                         for name, n in p["n_out"].items()}
                raws.append({"words": words, "cycles": ctx.get(h.cycles), "first_out": ctx.get(h.first_out),
                             "run_seconds": t2 - t1, "load_seconds": t1 - t0,
                             "read_seconds": time.perf_counter() - t2})

        sim = Simulator(h)
        sim.add_clock(1e-8)
        sim.add_testbench(testbench)
        t0 = time.monotonic()
        sim.run()
        return UnitRunResults("amaranth", [self._result(p, r) for p, r in zip(packed, raws)], None,
                              time.monotonic() - t0)

    # ---- lint ----
    def unit_verilog(self) -> str:
        from amaranth.back import verilog

        return verilog.convert(self.spec.factory(), name=self.spec.unit_name, emit_src=False)


def _never_elaborated(*objs) -> None:
    """Tell Amaranth that these components were built only to be inspected (codecs, layout)."""
    for o in objs:
        if o is not None:
            o._MustUse__silence = True


def _jobs_root() -> Path:
    root = BUILD_ROOT / "unit_jobs"
    root.mkdir(parents=True, exist_ok=True)
    return root


def assert_results_match(results: UnitRunResults, runs: list[VectorRun]) -> None:
    """Bit-exact check of every run's captured fields against its expected fields (np.array_equal,
    dtype-normalised to int64), with the first differing elements in the message."""
    assert len(results.runs) == len(runs), f"{len(results.runs)} results for {len(runs)} runs"
    for res, run in zip(results.runs, runs):
        if run.expected is None:
            continue
        for stream_name, fields in run.expected.items():
            got = res.outputs[stream_name]
            for fname, exp in fields.items():
                exp = np.broadcast_to(np.asarray(exp, dtype=np.int64), (run.n_out[stream_name],))
                act = np.asarray(got[fname], dtype=np.int64)
                if not np.array_equal(act, exp):
                    bad = np.flatnonzero(act != exp) if act.shape == exp.shape else np.arange(0)
                    detail = ", ".join(f"[{i}] got {act[i]} want {exp[i]}" for i in bad[:6])
                    raise AssertionError(
                        f"{results.simulator} run {res.label!r}: {stream_name}.{fname} differs in "
                        f"{len(bad) if act.shape == exp.shape else 'shape'} of {exp.size} results: {detail}")
    if results.bench is not None:
        assert results.bench.ok, f"{results.simulator}: cocotb bench failed: {results.bench.failures}"


def assert_runs_match(results: UnitRunResults, runs: list[VectorRun]) -> list[RunResult]:
    """assert_results_match for some of a process's runs, found by label among `results` (one
    simulator process runs every suite; each test checks its own). Returns their results."""
    picked = [results.by_label(r.label) for r in runs]
    assert_results_match(UnitRunResults(results.simulator, picked, results.bench, 0.0), runs)
    return picked


# ---------------------------------------------------------------------------------------------
# Verilator lint

@dataclass(frozen=True)
class LintWaiver:
    """A Verilator warning accepted on purpose: `rule` (e.g. UNUSEDSIGNAL), `match` (Verilator
    wildcard pattern on the message text), and `why` — the justification, written as a comment
    above the waiver in the generated configuration file."""
    rule: str
    match: str
    why: str


# Idioms of Amaranth 0.5's Verilog (through Yosys' write_verilog) that -Wall flags although the
# netlist means exactly what the Amaranth source says. They hold for every generated unit.
GENERATOR_WAIVERS = (
    LintWaiver("PROCASSINIT", "*",
               "Amaranth gives every register its reset value as a declaration initializer (the "
               "power-up value) and assigns it in an always block; reset applies the same value."),
    LintWaiver("WIDTHEXPAND", "*",
               "Yosys writes each operand at its own width and relies on Verilog's context-determined "
               "extension; Amaranth's operator semantics (explicit $signed, {1'h0, x} for mixed "
               "signedness) fix the result width, so the extension is the intended one."),
    LintWaiver("WIDTHTRUNC", "*",
               "Amaranth assignments truncate to the target width by definition; Yosys writes them as "
               "plain assignments of the wider expression."),
    LintWaiver("UNUSEDSIGNAL", "*'$*",
               "Yosys temporaries ($N) hold an operator's full-width result; Amaranth's slicing or "
               "assignment uses only the bits it needs (e.g. an adder's carry out)."),
    LintWaiver("UNUSEDSIGNAL", "*'*.*'*",
               "Amaranth emits one alias wire per field of a data.View (a struct port or register) for "
               "waveform readability; fields the logic reads come from the packed vector."),
)


# A Verilog identifier: simple (`name`, `a$1`) or escaped (`\$12`, `\i__valid$24`: a backslash, then
# anything up to white space — Amaranth escapes the port wires of sub-components so).
_NAME = r"(?:\\\S+|[A-Za-z_][\w$]*)"
_ALIAS_RE = re.compile(r"^\s*assign (" + _NAME + r")\s*= (.+);\s*$", re.MULTILINE)
_OPERAND = r"(" + _NAME + r")\s*(?:\[[\d:]+\])?"
_DECL_RE = re.compile(r"^\s*(wire|reg|input|output)\b")


def _aliased(rhs: str) -> str | None:
    """The one signal an assignment's right-hand side copies (whole, sliced, or as copies of its
    bits, e.g. a sign extension), or None for any other expression."""
    rhs = rhs.strip()
    m = re.fullmatch(_OPERAND, rhs)
    if m:
        return m.group(1)
    if rhs.startswith("{") and rhs.endswith("}"):
        parts = [re.fullmatch(_OPERAND, p.strip()) for p in rhs[1:-1].split(",")]
        names = {p.group(1) for p in parts if p}
        if all(parts) and len(names) == 1:
            return names.pop()
    return None


def alias_waivers(text: str) -> tuple[LintWaiver, ...]:
    """Waivers for named signals that Yosys keeps only as copies of a signal the logic reads.

    A named Amaranth signal driven by another signal (whole, sliced or sign-extended) comes out as
    `assign name = $N[..];` while the logic that reads it reads `$N` (a Yosys temporary, a port, a
    memory port's signal) directly, so Verilator sees `name` unused. The waiver is given only when
    that source is read by some other statement: the value is used, under another name. Each
    module of a hierarchical design (a unit built from sub-components) is examined on its own;
    escaped names (`\\i__valid$24`, Amaranth's copies of a sub-component's ports) count too.
    """
    out = []
    # module by module: a hierarchical design repeats port names (o__ready, w__valid, ...)
    modules = re.findall(r"^module\b.*?^endmodule\b", text, flags=re.MULTILINE | re.DOTALL) or [text]
    for module in modules:
        for w in _module_alias_waivers(module):
            if w not in out:
                out.append(w)
    return tuple(out)


def _module_alias_waivers(text: str) -> list[LintWaiver]:
    lines = text.splitlines()
    ports = set(re.findall(r"\b(?:input|output)\b(?:\s+(?:wire|reg))?(?:\s*\[[^\]]*\])?\s+(" + _NAME + ")", text))
    out = []
    for m in _ALIAS_RE.finditer(text):
        name, src = m.group(1), _aliased(m.group(2))
        if src is None or name in ports:
            continue
        token = re.compile(r"(?<![\w$\\])" + re.escape(src) + r"(?![\w$])")
        target = re.compile(r"^\s*(assign\s+)?" + re.escape(src) + r"\s*(\[[^\]]*\])?\s*<?=")
        used = any(token.search(line) and not _DECL_RE.match(line) and not target.match(line)
                   and line.strip() != m.group(0).strip() for line in lines)
        if used:
            shown = name.lstrip("\\")           # Verilator prints escaped names without the backslash
            out.append(LintWaiver("UNUSEDSIGNAL", f"*: '{shown}'*",
                                  f"'{shown}' is Yosys' copy of {src}, which the logic reads instead"))
    return out


@dataclass
class LintReport:
    top: str
    warnings: list[str]             # un-waived warnings and errors (one line each)
    waived: dict[str, int]          # rule -> warnings the waivers accepted
    waivers: tuple                  # the waivers in force
    vlt: Path
    returncode: int

    @property
    def clean(self) -> bool:
        return not self.warnings and self.returncode == 0


_WARN_RE = re.compile(r"^%(Warning|Error)-?([A-Z0-9_]*):\s*(.*)$")


def _verilator_warnings(args: list[str], cwd: Path) -> tuple[list[tuple[str, str]], int]:
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", *args], cwd=cwd,
                          capture_output=True, text=True)
    found = []
    for line in (proc.stdout + proc.stderr).splitlines():
        m = _WARN_RE.match(line)
        if m and not m.group(3).startswith("Exiting due to"):
            found.append((m.group(2) or m.group(1).upper(), line.strip()))
    return found, proc.returncode


def lint_verilog(text: str, top: str, waivers=GENERATOR_WAIVERS) -> LintReport:
    """`verilator --lint-only -Wall` on `text` (top module `top`) with `waivers`."""
    ensure_simulator_env("verilator")
    digest = hashlib.sha256((text + repr(waivers)).encode()).hexdigest()[:12]
    d = BUILD_ROOT / "lint" / f"{top}-{digest}"
    d.mkdir(parents=True, exist_ok=True)
    src = d / f"{top}.v"            # file named after the module (DECLFILENAME)
    src.write_text(text)
    vlt = d / "waivers.vlt"
    lines = ["`verilator_config", f"// Lint waivers for {top} (written by sim/verification/unit_bench.py)."]
    for w in tuple(waivers) + alias_waivers(text):
        lines += [f"// {w.rule}: {w.why}", f'lint_off -rule {w.rule} -file "*" -match "{w.match}"']
    vlt.write_text("\n".join(lines) + "\n")
    everything, _ = _verilator_warnings(["--top-module", top, src.name], d)
    remaining, rc = _verilator_warnings(["--top-module", top, vlt.name, src.name], d)
    waived: dict[str, int] = {}
    left = {line for _, line in remaining}
    for rule, line in everything:
        if line not in left:
            waived[rule] = waived.get(rule, 0) + 1
    return LintReport(top, [line for _, line in remaining], waived, tuple(waivers), vlt, rc)


def lint_unit(bench: UnitBench, extra_waivers=()) -> LintReport:
    """Lint the unit's own Verilog (without the harness) with the generator waivers plus the
    unit's own `extra_waivers`."""
    return lint_verilog(bench.unit_verilog(), bench.spec.unit_name, GENERATOR_WAIVERS + tuple(extra_waivers))
