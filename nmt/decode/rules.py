"""Search rules: which continuations of the live hypotheses a search step proposes (fairseq search.py's idea).

A rule keeps `width` live hypotheses per sentence. Given their next-token log-probabilities and summed
scores, `extend` proposes candidates, best first where a rule ranks them; the search loop
(nmt/decode/search.py) does the rest, whatever the rule: candidates ending in eos among the first `width` are
finished hypotheses, the best `width` others live on, and every field that moves with a hypothesis (its
tokens, its attention) follows it. A rule that never moves hypotheses between rows (each candidate continues
its own row) says so by returning no parents, and the loop skips the reordering.

Greedy and beam search are here; sampling is nmt/decode/sampling.py, a rule added in a file of its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields, is_dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Extensions:
    """The candidates a step proposes for each sentence: `scores` (sentences, candidates) summed
    log-probabilities with the new token, `tokens` (sentences, candidates), and `parents` (sentences,
    candidates), the live hypothesis (0 … width − 1) each continues; None: candidate j continues hypothesis j
    (then there are `width` candidates)."""

    scores: Tensor
    tokens: Tensor
    parents: Tensor | None


class SearchRule(ABC):
    """The contract of a search rule. `width` live hypotheses per sentence; finished hypotheses are scored by
    their summed log-probability over the GNMT length penalty of `length_penalty` (nmt/decode/search.py
    `score`). `graph_safe`: whether a step may be replayed from a CUDA graph (deterministic rules)."""

    width: int
    length_penalty: float
    graph_safe: bool = True

    def start(self, sentences: int, device: torch.device) -> Tensor:
        """The scores of the live hypotheses before the first step. (sentences, width)"""
        return torch.zeros(sentences, self.width, device=device)

    @abstractmethod
    def extend(self, log_probs: Tensor, scores: Tensor) -> Extensions:
        """Candidates from the next-token log-probabilities of every live hypothesis, log_probs (sentences *
        width, vocab) with banned tokens at -inf, and their scores (sentences, width)."""

    @property
    def kind(self) -> tuple:
        """What a captured step bakes in of this rule, its class and every setting: nmt/decode/step_graphs.py
        keys its graphs by it, so a graph captured for one setting never replays for another. A rule's
        settings are its dataclass fields (those compared), else its attributes; each must be hashable."""
        if is_dataclass(self):
            settings = tuple((f.name, getattr(self, f.name)) for f in fields(self) if f.compare)
        else:
            settings = tuple(sorted(vars(self).items()))
        return (type(self).__qualname__, self.width, *settings)


@dataclass(frozen=True)
class Greedy(SearchRule):
    """The most probable next token, one hypothesis per sentence."""

    length_penalty: float = 1.0
    width = 1

    def extend(self, log_probs: Tensor, scores: Tensor) -> Extensions:
        best, token = log_probs.max(dim=-1)  # (sentences,) each
        return Extensions((scores.view(-1) + best).unsqueeze(1), token.unsqueeze(1), None)


@dataclass(frozen=True)
class BeamSearch(SearchRule):
    """Beam search: the 2k best one-token continuations of a sentence's k live hypotheses by summed
    log-probability, best first; with k = 1 exactly greedy."""

    beam_size: int
    length_penalty: float = 1.0

    @property
    def width(self) -> int:  # type: ignore[override]
        return self.beam_size

    def start(self, sentences: int, device: torch.device) -> Tensor:
        scores = torch.zeros(sentences, self.beam_size, device=device)
        scores[:, 1:] = float("-inf")  # all beams start identical: keep one
        return scores

    def extend(self, log_probs: Tensor, scores: Tensor) -> Extensions:
        n, k = scores.shape
        width = min(2 * k, log_probs.numel() // n)
        rows, columns = best_blocks(log_probs, scores, width)  # (n, width), (n, width, BLOCK)
        tokens = columns.clamp(max=log_probs.size(1) - 1)  # past the vocabulary: any token, scored -inf
        values = log_probs[rows.unsqueeze(-1), tokens].masked_fill(
            columns >= log_probs.size(1), float("-inf")
        )
        candidates = (values + scores.view(-1)[rows].unsqueeze(-1)).view(n, -1)  # (n, width * BLOCK)
        top_scores, index = candidates.topk(width, dim=1)  # (n, width)
        parents = rows.gather(1, index // BLOCK) % k
        return Extensions(top_scores, tokens.view(n, -1).gather(1, index), parents)


BLOCK = 64  # vocabulary entries a block: beam search ranks blocks by their best entry first


def best_blocks(log_probs: Tensor, scores: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """The rows and columns of the `width` most promising blocks of `BLOCK` vocabulary entries of each
    sentence (by their best entry plus the hypothesis' score): the `width` best continuations of a sentence
    lie among them, since a better continuation outside them would be beaten by the best of `width` blocks.
    Ranking 62 block maxima a row costs a fraction of ranking 4,000 entries. log_probs (n * k, vocab),
    scores (n, k) → rows (n, width), columns (n, width, BLOCK); a column past the vocabulary stands for no
    entry."""
    n, k = scores.shape
    vocab = log_probs.size(1)
    whole = vocab // BLOCK * BLOCK
    maxima = log_probs[:, :whole].view(n * k, -1, BLOCK).amax(dim=-1)  # (n * k, whole / BLOCK)
    if whole < vocab:
        maxima = torch.cat([maxima, log_probs[:, whole:].amax(dim=-1, keepdim=True)], dim=1)
    blocks = maxima.size(1)
    ranked = (scores.view(-1, 1) + maxima).view(n, k * blocks)  # (n, k * blocks)
    chosen = ranked.topk(min(width, k * blocks), dim=1).indices  # (n, width) (fewer: every block)
    rows = chosen // blocks + torch.arange(n, device=scores.device).unsqueeze(1) * k  # (n, width)
    first = chosen % blocks * BLOCK  # (n, width)
    columns = first.unsqueeze(-1) + torch.arange(BLOCK, device=scores.device)  # (n, width, BLOCK)
    return rows, columns
