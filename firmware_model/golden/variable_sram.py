"""The variable SRAM's rules, word by word: what hw/variable_sram.py must do on every access.

TOSA variables (VARIABLE, VARIABLE_READ, VARIABLE_WRITE) are persistent, mutable tensors: their
contents and their `is_written` state survive from one invocation of the graph to the next. On the
NPU they live in the variable SRAM (npu_config `variable_sram` bytes, words of `mac.cols` bytes),
each in a *slot*: a region the compiler assigns (VAR_ADDR, VAR_BYTES) with a written flag
(VAR_SLOT < isa.VAR_SLOTS). firmware_model/golden/var_unit.py executes the VAR commands (whole
transfers); this file states what the SRAM does with each word of them.

The rules:
- an access names a slot and a byte address; the address must be word-aligned and the word must
  lie inside the SRAM, and the slot must exist, else the access is refused with ADDRESS_RANGE
  (a refused write changes nothing, a refused read returns zeros);
- a write stores the word and sets the slot's written flag;
- a read of a slot whose flag is clear is refused with VAR_READ_BEFORE_WRITE (TOSA's
  REQUIRE(variable_tensor.is_written)) and returns zeros;
- the first refusal is kept (sticky: its status and slot) until the next invocation start or reset;
- `start_invocation()` clears only that error: contents and written flags persist;
- `power_on_reset()` clears contents, written flags and the error.

With a `Memories`, the model works on its variable SRAM array and its slot flags
(`Memories.variable_slots`), and marks written bytes in `Memories.variable_written`, as
var_unit.py does.
"""

from __future__ import annotations

import numpy as np

from firmware_model.arch.isa import VAR_SLOTS, Sram, Status
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import NpuConfig


class VariableSramModel:
    """The variable SRAM of one NPU: contents (the `Memories` array when given), slot flags, error."""

    def __init__(self, cfg: NpuConfig, slots: int = VAR_SLOTS, mem: Memories | None = None):
        self.cfg = cfg
        self.word_bytes = cfg.word_bytes
        self.slots = slots
        self.mem = mem
        if mem is not None:
            if slots != len(mem.variable_slots):
                raise ValueError(f"a model over Memories has its {len(mem.variable_slots)} slots, not {slots}")
            self.data, self.written = mem.sram[Sram.VARIABLE], mem.variable_slots
        else:
            self.data, self.written = np.zeros(cfg.variable_sram, np.uint8), np.zeros(slots, dtype=bool)
        self.error: Status | None = None
        self.error_slot = 0

    # --- state changes -------------------------------------------------------------------
    def power_on_reset(self) -> None:
        self.data[:] = 0
        self.written[:] = False
        if self.mem is not None:
            self.mem.variable_written[:] = False
        self.error, self.error_slot = None, 0

    def start_invocation(self) -> None:
        """The per-invocation start: the error is per invocation; contents and flags persist."""
        self.error, self.error_slot = None, 0

    # --- accesses --------------------------------------------------------------------------
    def check(self, slot: int, addr: int) -> Status:
        """The status an access to (slot, addr) gets, before the written rule."""
        w = self.word_bytes
        if not 0 <= slot < self.slots or addr < 0 or addr % w or addr + w > len(self.data):
            return Status.ADDRESS_RANGE
        return Status.OK

    def write(self, slot: int, addr: int, word) -> Status:
        status = self.check(slot, addr)
        if status == Status.OK:
            word = np.asarray(word, dtype=np.uint8).reshape(-1)
            if len(word) != self.word_bytes:
                raise ValueError(f"a variable-SRAM word is {self.word_bytes} bytes, got {len(word)}")
            self.data[addr:addr + self.word_bytes] = word
            self.written[slot] = True
            if self.mem is not None:
                self.mem.variable_written[addr:addr + self.word_bytes] = True
        return self._record(status, slot)

    def read(self, slot: int, addr: int) -> tuple[np.ndarray, Status]:
        status = self.check(slot, addr)
        if status == Status.OK and not self.written[slot]:
            status = Status.VAR_READ_BEFORE_WRITE
        word = (self.data[addr:addr + self.word_bytes].copy() if status == Status.OK
                else np.zeros(self.word_bytes, np.uint8))
        return word, self._record(status, slot)

    def is_written(self, slot: int) -> bool:
        return bool(self.written[slot]) if 0 <= slot < self.slots else False

    def _record(self, status: Status, slot: int) -> Status:
        if status != Status.OK and self.error is None:
            self.error, self.error_slot = status, slot
        return status
