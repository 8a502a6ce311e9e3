"""Greedy and beam search over the Seq2Seq contract: one implementation for every model type.

Both keep the GPU busy: the per-step bookkeeping stays on the device, and whether every sentence is finished
is read back to the host only every `CHECK_EVERY` steps (one host sync there, none in between). Steps taken
after the last sentence finished change nothing: finished greedy rows only add eos, and a beam sentence that
is done records no further hypothesis. With `cuda_graphs` on a GPU, each decoding step is replayed from a
CUDA graph captured once per batch shape (nmt/graphs.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.data.tokenizer import BOS, EOS, PAD
from nmt.graphs import decoder_steps
from nmt.models.base import Seq2Seq, select_rows

CHECK_EVERY = 8  # decoding steps between two reads of "is every sentence finished?"


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


def is_check_step(t: int) -> bool:
    """Whether step `t` ends with the host reading how many sentences are still searched."""
    return t % CHECK_EVERY == CHECK_EVERY - 1


@torch.inference_mode()
def greedy(
    model: Seq2Seq,
    src: Tensor,
    src_mask: Tensor,
    max_len_a: float,
    max_len_b: int,
    cuda_graphs: bool = False,
) -> list[list[int]]:
    """Most probable next token at every step; returns each sentence's tokens without bos/eos."""
    memory = model.encode(src, src_mask)
    limits = output_limits(src_mask, max_len_a, max_len_b)
    max_steps = int(limits.max()) + 1  # the host learns the loop's length once
    state = model.init_state(memory, max_steps)
    decode, banned = decoder_steps(model, cuda_graphs), banned_tokens(src.device)
    token = src.new_full((src.size(0),), BOS)  # (batch,)
    finished = torch.zeros_like(token, dtype=torch.bool)
    outputs = []
    for t in range(max_steps):
        step = decode(token, memory, state)
        token = allowed(step.log_probs, banned).argmax(dim=-1).masked_fill(finished | (limits <= t), EOS)
        outputs.append(token)
        state, finished = step.state, finished | (token == EOS)
        if is_check_step(t) and bool(finished.all()):
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
    cuda_graphs: bool = False,
) -> list[list[int]]:
    """Batched beam search; returns each sentence's best hypothesis (by length-normalised score).

    Every sentence keeps `beam_size` live hypotheses. Each step takes the 2k best extensions: those ending in
    eos among the first k are finished (scored with the length penalty), the best k others live on. A sentence
    is done once it has k finished hypotheses or reaches its length limit, and from then on records nothing.
    At every check step, once at most half of the rows are still searched, the done sentences leave the batch
    (few distinct batch shapes, and later steps compute less). With `beam_size=1` this is exactly greedy.
    """
    batch, k, device = src.size(0), beam_size, src.device
    limits = output_limits(src_mask, max_len_a, max_len_b)
    max_steps = int(limits.max()) + 1
    memory = select_rows(model.encode(src, src_mask), torch.arange(batch, device=device).repeat_interleave(k))
    beams = _Beams(model.init_state(memory, max_steps), batch, k, max_steps, src)
    decode, banned = decoder_steps(model, cuda_graphs), banned_tokens(device)
    for t in range(max_steps):
        step = decode(beams.tokens[:, -1], memory, beams.state)
        at_limit = (limits[beams.active] <= t).repeat_interleave(k)  # (active * k,)
        log_probs = torch.where(
            at_limit.unsqueeze(1), _only_eos(step.log_probs), allowed(step.log_probs, banned)
        )
        beams.advance(log_probs, step.state, length_penalty(t + 1, alpha))
        if is_check_step(t):
            searched = beams.searched()
            left = int(searched.sum())  # the check's one host read
            if left == 0:
                break
            if left <= searched.size(0) // 2:
                memory = beams.keep(searched, left, memory)
    return trim(beams.best_tokens[:, 1:])


