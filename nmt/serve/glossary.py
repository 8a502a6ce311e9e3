"""Glossaries in the server: one for the whole server (`nmt serve --glossary FILE`, read and checked at
startup, for each served direction its own `NAME.SRC-TGT.tsv` where there is one) and a request's `glossary`
(/translate, /v1/translate: [source term, target term] pairs). A request's entry replaces the server's entry
of the same source term (its words compared as terms are found: normalised, ignoring case) and the others are
added (`glossary_terms`). A model trained with terminology annotation reads the terms written into each line
between its markers (nmt/decode/terminology.py; `request_terms`): into a text's lines, or into an HTML page's
(a term that a tag begins or ends inside is left as it is), and the word links of a written-in target term
are links of its source term's words, so that a page's tags are placed as without a glossary. Any other torch
model searches under them (lexically constrained search; `constrained_terms`): they travel in the request's
`Decoding` (an HTML page's sentences alike: its tags are placed by the word links of the constrained
translation), and each hypothesis names the target terms it lacks. With no glossary on either side the texts
are translated as they are; a glossary on a CTranslate2 export trained without annotation or a target term
the model's vocabulary cannot write is refused (400)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from nmt.data.glossary import Term, TermFinder, for_direction, read_glossary, unwritable
from nmt.data.terminology import AnnotatedLine, TermWriter
from nmt.decode.decoded import DecodedLine
from nmt.decode.running_text import TranslatedParagraph
from nmt.decode.terminology import UNWRITABLE
from nmt.errors import UserError
from nmt.serve.engines import Catalog, Engine, Engines
from nmt.serve.requests import ApiError

NOT_CONSTRAINED = (
    "glossary: model {name} is a CTranslate2 export trained without terminology annotation, and constrained "
    "search runs on the torch engine; leave out glossary or choose a model trained with data.terminology"
)
NOT_CONSTRAINED_SERVER = (
    "--glossary: model {name} is a CTranslate2 export trained without terminology annotation, and "
    "constrained search runs on the torch engine; serve its run directory or a run trained with "
    "data.terminology"
)


def with_server_glossary(catalog: Catalog, path: Path) -> Catalog:
    """`catalog` with the glossary at `path` for every engine (its direction's own file where there is one);
    a UserError for a CTranslate2 export trained without annotation, a bad file or a term a model cannot
    write."""
    engines: dict[str, Engines] = {}
    for name, directions in catalog.engines.items():
        engines[name] = {}
        for direction, engine in directions.items():
            if engine.terms is None and not engine.translator.constrains:
                raise UserError(NOT_CONSTRAINED_SERVER.format(name=name))
            own = for_direction(path, direction.src, direction.tgt)
            terms = read_glossary(own)
            bad = _unwritable(engine, terms)
            if bad is not None:
                raise UserError(f"{own} line {bad.line}: {UNWRITABLE.format(target=bad.target)}")
            engines[name][direction] = dataclasses.replace(engine, glossary=tuple(terms))
    return Catalog(engines, catalog.defaults)


def glossary_terms(engine: Engine, glossary: list[tuple[str, str]] | None) -> tuple[Term, ...]:
    """The server's glossary for `engine` with the request's `glossary` entries replacing those of the same
    source term; ApiError (400) for a request's entry that `engine` cannot honour."""
    if not glossary:
        return engine.glossary
    if engine.terms is None and not engine.translator.constrains:
        raise ApiError(400, NOT_CONSTRAINED.format(name=engine.name))
    terms = [
        Term(" ".join(source.split()), " ".join(target.split()), line=i)
        for i, (source, target) in enumerate(glossary)
    ]
    for term in terms:
        if not term.source or not term.target:
            raise ApiError(400, f"glossary[{term.line}] holds a term of white space only")
    bad = _unwritable(engine, terms)
    if bad is not None:
        raise ApiError(400, f"glossary[{bad.line}]: {UNWRITABLE.format(target=bad.target)}")
    compared = TermFinder([], engine.translator.tokenizers.src.normalize)  # words compared as terms are found

    def key(term: Term) -> tuple[str, ...]:
        return tuple(compared.words(term.source, False))

    replaced = {key(term) for term in terms}
    return (*[term for term in engine.glossary if key(term) not in replaced], *terms)


def request_terms(engine: Engine, glossary: list[tuple[str, str]] | None) -> TermWriter | None:
    """What writes the terms of the server's glossary and of a request's `glossary` into its lines for an
    `engine` trained with annotation; None where neither has an entry, or for constrained search
    (`constrained_terms`)."""
    if engine.terms is None:
        return None
    if not glossary:
        return engine.glossary_writer
    return TermWriter(engine.terms.finder(glossary_terms(engine, glossary)), engine.terms.markers)


def constrained_terms(engine: Engine, glossary: list[tuple[str, str]] | None) -> tuple[Term, ...]:
    """The terms constrained search must honour for an `engine` trained without annotation (the server's and
    the request's, `glossary_terms`); none for one trained with annotation (its terms are written in)."""
    return () if engine.terms is not None else glossary_terms(engine, glossary)


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


def _unwritable(engine: Engine, terms: Sequence[Term]) -> Term | None:
    """The first of `terms` whose target `engine`'s target vocabulary cannot write, if any."""
    if engine.terms is not None:
        return engine.terms.unwritable(terms)
    return unwritable(terms, engine.translator.tokenizers.tgt)
