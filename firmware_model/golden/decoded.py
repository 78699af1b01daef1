"""The golden model's program decoded once: each command's data action, prepared per program.

`GoldenModel.run_steps()` (model.py) is the command processor as the spec reads: fetch a command,
decode it from the register file, check it, execute it, count it. Every invocation of a program
does the same decoding again, while the decode depends only on the registers at the
invocation's start (timing_model.py decodes once per start state, its plans memoised per
program). `GoldenModel.run()` therefore runs this module's form of the same program:

- the timing-only model's decode of the program from the start registers (`_Decoded`: its events
  and the unit plans, shared by every model of the program and configuration in the process) is
  turned once into `GoldenSteps`: only the commands that touch data (DMA_LOAD, DMA_STORE, FILL,
  MAC, ELTWISE, POOL, VAR, HOST), each with what its unit needs ready — the DMA plan, the unit's
  plan and its registers' values, the VAR plan — and the command where the decode stops (a fault,
  an overrun, END). SET, NOP, MARK and BARRIER move no data and are not visited;
- an invocation executes those steps in program order with the units' own data paths
  (dma.copy_plan, execute_mac, execute_eltwise, execute_pool, execute_var, the host CPU), under
  the REQUIRE monitor as run_steps runs them;
- the counters and the timeline are not counted command by command: they are the timing-only
  model's outcome of the decode from these flags (timing_model.invocation_outcome, equal to
  run_steps' counters: tests/firmware_model/golden/test_timing_model.py), added at END. When an
  invocation stops early on something only data decide (a REQUIRE that fails, a host kernel that
  raises), the counters, timeline and registers up to that command are replayed from the decode
  (`GoldenModel._stopped`) as run_steps leaves them.

From a decode's second run on, runs of DMA, FILL, MAC and ELTWISE steps are computed a segment at
a time, many tiles per numpy call (batched.py, `steps_to_run`); the other steps run as above.
A compute command on a few elements (a softmax's scalar chain) runs on Python integers instead of
a few dozen numpy calls of ~1 us each: ELTWISE up to eltwise_unit.SMALL_COUNT elements
(prepare_eltwise_small), POOL up to pool_unit.SMALL_BOX input elements (prepare_pool_small); each
is compared with its unit's execute_* on random commands, REQUIRE failures included
(test_eltwise_small.py, test_pool_prepared.py).

So an invocation leaves the same memories, outputs, counters, timeline, registers, slot flags
and errors as run_steps (tests/firmware_model/golden/test_decoded.py compares both on every
network and configuration and on random programs with faults). A caller that must act between
commands (the co-simulation's event hook, `npu perf`) uses run_steps.
"""

from __future__ import annotations

from firmware_model.arch.isa import DEPTHWISE_MODES, MacMode, Opcode
from firmware_model.golden.dma import DMA_REGS, dma_plan, fill_plan
from firmware_model.golden import timing_model as tm
from firmware_model.golden.mac_prepared import prepare_conv, prepare_depthwise
from firmware_model.golden.eltwise_unit import prepare_eltwise
from firmware_model.golden.pool_unit import prepare_pool

# What a step does (its tuple's first field; the second is the command's index, the third its opcode):
#   S_DMA     (S_DMA, pc, op, sram, to_sram, DmaPlan, (sram start, ext start, bytes) of a transfer
#             of one run (dma.dma_transfer's slice copy) or None)
#   S_FILL    (S_FILL, pc, op, sram, value, DmaPlan)
#   S_UNIT    (S_UNIT, pc, op, sub, the unit's registers {number: raw value}, the unit's plan, its
#             prepared data path (a function of the memories and the probe) or None)
#   S_VAR     (S_VAR, pc, op, sub, VarPlan)
#   S_HOST    (S_HOST, pc, op, host op index)
#   S_END     (S_END, pc, op)
#   S_FAULT   (S_FAULT, pc, op, the exception the command raises; op None for an overrun)
#   S_CHECK   (S_CHECK, pc, op): a command the REQUIRE monitor watches that moves no data
#   S_BATCH   (S_BATCH, pc, None, batched.Segment, index of its first step): a run of steps computed
#             at once (batched.py), only in GoldenSteps.batched
#   S_DMAS    (S_DMAS, pc of the last, None, ((to_sram, sram, sram start, ext start, bytes, pc), ...)):
#             consecutive DMA steps of one run each, copied in one go (only in the list steps_for
#             hands out: _merge_transfers)
S_DMA, S_FILL, S_UNIT, S_VAR, S_HOST, S_END, S_FAULT, S_CHECK, S_BATCH, S_DMAS = range(10)


