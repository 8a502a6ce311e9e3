"""benchmarks/device_check.py: what it reads off a training log, the summary it writes, stages skipped when
their run failed or the budget is spent, the GPU-only changes since the last pass; and a rehearsal of its
stages on a CPU (slow layer)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import device_check as check
from tests.conftest import ROOT

LOG = """\
nmt: capturing the training step for batch shape 35×56×56 (1 of at most 32) in a CUDA graph …
nmt: captured in 0.9 s (0.9 s of CUDA graph capture so far)
nmt: capturing the training step for batch shape 185×16×24 (2 of at most 32) in a CUDA graph …
nmt: captured in 0.7 s (1.6 s of CUDA graph capture so far)
nmt: train.batch_tokens: auto chose 8960 tokens per batch (85% of 79.2 GiB at the longest sentences, …)
nmt: step 500/1000: loss 3.120, lr 1.00e-03, 404,432 target tok/s, elapsed 0:00:09, ETA 0:00:09
nmt: step 1000: valid loss 1.911, BLEU 33.48, AER 10.3 (best)
"""


def test_a_training_log_s_figures() -> None:
    assert check.training_figures(LOG) == {
        "train_captures": 2,
        "capture_s": 1.6,
        "target_tok_per_s": "404,432",
        "valid_loss": 1.911,
        "valid_bleu": 33.48,
        "aer": 10.3,
        "batch_tokens": 8960,
    }


def test_stages_run_in_order_and_are_skipped_for_a_failed_run_or_a_spent_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    def failing(_: object) -> dict:
        raise RuntimeError("exit code 1: boom")

    stages = {"guided": (failing, 0), "align": (lambda _: {}, 0), "benchmark": (lambda _: {"x": 1}, 0)}
    stages["ceiling"] = (lambda _: {}, 10**6)  # needs more than the budget
    monkeypatch.setattr(check, "STAGES", stages)
    written = []
    outcomes = check.run_stages(object(), list(stages), 100.0, written.append)
    assert [(o.stage, o.result) for o in outcomes] == [
        ("guided", "failed"),
        ("align", "skipped"),
        ("benchmark", "passed"),
        ("ceiling", "skipped"),
    ]
    assert len(written) == 4 and "needs the guided stage's run" in outcomes[1].reason
    table = check.summary({"commit": "abc"}, outcomes)
    assert table.startswith("# Device check: failed") and "| benchmark | passed | 0 | x 1 |" in table


def test_the_debt_names_the_gpu_only_changes_since_the_recorded_pass() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.device_check", "--debt"], cwd=ROOT, capture_output=True, text=True
    )
    record = json.loads((ROOT / ".ci" / "device-check.json").read_text())
    assert out.returncode == 0 and out.stdout.startswith(
        "device check: last passed at " + record["commit"][:12]
    )


@pytest.mark.slow
def test_a_rehearsal_on_a_cpu(tmp_path: Path) -> None:
    """The guided and align stages of the check, a twentieth of their updates on a CPU, on a folder shaped as
    Multi30k's (the stages used here read only the synthetic corpora they write)."""
    args = ["--data", str(tmp_path), "--out", str(tmp_path / "out"), "--device", "cpu", "--smoke"]
    args += ["--stages", "guided,align", "--budget", "600"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.device_check", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(s["stage"], s["result"]) for s in found["stages"]] == [("guided", "passed"), ("align", "passed")]
    assert (tmp_path / "out" / "logs.tar.gz").is_file() and "| align | passed |" in (
        tmp_path / "out" / "summary.md"
    ).read_text()
