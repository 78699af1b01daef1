"""Pass — the command processor's lookahead (after emission).

Reads: ctx.program (the emitter's command stream and manifest), ctx.cfg.
Writes: ctx.program: the same commands, reordered and flagged so that the command processor runs
ahead of the compute units (docs/isa.md, "Timing" and "DMA slack"), and a report line.

While a compute command runs, the command processor decodes SET, NOP, MARK and the DMA commands
flagged AHEAD; anything else waits for the unit's done. The emitter writes each tile as its
loads, registers, compute command and the DMA_STORE of its result, so the store, which reads what
the command writes, would stop the command processor at every tile until the unit is done. Here:

1. Transfers move after the next compute command, under one of four policies (_move_transfers):
   `stores`, a compute command's stores of its own results, when that next command writes none
   of the bytes they read (a double-buffered output) and no transfer they pass writes the SRAM
   bytes they read or touches the external bytes they write; `own`, every transfer between the
   two commands, in their order (`all`), but where one of those touches the next command's bytes
   (the store of the tile before reads the output buffer it writes, a load brings its weights),
   the transfers that touch this command's bytes alone — its stores and the loads that overwrite
   what it reads — when they commute with the ones they pass; `touching`, those alone always (the
   others, such as the next operation's prefetched loads, stay before the next command, decoded
   AHEAD while this one computes); `deferred`, as `touching`, the moved stores then on behind the
   transfers before the command after the next one (the loads it waits for), when they commute
   with them. Either way the next tile's registers and loads are decoded while this tile
   computes, and the moved transfers run under the next one.
2. Every DMA command the command processor meets while a compute command runs (only SET, NOP,
   MARK and AHEAD transfers between them) is flagged AHEAD when it touches none of that command's
   bytes: command_plan.transfer_touches_unit, the rule the golden model refuses a program by
   (DmaWindow.push, DMA_HAZARD).
3. Each compute command's DMA slack is the most of the latest transfers it may leave running
   (DmaWindow.check, the same rule as the emitter's slack; the moved transfers change which
   transfers are latest), at most the DMA_QUEUE_DEPTH + 1 that can be outstanding at all.
4. The SETs are written again: before each command, the registers it reads (UNIT_PLANS' for a
   compute command, the DMA registers its lengths use for a transfer, every one for VAR) that do
   not hold its value yet. Every command finds the values it found in the emitter's stream.
5. The manifest's tile command ranges and unit commands follow their commands.

Which policy pays depends on the network, and within one on the layer (a moved store queues
behind the loads prefetched before it), so the pass times each stream, and the emitter's own, on
the cycle model; then a mix, each layer's gaps under the policy its layer took the fewest clocks
with (from its first compute command to the next layer's); and keeps the fastest
(docs/compiler.md, "The command processor's lookahead").
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from firmware_model.arch.cycle_model import DMA_QUEUE_DEPTH
from compiler.npu.prefetch import overlaps
from firmware_model.arch.isa import DMA_AHEAD, Command, Opcode, Reg
from firmware_model.arch.program import Program
from firmware_model.errors import GoldenModelError
from firmware_model.golden.command_plan import DmaWindow, dma_sram, transfer_touches_unit
from firmware_model.golden.dma import dma_plan, dma_registers, fill_plan
from firmware_model.golden.timing_model import UNIT_PLANS, TimingModel

DMA_OPS = (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL)
COMPUTE_OPS = tuple(UNIT_PLANS)
# commands after which every transfer has finished (DmaWindow.settle)
SETTLING = (Opcode.BARRIER, Opcode.VAR, Opcode.HOST, Opcode.END)
# the most transfers outstanding at once: the queue's and the one in flight
MAX_SLACK = DMA_QUEUE_DEPTH + 1
# step 1's policies (_move_transfers), in the order a tie is decided in (the emitter's own stream
# first). Moving nothing but flagging AHEAD ("none") was never the fastest of these on models/,
# nor, once `own` and `touching` came, moving every transfer between ("all", which `own` falls
# back from): both left out.
POLICIES = ("stores", "own", "touching", "deferred")


@dataclass
class _Op:
    """A command of the emitter's stream other than SET, with what it reads of the registers."""
    index: int                              # its place in the emitter's stream
    cmd: Command
    needs: dict[int, int] = field(default_factory=dict)
    # a transfer: (SRAM, writes the SRAM, SRAM byte span, external byte span or None)
    transfer: tuple | None = None
    plan: object = None                     # a compute command's unit plan
    sets: tuple = ()                        # `needs` in register order: the SETs written before it
    # a compute command's transfer_touches_unit answers by transfer index: each policy asks again
    touched: dict[int, bool] = field(default_factory=dict)

    def touches(self, other: "_Op") -> bool:
        """Whether transfer `other` touches this compute command's bytes (transfer_touches_unit)."""
        hit = self.touched.get(other.index)
        if hit is None:
            hit = self.touched[other.index] = transfer_touches_unit(self.cmd.opcode, self.plan, *other.transfer[:3])
        return hit


