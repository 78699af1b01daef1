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

from firmware_model.arch.cycle_model import COMMAND_OVERHEAD, Timeline
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


# --- the counters --------------------------------------------------------------------------------
def count_command(counters, op: Opcode, n: int = 1) -> None:
    """Every command fetched (`n` of them with opcode `op`): one more of its opcode, and the fetch
    and decode clocks."""
    counters.opcodes[op] += n
    counters.unit_cycles["command"] += n * COMMAND_OVERHEAD


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


def count_compute(counters, op: Opcode, plan) -> None:
    """A MAC, ELTWISE or POOL tile from its unit's plan: busy clocks, one tile, the bytes of
    each region read (the MAC's: input, weight, param; ELTWISE and POOL also count a table's
    LUT bytes), the bytes written (the MAC: its elements; ELTWISE, POOL: the output range), and
    the MAC's lane slots."""
    counters.unit_cycles[UNIT_NAMES[op]] += plan.cycles
    counters.tiles += 1
    if op == Opcode.MAC:
        counters.macs += plan.macs
        counters.bytes_written["output"] += plan.out_bytes
    else:
        a, b = plan.regions["output"]
        counters.bytes_written["output"] += b - a
    for name, (a, b) in plan.reads.items():
        counters.bytes_read[name] += b - a


def time_var(tl: Timeline, cycles: int, moved: int) -> tuple[int, int]:
    """A VAR command on the timeline: its transfer runs on the DMA engine when it moves bytes."""
    return tl.var(cycles if moved else None)


def count_var(counters, op: VarOp, cycles: int, moved: int) -> None:
    """A VAR command (var_unit.var_flags decided `moved`): the DMA engine's clocks and the pop
    clock when it moved bytes, its kind, the bytes between the variable SRAM and external memory."""
    counters.unit_cycles["var"] += cycles + 1 if moved else 0
    counters.var[op.name if op != VarOp.INIT else f"INIT {'loaded' if moved else 'kept'}"] += 1
    if moved:
        src, dst = ("variable", "ext") if op == VarOp.READ else ("ext", "variable")
        counters.bytes_read[src] += moved
        counters.bytes_written[dst] += moved


def count_host(counters, cycles: int) -> None:
    counters.unit_cycles["host"] += cycles
    counters.host_cycles += cycles


def count_end(counters, cycles: int) -> None:
    """END: the invocation's NPU clocks."""
    counters.cycles += cycles
    counters.invocation_cycles.append(cycles)


def count_stall(counters, tl: Timeline) -> None:
    """After END: the clocks the command processor waited during the invocation."""
    counters.unit_cycles["stall"] += tl.stall
