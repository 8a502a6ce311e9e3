"""Checkpoint files: atomic writes and safe loading."""

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from nmt.atomic_files import atomic_write
from nmt.decode.trained_run import load_run
from nmt.errors import UserError
from nmt.run.checkpoint import vocabulary_record
from nmt.run.checkpoint_io import CheckpointWriter, load_checkpoint, save_checkpoint

CONFIG = {"data": {}, "model": {}, "train": {}}  # the sections a checkpoint's config must have


def test_round_trip(tmp_path: Path) -> None:
    payload = {"model": {"w": torch.arange(4.0)}, "config": CONFIG | {"a": [1, 2]}, "step": 3}
    save_checkpoint(tmp_path / "c.pt", payload)
    loaded = load_checkpoint(tmp_path / "c.pt")
    assert torch.equal(loaded["model"]["w"], payload["model"]["w"]) and loaded["config"]["a"] == [1, 2]


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"model": {}, "config": CONFIG, "step": 1})

    def crash(handle: object) -> None:
        handle.write(b"half a checkpoint")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(UserError, match=r"cannot write .*c\.pt: disk full"):
        atomic_write(path, crash)
    assert load_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["c.pt"]  # no temporary file left behind


def test_the_background_writer_saves_what_it_was_given_in_order(tmp_path: Path) -> None:
    writer, weights = CheckpointWriter(), torch.zeros(3)
    writer.save(tmp_path / "a.pt", {"model": {"w": weights}, "config": CONFIG})
    weights += 1  # training goes on while the file is written: the file keeps the values handed over
    writer.later(lambda: (tmp_path / "a.pt").rename(tmp_path / "b.pt"))  # runs after the write
    writer.close()
    assert torch.equal(load_checkpoint(tmp_path / "b.pt")["model"]["w"], torch.zeros(3))
    assert not (tmp_path / "a.pt").exists()


def test_a_failed_background_write_is_raised_by_wait_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, writer = tmp_path / "c.pt", CheckpointWriter()
    writer.save(path, {"model": {}, "config": CONFIG, "step": 1})
    writer.wait()

    def disk_full(self: object, *args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(torch.serialization, "_save", disk_full)
    writer.save(path, {"model": {}, "config": CONFIG, "step": 2})
    with pytest.raises(UserError, match=r"cannot write .*c\.pt: disk full"):
        writer.close()
    assert load_checkpoint(path)["step"] == 1


class _Exploit:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch pwned",))


def test_malicious_pickle_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    with open(path, "wb") as handle:
        torch.save({"model": _Exploit(), "config": CONFIG}, handle, pickle_module=pickle)
    with pytest.raises(UserError, match="unsafe"):
        load_checkpoint(path)
    assert not (tmp_path / "pwned").exists()


def test_truncated_checkpoint_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"model": {"w": torch.randn(1000)}, "config": CONFIG})
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(UserError, match="truncated or corrupted"):
        load_checkpoint(path)


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
