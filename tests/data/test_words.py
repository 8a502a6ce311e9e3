"""Words and their subwords: text encoded word by word agrees with the sentence encoded whole; each subword's
word in a source (the spacer's) and in an output (the decoded text's), worked out by hand."""

import numpy as np
import pytest

from nmt.align.subwords import word_starts, words_of
from nmt.config.sections import TokenizerConfig
from nmt.data.synthetic import reordering_pairs
from nmt.data.tokenizer import Tokenizer, Tokenizers
from nmt.data.tokenizer_training import train_tokenizers
from nmt.data.words import encode_words, output_words, source_words


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> Tokenizers:
    """A joint BPE vocabulary too small for whole words: most words are several subwords."""
    src, tgt = reordering_pairs(300, 40, 2, 8, seed=1)
    return train_tokenizers(TokenizerConfig(vocab_size=120), src, tgt, tmp_path_factory.mktemp("spm"))


def ids(tokenizer: Tokenizer, *pieces: str) -> list[int]:
    found = [tokenizer.sp.piece_to_id(piece) for piece in pieces]
    assert [tokenizer.sp.id_to_piece(i) for i in found] == list(pieces)  # each piece is in the vocabulary
    return found


def test_words_encoded_one_by_one_are_the_sentence_encoded_whole(tokenizers: Tokenizers) -> None:
    sentences = [*reordering_pairs(20, 40, 2, 8, seed=7)[0], "kamisu , lote .", "  lote   kamisu  "]
    starts = word_starts(tokenizers.src)
    for sentence, pieces in zip(sentences, encode_words(tokenizers.src, sentences), strict=True):
        assert pieces.ids == tokenizers.src.encode([sentence])[0]  # the model sees the same ids
        assert pieces.count == len(sentence.split())
        assert pieces.words == words_of(np.array(pieces.ids), starts).tolist()  # and the spacer agrees
        assert pieces.words == source_words(tokenizers.src, pieces.ids)
        assert sorted(set(pieces.words)) == list(range(pieces.count))
    assert any(len(p.ids) > p.count for p in encode_words(tokenizers.src, sentences))  # words were split


def test_a_source_subword_belongs_to_the_word_its_spacer_starts(tokenizers: Tokenizers) -> None:
    src = tokenizers.src
    # "dosu ⁇su fe": an unknown character inside a word stays in it, as the source line has it
    assert source_words(src, ids(src, "▁do", "su", "▁", "<unk>", "su", "▁fe")) == [0, 0, 1, 1, 1, 2]
    assert source_words(src, ids(src, "su", "▁do")) == [0, 1]  # the first piece starts a word, spacer or not
    assert source_words(src, ids(src, "</s>", "▁do", "su")) == [None, 0, 0]  # a control piece is in none
    assert source_words(src, []) == []


def test_an_output_subword_belongs_to_its_word_of_the_decoded_text(tokenizers: Tokenizers) -> None:
    tgt = tokenizers.tgt
    pieces = ids(tgt, "▁do", "su", "▁", "<unk>", "su", "▁fe", "</s>")
    assert tgt.decode([pieces])[0].split() == ["dosu", "⁇", "su", "fe"]  # the unknown piece: a word
    # the lone spacer belongs to the word after it, eos to none
    assert output_words(tgt, pieces) == [0, 0, 1, 1, 2, 3, None]
    inside = ids(tgt, "▁do", "<unk>", "su", "▁")  # "do ⁇ su": three words where the source has one
    assert tgt.decode([inside])[0].split() == ["do", "⁇", "su"]
    assert output_words(tgt, inside) == [0, 1, 2, None]  # a spacer after the last word: in none
    assert output_words(tgt, []) == []
