"""Subwords ↔ words: which whitespace word of a sentence each sentencepiece subword belongs to.

Word alignments index the whitespace words of a line; models see sentencepiece subwords. `encode_words`
encodes every word of a sentence on its own and keeps the ids, so that each subword belongs to exactly one
word by construction (the joined text is never tokenized again). For ids already encoded as whole sentences
(the training cache), `word_starts` reads the same map from sentencepiece's spacer: a piece that begins with
`▁` begins a word.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nmt.align.pharaoh import Link
from nmt.data.tokenizer import Tokenizer

SPACER = "▁"  # sentencepiece's mark of a word's first piece
Words = Sequence[int] | np.ndarray  # the word of each subword of a sentence


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


def word_starts(tokenizer: Tokenizer) -> np.ndarray:
    """For every id of the vocabulary, whether its piece begins a word (bool, (vocab,))."""
    sp = tokenizer.sp
    return np.array([sp.id_to_piece(i).startswith(SPACER) for i in range(len(tokenizer))], dtype=bool)


def words_of(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The word (from 0) of each subword of a sentence encoded as a whole, from the `word_starts` table: a
    piece with the spacer starts the next word, and the first piece is in word 0 whatever it is (int64,
    (len(ids),))."""
    begins = starts[ids]
    if len(begins):
        begins[0] = True
    return np.cumsum(begins) - 1


def subword_links(links: Sequence[Link], src_words: Words, tgt_words: Words) -> list[Link]:
    """Word links as subword links: every subword of source word i with every subword of target word j, for
    each link (i, j); `src_words`/`tgt_words` give each subword's word. Sorted, (source, target) positions."""
    src_of = _positions(src_words)
    tgt_of = _positions(tgt_words)
    pairs = {pair for i, j in links for pair in itertools.product(src_of.get(i, ()), tgt_of.get(j, ()))}
    return sorted(pairs)


def _positions(words: Words) -> dict[int, list[int]]:
    """Each word's subword positions."""
    found: dict[int, list[int]] = {}
    for position, word in enumerate(words):
        found.setdefault(int(word), []).append(position)
    return found
