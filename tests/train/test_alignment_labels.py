"""Guided alignment's labels: word links of the training split follow the pairs that encoding keeps, as the
subwords of each word, into the batches; links that do not fit the corpus are one-line errors."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from nmt.align.subwords import subword_links
from nmt.config.schema import Config
from nmt.config.yaml_file import load_config
from nmt.data.arrays import EncodedCorpus
from nmt.data.batching import iterate_batches
from nmt.data.prepare import PreparedData, prepare_data
from nmt.data.synthetic import reordering_pairs
from nmt.data.words import encode_words
from nmt.errors import UserError
from nmt.train.alignment_labels import with_training_links
from tests.conftest import ROOT

EMPTY, LONG = 2, 6  # lines (from 0) that encoding drops: an empty target, a pair over data.max_len


def reversal(sentence: str) -> list[tuple[int, int]]:
    """The true links of the reordering task: source word i is target word n-1-i."""
    n = len(sentence.split())
    return [(i, n - 1 - i) for i in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("labelled")
    src, tgt = reordering_pairs(40, 30, 2, 6, seed=5)
    tgt[EMPTY] = ""
    src[LONG], tgt[LONG] = " ".join([src[LONG]] * 12), " ".join([tgt[LONG]] * 12)
    for split, (s, t) in {"train": (src, tgt), "valid": (src[:5], tgt[:5])}.items():
        (folder / f"{split}.src").write_text("\n".join(s) + "\n")
        (folder / f"{split}.tgt").write_text("\n".join(t) + "\n")
    links = [
        "" if not t else " ".join(f"{i}-{j}" for i, j in reversal(s)) for s, t in zip(src, tgt, strict=True)
    ]
    (folder / "train.links").write_text("\n".join(links) + "\n")
    return folder


def config(corpus: Path) -> Config:
    settings = [f"data.dir={corpus}", "tokenizer.vocab_size=80", "data.max_len=30"]
    return load_config(ROOT / "configs" / "tiny-transformer.yaml", settings)


@pytest.fixture(scope="module")
def prepared(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[PreparedData, Path]:
    cache = tmp_path_factory.mktemp("cache")
    return prepare_data(config(corpus), tmp_path_factory.mktemp("run"), False, cache), cache


def labelled(prepared: tuple[PreparedData, Path], corpus: Path, links: Path) -> EncodedCorpus:
    data, cache = prepared
    return with_training_links(data.train, data.tokenizers, config(corpus).data, links, cache)


def test_links_follow_the_pairs_encoding_keeps(corpus: Path, prepared: tuple[PreparedData, Path]) -> None:
    train = labelled(prepared, corpus, corpus / "train.links")
    src_lines = (corpus / "train.src").read_text().splitlines()
    assert train.lines is not None and train.links is not None
    assert EMPTY not in train.lines.tolist() and LONG not in train.lines.tolist() and len(train) == 38
    tokenizers = prepared[0].tokenizers
    for k, line in enumerate(train.lines.tolist()):
        src = encode_words(tokenizers.src, [src_lines[line]])[0]
        tgt = encode_words(tokenizers.tgt, [(corpus / "train.tgt").read_text().splitlines()[line]])[0]
        assert train.src[k].tolist() == src.ids  # the pair is the line's
        expected = subword_links(reversal(src_lines[line]), src.words, tgt.words)
        assert train.links[k].reshape(-1, 2).tolist() == [list(pair) for pair in expected]


def test_batches_carry_each_pairs_links(corpus: Path, prepared: tuple[PreparedData, Path]) -> None:
    train = labelled(prepared, corpus, corpus / "train.links")
    assert train.links is not None
    groups = [np.array([3, 0, 7]), np.array([5])]
    for group, batch in zip(groups, iterate_batches(train, groups, multiple=8), strict=True):
        assert batch.links is not None and batch.links.shape == (
            len(group),
            *batch.tgt_out.shape[1:],
            batch.src.size(1),
        )
        for row, k in enumerate(group.tolist()):
            pairs = train.links[k].reshape(-1, 2)
            expected = np.zeros(batch.links.shape[1:], dtype=bool)
            expected[pairs[:, 1], pairs[:, 0]] = True
            assert np.array_equal(batch.links[row].numpy(), expected)
            assert not batch.links[row, len(train.tgt[k]) :].any()  # eos and padding have no link


def test_the_labels_are_cached(
    corpus: Path, prepared: tuple[PreparedData, Path], caplog: pytest.LogCaptureFixture
) -> None:
    first = labelled(prepared, corpus, corpus / "train.links")
    with caplog.at_level(logging.INFO, logger="nmt"):
        second = labelled(prepared, corpus, corpus / "train.links")
    assert "links cache hit" in caplog.text
    assert first.links is not None and second.links is not None
    assert np.array_equal(first.links.tokens, second.links.tokens)


def test_links_of_another_length_are_refused(
    corpus: Path, prepared: tuple[PreparedData, Path], tmp_path: Path
) -> None:
    short = tmp_path / "short.links"
    short.write_text("\n".join((corpus / "train.links").read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(UserError, match=r"short.links has 39 lines but the training split .* has 40"):
        labelled(prepared, corpus, short)


def test_a_link_past_its_sentence_is_refused(
    corpus: Path, prepared: tuple[PreparedData, Path], tmp_path: Path
) -> None:
    lines = (corpus / "train.links").read_text().splitlines()
    lines[4] += " 0-40"
    wrong = tmp_path / "wrong.links"
    wrong.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        UserError, match=r"wrong.links line 5: link 0-40 \(from 0\) points past the sentence pair"
    ):
        labelled(prepared, corpus, wrong)
