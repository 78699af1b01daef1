"""Arm's TOSA reference model as an oracle for single-op (or small) graphs.

Tests and benchmarks describe an op once, as an `OpCase` (inputs with their DType and whether they
are CONST or graph inputs, output specs, attributes under the TOSA schema's field names); from it
this module builds both

- a `.tosa` flatbuffer with tosa-tools' serializer, run by Arm's reference model in-process
  (`tosa_reference_model.run`) or through its command line (`tosa_reference_model` executable), and
- the `OpCall` our kernels receive (`firmware_model.tosa_ops.registry`).

The in-process binding cannot pass INT48 tensors in or out ("Unsupported tensor DType: INT48"), so
`run_reference(..., mode="auto")` falls back to the command line for those graphs.

tosa-tools is a test-time dependency (the `test` extra): nothing in the product imports this module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import OpCall, TensorSpec

# Every ERROR_IF in the reference model otherwise starts gdb for a backtrace (0.4 s each).
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")

VALID, ERROR, UNPREDICTABLE = "VALID", "ERROR", "UNPREDICTABLE"


@dataclass
class Operand:
    data: np.ndarray          # in the DType's storage type (int48 as int64)
    dtype: DType
    const: bool = False       # CONST op in the graph (True) or a graph input (False)


@dataclass
class OpCase:
    op: str
    inputs: list[Operand]
    outputs: list[TensorSpec]
    attrs: dict[str, Any] = field(default_factory=dict)

    def op_call(self) -> OpCall:
        return OpCall(
            op=self.op,
            attrs=dict(self.attrs),
            inputs=[o.data for o in self.inputs],
            input_specs=[TensorSpec(tuple(o.data.shape), o.dtype) for o in self.inputs],
            output_specs=list(self.outputs),
            where=f"oracle case {self.op}",
        )

    @property
    def uses_int48(self) -> bool:
        return any(o.dtype == DType.INT48 and not o.const for o in self.inputs) or any(
            s.dtype == DType.INT48 for s in self.outputs)


@dataclass
class RefResult:
    status: str                       # VALID, ERROR or UNPREDICTABLE
    outputs: list[np.ndarray | None]
    log: str = ""


def _ts():
    import tosa_serializer as ts  # tosa-tools' C++ serializer binding
    return ts


def _attribute(ts, op: str, a: dict[str, Any]):
    attr = ts.TosaSerializerAttribute()
    D = ts.DType
    if op == "CONV2D":
        attr.Conv2dAttribute(list(a["pad"]), list(a["stride"]), list(a["dilation"]),
                             bool(a.get("local_bound", False)), D(int(a["acc_type"])))
    elif op == "DEPTHWISE_CONV2D":
        attr.DepthwiseConv2dAttribute(list(a["pad"]), list(a["stride"]), list(a["dilation"]),
                                      bool(a.get("local_bound", False)), D(int(a["acc_type"])))
    elif op == "TRANSPOSE_CONV2D":
        attr.TransposeConv2dAttribute(list(a["out_pad"]), list(a["stride"]),
                                      bool(a.get("local_bound", False)), D(int(a["acc_type"])))
    elif op == "MATMUL":
        attr.MatMulAttribute()
    elif op == "AVG_POOL2D":
        attr.AvgPool2dAttribute(list(a["kernel"]), list(a["stride"]), list(a["pad"]),
                                D(int(a["acc_type"])))
    elif op == "MAX_POOL2D":
        attr.MaxPool2dAttribute(list(a["kernel"]), list(a["stride"]), list(a["pad"]),
                                ts.NanPropagationMode(int(a.get("nan_mode", 1))))
    elif op == "RESCALE":
        attr.RescaleAttribute(bool(a["scale32"]), ts.RoundingMode(int(a["rounding_mode"])),
                              bool(a["per_channel"]), bool(a["input_unsigned"]),
                              bool(a["output_unsigned"]))
    elif op == "TABLE":
        attr.TableAttribute()
    else:
        raise ValueError(f"arm_oracle: no attribute builder for {op}")
    return attr


def build_graph(case: OpCase) -> tuple[bytes, list[np.ndarray]]:
    """Serialize `case` as a one-op graph; returns the flatbuffer and the graph inputs' data."""
    ts = _ts()
    ser = ts.TosaSerializer()
    names, feeds = [], []
    for o in case.inputs:
        dt = ts.DType(int(o.dtype))
        if o.const:
            t = ser.addConst(list(o.data.shape), dt, np.ascontiguousarray(o.data))
        else:
            t = ser.addPlaceholder(list(o.data.shape), dt)
            feeds.append(np.ascontiguousarray(o.data))
        names.append(t.name)
    outs = [ser.addOutput(list(s.shape), ts.DType(int(s.dtype))).name for s in case.outputs]
    ser.addOperator(getattr(ts.Op, case.op), names, outs, _attribute(ts, case.op, case.attrs))
    return ser.serialize(), feeds


