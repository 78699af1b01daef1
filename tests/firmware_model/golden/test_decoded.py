"""The golden model's decoded program (firmware_model/golden/decoded.py, what GoldenModel.run and
invoke execute) against the command-by-command command processor (GoldenModel.run_steps, the
spec's reading, what `fast = False` runs): after every invocation the same outputs, the same
bytes in external memory and in every SRAM (and the variable SRAM's written flags and slot flags),
the same counters, timeline, registers and MARK, and the same error (type, message, status) with
the same variables left behind by a fault; on every network in models/ with all its invocations on
tiny, default and large, on random programs of every unit, on programs with faults of every kind,
and on inputs the REQUIRE monitor refuses.
"""

from __future__ import annotations

import functools
import io

import numpy as np
import pytest

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Opcode, Sram
from firmware_model.arch.program import Program
from firmware_model.errors import TosaUnpredictable
from firmware_model.golden import batched, decoded
from firmware_model.golden.model import GoldenModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR

NETWORKS = sorted(p.parent.name for p in MODELS_DIR.glob("*/model.tosa"))
CONFIGS = ("tiny", "default", "large")


@functools.lru_cache(maxsize=None)
def compiled(name: str, config: str) -> Program:
    return compile_file(MODELS_DIR / name / "model.tosa", load_config(config), out=io.StringIO()).program


def ended(fn):
    """What fn() returned, or the exception it raised as (type, message, status)."""
    try:
        return "ok", fn()
    except Exception as e:                              # noqa: BLE001 - every kind must match
        return "raised", (type(e), str(e), getattr(e, "status", None))


def state(m: GoldenModel) -> dict:
    tl = m.timeline
    fault = m.fault_variables
    return {"counters": m.counters.as_dict(), "regs": dict(m.regs), "mark": m.mark,
            "timeline": None if tl is None else (tl.fetch, tl.dma_idle, tl.stall, tuple(tl.pops)),
            "memories": [m.mem.ext.tobytes()] + [m.mem.sram[s].tobytes() for s in Sram]
            + [m.mem.variable_written.tobytes(), m.mem.variable_slots.tobytes()],
            "fault": None if fault is None else (fault[0].tobytes(), fault[1].tobytes(),
                                                 [(a, r.tobytes()) for a, r in fault[2]])}


