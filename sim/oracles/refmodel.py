"""Arm's TOSA reference model on a whole .tosa file, through its command line.

It is the external oracle of the chain of trust; it comes with the `test` extra (tosa-tools), so
`run_reference` returns None when it is not installed instead of failing the product.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from firmware_model.errors import NpuBenchError


def reference_model_binary() -> str | None:
    local = Path(sys.executable).parent / "tosa_reference_model"
    return str(local) if local.exists() else shutil.which("tosa_reference_model")


def run_reference(model: str | Path, inputs: dict[str, np.ndarray], output_names: list[str]) -> dict | None:
    exe = reference_model_binary()
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(prefix="refmodel-") as tmp:
        tmp = Path(tmp)
        in_files = []
        for i, (name, value) in enumerate(inputs.items()):
            f = tmp / f"in{i}.npy"
            np.save(f, value)
            in_files.append(str(f))
        out_files = [str(tmp / f"out{i}.npy") for i in range(len(output_names))]
        cmd = [exe, "--tosa_file", str(Path(model).resolve()), "--ifm_name", ",".join(inputs),
               "--ifm_file", ",".join(in_files), "--ofm_name", ",".join(output_names),
               "--ofm_file", ",".join(out_files)]
        env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no message"]
            raise NpuBenchError(f"{model}: Arm's reference model failed (exit {proc.returncode}): {tail[0]}")
        return {name: np.load(f) for name, f in zip(output_names, out_files)}