def _dma_needs(regs: dict[int, int], op: Opcode) -> dict[int, int]:
    """The DMA registers a transfer reads (dma_registers), with their values."""
    read = dma_registers(op == Opcode.FILL, regs.get(Reg.DMA_LEN1, 0), regs.get(Reg.DMA_LEN2, 0))
    return {int(r): regs[int(r)] for r in read if int(r) in regs}


def _ops(cfg, commands: list[Command]) -> list[_Op]:
    regs: dict[int, int] = {}
    ops = []
    plans: dict = {}
    for i, cmd in enumerate(commands):
        op = cmd.opcode
        if op == Opcode.SET:
            regs[cmd.sub] = cmd.value
            continue
        o = _Op(i, cmd)
        if op in DMA_OPS:
            o.needs = _dma_needs(regs, op)
            sram = dma_sram(cmd)
            key = (op, sram, *sorted(o.needs.items()))
            p = plans.get(key)
            if p is None:
                p = plans[key] = (fill_plan(cfg, regs, sram) if op == Opcode.FILL
                                  else dma_plan(cfg, regs, sram, op == Opcode.DMA_LOAD))
            ext = p.ext_range if op != Opcode.FILL and p.ext is not None and p.bytes else None
            o.transfer = (sram, op != Opcode.DMA_STORE, p.sram_range, ext)
        elif op in COMPUTE_OPS:
            fn, reads = UNIT_PLANS[op]
            o.needs = {r: regs[r] for r in reads if r in regs}
            key = (op, cmd.sub, *sorted(o.needs.items()))
            p = plans.get(key)
            if p is None:
                p = plans[key] = fn(cfg, regs, cmd.sub)
            o.plan = p
        elif op == Opcode.VAR:
            o.needs = dict(regs)
        o.sets = tuple(sorted(o.needs.items()))
        ops.append(o)
    return ops


def _move_transfers(ops: list[_Op], policy: str | dict) -> int:
    """Step 1, in place: where a compute command is followed, before the next one, by a transfer
    that touches its bytes (its own store), transfers move after the next compute command, if
    none of the moved ones touches that command's bytes. `policy`: "stores" moves the stores that
    touch the first command's bytes (when no transfer they pass writes the SRAM bytes they read or
    touches the external bytes they write); "all" every transfer between the two, in their order;
    "own" all of them, else (one would touch the next command's bytes) the transfers that touch
    the first command's bytes, when they commute with the ones they pass; "touching" those alone;
    "deferred" as "touching", its stores then behind the transfers before the command after the
    next one (_defer_stores). A dict gives each gap the policy of its first command ({that
    command's index: policy}, key None: every other gap's). Returns how many moved."""
    moved = 0
    i = 0
    while i < len(ops):
        c = ops[i]
        if c.plan is None:
            i += 1
            continue
        # the next compute command, with only transfers, MARK and NOP between
        j = i + 1
        while j < len(ops) and ops[j].plan is None and ops[j].cmd.opcode not in SETTLING:
            j += 1
        if j == len(ops) or ops[j].plan is None:
            i = j
            continue
        nxt = ops[j]
        rule = policy if isinstance(policy, str) else policy.get(c.index, policy[None])
        between = [x for x in range(i + 1, j) if ops[x].transfer is not None]
        own = [x for x in between if c.touches(ops[x])]
        stores = [x for x in own if ops[x].cmd.opcode == Opcode.DMA_STORE]
        if len(stores) != len(own) or not all(_passes(ops[s], ops[x]) for s in stores for x in between
                                              if x > s and x not in stores):
            stores = []
        # the transfers that touch this command's bytes alone, when they commute with the ones
        # they pass: the loads the next command needs are then decoded while this one computes,
        # and the loads that overwrite what this one reads run under the next
        touching = own if own and all(_commute(ops[x], ops[y]) for x in own for y in between
                                      if y > x and y not in own) else []

        def clear(xs):
            return not any(nxt.touches(ops[x]) for x in xs)
        if rule == "stores":
            take = stores
        elif rule in ("touching", "deferred"):
            take = touching
        else:
            take = between if own else []
            if rule == "own" and take and not clear(take):
                take = touching
        if take and clear(take):
            taken = [ops[x] for x in take]
            ops[i + 1:j + 1] = [ops[x] for x in range(i + 1, j + 1) if x not in take] + taken
            moved += len(taken)
            j -= len(taken)                  # the next compute command's new place
            if rule == "deferred":
                _defer_stores(ops, j, taken)
        i = j
    return moved