@contextlib.contextmanager
def quiet_fds():
    """Silence the reference model's C++ logging (it writes to fds 1 and 2 directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def run_inprocess(graph: bytes, feeds: list[np.ndarray], quiet: bool = True) -> RefResult:
    import tosa_reference_model as trm
    ctx = quiet_fds() if quiet else contextlib.nullcontext()
    try:
        with ctx:
            outs, status = trm.run(graph, feeds)
    except ValueError as e:  # "Invalid TOSA graph": the model refused to build the op
        return RefResult(ERROR, [], str(e))
    name = status.name
    st = {"TOSA_VALID": VALID, "TOSA_ERROR": ERROR, "TOSA_UNPREDICTABLE": UNPREDICTABLE}.get(name, name)
    return RefResult(st, list(outs) if st == VALID else [])


def refmodel_cli() -> str:
    exe = Path(sys.executable).with_name("tosa_reference_model")
    if exe.exists():
        return str(exe)
    found = shutil.which("tosa_reference_model")
    if not found:
        raise FileNotFoundError("tosa_reference_model executable not found (install tosa-tools)")
    return found


def run_cli_files(workdir: Path, n_inputs: int, n_outputs: int) -> subprocess.CompletedProcess:
    """Run the reference model's command line on workdir/test.tosa with input-N.npy files."""
    cmd = [refmodel_cli(), "--tosa_file", "test.tosa", "--flatbuffer_dir", str(workdir),
           "--output_dir", str(workdir)]
    if n_inputs:
        cmd += ["--ifm_name", ",".join(f"input-{i}" for i in range(n_inputs)),
                "--ifm_file", ",".join(f"input-{i}.npy" for i in range(n_inputs))]
    cmd += ["--ofm_name", ",".join(f"result-{i}" for i in range(n_outputs)),
            "--ofm_file", ",".join(f"out-{i}.npy" for i in range(n_outputs))]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)


def run_cli(graph: bytes, feeds: list[np.ndarray], n_outputs: int) -> RefResult:
    with tempfile.TemporaryDirectory(prefix="npu-oracle-") as tmp:
        d = Path(tmp)
        (d / "test.tosa").write_bytes(graph)
        for i, a in enumerate(feeds):
            np.save(d / f"input-{i}.npy", a)
        r = run_cli_files(d, len(feeds), n_outputs)
        status = {0: VALID, 1: UNPREDICTABLE, 2: ERROR}.get(r.returncode, f"rc={r.returncode}")
        outs = []
        if status == VALID:
            outs = [np.load(d / f"out-{i}.npy") for i in range(n_outputs)]
        return RefResult(status, outs, (r.stdout + r.stderr)[-2000:])


def run_reference(case: OpCase, mode: str = "auto") -> RefResult:
    """Run `case` on Arm's reference model. mode: "inprocess", "cli" or "auto"."""
    graph, feeds = build_graph(case)
    if mode == "cli" or (mode == "auto" and case.uses_int48):
        res = run_cli(graph, feeds, len(case.outputs))
    else:
        res = run_inprocess(graph, feeds)
    return res
