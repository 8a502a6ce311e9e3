"""Text in, hypotheses out, through one object: `encode` (text → source ids), `search` (source ids →
hypotheses, under a search rule), `decode` (hypotheses → text, subwords, scores and attention).

`Translator` holds what every engine shares — the only place where text becomes ids, the length limit, batches
sorted by length, retrying a batch in halves when it runs out of memory (`search`; the server's batcher,
which isolates failures itself, calls `search_as_one_batch`) — and an engine adds how one batch is searched:
`TorchTranslator` (here) for a trained run or an ensemble, `ExportedTranslator` (nmt/decode/exported.py) for a
CTranslate2 export; nmt/decode/loading.py loads either from directories. Every command, the server and the
benchmarks translate through one of them:

    sources = translator.encode(texts)
    found = translator.search(sources)      # a rule and options other than the settings' may be given
    translated = translator.decode(sources, found)

Word alignment teacher-forces given targets instead of searching: `encode_words` keeps each word's subwords of
whitespace-tokenized text, and `TorchTranslator.teacher_forced` returns the attention paid producing them.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from torch import Tensor

from nmt.align.attention import attended_subwords, layer_attention
from nmt.align.pharaoh import Link
from nmt.align.reading import Reading, full_context_layer, translation_reading
from nmt.align.subwords import attended_links
from nmt.config.multilingual import Direction
from nmt.config.schema import Config
from nmt.config.sections import SearchConfig
from nmt.data.batching import IntSequence, collate, sorted_groups
from nmt.data.corpus import normalize
from nmt.data.language_tags import NO_TAGS, LanguageTags
from nmt.data.target_vocabulary import load_target_vocabularies
from nmt.data.tokenizer import Tokenizers
from nmt.data.words import WordPieces, encode_words, output_words, source_words
from nmt.decode.alignments import teacher_forced_attention
from nmt.decode.search import Hypothesis, SearchOptions, search
from nmt.decode.trained_run import TrainedRun
from nmt.device.choice import autocast
from nmt.errors import UserError
from nmt.models.base import Seq2Seq
from nmt.models.ensemble import Ensemble
from nmt.rules.contract import Processor, SearchRule
from nmt.rules.registry import processors_of, rule_of
from nmt.rules.target_vocabulary import TargetVocabulary

log = logging.getLogger(__name__)

Progress = Callable[[int], object]  # told how many sentences each batch held
T = TypeVar("T", bound="Translator")


@dataclass(frozen=True)
class Translation:
    """One hypothesis, decoded: its text, score, token ids, subwords ending with '</s>' (none for an empty
    source) and, when asked, its attention (layers, heads, len(pieces), len(source pieces)) and its word
    alignment: (source word, output word) links, from 0, sorted, each output subword linked to the source
    subword it attended most under the translator's `reading` (`SearchOptions.alignments`); the words are
    those of the source line and `text`."""

    text: str
    score: float
    tokens: list[int]
    pieces: list[str]
    attention: Tensor | None = None
    alignment: list[Link] | None = None


@dataclass(frozen=True)
class Translated:
    """One source line: its subwords ending with '</s>' (none for an empty line) and its hypotheses, best
    first."""

    source_pieces: list[str]
    hypotheses: list[Translation]

    @property
    def best(self) -> Translation:
        return self.hypotheses[0]


def search_rule(settings: SearchConfig) -> SearchRule:
    """The rule a search config describes (nmt/rules/registry.py): sampling, diverse beam search, greedy (beam
    size 1) or beam search."""
    return rule_of(settings)


def search_options(
    settings: SearchConfig, attention: bool = False, alignments: bool = False
) -> SearchOptions:
    """The rule-independent options a search config describes, its processors among them."""
    return SearchOptions(
        nbest=settings.nbest,
        attention=attention,
        alignments=alignments,
        max_len_a=settings.max_len_a,
        max_len_b=settings.max_len_b,
        cuda_graphs=settings.cuda_graphs,
        processors=processors_of(settings),
    )


def run_tags(cfg: Config, tokenizers: Tokenizers) -> LanguageTags:
    """The language tags of a run (none placed for one pair), checked against its languages."""
    return LanguageTags.of(cfg.data.directions, tokenizers.src.tag_ids)


def max_source_len(cfg: Config) -> int:
    """Longest source (in subwords) to translate: 4× the training limit, and short enough that the longest
    allowed output (a * length + b, after bos and a decoder tag) still fits the model's positions (a
    Transformer's)."""
    search_cfg, positions = cfg.search, cfg.model.position_limit
    if positions is None:
        return 4 * cfg.data.max_len
    forced = cfg.data.directions.forced_tokens
    limit = int((positions - 2 - forced - search_cfg.max_len_b) / max(search_cfg.max_len_a, 1.0))
    return max(1, min(4 * cfg.data.max_len, limit))


