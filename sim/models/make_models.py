"""`python -m sim.models.make_models`: regenerate the real int8 networks in models/ (`make models`).

Two Python environments are needed, because tensorflow wants flatbuffers>=25.9.23 and tosa-tools
pins 25.2.10:
  env A  build/models-env (made here, ~1.7 GB): tensorflow-cpu, keras, the TFLite-to-TOSA converter.
         It runs the Keras recipes in sim/models/recipes/ and the converter.
  env B  the project venv: tosa-opt (serialiser) and Arm's tosa_reference_model (the oracle).

Per network, in build/models/<name>/ with relative paths (tosa-opt stores every op's source
location, `loc("model.mlir":L:C)`, in the flatbuffer; an absolute path would make the bytes depend
on the checkout's location):
  1. env A: train a tiny Keras model on synthetic data (seeds fixed, PYTHONHASHSEED=0), quantise to
     a fully int8 TFLite model, quantise the test inputs, run TFLite's reference kernels on them;
  2. env A: tosa-converter-for-tflite model.tflite --text -o model.raw.mlir;
  3. fold the converter's no-op `builtin.unrealized_conversion_cast %x : T to T` (around variable
     reads and writes; the serialiser rejects them) -> model.mlir;
  4. tosa-opt: validate against TOSA 1.0 (recorded, not fatal), then serialise -> model.tosa;
  5. tosa_reference_model -> ref_output_0*.npy. For a stateful network, a second graph (only in
     build/) also returns the values written to each variable: the reference model cannot dump
     more than one variable, so this is how the state after each invocation is obtained; the next
     invocation starts from it (`--initialize_variable_tensor_from_numpy`), and the real model.tosa
     must give the same outputs from the same state.
  6. io.json (names, shapes, dtypes, scale/zero point, files, variables, TFLite agreement) and
     tosa_ops.txt (op histogram); then the folder's files replace models/<name>/.

This is a generation script like the conformance scripts: it uses tosa-tools (reference model,
tosa-opt and its flatbuffer classes), which the project itself never imports at run time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from sim.paths import REPO_ROOT
from firmware_model.errors import NpuBenchError

ROOT = REPO_ROOT
RECIPES_DIR = ROOT / "sim" / "models" / "recipes"
ENV_DIR = ROOT / "build" / "models-env"
WORK_DIR = ROOT / "build" / "models"
MODELS_DIR = ROOT / "models"

MODELS = ("cnn32", "mlp", "lstm", "resnet_pool", "gru", "blazeface")

# env A, pinned: keras and numpy too, since they decide the trained weights (and lstm.py uses
# keras' private backend API).
ENV_A_PACKAGES = (
    "tensorflow-cpu==2.21.0",
    "keras==3.15.1",
    "numpy==2.4.6",
    "tosa-converter-for-tflite==2026.2.0",
)

TOSA_1_0_PIPELINE = ("builtin.module(tosa-attach-target{specification_version=1.0 profiles=pro_int "
                     "level=8k extensions=int16,doubleround,variable},"
                     "tosa-validate{strict-op-spec-alignment})")

TFLITE_COMMIT_LIMIT = 256 * 1024  # commit model.tflite only when it is small


class ModelGenError(NpuBenchError):
    """A step of `make models` failed."""


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def _tool(name: str) -> str:
    path = _venv_bin() / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise ModelGenError(f"{name} not found (it comes with tosa-tools in the project venv: run `make setup`)")
    return found


def _run(cmd: list[str], cwd: Path, what: str, env: dict | None = None, log: Path | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if log is not None:
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ModelGenError(f"{what} failed (exit {proc.returncode}) in {cwd}: {' '.join(cmd)}\n{tail}")
    return proc.stdout


# ---------------------------------------------------------------------------------------------
# env A

def _env_stamp() -> Path:
    digest = hashlib.sha256("\n".join(ENV_A_PACKAGES).encode()).hexdigest()[:12]
    return ENV_DIR / f".npu-models-env-{digest}"


def ensure_env_a() -> Path:
    """Create build/models-env with ENV_A_PACKAGES once; return its python."""
    py = ENV_DIR / "bin" / "python"
    if _env_stamp().exists() and py.exists():
        return py
    if ENV_DIR.exists():
        shutil.rmtree(ENV_DIR)
    print(f"make_models: creating env A in {ENV_DIR.relative_to(ROOT)} ({', '.join(ENV_A_PACKAGES)}; ~1.7 GB)",
          flush=True)
    t0 = time.monotonic()
    _run([sys.executable, "-m", "venv", str(ENV_DIR)], ROOT, "creating env A")
    _run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *ENV_A_PACKAGES],
         ROOT, "installing env A", log=ROOT / "build" / "models-env.log")
    _env_stamp().touch()
    print(f"make_models: env A ready in {time.monotonic() - t0:.0f} s", flush=True)
    return py


def _env_a_environ() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "TF_"))}
    env.update(PYTHONHASHSEED="0", TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="", PATH=f"{ENV_DIR / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


# ---------------------------------------------------------------------------------------------
# MLIR text transforms (also used by tests/test_models_data.py)

_VALUE = r"%[\w$.#-]+"
_CAST = re.compile(rf"^[ \t]*({_VALUE}) = builtin\.unrealized_conversion_cast ({_VALUE}) : (\S+) to (\S+)[ \t]*\n",
                   re.M)


def fold_noop_casts(text: str) -> tuple[str, int]:
    """Remove `%r = builtin.unrealized_conversion_cast %x : T to T` and use %x for %r.

    Returns the new text and the number of casts folded. A cast between different types is not a
    no-op: it is an error (the serialiser could not handle it either)."""
    casts = _CAST.findall(text)
    for res, src, t_from, t_to in casts:
        if t_from != t_to:
            raise ModelGenError(f"unrealized_conversion_cast {res} converts {t_from} to {t_to}: not a no-op")
    text = _CAST.sub("", text)
    for res, src, _, _ in casts:
        text = re.sub(re.escape(res) + r"(?![\w$.#-])", src, text)
    return text, len(casts)


_WRITE = re.compile(rf'tosa\.variable_write @("[^"]+"|[\w$.-]+), ({_VALUE}) : (\S+)')


def _matching_paren(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "(<[{":
            depth += 1
        elif text[i] in ")>]}":
            depth -= 1
            if depth == 0:
                return i
    raise ModelGenError("unbalanced brackets in the func.func signature")


def state_graph_mlir(text: str) -> tuple[str, list[str]]:
    """The same graph, with the value last written to each variable appended to @main's results.

    Returns the text and the variables' symbol names, in the order of the extra results."""
    writes: dict[str, tuple[str, str]] = {}
    for name, value, ty in _WRITE.findall(text):
        writes[name.strip('"')] = (value, ty)  # the last write wins
    if not writes:
        raise ModelGenError("the graph writes no variable: it has no state to return")
    names = list(writes)
    extra_vals = ", ".join(writes[n][0] for n in names)
    extra_types = ", ".join(writes[n][1] for n in names)

    m = re.search(r"func\.func @main\(", text)
    if m is None:
        raise ModelGenError("no func.func @main in the MLIR")
    args_end = _matching_paren(text, m.end() - 1)
    arrow = text.index("->", args_end)
    i = arrow + 2
    while text[i] == " ":
        i += 1
    if text[i] == "(":
        close = _matching_paren(text, i)
        text = text[:close] + f", {extra_types}" + text[close:]
    else:  # a single result without parentheses: `-> tensor<...> attributes {...}` or `-> tensor<...> {`
        j = _matching_paren(text, text.index("<", i)) + 1
        text = text[:i] + "(" + text[i:j] + f", {extra_types})" + text[j:]

    rets = list(re.finditer(r"^([ \t]*)(?:func\.)?return (.+) : (.+)$", text, re.M))
    if len(rets) != 1:
        raise ModelGenError(f"expected one return in the MLIR, found {len(rets)}")
    r = rets[0]
    new = f"{r.group(1)}return {r.group(2)}, {extra_vals} : {r.group(3)}, {extra_types}"
    return text[:r.start()] + new + text[r.end():], names


