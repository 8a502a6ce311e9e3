"""The metrics, intervals and paired tests are sacreBLEU's own: `score` equals sacreBLEU's API, and
`paired_test` equals sacreBLEU's command line (`sacrebleu REF -i BASELINE SYSTEM --paired-bs/--paired-ar`)
run here on the same files (its table read as benchmarks/evaluation_bench.py reads it)."""

from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from benchmarks.evaluation_bench import printed, sacrebleu_table
from nmt.evaluate.paired import paired_test
from nmt.evaluate.scores import RESAMPLES, headline, score
from tests.evaluate.conftest import lines


def test_every_metric_and_interval_is_sacrebleu_s(systems: dict[str, Path]) -> None:
    hypotheses, references = lines(systems["system"]), lines(systems["references"])
    found = score(hypotheses, references)
    theirs_by_name = {"BLEU": BLEU(), "chrF2": CHRF(), "chrF2++": CHRF(word_order=2), "TER": TER()}
    for name, metric in theirs_by_name.items():
        theirs = metric.corpus_score(hypotheses, [references], n_bootstrap=RESAMPLES)
        ours = found.metrics[name]
        assert ours.score == round(theirs.score, 2) and ours.signature == str(metric.get_signature())
        assert (ours.mean, ours.ci) == pytest.approx((theirs._mean, theirs._ci), abs=0.0051)  # rounded to 2
        assert "|bs:1000|seed:12345|" in ours.signature
    assert (found.bleu, found.chrf) == (found.metrics["BLEU"].score, found.metrics["chrF2"].score)
    brief = headline(hypotheses, references)
    assert (brief.bleu, brief.chrf, brief.metrics) == (found.bleu, found.chrf, {})
    assert "metrics" not in brief.as_dict()


@pytest.mark.parametrize("test", ["bs", pytest.param("ar", marks=pytest.mark.slow)])  # ar: 6 s
def test_the_paired_test_equals_sacrebleu_s_command_line(systems: dict[str, Path], test: str) -> None:
    """Scores, resampled means and intervals to the 10 decimals sacreBLEU prints, p-values to its 4."""
    system, baseline = lines(systems["system"]), lines(systems["baseline"])
    found = paired_test(system, baseline, lines(systems["references"]), test)  # type: ignore[arg-type]
    files = [str(systems["references"]), "-i", str(systems["baseline"]), str(systems["system"])]
    table = sacrebleu_table([*files, f"--paired-{test}", "-m", "bleu", "chrf", "ter"])
    table |= sacrebleu_table([*files, f"--paired-{test}", "-m", "chrf", "--chrf-word-order", "2"])
    assert set(table) == set(found) == {"BLEU", "chrF2", "chrF2++", "TER"}
    assert printed(found, test) == table
    for comparison in found.values():
        assert f"|{test}:" in comparison.signature and "seed:12345" in comparison.signature
    assert found["BLEU"].p_value < 0.05  # the baseline's errors are many more: a real difference
    if test == "bs":  # the same resamples as each system's own interval
        alone = score(system, lines(systems["references"])).metrics
        assert {name: (alone[name].mean, alone[name].ci) for name in found} == {
            name: (round(c.system.mean or 0, 2), round(c.system.ci or 0, 2)) for name, c in found.items()
        }
