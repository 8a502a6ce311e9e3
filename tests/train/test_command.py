"""`nmt train` and its run directory: a refused run leaves nothing behind, RUN_DIR/train.log keeps every log
line (appended across --resume), the run says why training stopped, and --resume refuses what it cannot
continue."""

import json
from pathlib import Path

import pytest
import torch

from nmt.run.checkpoint_io import load_checkpoint
from tests.conftest import NO_REPORT, assert_one_line_error, copy_corpus, run_cli, train_args, train_losses


@pytest.mark.parametrize("refusal", ["no data directory", "no valid files"])
def test_a_refused_run_leaves_nothing_behind(
    refusal: str, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    """Nothing trained, nothing kept: not the lock, not the directories made for --out; what the user had in
    the directory before stays."""
    if refusal == "no data directory":
        data, out, fragment = tmp_path / "nowhere", tmp_path / "new" / "runs" / "run", "does not exist"
    else:
        data, out, fragment = copy_corpus(small_corpus, tmp_path / "data"), tmp_path / "mine", refusal
        for path in data.glob("valid.*"):
            path.unlink()
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    assert_one_line_error(run_cli(*train_args(tiny, data, out)), fragment)
    if refusal == "no data directory":
        assert not (tmp_path / "new").exists()
        assert_one_line_error(run_cli("translate", str(out)), "does not exist", "nmt train")
    else:
        assert [path.name for path in out.iterdir()] == ["notes.txt"]


@pytest.mark.slow  # three trainings: 3 s
@pytest.mark.usefixtures("undrawn")
def test_train_log_keeps_every_line_and_continues_across_resume(
    small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    """Under -q nothing reaches the terminal, but train.log holds the training records, the validations,
    why training stopped and the final report (its pictures not drawn); --resume appends to it, --overwrite
    starts it afresh."""
    run = tmp_path / "run"
    code, _, err = run_cli("-q", *train_args(tiny, small_corpus, run, "--max-steps", "10"))
    assert code == 0 and err == "", err
    first = (run / "train.log").read_text()
    expected = [
        "step 10/10: loss",
        "step 10: valid loss",
        "training stopped at step 10 after",
        "max steps (train.max_steps=10)",
        "final report: valid BLEU",
        "report done",
    ]
    for line in expected:
        assert line in first, (line, first)
    assert json.loads((run / "report.json").read_text())["stop_reason"] == "max steps"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "15", "--resume", *NO_REPORT))
    assert code == 0, err
    resumed = (run / "train.log").read_text()
    assert resumed.startswith(first) and "resuming at step 10" in resumed.removeprefix(first)
    code, _, err = run_cli(
        *train_args(tiny, small_corpus, run, "--max-steps", "5", "--overwrite", *NO_REPORT)
    )
    assert code == 0, err
    assert "resuming" not in (run / "train.log").read_text()


@pytest.mark.parametrize(
    ("flags", "reason", "setting"),
    [
        (["--max-time", "0.001"], "time budget", "train.max_time=0.001 s"),
        (["--max-epochs", "1"], "max epochs", "train.max_epochs=1"),
        # a learning rate too small to change a translation: the second validation is no better
        (["--set", "train.patience=1", "--set", "train.lr=1.0e-9"], "early stopping", "train.patience=1"),
    ],
)
def test_the_run_says_why_training_stopped(
    flags: list[str], reason: str, setting: str, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *flags, "--set", "train.final_report=false"))
    assert code == 0, err
    assert f": {reason} (" in err and setting in err, err
    assert load_checkpoint(run / "last.pt")["progress"]["stop_reason"] == reason
    assert f"{reason} (" in (run / "train.log").read_text()


def test_training_into_an_existing_run_refuses(trained_run: Path, small_corpus: Path, tiny: Path) -> None:
    before = (trained_run / "last.pt").stat().st_mtime_ns
    result = run_cli(*train_args(tiny, small_corpus, trained_run, "--max-steps", "1"))
    assert_one_line_error(result, str(trained_run), "--resume", "--overwrite")
    assert (trained_run / "last.pt").stat().st_mtime_ns == before


def test_resume_with_another_batch_size_is_refused(kept_run: Path, tiny: Path, small_corpus: Path) -> None:
    config = (kept_run / "config.yaml").read_bytes()
    args = train_args(tiny, small_corpus, kept_run, "--resume", "--max-steps", "20")
    assert_one_line_error(run_cli(*args, "--set", "train.batch_tokens=900"), "batch_tokens=900", "600")
    assert (kept_run / "config.yaml").read_bytes() == config


@pytest.mark.parametrize("key", ["optimizer", "progress", "rng"])
def test_resuming_from_a_last_checkpoint_without_training_state_is_one_line(
    kept_run: Path, tiny: Path, small_corpus: Path, key: str
) -> None:
    checkpoint = torch.load(kept_run / "last.pt", weights_only=True)
    del checkpoint[key]
    torch.save(checkpoint, kept_run / "last.pt")
    args = train_args(tiny, small_corpus, kept_run, "--resume", "--max-steps", "20")
    assert_one_line_error(run_cli(*args), "last.pt", f"no '{key}'")


def test_a_checkpoint_without_a_log_window_still_resumes(
    kept_run: Path, tiny: Path, small_corpus: Path
) -> None:
    """A last.pt written before the log window travelled in it resumes, and its records go on (a record
    every update: TINY_CONFIG's train.log_every=1)."""
    checkpoint = torch.load(kept_run / "last.pt", weights_only=False)
    for key in ("window_loss", "window_tokens", "window_seconds"):
        del checkpoint["progress"][key]
    torch.save(checkpoint, kept_run / "last.pt")
    args = train_args(tiny, small_corpus, kept_run, "--resume", "--max-steps", "12", *NO_REPORT)
    code, _, err = run_cli(*args)
    assert code == 0, err
    assert [step for step, _ in train_losses(kept_run)][-3:] == [10, 11, 12]
