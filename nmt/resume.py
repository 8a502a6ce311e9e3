"""What a checkpoint needs besides weights to continue a run exactly: the random number generators' states."""

from __future__ import annotations

import random

import torch


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