def same_results(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "raised":
        return a == b
    return a[1].keys() == b[1].keys() and all(
        a[1][k].dtype == b[1][k].dtype and np.array_equal(a[1][k], b[1][k]) for k in a[1])


def check_same(program: Program, cfg, invocations: list[dict], **kw) -> list:
    """Each invocation on a decoded and on a stepwise golden model of the program: the same
    results and state after each. Returns how each ended."""
    fast, ref = GoldenModel(program, cfg, **kw), GoldenModel(program, cfg, **kw)
    ref.fast = False
    ends = []
    for k, inputs in enumerate(invocations):
        got, want = ended(lambda: fast.invoke(inputs)), ended(lambda: ref.invoke(inputs))
        assert same_results(got, want), f"invocation {k}: decoded {got[0]} {got[1] if got[0] == 'raised' else ''}, " \
                                        f"stepwise {want[0]} {want[1] if want[0] == 'raised' else ''}"
        sf, sr = state(fast), state(ref)
        for key in sr:
            assert sf[key] == sr[key], f"invocation {k}: {key} differs"
        ends.append(want[1] if want[0] == "raised" else None)
    return ends


# --- the networks ----------------------------------------------------------------------------------
# blazeface on tiny is left out (1.08 M commands: about 8 s a stepwise invocation); it runs on
# default and large, and its tiny program's commands are all of kinds the other networks cover.
NETWORK_CONFIGS = [(n, c) for n in NETWORKS for c in CONFIGS if (n, c) != ("blazeface", "tiny")]


@pytest.mark.parametrize("name,config", NETWORK_CONFIGS)
def test_networks(name, config):
    feeds = ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs()
    assert check_same(compiled(name, config), load_config(config), feeds) == [None] * len(feeds)


def test_one_model_runs_both_ways_alike():
    """A model switched between the two paths mid-way (the decode starts from the registers the
    stepwise invocation left) ends as one that ran stepwise throughout."""
    program, cfg = compiled("lstm", "tiny"), load_config("tiny")
    feeds = ModelData.of(MODELS_DIR / "lstm" / "model.tosa").all_inputs()
    mixed, ref = GoldenModel(program, cfg), GoldenModel(program, cfg)
    ref.fast = False
    for k, inputs in enumerate(feeds * 2):
        mixed.fast = k % 2 == 1
        assert same_results(ended(lambda: mixed.invoke(inputs)), ended(lambda: ref.invoke(inputs)))
        assert state(mixed) == state(ref)


# --- random programs and faults (the timing model's cases) ----------------------------------------
def _load(name: str):
    """A sibling test module's helpers (the tests run with --import-mode=importlib)."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"_decoded_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T = _load("test_timing_model.py")


@pytest.mark.parametrize("what", T.RANDOM)
def test_random_programs(what):
    cfg, program = T.random_program(what)
    assert check_same(program, cfg, [{}, {}]) == [None, None]


@pytest.mark.parametrize("what", list(T.FAULTS_OF))
def test_faults(what):
    cfg, program, feeds = T.faulty_program(what)
    ends = check_same(program, cfg, [feeds[0]] * 3)
    assert ends[0] is not None and ends == [ends[0]] * 3


@pytest.mark.parametrize("config", CONFIGS)
def test_variable_program(config):
    cfg = load_config(config)
    assert check_same(T.variable_program(cfg), cfg, [{}, {}, {}]) == [None] * 3


# --- the REQUIRE monitor ---------------------------------------------------------------------------
def extreme_inputs(name: str, seed: int) -> list[dict]:
    """A network's inputs at the ends of their types' ranges (some trip a REQUIRE)."""
    rng = np.random.default_rng(seed)
    out = []
    for inputs in ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs():
        out.append({k: np.where(rng.random(v.shape) < 0.5, np.iinfo(v.dtype).min, np.iinfo(v.dtype).max)
                    .astype(v.dtype) for k, v in inputs.items()})
    return out


@pytest.mark.parametrize("config", ("tiny", "default"))
@pytest.mark.parametrize("name", [n for n in NETWORKS if n != "blazeface"])
def test_extreme_inputs(name, config):
    """Refused or not, both paths end alike (with the monitor, and without it)."""
    program, cfg = compiled(name, config), load_config(config)
    for seed in (1, 2):
        feeds = extreme_inputs(name, seed)
        check_same(program, cfg, feeds)
        check_same(program, cfg, feeds, requires=False)


M = _load("test_require_monitor.py")


def monitor_graphs(tmp_path) -> list[tuple[str, dict, dict]]:
    """(model, good inputs, inputs the monitor refuses): a REQUIRE failing on the last tile on
    tiny, in a host op's kernel, in an op that comes first in the graph but runs later, and in a
    graph with a variable."""
    G, I32, feed = M.G, M.I32, M.feed
    out = []
    g = G()
    a, b = g.input((3, 50), I32), g.input((3, 50), I32)
    model = g.write(tmp_path / "add.tosa", [g.binary("ADD", a, b)])
    x, y = np.random.default_rng(1).integers(-(1 << 30), 1 << 30, (2, 3, 50))
    bad_x = x.copy()
    bad_x[2, 45] = (1 << 31) - 5
    y[2, 45] = 9
    out.append((model, feed(g, x, y), feed(g, bad_x, y)))
    g = G()
    a, b = g.input((2, 5), I32), g.input((2, 5), I32)
    model = g.write(tmp_path / "intdiv.tosa", [g.binary("INTDIV", a, b)])
    good = np.arange(1, 11).reshape(2, 5)
    bad = good.copy()
    bad[1, 4] = 0
    out.append((model, feed(g, good * 7, good), feed(g, good, bad)))
    g = G()
    x, c, d, e = (g.input((1, 30), I32) for _ in range(4))
    r = g.rescale(x, 1 << 30, 6, 0, 0, I32)
    model = g.write(tmp_path / "order.tosa", [g.binary("ADD", c, d), g.binary("ADD", r, e)])
    small, big = np.ones((1, 30)), np.full((1, 30), (1 << 31) - 1)
    out.append((model, feed(g, small, small, small, small), feed(g, small * 40, big, big, small)))
    out.append((model, feed(g, small, small, small, small), feed(g, small, big, big, small)))
    g = G()
    x = g.input((1, 8), I32)
    g.tensors["acc"] = M.Tensor("acc", [1, 8], I32, data=np.zeros((1, 8), np.int32), is_variable=True,
                                variable_name="acc")
    old = g.op("IDENTITY", ["acc"], (1, 8), I32)
    g.ops[-1].attr_kind = "VariableReadAttribute"
    new = g.binary("ADD", old, x)
    g.ops.append(M.Operator("IDENTITY", [new], ["acc"], attr_kind="VariableWriteAttribute"))
    model = g.write(tmp_path / "var.tosa", [old])
    out.append((model, feed(g, np.full((1, 8), 5)), feed(g, np.full((1, 8), (1 << 31) - 3))))
    return out


@pytest.mark.parametrize("config", ("tiny", "default"))
def test_monitor_refusals(tmp_path, config):
    """Inputs the REQUIRE monitor refuses (after the failing command, at a later command, at
    END, in a host op), between good invocations: both paths end alike."""
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa

    cfg = load_config(config)
    for model, good, bad in monitor_graphs(tmp_path):
        program = compile_graph(read_tosa(model), cfg, out=io.StringIO()).program
        ends = check_same(program, cfg, [good, bad, good, bad])
        assert ends[0] is None and ends[1] is not None and ends[1][0] is TosaUnpredictable, (model, ends)
        check_same(program, cfg, [good, bad], requires=False)


def test_steps_are_made_once_per_decode():
    program, cfg = compiled("mlp", "default"), load_config("default")
    feeds = ModelData.of(MODELS_DIR / "mlp" / "model.tosa").all_inputs()
    a, b = GoldenModel(program, cfg), GoldenModel(program, cfg)
    a.invoke(feeds[0])
    dec = a._plans.decode({})                   # the first invocation's: from the power-on registers
    made = dict(dec.golden)
    b.invoke(feeds[0])
    assert dec.golden == made and all(dec.golden[k] is made[k] for k in made)
    assert isinstance(next(iter(made.values())), decoded.GoldenSteps)


class Recorder:
    """A probe that keeps what it was shown."""

    def __init__(self):
        self.seen = []

    def __call__(self, point, *arrays):
        self.seen.append((point, [np.array(a, copy=True) for a in arrays]))


def same_probes(a: Recorder, b: Recorder) -> bool:
    return len(a.seen) == len(b.seen) and all(
        p == q and len(x) == len(y) and all(np.array_equal(u, v) and u.shape == v.shape for u, v in zip(x, y))
        for (p, x), (q, y) in zip(a.seen, b.seen))


@pytest.mark.parametrize("what", [w for w in T.RANDOM if not w.startswith("MAC")] + ["MAC int8 tiny", "MAC int16 default"])
def test_prepared_units_equal_their_execute(what):
    """Every compute command of the random programs, from the memories it found: the unit's
    prepared data path (decoded.prepare) stores the same bytes as its execute_* and shows a probe
    the same values in the same order."""
    import copy as _copy

    from firmware_model.golden.eltwise_unit import execute_eltwise
    from firmware_model.golden.mac_unit import execute_mac
    from firmware_model.golden.pool_unit import execute_pool
    from firmware_model.golden.timing_model import UNIT_PLANS

    cfg, program = T.random_program(what)
    model = GoldenModel(program, cfg)
    model.fast = False
    execute = {Opcode.MAC: execute_mac, Opcode.ELTWISE: execute_eltwise, Opcode.POOL: execute_pool}
    checked = 0
    for pc in model.run_steps():
        nxt = program.commands[pc + 1] if pc + 1 < len(program.commands) else None
        if nxt is None or nxt.opcode not in execute:
            continue
        op, sub = nxt.opcode, nxt.sub
        fn, reads = UNIT_PLANS[op]
        regs = {r: model.regs.get(r, 0) for r in reads}
        plan = fn(cfg, regs, sub)
        kernel = decoded.prepare(cfg, op, regs, sub, plan)
        if kernel is None:
            continue
        mine, theirs = _copy.deepcopy(model.mem), _copy.deepcopy(model.mem)
        pa, pb = Recorder(), Recorder()
        kernel(mine, pa)
        execute[op](cfg, theirs, dict(model.regs), sub, pb, plan)
        for s in Sram:
            assert np.array_equal(mine.sram[s], theirs.sram[s]), f"command {pc + 1}: {s.name} differs"
        assert same_probes(pa, pb), f"command {pc + 1}: the probe saw other values"
        checked += 1
    assert checked or what.startswith("MAC")


# --- segments: MAC tiles many at a time (batched.py) -------------------------------------------------
@pytest.fixture
def segments(monkeypatch):
    """Segments made at a decode's first run and of any size; the list of what each segment's
    run returned (True: computed and written; False: given back to the steps)."""
    monkeypatch.setattr(batched, "BATCH_AFTER", 0)
    monkeypatch.setattr(batched, "MIN_TILES", 1)
    monkeypatch.setattr(batched, "MAX_BYTES_PER_TILE", 1 << 60)
    monkeypatch.setattr(batched, "MIN_TILES_PER_GROUP", 0)
    monkeypatch.setattr(batched, "ELT_MIN_COUNT", 0)
    ran = []
    run = batched.Segment.run

    def counted(self, mem, monitor, probes):
        ran.append(run(self, mem, monitor, probes))
        return ran[-1]
    monkeypatch.setattr(batched.Segment, "run", counted)
    return ran


@pytest.mark.parametrize("name,config", NETWORK_CONFIGS)
def test_networks_in_segments(name, config, segments):
    """Every network on every configuration with its MAC tiles run in segments: what run_steps
    leaves, and segments did run."""
    feeds = ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs()
    assert check_same(compiled(name, config), load_config(config), feeds) == [None] * len(feeds)
    assert segments and all(segments)


def test_blazeface_tiny_in_segments(monkeypatch):
    """blazeface on tiny (28,000 MAC tiles, left out of the stepwise comparisons for time): its
    segments leave what its decoded steps one by one leave (those equal run_steps on the other
    networks), after two invocations."""
    program, cfg = compiled("blazeface", "tiny"), load_config("tiny")
    feeds = ModelData.of(MODELS_DIR / "blazeface" / "model.tosa").all_inputs()[:1] * 2
    monkeypatch.setattr(batched, "BATCH_AFTER", 0)
    a = GoldenModel(program, cfg)
    got = [ended(lambda: a.invoke(f)) for f in feeds]
    made = [s for steps in a._plans.decode({}).golden.values() for s in steps.batched or () if s[0] == decoded.S_BATCH]
    assert len(made) > 10
    monkeypatch.setattr(batched, "BATCH_AFTER", 10 ** 9)           # the same decodes, one by one
    b = GoldenModel(program, cfg)
    want = [ended(lambda: b.invoke(f)) for f in feeds]
    assert all(same_results(g, w) for g, w in zip(got, want))
    assert state(a) == state(b)


@pytest.mark.parametrize("what", T.RANDOM)
def test_random_programs_in_segments(what, segments):
    cfg, program = T.random_program(what)
    assert check_same(program, cfg, [{}, {}]) == [None, None]
    assert all(segments) and (segments or not what.startswith("MAC"))


@pytest.mark.parametrize("what", list(T.FAULTS_OF))
def test_faults_in_segments(what, segments):
    cfg, program, feeds = T.faulty_program(what)
    ends = check_same(program, cfg, [feeds[0]] * 3)
    assert ends[0] is not None and ends == [ends[0]] * 3


@pytest.mark.parametrize("config", ("tiny", "default"))
@pytest.mark.parametrize("name", [n for n in NETWORKS if n != "blazeface"])
def test_extreme_inputs_in_segments(name, config, segments):
    """Refused or not, both paths end alike with segments: a segment whose tiles fail a REQUIRE
    check gives its steps back."""
    program, cfg = compiled(name, config), load_config(config)
    for seed in (1, 2):
        feeds = extreme_inputs(name, seed)
        check_same(program, cfg, feeds)
        check_same(program, cfg, feeds, requires=False)


@pytest.mark.parametrize("config", ("tiny", "default"))
def test_monitor_refusals_in_segments(tmp_path, config, segments):
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa

    cfg = load_config(config)
    for model, good, bad in monitor_graphs(tmp_path):
        program = compile_graph(read_tosa(model), cfg, out=io.StringIO()).program
        ends = check_same(program, cfg, [good, bad, good, bad])
        assert ends[0] is None and ends[1] is not None and ends[1][0] is TosaUnpredictable, (model, ends)


@pytest.mark.parametrize("config", ("tiny", "default"))
def test_mac_refusal_gives_the_segment_back(tmp_path, config, segments):
    """A convolution whose output stage's REQUIRE fails on some inputs
    (test_require_monitor.test_conv_output_stage_rescale's graph): the segment holding the failing
    tile writes nothing and gives its steps back; good and refused invocations end as run_steps'."""
    from compiler.pipeline import compile_graph
    from compiler.tosa_io import read_tosa

    g, model, good, bad = M.conv_rescale_require_case(tmp_path)
    feed = M.feed
    cfg = load_config(config)
    program = compile_graph(read_tosa(model), cfg, out=io.StringIO()).program
    ends = check_same(program, cfg, [feed(g, good), feed(g, bad), feed(g, good), feed(g, bad)])
    assert ends[0] is None and ends[1] is not None and ends[1][0] is TosaUnpredictable
    assert True in segments and False in segments


@pytest.mark.parametrize("what", ["MAC int8 tiny", "MAC int16 default", "MAC int8 large", "ELTWISE corners=False",
                                  "ELTWISE corners=True"])
def test_grouped_tiles_with_other_data(what, segments):
    """Each random tile twice, the second time with the same registers and other bytes in every
    SRAM it loads (inputs, weights, records, tables): the two make one group of a segment, which
    must compute each tile from its own data."""
    from dataclasses import replace

    from firmware_model.golden.timing_model import program_plans
    from sim.vectors.random_programs import tile_program

    cfg, program = T.random_program(what)
    rng = np.random.default_rng(5)
    unit, kind, config = (what.split() + [""])[:3]
    if unit == "MAC":
        from sim.vectors.random_programs import mac_tiles
        from firmware_model.arch.isa import DType
        tiles = mac_tiles(cfg, np.random.default_rng(31), 10 if kind == "int8" else 4,
                          DType.INT8 if kind == "int8" else DType.INT16)
    else:
        from sim.vectors.random_programs import eltwise_tiles
        cfg, tiles = eltwise_tiles(np.random.default_rng(33), 12, corners=kind == "corners=True")
        tiles = tiles[:40]
    doubled = []
    for t in tiles:
        other = {s: (rng.integers(0, 256, len(np.asarray(img)), dtype=np.uint8), r) if s != Sram.OUTPUT else (img, r)
                 for s, (img, r) in t.loads.items()}
        doubled += [t, replace(t, loads=other)]
    program = tile_program(cfg, doubled)
    assert check_same(program, cfg, [{}, {}], requires=False) == [None, None]
    assert segments and all(segments)
    dec = program_plans(program, cfg).decode({})
    grouped = [g.G for steps in dec.golden.values() if steps.batched for s in steps.batched
               if s[0] == decoded.S_BATCH for g in s[3].groups]
    assert grouped and max(grouped) >= 2


def test_segment_patterns():
    """A DMA pattern's bytes in transfer order; a written pattern must not repeat a byte (its
    write order would matter: such a decode runs one by one), a read one may (overlapping
    windows of a convolution's input)."""
    pos = batched._box_positions(10, 3, 2, 2, 4, 9)
    assert pos.tolist() == [10, 11, 12, 14, 15, 16, 19, 20, 21, 23, 24, 25]
    assert batched._box_positions(10, 3, 2, 2, 4, 9, written=True) is pos
    overlapping = (0, 6, 4, 2, 3, 20)                # runs of 6 bytes every 3 bytes
    assert len(batched._box_positions(*overlapping)) == 48
    with pytest.raises(batched.NotBatchable):
        batched._box_positions(*overlapping, written=True)
    with pytest.raises(batched.NotBatchable):
        batched._box_positions(0, 4, 2, 2, 4, 4, written=True)      # planes over each other


@pytest.mark.parametrize("config", ("default", "large"))
def test_shared_input_groups(config, segments):
    """A group whose tiles share one input box, tile t with weight block t (mlp's fully connected
    layers: _Group.shared_x, one product without reordering) computes what the general form
    (the parts' gathers and scatters) computes, on the bytes of an invocation and on random ones;
    and mlp's invocations with such groups leave what run_steps leaves."""
    program, cfg = compiled("mlp", config), load_config(config)
    feeds = ModelData.of(MODELS_DIR / "mlp" / "model.tosa").all_inputs()
    assert check_same(program, cfg, feeds) == [None] * len(feeds)
    model = GoldenModel(program, cfg)
    model.invoke(feeds[0])
    model.invoke(feeds[0])
    segs = [s[3] for steps in model._plans.decode({}).golden.values() for s in steps.batched or ()
            if s[0] == decoded.S_BATCH]
    groups = [(seg, g) for seg in segs for g in seg.groups if getattr(g, "shared_x", False)]
    assert groups
    rng = np.random.default_rng(3)
    for seg, g in groups:
        for trial in range(3):
            V = np.empty(seg.size, dtype=np.uint8)
            for src, copy in seg._moves[0]:
                if src == "const":
                    V[copy[0]:copy[1]] = copy[2]
                else:
                    batched._move(V, model.mem.ext if src == "ext" else model.mem.sram[src], copy)
            if trial:
                V[:g.out0] = rng.integers(0, 256, g.out0, dtype=np.uint8)
            got, want = V.copy(), V.copy()
            g.run(got, None)
            g.shared_x = False
            try:
                g.run(want, None)
            finally:
                g.shared_x = True
            assert np.array_equal(got, want)
