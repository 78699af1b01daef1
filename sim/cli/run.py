"""`npu run`: run a .tosa graph on .npy inputs and write its outputs as .npy files.

    npu run model.tosa -i input-0=x.npy -o OUTDIR [--state state.npz] [--backend interp]
    npu run model.tosa -i input-0=x.npy -o OUTDIR --backend golden [--config NAME] [--bind T[i]=N] [--state S]

Inputs are checked against the graph (every input bound once, names known, exact shape and
element type: int8/int16/int32 as such, bool as bool, int48 as int64 within 48 bits); each
output is written to OUTDIR/<output tensor name>.npy in its exact storage type (int48 as int64,
rank-0 outputs with shape ()). With --state, variables are loaded from the state file before
the run (the graph's initial values when the file does not exist yet) and saved after it, only
if the run succeeded.

`--backend golden` compiles the graph for the NPU configuration `--config` (unknown dims from
the inputs' shapes and `--bind TENSOR[i]=N`) and runs the program on the golden model. Its state
file holds the variable SRAM (image, written flags, the variables' layout) and, like the
interpreter's, each written variable's value by name, so either backend reads the other's file;
a state whose variables are not the graph's is an error naming the variable.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from firmware_model.errors import NpuBenchError
from firmware_model.golden.var_unit import STATE_PREFIX


class RunError(NpuBenchError):
    """A problem with what `npu run` was given (inputs, output folder, backend)."""


def parse_bindings(items: list[str], graph_inputs: list[str]) -> dict[str, Path]:
    bound: dict[str, Path] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise RunError(f"-i {item!r}: expected NAME=FILE.npy")
        if name not in graph_inputs:
            raise RunError(f"-i {name}=...: the graph has no input named '{name}' "
                           f"(inputs: {', '.join(graph_inputs) or 'none'})")
        if name in bound:
            raise RunError(f"-i {name}=...: input '{name}' is bound twice")
        bound[name] = Path(file)
    missing = [n for n in graph_inputs if n not in bound]
    if missing:
        raise RunError(f"no -i binding for graph input '{missing[0]}' "
                       f"(inputs: {', '.join(graph_inputs)})")
    return bound


def load_input(name: str, path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise RunError(f"input '{name}': no such file {path}") from None
    except (OSError, ValueError) as e:
        raise RunError(f"input '{name}': {path} is not a readable .npy file: {e}") from None


def run_model_cli(args) -> int:
    from compiler.interpreter import Interpreter
    from compiler.tosa_io import read_tosa
    from sim.cli.state_file import load_state, save_state

    if args.backend not in ("interp", "golden"):
        raise RunError(f"backend '{args.backend}' does not exist (backends: interp, golden)")
    if getattr(args, "bind", None) and args.backend == "interp":
        raise RunError("--bind is for the compiler (--backend golden); the interpreter takes dimensions "
                       "from the inputs")
    graph = read_tosa(args.model)
    block = graph.main
    bound = parse_bindings(args.input, list(block.inputs))
    inputs = {name: load_input(name, path) for name, path in bound.items()}
    state = load_state(args.state) if args.state else None
    if args.backend == "golden":
        outputs, new_state, note = run_golden(graph, inputs, args, state)
    else:
        interp = Interpreter(graph)
        if state is not None:
            try:
                interp.load_state({k: v for k, v in state.items() if not k.startswith(STATE_PREFIX)})
            except NpuBenchError as e:
                raise RunError(f"state file {args.state}: {e}") from None
        outputs = interp.run(inputs)
        new_state, note = interp.state, ""
    out_dir = Path(args.output_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunError(f"cannot create output folder {out_dir}: {e}") from None
    for name in block.outputs:
        np.save(out_dir / f"{name}.npy", np.asarray(outputs[name]), allow_pickle=False)
    if args.state:
        save_state(args.state, new_state)
    print(f"npu run: {len(outputs)} output(s) written to {out_dir}"
          + (f"; state saved to {args.state}" if args.state else "") + note)
    return 0


def run_golden(graph, inputs: dict[str, np.ndarray], args, state: dict[str, np.ndarray] | None):
    """Compile for --config and run one invocation on the golden model: (outputs, state, note)."""
    from compiler.pipeline import compile_graph, parse_binds
    from firmware_model.golden.model import GoldenModel
    from firmware_model.arch.config import load_config

    cfg = load_config(args.config)
    ctx = compile_graph(graph, cfg, binds=parse_binds(getattr(args, "bind", None) or []),
                        input_shapes={n: a.shape for n, a in inputs.items()})
    model = GoldenModel(ctx.program, cfg)
    if state is not None:
        try:
            model.load_state(state)
        except NpuBenchError as e:
            raise RunError(f"state file {args.state}: {e}") from None
    outputs = model.invoke(inputs)
    c = model.counters
    return outputs, model.save_state(), (f"; golden model on '{cfg.name}': {c.cycles} cycles, "
                                         f"{c.tiles} NPU tiles, {c.commands.get('HOST', 0)} host ops")
