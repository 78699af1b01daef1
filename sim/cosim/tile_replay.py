"""`npu sim --tile N`: one tile of a network re-run alone on the RTL, from golden's state before it.

A failing tile deep in a network is slow to reach and its window is lost in a long waveform. The
replay builds a short program that starts where the tile starts:

1. the golden model runs the invocations before the tile's (the variables carry over), then the
   tile's invocation up to the tile's first command (the program cut there, then END): its external
   memory, SRAMs, registers and variable SRAM are the machine's state before the tile;
2. the replay program: that external memory as its constants, the input, weight, parameter, LUT
   and output SRAMs' images after it, DMA_LOADs that put them back, SETs of every register golden
   had, the tile's own commands (its MARK to its last DMA_STORE), END. The variable SRAM starts
   from golden's image. (The output SRAM holds what an ELTWISE with A_FROM_OUTPUT or a MAC with
   IFM_SRAM OUTPUT reads: an earlier command's result);
3. that program is prepared and run like any other (sim/cosim/program_run.py): golden first, then
   the core, the tile checked by the scoreboard, with `--waves` a waveform of a few hundred clocks.

The replayed tile is also run in place by `npu sim` (its done clock there is the full program's);
here its clocks count from the replay's start.
"""

from __future__ import annotations

import copy

import numpy as np

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import Command, Opcode, Reg, Sram, set_reg
from firmware_model.arch.program import Program
from firmware_model.errors import NpuBenchError

RESTORED = (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.LUT, Sram.OUTPUT)
ALIGN = 64


class TileReplayError(NpuBenchError):
    """A tile that cannot be replayed as asked (no such tile, an invocation that never reaches it)."""


def tile_of(program: Program, tile_id: int) -> dict:
    tiles = {t["id"]: t for t in program.tiles}
    if tile_id not in tiles:
        ids = sorted(tiles)
        raise TileReplayError(f"--tile {tile_id}: the program has no such tile (tiles "
                              f"{ids[0]}..{ids[-1]})" if ids else f"--tile {tile_id}: the program has no tiles")
    return tiles[tile_id]


def replay_program(program: Program, cfg: NpuConfig, invocations: list[dict], tile_id: int, invocation: int = 0,
                   state: dict | None = None) -> tuple[Program, dict]:
    """The replay program of tile `tile_id` in invocation `invocation`, and the golden state
    (variables) it starts from."""
    from firmware_model.golden.model import GoldenModel

    if not 0 <= invocation < len(invocations):
        raise TileReplayError(f"--invocation {invocation}: the run has invocations 0..{len(invocations) - 1}")
    tile = tile_of(program, tile_id)
    first, last = tile["commands"]             # [first, last): its MARK to the next tile's

    golden = GoldenModel(program, cfg)
    if state is not None:
        golden.load_state(state)
    for k in range(invocation):
        try:
            golden.invoke(invocations[k])
        except NpuBenchError as e:
            raise TileReplayError(f"--tile {tile_id}: invocation {k} stops on golden before invocation "
                                  f"{invocation}: {e}") from None
    # the program cut before the tile, on the same state: what the machine holds when the tile starts
    prefix = Program(list(program.commands[:first]) + [Command(Opcode.END)], program.constants,
                     _without_outputs(program.manifest))
    before = GoldenModel(prefix, cfg)
    before.load_state(golden.save_state())
    try:
        before.invoke(invocations[invocation])
    except NpuBenchError as e:
        raise TileReplayError(f"--tile {tile_id}: invocation {invocation} stops on golden before the tile: {e}") from None

    ext_used = int(program.manifest.get("memory", {}).get("ext_used", len(before.mem.ext)))
    blob = bytearray(before.mem.ext[:ext_used].tobytes())
    commands: list[Command] = []
    for sram in RESTORED:
        image = before.mem.sram[sram]
        if not image.any():
            continue
        while len(blob) % ALIGN:
            blob.append(0)
        addr = len(blob)
        blob.extend(image.tobytes())
        for reg, value in ((Reg.DMA_EXT_ADDR, addr), (Reg.DMA_EXT_STRIDE1, 0), (Reg.DMA_EXT_STRIDE2, 0),
                           (Reg.DMA_SRAM_ADDR, 0), (Reg.DMA_LEN0, len(image)), (Reg.DMA_LEN1, 1), (Reg.DMA_LEN2, 1),
                           (Reg.DMA_SRAM_STRIDE1, 0), (Reg.DMA_SRAM_STRIDE2, 0)):
            commands.append(set_reg(reg, value))
        commands.append(Command(Opcode.DMA_LOAD, int(sram)))
    # Every restoring transfer finishes before the tile's commands: a compute command's DMA slack
    # (docs/isa.md) counts only the transfers of the tile's own commands, as in the whole program.
    commands.append(Command(Opcode.BARRIER))
    commands += [Command(Opcode.SET, int(r), 0, int(v) & 0xFFFFFFFF) for r, v in sorted(before.regs.items())]
    offset = len(commands) - first
    commands += list(program.commands[first:last]) + [Command(Opcode.END)]

    manifest = _without_outputs(program.manifest)
    manifest["graph"]["inputs"] = []           # in the constants, as golden left them
    manifest["memory"] = {"constants": {"addr": 0, "size": len(blob)}, "ext_used": len(blob)}
    layer = next(layer for layer in program.manifest["layers"] if layer["index"] == tile["layer"])
    moved = dict(tile, commands=[first + offset, last + offset], unit_command=tile.get("unit_command", first) + offset)
    manifest["layers"] = [dict(layer, tiles=[moved])]
    manifest["replay"] = {"tile": tile_id, "invocation": invocation, "commands": [first, last],
                          "restored": [s.name for s in RESTORED if before.mem.sram[s].any()]}
    return Program(commands, bytes(blob), manifest), before.save_state()


