"""Arm Vela's cycle estimates for the networks in models/: `models/<net>/vela_summary.json`.

    python -m sim.benchmarks.vela_figures [--only NAME ...] [--folder DIR] [--check]

Issue 13 measures the NPU against Arm's Ethos-U55-256 at the same 256 MACs, as Vela 5.2.0
estimates it (`cycles_npu`). Vela pins a flatbuffers that tosa-tools' pin excludes, so it lives
in its own venv, `build/vela-env`, made here once (about 20 s; nothing else needs it: the
benchmark reads the committed JSON files, and no test runs Vela).

Every folder with a `model.tflite` or `model.tosa` gets one entry per input file and
accelerator, with the system configuration and memory mode of Vela's own `Arm/vela.ini` that
../shared/models/*/vela_summary.json used (U55: Ethos_U55_High_End_Embedded, Shared_Sram; U65:
Ethos_U65_Client_Server, Dedicated_Sram_384KB; U85: Ethos_U85_SYS_DRAM_Mid, Dedicated_Sram_384KB).
`--folder ../shared/models --check` recomputes those files and compares the cycles (13171 for
cnn32 on U55-256 from .tflite), writing nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sim.paths import BUILD_ROOT, MODELS_DIR

VELA_PACKAGE = "ethos-u-vela==5.2.0"
ENV_DIR = BUILD_ROOT / "vela-env"
WORK_DIR = BUILD_ROOT / "vela"
SUMMARY = "vela_summary.json"
INPUTS = ("model.tflite", "model.tosa")
# accelerator -> (system configuration, memory mode) in Vela's Arm/vela.ini
ACCELERATORS = {
    "ethos-u55-128": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u55-256": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65-256": ("Ethos_U65_Client_Server", "Dedicated_Sram_384KB"),
    "ethos-u85-256": ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"),
}
# the columns of Vela's summary CSV kept in the JSON, in this order
CSV_FIELDS = ("accelerator_configuration", "system_config", "memory_mode", "core_clock", "cycles_total",
              "cycles_npu", "cycles_sram_access", "cycles_dram_access", "cycles_off_chip_flash_access", "nn_macs",
              "inference_time", "inferences_per_second", "sram_total_bytes", "dram_total_bytes",
              "off_chip_flash_total_bytes", "sram_memory_used", "dram_memory_used", "off_chip_flash_memory_used",
              "total_original_weights", "total_npu_encoded_weights", "passes_after_fusing")
CYCLE_FIELDS = ("cycles_total", "cycles_npu")


class VelaError(RuntimeError):
    """Vela's environment could not be made."""


def ensure_vela() -> Path:
    """build/vela-env with VELA_PACKAGE, made once; its `vela` command."""
    vela = ENV_DIR / "bin" / "vela"
    stamp = ENV_DIR / f".installed-{VELA_PACKAGE}"
    if stamp.exists() and vela.exists():
        return vela
    shutil.rmtree(ENV_DIR, ignore_errors=True)
    print(f"vela_figures: creating {ENV_DIR} with {VELA_PACKAGE}", flush=True)
    for cmd in ([sys.executable, "-m", "venv", str(ENV_DIR)],
                [str(ENV_DIR / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 VELA_PACKAGE]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_vela_environ())
        if proc.returncode:
            raise VelaError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    stamp.touch()
    return vela


def _vela_environ() -> dict:
    """The environment without the project venv's Python settings (Vela runs on its own venv)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}


def _number(text: str) -> int | float:
    """Vela writes every CSV number as a float; integral ones are kept as ints (as the shared files)."""
    value = float(text)
    return int(value) if value.is_integer() else value


def _operators(stdout: str, kind: str) -> str | None:
    """'14 (100.0%)' from the line 'NPU operators = 14 (100.0%)'. With --show-cpu-operations, as the
    shared files were made, Vela counts the network's own operators there (without it, its passes)."""
    for line in stdout.splitlines():
        if line.startswith(f"{kind} operators = "):
            return line.split(" = ", 1)[1].strip()
    return None


def run_vela(vela: Path, model: Path, accel: str, work: Path) -> dict:
    """One Vela run: the summary's figures, or the error that stopped it."""
    system, memory = ACCELERATORS[accel]
    out_dir = f"vela/{model.suffix.lstrip('.')}_{accel}"
    out = work / out_dir
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(vela), str(model.resolve()), "--accelerator-config", accel, "--config", "Arm/vela.ini",
           "--system-config", system, "--memory-mode", memory, "--output-dir", str(out), "--show-cpu-operations"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=_vela_environ())
    entry = {"input": model.name, "accel": accel, "rc": proc.returncode,
             "wall_s": round(time.monotonic() - t0, 2), "out_dir": out_dir}
    summary = out / f"{model.stem}_summary_{system}.csv"
    if proc.returncode or not summary.exists():
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        return entry | {"error": lines[-1].strip() if lines else "no summary written"}
    with summary.open() as f:
        row = next(csv.DictReader(f))
    for key in CSV_FIELDS:
        entry[key] = row[key] if key in ("accelerator_configuration", "system_config", "memory_mode") \
            else _number(row[key])
    entry["cpu_operators"] = _operators(proc.stdout, "CPU")
    entry["npu_operators"] = _operators(proc.stdout, "NPU")
    return entry


def network_figures(vela: Path, folder: Path) -> list[dict]:
    """Every input file of the network x every accelerator."""
    work = WORK_DIR / folder.name
    work.mkdir(parents=True, exist_ok=True)
    return [run_vela(vela, folder / name, accel, work)
            for name in INPUTS if (folder / name).exists() for accel in ACCELERATORS]


def compare(name: str, got: list[dict], want: list[dict]) -> list[str]:
    """The cycle figures that differ from a committed summary's."""
    key = lambda e: (e["input"], e["accel"])   # noqa: E731
    committed = {key(e): e for e in want}
    diffs = []
    for e in got:
        old = committed.get(key(e), {})
        for field in ("rc", *CYCLE_FIELDS):
            if e.get(field) != old.get(field):
                diffs.append(f"{name} {e['input']} {e['accel']}: {field} {e.get(field)} (committed {old.get(field)})")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.vela_figures", description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=str(MODELS_DIR), help="a folder of networks (default: models/)")
    ap.add_argument("--only", action="append", default=[], help="a network's folder name (repeatable)")
    ap.add_argument("--check", action="store_true", help="compare with the committed files; write nothing")
    args = ap.parse_args(argv)
    folders = sorted(p.parent for p in Path(args.folder).glob("*/model.*")
                     if p.name in INPUTS and (not args.only or p.parent.name in args.only))
    folders = list(dict.fromkeys(folders))
    if not folders:
        print(f"vela_figures: no network with {' or '.join(INPUTS)} under {args.folder}")
        return 2
    vela = ensure_vela()
    diffs = []
    for folder in folders:
        figures = network_figures(vela, folder)
        u55 = next((e for e in figures if e["accel"] == "ethos-u55-256" and e["rc"] == 0), {})
        print(f"{folder.name:12s} {len(figures)} runs, {sum(e['rc'] == 0 for e in figures)} ok; "
              f"U55-256 from {u55.get('input', '-')}: cycles_npu {u55.get('cycles_npu', '-')}", flush=True)
        target = folder / SUMMARY
        if args.check:
            want = json.loads(target.read_text()) if target.exists() else []
            diffs += compare(folder.name, figures, want)
        else:
            target.write_text(json.dumps(figures, indent=1) + "\n")
    if args.check:
        print("\n".join(diffs) if diffs else "vela_figures: every cycle figure equals the committed one")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
