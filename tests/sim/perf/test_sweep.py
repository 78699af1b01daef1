"""`npu sweep`: the spec and its one-line errors, a real sweep on a local Dask cluster (rows, sums,
failures, resume, plots), the executor, the command line."""

from __future__ import annotations

import csv
import io
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from firmware_model.arch.config import parameter_names
from sim.cli.main import main
from sim.paths import BUILD_ROOT, MODELS_DIR
from sim.perf.executor import ExecutorError, ExecutorOptions, Job, run_jobs
from sim.perf.sweep import PERF_SOURCES, PointJob, SweepError, check_engine, run_point, run_sweep, source_version
from sim.perf.sweep_spec import SweepSpecError, load_spec

# base, a bigger array, a refused configuration, and an external memory lstm's constants do not
# fit (64 KiB, the least a configuration may have, with lstm's weights in 64x64 blocks: since the
# constants image stores shared blobs once, they fit it on the smaller arrays)
SPEC = """
name = "tsweep"
description = "test sweep"
base = "default"
networks = ["mlp", "cnn32", "lstm"]
engine = "golden"
output = "out"

[[points]]

[[points]]
mac.rows = 16
"mac.cols" = 16

[[points]]
mac.rows = 3

[[points]]
mac.rows = 64
"mac.cols" = 64
external.size = 65536

[plots]
layers_at = { mac.rows = 16 }
"""


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    p = folder / name
    p.write_text(textwrap.dedent(text))
    return p


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


# --- the spec -------------------------------------------------------------------------------------

def test_spec_grid_and_defaults(tmp_path):
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "tiny.tosa").write_bytes((MODELS_DIR / "mlp" / "model.tosa").read_bytes())
    spec = load_spec(write_spec(tmp_path, """
        networks = ["cnn32", "nets/tiny.tosa"]
        set = ["clock_mhz=800"]
        [grid]
        mac.rows = [4, 8]
        "mac.cols" = [8, 16]
        external.bandwidth = [4, 8, 16]
    """, "my-sweep.toml"))
    assert spec.name == "my-sweep" and spec.engine == "timing" and spec.area is False
    assert spec.output == BUILD_ROOT / "sweeps" / "my-sweep"
    assert [n.label for n in spec.networks] == ["cnn32", "tiny"]
    assert spec.networks[1].path == (tmp_path / "nets" / "tiny.tosa").resolve()
    assert len(spec.points) == 12 and spec.varied == ("mac.rows", "mac.cols", "external.bandwidth")
    assert spec.points[0].overrides == ["mac.rows=4", "mac.cols=8", "external.bandwidth=4"]
    assert spec.base_overrides == ("clock_mhz=800",)


def test_parameters_name_every_hardware_parameter():
    from firmware_model.arch.config import load_config

    cfg = load_config("tiny")
    params = cfg.parameters()
    assert list(params) == parameter_names() and params["mac.rows"] == cfg.mac_rows
    again = load_config("default", [f"{k}={v}" for k, v in params.items()])
    assert again.hash == cfg.hash               # the columns of a row describe its configuration whole


def test_spec_without_points_is_the_base(tmp_path):
    spec = load_spec(write_spec(tmp_path, 'networks = ["mlp"]\nbase = "tiny"\n'))
    assert len(spec.points) == 1 and spec.points[0].overrides == [] and spec.points[0].label == "(base)"


