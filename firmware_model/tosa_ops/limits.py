"""How large a tensor npu-bench agrees to hold: checked before anything is allocated.

A graph can declare any shape (a fuzzed or hand-edited file says 65536^4), and `--bind` can make a
symbolic dimension as large as the user types. Without a check, the first np.zeros of such a
tensor either fails deep inside numpy or, worse, succeeds lazily and the machine starts swapping
when the values are touched. So every tensor the interpreter or the compiler is about to hold is
measured first, and one that is too large is refused with its name, shape and size.

The limit applies to each tensor, and four times it to the graph's declared tensors together (the
interpreter keeps every intermediate value of an invocation). Default 1 GiB per tensor; set it with
the environment variable NPU_TENSOR_LIMIT_MIB or `npu --tensor-limit-mib N`.
"""

from __future__ import annotations

import os

from firmware_model.errors import NpuBenchError

DEFAULT_TENSOR_LIMIT_BYTES = 1 << 30
ENV_VAR = "NPU_TENSOR_LIMIT_MIB"
GRAPH_FACTOR = 4            # the whole graph's declared tensors may take this many tensor limits

_limit: int | None = None


class ResourceLimitError(NpuBenchError):
    """A tensor (or a graph's tensors together) larger than npu-bench agrees to allocate."""


def tensor_limit() -> int:
    """The per-tensor limit in bytes: set_tensor_limit(), else $NPU_TENSOR_LIMIT_MIB, else 1 GiB."""
    if _limit is not None:
        return _limit
    data = getattr(os.environ, "_data", None)        # _env_text(), inline (asked once per graph)
    if type(data) is dict and _ENV_KEY is not None:
        raw = data.get(_ENV_KEY)
        text = None if raw is None else os.environ.decodevalue(raw)
    else:
        text = os.environ.get(ENV_VAR)
    if not text:
        return DEFAULT_TENSOR_LIMIT_BYTES
    try:
        mib = float(text)
    except ValueError:
        raise ResourceLimitError(f"${ENV_VAR}={text!r}: not a number of MiB") from None
    if not mib > 0:
        raise ResourceLimitError(f"${ENV_VAR}={text!r}: the limit must be positive")
    return int(mib * (1 << 20))


# os.environ.get raises and catches a KeyError inside when the variable is unset (the usual case):
# a microsecond per graph the interpreter runs. The mapping's own dict of encoded names and values
# answers the same question without it (os.environ[...] = and putenv-through-os.environ keep it).
_ENV_KEY = os.environ.encodekey(ENV_VAR) if hasattr(os.environ, "encodekey") else None


def _env_text() -> str | None:
    """os.environ.get(ENV_VAR)."""
    env = os.environ
    data = getattr(env, "_data", None)
    if type(data) is not dict or _ENV_KEY is None:
        return env.get(ENV_VAR)
    raw = data.get(_ENV_KEY)
    return None if raw is None else env.decodevalue(raw)


def set_tensor_limit(nbytes: int | None) -> None:
    """Override the per-tensor limit for this process (None: back to the environment / default)."""
    global _limit
    if nbytes is not None and nbytes <= 0:
        raise ResourceLimitError(f"tensor limit {nbytes} bytes: the limit must be positive")
    _limit = nbytes


def _fmt_bytes(n: int) -> str:
    for unit, size in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                       ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def tensor_bytes(shape, itemsize: int) -> int:
    """Bytes of a tensor of `shape` (Python integers: no overflow), 0 for unknown dimensions."""
    n = int(itemsize)
    for d in shape:
        d = int(d)
        if d < 0:
            return 0
        n *= d
    return n


def check_tensor(what, shape, itemsize: int, limit: int | None = None) -> int:
    """Refuse a tensor larger than the limit; `what` names it ("tensor 'x' of model.tosa", or a
    function making that text, called only for the message). `limit`: tensor_limit(), when a
    caller checking many tensors has read it once. Returns its size in bytes."""
    size = tensor_bytes(shape, itemsize)
    if limit is None:
        limit = tensor_limit()
    if size > limit:
        what = what if isinstance(what, str) else what()
        dims = "x".join(str(int(d)) for d in shape) or "scalar"
        raise ResourceLimitError(f"{what} ({dims}, {itemsize} byte(s) per element) would take "
                                 f"{_fmt_bytes(size)}, over the limit of {_fmt_bytes(limit)} per tensor "
                                 f"(raise it with ${ENV_VAR} or --tensor-limit-mib)")
    return size


def check_total(what: str, total: int) -> None:
    limit = GRAPH_FACTOR * tensor_limit()
    if total > limit:
        raise ResourceLimitError(f"{what} would take {_fmt_bytes(total)} together, over the limit of "
                                 f"{_fmt_bytes(limit)} ({GRAPH_FACTOR} x the per-tensor limit; raise it with "
                                 f"${ENV_VAR} or --tensor-limit-mib)")
