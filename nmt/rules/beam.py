"""Beam search (and greedy search, its width-1 case): the 2k best one-token continuations of a sentence's k
live hypotheses by summed log-probability, best first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmt.rules.contract import Extensions, Scored, StepView

if TYPE_CHECKING:
    import torch
    from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class Greedy(Scored):
    """The most probable next token, one hypothesis per sentence: beam search of width 1, faster."""

    @property
    def width(self) -> int:
        return 1

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
        best, token = log_probs.max(dim=-1)  # (sentences,) each
        return Extensions((scores.view(-1) + best).unsqueeze(1), token.unsqueeze(1), None)

    title = "greedy search"


@dataclass(frozen=True, kw_only=True)
class BeamSearch(Scored):
    """Beam search: the 2k best one-token continuations of a sentence's k live hypotheses by summed
    log-probability, best first; with k = 1 exactly greedy."""

    beam_size: int = 5  # search.beam_size, a setting of the search itself

    @property
    def width(self) -> int:
        return self.beam_size

    title = "beam search"  # the search when no other rule is asked for

    @classmethod
    def of(cls, settings: Any) -> Any:
        """Beam search; greedy search for a beam of 1."""
        if settings.beam_size == 1:
            return Greedy(
                length_penalty=settings.length_penalty, length_normalization=settings.length_normalization
            )
        return super().of(settings)

    def start(self, sentences: int, device: torch.device) -> Tensor:
        scores = super().start(sentences, device)
        scores[:, 1:] = float("-inf")  # all beams start identical: keep one
        return scores

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
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
    import torch

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
