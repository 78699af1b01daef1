"""The `npu` command line.

Every error a user can cause is an `NpuBenchError` naming the file, tensor, op or parameter at
fault; it is printed on one line and the exit status is 2. Anything else is a bug in npu-bench:
it keeps its traceback and the exit status is 3. `npu sim` exits 1 when the RTL differs from
golden. A closed pipe on stdout (`npu inspect --ops | head`) ends the command quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

# numpy's OpenBLAS starts a thread per core that spins after each BLAS call; the integer work here
# gains nothing from them, and on a small machine they take cores from the simulator.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from firmware_model.errors import NpuBenchError  # noqa: E402

EXIT_MISMATCH = 1
EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 3


def add_config_args(p, help: str = "NPU configuration (name or .toml)") -> None:
    """--config and --set, alike on every command that takes a configuration."""
    p.add_argument("--config", default="default", help=help)
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one configuration parameter, e.g. --set mac.rows=16 (repeatable)")


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
    add_config_args(p, "NPU configuration for --backend golden (name or .toml)")
    p.add_argument("--state", metavar="FILE.npz",
                   help="variable state: loaded before the run (initial values if FILE does not exist), saved after "
                        "with the outputs (both or neither)")
    p.add_argument("--init-missing", action="store_true",
                   help="variables the state file does not mention start from their initial values (else an error)")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a symbolic dimension (compiler)")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from sim.cli.run import run_model_cli

    return run_model_cli(args)


def _add_compile(sub) -> None:
    p = sub.add_parser("compile", help="compile a .tosa graph into an NPU program")
    p.add_argument("model", help="a .tosa flatbuffer")
    add_config_args(p, "NPU configuration (name or .toml)")
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
    from sim.cli.files import check_output_dir

    check_output_dir(args.output_dir)

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
    p.add_argument("--init-missing", action="store_true",
                   help="variables the state file does not mention start from their initial values (else an error)")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a symbolic dimension (the inputs' shapes bind the rest)")
    p.add_argument("--sim", dest="simulator", choices=("verilator", "icarus"), default="verilator")
    add_config_args(p, "NPU configuration (name or .toml)")
    p.add_argument("--waves", action="store_true", help="write a waveform and print its path")
    p.add_argument("--report", metavar="DIR", default=None,
                   help="write report.json and report.xml (JUnit) here (default: build/sim/<model>)")
    p.add_argument("--stop-at-first-mismatch", action="store_true",
                   help="stop the simulation at the first tile that differs from golden (default: run on)")
    p.add_argument("--inject-fault", metavar="NAME", default=None,
                   help="build the RTL with a deliberate fault (self-check of the bench; see docs)")
    p.add_argument("--tile", type=int, default=None, metavar="N",
                   help="re-run only tile N (its number in the report), alone, from golden's state before it; "
                        "with --waves, a waveform of that tile only")
    p.add_argument("--invocation", type=int, default=0, metavar="K",
                   help="with --tile: the tile in invocation K (default 0)")
    add_seed_arg(p)
    p.set_defaults(func=cmd_sim)


def add_seed_arg(p) -> None:
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="derive every random stream (random inputs, cocotb's seed) from N, as NPU_BENCH_SEED=N "
                        "does; the report prints and records each seed drawn (default: the committed seeds)")


def apply_seed(args) -> None:
    from sim import seeds

    if getattr(args, "seed", None) is not None:
        os.environ[seeds.ENV] = str(args.seed)


def cmd_sim(args) -> int:
    from sim.cosim.network import sim_cli

    apply_seed(args)
    return sim_cli(args)


def _add_perf(sub) -> None:
    p = sub.add_parser("perf", help="per-layer cycles, MACs, utilisation and memory traffic of a network on a configuration")
    p.add_argument("model", help="a .tosa flatbuffer")
    add_config_args(p, "NPU configuration (name or .toml)")
    p.add_argument("--engine", choices=("timing", "golden"), default="timing",
                   help="timing: the timing-only model (no data computed); golden: the golden model on the "
                        "model's committed inputs (the same counts, slower)")
    p.add_argument("--invocations", type=int, default=None, metavar="N",
                   help="invocations to run (default: the committed inputs' count, else 1)")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE", help="bind a symbolic dimension")
    p.add_argument("-o", "--output-dir", default=None, metavar="OUTDIR",
                   help="write perf.csv and perf.json here (default: build/perf/<model>-<config>-<hash>)")
    p.add_argument("--top", type=int, default=30, metavar="N", help="show the N slowest rows (0: all)")
    p.set_defaults(func=cmd_perf)


def cmd_perf(args) -> int:
    from sim.perf.cli import perf_cli

    return perf_cli(args)


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="every network of a sweep spec on every configuration point: tables and plots")
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep's specification (docs/architects.md)")
    p.add_argument("-o", "--output-dir", default=None, metavar="OUTDIR",
                   help="results.csv, summary.csv, plots/ and the cache go here (default: the spec's output, "
                        "else build/sweeps/<name>)")
    p.add_argument("--engine", choices=("timing", "golden"), default=None,
                   help="the model that counts the cycles (default: the spec's engine, else timing)")
    add_executor_args(p, "points")
    p.add_argument("--no-plots", action="store_true", help="write the tables only")
    p.set_defaults(func=cmd_sweep)


def add_executor_args(p, what: str) -> None:
    """Where the jobs of `npu sweep` and `npu regress` run (sim/perf/executor.py), alike on both."""
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (default: a local cluster)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes of the local Dask cluster (default: one per core)")
    p.add_argument("--local", action="store_true", help=f"run the {what} one by one in this process, without Dask")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="--jobs 1 is --local; --jobs N is --workers N")


def _add_regress(sub) -> None:
    p = sub.add_parser("regress", help="many graphs x configurations x simulators on the RTL in parallel, "
                                       "one merged JUnit file")
    p.add_argument("graphs", nargs="*", metavar="GRAPH.tosa|FOLDER",
                   help="graphs, or folders searched for .tosa files (default: models/)")
    p.add_argument("--config", action="append", default=[], metavar="NAME|FILE.toml",
                   help="a configuration to run on; repeat for more (default: default)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a parameter of every configuration")
    p.add_argument("--sim", dest="simulators", action="append", default=[], choices=("verilator", "icarus"),
                   help="a simulator; repeat for both (default: verilator)")
    p.add_argument("-o", "--output-dir", default=None, metavar="DIR",
                   help="junit.xml, summary.csv and each run's reports (default: build/regress)")
    p.add_argument("--invocations", type=int, default=None, metavar="N",
                   help="run at most N invocations of each graph's committed inputs")
    p.add_argument("--max-cycles", type=int, default=None, metavar="N",
                   help="skip (and report as skipped) runs the timing model counts at more than N cycles")
    add_seed_arg(p)
    add_executor_args(p, "runs")
    p.set_defaults(func=cmd_regress)


def cmd_regress(args) -> int:
    from firmware_model.arch.config import load_config
    from sim.paths import BUILD_ROOT, MODELS_DIR
    from sim.perf.sweep_cli import executor_options
    from sim.verification.regress import find_graphs, format_result, run_regress

    options = executor_options(args)
    graphs = find_graphs(args.graphs or [str(MODELS_DIR)])
    configs = [load_config(c, args.set) for c in (args.config or ["default"])]
    simulators = list(dict.fromkeys(args.simulators or ["verilator"]))
    result = run_regress(graphs, configs, simulators, Path(args.output_dir or BUILD_ROOT / "regress"), options,
                         seed=args.seed, invocations=args.invocations, max_cycles=args.max_cycles)
    print(format_result(result))
    for text in result.internal[:3]:
        print(text, file=sys.stderr)
    return result.exit_status


def cmd_sweep(args) -> int:
    from sim.perf.sweep_cli import sweep_cli

    return sweep_cli(args)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="npu", description="npu-bench: TOSA on a modelled NPU, its RTL and golden model",
                                 epilog="exit status: 0 done (and every check passed); 1 the RTL differs from golden; "
                                        "2 a user error (one line naming the file, tensor, op or parameter); "
                                        "3 an internal error of npu-bench (with its traceback)")
    ap.add_argument("--tensor-limit-mib", type=float, default=None, metavar="MIB",
                    help="refuse graphs with a tensor larger than this (default 1024, or $NPU_TENSOR_LIMIT_MIB)")
    sub = ap.add_subparsers(dest="command", required=True)
    _add_inspect(sub)
    _add_run(sub)
    _add_compile(sub)
    _add_sim(sub)
    _add_perf(sub)
    _add_sweep(sub)
    _add_regress(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.tensor_limit_mib is not None:
            from firmware_model.tosa_ops import limits

            if not args.tensor_limit_mib > 0:
                raise limits.ResourceLimitError(f"--tensor-limit-mib {args.tensor_limit_mib}: must be positive")
            limits.set_tensor_limit(int(args.tensor_limit_mib * (1 << 20)))
        return args.func(args)
    except NpuBenchError as e:
        status = getattr(e, "exit_status", EXIT_USER_ERROR)     # a simulator crash is 3, with its log
        text = str(e)
        if status == EXIT_USER_ERROR:
            # one line, whatever the message quotes: numpy's wrapped messages, names from a file
            # that hold line breaks (shown as \n, so the name stays recognisable)
            text = text.replace("\r", "\\r").replace("\n", "\\n")
        print(f"npu {args.command}: error: {text}", file=sys.stderr)
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`npu inspect --ops | head`): not an error of ours or the user's;
        # point stdout at /dev/null so Python's exit flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        traceback.print_exc()
        print(f"npu {args.command}: internal error: this is a bug in npu-bench; please report it with the "
              "traceback above", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    finally:
        if args.tensor_limit_mib is not None:      # main() may run again in this process (tests, fuzzing)
            from firmware_model.tosa_ops import limits

            limits.set_tensor_limit(None)


if __name__ == "__main__":
    sys.exit(main())
