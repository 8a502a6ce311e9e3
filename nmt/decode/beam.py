"""Batched beam search over the Seq2Seq contract, with its steps in place on the search's buffers (see
nmt/decode/search.py): replayed from a CUDA graph on a GPU, a step costs the host one launch.

The search rule, which extensions of the live hypotheses a step considers, is `best_extensions`; the loop
around it keeps each sentence's best finished hypotheses and moves the model's state.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import BOS, EOS
from nmt.decode.search import (
    Hypothesis,
    allowed,
    banned_tokens,
    hypotheses,
    is_check_step,
    length_penalty,
    output_limits,
    step_attention,
    store_state,
    with_model_tensors,
)
from nmt.decode.step_graphs import Buffers, run_step
from nmt.models.base import Memory, Seq2Seq, hypothesis_rows, unprefixed


@torch.inference_mode()
def beam_search(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, search: SearchConfig, with_attention: bool = False
) -> list[list[Hypothesis]]:
    """Each sentence's `search.nbest` best hypotheses, best first, scored by their length-normalised
    log-probability (nmt/decode/search.py `score`).

    Every sentence keeps `beam_size` live hypotheses. Each step takes the 2k best extensions: those ending in
    eos among the first k are finished (scored with the length penalty), the best k others live on. A sentence
    is done once it has k finished hypotheses or reaches its length limit, and from then on records nothing.
    At every check step, once at most half of the sentences are still searched, the done ones leave the batch
    (few distinct batch shapes, and later steps compute less). With `beam_size=1` this is exactly greedy.
    """
    k = search.beam_size
    limits = output_limits(src_mask, search.max_len_a, search.max_len_b)
    max_steps = int(limits.max()) + 1  # the host learns the loop's length once
    memory = model.encode(src, src_mask)  # per sentence: its k hypotheses share it
    buffers = start(model, memory, src, limits, search, max_steps, with_attention)
    step = functools.partial(beam_step, model, k, search.length_penalty)
    for t in range(max_steps):
        buffers = run_step(model, search.cuda_graphs, ("beam", k, search.length_penalty), step, buffers)
        if is_check_step(t):
            searched = buffers["finished_count"][buffers["active"]] < k  # (active,)
            left = int(searched.sum())  # the check's one host read
            if left == 0:
                break
            if left <= searched.size(0) // 2:
                buffers = keep_sentences(model, buffers, searched, left, k)
    return results(buffers, src_mask)


def start(
    model: Seq2Seq,
    memory: Memory,
    src: Tensor,
    limits: Tensor,
    search: SearchConfig,
    max_steps: int,
    with_attention: bool,
) -> Buffers:
    """The buffers of a beam search before its first step. Per active sentence: 'active' (its index in the
    batch), 'limits', 'scores' (k summed log-probabilities); per live hypothesis: 'last' (token), 'tokens'
    (bos, tokens …, eos-filled), 'attention'; per sentence of the batch: its n best finished hypotheses."""
    batch, k, n, device = src.size(0), search.beam_size, search.nbest, src.device
    scores = torch.zeros(batch, k, device=device)
    scores[:, 1:] = float("-inf")  # all beams start identical: keep one
    tokens = src.new_full((batch * k, max_steps + 1), EOS)
    tokens[:, 0] = BOS
    attention = {}
    if with_attention:  # one row per token and the final eos
        attention["attention"] = torch.zeros(batch * k, max_steps, src.size(1), device=device)
        attention["best_attention"] = torch.zeros(batch, n, max_steps, src.size(1), device=device)
    return with_model_tensors(
        memory,
        model.init_state(memory, max_steps, k),
        active=torch.arange(batch, device=device),
        limits=limits,
        banned=banned_tokens(device),
        t=torch.zeros((), dtype=torch.long, device=device),
        last=src.new_full((batch * k,), BOS),
        scores=scores,
        tokens=tokens,
        best_scores=torch.full((batch, n), float("-inf"), device=device),
        best_tokens=src.new_full((batch, n, max_steps + 1), EOS),
        finished_count=torch.zeros(batch, dtype=torch.long, device=device),
        **attention,
    )


def best_extensions(scores: Tensor, log_probs: Tensor, width: int) -> tuple[Tensor, Tensor, Tensor]:
    """The search rule: per sentence, the `width` best one-token extensions of its live hypotheses (scores (n,
    k)) by summed log-probability (log_probs (n * k, vocab)): their scores, the rows of the hypotheses they
    extend and their tokens, each (n, width)."""
    n, k = scores.shape
    vocab = log_probs.size(-1)
    candidates = (scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, k * vocab)
    top_scores, top_index = candidates.topk(min(width, k * vocab), dim=1)  # (n, width)
    rows = top_index // vocab + torch.arange(n, device=scores.device).unsqueeze(1) * k
    return top_scores, rows, top_index % vocab


def beam_step(model: Seq2Seq, k: int, alpha: float, buffers: Buffers) -> None:
    """One beam step, in place: extend, record the finished hypotheses, keep the k best live ones."""
    step = model.decode_step(buffers["last"], unprefixed(buffers, "memory."), unprefixed(buffers, "state."))
    t, active = buffers["t"], buffers["active"]
    at_limit = (buffers["limits"] <= t).repeat_interleave(k).unsqueeze(1)  # (active * k, 1)
    log_probs = torch.where(at_limit, only_eos(step.log_probs), allowed(step.log_probs, buffers["banned"]))
    top_scores, rows, top_token = best_extensions(buffers["scores"], log_probs, 2 * k)  # (active, 2k) each
    is_eos = top_token == EOS
    finished = is_eos & torch.isfinite(top_scores) & (buffers["finished_count"][active] < k).unsqueeze(1)
    finished[:, k:] = False
    if "attention" in buffers:
        buffers["attention"].index_copy_(1, t.view(1), step_attention(step).unsqueeze(1).float())
    record_finished(buffers, finished, top_scores / length_penalty(t + 1, alpha), rows)  # t tokens and eos
    buffers["finished_count"].index_add_(0, active, finished.sum(dim=1))
    live_scores, live = top_scores.masked_fill(is_eos, float("-inf")).topk(k, dim=1)  # (active, k)
    live_rows, tokens = rows.gather(1, live).view(-1), top_token.gather(1, live).view(-1)  # (active * k,)
    for name in ("tokens", "attention"):
        if name in buffers:
            buffers[name].copy_(buffers[name].index_select(0, live_rows))
    buffers["tokens"].index_copy_(1, (t + 1).view(1), tokens.unsqueeze(1))
    buffers["last"].copy_(tokens)
    buffers["scores"].copy_(live_scores)
    store_state(buffers, model.reorder_state(step.state, live_rows))
    t += 1


def record_finished(buffers: Buffers, finished: Tensor, normalised: Tensor, rows: Tensor) -> None:
    """Keep, per sentence, the n best finished hypotheses seen so far (in place, without a host sync).

    finished, normalised, rows: (active, 2k); the rows' tokens end before this step's eos (the columns after
    them hold eos). A stable sort ranks the kept ones first: a new hypothesis must score higher to displace an
    equal one.
    """
    active, best_scores = buffers["active"], buffers["best_scores"]
    candidates = normalised.masked_fill(~finished, float("-inf"))  # (active, 2k)
    merged = torch.cat([best_scores[active], candidates], dim=1)  # (active, n + 2k)
    order = merged.sort(dim=1, descending=True, stable=True).indices[:, : best_scores.size(1)]  # (active, n)
    best_scores[active] = merged.gather(1, order)
    for best, live in (("best_tokens", "tokens"), ("best_attention", "attention")):
        if live in buffers:
            keep_best(buffers[best], buffers[live], active, rows, order)


def keep_best(best: Tensor, live: Tensor, active: Tensor, rows: Tensor, order: Tensor) -> None:
    """best (batch, n, …) of the active sentences ← the `order`-chosen ones among themselves and the live
    rows `rows` (active, 2k) of live (rows, …)."""
    candidates = live.index_select(0, rows.view(-1)).view(*rows.shape, *live.shape[1:])  # (active, 2k, …)
    both = torch.cat([best[active], candidates], dim=1)  # (active, n + 2k, …)
    index = order.view(*order.shape, *[1] * (both.dim() - 2)).expand(-1, -1, *both.shape[2:])
    best[active] = both.gather(1, index)


def keep_sentences(model: Seq2Seq, buffers: Buffers, searched: Tensor, left: int, k: int) -> Buffers:
    """The buffers of the sentences still searched alone (`searched` True; `left` of them), in their order,
    found on the device by a stable sort."""
    keep = torch.argsort((~searched).to(torch.uint8), stable=True)[:left]  # (left,)
    rows = hypothesis_rows(keep, k)  # (left * k,)
    memory, state = unprefixed(buffers, "memory."), unprefixed(buffers, "state.")
    memory, state = model.select_sentences(memory, state, keep)
    moved = {name: buffers[name].index_select(0, keep) for name in ("active", "limits", "scores")}
    moved |= {
        name: buffers[name].index_select(0, rows)
        for name in ("last", "tokens", "attention")
        if name in buffers
    }
    kept = {
        name: t
        for name, t in buffers.items()
        if name not in moved and not name.startswith(("memory.", "state."))
    }
    return with_model_tensors(memory, state, **kept, **moved)


def results(buffers: Buffers, src_mask: Tensor) -> list[list[Hypothesis]]:
    """Each sentence's finished hypotheses, best first (fewer than n where fewer were found)."""
    best_scores = buffers["best_scores"]
    batch, n = best_scores.shape
    tokens = buffers["best_tokens"][:, :, 1:].reshape(batch * n, -1)  # (batch * n, max_steps)
    attention = buffers.get("best_attention")
    attention = None if attention is None else attention.flatten(0, 1)
    flat = hypotheses(tokens, best_scores.view(-1), attention, src_mask.repeat_interleave(n, dim=0))
    found = torch.isfinite(best_scores).tolist()
    rows = [zip(flat[i * n : (i + 1) * n], found[i], strict=True) for i in range(batch)]
    return [[h for h, ok in row if ok] for row in rows]


def only_eos(log_probs: Tensor) -> Tensor:
    """Log-probabilities that put all mass on eos (for hypotheses at their length limit)."""
    forced = torch.full_like(log_probs, float("-inf"))
    forced[:, EOS] = 0.0
    return forced
