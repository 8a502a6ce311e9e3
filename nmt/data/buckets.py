"""Static batch shapes for CUDA graphs and compiled training steps: a few (rows, source length, target length)
buckets planned from the shapes of an epoch's batches, and every batch padded up to the smallest bucket that
holds it, so that one captured graph serves all the batches of a bucket.

Padding adds nothing to the loss or to any gradient: an extra row is an empty sentence pair (source: eos
alone, so that no attention row is fully masked; target: bos, then nothing to predict) and extra columns are
padding (masked in the source, ignored by the loss in the target). Planning needs only the length arrays of
the corpus and the index groups of its batches, whatever corpus class produced them. A group of examples
whose batch would fit no bucket (an epoch of resampled directions draws groups no planned epoch had) is cut
by rows into groups that do (`fitting`): its loss is a sum over its examples, so the update is the same.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch

from nmt.data.batching import Batch, IntSequence
from nmt.data.special_tokens import BOS, EOS, PAD

log = logging.getLogger(__name__)

Shape = tuple[int, int, int]  # (rows, source length, target length) of a padded batch
MAX_DISTINCT = 256  # distinct shapes the planner merges exactly; more are first rounded to a coarser grid


def batch_shapes(
    groups: Sequence[IntSequence], src_len: np.ndarray, tgt_len: np.ndarray, multiple: int
) -> np.ndarray:
    """The shape `collate` gives each group of example indices, (groups, 3): its rows and its longest source
    and target (lengths as `lengths()` gives them, eos/bos included), rounded up to `multiple`."""
    longest = np.array([(src_len[g].max(), tgt_len[g].max()) for g in map(list, groups)]).reshape(-1, 2)
    padded = -(-longest // multiple) * multiple
    return np.column_stack([[len(g) for g in groups], padded]).astype(np.int64)


def padded_tokens(shapes: np.ndarray) -> np.ndarray:
    """Source + target tokens (padding included) of batches of these shapes. (...,)"""
    return shapes[..., 0] * (shapes[..., 1] + shapes[..., 2])


def plan_buckets(shapes: np.ndarray, max_shapes: int) -> np.ndarray:
    """At most `max_shapes` bucket shapes (buckets, 3) such that every row of `shapes` fits one (rows and
    both lengths at most the bucket's).

    Greedy: start from the distinct shapes, then repeatedly merge (elementwise maximum) the two buckets whose
    merge adds the fewest padded tokens, weighting each bucket by the batches it serves.
    """
    buckets, counts = np.unique(_coarsened(shapes), axis=0, return_counts=True)
    weights = counts.astype(np.float64)
    while len(buckets) > max_shapes:
        merged = np.maximum(buckets[:, None], buckets[None])  # (n, n, 3)
        alone = weights * padded_tokens(buckets)  # (n,)
        cost = (weights[:, None] + weights[None]) * padded_tokens(merged) - alone[:, None] - alone[None]
        np.fill_diagonal(cost, np.inf)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        buckets[i], weights[i] = merged[i, j], weights[i] + weights[j]
        buckets, weights = np.delete(buckets, j, axis=0), np.delete(weights, j)
    return buckets[np.argsort(padded_tokens(buckets), kind="stable")]


def _coarsened(shapes: np.ndarray) -> np.ndarray:
    """`shapes`, or when they hold more than MAX_DISTINCT distinct rows, each value rounded up to a grid with
    fewer significant bits (at most 1/8, then 1/4 … larger) until they do not."""
    shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 3)
    for bits in (3, 2, 1, 0):
        if len(np.unique(shapes, axis=0)) <= MAX_DISTINCT:
            break
        step = 2 ** np.maximum(np.floor(np.log2(np.maximum(shapes, 1))).astype(np.int64) - bits, 0)
        shapes = -(-shapes // step) * step
    return shapes


def pad_batch(batch: Batch, shape: Shape) -> Batch:
    """`batch` padded to `shape`: extra rows are empty pairs (index -1), extra columns padding (no links)."""
    rows, src_len, tgt_len = shape
    size, old_src, old_tgt = batch.size, batch.src.size(1), batch.tgt_in.size(1)
    src = batch.src.new_full((rows, src_len), PAD)  # (rows, src_len)
    src[:size, :old_src], src[size:, 0] = batch.src, EOS
    tgt_in = batch.tgt_in.new_full((rows, tgt_len), PAD)  # (rows, tgt_len)
    tgt_in[:size, :old_tgt], tgt_in[size:, 0] = batch.tgt_in, BOS
    tgt_out = batch.tgt_out.new_full((rows, tgt_len), PAD)
    tgt_out[:size, :old_tgt] = batch.tgt_out
    index = torch.cat([batch.index, batch.index.new_full((rows - size,), -1)])
    links = None
    if batch.links is not None:
        links = batch.links.new_zeros((rows, tgt_len, src_len))  # (rows, tgt_len, src_len)
        links[:size, :old_tgt, :old_src] = batch.links
    return Batch(src, (src != PAD).unsqueeze(1), tgt_in, tgt_out, index, links)


class Buckets:
    """A planned set of batch shapes; `pad` maps batches onto them."""

    def __init__(self, shapes: np.ndarray) -> None:
        self.shapes: list[Shape] = [(int(n), int(s), int(t)) for n, s, t in shapes]  # smallest first
        self.unplanned: set[Shape] = set()

    @classmethod
    def plan(cls, shapes: np.ndarray, max_shapes: int) -> Buckets:
        return cls(plan_buckets(shapes, max_shapes))

    def __len__(self) -> int:
        return len(self.shapes)

    def fit(self, shape: Shape) -> Shape | None:
        """The smallest bucket (fewest padded tokens) that holds a batch of `shape`, or None."""
        return next((b for b in self.shapes if all(x <= y for x, y in zip(shape, b, strict=True))), None)

    def fitting(self, group: np.ndarray, shape: Shape) -> list[np.ndarray]:
        """`group` (example indices, its batch of `shape`) as groups whose batches fit a bucket: itself when
        it fits one, else cut into runs of as many rows as the roomiest bucket long enough for it holds
        (itself when none is: it then runs with its own shape)."""
        if self.fit(shape) is not None:
            return [group]
        rows = max((b[0] for b in self.shapes if b[1] >= shape[1] and b[2] >= shape[2]), default=len(group))
        return [group[start : start + rows] for start in range(0, len(group), rows)]

    def pad(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        """Each batch padded to its bucket; a batch that fits none passes as it is (logged once per shape)."""
        for batch in batches:
            shape = (batch.size, batch.src.size(1), batch.tgt_in.size(1))
            bucket = self.fit(shape)
            if bucket is None and shape not in self.unplanned:
                self.unplanned.add(shape)
                log.warning("batch shape %s fits no planned static shape; it runs with its own", _show(shape))
            yield batch if bucket is None or bucket == shape else pad_batch(batch, bucket)

    def describe(self) -> str:
        return f"{len(self)} static batch shapes (rows×source×target): " + ", ".join(map(_show, self.shapes))


def _show(shape: Shape) -> str:
    return "×".join(map(str, shape))
