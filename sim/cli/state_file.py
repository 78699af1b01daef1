"""Variable state files for `npu run --state FILE.npz`.

A state file is an .npz archive with one array per variable, keyed by the variable's name
(`variable_name` in the graph), in the variable's storage type (int48 as int64). `npu run`
loads it before the run (a missing file means: start from the graph's initial values) and saves
the state after a successful run, so N runs with one file equal N invocations of one session.

Saving is atomic: the archive is written to a temporary file in the same folder and renamed
over the old one, so a failed or interrupted run never leaves a corrupt or half-updated file.

Every array in a file is checked against the graph's variables before any backend uses it
(`check_state`): a name that is no variable, a wrong type or shape, a value out of range, or a
variable the file does not mention is an error naming the file and the variable. A file lists
the variables that have no value yet under UNWRITTEN_KEY (the golden backend's SRAM layout says
the same with its written flags), so a variable that is simply absent is a damaged or foreign
file, not a fresh start; `--init-missing` lets such variables start from their initial values.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np

from firmware_model.errors import GoldenModelError, NpuBenchError
from firmware_model.golden.var_unit import FLAGS_KEY, LAYOUT_KEY, SRAM_KEY, STATE_PREFIX, check_image
from firmware_model.tosa_ops.dtypes import value_problem


class StateFileError(NpuBenchError):
    """A state file that cannot be read or written, or that does not fit the graph's variables."""


UNWRITTEN_KEY = STATE_PREFIX + "unwritten"  # JSON list of the variables with no value yet
GOLDEN_KEYS = (SRAM_KEY, FLAGS_KEY, LAYOUT_KEY)  # the golden backend's SRAM image


def _names_in_layout(path, text) -> set[str]:
    try:
        return {str(d["name"]) for d in json.loads(str(text))}
    except (ValueError, TypeError, KeyError) as e:
        raise StateFileError(f"{path}: the variable-SRAM layout is damaged ({type(e).__name__}: {e})") from None


def check_state(path, arrays: Mapping[str, np.ndarray], variables: Mapping[str, tuple], *,
                init_missing: bool = False) -> None:
    """Refuse a state that is not exactly for these variables ({name: (DType, shape)})."""
    known = ", ".join(sorted(variables)) or "none"
    present: set[str] = set()
    golden = [k for k in GOLDEN_KEYS if k in arrays]
    if golden and len(golden) != len(GOLDEN_KEYS):
        missing = next(k for k in GOLDEN_KEYS if k not in arrays)
        raise StateFileError(f"{path}: the variable-SRAM image is incomplete (no '{missing}')")
    if golden:
        try:
            check_image(arrays)
        except GoldenModelError as e:
            raise StateFileError(f"{path}: {e}") from None
        present |= _names_in_layout(path, arrays[GOLDEN_KEYS[2]])
    for name, value in arrays.items():
        if name in GOLDEN_KEYS:
            continue
        if name == UNWRITTEN_KEY:
            present |= set(_json_list(path, value))
            continue
        if name.startswith(STATE_PREFIX):
            raise StateFileError(f"{path}: '{name}' is not part of a state file")
        if name not in variables:
            raise StateFileError(f"{path}: '{name}' is not a variable of the graph (variables: {known})")
        dtype, shape = variables[name]
        problem = value_problem(value, dtype, shape)
        if problem:
            raise StateFileError(f"{path}: variable '{name}' {problem}")
        present.add(name)
    stray = sorted(present - set(variables))
    if stray:
        raise StateFileError(f"{path}: '{stray[0]}' is not a variable of the graph (variables: {known})")
    absent = [n for n in variables if n not in present]
    if absent and not init_missing:
        raise StateFileError(f"{path}: no value for variable '{absent[0]}' (the file lists "
                             f"{', '.join(sorted(present)) or 'no variable'}); give --init-missing to start "
                             "such variables from their initial values")


def _json_list(path, value) -> list[str]:
    try:
        names = json.loads(str(np.asarray(value)))
    except ValueError as e:
        raise StateFileError(f"{path}: the list of unwritten variables is damaged ({e})") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StateFileError(f"{path}: the list of unwritten variables is damaged (not a list of names)")
    return names


def with_unwritten(state: Mapping[str, np.ndarray], variables) -> dict[str, np.ndarray]:
    """`state` (values by name) with the list of the variables that have none yet."""
    out = dict(state)
    unwritten = sorted(n for n in variables if n not in out)
    if unwritten and not any(k in out for k in GOLDEN_KEYS):
        out[UNWRITTEN_KEY] = np.array(json.dumps(unwritten))
    return out


def load_state(path: str | os.PathLike) -> dict[str, np.ndarray] | None:
    """The arrays of a state file, or None when the file does not exist yet."""
    p = Path(path)
    if not p.exists():
        return None
    if p.is_dir():
        raise StateFileError(f"{p}: is a directory, not a state file (.npz)")
    try:
        with open(p, "rb") as f:
            if f.read(2) != b"PK":
                raise StateFileError(f"{p}: not a state file (an .npz archive, as npu run --state writes)")
            f.seek(0)
            with np.load(f, allow_pickle=False) as z:
                return {name: z[name] for name in z.files}
    except StateFileError:
        raise
    except MemoryError:
        raise StateFileError(f"{p}: declares arrays too large to load") from None
    except Exception as e:     # numpy and zipfile raise many kinds for a damaged archive
        raise StateFileError(f"{p}: not a readable state file (.npz): {type(e).__name__}: {e}") from None


def save_state(path: str | os.PathLike, state: Mapping[str, np.ndarray]) -> None:
    """Write `state` to `path` atomically (temporary file in the same folder, then rename)."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise StateFileError(f"{p}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise StateFileError(f"{p}: cannot write the state file: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{name: np.asarray(v) for name, v in state.items()})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            raise StateFileError(f"{p}: cannot write the state file: {e.strerror or e}") from None
        raise
