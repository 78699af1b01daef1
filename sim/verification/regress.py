"""`npu regress`: many graphs x configurations x simulators on the RTL, in parallel, one merged JUnit.

    npu regress [GRAPH.tosa | FOLDER ...] [--config C ...] [--sim verilator|icarus ...]
                [--workers N | --scheduler ADDR | --local] [--seed N] [-o DIR]

Each run is `npu sim` (sim/cosim/network.py: every tile checked against golden, then the
invocations' status, cycles, outputs and variable SRAM). The runs are jobs of sim/perf/executor.py,
the executor of the architecture sweeps: a local Dask cluster of worker processes by default, an
existing cluster with `--scheduler`, or one after the other in this process with `--local`.

1. Plan. Every graph is compiled for every configuration here, and the timing-only model
   (firmware_model/golden/timing_model.py) counts the cycles each run will simulate. A graph that
   does not compile for a configuration is a run with its error (it is not sent to a simulator).
   A run over `--max-cycles` on its simulator is skipped with its reason, and says so in the JUnit.
2. Build. Each configuration x simulator is built once (in parallel when there are several), so
   that no two runs build the same RTL and the runs' times are simulation only.
3. Run, longest first (the predicted cycles times the simulator's relative cost), so that the
   longest run does not start last and leave the other workers idle at the end.

What it writes, in DIR (default build/regress):
- junit.xml: every run's <testsuite> (sim/cosim/junit_report.py: tiles as test cases, host layers
  skipped with their reason, properties: seeds, configuration hash, RTL hash, simulator version);
  a run that could not report (a crash, a compile error) is a suite with one errored case;
- runs/<suite>/: each run's report.json, report.xml, coverage.xml and log.txt;
- coverage.xml: the runs' functional coverage (sim/verification/core_coverage.py), merged;
- summary.csv: one row per run.

Exit status: 3 when a run crashed or npu-bench failed internally; else 1 when any run differs from
golden; else 2 when a run could not start (a graph that does not compile for a configuration);
else 0.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from firmware_model.errors import NpuBenchError
from sim.perf.executor import ExecutorOptions, Job, run_jobs

SIMULATORS = ("verilator", "icarus")
# simulated cycles per second of the core, roughly (measured on demo_conv, 2 cores): only used to
# order the runs and to describe a skip, never to decide a result
CYCLES_PER_SECOND = {"verilator": 300_000.0, "icarus": 5_000.0}

EXIT_MISMATCH, EXIT_USER_ERROR, EXIT_INTERNAL = 1, 2, 3


class RegressError(NpuBenchError):
    """Arguments `npu regress` cannot use: no graphs, an unknown simulator."""


def find_graphs(items: list[str]) -> list[Path]:
    """The .tosa files named, and those under the folders named (sorted, each once)."""
    found: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            inside = sorted(p.rglob("*.tosa"))
            if not inside:
                raise RegressError(f"{item}: a folder with no .tosa file in it")
            found += inside
        elif p.is_file():
            found.append(p)
        else:
            raise RegressError(f"{item}: no such file or folder")
    seen, out = set(), []
    for p in found:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


@dataclass(frozen=True)
class RunJob:
    graph: str
    config: dict                  # NpuConfig.to_dict()
    config_hash: str
    simulator: str
    suite: str
    run_dir: str
    seed: int | None
    invocations: int | None


@dataclass
class RunResult:
    graph: str
    config: str
    config_hash: str
    simulator: str
    suite: str
    status: str = "pending"       # pass, fail, error (could not start), crash, internal, skipped
    message: str = ""
    tiles: int = 0
    tiles_passed: int = 0
    invocations: int = 0
    rtl_cycles: int = 0
    predicted_cycles: int = 0
    wall_seconds: float = 0.0
    started: float = 0.0
    seed: str = ""
    run_dir: str = ""
    properties: dict = field(default_factory=dict)


def run_one(job: RunJob) -> dict:
    """One `npu sim` run, in a worker: its reports in job.run_dir; the summary back to the parent.
    A user error (the graph, its inputs) and a simulator crash come back as statuses; anything
    else raises, and the parent records it as internal."""
    from firmware_model.arch.config import NpuConfig
    from sim import seeds
    from sim.cosim.network import run_sim
    from sim.cosim.report import format_report, write_reports
    from sim.rtl.build import SimulatorCrash

    run_dir = Path(job.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get(seeds.ENV)
    if job.seed is not None:
        os.environ[seeds.ENV] = str(job.seed)
    log = io.StringIO()
    started = time.time()
    t0 = time.monotonic()
    out = {"started": started, "status": "pass", "message": ""}
    try:
        with contextlib.redirect_stdout(log):
            rep = run_sim(Path(job.graph), NpuConfig.from_dict(job.config), job.simulator,
                          workdir=run_dir / "work", invocations=job.invocations, progress=False)
            write_reports(rep, run_dir)
            print(format_report(rep))
        out.update(status="pass" if rep.ok else "fail", tiles=len(rep.tiles), tiles_passed=rep.passed,
                   invocations=len(rep.invocations), rtl_cycles=rep.rtl_cycles,
                   seed=rep.run_seed, message="" if rep.ok else _first_failure(rep))
    except SimulatorCrash as e:
        out.update(status="crash", message=str(e))
    except NpuBenchError as e:
        out.update(status="error", message=f"{type(e).__name__}: {e}")
    finally:
        if job.seed is not None:
            if saved is None:
                os.environ.pop(seeds.ENV, None)
            else:
                os.environ[seeds.ENV] = saved
        (run_dir / "log.txt").write_text(log.getvalue() + (f"\n{out['message']}\n" if out["message"] else ""))
    out["wall_seconds"] = round(time.monotonic() - t0, 3)
    return out


def _first_failure(rep) -> str:
    bad = [t for t in rep.tiles if not t.ok]
    if bad:
        t = bad[0]
        return f"{len(bad)} tile(s) differ; the first: tile {t.tile} ({t.unit}, layer {t.layer} {t.layer_name})"
    for i in rep.invocations:
        if not i.ok:
            return f"invocation {i.index}: {i.status} (golden {i.golden_status}), {i.rtl_cycles} cycles " \
                   f"(model {i.model_cycles}){'; ' + i.note if i.note else ''}"
    failed = [name for name, ok in rep.output_checks.items() if not ok]
    return f"output check(s) failed: {', '.join(failed)}" if failed else "failed"


def build_one(arg: tuple[dict, str]) -> dict:
    """Build (or find) the core of one configuration for one simulator, in a worker."""
    from firmware_model.arch.config import NpuConfig
    from sim.rtl.core import build_core

    cfg_dict, simulator = arg
    built = build_core(NpuConfig.from_dict(cfg_dict), simulator)
    return {"seconds": built.build_seconds, "reused": built.reused, "rtl_hash": built.rtl_hash,
            "simulator_version": built.meta.get("simulator_version", "")}


@dataclass
class RegressResult:
    runs: list[RunResult]
    junit: Path
    summary: Path
    seconds: float
    build_seconds: float
    options: str
    internal: list[str] = field(default_factory=list)
    coverage: Path | None = None  # the runs' functional coverage, merged

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.runs)

    @property
    def exit_status(self) -> int:
        if self.internal or self.count("crash") or self.count("internal"):
            return EXIT_INTERNAL
        if self.count("fail"):
            return EXIT_MISMATCH
        if self.count("error"):
            return EXIT_USER_ERROR
        return 0


def plan_runs(graphs: list[Path], configs: list, simulators: list[str], out: Path, *, seed: int | None,
              invocations: int | None, max_cycles: int | None) -> tuple[list[RunResult], list[RunJob]]:
    """Each graph x configuration x simulator as a RunResult (statuses decided here: compile errors,
    runs over the cycle budget) and the jobs of the others, longest first."""
    from compiler.pipeline import compile_file
    from firmware_model.golden.timing_model import TimingModel
    from sim.cosim.junit_report import suite_name
    from sim.cosim.network import load_inputs

    results: list[RunResult] = []
    jobs: list[tuple[float, RunJob, RunResult]] = []
    for graph in graphs:
        for cfg in configs:
            predicted, error = 0, ""
            try:
                from compiler.tosa_io import read_tosa

                g = read_tosa(graph)
                invs, _, _ = load_inputs(graph, g, [], invocations)
                shapes = {n: a.shape for n, a in invs[0].items()}
                program = compile_file(graph, cfg, out=io.StringIO(), input_shapes=shapes).program
                timing = TimingModel(program, cfg)
                for _ in invs:
                    timing.invoke()
                predicted = timing.counters.cycles
            except NpuBenchError as e:
                error = f"{type(e).__name__}: {e}"
            for sim in simulators:
                name = suite_name(graph, cfg.name, cfg.hash, sim)
                r = RunResult(str(graph), cfg.name, cfg.hash, sim, name, predicted_cycles=predicted,
                              run_dir=str(out / "runs" / name.removeprefix("npu-sim.")), seed="" if seed is None else str(seed))
                results.append(r)
                if error:
                    r.status, r.message = "error", error
                    continue
                cost = predicted / CYCLES_PER_SECOND[sim]
                if max_cycles is not None and predicted > max_cycles:
                    r.status = "skipped"
                    r.message = (f"{predicted:,} cycles to simulate (about {_duration(cost)} on {sim}), "
                                 f"over --max-cycles {max_cycles:,}")
                    continue
                jobs.append((cost, RunJob(str(graph), cfg.to_dict(), cfg.hash, sim, name, r.run_dir, seed, invocations), r))
    jobs.sort(key=lambda j: -j[0])
    return results, [j for _, j, _ in jobs]


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def run_regress(graphs: list[Path], configs: list, simulators: list[str], out: Path,
                options: ExecutorOptions = ExecutorOptions(), *, seed: int | None = None,
                invocations: int | None = None, max_cycles: int | None = None,
                progress: bool | None = None, log=sys.stdout) -> RegressResult:
    from sim.cli.files import output_dir

    t0 = time.monotonic()
    out = output_dir(out, "regression output folder")
    results, jobs = plan_runs(graphs, configs, simulators, out, seed=seed, invocations=invocations,
                              max_cycles=max_cycles)
    by_suite = {r.suite: r for r in results}
    internal: list[str] = []
    print(f"regress: {len(graphs)} graph(s) x {len(configs)} configuration(s) x {len(simulators)} simulator(s) = "
          f"{len(results)} runs; {len(jobs)} to simulate, {sum(r.status == 'skipped' for r in results)} skipped, "
          f"{sum(r.status == 'error' for r in results)} that do not compile; {options.describe()}",
          file=log, flush=True)

    # build each configuration x simulator that a job needs, once
    builds = {}
    for j in jobs:
        builds.setdefault((j.config_hash, j.simulator), j)
    t_build = time.monotonic()
    build_jobs = [Job(build_one, (j.config, j.simulator), label=f"build-{j.config['name']}-{j.simulator}")
                  for j in builds.values()]
    broken: dict[tuple, str] = {}
    built_info: dict[tuple, dict] = {}
    keys = list(builds)
    for o in run_jobs(build_jobs, options, desc="regress: build", unit="build", progress=progress):
        if o.ok:
            built_info[keys[o.index]] = o.value
        else:
            broken[keys[o.index]] = o.error
            internal.append(f"building {o.job.label}: {o.traceback or o.error}")
    build_seconds = time.monotonic() - t_build
    runnable = []
    for j in jobs:
        key = (j.config_hash, j.simulator)
        if key in broken:
            r = by_suite[j.suite]
            r.status, r.message = "crash", f"the RTL did not build: {broken[key]}"
        else:
            runnable.append(j)

    run_jobs_list = [Job(run_one, j, label=j.suite) for j in runnable]
    for o in run_jobs(run_jobs_list, options, desc="regress: run", unit="run", progress=progress):
        r = by_suite[o.job.arg.suite]
        if o.ok:
            v = o.value
            r.status, r.message = v["status"], v.get("message", "")
            r.wall_seconds, r.started = v["wall_seconds"], v["started"]
            for k in ("tiles", "tiles_passed", "invocations", "rtl_cycles"):
                setattr(r, k, v.get(k, 0))
        else:
            r.status, r.message = "internal", o.error
            internal.append(f"{r.suite}: {o.traceback or o.error}")
        print(f"  {_line(r)}", file=log, flush=True)

    for r in results:
        info = built_info.get((r.config_hash, r.simulator), {})
        r.properties = {"seed": r.seed, "config": r.config, "config_hash": r.config_hash, "simulator": r.simulator,
                        "rtl_hash": info.get("rtl_hash", ""), "simulator_version": info.get("simulator_version", ""),
                        "graph": r.graph, "predicted_cycles": str(r.predicted_cycles)}
    junit = write_junit(results, out / "junit.xml")
    summary = write_summary(results, out / "summary.csv")
    from sim.verification.core_coverage import merge

    coverage = merge([Path(r.run_dir) / "coverage.xml" for r in results if r.status in ("pass", "fail")],
                     out / "coverage.xml")
    return RegressResult(results, junit, summary, time.monotonic() - t0, build_seconds, options.describe(), internal,
                         coverage)


def _line(r: RunResult) -> str:
    what = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "crash": "CRASH", "internal": "INTERNAL",
            "skipped": "SKIP"}.get(r.status, r.status)
    tiles = f"{r.tiles_passed}/{r.tiles} tiles, {r.rtl_cycles} cycles, {r.wall_seconds:.1f} s" if r.tiles else ""
    msg = r.message.splitlines()[0][:200] if r.message else ""
    return f"{what:8s} {r.suite}" + (f"  {tiles}" if tiles else "") + (f"  {msg}" if msg else "")


def write_junit(results: list[RunResult], path: Path) -> Path:
    """One JUnit file: each run's own suite (from its report.xml), or one made here for a run that
    has none (skipped, compile error, crash)."""
    from junitparser import JUnitXml, Skipped, TestCase, TestSuite

    from sim.cosim.junit_report import crashed_suite, merge

    suites = []
    for r in results:
        xml_path = Path(r.run_dir) / "report.xml"
        if r.status in ("pass", "fail") and xml_path.exists():
            for s in JUnitXml.fromfile(str(xml_path)):
                suites.append(s)
            continue
        if r.status == "skipped":
            s = TestSuite(r.suite)
            for k, v in r.properties.items():
                s.add_property(k, v)
            case = TestCase("run", "run", 0.0)
            case.result = [Skipped(r.message, "budget")]
            s.add_testcase(case)
            s.update_statistics()
            suites.append(s)
            continue
        suites.append(crashed_suite(r.suite, r.started or time.time(), r.wall_seconds,
                                    r.message or r.status, r.properties))
    merge(suites, path)
    return path


SUMMARY_COLUMNS = ("graph", "config", "config_hash", "simulator", "status", "tiles", "tiles_passed", "invocations",
                   "rtl_cycles", "predicted_cycles", "wall_seconds", "seed", "suite", "run_dir", "message")


def write_summary(results: list[RunResult], path: Path) -> Path:
    from sim.cli.files import write_text_atomic

    buf = io.StringIO()
    w = csv.DictWriter(buf, SUMMARY_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in results:
        row = asdict(r)
        row["message"] = (r.message or "").replace("\n", " ")[:500]
        w.writerow(row)
    write_text_atomic(path, buf.getvalue())
    return path


def format_result(result: RegressResult) -> str:
    lines = [f"  {_line(r)}" for r in result.runs if r.status not in ("pass",)]
    n = len(result.runs)
    counts = ", ".join(f"{result.count(s)} {s}" for s in ("pass", "fail", "error", "crash", "internal", "skipped")
                       if result.count(s))
    lines.insert(0, f"regress: {n} runs: {counts}; {result.seconds:.1f} s wall ({result.build_seconds:.1f} s building) "
                    f"{result.options}")
    lines.append(f"junit: {result.junit}")
    if result.coverage is not None:
        from sim.verification.core_coverage import summary

        lines.append(summary(result.coverage).splitlines()[0])
    lines.append(f"summary: {result.summary}")
    return "\n".join(lines)
