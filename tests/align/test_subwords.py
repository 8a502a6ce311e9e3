"""Subword ↔ word maps: hand-worked cases, and words encoded one by one agreeing with whole sentences."""

import numpy as np
import pytest

from nmt.align.subwords import encode_words, subword_links, word_starts, words_of
from nmt.config.sections import TokenizerConfig
from nmt.data.synthetic import reordering_pairs
from nmt.data.tokenizer import Tokenizers, train_tokenizers


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> Tokenizers:
    """A joint BPE vocabulary too small for whole words: most words are several subwords."""
    src, tgt = reordering_pairs(300, 40, 2, 8, seed=1)
    return train_tokenizers(TokenizerConfig(vocab_size=120), src, tgt, tmp_path_factory.mktemp("spm"))


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


def test_words_encoded_one_by_one_are_the_sentence_encoded_whole(tokenizers: Tokenizers) -> None:
    sentences = [*reordering_pairs(20, 40, 2, 8, seed=7)[0], "kamisu , lote .", "  lote   kamisu  "]
    starts = word_starts(tokenizers.src)
    for sentence, pieces in zip(sentences, encode_words(tokenizers.src, sentences), strict=True):
        assert pieces.ids == tokenizers.src.encode([sentence])[0]  # the model sees the same ids
        assert pieces.count == len(sentence.split())
        assert pieces.words == words_of(np.array(pieces.ids), starts).tolist()  # and the spacer agrees
        assert sorted(set(pieces.words)) == list(range(pieces.count))
    assert any(len(p.ids) > p.count for p in encode_words(tokenizers.src, sentences))  # words were split
