"""Prepare once, execute many (issue 16): the kernels split into prepare and execute
(registry.register_plan) give, on random and edge values, exactly what the spec's primitives
(numerics.py) and a straightforward reading of the spec's pseudocode give, and fail their REQUIREs
on the same inputs. The plan is made as the interpreter makes it: the inputs outside `static` are
None when it is prepared (their shapes come from the declared specs), then it executes on
several inputs in turn."""

import numpy as np
import pytest

from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops import numerics as nx
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, prepare_for, run_op

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
RNG = np.random.default_rng(16)


def rand(dtype: DType, shape, lo=None, hi=None):
    lo = dtype.min if lo is None else lo
    hi = dtype.max if hi is None else hi
    return RNG.integers(lo, hi + 1, shape, dtype=np.int64).astype(dtype.storage)


def edges(dtype: DType, shape):
    """Random values with the type's extremes and small values mixed in."""
    x = rand(dtype, shape).reshape(-1)
    special = np.array([dtype.min, dtype.min + 1, -1, 0, 1, dtype.max - 1, dtype.max], np.int64)
    k = min(x.size, special.size)
    x[RNG.choice(x.size, k, replace=False)] = special[RNG.integers(0, special.size, k)]
    return x.reshape(shape)


def plan(op, specs, out_spec, attrs=None, static_values=None):
    """The op's execute half, prepared as the interpreter does (dynamic inputs None)."""
    prepare, static = prepare_for(op)
    static_values = static_values or {}
    inputs = [static_values.get(i) if i in static else None for i in range(len(specs))]
    call = OpCall(op=op, attrs=attrs or {}, inputs=inputs, input_specs=list(specs),
                  output_specs=[out_spec], where="test")
    return prepare(call)


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), (a, b)


def outcome(fn):
    """fn()'s array, or the REQUIRE it failed (primitive name and rule), for comparisons."""
    try:
        return fn()
    except TosaUnpredictable as e:
        return ("REQUIRE", e.rule.split(": ", 1)[-1] if ": " in e.rule else e.rule)


def same_outcome(got, want):
    if isinstance(want, tuple) or isinstance(got, tuple):
        assert isinstance(got, tuple) and isinstance(want, tuple), (got, want)
        assert got[1] == want[1], (got, want)
    else:
        same(got, want)


# ---- elementwise -------------------------------------------------------------------------------

@pytest.mark.parametrize("op,primitive", [("ADD", nx.apply_add_s), ("SUB", nx.apply_sub_s)])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((3, 1, 6), (1, 4, 6)), ((), ()), ((1, 1), (1, 1))])
def test_add_sub_equal_the_primitive(op, primitive, shapes):
    s1, s2 = shapes
    out_shape = np.broadcast_shapes(s1, s2)
    execute = plan(op, [TensorSpec(s1, I32), TensorSpec(s2, I32)], TensorSpec(out_shape, I32))
    for trial in range(30):
        # small values (the REQUIRE holds) and full-range ones (it often fails)
        a, b = (edges(I32, s1), edges(I32, s2)) if trial % 2 else (rand(I32, s1, -2**30, 2**30), rand(I32, s2, -2**30, 2**30))
        want = outcome(lambda: np.asarray(primitive(a, b, I32).astype(np.int32)))
        got = outcome(lambda: execute([a, b])[0])
        same_outcome(got, want)


@pytest.mark.parametrize("in_t", [I8, I16, I32])
@pytest.mark.parametrize("shift", [0, 1, 13, 31, 40])
@pytest.mark.parametrize("shapes", [((3, 7), (1, 7)), ((1, 1), (1, 1))], ids=["vector", "one-element"])
def test_mul_equals_the_spec(in_t, shift, shapes):
    if in_t != I32 and shift:
        return
    shape, shape_b = shapes
    execute = plan("MUL", [TensorSpec(shape, in_t), TensorSpec(shape_b, in_t), TensorSpec((1,), I8)],
                   TensorSpec(shape, I32), static_values={2: np.array([shift], np.int8)})
    for trial in range(40):
        a, b = edges(in_t, shape), edges(in_t, shape_b)
        if shift == 0:
            want = np.asarray(nx.apply_mul_s(a, b, I32).astype(np.int32))
        else:   # the spec: product = (a * b + (1 << (shift - 1))) >> shift, REQUIRE it fits int32
            p = (a.astype(np.int64) * b.astype(np.int64) + (1 << (shift - 1))) >> shift
            want = p.astype(np.int32) if ((p >= I32.min) & (p <= I32.max)).all() else ("REQUIRE", "rounded product fits INT32")
        same_outcome(outcome(lambda: execute([a, b])[0]), want)


