"""Greedy and beam search over the Seq2Seq contract: one implementation for every model type.

Both keep the GPU busy: the per-step bookkeeping stays on the device, and whether every sentence is finished
is read back to the host only every `CHECK_EVERY` steps (one host sync there, none in between). Steps taken
after the last sentence finished change nothing: finished greedy rows only add eos, and a beam sentence that
is done records no further hypothesis. With `cuda_graphs` on a GPU, each decoding step is replayed from a
CUDA graph captured once per batch shape (nmt/decode/step_graphs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.decode.step_graphs import decoder_steps
from nmt.models.base import Memory, Seq2Seq, State, Step, hypothesis_rows

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


@torch.inference_mode()
def greedy(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, search: SearchConfig, with_attention: bool = False
) -> list[list[Hypothesis]]:
    """Most probable next token at every step; one hypothesis per sentence, scored as beam search scores
    (`score`): its summed log-probability (eos included; an eos forced by the length limit adds 0) divided by
    the length penalty. `search.beam_size` is ignored.
    """
    memory = model.encode(src, src_mask)
    limits = output_limits(src_mask, search.max_len_a, search.max_len_b)
    max_steps = int(limits.max()) + 1  # the host learns the loop's length once
    state = model.init_state(memory, max_steps)
    decode, banned = decoder_steps(model, search.cuda_graphs), banned_tokens(src.device)
    token = src.new_full((src.size(0),), BOS)  # (batch,)
    finished = torch.zeros_like(token, dtype=torch.bool)
    scores = torch.zeros(src.size(0), device=src.device)  # (batch,)
    outputs, attention = [], []
    for t in range(max_steps):
        step = decode(token, memory, state)
        log_probs = allowed(step.log_probs, banned)  # (batch, vocab)
        stop = finished | (limits <= t)
        token = log_probs.argmax(dim=-1).masked_fill(stop, EOS)
        scores += log_probs.gather(1, token.unsqueeze(1)).squeeze(1).masked_fill(stop, 0.0)
        outputs.append(token)
        if with_attention:
            attention.append(step_attention(step).clone())  # a CUDA graph's replay overwrites its outputs
        state, finished = step.state, finished | (token == EOS)
        if is_check_step(t) and bool(finished.all()):
            break
    rows = torch.stack(outputs, dim=1)  # (batch, steps)
    stacked = torch.stack(attention, dim=1) if with_attention else None  # (batch, steps, src_len)
    found = hypotheses(rows, scores, stacked, src_mask)
    return [[replace(h, score=score(h.score, len(h.tokens), search.length_penalty))] for h in found]


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation (Wu et al. 2016): ((5 + length) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def score(log_probability: float, tokens: int, alpha: float) -> float:
    """The score of every hypothesis, whatever the beam size: the summed log-probability of its `tokens` and
    eos, divided by the length penalty of that length (alpha 0: the plain sum)."""
    return log_probability / length_penalty(tokens + 1, alpha)


@torch.inference_mode()
def beam_search(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, search: SearchConfig, with_attention: bool = False
) -> list[list[Hypothesis]]:
    """Batched beam search; returns each sentence's `search.nbest` best hypotheses, best first, scored by
    their length-normalised log-probability (`score`).

    Every sentence keeps `beam_size` live hypotheses. Each step takes the 2k best extensions: those ending in
    eos among the first k are finished (scored with the length penalty), the best k others live on. A sentence
    is done once it has k finished hypotheses or reaches its length limit, and from then on records nothing.
    At every check step, once at most half of the rows are still searched, the done sentences leave the batch
    (few distinct batch shapes, and later steps compute less). With `beam_size=1` this is exactly greedy.
    """
    k, device = search.beam_size, src.device
    limits = output_limits(src_mask, search.max_len_a, search.max_len_b)
    max_steps = int(limits.max()) + 1
    memory = model.encode(src, src_mask)  # per sentence: its k hypotheses share it
    beams = _Beams(
        model, model.init_state(memory, max_steps, k), k, search.nbest, max_steps, src, with_attention
    )
    decode, banned = decoder_steps(model, search.cuda_graphs), banned_tokens(device)
    for t in range(max_steps):
        step = decode(beams.tokens[:, -1], memory, beams.state)
        at_limit = (limits[beams.active] <= t).repeat_interleave(k)  # (active * k,)
        log_probs = torch.where(
            at_limit.unsqueeze(1), _only_eos(step.log_probs), allowed(step.log_probs, banned)
        )
        attention = step_attention(step) if with_attention else None
        beams.advance(log_probs, step.state, attention, length_penalty(t + 1, search.length_penalty))
        if is_check_step(t):
            searched = beams.searched()
            left = int(searched.sum())  # the check's one host read
            if left == 0:
                break
            if left <= searched.size(0) // 2:
                memory = beams.keep(searched, left, memory)
    return beams.results(src_mask)


class _Beams:
    """The live hypotheses of the sentences still in the batch (`active`), and each sentence's n best finished
    hypotheses (best first), all on the device; the model moves its state (`reorder_state`,
    `select_sentences`)."""

    def __init__(self, model: Seq2Seq, state: State, k: int, n: int, max_steps: int, src: Tensor,
                 with_attention: bool) -> None:  # fmt: skip
        batch, device = src.size(0), src.device
        self.model, self.state, self.k, self.n = model, state, k, n
        self.active = torch.arange(batch, device=device)  # original sentence of each row of `scores`
        self.scores = torch.zeros(batch, k, device=device)  # (active, k) summed log-probs of live hypotheses
        self.scores[:, 1:] = float("-inf")  # all beams start identical: keep one
        self.tokens = src.new_full((batch * k, 1), BOS)  # (active * k, length)
        self.best_scores = torch.full((batch, n), float("-inf"), device=device)
        self.best_tokens = src.new_full((batch, n, max_steps + 1), EOS)  # bos, tokens …, eos
        self.finished_count = torch.zeros(batch, dtype=torch.long, device=device)
        self.attention = torch.zeros(batch * k, 0, src.size(1), device=device) if with_attention else None
        self.best_attention = (  # (batch, n, max_steps, src_len): one row per token and the final eos
            torch.zeros(batch, n, max_steps, src.size(1), device=device) if with_attention else None
        )

    def searched(self) -> Tensor:
        """Which active sentences have fewer than k finished hypotheses. (active,)"""
        return self.finished_count[self.active] < self.k

    def advance(self, log_probs: Tensor, state: dict[str, Tensor], attention: Tensor | None,
                penalty: float) -> None:  # fmt: skip
        """Extend every live hypothesis by the step's log-probabilities (active * k, vocab) and, when
        collected, its attention (active * k, src_len)."""
        n, k, vocab = self.active.size(0), self.k, log_probs.size(-1)
        searched = self.searched()  # (n,) done sentences record nothing more
        candidates = (self.scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)  # (n, 2k)
        top_beam, top_token = top_index // vocab, top_index % vocab
        rows = top_beam + torch.arange(n, device=top_index.device).unsqueeze(1) * k  # (n, 2k) rows of tokens
        is_eos = top_token == EOS
        finished = is_eos & torch.isfinite(top_scores) & searched.unsqueeze(1)
        finished[:, k:] = False
        if attention is not None:
            self.attention = torch.cat([self.attention, attention.unsqueeze(1)], dim=1)  # (n * k, t + 1, S)
        self._record_finished(finished, top_scores / penalty, rows)
        self.finished_count.index_add_(0, self.active, finished.sum(dim=1))
        live_scores, live = top_scores.masked_fill(is_eos, float("-inf")).topk(k, dim=1)  # (n, k)
        live_rows = rows.gather(1, live).view(-1)  # (n * k,)
        self.tokens = torch.cat([self.tokens[live_rows], top_token.gather(1, live).view(-1, 1)], dim=1)
        self.scores, self.state = live_scores, self.model.reorder_state(state, live_rows)
        if self.attention is not None:
            self.attention = self.attention[live_rows]

    def keep(self, searched: Tensor, left: int, memory: Memory) -> Memory:
        """Drop the done sentences (`searched` False; `left` are not) from the batch; returns the memory of
        those that stay. Their order is kept, found on the device by a stable sort."""
        keep = torch.argsort((~searched).to(torch.uint8), stable=True)[:left]  # (left,)
        rows = hypothesis_rows(keep, self.k)  # (left * k,)
        self.active, self.scores, self.tokens = self.active[keep], self.scores[keep], self.tokens[rows]
        memory, self.state = self.model.select_sentences(memory, self.state, keep)
        if self.attention is not None:
            self.attention = self.attention[rows]
        return memory

    def _record_finished(self, finished: Tensor, normalised: Tensor, rows: Tensor) -> None:
        """Keep, per sentence, the n best finished hypotheses seen so far (in place, without a host sync).

        finished, normalised, rows: (active, 2k); `tokens` holds prefixes that end before eos. A stable sort
        ranks the kept ones first: a new hypothesis must score higher to displace an equal one.
        """
        active, n, length = self.active, self.n, self.tokens.size(1)
        candidates = normalised.masked_fill(~finished, float("-inf"))  # (active, 2k)
        merged = torch.cat([self.best_scores[active], candidates], dim=1)  # (active, n + 2k)
        order = merged.sort(dim=1, descending=True, stable=True).indices[:, :n]  # (active, n)
        prefix = self.best_tokens.new_full((active.size(0), rows.size(1), self.best_tokens.size(2)), EOS)
        prefix[:, :, :length] = self.tokens[rows]  # (active, 2k, max_steps + 1)
        tokens = torch.cat([self.best_tokens[active], prefix], dim=1)  # (active, n + 2k, max_steps + 1)
        self.best_tokens[active] = tokens.gather(1, order.unsqueeze(2).expand(-1, -1, tokens.size(2)))
        self.best_scores[active] = merged.gather(1, order)
        if self.best_attention is not None:
            grown = self.best_attention.new_zeros(*rows.shape, *self.best_attention.shape[2:])
            grown[:, :, : self.attention.size(1)] = self.attention[rows]  # (active, 2k, max_steps, src_len)
            both = torch.cat([self.best_attention[active], grown], dim=1)
            index = order.view(*order.shape, 1, 1).expand(-1, -1, *both.shape[2:])
            self.best_attention[active] = both.gather(1, index)

    def results(self, src_mask: Tensor) -> list[list[Hypothesis]]:
        """Each sentence's finished hypotheses, best first (fewer than n where fewer were found)."""
        batch, n = self.best_scores.shape
        tokens = self.best_tokens[:, :, 1:].reshape(batch * n, -1)  # (batch * n, max_steps)
        attention = None if self.best_attention is None else self.best_attention.flatten(0, 1)
        flat = hypotheses(tokens, self.best_scores.view(-1), attention, src_mask.repeat_interleave(n, dim=0))
        found = torch.isfinite(self.best_scores).tolist()
        rows = [zip(flat[i * n : (i + 1) * n], found[i], strict=True) for i in range(batch)]
        return [[h for h, ok in row if ok] for row in rows]


def _only_eos(log_probs: Tensor) -> Tensor:
    """Log-probabilities that put all mass on eos (for hypotheses at their length limit)."""
    forced = torch.full_like(log_probs, float("-inf"))
    forced[:, EOS] = 0.0
    return forced
