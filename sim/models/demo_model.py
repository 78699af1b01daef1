"""The demo network of `make sim`: one int8 convolution layer as a real .tosa file.

    CONV2D 3x3, 8 -> 16 channels, pad 1 (input zero point -3, weight zero point 2, int32 bias)
    RESCALE per channel to int8 (scale32, double rounding, output zero point 5)

`python -m sim.models.demo_model [OUTDIR]` writes model.mlir (TOSA MLIR, seeded weights), serialises it
with tosa-tools' `tosa-opt --tosa-serialize` into model.tosa, and stores an input and Arm's
reference model's output beside it. The committed copy lives in models/demo_conv/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from sim.models.mlir_graphs import const, module, serialize, tensor_type, tool
from sim.paths import MODELS_DIR

DEMO_DIR = MODELS_DIR / "demo_conv"
H = W = 48
CIN, COUT, K = 8, 16, 3
SEED = 2026


def demo_mlir() -> str:
    rng = np.random.default_rng(SEED)
    weights = rng.integers(-128, 128, (COUT, K, K, CIN), dtype=np.int64).astype(np.int8)
    bias = rng.integers(-40000, 40000, COUT)
    multiplier = rng.integers(1 << 30, (1 << 31) - 1, COUT)
    shift = rng.integers(38, 41, COUT)
    t_in, t_acc, t_out = (tensor_type((1, H, W, CIN), "i8"), tensor_type((1, H, W, COUT), "i32"),
                          tensor_type((1, H, W, COUT), "i8"))
    t_w, t_c32, t_c8 = tensor_type((COUT, K, K, CIN), "i8"), tensor_type((COUT,), "i32"), tensor_type((COUT,), "i8")
    body = [
        const("weights", weights, "i8"),
        const("bias", bias, "i32"),
        const("input_zp", [-3], "i8"),
        const("weight_zp", [2], "i8"),
        const("multiplier", multiplier, "i32"),
        const("shift", shift, "i8"),
        const("acc_zp", [0], "i32"),
        const("output_zp", [5], "i8"),
        f"    %conv = tosa.conv2d %arg0, %weights, %bias, %input_zp, %weight_zp {{acc_type = i32, "
        f"dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}} : "
        f"({t_in}, {t_w}, {t_c32}, tensor<1xi8>, tensor<1xi8>) -> {t_acc}",
        f"    %out = tosa.rescale %conv, %multiplier, %shift, %acc_zp, %output_zp {{input_unsigned = false, "
        f"output_unsigned = false, per_channel = true, rounding_mode = DOUBLE_ROUND, scale32 = true}} : "
        f"({t_acc}, {t_c32}, {t_c8}, tensor<1xi32>, tensor<1xi8>) -> {t_out}",
    ]
    return module([("arg0", t_in)], [t_out], body, ["out"])


def make_demo(outdir: Path = DEMO_DIR) -> None:
    serialize(demo_mlir(), outdir)
    x = np.random.default_rng(SEED + 1).integers(-128, 128, (1, H, W, CIN)).astype(np.int8)
    np.save(outdir / "input_0.npy", x)
    env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
    subprocess.run([tool("tosa_reference_model"), "--tosa_file", "model.tosa", "--ifm_name", "TosaInput_0",
                    "--ifm_file", "input_0.npy", "--ofm_name", "TosaOutput_0", "--ofm_file", "ref_output_0.npy"],
                   cwd=outdir, check=True, env=env, stdout=subprocess.DEVNULL)
    y = np.load(outdir / "ref_output_0.npy")
    # The same io.json form as the real networks' (sim/models/model_data.py reads both)
    (outdir / "io.json").write_text(json.dumps({
        "model": "demo_conv",
        "description": "demo: CONV2D 3x3 8->16 (zero points, int32 bias) + per-channel RESCALE to int8",
        "invocations": 1, "stateful": False,
        "inputs": [{"name": "TosaInput_0", "shape": list(x.shape), "dtype": str(x.dtype), "tosa_dtype": "INT8",
                    "files": ["input_0.npy"]}],
        "outputs": [{"name": "TosaOutput_0", "shape": list(y.shape), "dtype": str(y.dtype), "tosa_dtype": "INT8",
                     "files": ["ref_output_0.npy"]}],
        "variables": [], "reference": "tosa_reference_model (tosa-tools 2026.8.0)"}, indent=1) + "\n")


if __name__ == "__main__":
    make_demo(Path(sys.argv[1]) if len(sys.argv) > 1 else DEMO_DIR)
