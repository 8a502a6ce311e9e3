"""A request's `glossary` (/translate, /v1/translate): [source term, target term] pairs. A model trained with
terminology annotation reads them written into each line of its texts between its markers
(nmt/decode/terminology.py), before the texts are split, cached and queued as any others (`with_glossary`);
any other torch model searches under them (lexically constrained search): they travel in the request's
`Decoding` (`constrained_terms`), and each hypothesis names the target terms it lacks. Absent or empty, the
texts are left as they are; an html request, a request for alignments, a term the model's vocabulary cannot
write or a CTranslate2 export trained without annotation is refused (400)."""

from __future__ import annotations

from nmt.data.glossary import Term, unwritable
from nmt.data.terminology import with_glossary_terms
from nmt.decode.terminology import UNWRITABLE
from nmt.serve.engines import Engine
from nmt.serve.requests import ApiError

NOT_CONSTRAINED = (
    "glossary: model {name} is a CTranslate2 export trained without terminology annotation, and constrained "
    "search runs on the torch engine; leave out glossary or choose a model trained with data.terminology"
)


def checked_terms(
    engine: Engine, glossary: list[tuple[str, str]], html: bool, alignments: bool
) -> list[Term]:
    """The request's glossary as terms, each one `engine` can honour; ApiError (400) for one it cannot."""
    if html or alignments:
        raise ApiError(
            400, "glossary writes terms into the source text: send format text, without alignments"
        )
    if engine.terms is None and not engine.translator.constrains:
        raise ApiError(400, NOT_CONSTRAINED.format(name=engine.name))
    terms = [
        Term(" ".join(source.split()), " ".join(target.split()), line=i)
        for i, (source, target) in enumerate(glossary)
    ]
    for term in terms:
        if not term.source or not term.target:
            raise ApiError(400, f"glossary[{term.line}] holds a term of white space only")
    tokenizer = engine.translator.tokenizers.tgt
    bad = unwritable(terms, tokenizer) if engine.terms is None else engine.terms.unwritable(terms)
    if bad is not None:
        raise ApiError(400, f"glossary[{bad.line}]: {UNWRITABLE.format(target=bad.target)}")
    return terms


def with_glossary(
    engine: Engine, texts: list[str], glossary: list[tuple[str, str]] | None, html: bool, alignments: bool
) -> list[str]:
    """`texts` with the terms of `glossary` written into each line for an `engine` trained with annotation
    (as they are without a glossary, or for constrained search: `constrained_terms`)."""
    if not glossary:
        return texts
    terms = checked_terms(engine, glossary, html, alignments)
    if engine.terms is None:
        return texts
    finder = engine.terms.finder(terms)
    return [with_glossary_terms(text, finder, engine.terms.markers) for text in texts]


def constrained_terms(
    engine: Engine, glossary: list[tuple[str, str]] | None, html: bool, alignments: bool
) -> tuple[Term, ...]:
    """The terms constrained search must honour for `engine`: the glossary's where it was trained without
    annotation, else none (its terms are written into the source)."""
    if not glossary or engine.terms is not None:
        return ()
    return tuple(checked_terms(engine, glossary, html, alignments))
