"""The NPU core RTL as a simulation target: its design per configuration, and job runs.

`core_design(cfg, fault)` is the RtlDesign for one configuration (built once per run by
sim.rtl.build); `run_core_job()` hands a job to the cocotb benches in sim/cosim/core_bench.py
and returns their results.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
import shutil
import tempfile
from pathlib import Path

from firmware_model.arch.config import NpuConfig
from sim.paths import BUILD_ROOT
from sim.rtl.build import BuiltRtl, RtlDesign, build, run_bench
from sim.rtl.sim_top import CORE, TOP, sim_top_verilog

BENCH_MODULE = "sim.cosim.core_bench"


def _rtl_sources() -> tuple[Path, ...]:
    """The files the core's Verilog is made from: hw/, the contract it reads, the sim top."""
    from sim.paths import REPO_ROOT

    files = sorted((REPO_ROOT / "hw").glob("*.py")) + sorted((REPO_ROOT / "firmware_model" / "arch").glob("*.py"))
    files += [REPO_ROOT / "firmware_model" / "tosa_ops" / "dtypes.py", REPO_ROOT / "firmware_model" / "errors.py",
              REPO_ROOT / "sim" / "rtl" / "sim_top.py", REPO_ROOT / "sim" / "rtl" / "core.py"]
    return tuple(files)


@dataclass(frozen=True)
class CoreDesign(RtlDesign):
    """The core (Amaranth, module `npu_core`) inside its simulation top (sim/rtl/sim_top.py)."""
    cfg: NpuConfig | None = None
    fault: str | None = None

    def verilog_text(self) -> str:
        from amaranth.back import verilog

        from hw.npu_core import NpuCore

        core = verilog.convert(NpuCore(self.cfg, fault=self.fault), name=CORE, emit_src=False)
        return core + sim_top_verilog(self.cfg)


def core_design(cfg: NpuConfig, fault: str | None = None) -> RtlDesign:
    return CoreDesign(name=TOP, elaborate=None, params=(cfg.key(), fault), verilator_extra=("--timing",),
                      source_files=_rtl_sources(), cfg=cfg, fault=fault)


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