def serialise(mlir_name: str, tosa_name: str, cwd: Path) -> None:
    """tosa-opt MLIR -> flatbuffer, run in `cwd` with relative names (see the module doc)."""
    _run([_tool("tosa-opt"), mlir_name, "--tosa-serialize", f"--tosa-flatbuffer-filename={tosa_name}",
          "-o", os.devnull], cwd, f"tosa-opt --tosa-serialize {mlir_name}")


def validate_tosa_1_0(mlir_name: str, cwd: Path) -> str:
    proc = subprocess.run([_tool("tosa-opt"), mlir_name, f"--pass-pipeline={TOSA_1_0_PIPELINE}", "-o", os.devnull],
                          cwd=cwd, capture_output=True, text=True)
    if proc.returncode == 0:
        return "pass"
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    return "fail: " + " | ".join(errors[:3])


# ---------------------------------------------------------------------------------------------
# The flatbuffer, read with tosa-tools' generated classes

def read_graph(path: Path) -> dict:
    """Summary of a .tosa file: version, main block inputs/outputs/variables and op histogram."""
    from tosa.Attribute import Attribute
    from tosa.DType import DType
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph

    op_names = {v: k for k, v in vars(Op).items() if not k.startswith("_")}
    dt_names = {v: k for k, v in vars(DType).items() if not k.startswith("_")}
    attr_names = {v: k for k, v in vars(Attribute).items() if not k.startswith("_")}
    buf = path.read_bytes()
    if not TosaGraph.TosaGraphBufferHasIdentifier(buf, 0):
        raise ModelGenError(f"{path}: not a TOSA flatbuffer (no 'TOSA' identifier)")
    g = TosaGraph.GetRootAs(buf, 0)
    v = g.Version()
    region = g.Regions(0)
    block = region.Blocks(0)
    tensors = {}
    for i in range(block.TensorsLength()):
        t = block.Tensors(i)
        tensors[t.Name().decode()] = t

    def desc(name: str) -> dict:
        t = tensors[name]
        return {"name": name, "shape": [int(s) for s in t.ShapeAsNumpy()] if t.ShapeLength() else [],
                "dtype": dt_names[t.Type()]}

    ops = Counter()
    var_ops = Counter()
    for i in range(block.OperatorsLength()):
        op = block.Operators(i)
        ops[op_names[op.Op()]] += 1
        if op.AttributeType() in (Attribute.VariableReadAttribute, Attribute.VariableWriteAttribute):
            var_ops[attr_names[op.AttributeType()]] += 1
    variables = []
    for name, t in tensors.items():
        if t.Variable():
            d = desc(name)
            d["variable_name"] = t.VariableName().decode()
            d["initial"] = bytes(t.DataAsNumpy().tobytes()) if t.DataLength() else b""
            variables.append(d)
    variables.sort(key=lambda d: d["name"])
    return {
        "bytes": len(buf),
        "version": f"{v._Major()}.{v._Minor()}.{v._Patch()}{'d' if v._Draft() else ''}",
        "region": region.Name().decode(), "block": block.Name().decode(),
        "ops": block.OperatorsLength(), "tensors": block.TensorsLength(),
        "inputs": [desc(block.Inputs(i).decode()) for i in range(block.InputsLength())],
        "outputs": [desc(block.Outputs(i).decode()) for i in range(block.OutputsLength())],
        "variables": variables,
        "histogram": dict(sorted(ops.items())),
        "variable_ops": dict(sorted(var_ops.items())),
    }


