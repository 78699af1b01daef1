"""The timing-only model: the golden model's counters for a program, without computing any data.

`TimingModel(program, cfg)` offers what the golden model (model.py) offers to someone who only
wants timing: `counters` (the same `Counters`: cycles, unit busy clocks, opcodes, MAC lane slots,
bytes per memory, tiles, VAR kinds, cycles per invocation), `timeline` (the running or last
invocation's `arch.cycle_model.Timeline`), `run_steps()` (one invocation, yielding each command's
index after it ran, the counters and the timeline up to date at every yield), `run()` and
`invoke(inputs=None)` (one invocation; the inputs are data, so they are ignored). Its counters
equal the golden model's exactly, per invocation and summed (tests/firmware_model/golden/
test_timing_model.py checks them, and the timeline after every command, on every network in
models/ and on random programs with faults).

It cannot count differently from the golden model because it runs the same code minus the data:
each unit's plan (mac_plan, eltwise_plan, pool_plan, dma_plan / fill_plan, var_plan and
var_flags, host_cycles: the command rules of arch/checks.py, byte ranges, cycles of
arch/cycle_model.py, lane slots, bytes), which the golden units call before touching data, and
command_plan.py's refusals and `count_*` functions, which the golden command processor calls.
Nothing here reads or writes a tensor, an SRAM or external memory.

What timing depends on persists across invocations as on the golden model: the register file
(registers keep their values from one invocation to the next) and the variable slots' written
flags (`variable_slots`: whether VAR INIT loads, whether VAR READ or CHECK faults with
VAR_READ_BEFORE_WRITE, the same GoldenModelError the golden model raises). `invoke` is a
transaction for the flags, as the golden model's is for the variables: a faulting invocation
leaves them as they were.

Not modelled, because they depend on data: the REQUIRE monitor (require_monitor.py) — the timing
model checks no data REQUIRE, so an input the golden model refuses with TosaUnpredictable runs to
END here — and the host ops' kernels (a host op's time depends only on its output shapes in the
manifest, host_cpu.host_cycles; a kernel's own ERROR_IF or REQUIRE failure is not seen).

Speed: a program is decoded once per start state (the registers at the invocation's start): each
command's plan is computed once and kept, with the program's plans shared by every TimingModel
of the same program and configuration in the process (checked against the program's commands
and manifest at every invocation, so a program changed in place is decoded again). An
invocation is then a function of that decode and the slots' flags; its outcome (the counters it
adds, the final timeline, flags and registers, a fault) is kept per flag state, so a repeated
invocation only adds it. `python -m sim.benchmarks.timing_model` measures it against the golden
model.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass

import numpy as np

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import Timeline
from firmware_model.arch.isa import ELT_REGS, MAC_REGS, POOL_REGS, VAR_SLOTS, Opcode
from firmware_model.arch.program import Program
from firmware_model.arch.registers import RegisterFile
from firmware_model.errors import GoldenModelError
from firmware_model.golden.command_plan import (DmaWindow, check_set, command_fault, count_command, count_compute, count_dma,
                                                count_end, count_fill, count_hidden, count_host, count_stall, count_var, dma_sram,
                                                no_host, not_implemented, overrun, time_var)
from firmware_model.golden.dma import dma_plan, fill_plan
from firmware_model.golden.eltwise_unit import eltwise_plan
from firmware_model.golden.host_cpu import host_cycles
from firmware_model.golden.mac_unit import mac_plan
from firmware_model.golden.model import Counters
from firmware_model.golden.pool_unit import pool_plan
from firmware_model.golden.var_unit import program_layout, var_flags, var_plan

# What the decode keeps of a command, ev[0] of its event tuple (ev[1] its index, ev[2] its opcode):
RUN, BARRIER, END, DMA, FILL, UNIT, VAR, HOST, FAULT, OVERRUN = range(10)
#   RUN       [RUN, first index, n, {opcode: count}]: n SET, NOP or MARK in a row (2 clocks each)
#   BARRIER, END                    (kind, pc, op)
#   DMA, FILL                       (kind, pc, op, sram, busy clocks, bytes)
#   UNIT                            (kind, pc, op, the unit's plan, its DMA slack)
#   VAR                             (kind, pc, op, var_plan; var_flags decides when it runs)
#   HOST                            (kind, pc, op, host cycles, None or the exception its op raises)
#   FAULT                           (kind, pc, op, the exception the command raises)
#   OVERRUN                         (kind, pc, None, the exception)
_SIMPLE = frozenset((Opcode.SET, Opcode.NOP, Opcode.MARK))
_SET, _DMA_LOAD, _DMA_STORE, _FILL = Opcode.SET, Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL
# Each compute unit's plan, and the registers it reads (arch/isa.py: the ones the bench re-sends
# to an RTL tile): commands whose registers are all equal get the same plan, made once.
# tests/firmware_model/golden/test_timing_model.py checks that a plan reads no other register.
UNIT_PLANS = {Opcode.MAC: (mac_plan, tuple(int(r) for r in MAC_REGS)),
              Opcode.ELTWISE: (eltwise_plan, tuple(int(r) for r in ELT_REGS)),
              Opcode.POOL: (pool_plan, tuple(int(r) for r in POOL_REGS))}


def _fresh(exc: BaseException) -> BaseException:
    """A copy of an exception to keep or raise again: its type, message and status, without the
    traceback and context (which would keep the frames, the model and its program alive)."""
    try:
        new = copy.copy(exc)
    except Exception:                       # a type that cannot be rebuilt from its args
        new = exc
    new.__traceback__ = new.__context__ = new.__cause__ = None
    return new


@dataclass
class _Outcome:
    """One invocation from one start state: what it adds and leaves."""
    counters: Counters
    timeline: Timeline
    slots: np.ndarray
    regs: dict
    error: BaseException | None


class _Decoded:
    """The program decoded from one register file at the invocation's start: its events up to END
    (or the command that faults, or the overrun), the registers there, and the outcomes per flag
    state."""

    def __init__(self, events: list, start: dict, end: dict):
        self.events = events
        self.start = start
        self.end = end
        self.outcomes: dict[bytes, _Outcome] = {}
        self.golden: dict = {}          # the golden model's data steps (decoded.golden_steps)


def _decode(plans: "_ProgramPlans", start: dict, base: _Decoded | None = None) -> _Decoded:
    """Decode the program from the register file `start`. With `base` (a decode from another
    start), its events are taken over from the first one whose command finds the same registers
    in both: once every register the two starts disagree on has been SET by the program."""
    cfg, cmds, names, host_ops, memo = plans.cfg, plans.commands, plans.names, plans.host_ops, plans.unit_memo
    regs = RegisterFile(start)
    raw = regs.raw
    events: list = []
    append = events.append
    run = None
    window = DmaWindow()
    resume, tail = plans.shared_tail(start, base)
    for pc, cmd in enumerate(cmds):
        if pc == resume:
            if not window.recent and window.running is None:
                events.extend(tail)
                return _Decoded(events, start, base.end)
            # transfers pushed before the registers agreed may still be in the slack window: the
            # two decodes agree from the tail's next point where every transfer has finished
            resume, tail = _after_settle(tail)
        op = cmd.opcode
        ev = None
        try:
            if op in _SIMPLE:
                if op == _SET:
                    check_set(cmd)
                    regs.set(cmd.sub, cmd.value)
                if run is None:
                    run = [RUN, pc, 0, {}]
                    append(run)
                run[2] += 1
                run[3][op] = run[3].get(op, 0) + 1
                continue
            run = None
            if op == _DMA_LOAD or op == _DMA_STORE:
                sram = dma_sram(cmd)
                p = dma_plan(cfg, regs, sram, op == _DMA_LOAD)
                ahead = cmd.ahead
                window.push(sram, op == _DMA_LOAD, p.sram_range, ahead)
                ev = (DMA, pc, op, sram, p.cycles, p.bytes, ahead)
            elif op == _FILL:
                sram = dma_sram(cmd)
                p = fill_plan(cfg, regs, sram)
                ahead = cmd.ahead
                window.push(sram, True, p.sram_range, ahead)
                ev = (FILL, pc, op, sram, p.cycles, p.bytes, ahead)
            elif op in UNIT_PLANS:
                fn, reads = UNIT_PLANS[op]
                key = (op, cmd.sub, *[raw.get(r, 0) for r in reads])
                plan = memo.get(key)
                if plan is None:
                    plan = memo[key] = fn(cfg, regs, cmd.sub)
                window.check(op, plan, cmd.value)
                ev = (UNIT, pc, op, plan, cmd.value)
            elif op == Opcode.VAR:
                window.settle()
                ev = (VAR, pc, op, var_plan(cfg, regs, cmd.sub, names))
            elif op == Opcode.BARRIER:
                window.settle()
                ev = (BARRIER, pc, op)
            elif op == Opcode.END:
                append((END, pc, op))
                return _Decoded(events, start, dict(regs.raw))
            elif op == Opcode.HOST:
                window.settle()
                if host_ops is None:
                    raise no_host(cmd)
                try:
                    ev = (HOST, pc, op, host_cycles(host_ops, cmd.value), None)
                except Exception as e:                      # raised after the host's barrier
                    append((HOST, pc, op, 0, _fresh(e)))
                    return _Decoded(events, start, dict(regs.raw))
            else:
                raise not_implemented(op)
        except GoldenModelError as e:
            try:
                fault = command_fault(pc, cmd, e)
            except Exception as e2:                          # e.g. a disassembly that fails, as on golden
                fault = e2
            append((FAULT, pc, op, _fresh(fault)))
            return _Decoded(events, start, dict(regs.raw))
        except Exception as e:
            append((FAULT, pc, op, _fresh(e)))
            return _Decoded(events, start, dict(regs.raw))
        append(ev)
    append((OVERRUN, len(cmds), None, overrun(len(cmds))))
    return _Decoded(events, start, dict(regs.raw))


def _after_settle(tail: list) -> tuple[int, list]:
    """(index, events) of `tail` from its first command after a point where every DMA transfer has
    finished (BARRIER, VAR, HOST, a compute command with slack 0); (-1, []) when there is none."""
    settled = False
    for k, ev in enumerate(tail):
        if settled and ev[0] != RUN:
            return ev[1], tail[k:]
        if ev[0] in (BARRIER, VAR, HOST) or (ev[0] == UNIT and ev[4] == 0):
            settled = True
    return -1, []


class _ProgramPlans:
    """A program's decodes for one configuration, shared by the TimingModels of that program,
    with what they were made from (to notice a program changed in place)."""

    def __init__(self, program: Program, cfg: NpuConfig):
        self.cfg = cfg
        self.commands = list(program.commands)
        self.host_ops_src = copy.deepcopy(program.manifest.get("host_ops"))
        self.variables_src = copy.deepcopy(program.manifest.get("variables"))
        self.host_ops = self.host_ops_src or None
        self.names = {v.slot: v.name for v in program_layout(program.manifest)}
        self.decoded: dict[tuple, _Decoded] = {}
        self.unit_memo: dict[tuple, object] = {}       # (opcode, sub, the unit's registers) -> its plan
        self.dma_memo: dict[tuple, object] = {}        # (opcode, SRAM, the DMA registers) -> the golden model's DmaPlan
        self.unit_regs: dict[tuple, tuple] = {}        # the unit_memo's keys -> (the unit's registers, the
                                                       # golden model's prepared data path: decoded.prepare)
        self._first_set: dict[int, int] | None = None  # register -> index of the program's first SET of it

    def matches(self, program: Program, cfg: NpuConfig) -> bool:
        m = program.manifest
        return (cfg == self.cfg and program.commands == self.commands
                and m.get("host_ops") == self.host_ops_src and m.get("variables") == self.variables_src)

    def decode(self, regs: dict) -> _Decoded:
        """The decode from register file `regs` (made from the latest other decode when there is one)."""
        key = tuple(sorted(regs.items()))
        d = self.decoded.get(key)
        if d is None:
            base = next(reversed(self.decoded.values()), None)
            d = self.decoded[key] = _decode(self, dict(regs), base)
        return d

    def shared_tail(self, start: dict, base: _Decoded | None) -> tuple[int, list]:
        """(index, events): from command `index` on, a decode from `start` has `base`'s events,
        because every register the two starts disagree on has been SET by then; (-1, []) when
        there is no such point."""
        if base is None:
            return -1, []
        other = base.start
        differ = {r for r in start.keys() | other.keys() if (r in start) != (r in other) or start[r] != other[r]}
        if self._first_set is None:
            first: dict[int, int] = {}
            for pc, cmd in enumerate(self.commands):
                if cmd.opcode == Opcode.SET and cmd.sub not in first:
                    first[cmd.sub] = pc
            self._first_set = first
        if any(r not in self._first_set for r in differ):
            return -1, []
        same_from = max((self._first_set[r] + 1 for r in differ), default=0)
        for k, ev in enumerate(base.events):
            if ev[0] != RUN and ev[1] >= same_from:
                return ev[1], base.events[k:]
        return -1, []


_PROGRAMS: dict[int, list[_ProgramPlans]] = {}       # id(program) -> its plans per configuration


def program_plans(program: Program, cfg: NpuConfig) -> _ProgramPlans:
    """The process's plans of `program` on `cfg` (made when missing or when the program changed)."""
    key = id(program)
    entries = _PROGRAMS.get(key)
    if entries is None:
        entries = _PROGRAMS[key] = []
        weakref.finalize(program, _PROGRAMS.pop, key, None)
    for k, e in enumerate(entries):
        if e.cfg == cfg:
            if e.matches(program, cfg):
                return e
            del entries[k]
            break
    e = _ProgramPlans(program, cfg)
    entries.append(e)
    return e


