"""Which language a text is in, as py3langid identifies it choosing among given languages only (the `langid`
extra: a BSD-licensed classifier whose model ships inside the wheel; it works offline)."""

from __future__ import annotations

import copy
import functools
from typing import Any


class Unidentifiable(Exception):
    """py3langid is not installed, or does not know one of the languages: the message says which."""


@functools.cache
def classifier() -> Any:
    """py3langid's classifier of every language it knows, its probabilities normalised; loaded once per
    process (about a second). Raises Unidentifiable."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError as err:
        raise Unidentifiable("it needs py3langid (pip install 'nmt[langid]')") from err
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@functools.cache
def identifier(languages: tuple[str, ...]) -> Any:
    """The classifier restricted to `languages`, its probabilities normalised over them. Raises
    Unidentifiable."""
    every = classifier()
    unknown = sorted(set(languages) - set(every.labels))
    if unknown:
        raise Unidentifiable(f"py3langid does not know the language code(s) {', '.join(unknown)}")
    restricted = copy.copy(every)  # set_languages replaces the arrays it restricts: the model is shared
    restricted.set_languages(list(languages))
    return restricted


def ranked(text: str, languages: tuple[str, ...]) -> list[tuple[str, float]]:
    """Each of `languages` with the probability that `text` is in it, the likeliest first. Raises
    Unidentifiable."""
    return [(language, float(p)) for language, p in identifier(languages).rank(text)]
