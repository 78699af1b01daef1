"""The core's functional coverage: sampled only from what the scoreboard verified, exported as
cocotb-coverage XML, merged by summing hits, with holes listed and explained."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from firmware_model.arch.config import load_config
from sim.cosim.network import DEFAULT_MODEL, run_sim
from sim.paths import MODELS_DIR
from sim.verification.core_coverage import (EXPLAINED_HOLES, UNREACHABLE, command_bin, command_bins, holes, merge,
                                            summary)

pytestmark = pytest.mark.rtl


def hits(path, item: str) -> dict[str, int]:
    for node in ET.parse(path).getroot().iter():
        if node.get("abs_name") == f"top.{item}":
            return {b.get("bin"): int(b.get("hits")) for b in node}
    raise KeyError(item)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    from sim.cosim.report import write_reports

    out = tmp_path_factory.mktemp("cov-mlp")
    rep = run_sim(MODELS_DIR / "mlp" / "model.tosa", load_config("tiny"), "verilator", progress=False)
    write_reports(rep, out)
    return rep, out / "coverage.xml"


def test_a_run_writes_its_coverage(mlp_run):
    rep, path = mlp_run
    assert rep.ok
    commands = hits(path, "core.command")
    assert set(commands) == set(command_bins())
    # counted per invocation that ran it: mlp runs HOST (its CLZ), MAC, ELTWISE and POOL
    for kind in ("MAC.CONV2D", "HOST", "END", "DMA_LOAD.INPUT", "DMA_STORE.OUTPUT", "POOL.MAX"):
        assert commands[kind] == 1, kind
    assert commands["NOP"] == commands["BARRIER"] == 0
    # every tile the scoreboard passed, counted once per cover point of its unit
    stall = hits(path, "core.stall")
    assert sum(stall.values()) == rep.passed == len(rep.tiles)
    assert sum(hits(path, "core.mac.out_dtype").values()) == sum(t.unit == "MAC" for t in rep.tiles)


def test_tiles_the_scoreboard_failed_are_not_counted(tmp_path):
    rep = run_sim(DEFAULT_MODEL, load_config("default"), "verilator", fault="rescale_rounding", progress=False)
    failed = [t for t in rep.tiles if not t.ok]
    assert failed
    path = rep.coverage.export(tmp_path / "coverage.xml")
    assert sum(hits(path, "core.stall").values()) == rep.passed < len(rep.tiles)
    # the invocation did not match golden: its commands are not counted
    assert sum(hits(path, "core.command").values()) == 0


def test_merge_sums_hits_and_lists_holes(mlp_run, tmp_path):
    _, path = mlp_run
    merged = merge([path, path], tmp_path / "merged.xml")
    one, two = hits(path, "core.command"), hits(merged, "core.command")
    assert all(two[k] == 2 * one[k] for k in one)
    found = holes(merged)
    assert ("core.command", "NOP") in found and ("core.command", "MAC.CONV2D") not in found
    text = summary(merged)
    assert "UNEXPLAINED" in text and f"holes: {len(found)}" in text


def test_bins_and_exclusions_are_consistent():
    from firmware_model.arch.isa import Opcode, Sram

    bins = command_bins()
    assert not set(bins) & set(UNREACHABLE) and len(bins) == len(set(bins))
    assert command_bin(Opcode.DMA_LOAD, Sram.LUT) == "DMA_LOAD.LUT" in bins
    assert all(reason for reason in UNREACHABLE.values()) and all(EXPLAINED_HOLES.values())
