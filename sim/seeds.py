"""Seeds: every random choice of the benches and tests comes from a seed that is printed and can be set.

Each random stream names its committed default seed: `rng(20240611)` is
`np.random.default_rng(20240611)` in an ordinary run, so the vectors the suites were closed with
(coverage, mutants) are the ones that run. Setting the environment variable `NPU_BENCH_SEED=N`
derives every stream's seed from N instead (a stable hash of N, the default and the stream's
label; never Python's `hash()`, which changes from process to process), so a regression can
draw new stimulus everywhere and replay it exactly with the same N.

Every seed drawn is recorded: the test suite prints the run's seed in its header and, for a
failing test, the seeds that test drew (tests/conftest.py), so any failure can be replayed.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from firmware_model.errors import NpuBenchError

ENV = "NPU_BENCH_SEED"

# (label, seed) of every stream drawn since the last `take_drawn()`
_drawn: list[tuple[str, int]] = []


def run_seed() -> int | None:
    """NPU_BENCH_SEED as an integer, or None when it is not set (the committed defaults apply)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise NpuBenchError(f"{ENV}={text!r}: a seed is an integer") from None


def _stable(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def seed_for(label: str, default: int | None = None) -> int:
    """The seed of the random stream `label`: `default` (or a stable hash of the label when there
    is none) unless NPU_BENCH_SEED is set; recorded for the failure report."""
    base = run_seed()
    if default is None:
        default = _stable("default", label)
    seed = default if base is None else _stable(base, default, label)
    _drawn.append((label, seed))
    return seed


def rng(default: int, label: str = "") -> np.random.Generator:
    """A numpy generator on the stream's seed (see seed_for)."""
    return np.random.default_rng(seed_for(label or f"stream {default}", default))


def take_drawn() -> list[tuple[str, int]]:
    """The streams drawn since the last call, and forget them."""
    out = list(_drawn)
    _drawn.clear()
    return out


def describe_run_seed() -> str:
    base = run_seed()
    if base is None:
        return f"seeds: the committed defaults (set {ENV}=N to draw every random stream from N)"
    return f"seeds: {ENV}={base} (every random stream derived from it)"
