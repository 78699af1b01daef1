"""Variables on the variable SRAM: the VAR command (firmware_model/golden/var_unit.py, docs/isa.md).

Lowering: the ops state legalization annotated with their slot (`annotations["variable"]`):
- `VARIABLE` (one per variable, at the start of the block) -> VAR INIT from the initial value in
  the constants image; loaded only while the slot's written flag is clear, i.e. on the first
  invocation after power-on. A variable without initial value emits nothing: its flag stays clear
  until a write, so a read before that is VAR_READ_BEFORE_WRITE (TOSA's REQUIRE(is_written));
- a variable read -> VAR READ of the slot into the read's output tensor in external memory;
- a variable write -> VAR WRITE of the slot from the written tensor (from the constants image
  when that tensor is a constant).
No tiles: a VAR command moves the whole variable (VAR_BYTES) between its slot and external memory.

A variable state legalization put in external memory (placement "external", its `home` in the
constants image): its declaration with an initial value -> VAR MARK; a read -> VAR CHECK, then DMA
copies home -> the read's tensor; a write -> DMA copies into the home, then VAR MARK.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.ir import Block, Operator
from compiler.npu.base import CommandWriter, EmitContext, NpuOperation, TilePlan
from compiler.npu.base import const_value
from firmware_model.arch.isa import Opcode, Reg, Sram, VarOp
from firmware_model.arch.config import NpuConfig
from firmware_model.tosa_ops.dtypes import DType


def _bytes_of(value: np.ndarray, dtype: DType) -> bytes:
    return np.ascontiguousarray(value, dtype=dtype.storage.newbyteorder("<")).tobytes()


@dataclass
class NpuVariable(NpuOperation):
    """One VAR command on a variable's slot: INIT, READ into `tensor`, or WRITE from `tensor`."""
    op: VarOp
    slot: dict                          # the state-legalization record (name, addr, bytes, slot, ...)
    tensor: str | None = None           # READ: destination, WRITE: source (external memory)
    data: bytes | None = None           # INIT: the initial value; WRITE of a constant: its bytes
    sources: list[str] = field(default_factory=list)
    kind = "variable"
    unit = "variable SRAM"

    @property
    def ifm_names(self) -> list[str]:
        return [self.tensor] if self.op == VarOp.WRITE and self.data is None else []

    @property
    def ofm_names(self) -> list[str]:
        return [self.tensor] if self.op == VarOp.READ else []


    @property
    def external(self) -> bool:
        return self.slot.get("placement") == "external"

    def describe(self) -> str:
        s = self.slot
        where = (f"'{s['name']}' slot {s['slot']} @ {s['addr']} ({s['bytes']} B)" if not self.external
                 else f"'{s['name']}' slot {s['slot']}, home in external memory ({s['bytes']} B)")
        if self.op == VarOp.INIT:
            if self.data is None:
                return f"VAR INIT {where}: no initial value, nothing to load"
            return f"VAR {'MARK' if self.external else 'INIT'} {where}"
        if self.op == VarOp.READ:
            return f"VAR {'CHECK + copy' if self.external else 'READ'} {where} -> {self.tensor}"
        return (f"VAR {'copy + MARK' if self.external else 'WRITE'} {where} <- {self.tensor}"
                + (" (constant)" if self.data is not None else ""))

    def plan(self, cfg: NpuConfig, where: str) -> TilePlan:
        # an external variable's bytes go through the output SRAM (nothing lives there between ops)
        moves = self.external and self.op != VarOp.INIT
        return TilePlan([], "whole variable", 1, (Sram.OUTPUT,) if moves else ())

    def constants(self, cfg: NpuConfig, plan: TilePlan) -> dict[str, bytes]:
        # an external variable's initial value is its home's content (the scheduler put it there)
        if self.external and self.op == VarOp.INIT:
            return {}
        return {"data": self.data} if self.data is not None else {}

    def emit(self, w: CommandWriter, plan: TilePlan, ectx: EmitContext) -> list[dict]:
        if self.op == VarOp.INIT and self.data is None:
            return []
        if self.external:
            return self._emit_external(w, ectx)
        ext = ectx.constants["data"] if self.data is not None else ectx.placements[self.tensor].addr
        w.set(Reg.VAR_ADDR, self.slot["addr"])
        w.set(Reg.VAR_BYTES, self.slot["bytes"])
        w.set(Reg.VAR_SLOT, self.slot["slot"])
        w.set(Reg.VAR_EXT_ADDR, ext)
        w.emit(Opcode.VAR, self.op)
        return []

    def _emit_external(self, w: CommandWriter, ectx: EmitContext) -> list[dict]:
        """INIT: MARK (the home holds the initial value since program load). READ: CHECK, then
        home -> tensor. WRITE: tensor (or the constant) -> home, then MARK."""
        home = self.slot["home"]
        w.set(Reg.VAR_SLOT, self.slot["slot"])
        if self.op == VarOp.INIT:
            w.emit(Opcode.VAR, VarOp.MARK)
        elif self.op == VarOp.READ:
            w.emit(Opcode.VAR, VarOp.CHECK)
            _copy(w, ectx, home, ectx.placements[self.tensor].addr, self.slot["bytes"])
        else:
            src = ectx.constants["data"] if self.data is not None else ectx.placements[self.tensor].addr
            _copy(w, ectx, src, home, self.slot["bytes"])
            w.emit(Opcode.VAR, VarOp.MARK)
        return []


def _copy(w: CommandWriter, ectx: EmitContext, src: int, dst: int, nbytes: int) -> None:
    """External memory to external memory through the output SRAM, a buffer's worth at a time
    (the DMA engine runs its queue in order, so each store follows its load)."""
    base = ectx.buffers[Sram.OUTPUT][0]
    chunk = ectx.cfg.output_sram - base
    for off in range(0, nbytes, chunk):
        n = min(chunk, nbytes - off)
        w.dma(Opcode.DMA_LOAD, Sram.OUTPUT, ext=src + off, sram_addr=base, len0=n)
        w.dma(Opcode.DMA_STORE, Sram.OUTPUT, ext=dst + off, sram_addr=base, len0=n)


def match(block: Block, op: Operator, producers: dict, consumers: dict):
    """(NpuVariable, [op]) for an op state legalization gave a slot; None for any other op."""
    record = op.annotations.get("variable")
    if record is None:
        return None
    var_tensor = record["tensor"]
    dtype = DType[record["dtype"]]
    if op.op == "VARIABLE":
        t = block.tensors.get(var_tensor)
        data = _bytes_of(t.data, dtype) if t is not None and t.data is not None else None
        return NpuVariable(VarOp.INIT, record, None, data, sources=[f"VARIABLE {record['name']}"]), [op]
    reads = [n for n in op.outputs if n != var_tensor]
    if reads:
        return NpuVariable(VarOp.READ, record, reads[0], None, sources=[f"{op.op}->{reads[0]}"]), [op]
    source = next(n for n in op.inputs if n != var_tensor)
    value = const_value(block, producers, source)
    data = _bytes_of(value, dtype) if value is not None else None
    return NpuVariable(VarOp.WRITE, record, source, data, sources=[f"{op.op}({source})"]), [op]
