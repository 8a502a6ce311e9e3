"""Subword ↔ word maps: hand-worked cases."""

import numpy as np

from nmt.align.subwords import attended_links, subword_links, words_of


def test_words_of_spacer_marked_pieces() -> None:
    pieces = ["▁the", "▁ca", "t", "▁", ",", "▁sat"]  # a lone spacer before punctuation starts a word
    starts = np.array([piece.startswith("▁") for piece in pieces])
    assert words_of(np.arange(6), starts).tolist() == [0, 1, 1, 2, 2, 3]
    assert words_of(np.array([1, 2, 5]), starts).tolist() == [0, 0, 1]  # a first piece without spacer: word 0
    assert words_of(np.array([], dtype=np.int64), starts).tolist() == []


def test_subword_links_join_every_subword_pair() -> None:
    # source words [0, 0, 1] (word 0 in two pieces), target words [0, 1, 1]
    assert subword_links([(0, 1)], [0, 0, 1], [0, 1, 1]) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert subword_links([(1, 0), (0, 0)], [0, 0, 1], [0, 1, 1]) == [(0, 0), (1, 0), (2, 0)]
    assert subword_links([(5, 0)], [0, 0, 1], [0, 1, 1]) == []  # a word without subwords links nothing


def test_attended_links_merge_subwords_into_words() -> None:
    # source subwords in words [0, 0, 1] and a language tag (in no word); output subwords in words [0, 1, 1]
    # and eos; output subword t attended most to source subword attended[t]
    src_words, tgt_words = [None, 0, 0, 1], [0, 1, 1, None]
    assert attended_links([1, 3, 2, 1], src_words, tgt_words) == [(0, 0), (0, 1), (1, 1)]
    assert attended_links([0, 0], src_words, tgt_words) == []  # the tag links nothing
    assert attended_links([], src_words, []) == []
