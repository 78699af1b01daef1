"""cocotb bench: sim/benches/unit_vector_bench.py's runs, plus two things some units need between
runs (jobs come from sim/unit_bench_backdoor.py):

- `reset_before`: hold `rst` for two clocks before the run (the variable SRAM's contents and flags
  must survive invocation starts but not a reset; its reset walk then runs while the harness's
  first request waits for `ready`);
- `backdoor`: words written straight into a memory of the unit before the run, by hierarchical
  path (the MAC array's accumulators preloaded next to the int48 limits).

Each run is otherwise exactly unit_vector_bench's: stimulus loaded, start, one wait for done.
"""

from __future__ import annotations

import pickle

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from sim.benches.unit_vector_bench import _job, run_one
from sim.rtl_build import CLOCK_PERIOD_NS


def _handle(dut, path: str):
    h = dut
    for part in path.split("."):
        h = getattr(h, part)
    return h


@cocotb.test()
async def run_vectors_backdoor(dut):
    job_dir, job = _job()
    layout = job["layout"]
    Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
    dut.start.value = 0
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    results, bad = [], []
    previous: dict = {}
    for run in job["runs"]:
        if run.get("reset_before"):
            dut.rst.value = 1
            await RisingEdge(dut.clk)
            await RisingEdge(dut.clk)
            dut.rst.value = 0
            await RisingEdge(dut.clk)
        for path, writes in run.get("backdoor", {}).items():
            arr = _handle(dut, path)
            for i, v in writes:
                arr[i].value = v
        res = await run_one(dut, layout, run, previous)
        previous = run["inputs"]
        results.append(res)
        with open(job_dir / "results.pkl", "wb") as f:
            pickle.dump({"runs": results}, f)
        if run["expected"] is not None:
            for name, exp in run["expected"].items():
                act = res["words"][name]
                diff = [i for i, (a, e) in enumerate(zip(act, exp)) if a != e]
                if diff or len(act) != len(exp):
                    bad.append(f"{run['label']}/{name}: {len(diff)} of {len(exp)} differ, first at {diff[:5]}")
    assert not bad, "; ".join(bad)
