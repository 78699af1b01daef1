"""The TOSA numeric primitives in firmware_model/tosa_ops/numerics.py.

Each primitive is checked twice, independently of its vectorised implementation:
- against the spec's pseudocode transcribed here with Python's unbounded ints, one value at a
  time, on corner cases and random values;
- against Arm's reference model, through tiny RESCALE (apply_scale_32 / apply_scale_16) and
  TABLE (apply_lookup_s) graphs whose expected outputs come from the Python-int transcription.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim import seeds
from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops import numerics as nm
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import TensorSpec
from sim.oracles.arm_oracle import UNPREDICTABLE, VALID, OpCase, Operand, run_reference

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


# ----------------------------------------------------------------------------------------------
# The spec's pseudocode with Python ints (no numpy): the independent expectation

def py_apply_scale_32(value: int, multiplier: int, shift: int, double_round: bool = False) -> int:
    assert multiplier >= 0 and 2 <= shift <= 62
    assert -(1 << (shift - 1)) <= value < (1 << (shift - 1))
    rnd = 1 << (shift - 1)
    if double_round and shift > 31:
        rnd += (1 << 30) if value >= 0 else -(1 << 30)
    result = (value * multiplier + rnd) >> shift          # Python >> floors, like int64 >>
    assert INT32_MIN <= result <= INT32_MAX
    return result


def py_apply_scale_16(value: int, multiplier: int, shift: int) -> int:
    assert multiplier >= 0 and 2 <= shift <= 62
    result = (value * multiplier + (1 << (shift - 1))) >> shift
    assert INT32_MIN <= result <= INT32_MAX
    return result


def py_count_leading_zeros(a: int) -> int:
    a &= 0xFFFFFFFF
    acc, mask = 32, 1 << 31
    if a:
        acc = 0
        while not (mask & a):
            mask >>= 1
            acc += 1
    return acc


def py_reciprocal_scale(value: int) -> tuple[int, int]:
    assert value > 0
    k = 32 - py_count_leading_zeros(value - 1)
    numerator = ((1 << 30) + 1) << k
    return numerator // value, 30 + k


def py_apply_lookup_s(table: list[int], value: int) -> int:
    clipped = min(max(value, -32768), 32767)
    index = (clipped + 32768) >> 7
    fraction = clipped & 0x7F
    base, nxt = table[index], table[index + 1]
    slope = nxt - base
    assert -32768 <= slope <= 32767
    return (base << 7) + slope * fraction


def np_scale_32(values, multiplier, shift, double_round=False):
    return nm.apply_scale_32(np.array(values, np.int64), multiplier, shift, double_round)


# ----------------------------------------------------------------------------------------------
# apply_scale_32

def _bounds(shift: int) -> tuple[int, int]:
    """The REQUIRE bounds on value, intersected with int32 (value is int32_t)."""
    return max(-(1 << (shift - 1)), INT32_MIN), min((1 << (shift - 1)) - 1, INT32_MAX)


def _corner_values(shift: int) -> list[int]:
    lo, hi = _bounds(shift)
    vals = {lo, lo + 1, hi, hi - 1, 0, 1, -1, 2, -2}
    for p in range(0, 32):
        for v in (1 << p, -(1 << p), (1 << p) - 1, -(1 << p) + 1, 3 << p, -(3 << p)):
            vals.add(v)
    return sorted(v for v in vals if lo <= v <= hi)


MULTIPLIERS = [0, 1, 2, 3, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, 3 << 29, (1 << 31) - 1, 1518500250]


@pytest.mark.parametrize("double_round", [False, True])
@pytest.mark.parametrize("shift", [2, 3, 15, 16, 30, 31, 32, 33, 47, 61, 62])
def test_apply_scale_32_corner_cases(shift, double_round):
    values = _corner_values(shift)
    for m in MULTIPLIERS:
        got = np_scale_32(values, m, shift, double_round)
        assert got.dtype == np.int32
        assert got.tolist() == [py_apply_scale_32(v, m, shift, double_round) for v in values]


def test_apply_scale_32_random():
    rng = seeds.rng(32)
    shifts = rng.integers(2, 63, 5000)
    mults = rng.integers(0, 1 << 31, 5000)
    lo = np.maximum(-(np.int64(1) << (shifts - 1)), INT32_MIN)
    hi = np.minimum((np.int64(1) << (shifts - 1)) - 1, INT32_MAX)
    values = lo + (rng.random(5000) * (hi - lo + 1)).astype(np.int64)
    values = np.clip(values, lo, hi)
    for dr in (False, True):
        got = nm.apply_scale_32(values, mults, shifts, dr)
        want = [py_apply_scale_32(int(v), int(m), int(s), dr) for v, m, s in zip(values, mults, shifts)]
        assert got.tolist() == want


def test_apply_scale_32_double_round_rule():
    """The extra 1 << 30 (towards the value's sign) applies only for shift > 31."""
    m = 1 << 30
    for v in (3, -3, 1000001, -1000001):
        assert np_scale_32([v], m, 31, True).tolist() == np_scale_32([v], m, 31, False).tolist()
    # shift 32: value * 2^30 / 2^32 = value / 4. Single rounding: half up. Double rounding rounds
    # twice (to 1/2, then to 1): 0.25 -> 0.5 -> 1, and -0.5 -> -1 (away from zero).
    assert np_scale_32([1, 2, 3, -1, -2, -3], m, 32, False).tolist() == [0, 1, 1, 0, 0, -1]
    assert np_scale_32([1, 2, 3, -1, -2, -3], m, 32, True).tolist() == [1, 1, 1, 0, -1, -1]
    # (2^31 - 1)^2 / 2^32, positive and negative, as the reference model computes it below
    big = (1 << 31) - 1
    assert np_scale_32([big, -big - 1], big, 32, True).tolist() == [1073741823, -1073741824]
    assert np_scale_32([big, -big - 1], big, 32, False).tolist() == [1073741823, -1073741823]


@pytest.mark.parametrize("value,multiplier,shift", [
    (2, 1, 2), (-3, 1, 2),                      # |value| beyond 1 << (shift - 1)
    (1 << 30, 1, 31), (-(1 << 30) - 1, 1, 31),
    (0, 1, 1), (0, 1, 63), (0, 1, 0),           # shift outside [2, 62]
    (5, -1, 10),                                # negative multiplier
])
def test_apply_scale_32_require(value, multiplier, shift):
    with pytest.raises(TosaUnpredictable):
        np_scale_32([value], multiplier, shift)
    # the hardware view computes something (no exception) instead
    nm.apply_scale_32(np.array([value], np.int64), multiplier, shift, require=False)


def test_apply_scale_32_require_bounds_are_inclusive_exclusive():
    for shift in (2, 9, 20, 31):
        lo, hi = -(1 << (shift - 1)), (1 << (shift - 1)) - 1
        np_scale_32([lo, hi], 1 << 30, shift)
        with pytest.raises(TosaUnpredictable):
            np_scale_32([hi + 1], 1 << 30, shift)
        with pytest.raises(TosaUnpredictable):
            np_scale_32([lo - 1], 1 << 30, shift)


# ----------------------------------------------------------------------------------------------
# apply_scale_16

def test_apply_scale_16_random_and_corners():
    rng = seeds.rng(16)
    cases = []
    for _ in range(3000):
        s = int(rng.integers(2, 63))
        m = int(rng.integers(0, 1 << 15))
        limit = ((1 << 31) << s) // max(m, 1)          # keep the result inside int32
        v = int(rng.integers(-min(limit, 1 << 47), min(limit, (1 << 47) - 1)))
        cases.append((v, m, s))
    cases += [((1 << 47) - 1, (1 << 15) - 1, 62), (-(1 << 47), (1 << 15) - 1, 62),
              ((1 << 47) - 1, 1 << 14, 31), (-(1 << 47), 1 << 14, 31), (5, 0, 2), (-1, 1, 2)]
    v, m, s = (np.array(c, np.int64) for c in zip(*cases))
    got = nm.apply_scale_16(v, m, s)
    assert got.dtype == np.int32
    assert got.tolist() == [py_apply_scale_16(*c) for c in cases]


def test_apply_scale_16_require():
    with pytest.raises(TosaUnpredictable):    # result (2^47 - 1) * 2^14 / 2^30 >= 2^31
        nm.apply_scale_16(np.array([(1 << 47) - 1]), 1 << 14, 30)
    with pytest.raises(TosaUnpredictable):
        nm.apply_scale_16(np.array([1]), -2, 10)
    with pytest.raises(TosaUnpredictable):
        nm.apply_scale_16(np.array([1]), 2, 63)


# ----------------------------------------------------------------------------------------------
# count_leading_zeros, reciprocal_scale

def test_count_leading_zeros():
    vals = [0, 1, 2, 3, -1, -2, INT32_MIN, INT32_MAX, 0x00800000, 0x007FFFFF]
    vals += [1 << p for p in range(31)] + [(1 << p) - 1 for p in range(32)]
    vals += seeds.rng(5).integers(INT32_MIN, INT32_MAX, 2000).tolist()
    got = nm.count_leading_zeros(np.array(vals, np.int64))
    assert got.dtype == np.int32
    assert got.tolist() == [py_count_leading_zeros(v) for v in vals]
    # the one-integer form (int32 values as they are read from memory)
    signed = [((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31) for v in vals]
    assert [nm.count_leading_zeros_int(v) for v in signed] == [py_count_leading_zeros(v) for v in vals]


def test_reciprocal_scale():
    """Over 1 <= value <= 2^30, where the spec's multiplier fits int32: (1 << 30) <= m < (1 << 31).
    (From 2^30 + 1 on it reaches 2^31; pooling counts stay far below, at most MAX_KERNEL^2.)"""
    vals = list(range(1, 4097)) + [(1 << p) + d for p in range(12, 31) for d in (-1, 0, 1)]
    vals = [v for v in vals if v <= 1 << 30]
    vals += seeds.rng(6).integers(1, (1 << 30) + 1, 2000).tolist() + [1 << 30]
    mult, shift = nm.reciprocal_scale(np.array(vals, np.int64))
    assert mult.dtype == np.int32 and shift.dtype == np.int8
    want = [py_reciprocal_scale(v) for v in vals]
    assert list(zip(mult.tolist(), shift.tolist())) == want
    assert all((1 << 30) <= m < (1 << 31) for m, _ in want)
    # the one-count form AVG_POOL2D prepares with gives the same pairs
    assert [nm.reciprocal_scale_int(v) for v in vals] == want


def test_reciprocal_scale_require():
    with pytest.raises(TosaUnpredictable):
        nm.reciprocal_scale(np.array([3, 0, 5]))
    for v in (0, -1):
        with pytest.raises(TosaUnpredictable, match="value > 0"):
            nm.reciprocal_scale_int(v)


def test_avg_pool_divisor_is_a_rounded_division():
    """apply_scale_32(sum, reciprocal_scale(count)) is round-half-up sum / count for the sums a
    pooling window can produce (int16 inputs, counts up to 64)."""
    rng = seeds.rng(7)
    for count in range(1, 65):
        sums = rng.integers(-32768 * count, 32767 * count + 1, 300)
        m, s = nm.reciprocal_scale(np.full(sums.shape, count))
        got = nm.apply_scale_32(sums, m, s).astype(np.int64)
        assert np.all(np.abs(got - sums / count) <= 0.5 + 1e-9)


# ----------------------------------------------------------------------------------------------
# apply_lookup_s, apply_lookup_8

def test_apply_lookup_s_all_inputs():
    rng = seeds.rng(9)
    steps = rng.integers(-2000, 2001, 512)
    table = np.clip(np.concatenate([[-1234], -1234 + np.cumsum(steps)]), -32768, 32767).astype(np.int16)
    x = np.arange(-40000, 40000, 7, dtype=np.int64)           # int32 values beyond int16 clip
    got = nm.apply_lookup_s(table, x)
    assert got.dtype == np.int32
    tl = table.tolist()
    assert got.tolist() == [py_apply_lookup_s(tl, int(v)) for v in x]


def test_apply_lookup_s_slope_require():
    """REQUIRE: the slope of the entry pair a value uses fits int16 (-32768 is the limit)."""
    table = np.zeros(513, np.int16)
    table[3], table[4] = -32768, 32767   # slopes: entry 2 -> 3 = -32768, 3 -> 4 = 65535, 4 -> 5 = -32767
    at = lambda i, frac=5: np.array([-32768 + i * 128 + frac], np.int64)
    assert nm.apply_lookup_s(table, at(2)).tolist() == [-32768 * 5]
    assert nm.apply_lookup_s(table, at(4)).tolist() == [32767 * 128 - 32767 * 5]
    with pytest.raises(TosaUnpredictable):
        nm.apply_lookup_s(table, at(3))
    with pytest.raises(TosaUnpredictable):
        nm.apply_lookup_s(table, np.concatenate([at(2), at(3, 0)]))
    nm.apply_lookup_s(table, at(3), require=False)


def test_apply_lookup_8():
    table = np.arange(256, dtype=np.int64).astype(np.int8)[::-1].copy()
    x = np.arange(-128, 128, dtype=np.int8)
    got = nm.apply_lookup_8(table, x)
    assert got.dtype == np.int8
    assert got.tolist() == [table[v + 128] for v in range(-128, 128)]


# ----------------------------------------------------------------------------------------------
# rescale_values: the unsigned output clip

def test_rescale_values_unsigned_output_clips_signed():
    """A negative result clips to 0 (signed [0, umax]), as Arm's reference model does."""
    r = nm.rescale_values(np.array([-100, -1, 0, 100, 127]), multiplier=1 << 30, shift=29,
                          input_zp=0, output_zp=0, out_dtype=I8, scale32=True, double_round=False,
                          output_unsigned=True)
    assert r.tolist() == [0, 0, 0, 200, 254]


# ----------------------------------------------------------------------------------------------
# The same primitives through Arm's reference model

def _rescale_graph(x, in_t, mults, shifts, *, scale32=True, double_round=False, out_t=I32):
    mult_t = I32 if scale32 else I16
    return OpCase("RESCALE",
                  [Operand(x, in_t), Operand(np.array(mults, np.int64).astype(mult_t.storage), mult_t, True),
                   Operand(np.array(shifts, np.int8), I8, True),
                   Operand(np.zeros(1, in_t.storage), in_t, True),
                   Operand(np.zeros(1, out_t.storage), out_t, True)],
                  [TensorSpec(tuple(x.shape), out_t)],
                  dict(scale32=scale32, rounding_mode=3 if double_round else 1,
                       per_channel=len(mults) > 1, input_unsigned=False, output_unsigned=False))


@pytest.mark.parametrize("double_round", [False, True])
def test_apply_scale_32_matches_reference_model(double_round):
    """Per-channel RESCALE int32 -> int32: each channel one (multiplier, shift) pair, each row a
    corner value valid for every channel."""
    pairs = [(m, s) for s in (31, 32, 33, 40, 47, 55, 62) for m in MULTIPLIERS]
    rows = sorted(set(_corner_values(31)) | {INT32_MIN, INT32_MAX, -(1 << 30), (1 << 30) - 1})
    rows = [v for v in rows if _bounds(31)[0] <= v <= _bounds(31)[1]]
    x = np.array([[v] * len(pairs) for v in rows], np.int64).astype(np.int32)
    case = _rescale_graph(x, I32, [m for m, _ in pairs], [s for _, s in pairs], double_round=double_round)
    ref = run_reference(case)
    assert ref.status == VALID
    want = np.array([[py_apply_scale_32(v, m, s, double_round) for m, s in pairs] for v in rows], np.int32)
    assert np.array_equal(ref.outputs[0], want)
    assert np.array_equal(nm.apply_scale_32(x, np.array([m for m, _ in pairs]),
                                            np.array([s for _, s in pairs]), double_round), want)


def test_apply_scale_32_small_shifts_match_reference_model():
    for shift in (2, 3, 8, 16):
        lo, hi = _bounds(shift)
        x = np.arange(max(lo, -300), min(hi, 300) + 1, dtype=np.int32)
        case = _rescale_graph(x, I32, [(1 << 31) - 1], [shift])
        ref = run_reference(case)
        assert ref.status == VALID
        want = [py_apply_scale_32(int(v), (1 << 31) - 1, shift) for v in x]
        assert ref.outputs[0].tolist() == want == np_scale_32(x, (1 << 31) - 1, shift).tolist()
        bad = _rescale_graph(np.array([hi + 1], np.int32), I32, [1], [shift])
        assert run_reference(bad).status == UNPREDICTABLE


def test_apply_scale_16_matches_reference_model():
    """RESCALE int48 -> int32 with scale32 false (the command-line model carries int48)."""
    rng = seeds.rng(48)
    m, s = (1 << 15) - 1, 40
    x = rng.integers(-(1 << 47), 1 << 47, 64, dtype=np.int64)
    x[:2] = [-(1 << 47), (1 << 47) - 1]
    ref = run_reference(_rescale_graph(x, I48, [m], [s], scale32=False))
    assert ref.status == VALID
    want = [py_apply_scale_16(int(v), m, s) for v in x]
    assert ref.outputs[0].tolist() == want == nm.apply_scale_16(x, m, s).tolist()
    over = _rescale_graph(np.array([(1 << 47) - 1], np.int64), I48, [1 << 14], [30], scale32=False)
    assert run_reference(over).status == UNPREDICTABLE


def test_apply_lookup_s_matches_reference_model():
    rng = seeds.rng(10)
    steps = rng.integers(-3000, 3001, 512)
    table = np.clip(np.concatenate([[500], 500 + np.cumsum(steps)]), -32768, 32767).astype(np.int16)
    x = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16)
    case = OpCase("TABLE", [Operand(x, I16), Operand(table, I16, True)], [TensorSpec(x.shape, I32)], {})
    ref = run_reference(case)
    assert ref.status == VALID
    tl = table.tolist()
    want = [py_apply_lookup_s(tl, int(v)) for v in x]
    assert ref.outputs[0].tolist() == want == nm.apply_lookup_s(table, x).tolist()


def test_dtype_ranges_from_their_tables():
    """DType.bits / min / max / umax / storage are attributes set once: every type with a width has
    bits from _INT_BITS (BOOL 1) and the two's-complement ranges of that width; the others raise
    ValueError, as `bits` does."""
    from firmware_model.tosa_ops.dtypes import _INT_BITS, DType
    widths = {**_INT_BITS, DType.BOOL: 1}
    assert widths[DType.INT8] == 8 and widths[DType.INT48] == 48 and widths[DType.SHAPE] == 64
    for t in DType:
        if t in widths:
            b = widths[t]
            assert (t.bits, t.min, t.max, t.umax) == (b, -(1 << (b - 1)), (1 << (b - 1)) - 1, (1 << b) - 1)
        else:
            for prop in ("bits", "min", "max", "umax"):
                with pytest.raises(ValueError):
                    getattr(t, prop)
    from firmware_model.tosa_ops.dtypes import _STORAGE, UnsupportedDType
    for t in DType:
        if t in _STORAGE:
            assert t.storage == np.dtype(_STORAGE[t]) and t.size_bytes == np.dtype(_STORAGE[t]).itemsize
        else:
            with pytest.raises(UnsupportedDType, match="not supported"):
                t.storage
    with pytest.raises(AttributeError):
        DType.INT8.no_such_attribute


def test_clip_ufunc_equals_apply_clip_s():
    """The kernels' one-call clip (numpy's clip ufunc, in place) is apply_clip_s: every int64
    value, bounds of each output type and equal bounds, the int64 extremes included."""
    rng = np.random.default_rng(16)
    extremes = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0, 1], np.int64)
    for lo, hi in [(-128, 127), (-32768, 32767), (0, 255), (0, 65535), (nm.INT32_MIN, nm.INT32_MAX), (5, 5)]:
        for _ in range(20):
            v = np.concatenate([extremes, rng.integers(-(1 << 62), 1 << 62, 50), rng.integers(lo - 3, hi + 4, 50)])
            got = v.copy()
            nm.clip_ufunc(got, lo, hi, out=got)
            want = nm.apply_clip_s(v, lo, hi)
            assert got.dtype == want.dtype and np.array_equal(got, want)
