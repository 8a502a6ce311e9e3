"""The end of training: report.json, averaging with the snapshots that exist, weights-only best.pt."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nmt.evaluate import report as report_module
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.report import SEARCH_KEYS
from tests.conftest import UNDRAWN, run_cli, train_args

AVERAGE_5 = ("--set", "train.keep_checkpoints=5", "--set", "train.average_checkpoints=5")


@pytest.mark.parametrize(("steps", "averaged"), [(10, [5, 10]), (4, [])])
@pytest.mark.usefixtures("undrawn")
def test_a_run_stopped_before_enough_snapshots_still_reports(
    steps: int, averaged: list[int], small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    """A run that stops after 2 (or 1) of the 5 validations it would average: averaging uses what exists.
    Its pictures' files are written, not drawn (`undrawn`; tests/train/test_train.py's
    test_final_report_with_checkpoint_averaging draws and checks an averaged run's)."""
    run = tmp_path / "run"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", str(steps), *AVERAGE_5))
    assert code == 0, err
    report = json.loads((run / "report.json").read_text())
    assert report["averaging"] == {"requested": 5, "averaged_steps": averaged}
    assert (run / "averaged.pt").is_file() == bool(averaged)
    assert set(report["valid"]) == ({"best", "averaged"} if averaged else {"best"})
    assert list(report["test"]) == [report["checkpoint"]]  # test scores sit under the chosen checkpoint
    assert report["target_tokens_per_s"] is not None
    for name in ("curves.png", "attention/valid-0.png"):
        assert (run / name).read_bytes() == UNDRAWN, name
    if averaged:
        assert "averaging those" in err


def test_average_names_the_real_reason_for_too_few_snapshots(
    small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    sets = ("--set", "train.keep_checkpoints=5", "--set", "train.final_report=false")
    assert run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "10", *sets))[0] == 0
    code, _, err = run_cli("average", str(run), "--last", "5")
    assert code == 2 and "training stopped after 2 validation(s); average those with --last 2" in err
    code, out, err = run_cli("average", str(run), "--last", "2")
    assert code == 0 and out.strip() == str(run / "averaged.pt"), err


def test_best_checkpoint_holds_weights_only(trained_run: Path) -> None:
    best, last = load_checkpoint(trained_run / "best.pt"), load_checkpoint(trained_run / "last.pt")
    assert "optimizer" not in best and "optimizer" in last
    assert best["model"].keys() == last["model"].keys() and best["step"] > 0
    assert (trained_run / "best.pt").stat().st_size < 0.6 * (trained_run / "last.pt").stat().st_size


def test_a_bilingual_report_has_the_shape_of_a_multilingual_one(trained_run: Path) -> None:
    """Each split's scores: the means, the search and a `directions` map, here of the run's one direction
    (a multilingual run's keys: nmt/evaluate/directions.py `direction_scores` and `search_settings`)."""
    report = json.loads((trained_run / "report.json").read_text())
    for split in ("valid", "test"):
        for scores in report[split].values():
            assert set(scores) == {"bleu", "chrf", "off_target", "directions", *SEARCH_KEYS}
            assert list(scores["directions"]) == ["src-tgt"]
            assert scores["bleu"] == scores["directions"]["src-tgt"]["bleu"]
            assert scores["directions"]["src-tgt"]["metrics"]["BLEU"]["score"] == scores["bleu"]


def test_report_names_the_package_version(trained_run: Path) -> None:
    from nmt import __version__

    report = json.loads((trained_run / "report.json").read_text())
    assert report["nmt_version"] == __version__


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_revision_is_not_taken_from_an_unrelated_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nmt installed inside another git repository (as a venv's site-packages can be), one with a commit,
    records no revision: the package's module is placed there (its __file__), in-process."""
    other = tmp_path / "other-repo"
    module = other / "site-packages" / "nmt" / "evaluate" / "report.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    git = ["git", "-C", str(other), "-c", "user.name=nmt", "-c", "user.email=nmt@example.com"]
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "unrelated"], check=True)
    monkeypatch.setattr(report_module, "__file__", str(module))
    assert report_module.git_revision() is None