def _defer_stores(ops: list[_Op], j: int, taken: list[_Op]) -> None:
    """Policy `deferred`, in place: of the transfers `taken` just moved after the compute command
    ops[j], the stores go on behind the transfers between them and the command after it, when
    they commute with those and with the transfers taken after them (which they pass too), and
    touch none of that command's bytes: a store nothing reads soon then queues behind the loads
    that command waits for instead of before them."""
    lo = j + 1 + len(taken)
    k = lo
    while k < len(ops) and ops[k].plan is None and ops[k].cmd.opcode not in SETTLING:
        k += 1
    if k == len(ops) or ops[k].plan is None:
        return
    passed = [x for x in ops[lo:k] if x.transfer is not None]
    # a store moves past the transfers taken after it as well as those between (the ones taken
    # before it stay before it)
    late = [t for i, t in enumerate(taken) if t.cmd.opcode == Opcode.DMA_STORE and not ops[k].touches(t)
            and all(_commute(t, x) for x in taken[i + 1:] + passed if x.transfer is not None)]
    if late and passed:
        ops[j + 1:k] = [t for t in taken if t not in late] + ops[lo:k] + late


def _commute(a: _Op, b: _Op) -> bool:
    """Whether transfers `a` and `b` may run in either order: neither writes a byte, in an SRAM or
    in external memory, that the other reads or writes."""
    sram, writes, span, ext = a.transfer
    o_sram, o_writes, o_span, o_ext = b.transfer
    if sram == o_sram and (writes or o_writes) and overlaps(span, o_span):
        return False
    ext_writes = a.cmd.opcode == Opcode.DMA_STORE or b.cmd.opcode == Opcode.DMA_STORE
    return not ext_writes or ext is None or o_ext is None or not overlaps(ext, o_ext)


def _passes(store: _Op, other: _Op) -> bool:
    """Whether DMA_STORE `store` may move after transfer `other` (the engine runs transfers in
    program order): `other` writes none of the SRAM bytes it reads, touches none of the external
    bytes it writes."""
    sram, _, span, ext = store.transfer
    o_sram, o_writes, o_span, o_ext = other.transfer
    if o_writes and o_sram == sram and overlaps(o_span, span):
        return False
    return ext is None or o_ext is None or not overlaps(o_ext, ext)


def _flags(ops: list[_Op]) -> tuple[dict[int, int], int]:
    """Steps 2 and 3 (by DmaWindow, the golden model's rule): {op index: the command's new imm or
    value}; the count of AHEAD transfers."""
    window = DmaWindow()
    out: dict[int, int] = {}
    ahead = 0
    for o in ops:
        op = o.cmd.opcode
        if o.transfer is not None:
            sram, writes, span, _ = o.transfer
            flag = window.ahead_allowed(sram, writes, span)
            out[o.index] = DMA_AHEAD if flag else 0
            ahead += flag
            window.push(sram, writes, span, flag)
        elif o.plan is not None:
            out[o.index] = window.largest_slack(op, o.plan, MAX_SLACK)
            window.check(op, o.plan, out[o.index])
        elif op in SETTLING:
            window.settle()
    return out, ahead


def _emit(ops: list[_Op], flags: dict[int, int]) -> tuple[list[Command], dict[int, int], dict[int, int]]:
    """Step 4: the stream; {old index: new index} of each command and {old index: the new index
    of the first SET written for it (or of the command)}."""
    cur: dict[int, int] = {}
    out: list[Command] = []
    at, first = {}, {}
    sets: dict[tuple, Command] = {}         # one SET command object per register and value
    for o in ops:
        first[o.index] = len(out)
        for item in o.sets:
            reg, value = item
            if cur.get(reg) != value:
                cmd = sets.get(item)
                if cmd is None:
                    cmd = sets[item] = Command(Opcode.SET, reg, 0, value)
                out.append(cmd)
                cur[reg] = value
        cmd = o.cmd
        if o.transfer is not None:
            cmd = Command(cmd.opcode, cmd.sub, (cmd.imm & ~DMA_AHEAD) | flags[o.index], cmd.value)
        elif o.plan is not None:
            cmd = Command(cmd.opcode, cmd.sub, cmd.imm, flags[o.index])
        at[o.index] = len(out)
        out.append(cmd)
    return out, at, first


def _variant(ops: list[_Op], policy: str | dict):
    """The stream under one policy of step 1, with steps 2-4: (commands, {old: new index}, {old:
    first SET's index}, moved, AHEAD count)."""
    ops = list(ops)
    moved = _move_transfers(ops, policy)
    flags, ahead = _flags(ops)
    commands, at, first = _emit(ops, flags)
    return commands, at, first, moved, ahead


def _cycles(program: Program, commands: list[Command], cfg) -> int:
    """One invocation's cycles of `commands` from the reset state, on the cycle model."""
    model = TimingModel(Program(commands, program.constants, program.manifest), cfg)
    model.invoke()
    return model.counters.cycles