@pytest.mark.parametrize("op,ref", [("MAXIMUM", nx.apply_max_s), ("MINIMUM", nx.apply_min_s)])
@pytest.mark.parametrize("shapes", [((5, 4), (5, 1)), ((1, 1), (1, 1))], ids=["vector", "one-element"])
def test_max_min_equal_the_primitive(op, ref, shapes):
    s1, s2 = shapes
    execute = plan(op, [TensorSpec(s1, I32), TensorSpec(s2, I32)], TensorSpec(s1, I32))
    for _ in range(20):
        a, b = edges(I32, s1), edges(I32, s2)
        same(execute([a, b])[0], ref(a, b).astype(np.int32))


@pytest.mark.parametrize("dtype", [I8, I16, I32])
@pytest.mark.parametrize("op", ["LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT", "ARS_ROUND"])
@pytest.mark.parametrize("shape", [(6, 5), (1, 1)], ids=["vector", "one-element"])
def test_shifts_equal_the_primitives(op, dtype, shape):
    attrs = {}
    if op == "ARS_ROUND":
        op, attrs = "ARITHMETIC_RIGHT_SHIFT", {"round": True}
    execute = plan(op, [TensorSpec(shape, dtype), TensorSpec(shape, dtype)], TensorSpec(shape, dtype), attrs)
    for trial in range(20 if shape[0] > 1 else 200):
        a = edges(dtype, shape)
        hi = dtype.bits - 1 if trial % 4 else dtype.bits + 2     # sometimes outside the REQUIRE
        b = rand(dtype, shape, 0, min(hi, dtype.max))
        b64 = b.astype(np.int64)
        if not ((b64 >= 0) & (b64 <= dtype.bits - 1)).all():
            want = ("REQUIRE", f"0 <= shift amount <= {dtype.bits - 1} for {dtype.name}")
        elif op == "LOGICAL_LEFT_SHIFT":
            want = nx.apply_logical_lshift(a, b, dtype)
        elif op == "LOGICAL_RIGHT_SHIFT":
            want = nx.apply_logical_rshift(a, b, dtype)
        else:
            want = nx.apply_arith_rshift(a, b, dtype)
            if attrs:
                last = nx.apply_arith_rshift(a, np.maximum(b64 - 1, 0), dtype) & 1
                want = want + ((b64 > 0) & (last != 0))
        if not isinstance(want, tuple):
            want = want.astype(dtype.storage)
        same_outcome(outcome(lambda: execute([a, b])[0]), want)


@pytest.mark.parametrize("dtype", [I8, I16])
def test_clamp_equals_apply_clip_s(dtype):
    lo, hi = -17, 90
    execute = plan("CLAMP", [TensorSpec((4, 9), dtype)], TensorSpec((4, 9), dtype),
                   {"min_val": lo, "max_val": hi})
    for _ in range(10):
        x = edges(dtype, (4, 9))
        same(execute([x])[0], nx.apply_clip_s(x, lo, hi).astype(dtype.storage))


def test_clz_equals_count_leading_zeros():
    execute = plan("CLZ", [TensorSpec((50,), I32)], TensorSpec((50,), I32))
    x = edges(I32, (50,))
    same(execute([x])[0], nx.count_leading_zeros(x))
    one = plan("CLZ", [TensorSpec((1, 1), I32)], TensorSpec((1, 1), I32))     # the one-element form
    for v in x:
        same(one([v.reshape(1, 1)])[0], nx.count_leading_zeros(v.reshape(1, 1)))


# ---- RESCALE and TABLE -------------------------------------------------------------------------

