"""The sentence splitter of running text (nmt/data/sentences.py): the sentences of hand-written paragraphs,
their spans within the paragraph, white space of any kind, and a language without rules."""

from __future__ import annotations

import logging

import pytest

from nmt.data.sentences import announce, sentence_spans, split_sentences
from tests.sentence_cases import SPLITS


@pytest.mark.parametrize(("lang", "paragraph", "sentences"), SPLITS)
def test_the_rules_find_the_sentences(lang: str, paragraph: str, sentences: list[str]) -> None:
    assert split_sentences(paragraph, lang) == sentences


def test_spans_leave_out_the_white_space_around_each_sentence() -> None:
    paragraph = "  Ein Hund.\tEine Katze!   Ein Vogel  "
    spans = sentence_spans(paragraph, "de")
    assert [paragraph[a:b] for a, b in spans] == ["Ein Hund.", "Eine Katze!", "Ein Vogel"]
    assert paragraph[spans[0][1] : spans[1][0]] == "\t"


def test_any_white_space_separates_and_the_next_word_is_found_past_it() -> None:
    assert split_sentences("Hunde usw.   und Katzen.\u00a0Dann kam er.", "de") == [
        "Hunde usw.   und Katzen.",
        "Dann kam er.",
    ]


@pytest.mark.parametrize("paragraph", ["", "   ", "...", "?!", "12345 678.", "3.5", "— …"])
def test_punctuation_digits_and_blanks_are_whole(paragraph: str) -> None:
    found = split_sentences(paragraph, "de")
    assert found == ([paragraph.strip()] if paragraph.strip() else [])


def test_mixed_scripts_split_at_each_script_s_full_stop_followed_by_space() -> None:
    assert split_sentences("Привет, мир. Hello there! Γειά σου. Ende", "en") == [
        "Привет, мир.",
        "Hello there!",
        "Γειά σου.",
        "Ende",
    ]


def test_a_language_without_rules_falls_back_to_the_generic_ones_announced_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    announce.cache_clear()
    with caplog.at_level(logging.INFO, logger="nmt.data.sentences"):
        assert split_sentences("Ka lo. Dr. Mi ra.", "qq") == ["Ka lo.", "Dr.", "Mi ra."]
        assert not caplog.records  # counting sentences says nothing
        for lang in ("qq", "qq", "de", "qq"):
            announce(lang)
    [record] = caplog.records
    assert "no sentence-splitting rules for 'qq'" in record.getMessage()
