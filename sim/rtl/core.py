"""The NPU core RTL as a simulation target: its design per configuration, and job runs.

`core_design(cfg, fault)` is the RtlDesign for one configuration (built once per run by
sim.rtl.build, and not regenerated while the RTL's sources are unchanged); sim/cosim/program_run.py
runs programs on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from firmware_model.arch.config import NpuConfig
from sim.rtl.build import BuiltRtl, RtlDesign, build
from sim.rtl.sim_top import CORE, TOP, sim_top_verilog



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
                      source_files=_rtl_sources(), public_all=False, cfg=cfg, fault=fault)


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
