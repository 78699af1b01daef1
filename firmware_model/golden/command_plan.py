"""The command processor apart from data: what each command is refused for and what it adds to
the counters. The golden model (model.py), which executes commands on memories, and the
timing-only model (timing_model.py), which only counts them, both call these functions, so the
two cannot count differently.

A command's work splits in three, each with one home:
- its unit's plan (mac_unit.mac_plan, eltwise_unit.eltwise_plan, pool_unit.pool_plan,
  dma.dma_plan / fill_plan, var_unit.var_plan, host_cpu.host_cycles): the checks of
  arch/checks.py and the byte ranges, the cycles (arch/cycle_model.py), MAC lane slots, bytes,
  all from the registers alone;
- its data (the units' execute_* functions, golden model only), which run on what the plan found;
- its accounting here: the command processor's own refusals (a register that does not exist, an
  SRAM id, an opcode nobody implements, a program without END) and the `count_*` functions that
  add a command's plan to `model.Counters`. When the command runs on the Timeline
  (arch/cycle_model.py) is the caller's one line: tl.simple(), tl.dma(cycles), tl.unit(cycles),
  tl.barrier(), tl.end(), time_var(...).
"""

from __future__ import annotations

from collections import deque

from firmware_model.arch.cycle_model import DECODE_CLOCKS, DMA_QUEUE_DEPTH, Timeline
from firmware_model.arch.isa import Command, Opcode, Reg, Sram, Status, VarOp
from firmware_model.errors import GoldenModelError

# Register numbers a SET may write (the ISA's register file).
REGISTER_NUMBERS = frozenset(int(r) for r in Reg)
_SRAMS = {int(s): s for s in Sram}
_MEMORY_NAMES = {s: s.name.lower() for s in Sram}          # the counters' memory names
# The busy-clock counter of each compute unit.
UNIT_NAMES = {Opcode.MAC: "mac", Opcode.ELTWISE: "eltwise", Opcode.POOL: "pool"}


# --- the command processor's refusals ---------------------------------------------------------
def check_set(cmd: Command) -> None:
    """SET of a register that does not exist is BAD_REGISTER."""
    if cmd.sub not in REGISTER_NUMBERS:
        raise GoldenModelError(f"register {cmd.sub:#04x} does not exist", Status.BAD_REGISTER)


def dma_sram(cmd: Command) -> Sram:
    """The SRAM a DMA_LOAD, DMA_STORE or FILL names: an id that does not exist, or a DMA_STORE of
    the LUT SRAM (the DMA cannot read it), is BAD_MODE."""
    sram = _SRAMS.get(cmd.sub)
    if sram is None:
        raise GoldenModelError(f"SRAM id {cmd.sub} does not exist", Status.BAD_MODE)
    if cmd.opcode == Opcode.DMA_STORE and sram == Sram.LUT:
        raise GoldenModelError("DMA_STORE LUT: the LUT SRAM cannot be read by the DMA", Status.BAD_MODE)
    return sram


def no_host(cmd: Command) -> GoldenModelError:
    return GoldenModelError(f"HOST {cmd.value}: this model has no host CPU attached", Status.BAD_OPCODE)


def not_implemented(op: Opcode) -> GoldenModelError:
    return GoldenModelError(f"{op.name} is not implemented by this golden model", Status.BAD_OPCODE)


def overrun(pc: int) -> GoldenModelError:
    return GoldenModelError(f"command {pc}: the program ran past its end without END", Status.COMMAND_OVERRUN)


def command_fault(pc: int, cmd: Command, e: GoldenModelError) -> GoldenModelError:
    """A unit's refusal as the program reports it: the command's index and disassembly first."""
    return GoldenModelError(f"command {pc} ({cmd.disassemble()}): {e}", e.status)


# --- DMA slack: what a compute command may leave running ------------------------------------------
def unit_ranges(op: Opcode, plan) -> tuple[list, list]:
    """([(memory, [start, stop))] a compute command reads, [(memory, range)] it writes), from its
    plan (an ELTWISE may read two ranges of the output SRAM: A and B)."""
    if op == Opcode.MAC:
        reg = plan.region
        reads = [(reg.input_name, reg.input), ("weight", reg.weight), ("param", reg.param)]
        if reg.lut is not None:
            reads.append(("lut", reg.lut))
        return reads, [("output", reg.output)]
    return plan.reads, [("output", plan.regions["output"])]


