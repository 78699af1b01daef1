"""The cocotb bench of the NPU core: a whole program, run by the RTL itself, checked tile by tile.

Imported by the simulator; the job comes from sim/cosim/program_run.py (records.ProgramJob) and
the results go back as records.ProgramResult. The clock runs inside the HDL (sim/rtl/sim_top.py),
so between two events the simulator runs free: Python wakes only

- when a compute command finishes (`unit_event`): the scoreboard reads the bytes the command
  wrote in the output SRAM and the core's cycle counter, and compares them with the golden
  model's (byte for byte; X or Z bits count as differences);
- when a HOST command hands over (`host_req`): the bench plays the host CPU on the RTL's own
  external memory (firmware_model.golden.host_cpu's kernels), then acknowledges;
- when the invocation ends (`done`), or when the watchdog's budget runs out.

The external memory is loaded and read in bulk ($readmemh / $writememh through the sim top's
back doors); partial words at a region's ends are merged with the memory's own bytes.
"""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import Status
from sim.cosim.records import InvocationResult, ProgramJob, ProgramResult, TileCheck
from sim.rtl.sim_top import (CLOCK_HALF_PERIOD_NS, DUMP_FILE, EXTERNAL, LOAD_FILE, OUTPUT_SRAM, TILE_FILE,
                             VARIABLE_SRAM, ext_word_bytes)

CLOCK_NS = 2 * CLOCK_HALF_PERIOD_NS


