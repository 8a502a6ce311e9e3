"""Encoded sentence pairs → length-bucketed, token-budget batches of padded tensors and masks."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

from nmt.data.arrays import EncodedCorpus
from nmt.data.special_tokens import BOS, EOS, PAD

T = TypeVar("T", int, np.ndarray)
IntSequence = Sequence[int] | np.ndarray  # a sentence's token ids or a batch's example indices: list or array


@dataclass
class Batch:
    """Padded tensors for one step. Masks are bool with True = real token.

    src (B, S) ends with eos; tgt_in (B, T) starts with bos; tgt_out (B, T) ends with eos. With guided
    alignment, `links` (B, T, S) is True where the target subword tgt_out[b, t] is linked to the source
    subword src[b, s] (never at eos or padding).
    """

    src: Tensor  # (batch, src_len)
    src_mask: Tensor  # (batch, 1, src_len)
    tgt_in: Tensor  # (batch, tgt_len)
    tgt_out: Tensor  # (batch, tgt_len)
    index: Tensor  # (batch,) position of each example in the corpus
    links: Tensor | None = None  # (batch, tgt_len, src_len) bool

    @property
    def size(self) -> int:
        return self.src.size(0)

    def target_tokens(self) -> Tensor:
        """Non-pad target tokens (eos included), as a 0-d tensor (no host sync)."""
        return (self.tgt_out != PAD).sum()

    def tensors(self) -> dict[str, Tensor]:
        """The batch's tensors by field name, those that are None left out: the one place that iterates a
        batch's fields (a field that may be None breaks a loop over `fields(batch)`)."""
        return {f.name: t for f in fields(self) if (t := getattr(self, f.name)) is not None}

    def shapes(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """Each tensor's name and shape: what a step captured for this batch must have been captured for."""
        return tuple((name, tuple(t.shape)) for name, t in self.tensors().items())

    def apply(self, fn: Callable[[Tensor], Tensor]) -> Batch:
        """The batch with `fn` applied to each of its tensors (`links` stays None without labels)."""
        return replace(self, **{name: fn(t) for name, t in self.tensors().items()})

    def pin_memory(self) -> Batch:
        return self.apply(Tensor.pin_memory)

    def to(self, device: torch.device) -> Batch:
        return self.apply(lambda t: t.to(device, non_blocking=True))


def pad_ids(sequences: Sequence[IntSequence], length: int, prefix: int | None, suffix: int | None) -> Tensor:
    """Stack id arrays into a (len(sequences), length) tensor, optionally adding bos/eos, padded with PAD."""
    out = np.full((len(sequences), length), PAD, dtype=np.int64)
    start = 0 if prefix is None else 1
    if prefix is not None:
        out[:, 0] = prefix
    for row, seq in enumerate(sequences):
        out[row, start : start + len(seq)] = seq
        if suffix is not None:
            out[row, start + len(seq)] = suffix
    return torch.from_numpy(out)


def round_up(length: T, multiple: int) -> T:
    """`length` (an int or an integer array) rounded up to a multiple of `multiple`."""
    return -(-length // multiple) * multiple


def collate(
    src: Sequence[IntSequence],
    tgt: Sequence[IntSequence],
    index: IntSequence,
    multiple: int = 1,
    links: Sequence[np.ndarray] | None = None,
) -> Batch:
    """Pad one group of examples into a Batch (source gets eos; target gets bos/eos); `links` are each
    example's subword links, source and target position in turn (`EncodedCorpus.links`)."""
    src_len = round_up(max(len(s) for s in src) + 1, multiple)
    tgt_len = round_up(max(len(t) for t in tgt) + 1, multiple)
    src_ids = pad_ids(src, src_len, None, EOS)
    tgt_ids = pad_ids(tgt, tgt_len + 1, BOS, EOS)
    return Batch(
        src=src_ids,
        src_mask=(src_ids != PAD).unsqueeze(1),
        tgt_in=tgt_ids[:, :-1].masked_fill(tgt_ids[:, :-1] == EOS, PAD),
        tgt_out=tgt_ids[:, 1:],
        index=torch.as_tensor(index, dtype=torch.long),
        links=None if links is None else link_matrix(links, tgt_len, src_len),
    )


def link_matrix(links: Sequence[np.ndarray], tgt_len: int, src_len: int) -> Tensor:
    """Each example's links (s0, t0, s1, t1, …) as a (len(links), tgt_len, src_len) bool tensor."""
    out = np.zeros((len(links), tgt_len, src_len), dtype=bool)
    for row, pairs in enumerate(links):
        out[row, pairs[1::2], pairs[0::2]] = True
    return torch.from_numpy(out)


PACK_BLOCK = 1 << 16  # examples packed at a time by `length_order`: its temporaries stay small


def length_order(src_len: np.ndarray, tgt_len: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """Indices sorted by target length, then source length, then `tie`, then index: the order
    `np.lexsort((tie, src_len, tgt_len))` gives, at a quarter of its cost.

    `tie` holds draws of `Generator.random()` (multiples of 2**-53). One uint64 per example packs the lengths,
    the tie's leading bits and the index; a plain sort of those, then a re-sort of the rare runs whose
    truncated ties are equal, gives exactly lexsort's order. Beside the inputs it holds 8 bytes an example
    (the sorted keys, returned as the order) and a block's temporaries.
    """
    n, width = len(tie), int(src_len.max(initial=0)) + 1
    key_bits = (int(tgt_len.max(initial=0)) * width + width - 1).bit_length()  # holds every key
    index_bits = max(1, (n - 1).bit_length())
    tie_bits = min(53, 64 - key_bits - index_bits)
    if tie_bits < 1:  # lengths and indices alone fill 64 bits
        return np.lexsort((tie, src_len, tgt_len))
    packed = np.empty(n, np.uint64)
    for start in range(0, n, PACK_BLOCK):
        block = slice(start, start + PACK_BLOCK)
        key = tgt_len[block].astype(np.uint64) * np.uint64(width) + src_len[block].astype(np.uint64)
        ties = (tie[block] * 2.0**53).astype(np.uint64) >> np.uint64(53 - tie_bits)  # exact: 53-bit draws
        index = np.arange(start, min(start + PACK_BLOCK, n), dtype=np.uint64)
        packed[block] = (key << np.uint64(tie_bits + index_bits)) | (ties << np.uint64(index_bits)) | index
    packed.sort()
    same = _equal_neighbours(packed, index_bits)  # lengths and truncated tie agree with the next
    packed &= np.uint64((1 << index_bits) - 1)
    order = packed.view(np.int64)  # the indices, in place (each below 2**63)
    runs = np.split(same, np.flatnonzero(np.diff(same) > 1) + 1) if len(same) else []
    for run in runs:  # positions run[0] .. run[-1] + 1 share lengths and truncated tie
        span = order[run[0] : run[-1] + 2]
        order[run[0] : run[-1] + 2] = span[np.lexsort((span, tie[span]))]
    return order


def _equal_neighbours(packed: np.ndarray, low_bits: int) -> np.ndarray:
    """Positions i where packed[i] and packed[i + 1] agree but for their `low_bits` lowest bits, compared a
    block at a time."""
    found, limit = [np.zeros(0, np.int64)], np.uint64(1 << low_bits)
    for start in range(0, len(packed) - 1, PACK_BLOCK):
        stop = min(start + PACK_BLOCK, len(packed) - 1)
        found.append(start + np.flatnonzero((packed[start + 1 : stop + 1] ^ packed[start:stop]) < limit))
    return np.concatenate(found)


def greedy_ends(src: np.ndarray, tgt: np.ndarray, batch_tokens: int) -> list[int]:
    """Where each group ends when padded widths sorted by target width are cut greedily: a group takes the
    next example while (examples + 1) * (widest source + widest target) stays within `batch_tokens`.

    The cost of growing a group never falls (target widths are sorted, the source maximum only grows), so a
    group's end is one `searchsorted` over a window of running maxima. Inside a run of equal widths (a, b),
    a group that starts there holds exactly max(1, batch_tokens // (a + b)) examples: all such groups of the
    run are cut at once. The loop runs about twice per distinct pair of widths, not once per group.
    """
    ends: list[int] = []
    n, start = len(src), 0
    run_ends = [*(np.flatnonzero((src[1:] != src[:-1]) | (tgt[1:] != tgt[:-1])) + 1).tolist(), n]
    run = 0
    counts = np.arange(1, batch_tokens // 2 + 2)  # a pair is at least 2 tokens wide
    while start < n:
        while run_ends[run] <= start:
            run += 1
        width = int(src[start] + tgt[start])
        size = max(1, batch_tokens // width)
        if start + size <= run_ends[run]:  # whole groups of this run's widths
            groups = (run_ends[run] - start) // size
            ends.extend(range(start + size, start + groups * size + 1, size))
            start += groups * size
            continue
        window = min(n - start, size + 1)  # holds the first example that does not fit
        widths = np.maximum.accumulate(src[start : start + window]) + tgt[start : start + window]
        start += max(1, int(np.searchsorted(counts[:window] * widths, batch_tokens, side="right")))
        ends.append(start)
    return ends


def token_budget_groups(
    corpus: EncodedCorpus,
    batch_tokens: int,
    seed: int,
    multiple: int = 1,
    examples: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Group example indices into batches of at most `batch_tokens` padded source+target tokens.

    Examples are sorted by length (random tie-breaking from `seed`), cut into groups greedily, and the group
    order is shuffled with `seed`: every example appears in exactly one group, and the same seed gives the
    same groups. A single example longer than the budget still gets a group of its own. `examples` (corpus
    indices, repeats allowed: a multilingual epoch's draws) replaces the corpus's every example once.
    """
    src_len, tgt_len = corpus.lengths()
    drawn_src, drawn_tgt = (src_len, tgt_len) if examples is None else (src_len[examples], tgt_len[examples])
    rng = np.random.default_rng(seed)
    order = length_order(drawn_src, drawn_tgt, rng.random(len(drawn_src)))
    if examples is not None:
        order = examples[order]
    longest = max(src_len.max(initial=0), tgt_len.max(initial=0))
    padded = round_up(np.arange(longest + 1, dtype=src_len.dtype), multiple)  # length → padded length
    ends = greedy_ends(padded[src_len[order]], padded[tgt_len[order]], batch_tokens)
    groups = np.split(order, ends[:-1])
    random.Random(seed).shuffle(groups)
    return groups


def iterate_batches(
    corpus: EncodedCorpus, groups: Sequence[IntSequence], multiple: int = 1
) -> Iterator[Batch]:
    """Collate the given index groups in order (with their links when the corpus has them)."""
    for group in groups:
        links = None if corpus.links is None else [corpus.links[i] for i in group]
        yield collate([corpus.src[i] for i in group], [corpus.tgt[i] for i in group], group, multiple, links)


def search_cost(sentences: int, longest: int, width: int) -> int:
    """What a decoding batch costs against a search budget (`search.batch_tokens`, `nmt serve
    --max-batch-tokens`): its sentences × (the longest source in subwords + eos) × the hypotheses searched
    per sentence (`width`: the beam). Teacher forcing counts a pair as a sentence of width 1 whose source is
    the pair's source and target together."""
    return sentences * (longest + 1) * width


def search_groups(
    lengths: Sequence[int], budget: int | None, width: int, by_length: bool = True
) -> list[list[int]]:
    """Indices in order of length, longest first (ties in their order; with `by_length` false, in their own
    order), cut into batches that each cost at most `budget` (`search_cost` of sentences of these
    `lengths`): a sentence over the budget alone is a batch of its own. `budget` None: one batch."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i]) if by_length else range(len(lengths))
    groups: list[list[int]] = []
    longest = 0
    for i in order:
        grown = max(longest, lengths[i])
        if groups and (budget is None or search_cost(len(groups[-1]) + 1, grown, width) <= budget):
            groups[-1].append(i)
            longest = grown
        else:
            groups.append([i])
            longest = lengths[i]
    return groups
