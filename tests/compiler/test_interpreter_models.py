"""The interpreter on the real networks in models/: every output equals Arm's reference model's
bit for bit; for the stateful ones (lstm, gru) over their invocations in one session, with the
variable state before every invocation and after the last compared too."""

import time

import numpy as np
import pytest

from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR
from compiler.interpreter import Interpreter
from compiler.tosa_io import read_tosa

MODELS = MODELS_DIR
NAMES = sorted(p.name for p in MODELS.iterdir() if (p / "io.json").exists())


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_model_matches_reference(name):
    data = ModelData.of(MODELS / name)
    interp = Interpreter(read_tosa(data.folder / "model.tosa"))
    t0 = time.perf_counter()
    for k in range(data.invocations):
        for var, before in data.state_before(k).items():
            assert same(interp.state[var], before), f"{var} before invocation {k}"
        outputs = interp.run(data.inputs(k))
        for out, exp in data.reference_outputs(k).items():
            assert same(outputs[out], exp), f"{out} of invocation {k}"
    for var, after in data.state_after_last().items():
        assert same(interp.state[var], after)
    # vectorised kernels: a whole network in well under a second per invocation
    assert time.perf_counter() - t0 < 5 * data.invocations
