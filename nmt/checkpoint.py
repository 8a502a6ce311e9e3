"""Checkpoints and run directories: atomic writes, safe loads, and rebuilding a model from a run alone."""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config import Config, ConfigError, load_config
from nmt.data.tokenizer import Tokenizers, load_tokenizers
from nmt.errors import UserError
from nmt.models import build_model
from nmt.models.base import Seq2Seq

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
SNAPSHOT_DIR = "checkpoints"


def atomic_write(path: Path, write: Any) -> None:
    """Write a file through `write(file_object)` into a temporary sibling, fsync it, then rename it over `path`.

    A crash at any moment leaves either the old file or the new one, never a torn one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Save a dict of tensors and plain values atomically."""
    atomic_write(path, lambda handle: torch.save(payload, handle))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint without ever unpickling code (`weights_only=True`); bad files raise UserError."""
    if not path.is_file():
        raise UserError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise UserError(
            f"{path} holds objects other than tensors and plain values and was refused as unsafe "
            f"(only checkpoints written by nmt can be loaded)"
        ) from err
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as err:
        raise UserError(
            f"{path} is truncated or corrupted ({str(err).splitlines()[0][:120]}); use another checkpoint"
        ) from err
    if not isinstance(payload, dict) or "model" not in payload or "config" not in payload:
        raise UserError(f"{path} is not an nmt checkpoint")
    return payload


def snapshots(run_dir: Path) -> list[Path]:
    """The kept per-validation checkpoints of a run, oldest first."""
    paths = (run_dir / SNAPSHOT_DIR).glob("step*.pt")
    return sorted(paths, key=lambda path: int(path.stem.removeprefix("step")))


@dataclass
class Run:
    """Everything a trained run directory provides: its config, tokenizers and model."""

    directory: Path
    cfg: Config
    tokenizers: Tokenizers
    model: Seq2Seq
    checkpoint: dict[str, Any]


def vocabulary_record(tokenizers: Tokenizers) -> dict[str, Any]:
    """What a checkpoint stores about its vocabulary, to refuse pairing it with another one."""
    return {
        "src_size": len(tokenizers.src),
        "tgt_size": len(tokenizers.tgt),
        "src_sha256": tokenizers.src.fingerprint,
        "tgt_sha256": tokenizers.tgt.fingerprint,
    }


def find_checkpoint(run_dir: Path, which: str = "best") -> Path:
    """Path of `best.pt` (falling back to `last.pt`), `last.pt` or `averaged.pt` in a run directory."""
    if not run_dir.is_dir():
        raise UserError(
            f"run directory {run_dir} does not exist; train a model with `nmt train ... --out {run_dir}`"
        )
    if which not in ("best", "last", "averaged"):
        raise UserError(f"unknown checkpoint '{which}'; use best, last or averaged")
    names = ["best.pt", "last.pt"] if which == "best" else [f"{which}.pt"]
    for name in names:
        if (run_dir / name).is_file():
            return run_dir / name
    raise UserError(f"{run_dir} holds no checkpoint ({' or '.join(names)}); train or resume the run first")


def load_run(run_dir: Path, device: torch.device, which: str = "best") -> Run:
    """Rebuild the model of a run directory from its config, tokenizers and checkpoint."""
    path = find_checkpoint(run_dir, which)
    try:
        cfg = load_config(run_dir / CONFIG_FILE)
    except ConfigError as err:
        raise UserError(f"{run_dir / CONFIG_FILE}: {err}") from err
    tokenizers = load_tokenizers(run_dir, cfg.tokenizer.joint)
    checkpoint = load_checkpoint(path)
    if checkpoint.get("vocab") != vocabulary_record(tokenizers):
        raise UserError(
            f"{path} was trained with another vocabulary than {tokenizers.src.path}; "
            f"use the checkpoint and sentencepiece model of the same run"
        )
    model = build_model(cfg.model, len(tokenizers.src), len(tokenizers.tgt), tokenizers.joint)
    try:
        model.load_state_dict(checkpoint["model"])
    except RuntimeError as err:
        raise UserError(
            f"{path} does not match the model in {run_dir / CONFIG_FILE}: {str(err).splitlines()[0]}"
        ) from err
    return Run(run_dir, cfg, tokenizers, model.to(device).eval(), checkpoint)
