"""Running text through a model trained on sentences: what every path that takes paragraphs does (`nmt
translate --split-sentences` and `--format html`, the server's /translate, /translate_file, /v1/translate).

Each paragraph (a line of a text, a block of an HTML page) is split into its sentences by the source
language's rules (nmt/data/sentences.py). A sentence longer than the model takes is split at its clauses
(after , ; : or around a dash, before white space), a clause longer still between its words, and a word
longer still is cut to the model's limit, the cut stated: CUT_MARK follows its translation, and the
paragraph's `cut` holds it. Translated whole (without splitting), a paragraph over the limit is cut and
marked alike: the one policy of every path for a source longer than the model takes. The pieces of every
paragraph are translated in one batch by the caller, and each paragraph's translation is its pieces'
translations joined by the white space that separated them in the paragraph (`Segmented.translations`): its
hypothesis of rank r joins each piece's r-th (or last), its score is their mean, its word links are theirs
moved onto the paragraph's words.

The guard: each paragraph's sentences are counted in the source and, piece by piece, in its best translation
(by the target language's rules); a translation with fewer has dropped a sentence (`TranslatedParagraph.
dropped`).

    segmented = segment(paragraphs, translator, split=True)
    found = translator.translated(segmented.texts)   # or searched in one batch with other requests' pieces
    paragraphs = segmented.translations(found, translator.target)

which `translate_paragraphs` does for a translator (or a pivot of two).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from nmt.data.sentences import Span, announce, sentence_spans
from nmt.decode.decoded import DecodedHypothesis, DecodedLine
from nmt.decode.languages import Translates

CUT_MARK = "[…]"  # after the translation of a piece cut to the model's limit: the rest was not translated
WORD = re.compile(r"\S+")
CLAUSE_END = re.compile(r"[,;:](?=\s)|(?<=\s)[–—](?=\s)")  # a clause ends after it


class Encodes(Protocol):
    """What a paragraph is fitted to: a translator's source language ("" where not known), its source ids of
    texts and the longest source it takes."""

    @property
    def source(self) -> str: ...

    @property
    def max_source_len(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> list[list[int]]: ...


@dataclass(frozen=True)
class Paragraph:
    """A paragraph as it is translated: its text, its pieces (character spans, in order: its sentences, a
    sentence longer than the model takes in parts; a blank paragraph's one empty piece), how many sentences
    it holds and which pieces are cut to the model's limit (with their subwords)."""

    text: str
    pieces: list[Span]
    sentences: int
    cut: dict[int, int]  # piece (in the paragraph) → its subwords, where over the limit


@dataclass(frozen=True)
class TranslatedParagraph:
    """One paragraph's translation: its pieces' hypotheses joined (`joined`), each piece's own (`pieces`),
    the sentences of the source and of the best translation, and each piece cut to the model's limit as
    (its subwords, those translated)."""

    joined: DecodedLine
    pieces: list[DecodedLine]
    source_sentences: int
    translated_sentences: int
    cut: list[tuple[int, int]]

    @property
    def dropped(self) -> int:
        """The sentences the best translation lacks."""
        return max(0, self.source_sentences - self.translated_sentences)


@dataclass(frozen=True)
class Segmented:
    """Paragraphs split into the pieces to translate: the paragraphs, each piece's source ids (paragraph
    after paragraph) and the model's longest source."""

    paragraphs: list[Paragraph]
    sources: list[list[int]]
    limit: int

    @property
    def texts(self) -> list[str]:
        """Each piece's text."""
        return [p.text[start:end] for p in self.paragraphs for start, end in p.pieces]

    def translations(self, found: Sequence[DecodedLine], target: str) -> list[TranslatedParagraph]:
        """Each paragraph's translation, from each piece's (`found`, in order); sentences counted by the rules
        of `target`."""
        pieces = iter(found)
        translated = []
        for paragraph in self.paragraphs:
            own = [next(pieces) for _ in paragraph.pieces]
            counted = sum(len(sentence_spans(piece.best.text, target)) for piece in own)
            cut = [(subwords, self.limit) for subwords in paragraph.cut.values()]
            joined = _joined(paragraph, own)
            translated.append(TranslatedParagraph(joined, own, paragraph.sentences, counted, cut))
        return translated


def translate_paragraphs(
    translator: Translates, paragraphs: Sequence[str], split: bool, alignments: bool = False
) -> list[TranslatedParagraph]:
    """Each paragraph translated by `translator` (with its word links when `alignments`): with `split`,
    sentence by sentence (`segment`)."""
    segmented = segment(paragraphs, translator, split)
    return segmented.translations(translator.translated(segmented.texts, alignments), translator.target)


def segment(paragraphs: Sequence[str], translator: Encodes, split: bool) -> Segmented:
    """`paragraphs` as pieces to translate, in the language of the translator's source: with `split`, their
    sentences, one longer than the model takes in parts that fit where it can be; else each paragraph whole
    (white space around it left out). A blank paragraph is one empty piece."""
    if split:
        announce(translator.source)
    spans = [sentence_spans(text, translator.source) for text in paragraphs]
    wholes = spans if split else [[(own[0][0], own[-1][1])] if own else [] for own in spans]
    pieces = [own or [(0, 0)] for own in wholes]
    sources = translator.encode(
        [text[a:b] for text, own in zip(paragraphs, pieces, strict=True) for a, b in own]
    )
    limit = translator.max_source_len
    if split and any(len(ids) > limit for ids in sources):
        pieces, sources = _fitted(paragraphs, pieces, sources, translator)
    found, at = [], 0
    for text, own, sentences in zip(paragraphs, pieces, spans, strict=True):
        lengths = [len(ids) for ids in sources[at : at + len(own)]]
        cut = {i: n for i, n in enumerate(lengths) if n > limit}
        found.append(Paragraph(text, own, len(sentences), cut))
        at += len(own)
    return Segmented(found, sources, limit)


def _fitted(
    paragraphs: Sequence[str], pieces: list[list[Span]], sources: list[list[int]], translator: Encodes
) -> tuple[list[list[Span]], list[list[int]]]:
    """The pieces with each one over the translator's limit split into parts that fit (`_fit`), and the
    source ids of all."""
    limit, overhead = translator.max_source_len, len(translator.encode([""])[0])
    ids = iter(sources)
    fitted_pieces, fitted_sources = [], []
    for text, own in zip(paragraphs, pieces, strict=True):
        fitted: list[Span] = []
        for span in own:
            found = next(ids)
            if len(found) <= limit:
                fitted.append(span)
                fitted_sources.append(found)
                continue
            parts = _fit(text, span, len(found), 0, translator.encode, limit, overhead)
            fitted += parts
            fitted_sources += translator.encode([text[a:b] for a, b in parts])
        fitted_pieces.append(fitted)
    return fitted_pieces, fitted_sources


def _clauses(text: str, span: Span) -> list[Span]:
    """The clauses of `text[span]`: split after each CLAUSE_END, the white space left out."""
    start, end = span
    cuts = [m.end() for m in CLAUSE_END.finditer(text, start, end)]
    return _trimmed(text, list(zip([start, *cuts], [*cuts, end], strict=True)))


def _words(text: str, span: Span) -> list[Span]:
    return [m.span() for m in WORD.finditer(text, *span)]


def _trimmed(text: str, spans: list[Span]) -> list[Span]:
    """Each span without the white space around it; spans of white space alone left out."""
    found = []
    for start, end in spans:
        piece = text[start:end]
        if piece.strip():
            found.append((start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())))
    return found


