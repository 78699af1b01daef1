"""The TOSA interpreter: runs a whole graph with the op kernels of firmware_model.tosa_ops.

    interp = Interpreter(graph)
    outputs = interp.run({"input-0": x})        # one invocation
    outputs = interp.run({"input-0": y})        # the next one: variables carried over
    interp.state                                 # {variable name: value}
    interp.load_state({...}); interp.reset_state()

Execution follows the spec's graph semantics: the `main` block's operators in order, each
tensor written once; CONST / CONST_SHAPE produce their data; shape operands are ordinary values;
dimensions the graph leaves open (-1) are fixed by the inputs of the invocation.

Variables (the spec's stateful operators) live in the Interpreter object, which is the
"session": their values persist from one `run` to the next. Two forms are accepted:
- the flatbuffer form written by tosa-opt: a tensor with `is_variable` (its `data` the initial
  value), read by IDENTITY with attr_kind "VariableReadAttribute" (input: the variable tensor)
  and written by IDENTITY with "VariableWriteAttribute" (output: the variable tensor); the
  declaration is implicit at the start of every invocation;
- the VARIABLE / VARIABLE_READ / VARIABLE_WRITE operators, the declaration being the VARIABLE op.
The spec's rules hold: a variable is declared once per invocation (REQUIRE), read only after it
has been written or initialised (REQUIRE), and the shape and type of a read or write must match
the variable's: a mismatch is a static property of the graph and reported as a TosaError (Arm's
reference model does the same for shapes and crashes for types).

An invocation is a transaction: the state changes only when `run` returns normally, so a failed
invocation leaves the session (and a state file saved from it) as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from types import MappingProxyType
from typing import Mapping, NoReturn

import numpy as np

from compiler.ir import Block, Graph, Operator
from firmware_model.errors import (NpuBenchError, TosaError, TosaUnpredictable, TosaUnsupported)
from firmware_model.tosa_ops import limits
from firmware_model.tosa_ops.dtypes import DType, value_problem
from firmware_model.tosa_ops.op_utils import MAX_RANK
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, kernel_for, op_unpredictable, prepare_for


class InterpreterError(NpuBenchError):
    """The interpreter cannot run the graph with what it was given: an input that is missing,
    unknown or of the wrong shape or type, or a state that does not fit the graph's variables."""


# Number of inputs and outputs of each operator in TOSA 1.0 (None: any number >= 1).
# A different count is the spec's ERROR_IF on the operand lists (Arm's WrongInputList tests).
OP_ARITY: dict[str, tuple[int | None, int]] = {
    "ARGMAX": (1, 1), "AVG_POOL2D": (3, 1), "CONV2D": (5, 1), "CONV3D": (5, 1),
    "DEPTHWISE_CONV2D": (5, 1), "MATMUL": (4, 1), "MAX_POOL2D": (1, 1),
    "TRANSPOSE_CONV2D": (5, 1), "CLAMP": (1, 1), "ADD": (2, 1), "ARITHMETIC_RIGHT_SHIFT": (2, 1),
    "BITWISE_AND": (2, 1), "BITWISE_OR": (2, 1), "BITWISE_XOR": (2, 1), "INTDIV": (2, 1),
    "LOGICAL_AND": (2, 1), "LOGICAL_LEFT_SHIFT": (2, 1), "LOGICAL_RIGHT_SHIFT": (2, 1),
    "LOGICAL_OR": (2, 1), "LOGICAL_XOR": (2, 1), "MAXIMUM": (2, 1), "MINIMUM": (2, 1),
    "MUL": (3, 1), "POW": (2, 1), "SUB": (2, 1), "TABLE": (2, 1), "ABS": (1, 1),
    "BITWISE_NOT": (1, 1), "CEIL": (1, 1), "CLZ": (1, 1), "COS": (1, 1), "EXP": (1, 1),
    "FLOOR": (1, 1), "LOG": (1, 1), "LOGICAL_NOT": (1, 1), "NEGATE": (3, 1),
    "RECIPROCAL": (1, 1), "RSQRT": (1, 1), "SIN": (1, 1), "SELECT": (3, 1), "EQUAL": (2, 1),
    "GREATER": (2, 1), "GREATER_EQUAL": (2, 1), "REDUCE_ALL": (1, 1), "REDUCE_ANY": (1, 1),
    "REDUCE_MAX": (1, 1), "REDUCE_MIN": (1, 1), "REDUCE_PRODUCT": (1, 1), "REDUCE_SUM": (1, 1),
    "CONCAT": (None, 1), "PAD": (3, 1), "RESHAPE": (2, 1), "REVERSE": (1, 1), "SLICE": (3, 1),
    "TILE": (2, 1), "TRANSPOSE": (1, 1), "GATHER": (2, 1), "SCATTER": (3, 1), "RESIZE": (4, 1),
    "CAST": (1, 1), "RESCALE": (5, 1), "CONST": (0, 1), "CONST_SHAPE": (0, 1),
    "IDENTITY": (1, 1), "SIGMOID": (1, 1), "TANH": (1, 1), "ERF": (1, 1),
    # shape operators (firmware_model/tosa_ops/shape_ops.py)
    "DIM": (1, 1), "ADD_SHAPE": (2, 1), "SUB_SHAPE": (2, 1), "MUL_SHAPE": (2, 1), "MAX_SHAPE": (2, 1),
    "MIN_SHAPE": (2, 1), "DIV_FLOOR_SHAPE": (2, 1), "DIV_CEIL_SHAPE": (2, 1), "MOD_SHAPE": (2, 1),
    "EXP2_SHAPE": (1, 1), "LOG2_CEIL_SHAPE": (1, 1), "LOG2_FLOOR_SHAPE": (1, 1), "SLICE_SHAPE": (3, 1),
    "CONCAT_SHAPE": (None, 1), "ASSERT_EQUAL_SHAPE": (2, 0),
}

VARIABLE_READ_KIND = "VariableReadAttribute"
VARIABLE_WRITE_KIND = "VariableWriteAttribute"
VARIABLE_KINDS = (VARIABLE_READ_KIND, VARIABLE_WRITE_KIND)
# Ops never treated as invocation-independent (state, control flow, opaque).
NEVER_CACHED = {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "CUSTOM", "COND_IF", "WHILE_LOOP"}
# Ops that may have a plan other than a kernel op's (Interpreter._special_plan).
_SPECIAL_OPS = frozenset({"VARIABLE", "IDENTITY", "VARIABLE_READ", "VARIABLE_WRITE", "CONST", "CONST_SHAPE"})
# The variables (and variable tensors) of a graph without any: one read-only empty mapping.
_NONE: Mapping = MappingProxyType({})


