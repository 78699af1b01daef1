"""Pass — ramp-down (after cascading): a convolution's last spatial block split in two by rows, so
that the operation after it loads its first input while the lower half computes.

Reads: the NPU operations in ctx.block with their plans (op.annotations["plan"]) and cascades,
ctx.cfg.
Writes: the plan of each convolution it splits (its last spatial block's tiles: all channel
blocks of the upper half, then those of the lower half: conv.split_block, as the tile planner's
first-block ramp), a line per split in ctx.report.

The prefetch link (compiler/npu/prefetch.py) issues the next operation's first loads under this
operation's last compute command when they read no external byte that this operation's last
store still writes. A spatial-outer plan's last block is a band of columns over every row, or the
last rows; the next operation's first tile reads the top rows of the result, so it waits for the
whole band's store and then for its own input before its first command. With the band split by
rows, the last store writes the lower half only, the upper half's store was pushed before, and
the first input comes under the lower half's MACs.

Taken for a convolution (spatial-outer, two buffers, more than one spatial block, a last block of
at least two rows) whose result is stored and which the next operation (past aliases) reads from
external memory: a convolution without an input cascade or an elementwise operation reading the
result whole as an operand (neither from the output SRAM), whose first tile's bytes of the result
reach into the last block but not into its lower half (else the link needs no split, or the split
does not free it). The extra tile costs its commands and its MAC's fixed clocks.

Measured on the timing model (with the link's input box free to take another input buffer than
its weights, compiler/npu/prefetch.py): blazeface `default` 716,216 -> 708,192 (-1.1%), `large`
229,635 -> 228,620 (layer_211 49.5% -> 50.2% of the MACs: the stem's last band), resnet_pool
27,491 -> 27,021 / 8,338 -> 8,019 / 5,699 -> 5,631 on tiny / default / large, cnn32 and
shared/cnn32 `tiny` -0.8% and -0.9%; nothing slower. A gate on the next operation's first load
(at least N clocks of transfer) only took gains away: at 512 clocks resnet_pool lost all of its.
Split for every spatial-outer plan regardless of what follows (in the tile planner), blazeface
`tiny` was 1.1% and cnn32 `large` 1.4% slower.
"""

from __future__ import annotations

from compiler.npu.base import NPU_OP
from compiler.npu.conv import NpuConv, split_block
from compiler.npu.eltwise import NpuEltwise


def _next_op(ops: list, i: int):
    """The operation after ops[i] that runs commands, past aliases (RESHAPEs) and gathered
    CONCATs: no command."""
    for op in ops[i + 1:]:
        if op.op != NPU_OP:
            return None
        if op.attrs["npu"].kind != "alias":
            return op
    return None


def _first_read_end(op, result: str, shape: tuple, cfg) -> int | None:
    """The end (exclusive), in elements of the result, of what the first tile of `op` reads of it
    from external memory; None when it does not read it that way (on chip, through a view, or not
    at all)."""
    npu, plan = op.attrs["npu"], op.annotations["plan"]
    _, H, W, C = shape
    if isinstance(npu, NpuConv):
        if (npu.ifm != result or npu.cascade_in is not None or npu.upsample != (1, 1)
                or npu.unfolded(cfg) is not None or tuple(npu.in_shape) != tuple(shape)):
            return None
        t = plan.tiles[0]
        g = npu.geometry(cfg, t.th, t.tw, t.tc)
        iy0, ix0 = npu._box_origin(t)
        y1, x1 = min(H, iy0 + g.in_h), min(W, ix0 + g.in_w)
        if y1 <= 0 or x1 <= 0:
            return 0
        return ((y1 - 1) * W + x1) * C
    if isinstance(npu, NpuEltwise):
        if npu.a_cascade is not None or npu.pix:
            return None
        dense = [x for x in (npu.a, npu.b) if x is not None and x.tensor == result]
        if not dense or any(x.const is not None or x.strides is not None or x.pad is not None or x.offset
                            or tuple(x.shape) != tuple(shape) or tuple(npu.out_shape) != tuple(shape)
                            for x in dense):
            return None
        t = plan.tiles[0]
        return t.start + t.count
    return None


def run(ctx) -> None:
    cfg = ctx.cfg
    ops = [op for op in ctx.block.operators if op.op not in ("CONST", "CONST_SHAPE")]
    for i, op in enumerate(ops):
        if op.op != NPU_OP or not isinstance(op.attrs["npu"], NpuConv):
            continue
        npu, plan = op.attrs["npu"], op.annotations["plan"]
        if plan.order != "spatial-outer" or plan.buffers < 2:
            continue
        if npu.cascade_out is not None and not npu.cascade_out.store:
            continue
        spatial = list(dict.fromkeys((t.n, t.y0, t.x0) for t in plan.tiles))
        last = [t for t in plan.tiles if (t.n, t.y0, t.x0) == spatial[-1]]
        if len(spatial) < 2 or last[0].th < 2:
            continue
        nxt = _next_op(ops, i)
        if nxt is None:
            continue
        shape = tuple(npu.out_shape)
        end = _first_read_end(nxt, npu.ofm, shape, cfg)
        _, H, W, C = shape
        t = last[0]
        block_first = (t.y0 * W + t.x0) * C
        lower_first = ((t.y0 + t.th // 2) * W + t.x0) * C
        # the first read must wait for the last block's store, but not for its lower half's
        if end is None or not block_first < end <= lower_first:
            continue
        upper, lower, rest = split_block(plan.tiles, spatial[-1])
        plan.tiles = rest + upper + lower
        ctx.report.append(f"  ramp-down: {npu.ofm}'s last block ({t.describe()}) split by rows for "
                          f"{', '.join(nxt.attrs['npu'].ofm_names)}")
