"""The LUT SRAM's tables across operations (compiler/npu/stage.LutTables): a table several
operations use is loaded once and kept; single-use tables go to the scratch areas, the other one
when the command before reads a table in the first."""

from __future__ import annotations

import numpy as np

from compiler.npu.base import CommandWriter, EmitContext
from compiler.npu.stage import LutTables, StageSpec
from firmware_model.arch.isa import LutMode, Opcode, Reg
from firmware_model.tosa_ops.dtypes import DType


def _stage(seed: int) -> StageSpec:
    st = StageSpec(value_dtype=DType.INT8)
    st.lut_mode = LutMode.INT8
    st.table = np.random.default_rng(seed).integers(-128, 128, 256).astype(np.int64)
    return st


def _ectx() -> EmitContext:
    return EmitContext(None, {}, {"lut": 0}, {}, 0, 0)


def _loads(w: CommandWriter) -> int:
    return sum(1 for c in w.commands if c.opcode == Opcode.DMA_LOAD)


def test_a_reused_table_is_loaded_once_and_kept_apart_from_the_scratch_areas():
    kept, once = _stage(1), _stage(2)
    luts = LutTables(4096, 8, LutTables.reused_tables([kept, kept, once]))
    assert luts.areas == (0, 520) and luts.scratch == 1040
    w = CommandWriter()
    first = luts.place(w, _ectx(), kept)
    assert first >= luts.scratch and _loads(w) == 1
    assert luts.place(w, _ectx(), kept) == first and _loads(w) == 1       # resident: no load
    assert luts.entry_of(kept) == first and luts.entry_of(once) is None
    assert luts.scratch_only(once) and not luts.scratch_only(kept)


def test_single_use_tables_switch_scratch_area_only_when_the_command_before_reads_it():
    luts = LutTables(4096, 8)
    w = CommandWriter()
    assert luts.place(w, _ectx(), _stage(3)) == 0
    assert luts.place(w, _ectx(), _stage(4)) == 0          # no command reads a table: the same area
    w.set(Reg.LUT_MODE, int(LutMode.INT8))
    w.set(Reg.LUT_ADDR, 0)
    assert luts.place(w, _ectx(), _stage(5)) == 520         # the command before reads area 0
    w.set(Reg.LUT_ADDR, 520)
    assert luts.place(w, _ectx(), _stage(6)) == 0
    assert _loads(w) == 4 and luts.entry_of(_stage(6)) is None


def test_a_small_lut_has_one_scratch_area():
    luts = LutTables(1024, 4)
    assert luts.areas == (0,)
    w = CommandWriter()
    w.set(Reg.LUT_MODE, int(LutMode.INT8))
    assert luts.place(w, _ectx(), _stage(7)) == 0
