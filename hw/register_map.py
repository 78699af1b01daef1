"""From the ISA's register file to a unit's configuration, declared once and evaluated twice.

A unit's `cfg` port is an Amaranth struct. Its *register map* says where each field comes from:

    FromReg(Reg.X)          register X's 32 raw bits, truncated to the field's width (a signed
                            field therefore reads a signed register's value)
    FromFlag(Reg.X, FLAG)   1 when FLAG is set in register X
    FromSub()               the command's `sub` field (the unit's operation or mode)
    FromConst(v)            a constant (a field no register of this unit sets)

A map is a dict from field path ("a.zp", "out.clamp_min") to source. Two evaluators read it:

- `map_values(map, regs, sub)`: the field values in Python, from a register dict (the unit
  benches drive a unit's `cfg` port with them, through their payload codec);
- `drive_map(m, map, cfg, regs, sub)`: the same fields as combinational logic from the core's
  register-file struct (the core's sequencers).

`AmaranthOps` and `elaborate_rules` are the RTL evaluator of `firmware_model.arch.checks` rules;
`rules_pass` is a sequencer's CHECK state built from them.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from amaranth import Cat, Const, Module, Mux, Value

from firmware_model.arch.checks import Rule
from firmware_model.arch.isa import Reg


@dataclass(frozen=True)
class FromReg:
    reg: Reg


@dataclass(frozen=True)
class FromFlag:
    reg: Reg
    flag: int


@dataclass(frozen=True)
class FromSub:
    pass


@dataclass(frozen=True)
class FromConst:
    value: int


Source = FromReg | FromFlag | FromSub | FromConst


def prefixed(prefix: str, register_map: dict[str, Source]) -> dict[str, Source]:
    """A sub-unit's map under a struct member (e.g. the output stage's under "out.")."""
    return {f"{prefix}.{path}": src for path, src in register_map.items()}


def map_values(register_map: dict[str, Source], regs: dict[int, int], sub: int) -> dict[str, int]:
    """Field values from raw register contents (missing registers read 0); the packer truncates
    each to its field's width, as the RTL's assignment does."""
    out = {}
    for path, src in register_map.items():
        if isinstance(src, FromReg):
            out[path] = regs.get(int(src.reg), 0) & 0xFFFFFFFF
        elif isinstance(src, FromFlag):
            out[path] = int(bool(regs.get(int(src.reg), 0) & int(src.flag)))
        elif isinstance(src, FromConst):
            out[path] = int(src.value)
        else:
            out[path] = int(sub)
    return out


def _field(view, path: str):
    for part in path.split("."):
        view = getattr(view, part)
    return view


def drive_map(m: Module, register_map: dict[str, Source], cfg, regs, sub: Value) -> None:
    """Drive the struct view `cfg` from the register-file view `regs` (hw.register_file) and the
    command's `sub`, combinationally."""
    for path, src in register_map.items():
        target = _field(cfg, path)
        if isinstance(src, FromReg):
            value = getattr(regs, src.reg.name.lower())
        elif isinstance(src, FromFlag):
            value = (getattr(regs, src.reg.name.lower()) & int(src.flag)) != 0
        elif isinstance(src, FromConst):
            value = src.value
        else:
            value = sub
        m.d.comb += target.eq(value)


class AmaranthOps:
    """The rule operations (firmware_model.arch.checks.PyOps) as Amaranth logic."""

    @staticmethod
    def any(*conds):
        return Cat(*conds).any()

    @staticmethod
    def all(*conds):
        return Cat(*conds).all()

    @staticmethod
    def not_(cond):
        return ~cond

    @staticmethod
    def one_of(value, *choices):
        return value.matches(*(int(c) for c in choices))

    @staticmethod
    def aligned(value, size: int):
        bits = size.bit_length() - 1
        assert size == 1 << bits, "alignment to a power of two"
        return value[:bits] == 0 if bits else Const(1)

    @staticmethod
    def flag(value, flag):
        return (value & int(flag)) != 0

    @staticmethod
    def aligned_to(value, size):
        value = Value.cast(value)
        return Mux(size == 2, value[:1] == 0, Mux(size == 4, value[:2] == 0, Mux(size == 8, value[:3] == 0, 1)))

    @staticmethod
    def size_of(dtype):
        from firmware_model.arch.isa import ELEMENT_BYTES

        out = Const(0, 4)
        for dt, size in ELEMENT_BYTES.items():
            out = Mux(dtype == int(dt), size, out)
        return out

    @staticmethod
    def mux(cond, a, b):
        return Mux(cond, a, b)

    @staticmethod
    def min_(a, b):
        return Mux(a < b, a, b)

    @staticmethod
    def sat(value):
        from firmware_model.arch.checks import SAT

        bits = SAT.bit_length() + 1        # SAT and the -1 of an empty dimension, signed
        return Mux(value > SAT, SAT, value)[:bits].as_signed()

    @staticmethod
    def low32(value):
        return Value.cast(value)[:32]


class _SignedView:
    """The register-file struct with the ISA's signed registers read as signed values."""

    def __init__(self, regs):
        self._regs = regs

    def __getattr__(self, name: str):
        from firmware_model.arch.isa import SIGNED_REGS

        v = getattr(self._regs, name)
        return v.as_signed() if Reg[name.upper()] in SIGNED_REGS else v


def elaborate_rules(rules: tuple[Rule, ...], regs, sub: Value, cfg) -> list[tuple[Rule, Value]]:
    """Each rule's violation as a one-bit value, in table order (the first broken one decides)."""
    view = _SignedView(regs)
    return [(rule, rule.violated(AmaranthOps, view, sub, cfg)) for rule in rules]


@contextmanager
def rules_pass(m: Module, rules: tuple[Rule, ...], regs, sub: Value, cfg, status, fail_state: str = "DONE"):
    """Inside a sequencer's CHECK state: the first broken rule (table order, as in the golden
    model) sets `status` to its status and goes to `fail_state`; the body runs when none is."""
    with m.If(0):
        pass
    for rule, violated in elaborate_rules(rules, regs, sub, cfg):
        with m.Elif(violated):
            m.d.sync += status.eq(rule.status)
            m.next = fail_state
    with m.Else():
        yield
