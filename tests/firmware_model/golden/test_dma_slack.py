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
from firmware_model.arch.isa import DMA_AHEAD, EltMode, Opcode, Reg, Sram, Status
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
    msg = _refusal(engine, program, cfg, "cnn32")
    assert f"command {pc} " in msg and "DMA slack 5" in msg and "input" in msg


def _refusal(engine: str, program, cfg, name: str) -> str:
    """The DMA_HAZARD message `engine` (golden, golden-stepwise, timing) refuses `program` with."""
    if engine == "timing":
        run = TimingModel(program, cfg).invoke
    else:
        model = GoldenModel(program, cfg)
        model.fast = engine == "golden"
        inputs = _inputs(name)

        def run():
            model.invoke(inputs)
    with pytest.raises(GoldenModelError) as e:
        run()
    assert e.value.status == Status.DMA_HAZARD
    return str(e.value)


def on_chip(p) -> list:
    """Each ELTWISE command's operands read from the output SRAM (A_FROM_OUTPUT, B_FROM_OUTPUT)."""
    return [regs.get(int(Reg.ELT_MODE), 0) & (EltMode.A_FROM_OUTPUT | EltMode.B_FROM_OUTPUT)
            for _, regs in p.registers_at(Opcode.ELTWISE)]


@pytest.mark.parametrize("name", ["gru", "mlp"])
def test_the_next_operations_loads_overlap_the_last_compute_command(name, monkeypatch):
    """Cross-operation prefetch (compiler/npu/prefetch.py): on large, some operations' first loads
    (here constants and operands: a convolution's input box stays out of the links, which
    test_a_convolutions_first_input_box_comes_early takes) are issued before the last compute
    command of the operation before, covered by its slack. The program without them (every link
    refused) computes the same outputs in more cycles, and the prefetch never leaves the golden
    model a DMA_HAZARD to refuse."""
    from compiler.npu.conv import NpuConv
    import compiler.npu.prefetch as prefetch

    monkeypatch.setattr(NpuConv, "prefetches_input", False)

    taken = []
    original = prefetch.PrefetchLink.__call__

    def counting(self, op, sub, result=None, pending=None):
        n = original(self, op, sub, result, pending)
        taken.append(n)
        return n
    monkeypatch.setattr(prefetch.PrefetchLink, "__call__", counting)
    program, cfg = _program(name, "large")
    assert sum(1 for n in taken if n) >= 5, taken
    monkeypatch.setattr(prefetch.PrefetchLink, "__call__", lambda self, op, sub, result=None, pending=None: 0)
    serial, _ = _program(name, "large")
    def count(p, opcode, sram=None):
        return sum(1 for c in p.commands if c.opcode == opcode and (sram is None or c.sub == sram))
    # the same transfers, some moved earlier: the same stores, the same ELTWISE operands read on
    # chip, the same loads into every SRAM but the weight SRAM, where a link's choice of buffer
    # may keep a constant (a B operand, a block of weights) resident or not (CommandWriter)
    links = sum(1 for n in taken if n)
    assert count(program, Opcode.DMA_STORE) == count(serial, Opcode.DMA_STORE)
    assert on_chip(program) == on_chip(serial)
    for sram in Sram:
        if sram != Sram.WEIGHT:
            assert count(program, Opcode.DMA_LOAD, sram) == count(serial, Opcode.DMA_LOAD, sram), sram
    assert abs(count(program, Opcode.DMA_LOAD, Sram.WEIGHT) - count(serial, Opcode.DMA_LOAD, Sram.WEIGHT)) <= links
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


def _input_box_links(monkeypatch) -> list:
    """From now on, every link that takes a convolution's first input box, as (the convolution's
    result, its Prefetched: weight buffer `slot`, state (first channel, box key, input buffer))."""
    from compiler.npu.conv import NpuConv
    import compiler.npu.prefetch as prefetch

    links = []
    original = prefetch.PrefetchLink.__call__

    def recording(self, op, sub, result=None, pending=None):
        n = original(self, op, sub, result, pending)
        if n and isinstance(self.nxt, NpuConv) and self.taken.state[1] is not None:
            links.append((self.nxt.ofm, self.taken))
        return n
    monkeypatch.setattr(prefetch.PrefetchLink, "__call__", recording)
    return links


@pytest.mark.parametrize("name,config", [("gru", "default"), ("gru", "large"), ("lstm", "large")])
def test_a_convolutions_first_input_box_comes_early(name, config, monkeypatch):
    """A link issues the next convolution's first input box with its weights when the bytes it
    reads are stored already: the operation before has pushed its other tiles' stores (the engine
    keeps program order), and neither its last store nor a data movement between (gru's gate
    SLICEs, which run after the link) writes them. Without the input box in the link, the same
    outputs in more cycles; with it, no DMA_HAZARD for the golden model to refuse. A first tile
    whose input came early pushes nothing after the store before it, so it writes an output
    buffer apart from that store's bytes (conv.py), and the result there stays for the ELTWISEs
    after: every operand read on chip without the boxes is read on chip with them, gru's gates
    on large read more of them."""
    from compiler.npu.conv import NpuConv

    boxes = _input_box_links(monkeypatch)
    program, cfg = _program(name, config)
    assert boxes, "no link took a convolution's input box"
    monkeypatch.setattr(NpuConv, "prefetches_input", False)
    serial, _ = _program(name, config)
    _assert_same_outputs_in_fewer_cycles(program, serial, cfg, name)
    with_boxes, without = on_chip(program), on_chip(serial)
    assert len(with_boxes) == len(without) and all(a & b == b for a, b in zip(with_boxes, without))
    if (name, config) == ("gru", "large"):
        assert with_boxes != without


