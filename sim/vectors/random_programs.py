"""Constrained-random programs for the core: random tiles of every unit, wrapped in real programs.

A tile of the unit vectors (a MAC tile of sim/vectors/random_tiles.py, an ELTWISE or POOL command
of sim/vectors/eltwise.py and pool.py) comes with the SRAM contents it reads. `tile_program`
turns a list of them into a compiled-program look-alike the core runs by itself: per tile, MARK,
DMA_LOADs of its SRAM regions from the constants image (external memory), a FILL of its output
range, its registers and command, and a DMA_STORE of the output range to external memory; END.
So every random tile also exercises the DMA engine, FILL, the command processor and the shared
output stage. The golden model runs the same program (sim/cosim/program_run.py) for the
expectations; nothing here computes an expected value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.npu.base import CommandWriter
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import Opcode, Reg, Sram
from firmware_model.arch.program import Placement, Program
from firmware_model.arch.registers import Registers
from firmware_model.tosa_ops.dtypes import DType

ALIGN = 64


@dataclass
class TileSpec:
    opcode: Opcode
    sub: int
    regs: dict[int, int]
    loads: dict[Sram, tuple[np.ndarray, tuple[int, int]]]   # SRAM -> (its image, byte range to load)
    output: tuple[int, int]                                 # output SRAM bytes the tile may write
    fill: int = 0xA5                                        # the output range's bytes before the tile


def tile_program(cfg: NpuConfig, tiles: list[TileSpec], *, name: str = "random tiles") -> Program:
    consts = bytearray()

    def place(data: bytes) -> int:
        while len(consts) % ALIGN:
            consts.append(0)
        addr = len(consts)
        consts.extend(data)
        return addr

    w = CommandWriter()
    records = []
    out_places = []
    sources = {}
    for k, t in enumerate(tiles):
        for sram, (image, (a, b)) in t.loads.items():
            if b > a:
                sources[(k, sram)] = place(bytes(np.asarray(image, np.uint8)[a:b]))
    out_base = -(-len(consts) // ALIGN) * ALIGN
    cursor = out_base
    for k, t in enumerate(tiles):
        start = len(w.commands)
        w.emit(Opcode.MARK, 0, k)
        for sram, (image, (a, b)) in t.loads.items():
            if b > a:
                w.dma(Opcode.DMA_LOAD, sram, ext=sources[(k, sram)], sram_addr=a, len0=b - a)
        a, b = t.output
        if b > a:
            w.dma(Opcode.FILL, Sram.OUTPUT, sram_addr=a, len0=b - a, value=t.fill)
        view = Registers(t.regs)
        for reg in sorted(t.regs):
            w.set(Reg(reg), view[reg])
        unit_command = w.emit(t.opcode, t.sub)
        if b > a:
            w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=cursor, sram_addr=a, len0=b - a)
            out_places.append(Placement(f"tile{k}_output", cursor, [b - a], DType.INT8))
            cursor = -(-(cursor + b - a) // ALIGN) * ALIGN
        records.append({"id": k, "layer": 0, "unit": t.opcode.name, "commands": [start, len(w.commands)],
                        "unit_command": unit_command, "output": f"tile{k}_output"})
    w.emit(Opcode.END)
    manifest = {
        "config": cfg.to_dict(), "source": name,
        "memory": {"constants": {"addr": 0, "size": len(consts)}, "ext_used": cursor},
        "graph": {"inputs": [], "outputs": [p.to_json() for p in out_places]},
        "variables": [], "host_ops": [],
        "layers": [{"index": 0, "kind": "npu", "unit": "mixed", "name": name, "op": name, "sources": [],
                    "macs": 0, "tiles": records}],
        "stats": {"commands": len(w.commands), "tiles": len(tiles), "npu_macs": 0, "host_macs": 0},
    }
    if cursor > cfg.ext_size:
        raise ValueError(f"{len(tiles)} random tiles need {cursor} bytes of external memory")
    return Program(w.commands, bytes(consts), manifest)


def mac_tiles(cfg: NpuConfig, rng, n: int, ifm_dtype: DType = DType.INT8) -> list[TileSpec]:
    """Random MAC tiles (sim/vectors/random_tiles.py): operands and records loaded, every register."""
    from sim.vectors.random_tiles import random_tile

    out = []
    for k in range(n):
        t = random_tile(cfg, rng, k, ifm_dtype)
        loads = {sram: (image, rng_) for sram, (image, rng_) in t["images"].items()}
        out.append(TileSpec(Opcode.MAC, t["mode"], t["regs"], loads, t["output_range"],
                            fill=int(rng.integers(0, 256))))
    return out


def _whole(mem, srams) -> dict:
    return {s: (mem.sram[s].copy(), (0, len(mem.sram[s]))) for s in srams}


def eltwise_tiles(rng, n: int) -> tuple[NpuConfig, list[TileSpec]]:
    """Random ELTWISE commands of the elementwise unit's vectors (the default configuration),
    with the LUT tables they may use."""
    from firmware_model.golden.memories import Memories
    from sim.vectors import eltwise as ev
    from sim.vectors.output_stage import table_run

    mem = Memories(ev.NPU)
    table_run(rng, mem, "tables")
    out = []
    for k in range(n):
        c = ev.random_command(rng, mem, f"program {k}")
        osize = c.out.ofm_dtype.size_bytes
        regs = dict(c.regs)
        out.append(TileSpec(Opcode.ELTWISE, int(c.op), regs,
                            _whole(mem, (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.LUT)),
                            (int(regs[Reg.ELT_OUT_ADDR]), int(regs[Reg.ELT_OUT_ADDR]) + c.count * osize),
                            fill=int(rng.integers(0, 256))))
    return ev.NPU, out


def pool_tiles(rng, n: int) -> tuple[NpuConfig, list[TileSpec]]:
    """Random POOL commands of the pooling unit's vectors (the default configuration)."""
    from firmware_model.golden.memories import Memories
    from sim.vectors import pool as pv
    from sim.vectors.output_stage import table_run

    mem = Memories(pv.NPU)
    table_run(rng, mem, "tables")
    out = []
    for k in range(n):
        c = pv.random_command(rng, mem, f"program {k}")
        r = Registers(c.regs)
        size = DType(r.ofm_dtype).size_bytes
        end = r.ofm_addr + (r.ofm_h - 1) * r.ofm_row_stride + (r.ofm_w - 1) * r.ofm_pix_stride + r.ofm_c * size
        out.append(TileSpec(Opcode.POOL, int(c.mode), dict(c.regs),
                            _whole(mem, (Sram.INPUT, Sram.PARAM, Sram.LUT)), (r.ofm_addr, end),
                            fill=int(rng.integers(0, 256))))
    return pv.NPU, out
