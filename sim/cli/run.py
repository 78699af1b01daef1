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
    """The array of one .npy file, or a one-line error naming the input and the file."""
    p = Path(path)
    if p.is_dir():
        raise RunError(f"input '{name}': {p} is a folder, not a .npy file")
    try:
        with open(p, "rb") as f:
            head = f.read(6)
            f.seek(0)
            if head[:2] == b"PK":
                raise RunError(f"input '{name}': {p} is an .npz archive; give one array as a .npy file")
            if head != b"\x93NUMPY":
                raise RunError(f"input '{name}': {p} is not a .npy file (it does not start with numpy's magic string)")
            # numpy's reader raises whatever its parsers meet in a damaged header (ValueError,
            # EOFError, SyntaxError, tokenize's TokenError, ...): each is a damaged file here.
            arr = np.load(f, allow_pickle=False)
    except RunError:
        raise
    except FileNotFoundError:
        raise RunError(f"input '{name}': no such file {p}") from None
    except MemoryError:
        raise RunError(f"input '{name}': {p} declares an array too large to load") from None
    except Exception as e:
        raise RunError(f"input '{name}': {p} is not a readable .npy file ({type(e).__name__}: {e})") from None
    if not isinstance(arr, np.ndarray):
        raise RunError(f"input '{name}': {p} does not hold one array")
    return arr


def graph_variables(graph) -> dict:
    """The graph's variables {name: (DType, shape)}, for checking a state file against them."""
    from compiler.interpreter import Interpreter

    return Interpreter(graph).variables


def run_model_cli(args) -> int:
    import io

    from compiler.pipeline import parse_binds
    from compiler.tosa_io import read_tosa
    from firmware_model.arch.config import load_config
    from sim.cli.files import check_output_dir, commit_files, output_dir, writable_folder_of
    from sim.cli.state_file import check_state, load_state, with_unwritten
    from sim.oracles.backends import BackendError, open_session

    graph = read_tosa(args.model)
    block = graph.main
    bound = parse_bindings(args.input, list(block.inputs))
    inputs = {name: load_input(name, path) for name, path in bound.items()}
    # Where the results go is checked before the run, so a run is not wasted on a folder that
    # cannot take them; outputs and state are then written together or not at all.
    check_output_dir(args.output_dir)
    if args.state:
        writable_folder_of(args.state, "state file")
    try:
        config = load_config(args.config, getattr(args, "set", ()) or ()) if args.backend == "golden" else args.config
        session = open_session(graph, args.backend, config=config, binds=parse_binds(getattr(args, "bind", None) or []),
                               input_shapes={n: a.shape for n, a in inputs.items()})
    except BackendError as e:
        raise RunError(str(e)) from None
    variables = graph_variables(graph)
    state = load_state(args.state) if args.state else None
    if state is not None:
        check_state(args.state, state, variables, init_missing=getattr(args, "init_missing", False))
        try:
            session.load_state(state)
        except NpuBenchError as e:
            raise RunError(f"state file {args.state}: {e}") from None
    outputs = session.run(inputs)
    out_dir = output_dir(args.output_dir)
    files = []
    for name in block.outputs:
        buf = io.BytesIO()
        np.save(buf, np.asarray(outputs[name]), allow_pickle=False)
        files.append((out_dir / f"{name}.npy", buf.getvalue()))
    if args.state:
        buf = io.BytesIO()
        np.savez(buf, **{k: np.asarray(v) for k, v in with_unwritten(session.state, variables).items()})
        files.append((Path(args.state), buf.getvalue()))
    commit_files(files)
    print(f"npu run: {len(outputs)} output(s) written to {out_dir}"
          + (f"; state saved to {args.state}" if args.state else "") + (f"; {session.note}" if session.note else ""))
    return 0
