"""`make bench`: every benchmark of the project, one after the other.

    python -m sim.benchmarks [name ...]      (default: all; names: see BENCHMARKS)

Each entry is a module with a `main(argv) -> int`; a new benchmark is one more line in
BENCHMARKS. Benchmarks are not part of `make test`.
"""

from __future__ import annotations

import importlib
import sys
import time

BENCHMARKS = {
    "oracles": ("sim.benchmarks.oracles", []),           # issue 16's table: interpreter and golden vs Arm in-process
    "throughput": ("sim.benchmarks.throughput", []),     # issue 13's table: cycles vs Vela's U55-256, utilisation, area
    "interpreter": ("sim.benchmarks.interpreter", []),   # TOSA interpreter vs Arm's reference model
    "units": ("sim.benchmarks.units", []),               # datapath unit benches and Yosys cell counts
    "core_area": ("sim.benchmarks.core_area", []),       # Yosys cells of every unit inside the core
    "golden": ("sim.benchmarks.golden", []),             # compile + golden model vs the interpreter, per network
    "require_monitor": ("sim.benchmarks.require_monitor", []),   # the golden model's REQUIRE monitor's cost
    "timing_model": ("sim.benchmarks.timing_model", []),  # the timing-only model vs the golden model, per network
    "cosim": ("sim.benchmarks.cosim", []),               # whole networks on the core RTL, both simulators
}


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        return 2
    status = 0
    for name in names:
        module, args = BENCHMARKS[name]
        print(f"==== {name} ({module}) ====", flush=True)
        t0 = time.monotonic()
        rc = importlib.import_module(module).main(list(args))
        print(f"==== {name}: {'ok' if not rc else f'exit {rc}'} in {time.monotonic() - t0:.0f} s ====\n", flush=True)
        status = status or (rc or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
