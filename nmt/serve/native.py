"""nmt's own API: POST /v1/translate (n-best with scores, subwords and, on request, the attention of every
layer and head and the word alignment), GET /v1/models and GET /health."""

from __future__ import annotations

import dataclasses

from starlette.requests import Request
from starlette.responses import Response
from torch import Tensor

from nmt.decode.decoded import DecodedLine
from nmt.decode.markup import Page
from nmt.decode.running_text import TranslatedParagraph
from nmt.serve.answers import (
    CacheHealth,
    CutPiece,
    Health,
    HypothesisAnswer,
    LineAnswer,
    Models,
    SentenceCount,
    ServedModel,
    TextAnswer,
    V1Translation,
    Weights,
    json_answer,
)
from nmt.serve.glossary import constrained_terms, request_terms
from nmt.serve.requests import served_page, validated
from nmt.serve.service import Service, joined

DIGITS = 5  # attention weights are rounded to this many decimals


async def translate(request: Request) -> Response:
    """Translate `q` (a string or a list of texts, each split into lines, and each line into sentences unless
    `split_sentences` is false) with the model `model`, or the default one of `source` → `target` (without
    either: the one pair served): per text its best translation, per line (sentence) its `nbest` hypotheses
    with their scores, subwords and (with `attention`) attention (with `alignments`: word alignment), and the
    lines whose translation lacks a sentence."""
    service: Service = request.app.state.service
    asked = validated(service.requests.v1_translate, request.state.fields)
    engine = service.choose(asked.source, asked.target, asked.model)
    decoding = service.decoding(engine, asked.search_given(), asked.attention, asked.alignments)
    texts = asked.q if isinstance(asked.q, list) else [asked.q]
    terms = request_terms(engine, asked.glossary)
    glossary = constrained_terms(engine, asked.glossary)
    decoding = dataclasses.replace(decoding, glossary=glossary)
    split = asked.split_sentences
    if asked.format == "html":
        pages: list[Page | None] = [served_page(text) for text in texts]
        read = [page for page in pages if page]
        results = await service.translate_pages(engine, read, decoding, split, terms)
    else:
        pages = [None] * len(texts)
        results = await service.translate_cached(engine, texts, decoding, split, terms)
    answer = V1Translation(
        model=engine.name,
        source=engine.source,
        target=engine.target,
        beam_size=decoding.settings.beam_size,
        translations=[_text(lines, page, engine.target) for lines, page in zip(results, pages, strict=True)],
    )
    return json_answer(answer, omit_none=True)


def _text(paragraphs: list[TranslatedParagraph], page: Page | None, target: str) -> TextAnswer:
    """A text's best translation (a page: with its tags placed) and the sentences of its lines (a page's:
    of its blocks), the lines that lack a sentence and the pieces cut."""
    return TextAnswer(
        translatedText=joined(paragraphs, 0, page, target),
        lines=[_line(i, piece) for i, paragraph in enumerate(paragraphs) for piece in paragraph.pieces],
        dropped=[
            SentenceCount(
                line=i,
                source_sentences=paragraph.source_sentences,
                translated_sentences=paragraph.translated_sentences,
            )
            for i, paragraph in enumerate(paragraphs)
            if paragraph.dropped
        ],
        cut=[
            CutPiece(line=i, subwords=subwords, translated=translated)
            for i, paragraph in enumerate(paragraphs)
            for subwords, translated in paragraph.cut
        ],
    )


def _line(index: int, line: DecodedLine) -> LineAnswer:
    """A sentence of line `index`: its source subwords and hypotheses (text, score, target subwords,
    attention when asked)."""
    return LineAnswer(
        line=index,
        source_pieces=line.source_pieces,
        hypotheses=[
            HypothesisAnswer(
                text=found.text,
                score=round(found.score, 4),
                mean_log_prob=round(found.mean_log_prob or 0.0, 4),
                suspect=list(found.suspect),
                target_pieces=found.pieces,
                attention=None if found.attention is None else _rounded(found.attention),
                alignment=None if found.alignment is None else [list(link) for link in found.alignment],
                unmet_terms=None if found.unmet_terms is None else list(found.unmet_terms),
            )
            for found in line.hypotheses
        ],
    )


def _rounded(weights: Tensor) -> Weights:
    """(layers, heads, tgt, src) weights as nested lists of numbers with `DIGITS` decimals."""
    return weights.double().mul(10**DIGITS).round().div(10**DIGITS).tolist()


async def models(request: Request) -> Response:
    """Every served model, once for each of its pairs: the pair, whether the model is the pair's default, what
    it is."""
    catalog = request.app.state.service.catalog
    served = [
        ServedModel(
            name=name,
            source=direction.src,
            target=direction.tgt,
            default=catalog.defaults.get(direction) == name,
            **engine.facts.model_dump(),
        )
        for name, engines in catalog.engines.items()
        for direction, engine in engines.items()
    ]
    return json_answer(Models(models=served))


async def health(request: Request) -> Response:
    """The server answers: its models, sentences waiting, batches and sentences decoded so far, its
    translation cache."""
    service: Service = request.app.state.service
    stats, cache = service.batcher.stats, service.cache
    return json_answer(
        Health(
            status="ok",
            models=list(service.catalog.engines),
            waiting=service.batcher.waiting,
            decoding=stats.decoding,
            batches=stats.batches,
            sentences=stats.sentences,
            split_batches=stats.split_batches,
            cache=CacheHealth(
                entries=len(cache),
                bytes=cache.bytes,
                max_entries=cache.limits.entries,
                max_bytes=cache.limits.max_bytes,
                hits=cache.stats.hits,
                misses=cache.stats.misses,
            ),
            dropped_sentences=service.dropped_sentences,
        )
    )
