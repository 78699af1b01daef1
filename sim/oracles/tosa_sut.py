"""npu-bench as a system under test (SUT) for Arm's conformance runner:

    tosa_verif_run_tests -r -t DIR --sut-module sim.oracles.tosa_sut \
        --sut-module-args sim.oracles.tosa_sut:backend=interp -j 2

`TosaSUTRunner.runTestGraph` reads the test's graph, binds its `ifm_file`s, runs it with the
chosen backend and writes every `ofm_file` into the test folder (int48 as int64, rank-0 outputs
with shape ()), then tells the runner what the graph did:

- TOSA_VALID          the graph ran; the runner compares the files with the reference model's
- TOSA_ERROR          an ERROR_IF rule is violated, or the graph itself is malformed (a missing
                      tensor, a wrong operand count): the graph is not a legal TOSA graph
- TOSA_UNPREDICTABLE  a REQUIRE condition fails at run time
- OTHER_ERROR         anything else (an unsupported construct, a backend that is not available)

Backends: `interp` (the TOSA interpreter), `golden`: the graph compiled for the NPU
configuration `config=NAME` (default: default) and run on the golden model, and `rtl`: the same
program run by the core's RTL on `simulator=verilator|icarus` (default verilator), every tile
checked against golden by the scoreboard; its outputs are the RTL's, an RTL that differs from
golden is OTHER_ERROR with what differed
(`--sut-module-args sim.oracles.tosa_sut:backend=golden sim.oracles.tosa_sut:config=tiny`: one option with both
values — the runner keeps only the last `--sut-module-args` when the option is repeated).
With `golden`, a graph the compiler's validation refuses is TOSA_ERROR (an ERROR_IF) or
TOSA_UNPREDICTABLE (a REQUIRE that fails in every invocation); a kernel's ERROR_IF or REQUIRE on
the host CPU, or VAR_READ_BEFORE_WRITE on the variable SRAM, at run time likewise; any other
CompileError (an unsupported op, a graph larger than the configuration's memory) is OTHER_ERROR.

With `golden` and `rtl` the SUT leaves `npu_sut.json` in the test folder: where the graph's work ran
(NPU tiles, host ops, RTL tiles checked), which sim.oracles.conformance sums up, so that a test
whose ops all ran on the host CPU model is reported as such rather than as an RTL pass.

`execute_test(test_dir)` is the same logic without the runner, for in-process use (pytest, the
`dev` mode of sim.oracles.conformance).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np

from compiler.errors import TosaFormatError, TosaRuleError
from firmware_model.errors import GoldenModelError, NpuBenchError, TosaError, TosaUnpredictable
from firmware_model.arch.isa import Status
from sim.oracles.backends import BACKENDS

VALID, UNPREDICTABLE, ERROR, OTHER = "TOSA_VALID", "TOSA_UNPREDICTABLE", "TOSA_ERROR", "OTHER_ERROR"


def parse_sut_args(runner_args: list[str]) -> dict[str, str]:
    """`key=value` strings from --sut-module-args (module prefix already removed by the runner)."""
    opts = {"backend": "interp"}
    for a in runner_args:
        key, sep, value = a.partition("=")
        if not sep:
            raise ValueError(f"sim.oracles.tosa_sut: argument '{a}' is not key=value")
        opts[key.strip()] = value.strip()
    return opts


def write_output(path: Path, value: np.ndarray) -> None:
    """One output as the runner wants it: exact dtype (int48 travels as int64), rank 0 as ()."""
    arr = np.asarray(value)
    np.save(path, arr, allow_pickle=False)


SUT_RECORD = "npu_sut.json"


def execute_test(test_dir: str | os.PathLike, desc: dict | None = None, backend: str = "interp",
                 write: bool = True, config: str = "default",
                 simulator: str = "verilator") -> tuple[str, str | None, dict[str, np.ndarray]]:
    """Run one conformance test folder. Returns (graph result, message, outputs by ofm name)."""
    test_dir = Path(test_dir)
    if desc is None:
        desc = json.loads((test_dir / "desc.json").read_text())
    if backend not in BACKENDS:
        return OTHER, f"unknown backend '{backend}' (available: {', '.join(BACKENDS)})", {}

    from compiler.tosa_io import read_tosa
    from sim.oracles.backends import open_session

    try:
        graph = read_tosa(test_dir / desc["tosa_file"])
    except TosaFormatError as e:
        # The file parsed, but the graph breaks TOSA's structural rules (e.g. an operator naming a
        # tensor that does not exist): not a legal TOSA graph.
        return ERROR, f"graph rejected: {e}", {}
    except NpuBenchError as e:
        return OTHER, str(e), {}
    try:
        inputs = {name: np.load(test_dir / f, allow_pickle=False)
                  for name, f in zip(desc["ifm_name"], desc["ifm_file"])}
    except (OSError, ValueError) as e:
        return OTHER, f"cannot load the test's inputs: {e}", {}

    session = None
    try:
        session = open_session(graph, backend, config=_config(config), simulator=simulator,
                               input_shapes={n: np.shape(a) for n, a in inputs.items()})
        outputs = session.run(inputs)
    except TosaRuleError as e:
        return (ERROR if e.is_error_if else UNPREDICTABLE), str(e), {}
    except GoldenModelError as e:
        if e.status == Status.VAR_READ_BEFORE_WRITE:
            return UNPREDICTABLE, str(e), {}
        return OTHER, str(e), {}
    except TosaError as e:
        return ERROR, str(e), {}
    except TosaUnpredictable as e:
        return UNPREDICTABLE, str(e), {}
    except NpuBenchError as e:
        return OTHER, str(e), {}
    finally:
        if write and session is not None and backend != "interp":
            _record(test_dir, backend, config, simulator, session)

    result = {}
    for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
        if name not in outputs:
            return OTHER, f"the graph has no output named '{name}'", result
        result[name] = outputs[name]
        if write:
            write_output(test_dir / f, outputs[name])
    return VALID, None, result


def _record(test_dir: Path, backend: str, config: str, simulator: str, session) -> None:
    """Where the test's work ran (SUT_RECORD), for the conformance summary."""
    program = session.program
    layers = program.manifest.get("layers", [])
    compute = sum(len(layer["tiles"]) for layer in layers if layer["kind"] == "npu" and layer["unit"] != "DMA")
    doc = {"backend": backend, "config": config, "npu_tiles": len(program.tiles), "compute_tiles": compute,
           "host_ops": len(program.manifest.get("host_ops", [])), "note": session.note}
    if backend == "rtl":
        doc.update(simulator=simulator, rtl_tiles_checked=session.rtl_tiles_checked)
    try:
        (test_dir / SUT_RECORD).write_text(json.dumps(doc))
    except OSError:
        pass       # a read-only test folder: the summary only loses this test's line


