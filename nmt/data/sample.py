"""A bounded, deterministic sample of a training split for sentencepiece, written to files as it is read.

Every language of the split contributes the same number of sentences — `tokenizer.max_sentences` shared out
equally among the languages of a joint vocabulary, all of it to each language of separate ones (0: every
sentence) — drawn uniformly with a fixed seed from the lines that hold it, so that a large language does not
crowd a small one out of the vocabulary. A language with fewer sentences gives all of them, in corpus order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.config.sections import TokenizerConfig
from nmt.data.splits import LanguageSplit, SplitCounts
from nmt.errors import UserError

SEED = 0  # the sample depends on the corpus alone, so a cached tokenizer is the one training would give


@dataclass(frozen=True)
class TextLines:
    """The lines of a UTF-8 text file (one sentence each), read again at every iteration."""

    path: Path

    def __iter__(self) -> Iterator[str]:
        with open(self.path, encoding="utf-8", newline="\n") as handle:
            yield from handle


@dataclass(frozen=True)
class Sample:
    """The sampled sentences of each language (re-iterable, languages sorted), and how many there are."""

    languages: dict[str, TextLines]
    sentences: int

    def remove(self) -> None:
        for lines in self.languages.values():
            lines.path.unlink()


def sample_indices(population: int, limit: int) -> np.ndarray:
    """Sorted indices of `limit` of `population` items drawn without replacement (all when limit is 0 or
    not smaller)."""
    if limit == 0 or population <= limit:
        return np.arange(population)
    return np.sort(np.random.default_rng(SEED).choice(population, size=limit, replace=False))


def write_sample(split: LanguageSplit, counts: SplitCounts, cfg: TokenizerConfig, directory: Path) -> Sample:
    """Write the sample of every language of `split` (checked and counted: `counts`) to
    `directory`/sample.<lang>.txt: sentences that pair with one of a language they translate from or into;
    UserError when none does."""
    languages = sorted(counts.languages)
    budget = cfg.max_sentences // len(languages) if cfg.joint else cfg.max_sentences  # 0 stays 0: all
    files, written, drawn = {}, 0, 0
    for lang in languages:
        partners = {d.tgt for d in counts.directions if d.src == lang} | {
            d.src for d in counts.directions if d.tgt == lang
        }
        rows = sample_indices(counts.languages[lang], budget)
        sentences = split.sentences(lang, rows, partners)
        drawn = max(drawn, len(rows))
        files[lang] = TextLines(directory / f"sample.{lang}.txt")
        with open(files[lang].path, "w", encoding="utf-8") as out:
            out.writelines(sentence + "\n" for sentence in sentences)
        written += len(sentences)
    if not written:
        raise UserError(
            f"{' / '.join(str(path) for path in split.paths())} holds no sentence pairs (of {drawn} lines "
            f"read, none with both sides)"
        )
    return Sample(files, written)
