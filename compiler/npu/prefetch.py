"""Cross-operation prefetch: the next NPU operation's first loads, issued before this operation's
last compute command, so that they run on the DMA engine while it computes.

Within an operation the kinds already double-buffer (tile k+1's loads before tile k's compute
command, covered by its DMA slack: docs/isa.md, "DMA slack"). Between operations the same is
worth most where operations are short: a recurrent cell's chain of small ELTWISE operations, or
a fully connected layer whose weights could stream in while the operation before it runs. An
operation kind that can take part offers

- `prefetch(w, plan, ectx, slot) -> Prefetched | None`: its first tile's loads, into buffer
  `slot` (ELTWISE: operands and records; MAC: the weights and records of its first channel
  slice, and with `input_box` its first input box: a kind with `prefetches_input` is asked with
  it first, then without);
- `emit(w, plan, ectx, prefetched=..., next_loads=...)`: with `prefetched`, the
  first tile skips what is resident; before its last compute command it calls
  `next_loads(opcode, sub, result)`, which issues the next operation's prefetch when safe and
  returns the DMA commands it pushed (the command's slack grows by that many).

An ELTWISE whose first tile's operand (A or B) is a result an earlier command left in the output
SRAM (CommandWriter.results; for a prefetch, those the running command leaves alone and its own
`result`) reads it there (A_FROM_OUTPUT, B_FROM_OUTPUT) instead of loading it back: a chain of
dependent elementwise operations then waits for no round trip through external memory between
them.

Safety is the ISA's own rule, checked here before anything is emitted: the prefetch is written
into a scratch writer for each candidate buffer; it is taken only if none of its transfers writes
a byte the compute command (its registers already set) reads or writes — `DmaWindow`, the rule
the golden model refuses a program by (DMA_HAZARD) — and none reads external bytes still to be
written: those of this operation's stores still to come (the `pending` spans its kind gives:
the last tile's store; without them, all its outputs), and every output of the data movements
between (they run after the link). The engine runs transfers in program order, so stores pushed
earlier are seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.npu.base import CommandWriter, EmitContext, TilePlan
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import Opcode, Sram
from firmware_model.arch.program import Placement
from firmware_model.errors import GoldenModelError
from firmware_model.golden.command_plan import DmaWindow, dma_sram
from firmware_model.golden.dma import dma_plan, fill_plan
from firmware_model.golden.timing_model import UNIT_PLANS


@dataclass
class Prefetched:
    """An operation's first loads issued early: the buffer they filled, the kind's record of what
    is resident, the DMA commands pushed, and the output-SRAM bytes [a, b) the operation before
    still reads with its last store (None: no store pending)."""
    slot: int
    state: object
    dma: int
    store_span: tuple[int, int] | None = None


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether byte spans [a0, a1) and [b0, b1) share a byte."""
    return a[0] < b[1] and b[0] < a[1]


STOP = object()        # PrefetchLink: a prefetch that would issue nothing (all of it is there)
# A convolution's input box may come in another input buffer than its weights' buffer (False: the
# same buffer only; for measurements and tests).
CROSS_BUFFERS = True


