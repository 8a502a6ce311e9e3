"""Atomic file writes: a crash or kill at any moment leaves the old file or the new one, never a torn one."""

from __future__ import annotations

import os
import secrets
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from nmt import interrupts
from nmt.errors import UserError


def atomic_write(path: Path, write: Any) -> None:
    """Write `path` through `write(file_object)` into a temporary sibling, fsync it, rename it over `path`.

    A crash at any moment leaves either the old file or the new one, never a torn one; an interruption (also
    a second Ctrl-C that ends the process at once while another thread writes) leaves no temporary file. The
    new file gets the mode of the file it replaces, or the mode the umask gives a new file (as `open` would),
    not the owner-only mode of a temporary file. An OSError (a missing permission, a full disk, `path` being a
    directory) raises UserError and leaves the old file as it was.
    """
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with interrupts.unfinished(tmp):
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
                os.fchmod(handle.fileno(), _mode_for(path))
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from err


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def check_writable(path: Path | None) -> None:
    """Refuse, before a command does its work, an output that cannot be a file: a folder, or a file in a
    folder that does not exist (None: standard output)."""
    if path is not None and path.is_dir():
        raise UserError(f"cannot write {path}: it is a folder; give a file name")
    if path is not None and not path.parent.is_dir():
        raise UserError(f"cannot write {path}: there is no folder {path.parent}")


def write_output(path: Path | None, write: Callable[[BinaryIO], object]) -> None:
    """Write a command's output through `write(handle)`: to stdout (None) or a special file (a FIFO,
    /dev/stdout, a terminal) directly, as it comes; to a regular file atomically. A failed write (a closed
    pipe, a full disk) raises UserError."""
    if path is None:
        _write_stream(sys.stdout.buffer if sys.stdout else None, "standard output", write)
    elif path.exists() and not path.is_file() and not path.is_dir():
        try:
            with open(path, "wb") as handle:
                _write_stream(handle, str(path), write)
        except OSError as err:
            raise UserError(f"cannot write {path}: {err.strerror or err}") from err
    else:
        atomic_write(path, write)


def _write_stream(stream: BinaryIO | None, name: str, write: Callable[[BinaryIO], object]) -> None:
    if stream is None:
        raise UserError(f"{name} is closed; pass --output FILE")
    try:
        write(stream)
        stream.flush()
    except (OSError, ValueError) as err:  # ValueError: the stream was closed
        if isinstance(err, ValueError) and not stream.closed:
            raise  # not the stream's error but that of what was being written (a translation's)
        if stream is getattr(sys.stdout, "buffer", None):
            _silence_stdout()
        raise UserError(f"cannot write {name}: {getattr(err, 'strerror', None) or err}") from err


def _silence_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for the broken one would fail again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (as in tests): nothing to flush at exit
        pass


def _mode_for(path: Path) -> int:
    """Mode bits for a new version of `path`: those of the file it replaces, else 0666 less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask, read without changing it where the system allows (Linux: /proc/self/status)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask
