"""Pass — cascading (after tiling): a convolution's result kept in the output SRAM for the 1x1 convolution after it.

Reads: the NPU operations in ctx.block with their plans (op.annotations["plan"]), ctx.cfg.
Writes: NpuConv.cascade_out on a producer and NpuConv.cascade_in on its consumer (the same
`Cascade`), the consumer's plan made again with the output SRAM below the region
(TilePlan.output_limit), and a line per cascade in ctx.report.

A pair qualifies when a convolution (CONV2D or DEPTHWISE_CONV2D, batch 1, int8 result, not width
unfolded) is followed directly by a 1x1 CONV2D with stride 1 and no padding over that result, int8:
the consumer's input box is then exactly its output box, a sub-box of the producer's result. The
producer's tiles write the whole result into a region at the top of the output SRAM, laid out as
the MAC reads an input (pixel stride a whole number of words, channel c at byte c); the consumer
reads it there (IFM_SRAM OUTPUT, docs/isa.md) instead of loading it back from external memory.
The producer still stores its result when something else reads it (a skip connection, a graph
output); when only the consumer does, the round trip through external memory goes entirely. The
region takes at most half the output SRAM, and the consumer must still fit below it.
Cascades do not chain: a consumer is not also a producer.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.errors import TileFitError
from compiler.npu.base import NPU_OP
from compiler.npu.conv import Cascade, NpuConv
from firmware_model.tosa_ops.dtypes import DType


def _producer(npu, cfg) -> bool:
    return (isinstance(npu, NpuConv) and npu.out_shape[0] == 1 and npu.out_dtype == DType.INT8
            and npu.unfolded(cfg) is None and npu.cascade_in is None)


def _consumer(npu, producer: NpuConv) -> bool:
    return (isinstance(npu, NpuConv) and not npu.depthwise and npu.kernel == (1, 1) and npu.stride == (1, 1)
            and not any(npu.pad) and npu.upsample == (1, 1) and npu.ifm_dtype == DType.INT8
            and npu.ifm == producer.ofm and tuple(npu.in_shape) == tuple(producer.out_shape))


def run(ctx) -> None:
    cfg = ctx.cfg
    block = ctx.block
    consumers = block.consumers()
    kept = set(block.outputs) | {t.name for t in block.variables()}
    ops = [op for op in block.operators if op.op not in ("CONST", "CONST_SHAPE")]
    for i, (p_op, c_op) in enumerate(zip(ops, ops[1:])):
        if p_op.op != NPU_OP or c_op.op != NPU_OP:
            continue
        producer, consumer = p_op.attrs["npu"], c_op.attrs["npu"]
        if not _producer(producer, cfg) or not _consumer(consumer, producer):
            continue
        _, H, W, C = producer.out_shape
        pix = -(-C // cfg.mac_cols) * cfg.mac_cols
        size = H * W * pix
        if size > cfg.output_sram // 2:
            continue
        limit = (cfg.output_sram - size) // cfg.word_bytes * cfg.word_bytes
        where = f"{ctx.graph.source}: op {', '.join(consumer.sources)}"
        try:
            plan = consumer.plan(replace(cfg, output_sram=limit), where)
        except TileFitError:
            continue
        store = producer.ofm in kept or any(op is not c_op for op in consumers.get(producer.ofm, []))
        cascade = Cascade(addr=limit, pix=pix, row=W * pix, store=store)
        producer.cascade_out = cascade
        consumer.cascade_in = cascade
        plan.output_limit = limit
        c_op.annotations["plan"] = plan
        ctx.report.append(f"  cascade: {producer.ofm} ({H}x{W}x{C}) stays in the output SRAM at {limit} for "
                          f"{consumer.ofm}" + ("" if store else "; not stored"))
