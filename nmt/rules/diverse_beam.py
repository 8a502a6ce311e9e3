"""Diverse beam search (Vijayakumar et al. 2018, as fairseq's `DiverseBeamSearch`): the beam is split into
`diverse_groups` groups of hypotheses (rows g, g + G, g + 2G, … of a sentence's beam); each group runs beam
search on its own, group after group, and a token that earlier groups chose at this step costs
`diversity_strength` per choice in the groups after them. The penalty only ranks: a hypothesis' score stays
its summed log-probability. Each group finishes on its own, once beam / G of its hypotheses finished (a done
group's tokens cost the others nothing), and the n-best list holds each group's best, then each one's second
(nmt/rules/contract.py `SearchRule.groups`), so the groups stay apart; with one group it is beam search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmt.errors import ConfigError
from nmt.limits import MAX_BEAM, setting
from nmt.rules.beam import BeamSearch
from nmt.rules.contract import Extensions, StepView

if TYPE_CHECKING:
    import torch
    from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class DiverseBeamSearch(BeamSearch):
    diverse_groups: int = setting(
        1,
        "diverse beam search: groups of the beam that search apart (1: plain beam search)",
        low=1,
        high=MAX_BEAM,
    )
    diversity_strength: float = setting(  # 2.0: distinct lists, chosen on Multi30k's validation split
        2.0, "diverse beam search: the cost of a token per earlier group that chose it", low=0.0, high=100.0
    )

    @classmethod
    def check(cls, settings: Any, name: Any) -> None:
        if settings.beam_size % settings.diverse_groups:
            raise ConfigError(
                f"{name('beam_size', settings.beam_size)} is not a multiple of "
                f"{name('diverse_groups', settings.diverse_groups)}: each group keeps beam_size / "
                f"diverse_groups hypotheses"
            )

    title, switch = "diverse beam search", "diverse_groups"

    @property
    def groups(self) -> int:
        return self.diverse_groups

    @classmethod
    def of(cls, settings: Any) -> Any:
        return super(BeamSearch, cls).of(settings)  # a group of one hypothesis is still this search

    def start(self, sentences: int, device: torch.device) -> Tensor:
        scores = super(BeamSearch, self).start(sentences, device)
        scores[:, self.diverse_groups :] = float("-inf")  # each group starts from one hypothesis
        return scores

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
        import torch

        n, k = scores.shape
        groups, per = self.diverse_groups, k // self.diverse_groups
        by_group = log_probs.view(n, per, groups, -1)  # row g + G·i is hypothesis i of group g
        chosen = torch.zeros(
            n, log_probs.size(1), device=log_probs.device
        )  # (n, vocab): earlier groups' tokens
        found = []
        for g in range(groups):
            penalty = chosen.unsqueeze(1) * self.diversity_strength  # (n, 1, vocab)
            group = (by_group[:, :, g] - penalty).reshape(n * per, -1)
            ranked = BeamSearch.extend(self, group, scores[:, g::groups], view)  # (n, 2·per) each
            assert ranked.parents is not None
            true = ranked.scores + penalty.squeeze(1).gather(1, ranked.tokens)  # summed log-probabilities
            found.append(Extensions(true, ranked.tokens, ranked.parents * groups + g))
            chosen.scatter_add_(1, ranked.tokens, torch.isfinite(ranked.scores).float())  # a done group's: 0
        return merged(found, view.eos, per)


def merged(found: list[Extensions], eos: int, per: int) -> Extensions:
    """The groups' candidates side by side: group g's `per` first candidates may finish, and its first `per`
    that do not end in eos live on, at rows g, g + G, … of the new beam."""
    import torch

    groups = len(found)
    scores = torch.cat([f.scores for f in found], dim=1)  # (n, groups · 2·per)
    tokens = torch.cat([f.tokens for f in found], dim=1)
    parents = torch.cat([f.parents for f in found if f.parents is not None], dim=1)
    size = found[0].scores.size(1)  # 2·per candidates a group
    position = torch.arange(size, device=scores.device).repeat(groups)  # (groups · size,)
    ends = (tokens == eos) & (position < per)
    going = (tokens != eos) & torch.isfinite(scores)
    rank = (~going).to(torch.uint8).view(-1, groups, size).argsort(dim=2, stable=True)[:, :, :per]
    live = rank + torch.arange(groups, device=scores.device).view(1, groups, 1) * size  # (n, groups, per)
    return Extensions(scores, tokens, parents, ends, live.transpose(1, 2).reshape(-1, groups * per))
