"""`npu sim --tile N`: a tile re-run alone from golden's state before it computes the same bytes as
in the whole program (golden against golden), and runs on both simulators; a wrong RTL is caught
in the replay; a tile that does not exist is a one-line error."""

from __future__ import annotations

import io

import numpy as np
import pytest

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from sim.cli import main as cli
from sim.cosim.program_run import prepare
from sim.cosim.tile_replay import replay_program
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def expectations(program, cfg, feeds, state=None):
    job, _ = prepare(program, cfg, feeds, state=state)
    return {(k, t.tile_id): t for k, inv in enumerate(job.invocations) for t in inv.tiles}


@pytest.mark.parametrize("name, config, invocation, tiles", [
    ("cnn32", "tiny", 0, [0, 12, 36]),
    ("gru", "tiny", 2, [5, 60]),          # the third invocation: the variables carried from the first two
    ("resnet_pool", "tiny", 0, [3, 20]),
    # tiles that read a cascade's region in the output SRAM: a 1x1 convolution's input (cnn32 7)
    # and an ELTWISE's A (resnet_pool 12), which the replay restores from golden's state
    ("cnn32", "default", 0, [7]),
    ("resnet_pool", "default", 0, [12]),
])
def test_replayed_tile_computes_the_same_bytes(name, config, invocation, tiles):
    model = MODELS_DIR / name / "model.tosa"
    cfg = load_config(config)
    feeds = ModelData.of(model).all_inputs()
    program = compile_file(model, cfg, out=io.StringIO(), input_shapes={n: a.shape for n, a in feeds[0].items()}).program
    whole = expectations(program, cfg, feeds)
    checked = 0
    for tile in tiles:
        replay, state = replay_program(program, cfg, feeds, tile, invocation)
        alone = expectations(replay, cfg, [{}], state)
        if (invocation, tile) not in whole:
            assert not [t for (k, i), t in alone.items() if i == tile]      # a data-movement tile
            continue
        want = whole[(invocation, tile)]
        (got,) = [t for (k, i), t in alone.items() if i == tile]
        assert got.output == want.output and np.array_equal(got.expected, want.expected)
        checked += 1
    assert checked >= 1


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_npu_sim_tile(simulator, capsys):
    status = cli.main(["sim", str(MODELS_DIR / "cnn32" / "model.tosa"), "--config", "tiny", "--sim", simulator,
                       "--tile", "12"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "tile 12 MAC layer 1" in out and ": PASS, done at clock" in out and "matches golden" in out


@pytest.mark.rtl
def test_npu_sim_tile_of_a_later_invocation(capsys):
    status = cli.main(["sim", str(MODELS_DIR / "gru" / "model.tosa"), "--config", "tiny", "--tile", "60",
                       "--invocation", "2"])
    out = capsys.readouterr().out
    assert status == 0 and "tile 60 of invocation 2" in out and "matches golden" in out, out


@pytest.mark.rtl
def test_npu_sim_tile_catches_a_wrong_rtl(capsys):
    status = cli.main(["sim", "--config", "default", "--inject-fault", "rescale_rounding", "--tile", "3"])
    out = capsys.readouterr().out
    assert status == 1
    assert ": FAIL" in out and "expected" in out and "actual" in out and "DIFFERS" in out


def test_no_such_tile_is_a_one_line_error(capsys):
    from sim.cosim.network import DEFAULT_MODEL

    tiles = compile_file(DEFAULT_MODEL, load_config("default"), out=io.StringIO()).program.manifest["stats"]["tiles"]
    assert cli.main(["sim", "--config", "default", "--tile", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tile 99" in err[0] and f"tiles 0..{tiles - 1}" in err[0]
