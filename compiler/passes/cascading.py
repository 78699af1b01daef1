"""Pass — cascading (after tiling): a result kept in the output SRAM for the operations after it.

Reads: the NPU operations in ctx.block with their plans (op.annotations["plan"]), ctx.cfg.
Writes: `cascade_out` on a producer and `cascade_in` (a 1x1 or depthwise convolution) or
`a_cascade` (an elementwise operation) on each of its consumers (the same `Cascade`), each consumer's plan and
those of the data movements and pooling operations between made again with the output SRAM below
the region (TilePlan.output_limit), and a line per cascade in ctx.report.

Into 1x1 convolutions: a producer is a convolution (CONV2D or DEPTHWISE_CONV2D, batch 1, int8
result, not width unfolded) or an elementwise operation (int8 result of shape 1xHxWxC with C a
whole number of words, whose dense bytes are then the MAC's input layout, or computed in the padded
layout below). Its consumers are the 1x1 CONV2Ds with stride 1 and no padding over that result,
int8, that follow it (RESHAPEs, which are aliases without commands, and data movements may stand
between; a consumer may read the result through such a RESHAPE, as mlp's fully connected layers
do): a consumer's input box is then exactly its output box, a sub-box of the result. The producer's
tiles write the whole result into a region at the top of the output SRAM, laid out as the MAC reads
an input (pixel stride a whole number of words, channel c at byte c); each consumer reads it there
(IFM_SRAM OUTPUT, docs/isa.md) instead of loading it back from external memory, and is planned
again knowing that its input is on chip and that its own buffers stay below the region.

Into depthwise convolutions too, in a window mode (DEPTHWISE, _PAIRED, _TRIPLE, _PACKED), any
stride and padding: a tile reads the word of its channels in each pixel of its box straight from
the region, the box's padding read as IFM_ZP (IFM_PAD_TOP .. IFM_IN_W), so the box may start above
and left of the region and end below and right of it: the region keeps `before` and `after` bytes
(the padding rows and columns) free of every other buffer. A depthwise consumer may be a producer
in turn; a 1x1 convolution consumer is not (these do not chain). A producer that reads a region
itself (a depthwise one's input, an elementwise one's A) puts its own above that region's end when
it fits there, else below its floor (Cascade.floor). blazeface's residual ADDs feed the next
block's depthwise layer this way, which then feeds its pointwise layer.

Into an elementwise operation: a convolution (a 1x1 consumer or not) whose result the next
ELTWISE reads whole as its A (or as a commutative operation's B, the two then trading places)
writes it into a region below any region it reads itself; aliases, data movements and pooling
operations may run between. Every ELTWISE tile reads its A there (A_FROM_OUTPUT). With C a whole
number of words the region is dense; otherwise it is in the padded layout (pixels C rounded up to
a word apart, as the MAC writes its own buffers), and the ELTWISE computes in that layout
(NpuEltwise.pix, where padded_layout_ok allows), so that its own result is the MAC's input layout
too. An elementwise producer of the first kind that reads its A this way puts its own region apart
from that one.

A producer still stores its result when something else reads it (a skip connection, a graph
output, a depthwise convolution); when only its consumers do, the round trip through external
memory goes entirely. The regions a producer reads and writes take at most three quarters of the
output SRAM (region_limit).
"""

from __future__ import annotations

from dataclasses import replace

from compiler.errors import TileFitError
from compiler.npu.base import NPU_OP
from compiler.npu.conv import Cascade, NpuConv
from compiler.npu.data_movement import NpuAlias, NpuDataMove
from compiler.npu.eltwise import NpuEltwise
from compiler.npu.pool import NpuPool
from firmware_model.arch.isa import EltOp
from firmware_model.tosa_ops.dtypes import DType


def region_limit(cfg) -> int:
    """Bytes of the output SRAM the regions may take: three quarters, so that a consumer keeps at
    least a quarter for its own buffers. Measured against half on the timing model: blazeface on
    default 965,350 -> 956,181 cycles (its 16x16 pointwise results feed the ADDs there too),
    every other network and configuration the same; the whole SRAM (only "the consumer fits
    below") 951,324."""
    return cfg.output_sram * 3 // 4


