"""The NPU core RTL running whole programs by itself, against the golden model, on both simulators.

Random tiles of every unit (sim/vectors/random_programs.py) run as real programs: the core's DMA
loads their operands from external memory, FILLs and stores their outputs; the scoreboard checks
every tile's bytes and done clock, the invocation's status and cycle count, and the outputs the
program stored. Faults built into the core (hw/npu_core.CORE_FAULTS) must be caught: a rescale
that truncates, a DMA that loads one word off, a command processor that never ends (the watchdog).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import MacMode, Reg, Sram, Status
from firmware_model.errors import GoldenModelError
from firmware_model.golden.mac_unit import execute_mac
from firmware_model.golden.memories import Memories
from firmware_model.tosa_ops.dtypes import DType
from sim import seeds
from sim.cosim.program_run import invocation_differences, prepare, run_on_rtl, variables_match
from sim.rtl.core import cached_core
from sim.vectors import random_programs as rp
from sim.vectors.random_tiles import FAULTS, random_tile


def run(cfg, simulator, tiles, fault=None):
    program = rp.tile_program(cfg, tiles)
    job, golden = prepare(program, cfg, [{}])
    result, bench = run_on_rtl(cached_core(cfg, simulator, fault=fault), job)
    assert result is not None, bench.failures
    return program, job, golden, result.invocations[0]


def assert_matches_golden(program, job, golden, r):
    assert job.invocations[0].status == Status.OK and len(job.invocations[0].tiles) == len(program.tiles)
    assert invocation_differences(job.invocations[0], golden.outputs[0], r) == []


MAC_CASES = [("tiny", "verilator", 80), ("tiny", "icarus", 25), ("default", "verilator", 50),
             ("default", "icarus", 12)]


@pytest.mark.rtl
@pytest.mark.parametrize("config,simulator,n", MAC_CASES, ids=[f"{c}-{s}" for c, s, _ in MAC_CASES])
def test_random_mac_programs(config, simulator, n):
    cfg = load_config(config)
    rng = seeds.rng(n, f"mac programs {config} {simulator}")
    tiles = rp.mac_tiles(cfg, rng, n)
    assert any(Sram.LUT in t.loads for t in tiles), "no tile with a fused table"
    # directed: a one-step block of mac.rows channels (the early output engine's last lane), a
    # strided DEPTHWISE tile with a short last window pass, a DEPTHWISE_PAIRED tile whose last
    # step has one kernel row, a CONV2D tile reading its input from the output SRAM, a
    # DEPTHWISE_TRIPLE tile whose last step has one or two kernel rows
    tiles += [rp.one_step_full_block_tile(cfg, rng, n), rp.strided_depthwise_tile(cfg, rng, n + 1),
              rp.paired_depthwise_tile(cfg, rng, n + 2), rp.output_sram_input_tile(cfg, rng, n + 3),
              rp.triple_depthwise_tile(cfg, rng, n + 4)]
    # and a tile of each window mode with padding on four sides of its input box
    tiles += [rp.padded_window_tile(cfg, rng, n + 5 + i, mode) for i, mode in
              enumerate((MacMode.DEPTHWISE, MacMode.DEPTHWISE_PAIRED, MacMode.DEPTHWISE_TRIPLE))]
    # and DEPTHWISE_PACKED tiles: three windows in a step, one shorter than the stride; padded
    tiles += [rp.packed_depthwise_tile(cfg, rng, n + 14),
              rp.padded_window_tile(cfg, rng, n + 15, MacMode.DEPTHWISE_PACKED)]
    # and a DEPTHWISE (two words a clock), a DEPTHWISE_TRIPLE and a DEPTHWISE_PACKED tile (its
    # windows at their own columns) reading the output SRAM
    tiles += [rp.output_sram_window_tile(cfg, rng, n + 8 + i, mode) for i, mode in
              enumerate((MacMode.DEPTHWISE, MacMode.DEPTHWISE_TRIPLE))]
    tiles.append(rp.output_sram_window_tile(cfg, rng, n + 16, MacMode.DEPTHWISE_PACKED))
    # and CONV2D_LANE_PAIRS tiles of one output block (the early engine) and of two
    tiles += [rp.lane_paired_tile(cfg, rng, n + 10 + i, blocks) for i, blocks in enumerate((1, 2))]
    # and CONV2D_ROW_PAIRS and CONV2D_PAIRS tiles of two output blocks, and of one (the output
    # engine drains a pixel pair a clock)
    tiles += [rp.row_paired_tile(cfg, rng, n + 12 + i, mode) for i, mode in
              enumerate((MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS))]
    tiles += [rp.row_paired_tile(cfg, rng, n + 17 + i, mode, blocks=1) for i, mode in
              enumerate((MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS))]
    assert_matches_golden(*run(cfg, simulator, tiles))


INT16_CASES = [("tiny", "verilator", 60), ("tiny", "icarus", 20), ("default", "verilator", 30)]


@pytest.mark.rtl
@pytest.mark.parametrize("config,simulator,n", INT16_CASES, ids=[f"{c}-{s}" for c, s, _ in INT16_CASES])
def test_random_int16_mac_programs(config, simulator, n):
    """int16 x int8 tiles (cols/2 int16 lanes per word), rescaled, with fused tables, and raw int48
    results (two write clocks per element on tiny's 4-byte words)."""
    cfg = load_config(config)
    tiles = rp.mac_tiles(cfg, seeds.rng(2 * n, f"int16 programs {config} {simulator}"), n, DType.INT16)
    assert any(t.regs[int(Reg.OFM_DTYPE)] == DType.INT48 for t in tiles)
    assert_matches_golden(*run(cfg, simulator, tiles))


@pytest.mark.rtl
@pytest.mark.parametrize("simulator,n", [("verilator", 40), ("icarus", 8)])
def test_random_eltwise_programs(simulator, n):
    """Every ELTWISE operation, operand type (int48 too), scalar operands, input and output
    rescales, clamps and tables, as the elementwise unit's own vectors draw them."""
    cfg, tiles = rp.eltwise_tiles(seeds.rng(n, f"eltwise programs {simulator}"), n)
    assert_matches_golden(*run(cfg, simulator, tiles))


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_program_whose_first_transfer_is_a_fill(simulator):
    """A FILL first (no latency: its queue entry's latency counter stays 0, as it was from
    reset), then a load queued behind it. The DMA engine's view of the front entry's counter once
    stayed X on Icarus when no counter had changed yet, and the core hung (cnn32's first tile
    starts with its halo FILL)."""
    cfg, tiles = rp.eltwise_tiles(seeds.rng(3, "first transfer a fill"), 2)
    first = tiles[0]
    tiles[0] = rp.TileSpec(first.opcode, first.sub, first.regs, {}, first.output, fill=first.fill)
    program = rp.tile_program(cfg, tiles)
    assert program.commands[[c.opcode.name for c in program.commands].index("FILL")] is next(
        c for c in program.commands if c.opcode.name in ("FILL", "DMA_LOAD", "DMA_STORE"))
    assert_matches_golden(*run(cfg, simulator, tiles))


@pytest.mark.rtl
@pytest.mark.parametrize("simulator,n", [("verilator", 30), ("icarus", 6)])
def test_random_pool_programs(simulator, n):
    cfg, tiles = rp.pool_tiles(seeds.rng(n, f"pool programs {simulator}"), n)
    assert_matches_golden(*run(cfg, simulator, tiles))


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_rescale_rounding_fault_is_caught(simulator):
    """A core whose output stage truncates instead of rounding fails tiles, with their done
    clocks still right: the scoreboard names the tiles and their differing bytes (on Icarus as
    on Verilator: no X reaches the comparison as a crash)."""
    cfg = load_config("tiny")
    tiles = rp.mac_tiles(cfg, seeds.rng(5, "rescale fault programs"), 30)
    program, job, golden, r = run(cfg, simulator, tiles, fault="rescale_rounding")
    bad = [c for c in r.tiles if c.mismatch_offsets]
    assert len(bad) >= 10, f"only {len(bad)} of 30 tiles caught the fault"
    assert all(c.found and c.rtl_end == c.golden_end for c in r.tiles)


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_dma_fault_is_caught_and_localised(simulator):
    """A core whose DMA loads the input SRAM one word off: the first tile that reads it differs,
    and the report names that tile, its layer and the differing output elements."""
    from sim.cosim.report import tile_reports

    cfg = load_config("tiny")
    tiles = rp.mac_tiles(cfg, seeds.rng(7, "dma fault programs"), 6)
    program, job, golden, r = run(cfg, simulator, tiles, fault="dma_address")
    # (a tile reading its input from the output SRAM cannot see the fault; one reading the input
    # SRAM may not either, when the shifted words happen to leave its outputs alone: this draw's
    # first is a clamped DEPTHWISE tile)
    bad = [k for k, t in enumerate(r.tiles) if not t.ok]
    reach = [k for k, t in enumerate(tiles) if t.regs[int(Reg.IFM_SRAM)] == Sram.INPUT]
    assert bad and set(bad) <= set(reach) and len(bad) >= len(reach) // 2, f"tiles {bad} of {reach} differ"
    first = bad[0]
    assert r.tiles[first].mismatch_offsets
    report = tile_reports(0, r.tiles, program.manifest)[first]
    assert report.tile == first and not report.ok and report.unit == "MAC" and report.n_mismatch > 0
    assert report.mismatches and {"n", "y", "x", "c"} <= set(report.mismatches[0]["coords"])
    assert report.cycle_window[1] >= report.cycle_window[0]


def faulty_tiles(cfg, rng) -> list[tuple[str, rp.TileSpec, int]]:
    """One tile per random_tiles.FAULTS entry: a valid random tile with registers changed so that
    the golden model refuses it; (what, tile, golden's status)."""
    out = []
    for what, change in FAULTS:
        t = random_tile(cfg, rng, 0)
        regs = {**t["regs"], **{int(r): v for r, v in change.items()}}
        try:
            execute_mac(cfg, Memories(cfg), regs, t["mode"])
        except GoldenModelError as e:
            status = e.status
        else:
            raise AssertionError(f"{what}: the golden model accepts the tile")
        spec = rp.TileSpec(rp.Opcode.MAC, t["mode"], regs, dict(t["images"]), t["output_range"], fill=0x5A)
        out.append((what, spec, int(status)))
    return out


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_reports_the_golden_status_for_faulty_tiles(simulator):
    """Tiles the golden model refuses (empty, too many pixels, unimplemented types) end the program
    with the same completion code on the core, which writes nothing where the tile would have."""
    cfg = load_config("tiny")
    cases = faulty_tiles(cfg, seeds.rng(11, "faulty tiles"))
    assert {s for _, _, s in cases} == {Status.BAD_MODE, Status.ADDRESS_RANGE}
    wrong, written = {}, []
    for what, spec, status in cases:
        program = rp.tile_program(cfg, [spec])
        job, golden = prepare(program, cfg, [{}])
        assert job.invocations[0].status == status
        a, b = spec.output
        job.invocations[0].read_output_sram = (a, b)
        result, bench = run_on_rtl(cached_core(cfg, simulator), job)
        r = result.invocations[0]
        if r.status != status:
            wrong[what] = (Status(r.status).name if r.status >= 0 else "no END", Status(status).name)
        if not np.all(r.output_sram == 0x5A):
            written.append(what)
    assert not wrong, f"(core, golden) status: {wrong}"
    assert not written, f"faulting commands wrote the output SRAM: {written}"


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_watchdog_stops_a_core_that_never_ends(simulator):
    """A command processor that never finishes END: the bench stops the run after its budget and
    says where the core was; it does not hang."""
    cfg = load_config("tiny")
    tiles = rp.mac_tiles(cfg, seeds.rng(3, "watchdog programs"), 2)
    program = rp.tile_program(cfg, tiles)
    job, golden = prepare(program, cfg, [{}])
    job.watchdog_factor, job.watchdog_slack = 2, 2000
    result, bench = run_on_rtl(cached_core(cfg, simulator, fault="stall_at_end"), job)
    r = result.invocations[0]
    last_tile = program.tiles[-1]["id"]
    assert "watchdog" in r.note and f"command {len(program.commands) - 1} (END" in r.note, r.note
    assert f"tile {last_tile}" in r.note and "cycle " in r.note
    assert all(c.ok for c in r.tiles) and r.status == -1


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_npu_sim_stops_a_core_that_never_ends(simulator, tmp_path, capsys):
    """The same fault through `npu sim` on a network: the run ends (exit 1, a mismatch) and the
    report says the watchdog stopped it, where the core was and at which cycle."""
    from sim.cli.main import main
    from sim.paths import MODELS_DIR

    rc = main(["sim", str(MODELS_DIR / "mlp" / "model.tosa"), "--config", "tiny", "--sim", simulator,
               "--inject-fault", "stall_at_end", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "watchdog: no END after" in out and "(END" in out and "cycle " in out, out[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert any("watchdog" in inv["note"] for inv in report["invocations"])


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_simulator_that_dies_is_reported_with_its_log(simulator, tmp_path):
    """A simulator process killed in mid-run (as a crash would end it): the bench raises
    SimulatorCrash (exit 3 on the command line) with the tail of the log, and does not hang."""
    from sim.rtl.build import SimulatorCrash

    cfg = load_config("tiny")
    program = rp.tile_program(cfg, rp.mac_tiles(cfg, seeds.rng(3, "watchdog programs"), 2))
    job, _ = prepare(program, cfg, [{}])
    job.watchdog_factor, job.watchdog_slack = 1000, 300_000_000      # it would stall for minutes
    built = cached_core(cfg, simulator, fault="stall_at_end")
    killer = _Killer("vvp" if simulator == "icarus" else built.design_name[:15])
    killer.start()
    try:
        with pytest.raises(SimulatorCrash) as info:
            run_on_rtl(built, job, tmp_path / "job")
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed, "the simulator process was never seen"
    assert info.value.exit_status == 3 and "crashed or exited early" in str(info.value)
    assert "sim.log" in str(info.value)


class _Killer(threading.Thread):
    """Kills the first descendant process of this one named `name`, a second after it appears."""

    def __init__(self, name: str):
        super().__init__(daemon=True)
        self.name, self.killed, self.stop = name, False, threading.Event()

    def run(self):
        me = os.getpid()
        while not self.stop.wait(0.2):
            for pid in _descendants(me):
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue
                if comm == self.name:
                    self.stop.wait(1.0)
                    try:
                        os.kill(pid, signal.SIGKILL)
                        self.killed = True
                    except ProcessLookupError:
                        pass
                    return


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    found, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_faulting_invocation_is_rolled_back_as_on_golden(simulator):
    """The RTL ends the invocation with golden's status and leaves the variable SRAM as golden's
    fault left it; the bench, as the host driver, then puts it back as the golden model's invoke
    does, and both states are compared."""

    cfg = load_config("tiny")
    job, golden = prepare(rp.faulting_variable_program(cfg), cfg, [{}])
    exp = job.invocations[0]
    assert exp.status == Status.VAR_READ_BEFORE_WRITE
    assert exp.fault_variable_flags[0] and not exp.variable_flags[0], "the fault must leave something to undo"
    result, bench = run_on_rtl(cached_core(cfg, simulator), job)
    assert result is not None, bench.failures
    r = result.invocations[0]
    assert r.status == exp.status
    assert np.array_equal(r.fault_variable_image, exp.fault_variable_image)
    assert np.array_equal(r.fault_variable_flags, exp.fault_variable_flags)
    assert np.array_equal(r.variable_image, exp.variable_image) and not r.variable_flags.any()
    assert variables_match(r, exp)


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_variable_in_external_memory_persists_on_the_rtl(simulator):
    """On tiny one variable of two_accumulators lives in external memory (VAR CHECK/MARK and DMA
    copies): three invocations on the RTL carry both variables, every output and the variable SRAM,
    its flags and the external home equal golden's, and golden equals the interpreter."""
    from compiler.interpreter import Interpreter
    from compiler.pipeline import compile_graph
    from sim.vectors.variable_graphs import accumulator_feeds, two_accumulators

    cfg = load_config("tiny")
    graph = two_accumulators()
    program = compile_graph(graph, cfg).program
    assert [v["placement"] for v in program.manifest["variables"]] == ["sram", "external"]
    feeds = accumulator_feeds(seeds.rng(8, "external variables"), 3)
    job, golden = prepare(program, cfg, feeds)
    interp = Interpreter(graph)
    for k, f in enumerate(feeds):
        want = interp.run(f)
        assert all(np.array_equal(golden.outputs[k][n], want[n]) for n in want)
    result, bench = run_on_rtl(cached_core(cfg, simulator), job)
    assert result is not None, bench.failures
    assert len(result.invocations) == 3
    for k, (r, exp) in enumerate(zip(result.invocations, job.invocations)):
        assert r.status == exp.status == Status.OK and r.cycles == exp.cycles, (k, r.note)
        assert variables_match(r, exp), f"invocation {k}: the variables differ from golden's"
        assert len(r.homes) == 1 and np.array_equal(r.homes[0][1], exp.homes[0][1])
        for place in program.outputs:
            want = np.ascontiguousarray(golden.outputs[k][place.name]).view(np.uint8).reshape(-1)
            assert np.array_equal(r.outputs[place.name], want), (k, place.name)
