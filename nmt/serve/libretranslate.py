"""The LibreTranslate API as its clients use it (`libretranslatepy`, browser extensions, apps): POST
/translate, GET /languages and GET /frontend/settings, with LibreTranslate's fields, answers and errors.

Not served: /detect (there is no language identification; `source: auto` means the one source language served
into the target), /translate_file, /suggest, and `format: html` (refused with 400).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from nmt.serve.payloads import ApiError, integer, string, texts
from nmt.serve.service import Line, Service

NAMES = {  # ISO 639-1 codes of the languages LibreTranslate serves most; others are named by their code
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "fi": "Finnish", "fr": "French", "hi": "Hindi", "hu": "Hungarian", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


def language(code: str) -> dict[str, str]:
    return {"code": code, "name": NAMES.get(code, code)}


async def translate(request: Request) -> JSONResponse:
    """POST /translate: `q` (a string or a list), `source`, `target`, `format` (text), `alternatives` →
    `translatedText` (a string or a list, as `q`), `alternatives` when asked, `detectedLanguage` for auto."""
    service: Service = request.app.state.service
    fields = request.state.fields
    found, many = texts(fields, service.limits)
    source, target = string(fields, "source"), string(fields, "target")
    if (string(fields, "format", required=False) or "text") != "text":
        raise ApiError(400, f"{fields['format']} format is not supported; nmt serve translates text")
    alternatives = integer(fields, "alternatives", 0, 0, service.limits.max_beam - 1)
    engine = service.choose(source, target, None)
    options = service.options(engine, None, alternatives + 1, False)
    results = await service.translate(engine, found, options)
    decode = engine.tokenizers.tgt.decode
    best = [_joined(decode, lines, 0) for lines in results]
    body: dict[str, Any] = {"translatedText": best if many else best[0]}
    if alternatives:
        other = [
            _alternatives(decode, lines, alternatives, text)
            for lines, text in zip(results, best, strict=True)
        ]
        body["alternatives"] = other if many else other[0]
    if source == "auto":
        detected = {"confidence": 100.0, "language": engine.source}
        body["detectedLanguage"] = [detected] * len(found) if many else detected
    return JSONResponse(body)


def _joined(decode: Any, lines: list[Line], rank: int) -> str:
    """The text of each line's `rank`-th hypothesis (its last one where it has fewer), one line each."""
    chosen = [line.found.hypotheses[min(rank, len(line.found.hypotheses) - 1)].tokens for line in lines]
    return "\n".join(decode(chosen))


def _alternatives(decode: Any, lines: list[Line], count: int, best: str) -> list[str]:
    """Up to `count` other translations, distinct and unlike the best one, as LibreTranslate gives them."""
    found: list[str] = []
    for rank in range(1, count + 1):
        text = _joined(decode, lines, rank)
        if text != best and text not in found:
            found.append(text)
    return found


async def languages(request: Request) -> JSONResponse:
    """GET /languages: every source language with the targets it is served into."""
    defaults = request.app.state.service.catalog.defaults
    sources = sorted({source for source, _ in defaults})
    return JSONResponse(
        [language(s) | {"targets": sorted(t for src, t in defaults if src == s)} for s in sources]
    )


async def frontend_settings(request: Request) -> JSONResponse:
    """GET /frontend/settings: the limits and the first pair, as LibreTranslate's web page reads them."""
    service: Service = request.app.state.service
    source, target = next(iter(service.catalog.defaults))
    keys = request.app.state.keys is not None
    return JSONResponse(
        {
            "charLimit": service.limits.max_chars,
            "frontendTimeout": 500,
            "apiKeys": keys,
            "keyRequired": keys,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {"source": language(source), "target": language(target)},
        }
    )
