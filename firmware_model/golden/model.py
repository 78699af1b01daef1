"""The NPU golden model: executes a compiled program's command stream on modelled memories.

One `GoldenModel` is one NPU with its external memory, powered on once. `invoke()` is one run of
the graph: the host writes the inputs into external memory, starts the command processor, and
reads the outputs when it reports completion. The variable SRAM keeps its contents between
invocations; `save_state()`/`load_state()` carry it across processes.

The model counts what an architect needs (cycles per unit from firmware_model/arch/cycle_model.py, MACs,
bytes moved per memory, commands per unit) and exposes every MAC command as a tile event to a
hook, which the RTL bench uses to run the same tile on the RTL and substitute its result.

The counting is not done here: each unit first makes its plan from the registers (mac_plan,
eltwise_plan, pool_plan, dma_plan / fill_plan, var_plan; the command rules, byte ranges, cycles,
lane slots, bytes) and computes on what the plan found, and the command processor below adds the
plan to the counters with command_plan.py's functions. The timing-only model (timing_model.py)
runs the same plans and functions without the data, so its counters are these, much faster.

A compiled graph runs under the REQUIRE monitor (firmware_model/golden/require_monitor.py): an input
for which one of the graph's TOSA REQUIREs fails ends the invocation with the interpreter's
TosaUnpredictable, though the datapath computes exactly what it computes without the monitor.
`GoldenModel(..., requires=False)` runs the program as raw hardware (benches that feed values
outside the REQUIREs on purpose).
"""

from __future__ import annotations

import bisect
import copy
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from firmware_model.golden.dma import DMA_REGS, dma_plan, dma_transfer, fill, fill_plan
from firmware_model.errors import GoldenModelError, NpuBenchError, TosaUnpredictable
from firmware_model.arch.isa import Command, Opcode, Sram
from firmware_model.golden.command_plan import (DmaWindow, check_set, command_fault, count_command, count_compute, count_dma,
                                                count_end, count_fill, count_hidden, count_host, count_stall, count_var, dma_sram,
                                                no_host, not_implemented, overrun, time_var)
from firmware_model.golden.eltwise_unit import EltResult, execute_eltwise
from firmware_model.golden.mac_unit import MacResult, execute_mac
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import Timeline
from firmware_model.golden.pool_unit import PoolResult, execute_pool
from firmware_model.golden.require_monitor import RequireMonitor
from firmware_model.arch.program import Placement, Program
from firmware_model.golden.var_unit import execute_var, load_state, program_layout, save_state


@dataclass
class CommandEvent:
    """A compute command (one tile of the MAC, ELTWISE or POOL unit) as a bench sees it: where it
    sits in the program, when it ran, what it read and what golden wrote."""
    tile_id: int                      # value of the last MARK command
    command_index: int
    opcode: Opcode
    sub: int
    regs: dict[int, int]              # register file when the command ran
    start: int                        # clock the unit started (Timeline: clocks from the invocation's first fetch)
    end: int                          # clock it reported done
    result: "MacResult | EltResult | PoolResult"
    memories: Memories                # golden memories after the command
    output_before: np.ndarray | None  # the output SRAM just before the command (when a hook asked for it)

    @property
    def output(self) -> tuple[int, int]:
        """The output SRAM bytes [a, b) the command wrote."""
        return self.result.region.output if self.opcode == Opcode.MAC else self.result.regions["output"]


# A hook sees every compute command; it may return replacement bytes for event.output (a bench
# that runs the command elsewhere and chains its result).
CommandHook = Callable[[CommandEvent], "np.ndarray | None"]