def rescale_case(in_t, out_t, scale32, double_round, per_channel, in_u=False, out_u=False, wide=False):
    shape = (2, 3, 8)
    nc = shape[-1] if per_channel else 1
    mult_t = I32 if scale32 else I16
    mult = rand(mult_t, (nc,), 0 if wide else (1 << 29 if scale32 else 1 << 13), mult_t.max)
    lo_shift = 2 if wide else (36 if in_t in (I32, I48) else 20)
    shift = rand(I8, (nc,), lo_shift, 62 if wide else lo_shift + 8)
    izp = 0
    if in_t == I8:
        izp = int(RNG.integers(-128, 128))
    elif in_t == I16 and in_u:
        izp = 32768
    ozp = int(RNG.integers(-128, 128)) if out_t == I8 else (32768 if out_t == I16 and out_u else 0)
    attrs = dict(scale32=scale32, rounding_mode=nx.DOUBLE_ROUND if double_round else nx.SINGLE_ROUND,
                 per_channel=per_channel, input_unsigned=in_u, output_unsigned=out_u)
    zp = lambda v, t: np.array([v if v < (1 << (t.bits - 1)) else v - (1 << t.bits)], t.storage)
    statics = {1: mult, 2: shift, 3: zp(izp, in_t), 4: zp(ozp, out_t)}
    specs = [TensorSpec(shape, in_t), TensorSpec((nc,), mult_t), TensorSpec((nc,), I8),
             TensorSpec((1,), in_t), TensorSpec((1,), out_t)]
    execute = plan("RESCALE", specs, TensorSpec(shape, out_t), attrs, statics)

    def reference(x):
        values = (x.astype(np.int64) & in_t.umax) if in_u else x
        m, s = (mult, shift) if per_channel else (mult[0], shift[0])
        # the kernel reads the zero points as the input and output are read (zero-extended when unsigned)
        r_izp = izp & in_t.umax if in_u else izp
        r_ozp = ozp & out_t.umax if out_u else ozp
        r = nx.rescale_values(values, multiplier=m, shift=s, input_zp=r_izp, output_zp=r_ozp, out_dtype=out_t,
                              scale32=scale32, double_round=double_round, input_unsigned=in_u,
                              output_unsigned=out_u, channel_axis=-1 if per_channel else None)
        return r.astype(out_t.storage)
    return shape, execute, reference


@pytest.mark.parametrize("in_t,out_t,scale32,double_round,in_u,out_u", [
    (I8, I32, True, False, False, False), (I32, I8, True, False, False, False),
    (I32, I8, True, True, False, False), (I32, I32, True, True, False, False),
    (I16, I8, False, False, False, False), (I48, I16, False, False, False, False),
    (I8, I8, True, False, True, False), (I16, I16, True, False, True, False),
    (I8, I8, True, True, False, True), (I16, I16, False, False, False, True),
    (I32, I16, True, True, False, False)])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("wide", [False, True])
def test_rescale_equals_rescale_values(in_t, out_t, scale32, double_round, in_u, out_u, per_channel, wide):
    """Narrow parameters (the REQUIREs hold: checks skipped by range analysis) and wide ones
    (shifts from 2, multipliers from 0: REQUIREs fail on some inputs)."""
    shape, execute, reference = rescale_case(in_t, out_t, scale32, double_round, per_channel, in_u, out_u, wide)
    for _ in range(15):
        x = edges(in_t, shape)
        same_outcome(outcome(lambda: execute([x])[0]), outcome(lambda: reference(x)))


