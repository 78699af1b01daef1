"""Building RTL for simulation, once per configuration, and running cocotb benches on it.

A design is Amaranth code plus the parameters it is elaborated with. `build()` writes its Verilog,
hashes it, and builds it with `cocotb_tools.runner` into `build/rtl/<simulator>/<name>-<hash>/`.
A build whose stamp matches is reused — across tests in a session and across sessions — so each
RTL configuration is compiled once per run at most. A file lock makes parallel test workers wait
for one build instead of racing. The cache is bounded: after each new build, `prune_builds` removes
the least recently used builds of that simulator beyond CACHE_BUILDS (a Verilator build of the
core is ~190 MB; a mutant campaign makes one per mutant, and an unbounded cache once filled the
disk), never one used in the last CACHE_MIN_AGE seconds.

`run_bench()` runs a cocotb test module on a built design and returns the parsed JUnit results.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from amaranth.back import verilog

from firmware_model.errors import NpuBenchError
from sim import seeds
from sim.paths import BUILD_ROOT, REPO_ROOT
from sim.rtl.toolchain import MAKE_OVERRIDES, ensure_simulator_env, simulator_version

TIMESCALE = ("1ns", "1ps")
# The RTL build cache's bound (prune_builds): builds kept per simulator, and how recently used a
# build must not have been for it to go (a running simulation may still be reading it).
CACHE_BUILDS = int(os.environ.get("NPU_RTL_CACHE_BUILDS", "48"))
CACHE_MIN_AGE = 3600.0


def _process_start_time() -> float:
    """When this process started (Linux: /proc), else now: a source file changed after it may
    differ from the module this process imported."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


PROCESS_STARTED = _process_start_time()
CLOCK_PERIOD_NS = 10

# Verilator: warnings stay visible in the build log but do not stop the build; lint is a
# separate, strict check (tests/test_lint.py).
VERILATOR_ARGS = ["-Wno-fatal", "-O3", "--x-assign", "fast", "--x-initial", "fast"]
# Waveforms from Verilator as FST (the runner asks for --trace, which alone writes a VCD roughly
# twenty times larger).
VERILATOR_WAVE_ARGS = ["--trace-fst", "--trace-structs"]


def verilator_args(waves: bool, extra: tuple = ()) -> list[str]:
    return VERILATOR_ARGS + list(extra) + (VERILATOR_WAVE_ARGS if waves else [])


class RtlBuildError(NpuBenchError):
    """Generating Verilog or compiling it for a simulator failed."""


class SimulatorCrash(NpuBenchError):
    """The simulator ended without its results: it crashed, was killed or exited early. Not the
    user's doing, so the command line exits 3; the message ends with the tail of the log."""

    exit_status = 3

    def __init__(self, message: str, log: Path | None = None, lines: int = 15):
        self.log = log
        tail = ""
        if log is not None and Path(log).is_file():
            text = Path(log).read_text(errors="replace").rstrip().splitlines()[-lines:]
            tail = "\n".join("    " + line for line in text)
        super().__init__(message + (f"; the last lines of {log}:\n{tail}" if tail else
                                    f" ({log} has nothing)" if log is not None else ""))


@dataclass(frozen=True)
class RtlDesign:
    """An Amaranth design to simulate: `elaborate()` returns the top component."""
    name: str                                 # also the Verilog top-level module name
    elaborate: Callable[[], object]
    params: tuple = ()                        # what distinguishes this build (config, faults...)
    verilator_extra: tuple = ()               # Verilator arguments of this design (e.g. --timing)
    # The files whose contents decide the Verilog (with `params`): when given, a build of the same
    # sources is found without generating the Verilog again (an index by their hash).
    source_files: tuple = ()
    # Verilator: True builds with --public-flat-rw (every signal visible to the bench, which keeps
    # Verilator from optimising much); False makes public only what the Verilog marks
    # (`/*verilator public_flat_rw*/`, `public_flat_rd`).
    public_all: bool = True

    def verilog_text(self) -> str:
        top = self.elaborate()
        return verilog.convert(top, name=self.name, emit_src=False)

    def source_key(self, simulator: str, waves: bool) -> str | None:
        """The index key of these sources, or None (generate the Verilog; no index read or
        written) when one of them changed after this process started: the Verilog comes from
        the modules as imported, which may no longer be the files on disk, so an index entry
        made now would file old Verilog under the new sources' hash."""
        if not self.source_files:
            return None
        h = hashlib.sha256()
        for f in sorted(str(p) for p in self.source_files):
            if os.stat(f).st_mtime > PROCESS_STARTED:
                return None
            h.update(f.encode())
            h.update(Path(f).read_bytes())
        h.update(repr((self.name, self.params, self.verilator_extra, self.public_all, simulator, waves,
                       verilator_args(waves, self.verilator_extra), TIMESCALE, MAKE_OVERRIDES)).encode())
        return h.hexdigest()[:24]


