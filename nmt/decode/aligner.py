"""`nmt align`: word alignments of given sentence pairs, read from a trained model's attention.

Each pair is whitespace-tokenized text, one sentence a line in two files. Every word is encoded on its own and
its subwords kept (`Translator.encode_words`: the joined text is never tokenized again); the model is
teacher-forced on the given target in batches (`teacher_forced`: nmt/align/forced_attention.py), and one
decoder layer's attention (one head, or the mean of several) becomes word links (nmt/align/attention.py:
`</s>` dropped, the argmax or Shift-Att row of each target subword, or every source subword over a threshold;
a word pair is linked when any of their subwords are), or soft word × word weights. A second run of the other
direction gives reverse links, and the two are symmetrized (nmt/align/symmetrize.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch import Tensor

from nmt.align.attention import layer_attention, word_links, word_weights
from nmt.align.forced_attention import forced_pairs
from nmt.align.pharaoh import Link, pharaoh_text, read_lines
from nmt.align.reading import Heads, Reading, default_reading
from nmt.align.symmetrize import Method, symmetrize
from nmt.config.sections import LinkRule
from nmt.data.batching import IntSequence
from nmt.data.words import WordPieces
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import Progress, TorchTranslator
from nmt.errors import UserError

SOFT_DIGITS = 4  # decimals of soft weights
CHUNK_PAIRS = 1000  # pairs forced at a time: the attention of every layer and head is kept only for them


@dataclass(frozen=True)
class Forced:
    """Sentence pairs teacher-forced through a model: each side's words and subwords, and per pair the
    attention of every layer and head, (layers, heads, target subwords + 1, source subwords + 1)."""

    src: list[WordPieces]
    tgt: list[WordPieces]
    attention: list[Tensor]

    def links(self, reading: Reading) -> list[set[Link]]:
        """Each pair's word links (source word, target word) under `reading`."""
        return [
            word_links(
                self._weights(i, reading), s.words, t.words, reading.rule, reading.threshold, reading.null
            )
            for i, (s, t) in enumerate(zip(self.src, self.tgt, strict=True))
        ]

    def soft(self, reading: Reading) -> list[np.ndarray]:
        """Each pair's word × word weights (target words, source words) under `reading` (no threshold)."""
        return [
            word_weights(self._weights(i, reading), s.words, t.words, s.count, t.count, reading.rule)
            for i, (s, t) in enumerate(zip(self.src, self.tgt, strict=True))
        ]

    def _weights(self, pair: int, reading: Reading) -> np.ndarray:
        return layer_attention(self.attention[pair].numpy(), reading.layer, reading.heads)


def read_pairs(src: Path, tgt: Path) -> tuple[list[str], list[str]]:
    """The lines of two line-aligned files of whitespace-tokenized text; another number of lines, or a line
    empty on one side only, is a UserError naming it (a pair empty on both sides has no links)."""
    src_lines, tgt_lines = read_lines(src), read_lines(tgt)
    if len(src_lines) != len(tgt_lines):
        raise UserError(
            f"{src} has {len(src_lines)} lines but {tgt} has {len(tgt_lines)}; they must be line-aligned"
        )
    for number, (s, t) in enumerate(zip(src_lines, tgt_lines, strict=True), 1):
        if bool(s.split()) != bool(t.split()):
            empty, other = (src, tgt) if not s.split() else (tgt, src)
            raise UserError(
                f"{empty} line {number} is empty but {other} line {number} is not; are the files "
                f"line-aligned? (leave both sides empty for a pair without links)"
            )
    return src_lines, tgt_lines


def force(
    run: TrainedRun,
    src_lines: Sequence[str],
    tgt_lines: Sequence[str],
    progress: Progress | None = None,
    first_line: int = 1,
    direction: tuple[str | None, str | None] = (None, None),
) -> Forced:
    """Teacher-force each target line on its source line (every word encoded on its own) through the run's
    model, in batches within its `search.batch_tokens`, in `direction` (source and target language: a
    multilingual run's needs the target); a pair longer than a Transformer's positions is a UserError naming
    its line (the first pair's: `first_line`). The layer that guided alignment trained with full context
    attends with full context here too."""
    translator = TorchTranslator.of_run(run).toward(direction[1], direction[0])
    src, tgt = translator.encode_words(src_lines, "source"), translator.encode_words(tgt_lines, "target")
    limit = run.cfg.model.position_limit
    tag = 1 if translator.tags.tagged else 0  # the language tag takes a position on one side
    for number, (s, t) in enumerate(zip(src, tgt, strict=True), first_line):
        longest = max(len(s.ids), len(t.ids)) + 1 + tag  # with eos (bos)
        if limit is not None and longest > limit:
            raise UserError(
                f"line {number} takes {longest} subword positions, more than the {limit} the model has; "
                f"split or drop that pair"
            )
    attention = teacher_forced(translator, [s.ids for s in src], [t.ids for t in tgt], progress)
    return Forced(src, tgt, attention)