def _producer(npu, cfg) -> bool:
    # An elementwise result of C not a whole number of words is the MAC's input layout only when the
    # operation computes in the padded layout, which it does when its A is such a convolution's
    # result (_to_eltwise). Padding the others for their depthwise consumer was measured on large:
    # blazeface's 64x64x24 ADD loading both operands 24 bytes a 32-byte pixel took 5,120 clocks
    # more, its stride-2 depthwise layer 7,528 fewer, but the region it took cost the cascade into
    # the next ADD (+4,924 there): 229,635 -> 232,173 cycles.
    if isinstance(npu, NpuEltwise):
        shape = tuple(npu.out_shape)
        return (len(shape) == 4 and shape[0] == 1 and npu.out_dtype == DType.INT8 and npu.cascade_out is None
                and (shape[3] % cfg.word_bytes == 0 or npu.pix))
    # a depthwise consumer of a cascade may be a producer too (its region apart from the one it
    # reads); a 1x1 consumer is not
    return (isinstance(npu, NpuConv) and npu.out_shape[0] == 1 and npu.out_dtype == DType.INT8
            and npu.unfolded(cfg) is None and (npu.cascade_in is None or npu.depthwise))


def _result(npu) -> tuple[str, tuple]:
    if isinstance(npu, NpuEltwise):
        return npu.out, tuple(npu.out_shape)
    return npu.ofm, tuple(npu.out_shape)


def _consumer(npu, result: str, shape: tuple, cfg) -> bool:
    """A 1x1 CONV2D (stride 1, no padding) or a depthwise convolution in a window mode (its
    padding read as IFM_ZP, its tiles' channels a word of each pixel, the last word's channels
    past C read into rows whose results it does not write) over the int8 result as it is."""
    if not (isinstance(npu, NpuConv) and npu.upsample == (1, 1) and npu.ifm_dtype == DType.INT8
            and npu.ifm == result and tuple(npu.in_shape) == shape):
        return False
    if npu.depthwise:
        return bool(npu.window_mode(cfg))
    return npu.kernel == (1, 1) and npu.stride == (1, 1) and not any(npu.pad)


def _margins(npu, row: int, pix: int) -> tuple[int, int]:
    """Bytes a consumer's input boxes reach below the region and past its end: a depthwise
    convolution's padding above / left and below / right (read as IFM_ZP, never written)."""
    if not npu.depthwise:
        return 0, 0
    pt, pb, pl, pr = npu.pad
    return pt * row + pl * pix, pb * row + pr * pix


def _alias_of(op, names: set) -> bool:
    """Whether `op` is an alias (a RESHAPE, no command) whose output is one of `names`: its readers
    are then those of that name."""
    return op.op == NPU_OP and isinstance(op.attrs["npu"], NpuAlias) and op.attrs["npu"].out in names


def _next_npu(ops: list, i: int) -> tuple:
    """The operation after ops[i] that runs commands, past aliases and gathered CONCATs (no
    command), data movements and pooling (which touch only their own buffers, and are planned
    again below a region):
    (that operation or None, the data movements and pooling operations passed)."""
    passed = []
    for op in ops[i + 1:]:
        if op.op != NPU_OP:
            return None, passed
        npu = op.attrs["npu"]
        if npu.kind == "alias":             # no command (a RESHAPE, a gathered CONCAT)
            continue
        if isinstance(npu, (NpuDataMove, NpuPool)):
            passed.append(op)
            continue
        return op, passed
    return None, passed


def _below(ctx, passed: list, limit: int) -> bool:
    """Plan the operations `passed` again with their buffers below `limit` (False if one does not
    fit there; then none is changed)."""
    plans = []
    for op in passed:
        npu = op.attrs["npu"]
        try:
            where = f"{ctx.graph.source}: op {', '.join(npu.sources)}"
            plans.append(npu.plan(replace(ctx.cfg, output_sram=limit), where))
        except TileFitError:
            return False
    for op, plan in zip(passed, plans):
        plan.output_limit = limit
        op.annotations["plan"] = plan
    return True


