"""Checkpoint files: atomic writes and safe loading."""

import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from nmt.atomic_files import atomic_write
from nmt.decode.trained_run import load_run
from nmt.errors import UserError
from nmt.run.checkpoint import vocabulary_record
from nmt.run.checkpoint_io import CheckpointWriter, load_checkpoint, save_checkpoint
from tests.conftest import ROOT, assert_one_line_error, run_cli

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


def test_an_interrupt_right_after_the_temporary_file_is_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands the moment the temporary file exists, before anything is written into it."""
    path, real_open = tmp_path / "c.pt", os.open
    save_checkpoint(path, {"model": {}, "config": CONFIG, "step": 1})

    def interrupted_open(name: object, *args: object, **kwargs: object) -> int:
        descriptor = real_open(name, *args, **kwargs)  # type: ignore[arg-type]
        if str(name).endswith(".tmp"):
            raise KeyboardInterrupt
        return descriptor

    monkeypatch.setattr(os, "open", interrupted_open)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"model": {}, "config": CONFIG, "step": 2})
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c.pt"] and load_checkpoint(path)["step"] == 1


SECOND_CTRL_C_WHILE_WRITING = """
import signal, sys, threading
from pathlib import Path
import torch
from nmt import interrupts
from nmt.run import checkpoint_io

writing, never = threading.Event(), threading.Event()

def stuck_save(payload, handle):  # half a checkpoint written, then the writer thread waits
    handle.write(b"half a checkpoint")
    handle.flush()
    writing.set()
    never.wait()

checkpoint_io.torch.save = stuck_save
writer, request = checkpoint_io.CheckpointWriter(), interrupts.StopRequest()
with interrupts.after_the_step(request):  # as in the training loop
    writer.save(Path(sys.argv[1]) / "last.pt", {"model": {}})
    writing.wait()
    signal.raise_signal(signal.SIGINT)  # the first Ctrl-C: stop after the step
    signal.raise_signal(signal.SIGINT)  # the second: stop at once
print("still running")
"""


def test_a_second_ctrl_c_while_the_background_writer_writes_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The second Ctrl-C ends the process at once (os._exit) while the writer thread is half-way through
    last.pt: its temporary file goes with it."""
    command = [sys.executable, "-c", SECOND_CTRL_C_WHILE_WRITING, str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 130 and done.stderr == "nmt: interrupted\n", done.stderr
    assert os.listdir(tmp_path) == []


class _Exploit:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("container", ["torch.save", "plain pickle"])
def test_malicious_pickle_is_refused(container: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path, payload = tmp_path / "evil.pt", {"model": _Exploit(), "config": CONFIG}
    with open(path, "wb") as handle:
        if container == "torch.save":
            torch.save(payload, handle, pickle_module=pickle)
        else:
            pickle.dump(payload, handle)
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


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda c: c.update(model=[1, 2]), "'model' is a list"),
        (lambda c: c.update(model={"w": "not a tensor"}), "parameter names to tensors"),
        (lambda c: c.update(config={"model": {}}), "config"),
    ],
)
def test_a_malformed_best_checkpoint_is_one_line(
    trained_run: Path, tmp_path: Path, change: Callable[[dict], None], fragment: str
) -> None:
    run = Path(shutil.copytree(trained_run, tmp_path / "copy"))
    checkpoint = torch.load(run / "best.pt", weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, run / "best.pt")
    assert_one_line_error(run_cli("translate", str(run), input="a b c\n"), "best.pt", fragment)
