"""Constrained-random programs for the core: random tiles of every unit, wrapped in real programs.

A tile of the unit vectors (a MAC tile of sim/vectors/random_tiles.py, an ELTWISE or POOL command
of sim/vectors/eltwise.py and pool.py) comes with the SRAM contents it reads. `tile_program`
turns a list of them into a compiled-program look-alike the core runs by itself: per tile, MARK,
DMA_LOADs of its SRAM regions from the constants image (external memory; only the bytes that
differ from what earlier tiles loaded there), a FILL of its output
range, its command (its registers were set while the tile before ran; the first tile's before
it), then the next tile's registers and those of its loads that touch none of this tile's bytes
(flagged DMA_AHEAD: pushed while the tile runs), and a DMA_STORE of the output range to
external memory; END.
So every random tile also exercises the DMA engine, FILL, the command processor and the shared
output stage. The golden model runs the same program (sim/cosim/program_run.py) for the
expectations; nothing here computes an expected value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.npu.base import CommandWriter
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import EltMode, EltOp, Opcode, OutMode, PoolMode, Reg, Sram, set_reg
from firmware_model.arch.program import Placement, Program
from firmware_model.arch.registers import Registers
from firmware_model.golden.command_plan import transfer_touches_unit
from firmware_model.golden.memories import box_span
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


def tile_program(cfg: NpuConfig, tiles: list[TileSpec], *, name: str = "random tiles",
                 stores_last: bool = False) -> Program:
    """The tiles as one program: each tile's loads (those touching none of the tile before's bytes
    pushed DMA_AHEAD under it), FILL, command and store. With `stores_last` every store waits for
    the program's end and a FILL touching none of the tile before's bytes is pushed AHEAD too, so
    that a MAC tile after a MAC tile waits in decode, ready, while that one runs (its weight
    preload: docs/isa.md, "Timing"); a store then takes what the tiles after its own left in its
    bytes, as on the golden model."""
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
    # Each tile loads only the bytes of its ranges that differ from what the program's earlier
    # loads left in that SRAM (the units write the output SRAM only): the same SRAM contents as
    # loading the whole range, for a fraction of the DMA clocks.
    loads: dict[int, list] = {}
    known: dict[Sram, tuple[np.ndarray, np.ndarray]] = {}
    for k, t in enumerate(tiles):
        loads[k] = []
        for sram, (image, (a, b)) in t.loads.items():
            if b <= a:
                continue
            image = np.asarray(image, np.uint8)
            if sram == Sram.OUTPUT:
                span = (a, b)
            else:
                size = max(b, len(image))
                have, valid = known.setdefault(sram, (np.zeros(size, np.uint8), np.zeros(size, bool)))
                if len(have) < size:
                    have, valid = (np.concatenate([have, np.zeros(size - len(have), np.uint8)]),
                                   np.concatenate([valid, np.zeros(size - len(valid), bool)]))
                    known[sram] = (have, valid)
                diff = np.flatnonzero(~valid[a:b] | (have[a:b] != image[a:b]))
                if diff.size == 0:
                    continue
                span = (a + int(diff[0]), a + int(diff[-1]) + 1)
                have[span[0]:span[1]] = image[span[0]:span[1]]
                valid[span[0]:span[1]] = True
            loads[k].append((sram, span, place(bytes(image[span[0]:span[1]]))))
    out_base = -(-len(consts) // ALIGN) * ALIGN
    cursor = out_base
    early: set = set()              # (tile, load index) pushed AHEAD under the tile before
    early_fills: set = set()        # tiles whose FILL was pushed AHEAD under the tile before
    stores: list = []               # (output range, external address) kept for the end
    for k, t in enumerate(tiles):
        start = len(w.commands)
        w.emit(Opcode.MARK, 0, k)
        for i, (sram, (a, b), ext) in enumerate(loads[k]):
            if (k, i) not in early:
                w.dma(Opcode.DMA_LOAD, sram, ext=ext, sram_addr=a, len0=b - a)
        a, b = t.output
        if b > a and k not in early_fills:
            w.dma(Opcode.FILL, Sram.OUTPUT, sram_addr=a, len0=b - a, value=t.fill)
        if k == 0:
            view = Registers(t.regs)
            for reg in sorted(t.regs):
                w.set(Reg(reg), view[reg])
        unit_command = w.emit(t.opcode, t.sub)
        if k + 1 < len(tiles):
            # The next tile's registers, every one SET again, decode while this tile runs (the
            # command processor's lookahead, docs/isa.md "Timing"): the running command must not
            # see them, and after a short command the run reaches past its done clock.
            nxt = tiles[k + 1].regs
            view = Registers(nxt)
            for reg in sorted(nxt):
                w.commands.append(set_reg(Reg(reg), view[reg]))
                w.regs[Reg(reg)] = view[reg]
            # and its loads that touch none of this tile's bytes, flagged DMA_AHEAD, before this
            # tile's store (none writes the output SRAM, which the store reads)
            plan = _unit_plan(cfg, t)
            for i, (sram, (a2, b2), ext) in enumerate(loads[k + 1]):
                if sram != Sram.OUTPUT and plan is not None and \
                        transfer_touches_unit(t.opcode, plan, sram, True, (a2, b2)) is None:
                    w.dma(Opcode.DMA_LOAD, sram, ext=ext, sram_addr=a2, len0=b2 - a2, ahead=True)
                    early.add((k + 1, i))
            a2, b2 = tiles[k + 1].output
            if stores_last and b2 > a2 and plan is not None and \
                    transfer_touches_unit(t.opcode, plan, Sram.OUTPUT, True, (a2, b2)) is None:
                w.dma(Opcode.FILL, Sram.OUTPUT, sram_addr=a2, len0=b2 - a2, value=tiles[k + 1].fill, ahead=True)
                early_fills.add(k + 1)
        if b > a:
            stores.append(((a, b), cursor))
            out_places.append(Placement(f"tile{k}_output", cursor, [b - a], DType.INT8))
            cursor = -(-(cursor + b - a) // ALIGN) * ALIGN
        if not stores_last:
            for (s0, s1), ext in stores:
                w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=ext, sram_addr=s0, len0=s1 - s0)
            stores = []
        records.append({"id": k, "layer": 0, "unit": t.opcode.name, "commands": [start, len(w.commands)],
                        "unit_command": unit_command, "output": f"tile{k}_output"})
    for (s0, s1), ext in stores:
        w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=ext, sram_addr=s0, len0=s1 - s0)
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


def _unit_plan(cfg: NpuConfig, t: TileSpec):
    """The golden model's plan of a tile's command (its byte ranges), or None if it faults."""
    from firmware_model.errors import GoldenModelError
    from firmware_model.golden.timing_model import UNIT_PLANS

    try:
        return UNIT_PLANS[t.opcode][0](cfg, Registers(t.regs), t.sub)
    except GoldenModelError:
        return None


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


def directed_tile(cfg: NpuConfig, rng, tile_id: int, accept, what: str) -> TileSpec:
    """The first random MAC tile (random_tiles.random_tile) that `accept(tile)` takes, as a
    TileSpec with a random FILL byte; drawn at most DIRECTED_DRAWS times, then RuntimeError
    naming `what` was looked for."""
    from sim.vectors.random_tiles import random_tile

    for _ in range(DIRECTED_DRAWS):
        t = random_tile(cfg, rng, tile_id)
        if accept(t):
            return TileSpec(Opcode.MAC, t["mode"], t["regs"], dict(t["images"]), t["output_range"],
                            fill=int(rng.integers(0, 256)))
    raise RuntimeError(f"no random MAC tile on '{cfg.name}' {what} in {DIRECTED_DRAWS} draws")


def int16_table_past_int16_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random MAC tile that rescales to int32 into an int16 table and feeds it values past int16,
    so the LUT engine's clip to int16 decides results (random draws reach it about once in a
    hundred tiles)."""
    from firmware_model.arch.isa import LutMode
    from firmware_model.golden.mac_unit import execute_mac
    from firmware_model.golden.memories import Memories

    def accept(t) -> bool:
        regs = t["regs"]
        if regs[int(Reg.LUT_MODE)] != LutMode.INT16 or regs[int(Reg.RESCALE_DTYPE)] != DType.INT32:
            return False
        mem = Memories(cfg)                   # the values the table is fed: the tile without it
        for sram, (image, _) in t["images"].items():
            mem.sram[sram][:] = image
        execute_mac(cfg, mem, {**regs, int(Reg.LUT_MODE): int(LutMode.OFF)}, t["mode"])
        a, b = t["output_range"]
        fed = mem.sram[Sram.OUTPUT][a:b].view("<i4")
        return bool(np.any((fed > 32767) | (fed < -32768)))
    return directed_tile(cfg, rng, tile_id, accept, "fed an int16 table past int16")


