"""cocotb benches for the NPU core (imported by the simulator; jobs come from sim/cosim/network.py).

`cosim_program`: runs a compiled program on the golden model inside the simulator process; every
MAC command (a tile) is also run on the RTL with the same SRAM contents, compared byte for byte
with golden's result, and the RTL's result replaces golden's in the modelled SRAM ("chained"), so
the network outputs written at the end are the RTL's own.

`replay_tiles`: runs a list of prepared tiles (operand images, registers, expected output) — the
unit-level check of the core against golden on constrained-random tiles.

Both write `results.pkl` into the job directory and fail the cocotb test on any mismatch.
"""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import cocotb
import numpy as np

from firmware_model.arch.isa import Sram, Status
from sim.cosim.tile_driver import RtlTileDriver, expected_tile_cycles, tile_commands
from sim.rtl.core import rtl_supports_mac

# Timeout per tile: the cycle model's prediction times this factor, plus slack.
TIMEOUT_FACTOR = 4
TIMEOUT_SLACK = 2000


def _job() -> tuple[Path, dict]:
    job_dir = Path(os.environ["NPU_BENCH_JOB"])
    with open(job_dir / "job.pkl", "rb") as f:
        return job_dir, pickle.load(f)


def _compare(expected: np.ndarray, actual: np.ndarray) -> list[int]:
    """Byte offsets (within the range) where the RTL differs from golden."""
    return np.flatnonzero(expected != actual).tolist()


async def _run_one(driver: RtlTileDriver, *, regs, mode, tile_id, images, output_before, output_range,
                   expected, golden_cycles, expected_status=Status.OK) -> dict:
    """One tile on the RTL. A tile golden refuses (`expected_status` not OK) must end with that
    status and leave the output range as `expected` (what it held before); its cycles are not
    compared (the command stops at decode)."""
    n_cmds = len(tile_commands(regs, mode, tile_id))
    want_cycles = expected_tile_cycles(n_cmds, golden_cycles)
    t0 = time.perf_counter()
    run = await driver.run_tile(regs, mode, tile_id, images, output_before, output_range,
                                TIMEOUT_FACTOR * want_cycles + TIMEOUT_SLACK)
    diff = _compare(expected, run.output) if run.status == Status.OK or expected_status != Status.OK else []
    if expected_status == Status.OK:
        ok = run.status == Status.OK and not diff and run.cycles == want_cycles
    else:
        ok = run.status == expected_status and not diff
    return {
        "tile": tile_id, "status": int(run.status), "expected_status": int(expected_status),
        "cycles": run.cycles, "expected_cycles": want_cycles,
        "mismatch_offsets": diff, "actual": run.output, "expected": expected,
        "sim_ns": (run.start_ns, run.end_ns), "wall_s": time.perf_counter() - t0, "ok": ok,
    }


@cocotb.test()
async def cosim_program(dut):
    from firmware_model.golden.model import GoldenModel
    from firmware_model.arch.config import load_config
    from firmware_model.arch.program import Program

    job_dir, job = _job()
    cfg = load_config(job["config"])
    program = Program.load(job["program_dir"])
    model = GoldenModel(program, cfg)
    driver = RtlTileDriver(dut, cfg)
    await driver.start_clock()

    records: list[dict] = []
    skipped: list[dict] = []   # MAC tiles using features this RTL lacks: golden only
    pending: list = []

    def hook(event):
        pending.append(event)
        return None

    model.tile_hook = hook
    outputs_per_invocation = []
    for inputs in job["invocations"]:
        model.begin_invocation(inputs)
        # The model stops after every command; a MAC's tile then runs on the RTL and its result
        # replaces golden's before the next command reads it.
        for _ in model.run_steps():
            while pending:
                ev = pending.pop()
                lacking = rtl_supports_mac(ev.regs, ev.mode, cfg)
                if lacking is not None:
                    skipped.append({"tile": ev.tile_id, "command_index": ev.command_index, "reason": lacking})
                    continue
                a, b = ev.result.region.output
                images = {Sram.INPUT: (ev.memories.sram[Sram.INPUT], ev.result.region.input),
                          Sram.WEIGHT: (ev.memories.sram[Sram.WEIGHT], ev.result.region.weight),
                          Sram.PARAM: (ev.memories.sram[Sram.PARAM], ev.result.region.param)}
                expected = ev.memories.sram[Sram.OUTPUT][a:b].copy()
                rec = await _run_one(driver, regs=ev.regs, mode=ev.mode, tile_id=ev.tile_id, images=images,
                                     output_before=ev.output_before, output_range=(a, b), expected=expected,
                                     golden_cycles=ev.result.cycles)
                rec.update({"command_index": ev.command_index, "output_range": (a, b),
                            "out_shape": ev.result.out_shape, "regs": ev.regs})
                records.append(rec)
                # Chained: what the RTL wrote is what the rest of the program reads.
                if rec["status"] == Status.OK:
                    model.mem.sram[Sram.OUTPUT][a:b] = rec["actual"]
        outputs_per_invocation.append(model.read_outputs())

    with open(job_dir / "results.pkl", "wb") as f:
        pickle.dump({"tiles": records, "skipped": skipped, "outputs": outputs_per_invocation,
                     "words_loaded": driver.words_loaded}, f)
    bad = [r["tile"] for r in records if not r["ok"]]
    assert not bad, f"{len(bad)} of {len(records)} tiles differ from golden: {bad[:20]}"


@cocotb.test()
async def replay_tiles(dut):
    from firmware_model.arch.config import load_config

    job_dir, job = _job()
    cfg = load_config(job["config"])
    driver = RtlTileDriver(dut, cfg)
    await driver.start_clock()
    records = []
    for t in job["tiles"]:
        rec = await _run_one(driver, regs=t["regs"], mode=t["mode"], tile_id=t["tile"], images=t["images"],
                             output_before=t["output_before"], output_range=t["output_range"],
                             expected=t["expected"], golden_cycles=t["golden_cycles"],
                             expected_status=t.get("expected_status", Status.OK))
        records.append(rec)
    with open(job_dir / "results.pkl", "wb") as f:
        pickle.dump({"tiles": records}, f)
    bad = [r["tile"] for r in records if not r["ok"]]
    assert not bad, f"{len(bad)} of {len(records)} tiles differ from golden: {bad[:20]}"
