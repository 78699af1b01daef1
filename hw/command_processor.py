"""Command processor: runs an invocation's command stream from external memory, START to END.

The host gives the stream's place (`prog_addr`, a byte address, and `prog_words`, its length in
64-bit commands) and pulses `start`. Per command (docs/isa.md, "Timing"; the golden model's
firmware_model.arch.cycle_model.Timeline is the same schedule):

    FETCH    the command word is read from external memory (the data arrives next clock)
    DECODE   SET, NOP, MARK act now; DMA_LOAD / DMA_STORE / FILL are checked and pushed into the
             DMA engine's queue (DECODE holds while the queue is full); MAC, ELTWISE and POOL wait
             until at most value32 (the command's DMA slack) descriptors are outstanding, BARRIER,
             VAR, HOST and END until the DMA engine is idle, then: a compute
             command starts its unit (WAIT_UNIT until it reports done), VAR is checked and its
             transfer runs on the DMA engine (WAIT_VAR), HOST hands over to the host (WAIT_HOST
             until `host_ack`; these clocks are not counted), END finishes.

While a compute command runs, the command processor goes on: from the clock after its start it
decodes SET, NOP and MARK commands one a clock (lookahead), and pushes the DMA commands flagged
DMA_AHEAD (the compiler's promise that they touch none of the running command's bytes); it holds
any other command in DECODE until the unit's done clock has passed (in that clock nothing
decodes). A SET during the run
writes the architectural registers, which the DMA descriptors and VAR read; the units read
`regs`, a second copy that SETs write only while no unit runs and that takes the architectural
values in the done clock, so a running command sees its registers as they were at its start.

`cycles` counts the clocks of the invocation (host hand-overs excluded); `unit_event` pulses in the
clock a compute unit reports done (the bench's scoreboard samples the tile there). Errors end the
invocation with their status (BAD_OPCODE, BAD_REGISTER, BAD_MODE, ADDRESS_RANGE,
VAR_READ_BEFORE_WRITE, COMMAND_OVERRUN); nothing is skipped silently.
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import DMA_QUEUE_DEPTH
from firmware_model.arch.isa import DMA_AHEAD, ELT_REGS, MAC_REGS, POOL_REGS, VAR_SLOTS, Opcode, Reg, Sram, Status, VarOp
from hw.clock_gate import add_gated_domain
from hw.dma_engine import DESCRIPTOR, SRAMS, DmaKind
from hw.layouts import COMMAND_WORD_LAYOUT
from hw.register_file import REGISTER_FILE

COMPUTE_OPCODES = (Opcode.MAC, Opcode.ELTWISE, Opcode.POOL)
# the registers the compute units read (the golden model's plans read the same)
UNIT_REGS = frozenset(MAC_REGS) | frozenset(ELT_REGS) | frozenset(POOL_REGS)


def sram_bytes(cfg: NpuConfig, sram: Sram) -> int:
    """An SRAM's size in bytes as the DMA addresses it (the golden model's Memories)."""
    from firmware_model.arch.isa import PARAM_RECORD_BYTES

    return {Sram.INPUT: cfg.input_sram, Sram.WEIGHT: cfg.weight_sram,
            Sram.PARAM: cfg.param_records * PARAM_RECORD_BYTES, Sram.OUTPUT: cfg.output_sram,
            Sram.VARIABLE: cfg.variable_sram, Sram.LUT: cfg.lut_sram}[sram]


class CommandProcessor(wiring.Component):
    def __init__(self, cfg: NpuConfig, fault: str | None = None):
        self.cfg = cfg
        self.fault = fault          # "stall_at_end": the core's self-check (hw/npu_core.CORE_FAULTS)
        super().__init__({
            "start": In(1),                # begin an invocation at command 0 (registers keep their values)
            "prog_addr": In(32),           # byte address of the command stream in external memory
            "prog_words": In(32),          # its length in commands
            "busy": Out(1),
            "done": Out(1),                # high from completion until the next start
            "status": Out(8),
            "cycles": Out(32),             # clocks of the invocation so far (host hand-overs excluded)
            "mark": Out(32),               # value of the last MARK command
            "pc": Out(32),                 # index of the command in DECODE (or the last one)
            "cmd_addr": Out(32),           # command fetch: external-memory word (8 bytes) address
            "cmd_data": In(COMMAND_WORD_LAYOUT),
            "regs": Out(REGISTER_FILE),
            "dma": Out(stream.Signature(DESCRIPTOR)),
            "dma_idle": In(1),
            "dma_outstanding": In(range(DMA_QUEUE_DEPTH + 2)),   # the DMA engine's queued + in-flight descriptors
            "unit_start": Out(1),          # one clock: start the compute unit of `unit_op`
            "unit_op": Out(8),
            "unit_sub": Out(8),
            "unit_pc": Out(32),            # index of the running (or last) compute command
            "unit_done": In(1),
            "unit_status": In(8),
            "unit_event": Out(1),          # a compute command finished this clock
            # a MAC command waits in DECODE for the running one's done, its DMA slack met: its
            # first weight block and records may be read now (the MAC sequencer's preload), with
            # its architectural WGT_ADDR, PARAM_ADDR, WGT_ZP and IFM_DTYPE (the array keeps a weight
            # less its zero point, and int16 mode shares a byte between two lanes)
            "next_mac": Out(1),
            "next_wgt_addr": Out(32),
            "next_param_addr": Out(32),
            "next_wgt_zp": Out(32),
            "next_ifm_dtype": Out(32),
            "var_written": In(VAR_SLOTS),  # the variable SRAM's slot flags
            "var_mark": Out(1),            # one clock: VAR MARK sets flag regs.var_slot
            "host_req": Out(1),            # a HOST command waits for the host
            "host_op": Out(32),
            "host_ack": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        pc = self.pc
        regs = Signal(REGISTER_FILE)   # the architectural registers (SETs write them at once)
        word = self.cmd_data
        opcode, sub, value = word.opcode, word.sub, word.value
        counting = Signal()
        # a compute command runs: from its start clock to its done clock (lookahead meanwhile)
        running = Signal()
        done_now = Signal()            # the running command's done clock: nothing decodes
        m.d.comb += done_now.eq(running & self.unit_done)
        unit_sub = Signal(8)

        # A command that completes in its DECODE clock (SET, NOP, MARK, a DMA push, BARRIER, a
        # VAR without transfer) fetches the next one in that clock (`chain`): the next DECODE
        # follows at once, one clock per command. After the others, FETCH runs first.
        chain = Signal()
        m.d.comb += [self.cmd_addr.eq((self.prog_addr >> 3) + pc + chain), self.unit_op.eq(opcode),
                     self.unit_sub.eq(Mux(self.unit_start, sub, unit_sub)), self.host_op.eq(value)]
        with m.If(counting):
            m.d.sync += self.cycles.eq(self.cycles + 1)

        def finish(status):
            m.d.sync += [self.status.eq(status), self.busy.eq(0), self.done.eq(1)]
            m.next = "IDLE"

        # ---- DMA commands: the descriptor, and the checks the golden model makes ----
        d = self.dma.payload
        kind = Signal(2)
        with m.Switch(opcode):
            with m.Case(Opcode.DMA_LOAD):
                m.d.comb += kind.eq(DmaKind.LOAD)
            with m.Case(Opcode.DMA_STORE):
                m.d.comb += kind.eq(DmaKind.STORE)
            with m.Default():
                m.d.comb += kind.eq(DmaKind.FILL)
        m.d.comb += [
            d.kind.eq(kind), d.sram.eq(sub), d.value.eq(value), d.var.eq(0), d.slot.eq(0),
            d.ext_addr.eq(regs.dma_ext_addr), d.sram_addr.eq(regs.dma_sram_addr),
            d.len0.eq(regs.dma_len0), d.len1.eq(regs.dma_len1), d.len2.eq(regs.dma_len2),
            d.ext_stride1.eq(regs.dma_ext_stride1), d.ext_stride2.eq(regs.dma_ext_stride2),
            d.sram_stride1.eq(regs.dma_sram_stride1), d.sram_stride2.eq(regs.dma_sram_stride2),
        ]

        def span_end(base, stride1, stride2):
            """One past the last byte a pattern touches; the products saturate above 2^33 (every
            memory is smaller), which keeps the sum within 64 bits."""
            def run_offset(n, stride):
                product = Mux(n == 0, 0, n - 1)[:32] * stride
                return Mux(product > (1 << 33), 1 << 33, product)[:34]
            return base + run_offset(regs.dma_len2, stride2) + run_offset(regs.dma_len1, stride1) + regs.dma_len0

        empty = Signal()
        m.d.comb += empty.eq((regs.dma_len0 == 0) | (regs.dma_len1 == 0) | (regs.dma_len2 == 0))
        sram_size = Signal(32)
        with m.Switch(sub):
            for s in SRAMS:
                with m.Case(s):
                    m.d.comb += sram_size.eq(sram_bytes(cfg, s))
            with m.Default():
                m.d.comb += sram_size.eq(0)
        ext_end = Signal(unsigned(37), name="dma_ext_end")
        sram_end = Signal(unsigned(37), name="dma_sram_end")
        m.d.comb += [ext_end.eq(span_end(regs.dma_ext_addr, regs.dma_ext_stride1, regs.dma_ext_stride2)),
                     sram_end.eq(span_end(regs.dma_sram_addr, regs.dma_sram_stride1, regs.dma_sram_stride2))]
        bad_sram = Signal()
        m.d.comb += bad_sram.eq((sub > max(SRAMS)) | ((opcode == Opcode.DMA_STORE) & (sub == Sram.LUT)))
        out_of_range = Signal()
        m.d.comb += out_of_range.eq(~empty & (((opcode != Opcode.FILL) & (ext_end > cfg.ext_size))
                                              | (sram_end > sram_size)))

        ahead_dma = Signal()               # a DMA command flagged DMA_AHEAD that passes its checks
        m.d.comb += ahead_dma.eq(opcode.matches(Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL)
                                 & ((word.imm & DMA_AHEAD) != 0) & ~bad_sram & ~out_of_range)

        # ---- VAR: the checks (var_unit.execute_var) and the transfer's descriptor ----
        vaddr, vbytes, vslot, vext = regs.var_addr, regs.var_bytes, regs.var_slot, regs.var_ext_addr
        lg_w = cfg.word_bytes.bit_length() - 1
        slot_written = Signal()
        m.d.comb += slot_written.eq(self.var_written.bit_select(vslot[:max(1, (VAR_SLOTS - 1).bit_length())], 1))
        var_bad_mode = Signal()
        var_bad_range = Signal()
        flags_only = Signal()            # CHECK and MARK: no transfer, VAR_SLOT only
        m.d.comb += flags_only.eq((sub == VarOp.CHECK) | (sub == VarOp.MARK))
        m.d.comb += [
            var_bad_mode.eq(sub > max(VarOp)),
            var_bad_range.eq((vslot >= VAR_SLOTS) | (flags_only == 0) & (
                (vaddr[:lg_w] != 0) | (vbytes == 0)
                | ((vaddr + vbytes) > cfg.variable_sram) | ((vext + vbytes) > cfg.ext_size))),
        ]
        var_d = Signal(DESCRIPTOR)
        m.d.comb += [
            var_d.kind.eq(Mux(sub == VarOp.READ, DmaKind.STORE, DmaKind.LOAD)),
            var_d.sram.eq(Sram.VARIABLE), var_d.var.eq(1), var_d.slot.eq(vslot),
            var_d.ext_addr.eq(vext), var_d.sram_addr.eq(vaddr), var_d.len0.eq(vbytes),
            var_d.len1.eq(1), var_d.len2.eq(1),
        ]
        push_var = Signal()

        # The register file: one 32-bit register each (a SET writes one; cheaper to simulate than a
        # write into one wide struct), seen by the units as the REGISTER_FILE struct. Its clock
        # ticks only for a SET (hw/clock_gate.py), so what is computed from the registers alone
        # (the units' configurations, the rules' products) is evaluated once per SET in simulation.
        #
        # The units' copy (`self.regs`, domain "view") follows every SET while no unit runs, and
        # takes all the architectural values at a done: its clock ticks for those only.
        write_register = Signal()
        known_register = Signal()
        m.d.comb += known_register.eq(sub.matches(*(int(r) for r in Reg)))
        add_gated_domain(m, "regs", write_register)
        add_gated_domain(m, "view", (write_register & ~running) | done_now)
        # (Only the registers a unit reads have a copy: the DMA and VAR registers are read by
        # the command processor alone, at decode, never during a run.)
        for reg in Reg:
            name = reg.name.lower()
            storage = Signal(32, name=f"reg_{name}")
            with m.If(write_register & (sub == reg)):
                m.d.regs += storage.eq(value)
            m.d.comb += getattr(regs, name).eq(storage)
            if reg not in UNIT_REGS:
                m.d.comb += getattr(self.regs, name).eq(storage)
                continue
            view = Signal(32, name=f"view_{name}")
            with m.If(done_now):
                m.d.view += view.eq(storage)
            with m.Elif(sub == reg):
                m.d.view += view.eq(value)
            m.d.comb += getattr(self.regs, name).eq(view)

        m.d.comb += [self.dma.valid.eq(0), self.unit_start.eq(0), self.unit_event.eq(0), counting.eq(self.busy),
                     self.var_mark.eq(0), self.next_mac.eq(0),
                     self.next_wgt_addr.eq(regs.wgt_addr), self.next_param_addr.eq(regs.param_addr),
                     self.next_wgt_zp.eq(regs.wgt_zp), self.next_ifm_dtype.eq(regs.ifm_dtype)]
        def unit_finishes():
            """The running compute command's done clock, in FETCH or DECODE (the states the
            command processor can be in while a unit runs): the tile event, and its status."""
            with m.If(done_now):
                m.d.comb += self.unit_event.eq(1)
                m.d.sync += running.eq(0)
                with m.If(self.unit_status != Status.OK):
                    finish(self.unit_status)

        with m.FSM(name="cp"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [pc.eq(0), self.busy.eq(1), self.done.eq(0), self.cycles.eq(0),
                                 self.status.eq(Status.OK)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                with m.If(pc == self.prog_words):
                    with m.If(~running):
                        finish(Status.COMMAND_OVERRUN)
                with m.Else():
                    m.next = "DECODE"
                unit_finishes()
            with m.State("DECODE"):
                advance = Signal()
                m.d.comb += advance.eq(0)
                with m.If(advance):
                    m.d.sync += pc.eq(pc + 1)
                    # the last word of the program: FETCH reports the overrun as before
                    with m.If(pc + 1 == self.prog_words):
                        m.next = "FETCH"
                    with m.Else():
                        m.d.comb += chain.eq(1)
                lookahead = Signal()       # SET, NOP, MARK may decode (not in a done clock)
                # value32 is a compute command's DMA slack: the latest transfers it may leave running
                slack_met = Signal()
                m.d.comb += slack_met.eq(self.dma_outstanding <= value)
                with m.If(lookahead & (opcode == Opcode.SET) & known_register):
                    m.d.comb += [write_register.eq(1), advance.eq(1)]
                with m.Elif(lookahead & (opcode == Opcode.NOP)):
                    m.d.comb += advance.eq(1)
                with m.Elif(lookahead & (opcode == Opcode.MARK)):
                    m.d.sync += self.mark.eq(value)
                    m.d.comb += advance.eq(1)
                with m.Elif(lookahead & running & ahead_dma):
                    # a transfer flagged DMA_AHEAD pushes while the unit runs (one that fails its
                    # checks waits, and is refused after the done as any other)
                    m.d.comb += [self.dma.valid.eq(1), advance.eq(self.dma.ready)]
                with m.Elif(running):
                    # every other command waits for the unit's done; a MAC whose slack is met
                    # (the transfers outstanding only fall until it starts) lets the running
                    # MAC preload its first weight block (the rule "DMA slack" keeps those
                    # bytes still from here to its done)
                    m.d.comb += self.next_mac.eq((opcode == Opcode.MAC) & slack_met)
                with m.Else():
                    with m.Switch(opcode):
                        with m.Case(Opcode.SET):
                            finish(Status.BAD_REGISTER)
                        with m.Case(Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL):
                            with m.If(bad_sram):
                                finish(Status.BAD_MODE)
                            with m.Elif(out_of_range):
                                finish(Status.ADDRESS_RANGE)
                            with m.Else():
                                m.d.comb += [self.dma.valid.eq(1), advance.eq(self.dma.ready)]
                        with m.Case(*COMPUTE_OPCODES):
                            with m.If(slack_met):
                                m.d.comb += [self.unit_start.eq(1), advance.eq(1)]
                                m.d.sync += [running.eq(1), unit_sub.eq(sub), self.unit_pc.eq(pc)]
                        with m.Case(Opcode.BARRIER):
                            m.d.comb += advance.eq(self.dma_idle)
                        with m.Case(Opcode.END):
                            with m.If(self.dma_idle & (self.fault != "stall_at_end")):
                                finish(Status.OK)
                        with m.Case(Opcode.HOST):
                            with m.If(self.dma_idle):
                                m.d.sync += self.host_req.eq(1)
                                m.next = "WAIT_HOST"
                        with m.Case(Opcode.VAR):
                            with m.If(self.dma_idle):
                                with m.If(var_bad_mode):
                                    finish(Status.BAD_MODE)
                                with m.Elif(var_bad_range):
                                    finish(Status.ADDRESS_RANGE)
                                with m.Elif(((sub == VarOp.READ) | (sub == VarOp.CHECK)) & ~slot_written):
                                    finish(Status.VAR_READ_BEFORE_WRITE)
                                with m.Elif(sub == VarOp.CHECK):
                                    m.d.comb += advance.eq(1)
                                with m.Elif(sub == VarOp.MARK):
                                    # one store with no byte enabled sets the flag (the variable SRAM
                                    # takes a request every clock the DMA engine leaves it, as now)
                                    m.d.comb += [self.var_mark.eq(1), advance.eq(1)]
                                with m.Elif((sub == VarOp.INIT) & slot_written):
                                    m.d.comb += advance.eq(1)         # written before: nothing moves
                                with m.Else():
                                    m.d.comb += push_var.eq(1)
                                    m.next = "WAIT_VAR"
                        with m.Default():
                            finish(Status.BAD_OPCODE)
                m.d.comb += lookahead.eq(~done_now)
                unit_finishes()
            with m.State("WAIT_VAR"):
                with m.If(self.dma_idle):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("WAIT_HOST"):
                m.d.comb += counting.eq(0)
                with m.If(self.host_ack):
                    m.d.sync += [self.host_req.eq(0), pc.eq(pc + 1)]
                    m.next = "FETCH"
        # The VAR transfer uses the DMA push port in the clock DECODE decides it (the queue is
        # empty then: DECODE waited for an idle engine).
        with m.If(push_var):
            m.d.comb += [self.dma.valid.eq(1), self.dma.payload.eq(var_d)]
        return m
