"""Checkpoint files: written atomically (also in the background), loaded safely (weights only, checksums
verified, the entries every checkpoint has checked). What each checkpoint holds is nmt/run/checkpoint.py."""

from __future__ import annotations

import functools
import pickle
import warnings
import zipfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from nmt.atomic_files import atomic_write
from nmt.errors import UserError


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Save a dict of tensors and plain values atomically."""
    atomic_write(path, lambda handle: torch.save(payload, handle))


def on_host(value: Any) -> Any:
    """A copy of `value` (dicts, lists and tuples of tensors and plain values) with every tensor copied to
    host memory: a snapshot that later in-place updates of the originals leave as it is."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: on_host(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(on_host(item) for item in value)
    return value


class CheckpointWriter:
    """Writes checkpoints in one background thread, in the order they were handed over, while training goes
    on (a Multi30k Transformer's last.pt is ~300 MB; written in the loop it held up every validation). The
    tensors are copied to host memory first, each file is written atomically, and `wait()` returns once all
    handed over is on disk, raising the first failure (a full disk, say) in the caller's thread."""

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None  # started by the first write, stopped by close()
        self.pending: list[Future] = []

    def save(self, path: Path, payload: dict[str, Any]) -> None:
        self.later(functools.partial(save_checkpoint, path, on_host(payload)))

    def later(self, work: Callable[[], object]) -> None:
        """Run `work` in the writer's thread after everything handed over before it."""
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nmt-checkpoints")
        self.pending.append(self.pool.submit(work))

    def wait(self) -> None:
        pending, self.pending = self.pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        """Wait for the pending writes, then stop the thread."""
        try:
            self.wait()
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
            self.pool = None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint without ever unpickling code (`weights_only=True`); bad files raise UserError.

    The checksums torch.save writes into the archive are verified first, so flipped bytes inside the
    tensors are reported rather than loaded as wrong weights.
    """
    if not path.is_file():
        raise UserError(f"checkpoint {path} does not exist")
    _verify_archive(path)
    try:
        with warnings.catch_warnings():  # e.g. about the pickle protocol of a foreign file: the error says it
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "Weights only load failed" in str(err):
            raise UserError(
                f"{path} holds objects other than tensors and plain values and was refused as unsafe "
                f"(only checkpoints written by nmt can be loaded)"
            ) from err
        raise _corrupted(path, err) from err
    except Exception as err:  # torch raises many types for damaged files (RuntimeError, EOFError, KeyError …)
        raise _corrupted(path, err) from err
    if not isinstance(payload, dict) or "model" not in payload or "config" not in payload:
        raise UserError(f"{path} is not an nmt checkpoint (no model weights and config); check the path")
    check_entries(path, payload, {"model": dict, "config": dict})
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in payload["model"].items()):
        raise incomplete(path, "'model' is not a mapping of parameter names to tensors")
    if not all(isinstance(payload["config"].get(section), dict) for section in ("data", "model", "train")):
        raise incomplete(path, "'config' lacks its data, model or train section")
    return payload


def check_entries(path: Path, payload: dict[str, Any], expected: dict[str, type]) -> None:
    for key, kind in expected.items():
        if key not in payload:
            raise incomplete(path, f"it has no '{key}'")
        if not isinstance(payload[key], kind):
            raise incomplete(path, f"its '{key}' is a {type(payload[key]).__name__}, not a {kind.__name__}")


def incomplete(path: Path, problem: str) -> UserError:
    return UserError(f"{path} is not a complete nmt checkpoint: {problem}; restore the file or train again")


def _verify_archive(path: Path) -> None:
    """Check the CRC-32 of every record of a zip-format checkpoint (other formats are left to torch.load)."""
    try:
        if not zipfile.is_zipfile(path):
            return
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except Exception as err:
        raise _corrupted(path, err) from err
    if damaged is not None:
        raise _corrupted(path, f"record {damaged} fails its checksum")


def _corrupted(path: Path, reason: object) -> UserError:
    detail = (str(reason).splitlines() or [""])[0].split(". ")[0][:120]
    if isinstance(reason, Exception) and len(detail) < 20:  # e.g. KeyError('101'): name the type
        detail = f"{type(reason).__name__}: {detail}".rstrip(": ")
    return UserError(f"{path} is truncated or corrupted ({detail}); restore the file or train again")
