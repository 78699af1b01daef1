"""cocotb bench for a unit in the vector harness (sim/verification/gateware/vector_harness.py); jobs come from
sim/verification/unit_bench.py.

For each run of the job: set the static ports, write the stimulus words into the stimulus memories
(backdoor, no clocks), set the counts and stall patterns, pulse `start`, then wait once for `done`
— no Python runs per clock while the unit computes. Read the captured words back, compare them
with the expected words when the job has them, and record cycles and wall times. Writes
`results.pkl` into the job directory and fails the test if any run differs.
"""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge, with_timeout

from sim.rtl.build import CLOCK_PERIOD_NS


def _job() -> tuple[Path, dict]:
    job_dir = Path(os.environ["NPU_BENCH_JOB"])
    with open(job_dir / "job.pkl", "rb") as f:
        return job_dir, pickle.load(f)


def _array(dut, memory: str):
    return getattr(dut, memory).mem


def load_words(dut, memory: str, words: list[int]) -> None:
    arr = _array(dut, memory)
    for i, w in enumerate(words):
        arr[i].value = w


def read_words(dut, memory: str, n: int) -> list[int]:
    """The first n words; a word with X or Z bits reads as -1, which equals no expected word (a
    faulty design, e.g. a mutant passing a pipeline bubble's undefined data, fails the compare
    instead of stopping the bench)."""
    arr = _array(dut, memory)
    out = []
    for i in range(n):
        v = arr[i].value
        out.append(v.to_unsigned() if v.is_resolvable else -1)
    return out


async def run_one(dut, layout: dict, run: dict, previous_inputs: dict) -> dict:
    t0 = time.perf_counter()
    for port, value in run["static"].items():
        getattr(dut, port).value = value
    for name, spec in layout["inputs"].items():
        words = run["inputs"].get(name, [])
        if previous_inputs.get(name) is not words:
            load_words(dut, spec["memory"], words)
        getattr(dut, spec["count"]).value = len(words)
    for name, spec in layout["outputs"].items():
        getattr(dut, spec["count"]).value = run["n_out"].get(name, 0)
    dut.valid_pattern.value = run["valid_pattern"]
    dut.ready_pattern.value = run["ready_pattern"]
    await RisingEdge(dut.clk)
    t1 = time.perf_counter()
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await with_timeout(RisingEdge(dut.done), run["timeout_cycles"] * CLOCK_PERIOD_NS, "ns")
    await ReadOnly()
    t2 = time.perf_counter()
    cycles, first_out = int(dut.cycles.value), int(dut.first_out.value)
    words = {name: read_words(dut, layout["outputs"][name]["memory"], n) for name, n in run["n_out"].items()}
    t3 = time.perf_counter()
    await RisingEdge(dut.clk)
    return {"words": words, "cycles": cycles, "first_out": first_out, "run_seconds": t2 - t1,
            "load_seconds": t1 - t0, "read_seconds": t3 - t2}


def _handle(dut, path: str):
    h = dut
    for part in path.split("."):
        h = getattr(h, part)
    return h


async def run_extras(dut, run: dict) -> None:
    """What a unit may need before a run (UnitBench.run's `extras`):
    `reset_before`: hold `rst` for two clocks (the variable SRAM's contents and flags must survive
    invocation starts but not a reset); `backdoor`: words written straight into a memory of the
    unit, by hierarchical path below the harness (the MAC array's accumulators preloaded next to
    the int48 limits, which accumulating within a test's length cannot reach)."""
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


@cocotb.test()
async def run_vectors(dut):
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
        await run_extras(dut, run)
        res = await run_one(dut, layout, run, previous)
        previous = run["inputs"]
        results.append(res)
        # Save after every run: a later timeout still leaves the earlier results readable.
        with open(job_dir / "results.pkl", "wb") as f:
            pickle.dump({"runs": results}, f)
        if run["expected"] is not None:
            for name, exp in run["expected"].items():
                act = res["words"][name]
                diff = [i for i, (a, e) in enumerate(zip(act, exp)) if a != e]
                if diff or len(act) != len(exp):
                    bad.append(f"{run['label']}/{name}: {len(diff)} of {len(exp)} differ, first at {diff[:5]}")
    assert not bad, "; ".join(bad)
