"""`npu regress`: graphs x configurations x simulators on a real local Dask cluster, one JUnit file
that junitparser reads and merges with another run's; statuses for runs that cannot start, runs
over the cycle budget and host layers, each with its reason; seeds that replay."""

from __future__ import annotations

import csv
import io
import re
import shutil

import pytest
from junitparser import Error, JUnitXml, Skipped

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.golden.timing_model import TimingModel
from sim.cli import main as cli
from sim.paths import MODELS_DIR

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def regressed(tmp_path_factory):
    root = tmp_path_factory.mktemp("regress")
    graphs = root / "graphs"
    (graphs / "broken").mkdir(parents=True)
    (graphs / "broken" / "model.tosa").write_bytes(b"not a flatbuffer")
    first = cli.main(["regress", str(MODELS_DIR / "mlp"), str(MODELS_DIR / "demo_conv"), str(graphs / "broken"),
                      "--config", "tiny", "--sim", "verilator", "--sim", "icarus", "--max-cycles", "100000",
                      "--seed", "5", "--workers", "2", "-o", str(root / "a")])
    second = cli.main(["regress", str(MODELS_DIR / "mlp" / "model.tosa"), "--config", "default", "--seed", "5",
                       "--local", "-o", str(root / "b")])
    return root, first, second


def suites(path):
    return {s.name: s for s in JUnitXml.fromfile(str(path))}


def props(suite):
    return {p.name: p.value for p in suite.properties()}


def test_statuses_and_exit(regressed):
    root, first, second = regressed
    timing = TimingModel(compile_file(MODELS_DIR / "mlp" / "model.tosa", load_config("tiny"), out=io.StringIO()).program,
                         load_config("tiny"))
    timing.invoke()
    mlp_cycles = timing.counters.cycles
    assert first == 2 and second == 0      # the broken graph is a user error; nothing differs from golden
    rows = {(r["graph"].split("/")[-2], r["simulator"]): r for r in csv.DictReader(open(root / "a" / "summary.csv"))}
    assert len(rows) == 6
    for sim in ("verilator", "icarus"):
        mlp = rows[("mlp", sim)]
        assert mlp["status"] == "pass" and mlp["tiles"] == mlp["tiles_passed"] == "73"
        assert mlp["rtl_cycles"] == mlp["predicted_cycles"] == str(mlp_cycles)   # the timing model's count, met
        assert rows[("demo_conv", sim)]["status"] == "skipped"
        assert "over --max-cycles 100,000" in rows[("demo_conv", sim)]["message"]
        assert rows[("broken", sim)]["status"] == "error" and "model.tosa" in rows[("broken", sim)]["message"]


def test_one_junit_with_unique_suites_properties_and_reasons(regressed):
    root, _, _ = regressed
    found = suites(root / "a" / "junit.xml")
    assert len(found) == 6
    mlp = [s for name, s in found.items() if ".mlp.model.tiny-" in name]
    assert sorted(s.name.rsplit(".", 1)[1] for s in mlp) == ["icarus", "verilator"]
    for s in mlp:
        p = props(s)
        assert p["seed"] == "5" and p["config"] == "tiny" and re.fullmatch(r"[0-9a-f]{16}", p["rtl_hash"])
        assert p["simulator_version"] and p["seed.cocotb"].isdigit()
        assert s.tests == 73 + 1 + 1 + 3 and s.failures == s.errors == 0     # tiles, host CLZ, invocation, outputs
        host = [c for c in s if c.result and isinstance(c.result[0], Skipped)]
        assert len(host) == 1 and "host CPU" in host[0].result[0].message
        assert s.time > sum(c.time for c in s if c.name.startswith("inv0.tile_")) > 0   # wall: set-up included
    # both simulators ran the same RTL source at the same seed
    assert len({props(s)["seed.cocotb"] for s in mlp}) == 1
    (skipped,) = [s for name, s in found.items() if "demo_conv" in name and name.endswith("verilator")]
    assert skipped.skipped == 1 and "cycles to simulate" in next(iter(skipped)).result[0].message
    (broken,) = [s for name, s in found.items() if "broken" in name and name.endswith("icarus")]
    assert broken.errors == 1 and isinstance(next(iter(broken)).result[0], Error)


def test_runs_merge_cleanly_and_seeds_replay(regressed):
    root, _, _ = regressed
    a, b = JUnitXml.fromfile(str(root / "a" / "junit.xml")), JUnitXml.fromfile(str(root / "b" / "junit.xml"))
    merged = a + b
    names = [s.name for s in merged]
    assert len(names) == len(set(names)) == 7
    merged.update_statistics()
    assert merged.tests == a.tests + b.tests
    (default_mlp,) = [s for s in b]
    (tiny_mlp,) = [s for s in a if ".mlp.model.tiny-" in s.name and s.name.endswith("verilator")]
    # the same --seed draws the same cocotb seed in another run (another process, another config)
    assert props(default_mlp)["seed.cocotb"] == props(tiny_mlp)["seed.cocotb"]
    assert props(default_mlp)["config_hash"] != props(tiny_mlp)["config_hash"]


def test_runs_coverage_merged(regressed):
    import xml.etree.ElementTree as ET

    root, _, _ = regressed
    def command_hits(path):
        node = next(n for n in ET.parse(path).getroot().iter() if n.get("abs_name") == "top.core.command")
        return {b.get("bin"): int(b.get("hits")) for b in node}
    merged = command_hits(root / "a" / "coverage.xml")
    runs = sorted((root / "a" / "runs").glob("*/coverage.xml"))
    assert len(runs) == 2                       # the two mlp runs; skipped and broken runs have none
    assert merged["MAC.CONV2D"] == sum(command_hits(f)["MAC.CONV2D"] for f in runs) == 2


def test_no_graphs_is_a_one_line_error(tmp_path, capsys):
    assert cli.main(["regress", str(tmp_path), "--local"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no .tosa file" in err[0]
