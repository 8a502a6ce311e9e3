"""No-repeat n-gram blocking (fairseq `--no-repeat-ngram-size`, CTranslate2 `no_repeat_ngram_size`): a
token that would complete an n-gram the hypothesis already output is forbidden, so that no n-gram occurs
twice in an output (repetition loops are the commonest complaint about translation servers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nmt.limits import setting
from nmt.rules.contract import Processor, StepView

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class NoRepeatNGram(Processor):
    no_repeat_ngram_size: int = setting(
        0, "forbid any n-gram of this many tokens to occur twice in an output", low=0, high=64, zero="off"
    )

    title, switch = "n-gram blocking", "no_repeat_ngram_size"

    def process(self, log_probs: Tensor, view: StepView) -> Tensor:
        """Every earlier n-gram whose first n − 1 tokens are the last n − 1 output forbids its last token; all
        on the device, the same shapes at every step."""
        import torch

        n, step = self.no_repeat_ngram_size, view.step
        output = view.tokens[:, 1:]  # (rows, max_steps): the tokens so far, then eos
        if output.size(1) < n:
            return log_probs
        grams = output.unfold(1, n, 1)  # (rows, windows, n): the n-gram starting at each position
        recent = (step - n + 1 + torch.arange(n - 1, device=step.device)).clamp(min=0)  # (n - 1,)
        context = output.index_select(1, recent)  # (rows, n - 1): the last n - 1 tokens
        complete = torch.arange(grams.size(1), device=step.device) <= step - n  # (windows,)
        repeated = (grams[:, :, :-1] == context.unsqueeze(1)).all(dim=2) & complete  # (rows, windows)
        blocked = torch.where(repeated, float("-inf"), float("inf")).to(log_probs.dtype)
        return log_probs.scatter_reduce(1, grams[:, :, -1], blocked, reduce="amin")
