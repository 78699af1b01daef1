"""CONV2D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, MATMUL, AVG_POOL2D and MAX_POOL2D against Arm's
reference model, bit for bit, on generated graphs; ERROR_IF cases; the reference model's
overflow behaviour (int32 wraps, int48 saturates once at the end); every arithmetic path of the
exact matrix products (float32, float64, int64 and blocked im2col).

Each case is one op, built twice from one description (sim.oracles.arm_oracle.OpCase): as a .tosa graph
for the reference model and as the OpCall our kernel receives.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from sim import seeds
from firmware_model.errors import TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops import tensor_ops
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import TensorSpec, run_op
from sim.oracles.arm_oracle import ERROR, UNPREDICTABLE, VALID, OpCase, Operand, run_reference

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48


def rand(rng, dtype: DType, shape, lo=None, hi=None) -> np.ndarray:
    lo = dtype.min if lo is None else lo
    hi = dtype.max if hi is None else hi
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dtype.storage)


def zp(value: int, dtype: DType) -> Operand:
    return Operand(np.array([value], dtype.storage), dtype, const=True)


def assert_same_as_reference(case: OpCase, mode: str = "auto") -> str:
    """Run the case on both; outputs must be identical (dtype, shape, values), errors must agree."""
    ref = run_reference(case, mode)
    if ref.status == VALID:
        ours = run_op(case.op_call())
        assert len(ours) == len(ref.outputs)
        for o, r in zip(ours, ref.outputs):
            assert o.dtype == r.dtype, (o.dtype, r.dtype)
            assert o.shape == r.shape, (o.shape, r.shape)
            if not np.array_equal(o, r):
                bad = np.argwhere(o != r)
                i = tuple(bad[0])
                raise AssertionError(f"{case.op}: {len(bad)} elements differ, first at {i}: "
                                     f"ours {o[i]} reference {r[i]}")
    elif ref.status == ERROR:
        with pytest.raises(TosaError):
            run_op(case.op_call())
    elif ref.status == UNPREDICTABLE:
        with pytest.raises(TosaUnpredictable):
            run_op(case.op_call())
    else:
        raise AssertionError(f"reference model status {ref.status}: {ref.log}")
    return ref.status


# ----------------------------------------------------------------------------------------------
# Case generators

def _fit(rng, size_choices, k_eff: int, stride: int, pads: list[int]):
    """An input size and (top, bottom) pads for which (size - 1 + pads - (k_eff - 1)) % stride == 0."""
    size = int(rng.choice(size_choices))
    size = max(size, k_eff - pads[0] - pads[1])
    span = size - 1 + pads[0] + pads[1] - (k_eff - 1)
    size += (-span) % stride
    return size


def conv_case(rng, op: str, wide: bool) -> OpCase:
    """A random CONV2D / DEPTHWISE_CONV2D / TRANSPOSE_CONV2D (int8 x int8 or int16 x int8)."""
    in_t, out_t = (I16, I48) if wide else (I8, I32)
    n = int(rng.integers(1, 3))
    kh, kw = (int(v) for v in rng.integers(1, 5, 2))
    sy, sx = (int(v) for v in rng.integers(1, 4, 2))
    izp = 0 if wide else int(rng.choice([0, int(rng.integers(-128, 128))]))
    wzp = int(rng.choice([0, int(rng.integers(-128, 128))]))
    if op == "TRANSPOSE_CONV2D":
        ic, oc = (int(v) for v in rng.integers(1, 9, 2))
        ih, iw = (int(v) for v in rng.integers(1, 7, 2))
        pads = [int(rng.integers(-kh + 1, 3)), int(rng.integers(-kh + 1, 3)),
                int(rng.integers(-kw + 1, 3)), int(rng.integers(-kw + 1, 3))]
        oh = (ih - 1) * sy + pads[0] + pads[1] + kh
        ow = (iw - 1) * sx + pads[2] + pads[3] + kw
        if oh < 1 or ow < 1:  # keep the case legal
            pads = [0, 0, 0, 0]
            oh, ow = (ih - 1) * sy + kh, (iw - 1) * sx + kw
        w_shape, n_out = (oc, kh, kw, ic), oc
        attrs = dict(out_pad=pads, stride=[sy, sx], local_bound=False, acc_type=int(out_t))
    else:
        dy, dx = (int(v) for v in rng.integers(1, 4, 2))
        pads = [int(v) for v in rng.integers(0, 4, 4)]
        ih = _fit(rng, range(1, 12), (kh - 1) * dy + 1, sy, pads[:2])
        iw = _fit(rng, range(1, 12), (kw - 1) * dx + 1, sx, pads[2:])
        oh = (ih - 1 + pads[0] + pads[1] - (kh - 1) * dy) // sy + 1
        ow = (iw - 1 + pads[2] + pads[3] - (kw - 1) * dx) // sx + 1
        if op == "CONV2D":
            ic, oc = (int(v) for v in rng.integers(1, 9, 2))
            w_shape, n_out = (oc, kh, kw, ic), oc
        else:
            ic, m = int(rng.integers(1, 9)), int(rng.choice([1, 1, 2, 3]))
            w_shape, n_out = (kh, kw, ic, m), ic * m
        attrs = dict(pad=pads, stride=[sy, sx], dilation=[dy, dx], local_bound=False,
                     acc_type=int(out_t))
    x = rand(rng, in_t, (n, ih, iw, ic))
    w = rand(rng, I8, w_shape)
    bias = rand(rng, out_t, (int(rng.choice([1, n_out])) if n_out > 1 else 1,))
    return OpCase(op, [Operand(x, in_t), Operand(w, I8, const=bool(rng.integers(0, 2))),
                       Operand(bias, out_t, const=bool(rng.integers(0, 2))), zp(izp, in_t),
                       zp(wzp, I8)],
                  [TensorSpec((n, oh, ow, n_out), out_t)], attrs)


def matmul_case(rng, wide: bool) -> OpCase:
    t, out_t = (I16, I48) if wide else (I8, I32)
    n, h, c, w = (int(v) for v in rng.integers(1, 17, 4))
    n = min(n, 3)
    a, b = rand(rng, t, (n, h, c)), rand(rng, t, (n, c, w))
    azp = 0 if wide else int(rng.integers(-128, 128))
    bzp = 0 if wide else int(rng.integers(-128, 128))
    return OpCase("MATMUL", [Operand(a, t), Operand(b, t), zp(azp, t), zp(bzp, t)],
                  [TensorSpec((n, h, w), out_t)], {})


def pool_case(rng, op: str, t: DType) -> OpCase:
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 9))
    ky, kx = (int(v) for v in rng.integers(1, 5, 2))
    sy, sx = (int(v) for v in rng.integers(1, 4, 2))
    pads = [int(rng.integers(0, ky)), int(rng.integers(0, ky)),
            int(rng.integers(0, kx)), int(rng.integers(0, kx))]
    ih = _fit(rng, range(1, 14), ky, sy, pads[:2])   # (ih + pads - ky) % sy == 0
    iw = _fit(rng, range(1, 14), kx, sx, pads[2:])
    oh = (ih + pads[0] + pads[1] - ky) // sy + 1
    ow = (iw + pads[2] + pads[3] - kx) // sx + 1
    x = rand(rng, t, (n, ih, iw, c))
    inputs = [Operand(x, t)]
    attrs = dict(kernel=[ky, kx], stride=[sy, sx], pad=pads)
    if op == "AVG_POOL2D":
        izp = int(rng.integers(-128, 128)) if t == I8 else 0
        ozp = int(rng.integers(-128, 128)) if t == I8 else 0
        inputs += [zp(izp, t), zp(ozp, t)]
        attrs["acc_type"] = int(I32)
    else:
        attrs["nan_mode"] = 1
    return OpCase(op, inputs, [TensorSpec((n, oh, ow, c), t)], attrs)


# ----------------------------------------------------------------------------------------------
# Random cases against the reference model

@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"])
def test_conv_int8_matches_reference(op):
    rng = seeds.rng(zlib.crc32(op.encode()))
    for _ in range(40):
        assert assert_same_as_reference(conv_case(rng, op, wide=False)) == VALID


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"])
def test_conv_int16_matches_reference(op):
    rng = seeds.rng(7 + zlib.crc32(op.encode()))
    for _ in range(10):  # int48 results: the reference model runs from its command line
        assert assert_same_as_reference(conv_case(rng, op, wide=True)) == VALID


@pytest.mark.parametrize("wide", [False, True])
def test_matmul_matches_reference(wide):
    rng = seeds.rng(11 + wide)
    for _ in range(30 if not wide else 8):
        assert assert_same_as_reference(matmul_case(rng, wide)) == VALID


@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize("t", [I8, I16])
def test_pool_matches_reference(op, t):
    rng = seeds.rng(5 + int(t) + (op == "MAX_POOL2D"))
    for _ in range(30):
        assert assert_same_as_reference(pool_case(rng, op, t)) == VALID


def test_avg_pool_large_window_uses_reciprocal_scale():
    """One output over a big window: the divisor goes through reciprocal_scale (count up to 64)."""
    rng = seeds.rng(3)
    for count_h, count_w in [(8, 8), (7, 9), (5, 1)]:
        for t in (I8, I16):
            x = rand(rng, t, (1, count_h, count_w, 4))
            izp, ozp = (-7, 9) if t == I8 else (0, 0)
            case = OpCase("AVG_POOL2D", [Operand(x, t), zp(izp, t), zp(ozp, t)],
                          [TensorSpec((1, 1, 1, 4), t)],
                          dict(kernel=[count_h, count_w], stride=[1, 1], pad=[0, 0, 0, 0],
                               acc_type=int(I32)))
            assert assert_same_as_reference(case) == VALID


# ----------------------------------------------------------------------------------------------
# Every arithmetic path of the exact matrix product gives the same (reference) answer

@pytest.mark.parametrize("path", ["float32", "float64", "int64", "blocked"])
def test_matrix_product_paths(monkeypatch, path):
    if path in ("float64", "int64"):
        monkeypatch.setattr(tensor_ops, "FLOAT32_EXACT", 0)
    if path == "int64":
        monkeypatch.setattr(tensor_ops, "FLOAT64_EXACT", 0)
    if path == "blocked":
        monkeypatch.setattr(tensor_ops, "IM2COL_BLOCK_ELEMENTS", 64)
    rng = seeds.rng(99)
    for op in ("CONV2D", "TRANSPOSE_CONV2D"):
        for _ in range(6):
            assert assert_same_as_reference(conv_case(rng, op, wide=False)) == VALID
    for _ in range(4):
        assert assert_same_as_reference(matmul_case(rng, wide=False)) == VALID


def test_transpose_conv_paths_agree(monkeypatch):
    """TRANSPOSE_CONV2D's two ways, a small one as one product over the windows of its input
    spread out by the stride (the kernel turned around) and a large one adding each tap's products
    into the full output: equal on random cases (out_pad from -K+1 to 2, zero points, strides 1-3,
    int8 and int16), and the large one is the reference model's answer too."""
    rng = seeds.rng(1616)
    for wide in (False, True):
        for _ in range(60):
            case = conv_case(rng, "TRANSPOSE_CONV2D", wide)
            gathered = run_op(case.op_call())[0]
            monkeypatch.setattr(tensor_ops, "TRANSPOSE_GATHER_ELEMENTS", -1)
            added = run_op(case.op_call())[0]
            monkeypatch.undo()
            assert gathered.dtype == added.dtype and np.array_equal(gathered, added), case
    monkeypatch.setattr(tensor_ops, "TRANSPOSE_GATHER_ELEMENTS", -1)
    for _ in range(6):
        assert assert_same_as_reference(conv_case(rng, "TRANSPOSE_CONV2D", False)) == VALID


