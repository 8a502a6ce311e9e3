"""Attention → word links on matrices worked by hand: `</s>` dropped, argmax and Shift-Att rows, thresholds,
subwords merged into words, soft word weights."""

import numpy as np
import pytest

from nmt.align.attention import layer_attention, subword_attention, word_links, word_weights

# target subwords t0 t1 t2 (+ </s> row), source subwords s0 s1 s2 (+ </s> column).
# Source words: s0 s1 form word 0, s2 word 1. Target words: t0 word 0, t1 t2 word 1.
WEIGHTS = np.array(
    [
        [0.10, 0.20, 0.05, 0.65],  # step producing t0: most on </s>, then s1
        [0.60, 0.10, 0.20, 0.10],  # t1 → s0
        [0.05, 0.05, 0.80, 0.10],  # t2 → s2
        [0.30, 0.30, 0.30, 0.10],  # step producing </s>
    ]
)
SRC_WORDS, TGT_WORDS = [0, 0, 1], [0, 1, 1]


def test_argmax_drops_eos_and_merges_subwords_into_words() -> None:
    # subword links: t0 → s1 (</s> is not a source word), t1 → s0, t2 → s2; as words: (0, 0), (0, 1), (1, 1)
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS) == {(0, 0), (0, 1), (1, 1)}


def test_shift_reads_the_next_row() -> None:
    # t0 ← row 1 (s0), t1 ← row 2 (s2), t2 ← row 3 (s0, the first of equal weights)
    assert subword_attention(WEIGHTS, "shift").shape == (3, 3)
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, rule="shift") == {(0, 0), (1, 1), (0, 1)}


def test_the_null_slot_leaves_a_subword_that_attends_eos_most_unlinked() -> None:
    # argmax: t0 attends </s> most (0.65) → no link; t1 → s0, t2 → s2 stay: words (0, 1), (1, 1)
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, null=True) == {(0, 1), (1, 1)}
    # shift: the </s> column of the next row decides (0.10, 0.10, 0.10): every link stays
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, rule="shift", null=True) == {(0, 0), (1, 1), (0, 1)}
    shifted_null = WEIGHTS.copy()
    shifted_null[2] = [0.05, 0.05, 0.10, 0.80]  # the row that reads t1 now attends </s> most
    assert word_links(shifted_null, SRC_WORDS, TGT_WORDS, rule="shift", null=True) == {(0, 0), (0, 1)}
    # a threshold never links </s> with or without the null slot
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, threshold=0.2, null=True) == {(0, 0), (0, 1), (1, 1)}


def test_threshold_keeps_every_subword_pair_that_reaches_it() -> None:
    # >= 0.2: t0-s1, t1-s0, t1-s2, t2-s2 → words (0, 0), (0, 1), (1, 1); t0's </s> weight is never a link
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, threshold=0.2) == {(0, 0), (0, 1), (1, 1)}
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, threshold=0.7) == {(1, 1)}
    assert word_links(WEIGHTS, SRC_WORDS, TGT_WORDS, threshold=0.9) == set()


def test_soft_word_weights() -> None:
    soft = word_weights(WEIGHTS, SRC_WORDS, TGT_WORDS, src_count=2, tgt_count=2)
    expected = [
        [0.10 + 0.20, 0.05],  # target word 0 = t0 alone
        [((0.60 + 0.10) + (0.05 + 0.05)) / 2, (0.20 + 0.80) / 2],  # target word 1: the mean of t1 and t2
    ]
    np.testing.assert_allclose(soft, expected, rtol=1e-6)


def test_a_word_without_subwords_gets_zero_weights() -> None:
    soft = word_weights(WEIGHTS, SRC_WORDS, TGT_WORDS, src_count=3, tgt_count=3)
    assert soft.shape == (3, 3) and not soft[:, 2].any() and not soft[2].any()


def test_layer_and_heads() -> None:
    weights = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)  # (layers, heads, tgt+1, src+1)
    np.testing.assert_allclose(layer_attention(weights, -1), weights[1].mean(axis=0))
    np.testing.assert_allclose(layer_attention(weights, 0, [0, 2]), (weights[0, 0] + weights[0, 2]) / 2)


def test_word_maps_must_fit_the_matrix() -> None:
    with pytest.raises(ValueError, match="subword-to-word"):
        word_links(WEIGHTS, [0, 0], TGT_WORDS)
