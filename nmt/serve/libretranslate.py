"""The LibreTranslate API as its clients use it (`libretranslatepy`, browser extensions, apps): POST
/translate, GET /languages and GET /frontend/settings, with LibreTranslate's fields, answers and errors.

Not served: /detect (there is no language identification; `source: auto` means the one source language served
into the target), /translate_file, /suggest, and `format: html` (refused with 400).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from nmt.decode.translator import Translated
from nmt.serve.answers import (
    Detected,
    FrontendSettings,
    Language,
    Languages,
    PairOfLanguages,
    ServedLanguage,
    Translation,
    json_answer,
)
from nmt.serve.requests import validated
from nmt.serve.service import Service

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
    """Translate `q` (a string or a list) from `source` to `target`, with `alternatives` other translations
    when asked; `detectedLanguage` answers a source of auto."""
    service: Service = request.app.state.service
    asked = validated(service.requests.translate, request.state.fields)
    many = isinstance(asked.q, list)
    found = asked.q if isinstance(asked.q, list) else [asked.q]
    engine = service.choose(asked.source, asked.target, None)
    decoding = service.decoding(engine, {"nbest": asked.alternatives + 1})
    results = await service.translate(engine, found, decoding)
    best = [_joined(lines, 0) for lines in results]
    other = [_alternatives(lines, asked.alternatives, b) for lines, b in zip(results, best, strict=True)]
    detected = [Detected(confidence=100.0, language=engine.source)] * len(found)
    answer = Translation(
        translatedText=best if many else best[0],
        alternatives=(other if many else other[0]) if asked.alternatives else None,
        detectedLanguage=(detected if many else detected[0]) if asked.source == "auto" else None,
    )
    return json_answer(answer, omit_none=True)


def _joined(lines: list[Translated], rank: int) -> str:
    """The text of each line's `rank`-th hypothesis (its last one where it has fewer), one line each."""
    return "\n".join(line.hypotheses[min(rank, len(line.hypotheses) - 1)].text for line in lines)


def _alternatives(lines: list[Translated], count: int, best: str) -> list[str]:
    """Up to `count` other translations, distinct and unlike the best one, as LibreTranslate gives them."""
    found: list[str] = []
    for rank in range(1, count + 1):
        text = _joined(lines, rank)
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
        filesTranslation=False,
        supportedFilesFormat=[],
        language=PairOfLanguages(source=language(first.src), target=language(first.tgt)),
    )
    return json_answer(settings)
