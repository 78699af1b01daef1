"""Benchmark: the timing-only model against the golden model on the real networks.

    python -m sim.benchmarks.timing_model [--configs tiny,default,large] [--networks a,b] [--repeat N]

For each network in models/ and each configuration: the golden model's time for all the
network's committed invocations (a new GoldenModel each time, best of N), the timing model's
(a new TimingModel each time, best of N, in the same process: the program's plans and the
outcome of an invocation from the same start are made once per program, so this is what a
caller that asks again pays), the speed-up, and 'cold', the first TimingModel of a program
never seen (decoding every command and planning every unit once: what a sweep pays per compiled
configuration). The counters are compared, so a fast wrong answer cannot pass (exit 1). Goal:
the timing model at least 100x faster than the golden model on blazeface, default configuration.
"""

from __future__ import annotations

import argparse
import io

from sim.benchmarks.golden import best_of
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR

GOAL = ("blazeface", "default", 100.0)


def main(argv: list[str] | None = None) -> int:
    from compiler.pipeline import compile_file
    from firmware_model.arch.config import load_config
    from firmware_model.arch.program import Program
    from firmware_model.golden.model import GoldenModel
    from firmware_model.golden.timing_model import TimingModel

    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.timing_model", description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="tiny,default,large")
    ap.add_argument("--networks", default="", help="comma-separated names under models/ (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    names = [n for n in args.networks.split(",") if n] or sorted(
        p.parent.name for p in MODELS_DIR.glob("*/model.tosa") if (p.parent / "io.json").exists())
    print(f"{'network':12s} {'config':8s} {'commands':>9s} {'golden':>10s} {'timing':>10s} {'speed-up':>9s} "
          f"{'cold':>10s} {'speed-up':>9s}  equal")
    status = 0
    goal = None
    for config in args.configs.split(","):
        cfg = load_config(config)
        for name in names:
            model = MODELS_DIR / name / "model.tosa"
            feeds = ModelData.of(model).all_inputs()
            program = compile_file(model, cfg, out=io.StringIO()).program

            def run_golden():
                g = GoldenModel(program, cfg)
                for f in feeds:
                    g.invoke(f)
                return g.counters.as_dict()

            def run_timing(prog):
                t = TimingModel(prog, cfg)
                for _ in feeds:
                    t.invoke()
                return t.counters.as_dict()

            # cold: a program object the timing model has not seen (its own copy of the commands)
            t_cold, cold = best_of(lambda: run_timing(Program(list(program.commands), program.constants,
                                                              program.manifest)), 1)
            t_golden, want = best_of(run_golden, args.repeat)
            t_timing, got = best_of(lambda: run_timing(program), args.repeat)
            equal = got == want and cold == want
            status = status or (0 if equal else 1)
            speedup, cold_speedup = t_golden / t_timing, t_golden / t_cold
            if (name, config) == GOAL[:2]:
                goal = speedup
            print(f"{name:12s} {config:8s} {len(program.commands):9d} {t_golden * 1e3:8.2f}ms {t_timing * 1e3:8.3f}ms "
                  f"{speedup:8.0f}x {t_cold * 1e3:8.2f}ms {cold_speedup:8.1f}x  {'yes' if equal else 'NO'}", flush=True)
    if goal is not None:
        print(f"{GOAL[0]} on {GOAL[1]}: timing model {goal:.0f}x faster than golden (goal >= {GOAL[2]:.0f}x): "
              f"{'met' if goal >= GOAL[2] else 'NOT met'}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
