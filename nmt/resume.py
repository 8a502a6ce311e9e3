"""Continuing a run exactly from its last.pt: weights, optimizer, schedule, progress and the random number
generators' states."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nmt.checkpoint import same_vocabulary
from nmt.data.prepare import PreparedData
from nmt.distributed import World
from nmt.errors import UserError
from nmt.progress import Progress
from nmt.update import Update

log = logging.getLogger(__name__)


def restore_training(
    last: Path,
    state: dict[str, Any],
    model: nn.Module,
    update: Update,
    data: PreparedData,
) -> Progress:
    """Load the state of `last` (loaded as `state`) into the model and the update's optimizer and schedule;
    returns the saved progress (data position and token budget included)."""
    if not same_vocabulary(state["vocab"], data.tokenizers):
        raise UserError(f"{last} does not match the run's sentencepiece model; cannot resume")
    model.load_state_dict(state["model"])
    try:
        update.optimizer.load_state_dict(state["optimizer"])
    except ValueError as err:  # e.g. written before self-attention fused its projections
        raise UserError(
            f"{last} holds optimizer state for other parameters than this version of "
            f"nmt builds ({err}); its weights still translate, but training cannot resume from it"
        ) from err
    update.scheduler.load_state_dict(state["scheduler"])
    progress = Progress(**state["progress"])
    # checkpoints written before the budget moved into the progress keep it in their config (checked against
    # the config by RunDir.check_same_setup)
    progress.batch_tokens = progress.batch_tokens or state["config"]["train"]["batch_tokens"]
    return progress


def restore_rng(state: dict[str, Any], world: World, reseed: int) -> None:
    """This process's saved random states; a run saved by another number of processes gives the processes
    past the first a seed of their own (`reseed` + rank), so their dropout differs."""
    saved = state.get("rng_ranks", [state["rng"]])
    set_rng_state(saved[world.rank % len(saved)])
    if len(saved) != world.size:
        log.warning("resuming in %d processes a run saved by %d: dropout will differ", world.size, len(saved))
        if world.rank:
            torch.manual_seed(reseed + world.rank)


def rng_state() -> dict:
    """This process's random number generator states (torch CPU and CUDA, Python's `random`)."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all(),
        "python": random.getstate(),
    }


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` returned (as loaded from a checkpoint)."""
    torch.set_rng_state(state["torch"].cpu())
    if torch.cuda.is_available() and state["cuda"]:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    random.setstate(as_python_rng_state(state["python"]))


def as_python_rng_state(state: list | tuple) -> tuple:
    """random.setstate wants tuples; a checkpoint may hand back lists."""
    version, internal, gauss = state
    return version, tuple(internal), gauss
