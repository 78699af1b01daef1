"""The REQUIRE monitor: a graph run on the golden model refuses the inputs the interpreter refuses.

The NPU's datapath computes the same arithmetic whether or not TOSA's REQUIREs hold (it wraps),
and so do the golden units (require=False); the RTL is checked against them bit for bit. When a
program runs as a TOSA graph, though, an input for which a REQUIRE fails has no defined result,
and the interpreter says so (TosaUnpredictable). The monitor watches the values each command
actually reads and reports the same failure:

- the compiler lists, per NPU layer, the data-dependent REQUIREs of the TOSA ops the layer fuses
  (manifest `layers[i]["requires"]`, compiler/npu/requires.py) with the point of the unit where
  each op's input values are (operand stages A0/A1/B0/B1, the operation "op", the output stage
  "stage", the int16 table's input "lut", the POOL input box "box");
- the units hand those values to a probe (`probe(point, *arrays)`; no probe, no cost) and the
  probe evaluates the checks with the numeric primitives' own rules (require=True), or the
  kernels' where a kernel states the rule itself;
- the host CPU runs the interpreter's kernels, which check their REQUIREs themselves.

A failure does not stop the command (the datapath's results stay what they are). The invocation
ends with the failure of the TOSA op that comes first in the graph, which is the one the
interpreter reports: an op runs on exact values as long as no op before it failed, and a fused
operation's ops need not be adjacent in the graph (an ADD's input RESCALE may sit before a
convolution that runs earlier on the NPU). So the model goes on after a failure as long as a
command still to run could report an earlier op, and raises as soon as none can (or at END).
Within one op the rule the kernel checks first wins (RESCALE: apply_scale's before the output
zero point's add).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from firmware_model.errors import TosaUnpredictable
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType

I32 = DType.INT32


@dataclass(frozen=True)
class Failure:
    index: int              # the op's index in the graph
    rank: int               # the rule's place among the op's checks (the kernel's order)
    error: TosaUnpredictable

    @property
    def key(self) -> tuple[int, int]:
        return self.index, self.rank


def _rule(e: TosaUnpredictable) -> str:
    return f"{e.op}: {e.rule}"


# ---- the checks: each returns (rank, rule) of the first REQUIRE that fails, or None ----------

SCALE32_RULE = "apply_scale_32: -(1 << (shift - 1)) <= value < (1 << (shift - 1))"


def check_rescale(c: dict, value, multiplier=None, shift=None):
    """RESCALE on its value (input zero point taken off, unless c["input_zp"]) with the record's
    (or the check's own) multiplier and shift, by numerics.rescale_values as the kernel runs it.

    scale32 takes a shortcut: only apply_scale_32's range on the value can fail (its multiplier and
    shift are constants the compiler checked; within the range |result| <= 2^30 + 1, so adding
    any output zero point fits int32), tested directly on the value."""
    if "multiplier" in c:
        multiplier, shift = c["multiplier"], c["shift"]
    else:
        multiplier = np.asarray(multiplier, dtype=np.int64)
        shift = np.asarray(shift, dtype=np.int64) & 63
    if c["scale32"]:
        v = np.asarray(value, dtype=np.int64)
        if c["input_zp"]:
            v = v - c["input_zp"]
        limit = np.left_shift(np.int64(1), np.asarray(shift, dtype=np.int64) - 1)
        if not (np.all(v >= -limit) and np.all(v < limit)):
            return 0, SCALE32_RULE
        return None
    try:
        numerics.rescale_values(value, multiplier=multiplier, shift=shift, input_zp=c["input_zp"],
                                output_zp=c["output_zp"], out_dtype=DType[c["out_dtype"]], scale32=c["scale32"],
                                double_round=c["double_round"], output_unsigned=c["output_unsigned"], require=True)
    except TosaUnpredictable as e:
        # apply_scale_32 / apply_scale_16 first, then apply_add_s of the output zero point
        return (1 if e.op == "apply_add_s" else 0), _rule(e)
    return None


def check_add_sub(c: dict, a, b):
    try:
        (numerics.apply_add_s if c["kind"] == "add" else numerics.apply_sub_s)(a, b, I32)
    except TosaUnpredictable as e:
        return 0, _rule(e)
    return None


def check_mul(c: dict, a, b):
    """MUL of int32 with shift > 0: REQUIRE the rounded product fits int32 (the kernel's rule)."""
    shift = np.int64(c["shift"])
    product = (np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64) + (np.int64(1) << (shift - 1))) >> shift
    if not np.all((product >= I32.min) & (product <= I32.max)):
        return 0, "rounded product fits INT32"
    return None


def check_shift(c: dict, a, b):
    """The shifts: REQUIRE 0 <= amount <= bits - 1 (the kernel's rule), on the B operand as read."""
    bits = c["bits"]
    b = np.asarray(b)
    if not np.all((b >= 0) & (b <= bits - 1)):
        return 0, f"0 <= shift amount <= {bits - 1} for {c['dtype']}"
    return None


