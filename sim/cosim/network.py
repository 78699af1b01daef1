"""`npu sim`: a network on the RTL, run by the core itself, every tile checked against golden.

1. compile the .tosa graph for the configuration (unknown dimensions bound from the inputs);
2. run every invocation on the golden model (sim/cosim/program_run.py): expected tiles, cycles,
   outputs, variable SRAM;
3. build the core for the simulator once (reused while hw/ and the configuration are unchanged),
   load the program, constants and inputs into its external memory, and let it run each
   invocation START to END; the scoreboard checks every compute tile as it finishes (bytes and
   done clock), then the invocation's status, cycle count, outputs and variable SRAM;
4. compare the outputs with the TOSA interpreter's and Arm's reference model's;
5. report (sim/cosim/report.py): text, report.json, JUnit XML.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np

from firmware_model.arch.config import NpuConfig, load_config
from firmware_model.arch.isa import Status
from firmware_model.errors import NpuBenchError
from sim import seeds
from sim.cosim.report import InvocationReport, SimReport, format_report, tile_reports, write_reports
from sim.models.model_data import ModelData
from sim.paths import BUILD_ROOT, MODELS_DIR

DEFAULT_MODEL = MODELS_DIR / "demo_conv" / "model.tosa"


class SimInputError(NpuBenchError):
    """Inputs or a state file `npu sim` cannot use."""


def load_inputs(model: Path, graph, specs: list[str], count: int | None) -> tuple[list[dict], str, int | None]:
    """The invocations' inputs and how to name them: `-i NAME=FILE.npy` (repeat a name for more
    invocations), else the model's committed inputs (models/*/io.json), else seeded random data."""
    from sim.cli.run import RunError, load_input

    names = list(graph.main.inputs)
    if specs:
        files: dict[str, list[Path]] = {n: [] for n in names}
        for item in specs:
            name, sep, file = item.partition("=")
            if not sep or not name or not file:
                raise RunError(f"-i {item!r}: expected NAME=FILE.npy")
            if name not in files:
                raise RunError(f"-i {name}=...: the graph has no input named '{name}' (inputs: {', '.join(names)})")
            files[name].append(Path(file))
        counts = {n: len(f) for n, f in files.items()}
        if min(counts.values()) == 0:
            missing = next(n for n, c in counts.items() if c == 0)
            raise RunError(f"no -i binding for graph input '{missing}' (inputs: {', '.join(names)})")
        if len(set(counts.values())) != 1:
            raise RunError(f"-i gives the inputs different numbers of invocations: {counts}")
        n = next(iter(counts.values()))
        invs = [{name: load_input(name, files[name][k]) for name in names} for k in range(n)]
        listed = "; ".join(f"{name}: {', '.join(str(f) for f in files[name])}" for name in names)
        return invs, f"files ({listed})", None
    data = ModelData.of(model)
    if data is not None and set(data.input_names) == set(names):
        n = data.invocations if count is None else min(count, data.invocations)
        return data.all_inputs()[:n], f"committed ({data.source}, {n} invocation(s))", None
    seed = seeds.seed_for("network inputs", 0)
    rng = np.random.default_rng(seed)
    invs = []
    for _ in range(count or 1):
        inv = {}
        for name in names:
            t = graph.main.tensor(name)
            if not t.is_static:
                raise SimInputError(f"input '{name}' has unknown dimensions {t.shape}: give it with -i NAME=FILE.npy")
            info = np.iinfo(t.dtype.storage) if np.issubdtype(t.dtype.storage, np.integer) else None
            if info is None:
                raise SimInputError(f"input '{name}' is {t.dtype.name}: give it with -i NAME=FILE.npy")
            inv[name] = rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype.storage)
        invs.append(inv)
    return invs, f"seeded random, seed {seed} (NPU_BENCH_SEED), {len(invs)} invocation(s)", seed


class Progress:
    """Follows the bench's progress file: a bar on a terminal, a line per layer otherwise."""

    def __init__(self, path: Path, total: int, tile_layers: dict[int, tuple[int, str]], stream=None):
        self.path, self.total, self.tile_layers = path, total, tile_layers
        self.stream = stream or sys.stdout
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.tty = self.stream.isatty()

    def __enter__(self):
        if self.path.exists():
            self.path.unlink()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        from tqdm import tqdm

        bar = tqdm(total=self.total, unit="tile", file=self.stream, disable=not self.tty, leave=False)
        seen, failed, layer = 0, 0, None
        while True:
            done = self.stop.wait(0.2)
            lines = self.path.read_text().splitlines() if self.path.exists() else []
            for line in lines[seen:]:
                k, tile, ok = (int(v) for v in line.split())
                failed += not ok
                bar.update(1)
                bar.set_postfix(failed=failed, refresh=False)
                lay = (k,) + self.tile_layers.get(tile, (-1, "?"))
                if not self.tty and lay != layer:
                    if layer is not None:
                        print(f"  invocation {layer[0]} layer {layer[1]} {layer[2]}: done", file=self.stream, flush=True)
                    layer = lay
            seen = len(lines)
            if done:
                if not self.tty and layer is not None:
                    print(f"  invocation {layer[0]} layer {layer[1]} {layer[2]}: done", file=self.stream, flush=True)
                bar.close()
                return


