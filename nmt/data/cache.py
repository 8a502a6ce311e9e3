"""The data cache: trained tokenizers and encoded training splits, each in a directory named by a key over
everything its content depends on, so a second run or a `--resume` on the same data starts at once.

It lives in $NMT_CACHE, else $XDG_CACHE_HOME/nmt, else ~/.cache/nmt:

    <root>/tokenizer/<key>/   spm.model (or spm.src.model, spm.tgt.model), manifest.json
    <root>/encoded/<key>/     src.tokens, src.offsets, tgt.tokens, tgt.offsets, pairs.lines, manifest.json
    <root>/links/<key>/       links.tokens, links.offsets, manifest.json (nmt/train/alignment_labels.py)

A key is a hash of its inputs (written out in the manifest): the data files' paths, sizes, modification times
and a hash of their first and last MiB, the settings that shape the content (tokenizer settings, or the
tokenizers' fingerprints, data.max_len, data.skip_bad_lines and data.unescape_entities) and the cache format.
An entry is built in a temporary sibling directory, its manifest written last (with every file's size, and
the hash of the small ones), and renamed into place; a reader trusts nothing without a manifest its files
match, and rebuilds an entry that does not. Removing the root, or any entry, is always safe.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from nmt.atomic_files import atomic_write_text
from nmt.data.arrays import DamagedArrays
from nmt.errors import UserError

log = logging.getLogger(__name__)

T = TypeVar("T")

CACHE_ENV = "NMT_CACHE"
FORMAT = 2  # raise when the content of an entry changes for the same inputs
MANIFEST = "manifest.json"
_EDGE = 1 << 20  # bytes hashed at each end of a data file
_HASHED = 1 << 26  # files up to this size have their sha256 in the manifest
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def cache_root() -> Path:
    """$NMT_CACHE, else $XDG_CACHE_HOME/nmt, else ~/.cache/nmt."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nmt"


def file_identity(path: Path) -> dict[str, Any]:
    """What a data file's content is recognised by: path, size, modification time, first and last MiB."""
    try:
        stat = path.stat()
        with open(path, "rb") as handle:
            edges = handle.read(_EDGE)
            handle.seek(max(stat.st_size - _EDGE, len(edges)))
            edges += handle.read()
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from err
    return {
        "path": str(path.resolve()),
        "bytes": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "edges_sha256": hashlib.sha256(edges).hexdigest(),
    }


@dataclass(frozen=True)
class Entry:
    """One cache entry: `kind` ('tokenizer' or 'encoded') built from `inputs` (JSON values)."""

    root: Path
    kind: str
    inputs: dict[str, Any]

    @property
    def key(self) -> str:
        text = json.dumps({"format": FORMAT, "kind": self.kind, **self.inputs}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    @property
    def directory(self) -> Path:
        return self.root / self.kind / self.key

    def manifest(self) -> tuple[dict[str, Any] | None, str]:
        """The manifest when the entry is complete, else None and why it cannot be used."""
        path = self.directory / MANIFEST
        if not self.directory.is_dir():
            return None, "absent"
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            return None, f"unreadable manifest ({type(err).__name__})"
        if not isinstance(manifest, dict) or manifest.get("key") != self.key:  # the key covers the format
            return None, "manifest of another entry"
        if not isinstance(manifest.get("files"), dict) or not manifest["files"]:
            return None, "manifest lists no files"
        for name, expected in manifest["files"].items():
            found = _describe(self.directory / name)
            if found != expected:
                return None, f"{name} does not match the manifest ({found} instead of {expected})"
        return manifest, "hit"

    def build(self, fill: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """Build the entry: `fill(directory)` writes its files into a temporary directory and returns what the
        manifest adds; the manifest is written last and the directory renamed into place."""
        parent = self.directory.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _remove_abandoned(parent)
            work = Path(tempfile.mkdtemp(prefix=f".{self.key}.{os.getpid()}.", dir=parent))
        except OSError as err:
            if _disk_full(err):
                raise self.disk_full() from err
            raise UserError(
                f"cannot write the data cache in {parent}: {err.strerror}; set {CACHE_ENV} to a writable "
                f"directory"
            ) from err
        try:
            manifest = {"format": FORMAT, "key": self.key, "kind": self.kind, "inputs": self.inputs}
            manifest |= fill(work)
            manifest["files"] = {path.name: _describe(path) for path in sorted(work.iterdir())}
            atomic_write_text(work / MANIFEST, json.dumps(manifest, indent=1) + "\n")
            _replace_directory(work, self.directory)
        except BaseException as err:
            shutil.rmtree(work, ignore_errors=True)
            if _disk_full(err):
                raise self.disk_full() from err
            raise
        return manifest

    def disk_full(self) -> UserError:
        return UserError(
            f"disk full while building the corpus cache in {self.root} ({CACHE_ENV}); free space there or "
            f"point {CACHE_ENV} at a disk with room"
        )


def cached(
    entry: Entry, fill: Callable[[Path], dict[str, Any]], use: Callable[[Path, dict[str, Any]], T]
) -> T:
    """`use(directory, manifest)` of the entry, built first when it is absent or damaged (`use` raises
    DamagedArrays for content that does not hold together); logs a hit, a miss or a rebuild, and why.

    Nothing is logged before a build succeeds (but the warning about a damaged entry): a mistake in the data
    stays a one-line error."""
    manifest, reason = entry.manifest()
    if manifest is not None:
        try:
            result = use(entry.directory, manifest)
            log.info("%s cache hit: %s", entry.kind, entry.directory)
            return result
        except DamagedArrays as err:
            reason = str(err)
    if reason != "absent":
        log.warning("%s cache entry %s is damaged (%s); rebuilding it", entry.kind, entry.directory, reason)
    started = time.perf_counter()
    manifest = entry.build(fill)
    log.info(
        "%s cache %s: built %s in %.1f s",
        entry.kind,
        "miss" if reason == "absent" else "rebuild",
        entry.directory,
        time.perf_counter() - started,
    )
    return use(entry.directory, manifest)


def _disk_full(err: BaseException) -> bool:
    """Whether `err` (or the OSError it was raised from, as by atomic_write) says the disk is full."""
    cause = err if isinstance(err, OSError) else err.__cause__
    return isinstance(cause, OSError) and cause.errno in _DISK_FULL


def _describe(path: Path) -> dict[str, Any] | None:
    """Size (and for small files, sha256) of a file; None when it is missing."""
    try:
        size = path.stat().st_size
        if size > _HASHED:
            return {"bytes": size}
        return {"bytes": size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    except OSError:
        return None


def _replace_directory(new: Path, target: Path) -> None:
    """Rename `new` to `target`, replacing an entry there (another process may have built it meanwhile)."""
    _sync_directory(new)
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", dir=target.parent))
        os.replace(target, old)  # an empty directory is replaced; readers of the old files keep them
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(new, target)
    except OSError:  # built by another process after all: use that one
        if not (target / MANIFEST).is_file():
            raise
        shutil.rmtree(new, ignore_errors=True)
    _sync_directory(target.parent)


def _sync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove_abandoned(parent: Path) -> None:
    """Remove temporary directories of builds whose process is gone (killed, or the machine restarted)."""
    for path in parent.glob(".*.*.*"):
        pid = path.name.split(".")[2]
        if path.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
