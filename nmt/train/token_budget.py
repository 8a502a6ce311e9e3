"""`train.batch_tokens: auto`: the largest token budget whose worst batch fits in GPU memory, with a margin.

A few probe updates run the longest training sentences at two budgets; peak memory grows about linearly with
the budget, so the two points predict the budget that fills `MARGIN` of the GPU. One more probe checks the
prediction (and backs off while it does not fit). The budget is capped so an epoch has at least
`MIN_UPDATES_PER_EPOCH` batches: memory alone would give a small corpus a handful of giant updates. A probe
runs the training step itself (`Update.probe`: the alignment loss and its full-context pass included) on a
batch as training collates it (its alignment links included).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch

from nmt.data.arrays import EncodedCorpus
from nmt.data.batching import Batch, collate, round_up

log = logging.getLogger(__name__)

MARGIN = 0.85  # of the GPU's memory the chosen budget may use at its worst batch
FIRST_PROBE = 2048  # tokens of the first probe; the second doubles it
MIN_UPDATES_PER_EPOCH = 10
CPU_BATCH_TOKENS = 4096  # `auto` without a GPU: nothing to fit, a budget that suits small CPU runs
ROUND_TO = 256


def choose_batch_tokens(probe: Callable[[int], int | None], capacity: int, ceiling: int) -> int:
    """The budget (a multiple of ROUND_TO, at most `ceiling`) whose probe peak stays within MARGIN of
    `capacity` bytes. `probe(tokens)` returns the peak bytes of one update at that budget, None when it ran
    out of memory."""
    first, second = min(FIRST_PROBE, ceiling), min(2 * FIRST_PROBE, ceiling)
    limit = MARGIN * capacity
    low = probe(first)
    if low is None or low > limit:
        return _fitting_below(probe, int(first * 0.8), limit)
    high = probe(second) if second > first else None
    if high is None or high > limit:
        return first
    per_token = max(high - low, 1) / (second - first)
    predicted = int(second + (limit - high) / per_token)
    return _fitting_below(probe, max(second, min(predicted, ceiling)), limit, floor=second)


def _fitting_below(
    probe: Callable[[int], int | None], tokens: int, limit: float, floor: int = ROUND_TO
) -> int:
    """The first of tokens, 0.8·tokens, 0.64·tokens … (rounded down to ROUND_TO) whose probe fits; `floor` is
    known to fit (or is the smallest budget worth trying)."""
    while True:
        tokens = max(floor, tokens // ROUND_TO * ROUND_TO)
        if tokens <= floor:
            return floor
        peak = probe(tokens)
        if peak is not None and peak <= limit:
            return tokens
        tokens = int(tokens * 0.8)


def worst_batch(corpus: EncodedCorpus, tokens: int, multiple: int) -> Batch:
    """A batch of the corpus's longest pairs filling `tokens` (padded source + target) as training would."""
    src_len, tgt_len = corpus.lengths()
    order = np.argsort(-(src_len + tgt_len), kind="stable")
    longest = order[0]
    per_pair = round_up(int(src_len[longest]), multiple) + round_up(int(tgt_len[longest]), multiple)
    chosen = np.resize(order, max(1, tokens // per_pair)).tolist()  # repeats pairs if the corpus is small
    links = None if corpus.links is None else [corpus.links[i] for i in chosen]
    src, tgt = [corpus.src[i] for i in chosen], [corpus.tgt[i] for i in chosen]
    return collate(src, tgt, chosen, multiple, links)


def fit_batch_tokens(
    model: torch.nn.Module,
    step: Callable[[Batch], object],
    corpus: EncodedCorpus,
    multiple: int,
    device: torch.device,
) -> int:
    """The `auto` budget for training `model` on `corpus` on `device` (CPU_BATCH_TOKENS off the GPU), where
    `step(batch)` is a training step's forward and backward on a batch on the device (`Update.probe`).

    Probes run `step` with the optimizer's state (two fp32 copies of the weights, as AdamW keeps) held in
    memory, inside a forked RNG so training draws the same dropout masks as without them.
    """
    if device.type != "cuda":
        log.info("train.batch_tokens: auto uses %d tokens per batch without a GPU", CPU_BATCH_TOKENS)
        return CPU_BATCH_TOKENS
    capacity = torch.cuda.get_device_properties(device).total_memory
    src_len, tgt_len = corpus.lengths()
    ceiling = max(ROUND_TO, int((src_len + tgt_len).sum()) // MIN_UPDATES_PER_EPOCH // ROUND_TO * ROUND_TO)
    optimizer_state = [torch.empty_like(p, dtype=torch.float32) for p in model.parameters() for _ in "ma"]
    peaks: dict[int, int | None] = {}

    def probe(tokens: int) -> int | None:
        peaks[tokens] = peak_memory(step, worst_batch(corpus, tokens, multiple), device)
        return peaks[tokens]

    with torch.random.fork_rng(devices=[device]):
        chosen = choose_batch_tokens(probe, capacity, ceiling)
    del optimizer_state
    torch.cuda.empty_cache()
    probed = ", ".join(
        f"{tokens}: {'out of memory' if peak is None else f'{peak / 2**30:.1f} GiB'}"
        for tokens, peak in peaks.items()
    )
    log.info(
        "train.batch_tokens: auto chose %d tokens per batch (%.0f%% of %.1f GiB at the longest sentences, at "
        "most %d for %d batches per epoch; probes %s)",
        chosen,
        100 * MARGIN,
        capacity / 2**30,
        ceiling,
        MIN_UPDATES_PER_EPOCH,
        probed,
    )
    return chosen


def peak_memory(step: Callable[[Batch], object], batch: Batch, device: torch.device) -> int | None:
    """Peak bytes allocated on the GPU by `step(batch)` (None: out of memory)."""
    batch = batch.to(device)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    try:
        step(batch)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device)
    except torch.cuda.OutOfMemoryError:
        return None
    finally:
        torch.cuda.empty_cache()
