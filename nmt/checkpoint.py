"""Checkpoints and run directories: atomic writes, safe loads, and rebuilding a model from a run alone."""

from __future__ import annotations

import pickle
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config import Config, ConfigError, load_config
from nmt.data.tokenizer import Tokenizers, load_tokenizers
from nmt.errors import UserError
from nmt.files import atomic_write
from nmt.models import build_model
from nmt.models.base import Seq2Seq

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
SNAPSHOT_DIR = "checkpoints"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Save a dict of tensors and plain values atomically."""
    atomic_write(path, lambda handle: torch.save(payload, handle))


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
    return payload


def snapshots(run_dir: Path) -> list[Path]:
    """The kept per-validation checkpoints of a run, oldest first."""
    paths = (run_dir / SNAPSHOT_DIR).glob("step*.pt")
    return sorted(paths, key=lambda path: int(path.stem.removeprefix("step")))


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


@dataclass
class Run:
    """Everything a trained run directory provides: its config, tokenizers and model."""

    directory: Path
    cfg: Config
    tokenizers: Tokenizers
    model: Seq2Seq
    checkpoint: dict[str, Any]


def vocabulary_record(tokenizers: Tokenizers, legacy: bool = False) -> dict[str, Any]:
    """What a checkpoint stores about its vocabulary, to refuse pairing it with another one (`legacy`: as
    checkpoints recorded it before the fingerprints covered the pieces rather than the model files)."""
    return {
        "src_size": len(tokenizers.src),
        "tgt_size": len(tokenizers.tgt),
        "src_sha256": tokenizers.src.file_sha256 if legacy else tokenizers.src.fingerprint,
        "tgt_sha256": tokenizers.tgt.file_sha256 if legacy else tokenizers.tgt.fingerprint,
    }


def same_vocabulary(record: Any, tokenizers: Tokenizers) -> bool:
    """Whether a checkpoint's vocabulary record is that of `tokenizers` (also in the legacy form)."""
    return record in (vocabulary_record(tokenizers), vocabulary_record(tokenizers, legacy=True))


def find_checkpoint(run_dir: Path, which: str = "best") -> Path:
    """Path of `best.pt` (falling back to `last.pt`), `last.pt` or `averaged.pt` in a run directory."""
    if run_dir.is_file():
        raise UserError(f"{run_dir} is a file; pass the run directory written by `nmt train` (--out)")
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
    if not (run_dir / CONFIG_FILE).is_file():
        raise UserError(f"{run_dir} has no {CONFIG_FILE}; the run directory is incomplete (copy it back)")
    try:
        cfg = load_config(run_dir / CONFIG_FILE)
    except ConfigError as err:
        raise UserError(f"{run_dir / CONFIG_FILE}: {err}") from err
    tokenizers = load_tokenizers(run_dir, cfg.tokenizer.joint)
    checkpoint = load_checkpoint(path)
    if not same_vocabulary(checkpoint.get("vocab"), tokenizers):
        raise UserError(
            f"{path} was trained with another vocabulary than {tokenizers.src.path}; "
            f"use the checkpoint and sentencepiece model of the same run"
        )
    model = build_model(cfg.model, len(tokenizers.src), len(tokenizers.tgt), tokenizers.joint)
    try:
        model.load_state_dict(checkpoint["model"])
    except RuntimeError as err:
        problem = [line.strip() for line in str(err).splitlines() if line.strip()][-1][:200]
        raise UserError(
            f"{path} does not match the model in {run_dir / CONFIG_FILE} ({problem}); "
            f"use the config the checkpoint was trained with"
        ) from err
    return Run(run_dir, cfg, tokenizers, model.to(device).eval(), checkpoint)
