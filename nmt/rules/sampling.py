"""Sampling: each hypothesis draws its next token from the model's distribution (as fairseq `--sampling`,
OpenNMT-py `random_sampling_topk` and Marian `--output-sampling` do), for back-translation and diverse
outputs.

`samples` hypotheses per sentence (`nbest`), each drawn on its own row (no reordering). `temperature`
sharpens (< 1) or flattens (> 1) the distribution; `top_k` keeps the k most probable tokens, `top_p` the
smallest set whose probability reaches p (nucleus sampling, Holtzman et al. 2020); the score of a sample is
the model's own log-probability of its tokens, whatever the temperature.

The draws are reproducible per sentence: sample j of a sentence at step t draws the uniform number
`uniform(line seed, j, t)`, a counter-based hash (splitmix64) of the `seed` and the sentence's source ids, so
the same line with the same seed and settings gives the same samples whatever its batch, its neighbours or
its place in a file. Nothing is kept between steps on the host: a sampling step replays from a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmt.limits import MAX_SIZE, setting
from nmt.rules.contract import Extensions, Scored, StepView

if TYPE_CHECKING:
    from torch import Tensor

# splitmix64's constants as signed 64-bit integers (torch's int64 arithmetic wraps around)
GOLDEN = 0x9E3779B97F4A7C15 - 2**64
MIX_1 = 0xBF58476D1CE4E5B9 - 2**64
MIX_2 = 0x94D049BB133111EB - 2**64
DEFAULT_SEED = 0


@dataclass(frozen=True, kw_only=True)
class Sampling(Scored):
    sampling: bool = setting(False, "draw each next token from the model's distribution instead of searching")
    samples: int = 1  # search.nbest
    temperature: float = setting(
        1.0,
        "sampling: divide the log-probabilities by this (< 1 sharper, > 1 flatter)",
        low=0.0,
        low_open=True,
        high=100.0,
    )
    top_k: int = setting(
        0, "sampling: draw from the k most probable tokens only", low=0, high=MAX_SIZE, zero="all"
    )
    top_p: float = setting(
        1.0,
        "sampling: draw from the smallest set of tokens whose probability reaches p (nucleus)",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    seed: int = setting(
        DEFAULT_SEED,
        "sampling: seed of the draws; a line with the same seed and settings samples the same output, "
        "wherever it stands",
        low=0,
        high=2**63 - 1,
    )

    @property
    def width(self) -> int:
        return self.samples

    @classmethod
    def reads(cls) -> tuple[str, ...]:
        """`nbest`, as its `samples`, and its own settings."""
        return ("nbest", *(name for name in super().reads() if name != "samples"))

    title, switch = "sampling", "sampling"

    @classmethod
    def of(cls, settings: Any) -> Sampling:
        own = {name: getattr(settings, name) for name in cls.reads() if name != "nbest"}
        return cls(samples=settings.nbest, **own)

    def buffers(self, src: Tensor, width: int) -> dict[str, Tensor]:
        """Each row's line seed (of its sentence's source ids) and sample number."""
        import torch

        seeds = line_seeds(src, self.seed).repeat_interleave(width)  # (rows,)
        return {"seed": seeds, "sample": torch.arange(seeds.size(0), device=src.device) % width}

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
        probs = self.filtered(log_probs).softmax(dim=-1)  # (rows, vocab)
        u = uniform(view.state["seed"], view.state["sample"], view.step)  # (rows,)
        token = draw(probs, u).unsqueeze(1)  # (rows, 1)
        chosen = log_probs.gather(1, token).view_as(scores)  # (sentences, samples)
        return Extensions(scores + chosen, token.view_as(scores), None)

    def filtered(self, log_probs: Tensor) -> Tensor:
        """The tempered log-probabilities with the tokens outside top-k and top-p at -inf. (rows, vocab)"""
        import torch

        below = log_probs - log_probs.amax(dim=-1, keepdim=True)  # (rows, vocab), the best at 0
        logits = (below / self.temperature).where(below < 0, 0.0)  # a temperature below float32's: not NaN
        if 0 < self.top_k < logits.size(-1):
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (rows, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, order = logits.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            beyond = probs.cumsum(dim=-1) - probs >= self.top_p  # the mass before it reached p: (rows, vocab)
            beyond[:, 0] = False  # the most probable token stays, also where p is 0 in float32 (below 1e-45)
            logits = logits.masked_fill(torch.zeros_like(beyond).scatter(1, order, beyond), float("-inf"))
        return logits


def draw(probs: Tensor, u: Tensor) -> Tensor:
    """The token whose cumulative probability first exceeds u times the total, per row: probs (rows, vocab),
    u (rows,) in [0, 1) → (rows,). A token of probability 0 is never drawn."""
    cdf = probs.cumsum(dim=-1)  # (rows, vocab)
    token = (cdf <= (u * cdf[:, -1]).unsqueeze(1)).sum(dim=-1).clamp(max=probs.size(1) - 1)
    possible = probs.gather(1, token.unsqueeze(1)).squeeze(1) > 0  # rounding at the very top of the cdf
    return token.where(possible, probs.argmax(dim=-1))


def mix(x: Tensor) -> Tensor:
    """splitmix64's finaliser on int64 tensors (shifts are logical: the sign bit masked off after them)."""
    x = (x ^ shifted(x, 30)) * MIX_1
    x = (x ^ shifted(x, 27)) * MIX_2
    return x ^ shifted(x, 31)


def shifted(x: Tensor, bits: int) -> Tensor:
    """x >> bits as unsigned 64-bit integers."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def line_seeds(src: Tensor, seed: int) -> Tensor:
    """A seed per sentence from `seed` and its source ids (padding ignored): src (sentences, src_len) →
    (sentences,) int64."""
    state = src.new_full((src.size(0),), mix(src.new_tensor(seed + GOLDEN)).item())
    for column in src.long().unbind(dim=1):  # once per search, before its steps
        state = state.where(column == 0, mix(state + GOLDEN + column))  # 0 is padding
    return state


def uniform(seeds: Tensor, samples: Tensor, step: Tensor) -> Tensor:
    """A uniform number in [0, 1) per row, a function of its line seed, sample number and the step alone:
    (rows,) float32 with 24 random bits."""
    x = mix(mix(seeds + samples * GOLDEN) + (step + 1) * GOLDEN)
    return shifted(x, 40).float() * 2.0**-24
