"""NPU core: command memory, command processor, SRAMs and the MAC datapath of one configuration.

The SRAMs are plain `amaranth.lib.memory` arrays named after the ISA's SRAM identifiers
(`input_sram`, `weight_sram`, `param_sram`, `output_sram`, `cmd_mem`), so a bench can load and
read them directly. In this RTL the bench plays the DMA: it loads a tile's operands into the SRAMs,
writes the tile's commands, pulses `start` and waits for `done`.
"""

from amaranth import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import NpuConfig
from hw.command_processor import CommandProcessor
from hw.layouts import COMMAND_WORD_LAYOUT, PARAM_RECORD_LAYOUT
from hw.mac_sequencer import MacSequencer

# Faults a bench self-check can build into the core (see docs/verification.md).
CORE_FAULTS = ("rescale_rounding",)


class NpuCore(wiring.Component):
    def __init__(self, cfg: NpuConfig, fault=None):
        if fault is not None and fault not in CORE_FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(CORE_FAULTS)}")
        self.cfg = cfg
        self.fault = fault
        super().__init__({
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "status": Out(8),
            "cycles": Out(32),
            "mark": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        L = cfg.mac_cols

        m.submodules.cmd_mem = cmd_mem = memory.Memory(shape=COMMAND_WORD_LAYOUT.size, depth=cfg.cmd_depth, init=[])
        m.submodules.input_sram = input_sram = memory.Memory(shape=8 * L, depth=cfg.input_words, init=[])
        m.submodules.weight_sram = weight_sram = memory.Memory(shape=8 * L, depth=cfg.weight_words, init=[])
        m.submodules.param_sram = param_sram = memory.Memory(shape=PARAM_RECORD_LAYOUT.size, depth=cfg.param_records, init=[])
        m.submodules.output_sram = output_sram = memory.Memory(shape=8 * L, depth=cfg.output_words, init=[])

        m.submodules.cp = cp = CommandProcessor(cfg.cmd_depth)
        m.submodules.mac = mac = MacSequencer(cfg, fault=self.fault)

        cmd_rd = cmd_mem.read_port()
        in_rd = input_sram.read_port()
        w_rd = weight_sram.read_port()
        p_rd = param_sram.read_port()
        o_wr = output_sram.write_port(granularity=8)

        m.d.comb += [
            cmd_rd.addr.eq(cp.cmd_addr), cp.cmd_data.eq(cmd_rd.data),
            cp.start.eq(self.start),
            self.busy.eq(cp.busy), self.done.eq(cp.done), self.status.eq(cp.status),
            self.cycles.eq(cp.cycles), self.mark.eq(cp.mark),
            mac.regs.eq(cp.regs), mac.start.eq(cp.mac_start), mac.mode.eq(cp.mac_mode),
            cp.mac_done.eq(mac.done), cp.mac_status.eq(mac.status),
            in_rd.addr.eq(mac.ifm_addr), mac.ifm_data.eq(in_rd.data),
            w_rd.addr.eq(mac.wgt_addr), mac.wgt_data.eq(w_rd.data),
            p_rd.addr.eq(mac.prm_addr), mac.prm_data.eq(p_rd.data),
            o_wr.addr.eq(mac.ofm_addr), o_wr.data.eq(mac.ofm_data), o_wr.en.eq(mac.ofm_en),
        ]
        return m
