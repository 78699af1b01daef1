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
from cocotb.triggers import First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import Status
from sim.cosim.records import InvocationResult, ProgramJob, ProgramResult, TileCheck
from sim.rtl.sim_top import CLOCK_HALF_PERIOD_NS, DUMP_FILE, LOAD_FILE, ext_word_bytes

CLOCK_NS = 2 * CLOCK_HALF_PERIOD_NS


def read_word(handle, nbytes: int) -> tuple[bytes, bool]:
    """A memory word's bytes (little-endian) and whether every bit was 0 or 1."""
    v = handle.value
    if v.is_resolvable:
        return v.to_unsigned().to_bytes(nbytes, "little"), True
    text = str(v).lower()[-8 * nbytes:].rjust(8 * nbytes, "0")
    clean = "".join(c if c in "01" else "0" for c in text)
    return int(clean, 2).to_bytes(nbytes, "little"), False


def read_range(array, word_bytes: int, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes [a, b) of an SRAM array (words of `word_bytes`), and a mask of bytes whose word held
    X or Z bits."""
    if b <= a:
        return np.zeros(0, np.uint8), np.zeros(0, bool)
    w0, w1 = a // word_bytes, (b - 1) // word_bytes + 1
    raw, bad = bytearray(), []
    for w in range(w0, w1):
        data, ok = read_word(array[w], word_bytes)
        raw += data
        bad += [not ok] * word_bytes
    lo = a - w0 * word_bytes
    return np.frombuffer(bytes(raw), np.uint8)[lo:lo + b - a].copy(), np.array(bad[lo:lo + b - a], bool)


class CoreBench:
    def __init__(self, dut, job: ProgramJob, job_dir: Path):
        self.dut = dut
        self.job = job
        self.dir = job_dir
        self.cfg = load_config(job.config)
        self.E = ext_word_bytes(self.cfg)

    @property
    def core(self):
        return self.dut.core

    async def reset(self) -> None:
        d = self.dut
        # A change of rst after time 0 is what first evaluates Icarus' combinational blocks
        # (always @* waits for an event): let the clock run before raising it.
        await RisingEdge(d.clk)
        await RisingEdge(d.clk)
        d.rst.value = 1
        d.start.value = 0
        d.host_ack.value = 0
        for _ in range(3):
            await RisingEdge(d.clk)
        d.rst.value = 0
        await RisingEdge(d.clk)
        while not int(d.ready.value):        # the variable SRAM clears itself after reset
            await RisingEdge(d.ready)
        await RisingEdge(d.clk)

    # --- external memory in bulk -------------------------------------------------------------
    async def load(self, writes: list[tuple[int, bytes]]) -> None:
        """Write byte regions into the external memory (one $readmemh)."""
        E = self.E
        lines = []
        for addr, data in writes:
            if not data:
                continue
            w0, w1 = addr // E, (addr + len(data) - 1) // E + 1
            buf = bytearray((w1 - w0) * E)
            lo = addr - w0 * E
            # the first and last words keep the bytes outside the region
            for w in {w0, w1 - 1}:
                if (w == w0 and lo) or (w == w1 - 1 and (addr + len(data)) % E):
                    word, _ = read_word(self.dut.ext_mem[w], E)
                    buf[(w - w0) * E:(w - w0 + 1) * E] = word
            buf[lo:lo + len(data)] = data
            words = np.frombuffer(bytes(buf), np.uint8).reshape(-1, E)[:, ::-1]
            text = words.tobytes().hex()
            lines.append(f"@{w0:x}")
            lines += [text[i:i + 2 * E] for i in range(0, len(text), 2 * E)]
        if not lines:
            return
        (self.dir / LOAD_FILE).write_text("\n".join(lines) + "\n")
        self.dut.load_req.value = 1
        await RisingEdge(self.dut.clk)
        await RisingEdge(self.dut.clk)

    async def dump(self, addr: int, nbytes: int) -> bytes:
        """Bytes [addr, addr + nbytes) of the external memory (one $writememh)."""
        if nbytes <= 0:
            return b""
        E = self.E
        w0, w1 = addr // E, (addr + nbytes - 1) // E
        if w1 - w0 < 64:      # a few words: straight through VPI
            raw = b"".join(read_word(self.dut.ext_mem[w], E)[0] for w in range(w0, w1 + 1))
        else:
            path = self.dir / DUMP_FILE
            if path.exists():
                path.unlink()
            self.dut.dump_lo.value = w0
            self.dut.dump_hi.value = w1
            self.dut.dump_req.value = 1
            await RisingEdge(self.dut.clk)
            await RisingEdge(self.dut.clk)
            # words, one per token; Icarus writes "// 0x..." address comments, both may write @address
            words = [w for line in path.read_text().splitlines() for w in line.split("//")[0].split()
                     if not w.startswith("@")]
            hexs = "".join(w.replace("x", "0").replace("z", "0").rjust(2 * E, "0") for w in words)
            raw = np.frombuffer(bytes.fromhex(hexs), np.uint8).reshape(-1, E)[:, ::-1].tobytes()
        lo = addr - w0 * E
        return raw[lo:lo + nbytes]

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
    def _check_tile(self, exp, t0_ns: float, start_clock: int) -> TileCheck:
        a, b = exp.output
        actual, bad = read_range(self.core.output_sram, self.cfg.word_bytes, a, b)
        diff = np.flatnonzero((actual != exp.expected) | bad).tolist()
        return TileCheck(exp.command_index, exp.tile_id, exp.opcode, int(self.dut.cycles.value), exp.end,
                         (a, b), diff, actual, exp.expected, exp.regs, (t0_ns, get_sim_time("ns")),
                         found=int(self.dut.pc.value) == exp.command_index,
                         unknown_offsets=np.flatnonzero(bad).tolist(), start_clock=start_clock)

    def progress(self, k: int, check: TileCheck) -> None:
        """One line per checked tile, for the parent's progress display."""
        with open(self.dir / "progress.txt", "a") as f:
            f.write(f"{k} {check.tile_id} {int(check.ok)}\n")

    async def load_variables(self, image: np.ndarray, flags: np.ndarray) -> None:
        """Start the variable SRAM from a saved state (npu sim --state): its words and slot flags."""
        W = self.cfg.word_bytes
        var = self.core.variable_sram
        words = np.asarray(image, np.uint8).reshape(-1, W)
        for w, word in enumerate(words):
            var.mem[w].value = int.from_bytes(word.tobytes(), "little")
        var.written.value = sum(1 << s for s, on in enumerate(flags) if on)
        await RisingEdge(self.dut.clk)

    async def invoke(self, k: int, inv) -> InvocationResult:
        d = self.dut
        t_wall = time.perf_counter()
        await self.load(inv.inputs)
        d.prog_addr.value = self.job.prog_addr
        d.prog_words.value = self.job.prog_words
        await RisingEdge(d.clk)
        d.start.value = 1
        await RisingEdge(d.clk)
        d.start.value = 0
        t_start = get_sim_time("ns")
        golden = inv.cycles if inv.cycles is not None else 4 * self.job.prog_words
        budget = (self.job.watchdog_factor * max(golden, 1) + self.job.watchdog_slack) * CLOCK_NS
        deadline = t_start + budget
        tiles: list[TileCheck] = []
        pending = list(inv.tiles)
        note = ""
        last_ns, last_clock = t_start, 0
        while True:
            left = deadline - get_sim_time("ns")
            if left <= 0:
                note = "watchdog"
                break
            trig = await First(RisingEdge(d.unit_event), RisingEdge(d.done), RisingEdge(d.host_req),
                               Timer(left, "ns"))
            if isinstance(trig, Timer):
                note = "watchdog"
                break
            await ReadOnly()
            if int(d.unit_event.value):
                if pending:
                    check = self._check_tile(pending.pop(0), last_ns, last_clock)
                    tiles.append(check)
                    self.progress(k, check)
                    last_ns, last_clock = get_sim_time("ns"), check.rtl_end
                    if self.job.stop_at_first_mismatch and not check.ok:
                        note = "stopped at the first mismatch"
                        await RisingEdge(d.clk)
                        break
                continue
            if int(d.host_req.value) and not int(d.done.value):
                op = int(d.host_op.value)
                await RisingEdge(d.clk)
                await self.host_op(op)
                d.host_ack.value = 1
                await RisingEdge(d.clk)
                d.host_ack.value = 0
                continue
            if int(d.done.value):
                break
        status = int(d.status.value) if int(d.done.value) else -1
        cycles = int(d.cycles.value)
        if note == "watchdog":
            note = (f"watchdog: no END after {budget / CLOCK_NS:.0f} clocks (the golden model needs "
                    f"{inv.cycles}); the core was at command {int(d.pc.value)}, cycle {cycles}")
        for exp in pending:          # commands the RTL never finished
            tiles.append(TileCheck(exp.command_index, exp.tile_id, exp.opcode, -1, exp.end, exp.output,
                                   list(range(len(exp.expected))), np.zeros(0, np.uint8), exp.expected,
                                   exp.regs, (last_ns, last_ns), found=False))
        if not note:
            await RisingEdge(d.clk)
        outputs = {}
        for name, addr, nbytes in inv.outputs:
            outputs[name] = np.frombuffer(await self.dump(addr, nbytes), np.uint8).copy()
        var = self.core.variable_sram
        image, _ = read_range(var.mem, self.cfg.word_bytes, 0, self.cfg.variable_sram)
        flags_word = var.written.value
        flags_int = flags_word.to_unsigned() if flags_word.is_resolvable else 0
        flags = np.array([(flags_int >> s) & 1 for s in range(len(flags_word))], bool)
        out_sram = None
        if inv.read_output_sram is not None:
            out_sram, _ = read_range(self.core.output_sram, self.cfg.word_bytes, *inv.read_output_sram)
        return InvocationResult(status, cycles, tiles, outputs, image, flags, (t_start, get_sim_time("ns")),
                                time.perf_counter() - t_wall, note, out_sram)


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