@pytest.mark.parametrize("path", ["blocks", "int64 sums"])
def test_avg_pool_paths(monkeypatch, path):
    if path == "blocks":
        monkeypatch.setattr(tensor_ops, "POOL_SCALE_BLOCK", 5)
    else:
        monkeypatch.setattr(tensor_ops, "AVG_INT32_SUM_BOUND", 0)
    rng = seeds.rng(31)
    for t in (I8, I16):
        for _ in range(8):
            assert assert_same_as_reference(pool_case(rng, "AVG_POOL2D", t)) == VALID


def test_compute_dtype_bounds():
    assert tensor_ops._compute_dtype((1 << 24) - 1) is np.float32
    assert tensor_ops._compute_dtype(1 << 24) is np.float64
    assert tensor_ops._compute_dtype((1 << 53) - 1) is np.float64
    assert tensor_ops._compute_dtype(1 << 53) is np.int64


# ----------------------------------------------------------------------------------------------
# Overflow: what the reference model does where the spec's REQUIREs would fail

def _conv1x1(x, w, bias, in_t, out_t, izp=0, wzp=0, op="CONV2D"):
    n, h, wd, c = x.shape
    oc = w.shape[0] if op == "CONV2D" else c * w.shape[3]
    return OpCase(op, [Operand(x, in_t), Operand(w, I8), Operand(bias, out_t), zp(izp, in_t),
                       zp(wzp, I8)], [TensorSpec((n, h, wd, oc), out_t)],
                  dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], local_bound=False,
                       acc_type=int(out_t)))


