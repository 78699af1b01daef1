"""RESCALE and TABLE against Arm's reference model, bit for bit: generated graphs over every legal
type pair and flag combination (scale32 / scale16, single and double round, per-channel,
unsigned input or output, zero points, rank 0..4), REQUIRE failures (UNPREDICTABLE), ERROR_IFs.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim import seeds
from firmware_model.errors import TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops import rescale_table
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import TensorSpec, run_op
from sim.oracles.arm_oracle import ERROR, UNPREDICTABLE, VALID, OpCase, Operand, run_reference

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
SINGLE, INEXACT, DOUBLE = 1, 2, 3


def rand(rng, dtype: DType, shape, lo=None, hi=None) -> np.ndarray:
    lo = dtype.min if lo is None else lo
    hi = dtype.max if hi is None else hi
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dtype.storage)


def const(values, dtype: DType) -> Operand:
    return Operand(np.asarray(values, dtype=np.int64).astype(dtype.storage).reshape(-1), dtype, True)


def assert_same_as_reference(case: OpCase) -> str:
    ref = run_reference(case)
    if ref.status == VALID:
        ours = run_op(case.op_call())
        for o, r in zip(ours, ref.outputs):
            assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
            if not np.array_equal(o, r):
                bad = np.argwhere(o != r)
                i = tuple(bad[0])
                raise AssertionError(f"{len(bad)} elements differ, first at {i}: ours {o[i]} "
                                     f"reference {r[i]} ({case.attrs})")
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
# RESCALE

def rescale_case(x, in_t, out_t, mult, shift, izp=0, ozp=0, *, scale32=True, rounding=SINGLE,
                 per_channel=False, in_u=False, out_u=False, out_shape=None, mult_t=None) -> OpCase:
    mult_t = mult_t or (I32 if scale32 else I16)
    return OpCase("RESCALE",
                  [Operand(x, in_t), const(mult, mult_t), const(shift, I8), const([izp], in_t),
                   const([ozp], out_t)],
                  [TensorSpec(tuple(x.shape) if out_shape is None else out_shape, out_t)],
                  dict(scale32=scale32, rounding_mode=rounding, per_channel=per_channel,
                       input_unsigned=in_u, output_unsigned=out_u))


def _legal_flags(rng, in_t, out_t):
    """Random flags allowed by RESCALE's ERROR_IFs for this type pair."""
    scale32 = in_t != I48 and bool(rng.integers(0, 4))
    rounding = DOUBLE if scale32 and rng.integers(0, 2) else SINGLE
    in_u = in_t in (I8, I16) and out_t != I32 and rng.integers(0, 4) == 0
    out_u = (not in_u) and out_t in (I8, I16) and in_t in (I8, I16) and rng.integers(0, 4) == 0
    return scale32, rounding, bool(in_u), bool(out_u)


def _zero_point(rng, t, unsigned):
    if t == I8:
        return int(rng.integers(0, 256)) if unsigned else int(rng.integers(-128, 128))
    if t == I16 and unsigned:
        return int(rng.choice([0, 32768]))
    return 0


def _shift_floor(v_lo: int, v_hi: int) -> int:
    """Smallest shift for which apply_scale_32's REQUIRE on value holds for all of [v_lo, v_hi]."""
    need = max(v_hi.bit_length(), (-v_lo - 1).bit_length() if v_lo < 0 else 0)
    return max(2, need + 1)