LEVELS = (_clauses, _words)  # how a piece over the limit is split, in turn


def _fit(
    text: str,
    span: Span,
    length: int,
    level: int,
    encode: Callable[[Sequence[str]], list[list[int]]],
    limit: int,
    overhead: int,
) -> list[Span]:
    """`span` (of `length` source ids) as pieces of at most `limit` ids where it can be: split into its parts
    of LEVELS[level], consecutive parts joined while they fit (a sentencepiece text's ids are its words'
    ids, so lengths add up, less the `overhead` each text carries: a language tag); a part over the limit
    alone is split at the next level. What no level splits stays whole, and the translator cuts it."""
    if length <= limit or level == len(LEVELS):
        return [span]
    parts = LEVELS[level](text, span)
    lengths = [len(ids) - overhead for ids in encode([text[a:b] for a, b in parts])]
    pieces: list[Span] = []
    group: list[int] = []

    def close() -> None:
        if len(group) == 1 and lengths[group[0]] + overhead > limit:
            only = group[0]
            pieces.extend(
                _fit(text, parts[only], lengths[only] + overhead, level + 1, encode, limit, overhead)
            )
        else:
            pieces.append((parts[group[0]][0], parts[group[-1]][1]))

    for i, part in enumerate(lengths):
        if group and overhead + sum(lengths[j] for j in group) + part > limit:
            close()
            group = []
        group.append(i)
    close()
    return pieces


