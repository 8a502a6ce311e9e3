"""The run directory: its file names, which checkpoint a run chose, its metrics, and run directories that
older versions wrote."""

import json
import shutil
from pathlib import Path

import yaml

from nmt.config.yaml_file import load_saved_config
from nmt.run.checkpoint_io import load_checkpoint, save_checkpoint
from nmt.run.directory import RunDir
from nmt.run.metrics import append_metrics, forget_metrics_after, read_metrics
from nmt.train.command import check_same_setup
from nmt.train.warm_start import find_parent
from tests.conftest import run_cli


def flat_model_config(config: dict) -> dict:
    """A Transformer run's config dict as nmt wrote it before each model family had its own section: every
    model field flat, the RNN's (which a Transformer ignored) included."""
    model = {key: value for key, value in config["model"].items() if key != "transformer"}
    rnn = {"rnn_cell": "gru", "hidden_size": 512, "bridge": "learned", "luong_score": "general",
           "input_feeding": True, "scale_scores": False}  # fmt: skip
    return config | {"model": model | config["model"]["transformer"] | rnn}


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