def random_rescale(rng, in_t, out_t, *, allow_unpredictable=False) -> OpCase:
    scale32, rounding, in_u, out_u = _legal_flags(rng, in_t, out_t)
    rank = int(rng.integers(0, 5))
    per_channel = rank >= 1 and bool(rng.integers(0, 2))
    shape = tuple(int(d) for d in rng.integers(1, 7, rank))
    x = rand(rng, in_t, shape, *((-(1 << 47), (1 << 47) - 1) if in_t == I48 else (None, None)))
    izp, ozp = _zero_point(rng, in_t, in_u), _zero_point(rng, out_t, out_u)
    vals = (x.astype(np.int64) & in_t.umax) if in_u else x.astype(np.int64)
    v = vals - izp
    v_lo, v_hi = (int(v.min()), int(v.max())) if v.size else (0, 0)
    nc = shape[-1] if per_channel else 1
    in_bits = in_t.bits + (1 if in_u else 0)
    out_bits = out_t.bits + (1 if out_u else 0)
    mults, shifts = [], []
    for _ in range(nc):
        if scale32:
            m = int(rng.integers(1 << 30, 1 << 31)) if rng.integers(0, 4) else int(rng.integers(0, 1 << 31))
            target = 30 + in_bits - out_bits + int(rng.integers(-4, 5))
            floor = _shift_floor(v_lo, v_hi)
        else:
            m = int(rng.integers(1 << 14, 1 << 15)) if rng.integers(0, 4) else int(rng.integers(0, 1 << 15))
            target = 14 + in_bits - out_bits + int(rng.integers(-4, 5))
            vmax = max(abs(v_lo), abs(v_hi), 1)
            floor = max(2, (vmax * max(m, 1)).bit_length() - 30)  # result stays inside int32
        s = min(max(target, floor), 62)
        if allow_unpredictable and rng.integers(0, 3) == 0:
            s = int(rng.integers(1, 64))  # may break a REQUIRE: both sides must then agree
        mults.append(m)
        shifts.append(s)
    return rescale_case(x, in_t, out_t, mults, shifts, izp, ozp, scale32=scale32,
                        rounding=rounding, per_channel=per_channel, in_u=in_u, out_u=out_u)


@pytest.mark.parametrize("in_t", [I8, I16, I32, I48])
@pytest.mark.parametrize("out_t", [I8, I16, I32])
def test_rescale_matches_reference(in_t, out_t):
    rng = seeds.rng(int(in_t) * 10 + int(out_t))
    statuses = [assert_same_as_reference(random_rescale(rng, in_t, out_t))
                for _ in range(25 if in_t != I48 else 6)]
    assert statuses.count(VALID) == len(statuses)


def test_rescale_in_small_blocks(monkeypatch):
    """The kernel evaluates large tensors block by block: same results with tiny blocks."""
    monkeypatch.setattr(rescale_table, "CHUNK", 7)
    rng = seeds.rng(77)
    for in_t, out_t in ((I8, I8), (I16, I32), (I32, I8), (I32, I16)):
        for _ in range(6):
            assert assert_same_as_reference(random_rescale(rng, in_t, out_t, allow_unpredictable=True)) \
                in (VALID, UNPREDICTABLE)


def test_rescale_require_failures_agree_with_reference():
    rng = seeds.rng(123)
    statuses = [assert_same_as_reference(random_rescale(rng, t_in, t_out, allow_unpredictable=True))
                for t_in in (I8, I16, I32) for t_out in (I8, I16, I32) for _ in range(8)]
    assert VALID in statuses and UNPREDICTABLE in statuses


def test_rescale_unsigned_output_clips_negative_to_zero():
    """The reference model clips the signed int32 result to [0, 255]: -256 becomes 0, not 255."""
    x = np.array([-128, -100, -1, 0, 1, 50, 100, 127], np.int8)
    case = rescale_case(x, I8, I8, [1 << 30], [29], 0, 10, out_u=True)   # 2x + 10
    assert assert_same_as_reference(case) == VALID
    got = run_op(case.op_call())[0]
    assert got.view(np.uint8).tolist() == [0, 0, 8, 10, 12, 110, 210, 255]


def test_rescale_unsigned_input_zero_extends_value_and_zero_point():
    x = np.array([-128, -100, -1, 0, 127], np.int8)   # read as 128, 156, 255, 0, 127
    case = rescale_case(x, I8, I8, [1 << 30], [30], 200, 0, in_u=True)
    assert assert_same_as_reference(case) == VALID
    assert run_op(case.op_call())[0].tolist() == [-72, -44, 55, -128, -73]


