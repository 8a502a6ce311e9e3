"""Ensembles: several models that share a vocabulary decode as one model, averaging their probabilities.

`Ensemble` fulfils the Seq2Seq decoding contract with one entry per member in its memory and state (keys
prefixed `<member>.`), so greedy and beam search, CUDA graphs included, run it like any model. At each step
the next-token distribution is the mean of the members' probabilities, as log(mean p) = logsumexp(log p) −
log n; the attention is the mean of the members' attention.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import cast

import torch
from torch import Tensor, nn

from nmt.models.base import Memory, Seq2Seq, State, Step, prefixed, unprefixed


class Ensemble(Seq2Seq):
    """Models over the same vocabularies, decoding together (search only: there is no teacher-forced pass)."""

    def __init__(self, models: list[Seq2Seq]) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)

    def _members(self) -> Iterator[tuple[str, Seq2Seq]]:
        """Each member with the prefix of its entries in memory and state."""
        for i, model in enumerate(self.members):
            yield f"{i}.", cast(Seq2Seq, model)  # nn.ModuleList types its items as Module

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        memory = {"src_mask": src_mask}
        for prefix, model in self._members():
            memory |= prefixed(model.encode(src, src_mask), prefix)
        return memory

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        state: State = {}
        for prefix, model in self._members():
            state |= prefixed(model.init_state(unprefixed(memory, prefix), max_len, hypotheses), prefix)
        return state

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        steps = [
            (prefix, model.decode_step(tokens, unprefixed(memory, prefix), unprefixed(state, prefix)))
            for prefix, model in self._members()
        ]
        log_probs = torch.stack([s.log_probs for _, s in steps]).logsumexp(dim=0) - math.log(len(steps))
        new_state: State = {}
        for prefix, step in steps:
            new_state |= prefixed(step.state, prefix)
        weights = [s.attention for _, s in steps if s.attention is not None]
        attention = torch.stack(weights).float().mean(dim=0) if len(weights) == len(steps) else None
        return Step(log_probs, new_state, attention)  # log_probs (batch, vocab), attention (batch, src_len)

    def reorder_state(self, state: State, parents: Tensor) -> State:
        reordered: State = {}
        for prefix, model in self._members():
            reordered |= prefixed(model.reorder_state(unprefixed(state, prefix), parents), prefix)
        return reordered

    def select_sentences(self, memory: Memory, state: State, sentences: Tensor) -> tuple[Memory, State]:
        kept_memory: Memory = {"src_mask": memory["src_mask"].index_select(0, sentences)}
        kept_state: State = {}
        for prefix, model in self._members():
            parts = unprefixed(memory, prefix), unprefixed(state, prefix)
            member_memory, member_state = model.select_sentences(*parts, sentences)
            kept_memory |= prefixed(member_memory, prefix)
            kept_state |= prefixed(member_state, prefix)
        return kept_memory, kept_state
