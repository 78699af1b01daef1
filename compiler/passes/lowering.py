"""Pass 3 — lowering and fusion.

Reads: ctx.graph (static shapes).
Writes: ctx.graph with groups of TOSA ops replaced by NPU operations (compiler/npu_ops.py), and
ctx.host_reasons: for every op left to the host CPU, why the NPU cannot run it.

Patterns:
    CONV2D [-> RESCALE [-> CLAMP]]    -> NPU_CONV2D  (int8 input and weights, constant weights,
                                                    bias and zero points; the intermediate tensors
                                                    used by nothing else)
Constants that only fed fused ops disappear with them.
"""

from __future__ import annotations

import numpy as np

from compiler.ir import Block, Operator
from compiler.npu_ops import NPU_CONV2D, NpuConv, RescaleSpec
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType

DATA_OPS = {"CONST", "CONST_SHAPE"}


def _const(block: Block, producers: dict, name: str) -> np.ndarray | None:
    t = block.tensors.get(name)
    if t is None:
        return None
    op = producers.get(name)
    if op is not None and op.op in DATA_OPS and t.data is not None:
        return t.data
    return None


def _scalar(arr: np.ndarray | None) -> int | None:
    if arr is None or arr.size != 1:
        return None
    return int(arr.reshape(-1)[0])


def _sole_consumer(block: Block, consumers: dict, name: str) -> Operator | None:
    users = consumers.get(name, [])
    if len(users) != 1 or name in block.outputs:
        return None
    return users[0]


def _match_conv(block: Block, op: Operator, producers, consumers) -> tuple[NpuConv, list[Operator]] | str:
    """An NpuConv and the ops it replaces, or the reason it cannot run on the NPU."""
    if len(op.inputs) != 5:
        return "CONV2D with an unexpected operand count"
    x, w, b, izp_name, wzp_name = op.inputs
    tx, tw, tout = block.tensor(x), block.tensor(w), block.tensor(op.outputs[0])
    if tx.dtype != DType.INT8 or tw.dtype != DType.INT8:
        return f"{tx.dtype.name} x {tw.dtype.name} convolution: the MAC array runs int8 x int8"
    weights, bias = _const(block, producers, w), _const(block, producers, b)
    izp, wzp = _scalar(_const(block, producers, izp_name)), _scalar(_const(block, producers, wzp_name))
    if weights is None or bias is None or izp is None or wzp is None:
        return "weights, bias or zero points are not constants"
    if tx.rank != 4:
        return f"input of rank {tx.rank}"
    pad = tuple(int(v) for v in op.attrs.get("pad", (0, 0, 0, 0)))
    stride = tuple(int(v) for v in op.attrs.get("stride", (1, 1)))
    dilation = tuple(int(v) for v in op.attrs.get("dilation", (1, 1)))
    oc = tw.shape[0]
    bias = np.broadcast_to(bias.astype(np.int64).reshape(-1), (oc,)).copy()
    replaced = [op]
    out_name = op.outputs[0]
    rescale = None
    clamp = None
    out_dtype = tout.dtype
    nxt = _sole_consumer(block, consumers, out_name)
    if nxt is not None and nxt.op == "RESCALE":
        spec = _match_rescale(block, nxt, producers, oc)
        if isinstance(spec, RescaleSpec):
            rescale = spec
            replaced.append(nxt)
            out_name = nxt.outputs[0]
            out_dtype = spec.out_dtype
            nxt = _sole_consumer(block, consumers, out_name)
            if nxt is not None and nxt.op == "CLAMP" and block.tensor(nxt.outputs[0]).dtype == out_dtype:
                lo, hi = int(nxt.attrs["min_val"]), int(nxt.attrs["max_val"])
                if lo <= hi:
                    clamp = (lo, hi)
                    replaced.append(nxt)
                    out_name = nxt.outputs[0]
    conv = NpuConv(
        ifm=x, ofm=out_name, weights=weights.astype(np.int8), bias=bias, input_zp=izp, weight_zp=wzp,
        stride=stride, pad=pad, dilation=dilation, in_shape=tuple(tx.shape), out_shape=tuple(tout.shape),
        acc_dtype=DType.INT32, rescale=rescale, clamp=clamp, out_dtype=out_dtype,
        sources=[f"{o.op}->{o.outputs[0]}" for o in replaced])
    return conv, replaced


def _match_rescale(block: Block, op: Operator, producers, oc: int) -> RescaleSpec | None:
    x, mult, shift, izp, ozp = op.inputs
    out = block.tensor(op.outputs[0])
    a = op.attrs
    m, s = _const(block, producers, mult), _const(block, producers, shift)
    in_zp, out_zp = _scalar(_const(block, producers, izp)), _scalar(_const(block, producers, ozp))
    if m is None or s is None or in_zp is None or out_zp is None:
        return None
    rounding = int(a.get("rounding_mode", numerics.SINGLE_ROUND))
    if (in_zp != 0 or a.get("input_unsigned") or out.dtype not in (DType.INT8, DType.INT16)
            or rounding == numerics.INEXACT_ROUND):
        return None
    scale32 = bool(a.get("scale32", True))
    if not scale32 and rounding == numerics.DOUBLE_ROUND:
        return None
    m = np.broadcast_to(m.astype(np.int64).reshape(-1), (oc,)).copy()
    s = np.broadcast_to(s.astype(np.int64).reshape(-1), (oc,)).copy()
    if np.any(s < 2) or np.any(s > 62) or np.any(m < 0):
        return None  # REQUIRE violations: leave them to the host, which reports them
    return RescaleSpec(multiplier=m, shift=s, output_zp=out_zp, scale32=scale32,
                       double_round=rounding == numerics.DOUBLE_ROUND, out_dtype=out.dtype,
                       output_unsigned=bool(a.get("output_unsigned")))


def run(ctx) -> None:
    block = ctx.block
    producers, consumers = block.producers(), block.consumers()
    replaced: set[int] = set()
    new_ops: list[Operator] = []
    for op in block.operators:
        if id(op) in replaced:
            continue
        if op.op == "CONV2D":
            matched = _match_conv(block, op, producers, consumers)
            if isinstance(matched, tuple):
                conv, ops = matched
                replaced.update(id(o) for o in ops)
                new_ops.append(Operator(NPU_CONV2D, [conv.ifm], [conv.ofm], attrs={"npu": conv},
                                        location=op.location))
                continue
            ctx.host_reasons[id(op)] = matched
        elif op.op not in DATA_OPS:
            ctx.host_reasons[id(op)] = "no NPU unit implements this op yet"
        new_ops.append(op)
    block.operators = _drop_dead_constants(block, new_ops)
    used = {n for op in block.operators for n in op.inputs + op.outputs} | set(block.inputs) | set(block.outputs)
    block.tensors = {k: t for k, t in block.tensors.items() if k in used or t.is_variable}


def _drop_dead_constants(block: Block, ops: list[Operator]) -> list[Operator]:
    live = set(block.outputs)
    kept: list[Operator] = []
    for op in reversed(ops):
        if op.op in DATA_OPS and not any(o in live for o in op.outputs):
            continue
        kept.append(op)
        live.update(op.inputs)
    return kept[::-1]