def test_rescale_uint16_zero_point_32768():
    x = np.array([-32768, -1000, -1, 0, 1, 1000, 32767], np.int16)
    for in_u, out_u in ((False, True), (True, False)):
        case = rescale_case(x, I16, I16, [1 << 30], [30], 32768 if in_u else 0,
                            32768 if out_u else 0, in_u=in_u, out_u=out_u)
        assert assert_same_as_reference(case) == VALID


@pytest.mark.parametrize("shift", [30, 31, 32, 33, 40, 62])
@pytest.mark.parametrize("rounding", [SINGLE, DOUBLE])
def test_rescale_double_round_boundary(shift, rounding):
    """Double rounding only changes results for shift > 31."""
    rng = seeds.rng(shift)
    half = 1 << min(shift - 1, 31)
    x = rng.integers(max(-half, -2**31), min(half, 2**31), 500, dtype=np.int64).astype(np.int32)
    x[:4] = [max(-half, -2**31), min(half, 2**31) - 1, 0, -1]
    m = [(1 << 31) - 1, 1 << 30, 3 << 29, 12345]
    xs = np.stack([x] * 4, axis=-1)
    case = rescale_case(xs, I32, I32, m, [shift] * 4, per_channel=True, rounding=rounding)
    assert assert_same_as_reference(case) == VALID


RESCALE_ERRORS = {
    "int16 input zero point": lambda: rescale_case(np.zeros(3, np.int16), I16, I8, [1 << 30], [30], izp=1),
    "int32 output zero point": lambda: rescale_case(np.zeros(3, np.int8), I8, I32, [1 << 30], [30], ozp=2),
    "uint16 input zero point": lambda: rescale_case(np.zeros(3, np.int16), I16, I8, [1 << 30], [30], izp=5, in_u=True),
    "uint16 output zero point": lambda: rescale_case(np.zeros(3, np.int8), I8, I16, [1 << 30], [30], ozp=7, out_u=True),
    "scale32 with int48": lambda: rescale_case(np.zeros(3, np.int64), I48, I16, [1 << 30], [30]),
    "double round without scale32": lambda: rescale_case(np.zeros(3, np.int16), I16, I8, [1 << 14], [14], scale32=False, rounding=DOUBLE),
    "both unsigned": lambda: rescale_case(np.zeros(3, np.int8), I8, I8, [1 << 30], [30], in_u=True, out_u=True),
    "int32 output, unsigned input": lambda: rescale_case(np.zeros(3, np.int8), I8, I32, [1 << 30], [30], in_u=True),
    "int32 input, unsigned output": lambda: rescale_case(np.zeros(3, np.int32), I32, I8, [1 << 30], [30], out_u=True),
    "int48 input, unsigned output": lambda: rescale_case(np.zeros(3, np.int64), I48, I8, [1 << 14], [14], scale32=False, out_u=True),
    "int48 input unsigned": lambda: rescale_case(np.zeros(3, np.int64), I48, I8, [1 << 14], [14], scale32=False, in_u=True),
    "int32 input unsigned": lambda: rescale_case(np.zeros(3, np.int32), I32, I8, [1 << 30], [30], in_u=True),
    "per-channel rank 0": lambda: rescale_case(np.array(3, np.int8), I8, I8, [1 << 30], [30], per_channel=True),
    "output shape": lambda: rescale_case(np.zeros((2, 3), np.int8), I8, I8, [1 << 30], [30], out_shape=(3, 2)),
    "output type int48": lambda: rescale_case(np.zeros(3, np.int8), I8, I48, [1 << 30], [30]),
}


@pytest.mark.parametrize("name", sorted(RESCALE_ERRORS))
def test_rescale_error_if(name):
    assert assert_same_as_reference(RESCALE_ERRORS[name]()) == ERROR