def _without_outputs(manifest: dict) -> dict:
    m = copy.deepcopy(manifest)
    m["graph"]["outputs"] = []
    return m


def run_tile(model, cfg: NpuConfig, simulator: str, tile_id: int, *, invocation: int = 0, input_specs=(),
             waves: bool = False, state: dict | None = None, binds=None, workdir=None, fault: str | None = None):
    """Replay tile `tile_id` on the RTL: (the report's lines, whether the replay matched golden)."""
    from pathlib import Path

    from compiler.tosa_io import read_tosa
    from sim.cosim.network import load_inputs
    from sim.cosim.program_run import invocation_differences, prepare, run_on_rtl
    from sim.cosim.report import tile_reports
    from sim.oracles.backends import GoldenSession
    from sim.rtl.core import cached_core

    graph = read_tosa(model)
    invs, _, _ = load_inputs(Path(model), graph, list(input_specs), None)
    program = GoldenSession(graph, cfg, binds=binds, input_shapes={n: a.shape for n, a in invs[0].items()}).program
    replay, start_state = replay_program(program, cfg, invs, tile_id, invocation, state)
    job, golden = prepare(replay, cfg, [{}], state=start_state)
    built = cached_core(cfg, simulator, fault=fault, waves=waves)
    run_dir = Path(workdir) if workdir else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
    result, bench = run_on_rtl(built, job, run_dir, waves=waves)
    if result is None or not result.invocations:
        from sim.rtl.build import SimulatorCrash

        raise SimulatorCrash(f"the {simulator} replay stopped before reporting: {'; '.join(bench.failures) or 'no results'}")
    r = result.invocations[0]
    found = invocation_differences(job.invocations[0], golden.outputs[0], r)
    tiles = tile_reports(invocation, r.tiles, program.manifest)      # named as in the whole program
    info = replay.manifest["replay"]
    lines = [f"replay: tile {tile_id} of invocation {invocation} ({info['commands'][1] - info['commands'][0]} "
             f"commands), from golden's state before it; restored: {', '.join(info['restored']) or 'nothing'}, "
             f"the registers and the variable SRAM; {len(replay.commands)} commands in all"]
    for t in tiles:
        lines.append(f"  tile {t.tile} {t.unit} layer {t.layer} {t.layer_name} {t.box}: {'PASS' if t.ok else 'FAIL'}, "
                     f"done at clock {t.rtl_end} of the replay (golden {t.golden_end})")
        for m in t.mismatches:
            coords = ", ".join(f"{k} {v}" for k, v in m["coords"].items())
            lines.append(f"      at ({coords}): expected {m['expected']}, actual {m['actual']}")
    if not tiles:
        lines.append("  (a data-movement tile: no compute command; checked by the replay's cycles and status)")
    lines.append(f"  replay: {r.cycles} cycles (golden {job.invocations[0].cycles}), "
                 f"{'matches golden' if not found else 'DIFFERS: ' + '; '.join(found)}")
    if waves:
        dirs = [d for d in (run_dir, built.build_dir) if d is not None]
        files = [f for d in dirs for f in (*d.glob("*.fst"), *d.glob("*.vcd"))]
        if files:
            lines.append(f"waves: {max(files, key=lambda f: f.stat().st_mtime)}")
    return "\n".join(lines), not found
