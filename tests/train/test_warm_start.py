"""`nmt train --init-from RUN_DIR`: fine-tuning from another run's weights and sentencepiece model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmt.data.synthetic import write_reordering_corpus
from nmt.run.directory import RunDir
from nmt.run.metrics import read_metrics
from tests.conftest import ROOT, assert_one_line_error, run_cli

CONFIG = str(ROOT / "configs" / "tiny-transformer.yaml")


def train(data: Path, out: Path, *extra: str) -> None:
    args = ["train", CONFIG, "--data", str(data), "--out", str(out), "--device", "cpu", "--max-steps", "60"]
    code, _, err = run_cli(*args, "--max-time", "0", "--set", "train.eval_every=60", *extra)
    assert code == 0, err


def valid_loss(run_dir: Path) -> float:
    return [r for r in read_metrics(RunDir(run_dir)) if r["kind"] == "valid"][-1]["loss"]


@pytest.mark.slow
def test_fine_tuning_on_shifted_data_beats_training_from_scratch(trained_run: Path, tmp_path: Path) -> None:
    """The parent learnt 3-7 word sentences; the child sees 6-12 word ones, for the same 60 updates."""
    shifted = write_reordering_corpus(
        tmp_path / "shifted", train=2000, valid=100, test=100, vocab=60, min_len=6, max_len=12, seed=5
    )
    train(shifted, tmp_path / "tuned", "--init-from", str(trained_run))
    train(shifted, tmp_path / "scratch", "--set", "train.final_report=false")
    assert valid_loss(tmp_path / "tuned") < valid_loss(tmp_path / "scratch") - 0.5
    assert (tmp_path / "tuned" / "spm.model").read_bytes() == (trained_run / "spm.model").read_bytes()
    report = json.loads((tmp_path / "tuned" / "report.json").read_text())
    assert report["parent"] == str(RunDir(trained_run).find_checkpoint())


def test_a_model_setting_that_changes_a_shape_is_refused(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    args = ["train", CONFIG, "--data", str(corpus), "--out", str(tmp_path / "child"), "--device", "cpu"]
    result = run_cli(*args, "--init-from", str(trained_run), "--set", "model.transformer.ff_dim=48")
    assert_one_line_error(result, "model.transformer.ff_dim=48 contradicts the model of", "--init-from")
    assert not (tmp_path / "child" / "last.pt").exists()


def test_an_init_from_that_does_not_exist_is_named_as_such(corpus: Path, tmp_path: Path) -> None:
    args = ["train", CONFIG, "--data", str(corpus), "--out", str(tmp_path / "child"), "--device", "cpu"]
    result = run_cli(*args, "--init-from", str(tmp_path / "typo"))
    assert_one_line_error(result, f"run directory {tmp_path / 'typo'} does not exist")
