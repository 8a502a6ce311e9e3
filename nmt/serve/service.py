"""Between the HTTP routes and the batcher: choosing the model of a request, splitting each line of a text
into sentences (nmt/decode/running_text.py), encoding them and decoding their hypotheses (through the model's
Translator), and queueing them; counting the sentences translations dropped. The texts translated before come
from the translation cache (nmt/serve/cache.py) instead."""

from __future__ import annotations

import dataclasses
import itertools
import logging
from types import SimpleNamespace
from typing import Any

from nmt.config import search_flags
from nmt.data.terminology import AnnotatedLine, TermWriter
from nmt.decode.markup import Page, with_language
from nmt.decode.running_text import TranslatedParagraph, segment
from nmt.decode.search import Hypothesis
from nmt.errors import UserError
from nmt.rules.registry import chosen_rule, rule_of
from nmt.rules.sampling import Sampling
from nmt.serve.batcher import Batcher, Closed, SentenceFailed
from nmt.serve.cache import TranslationCache
from nmt.serve.engines import Catalog, Decoding, Engine
from nmt.serve.glossary import plain_paragraphs
from nmt.serve.requests import ApiError, Limits, RequestModels, clipped

log = logging.getLogger(__name__)
DECODINGS_KEPT = 256  # the decodings of the last settings requests gave: clients send a few alike again