def run_sim(model: Path, cfg: NpuConfig, simulator: str, *, input_specs: list[str] = (), waves: bool = False,
            fault: str | None = None, workdir: Path | None = None, state: dict | None = None,
            invocations: int | None = None, stop_at_first_mismatch: bool = False,
            binds: dict[str, int] | None = None, progress: bool = True) -> SimReport:
    from compiler.tosa_io import read_tosa
    from sim.cosim.program_run import decode_outputs, prepare, run_on_rtl, variables_match
    from sim.oracles.backends import GoldenSession, open_session
    from sim.rtl.core import cached_core

    t_start, started = time.monotonic(), time.time()
    seeds.take_drawn()        # from here on, the streams this run draws
    graph = read_tosa(model)
    invs, inputs_text, seed = load_inputs(model, graph, list(input_specs), invocations)
    golden = GoldenSession(graph, cfg, binds=binds, input_shapes={n: a.shape for n, a in invs[0].items()})
    program = golden.program
    workdir = Path(workdir or BUILD_ROOT / "sim" / f"{model.stem}-{cfg.report_key}-{simulator}")
    program.save(workdir / "program")
    job, grun = prepare(program, cfg, invs, state=state, stop_at_first_mismatch=stop_at_first_mismatch)

    built = cached_core(cfg, simulator, fault=fault, waves=waves)
    run_dir = workdir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    tile_layers = {t["id"]: (layer["index"], layer["name"]) for layer in program.manifest["layers"]
                   for t in layer["tiles"]}
    total = sum(len(i.tiles) for i in job.invocations)
    t_sim = time.monotonic()
    if progress:
        with Progress(run_dir / "progress.txt", total, tile_layers):
            result, bench = run_on_rtl(built, job, run_dir, waves=waves)
    else:
        result, bench = run_on_rtl(built, job, run_dir, waves=waves)
    sim_seconds = time.monotonic() - t_sim
    if result is None:
        from sim.rtl.build import SimulatorCrash

        raise SimulatorCrash(f"the {simulator} co-simulation stopped before reporting: "
                             f"{'; '.join(bench.failures) or 'no results'}", run_dir / "sim.log")

    tiles, inv_reports, rtl_outputs = [], [], []
    for k, (r, exp) in enumerate(zip(result.invocations, job.invocations)):
        tiles += tile_reports(k, r.tiles, program.manifest)
        outs = decode_outputs(program, r)
        rtl_outputs.append(outs)
        gout = grun.outputs[k]
        outputs_match = exp.status != Status.OK or all(
            outs[n] is not None and np.array_equal(outs[n], gout[n]) for n in gout)
        vars_match = variables_match(r, exp)
        inv_reports.append(InvocationReport(
            k, Status(r.status).name if r.status >= 0 else "no END", Status(exp.status).name, r.cycles,
            exp.cycles, exp.host_cycles, bool(outputs_match), bool(vars_match), round(r.wall_seconds, 3), r.note,
            round(r.bench_seconds, 3)))
    if len(result.invocations) < len(job.invocations):
        inv_reports[-1].note = (inv_reports[-1].note + "; " if inv_reports[-1].note else "") + \
            f"stopped: {len(job.invocations) - len(result.invocations)} invocation(s) not run"

    checks, notes = {}, []
    names = [p.name for p in program.outputs]
    ran_ok = [k for k, e in enumerate(job.invocations[:len(result.invocations)]) if e.status == Status.OK]
    checks["rtl == golden"] = all(inv_reports[k].outputs_match for k in range(len(inv_reports)))
    valid = [k for k in ran_ok if all(rtl_outputs[k][n] is not None for n in names)]
    try:
        interp = open_session(graph, "interp")
        if state is not None:
            interp.load_state(state)
        interp_out = [interp.run(inp) for inp in invs[:len(result.invocations)]]
        checks["rtl == interpreter"] = all(np.array_equal(rtl_outputs[k][n], interp_out[k][n])
                                           for k in valid for n in names) and len(valid) == len(ran_ok)
    except NpuBenchError as e:
        notes.append(f"interpreter: {e}")
    ref = _reference(model, graph, invs, input_specs, state, names, notes)
    if ref is not None:
        checks["rtl == reference model"] = all(np.array_equal(rtl_outputs[k][n], ref[k][n])
                                               for k in valid for n in names) and len(valid) == len(ran_ok)
    if grun.errors and any(grun.errors):
        notes += [f"invocation {k}: the golden model stopped: {e}" for k, e in enumerate(grun.errors) if e]

    wave_file = None
    if waves:       # Verilator writes into the run folder, Icarus beside its build
        found = [f for d in (run_dir, built.build_dir) for f in (*d.glob("*.fst"), *d.glob("*.vcd"))]
        found = [f for f in found if f.stat().st_mtime >= t_sim - 1]
        wave_file = str(max(found, key=lambda f: f.stat().st_mtime)) if found else None
    rep = SimReport(str(model), cfg, simulator, inputs_text, seed, tiles, inv_reports, checks, notes,
                    built.build_seconds, built.reused, time.monotonic() - t_start, sim_seconds, wave_file)
    rep.final_state = grun.model.save_state()
    from sim.verification.core_coverage import CoreCoverage

    rep.coverage = CoreCoverage()       # what the scoreboard verified, as functional coverage
    rep.coverage.sample_run(program, cfg, job, grun, result)
    rep.started = started
    rep.run_seed = "" if seeds.run_seed() is None else str(seeds.run_seed())
    rep.seeds = sorted(set(seeds.take_drawn()))
    rep.host_layers = [(layer["index"], layer["name"], layer["op"], layer.get("reason", ""))
                       for layer in program.manifest["layers"] if layer["kind"] == "host"]
    reached = {}
    for t in tiles:
        reached[t.invocation] = reached.get(t.invocation, 0) + 1
    rep.not_run = {k: len(e.tiles) - reached.get(k, 0) for k, e in enumerate(job.invocations)
                   if len(e.tiles) > reached.get(k, 0)}
    rep.rtl_hash = built.rtl_hash
    rep.simulator_version = built.meta.get("simulator_version", "")
    return rep


