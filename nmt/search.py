"""Greedy and beam search over the Seq2Seq contract: one implementation for every model type."""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.data.tokenizer import BOS, EOS, PAD
from nmt.models.base import Seq2Seq, select_rows


def output_limits(src_mask: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Maximum number of output tokens before eos for each sentence: a * source length + b. (batch,)"""
    src_len = src_mask.sum(dim=(1, 2))  # (batch,)
    return (src_len * max_len_a + max_len_b).long().clamp(min=1)


def allowed(log_probs: Tensor) -> Tensor:
    """Log-probabilities with padding and bos ruled out as outputs. (batch, vocab)"""
    return log_probs.index_fill(1, torch.tensor([PAD, BOS], device=log_probs.device), float("-inf"))


def trim(rows: Tensor) -> list[list[int]]:
    """Token rows (batch, length) → lists cut at the first eos (eos and later tokens dropped)."""
    out = []
    for row in rows.tolist():
        out.append(row[: row.index(EOS)] if EOS in row else row)
    return out


@torch.inference_mode()
def greedy(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, max_len_a: float, max_len_b: int
) -> list[list[int]]:
    """Most probable next token at every step; returns each sentence's tokens without bos/eos."""
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    limits = output_limits(src_mask, max_len_a, max_len_b)
    token = src.new_full((src.size(0),), BOS)  # (batch,)
    finished = torch.zeros_like(token, dtype=torch.bool)
    outputs = []
    for t in range(int(limits.max()) + 1):
        step = model.decode_step(token, memory, state)
        token = (
            allowed(step.log_probs).argmax(dim=-1).masked_fill(limits <= t, EOS).masked_fill(finished, EOS)
        )
        outputs.append(token)
        state, finished = step.state, finished | (token == EOS)
        if finished.all():
            break
    return trim(torch.stack(outputs, dim=1))


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation (Wu et al. 2016): ((5 + length) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.inference_mode()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    src_mask: Tensor,
    beam_size: int,
    alpha: float,
    max_len_a: float,
    max_len_b: int,
) -> list[list[int]]:
    """Batched beam search; returns each sentence's best hypothesis (by length-normalised score).

    Every sentence keeps `beam_size` live hypotheses. Each step takes the 2k best extensions: those ending in
    eos among the first k are finished (scored with the length penalty), the best k others live on. A sentence
    is done once it has k finished hypotheses or reaches its length limit; done sentences leave the batch, so
    later steps only compute what is still searched. With `beam_size=1` this is exactly greedy search.
    """
    batch, k = src.size(0), beam_size
    device = src.device
    limits = output_limits(src_mask, max_len_a, max_len_b)
    memory = select_rows(model.encode(src, src_mask), torch.arange(batch, device=device).repeat_interleave(k))
    state = model.init_state(memory)
    active = torch.arange(batch, device=device)  # original sentence of each active row of `scores`
    scores = torch.zeros(batch, k, device=device)  # (active, k) summed log-probs of live hypotheses
    scores[:, 1:] = float("-inf")  # all beams start identical: keep one
    tokens = src.new_full((batch * k, 1), BOS)  # (active * k, length)
    max_steps = int(limits.max()) + 1
    best_scores = torch.full((batch,), float("-inf"), device=device)
    best_tokens = src.new_full((batch, max_steps + 1), EOS)  # bos, tokens …, eos
    finished_count = torch.zeros(batch, dtype=torch.long, device=device)
    for t in range(max_steps):
        n = active.size(0)
        step = model.decode_step(tokens[:, -1], memory, state)
        vocab = step.log_probs.size(-1)
        at_limit = (limits[active] <= t).repeat_interleave(k)  # (n * k,)
        log_probs = torch.where(at_limit.unsqueeze(1), _only_eos(step.log_probs), allowed(step.log_probs))
        candidates = (scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)  # (n, 2k)
        top_beam, top_token = top_index // vocab, top_index % vocab
        rows = top_beam + torch.arange(n, device=device).unsqueeze(1) * k  # (n, 2k) rows of `tokens`
        is_eos = top_token == EOS
        finished = is_eos & torch.isfinite(top_scores)
        finished[:, k:] = False
        _record_finished(
            finished,
            top_scores / length_penalty(t + 1, alpha),
            rows,
            tokens,
            active,
            best_scores,
            best_tokens,
        )
        finished_count.index_add_(0, active, finished.sum(dim=1))
        live_scores, live = top_scores.masked_fill(is_eos, float("-inf")).topk(k, dim=1)  # (n, k)
        live_rows = rows.gather(1, live).view(-1)  # (n * k,)
        tokens = torch.cat([tokens[live_rows], top_token.gather(1, live).view(-1, 1)], dim=1)
        scores, state = live_scores, select_rows(step.state, live_rows)
        searching = finished_count[active] < k  # (n,)
        if not searching.all():
            if not searching.any():
                break
            keep = searching.nonzero().squeeze(1)
            keep_rows = (keep.unsqueeze(1) * k + torch.arange(k, device=device)).view(-1)
            active, scores, tokens = active[keep], scores[keep], tokens[keep_rows]
            memory, state = select_rows(memory, keep_rows), select_rows(state, keep_rows)
    return trim(best_tokens[:, 1:])


def _only_eos(log_probs: Tensor) -> Tensor:
    """Log-probabilities that put all mass on eos (for hypotheses at their length limit)."""
    forced = torch.full_like(log_probs, float("-inf"))
    forced[:, EOS] = 0.0
    return forced


def _record_finished(
    finished: Tensor,
    normalised: Tensor,
    rows: Tensor,
    tokens: Tensor,
    active: Tensor,
    best_scores: Tensor,
    best_tokens: Tensor,
) -> None:
    """Keep, per sentence, the best finished hypothesis seen so far (in place, without a host sync).

    finished, normalised, rows: (active, 2k); tokens: (active * k, length) prefixes that end before eos.
    """
    candidate, position = normalised.masked_fill(~finished, float("-inf")).max(dim=1)  # (active,)
    improved = candidate > best_scores[active]
    prefix = tokens[rows.gather(1, position.unsqueeze(1)).squeeze(1)]  # (active, length)
    length = prefix.size(1)
    current = best_tokens[active]
    current[:, :length] = torch.where(improved.unsqueeze(1), prefix, current[:, :length])
    current[:, length] = torch.where(improved, EOS, current[:, length])
    best_tokens[active] = current
    best_scores[active] = torch.where(improved, candidate, best_scores[active])
