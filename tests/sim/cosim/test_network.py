"""The walking skeleton end to end: the demo .tosa through the compiler, the golden model and
the RTL on both simulators, against Arm's reference model; and the bench's self-check (a core
built with the rescale stage's rounding dropped must be reported as FAIL, with the element,
expected and actual values)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim import seeds
from compiler.pipeline import compile_file
from firmware_model.golden.model import GoldenModel
from firmware_model.arch.config import load_config
from sim.cli import main as cli
from sim.cosim.network import DEFAULT_MODEL, format_report, run_sim

DEMO_DIR = DEFAULT_MODEL.parent


def demo_input():
    return {"TosaInput_0": np.load(DEMO_DIR / "input_0.npy")}


@pytest.mark.parametrize("config", ["tiny", "default", "large"])
def test_demo_compiles_and_golden_equals_reference(config):
    cfg = load_config(config)
    ctx = compile_file(DEFAULT_MODEL, cfg)
    stats = ctx.program.manifest["stats"]
    assert stats["host_macs"] == 0 and stats["tiles"] >= 1
    out = GoldenModel(ctx.program, cfg).invoke(demo_input())["TosaOutput_0"]
    ref = np.load(DEMO_DIR / "ref_output_0.npy")
    assert out.dtype == ref.dtype and np.array_equal(out, ref)


def test_tiny_config_splits_the_demo_into_many_tiles():
    ctx = compile_file(DEFAULT_MODEL, load_config("tiny"))
    assert ctx.program.manifest["stats"]["tiles"] >= 16


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_npu_sim_demo(simulator, tmp_path, capsys):
    tiles = compile_file(DEFAULT_MODEL, load_config("default")).program.manifest["stats"]["tiles"]
    status = cli.main(["sim", "--sim", simulator, "--config", "default", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0, out
    last = [line for line in out.splitlines() if line.startswith("sim: ")][-1]
    assert last.startswith(f"sim: {tiles}/{tiles} tiles match golden ({simulator}), ")
    assert "rtl == reference model: yes" in out and "rtl == interpreter: yes" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == 1 and report["tiles"] == {"total": tiles, "passed": tiles, "failed": 0, "golden_only": 0}
    assert report["cycles"]["rtl"] == report["cycles"]["model"] > 0
    assert [i["rtl_cycles"] == i["model_cycles"] for i in report["invocations"]] == [True]
    assert report["inputs"].startswith("committed") and report["speed"]["simulated_cycles_per_second"] > 0
    # a case per tile, per invocation and per output check; one suite with the run's properties
    from junitparser import JUnitXml

    (suite,) = list(JUnitXml.fromfile(str(tmp_path / "report.xml")))
    assert suite.name == f"npu-sim.models.demo_conv.model.default-{report['config']['hash']}.{simulator}"
    assert suite.tests == tiles + 1 + len(report["outputs"]) and suite.failures == suite.errors == suite.skipped == 0
    props = {p.name: p.value for p in suite.properties()}
    assert props["rtl_hash"] == report["rtl_hash"] and len(props["rtl_hash"]) == 16
    assert props["config_hash"] == report["config"]["hash"] and props["simulator_version"]
    assert props["seed.cocotb"] == str(report["seeds"]["cocotb"])
    assert suite.time == pytest.approx(report["wall_seconds"], abs=0.01) and suite.timestamp


@pytest.mark.rtl
def test_npu_sim_reports_a_wrong_rtl():
    rep = run_sim(DEFAULT_MODEL, load_config("default"), "verilator", fault="rescale_rounding", progress=False)
    assert not rep.ok
    failed = [t for t in rep.tiles if not t.ok]
    assert failed, "the faulty rescale stage went unnoticed"
    for t in failed:
        assert t.rtl_end == t.golden_end and t.mismatches and t.n_mismatch >= len(t.mismatches)
        for m in t.mismatches:
            # Rounding dropped: the RTL truncates, so it is off by exactly one, towards -inf.
            assert m["actual"] == m["expected"] - 1
            assert set(m["coords"]) == {"n", "y", "x", "c"}
    text = format_report(rep)
    assert "FAIL" in text and "expected" in text and "actual" in text
    assert text.splitlines()[-1].startswith(f"sim: {rep.passed}/{len(rep.tiles)} tiles match golden (verilator)")
    assert rep.output_checks["rtl == golden"] is False
    from junitparser import Failure

    from sim.cosim.junit_report import sim_suite

    suite = sim_suite(rep)
    failed_cases = [c for c in suite if c.result and isinstance(c.result[0], Failure)]
    assert suite.failures == len(failed_cases)
    tile_cases = [c for c in failed_cases if c.name.startswith("inv0.tile_")]
    assert len(tile_cases) == len(failed)
    assert all("element(s) differ" in c.result[0].message and "expected" in c.result[0].message for c in tile_cases)
    assert {c.name for c in failed_cases} >= {"inv0", "rtl_==_golden"}


def test_npu_sim_bad_model_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.tosa"
    bad.write_bytes(b"not a flatbuffer")
    assert cli.main(["sim", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]


@pytest.mark.parametrize("content", [None, b"", b"hello world, no flatbuffer here", "truncated"])
def test_npu_run_bad_files_exit_2_with_one_line(tmp_path, capsys, content):
    model = tmp_path / "model.tosa"
    if content == "truncated":
        model.write_bytes(DEFAULT_MODEL.read_bytes()[:100])
    elif content is not None:
        model.write_bytes(content)
    status = cli.main(["run", str(model), "-i", f"TosaInput_0={DEMO_DIR / 'input_0.npy'}", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and str(model) in err[0] and "Traceback" not in err[0]


def test_npu_run_writes_outputs_with_exact_dtype(tmp_path):
    out = tmp_path / "out"
    assert cli.main(["run", str(DEFAULT_MODEL), "-i", f"TosaInput_0={DEMO_DIR / 'input_0.npy'}", "-o", str(out)]) == 0
    got = np.load(out / "TosaOutput_0.npy")
    ref = np.load(DEMO_DIR / "ref_output_0.npy")
    assert got.dtype == np.int8 and np.array_equal(got, ref)


@pytest.mark.rtl
def test_npu_sim_stateful_network_over_its_invocations():
    """The GRU's three invocations on the RTL, the state carried in the variable SRAM between them:
    every tile (MAC, ELTWISE, VAR transfers through the DMA) matches, each invocation's cycles equal
    the model's, the variable SRAM equals golden's after each, and the outputs equal the committed
    reference outputs of all three. No tile is left to the golden model."""
    model = DEMO_DIR.parent / "gru" / "model.tosa"
    rep = run_sim(model, load_config("default"), "verilator", progress=False)
    assert rep.ok and rep.passed == len(rep.tiles) > 0 and rep.golden_only == 0
    assert len(rep.invocations) == 3 and all(i.variables_match and i.rtl_cycles == i.model_cycles
                                             for i in rep.invocations)
    assert {t.unit for t in rep.tiles} == {"MAC", "ELTWISE"}
    assert rep.output_checks == {"rtl == golden": True, "rtl == interpreter": True, "rtl == reference model": True}


@pytest.mark.rtl
def test_npu_sim_writes_a_waveform(tmp_path, capsys):
    """--waves builds a tracing RTL and prints the path of a non-empty FST file."""
    from pathlib import Path

    from sim.models.mlir_graphs import conv_layer_mlir, serialize

    rng = seeds.rng(3)
    model = serialize(conv_layer_mlir(rng, "conv2d", (6, 6, 4), (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], cout=4),
                      tmp_path)
    status = cli.main(["sim", str(model), "--sim", "icarus", "--config", "tiny", "--waves",
                       "--report", str(tmp_path / "report")])
    out = capsys.readouterr().out
    assert status == 0, out
    waves = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("waves: ")]
    assert waves and waves[0].endswith(".fst")
    assert Path(waves[0]).stat().st_size > 1000