class Stored(Exception):
    """The exception a command of the decode raises (S_FAULT), carried to the model's handler."""

    def __init__(self, error: BaseException):
        super().__init__(error)
        self.error = error


class GoldenSteps:
    """A decode's data steps (module docstring) and the last MARK value before its stop."""

    def __init__(self, steps: list, marks: list):
        self.steps = steps
        self.marks = marks          # (pc, value) of every MARK before the stop, in order
        self.runs = 0               # invocations that ran these steps
        self.batched = None         # the steps with their segments (batched.py); False: none made
        self.batched_by = None      # the batched.settings() they were made with
        self.walk = None            # (the list steps_for picked, it with its transfers merged)


def steps_for(plans, prepared: GoldenSteps, monitor) -> list:
    """The steps an invocation walks (counting the run): `prepared.steps`, or from the decode's
    batched.BATCH_AFTER-th run on, those with its segments (S_BATCH steps, made here when due).
    The walker runs a segment in place of its steps; a segment that gives up (a REQUIRE check
    failed inside it: nothing written) hands its own steps and every later one back to be run one
    by one from `prepared.steps`, as is any segment reached while the monitor holds a failure
    (steps_to_run, GoldenModel._run_decoded)."""
    from firmware_model.golden import batched

    prepared.runs += 1
    if prepared.runs > batched.BATCH_AFTER and prepared.batched_by != batched.settings():
        probes = monitor.by_command if monitor is not None else {}
        try:
            made = batched.compile_steps(plans.cfg, prepared.steps, lambda pc: id(probes.get(pc)))
        except Exception:           # noqa: BLE001 - the steps one by one are the reference; tests
            made = None             # assert the networks get their segments
        prepared.batched = made if made is not None else False
        prepared.batched_by = batched.settings()
    elif prepared.runs <= batched.BATCH_AFTER:      # (a test that moves BATCH_AFTER: steps one by one)
        prepared.batched = prepared.batched_by = None
    steps = prepared.batched or prepared.steps
    walk = prepared.walk
    if walk is None or walk[0] is not steps:
        walk = prepared.walk = (steps, _merge_transfers(steps))
    return walk[1]


def _merge_transfers(steps: list) -> list:
    """`steps` with each run of two or more consecutive one-run DMA steps (_one_run) as one
    S_DMAS step: the walker copies them in a loop of its own instead of dispatching each (mlp:
    121 transfers of 4-1026 bytes). A segment's index of its first step (S_BATCH) refers to the
    decode's own steps, which stay as they are."""
    out, run = [], []

    def flush():
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append((S_DMAS, run[-1][1], None,
                        tuple((st[4], st[3], *st[6], st[1]) for st in run)))
        run.clear()

    for st in steps:
        if st[0] == S_DMA and st[6] is not None:
            run.append(st)
            continue
        flush()
        out.append(st)
    flush()
    return out


def steps_to_run(plans, prepared: GoldenSteps, mem, monitor):
    """The steps an invocation runs one by one, in order (steps_for), its segments run here in
    their place."""
    steps = steps_for(plans, prepared, monitor)
    if steps is prepared.steps:
        yield from steps
        return
    probes = monitor.by_command if monitor is not None else None
    i = 0
    while i < len(steps):
        step = steps[i]
        if step[0] == S_BATCH:
            if (monitor is None or monitor.failure is None) and step[3].run(mem, monitor, probes):
                i += 1
                continue
            steps, i = prepared.steps, step[4]      # one by one from the segment's first step
            continue
        yield step
        i += 1


