"""Attention → word alignments.

A teacher-forced pass gives an attention matrix of (target subwords + 1, source subwords + 1) weights: row t
is the decoding step that produces target subword t (the last row produces `</s>`), the last column the
source's `</s>`. Which row aligns target subword t is the rule:

- `argmax` (Luong et al. 2015's "naive" alignment): row t, the step that predicts the subword;
- `shift` (Chen et al. 2020, "Accurate Word Alignment Induction from Neural Machine Translation", Shift-Att):
  row t + 1, the step that reads it as input, which helps deeper decoders and needs no retraining.

`</s>` is dropped on both sides. Each target subword then links to its most attended source subword, or, with
a `threshold`, to every source subword whose weight (as the model gave it, not renormalised after `</s>` is
dropped) reaches it — none, or several (Marian's soft threshold). With `null`, the source's `</s>` is a null
slot (what `train.alignment.null_slot` trains unlinked subwords to attend): a target subword whose most
attended source subword is `</s>` stays unlinked. Subword links become word links as
OpenNMT-py, lilt/alignment-scripts and Garg et al. 2019 convert them: a word pair is linked when any subword
of the one is linked to any subword of the other. Soft output sums a source word's subword columns (the
attention it received) and averages a target word's subword rows: word × word weights whose rows add up to the
target word's attention on real source words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nmt.align.pharaoh import Link
from nmt.config.sections import LINK_RULES, LinkRule


def layer_attention(weights: np.ndarray, layer: int, heads: Sequence[int] | None = None) -> np.ndarray:
    """One decoder layer's attention (negative: counted from the last), the mean of the heads `heads` (None:
    all of them): (layers, heads, tgt + 1, src + 1) → (tgt + 1, src + 1). RNN models have 1 layer, 1 head."""
    chosen = weights[layer]  # (heads, tgt + 1, src + 1)
    return chosen.mean(axis=0) if heads is None else chosen[list(heads)].mean(axis=0)


def subword_attention(weights: np.ndarray, rule: LinkRule) -> np.ndarray:
    """The rows aligning each target subword under `rule`, `</s>` row and column dropped:
    (tgt + 1, src + 1) → (tgt, src)."""
    return _rule_rows(weights, rule)[:, :-1]


def _rule_rows(weights: np.ndarray, rule: LinkRule) -> np.ndarray:
    """The rows aligning each target subword under `rule`, the source's `</s>` kept: (tgt + 1, src + 1) →
    (tgt, src + 1)."""
    if weights.ndim != 2 or min(weights.shape) < 1:
        raise ValueError(f"expected a (target + 1, source + 1) matrix, got shape {weights.shape}")
    match rule:
        case "argmax":
            return weights[:-1]
        case "shift":
            return weights[1:]
    raise ValueError(f"unknown rule {rule!r}; expected one of {LINK_RULES}")


def word_links(
    weights: np.ndarray,
    src_words: Sequence[int],
    tgt_words: Sequence[int],
    rule: LinkRule = "argmax",
    threshold: float | None = None,
    null: bool = False,
) -> set[Link]:
    """Word links (source word, target word) from an attention matrix (tgt + 1, src + 1) with `</s>`;
    `src_words`/`tgt_words` give the word of each subword (len src, len tgt); `null`: a subword whose argmax
    is the source's `</s>` links nothing (no effect with a threshold, which never links `</s>`)."""
    with_eos = _rule_rows(np.asarray(weights, dtype=np.float32), rule)  # (tgt, src + 1)
    rows = with_eos[:, :-1]  # (tgt, src)
    _check_words(rows, src_words, tgt_words)
    if rows.size == 0:
        return set()
    if threshold is None:
        attended = most_attended(with_eos, null)
        return {(int(src_words[s]), int(tgt_words[t])) for t, s in enumerate(attended) if s is not None}
    tgt, src = np.nonzero(rows >= threshold)
    return {(int(src_words[s]), int(tgt_words[t])) for s, t in zip(src.tolist(), tgt.tolist(), strict=True)}


def most_attended(rows: np.ndarray, null: bool = False) -> list[int | None]:
    """Each row's most attended source subword (the first of equal ones; a column set to -1 is left out) and
    never the source's `</s>`: rows (tgt, src + 1) as a rule gives them, at least one source subword. With
    `null`, None for a row that attends `</s>` more than every source subword."""
    weights = rows[:, :-1]  # (tgt, src)
    best: list[int | None] = list(weights.argmax(axis=1).tolist())
    if not null:
        return best
    kept = weights.max(axis=1) >= rows[:, -1]  # (tgt,)
    return [s if keep else None for s, keep in zip(best, kept.tolist(), strict=True)]


def attended_subwords(
    weights: np.ndarray, rule: LinkRule, null: bool, skipped: np.ndarray | None = None
) -> list[int | None]:
    """A translation's alignment: each output subword's most attended source subword under `rule` and
    `null`, of those not `skipped` (bool (src,): a language tag), from its attention (tgt + 1, src + 1)."""
    rows = _rule_rows(np.array(weights, dtype=np.float32), rule)  # (tgt, src + 1), a copy
    if skipped is not None:
        rows[:, :-1][:, skipped] = -1.0
    return most_attended(rows, null)


def word_weights(
    weights: np.ndarray,
    src_words: Sequence[int],
    tgt_words: Sequence[int],
    src_count: int,
    tgt_count: int,
    rule: LinkRule = "argmax",
) -> np.ndarray:
    """Soft alignment (tgt_count, src_count): the attention of target word j on source word i, the sum over
    i's subwords of the mean over j's subwords; a word without subwords has a row (column) of zeros."""
    rows = subword_attention(np.asarray(weights, dtype=np.float32), rule)  # (tgt, src)
    _check_words(rows, src_words, tgt_words)
    src_member = np.zeros((rows.shape[1], src_count), np.float32)  # (src subwords, src words)
    src_member[np.arange(rows.shape[1]), np.asarray(src_words, dtype=np.int64)] = 1.0
    tgt_member = np.zeros((tgt_count, rows.shape[0]), np.float32)  # (tgt words, tgt subwords)
    tgt_member[np.asarray(tgt_words, dtype=np.int64), np.arange(rows.shape[0])] = 1.0
    tgt_member /= np.maximum(tgt_member.sum(axis=1, keepdims=True), 1.0)  # a mean over each word's subwords
    return tgt_member @ rows @ src_member  # (tgt words, src words)


def _check_words(rows: np.ndarray, src_words: Sequence[int], tgt_words: Sequence[int]) -> None:
    if rows.shape != (len(tgt_words), len(src_words)):
        raise ValueError(
            f"attention of {rows.shape[0]} target × {rows.shape[1]} source subwords (without </s>) for "
            f"{len(tgt_words)} target and {len(src_words)} source subword-to-word entries"
        )
