"""Checkpoint averaging: the mean of the weights of the last N kept checkpoints, often better than any one."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from nmt.config.yaml_file import load_saved_config, saved_model_config
from nmt.errors import ConfigError, UserError
from nmt.models.config import ModelConfig
from nmt.run.checkpoint import averaged_checkpoint
from nmt.run.checkpoint_io import load_checkpoint, save_checkpoint
from nmt.run.directory import RunDir

log = logging.getLogger(__name__)


def average_weights(paths: list[Path], model: ModelConfig | None = None) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights in `paths` (all from one run). Every file must hold the model
    of the first one (and `model`, the run's model settings, when given), else UserError names it."""
    reference = load_checkpoint(paths[0])
    expected = model or _model_of(paths[0], reference)
    _check_same_model(paths[0], reference, expected, reference)
    total = {name: tensor.double() for name, tensor in reference["model"].items()}
    for path in paths[1:]:
        checkpoint = load_checkpoint(path)
        _check_same_model(path, checkpoint, expected, reference)
        for name, tensor in checkpoint["model"].items():
            total[name] += tensor.double()
    return {name: (value / len(paths)).to(reference["model"][name].dtype) for name, value in total.items()}


def _check_same_model(path: Path, checkpoint: dict, model: ModelConfig, reference: dict) -> None:
    """Refuse a snapshot of another model: other model settings (as this version or an older one wrote
    them), vocabulary or weight shapes."""
    shapes = {name: tensor.shape for name, tensor in checkpoint["model"].items()}
    wanted = {name: tensor.shape for name, tensor in reference["model"].items()}
    if _model_of(path, checkpoint) != model or checkpoint.get("vocab") != reference.get("vocab"):
        problem = "its model settings or vocabulary differ from the run's"
    elif shapes != wanted:
        problem = "its weights have other names or shapes"
    else:
        return
    raise UserError(f"{path} holds another model than the one to average ({problem}); remove it")


def _model_of(path: Path, checkpoint: dict) -> ModelConfig:
    """The model settings a checkpoint holds (also as an older version wrote them)."""
    try:
        return saved_model_config(checkpoint["config"]["model"])
    except ConfigError as err:
        raise UserError(f"{path} holds model settings that cannot be read ({err}); remove it") from err


def average_run(run_dir: RunDir, last: int) -> Path:
    """Average the last `last` kept checkpoints of a run into averaged.pt; returns its path."""
    kept = run_dir.snapshots()
    if len(kept) < max(last, 1):
        hint = _fewer_snapshots_hint(run_dir, len(kept), last)
        raise UserError(
            f"{run_dir} keeps {len(kept)} checkpoint(s) in checkpoints/, fewer than {last} to average; {hint}"
        )
    chosen = kept[-last:]
    newest = load_checkpoint(chosen[-1])
    steps = [int(path.stem.removeprefix("step")) for path in chosen]
    model = load_saved_config(run_dir.config).model
    payload = averaged_checkpoint(average_weights(chosen, model), newest, steps)
    save_checkpoint(run_dir.checkpoint("averaged"), payload)
    log.info("averaged the checkpoints of steps %s into %s", steps, run_dir.checkpoint("averaged"))
    return run_dir.checkpoint("averaged")


def _fewer_snapshots_hint(run_dir: RunDir, kept: int, wanted: int) -> str:
    """Why a run keeps fewer snapshots than asked for, and what to do about it."""
    try:
        keep = load_saved_config(run_dir.config).train.keep_checkpoints
    except UserError:
        keep = 0
    if keep >= wanted and kept:  # the run kept all it could: it stopped after `kept` validations
        return f"training stopped after {kept} validation(s); average those with --last {kept}"
    if keep >= wanted:
        return "training stopped before its first validation"
    if not kept:
        return (
            f"it kept none (train.keep_checkpoints={keep}): translate with its best or last checkpoint, or "
            f"train with train.keep_checkpoints={wanted} to average"
        )
    return f"average those with --last {kept}, or train with train.keep_checkpoints={wanted}"
