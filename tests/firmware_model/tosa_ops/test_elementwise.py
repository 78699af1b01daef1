"""Kernels of the elementwise, reduction, layout and conversion ops: values worked out by hand
from the spec's pseudocode, plus the ERROR_IF / REQUIRE cases."""

import numpy as np
import pytest

from firmware_model.errors import TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, run_op

I8, I16, I32, I48, BOOL, SHAPE = DType.INT8, DType.INT16, DType.INT32, DType.INT48, DType.BOOL, DType.SHAPE


def arr(values, dtype):
    return np.asarray(values, dtype=dtype.storage)


def call(op, inputs, out_dtype, out_shape=None, attrs=None, in_dtypes=None):
    """Run `op`; inputs are (values, DType) pairs; the output spec defaults to input 0's shape."""
    arrays = [arr(v, t) for v, t in inputs]
    specs = [TensorSpec(a.shape, t) for a, (_, t) in zip(arrays, inputs)]
    if out_shape is None:
        out_shape = arrays[0].shape
    c = OpCall(op=op, attrs=attrs or {}, inputs=arrays, input_specs=specs,
               output_specs=[TensorSpec(tuple(out_shape), out_dtype)], where="test")
    (result,) = run_op(c)
    return result


def eq(result, expected, dtype):
    exp = arr(expected, dtype)
    assert result.dtype == exp.dtype and result.shape == exp.shape and np.array_equal(result, exp), (result, exp)


def test_add_broadcast_and_overflow_require():
    r = call("ADD", [([[1, 2, 3], [4, 5, 6]], I32), ([[10, 20, 30]], I32)], I32, (2, 3))
    eq(r, [[11, 22, 33], [14, 25, 36]], I32)
    with pytest.raises(TosaUnpredictable):
        call("ADD", [([2**31 - 1], I32), ([1], I32)], I32)


def test_add_rejects_int8_and_bad_broadcast():
    with pytest.raises(TosaError, match="unsupported element types"):
        call("ADD", [([1], I8), ([1], I8)], I8)
    with pytest.raises(TosaError, match="do not broadcast"):
        call("ADD", [([1, 2, 3], I32), ([1, 2], I32)], I32)
    with pytest.raises(TosaError, match="rank"):
        call("ADD", [([1, 2], I32), ([[1, 2]], I32)], I32)


def test_sub_minimum_maximum():
    eq(call("SUB", [([5, -5], I32), ([7, 7], I32)], I32), [-2, -12], I32)
    eq(call("MAXIMUM", [([5, -5], I32), ([7, -7], I32)], I32), [7, -5], I32)
    eq(call("MINIMUM", [([5, -5], I32), ([7, -7], I32)], I32), [5, -7], I32)


def test_mul_shift_rounds_and_int8_widens():
    # (7 * 3 + 2) >> 2 = 5; (-7 * 3 + 2) >> 2 = -5 (floor of -4.75)
    r = call("MUL", [([7, -7], I32), ([3, 3], I32), ([2], I8)], I32)
    eq(r, [5, -5], I32)
    r = call("MUL", [([-128, 127], I8), ([-128, 127], I8), ([0], I8)], I32)
    eq(r, [16384, 16129], I32)
    # int32 without shift keeps the low 32 bits
    eq(call("MUL", [([65536], I32), ([65536], I32), ([0], I8)], I32), [0], I32)
    with pytest.raises(TosaUnpredictable, match="shift == 0"):
        call("MUL", [([1], I8), ([1], I8), ([1], I8)], I32)
    with pytest.raises(TosaError, match="shape \\[1\\]"):
        call("MUL", [([1], I32), ([1], I32), (3, I8)], I32)


def test_arithmetic_right_shift_round():
    a = [7, -7, 6, -8, 100]
    b = [1, 1, 2, 3, 0]
    eq(call("ARITHMETIC_RIGHT_SHIFT", [(a, I8), (b, I8)], I8), [3, -4, 1, -1, 100], I8)
    eq(call("ARITHMETIC_RIGHT_SHIFT", [(a, I8), (b, I8)], I8, attrs={"round": True}), [4, -3, 2, -1, 100], I8)
    with pytest.raises(TosaUnpredictable):
        call("ARITHMETIC_RIGHT_SHIFT", [([1], I8), ([8], I8)], I8)