def format_ops(g: dict) -> str:
    lines = [f"model.tosa: {g['bytes']} bytes, id=TOSA, TOSA version {g['version']}",
             f"region {g['region']} block {g['block']}: {g['ops']} ops, {g['tensors']} tensors"]
    for t in g["inputs"]:
        lines.append(f"input    {t['name']} {t['shape']} {t['dtype']}")
    for t in g["outputs"]:
        lines.append(f"output   {t['name']} {t['shape']} {t['dtype']}")
    for t in g["variables"]:
        lines.append(f"variable {t['name']} ({t['variable_name']}) {t['shape']} {t['dtype']}")
    lines.append("ops:")
    width = max(len(k) for k in g["histogram"])
    for k, n in g["histogram"].items():
        lines.append(f"  {k:<{width}} {n}")
    for k, n in g["variable_ops"].items():
        lines.append(f"  (IDENTITY with {k}: {n})")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Arm's reference model

def run_reference(tosa_file: Path, inputs: dict[str, np.ndarray], outputs: list[str],
                  variables: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """Run tosa_reference_model once; `variables` (tensor name -> array) set the state first.

    Everything goes through a scratch folder: after the run the reference model tries to write
    the final state back into the --variable_files (it fails with a warning when driven by
    command-line options, but the committed files must never be at risk)."""
    with tempfile.TemporaryDirectory(prefix="npu-ref-") as tmp:
        d = Path(tmp)
        cmd = [_tool("tosa_reference_model"), "--tosa_file", str(Path(tosa_file).resolve())]
        names = list(inputs)
        for i, n in enumerate(names):
            np.save(d / f"in{i}.npy", inputs[n])
        cmd += ["--ifm_name", ",".join(names), "--ifm_file", ",".join(f"in{i}.npy" for i in range(len(names)))]
        cmd += ["--ofm_name", ",".join(outputs), "--ofm_file", ",".join(f"out{i}.npy" for i in range(len(outputs)))]
        if variables:
            vnames = list(variables)
            for i, n in enumerate(vnames):
                np.save(d / f"var{i}.npy", variables[n])
            cmd += ["--variable_name", ",".join(vnames),
                    "--variable_file", ",".join(f"var{i}.npy" for i in range(len(vnames))),
                    "--initialize_variable_tensor_from_numpy", "1"]
        env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
        proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, env=env)
        missing = [o for i, o in enumerate(outputs) if not (d / f"out{i}.npy").exists()]
        if proc.returncode != 0 or missing:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
            raise ModelGenError(f"tosa_reference_model failed on {tosa_file} (exit {proc.returncode}, "
                                f"missing outputs {missing}):\n{tail}")
        return [np.load(d / f"out{i}.npy") for i in range(len(outputs))]