@dataclass
class _Variable:
    """A variable of the graph: its uid (variable_name), tensor, type, shape and initial value."""
    uid: str
    tensor: str
    dtype: DType
    shape: tuple[int, ...]
    initial: np.ndarray | None


@dataclass
class _VarState:
    data: np.ndarray | None
    is_written: bool


class _OpPlan:
    """The invocation-independent part of running one op (Interpreter._plan). The class holds
    each field's default; a plan sets only what its op has (a CONST op's plan: four fields)."""
    _where: str | None = None
    in_specs: list = []                     # TensorSpec, None for a name that is no tensor
    out_specs: list = []
    kernel = None
    fault: Exception | None = None          # an arity fault, an op without a kernel, a bad constant
    extra: Mapping = MappingProxyType({})   # CONST / CONST_SHAPE: the tensor's data
    # Prepare once, execute many (registry.register_plan): the kernel's prepare half and the
    # inputs whose values it reads; `cacheable` when those are constant tensors and every other
    # input's declared shape is fully known (`shapes_known`), so one prepared `execute` holds for
    # every invocation. Which tensors are constant is worked out when a session's second
    # invocation starts (Interpreter._find_constants): until then `cacheable` is None and a plan
    # made from the static inputs alone waits in `candidate`.
    prepare = None
    static: frozenset = frozenset()
    shapes_known = False
    cacheable: bool | None = False
    candidate = None
    execute = None                          # set once the op has run with every check
    dynamic: tuple = ()                     # the inputs outside `static`
    const_values: list | None = None        # CONST / CONST_SHAPE: the checked data

    def __init__(self, op: Operator, idx: int, source: str, kind: str):
        self.op = op                        # the op it was made for
        self.idx = idx                      # its index in the block, and the graph's source: the
        self.source = source                # message prefix `where`, formatted when first asked for
        self.kind = kind                    # "kernel", "const", or the variable ops' "declare" / "read" / "write"

    @property
    def where(self) -> str:
        """"model.tosa op #12 -> conv_out": the prefix of the op's messages."""
        if self._where is None:
            self._where = _where_text(self.source, self.idx, self.op)
        return self._where


_STORAGE = {t: t.storage for t in DType if t.has_storage}
_INT48 = DType.INT48
_SHAPE = DType.SHAPE
# bytes per element of each type with storage (the size check takes 1 for the others: a lower bound)
_ITEMSIZE = {t: t.storage.itemsize for t in DType if t.has_storage}
_MAX_ITEMSIZE = max(_ITEMSIZE.values())


_KERNEL_INFO: dict[str, tuple] = {}


def _kernel_info(name: str) -> tuple:
    """(inputs, outputs, kernel, (prepare, static) or None) of an op: its OP_ARITY entry ((None,
    None) when it has none) and the registry's answers, asked once per op name (an op without a
    kernel raises TosaUnsupported each time)."""
    info = _KERNEL_INFO.get(name)
    if info is None:
        info = _KERNEL_INFO[name] = (*OP_ARITY.get(name, (None, None)), kernel_for(name), prepare_for(name))
    return info


_DYNAMIC: dict[tuple, tuple] = {}
_NO_EXTRA = _OpPlan.extra                   # a kernel op's `extra`: a read-only empty mapping


def _dynamic_inputs(static: frozenset, n: int) -> tuple:
    """The indices of n inputs that are not in `static` (one answer per split op kind and arity)."""
    key = (static, n)
    found = _DYNAMIC.get(key)
    if found is None:
        found = _DYNAMIC[key] = tuple(i for i in range(n) if i not in static)
    return found


class _PlanCall(OpCall):
    """The OpCall of a planned op: its `where` is the plan's text, formatted when first read
    (kernels read it to report an error, so a passing op never formats it). Constructed as an
    OpCall with the plan in place of the text (every field set here, as OpCall's __init__ would).
    It keeps the plan's (source, index, op), not the plan: a prepared execute holds its call and
    the plan holds the execute, and a reference back would make every session a reference cycle,
    left for the cyclic garbage collector instead of freed when the session goes."""

    def __init__(self, op, attrs, inputs, input_specs, output_specs, plan, attr_kind, extra):
        self.op, self.attrs, self.inputs = op, attrs, inputs
        self.input_specs, self.output_specs = input_specs, output_specs
        self._where_of, self.attr_kind, self.extra = (plan.source, plan.idx, plan.op), attr_kind, extra

    @property
    def where(self) -> str:
        w = self._where_of
        if type(w) is not str:
            w = self._where_of = _where_text(*w)
        return w

    @where.setter
    def where(self, value) -> None:
        self._where_of = value


def _where_text(source: str, idx: int, op: Operator) -> str:
    """"model.tosa op #12 -> conv_out": where an op's messages say it is."""
    outs = ", ".join(op.outputs) if op.outputs else "-"
    return f"{source} op #{idx} -> {outs}"


def _shape_matches(declared, actual) -> bool:
    return len(declared) == len(actual) and all(d < 0 or d == a for d, a in zip(declared, actual))


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