def test_logical_shifts_work_on_the_bit_pattern():
    eq(call("LOGICAL_RIGHT_SHIFT", [([-128, -1], I8), ([7, 4], I8)], I8), [1, 15], I8)
    eq(call("LOGICAL_LEFT_SHIFT", [([0x41, -1], I8), ([1, 7], I8)], I8), [-126, -128], I8)
    eq(call("LOGICAL_RIGHT_SHIFT", [([-1], I32), ([31], I32)], I32), [1], I32)


def test_bitwise_logical_compare_select():
    eq(call("BITWISE_AND", [([0x0F, -1], I16), ([0x3C, 5], I16)], I16), [0x0C, 5], I16)
    eq(call("BITWISE_XOR", [([0x0F], I8), ([-1], I8)], I8), [~0x0F], I8)
    eq(call("BITWISE_NOT", [([0, -1, 5], I32)], I32), [-1, 0, -6], I32)
    eq(call("LOGICAL_XOR", [([True, False], BOOL), ([True, True], BOOL)], BOOL), [False, True], BOOL)
    eq(call("GREATER_EQUAL", [([1, 2, 3], I32), ([2], I32)], BOOL), [False, True, True], BOOL)
    eq(call("SELECT", [([True, False], BOOL), ([1, 2], I8), ([9], I8)], I8), [1, 9], I8)
    with pytest.raises(TosaError):
        call("EQUAL", [([1], I32), ([1], I32)], I32)


def test_intdiv_truncates_towards_zero():
    eq(call("INTDIV", [([7, -7, 7, -7], I32), ([2, 2, -2, -2], I32)], I32), [3, -3, -3, 3], I32)
    with pytest.raises(TosaUnpredictable):
        call("INTDIV", [([1], I32), ([0], I32)], I32)
    with pytest.raises(TosaUnpredictable):
        call("INTDIV", [([-2**31], I32), ([-1], I32)], I32)


def test_clz_abs_negate():
    eq(call("CLZ", [([0, 1, -1, 0x00010000], I32)], I32), [32, 31, 0, 15], I32)
    eq(call("ABS", [([-5, 5, 0], I32)], I32), [5, 5, 0], I32)
    with pytest.raises(TosaUnpredictable):
        call("ABS", [([-2**31], I32)], I32)
    # int8 with zero points: (-(v - 3)) + (-2), clipped to int8
    r = call("NEGATE", [([10, -128, 127], I8), ([3], I8), ([-2], I8)], I8)
    eq(r, [-9, 127, -126], I8)
    with pytest.raises(TosaError, match="input1_zp"):
        call("NEGATE", [([1], I16), ([1], I16), ([0], I16)], I16)


def test_clamp_attribute_as_bytes_or_int():
    r = call("CLAMP", [([-100, 0, 100], I8)], I8, attrs={"min_val": -10, "max_val": 20})
    eq(r, [-10, 0, 20], I8)
    r = call("CLAMP", [([-1000, 0, 1000], I16)], I16, attrs={"min_val": b"\x00\xff", "max_val": b"\x00\x01"})
    eq(r, [-256, 0, 256], I16)
    with pytest.raises(TosaError, match="max_val < min_val"):
        call("CLAMP", [([1], I8)], I8, attrs={"min_val": 5, "max_val": 4})


def test_reductions():
    x = [[1, 5, 3], [4, 2, 6]]
    eq(call("REDUCE_SUM", [(x, I32)], I32, (2, 1), {"axis": 1}), [[9], [12]], I32)
    eq(call("REDUCE_MAX", [(x, I8)], I8, (1, 3), {"axis": 0}), [[4, 5, 6]], I8)
    eq(call("REDUCE_MIN", [(x, I16)], I16, (2, 1), {"axis": 1}), [[1], [2]], I16)
    eq(call("REDUCE_ANY", [([[True, False], [False, False]], BOOL)], BOOL, (2, 1), {"axis": 1}), [[True], [False]], BOOL)
    eq(call("REDUCE_ALL", [([[True, True], [False, True]], BOOL)], BOOL, (1, 2), {"axis": 0}), [[False, True]], BOOL)
    # every partial sum must fit int32, even if the total does
    with pytest.raises(TosaUnpredictable):
        call("REDUCE_SUM", [([2**31 - 1, 1, -5], I32)], I32, (1,), {"axis": 0})
    with pytest.raises(TosaError, match="axis"):
        call("REDUCE_SUM", [(x, I32)], I32, (2, 1), {"axis": 2})
    with pytest.raises(TosaError, match="output shape"):
        call("REDUCE_SUM", [(x, I32)], I32, (2, 3), {"axis": 1})
    # REDUCE_PRODUCT is defined for floating-point types only
    with pytest.raises(TosaError, match="unsupported element types"):
        call("REDUCE_PRODUCT", [(x, I32)], I32, (2, 1), {"axis": 1})


