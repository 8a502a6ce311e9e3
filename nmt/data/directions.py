"""Where each direction of a run lies in its prepared data, and how each epoch draws them.

The encoded training corpus holds every direction's pairs once, one direction after another. An epoch holds as
many examples as the corpus has pairs, shared among the directions in proportion to
`weight × pairs ** (1 / temperature)` (`direction_draws`): a direction drawn `m` times with `n` pairs appears
`m // n` times whole (upsampling by repetition) and `m % n` of its pairs more, drawn without replacement from
the epoch's seed (`epoch_examples`); with the default weights and temperature every pair appears exactly once.
The rows then go through the usual token-budget batching (nmt/data/batching.py `token_budget_groups`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nmt.config.multilingual import Direction, RunDirections
from nmt.data.language_tags import LanguageTags


def direction_draws(pairs: Sequence[int], weights: Sequence[float], temperature: float) -> list[int]:
    """Examples of each direction per epoch: sum(pairs) in all, each direction's share ∝ weight × pairs **
    (1 / temperature) (a direction without pairs gets none)."""
    counts = np.asarray(pairs, dtype=np.float64)
    raw = np.asarray(weights, dtype=np.float64) * counts ** (1.0 / temperature)
    if raw.sum() == 0:
        return [0] * len(counts)
    return np.rint(raw / raw.sum() * counts.sum()).astype(np.int64).tolist()


def epoch_examples(pairs: Sequence[int], draws: Sequence[int], seed: int) -> np.ndarray:
    """The corpus rows of one epoch (directions' rows consecutive, in order; any order within): each
    direction's rows `draws // pairs` times, and `draws % pairs` of them more, without replacement."""
    rng, start, rows = np.random.default_rng(seed), 0, [np.zeros(0, np.int64)]
    for count, drawn in zip(pairs, draws, strict=True):
        own = np.arange(start, start + count, dtype=np.int64)
        if count:
            rows += [np.tile(own, drawn // count), rng.choice(own, drawn % count, replace=False)]
        start += count
    return np.concatenate(rows)


@dataclass(frozen=True)
class DirectionData:
    """The directions of a run (`run`: in the order listed; a bilingual run's one pair), their pairs in the
    training corpus and in the validation split (each direction's rows after those of the ones before), the
    tags, and each direction's examples per epoch."""

    run: RunDirections
    train_pairs: tuple[int, ...]
    valid_pairs: tuple[int, ...]
    tags: LanguageTags
    draws: tuple[int, ...]

    @classmethod
    def plan(
        cls, run: RunDirections, train: Sequence[int], valid: Sequence[int], tags: LanguageTags
    ) -> DirectionData:
        weights = [run.weight(direction) for direction in run.directions]
        draws = direction_draws(train, weights, run.temperature)
        return cls(run, tuple(train), tuple(valid), tags, tuple(draws))

    @property
    def directions(self) -> tuple[Direction, ...]:
        return self.run.directions

    @property
    def resampled(self) -> bool:
        """Whether an epoch differs from one pass over every pair."""
        return self.draws != self.train_pairs

    def valid_rows(self) -> list[range]:
        """Each direction's rows of the validation split."""
        ends = np.cumsum([0, *self.valid_pairs]).tolist()
        return [range(start, end) for start, end in itertools.pairwise(ends)]

    def epoch_examples(self, seed: int) -> np.ndarray | None:
        """The training rows of the epoch of `seed`; None when it is one pass over every pair."""
        return epoch_examples(self.train_pairs, self.draws, seed) if self.resampled else None
