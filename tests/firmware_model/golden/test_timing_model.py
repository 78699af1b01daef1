"""The timing-only model (firmware_model/golden/timing_model.py) against the golden model: the
same counters (Counters.as_dict()) after every invocation, through both of its paths (run_steps,
command by command, and invoke, at once), the same timeline after every command, the same
registers and variable-slot flags, and the same fault (type, message, status) where the golden
model stops: on every network in models/ with its committed inputs, all invocations, on tiny,
default and large, and on random programs of every unit, with faults of every kind.
"""

from __future__ import annotations

import functools
import io
import numpy as np
import pytest

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Command, DType, MacMode, Opcode, Reg, Sram, Status, VarOp
from firmware_model.arch.program import Program
from firmware_model.arch.registers import RecordingRegisters
from firmware_model.errors import GoldenModelError
from firmware_model.golden import timing_model
from firmware_model.golden.model import GoldenModel
from firmware_model.golden.timing_model import UNIT_PLANS, TimingModel
from sim import seeds
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR
from sim.vectors import random_programs as rp
from sim.vectors.random_tiles import FAULTS

NETWORKS = sorted(p.parent.name for p in MODELS_DIR.glob("*/model.tosa"))
CONFIGS = ("tiny", "default", "large")

_programs: dict = {}


def compiled(name: str, config: str) -> Program:
    key = (name, config)
    if key not in _programs:
        _programs[key] = compile_file(MODELS_DIR / name / "model.tosa", load_config(config), out=io.StringIO()).program
    return _programs[key]


def timeline_state(tl) -> tuple:
    return tl.fetch, tl.dma_idle, tl.stall, tuple(tl.pops)


def outcome(fn):
    """What running fn() ended with: None, or the exception as (type, message, status)."""
    try:
        fn()
    except Exception as e:                              # noqa: BLE001 - every kind must match
        return type(e), str(e), getattr(e, "status", None)
    return None


def advance(steps) -> tuple:
    """The next thing a run_steps generator does: ("pc", index), ("end",) or ("fault", what)."""
    try:
        return "pc", next(steps)
    except StopIteration:
        return ("end",)
    except Exception as e:                              # noqa: BLE001 - every kind must match
        return "fault", (type(e), str(e), getattr(e, "status", None))


def lockstep(golden: GoldenModel, timing: TimingModel, inputs: dict) -> tuple | None:
    """One invocation of both, command by command: the same command indices, and the timelines
    equal after each (fetch clock, DMA idle clock, stalls, the DMA queue's pops). Returns the
    fault both ended with (None at END)."""
    golden.begin_invocation(inputs)
    g_steps, t_steps = golden.run_steps(), timing.run_steps()
    while True:
        a, b = advance(g_steps), advance(t_steps)
        assert a == b, f"golden: {a}, the timing model: {b}"
        if a[0] != "pc":
            return None if a[0] == "end" else a[1]
        assert timeline_state(golden.timeline) == timeline_state(timing.timeline), f"after command {a[1]}"


def assert_same_state(golden: GoldenModel, *timings: TimingModel) -> None:
    want = golden.counters.as_dict()
    for t in timings:
        assert t.counters.as_dict() == want
        assert t.regs == golden.regs
        assert np.array_equal(t.variable_slots, golden.mem.variable_slots)
        assert timeline_state(t.timeline) == timeline_state(golden.timeline)


def compare(program: Program, cfg, invocations: list[dict], *, transactions: bool = True) -> list:
    """Both paths of the timing model over the invocations: run_steps in lockstep with
    GoldenModel.run_steps (no rollback), invoke against GoldenModel.invoke (a faulting invocation
    rolls the variables back). Returns each invocation's fault (or None). Without `transactions`
    (programs that must not fault: one golden run per invocation, which is what costs), invoke is
    compared with the lockstep golden model, whose run_steps is then what its invoke does."""
    g_steps, t_steps = GoldenModel(program, cfg), TimingModel(program, cfg)
    g_inv, t_inv = (GoldenModel(program, cfg) if transactions else g_steps), TimingModel(program, cfg)
    ends = []
    for k, inputs in enumerate(invocations):
        ended = lockstep(g_steps, t_steps, inputs)
        assert_same_state(g_steps, t_steps)
        if transactions:
            want = outcome(lambda: g_inv.invoke(inputs))
            assert want == ended, f"invocation {k}: run_steps ended {ended}, invoke {want}"
        else:
            assert ended is None, f"invocation {k} faulted: {ended}"
            want = None
        assert outcome(t_inv.invoke) == want, f"invocation {k}"
        assert_same_state(g_inv, t_inv)
        ends.append(want)
    # a model made afterwards reuses the program's decodes and outcomes: still the same numbers
    again = TimingModel(program, cfg)
    for inputs, want in zip(invocations, ends):
        assert outcome(again.invoke) == want
    if all(e is None for e in ends):
        assert again.counters.as_dict() == g_inv.counters.as_dict()
    return ends


