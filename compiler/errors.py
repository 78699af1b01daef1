"""Errors raised by the compiler side: reading TOSA files and compiling graphs."""

from __future__ import annotations

from firmware_model.errors import NpuBenchError


class TosaFormatError(NpuBenchError):
    """A file that is not a readable TOSA flatbuffer: missing, truncated, wrong identifier,
    offsets out of range, unknown op codes or a graph that references missing tensors.
    The message starts with the file's path."""

    def __init__(self, path: str, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class CompileError(NpuBenchError):
    """The compiler cannot map the graph onto the chosen NPU configuration. The message names the
    op, tensor or configuration parameter at fault and what is wrong."""


class TosaRuleError(CompileError):
    """The graph breaks a TOSA rule that the compiler checks before it maps anything: `cause` is
    the TosaError (an ERROR_IF: not a legal TOSA graph, TOSA_ERROR) or the TosaUnpredictable (a
    REQUIRE that fails in every invocation, e.g. a variable read before its declaration) that the
    interpreter's own checks raised. The message names the op and the rule."""

    def __init__(self, message: str, cause: Exception):
        self.cause = cause
        super().__init__(message)

    @property
    def is_error_if(self) -> bool:
        from firmware_model.errors import TosaError

        return isinstance(self.cause, TosaError)


class TileFitError(CompileError):
    """Not even the smallest tile of an NPU operation fits the configuration's SRAMs. The lowering
    pass then leaves the op to the host CPU (and says so in the compile report)."""
