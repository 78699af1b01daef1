"""Variable state files for `npu run --state FILE.npz`.

A state file is an .npz archive with one array per variable, keyed by the variable's name
(`variable_name` in the graph), in the variable's storage type (int48 as int64). `npu run`
loads it before the run (a missing file means: start from the graph's initial values) and saves
the state after a successful run, so N runs with one file equal N invocations of one session.

Saving is atomic: the archive is written to a temporary file in the same folder and renamed
over the old one, so a failed or interrupted run never leaves a corrupt or half-updated file.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

import numpy as np

from firmware_model.errors import NpuBenchError


class StateFileError(NpuBenchError):
    """A state file that cannot be read or written."""


def load_state(path: str | os.PathLike) -> dict[str, np.ndarray] | None:
    """The arrays of a state file, or None when the file does not exist yet."""
    p = Path(path)
    if not p.exists():
        return None
    if p.is_dir():
        raise StateFileError(f"{p}: is a directory, not a state file (.npz)")
    try:
        with np.load(p, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise StateFileError(f"{p}: not a readable state file (.npz): {e}") from None


def save_state(path: str | os.PathLike, state: Mapping[str, np.ndarray]) -> None:
    """Write `state` to `path` atomically (temporary file in the same folder, then rename)."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise StateFileError(f"{p}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{name: np.asarray(v) for name, v in state.items()})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
