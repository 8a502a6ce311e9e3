"""Whitespace words encoded one by one: each subword of a sentence belongs to one word by construction.

Word alignments index the whitespace words of a line; models see sentencepiece subwords. `encode_words`
encodes every word of a sentence on its own and keeps the ids, so the joined text is never tokenized again
(a word's pieces are those of the whole sentence: sentencepiece splits at whitespace first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nmt.data.tokenizer import SPACER, Tokenizer


@dataclass(frozen=True)
class WordPieces:
    """One sentence's subword ids, word after word, and the word (from 0) of each subword."""

    ids: list[int]
    words: list[int]  # len(ids) entries, non-decreasing
    count: int  # whitespace words in the sentence (a word sentencepiece drops entirely has no subword)


def encode_words(tokenizer: Tokenizer, sentences: Sequence[str]) -> list[WordPieces]:
    """Each sentence split at whitespace and every word encoded on its own, in one batch."""
    split = [sentence.split() for sentence in sentences]
    encoded = iter(tokenizer.encode([word for words in split for word in words]))
    found = []
    for words in split:
        pieces = [next(encoded) for _ in words]
        ids = [i for piece in pieces for i in piece]
        owner = [word for word, piece in enumerate(pieces) for _ in piece]
        found.append(WordPieces(ids, owner, len(words)))
    return found


def source_words(tokenizer: Tokenizer, ids: Sequence[int]) -> list[int | None]:
    """The whitespace word (from 0) of a text each of its subwords `ids` (encoded as a whole) belongs to: a
    piece with sentencepiece's spacer starts a word, and so does the first piece; a control piece (a language
    tag) belongs to none."""
    word = -1
    found: list[int | None] = []
    for i, piece in zip(ids, tokenizer.pieces(list(ids)), strict=True):
        if tokenizer.is_control(i):
            found.append(None)
            continue
        if word < 0 or piece.startswith(SPACER):
            word += 1
        found.append(word)
    return found


def output_words(tokenizer: Tokenizer, ids: Sequence[int]) -> list[int | None]:
    """The whitespace word (from 0) of the decoded text (`Tokenizer.decode`) each id falls in: the word of
    the first visible character of its surface, or, for a surface of spaces alone (a lone spacer), the word
    that follows; None for what decodes to nothing after the last word. An unknown piece inside a word decodes
    to ' ⁇ ', a word of its own, as the text shows it."""
    found: list[int | None] = []
    waiting = 0  # pieces of spaces alone, waiting for the next word
    word, inside = -1, False
    for surface in tokenizer.surfaces([i for i in ids if i not in tokenizer.specials]):
        first = None
        for char in surface:
            if char.isspace():
                inside = False
            elif not inside:
                word, inside = word + 1, True
                first = word if first is None else first
            elif first is None:
                first = word
        if first is None:
            waiting += 1
            continue
        found += [first] * (waiting + 1)
        waiting = 0
    found += [None] * waiting
    rest = iter(found)  # the words of the ids other than the specials, None put back at theirs
    return [None if i in tokenizer.specials else next(rest) for i in ids]
