"""The LibreTranslate API as its clients use it (`libretranslatepy`, browser extensions, apps): POST
/translate, GET /languages and GET /frontend/settings, with LibreTranslate's fields, answers and errors.

Each line of a text (each block of a page) is translated sentence by sentence, as LibreTranslate does
(nmt/decode/running_text.py). `format: html` places the inline tags by the translation's word links
(nmt/decode/markup.py). POST /detect and `source: auto` are in nmt/serve/detect.py, POST /translate_file in
nmt/serve/files.py. Not served: /suggest.
"""

from __future__ import annotations

import asyncio
import dataclasses

from starlette.requests import Request
from starlette.responses import Response

from nmt.data.glossary import Term
from nmt.data.terminology import TermWriter
from nmt.decode.markup import Page
from nmt.decode.running_text import TranslatedParagraph
from nmt.serve.answers import (
    Detected,
    FrontendSettings,
    Language,
    Languages,
    LibreTranslation,
    PairOfLanguages,
    ServedLanguage,
    TextConfidence,
    json_answer,
)
from nmt.serve.detect import routes
from nmt.serve.engines import Engine
from nmt.serve.files import FORMATS
from nmt.serve.glossary import constrained_terms, request_terms
from nmt.serve.requests import served_page, validated
from nmt.serve.service import Service, joined

NAMES = {  # ISO 639-1 codes of the languages LibreTranslate serves most; others are named by their code
    "ar": "Arabic",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "hi": "Hindi",
    "hu": "Hungarian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


def language(code: str) -> Language:
    return Language(code=code, name=NAMES.get(code, code))


async def translate(request: Request) -> Response:
    """Translate `q` (a string or a list; text or HTML) from `source` to `target`, with `alternatives` other
    translations when asked; with a source of auto, each text from its detected language
    (`detectedLanguage`)."""
    service: Service = request.app.state.service
    asked = validated(service.requests.translate, request.state.fields)
    many = isinstance(asked.q, list)
    found = asked.q if isinstance(asked.q, list) else [asked.q]
    html = asked.format == "html"
    pages: list[Page | None] = [served_page(text) if html else None for text in found]
    if asked.source == "auto":  # a page by its sentences
        texts = [" ".join(page.lines) if page else text for text, page in zip(found, pages, strict=True)]
        engines, detections = zip(*await routes(service, texts, asked.target), strict=True)
        detected: list[Detected] | None = list(detections)
    else:
        engines, detected = (service.choose(asked.source, asked.target, None),) * len(found), None
    terms = {  # a source of auto: per text
        engine: (request_terms(engine, asked.glossary), constrained_terms(engine, asked.glossary))
        for engine in engines
    }
    results = await _translated(service, list(engines), found, pages, asked.alternatives, terms)
    targets = [engine.target for engine in engines]
    best = [joined(lines, 0, page, t) for lines, page, t in zip(results, pages, targets, strict=True)]
    other = [
        _alternatives(lines, asked.alternatives, b, page, t)
        for lines, b, page, t in zip(results, best, pages, targets, strict=True)
    ]
    trust = [_confidence(lines) for lines in results]
    answer = LibreTranslation(
        translatedText=best if many else best[0],
        alternatives=(other if many else other[0]) if asked.alternatives else None,
        detectedLanguage=(detected if many else detected[0]) if detected else None,
        confidence=trust if many else trust[0],
    )
    return json_answer(answer, omit_none=True)


def _confidence(lines: list[TranslatedParagraph]) -> TextConfidence:
    """A text's confidence: the lowest mean log-probability of its lines' best translations, and every reason
    any of them is suspect (nmt/decode/confidence.py)."""
    best = [line.joined.best for line in lines]
    lowest = min((found.mean_log_prob or 0.0 for found in best), default=0.0)
    reasons = sorted({reason for found in best for reason in found.suspect})
    return TextConfidence(meanLogProb=round(lowest, 4), suspect=reasons)


async def _translated(
    service: Service,
    engines: list[Engine],
    texts: list[str],
    pages: list[Page | None],
    alternatives: int,
    terms: dict[Engine, tuple[TermWriter | None, tuple[Term, ...]]],
) -> list[list[TranslatedParagraph]]:
    """Each text's lines (or its page's sentences) translated by its engine, with `alternatives` other
    hypotheses and the glossary `terms` of the engine (what writes them into the lines, and the terms
    constrained search honours); the texts of every engine are queued at once."""
    groups: dict[Engine, list[int]] = {}
    for i, engine in enumerate(engines):
        groups.setdefault(engine, []).append(i)
    translations = []
    for engine, group in groups.items():
        writer, constrained = terms[engine]
        decoding = dataclasses.replace(
            service.decoding(engine, {"nbest": alternatives + 1}), glossary=constrained
        )
        read = [page for i in group if (page := pages[i]) is not None]
        if read:
            translations.append(service.translate_pages(engine, read, decoding, terms=writer))
        else:
            own = [texts[i] for i in group]
            translations.append(service.translate_cached(engine, own, decoding, terms=writer))
    results: list[list[TranslatedParagraph]] = [[] for _ in texts]
    for group, translated in zip(groups.values(), await asyncio.gather(*translations), strict=True):
        for i, lines in zip(group, translated, strict=True):
            results[i] = lines
    return results


def _alternatives(
    lines: list[TranslatedParagraph], count: int, best: str, page: Page | None, target: str
) -> list[str]:
    """Up to `count` other translations, distinct and unlike the best one, as LibreTranslate gives them."""
    found: list[str] = []
    for rank in range(1, count + 1):
        text = joined(lines, rank, page, target)
        if text != best and text not in found:
            found.append(text)
    return found


async def languages(request: Request) -> Response:
    """Every language of the served pairs, each with the languages it is translated into (none for a language
    that is only a target): clients build both their menus from it."""
    directions = request.app.state.service.catalog.defaults
    codes = sorted({code for d in directions for code in (d.src, d.tgt)})
    targets = {code: sorted(d.tgt for d in directions if d.src == code) for code in codes}
    return json_answer(
        Languages([ServedLanguage(code=c, name=NAMES.get(c, c), targets=targets[c]) for c in codes])
    )


async def frontend_settings(request: Request) -> Response:
    """The limits and the first pair, as LibreTranslate's web page reads them."""
    service: Service = request.app.state.service
    first = next(iter(service.catalog.defaults))
    keys = request.app.state.keys is not None
    settings = FrontendSettings(
        charLimit=service.limits.max_chars,
        frontendTimeout=500,
        apiKeys=keys,
        keyRequired=keys,
        suggestions=False,
        filesTranslation=True,
        supportedFilesFormat=list(FORMATS),
        language=PairOfLanguages(source=language(first.src), target=language(first.tgt)),
    )
    return json_answer(settings)
