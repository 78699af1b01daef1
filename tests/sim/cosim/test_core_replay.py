"""The NPU core RTL against the golden model on constrained-random MAC tiles: every output byte
and the core's own cycle counter must equal golden's, on both simulators."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Status
from sim import seeds
from sim.rtl.core import cached_core, run_core_job
from sim.vectors.random_tiles import faulty_tiles, random_tiles

CASES = [("tiny", "verilator", 150), ("tiny", "icarus", 60), ("default", "verilator", 60),
         ("default", "icarus", 20)]


@pytest.mark.rtl
@pytest.mark.parametrize("config,simulator,n", CASES, ids=[f"{c}-{s}" for c, s, _ in CASES])
def test_core_random_tiles_match_golden(config, simulator, n):
    cfg = load_config(config)
    tiles = random_tiles(cfg, n, seed=seeds.seed_for(f"core random tiles {config} {simulator}", n))
    results, bench = run_core_job(cached_core(config, simulator), "replay_tiles", {"config": config, "tiles": tiles})
    records = results["tiles"]
    assert len(records) == n
    for r in records:
        assert r["status"] == Status.OK, f"tile {r['tile']}: status {Status(r['status']).name}"
        assert np.array_equal(r["actual"], r["expected"]), f"tile {r['tile']}: bytes {r['mismatch_offsets'][:8]} differ"
        assert r["cycles"] == r["expected_cycles"], f"tile {r['tile']}: {r['cycles']} cycles, model says {r['expected_cycles']}"
    assert bench.ok


@pytest.mark.rtl
def test_rescale_rounding_fault_is_caught():
    """A core built with the rescale stage's rounding dropped must fail the same comparison."""
    # The default configuration: the same faulty build as the `npu sim` fault test uses.
    cfg = load_config("default")
    tiles = random_tiles(cfg, 30, seed=seeds.seed_for("rescale fault tiles", 5))
    results, bench = run_core_job(cached_core("default", "verilator", fault="rescale_rounding"), "replay_tiles",
                                  {"config": "default", "tiles": tiles})
    bad = [r for r in results["tiles"] if not r["ok"]]
    assert not bench.ok
    assert len(bad) >= 10, f"only {len(bad)} of 30 tiles caught the fault"
    assert all(r["status"] == Status.OK and r["mismatch_offsets"] for r in bad)


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ("verilator", "icarus"))
def test_core_reports_the_golden_status_for_faulty_tiles(simulator):
    """Tiles the golden model refuses (empty, too many pixels, unimplemented types) end with the
    same completion code on the core, which writes nothing where the valid tile would have."""
    tiles = faulty_tiles(load_config("tiny"), seed=seeds.seed_for("faulty tiles", 11))
    results, bench = run_core_job(cached_core("tiny", simulator), "replay_tiles", {"config": "tiny", "tiles": tiles})
    got = {t["what"]: (Status(r["status"]).name, Status(r["expected_status"]).name)
           for t, r in zip(tiles, results["tiles"])}
    wrong = {what: pair for what, pair in got.items() if pair[0] != pair[1]}
    assert not wrong, f"(core, golden) status: {wrong}"
    written = [t["what"] for t, r in zip(tiles, results["tiles"]) if r["mismatch_offsets"]]
    assert not written, f"faulting commands wrote the output SRAM: {written}"
    assert all(len(t["expected"]) > 0 for t in tiles)
    assert bench.ok
