"""The ramp-down pass (compiler/passes/ramp_down.py): a convolution's last spatial block split by
rows where the next operation's first tile reads only the top of it, so that its first input comes
under the lower half's MACs."""

import io

import numpy as np
import pytest

from compiler import pipeline
from compiler.passes import ramp_down
from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Opcode, Sram
from firmware_model.golden.model import GoldenModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def _compile(name: str, config: str):
    return pipeline.compile_graph(read_tosa(MODELS_DIR / name / "model.tosa"), load_config(config), out=io.StringIO())


def _tiles(ctx, layer: str) -> list[dict]:
    return next(lay["tiles"] for lay in ctx.program.manifest["layers"] if lay["name"] == layer)


def _input_loads(ctx, tile: dict) -> int:
    a, b = tile["commands"]
    return sum(1 for c in ctx.program.commands[a:b] if c.opcode == Opcode.DMA_LOAD and c.sub == Sram.INPUT)


@pytest.mark.parametrize("name,config,producer,consumer", [
    ("blazeface", "large", "layer_208", "layer_211"),      # the stem's last column band, a depthwise layer
    ("blazeface", "default", "layer_213", "layer_219"),    # a pointwise layer's last band, its residual ADD
    ("resnet_pool", "default", "layer_34", "layer_37"),
])
def test_the_last_band_is_split_and_the_next_first_input_comes_early(name, config, producer, consumer, monkeypatch):
    """The producer's last spatial block becomes two tiles of half its rows each (every channel
    block of the upper half, then of the lower); the consumer's first tile loads nothing of its
    input itself (the link brought it under the producer's last command), where without the split
    it does. Same outputs as Arm's reference model, fewer cycles than without the pass."""
    ctx = _compile(name, config)
    assert any(line.strip().startswith(f"ramp-down: {producer}'s last block") and line.endswith(consumer)
               for line in ctx.report), ctx.report
    tiles = _tiles(ctx, producer)
    k = sum(1 for t in tiles if (t["y0"], t["x0"]) == (tiles[-1]["y0"], tiles[-1]["x0"]))   # channel blocks
    upper, lower = tiles[-2 * k], tiles[-k]
    assert upper["x0"] == lower["x0"] and upper["tw"] == lower["tw"] and upper["y0"] + upper["th"] == lower["y0"]
    assert lower["th"] in (upper["th"], upper["th"] + 1)
    first = _tiles(ctx, consumer)[0]
    monkeypatch.setattr(ramp_down, "run", lambda ctx: None)
    plain = _compile(name, config)
    assert _input_loads(ctx, first) < _input_loads(plain, _tiles(plain, consumer)[0])
    data = ModelData.of(MODELS_DIR / name)
    cfg = load_config(config)
    a, b = GoldenModel(ctx.program, cfg), GoldenModel(plain.program, cfg)
    out_a, out_b = a.invoke(data.inputs(0)), b.invoke(data.inputs(0))
    for key, want in data.reference_outputs(0).items():
        assert np.array_equal(out_a[key], want) and np.array_equal(out_b[key], want), key
    assert a.counters.cycles < b.counters.cycles


def test_nothing_is_split_where_the_next_operation_reads_the_result_on_chip():
    """blazeface on large: the pointwise layers whose results go to their ADDs through the output
    SRAM (cascades) are not split, nor any convolution whose result nothing reads from external
    memory first."""
    ctx = _compile("blazeface", "large")
    split = [line.split("'s last block")[0].split("ramp-down: ")[1] for line in ctx.report if "ramp-down:" in line]
    assert split == ["layer_208"], split
