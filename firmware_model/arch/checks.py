"""What a command accepts: named rules, written once, evaluated by the golden model and the RTL.

A `Rule` is a constraint on the registers of a command, with the completion code a command that
breaks it ends with and the sentence that states it (the sentence is also the documentation:
docs/isa.md lists the tables). Its condition is written against a small set of operations `x`
(`any`, `all`, `not_`, `one_of`, `aligned`, `flag`) and the register view `r`, so one condition has two
evaluators:

- `first_violation(rules, ...)` here, in Python on a `Registers` view (the golden model);
- `hw.register_map.elaborate_rules(...)` in Amaranth on the register-file struct (the RTL's
  CHECK state), which builds the same conditions as logic.

The first rule broken, in table order, decides the status, in both. The RTL may lack a feature
the ISA defines: such gaps are rules too (`MAC_RTL_GAPS`), so the bench knows, from the same
table the RTL elaborates, which golden-valid commands the RTL refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import LutMode, MacMode, OutMode, Status
from firmware_model.tosa_ops.dtypes import DType


@dataclass(frozen=True)
class Rule:
    name: str
    status: Status
    text: str                                        # what the rule requires, in words
    reads: tuple[str, ...]                           # the registers it reads (named in messages)
    violated: Callable[["PyOps", object, object, NpuConfig], object]   # (x, r, sub, cfg) -> bool-like

    def message(self, unit: str, regs, sub: int) -> str:
        """What a refused command is told: the rule and the values that break it."""
        values = ", ".join(f"{name} = {sub if name == 'sub' else getattr(regs, name.lower())}" for name in self.reads)
        return f"{unit}: {self.text} (rule '{self.name}'; {values})"


class PyOps:
    """The rule operations on Python integers."""

    @staticmethod
    def any(*conds) -> bool:
        return any(bool(c) for c in conds)

    @staticmethod
    def all(*conds) -> bool:
        return all(bool(c) for c in conds)

    @staticmethod
    def not_(cond) -> bool:
        return not cond

    @staticmethod
    def one_of(value, *choices) -> bool:
        return value in choices

    @staticmethod
    def aligned(value, size: int) -> bool:
        return value % size == 0

    @staticmethod
    def flag(value, flag) -> bool:
        return bool(value & flag)


def first_violation(rules: tuple[Rule, ...], regs, sub: int, cfg: NpuConfig) -> Rule | None:
    """The first rule of `rules` the command (its `Registers` view and `sub`) breaks, or None."""
    for rule in rules:
        if rule.violated(PyOps, regs, sub, cfg):
            return rule
    return None


_RESCALE = OutMode.RESCALE

# The MAC command (docs/isa.md, "The MAC command"), in the order the checks apply.
MAC_RULES: tuple[Rule, ...] = (
    Rule("mode", Status.BAD_MODE, "the mode is CONV2D or MATMUL", ("sub",),
         lambda x, r, sub, cfg: x.not_(x.one_of(sub, MacMode.CONV2D, MacMode.MATMUL))),
    Rule("input type", Status.BAD_MODE, "IFM_DTYPE is INT8 or INT16", ("IFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ifm_dtype, DType.INT8, DType.INT16))),
    Rule("int16 zero point", Status.BAD_MODE, "int16 inputs take no input zero point (IFM_ZP = 0)", ("IFM_DTYPE", "IFM_ZP"),
         lambda x, r, sub, cfg: x.all(r.ifm_dtype == DType.INT16, r.ifm_zp != 0)),
    Rule("output type", Status.BAD_MODE, "OFM_DTYPE is INT8, INT16, INT32 or INT48", ("OFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ofm_dtype, DType.INT8, DType.INT16, DType.INT32, DType.INT48))),
    Rule("rescaled int48", Status.BAD_MODE, "a rescaled result (OUT_MODE RESCALE) is not INT48", ("OUT_MODE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.flag(r.out_mode, _RESCALE), r.ofm_dtype == DType.INT48)),
    Rule("raw type", Status.BAD_MODE,
         "a result without RESCALE is the raw accumulator: INT32 for int8 inputs, INT48 for int16 inputs", ("OUT_MODE", "IFM_DTYPE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.not_(x.flag(r.out_mode, _RESCALE)), x.any(
             x.all(r.ifm_dtype == DType.INT8, r.ofm_dtype != DType.INT32),
             x.all(r.ifm_dtype == DType.INT16, r.ofm_dtype != DType.INT48)))),
    Rule("tile size", Status.ADDRESS_RANGE,
         "the tile is not empty (OFM_H, OFM_W, OFM_C, KERNEL_H, KERNEL_W, IFM_CBLOCKS > 0) and its "
         "OFM_H x OFM_W pixels fit the accumulator SRAM", ("OFM_H", "OFM_W", "OFM_C", "KERNEL_H", "KERNEL_W", "IFM_CBLOCKS"),
         lambda x, r, sub, cfg: x.any(r.ofm_h == 0, r.ofm_w == 0, r.ofm_c == 0, r.kernel_h == 0, r.kernel_w == 0,
                                      r.ifm_cblocks == 0, r.ofm_h * r.ofm_w > cfg.acc_depth)),
    Rule("word alignment", Status.ADDRESS_RANGE,
         "IFM_ADDR, IFM_ROW_STRIDE, IFM_PIX_STRIDE and WGT_ADDR are multiples of the SRAM word (mac.cols bytes)", ("IFM_ADDR", "IFM_ROW_STRIDE", "IFM_PIX_STRIDE", "WGT_ADDR"),
         lambda x, r, sub, cfg: x.not_(x.all(*(x.aligned(v, cfg.word_bytes) for v in (
             r.ifm_addr, r.ifm_row_stride, r.ifm_pix_stride, r.wgt_addr))))),
    Rule("rescale type", Status.BAD_MODE, "with RESCALE, RESCALE_DTYPE is INT8, INT16 or INT32", ("OUT_MODE", "RESCALE_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.flag(r.out_mode, _RESCALE), x.not_(x.one_of(
             r.rescale_dtype, DType.INT8, DType.INT16, DType.INT32)))),
    Rule("table mode", Status.BAD_MODE, "LUT_MODE is OFF, INT8 or INT16", ("LUT_MODE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.lut_mode, LutMode.OFF, LutMode.INT8, LutMode.INT16))),
)

# What the ISA allows and the core RTL does not run yet (it refuses these with BAD_MODE): nothing.
MAC_RTL_GAPS: tuple[Rule, ...] = ()
