"""Where a training run stands: saved in every checkpoint so that `--resume` continues exactly; why it
stopped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nmt.config.sections import TrainConfig

StopReason = Literal["time budget", "max steps", "max epochs", "early stopping", "target BLEU", "signal"]


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so `--resume` continues exactly."""

    step: int = 0
    epoch: int = 0
    batches_done: int = 0  # batches of the current epoch already trained on
    batch_tokens: int = 0  # the token budget of a batch: train.batch_tokens, or what `auto` chose
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one
    validated_step: int = -1  # the step of the last validation
    parent: str = ""  # the checkpoint training started from (--init-from), if any
    elapsed: float = 0.0  # training seconds before this process started
    window_loss: float = 0.0  # the log window since the last training record: loss summed over processes,
    window_tokens: int = 0  # … target tokens, and …
    window_seconds: float = 0.0  # … seconds; carried over a resume, so that records do not depend on one
    stop_reason: str = ""  # the StopReason of the last stop ("" before the first)


def describe_stop(reason: StopReason, cfg: TrainConfig) -> str:
    """The stopping rule that fired, with the setting behind it: `time budget (train.max_time=600 s)`."""
    settings = {
        "time budget": f"train.max_time={cfg.max_time:g} s",
        "max steps": f"train.max_steps={cfg.max_steps}",
        "max epochs": f"train.max_epochs={cfg.max_epochs}",
        "early stopping": f"no better validation BLEU in train.patience={cfg.patience} validations",
        "target BLEU": f"train.target_bleu={cfg.target_bleu:g} reached",
        "signal": "Ctrl-C or SIGTERM",
    }
    return f"{reason} ({settings[reason]})"