def _one_run(plan):
    """A non-empty transfer of one run of bytes as (SRAM start, external start, bytes), what
    dma.dma_transfer copies as slices; None for any other."""
    if plan.bytes and plan.ext[2] == 1 and plan.ext[3] == 1:
        return plan.on_chip[0], plan.ext[0], plan.ext[1]
    return None


def prepare(cfg, op: Opcode, regs: dict, sub: int, plan):
    """A compute command's data path with its registers decoded once (the unit's prepare_*), or
    None where the unit's execute_* runs as it is."""
    if op == Opcode.ELTWISE:
        return prepare_eltwise(cfg, regs, sub, plan)
    if op == Opcode.MAC:                    # mac_prepared.py (mac_plan admitted only these modes)
        if sub in DEPTHWISE_MODES:
            return prepare_depthwise(cfg, regs, sub, plan)
        return prepare_conv(cfg, regs, sub, plan)
    if op == Opcode.POOL:
        return prepare_pool(cfg, regs, sub, plan)
    return None


def golden_steps(plans: "tm._ProgramPlans", dec: "tm._Decoded", watched=()) -> GoldenSteps:
    """The data steps of decode `dec` (made once per decode and kept with it). `watched`: command
    indices the REQUIRE monitor checks after (each gets a step, S_CHECK when it moves no data)."""
    key = frozenset(watched)
    made = dec.golden.get(key)
    if made is not None:
        return made
    cfg, cmds = plans.cfg, plans.commands
    unit_regs, dma_memo = plans.unit_regs, plans.dma_memo
    raw = dict(dec.start)
    steps: list = []
    marks: list = []
    watched = set(watched)
    pc_next = 0                     # the registers in `raw` are those before command pc_next

    def advance(to: int) -> None:
        nonlocal pc_next
        for pc in range(pc_next, to):
            cmd = cmds[pc]
            if cmd.opcode == Opcode.SET:
                raw[cmd.sub] = cmd.value
            elif cmd.opcode == Opcode.MARK:
                marks.append((pc, cmd.value))
            if pc in watched:
                steps.append((S_CHECK, pc, cmd.opcode))
        pc_next = max(pc_next, to)

    for ev in dec.events:
        kind = ev[0]
        if kind == tm.RUN:
            continue
        pc, op = ev[1], ev[2]
        advance(pc)
        pc_next = pc + 1
        if kind == tm.DMA or kind == tm.FILL:
            sram = ev[3]
            dkey = (op, sram, *[raw.get(r, 0) for r in DMA_REGS])
            plan = dma_memo.get(dkey)
            if plan is None:
                plan = dma_memo[dkey] = (dma_plan(cfg, raw, sram, op == Opcode.DMA_LOAD) if kind == tm.DMA
                                         else fill_plan(cfg, raw, sram))
            if kind == tm.DMA:
                steps.append((S_DMA, pc, op, sram, op == Opcode.DMA_LOAD, plan, _one_run(plan)))
            else:
                steps.append((S_FILL, pc, op, sram, cmds[pc].value, plan))
        elif kind == tm.UNIT:
            sub = cmds[pc].sub
            reads = tm.UNIT_PLANS[op][1]
            ukey = (op, sub, *[raw.get(r, 0) for r in reads])
            made = unit_regs.get(ukey)
            if made is None:
                regs = dict(zip(reads, ukey[2:]))
                made = unit_regs[ukey] = (regs, prepare(cfg, op, regs, sub, ev[3]))
            steps.append((S_UNIT, pc, op, sub, made[0], ev[3], made[1]))
        elif kind == tm.VAR:
            steps.append((S_VAR, pc, op, cmds[pc].sub, ev[3]))
        elif kind == tm.HOST:
            steps.append((S_HOST, pc, op, cmds[pc].value))
        elif kind == tm.END:
            steps.append((S_END, pc, op))
        elif kind == tm.BARRIER:
            if pc in watched:
                steps.append((S_CHECK, pc, op))
        else:                                   # FAULT, OVERRUN
            steps.append((S_FAULT, pc, op, ev[3]))
    made = dec.golden[key] = GoldenSteps(steps, marks)
    return made
