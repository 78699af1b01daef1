"""DMA slack (docs/isa.md): a compute command's value32 lets its latest transfers run on while it
computes. The compiler software-pipelines double-buffered tiles with it; the models time it
(Timeline.unit) and refuse a slack that leaves a transfer running over the command's bytes
(DmaWindow, DMA_HAZARD), the golden model stepwise and decoded and the timing model alike."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest

from compiler.pipeline import compile_file
from firmware_model.arch.config import load_config
from firmware_model.arch.cycle_model import Timeline
from firmware_model.arch.isa import Opcode, Status
from firmware_model.errors import GoldenModelError
from firmware_model.golden.model import GoldenModel
from firmware_model.golden.timing_model import TimingModel
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR

COMPUTE = (Opcode.MAC, Opcode.ELTWISE, Opcode.POOL)


def _program(name: str = "cnn32", config: str = "tiny"):
    cfg = load_config(config)
    return compile_file(MODELS_DIR / name / "model.tosa", cfg, out=io.StringIO()).program, cfg


def _with_slack(program, fn):
    """The program with each compute command's value32 replaced by fn(index, command)."""
    cmds = [dataclasses.replace(c, value=fn(i, c)) if c.opcode in COMPUTE else c
            for i, c in enumerate(program.commands)]
    return dataclasses.replace(program, commands=cmds)


def _inputs(name: str):
    return ModelData.of(MODELS_DIR / name / "model.tosa").all_inputs()[0]


def test_timeline_slack_waits_for_the_older_transfers_only():
    tl = Timeline()
    tl.dma(100)                 # popped at 2, beats from 3, done at 102
    tl.dma(50)                  # popped at 101 (the first one's DRAIN), beats from 102, done at 151
    start, _ = tl.unit(10, slack=1)
    assert start == 102         # the first transfer has finished; the second may run on
    tl2 = Timeline()
    tl2.dma(100)
    tl2.dma(50)
    assert tl2.unit(10)[0] == 151 and tl2.stall == 151 - 3      # decoded at 3: the DMA commands chain


def test_timeline_overlaps_the_latency_of_queued_transfers():
    """With latency 32, every queued transfer's latency runs from the clock after its push: the
    second and third follow the one before at its drain, their latencies hidden. A FILL has none;
    a transfer pushed while the engine works on a short one pays the rest of its own latency; an
    empty transfer waits for IDLE."""
    tl = Timeline(latency=32)
    assert tl.dma(32 + 10 + 2) == (2, 46)     # alone: pop 2, LATENCY 3..34, beats 35..44, DRAIN 45
    assert tl.dma(32 + 5 + 2) == (45, 52)     # latency 4..36 hidden: popped in DRAIN 45, beats 46..50
    assert tl.dma(32 + 5 + 2) == (51, 58)     # latency 6..38 hidden too: beats 52..56, DRAIN 57
    tl.unit(1)                                # everything drained: start 58
    fill = tl.dma(7 + 2, fill=True)
    assert fill[1] - fill[0] == 9             # a FILL popped from IDLE: no latency
    tl2 = Timeline(latency=32)
    tl2.dma(3 + 2, fill=True)                 # pop 2, beats 3..5, DRAIN 6, idle at 7
    assert tl2.dma(32 + 1 + 2) == (6, 38)     # pushed at 2 (chained); popped in DRAIN 6; latency 3..35
    assert tl2.dma(1) == (38, 39)             # an empty transfer waits for IDLE


def test_the_compiler_pipelines_tiles_and_the_models_agree():
    """On tiny, cnn32's MAC tiles carry slack; outputs equal the program without it, in fewer
    cycles; golden's counters equal the timing model's."""
    program, cfg = _program()
    slacks = [c.value for c in program.commands if c.opcode == Opcode.MAC]
    assert any(slacks)
    serial = _with_slack(program, lambda i, c: 0)
    _assert_same_outputs_in_fewer_cycles(program, serial, cfg, "cnn32")