def _layer_of(program: Program) -> dict[int, int]:
    """{index of a compute command in the emitter's stream: its layer's place in the manifest}."""
    out = {}
    for n, layer in enumerate(program.manifest.get("layers", [])):
        for t in layer.get("tiles", []):
            out.update((k, n) for k in range(*t["commands"]) if program.commands[k].opcode in COMPUTE_OPS)
    return out


def _layer_cycles(program: Program, commands: list[Command], at: dict[int, int], layer_of: dict[int, int],
                  cfg) -> tuple[int, dict[int, int]]:
    """One invocation of a variant's stream (`at`: its commands' new places) as _cycles, and each
    layer's clocks on it: from its first compute command's fetch to the next layer's (the last
    layer's to the end)."""
    layer_at = {at[k]: n for k, n in layer_of.items()}
    model = TimingModel(Program(commands, program.constants, program.manifest), cfg)
    model.begin_invocation()
    starts: dict[int, int] = {}
    for index in model.run_steps():
        n = layer_at.get(index)
        if n is not None and n not in starts:
            starts[n] = model.timeline.fetch
    cycles = model.counters.cycles
    order = sorted(starts, key=starts.get)
    ends = [starts[n] for n in order[1:]] + [cycles]
    return cycles, {n: end - starts[n] for n, end in zip(order, ends)}


def run(ctx) -> None:
    program, cfg = ctx.program, ctx.cfg
    old = program.commands
    # Which transfers to move is decided by the cycle model (one invocation from the reset
    # state): the policies differ by network, and no rule found ahead of time picks the best.
    try:
        base = _cycles(program, old, cfg)
    except GoldenModelError as e:
        # a program that faults from the reset state (a variable read before written): its
        # timing says nothing
        ctx.report.append(f"lookahead: the emitter's stream kept (it faults on the cycle model from reset: "
                          f"{e.status.name})")
        return
    ops = _ops(cfg, old)
    layer_of = _layer_of(program)
    best, tried, clocks = None, [f"emitter {base}"], {}
    # streams already timed: policies often agree on a whole program (blazeface on tiny: own,
    # touching and deferred), and the same commands take the same clocks. A stream is its
    # commands' order (the flags, slacks and SETs follow from it): the keys of its index map.
    timed: dict[tuple, tuple] = {}
    for policy in POLICIES:
        got = _variant(ops, policy)
        key = tuple(got[1])
        if key not in timed:
            # (a stream that broke the rule would raise)
            timed[key] = _layer_cycles(program, got[0], got[1], layer_of, cfg)
        cycles, clocks[policy] = timed[key]
        tried.append(f"{policy} {cycles}")
        if cycles < (base if best is None else best[0]):
            best = (cycles, policy, got)
    # Each layer under the policy its own clocks were fewest with (the first on a tie). A layer's
    # clocks under one policy depend on the layers before it, so the mix is timed like the others
    # and kept only when it is the fastest.
    pick = {n: min(POLICIES, key=lambda p: clocks[p].get(n, base)) for n in set(layer_of.values())}
    if len(set(pick.values())) > 1:
        mixed: dict = {k: pick[n] for k, n in layer_of.items()}
        mixed[None] = best[1] if best else POLICIES[-1]
        got = _variant(ops, mixed)
        key = tuple(got[1])
        cycles = timed[key][0] if key in timed else _cycles(program, got[0], cfg)
        tried.append(f"per layer {cycles}")
        if cycles < (base if best is None else best[0]):
            counts = {p: sum(1 for q in pick.values() if q == p) for p in POLICIES}
            best = (cycles, "per layer: " + ", ".join(f"{p} {counts[p]}" for p in POLICIES if counts[p]), got)
    if best is None:
        ctx.report.append(f"lookahead: policy 'emitter' (cycles: {', '.join(tried)}); the emitter's stream kept")
        return
    _, policy, (commands, at, first, moved, ahead) = best
    starts = sorted(first)

    def boundary(i: int) -> int:
        """The new place of a range boundary at old index i: where the first command at or after
        it (other than a SET) now starts, with its SETs."""
        k = bisect_left(starts, i)
        return first[starts[k]] if k < len(starts) else len(commands)

    for layer in program.manifest.get("layers", []):
        for t in layer.get("tiles", []):
            a, b = t["commands"]
            t["commands"] = [boundary(a), boundary(b)]
            if "unit_command" in t:
                t["unit_command"] = at[t["unit_command"]]
    program.manifest.setdefault("stats", {})["commands"] = len(commands)
    program.commands = commands
    ctx.report.append(f"lookahead: policy '{policy}' (cycles: {', '.join(tried)}); {moved} transfer(s) moved "
                      f"after the next compute command, {ahead} AHEAD; {len(commands)} commands (the "
                      f"emitter wrote {len(old)})")
