"""Pass — concat placement (after lowering): an outer-axis CONCAT gathered in place.

Reads: the NPU operations in ctx.block (lowering's NpuDataMove for each CONCAT, NpuAlias for each
RESHAPE), the graph's inputs and outputs.
Writes: the CONCATs it gathers: their NpuDataMove replaced by an NpuGather (no command), whose
inputs the scheduler then places on their byte ranges of the output; a line per CONCAT in
ctx.report.

Tensors in external memory are dense and row-major, so a CONCAT along an axis with only 1s before
it in the output's shape (blazeface's anchors: 1x512x16 and 1x384x16 into 1x896x16) makes each
input one contiguous byte range of the output. Placed there, the operation producing each input
stores straight into the output, and the CONCAT's copy (a load and a store of every byte through
the output SRAM) goes. An input is placed so when it is written by an NPU operation of this block
that computes or moves data (through RESHAPEs, which are its bytes too: the placement goes to the
tensor the RESHAPEs start from), appears once, is no graph input or output, is read as a whole
(every piece of it in the CONCAT) and not already placed inside another CONCAT; a CONCAT whose
inputs cannot all be placed keeps its copy. The passes that look past operations without commands
(cascading, ramp-down, the emitter's prefetch link) pass over a gathered one as over a RESHAPE.

Measured on the timing model (blazeface's two anchor concatenations; its output's concatenation
along the channels keeps its copy): 2,487,964 -> 2,480,476 / 703,451 -> 699,768 / 224,049 ->
222,254 cycles on tiny / default / large (-0.30% / -0.52% / -0.80%); no other network has one.
"""

from __future__ import annotations

import numpy as np

from compiler.npu.base import NPU_OP
from compiler.npu.data_movement import NpuAlias, NpuDataMove, NpuGather
from compiler.npu.dma_patterns import dense_strides

# the kinds that write their result through their own stores
WRITERS = ("conv", "eltwise", "matmul", "pool", "move")


def _contiguous_at(lo: tuple, sizes: tuple, space: tuple) -> int | None:
    """The element offset of the box [lo, lo + sizes) in the row-major `space`, when the box is
    one contiguous run of it (1s before some dim, whole dims after it); else None."""
    k = next((d for d, n in enumerate(sizes) if n != 1), len(sizes) - 1)
    if any(lo[d] or sizes[d] != space[d] for d in range(k + 1, len(space))):
        return None
    return sum(a * s for a, s in zip(lo, dense_strides(space)))


def run(ctx) -> None:
    block = ctx.block
    producers = block.producers()
    roots: dict[str, str] = {}           # RESHAPE output -> the tensor whose bytes it is
    for op in block.operators:
        if op.op == NPU_OP and isinstance(op.attrs["npu"], NpuAlias):
            npu = op.attrs["npu"]
            roots[npu.out] = roots.get(npu.src, npu.src)
    outside = set(block.inputs) | set(block.outputs)
    placed: set[str] = set()
    for op in block.operators:
        npu = op.attrs.get("npu") if op.op == NPU_OP else None
        if not isinstance(npu, NpuDataMove) or npu.op_name != "CONCAT":
            continue
        esize = npu.dtype.size_bytes
        parts: dict[str, int] = {}
        for piece in npu.pieces:
            src = piece.source
            at = _contiguous_at(piece.lo, piece.sizes, npu.space)
            if src is None or src.tensor is None or src.offset or at is None:
                break
            root = roots.get(src.tensor, src.tensor)
            writer = producers.get(root)
            if (root in parts or root in placed or root in outside or writer is None or writer.op != NPU_OP
                    or writer.attrs["npu"].kind not in WRITERS
                    or block.tensor(root).num_elements != int(np.prod(piece.sizes))):
                break
            parts[root] = at * esize
        else:
            if parts:
                placed.update(parts)
                op.attrs["npu"] = NpuGather(npu.out, parts, npu.sources)
                ctx.report.append(f"  concat placement: {npu.out} gathers {', '.join(parts)} in place")
