"""Concat placement (compiler/passes/concat_placement.py): a CONCAT along an outer axis has its
inputs placed on their byte ranges of its output, written there by the operations producing them,
and copies nothing; one that cannot be gathered so keeps its copy. Checked on seeded graphs
against Arm's reference model and on blazeface's two anchor concatenations."""

from __future__ import annotations

import io

import numpy as np
import pytest

from compiler import pipeline
from compiler.passes import concat_placement
from compiler.tosa_io import read_tosa
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Opcode
from firmware_model.golden.model import GoldenModel
from firmware_model.golden.timing_model import TimingModel
from sim import seeds
from sim.models.mlir_graphs import module, serialize, tensor_type
from sim.oracles.arm_oracle import VALID, run_inprocess
from sim.paths import MODELS_DIR

H, W, C = 6, 8, 16


def _concat_mlir(axis: int, with_input: bool) -> str:
    """Two CLAMPs of the input (ELTWISE operations) concatenated along `axis`; with `with_input`
    the graph's input itself instead of the second CLAMP."""
    t = tensor_type((1, H, W, C), "i8")
    out_shape = [1, H, W, C]
    out_shape[axis] *= 2
    t_out = tensor_type(out_shape, "i8")
    body = [f"    %a = tosa.clamp %x {{max_val = 100 : i8, min_val = -90 : i8}} : ({t}) -> {t}",
            f"    %b = tosa.clamp %x {{max_val = 50 : i8, min_val = -120 : i8}} : ({t}) -> {t}",
            f"    %y = tosa.concat %a, %{'x' if with_input else 'b'} {{axis = {axis} : i32}} : ({t}, {t}) -> {t_out}",
            f"    %z = tosa.clamp %y {{max_val = 120 : i8, min_val = -127 : i8}} : ({t_out}) -> {t_out}"]
    return module([("x", t)], [t_out], body, ["z"])


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """{case: (the .tosa, an input, Arm's reference output)}."""
    x = seeds.rng(11).integers(-128, 128, (1, H, W, C)).astype(np.int8)
    out = {}
    for case, axis, with_input in (("outer", 1, False), ("input", 1, True), ("inner", 3, False)):
        model = serialize(_concat_mlir(axis, with_input), tmp_path_factory.mktemp(case))
        ref = run_inprocess(model.read_bytes(), [x])
        assert ref.status == VALID
        out[case] = (model, x, ref.outputs[0])
    return out


def _compile(model, config):
    return pipeline.compile_graph(read_tosa(model), load_config(config), out=io.StringIO())


def _dma_count(program) -> int:
    return sum(c.opcode in (Opcode.DMA_LOAD, Opcode.DMA_STORE) for c in program.commands)


@pytest.mark.parametrize("config", ["tiny", "default", "large"])
@pytest.mark.parametrize("case", ["outer", "input", "inner"])
def test_an_outer_concat_of_computed_tensors_copies_nothing(graphs, case, config, monkeypatch):
    """Along H, both inputs computed by the NPU: gathered, no tile of its own, the inputs placed
    on the two halves of its output; the outputs equal Arm's model's on the golden model, in fewer
    cycles and transfers than with the copy. With the graph's input as one part (its place is
    the caller's), or along C (an input is not one run of the output), the copy stays."""
    model, x, ref = graphs[case]
    cfg = load_config(config)
    ctx = _compile(model, config)
    gathered = [line for line in ctx.report if "concat placement:" in line]
    (layer,) = [lay for lay in ctx.program.manifest["layers"] if any(s.startswith("CONCAT") for s in lay["sources"])]
    golden = GoldenModel(ctx.program, cfg)
    (got,) = golden.invoke({"TosaInput_0": x}).values()
    assert got.dtype == ref.dtype and np.array_equal(got, ref)
    if case != "outer":
        assert not gathered and layer["tiles"]
        return
    assert len(gathered) == 1 and "gathers" in layer["op"] and not layer["tiles"]
    places = ctx.schedule.placements
    out = places[layer["name"]]
    parts = sorted((p.addr, p.nbytes) for name, p in places.items() if name != out.name
                   and out.addr <= p.addr < out.addr + out.nbytes)
    assert parts == [(out.addr, H * W * C), (out.addr + H * W * C, H * W * C)]
    monkeypatch.setattr(concat_placement, "run", lambda ctx: None)
    plain = _compile(model, config)
    copy = GoldenModel(plain.program, cfg)
    (want,) = copy.invoke({"TosaInput_0": x}).values()
    assert np.array_equal(want, ref)
    assert golden.counters.cycles < copy.counters.cycles
    assert _dma_count(ctx.program) < _dma_count(plain.program)


def test_contiguous_runs():
    at = concat_placement._contiguous_at
    assert at((0, 512, 0), (1, 384, 16), (1, 896, 16)) == 512 * 16
    assert at((0, 0, 0, 0), (1, 3, 8, 16), (1, 6, 8, 16)) == 0
    assert at((0, 3, 0, 0), (1, 3, 8, 16), (1, 6, 8, 16)) == 3 * 8 * 16
    assert at((0, 0, 0, 16), (1, 6, 8, 16), (1, 6, 8, 32)) is None       # along C: every pixel a run
    assert at((0, 0, 4, 0), (1, 6, 4, 16), (1, 6, 8, 16)) is None        # along W with H > 1
    assert at((0, 2, 4, 0), (1, 1, 4, 16), (1, 6, 8, 16)) == (2 * 8 + 4) * 16


def test_blazefaces_anchor_concatenations_are_gathered(monkeypatch):
    """blazeface on large: its two concatenations along the anchors (1x512x16 + 1x384x16, and the
    same of 1 channel) are gathered; the 1x1 heads before them store straight into their outputs
    (layer_374 through its RESHAPE, 512 anchors in); the output's concatenation along the
    channels keeps its copy. Fewer cycles than with the copies (the network's outputs against
    Arm's model: tests/firmware_model/golden/test_networks.py)."""
    ctx = pipeline.compile_file(MODELS_DIR / "blazeface" / "model.tosa", load_config("large"), out=io.StringIO())
    gathered = {line.split()[2] for line in ctx.report if "concat placement:" in line}
    assert gathered == {"layer_372", "layer_376"}
    places = ctx.schedule.placements
    assert places["layer_374"].addr == places["layer_376"].addr + 512 * 16
    assert places["layer_375"].addr == places["layer_374"].addr
    out_layer = next(lay for lay in ctx.program.manifest["layers"] if lay["name"] == "TosaOutput_0")
    assert out_layer["tiles"]
    monkeypatch.setattr(concat_placement, "run", lambda ctx: None)
    plain = pipeline.compile_file(MODELS_DIR / "blazeface" / "model.tosa", load_config("large"), out=io.StringIO())

    def cycles(program):
        model = TimingModel(program, load_config("large"))
        model.invoke()
        return model.counters.cycles
    assert cycles(ctx.program) < cycles(plain.program)
