"""Writing what the user asked for: folders and files, or a one-line error naming the path.

Reports and outputs are written whole or not at all (a temporary file in the same folder, then a
rename), so a failed or interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from firmware_model.errors import NpuBenchError


class FileError(NpuBenchError):
    """A folder or file that cannot be made or written."""


def output_dir(path: str | os.PathLike, what: str = "output folder") -> Path:
    """The folder `path`, created if needed; an existing file or an unwritable place is an error."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise FileError(f"{what} {p}: is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileError(f"cannot create {what} {p}: {e.strerror or e}") from None
    if not os.access(p, os.W_OK):
        raise FileError(f"{what} {p}: not writable")
    return p


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    p = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as e:
        raise FileError(f"cannot write {p}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise FileError(f"cannot write {p}: {e.strerror or e}") from None


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(path, text.encode())
