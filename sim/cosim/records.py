"""What crosses the simulator's process boundary: the job the bench runs, and what it found.

The parent process (sim/cosim/program_run.py) runs the program on the golden model first and
writes a `ProgramJob`: the external-memory image, each invocation's inputs, and the golden
model's expectation of every compute command (its done clock and the output bytes it leaves).
The cocotb bench (sim/cosim/core_bench.py) runs the program on the RTL and answers with a
`ProgramResult`. Both are pickled dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TileExpectation:
    """A compute command as the golden model ran it."""
    command_index: int
    tile_id: int
    opcode: str                     # "MAC", "ELTWISE", "POOL"
    end: int                        # clock it reports done (Timeline)
    output: tuple[int, int]         # output SRAM bytes [a, b) it wrote
    expected: np.ndarray            # those bytes, as golden left them
    regs: dict                      # the registers it ran with (for the report's coordinates)
    # the command processor's stall clocks so far in the invocation when this command ran (the
    # cycle model's: DMA queue full, DMA busy); a rise since the previous tile means it waited
    stall_before: int = 0


@dataclass
class InvocationJob:
    inputs: list[tuple[int, bytes]]             # (external address, bytes) the host writes first
    tiles: list[TileExpectation]
    status: int                                 # golden's completion code (Status)
    cycles: int | None                          # golden's NPU clocks (None when it faulted)
    outputs: list[tuple[str, int, int]]         # (name, external address, bytes) to read back
    variable_image: np.ndarray | None = None    # golden's variable SRAM after the invocation
    variable_flags: np.ndarray | None = None    # and its slot flags
    host_cycles: int = 0
    read_output_sram: tuple[int, int] | None = None   # output SRAM bytes to read back at the end
    # a faulting invocation: golden's variable SRAM and flags as the fault left them, before the
    # host driver's rollback (variable_image/flags are after it)
    fault_variable_image: np.ndarray | None = None
    fault_variable_flags: np.ndarray | None = None
    # variables kept in external memory: (home address, bytes) after the invocation, and as the
    # fault left them
    homes: list = field(default_factory=list)
    fault_homes: list | None = None


@dataclass
class ProgramJob:
    config: dict                                # NpuConfig.to_dict()
    image: list[tuple[int, bytes]]              # (external address, bytes): constants, commands
    prog_addr: int
    prog_words: int
    invocations: list[InvocationJob]
    host_ops: list = field(default_factory=list)   # manifest["host_ops"] (the bench plays the host)
    initial_variables: tuple | None = None      # (SRAM image, slot flags) to start from (a state file)
    stop_at_first_mismatch: bool = False
    watchdog_factor: int = 4                    # a run stops after factor x golden's clocks + slack
    watchdog_slack: int = 10000
    # per command: its disassembly and the tile (last MARK) and layer it belongs to, so that a
    # watchdog report says where the core stopped in the program's own terms
    command_labels: list[str] = field(default_factory=list)


@dataclass
class TileCheck:
    """One compute command on the RTL against golden."""
    command_index: int
    tile_id: int
    opcode: str
    rtl_end: int                    # the core's cycle counter when the unit reported done
    golden_end: int
    output: tuple[int, int]
    mismatch_offsets: list[int]     # byte offsets in `output` that differ (X/Z bits included)
    actual: np.ndarray
    expected: np.ndarray
    regs: dict
    sim_ns: tuple[float, float]     # simulation time from the previous tile's end to this one's
    found: bool = True              # False: the RTL's event did not come (or came for another command)
    unknown_offsets: list[int] = field(default_factory=list)   # bytes the RTL held as X or Z
    start_clock: int = 0            # the clock the previous tile ended (the start of the waveform window)

    @property
    def ok(self) -> bool:
        return self.found and not self.mismatch_offsets and self.rtl_end == self.golden_end


@dataclass
class InvocationResult:
    status: int
    cycles: int
    tiles: list[TileCheck]
    outputs: dict[str, np.ndarray]              # name -> bytes read back from external memory
    variable_image: np.ndarray | None
    variable_flags: np.ndarray | None
    sim_ns: tuple[float, float]
    wall_seconds: float
    note: str = ""                              # e.g. the watchdog's report
    output_sram: np.ndarray | None = None       # InvocationJob.read_output_sram's bytes
    bench_seconds: float = 0.0                  # of wall_seconds, the bench's own work (scoreboard, host ops, I/O)
    # a faulting invocation: the variable SRAM and flags as the RTL left them, before the bench,
    # as the host driver, rolled them back (variable_image/flags are after the rollback)
    fault_variable_image: np.ndarray | None = None
    fault_variable_flags: np.ndarray | None = None
    homes: list = field(default_factory=list)   # (address, bytes) of each external variable's home
    fault_homes: list | None = None


@dataclass
class ProgramResult:
    invocations: list[InvocationResult]
    load_seconds: float = 0.0
    stopped_early: bool = False
