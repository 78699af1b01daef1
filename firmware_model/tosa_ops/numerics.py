"""The TOSA integer numeric primitives, one small function each, named as in the spec.

Every function is vectorised over numpy arrays and computes in int64 with the widths the spec
gives; results come back in the spec's result type. These are the only implementations in the
project: the interpreter's ops, the golden model's NPU units and the RTL benches' expected values
all call them.

REQUIRE conditions raise `TosaUnpredictable` when ``require`` is true (the interpreter's view: the
graph's result is unpredictable). Hardware does not check them, so the golden model calls the
primitives with ``require=False`` and gets the datapath's defined behaviour instead: the same
arithmetic, truncated to the result width as the RTL does.
"""

from __future__ import annotations

import numpy as np

from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops.dtypes import DType, wrap  # noqa: F401 (wrap: also for the kernels)

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# RESCALE rounding modes, values as in the TOSA schema's RoundingMode enum.
SINGLE_ROUND = 1
INEXACT_ROUND = 2
DOUBLE_ROUND = 3


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _require(cond: np.ndarray | bool, primitive: str, rule: str) -> None:
    ok = cond.all() if isinstance(cond, np.ndarray) else bool(cond)
    if not ok:
        raise TosaUnpredictable(primitive, rule)


def apply_scale_32(value, multiplier, shift, double_round=False, *, require=True) -> np.ndarray:
    """int32 apply_scale_32(int32 value, int32 multiplier, int8 shift, bool double_round).

    result = (value * multiplier + round) >> shift, round = 1 << (shift - 1), and with
    double_round an extra +/- (1 << 30) (towards the sign of value) when shift > 31.
    """
    value, multiplier, shift = _i64(value), _i64(multiplier), _i64(shift)
    if require:
        _require(multiplier >= 0, "apply_scale_32", "multiplier >= 0")
        _require((shift >= 2) & (shift <= 62), "apply_scale_32", "2 <= shift <= 62")
        round_ = np.left_shift(np.int64(1), shift - 1)
        _require((value >= -round_) & (value < round_), "apply_scale_32",
                 "-(1 << (shift - 1)) <= value < (1 << (shift - 1))")
    else:
        # Outside the REQUIREs (hardware view) a shift below 1 has no rounding bit.
        round_ = np.where(shift >= 1, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    if double_round:
        extra = np.where(value >= 0, np.int64(1 << 30), np.int64(-(1 << 30)))
        round_ = round_ + np.where(shift > 31, extra, 0)
    result = (value * multiplier + round_) >> shift
    if require:
        return result.astype(np.int32)     # fits: that is what the REQUIRE on value guarantees
    return wrap(result, 32).astype(np.int32)


def apply_scale_16(value, multiplier, shift, *, require=True) -> np.ndarray:
    """int32 apply_scale_16(int48 value, int16 multiplier, int8 shift)."""
    value, multiplier, shift = _i64(value), _i64(multiplier), _i64(shift)
    if require:
        _require(multiplier >= 0, "apply_scale_16", "multiplier >= 0")
        _require((shift >= 2) & (shift <= 62), "apply_scale_16", "2 <= shift <= 62")
    round_ = np.where(shift >= 1, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    result = (value * multiplier + round_) >> shift
    if require:
        _require((result >= INT32_MIN) & (result <= INT32_MAX), "apply_scale_16",
                 "result fits int32")
    return wrap(result, 32).astype(np.int32)


def reciprocal_scale(value) -> tuple[np.ndarray, np.ndarray]:
    """scale_t reciprocal_scale(uint32 value): (multiplier, shift) with multiplier/2^shift ~ 1/value."""
    value = _i64(value)
    _require(value > 0, "reciprocal_scale", "value > 0")
    k = 32 - count_leading_zeros(value - 1).astype(np.int64)
    numerator = np.left_shift(np.int64((1 << 30) + 1), k)
    multiplier = numerator // value
    shift = 30 + k
    return multiplier.astype(np.int32), shift.astype(np.int8)


def reciprocal_scale_int(value: int) -> tuple[int, int]:
    """reciprocal_scale of one count as Python integers (what AVG_POOL2D prepares per count):
    k = 32 - count_leading_zeros(value - 1) is the bit length of value - 1."""
    if value <= 0:
        _require(False, "reciprocal_scale", "value > 0")
    k = (value - 1).bit_length()
    return (((1 << 30) + 1) << k) // value, 30 + k


def count_leading_zeros(a) -> np.ndarray:
    """int32 count_leading_zeros(int32 a): leading zero bits of the 32-bit pattern of a (32 for 0)."""
    u = _i64(a) & 0xFFFFFFFF
    # Exact for every 32-bit pattern: frexp's exponent is the bit length of a positive integer.
    bitlen = np.frexp(u.astype(np.float64))[1].astype(np.int64)
    return np.where(u == 0, 32, 32 - bitlen).astype(np.int32)


def count_leading_zeros_int(a: int) -> int:
    """count_leading_zeros of one int32 as a Python integer (the same function as above, for
    callers that hold a few words, not arrays): 32 for 0, 0 for a negative value, else 32 minus
    its bit length."""
    return 32 - a.bit_length() if a > 0 else 0 if a else 32


def apply_add_s(a, b, dtype: DType, *, require=True) -> np.ndarray:
    """in_t apply_add_s(a, b): signed add; REQUIRE the sum fits in_t (hardware wraps)."""
    c = _i64(a) + _i64(b)
    if require:
        _require((c >= dtype.min) & (c <= dtype.max), "apply_add_s", f"sum fits {dtype.name}")
    return wrap(c, dtype.bits)


def apply_sub_s(a, b, dtype: DType, *, require=True) -> np.ndarray:
    """in_t apply_sub_s(a, b): signed subtract; REQUIRE the difference fits in_t."""
    c = _i64(a) - _i64(b)
    if require:
        _require((c >= dtype.min) & (c <= dtype.max), "apply_sub_s", f"difference fits {dtype.name}")
    return wrap(c, dtype.bits)


def apply_mul_s(a, b, dtype: DType) -> np.ndarray:
    """in_t apply_mul_s(a, b): signed multiply truncated to in_t."""
    return wrap(_i64(a) * _i64(b), dtype.bits)


def apply_clip_s(value, min_val, max_val) -> np.ndarray:
    """apply_clip_s: clamp to [min_val, max_val] (signed reading)."""
    return np.minimum(np.maximum(_i64(value), _i64(min_val)), _i64(max_val))


def apply_clip_u(value, min_val, max_val) -> np.ndarray:
    """apply_clip_u: clamp to [min_val, max_val]; callers pass values already read as unsigned."""
    return np.minimum(np.maximum(_i64(value), _i64(min_val)), _i64(max_val))


# apply_clip_s in one numpy call, for the kernels' fast paths on int64 arrays (in place with
# out=): numpy's clip ufunc is minimum(maximum(value, min_val), max_val), apply_clip_s's form, for
# min_val <= max_val (np.clip is a Python wrapper around it; maximum then minimum, two calls).
# tests/firmware_model/tosa_ops/test_numerics.py holds it equal to apply_clip_s.
try:
    from numpy._core.umath import clip as clip_ufunc
except ImportError:                                     # numpy 1.x: the module's older name
    from numpy.core.umath import clip as clip_ufunc


def apply_arith_rshift(a, b, dtype: DType) -> np.ndarray:
    """in_t apply_arith_rshift(a, b): arithmetic shift right, truncated to in_t."""
    return wrap(_i64(a) >> _i64(b), dtype.bits)


def apply_logical_rshift(a, b, dtype: DType) -> np.ndarray:
    """in_t apply_logical_rshift(a, b): shift the unsigned bit pattern of a right by b."""
    mask = (1 << dtype.bits) - 1
    return wrap((_i64(a) & mask) >> _i64(b), dtype.bits)


def apply_lookup_s(table, value, *, require=True) -> np.ndarray:
    """int32 apply_lookup_s(int16 table[513], int32 value): the interpolated 16-bit TABLE.

    The 16-bit index splits into a 9-bit table index and a 7-bit fraction; the result is
    (base << 7) + (next - base) * fraction, a fixed-point number with 7 fractional bits.
    REQUIRE: the slope (next - base) of every entry pair used fits int16 (Arm's reference model
    checks it and reports UNPREDICTABLE).
    """
    table = _i64(table)
    clipped = apply_clip_s(value, -32768, 32767)
    index = (clipped + 32768) >> 7
    fraction = clipped & 0x7F
    base = table[index]
    slope = table[np.minimum(index + 1, 512)] - base
    if require:
        _require((slope >= -32768) & (slope <= 32767), "apply_lookup_s", "slope fits int16")
    return ((base << 7) + slope * fraction).astype(np.int32)


def apply_lookup_8(table, value) -> np.ndarray:
    """The int8 TABLE: result = table[value + 128] (256 entries, no interpolation)."""
    return np.asarray(table)[_i64(value) + 128]


def rescale_values(values, *, multiplier, shift, input_zp, output_zp, out_dtype: DType,
                   scale32: bool, double_round: bool, input_unsigned=False,
                   output_unsigned=False, channel_axis: int | None = None,
                   require=True) -> np.ndarray:
    """The per-element arithmetic of RESCALE (the op's ERROR_IF checks are the caller's).

    `values` are the input elements already read as integers (unsigned inputs zero-extended by
    the caller's reading); `multiplier` and `shift` are scalars or per-channel vectors applied
    along `channel_axis`. Returns the output elements as int64, clipped to the output range.
    """
    value = _i64(values) - _i64(input_zp)
    mult, sh = _i64(multiplier), _i64(shift)
    if channel_axis is not None and mult.ndim == 1:
        bshape = [1] * value.ndim
        bshape[channel_axis] = -1
        mult, sh = mult.reshape(bshape), sh.reshape(bshape)
    if scale32:
        result = apply_scale_32(value, mult, sh, double_round, require=require)
    else:
        result = apply_scale_16(value, mult, sh, require=require)
    result = apply_add_s(result, output_zp, DType.INT32, require=require)
    if output_unsigned:
        return apply_clip_u(result, 0, out_dtype.umax)
    return apply_clip_s(result, out_dtype.min, out_dtype.max)


def apply_intdiv_s(a, b, dtype: DType, *, require=True) -> np.ndarray:
    """in_t apply_intdiv_s(a, b): signed division truncating towards zero; REQUIRE b != 0 and
    the quotient fits in_t (minimum / -1 does not)."""
    a, b = _i64(a), _i64(b)
    if require:
        _require(b != 0, "apply_intdiv_s", "divisor != 0")
    safe_b = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe_b)
    c = np.where((a < 0) != (safe_b < 0), -q, q)
    if require:
        _require((c >= dtype.min) & (c <= dtype.max), "apply_intdiv_s", f"quotient fits {dtype.name}")
    return wrap(c, dtype.bits)


def apply_max_s(a, b) -> np.ndarray:
    """in_t apply_max_s(a, b): the larger of two signed integers."""
    return np.maximum(_i64(a), _i64(b))


def apply_min_s(a, b) -> np.ndarray:
    """in_t apply_min_s(a, b): the smaller of two signed integers."""
    return np.minimum(_i64(a), _i64(b))


def apply_logical_lshift(a, b, dtype: DType) -> np.ndarray:
    """in_t a << b: shift the bit pattern of a left by b, truncated to in_t."""
    return wrap(_i64(a) << _i64(b), dtype.bits)


# ---- Fast forms (issue 16) -----------------------------------------------------------------------
# The primitives above are the spec's reference. The functions below compute the same results
# with fewer numpy passes for the prepared kernels' execute halves (registry.register_plan): the
# arithmetic once in int64, then one narrowing to the storage type, whose REQUIRE is "the
# narrowing changed no value". tests/firmware_model/test_prepared_plans.py checks each against
# its primitive on random and edge values (results, and the REQUIRE failing on the same inputs).

def narrow_required(values: np.ndarray, dtype: DType, primitive, rule: str) -> np.ndarray:
    """int64 `values` stored in dtype's storage type; REQUIRE they fit dtype's range (raised as
    TosaUnpredictable(primitive, rule), or through primitive.require when it is an OpCall)."""
    narrowed = np.asarray(values.astype(dtype.storage))
    if (narrowed != values).any():
        if isinstance(primitive, str):
            raise TosaUnpredictable(primitive, rule)
        primitive.require(False, rule)
    return narrowed


def fast_add_s(a, b, dtype: DType) -> np.ndarray:
    """apply_add_s(a, b) with its REQUIRE, stored in dtype's storage type."""
    return narrow_required(np.add(a, b, dtype=np.int64), dtype, "apply_add_s", f"sum fits {dtype.name}")


def fast_sub_s(a, b, dtype: DType) -> np.ndarray:
    """apply_sub_s(a, b) with its REQUIRE, stored in dtype's storage type."""
    return narrow_required(np.subtract(a, b, dtype=np.int64), dtype, "apply_sub_s",
                           f"difference fits {dtype.name}")


# ---- One-element forms (issue 16) ----------------------------------------------------------------
# A softmax normalises its sum with a chain of ops on one element each (mlp: 21 of the 55 ops of
# an invocation). On one element numpy's fixed cost per call, five to ten calls an op, is nearly all
# of the time; the spec's pseudo-code on Python integers is a fifth of it. These are the primitives
# above, element by element as the spec writes them, REQUIREs included (tests/firmware_model/
# tosa_ops/test_prepared_plans.py compares them with the vectorised ones on the same values).

def wrap_int(value: int, bits: int) -> int:
    """Two's-complement wrap of one integer to `bits` bits (dtypes.wrap of one value)."""
    half = 1 << (bits - 1)
    return ((value + half) & ((half << 1) - 1)) - half


def apply_add_s_int(a: int, b: int, dtype: DType) -> int:
    """apply_add_s of one element, with its REQUIRE."""
    c = a + b
    if not dtype.min <= c <= dtype.max:
        raise TosaUnpredictable("apply_add_s", f"sum fits {dtype.name}")
    return c


def apply_sub_s_int(a: int, b: int, dtype: DType) -> int:
    """apply_sub_s of one element, with its REQUIRE."""
    c = a - b
    if not dtype.min <= c <= dtype.max:
        raise TosaUnpredictable("apply_sub_s", f"difference fits {dtype.name}")
    return c


def apply_arith_rshift_int(a: int, b: int, rounding: bool = False) -> int:
    """apply_arith_rshift of one element (0 <= b < bits: the result is a value of in_t), with
    ARITHMETIC_RIGHT_SHIFT's rounding: one more when the last bit shifted out is set."""
    c = a >> b
    if rounding and b > 0:
        c += (a >> (b - 1)) & 1
    return c