@pytest.mark.parametrize("in_t,out_t,scale32,in_u,out_u", [
    (I8, I8, True, False, False), (I16, I8, False, False, False), (I32, I8, True, False, False),
    (I8, I16, True, False, True), (I16, I16, True, True, False), (I48, I8, False, False, False)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_rescale_output_zp_in_the_round_at_every_shift(in_t, out_t, scale32, in_u, out_u, per_channel):
    """The output zero point added before the shift (_RescalePlan's fold: output_zp << shift in the
    round) where every term stays within int64, after it elsewhere: every shift 2..62, multipliers
    at 0, small and the type's maximum, the zero points at their extremes; against
    numerics.rescale_values (REQUIREs failing on the same inputs)."""
    mult_t = I32 if scale32 else I16
    izps = [0] if in_t != I8 else [-128, 127]
    ozps = [32768] if out_u else ([-128, 127] if out_t == I8 else [0])
    shape = (3, 5, 4)
    for shift in range(2, 63):
        for izp in izps:
            for ozp in ozps:
                nc = shape[-1] if per_channel else 1
                mult = np.array([mult_t.max, 0, 1, mult_t.max >> 1][:nc], mult_t.storage)
                shifts = np.array([shift, shift, max(2, shift - 9), min(62, shift + 3)][:nc], np.int8)
                attrs = dict(scale32=scale32, rounding_mode=nx.SINGLE_ROUND, per_channel=per_channel,
                             input_unsigned=in_u, output_unsigned=out_u)
                zp = lambda v, t: np.array([v if v < (1 << (t.bits - 1)) else v - (1 << t.bits)], t.storage)
                specs = [TensorSpec(shape, in_t), TensorSpec((nc,), mult_t), TensorSpec((nc,), I8),
                         TensorSpec((1,), in_t), TensorSpec((1,), out_t)]
                execute = plan("RESCALE", specs, TensorSpec(shape, out_t), attrs,
                               {1: mult, 2: shifts, 3: zp(izp, in_t), 4: zp(ozp, out_t)})
                x = edges(in_t, shape)
                values = (x.astype(np.int64) & in_t.umax) if in_u else x
                m, s = (mult, shifts) if per_channel else (mult[0], shifts[0])
                want = outcome(lambda: nx.rescale_values(
                    values, multiplier=m, shift=s, input_zp=izp, output_zp=ozp, out_dtype=out_t, scale32=scale32,
                    double_round=False, input_unsigned=in_u, output_unsigned=out_u,
                    channel_axis=-1 if per_channel else None).astype(out_t.storage))
                same_outcome(outcome(lambda: execute([x])[0]), want)


def test_rescale_large_tensor_in_blocks():
    shape = (1, 70, 70, 16)
    mult, shift = rand(I32, (16,), 1 << 30, I32.max), rand(I8, (16,), 36, 40)
    specs = [TensorSpec(shape, I32), TensorSpec((16,), I32), TensorSpec((16,), I8), TensorSpec((1,), I32),
             TensorSpec((1,), I8)]
    execute = plan("RESCALE", specs, TensorSpec(shape, I8), dict(scale32=True, rounding_mode=nx.DOUBLE_ROUND,
                   per_channel=True), {1: mult, 2: shift, 3: np.array([0], np.int32), 4: np.array([-3], np.int8)})
    x = rand(I32, shape)
    want = nx.rescale_values(x, multiplier=mult, shift=shift, input_zp=0, output_zp=-3, out_dtype=I8,
                             scale32=True, double_round=True, channel_axis=-1).astype(np.int8)
    same(execute([x])[0], want)


def test_table_int8_equals_apply_lookup_8():
    tab = rand(I8, (256,))
    execute = plan("TABLE", [TensorSpec((3, 100), I8), TensorSpec((256,), I8)], TensorSpec((3, 100), I8),
                   static_values={1: tab})
    x = edges(I8, (3, 100))
    same(execute([x])[0], nx.apply_lookup_8(tab, x).astype(np.int8))


@pytest.mark.parametrize("steep", [False, True])
def test_table_int16_equals_apply_lookup_s(steep):
    tab = np.clip(np.cumsum(RNG.integers(-200, 201, 513)), -32768, 32767).astype(np.int16)
    if steep:
        tab[100], tab[101] = -30000, 30000                 # one slope outside int16
    execute = plan("TABLE", [TensorSpec((4, 64), I16), TensorSpec((513,), I16)], TensorSpec((4, 64), I32),
                   static_values={1: tab})
    for _ in range(10):
        x = edges(I16, (4, 64))
        if steep and _ % 2:
            x[0, 0] = (100 << 7) - 32768 + 5               # reads the steep pair
        same_outcome(outcome(lambda: execute([x])[0]), outcome(lambda: nx.apply_lookup_s(tab, x)))


@pytest.mark.parametrize("steep", [False, True])
def test_table_int16_large_input_by_lookup(steep):
    tab = np.clip(np.cumsum(RNG.integers(-300, 301, 513)), -32768, 32767).astype(np.int16)
    if steep:
        tab[300], tab[301] = 32000, -32000
    shape = (2, 200, 200)
    execute = plan("TABLE", [TensorSpec(shape, I16), TensorSpec((513,), I16)], TensorSpec(shape, I32),
                   static_values={1: tab})
    for k in range(3):
        x = edges(I16, shape)
        if steep and k == 2:
            x = np.where(((x.astype(np.int64) + 32768) >> 7) == 300, np.int16(0), x)    # avoids the steep pair
        same_outcome(outcome(lambda: execute([x])[0]), outcome(lambda: nx.apply_lookup_s(tab, x)))


# ---- tensor ops against the spec's loops -------------------------------------------------------

def conv_reference(x, w, bias, izp, wzp, pad, stride, dilation, depthwise, wrap=True):
    """The spec's CONV2D / DEPTHWISE_CONV2D pseudocode, one output position per loop turn over the
    kernel taps (int64; the int32 accumulator and bias add wrap as in Arm's model; wrap=False: the
    exact int64 sum)."""
    n, ih, iw, c = x.shape
    pt, pb, pl, pr = pad
    sy, sx = stride
    dy, dx = dilation
    if depthwise:
        kh, kw, _, m = w.shape
        oc = c * m
    else:
        oc, kh, kw, _ = w.shape
    oh = (ih - 1 + pt + pb - (kh - 1) * dy) // sy + 1
    ow = (iw - 1 + pl + pr - (kw - 1) * dx) // sx + 1
    acc = np.zeros((n, oh, ow, oc), np.int64)
    xv, wv = x.astype(np.int64) - izp, w.astype(np.int64) - wzp
    for oy in range(oh):
        for ox in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    y, xx = oy * sy - pt + ky * dy, ox * sx - pl + kx * dx
                    if 0 <= y < ih and 0 <= xx < iw:
                        if depthwise:
                            acc[:, oy, ox] += (xv[:, y, xx, :, None] * wv[ky, kx]).reshape(n, oc)
                        else:
                            acc[:, oy, ox] += xv[:, y, xx] @ wv[:, ky, kx].T
    total = acc + bias.astype(np.int64)
    if not wrap:
        return total
    return ((total + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("kernel,pad,stride,dilation", [
    ((1, 1), (0, 0, 0, 0), (1, 1), (1, 1)), ((3, 3), (1, 1, 1, 1), (1, 1), (1, 1)),
    ((3, 2), (1, 1, 1, 0), (2, 1), (1, 2)), ((2, 2), (0, 1, 1, 1), (2, 2), (1, 1))])
def test_convolutions_equal_the_spec(depthwise, kernel, pad, stride, dilation):
    kh, kw = kernel
    n, ih, iw, c, oc, m = 2, 7, 6, 5, 4, 2
    x_shape = (n, ih, iw, c)
    w = rand(I8, (kh, kw, c, m) if depthwise else (oc, kh, kw, c))
    out_c = c * m if depthwise else oc
    bias = rand(I32, (out_c,))
    izp, wzp = int(RNG.integers(-128, 128)), int(RNG.integers(-128, 128))
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    # the parametrisation only holds shapes TOSA allows (a whole number of strides)
    assert not ((ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) % stride[0]
                or (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) % stride[1])
    specs = [TensorSpec(x_shape, I8), TensorSpec(w.shape, I8), TensorSpec(bias.shape, I32),
             TensorSpec((1,), I8), TensorSpec((1,), I8)]
    attrs = dict(pad=list(pad), stride=list(stride), dilation=list(dilation), acc_type=int(I32), local_bound=False)
    op = "DEPTHWISE_CONV2D" if depthwise else "CONV2D"
    execute = plan(op, specs, TensorSpec((n, oh, ow, out_c), I32), attrs,
                   {1: w, 2: bias, 3: np.array([izp], np.int8), 4: np.array([wzp], np.int8)})
    for _ in range(3):
        x = edges(I8, x_shape)
        same(execute([x])[0], conv_reference(x, w, bias, izp, wzp, pad, stride, dilation, depthwise))


# ---- layout and reductions ---------------------------------------------------------------------

def test_reshape_slice_reduce_equal_numpy():
    x = edges(I32, (2, 6, 4))
    r = plan("RESHAPE", [TensorSpec(x.shape, I32), TensorSpec((2,), DType.SHAPE)], TensorSpec((12, 4), I32),
             static_values={1: np.array([12, 4], np.int64)})
    same(r([x])[0], x.reshape(12, 4))
    s = plan("SLICE", [TensorSpec(x.shape, I32), TensorSpec((3,), DType.SHAPE), TensorSpec((3,), DType.SHAPE)],
             TensorSpec((1, 3, 2), I32), static_values={1: np.array([1, 2, 1]), 2: np.array([1, 3, 2])})
    same(s([x])[0], x[1:2, 2:5, 1:3])
    for op, fn in (("REDUCE_MAX", np.max), ("REDUCE_MIN", np.min)):
        e = plan(op, [TensorSpec(x.shape, I32)], TensorSpec((2, 1, 4), I32), {"axis": 1})
        same(e([x])[0], fn(x, axis=1, keepdims=True))
    small = rand(I32, (2, 6, 4), -1000, 1000)
    e = plan("REDUCE_SUM", [TensorSpec(x.shape, I32)], TensorSpec((2, 1, 4), I32), {"axis": 1})
    same(e([small])[0], small.sum(axis=1, keepdims=True, dtype=np.int64).astype(np.int32))
    with pytest.raises(TosaUnpredictable):
        e([np.full((2, 6, 4), 2**30, np.int32)])


def test_the_kernel_is_prepare_then_execute():
    """run_op (the golden model's host CPU, the benches) runs both halves on one call."""
    a, b = rand(I32, (3,), -9, 9), rand(I32, (3,), -9, 9)
    c = OpCall("ADD", {}, [a, b], [TensorSpec((3,), I32)] * 2, [TensorSpec((3,), I32)], "test")
    same(run_op(c)[0], (a.astype(np.int64) + b).astype(np.int32))


def avg_pool_reference(x, izp, ozp, kernel, stride, pad, io_t):
    """The spec's AVG_POOL2D: per output position the sum of (x - input_zp) over the taps inside
    the input, scaled by reciprocal_scale(count) with apply_scale_32, plus output_zp, clipped."""
    n, ih, iw, c = x.shape
    (ky, kx), (sy, sx), (pt, pb, pl, pr) = kernel, stride, pad
    oh, ow = (ih + pt + pb - ky) // sy + 1, (iw + pl + pr - kx) // sx + 1
    out = np.zeros((n, oh, ow, c), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            acc, count = np.zeros((n, c), np.int64), 0
            for i in range(ky):
                for j in range(kx):
                    y, xx = oy * sy - pt + i, ox * sx - pl + j
                    if 0 <= y < ih and 0 <= xx < iw:
                        acc += x[:, y, xx].astype(np.int64) - izp
                        count += 1
            m, s = nx.reciprocal_scale(np.array([count]))
            v = nx.apply_scale_32(acc, int(m[0]), int(s[0]), False).astype(np.int64)
            out[:, oy, ox] = nx.apply_clip_s(nx.apply_add_s(v, ozp, I32), io_t.min, io_t.max)
    return out.astype(io_t.storage)


@pytest.mark.parametrize("zps", ["random", (0, 0), (-128, 127), (127, -128)])
@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("io_t", [I8, I16])
@pytest.mark.parametrize("kernel,stride,pad", [((2, 2), (1, 1), (0, 0, 0, 0)), ((3, 3), (2, 2), (1, 1, 1, 1)),
                                               ((3, 2), (1, 2), (2, 0, 1, 0)), ((1, 1), (1, 1), (0, 0, 0, 0)),
                                               ((7, 9), (1, 1), (0, 0, 0, 0)), ((4, 5), (3, 4), (3, 0, 4, 0))])
def test_avg_pool2d_equals_the_spec(monkeypatch, zps, blocks, io_t, kernel, stride, pad):
    """AVG_POOL2D's executes against the spec's loops, values at the type's extremes, zero points
    at theirs: a small output's (blocks False: one multiplier per count with one shift, the clip on
    the side a result can reach) and the general one's (blocks True: POOL_SCALE_BLOCK lowered, the
    zero points folded into the rounding constant, the scaling in blocks)."""
    from firmware_model.tosa_ops import tensor_ops
    if blocks:
        monkeypatch.setattr(tensor_ops, "POOL_SCALE_BLOCK", 7)
    n, ih, iw, c = 2, 7, 9, 3
    (ky, kx), (sy, sx), (pt, pb, pl, pr) = kernel, stride, pad
    # the parametrisation only holds shapes TOSA allows (a whole number of strides)
    assert not ((ih + pt + pb - ky) % sy or (iw + pl + pr - kx) % sx)
    oh, ow = (ih + pt + pb - ky) // sy + 1, (iw + pl + pr - kx) // sx + 1
    if io_t != I8:
        izp, ozp = 0, 0
    elif zps == "random":
        izp, ozp = int(RNG.integers(-128, 128)), int(RNG.integers(-128, 128))
    else:
        izp, ozp = zps
    specs = [TensorSpec((n, ih, iw, c), io_t), TensorSpec((1,), io_t), TensorSpec((1,), io_t)]
    execute = plan("AVG_POOL2D", specs, TensorSpec((n, oh, ow, c), io_t),
                   dict(kernel=list(kernel), stride=list(stride), pad=list(pad), acc_type=int(I32)),
                   {1: np.array([izp], io_t.storage), 2: np.array([ozp], io_t.storage)})
    for _ in range(3):
        x = edges(io_t, (n, ih, iw, c))
        same(execute([x])[0], avg_pool_reference(x, izp, ozp, kernel, stride, pad, io_t))


def test_avg_pool_table_by_sides_is_the_table_at_the_product():
    """AVG_TABLE_BY_SIDES[r, q, 0] (a padded small pool's multipliers, taken by row and column
    count) is AVG_TABLE_MULTIPLIER[r * q] for every pair of counts it holds."""
    from firmware_model.tosa_ops import tensor_ops
    side = tensor_ops.AVG_TABLE_SIDE
    by_sides = tensor_ops.AVG_TABLE_BY_SIDES
    assert side * side <= tensor_ops.AVG_TABLE_COUNTS and by_sides.shape == (side + 1, side + 1, 1)
    for r in range(side + 1):
        for q in range(side + 1):
            assert by_sides[r, q, 0] == tensor_ops.AVG_TABLE_MULTIPLIER[r * q], (r, q)


@pytest.mark.parametrize("io_t", [I8, I16])
@pytest.mark.parametrize("kernel,pad", [((2, 64), (1, 0, 0, 63)), ((65, 2), (64, 1, 1, 0)), ((3, 66), (0, 2, 5, 1))])
def test_avg_pool2d_small_at_and_beyond_the_sides_table(io_t, kernel, pad):
    """A small padded pool's multipliers from AVG_TABLE_BY_SIDES (windows up to AVG_TABLE_SIDE a
    side) and from the product of the counts (wider ones) against the spec's loops."""
    n, c = 1, 2
    (ky, kx), (pt, pb, pl, pr) = kernel, pad
    ih, iw = ky + 3, kx + 2
    oh, ow = ih + pt + pb - ky + 1, iw + pl + pr - kx + 1
    izp, ozp = (-7, 100) if io_t == I8 else (0, 0)
    specs = [TensorSpec((n, ih, iw, c), io_t), TensorSpec((1,), io_t), TensorSpec((1,), io_t)]
    execute = plan("AVG_POOL2D", specs, TensorSpec((n, oh, ow, c), io_t),
                   dict(kernel=list(kernel), stride=[1, 1], pad=list(pad), acc_type=int(I32)),
                   {1: np.array([izp], io_t.storage), 2: np.array([ozp], io_t.storage)})
    x = edges(io_t, (n, ih, iw, c))
    same(execute([x])[0], avg_pool_reference(x, izp, ozp, kernel, (1, 1), pad, io_t))


def test_avg_pool_table_is_reciprocal_scale_with_one_shift():
    """AVG_POOL2D's small path (tensor_ops.AVG_TABLE_*; test_avg_pool2d_equals_the_spec runs it
    beside the general one): for every count of the table the multiplier is reciprocal_scale's
    moved to the common shift, and for sums the int8 and int16 types allow (|sum| <= count x 2^16:
    the extremes, zero, small and random ones) the one-shift form equals apply_scale_32 with
    output_zp added, apply_scale_32's value REQUIRE holds, every term fits in int64, and the sum
    count x v of a window of equal values v scales back to v (so a result lies beyond the type only
    on the side output_zp - input_zp moves it to)."""
    from firmware_model.tosa_ops import tensor_ops
    big = tensor_ops.AVG_TABLE_SHIFT
    table = tensor_ops.AVG_TABLE_MULTIPLIER
    assert table.dtype == np.int64 and len(table) == tensor_ops.AVG_TABLE_COUNTS + 1
    values = [-(1 << 16), -(1 << 16) + 1, -32768, -255, -128, -1, 0, 1, 127, 255, 32767, (1 << 16) - 1, 1 << 16]
    for count in range(1, tensor_ops.AVG_TABLE_COUNTS + 1):
        m, sh = nx.reciprocal_scale_int(count)
        mult = int(table[count])
        assert mult == m << (big - sh), count
        sums = [count * v for v in values] + [int(v) for v in RNG.integers(-count << 16, (count << 16) + 1, 4)]
        for ozp in (-32768, -1, 0, 32767):
            for total in sums:
                assert -(1 << (sh - 1)) <= total < 1 << (sh - 1)
                spec = ((total * m + (1 << (sh - 1))) >> sh) + ozp
                assert nx.INT32_MIN <= spec <= nx.INT32_MAX
                rounding = (1 << (big - 1)) + (ozp << big)
                assert abs(total * mult) + abs(rounding) < 1 << 63
                assert (total * mult + rounding) >> big == spec, (count, total, ozp)
        for v in values:
            assert ((count * v * m + (1 << (sh - 1))) >> sh) == v, (count, v)
    # the spec's primitive on arrays agrees (a sample of counts)
    for count in (1, 2, 3, 5, 9, 63, 4096):
        m, sh = nx.reciprocal_scale_int(count)
        sums = RNG.integers(-count << 16, (count << 16) + 1, 64)
        want = nx.apply_scale_32(sums, m, sh, False).astype(np.int64)
        got = (sums * table[count] + (1 << (big - 1))) >> big
        assert np.array_equal(got, want)


@pytest.mark.parametrize("gemm", [False, "batched", "block"])
@pytest.mark.parametrize("in_t", [I8, I16])
@pytest.mark.parametrize("kernel,m,pad,stride,dilation", [
    ((3, 3), 1, (1, 1, 1, 1), (1, 1), (1, 1)), ((2, 3), 3, (0, 1, 1, 0), (2, 1), (1, 2)),
    ((5, 5), 2, (1, 0, 0, 1), (1, 2), (1, 1)), ((1, 4), 4, (0, 0, 0, 0), (1, 1), (1, 1)),
    ((1, 1), 2, (0, 0, 0, 0), (1, 1), (1, 1))])
def test_depthwise_paths_equal_the_spec(monkeypatch, gemm, in_t, kernel, m, pad, stride, dilation):
    """DEPTHWISE_CONV2D's three executes (a small one with 4+ taps: one product with a block-diagonal
    weight matrix, or one batched product over the channels, in an exact float type; otherwise
    the loop over the taps) against the spec's loops,
    int8 (int32 accumulator and bias wrapping) and int16 (int48, saturated), values at the extremes."""
    from firmware_model.tosa_ops import tensor_ops
    monkeypatch.setattr(tensor_ops, "DEPTHWISE_GEMM_ELEMENTS", 1 << 30 if gemm else -1)
    monkeypatch.setattr(tensor_ops, "DEPTHWISE_BLOCK_PRODUCT", 1 << 40 if gemm == "block" else -1)
    kh, kw = kernel
    n, ih, iw, c = 2, 9, 8, 3
    out_t = I32 if in_t == I8 else I48
    w = edges(I8, (kh, kw, c, m))
    bias = edges(out_t, (c * m,)) if out_t == I32 else rand(I48, (c * m,), -(1 << 40), 1 << 40)
    izp, wzp = (int(RNG.integers(-128, 128)), int(RNG.integers(-128, 128))) if in_t == I8 else (0, 0)
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    # the parametrisation only holds shapes TOSA allows (a whole number of strides)
    assert not ((ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) % stride[0]
                or (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) % stride[1])
    specs = [TensorSpec((n, ih, iw, c), in_t), TensorSpec(w.shape, I8), TensorSpec(bias.shape, out_t),
             TensorSpec((1,), in_t), TensorSpec((1,), I8)]
    attrs = dict(pad=list(pad), stride=list(stride), dilation=list(dilation), acc_type=int(out_t), local_bound=False)
    execute = plan("DEPTHWISE_CONV2D", specs, TensorSpec((n, oh, ow, c * m), out_t), attrs,
                   {1: w, 2: bias, 3: np.array([izp], in_t.storage), 4: np.array([wzp], np.int8)})
    for _ in range(3):
        x = edges(in_t, (n, ih, iw, c))
        got = execute([x])[0]
        if out_t == I32:
            same(got, conv_reference(x, w, bias, izp, wzp, pad, stride, dilation, True))
        else:   # the exact sum, saturated once after the bias add
            wide = conv_reference(x, w, np.zeros_like(bias, np.int32), izp, wzp, pad, stride, dilation, True,
                                  wrap=False)
            same(got, np.clip(wide + bias.astype(np.int64), I48.min, I48.max))
