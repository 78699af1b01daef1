"""Shared steps of the Keras recipes (runs in env A: tensorflow-cpu 2.21, never in the project venv).

A recipe module defines:
    NAME            folder name under models/
    DESCRIPTION     one line for io.json
    INPUT_NAME      the Keras Input's name (becomes `serving_default_<name>:0` in the .tflite)
    INPUT_SHAPE     the shape of one invocation's input, batch 1 included
    STATEFUL        True when the network keeps state between invocations (resource variables)
    INVOCATIONS     how many invocations the reference data covers (state carried over)
    build(rng)      -> (a trained Keras model, ready to export (batch fixed to 1 when stateful),
                        the training loss per epoch)
    representative(rng) -> list of float32 arrays of INPUT_SHAPE (calibration set)
    test_inputs(rng)    -> list of INVOCATIONS float32 arrays of INPUT_SHAPE

`run(recipe, outdir)` fixes every seed, trains, exports a SavedModel, converts it to a fully
int8 TFLite model (int8 inputs and outputs), quantises the test inputs with the model's own input
scale and zero point, runs TFLite's interpreter on them (state carried over) and writes:
    model.tflite, input_0.npy | input_0_inv{k}.npy, tflite_output_0[_inv{k}].npy, tflite_io.json
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

SEED = 20260

# Determinism before TensorFlow is imported: one thread, no oneDNN reordering of float sums.
os.environ.setdefault("PYTHONHASHSEED", "0")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras  # noqa: E402


def seed_everything(seed: int = SEED) -> np.random.Generator:
    random.seed(seed)
    np.random.seed(seed)
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    return np.random.default_rng(seed)


def _suffix(recipe, k: int) -> str:
    return f"_inv{k}" if recipe.INVOCATIONS > 1 else ""


def convert(saved_model_dir: Path, representative: list, stateful: bool) -> bytes:
    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir))
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def rep():
        for x in representative:
            yield [x.astype(np.float32)]

    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    if stateful:
        conv.experimental_enable_resource_variables = True
        conv._experimental_variable_quantization = True
    return conv.convert()


def quantise(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    q = np.round(x.astype(np.float64) / scale) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)


def _detail(d: dict) -> dict:
    scale, zp = d["quantization"]
    return {"tflite_name": d["name"], "shape": [int(s) for s in d["shape"]],
            "dtype": np.dtype(d["dtype"]).name, "scale": float(scale), "zero_point": int(zp)}


def run(recipe, outdir: Path) -> None:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = seed_everything()
    model, losses = recipe.build(rng)
    if recipe.STATEFUL:
        for layer in model.layers:
            if getattr(layer, "stateful", False):
                layer.reset_state()

    saved = outdir / "_saved_model"
    shutil.rmtree(saved, ignore_errors=True)
    spec = tf.TensorSpec(tuple(recipe.INPUT_SHAPE), tf.float32, name=recipe.INPUT_NAME)
    model.export(str(saved), format="tf_saved_model", input_signature=[spec], verbose=False)

    tflite = convert(saved, recipe.representative(rng), recipe.STATEFUL)
    shutil.rmtree(saved, ignore_errors=True)
    (outdir / "model.tflite").write_bytes(tflite)

    interp = tf.lite.Interpreter(model_content=tflite, experimental_op_resolver_type=
                                 tf.lite.experimental.OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    ins, outs = interp.get_input_details(), interp.get_output_details()
    if len(ins) != 1:
        raise SystemExit(f"{recipe.NAME}: expected one input, the .tflite has {len(ins)}")
    inp = _detail(ins[0])
    if inp["dtype"] != "int8" or inp["shape"] != list(recipe.INPUT_SHAPE):
        raise SystemExit(f"{recipe.NAME}: input is {inp}, expected int8 {recipe.INPUT_SHAPE}")

    tests = recipe.test_inputs(rng)
    assert len(tests) == recipe.INVOCATIONS
    for k, x in enumerate(tests):
        q = quantise(x, inp["scale"], inp["zero_point"])
        np.save(outdir / f"input_0{_suffix(recipe, k)}.npy", q)
        interp.set_tensor(ins[0]["index"], q)
        interp.invoke()  # resource variables persist: the state carries over
        for i, o in enumerate(outs):
            np.save(outdir / f"tflite_output_{i}{_suffix(recipe, k)}.npy", interp.get_tensor(o["index"]))

    info = {
        "model": recipe.NAME,
        "description": recipe.DESCRIPTION,
        "invocations": recipe.INVOCATIONS,
        "stateful": bool(recipe.STATEFUL),
        "keras_params": int(model.count_params()),
        "train_loss": [round(float(v), 4) for v in losses],
        "tflite_bytes": len(tflite),
        "tflite_ops": sorted({interp._get_op_details(i)["op_name"]
                              for i in range(len(interp._get_ops_details()))}),
        "input": inp,
        "outputs": [_detail(o) for o in outs],
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }
    (outdir / "tflite_io.json").write_text(json.dumps(info, indent=1) + "\n")
