"""Batching: the padded layout of one batch, and token-budget length bucketing over a corpus."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.data.arrays import ArrayWriter, EncodedCorpus, TokenArray, open_token_array
from nmt.data.batching import (
    collate,
    iterate_batches,
    length_order,
    round_up,
    search_cost,
    search_groups,
    token_budget_groups,
)
from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.data.synthetic import reordering_pairs


def as_lists(groups: list[np.ndarray]) -> list[list[int]]:
    return [group.tolist() for group in groups]


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


def test_collate_places_each_link_at_its_target_row_and_source_column() -> None:
    batch = collate(
        ids([5, 6, 7], [8]),
        ids([9, 10], [11, 12, 13]),
        [0, 1],
        links=[np.array([2, 0, 0, 1]), np.array([0, 2])],
    )
    assert batch.links is not None and batch.links.shape == (2, 4, 4) and batch.links.dtype == torch.bool
    assert batch.links.nonzero().tolist() == [[0, 0, 2], [0, 1, 0], [1, 2, 0]]  # (row, target, source)
    assert batch.apply(torch.Tensor.clone).links.equal(batch.links)


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
    groups = [group.tolist() for group in token_budget_groups(corpus, batch_tokens=30, seed=0)]
    assert [1] in groups
    assert sorted(i for group in groups for i in group) == [0, 1, 2, 3]
    assert len(groups) == 2  # the three short pairs (3 x (5 + 4) = 27 tokens) share one batch


def test_same_seed_same_groups_other_seed_other_order() -> None:
    corpus = random_corpus(300, 30, seed=0)
    first = as_lists(token_budget_groups(corpus, 200, seed=5))
    assert as_lists(token_budget_groups(corpus, 200, seed=5)) == first
    other = as_lists(token_budget_groups(corpus, 200, seed=6))
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


def test_search_groups_go_longest_first_within_the_budget() -> None:
    """Sentences × (longest + eos) × width at most the budget: 2 × 10 fits 20, 3 × 10 does not."""
    assert search_groups([3, 9, 1, 5, 7], 20, 1) == [[1, 4], [3, 0, 2]]
    assert search_groups([3, 3, 3], 16, 2) == [[0, 1], [2]]  # 2 × 4 × 2 = 16 fits, 3 × 4 × 2 does not
    assert search_groups([2, 9, 2], 12, 1) == [[1], [0, 2]]
    assert search_groups([2, 9, 2], 12, 1, by_length=False) == [[0], [1], [2]]  # in their order
    assert search_groups([4, 4, 4], None, 5) == [[0, 1, 2]]  # no budget: one batch
    assert search_groups([], 8, 1) == []


def test_a_sentence_over_the_budget_is_a_batch_of_its_own() -> None:
    assert search_groups([50, 2, 2], 10, 1) == [[0], [1, 2]]
    assert search_groups([4, 4], 1, 5) == [[0], [1]]
    assert search_cost(2, 4, 5) == 2 * (4 + 1) * 5


def budget_groups_loop(corpus: EncodedCorpus, batch_tokens: int, seed: int, multiple: int) -> list[list[int]]:
    """token_budget_groups as it was written first, one example at a time: the reference the vectorised
    planner must match exactly (resumed runs and the processes of a job depend on it)."""
    src_len, tgt_len = corpus.lengths()
    order = np.lexsort((np.random.default_rng(seed).random(len(corpus)), src_len, tgt_len))
    groups: list[list[int]] = []
    current: list[int] = []
    max_src = max_tgt = 0
    for i in order.tolist():
        new_src = max(max_src, round_up(int(src_len[i]), multiple))
        new_tgt = max(max_tgt, round_up(int(tgt_len[i]), multiple))
        if current and (len(current) + 1) * (new_src + new_tgt) > batch_tokens:
            groups.append(current)
            current, new_src, new_tgt = (
                [],
                round_up(int(src_len[i]), multiple),
                round_up(int(tgt_len[i]), multiple),
            )
        current.append(i)
        max_src, max_tgt = new_src, new_tgt
    if current:
        groups.append(current)
    random.Random(seed).shuffle(groups)
    return groups


@pytest.mark.parametrize("seed", range(8))
def test_planner_cuts_exactly_the_groups_of_the_example_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size, longest = int(rng.integers(1, 3000)), int(rng.integers(1, 150) if seed < 6 else rng.integers(1, 6))
    corpus = random_corpus(size, longest, seed)
    if seed % 2:  # lengths that rise together, as in real corpora
        src_len = corpus.src.lengths()
        corpus = EncodedCorpus(
            corpus.src, lengths_only(np.minimum(longest, src_len + rng.integers(0, 3, size)))
        )
    for budget in (1, 40, 300, 3000, 8192):
        for multiple in (1, 8):
            expected = budget_groups_loop(corpus, budget, seed, multiple)
            assert as_lists(token_budget_groups(corpus, budget, seed, multiple)) == expected, (
                budget,
                multiple,
            )


def lengths_only(lengths: np.ndarray) -> TokenArray:
    return TokenArray(np.zeros(int(lengths.sum()), np.uint16), np.concatenate([[0], np.cumsum(lengths)]))


@pytest.mark.parametrize("ties", ["distinct", "few values", "equal leading bits"])
def test_length_order_is_lexsort_order(ties: str) -> None:
    rng = np.random.default_rng(1)
    src_len, tgt_len = rng.integers(1, 200, 5000), rng.integers(1, 200, 5000)
    tie = {
        "distinct": rng.random(5000),
        "few values": rng.integers(0, 3, 5000) / 4,  # ties broken by index, as lexsort does
        "equal leading bits": 0.5 + rng.integers(0, 3, 5000) * 2.0**-53,  # only the last bits differ
    }[ties]
    assert length_order(src_len, tgt_len, tie).tolist() == np.lexsort((tie, src_len, tgt_len)).tolist()


def test_length_order_packed_in_blocks_is_lexsort_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys packed a block at a time (blocks of 777 here, a last one shorter) give the same order."""
    monkeypatch.setattr("nmt.data.batching.PACK_BLOCK", 777)
    rng = np.random.default_rng(2)
    src_len, tgt_len = rng.integers(1, 30, 5000, dtype=np.int32), rng.integers(1, 30, 5000, dtype=np.int32)
    tie = rng.random(5000)
    assert length_order(src_len, tgt_len, tie).tolist() == np.lexsort((tie, src_len, tgt_len)).tolist()