def strided_depthwise_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random DEPTHWISE tile whose output rows have several pixels at a stride of 2 or more and
    whose kernel row takes two or more window passes, the last shorter than the window (a random
    draw of a few tiles may have none)."""
    from firmware_model.arch.cycle_model import depthwise_passes
    from firmware_model.arch.isa import MacMode

    def accept(t) -> bool:
        regs = t["regs"]
        if t["mode"] != MacMode.DEPTHWISE or regs[int(Reg.STRIDE_W)] < 2 or regs[int(Reg.OFM_W)] < 2:
            return False
        passes = depthwise_passes(cfg, regs[int(Reg.KERNEL_W)], regs[int(Reg.DILATION_W)])
        return len(passes) >= 2 and passes[-1] < cfg.mac_cols
    return directed_tile(cfg, rng, tile_id, accept,
                         "in the DEPTHWISE mode with a strided row and a short last pass")


def output_sram_window_tile(cfg: NpuConfig, rng, tile_id: int, mode) -> TileSpec:
    """A random tile in window mode `mode` that reads its input words from the output SRAM
    (IFM_SRAM OUTPUT: all of its ports), two or more kernel rows and output pixels a row, with a
    padded box region, storing its raw accumulators."""
    def accept(t) -> bool:
        regs = t["regs"]
        return (t["mode"] == mode and regs[int(Reg.IFM_SRAM)] == Sram.OUTPUT and regs.get(int(Reg.IFM_IN_H), 0) > 0
                and regs[int(Reg.KERNEL_H)] >= 2 and regs[int(Reg.OFM_W)] >= 2
                and not regs[int(Reg.OUT_MODE)] & OutMode.RESCALE)
    return directed_tile(cfg, rng, tile_id, accept, f"in mode {int(mode)} reading the output SRAM")


def output_sram_input_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random CONV2D tile that reads its input from the output SRAM (IFM_SRAM OUTPUT) over two
    or more input words a pixel."""
    def accept(t) -> bool:
        return t["regs"][int(Reg.IFM_SRAM)] == Sram.OUTPUT and t["regs"][int(Reg.IFM_CBLOCKS)] >= 2
    return directed_tile(cfg, rng, tile_id, accept, "reading its input from the output SRAM")


