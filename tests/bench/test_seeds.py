"""benchmarks/seeds.py reads each seed's report.json (`--table-only`: nothing trained) and prints a row per
seed and the means ± standard deviation."""

import json
import sys
from pathlib import Path

import pytest

from benchmarks import seeds


def report(steps: int, valid: float, test: float) -> dict:
    """A run's report.json, as far as the table reads it."""
    found = {"steps": steps, "best_step": steps - 100, "training_seconds": 80.0, "checkpoint": "best"}
    return found | {"valid": {"best": {"bleu": valid}}, "test": {"best": {"bleu": test, "chrf": test + 20}}}


def test_the_table_gives_each_seed_and_the_mean_and_spread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for seed, test in ((1, 41.0), (2, 42.0), (3, 40.0)):
        (tmp_path / f"seed-{seed}").mkdir()
        (tmp_path / f"seed-{seed}" / "report.json").write_text(json.dumps(report(3000, 41.5, test)))
    argv = ["seeds", "configs/x.yaml", "--data", "DIR", "--out", str(tmp_path), "--seeds", "1", "2", "3", "4"]
    monkeypatch.setattr(sys, "argv", [*argv, "--table-only"])
    seeds.main()
    table = capsys.readouterr().out.splitlines()
    assert (
        table[0]
        == "| seed | steps | best step | checkpoint | valid BLEU | test BLEU | test chrF | training s |"
    )
    assert table[2] == "| 1 | 3000 | 2900 | best | 41.50 | 41.00 | 61.00 | 80.00 |"
    assert table[-1] == (  # seed 4 wrote no report: left out
        "| mean | **3000.00** ± 0.00 | **2900.00** ± 0.00 |  | **41.50** ± 0.00 | **41.00** ± 1.00 "
        "| **61.00** ± 1.00 | **80.00** ± 0.00 |"
    )
