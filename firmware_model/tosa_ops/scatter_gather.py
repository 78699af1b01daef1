"""GATHER and SCATTER: values [N,K,C], indices [N,W] (INT32), the gathered/scattered rows [N,W,C]."""

from __future__ import annotations

import numpy as np

from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.op_utils import check_output_shape, check_types, out, shape_of
from firmware_model.tosa_ops.registry import OpCall, register

VALUE_TYPES = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32)


@register("GATHER")
def gather(call: OpCall):
    check_types(call, [(t, DType.INT32, t) for t in VALUE_TYPES], (0, 1))
    vs, ids = shape_of(call, 0), shape_of(call, 1)
    call.error_if(len(vs) != 3, lambda: f"values must be rank 3 [N,K,C], got rank {len(vs)}")
    call.error_if(len(ids) != 2, lambda: f"indices must be rank 2 [N,W], got rank {len(ids)}")
    N, K, C = vs
    call.error_if(ids[0] != N, lambda: f"indices batch {ids[0]} != values batch {N}")
    W = ids[1]
    check_output_shape(call, (N, W, C))
    k = np.asarray(call.inputs[1], dtype=np.int64)
    call.require((k >= 0) & (k < K), lambda: f"0 <= index < K = {K}")
    values = np.asarray(call.inputs[0])
    return [out(call, values[np.arange(N)[:, None], k])]


@register("SCATTER")
def scatter(call: OpCall):
    check_types(call, [(t, DType.INT32, t, t) for t in VALUE_TYPES], (0, 1, 2))
    vs, ids, ins = shape_of(call, 0), shape_of(call, 1), shape_of(call, 2)
    call.error_if(len(vs) != 3, lambda: f"values_in must be rank 3 [N,K,C], got rank {len(vs)}")
    call.error_if(len(ids) != 2, lambda: f"indices must be rank 2 [N,W], got rank {len(ids)}")
    call.error_if(len(ins) != 3, lambda: f"input must be rank 3 [N,W,C], got rank {len(ins)}")
    N, K, C = vs
    W = ids[1]
    call.error_if(ids[0] != N or ins[0] != N, "batch sizes of values_in, indices and input differ")
    call.error_if(ins[1] != W, lambda: f"input W {ins[1]} != indices W {W}")
    call.error_if(ins[2] != C, lambda: f"input C {ins[2]} != values_in C {C}")
    check_output_shape(call, (N, K, C))
    k = np.asarray(call.inputs[1], dtype=np.int64)
    call.require((k >= 0) & (k < K), lambda: f"0 <= index < K = {K}")
    # REQUIRE(output_modified[n,k,c] == false): no index repeats within a batch row.
    if W > 1:
        s = np.sort(k, axis=1)
        call.require(np.all(s[:, 1:] != s[:, :-1]), "each output position is written at most once")
    result = np.array(call.inputs[0], copy=True)
    result[np.arange(N)[:, None], k] = np.asarray(call.inputs[2])
    return [out(call, result)]