class PrefetchLink:
    """`next_loads` for one operation: the next operation's prefetch, issued once when safe."""

    def __init__(self, cfg: NpuConfig, w: CommandWriter, nxt, plan: TilePlan, ectx: EmitContext,
                 outputs: list[Placement], moved: list[Placement] = ()):
        """`outputs`: the external placements of this operation's results and of the aliases and
        data movements between it and `nxt`; `moved`: the data movements' (written after the
        prefetch, whatever this operation has stored)."""
        self.cfg, self.w, self.nxt, self.plan, self.ectx = cfg, w, nxt, plan, ectx
        self.outputs = [(p.addr, p.addr + p.nbytes) for p in outputs]
        # a data movement between also writes output-SRAM buffers of its own: no result kept
        # there now is sure to be there when the next operation runs (_kept)
        self.moved = [(p.addr, p.addr + p.nbytes) for p in moved]
        self.taken: Prefetched | None = None

    def __call__(self, op: Opcode, sub: int, result=None, pending: list[tuple[int, int]] | None = None) -> int:
        """`result`: where the command's result will be stored from, (ext address, bytes,
        output-SRAM address) of a dense 1-D store, when the next operation may read it on chip.
        `pending`: the external byte spans this operation's stores still to come will write (the
        ones pushed already run before the prefetch: the engine keeps program order); None: all
        of its outputs'."""
        if self.taken is not None:
            return 0
        try:
            unit = UNIT_PLANS[op][0](self.cfg, self.w.regs, sub)
        except GoldenModelError:
            return 0                      # the command faults anyway: nothing to overlap
        # Each buffer the next operation may take: the one whose prefetch pushes the fewest
        # transfers (some of its constants may be resident: CommandWriter), of those that are
        # safe; none at all when one buffer already holds everything its first tile loads.
        kept = self._kept(op, sub, result)
        buffers = range(self.plan.buffers)

        def best_of(slots, **extra):
            """The safe prefetch of the fewest transfers over `slots` ((weight buffer, input
            buffer) pairs), None if none is safe, STOP when one issues nothing at all."""
            best = None
            for slot, in_slot in slots:
                scratch = self.w.fork()
                more = {"in_slot": in_slot} if in_slot is not None else {}
                got = self.nxt.prefetch(scratch, self.plan, self.ectx, slot, kept, **extra, **more)
                if got is None or got.dma == 0:
                    return STOP
                if (best is None or got.dma < best[1].dma) and self._safe(scratch, op, unit, got.dma, pending):
                    best = (scratch, got)
            return best

        if getattr(self.nxt, "prefetches_input", False):
            # a convolution's first input box too where that is safe, each buffer alike; else its
            # weights alone, and the box in another input buffer than theirs (the running command
            # may read the one and not the other) if that is safe
            best = best_of([(s, s) for s in buffers], input_box=True)
            if best is None:
                best = best_of([(s, None) for s in buffers], input_box=False)
                if best is not None and best is not STOP and CROSS_BUFFERS:
                    w_slot = best[1].slot
                    crossed = best_of([(w_slot, i) for i in buffers if i != w_slot], input_box=True)
                    if crossed is not None and crossed is not STOP:
                        best = crossed
        else:
            best = best_of([(s, None) for s in buffers])
        if best is None or best is STOP:
            return 0
        self.w.adopt(best[0])
        self.taken = best[1]
        return best[1].dma

    def _kept(self, op: Opcode, sub: int, result) -> list[tuple[int, int, int]]:
        """The results that will be in the output SRAM when the next operation starts, as
        CommandWriter.results: what the writer keeps once it has written the command (its
        registers are set) and the command's own store of `result` (ext address, bytes,
        output-SRAM address), written here on a scratch writer."""
        if self.moved:
            return []
        ahead = self.w.fork()
        ahead.emit(op, sub)
        if result is not None:
            ext, nbytes, at = result
            ahead.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=ext, sram_addr=at, len0=nbytes)
        return ahead.results

    def _safe(self, scratch: CommandWriter, op: Opcode, unit, n: int, pending=None) -> bool:
        regs = dict(self.w.regs)
        unwritten = self.outputs if pending is None else pending + self.moved
        window = DmaWindow()
        for c in scratch.commands:
            if c.opcode == Opcode.SET:
                regs[c.sub] = c.value
                continue
            if c.opcode not in (Opcode.DMA_LOAD, Opcode.FILL):
                return False
            sram = dma_sram(c)
            if c.opcode == Opcode.FILL:
                p = fill_plan(self.cfg, regs, sram)
            else:
                p = dma_plan(self.cfg, regs, sram, True)
                if p.ext is not None and any(overlaps(p.ext_range, o) for o in unwritten):
                    return False
            window.push(sram, True, p.sram_range)
        try:
            window.check(op, unit, n)
        except GoldenModelError:
            return False
        return True


def pending_store_span(cfg: NpuConfig, w: CommandWriter) -> tuple[int, int] | None:
    """The output-SRAM bytes the last command read with its store, when it is a DMA_STORE (its
    registers are the writer's current ones)."""
    if not w.commands or w.commands[-1].opcode != Opcode.DMA_STORE or dma_sram(w.commands[-1]) != Sram.OUTPUT:
        return None
    return dma_plan(cfg, w.regs, Sram.OUTPUT, False).sram_range
