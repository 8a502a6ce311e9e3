"""Greedy outputs and alignments of two engines that compute one model with different arithmetic (nmt's
PyTorch search and CTranslate2, or transformers): equal wherever torch's margin is clear.

An argmax over float32 scores that two libraries (or one at another thread count) compute in different orders
flips where two candidates are within rounding of each other, so an exact comparison fails on such ties, on
some machines and not others. `assert_equal_but_for_ties` therefore lets the two differ only at a near tie of
torch's own scores, found by a teacher-forced pass over torch's output: at the first token where they part
(both tokens' log-probabilities within `LOG_PROB_TIE`; later tokens follow different prefixes and are not
compared) and at a link of a token they share (both source positions' weights within `ATTENTION_TIE`, in the
rows the engines' reading of the attention aligns with: nmt/align/reading.py; a token the null slot leaves
unlinked weighs what it gives the source's eos)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from nmt.align.reading import SEARCH_READING, Reading
from nmt.data.batching import collate
from nmt.data.special_tokens import EOS
from nmt.decode.search import Hypothesis
from nmt.models.base import Seq2Seq, Wanted

LOG_PROB_TIE = 1e-3  # the engines' log-probabilities agree to about 1e-5; a clear margin is far above this
ATTENTION_TIE = 1e-4  # their attention weights agree to about 1e-5 (test_export.py compares them)


@torch.inference_mode()
def teacher_forced(
    model: Seq2Seq,
    source: Sequence[int],
    tokens: Sequence[int],
    prefix: Sequence[int] = (),
    reading: Reading = SEARCH_READING,
) -> tuple[Tensor, Tensor]:
    """The log-probabilities (len(tokens) + 1, vocab) of `model` at each step producing `tokens` and eos from
    `source` (ids without eos), after the forced `prefix`, and the attention rows that align each token under
    `reading` (default: search's, the last decoder layer's mean of heads; len(tokens), len(source) + 1)."""
    batch = collate([source], [[*prefix, *tokens]], [0]).to(model.device)
    output = model(batch.src, batch.src_mask, batch.tgt_in, Wanted(attention=True))
    assert output.logits is not None and output.attention is not None
    rows = slice(len(prefix), len(prefix) + len(tokens) + 1)
    log_probs = output.logits[0, rows].float().log_softmax(dim=-1)
    heads = output.attention[0, reading.layer, :, rows].float()  # (heads, len(tokens) + 1, source + 1)
    paid = heads.mean(dim=0) if reading.heads is None else heads[list(reading.heads)].mean(dim=0)
    shift = 1 if reading.rule == "shift" else 0
    return log_probs.cpu(), paid[shift : shift + len(tokens)].cpu()


def assert_equal_but_for_ties(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    ours: Sequence[Hypothesis],
    theirs: Sequence[Hypothesis],
    prefix: Sequence[int] = (),
    reading: Reading = SEARCH_READING,
) -> list[int]:
    """Assert that the other engine's greedy hypotheses `theirs` equal `ours` (nmt's search with `model`, each
    after the forced `prefix`) token for token and, where both have them, link for link under `reading`, but
    at near ties of torch's scores (see the module); returns the indices of the sentences that differ."""
    assert len(ours) == len(theirs) == len(sources)
    differ = []
    for i, (source, mine, other) in enumerate(zip(sources, ours, theirs, strict=True)):
        if (mine.tokens, mine.alignment) != (other.tokens, other.alignment):
            differ.append(i)
            assert_a_tie(model, source, mine, other, prefix, f"sentence {i}", reading)
    return differ


def assert_a_tie(
    model: Seq2Seq,
    source: Sequence[int],
    mine: Hypothesis,
    other: Hypothesis,
    prefix: Sequence[int],
    name: str,
    reading: Reading = SEARCH_READING,
) -> None:
    """Where two hypotheses of one source part, torch's scores tie: at the first token (or eos) that
    differs, and at each link of a token before it (or of that token, which reads the same prefix, but
    under Shift-Att, which reads the token)."""
    log_probs, attention = teacher_forced(model, source, mine.tokens, prefix, reading)
    a, b = [*mine.tokens, EOS], [*other.tokens, EOS]
    shared = min(len(a), len(b))
    parted = next((t for t in range(shared) if a[t] != b[t]), None)
    where = f"{name}: ours {mine.tokens} {mine.alignment}, theirs {other.tokens} {other.alignment}"
    if parted is not None:
        gap = abs(log_probs[parted, a[parted]] - log_probs[parted, b[parted]]).item()
        assert gap <= LOG_PROB_TIE, f"{where}: token {parted} differs, log-probabilities {gap:.1e} apart"
        shared = parted + (0 if reading.rule == "shift" else 1)  # a shifted link reads the token itself
    assert (mine.alignment is None) == (other.alignment is None), where
    if mine.alignment is None or other.alignment is None:
        return
    for t, (x, y) in enumerate(zip(mine.alignment[:shared], other.alignment[:shared], strict=False)):
        gap = abs(attention[t, -1 if x is None else x] - attention[t, -1 if y is None else y]).item()
        assert x == y or gap <= ATTENTION_TIE, f"{where}: token {t} links {x} or {y}, weights {gap:.1e} apart"