def _reference(model, graph, invs, input_specs, state, names, notes):
    """Arm's reference model's outputs per invocation: live for a stateless graph, else the
    committed ones (its command line cannot carry variables between invocations)."""
    from sim.oracles.refmodel import run_reference

    data = ModelData.of(model)
    committed = None
    if not input_specs and state is None and data is not None and data.invocations >= len(invs):
        committed = data.all_reference_outputs()[:len(invs)]
    if not graph.main.variables():
        try:
            live = [run_reference(model, inp, names) for inp in invs]
        except NpuBenchError as e:
            notes.append(str(e))
            live = [None]
        if all(r is not None for r in live):
            return live
        if committed is None:
            notes.append("Arm's reference model is not installed (pip install 'npu-bench[test]'); not compared")
        return committed
    if committed is None:
        notes.append("Arm's reference model was not compared: its command line cannot carry variable state "
                     "between invocations, and these inputs have no committed reference outputs")
    return committed


def sim_cli(args) -> int:
    from compiler.pipeline import parse_binds
    from sim.cli.files import output_dir
    from sim.cli.state_file import check_state, load_state, save_state
    from hw.npu_core import CORE_FAULTS

    cfg = load_config(args.config, args.set)
    model = Path(args.model) if args.model else DEFAULT_MODEL
    if not model.exists():
        raise NpuBenchError(f"{model}: no such file")
    if args.inject_fault is not None and args.inject_fault not in CORE_FAULTS:
        raise NpuBenchError(f"--inject-fault {args.inject_fault}: no such fault (faults: {', '.join(CORE_FAULTS)})")
    stem = model.parent.name if model.stem == "model" else model.stem
    workdir = BUILD_ROOT / "sim" / f"{stem}-{cfg.report_key}-{args.simulator}{'-' + args.inject_fault if args.inject_fault else ''}"
    report_dir = output_dir(args.report if args.report else workdir, "report folder")
    state = None
    if args.state:
        from compiler.tosa_io import read_tosa
        from sim.cli.files import writable_folder_of
        from sim.cli.run import graph_variables

        writable_folder_of(args.state, "state file")
        state = load_state(args.state)
        if state is not None:
            check_state(args.state, state, graph_variables(read_tosa(model)), init_missing=args.init_missing)
    if args.tile is not None:
        from sim.cosim.tile_replay import run_tile

        text, ok = run_tile(model, cfg, args.simulator, args.tile, invocation=args.invocation, input_specs=args.input,
                            waves=args.waves, state=state, binds=parse_binds(args.bind),
                            workdir=workdir / f"tile-{args.invocation}-{args.tile}", fault=args.inject_fault)
        print(text)
        return 0 if ok else 1
    rep = run_sim(model, cfg, args.simulator, input_specs=args.input, waves=args.waves, fault=args.inject_fault,
                  workdir=workdir, state=state, invocations=args.invocations,
                  stop_at_first_mismatch=args.stop_at_first_mismatch, binds=parse_binds(args.bind))
    jpath, xpath = write_reports(rep, report_dir)
    print(format_report(rep))
    print(f"reports: {jpath} {xpath}")
    if args.state and rep.ok:
        save_state(args.state, rep.final_state)
        print(f"state saved to {args.state}")
    return 0 if rep.ok else 1
