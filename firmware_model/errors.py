"""The project's error types. Every error a user can provoke is one of these, with a message that
names the file, tensor, op or parameter at fault; the command line prints the message, never a
traceback.

They live in the lowest layer (firmware_model) so that the golden model, the compiler, the RTL
generators and the bench all raise and catch the same classes.
"""

from __future__ import annotations


class NpuBenchError(Exception):
    """Base of every error npu-bench reports to a user."""


class ConfigError(NpuBenchError):
    """An NPU configuration that cannot describe a working NPU, or cannot be read."""


class TosaError(NpuBenchError):
    """A TOSA ERROR_IF rule is violated: the graph is not a legal TOSA graph.

    The spec's result for such a graph is TOSA_ERROR.
    """

    def __init__(self, op: str, rule: str, where: str = ""):
        self.op = op
        self.rule = rule
        self.where = where
        loc = f" ({where})" if where else ""
        super().__init__(f"{op}{loc}: ERROR_IF {rule}")


class TosaUnpredictable(NpuBenchError):
    """A TOSA REQUIRE condition fails at run time: the result is UNPREDICTABLE per the spec."""

    def __init__(self, op: str, rule: str, where: str = ""):
        self.op = op
        self.rule = rule
        self.where = where
        loc = f" ({where})" if where else ""
        super().__init__(f"{op}{loc}: REQUIRE {rule} does not hold; the result is unpredictable")


class TosaUnsupported(NpuBenchError):
    """A legal TOSA construct npu-bench does not implement (e.g. floating point)."""


class IsaError(NpuBenchError):
    """A command stream that cannot be decoded or executed (bad opcode, register or address)."""


class GoldenModelError(NpuBenchError):
    """The golden model found a fault while executing a program: the error the NPU reports.

    `status` is the completion code (an `isa.Status` value) the hardware would report.
    """

    def __init__(self, message: str, status: int | None = None):
        self.status = status
        super().__init__(message)
