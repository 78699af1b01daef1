"""The `npu` command line.

Every error a user can cause is an `NpuBenchError` naming the file, tensor, op or parameter at
fault; it is printed on one line and the exit status is 2. Anything else is a bug in npu-bench
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

# numpy's OpenBLAS starts a thread per core that spins after each BLAS call; the integer work here
# gains nothing from them, and on a small machine they take cores from the simulator.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from firmware_model.errors import NpuBenchError  # noqa: E402

EXIT_USER_ERROR = 2


def _add_inspect(sub) -> None:
    p = sub.add_parser("inspect", help="print a .tosa graph: inputs, outputs, variables, op histogram")
    p.add_argument("model", help="a .tosa flatbuffer")
    p.add_argument("--ops", action="store_true", help="also list every op with its attributes and tensor shapes")
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args) -> int:
    from compiler.tosa_io import read_tosa
    from compiler.tosa_io.inspect import format_graph

    print(format_graph(read_tosa(args.model), show_ops=args.ops))
    return 0


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run a .tosa graph on inputs and write its outputs as .npy files")
    p.add_argument("model", help="a .tosa flatbuffer")
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="bind graph input NAME to the array in FILE.npy (repeat per input)")
    p.add_argument("-o", "--output-dir", required=True, metavar="OUTDIR",
                   help="write each graph output to OUTDIR/<output tensor name>.npy")
    p.add_argument("--backend", choices=("interp", "golden"), default="interp",
                   help="interp: the TOSA interpreter; golden: compile and run on the NPU golden model")
    p.add_argument("--config", default="default", help="NPU configuration for --backend golden (name or .toml)")
    p.add_argument("--state", metavar="FILE.npz",
                   help="variable state: loaded before the run (initial values if FILE does not exist), saved after")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a symbolic dimension (compiler)")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from sim.cli.run import run_model_cli

    return run_model_cli(args)


def _add_compile(sub) -> None:
    p = sub.add_parser("compile", help="compile a .tosa graph into an NPU program")
    p.add_argument("model", help="a .tosa flatbuffer")
    p.add_argument("--config", default="default", help="NPU configuration (name or .toml)")
    p.add_argument("-o", "--output-dir", required=True, metavar="OUTDIR",
                   help="write commands.bin, constants.bin and manifest.json here")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a symbolic dimension")
    p.add_argument("--print-after", action="append", default=[], metavar="PASS",
                   help="print the IR after this pass (repeatable)")
    p.add_argument("--print-after-all", action="store_true", help="print the IR after every pass")
    p.set_defaults(func=cmd_compile)


def cmd_compile(args) -> int:
    from compiler.pipeline import compile_cli

    return compile_cli(args)


def _add_sim(sub) -> None:
    p = sub.add_parser("sim", help="run a network on the RTL, checking every tile against the golden model")
    p.add_argument("model", nargs="?", default=None,
                   help="a .tosa flatbuffer (default: the demo network in models/demo_conv)")
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="graph input; repeat a name for successive invocations (default: the model's committed "
                        "inputs, else seeded random data)")
    p.add_argument("--invocations", type=int, default=None, metavar="N",
                   help="run at most N invocations of the committed inputs, or N of seeded random data")
    p.add_argument("--state", metavar="FILE.npz",
                   help="variable state: loaded before the run (RTL and golden alike), saved after a passing run")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a symbolic dimension (the inputs' shapes bind the rest)")
    p.add_argument("--sim", dest="simulator", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("--config", default="default", help="NPU configuration (name or .toml)")
    p.add_argument("--waves", action="store_true", help="write a waveform and print its path")
    p.add_argument("--report", metavar="DIR", default=None,
                   help="write report.json and report.xml (JUnit) here (default: build/sim/<model>)")
    p.add_argument("--stop-at-first-mismatch", action="store_true",
                   help="stop the simulation at the first tile that differs from golden (default: run on)")
    p.add_argument("--inject-fault", metavar="NAME", default=None,
                   help="build the RTL with a deliberate fault (self-check of the bench; see docs)")
    p.set_defaults(func=cmd_sim)


def cmd_sim(args) -> int:
    from sim.cosim.network import sim_cli

    return sim_cli(args)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="npu", description="npu-bench: TOSA on a modelled NPU, its RTL and golden model")
    sub = ap.add_subparsers(dest="command", required=True)
    _add_inspect(sub)
    _add_run(sub)
    _add_compile(sub)
    _add_sim(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except NpuBenchError as e:
        print(f"npu {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
