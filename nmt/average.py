"""Checkpoint averaging: the mean of the weights of the last N kept checkpoints, often better than any one."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from nmt.checkpoint import CONFIG_FILE, load_checkpoint, save_checkpoint, snapshots
from nmt.config import load_config
from nmt.errors import UserError

log = logging.getLogger(__name__)

AVERAGED = "averaged.pt"


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights in `paths` (all from one run)."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_checkpoint(path)["model"].items():
            total[name] = total[name] + tensor.double() if name in total else tensor.double()
    reference = load_checkpoint(paths[0])["model"]
    return {name: (value / len(paths)).to(reference[name].dtype) for name, value in total.items()}


def average_run(run_dir: Path, last: int) -> Path:
    """Average the last `last` kept checkpoints of a run into `run_dir/averaged.pt`; returns its path."""
    kept = snapshots(run_dir)
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
    save_checkpoint(run_dir / AVERAGED, payload)
    log.info("averaged the checkpoints of steps %s into %s", steps, run_dir / AVERAGED)
    return run_dir / AVERAGED


def _fewer_snapshots_hint(run_dir: Path, kept: int, wanted: int) -> str:
    """Why a run keeps fewer snapshots than asked for, and what to do about it."""
    try:
        keep = load_config(run_dir / CONFIG_FILE).train.keep_checkpoints
    except UserError:
        keep = 0
    if keep >= wanted and kept:  # the run kept all it could: it stopped after `kept` validations
        return f"training stopped after {kept} validation(s); average those with --last {kept}"
    if keep >= wanted:
        return "training stopped before its first validation"
    return f"train with train.keep_checkpoints={wanted} (this run kept {keep}) or average fewer"
