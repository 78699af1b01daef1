"""`npu sweep SPEC.toml`: every network of a spec on every configuration point, as tables and plots.

A point is one configuration x one network: compile, then `perf_report` on the spec's engine. The
points run as jobs of sim/perf/executor.py (a local Dask cluster by default). What comes out, in
the spec's output folder:

- results.csv: one row per point x layer, plus the point's total row, with the point's overrides,
  configuration hash and every hardware parameter as columns (a failed point: one row with its
  error);
- summary.csv: one row per point: cycles, time, utilisation, MACs, external traffic, arithmetic
  intensity, area when known;
- plots/: see sim/perf/sweep_plots.py;
- cache/: one small JSON per computed point, named by what decides its numbers (the configuration's
  hash, the network file's hash, the engine, the hash of the source that compiles and counts); a
  sweep run again, after a stop or with points added, computes only what is not there.

A point whose configuration is refused (mac.rows = 3) or whose network does not fit it (a compile
error) is a row with its error, and the sweep goes on; such errors are cached like results, since
they follow from the same inputs. An exception that is not a user error (a bug, a worker that
died) is recorded too but never cached, and ends the command with status 3 once everything else is
written.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from firmware_model.arch.config import NpuConfig, load_config, parameter_names
from firmware_model.errors import ConfigError, NpuBenchError
from sim.paths import REPO_ROOT
from sim.perf.executor import ExecutorOptions, Job, run_jobs
from sim.perf.sweep_spec import Network, SweepPoint, SweepSpec

# The sources whose change can change a point's numbers (compiler, golden and timing models, cycle
# model, configurations, the report), and those of the area figure (the RTL and its Yosys run).
PERF_SOURCES = ("compiler", "firmware_model", "sim/perf/layer_report.py", "sim/models/model_data.py")
AREA_SOURCES = ("hw", "firmware_model/arch", "sim/benchmarks/core_area.py", "sim/benchmarks/units.py")
AREA_KEYS = ("cells", "ff_bits", "mul_pp_bits", "memory_bits")
# a new layout of the cached JSON changes every key, so old files are never misread
CACHE_FORMAT = "sweep-cache-1"
# results.csv takes these from perf_report's rows; the point's own columns come first
REPORT_DROP = ("model", "config", "config_hash", "engine")


class SweepError(NpuBenchError):
    """A sweep that cannot start (an engine that is missing, an output folder that cannot be made)."""


def source_version(parts: tuple[str, ...] = PERF_SOURCES) -> str:
    """12 hex digits of the content of the sources under `parts` (about a hundred files: a few ms),
    taken once per process: a sweep keys all its points by the code it started with."""
    return _source_version(tuple(parts))


@functools.cache
def _source_version(parts: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in parts:
        p = REPO_ROOT / part
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.suffix in (".py", ".toml"))
        for f in files:
            if "__pycache__" in f.parts:
                continue
            h.update(str(f.relative_to(REPO_ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# --- what a worker runs -------------------------------------------------------------------------

@dataclass(frozen=True)
class PointJob:
    network: str
    model: str                    # absolute path: workers must see the same file (a shared file system)
    model_hash: str
    config: dict                  # NpuConfig.to_dict()
    engine: str
    version: str                  # the parent's source_version(); a worker running other code says so


def run_point(job: PointJob) -> dict:
    """Compile and report one network on one configuration. A user error (the network does not fit
    the SRAMs, the program faults) is a result with its error; anything else raises."""
    from sim.perf.layer_report import perf_report

    here = source_version()
    if here != job.version:
        raise SweepError(f"this worker runs npu-bench source {here}, the sweep {job.version}: "
                         "install the same npu-bench on every worker")
    model = Path(job.model)
    try:
        if file_hash(model) != job.model_hash:
            raise SweepError(f"{model}: not the file the sweep hashed (a worker without the same files?)")
    except OSError as e:
        raise SweepError(f"{model}: this worker cannot read it: {e.strerror or e}") from None
    cfg = NpuConfig.from_dict(job.config)
    t0 = time.perf_counter()
    try:
        rep = perf_report(model, cfg, engine=job.engine)
    except NpuBenchError as e:
        return {"status": "error", "error_type": type(e).__name__, "error": _one_line(e)}
    rows = rep.rows()
    columns = [k for k in rows[0] if k not in REPORT_DROP]
    # by columns, not a dict per row: a third of the size in the cache and on the wire
    return {"status": "ok", "invocations": rep.invocations, "columns": columns,
            "rows": [[row[k] for k in columns] for row in rows], "seconds": round(time.perf_counter() - t0, 3)}


@dataclass(frozen=True)
class AreaJob:
    config: dict
    version: str


def run_area(job: AreaJob) -> dict:
    """The core's Yosys figures for one configuration (sim/benchmarks/core_area.py, "total")."""
    from sim.benchmarks.core_area import core_area

    here = source_version(AREA_SOURCES)
    if here != job.version:
        raise SweepError(f"this worker runs npu-bench RTL source {here}, the sweep {job.version}")
    try:
        total = core_area(NpuConfig.from_dict(job.config))["total"]
    except NpuBenchError as e:
        return {"status": "error", "error_type": type(e).__name__, "error": _one_line(e)}
    return {"status": "ok", **{k: int(total[k]) for k in AREA_KEYS}}


