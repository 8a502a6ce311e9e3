"""COMET (Rei et al. 2020) from a checkpoint on disk: `nmt evaluate --comet PATH`, with the optional
unbabel-comet package (`pip install 'nmt[comet]'`). PATH is a model directory as COMET lays one out (what
`comet.download_model` or a Hugging Face snapshot of Unbabel/wmt22-comet-da holds: `hparams.yaml` and
`checkpoints/model.ckpt`), or that `model.ckpt` itself. Nothing is downloaded: the Hugging Face libraries run
offline, and the encoder it names must be in their cache already."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from nmt.errors import UserError

CHECKPOINT = Path("checkpoints") / "model.ckpt"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
BATCH_SIZE = 16
MISSING = "--comet needs the unbabel-comet package: pip install 'nmt[comet]'"


def checkpoint_file(path: Path) -> Path:
    """The `model.ckpt` of a COMET model directory (or the file itself); a UserError where there is none."""
    found = path / CHECKPOINT if path.is_dir() else path
    if not found.is_file() or not (found.parent.parent / "hparams.yaml").is_file():
        raise UserError(
            f"--comet {path}: no COMET model there (expected {path / CHECKPOINT} and "
            f"{path / 'hparams.yaml'}, as COMET lays out a downloaded model)"
        )
    return found


def check_comet(path: Path) -> None:
    """A UserError where `path` holds no COMET model, or where the unbabel-comet package is not installed."""
    checkpoint_file(path)
    if importlib.util.find_spec("comet") is None:
        raise UserError(MISSING)


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """The Hugging Face libraries told to read their cache only, for as long as the block runs."""
    before = {name: os.environ.get(name) for name in OFFLINE}
    os.environ.update(OFFLINE)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def comet_score(
    path: Path, sources: list[str], hypotheses: list[str], references: list[str]
) -> dict[str, Any]:
    """The COMET system score (the mean of its sentence scores) of `hypotheses` of `sources` against
    `references`, with the model at `path`, on a GPU where there is one."""
    checkpoint = checkpoint_file(path)
    with _offline():
        try:
            from comet import load_from_checkpoint
        except ImportError:
            raise UserError(MISSING) from None
        try:
            model = load_from_checkpoint(str(checkpoint), local_files_only=True)
        except Exception as err:  # COMET and Lightning raise anything: one line, naming the cause
            cause = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise UserError(f"--comet {path}: COMET cannot load it offline: {cause}") from err
        samples = [
            {"src": s, "mt": h, "ref": r} for s, h, r in zip(sources, hypotheses, references, strict=True)
        ]
        gpus = int(torch.cuda.is_available())
        found = model.predict(samples, batch_size=BATCH_SIZE, gpus=gpus, progress_bar=False)
    return {"score": round(float(found.system_score), 4), "model": str(checkpoint.parent.parent)}