@functools.lru_cache(maxsize=8)
def _config(name: str):
    from firmware_model.arch.config import load_config

    return load_config(name)


try:  # the runner is part of tosa-tools (a test-time dependency)
    from runner.tosa_test_runner import TosaTestRunner
except ImportError:  # pragma: no cover - only without tosa-tools
    TosaTestRunner = None


if TosaTestRunner is not None:
    class TosaSUTRunner(TosaTestRunner):
        """npu-bench's interpreter, golden model or RTL behind Arm's test runner."""

        def __init__(self, args, runnerArgs, testDirPath):
            super().__init__(args, runnerArgs, testDirPath)
            self.options = parse_sut_args(runnerArgs)

        def runTestGraph(self):
            codes = {VALID: TosaTestRunner.TosaGraphResult.TOSA_VALID,
                     ERROR: TosaTestRunner.TosaGraphResult.TOSA_ERROR,
                     UNPREDICTABLE: TosaTestRunner.TosaGraphResult.TOSA_UNPREDICTABLE,
                     OTHER: TosaTestRunner.TosaGraphResult.OTHER_ERROR}
            try:
                code, message, _ = execute_test(self.testDirPath, self.testDesc,
                                                backend=self.options.get("backend", "interp"),
                                                config=self.options.get("config", "default"),
                                                simulator=self.options.get("simulator", "verilator"))
            except Exception as e:  # a bug in npu-bench: report it, do not kill the runner's thread
                return TosaTestRunner.TosaGraphResult.OTHER_ERROR, f"npu-bench internal error: {type(e).__name__}: {e}"
            return codes[code], message
