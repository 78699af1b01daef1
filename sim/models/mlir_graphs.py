"""Writing small TOSA graphs as MLIR text and serialising them with tosa-tools' `tosa-opt`.

Used by the demo model and by tests that need real .tosa files of particular shapes. tosa-opt
comes with the `test` extra (tosa-tools); this module is never imported by the product code paths.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from firmware_model.errors import NpuBenchError

def tensor_type(shape, elem: str) -> str:
    dims = "x".join(str(int(d)) for d in shape)
    return f"tensor<{dims}x{elem}>" if dims else f"tensor<{elem}>"


def dense(values: np.ndarray, mlir_type: str) -> str:
    """An MLIR dense literal: a splat when all values are equal, else the raw little-endian bytes."""
    values = np.asarray(values)
    flat = values.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return f"dense<{int(flat[0])}> : {mlir_type}"
    return f'dense<"0x{np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes().hex().upper()}"> : {mlir_type}'


NUMPY_OF = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i48": np.int64, "i64": np.int64}


def const(name: str, values, elem: str, shape=None) -> str:
    """An MLIR line defining %name as a tosa.const of `values` with element type `elem`."""
    values = np.asarray(values).astype(NUMPY_OF[elem])
    ty = tensor_type(values.shape if shape is None else shape, elem)
    if elem == "i48" and values.ndim == 1:   # no raw-byte form for a 48-bit type: a list literal
        literal = f"dense<[{', '.join(str(int(v)) for v in values)}]> : {ty}"
        return f'    %{name} = "tosa.const"() <{{values = {literal}}}> : () -> {ty}'
    return f'    %{name} = "tosa.const"() <{{values = {dense(values, ty)}}}> : () -> {ty}'


def module(args: list[tuple[str, str]], results: list[str], body: list[str], returns: list[str]) -> str:
    """A `func.func @main` module: args (name, type), result types, body lines, returned values."""
    sig = ", ".join(f"%{n}: {t}" for n, t in args)
    lines = ["module {", f"  func.func @main({sig}) -> ({', '.join(results)}) {{", *body,
             f"    return {', '.join('%' + r for r in returns)} : {', '.join(results)}", "  }", "}"]
    return "\n".join(lines) + "\n"


def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


def serialize(mlir_text: str, outdir: Path, stem: str = "model") -> Path:
    """Write stem.mlir and serialise it to stem.tosa in `outdir` (relative paths: deterministic bytes)."""
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / f"{stem}.mlir").write_text(mlir_text)
    proc = subprocess.run([tool("tosa-opt"), f"{stem}.mlir", "--tosa-serialize",
                           f"--tosa-flatbuffer-filename={stem}.tosa", "-o", os.devnull],
                          cwd=outdir, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NpuBenchError(f"{outdir / (stem + '.mlir')}: tosa-opt failed: {proc.stderr.strip()[:2000]}")
    return outdir / f"{stem}.tosa"


def conv_layer_mlir(rng, op: str, shape, kernel, stride, dilation, pad, cout=None, clamp=True):
    """MLIR text of a (depthwise) CONV2D + per-channel RESCALE (+ CLAMP) graph with seeded constants."""
    H, W, C = shape
    kh, kw = kernel
    OH = (H - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    OW = (W - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    OC = C if op == "depthwise_conv2d" else cout
    wshape = (kh, kw, C, 1) if op == "depthwise_conv2d" else (OC, kh, kw, C)
    tin, tacc, tout = (tensor_type((1, H, W, C), "i8"), tensor_type((1, OH, OW, OC), "i32"),
                       tensor_type((1, OH, OW, OC), "i8"))
    tw, tc32, tc8 = tensor_type(wshape, "i8"), tensor_type((OC,), "i32"), tensor_type((OC,), "i8")
    body = [const("w", rng.integers(-128, 128, wshape), "i8"), const("b", rng.integers(-9000, 9000, OC), "i32"),
            const("izp", [int(rng.integers(-128, 128))], "i8"), const("wzp", [int(rng.integers(-128, 128))], "i8"),
            const("m", rng.integers(1 << 30, (1 << 31) - 1, OC), "i32"), const("s", rng.integers(31, 40, OC), "i8"),
            const("azp", [0], "i32"), const("ozp", [int(rng.integers(-20, 20))], "i8"),
            f"    %c = tosa.{op} %x, %w, %b, %izp, %wzp {{acc_type = i32, dilation = array<i64: {dilation[0]}, "
            f"{dilation[1]}>, pad = array<i64: {', '.join(map(str, pad))}>, stride = array<i64: {stride[0]}, "
            f"{stride[1]}>}} : ({tin}, {tw}, {tc32}, tensor<1xi8>, tensor<1xi8>) -> {tacc}",
            f"    %r = tosa.rescale %c, %m, %s, %azp, %ozp {{input_unsigned = false, output_unsigned = false, "
            f"per_channel = true, rounding_mode = DOUBLE_ROUND, scale32 = true}} : ({tacc}, {tc32}, {tc8}, "
            f"tensor<1xi32>, tensor<1xi8>) -> {tout}"]
    last = "r"
    if clamp:
        body.append(f"    %o = tosa.clamp %r {{max_val = 100 : i8, min_val = -90 : i8}} : ({tout}) -> {tout}")
        last = "o"
    return module([("x", tin)], [tout], body, [last])



def residual_block_mlir(rng, shape, kernel=(3, 3)):
    """MLIR text of a BlazeBlock-like residual block with seeded constants: a depthwise layer and a
    1x1 layer (each CONV + per-channel RESCALE), the block's input added back (TFLite's quantised
    ADD: each operand RESCALEd to int32 by a pure shift, then scaled; the sum RESCALEd to int8 and
    CLAMPed), and the next block's depthwise layer over the sum. With C not a whole number of SRAM
    words, the compiler's padded layout carries the 1x1 result into the ADD and the sum into the
    last layer on chip (compiler/passes/cascading.py)."""
    H, W, C = shape
    kh, kw = kernel
    t8, t32 = tensor_type((1, H, W, C), "i8"), tensor_type((1, H, W, C), "i32")
    tc32, tc8 = tensor_type((C,), "i32"), tensor_type((C,), "i8")
    t1 = {"i8": "tensor<1xi8>", "i32": "tensor<1xi32>"}
    per_tensor = ("{input_unsigned = false, output_unsigned = false, per_channel = false, "
                  "rounding_mode = DOUBLE_ROUND, scale32 = true}")
    per_channel = per_tensor.replace("per_channel = false", "per_channel = true")
    body = [const("zp0_8", [0], "i8"), const("zp0_32", [0], "i32")]

    def zp(name):
        body.append(const(name, [int(rng.integers(-20, 20))], "i8"))
        return name

    def conv(name, x, xzp, depthwise):
        wshape, pad = ((kh, kw, C, 1), [kh // 2, kh // 2, kw // 2, kw // 2]) if depthwise else ((C, 1, 1, C), [0] * 4)
        ozp = zp(f"{name}_ozp")
        body.extend([
            const(f"{name}_w", rng.integers(-128, 128, wshape), "i8"),
            const(f"{name}_b", rng.integers(-9000, 9000, C), "i32"),
            const(f"{name}_m", rng.integers(1 << 30, (1 << 31) - 1, C), "i32"),
            const(f"{name}_s", rng.integers(33, 38, C), "i8"),
            f"    %{name}_c = tosa.{'depthwise_conv2d' if depthwise else 'conv2d'} %{x}, %{name}_w, %{name}_b, "
            f"%{xzp}, %zp0_8 {{acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: "
            f"{', '.join(map(str, pad))}>, stride = array<i64: 1, 1>}} : ({t8}, {tensor_type(wshape, 'i8')}, "
            f"{tc32}, {t1['i8']}, {t1['i8']}) -> {t32}",
            f"    %{name} = tosa.rescale %{name}_c, %{name}_m, %{name}_s, %zp0_32, %{ozp} {per_channel} : "
            f"({t32}, {tc32}, {tc8}, {t1['i32']}, {t1['i8']}) -> {t8}"])
        return name, ozp

    def rescale(name, x, in_e, out_e, m, s, izp, ozp):
        body.extend([const(f"{name}_m", [m], "i32"), const(f"{name}_s", [s], "i8"),
                     f"    %{name} = tosa.rescale %{x}, %{name}_m, %{name}_s, %{izp}, %{ozp} {per_tensor} : "
                     f"({t8 if in_e == 'i8' else t32}, {t1['i32']}, {t1['i8']}, {t1[in_e]}, {t1[out_e]}) -> "
                     f"{t8 if out_e == 'i8' else t32}"])
        return name

    def to_int32(name, x, xzp):
        # x - zp shifted left by 20 (2^30 >> 10), then scaled to the sum's scale
        shifted = rescale(f"{name}_sh", x, "i8", "i32", 1 << 30, 10, xzp, "zp0_32")
        return rescale(name, shifted, "i32", "i32", int(rng.integers(1 << 30, (1 << 31) - 1)), 32, "zp0_32", "zp0_32")

    xzp = zp("xzp")
    dw1, dw1_zp = conv("dw1", "x", xzp, True)
    pw, pw_zp = conv("pw", dw1, dw1_zp, False)
    a, b = to_int32("a32", "x", xzp), to_int32("b32", pw, pw_zp)
    body.append(f"    %sum32 = tosa.add %{a}, %{b} : ({t32}, {t32}) -> {t32}")
    sum_zp = zp("sum_zp")
    s8 = rescale("sum8", "sum32", "i32", "i8", int(rng.integers(1 << 30, (1 << 31) - 1)), 49, "zp0_32", sum_zp)
    body.append(f"    %sum = tosa.clamp %{s8} {{max_val = 127 : i8, min_val = -128 : i8}} : ({t8}) -> {t8}")
    dw2, _ = conv("dw2", "sum", sum_zp, True)
    return module([("x", t8)], [t8], body, [dw2])