def plan_memos(program: Program, cfg: NpuConfig) -> _ProgramPlans:
    """The process's plans of `program` on `cfg` for their memos only (unit_memo, dma_memo): a
    memoised plan is a function of the configuration and the registers, whatever the program, so
    an entry is taken as it is, without program_plans' check that the program is unchanged (which
    compares every command: long for a million-command program)."""
    for e in _PROGRAMS.get(id(program), ()):
        if e.cfg == cfg:
            return e
    return program_plans(program, cfg)


class TimingModel:
    """The golden model's counters and timeline for a program, without its data (module docstring)."""

    def __init__(self, program: Program, cfg: NpuConfig):
        self.program = program
        self.cfg = cfg
        self.counters = Counters()
        self.timeline: Timeline | None = None         # the running (or last) invocation's
        self.regs: dict[int, int] = {}                # the register file, as the golden model's persists
        self.variable_slots = np.zeros(VAR_SLOTS, dtype=bool)   # the slots' written flags (power-on: clear)
        self._plans = program_plans(program, cfg)

    def _decoded(self) -> _Decoded:
        if not self._plans.matches(self.program, self.cfg):
            self._plans = program_plans(self.program, self.cfg)
        return self._plans.decode(self.regs)

    # --- the host's side -------------------------------------------------------------------
    def begin_invocation(self, inputs=None) -> None:
        """Nothing to do: inputs are data, and timing does not depend on them."""

    def invoke(self, inputs=None) -> None:
        """One invocation (`inputs` ignored). A transaction for the variable slots' flags, as the
        golden model's invoke is for the variables: when the program faults they are put back."""
        saved = self.variable_slots.copy()
        try:
            self.run()
        except BaseException:
            self.variable_slots[:] = saved
            raise

    # --- the command processor ---------------------------------------------------------------
    def run(self) -> None:
        """One invocation from command 0 to END, as run_steps() but at once: the outcome of this
        decode from these flags is computed once (runs of SET, NOP and MARK taken together), then
        added."""
        dec = self._decoded()             # (may take up the program's new plans)
        out = invocation_outcome(self._plans, dec, self.variable_slots)
        self.counters.add(out.counters)
        self.timeline = copy.deepcopy(out.timeline)
        self.variable_slots[:] = out.slots
        self.regs = dict(out.regs)
        if out.error is not None:
            raise _fresh(out.error)

    def run_steps(self):
        """Run one invocation from command 0 to END, yielding the index of each command run, with
        the counters, the timeline, the registers and the flags up to date at every yield, as
        GoldenModel.run_steps does (and, like it, no rollback of the flags on a fault)."""
        dec = self._decoded()
        self.timeline = Timeline(self.cfg.ext_latency)
        yield from self._events(dec, self.counters, self.timeline, self.variable_slots, self.regs)

    def _events(self, dec: _Decoded, counters: Counters, tl: Timeline, slots, regs: dict | None, where=None):
        return run_events(self._plans.commands, dec, counters, tl, slots, regs, where)


