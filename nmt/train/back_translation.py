"""Random online back-translation (ROBT, Zhang et al. 2020) inside a multilingual run: from update
`data.multilingual.back_translation.start` on, a `share` of each batch's pairs get a new source, their target
translated by the model in training into another language the run translates into, drawn at random. A pair
(x → y) into language B becomes (x' → y), x' in language C ≠ B: directions that no corpus holds (zero-shot
ones, C → B) get training pairs without a synthetic corpus made beforehand. As in the reference
implementation, one random other language per pair, searched greedily (or sampled).

What is re-sourced is drawn from (seed, update, process) alone, and the model back-translates in evaluation
mode without touching the global random state: a resumed run re-sources exactly what an uninterrupted one
would, and every process of a job its own part. The new sources are written into the batch's own tensors (the
same shape; a translation longer than the batch's source width is cut to it), so that planned static shapes
and captured training steps serve as they are.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from dataclasses import dataclass

import numpy as np
import torch

from nmt.config.multilingual import BackTranslationConfig
from nmt.config.schema import Config
from nmt.data.arrays import TokenArray
from nmt.data.batching import Batch
from nmt.data.directions import DirectionData
from nmt.data.prepare import PreparedData
from nmt.data.special_tokens import EOS, PAD
from nmt.data.target_vocabulary import target_vocabularies
from nmt.decode.translator import TorchTranslator
from nmt.models.base import Seq2Seq
from nmt.rules.target_vocabulary import TargetVocabulary
from nmt.train.distributed import World

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Chosen:
    """The rows of one batch that are re-sourced, each one's target language and the language its target is
    back-translated into."""

    rows: list[int]
    targets: list[str]
    languages: list[str]


class OnlineBackTranslation:
    """Re-sources a share of each update's pairs (`__call__`), counting the pairs made per direction."""

    def __init__(
        self,
        settings: BackTranslationConfig,
        translator: TorchTranslator,
        directions: DirectionData,
        targets: TokenArray,
        seed: int,
        rank: int,
    ) -> None:
        """`translator`: the model in training with the run's tokenizers, tags, directions and target
        vocabularies; `targets`: the training corpus's target ids (with decoder tags, the tag first)."""
        self.settings, self.directions, self.targets = settings, directions, targets
        sampling = settings.search == "sampling"
        self.translator = translator.with_search(beam_size=1, nbest=1, sampling=sampling, cuda_graphs=False)
        self.seed, self.rank = seed, rank
        self.languages = sorted({d.tgt for d in directions.directions})  # those the model writes
        self.ends = np.cumsum(directions.train_pairs)  # the first corpus row after each direction's
        self.made: collections.Counter[str] = collections.Counter()  # pairs per new direction, since read

    def __call__(self, batches: list[Batch], step: int) -> list[Batch]:
        """The update `step`'s batches, a share of their pairs re-sourced (from `start` on)."""
        if step < self.settings.start:
            return batches
        rng = np.random.default_rng([self.seed, step, self.rank])
        chosen = [self._choose(batch, rng) for batch in batches]
        if not any(c.rows for c in chosen):
            return batches
        sources = self._back_translate(batches, chosen, step)
        return [
            self._resourced(batch, c, found) if c.rows else batch
            for batch, c, found in zip(batches, chosen, sources, strict=True)
        ]

    @classmethod
    def of(cls, model: Seq2Seq, cfg: Config, data: PreparedData, rank: int) -> OnlineBackTranslation | None:
        """The run's online back-translation in process `rank` (None without one): `model`, in training,
        translating with the run's tokenizers, tags, directions and target vocabularies."""
        settings = data.directions.run.back_translation
        if settings is None:
            return None
        translator = TorchTranslator.of(model, cfg, data.tokenizers, target_vocabularies(data))
        return cls(settings, translator, data.directions, data.train.tgt, cfg.train.seed, rank)

    def counted(self, world: World, step: int) -> dict[str, float]:
        """The pairs back-translated since the last training record (at update `step`), all processes of
        `world` together: in all and per new direction (`back_translated.fr-de`), logged."""
        made: collections.Counter[str] = collections.Counter()
        for counts in world.gather(self.take_counts()):
            made.update(counts)
        if made:
            each = ", ".join(f"{name} {count}" for name, count in sorted(made.items()))
            log.info("step %d: back-translated %d pairs (%s)", step, made.total(), each)
        return {"back_translated": float(made.total())} | {
            f"back_translated.{name}": float(count) for name, count in sorted(made.items())
        }

    def take_counts(self) -> dict[str, int]:
        """The pairs made per new direction (`C-B`) since the last call."""
        made, self.made = dict(sorted(self.made.items())), collections.Counter()
        return made

    def _choose(self, batch: Batch, rng: np.random.Generator) -> Chosen:
        """The batch rows re-sourced (a `share` of them, each drawn alone), and the language each one's
        target is back-translated into (any other language the run translates into)."""
        index = batch.index.cpu().numpy()
        rows = np.flatnonzero(rng.random(len(index)) < self.settings.share)
        direction = np.searchsorted(self.ends, index[rows], side="right").tolist()
        targets = [self.directions.directions[d].tgt for d in direction]
        picks = rng.integers(0, len(self.languages) - 1, size=len(rows)).tolist()
        others = [[lang for lang in self.languages if lang != tgt] for tgt in targets]
        languages = [other[pick] for other, pick in zip(others, picks, strict=True)]
        return Chosen(rows.tolist(), targets, languages)

    def _back_translate(self, batches: list[Batch], chosen: list[Chosen], step: int) -> list[list[list[int]]]:
        """For each batch, the new source ids of each re-sourced row (in `Chosen.rows` order, without eos):
        searched one language at a time, whatever each target's own language, the model in evaluation mode."""
        forced = self.directions.run.forced_tokens
        wanted: dict[str, list[tuple[int, int, list[int]]]] = collections.defaultdict(list)
        for i, (batch, c) in enumerate(zip(batches, chosen, strict=True)):
            index = batch.index.cpu().numpy()
            for j, (row, target, lang) in enumerate(zip(c.rows, c.targets, c.languages, strict=True)):
                ids = self.targets[int(index[row])][forced:].tolist()  # the target, without its tag
                wanted[lang].append((i, j, ids))
                self.made[f"{lang}-{target}"] += 1
        found: list[list[list[int]]] = [[[] for _ in c.rows] for c in chosen]
        widest = max(batch.src.size(1) for batch in batches)
        model = self.translator.model
        training = model.training
        model.eval()
        try:
            for lang, items in sorted(wanted.items()):
                translator = self.translator_into(lang, step, widest)
                sources = [translator.tags.source(ids, lang) for _, _, ids in items]
                for (i, j, _), hyps in zip(items, translator.search(sources), strict=True):
                    found[i][j] = hyps[0].tokens
        finally:
            model.train(training)
        return found

    def translator_into(self, lang: str, step: int, width: int) -> TorchTranslator:
        """The translator into `lang` of update `step`: held to the language's vocabulary where zero-shot
        search is (`search.zero_shot_vocabulary`; the sources of a batch into one language mix trained and
        zero-shot directions), no longer than a source `width` wide keeps (eos and an encoder tag aside), and
        sampling anew at every update."""
        held = TargetVocabulary.of(self.translator.settings).zero_shot_vocabulary
        keeps = width - 1 - (self.directions.tags.placement == "encoder")
        translator = self.translator.toward(lang).with_search(
            target_vocabulary=held, max_len_a=0.0, max_len_b=max(keeps, 1)
        )
        if self.settings.search == "sampling":
            translator = translator.with_search(seed=self.seed * 1_000_003 + step)
        return translator

    def _resourced(self, batch: Batch, chosen: Chosen, sources: list[list[int]]) -> Batch:
        """`batch` with the source of each chosen row replaced by its back-translation (tagged for the pair's
        target language where tags go on the encoder, eos last, cut to the batch's width); a row whose
        translation came out empty keeps its source."""
        width = batch.src.size(1)
        src = batch.src.cpu().numpy().copy()  # (batch, src_len)
        for row, target, tokens in zip(chosen.rows, chosen.targets, sources, strict=True):
            if not tokens:
                continue
            ids = self.directions.tags.source(tokens, target)[: width - 1]
            src[row] = PAD
            src[row, : len(ids)] = ids
            src[row, len(ids)] = EOS
        new = torch.from_numpy(src).to(batch.src.device)
        return dataclasses.replace(batch, src=new, src_mask=(new != PAD).unsqueeze(1))
