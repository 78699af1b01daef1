"""The op-kernel registry: how the interpreter and the golden model's host CPU call a TOSA op.

A kernel is a function `kernel(call: OpCall) -> list[np.ndarray]`, registered under the TOSA op
name with `@register("CONV2D")`. It receives its inputs as numpy arrays in the storage type of
their DType (int48 as int64, bool as np.bool_), the op's attributes under the schema's field
names, and the declared input and output specs; it returns one array per output, in the output's
storage type. It checks the spec's ERROR_IF rules with `call.error_if(...)` and REQUIREs with
`call.require(...)`, so every failure names the op and the rule.

Output specs may hold -1 for a dimension the graph left open; a kernel checks only known dims.

Prepare once, execute many (`@register_plan("ADD", static=(...))`): a kernel may be written in two
halves. `prepare(call)` does what depends only on the op's attributes, its declared specs and the
values of the inputs listed in `static` (zero points, shifts, multipliers, tables, shape operands):
the spec's ERROR_IF checks, decoded attributes, precomputed arrays. It returns
`execute(inputs) -> outputs`, the per-element arithmetic and the REQUIREs on the values. The op's
kernel is `prepare(call)(call.inputs)`, so the kernel and the prepared plan are one code path. The
interpreter prepares an op once (inputs outside `static` are None in that call, their shapes the
declared ones) and runs only `execute` in later invocations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from firmware_model.errors import TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops.dtypes import DType


class TensorSpec(NamedTuple):
    """A tensor's declared shape and element type. A named tuple (immutable, compared and hashed
    by value): the interpreter makes one per tensor of every graph it runs, and a tuple is made
    in a third of a frozen dataclass's time."""
    shape: tuple[int, ...]
    dtype: DType


@dataclass
class OpCall:
    op: str
    attrs: dict[str, Any]
    inputs: list[np.ndarray | None]
    input_specs: list[TensorSpec]
    output_specs: list[TensorSpec]
    where: str = ""               # e.g. "model.tosa op #12 -> conv_out", for messages
    attr_kind: str | None = None  # the attribute table's name, when the op dispatches on it
    extra: dict[str, Any] = field(default_factory=dict)

    def error_if(self, condition, rule: "str | Callable[[], str]") -> None:
        """Raise TosaError when the spec's ERROR_IF(condition) holds. `rule` may be a function
        making the message, for messages costly to format on every call (they are rarely shown)."""
        # Plain bools skip numpy's reduction machinery (kernels check dozens per call; False,
        # the usual answer, first).
        # An array's own any()/all() (np.any / np.all add a Python wrapper: twice the time on the
        # small arrays of a conformance test).
        if condition is False:
            return
        if type(condition) is np.ndarray:
            held = condition.any()
        else:
            held = condition if isinstance(condition, (bool, np.bool_)) else np.any(condition)
        if held:
            raise TosaError(self.op, rule if isinstance(rule, str) else rule(), self.where)

    def require(self, condition, rule: "str | Callable[[], str]") -> None:
        """Raise TosaUnpredictable unless the spec's REQUIRE(condition) holds."""
        if condition is True:
            return
        if type(condition) is np.ndarray:
            holds = condition.all()
        else:
            holds = condition if isinstance(condition, (bool, np.bool_)) else np.all(condition)
        if not holds:
            raise TosaUnpredictable(self.op, rule if isinstance(rule, str) else rule(), self.where)

    def in_dtype(self, i: int = 0) -> DType:
        return self.input_specs[i].dtype

    def out_dtype(self, i: int = 0) -> DType:
        return self.output_specs[i].dtype


Kernel = Callable[[OpCall], list[np.ndarray]]
Execute = Callable[[list], list[np.ndarray]]
Prepare = Callable[[OpCall], Execute]
_KERNELS: dict[str, Kernel] = {}
_PREPARES: dict[str, tuple[Prepare, frozenset[int]]] = {}
_LOADED = False
_LOAD_LOCK = threading.Lock()  # Arm's runner calls kernels from several threads at once


def register(*ops: str) -> Callable[[Kernel], Kernel]:
    def deco(fn: Kernel) -> Kernel:
        for op in ops:
            if op in _KERNELS:
                raise RuntimeError(f"two kernels registered for {op}")
            _KERNELS[op] = fn
        return fn
    return deco


def register_plan(*ops: str, static: tuple[int, ...] = ()) -> Callable[[Prepare], Prepare]:
    """Register `prepare(call) -> execute(inputs) -> outputs` for `ops` (see the module's text);
    the kernel registered beside it runs both halves on one call. `static`: the inputs whose
    values prepare may read (a plan made from constant ones holds for every invocation)."""
    def deco(prepare: Prepare) -> Prepare:
        def kernel(call: OpCall) -> list[np.ndarray]:
            return prepare(call)(call.inputs)
        kernel.__name__ = kernel.__qualname__ = prepare.__name__
        kernel.__doc__ = prepare.__doc__
        register(*ops)(kernel)
        for op in ops:
            _PREPARES[op] = (prepare, frozenset(static))
        return prepare
    return deco


def _load_kernel_modules() -> None:
    # Kernel modules register themselves on import; import them all once, lazily. A flag (not
    # "is _KERNELS empty") marks completion, so no thread sees a half-filled registry.
    global _LOADED
    import importlib
    import pkgutil

    import firmware_model.tosa_ops as pkg
    with _LOAD_LOCK:
        if _LOADED:
            return
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name not in ("registry", "numerics", "dtypes"):
                importlib.import_module(f"{pkg.__name__}.{info.name}")
        _LOADED = True


def kernel_for(op: str) -> Kernel:
    if not _LOADED:
        _load_kernel_modules()
    try:
        return _KERNELS[op]
    except KeyError:
        raise TosaUnsupported(f"{op}: npu-bench has no implementation of this operator") from None


def prepare_for(op: str) -> tuple[Prepare, frozenset[int]] | None:
    """The op's (prepare, static input indices), or None when its kernel is not split."""
    if not _LOADED:
        _load_kernel_modules()
    return _PREPARES.get(op)


def supported_ops() -> list[str]:
    if not _LOADED:
        _load_kernel_modules()
    return sorted(_KERNELS)


def op_unpredictable(call: OpCall, e: TosaUnpredictable) -> TosaUnpredictable:
    """A REQUIRE failure reported as the op's. The numeric primitives (numerics.py) raise under
    their own name and without a place ("apply_add_s: REQUIRE sum fits INT32 ..."); a kernel that
    lets one through (ADD, SUB, NEGATE, INTDIV, ...) would name no op, so the failure is renamed
    to the op with the primitive's rule, as the RESCALE and pooling kernels do themselves:
    "ADD (model.tosa op #3 -> y): REQUIRE apply_add_s: sum fits INT32 ...". A failure that
    already names the op (call.require) is returned as it is."""
    if e.where or e.op == call.op:
        return e
    return TosaUnpredictable(call.op, f"{e.op}: {e.rule}", call.where)


def run_op(call: OpCall) -> list[np.ndarray]:
    """Run the op's kernel; a REQUIRE failure names the op (op_unpredictable)."""
    try:
        return kernel_for(call.op)(call)
    except TosaUnpredictable as e:
        named = op_unpredictable(call, e)
        if named is e:
            raise
        raise named from e
