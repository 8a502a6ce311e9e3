"""Glossaries in the server: one for the whole server (`nmt serve --glossary FILE`, read and checked at
startup, for each served direction its own `NAME.SRC-TGT.tsv` where there is one) and a request's `glossary`
(/translate, /v1/translate: [source term, target term] pairs). A request's entry replaces the server's entry
of the same source term (its words compared as terms are found: normalised, ignoring case) and the others are
added. The terms are written into each line between the markers of a model trained with terminology
annotation (nmt/decode/terminology.py): into a text's lines, or into an HTML page's (a term that a tag begins
or ends inside is left as it is), and the word links of a written-in target term are links of its source
term's words, so that a page's tags are placed as without a glossary. With no glossary on either side the
texts are translated as they are; a request's glossary on a model trained without annotation, or with a
target term the model's vocabulary cannot write, is refused (400)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from nmt.data.glossary import Term, for_direction, read_glossary
from nmt.data.terminology import AnnotatedLine, TermWriter
from nmt.decode.decoded import DecodedLine
from nmt.decode.running_text import TranslatedParagraph
from nmt.decode.terminology import NOT_TRAINED as NOT_TRAINED_RUN
from nmt.decode.terminology import UNWRITABLE
from nmt.errors import UserError
from nmt.serve.engines import Catalog, Engine, Engines
from nmt.serve.requests import ApiError

NOT_TRAINED = (
    "glossary: model {name} was not trained with terminology annotation, and constrained search (which "
    "needs no such training) is not available yet; leave out glossary or choose a model trained with "
    "data.terminology"
)


def with_server_glossary(catalog: Catalog, path: Path) -> Catalog:
    """`catalog` with the glossary at `path` for every engine (its direction's own file where there is one);
    a UserError for a model trained without annotation, a bad file or a term a model cannot write."""
    engines: dict[str, Engines] = {}
    for name, directions in catalog.engines.items():
        engines[name] = {}
        for direction, engine in directions.items():
            if engine.terms is None:
                raise UserError(NOT_TRAINED_RUN.format(path=name))
            own = for_direction(path, direction.src, direction.tgt)
            terms = read_glossary(own)
            bad = engine.terms.unwritable(terms)
            if bad is not None:
                raise UserError(f"{own} line {bad.line}: {UNWRITABLE.format(target=bad.target)}")
            engines[name][direction] = dataclasses.replace(engine, glossary=tuple(terms))
    return Catalog(engines, catalog.defaults)


def request_terms(engine: Engine, glossary: list[tuple[str, str]] | None) -> TermWriter | None:
    """What writes the terms of the server's glossary and of a request's `glossary` into its lines for
    `engine`; None where neither has an entry."""
    if not glossary:
        return engine.glossary_writer
    if engine.terms is None:
        raise ApiError(400, NOT_TRAINED.format(name=engine.name))
    terms = [
        Term(" ".join(source.split()), " ".join(target.split()), line=i)
        for i, (source, target) in enumerate(glossary)
    ]
    for term in terms:
        if not term.source or not term.target:
            raise ApiError(400, f"glossary[{term.line}] holds a term of white space only")
    bad = engine.terms.unwritable(terms)
    if bad is not None:
        raise ApiError(400, f"glossary[{bad.line}]: {UNWRITABLE.format(target=bad.target)}")
    compared = engine.terms.finder([])  # words compared as terms are found

    def key(term: Term) -> tuple[str, ...]:
        return tuple(compared.words(term.source, False))

    replaced = {key(term) for term in terms}
    kept = [term for term in engine.glossary if key(term) not in replaced]
    return TermWriter(engine.terms.finder([*kept, *terms]), engine.terms.markers)


def plain_paragraphs(
    translated: Sequence[TranslatedParagraph], lines: Sequence[AnnotatedLine]
) -> list[TranslatedParagraph]:
    """The paragraphs translated from `lines` (terms written in), each hypothesis' word links made links of
    the line's own words."""
    found = []
    for paragraph, line in zip(translated, lines, strict=True):
        joined = paragraph.joined
        hypotheses = [
            h if h.alignment is None else dataclasses.replace(h, alignment=line.plain_links(h.alignment))
            for h in joined.hypotheses
        ]
        found.append(dataclasses.replace(paragraph, joined=DecodedLine(joined.source_pieces, hypotheses)))
    return found
