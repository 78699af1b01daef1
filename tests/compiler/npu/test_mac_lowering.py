"""MAC-array lowering: compiled graphs on the golden model against Arm's reference model, on
constrained-random shapes (strides, dilations, paddings, zero points, odd channel counts) for the
tiny and default configurations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim import seeds
from sim.paths import MODELS_DIR, TEST_DATA
from compiler.npu.base import ceil_div
from compiler.pipeline import compile_file
from firmware_model.golden.mac_unit import mac_plan
from firmware_model.golden.model import GoldenModel
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import MacMode, Opcode, depthwise_mode
from sim.models.mlir_graphs import const, conv_layer_mlir, module, serialize, tensor_type
from sim.oracles.refmodel import run_reference

CONFIGS = ("tiny", "default")


def random_geometry(rng):
    while True:
        H, W = (int(v) for v in rng.integers(2, 18, 2))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
        pad = [int(v) for v in rng.integers(0, 3, 4)]
        ny = H - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]
        nx = W - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]
        if ny >= 0 and nx >= 0 and ny % stride[0] == 0 and nx % stride[1] == 0:
            return (H, W), (kh, kw), stride, dilation, pad


def check_on_configs(tmp_path, mlir: str, in_shape, rng, expect_npu: bool = True):
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, in_shape).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    for name in CONFIGS:
        cfg = load_config(name)
        ctx = compile_file(model, cfg)
        stats = ctx.program.manifest["stats"]
        if expect_npu:
            assert stats["host_macs"] == 0 and stats["npu_macs"] > 0, ctx.report
        out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
        assert out.dtype == ref.dtype and np.array_equal(out, ref), f"{name}: golden differs from the reference"


@pytest.mark.parametrize("seed", range(6))
def test_depthwise_conv2d_on_the_mac_array(tmp_path, seed):
    rng = seeds.rng(100 + seed)
    (H, W), kernel, stride, dilation, pad = random_geometry(rng)
    C = int(rng.integers(1, 37))
    mlir = conv_layer_mlir(rng, "depthwise_conv2d", (H, W, C), kernel, stride, dilation, pad, clamp=bool(seed % 2))
    check_on_configs(tmp_path, mlir, (1, H, W, C), rng)


@pytest.mark.parametrize("seed", range(8))
def test_wide_depthwise_kernels_in_window_passes(tmp_path, seed):
    """Depthwise kernel rows up to 9 taps, dilated up to 2: one to five window passes of the
    array's DEPTHWISE mode on tiny (4 lanes), one or two on default and large, or the taps packed
    4, 8 or 16 a step (DEPTHWISE_PACKED) where that streams fewer clocks; bit-exact against Arm's
    model on all three configurations, and every tile in the mode expected_window_mode gives."""
    rng = seeds.rng(300 + seed)
    while True:
        H, W = (int(v) for v in rng.integers(3, 20, 2))
        kernel = (int(rng.integers(1, 5)), int(rng.integers(4, 10)))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
        dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pad = [int(v) for v in rng.integers(0, 5, 4)]
        ny = H - 1 + pad[0] + pad[1] - (kernel[0] - 1) * dilation[0]
        nx = W - 1 + pad[2] + pad[3] - (kernel[1] - 1) * dilation[1]
        if ny >= 0 and nx >= 0 and ny % stride[0] == 0 and nx % stride[1] == 0:
            break
    C = int(rng.integers(1, 13))          # a 1x1 tile's input box (every channel word) fits tiny
    mlir = conv_layer_mlir(rng, "depthwise_conv2d", (H, W, C), kernel, stride, dilation, pad, clamp=bool(seed % 2))
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    for name in ("tiny", "default", "large"):
        cfg = load_config(name)
        ctx = compile_file(model, cfg)
        modes = {c.sub for c in ctx.program.commands if c.opcode == Opcode.MAC}
        assert modes == {expected_window_mode(cfg, kernel, dilation, nx // stride[1] + 1, stride[1])}, \
            f"{name}: MAC modes {modes}"
        out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
        assert np.array_equal(out, ref), f"{name}: golden differs from the reference"


def expected_window_mode(cfg, kernel, dilation, out_w, stride_w) -> MacMode:
    """The window mode a depthwise layer should take (docs/isa.md): the fewest stream clocks over
    an output row of `out_w` pixels, then the fewest steps, then the fewest kernel rows a step
    (DEPTHWISE_PACKED last). Per output row a step takes its window's length in words to the first
    beat, then STRIDE_W words a beat; DEPTHWISE (a step per kernel row and pass of at most
    mac.cols pixels) reads two words a clock, the grouped modes one."""
    L = cfg.mac_cols
    span = (kernel[1] - 1) * dilation[1] + 1
    if kernel[0] == 1:
        return MacMode.DEPTHWISE
    passes = [min(L, span - j) for j in range(0, span, L)]
    costs = {MacMode.DEPTHWISE: (kernel[0] * sum(ceil_div(n, 2) + (out_w - 1) * ceil_div(stride_w, 2)
                                                 for n in passes), kernel[0] * len(passes), 1)}
    for k, mode in ((2, MacMode.DEPTHWISE_PAIRED), (3, MacMode.DEPTHWISE_TRIPLE)):
        if span <= L // k:
            costs[mode] = (ceil_div(kernel[0], k) * (span + (out_w - 1) * stride_w), ceil_div(kernel[0], k), k)
    if L <= 2 * span + 1:
        total, clocks = kernel[0] * span, 0
        for first in range(0, total, L):
            # the step's taps in each kernel row: its longest window
            longest = max(min(first + L, total, (ky + 1) * span) - max(first, ky * span) for ky in range(kernel[0]))
            clocks += longest + (out_w - 1) * stride_w
        costs[MacMode.DEPTHWISE_PACKED] = (clocks, ceil_div(total, L), 4)
    return min(costs, key=costs.get)


@pytest.mark.parametrize("seed", range(8))
def test_depthwise_kernel_rows_in_groups(tmp_path, seed, monkeypatch):
    """Depthwise kernels whose rows span at most half or a third of the lanes take two or three
    kernel rows a step on large (MacMode.DEPTHWISE_PAIRED, DEPTHWISE_TRIPLE): 2 to 7 kernel rows
    (a count that does not divide leaves the last step's groups idle), dilated up to 2 both ways,
    strides up to 2; bit-exact against Arm's model, with fewer MAC cycles than the same layer
    in fewer kernel rows a step (one, and two for a triple layer)."""
    from compiler.npu import conv as conv_lowering

    rng = seeds.rng(700 + seed)
    cfg = load_config("large")
    while True:
        H, W = (int(v) for v in rng.integers(4, 20, 2))
        kernel = (int(rng.integers(2, 8)), int(rng.integers(1, 6)))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)) if kernel[1] <= 3 else 1)
        pad = [int(v) for v in rng.integers(0, 4, 4)]
        ny = H - 1 + pad[0] + pad[1] - (kernel[0] - 1) * dilation[0]
        nx = W - 1 + pad[2] + pad[3] - (kernel[1] - 1) * dilation[1]
        if ny >= 0 and nx >= 0 and ny % stride[0] == 0 and nx % stride[1] == 0:
            break
    C = int(rng.integers(1, 33))
    mlir = conv_layer_mlir(rng, "depthwise_conv2d", (H, W, C), kernel, stride, dilation, pad, clamp=bool(seed % 2))
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    mode = expected_window_mode(cfg, kernel, dilation, nx // stride[1] + 1, stride[1])
    assert mode in (MacMode.DEPTHWISE_PAIRED, MacMode.DEPTHWISE_TRIPLE)
    ctx = compile_file(model, cfg)
    assert {c.sub for c in ctx.program.commands if c.opcode == Opcode.MAC} == {mode}
    golden = GoldenModel(ctx.program, cfg)
    assert np.array_equal(golden.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
    # the same layer in fewer kernel rows a step: same results, more MAC cycles
    for fewer in ((1, 2) if mode == MacMode.DEPTHWISE_TRIPLE else (1,)):
        monkeypatch.setattr(conv_lowering.NpuConv, "window_mac_mode", lambda self, cfg, k=fewer: depthwise_mode(k))
        other = GoldenModel(compile_file(model, cfg).program, cfg)
        monkeypatch.undo()
        assert np.array_equal(other.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
        assert golden.counters.unit_cycles["mac"] < other.counters.unit_cycles["mac"], fewer


@pytest.mark.parametrize("seed", range(6))
def test_conv2d_on_the_mac_array(tmp_path, seed):
    rng = seeds.rng(200 + seed)
    (H, W), kernel, stride, dilation, pad = random_geometry(rng)
    C, OC = int(rng.integers(1, 21)), int(rng.integers(1, 21))
    mlir = conv_layer_mlir(rng, "conv2d", (H, W, C), kernel, stride, dilation, pad, cout=OC, clamp=bool(seed % 2))
    check_on_configs(tmp_path, mlir, (1, H, W, C), rng)


@pytest.mark.parametrize("seed", range(8))
def test_lane_paired_conv2d_on_the_mac_array(tmp_path, seed, monkeypatch):
    """A convolution whose last input-channel block fills at most half the lanes runs in
    CONV2D_LANE_PAIRS (two output pixels a beat in that block's steps, docs/isa.md) when its output
    width is even, on default or large: one block of more than a third of the lanes under kernels
    up to 3x3 (a width unfold would take as many steps), or two or three blocks under a 1xKH
    kernel (none to unfold); strides and dilations, images that tile (every tile's width even);
    bit-exact against Arm's model; the array spends fewer lane slots than the same layer without
    lane pairs, in no more MAC cycles (fewer where the accumulation, not the output engine's one
    pixel a clock, bounds a command)."""
    from compiler.npu import conv as conv_lowering

    rng = seeds.rng(250 + seed)
    cfg = load_config(("default", "large")[seed % 2])
    L = cfg.mac_cols
    blocks = int(rng.integers(0, 3))
    while True:
        (H, W), kernel, stride, dilation, pad = random_geometry(rng)
        if blocks:
            kernel, dilation, pad = (kernel[0], 1), (dilation[0], 1), pad[:2] + [0, 0]
            if (H - 1 + pad[0] + pad[1] - (kernel[0] - 1) * dilation[0]) % stride[0]:
                continue
        OW = (W + pad[2] + pad[3] - (kernel[1] - 1) * dilation[1] - 1) // stride[1] + 1
        if OW % 2 == 0 and (W + pad[2] + pad[3] - (kernel[1] - 1) * dilation[1] - 1) % stride[1] == 0:
            break
    C = blocks * L + int(rng.integers(1 if blocks else L // 3 + 1, L // 2 + 1))
    H, W = H + 8 * stride[0] * (seed % 3 == 0), W + 8 * stride[1] * (seed % 3 == 0)   # some tile
    mlir = conv_layer_mlir(rng, "conv2d", (H, W, C), kernel, stride, dilation, pad, cout=int(rng.integers(1, 40)),
                           clamp=bool(seed % 2))
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    ctx = compile_file(model, cfg)
    modes = {c.sub for c in ctx.program.commands if c.opcode == Opcode.MAC}
    golden = GoldenModel(ctx.program, cfg)
    assert np.array_equal(golden.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
    # (a tile whose last output block holds at most mac.rows/2 channels takes row pairs too)
    assert modes and modes <= {MacMode.CONV2D_LANE_PAIRS, MacMode.CONV2D_PAIRS}, modes
    monkeypatch.setattr(conv_lowering.NpuConv, "lane_pairs", lambda self, cfg: False)
    other = GoldenModel(compile_file(model, cfg).program, cfg)
    monkeypatch.undo()
    assert np.array_equal(other.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
    assert golden.counters.macs < other.counters.macs
    assert golden.counters.unit_cycles["mac"] <= other.counters.unit_cycles["mac"]


@pytest.mark.parametrize("seed", range(6))
def test_row_paired_conv2d_on_the_mac_array(tmp_path, seed, monkeypatch):
    """A convolution whose last block of output channels holds at most mac.rows/2 of them takes
    row pairs in the tiles holding it (CONV2D_ROW_PAIRS, or CONV2D_PAIRS with lane pairs: two
    output pixels a beat, each half of the rows one, docs/isa.md), its output width even: more than
    half a word of input channels, 1 to 3 blocks of channels out on default or large, kernels up to 3x3 with strides and dilations;
    bit-exact against Arm's model, in fewer lane slots than without; each row-paired command in
    fewer clocks than the same registers without row pairs (the planner may pick other tiles)."""
    from compiler.npu import conv as conv_lowering

    rng = seeds.rng(280 + seed)
    cfg = load_config(("default", "large")[seed % 2])
    R = cfg.mac_rows
    while True:
        (H, W), kernel, stride, dilation, pad = random_geometry(rng)
        OW = (W + pad[2] + pad[3] - (kernel[1] - 1) * dilation[1] - 1) // stride[1] + 1
        if OW % 2 == 0:
            break
    # (more than half a word of input channels: with fewer, lane pairs pair every step already)
    C = int(rng.integers(cfg.mac_cols // 2 + 1, 2 * cfg.mac_cols + 1))
    OC = int(rng.integers(0, 3)) * R + int(rng.integers(1, R // 2 + 1))
    mlir = conv_layer_mlir(rng, "conv2d", (H, W, C), kernel, stride, dilation, pad, cout=OC, clamp=bool(seed % 2))
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    ctx = compile_file(model, cfg)
    modes = {c.sub for c in ctx.program.commands if c.opcode == Opcode.MAC}
    assert modes & {MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS}, (C, OC, modes)
    golden = GoldenModel(ctx.program, cfg)
    assert np.array_equal(golden.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
    monkeypatch.setattr(conv_lowering.NpuConv, "row_pairs", lambda self, cfg, tc: False)
    other = GoldenModel(compile_file(model, cfg).program, cfg)
    monkeypatch.undo()
    assert np.array_equal(other.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
    assert golden.counters.macs < other.counters.macs
    without = {MacMode.CONV2D_PAIRS: MacMode.CONV2D_LANE_PAIRS, MacMode.CONV2D_ROW_PAIRS: MacMode.CONV2D}
    regs = {}
    for c in ctx.program.commands:
        if c.opcode == Opcode.SET:
            regs[c.sub] = c.value
        elif c.opcode == Opcode.MAC and c.sub in without:
            assert mac_plan(cfg, regs, c.sub).cycles < mac_plan(cfg, regs, without[c.sub]).cycles


def unfold_geometry(rng, kw: int, size: tuple[int, int], max_stride_w: int):
    """(H, W), KH, stride and padding (on every side, up to the kernel) for a KHxKW convolution
    whose output fits exactly."""
    while True:
        H, W = (int(v) for v in rng.integers(size[0], size[1], 2))
        kh = int(rng.integers(1, 4))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, max_stride_w + 1)))
        pad = [int(rng.integers(0, kh)), int(rng.integers(0, kh)), int(rng.integers(0, kw)), int(rng.integers(0, kw))]
        ny, nx = H - 1 + pad[0] + pad[1] - (kh - 1), W - 1 + pad[2] + pad[3] - (kw - 1)
        if ny >= 0 and nx >= 0 and ny % stride[0] == 0 and nx % stride[1] == 0:
            return (H, W), kh, stride, pad


def convs_on_every_config(tmp_path, rng, shape, kernel, stride, pad, clamp: bool):
    """A CONV2D of the given geometry (OC drawn) compiled for tiny, default and large, each run on
    the golden model and compared with Arm's model; yields (config, its NpuConv operations)."""
    H, W, C = shape
    mlir = conv_layer_mlir(rng, "conv2d", shape, kernel, stride, (1, 1), pad, cout=int(rng.integers(1, 21)),
                           clamp=clamp)
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    for name in ("tiny", "default", "large"):
        cfg = load_config(name)
        ctx = compile_file(model, cfg)
        out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
        assert np.array_equal(out, ref), f"{name}: golden differs from the reference"
        yield cfg, [op.attrs["npu"] for op in ctx.block.operators if op.op == "NPU" and op.attrs["npu"].kind == "conv"]


@pytest.mark.parametrize("seed", range(16))
def test_width_unfolded_conv2d_on_the_mac_array(tmp_path, seed):
    """A convolution whose word holds the channels of two or more input pixels runs over its
    input unfolded along the width (compiler/npu/conv.py, NpuConv.unfolded): all KW taps in a
    word (seeds 0..7) or groups of taps with dilation (8..15); kernels 2..5 wide, strides 1..3,
    padding on every side (columns clipped at both edges), images big enough to tile on tiny;
    bit-exact against Arm's model on every configuration, and on large unfolded or, where that
    takes no fewer steps, run as it is with lane pairs (two output pixels a beat over a half-full
    word, NpuConv.lane_pairs)."""
    rng = seeds.rng(300 + seed)
    kw = int(rng.integers(2 if seed < 8 else 3, 6))
    (H, W), kh, stride, pad = unfold_geometry(rng, kw, (3, 30), 3)
    C = int(rng.integers(1, 16 // kw + 1)) if seed < 8 else int(rng.integers(16 // kw + 1, 9))
    unfolded = [cfg.name for cfg, convs in convs_on_every_config(tmp_path, rng, (H, W, C), (kh, kw), stride, pad,
                                                                 bool(seed % 2))
                if any(c.unfolded(cfg) is not None or c.lane_pairs(cfg) for c in convs)]
    assert "large" in unfolded, (C, kw)


@pytest.mark.parametrize("seed", range(6))
def test_whole_kernel_rows_unfolded_over_several_words(tmp_path, seed):
    """All KW taps of a row in one unfolded pixel spanning several words, where that takes fewer
    steps than the row as it is or in groups of taps (NpuConv.unfolded): e.g. a 5-wide kernel over
    3 channels is 2 steps a row on 8 lanes (not 3 in groups of 2 taps) and 4 on 4 lanes (not 5).
    Bit-exact against Arm's model on every configuration, and taken on tiny or default."""
    rng = seeds.rng(330 + seed)
    C, kw = [(3, 5), (5, 3), (6, 4), (3, 5), (6, 3), (5, 5)][seed]
    (H, W), kh, stride, pad = unfold_geometry(rng, kw, (kw + 2, 26), 2)
    whole = []
    for cfg, convs in convs_on_every_config(tmp_path, rng, (H, W, C), (kh, kw), stride, pad, bool(seed % 2)):
        for c in convs:
            u = c.unfolded(cfg)
            if u is not None and u.kernel == (kh, 1) and kw * C > cfg.mac_cols:
                whole.append(cfg.name)
                assert u.mac_steps(cfg) < c.mac_steps(cfg), cfg.name
    assert set(whole) & {"tiny", "default"}, (C, kw)


def transpose_conv_mlir(rng, shape, kernel, stride, out_pad, cout):
    H, W, C = shape
    kh, kw = kernel
    OH = (H - 1) * stride[0] + out_pad[0] + out_pad[1] + kh
    OW = (W - 1) * stride[1] + out_pad[2] + out_pad[3] + kw
    tin, tacc = tensor_type((1, H, W, C), "i8"), tensor_type((1, OH, OW, cout), "i32")
    tw, tc32 = tensor_type((cout, kh, kw, C), "i8"), tensor_type((cout,), "i32")
    body = [const("w", rng.integers(-128, 128, (cout, kh, kw, C)), "i8"),
            const("b", rng.integers(-9000, 9000, cout), "i32"),
            const("izp", [int(rng.integers(-128, 128))], "i8"), const("wzp", [int(rng.integers(-128, 128))], "i8"),
            f"    %c = tosa.transpose_conv2d %x, %w, %b, %izp, %wzp {{acc_type = i32, out_pad = array<i64: "
            f"{', '.join(map(str, out_pad))}>, stride = array<i64: {stride[0]}, {stride[1]}>}} : "
            f"({tin}, {tw}, {tc32}, tensor<1xi8>, tensor<1xi8>) -> {tacc}"]
    return module([("x", tin)], [tacc], body, ["c"])


@pytest.mark.parametrize("seed", range(6))
def test_transpose_conv2d_on_the_mac_array(tmp_path, seed):
    rng = seeds.rng(300 + seed)
    H, W = (int(v) for v in rng.integers(1, 9, 2))
    kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
    stride = tuple(int(v) for v in rng.integers(1, 4, 2))
    # out_pad may be negative (crops) as long as the output stays non-empty: > -kernel
    out_pad = [int(rng.integers(-kernel[0] + 1, 3)), int(rng.integers(-kernel[0] + 1, 3)),
               int(rng.integers(-kernel[1] + 1, 3)), int(rng.integers(-kernel[1] + 1, 3))]
    C, OC = int(rng.integers(1, 13)), int(rng.integers(1, 13))
    mlir = transpose_conv_mlir(rng, (H, W, C), kernel, stride, out_pad, OC)
    model_dir = tmp_path
    model = serialize(mlir, model_dir)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    for name in CONFIGS:
        cfg = load_config(name)
        ctx = compile_file(model, cfg)
        assert ctx.program.manifest["stats"]["host_macs"] == 0
        out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
        assert out.dtype == ref.dtype and np.array_equal(out, ref), name


@pytest.mark.parametrize("seed", range(6))
def test_matmul_with_runtime_weights_on_the_mac_array(tmp_path, seed):
    rng = seeds.rng(400 + seed)
    N, H, C, W = int(rng.integers(1, 3)), int(rng.integers(1, 24)), int(rng.integers(1, 24)), int(rng.integers(1, 24))
    ta, tb, to = tensor_type((N, H, C), "i8"), tensor_type((N, C, W), "i8"), tensor_type((N, H, W), "i32")
    body = [const("azp", [int(rng.integers(-128, 128))], "i8"), const("bzp", [int(rng.integers(-128, 128))], "i8"),
            f"    %o = tosa.matmul %a, %b, %azp, %bzp : ({ta}, {tb}, tensor<1xi8>, tensor<1xi8>) -> {to}"]
    model = serialize(module([("a", ta), ("b", tb)], [to], body, ["o"]), tmp_path)
    a = rng.integers(-128, 128, (N, H, C)).astype(np.int8)
    b = rng.integers(-128, 128, (N, C, W)).astype(np.int8)
    feeds = {"TosaInput_0": a, "TosaInput_1": b}
    ref = run_reference(model, feeds, ["TosaOutput_0"])["TosaOutput_0"]
    for name in CONFIGS:
        cfg = load_config(name)
        ctx = compile_file(model, cfg)
        assert ctx.program.manifest["stats"]["host_macs"] == 0
        out = GoldenModel(ctx.program, cfg).invoke(feeds)["TosaOutput_0"]
        assert out.dtype == ref.dtype and np.array_equal(out, ref), name


@pytest.mark.parametrize("config", ["tiny", "default", "large"])
def test_cnn32_puts_every_mac_on_the_npu(config):
    """The converter reshapes depthwise and dense weights from constants: constant folding must
    turn them back into constants so every convolution lowers to the MAC array."""
    
    model = MODELS_DIR / "cnn32"
    cfg = load_config(config)
    ctx = compile_file(model / "model.tosa", cfg)
    stats = ctx.program.manifest["stats"]
    assert stats["host_macs"] == 0 and stats["npu_macs"] == 148800
    assert any(line.startswith("constant folding:") for line in ctx.report)
    out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": np.load(model / "input_0.npy")})["TosaOutput_0"]
    assert np.array_equal(out, np.load(model / "ref_output_0.npy"))


def test_a_conv_too_big_for_the_sram_runs_on_the_host(tmp_path):
    """On 'tiny' (1 KiB weight SRAM) a 5x5x64 kernel cannot fit one weight block set: the compile
    report says why, and the program still equals the reference model."""
    rng = seeds.rng(7)
    mlir = conv_layer_mlir(rng, "conv2d", (6, 6, 64), (5, 5), (1, 1), (1, 1), [2, 2, 2, 2], cout=4)
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, 6, 6, 64)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    cfg = load_config("tiny")
    ctx = compile_file(model, cfg)
    assert ctx.program.manifest["stats"]["npu_macs"] == 0
    assert any("HOST CONV2D" in line and "no tile fits the 'tiny' configuration" in line for line in ctx.report)
    out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
    assert np.array_equal(out, ref)


def int16_conv_mlir(rng, op: str, shape, kernel, pad, cout, rescale: bool):
    """An int16 x int8 -> int48 (depthwise) convolution, optionally rescaled (scale16) to int16."""
    H, W, C = shape
    kh, kw = kernel
    OH, OW = H - 1 + pad[0] + pad[1] - (kh - 1) + 1, W - 1 + pad[2] + pad[3] - (kw - 1) + 1
    OC = C if op == "depthwise_conv2d" else cout
    wshape = (kh, kw, C, 1) if op == "depthwise_conv2d" else (OC, kh, kw, C)
    tin, tacc = tensor_type((1, H, W, C), "i16"), tensor_type((1, OH, OW, OC), "i48")
    tw, tb = tensor_type(wshape, "i8"), tensor_type((OC,), "i48")
    # apply_scale_16 REQUIREs its result to fit int32: keep the bias small when rescaling
    bias_bound = 1 << (20 if rescale else 40)
    body = [const("w", rng.integers(-128, 128, wshape), "i8"), const("b", rng.integers(-bias_bound, bias_bound, OC), "i48"),
            const("izp", [0], "i16"), const("wzp", [int(rng.integers(-128, 128))], "i8"),
            f"    %c = tosa.{op} %x, %w, %b, %izp, %wzp {{acc_type = i48, dilation = array<i64: 1, 1>, "
            f"pad = array<i64: {', '.join(map(str, pad))}>, stride = array<i64: 1, 1>}} : "
            f"({tin}, {tw}, {tb}, tensor<1xi16>, tensor<1xi8>) -> {tacc}"]
    if not rescale:
        return module([("x", tin)], [tacc], body, ["c"])
    tout = tensor_type((1, OH, OW, OC), "i16")
    body += [const("m", rng.integers(1 << 13, 1 << 15, OC), "i16"), const("s", rng.integers(28, 36, OC), "i8"),
             const("azp", [0], "i48"), const("ozp", [0], "i16"),
             f"    %r = tosa.rescale %c, %m, %s, %azp, %ozp {{input_unsigned = false, output_unsigned = false, "
             f"per_channel = true, rounding_mode = SINGLE_ROUND, scale32 = false}} : ({tacc}, "
             f"{tensor_type((OC,), 'i16')}, {tensor_type((OC,), 'i8')}, tensor<1xi48>, tensor<1xi16>) -> {tout}"]
    return module([("x", tin)], [tout], body, ["r"])


@pytest.mark.parametrize("op", ["conv2d", "depthwise_conv2d"])
@pytest.mark.parametrize("rescale", [False, True])
def test_int16_convolutions_on_the_mac_array(tmp_path, op, rescale):
    rng = seeds.rng(500 + rescale + 2 * (op == "conv2d"))
    H, W, C = 7, 9, int(rng.integers(3, 13))
    mlir = int16_conv_mlir(rng, op, (H, W, C), (3, 3), [1, 1, 0, 2], int(rng.integers(2, 11)), rescale)
    model = serialize(mlir, tmp_path)
    x = rng.integers(-32768, 32768, (1, H, W, C)).astype(np.int16)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    for name in CONFIGS:
        cfg = load_config(name)
        ctx = compile_file(model, cfg)
        assert ctx.program.manifest["stats"]["host_macs"] == 0, ctx.report
        out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
        assert out.dtype == ref.dtype and np.array_equal(out, ref), name


def test_conv3d_runs_on_the_host_and_counts_its_macs():
    """No NPU unit takes CONV3D: the compile report names it as a host op with its reason and its
    MACs (output elements x KD*KH*KW*IC) are counted as host MACs; the golden model's answer is the
    one Arm's reference model stored with the conformance test."""
    base = TEST_DATA / "conformance"
    test = next(p for p in sorted(base.glob("conv3d_*/*")) if "ERRORIF" not in p.name)
    desc = json.loads((test / "desc.json").read_text())
    cfg = load_config("tiny")
    ctx = compile_file(test / desc["tosa_file"], cfg)
    conv = next(op for op in ctx.graph.main.operators if op.op == "CONV3D")
    out_t, w_t = ctx.graph.main.tensors[conv.outputs[0]], ctx.graph.main.tensors[conv.inputs[1]]
    stats = ctx.program.manifest["stats"]
    assert stats["npu_macs"] == 0
    assert stats["host_macs"] == out_t.num_elements * (w_t.num_elements // w_t.shape[0]) > 0
    assert any("HOST CONV3D" in line and "no NPU unit implements this op" in line for line in ctx.report)
    inputs = {n: np.load(test / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
    got = GoldenModel(ctx.program, cfg).invoke(inputs)
    for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
        want = np.load(test / f"expected_{f}")
        assert got[name].dtype == want.dtype and np.array_equal(got[name], want)


@pytest.mark.parametrize("shape,cout,split", [((32, 32, 32), 40, True), ((48, 48, 32), 24, False)])
def test_a_long_first_load_is_split_when_the_estimate_says_it_pays(tmp_path, monkeypatch, shape, cout, split):
    """conv.RAMP_MARGIN / NpuConv.ramp_pays: an operation whose first input box takes long to load
    has its first tile split in two by rows when the estimate says the earlier start outweighs the
    extra tiles and the lower half's shorter cover of the next load (a 32x32, 32->40 channel 1x1
    convolution on default); not otherwise (48x48, 32->24: the lower half cannot cover the next
    block's load). The result is Arm's model's either way, and split is faster than not split."""
    from compiler.npu import conv
    rng = seeds.rng(4242)
    H, W, C = shape
    mlir = conv_layer_mlir(rng, "conv2d", (H, W, C), (1, 1), (1, 1), (1, 1), [0, 0, 0, 0], cout=cout, clamp=True)
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, H, W, C)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    cfg = load_config("default")
    cycles, rows = {}, {}
    ramp = conv.RAMP_MARGIN
    for margin in (ramp, 1.0):                          # 1.0: never split
        monkeypatch.setattr(conv, "RAMP_MARGIN", margin)
        ctx = compile_file(model, cfg)
        (npu,) = [op for op in ctx.block.operators if op.op == "NPU" and op.attrs["npu"].kind == "conv"]
        golden = GoldenModel(ctx.program, cfg)
        assert np.array_equal(golden.invoke({"TosaInput_0": x})["TosaOutput_0"], ref)
        cycles[margin] = golden.counters.cycles
        rows[margin] = [(t.y0, t.th, t.x0, t.tw) for t in npu.annotations["plan"].tiles if t.c0 == 0]
    plain = rows[1.0]
    y0, th, x0, tw = plain[0]
    assert len(plain) > 1 and all(r[1] == th and r[3] == tw for r in plain[:-1])
    if split:
        assert rows[ramp][:2] == [(y0, th // 2, x0, tw), (y0 + th // 2, th - th // 2, x0, tw)]
        assert rows[ramp][2:] == plain[1:]
        assert cycles[ramp] < cycles[1.0], cycles
    else:
        assert rows[ramp] == plain and cycles[ramp] == cycles[1.0]


def test_the_first_mac_lets_the_store_before_it_run_on_when_it_writes_elsewhere(monkeypatch):
    """blazeface layer_374 on large: its first tile's weights came early (the prefetch link) and it
    loads nothing after the data movement before it, whose last store reads output bytes
    [a, b): the tile writes another output buffer, and its MAC's DMA slack leaves that store
    running as well as its own next loads (golden and timing models check the rule on every
    network). The emitter's stream: the lookahead pass after it gives every compute command the
    most slack the rule allows (tests/compiler/test_lookahead.py)."""
    import io as _io
    import compiler.passes.lookahead as lookahead
    monkeypatch.setattr(lookahead, "run", lambda ctx: None)
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa
    from firmware_model.arch.isa import Reg, Sram
    from firmware_model.golden.dma import dma_plan
    cfg = load_config("large")
    prog = compile_graph(read_tosa(MODELS_DIR / "blazeface" / "model.tosa"), cfg, out=_io.StringIO()).program
    layer = next(lay for lay in prog.manifest["layers"] if lay["name"] == "layer_374")
    first = layer["tiles"][0]
    start, mac = first["commands"][0], first["unit_command"]
    cmds = prog.commands
    regs: dict[int, int] = {}
    store = None
    for i, c in enumerate(cmds[:mac]):
        if c.opcode == Opcode.SET:
            regs[c.sub] = c.value
        elif c.opcode == Opcode.DMA_STORE and i < start:
            store = dma_plan(cfg, regs, Sram(c.sub), False).sram_range
    assert cmds[start - 1].opcode == Opcode.DMA_STORE and store is not None
    own = sum(1 for c in cmds[start:mac] if c.opcode in (Opcode.DMA_LOAD, Opcode.FILL, Opcode.DMA_STORE))
    assert not any(c.opcode == Opcode.DMA_LOAD and c.sub == Sram.INPUT for c in cmds[start:mac])
    out = regs[int(Reg.OFM_ADDR)]
    assert out >= store[1] or out + first["th"] * first["tw"] * first["tc"] <= store[0], (out, store)
    assert cmds[mac].value == own + 1, (cmds[mac].value, own)


def _input_fills(ctx, cfg):
    """(FILL bytes into the input SRAM per FILL, the registers at each MAC command) of a program."""
    from firmware_model.arch.isa import Reg, Sram

    regs, fills, macs = {}, [], []
    for c in ctx.program.commands:
        if c.opcode == Opcode.SET:
            regs[c.sub] = c.value
        elif c.opcode == Opcode.FILL and c.sub == Sram.INPUT:
            fills.append(regs[Reg.DMA_LEN0] * regs[Reg.DMA_LEN1] * regs[Reg.DMA_LEN2])
        elif c.opcode == Opcode.MAC:
            macs.append(dict(regs))
    return fills, macs


@pytest.mark.parametrize("config,size", [("large", 32), ("large", 8), ("default", 16)])
def test_depthwise_padding_is_read_as_the_zero_point_not_filled(tmp_path, config, size):
    """A window-mode depthwise tile whose input box leaves the image gets no FILL: its
    IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H and IFM_IN_W say where the image's pixels are in the box,
    and the MAC reads the rest as the input zero point. Every tile's registers match its box;
    bit-exact against Arm's model (with an input zero point, so that reading a stale word as a
    pixel would show)."""
    from firmware_model.arch.isa import Reg

    rng = seeds.rng(760 + size)
    mlir = conv_layer_mlir(rng, "depthwise_conv2d", (size, size, 16), (5, 5), (1, 1), (1, 1), [2, 2, 2, 2])
    model = serialize(mlir, tmp_path)
    x = rng.integers(-128, 128, (1, size, size, 16)).astype(np.int8)
    ref = run_reference(model, {"TosaInput_0": x}, ["TosaOutput_0"])["TosaOutput_0"]
    cfg = load_config(config)
    ctx = compile_file(model, cfg)
    [layer] = [layer for layer in ctx.program.manifest["layers"] if layer["unit"] == "MAC"]
    fills, macs = _input_fills(ctx, cfg)
    assert fills == []
    assert len(macs) == len(layer["tiles"])
    for t, regs in zip(layer["tiles"], macs):
        y0, x0 = t["y0"] - 2, t["x0"] - 2                    # the box's first row and column
        h, w = t["th"] + 4, t["tw"] + 4
        top, left = max(0, -y0), max(0, -x0)
        real = (min(size, y0 + h) - max(0, y0), min(size, x0 + w) - max(0, x0))
        if real == (h, w):
            assert regs.get(Reg.IFM_IN_H, 0) == 0
        else:
            assert (regs[Reg.IFM_PAD_TOP], regs[Reg.IFM_PAD_LEFT], regs[Reg.IFM_IN_H], regs[Reg.IFM_IN_W]) \
                == (top, left, *real), t
    out = GoldenModel(ctx.program, cfg).invoke({"TosaInput_0": x})["TosaOutput_0"]
    assert np.array_equal(out, ref)