# --- the sweep in the parent ------------------------------------------------------------------------

@dataclass
class PointResult:
    point: SweepPoint
    network: Network
    config: NpuConfig | None      # None: the point's configuration was refused
    status: str = "pending"       # ok, error (a user error: recorded, cached), internal (a bug: not cached)
    error_type: str = ""
    error: str = ""
    rows: list[dict] = field(default_factory=list)
    invocations: int = 0
    cached: bool = False

    @property
    def total(self) -> dict | None:
        return self.rows[-1] if self.rows else None


@dataclass
class SweepResult:
    spec: SweepSpec
    engine: str
    output: Path
    points: list[PointResult]                  # configuration-major, networks in the spec's order
    configs: dict[int, NpuConfig | None]        # point index -> configuration (None: refused)
    config_errors: dict[int, str]
    area: dict[str, dict]                       # config hash -> area figures (or their error)
    base: NpuConfig
    computed: int = 0
    cached: int = 0
    area_computed: int = 0
    seconds: float = 0.0
    plots: list[Path] = field(default_factory=list)
    internal: list[str] = field(default_factory=list)   # tracebacks of internal errors


def check_engine(engine: str) -> None:
    """Refuse an unknown engine before any point is submitted."""
    from sim.perf.layer_report import ENGINES

    if engine not in ENGINES:
        raise SweepError(f"--engine {engine}: no such engine (engines: {', '.join(ENGINES)})")


