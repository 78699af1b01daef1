"""TOSA tensor operators, integer profile plus the int16 extension: CONV2D, CONV3D,
DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, MATMUL, AVG_POOL2D and MAX_POOL2D.

Semantics are the spec's pseudocode (every ERROR_IF, output shapes against the declared specs).
Where the spec leaves a result unpredictable (a REQUIRE on an accumulator or bias add that
overflows) the kernels return what Arm's reference model returns, because the conformance
generator draws biases over the whole int32 range and expects those values:

- int32 accumulators and the int32 bias add wrap (two's complement modulo 2^32);
- int48 results are computed exactly in 64 bits and then saturated to the int48 range, once, after
  the bias add (an accumulator that leaves the int48 range and comes back is not clipped on the way).

Speed: the reductions run as matrix products (im2col via a strided view, then one GEMM) in
float32 or float64, which is exact while every partial sum stays an integer below 2^24 or 2^53.
The bound is taken from the actual operands: reduction length x max|input - zp| x max|weight - zp|;
past 2^53 the product runs in int64 (numpy has no integer BLAS, so that path is slow but exact).
Depthwise and pooling loop over kernel taps only, each tap one vectorised pass over the tensor.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType, wrap
from firmware_model.tosa_ops.op_utils import (attr_int_list, check_output_shape, check_types,
                                              out, scalar_operand, shape_of)
from firmware_model.tosa_ops.registry import OpCall, register, register_plan

# Largest bound on |partial sum| for which float32 / float64 arithmetic on integers is exact.
FLOAT32_EXACT = 1 << 24
FLOAT64_EXACT = 1 << 53
# im2col blocks are cut so that one block holds at most this many elements.
IM2COL_BLOCK_ELEMENTS = 1 << 23
# DEPTHWISE_CONV2D with 4 or more taps and at most this many im2col elements (N*OH*OW*KH*KW*C)
# runs as one batched product over its channels; larger ones loop over the taps (fewer passes).
DEPTHWISE_GEMM_ELEMENTS = 1 << 16
# ... and with at most this many multiply-adds as one block-diagonal product (N*OH*OW*KH*KW*C
# x C*M: the zeros off the diagonal included), which one BLAS call does faster than a batch of
# C small products while C is small.
DEPTHWISE_BLOCK_PRODUCT = 1 << 21
# TRANSPOSE_CONV2D with at most this many im2col elements (N*OH*OW*KH*KW*IC) runs as one product
# over the windows of its input spread out by the stride; larger ones add each tap's products.
TRANSPOSE_GATHER_ELEMENTS = 1 << 16
# AVG_POOL2D rescales its sums in blocks of about this many elements (int64 temporaries in cache).
POOL_SCALE_BLOCK = 1 << 15
# AVG_POOL2D sums in int32 when kernel area x max|input - zp| stays below this, else in int64.
AVG_INT32_SUM_BOUND = 1 << 31

INT48_MIN, INT48_MAX = DType.INT48.min, DType.INT48.max
# (module names: an enum member read as DType.INT8 costs a class-attribute lookup each time)
_I8, _I32, _I48 = DType.INT8, DType.INT32, DType.INT48
_EXACT_INT32_SUMS = frozenset((np.dtype(np.float32), np.dtype(np.int32)))   # _finish's int32 sums
_INT32_DTYPE = np.dtype(np.int32)
_INT_TYPE = {int}

# (input, weight, output) rows of the convolution ops, with the accumulator type they need.
CONV_TYPES = {
    (DType.INT8, DType.INT8, DType.INT32): DType.INT32,
    (DType.INT16, DType.INT8, DType.INT48): DType.INT48,
}
MATMUL_TYPES = [(DType.INT8, DType.INT8, DType.INT32), (DType.INT16, DType.INT16, DType.INT48)]
POOL_TYPES = [(DType.INT8, DType.INT8), (DType.INT16, DType.INT16)]


# ----------------------------------------------------------------------------------------------
# Shared checks and arithmetic

# The checks below are the spec's ERROR_IFs; each raises what call.error_if(condition, rule)
# raises, and on the usual (passing) path makes no message closure (kernels run dozens per call).

def _check_arity(call: OpCall, n_in: int) -> None:
    if len(call.inputs) != n_in:
        call.error_if(True, f"takes {n_in} inputs, got {len(call.inputs)}")
    if len(call.output_specs) != 1:
        call.error_if(True, f"has 1 output, got {len(call.output_specs)}")


def _check_rank(call: OpCall, i: int, what: str, rank: int = 4) -> tuple[int, ...]:
    x = call.inputs[i]                  # shape_of(call, i), inline
    shape = x.shape if type(x) is np.ndarray else shape_of(call, i)
    if len(shape) != rank:
        call.error_if(True, f"rank({what}) = {len(shape)}, must be {rank}")
    return shape


def _attr_list(call: OpCall, name: str, n: int) -> list[int]:
    v = call.attrs.get(name)
    if type(v) is list and len(v) == n and set(map(type, v)) <= _INT_TYPE:
        return list(v)                  # the reader's list of n ints: what the lines below return
    v = attr_int_list(call, name)
    if len(v) != n:
        call.error_if(True, f"attribute '{name}' has {len(v)} values, needs {n}")
    return v


def _zero_point(call: OpCall, i: int, what: str, dtype: DType, allowed: bool) -> int:
    """A zero-point operand; ERROR_IF it is non-zero where the spec allows only zero."""
    x = call.inputs[i]
    if type(x) is np.ndarray and x.shape == (1,) and call.input_specs[i].dtype == dtype:
        zp = int(x[0])                  # scalar_operand's checks passed, its answer
    else:
        zp = scalar_operand(call, i, what, dtype)
    if zp != 0 and not allowed:
        call.error_if(True, f"{what} != 0 (zero points are only allowed for int8)")
    return zp


def _idiv_check(call: OpCall, a: int, b: int, what: str) -> int:
    """idiv_check: ERROR_IF a is not a multiple of b; the exact quotient."""
    if a % b != 0:
        call.error_if(True, f"{what}: {a} is not a multiple of the stride {b}")
    return a // b


def _check_dim(call: OpCall, value: int, what: str) -> None:
    if value < 1:
        call.error_if(True, f"{what} = {value}, must be >= 1")


def _compute_dtype(bound: int) -> type:
    """The cheapest numpy type in which a sum of products bounded by `bound` is exact."""
    if bound < FLOAT32_EXACT:
        return np.float32
    if bound < FLOAT64_EXACT:
        return np.float64
    return np.int64


def _absmax(x: np.ndarray, zp: int) -> int:
    """max |x - zp| over the tensor (0 for an empty one)."""
    if x.size == 0:
        return 0
    return max(abs(int(x.max()) - zp), abs(int(x.min()) - zp))


def _finish(acc: np.ndarray, bias: np.ndarray | int, out_t: DType) -> np.ndarray:
    """out = static_cast<out_t>(acc) + bias, as Arm's reference model evaluates it: int32 wraps,
    int48 saturates once at the end. `acc` holds exact integer values (any numeric dtype)."""
    if out_t == _I32 and acc.dtype in _EXACT_INT32_SUMS:
        # int32 values (float32 ones are below 2^24); numpy's int32 add wraps like the model.
        # (astype copies: the in-place add writes to an array of our own)
        total = acc.astype(np.int32)
        total += bias if type(bias) is np.ndarray and bias.dtype == _INT32_DTYPE else np.asarray(bias, dtype=np.int32)
        return total
    total = acc.astype(np.int64)
    total += np.asarray(bias, dtype=np.int64)
    if out_t == _I48:                              # np.clip's bounds, in place
        np.maximum(total, INT48_MIN, out=total)
        np.minimum(total, INT48_MAX, out=total)
        return total
    return wrap(total, out_t.bits).astype(out_t.storage)


def _shifted(x: np.ndarray, zp: int, dtype) -> np.ndarray:
    """x - zp in `dtype` (x is an integer storage array). zp is subtracted as a 0-d array of that
    type: numpy 2 takes a Python-integer operand through its weak-scalar promotion, ~0.3 µs more
    a call on a small array (the zero points are int8 or int16 values: exact in every type here)."""
    r = x.astype(dtype)
    if zp:
        r -= np.array(zp, r.dtype)
    return r


def _pad_zero(xs: np.ndarray, *pads: int) -> np.ndarray:
    """Zero padding of the spatial axes of N...C data (NHWC, NDHWC): `pads` are the spec's
    (before, after) pairs, one per spatial axis in order, e.g. pad_top, pad_bottom, pad_left,
    pad_right. Outside the input the spec reads value = 0, after the zero point."""
    if not any(pads):
        return xs
    if len(pads) == 4:                  # NHWC (the 2-D ops), without the generators below
        pt, pb, pl, pr = pads
        n, h, w, c = xs.shape
        p = np.zeros((n, h + pt + pb, w + pl + pr, c), xs.dtype)
        p[:, pt:pt + h, pl:pl + w] = xs
        return p
    before, after = pads[0::2], pads[1::2]
    spatial = xs.shape[1:-1]
    p = np.zeros((xs.shape[0], *(d + b + a for d, b, a in zip(spatial, before, after)), xs.shape[-1]), xs.dtype)
    p[(slice(None), *(slice(b, b + d) for d, b in zip(spatial, before)), slice(None))] = xs
    return p


def _windows(xp: np.ndarray, out: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
             dilation: tuple[int, ...] | None = None) -> np.ndarray:
    """Read-only view (N, *out, *kernel, C) of the windows of padded N...C data: output position o
    and kernel tap k read spatial index o * stride + k * dilation on each axis."""
    if len(out) == 2 and dilation is not None and xp.flags.c_contiguous:
        # the 2-D ops' usual case, the lines below without their generators (~40% of the time)
        (oh, ow), (kh, kw), (sy, sx), (dy, dx) = out, kernel, stride, dilation
        n, _, _, c = xp.shape
        s0, s1, s2, s3 = xp.strides
        view = np.ndarray((n, oh, ow, kh, kw, c), xp.dtype, buffer=xp,
                          strides=(s0, s1 * sy, s2 * sx, s1 * dy, s2 * dx, s3))
        view.flags.writeable = False
        return view
    dilation = dilation or (1,) * len(out)
    n_stride, *sp_strides, c_stride = xp.strides
    shape = (xp.shape[0], *out, *kernel, xp.shape[-1])
    strides = (n_stride, *(st * s for st, s in zip(sp_strides, stride)),
               *(st * d for st, d in zip(sp_strides, dilation)), c_stride)
    if not xp.flags.c_contiguous:
        return as_strided(xp, shape=shape, strides=strides, writeable=False)
    # as_strided's view, made directly on the buffer (a quarter of the time, for small tensors)
    view = np.ndarray(shape, xp.dtype, buffer=xp, strides=strides)
    view.flags.writeable = False
    return view


# a @ b; int64 operands use numpy's exact (non-BLAS) integer product. (np.matmul itself: a
# wrapper's Python call is a measurable part of a small convolution.)
_matmul = np.matmul


def _unpredictable_from(call: OpCall, e: TosaUnpredictable) -> TosaUnpredictable:
    return TosaUnpredictable(call.op, f"{e.op}: {e.rule}", call.where)


# ----------------------------------------------------------------------------------------------
# Convolutions

def _conv_common(call: OpCall, rank: int = 4):
    """Arity, ranks, types, acc_type, zero points and bias shape of the convolutions (input and
    weight of `rank`: 4 for the 2-D ones, 5 for CONV3D)."""
    _check_arity(call, 5)
    combo = check_types(call, CONV_TYPES, in_idx=(0, 1), out_idx=(0,))
    in_t, w_t, out_t = combo
    acc_t = CONV_TYPES[combo]
    if call.input_specs[2].dtype != out_t:
        call.error_if(True, f"bias type {call.in_dtype(2).name} != output type {out_t.name}")
    acc_attr = call.attrs.get("acc_type")
    if acc_attr is None or int(acc_attr) != int(acc_t):
        call.error_if(True, f"acc_type {acc_attr!r} is not {acc_t.name} for {in_t.name} x {w_t.name}")
    x_shape = _check_rank(call, 0, "input", rank)
    w_shape = _check_rank(call, 1, "weight", rank)
    b_shape = shape_of(call, 2)
    if len(b_shape) != 1:
        call.error_if(True, f"rank(bias) = {len(b_shape)}, must be 1")
    izp = _zero_point(call, 3, "input_zp", in_t, in_t == _I8)
    wzp = _zero_point(call, 4, "weight_zp", w_t, w_t == _I8)
    return in_t, w_t, out_t, x_shape, w_shape, b_shape[0], izp, wzp


def _bias_vector(call: OpCall, bc: int, oc: int) -> np.ndarray:
    if bc != oc and bc != 1:
        call.error_if(True, f"bias has {bc} values, needs {oc} or 1")
    b = call.inputs[2]
    return b if type(b) is np.ndarray and b.ndim == 1 else np.asarray(b).reshape(-1)


@register_plan("CONV2D", static=(1, 2, 3, 4))
def conv2d(call: OpCall):
    in_t, w_t, out_t, (n, ih, iw, ic), (oc, kh, kw, wic), bc, izp, wzp = _conv_common(call)
    pt, pb, pl, pr = _attr_list(call, "pad", 4)
    sy, sx = _attr_list(call, "stride", 2)
    dy, dx = _attr_list(call, "dilation", 2)
    if min(pt, pb, pl, pr) < 0 or sy < 1 or sx < 1 or dy < 1 or dx < 1 or wic != ic:  # the first that holds:
        call.error_if(min(pt, pb, pl, pr) < 0, "pad_top, pad_bottom, pad_left or pad_right < 0")
        call.error_if(sy < 1 or sx < 1, "stride_y < 1 or stride_x < 1")
        call.error_if(dy < 1 or dx < 1, "dilation_y < 1 or dilation_x < 1")
        call.error_if(wic != ic, f"weight has {wic} input channels, input has {ic}")
    oh = _idiv_check(call, ih - 1 + pt + pb - (kh - 1) * dy, sy, "OH") + 1
    ow = _idiv_check(call, iw - 1 + pl + pr - (kw - 1) * dx, sx, "OW") + 1
    _check_dim(call, oh, "OH")
    _check_dim(call, ow, "OW")
    check_output_shape(call, (n, oh, ow, oc))
    bias = _bias_vector(call, bc, oc)

    w = np.asarray(call.inputs[1])
    k = kh * kw * ic
    w_bound = _absmax(w, wzp)
    wmats: dict = {}                    # the weight matrix in each compute type, made once
    pointwise = kh == kw == 1 and sy == sx == 1 and not (pt or pb or pl or pr)

    def execute(ins):
        x = np.asarray(ins[0])
        dt = _compute_dtype(k * _absmax(x, izp) * w_bound)
        wmat = wmats.get(dt)
        if wmat is None:                # (KH*KW*IC, OC), matches the windows
            wmat = wmats[dt] = np.ascontiguousarray(_shifted(w, wzp, dt).reshape(oc, k).T)
        if pointwise:                   # 1x1, stride 1, no padding: the windows are the pixels
            acc = _matmul(_shifted(x, izp, dt).reshape(-1, k), wmat).reshape(n, oh, ow, oc)
            return [out(call, _finish(acc, bias, out_t))]
        xp = _pad_zero(_shifted(x, izp, dt), pt, pb, pl, pr)
        view = _windows(xp, (oh, ow), (kh, kw), (sy, sx), (dy, dx))      # (N, OH, OW, KH, KW, IC)
        acc = np.empty((n, oh, ow, oc), dt)
        rows = max(1, IM2COL_BLOCK_ELEMENTS // max(1, ow * k))   # output rows per im2col block
        for b in range(n):
            for y0 in range(0, oh, rows):
                blk = view[b, y0:y0 + rows]
                cols = np.ascontiguousarray(blk).reshape(-1, k)
                acc[b, y0:y0 + rows] = _matmul(cols, wmat).reshape(blk.shape[0], ow, oc)
        return [out(call, _finish(acc, bias, out_t))]
    return execute


@register("CONV3D")
def conv3d(call: OpCall):
    in_t, w_t, out_t, (n, id_, ih, iw, ic), (oc, kd, kh, kw, wic), bc, izp, wzp = _conv_common(call, rank=5)
    pd0, pd1, pt, pb, pl, pr = _attr_list(call, "pad", 6)
    sd, sy, sx = _attr_list(call, "stride", 3)
    dd, dy, dx = _attr_list(call, "dilation", 3)
    call.error_if(min(pd0, pd1, pt, pb, pl, pr) < 0, "pad_d0, pad_d1, pad_top, pad_bottom, pad_left or pad_right < 0")
    call.error_if(sd < 1 or sy < 1 or sx < 1, "stride_d < 1, stride_y < 1 or stride_x < 1")
    call.error_if(dd < 1 or dy < 1 or dx < 1, "dilation_d < 1, dilation_y < 1 or dilation_x < 1")
    call.error_if(wic != ic, lambda: f"weight has {wic} input channels, input has {ic}")
    od = _idiv_check(call, id_ - 1 + pd0 + pd1 - (kd - 1) * dd, sd, "OD") + 1
    oh = _idiv_check(call, ih - 1 + pt + pb - (kh - 1) * dy, sy, "OH") + 1
    ow = _idiv_check(call, iw - 1 + pl + pr - (kw - 1) * dx, sx, "OW") + 1
    _check_dim(call, od, "OD")
    _check_dim(call, oh, "OH")
    _check_dim(call, ow, "OW")
    check_output_shape(call, (n, od, oh, ow, oc))
    bias = _bias_vector(call, bc, oc)

    x, w = np.asarray(call.inputs[0]), np.asarray(call.inputs[1])
    k = kd * kh * kw * ic
    dt = _compute_dtype(k * _absmax(x, izp) * _absmax(w, wzp))
    xp = _pad_zero(_shifted(x, izp, dt), pd0, pd1, pt, pb, pl, pr)
    wmat = _shifted(w, wzp, dt).reshape(oc, k).T            # (KD*KH*KW*IC, OC), matches the windows
    view = _windows(xp, (od, oh, ow), (kd, kh, kw), (sd, sy, sx), (dd, dy, dx))   # (N, OD, OH, OW, KD, KH, KW, IC)
    acc = np.empty((n, od, oh, ow, oc), dt)
    rows = max(1, IM2COL_BLOCK_ELEMENTS // max(1, oh * ow * k))   # output depth slices per im2col block
    for b in range(n):
        for d0 in range(0, od, rows):
            blk = view[b, d0:d0 + rows]
            cols = np.ascontiguousarray(blk).reshape(-1, k)
            acc[b, d0:d0 + rows] = _matmul(cols, wmat).reshape(blk.shape[0], oh, ow, oc)
    return [out(call, _finish(acc, bias, out_t))]


@register_plan("DEPTHWISE_CONV2D", static=(1, 2, 3, 4))
def depthwise_conv2d(call: OpCall):
    in_t, w_t, out_t, (n, ih, iw, c), (kh, kw, wc, m), bc, izp, wzp = _conv_common(call)
    pt, pb, pl, pr = _attr_list(call, "pad", 4)
    sy, sx = _attr_list(call, "stride", 2)
    dy, dx = _attr_list(call, "dilation", 2)
    if min(pt, pb, pl, pr) < 0 or sy < 1 or sx < 1 or dy < 1 or dx < 1 or wc != c:    # the first that holds:
        call.error_if(min(pt, pb, pl, pr) < 0, "pad_top, pad_bottom, pad_left or pad_right < 0")
        call.error_if(sy < 1 or sx < 1, "stride_y < 1 or stride_x < 1")
        call.error_if(dy < 1 or dx < 1, "dilation_y < 1 or dilation_x < 1")
        call.error_if(wc != c, f"weight has {wc} channels, input has {c}")
    oh = _idiv_check(call, ih - 1 + pt + pb - (kh - 1) * dy, sy, "OH") + 1
    ow = _idiv_check(call, iw - 1 + pl + pr - (kw - 1) * dx, sx, "OW") + 1
    _check_dim(call, oh, "OH")
    _check_dim(call, ow, "OW")
    check_output_shape(call, (n, oh, ow, c * m))
    bias = _bias_vector(call, bc, c * m)

    w = np.asarray(call.inputs[1])
    k = kh * kw
    if k >= 4 and n * oh * ow * k * c <= DEPTHWISE_GEMM_ELEMENTS:
        # A small one with several taps: per channel, its windows (OH*OW x KH*KW) times its taps
        # (KH*KW x M), one batched product over the channels, in the cheapest type in which
        # every sum is exact (|x - input_zp| and |w - weight_zp| bounded by their types' ranges),
        # as CONV2D does.
        ct = _compute_dtype(k * max(abs(in_t.min - izp), abs(in_t.max - izp))
                            * max(abs(w_t.min - wzp), abs(w_t.max - wzp)))
        if n * oh * ow * k * c * c * m <= DEPTHWISE_BLOCK_PRODUCT:
            # Few channels: one product over all of them, the windows (N*OH*OW x KH*KW*C, as laid
            # out) times the taps as a block-diagonal (KH*KW*C x C*M) matrix: row (tap t, channel
            # ci), column ci*M + j holds w[t, ci, j], every other entry 0 (adds nothing).
            wblock = np.zeros(k * c * c * m, ct)
            size = wblock.itemsize                  # the diagonal blocks: a strided view of (KH*KW, C, M)
            diagonal = np.ndarray((k, c, m), ct, buffer=wblock, strides=(c * c * m * size, (c + 1) * m * size, size))
            diagonal[...] = w.reshape(k, c, m)      # (converted to the compute type as it is stored)
            if wzp:
                diagonal -= np.array(wzp, ct)       # (as _shifted subtracts it)
            wblock = wblock.reshape(k * c, c * m)

            def execute_block(ins):
                xp = _pad_zero(_shifted(np.asarray(ins[0]), izp, ct), pt, pb, pl, pr)
                view = _windows(xp, (oh, ow), (kh, kw), (sy, sx), (dy, dx))       # (N, OH, OW, KH, KW, C)
                acc = _matmul(np.ascontiguousarray(view).reshape(n * oh * ow, k * c), wblock)   # channel c*M + j
                return [out(call, _finish(acc, bias, out_t).reshape(n, oh, ow, c * m))]
            return execute_block

        wmat = np.ascontiguousarray(_shifted(w, wzp, ct).reshape(k, c, m).transpose(1, 0, 2))   # (C, KH*KW, M)
        bias_cm = bias.reshape(c, m) if bias.size == c * m else bias

        def execute_gemm(ins):
            xp = _pad_zero(_shifted(np.asarray(ins[0]), izp, ct), pt, pb, pl, pr)
            view = _windows(xp, (oh, ow), (kh, kw), (sy, sx), (dy, dx))       # (N, OH, OW, KH, KW, C)
            cols = np.ascontiguousarray(view.transpose(5, 0, 1, 2, 3, 4)).reshape(c, n * oh * ow, k)
            acc = _matmul(cols, wmat).transpose(1, 0, 2)                      # (N*OH*OW, C, M)
            # _finish's copy into the output type lays it out as (N, OH, OW, C*M): channel c*M + j
            return [out(call, _finish(acc, bias_cm, out_t).reshape(n, oh, ow, c * m))]
        return execute_gemm

    # int8: int32 arithmetic wraps exactly like the reference model's int32 accumulator;
    # int16: int64 holds the exact sum (|sum| < KH*KW * 2^15 * 2^8), saturated to int48 at the end.
    dt = np.int32 if out_t == _I32 else np.int64
    ws = _shifted(w, wzp, dt).reshape(kh, kw, c * m)           # output channel c*M + j: input channel c
    taps = [(ky * dy, kx * dx, ws[ky, kx]) for ky in range(kh) for kx in range(kw)]
    acc_shape = (n, oh, ow, c * m)
    ey, ex = (oh - 1) * sy + 1, (ow - 1) * sx + 1             # the extent of a tap's positions
    # int32 sums: the bias added in place (what _finish does, without copying the sums first)
    bias32 = (bias if bias.dtype == _INT32_DTYPE else bias.astype(np.int32)) if out_t == _I32 else None

    def execute(ins):
        x = _shifted(np.asarray(ins[0]), izp, dt)
        if m != 1:
            x = x.repeat(m, axis=3)                            # input channel c, once per output c*M + j
        xp = _pad_zero(x, pt, pb, pl, pr)
        acc = tmp = None
        for y0, x0, w_tap in taps:
            tap = xp[:, y0:y0 + ey:sy, x0:x0 + ex:sx]
            if acc is None:                                    # the first tap's products: a new array
                acc = np.multiply(tap, w_tap)
                continue
            if tmp is None:
                tmp = np.empty(acc_shape, dt)
            np.multiply(tap, w_tap, out=tmp)
            acc += tmp
        if bias32 is not None:
            acc += bias32
            return [acc]
        return [out(call, _finish(acc, bias, out_t))]
    return execute


@register("TRANSPOSE_CONV2D")
def transpose_conv2d(call: OpCall):
    in_t, w_t, out_t, (n, ih, iw, ic), (oc, kh, kw, wic), bc, izp, wzp = _conv_common(call)
    pt, pb, pl, pr = _attr_list(call, "out_pad", 4)
    sy, sx = _attr_list(call, "stride", 2)
    if min(pt, pb) <= -kh or min(pl, pr) <= -kw or sy < 1 or sx < 1 or wic != ic:          # the first that holds:
        call.error_if(pt <= -kh or pb <= -kh, "out_pad_top <= -KH or out_pad_bottom <= -KH")
        call.error_if(pl <= -kw or pr <= -kw, "out_pad_left <= -KW or out_pad_right <= -KW")
        call.error_if(sy < 1 or sx < 1, "stride_y < 1 or stride_x < 1")
        call.error_if(wic != ic, f"weight has {wic} input channels, input has {ic}")
    oh = (ih - 1) * sy + pt + pb + kh
    ow = (iw - 1) * sx + pl + pr + kw
    _check_dim(call, oh, "OH")
    _check_dim(call, ow, "OW")
    check_output_shape(call, (n, oh, ow, oc))
    bias = _bias_vector(call, bc, oc)

    x, w = np.asarray(call.inputs[0]), np.asarray(call.inputs[1])
    # exact in the cheapest type for any values of the operand types (|x - input_zp| and
    # |w - weight_zp| bounded by their types' ranges, as DEPTHWISE_CONV2D's product): no reductions
    dt = _compute_dtype(kh * kw * ic * max(abs(in_t.min - izp), abs(in_t.max - izp))
                        * max(abs(w_t.min - wzp), abs(w_t.max - wzp)))
    if n * oh * ow * kh * kw * ic <= TRANSPOSE_GATHER_ELEMENTS:
        # A small one as the convolution it equals: the input spread out by the stride (zeros
        # between its pixels) and padded by KH - 1 + out_pad_top, ... (>= 0: out_pad > -KH), its
        # windows times the kernel turned around. Output pixel (oy, ox) then reads the input pixel
        # (iy, ix) with weight tap (ky, kx) exactly when iy * stride_y + ky == oy - out_pad_top
        # (and likewise for x), as the definition below adds them: one product, no loop over taps.
        top, left = kh - 1 + pt, kw - 1 + pl
        spread = np.zeros((n, oh + kh - 1, ow + kw - 1, ic), dt)
        spread[:, top:top + (ih - 1) * sy + 1:sy, left:left + (iw - 1) * sx + 1:sx] = _shifted(x, izp, dt)
        view = _windows(spread, (oh, ow), (kh, kw), (1, 1), (1, 1))            # (N, OH, OW, KH, KW, IC)
        wmat = _shifted(w, wzp, dt)[:, ::-1, ::-1].reshape(oc, kh * kw * ic).T   # (KH*KW*IC, OC), turned
        acc = _matmul(np.ascontiguousarray(view).reshape(n * oh * ow, kh * kw * ic), wmat)
        return [out(call, _finish(acc.reshape(n, oh, ow, oc), bias, out_t))]
    xs = _shifted(x, izp, dt).reshape(n * ih * iw, ic)
    wmat = _shifted(w, wzp, dt).transpose(1, 2, 0, 3).reshape(kh * kw * oc, ic).T  # (IC, KH*KW*OC)
    # Input pixel (iy, ix) adds weight tap (ky, kx) into the full-size output at
    # (iy * stride_y + ky, ix * stride_x + kx); out_pad then pads or crops that full output.
    contrib = _matmul(xs, wmat).reshape(n, ih, iw, kh, kw, oc)
    fh, fw = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    full = np.zeros((n, fh, fw, oc), dt)
    for ky in range(kh):
        for kx in range(kw):
            full[:, ky:ky + (ih - 1) * sy + 1:sy, kx:kx + (iw - 1) * sx + 1:sx] += contrib[:, :, :, ky, kx]
    acc = np.zeros((n, oh, ow, oc), dt)
    # output row oy reads full row oy - out_pad_top (when that row exists)
    oy0, oy1 = max(0, pt), min(oh, fh + pt)
    ox0, ox1 = max(0, pl), min(ow, fw + pl)
    if oy0 < oy1 and ox0 < ox1:
        acc[:, oy0:oy1, ox0:ox1] = full[:, oy0 - pt:oy1 - pt, ox0 - pl:ox1 - pl]
    return [out(call, _finish(acc, bias, out_t))]


# ----------------------------------------------------------------------------------------------
# MATMUL

@register("MATMUL")
def matmul(call: OpCall):
    _check_arity(call, 4)
    a_t, b_t, out_t = check_types(call, MATMUL_TYPES, in_idx=(0, 1), out_idx=(0,))
    a_shape, b_shape = shape_of(call, 0), shape_of(call, 1)
    call.error_if(len(a_shape) != 3, lambda: f"rank(A) = {len(a_shape)}, must be 3")
    call.error_if(len(b_shape) != 3, lambda: f"rank(B) = {len(b_shape)}, must be 3")
    (n, h, c), (bn, bc, w) = a_shape, b_shape
    call.error_if(bn != n, lambda: f"batch of B ({bn}) != batch of A ({n})")
    call.error_if(bc != c, lambda: f"B has {bc} rows, A has {c} columns")
    azp = _zero_point(call, 2, "A_zp", a_t, a_t == DType.INT8)
    bzp = _zero_point(call, 3, "B_zp", b_t, b_t == DType.INT8)
    check_output_shape(call, (n, h, w))
    a, b = np.asarray(call.inputs[0]), np.asarray(call.inputs[1])
    dt = _compute_dtype(c * _absmax(a, azp) * _absmax(b, bzp))
    acc = _matmul(_shifted(a, azp, dt), _shifted(b, bzp, dt))
    return [out(call, _finish(acc, 0, out_t))]


# ----------------------------------------------------------------------------------------------
# Pooling

def _pool_common(call: OpCall, n_in: int):
    _check_arity(call, n_in)
    io_t = check_types(call, POOL_TYPES)[0]
    n, ih, iw, c = _check_rank(call, 0, "input")
    ky, kx = _attr_list(call, "kernel", 2)
    sy, sx = _attr_list(call, "stride", 2)
    pt, pb, pl, pr = _attr_list(call, "pad", 4)
    if (ky < 1 or kx < 1 or sy < 1 or sx < 1 or pt < 0 or pb < 0 or pl < 0 or pr < 0 or pl >= kx or pr >= kx
            or pt >= ky or pb >= ky):
        call.error_if(ky < 1 or kx < 1, "kernel_y < 1 or kernel_x < 1")         # the first that holds
        call.error_if(sy < 1 or sx < 1, "stride_y < 1 or stride_x < 1")
        call.error_if(min(pt, pb, pl, pr) < 0, "pad_top, pad_bottom, pad_left or pad_right < 0")
        call.error_if(pr >= kx or pl >= kx, "pad_right >= kernel_x or pad_left >= kernel_x")
        call.error_if(pt >= ky or pb >= ky, "pad_top >= kernel_y or pad_bottom >= kernel_y")
    oh = _idiv_check(call, ih + pt + pb - ky, sy, "OH") + 1
    ow = _idiv_check(call, iw + pl + pr - kx, sx, "OW") + 1
    _check_dim(call, oh, "OH")
    _check_dim(call, ow, "OW")
    check_output_shape(call, (n, oh, ow, c))
    return io_t, (n, ih, iw, c), (ky, kx), (sy, sx), (pt, pb, pl, pr), (oh, ow)


def _window_reduce(xp: np.ndarray, k: tuple[int, int], s: tuple[int, int], o: tuple[int, int],
                   ufunc, dtype=None) -> np.ndarray:
    """Separable window reduction (sum or max) of a padded NHWC tensor: first along W, then H;
    in `dtype` (xp's own type when None)."""
    (ky, kx), (sy, sx), (oh, ow) = k, s, o
    ex, ey = (ow - 1) * sx + 1, (oh - 1) * sy + 1      # the extent of a tap's positions
    # each axis starts with the first two taps' ufunc into a new array (a copy of the first
    # tap, then a ufunc into it, otherwise: one numpy call more per axis)
    if kx > 1:
        rows = ufunc(xp[:, :, 0:ex:sx], xp[:, :, 1:1 + ex:sx], dtype=dtype)
    else:
        first = xp[:, :, 0:ex:sx]
        rows = first.copy() if dtype is None else first.astype(dtype)
    for j in range(2, kx):
        ufunc(rows, xp[:, :, j:j + ex:sx], out=rows)
    if ky > 1:
        acc = ufunc(rows[:, 0:ey:sy], rows[:, 1:1 + ey:sy])
    else:
        acc = rows[:, 0:ey:sy].copy()
    for i in range(2, ky):
        ufunc(acc, rows[:, i:i + ey:sy], out=acc)
    return acc


def _valid_count(size: int, k: int, s: int, p0: int, o: int) -> list[int]:
    """For each output position y, how many of its k window taps fall inside [0, size):
    min(y * s - p0 + k, size) - max(y * s - p0, 0). A window that starts at or after 0 and ends at
    or before size has all k; the formula is evaluated only for the others, walking in from each
    end while a window starts before 0 (y * s < p0) or ends after size (y * s - p0 + k > size)
    (a position or two: the padding is less than k)."""
    counts = [k] * o
    y = 0
    while y < o and y * s < p0:
        counts[y] = min(y * s - p0 + k, size) - max(y * s - p0, 0)
        y += 1
    y = o - 1
    while y >= 0 and y * s - p0 + k > size:
        counts[y] = min(y * s - p0 + k, size) - max(y * s - p0, 0)
        y -= 1
    return counts


# AVG_POOL2D of a small output (at most POOL_SCALE_BLOCK elements) whose windows have at most
# AVG_TABLE_COUNTS taps scales every sum with one shift, AVG_TABLE_SHIFT (the largest
# reciprocal_scale gives for those counts): with (m, sh) = reciprocal_scale(count),
#   apply_scale_32(sum, m, sh) + output_zp
#     == (sum * (m << (AVG_TABLE_SHIFT - sh)) + (1 << (AVG_TABLE_SHIFT - 1)) + (output_zp << AVG_TABLE_SHIFT))
#        >> AVG_TABLE_SHIFT
# (numerator and divisor times 2^(AVG_TABLE_SHIFT - sh); a multiple of 2^AVG_TABLE_SHIFT added before
# the shift comes out whole), so a position's scaling is one multiplier, AVG_TABLE_MULTIPLIER[count].
# For int8 and int16 values (|sum| <= count x 2^16) apply_scale_32's REQUIREs and apply_add_s's
# hold, every term stays within int64, and the sums of the type's extremes, count x (min - input_zp)
# and count x (max - input_zp), scale to min - input_zp and max - input_zp exactly, so a result lies
# beyond the type on one side only, the side output_zp moves it to
# (tests/firmware_model/tosa_ops/test_prepared_plans.py checks all of it for every count).
AVG_TABLE_COUNTS = 4096
_m, _sh = numerics.reciprocal_scale(np.arange(1, AVG_TABLE_COUNTS + 1))
AVG_TABLE_SHIFT = int(_sh.max())
AVG_TABLE_MULTIPLIER = np.concatenate(([0], _m.astype(np.int64) << (AVG_TABLE_SHIFT - _sh.astype(np.int64))))
del _m, _sh
# ... and by (row count, column count) for windows of up to AVG_TABLE_SIDE taps a side
# (AVG_TABLE_SIDE^2 <= AVG_TABLE_COUNTS): AVG_TABLE_BY_SIDES[r, q, 0] == AVG_TABLE_MULTIPLIER[r * q],
# so the (OH, OW, 1) multipliers of a padded pool are two takes by the row and column counts (a
# product of the counts and a fancy index took two thirds more).
AVG_TABLE_SIDE = 64
AVG_TABLE_BY_SIDES = AVG_TABLE_MULTIPLIER[np.multiply.outer(np.arange(AVG_TABLE_SIDE + 1),
                                                           np.arange(AVG_TABLE_SIDE + 1))][:, :, None]
# The small path's constant operands as 0-d int64 arrays (numpy 2 takes a Python-integer ufunc
# operand through its weak-scalar promotion: ~0.3 µs more a call on a small array), and each
# type's apply_clip_s bounds.
_INT64 = np.dtype(np.int64)


def _constant(v: int) -> np.ndarray:
    a = np.array(v, _INT64)
    a.flags.writeable = False
    return a


_AVG_SHIFT = _constant(AVG_TABLE_SHIFT)
_POOL_BOUNDS = {t: (_constant(t.min), _constant(t.max)) for t in (DType.INT8, DType.INT16)}
_INT32_CODE = int(DType.INT32)


@register_plan("AVG_POOL2D", static=(1, 2))
def avg_pool2d(call: OpCall):
    io_t, (n, ih, iw, c), k, s, (pt, pb, pl, pr), o = _pool_common(call, 3)
    acc_attr = call.attrs.get("acc_type")
    if acc_attr is None or int(acc_attr) != _INT32_CODE:
        call.error_if(True, f"acc_type {acc_attr!r} is not INT32 for {io_t.name}")
    is_i8 = io_t == _I8
    izp = _zero_point(call, 1, "input_zp", io_t, is_i8)
    ozp = _zero_point(call, 2, "output_zp", io_t, is_i8)

    # Only positions inside the input count; padding adds nothing to the sum (nor to count).
    # count[y, x] = rows[y] * cols[x]; reciprocal_scale is taken once per count that occurs.
    (ky, kx), (oh, ow) = k, o
    row_counts, col_counts = _valid_count(ih, ky, s[0], pt, oh), _valid_count(iw, kx, s[1], pl, ow)
    if ky * kx <= AVG_TABLE_COUNTS and n * oh * ow * c <= POOL_SCALE_BLOCK:
        return _avg_pool_small(io_t, (n, ih, iw, c), k, s, (pt, pb, pl, pr), o, izp, ozp, row_counts, col_counts)
    rs, qs = sorted(set(row_counts)), sorted(set(col_counts))
    scales = {}                                     # count -> (multiplier, shift)
    try:
        for r in rs:
            for q in qs:
                if r * q not in scales:
                    scales[r * q] = numerics.reciprocal_scale_int(r * q)
    except TosaUnpredictable as e:
        raise _unpredictable_from(call, e) from e
    # |x - input_zp| over the type's values bounds the sums: apply_scale_32's REQUIREs and
    # apply_add_s's then hold for every input when the bounds below say so (they do for int8 and
    # int16: count x 2^16 < 2^(shift - 1) = 2^(29 + ceil(log2 count))), and the fast execute
    # below leaves them out; otherwise the primitives run with their REQUIREs.
    lo, hi = io_t.min, io_t.max
    bound = max(abs(lo - izp), abs(hi - izp))
    # The proven path sums the values as they are (sum_x over the count taps inside) and folds
    # the zero points into the rounding constant:
    #   ((sum_x - count * input_zp) * m + round) >> shift + output_zp
    #     == (sum_x * m + (round - count * input_zp * m + (output_zp << shift))) >> shift
    # (an integer times 2^shift added before the shift comes out whole) when every int64 term
    # stays below 2^63 (checked per count with |x| <= max(-min, max)). apply_clip_s runs on a
    # side only where a result can lie beyond it: the scaling is monotone (m >= 0), so the sums'
    # extremes, count x (min or max - input_zp), give the results' range.
    bx = max(-lo, hi)
    proven = fold = True
    clip_lo = clip_hi = False
    rounding = {}                                   # count -> the round added before the shift
    for cnt, (m, sh) in scales.items():
        half = 1 << (sh - 1)                       # apply_scale_32's round, and its value bound
        scaled = (cnt * bound * m + half) >> sh
        proven = proven and m >= 0 and 2 <= sh <= 62 and cnt * bound < half and \
            numerics.INT32_MIN <= -scaled + ozp and scaled + ozp <= numerics.INT32_MAX
        rounding[cnt] = rnd = half - cnt * izp * m + (ozp << sh)
        fold = fold and cnt * bx * m + abs(rnd) < 1 << 63
        clip_lo = clip_lo or ((cnt * (lo - izp) * m + half) >> sh) + ozp < lo
        clip_hi = clip_hi or ((cnt * (hi - izp) * m + half) >> sh) + ozp > hi
    fold = fold and proven
    if not fold:                                    # (no int8 or int16 pool) the plain round
        rounding = {cnt: 1 << (sh - 1) for cnt, (m, sh) in scales.items()}
        # sums of (value - input_zp)
        dt = np.int32 if ky * kx * bound < AVG_INT32_SUM_BOUND else np.int64
        if not proven:
            clip_lo = clip_hi = True
    else:                                           # sums of the values as they are
        dt = np.int32 if ky * kx * bx < AVG_INT32_SUM_BOUND else np.int64
    if len(scales) == 1:
        # one count for every position: (multiplier, shift, round) as scalars (the multiplier an
        # int64 array of one value: an int32 sum times it is int64)
        ((cnt, (m, sh)),) = scales.items()
        m3, sh3, rnd3 = np.array([m], np.int64), sh, rounding[cnt]
    else:
        # (multiplier, shift, round) of each output position's count, (OH, OW, 1) each: the table
        # over (distinct row count, distinct column count) indexed per row and column (take: a
        # third of fancy indexing's time)
        flat = []
        for r in rs:
            for q in qs:
                m, sh = scales[r * q]
                flat += (m, sh, rounding[r * q])
        table = np.array(flat, np.int64).reshape(len(rs), len(qs), 3)
        params = table.take(list(map(rs.index, row_counts)), 0).take(list(map(qs.index, col_counts)), 1)
        m3, sh3, rnd3 = params[:, :, 0:1], params[:, :, 1:2], params[:, :, 2:3]
    storage = io_t.storage
    padded = pt or pb or pl or pr

    def scale(a, m, sh, rnd):
        """apply_scale_32, apply_add_s(., output_zp) and apply_clip_s of a block of sums."""
        if fold:           # their REQUIREs proven above; the zero points in rnd
            v = a * m                              # (int64: m is an int64 array)
            v += rnd
            v >>= sh
        elif proven:
            v = a.astype(np.int64) * m
            v += rnd
            v >>= sh
            if ozp:
                v += ozp
        else:
            v = numerics.apply_add_s(numerics.apply_scale_32(a, m, sh, False), ozp, DType.INT32)
        if clip_lo and clip_hi:                    # apply_clip_s(v, minimum, maximum)
            numerics.clip_ufunc(v, lo, hi, out=v)
        elif clip_lo:
            np.maximum(v, lo, out=v)
        elif clip_hi:
            np.minimum(v, hi, out=v)
        return v.astype(storage)

    def execute(ins):
        x = np.asarray(ins[0])
        if fold:           # the values as they are, 0 outside the input (padding adds nothing)
            if padded:
                xp = np.zeros((n, ih + pt + pb, iw + pl + pr, c), dt)
                xp[:, pt:pt + ih, pl:pl + iw] = x
            else:
                xp = x
            acc = _window_reduce(xp, k, s, o, np.add, dt)
        else:
            acc = _window_reduce(_pad_zero(_shifted(x, izp, dt), pt, pb, pl, pr), k, s, o, np.add)
        try:
            if acc.size <= POOL_SCALE_BLOCK:       # one block: the (OH, OW, 1) parameters broadcast
                return [scale(acc, m3, sh3, rnd3)]
            result = np.empty(acc.shape, storage)
            rows = max(1, POOL_SCALE_BLOCK // max(1, ow * c))   # output rows scaled per block
            scalar = len(scales) == 1
            for b in range(n):
                for y0 in range(0, oh, rows):
                    y = slice(y0, y0 + rows)
                    result[b, y] = scale(acc[b, y], m3, sh3, rnd3) if scalar else scale(acc[b, y], m3[y], sh3[y], rnd3[y])
        except TosaUnpredictable as e:
            raise _unpredictable_from(call, e) from e
        return [result]
    return execute


def _avg_pool_small(io_t: DType, in_shape, k, s, pads, o, izp: int, ozp: int, row_counts: list[int],
                    col_counts: list[int]):
    """AVG_POOL2D's execute for a small output with windows of at most AVG_TABLE_COUNTS taps (see
    AVG_TABLE_SHIFT): int64 sums of value - input_zp, each times its count's multiplier."""
    (n, ih, iw, c), (pt, pb, pl, pr) = in_shape, pads
    if pt or pb or pl or pr:                       # count = row count x column count, per position
        padded = (n, ih + pt + pb, iw + pl + pr, c)
        if k[0] <= AVG_TABLE_SIDE and k[1] <= AVG_TABLE_SIDE:
            multiplier = AVG_TABLE_BY_SIDES.take(row_counts, 0).take(col_counts, 1)
        else:
            multiplier = AVG_TABLE_MULTIPLIER[np.multiply.outer(row_counts, col_counts)][:, :, None]
    else:                                          # every window inside the input: one count
        padded = None
        multiplier = AVG_TABLE_MULTIPLIER[k[0] * k[1]:k[0] * k[1] + 1].reshape(())
    rounding = np.array((1 << (AVG_TABLE_SHIFT - 1)) + (ozp << AVG_TABLE_SHIFT), _INT64)
    izp_ = np.array(izp, _INT64) if izp else None
    # apply_clip_s: results lie in [min, max] - input_zp + output_zp
    clip_lo, clip_hi, storage = ozp < izp, ozp > izp, io_t.storage
    lo, hi = _POOL_BOUNDS[io_t]

    def execute(ins):
        xs = np.asarray(ins[0]).astype(np.int64)
        if izp_ is not None:
            xs -= izp_
        if padded:                                 # 0 outside the input (adds nothing)
            xp = np.zeros(padded, np.int64)
            xp[:, pt:pt + ih, pl:pl + iw] = xs
            xs = xp
        acc = _window_reduce(xs, k, s, o, np.add)
        acc *= multiplier
        acc += rounding
        acc >>= _AVG_SHIFT
        if clip_lo:
            np.maximum(acc, lo, out=acc)
        elif clip_hi:
            np.minimum(acc, hi, out=acc)
        return [acc.astype(storage)]
    return execute


@register("MAX_POOL2D")
def max_pool2d(call: OpCall):
    io_t, (n, ih, iw, c), k, s, (pt, pb, pl, pr), o = _pool_common(call, 1)
    x = np.asarray(call.inputs[0])
    # Padding with the type's minimum never wins: pad < kernel, so each window sees the input.
    if pt or pb or pl or pr:
        xp = np.empty((n, ih + pt + pb, iw + pl + pr, c), x.dtype)   # np.full, without its wrapper
        xp.fill(io_t.min)
        xp[:, pt:pt + ih, pl:pl + iw] = x
    else:
        xp = x
    return [out(call, _window_reduce(xp, k, s, o, np.maximum))]