def initial_state(g: dict) -> dict[str, np.ndarray]:
    """Each variable's initial value (the flatbuffer's data) as an array of its shape and dtype."""
    dtypes = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}
    out = {}
    for v in g["variables"]:
        if v["dtype"] not in dtypes:
            raise ModelGenError(f"variable {v['name']}: dtype {v['dtype']} not handled")
        dt = np.dtype(dtypes[v["dtype"]]).newbyteorder("<")
        n = int(np.prod(v["shape"]))
        out[v["name"]] = np.frombuffer(v["initial"], dtype=dt, count=n).astype(dt.newbyteorder("=")).reshape(v["shape"])
    return out


def run_stateful(folder: Path, g: dict, g_state: dict, state_tosa: Path, invocations: int) -> dict:
    """Run the graph `invocations` times, the state carried over; write ref outputs and states.

    `state_tosa` returns, after the graph's own outputs, the written value of each variable
    (g_state maps those extra outputs to variables by symbol name)."""
    in_name = g["inputs"][0]["name"]
    out_names = [o["name"] for o in g["outputs"]]
    by_symbol = {v["variable_name"]: v["name"] for v in g["variables"]}
    extra = g_state["outputs"][len(out_names):]
    written_to = [by_symbol[s] for s in g_state["written_symbols"]]
    if len(extra) != len(written_to):
        raise ModelGenError(f"{state_tosa}: {len(extra)} extra outputs for {len(written_to)} written variables")

    state = initial_state(g)
    files = {"outputs": [], "state_before": [], "state_after": []}
    for k in range(invocations):
        for name, arr in state.items():
            f = f"ref_state_before_inv{k}_{name}.npy"
            np.save(folder / f, arr)
            files["state_before"].append(f)
        x = np.load(folder / f"input_0_inv{k}.npy")
        full = run_reference(state_tosa, {in_name: x}, [o["name"] for o in g_state["outputs"]], state)
        plain = run_reference(folder / "model.tosa", {in_name: x}, out_names, state)
        for i, (a, b) in enumerate(zip(plain, full)):
            if not np.array_equal(a, b):
                raise ModelGenError(f"{folder.name} invocation {k}: model.tosa and the state graph disagree "
                                    f"on output {i}")
        for i, a in enumerate(plain):
            f = f"ref_output_{i}_inv{k}.npy"
            np.save(folder / f, a)
            files["outputs"].append(f)
        new_state = dict(state)
        for name, arr in zip(written_to, full[len(out_names):]):
            new_state[name] = arr
        state = new_state
    for name, arr in state.items():
        f = f"ref_state_after_inv{invocations - 1}_{name}.npy"
        np.save(folder / f, arr)
        files["state_after"].append(f)
    return files


