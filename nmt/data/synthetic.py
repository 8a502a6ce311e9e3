"""Synthetic parallel corpora written by code: a word-reordering task (and its true word alignment) for tests,
demos and benchmarks, and line-aligned sentences of several made-up languages."""

from __future__ import annotations

import random
from pathlib import Path

from nmt.atomic_files import atomic_write_text

_SYLLABLES = ["ka", "lo", "mi", "su", "te", "ra", "no", "vi", "be", "zu", "do", "fe", "gi", "ho", "ju", "pa"]


def _words(rng: random.Random, count: int) -> list[str]:
    possible = len(_SYLLABLES) ** 2 + len(_SYLLABLES) ** 3  # every 2- and 3-syllable word
    if count > possible:
        raise ValueError(f"vocab={count} is more than the {possible} distinct words the syllables make")
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def reordering_pairs(
    count: int, vocab: int, min_len: int, max_len: int, seed: int
) -> tuple[list[str], list[str]]:
    """`count` pairs: the target replaces each source word by its fixed translation and reverses the order."""
    rng = random.Random(seed)
    lexicon_rng = random.Random(0)  # the same lexicon for every split
    source_words = _words(lexicon_rng, vocab)
    target_words = [w.upper()[::-1] for w in source_words]
    translation = dict(zip(source_words, target_words, strict=True))
    src, tgt = [], []
    for _ in range(count):
        sentence = [rng.choice(source_words) for _ in range(rng.randint(min_len, max_len))]
        src.append(" ".join(sentence))
        tgt.append(" ".join(translation[w] for w in reversed(sentence)))
    return src, tgt


def write_reordering_corpus(
    out: Path,
    train: int = 6000,
    valid: int = 300,
    test: int = 300,
    vocab: int = 300,
    min_len: int = 3,
    max_len: int = 10,
    seed: int = 1,
    src_lang: str = "src",
    tgt_lang: str = "tgt",
) -> Path:
    """Write train/valid/test.{src_lang,tgt_lang} of the reordering task into `out`; returns `out`."""
    for offset, (split, count) in enumerate((("train", train), ("valid", valid), ("test", test))):
        src, tgt = reordering_pairs(count, vocab, min_len, max_len, seed * 1000 + offset)
        atomic_write_text(out / f"{split}.{src_lang}", "\n".join(src) + "\n")
        atomic_write_text(out / f"{split}.{tgt_lang}", "\n".join(tgt) + "\n")
    return out


def write_reordering_links(text: Path, out: Path) -> Path:
    """The true word links of the reordering task's sentences in `text` (source word i is target word
    n - 1 - i), a line of 0-based Pharaoh pairs per sentence, into `out`; returns `out`."""
    lines = []
    for sentence in text.read_text(encoding="utf-8").splitlines():
        n = len(sentence.split())
        lines.append(" ".join(f"{i}-{n - 1 - i}" for i in range(n)))
    atomic_write_text(out, "\n".join(lines) + "\n")
    return out


def _spelled(word: str, language: int) -> str:
    """`word` in the lexicon of language number `language`: each syllable shifted along the syllable list
    (a bijection), upper case for odd languages."""
    shifted = "".join(
        _SYLLABLES[(_SYLLABLES.index(word[i : i + 2]) + 5 * language) % len(_SYLLABLES)]
        for i in range(0, len(word), 2)
    )
    return shifted.upper() if language % 2 else shifted


def multilingual_sentences(
    count: int, languages: int, vocab: int, min_len: int, max_len: int, seed: int
) -> list[list[str]]:
    """`count` sentences in each of `languages` languages, line-aligned: language k writes each word of a
    random sentence in its own lexicon, odd languages in reverse order. Returns one list per language."""
    rng = random.Random(seed)
    base = _words(random.Random(0), vocab)  # the same meanings for every split
    lexicons = [[_spelled(word, k) for word in base] for k in range(languages)]
    texts: list[list[str]] = [[] for _ in range(languages)]
    for _ in range(count):
        meaning = [rng.randrange(vocab) for _ in range(rng.randint(min_len, max_len))]
        for k, lexicon in enumerate(lexicons):
            words = [lexicon[m] for m in meaning]
            texts[k].append(" ".join(reversed(words) if k % 2 else words))
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
    for offset, (split, count) in enumerate((("train", train), ("valid", valid), ("test", test))):
        texts = multilingual_sentences(count, len(languages), vocab, min_len, max_len, seed * 1000 + offset)
        for lang, text in zip(languages, texts, strict=True):
            atomic_write_text(out / f"{split}.{lang}", "\n".join(text) + "\n")
    return out
