"""Batching: the padded layout of one batch, and token-budget length bucketing over a corpus."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nmt.data.batching import (
    EncodedCorpus,
    collate,
    iterate_batches,
    round_up,
    sorted_groups,
    token_budget_groups,
)
from nmt.data.synthetic import reordering_pairs
from nmt.data.tokenizer import BOS, EOS, PAD


def ids(*rows: list[int]) -> list[np.ndarray]:
    return [np.asarray(row, dtype=np.int32) for row in rows]


def random_corpus(size: int, max_len: int, seed: int) -> EncodedCorpus:
    """Pairs of unrelated random lengths 1..max_len; token ids are >= 4 and encode the example's index."""
    rng = np.random.default_rng(seed)
    src = [[4 + i] * int(n) for i, n in enumerate(rng.integers(1, max_len + 1, size))]
    tgt = [[4 + i] * int(n) for i, n in enumerate(rng.integers(1, max_len + 1, size))]
    return EncodedCorpus.from_ids(src, tgt)


@pytest.fixture(scope="module")
def reordering_corpus() -> EncodedCorpus:
    """1000 synthetic pairs of 1..40 words, one id per word (both sides have the same length)."""
    src, tgt = reordering_pairs(1000, 50, 1, 40, seed=3)
    vocab = {word: i + 4 for i, word in enumerate(sorted({w for line in src + tgt for w in line.split()}))}
    encode = lambda lines: [[vocab[w] for w in line.split()] for line in lines]  # noqa: E731
    return EncodedCorpus.from_ids(encode(src), encode(tgt))


