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

from nmt.models.base import Memory, Seq2Seq, State, Step, prefixed, unprefixed


class Ensemble(Seq2Seq):
    """Models over the same vocabularies, decoding together (search only: there is no teacher-forced pass)."""

    def __init__(self, models: list[Seq2Seq]) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        memory = {"src_mask": src_mask}
        for i, model in enumerate(self.members):
            memory |= prefixed(model.encode(src, src_mask), f"{i}.")
        return memory

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        state = {}
        for i, model in enumerate(self.members):
            state |= prefixed(model.init_state(unprefixed(memory, f"{i}."), max_len, hypotheses), f"{i}.")
        return state

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        steps = [
            model.decode_step(tokens, unprefixed(memory, f"{i}."), unprefixed(state, f"{i}."))
            for i, model in enumerate(self.members)
        ]
        log_probs = torch.stack([s.log_probs for s in steps]).logsumexp(dim=0) - math.log(len(steps))
        new_state = {}
        for i, step in enumerate(steps):
            new_state |= prefixed(step.state, f"{i}.")
        weights = [s.attention for s in steps]
        attention = None if any(w is None for w in weights) else torch.stack(weights).float().mean(dim=0)
        return Step(log_probs, new_state, attention)  # log_probs (batch, vocab), attention (batch, src_len)

    def reorder_state(self, state: State, parents: Tensor) -> State:
        reordered = {}
        for i, model in enumerate(self.members):
            reordered |= prefixed(model.reorder_state(unprefixed(state, f"{i}."), parents), f"{i}.")
        return reordered

    def select_sentences(self, memory: Memory, state: State, sentences: Tensor) -> tuple[Memory, State]:
        kept_memory, kept_state = {"src_mask": memory["src_mask"].index_select(0, sentences)}, {}
        for i, model in enumerate(self.members):
            parts = unprefixed(memory, f"{i}."), unprefixed(state, f"{i}.")
            member_memory, member_state = model.select_sentences(*parts, sentences)
            kept_memory |= prefixed(member_memory, f"{i}.")
            kept_state |= prefixed(member_state, f"{i}.")
        return kept_memory, kept_state