def paired_depthwise_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random DEPTHWISE_PAIRED tile with an odd KERNEL_H of 3 or more (a step with two kernel
    rows, then the last row alone: the upper window half masked), a kernel row of two or more
    pixels and two or more output pixels a row, storing its raw accumulators (no RESCALE: a wrong
    lane shows in the result instead of being rounded or clamped away), its whole box real (a lane
    reading past the kernel rows would read padding as IFM_ZP, and add nothing)."""
    from firmware_model.arch.isa import MacMode

    def accept(t) -> bool:
        regs = t["regs"]
        span = (regs[int(Reg.KERNEL_W)] - 1) * regs[int(Reg.DILATION_W)] + 1
        return (t["mode"] == MacMode.DEPTHWISE_PAIRED and regs[int(Reg.KERNEL_H)] % 2 == 1
                and regs[int(Reg.KERNEL_H)] >= 3 and span >= 2 and regs[int(Reg.OFM_W)] >= 2
                and not regs[int(Reg.OUT_MODE)] & OutMode.RESCALE and not regs.get(int(Reg.IFM_IN_H)))
    return directed_tile(cfg, rng, tile_id, accept,
                         "in the DEPTHWISE_PAIRED mode with an odd kernel height of 3 or more")


def triple_depthwise_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random DEPTHWISE_TRIPLE tile whose KERNEL_H is 4 or more and not a multiple of 3 (a step
    with three kernel rows, then one with the rows left: the third group, or the second and third,
    masked), a kernel row of two or more pixels where a third of the lanes holds them, two or
    more output pixels a row, and its raw accumulators stored (no RESCALE) with its whole box real,
    as paired_depthwise_tile."""
    from firmware_model.arch.isa import MacMode

    def accept(t) -> bool:
        regs = t["regs"]
        span = (regs[int(Reg.KERNEL_W)] - 1) * regs[int(Reg.DILATION_W)] + 1
        kh = regs[int(Reg.KERNEL_H)]
        return (t["mode"] == MacMode.DEPTHWISE_TRIPLE and kh % 3 != 0 and kh >= 4
                and span >= min(2, cfg.mac_cols // 3) and regs[int(Reg.OFM_W)] >= 2
                and not regs[int(Reg.OUT_MODE)] & OutMode.RESCALE and not regs.get(int(Reg.IFM_IN_H)))
    return directed_tile(cfg, rng, tile_id, accept,
                         "in the DEPTHWISE_TRIPLE mode with a kernel height of 4 or more, not a multiple of 3")


def packed_depthwise_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random DEPTHWISE_PACKED tile with a step of three windows (two on 4 lanes, where three
    never meet; isa.packed_groups: a kernel row split across steps, a short window primed later
    than the longest), a stride of 2 or more
    (a window shorter than the stride skips words between its beats), two or more output pixels a
    row, storing its raw accumulators (no RESCALE) with its whole box real, as
    paired_depthwise_tile."""
    from firmware_model.arch.isa import MacMode, packed_groups

    def accept(t) -> bool:
        regs = t["regs"]
        span = (regs[int(Reg.KERNEL_W)] - 1) * regs[int(Reg.DILATION_W)] + 1
        steps = packed_groups(cfg.mac_cols, regs[int(Reg.KERNEL_H)], span) if t["mode"] == MacMode.DEPTHWISE_PACKED else []
        return (any(len(groups) == (3 if cfg.mac_cols >= 8 else 2) for groups in steps) and regs[int(Reg.STRIDE_W)] >= 2
                and any(n < regs[int(Reg.STRIDE_W)] for groups in steps for _, _, n in groups)
                and regs[int(Reg.OFM_W)] >= 2
                and not regs[int(Reg.OUT_MODE)] & OutMode.RESCALE and not regs.get(int(Reg.IFM_IN_H)))
    return directed_tile(cfg, rng, tile_id, accept,
                         "in the DEPTHWISE_PACKED mode with a step of three windows, one shorter than a stride of 2 or more")


def padded_window_tile(cfg: NpuConfig, rng, tile_id: int, mode) -> TileSpec:
    """A random tile in window mode `mode` (DEPTHWISE, _PAIRED, _TRIPLE, _PACKED) whose image region
    (IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H, IFM_IN_W) leaves padding on all four sides of its input
    box, with two or more kernel rows and output pixels a row, storing its raw accumulators (a
    padded word read as the SRAM's shows in the sums)."""
    def accept(t) -> bool:
        regs = t["regs"]
        if t["mode"] != mode or not regs.get(int(Reg.IFM_IN_H)) or regs[int(Reg.OUT_MODE)] & OutMode.RESCALE:
            return False
        ih = (regs[int(Reg.OFM_H)] - 1) * regs[int(Reg.STRIDE_H)] + (regs[int(Reg.KERNEL_H)] - 1) * regs[int(Reg.DILATION_H)] + 1
        iw = regs[int(Reg.IFM_ROW_STRIDE)] // regs[int(Reg.IFM_PIX_STRIDE)]
        top, left = regs[int(Reg.IFM_PAD_TOP)], regs[int(Reg.IFM_PAD_LEFT)]
        return (top > 0 and left > 0 and top + regs[int(Reg.IFM_IN_H)] < ih and left + regs[int(Reg.IFM_IN_W)] < iw
                and regs[int(Reg.KERNEL_H)] >= 2 and regs[int(Reg.OFM_W)] >= 2)
    return directed_tile(cfg, rng, tile_id, accept, f"in mode {int(mode)} with padding on four sides")


def one_step_full_block_tile(cfg: NpuConfig, rng, tile_id: int) -> TileSpec:
    """A random CONV2D tile of one reduction step (a 1x1 kernel over one channel block) and exactly
    mac.rows output channels on the vector output path: its output engine starts early, at the end
    of the block's only weight load, in the clock the last lane's parameter record arrives (a
    random draw of a few dozen tiles rarely has one)."""
    from firmware_model.arch.cycle_model import uses_vector_output
    from firmware_model.arch.isa import MacMode

    def accept(t) -> bool:
        regs = t["regs"]
        return (t["mode"] == MacMode.CONV2D and regs[int(Reg.KERNEL_H)] == regs[int(Reg.KERNEL_W)] == 1
                and regs[int(Reg.IFM_CBLOCKS)] == 1 and regs[int(Reg.OFM_C)] == cfg.mac_rows
                and uses_vector_output(regs[int(Reg.OFM_DTYPE)], regs[int(Reg.LUT_MODE)]))
    return directed_tile(cfg, rng, tile_id, accept, f"of one step and {cfg.mac_rows} channels")


def row_paired_tile(cfg: NpuConfig, rng, tile_id: int, mode, blocks: int = 2) -> TileSpec:
    """A random CONV2D_ROW_PAIRS or CONV2D_PAIRS tile of `blocks` output blocks, the last of at
    most mac.rows/2 channels (its steps two pixels a beat, each half of the rows one), over two
    input-channel blocks. Two blocks store their raw accumulators (no RESCALE: a wrong row shows
    in the result instead of being rounded or clamped away). One block takes the vector output
    path rescaled: its output engine drains a pixel pair a clock, the odd pixel from the upper half
    of the lanes with its channels' records, through the second write port; drawn so that a
    wrong multiplier shows in its results (`sensitive`)."""
    from firmware_model.arch.cycle_model import uses_vector_output

    def sensitive(t) -> bool:
        """At least 8 pixels, and the results change when each channel's multiplier is another
        channel's (its record's multiplier bytes from the record R/2 on): an odd pixel rescaled
        with a wrong record shows instead of vanishing into the clamp."""
        from firmware_model.arch.isa import PARAM_RECORD, PARAM_RECORD_BYTES
        from firmware_model.golden.mac_unit import execute_mac
        from firmware_model.golden.memories import Memories

        regs = t["regs"]
        if regs[int(Reg.OFM_H)] * regs[int(Reg.OFM_W)] < 8:
            return False
        mem = Memories(cfg)
        for sram, (image, (lo, hi)) in t["images"].items():
            mem.sram[sram][lo:hi] = image[lo:hi]
        records = mem.sram[Sram.PARAM]
        first, half = regs[int(Reg.PARAM_ADDR)], cfg.mac_rows // 2
        if first + regs[int(Reg.OFM_C)] + half > cfg.param_records:
            return False
        mult = PARAM_RECORD["multiplier"]
        lo, n = mult.offset // 8, mult.width // 8          # the multiplier's bytes in a record
        for r in range(regs[int(Reg.OFM_C)]):
            at, other = (first + r) * PARAM_RECORD_BYTES + lo, (first + r + half) * PARAM_RECORD_BYTES + lo
            records[at:at + n] = records[other:other + n].copy()
        mem.sram[Sram.OUTPUT][:] = t["output_before"]
        execute_mac(cfg, mem, regs, t["mode"])
        a, b = t["output_range"]
        return 4 * int(np.count_nonzero(mem.sram[Sram.OUTPUT][a:b] != t["expected"])) >= b - a

    def accept(t) -> bool:
        regs = t["regs"]
        rescaled = bool(regs[int(Reg.OUT_MODE)] & OutMode.RESCALE)
        return (t["mode"] == mode and regs[int(Reg.IFM_CBLOCKS)] == 2
                and -(-regs[int(Reg.OFM_C)] // cfg.mac_rows) == blocks
                and (not rescaled if blocks == 2 else
                     rescaled and uses_vector_output(regs[int(Reg.OFM_DTYPE)], regs[int(Reg.LUT_MODE)])
                     and sensitive(t)))
    return directed_tile(cfg, rng, tile_id, accept, f"in {mode.name} of {blocks} output block(s)")


def lane_paired_tile(cfg: NpuConfig, rng, tile_id: int, blocks: int) -> TileSpec:
    """A random CONV2D_LANE_PAIRS tile with `blocks` output-channel blocks (one: its output engine
    starts with the last, lane-paired step and drains pixels two a beat behind it; two: the
    blocks alternate accumulator halves) over two input-channel blocks (a whole step after each
    lane-paired one), on the vector output path, storing its raw accumulators (no RESCALE)."""
    from firmware_model.arch.cycle_model import uses_vector_output
    from firmware_model.arch.isa import MacMode

    def accept(t) -> bool:
        regs = t["regs"]
        return (t["mode"] == MacMode.CONV2D_LANE_PAIRS and regs[int(Reg.IFM_CBLOCKS)] == 2
                and -(-regs[int(Reg.OFM_C)] // cfg.mac_rows) == blocks
                and uses_vector_output(regs[int(Reg.OFM_DTYPE)], regs[int(Reg.LUT_MODE)])
                and not regs[int(Reg.OUT_MODE)] & OutMode.RESCALE)
    return directed_tile(cfg, rng, tile_id, accept, f"in CONV2D_LANE_PAIRS of {blocks} output blocks")


# Draws a directed tile may take before its generator gives up (it needs about a hundred).
DIRECTED_DRAWS = 20_000


def _whole(mem, srams) -> dict:
    return {s: (mem.sram[s].copy(), (0, len(mem.sram[s]))) for s in srams}


def eltwise_tiles(rng, n: int, *, corners: bool = False) -> tuple[NpuConfig, list[TileSpec]]:
    """Random ELTWISE commands of the elementwise unit's vectors (the default configuration),
    with the LUT tables they may use; `corners`: instead, its corner commands (every shift and
    COPY corner, every input rescale with double rounding, and every sixth of the others:
    extremes of every operand kind, rescales, MUL shifts, rounding ties)."""
    from firmware_model.golden.memories import Memories
    from sim.vectors import eltwise as ev
    from sim.vectors.output_stage import table_run

    mem = Memories(ev.NPU)
    table_run(rng, mem, "tables")
    out = []
    if corners:
        picked = []
        for k, c in enumerate(ev.corner_commands(rng, mem)):
            # double rounding's threshold shows only on the few commands that round twice
            rounds_twice = any(x is not None and x.rescale and x.double_round for x in (c.a, c.b))
            if c.op >= EltOp.LOGICAL_LEFT_SHIFT or rounds_twice or k % 6 == 0:
                picked.append(c)
        # corner_commands stored each command's operands as it made it: store them again in turn
        commands = [ev.finish(c, mem, rng) for c in picked]
    else:
        commands = None
    for k in range(len(commands) if commands else n):
        c = commands[k] if commands else ev.random_command(rng, mem, f"program {k}")
        osize = c.out.ofm_dtype.size_bytes
        regs = dict(c.regs)
        loads = _whole(mem, (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.LUT))
        out_rng = (int(regs[Reg.ELT_OUT_ADDR]), int(regs[Reg.ELT_OUT_ADDR]) + c.count * osize)
        if not corners and k % 3 == 1:
            _from_output(mem, regs, loads, out_rng, "A")
        if not corners and c.op != EltOp.COPY and k % 4 == 2:
            _from_output(mem, regs, loads, out_rng, "B")    # with A too when k % 12 == 10
        out.append(TileSpec(Opcode.ELTWISE, int(c.op), regs, loads, out_rng, fill=int(rng.integers(0, 256))))
    return ev.NPU, out


def _to_output_sram(mem, loads: dict, out_rng: tuple[int, int], src: Sram, a0: int, nbytes: int) -> int | None:
    """Copy bytes [a0, a0 + nbytes) of SRAM `src` into the output SRAM's load image, past the
    results `out_rng` (or before them) and apart from what the image already holds, at the same
    offset in a 64-byte block (the vector paths' lanes depend on the address's alignment): their
    address there, or None when the output SRAM has no room beside them."""
    size = len(mem.sram[Sram.OUTPUT])
    image, span = loads.get(Sram.OUTPUT, (np.zeros(size, np.uint8), None))
    taken = [out_rng] + ([span] if span is not None else [])
    hi = max(b for _, b in taken)
    lo = min(a for a, _ in taken)
    for base in (-(-hi // 64) * 64, (lo - nbytes - 64) // 64 * 64):
        at = base + a0 % 64
        if base >= 0 and at + nbytes <= size and all(at + nbytes <= a or at >= b for a, b in taken):
            break
    else:
        return None
    image[at:at + nbytes] = mem.sram[src][a0:a0 + nbytes]
    loads[Sram.OUTPUT] = (image, (at, at + nbytes) if span is None else (min(at, span[0]), max(at + nbytes, span[1])))
    return at


def _from_output(mem, regs: dict, loads: dict, out_rng: tuple[int, int], side: str) -> None:
    """Turn an ELTWISE command into one that reads operand `side` ("A" or "B") from the output
    SRAM (A_FROM_OUTPUT, B_FROM_OUTPUT), its bytes moved there (_to_output_sram); left as it is
    when there is no room."""
    r = Registers(regs)
    mode = EltMode(r.elt_mode)
    scalar, flag = EltMode[f"{side}_SCALAR"], EltMode[f"{side}_FROM_OUTPUT"]
    addr_reg, dtype_reg = Reg[f"ELT_{side}_ADDR"], Reg[f"ELT_{side}_DTYPE"]
    n = 1 if scalar in mode else r.elt_count
    a0 = regs[int(addr_reg)]
    at = _to_output_sram(mem, loads, out_rng, Sram.INPUT if side == "A" else Sram.WEIGHT, a0,
                         n * DType(regs[int(dtype_reg)]).size_bytes)
    if at is not None:
        regs[int(addr_reg)] = at
        regs[int(Reg.ELT_MODE)] = int(mode | flag)


def pool_tiles(rng, n: int, *, corners: bool = False) -> tuple[NpuConfig, list[TileSpec]]:
    """Random POOL commands of the pooling unit's vectors (the default configuration) and a 1 x 1
    window into int32 results; `corners`: instead, its corner commands and AVG reciprocal commands
    for the counts 1..24, 100 and 129."""
    from firmware_model.golden.memories import Memories
    from sim.vectors import pool as pv
    from sim.vectors.output_stage import table_run

    mem = Memories(pv.NPU)
    table_run(rng, mem, "tables")
    out = []
    commands = None
    if corners:
        made = pv.corner_commands(rng, mem) + pv.reciprocal_commands(rng, mem, list(range(1, 25)) + [100, 129])
        commands = [pv.finish(c, mem, rng) for c in made]      # their operands stored again in turn
    def directed():
        """A 1 x 1 window into int32 results: on the core's vector path a window's results take
        more output words than its one tap, so the next window waits for the writer (GAP)."""
        g = pv.Geometry(1, 1, 1, 1, 0, 0, 4, 8, 4, 8, 8)
        box = pv._draw(rng, DType.INT8, g.ih * g.iw * g.oc).reshape(g.ih, g.iw, g.oc)
        return pv.finish(pv.PoolCommand("1x1 into int32", int(PoolMode.SUM), DType.INT8, 3, g, box,
                                        pv.OutStage(ofm_dtype=DType.INT32), DType.INT32), mem, rng)

    for k in range(len(commands) if commands else n + 1):
        c = commands[k] if commands else pv.random_command(rng, mem, f"program {k}") if k < n else directed()
        r = Registers(c.regs)
        out_rng = box_span(r.ofm_h, r.ofm_w, r.ofm_c, r.ofm_addr, r.ofm_row_stride, r.ofm_pix_stride, r.ofm_dtype)
        regs = dict(c.regs)
        regs[int(Reg.IFM_SRAM)] = int(Sram.INPUT)          # every tile says where its box is
        loads = _whole(mem, (Sram.INPUT, Sram.PARAM, Sram.LUT))
        if not corners and k % 3 == 2:
            _pool_box_from_output(mem, regs, loads, out_rng)
        out.append(TileSpec(Opcode.POOL, int(c.mode), regs, loads, out_rng, fill=int(rng.integers(0, 256))))
    return pv.NPU, out


def _pool_box_from_output(mem, regs: dict, loads: dict, out_rng: tuple[int, int]) -> None:
    """Turn a POOL command into one that reads its input box from the output SRAM (IFM_SRAM
    OUTPUT), its bytes moved there (_to_output_sram); left as it is when there is no room."""
    r = Registers(regs)
    if not (r.pool_in_h and r.pool_in_w and r.ofm_c):
        return
    lo, hi = box_span(r.pool_in_h, r.pool_in_w, r.ofm_c, r.ifm_addr, r.ifm_row_stride, r.ifm_pix_stride,
                      r.ifm_dtype)
    at = _to_output_sram(mem, loads, out_rng, Sram.INPUT, lo, hi - lo)
    if at is not None:
        regs[int(Reg.IFM_ADDR)] = at
        regs[int(Reg.IFM_SRAM)] = int(Sram.OUTPUT)


def var_program(cfg, steps, source: str, ext_used: int = 128):
    """A program of VAR commands, each (slot, VarOp, external address) on two words of the slot's
    own place in the variable SRAM, with two words of constants (1, 2, ...) at address 0."""
    W = cfg.word_bytes
    data = bytes(range(1, 2 * W + 1))
    w = CommandWriter()
    for slot, op, ext in steps:
        w.set(Reg.VAR_ADDR, slot * 2 * W)
        w.set(Reg.VAR_BYTES, 2 * W)
        w.set(Reg.VAR_SLOT, slot)
        w.set(Reg.VAR_EXT_ADDR, ext)
        w.emit(Opcode.VAR, op)
    w.emit(Opcode.END)
    manifest = {"config": cfg.to_dict(), "source": source,
                "memory": {"constants": {"addr": 0, "size": len(data)}, "ext_used": ext_used},
                "graph": {"inputs": [], "outputs": []}, "variables": [], "host_ops": [], "layers": [],
                "stats": {"commands": len(w.commands), "tiles": 0, "npu_macs": 0, "host_macs": 0}}
    return Program(w.commands, data, manifest)


def faulting_variable_program(cfg):
    """VAR WRITE of slot 0 from the constants, then a VAR READ of slot 1, never written: the
    invocation faults (VAR_READ_BEFORE_WRITE) after it changed the variable SRAM."""
    from firmware_model.arch.isa import VarOp

    return var_program(cfg, ((0, VarOp.WRITE, 0), (1, VarOp.READ, 64)), "faulting VAR program")
