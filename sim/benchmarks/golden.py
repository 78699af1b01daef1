"""Benchmark: the compiler and the golden model on the real networks, against the interpreter.

    python -m sim.benchmarks.golden [--configs tiny,default,large] [--repeat N]

For each network in models/ and each configuration it prints the compile time, the interpreter's
time and the golden model's time for the same invocations (the stateful networks run all their
invocations with the state carried over), their ratio (goal: golden at most 2x the interpreter),
the tile count, the NPU's share of the MACs and the modelled cycles, and the worst ratio per
configuration. Both outputs are compared with the committed reference outputs, so a fast wrong
answer cannot pass. The golden model pays a fixed cost per command (a few numpy calls per DMA,
MAC, ELTWISE or POOL tile), so its time follows the tile count: 'tiny', whose SRAMs are small
on purpose, cuts one 48x48 convolution into 144 tiles where the interpreter makes one call.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np

from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR

MODELS = MODELS_DIR


def invocations(model_dir: Path) -> tuple[list[dict], list[dict]]:
    """The committed inputs and reference outputs of every invocation."""
    data = ModelData.of(model_dir)
    return data.all_inputs(), data.all_reference_outputs()


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv: list[str] | None = None) -> int:
    from compiler.interpreter import Interpreter
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa
    from firmware_model.golden.model import GoldenModel
    from firmware_model.arch.config import load_config

    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.golden", description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="tiny,default,large")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    print(f"{'network':12s} {'config':8s} {'compile':>9s} {'interp':>9s} {'golden':>9s} {'ratio':>6s} "
          f"{'tiles':>6s} {'NPU MACs':>9s} {'cycles':>9s}  exact")
    worst: dict[str, float] = {}
    status = 0
    for model_dir in sorted(p for p in MODELS.iterdir() if (p / "model.tosa").exists() and (p / "io.json").exists()):
        graph = read_tosa(model_dir / "model.tosa")
        feeds, refs = invocations(model_dir)
        out_name = graph.main.outputs[0]

        def run_interp():
            it = Interpreter(graph)
            return [it.run(f)[out_name] for f in feeds]

        t_interp, interp_out = best_of(run_interp, args.repeat)
        for config in args.configs.split(","):
            cfg = load_config(config)
            t_compile, ctx = best_of(lambda: compile_graph(graph, cfg, out=io.StringIO()), max(1, args.repeat // 2))
            program = ctx.program

            def run_golden():
                model = GoldenModel(program, cfg)
                outs = [model.invoke(f)[out_name] for f in feeds]
                return outs, model.counters.cycles

            t_golden, (golden_out, cycles) = best_of(run_golden, args.repeat)
            exact = all(np.array_equal(g, r[out_name]) and np.array_equal(i, r[out_name])
                        for g, i, r in zip(golden_out, interp_out, refs))
            stats = program.manifest["stats"]
            share = 100.0 * stats["npu_macs"] / max(1, stats["npu_macs"] + stats["host_macs"])
            ratio = t_golden / t_interp
            worst[config] = max(worst.get(config, 0.0), ratio)
            status = status or (0 if exact else 1)
            print(f"{model_dir.name:12s} {config:8s} {t_compile * 1e3:7.1f}ms {t_interp * 1e3:7.1f}ms "
                  f"{t_golden * 1e3:7.1f}ms {ratio:6.2f} {stats['tiles']:6d} {share:8.1f}% {cycles:9d}  "
                  f"{'yes' if exact else 'NO'}")
    print("worst golden/interpreter ratio per configuration (goal <= 2): "
          + ", ".join(f"{c} {r:.2f}" for c, r in worst.items()))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