def teacher_forced(
    translator: TorchTranslator,
    sources: Sequence[IntSequence],
    targets: Sequence[IntSequence],
    progress: Progress | None = None,
) -> list[Tensor]:
    """The attention the translator's model pays producing each target from its source, in its direction and
    batch budget (nmt/align/forced_attention.py `forced_pairs`): per pair (layers, heads, len(target) + 1,
    len(source) + 1)."""
    return forced_pairs(
        translator.model,
        sources,
        targets,
        translator.settings.batch_tokens,
        translator.tags,
        translator.target_language(),
        translator.full_context_layer,
        progress,
    )


def symmetrized(
    forward: Forced, reverse: Forced, readings: tuple[Reading, Reading], method: Method
) -> list[set[Link]]:
    """The links of both directions (`reverse` forced target → source, its links swapped), symmetrized."""
    swapped = [{(i, j) for j, i in line} for line in reverse.links(readings[1])]
    return [symmetrize(f, r, method) for f, r in zip(forward.links(readings[0]), swapped, strict=True)]


def soft_text(weights: Sequence[np.ndarray]) -> str:
    """JSON lines: per pair, a list per target word of its weight on each source word."""
    return "".join(json.dumps(np.round(w.astype(np.float64), SOFT_DIGITS).tolist()) + "\n" for w in weights)


@dataclass(frozen=True)
class Request:
    """What `nmt align` was asked: the attention (layer, heads and rule: None for each run's default),
    threshold, soft output, and a reverse run with the symmetrization `method`."""

    layer: int | None = None
    heads: Heads = None
    rule: LinkRule | None = None
    threshold: float | None = None
    null: bool | None = None  # None: as the run trained (`train.alignment.null_slot`)
    soft: bool = False
    reverse: TrainedRun | None = None
    method: Method = "grow-diag-final-and"
    src_lang: str | None = None  # a multilingual run's direction (the reverse run's is the other way)
    tgt_lang: str | None = None


def align_files(run: TrainedRun, src: Path, tgt: Path, asked: Request) -> str:
    """The output of `nmt align` for the pairs of `src` and `tgt`: Pharaoh lines or soft JSON lines, the pairs
    forced `CHUNK_PAIRS` at a time."""
    if asked.threshold is not None and not 0.0 < asked.threshold <= 1.0:
        raise UserError(f"--threshold {asked.threshold}: a weight, above 0 and at most 1")
    if asked.soft and (asked.reverse is not None or asked.threshold is not None):
        raise UserError("--soft writes the weights of one run: it takes no --reverse-run or --threshold")
    src_lines, tgt_lines = read_pairs(src, tgt)
    forward = _reading(run, asked, str(run.directory.path))
    other = None if asked.reverse is None else (asked.reverse, _reverse_reading(run, asked.reverse, asked))
    out = []
    for start in range(0, len(src_lines), CHUNK_PAIRS):
        chunk = src_lines[start : start + CHUNK_PAIRS], tgt_lines[start : start + CHUNK_PAIRS]
        forced = force(run, *chunk, first_line=start + 1, direction=(asked.src_lang, asked.tgt_lang))
        if asked.soft:
            out.append(soft_text(forced.soft(forward)))
        elif other is None:
            out.append(pharaoh_text(forced.links(forward)))
        else:
            backward = (asked.tgt_lang, asked.src_lang)
            reverse = force(other[0], chunk[1], chunk[0], first_line=start + 1, direction=backward)
            out.append(pharaoh_text(symmetrized(forced, reverse, (forward, other[1]), asked.method)))
    return "".join(out)


def _reverse_reading(run: TrainedRun, reverse: TrainedRun, asked: Request) -> Reading:
    """The reading of the reverse run, which must translate the other way (a multilingual run's direction
    is checked when it is turned toward it)."""
    pair = (run.cfg.data.src_lang, run.cfg.data.tgt_lang)
    other = (reverse.cfg.data.src_lang, reverse.cfg.data.tgt_lang)
    multilingual = run.cfg.data.directions.tagged or reverse.cfg.data.directions.tagged
    if other != pair[::-1] and not multilingual:
        raise UserError(
            f"--reverse-run {reverse.directory.path} translates {other[0]} → {other[1]}; "
            f"{run.directory.path} translates {pair[0]} → {pair[1]}, so the reverse run must translate "
            f"{pair[1]} → {pair[0]}"
        )
    return _reading(reverse, asked, "--reverse-run")


def _reading(run: TrainedRun, asked: Request, name: str) -> Reading:
    chosen = default_reading(run.cfg, asked.layer, asked.heads, name)
    null = chosen.null if asked.null is None else asked.null
    return Reading(chosen.layer, chosen.heads, asked.rule or chosen.rule, asked.threshold, null)
