"""What a command accepts: named rules, written once, evaluated by the golden model and the RTL.

A `Rule` is a constraint on the registers of a command, with the completion code a command that
breaks it ends with and the sentence that states it (the sentence is also the documentation:
docs/isa.md lists the tables). Its condition is written against a small set of operations `x`
and the register view `r` (plain arithmetic and comparisons on register values work in both), so
one condition has two evaluators:

- `first_violation(rules, ...)` here, in Python on a `Registers` view (the golden model);
- `hw.register_map.elaborate_rules(...)` in Amaranth on the register-file struct (the CHECK state
  of each sequencer), which builds the same conditions as logic.

The first rule broken, in table order, decides the status, in both. A command that breaks none
runs; the golden model and the RTL then do the same thing with it. The RTL may lack a feature the
ISA defines: such gaps are rules too (`MAC_RTL_GAPS`, empty now), so a bench knows, from the same
table the RTL elaborates, which golden-valid commands the RTL refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from firmware_model.arch.config import SRAM_MAX_BYTES, NpuConfig
from firmware_model.arch.isa import (DEPTHWISE_MODES, ELEMENT_BYTES, PARAM_RECORD_BYTES, EltMode, EltOp, LutMode,
                                     MacMode, OutMode, PIXEL_PAIR_MODES, PoolMode, ROW_PAIR_MODES, Sram, Status,
                                     depthwise_group_lanes, depthwise_rows)
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
        return any(conds)

    @staticmethod
    def all(*conds) -> bool:
        return all(conds)

    @staticmethod
    def not_(cond) -> bool:
        return not cond

    @staticmethod
    def one_of(value, *choices) -> bool:
        return value in choices

    @staticmethod
    def aligned(value, size: int) -> bool:
        """`value` is a multiple of the constant power of two `size`."""
        return value % size == 0

    @staticmethod
    def aligned_to(value, size) -> bool:
        """`value` is a multiple of `size`, an element size (1, 2, 4 or 8) held in a register value."""
        return size == 0 or value % size == 0

    @staticmethod
    def flag(value, flag) -> bool:
        return bool(value & int(flag))

    @staticmethod
    def size_of(dtype) -> int:
        """Bytes of an element of a DType register value (0 for a code that is no element type)."""
        try:
            return ELEMENT_BYTES.get(DType(dtype), 0)
        except ValueError:
            return 0

    @staticmethod
    def mux(cond, a, b):
        return a if cond else b

    @staticmethod
    def min_(a, b):
        return min(a, b)

    @staticmethod
    def sat(value):
        """`value`, at most SAT (see `_mul`)."""
        return value if value < SAT else SAT

    @staticmethod
    def low32(value):
        """The low 32 bits of `value`, unsigned (a count minus one, where the count is not 0)."""
        return value & 0xFFFFFFFF


# Products in range rules saturate at SAT after every multiplication: every SRAM is smaller
# (config.validate), so a saturated product still breaks the rule it would break exactly, and the
# RTL's comparisons stay within 64 bits (cheap to simulate, and small in gates).
SAT = 1 << 24
assert SAT == SRAM_MAX_BYTES


def _mul(x, *factors):
    """The product of `factors` (>= 0, or -1 for an empty dimension), saturating at SAT."""
    out = x.sat(factors[0])
    for f in factors[1:]:
        out = x.sat(out * x.sat(f))
    return out


def first_violation(rules: tuple[Rule, ...], regs, sub: int, cfg: NpuConfig) -> Rule | None:
    """The first rule of `rules` the command (its `Registers` view and `sub`) breaks, or None."""
    for rule in rules:
        if rule.violated(PyOps, regs, sub, cfg):
            return rule
    return None


_RESCALE = OutMode.RESCALE
ELEMENT_TYPES = (DType.INT8, DType.INT16, DType.INT32, DType.INT48)
LUT_ENTRIES = {LutMode.INT8: 256, LutMode.INT16: 513}


def param_bytes(cfg: NpuConfig) -> int:
    return cfg.param_records * PARAM_RECORD_BYTES


def _box_end(x, base, size, n1, stride1, n2, stride2, n3):
    """One past the last byte of n1 x n2 x n3 elements of `size` bytes at base + i*stride1 +
    j*stride2 + k*size (n1, n2, n3 > 0; saturating products, see _mul)."""
    return base + _mul(x, n1 - 1, stride1) + _mul(x, n2 - 1, stride2) + _mul(x, n3, size)


def _box_aligned(x, base, size, n1, stride1, n2, stride2):
    """Every element of such a box starts at a multiple of its size."""
    return x.all(x.aligned_to(base, size), x.any(n1 <= 1, x.aligned_to(stride1, size)),
                 x.any(n2 <= 1, x.aligned_to(stride2, size)))


def output_stage_rules(bypassed=None) -> tuple[Rule, ...]:
    """The output stage's rules (firmware_model/golden/output_stage.py), shared by the units;
    `bypassed(x, r)`: when the result skips the stage (the MAC's raw int48), they do not apply."""
    rules = (
        Rule("rescale type", Status.BAD_MODE, "with RESCALE, RESCALE_DTYPE is INT8, INT16 or INT32",
             ("OUT_MODE", "RESCALE_DTYPE"),
             lambda x, r, sub, cfg: x.all(x.flag(r.out_mode, _RESCALE), x.not_(x.one_of(
                 r.rescale_dtype, DType.INT8, DType.INT16, DType.INT32)))),
        Rule("table mode", Status.BAD_MODE, "LUT_MODE is OFF, INT8 or INT16", ("LUT_MODE",),
             lambda x, r, sub, cfg: x.not_(x.one_of(r.lut_mode, LutMode.OFF, LutMode.INT8, LutMode.INT16))),
        Rule("table range", Status.ADDRESS_RANGE,
             "a table (256 entries for INT8, 513 for INT16 from LUT_ADDR) lies inside the LUT SRAM",
             ("LUT_MODE", "LUT_ADDR"),
             lambda x, r, sub, cfg: x.any(
                 x.all(r.lut_mode == LutMode.INT8, (r.lut_addr + 256) * 2 > cfg.lut_sram),
                 x.all(r.lut_mode == LutMode.INT16, (r.lut_addr + 513) * 2 > cfg.lut_sram))),
    )
    if bypassed is None:
        return rules
    return tuple(Rule(rule.name, rule.status, rule.text + " (unless the result bypasses the stage)", rule.reads,
                      lambda x, r, sub, cfg, v=rule.violated: x.all(x.not_(bypassed(x, r)), v(x, r, sub, cfg)))
                 for rule in rules)


def depthwise_pass_count(x, r, cfg: NpuConfig):
    """Window passes per kernel row of a DEPTHWISE command (cycle_model.depthwise_passes):
    ceil(((KERNEL_W - 1) * DILATION_W + 1) / mac.cols), saturating with the span."""
    span = _mul(x, r.kernel_w - 1, r.dilation_w) + 1
    return (span + (cfg.mac_cols - 1)) >> (cfg.mac_cols.bit_length() - 1)


def _packed_steps(x, r, cfg: NpuConfig):
    """A DEPTHWISE_PACKED command's steps (isa.packed_groups): ceil(KERNEL_H x span / mac.cols)."""
    span = _mul(x, r.kernel_w - 1, r.dilation_w) + 1
    return (_mul(x, r.kernel_h, span) + (cfg.mac_cols - 1)) >> (cfg.mac_cols.bit_length() - 1)


def _triple_weights_out(x, r, cfg: NpuConfig):
    """A DEPTHWISE_TRIPLE command's ceil(KERNEL_H / 3) weight blocks (one block of output channels:
    the depthwise operands rule comes first) do not fit from WGT_ADDR: written without a division,
    KERNEL_H > 3 x the whole blocks that fit (mac.rows x mac.cols, a power of two, bytes each)."""
    block = cfg.mac_rows * cfg.word_bytes
    return x.any(r.wgt_addr > cfg.weight_sram,
                 r.kernel_h > 3 * ((cfg.weight_sram - x.min_(r.wgt_addr, cfg.weight_sram)) >> (block.bit_length() - 1)))


def _mac_input_end(x, r, cfg: NpuConfig):
    """One past the last input byte a MAC tile reads (from IFM_ADDR; strides are non-negative)."""
    return (r.ifm_addr
            + _mul(x, _mul(x, r.ofm_h - 1, r.stride_h) + _mul(x, r.kernel_h - 1, r.dilation_h), r.ifm_row_stride)
            + _mul(x, _mul(x, r.ofm_w - 1, r.stride_w) + _mul(x, r.kernel_w - 1, r.dilation_w), r.ifm_pix_stride)
            + _mul(x, r.ifm_cblocks, cfg.word_bytes))


def _row_pairs_refused(x, r, cfg: NpuConfig):
    """OFM_C's last block of mac.rows channels holds more than mac.rows / 2 of them (or every
    block is whole); every row-paired command on an array whose rows are no power of two."""
    R = cfg.mac_rows
    if R < 2 or R & (R - 1):
        return True
    return x.any(x.aligned(r.ofm_c, R), (r.ofm_c & (R - 1)) > R // 2)


def _mac_raw48(x, r):
    return x.all(r.ofm_dtype == DType.INT48, x.not_(x.flag(r.out_mode, _RESCALE)))


def _group_span_rule(name: str, mode: MacMode, lanes: str, where: str) -> Rule:
    """A window mode of several kernel rows a step: the kernel row spans at most one group's lanes
    (isa.depthwise_group_lanes)."""
    return Rule(name, Status.BAD_MODE,
                f"a {mode.name} command's kernel row spans at most {lanes} input pixels "
                f"((KERNEL_W - 1) x DILATION_W + 1): one window pass in {where} of the lanes",
                ("sub", "KERNEL_W", "DILATION_W"),
                lambda x, r, sub, cfg: x.all(sub == mode, _mul(x, r.kernel_w - 1, r.dilation_w) + 1
                                             > depthwise_group_lanes(cfg.mac_cols, depthwise_rows(mode))))


# ---- MAC (docs/isa.md, "The MAC command"), in the order the checks apply ----
MAC_RULES: tuple[Rule, ...] = (
    Rule("mode", Status.BAD_MODE,
         "the mode is " + ", ".join(m.name for m in list(MacMode)[:-1]) + " or " + list(MacMode)[-1].name, ("sub",),
         lambda x, r, sub, cfg: x.not_(x.one_of(sub, *MacMode))),
    Rule("depthwise operands", Status.BAD_MODE,
         "a " + ", ".join(m.name for m in DEPTHWISE_MODES[:-1]) + " or " + DEPTHWISE_MODES[-1].name
         + " command takes int8 inputs, one input word per "
         "pixel (IFM_CBLOCKS = 1) and at most min(mac.rows, mac.cols) output channels (row r reads "
         "channel r of the window's words)",
         ("sub", "IFM_DTYPE", "IFM_CBLOCKS", "OFM_C"),
         lambda x, r, sub, cfg: x.all(x.one_of(sub, *DEPTHWISE_MODES), x.any(
             r.ifm_dtype != DType.INT8, r.ifm_cblocks != 1, r.ofm_c > min(cfg.mac_rows, cfg.mac_cols)))),
    _group_span_rule("paired span", MacMode.DEPTHWISE_PAIRED, "mac.cols / 2", "each half"),
    _group_span_rule("triple span", MacMode.DEPTHWISE_TRIPLE, "mac.cols // 3", "each third"),
    Rule("packed span", Status.BAD_MODE,
         "a DEPTHWISE_PACKED command's kernel row spans at least (mac.cols - 1) / 2 input pixels "
         "(mac.cols <= 2 x ((KERNEL_W - 1) x DILATION_W + 1) + 1): a step's mac.cols taps then meet at most "
         "three kernel rows, one input-SRAM read port each",
         ("sub", "KERNEL_W", "DILATION_W"),
         lambda x, r, sub, cfg: x.all(sub == MacMode.DEPTHWISE_PACKED,
                                      2 * (_mul(x, r.kernel_w - 1, r.dilation_w) + 1) + 1 < cfg.mac_cols)),
    Rule("pixel pairs", Status.BAD_MODE,
         "a CONV2D_LANE_PAIRS, CONV2D_ROW_PAIRS or CONV2D_PAIRS command takes int8 inputs and an even OFM_W "
         "(its paired beats take output pixels two at a time along a row)",
         ("sub", "IFM_DTYPE", "OFM_W"),
         lambda x, r, sub, cfg: x.all(x.one_of(sub, *PIXEL_PAIR_MODES), x.any(
             r.ifm_dtype != DType.INT8, x.not_(x.aligned(r.ofm_w, 2))))),
    Rule("row pairs", Status.BAD_MODE,
         "a CONV2D_ROW_PAIRS or CONV2D_PAIRS command's last output-channel block holds at most mac.rows / 2 "
         "channels (OFM_C mod mac.rows is 1 .. mac.rows / 2; mac.rows a power of two): each half of the rows "
         "takes one pixel",
         ("sub", "OFM_C"),
         lambda x, r, sub, cfg: x.all(x.one_of(sub, *ROW_PAIR_MODES), _row_pairs_refused(x, r, cfg))),
    Rule("input SRAM", Status.BAD_MODE,
         "IFM_SRAM is INPUT or OUTPUT (an earlier command's result read where it was written)", ("IFM_SRAM",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ifm_sram, Sram.INPUT, Sram.OUTPUT))),
    Rule("input type", Status.BAD_MODE, "IFM_DTYPE is INT8 or INT16", ("IFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ifm_dtype, DType.INT8, DType.INT16))),
    Rule("int16 zero point", Status.BAD_MODE, "int16 inputs take no input zero point (IFM_ZP = 0)",
         ("IFM_DTYPE", "IFM_ZP"),
         lambda x, r, sub, cfg: x.all(r.ifm_dtype == DType.INT16, r.ifm_zp != 0)),
    Rule("output type", Status.BAD_MODE, "OFM_DTYPE is INT8, INT16, INT32 or INT48", ("OFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ofm_dtype, *ELEMENT_TYPES))),
    Rule("rescaled int48", Status.BAD_MODE, "a rescaled result (OUT_MODE RESCALE) is not INT48",
         ("OUT_MODE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.flag(r.out_mode, _RESCALE), r.ofm_dtype == DType.INT48)),
    Rule("raw type", Status.BAD_MODE,
         "a result without RESCALE is the raw accumulator: INT32 for int8 inputs, INT48 for int16 inputs",
         ("OUT_MODE", "IFM_DTYPE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.not_(x.flag(r.out_mode, _RESCALE)), x.any(
             x.all(r.ifm_dtype == DType.INT8, r.ofm_dtype != DType.INT32),
             x.all(r.ifm_dtype == DType.INT16, r.ofm_dtype != DType.INT48)))),
    Rule("tile size", Status.ADDRESS_RANGE,
         "the tile is not empty (OFM_H, OFM_W, OFM_C, KERNEL_H, KERNEL_W, IFM_CBLOCKS > 0) and its "
         "OFM_H x OFM_W pixels fit the accumulator SRAM",
         ("OFM_H", "OFM_W", "OFM_C", "KERNEL_H", "KERNEL_W", "IFM_CBLOCKS"),
         lambda x, r, sub, cfg: x.any(r.ofm_h == 0, r.ofm_w == 0, r.ofm_c == 0, r.kernel_h == 0, r.kernel_w == 0,
                                      r.ifm_cblocks == 0, _mul(x, r.ofm_h, r.ofm_w) > cfg.acc_depth)),
    Rule("word alignment", Status.ADDRESS_RANGE,
         "IFM_ADDR, IFM_ROW_STRIDE, IFM_PIX_STRIDE and WGT_ADDR are multiples of the SRAM word (mac.cols bytes)",
         ("IFM_ADDR", "IFM_ROW_STRIDE", "IFM_PIX_STRIDE", "WGT_ADDR"),
         lambda x, r, sub, cfg: x.not_(x.all(*(x.aligned(v, cfg.word_bytes) for v in (
             r.ifm_addr, r.ifm_row_stride, r.ifm_pix_stride, r.wgt_addr))))),
    Rule("input range", Status.ADDRESS_RANGE,
         "the input words the tile reads lie inside their SRAM (IFM_SRAM)",
         ("IFM_ADDR", "IFM_ROW_STRIDE", "IFM_PIX_STRIDE", "IFM_CBLOCKS", "OFM_H", "OFM_W", "IFM_SRAM"),
         lambda x, r, sub, cfg: _mac_input_end(x, r, cfg)
         > x.mux(r.ifm_sram == Sram.OUTPUT, cfg.output_sram, cfg.input_sram)),
    Rule("weight range", Status.ADDRESS_RANGE,
         "the weight blocks lie inside the weight SRAM (a DEPTHWISE command: one block per kernel row and "
         "window pass; DEPTHWISE_PAIRED: one per pair of kernel rows; DEPTHWISE_TRIPLE: one per three; "
         "DEPTHWISE_PACKED: one per mac.cols of the KERNEL_H x span taps)",
         ("sub", "WGT_ADDR", "OFM_C", "KERNEL_H", "KERNEL_W", "IFM_CBLOCKS", "DILATION_W"),
         lambda x, r, sub, cfg: x.mux(
             sub == MacMode.DEPTHWISE_TRIPLE, _triple_weights_out(x, r, cfg),
             r.wgt_addr + _mul(x, (r.ofm_c + cfg.mac_rows - 1) // cfg.mac_rows,
                               x.mux(sub == MacMode.DEPTHWISE_PAIRED, (r.kernel_h + 1) >> 1,
                               x.mux(sub == MacMode.DEPTHWISE_PACKED, _packed_steps(x, r, cfg),
                                     _mul(x, r.kernel_h, x.mux(
                                         sub == MacMode.DEPTHWISE, depthwise_pass_count(x, r, cfg),
                                         _mul(x, r.kernel_w, r.ifm_cblocks))))),
                               cfg.mac_rows * cfg.word_bytes)
             > cfg.weight_sram)),
    Rule("record range", Status.ADDRESS_RANGE,
         "the tile's parameter records (PARAM_ADDR, one per output channel) lie inside the parameter SRAM",
         ("PARAM_ADDR", "OFM_C"),
         lambda x, r, sub, cfg: _mul(x, r.param_addr + r.ofm_c, PARAM_RECORD_BYTES) > param_bytes(cfg)),
    *output_stage_rules(bypassed=_mac_raw48),
    Rule("output alignment", Status.ADDRESS_RANGE,
         "OFM_ADDR, OFM_ROW_STRIDE and OFM_PIX_STRIDE are multiples of the output element's size",
         ("OFM_ADDR", "OFM_ROW_STRIDE", "OFM_PIX_STRIDE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.not_(_box_aligned(x, r.ofm_addr, x.size_of(r.ofm_dtype), r.ofm_h,
                                                    r.ofm_row_stride, r.ofm_w, r.ofm_pix_stride))),
    Rule("output range", Status.ADDRESS_RANGE, "the tile's output lies inside the output SRAM",
         ("OFM_ADDR", "OFM_ROW_STRIDE", "OFM_PIX_STRIDE", "OFM_H", "OFM_W", "OFM_C", "OFM_DTYPE"),
         lambda x, r, sub, cfg: _box_end(x, r.ofm_addr, x.size_of(r.ofm_dtype), r.ofm_h, r.ofm_row_stride,
                                         r.ofm_w, r.ofm_pix_stride, r.ofm_c) > cfg.output_sram),
    Rule("input apart from the results", Status.ADDRESS_RANGE,
         "with IFM_SRAM OUTPUT, the input words the tile reads and the bytes it writes do not overlap",
         ("IFM_SRAM", "IFM_ADDR", "IFM_ROW_STRIDE", "IFM_PIX_STRIDE", "IFM_CBLOCKS", "OFM_ADDR", "OFM_ROW_STRIDE",
          "OFM_PIX_STRIDE", "OFM_H", "OFM_W", "OFM_C", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(
             r.ifm_sram == Sram.OUTPUT, r.ifm_addr < _box_end(x, r.ofm_addr, x.size_of(r.ofm_dtype), r.ofm_h,
                                                              r.ofm_row_stride, r.ofm_w, r.ofm_pix_stride, r.ofm_c),
             r.ofm_addr < _mac_input_end(x, r, cfg))),
)

# What the ISA allows and the core RTL does not run yet (it refuses these with BAD_MODE): nothing.
MAC_RTL_GAPS: tuple[Rule, ...] = ()


# ---- ELTWISE (docs/isa.md, "The ELTWISE command") ----
_SHIFT_OPS = (EltOp.LOGICAL_LEFT_SHIFT, EltOp.LOGICAL_RIGHT_SHIFT, EltOp.ARITHMETIC_RIGHT_SHIFT)


def _binary(x, sub):
    return sub != EltOp.COPY


def _operand_count(x, r, scalar_flag):
    return x.mux(x.flag(r.elt_mode, scalar_flag), 1, r.elt_count)


def _elt_records(x, r):
    """The parameter records an ELTWISE reads: min(max(1, ELT_CHANNELS), ELT_COUNT)."""
    return x.min_(x.mux(r.elt_channels == 0, 1, r.elt_channels), r.elt_count)


ELT_RULES: tuple[Rule, ...] = (
    Rule("operation", Status.BAD_MODE, "the operation is an EltOp (ADD .. COPY)", ("sub",),
         lambda x, r, sub, cfg: x.not_(x.one_of(sub, *EltOp))),
    Rule("A type", Status.BAD_MODE, "ELT_A_DTYPE is INT8, INT16, INT32 or INT48", ("ELT_A_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.elt_a_dtype, *ELEMENT_TYPES))),
    Rule("output type", Status.BAD_MODE, "OFM_DTYPE is INT8, INT16, INT32 or INT48", ("OFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ofm_dtype, *ELEMENT_TYPES))),
    Rule("B type", Status.BAD_MODE, "a binary operation's ELT_B_DTYPE is INT8, INT16, INT32 or INT48",
         ("sub", "ELT_B_DTYPE"),
         lambda x, r, sub, cfg: x.all(_binary(x, sub), x.not_(x.one_of(r.elt_b_dtype, *ELEMENT_TYPES)))),
    Rule("unsigned A", Status.BAD_MODE, "A_UNSIGNED reads int8 or int16 elements only", ("ELT_MODE", "ELT_A_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.flag(r.elt_mode, EltMode.A_UNSIGNED),
                                      x.not_(x.one_of(r.elt_a_dtype, DType.INT8, DType.INT16)))),
    Rule("unsigned B", Status.BAD_MODE, "B_UNSIGNED reads int8 or int16 elements only", ("ELT_MODE", "ELT_B_DTYPE"),
         lambda x, r, sub, cfg: x.all(_binary(x, sub), x.flag(r.elt_mode, EltMode.B_UNSIGNED),
                                      x.not_(x.one_of(r.elt_b_dtype, DType.INT8, DType.INT16)))),
    Rule("shift type", Status.BAD_MODE, "a shift takes int8, int16 or int32 elements", ("sub", "ELT_A_DTYPE"),
         lambda x, r, sub, cfg: x.all(x.one_of(sub, *_SHIFT_OPS),
                                      x.not_(x.one_of(r.elt_a_dtype, DType.INT8, DType.INT16, DType.INT32)))),
    Rule("A range", Status.ADDRESS_RANGE,
         "operand A (ELT_COUNT elements, one with A_SCALAR) lies inside the input SRAM (the output SRAM with "
         "A_FROM_OUTPUT) at a multiple of its size",
         ("ELT_A_ADDR", "ELT_COUNT", "ELT_MODE", "ELT_A_DTYPE"),
         lambda x, r, sub, cfg: x.any(
             x.not_(x.aligned_to(r.elt_a_addr, x.size_of(r.elt_a_dtype))),
             r.elt_a_addr + _mul(x, _operand_count(x, r, EltMode.A_SCALAR), x.size_of(r.elt_a_dtype))
             > x.mux(x.flag(r.elt_mode, EltMode.A_FROM_OUTPUT), cfg.output_sram, cfg.input_sram))),
    Rule("B range", Status.ADDRESS_RANGE,
         "operand B (ELT_COUNT elements, one with B_SCALAR) lies inside the weight SRAM (the output SRAM with "
         "B_FROM_OUTPUT) at a multiple of its size",
         ("ELT_B_ADDR", "ELT_COUNT", "ELT_MODE", "ELT_B_DTYPE"),
         lambda x, r, sub, cfg: x.all(_binary(x, sub), x.any(
             x.not_(x.aligned_to(r.elt_b_addr, x.size_of(r.elt_b_dtype))),
             r.elt_b_addr + _mul(x, _operand_count(x, r, EltMode.B_SCALAR), x.size_of(r.elt_b_dtype))
             > x.mux(x.flag(r.elt_mode, EltMode.B_FROM_OUTPUT), cfg.output_sram, cfg.weight_sram)))),
    Rule("record range", Status.ADDRESS_RANGE,
         "with RESCALE, the records PARAM_ADDR .. + min(ELT_CHANNELS, ELT_COUNT) lie inside the parameter SRAM",
         ("OUT_MODE", "PARAM_ADDR", "ELT_CHANNELS", "ELT_COUNT"),
         lambda x, r, sub, cfg: x.all(x.flag(r.out_mode, _RESCALE),
                                      _mul(x, r.param_addr + _elt_records(x, r), PARAM_RECORD_BYTES)
                                      > param_bytes(cfg))),
    *output_stage_rules(),
    Rule("output range", Status.ADDRESS_RANGE,
         "the ELT_COUNT results lie inside the output SRAM at a multiple of their size",
         ("ELT_OUT_ADDR", "ELT_COUNT", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(r.elt_count != 0, x.any(
             x.not_(x.aligned_to(r.elt_out_addr, x.size_of(r.ofm_dtype))),
             r.elt_out_addr + _mul(x, r.elt_count, x.size_of(r.ofm_dtype)) > cfg.output_sram))),
    Rule("A apart from the results", Status.ADDRESS_RANGE,
         "with A_FROM_OUTPUT, operand A's bytes and the results' bytes do not overlap",
         ("ELT_MODE", "ELT_A_ADDR", "ELT_OUT_ADDR", "ELT_COUNT", "ELT_A_DTYPE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(
             x.flag(r.elt_mode, EltMode.A_FROM_OUTPUT), r.elt_count != 0,
             r.elt_a_addr < r.elt_out_addr + _mul(x, r.elt_count, x.size_of(r.ofm_dtype)),
             r.elt_out_addr < r.elt_a_addr + _mul(x, _operand_count(x, r, EltMode.A_SCALAR),
                                                  x.size_of(r.elt_a_dtype)))),
    Rule("B apart from the results", Status.ADDRESS_RANGE,
         "with B_FROM_OUTPUT, a binary operation's operand B and the results do not overlap",
         ("sub", "ELT_MODE", "ELT_B_ADDR", "ELT_OUT_ADDR", "ELT_COUNT", "ELT_B_DTYPE", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(
             _binary(x, sub), x.flag(r.elt_mode, EltMode.B_FROM_OUTPUT), r.elt_count != 0,
             r.elt_b_addr < r.elt_out_addr + _mul(x, r.elt_count, x.size_of(r.ofm_dtype)),
             r.elt_out_addr < r.elt_b_addr + _mul(x, _operand_count(x, r, EltMode.B_SCALAR),
                                                  x.size_of(r.elt_b_dtype)))),
)


# ---- POOL (docs/isa.md, "The POOL command") ----
def _real_taps(x, pad, kernel, stride, n_out, n_in):
    """Every window along one axis holds a real position: the first reaches position 0, the last
    starts before the end (windows move monotonically, so the rest follow)."""
    return x.all(n_in != 0, kernel > pad, x.low32(n_out - 1) * stride < n_in + pad)


POOL_RULES: tuple[Rule, ...] = (
    Rule("mode", Status.BAD_MODE, "the mode is a PoolMode (MAX, AVG, SUM, MIN)", ("sub",),
         lambda x, r, sub, cfg: x.not_(x.one_of(sub, *PoolMode))),
    Rule("input type", Status.BAD_MODE, "IFM_DTYPE is INT8, INT16 or INT32", ("IFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ifm_dtype, DType.INT8, DType.INT16, DType.INT32))),
    Rule("output type", Status.BAD_MODE, "OFM_DTYPE is INT8, INT16, INT32 or INT48", ("OFM_DTYPE",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ofm_dtype, *ELEMENT_TYPES))),
    Rule("average", Status.BAD_MODE,
         "AVG takes int8 or int16 to int8 or int16, without an output-stage RESCALE",
         ("sub", "IFM_DTYPE", "OFM_DTYPE", "OUT_MODE"),
         lambda x, r, sub, cfg: x.all(sub == PoolMode.AVG, x.any(
             r.ifm_dtype == DType.INT32, x.not_(x.one_of(r.ofm_dtype, DType.INT8, DType.INT16)),
             x.flag(r.out_mode, _RESCALE)))),
    Rule("window", Status.BAD_MODE, "KERNEL_H, KERNEL_W, STRIDE_H and STRIDE_W are at least 1",
         ("KERNEL_H", "KERNEL_W", "STRIDE_H", "STRIDE_W"),
         lambda x, r, sub, cfg: x.any(r.kernel_h == 0, r.kernel_w == 0, r.stride_h == 0, r.stride_w == 0)),
    Rule("input SRAM", Status.BAD_MODE,
         "IFM_SRAM is INPUT or OUTPUT (an earlier command's result read where it was written)", ("IFM_SRAM",),
         lambda x, r, sub, cfg: x.not_(x.one_of(r.ifm_sram, Sram.INPUT, Sram.OUTPUT))),
    Rule("input range", Status.ADDRESS_RANGE,
         "the input box (POOL_IN_H x POOL_IN_W x OFM_C elements) lies inside the input SRAM (the output SRAM "
         "with IFM_SRAM OUTPUT) at multiples of the element size",
         ("IFM_ADDR", "IFM_ROW_STRIDE", "IFM_PIX_STRIDE", "POOL_IN_H", "POOL_IN_W", "OFM_C", "IFM_SRAM"),
         lambda x, r, sub, cfg: x.all(r.pool_in_h != 0, r.pool_in_w != 0, r.ofm_c != 0, x.any(
             x.not_(_box_aligned(x, r.ifm_addr, x.size_of(r.ifm_dtype), r.pool_in_h, r.ifm_row_stride,
                                 r.pool_in_w, r.ifm_pix_stride)),
             _box_end(x, r.ifm_addr, x.size_of(r.ifm_dtype), r.pool_in_h, r.ifm_row_stride, r.pool_in_w,
                      r.ifm_pix_stride, r.ofm_c) > x.mux(r.ifm_sram == Sram.OUTPUT, cfg.output_sram,
                                                          cfg.input_sram)))),
    Rule("real taps", Status.BAD_MODE, "every window holds at least one real (not padding) position",
         ("POOL_PAD_TOP", "POOL_PAD_LEFT", "POOL_IN_H", "POOL_IN_W", "KERNEL_H", "KERNEL_W", "OFM_H", "OFM_W"),
         lambda x, r, sub, cfg: x.all(r.ofm_h != 0, r.ofm_w != 0, x.not_(x.all(
             _real_taps(x, r.pool_pad_top, r.kernel_h, r.stride_h, r.ofm_h, r.pool_in_h),
             _real_taps(x, r.pool_pad_left, r.kernel_w, r.stride_w, r.ofm_w, r.pool_in_w))))),
    Rule("record range", Status.ADDRESS_RANGE,
         "with RESCALE, the records PARAM_ADDR .. + OFM_C lie inside the parameter SRAM", ("OUT_MODE", "PARAM_ADDR", "OFM_C"),
         lambda x, r, sub, cfg: x.all(x.flag(r.out_mode, _RESCALE),
                                      _mul(x, r.param_addr + r.ofm_c, PARAM_RECORD_BYTES) > param_bytes(cfg))),
    *output_stage_rules(),
    Rule("output range", Status.ADDRESS_RANGE,
         "the output box (OFM_H x OFM_W x OFM_C) lies inside the output SRAM at multiples of the element size",
         ("OFM_ADDR", "OFM_ROW_STRIDE", "OFM_PIX_STRIDE", "OFM_H", "OFM_W", "OFM_C", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(r.ofm_h != 0, r.ofm_w != 0, r.ofm_c != 0, x.any(
             x.not_(_box_aligned(x, r.ofm_addr, x.size_of(r.ofm_dtype), r.ofm_h, r.ofm_row_stride,
                                 r.ofm_w, r.ofm_pix_stride)),
             _box_end(x, r.ofm_addr, x.size_of(r.ofm_dtype), r.ofm_h, r.ofm_row_stride, r.ofm_w,
                      r.ofm_pix_stride, r.ofm_c) > cfg.output_sram))),
    Rule("input apart from the results", Status.ADDRESS_RANGE,
         "with IFM_SRAM OUTPUT, the input box's bytes and the output box's bytes do not overlap",
         ("IFM_SRAM", "IFM_ADDR", "IFM_ROW_STRIDE", "IFM_PIX_STRIDE", "POOL_IN_H", "POOL_IN_W", "IFM_DTYPE",
          "OFM_ADDR", "OFM_ROW_STRIDE", "OFM_PIX_STRIDE", "OFM_H", "OFM_W", "OFM_C", "OFM_DTYPE"),
         lambda x, r, sub, cfg: x.all(
             r.ifm_sram == Sram.OUTPUT, r.pool_in_h != 0, r.pool_in_w != 0, r.ofm_h != 0, r.ofm_w != 0,
             r.ofm_c != 0,
             r.ifm_addr < _box_end(x, r.ofm_addr, x.size_of(r.ofm_dtype), r.ofm_h, r.ofm_row_stride, r.ofm_w,
                                   r.ofm_pix_stride, r.ofm_c),
             r.ofm_addr < _box_end(x, r.ifm_addr, x.size_of(r.ifm_dtype), r.pool_in_h, r.ifm_row_stride,
                                   r.pool_in_w, r.ifm_pix_stride, r.ofm_c))),
)


TABLES = {"MAC": MAC_RULES, "ELTWISE": ELT_RULES, "POOL": POOL_RULES}


def markdown() -> str:
    """The rule tables as docs/isa.md shows them (`python -m firmware_model.arch.checks`)."""
    out = []
    for unit, rules in TABLES.items():
        out += [f"### {unit}", "", "| # | rule | status | requires |", "|---|---|---|---|"]
        out += [f"| {k + 1} | {r.name} | {r.status.name} | {r.text} |" for k, r in enumerate(rules)]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
