"""Benchmark: whole networks on the core RTL, every tile checked, per simulator and configuration.

    python -m sim.benchmarks.cosim [--simulators verilator,icarus] [--configs default]
                                   [--models DIR] [--icarus-max-cycles N]

For each network in models/ (or DIR) it runs what `npu sim` runs — the compiled program on the
RTL from START to END, each invocation in turn, the scoreboard checking every tile against the
golden model — and prints: tiles passed, the RTL's cycles (and whether they equal the cycle
model's, invocation by invocation), the seconds the simulator spent on the invocations and the
simulated cycles per second there (the figure issue 11 sets at 1,000,000 on Verilator), the part of
those seconds that was the bench's own work (scoreboard, host operations, loads and dumps), the
simulator process's seconds (start-up and image load too) and the whole command's. The RTL is
built once per simulator and configuration (the build's seconds are printed apart).

Icarus runs a few thousand cycles per second: a network whose cycle model exceeds
--icarus-max-cycles is listed as not run on Icarus, with its cycle count, rather than left out.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sim.paths import MODELS_DIR


def main(argv: list[str] | None = None) -> int:
    from firmware_model.arch.config import load_config
    from firmware_model.errors import NpuBenchError
    from sim.cosim.network import run_sim
    from sim.rtl.core import cached_core
    from sim.models.model_data import ModelData

    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.cosim", description=__doc__.splitlines()[0])
    ap.add_argument("--simulators", default="verilator,icarus")
    ap.add_argument("--configs", default="default")
    ap.add_argument("--models", type=Path, default=MODELS_DIR, help="a folder of network folders (model.tosa)")
    ap.add_argument("--icarus-max-cycles", type=int, default=400_000)
    args = ap.parse_args(argv)

    dirs = sorted(p for p in args.models.iterdir() if (p / "model.tosa").exists())
    status = 0
    for simulator in args.simulators.split(","):
        for config in args.configs.split(","):
            cfg = load_config(config)
            t0 = time.monotonic()
            built = cached_core(cfg, simulator)
            print(f"-- {simulator}, {config}: RTL {'reused' if built.reused else 'built'} "
                  f"({built.build_seconds:.1f} s to build; {time.monotonic() - t0:.1f} s now)", flush=True)
            print(f"{'network':12s} {'tiles':>11s} {'inv':>3s} {'RTL cycles':>11s} {'=model':>6s} {'run s':>7s} "
                  f"{'k cyc/s':>8s} {'bench s':>7s} {'process s':>9s} {'all s':>6s}", flush=True)
            for d in dirs:
                model = d / "model.tosa"
                try:
                    invocations = ModelData.of(d).invocations if (d / "io.json").exists() else 1
                except NpuBenchError:
                    invocations = 1
                if simulator == "icarus":
                    cycles = _model_cycles(d, cfg)
                    if cycles > args.icarus_max_cycles:
                        print(f"{d.name:12s} not run on Icarus: {cycles} model cycles > --icarus-max-cycles "
                              f"{args.icarus_max_cycles}", flush=True)
                        continue
                rep = run_sim(model, cfg, simulator, invocations=invocations, progress=False)
                exact = all(i.rtl_cycles == i.model_cycles for i in rep.invocations)
                print(f"{d.name:12s} {rep.passed:>5d}/{len(rep.tiles):<5d} {len(rep.invocations):>3d} "
                      f"{rep.rtl_cycles:>11d} {'yes' if exact else 'NO':>6s} {rep.run_seconds:>7.2f} "
                      f"{rep.cycles_per_second / 1e3:>8.0f} {rep.bench_seconds:>7.2f} {rep.sim_seconds:>9.2f} "
                      f"{rep.wall_seconds:>6.1f}", flush=True)
                if not rep.ok:
                    status = 1
                    print(f"   MISMATCH: see {rep.model} report (npu sim {model} --config {config} "
                          f"--simulator {simulator})", flush=True)
    return status


def _model_cycles(model_dir: Path, cfg) -> int:
    """The cycle model's count for the network's committed invocations (0 without io.json)."""
    import io

    from compiler.pipeline import compile_file
    from firmware_model.golden.model import GoldenModel
    from sim.models.model_data import ModelData

    if not (model_dir / "io.json").exists():
        return 0
    ctx = compile_file(model_dir / "model.tosa", cfg, out=io.StringIO())
    golden = GoldenModel(ctx.program, cfg)
    for feeds in ModelData.of(model_dir).all_inputs():
        golden.invoke(feeds)
    return golden.counters.cycles


if __name__ == "__main__":
    import sys

    sys.exit(main())