def invocation_outcome(plans: _ProgramPlans, dec: _Decoded, slots: np.ndarray) -> _Outcome:
    """What one invocation of decode `dec` adds and leaves, from the slots' flags `slots`:
    computed once per flag state and kept in dec.outcomes (runs of SET, NOP and MARK at once)."""
    key = slots.tobytes()
    out = dec.outcomes.get(key)
    if out is not None:
        return out
    counters, tl = Counters(), Timeline(plans.cfg.ext_latency)
    slots, regs = slots.copy(), dict(dec.end)
    error = None
    where = [0]
    try:
        for _ in run_events(plans.commands, dec, counters, tl, slots, None, where):
            pass
    except Exception as e:
        error = _fresh(e)
        regs = dict(dec.start)          # the registers as the faulting command found them
        for cmd in plans.commands[:where[0]]:
            if cmd.opcode == Opcode.SET:
                regs[cmd.sub] = cmd.value
    out = dec.outcomes[key] = _Outcome(counters, tl, slots, regs, error)
    return out


def run_events(cmds: list, dec: _Decoded, counters: Counters, tl: Timeline, slots, regs: dict | None,
               where=None):
    """Run the decoded events. With `regs` (the register file to update), command by command,
    yielding each index; without, a run of SET, NOP and MARK at once, yielding nothing, and
    where[0] the index of the command running."""
    stepwise = regs is not None
    for ev in dec.events:
        kind = ev[0]
        if kind == RUN:
            _, first, n, ops = ev
            if stepwise:
                for pc in range(first, first + n):
                    cmd = cmds[pc]
                    count_command(counters, cmd.opcode)
                    if cmd.opcode == Opcode.SET:
                        regs[cmd.sub] = cmd.value
                    tl.simple()
                    count_hidden(counters, tl)
                    yield pc
            else:
                for op, k in ops.items():
                    count_command(counters, op, k)
                tl.simple_run(n)
                count_hidden(counters, tl)
            continue
        pc, op = ev[1], ev[2]
        if not stepwise:
            where[0] = pc
        if kind == OVERRUN:
            raise _fresh(ev[3])
        count_command(counters, op)
        if kind == DMA:
            _, _, _, sram, cycles, nbytes, ahead = ev
            tl.dma(cycles, ahead=ahead)
            count_hidden(counters, tl)
            count_dma(counters, op, sram, cycles, nbytes)
        elif kind == UNIT:
            plan = ev[3]
            start, done = tl.unit(plan.cycles, ev[4], plan.preload if op == Opcode.MAC else None)
            count_compute(counters, op, plan, done - start)
        elif kind == FILL:
            _, _, _, sram, cycles, nbytes, ahead = ev
            tl.dma(cycles, fill=True, ahead=ahead)
            count_hidden(counters, tl)
            count_fill(counters, sram, cycles, nbytes)
        elif kind == BARRIER:
            tl.barrier()
        elif kind == VAR:
            plan = ev[3]
            try:
                moved = var_flags(plan, slots)
            except GoldenModelError as e:
                raise command_fault(pc, cmds[pc], e) from None
            time_var(tl, plan.cycles, moved)
            count_var(counters, plan.op, plan.cycles, moved)
        elif kind == HOST:
            tl.host()
            if ev[4] is not None:
                raise _fresh(ev[4])
            count_host(counters, ev[3])
        elif kind == END:
            count_end(counters, tl.end())
            if stepwise:
                yield pc
            count_stall(counters, tl)
            return
        else:
            raise _fresh(ev[3])
        if stepwise:
            yield pc
