"""Field tables (firmware_model/arch/fields.py): the one description of the command word and the
parameter record, and the Amaranth layouts the RTL derives from them."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.lib import data

from sim import seeds
from firmware_model.arch.fields import FieldTable
from firmware_model.arch.isa import (COMMAND_WORD, PARAM_RECORD, Command, Opcode, Reg, decode_param_records,
                                     encode_param_records, set_reg)
from firmware_model.tosa_ops.dtypes import DType
from hw.layouts import COMMAND_WORD_LAYOUT, PARAM_RECORD_LAYOUT, struct_layout


def test_parameter_records_round_trip():
    """encode and decode agree on every field's extremes (bias int48, multiplier int32, shift
    int8), record by record."""
    rng = seeds.rng(3)
    n = 500
    bias = rng.integers(DType.INT48.min, DType.INT48.max, n, endpoint=True)
    mult = rng.integers(-(1 << 31), 1 << 31, n)
    shift = rng.integers(-128, 128, n)
    bias[:4] = [DType.INT48.min, DType.INT48.max, 0, -1]
    mult[:2], shift[:2] = [-(1 << 31), (1 << 31) - 1], [-128, 127]
    records = np.frombuffer(encode_param_records(bias, mult, shift), dtype=np.uint8)
    assert len(records) == 11 * n
    got = decode_param_records(records)
    for name, want, have in zip(("bias", "multiplier", "shift"), (bias, mult, shift), got):
        assert have.dtype == np.int64 and np.array_equal(have, want), name


def test_parameter_record_bytes_are_little_endian_fields():
    """Byte k of a record is bits 8k..8k+7 of the RTL's parameter word: bias in bytes 0-5,
    multiplier in 6-9, shift in 10."""
    rec = np.frombuffer(encode_param_records([-2], [0x01020304], [-3]), dtype=np.uint8)
    assert list(rec) == [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x04, 0x03, 0x02, 0x01, 0xFD]
    word = int.from_bytes(rec.tobytes(), "little")
    assert PARAM_RECORD.unpack(word) == {"bias": -2, "multiplier": 0x01020304, "shift": -3}


def test_command_word_round_trip_and_range_checks():
    cmds = [Command(Opcode.MAC, 2), set_reg(Reg.IFM_ZP, -5), Command(Opcode.MARK, 0, 0xBEEF, 0xFFFFFFFF),
            Command(Opcode.END)]
    for c in cmds:
        word = c.encode()
        assert Command.decode(word) == c
        assert COMMAND_WORD.unpack(word)["opcode"] == c.opcode
    assert set_reg(Reg.IFM_ZP, -5).encode() & 0xFFFFFFFF == 0xFFFFFFFB
    with pytest.raises(ValueError, match="sub = 256"):
        COMMAND_WORD.pack(sub=256)


def test_rtl_layouts_follow_the_tables():
    """hw.layouts builds the Amaranth struct from the table: same order, widths, signedness,
    offsets, so the RTL's field slices are the encoder's."""
    for table, layout in ((PARAM_RECORD, PARAM_RECORD_LAYOUT), (COMMAND_WORD, COMMAND_WORD_LAYOUT)):
        assert layout.size == table.width
        for f in table.fields:
            fld = layout[f.name]
            assert fld.offset == f.offset and fld.width == f.width and fld.shape.signed == f.signed, f.name
    assert isinstance(struct_layout(FieldTable("t", [("a", 3, False)])), data.StructLayout)


def test_unaligned_fields_refuse_byte_coding():
    table = FieldTable("odd", [("a", 3, False), ("b", 5, True)])
    assert table.unpack(table.pack(a=5, b=-16)) == {"a": 5, "b": -16}
    with pytest.raises(ValueError, match="not byte-aligned"):
        table.decode(np.zeros(1, np.uint8))