def test_rescale_multiplier_type_must_follow_scale32():
    """An int16 multiplier with scale32 (or int32 without) is an error. Arm's reference model
    crashes on this graph (assertion in OpRescale::checkTensorAttributes), so only ours is run."""
    for scale32, mult_t in ((True, I16), (False, I32)):
        case = rescale_case(np.zeros(3, np.int8), I8, I8, [1 << 14], [14], scale32=scale32,
                            mult_t=mult_t)
        with pytest.raises(TosaError):
            run_op(case.op_call())


def test_rescale_per_channel_length_mismatch_is_an_error():
    case = rescale_case(np.zeros((2, 3), np.int8), I8, I8, [1 << 30] * 2, [30] * 2, per_channel=True)
    with pytest.raises(TosaError):
        run_op(case.op_call())


def test_rescale_inexact_round_is_unsupported():
    case = rescale_case(np.zeros(3, np.int8), I8, I8, [1 << 30], [30], rounding=INEXACT)
    with pytest.raises(TosaUnsupported):
        run_op(case.op_call())


def test_rescale_require_messages_name_the_op():
    case = rescale_case(np.array([5], np.int8), I8, I8, [4], [2])   # |5| >= 1 << (2 - 1)
    assert assert_same_as_reference(case) == UNPREDICTABLE
    with pytest.raises(TosaUnpredictable) as e:
        run_op(case.op_call())
    assert e.value.op == "RESCALE" and "apply_scale_32" in e.value.rule


# ----------------------------------------------------------------------------------------------
# TABLE

def table_case(x, tab, in_t, out_t, table_const=True) -> OpCase:
    return OpCase("TABLE", [Operand(x, in_t), Operand(tab, in_t, table_const)],
                  [TensorSpec(tuple(x.shape), out_t)], {})


def smooth_table(rng) -> np.ndarray:
    """513 int16 entries whose neighbours differ by less than 2^15 (the slope REQUIRE holds)."""
    start = int(rng.integers(-20000, 20000))
    steps = rng.integers(-300, 301, 512)
    return np.clip(np.concatenate([[start], start + np.cumsum(steps)]), -32768, 32767).astype(np.int16)


def test_table_int8_all_inputs():
    rng = seeds.rng(8)
    for table_const in (True, False):
        tab = rand(rng, I8, (256,))
        x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
        assert assert_same_as_reference(table_case(x, tab, I8, I8, table_const)) == VALID
        x = rand(rng, I8, (2, 3, 5, 7))
        assert assert_same_as_reference(table_case(x, tab, I8, I8, table_const)) == VALID


def test_table_int16_all_inputs():
    rng = seeds.rng(16)
    for _ in range(3):
        x = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)
        assert assert_same_as_reference(table_case(x, smooth_table(rng), I16, I32)) == VALID
    x = np.array(-1, np.int16)   # rank 0
    assert assert_same_as_reference(table_case(x, smooth_table(rng), I16, I32)) == VALID


def test_table_int16_large_input():
    """Above 65536 elements the kernel evaluates each distinct input value once."""
    rng = seeds.rng(61)
    x = rand(rng, I16, (3, 170, 171))
    assert assert_same_as_reference(table_case(x, smooth_table(rng), I16, I32)) == VALID
    tab = np.zeros(513, np.int16)
    tab[200], tab[201] = -1, 32767                # only segment 200 has a slope beyond int16
    x[0, 0, :5] = np.arange(-32768 + 200 * 128, -32768 + 200 * 128 + 5)
    assert assert_same_as_reference(table_case(x, tab, I16, I32)) == UNPREDICTABLE
    x = x[(x < -32768 + 200 * 128) | (x >= -32768 + 201 * 128)].reshape(-1)
    assert x.size > 1 << 16
    assert assert_same_as_reference(table_case(x, tab, I16, I32)) == VALID


