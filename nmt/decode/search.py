"""Greedy and beam search over the Seq2Seq contract: one implementation for every model type.

Both keep the GPU busy. A search step, the model's decoding step and the bookkeeping after it, works in place
on a dict of tensors (its buffers: the model's memory and state, the tokens so far, the scores), with no host
sync; whether every sentence is finished is read back to the host only every `CHECK_EVERY` steps. Steps taken
after the last sentence finished change nothing: finished greedy rows only add eos, and a beam sentence that
is done records no further hypothesis. With `cuda_graphs` on a GPU, each whole step is replayed from a CUDA
graph captured once per shape of its buffers (nmt/decode/step_graphs.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import overload

import torch
from torch import Tensor

from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.decode.step_graphs import Buffers, run_step
from nmt.models.base import Memory, Seq2Seq, State, Step, prefixed, unprefixed

CHECK_EVERY = 8  # decoding steps between two reads of "is every sentence finished?"


@dataclass(frozen=True)
class Hypothesis:
    """One output of search: tokens without bos/eos, its score (see `greedy` and `beam_search`) and, when
    asked, the encoder-decoder attention paid for each token and the final eos (len(tokens) + 1, src_len)."""

    tokens: list[int]
    score: float
    attention: Tensor | None = None


def output_limits(src_mask: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Maximum number of output tokens before eos for each sentence: a * source length + b. (batch,)"""
    src_len = src_mask.sum(dim=(1, 2))  # (batch,)
    return (src_len * max_len_a + max_len_b).long().clamp(min=1)


def banned_tokens(device: torch.device) -> Tensor:
    """The ids search never outputs (padding, bos), made once per search. (2,)"""
    return torch.tensor([PAD, BOS], device=device)


def allowed(log_probs: Tensor, banned: Tensor) -> Tensor:
    """Log-probabilities with the `banned` ids ruled out as outputs. (batch, vocab)"""
    return log_probs.index_fill(1, banned, float("-inf"))


def trim(rows: Tensor) -> list[list[int]]:
    """Token rows (batch, length) → lists cut at the first eos (eos and later tokens dropped)."""
    out = []
    for row in rows.tolist():
        out.append(row[: row.index(EOS)] if EOS in row else row)
    return out


def hypotheses(rows: Tensor, scores: Tensor, attention: Tensor | None, src_mask: Tensor) -> list[Hypothesis]:
    """Hypotheses from token rows (n, length), scores (n,) and attention (n, length, src_len) or None, whose
    source rows are given by src_mask (n, 1, src_len); the attention is cut to tokens + eos and the source."""
    tokens, src_len = trim(rows), src_mask.sum(dim=(1, 2)).tolist()
    if attention is None:
        return [Hypothesis(t, s) for t, s in zip(tokens, scores.tolist(), strict=True)]
    attention = attention.float().cpu()
    return [
        Hypothesis(t, s, attention[i, : len(t) + 1, : src_len[i]])
        for i, (t, s) in enumerate(zip(tokens, scores.tolist(), strict=True))
    ]


def step_attention(step: Step) -> Tensor:
    """The step's attention (batch, src_len), or a clear error for a model that exposes none."""
    if step.attention is None:
        raise ValueError("search with attention needs a model whose decode_step returns its attention")
    return step.attention


def is_check_step(t: int) -> bool:
    """Whether step `t` ends with the host reading how many sentences are still searched."""
    return t % CHECK_EVERY == CHECK_EVERY - 1


def with_model_tensors(memory: Memory, state: State, **buffers: Tensor) -> Buffers:
    """The buffers of a search: the model's memory and state (keys prefixed) and the search's own tensors."""
    return prefixed(memory, "memory.") | prefixed(state, "state.") | buffers


def store_state(buffers: Buffers, state: State) -> None:
    """Write the model's new state into the buffers, in place (tensors the step already updated in place are
    the buffers themselves)."""
    for name, tensor in state.items():
        buffer = buffers[f"state.{name}"]
        if tensor.shape != buffer.shape:
            raise ValueError(
                f"decode_step changed the shape of the state's {name!r}: {buffer.shape} → {tensor.shape}"
            )
        if tensor is not buffer:
            buffer.copy_(tensor)


@torch.inference_mode()
def greedy(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, search: SearchConfig, with_attention: bool = False
) -> list[list[Hypothesis]]:
    """Most probable next token at every step; one hypothesis per sentence, scored as beam search scores
    (`score`): its summed log-probability (eos included; an eos forced by the length limit adds 0) divided by
    the length penalty. `search.beam_size` is ignored.
    """
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    limits = output_limits(src_mask, search.max_len_a, search.max_len_b)
    max_steps = int(limits.max()) + 1  # the host learns the loop's length once
    attention = (
        {"attention": torch.zeros(batch, max_steps, src.size(1), device=device)} if with_attention else {}
    )
    buffers = with_model_tensors(
        memory,
        model.init_state(memory, max_steps),
        limits=limits,
        banned=banned_tokens(device),
        t=torch.zeros((), dtype=torch.long, device=device),
        last=src.new_full((batch,), BOS),
        finished=torch.zeros(batch, dtype=torch.bool, device=device),
        scores=torch.zeros(batch, device=device),
        outputs=src.new_full((batch, max_steps), EOS),
        **attention,
    )
    step = functools.partial(greedy_step, model)
    for t in range(max_steps):
        buffers = run_step(model, search.cuda_graphs, ("greedy",), step, buffers)
        if is_check_step(t) and bool(buffers["finished"].all()):
            break
    found = hypotheses(buffers["outputs"], buffers["scores"], buffers.get("attention"), src_mask)
    return [[replace(h, score=score(h.score, len(h.tokens), search.length_penalty))] for h in found]


def greedy_step(model: Seq2Seq, buffers: Buffers) -> None:
    """One greedy step, in place: every unfinished sentence takes its most probable token."""
    step = model.decode_step(buffers["last"], unprefixed(buffers, "memory."), unprefixed(buffers, "state."))
    t = buffers["t"]
    log_probs = allowed(step.log_probs, buffers["banned"])  # (batch, vocab)
    stop = buffers["finished"] | (buffers["limits"] <= t)
    token = log_probs.argmax(dim=-1).masked_fill(stop, EOS)  # (batch,)
    buffers["scores"] += log_probs.gather(1, token.unsqueeze(1)).squeeze(1).masked_fill(stop, 0.0)
    buffers["outputs"].index_copy_(1, t.view(1), token.unsqueeze(1))
    if "attention" in buffers:
        buffers["attention"].index_copy_(1, t.view(1), step_attention(step).unsqueeze(1).float())
    buffers["last"].copy_(token)
    buffers["finished"] |= token == EOS
    store_state(buffers, step.state)
    t += 1


@overload
def length_penalty(length: int, alpha: float) -> float: ...
@overload
def length_penalty(length: Tensor, alpha: float) -> Tensor: ...
def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length normalisation (Wu et al. 2016): ((5 + length) / 6) ** alpha; a tensor `length` (beam
    search's step counter, on the device) gives a tensor."""
    return ((5.0 + length) / 6.0) ** alpha


def score(log_probability: float, tokens: int, alpha: float) -> float:
    """The score of every hypothesis, whatever the beam size: the summed log-probability of its `tokens` and
    eos, divided by the length penalty of that length (alpha 0: the plain sum)."""
    return log_probability / length_penalty(tokens + 1, alpha)