def test_planning_memory_stays_within_36_bytes_a_pair() -> None:
    """An epoch's plan over 400,000 pairs allocates at most 36 bytes a pair at its peak (the int32 lengths,
    8 bytes of ties and 8 of packed sort keys; temporaries a block at a time), as numpy reports to
    tracemalloc (31 measured; 65 before the keys were packed in blocks)."""
    pairs = 400_000
    lengths = np.random.default_rng(0).integers(1, 60, (2, pairs))
    offsets = [np.concatenate([[0], np.cumsum(side)]) for side in lengths]
    corpus = EncodedCorpus(*(TokenArray(np.zeros(int(o[-1]), np.uint16), o) for o in offsets))
    tracemalloc.start()
    try:
        groups = token_budget_groups(corpus, 4096, seed=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(map(len, groups)) == pairs
    assert peak / pairs <= 36


def test_array_writer_holds_nothing_per_sentence(tmp_path: Path) -> None:
    """Writing 1,000,000 sentences in chunks of 10,000 allocates no more than a chunk's worth at once (the
    offsets go to disk with each chunk), and the files describe every sentence."""
    lengths = np.random.default_rng(0).integers(1, 30, 10_000)
    tokens = np.arange(int(lengths.sum()), dtype=np.uint16)
    writer = ArrayWriter(tmp_path, "src", np.dtype(np.uint16))
    tracemalloc.start()
    try:
        for _ in range(100):
            writer.append(tokens, lengths)
        description = writer.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # a chunk's offsets are 80,000 bytes; the million sentences' would be 8,000,000
    array = open_token_array(tmp_path, "src", description)
    assert len(array) == 1_000_000 and len(array.tokens) == 100 * len(tokens)
    assert array.lengths()[10_000:20_000].tolist() == lengths.tolist()
    assert array[10_001].tolist() == tokens[lengths[0] : lengths[0] + lengths[1]].tolist()


def test_batches_from_memory_mapped_arrays_equal_those_from_memory(tmp_path: Path) -> None:
    corpus, mapped = random_corpus(500, 40, seed=4), {}
    for side in ("src", "tgt"):
        writer, array = ArrayWriter(tmp_path, side, np.dtype(np.uint16)), getattr(corpus, side)
        for start in range(0, len(array), 128):  # written in chunks, as the encoder does
            stop = min(start + 128, len(array))
            writer.append(
                array.tokens[array.offsets[start] : array.offsets[stop]], array.lengths()[start:stop]
            )
        description = writer.finish()
        assert description == {"dtype": "uint16", "tokens": len(array.tokens), "sentences": 500}
        mapped[side] = open_token_array(tmp_path, side, description)
    disk = EncodedCorpus(mapped["src"], mapped["tgt"])
    groups = token_budget_groups(corpus, 300, seed=3, multiple=8)
    assert as_lists(token_budget_groups(disk, 300, seed=3, multiple=8)) == as_lists(groups)
    pairs = zip(iterate_batches(corpus, groups, 8), iterate_batches(disk, groups, 8), strict=True)
    for a, b in pairs:
        assert all(
            getattr(a, f).equal(getattr(b, f)) for f in ("src", "src_mask", "tgt_in", "tgt_out", "index")
        )
