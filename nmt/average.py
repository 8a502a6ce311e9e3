"""Checkpoint averaging: the mean of the weights of the last N kept checkpoints, often better than any one."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from nmt.checkpoint import load_checkpoint, save_checkpoint
from nmt.errors import UserError
from nmt.run_dir import RunDir

log = logging.getLogger(__name__)


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights in `paths` (all from one run)."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_checkpoint(path)["model"].items():
            total[name] = total[name] + tensor.double() if name in total else tensor.double()
    reference = load_checkpoint(paths[0])["model"]
    return {name: (value / len(paths)).to(reference[name].dtype) for name, value in total.items()}


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
    payload = {"model": average_weights(chosen), "config": newest["config"], "vocab": newest["vocab"],
               "averaged_steps": steps}  # fmt: skip
    save_checkpoint(run_dir.checkpoint("averaged"), payload)
    log.info("averaged the checkpoints of steps %s into %s", steps, run_dir.checkpoint("averaged"))
    return run_dir.checkpoint("averaged")


def _fewer_snapshots_hint(run_dir: RunDir, kept: int, wanted: int) -> str:
    """Why a run keeps fewer snapshots than asked for, and what to do about it."""
    try:
        keep = run_dir.load_config().train.keep_checkpoints
    except UserError:
        keep = 0
    if keep >= wanted and kept:  # the run kept all it could: it stopped after `kept` validations
        return f"training stopped after {kept} validation(s); average those with --last {kept}"
    if keep >= wanted:
        return "training stopped before its first validation"
    return f"train with train.keep_checkpoints={wanted} (this run kept {keep}) or average fewer"
