"""A bounded, deterministic sample of a training split for sentencepiece, written to files as it is read.

At most `tokenizer.max_sentences` sentences (0: all) are drawn uniformly, with a fixed seed, from the lines of
the split (for a joint vocabulary, from its source and target lines together), and the sampled sentences of
pairs with both sides non-empty are kept, in corpus order: source sentences first, then target ones. A split
that fits in the budget is used whole, exactly as it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.config.sections import TokenizerConfig
from nmt.data.corpus import SplitFiles, decode_lines, no_pairs_error, raw_pair_chunks

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
    """Sampled source and target sentences (re-iterable), and how many there are."""

    src: TextLines
    tgt: TextLines
    sentences: int


def sample_indices(population: int, limit: int) -> np.ndarray:
    """Sorted indices of `limit` of `population` items drawn without replacement (all when limit is 0 or
    not smaller)."""
    if limit == 0 or population <= limit:
        return np.arange(population)
    return np.sort(np.random.default_rng(SEED).choice(population, size=limit, replace=False))


def write_sample(files: SplitFiles, lines: int, cfg: TokenizerConfig, directory: Path) -> Sample:
    """Draw the sample from a split of `lines` lines (already checked by `count_lines`) into two files in
    `directory`; raises UserError when the sampled lines hold no pair with both sides."""
    if cfg.joint:
        chosen = sample_indices(2 * lines, cfg.max_sentences)
        src_rows, tgt_rows = chosen[chosen < lines], chosen[chosen >= lines] - lines
    else:
        src_rows = tgt_rows = sample_indices(lines, cfg.max_sentences)
    paths = directory / "sample.src.txt", directory / "sample.tgt.txt"
    written = 0
    with open(paths[0], "w", encoding="utf-8") as src_out, open(paths[1], "w", encoding="utf-8") as tgt_out:
        first = 0
        for raw_src, raw_tgt in raw_pair_chunks(files):
            end = first + len(raw_src)
            for out, rows, own, partner in (
                (src_out, _within(src_rows, first, end), raw_src, raw_tgt),
                (tgt_out, _within(tgt_rows, first, end), raw_tgt, raw_src),
            ):
                sentences = _paired(own, partner, rows.tolist())
                out.writelines(sentence + "\n" for sentence in sentences)
                written += len(sentences)
            first = end
    if not written:
        raise no_pairs_error(files, len(np.union1d(src_rows, tgt_rows)))
    return Sample(TextLines(paths[0]), TextLines(paths[1]), written)


def _paired(own: list[bytes], partner: list[bytes], rows: list[int]) -> list[str]:
    """The cleaned sentences of `own` at `rows` whose pair has text on both sides (a line that is not valid
    UTF-8 counts as empty)."""
    text, _ = decode_lines([own[r] for r in rows], "", 1, skip_bad_lines=True)
    return [sentence for sentence, r in zip(text, rows, strict=True) if sentence and _has_text(partner[r])]


def _has_text(line: bytes) -> bool:
    try:
        return bool(line.decode("utf-8").strip())
    except UnicodeDecodeError:
        return False


def _within(rows: np.ndarray, start: int, end: int) -> np.ndarray:
    """The rows in [start, end), relative to start."""
    lo, hi = np.searchsorted(rows, [start, end])
    return rows[lo:hi] - start