class _Beams:
    """The live hypotheses of the sentences still in the batch (`active`), and each sentence's best finished
    hypothesis, all on the device."""

    def __init__(self, state: dict[str, Tensor], batch: int, k: int, max_steps: int, src: Tensor) -> None:
        device = src.device
        self.state, self.k = state, k
        self.active = torch.arange(batch, device=device)  # original sentence of each row of `scores`
        self.scores = torch.zeros(batch, k, device=device)  # (active, k) summed log-probs of live hypotheses
        self.scores[:, 1:] = float("-inf")  # all beams start identical: keep one
        self.tokens = src.new_full((batch * k, 1), BOS)  # (active * k, length)
        self.best_scores = torch.full((batch,), float("-inf"), device=device)
        self.best_tokens = src.new_full((batch, max_steps + 1), EOS)  # bos, tokens …, eos
        self.finished_count = torch.zeros(batch, dtype=torch.long, device=device)

    def searched(self) -> Tensor:
        """Which active sentences have fewer than k finished hypotheses. (active,)"""
        return self.finished_count[self.active] < self.k

    def advance(self, log_probs: Tensor, state: dict[str, Tensor], penalty: float) -> None:
        """Extend every live hypothesis by the step's log-probabilities (active * k, vocab)."""
        n, k, vocab = self.active.size(0), self.k, log_probs.size(-1)
        searched = self.searched()  # (n,) done sentences record nothing more
        candidates = (self.scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)  # (n, 2k)
        top_beam, top_token = top_index // vocab, top_index % vocab
        rows = top_beam + torch.arange(n, device=top_index.device).unsqueeze(1) * k  # (n, 2k) rows of tokens
        is_eos = top_token == EOS
        finished = is_eos & torch.isfinite(top_scores) & searched.unsqueeze(1)
        finished[:, k:] = False
        self._record_finished(finished, top_scores / penalty, rows)
        self.finished_count.index_add_(0, self.active, finished.sum(dim=1))
        live_scores, live = top_scores.masked_fill(is_eos, float("-inf")).topk(k, dim=1)  # (n, k)
        live_rows = rows.gather(1, live).view(-1)  # (n * k,)
        self.tokens = torch.cat([self.tokens[live_rows], top_token.gather(1, live).view(-1, 1)], dim=1)
        self.scores, self.state = live_scores, select_rows(state, live_rows)

    def keep(self, searched: Tensor, left: int, memory: dict[str, Tensor]) -> dict[str, Tensor]:
        """Drop the done sentences (`searched` False; `left` are not) from the batch; returns the memory rows
        of those that stay. Their order is kept, found on the device by a stable sort."""
        keep = torch.argsort((~searched).to(torch.uint8), stable=True)[:left]  # (left,)
        rows = (keep.unsqueeze(1) * self.k + torch.arange(self.k, device=keep.device)).view(-1)
        self.active, self.scores, self.tokens = self.active[keep], self.scores[keep], self.tokens[rows]
        self.state = select_rows(self.state, rows)
        return select_rows(memory, rows)

    def _record_finished(self, finished: Tensor, normalised: Tensor, rows: Tensor) -> None:
        """Keep, per sentence, the best finished hypothesis seen so far (in place, without a host sync).

        finished, normalised, rows: (active, 2k); `tokens` holds prefixes that end before eos.
        """
        active, best_scores = self.active, self.best_scores
        candidate, position = normalised.masked_fill(~finished, float("-inf")).max(dim=1)  # (active,)
        improved = candidate > best_scores[active]
        prefix = self.tokens[rows.gather(1, position.unsqueeze(1)).squeeze(1)]  # (active, length)
        length = prefix.size(1)
        current = self.best_tokens[active]
        current[:, :length] = torch.where(improved.unsqueeze(1), prefix, current[:, :length])
        current[:, length] = torch.where(improved, EOS, current[:, length])
        self.best_tokens[active] = current
        best_scores[active] = torch.where(improved, candidate, best_scores[active])


def _only_eos(log_probs: Tensor) -> Tensor:
    """Log-probabilities that put all mass on eos (for hypotheses at their length limit)."""
    forced = torch.full_like(log_probs, float("-inf"))
    forced[:, EOS] = 0.0
    return forced
