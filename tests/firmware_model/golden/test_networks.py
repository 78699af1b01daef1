"""The real networks in models/ compiled for tiny, default and large and run on the golden model:
outputs equal to the interpreter's and to the committed reference outputs of Arm's reference
model, bit for bit; the stateful ones (lstm, gru) over their three invocations with the state
carried in the variable SRAM. Every MAC runs on the NPU; the only op left to the host is mlp's
CLZ (the elementwise unit has no count-leading-zeros operation).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR
from compiler.interpreter import Interpreter
from compiler.pipeline import compile_graph
from compiler.tosa_io import read_tosa
from firmware_model.golden.model import GoldenModel
from firmware_model.arch.config import load_config

MODELS = MODELS_DIR
NETWORKS = ("cnn32", "mlp", "resnet_pool", "lstm", "gru", "blazeface")
CONFIGS = ("tiny", "default", "large")
HOST_OPS = {"mlp": ["CLZ"]}


def invocations(name: str) -> list[tuple[np.ndarray, np.ndarray]]:
    data = ModelData.of(MODELS / name)
    return [(data.inputs(k)["TosaInput_0"], data.reference_outputs(k)["TosaOutput_0"]) for k in range(data.invocations)]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", NETWORKS)
def test_network_on_the_golden_model(name, config):
    graph = read_tosa(MODELS / name / "model.tosa")
    cfg = load_config(config)
    ctx = compile_graph(graph, cfg)
    manifest = ctx.program.manifest
    stats = manifest["stats"]
    host = [layer["op"] for layer in manifest["layers"] if layer["kind"] == "host"]
    assert host == HOST_OPS.get(name, []), "\n".join(ctx.report)
    assert stats["host_macs"] == 0 and stats["npu_macs"] > 0

    golden = GoldenModel(ctx.program, cfg)
    interp = Interpreter(graph)
    for k, (x, ref) in enumerate(invocations(name)):
        got = golden.invoke({"TosaInput_0": x})["TosaOutput_0"]
        want = interp.run({"TosaInput_0": x})["TosaOutput_0"]
        assert want.dtype == ref.dtype and np.array_equal(want, ref)
        assert got.dtype == ref.dtype and got.shape == ref.shape and np.array_equal(got, ref), \
            f"{name} on {config}, invocation {k}: golden {got.tolist()} != reference {ref.tolist()}"

    # The counters add up: every tile is one unit command; the command processor's clocks are its
    # two per command, the compute and VAR units' clocks and its waits (the DMA engine runs beside
    # it: its clocks count only where the command processor waited for it).
    c = golden.counters
    runs = len(invocations(name))
    units = Counter(cmd.opcode.name for cmd in ctx.program.commands)
    assert c.tiles == runs * (units["MAC"] + units["ELTWISE"] + units["POOL"])
    assert c.cycles == sum(c.invocation_cycles) and len(c.invocation_cycles) == runs
    u = c.unit_cycles
    assert c.cycles == u["command"] + u["mac"] + u["eltwise"] + u["pool"] + u["var"] + u["stall"]
    assert u["dma"] > 0 and c.host_cycles == u["host"]
    tiles_by_unit = Counter(t.get("unit", "MAC") for layer in manifest["layers"] for t in layer["tiles"])
    print(f"\n{name} on {config}: {stats['tiles']} tiles {dict(tiles_by_unit)}, "
          f"NPU MACs {stats['npu_macs']} of {stats['npu_macs'] + stats['host_macs']}, "
          f"{stats['commands']} commands, {c.cycles // runs} cycles per invocation")