# --- the networks --------------------------------------------------------------------------------
# blazeface on tiny (43,164 tiles, 1.08 M commands) is kept: about 16 s, of which the one golden
# run is 12 s and the compile 3 s; every other case takes under 2 s (the file about 22 s).
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", NETWORKS)
def test_network_counts_equal_the_golden_models(name, config):
    cfg = load_config(config)
    program = compiled(name, config)
    feeds = ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs()
    compare(program, cfg, feeds, transactions=False)


# --- random programs -------------------------------------------------------------------------------
RANDOM = [f"MAC {t} {c}" for c in CONFIGS for t in ("int8", "int16")] + [
    f"{u} corners={c}" for c in (False, True) for u in ("ELTWISE", "POOL")]


@functools.cache
def random_program(what: str) -> tuple[object, Program]:
    unit, kind, config = (what.split() + [""])[:3]
    if unit == "MAC":
        cfg = load_config(config)
        dtype, n = (DType.INT8, 10) if kind == "int8" else (DType.INT16, 4)
        return cfg, rp.tile_program(cfg, rp.mac_tiles(cfg, seeds.rng(31, f"timing model {what}"), n, dtype))
    corners = kind == "corners=True"
    make, n, most = (rp.eltwise_tiles, 12, 40) if unit == "ELTWISE" else (rp.pool_tiles, 8, 30)
    cfg, tiles = make(seeds.rng(33, f"timing model {what}"), n, corners=corners)
    return cfg, rp.tile_program(cfg, tiles[:most])


@pytest.mark.parametrize("what", RANDOM)
def test_random_programs(what):
    cfg, program = random_program(what)
    assert compare(program, cfg, [{}, {}]) == [None, None]


def with_command(program: Program, at: int, *cmds: Command) -> Program:
    commands = list(program.commands)
    commands[at:at] = cmds
    return Program(commands, program.constants, program.manifest)


FAULTS_OF = {    # what -> the status it ends with; None: golden's disassembly of the command fails first
    "SET of no register": Status.BAD_REGISTER, "DMA of no SRAM": None, "FILL of no SRAM": None,
    "DMA_STORE of the LUT": Status.BAD_MODE, "the reserved LUT opcode": Status.BAD_OPCODE,
    "HOST without a host CPU": Status.BAD_OPCODE, "HOST of no host op": None, "no END": Status.COMMAND_OVERRUN,
    "DMA outside external memory": Status.ADDRESS_RANGE, "MAC of no mode": None,
    "ELTWISE of no operation": Status.BAD_MODE, "POOL of no mode": Status.BAD_MODE, "VAR of no mode": Status.BAD_MODE,
    "VAR CHECK of a clear slot": Status.VAR_READ_BEFORE_WRITE, "faulting VAR program": Status.VAR_READ_BEFORE_WRITE,
    **{f"MAC: {what}": "refused" for what, _ in FAULTS},   # the tiles random_tiles.FAULTS makes the RTL refuse
}


