"""The run directory: its file names, which checkpoint a run chose, its metrics, its lock (one writer at a
time) and --overwrite."""

import fcntl
import json
from pathlib import Path
from typing import IO

from nmt.run.checkpoint_io import save_checkpoint
from nmt.run.directory import RunDir
from nmt.run.metrics import append_metrics, forget_metrics_after, read_metrics
from tests.conftest import FAST, assert_one_line_error, run_cli, train_args


def test_metrics_append_read_and_forget_after_a_step(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)
    for step in (10, 20, 30):
        append_metrics(run_dir, {"kind": "train", "step": step, "loss": 1.0 / step})
    with open(run_dir.metrics, "a") as handle:
        handle.write('{"kind": "tra')  # a line torn by a kill
    forget_metrics_after(run_dir, 20)
    assert [record["step"] for record in read_metrics(run_dir)] == [10, 20]
    assert json.loads(run_dir.metrics.read_text().splitlines()[-1])["step"] == 20


def test_snapshots_sort_by_step_not_by_name(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)
    for step in (100, 20, 3):
        save_checkpoint(run_dir.snapshot(step), {"model": {}, "config": {}})
    assert [path.name for path in run_dir.snapshots()] == ["step3.pt", "step20.pt", "step100.pt"]


def test_the_chosen_checkpoint_comes_from_the_report(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)
    assert run_dir.chosen_checkpoint() == "best"  # no report yet
    run_dir.report.write_text(json.dumps({"checkpoint": "averaged"}))
    assert run_dir.chosen_checkpoint() == "best"  # the report names a file that is not there
    save_checkpoint(run_dir.checkpoint("averaged"), {"model": {}, "config": {}})
    assert run_dir.chosen_checkpoint() == "averaged"
    assert run_dir.find_checkpoint() == run_dir.checkpoint("averaged")


def _flock(path: Path, pid: str) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    handle.truncate(0)
    handle.write(pid)
    handle.flush()
    return handle


def test_a_second_run_into_a_locked_directory_names_the_holder(
    tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    with _flock(run / ".lock", "4242"):
        result = run_cli(*train_args(tiny, small_corpus, run, *FAST))
    assert_one_line_error(result, str(run), "pid 4242")
    assert sorted(p.name for p in run.iterdir()) == [".lock"]  # the holder's files are left alone


def test_a_lock_left_by_a_dead_process_is_no_obstacle_and_every_exit_releases_it(
    tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text("999999\n")  # a killed run's lock file: the kernel released its lock
    assert_one_line_error(run_cli(*train_args(tiny, small_corpus, run, "--tgt-lang", "xx", *FAST)), "xx")
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *FAST))  # the failed run let it go
    assert code == 0, err
    _flock(run / ".lock", "1").close()  # and so did the finished one


def test_training_into_a_file_is_one_line(small_corpus: Path, tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "run").write_text("")
    result = run_cli(*train_args(tiny, small_corpus, tmp_path / "run"))
    assert_one_line_error(result, f"--out {tmp_path / 'run'} is a file")


def test_overwrite_leaves_nothing_of_the_old_run(kept_run: Path, tiny: Path, small_corpus: Path) -> None:
    for name in ("eval", "attention"):
        (kept_run / name).mkdir(exist_ok=True)
        (kept_run / name / "old.txt").write_text("old")
    (kept_run / "report.json").write_text("{}")
    (kept_run / "averaged.pt").write_bytes(b"old")
    (kept_run / "origin.json").write_text("{}")  # an imported model's: not the new run's origin
    (kept_run / "notes.txt").write_text("mine")  # not nmt's: kept
    args = train_args(
        tiny, small_corpus, kept_run, *FAST, "--overwrite", "--set", "model.transformer.d_model=16"
    )
    code, _, err = run_cli(*args)
    assert code == 0, err
    left = {p.name for p in kept_run.iterdir()}
    assert left == {
        ".lock",
        "config.yaml",
        "spm.model",
        "best.pt",
        "last.pt",
        "metrics.jsonl",
        "train.log",
        "notes.txt",
    }
    assert_one_line_error(run_cli("average", str(kept_run), "--last", "2"), "keeps 0 checkpoint(s)")
