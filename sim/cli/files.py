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
    try:
        return _output_dir(Path(path), what)
    except OSError as e:
        raise FileError(f"{what} {path}: {e.strerror or e}") from None


def _output_dir(p: Path, what: str) -> Path:
    if p.exists() and not p.is_dir():
        raise FileError(f"{what} {p}: is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileError(f"cannot create {what} {p}: {e.strerror or e}") from None
    if not os.access(p, os.W_OK):
        raise FileError(f"{what} {p}: not writable")
    return p


def check_output_dir(path: str | os.PathLike, what: str = "output folder") -> Path:
    """What `output_dir` would refuse, found without creating anything (before a long run)."""
    try:
        return _check_output_dir(Path(path), what)
    except OSError as e:        # e.g. a name longer than the file system allows
        raise FileError(f"{what} {path}: {e.strerror or e}") from None


def _check_output_dir(p: Path, what: str) -> Path:
    if p.exists() and not p.is_dir():
        raise FileError(f"{what} {p}: is a file, not a folder")
    nearest = p
    while not nearest.exists():
        if nearest.parent == nearest:
            break
        nearest = nearest.parent
    if not nearest.is_dir():
        raise FileError(f"cannot create {what} {p}: {nearest} is a file, not a folder")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise FileError(f"{what} {p}: {nearest} is not writable")
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


def writable_folder_of(path: str | os.PathLike, what: str) -> Path:
    """The existing, writable folder that `path` (a file to be written) lives in."""
    try:
        return _writable_folder_of(Path(path), what)
    except OSError as e:
        raise FileError(f"{what} {path}: {e.strerror or e}") from None


def _writable_folder_of(p: Path, what: str) -> Path:
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise FileError(f"{what} {p}: is a folder, not a file")
    if not folder.is_dir():
        raise FileError(f"{what} {p}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileError(f"{what} {p}: folder {folder} is not writable")
    return folder


def commit_files(files: list[tuple[Path, bytes]]) -> None:
    """Write several files as one change: all of them, or none (the old ones stay as they were).

    Every file is first written beside its destination under a temporary name; only when all are
    written are they renamed into place. Should a rename still fail, the files already replaced are
    put back from hard links taken before (or removed, when they are new).
    """
    temps: list[tuple[Path, Path]] = []
    done: list[tuple[Path, Path | None]] = []      # (destination replaced, link to its old content)
    try:
        for dest, data in files:
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
                temps.append((Path(tmp), dest))
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise FileError(f"cannot write {dest}: {e.strerror or e}") from None
        for tmp, dest in temps:
            backup = None
            if dest.exists():
                backup = dest.with_name(f".{dest.name}.{os.getpid()}.bak")
                try:
                    os.link(dest, backup)
                except OSError:
                    raise FileError(f"cannot write {dest}: cannot keep its old content while replacing it") from None
            try:
                os.replace(tmp, dest)
            except OSError as e:
                if backup is not None:
                    _unlink(backup)
                raise FileError(f"cannot write {dest}: {e.strerror or e}") from None
            done.append((dest, backup))
    except BaseException:
        for tmp, _ in temps:
            _unlink(tmp)
        for dest, backup in reversed(done):
            if backup is None:
                _unlink(dest)
            else:
                try:
                    os.replace(backup, dest)
                except OSError:
                    pass
        raise
    for _, backup in done:
        if backup is not None:
            _unlink(backup)


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass
