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



def _rtl_sources(mutated: bool = False) -> tuple[Path, ...]:
    """The files the core's Verilog is made from: hw/, the contract it reads, the sim top (and for
    a mutant, the mutations and how they are applied)."""
    from sim.paths import REPO_ROOT

    files = sorted((REPO_ROOT / "hw").glob("*.py")) + sorted((REPO_ROOT / "firmware_model" / "arch").glob("*.py"))
    files += [REPO_ROOT / "firmware_model" / "tosa_ops" / "dtypes.py", REPO_ROOT / "firmware_model" / "errors.py",
              REPO_ROOT / "sim" / "rtl" / "sim_top.py", REPO_ROOT / "sim" / "rtl" / "core.py"]
    if mutated:
        files += sorted((REPO_ROOT / "sim" / "vectors").glob("*.py")) + [
            REPO_ROOT / "sim" / "verification" / "core_mutants.py", REPO_ROOT / "sim" / "verification" / "unit_bench.py",
            REPO_ROOT / "sim" / "verification" / "core_level_mutants.py"]
    return tuple(files)


@dataclass(frozen=True)
class CoreDesign(RtlDesign):
    """The core (Amaranth, module `npu_core`) inside its simulation top (sim/rtl/sim_top.py)."""
    cfg: NpuConfig | None = None
    fault: str | None = None
    # (unit or part, Mutation): one of a unit's contract mutations or a core-level mutant made in
    # the core's Verilog (sim/verification/core_mutants.py)
    mutation: tuple | None = None

    def verilog_text(self) -> str:
        from amaranth.back import verilog

        from hw.npu_core import NpuCore

        core = verilog.convert(NpuCore(self.cfg, fault=self.fault), name=CORE, emit_src=False)
        if self.mutation is not None:
            from sim.verification.core_mutants import apply_in_core

            core = apply_in_core(self.mutation[1], self.mutation[0], core)
        return core + sim_top_verilog(self.cfg)


def core_design(cfg: NpuConfig, fault: str | None = None, mutation: tuple | None = None) -> RtlDesign:
    what = None if mutation is None else (mutation[0], mutation[1].name)
    return CoreDesign(name=TOP, elaborate=None, params=(cfg.key(), fault, what), verilator_extra=("--timing",),
                      source_files=_rtl_sources(mutation is not None), public_all=False, cfg=cfg, fault=fault,
                      mutation=mutation)


def build_core(cfg: NpuConfig, simulator: str, fault: str | None = None, waves: bool = False,
               mutation: tuple | None = None) -> BuiltRtl:
    return build(core_design(cfg, fault, mutation), simulator, waves=waves)


_BUILT: dict = {}


def cached_core(config, simulator: str, fault: str | None = None, waves: bool = False,
                mutation: tuple | None = None) -> BuiltRtl:
    """build_core() memoised for this process (a configuration name or NpuConfig): a test session
    generates and builds each configuration once."""
    from firmware_model.arch.config import load_config

    cfg = load_config(config) if isinstance(config, str) else config
    key = (cfg.key(), simulator, fault, waves, None if mutation is None else (mutation[0], mutation[1].name))
    if key not in _BUILT:
        _BUILT[key] = build_core(cfg, simulator, fault=fault, waves=waves, mutation=mutation)
    return _BUILT[key]