# operations whose operands may trade places (the unit's A and B input stages are alike)
COMMUTATIVE = (EltOp.ADD, EltOp.MUL, EltOp.MINIMUM, EltOp.MAXIMUM)


def _eltwise_consumer(npu, producer: NpuConv) -> bool:
    """An elementwise operation whose A is the convolution's whole result as it is (dense, the
    result's shape, no broadcast): A_FROM_OUTPUT can read every tile's A from the region."""
    a = npu.a if isinstance(npu, NpuEltwise) else None
    return (a is not None and a.tensor == producer.ofm and a.const is None and a.strides is None and a.offset == 0
            and a.dtype == producer.out_dtype and tuple(a.shape) == tuple(producer.out_shape)
            and tuple(npu.out_shape) == tuple(producer.out_shape))


def _to_eltwise(ctx, ops: list, i: int, kept: set, consumers: dict) -> bool:
    """A convolution's result kept, dense, in the output SRAM for the elementwise operation right
    after it (its A; a commutative operation's B trades places with A): below the region the
    convolution reads its own input from, if any. True when taken."""
    cfg = ctx.cfg
    producer = ops[i].attrs["npu"]
    e_op, passed = _next_npu(ops, i)
    if (not isinstance(producer, NpuConv) or producer.cascade_out is not None or producer.out_shape[0] != 1
            or producer.out_dtype != DType.INT8 or producer.unfolded(cfg) is not None or e_op is None
            or not isinstance(e_op.attrs["npu"], NpuEltwise)):
        return False
    consumer = e_op.attrs["npu"]
    if not _eltwise_consumer(consumer, producer):
        if consumer.op not in COMMUTATIVE or consumer.b is None:
            return False
        # A + B = B + A: the result as B becomes A, the only operand A_FROM_OUTPUT reads
        consumer = replace(consumer, a=consumer.b, b=consumer.a)
        if not _eltwise_consumer(consumer, producer):
            return False
    _, H, W, C = producer.out_shape
    pix = C
    if C % cfg.word_bytes:
        # Dense pixels of C bytes would not start at word boundaries: a channel block of a pixel
        # would touch two output words where a tile's own buffer takes one, and the MAC would wait
        # for its output engine (measured on large: blazeface's 56- and 72-channel pointwise
        # layers fell below 80% MAC utilisation). So the convolution writes its own layout, pixels
        # a whole number of words apart, and the ELTWISE computes in it (NpuEltwise.pix).
        if not consumer.padded_layout_ok(cfg):
            return False
        pix = consumer.padded_pix(cfg)
        consumer = replace(consumer, pix=pix)
    size = H * W * pix
    top, used = cfg.output_sram, 0
    if producer.cascade_in is not None:          # the region it reads stays above
        top, used = producer.cascade_in.floor, cfg.output_sram - producer.cascade_in.floor
    limit = (top - size) // cfg.word_bytes * cfg.word_bytes
    if used + (top - limit) > region_limit(cfg):
        return False
    try:
        where = f"{ctx.graph.source}: op {', '.join(consumer.sources)}"
        plan = consumer.plan(replace(cfg, output_sram=limit), where)
    except TileFitError:
        return False
    if not _below(ctx, passed, limit):
        return False
    store = producer.ofm in kept or any(op is not e_op for op in consumers.get(producer.ofm, []))
    cascade = Cascade(addr=limit, pix=pix, row=W * pix, store=store)
    producer.cascade_out = cascade
    consumer.a_cascade = cascade
    e_op.attrs["npu"] = consumer
    plan.output_limit = limit
    e_op.annotations["plan"] = plan
    ctx.report.append(f"  cascade: {producer.ofm} ({H}x{W}x{C}) stays in the output SRAM at {limit} for "
                      f"{consumer.out} (its A)" + ("" if store else "; not stored"))
    return True