class Translator(ABC):
    """Translates with one model: its tokenizers, default search `settings` and the longest source it
    takes (`max_source_len` subwords; longer ones are cut). It translates into one `target` language at a
    time: a multilingual model's by its language `tags`, named by `toward`; a bilingual model's, its own.
    `source`: the language of the texts it is given, where known (a bilingual model's own; as `toward` names
    it), for splitting running text into sentences.
    `directions`: those the model was trained on (empty where they are not known); `vocabularies`: each
    target language's subword ids (nmt/data/target_vocabulary.py; empty where they are not known);
    `reading`: the attention translations align with where it is not the one search pays (None: search's;
    nmt/align/reading.py `translation_reading`)."""

    def __init__(
        self,
        tokenizers: Tokenizers,
        settings: SearchConfig,
        max_source_len: int,
        tags: LanguageTags | None = None,
        directions: tuple[Direction, ...] = (),
        vocabularies: Mapping[str, Sequence[int]] | None = None,
        reading: Reading | None = None,
    ) -> None:
        self.tokenizers, self.settings, self.max_source_len = tokenizers, settings, max_source_len
        self.tags, self.directions = tags or NO_TAGS, directions
        self.vocabularies = vocabularies or {}
        self.reading = reading
        own = directions[0] if directions and not self.tags.tagged else None
        self.source = own.src if own else ""  # "" where not named (a multilingual model's, unless `toward`)
        self.target = own.tgt if own else ""  # "" until `toward` names it, for a multilingual model
        self.zero_shot = False  # whether `toward` named a direction the model was never trained on

    has_attention = True  # whether `search` can return attention
    has_alignments = True  # whether `search` can return alignments
    engine = "torch"

    def with_search(self: T, **changes: Any) -> T:
        """This translator with other search settings (`beam_size`, `nbest`, … as SearchConfig names them;
        a value out of range is a ConfigError); the model is shared."""
        twin = copy.copy(self)
        twin.settings = dataclasses.replace(self.settings, **changes)
        return twin

    def toward(self: T, tgt: str | None, src: str | None = None, zero_shot: bool = False) -> T:
        """This model's translator into `tgt` from `src` (either None: not named) — the one place that turns
        a model toward a language. A bilingual model takes its own pair (or none named); a multilingual one
        needs `tgt`, with a tag, and a direction it was trained on (with `src` unnamed: one into `tgt`)
        unless `zero_shot`. Anything else is a one-line UserError."""
        known = self.directions
        trained = ", ".join(d.name for d in known)
        if not self.tags.tagged:
            own = known[0] if known else None
            if own is not None and (src not in (None, own.src) or tgt not in (None, own.tgt)):
                raise UserError(
                    f"this model translates {own.src} → {own.tgt} only; it takes no other direction"
                )
            if zero_shot:
                raise UserError(
                    "--zero-shot: this model translates one language pair; it has no other direction"
                )
            return self
        if tgt is None:
            raise UserError(
                f"the model translates several directions ({trained}): name the target language with "
                f"--tgt-lang"
            )
        for lang in (src, tgt):
            if lang is not None:
                self.tags.id(lang)  # a language the model has no tag for was never seen
        seen = any(d.tgt == tgt and src in (None, d.src) for d in known) or not known
        if not (seen or zero_shot):
            asked = f"{src} → {tgt}" if src is not None else f"into {tgt}"
            raise UserError(
                f"the model was never trained to translate {asked} (its directions: {trained}); add "
                f"--zero-shot to translate it anyway, or --pivot LANG to translate through a third language"
            )
        twin = copy.copy(self)
        twin.source, twin.target, twin.zero_shot = src or "", tgt, not seen
        return twin

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Source ids of raw texts: normalised, then subwords, then (a multilingual model's, with tags on
        the encoder) the target language's tag first — the one place where text becomes ids."""
        ids = self.tokenizers.src.encode([normalize(text) for text in texts])
        return [self.tags.source(sentence, self.target_language()) for sentence in ids]

    def encode_words(self, texts: Sequence[str], side: Literal["source", "target"]) -> list[WordPieces]:
        """Whitespace-tokenized texts of one side, every word encoded on its own and its subwords kept (the
        joined text is never tokenized again), for word alignment; no language tag (`teacher_forced` adds
        it)."""
        return encode_words(self.tokenizers.src if side == "source" else self.tokenizers.tgt, texts)

    def target_language(self) -> str:
        """The language the translator translates into ("" where a bilingual model's is not known)."""
        if self.tags.tagged and not self.target:
            raise UserError("this model translates into several languages: name the target language")
        return self.target

    def search(
        self,
        sources: Sequence[IntSequence],
        rule: SearchRule | None = None,
        options: SearchOptions | None = None,
        progress: Progress | None = None,
    ) -> list[list[Hypothesis]]:
        """The hypotheses of each source (same order), best first, under `rule` and `options` (default: the
        settings'). Sources longer than `max_source_len` are cut to it (with a warning); an empty source gives
        one empty hypothesis (score 0). Batches of `settings.batch_size` sentences of similar length are
        searched in turn (`progress` told the size of each); one that runs out of memory, in halves."""
        rule, options, cut, outputs = self._prepared(sources, rule, options)
        nonempty = [i for i, s in enumerate(cut) if s]
        for group in sorted_groups([len(cut[i]) for i in nonempty], self.settings.batch_size):
            indices = [nonempty[g] for g in group]
            for i, hyps in zip(indices, self._fitting([cut[i] for i in indices], rule, options), strict=True):
                outputs[i] = hyps
            if progress is not None:
                progress(len(indices))
        return outputs

    def search_as_one_batch(
        self, sources: Sequence[IntSequence], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """The hypotheses of each source, as `search` finds them, but all searched as one batch that is never
        retried: one that runs out of memory raises. For a caller that isolates failures itself (the server's
        batcher), so that one policy alone splits a batch."""
        rule, options, cut, outputs = self._prepared(sources, rule, options)
        nonempty = [i for i, s in enumerate(cut) if s]
        for group in sorted_groups([len(cut[i]) for i in nonempty], max(1, len(nonempty))):  # one at most
            indices = [nonempty[g] for g in group]
            for i, hyps in zip(
                indices, self.search_batch([cut[i] for i in indices], rule, options), strict=True
            ):
                outputs[i] = hyps
        return outputs

    def _prepared(
        self, sources: Sequence[IntSequence], rule: SearchRule | None, options: SearchOptions | None
    ) -> tuple[SearchRule, SearchOptions, list[list[int]], list[list[Hypothesis]]]:
        """What a search starts from: the rule and options (default: the settings'; a multilingual model's
        tags banned from the output but where forced first), the sources cut to the length limit, and the
        output of each, blank until searched. A UserError for what this engine cannot return."""
        rule = rule or search_rule(self.settings)
        options = options or search_options(self.settings)
        # a tag is never an output, but where forced first (decoder tags), and never aligned (encoder tags)
        prefix = tuple(self.tags.forced_prefix(self.target_language()))
        banned, tags = (*self.tokenizers.tgt.banned, *self.tags.banned), tuple(self.tags.banned)
        processors = self._bound(options.processors)
        options = dataclasses.replace(
            options, banned=banned, prefix=prefix, unaligned=tags, processors=processors
        )
        if options.attention and not self.has_attention:
            raise UserError(
                f"the {self.engine} engine returns no attention; translate with the run directory"
            )
        if options.alignments and not self.has_alignments:
            raise UserError(
                f"this {self.engine} export returns no alignments: it was written by an earlier nmt; export "
                f"the run again"
            )
        too_long = sum(len(s) > self.max_source_len for s in sources)
        if too_long:
            log.warning(
                "%d source lines exceed %d subwords and were truncated", too_long, self.max_source_len
            )
        cut = [list(s[: self.max_source_len]) for s in sources]
        blank = Hypothesis([], 0.0, alignment=[] if options.alignments else None)
        return rule, options, cut, [[blank] for _ in cut]

    def _bound(self, processors: tuple[Processor, ...]) -> tuple[Processor, ...]:
        """The processors, a target-language vocabulary bound to the subwords it forbids in this direction,
        or left out where it does not apply (a bilingual model; a direction its settings leave alone)."""
        kept = []
        for processor in processors:
            if isinstance(processor, TargetVocabulary):
                if not (self.tags.tagged and processor.wanted(self.zero_shot)):
                    continue
                if self.zero_shot and self.target not in self.vocabularies:  # the default: searched without
                    log.warning(
                        "the %s engine has no vocabulary of %s here (an export carries one only from a run "
                        "with encoder tags, and a run trained by an earlier nmt has none): zero-shot outputs "
                        "are not held to it",
                        self.engine,
                        self.target,
                    )
                    continue
                processor = processor.forbidding(self._forbidden(), len(self.tokenizers.tgt))
            kept.append(processor)
        return tuple(kept)

    def _forbidden(self) -> tuple[int, ...]:
        """The subword ids outside the target language's vocabulary; a UserError where it is not known."""
        allowed = self.vocabularies.get(self.target)
        if allowed is None:
            raise UserError(
                f"the {self.engine} engine has no vocabulary of {self.target} here (an export carries one "
                f"only from a run with encoder tags, and a run trained by an earlier nmt has none): "
                f"translate with a run directory trained by this nmt, or add --no-target-vocabulary"
            )
        kept = set(allowed)
        return tuple(i for i in range(len(self.tokenizers.tgt)) if i not in kept)

    def _fitting(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """Search one batch; when it runs out of memory, search each half of it instead (recursively)."""
        try:
            return self.search_batch(sources, rule, options)
        except (torch.cuda.OutOfMemoryError, MemoryError) as err:
            memory = "GPU memory" if isinstance(err, torch.cuda.OutOfMemoryError) else "memory"
            if len(sources) == 1:
                raise UserError(
                    f"out of {memory} translating one sentence of {len(sources[0])} subwords with "
                    f"{rule.width} hypotheses; use a smaller --beam-size or --device cpu"
                ) from err
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # outside the except block, where the failed batch's tensors are freed
        half = len(sources) // 2
        log.warning("out of %s decoding %d sentences; retrying in batches of %d", memory, len(sources), half)
        return self._fitting(sources[:half], rule, options) + self._fitting(sources[half:], rule, options)

    @abstractmethod
    def search_batch(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """Search one batch of non-empty sources, each within the length limit. A hypothesis' attention, when
        asked, is (layers, heads, len(tokens) + 1, len(source) + 1): rows and columns end with eos; its
        alignment, when asked, the source position each token attended most (eos excluded)."""

    def decode(self, sources: Sequence[IntSequence], found: list[list[Hypothesis]]) -> list[Translated]:
        """Each source's hypotheses as text and subwords (the sources as searched: cut to the limit)."""
        src, tgt = self.tokenizers.src, self.tokenizers.tgt
        out = []
        for ids, hyps in zip(sources, found, strict=True):
            texts = tgt.decode([h.tokens for h in hyps])
            if not ids:  # a blank line: nothing was searched
                out.append(
                    Translated(
                        [],
                        [
                            Translation(text, h.score, h.tokens, [], alignment=self._links([], h))
                            for h, text in zip(hyps, texts, strict=True)
                        ],
                    )
                )
                continue
            searched = list(ids[: self.max_source_len])
            aligned = any(h.alignment is not None for h in hyps)
            src_words = source_words(src, searched) if aligned else []  # once for all its hypotheses
            translations = [
                Translation(
                    text,
                    h.score,
                    h.tokens,
                    [*tgt.pieces(h.tokens), "</s>"],
                    h.attention,
                    self._links(src_words, h),
                )
                for h, text in zip(hyps, texts, strict=True)
            ]
            out.append(Translated([*src.pieces(searched), "</s>"], translations))
        return out

    def _links(self, src_words: list[int | None], hypothesis: Hypothesis) -> list[Link] | None:
        """The hypothesis' word links, given the word of each source subword (None when search returned no
        alignment)."""
        if hypothesis.alignment is None:
            return None
        tgt_words = output_words(self.tokenizers.tgt, hypothesis.tokens)
        return attended_links(hypothesis.alignment, src_words, tgt_words)

    def translate(self, texts: Sequence[str], progress: Progress | None = None) -> list[str]:
        """The best translation of each raw text: encode → search → decode."""
        found = self.search(self.encode(texts), progress=progress)
        return self.tokenizers.tgt.decode([hyps[0].tokens for hyps in found])

    def translated(self, texts: Sequence[str], alignments: bool = False) -> list[Translated]:
        """Each raw text's hypotheses, decoded (with their word links when `alignments`): encode → search →
        decode."""
        sources = self.encode(texts)
        options = search_options(self.settings, alignments=alignments)
        return self.decode(sources, self.search(sources, options=options))

    def translate_with_attention(self, text: str) -> Translated:
        """One raw text translated, with the attention of every hypothesis (for heatmaps)."""
        sources = self.encode([text])
        if not sources[0]:
            raise UserError("the text to translate is empty")
        if len(sources[0]) > self.max_source_len:
            log.warning(
                "the text has %d subwords; only the first %d were translated (the model's limit)",
                len(sources[0]),
                self.max_source_len,
            )
        found = self.search(sources, options=search_options(self.settings, attention=True))
        return self.decode(sources, found)[0]


class TorchTranslator(Translator):
    """A trained model (or an `Ensemble` of them) searched by nmt's own search (nmt/decode/search.py).
    `full_context_layer`: the decoder layer guided alignment trained with full target context (it attends
    so in every teacher-forced pass), if any."""

    def __init__(
        self,
        model: Seq2Seq,
        tokenizers: Tokenizers,
        settings: SearchConfig,
        max_source_len: int,
        tags: LanguageTags | None = None,
        directions: tuple[Direction, ...] = (),
        vocabularies: Mapping[str, Sequence[int]] | None = None,
        reading: Reading | None = None,
        full_context_layer: int | None = None,
    ) -> None:
        super().__init__(tokenizers, settings, max_source_len, tags, directions, vocabularies, reading)
        self.model = model
        self.full_context_layer = full_context_layer

    @classmethod
    def of_run(cls, run: TrainedRun) -> TorchTranslator:
        """The translator of a loaded run (or ensemble: search's own alignments, its members' mean), with the
        run's search settings and alignment reading."""
        cfg = run.cfg
        tags = run_tags(cfg, run.tokenizers)
        vocabularies = load_target_vocabularies(run.directory.path)
        alone = not isinstance(run.model, Ensemble)
        return cls(
            run.model,
            run.tokenizers,
            cfg.search,
            max_source_len(cfg),
            tags,
            cfg.data.directions.pairs,
            vocabularies,
            translation_reading(cfg) if alone else None,
            full_context_layer(cfg) if alone else None,
        )

    def search_batch(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """Attention, when asked: every layer's and head's from a teacher-forced pass over each hypothesis;
        an ensemble has no such pass, so search collects its members' mean of last-layer heads (one layer,
        one head). Alignments, when asked: search's, or under the translator's `reading` from a
        teacher-forced pass (with full context where guided alignment trained it)."""
        ensemble = isinstance(self.model, Ensemble)
        reread = options.alignments and self.reading is not None
        batch = collate(sources, [[] for _ in sources], range(len(sources))).to(self.model.device)
        collect = dataclasses.replace(
            options, attention=options.attention and ensemble, alignments=options.alignments and not reread
        )
        with torch.inference_mode(), autocast(self.model.device):
            found = search(self.model, batch.src, batch.src_mask, rule, collect)
        if reread:
            found = self._aligned(sources, found, options)
        if not options.attention:
            return found
        if ensemble:  # search collected every hypothesis' attention (time, source): one layer, one head
            return [[_one_layer_one_head(h) for h in hyps] for hyps in found]
        return [
            [dataclasses.replace(h, attention=weights) for h, weights in zip(hyps, paid, strict=True)]
            for hyps, paid in zip(found, self._paid(sources, found, options.prefix), strict=True)
        ]

    def _paid(
        self,
        sources: list[list[int]],
        found: list[list[Hypothesis]],
        prefix: Sequence[int],
        context: int | None = None,
    ) -> list[list[Tensor]]:
        """The attention each hypothesis of each source paid (layers, heads, len(tokens) + 1,
        len(source) + 1), teacher-forced after the forced `prefix`, `settings.batch_size` hypotheses a
        pass; with full target context in decoder layer `context`, if given."""
        srcs = [src for src, hyps in zip(sources, found, strict=True) for _ in hyps]
        outputs = [h.tokens for hyps in found for h in hyps]
        size = self.settings.batch_size
        paid = iter(
            weights
            for start in range(0, len(outputs), size)
            for weights in teacher_forced_attention(
                self.model, srcs[start : start + size], outputs[start : start + size], context, prefix
            )
        )
        return [[next(paid) for _ in hyps] for hyps in found]

    def _aligned(
        self, sources: list[list[int]], found: list[list[Hypothesis]], options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """The hypotheses with their alignments under the translator's `reading`: no token aligned to eos
        or an `unaligned` id, none to anything where the null slot holds it."""
        reading = self.reading
        assert reading is not None
        paid = self._paid(sources, found, options.prefix, self.full_context_layer)
        aligned = []
        for src, hyps, weights in zip(sources, found, paid, strict=True):
            skipped = np.isin(src, options.unaligned)  # (len(src),)
            rows = [layer_attention(w.numpy(), reading.layer, reading.heads) for w in weights]
            aligned.append(
                [
                    dataclasses.replace(
                        h, alignment=attended_subwords(r, reading.rule, reading.null, skipped)
                    )
                    for h, r in zip(hyps, rows, strict=True)
                ]
            )
        return aligned

    def teacher_forced(
        self,
        sources: Sequence[IntSequence],
        targets: Sequence[IntSequence],
        progress: Progress | None = None,
    ) -> list[Tensor]:
        """The attention of every layer and head the model pays producing each target (ids without bos/eos)
        from its source, teacher-forced in batches of `settings.batch_size` pairs of similar length
        (`progress` told the size of each): per pair (layers, heads, len(target) + 1, len(source) + 1),
        rows and columns ending with eos; the translator's `full_context_layer` as `teacher_forced_attention`
        takes it. In float32 on every device. A multilingual model's language tag is added where it was
        trained (the first source token, or the first target token after bos) and its row or column left
        out: the attention is the words'. Not for an ensemble, which has no teacher-forced pass."""
        if isinstance(self.model, Ensemble):
            raise UserError("an ensemble has no teacher-forced pass; give one run")
        tagged_sources, tagged_targets, prefix, column = sources, targets, [], 0
        if self.tags.tagged:
            lang = self.target_language()
            prefix = self.tags.forced_prefix(lang)
            tagged_sources = [self.tags.source([int(i) for i in s], lang) for s in sources]
            tagged_targets = [[*prefix, *t] for t in targets]
            column = 0 if prefix else 1  # an encoder tag: its column (a decoder tag: the first row)
        found: list[Tensor] = []
        order: list[int] = []
        lengths = [len(s) + len(t) for s, t in zip(tagged_sources, tagged_targets, strict=True)]
        for group in sorted_groups(lengths, self.settings.batch_size):
            src, tgt = [tagged_sources[i] for i in group], [tagged_targets[i] for i in group]
            found += teacher_forced_attention(self.model, src, tgt, self.full_context_layer)
            order += group
            if progress is not None:
                progress(len(group))
        at = {i: k for k, i in enumerate(order)}
        return [found[at[i]][:, :, len(prefix) :, column:] for i in range(len(sources))]


def _one_layer_one_head(hypothesis: Hypothesis) -> Hypothesis:
    """The hypothesis with its attention (tgt_len, src_len) as (1, 1, tgt_len, src_len)."""
    attention = hypothesis.attention
    return dataclasses.replace(hypothesis, attention=None if attention is None else attention[None, None])
