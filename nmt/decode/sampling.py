"""Sampling: each hypothesis draws its next token from the model's distribution (as fairseq `--sampling`,
OpenNMT-py `random_sampling_topk` and Marian `--output-sampling` do), for back-translation and diverse
outputs.

A rule of nmt/decode/rules.py's contract in a file of its own: `samples` hypotheses per sentence, each drawn
on its own row (no reordering). `temperature` sharpens (< 1) or flattens (> 1) the distribution; `top_k`
keeps the k most probable tokens, `top_p` the smallest set whose probability reaches p (nucleus sampling,
Holtzman et al. 2020); the score of a sample is the model's own log-probability of its tokens, whatever the
temperature. The draws come from a generator seeded with `seed`: the same inputs and settings give the same
samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from nmt.decode.rules import Extensions, SearchRule


@dataclass(frozen=True)
class Sampling(SearchRule):
    samples: int = 1
    temperature: float = 1.0
    top_k: int = 0  # 0: every token
    top_p: float = 1.0
    seed: int = 0
    length_penalty: float = 1.0
    graph_safe = False  # random draws: each step runs eagerly
    generators: dict[torch.device, torch.Generator] = field(default_factory=dict, compare=False, repr=False)

    @property
    def width(self) -> int:  # type: ignore[override]
        return self.samples

    def extend(self, log_probs: Tensor, scores: Tensor) -> Extensions:
        token = torch.multinomial(
            self.filtered(log_probs).softmax(dim=-1), 1, generator=self.generator(log_probs.device)
        )
        chosen = log_probs.gather(1, token).view_as(scores)  # (sentences, samples)
        return Extensions(scores + chosen, token.view_as(scores), None)

    def filtered(self, log_probs: Tensor) -> Tensor:
        """The tempered log-probabilities with the tokens outside top-k and top-p at -inf. (rows, vocab)"""
        logits = log_probs / self.temperature
        if 0 < self.top_k < logits.size(-1):
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (rows, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, order = logits.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            beyond = probs.cumsum(dim=-1) - probs >= self.top_p  # the mass before it reached p: (rows, vocab)
            beyond[:, 0] = False  # the most probable token stays, also where p is 0 in float32 (below 1e-45)
            logits = logits.masked_fill(torch.zeros_like(beyond).scatter(1, order, beyond), float("-inf"))
        return logits

    def generator(self, device: torch.device) -> torch.Generator:
        """This rule's generator on `device`, seeded with `seed` when first used."""
        if device not in self.generators:
            self.generators[device] = torch.Generator(device).manual_seed(self.seed)
        return self.generators[device]