class Service:
    """The served models, the batcher that decodes for all of them, the request limits and the request models
    bounded by them, the translations of the texts translated so far, and the sentences translations have
    dropped since the start (`dropped_sentences`)."""

    def __init__(
        self,
        catalog: Catalog,
        batcher: Batcher[Decoding, list[Hypothesis]],
        limits: Limits,
        requests: RequestModels,
        cache: TranslationCache[list[TranslatedParagraph]],
    ) -> None:
        self.catalog, self.batcher, self.limits, self.requests = catalog, batcher, limits, requests
        self.cache = cache
        self.dropped_sentences = 0
        self._decodings: dict[tuple[Any, ...], Decoding] = {}

    def choose(self, source: str | None, target: str | None, model: str | None) -> Engine:
        """The engine of the model named `model`, else of the default model of the served direction that
        `source` → `target` names, in that direction: a missing side, or a `source` of 'auto', is the one that
        the directions (of the model, when named) leave."""
        engines = self.catalog.engines
        served = self.catalog.defaults
        if model is not None:
            found = engines.get(model)
            if found is None:
                raise ApiError(400, f"no model {clipped(model)!r}; served: {', '.join(engines)}")
            served = dict.fromkeys(found, model)
        matching = [d for d in served if source in (None, "auto", d.src) and target in (None, d.tgt)]
        if len(matching) == 1:
            return engines[served[matching[0]]][matching[0]]
        listed = ", ".join(f"{d.src}→{d.tgt}" for d in served)
        asked = f"{clipped(source or 'any source')} → {clipped(target or 'any target')}"
        if not matching:
            if model is not None:
                raise ApiError(400, f"model {model!r} translates {listed}; not {asked}")
            raise ApiError(400, f"{asked} is not served; pairs: {listed}")
        matched = ", ".join(f"{d.src}→{d.tgt}" for d in matching)
        raise ApiError(
            400, f"{asked} matches {len(matching)} served pairs ({matched}): send source and target"
        )

    def decoding(
        self, engine: Engine, given: dict[str, Any], attention: bool = False, alignments: bool = False
    ) -> Decoding:
        """How to decode a request: with `engine`, its search settings changed by those the request `given`
        (a beam search widened to `nbest`); a value out of range, a setting the search does not read or
        settings that do not go together are a 400 naming the field. The decodings of the last
        `DECODINGS_KEPT` settings are kept: checking settings costs more than answering from the cache."""
        key = (engine, tuple(sorted(given.items())), attention, alignments)
        found = self._decodings.get(key)
        if found is None:
            found = self._checked_decoding(engine, given, attention, alignments)
            if len(self._decodings) >= DECODINGS_KEPT:
                del self._decodings[next(iter(self._decodings))]
            self._decodings[key] = found
        return found

    def _checked_decoding(
        self, engine: Engine, given: dict[str, Any], attention: bool, alignments: bool
    ) -> Decoding:
        settings = engine.translator.settings
        wanted = SimpleNamespace(**(dataclasses.asdict(settings) | given))
        if "beam_size" in chosen_rule(wanted).reads() and wanted.nbest > wanted.beam_size:
            given = given | {"beam_size": wanted.nbest}
        try:
            changed = search_flags.changed(settings, given, field_name, model_name)
            engine.translator.refuse_unsupported(changed)
        except UserError as err:
            raise ApiError(400, str(err)) from err
        if changed.beam_size > (most := self.limits.max_beam):
            raise ApiError(400, f"a beam of {changed.beam_size} exceeds this server's limit of {most}")
        return Decoding(engine, changed, attention, alignments)

    async def translate(
        self, engine: Engine, texts: list[str], decoding: Decoding, split: bool = True
    ) -> list[list[TranslatedParagraph]]:
        """Each text's lines translated (blank lines stay blank), with `split` sentence by sentence, all
        pieces of all texts queued together; a piece over the model's limit is cut, the cut stated."""
        translator = engine.translator
        if decoding.attention and not translator.has_attention:
            raise ApiError(400, f"model {engine.name!r} ({engine.facts.engine}) returns no attention")
        if decoding.alignments and not translator.has_alignments:
            raise ApiError(400, f"model {engine.name!r} returns no alignments: export its run again")
        lines = [text.split("\n") for text in texts]
        segmented = segment([line for text in lines for line in text], translator, split)
        try:
            found = await self.batcher.translate(
                decoding, segmented.sources, rule_of(decoding.settings).width
            )
        except Closed as err:
            raise ApiError(503, str(err)) from err
        except SentenceFailed as err:
            what = "out of memory translating" if err.memory else "failed to translate"
            raise ApiError(503 if err.memory else 500, f"the server {what} this text: {err}") from err
        translated = segmented.translations(translator.decode(segmented.sources, found), engine.target)
        self._count_dropped(translated)
        paragraphs = iter(translated)
        return [list(itertools.islice(paragraphs, len(text))) for text in lines]

    async def translate_cached(
        self,
        engine: Engine,
        texts: list[str],
        decoding: Decoding,
        split: bool = True,
        terms: TermWriter | None = None,
    ) -> list[list[TranslatedParagraph]]:
        """`translate`, through the cache: a text translated before as `decoding` and `split` say is not
        translated again (samples are drawn anew where the engine would not draw them alike: a CTranslate2
        export's); with `terms`, a glossary's terms written into each line (nmt/serve/glossary.py)."""
        if terms is not None:
            return await self._written(
                engine, [[terms.line(line) for line in t.split("\n")] for t in texts], decoding, split
            )
        if isinstance(rule_of(decoding.settings), Sampling) and engine.translator.engine != "torch":
            return await self.translate(engine, texts, decoding, split)
        return await self.cache.translate(
            texts, (decoding, split), lambda fresh: self.translate(engine, fresh, decoding, split)
        )

    async def translate_pages(
        self,
        engine: Engine,
        pages: list[Page],
        decoding: Decoding,
        split: bool = True,
        terms: TermWriter | None = None,
    ) -> list[list[TranslatedParagraph]]:
        """The sentences of each HTML page's blocks translated, with their word links (to place its tags);
        with `terms`, a glossary's terms written into each line where no tag begins or ends inside a term."""
        aligned = dataclasses.replace(decoding, alignments=True)
        if terms is None:
            return await self.translate_cached(
                engine, ["\n".join(page.lines) for page in pages], aligned, split
            )
        written = [
            [terms.line(line, at) for line, at in zip(page.lines, page.boundaries(), strict=True)]
            for page in pages
        ]
        return await self._written(engine, written, aligned, split)

    async def _written(
        self, engine: Engine, texts: list[list[AnnotatedLine]], decoding: Decoding, split: bool
    ) -> list[list[TranslatedParagraph]]:
        """Texts whose lines hold terms written in, translated through the cache; their word links are links
        of each line's own words."""
        joined = ["\n".join(line.text for line in lines) for lines in texts]
        found = await self.translate_cached(engine, joined, decoding, split)
        return [plain_paragraphs(paragraphs, lines) for paragraphs, lines in zip(found, texts, strict=True)]

    def _count_dropped(self, translated: list[TranslatedParagraph]) -> None:
        """Count (and log) the sentences the best translations lack."""
        dropped = sum(paragraph.dropped for paragraph in translated)
        if dropped:
            self.dropped_sentences += dropped
            short = sum(paragraph.dropped > 0 for paragraph in translated)
            log.warning("the translations of %d lines of a request lack %d sentences", short, dropped)


def joined(
    paragraphs: list[TranslatedParagraph], rank: int, page: Page | None = None, target: str = ""
) -> str:
    """The text of each paragraph's `rank`-th hypothesis (its last one where it has fewer), one line each;
    with the `page` the paragraphs are the blocks of, that page, its tags placed by each hypothesis' word
    links and its language `target`."""
    lines = [paragraph.joined for paragraph in paragraphs]
    chosen = [line.hypotheses[min(rank, len(line.hypotheses) - 1)] for line in lines]
    if page is None:
        return "\n".join(found.text for found in chosen)
    return with_language(page.written((found.text, found.alignment or []) for found in chosen), target)


def field_name(setting: str, value: Any) -> str:
    """A search setting as a request gives it: `beam_size=4` (`beam_size` without a value)."""
    return setting if value is None else f"{setting}={value!r}"


def model_name(setting: str, value: Any) -> str:
    """A search setting as the model's config has it."""
    return f"the model's {setting}={value!r}"
