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
        # ... and its steps' input streams at most its MAC commands' clocks: the ceiling above both
        stream = by_name[r.layer].unit_cycles["mac_stream"]
        assert 0 < stream < busy
        assert r.stream_utilisation == pytest.approx(r.useful_macs / (stream * 64))
        assert r.limit == ("-" if r.met else "mapping" if r.stream_utilisation < r.target
                           else "commands" if r.busy_utilisation < r.target else "waits")
    # layer_51, a 3x3 depthwise convolution of 16 channels on 8x8 outputs: two blocks of 8 rows;
    # DEPTHWISE_PAIRED takes kernel rows 0-1, then 2, each step an output row's 3-word window fill
    # and 7 more words, a word a clock: 2 x 8 x (3 + 7) clocks a block for 8 x 64 x 9 useful MACs,
    # 45% (9 taps on 2 x 8 lanes, 8 beats in 10 clocks), below the target whatever the fixed clocks
    layer_51 = rows[1]
    assert layer_51.stream_utilisation == pytest.approx(8 * 64 * 9 / (2 * 8 * (3 + 7) * 64))
    assert layer_51.limit == "mapping"


def test_limit_tells_mapping_from_commands_from_waits():
    def row(util, busy, stream=None):
        return tp.LayerRow("a", "default", "l", "DEPTHWISE_CONV2D", "8->8, 8x8", "MAC", 10, 1, util, 0.5, busy, stream)
    assert [row(0.6, 0.7).limit, row(0.4, 0.45).limit, row(0.4, 0.55).limit, row(0.4, None).limit,
            row(0.4, 0.45, 0.48).limit, row(0.4, 0.45, 0.52).limit, row(0.6, 0.7, 0.45).limit] == \
        ["-", "commands", "waits", "?", "mapping", "commands", "-"]
    s = tp.summary([], [row(0.4, 0.45), row(0.4, 0.55), row(0.6, 0.6), row(0.3, 0.4, 0.45)])
    assert (s["DEPTHWISE_CONV2D_50%"]["met"], s["DEPTHWISE_CONV2D_50%"]["commands"],
            s["DEPTHWISE_CONV2D_50%"]["mapping"]) == (1, 2, 1)
    text = tp.summary_text(s)
    assert "of those, 2 fall short with their MAC commands alone" in text
    assert "and of those, 1 with their input streams alone" in text


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
