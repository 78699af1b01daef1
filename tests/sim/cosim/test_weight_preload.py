"""The MAC weight preload (docs/isa.md, "Timing"; hw/mac_sequencer.py): a MAC command that waits in
decode, ready, while a MAC command runs has its first weight block and records loaded under that
one, and skips what is left of its own weight load. The core runs programs whose MAC tiles follow
each other with nothing between but SETs and transfers pushed ahead, against the golden model:
every tile's bytes and done clock, the invocation's status and cycles."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import MacMode, Opcode, Reg, Sram, Status
from firmware_model.errors import GoldenModelError
from firmware_model.golden.mac_unit import execute_mac, mac_plan
from firmware_model.golden.memories import Memories
from firmware_model.golden.model import GoldenModel
from sim import seeds
from sim.cosim.program_run import invocation_differences, prepare, run_on_rtl
from sim.rtl.core import cached_core
from sim.vectors import random_programs as rp
from sim.vectors.random_tiles import random_tile


def mac_clocks(program, cfg) -> list[tuple[int, int]]:
    """(clocks the golden model's timeline gave, clocks without a preload) of each MAC command."""
    golden = GoldenModel(program, cfg)
    runs = []

    def hook(ev):
        if ev.opcode == Opcode.MAC:
            runs.append((ev.end - ev.start, ev.result.cycles))

    golden.event_hook = hook
    golden.invoke({})
    return runs


def with_weights_moved(cfg, t: rp.TileSpec) -> rp.TileSpec | None:
    """The tile again with its weights at either end of the weight SRAM, apart from the tile's
    (its loads then touch none of the tile's bytes and go ahead under it), and no FILL or store
    of its own output; None when the SRAM has no room for both."""
    image, (a, b) = t.loads[Sram.WEIGHT]
    size = cfg.weight_words * cfg.mac_cols
    a2 = next((x for x in (0, (size - (b - a)) // cfg.mac_cols * cfg.mac_cols) if x + b - a <= a or x >= b), None)
    if a2 is None:
        return None
    moved = np.zeros(max(size, len(image)), np.uint8)
    moved[a2:a2 + b - a] = image[a:b]
    regs = {**t.regs, int(Reg.WGT_ADDR): t.regs[int(Reg.WGT_ADDR)] - a + a2}
    return rp.TileSpec(t.opcode, t.sub, regs, {**t.loads, Sram.WEIGHT: (moved, (a2, a2 + b - a))}, (0, 0))


def run_and_compare(cfg, simulator, program):
    job, golden = prepare(program, cfg, [{}])
    result, bench = run_on_rtl(cached_core(cfg, simulator), job)
    assert result is not None, bench.failures
    return job.invocations[0], golden, result.invocations[0]


CASES = [("tiny", "verilator"), ("default", "verilator"), ("large", "verilator"), ("default", "icarus")]


@pytest.mark.rtl
@pytest.mark.parametrize("config,simulator", CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_back_to_back_mac_tiles_preload_their_first_weight_block(config, simulator):
    cfg = load_config(config)
    rng = seeds.rng(23, f"weight preload {config}")
    tiles = rp.mac_tiles(cfg, rng, 8)
    tiles += [rp.one_step_full_block_tile(cfg, rng, 8), rp.row_paired_tile(cfg, rng, 9, MacMode.CONV2D_ROW_PAIRS),
              rp.packed_depthwise_tile(cfg, rng, 10), rp.lane_paired_tile(cfg, rng, 11, 2)]
    # each tile followed by itself with its weights elsewhere: ready, or nearly, while it runs
    tiles = [x for t in tiles for x in (t, with_weights_moved(cfg, t)) if x is not None]
    program = rp.tile_program(cfg, tiles, stores_last=True)
    saved = [plan - ran for ran, plan in mac_clocks(program, cfg)]
    R = cfg.mac_rows
    # some tiles have the whole block in before they start (R clocks saved: SWAP instead of the
    # R + 1 clocks of W_LOAD); a tile after a fused table (the scalar output path reads the
    # parameter port) or whose loads wait for the tile before has none. On `large` a tile after
    # one of a pixel and several blocks gets a part: that one's window opens (its last block to
    # the output engine) fewer than R clocks before its done.
    assert R in saved and 0 in saved, saved
    assert any(0 < s < R for s in saved) or config != "large", saved
    assert all(0 <= s <= R for s in saved)
    # the same tiles with each store before the next tile: it waits for the done, so no preload
    assert all(ran == plan for ran, plan in mac_clocks(rp.tile_program(cfg, tiles), cfg))
    exp, golden, r = run_and_compare(cfg, simulator, program)
    assert exp.status == Status.OK and len(exp.tiles) == len(tiles)
    assert invocation_differences(exp, golden.outputs[0], r) == []


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_refused_command_after_a_preload_reports_golden_status(simulator):
    """The tile after a long one is refused by its checks after its block was preloaded: the core
    ends with the golden model's status (not a SWAP waiting for ever), the first tile exact."""
    cfg = load_config("default")
    rng = seeds.rng(29, "refused after preload")
    first = rp.one_step_full_block_tile(cfg, rng, 0)
    # (on the vector path: its preload window opens)
    assert mac_plan(cfg, first.regs, first.sub).preload[1] is not None
    t = random_tile(cfg, rng, 1)
    regs = {**t["regs"], int(Reg.KERNEL_W): 0}
    with pytest.raises(GoldenModelError) as refused:
        execute_mac(cfg, Memories(cfg), regs, t["mode"])
    second = rp.TileSpec(Opcode.MAC, t["mode"], regs, dict(t["images"]), t["output_range"], fill=0x5A)
    program = rp.tile_program(cfg, [first, second], stores_last=True)
    macs = [i for i, c in enumerate(program.commands) if c.opcode == Opcode.MAC]
    between = program.commands[macs[0] + 1:macs[1]]
    # nothing between the two holds the second out of decode while the first runs
    assert all(c.opcode in (Opcode.SET, Opcode.MARK) or c.ahead for c in between)
    exp, golden, r = run_and_compare(cfg, simulator, program)
    assert exp.status == refused.value.status != Status.OK
    assert r.status == exp.status
    assert invocation_differences(exp, golden.outputs[0], r) == []
