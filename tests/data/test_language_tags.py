"""Target-language tags: one reserved piece each, inserted as ids; a tag typed in a sentence is text."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config.sections import TokenizerConfig
from nmt.data.language_tags import LanguageTags, tag_piece
from nmt.data.special_tokens import UNK
from nmt.data.tokenizer import Tokenizer
from nmt.data.tokenizer_training import train_sentencepiece
from nmt.errors import UserError
from tests.synthetic import multilingual_sentences

LANGUAGES = ("xa", "xb", "xc")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    texts = multilingual_sentences(500, len(LANGUAGES), vocab=40, min_len=3, max_len=6, seed=3)
    sentences = [sentence for text in texts for sentence in text] + ["a < b and c > d"]
    path = tmp_path_factory.mktemp("tags") / "spm.model"
    train_sentencepiece(TokenizerConfig(vocab_size=200), sentences, path, LANGUAGES)
    return Tokenizer(path)


def test_each_language_has_one_piece_with_an_id_of_its_own(tokenizer: Tokenizer) -> None:
    assert tokenizer.tag_ids == {"xa": 4, "xb": 5, "xc": 6}  # right after pad, unk, bos, eos
    assert tokenizer.pieces([4, 5, 6]) == [">>xa<<", ">>xb<<", ">>xc<<"]
    assert len(tokenizer) == 200  # the tags count within the vocabulary size


def test_a_tag_typed_in_a_sentence_is_text(tokenizer: Tokenizer) -> None:
    """sentencepiece's user_defined_symbols would make it the tag's id wherever it is typed; a control
    symbol never comes out of text."""
    tag_ids = {tokenizer.sp.piece_to_id(tag_piece(lang)) for lang in LANGUAGES}
    assert tag_ids == {4, 5, 6}
    for text in [">>xb<< kalo", "kalo >>xb<< mi", "kalo>>xb<<mi"]:
        (ids,) = tokenizer.encode([text])
        assert not set(ids) & tag_ids, (text, tokenizer.pieces(ids))
        assert len(ids) > 3
    assert tokenizer.pieces(tokenizer.encode(["<"])[0])[-1] == "<" and UNK not in tokenizer.encode(["< >"])[0]


def test_decoding_drops_a_tag_id(tokenizer: Tokenizer) -> None:
    (ids,) = tokenizer.encode(["kalo mi"])
    assert tokenizer.decode([[tokenizer.tag_ids["xb"], *ids]]) == tokenizer.decode([ids])


def test_encoder_tags_go_first_in_the_source(tokenizer: Tokenizer) -> None:
    tags = LanguageTags(tokenizer.tag_ids)
    (ids,) = tokenizer.encode(["kalo mi"])
    assert tags.source(ids, "xb") == [5, *ids] and tags.target(ids, "xb") == ids
    assert tags.forced_prefix("xb") == [] and tags.banned == [4, 5, 6]


def test_decoder_tags_are_the_first_target_token(tokenizer: Tokenizer) -> None:
    tags = LanguageTags(tokenizer.tag_ids, "decoder")
    (ids,) = tokenizer.encode(["kalo mi"])
    assert tags.source(ids, "xc") == ids and tags.target(ids, "xc") == [6, *ids]
    assert tags.forced_prefix("xc") == [6]


def test_a_language_without_a_tag_is_a_user_error(tokenizer: Tokenizer) -> None:
    with pytest.raises(UserError, match="no tag for language 'fr' \\(its tags: xa, xb, xc\\)"):
        LanguageTags(tokenizer.tag_ids).source([7], "fr")


def test_a_bilingual_vocabulary_has_no_tags(tmp_path: Path) -> None:
    path = tmp_path / "spm.model"
    train_sentencepiece(TokenizerConfig(vocab_size=100), multilingual_sentences(200, 1, 30, 3, 6, 1)[0], path)
    assert Tokenizer(path).tag_ids == {}
    assert tag_piece("de") == ">>de<<"
