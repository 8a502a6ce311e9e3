"""Ensembles: several models that share a vocabulary decode as one model, averaging their probabilities.

`Ensemble` fulfils the Seq2Seq decoding contract with one entry per member in its memory and state (keys
prefixed `<member>.`), so greedy and beam search, CUDA graphs included, run it like any model. At each step
the next-token distribution is the mean of the members' probabilities, as log(mean p) = logsumexp(log p) −
log n; the attention is the mean of the members' attention.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from nmt.models.base import Memory, Seq2Seq, State, Step


def member_part(tensors: dict[str, Tensor], i: int) -> dict[str, Tensor]:
    """The entries of member `i` in an ensemble's memory or state, without their prefix."""
    prefix = f"{i}."
    return {name.removeprefix(prefix): t for name, t in tensors.items() if name.startswith(prefix)}


def prefixed(tensors: dict[str, Tensor], i: int) -> dict[str, Tensor]:
    return {f"{i}.{name}": t for name, t in tensors.items()}


class Ensemble(Seq2Seq):
    """Models over the same vocabularies, decoding together (search only: there is no teacher-forced pass)."""

    def __init__(self, models: list[Seq2Seq]) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        memory = {"src_mask": src_mask}
        for i, model in enumerate(self.members):
            memory |= prefixed(model.encode(src, src_mask), i)
        return memory

    def init_state(self, memory: Memory, max_len: int) -> State:
        state = {}
        for i, model in enumerate(self.members):
            state |= prefixed(model.init_state(member_part(memory, i), max_len), i)
        return state

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        steps = [
            model.decode_step(tokens, member_part(memory, i), member_part(state, i))
            for i, model in enumerate(self.members)
        ]
        log_probs = torch.stack([s.log_probs for s in steps]).logsumexp(dim=0) - math.log(len(steps))
        new_state = {}
        for i, step in enumerate(steps):
            new_state |= prefixed(step.state, i)
        weights = [s.attention for s in steps]
        attention = None if any(w is None for w in weights) else torch.stack(weights).float().mean(dim=0)
        return Step(log_probs, new_state, attention)  # log_probs (batch, vocab), attention (batch, src_len)