# ---------------------------------------------------------------------------------------------
# One network

def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _versions() -> dict:
    from importlib.metadata import version

    return {"tosa-tools": version("tosa-tools"), "tosa-converter-for-tflite": ENV_A_PACKAGES[3].split("==")[1]}


def build_model(name: str, env_py: Path) -> dict:
    folder = WORK_DIR / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    t0 = time.monotonic()

    # 1. Keras -> int8 TFLite, inputs, TFLite's outputs (env A)
    _run([str(env_py), str(RECIPES_DIR / "run.py"), name, "."], folder, f"recipe {name}",
         env=_env_a_environ(), log=folder / "recipe.log")
    tfl = json.loads((folder / "tflite_io.json").read_text())

    # 2. TFLite -> TOSA MLIR text (env A)
    _run([str(ENV_DIR / "bin" / "tosa-converter-for-tflite"), "model.tflite", "--text", "-o", "model.raw.mlir"],
         folder, f"tosa-converter-for-tflite ({name})", env=_env_a_environ())

    # 3. fold no-op casts
    text, n_casts = fold_noop_casts((folder / "model.raw.mlir").read_text())
    (folder / "model.mlir").write_text(text)

    # 4. validate, serialise
    validation = validate_tosa_1_0("model.mlir", folder)
    serialise("model.mlir", "model.tosa", folder)
    g = read_graph(folder / "model.tosa")
    (folder / "tosa_ops.txt").write_text(format_ops(g))
    if len(g["inputs"]) != 1 or len(g["outputs"]) != len(tfl["outputs"]):
        raise ModelGenError(f"{name}: TOSA I/O {g['inputs']} {g['outputs']} does not match the TFLite model's")

    # 5. reference outputs
    invocations = tfl["invocations"]
    in_name = g["inputs"][0]["name"]
    out_names = [o["name"] for o in g["outputs"]]
    if g["variables"]:
        state_text, symbols = state_graph_mlir(text)
        (folder / "model_state.mlir").write_text(state_text)
        serialise("model_state.mlir", "model_state.tosa", folder)
        g_state = read_graph(folder / "model_state.tosa")
        g_state["written_symbols"] = symbols
        files = run_stateful(folder, g, g_state, folder / "model_state.tosa", invocations)
        suffixes = [f"_inv{k}" for k in range(invocations)]
    else:
        if invocations != 1:
            raise ModelGenError(f"{name}: {invocations} invocations of a graph without state")
        outs = run_reference(folder / "model.tosa", {in_name: np.load(folder / "input_0.npy")}, out_names)
        for i, a in enumerate(outs):
            np.save(folder / f"ref_output_{i}.npy", a)
        files = {"state_before": [], "state_after": []}
        suffixes = [""]

    # TFLite (reference kernels) versus the TOSA reference model
    agreement = []
    for i in range(len(out_names)):
        for s in suffixes:
            a = np.load(folder / f"ref_output_{i}{s}.npy").astype(np.int64)
            b = np.load(folder / f"tflite_output_{i}{s}.npy").astype(np.int64)
            agreement.append({"file": f"ref_output_{i}{s}.npy", "elements": int(a.size),
                              "differ": int(np.count_nonzero(a != b)),
                              "max_abs_diff": int(np.abs(a - b).max())})

    # 6. io.json
    commit_tflite = (folder / "model.tflite").stat().st_size <= TFLITE_COMMIT_LIMIT
    io = {
        "model": name,
        "description": tfl["description"],
        "invocations": invocations,
        "stateful": bool(g["variables"]),
        "inputs": [dict(g["inputs"][0], dtype=tfl["input"]["dtype"], tosa_dtype=g["inputs"][0]["dtype"],
                        tflite_name=tfl["input"]["tflite_name"], scale=tfl["input"]["scale"],
                        zero_point=tfl["input"]["zero_point"],
                        files=[f"input_0{s}.npy" for s in suffixes])],
        "outputs": [dict(o, dtype=t["dtype"], tosa_dtype=o["dtype"], tflite_name=t["tflite_name"],
                         scale=t["scale"], zero_point=t["zero_point"],
                         files=[f"ref_output_{i}{s}.npy" for s in suffixes])
                    for i, (o, t) in enumerate(zip(g["outputs"], tfl["outputs"]))],
        "variables": [{"name": v["name"], "variable_name": v["variable_name"], "shape": v["shape"],
                       "dtype": v["dtype"],
                       "state_before": [f for f in files["state_before"] if f.endswith(f"_{v['name']}.npy")],
                       "state_after": [f for f in files["state_after"] if f.endswith(f"_{v['name']}.npy")]}
                      for v in g["variables"]],
        "tosa": {"bytes": g["bytes"], "version": g["version"], "ops": g["ops"], "tensors": g["tensors"],
                 "histogram": g["histogram"], "tosa_1_0_validation": validation,
                 "noop_casts_folded": n_casts},
        "tflite": {"bytes": tfl["tflite_bytes"], "committed": commit_tflite, "ops": tfl["tflite_ops"],
                   "keras_params": tfl["keras_params"], "train_loss": tfl.get("train_loss")},
        "tflite_vs_tosa_reference": agreement,
        "versions": dict(tfl["versions"], **_versions()),
    }
    (folder / "io.json").write_text(json.dumps(io, indent=1) + "\n")

    # publish: models/<name>/ gets exactly the generated files
    keep = ["model.tosa", "model.mlir", "io.json", "tosa_ops.txt"] + (["model.tflite"] if commit_tflite else [])
    keep += [f"input_0{s}.npy" for s in suffixes]
    keep += [f"ref_output_{i}{s}.npy" for i in range(len(out_names)) for s in suffixes]
    keep += files["state_before"] + files["state_after"]
    dest = MODELS_DIR / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in keep:
        shutil.copyfile(folder / f, dest / f)
    size = sum((dest / f).stat().st_size for f in keep)
    print(f"make_models: {name}: {g['ops']} ops, {len(keep)} files, {size} bytes, "
          f"model.tosa sha256 {_sha256(dest / 'model.tosa')[:16]}, TOSA 1.0 validation {validation.split(':')[0]}, "
          f"{time.monotonic() - t0:.1f} s", flush=True)
    return io


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="regenerate the real int8 networks in models/ (needs ~1.7 GB in build/)")
    ap.add_argument("--only", choices=MODELS, action="append", help="only this network (repeatable)")
    ap.add_argument("--keep-env", action="store_true",
                    help="keep env A (build/models-env, ~1.7 GB) for the next run instead of deleting it")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        env_py = ensure_env_a()
        try:
            for name in args.only or MODELS:
                build_model(name, env_py)
        finally:
            if not args.keep_env:
                shutil.rmtree(ENV_DIR, ignore_errors=True)
    except NpuBenchError as e:
        print(f"make_models: error: {e}", file=sys.stderr)
        return 2
    print(f"make_models: done in {time.monotonic() - t0:.0f} s (models in {MODELS_DIR.relative_to(ROOT)}/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
