"""Pass 2 — validation: the graph must be a legal TOSA graph before anything is mapped.

Reads: ctx.graph (static shapes, after shape resolution).
Writes: nothing; raises for a graph that breaks a TOSA rule.

The rules are checked by the project's one implementation of them: the graph runs once, op by op,
through the interpreter's own step (`Interpreter.execute_op`: operand lists, the kernels' ERROR_IF
and REQUIRE checks in firmware_model/tosa_ops, declared output shapes, the variable rules) on
placeholder data of the declared shapes and types with the real constants
(compiler/placeholder_run.py). Outcomes:

- TosaError (an ERROR_IF) -> TosaRuleError naming the op and the rule: not a legal TOSA graph
  (the conformance SUT reports TOSA_ERROR);
- TosaUnpredictable from a variable op (declared twice in one invocation, accessed before its
  declaration) -> TosaRuleError too: those REQUIREs fail in every invocation (SUT:
  UNPREDICTABLE). A REQUIRE that fails in any other op says nothing about real data (its inputs
  are placeholders): not an error, the op's outputs become placeholders and checking goes on;
- TosaUnsupported (no kernel, floating point) -> CompileError: no NPU unit and no host kernel
  can run the op.
"""

from __future__ import annotations

from compiler.errors import CompileError, TosaRuleError
from compiler.interpreter import InterpreterError
from compiler.placeholder_run import PlaceholderRun, is_variable_op
from firmware_model.errors import NpuBenchError, TosaError, TosaUnpredictable, TosaUnsupported
from firmware_model.tosa_ops import limits


def _rule_error(where: str, e: Exception) -> TosaRuleError:
    if isinstance(e, TosaError):
        return TosaRuleError(f"{where}: ERROR_IF {e.rule}", e)
    return TosaRuleError(f"{where}: REQUIRE {e.rule} does not hold in any invocation", e)


def run(ctx) -> None:
    block = ctx.block
    src = ctx.graph.source
    try:
        prun = PlaceholderRun(ctx.graph)
    except (TosaError, TosaUnpredictable) as e:
        raise _rule_error(f"{src}: {e.op}", e) from None
    except (TosaUnsupported, InterpreterError, limits.ResourceLimitError) as e:
        # the interpreter's graph-level messages already start with the file's name
        raise CompileError(str(e) if str(e).startswith(src) else f"{src}: {e}") from None
    checked = 0
    for idx, op in enumerate(block.operators):
        where = f"{src}: op %{idx} {op.op} -> {', '.join(op.outputs) or '-'}"
        try:
            prun.execute(idx, op)
        except TosaError as e:
            raise _rule_error(where, e) from None
        except TosaUnpredictable as e:
            if is_variable_op(op):
                raise _rule_error(where, e) from None
            prun.fill_outputs(op)
        except TosaUnsupported as e:
            raise CompileError(f"{where}: not supported: {e} (no NPU unit and no host kernel runs it)") from None
        except InterpreterError as e:
            raise CompileError(f"{where}: {e}") from None
        except NpuBenchError as e:
            raise CompileError(f"{where}: {e}") from None
        checked += 1
    try:
        prun.outputs()
    except TosaError as e:
        raise _rule_error(f"{src}: graph", e) from None
    ctx.report.append(f"validation: {checked} op(s) checked against the TOSA rules")
