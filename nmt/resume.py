"""What a checkpoint needs besides weights to continue a run exactly: random states, and metrics that a
killed run logged after its last checkpoint."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import torch

from nmt.files import atomic_write_text


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


def forget_metrics_after(path: Path, step: int) -> None:
    """Drop the metrics a killed run logged after its last checkpoint (and a line torn by the kill)."""

    def step_of(line: str) -> float:
        try:
            return json.loads(line)["step"]
        except (ValueError, KeyError, TypeError):
            return math.inf

    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if step_of(line) <= step]
        if len(kept) < len(lines):
            atomic_write_text(path, "".join(line + "\n" for line in kept))


def as_python_rng_state(state: list | tuple) -> tuple:
    """random.setstate wants tuples; a checkpoint may hand back lists."""
    version, internal, gauss = state
    return version, tuple(internal), gauss