@dataclass
class Counters:
    cycles: int = 0                                         # NPU clocks (every invocation's, summed)
    host_cycles: int = 0                                    # modelled host time, apart from NPU clocks
    unit_cycles: Counter = field(default_factory=Counter)   # busy clocks: "command", "mac", "eltwise", "pool", "var", "dma", "fill", "stall"; "mac_stream": the MAC steps' stream clocks within "mac"
    opcodes: Counter = field(default_factory=Counter)       # commands run, by Opcode
    macs: int = 0
    bytes_read: Counter = field(default_factory=Counter)    # by memory name
    bytes_written: Counter = field(default_factory=Counter)
    tiles: int = 0
    var: Counter = field(default_factory=Counter)           # VAR commands: "INIT loaded", "INIT kept", "READ", "WRITE"
    invocation_cycles: list = field(default_factory=list)  # NPU clocks of each invocation

    @property
    def commands(self) -> dict[str, int]:
        """Commands run, by opcode name."""
        return {Opcode(op).name: n for op, n in self.opcodes.items()}

    def add(self, other: "Counters") -> None:
        """Add another Counters' counts (an invocation's, counted apart) to these."""
        self.cycles += other.cycles
        self.host_cycles += other.host_cycles
        self.macs += other.macs
        self.tiles += other.tiles
        for mine, theirs in ((self.unit_cycles, other.unit_cycles), (self.opcodes, other.opcodes),
                             (self.bytes_read, other.bytes_read), (self.bytes_written, other.bytes_written),
                             (self.var, other.var)):
            get = mine.get              # Counter.update(theirs), without its Mapping test
            for key, n in theirs.items():
                mine[key] = get(key, 0) + n
        self.invocation_cycles.extend(other.invocation_cycles)

    def as_dict(self) -> dict:
        return {"cycles": self.cycles, "host_cycles": self.host_cycles, "unit_cycles": dict(self.unit_cycles),
                "commands": self.commands, "macs": self.macs, "bytes_read": dict(self.bytes_read),
                "bytes_written": dict(self.bytes_written), "tiles": self.tiles, "var": dict(self.var),
                "invocation_cycles": list(self.invocation_cycles)}


