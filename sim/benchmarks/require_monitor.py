"""The golden model's REQUIRE monitor: what it costs per network.

    python -m sim.benchmarks.require_monitor [--networks cnn32,blazeface] [--config default] [--repeat 3]

For each network, the committed invocations on the golden model (the program compiled once; a
fresh model per run, its construction included), after one warm-up run, best of `--repeat` in
process CPU time (other work on a shared machine shows less in it than in wall-clock time; run
with OPENBLAS_NUM_THREADS=1 to count one thread), the three runs interleaved so that load from
elsewhere hits them alike:

    off     GoldenModel(..., requires=False): the datapath alone
    on      the monitor as the compiler sets it up (checks no input can break are dropped)
    all     the monitor with every check kept (compiler.npu.requires.PRUNE = False): what the
            vectorised checks cost where they run

and the ratios on/off and all/off, with the number of checks and of commands that carry one.
Every run's outputs must equal the committed reference outputs.
"""

from __future__ import annotations

import argparse
import io
import time

import numpy as np

from sim.paths import MODELS_DIR


def main(argv: list[str] | None = None) -> int:
    from compiler.npu import requires
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa
    from firmware_model.arch.config import load_config
    from firmware_model.golden.model import GoldenModel
    from sim.models.model_data import ModelData

    ap = argparse.ArgumentParser(prog="python -m sim.benchmarks.require_monitor", description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="cnn32,blazeface")
    ap.add_argument("--config", default="default")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    print(f"{'network':12s} {'config':8s} {'off':>9s} {'on':>9s} {'all':>9s} {'on/off':>7s} {'all/off':>7s} "
          f"{'checks':>7s} {'checked cmds':>12s}  exact")
    status = 0
    for name in args.networks.split(","):
        data = ModelData.of(MODELS_DIR / name)
        graph = read_tosa(MODELS_DIR / name / "model.tosa")
        feeds, refs = data.all_inputs(), data.all_reference_outputs()
        programs = {}
        for prune in (True, False):
            requires.PRUNE = prune
            try:
                programs[prune] = compile_graph(graph, cfg, out=io.StringIO()).program
            finally:
                requires.PRUNE = True
        runs = {"off": (programs[True], False), "on": (programs[True], True), "all": (programs[False], True)}
        best = {k: float("inf") for k in runs}
        exact = True
        for program, monitored in runs.values():          # warm-up (caches, allocator)
            GoldenModel(program, cfg, requires=monitored).invoke(feeds[0])
        for _ in range(args.repeat):
            for key, (program, monitored) in runs.items():
                t0 = time.process_time()
                model = GoldenModel(program, cfg, requires=monitored)
                outs = [model.invoke(f) for f in feeds]
                best[key] = min(best[key], time.process_time() - t0)
                exact = exact and all(np.array_equal(o[n], r[n]) for o, r in zip(outs, refs) for n in r)
        layers = programs[False].manifest["layers"]
        checks = sum(len(layer.get("requires", [])) for layer in layers)
        commands = sum(len(layer["tiles"]) for layer in layers if layer.get("requires"))
        kept = sum(len(layer.get("requires", [])) for layer in programs[True].manifest["layers"])
        print(f"{name:12s} {cfg.name:8s} {best['off'] * 1e3:7.1f}ms {best['on'] * 1e3:7.1f}ms {best['all'] * 1e3:7.1f}ms "
              f"{best['on'] / best['off']:7.3f} {best['all'] / best['off']:7.3f} {kept:3d}/{checks:<3d} "
              f"{commands:12d}  {'yes' if exact else 'NO'}")
        status = status or (0 if exact else 1)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
