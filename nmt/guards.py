"""The guards of an update: what happens when its loss is not finite or it does not fit in GPU memory.

A non-finite update is skipped on the device (the fused AdamW does not apply it) and counted there, without a
host sync; `check` reads the counts where the host waits anyway and ends training after `max_bad_steps` in a
row. An update that runs out of GPU memory is skipped with a warning, and ends training after as many in a
row; under torchrun it ends the job at once, since the other processes already wait in DDP's all-reduce.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import Tensor

from nmt.data.batching import Batch
from nmt.errors import UserError

log = logging.getLogger(__name__)


class UpdateGuards:
    """Counts skipped updates and decides when there were too many."""

    def __init__(self, device: torch.device, max_bad_steps: int) -> None:
        self.max_bad_steps = max_bad_steps
        self.skipped = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates since reported
        self.bad_streak = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates in a row
        self.oom_streak = 0  # updates in a row skipped for lack of GPU memory

    def count(self, norm: Tensor) -> Tensor:
        """Record an update whose gradient norm was `norm` (0-d); returns whether it was finite (0-d bool)."""
        finite = torch.isfinite(norm)
        self.skipped += ~finite
        self.bad_streak = (self.bad_streak + 1) * ~finite
        self.oom_streak = 0
        return finite

    def out_of_memory(self, batches: list[Batch], step: int, batch_tokens: int, distributed: bool) -> None:
        """Record an update skipped for lack of GPU memory; raise UserError when training must end."""
        self.oom_streak += 1
        shapes = "; ".join(
            f"{b.size} sentences, source length {b.src.size(1)}, target length {b.tgt_in.size(1)}"
            for b in batches
        )
        if distributed:
            raise UserError(
                f"out of GPU memory at step {step} on a batch of {shapes}; all processes stop (each update "
                f"needs them all): lower train.batch_tokens (now {batch_tokens}) and --resume"
            )
        log.warning("step %d: out of GPU memory on a batch of %s; batch skipped", step, shapes)
        if self.oom_streak >= self.max_bad_steps:
            raise UserError(
                f"out of GPU memory on {self.oom_streak} batches in a row; lower train.batch_tokens "
                f"(now {batch_tokens}) or the model size"
            )

    def check(self, step: int, last: Path) -> None:
        """Report non-finite updates skipped since the last check (one host sync); raise UserError after
        `max_bad_steps` in a row. Skipped updates left the weights as they were and the abort writes nothing,
        so `last` (last.pt) keeps the last good weights."""
        skipped, streak = torch.stack([self.skipped, self.bad_streak]).tolist()
        if skipped:
            self.skipped.zero_()
            log.warning("step %d: %d updates skipped for non-finite loss/gradients", step, skipped)
        if streak >= self.max_bad_steps:
            kept = f"last good checkpoint: {last}" if last.is_file() else "no checkpoint was written"
            raise UserError(
                f"loss became NaN/inf in {streak} consecutive steps; {kept}; lower train.lr or check the data"
            )
