"""sim.unit_bench runs with per-run extras: a reset before the run and backdoor memory writes.

`UnitBench.run()` resets once, at the start of the simulation, and loads only the harness's
vector memories. The MAC array's bench preloads accumulators next to the int48 limits (wrapping
cannot be reached by accumulation in a test's length), and the variable SRAM's bench resets
between runs (its contents must survive invocation starts, and only a reset clears them). Both go
through `run_with_extras()`, which packs the runs with UnitBench's own code and runs them with
sim/benches/unit_backdoor_bench.py (unit_vector_bench's run, plus the extras).

An extra is a dict: {"reset_before": bool, "backdoor": {"unit.mac.acc_mem": [(index, word), ...]}}
(paths below the harness top, as the generated Verilog names the instances and arrays).
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import time
from pathlib import Path

from sim.rtl_build import run_bench
from sim.unit_bench import (Mutation, UnitBench, UnitBenchError, UnitRunResults, VectorRun,
                            _jobs_root)

BACKDOOR_BENCH_MODULE = "sim.benches.unit_backdoor_bench"


def run_with_extras(bench: UnitBench, simulator: str, runs: list[VectorRun], extras: list[dict], *,
                    mutation: Mutation | None = None, keep: bool = False) -> UnitRunResults:
    if len(extras) != len(runs):
        raise UnitBenchError(f"{len(extras)} extras for {len(runs)} runs")
    built = bench.built(simulator, mutation)
    packed = bench._pack_runs(runs)
    for p, e in zip(packed, extras):
        unknown = set(e) - {"reset_before", "backdoor"}
        if unknown:
            raise UnitBenchError(f"unknown run extras {sorted(unknown)}")
        p.update(e)
    job_dir = Path(tempfile.mkdtemp(prefix=f"{bench.spec.name}-", dir=_jobs_root()))
    with open(job_dir / "job.pkl", "wb") as f:
        pickle.dump({"layout": bench.layout, "runs": packed}, f)
    t0 = time.monotonic()
    result = run_bench(built, BACKDOOR_BENCH_MODULE, testcase="run_vectors_backdoor", test_dir=job_dir,
                       extra_env={"NPU_BENCH_JOB": str(job_dir)})
    wall = time.monotonic() - t0
    res_file = job_dir / "results.pkl"
    if not res_file.exists():
        raise UnitBenchError(f"{bench.spec.name} on {simulator}: the bench wrote no results "
                             f"({'; '.join(result.failures) or 'no failure recorded'}); see {job_dir}")
    with open(res_file, "rb") as f:
        raw = pickle.load(f)
    if len(raw["runs"]) != len(packed):
        raise UnitBenchError(f"{bench.spec.name} on {simulator}: {len(raw['runs'])} of {len(packed)} runs "
                             f"finished ({'; '.join(result.failures)[:500]}); see {job_dir}")
    out = UnitRunResults(simulator, [bench._result(p, r) for p, r in zip(packed, raw["runs"])], result, wall)
    if out.ok and not keep:
        shutil.rmtree(job_dir, ignore_errors=True)
    return out
