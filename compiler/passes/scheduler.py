"""Pass 5 — scheduling and allocation.

Reads: the lowered, tiled graph; ctx.cfg.
Writes: ctx.schedule (a Schedule): the execution order (the block's order, which TOSA already
keeps topological), the constants image's contents and addresses (NPU weight blocks and
parameter records per output-channel slice, constant operands of host ops), the placement of
every other tensor in external memory, and the SRAM buffers each NPU operation's tiles use.

External memory: [constants image | graph inputs | graph outputs | intermediate tensors], each
region 64-byte aligned. SRAMs: with two buffers per SRAM (when the tile planner found a tile that
fits half of each), tile k uses buffer k % 2, so tile k+1's loads never overwrite what tile k reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import CompileError
from compiler.npu_ops import NPU_CONV2D, NpuConv
from compiler.passes.tile_planner import ceil_div
from firmware_model.mac_unit import encode_params
from firmware_model.npu_config import NpuConfig
from firmware_model.program import Placement

ALIGN = 64


def align(n: int, a: int = ALIGN) -> int:
    return -(-n // a) * a


@dataclass
class ConstImage:
    """The constants image under construction: blobs at aligned offsets from its base."""
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0

    def add(self, data: bytes) -> int:
        off = align(self.size)
        if off > self.size:
            self.chunks.append(bytes(off - self.size))
        self.chunks.append(data)
        self.size = off + len(data)
        return off

    def bytes(self) -> bytes:
        return b"".join(self.chunks)


@dataclass
class ConvSchedule:
    slice_weights: dict[int, tuple[int, int]]   # c0 -> (ext offset in constants, bytes)
    slice_params: dict[int, tuple[int, int]]
    buffers: int
    in_buf: list[int]                           # SRAM byte address of each buffer
    w_buf: list[int]
    p_buf: list[int]                            # parameter record index
    out_buf: list[int]

    def __str__(self) -> str:
        return (f"{self.buffers} buffer(s) per SRAM; {len(self.slice_weights)} weight slice(s) "
                f"{sum(b for _, b in self.slice_weights.values())} B")


@dataclass
class Schedule:
    constants_addr: int
    constants: ConstImage
    placements: dict[str, Placement]
    ext_used: int
    conv: dict[int, ConvSchedule] = field(default_factory=dict)   # id(op) -> schedule
    const_offsets: dict[str, int] = field(default_factory=dict)   # constant tensor -> offset in image


def weight_blocks(conv: NpuConv, cfg: NpuConfig, c0: int, tc: int) -> bytes:
    """Weights of output channels [c0, c0+tc) in MAC-array block order (see mac_unit.py):
    blocks (ocb, ky, kx, icb) of rows x cols, missing rows/lanes filled with the weight zero point."""
    R, L = cfg.mac_rows, cfg.mac_cols
    oc_n, kh, kw, ic = conv.weights.shape
    cb = ceil_div(ic, L)
    n_ocb = ceil_div(tc, R)
    w = np.full((n_ocb * R, kh, kw, cb * L), conv.weight_zp, dtype=np.int8)
    w[:tc, :, :, :ic] = conv.weights[c0:c0 + tc]
    blocks = w.reshape(n_ocb, R, kh, kw, cb, L).transpose(0, 2, 3, 4, 1, 5)
    return np.ascontiguousarray(blocks).tobytes()


def param_records(conv: NpuConv, c0: int, tc: int) -> bytes:
    bias = conv.bias[c0:c0 + tc]
    if conv.rescale is not None:
        mult, shift = conv.rescale.multiplier[c0:c0 + tc], conv.rescale.shift[c0:c0 + tc]
    else:
        mult, shift = np.zeros(tc, np.int64), np.zeros(tc, np.int64)
    return encode_params(bias, mult, shift)


def _buffers(total: int, count: int, unit: int) -> list[int]:
    half = (total // count) // unit * unit
    return [k * half for k in range(count)]


def run(ctx) -> None:
    cfg: NpuConfig = ctx.cfg
    block = ctx.block
    image = ConstImage()
    sched_conv: dict[int, ConvSchedule] = {}
    const_offsets: dict[str, int] = {}

    for op in block.operators:
        if op.op == NPU_CONV2D:
            conv: NpuConv = op.attrs["npu"]
            tiles = op.annotations["tiles"]
            slices = sorted({(t.c0, t.tc) for t in tiles})
            sw, sp = {}, {}
            for c0, tc in slices:
                wb = weight_blocks(conv, cfg, c0, tc)
                sw[c0] = (image.add(wb), len(wb))
                pb = param_records(conv, c0, tc)
                sp[c0] = (image.add(pb), len(pb))
            nb = op.annotations["buffers"]
            sched_conv[id(op)] = ConvSchedule(
                sw, sp, nb,
                in_buf=_buffers(cfg.input_sram, nb, cfg.word_bytes),
                w_buf=_buffers(cfg.weight_sram, nb, cfg.word_bytes),
                p_buf=_buffers(cfg.param_records, nb, 1),
                out_buf=_buffers(cfg.output_sram, nb, cfg.word_bytes))
            op.annotations["schedule"] = str(sched_conv[id(op)])
        elif op.op not in ("CONST", "CONST_SHAPE"):
            for name in op.inputs:
                t = block.tensors.get(name)
                if t is not None and t.data is not None and name not in const_offsets and not t.is_variable:
                    data = np.ascontiguousarray(t.data, dtype=t.dtype.storage.newbyteorder("<"))
                    const_offsets[name] = image.add(data.tobytes())

    constants_addr = 0
    placements: dict[str, Placement] = {}
    for name, off in const_offsets.items():
        t = block.tensors[name]
        placements[name] = Placement(name, constants_addr + off, list(t.shape), t.dtype)
    cursor = align(constants_addr + image.size)
    order = list(block.inputs) + [o for o in block.outputs if o not in block.inputs]
    for op in block.operators:
        if op.op in ("CONST", "CONST_SHAPE"):
            continue
        order += [o for o in op.outputs if o not in order]
    for name in order:
        if name in placements:
            continue
        t = block.tensor(name)
        p = Placement(name, cursor, list(t.shape), t.dtype)
        placements[name] = p
        cursor = align(cursor + max(p.nbytes, 1))
    if cursor > cfg.ext_size:
        raise CompileError(f"{ctx.graph.source}: the graph needs {cursor} bytes of external memory "
                           f"(constants {image.size} B plus tensors); the '{cfg.name}' configuration has "
                           f"{cfg.ext_size} B (external.size)")
    ctx.schedule = Schedule(constants_addr, image, placements, cursor, sched_conv, const_offsets)
    ctx.report.append(f"memory: constants {image.size} B, tensors {cursor - align(image.size)} B, "
                      f"external memory used {cursor} of {cfg.ext_size} B")

