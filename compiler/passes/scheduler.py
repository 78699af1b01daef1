"""Pass 5 — scheduling and allocation.

Reads: the lowered, tiled graph; ctx.cfg.
Writes: ctx.schedule (a Schedule): the execution order (the block's order, which TOSA keeps
topological), the constants image (each NPU operation's blobs, constant operands of host ops, the
homes of variables kept in external memory: their records in ctx.variables get `home`),
the placement of every other tensor in external memory, and per NPU operation the SRAM buffers
its tiles use.

External memory: [constants image | graph inputs | graph outputs | intermediate tensors], each
64-byte aligned; a RESHAPE's output on its input's bytes, a gathered CONCAT's inputs on their parts
of its output. SRAMs: an operation whose plan asks for two buffers gets each SRAM it uses split
in two halves; tile k+1's loads then go to the other half from what tile k reads, so the transfers
can overlap with the computation (double buffering).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from compiler.errors import CompileError
from compiler.npu.base import NPU_OP
from firmware_model.arch.isa import Sram
from firmware_model.arch.config import LUT_ENTRY_BYTES, NpuConfig
from firmware_model.arch.cycle_model import sram_word_bytes
from firmware_model.arch.program import Placement

ALIGN = 64


def align(n: int, a: int = ALIGN) -> int:
    return -(-n // a) * a


@dataclass
class ConstImage:
    """The constants image under construction: blobs at aligned offsets from its base. A blob
    nothing writes is stored once however many operations add it (a recurrent network's cells
    share their weights and records): the emitter then sees one external address for them, and
    loads the blob again only when its SRAM copy is gone (CommandWriter's resident loads).
    `writable` spans (variable homes) are never shared."""
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    offsets: dict[bytes, int] = field(default_factory=dict)
    writable: list[tuple[int, int]] = field(default_factory=list)
    shared: set[int] = field(default_factory=set)       # offsets of the blobs added more than once

    def add(self, data: bytes, writable: bool = False) -> int:
        data = bytes(data)
        if not writable and data in self.offsets:
            self.shared.add(self.offsets[data])
            return self.offsets[data]
        off = align(self.size)
        if off > self.size:
            self.chunks.append(bytes(off - self.size))
        self.chunks.append(data)
        self.size = off + len(data)
        if writable:
            self.writable.append((off, off + len(data)))
        else:
            self.offsets[data] = off
        return off

    def bytes(self) -> bytes:
        return b"".join(self.chunks)


@dataclass
class OpSchedule:
    constants: dict[str, int]          # blob name -> external address
    buffers: dict[Sram, list[int]]     # SRAM -> buffer base addresses (PARAM: record index)

    def __str__(self) -> str:
        return f"{len(self.constants)} constant blob(s); " + ", ".join(
            f"{s.name.lower()} {len(b)}x" for s, b in self.buffers.items())


@dataclass
class Schedule:
    constants_addr: int
    constants: ConstImage
    placements: dict[str, Placement]
    ext_used: int
    ops: dict[int, OpSchedule] = field(default_factory=dict)     # id(op) -> its schedule


def sram_buffers(cfg: NpuConfig, sram: Sram, count: int) -> list[int]:
    if sram == Sram.PARAM:
        size, unit = cfg.param_records, 1
    else:
        size = {Sram.INPUT: cfg.input_sram, Sram.WEIGHT: cfg.weight_sram, Sram.OUTPUT: cfg.output_sram,
                Sram.VARIABLE: cfg.variable_sram, Sram.LUT: cfg.lut_entries}[sram]
        # a buffer starts on a DMA word (for the LUT SRAM, counted in entries)
        unit = sram_word_bytes(cfg, Sram.LUT) // LUT_ENTRY_BYTES if sram == Sram.LUT else cfg.word_bytes
    part = (size // count) // unit * unit
    return [k * part for k in range(count)]


def run(ctx) -> None:
    cfg: NpuConfig = ctx.cfg
    block = ctx.block
    image = ConstImage()
    blob_offsets: dict[int, dict[str, int]] = {}
    const_offsets: dict[str, int] = {}
    for op in block.operators:
        if op.op == NPU_OP:
            plan = op.annotations["plan"]
            blobs = op.attrs["npu"].constants(cfg, plan)
            blob_offsets[id(op)] = {name: image.add(data) for name, data in blobs.items()}
        elif op.op not in ("CONST", "CONST_SHAPE"):
            for name in op.inputs:
                t = block.tensors.get(name)
                if t is not None and t.data is not None and name not in const_offsets and not t.is_variable:
                    data = np.ascontiguousarray(t.data, dtype=t.dtype.storage.newbyteorder("<"))
                    const_offsets[name] = image.add(data.tobytes())
    # A variable kept in external memory has its home in the image: its initial value (or zeros)
    # from program load, then whatever the invocations write there (state legalization).
    homes: dict[str, int] = {}
    for record in getattr(ctx, "variables", None) or []:
        if record.get("placement") == "external":
            t = block.tensors.get(record["tensor"])
            data = (np.ascontiguousarray(t.data, dtype=t.dtype.storage.newbyteorder("<")).tobytes()
                    if t is not None and t.data is not None else bytes(record["bytes"]))
            homes[record["name"]] = image.add(data, writable=True)
    # A graph output that is a constant (a CONST, or an op folded into one) is read from the image.
    producers = block.producers()
    for name in block.outputs:
        t = block.tensors.get(name)
        op = producers.get(name)
        if (t is not None and t.data is not None and name not in const_offsets and op is not None
                and op.op in ("CONST", "CONST_SHAPE")):
            data = np.ascontiguousarray(t.data, dtype=t.dtype.storage.newbyteorder("<"))
            const_offsets[name] = image.add(data.tobytes())

    constants_addr = 0
    for record in getattr(ctx, "variables", None) or []:
        if record["name"] in homes:
            record["home"] = constants_addr + homes[record["name"]]
    placements: dict[str, Placement] = {}
    for name, off in const_offsets.items():
        t = block.tensors[name]
        placements[name] = Placement(name, constants_addr + off, list(t.shape), t.dtype)
    cursor = align(constants_addr + image.size)
    order = list(block.inputs) + [o for o in block.outputs if o not in block.inputs]
    for op in block.operators:
        if op.op not in ("CONST", "CONST_SHAPE"):
            order += [o for o in op.outputs if o not in order]
    # RESHAPE outputs alias their input's bytes (NpuOperation.aliases); in op order, so chains resolve.
    aliases = {out: src for op in block.operators if op.op == NPU_OP
               for out, src in op.attrs["npu"].aliases.items()}
    # the inputs of a CONCAT gathered in place (compiler/passes/concat_placement.py) go on their
    # byte range of its output, once that has its place
    inside = {name: where for op in block.operators if op.op == NPU_OP
              for name, where in op.attrs["npu"].placed_inside.items()}
    for name in order:
        if name in placements or name in aliases or name in inside:
            continue
        t = block.tensor(name)
        p = Placement(name, cursor, list(t.shape), t.dtype)
        placements[name] = p
        cursor = align(cursor + max(p.nbytes, 1))

    def place_inside(name: str) -> None:
        out, offset = inside[name]
        if out not in placements:
            place_inside(out)            # a gathered output gathered in turn
        t = block.tensor(name)
        placements[name] = Placement(name, placements[out].addr + offset, list(t.shape), t.dtype)
    for name in inside:
        if name not in placements:
            place_inside(name)
    for name, src in aliases.items():
        if src not in placements:
            raise CompileError(f"{ctx.graph.source}: '{name}' aliases '{src}', which has no place in external memory")
        t = block.tensor(name)
        placements[name] = Placement(name, placements[src].addr, list(t.shape), t.dtype)
    if cursor > cfg.ext_size:
        largest = sorted(((p.nbytes, n) for n, p in placements.items() if n not in const_offsets), reverse=True)[:3]
        raise CompileError(f"{ctx.graph.source}: the graph needs {cursor} bytes of external memory "
                           f"(constants {image.size} B plus tensors, the largest "
                           f"{', '.join(f'{n!r} {b} B' for b, n in largest)}); the '{cfg.name}' configuration has "
                           f"{cfg.ext_size} B (external.size)")
    schedule = Schedule(constants_addr, image, placements, cursor)
    for op in block.operators:
        if op.op == NPU_OP:
            plan = op.annotations["plan"]
            # (a cascade's consumer: its output buffers below the region, compiler/passes/cascading.py)
            op_cfg = cfg if plan.output_limit is None else replace(cfg, output_sram=plan.output_limit)
            sched = OpSchedule({k: constants_addr + v for k, v in blob_offsets[id(op)].items()},
                               {s: sram_buffers(op_cfg, s, plan.buffers) for s in plan.srams})
            schedule.ops[id(op)] = sched
            op.annotations["schedule"] = str(sched)
    ctx.schedule = schedule
    ctx.report.append(f"memory: constants {image.size} B, tensors {cursor - align(image.size)} B, "
                      f"external memory used {cursor} of {cfg.ext_size} B")
