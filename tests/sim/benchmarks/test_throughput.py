"""Issue 13's benchmark (sim/benchmarks/throughput.py): which layers it judges, its arithmetic, its
tables, and the Vela figures it reads. No Vela and no ../shared: the committed files only."""

from __future__ import annotations

import json

import pytest

from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from sim.benchmarks import throughput as tp
from sim.paths import MODELS_DIR
from sim.perf.layer_report import perf_report

CNN32 = MODELS_DIR / "cnn32"


@pytest.fixture(scope="module")
def cnn32_default():
    return perf_report(CNN32 / "model.tosa", load_config("default"), engine="timing")


def test_qualifying_layers_of_cnn32(cnn32_default):
    # cnn32: conv 3->8 /2, depthwise 8 at 16x16, pointwise 8->16, max-pool, depthwise 16 at 8x8,
    # pointwise 16->32 at 8x8, dense 32->10: both depthwise layers and the one pointwise
    # convolution with 16 channels in and out at 8x8
    rows = tp.layer_rows("cnn32", cnn32_default, read_tosa(CNN32 / "model.tosa"))
    assert [(r.layer, r.op, r.shape) for r in rows] == [
        ("layer_43", "DEPTHWISE_CONV2D", "8->8, 16x16"),
        ("layer_51", "DEPTHWISE_CONV2D", "16->16, 8x8"),
        ("layer_54", "CONV2D", "16->32, 8x8"),
    ]
    assert [r.useful_macs for r in rows] == [16 * 16 * 8 * 9, 8 * 8 * 16 * 9, 8 * 8 * 16 * 32]
    by_name = {lay.name: lay for lay in cnn32_default.layers}
    for r in rows:
        assert r.cycles == by_name[r.layer].cycles > 0
        assert r.utilisation == pytest.approx(r.useful_macs / (r.cycles * 64))
        assert r.target == (0.5 if r.op == "DEPTHWISE_CONV2D" else 0.8)
        assert r.met == (r.utilisation >= r.target)
        # the MAC commands' own clocks: at most the layer's, so "no waits" is at least its utilisation
        busy = by_name[r.layer].unit_cycles["mac"]
        assert 0 < busy <= r.cycles
        assert r.busy_utilisation == pytest.approx(r.useful_macs / (busy * 64)) and r.busy_utilisation >= r.utilisation
        assert r.limit == ("-" if r.met else "commands" if r.busy_utilisation < r.target else "waits")


def test_limit_tells_commands_from_waits():
    def row(util, busy):
        return tp.LayerRow("a", "default", "l", "DEPTHWISE_CONV2D", "8->8, 8x8", "MAC", 10, 1, util, 0.5, busy)
    assert [row(0.6, 0.7).limit, row(0.4, 0.45).limit, row(0.4, 0.55).limit, row(0.4, None).limit] == \
        ["-", "commands", "waits", "?"]
    s = tp.summary([], [row(0.4, 0.45), row(0.4, 0.55), row(0.6, 0.6)])
    assert (s["DEPTHWISE_CONV2D_50%"]["met"], s["DEPTHWISE_CONV2D_50%"]["commands"]) == (1, 1)
    assert "of those, 1 fall short with their MAC commands alone" in tp.summary_text(s)


@pytest.mark.parametrize("shape,judged", [
    (tp.LayerShape("CONV2D", 16, 16, 8, 8), True),
    (tp.LayerShape("CONV2D", 15, 64, 32, 32), False),
    (tp.LayerShape("CONV2D", 64, 15, 32, 32), False),
    (tp.LayerShape("CONV2D", 64, 64, 7, 32), False),
    (tp.LayerShape("CONV2D", 64, 64, 32, 7), False),
    (tp.LayerShape("DEPTHWISE_CONV2D", 1, 1, 1, 1), True),
])
def test_qualifies(shape, judged):
    assert tp.qualifies(shape) == judged


def test_network_row_against_vela():
    report = perf_report(CNN32 / "model.tosa", load_config("large"), engine="timing")
    row = tp.network_row("cnn32", CNN32, report)
    vela, source = tp.vela_figure(CNN32)
    assert source == "model.tflite" and row.vela_cycles == vela
    assert row.cycles == report.total.cycles and row.ratio == pytest.approx(row.cycles / vela)
    assert row.utilisation == pytest.approx(148_800 / (row.cycles * 256))


def test_every_network_has_vela_u55_256_figures():
    # the committed vela_summary.json: from the .tflite where there is one, else from the .tosa
    for folder in sorted(p.parent for p in MODELS_DIR.glob("*/model.tosa")):
        figure = tp.vela_figure(folder)
        assert figure is not None, folder.name
        want = "model.tflite" if (folder / "model.tflite").exists() else "model.tosa"
        assert figure[1] == want and figure[0] > 0, folder.name


def test_summary_counts_targets():
    nets = [tp.NetworkRow("a", "large", 256, 1, 90, 1, 0.1, 100, "model.tflite", 0.9),
            tp.NetworkRow("b", "large", 256, 3, 70, 1, 0.1, 100, "model.tflite", 0.7),
            tp.NetworkRow("a", "default", 64, 1, 300, 1, 0.1)]
    layers = [tp.LayerRow("a", "default", "l1", "CONV2D", "16->16, 8x8", "MAC", 10, 10 * 64 * 0.8, 0.8, 0.8),
              tp.LayerRow("a", "default", "l2", "DEPTHWISE_CONV2D", "8->8, 8x8", "MAC", 10, 1, 0.4, 0.5)]
    s = tp.summary(nets, layers)
    assert (s["vela_1.0x"]["met"], s["vela_1.0x"]["of"]) == (2, 2)
    assert (s["vela_0.8x"]["met"], s["vela_0.8x"]["not_met"]) == (1, ["a 0.90x"])
    assert (s["CONV2D_80%"]["met"], s["CONV2D_80%"]["of"]) == (1, 1)
    assert s["DEPTHWISE_CONV2D_50%"]["not_met"] == ["a/l2 on default 40.0%"]


def test_main_one_network(tmp_path, capsys):
    out = tmp_path / "t.json"
    rc = tp.main(["--config", "tiny,large", "--network", "demo_conv", "--models", str(MODELS_DIR), "--no-area",
                  "--markdown", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "| network | config | MACs |" in text and "### Targets" in text
    data = json.loads(out.read_text())
    assert [(r["network"], r["config"]) for r in data["networks"]] == [("demo_conv", "tiny"), ("demo_conv", "large")]
    assert data["networks"][1]["vela_input"] == "model.tosa"           # demo_conv has no .tflite
    assert data["layers"] == [] and data["area"] == {} and data["errors"] == []
    assert data["summary"]["vela_1.0x"]["of"] == 1


def test_render_aligns_names_left_numbers_right():
    text = tp.render(["name", "n"], [["a", 1], ["bcd", 100]], markdown=False)
    assert text.splitlines() == ["name    n", "---------", "a       1", "bcd   100"]
    md = tp.render(["name", "n"], [["a", 1]], markdown=True)
    assert md.splitlines()[1] == "|---|---:|"