def _assert_same_outputs_in_fewer_cycles(program, serial, cfg, name: str) -> None:
    """`program` computes `serial`'s outputs bit for bit on the golden model, in fewer cycles,
    and the timing model counts its cycles as golden does."""
    inputs = _inputs(name)
    a, b = GoldenModel(program, cfg), GoldenModel(serial, cfg)
    out_a, out_b = a.invoke(inputs), b.invoke(inputs)
    assert all(np.array_equal(out_a[k], out_b[k]) for k in out_a)
    assert a.counters.cycles < b.counters.cycles
    tm = TimingModel(program, cfg)
    tm.invoke()
    assert tm.counters.cycles == a.counters.cycles


def _hazard_program():
    """cnn32 on tiny with one MAC's slack raised to cover its own input load."""
    program, cfg = _program()
    pc = next(i for i, c in enumerate(program.commands) if c.opcode == Opcode.MAC)
    return _with_slack(program, lambda i, c: 5 if i == pc else c.value), cfg, pc


@pytest.mark.parametrize("engine", ["golden", "golden-stepwise", "timing"])
def test_a_slack_over_the_commands_own_loads_is_refused(engine):
    program, cfg, pc = _hazard_program()
    if engine == "timing":
        model = TimingModel(program, cfg)
        run = model.invoke
    else:
        model = GoldenModel(program, cfg)
        model.fast = engine == "golden"
        inputs = _inputs("cnn32")

        def run():
            model.invoke(inputs)
    with pytest.raises(GoldenModelError) as e:
        run()
    assert e.value.status == Status.DMA_HAZARD
    msg = str(e.value)
    assert f"command {pc} " in msg and "DMA slack 5" in msg and "input" in msg


@pytest.mark.parametrize("name", ["gru", "mlp"])
def test_the_next_operations_loads_overlap_the_last_compute_command(name, monkeypatch):
    """Cross-operation prefetch (compiler/npu/prefetch.py): on large, some operations' first loads
    are issued before the last compute command of the operation before, covered by its slack.
    The program without them (every link refused) computes the same outputs in more cycles, and
    the prefetch never leaves the golden model a DMA_HAZARD to refuse."""
    import compiler.npu.prefetch as prefetch

    taken = []
    original = prefetch.PrefetchLink.__call__

    def counting(self, op, sub, result=None):
        n = original(self, op, sub, result)
        taken.append(n)
        return n
    monkeypatch.setattr(prefetch.PrefetchLink, "__call__", counting)
    program, cfg = _program(name, "large")
    assert sum(1 for n in taken if n) >= 5, taken
    monkeypatch.setattr(prefetch.PrefetchLink, "__call__", lambda self, op, sub, result=None: 0)
    serial, _ = _program(name, "large")
    def transfers(p):
        return sum(1 for c in p.commands if c.opcode in (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL))
    # the same transfers, some moved earlier; fewer where an ELTWISE's operand is read on chip
    # from a buffer the prefetch kept apart from its results
    assert transfers(program) <= transfers(serial)
    _assert_same_outputs_in_fewer_cycles(program, serial, cfg, name)


@pytest.mark.parametrize("name", ["gru"])
def test_a_prefetch_passes_over_a_data_movement(name, monkeypatch):
    """A link passes over a data movement (compiler/passes/emitter.py, PASSED_OVER): gru's gates
    are SLICEs (data movements) of the fully connected layers' results, and the operation after
    them gets its first loads issued under the last compute command before them. Without that, the same
    outputs in more cycles; with it, no DMA_HAZARD for the golden model to refuse."""
    from compiler.passes import emitter

    program, cfg = _program(name, "large")
    monkeypatch.setattr(emitter, "PASSED_OVER", ("alias",))
    stopped, _ = _program(name, "large")
    _assert_same_outputs_in_fewer_cycles(program, stopped, cfg, name)