def faulty_program(what: str) -> tuple[object, Program, list[dict]]:
    """(cfg, a program that faults mid-way, its inputs)."""
    cfg = load_config("tiny")
    if what == "HOST of no host op":                  # mlp's host op list has one entry
        program = compiled("mlp", "tiny")
        feeds = ModelData.of(MODELS_DIR / "mlp" / "model.tosa").all_inputs()
        return cfg, with_command(program, len(program.commands) // 2, Command(Opcode.HOST, 0, 0, 7)), feeds
    if what == "faulting VAR program":
        return cfg, rp.faulting_variable_program(cfg), [{}]
    if what.startswith("MAC: "):
        change = dict(FAULTS)[what[5:]]
        tiles = rp.mac_tiles(cfg, seeds.rng(36, "timing model faulty tiles"), 2)
        t = tiles[1]
        bad = rp.TileSpec(t.opcode, t.sub, {**t.regs, **{int(r): v for r, v in change.items()}}, t.loads, t.output)
        return cfg, rp.tile_program(cfg, [tiles[0], bad]), [{}]
    base = rp.tile_program(cfg, rp.mac_tiles(cfg, seeds.rng(35, "timing model faults"), 4))
    if what == "no END":
        return cfg, Program(base.commands[:-1], base.constants, base.manifest), [{}]
    inserted = {
        "SET of no register": [Command(Opcode.SET, 0xEF, 0, 1)],
        "DMA of no SRAM": [Command(Opcode.DMA_LOAD, 9)],
        "FILL of no SRAM": [Command(Opcode.FILL, 7, 0, 3)],
        "DMA_STORE of the LUT": [Command(Opcode.DMA_STORE, Sram.LUT)],
        "the reserved LUT opcode": [Command(Opcode.LUT)],
        "HOST without a host CPU": [Command(Opcode.HOST, 0, 0, 0)],
        "DMA outside external memory": [Command(Opcode.SET, Reg.DMA_EXT_ADDR, 0, cfg.ext_size - 1)] + [
            Command(Opcode.SET, r, 0, v) for r, v in ((Reg.DMA_LEN0, 8), (Reg.DMA_LEN1, 1), (Reg.DMA_LEN2, 1))] + [
            Command(Opcode.DMA_LOAD, Sram.INPUT)],
        "MAC of no mode": [Command(Opcode.MAC, max(MacMode) + 1)],
        "ELTWISE of no operation": [Command(Opcode.ELTWISE, 99)],
        "POOL of no mode": [Command(Opcode.POOL, 9)],
        "VAR of no mode": [Command(Opcode.VAR, 9)],
        "VAR CHECK of a clear slot": [Command(Opcode.SET, Reg.VAR_SLOT, 0, 30), Command(Opcode.VAR, VarOp.CHECK)],
    }[what]
    return cfg, with_command(base, len(base.commands) // 2, *inserted), [{}]


@pytest.mark.parametrize("what", list(FAULTS_OF))
def test_faults_end_both_models_alike(what):
    cfg, program, feeds = faulty_program(what)
    ends = compare(program, cfg, [feeds[0]] * 3)
    assert ends[0] is not None, f"{what}: the program ran to END"
    assert ends == [ends[0]] * 3, "a faulting invocation changes nothing the next one depends on"
    status = FAULTS_OF[what]
    if status is None:
        assert ends[0][0] is not GoldenModelError
    elif status == "refused":
        assert ends[0][0] is GoldenModelError and ends[0][2] in (Status.BAD_MODE, Status.ADDRESS_RANGE)
    else:
        assert ends[0][0] is GoldenModelError and ends[0][2] == status


def variable_program(cfg) -> Program:
    """INIT of slot 0 from the constants (loaded on the first invocation only), READ of it, WRITE
    of slot 1, MARK and CHECK of slot 5, READ of slot 1."""
    return rp.var_program(cfg, ((0, VarOp.INIT, 0), (0, VarOp.READ, 64), (1, VarOp.WRITE, 0), (5, VarOp.MARK, 0),
                                (5, VarOp.CHECK, 0), (1, VarOp.READ, 128)), "VAR program", ext_used=256)


@pytest.mark.parametrize("config", CONFIGS)
def test_variable_flags_persist_across_invocations(config):
    """INIT loads on the first invocation and keeps afterwards; the flags carry over as on golden."""
    cfg = load_config(config)
    program = variable_program(cfg)
    assert compare(program, cfg, [{}, {}, {}]) == [None] * 3
    t = TimingModel(program, cfg)
    t.invoke()
    t.invoke()
    assert t.counters.var == {"INIT loaded": 1, "INIT kept": 1, "READ": 4, "WRITE": 2, "MARK": 2, "CHECK": 2}


def test_a_program_changed_in_place_is_decoded_again():
    """Like tests/firmware_model/golden/test_variables.py: commands inserted into a model's program
    after the model was made; the timing model follows, as the golden model does."""
    cfg = load_config("tiny")
    program = compiled("lstm", "tiny")
    program = Program(list(program.commands), program.constants, program.manifest)
    feeds = ModelData.of(MODELS_DIR / "lstm" / "model.tosa").all_inputs()
    golden, timing = GoldenModel(program, cfg), TimingModel(program, cfg)
    golden.invoke(feeds[0])
    timing.invoke()
    program.commands.insert(len(program.commands) - 1, Command(Opcode.VAR, VarOp.CHECK, 0, 0))
    program.commands.insert(len(program.commands) - 2, Command(Opcode.SET, Reg.VAR_SLOT, 0, 31))
    want = outcome(lambda: golden.invoke(feeds[1]))
    assert want is not None and want[2] == Status.VAR_READ_BEFORE_WRITE
    assert outcome(timing.invoke) == want
    assert_same_state(golden, timing)


# --- what the timing model relies on -------------------------------------------------------------
def test_unit_plans_read_only_their_units_registers():
    """The timing model makes one plan per (opcode, sub, the unit's registers): a plan must read no
    register outside its unit's list (isa.MAC_REGS, ELT_REGS, POOL_REGS). Checked on every compute
    command of the networks on default and of the random programs."""
    cases = []
    programs = [(load_config("default"), compiled(n, "default")) for n in NETWORKS]
    programs += [random_program(what) for what in RANDOM]
    for cfg, program in programs:
        regs: dict[int, int] = {}
        for cmd in program.commands:
            if cmd.opcode == Opcode.SET:
                regs[cmd.sub] = cmd.value
            elif cmd.opcode in UNIT_PLANS:
                cases.append((cfg, cmd.opcode, cmd.sub, dict(regs)))
    rng = np.random.default_rng(seeds.seed_for("timing model register reads", 37))
    cfg = load_config("default")
    for _ in range(300):                           # random register files: refusals read a prefix
        op = (Opcode.MAC, Opcode.ELTWISE, Opcode.POOL)[rng.integers(3)]
        regs = {int(r): int(rng.choice([0, 1, 2, 4, 8, 64, rng.integers(0, 1 << 32)])) for r in Reg}
        cases.append((cfg, op, int(rng.integers(0, 12)), regs))
    assert len({c[1] for c in cases}) == 3
    for cfg, op, sub, regs in cases:
        fn, allowed = UNIT_PLANS[op]
        view = RecordingRegisters(regs)
        try:
            fn(cfg, view, sub)
        except GoldenModelError:
            pass
        extra = view.seen - set(allowed)
        assert not extra, f"{op.name} plan reads {[Reg(r).name for r in extra]}"


def test_the_timing_model_touches_no_data(monkeypatch):
    """No memories, no unit data paths, no host kernels: a network with a host op and one with
    variables still count as on golden."""
    from firmware_model.golden import host_cpu, memories

    want = {}
    for name in ("mlp", "lstm"):
        g = GoldenModel(compiled(name, "tiny"), load_config("tiny"))
        for f in ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs():
            g.invoke(f)
        want[name] = g.counters.as_dict()

    def refuse(*a, **k):
        raise AssertionError("the timing model touched data")

    monkeypatch.setattr(memories.Memories, "__init__", refuse)
    monkeypatch.setattr(host_cpu.HostCpu, "run", refuse)
    assert not [n for n in vars(timing_model) if n.startswith("execute_") or n in ("Memories", "HostCpu")]
    timing_model._PROGRAMS.clear()
    for name in ("mlp", "lstm"):
        t = TimingModel(compiled(name, "tiny"), load_config("tiny"))
        for _ in ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs():
            t.invoke()
        assert t.counters.as_dict() == want[name]


def test_dma_beats_without_an_array_per_run():
    """cycle_model.dma_beats sums run_beats over one array of runs, except when every run starts
    at the same offset in its word (the SRAM strides whole words): then one run's beats times
    their number. Both give the same count on random transfers."""
    from firmware_model.arch.cycle_model import dma_beats, run_beats, sram_word_bytes

    rng = np.random.default_rng(seeds.seed_for("timing model dma beats", 38))
    for config in CONFIGS:
        cfg = load_config(config)
        for _ in range(3000):
            sram = Sram(int(rng.integers(6)))
            wb = sram_word_bytes(cfg, sram)
            fill = bool(rng.random() < 0.3)
            g = dict(sram_addr=int(rng.integers(5000)), len0=int(rng.choice([1, 2, 3, rng.integers(1, 300)])),
                     len1=int(rng.choice([1, 2, rng.integers(1, 20)])), len2=int(rng.choice([1, rng.integers(1, 6)])),
                     sram_stride1=int(rng.choice([0, wb, 3 * wb, rng.integers(300)])),
                     sram_stride2=int(rng.choice([0, 7 * wb, rng.integers(1000)])))
            starts = (g["sram_addr"] + np.arange(g["len2"])[:, None] * g["sram_stride2"]
                      + np.arange(g["len1"])[None, :] * g["sram_stride1"])
            want = int(np.sum(run_beats(wb, wb if fill else cfg.ext_bandwidth, starts % wb, g["len0"])))
            assert dma_beats(cfg, sram, fill=fill, **g) == want, (config, sram, g)


def test_a_programs_plans_go_with_it():
    """The process keeps a program's decodes while the program lives, even after a fault."""
    import gc

    cfg = load_config("tiny")
    program = rp.faulting_variable_program(cfg)
    key = id(program)
    t = TimingModel(program, cfg)
    assert outcome(t.invoke)[2] == Status.VAR_READ_BEFORE_WRITE
    assert key in timing_model._PROGRAMS
    del t, program
    gc.collect()
    assert key not in timing_model._PROGRAMS
