"""Running text (nmt/decode/running_text.py) with a scripted translator: paragraphs split into sentences and
joined back with their own white space, hypotheses joined rank by rank with their word links moved onto the
paragraph's words, a sentence over the limit split at its clauses, then between words, a word over it cut
and marked, and the guard's count of each paragraph's sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nmt.decode.running_text import CUT_MARK, segment
from nmt.decode.translator import Translated, Translation


@dataclass
class Words:
    """A translator whose subwords are the words of a text (one id each, plus `tag` ids), into English."""

    max_source_len: int = 100
    source: str = "en"
    tag: int = 0

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [[7] * self.tag + [5] * len(text.split()) for text in texts]


def upper(text: str, ranks: int = 1) -> Translated:
    """`text` translated as its words in upper case, each linked to its own (rank r adds r '!' words)."""
    words = text.upper().split()
    hypotheses = []
    for rank in range(ranks):
        output = [*words, *["!"] * rank]
        links = [(i, i) for i in range(len(words))]
        hypotheses.append(Translation(" ".join(output), -1.0 - rank, [1] * len(output), [], alignment=links))
    return Translated(["▁x"] * len(words) + ["</s>"], hypotheses)


def test_sentences_are_translated_alone_and_joined_with_the_paragraph_s_white_space() -> None:
    paragraphs = ["A dog runs.  A cat sleeps!\tA bird? ", "", "One more"]
    segmented = segment(paragraphs, Words(), split=True)
    assert segmented.texts == ["A dog runs.", "A cat sleeps!", "A bird?", "", "One more"]
    translated = segmented.translations([upper(t, ranks=2) for t in segmented.texts], "en")
    first = translated[0].joined
    assert first.best.text == "A DOG RUNS.  A CAT SLEEPS!\tA BIRD?"
    assert first.hypotheses[1].text == "A DOG RUNS. !  A CAT SLEEPS! !\tA BIRD? !"
    assert first.best.alignment == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
    assert first.hypotheses[1].alignment == [(0, 0), (1, 1), (2, 2), (3, 4), (4, 5), (5, 6), (6, 8), (7, 9)]
    assert first.best.score == -1.0 and first.hypotheses[1].score == -2.0
    assert [t.joined.best.text for t in translated[1:]] == ["", "ONE MORE"]
    assert [(t.source_sentences, t.translated_sentences, t.dropped) for t in translated] == [
        (3, 3, 0),
        (0, 0, 0),
        (1, 1, 0),
    ]


def test_without_splitting_a_paragraph_is_one_piece_and_the_guard_sees_a_dropped_sentence() -> None:
    segmented = segment(["A dog runs. A cat sleeps. A bird sings."], Words(), split=False)
    assert segmented.texts == ["A dog runs. A cat sleeps. A bird sings."]
    [translated] = segmented.translations([upper("A dog sleeps on a bird.")], "en")
    assert (translated.source_sentences, translated.translated_sentences, translated.dropped) == (3, 1, 2)


def test_an_empty_translation_of_a_sentence_is_a_dropped_sentence() -> None:
    segmented = segment(["A dog runs. A cat sleeps."], Words(), split=True)
    [translated] = segmented.translations([upper("A dog runs."), upper("")], "en")
    assert translated.dropped == 1


def test_a_sentence_over_the_limit_is_split_at_its_clauses_then_between_words() -> None:
    clauses = "One two three, four five; six seven eight nine ten eleven: twelve."
    segmented = segment([f"Short one. {clauses}"], Words(max_source_len=5, tag=1), split=True)
    assert segmented.texts == [
        "Short one.",
        "One two three,",
        "four five;",
        "six seven eight nine",
        "ten eleven:",
        "twelve.",
    ]
    assert all(len(ids) <= 5 for ids in segmented.sources) and not segmented.paragraphs[0].cut
    [translated] = segmented.translations([upper(t) for t in segmented.texts], "en")
    assert translated.joined.best.text == f"SHORT ONE. {clauses.upper()}" and translated.source_sentences == 2


def test_a_word_over_the_limit_is_cut_and_the_cut_marked() -> None:
    class Letters(Words):
        def encode(self, texts: Sequence[str]) -> list[list[int]]:
            return [[5] * len(text.replace(" ", "")) for text in texts]

    segmented = segment(["Ab cd. Abcdefghij kl."], Letters(max_source_len=6), split=True)
    assert segmented.texts == ["Ab cd.", "Abcdefghij", "kl."]
    [translated] = segmented.translations([upper(t) for t in segmented.texts], "en")
    assert translated.joined.best.text == f"AB CD. ABCDEFGHIJ {CUT_MARK} KL."
    assert translated.cut == [(10, 6)] and translated.dropped == 0
    whole = segment(["Abcdefghij kl."], Letters(max_source_len=6), split=False)
    assert whole.paragraphs[0].cut == {0: 13}
    [kept] = whole.translations([upper("Abcdefghij kl.")], "en")
    assert CUT_MARK not in kept.joined.best.text  # the caller refuses it or warns