def check_table16(c: dict, value):
    """apply_lookup_s: the slope of every entry pair used fits int16; the compiler lists the
    table's indices whose slope does not."""
    bad = np.zeros(513, np.bool_)
    bad[c["bad"]] = True
    index = (np.clip(np.asarray(value, dtype=np.int64), -32768, 32767) + 32768) >> 7
    if np.any(bad[index]):
        return 0, "apply_lookup_s: slope fits int16"
    return None


def check_reduce_sum(c: dict, box):
    """REDUCE_SUM over a reduction window (the POOL command's input box: the window's taps
    row-major over the reduced dims, by channel): every partial sum along the op's axis, in the
    spec's order, fits int32 — after the reductions of the ops before it in the chain (exact sums).
    The NPU adds the window's taps in its own order and wraps; the spec's order is evaluated here."""
    dims = list(c["dims"])
    box = np.asarray(box, dtype=np.int64)
    if box.shape[0] != int(np.prod(dims)) or box.ndim != 3 or box.shape[1] != 1:
        raise RuntimeError(f"REDUCE_SUM monitor: a POOL box of shape {box.shape} is not a window over {dims}")
    values = (box[:, 0, :] - c["input_zp"]).reshape(*dims, box.shape[2])
    for axis in c["before"]:
        values = values.sum(axis=axis, keepdims=True)
    partial = np.cumsum(values, axis=c["axis"])
    if not np.all((partial >= I32.min) & (partial <= I32.max)):
        return 0, "apply_add_s: partial sum fits INT32"
    return None


CHECKS = {"rescale": check_rescale, "add": check_add_sub, "sub": check_add_sub, "mul": check_mul,
          "shift": check_shift, "table16": check_table16, "reduce_sum": check_reduce_sum}


class Probe:
    """The checks of one command, by point; called by the unit as `probe(point, *arrays)`."""

    def __init__(self, monitor: "RequireMonitor", checks: dict[str, list[dict]]):
        self.monitor = monitor
        self.checks = checks

    def __call__(self, point: str, *arrays) -> None:
        for c in self.checks.get(point, ()):
            found = CHECKS[c["kind"]](c, *arrays)
            if found is not None:
                rank, rule = found
                self.monitor.record(c["index"], rank, TosaUnpredictable(c["op"], rule, c["where"]))


class RequireMonitor:
    """The program's REQUIRE checks, per compute command, and the failures of the running
    invocation (see the module docstring)."""

    def __init__(self, program):
        manifest = program.manifest
        self.by_command: dict[int, Probe] = {}
        pending: dict[int, int] = {}       # command index -> the smallest graph index it may report
        for layer in manifest.get("layers", []):
            checks = layer.get("requires")
            if not checks:
                continue
            points: dict[str, list[dict]] = {}
            for c in checks:
                points.setdefault(c["at"], []).append(c)
            probe = Probe(self, points)
            first = min(c["index"] for c in checks)
            for tile in layer.get("tiles", []):
                uc = tile.get("unit_command")
                if uc is not None:
                    self.by_command[uc] = probe
                    pending[uc] = min(pending.get(uc, first), first)
        host_index = {k: e["graph_index"] for k, e in enumerate(manifest.get("host_ops", [])) if "graph_index" in e}
        self.host_index = host_index
        if host_index:
            from firmware_model.arch.isa import Opcode
            for pc, cmd in enumerate(program.commands):
                if cmd.opcode == Opcode.HOST and cmd.value in host_index:
                    pending[pc] = min(pending.get(pc, host_index[cmd.value]), host_index[cmd.value])
        # The commands that may report a failure, in program order, and the smallest graph index
        # any of them from there on may report (for check_after).
        self._pcs = sorted(pending)
        self._suffix_min = [0] * len(self._pcs)
        best = None
        for k in range(len(self._pcs) - 1, -1, -1):
            idx = pending[self._pcs[k]]
            best = idx if best is None else min(best, idx)
            self._suffix_min[k] = best
        self.failure: Failure | None = None

    @property
    def active(self) -> bool:
        return bool(self.by_command) or bool(self.host_index)

    @property
    def watched(self) -> tuple[int, ...]:
        """The commands that may report a failure (after which check_after may raise)."""
        return tuple(self._pcs)

    def begin(self) -> None:
        self.failure = None

    def probe(self, pc: int) -> Probe | None:
        return self.by_command.get(pc)

    def record(self, index: int, rank: int, error: TosaUnpredictable) -> None:
        f = Failure(index, rank, error)
        if self.failure is None or f.key < self.failure.key:
            self.failure = f

    def host_failure(self, host_op: int, error: TosaUnpredictable) -> bool:
        """A host op's kernel refused its input: recorded (True) when the op's graph index is
        known, else the caller re-raises it."""
        index = self.host_index.get(host_op)
        if index is None:
            return False
        self.record(index, 0, error)
        return True

    def check_after(self, pc: int) -> None:
        """Raise the failure once no command after pc can report an earlier op."""
        f = self.failure
        if f is not None:
            k = bisect.bisect_right(self._pcs, pc)
            if k == len(self._pcs) or f.index < self._suffix_min[k]:
                raise f.error

    def finish(self) -> None:
        if self.failure is not None:
            raise self.failure.error
