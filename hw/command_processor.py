"""Command processor: fetches 64-bit commands from the command memory in order, writes SET
values into the register file, starts the MAC sequencer for MAC commands and waits for it, and
reports completion (`done`, `status`, cycles) at END or at the first error.

Each command takes two clocks (fetch, decode) plus the time of the unit it starts. Commands this
RTL does not implement end the program with Status.BAD_OPCODE rather than being skipped, so a
program is never silently half-run.
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.isa import Opcode, Reg, Status
from hw.layouts import COMMAND_WORD_LAYOUT
from hw.register_file import REGISTER_FILE


class CommandProcessor(wiring.Component):
    def __init__(self, cmd_depth: int):
        self.cmd_depth = cmd_depth
        super().__init__({
            "start": In(1),            # begin at command 0 (registers keep their values)
            "busy": Out(1),
            "done": Out(1),            # high from completion until the next start
            "status": Out(8),
            "cycles": Out(32),         # clocks from start to completion
            "mark": Out(32),           # value of the last MARK command
            "pc": Out(range(cmd_depth + 1)),
            "cmd_addr": Out(range(cmd_depth)),
            "cmd_data": In(COMMAND_WORD_LAYOUT),
            "regs": Out(REGISTER_FILE),
            "mac_start": Out(1),
            "mac_mode": Out(8),
            "mac_done": In(1),
            "mac_status": In(8),
        })

    def elaborate(self, platform):
        m = Module()
        pc = self.pc
        word = self.cmd_data
        opcode, sub, value = word.opcode, word.sub, word.value

        m.d.comb += [self.cmd_addr.eq(pc), self.mac_start.eq(0), self.mac_mode.eq(sub)]
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)

        def finish(status):
            m.d.sync += [self.status.eq(status), self.busy.eq(0), self.done.eq(1)]
            m.next = "IDLE"

        with m.FSM(name="cp"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [pc.eq(0), self.busy.eq(1), self.done.eq(0), self.cycles.eq(0),
                                 self.status.eq(Status.OK)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                with m.If(pc == self.cmd_depth):
                    finish(Status.COMMAND_OVERRUN)
                with m.Else():
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += pc.eq(pc + 1)
                m.next = "FETCH"
                with m.Switch(opcode):
                    with m.Case(Opcode.NOP, Opcode.BARRIER):
                        pass
                    with m.Case(Opcode.SET):
                        with m.Switch(sub):
                            for reg in Reg:
                                with m.Case(reg):
                                    m.d.sync += getattr(self.regs, reg.name.lower()).eq(value)
                            with m.Default():
                                finish(Status.BAD_REGISTER)
                    with m.Case(Opcode.MARK):
                        m.d.sync += self.mark.eq(value)
                    with m.Case(Opcode.MAC):
                        # the MAC sequencer checks the mode with the rest of the command
                        m.d.comb += self.mac_start.eq(1)
                        m.next = "WAIT_MAC"
                    with m.Case(Opcode.END):
                        finish(Status.OK)
                    with m.Default():
                        finish(Status.BAD_OPCODE)
            with m.State("WAIT_MAC"):
                with m.If(self.mac_done):
                    with m.If(self.mac_status != Status.OK):
                        finish(self.mac_status)
                    with m.Else():
                        m.next = "FETCH"
        return m
