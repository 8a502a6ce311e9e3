"""Corpus-level sacreBLEU scores of detokenized hypotheses against raw references: BLEU, chrF2, chrF2++ and
TER, each with its sacreBLEU signature and a 95% bootstrap confidence interval — sacreBLEU's own (1,000
resamples, seeded by SACREBLEU_SEED, 12345 unless set): the mean of the resampled scores and the half-width of
the interval around it, `μ ± ci` as `sacrebleu --confidence` prints it.
Validation during training takes the BLEU and chrF alone (`headline`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric
from sacrebleu.significance import _bootstrap_resample, estimate_ci

RESAMPLES = 1000  # bootstrap resamples of each interval (sacreBLEU's default)


def metrics(references: list[list[str]] | None = None) -> dict[str, Metric]:
    """The metrics scored, by the name sacreBLEU gives their scores, each a new sacreBLEU metric object (with
    the statistics of `references` kept, as sacreBLEU's command line keeps them, where given)."""
    return {
        "BLEU": BLEU(references=references),
        "chrF2": CHRF(references=references),
        "chrF2++": CHRF(word_order=2, references=references),
        "TER": TER(references=references),
    }


@dataclass(frozen=True)
class MetricScore:
    """One metric's corpus score, the mean of its bootstrap resamples and the half-width of their 95%
    interval (sacreBLEU's `μ ± ci`), all rounded to 2 decimals, and its sacreBLEU signature."""

    score: float
    mean: float
    ci: float
    signature: str

    def line(self, name: str) -> str:
        """`BLEU = 21.48 (μ = 21.47 ± 1.09)  (nrefs:1|bs:1000|seed:12345|…)`."""
        return f"{name} = {self.score:.2f} (μ = {self.mean:.2f} ± {self.ci:.2f})  ({self.signature})"


@dataclass(frozen=True)
class Scores:
    """The BLEU and chrF (chrF2) of a system, which choose checkpoints, and its every metric with its interval
    (`metrics`; empty where only the headline was scored)."""

    bleu: float
    chrf: float
    sentences: int
    metrics: dict[str, MetricScore] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The fields as JSON records them (no `metrics` where only the headline was scored)."""
        found = asdict(self)
        return found if self.metrics else {k: v for k, v in found.items() if k != "metrics"}


def check_lengths(hypotheses: list[str], references: list[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")


def metric_score(metric: Metric, hypotheses: list[str], references: list[str]) -> MetricScore:
    """`metric`'s corpus score of `hypotheses`, with its bootstrap interval (`RESAMPLES` resamples): what
    `metric.corpus_score(…, n_bootstrap=RESAMPLES)` computes, its interval taken as sacreBLEU's paired test
    takes a baseline's (`significance.estimate_ci`, in numpy: corpus_score's own fails on resampled scores
    that mix Python floats and float32, as a poor system's chrF does)."""
    stats = metric._extract_corpus_statistics(hypotheses, [references])
    found = metric._aggregate_and_compute(stats)
    metric.n_bootstrap = RESAMPLES  # the signature states the resamples and the seed, as corpus_score's does
    metric.seed, resampled = _bootstrap_resample(stats, metric, RESAMPLES)
    mean, ci = estimate_ci(np.array([float(s.score) for s in resampled]))
    signature = str(metric.get_signature())
    return MetricScore(round(float(found.score), 2), round(float(mean), 2), round(float(ci), 2), signature)


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """BLEU (13a tokenization, mixed case), chrF2, chrF2++ and TER (sacreBLEU's defaults), each with its
    interval and signature."""
    check_lengths(hypotheses, references)
    found = {name: metric_score(metric, hypotheses, references) for name, metric in metrics().items()}
    return Scores(found["BLEU"].score, found["chrF2"].score, len(hypotheses), found)


def headline(hypotheses: list[str], references: list[str]) -> Scores:
    """BLEU and chrF2 alone, without intervals: what validation follows."""
    check_lengths(hypotheses, references)
    bleu = float(BLEU().corpus_score(hypotheses, [references]).score)
    chrf = float(CHRF().corpus_score(hypotheses, [references]).score)
    return Scores(round(bleu, 2), round(chrf, 2), len(hypotheses))