def test_argmax_first_maximum():
    eq(call("ARGMAX", [([[1, 7, 7], [-128, -128, -128]], I8)], I32, (2,), {"axis": 1}), [1, 0], I32)


def test_cast():
    eq(call("CAST", [([-1, 0, 300], I16)], BOOL), [True, False, True], BOOL)
    eq(call("CAST", [([True, False], BOOL)], I32), [1, 0], I32)
    eq(call("CAST", [([300, -129], I16)], I8), [44, 127], I8)
    eq(call("CAST", [([-5], I8)], I32), [-5], I32)
    with pytest.raises(TosaError):
        call("CAST", [([1], I8)], I8)


def _shape(values):
    return (values, SHAPE)


def test_layout_ops():
    x = np.arange(6).reshape(2, 3)
    eq(call("RESHAPE", [(x, I8), _shape([3, 2])], I8, (3, 2)), x.reshape(3, 2), I8)
    eq(call("TRANSPOSE", [(x, I16)], I16, (3, 2), {"perms": [1, 0]}), x.T, I16)
    eq(call("REVERSE", [(x, I32)], I32, None, {"axis": 1}), x[:, ::-1], I32)
    eq(call("SLICE", [(x, I8), _shape([1, 1]), _shape([1, 2])], I8, (1, 2)), [[4, 5]], I8)
    eq(call("TILE", [(x, I8), _shape([2, 1])], I8, (4, 3)), np.tile(x, (2, 1)), I8)
    eq(call("PAD", [(x, I8), _shape([1, 0, 0, 2]), ([-7], I8)], I8, (3, 5)),
       [[-7] * 5, [0, 1, 2, -7, -7], [3, 4, 5, -7, -7]], I8)
    eq(call("CONCAT", [(x, I8), (x + 10, I8)], I8, (2, 6), {"axis": 1}), np.concatenate([x, x + 10], 1), I8)
    with pytest.raises(TosaError, match="twice"):
        call("TRANSPOSE", [(x, I16)], I16, (3, 3), {"perms": [1, 1]})
    with pytest.raises(TosaError, match="start"):
        call("SLICE", [(x, I8), _shape([1, 2]), _shape([1, 2])], I8, (1, 2))
    with pytest.raises(TosaError, match="tensor_size"):
        call("RESHAPE", [(x, I8), _shape([4, 2])], I8, (4, 2))
    with pytest.raises(TosaError, match="padding < 0"):
        call("PAD", [(x, I8), _shape([-1, 0, 0, 0]), ([0], I8)], I8, (1, 3))
    with pytest.raises(TosaError, match="rank"):
        call("TILE", [(np.zeros((1,) * 7), I8), _shape([1] * 7)], I8, (1,) * 7)


def test_gather_scatter():
    values = np.arange(12).reshape(1, 4, 3)
    eq(call("GATHER", [(values, I16), ([[3, 0, 3]], I32)], I16, (1, 3, 3)), values[0][[3, 0, 3]][None], I16)
    r = call("SCATTER", [(values, I8), ([[2, 0]], I32), ([[[-1, -2, -3], [-4, -5, -6]]], I8)], I8)
    exp = values.copy()
    exp[0, 2], exp[0, 0] = [-1, -2, -3], [-4, -5, -6]
    eq(r, exp, I8)
    with pytest.raises(TosaUnpredictable, match="at most once"):
        call("SCATTER", [(values, I8), ([[1, 1]], I32), (np.zeros((1, 2, 3)), I8)], I8)
    with pytest.raises(TosaUnpredictable):
        call("GATHER", [(values, I16), ([[4]], I32)], I16, (1, 1, 3))