def transfer_touches_unit(op: Opcode, plan, sram: Sram, writes_sram: bool, span: tuple[int, int]):
    """The bytes of a compute command (`op`, its plan) that a transfer's SRAM `span` touches
    against the rule (a DMA_LOAD or FILL writes what it reads or writes, a DMA_STORE reads what it
    writes): (what it does with them, its range), or None."""
    if span[1] <= span[0]:
        return None
    reads, writes = unit_ranges(op, plan)
    mem = _MEMORY_NAMES[sram]
    for what, ranges in (("writes", writes), ("reads", reads)):
        if not writes_sram and what == "reads":
            continue                     # two readers of the same bytes do not conflict
        for name, r in ranges:
            if name == mem and r[0] < span[1] and span[0] < r[1]:
                return what, r
    return None


class DmaWindow:
    """The transfers a compute command may leave running: the latest DMA_LOAD, DMA_STORE and FILL
    descriptors pushed (at most DMA_QUEUE_DEPTH + 1 are ever outstanding: the queue's and the
    one in flight), each with its SRAM and
    byte span. A compute command with slack s (its value32) starts while the latest s may still
    run, so none of them may write a byte it reads or writes, nor read a byte it writes (docs/isa.md,
    "DMA slack"); the RTL does not check this, the golden model refuses such a program
    (DMA_HAZARD). Which transfers are still running depends on timing; the rule does not: it
    looks at the latest s pushed, since the last point where every transfer had finished
    (BARRIER, VAR, HOST, END, a compute command with slack 0).

    The same rule holds the other way for a transfer flagged DMA_AHEAD, which the command
    processor may push while the compute command before it runs: `running` is that command while
    only SET, NOP, MARK and AHEAD transfers have followed it (any other command waits for its
    done)."""

    __slots__ = ("recent", "running")

    def __init__(self):
        self.recent: deque = deque(maxlen=DMA_QUEUE_DEPTH + 2)
        self.running = None                     # (opcode, plan) of the compute command that may run

    def push(self, sram: Sram, writes_sram: bool, span: tuple[int, int], ahead: bool = False) -> None:
        """A transfer; `ahead`: flagged DMA_AHEAD (refused with DMA_HAZARD if it touches the bytes
        of the compute command that may be running)."""
        if ahead and self.running is not None:
            op, plan = self.running
            hit = transfer_touches_unit(op, plan, sram, writes_sram, span)
            if hit is not None:
                kind = "a FILL or DMA_LOAD into" if writes_sram else "a DMA_STORE from"
                mem = _MEMORY_NAMES[sram]
                raise GoldenModelError(
                    f"{kind} {mem} bytes [{span[0]}, {span[1]}) flagged AHEAD may run while the "
                    f"{UNIT_NAMES[op].upper()} before it {hit[0]} the {mem} bytes [{hit[1][0]}, {hit[1][1]})",
                    Status.DMA_HAZARD)
        elif not ahead:
            self.running = None                 # the command processor waited for the unit's done
        if span[1] > span[0]:
            self.recent.append((sram, writes_sram, span))
        else:
            self.recent.append(None)            # an empty transfer touches nothing but counts

    def largest_slack(self, op: Opcode, plan, most: int) -> int:
        """The largest DMA slack, at most `most`, that a compute command may take by the rule:
        the latest transfers it may leave running, back to the first that touches its bytes."""
        slack = 0
        for entry in reversed(self.recent):
            if slack == most or (entry is not None and transfer_touches_unit(op, plan, *entry) is not None):
                break
            slack += 1
        return slack

    def ahead_allowed(self, sram: Sram, writes_sram: bool, span: tuple[int, int]) -> bool:
        """Whether a transfer may be flagged DMA_AHEAD here: a compute command may be running and
        the transfer touches none of its bytes."""
        return self.running is not None and transfer_touches_unit(*self.running, sram, writes_sram, span) is None

    def settle(self) -> None:
        self.recent.clear()
        self.running = None

    def check(self, op: Opcode, plan, slack: int) -> None:
        """Before a compute command with `slack`: its refusal (GoldenModelError DMA_HAZARD) if one
        of the transfers it may leave running touches its bytes. The command may then run
        (`running`) under the AHEAD transfers after it."""
        self.running = (op, plan)
        if slack == 0:
            self.recent.clear()
            return
        if not self.recent:
            return
        for entry in list(self.recent)[-slack:]:
            if entry is None:
                continue
            sram, writes_sram, span = entry
            hit = transfer_touches_unit(op, plan, sram, writes_sram, span)
            if hit is not None:
                kind = "a FILL or DMA_LOAD into" if writes_sram else "a DMA_STORE from"
                mem, (what, r) = _MEMORY_NAMES[sram], hit
                raise GoldenModelError(
                    f"{UNIT_NAMES[op].upper()} with DMA slack {slack} starts while {kind} {mem} bytes "
                    f"[{span[0]}, {span[1]}) may still run, over the {mem} bytes [{r[0]}, {r[1]}) it {what}",
                    Status.DMA_HAZARD)