def run_sweep(spec: SweepSpec, *, output: Path | None = None, engine: str | None = None,
              options: ExecutorOptions = ExecutorOptions(), progress: bool | None = None,
              plots: bool = True, log=sys.stdout) -> SweepResult:
    from sim.cli.files import check_output_dir, output_dir

    t0 = time.perf_counter()
    engine = engine or spec.engine
    check_engine(engine)
    out = Path(output) if output else spec.output
    check_output_dir(out)
    base = load_config(spec.base, list(spec.base_overrides))

    # configurations load in the parent (a millisecond each): a refused one is a row, not a job
    configs: dict[int, NpuConfig | None] = {}
    config_errors: dict[int, str] = {}
    for p in spec.points:
        try:
            configs[p.index] = load_config(spec.base, [*spec.base_overrides, *p.overrides])
        except ConfigError as e:
            configs[p.index] = None
            config_errors[p.index] = _one_line(e)
    version = source_version()
    hashes = {n.label: file_hash(n.path) for n in spec.networks}
    points = [PointResult(p, n, configs[p.index]) for p in spec.points for n in spec.networks]

    folder = output_dir(out, "sweep output folder")
    cache = output_dir(folder / "cache", "sweep cache folder")
    jobs: list[Job] = []
    cache_files: dict[int, tuple[Path, PointResult]] = {}     # job index -> its cache file and point
    for r in points:
        cfg = r.config
        if cfg is None:
            r.status, r.error_type, r.error = "error", "ConfigError", config_errors[r.point.index]
            continue
        key = _key(cfg.hash, hashes[r.network.label], engine, version)
        path = cache / f"{r.network.label}-{cfg.hash}-{engine}-{key}.json"
        value = _read_cache(path, key)
        if value is not None:
            _fill(r, value)
            r.cached = True
            continue
        cache_files[len(jobs)] = (path, r)
        jobs.append(Job(run_point, PointJob(r.network.label, str(r.network.path), hashes[r.network.label],
                                            cfg.to_dict(), engine, version),
                        label=f"{r.network.label}-{cfg.hash}"))
    pending = [r for r in points if r.config is not None and not r.cached]

    # area: one job per distinct configuration, cached by its hash and the RTL's source
    area: dict[str, dict] = {}
    area_files: dict[int, tuple[Path, str]] = {}             # job index -> its cache file and config hash
    if spec.area:
        area_version = source_version(AREA_SOURCES)
        for cfg in {c.hash: c for c in configs.values() if c is not None}.values():
            key = _key(cfg.hash, area_version)
            path = cache / f"area-{cfg.hash}-{key}.json"
            value = _read_cache(path, key)
            if value is not None:
                area[cfg.hash] = value
                continue
            area_files[len(jobs)] = (path, cfg.hash)
            jobs.append(Job(run_area, AreaJob(cfg.to_dict(), area_version), label=f"area-{cfg.hash}"))

    n_cached = sum(r.cached for r in points)
    n_refused = sum(r.config is None for r in points)
    print(f"sweep {spec.name}: {len(spec.points)} configuration(s) x {len(spec.networks)} network(s) = "
          f"{len(points)} points, {engine} engine; {n_cached} cached, {n_refused} refused configuration(s), "
          f"{len(pending)} to compute" + (f", {len(area_files)} area job(s)" if spec.area else "")
          + (f" {options.describe()}" if jobs else ""), file=log, flush=True)

    result = SweepResult(spec, engine, folder, points, configs, config_errors, area, base, cached=n_cached)
    for outcome in run_jobs(jobs, options, desc=f"sweep {spec.name}", unit="job", progress=progress):
        i = outcome.index
        if i in area_files:
            path, cfg_hash = area_files[i]
            if outcome.ok:
                area[cfg_hash] = outcome.value
                _write_cache(path, _key(cfg_hash, outcome.job.arg.version), outcome.value)
                result.area_computed += 1
            else:
                area[cfg_hash] = {"status": "internal", "error": outcome.error}
                result.internal.append(outcome.traceback or outcome.error)
            continue
        path, r = cache_files[i]
        if outcome.ok:
            _fill(r, outcome.value)
            _write_cache(path, _key(r.config.hash, hashes[r.network.label], engine, version), outcome.value)
            result.computed += 1
        else:
            r.status, r.error_type, r.error = "internal", outcome.error.split(":")[0], outcome.error
            result.internal.append(f"{r.network.label} on {r.point.label}:\n{outcome.traceback or outcome.error}")

    write_tables(result)
    if plots:
        from sim.perf.sweep_plots import write_plots

        result.plots = write_plots(result)
    result.seconds = time.perf_counter() - t0
    return result


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join((CACHE_FORMAT, *parts)).encode()).hexdigest()[:16]


