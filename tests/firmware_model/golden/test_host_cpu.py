"""The host CPU's op read once per program (host_cpu._HostOp): its reading of an input tensor is
GoldenModel.read_tensor's (the same values, storage type and shape, and a copy), and its cycles
are host_cycles'."""

from __future__ import annotations

import io

import numpy as np

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.program import Placement
from firmware_model.golden.host_cpu import _HostOp, host_cycles
from firmware_model.golden.model import GoldenModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def test_host_op_reads_as_read_tensor():
    cfg = load_config("tiny")
    program = compile_file(MODELS_DIR / "mlp" / "model.tosa", cfg, out=io.StringIO()).program
    ops = program.manifest["host_ops"]
    assert ops
    model = GoldenModel(program, cfg)
    model.invoke(ModelData.of(MODELS_DIR / "mlp").all_inputs()[0])
    rng = np.random.default_rng(0)
    for index, entry in enumerate(ops):
        op = _HostOp(ops, index)
        assert op.cycles == host_cycles(ops, index)
        for k, p in enumerate(entry["inputs"]):
            if not p:
                continue
            place = Placement.from_json(p)
            for _ in range(3):              # the invocation's bytes, then random ones
                got, want = op.read(model, k), model.read_tensor(place)
                assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
                assert not np.shares_memory(got, model.mem.ext)
                model.mem.ext[place.addr:place.addr + place.nbytes] = rng.integers(0, 256, place.nbytes, dtype=np.uint8)
