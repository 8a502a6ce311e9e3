"""Loading a trained run for use: its model rebuilt from config, tokenizers and checkpoint, and files that do
not belong together refused."""

import shutil
from pathlib import Path

import pytest
import torch

from nmt.decode.trained_run import load_run
from nmt.errors import UserError
from nmt.run.checkpoint_io import load_checkpoint, save_checkpoint
from tests.models.test_transformer import old_layout


def test_run_refuses_a_checkpoint_from_another_vocabulary(trained_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    checkpoint["vocab"]["tgt_sha256"] = "0" * 64
    save_checkpoint(copy / "best.pt", checkpoint)
    with pytest.raises(UserError, match="another vocabulary"):
        load_run(copy, torch.device("cpu"))


def test_run_without_checkpoint_is_reported(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="holds no checkpoint"):
        load_run(tmp_path, torch.device("cpu"))


def test_run_loads_a_checkpoint_written_before_fused_projections(trained_run: Path, tmp_path: Path) -> None:
    """best.pt of an older nmt holds separate query and key/value projections of self-attention."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    checkpoint["model"] = old_layout(checkpoint["model"])
    save_checkpoint(copy / "best.pt", checkpoint)
    old, new = (
        load_run(copy, torch.device("cpu"), "best"),
        load_run(trained_run, torch.device("cpu"), "best"),
    )
    for name, tensor in new.model.state_dict().items():
        assert torch.equal(tensor, old.model.state_dict()[name]), name