class GoldenModel:
    fast = True         # run() executes the program decoded once (decoded.py); False: run_steps, command by command

    def __init__(self, program: Program, cfg: NpuConfig, host=None, *, requires: bool = True):
        """`requires`: run under the REQUIRE monitor (a compiled graph's REQUIREs; a program whose
        manifest lists none runs as it would without it)."""
        self.program = program
        self.cfg = cfg
        self.mem = Memories(cfg)
        self.fault_variables = None       # (variable SRAM, slot flags) the last fault left, before rollback
        if host is None and program.manifest.get("host_ops"):
            from firmware_model.golden.host_cpu import HostCpu
            host = HostCpu(program)
        self.host = host
        self.regs: dict[int, int] = {}
        self.counters = Counters()
        self.event_hook: CommandHook | None = None
        self.mark = 0
        self._timeline: Timeline | None = None        # the running (or last) invocation's (timeline)
        self._timeline_of = None                      # a decode's outcome timeline to copy from
        self._last_decode = None                      # (plans, decode) of the last decoded invocation
        self._kept_for = None                         # (plans, _variables_kept's answer)
        self._checked_plans = None                    # the plans invoke found the program matches (for its run)
        self._var_names = {v.slot: v.name for v in program_layout(program.manifest)}
        monitor = RequireMonitor(program) if requires else None
        self.monitor = monitor if monitor is not None and monitor.active else None
        # Each command's plan (its checks, ranges, cycles) is a function of the configuration,
        # its opcode and sub and the registers it reads: made once per register values and kept
        # with the program's decodes (timing_model.program_plans), for every model of the program.
        from firmware_model.golden.timing_model import UNIT_PLANS, plan_memos
        shared = self._plans = plan_memos(program, cfg)
        self._unit_plans, self._unit_memo, self._dma_memo = UNIT_PLANS, shared.unit_memo, shared.dma_memo
        self._power_on()

    def _power_on(self) -> None:
        self.mem.power_on_reset()
        addr = self.program.constants_addr
        const = np.frombuffer(self.program.constants, dtype=np.uint8)
        self.mem.check_range("ext", addr, addr + len(const), "constants image")
        self.mem.ext[addr:addr + len(const)] = const

    # --- host side ---------------------------------------------------------------------
    def write_tensor(self, place: Placement, value: np.ndarray) -> None:
        data = np.ascontiguousarray(value, dtype=place.dtype.storage.newbyteorder("<")).view(np.uint8).reshape(-1)
        self.mem.check_range("ext", place.addr, place.addr + len(data), f"tensor {place.name}")
        self.mem.ext[place.addr:place.addr + len(data)] = data

    def read_tensor(self, place: Placement) -> np.ndarray:
        n = math.prod(place.shape) * place.dtype.size_bytes        # place.nbytes, without numpy's prod
        self.mem.check_range("ext", place.addr, place.addr + n, f"tensor {place.name}")
        raw = self.mem.ext[place.addr:place.addr + n]
        return raw.view(place.dtype.storage.newbyteorder("<")).astype(place.dtype.storage).reshape(place.shape)

    def begin_invocation(self, inputs: dict[str, np.ndarray]) -> None:
        """The host's part of starting an invocation: inputs into external memory, start pulse."""
        for place in self.program.inputs:
            if place.name not in inputs:
                raise GoldenModelError(f"input '{place.name}' was not given")
            value = np.asarray(inputs[place.name])
            if value.dtype != place.dtype.storage or list(value.shape) != list(place.shape):
                raise GoldenModelError(f"input '{place.name}' is {value.dtype}{list(value.shape)}, the program "
                                       f"wants {place.dtype.name} ({place.dtype.storage}) {list(place.shape)}")
            self.write_tensor(place, value)
        self.mem.start_invocation()

    def read_outputs(self) -> dict[str, np.ndarray]:
        return {place.name: self.read_tensor(place) for place in self.program.outputs}

    def invoke(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One invocation. Like the interpreter's, it is a transaction for the variables: when the
        program faults, the variable SRAM and its flags are put back as they were before it (the
        host driver's part; the hardware itself does not roll back)."""
        saved = None if self._variables_kept() else self._variable_snapshot()
        self.fault_variables = None
        try:
            self.begin_invocation(inputs)
            self.run()
        except BaseException:
            self._checked_plans = None
            # what the hardware left behind, for a bench that checks the driver's rollback too
            self.fault_variables = (self.mem.sram[Sram.VARIABLE].copy(), self.mem.variable_slots.copy(),
                                    self.home_bytes())
            if saved is not None:
                self._variable_restore(saved)
            raise
        return self.read_outputs()

    # --- the command processor ---------------------------------------------------------
    def run(self) -> None:
        """One invocation from command 0 to END. Without an event hook, the program decoded once
        (decoded.py: the same memories, counters, timeline, registers and errors as run_steps);
        `fast = False` (or a hook) runs it command by command through run_steps."""
        checked, self._checked_plans = self._checked_plans, None
        if self.fast and self.event_hook is None and self._decodable():
            self._run_decoded(checked)
            return
        for _ in self.run_steps():
            pass

    def _decodable(self) -> bool:
        """The decoded form knows the host CPU's cycles only for the manifest's host ops run by
        HostCpu (what the timing-only model counts)."""
        if self.host is None:
            return not self.program.manifest.get("host_ops")
        from firmware_model.golden.host_cpu import HostCpu
        return type(self.host) is HostCpu and bool(self.program.manifest.get("host_ops"))

    def _run_decoded(self, checked=None) -> None:
        """The program decoded once (decoded.py). `checked`: the plans invoke has just found the
        program matches (else the check is made here)."""
        from firmware_model.golden import decoded as D
        from firmware_model.golden.timing_model import _fresh, invocation_outcome, program_plans

        plans = checked
        if plans is None or plans is not self._plans:
            plans = self._plans
            if not plans.matches(self.program, self.cfg):
                plans = self._plans = program_plans(self.program, self.cfg)
        last = self._last_decode         # the decode the last invocation ran: its start registers
        dec = last[1] if last is not None and last[0] is plans and self.regs == last[1].start \
            else plans.decode(self.regs)   # (plans.decode's key, sorted, costs ~6 us)
        self._last_decode = (plans, dec)
        monitor = self.monitor
        prepared = D.golden_steps(plans, dec, monitor.watched if monitor is not None else ())
        slots0 = self.mem.variable_slots.copy()
        self.timeline = Timeline(self.cfg.ext_latency)
        self._dma_window = DmaWindow()
        probes = None
        if monitor is not None:
            monitor.begin()
            probes = monitor.by_command
        cfg, mem, names = self.cfg, self.mem, self._var_names
        refused = []                    # HOST commands whose kernel refused its input (monitor)
        pc = -1
        through = False                 # the stopping command ran to its end
        S_DMA, S_DMAS, S_UNIT, S_BATCH = D.S_DMA, D.S_DMAS, D.S_UNIT, D.S_BATCH
        # the transfers copy through memoryviews (a slice assignment costs half a numpy one's)
        views = {s: memoryview(a) for s, a in mem.sram.items()}
        ext = memoryview(mem.ext)
        steps = D.steps_for(plans, prepared, monitor)
        i, n = 0, len(steps)
        try:
            while i < n:
                step = steps[i]
                kind = step[0]
                if kind == S_BATCH:     # a segment (batched.py) in place of its steps
                    if (monitor is None or monitor.failure is None) and step[3].run(mem, monitor, probes):
                        i += 1
                    else:               # given up: its steps and every later one, one by one
                        steps, i = prepared.steps, step[4]
                        n = len(steps)
                    continue
                i += 1
                if kind == S_DMAS:      # one-run transfers in a row (decoded._merge_transfers)
                    for to_sram, sr, a, e, k, pc in step[3]:
                        if to_sram:
                            views[sr][a:a + k] = ext[e:e + k]
                        else:
                            ext[e:e + k] = views[sr][a:a + k]
                        if monitor is not None and monitor.failure is not None:
                            through = True          # as after each step below
                            monitor.check_after(pc)
                            through = False
                    continue
                pc = step[1]
                if kind == S_DMA:
                    run = step[6]
                    if run is None:
                        dma_transfer(cfg, mem, None, step[3], step[4], step[5])
                    elif step[4]:       # dma_transfer's copy of one run, its slices made once
                        a, e, k = run
                        views[step[3]][a:a + k] = ext[e:e + k]
                    else:
                        a, e, k = run
                        ext[e:e + k] = views[step[3]][a:a + k]
                elif kind == S_UNIT:
                    op = step[2]
                    probe = probes.get(pc) if monitor is not None else None
                    if step[6] is not None:
                        step[6](mem, probe)
                    elif op == Opcode.MAC:
                        execute_mac(cfg, mem, step[4], step[3], probe, step[5])
                    elif op == Opcode.ELTWISE:
                        execute_eltwise(cfg, mem, step[4], step[3], probe, step[5])
                    else:
                        execute_pool(cfg, mem, step[4], step[3], probe, step[5])
                elif kind == D.S_FILL:
                    fill(cfg, mem, None, step[3], step[4], step[5])
                elif kind == D.S_VAR:
                    execute_var(cfg, mem, None, step[3], names, plan=step[4])
                elif kind == D.S_HOST:
                    try:
                        self.host.run(self, step[3])
                    except TosaUnpredictable as e:
                        if monitor is None or not monitor.host_failure(step[3], e):
                            raise
                        refused.append(pc)
                elif kind == D.S_END:
                    if monitor is not None and monitor.failure is not None:
                        through = True
                        monitor.finish()
                    break
                elif kind == D.S_FAULT:
                    raise D.Stored(step[3])
                if monitor is not None and monitor.failure is not None:
                    through = True
                    monitor.check_after(pc)
                    through = False
        except D.Stored as s:
            self._stopped(plans, dec, prepared, slots0, pc, False, refused)
            e = s.error
            if isinstance(e, NpuBenchError) and monitor is not None and monitor.failure is not None \
                    and monitor.failure.error is not e:
                raise monitor.failure.error from e
            raise _fresh(e) from None
        except GoldenModelError as e:
            self._stopped(plans, dec, prepared, slots0, pc, through, refused)
            if monitor is not None and monitor.failure is not None:
                raise monitor.failure.error from e      # an earlier op's REQUIRE failed first
            raise command_fault(pc, self.program.commands[pc], e) from None
        except NpuBenchError as e:
            self._stopped(plans, dec, prepared, slots0, pc, through, refused)
            if monitor is not None and monitor.failure is not None and monitor.failure.error is not e:
                raise monitor.failure.error from e
            raise
        except BaseException:
            self._stopped(plans, dec, prepared, slots0, pc, through, refused)
            raise
        out = invocation_outcome(plans, dec, slots0)
        self.counters.add(out.counters)
        self._timeline, self._timeline_of = None, out.timeline     # copied when asked for (timeline)
        self.regs = dict(dec.end)
        if prepared.marks:
            self.mark = prepared.marks[-1][1]

    @property
    def timeline(self) -> Timeline | None:
        """The running (or last) invocation's timeline. After a decoded invocation, a copy of its
        decode's outcome (shared by every invocation of the decode), made the first time it is
        asked for (a deep copy costs ~14 us, most invocations never look)."""
        if self._timeline is None and self._timeline_of is not None:
            self._timeline, self._timeline_of = copy.deepcopy(self._timeline_of), None
        return self._timeline

    @timeline.setter
    def timeline(self, value: Timeline | None) -> None:
        self._timeline, self._timeline_of = value, None

    def _stopped(self, plans, dec, prepared, slots0, pc: int, through: bool, refused: list) -> None:
        """An invocation of the decoded program stopped at command `pc` (after running it to its
        end when `through`, else as the command raised): the counters, timeline, registers and
        MARK run_steps leaves there, replayed from the decode's events."""
        from firmware_model.golden.host_cpu import host_cycles
        from firmware_model.golden.timing_model import run_events

        cmds = self.program.commands
        counters, tl, regs = Counters(), Timeline(self.cfg.ext_latency), dict(dec.start)
        last = pc if through else pc - 1
        if last >= 0:
            try:
                for done in run_events(plans.commands, dec, counters, tl, slots0.copy(), regs):
                    if done >= last:
                        break
            except Exception:       # noqa: BLE001 - the command the decode stops at (reached only when it is `pc`)
                pass
        if not through and pc < len(cmds):
            op = cmds[pc].opcode
            count_command(counters, op)
            if op == Opcode.HOST and self.host is not None:
                tl.host()               # the host's kernel raised: the wait before it ran
        for host_pc in refused:     # a refused host op counts no host time
            cycles = host_cycles(self.program.manifest["host_ops"], cmds[host_pc].value)
            counters.unit_cycles["host"] -= cycles
            counters.host_cycles -= cycles
        self.counters.add(counters)
        self.timeline = tl
        self.regs = regs
        k = bisect.bisect_right(prepared.marks, (pc if through else pc - 1, float("inf")))
        if k:
            self.mark = prepared.marks[k - 1][1]

    def run_steps(self):
        """Execute the program from command 0 to END, yielding the index of each command run.

        A caller that must act between commands iterates this instead of calling run(). The
        timeline (firmware_model.arch.cycle_model.Timeline) gives each command its clocks; the
        effects happen in program order, which the NPU's waits make equivalent: a VAR, HOST or
        END command runs only once every DMA transfer before it has finished, a compute command
        once all but the latest `slack` have (and those touch none of its bytes: DmaWindow), and
        the DMA engine runs its queue in order.
        """
        cmds = self.program.commands
        counters = self.counters
        self.timeline = Timeline(self.cfg.ext_latency)
        self._dma_window = DmaWindow()
        monitor = self.monitor
        if monitor is not None:
            monitor.begin()
        pc = 0
        while True:
            if pc >= len(cmds):
                raise overrun(pc)
            cmd = cmds[pc]
            count_command(counters, cmd.opcode)
            try:
                done = self.step(pc, cmd)
            except GoldenModelError as e:
                if monitor is not None and monitor.failure is not None:
                    raise monitor.failure.error from e      # an earlier op's REQUIRE failed first
                raise command_fault(pc, cmd, e) from None
            except NpuBenchError as e:
                if monitor is not None and monitor.failure is not None and monitor.failure.error is not e:
                    raise monitor.failure.error from e
                raise
            if monitor is not None and monitor.failure is not None:
                if done:
                    monitor.finish()
                monitor.check_after(pc)
            yield pc
            if done:
                count_stall(counters, self.timeline)
                return
            pc += 1

    def step(self, pc: int, cmd: Command) -> bool:
        """Execute one command; True at END. The checks and counts are command_plan.py's and the
        units' plans, which the timing-only model runs without the data."""
        op = cmd.opcode
        tl = self.timeline
        counters = self.counters
        if op == Opcode.SET:
            check_set(cmd)
            self.regs[cmd.sub] = cmd.value
            tl.simple()
            count_hidden(counters, tl)
        elif op == Opcode.NOP:
            tl.simple()
            count_hidden(counters, tl)
        elif op == Opcode.BARRIER:
            tl.barrier()
            self._dma_window.settle()
        elif op == Opcode.MARK:
            self.mark = cmd.value
            tl.simple()
            count_hidden(counters, tl)
        elif op == Opcode.END:
            count_end(counters, tl.end())
            self._dma_window.settle()
            return True
        elif op in (Opcode.DMA_LOAD, Opcode.DMA_STORE):
            sram = dma_sram(cmd)
            to_sram = op == Opcode.DMA_LOAD
            regs = self.regs
            key = (op, sram, *[regs.get(r, 0) for r in DMA_REGS])
            plan = self._dma_memo.get(key)
            if plan is None:
                plan = self._dma_memo[key] = dma_plan(self.cfg, regs, sram, to_sram)
            r = dma_transfer(self.cfg, self.mem, regs, sram, to_sram, plan)
            ahead = cmd.ahead
            self._dma_window.push(sram, to_sram, plan.sram_range, ahead)
            tl.dma(r.cycles, ahead=ahead)
            count_hidden(counters, tl)
            count_dma(counters, op, sram, r.cycles, r.bytes)
        elif op == Opcode.FILL:
            sram = dma_sram(cmd)
            regs = self.regs
            key = (op, sram, *[regs.get(r, 0) for r in DMA_REGS])
            plan = self._dma_memo.get(key)
            if plan is None:
                plan = self._dma_memo[key] = fill_plan(self.cfg, regs, sram)
            r = fill(self.cfg, self.mem, regs, sram, cmd.value, plan)
            ahead = cmd.ahead
            self._dma_window.push(sram, True, plan.sram_range, ahead)
            tl.dma(r.cycles, fill=True, ahead=ahead)
            count_hidden(counters, tl)
            count_fill(counters, r.sram, r.cycles, r.bytes)
        elif op in (Opcode.MAC, Opcode.ELTWISE, Opcode.POOL):
            self._compute_command(pc, op, cmd.sub, cmd.value)
        elif op == Opcode.VAR:
            self._dma_window.settle()
            r = execute_var(self.cfg, self.mem, self.regs, cmd.sub, self._var_names)
            time_var(tl, r.cycles, r.bytes)
            count_var(counters, r.op, r.cycles, r.bytes)
        elif op == Opcode.HOST:
            if self.host is None:
                raise no_host(cmd)
            tl.host()
            self._dma_window.settle()
            try:
                cycles = self.host.run(self, cmd.value)
            except TosaUnpredictable as e:
                # the host's kernel refused its input: under the monitor, the invocation reports
                # the graph's first failing op (maybe an NPU op still to run, fused from before)
                if self.monitor is None or not self.monitor.host_failure(cmd.value, e):
                    raise
                cycles = 0
            count_host(counters, cycles)
        else:
            raise not_implemented(op)
        return False

    def _compute_command(self, pc: int, op: Opcode, sub: int, slack: int = 0) -> None:
        """MAC (firmware_model/golden/mac_unit.py), ELTWISE (eltwise_unit.py) or POOL (pool_unit.py):
        one tile on SRAM data."""
        before = self.mem.sram[Sram.OUTPUT].copy() if self.event_hook else None
        probe = self.monitor.probe(pc) if self.monitor is not None else None
        regs = self.regs
        make_plan, reads = self._unit_plans[op]
        key = (op, sub, *[regs.get(r, 0) for r in reads])
        plan = self._unit_memo.get(key)
        if plan is None:
            plan = self._unit_memo[key] = make_plan(self.cfg, regs, sub)
        self._dma_window.check(op, plan, slack)
        if op == Opcode.MAC:
            result = execute_mac(self.cfg, self.mem, regs, sub, probe, plan)
            written = result.region.output
        else:
            result = (execute_eltwise if op == Opcode.ELTWISE else execute_pool)(self.cfg, self.mem, regs, sub, probe,
                                                                                  plan)
            written = result.regions["output"]
        start, end = self.timeline.unit(result.cycles, slack, result.plan.preload if op == Opcode.MAC else None)
        count_compute(self.counters, op, result.plan, end - start)
        if self.event_hook is not None:
            event = CommandEvent(self.mark, pc, op, sub, dict(self.regs), start, end, result, self.mem, before)
            replacement = self.event_hook(event)
            if replacement is not None:
                a, b = written
                self.mem.sram[Sram.OUTPUT][a:b] = replacement

    # --- persistent state ----------------------------------------------------------------
    def variable_sram_image(self) -> tuple[np.ndarray, np.ndarray]:
        return self.mem.sram[Sram.VARIABLE].copy(), self.mem.variable_written.copy()

    def home_bytes(self) -> list[tuple[int, np.ndarray]]:
        """(address, bytes) of each variable kept in external memory."""
        return [(v.home, self.mem.ext[v.home:v.home + v.nbytes].copy()) for v in self.external_variables()]

    def external_variables(self) -> list:
        """The variables the compiler keeps in external memory (their `home`s)."""
        return [v for v in program_layout(self.program.manifest) if v.external]

    def _variables_kept(self) -> bool:
        """Whether no command of the program can change the variable SRAM, its written flags or the
        slots' flags (no VAR, no DMA_LOAD or FILL of the variable SRAM) and the program keeps no
        variable in external memory: an invocation then leaves them as it found them, and the
        rollback would put back what is there (large: 2 x 64 KiB copied for nothing). Decided once
        per program's plans (made again when the program changes)."""
        from firmware_model.golden.timing_model import program_plans

        plans = self._plans
        if not plans.matches(self.program, self.cfg):
            plans = self._plans = program_plans(self.program, self.cfg)
        self._checked_plans = plans     # the program matched its plans: the run that follows need not check again
        known = self._kept_for
        if known is None or known[0] is not plans:
            variable = int(Sram.VARIABLE)
            writes = any(cmd.opcode == Opcode.VAR
                         or (cmd.opcode in (Opcode.DMA_LOAD, Opcode.FILL) and cmd.sub == variable)
                         for cmd in plans.commands)
            known = self._kept_for = (plans, not writes and not self.program.manifest.get("variables"))
        return known[1]

    def _variable_snapshot(self):
        homes = self.home_bytes()
        return (self.mem.sram[Sram.VARIABLE].copy(), self.mem.variable_written.copy(), self.mem.variable_slots.copy(),
                homes)

    def _variable_restore(self, saved) -> None:
        self.mem.sram[Sram.VARIABLE][:], self.mem.variable_written[:], self.mem.variable_slots[:], homes = saved
        for addr, raw in homes:
            self.mem.ext[addr:addr + len(raw)] = raw

    def save_state(self) -> dict[str, np.ndarray]:
        """The variable SRAM (image, slot flags, the program's layout, values by name) as arrays."""
        return save_state(self.mem, program_layout(self.program.manifest))

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Load what `save_state` wrote (or the interpreter's values by name); all or nothing."""
        saved = self._variable_snapshot()
        try:
            load_state(self.mem, program_layout(self.program.manifest), arrays)
        except BaseException:
            self._variable_restore(saved)
            raise