class Interpreter:
    """A session running one graph; variables persist across `run` calls."""

    # Defaults a session replaces when it gets there (class attributes: a one-shot session, the
    # conformance set's, never stores them).
    invocations = 0
    _implicit: "list[_Variable] | tuple" = ()
    # Ops whose value does not depend on the invocation: CONST/CONST_SHAPE and ops fed only by
    # them (e.g. a RESHAPE of weights). Kernels are pure, so their outputs from a successful
    # invocation are reused by later ones (that one checked their rules). Found when a
    # second invocation starts (_find_constants): a one-shot session never needs them.
    _constant_ops: "set[int] | None" = None
    _constant_tensors: "set[str] | None" = None
    _constant_values: "dict[str, np.ndarray] | None" = None
    # The ops a later invocation runs (the constant ones are reused), in graph order.
    _varying_ops: "list | None" = None
    _prepared_steps: "list | None" = None    # _make_prepared_steps, from the third invocation

    def __init__(self, graph: Graph):
        self.graph = graph
        self.block: Block = graph.main
        self.source = graph.source
        variable_tensors, any_variable = self._check_tensors()      # also the main block's specs (self._specs)
        if any_variable:
            self._variables = self._collect_variables(variable_tensors)
        else:                                           # (what _collect_variables finds then)
            self._variables = self._uid_of_tensor = _NONE
        self._state: dict[str, _VarState] = {}
        # Variables with a VARIABLE op are declared there; the others at the start of a run.
        if self._variables:
            declared_by_op = set()
            for op in self.block.operators:
                if op.op == "VARIABLE":
                    declared_by_op.add(self._variable_of(op, len(declared_by_op)).uid)
            self._implicit = [v for v in self._variables.values() if v.uid not in declared_by_op]
        self._variable_tensors = variable_tensors       # (for _find_constants)
        self._plans: list[_OpPlan | None] = [None] * len(self.block.operators)

    def _check_tensors(self) -> tuple[list[tuple[Block, list]], bool]:
        """The graph's declared tensors, looked at once: the inputs, outputs and variables must
        hold integer-profile values (said first, before a run tries to store one), and no tensor
        nor all of them together may be too large to hold (refused before any allocation). The
        same pass makes the main block's tensor specs (self._specs).
        Returns the variable tensors of each block that has any, in the graph's order, and whether
        there are any."""
        limit = limits.tensor_limit()
        # The sum over every tensor of |product of its dimensions| bounds each tensor's size in
        # elements and their total (limits.tensor_bytes counts a tensor with an unknown dimension
        # as 0, the bound as the product's magnitude): when that many elements of the widest type
        # fit in one tensor limit, no size rule can fail and the sizes are not looked at one by one
        # (_check_sizes, otherwise). Numpy dimensions (a product that may wrap) make the bound a
        # numpy integer, and then _check_sizes too.
        bound = 0
        variables = []                  # (block, its variable tensors) of the blocks that have any
        main = self.block
        regions = self.graph.regions    # Graph.blocks()
        blocks = regions[0].blocks if len(regions) == 1 else [b for r in regions for b in r.blocks]
        new, spec_type = tuple.__new__, TensorSpec      # TensorSpec(shape, dtype), without its Python-level __new__
        for b in blocks:
            specs, found = {}, None
            for name, t in b.tensors.items():
                shape = tuple(t.shape)
                specs[name] = new(spec_type, (shape, t.dtype))
                bound += abs(prod(shape))
                if t.is_variable:
                    if found is None:
                        found = []
                        variables.append((b, found))
                    found.append(t)
            if b is main:
                self._specs = specs
        any_variable = bool(variables)
        # Inputs, outputs and variables must hold integer-profile values: say which one does not
        # before a run tries to store it.
        specs = self._specs
        for name in main.inputs:
            spec = specs.get(name)
            if spec is not None and spec.dtype not in _STORAGE:
                self._outside_profile("input", name, spec)
        for name in main.outputs:
            spec = specs.get(name)
            if spec is not None and spec.dtype not in _STORAGE:
                self._outside_profile("output", name, spec)
        if any_variable:
            for _, found in variables:
                for t in found:
                    if not t.dtype.has_storage:
                        raise TosaUnsupported(f"{self.source}: variable '{t.variable_name or t.name}' has element "
                                              f"type {t.dtype.name}, outside npu-bench's integer profile")
        if type(bound) is not int or bound * _MAX_ITEMSIZE > limit:
            self._check_sizes(blocks, limit)
        return variables, any_variable

    def _outside_profile(self, kind: str, name: str, spec: TensorSpec) -> NoReturn:
        raise TosaUnsupported(f"{self.source}: graph {kind} '{name}' has element type {spec.dtype.name}, "
                              "outside npu-bench's integer profile")

    def _check_sizes(self, blocks: list[Block], limit: int) -> None:
        """No tensor larger than `limit` bytes (the first one in graph order is named), and the
        declared tensors together within limits.GRAPH_FACTOR limits."""
        total = 0
        too_large = None
        for b in blocks:
            tensors = b.tensors
            # limits.tensor_bytes: 0 for an unknown dimension; numpy dimensions (whose product may
            # wrap) again in Python integers below. (min(shape) without `default=`: a keyword makes
            # min several times slower)
            sizes = []
            for t in tensors.values():
                shape = tuple(t.shape)
                sizes.append(_ITEMSIZE.get(t.dtype, 1) * prod(shape) if not shape or min(shape) >= 0 else 0)
            subtotal = sum(sizes)
            if type(subtotal) is not int:       # a numpy size among them
                sizes = [limits.tensor_bytes(t.shape, _ITEMSIZE.get(t.dtype, 1)) for t in tensors.values()]
                subtotal = sum(sizes)
            if too_large is None and sizes and max(sizes) > limit:
                t = next(t for t, n in zip(tensors.values(), sizes) if n > limit)
                too_large = (t, _ITEMSIZE.get(t.dtype, 1))
            total += subtotal
        if too_large is not None:
            t, itemsize = too_large
            limits.check_tensor(f"{self.source}: tensor '{t.name}'", t.shape, itemsize, limit)
        if total > limits.GRAPH_FACTOR * limit:
            limits.check_total(f"{self.source}: the graph's declared tensors", total)

    # ---- variables ----------------------------------------------------------------------

    def _collect_variables(self, variable_tensors: list[tuple[Block, list]]) -> dict[str, _Variable]:
        found: dict[str, _Variable] = {}
        by_tensor: dict[str, str] = {}
        self._uid_of_tensor = by_tensor
        for _, tensors in variable_tensors:
            if tensors:
                break
        else:                               # no variables
            return found
        # Variables are visible across blocks; the main block's declaration wins.
        main = self.block
        for b, tensors in sorted(variable_tensors, key=lambda bv: bv[0] is not main):
            for t in tensors:
                uid = t.variable_name or t.name
                if t.name in by_tensor:
                    continue
                if uid in found and b is self.block:
                    raise TosaUnpredictable("VARIABLE", f"variable '{uid}' is declared twice in one graph "
                                            f"(tensors '{found[uid].tensor}' and '{t.name}')", self.source)
                if uid in found:
                    continue
                initial = None
                if t.data is not None:
                    initial = np.asarray(t.data)
                    if initial.dtype != t.dtype.storage or not _shape_matches(t.shape, initial.shape):
                        raise TosaError("VARIABLE", f"initial value of '{uid}' is {initial.dtype}"
                                        f"{list(initial.shape)}, the variable is {t.describe()}", self.source)
                found[uid] = _Variable(uid, t.name, t.dtype, tuple(t.shape), initial)
                by_tensor[t.name] = uid
        return found

    def _variable_of(self, op: Operator, idx: int) -> _Variable:
        """The variable an op refers to: a variable tensor among its operands, or attrs uid/name."""
        for name in list(op.inputs) + list(op.outputs):
            if name in self._uid_of_tensor:
                return self._variables[self._uid_of_tensor[name]]
        for key in ("uid", "name", "variable_name"):
            ref = op.attrs.get(key)
            if ref is not None and str(ref) in self._variables:
                return self._variables[str(ref)]
        raise TosaError(op.op, "the op refers to no variable of the graph", self._where(idx, op))

    @property
    def variables(self) -> dict[str, tuple[DType, tuple[int, ...]]]:
        """Each variable's (type, shape), by variable name."""
        return {uid: (v.dtype, v.shape) for uid, v in self._variables.items()}

    @property
    def state(self) -> dict[str, np.ndarray]:
        """The current value of every variable that has one (copies), by variable name."""
        out = {}
        for uid, v in self._variables.items():
            st = self._state.get(uid)
            if st is None:
                if v.initial is not None:
                    out[uid] = v.initial.copy()
            elif st.is_written and st.data is not None:
                out[uid] = st.data.copy()
        return out

    def load_state(self, values: Mapping[str, np.ndarray]) -> None:
        """Set variables' values (e.g. from a state file); the others keep theirs."""
        new = {}
        for uid, value in values.items():
            if uid not in self._variables:
                known = ", ".join(sorted(self._variables)) or "none"
                raise InterpreterError(f"{self.source}: state has a value for '{uid}', which is not a "
                                       f"variable of the graph (variables: {known})")
            v = self._variables[uid]
            arr = np.asarray(value)
            problem = value_problem(arr, v.dtype, v.shape)
            if problem:
                raise InterpreterError(f"{self.source}: state of variable '{uid}' {problem}")
            new[uid] = _VarState(arr.copy(), True)
        self._state.update(new)

    def reset_state(self) -> None:
        """Forget every variable's value: the next run starts from the initial values."""
        self._state.clear()
        self.invocations = 0

    # ---- compile-time use: the compiler's passes check graphs with these rules ------------

    def graph_variables(self) -> list[_Variable]:
        """The graph's variables (uid, tensor, dtype, shape, initial value), in declaration order."""
        return list(self._variables.values())

    def variable_of(self, op: Operator, idx: int) -> _Variable:
        """The variable a VARIABLE / read / write op refers to (TosaError if none)."""
        return self._variable_of(op, idx)

    def checking_invocation(self, inputs: Mapping[str, np.ndarray],
                            values: Mapping[str, np.ndarray]) -> tuple[dict, tuple[dict, set]]:
        """Start an invocation for compile-time checks: the inputs bound and checked as `run`
        does, every variable allocated and written with `values[uid]` (placeholder data), the
        implicit declarations made. Returns (env, invocation state) for `execute_op`."""
        env = self._bind_inputs(inputs)
        work = {uid: _VarState(np.asarray(values[uid]), True) for uid in self._variables}
        seen: set[str] = set()
        for v in self._implicit:
            self._declare(v, work, seen, None, -1)
        return env, (work, seen)

    def execute_op(self, idx: int, op: Operator, env: dict, invocation: tuple[dict, set]) -> None:
        """Run op #idx of the main block on the values in `env` (adding its outputs), with every
        check `run` makes: operand lists, the kernel's ERROR_IF / REQUIRE rules, declared output
        shapes, the variable rules. The compiler's validation runs graphs op by op with this."""
        work, seen = invocation
        self._execute(idx, op, env, work, seen, typed=False)

    # ---- running ------------------------------------------------------------------------

    def _where(self, idx: int, op: Operator) -> str:
        return _where_text(self.source, idx, op)

    def _bind_inputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {}
        expected = self.block.inputs
        for n in inputs:
            if n not in expected:
                raise InterpreterError(f"{self.source}: '{n}' is not an input of the graph "
                                       f"(inputs: {', '.join(expected) or 'none'})")
        specs = self._specs                 # the main block's tensors' (shape, dtype)
        for name in expected:
            if name not in inputs:
                raise InterpreterError(f"{self.source}: no value given for graph input '{name}'")
            spec = specs.get(name)
            if spec is None:
                raise TosaError("GRAPH", f"graph input '{name}' is not a tensor of the block", self.source)
            arr = inputs[name]
            if type(arr) is not np.ndarray:
                arr = np.asarray(arr)
            dtype = spec.dtype
            storage = _STORAGE.get(dtype) or dtype.storage     # (the latter names a type without one)
            if arr.dtype != storage:
                raise InterpreterError(f"{self.source}: input '{name}' is {arr.dtype}, the graph wants "
                                       f"{dtype.name} ({storage})")
            if arr.shape != spec.shape and not _shape_matches(spec.shape, arr.shape):
                raise InterpreterError(f"{self.source}: input '{name}' has shape {list(arr.shape)}, the graph "
                                       f"wants {_fmt(spec.shape)}")
            if dtype is _INT48 and arr.size and (int(arr.min()) < dtype.min or int(arr.max()) > dtype.max):
                raise InterpreterError(f"{self.source}: input '{name}' has values outside the INT48 range")
            env[name] = arr
        return env

    def _find_constant_ops(self, variable_tensors: list[tuple[Block, list]]) -> set[int]:
        """Indices of the ops whose outputs are the same in every invocation."""
        main = self.block
        variables = {t.name for b, tensors in variable_tensors if b is main for t in tensors}
        constant: set[str] = set()
        found: set[int] = set()
        for idx, op in enumerate(self.block.operators):
            if op.op in ("CONST", "CONST_SHAPE") or (
                    op.op not in NEVER_CACHED and op.inputs and op.attr_kind not in VARIABLE_KINDS
                    and all(n in constant for n in op.inputs if n) and variables.isdisjoint(op.outputs)):
                found.add(idx)
                constant.update(op.outputs)
        self._constant_tensors = constant
        return found

    def _find_constants(self) -> None:
        """The constant ops and tensors, the ops a later invocation runs, and which planned ops'
        prepared executes hold for every invocation (their candidates kept, the others dropped)."""
        self._constant_ops = self._find_constant_ops(self._variable_tensors)
        self._varying_ops = [(idx, op) for idx, op in enumerate(self.block.operators)
                             if idx not in self._constant_ops]
        for plan in self._plans:
            if plan is not None and plan.cacheable is None:
                plan.cacheable = self._cacheable(plan)
                if plan.cacheable and plan.candidate is not None:
                    plan.execute = plan.candidate
                plan.candidate = None

    def _make_prepared_steps(self) -> list:
        """The ops a later invocation runs (`_varying_ops`), each with its prepared execute (None
        for an op that is not a kernel prepared for good, which `_execute` runs) and its operand
        names."""
        steps = []
        for idx, op in self._varying_ops:
            plan = self._plans[idx]
            prepared = plan.execute if plan is not None and plan.op is op else None
            steps.append((prepared, tuple(op.inputs), tuple(op.outputs), idx, op))
        return steps

    def _cacheable(self, plan: "_OpPlan") -> bool:
        """Whether one prepared execute of a split kernel holds for every invocation: its static
        inputs are constant tensors (and the others' declared shapes are known)."""
        constant, static = self._constant_tensors, plan.static
        return plan.shapes_known and all(tname in constant for i, tname in enumerate(plan.op.inputs) if i in static)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One invocation: the graph's outputs by name. Raises TosaError (ERROR_IF),
        TosaUnpredictable (REQUIRE), TosaUnsupported or InterpreterError."""
        if self.invocations == 0 and self._constant_ops is None and not self._variables:
            outputs = self._run_first(inputs)
            if outputs is not None:
                self.invocations = 1
                return outputs
        return self._run_checked(inputs)

    def _run_first(self, inputs: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray] | None":
        """A session's first invocation when the graph has no variables and every rule holds: the
        same rules as _run_checked, each seen at once, with no plans kept (a one-shot session, the
        conformance set's, never uses them; a second invocation plans its ops). The outputs, or
        None as soon as anything is not as usual (an input of another type or shape, an operand
        list or declared spec the rules reject, a kernel raising, a result of another type or
        shape, a declared shape with an unknown dimension, an op other than CONST, CONST_SHAPE
        and kernel ops): _run_checked then runs the invocation from the start and says what is
        wrong. Kernels are pure, so what ran here changes nothing. The kernel of a split op is
        prepare(call)(inputs) with every input given (prepare reads only its static ones).
        Types are compared by identity with their storage dtype (numpy's built-in dtypes are
        single objects): a type without storage (None) or a dtype equal to it but another object
        (other metadata, int64 as longlong) is not the usual case."""
        block, specs = self.block, self._specs
        storage_of = _STORAGE.get
        env: dict[str, np.ndarray] = {}
        try:
            # _bind_inputs: exactly the graph's inputs, each an array of its declared type and shape
            for name in block.inputs:
                arr = inputs[name]
                spec = specs[name]
                if (type(arr) is not np.ndarray or arr.dtype is not storage_of(spec.dtype) or arr.shape != spec.shape
                        or spec.dtype is _INT48):
                    return None
                env[name] = arr
            if len(env) != len(inputs):     # (every key of env is one of inputs': the same names)
                return None
            tensors, info_of, source, new_call = block.tensors, _KERNEL_INFO.get, self.source, _PlanCall.__new__
            for idx, op in enumerate(block.operators):
                name, outs = op.op, op.outputs
                if name == "CONST" or name == "CONST_SHAPE":
                    # _usual_constant: no inputs, one output of the graph, data of its type and shape
                    tname = outs[0]
                    spec = specs[tname]
                    value = tensors[tname].data
                    if (op.inputs or len(outs) != 1 or type(value) is not np.ndarray or value.shape != spec.shape
                            or value.dtype is not storage_of(spec.dtype) or value.ndim > MAX_RANK
                            or (name != "CONST" and spec.dtype is not _SHAPE) or tname in env):
                        return None
                    env[tname] = value
                    continue
                info = info_of(name)        # an op planned before (in any session) and not special
                if info is None or (name in _SPECIAL_OPS and (name != "IDENTITY" or op.attr_kind in VARIABLE_KINDS)):
                    return None
                n_in, n_out, kernel, _ = info
                ins = op.inputs
                if len(outs) != n_out or (len(ins) != n_in if n_in is not None else not ins):
                    return None             # (n_out None: an op without an OP_ARITY entry)
                in_specs = list(map(specs.get, ins))
                out_specs = list(map(specs.get, outs))
                if None in in_specs or None in out_specs:
                    return None
                in_arrays = list(map(env.__getitem__, ins))     # (KeyError: not written yet)
                for tname in outs:
                    if tname in env:
                        return None
                call = new_call(_PlanCall)  # _PlanCall's fields, as its __init__ sets them
                call.op, call.attrs, call.inputs, call.input_specs, call.output_specs = name, op.attrs, in_arrays, in_specs, out_specs
                call._where_of, call.attr_kind, call.extra = (source, idx, op), op.attr_kind, _NO_EXTRA
                results = kernel(call)
                if len(results) != len(out_specs):
                    return None
                for tname, spec, arr in zip(outs, out_specs, results):
                    if type(arr) is not np.ndarray:
                        arr = np.asarray(arr)
                    if arr.dtype is not storage_of(spec.dtype) or arr.shape != spec.shape:
                        return None
                    env[tname] = arr
            outputs = {}
            for name in block.outputs:
                outputs[name] = env[name]
        except Exception:                   # a kernel's failure, a name not found: said by _run_checked
            return None
        return outputs

    def _run_checked(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """An invocation with every rule checked as each op runs (plans made and kept)."""
        env = self._bind_inputs(inputs)
        cached = self._constant_values
        if cached is not None:
            env.update(cached)
        elif self.invocations and self._constant_ops is None:
            self._find_constants()          # a second invocation: reuse is worth knowing now
        # Working copy of the variable state: committed only when the invocation succeeds.
        work: dict[str, _VarState] = dict(self._state)
        seen: set[str] = set()
        for v in self._implicit:
            self._declare(v, work, seen, None, -1)
        execute = self._execute
        if cached is not None:
            steps = self._prepared_steps
            if steps is None:
                steps = self._prepared_steps = self._make_prepared_steps()
            for prepared, in_names, out_names, idx, op in steps:
                # _execute's prepared branch, inline: a third of a small op's time was the call
                # into _execute and _call_kernel around its kernel (mlp: 55 ops, 1.5 us each)
                if prepared is not None:
                    try:
                        ins = [env[t] for t in in_names]
                    except KeyError:
                        pass                # not written this time: the checked path says so
                    else:
                        try:
                            results = prepared(ins)
                        except Exception as e:
                            self._kernel_failed(self._plans[idx], e)
                        for tname, arr in zip(out_names, results):
                            env[tname] = arr
                        continue
                execute(idx, op, env, work, seen)
                if prepared is None and self._plans[idx] is not None and self._plans[idx].execute is not None:
                    self._prepared_steps = None     # prepared for good just now: take it next time
        else:
            # Every op runs; a CONST / CONST_SHAPE with the usual operands and data only stores
            # its data, as its planned execution would (_usual_constant).
            tensors, specs, uid_of = self.block.tensors, self._specs, self._uid_of_tensor
            for idx, op in enumerate(self.block.operators):
                name = op.op
                if name != "CONST" and name != "CONST_SHAPE":
                    execute(idx, op, env, work, seen)
                    continue
                # _usual_constant, inline
                outs = op.outputs
                tname = outs[0] if len(outs) == 1 and not op.inputs else None
                spec = specs.get(tname)
                value = None if spec is None or tname in uid_of else tensors[tname].data
                if not (type(value) is np.ndarray and value.shape == spec.shape and value.dtype == _STORAGE.get(spec.dtype)
                        and value.ndim <= MAX_RANK and (name == "CONST" or spec.dtype is _SHAPE)):
                    execute(idx, op, env, work, seen)
                    continue
                if tname in env:
                    raise TosaError(name, f"output '{tname}' is written twice", self._where(idx, op))
                env[tname] = value
        outputs = {}                        # graph_outputs, inline
        for name in self.block.outputs:
            if name not in env:
                raise TosaError("GRAPH", f"graph output '{name}' is never written", self.source)
            outputs[name] = env[name]
        self._state = work
        self.invocations += 1
        if cached is None and self._constant_ops is not None:
            self._constant_values = {name: env[name] for idx in self._constant_ops
                                     for name in self.block.operators[idx].outputs if name in env}
        return outputs

    def graph_outputs(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's outputs from the values of an invocation (TosaError if one was never written)."""
        outputs = {}
        for name in self.block.outputs:
            if name not in env:
                raise TosaError("GRAPH", f"graph output '{name}' is never written", self.source)
            outputs[name] = env[name]
        return outputs

    def _declare(self, v: _Variable, work, seen, op: Operator | None, idx: int) -> None:
        where = self._where(idx, op) if op is not None else self.source
        if v.uid not in work:
            # First invocation: allocate; with an initial value the variable counts as written.
            work[v.uid] = _VarState(None if v.initial is None else v.initial.copy(), v.initial is not None)
        elif v.uid in seen:
            raise TosaUnpredictable("VARIABLE", f"variable '{v.uid}' is declared twice in one invocation", where)
        seen.add(v.uid)

    def _plan(self, idx: int, op: Operator) -> "_OpPlan":
        """What an op's execution needs that does not change between invocations, found once:
        its message prefix, its kind, the operand specs, its kernel, and the first static fault of
        its operand lists (raised when the op runs, so faults surface in graph order)."""
        name = op.op
        source = self.source
        plan = self._special_plan(idx, op) if name in _SPECIAL_OPS else None
        if plan is None:
            plan = _OpPlan(op, idx, source, "kernel")
            specs = self._specs
            plan.in_specs = in_specs = list(map(specs.get, op.inputs))       # (no comprehension frame)
            plan.out_specs = out_specs = list(map(specs.get, op.outputs))
            try:
                info = _KERNEL_INFO.get(name)                 # _kernel_info, its usual case inline
                if info is None:                              # (the operand lists before the kernel)
                    self._check_arity(plan, op, *OP_ARITY.get(name, (None, None)))
                    info = _kernel_info(name)
                n_in, n_out, plan.kernel, split = info
                if n_in is None or len(op.inputs) != n_in or len(op.outputs) != n_out:
                    self._check_arity(plan, op, n_in, n_out)
                if split is not None:
                    plan.prepare, plan.static = split
                    key = (plan.static, len(in_specs))             # _dynamic_inputs, its usual case inline
                    dynamic = _DYNAMIC.get(key)
                    plan.dynamic = dynamic = dynamic if dynamic is not None else _dynamic_inputs(*key)
                    known = True            # every non-static input's declared shape fully known
                    for i in dynamic:
                        spec = in_specs[i]
                        if spec is None or (spec.shape and min(spec.shape) < 0):
                            known = False
                            break
                    plan.shapes_known = known
                    plan.cacheable = None if self._constant_tensors is None else self._cacheable(plan)
                # A variable changes only through a variable write, which the state machinery sees;
                # any other op writing its tensor would be a second, unchecked way in.
                uid_of = self._uid_of_tensor
                if uid_of:
                    for tname in op.outputs:
                        if tname in uid_of:
                            raise TosaError(name, f"output '{tname}' is variable '{uid_of[tname]}': "
                                            "only a variable write may change a variable", plan.where)
            except (TosaError, TosaUnsupported) as e:
                plan.fault = e
            if name in ("CONST", "CONST_SHAPE"):
                plan.extra = {"value": self.block.tensors[op.outputs[0]].data}
                if plan.fault is None and out_specs[0] is not None:
                    self._plan_constant(plan)
        self._plans[idx] = plan
        return plan

    @staticmethod
    def _check_arity(plan: _OpPlan, op: Operator, n_in: int | None, n_out: int | None) -> None:
        """The op's operand lists against its OP_ARITY entry (n_in, n_out); n_in None: any number
        >= 1; n_out None: an op without an entry, any lists."""
        if n_out is None:
            return
        name = op.op
        if n_in is None:
            if len(op.inputs) < 1:
                raise TosaError(name, "the input list is empty", plan.where)
        elif len(op.inputs) != n_in:
            raise TosaError(name, f"has {len(op.inputs)} inputs, the operator takes {n_in}", plan.where)
        if len(op.outputs) != n_out:
            raise TosaError(name, f"has {len(op.outputs)} outputs, the operator has {n_out}", plan.where)

    def _special_plan(self, idx: int, op: Operator) -> "_OpPlan | None":
        """The plan of a variable op (declare, read, write) or of a CONST / CONST_SHAPE with the
        usual operands and data; None for the others (planned as kernel ops)."""
        name, kind = op.op, op.attr_kind
        if name == "VARIABLE":
            return _OpPlan(op, idx, self.source, "declare")
        if (name == "IDENTITY" and kind == VARIABLE_READ_KIND) or name == "VARIABLE_READ":
            return _OpPlan(op, idx, self.source, "read")
        if (name == "IDENTITY" and kind == VARIABLE_WRITE_KIND) or name == "VARIABLE_WRITE":
            return _OpPlan(op, idx, self.source, "write")
        if name in ("CONST", "CONST_SHAPE") and self._usual_constant(op):
            plan = _OpPlan(op, idx, self.source, "const")
            plan.const_values = [self.block.tensors[op.outputs[0]].data]
            return plan
        return None

    def _usual_constant(self, op: Operator) -> bool:
        """A CONST / CONST_SHAPE op as graphs have it: no inputs, one output (a tensor of the
        graph, no variable) and data of the output's storage type and shape — what its kernel, the
        operand-list checks and the output checks of _execute accept, seen at once."""
        if op.inputs or len(op.outputs) != 1:
            return False
        tname = op.outputs[0]
        spec = self._specs.get(tname)
        if spec is None or tname in self._uid_of_tensor:
            return False
        value = self.block.tensors[tname].data
        return (type(value) is np.ndarray and value.dtype == _STORAGE.get(spec.dtype) and value.shape == spec.shape
                and value.ndim <= MAX_RANK and (op.op == "CONST" or spec.dtype == DType.SHAPE))

    def _plan_constant(self, plan: _OpPlan) -> None:
        """A CONST / CONST_SHAPE op's data checked once, by its kernel and the output checks of
        _execute (the usual case is seen at once by _usual_constant); a fault is kept and raised
        when the op runs."""
        op = plan.op
        spec = plan.out_specs[0]
        call = OpCall(op=op.op, attrs=op.attrs, inputs=[], input_specs=[], output_specs=plan.out_specs,
                      where=plan.where, attr_kind=op.attr_kind, extra=plan.extra)
        try:
            (value,) = self._call_kernel(plan, plan.kernel, call)
            value = np.asarray(value)
            if value.dtype != spec.dtype.storage:
                raise InterpreterError(f"{plan.where}: the {op.op} kernel returned {value.dtype} for "
                                       f"'{op.outputs[0]}' ({spec.dtype.name})")
            if not _shape_matches(spec.shape, value.shape):
                raise TosaError(op.op, f"output '{op.outputs[0]}' is declared {_fmt(spec.shape)} but the "
                                f"result is {list(value.shape)}", plan.where)
        except NpuBenchError as e:
            plan.fault = e
            return
        plan.kind = "const"
        plan.const_values = [value]

    def _execute(self, idx: int, op: Operator, env, work, seen, typed: bool = True) -> None:
        """Run op #idx on the values in `env`, adding its outputs. `typed`: every value in `env` is
        known to be of its tensor's declared storage type — true of a run's (the inputs, CONST
        data, kernel results and variable values are each checked where they enter), not of
        values an execute_op caller placed there, whose types are then checked here."""
        plan = self._plans[idx]
        if plan is None or plan.op is not op:
            plan = self._plan(idx, op)
        execute = plan.execute
        if execute is not None:
            # Prepared: this op has run with every check below, and none of them can come out
            # differently (operand lists, declared specs, types and shapes are the graph's).
            try:
                ins = [env[t] for t in op.inputs]
            except KeyError:
                pass                        # an input not written this time: the checked path says so
            else:
                for tname, arr in zip(op.outputs, self._call_kernel(plan, execute, ins)):
                    env[tname] = arr
                return
        kind = plan.kind
        if kind != "kernel":
            if kind == "const":
                tname = op.outputs[0]
                if tname in env:
                    raise TosaError(op.op, f"output '{tname}' is written twice", plan.where)
                env[tname] = plan.const_values[0]
            elif kind == "declare":
                self._declare(self._variable_of(op, idx), work, seen, op, idx)
            elif kind == "read":
                self._variable_read(idx, op, env, work, seen)
            else:                           # "write"
                self._variable_write(idx, op, env, work, seen)
            return
        if plan.fault is not None:
            raise plan.fault.with_traceback(None)
        name = op.op                        # (plan.where is formatted only for a message)
        in_specs, out_specs = plan.in_specs, plan.out_specs
        # Every input a tensor of the graph that an op has written, every output a tensor of the
        # graph not written yet: seen at once, and when one is not, _operand_fault says which.
        try:
            in_arrays = list(map(env.__getitem__, op.inputs))
        except KeyError:
            in_arrays = None
        if in_arrays is None or None in in_specs or None in out_specs:
            in_arrays = self._operand_fault(plan, op, env)
        for tname in op.outputs:
            if tname in env:
                self._operand_fault(plan, op, env)
        if not typed:                       # a value of the caller's: is it of its declared type?
            for arr, tname, spec in zip(in_arrays, op.inputs, in_specs):
                if arr.dtype != (_STORAGE.get(spec.dtype) or spec.dtype.storage):
                    raise TosaError(name, f"input '{tname}' holds {arr.dtype} data, declared {spec.dtype.name}", plan.where)
        prepared = None
        if plan.prepare is not None:
            # A cacheable plan is made from the static inputs alone (the others' shapes are the
            # declared ones), so it holds for every invocation; else it is made for this one. Before
            # the constants are known, a plan the declared shapes allow is made the same way (with
            # this invocation's static values it is this invocation's plan) and kept as candidate.
            reusable = plan.cacheable if plan.cacheable is not None else plan.shapes_known
            pre_inputs = in_arrays
            if reusable:                    # the static inputs only
                pre_inputs = list(in_arrays)
                for i in plan.dynamic:
                    pre_inputs[i] = None
            call = _PlanCall(name, op.attrs, pre_inputs, in_specs, out_specs, plan, op.attr_kind, plan.extra)
            try:                            # (_call_kernel twice, in one try)
                prepared = plan.prepare(call)
                results = prepared(in_arrays)
            except Exception as e:
                self._kernel_failed(plan, e)
        else:
            call = _PlanCall(name, op.attrs, in_arrays, in_specs, out_specs, plan, op.attr_kind, plan.extra)
            results = self._call_kernel(plan, plan.kernel, call)
        if len(results) != len(out_specs):
            raise InterpreterError(f"{plan.where}: the {name} kernel returned {len(results)} outputs, expected {len(out_specs)}")
        for tname, spec, arr in zip(op.outputs, out_specs, results):
            if type(arr) is not np.ndarray:
                arr = np.asarray(arr)
            if arr.dtype != (_STORAGE.get(spec.dtype) or spec.dtype.storage):
                raise InterpreterError(f"{plan.where}: the {name} kernel returned {arr.dtype} for '{tname}' "
                                       f"({spec.dtype.name})")
            if arr.shape != spec.shape and not _shape_matches(spec.shape, arr.shape):
                raise TosaError(name, f"output '{tname}' is declared {_fmt(spec.shape)} but the result is "
                                f"{list(arr.shape)}", plan.where)
            env[tname] = arr
        if prepared is not None:
            if plan.cacheable:
                plan.execute = prepared
            elif plan.cacheable is None and plan.shapes_known:
                plan.candidate = prepared

    def _operand_fault(self, plan: _OpPlan, op: Operator, env) -> list:
        """The first operand of a kernel op that is not as it must be, raised: in input order an
        input that is no tensor of the graph or not written yet, then in output order an output
        that is no tensor of the graph or already written. (Returns the inputs' values if none.)"""
        name = op.op
        in_arrays, in_specs = [], plan.in_specs
        for i, tname in enumerate(op.inputs):
            if in_specs[i] is None:
                raise TosaError(name, f"input {i} '{tname}' is not a tensor of the graph", plan.where)
            arr = env.get(tname)
            if arr is None:
                if tname in self._uid_of_tensor:
                    raise TosaError(name, f"input {i} '{tname}' is a variable: read it with a variable read", plan.where)
                raise TosaError(name, f"input {i} '{tname}' is read before any op writes it", plan.where)
            in_arrays.append(arr)
        for i, tname in enumerate(op.outputs):
            if plan.out_specs[i] is None:
                raise TosaError(name, f"output {i} '{tname}' is not a tensor of the graph", plan.where)
            if tname in env:
                raise TosaError(name, f"output '{tname}' is written twice", plan.where)
        return in_arrays

    def _call_kernel(self, plan: _OpPlan, fn, arg):
        """fn(arg) (a kernel on its call, a prepare on its call, an execute on its inputs), with
        its failures reported as the op's (_kernel_failed)."""
        try:
            return fn(arg)
        except Exception as e:
            self._kernel_failed(plan, e)

    @staticmethod
    def _kernel_failed(plan: _OpPlan, e: Exception) -> NoReturn:
        """Raise a kernel's failure as the op's: a primitive's REQUIRE renamed to the op, a kernel
        bug an InterpreterError naming the op, memory exhaustion a ResourceLimitError; the
        interpreter's own errors as they are. Called in the `except` block that caught `e`."""
        op = plan.op
        if isinstance(e, TosaUnpredictable):    # a primitive's REQUIRE is reported as the op's
            named = op_unpredictable(OpCall(op.op, op.attrs, [], [], [], plan.where), e)
            if named is e:
                raise e
            raise named from e
        if isinstance(e, NpuBenchError):        # TosaError, TosaUnsupported, InterpreterError, ...
            raise e
        if isinstance(e, MemoryError):
            raise limits.ResourceLimitError(f"{plan.where}: the {op.op} result does not fit in memory "
                                            f"(declared {[_fmt(s.shape) for s in plan.out_specs]})") from None
        raise InterpreterError(f"{plan.where}: internal error in the {op.op} kernel: "   # a kernel bug,
                               f"{type(e).__name__}: {e}") from e                           # its cause kept

    def _variable_read(self, idx: int, op: Operator, env, work, seen) -> None:
        where = self._where(idx, op)
        v = self._variable_of(op, idx)
        outs = [o for o in op.outputs if o != v.tensor]
        if len(outs) != 1:
            raise TosaError(op.op, f"a variable read has one output, this one has {len(outs)}", where)
        target = outs[0]
        spec = self._specs.get(target)
        if spec is None:
            raise TosaError(op.op, f"output '{target}' is not a tensor of the graph", where)
        if spec.dtype != v.dtype:
            raise TosaError(op.op, f"variable '{v.uid}' is {v.dtype.name}, read as {spec.dtype.name}", where)
        if not _shape_matches(spec.shape, v.shape) or len(spec.shape) != len(v.shape):
            raise TosaError(op.op, f"variable '{v.uid}' has shape {_fmt(v.shape)}, read as {_fmt(spec.shape)}", where)
        st = work.get(v.uid)
        if st is None or v.uid not in seen:
            raise TosaUnpredictable(op.op, f"variable '{v.uid}' is read before it is declared", where)
        if not st.is_written or st.data is None:
            raise TosaUnpredictable(op.op, f"variable '{v.uid}' is read before it is written", where)
        if target in env:
            raise TosaError(op.op, f"output '{target}' is written twice", where)
        env[target] = st.data.copy()

    def _variable_write(self, idx: int, op: Operator, env, work, seen) -> None:
        where = self._where(idx, op)
        v = self._variable_of(op, idx)
        ins = [i for i in op.inputs if i != v.tensor]
        if len(ins) != 1:
            raise TosaError(op.op, f"a variable write has one input, this one has {len(ins)}", where)
        source = ins[0]
        spec = self._specs.get(source)
        if spec is None:
            raise TosaError(op.op, f"input '{source}' is not a tensor of the graph", where)
        if source not in env:
            raise TosaError(op.op, f"input '{source}' is read before any op writes it", where)
        if spec.dtype != v.dtype:
            raise TosaError(op.op, f"variable '{v.uid}' is {v.dtype.name}, written with {spec.dtype.name}", where)
        value = env[source]
        if not _shape_matches(v.shape, spec.shape) or not _shape_matches(v.shape, value.shape):
            raise TosaError(op.op, f"variable '{v.uid}' has shape {_fmt(v.shape)}, written with "
                            f"{_fmt(spec.shape)} {list(value.shape)}", where)
        if v.uid not in seen:
            raise TosaUnpredictable(op.op, f"variable '{v.uid}' is written before it is declared", where)
        work[v.uid] = _VarState(np.array(value, copy=True), True)


def run_graph(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run one invocation of `graph` in a fresh session."""
    return Interpreter(graph).run(inputs)
