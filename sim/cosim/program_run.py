"""A compiled program on the RTL: the golden model's expectations, the job, the run.

    job, golden = prepare(program, cfg, invocations)      # golden runs first, in this process
    result, bench = run_on_rtl(built, job, job_dir)       # the core runs the same program itself

`prepare` places the program in external memory (constants where the compiler put them, the
command stream after the last tensor), runs every invocation on the golden model with an event
hook that records each compute command (its done clock, the output bytes it leaves), and keeps
golden's outputs, variable SRAM and status per invocation. The RTL bench
(sim/cosim/core_bench.py) compares against exactly these.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import Opcode, Sram, Status, pack
from firmware_model.arch.program import Program
from firmware_model.errors import GoldenModelError, NpuBenchError
from sim.cosim.records import InvocationJob, ProgramJob, ProgramResult, TileExpectation
from sim.paths import BUILD_ROOT

BENCH_MODULE = "sim.cosim.core_bench"
PROGRAM_ALIGN = 64


class CosimError(NpuBenchError):
    """A program that cannot be run on the RTL as asked (it does not fit the external memory, ...)."""


class MismatchError(NpuBenchError):
    """The RTL did something else than the golden model: a tile's bytes or done clock, an
    invocation's status or cycles, its outputs or its variables. Not a user error: exit 1."""
    exit_status = 1


def decode_outputs(program: Program, r) -> dict[str, np.ndarray | None]:
    """The graph's outputs as the RTL left them in external memory (None: not all bytes came back)."""
    outs = {}
    for place in program.outputs:
        raw = r.outputs.get(place.name, np.zeros(0, np.uint8))
        st = place.dtype.storage
        outs[place.name] = (np.frombuffer(raw.tobytes(), st.newbyteorder("<")).astype(st).reshape(place.shape)
                            if raw.size == place.nbytes else None)
    return outs


@dataclass
class GoldenRun:
    """What the golden model did, per invocation."""
    outputs: list[dict[str, np.ndarray]]
    statuses: list[int]
    errors: list[str]
    cycles: list[int | None]
    host_cycles: list[int]
    model: object
    var_kinds: list[dict] = field(default_factory=list)   # per invocation: VAR commands run, by kind (counters.var)


def config_ref(cfg: NpuConfig) -> dict:
    """The configuration as the bench's process rebuilds it (overrides and all)."""
    return cfg.to_dict()


