"""Encoded sentence pairs → length-bucketed, token-budget batches of padded tensors and masks."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import Tensor

from nmt.data.tokenizer import BOS, EOS, PAD


@dataclass
class Batch:
    """Padded tensors for one step. Masks are bool with True = real token.

    src (B, S) ends with eos; tgt_in (B, T) starts with bos; tgt_out (B, T) ends with eos.
    """

    src: Tensor  # (batch, src_len)
    src_mask: Tensor  # (batch, 1, src_len)
    tgt_in: Tensor  # (batch, tgt_len)
    tgt_out: Tensor  # (batch, tgt_len)
    index: Tensor  # (batch,) position of each example in the corpus

    @property
    def size(self) -> int:
        return self.src.size(0)

    def target_tokens(self) -> Tensor:
        """Non-pad target tokens (eos included), as a 0-d tensor (no host sync)."""
        return (self.tgt_out != PAD).sum()

    def pin_memory(self) -> Batch:
        return Batch(*(getattr(self, f.name).pin_memory() for f in fields(self)))

    def to(self, device: torch.device) -> Batch:
        return Batch(*(getattr(self, f.name).to(device, non_blocking=True) for f in fields(self)))


def pad_ids(sequences: Sequence[np.ndarray], length: int, prefix: int | None, suffix: int | None) -> Tensor:
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


def round_up(length: int, multiple: int) -> int:
    return -(-length // multiple) * multiple


def collate(
    src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], index: Sequence[int], multiple: int = 1
) -> Batch:
    """Pad one group of examples into a Batch (source gets eos; target gets bos/eos)."""
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
    )


@dataclass(frozen=True)
class EncodedCorpus:
    """Subword ids of every pair, encoded once; `src[i]`, `tgt[i]` are int32 arrays without bos/eos."""

    src: list[np.ndarray]
    tgt: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.src)

    @classmethod
    def from_ids(cls, src: list[list[int]], tgt: list[list[int]]) -> EncodedCorpus:
        return cls([np.asarray(s, dtype=np.int32) for s in src], [np.asarray(t, dtype=np.int32) for t in tgt])

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Source and target lengths in tokens, eos/bos included."""
        return np.array([len(s) + 1 for s in self.src]), np.array([len(t) + 1 for t in self.tgt])


def token_budget_groups(
    corpus: EncodedCorpus, batch_tokens: int, seed: int, multiple: int = 1
) -> list[list[int]]:
    """Group example indices into batches of at most `batch_tokens` padded source+target tokens.

    Examples are sorted by length (random tie-breaking from `seed`), cut into groups greedily, and the group
    order is shuffled with `seed`: every example appears in exactly one group, and the same seed gives the
    same groups. A single example longer than the budget still gets a group of its own.
    """
    src_len, tgt_len = corpus.lengths()
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(corpus)), src_len, tgt_len))
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


def iterate_batches(
    corpus: EncodedCorpus, groups: Sequence[Sequence[int]], multiple: int = 1
) -> Iterator[Batch]:
    """Collate the given index groups in order."""
    for group in groups:
        yield collate([corpus.src[i] for i in group], [corpus.tgt[i] for i in group], group, multiple)


def sorted_groups(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped `batch_size` at a time in order of length (longest first), for decoding."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
