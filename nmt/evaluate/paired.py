"""Whether a system's scores differ from a baseline's on the same test set by more than chance: sacreBLEU's
paired tests (`sacrebleu.significance.PairedTest`, as `sacrebleu REF -i BASELINE SYSTEM --paired-bs` or
`--paired-ar` runs them), for every metric of nmt/evaluate/scores.py.

- `bs`, paired bootstrap resampling (Koehn 2004; 1,000 resamples): the p-value, and both systems' means and
  95% intervals over the same resamples;
- `ar`, approximate randomization (Riezler & Maxwell 2005; 10,000 trials): the p-value, and both systems'
  means and intervals from 1,000 bootstrap resamples, which leave the p-value as it is.

The random draws are seeded as sacreBLEU seeds them (SACREBLEU_SEED, 12345 unless set): the same files give
the same p-values as sacreBLEU's command line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from sacrebleu.significance import PairedTest, Result

from nmt.evaluate.scores import RESAMPLES, check_lengths, metrics

Test = Literal["bs", "ar"]
TESTS: tuple[Test, ...] = ("bs", "ar")
TEST_NAMES = {"bs": "paired bootstrap resampling", "ar": "approximate randomization"}


@dataclass(frozen=True)
class Estimate:
    """A system's corpus score, and the mean and 95% interval half-width of its resampled scores."""

    score: float
    mean: float | None
    ci: float | None

    @classmethod
    def of(cls, result: Result) -> Estimate:
        return cls(result.score, result.mean, result.ci)


@dataclass(frozen=True)
class Comparison:
    """One metric's paired test: both systems' estimates, the p-value of their difference, and the
    signature sacreBLEU gives the test (with its resamples or trials and its seed)."""

    baseline: Estimate
    system: Estimate
    p_value: float
    signature: str

    def rounded(self) -> dict[str, Any]:
        """As a report records it: scores, means and intervals to 2 decimals, the p-value to 4."""

        def two(estimate: Estimate) -> dict[str, float | None]:
            return {k: None if v is None else round(float(v), 2) for k, v in asdict(estimate).items()}

        return {
            "baseline": two(self.baseline),
            "system": two(self.system),
            "p_value": round(self.p_value, 4),
            "signature": self.signature,
        }


def paired_test(
    system: list[str], baseline: list[str], references: list[str], test: Test = "bs"
) -> dict[str, Comparison]:
    """Each metric's paired `test` of `system` against `baseline` (hypotheses of the same `references`, line
    for line), by the metric's name."""
    check_lengths(system, references)
    check_lengths(baseline, references)
    scored = metrics([references])
    confidence = RESAMPLES if test == "ar" else -1  # bootstrap draws after the trials: the p-value holds
    tested = PairedTest(
        [("baseline", baseline), ("system", system)],
        scored,
        references=None,
        test_type=test,
        n_ar_confidence=confidence,
    )
    signatures, results = tested()
    found = {}
    for name in scored:
        base, other = results[name]
        assert isinstance(base, Result) and isinstance(other, Result) and other.p_value is not None
        found[name] = Comparison(
            Estimate.of(base), Estimate.of(other), float(other.p_value), str(signatures[name])
        )
    return found