def parse_memh(text: str, word_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """A $writememh file's words as little-endian bytes, and a mask of bytes whose word held X or
    Z digits. Verilator and Icarus may write @address lines, Icarus also // comments."""
    words = [w for line in text.splitlines() for w in line.split("//")[0].split() if not w.startswith("@")]
    lower = [w.lower().rjust(2 * word_bytes, "0") for w in words]
    clean = "".join(w.replace("x", "0").replace("z", "0") for w in lower)
    raw = np.frombuffer(bytes.fromhex(clean), np.uint8).reshape(-1, word_bytes)[:, ::-1].reshape(-1).copy()
    bad = np.repeat(np.array([("x" in w) or ("z" in w) for w in lower], bool), word_bytes)
    return raw, bad


def memh_lines(w0: int, data: bytes, word_bytes: int) -> list[str]:
    """$readmemh lines writing whole words from word w0 on."""
    words = np.frombuffer(data, np.uint8).reshape(-1, word_bytes)[:, ::-1]
    text = words.tobytes().hex()
    return [f"@{w0:x}"] + [text[i:i + 2 * word_bytes] for i in range(0, len(text), 2 * word_bytes)]


class CoreBench:
    def __init__(self, dut, job: ProgramJob, job_dir: Path):
        self.dut = dut
        self.job = job
        self.dir = job_dir
        self.cfg = NpuConfig.from_dict(job.config)
        self.E = ext_word_bytes(self.cfg)
        self.requests = 0                 # back-door requests made (sim top's bd_req)

    @property
    def core(self):
        return self.dut.core

    async def reset(self) -> None:
        """The sim top resets the core by itself; wait for that and for the variable SRAM, which
        clears itself after reset."""
        d = self.dut
        d.start_in.value = 0
        d.host_ack_in.value = 0
        d.tile_dump.value = 1
        await RisingEdge(d.clk)               # values settle after time 0 (Icarus shows X before)
        while str(d.booted.value) != "1":
            await RisingEdge(d.clk)
        while str(d.ready.value) != "1":
            await RisingEdge(d.clk)
        await RisingEdge(d.clk)

    async def _backdoor(self, op: int, mem: int, lo: int = 0, hi: int = 0) -> None:
        d = self.dut
        d.bd_mem.value = mem
        d.bd_lo.value = lo
        d.bd_hi.value = hi
        d.bd_op.value = op
        self.requests = (self.requests + 1) % 256
        d.bd_req.value = self.requests
        # Done by the second edge at the latest (a write may land after the first edge's
        # processes); ReadOnly waits for them, the falling edge gives back a writable step.
        await RisingEdge(d.clk)
        await RisingEdge(d.clk)
        await ReadOnly()
        await FallingEdge(d.clk)

    async def dump_words(self, mem: int, w0: int, w1: int, word_bytes: int) -> tuple[np.ndarray, np.ndarray]:
        """Words w0 .. w1 (inclusive) of a memory by one $writememh: bytes and X/Z mask."""
        path = self.dir / DUMP_FILE
        if path.exists():
            path.unlink()
        await self._backdoor(2, mem, w0, w1)
        raw, bad = parse_memh(path.read_text(), word_bytes)
        n = (w1 - w0 + 1) * word_bytes
        if raw.size != n:
            raise RuntimeError(f"{path}: {raw.size} bytes dumped, {n} asked for")
        return raw, bad

    async def read_sram(self, mem: int, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes [a, b) of the output (OUTPUT_SRAM) or variable SRAM and their X/Z mask (a dump)."""
        W = self.cfg.word_bytes
        if b <= a:
            return np.zeros(0, np.uint8), np.zeros(0, bool)
        w0, w1 = a // W, (b - 1) // W
        raw, bad = await self.dump_words(mem, w0, w1, W)
        lo = a - w0 * W
        return raw[lo:lo + b - a], bad[lo:lo + b - a]

    # --- external memory in bulk -------------------------------------------------------------
    async def load(self, writes: list[tuple[int, bytes]]) -> None:
        """Write byte regions into the external memory (one $readmemh)."""
        E = self.E
        lines = []
        for addr, data in writes:
            if not data:
                continue
            w0, w1 = addr // E, (addr + len(data) - 1) // E + 1
            lo = addr - w0 * E
            if lo or (addr + len(data)) % E:
                # the first and last words keep the bytes outside the region
                buf = bytearray(await self.dump(w0 * E, (w1 - w0) * E))
            else:
                buf = bytearray((w1 - w0) * E)
            buf[lo:lo + len(data)] = data
            lines += memh_lines(w0, bytes(buf), E)
        if not lines:
            return
        (self.dir / LOAD_FILE).write_text("\n".join(lines) + "\n")
        await self._backdoor(1, EXTERNAL)

    async def dump(self, addr: int, nbytes: int) -> bytes:
        """Bytes [addr, addr + nbytes) of the external memory (one $writememh)."""
        if nbytes <= 0:
            return b""
        E = self.E
        w0, w1 = addr // E, (addr + nbytes - 1) // E
        raw, _ = await self.dump_words(EXTERNAL, w0, w1, E)
        lo = addr - w0 * E
        return raw[lo:lo + nbytes].tobytes()

    # --- the host CPU, on the RTL's external memory ---------------------------------------------
    async def host_op(self, index: int) -> None:
        from firmware_model.arch.program import Placement
        from firmware_model.tosa_ops.registry import OpCall, TensorSpec, run_op

        entry = self.job.host_ops[index]
        ins = [Placement.from_json(p) if p else None for p in entry["inputs"]]
        outs = [Placement.from_json(p) for p in entry["outputs"]]
        arrays = []
        for p in ins:
            if p is None:
                arrays.append(None)
                continue
            raw = await self.dump(p.addr, p.nbytes)
            st = p.dtype.storage
            arrays.append(np.frombuffer(raw, st.newbyteorder("<")).astype(st).reshape(p.shape))
        call = OpCall(op=entry["op"], attrs=dict(entry["attrs"]), inputs=arrays,
                      input_specs=[TensorSpec(tuple(p.shape), p.dtype) if p else None for p in ins],
                      output_specs=[TensorSpec(tuple(p.shape), p.dtype) for p in outs],
                      where=f"host op {index}: {entry['where']}", attr_kind=entry.get("attr_kind"))
        results = run_op(call)
        writes = []
        for p, value in zip(outs, results):
            st = p.dtype.storage
            writes.append((p.addr, np.ascontiguousarray(np.asarray(value).reshape(p.shape),
                                                        dtype=st.newbyteorder("<")).tobytes()))
        await self.load(writes)

    # --- one invocation ------------------------------------------------------------------------
    def _arm_tile(self, exp) -> None:
        """Name the output words the sim top dumps in the clock after the tile's unit_event."""
        a, b = exp.output
        W = self.cfg.word_bytes
        w0, w1 = (a // W, (b - 1) // W) if b > a else (0, 0)
        self.dut.tile_lo.value = w0
        self.dut.tile_hi.value = min(w1, self.cfg.output_sram // W - 1)
        (self.dir / TILE_FILE).unlink(missing_ok=True)   # a stale file must not pass for this tile

    async def _check_tile(self, exp, t0_ns: float, start_clock: int) -> TileCheck:
        """At the tile's end (ReadOnly of the unit_event clock): its clock and command, then its
        bytes from the dump the sim top writes in the next clock."""
        d = self.dut
        end_clock, found, t_end = int(d.cycles.value), int(d.unit_pc.value) == exp.command_index, get_sim_time("ns")
        path = self.dir / TILE_FILE
        await RisingEdge(d.clk)
        await ReadOnly()
        a, b = exp.output
        W = self.cfg.word_bytes
        if b > a:
            raw, bad = parse_memh(path.read_text(), W)
            lo = a - (a // W) * W
            actual, bad = raw[lo:lo + b - a], bad[lo:lo + b - a]
        else:
            actual, bad = np.zeros(0, np.uint8), np.zeros(0, bool)
        if actual.size != b - a:
            raise RuntimeError(f"{path}: {actual.size} bytes of tile {exp.tile_id}, {b - a} expected")
        diff = np.flatnonzero((actual != exp.expected) | bad).tolist()
        return TileCheck(exp.command_index, exp.tile_id, exp.opcode, end_clock, exp.end,
                         (a, b), diff, actual, exp.expected, exp.regs, (t0_ns, t_end),
                         found=found, unknown_offsets=np.flatnonzero(bad).tolist(), start_clock=start_clock)

    def progress(self, k: int, check: TileCheck) -> None:
        """One line per checked tile, for the parent's progress display."""
        with open(self.dir / "progress.txt", "a") as f:
            f.write(f"{k} {check.tile_id} {int(check.ok)}\n")

    async def load_variables(self, image: np.ndarray, flags: np.ndarray) -> None:
        """Start the variable SRAM from a saved state (npu sim --state): its words and slot flags."""
        W = self.cfg.word_bytes
        (self.dir / LOAD_FILE).write_text("\n".join(memh_lines(0, np.asarray(image, np.uint8).tobytes(), W)) + "\n")
        await self._backdoor(1, VARIABLE_SRAM)
        self.dut.bd_flags.value = sum(1 << s for s, on in enumerate(flags) if on)
        await self._backdoor(3, VARIABLE_SRAM)

    async def read_variables(self, homes: list) -> tuple[np.ndarray, np.ndarray, list]:
        """The variable SRAM's bytes, its slot flags, and the bytes at each external variable's
        home (`homes`: (address, bytes) as golden has them, for where and how many)."""
        image, _ = await self.read_sram(VARIABLE_SRAM, 0, self.cfg.variable_sram)
        word = self.dut.var_written.value
        bits = word.to_unsigned() if word.is_resolvable else 0
        flags = np.array([(bits >> s) & 1 for s in range(len(word))], bool)
        found = [(addr, np.frombuffer(await self.dump(addr, len(raw)), np.uint8).copy()) for addr, raw in homes]
        return image, flags, found

    async def invoke(self, k: int, inv) -> InvocationResult:
        d = self.dut
        t_wall = time.perf_counter()
        # The host driver makes an invocation a transaction for the variables: when it faults, it
        # puts the variable SRAM back as it was (the golden model's invoke does the same). Golden
        # says which invocations fault, so only those pay for the snapshot.
        saved = await self.read_variables(inv.homes) if inv.status != Status.OK else None
        await self.load(inv.inputs)
        d.prog_addr_in.value = self.job.prog_addr
        d.prog_words_in.value = self.job.prog_words
        await RisingEdge(d.clk)
        d.start_in.value = 1
        await RisingEdge(d.clk)
        d.start_in.value = 0
        await RisingEdge(d.clk)          # the sim top registers start before the core sees it
        t_start = get_sim_time("ns")
        golden = inv.cycles if inv.cycles is not None else 4 * self.job.prog_words
        budget = (self.job.watchdog_factor * max(golden, 1) + self.job.watchdog_slack) * CLOCK_NS
        deadline = t_start + budget
        tiles: list[TileCheck] = []
        pending = list(inv.tiles)
        note = ""
        last_ns, last_clock = t_start, 0
        bench_s, t_py = time.perf_counter() - t_wall, time.perf_counter()
        while True:
            left = deadline - get_sim_time("ns")
            if left <= 0:
                note = "watchdog"
                break
            bench_s += time.perf_counter() - t_py
            trig = await First(RisingEdge(d.unit_event), RisingEdge(d.done), RisingEdge(d.host_req),
                               Timer(left, "ns"))
            t_py = time.perf_counter()
            if isinstance(trig, Timer):
                note = "watchdog"
                break
            tile = pending[0] if pending and int(d.unit_event.value) else None
            if tile is not None:
                self._arm_tile(tile)
            await ReadOnly()
            if tile is not None and int(d.unit_event.value):
                check = await self._check_tile(pending.pop(0), last_ns, last_clock)
                tiles.append(check)
                self.progress(k, check)
                last_ns, last_clock = check.sim_ns[1], check.rtl_end
                if self.job.stop_at_first_mismatch and not check.ok:
                    note = "stopped at the first mismatch"
                    await RisingEdge(d.clk)
                    break
            if int(d.host_req.value) and not int(d.done.value):
                op = int(d.host_op.value)
                await RisingEdge(d.clk)
                await self.host_op(op)
                d.host_ack_in.value = 1
                await RisingEdge(d.clk)
                d.host_ack_in.value = 0
                await RisingEdge(d.clk)  # registered by the sim top: the core sees it now
                continue
            if int(d.done.value):
                break
        status = int(d.status.value) if int(d.done.value) else -1
        cycles = int(d.cycles.value)
        if note == "watchdog":
            pc = int(d.pc.value)
            labels = self.job.command_labels
            at = f" ({labels[pc]})" if 0 <= pc < len(labels) else ""
            waiting = (f"; tile {pending[0].tile_id} (command {pending[0].command_index}) never finished"
                       if pending else "")
            note = (f"watchdog: no END after {budget / CLOCK_NS:.0f} clocks (the golden model needs "
                    f"{inv.cycles}); the core was at command {pc}{at}, cycle {cycles}{waiting}")
        for exp in pending:          # commands the RTL never finished
            tiles.append(TileCheck(exp.command_index, exp.tile_id, exp.opcode, -1, exp.end, exp.output,
                                   list(range(len(exp.expected))), np.zeros(0, np.uint8), exp.expected,
                                   exp.regs, (last_ns, last_ns), found=False))
        if not note:
            await RisingEdge(d.clk)
        outputs = {}
        for name, addr, nbytes in inv.outputs:
            outputs[name] = np.frombuffer(await self.dump(addr, nbytes), np.uint8).copy()
        image, flags, homes = await self.read_variables(inv.homes)
        fault_image = fault_flags = fault_homes = None
        if status not in (Status.OK, -1) and saved is not None:
            fault_image, fault_flags, fault_homes = image, flags, homes
            await self.load_variables(saved[0], saved[1])
            await self.load([(addr, raw.tobytes()) for addr, raw in saved[2]])
            image, flags, homes = await self.read_variables(inv.homes)
        out_sram = None
        if inv.read_output_sram is not None:
            out_sram, _ = await self.read_sram(OUTPUT_SRAM, *inv.read_output_sram)
        bench_s += time.perf_counter() - t_py
        return InvocationResult(status, cycles, tiles, outputs, image, flags, (t_start, get_sim_time("ns")),
                                time.perf_counter() - t_wall, note, out_sram, bench_s, fault_image, fault_flags,
                                homes, fault_homes)


def _job() -> tuple[Path, ProgramJob]:
    job_dir = Path(os.environ["NPU_BENCH_JOB"])
    with open(job_dir / "job.pkl", "rb") as f:
        return job_dir, pickle.load(f)


@cocotb.test()
async def run_program(dut):
    job_dir, job = _job()
    bench = CoreBench(dut, job, job_dir)
    t0 = time.perf_counter()
    await bench.reset()
    if job.initial_variables is not None:
        await bench.load_variables(*job.initial_variables)
    await bench.load(job.image)
    result = ProgramResult([], load_seconds=time.perf_counter() - t0)
    for k, inv in enumerate(job.invocations):
        r = await bench.invoke(k, inv)
        result.invocations.append(r)
        stop = r.note or r.status != inv.status
        if job.stop_at_first_mismatch and (stop or not all(t.ok for t in r.tiles)):
            result.stopped_early = k + 1 < len(job.invocations)
            break
        if r.status != Status.OK:
            break
    with open(job_dir / "results.pkl", "wb") as f:
        pickle.dump(result, f)