# --- the counters --------------------------------------------------------------------------------
def count_command(counters, op: Opcode, n: int = 1) -> None:
    """Every command fetched (`n` of them with opcode `op`): one more of its opcode, and its decode
    clock (count_hidden takes back those under a running unit). The FETCH clocks that do not
    overlap a decode (after HOST, a VAR transfer, and clock 0's) are counted with the command
    they follow (count_host, count_var, count_end)."""
    counters.opcodes[op] += n
    counters.unit_cycles["command"] += n * DECODE_CLOCKS


def count_dma(counters, op: Opcode, sram: Sram, cycles: int, nbytes: int) -> None:
    """DMA_LOAD (external memory -> SRAM) or DMA_STORE (SRAM -> external memory)."""
    counters.unit_cycles["dma"] += cycles
    name = _MEMORY_NAMES[sram]
    src, dst = ("ext", name) if op == Opcode.DMA_LOAD else (name, "ext")
    counters.bytes_read[src] += nbytes
    counters.bytes_written[dst] += nbytes


def count_fill(counters, sram: Sram, cycles: int, nbytes: int) -> None:
    counters.unit_cycles["fill"] += cycles
    counters.bytes_written[_MEMORY_NAMES[sram]] += nbytes


def count_compute(counters, op: Opcode, plan, cycles: int) -> None:
    """A MAC, ELTWISE or POOL tile from its unit's plan and its `cycles` (Timeline.unit's: a MAC's
    preload may shorten its plan's): busy clocks, one tile, the bytes of
    each region read (the MAC's: input, weight, param; ELTWISE and POOL also count a table's
    LUT bytes), the bytes written (the MAC: its elements; ELTWISE, POOL: the output range), and
    the MAC's lane slots and stream clocks."""
    counters.unit_cycles[UNIT_NAMES[op]] += cycles
    counters.tiles += 1
    if op == Opcode.MAC:
        counters.macs += plan.macs
        # (within the MAC's clocks: the reads of its steps' streams, the mapping's floor)
        counters.unit_cycles["mac_stream"] += plan.stream
        counters.bytes_written["output"] += plan.out_bytes
    else:
        a, b = plan.regions["output"]
        counters.bytes_written["output"] += b - a
    for name, (a, b) in plan.reads:
        counters.bytes_read[name] += b - a


def time_var(tl: Timeline, cycles: int, moved: int) -> tuple[int, int]:
    """A VAR command on the timeline: its transfer runs on the DMA engine when it moves bytes."""
    return tl.var(cycles if moved else None)


def count_var(counters, op: VarOp, cycles: int, moved: int) -> None:
    """A VAR command (var_unit.var_flags decided `moved`): the DMA engine's clocks and the pop
    clock when it moved bytes, its kind, the bytes between the variable SRAM and external memory."""
    counters.unit_cycles["var"] += cycles + 1 if moved else 0
    counters.unit_cycles["command"] += 1 if moved else 0      # the FETCH after its transfer
    counters.var[op.name if op != VarOp.INIT else f"INIT {'loaded' if moved else 'kept'}"] += 1
    if moved:
        src, dst = ("variable", "ext") if op == VarOp.READ else ("ext", "variable")
        counters.bytes_read[src] += moved
        counters.bytes_written[dst] += moved


def count_host(counters, cycles: int) -> None:
    counters.unit_cycles["host"] += cycles
    counters.unit_cycles["command"] += 1            # the FETCH after the host's return
    counters.host_cycles += cycles


def count_end(counters, cycles: int) -> None:
    """END: the invocation's NPU clocks (and the FETCH clock at clock 0)."""
    counters.unit_cycles["command"] += 1
    counters.cycles += cycles
    counters.invocation_cycles.append(cycles)


def count_hidden(counters, tl: Timeline) -> None:
    """After a command the command processor may decode while a unit runs (SET, NOP, MARK, an
    AHEAD transfer): its decode clock under the unit is the unit's, not the command processor's."""
    if tl.hidden:
        counters.unit_cycles["command"] -= tl.hidden
        tl.hidden = 0


def count_stall(counters, tl: Timeline) -> None:
    """After END: the clocks the command processor waited during the invocation."""
    counters.unit_cycles["stall"] += tl.stall
