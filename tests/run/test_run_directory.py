"""The run directory: its file names, which checkpoint a run chose, its metrics, run directories that older
versions wrote, its lock (one writer at a time) and --overwrite."""

import fcntl
import json
import shutil
from pathlib import Path
from typing import IO

import yaml

from nmt.config.yaml_file import OLD_MODEL_KEYS, load_saved_config
from nmt.run.checkpoint_io import load_checkpoint, save_checkpoint
from nmt.run.directory import RunDir
from nmt.run.metrics import append_metrics, forget_metrics_after, read_metrics
from nmt.train.command import check_same_setup
from nmt.train.warm_start import find_parent
from tests.conftest import FAST, assert_one_line_error, run_cli, train_args


def flat_model_config(config: dict) -> dict:
    """A Transformer run's config dict as nmt wrote it before each model family had its own section: every
    model field of those versions flat, the RNN's (which a Transformer ignored) included."""
    model = {key: value for key, value in config["model"].items() if key != "transformer"}
    rnn = {
        "rnn_cell": "gru",
        "hidden_size": 512,
        "bridge": "learned",
        "luong_score": "general",
        "input_feeding": True,
        "scale_scores": False,
    }
    flat = {
        key: value
        for key, value in config["model"]["transformer"].items()
        if key in OLD_MODEL_KEYS["transformer"]
    }
    return config | {"model": model | flat | rnn}


def test_a_run_written_before_the_model_sections_still_works(trained_run: Path, tmp_path: Path) -> None:
    """An older run directory: flat model keys in config.yaml and in its checkpoints. It loads as the same
    run, and resuming, warm starts, averaging and translating take it without a note."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    run = RunDir(copy)
    run.config.write_text(yaml.safe_dump(flat_model_config(yaml.safe_load(run.config.read_text()))))
    run.snapshot_dir.mkdir()
    for step, name in enumerate(["best", "last", "best", "best"]):
        checkpoint = load_checkpoint(trained_run / f"{name}.pt")
        checkpoint["config"] = flat_model_config(checkpoint["config"])
        save_checkpoint(run.snapshot(step) if step > 1 else run.checkpoint(name), checkpoint)
    assert "d_model" in load_checkpoint(run.checkpoint("last"))["config"]["model"]
    new = load_saved_config(RunDir(trained_run).config)
    assert load_saved_config(run.config) == new
    check_same_setup(run, new)  # --resume
    find_parent(new, copy)  # --init-from
    code, _, err = run_cli("average", str(copy), "--last", "2")
    assert code == 0 and "deprecated" not in err, err
    code, out, err = run_cli("translate", str(copy), "--checkpoint", "averaged", input="w1x2 w3x4\n")
    assert code == 0 and out.strip() and "deprecated" not in err, err


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
