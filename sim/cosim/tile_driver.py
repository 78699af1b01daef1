"""Driving one tile on the NPU core RTL from a cocotb test (runs inside the simulator).

The bench plays the DMA: it writes the tile's operands straight into the SRAM arrays, writes the
tile's commands into the command memory, pulses `start` and then waits once for `done` — no
Python runs per clock while the RTL computes. Then it reads the output region back.

SRAM contents are exchanged as whole words: a byte range [a, b) covers words a//W .. (b-1)//W, and
those words are written from (or compared against) the golden model's image of the same SRAM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge, with_timeout

from firmware_model.arch.isa import MAC_REGS, Command, Opcode, Sram
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.arch.cycle_model import COMMAND_OVERHEAD
from sim.rtl.build import CLOCK_PERIOD_NS

def sram_geometry(cfg: NpuConfig) -> dict[Sram, tuple[str, int]]:
    """RTL array name and word width (bytes) of each SRAM the bench loads or reads."""
    return {
        Sram.INPUT: ("input_sram", cfg.word_bytes),
        Sram.WEIGHT: ("weight_sram", cfg.word_bytes),
        Sram.PARAM: ("param_sram", PARAM_RECORD_BYTES),
        Sram.OUTPUT: ("output_sram", cfg.word_bytes),
    }


# The commands this RTL executes; the bench re-sends the registers a tile's MAC reads.
RTL_OPCODES = (Opcode.NOP, Opcode.SET, Opcode.MAC, Opcode.MARK, Opcode.BARRIER, Opcode.END)


@dataclass
class TileRun:
    status: int
    cycles: int              # the core's own cycle counter for the tile's command slice
    output: np.ndarray       # bytes of the requested output range, as the RTL left them
    start_ns: float          # simulation time window of the run (for the waveform)
    end_ns: float


def tile_commands(regs: dict[int, int], mode: int, tile_id: int) -> list[Command]:
    """MARK, every register the MAC reads (as golden had them), the MAC, END."""
    cmds = [Command(Opcode.MARK, 0, 0, tile_id & 0xFFFFFFFF)]
    cmds += [Command(Opcode.SET, int(r), 0, regs.get(int(r), 0) & 0xFFFFFFFF) for r in MAC_REGS]
    cmds += [Command(Opcode.MAC, mode), Command(Opcode.END)]
    return cmds


def expected_tile_cycles(n_commands: int, mac_cycles: int) -> int:
    """What the core's counter must read for a slice of n commands containing one MAC."""
    return n_commands * COMMAND_OVERHEAD + mac_cycles


class RtlTileDriver:
    def __init__(self, dut, cfg: NpuConfig):
        self.dut = dut
        self.cfg = cfg
        self.geometry = sram_geometry(cfg)
        self.words_loaded = 0

    async def start_clock(self) -> None:
        Clock(self.dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        self.dut.start.value = 0
        self.dut.rst.value = 1
        await RisingEdge(self.dut.clk)
        await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    def _array(self, sram: Sram):
        name, width = self.geometry[sram]
        return getattr(self.dut, name), width

    def load(self, sram: Sram, image: np.ndarray, start: int, stop: int) -> None:
        """Write the words covering bytes [start, stop) of `image` (the golden SRAM) into the RTL."""
        if stop <= start:
            return
        arr, width = self._array(sram)
        w0, w1 = start // width, (stop - 1) // width + 1
        block = image[w0 * width:w1 * width].reshape(-1, width)
        for i, word in enumerate(block):
            arr[w0 + i].value = int.from_bytes(word.tobytes(), "little")
        self.words_loaded += w1 - w0

    def read(self, sram: Sram, start: int, stop: int) -> np.ndarray:
        """Bytes [start, stop) of an RTL SRAM."""
        arr, width = self._array(sram)
        w0, w1 = start // width, (stop - 1) // width + 1
        raw = b"".join(int(arr[w].value).to_bytes(width, "little") for w in range(w0, w1))
        buf = np.frombuffer(raw, dtype=np.uint8)
        return buf[start - w0 * width:stop - w0 * width].copy()

    def write_commands(self, cmds: list[Command]) -> None:
        if len(cmds) > self.cfg.cmd_depth:
            raise ValueError(f"{len(cmds)} commands do not fit the {self.cfg.cmd_depth}-word command memory")
        for i, c in enumerate(cmds):
            if c.opcode not in RTL_OPCODES:
                raise ValueError(f"{c.opcode.name} is not executed by this RTL")
            self.dut.cmd_mem[i].value = c.encode()

    async def run(self, timeout_cycles: int) -> tuple[int, int, float, float]:
        """Pulse start, wait for done (at most timeout_cycles clocks): (status, cycles, t0, t1)."""
        from cocotb.utils import get_sim_time

        await RisingEdge(self.dut.clk)
        t0 = get_sim_time("ns")
        self.dut.start.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.start.value = 0
        await with_timeout(RisingEdge(self.dut.done), timeout_cycles * CLOCK_PERIOD_NS, "ns")
        await ReadOnly()
        status, cycles = int(self.dut.status.value), int(self.dut.cycles.value)
        t1 = get_sim_time("ns")
        await RisingEdge(self.dut.clk)
        return status, cycles, t0, t1

    async def run_tile(self, regs: dict[int, int], mode: int, tile_id: int,
                       images: dict[Sram, tuple[np.ndarray, tuple[int, int]]],
                       output_before: np.ndarray, output_range: tuple[int, int],
                       timeout_cycles: int) -> TileRun:
        """Load operands (golden images and ranges), run one MAC tile, read its output range."""
        for sram, (image, (a, b)) in images.items():
            self.load(sram, image, a, b)
        a, b = output_range
        self.load(Sram.OUTPUT, output_before, a, b)
        self.write_commands(tile_commands(regs, mode, tile_id))
        status, cycles, t0, t1 = await self.run(timeout_cycles)
        # read back whatever the status: a command that faults must not have written its range
        return TileRun(status, cycles, self.read(Sram.OUTPUT, a, b), t0, t1)