def prepare(program: Program, cfg: NpuConfig, invocations: list[dict[str, np.ndarray]], *,
            state: dict | None = None, stop_at_first_mismatch: bool = False) -> tuple[ProgramJob, GoldenRun]:
    from firmware_model.golden.model import GoldenModel

    commands = pack(program.commands)
    ext_used = int(program.manifest.get("memory", {}).get("ext_used", program.constants_addr + len(program.constants)))
    prog_addr = -(-ext_used // PROGRAM_ALIGN) * PROGRAM_ALIGN
    if prog_addr + len(commands) > cfg.ext_size:
        raise CosimError(f"the program's tensors ({ext_used} B) and its {len(program.commands)} commands "
                         f"({len(commands)} B) do not fit the {cfg.ext_size} B external memory of '{cfg.name}'")
    image = [(program.constants_addr, program.constants), (prog_addr, commands)]

    golden = GoldenModel(program, cfg)
    initial = None
    if state is not None:
        golden.load_state(state)
        sram_image, _ = golden.variable_sram_image()
        initial = (sram_image, golden.mem.variable_slots.copy())    # the RTL starts from the same state
        image += [(addr, raw.tobytes()) for addr, raw in golden.home_bytes()]   # and the same homes
    run = GoldenRun([], [], [], [], [], golden)
    jobs = []
    for inputs in invocations:
        tiles: list[TileExpectation] = []

        def hook(ev, tiles=tiles):
            a, b = ev.output
            tiles.append(TileExpectation(ev.command_index, ev.tile_id, ev.opcode.name, ev.end, (a, b),
                                         ev.memories.sram[Sram.OUTPUT][a:b].copy(), dict(ev.regs),
                                         golden.timeline.stall))
            return None

        golden.event_hook = hook
        before_host = golden.counters.host_cycles
        before_var = dict(golden.counters.var)
        writes = []
        for place in program.inputs:
            value = np.ascontiguousarray(inputs[place.name], dtype=place.dtype.storage.newbyteorder("<"))
            writes.append((place.addr, value.tobytes()))
        try:
            outs = golden.invoke(inputs)
            status, error, cycles = int(Status.OK), "", golden.counters.invocation_cycles[-1]
        except GoldenModelError as e:
            if e.status is None:      # not a fault the NPU reports: the host's inputs are wrong
                raise
            outs, status, error, cycles = {}, int(e.status), str(e), None
        run.outputs.append(outs)
        run.statuses.append(status)
        run.errors.append(error)
        run.cycles.append(cycles)
        run.host_cycles.append(golden.counters.host_cycles - before_host)
        run.var_kinds.append({k: n - before_var.get(k, 0) for k, n in golden.counters.var.items()
                              if n > before_var.get(k, 0)})
        image_v, flags_v = golden.variable_sram_image()
        fault = golden.fault_variables if status != Status.OK else None
        jobs.append(InvocationJob(
            inputs=writes, tiles=tiles, status=status, cycles=cycles,
            outputs=[(p.name, p.addr, p.nbytes) for p in program.outputs],
            variable_image=image_v, variable_flags=golden.mem.variable_slots.copy(),
            host_cycles=run.host_cycles[-1],
            fault_variable_image=None if fault is None else fault[0],
            fault_variable_flags=None if fault is None else fault[1],
            homes=golden.home_bytes(), fault_homes=None if fault is None else fault[2]))
        if status != Status.OK:
            break
    golden.event_hook = None
    job = ProgramJob(config_ref(cfg), image, prog_addr, len(program.commands), jobs,
                     host_ops=list(program.manifest.get("host_ops", [])),
                     stop_at_first_mismatch=stop_at_first_mismatch, initial_variables=initial,
                     command_labels=command_labels(program))
    return job, run


def command_labels(program: Program) -> list[str]:
    """Each command as a watchdog report names it: its disassembly, the tile it belongs to (the
    last MARK before it) and that tile's layer."""
    layer_of = {t["id"]: layer.get("name", "?") for layer in program.manifest.get("layers", [])
                for t in layer.get("tiles", [])}
    labels, tile = [], None
    for cmd in program.commands:
        if cmd.opcode == Opcode.MARK:
            tile = cmd.value
        where = f", tile {tile} (layer {layer_of.get(tile, '?')})" if tile is not None else ", before the first tile"
        labels.append(f"{cmd.disassemble()}{where}")
    return labels


def run_on_rtl(built, job: ProgramJob, job_dir: Path | None = None, *, waves: bool = False):
    """Run the job's program on a built core; (ProgramResult or None, the cocotb BenchResult)."""
    from sim.rtl.build import run_bench

    own_dir = job_dir is None
    job_dir = Path(job_dir or tempfile.mkdtemp(prefix="job-", dir=_jobs_root()))
    job_dir.mkdir(parents=True, exist_ok=True)
    with open(job_dir / "job.pkl", "wb") as f:
        pickle.dump(job, f)
    results_file = job_dir / "results.pkl"
    if results_file.exists():
        results_file.unlink()
    bench = run_bench(built, BENCH_MODULE, testcase="run_program", test_dir=job_dir,
                      extra_env={"NPU_BENCH_JOB": str(job_dir)}, waves=waves)
    result: ProgramResult | None = None
    if results_file.exists():
        with open(results_file, "rb") as f:
            result = pickle.load(f)
    if own_dir and result is not None:
        shutil.rmtree(job_dir, ignore_errors=True)
    return result, bench


def _jobs_root() -> Path:
    root = BUILD_ROOT / "jobs"
    root.mkdir(parents=True, exist_ok=True)
    return root


def variables_match(r, exp) -> bool:
    """The variable SRAM, its slot flags and the homes of variables kept in external memory equal
    golden's after the invocation and, when it faulted, also as the fault left them (before the
    host driver's rollback)."""
    def same_homes(a, b) -> bool:
        return a is not None and len(a) == len(b) and all(x == y and np.array_equal(p, q) for (x, p), (y, q) in zip(a, b))

    ok = (np.array_equal(r.variable_image, exp.variable_image) and np.array_equal(r.variable_flags, exp.variable_flags)
          and same_homes(r.homes, exp.homes))
    if exp.fault_variable_image is not None and r.status == exp.status:
        ok = ok and (np.array_equal(r.fault_variable_image, exp.fault_variable_image)
                     and np.array_equal(r.fault_variable_flags, exp.fault_variable_flags)
                     and same_homes(r.fault_homes, exp.fault_homes))
    return bool(ok)


def result_differences(job: ProgramJob, golden, result) -> list[str]:
    """What the RTL did differently from golden's expectations `job` (and its outputs `golden`,
    prepare()'s second result), one line each; empty when nothing differs."""
    if result is None:
        return ["the bench reported nothing (the simulator stopped)"]
    found = []
    if len(result.invocations) != len(job.invocations):
        found.append(f"{len(result.invocations)} of {len(job.invocations)} invocations ran")
    for k, (r, exp) in enumerate(zip(result.invocations, job.invocations)):
        found += [f"invocation {k}: {d}" for d in invocation_differences(exp, golden.outputs[k], r)]
    return found


def invocation_differences(exp: InvocationJob, golden_outputs: dict, r) -> list[str]:
    """One invocation: golden's status and cycles, every tile checked with golden's bytes and
    done clock, the outputs (`golden_outputs`, by name) and the variables equal golden's."""
    found = []
    if r.status != exp.status or r.note:
        found.append(f"status {r.status}, golden {exp.status}{'; ' + r.note if r.note else ''}")
    if exp.status == Status.OK and r.cycles != exp.cycles:
        found.append(f"{r.cycles} cycles, the model {exp.cycles}")
    if len(r.tiles) != len(exp.tiles):
        found.append(f"{len(r.tiles)} of {len(exp.tiles)} tiles checked")
    bad = [t for t in r.tiles if not t.ok]
    if bad:
        t = bad[0]
        what = (f"{len(t.mismatch_offsets)} byte(s) differ at {t.mismatch_offsets[:8]}" if t.mismatch_offsets
                else "the core never finished it" if not t.found
                else f"done at {t.rtl_end}, the model {t.golden_end}")
        found.append(f"{len(bad)} tile(s) wrong, first tile {t.tile_id} ({t.opcode}): {what}")
    if exp.status == Status.OK:
        for name, addr, nbytes in exp.outputs:
            want = np.ascontiguousarray(golden_outputs.get(name, np.zeros(0))).view(np.uint8).reshape(-1)
            if not np.array_equal(r.outputs.get(name), want):
                found.append(f"output {name} differs")
    if not variables_match(r, exp):
        found.append("the variables differ")
    return found