@pytest.mark.parametrize("text, where, why", [
    ('networks = ["mlp"]\nbogus = 1', "bogus", "unknown key"),
    ('networks = []', "networks", "non-empty list"),
    ('networks = ["nosuchnet"]', "networks", "no network named 'nosuchnet'"),
    ('networks = ["missing/model.tosa"]', "networks", "no such .tosa file"),
    ('networks = ["mlp", "mlp"]', "networks", "listed twice"),
    ('networks = ["mlp"]\nengine = "fast"', "engine", "no such engine"),
    ('networks = ["mlp"]\nbase = "huge"', "base", "no NPU configuration named 'huge'"),
    ('networks = ["mlp"]\nset = ["mac.rows=3"]', "set", "power of two"),
    ('networks = ["mlp"]\narea = "yes"', "area", "true or false"),
    ('networks = ["mlp"]\nname = "a b"', "name", "letters, digits"),
    ('networks = ["mlp"]\n[grid]\nmac.rowz = [4]', "grid.mac.rowz", "no such parameter"),
    ('networks = ["mlp"]\n[grid]\nmac.rows = 4', "grid.mac.rows", "non-empty list"),
    ('networks = ["mlp"]\n[grid]\nmac.rows = [4, 4]', "grid.mac.rows", "listed twice"),
    ('networks = ["mlp"]\n[grid]\nmac.rows = [4.5]', "grid.mac.rows", "must be an integer"),
    ('networks = ["mlp"]\n[grid]\nmac.rows = [true]', "grid.mac.rows", "must be an integer"),
    ('networks = ["mlp"]\n[grid]\nclock_mhz = ["fast"]', "grid.clock_mhz", "must be a number"),
    ('networks = ["mlp"]\n[grid]\nmac.rows = [4]\n[[points]]\nmac.rows = 8', "points", "not both"),
    ('networks = ["mlp"]\n[[points]]\nmac.rows = 8\n[[points]]\nmac.rows = 8', "points[1]", "same point"),
    ('networks = ["mlp"]\n[grid]\nmac.rows = [4]\n[plots]\nlayers_at = { mac.rows = 8 }', "plots.layers_at",
     "no point"),
    ('networks = ["mlp"]\n[grid]\nsram.input = ' + str(list(range(64, 64 * 150, 64))) + '\nsram.output = '
     + str(list(range(64, 64 * 150, 64))), "grid", "more than"),
    ('networks = ["mlp"\n', None, "not valid TOML"),
])
def test_spec_errors_name_the_file_and_key(tmp_path, text, where, why):
    path = write_spec(tmp_path, text)
    with pytest.raises(SweepSpecError) as e:
        load_spec(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and why in msg and "\n" not in msg, msg
    if where:
        assert msg.startswith(f"{path}: {where}: "), msg


def test_missing_spec_file(tmp_path):
    with pytest.raises(SweepSpecError, match="no such sweep specification"):
        load_spec(tmp_path / "nope.toml")


def test_timing_engine_is_there_or_said_to_be_missing():
    # no silent fall-back to the golden model: the timing engine runs, or the sweep refuses to start
    try:
        from firmware_model.golden.timing_model import TimingModel  # noqa: F401
    except ImportError:
        with pytest.raises(SweepError, match="timing-only model .* not available.*--engine golden"):
            check_engine("timing")
    else:
        check_engine("timing")
    check_engine("golden")
    with pytest.raises(SweepError, match="no such engine"):
        check_engine("fast")


# --- a real sweep on a local Dask cluster ---------------------------------------------------------

@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    spec = load_spec(write_spec(folder, SPEC))
    first = run_sweep(spec, options=ExecutorOptions(workers=2), progress=False, log=io.StringIO())
    second = run_sweep(spec, options=ExecutorOptions(workers=2), progress=False, log=io.StringIO())
    return spec, first, second


def test_sweep_results_rows(swept):
    spec, first, _ = swept
    out = spec.output
    assert out == spec.path.parent / "out"
    assert not first.internal, first.internal
    rows = read_csv(out / "results.csv")
    summary = read_csv(out / "summary.csv")
    assert len(summary) == 4 * 3 and [(r["point"], r["network"]) for r in summary] == [
        (str(p), n) for p in range(4) for n in ("mlp", "cnn32", "lstm")]
    for name in [*parameter_names(), "point", "network", "config_hash", "overrides", "layer", "cycles",
                 "useful_macs", "mac_slots", "utilisation", "bound", "status", "error"]:
        assert name in rows[0], name
    by_point = defaultdict(list)
    for r in rows:
        by_point[(r["point"], r["network"])].append(r)
    ok = [k for k, rs in by_point.items() if rs[0]["status"] == "ok"]
    assert len(ok) == 8            # 3 networks x 2 points, and mlp, cnn32 in 64 KiB of external memory
    for key in ok:
        layers, total = by_point[key][:-1], by_point[key][-1]
        assert total["layer"] == "total" and len(layers) >= 2
        assert sum(int(r["cycles"]) for r in layers) == int(total["cycles"]) > 0
        assert sum(int(r["useful_macs"]) for r in layers) == int(total["useful_macs"])
        s = next(r for r in summary if (r["point"], r["network"]) == key)
        assert s["cycles"] == total["cycles"] and s["config_hash"] == total["config_hash"]
        assert 0 < float(s["utilisation"]) <= 1 and float(s["arithmetic_intensity"]) > 0
    big = by_point[("1", "mlp")][0]
    assert (big["mac.rows"], big["mac.cols"], big["sram.input"]) == ("16", "16", "32768")
    assert big["overrides"] == "mac.rows=16 mac.cols=16" and len(big["config_hash"]) == 8
    assert int(by_point[("1", "cnn32")][-1]["cycles"]) < int(by_point[("0", "cnn32")][-1]["cycles"])


def test_failing_points_are_recorded(swept):
    spec, first, _ = swept
    summary = {(r["point"], r["network"]): r for r in read_csv(spec.output / "summary.csv")}
    for net in ("mlp", "cnn32", "lstm"):
        r = summary[("2", net)]
        assert (r["status"], r["error_type"], r["config_hash"], r["mac.rows"]) == ("error", "ConfigError", "", "3")
        assert "power of two" in r["error"] and r["cycles"] == ""
    lstm = summary[("3", "lstm")]
    assert (lstm["status"], lstm["error_type"]) == ("error", "CompileError")
    assert "external memory" in lstm["error"] and lstm["config_hash"]
    assert summary[("3", "mlp")]["status"] == "ok"
    assert "4 failed (ConfigError 3, CompileError 1)" in format_line(first)


def format_line(result) -> str:
    from sim.perf.sweep import format_summary

    return format_summary(result).splitlines()[0]


def test_rerun_resumes_from_the_cache(swept):
    spec, first, second = swept
    assert first.computed == 9 and first.cached == 0          # 3 networks x 3 loaded configurations
    assert second.computed == 0 and second.cached == 9         # the compile error is cached too
    assert len(list((spec.output / "cache").glob("*.json"))) == 9
    assert [p.status for p in second.points] == [p.status for p in first.points]
    assert [p.rows for p in second.points] == [p.rows for p in first.points]


def test_plots_written(swept):
    spec, first, _ = swept
    plots = spec.output / "plots"
    names = {p.name for p in first.plots}
    for stem in ("cycles_vs_macs", "utilisation_vs_macs", "roofline", "layers_mlp", "layers_cnn32", "layers_lstm"):
        for ext in ("png", "svg"):
            assert f"{stem}.{ext}" in names
            assert (plots / f"{stem}.{ext}").stat().st_size > 1000
    assert (plots / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "cycles_vs_area.png" not in names          # area = false


# --- the executor ---------------------------------------------------------------------------------

def _bad_point() -> PointJob:
    return PointJob("mlp", str(MODELS_DIR / "mlp" / "model.tosa"), "0" * 16, {}, "golden", "not-this-version")


def test_executor_in_process_keeps_going_after_a_failure():
    jobs = [Job(source_version, PERF_SOURCES, "version"), Job(run_point, _bad_point(), "bad"),
            Job(source_version, PERF_SOURCES, "again")]
    got = sorted(run_jobs(jobs, ExecutorOptions(local=True), progress=False), key=lambda o: o.index)
    assert [o.ok for o in got] == [True, False, True]
    assert got[0].value == source_version()
    assert got[1].error.startswith("SweepError: this worker runs npu-bench source") and "run_point" in got[1].traceback


def test_executor_on_an_existing_cluster_reports_a_raising_job():
    # --scheduler ADDRESS: a cluster started elsewhere (here a second local one, on loopback)
    import logging

    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        jobs = [Job(run_point, _bad_point(), "bad"), Job(source_version, PERF_SOURCES, "version")]
        options = ExecutorOptions(scheduler=cluster.scheduler_address)
        got = sorted(run_jobs(jobs, options, progress=False), key=lambda o: o.index)
        assert len(cluster.scheduler.workers) == 1          # the cluster outlives the run: not ours to close
    assert not got[0].ok and got[0].error.startswith("SweepError: this worker runs npu-bench source")
    assert "run_point" in got[0].traceback
    assert got[1].ok and got[1].value == source_version()     # a worker process runs the same source


def test_scheduler_address_checked_before_anything_starts():
    with pytest.raises(ExecutorError, match="not a scheduler address"):
        list(run_jobs([Job(source_version, PERF_SOURCES)], ExecutorOptions(scheduler="nonsense"), progress=False))


# --- the command line ----------------------------------------------------------------------------

def test_npu_sweep_cli_local(tmp_path, capsys):
    spec = write_spec(tmp_path, """
        networks = ["mlp"]
        engine = "timing"
        [grid]
        external.bandwidth = [4, 16]
    """)
    out = tmp_path / "o"
    assert main(["sweep", str(spec), "-o", str(out), "--engine", "golden", "--jobs", "1", "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "2 points, 2 ok, 0 failed; 2 computed, 0 from the cache" in text and "mlp" in text
    assert main(["sweep", str(spec), "-o", str(out), "--engine", "golden", "--local", "--no-plots"]) == 0
    assert "0 computed, 2 from the cache" in capsys.readouterr().out
    assert len(read_csv(out / "summary.csv")) == 2 and not (out / "plots").exists()


@pytest.mark.parametrize("args, why", [
    (["sweep", "{d}/none.toml"], "no such sweep specification"),
    (["sweep", "{spec}", "--jobs", "0"], "--jobs 0: must be at least 1"),
    (["sweep", "{spec}", "--workers", "0"], "--workers 0: must be at least 1"),
    (["sweep", "{spec}", "--local", "--scheduler", "tcp://127.0.0.1:1"], "give one of them"),
    (["sweep", "{spec}", "--jobs", "2", "--workers", "3"], "give one of them"),
    (["sweep", "{spec}", "-o", "{spec}", "--local", "--engine", "golden"], "is a file, not a folder"),
])
def test_npu_sweep_cli_errors_are_one_line(tmp_path, capsys, args, why):
    spec = write_spec(tmp_path, 'networks = ["mlp"]\n')
    argv = [a.format(d=tmp_path, spec=spec) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("npu sweep: error: ") and why in err and "\n" not in err, err


def test_recomputed_point_replaces_its_stale_cache_file(tmp_path):
    """A result under an old key (another source version) is deleted when the point is written
    again, so the cache does not grow by a whole sweep per source change; other points stay."""
    from sim.perf.sweep import _read_cache, _write_cache

    stale = tmp_path / "mlp-ab12cd-timing-0000000000000000.json"
    other_net = tmp_path / "mlp-x-ab12cd-timing-0000000000000000.json"     # a label that extends 'mlp'
    other_engine = tmp_path / "mlp-ab12cd-golden-0000000000000000.json"
    for f in (stale, other_net, other_engine):
        f.write_text('{"key": "0000000000000000", "result": {}}\n')
    fresh = tmp_path / "mlp-ab12cd-timing-1111111111111111.json"
    _write_cache(fresh, "1111111111111111", {"status": "ok"})
    assert _read_cache(fresh, "1111111111111111") == {"status": "ok"}
    assert not stale.exists()
    assert other_net.exists() and other_engine.exists()
