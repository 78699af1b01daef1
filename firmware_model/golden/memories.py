"""The NPU's modelled memories: external memory and the on-chip SRAMs, as byte arrays.

Addresses in commands are byte addresses within one memory. The word organisation of each SRAM
(npu_config.py) matters to the RTL; the golden model checks the alignment rules the RTL relies on
and otherwise works on bytes.

The variable SRAM is persistent: `start_invocation()` leaves it alone; only `power_on_reset()`
clears it (and its written flags).

`memory_bytes` and `check_range` need only the configuration: the units' plans (which check a
command's byte ranges before any data moves, and which the timing-only model runs without
memories) and `Memories.check_range` are the same rule.
"""

from __future__ import annotations

import numpy as np

from firmware_model.arch.isa import ELEMENT_BYTES, VAR_SLOTS, Sram, Status
from firmware_model.errors import GoldenModelError
from firmware_model.tosa_ops.limits import ResourceLimitError
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES


def memory_bytes(cfg: NpuConfig, sram: Sram | str) -> int:
    """Bytes of a memory of the configuration: "ext" (external memory) or an SRAM."""
    if sram == "ext":
        return cfg.ext_size
    if sram == _PARAM:
        return cfg.param_records * PARAM_RECORD_BYTES
    return getattr(cfg, _SRAM_SIZES[sram])


_PARAM = Sram.PARAM
_SRAM_SIZES = {Sram.INPUT: "input_sram", Sram.WEIGHT: "weight_sram", Sram.OUTPUT: "output_sram",
               Sram.VARIABLE: "variable_sram", Sram.LUT: "lut_sram"}


def check_range(cfg: NpuConfig, sram: Sram | str, start: int, stop: int, what: str) -> None:
    """Raise the NPU's ADDRESS_RANGE error unless bytes [start, stop) lie inside the memory."""
    size = memory_bytes(cfg, sram)
    if start < 0 or stop > size or start > stop:
        name = "external memory" if sram == "ext" else f"{Sram(sram).name.lower()} SRAM"
        raise GoldenModelError(f"{what}: bytes [{start}, {stop}) fall outside the {name} "
                               f"({size} bytes)", Status.ADDRESS_RANGE)


class Memories:
    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        # np.zeros maps zero pages lazily: a 256 MiB external memory costs what is touched.
        self.ext = np.zeros(cfg.ext_size, dtype=np.uint8)
        self.sram = {s: np.zeros(memory_bytes(cfg, s), dtype=np.uint8)
                     for s in (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.OUTPUT, Sram.VARIABLE, Sram.LUT)}
        self.variable_written = np.zeros(cfg.variable_sram, dtype=bool)
        # The written flag of each variable slot (VAR command, firmware_model/golden/var_unit.py).
        self.variable_slots = np.zeros(VAR_SLOTS, dtype=bool)

    def power_on_reset(self) -> None:
        """Everything back to zero, the persistent variable SRAM included."""
        # A fresh array of lazily mapped zero pages: writing zeros over a 256 MiB external memory
        # would map every page (~0.1 s per model). The SRAMs are small and zeroed in place.
        try:
            self.ext = np.zeros(self.cfg.ext_size, dtype=np.uint8)
        except MemoryError:
            raise ResourceLimitError(f"{self.cfg.source}: external.size = {self.cfg.ext_size}: the golden model "
                                     "cannot allocate an external memory this large on this machine") from None
        for mem in self.sram.values():
            mem[:] = 0
        self.variable_written[:] = False
        self.variable_slots[:] = False

    def start_invocation(self) -> None:
        """The per-invocation start: nothing on chip is cleared (variables persist)."""

    def check_range(self, sram: Sram | str, start: int, stop: int, what: str) -> None:
        """Raise the NPU's ADDRESS_RANGE error unless bytes [start, stop) lie inside the memory
        (`check_range`: the memories have the configuration's sizes)."""
        check_range(self.cfg, sram, start, stop, what)


def box_span(h: int, w: int, c: int, addr: int, row: int, pix: int, dtype) -> tuple[int, int]:
    """The bytes [first, end) an (h, w, c) box of `dtype` elements covers, element (y, x, k) at
    addr + y*row + x*pix + k*size (unchecked; (addr, addr) when empty): a MAC's or POOL's output
    box, a POOL's input box, or a run of c elements (h = w = 1)."""
    if not (h and w and c):
        return addr, addr
    return addr, addr + (h - 1) * row + (w - 1) * pix + c * ELEMENT_BYTES.get(dtype, 8)
