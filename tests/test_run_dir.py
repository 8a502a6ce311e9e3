"""The run directory: its file names, loading a trained run, refusing files that do not belong together, and
its metrics."""

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from nmt.checkpoint import load_checkpoint, save_checkpoint
from nmt.errors import UserError
from nmt.run_dir import RunDir
from nmt.warm_start import find_parent
from tests.conftest import run_cli
from tests.test_transformer import old_layout


def test_run_refuses_a_checkpoint_from_another_vocabulary(trained_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    checkpoint["vocab"]["tgt_sha256"] = "0" * 64
    save_checkpoint(copy / "best.pt", checkpoint)
    with pytest.raises(UserError, match="another vocabulary"):
        RunDir(copy).load(torch.device("cpu"))


def test_run_without_checkpoint_is_reported(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="holds no checkpoint"):
        RunDir(tmp_path).load(torch.device("cpu"))


def test_run_loads_a_checkpoint_written_before_fused_projections(trained_run: Path, tmp_path: Path) -> None:
    """best.pt of an older nmt holds separate query and key/value projections of self-attention."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    checkpoint["model"] = old_layout(checkpoint["model"])
    save_checkpoint(copy / "best.pt", checkpoint)
    old, new = (
        RunDir(copy).load(torch.device("cpu"), "best"),
        RunDir(trained_run).load(torch.device("cpu"), "best"),
    )
    for name, tensor in new.model.state_dict().items():
        assert torch.equal(tensor, old.model.state_dict()[name]), name


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
    new = RunDir(trained_run).load_config()
    assert run.load_config() == new
    run.check_same_setup(new)  # --resume
    find_parent(new, copy)  # --init-from
    code, _, err = run_cli("average", str(copy), "--last", "2")
    assert code == 0 and "deprecated" not in err, err
    code, out, err = run_cli("translate", str(copy), "--checkpoint", "averaged", input="w1x2 w3x4\n")
    assert code == 0 and out.strip() and "deprecated" not in err, err


def test_metrics_append_read_and_forget_after_a_step(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)
    for step in (10, 20, 30):
        run_dir.append_metrics({"kind": "train", "step": step, "loss": 1.0 / step})
    with open(run_dir.metrics, "a") as handle:
        handle.write('{"kind": "tra')  # a line torn by a kill
    run_dir.forget_metrics_after(20)
    assert [record["step"] for record in run_dir.read_metrics()] == [10, 20]
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
