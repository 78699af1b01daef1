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

Backends: `interp` (the TOSA interpreter) and `golden`: the graph compiled for the NPU
configuration `config=NAME` (default: default) and run on the golden model
(`--sut-module-args sim.oracles.tosa_sut:backend=golden sim.oracles.tosa_sut:config=tiny`: one option with both
values — the runner keeps only the last `--sut-module-args` when the option is repeated).
With `golden`, a graph the compiler's validation refuses is TOSA_ERROR (an ERROR_IF) or
TOSA_UNPREDICTABLE (a REQUIRE that fails in every invocation); a kernel's ERROR_IF or REQUIRE on
the host CPU, or VAR_READ_BEFORE_WRITE on the variable SRAM, at run time likewise; any other
CompileError (an unsupported op, a graph larger than the configuration's memory) is OTHER_ERROR.

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


def execute_test(test_dir: str | os.PathLike, desc: dict | None = None, backend: str = "interp",
                 write: bool = True, config: str = "default") -> tuple[str, str | None, dict[str, np.ndarray]]:
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

    try:
        outputs = open_session(graph, backend, config=_config(config),
                               input_shapes={n: np.shape(a) for n, a in inputs.items()}).run(inputs)
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

    result = {}
    for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
        if name not in outputs:
            return OTHER, f"the graph has no output named '{name}'", result
        result[name] = outputs[name]
        if write:
            write_output(test_dir / f, outputs[name])
    return VALID, None, result


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
        """npu-bench's interpreter (or, later, golden model) behind Arm's test runner."""

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
                                                config=self.options.get("config", "default"))
            except Exception as e:  # a bug in npu-bench: report it, do not kill the runner's thread
                return TosaTestRunner.TosaGraphResult.OTHER_ERROR, f"npu-bench internal error: {type(e).__name__}: {e}"
            return codes[code], message