@dataclass
class BuiltRtl:
    design_name: str
    simulator: str
    build_dir: Path
    sources: list[Path]
    waves: bool
    build_seconds: float = 0.0
    reused: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def rtl_hash(self) -> str:
        """The generated Verilog's hash: names the RTL that ran, in reports and JUnit properties."""
        if "rtl_hash" not in self.meta:
            try:
                self.meta["rtl_hash"] = hashlib.sha256(self.sources[0].read_bytes()).hexdigest()[:16]
            except (OSError, IndexError):
                self.meta["rtl_hash"] = "unknown"
        return self.meta["rtl_hash"]


def build(design: RtlDesign, simulator: str, *, waves: bool = False) -> BuiltRtl:
    ensure_simulator_env(simulator)
    if waves and simulator == "verilator" and not Path("/usr/include/lz4.h").exists():
        raise RtlBuildError("Verilator writes FST waveforms, which need the lz4 headers: "
                            "run 'sudo apt-get install -y liblz4-dev' (make sim WAVES=1 does it as root)")
    version = simulator_version(simulator)
    key = design.source_key(simulator, waves)
    index = BUILD_ROOT / "rtl" / simulator / "index" / f"{design.name}-{key}-{hashlib.sha256(version.encode()).hexdigest()[:8]}.json"
    if key is not None and index.exists():
        found = Path(json.loads(index.read_text())["build_dir"])
        if (found / "built.json").exists():
            meta = json.loads((found / "built.json").read_text())
            _touch(found / "built.json")
            return BuiltRtl(design.name, simulator, found, [found / f"{design.name}.v"], waves,
                            meta.get("build_seconds", 0.0), reused=True, meta=meta)
    text = design.verilog_text()
    vargs = verilator_args(waves, design.verilator_extra)
    public_all = design.public_all or simulator != "verilator"
    digest = hashlib.sha256("\n".join([text, simulator, version, repr(vargs), repr(public_all), repr(MAKE_OVERRIDES),
                                       repr(TIMESCALE), str(waves)]).encode()).hexdigest()[:16]
    build_dir = BUILD_ROOT / "rtl" / simulator / f"{design.name}-{digest}{'-waves' if waves else ''}"
    build_dir.mkdir(parents=True, exist_ok=True)
    src = build_dir / f"{design.name}.v"
    stamp = build_dir / "built.json"
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            meta = json.loads(stamp.read_text())
            _touch(stamp)
            _write_index(index if key else None, build_dir)
            return BuiltRtl(design.name, simulator, build_dir, [src], waves,
                            meta.get("build_seconds", 0.0), reused=True, meta=meta)
        src.write_text(text)
        runner = _runner(simulator, public_all)
        t0 = time.monotonic()
        log = build_dir / "build.log"
        try:
            runner.build(sources=[src], hdl_toplevel=design.name, build_dir=build_dir,
                         always=True, waves=waves, timescale=TIMESCALE, log_file=log,
                         build_args=vargs if simulator == "verilator" else [])
        except (SystemExit, Exception) as e:  # the runner exits on a failed sub-command
            raise RtlBuildError(f"building {design.name} for {simulator} failed ({e}); see {log}") from None
        seconds = time.monotonic() - t0
        meta = {"design": design.name, "params": repr(design.params), "simulator": simulator,
                "simulator_version": version, "build_seconds": round(seconds, 2),
                "verilog_lines": text.count("\n"), "verilator_args": vargs,
                "public_all": public_all}
        stamp.write_text(json.dumps(meta, indent=1))
        _write_index(index if key else None, build_dir)
    prune_builds(build_dir.parent, keep=build_dir)
    return BuiltRtl(design.name, simulator, build_dir, [src], waves, seconds, False, meta)


def _touch(stamp: Path) -> None:
    """Mark a build used now (its stamp's mtime is the LRU order of prune_builds)."""
    try:
        os.utime(stamp)
    except OSError:
        pass


def prune_builds(root: Path, keep: Path | None = None, limit: int | None = None,
                 min_age: float | None = None, now: float | None = None) -> list[Path]:
    """Remove the least recently used builds under `root` (one simulator's cache) beyond `limit`
    (CACHE_BUILDS), leaving `keep` and every build used in the last `min_age` seconds
    (CACHE_MIN_AGE); a build in progress (no stamp yet) is never touched. Returns what went."""
    import shutil

    limit = CACHE_BUILDS if limit is None else limit
    min_age = CACHE_MIN_AGE if min_age is None else min_age
    now = time.time() if now is None else now
    builds = []
    for d in root.iterdir() if root.is_dir() else ():
        stamp = d / "built.json"
        if d.is_dir() and stamp.exists():
            builds.append((stamp.stat().st_mtime, d))
    builds.sort(reverse=True)                         # most recently used first
    gone = []
    for used, d in builds[limit:]:
        if d == keep or now - used < min_age:
            continue
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    return gone


