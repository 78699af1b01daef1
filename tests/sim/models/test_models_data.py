"""The real int8 networks committed in models/ (made by `make models`, sim/models/make_models.py).

Light checks that need no tensorflow: the files are there, shapes and dtypes match io.json, the
flatbuffers are TOSA, the committed model.mlir serialises to the committed model.tosa byte for
byte, and Arm's reference model reproduces every committed reference output exactly — for the
stateful lstm and gru over their 3 invocations with the state carried over from one to the next.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from sim.paths import MODELS_DIR
from sim.models import make_models as mm

NAMES = list(mm.MODELS)
STATEFUL = ["lstm", "gru"]
STATELESS = [n for n in NAMES if n not in STATEFUL]


def _io(name: str) -> dict:
    return json.loads((MODELS_DIR / name / "io.json").read_text())


def _all_files(io: dict) -> list[str]:
    files = ["model.tosa", "model.mlir", "io.json", "tosa_ops.txt"]
    files += [f for t in io["inputs"] + io["outputs"] for f in t["files"]]
    files += [f for v in io["variables"] for f in v["state_before"] + v["state_after"]]
    if io["tflite"]["committed"]:
        files.append("model.tflite")
    return files


@pytest.mark.parametrize("name", NAMES)
def test_files_present_and_listed(name):
    io = _io(name)
    assert io["model"] == name
    folder = MODELS_DIR / name
    expected = set(_all_files(io))
    # Vela's estimates (sim/benchmarks/vela_figures.py) sit beside the files `make models` makes
    assert {p.name for p in folder.iterdir()} - {"vela_summary.json"} == expected
    assert all((folder / f).stat().st_size > 0 for f in expected)


def test_models_are_small():
    # ~0.87 MB for the five small networks plus ~0.65 MB for blazeface (29.6 M MACs, 80 K int8
    # weights, held in model.tflite, in model.tosa and as hex text in model.mlir)
    total = sum(p.stat().st_size for n in NAMES for p in (MODELS_DIR / n).iterdir())
    assert total < 1_800_000, f"models/ holds {total} bytes of generated networks"


@pytest.mark.parametrize("name", NAMES)
def test_arrays_match_io_json(name):
    io = _io(name)
    folder = MODELS_DIR / name
    assert len(io["inputs"]) == 1 and len(io["outputs"]) >= 1
    for t in io["inputs"] + io["outputs"]:
        assert len(t["files"]) == io["invocations"]
        assert t["dtype"] == "int8" and t["tosa_dtype"] == "INT8"
        assert isinstance(t["scale"], float) and t["scale"] > 0
        assert -128 <= t["zero_point"] <= 127
        for f in t["files"]:
            a = np.load(folder / f)
            assert a.dtype == np.int8, f
            assert list(a.shape) == t["shape"], f
    for v in io["variables"]:
        assert len(v["state_before"]) == io["invocations"] and len(v["state_after"]) == 1
        for f in v["state_before"] + v["state_after"]:
            a = np.load(folder / f)
            assert a.dtype == np.int8 and list(a.shape) == v["shape"], f
    # inputs differ between invocations (otherwise carrying state over tests little)
    if io["invocations"] > 1:
        xs = [np.load(folder / f) for f in io["inputs"][0]["files"]]
        assert not any(np.array_equal(xs[0], x) for x in xs[1:])


@pytest.mark.parametrize("name", NAMES)
def test_tosa_flatbuffer_matches_io_json_and_ops_list(name):
    io = _io(name)
    folder = MODELS_DIR / name
    buf = (folder / "model.tosa").read_bytes()
    assert buf[4:8] == b"TOSA"
    g = mm.read_graph(folder / "model.tosa")
    assert [t["name"] for t in g["inputs"]] == [t["name"] for t in io["inputs"]]
    assert [t["shape"] for t in g["inputs"]] == [t["shape"] for t in io["inputs"]]
    assert [t["name"] for t in g["outputs"]] == [t["name"] for t in io["outputs"]]
    assert [t["shape"] for t in g["outputs"]] == [t["shape"] for t in io["outputs"]]
    assert [(v["name"], v["variable_name"], v["shape"]) for v in g["variables"]] == \
        [(v["name"], v["variable_name"], v["shape"]) for v in io["variables"]]
    assert g["histogram"] == io["tosa"]["histogram"]
    assert g["bytes"] == io["tosa"]["bytes"] == len(buf)
    assert (folder / "tosa_ops.txt").read_text() == mm.format_ops(g)
    assert io["stateful"] == (name in STATEFUL) == bool(g["variables"])


def test_networks_cover_the_npu_ops():
    hist = {n: _io(n)["tosa"]["histogram"] for n in NAMES}
    for op in ("CONV2D", "DEPTHWISE_CONV2D", "MAX_POOL2D", "REDUCE_SUM", "TABLE", "RESCALE"):
        assert hist["cnn32"].get(op, 0) >= 1, op
    for op in ("REDUCE_MAX", "CLZ", "TABLE", "MUL"):
        assert hist["mlp"].get(op, 0) >= 1, op
    assert hist["lstm"]["IDENTITY"] == 4  # 2 variable reads, 2 writes
    assert hist["gru"]["IDENTITY"] == 2  # 1 variable read, 1 write
    assert hist["gru"].get("SUB", 0) >= 1
    for op in ("ADD", "AVG_POOL2D", "MAX_POOL2D", "CONV2D"):
        assert hist["resnet_pool"].get(op, 0) >= 1, op
    for op in ("DEPTHWISE_CONV2D", "ADD", "MAX_POOL2D", "PAD", "CONCAT", "RESHAPE"):
        assert hist["blazeface"].get(op, 0) >= 1, op


@pytest.mark.parametrize("name", NAMES)
def test_committed_mlir_serialises_to_committed_tosa(name, tmp_path):
    folder = MODELS_DIR / name
    text = (folder / "model.mlir").read_text()
    assert "unrealized_conversion_cast" not in text
    shutil.copyfile(folder / "model.mlir", tmp_path / "model.mlir")
    mm.serialise("model.mlir", "model.tosa", tmp_path)
    assert (tmp_path / "model.tosa").read_bytes() == (folder / "model.tosa").read_bytes()


@pytest.mark.parametrize("name", STATELESS)
def test_reference_outputs_reproduce(name):
    io = _io(name)
    folder = MODELS_DIR / name
    x = np.load(folder / io["inputs"][0]["files"][0])
    outs = mm.run_reference(folder / "model.tosa", {io["inputs"][0]["name"]: x}, [o["name"] for o in io["outputs"]])
    for o, got in zip(io["outputs"], outs):
        want = np.load(folder / o["files"][0])
        assert got.dtype == want.dtype and np.array_equal(got, want), o["files"][0]


@pytest.mark.parametrize("name", STATEFUL)
def test_stateful_reference_over_invocations_with_state_carried(name, tmp_path):
    """lstm, gru: 3 invocations; the state the graph writes in invocation k is the state of k+1."""
    io = _io(name)
    folder = MODELS_DIR / name
    g = mm.read_graph(folder / "model.tosa")
    # the state graph (model.mlir plus the written values as extra results), made afresh here
    text, symbols = mm.state_graph_mlir((folder / "model.mlir").read_text())
    (tmp_path / "model_state.mlir").write_text(text)
    mm.serialise("model_state.mlir", "model_state.tosa", tmp_path)
    gs = mm.read_graph(tmp_path / "model_state.tosa")
    by_symbol = {v["variable_name"]: v["name"] for v in g["variables"]}
    assert sorted(symbols) == sorted(by_symbol) and len(gs["outputs"]) == len(g["outputs"]) + len(symbols)

    in_name = io["inputs"][0]["name"]
    out_names = [o["name"] for o in io["outputs"]]
    state = mm.initial_state(g)  # the flatbuffer's initial values
    variables = {v["name"]: v for v in io["variables"]}
    for k in range(io["invocations"]):
        for name, arr in state.items():
            want = np.load(folder / variables[name]["state_before"][k])
            assert np.array_equal(arr, want), f"state of {name} before invocation {k}"
        x = np.load(folder / io["inputs"][0]["files"][k])
        outs = mm.run_reference(folder / "model.tosa", {in_name: x}, out_names, state)
        full = mm.run_reference(tmp_path / "model_state.tosa", {in_name: x}, [o["name"] for o in gs["outputs"]], state)
        for o, got, got_full in zip(io["outputs"], outs, full):
            want = np.load(folder / o["files"][k])
            assert np.array_equal(got, want), o["files"][k]
            assert np.array_equal(got_full, want), o["files"][k]
        new_state = {by_symbol[s]: a for s, a in zip(symbols, full[len(out_names):])}
        assert set(new_state) == set(state)
        assert all(not np.array_equal(new_state[n], state[n]) for n in state), f"invocation {k} left a state unchanged"
        state = new_state
    for name, arr in state.items():
        assert np.array_equal(arr, np.load(folder / variables[name]["state_after"][0]))


@pytest.mark.parametrize("name", STATEFUL)
def test_state_from_numpy_changes_the_output(name):
    """Guard: the reference model really takes the state from the files (a different state, a
    different answer), so the carried-over check above cannot pass by ignoring it."""
    io = _io(name)
    folder = MODELS_DIR / name
    x = np.load(folder / io["inputs"][0]["files"][1])
    state = {v["name"]: np.load(folder / v["state_before"][0]) for v in io["variables"]}
    out = mm.run_reference(folder / "model.tosa", {io["inputs"][0]["name"]: x}, [io["outputs"][0]["name"]], state)[0]
    assert not np.array_equal(out, np.load(folder / io["outputs"][0]["files"][1]))


def test_fold_noop_casts():
    text = ("    %5 = tosa.variable_read @\"v\" : tensor<1x2xi8>\n"
            "    %6 = builtin.unrealized_conversion_cast %5 : tensor<1x2xi8> to tensor<1x2xi8>\n"
            "    %7 = tosa.add %6, %60 : (tensor<1x2xi8>, tensor<1x2xi8>) -> tensor<1x2xi8>\n"
            "    return %6 : tensor<1x2xi8>\n")
    out, n = mm.fold_noop_casts(text)
    assert n == 1
    assert out == ("    %5 = tosa.variable_read @\"v\" : tensor<1x2xi8>\n"
                   "    %7 = tosa.add %5, %60 : (tensor<1x2xi8>, tensor<1x2xi8>) -> tensor<1x2xi8>\n"
                   "    return %5 : tensor<1x2xi8>\n")
    bad = "    %6 = builtin.unrealized_conversion_cast %5 : tensor<1x2xi8> to tensor<2xi8>\n"
    with pytest.raises(mm.ModelGenError, match="not a no-op"):
        mm.fold_noop_casts(bad)


def test_state_graph_mlir_appends_written_values():
    text = ('func.func @main(%arg0: tensor<2xi8> {a = ["x"]}) -> (tensor<2xi8> {b = ["y"]}) attributes {c} {\n'
            '    tosa.variable_write @"s/a", %3 : tensor<1x2xi8>\n'
            '    tosa.variable_write @"s/b", %4 : tensor<1x3xi8>\n'
            '    tosa.variable_write @"s/a", %5 : tensor<1x2xi8>\n'
            '    return %9 : tensor<2xi8>\n'
            '  }\n')
    out, names = mm.state_graph_mlir(text)
    assert names == ["s/a", "s/b"]
    assert '-> (tensor<2xi8> {b = ["y"]}, tensor<1x2xi8>, tensor<1x3xi8>) attributes {c} {' in out
    assert "    return %9, %5, %4 : tensor<2xi8>, tensor<1x2xi8>, tensor<1x3xi8>\n" in out