def test_resize_nearest_and_bilinear():
    x = np.array([[10, 20], [30, 40]]).reshape(1, 2, 2, 1)
    scale, off, border = _shape([2, 1, 2, 1]), _shape([0, 0]), _shape([0, 0])
    # 2x upscale, OH = ((2-1)*2 - 0 + 0)/1 + 1 = 3
    r = call("RESIZE", [(x, I8), scale, off, border], I8, (1, 3, 3, 1), {"mode": 1})
    eq(r, np.array([[10, 20, 20], [30, 40, 40], [30, 40, 40]]).reshape(1, 3, 3, 1), I8)
    r = call("RESIZE", [(x, I8), scale, off, border], I32, (1, 3, 3, 1), {"mode": 2})
    # weights in units of scale_n = 2 per axis: output = 4 * interpolated value
    eq(r, np.array([[40, 60, 80], [80, 100, 120], [120, 140, 160]]).reshape(1, 3, 3, 1), I32)
    r = call("RESIZE", [(x, I16), scale, off, border], I48, (1, 3, 3, 1), {"mode": 2})
    assert r.dtype == np.int64 and r[0, 1, 1, 0] == 100
    with pytest.raises(TosaError, match="multiple"):
        call("RESIZE", [(x, I8), _shape([2, 3, 2, 3]), off, border], I8, (1, 1, 1, 1), {"mode": 1})


def test_const_identity_and_unsupported():
    c = OpCall(op="CONST", attrs={}, inputs=[], input_specs=[], output_specs=[TensorSpec((2,), I8)],
               extra={"value": np.array([1, 2], np.int8)})
    eq(run_op(c)[0], [1, 2], I8)
    c.extra["value"] = np.array([1, 2], np.int16)
    with pytest.raises(TosaError):
        run_op(c)
    eq(call("IDENTITY", [([1, 2**40], I48)], I48), [1, 2**40], I48)
    with pytest.raises(TosaUnsupported):
        run_op(OpCall(op="COS", attrs={}, inputs=[], input_specs=[], output_specs=[]))


def test_same_types_and_broadcast_shape_fast_paths_equal_the_rules():
    """same_types' usual answer (every operand of the output's type) and broadcast_shape's equal
    shapes return what the full rules return, and anything else goes through them: over type
    combinations of 1-3 inputs and pairs of small shapes, the same result or the same error."""
    import itertools

    from firmware_model.errors import NpuBenchError
    from firmware_model.tosa_ops import op_utils

    def outcome(fn):
        try:
            return ("ok", fn())
        except NpuBenchError as e:
            return (type(e).__name__, str(e))

    kinds = (DType.INT8, DType.INT16, DType.INT32, DType.BOOL, DType.FP32)
    for n_in in (1, 2, 3):
        for combo in itertools.product(kinds, repeat=n_in + 1):
            call = OpCall("OP", {}, [], [TensorSpec((1,), t) for t in combo[:n_in]], [TensorSpec((1,), combo[-1])], "w")
            for allowed in ((DType.INT8, DType.INT16, DType.INT32), (DType.BOOL,)):
                rows = [(t,) * (n_in + 1) for t in allowed]
                want = outcome(lambda: op_utils.check_types(call, rows, tuple(range(n_in)), (0,))[0])
                assert outcome(lambda: op_utils.same_types(call, allowed, n_in)) == want
    call = OpCall("OP", {}, [], [], [], "w")
    shapes = [s for r in range(4) for s in itertools.product((1, 2, 3), repeat=r)]
    for s1, s2 in itertools.product(shapes, repeat=2):
        if len(s1) == len(s2):
            want = tuple(b if a == 1 else a for a, b in zip(s1, s2)) \
                if all(a == 1 or b in (1, a) for a, b in zip(s1, s2)) else "error"
        else:
            want = "error"
        got = outcome(lambda: op_utils.broadcast_shape(call, s1, s2))
        assert (got[1] if got[0] == "ok" else "error") == want, (s1, s2)


@pytest.mark.parametrize("op", ["ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"])
def test_shift_amount_require_is_exactly_0_to_bits_minus_1(op):
    """The shifts' REQUIRE 0 <= value2 <= bits - 1, checked through the amount's unsigned reading:
    every amount of each type's range edges and around the bounds fails exactly when outside."""
    for t in (DType.INT8, DType.INT16, DType.INT32):
        amounts = sorted({t.min, t.min + 1, -2, -1, 0, 1, t.bits - 2, t.bits - 1, t.bits, t.bits + 1, t.max})
        for b in amounts:
            a = np.array([5, -7], t.storage)
            specs = [TensorSpec((2,), t), TensorSpec((2,), t)]
            call = OpCall(op, {"round": False}, [a, np.array([0, b], t.storage)], specs, [TensorSpec((2,), t)], "w")
            if 0 <= b <= t.bits - 1:
                run_op(call)
            else:
                with pytest.raises(TosaUnpredictable, match="shift amount"):
                    run_op(call)