def test_collate_layout() -> None:
    batch = collate(ids([5, 6, 7], [8]), ids([9, 10], [11, 12, 13]), [4, 7])
    assert batch.src.tolist() == [[5, 6, 7, EOS], [8, EOS, PAD, PAD]]
    assert batch.src_mask.tolist() == [[[True, True, True, True]], [[True, True, False, False]]]
    assert batch.tgt_in.tolist() == [[BOS, 9, 10, PAD], [BOS, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[9, 10, EOS, PAD], [11, 12, 13, EOS]]
    assert batch.index.tolist() == [4, 7] and batch.size == 2
    assert int(batch.target_tokens()) == 7  # 5 subwords + 2 eos
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long and batch.src_mask.dtype == torch.bool


def test_collate_pads_lengths_to_a_multiple() -> None:
    batch = collate(ids([5, 6, 7], [8]), ids([9, 10], [11, 12, 13]), [0, 1], multiple=8)
    assert batch.src.shape == batch.tgt_in.shape == batch.tgt_out.shape == (2, 8)
    assert batch.src_mask.shape == (2, 1, 8)
    assert batch.src[0].tolist() == [5, 6, 7, EOS, PAD, PAD, PAD, PAD]
    assert batch.tgt_in[1].tolist() == [BOS, 11, 12, 13, PAD, PAD, PAD, PAD]
    assert batch.tgt_out[1].tolist() == [11, 12, 13, EOS, PAD, PAD, PAD, PAD]
    assert not (batch.tgt_in == EOS).any()  # eos is never fed to the decoder
    assert batch.src_mask.squeeze(1).equal(batch.src != PAD)


def test_collate_of_an_empty_target() -> None:
    batch = collate(ids([5]), ids([]), [0])
    assert batch.tgt_in.tolist() == [[BOS]] and batch.tgt_out.tolist() == [[EOS]]


def test_batch_to_keeps_every_tensor() -> None:
    batch = collate(ids([5, 6]), ids([7]), [3])
    moved = batch.to(torch.device("cpu"))
    assert all(
        getattr(moved, name).equal(getattr(batch, name)) for name in ("src", "src_mask", "tgt_in", "index")
    )


def test_lengths_count_eos_and_bos() -> None:
    src_len, tgt_len = EncodedCorpus.from_ids([[5, 6], [7]], [[8], []]).lengths()
    assert src_len.tolist() == [3, 2] and tgt_len.tolist() == [2, 1]


@pytest.mark.parametrize(("budget", "multiple"), [(200, 1), (300, 8), (64, 4)])
def test_groups_cover_every_example_once_within_the_budget(budget: int, multiple: int) -> None:
    corpus = random_corpus(300, 30, seed=0)
    groups = token_budget_groups(corpus, budget, seed=1, multiple=multiple)
    assert sorted(i for group in groups for i in group) == list(range(len(corpus)))
    src_len, tgt_len = corpus.lengths()
    for group in groups:
        width = round_up(int(src_len[group].max()), multiple) + round_up(int(tgt_len[group].max()), multiple)
        assert len(group) * width <= budget or len(group) == 1
    for batch in iterate_batches(corpus, groups, multiple):  # the tensors agree with the arithmetic
        assert batch.src.numel() + batch.tgt_in.numel() <= budget or batch.size == 1
        assert batch.src.size(1) % multiple == 0 and batch.tgt_in.size(1) % multiple == 0
    assert max(len(group) for group in groups) > 1  # the budget is used, not one example per batch


def test_an_example_over_the_budget_gets_a_group_of_its_own() -> None:
    corpus = EncodedCorpus.from_ids(
        [[5] * 3, [6] * 100, [7] * 2, [8] * 4], [[9] * 3, [9] * 100, [9] * 2, [9] * 3]
    )
    groups = token_budget_groups(corpus, batch_tokens=30, seed=0)
    assert [1] in groups
    assert sorted(i for group in groups for i in group) == [0, 1, 2, 3]
    assert len(groups) == 2  # the three short pairs (3 x (5 + 4) = 27 tokens) share one batch


def test_same_seed_same_groups_other_seed_other_order() -> None:
    corpus = random_corpus(300, 30, seed=0)
    first = token_budget_groups(corpus, 200, seed=5)
    assert token_budget_groups(corpus, 200, seed=5) == first
    other = token_budget_groups(corpus, 200, seed=6)
    longest = lambda groups: [max(len(corpus.tgt[i]) for i in group) for group in groups]  # noqa: E731
    assert longest(other) != longest(first)  # the batches come in another order
    assert sorted(longest(other)) == sorted(longest(first))  # ... but are cut from the same length order
    assert sorted(i for group in other for i in group) == list(range(len(corpus)))


def test_length_bucketing_keeps_padding_small(reordering_corpus: EncodedCorpus) -> None:
    groups = token_budget_groups(reordering_corpus, 1000, seed=0)
    padding = total = 0
    for batch in iterate_batches(reordering_corpus, groups):
        for tensor in (batch.src, batch.tgt_out):
            padding += int((tensor == PAD).sum())
            total += tensor.numel()
    assert padding / total < 0.1  # random batches of this corpus are about 45% padding


def test_iterate_batches_yields_the_grouped_examples(reordering_corpus: EncodedCorpus) -> None:
    groups = token_budget_groups(reordering_corpus, 500, seed=2)
    seen = []
    for group, batch in zip(groups, iterate_batches(reordering_corpus, groups), strict=True):
        assert batch.index.tolist() == list(group)
        for row, i in enumerate(group):
            src, tgt = reordering_corpus.src[i], reordering_corpus.tgt[i]
            assert batch.src[row, : len(src) + 1].tolist() == [*src.tolist(), EOS]
            assert batch.tgt_out[row, : len(tgt) + 1].tolist() == [*tgt.tolist(), EOS]
            seen.append(i)
    assert sorted(seen) == list(range(len(reordering_corpus)))


def test_sorted_groups_go_longest_first() -> None:
    assert sorted_groups([3, 9, 1, 5, 7], batch_size=2) == [[1, 4], [3, 0], [2]]
    assert sorted_groups([], batch_size=4) == []
