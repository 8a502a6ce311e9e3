"""Averaging checkpoints: snapshots of another model are refused."""

from pathlib import Path

from tests.conftest import FAST, assert_one_line_error, run_cli, train_args


def test_a_missing_average_advises_the_command_that_makes_it(kept_run: Path) -> None:
    """The run keeps 2 snapshots and has no averaged.pt: the error's command (not `nmt average`'s default
    --last 5, which would fail) makes it, and the checkpoint then loads."""
    assert not (kept_run / "averaged.pt").exists()
    code, _, err = run_cli("translate", str(kept_run), "--checkpoint", "averaged", input="kalo mi\n")
    assert code == 2 and len(err.strip().splitlines()) == 1
    advised = err.split("`")[1]
    assert advised == f"nmt average {kept_run} --last 2"
    assert run_cli(*advised.split()[1:])[0] == 0
    code, _, err = run_cli("translate", str(kept_run), "--checkpoint", "averaged", input="kalo mi\n")
    assert code == 0, err


def test_average_refuses_a_snapshot_of_another_model(
    kept_run: Path, tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    keep = ["--set", "train.keep_checkpoints=1", "--set", "model.transformer.d_model=16"]
    assert run_cli(*train_args(tiny, small_corpus, other, *FAST, *keep))[0] == 0
    (other / "checkpoints" / "step10.pt").replace(kept_run / "checkpoints" / "step5.pt")
    assert_one_line_error(run_cli("average", str(kept_run), "--last", "2"), "step5.pt", "another model")
    assert not (kept_run / "averaged.pt").exists()
