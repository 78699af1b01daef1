"""`npu perf`: every cycle of a program belongs to exactly one row, and the rows add up to what
the engine counted — cycles, each unit's busy clocks, MAC lane slots, host time and the bytes
moved per memory — on every shipped network and configuration."""

from __future__ import annotations

import csv
import io
import json

import pytest

from firmware_model.arch.config import load_config
from sim.cli.main import main
from sim.paths import MODELS_DIR
from sim.perf.layer_report import PerfError, perf_report

NETWORKS = sorted(p.parent.name for p in MODELS_DIR.glob("*/model.tosa"))


def assert_rows_add_up(rep):
    c = rep.counters
    rows = rep.layers
    assert sum(r.cycles for r in rows) == rep.total.cycles == c["cycles"] == sum(c["invocation_cycles"])
    assert sum(r.commands for r in rows) == rep.total.commands
    assert sum(r.mac_slots for r in rows) == c["macs"]
    assert sum(r.host_cycles for r in rows) == c["host_cycles"]
    for unit, n in c["unit_cycles"].items():
        assert sum(r.unit_cycles.get(unit, 0) for r in rows) == n, unit
    for key, which in (("bytes_read", "bytes_read"), ("bytes_written", "bytes_written")):
        for mem, n in c[key].items():
            assert sum(getattr(r, which).get(mem, 0) for r in rows) == n, (key, mem)
    assert all(r.cycles >= 0 and 0 <= r.utilisation(rep.config) <= 1 for r in rows)


@pytest.mark.parametrize("config", ["tiny", "default", "large"])
@pytest.mark.parametrize("network", NETWORKS)
def test_every_cycle_belongs_to_one_row(network, config):
    rep = perf_report(MODELS_DIR / network / "model.tosa", load_config(config), engine="timing")
    assert_rows_add_up(rep)
    from compiler.pipeline import compile_file
    import io as _io

    program = compile_file(MODELS_DIR / network / "model.tosa", load_config(config), out=_io.StringIO()).program
    assert rep.total.commands == len(program.commands)          # the program's commands, each in one row
    assert rep.total.useful_macs == program.manifest["stats"]["npu_macs"] * rep.invocations


@pytest.mark.parametrize("config", ["tiny", "large"])
@pytest.mark.parametrize("network", ["cnn32", "lstm", "mlp", "resnet_pool"])
def test_the_timing_engine_gives_the_golden_engines_rows(network, config):
    """Row by row, column by column: the timing-only model's report is the golden model's."""
    def strip(rep):
        return [{k: v for k, v in r.items() if k != "engine"} for r in rep.rows()]
    path, cfg = MODELS_DIR / network / "model.tosa", load_config(config)
    assert strip(perf_report(path, cfg, engine="timing")) == strip(perf_report(path, cfg, engine="golden"))


def test_npu_perf_writes_csv_and_json(tmp_path, capsys):
    out = tmp_path / "perf"
    assert main(["perf", str(MODELS_DIR / "cnn32" / "model.tosa"), "--config", "large", "--engine", "golden",
                 "-o", str(out), "--set", "external.bandwidth=16"]) == 0
    text = capsys.readouterr().out
    assert "layer_39" in text and "total" in text
    rows = list(csv.DictReader(io.StringIO((out / "perf.csv").read_text())))
    doc = json.loads((out / "perf.json").read_text())
    assert rows[-1]["layer"] == "total" and int(rows[-1]["cycles"]) == doc["counters"]["cycles"]
    assert sum(int(r["cycles"]) for r in rows[:-1]) == int(rows[-1]["cycles"])
    assert doc["config"]["ext_bandwidth"] == 16 and doc["config"]["hash"] == rows[0]["config_hash"]
    assert {"useful_macs", "mac_slots", "utilisation", "bound", "ext_read", "time_us"} <= set(rows[0])


def test_perf_errors_are_one_line(tmp_path, capsys):
    assert main(["perf", str(tmp_path / "nosuch.tosa")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(PerfError, match="no such engine"):
        perf_report(MODELS_DIR / "mlp" / "model.tosa", load_config("tiny"), engine="fast")
    assert main(["perf", str(MODELS_DIR / "mlp" / "model.tosa"), "--invocations", "0"]) == 2