def run(ctx) -> None:
    cfg = ctx.cfg
    block = ctx.block
    consumers = block.consumers()
    kept = set(block.outputs) | {t.name for t in block.variables()}
    ops = [op for op in block.operators if op.op not in ("CONST", "CONST_SHAPE")]
    for i, p_op in enumerate(ops):
        if p_op.op == NPU_OP and _to_eltwise(ctx, ops, i, kept, consumers):
            continue
        if p_op.op != NPU_OP or not _producer(p_op.attrs["npu"], cfg):
            continue
        producer = p_op.attrs["npu"]
        result, shape = _result(producer)
        # the consumers that follow (aliases, which run no command, and data movements, which
        # are planned again below the region, may stand between)
        c_ops, moves = [], []
        readable = {result}               # the result and the aliases (RESHAPEs) of it seen so far
        for op in ops[i + 1:]:
            if op.op != NPU_OP:
                break
            npu = op.attrs["npu"]
            if isinstance(npu, NpuAlias):
                if npu.src in readable:
                    readable.add(npu.out)
                continue
            if npu.kind == "alias":               # a gathered CONCAT: its inputs' producers wrote it
                continue
            if isinstance(npu, NpuDataMove):
                moves.append((len(c_ops), op))
                continue
            if not any(_consumer(npu, name, shape, cfg) for name in readable):
                break
            c_ops.append(op)
        if not c_ops:
            continue
        _, H, W, C = shape
        word = cfg.word_bytes
        pix = -(-C // word) * word       # the MAC's input layout (NpuConv.geometry)
        size = H * W * pix
        before = after = 0
        for c_op in c_ops:
            b, a = _margins(c_op.attrs["npu"], W * pix, pix)
            before, after = max(before, -(-b // word) * word), max(after, a)
        top = cfg.output_sram
        # A producer reading a region itself (an elementwise one's A, a depthwise one's input)
        # while it writes this one: this one goes below it, unless it fits above.
        read, rows = ((producer.a_cascade, H) if isinstance(producer, NpuEltwise)
                      else (producer.cascade_in, producer.in_shape[1]))
        if read is not None and top - size - after < read.addr + read.row * rows + read.after:
            top = read.floor
        limit = (top - size - after) // word * word
        below = limit - before           # the consumers' own buffers stay under this
        if below < 0 or cfg.output_sram - below > region_limit(cfg):
            continue
        cascade = Cascade(addr=limit, pix=pix, row=W * pix, store=True, before=before, after=after)
        plans = []
        for c_op in c_ops:
            consumer = c_op.attrs["npu"]
            where = f"{ctx.graph.source}: op {', '.join(consumer.sources)}"
            # planned again knowing its input is on chip: no input loads to weigh against the MACs
            consumer.cascade_in = cascade
            try:
                plan = consumer.plan(replace(cfg, output_sram=below), where)
            except TileFitError:
                consumer.cascade_in = None
                break
            if consumer.depthwise and any(t.c0 * consumer.ifm_dtype.size_bytes % word for t in plan.tiles):
                consumer.cascade_in = None          # a tile's channels would start inside a word
                break
            plans.append(plan)
        c_ops = c_ops[:len(plans)]
        if not c_ops:
            continue
        # stored when anything but the cascaded consumers reads it (an alias's readers included)
        store = any(n in kept or any(all(op is not c for c in c_ops) and not _alias_of(op, readable)
                                     for op in consumers.get(n, [])) for n in readable)
        cascade = replace(cascade, store=store)
        producer.cascade_out = cascade
        for c_op, plan in zip(c_ops, plans):
            c_op.attrs["npu"].cascade_in = cascade
            plan.output_limit = below
            c_op.annotations["plan"] = plan
        # the data movements that run while the region is still to be read
        _below(ctx, [m_op for n, m_op in moves if n < len(c_ops)], below)
        names = ", ".join(c.attrs["npu"].ofm for c in c_ops)
        ctx.report.append(f"  cascade: {result} ({H}x{W}x{C}) stays in the output SRAM at {limit} for "
                          f"{names}" + ("" if cascade.store else "; not stored"))