def test_int32_bias_add_wraps():
    x = np.full((1, 1, 1, 2), 100, np.int8)
    w = np.full((1, 1, 1, 2), 100, np.int8)
    case = _conv1x1(x, w, np.array([2**31 - 1], np.int32), I8, I32)
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].item() == (2**31 - 1 + 20000) - 2**32
    case = _conv1x1(-x, w, np.array([-2**31], np.int32), I8, I32)
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].item() == -2**31 - 20000 + 2**32


@pytest.mark.parametrize("op", ["CONV2D", "TRANSPOSE_CONV2D", "DEPTHWISE_CONV2D"])
def test_int32_accumulator_wraps(op):
    """36864 products of 255 * 255 = 2397081600 > 2^31 - 1: the int32 accumulator wraps."""
    taps = 36864
    if op == "DEPTHWISE_CONV2D":   # the reduction runs over the kernel window: 192 x 192
        x = np.full((1, 192, 192, 1), -128, np.int8)
        w = np.full((192, 192, 1, 1), -128, np.int8)
        attrs = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
    else:                          # the reduction runs over the input channels
        x = np.full((1, 1, 1, taps), -128, np.int8)
        w = np.full((1, 1, 1, taps), -128, np.int8)
        attrs = (dict(out_pad=[0, 0, 0, 0], stride=[1, 1]) if op == "TRANSPOSE_CONV2D"
                 else dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1]))
    attrs.update(local_bound=False, acc_type=int(I32))
    case = OpCase(op, [Operand(x, I8), Operand(w, I8), Operand(np.array([5], np.int32), I32),
                       zp(127, I8), zp(127, I8)], [TensorSpec((1, 1, 1, 1), I32)], attrs)
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].item() == taps * 255 * 255 + 5 - 2**32


