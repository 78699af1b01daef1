"""NPU core: the command processor, the DMA engine, the SRAMs and the compute units of one
configuration, with a port to external memory.

    external memory --cmd--> command processor --registers--> MAC sequencer / ... (compute units)
                    <-ext--> DMA engine <--> input, weight, parameter, output, variable, LUT SRAMs

The host places the command stream, the constants and the inputs in external memory, sets
`prog_addr`/`prog_words` and pulses `start`; the core runs the invocation to END by itself and
raises `done` with `status` and `cycles`. `unit_event` pulses when a compute command finishes (the
bench's scoreboard looks at the output SRAM then); `host_req`/`host_op`/`host_ack` hand a HOST
command to the host. `ready` is low while the variable SRAM clears itself after reset.

The SRAMs are `amaranth.lib.memory` arrays named after the ISA's SRAM identifiers (`input_sram`,
`weight_sram`, `param_sram`, `output_sram`; the variable SRAM inside `variable_sram`), so a bench
can read them by their hierarchical names.
"""

from amaranth import Cat, DomainRenamer, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES, EltMode, Opcode, OutMode, Sram
from firmware_model.tosa_ops.dtypes import DType
from hw.clock_gate import add_gated_domain
from hw.command_processor import CommandProcessor
from hw.dma_engine import DmaEngine, ext_port_signature
from hw.layouts import COMMAND_WORD_LAYOUT, PARAM_RECORD_LAYOUT
from hw.lut_engine import lut_word_entries
from hw.eltwise_sequencer import EltwiseSequencer
from hw.mac_sequencer import MacSequencer
from hw.pool_sequencer import PoolSequencer
from hw.output_stage import REGISTER_MAP as OUTPUT_STAGE_MAP
from hw.output_stage import OutputStage
from hw.output_writer import OutputWriter
from hw.vector_output_stage import VectorOutputStage
from hw.vector_writer import VectorWriter
from hw.register_map import AmaranthOps, drive_map
from hw.variable_sram import VariableSram

# Faults a bench self-check can build into the core (docs/verification.md): name -> what breaks.
CORE_FAULTS = {
    "rescale_rounding": "the output stage's rescale truncates instead of rounding",
    "dma_address": "a DMA_LOAD into the input SRAM writes one word above where it should",
    "stall_at_end": "the command processor never finishes END (the watchdog must stop the run)",
}


def cmd_port_signature() -> wiring.Signature:
    """Command fetch: one 8-byte command per address (a word address), data the clock after."""
    return wiring.Signature({"addr": Out(32), "data": In(COMMAND_WORD_LAYOUT.size)})


