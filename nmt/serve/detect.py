"""Language identification for LibreTranslate's API: POST /detect, and the route of each text of a request
whose source is `auto`. py3langid (nmt/data/language_id.py) chooses among the languages the server serves
only, sources and targets; without py3langid, or when it does not know a served language, /detect is refused
as LibreTranslate refuses a feature it does not offer, and `auto` is the one source served into the target."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from nmt.data.language_id import Unidentifiable, ranked
from nmt.serve.answers import Detected, Detections, json_answer
from nmt.serve.engines import Engine
from nmt.serve.requests import ApiError, validated
from nmt.serve.service import Service


async def detect(request: Request) -> Response:
    """The language of `q` (a text: a list of one detection; a list of texts: such a list for each)."""
    service: Service = request.app.state.service
    asked = validated(service.requests.detect, request.state.fields)
    texts = asked.q if isinstance(asked.q, list) else [asked.q]
    languages = served_languages(service)
    try:
        found = await asyncio.to_thread(lambda: [[detected(text, languages)] for text in texts])
    except Unidentifiable as err:
        raise ApiError(403, f"Language detection is disabled on this server: {err}") from err
    return json_answer(Detections(found if isinstance(asked.q, list) else found[0]))


def served_languages(service: Service) -> tuple[str, ...]:
    """Every language of the served directions, sorted."""
    return tuple(sorted({code for d in service.catalog.defaults for code in (d.src, d.tgt)}))


def detected(text: str, languages: tuple[str, ...]) -> Detected:
    """The likeliest of `languages` for `text`, with its probability in percent. Raises Unidentifiable."""
    language, probability = ranked(text, languages)[0]
    return Detected(confidence=round(100 * probability, 2), language=language)


async def routes(service: Service, texts: list[str], target: str) -> list[tuple[Engine, Detected]]:
    """For each text of a request with source `auto`, the engine of the likeliest source language that is
    served into `target`, and the detected language (the likeliest served language; it may be one that is
    not a source: a bilingual server translates from its one source whatever the text). Without detection:
    the one source served into `target`, confidence 100."""
    languages = served_languages(service)
    sources = [d.src for d in service.catalog.defaults if d.tgt == target]
    try:
        rankings = await asyncio.to_thread(lambda: [ranked(text, languages) for text in texts])
    except Unidentifiable:
        engine = service.choose("auto", target, None)
        return [(engine, Detected(confidence=100.0, language=engine.source))] * len(texts)
    found = []
    for ranking in rankings:
        source = next((language for language, _ in ranking if language in sources), "auto")
        language, probability = ranking[0]
        likeliest = Detected(confidence=round(100 * probability, 2), language=language)
        found.append((service.choose(source, target, None), likeliest))
    return found
