"""The backends that run a TOSA graph, behind one interface: `npu run`, Arm's runner
(sim/oracles/tosa_sut.py), `make conformance` and `npu sim` all open a session here.

    session = open_session(graph, "golden", config="tiny", input_shapes={...})
    outputs = session.run(inputs)        # one invocation; variables carry over to the next
    session.state                        # the variables (by name; golden: and its SRAM image)
    session.load_state(arrays)           # before the first run; a state that is not the graph's
                                         # is an error naming the variable
    session.note                         # one line on the last run, for reports

Backends:
- `interp`: the TOSA interpreter (compiler/interpreter.py), the graph as the spec runs it;
- `golden`: the graph compiled for an NPU configuration and run on the golden model
  (firmware_model/golden), the variables in its persistent variable SRAM;
- `rtl`: the same program run by the core's RTL on a simulator (Verilator or Icarus), one simulator
  process per invocation started from golden's state before it, every tile checked against golden
  by the scoreboard (sim/cosim/program_run.py); the outputs returned are the RTL's. An invocation
  whose error golden raises (a REQUIRE, an ERROR_IF of a host op) raises it the same way here, before
  the RTL runs; an RTL that differs from golden raises MismatchError.
"""

from __future__ import annotations

import io
from typing import Protocol

import numpy as np

from firmware_model.errors import NpuBenchError

BACKENDS = ("interp", "golden", "rtl")


class BackendError(NpuBenchError):
    """A backend that does not exist, or a session asked for something it cannot do."""


class Session(Protocol):
    note: str

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    @property
    def state(self) -> dict[str, np.ndarray]: ...

    def load_state(self, arrays: dict[str, np.ndarray]) -> None: ...


class InterpreterSession:
    def __init__(self, graph):
        from compiler.interpreter import Interpreter

        self.interpreter = Interpreter(graph)
        self.note = ""

    def run(self, inputs):
        return self.interpreter.run(inputs)

    @property
    def state(self):
        return self.interpreter.state

    def load_state(self, arrays):
        from firmware_model.golden.var_unit import STATE_PREFIX

        # a golden state file also carries the SRAM image; the interpreter reads the values by name
        self.interpreter.load_state({k: v for k, v in arrays.items() if not k.startswith(STATE_PREFIX)})


class GoldenSession:
    """The graph compiled once for `config`, on one golden model (powered on once)."""

    def __init__(self, graph, config="default", *, binds: dict[str, int] | None = None,
                 input_shapes: dict[str, tuple[int, ...]] | None = None, quiet: bool = True):
        from compiler.pipeline import compile_graph
        from firmware_model.arch.config import NpuConfig, load_config
        from firmware_model.golden.model import GoldenModel

        self.cfg = config if isinstance(config, NpuConfig) else load_config(config)
        self.compiled = compile_graph(graph, self.cfg, binds=binds, input_shapes=input_shapes,
                                      out=io.StringIO() if quiet else None)
        self.program = self.compiled.program
        self.model = GoldenModel(self.program, self.cfg)
        self.note = ""

    def run(self, inputs):
        outputs = self.model.invoke(inputs)
        c = self.model.counters
        self.note = (f"golden model on '{self.cfg.name}': {c.cycles} cycles, {c.tiles} NPU tiles, "
                     f"{c.commands.get('HOST', 0)} host ops")
        return outputs

    @property
    def state(self):
        return self.model.save_state()

    def load_state(self, arrays):
        self.model.load_state(arrays)


class RtlSession(GoldenSession):
    """The golden session's program, also run on the RTL; `npu_tiles` and `host_ops` say where the
    graph's work ran (a program without NPU tiles leaves nothing for the RTL to check but START,
    HOST and END)."""

    def __init__(self, graph, config="default", *, simulator: str = "verilator", fault: str | None = None, **kw):
        super().__init__(graph, config, **kw)
        self.simulator = simulator
        self.fault = fault            # a core built with a deliberate fault (the bench's self-check)
        self.npu_tiles = len(self.program.tiles)
        self.host_ops = len(self.program.manifest.get("host_ops", []))
        self.rtl_tiles_checked = 0

    def run(self, inputs):
        from sim.cosim.program_run import MismatchError, decode_outputs, invocation_differences, prepare, run_on_rtl
        from sim.rtl.build import SimulatorCrash
        from sim.rtl.core import cached_core

        before = self.model.save_state()
        super().run(inputs)                   # golden's errors are raised as they are, RTL not run
        job, grun = prepare(self.program, self.cfg, [inputs], state=before)
        result, bench = run_on_rtl(cached_core(self.cfg, self.simulator, fault=self.fault), job)
        if result is None or not result.invocations:
            raise SimulatorCrash(f"the {self.simulator} run stopped before reporting: "
                                 f"{'; '.join(bench.failures) or 'no results'}")
        r = result.invocations[0]
        found = invocation_differences(job.invocations[0], grun.outputs[0], r)
        if found:
            raise MismatchError(f"the RTL ({self.simulator}, '{self.cfg.name}') differs from golden: {'; '.join(found)}")
        self.rtl_tiles_checked += len(r.tiles)
        outs = decode_outputs(self.program, r)
        missing = [n for n, v in outs.items() if v is None]
        if missing:
            raise MismatchError(f"the RTL ({self.simulator}) left output(s) {', '.join(missing)} incomplete")
        self.note = (f"RTL {self.simulator} on '{self.cfg.name}': {len(r.tiles)} tile(s) match golden, "
                     f"{r.cycles} cycles" + (f", {self.host_ops} host op(s)" if self.host_ops else "")
                     + ("" if self.npu_tiles else "; no NPU tile: the graph ran on the host CPU model"))
        return outs


def open_session(graph, backend: str = "interp", *, config="default", binds: dict[str, int] | None = None,
                 input_shapes: dict[str, tuple[int, ...]] | None = None, simulator: str = "verilator") -> Session:
    if backend == "interp":
        if binds:
            raise BackendError("--bind is for the compiler (--backend golden); the interpreter takes dimensions "
                               "from the inputs")
        return InterpreterSession(graph)
    if backend == "golden":
        return GoldenSession(graph, config, binds=binds, input_shapes=input_shapes)
    if backend == "rtl":
        if simulator not in ("verilator", "icarus"):
            raise BackendError(f"simulator '{simulator}' does not exist (simulators: verilator, icarus)")
        return RtlSession(graph, config, simulator=simulator, binds=binds, input_shapes=input_shapes)
    raise BackendError(f"backend '{backend}' does not exist (backends: {', '.join(BACKENDS)})")