@pytest.mark.parametrize("bias,expected", [
    (2**47 - 1, 2**47 - 1),               # + 20000 saturates
    (2**47 - 20001, 2**47 - 1),           # exactly the maximum
    (2**47 - 20000, 2**47 - 1),           # one past: saturates, does not wrap
    (2**40, 2**40 + 20000),
])
def test_int48_bias_add_saturates(bias, expected):
    x = np.full((1, 1, 1, 2), 100, np.int16)
    w = np.full((1, 1, 1, 2), 100, np.int8)
    case = _conv1x1(x, w, np.array([bias], np.int64), I16, I48)
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].item() == expected


def test_int48_negative_saturation_depthwise():
    x = np.full((1, 1, 1, 1), -32768, np.int16)
    w = np.full((1, 1, 1, 1), 127, np.int8)
    case = _conv1x1(x, w, np.array([-2**47], np.int64), I16, I48, op="DEPTHWISE_CONV2D")
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].item() == -2**47


@pytest.mark.parametrize("second", [-32768, 32767])
def test_int48_matmul_accumulator_saturates_at_the_end(second):
    """2^18 products of 2^30: the exact sum leaves int48; the model saturates only the result."""
    c = 1 << 18
    a = np.full((1, 1, c), -32768, np.int16)
    b = np.full((1, c, 1), -32768, np.int16)
    b[0, c // 2:, 0] = second
    case = OpCase("MATMUL", [Operand(a, I16), Operand(b, I16), zp(0, I16), zp(0, I16)],
                  [TensorSpec((1, 1, 1), I48)], {})
    assert assert_same_as_reference(case) == VALID
    exact = (c // 2) * 2**30 + (c // 2) * (-32768) * second
    assert run_op(case.op_call())[0].item() == min(max(exact, -2**47), 2**47 - 1)


def test_int32_matmul_accumulator_wraps():
    c = 1 << 16
    a = np.full((1, 1, c), -128, np.int8)
    b = np.full((1, c, 1), -128, np.int8)
    case = OpCase("MATMUL", [Operand(a, I8), Operand(b, I8), zp(127, I8), zp(127, I8)],
                  [TensorSpec((1, 1, 1), I32)], {})
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].item() == c * 65025 - 2**32


# ----------------------------------------------------------------------------------------------
# ERROR_IF: the reference model reports ERROR and we raise TosaError

def _base_conv(op="CONV2D", wide=False):
    return conv_case(seeds.rng(1234), op, wide)


def _mutate(case: OpCase, **changes) -> OpCase:
    attrs = dict(case.attrs)
    attrs.update(changes.pop("attrs", {}))
    inputs = list(changes.pop("inputs", case.inputs))
    outputs = list(changes.pop("outputs", case.outputs))
    assert not changes
    return OpCase(case.op, inputs, outputs, attrs)


def _conv_fixed(op="CONV2D", in_t=I8, w_t=I8, out_t=I32, izp=0, wzp=0, pad=(1, 1, 1, 1),
                stride=(1, 1), dilation=(1, 1), out_shape=None, bias_len=4, x_shape=(1, 5, 5, 3),
                w_shape=None, acc=None):
    rng = seeds.rng(0)
    if w_shape is None:
        w_shape = (4, 3, 3, 3) if op != "DEPTHWISE_CONV2D" else (3, 3, 3, 1)
    x = rand(rng, in_t, x_shape)
    w = rand(rng, w_t, w_shape)
    b = rand(rng, out_t, (bias_len,), -1000, 1000)
    attrs = dict(stride=list(stride), local_bound=False,
                 acc_type=int(acc if acc is not None else (I48 if in_t == I16 else I32)))
    if op == "TRANSPOSE_CONV2D":
        attrs["out_pad"] = list(pad)
        default_out = (1, 4 * stride[0] + pad[0] + pad[1] + 3, 4 * stride[1] + pad[2] + pad[3] + 3, 4)
    else:
        attrs.update(pad=list(pad), dilation=list(dilation))
        default_out = (1, 5, 5, 4 if op == "CONV2D" else 3)
    return OpCase(op, [Operand(x, in_t), Operand(w, w_t), Operand(b, out_t), zp(izp, in_t),
                       zp(wzp, w_t)], [TensorSpec(out_shape or default_out, out_t)], attrs)


CONV_ERRORS = {
    "int16 input zero point": dict(in_t=I16, out_t=I48, izp=3),
    "negative pad": dict(pad=(-1, 1, 1, 1), out_shape=(1, 3, 5, 4)),
    "stride < 1": dict(stride=(0, 1)),
    "dilation < 1": dict(dilation=(1, 0)),
    "output shape mismatch": dict(out_shape=(1, 5, 4, 4)),
    "output channels mismatch": dict(out_shape=(1, 5, 5, 5)),
    "non-integer output size": dict(stride=(2, 2), pad=(1, 0, 1, 1), out_shape=(1, 3, 3, 4)),
    "bias shape": dict(bias_len=3),
    "acc_type": dict(acc=I48),
    "int8 x int8 -> int48": dict(out_t=I48, acc=I32),
    "weight input channels": dict(w_shape=(4, 3, 3, 2)),
    "input rank": dict(x_shape=(1, 5, 5, 3, 1), out_shape=(1, 5, 5, 4)),
}


@pytest.mark.parametrize("name", sorted(CONV_ERRORS))
def test_conv2d_error_if(name):
    case = _conv_fixed("CONV2D", **CONV_ERRORS[name])
    assert assert_same_as_reference(case) == ERROR


DW_ERRORS = {
    "negative pad": dict(pad=(0, -1, 1, 1), out_shape=(1, 2, 5, 3)),
    "stride < 1": dict(stride=(1, -2)),
    "dilation < 1": dict(dilation=(0, 0)),
    "output shape mismatch": dict(out_shape=(1, 5, 5, 6)),
    "bias shape": dict(bias_len=2),
    "int16 input zero point": dict(in_t=I16, out_t=I48, izp=-1, out_shape=(1, 5, 5, 3), bias_len=3),
    "non-integer output size": dict(stride=(2, 2), pad=(1, 0, 1, 1), out_shape=(1, 3, 3, 3)),
    "weight channels": dict(w_shape=(3, 3, 2, 1), out_shape=(1, 5, 5, 2), bias_len=2),
}


@pytest.mark.parametrize("name", sorted(DW_ERRORS))
def test_depthwise_error_if(name):
    kw = dict(bias_len=3)
    kw.update(DW_ERRORS[name])
    case = _conv_fixed("DEPTHWISE_CONV2D", **kw)
    assert assert_same_as_reference(case) == ERROR


TC_ERRORS = {
    "out_pad <= -KH": dict(pad=(-3, 0, 0, 0), out_shape=(1, 4, 7, 4)),
    "out_pad <= -KW": dict(pad=(0, 0, 0, -3), out_shape=(1, 7, 4, 4)),
    "stride < 1": dict(stride=(0, 1), out_shape=(1, 3, 7, 4)),
    "output shape mismatch": dict(out_shape=(1, 7, 8, 4)),
    "bias shape": dict(bias_len=2),
    "weight zero point int8 ok, input int16 zp": dict(in_t=I16, out_t=I48, izp=5),
}


@pytest.mark.parametrize("name", sorted(TC_ERRORS))
def test_transpose_conv_error_if(name):
    kw = dict(pad=(0, 0, 0, 0))
    kw.update(TC_ERRORS[name])
    case = _conv_fixed("TRANSPOSE_CONV2D", **kw)
    assert assert_same_as_reference(case) == ERROR


def test_transpose_conv_legal_negative_out_pad():
    case = _conv_fixed("TRANSPOSE_CONV2D", pad=(-2, -1, 0, -2), out_shape=(1, 4, 5, 4))
    assert assert_same_as_reference(case) == VALID


MATMUL_ERRORS = {
    "int16 A zero point": ((I16, I48), dict(azp=1)),
    "int16 B zero point": ((I16, I48), dict(bzp=-1)),
    "output shape": ((I8, I32), dict(out_shape=(2, 3, 6))),
    "inner dimension": ((I8, I32), dict(b_shape=(2, 5, 5))),
    "batch": ((I8, I32), dict(b_shape=(1, 4, 5))),
    "rank": ((I8, I32), dict(a_shape=(2, 3, 4, 1))),
    "int8 -> int48": ((I8, I48), {}),
}


@pytest.mark.parametrize("name", sorted(MATMUL_ERRORS))
def test_matmul_error_if(name):
    (t, out_t), kw = MATMUL_ERRORS[name]
    rng = seeds.rng(2)
    a = rand(rng, t, kw.get("a_shape", (2, 3, 4)))
    b = rand(rng, t, kw.get("b_shape", (2, 4, 5)))
    case = OpCase("MATMUL", [Operand(a, t), Operand(b, t), zp(kw.get("azp", 0), t), zp(kw.get("bzp", 0), t)],
                  [TensorSpec(kw.get("out_shape", (2, 3, 5)), out_t)], {})
    assert assert_same_as_reference(case) == ERROR


POOL_ERRORS = {
    "kernel < 1": dict(kernel=[0, 2], out=(1, 7, 5, 2)),
    "stride < 1": dict(stride=[1, 0]),
    "negative pad": dict(pad=[0, -1, 0, 0], out=(1, 4, 5, 2)),
    "pad >= kernel_x": dict(pad=[0, 0, 2, 0], out=(1, 5, 7, 2)),
    "pad >= kernel_y": dict(pad=[0, 2, 0, 0], out=(1, 7, 5, 2)),
    "output shape": dict(out=(1, 5, 6, 2)),
    "output channels": dict(out=(1, 5, 5, 3)),
    "non-integer output size": dict(kernel=[3, 3], stride=[2, 2], out=(1, 2, 2, 2)),
    "input rank": dict(shape=(1, 6, 6, 2, 1)),
}


@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize("name", sorted(POOL_ERRORS))
def test_pool_error_if(op, name):
    kw = POOL_ERRORS[name]
    rng = seeds.rng(4)
    x = rand(rng, I8, kw.get("shape", (1, 6, 6, 2)))
    attrs = dict(kernel=kw.get("kernel", [2, 2]), stride=kw.get("stride", [1, 1]),
                 pad=kw.get("pad", [0, 0, 0, 0]))
    inputs = [Operand(x, I8)]
    if op == "AVG_POOL2D":
        attrs["acc_type"] = int(I32)
        inputs += [zp(0, I8), zp(0, I8)]
    else:
        attrs["nan_mode"] = 1
    case = OpCase(op, inputs, [TensorSpec(kw.get("out", (1, 5, 5, 2)), I8)], attrs)
    assert assert_same_as_reference(case) == ERROR


@pytest.mark.parametrize("which", ["input_zp", "output_zp"])
def test_avg_pool_int16_zero_point_error(which):
    x = rand(seeds.rng(0), I16, (1, 4, 4, 1))
    zps = [zp(0, I16), zp(0, I16)]
    zps[which == "output_zp"] = zp(-3, I16)
    case = OpCase("AVG_POOL2D", [Operand(x, I16), *zps], [TensorSpec((1, 3, 3, 1), I16)],
                  dict(kernel=[2, 2], stride=[1, 1], pad=[0, 0, 0, 0], acc_type=int(I32)))
    assert assert_same_as_reference(case) == ERROR


def test_avg_pool_acc_type_must_be_int32():
    x = rand(seeds.rng(0), I8, (1, 4, 4, 1))
    case = OpCase("AVG_POOL2D", [Operand(x, I8), zp(0, I8), zp(0, I8)], [TensorSpec((1, 3, 3, 1), I8)],
                  dict(kernel=[2, 2], stride=[1, 1], pad=[0, 0, 0, 0], acc_type=int(I16)))
    assert assert_same_as_reference(case) == ERROR


# ----------------------------------------------------------------------------------------------
# Declared output dims of -1 are not checked; missing inputs and int4 weights are reported

def test_unknown_output_dims_are_not_checked():
    case = _conv_fixed("CONV2D")
    expected = run_op(case.op_call())[0]
    open_case = _mutate(case, outputs=[TensorSpec((1, -1, -1, 4), I32)])
    assert np.array_equal(run_op(open_case.op_call())[0], expected)


def test_wrong_input_count_is_an_error():
    case = _conv_fixed("CONV2D")
    call = case.op_call()
    call.inputs, call.input_specs = call.inputs[:4], call.input_specs[:4]
    with pytest.raises(TosaError):
        run_op(call)


def test_int4_weights_are_unsupported():
    case = _conv_fixed("CONV2D")
    call = case.op_call()
    call.input_specs[1] = TensorSpec(call.input_specs[1].shape, DType.INT4)
    with pytest.raises(TosaUnsupported):
        run_op(call)


def test_valid_count_is_the_spec_formula():
    """AVG_POOL2D's count of taps inside the input per output position: evaluated at the edges
    only, equal to min(y * s - p0 + k, size) - max(y * s - p0, 0) at every position."""
    for size in range(0, 13):
        for k in range(1, 7):
            for s in range(1, 5):
                for p0 in range(0, k):
                    for o in range(1, 8):
                        want = [min(y * s - p0 + k, size) - max(y * s - p0, 0) for y in range(o)]
                        assert tensor_ops._valid_count(size, k, s, p0, o) == want, (size, k, s, p0, o)


def test_window_reduce_equals_the_windows():
    """_window_reduce (each axis started by one ufunc of its first two taps into a new array) is
    the sum / max over each window, read tap by tap, for every kernel size 1-4, stride 1-3,
    int8/int16/int32 input and result type."""
    from firmware_model.tosa_ops.tensor_ops import _window_reduce
    rng = np.random.default_rng(16)
    for trial in range(600):
        n, h, w, c = (int(v) for v in rng.integers(1, 5, 4))
        ky, kx, sy, sx = (int(v) for v in rng.integers(1, 5, 4))
        sy, sx = min(sy, 3), min(sx, 3)
        if ky > h or kx > w:
            continue
        oh, ow = (h - ky) // sy + 1, (w - kx) // sx + 1
        dt = (np.int8, np.int16, np.int32)[trial % 3]
        x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, (n, h, w, c)).astype(dt)
        for ufunc, out_t in ((np.add, np.int32), (np.add, np.int64), (np.maximum, None)):
            got = _window_reduce(x, (ky, kx), (sy, sx), (oh, ow), ufunc, out_t)
            want = np.empty((n, oh, ow, c), out_t or dt)
            for y in range(oh):
                for xx in range(ow):
                    win = x[:, y * sy:y * sy + ky, xx * sx:xx * sx + kx].astype(np.int64)
                    want[:, y, xx] = win.sum((1, 2)) if ufunc is np.add else win.max((1, 2))
            assert got.dtype == want.dtype and np.array_equal(got, want), (trial, ufunc, out_t)