class NpuCore(wiring.Component):
    def __init__(self, cfg: NpuConfig, fault=None):
        if fault is not None and fault not in CORE_FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(CORE_FAULTS)}")
        self.cfg = cfg
        self.fault = fault
        super().__init__({
            "start": In(1),
            "prog_addr": In(32),
            "prog_words": In(32),
            "ready": Out(1),
            "busy": Out(1),
            "done": Out(1),
            "status": Out(8),
            "cycles": Out(32),
            "mark": Out(32),
            "pc": Out(32),
            "unit_pc": Out(32),            # the running (or last) compute command's index
            "unit_event": Out(1),
            "host_req": Out(1),
            "host_op": Out(32),
            "host_ack": In(1),
            "cmd": Out(cmd_port_signature()),
            "ext": Out(ext_port_signature(cfg.ext_bandwidth)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W = cfg.word_bytes

        # Each compute unit and the DMA engine run in a clock domain of their own, gated off while
        # they are idle (hw/clock_gate.py): their results and timing are the same either way.
        m.submodules.cp = cp = CommandProcessor(cfg, fault=self.fault)
        m.submodules.dma = dma = DomainRenamer({"sync": "dma"})(DmaEngine(cfg, fault=self.fault))
        m.submodules.mac = mac = DomainRenamer({"sync": "mac"})(MacSequencer(cfg))
        m.submodules.variable_sram = var = VariableSram.for_config(cfg)
        # one output stage (rescale, clamp, LUT engine: it holds the LUT SRAM) and one writer, shared
        # by the compute units: one command runs at a time
        m.submodules.output_stage = ost = DomainRenamer({"sync": "out"})(OutputStage(
            cfg.lut_entries, fault=self.fault if self.fault == "rescale_rounding" else None,
            lut_word_entries=lut_word_entries(cfg)))
        m.submodules.output_writer = writer = DomainRenamer({"sync": "out"})(OutputWriter(W, cfg.output_words))
        # the MAC's vector output path: a pixel's lanes per clock (no table, no int48)
        m.submodules.vector_output_stage = vst = DomainRenamer({"sync": "out"})(VectorOutputStage(
            cfg.mac_rows, cfg.lut_entries, fault=self.fault if self.fault == "rescale_rounding" else None))
        m.submodules.vector_writer = vwriter = DomainRenamer({"sync": "out"})(
            VectorWriter(cfg.mac_rows, W, cfg.output_words))

        m.submodules.input_sram = input_sram = memory.Memory(shape=8 * W, depth=cfg.input_words, init=[])
        m.submodules.weight_sram = weight_sram = memory.Memory(shape=8 * W, depth=cfg.weight_words, init=[])
        m.submodules.param_sram = param_sram = memory.Memory(shape=PARAM_RECORD_LAYOUT.size,
                                                             depth=cfg.param_records, init=[])
        m.submodules.output_sram = output_sram = memory.Memory(shape=8 * W, depth=cfg.output_words, init=[])
        assert PARAM_RECORD_LAYOUT.size == 8 * PARAM_RECORD_BYTES

        # ---- the command processor: fetch, host hand-over, status ----
        m.d.comb += [
            self.cmd.addr.eq(cp.cmd_addr), cp.cmd_data.eq(self.cmd.data),
            cp.start.eq(self.start & self.ready), cp.prog_addr.eq(self.prog_addr), cp.prog_words.eq(self.prog_words),
            self.busy.eq(cp.busy), self.done.eq(cp.done), self.status.eq(cp.status),
            self.cycles.eq(cp.cycles), self.mark.eq(cp.mark), self.pc.eq(cp.pc), self.unit_pc.eq(cp.unit_pc),
            self.unit_event.eq(cp.unit_event),
            self.host_req.eq(cp.host_req), self.host_op.eq(cp.host_op), cp.host_ack.eq(self.host_ack),
            self.ready.eq(~var.clearing),
        ]

        # ---- the DMA engine between the external memory port and every SRAM ----
        wiring.connect(m, cp.dma, dma.push)
        m.d.comb += [cp.dma_idle.eq(dma.idle), cp.dma_outstanding.eq(dma.outstanding)]
        add_gated_domain(m, "dma", cp.dma.valid | ~dma.idle)
        wiring.connect(m, wiring.flipped(self.ext), dma.ext)
        for mem, port in ((input_sram, dma.input), (weight_sram, dma.weight), (param_sram, dma.param),
                          (output_sram, dma.output)):
            wr = mem.write_port(granularity=8)
            rd = mem.read_port()
            m.d.comb += [wr.addr.eq(port.waddr), wr.data.eq(port.wdata), wr.en.eq(port.wen),
                         rd.addr.eq(port.raddr), port.rdata.eq(rd.data)]
        # the variable SRAM: DMA beats become its requests (VAR transfers as slot accesses)
        # VAR MARK (the command processor, while the DMA engine is idle): a store of no byte at
        # address 0 of the slot sets its flag
        vp = dma.variable
        mark = cp.var_mark
        m.d.comb += [
            var.req.valid.eq((vp.wen != 0) | vp.ren | mark),
            var.req.payload.write.eq((vp.wen != 0) | mark),
            var.req.payload.addr.eq(Mux(mark, 0, Mux(vp.wen != 0, vp.waddr, vp.raddr) << (W.bit_length() - 1))),
            var.req.payload.data.eq(vp.wdata),
            var.req.payload.en.eq(Mux(mark, 0, vp.wen)),
            var.req.payload.raw.eq(~vp.var & ~mark),
            var.req.payload.slot.eq(Mux(mark, cp.regs.var_slot, vp.slot)),
            var.rsp.ready.eq(1),
            vp.rdata.eq(var.rsp.payload.data.as_value()),
            var.invocation_start.eq(self.start & self.ready),
            cp.var_written.eq(var.written),
        ]

        # ---- compute units: started by the command processor, one at a time ----
        m.submodules.eltwise = elt = DomainRenamer({"sync": "eltwise"})(EltwiseSequencer(cfg))
        m.submodules.pool = pool = DomainRenamer({"sync": "pool"})(PoolSequencer(cfg))
        regs = cp.regs
        active = Signal(8)             # the opcode of the running (or last) compute command
        with m.If(cp.unit_start):
            m.d.sync += active.eq(cp.unit_op)
        units = ((Opcode.MAC, mac), (Opcode.ELTWISE, elt), (Opcode.POOL, pool))
        unit_enables = []
        for op, unit in units:
            m.d.comb += [unit.regs.eq(regs), unit.start.eq(cp.unit_start & (cp.unit_op == op))]
            # a unit changes state from its start to its done (the clock it leaves DONE) only
            running = Signal(name=f"{op.name.lower()}_running")
            with m.If(unit.start):
                m.d.sync += running.eq(1)
            with m.Elif(unit.done):
                m.d.sync += running.eq(0)
            add_gated_domain(m, op.name.lower(), unit.start | running)
            unit_enables.append(unit.start | running)
        m.d.comb += [mac.mode.eq(cp.unit_sub), elt.sub.eq(cp.unit_sub), pool.sub.eq(cp.unit_sub)]
        m.d.comb += [mac.next_mac.eq(cp.next_mac & (active == Opcode.MAC)), mac.next_wgt_addr.eq(cp.next_wgt_addr),
                     mac.next_param_addr.eq(cp.next_param_addr), mac.next_wgt_zp.eq(cp.next_wgt_zp),
                     mac.next_ifm_dtype.eq(cp.next_ifm_dtype)]
        # the running unit's done only: the command processor decodes on while a unit runs, and
        # in Icarus an idle unit's combinational outputs may still be unknown (never evaluated)
        m.d.comb += [cp.unit_done.eq(((active == Opcode.MAC) & mac.done) | ((active == Opcode.ELTWISE) & elt.done)
                                     | ((active == Opcode.POOL) & pool.done)),
                     cp.unit_status.eq(Mux(active == Opcode.MAC, mac.status,
                                           Mux(active == Opcode.ELTWISE, elt.status, pool.status)))]

        # the SRAMs' compute ports, to the running unit
        in_rd = input_sram.read_port()
        # the MAC's second and third input ports: DEPTHWISE_PAIRED reads two kernel rows' words a
        # clock, DEPTHWISE_TRIPLE three
        in_rd2 = input_sram.read_port()
        in_rd3 = input_sram.read_port()
        m.d.comb += [in_rd2.addr.eq(mac.ifm_addr2), in_rd3.addr.eq(mac.ifm_addr3)]
        w_rd = weight_sram.read_port()
        p_rd = param_sram.read_port()
        o_wr = output_sram.write_port(granularity=8)
        # ELTWISE's A with A_FROM_OUTPUT: an earlier command's result read where it was written
        # (the ISA's "A apart from the results" rule keeps these reads off the bytes it writes)
        # The same port serves the MAC's input words and the POOL's input box with IFM_SRAM OUTPUT
        # (the units never run at once; "input apart from the results" keeps the reads off the
        # bytes the command writes).
        a_rd = output_sram.read_port()
        a_from_output = Signal()
        b_from_output = Signal()
        ifm_from_output = Signal()
        m.d.comb += [a_from_output.eq((regs.elt_mode & EltMode.A_FROM_OUTPUT) != 0),
                     b_from_output.eq((regs.elt_mode & EltMode.B_FROM_OUTPUT) != 0),
                     ifm_from_output.eq(regs.ifm_sram == Sram.OUTPUT)]
        # ... and, in the window modes, the words of the MAC's second and third ports likewise;
        # the second also serves ELTWISE's B with B_FROM_OUTPUT ("B apart from the results")
        a_rd2 = output_sram.read_port()
        a_rd3 = output_sram.read_port()
        m.d.comb += [a_rd2.addr.eq(Mux(active == Opcode.ELTWISE, elt.b_addr, mac.ifm_addr2)),
                     a_rd3.addr.eq(mac.ifm_addr3)]
        m.d.comb += [
            mac.ifm_data.eq(Mux(ifm_from_output, a_rd.data, in_rd.data)),
            mac.ifm_data2.eq(Mux(ifm_from_output, a_rd2.data, in_rd2.data)),
            mac.ifm_data3.eq(Mux(ifm_from_output, a_rd3.data, in_rd3.data)),
            elt.a_data.eq(Mux(a_from_output, a_rd.data, in_rd.data)),
            pool.i_data.eq(Mux(ifm_from_output, a_rd.data, in_rd.data)),
            mac.wgt_data.eq(w_rd.data), elt.b_data.eq(Mux(b_from_output, a_rd2.data, w_rd.data)),
            mac.prm_data.eq(p_rd.data), elt.p_data.eq(p_rd.data), pool.p_data.eq(p_rd.data),
        ]
        with m.Switch(active):
            with m.Case(Opcode.ELTWISE):
                m.d.comb += [in_rd.addr.eq(elt.a_addr), w_rd.addr.eq(elt.b_addr), p_rd.addr.eq(elt.p_addr),
                             a_rd.addr.eq(elt.a_addr)]
            with m.Case(Opcode.POOL):
                m.d.comb += [in_rd.addr.eq(pool.i_addr), p_rd.addr.eq(pool.p_addr), a_rd.addr.eq(pool.i_addr)]
            with m.Default():
                m.d.comb += [in_rd.addr.eq(mac.ifm_addr), w_rd.addr.eq(mac.wgt_addr), p_rd.addr.eq(mac.prm_addr),
                             a_rd.addr.eq(mac.ifm_addr)]

        # ---- the output stage and the writer, to the running unit ----
        mac_cfg = Signal.like(ost.cfg)
        mac_esize = Signal(4)          # a MAC result's element bytes, for both writers
        m.d.comb += mac_esize.eq(AmaranthOps.size_of(regs.ofm_dtype))
        drive_map(m, OUTPUT_STAGE_MAP, mac_cfg, regs, cp.unit_sub)
        m.d.comb += mac_cfg.raw.eq((regs.ofm_dtype == DType.INT48) & ((regs.out_mode & OutMode.RESCALE) == 0))
        # The running unit's stage configuration and element size serve both output paths: the
        # scalar stage and writer, and the vector stage and writer (a unit's vector path runs
        # with the same registers; the POOL's out_cfg carries AVG's own scaling).
        stage_cfg = Signal.like(ost.cfg)
        stage_esize = Signal(4)
        with m.Switch(active):
            for op, unit in units:
                with m.Case(op):
                    m.d.comb += [ost.i.valid.eq(unit.out.valid), ost.i.payload.eq(unit.out.payload),
                                 unit.out.ready.eq(ost.i.ready), vst.i.eq(unit.vout)]
                    if op == Opcode.MAC:
                        m.d.comb += [stage_cfg.eq(mac_cfg), stage_esize.eq(mac_esize)]
                    else:
                        m.d.comb += [stage_cfg.eq(unit.out_cfg), stage_esize.eq(unit.esize)]
        wiring.connect(m, ost.o, writer.i)
        m.d.comb += [
            ost.cfg.eq(stage_cfg), writer.esize.eq(stage_esize),
            vst.i_valid.eq(mac.vout_valid | elt.vout_valid | pool.vout_valid), vst.cfg.eq(stage_cfg),
            vwriter.i_valid.eq(vst.o_valid), vwriter.i.eq(vst.o), vwriter.esize.eq(stage_esize),
        ]
        # one command at a time: at most one writer stores in a clock
        vector_writes = vwriter.sram.en.any()
        m.d.comb += [o_wr.addr.eq(Mux(vector_writes, vwriter.sram.addr, writer.sram.addr)),
                     o_wr.data.eq(Mux(vector_writes, vwriter.sram.data, writer.sram.data)),
                     o_wr.en.eq(vwriter.sram.en | writer.sram.en)]
        # a row-paired block's second pixel of a pair, in the same clocks (a word the first
        # pixel's port does not write: the pixels' bytes are apart)
        o_wr2 = output_sram.write_port(granularity=8)
        m.d.comb += [o_wr2.addr.eq(vwriter.sram2.addr), o_wr2.data.eq(vwriter.sram2.data),
                     o_wr2.en.eq(vwriter.sram2.en)]

        # the LUT SRAM: the DMA's word writes (mac.cols bytes) are the LUT engine's writes
        lp = dma.lut
        m.d.comb += [ost.w.valid.eq(lp.wen != 0), ost.w.payload.addr.eq(lp.waddr),
                     ost.w.payload.data.eq(lp.wdata), ost.w.payload.en.eq(lp.wen), lp.rdata.eq(0)]
        # the output stage and writer work for the running unit (drained by its done) and take
        # the DMA's LUT beats
        add_gated_domain(m, "out", Cat(*unit_enables).any() | ost.w.valid)
        return m
