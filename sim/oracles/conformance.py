"""Arm's TOSA conformance tests (integer profile) against npu-bench.

    python -m sim.oracles.conformance all            generate the tests here (fixed seeds), run them
    python -m sim.oracles.conformance dev [TARBALL]  run an already-made set (default: the shared
                                             cts-dev.tar.gz), unpacked under build/
    python -m sim.oracles.conformance slice [OUT]    regenerate the compact slice committed for `make test`

Every mode runs Arm's own runner (`tosa_verif_run_tests`) with npu-bench as the system under
test (`--sut-module sim.oracles.tosa_sut`) on a copy of the tests, prints the runner's Totals lines, then
replays every `sequence.json` (multi-invocation variable tests) with the interpreter, step by
step, checking outputs and variable state bit for bit. Exit status 0 when the SUT has no
unexpected result, no internal error and every sequence step matches.

Generation uses Arm's `tosa_verif_build_tests` with the flags of the shared conformance README;
the variable tests are written here as TOSA MLIR, serialised with `tosa-opt --tosa-serialize`,
and their expected results made by Arm's reference model, step by step with the state carried
over (`--variable_file`). Negative variable tests (read/write with a wrong shape or type) are
built with tosa-tools' serializer, because MLIR's verifier rejects them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from sim.paths import REPO_ROOT

ROOT = REPO_ROOT
BUILD = ROOT / "build" / "conformance"
BIN = Path(sys.executable).parent
SHARED_DEV = Path(os.environ.get("NPU_SHARED", ROOT.parent / "shared")) / "conformance" / "cts-dev.tar.gz"

# The ops of Arm's developer set (README of the shared conformance folder) ...
ARM_SET_OPS = ["add", "sub", "mul", "clamp", "maximum", "minimum", "logical_left_shift",
               "logical_right_shift", "arithmetic_right_shift", "rescale", "table", "conv2d",
               "depthwise_conv2d", "transpose_conv2d", "matmul", "avg_pool2d", "max_pool2d",
               "reshape", "transpose", "concat", "pad", "slice", "tile"]
# ... and the other integer ops npu-bench implements.
EXTRA_OPS = ["abs", "argmax", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cast",
             "clz", "equal", "gather", "greater", "greater_equal", "identity", "intdiv",
             "logical_and", "logical_not", "logical_or", "logical_xor", "negate", "reduce_all",
             "reduce_any", "reduce_max", "reduce_min", "reduce_sum", "resize", "reverse",
             "scatter", "select", "const", "conv3d"]
ELEMENTWISE = ["add", "sub", "mul", "maximum", "minimum", "logical_left_shift", "logical_right_shift",
               "arithmetic_right_shift", "clamp", "bitwise_and", "bitwise_or", "bitwise_xor",
               "intdiv", "logical_and", "logical_or", "logical_xor", "equal", "greater",
               "greater_equal", "select", "abs", "negate", "clz", "bitwise_not", "logical_not"]

COMMON_FLAGS = ["--profile", "tosa-pro-int", "--extension", "tosa-ext-int16", "tosa-ext-doubleround",
                "--target-dtype", "bool", "int8", "int16", "int32", "int48"]

# (name, ops, flags, seed): the passes of the README (main set, ranks 4-6, larger shapes).
PASSES = [
    ("main", ARM_SET_OPS + EXTRA_OPS,
     ["--tensor-dim-range", "1,16", "--max-batch-size", "1", "--test-type", "both"], 42),
    ("rank456", ELEMENTWISE,
     ["--target-rank", "4", "5", "6", "--tensor-dim-range", "1,5", "--test-type", "positive"], 42),
    ("large", ["matmul", "table"] + ELEMENTWISE,
     ["--tensor-dim-range", "1,24", "--max-batch-size", "2", "--test-type", "positive"], 42),
]


def _env() -> dict:
    env = dict(os.environ)
    env["TOSA_MODEL_NO_BACKTRACE"] = "1"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _filter(ops) -> str:
    return "(" + "|".join(sorted(set(ops))) + ")$"


# ---- generating Arm's tests -----------------------------------------------------------------

def build_arm_tests(out: Path, passes=PASSES, jobs: int = 2, extra_flags=()) -> None:
    """Run tosa_verif_build_tests for every pass, one process per op (two at a time).

    With some seeds Arm's generator crashes on one of its tests (seen: a tensor with a 0
    dimension); such an op is retried with the next seed (at most twice) without
    regenerating the others."""
    out.mkdir(parents=True, exist_ok=True)
    jobs_list = []
    for name, ops, flags, seed in passes:
        for op in sorted(set(ops)):
            jobs_list.append((out / f"{name}-{op}", [op], flags, seed))

    def run(job):
        folder, group, flags, seed = job
        last = ""
        for attempt in range(3):
            if folder.exists():
                shutil.rmtree(folder)
            cmd = [str(BIN / "tosa_verif_build_tests"), "-o", str(folder), "--seed", str(seed + attempt),
                   *COMMON_FLAGS, "--filter", _filter(group), *flags, *extra_flags]
            r = subprocess.run(cmd, capture_output=True, text=True, env=_env())
            if r.returncode == 0:
                tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
                return f"{folder.name} (seed {seed + attempt}): {tail}"
            last = f"{' '.join(cmd)} failed:\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}"
        raise RuntimeError(last)

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        for line in ex.map(run, jobs_list):
            print(f"  generator: {line}")


# ---- variable tests ------------------------------------------------------------------------

_MLIR_T = {"i8": (np.int8, "INT8"), "i16": (np.int16, "INT16"), "i32": (np.int32, "INT32")}


def _ttype(shape, t) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + f"{t}>"


def _dense(arr: np.ndarray) -> str:
    def rec(a):
        if a.ndim == 0:
            return str(int(a))
        return "[" + ", ".join(rec(x) for x in a) + "]"
    return f"dense<{rec(arr)}>"


def _values(rng, shape, t, lo=None, hi=None):
    dt = _MLIR_T[t][0]
    info = np.iinfo(dt)
    lo = info.min // 4 if lo is None else lo
    hi = info.max // 4 if hi is None else hi
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt)


def _variable_cases(rng):
    """(name, mlir, inputs per step [list of arrays], state outputs {var: output index})."""
    cases = []
    steps = 4

    def inputs(shape, t, lo=None, hi=None):
        return [[_values(rng, shape, t, lo, hi)] for _ in range(steps)]

    # Accumulator: out0 = old state, out1 = new state = old + x.
    for shape in ([3], [4, 5], [2, 3, 4]):
        T = _ttype(shape, "i32")
        init = _values(rng, shape, "i32")
        mlir = f"""module {{
  tosa.variable @acc = {_dense(init)} : {T}
  func.func @main(%arg0: {T} {{tosa.tensor_name = "input-0"}}) -> ({T} {{tosa.tensor_name = "result-0"}}, {T} {{tosa.tensor_name = "result-1"}}) {{
    %v0 = tosa.variable_read @acc : {T}
    %v1 = tosa.add %v0, %arg0 : ({T}, {T}) -> {T}
    tosa.variable_write @acc, %v1 : {T}
    %v2 = tosa.variable_read @acc : {T}
    return %v0, %v2 : {T}, {T}
  }}
}}
"""
        cases.append((f"accum_{'x'.join(map(str, shape))}_i32", mlir, inputs(shape, "i32"), {"acc": 1}))
    # Delay line: out0 = previous input, out1 = state after (this input).
    for shape, t in (([5], "i8"), ([3, 4], "i16"), ([2, 2, 3], "i32")):
        T = _ttype(shape, t)
        init = _values(rng, shape, t)
        mlir = f"""module {{
  tosa.variable @d = {_dense(init)} : {T}
  func.func @main(%arg0: {T} {{tosa.tensor_name = "input-0"}}) -> ({T} {{tosa.tensor_name = "result-0"}}, {T} {{tosa.tensor_name = "result-1"}}) {{
    %v0 = tosa.variable_read @d : {T}
    tosa.variable_write @d, %arg0 : {T}
    %v1 = tosa.variable_read @d : {T}
    return %v0, %v1 : {T}, {T}
  }}
}}
"""
        cases.append((f"delay_{'x'.join(map(str, shape))}_{t}", mlir, inputs(shape, t), {"d": 1}))
    # Running maximum.
    shape = [6, 7]
    T = _ttype(shape, "i32")
    mlir = f"""module {{
  tosa.variable @m = {_dense(_values(rng, shape, "i32"))} : {T}
  func.func @main(%arg0: {T} {{tosa.tensor_name = "input-0"}}) -> ({T} {{tosa.tensor_name = "result-0"}}) {{
    %v0 = tosa.variable_read @m : {T}
    %v1 = tosa.maximum %v0, %arg0 : ({T}, {T}) -> {T}
    tosa.variable_write @m, %v1 : {T}
    %v2 = tosa.variable_read @m : {T}
    return %v2 : {T}
  }}
}}
"""
    cases.append(("runmax_6x7_i32", mlir, inputs(shape, "i32"), {"m": 0}))
    # Counter without inputs (rank 0).
    T = "tensor<i32>"
    mlir = f"""module {{
  tosa.variable @cnt = dense<{int(rng.integers(-1000, 1000))}> : {T}
  func.func @main() -> ({T} {{tosa.tensor_name = "result-0"}}) {{
    %c = "tosa.const"() <{{values = dense<3> : {T}}}> : () -> {T}
    %v0 = tosa.variable_read @cnt : {T}
    %v1 = tosa.add %v0, %c : ({T}, {T}) -> {T}
    tosa.variable_write @cnt, %v1 : {T}
    %v2 = tosa.variable_read @cnt : {T}
    return %v2 : {T}
  }}
}}
"""
    cases.append(("counter_0_i32", mlir, [[] for _ in range(steps)], {"cnt": 0}))
    # Two variables, a shift register: b <- a, a <- x.
    shape = [4, 3]
    T = _ttype(shape, "i16")
    mlir = f"""module {{
  tosa.variable @a = {_dense(_values(rng, shape, "i16"))} : {T}
  tosa.variable @b = {_dense(_values(rng, shape, "i16"))} : {T}
  func.func @main(%arg0: {T} {{tosa.tensor_name = "input-0"}}) -> ({T} {{tosa.tensor_name = "result-0"}}, {T} {{tosa.tensor_name = "result-1"}}, {T} {{tosa.tensor_name = "result-2"}}) {{
    %a0 = tosa.variable_read @a : {T}
    %b0 = tosa.variable_read @b : {T}
    tosa.variable_write @b, %a0 : {T}
    tosa.variable_write @a, %arg0 : {T}
    %a1 = tosa.variable_read @a : {T}
    %b1 = tosa.variable_read @b : {T}
    return %b0, %a1, %b1 : {T}, {T}, {T}
  }}
}}
"""
    cases.append(("shiftreg2_4x3_i16", mlir, inputs(shape, "i16"), {"a": 1, "b": 2}))
    # Shifted accumulate with clamp on int8 state: s = clamp(s >> 1 + x).
    shape = [8]
    T8 = _ttype(shape, "i8")
    mlir = f"""module {{
  tosa.variable @s = {_dense(_values(rng, shape, "i8"))} : {T8}
  func.func @main(%arg0: {T8} {{tosa.tensor_name = "input-0"}}) -> ({T8} {{tosa.tensor_name = "result-0"}}) {{
    %one = "tosa.const"() <{{values = dense<1> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %v0 = tosa.variable_read @s : {T8}
    %h = tosa.arithmetic_right_shift %v0, %one {{round = true}} : ({T8}, tensor<1xi8>) -> {T8}
    %x = tosa.bitwise_xor %h, %arg0 : ({T8}, {T8}) -> {T8}
    %c = tosa.clamp %x {{min_val = -100 : i8, max_val = 100 : i8}} : ({T8}) -> {T8}
    tosa.variable_write @s, %c : {T8}
    %v2 = tosa.variable_read @s : {T8}
    return %v2 : {T8}
  }}
}}
"""
    cases.append(("shiftxor_8_i8", mlir, inputs(shape, "i8"), {"s": 0}))
    return cases


def _run_ref(test_dir: Path, desc_file: Path, ifm_files, ofm_files, var_tensors=(), var_files=()):
    cmd = [str(BIN / "tosa_reference_model"), "--test_desc", str(desc_file),
           "--ofm_file", ",".join(ofm_files)]
    if ifm_files:
        cmd += ["--ifm_file", ",".join(ifm_files)]
    if var_tensors:
        cmd += ["--variable_name", ",".join(var_tensors), "--variable_file", ",".join(var_files),
                "--initialize_variable_tensor_from_numpy", "1"]
    r = subprocess.run(cmd, cwd=test_dir, capture_output=True, text=True, env=_env())
    if r.returncode != 0:
        raise RuntimeError(f"reference model failed in {test_dir} ({r.returncode}): {r.stdout[-1500:]}{r.stderr[-1500:]}")


def _variable_tensor_names(tosa_path: Path) -> dict[str, str]:
    """variable_name -> tensor name, read with the project's reader."""
    from compiler.tosa_io import read_tosa
    g = read_tosa(tosa_path)
    return {t.variable_name or t.name: t.name for b in g.blocks() for t in b.variables()}


def build_variable_tests(out: Path, seed: int = 7) -> int:
    """Write the variable tests (positive with sequence.json, and negative) under out/."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, mlir, step_inputs, state_out in _variable_cases(rng):
        d = out / f"variable_{name}"
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        (d / "test.mlir").write_text(mlir)
        r = subprocess.run([str(BIN / "tosa-opt"), "test.mlir",
                            "--tosa-serialize=retain-graph-input-output-names=true "
                            "tosa-flatbuffer-filename=test.tosa", "-o", "/dev/null"],
                           cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"tosa-opt failed for {name}: {r.stderr[-2000:]}")
        n_in = len(step_inputs[0])
        n_out = len(re.findall(r'tosa.tensor_name = "result-', mlir))
        out_dtypes = []
        ifm_name = [f"input-{i}" for i in range(n_in)]
        desc = {"tosa_file": "test.tosa", "ifm_name": ifm_name,
                "ifm_file": [f"input-{i}.npy" for i in range(n_in)],
                "ofm_name": [f"result-{i}" for i in range(n_out)],
                "ofm_file": [f"ref-result-{i}.npy" for i in range(n_out)],
                "expected_failure": False, "version": "1.2",
                "test_requirements": {"profiles_supported": ["tosa-pro-int"],
                                      "extensions_required": ["tosa-ext-variable"],
                                      "bounds_file_required": False}}
        (d / "desc.json").write_text(json.dumps(desc, indent=1))
        var_tensor = _variable_tensor_names(d / "test.tosa")
        steps = []
        prev_state: dict[str, str] = {}
        for k, arrays in enumerate(step_inputs):
            suffix = "" if k == 0 else f".step{k}"
            ifm = [f"input-{i}{suffix}.npy" for i in range(n_in)]
            for f, a in zip(ifm, arrays):
                np.save(d / f, a)
            ofm = [f"expected_ref-result-{i}{suffix}.npy" for i in range(n_out)]
            vars_ = sorted(prev_state)
            _run_ref(d, d / "desc.json", ifm, ofm, [var_tensor[v] for v in vars_],
                     [prev_state[v] for v in vars_])
            state_after = {}
            for var, idx in state_out.items():
                f = f"expected_state-{var}.step{k}.npy"
                np.save(d / f, np.load(d / ofm[idx]))
                state_after[var] = f
            prev_state = state_after
            steps.append({"ifm_file": ifm, "expected_ofm_file": ofm, "variable_state_after": state_after})
        # compliance metadata so that the runner compares outputs bit for bit (EXACT)
        outs0 = [np.load(d / f) for f in steps[0]["expected_ofm_file"]]
        desc["meta"] = {"compliance": {"version": "1.2", "tensors": {
            f"result-{i}": {"mode": "EXACT", "data_type": _dtype_name(a), "shape": list(a.shape)}
            for i, a in enumerate(outs0)}}}
        (d / "desc.json").write_text(json.dumps(desc, indent=1))
        seq = {"description": "Run test.tosa num_steps times in one session; variable state persists "
                              "between invocations (step 0 starts from the initial values stored in "
                              "the flatbuffer). Compare every step's outputs and state exactly.",
               "num_steps": len(steps),
               "variables": [{"variable_name": v, "tensor_name": var_tensor[v]} for v in sorted(state_out)],
               "steps": steps}
        (d / "sequence.json").write_text(json.dumps(seq, indent=1))
        n += 1
    n += _negative_variable_tests(out, rng)
    return n


def _dtype_name(a: np.ndarray) -> str:
    return {np.dtype(np.int8): "INT8", np.dtype(np.int16): "INT16", np.dtype(np.int32): "INT32",
            np.dtype(np.bool_): "BOOL", np.dtype(np.int64): "INT48"}[a.dtype]


def _negative_variable_tests(out: Path, rng) -> int:
    """Reads and writes whose shape or type differs from the variable's: TOSA_ERROR."""
    from serializer.tosa_serializer import TosaSerializer, TosaSerializerAttribute
    import tosa.DType as TD
    import tosa.Op as TO

    DT, OP = TD.DType(), TO.Op()
    cases = [("ReadShapeMismatch_4x4_i32", "read", [4, 4], DT.INT32, [4, 3], DT.INT32),
             ("WriteShapeMismatch_5x2_i32", "write", [5, 2], DT.INT32, [5, 3], DT.INT32),
             ("ReadTypeMismatch_6_i16", "read", [6], DT.INT16, [6], DT.INT32),
             ("WriteTypeMismatch_3x3_i8", "write", [3, 3], DT.INT8, [3, 3], DT.INT16)]
    np_of = {DT.INT8: np.int8, DT.INT16: np.int16, DT.INT32: np.int32}
    for name, kind, vshape, vtype, tshape, ttype in cases:
        d = out / f"variable_ERRORIF_{name}"
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        ser = TosaSerializer(str(d))   # starts region "main" with block "main"
        block = ser.currRegion.currBasicBlock
        init = rng.integers(-100, 100, size=vshape).astype(np_of[vtype])
        block.addTensor("Variable_0", vshape, vtype, init, is_variable=True, variable_name="v")
        read_attr = TosaSerializerAttribute()
        read_attr.VariableReadAttribute()
        write_attr = TosaSerializerAttribute()
        write_attr.VariableWriteAttribute()
        if kind == "read":
            inp = ser.addPlaceholder(vshape, vtype, rng.integers(-100, 100, size=vshape).astype(np_of[vtype]))
            res = ser.addOutput(tshape, ttype)
            ser.addOperator(OP.IDENTITY, ["Variable_0"], [res.name], read_attr)
            ser.addOperator(OP.IDENTITY, [inp.name], ["Variable_0"], write_attr)
        else:
            inp = ser.addPlaceholder(tshape, ttype, rng.integers(-100, 100, size=tshape).astype(np_of[ttype]))
            res = ser.addOutput(vshape, vtype)
            ser.addOperator(OP.IDENTITY, ["Variable_0"], [res.name], read_attr)
            ser.addOperator(OP.IDENTITY, [inp.name], ["Variable_0"], write_attr)
        (d / "test.tosa").write_bytes(ser.serialize())
        desc = json.loads(ser.writeJson("test.tosa"))
        desc["expected_failure"] = True
        desc["version"] = "1.2"
        desc["test_requirements"] = {"profiles_supported": ["tosa-pro-int"],
                                     "extensions_required": ["tosa-ext-variable"],
                                     "bounds_file_required": False}
        (d / "desc.json").write_text(json.dumps(desc, indent=1))
    return len(cases)


# ---- running ------------------------------------------------------------------------------

def ready_inputs(root: Path) -> None:
    """Make the input .npy files of tests built with lazy data (the runner would otherwise make
    them itself in each copy)."""
    from generator.datagenerator import GenerateLibrary
    import conformance.model_files as cmf
    lib = None
    for desc_p in root.rglob("desc.json"):
        desc = json.loads(desc_p.read_text())
        if all((desc_p.parent / f).exists() for f in desc.get("ifm_file", [])):
            continue
        if lib is None:
            ref = cmf.find_tosa_file(cmf.TosaFileType.REF_MODEL, None, False)
            lib = GenerateLibrary(cmf.find_tosa_file(cmf.TosaFileType.GENERATE_LIBRARY, ref))
        lib.set_config(desc)
        lib.write_numpy_files(desc_p.parent)


def run_runner(tests: Path, backend: str = "interp", jobs: int = 2, xunit: Path | None = None,
               log: Path | None = None, config: str | None = None, simulator: str | None = None) -> dict:
    """Arm's runner with npu-bench as the SUT, on `tests` (a copy: the runner renames files);
    `config` names the NPU configuration of the golden backend.
    Returns {"totals": {runner: line}, "counts": {...}, "failures": [lines]}."""
    xunit = xunit or tests.parent / f"{tests.name}.xml"
    cmd = [str(BIN / "tosa_verif_run_tests"), "-r", "-t", str(tests), "--sut-module", "sim.oracles.tosa_sut",
           "--sut-module-args", f"sim.oracles.tosa_sut:backend={backend}", "-j", str(jobs),
           "--xunit-file", str(xunit), "--no-color"]
    # one --sut-module-args with several values: the runner's option is nargs="+" without
    # "append", so a second --sut-module-args would replace the first
    if config is not None:
        cmd.insert(cmd.index("-j"), f"sim.oracles.tosa_sut:config={config}")
    if simulator is not None:
        cmd.insert(cmd.index("-j"), f"sim.oracles.tosa_sut:simulator={simulator}")
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT)
    elapsed = time.time() - t0
    text = r.stdout + r.stderr
    if log is not None:
        log.write_text(text)
    totals = {m.group(1): m.group(0) for m in re.finditer(r"Totals \(([^)]+)\): .*", text)}
    counts = {}
    line = totals.get("sim.oracles.tosa_sut", "")
    for num, what in re.findall(r"(\d+) (\w+)", line):
        counts[what] = int(num)
    failures = [l for l in text.splitlines()
                if re.match(r"(UNEXPECTED_\w+|INTERNAL_ERROR) .*\(sim\.tosa_sut\)", l)]
    return {"totals": totals, "counts": counts, "failures": failures, "elapsed": elapsed,
            "returncode": r.returncode}


def check_sequences(root: Path, backend: str = "interp", config: str | None = None,
                    simulator: str | None = None) -> tuple[int, list[str]]:
    """Replay every sequence.json under root with one session per test: an interpreter, or (backend
    golden) the compiled program on one golden model, so the variable SRAM carries the state."""
    from compiler.tosa_io import read_tosa
    from firmware_model.errors import NpuBenchError
    from sim.oracles.backends import open_session

    checked, problems = 0, []
    for seq_p in sorted(root.rglob("sequence.json")):
        d = seq_p.parent
        seq = json.loads(seq_p.read_text())
        desc = json.loads((d / "desc.json").read_text())
        try:
            graph = read_tosa(d / desc["tosa_file"])
            interp = open_session(graph, backend, config=config or "default", simulator=simulator or "verilator")
        except NpuBenchError as e:
            problems.append(f"{d.name}: cannot load: {e}")
            continue
        for k, step in enumerate(seq["steps"]):
            checked += 1
            inputs = {n: np.load(d / f) for n, f in zip(desc["ifm_name"], step["ifm_file"])}
            try:
                outs = interp.run(inputs)
            except NpuBenchError as e:
                problems.append(f"{d.name} step {k}: {type(e).__name__}: {e}")
                break
            bad = []
            for n, f in zip(desc["ofm_name"], step["expected_ofm_file"]):
                exp = np.load(d / f)
                got = outs.get(n)
                if got is None or got.dtype != exp.dtype or got.shape != exp.shape or not np.array_equal(got, exp):
                    bad.append(f"output {n}")
            state = interp.state
            for var, f in step.get("variable_state_after", {}).items():
                exp = np.load(d / f)
                got = state.get(var)
                if got is None or got.dtype != exp.dtype or got.shape != exp.shape or not np.array_equal(got, exp):
                    bad.append(f"state {var}")
            if bad:
                problems.append(f"{d.name} step {k}: mismatch in {', '.join(bad)}")
                break
    return checked, problems


def _fresh_copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def where_it_ran(run_dir: Path) -> dict:
    """The SUT's records (tosa_sut.SUT_RECORD) summed: tests with compute tiles on the NPU (each
    checked on the RTL against golden), tests whose NPU work is data movement only (the DMA; checked
    through their outputs and cycle counts), tests that ran entirely on the host CPU model, and the
    RTL tiles checked."""
    from sim.oracles.tosa_sut import SUT_RECORD

    out = {"compute": 0, "dma_only": 0, "host_only": 0, "rtl_tiles_checked": 0, "host_only_tests": []}
    for f in sorted(run_dir.rglob(SUT_RECORD)):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("compute_tiles", 0):
            out["compute"] += 1
        elif doc.get("npu_tiles", 0):
            out["dma_only"] += 1
        else:
            out["host_only"] += 1
            out["host_only_tests"].append(f.parent.name)
        out["rtl_tiles_checked"] += doc.get("rtl_tiles_checked", 0)
    return out


def report(name: str, tests: Path, backend: str, jobs: int, config: str | None = None,
           simulator: str | None = None) -> bool:
    if backend == "rtl" and simulator is None:
        simulator = "verilator"
    # a configuration given as a .toml path is named by its file's stem (the tag names folders)
    tag = f"{name}-{backend}" + (f"-{Path(config).stem}" if config else "") + (f"-{simulator}" if simulator else "")
    run_dir = _fresh_copy(tests, BUILD / f"{tag}-run")
    print(f"{name}: running {sum(1 for _ in run_dir.rglob('desc.json'))} tests through Arm's runner "
          f"(sim.oracles.tosa_sut, backend={backend}{f', config={config}' if config else ''}, -j {jobs}) "
          f"on a copy in {run_dir}")
    if backend == "rtl":
        from sim.rtl.core import cached_core

        t_build = time.time()
        built = cached_core(config or "default", simulator)
        print(f"  RTL: {simulator}, {'reused build' if built.reused else 'built'} in {time.time() - t_build:.1f} s "
              f"({built.build_dir})")
    res = run_runner(run_dir, backend=backend, jobs=jobs, xunit=BUILD / f"{tag}-results.xml",
                     log=BUILD / f"{tag}-runner.log", config=config, simulator=simulator)
    for line in res["totals"].values():
        print(line)
    print(f"  ({res['elapsed']:.1f} s; xunit: {BUILD / f'{tag}-results.xml'}; log: {BUILD / f'{tag}-runner.log'})")
    for f in res["failures"][:40]:
        print("  " + f)
    if len(res["failures"]) > 40:
        print(f"  ... and {len(res['failures']) - 40} more (see the log)")
    if backend != "interp":
        where = where_it_ran(run_dir)
        rtl = f"; {where['rtl_tiles_checked']} tiles checked on the RTL ({simulator})" if backend == "rtl" else ""
        print(f"where the work ran: {where['compute']} tests with compute tiles on the NPU, {where['dma_only']} "
              f"with data movement only (the NPU's DMA), {where['host_only']} entirely on the host CPU model "
              f"(no NPU unit implements their ops, or nothing to compute){rtl}")
    checked, problems = check_sequences(tests, backend, config, simulator)
    engine = {"interp": "the interpreter", "golden": f"the golden model ({config or 'default'})",
              "rtl": f"the RTL ({simulator}, {config or 'default'})"}[backend]
    print(f"sequences: {checked} steps checked with {engine}, {len(problems)} problems")
    for p in problems[:20]:
        print("  " + p)
    c = res["counts"]
    ok = bool(res["totals"]) and not problems and all(
        c.get(k, 0) == 0 for k in ("unexpected_pass", "unexpected_failure", "internal_error"))
    return ok


def cmd_all(args) -> int:
    gen = BUILD / "generated"
    if args.regenerate or not gen.exists():
        if gen.exists():
            shutil.rmtree(gen)
        t0 = time.time()
        print(f"generating Arm's integer-profile tests into {gen} (seed 42; takes a few minutes)")
        build_arm_tests(gen, jobs=args.jobs)
        n = build_variable_tests(gen / "variable")
        ready_inputs(gen)
        print(f"  ... and {n} variable tests; generation took {time.time() - t0:.0f} s")
    return 0 if report("generated", gen, args.backend, args.jobs, args.config, args.simulator) else 1


def cmd_dev(args) -> int:
    src = Path(args.source) if args.source else SHARED_DEV
    if src.is_dir():
        tests = src
    else:
        if not src.exists():
            print(f"conformance dev: no such set: {src}", file=sys.stderr)
            return 2
        tests = BUILD / "dev"
        stamp = tests / ".unpacked-from"
        if not (stamp.exists() and stamp.read_text() == f"{src}:{src.stat().st_mtime}"):
            if tests.exists():
                shutil.rmtree(tests)
            tests.mkdir(parents=True)
            print(f"unpacking {src} into {tests}")
            with tarfile.open(src) as tf:
                tf.extractall(tests, filter="data")
            stamp.write_text(f"{src}:{src.stat().st_mtime}")
    return 0 if report("dev", tests, args.backend, args.jobs, args.config, args.simulator) else 1


# ---- the committed slice ------------------------------------------------------------------

SLICE_FLAGS = ["--tensor-dim-range", "1,16", "--max-batch-size", "1", "--test-type", "both"]
SLICE_PER_TYPE = 2      # positive tests kept per (op, element type)
SLICE_SEED = 42
_TYPE_TOKEN = re.compile(r"_(b|i8|i16|i32|i48)(?:_|x|$)")


def _slice_key(name: str) -> str:
    """'positive:<type>' or 'negative:<rule>' for a test folder name."""
    if "_ERRORIF_" in name:
        return "negative:" + name.split("_ERRORIF_", 1)[1].split("_", 1)[0]
    m = _TYPE_TOKEN.search(name)
    return "positive:" + (m.group(1) if m else "?")


def _size(test: Path) -> int:
    return sum(f.stat().st_size for f in test.iterdir() if f.is_file())


def make_slice(out: Path, jobs: int = 2, regenerate: bool = False) -> None:
    """Generate the compact slice: Arm's generator with fixed seeds, then per op
    SLICE_PER_TYPE positive tests per element type (first and last by name) and one negative
    test per ERROR_IF rule (the smallest), plus our variable tests; the reference model's
    answers stored as expected_*.npy. The generator's output is kept in build/ and reused
    unless `regenerate`."""
    work = BUILD / "slice-work"
    done = work / ".complete"
    if regenerate or not done.exists():
        if work.exists():
            shutil.rmtree(work)
        build_arm_tests(work, [("slice", ARM_SET_OPS + EXTRA_OPS, SLICE_FLAGS, SLICE_SEED)], jobs=jobs)
        ready_inputs(work)
        done.write_text("ok")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    kept = 0
    for op_dir in sorted({p.parent.parent for p in work.rglob("desc.json")}):
        groups: dict[str, list[Path]] = {}
        for t in sorted(p.parent for p in op_dir.glob("*/desc.json")):
            groups.setdefault(_slice_key(t.name), []).append(t)
        for key, tests in sorted(groups.items()):
            # a fixed, spread-out choice: first, last and middle of the sorted names
            if key.startswith("negative"):
                picks = [min(tests, key=lambda t: (_size(t), t.name))]
            else:
                picks = [tests[0], tests[-1], tests[len(tests) // 2]][:SLICE_PER_TYPE]
            for t in dict.fromkeys(picks):
                dst = out / op_dir.name / t.name
                shutil.copytree(t, dst)
                desc = json.loads((dst / "desc.json").read_text())
                if not desc["expected_failure"]:
                    ofm = [f"expected_{f}" for f in desc["ofm_file"]]
                    _run_ref(dst, dst / "desc.json", desc["ifm_file"], ofm)
                kept += 1
    n_var = build_variable_tests(out / "variable")
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"slice: {kept} generated tests + {n_var} variable tests in {out} ({total / 1e6:.1f} MB)")


def cmd_slice(args) -> int:
    make_slice(Path(args.out), jobs=args.jobs, regenerate=args.regenerate)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.oracles.conformance", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("all", help="generate Arm's tests and our variable tests, run them")
    p.add_argument("--regenerate", action="store_true", help="generate again even if build/ has them")
    p.set_defaults(func=cmd_all)
    p = sub.add_parser("dev", help="run an existing set (a .tar.gz or a folder)")
    p.add_argument("source", nargs="?", default=None, help=f"default: {SHARED_DEV}")
    p.set_defaults(func=cmd_dev)
    p = sub.add_parser("slice", help="regenerate the committed conformance slice")
    p.add_argument("out", nargs="?", default=str(ROOT / "tests" / "data" / "conformance"))
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--regenerate", action="store_true", help="run the generator again even if build/ has its output")
    p.set_defaults(func=cmd_slice)
    for name in ("all", "dev"):
        sp = sub.choices[name]
        sp.add_argument("--backend", default="interp", choices=("interp", "golden", "rtl"),
                        help="SUT backend: the interpreter, compile + the golden model, or compile + the RTL "
                             "(every tile checked against golden)")
        sp.add_argument("--config", default=None,
                        help="NPU configuration of the golden and rtl backends (default: default)")
        sp.add_argument("--sim", dest="simulator", default=None, choices=("verilator", "icarus"),
                        help="simulator of the rtl backend (default: verilator)")
        sp.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