def _read_cache(path: Path, key: str) -> dict | None:
    """The cached result, or None when there is none or it is unreadable (then it is computed again)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc.get("result") if isinstance(doc, dict) and doc.get("key") == key else None


def _write_cache(path: Path, key: str, value: dict) -> None:
    """Write a point's result, and delete the same point's results under other keys.

    A point is recomputed only when its key changed (a new source version, a network file
    edited), so the older files can never be read again; without this the cache grows by
    the whole sweep each time the source changes.
    """
    from sim.cli.files import write_text_atomic

    write_text_atomic(path, json.dumps({"key": key, "result": value}, separators=(",", ":")) + "\n")
    point = path.name.rsplit("-", 1)[0]
    for old in path.parent.glob(f"{point}-*.json"):
        if old != path and old.name.rsplit("-", 1)[0] == point:
            old.unlink(missing_ok=True)


def _fill(r: PointResult, value: dict) -> None:
    r.status = value["status"]
    r.error_type = value.get("error_type", "")
    r.error = value.get("error", "")
    columns = value.get("columns", [])
    r.rows = [dict(zip(columns, row)) for row in value.get("rows", [])]
    r.invocations = value.get("invocations", 0)


# --- tables ------------------------------------------------------------------------------------

def point_columns(r: PointResult, result: SweepResult) -> dict:
    """The columns that say which point a row is: its place, its configuration, every parameter."""
    cfg = r.config
    params = cfg.parameters() if cfg else {k: "" for k in parameter_names()}
    for k, v in r.point.settings:          # a refused point still shows what it asked for
        params[k] = v
    return {"point": r.point.index, "network": r.network.label, "config": cfg.name if cfg else "",
            "config_hash": cfg.hash if cfg else "", "overrides": " ".join(r.point.overrides),
            "engine": result.engine, **params, "macs": params["mac.rows"] * params["mac.cols"]
            if all(isinstance(params[k], int) for k in ("mac.rows", "mac.cols")) else "",
            "status": r.status, "error_type": r.error_type, "error": r.error}


def summary_row(r: PointResult, result: SweepResult) -> dict:
    row = point_columns(r, result)
    t = r.total
    cfg = r.config
    figures = dict.fromkeys(("invocations", "tiles", "cycles", "time_us", "host_cycles", "useful_macs", "mac_slots",
                             "utilisation", "slot_utilisation", "macs_per_cycle", "ext_read", "ext_written",
                             "ext_bytes", "ext_bytes_per_cycle", "arithmetic_intensity", "bound"), "")
    if t is not None and r.status == "ok":
        ext = t["ext_read"] + t["ext_written"]
        cycles = t["cycles"]
        figures.update(invocations=r.invocations, tiles=t["tiles"], cycles=cycles, time_us=t["time_us"],
                       host_cycles=t["host_cycles"], useful_macs=t["useful_macs"], mac_slots=t["mac_slots"],
                       utilisation=round(t["useful_macs"] / (cycles * cfg.macs), 6) if cycles else 0.0,
                       slot_utilisation=round(t["mac_slots"] / (cycles * cfg.macs), 6) if cycles else 0.0,
                       macs_per_cycle=round(t["useful_macs"] / cycles, 4) if cycles else 0.0,
                       ext_read=t["ext_read"], ext_written=t["ext_written"], ext_bytes=ext,
                       ext_bytes_per_cycle=round(ext / cycles, 4) if cycles else 0.0,
                       arithmetic_intensity=round(t["useful_macs"] / ext, 4) if ext else "",
                       bound=t["bound"])
    row.update(figures)
    a = result.area.get(cfg.hash) if cfg else None
    for k in AREA_KEYS:
        row[f"area_{k}"] = a[k] if a and a.get("status") == "ok" else ""
    return row


def result_rows(result: SweepResult) -> list[dict]:
    rows = []
    for r in result.points:
        head = point_columns(r, result)
        if not r.rows:
            rows.append(head)
            continue
        for lay in r.rows:
            rows.append({**head, **lay})
    return rows


def _csv(rows: list[dict]) -> bytes:
    # a failed point's row lacks the report's columns: the header is the union, in order of appearance
    fields = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, restval="")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def write_tables(result: SweepResult) -> None:
    from sim.cli.files import commit_files

    commit_files([(result.output / "results.csv", _csv(result_rows(result))),
                  (result.output / "summary.csv", _csv([summary_row(r, result) for r in result.points]))])


def format_summary(result: SweepResult) -> str:
    """The lines the command prints at the end: counts, failures by kind, the fastest point per network."""
    pts = result.points
    ok = [r for r in pts if r.status == "ok"]
    failed = Counter(r.error_type for r in pts if r.status != "ok")
    lines = [f"sweep {result.spec.name}: {len(pts)} points, {len(ok)} ok, {len(pts) - len(ok)} failed"
             + (f" ({', '.join(f'{k} {n}' for k, n in failed.most_common())})" if failed else "")
             + f"; {result.computed} computed, {result.cached} from the cache"
             + (f", {result.area_computed} area(s) computed" if result.spec.area else "")
             + f"; {result.seconds:.1f} s"]
    for net in result.spec.networks:
        mine = [r for r in ok if r.network == net]
        if not mine:
            lines.append(f"  {net.label:12} no point ran")
            continue
        best = min(mine, key=lambda r: r.total["cycles"])
        t = best.total
        lines.append(f"  {net.label:12} fastest: {t['cycles']:>10} cycles, {t['time_us']:>10.1f} us, "
                     f"utilisation {100 * t['useful_macs'] / (t['cycles'] * best.config.macs):5.1f}% at "
                     f"{best.point.label}")
    lines.append(f"results: {result.output / 'results.csv'} {result.output / 'summary.csv'}")
    if result.plots:
        lines.append(f"plots: {result.output / 'plots'}/ ({len(result.plots)} files)")
    return "\n".join(lines)


def _one_line(e: BaseException) -> str:
    return str(e).replace("\r", "\\r").replace("\n", "\\n")