def test_timeline_decodes_sets_while_a_unit_runs():
    """Lookahead: SET, NOP and MARK decode one a clock from the clock after a compute command's
    start, skipping its done clock; any other command waits for the clock after the done."""
    tl = Timeline()
    assert tl.unit(10) == (1, 11)             # decoded and started at 1, done at 11
    assert [tl.simple() for _ in range(11)] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13]
    tl2 = Timeline()
    tl2.unit(10)
    tl2.simple_run(11)                        # the same run at once
    assert tl2.fetch == tl.fetch == 13
    tl3 = Timeline()
    tl3.unit(10)
    tl3.simple()                              # at 2
    assert tl3.dma(5)[0] == 13                # pushed at 12, the clock after the done; popped at 13
    assert tl3.unit(4, slack=1) == (13, 17)   # a compute command after it: decoded at 13
    assert tl3.reached == 18 and tl3.end() == 18 + 1


def test_timeline_pushes_an_ahead_transfer_under_the_unit():
    """A DMA_AHEAD transfer decodes during the run (its decode clock is the unit's: `hidden`); one
    without the flag waits for the clock after the done."""
    tl = Timeline()
    tl.unit(10)                               # start 1, done 11
    assert tl.dma(5, ahead=True) == (3, 8)    # pushed at 2, popped at 3, idle at 8
    assert tl.hidden == 1 and tl.stall == 0
    assert tl.dma(5) == (13, 18)              # pushed at 12, the clock after the done
    assert tl.hidden == 1


def _ahead_over_own_result(name: str = "mlp", config: str = "large"):
    """A compiled program with one compute command's own store (the DMA_STORE that reads what it
    wrote, right after it) flagged DMA_AHEAD: a transfer that breaks the rule. (mlp on `large`,
    whose lookahead policy, `stores`, leaves such stores at its operations' ends; on `default`
    `touching` moves every one of them.)"""
    program, cfg = _program(name, config)
    cmds = list(program.commands)
    for i, c in enumerate(cmds):
        if c.opcode in COMPUTE:
            nxt = next(j for j in range(i + 1, len(cmds)) if cmds[j].opcode != Opcode.SET)
            if cmds[nxt].opcode == Opcode.DMA_STORE and not cmds[nxt].imm & DMA_AHEAD:
                cmds[nxt] = dataclasses.replace(cmds[nxt], imm=DMA_AHEAD)
                return dataclasses.replace(program, commands=cmds), cfg, nxt
    raise AssertionError("no compute command followed by its store")


@pytest.mark.parametrize("engine", ["golden", "golden-stepwise", "timing"])
def test_an_ahead_transfer_over_the_running_commands_bytes_is_refused(engine):
    program, cfg, pc = _ahead_over_own_result()
    msg = _refusal(engine, program, cfg, "mlp")
    assert f"command {pc} " in msg and "AHEAD" in msg and "output" in msg


def test_an_ahead_transfer_after_a_waiting_command_is_not_checked_against_the_unit():
    """Once a command that waits for the unit's done has come (here a DMA without the flag), the
    unit is no longer running: a later AHEAD transfer over its bytes is legal."""
    program, cfg = _program("mlp", "default")
    cmds = list(program.commands)
    i = next(i for i, c in enumerate(cmds) if c.opcode in COMPUTE
             and next(x for x in cmds[i + 1:] if x.opcode != Opcode.SET).opcode == Opcode.DMA_STORE)
    store = next(j for j in range(i + 1, len(cmds)) if cmds[j].opcode == Opcode.DMA_STORE)
    # the same store again, flagged, right after the unflagged one
    cmds.insert(store + 1, dataclasses.replace(cmds[store], imm=DMA_AHEAD))
    program = dataclasses.replace(program, commands=cmds)
    program.manifest = {**program.manifest, "layers": []}        # tile ranges moved: not checked here
    model = GoldenModel(program, cfg)
    model.invoke(_inputs("mlp"))


@pytest.mark.parametrize("name,config", [("gru", "tiny"), ("lstm", "default")])
def test_an_input_box_comes_early_in_another_buffer_than_its_weights(name, config, monkeypatch):
    """Where the running command reads the input buffer the next convolution's weights would share
    a number with, the link brings the box into the other input buffer, the weights where they go
    alone (prefetch.CROSS_BUFFERS): the first tile then reads its input from that buffer. The same
    outputs in fewer cycles than with the box and its weights in buffers of one number only."""
    import compiler.npu.prefetch as prefetch

    links = _input_box_links(monkeypatch)
    program, cfg = _program(name, config)
    assert any(taken.state[2] != taken.slot for _, taken in links), \
        "no link took an input box into another buffer than its weights"
    monkeypatch.setattr(prefetch, "CROSS_BUFFERS", False)
    links.clear()
    same, _ = _program(name, config)
    assert all(taken.state[2] == taken.slot for _, taken in links)
    _assert_same_outputs_in_fewer_cycles(program, same, cfg, name)
