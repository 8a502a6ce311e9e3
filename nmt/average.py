"""Checkpoint averaging: the mean of the weights of the last N kept checkpoints, often better than any one."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from nmt.checkpoint import load_checkpoint, save_checkpoint, snapshots
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
        raise UserError(
            f"{run_dir} keeps {len(kept)} checkpoint(s) in checkpoints/, fewer than the {last} to average; "
            f"train with train.keep_checkpoints={last} (or average fewer)"
        )
    chosen = kept[-last:]
    newest = load_checkpoint(chosen[-1])
    steps = [int(path.stem.removeprefix("step")) for path in chosen]
    payload = {"model": average_weights(chosen), "config": newest["config"], "vocab": newest["vocab"],
               "averaged_steps": steps}  # fmt: skip
    save_checkpoint(run_dir / AVERAGED, payload)
    log.info("averaged the checkpoints of steps %s into %s", steps, run_dir / AVERAGED)
    return run_dir / AVERAGED
