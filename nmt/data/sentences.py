"""Running text split into sentences, per source language, by written rules (RULES): what every path that
takes a paragraph translates sentence by sentence (nmt/decode/running_text.py), and what the Argos export
writes into its package as an ONNX graph for MiniSBD (nmt/export/sentence_splitter.py): the two compute the
same rules from the same tables below.

A language without a table here (LANGUAGES) is split by the rules alone, with no abbreviation and no ordinal
(`announce` logs that once per language, for the paths that split).
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from dataclasses import dataclass

log = logging.getLogger(__name__)

RULES = """\
A sentence ends after sentence-final punctuation (. ! ? … ‼ ⁇ ⁈ ⁉), with up to three closing quotes or \
brackets after it (in French also a space and a closing guillemet: « Oui ! »), that is followed by white \
space or the end of the paragraph: "3.5", "e.g.," and "1.000" never end one, "?!" and "..." end at their \
last mark. It does not end there when the next word starts with a lowercase letter ("usw. und"), or when \
the '.' closes an abbreviation listed for the source language ("z. B.", "Dr.", "e.g."), follows a single \
letter (initials: "J. R. R. Tolkien") or, in German and Czech, one or two digits (ordinals: "am 3. Mai"), \
each preceded by white space, a quote, a bracket or the paragraph's start. Written rules, not a trained \
model."""

TERMINALS = ".!?…‼⁇⁈⁉"
CLOSERS = "\"'”’“‘»«›‹)]}"
OPENERS = "\"'„“”‚‘’«»‹›([{"
DIGITS = "0123456789"
CLOSERS_AFTER = 3  # closing quotes or brackets a sentence end may carry


@dataclass(frozen=True)
class Language:
    """What the rules know of one language: abbreviations whose '.' never ends a sentence, whether "3." is an
    ordinal number, which closers may follow the punctuation after a space."""

    abbreviations: tuple[str, ...] = ()
    ordinals: bool = False
    spaced_closers: str = ""


# "usw.", "etc." and the like often end a sentence: they are left to the lowercase rule ("usw. und" stays one
# sentence, "usw. Dann" is split).
LANGUAGES = {
    "de": Language(
        (
            "z. B.",
            "z.B.",
            "d. h.",
            "d.h.",
            "u. a.",
            "u.a.",
            "z. T.",
            "z.T.",
            "bzw.",
            "ca.",
            "vgl.",
            "ggf.",
            "evtl.",
            "inkl.",
            "bspw.",
            "sog.",
            "Dr.",
            "Prof.",
            "med.",
            "Hr.",
            "Hrn.",
            "Fr.",
            "Nr.",
            "Str.",
            "St.",
            "Abs.",
            "Tel.",
            "geb.",
            "Mio.",
            "Mrd.",
        ),
        ordinals=True,
    ),
    "en": Language(
        (
            "e.g.",
            "i.e.",
            "cf.",
            "vs.",
            "approx.",
            "Mr.",
            "Mrs.",
            "Ms.",
            "Dr.",
            "Prof.",
            "St.",
            "Jr.",
            "Sr.",
            "Mt.",
            "No.",
            "Fig.",
            "Inc.",
            "Ltd.",
            "Co.",
            "Gen.",
            "Capt.",
            "Rev.",
        ),
    ),
    "fr": Language(
        ("p. ex.", "cf.", "env.", "M.", "MM.", "Mme.", "Mlle.", "Dr.", "Pr.", "St.", "av.", "bd."),
        spaced_closers="»›",
    ),
    "cs": Language(
        (
            "např.",
            "tj.",
            "tzv.",
            "resp.",
            "popř.",
            "př.",
            "č.",
            "str.",
            "ul.",
            "Dr.",
            "Ing.",
            "Mgr.",
            "prof.",
            "doc.",
        ),
        ordinals=True,
    ),
}
GENERIC = Language()
Span = tuple[int, int]  # a sentence's characters [start, end) in its paragraph


def language(lang: str) -> Language:
    """The rules' table of `lang`; the generic rules where there is none."""
    return LANGUAGES.get(lang, GENERIC)


@functools.cache
def announce(lang: str) -> None:
    """Log, once per language, that paragraphs of `lang` are split by the generic rules, where it has no
    table."""
    if lang not in LANGUAGES:
        log.info(
            "no sentence-splitting rules for %s: its paragraphs are split by the generic rules (punctuation "
            "alone; rules exist for %s)",
            repr(lang) if lang else "a source language not named",
            ", ".join(LANGUAGES),
        )


def is_lowercase(char: str) -> bool:
    return unicodedata.category(char) == "Ll"


def _boundary(text: str, i: int) -> bool:
    """Whether what precedes a word may stand at `i`: white space, an opening quote or bracket, or the
    paragraph's start (i < 0)."""
    return i < 0 or text[i].isspace() or text[i] in OPENERS


# a terminal and up to three closers, followed by white space or the end (the candidates of RULES)
_CANDIDATE = re.compile(f"[{re.escape(TERMINALS)}][{re.escape(CLOSERS)}]{{0,{CLOSERS_AFTER}}}(?=\\s|\\Z)")

_NEXT_WORD = re.compile(
    r"\s+(\S)"
)  # the white space after a candidate end, and the next word's first character


def sentence_ends(text: str, rules: Language) -> list[int]:
    """The index of each character of `text` after which a sentence ends, by RULES with `rules`' table."""
    ends = [match.end() - 1 for match in _CANDIDATE.finditer(text)]
    if rules.spaced_closers:  # « Oui ! »: the closer ends it, the punctuation before its space does not
        spaced = re.compile(f"[{re.escape(TERMINALS)}]\\s[{re.escape(rules.spaced_closers)}](?=\\s|\\Z)")
        ends = sorted({*ends, *(match.end() - 1 for match in spaced.finditer(text))})
    return [i for i in ends if not _kept(text, i, rules)]


def _kept(text: str, i: int, rules: Language) -> bool:
    """Whether the sentence goes on after the candidate end `i`: a lowercase word next; a French closer after
    a space next; or a '.' closing an initial, an ordinal or a listed abbreviation."""
    following = _NEXT_WORD.match(text, i + 1)
    after = following.group(1) if following else ""
    if after and (is_lowercase(after) or after in rules.spaced_closers):
        return True
    if text[i] != ".":
        return False
    if i == 0:
        return False
    before = text[i - 1]
    if (is_lowercase(before) or before.isupper()) and _boundary(text, i - 2):
        return True
    if rules.ordinals and before in DIGITS:
        digits = 2 if i > 1 and text[i - 2] in DIGITS else 1
        if _boundary(text, i - 1 - digits):
            return True
    return any(
        text.endswith(abbreviation, 0, i + 1) and _boundary(text, i - len(abbreviation))
        for abbreviation in rules.abbreviations
    )


def sentence_spans(paragraph: str, lang: str) -> list[Span]:
    """The sentences of `paragraph` in language `lang`, as character spans without the white space around
    them, in order; a paragraph of white space has none."""
    spans, start = [], 0
    for end in [*sentence_ends(paragraph, language(lang)), len(paragraph) - 1]:
        sentence = paragraph[start : end + 1]
        if sentence.strip():
            lead = len(sentence) - len(sentence.lstrip())
            spans.append((start + lead, start + len(sentence.rstrip())))
        start = end + 1
    return spans


def split_sentences(paragraph: str, lang: str) -> list[str]:
    """The sentences of `paragraph` in language `lang` (`sentence_spans`' text)."""
    return [paragraph[start:end] for start, end in sentence_spans(paragraph, lang)]
