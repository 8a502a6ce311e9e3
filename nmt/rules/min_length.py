"""Minimum output length (fairseq `--min-len`, CTranslate2 `min_decoding_length`): eos is forbidden until an
output holds this many tokens (a forced prefix not counted); the output length limit still ends a search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nmt.limits import MAX_SIZE, setting
from nmt.rules.contract import Processor, StepView

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class MinLength(Processor):
    min_length: int = setting(0, "tokens an output holds at least before eos", low=0, high=MAX_SIZE)

    title, switch = "a minimum length", "min_length"

    def process(self, log_probs: Tensor, view: StepView) -> Tensor:
        eos = log_probs[:, view.eos]  # (rows,), a view: filled in place
        eos.masked_fill_(view.step < self.min_length, float("-inf"))
        return log_probs
