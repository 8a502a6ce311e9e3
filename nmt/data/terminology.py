"""Terms written into the source between markers (Dinu et al. 2019; OpenNMT-py's terminology
transform): `in ｟term｠ Berlin ｟trans｠ Berlin ｟/term｠ wohnen`. Training annotates word-aligned pairs (the
model learns to copy what follows `｟trans｠`); translating annotates a glossary's terms the same way, so any
engine that reads the source text (torch, a CTranslate2 or Argos export) honours them unchanged.

A training pair's candidate terms are the smallest groups of linked words closed under their links (the
connected parts of its alignment) whose source words and target words are each contiguous, at most
`max_words` on a side; leading and trailing punctuation stays outside the markers, and a group without a
letter or digit is no term. A pair is annotated with chance `probability`, with 1 to `max_terms` of its
candidates drawn at random; the draw of each line of the split depends only on the seed, the direction and
the line (not on chunking or order).
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from nmt.config.multilingual import Direction
from nmt.config.terminology import TerminologyConfig
from nmt.data.corpus import Pairs
from nmt.data.glossary import TermFinder

Link = tuple[int, int]  # (source word, target word), from 0, as nmt/align/pharaoh.py reads them


class TermLinks(Protocol):
    """Where each direction's word links come from (nmt/train/term_links.py: a given file, or eflomal's):
    what the data cache knows them by, and the links, one set a line of the direction's training file, each
    checked to fit its pair."""

    def identity(self, direction: Direction) -> dict[str, Any]: ...

    def read(self, direction: Direction) -> Sequence[frozenset[Link]]: ...


_CORE = re.compile(r"\w(?:.*\w)?", re.DOTALL)  # from the first letter or digit to the last


@dataclass(frozen=True)
class Annotation:
    """Characters `start`:`end` of a source text are a term translated as `target`."""

    start: int
    end: int
    target: str


def annotate(text: str, annotations: Sequence[Annotation], markers: tuple[str, str, str]) -> str:
    """`text` with each term followed by its translation between `markers` (start, translation, end);
    annotations do not overlap. No annotation: `text` itself."""
    term_start, translation, term_end = markers
    parts, done = [], 0
    for found in sorted(annotations, key=lambda a: a.start):
        parts += [text[done : found.start], f"{term_start} {text[found.start : found.end]} "]
        parts.append(f"{translation} {found.target} {term_end}")
        done = found.end
    return "".join([*parts, text[done:]])


@dataclass(frozen=True)
class AnnotatedLine:
    """A line with terms written in: its text, and for each of its white-space words the words of the line it
    stands for (a marker: none; a written-in target term: the words of its source term)."""

    text: str
    origins: list[tuple[int, ...]]

    def plain_links(self, links: Sequence[Link]) -> list[Link]:
        """Word links (annotated word, output word) as links of the line's own words, each once, sorted."""
        found = {(i, j) for a, j in links if a < len(self.origins) for i in self.origins[a]}
        return sorted(found)


def annotated_line(
    line: str, annotations: Sequence[Annotation], markers: tuple[str, str, str]
) -> AnnotatedLine:
    """`line` annotated as `annotate` writes it, with where each of its words comes from."""
    at = [-1] * len(line)  # the word each character of the line is part of (-1: white space)
    for i, word in enumerate(re.finditer(r"\S+", line)):
        at[word.start() : word.end()] = [i] * (word.end() - word.start())
    text = annotate(line, annotations, markers)
    sources: list[frozenset[int]] = []  # per character of the annotated text, the line's words it stands for
    done = 0
    for found in sorted(annotations, key=lambda a: a.start):
        term = frozenset(at[found.start : found.end]) - {-1}
        sources += [frozenset({at[c]}) for c in range(done, found.start)]
        sources += [frozenset()] * (len(markers[0]) + 1)
        sources += [frozenset({at[c]}) for c in range(found.start, found.end)]
        sources += [frozenset()] * (1 + len(markers[1]) + 1)
        sources += [term] * len(found.target)
        sources += [frozenset()] * (1 + len(markers[2]))
        done = found.end
    sources += [frozenset({at[c]}) for c in range(done, len(line))]
    origins = [
        tuple(sorted(frozenset().union(*sources[word.start() : word.end()]) - {-1}))
        for word in re.finditer(r"\S+", text)
    ]
    return AnnotatedLine(text, origins)


