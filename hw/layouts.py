"""Amaranth layouts of the ISA's packed records, built from their field tables.

`firmware_model.arch.fields.FieldTable` is the one description of a record's bits; this module
turns it into a `data.StructLayout` (fields from bit 0 up, in the table's order, with its widths
and signedness), so the RTL reads a command word or a parameter record through the same fields
the compiler encodes and the golden model decodes — no bit slice is written by hand.
"""

from amaranth import signed, unsigned
from amaranth.lib import data

from firmware_model.arch.fields import FieldTable
from firmware_model.arch.isa import COMMAND_WORD, PARAM_RECORD


def struct_layout(table: FieldTable) -> data.StructLayout:
    return data.StructLayout({f.name: (signed if f.signed else unsigned)(f.width) for f in table.fields})


COMMAND_WORD_LAYOUT = struct_layout(COMMAND_WORD)
PARAM_RECORD_LAYOUT = struct_layout(PARAM_RECORD)
