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
    from compiler.pipeline import parse_binds
    from compiler.tosa_io import read_tosa
    from sim.cli.state_file import load_state, save_state
    from sim.oracles.backends import BackendError, open_session

    graph = read_tosa(args.model)
    block = graph.main
    bound = parse_bindings(args.input, list(block.inputs))
    inputs = {name: load_input(name, path) for name, path in bound.items()}
    state = load_state(args.state) if args.state else None
    try:
        session = open_session(graph, args.backend, config=args.config, binds=parse_binds(getattr(args, "bind", None) or []),
                               input_shapes={n: a.shape for n, a in inputs.items()})
    except BackendError as e:
        raise RunError(str(e)) from None
    if state is not None:
        try:
            session.load_state(state)
        except NpuBenchError as e:
            raise RunError(f"state file {args.state}: {e}") from None
    outputs = session.run(inputs)
    out_dir = Path(args.output_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunError(f"cannot create output folder {out_dir}: {e}") from None
    for name in block.outputs:
        np.save(out_dir / f"{name}.npy", np.asarray(outputs[name]), allow_pickle=False)
    if args.state:
        save_state(args.state, session.state)
    print(f"npu run: {len(outputs)} output(s) written to {out_dir}"
          + (f"; state saved to {args.state}" if args.state else "") + (f"; {session.note}" if session.note else ""))
    return 0
