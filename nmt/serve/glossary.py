"""A request's `glossary` (/translate, /v1/translate): [source term, target term] pairs written into each line
of its texts between the markers of a model trained with terminology annotation (nmt/decode/terminology.py),
before the texts are split, cached and queued as any others. Absent or empty, the texts are left as they are;
a model trained without annotation, an html request, a request for alignments or a term the model's
vocabulary cannot write is refused (400)."""

from __future__ import annotations

from nmt.data.glossary import Term
from nmt.data.terminology import with_glossary_terms
from nmt.decode.terminology import UNWRITABLE
from nmt.serve.engines import Engine
from nmt.serve.requests import ApiError

NOT_TRAINED = (
    "glossary: model {name} was not trained with terminology annotation, and constrained search (which "
    "needs no such training) is not available yet; leave out glossary or choose a model trained with "
    "data.terminology"
)


def with_glossary(
    engine: Engine, texts: list[str], glossary: list[tuple[str, str]] | None, html: bool, alignments: bool
) -> list[str]:
    """`texts` with the terms of `glossary` written into each line for `engine` (as they are without one)."""
    if not glossary:
        return texts
    if html or alignments:
        raise ApiError(
            400, "glossary writes terms into the source text: send format text, without alignments"
        )
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
    finder = engine.terms.finder(terms)
    return [with_glossary_terms(text, finder, engine.terms.markers) for text in texts]