def _runner(simulator: str, public_all: bool = True):
    """cocotb's runner for `simulator`; for Verilator without `--public-flat-rw` when asked (the
    runner always passes it, and cocotb needs only the signals it touches to be public)."""
    from cocotb_tools.runner import get_runner

    runner = get_runner(simulator)
    # its INFO lines ("Running command ...") would interleave with every caller's own output (one
    # pair per conformance test); warnings and errors still show
    runner.log.setLevel(logging.WARNING)
    if simulator == "verilator" and not public_all:
        command = runner._build_command

        def without_public_all():
            cmds = command()
            cmds[0] = [c for c in cmds[0] if c != "--public-flat-rw"]
            return cmds
        runner._build_command = without_public_all
    return runner


def _write_index(index: Path | None, build_dir: Path) -> None:
    if index is None:
        return
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_suffix(".tmp")
    tmp.write_text(json.dumps({"build_dir": str(build_dir)}))
    os.replace(tmp, index)


@dataclass
class BenchResult:
    passed: int
    failed: int
    results_xml: Path
    failures: list[str]
    sim_time_ns: float
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0


def run_bench(built: BuiltRtl, test_module: str, *, testcase: str | None = None,
              extra_env: dict[str, str] | None = None, test_dir: Path | None = None,
              waves: bool = False, seed: int | None = None) -> BenchResult:
    """Run cocotb test(s) from `test_module` on a built design; returns the parsed results. cocotb's
    own random seed is `seed`, else the run's (sim.seeds)."""
    ensure_simulator_env(built.simulator)
    runner = _runner(built.simulator, built.meta.get("public_all", True))
    test_dir = Path(test_dir or built.build_dir / "run")
    test_dir.mkdir(parents=True, exist_ok=True)
    xml = test_dir / "results.xml"
    if xml.exists():
        xml.unlink()
    env = {"PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OPENBLAS_NUM_THREADS": "1"}   # numpy's idle BLAS threads would spin beside the simulator
    env.update(extra_env or {})
    t0 = time.monotonic()
    _restore_build_state(runner, built)
    try:
        runner.test(test_module=test_module, hdl_toplevel=built.design_name, build_dir=built.build_dir,
                    test_dir=test_dir, testcase=testcase, extra_env=env, waves=waves and built.waves,
                    results_xml=str(xml), seed=seed if seed is not None else seeds.seed_for("cocotb", 1), timescale=TIMESCALE,
                    log_file=test_dir / "sim.log")
    except SystemExit as e:
        # The runner exits when a cocotb test fails; that is a result, not a failure to run.
        if not xml.exists():
            raise SimulatorCrash(f"the {built.simulator} run of {test_module} ended without results (exit {e.code}): "
                                 "the simulator crashed or exited early", test_dir / "sim.log") from None
    except RuntimeError as e:
        # the runner's word for a simulator process that returned non-zero (a crash, a signal)
        raise SimulatorCrash(f"the {built.simulator} run of {test_module} ended early ({e}): the simulator "
                             "crashed or exited early", test_dir / "sim.log") from None
    wall = time.monotonic() - t0
    return parse_results(xml, wall)


def _restore_build_state(runner, built: BuiltRtl) -> None:
    """Give a fresh runner the state its build() would set, without building again.

    runner.test() reads attributes that only build() sets, and the Verilator runner's build()
    always re-runs verilator and make (seconds to minutes). So build() runs with its command
    execution switched off: it computes its state and the (skipped) commands, nothing more.
    """
    execute = runner._execute
    runner._execute = lambda cmds, cwd: None
    level = runner.log.level
    runner.log.setLevel(logging.ERROR)   # its "Skipping compilation" notice is expected here
    try:
        runner.build(sources=built.sources, hdl_toplevel=built.design_name, build_dir=built.build_dir,
                     always=False, waves=built.waves, timescale=TIMESCALE,
                     build_args=built.meta.get("verilator_args", verilator_args(built.waves))
                     if built.simulator == "verilator" else [])
    finally:
        runner._execute = execute
        runner.log.setLevel(level)


def parse_results(xml: Path, wall: float = 0.0) -> BenchResult:
    if not xml.exists():
        raise SimulatorCrash(f"{xml}: the simulator wrote no results: it crashed or exited early",
                             xml.parent / "sim.log")
    root = ET.parse(xml).getroot()
    passed = failed = 0
    failures: list[str] = []
    sim_ns = 0.0
    for case in root.iter("testcase"):
        sim_ns += float(case.get("sim_time_ns", 0) or 0)
        bad = case.find("failure") is not None or case.find("error") is not None
        if bad:
            failed += 1
            node = case.find("failure") if case.find("failure") is not None else case.find("error")
            failures.append(f"{case.get('name')}: {(node.get('message') or node.text or '').strip()[:2000]}")
        elif case.find("skipped") is None:
            passed += 1
    return BenchResult(passed, failed, xml, failures, sim_ns, wall)
