"""Term use: how often a system's output holds the translation a glossary asks for (`nmt evaluate
--glossary`), the measure of terminology shared tasks (WMT 2021 terminology, "exact match").

Counted on occurrences: each glossary term found in a source (as `nmt translate --glossary` finds it:
nmt/data/glossary.py `TermFinder`, every occurrence, overlaps resolved) is one occurrence; the occurrences of
a term in a sentence are used as often as its output holds the target term, at most as often as the source
holds the term. The target term is found in the output on words, as source terms are found in sources
(normalised alike, ignoring case unless its entry says `match-case`, spacing between words not compared, never
inside a longer word). The same count on the references says how closely they follow the glossary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nmt.data.glossary import Term, TermFinder


@dataclass(frozen=True)
class TermUse:
    """Glossary terms found in the sources (`occurrences`, in `sentences` sources), those whose target term
    the outputs hold (`used`) and those the references hold (`in_references`, None without references)."""

    occurrences: int
    used: int
    sentences: int
    in_references: int | None = None

    @staticmethod
    def _share(count: int, of: int) -> float | None:
        return None if of == 0 else round(100 * count / of, 2)

    def as_dict(self) -> dict[str, Any]:
        """The report's `term_use`: counts and shares in percent (None where no term was found)."""
        found: dict[str, Any] = {
            "occurrences": self.occurrences,
            "used": self.used,
            "sentences": self.sentences,
        }
        found["rate"] = self._share(self.used, self.occurrences)
        if self.in_references is not None:
            found["in_references"] = self.in_references
            found["reference_rate"] = self._share(self.in_references, self.occurrences)
        return found


def term_use(
    sources: Sequence[str],
    outputs: Sequence[str],
    finder: TermFinder,
    references: Sequence[str] | None = None,
) -> TermUse:
    """How often `outputs` (and `references`, line for line) hold the target terms of the glossary terms
    `finder` finds in `sources` (see the module)."""
    occurrences = used = sentences = in_references = 0
    for i, (source, output) in enumerate(zip(sources, outputs, strict=True)):
        found = Counter(match.term for match in finder.find(source))
        if not found:
            continue
        sentences += 1
        occurrences += sum(found.values())
        used += _held(found, output, finder)
        if references is not None:
            in_references += _held(found, references[i], finder)
    return TermUse(occurrences, used, sentences, None if references is None else in_references)


def _held(found: Counter[Term], text: str, finder: TermFinder) -> int:
    """How many of the `found` occurrences `text` holds the target term of."""
    exact, folded = finder.words(text, True), finder.words(text, False)
    return sum(
        min(count, _count(finder.words(term.target, term.match_case), exact if term.match_case else folded))
        for term, count in found.items()
    )


def _count(term: list[str], words: list[str]) -> int:
    """Occurrences of the word sequence `term` in `words`, none overlapping."""
    count, at, size = 0, 0, len(term)
    while at + size <= len(words):
        if words[at : at + size] == term:
            count, at = count + 1, at + size
        else:
            at += 1
    return count
