"""RESIZE (integer): nearest-neighbour and bilinear, with the spec's fixed-point positions
(scale numerator/denominator, offset, border). Positions are computed once per row and per column
and the four taps gathered with numpy."""

from __future__ import annotations

import numpy as np

from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import (attr, check_output_shape, check_types, out, shape_of,
                                              shape_operand)
from firmware_model.tosa_ops.registry import OpCall, register

NEAREST, BILINEAR = 1, 2   # ResizeMode in the schema


def idiv_floor(a, b):
    """int32 idiv_floor(a, b): division rounding towards minus infinity (b > 0)."""
    return np.floor_divide(a, b)


def _positions(call: OpCall, n_out: int, n_in: int, scale_n: int, scale_d: int, offset: int):
    """For each output coordinate: (i0, i1, d) with i0/i1 the clamped neighbours and d the
    fractional position in units of 1/scale_n."""
    o = np.arange(n_out, dtype=np.int64)
    pos = o * scale_d + offset
    i = idiv_floor(pos, scale_n)
    d = pos - i * scale_n
    i0 = np.maximum(i, 0)
    i1 = np.minimum(i + 1, n_in - 1)
    return i0, i1, d


@register("RESIZE")
def resize(call: OpCall):
    in_t, out_t = check_types(call, [(DType.INT8, DType.INT32), (DType.INT8, DType.INT8),
                                     (DType.INT16, DType.INT48), (DType.INT16, DType.INT16)])
    mode = int(attr(call, "mode", 0))
    call.error_if(mode not in (NEAREST, BILINEAR), lambda: f"unknown mode {mode}")
    call.error_if(mode == BILINEAR and in_t == out_t,
                  lambda: f"BILINEAR needs a wider output than {in_t.name}")
    call.error_if(mode == NEAREST and in_t != out_t, "NEAREST output type must equal the input type")
    shape = shape_of(call, 0)
    call.error_if(len(shape) != 4, lambda: f"input must be rank 4 [N,IH,IW,C], got rank {len(shape)}")
    N, IH, IW, C = shape
    scale = shape_operand(call, 1, "scale")
    offset = shape_operand(call, 2, "offset")
    border = shape_operand(call, 3, "border")
    call.error_if(len(scale) != 4 or len(offset) != 2 or len(border) != 2,
                  "scale must have 4 values, offset and border 2")
    sy_n, sy_d, sx_n, sx_d = scale
    oy_off, ox_off = offset
    by, bx = border
    call.error_if(sy_n <= 0 or sy_d <= 0 or sx_n <= 0 or sx_d <= 0, "scale values <= 0")
    call.error_if(sy_n > (1 << 11) or sx_n > (1 << 11), "scale_y_n or scale_x_n > (1 << 11)")
    call.error_if(sy_d >= 16 * sy_n or sx_d >= 16 * sx_n, "scale_d >= 16 * scale_n")
    call.error_if(oy_off < -sy_n or oy_off >= 16 * sy_n, "offset_y outside [-scale_y_n, 16 * scale_y_n)")
    call.error_if(ox_off < -sx_n or ox_off >= 16 * sx_n, "offset_x outside [-scale_x_n, 16 * scale_x_n)")
    call.error_if(by < -16 * sy_n or by >= sy_n, "border_y outside [-16 * scale_y_n, scale_y_n)")
    call.error_if(bx < -16 * sx_n or bx >= sx_n, "border_x outside [-16 * scale_x_n, scale_x_n)")
    num_y = (IH - 1) * sy_n - oy_off + by
    num_x = (IW - 1) * sx_n - ox_off + bx
    call.error_if(num_y % sy_d != 0, "(IH - 1) * scale_y_n - offset_y + border_y is not a multiple of scale_y_d")
    call.error_if(num_x % sx_d != 0, "(IW - 1) * scale_x_n - offset_x + border_x is not a multiple of scale_x_d")
    OH, OW = num_y // sy_d + 1, num_x // sx_d + 1
    call.error_if(max(OH, OW, IH, IW) >= 16384, "max(OH, OW, IH, IW) >= 16384")
    check_output_shape(call, (N, OH, OW, C))
    call.error_if(OH <= 0 or OW <= 0, "output height or width <= 0")

    x = np.asarray(call.inputs[0], dtype=np.int64)
    iy0, iy1, dy = _positions(call, OH, IH, sy_n, sy_d, oy_off)
    ix0, ix1, dx = _positions(call, OW, IW, sx_n, sx_d, ox_off)
    if mode == NEAREST:
        iy = np.where(2 * dy >= sy_n, iy1, iy0)
        ix = np.where(2 * dx >= sx_n, ix1, ix0)
        return [out(call, x[:, iy][:, :, ix])]
    # BILINEAR: acc = sum of the four taps weighted in units of scale_n.
    rows0, rows1 = x[:, iy0], x[:, iy1]
    wy0 = (sy_n - dy)[None, :, None, None]
    wy1 = dy[None, :, None, None]
    wx0 = (sx_n - dx)[None, None, :, None]
    wx1 = dx[None, None, :, None]
    acc = (rows0[:, :, ix0] * wy0 * wx0 + rows0[:, :, ix1] * wy0 * wx1
           + rows1[:, :, ix0] * wy1 * wx0 + rows1[:, :, ix1] * wy1 * wx1)
    return [out(call, acc)]
