"""Checkpoints: atomic writes, safe loading, and refusing files that do not belong to the run."""

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from nmt.checkpoint import load_checkpoint, load_run, save_checkpoint, vocabulary_record
from nmt.errors import UserError
from nmt.files import atomic_write


def test_round_trip(tmp_path: Path) -> None:
    payload = {"model": {"w": torch.arange(4.0)}, "config": {"a": [1, 2]}, "step": 3}
    save_checkpoint(tmp_path / "c.pt", payload)
    loaded = load_checkpoint(tmp_path / "c.pt")
    assert torch.equal(loaded["model"]["w"], payload["model"]["w"]) and loaded["config"] == {"a": [1, 2]}


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"model": {}, "config": {}, "step": 1})

    def crash(handle: object) -> None:
        handle.write(b"half a checkpoint")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(UserError, match=r"cannot write .*c\.pt: disk full"):
        atomic_write(path, crash)
    assert load_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["c.pt"]  # no temporary file left behind


class _Exploit:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch pwned",))


def test_malicious_pickle_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    with open(path, "wb") as handle:
        torch.save({"model": _Exploit(), "config": {}}, handle, pickle_module=pickle)
    with pytest.raises(UserError, match="unsafe"):
        load_checkpoint(path)
    assert not (tmp_path / "pwned").exists()


def test_truncated_checkpoint_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"model": {"w": torch.randn(1000)}, "config": {}})
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(UserError, match="truncated or corrupted"):
        load_checkpoint(path)


def test_run_refuses_a_checkpoint_from_another_vocabulary(trained_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    checkpoint["vocab"]["tgt_sha256"] = "0" * 64
    save_checkpoint(copy / "best.pt", checkpoint)
    with pytest.raises(UserError, match="another vocabulary"):
        load_run(copy, torch.device("cpu"))


def test_checkpoints_of_older_runs_still_load(trained_run: Path, tmp_path: Path) -> None:
    """Checkpoints written before the fingerprint covered the pieces recorded the model file's sha256."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    tokenizers = load_run(copy, torch.device("cpu")).tokenizers
    assert checkpoint["vocab"] == vocabulary_record(tokenizers) != vocabulary_record(tokenizers, legacy=True)
    checkpoint["vocab"] = vocabulary_record(tokenizers, legacy=True)
    save_checkpoint(copy / "best.pt", checkpoint)
    load_run(copy, torch.device("cpu"))


def test_run_without_checkpoint_is_reported(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="holds no checkpoint"):
        load_run(tmp_path, torch.device("cpu"))