def _least_sure(hypotheses: list[DecodedHypothesis]) -> float | None:
    """The lowest mean log-probability of `hypotheses` (None where none is known)."""
    return min((h.mean_log_prob for h in hypotheses if h.mean_log_prob is not None), default=None)


def _unmet_terms(hypotheses: list[DecodedHypothesis]) -> tuple[str, ...] | None:
    """The glossary terms the pieces' `hypotheses` lack, piece after piece (None: searched without terms)."""
    if all(h.unmet_terms is None for h in hypotheses):
        return None
    return tuple(term for h in hypotheses for term in h.unmet_terms or ())


def _joined(paragraph: Paragraph, found: list[DecodedLine]) -> DecodedLine:
    """The paragraph's translation: for each rank, its pieces' hypotheses joined by the paragraph's own white
    space between them, a cut piece's followed by CUT_MARK; its confidence its least sure piece's mean
    log-probability and every reason any piece is suspect."""
    if len(found) == 1 and not paragraph.cut:
        return found[0]
    ranks = max(len(piece.hypotheses) for piece in found)
    words_before = [len(paragraph.text[:start].split()) for start, _ in paragraph.pieces]
    hypotheses = []
    for rank in range(ranks):
        chosen = [piece.hypotheses[min(rank, len(piece.hypotheses) - 1)] for piece in found]
        text, links, written = "", [], 0
        for i, (hypothesis, (start, _)) in enumerate(zip(chosen, paragraph.pieces, strict=True)):
            gap = paragraph.text[paragraph.pieces[i - 1][1] : start] if i else ""
            shown = f"{hypothesis.text} {CUT_MARK}" if i in paragraph.cut else hypothesis.text
            text += gap + shown
            links += [(s + words_before[i], t + written) for s, t in hypothesis.alignment or []]
            written += len(shown.split())
        aligned = any(h.alignment is not None for h in chosen)
        hypotheses.append(
            DecodedHypothesis(
                text,
                sum(h.score for h in chosen) / len(chosen),
                [token for h in chosen for token in h.tokens],
                [*(piece for h in chosen for piece in h.pieces if piece != "</s>"), "</s>"],
                alignment=links if aligned else None,
                mean_log_prob=min(
                    (h.mean_log_prob for h in chosen if h.mean_log_prob is not None), default=None
                ),
                suspect=tuple(sorted({reason for h in chosen for reason in h.suspect})),
                unmet_terms=_unmet_terms(chosen),
            )
        )
    source = [piece for p in found for piece in p.source_pieces if piece != "</s>"]
    return DecodedLine([*source, "</s>"], hypotheses)
