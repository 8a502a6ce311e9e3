"""Text in, hypotheses out, through one object: `encode` (text → source ids), `search` (source ids →
hypotheses, under a search rule), `decode` (hypotheses → text, subwords, scores and attention).

`Translator` holds what every engine shares — the only place where text becomes ids, the length limit, batches
sorted by length, retrying a batch in halves when it runs out of memory (`search`; the server's batcher,
which isolates failures itself, searches `one_batch`) — and an engine adds how one batch is searched:
`TorchTranslator` (here) for a trained run or an ensemble, `ExportedTranslator` (nmt/decode/exported.py) for a
CTranslate2 export; nmt/decode/loading.py loads either from directories. Every command, the server and the
benchmarks translate through one of them:

    sources = translator.encode(texts)
    found = translator.search(sources)      # search settings may be given for the call: beam_size=5, …
    translated = translator.decode(sources, found)

Word alignment teacher-forces given targets instead of searching: `encode_words` keeps each word's subwords of
whitespace-tokenized text, and nmt/align/forced_attention.py returns the attention paid producing them.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import torch

from nmt.align.forced_attention import hypotheses_alignments, hypotheses_attention
from nmt.align.pharaoh import Link
from nmt.align.reading import Reading, full_context_layer, translation_reading
from nmt.align.subwords import attended_links
from nmt.config.multilingual import Direction
from nmt.config.schema import Config, max_source_len
from nmt.config.sections import SearchConfig
from nmt.data.batching import IntSequence, collate, search_groups
from nmt.data.corpus import normalize
from nmt.data.language_tags import NO_TAGS, LanguageTags
from nmt.data.target_vocabulary import load_target_vocabularies
from nmt.data.tokenizer import Tokenizers
from nmt.data.words import WordPieces, encode_words, output_words, source_words
from nmt.decode.confidence import suspicions, with_mean_log_prob
from nmt.decode.decoded import DecodedHypothesis, DecodedLine
from nmt.decode.search import Hypothesis, SearchOptions, search
from nmt.decode.trained_run import TrainedRun
from nmt.device.choice import autocast
from nmt.errors import UserError
from nmt.models.base import Seq2Seq
from nmt.models.ensemble import Ensemble
from nmt.rules.constrained import TargetTerm, checked_terms, constrained, unmet_texts
from nmt.rules.contract import Processor, SearchRule
from nmt.rules.registry import processors_of, rule_of
from nmt.rules.target_vocabulary import TargetVocabulary

log = logging.getLogger(__name__)

Progress = Callable[[int], object]  # told how many sentences each batch held
SourceTerms = Sequence[Sequence[TargetTerm]]  # each source's target terms, for constrained search
T = TypeVar("T", bound="Translator")


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
    constrains = True  # whether `search` takes target terms (constrained search)
    has_alignments = True  # whether `search` can return alignments
    engine = "torch"

    def refuse_unsupported(self, settings: SearchConfig) -> None:  # noqa: B027 (a default: torch refuses nothing)
        """Refuse (UserError), before any sentence is searched, settings this engine has no search for; the
        torch engine searches every rule and processor."""

    def with_search(self: T, **changes: Any) -> T:
        """This translator with other default search settings (`beam_size`, `nbest`, … as SearchConfig
        names them; a value out of range is a ConfigError), which a call's replace; the model is shared."""
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

    def encode_terms(self, targets: Sequence[str]) -> list[tuple[int, ...]]:
        """Target terms as the target tokenizer writes them after a space (nmt/rules/constrained.py)."""
        return [tuple(ids) for ids in self.tokenizers.tgt.encode(list(targets))]

    def encode_words(self, texts: Sequence[str], side: Literal["source", "target"]) -> list[WordPieces]:
        """Whitespace-tokenized texts of one side, every word encoded on its own and its subwords kept (the
        joined text is never tokenized again), for word alignment; no language tag (teacher forcing adds
        it: nmt/align/forced_attention.py)."""
        return encode_words(self.tokenizers.src if side == "source" else self.tokenizers.tgt, texts)

    def target_language(self) -> str:
        """The language the translator translates into ("" where a bilingual model's is not known)."""
        if self.tags.tagged and not self.target:
            raise UserError("this model translates into several languages: name the target language")
        return self.target

    def search(
        self,
        sources: Sequence[IntSequence],
        progress: Progress | None = None,
        attention: bool = False,
        alignments: bool = False,
        one_batch: bool = False,
        terms: SourceTerms | None = None,
        **settings: Any,
    ) -> list[list[Hypothesis]]:
        """The hypotheses of each source (same order), best first, under the translator's search settings and
        those given for this call (`beam_size=5`, `nbest=2`, … as SearchConfig names them, the way fairseq's
        `generate` and CTranslate2's `translate_batch` take them; a value out of range is a ConfigError), each
        with its `attention` and word `alignments` when asked. A source longer than `max_source_len` is cut
        to it, with a warning (the one policy: docs/guide.md); an empty source gives one empty hypothesis
        (score 0). Batches of sentences of similar length within `batch_tokens` (nmt/data/batching.py
        `search_cost`; a sentence over it alone) are searched in turn (`progress` told the size of each);
        one that runs out of memory, in halves. With `one_batch`, all are searched as one batch that is never
        retried, for a caller that isolates failures itself (the server's batcher, which closes its batches
        within its budget), so that one policy alone splits a batch.

        `terms`: each source's target terms, which its outputs must hold (nmt/rules/constrained.py); each
        hypothesis then names those it lacks (`unmet_terms`)."""
        chosen = dataclasses.replace(self.settings, **settings) if settings else self.settings
        rule, options = rule_of(chosen), self._options(chosen, attention, alignments)
        wanted = checked_terms(terms, rule, len(sources), self.engine if not self.constrains else None)
        cut = self._cut(sources)
        outputs = [
            [Hypothesis([], 0.0, alignment=[] if alignments else None, mean_log_prob=0.0)] for _ in cut
        ]
        nonempty = [i for i, s in enumerate(cut) if s]
        budget = None if one_batch else chosen.batch_tokens
        for group in search_groups([len(cut[i]) for i in nonempty], budget, rule.width):
            batch = [cut[nonempty[g]] for g in group]
            batch_terms = [wanted[nonempty[g]] for g in group]
            if one_batch:
                found = self.search_batch(batch, constrained(rule, batch_terms), options)
            else:
                found = self._fitting(batch, rule, options, batch_terms)
            for g, hyps in zip(group, found, strict=True):
                outputs[nonempty[g]] = hyps
            if progress is not None:
                progress(len(group))
        if terms is None:
            return outputs
        return [
            [dataclasses.replace(h, unmet_terms=unmet_texts(h.tokens, own)) for h in hyps]
            for hyps, own in zip(outputs, wanted, strict=True)
        ]

    def _options(self, settings: SearchConfig, attention: bool, alignments: bool) -> SearchOptions:
        """The options of a search under `settings`: a multilingual model's tags banned from the output but
        where forced first, never aligned; a UserError for what this engine cannot return."""
        options = search_options(settings, attention, alignments)
        prefix = tuple(self.tags.forced_prefix(self.target_language()))
        banned, tags = (*self.tokenizers.tgt.banned, *self.tags.banned), tuple(self.tags.banned)
        processors = tuple(p for p in map(self._bound, options.processors) if p is not None)
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
        return options

    def _cut(self, sources: Sequence[IntSequence]) -> list[list[int]]:
        """The sources cut to the length limit, with a warning counting those that were over it."""
        too_long = sum(len(s) > self.max_source_len for s in sources)
        if too_long:
            log.warning(
                "%d source lines exceed %d subwords and were truncated", too_long, self.max_source_len
            )
        return [list(s[: self.max_source_len]) for s in sources]

    def _bound(self, processor: Processor) -> Processor | None:
        """The processor, a target-language vocabulary bound to this direction (its `bound`); None where it
        does not apply (a bilingual model, which translates into one language; a direction its settings
        leave alone)."""
        if not isinstance(processor, TargetVocabulary):
            return processor
        if not self.tags.tagged:
            return None
        allowed, size = self.vocabularies.get(self.target), len(self.tokenizers.tgt)
        return processor.bound(self.zero_shot, allowed, size, self.engine, self.target)

    def _fitting(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions, terms: list[Any]
    ) -> list[list[Hypothesis]]:
        """Search one batch (under its `terms`); out of memory, search each half instead (recursively)."""
        try:
            return self.search_batch(sources, constrained(rule, terms), options)
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
        first = self._fitting(sources[:half], rule, options, terms[:half])
        return first + self._fitting(sources[half:], rule, options, terms[half:])

    @abstractmethod
    def search_batch(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """Search one batch of non-empty sources, each within the length limit. A hypothesis' attention, when
        asked, is (layers, heads, len(tokens) + 1, len(source) + 1): rows and columns end with eos; its
        alignment, when asked, the source position each token attended most (eos excluded)."""

    def decode(self, sources: Sequence[IntSequence], found: list[list[Hypothesis]]) -> list[DecodedLine]:
        """Each source's hypotheses as text and subwords (the sources as searched: cut to the limit)."""
        src, tgt = self.tokenizers.src, self.tokenizers.tgt
        out = []
        for ids, hyps in zip(sources, found, strict=True):
            texts = tgt.decode([h.tokens for h in hyps])
            searched = list(ids[: self.max_source_len])  # empty for a blank line: nothing was searched
            aligned = bool(searched) and any(h.alignment is not None for h in hyps)
            src_words = source_words(src, searched) if aligned else []  # once for all its hypotheses
            translations = [
                DecodedHypothesis(
                    text,
                    h.score,
                    h.tokens,
                    [*tgt.pieces(h.tokens), "</s>"] if searched else [],
                    h.attention,
                    self._links(src_words, h),
                    h.mean_log_prob,
                    tuple(suspicions(searched, h.tokens, h.alignment)),
                    h.unmet_terms,
                )
                for h, text in zip(hyps, texts, strict=True)
            ]
            out.append(DecodedLine([*src.pieces(searched), "</s>"] if searched else [], translations))
        return out

    def _links(self, src_words: list[int | None], hypothesis: Hypothesis) -> list[Link] | None:
        """The hypothesis' word links, given the word of each source subword (None when search returned no
        alignment)."""
        if hypothesis.alignment is None:
            return None
        tgt_words = output_words(self.tokenizers.tgt, hypothesis.tokens)
        return attended_links(hypothesis.alignment, src_words, tgt_words)

    def translate(self, texts: Sequence[str], progress: Progress | None = None, **settings: Any) -> list[str]:
        """The best translation of each raw text: encode → search (with the `settings` given) → decode."""
        found = self.search(self.encode(texts), progress, **settings)
        return self.tokenizers.tgt.decode([hyps[0].tokens for hyps in found])

    def translated(
        self, texts: Sequence[str], alignments: bool = False, attention: bool = False, **settings: Any
    ) -> list[DecodedLine]:
        """Each raw text's hypotheses, decoded (with their word links when `alignments`, the attention of
        every layer and head when `attention`, for heatmaps): encode → search (with the `settings` given) →
        decode."""
        sources = self.encode(texts)
        found = self.search(sources, attention=attention, alignments=alignments, **settings)
        return self.decode(sources, found)


class TorchTranslator(Translator):
    """A trained model (or an `Ensemble` of them) searched by nmt's own search (nmt/decode/search.py); built
    by `of` (or `of_run`), the one way to make one. `full_context_layer`: the decoder layer guided alignment
    trained with full target context (it attends so in every teacher-forced pass), if any."""

    model: Seq2Seq
    full_context_layer: int | None

    @classmethod
    def of(
        cls,
        model: Seq2Seq,
        cfg: Config,
        tokenizers: Tokenizers,
        vocabularies: Mapping[str, Sequence[int]] | None = None,
    ) -> TorchTranslator:
        """The translator of `model` (or ensemble: search's own alignments, its members' mean) trained under
        `cfg` with `tokenizers`: the run's search settings, length limit, language tags, directions and
        alignment reading; `vocabularies`: each target language's subword ids, where known."""
        alone = not isinstance(model, Ensemble)
        directions = cfg.data.directions  # their tags checked against the vocabulary's (none for one pair)
        tags = LanguageTags.of(directions, tokenizers.src.tag_ids if directions.tagged else {})
        reading = translation_reading(cfg) if alone else None
        limit, trained = max_source_len(cfg), directions.directions
        translator = cls(tokenizers, cfg.search, limit, tags, trained, vocabularies, reading)
        translator.model = model
        translator.full_context_layer = full_context_layer(cfg) if alone else None
        return translator

    @classmethod
    def of_run(cls, run: TrainedRun) -> TorchTranslator:
        """The translator of a loaded run (or ensemble), with its target vocabularies."""
        return cls.of(run.model, run.cfg, run.tokenizers, load_target_vocabularies(run.directory.path))

    def search_batch(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """Attention, when asked: every layer's and head's from a teacher-forced pass over each hypothesis;
        an ensemble has no such pass, so search collects its members' mean of last-layer heads (one layer,
        one head). Alignments, when asked: search's, or under the translator's `reading` from a
        teacher-forced pass (with full context where guided alignment trained it)."""
        ensemble = isinstance(self.model, Ensemble)
        reading = self.reading if options.alignments else None  # alignments re-read under it (None: search's)
        batch = collate(sources, [[] for _ in sources], range(len(sources))).to(self.model.device)
        collect = dataclasses.replace(
            options,
            attention=options.attention and ensemble,
            alignments=options.alignments and reading is None,
        )
        with torch.inference_mode(), autocast(self.model.device):
            found = search(self.model, batch.src, batch.src_mask, rule, collect)
        found = [[with_mean_log_prob(h, rule.length_penalty) for h in hyps] for hyps in found]
        outputs, budget = [[h.tokens for h in hyps] for hyps in found], self.settings.batch_tokens
        if reading is not None:
            layer, unaligned = self.full_context_layer, options.unaligned
            aligned = hypotheses_alignments(
                self.model, sources, outputs, budget, reading, options.prefix, unaligned, layer
            )
            found = _given(found, "alignment", aligned)
        if options.attention and ensemble:  # search collected it (time, source): one layer, one head
            return [[_one_layer_one_head(h) for h in hyps] for hyps in found]
        if options.attention:
            paid = hypotheses_attention(self.model, sources, outputs, budget, options.prefix)
            found = _given(found, "attention", paid)
        return found


def _given(found: list[list[Hypothesis]], name: str, each: Sequence[Sequence[Any]]) -> list[list[Hypothesis]]:
    """Each source's hypotheses with the field `name` set to each one's value (`each`: a list a source)."""
    return [
        [dataclasses.replace(h, **{name: value}) for h, value in zip(hyps, values, strict=True)]
        for hyps, values in zip(found, each, strict=True)
    ]


def _one_layer_one_head(hypothesis: Hypothesis) -> Hypothesis:
    """The hypothesis with its attention (tgt_len, src_len) as (1, 1, tgt_len, src_len)."""
    attention = hypothesis.attention
    return dataclasses.replace(hypothesis, attention=None if attention is None else attention[None, None])
