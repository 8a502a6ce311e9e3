"""A target-language vocabulary (vocabulary isolation, Chen et al. 2023): translating into language L, every
subword never seen on the target side of L's training data is forbidden, save those every language shares
(nmt/data/target_vocabulary.py says which). It keeps a multilingual model from answering in the wrong
language, which it does most in zero-shot directions: on by default there, an option for trained ones.

The search config says when it applies; the translator, which knows the direction and the run's
vocabularies, has it bound to the subwords it forbids (`bound`; unbound, it forbids none) or left out."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nmt.errors import UserError
from nmt.limits import setting
from nmt.rules.contract import Processor, StepView

if TYPE_CHECKING:
    import torch
    from torch import Tensor

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TargetVocabulary(Processor):
    target_vocabulary: bool = setting(
        False, "in trained directions, keep outputs to the target language's vocabulary (multilingual runs)"
    )
    zero_shot_vocabulary: bool = setting(
        True, "in zero-shot directions, keep outputs to the target language's vocabulary (multilingual runs)"
    )
    forbidden: tuple[int, ...] = field(default=(), compare=False, repr=False)  # none until bound
    vocabulary_size: int = field(default=0, compare=False, repr=False)

    title = "a target-language vocabulary"

    @classmethod
    def reads(cls) -> tuple[str, ...]:
        """Its two settings (what it forbids is bound by the translator, not read from a config)."""
        return tuple(f.name for f in cls.settings())

    def wanted(self, zero_shot: bool) -> bool:
        """Whether it applies to a direction trained on (`zero_shot` False) or not."""
        return self.zero_shot_vocabulary if zero_shot else self.target_vocabulary

    def forbidding(self, ids: tuple[int, ...], vocabulary_size: int) -> TargetVocabulary:
        """This processor bound to the subword ids it forbids, of a vocabulary of `vocabulary_size`."""
        return replace(self, forbidden=ids, vocabulary_size=vocabulary_size)

    def bound(
        self, zero_shot: bool, allowed: Sequence[int] | None, vocabulary_size: int, engine: str, target: str
    ) -> TargetVocabulary | None:
        """This processor bound to what it forbids translating into `target` (a multilingual model's
        direction, zero-shot or not) with a vocabulary of `vocabulary_size`, given the ids `allowed` there
        (None: not known to the `engine`); None where it does not apply: a direction its settings leave
        alone, or a zero-shot one whose vocabulary is not known (warned). A UserError where a trained
        direction's vocabulary is not known."""
        if not self.wanted(zero_shot):
            return None
        if allowed is None:
            missing = (
                f"the {engine} engine has no vocabulary of {target} here (an export carries one only from a "
                f"run with encoder tags, and a run trained by an earlier nmt has none)"
            )
            if zero_shot:  # the default: searched without
                log.warning("%s: zero-shot outputs are not held to it", missing)
                return None
            fix = "translate with a run directory trained by this nmt, or add --no-target-vocabulary"
            raise UserError(f"{missing}: {fix}")
        kept = set(allowed)
        return self.forbidding(tuple(i for i in range(vocabulary_size) if i not in kept), vocabulary_size)

    def constants(self, device: torch.device) -> dict[str, Tensor]:
        """A mask of the forbidden ids, (vocab,) True = forbidden: the same shape for every language, so
        that one captured step serves them all."""
        import torch

        if not self.vocabulary_size:
            return {}
        forbidden = torch.zeros(self.vocabulary_size, dtype=torch.bool)
        forbidden[list(self.forbidden)] = True
        return {"forbidden": forbidden.to(device)}

    def process(self, log_probs: Tensor, view: StepView) -> Tensor:
        forbidden = view.constants.get("forbidden")  # (vocab,); absent: not bound, nothing forbidden
        return log_probs if forbidden is None else log_probs.masked_fill_(forbidden, float("-inf"))
