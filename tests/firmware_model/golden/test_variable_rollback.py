"""The invocation's rollback of the variables (GoldenModel.invoke) is skipped only for a program
that cannot change them (GoldenModel._variables_kept): a DMA_LOAD or FILL of the variable SRAM
counts as a change, and its fault is still rolled back; a program without such commands leaves
the variable SRAM as it found it, fault or not."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Command, Opcode, Reg, Sram
from firmware_model.arch.program import Program
from firmware_model.errors import GoldenModelError
from firmware_model.golden.model import GoldenModel

CFG = load_config("tiny")


def _program(opcode: Opcode, sram: Sram) -> Program:
    """Sixteen bytes moved into (or filled in) `sram`, then HOST without a host CPU (a fault)."""
    sets = {Reg.DMA_EXT_ADDR: 0, Reg.DMA_SRAM_ADDR: 32, Reg.DMA_LEN0: 16, Reg.DMA_LEN1: 1, Reg.DMA_LEN2: 1,
            Reg.DMA_EXT_STRIDE1: 16, Reg.DMA_EXT_STRIDE2: 16, Reg.DMA_SRAM_STRIDE1: 16, Reg.DMA_SRAM_STRIDE2: 16}
    cmds = [Command(Opcode.SET, int(r), 0, v) for r, v in sets.items()]
    cmds += [Command(opcode, int(sram), 0, 0x5A), Command(Opcode.HOST, 0, 0, 0), Command(Opcode.END)]
    manifest = {"memory": {"constants": {"addr": 0}}, "graph": {"inputs": [], "outputs": []}}
    return Program(cmds, bytes(range(1, 65)), manifest)


@pytest.mark.parametrize("opcode", [Opcode.DMA_LOAD, Opcode.FILL])
@pytest.mark.parametrize("sram", [Sram.VARIABLE, Sram.INPUT])
@pytest.mark.parametrize("fast", [True, False])
def test_rollback(opcode, sram, fast):
    model = GoldenModel(_program(opcode, sram), CFG)
    model.fast = fast
    assert model._variables_kept() == (sram != Sram.VARIABLE)
    before = model.mem.sram[Sram.VARIABLE].copy()
    with pytest.raises(GoldenModelError):
        model.invoke({})
    assert np.array_equal(model.mem.sram[Sram.VARIABLE], before)
    left = model.fault_variables[0]
    assert (not np.array_equal(left, before)) == (sram == Sram.VARIABLE)       # what the hardware left
    if sram != Sram.VARIABLE:
        assert not np.array_equal(model.mem.sram[sram], 0)


def test_program_changed_in_place():
    """A program that wrote no variable, then changed in place to FILL the variable SRAM before its
    fault: the next invocation notices (its plans are made again) and rolls the fill back."""
    program = _program(Opcode.FILL, Sram.INPUT)
    model = GoldenModel(program, CFG)
    with pytest.raises(GoldenModelError):
        model.invoke({})
    assert model._variables_kept()
    program.commands[-3] = Command(Opcode.FILL, int(Sram.VARIABLE), 0, 0x5A)
    before = model.mem.sram[Sram.VARIABLE].copy()
    with pytest.raises(GoldenModelError):
        model.invoke({})
    assert not model._variables_kept()
    assert np.array_equal(model.mem.sram[Sram.VARIABLE], before)
    assert not np.array_equal(model.fault_variables[0], before)
