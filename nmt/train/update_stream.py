"""The training data as a stream of updates: each epoch's token-budget batches planned from its seed, grouped
into updates, this process's share of each collated in a background thread and moved to the device, from the
data position a checkpoint saved."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Generator, Iterator

import numpy as np
import torch

from nmt.config.sections import TrainConfig
from nmt.data.arrays import EncodedCorpus
from nmt.data.batching import Batch, token_budget_groups
from nmt.data.buckets import Buckets, batch_shapes
from nmt.data.loader import prefetch
from nmt.train.distributed import World
from nmt.train.progress import Progress

log = logging.getLogger(__name__)


PLANNED_DRAWS = 4  # epochs of a resampled (multilingual) run whose batch shapes the static plan sees


class UpdateStream:
    """The updates of `corpus` for one process of `world`, padded to planned shapes when `static_shapes`;
    `examples(seed)` gives the corpus rows of the epoch of `seed` (a multilingual run's draws), None: every
    pair once."""

    def __init__(
        self,
        corpus: EncodedCorpus,
        cfg: TrainConfig,
        world: World,
        device: torch.device,
        static_shapes: bool,
        examples: Callable[[int], np.ndarray | None] | None = None,
    ) -> None:
        self.corpus, self.cfg, self.world, self.device = corpus, cfg, world, device
        self.static_shapes, self.examples = static_shapes, examples
        self.buckets: Buckets | None = None  # planned at the first epoch, when the budget is known
        self.planned = False  # whether an epoch was planned (logged once at INFO)

    def updates(self, progress: Progress, epochs: int = 0) -> Generator[list[Batch], None, None]:
        """Every update from the position in `progress` on, epoch after epoch, up to `train.max_epochs` (or at
        most `epochs` epochs, the current one included). The position moves as each update is handed out, so
        a checkpoint written after an update resumes with the next one."""
        max_epochs = self.cfg.max_epochs
        end = progress.epoch + epochs if epochs else None
        while not (max_epochs and progress.epoch >= max_epochs) and progress.epoch != end:
            for consumed, batches in self.epoch(progress):
                progress.batches_done += consumed
                yield batches
            progress.epoch, progress.batches_done = progress.epoch + 1, 0

    def epoch(self, progress: Progress) -> Iterator[tuple[int, list[Batch]]]:
        """The epoch's remaining updates: how many of the epoch's batches each one uses, and this process's
        part of them (all of them in a single process)."""
        cfg, started, seed = self.cfg, time.perf_counter(), self.cfg.seed + progress.epoch
        examples = self.examples(seed) if self.examples else None
        groups = token_budget_groups(self.corpus, progress.batch_tokens, seed, cfg.pad_to_multiple, examples)
        log.log(
            logging.DEBUG if self.planned else logging.INFO,
            "epoch %d: %d batches of %d pairs planned in %.2f s",
            progress.epoch,
            len(groups),
            len(self.corpus) if examples is None else len(examples),
            time.perf_counter() - started,
        )
        self.planned, groups = True, groups[progress.batches_done :]
        size = self.world.update_batches(cfg)
        updates = [groups[i : i + size] for i in range(0, len(groups), size)]
        parts = [self.fitting(update, progress.batch_tokens) for update in updates]
        batches = self.world.batches(self.corpus, parts, cfg.pad_to_multiple)
        if self.static_shapes:
            batches = self.bucket_plan(progress.batch_tokens).pad(batches)
        with contextlib.closing(prefetch(batches, self.device)) as ready:
            for update, part in zip(updates, parts, strict=True):
                yield len(update), [next(ready) for _ in self.world.share(part)]

    def fitting(self, update: list[np.ndarray], batch_tokens: int) -> list[np.ndarray]:
        """The groups of one update; with static shapes, a group that would fit no planned shape cut into
        groups that do (nmt/data/buckets.py `Buckets.fitting`)."""
        if not self.static_shapes:
            return update
        plan, (src_len, tgt_len) = self.bucket_plan(batch_tokens), self.corpus.lengths()
        shapes = batch_shapes(update, src_len, tgt_len, self.cfg.pad_to_multiple).tolist()
        return [
            part
            for group, (n, s, t) in zip(update, shapes, strict=True)
            for part in plan.fitting(group, (n, s, t))
        ]

    def bucket_plan(self, batch_tokens: int) -> Buckets:
        """The static batch shapes, planned once from the shapes of an epoch's batches (the token-budget
        grouping gives every epoch the same shapes, in another order), and for a resampled run from those of
        its first `PLANNED_DRAWS` epochs' draws as well (other epochs draw other groups)."""
        if self.buckets is None:
            cfg = self.cfg
            groups = token_budget_groups(self.corpus, batch_tokens, cfg.seed, cfg.pad_to_multiple)
            if (draw := self.examples) is not None:
                for seed in range(cfg.seed, cfg.seed + PLANNED_DRAWS):
                    drawn = draw(seed)
                    groups += token_budget_groups(self.corpus, batch_tokens, seed, cfg.pad_to_multiple, drawn)
            src_len, tgt_len = self.corpus.lengths()
            shapes = batch_shapes(groups, src_len, tgt_len, cfg.pad_to_multiple)
            self.buckets = Buckets.plan(shapes, cfg.max_shapes)
            log.info("%s", self.buckets.describe())
        return self.buckets
