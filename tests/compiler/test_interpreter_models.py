"""The interpreter on the real networks in models/: every output equals Arm's reference model's
bit for bit; for the stateful ones (lstm, gru) over their invocations in one session, with the
variable state before every invocation and after the last compared too."""

import json
import time

import numpy as np
import pytest

from sim.paths import MODELS_DIR
from compiler.interpreter import Interpreter
from compiler.tosa_io import read_tosa

MODELS = MODELS_DIR
NAMES = sorted(p.name for p in MODELS.iterdir() if (p / "io.json").exists())


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_model_matches_reference(name):
    d = MODELS / name
    io = json.loads((d / "io.json").read_text())
    if isinstance(io["inputs"], dict):   # the short form: {name: file}, one invocation
        io = {"inputs": [{"name": n, "files": [f]} for n, f in io["inputs"].items()],
              "outputs": [{"name": n, "files": [f]} for n, f in io["reference_outputs"].items()]}
    interp = Interpreter(read_tosa(d / "model.tosa"))
    t0 = time.perf_counter()
    for k in range(io.get("invocations", 1)):
        for var in io.get("variables", []):
            before = np.load(d / var["state_before"][k])
            assert same(interp.state[var["variable_name"]], before), f"{var['name']} before invocation {k}"
        inputs = {t["name"]: np.load(d / t["files"][k]) for t in io["inputs"]}
        outputs = interp.run(inputs)
        for t in io["outputs"]:
            exp = np.load(d / t["files"][k])
            assert same(outputs[t["name"]], exp), f"{t['name']} of invocation {k}"
    for var in io.get("variables", []):
        if var["state_after"]:
            assert same(interp.state[var["variable_name"]], np.load(d / var["state_after"][-1]))
    # vectorised kernels: a whole network in well under a second per invocation
    assert time.perf_counter() - t0 < 5 * io.get("invocations", 1)
