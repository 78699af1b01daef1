"""The command processor's parameter registers, as one Amaranth struct generated from the ISA.

Every register of `firmware_model.arch.isa.Reg` is a 32-bit field named after it in lower case
(`regs.ifm_addr`, `regs.out_mode`, ...); there is no second list of registers in the RTL.
"""

from amaranth import unsigned
from amaranth.lib import data

from firmware_model.arch.isa import Reg

REGISTER_FILE = data.StructLayout({reg.name.lower(): unsigned(32) for reg in Reg})
