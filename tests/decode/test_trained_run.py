"""Loading a trained run for use: its model rebuilt from config, tokenizers and checkpoint, and files that do
not belong together refused."""

import shutil
from pathlib import Path

import pytest
import torch

from nmt.config.yaml_file import load_config, save_config
from nmt.data.tokenizer_training import train_sentencepiece
from nmt.decode.exported import META
from nmt.decode.trained_run import load_run
from nmt.errors import UserError
from nmt.run.checkpoint_io import load_checkpoint, save_checkpoint
from tests.conftest import assert_one_line_error, run_cli
from tests.models.test_transformer import old_layout


def test_run_refuses_a_checkpoint_from_another_vocabulary(trained_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    checkpoint = load_checkpoint(copy / "best.pt")
    checkpoint["vocab"]["tgt_sha256"] = "0" * 64
    save_checkpoint(copy / "best.pt", checkpoint)
    with pytest.raises(UserError, match="another vocabulary"):
        load_run(copy, torch.device("cpu"))


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


def _damage(kind: str, run: Path) -> list[str]:
    """Break a copy of a run directory; returns the fragments the error must name."""
    best = run / "best.pt"
    if kind == "no run directory":
        shutil.rmtree(run)
        return [str(run), "does not exist"]
    if kind == "a file instead of a run directory":
        shutil.rmtree(run)
        run.write_text("")
        return [str(run), "is a file"]
    if kind == "no checkpoint":
        best.unlink()
        (run / "last.pt").unlink()
        return [str(run), "holds no checkpoint"]
    if kind == "truncated checkpoint":
        best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
        return [str(best), "truncated or corrupted"]
    if kind == "empty checkpoint":
        best.write_bytes(b"")
        return [str(best), "truncated or corrupted"]
    if kind == "flipped bytes in the weights":
        data = bytearray(best.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
        best.write_bytes(bytes(data))
        return [str(best), "truncated or corrupted", "checksum"]
    if kind == "vocabulary of another run":
        text = [" ".join(f"w{i}x{j}" for j in range(8)) for i in range(300)]
        cfg = load_config(run / "config.yaml").tokenizer
        train_sentencepiece(cfg, text, run / "spm.model")  # the spm model of another corpus
        return [str(best), "another vocabulary"]
    if kind == "config of another model":
        cfg = load_config(run / "config.yaml", ["model.transformer.d_model=64"])
        save_config(cfg, run / "config.yaml")
        return [str(best), "does not match the model", "size mismatch"]
    if kind == "missing config":
        (run / "config.yaml").unlink()
        return [str(run), "config.yaml", "incomplete"]
    if kind == "missing sentencepiece model":
        (run / "spm.model").unlink()
        return [str(run / "spm.model"), "missing"]
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "no run directory",
        "a file instead of a run directory",
        "no checkpoint",
        "truncated checkpoint",
        "empty checkpoint",
        "flipped bytes in the weights",
        "vocabulary of another run",
        "config of another model",
        "missing config",
        "missing sentencepiece model",
    ],
)
def test_broken_run_directories_are_one_line(kind: str, trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    fragments = _damage(kind, run)
    assert_one_line_error(run_cli("translate", str(run), input="kalo\n"), *fragments)


def fake_export(tmp_path: Path) -> Path:
    """A directory that `nmt export` would have written, as nmt tells one apart: it holds nmt-export.json."""
    export = tmp_path / "ct2"
    export.mkdir()
    (export / META).write_text("{}")
    return export


@pytest.mark.parametrize("command", ["evaluate", "align", "plot-attention", "export"])
def test_commands_that_need_a_run_name_an_export_given_instead(
    command: str, trained_run: Path, tmp_path: Path
) -> None:
    export = fake_export(tmp_path)
    text = tmp_path / "text"
    text.write_text("kalo\n")
    args = {
        "evaluate": ["--src", str(text), "--ref", str(text)],
        "align": ["--src", str(text), "--tgt", str(text)],
        "plot-attention": ["--text", "kalo", "--out", str(tmp_path / "a.png")],
        "export": [str(tmp_path / "out")],
    }[command]
    result = run_cli(command, str(export), *args)
    assert_one_line_error(result, str(export), "is a CTranslate2 export", "not a run directory")


@pytest.mark.parametrize("command", ["translate", "serve"])
def test_a_run_and_an_export_together_are_refused_naming_both(
    command: str, trained_run: Path, tmp_path: Path
) -> None:
    export = fake_export(tmp_path)
    result = run_cli(command, str(trained_run), str(export), input="kalo\n")
    assert_one_line_error(result, f"{export} is a CTranslate2 export", f"{trained_run} is not", "not both")
