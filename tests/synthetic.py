"""Synthetic corpora that only the tests (and the device check) use: the reordering task's true word links,
and line-aligned sentences of several made-up languages built from the reordering task's syllables."""

from __future__ import annotations

import random
from pathlib import Path

from nmt.data.synthetic import SYLLABLES, words


def write_reordering_links(text: Path, out: Path) -> Path:
    """The true word links of the reordering task's sentences in `text` (source word i is target word
    n - 1 - i), a line of 0-based Pharaoh pairs per sentence, into `out`; returns `out`."""
    lines = []
    for sentence in text.read_text(encoding="utf-8").splitlines():
        n = len(sentence.split())
        lines.append(" ".join(f"{i}-{n - 1 - i}" for i in range(n)))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def spelled(word: str, language: int) -> str:
    """`word` in the lexicon of language number `language`: each syllable shifted along the syllable list
    (a bijection), upper case for odd languages."""
    shifted = "".join(
        SYLLABLES[(SYLLABLES.index(word[i : i + 2]) + 5 * language) % len(SYLLABLES)]
        for i in range(0, len(word), 2)
    )
    return shifted.upper() if language % 2 else shifted


def multilingual_sentences(
    count: int, languages: int, vocab: int, min_len: int, max_len: int, seed: int
) -> list[list[str]]:
    """`count` sentences in each of `languages` languages, line-aligned: language k writes each word of a
    random sentence in its own lexicon, odd languages in reverse order. Returns one list per language."""
    rng = random.Random(seed)
    lexicons = [[spelled(word, k) for word in words(random.Random(0), vocab)] for k in range(languages)]
    texts: list[list[str]] = [[] for _ in range(languages)]  # the same meanings for every split
    for _ in range(count):
        meaning = [rng.randrange(vocab) for _ in range(rng.randint(min_len, max_len))]
        for k, lexicon in enumerate(lexicons):
            sentence = [lexicon[m] for m in meaning]
            texts[k].append(" ".join(reversed(sentence) if k % 2 else sentence))
    return texts


def write_multilingual_corpus(
    out: Path,
    languages: tuple[str, ...] = ("xa", "xb", "xc"),
    train: int = 3000,
    valid: int = 100,
    test: int = 100,
    vocab: int = 60,
    min_len: int = 3,
    max_len: int = 7,
    seed: int = 1,
) -> Path:
    """Write train/valid/test.L for each language L of a line-aligned synthetic corpus
    (`multilingual_sentences`) into `out`; returns `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for offset, (split, count) in enumerate((("train", train), ("valid", valid), ("test", test))):
        texts = multilingual_sentences(count, len(languages), vocab, min_len, max_len, seed * 1000 + offset)
        for lang, text in zip(languages, texts, strict=True):
            (out / f"{split}.{lang}").write_text("\n".join(text) + "\n", encoding="utf-8")
    return out
