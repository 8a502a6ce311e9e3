"""Subwords ↔ words: which whitespace word of a sentence each sentencepiece subword belongs to.

Word alignments index the whitespace words of a line; models see sentencepiece subwords. Text to align is
encoded word by word (nmt/data/words.py `encode_words`, through the Translator), so each subword belongs to
one word by construction. For ids encoded as whole sentences in the training cache, `word_starts` reads the
same map from sentencepiece's spacer, a table for the whole vocabulary: a piece that begins with `▁` begins a
word. A translation's source and output map their words one sentence at a time (nmt/data/words.py
`source_words`, which also leaves language tags out, and `output_words`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from nmt.align.pharaoh import Link
from nmt.data.tokenizer import SPACER, Tokenizer

Words = Sequence[int] | np.ndarray  # the word of each subword of a sentence


def word_starts(tokenizer: Tokenizer) -> np.ndarray:
    """For every id of the vocabulary, whether its piece begins a word (bool, (vocab,))."""
    pieces = tokenizer.pieces(list(range(len(tokenizer))))
    return np.array([piece.startswith(SPACER) for piece in pieces], dtype=bool)


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


def attended_links(
    attended: Sequence[int | None], src_words: Sequence[int | None], tgt_words: Sequence[int | None]
) -> list[Link]:
    """Word links of a translation, sorted: output subword t and the source subword `attended[t]` it attended
    most (None: none, the null slot's), as (source word, output word), where both belong to a word
    (`src_words`/`tgt_words`: each subword's word, None for none)."""
    pairs = {(src_words[s], tgt_words[t]) for t, s in enumerate(attended) if s is not None}
    return sorted((i, j) for i, j in pairs if i is not None and j is not None)
