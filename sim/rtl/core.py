"""The NPU core RTL as a simulation target: its design per configuration, and job runs.

`core_design(cfg, fault)` is the RtlDesign for one configuration (built once per run by
sim.rtl.build); `run_core_job()` hands a job to the cocotb benches in sim/cosim/core_bench.py
and returns their results.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
from pathlib import Path

from firmware_model.arch.config import NpuConfig
from sim.paths import BUILD_ROOT
from sim.rtl.build import BuiltRtl, RtlDesign, build, run_bench

TOP = "npu_core"


def rtl_supports_mac(regs: dict[int, int], mode: int, cfg: NpuConfig) -> str | None:
    """None if the core RTL runs this (golden-valid) MAC command, else what it lacks: the RTL's gaps
    are rules of firmware_model/arch/checks.py, the same table its CHECK state elaborates."""
    from firmware_model.arch.checks import MAC_RTL_GAPS, first_violation
    from firmware_model.arch.registers import Registers

    broken = first_violation(MAC_RTL_GAPS, Registers(regs), mode, cfg)
    return None if broken is None else broken.text


BENCH_MODULE = "sim.cosim.core_bench"


def core_design(cfg: NpuConfig, fault: str | None = None) -> RtlDesign:
    from hw.npu_core import NpuCore

    name = TOP
    return RtlDesign(name=name, elaborate=lambda: NpuCore(cfg, fault=fault), params=(cfg.key(), fault))


def build_core(cfg: NpuConfig, simulator: str, fault: str | None = None, waves: bool = False) -> BuiltRtl:
    return build(core_design(cfg, fault), simulator, waves=waves)


_BUILT: dict = {}


def cached_core(config, simulator: str, fault: str | None = None, waves: bool = False) -> BuiltRtl:
    """build_core() memoised for this process (a configuration name or NpuConfig): a test session
    generates and builds each configuration once."""
    from firmware_model.arch.config import load_config

    cfg = load_config(config) if isinstance(config, str) else config
    key = (cfg.key(), simulator, fault, waves)
    if key not in _BUILT:
        _BUILT[key] = build_core(cfg, simulator, fault=fault, waves=waves)
    return _BUILT[key]


def run_core_job(built: BuiltRtl, testcase: str, job: dict, *, job_dir: Path | None = None,
                 waves: bool = False) -> tuple[dict, "object"]:
    """Run one bench (`cosim_program` or `replay_tiles`) with `job`; returns (results, BenchResult)."""
    own_dir = job_dir is None
    job_dir = Path(job_dir or tempfile.mkdtemp(prefix="job-", dir=BUILD_ROOT))
    job_dir.mkdir(parents=True, exist_ok=True)
    with open(job_dir / "job.pkl", "wb") as f:
        pickle.dump(job, f)
    results_file = job_dir / "results.pkl"
    if results_file.exists():
        results_file.unlink()
    bench = run_bench(built, BENCH_MODULE, testcase=testcase, test_dir=job_dir,
                      extra_env={"NPU_BENCH_JOB": str(job_dir)}, waves=waves)
    results = {}
    if results_file.exists():
        with open(results_file, "rb") as f:
            results = pickle.load(f)
    if own_dir and bench.ok:
        shutil.rmtree(job_dir, ignore_errors=True)
    return results, bench
