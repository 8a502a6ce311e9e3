"""A synthetic parallel corpus written by code, for demos, `nmt benchmark` and tests: a word-reordering task
whose words are made of syllables."""

from __future__ import annotations

import random
from pathlib import Path

from nmt.atomic_files import atomic_write_text

SYLLABLES = ["ka", "lo", "mi", "su", "te", "ra", "no", "vi", "be", "zu", "do", "fe", "gi", "ho", "ju", "pa"]


def words(rng: random.Random, count: int) -> list[str]:
    """`count` distinct words of two or three syllables, sorted."""
    possible = len(SYLLABLES) ** 2 + len(SYLLABLES) ** 3  # every 2- and 3-syllable word
    if count > possible:
        raise ValueError(f"vocab={count} is more than the {possible} distinct words the syllables make")
    found: set[str] = set()
    while len(found) < count:
        found.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(found)


def reordering_pairs(
    count: int, vocab: int, min_len: int, max_len: int, seed: int
) -> tuple[list[str], list[str]]:
    """`count` pairs: the target replaces each source word by its fixed translation and reverses the order."""
    rng = random.Random(seed)
    lexicon_rng = random.Random(0)  # the same lexicon for every split
    source_words = words(lexicon_rng, vocab)
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
