"""How far to trust one translation: its mean log-probability per output token, and the signs that flag it as
suspect — a loop, an output far longer than its source, or attention that covers little of the source.

The search scores a hypothesis by its summed log-probability over a length penalty (nmt/decode/search.py
`score`; CTranslate2's own for an export), which ranks hypotheses but says little across sentences; the mean
log-probability of its tokens and eos undoes the penalty and divides by the length instead. The signs read
subword ids (and the alignment where search returned one), whatever the engine:

- `loop`: an n-gram of the output (n ≤ LOOP_NGRAM subwords) repeats back to back LOOP_REPEATS times or more
  ("salad salad salad", "Guuuuuy"), whatever the source: a source that repeats itself ("Salat Salat Salat")
  is a degenerate input, and its translation is flagged too (excusing loops the source repeats as often
  left a third of the loops in translations of repeated words unflagged, and spared no test2016 reference);
- `long`: the output has more than LONG_RATIO times the source's subwords (each counted with eos);
- `uncovered`: with an alignment, the output's tokens attend most to under LOW_COVERAGE of the subwords of a
  source of MIN_COVERED or more (an output that translates a part and drops the rest, or none of it).

The thresholds hold on Multi30k's validation split as on test2016 (docs/evaluation.md gives the figures).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from nmt.decode.search import Hypothesis, length_penalty

Suspicion = Literal["loop", "long", "uncovered"]

LOOP_NGRAM = 6
LOOP_REPEATS = 3
LONG_RATIO = 3.0
LOW_COVERAGE = 0.2
MIN_COVERED = 12


def mean_log_prob(score: float, tokens: int, penalty: float) -> float:
    """The mean log-probability of a hypothesis' `tokens` and eos, from its search `score` and the length
    `penalty` that divided its summed log-probability."""
    return score * penalty / (tokens + 1)


def with_mean_log_prob(hypothesis: Hypothesis, alpha: float) -> Hypothesis:
    """The hypothesis of nmt's search with its mean log-probability: its score times the GNMT length penalty
    of `alpha`."""
    penalty = length_penalty(len(hypothesis.tokens) + 1, alpha)
    return dataclasses.replace(
        hypothesis, mean_log_prob=mean_log_prob(hypothesis.score, len(hypothesis.tokens), penalty)
    )


def longest_repeat(ids: Sequence[int], longest: int = LOOP_NGRAM) -> int:
    """The most times an n-gram (n ≤ `longest`) of `ids` follows itself back to back (1: none does)."""
    most = 1
    for n in range(1, longest + 1):
        streak = 0  # positions in a row equal to the one n before
        for i in range(n, len(ids)):
            streak = streak + 1 if ids[i] == ids[i - n] else 0
            most = max(most, 1 + streak // n)
    return most


def suspicions(
    source: Sequence[int], output: Sequence[int], alignment: Sequence[int | None] | None = None
) -> list[Suspicion]:
    """Why a translation of `source` (subword ids) into `output` (subword ids, without eos) is suspect —
    `loop`, `long`, `uncovered` as the module says — or nothing; `alignment`: the source position each output
    token attended most (None: none known, and coverage is not judged)."""
    found: list[Suspicion] = []
    if longest_repeat(output) >= LOOP_REPEATS:
        found.append("loop")
    if len(output) + 1 > LONG_RATIO * (len(source) + 1):
        found.append("long")
    if alignment is not None and len(source) >= MIN_COVERED:
        covered = len({position for position in alignment if position is not None})
        if covered < LOW_COVERAGE * len(source):
            found.append("uncovered")
    return found