def test_table_int16_extreme_slopes():
    """Slopes of exactly -32768 and +32767 are allowed; one more is UNPREDICTABLE."""
    tab = np.zeros(513, np.int16)
    tab[1::2] = 32767                       # 0 -> 32767: slope +32767, back: -32767
    x = np.arange(-32768, 32768, 97, dtype=np.int16)
    assert assert_same_as_reference(table_case(x, tab, I16, I32)) == VALID
    tab = np.full(513, -1, np.int16)
    tab[1::2] = 32767                       # slope 32768 from -1 to 32767
    assert assert_same_as_reference(table_case(x, tab, I16, I32)) == UNPREDICTABLE


def test_table_slope_only_checked_where_used():
    tab = np.zeros(513, np.int16)
    tab[512], tab[511] = 32767, -32768      # out-of-range slope only in the last segment
    x = np.array([-32768, 0, 100], np.int16)
    assert assert_same_as_reference(table_case(x, tab, I16, I32)) == VALID
    x = np.array([32767], np.int16)
    assert assert_same_as_reference(table_case(x, tab, I16, I32)) == UNPREDICTABLE


@pytest.mark.parametrize("in_t,out_t,size", [(I8, I8, 255), (I8, I8, 257), (I16, I32, 512),
                                             (I16, I32, 256)])
def test_table_wrong_length_is_an_error(in_t, out_t, size):
    rng = seeds.rng(size)
    case = table_case(rand(rng, in_t, (4,)), rand(rng, in_t, (size,), -10, 10), in_t, out_t)
    assert assert_same_as_reference(case) == ERROR


@pytest.mark.parametrize("in_t,out_t,size", [(I8, I32, 256), (I16, I16, 513), (I8, I16, 256)])
def test_table_wrong_types_are_errors(in_t, out_t, size):
    rng = seeds.rng(0)
    case = table_case(rand(rng, in_t, (4,)), rand(rng, in_t, (size,), -10, 10), in_t, out_t)
    assert assert_same_as_reference(case) == ERROR


@pytest.mark.parametrize("out_shape", [(2, 4), (3, 4), (8,)])
def test_table_output_shape_mismatch_is_an_error(out_shape):
    """The output has the input's shape. (Arm's reference model does not check this for TABLE:
    it fills whatever output it is given, zero-padding a larger one; we follow the spec.)"""
    rng = seeds.rng(0)
    case = table_case(rand(rng, I8, (4, 2)), rand(rng, I8, (256,)), I8, I8)
    case.outputs = [TensorSpec(out_shape, I8)]
    with pytest.raises(TosaError):
        run_op(case.op_call())


def test_rescale_rules_are_looked_at_whenever_one_may_hold():
    """RESCALE checks its thirteen ERROR_IFs on zero points, signedness and rounding only when
    _rescale_rules_may_fail says one may hold and _rescale_rule_holds that one does: over every type
    pair, zero-point sample, flag and rounding mode, whenever a rule holds (_check_rescale_rules
    raises) both guards are True, and _rescale_rule_holds is False whenever none does."""
    import itertools

    from firmware_model.errors import TosaError
    from firmware_model.tosa_ops import numerics, rescale_table as rt
    from firmware_model.tosa_ops.registry import OpCall

    call = OpCall("RESCALE", {}, [], [], [], "here")
    held = 0
    for (in_t, out_t), izp, ozp, in_u, out_u, scale32, mode in itertools.product(
            rt.RESCALE_TYPES, (0, 1, -1, 32768), (0, 1, -1, 32768), (False, True), (False, True), (False, True),
            (numerics.SINGLE_ROUND, numerics.DOUBLE_ROUND, numerics.INEXACT_ROUND)):
        case = (in_t, out_t, izp, ozp, in_u, out_u, scale32, mode)
        try:
            rt._check_rescale_rules(call, in_t, out_t, izp, ozp, in_u, out_u, scale32, mode)
        except TosaError:
            held += 1
            assert rt._rescale_rules_may_fail(in_t, out_t, izp, ozp, in_u, out_u, scale32, mode), case
            assert rt._rescale_rule_holds(*case), case
        else:
            assert not rt._rescale_rule_holds(*case), case
    assert held > 1000