def glossary_annotations(text: str, finder: TermFinder) -> list[Annotation]:
    """The glossary terms `finder` finds in `text`, as annotations."""
    return [Annotation(match.start, match.end, match.term.target) for match in finder.find(text)]


def with_glossary_terms(text: str, finder: TermFinder, markers: tuple[str, str, str]) -> str:
    """`text` with the glossary terms `finder` finds written in, line by line (a term never spans lines)."""
    lines = text.split("\n")
    return "\n".join(annotate(line, glossary_annotations(line, finder), markers) for line in lines)


@dataclass(frozen=True)
class TermWriter:
    """Writes the glossary terms `finder` finds into lines, between `markers`."""

    finder: TermFinder
    markers: tuple[str, str, str]

    def line(self, line: str, boundaries: Collection[int] = ()) -> AnnotatedLine:
        """`line` with its terms written in, but a term that one of `boundaries` (characters of the line where
        markup begins or ends: an HTML tag) falls inside, which is left as it is: a term stays inside its
        tags."""
        found = [
            annotation
            for annotation in glossary_annotations(line, self.finder)
            if not any(annotation.start < at < annotation.end for at in boundaries)
        ]
        return annotated_line(line, found, self.markers)


def candidate_terms(src: str, tgt: str, links: Sequence[Link], max_words: int) -> list[Annotation]:
    """The terms a pair of whitespace-tokenized sentences offers (see the module), in source order."""
    src_words = [word.span() for word in re.finditer(r"\S+", src)]
    tgt_words = [word.span() for word in re.finditer(r"\S+", tgt)]
    found = []
    for sources, targets in _linked_groups(links):
        if not (_contiguous(sources, max_words) and _contiguous(targets, max_words)):
            continue
        source = _core(src, src_words[min(sources)][0], src_words[max(sources)][1])
        target = _core(tgt, tgt_words[min(targets)][0], tgt_words[max(targets)][1])
        if source is not None and target is not None:
            found.append(Annotation(*source, tgt[target[0] : target[1]]))
    return sorted(found, key=lambda a: a.start)


def _linked_groups(links: Sequence[Link]) -> list[tuple[set[int], set[int]]]:
    """The connected parts of an alignment: (source words, target words) linked together."""
    groups: list[tuple[set[int], set[int]]] = []
    for i, j in sorted(links):
        joined = [g for g in groups if i in g[0] or j in g[1]]
        merged = ({i}, {j})
        for group in joined:
            merged[0].update(group[0])
            merged[1].update(group[1])
            groups.remove(group)
        groups.append(merged)
    return groups


def _contiguous(words: set[int], max_words: int) -> bool:
    return len(words) <= max_words and max(words) - min(words) + 1 == len(words)


def _core(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Characters `start`:`end` of `text` without their leading and trailing punctuation; None when they hold
    no letter or digit."""
    match = _CORE.search(text, start, end)
    return None if match is None else match.span()


def annotate_pair(
    src: str, tgt: str, links: Sequence[Link], cfg: TerminologyConfig, rng: random.Random
) -> str:
    """The source of a training pair, annotated (see the module) with the draws of `rng`."""
    if rng.random() >= cfg.probability:
        return src
    candidates = candidate_terms(src, tgt, links, cfg.max_words)
    if not candidates:
        return src
    chosen = rng.sample(candidates, rng.randint(1, min(cfg.max_terms, len(candidates))))
    return annotate(src, chosen, cfg.markers)


def annotated_chunks(
    chunks: Iterator[Pairs],
    links: Sequence[frozenset[Link]],
    cfg: TerminologyConfig,
    seed: int,
    direction: str,
) -> Iterator[Pairs]:
    """The chunks of a direction's training pairs with their sources annotated; `links` holds every line's
    links (a line of the split: `Pairs.numbers`), checked to fit their pairs."""
    for pairs in chunks:
        sources = []
        for src, tgt, line in zip(pairs.src, pairs.tgt, pairs.numbers, strict=True):
            rng = random.Random(f"{seed} {direction} {line}")
            sources.append(annotate_pair(src, tgt, sorted(links[line]), cfg, rng))
        yield replace(pairs, src=sources)
