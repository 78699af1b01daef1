"""The register file as the NPU's units read it: a typed view of raw register contents.

A SET writes 32 raw bits; a register never written reads 0; the registers in `isa.SIGNED_REGS`
read as two's complement. `Registers(raw)` applies those rules once, so a unit writes
`r.ifm_zp` or `r[Reg.IFM_ZP]` and never decodes a register by hand:

    r = Registers(golden.regs)
    r.ofm_h, r.clamp_min          # by lower-case register name
    r[Reg.OFM_ZP]                 # by number
    r.raw[Reg.OUT_MODE]           # the raw contents (KeyError when never set)

`RegisterFile` is the same view over a file it owns and SETs write, for a reader that decodes a
whole program (the timing-only model).
"""

from __future__ import annotations

from typing import Mapping

from firmware_model.arch.isa import SIGNED_REGS, Reg

# name -> (register number, read signed), built once
_FIELDS = {reg.name.lower(): (int(reg), reg in SIGNED_REGS) for reg in Reg}
_NAMES = {int(reg): reg.name.lower() for reg in Reg}
_SIGNED = frozenset(int(r) for r in SIGNED_REGS)


def reg_value(reg: int, raw: int) -> int:
    """The value of register `reg` from its 32-bit contents, signed where the register is."""
    raw &= 0xFFFFFFFF
    if reg in _SIGNED and raw >= (1 << 31):
        return raw - (1 << 32)
    return raw


class Registers:
    __slots__ = ("raw",)

    def __init__(self, raw: Mapping[int, int]):
        self.raw = raw

    def __getitem__(self, reg: int) -> int:
        return reg_value(int(reg), self.raw.get(int(reg), 0))

    def __getattr__(self, name: str) -> int:
        try:
            number, signed = _FIELDS[name]
        except KeyError:
            raise AttributeError(f"no register named {name.upper()}") from None
        v = self.raw.get(number, 0) & 0xFFFFFFFF
        return v - (1 << 32) if signed and v >= (1 << 31) else v

    def values(self, regs) -> dict[int, int]:
        """{register number: value} of `regs` (e.g. every register a command reads)."""
        return {int(r): self[r] for r in regs}


class RegisterFile(Registers):
    """A register file that SET commands write (`set`), read exactly as `Registers` reads it; each
    register written is also kept as a plain attribute holding its value, so reading it skips
    __getattr__ (a program's decode reads registers many times per SET)."""

    def __init__(self, raw: Mapping[int, int] | None = None):
        super().__init__({})
        for reg, value in dict(raw or {}).items():
            self.set(reg, value)

    def set(self, reg: int, value: int) -> None:
        self.raw[reg] = value
        name = _NAMES.get(reg)
        if name is not None:
            self.__dict__[name] = reg_value(reg, value)


class RecordingRegisters(Registers):
    """A register view that notes every register read: which registers a plan or a rule depends
    on (the tests of the plan memos check that a plan's key holds all of them)."""
    __slots__ = ("seen",)

    def __init__(self, raw):
        super().__init__(raw)
        self.seen = set()

    def __getattr__(self, name: str) -> int:
        self.seen.add(int(Reg[name.upper()]))
        return super().__getattr__(name)

    def __getitem__(self, reg) -> int:
        self.seen.add(int(reg))
        return super().__getitem__(reg)
